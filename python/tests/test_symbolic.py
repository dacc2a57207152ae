"""Symbolic dims: one compiled graph run at two sizes, and sizes bound at compile."""

import numpy as np
import pytest

import rlx


def _graph():
    g = rlx.Graph()
    x = g.input("x", "f32", ["batch", 4])
    w = g.param("w", "f32", [4, 3])
    y = (x @ w).softmax(-1).set_name("probs")
    total = y.sum(axis=0)
    g.set_outputs(y, total)
    return g


def test_shapes_report_symbols_by_name():
    with _graph() as g:
        assert g.symbols == ["batch"]
        assert g.inputs[0].shape == ("batch", 4)
        assert g.outputs[0].name == "probs" and g.outputs[0].shape == ("batch", 3)
        assert g.outputs[1].shape == (3,)
        assert g.symbol("batch") == -1  # rlx's code for the first symbol
        exe = g.compile("cpu")
    assert exe.inputs[0].shape == ("batch", 4)
    assert [o.name for o in exe.outputs] == ["probs", None]


def test_two_sizes(device, rng):
    w = rng.standard_normal((4, 3)).astype(np.float32)
    with _graph() as g:
        exe = g.compile(device)
    exe.set_param("w", w)
    for batch in (2, 7):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        probs, total = exe.run(x=x)
        e = np.exp(x @ w - (x @ w).max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
        assert probs.shape == (batch, 3) and exe.output_type(0)[1] == (batch, 3)
        np.testing.assert_allclose(probs, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(total, want.sum(0), rtol=1e-5)


def test_symbols_bound_at_compile():
    with _graph() as g:
        exe = g.compile("cpu", symbols={"batch": 5})
    exe.set_param("w", np.ones((4, 3), np.float32))
    assert exe.output_type(0)[1] == (5, 3)
    (probs, _) = exe.run(x=np.zeros((5, 4), np.float32))
    np.testing.assert_allclose(probs, np.full((5, 3), 1 / 3), rtol=1e-6)
    with pytest.raises(rlx.InvalidArgumentError, match="x"):
        exe.run(x=np.zeros((6, 4), np.float32))  # batch is 5 now


def test_reshape_with_symbolic_dims():
    with rlx.Graph() as g:
        x = g.input("x", "f32", ["n", 6])
        g.set_outputs(x.reshape("n", 2, 3).transpose(0, 2, 1).reshape("n", -1))
        exe = g.compile("cpu")
    x = np.arange(18, dtype=np.float32).reshape(3, 6)
    (y,) = exe.run(x=x)
    np.testing.assert_array_equal(y, x.reshape(3, 2, 3).transpose(0, 2, 1).reshape(3, -1))


def test_active_extent():
    with rlx.Graph() as g:
        x = g.input("x", "f32", ["rows", 2])
        g.set_outputs(x * 2.0)
        exe = g.compile("cpu", symbols={"rows": 4}, extent_symbol="rows")
    exe.set_input("x", np.arange(8, dtype=np.float32).reshape(4, 2))
    exe.set_active_extent(2)
    (y,) = exe.run()
    assert y.shape[0] in (2, 4)  # the leading rows are the ones computed
    np.testing.assert_array_equal(y[:2], np.arange(4, dtype=np.float32).reshape(2, 2) * 2)
    with pytest.raises(rlx.RlxError):
        exe.set_active_extent(5)  # above the compiled bound


def test_dim_expressions_show_as_strings(device, rng):
    with rlx.Graph() as g:
        x = g.input("x", "f32", ["B", "T", 4])
        bt = g.dim_expr("*", "B", "T")
        assert g.dim_expr("*", "T", "B") == bt  # interned
        assert g.symbol_name(bt) == "B*T" and "B*T" in g.symbols
        y = x.reshape(bt, 4)
        g.set_outputs(y)
        assert g.outputs[0].shape == ("B*T", 4)
        with pytest.raises(ValueError):
            g.dim_expr("^", "B", "T")
        exe = g.compile(device)
    for b, t in ((1, 3), (2, 5)):
        xs = rng.standard_normal((b, t, 4)).astype(np.float32)
        (out,) = exe.run(x=xs)
        np.testing.assert_array_equal(out, xs.reshape(b * t, 4))


def test_dynamic_onnx_export_runs_at_two_sizes(device):
    import pathlib
    data = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "dynamic"
    if not (data / "gpt.onnx").exists():
        pytest.skip("tests/data/dynamic is not in this checkout")
    with rlx.load_onnx(data / "gpt.onnx") as g:
        assert g.inputs[0].shape == ("B", "T")
        exe = g.compile(device)
    for size in ("1x5", "3x16"):
        ids = np.load(data / ("gpt_ids_%s.npy" % size))
        want = np.load(data / ("gpt_out_%s.npy" % size))
        (got,) = exe.run(ids=ids)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
