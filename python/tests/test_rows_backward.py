"""The row-wise backward ops (Graph.*_backward) against torch autograd in f64, on every
available device (skipped without torch)."""

import numpy as np
import pytest

from conftest import run_graph

torch = pytest.importorskip("torch")
f32 = np.float32


def _grads(fn, arrays, dy):
    """d sum(fn(*arrays) * dy) / d array, for each array, by torch autograd in f64."""
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    (fn(*ts) * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    return [t.grad.numpy() for t in ts]


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis", [1, 2])
def test_layer_norm_backward(device, rng, axis):
    x = rng.standard_normal((3, 4, 5)).astype(f32)
    gamma = rng.uniform(0.5, 1.5, x.shape[axis:]).astype(f32)
    dy = rng.standard_normal(x.shape).astype(f32)
    dx, dg, db = run_graph(lambda g, x_, g_, dy_: g.layer_norm_backward(x_, dy_, g_, axis=axis),
                           {"x": x, "gamma": gamma, "dy": dy}, device)
    want = _grads(lambda x_, g_, b_: torch.nn.functional.layer_norm(x_, x.shape[axis:], g_, b_),
                  [x, gamma, np.zeros_like(gamma)], dy)
    for got, w in zip((dx, dg, db), want):
        _close(got, w)


def test_rms_norm_backward_without_gamma(device, rng):
    x = rng.standard_normal((6, 8)).astype(f32)
    dy = rng.standard_normal(x.shape).astype(f32)
    dx, dg = run_graph(lambda g, x_, dy_: g.rms_norm_backward(x_, dy_, eps=1e-6),
                       {"x": x, "dy": dy}, device)
    ones = np.ones(8, f32)
    want = _grads(lambda x_, g_: x_ * torch.rsqrt((x_ * x_).mean(-1, keepdim=True) + 1e-6) * g_,
                  [x, ones], dy)
    _close(dx, want[0])
    _close(dg, want[1])


@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward_middle_axis(device, rng, log):
    x = rng.standard_normal((2, 7, 3)).astype(f32)
    dy = rng.standard_normal(x.shape).astype(f32)

    def build(g, x_, dy_):
        y = g.log_softmax(x_, 1) if log else g.softmax(x_, 1)
        return g.softmax_backward(y, dy_, 1, log_softmax=log)

    (dx,) = run_graph(build, {"x": x, "dy": dy}, device)
    fn = torch.log_softmax if log else torch.softmax
    _close(dx, _grads(lambda x_: fn(x_, 1), [x], dy)[0])


def test_rope_backward_is_the_transposed_rotation(device, rng):
    x = rng.standard_normal((2, 3, 2, 8)).astype(f32)
    ang = rng.uniform(-3, 3, (3, 3)).astype(f32)  # partial rotary: n_rot 6 of 8
    cos, sin = np.cos(ang).astype(f32), np.sin(ang).astype(f32)
    dy = rng.standard_normal(x.shape).astype(f32)
    (dx,) = run_graph(lambda g, dy_, c_, s_: g.rope_backward(dy_, c_, s_, 8, n_rot=6),
                      {"dy": dy, "cos": cos, "sin": sin}, device)

    def rope(x_):  # NeoX over the first 6 dims
        c, s = torch.tensor(cos)[None, :, None, :].double(), torch.tensor(sin)[None, :, None, :].double()
        x1, x2, rest = x_[..., :3], x_[..., 3:6], x_[..., 6:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], -1)

    _close(dx, _grads(rope, [x], dy)[0])


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_backward(device, rng, exclusive, reverse):
    x = rng.standard_normal((3, 5)).astype(f32)
    dy = rng.standard_normal(x.shape).astype(f32)
    (dx,) = run_graph(lambda g, dy_: g.cumsum_backward(dy_, 1, exclusive, reverse),
                      {"dy": dy}, device)

    def cumsum(x_):
        v = x_.flip(1) if reverse else x_
        c = v.cumsum(1) - (v if exclusive else 0)
        return c.flip(1) if reverse else c

    _close(dx, _grads(cumsum, [x], dy)[0])
