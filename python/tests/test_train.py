"""rlx.Trainer: learning a linear map, Adam against its formula, checkpoints, errors."""

import numpy as np
import pytest

import rlx


def _linreg(rows=16):
    g = rlx.Graph()
    x, y = g.input("x", "f32", [rows, 2]), g.input("y", "f32", [rows, 1])
    w, b = g.param("w", "f32", [2, 1]), g.param("b", "f32", [1])
    d = x @ w + b - y
    return g, (d * d).mean()


def _data(rng, rows=16):
    x = rng.uniform(-1, 1, (rows, 2)).astype(np.float32)
    y = (x @ np.array([[2.0], [-3.0]], np.float32) + 0.5).astype(np.float32)
    return x, y


def test_sgd_learns_a_linear_map(device, rng):
    g, loss = _linreg()
    with g:
        t = rlx.Trainer(g, loss, device, optimizer="sgd", lr=0.2)
    x, y = _data(rng)
    t.set_params(w=np.zeros((2, 1), np.float32), b=np.zeros(1, np.float32))
    first = t.step(x=x, y=y)
    for _ in range(500):
        last = t.step()
    assert t.step_count == 501
    assert last < 1e-8 < first
    np.testing.assert_allclose(t.read_param("w"), [[2.0], [-3.0]], atol=1e-4)
    np.testing.assert_allclose(t.params["b"], [0.5], atol=1e-4)
    t.close()


def test_adam_step_matches_the_formula(rng):
    g, loss = _linreg()
    with g:
        t = rlx.Trainer(g, loss, "cpu", optimizer="adam", lr=0.1, keep_grads=True)
    x, y = _data(rng)
    w0, b0 = np.array([[0.3], [0.1]], np.float32), np.array([0.2], np.float32)
    t.set_params(w=w0, b=b0)
    t.step(x=x, y=y)
    # one Adam step moves every element by lr * g / (|g| + eps) ~ lr * sign(g)
    d = x @ w0 + b0 - y
    grad_w = 2 * x.T @ d / len(x)
    np.testing.assert_allclose(t.read_grad("w"), grad_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.read_param("w"), w0 - 0.1 * np.sign(grad_w), rtol=1e-5,
                               atol=1e-6)


def test_checkpoint_round_trip(tmp_path, rng):
    x, y = _data(rng)
    trainers = []
    for _ in range(2):
        g, loss = _linreg()
        with g:
            trainers.append(rlx.Trainer(g, loss, "cpu", optimizer="adamw", lr=0.05))
    a, b = trainers
    a.set_params(w=np.ones((2, 1), np.float32), b=np.zeros(1, np.float32))
    for _ in range(3):
        a.step(x=x, y=y)
    a.save(tmp_path)
    assert (tmp_path / "manifest.txt").exists() and (tmp_path / "w.adam_m.npy").exists()
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), a.read_param("w"))
    b.load(tmp_path)
    assert b.step_count == 3
    a.step()
    b.step(x=x, y=y)
    np.testing.assert_array_equal(a.read_param("w"), b.read_param("w"))


def test_errors_are_exceptions():
    g, loss = _linreg()
    with g:
        with pytest.raises(rlx.NotFoundError, match="'nope'"):
            rlx.Trainer(g, loss, "cpu", frozen=["nope"])
        with pytest.raises(ValueError, match="optimizer"):
            rlx.Trainer(g, loss, "cpu", optimizer="lion")
        w = [p.tensor for p in g.params][0]
        with pytest.raises(rlx.InvalidArgumentError, match="scalar"):
            rlx.Trainer(g, w, "cpu")
        t = rlx.Trainer(g, loss, "cpu", frozen=["b"])
    with pytest.raises(rlx.NotFoundError):
        t.read_param("nope")
    with pytest.raises(rlx.FailedPreconditionError, match="'w'"):
        t.step(x=np.zeros((16, 2), np.float32), y=np.zeros((16, 1), np.float32))
    with pytest.raises(rlx.FailedPreconditionError, match="keep_grads"):
        t.read_grad("w")
    with pytest.raises(rlx.InvalidArgumentError):
        t.set_lr(-1.0)
