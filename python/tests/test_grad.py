"""Graph.grad (rlx_graph_grad) through the Python package."""

import numpy as np
import pytest

import rlx
from conftest import run_graph


def test_grad_of_a_small_mlp_matches_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3))
    w = rng.standard_normal((3, 2))

    def build(g, x_t, w_t):
        y = g.activation("tanh", g.matmul(x_t, w_t))
        loss = g.reduce("sum", y * y)
        return [loss] + g.grad(loss, [x_t, w_t])

    loss, dx, dw = run_graph(build, {"x": x, "w": w}, reference=True)
    y = np.tanh(x @ w)
    dz = 2 * y * (1 - y * y)
    np.testing.assert_allclose(loss, (y * y).sum(), rtol=1e-12)
    np.testing.assert_allclose(dx, dz @ w.T, rtol=1e-12)
    np.testing.assert_allclose(dw, x.T @ dz, rtol=1e-12)


def test_grad_with_a_seed_and_an_unreached_wrt():
    x = np.array([1.0, -2.0, 0.5])

    def build(g, x_t):
        z = g.input("z", np.float64, (2,))
        seed = g.constant(np.array([2.0, 3.0, -1.0]))
        gx, gz = g.grad(x_t * x_t, [x_t, z], seed=seed)
        return [gx, gz]

    with rlx.Graph() as g:
        x_t = g.input("x", np.float64, x.shape)
        gx, gz = build(g, x_t)
        g.set_outputs([gx, gz])
        exe = g.compile("cpu")
    with exe:
        gx, gz = exe.run({"x": x, "z": np.zeros(2)})
    np.testing.assert_allclose(gx, 2 * x * np.array([2.0, 3.0, -1.0]))
    np.testing.assert_array_equal(gz, np.zeros(2))


def test_grad_of_an_op_without_a_rule_names_it():
    with rlx.Graph() as g:
        x = g.input("x", np.float64, (2, 3))
        dy = g.input("dy", np.float64, (2, 3))
        dx, _, _ = g.layer_norm_backward(x, dy)
        with pytest.raises(rlx.UnimplementedError, match="layer_norm_backward"):
            g.grad(g.reduce("sum", dx), [x])
