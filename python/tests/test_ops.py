"""Builder + compile + run against numpy, op by op, on every available device."""

import math

import numpy as np
import pytest

import rlx
from conftest import run_graph

f32 = np.float32
_erf = np.vectorize(math.erf)


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _layer_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def _rms_norm(x, gamma, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * gamma


def _group_norm(x, groups, eps):  # x [N, C, ...], no affine
    n = x.shape[0]
    g = x.reshape(n, groups, -1)
    mu = g.mean(-1, keepdims=True)
    var = ((g - mu) ** 2).mean(-1, keepdims=True)
    return ((g - mu) / np.sqrt(var + eps)).reshape(x.shape)


def _lrn(x, size, alpha, beta, bias):  # ONNX: window (size-1)//2 before, the rest after
    sq = np.pad(x * x, ((0, 0), ((size - 1) // 2, size // 2)) + ((0, 0),) * (x.ndim - 2))
    s = sum(sq[:, i:i + x.shape[1]] for i in range(size))
    return x / (bias + alpha / size * s) ** beta


def _attention_causal(q, k, v):  # BSHD
    qh, kh, vh = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    s = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    sq, sk = s.shape[-2:]
    keep = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + sk - sq
    s = np.where(keep, s, -np.inf)
    return (_softmax(s) @ vh).transpose(0, 2, 1, 3)


def _attention_backward_causal(q, k, v, dy):  # BSHD; [dq, dk, dv] written out by hand
    qh, kh, vh, dh = (t.transpose(0, 2, 1, 3).astype(np.float64) for t in (q, k, v, dy))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = qh @ kh.transpose(0, 1, 3, 2) * scale
    sq, sk = s.shape[-2:]
    keep = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + sk - sq
    p = _softmax(np.where(keep, s, -np.inf))
    dp = dh @ vh.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    grads = [ds @ kh * scale, ds.transpose(0, 1, 3, 2) @ qh * scale, p.transpose(0, 1, 3, 2) @ dh]
    return [g.transpose(0, 2, 1, 3).astype(f32) for g in grads]


def _rope_neox(x, cos, sin):  # x [B,S,H,D], cos/sin [S, D/2]
    half = x.shape[-1] // 2
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def _attention_gqa_bias(q, k, v, bias):  # BHSD, one kv head, additive bias
    k, v = (np.repeat(t, q.shape[1] // t.shape[1], axis=1) for t in (k, v))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]) + bias
    return _softmax(s) @ v


def _rope_gptj(x, cos, sin):  # pairs (2i, 2i+1)
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = x1 * c - x2 * s, x2 * c + x1 * s
    return out


def _a(*shape, lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed + len(shape)).uniform(lo, hi, shape).astype(f32)


A, B = _a(3, 4), _a(3, 4, seed=7)
POS = _a(3, 4, lo=0.1, hi=3.0)
M, N = _a(2, 3, 5), _a(5, 4, seed=3)
W_BIAS = _a(4, seed=9)
IDX = np.array([[2, 0], [1, 3]], np.int64)

# name: (build(g, *inputs), numpy reference(*inputs), inputs, tolerance)
CASES = {
    "add": (lambda g, a, b: a + b, lambda a, b: a + b, [A, B], 1e-6),
    "sub": (lambda g, a, b: a - b, lambda a, b: a - b, [A, B], 1e-6),
    "mul": (lambda g, a, b: a * b, lambda a, b: a * b, [A, B], 1e-6),
    "div": (lambda g, a, b: a / b, lambda a, b: a / b, [A, POS], 1e-5),
    "pow": (lambda g, a, b: a ** b, lambda a, b: a ** b, [POS, B], 1e-4),
    "maximum": (lambda g, a, b: g.maximum(a, b), np.maximum, [A, B], 0),
    "minimum": (lambda g, a, b: g.minimum(a, b), np.minimum, [A, B], 0),
    "scalars": (lambda g, a: 1.0 - a * 2.0 + 3.0 / (a * a + 1.0),
                lambda a: 1 - a * 2 + 3 / (a * a + 1), [A], 1e-5),
    "broadcast": (lambda g, a, b: a + b, lambda a, b: a + b, [A, _a(1, 4)], 1e-6),
    "compare_where": (lambda g, a, b: g.where(a < b, a, b * 2.0),
                      lambda a, b: np.where(a < b, a, b * 2), [A, B], 0),
    "compare_ge": (lambda g, a, b: a >= b, lambda a, b: a >= b, [A, B], 0),
    "eq": (lambda g, a: a.round().eq(1.0), lambda a: np.round(a) == 1, [A], 0),
    "relu": (lambda g, a: a.relu(), lambda a: np.maximum(a, 0), [A], 0),
    "sigmoid": (lambda g, a: a.sigmoid(), lambda a: 1 / (1 + np.exp(-a)), [A], 1e-5),
    "tanh": (lambda g, a: a.tanh(), np.tanh, [A], 1e-5),
    "exp": (lambda g, a: a.exp(), np.exp, [A], 1e-5),
    "log": (lambda g, a: a.log(), np.log, [POS], 1e-5),
    "sqrt": (lambda g, a: a.sqrt(), np.sqrt, [POS], 1e-5),
    "rsqrt": (lambda g, a: a.rsqrt(), lambda a: 1 / np.sqrt(a), [POS], 1e-5),
    "neg_abs": (lambda g, a: abs(-a), np.abs, [A], 0),
    "gelu": (lambda g, a: a.gelu(), lambda a: 0.5 * a * (1 + _erf(a / math.sqrt(2))), [A], 1e-5),
    "gelu_approx": (lambda g, a: a.gelu_approx(),
                    lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                     * (a + 0.044715 * a ** 3))), [A], 1e-4),
    "silu": (lambda g, a: a.silu(), lambda a: a / (1 + np.exp(-a)), [A], 1e-5),
    "trig": (lambda g, a: a.sin() + a.cos() + a.atan() + (a * 0.5).tan(),
             lambda a: np.sin(a) + np.cos(a) + np.arctan(a) + np.tan(a * 0.5), [A], 1e-4),
    "matmul": (lambda g, m, n: m @ n, lambda m, n: m @ n, [M, N], 1e-5),
    "matmul_transposed": (lambda g, a, b: g.matmul(a, b, transpose_b=True),
                          lambda a, b: a @ b.T, [A, B], 1e-5),
    "fused_matmul_bias_act": (
        lambda g, m, n: g.fused_matmul_bias_act(m, n, g.constant(W_BIAS), act="relu"),
        lambda m, n: np.maximum(m @ n + W_BIAS, 0), [M, N], 1e-5),
    "sum_all": (lambda g, m: m.sum(), lambda m: m.sum(), [M], 1e-5),
    "mean_axes": (lambda g, m: m.mean(axis=(0, 2), keepdims=True),
                  lambda m: m.mean(axis=(0, 2), keepdims=True), [M], 1e-5),
    "max_min_prod": (lambda g, m: [m.max(axis=1), m.min(axis=-1), m.prod(axis=0)],
                     lambda m: [m.max(1), m.min(-1), m.prod(0)], [M], 1e-5),
    "argmax_argmin": (lambda g, m: [m.argmax(1), m.argmin(2, keepdims=True)],
                      lambda m: [m.argmax(1), m.argmin(2)[..., None]], [M], 0),
    "softmax": (lambda g, m: m.softmax(-1), _softmax, [M], 1e-5),
    "log_softmax": (lambda g, m: m.log_softmax(1), lambda m: np.log(_softmax(m, 1)), [M], 1e-5),
    "cumsum": (lambda g, a: [a.cumsum(1), a.cumsum(1, exclusive=True, reverse=True)],
               lambda a: [np.cumsum(a, 1),
                          np.flip(np.cumsum(np.flip(a, 1), 1), 1) - a], [A], 1e-5),
    "topk": (lambda g, a: list(a.topk(2, axis=1)),
             lambda a: [-np.sort(-a, 1)[:, :2], np.argsort(-a, 1, kind="stable")[:, :2]],
             [A], 0),
    "layer_norm": (lambda g, a, b: g.layer_norm(a, g.constant(W_BIAS), b[0]),
                   lambda a, b: _layer_norm(a, W_BIAS, b[0]), [A, B], 1e-4),
    "rms_norm": (lambda g, a: g.rms_norm(a, g.constant(W_BIAS)),
                 lambda a: _rms_norm(a, W_BIAS), [A], 1e-4),
    "fused_residual_layer_norm": (
        lambda g, a, b: list(g.fused_residual_layer_norm(a, b, eps=1e-5)),
        lambda a, b: [_layer_norm(a + b, 1, 0), a + b], [A, B], 1e-4),
    "fused_residual_rms_norm": (
        lambda g, a, b: list(g.fused_residual_rms_norm(a, b, gamma=g.constant(W_BIAS))),
        lambda a, b: [_rms_norm(a + b, W_BIAS), a + b], [A, B], 1e-4),
    "transpose_reshape": (lambda g, m: m.transpose(2, 0, 1).reshape(-1, 3),
                          lambda m: m.transpose(2, 0, 1).reshape(-1, 3), [M], 0),
    "T": (lambda g, a: a.T, lambda a: a.T, [A], 0),
    "slicing": (lambda g, m: m[1, :, 2:4], lambda m: m[1, :, 2:4], [M], 0),
    "narrow_concat": (lambda g, a, b: g.concat([a.narrow(1, 1, 2), b], axis=1),
                      lambda a, b: np.concatenate([a[:, 1:3], b], 1), [A, B], 0),
    "expand_reverse": (lambda g, a: a.reshape(1, 3, 4).expand([2, 3, 4]).reverse([1, 2]),
                       lambda a: np.broadcast_to(a, (2, 3, 4))[:, ::-1, ::-1], [A], 0),
    "gather": (lambda g, a: a.gather(IDX, axis=1), lambda a: np.take(a, IDX, axis=1), [A], 0),
    "scatter_add": (
        lambda g, a, b: g.scatter_add(a, g.constant(np.array([[0, 0, 1, 1]] * 3, np.int64)),
                                      b, axis=1),
        lambda a, b: a + np.stack([np.array([r[0] + r[1], r[2] + r[3], 0, 0]) for r in b]),
        [A, B], 1e-6),
    "cast_i32": (lambda g, a: (a * 3.0).astype("i32"), lambda a: (a * 3).astype(np.int32), [A], 0),
    "attention_causal": (
        lambda g, q, k, v: g.attention(q, k, v, num_heads=2, head_dim=4, mask="causal"),
        _attention_causal, [_a(1, 3, 2, 4), _a(1, 3, 2, 4, seed=1), _a(1, 3, 2, 4, seed=2)],
        1e-5),
    "attention_backward_causal": (
        lambda g, q, k, v, dy: list(g.attention_backward(
            q, k, v, g.attention(q, k, v, num_heads=2, head_dim=4, mask="causal"), dy,
            num_heads=2, head_dim=4, mask="causal")),
        _attention_backward_causal,
        [_a(1, 3, 2, 4), _a(1, 5, 2, 4, seed=1), _a(1, 5, 2, 4, seed=2), _a(1, 3, 2, 4, seed=3)],
        1e-5),
    "attention_gqa_bias": (
        lambda g, q, k, v, b: g.attention(q, k, v, num_heads=2, num_kv_heads=1, head_dim=4,
                                          layout="bhsd", mask="bias", mask_tensor=b),
        _attention_gqa_bias, [_a(1, 2, 3, 4), _a(1, 1, 5, 4, seed=1), _a(1, 1, 5, 4, seed=2),
                              _a(3, 5, seed=3)], 1e-5),
    "rope_gptj": (lambda g, x, c, s: g.rope(x, c, s, head_dim=4, style="gptj"),
                  _rope_gptj, [_a(1, 3, 2, 4), _a(3, 2, seed=4), _a(3, 2, seed=5)], 1e-5),
    "rope_neox": (lambda g, x, c, s: g.rope(x, c, s, head_dim=4),
                  _rope_neox, [_a(1, 3, 2, 4), _a(3, 2, seed=4), _a(3, 2, seed=5)], 1e-5),
    "sample_greedy": (lambda g, a: g.sample(a, temperature=0.0), lambda a: a.argmax(-1), [A], 0),
    "pool_max_2d": (lambda g, x: g.pool(x, [2, 2], strides=[2, 2]),
                    lambda x: x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)), [_a(1, 2, 4, 4)], 0),
    "pool_avg_1d_pads": (
        lambda g, x: g.pool(x, [3], kind="avg", pads=[1, 1], count_include_pad=True),
        lambda x: np.stack([np.pad(x, ((0, 0), (0, 0), (1, 1)))[..., i:i + 3].mean(-1)
                            for i in range(5)], -1), [_a(1, 2, 5)], 1e-6),
    "pad_reflect": (lambda g, x: g.pad(x, [0, 2, 0, 1], mode="reflect"),
                    lambda x: np.pad(x, ((0, 0), (2, 1)), mode="reflect"), [_a(2, 4)], 0),
    "pad_wrap": (lambda g, x: g.pad(x, [1, 4, 0, 2], mode="wrap"),
                 lambda x: np.pad(x, ((1, 0), (4, 2)), mode="wrap"), [_a(2, 4)], 0),
    "pad_constant_crop": (lambda g, x: g.pad(x, [1, -1, 0, 2], value=2.5),
                          lambda x: np.pad(x[:, 1:], ((1, 0), (0, 2)), constant_values=2.5),
                          [_a(2, 4)], 0),
    "depth_to_space_crd": (
        lambda g, x: g.depth_to_space(x, 2, mode="crd"),
        lambda x: x.reshape(1, 2, 2, 2, 3, 3).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 6, 6),
        [_a(1, 8, 3, 3)], 0),
    "resize_nearest_2x": (lambda g, x: g.resize(x, scales=[1, 1, 2, 3]),
                          lambda x: x.repeat(2, axis=2).repeat(3, axis=3), [_a(1, 2, 3, 4)], 0),
    "resize_linear_align_corners": (
        lambda g, x: g.resize(x, [2, 7], mode="linear", coord="align_corners"),
        lambda x: np.stack([np.interp(np.linspace(0, 4, 7), np.arange(5), r) for r in x]),
        [_a(2, 5)], 1e-6),
    "grid_sample_identity": (
        lambda g, x, grid: g.grid_sample(x, grid, align_corners=True),
        lambda x, grid: x,
        [_a(1, 2, 3, 4), np.stack(np.meshgrid(np.linspace(-1, 1, 4), np.linspace(-1, 1, 3)),
                                  -1)[None].astype(np.float32)], 1e-6),
    "conv_1d_bias_relu": (
        lambda g, x, w, b: g.conv(x, w, b, strides=[2], pads=[1, 0], act="relu"),
        lambda x, w, b: np.maximum(
            np.stack([np.einsum("nck,ock->no", np.pad(x, ((0, 0), (0, 0), (1, 0)))[..., 2 * i:2 * i + 3], w)
                      for i in range(3)], -1) + b[None, :, None], 0),
        [_a(2, 3, 6), _a(4, 3, 3, seed=1), _a(4, seed=2)], 1e-5),
    "im2col_2d": (
        lambda g, x: g.im2col(x, [2, 2]),
        lambda x: np.stack([x[:, :, i:i + 2, j:j + 2].reshape(1, -1)
                            for i in range(2) for j in range(2)], -1),
        [_a(1, 2, 3, 3)], 0),
    "group_norm": (lambda g, x: g.group_norm(x, 2, eps=1e-5),
                   lambda x: _group_norm(x, 2, 1e-5), [_a(2, 4, 3, 2)], 1e-4),
    "channel_norm": (lambda g, x: g.channel_norm(x, eps=1e-6),
                     lambda x: _group_norm(x.transpose(0, 2, 1), 5, 1e-6).transpose(0, 2, 1),
                     [_a(2, 3, 5)], 1e-4),
    "batch_norm": (
        lambda g, x: g.batch_norm(x, g.constant(np.array([1.5, -1, 2], f32)),
                                  g.constant(np.array([0.5, 0, -1], f32)),
                                  g.constant(np.array([0.1, 0.2, -0.3], f32)),
                                  g.constant(np.array([1.0, 0.5, 2.0], f32)), eps=1e-5),
        lambda x: (x - np.array([0.1, 0.2, -0.3], f32)[:, None])
        / np.sqrt(np.array([1.0, 0.5, 2.0], f32)[:, None] + 1e-5)
        * np.array([1.5, -1, 2], f32)[:, None] + np.array([0.5, 0, -1], f32)[:, None],
        [_a(2, 3, 4)], 1e-5),
    "lrn": (lambda g, x: g.lrn(x, 4, alpha=0.1, beta=0.75, bias=2.0),
            lambda x: _lrn(x.astype(np.float64), 4, 0.1, 0.75, 2.0), [_a(2, 5, 3)], 1e-5),
    "conv_backward_weight_1d": (
        lambda g, x, dy, w: g.conv_backward_weight(x, dy, w, strides=[2], pads=[1, 0]),
        lambda x, dy, w: np.einsum(
            "ncik,noi->ock", np.stack([np.pad(x, ((0, 0), (0, 0), (1, 0)))[..., 2 * i:2 * i + 3]
                                       for i in range(3)], 2), dy),
        [_a(2, 3, 6), _a(2, 4, 3, seed=1), _a(4, 3, 3, seed=2)], 1e-5),
    "pool_backward_max_2d": (
        lambda g, x, dy: g.pool_backward(x, dy, [2, 2], strides=[2, 2]),
        lambda x, dy: (x == x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)).repeat(2, 2).repeat(2, 3))
        * dy.repeat(2, 2).repeat(2, 3), [_a(1, 2, 4, 4), _a(1, 2, 2, 2, seed=1)], 0),
    "grouped_matmul_top2": (
        lambda g, x, w: g.grouped_matmul(x, w, g.constant(np.array([[2, 0], [1, 2], [0, 0]],
                                                                   np.int64))),
        lambda x, w: np.einsum("tk,tjnk->tjn", x,
                               w[np.array([[2, 0], [1, 2], [0, 0]])]),
        [_a(3, 4), _a(3, 5, 4, seed=1)], 1e-5),
    "space_to_depth": (
        lambda g, x: g.space_to_depth(x, 2),
        lambda x: x.reshape(1, 2, 2, 2, 2, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 8, 2, 2),
        [_a(1, 2, 4, 4)], 0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_numpy(case, device):
    build, ref, arrays, tol = CASES[case]
    inputs = {f"in{i}": a for i, a in enumerate(arrays)}
    got = run_graph(build, inputs, device)
    want = ref(*arrays)
    want = want if isinstance(want, list) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, case
        if w.dtype == np.bool_ or w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w.astype(g.dtype))
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * 10 if tol else 1e-6)


def test_every_builder_has_a_graph_method():
    """Each rlx_graph_add_* in the C API has a Graph method (a missing wrapper fails)."""
    import rlx._capi as capi
    names = [n[len("rlx_graph_add_"):] for n in capi._PROTOTYPES if n.startswith("rlx_graph_add_")]
    missing = [n for n in names if not callable(getattr(rlx.Graph, n, None))]
    assert not missing
    for act in rlx.Activation:
        if act is not rlx.Activation.NONE:
            assert callable(getattr(rlx.Graph, act.name.lower()))
