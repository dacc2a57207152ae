"""Training ops through the Python builder: cross-entropy (+ backward), MSE,
gather backward and the SGD / Adam updates against numpy, on every device."""

import numpy as np

from conftest import run_graph


def _log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def test_cross_entropy_and_backward(device):
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, (5, 6)).astype(np.float32)
    t = np.array([1, -100, 5, 0, 2], np.int64)
    ls = 0.1
    logp = _log_softmax(x.astype(np.float64))
    keep = t != -100
    rows = -((1 - ls) * logp[np.arange(5), np.where(keep, t, 0)] + ls * logp.mean(-1))
    want = rows[keep].mean()
    soft = np.exp(logp)
    onehot = np.zeros_like(soft)
    onehot[np.arange(5)[keep], t[keep]] = 1
    want_dx = (soft - (1 - ls) * onehot - ls / 6) / keep.sum() * keep[:, None]
    loss, dx = run_graph(lambda g, a, b: [g.cross_entropy(a, b, -100, ls),
                                          g.cross_entropy_backward(a, b, np.float32(1.0), -100, ls)],
                         {"x": x, "t": t}, device)
    np.testing.assert_allclose(loss, want, rtol=1e-5)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-6)


def test_mse_and_gather_backward(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 3), np.float32)
    dy = np.arange(8, dtype=np.float32).reshape(4, 2)
    mse, dx = run_graph(lambda g, p, q, r: [g.mse_loss(p, q), g.gather_backward(r, [2, 0, 2, 1], 0, 3)],
                        {"a": a, "b": b, "dy": dy}, device)
    np.testing.assert_allclose(mse, ((a - b) ** 2).mean(), rtol=1e-6)
    want = np.zeros((3, 2), np.float32)
    np.add.at(want, [2, 0, 2, 1], dy)
    np.testing.assert_array_equal(dx, want)


def test_sgd_and_adam(device):
    p = np.array([0.5, -1.0, 2.0], np.float32)
    grad = np.array([0.1, -0.2, 0.3], np.float32)
    m = np.array([0.01, 0.02, -0.03], np.float32)
    v = np.array([0.001, 0.002, 0.003], np.float32)
    hyper = np.array([0.1, 1.0, 2.0, 1.0], np.float32)  # lr, grad scale, step 2, apply

    def build(g, pp, gg, mm, vv, hh):
        sp, buf = g.sgd_update(pp, gg, mm, hh, momentum=0.9, dampening=0.1)
        ap, am, av = g.adam_update(pp, gg, mm, vv, hh, weight_decay=0.01, decoupled=True)
        return [sp, buf, ap, am, av]

    sp, buf, ap, am, av = run_graph(build, {"p": p, "g": grad, "m": m, "v": v, "h": hyper}, device)
    want_buf = 0.9 * m + 0.9 * grad
    np.testing.assert_allclose(buf, want_buf, rtol=1e-6)
    np.testing.assert_allclose(sp, p - 0.1 * want_buf, rtol=1e-6)
    w = p * (1 - 0.1 * 0.01)
    m2 = 0.9 * m + 0.1 * grad
    v2 = 0.999 * v + 0.001 * grad * grad
    want_p = w - 0.1 * (m2 / (1 - 0.9 ** 2)) / (np.sqrt(v2 / (1 - 0.999 ** 2)) + 1e-8)
    np.testing.assert_allclose(am, m2, rtol=1e-5)
    np.testing.assert_allclose(av, v2, rtol=1e-4)
    np.testing.assert_allclose(ap, want_p, rtol=1e-5)
