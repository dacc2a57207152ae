"""Executables: params, listing, clone, seed, feeds and state, reports, text round trip."""

import numpy as np
import pytest

import rlx


def _mlp():
    g = rlx.Graph()
    x = g.input("x", "f32", [2, 4])
    w1, b1 = g.param("w1", "f32", [4, 8]), g.param("b1", "f32", [8])
    w2 = g.param("w2", "f32", [8, 3])
    h = g.fused_matmul_bias_act(x, w1, b1, act="gelu").set_name("hidden")
    g.set_outputs(h @ w2, h)
    return g


def _mlp_params(rng):
    return {"w1": rng.standard_normal((4, 8)).astype(np.float32),
            "b1": rng.standard_normal(8).astype(np.float32),
            "w2": rng.standard_normal((8, 3)).astype(np.float32)}


def test_params_dict_and_listing(device, rng):
    params = _mlp_params(rng)
    with _mlp() as g:
        assert [p.name for p in g.params] == ["w1", "b1", "w2"]
        exe = g.compile(device)
    assert [(i.name, i.dtype, i.shape) for i in exe.inputs] == [("x", rlx.F32, (2, 4))]
    assert [(p.name, p.dtype, p.shape) for p in exe.params] == [
        ("w1", rlx.F32, (4, 8)), ("b1", rlx.F32, (8,)), ("w2", rlx.F32, (8, 3))]
    assert [(o.name, o.shape) for o in exe.outputs] == [(None, (2, 3)), ("hidden", (2, 8))]
    exe.set_params(params)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    y, h = exe.run({"x": x})
    pre = x @ params["w1"] + params["b1"]
    from math import erf, sqrt
    want_h = 0.5 * pre * (1 + np.vectorize(erf)(pre / sqrt(2)))
    np.testing.assert_allclose(h, want_h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y, want_h @ params["w2"], rtol=1e-4, atol=1e-5)
    exe.set_params(w2=np.zeros((8, 3), np.float32))  # keyword form
    y, _ = exe.run(x=x)
    np.testing.assert_array_equal(y, np.zeros((2, 3), np.float32))


def test_clone_gives_identical_output_and_its_own_params(rng):
    params = _mlp_params(rng)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    with _mlp() as g, g.compile("cpu") as exe:
        exe.set_params(params)
        want = exe.run(x=x)
        with exe.clone() as twin:
            got = twin.run(x=x)
            for a, b in zip(want, got):
                np.testing.assert_array_equal(a, b)
            twin.set_param("w2", np.ones((8, 3), np.float32))
            assert not np.array_equal(twin.run(x=x)[0], want[0])
        np.testing.assert_array_equal(exe.run(x=x)[0], want[0])  # the original is untouched


def _sampler():
    g = rlx.Graph()
    g.set_outputs(g.sample(g.input("logits", "f32", [256, 16]), temperature=1.0))
    return g


def test_seed_makes_sampling_reproducible():
    logits = np.zeros((256, 16), np.float32)
    with _sampler() as g, g.compile("cpu") as exe:
        exe.set_seed(7)
        a = exe.run(logits=logits)[0]
        exe.set_seed(7)
        b = exe.run(logits=logits)[0]
        exe.set_seed(8)
        c = exe.run(logits=logits)[0]
    assert a.dtype == np.int64 and a.shape == (256,)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= 0 and a.max() < 16 and len(np.unique(a)) > 8


def test_feed_copies_an_output_into_an_input(device):
    with rlx.Graph() as g:
        x = g.input("x", "f32", [3])
        g.set_outputs(x + 1.0)
        exe = g.compile(device)
    exe.feed("x", 0)
    exe.set_input("x", np.zeros(3, np.float32))
    for step in range(1, 4):
        (y,) = exe.run()
        np.testing.assert_array_equal(y, np.full(3, step, np.float32))


def test_state_inputs(device):
    with rlx.Graph() as g:
        cache = g.input("cache", "f32", [4, 2])
        pos = g.input("pos", "i64", [4, 1])
        row = g.input("row", "f32", [1, 2])
        at = pos.eq(g.input("step", "i64", []))
        new = g.where(at, row, cache).set_name("new_cache")
        g.set_outputs(new.sum(axis=1), new)
        exe = g.compile(device, states={"cache": "new_cache"})
    exe.set_input("cache", np.zeros((4, 2), np.float32))
    pos = np.arange(4).reshape(4, 1)
    for step in range(3):
        sums, _ = exe.run(pos=pos, step=np.int64(step),
                          row=np.full((1, 2), step + 1, np.float32))
    np.testing.assert_array_equal(sums, [2, 4, 6, 0])


def test_select_outputs_and_rows():
    with _mlp() as g, g.compile("cpu") as exe:
        exe.set_params(_mlp_params(np.random.default_rng(0)))
        exe.select_outputs([1])
        y, h = exe.run(x=np.ones((2, 4), np.float32))
        assert y is None and h.shape == (2, 8)
        with pytest.raises(rlx.FailedPreconditionError):
            exe.output(0)
        np.testing.assert_array_equal(exe.output_row(1, 1), h[1])
        exe.select_outputs(None)
        y, _ = exe.run()
        assert y.shape == (2, 3)


def test_report_memory_stats_dot():
    with _mlp() as g, g.compile("cpu") as exe:
        stats = exe.memory_stats()
        assert stats.arena_bytes > 0 and stats.launches >= 2
        assert stats.peak_live_bytes <= stats.tensor_bytes
        report = exe.report()
        assert "dispatch report" in report and "matmul" in report
        assert exe.to_dot("mlp").startswith("digraph")
        assert g.to_dot().startswith("digraph")
        assert exe.last_device_ms() is None  # the CPU backend does not measure
        assert g.node_count >= 6


def test_trace_file(tmp_path):
    import json
    path = tmp_path / "trace.json"
    with _mlp() as g, g.compile("cpu") as exe:
        exe.set_params(_mlp_params(np.random.default_rng(0)))
        exe.set_trace(path)
        exe.run(x=np.ones((2, 4), np.float32))
        exe.run()
        steps = exe.memory_stats().launches
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 2 * steps
    assert sorted({e["args"]["run"] for e in events}) == [0, 1]
    assert all(e["cat"] == "cpu" and e["dur"] >= 0 for e in events)
    assert any(e["name"].startswith("matmul") for e in events)


def test_text_round_trip(tmp_path, rng):
    params = _mlp_params(rng)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    with _mlp() as g:
        text = g.to_text()
        g.save(tmp_path / "mlp.rlx")
        want = g.compile("cpu")
    want.set_params(params)
    for again in (rlx.parse(text), rlx.load(tmp_path / "mlp.rlx")):
        assert again.to_text() == text
        exe = again.compile("cpu")
        exe.set_params(params)
        for a, b in zip(exe.run(x=x), want.run(x=x)):
            np.testing.assert_array_equal(a, b)


def test_parse_error_names_line_and_column():
    with pytest.raises(rlx.InvalidArgumentError, match=r"^INVALID_ARGUMENT: \d+:\d+: ") as err:
        rlx.parse("rlx 1\n%0 = input name=\"x\" : f32[2]\n%1 = frobnicate(%0) : f32[2]\n")
    assert err.value.status == 1 and "frobnicate" in err.value.message


def test_npy_and_conversion_helpers(tmp_path):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    rlx.save_npy(tmp_path / "a.npy", a)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), a)
    np.testing.assert_array_equal(rlx.load_npy(tmp_path / "a.npy"), a)
    np.testing.assert_array_equal(rlx.convert(np.array([-1.7, 300.0]), "i8"), [-1, 127])


@pytest.mark.parametrize("np_dtype", [np.int16, np.uint16, np.uint32, np.uint64])
def test_npy_round_trip_of_the_newer_integers(tmp_path, np_dtype):
    info = np.iinfo(np_dtype)
    a = np.array([[info.min, info.max, 7]], np_dtype)
    rlx.save_npy(tmp_path / "a.npy", a)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), a)
    back = rlx.load_npy(tmp_path / "a.npy")
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)
    np.save(tmp_path / "b.npy", a)  # numpy's own writer reads back as the same dtype
    assert rlx.load_npy(tmp_path / "b.npy").dtype == a.dtype


def test_float8_has_no_npy_dtype(tmp_path):
    bits = rlx.convert(np.array([1.0, 448.0], np.float32), "f8e4m3fn")
    if bits.dtype == np.uint8:  # without ml_dtypes the bits save as u8, by design
        rlx.save_npy(tmp_path / "a.npy", bits)
        assert rlx.load_npy(tmp_path / "a.npy").dtype == np.uint8
    np.testing.assert_array_equal(bits.view(np.uint8), [0x38, 0x7E])


def test_compile_options_reach_the_library():
    with rlx.Graph() as g:
        g.set_outputs(g.input("x", "f32", [2]).log().set_name("the_log"))
        plain = g.compile("cpu", threads=1, use_blas=False, reference=True, strict=True)
        checked = g.compile("cpu", debug_nans=True)
    x = np.array([1.0, -1.0], np.float32)
    (y,) = plain.run(x=x)
    assert y[0] == 0 and np.isnan(y[1])
    with pytest.raises(rlx.RlxError, match="the_log"):
        checked.run(x=x)  # debug_nans names the node that made the NaN


def test_numpy_operands_on_either_side():
    with rlx.Graph() as g:
        x = g.input("x", "f32", [3])
        c = np.array([1.0, 2.0, 4.0], np.float32)
        g.set_outputs(c - x, x * c, c.reshape(1, 3) @ g.input("m", "f32", [3, 2]))
        assert repr(g).startswith("<rlx.Graph: ") and "['x', 'm']" in repr(g)
        exe = g.compile("cpu")
    a, b, d = exe.run(x=np.ones(3, np.float32), m=np.ones((3, 2), np.float32))
    np.testing.assert_array_equal(a, [0, 1, 3])
    np.testing.assert_array_equal(b, [1, 2, 4])
    np.testing.assert_array_equal(d, [[7, 7]])


@pytest.mark.parametrize("precision, tol", [("bf16", 2e-2), ("f16", 3e-3)])
def test_precision_computes_reduced_behind_an_f32_interface(device, rng, precision, tol):
    params = _mlp_params(rng)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    with _mlp() as g:
        exact = g.compile(device)
        reduced = g.compile(device, precision=precision)
        with pytest.raises(ValueError, match="precision"):
            g.compile(device, precision="f8")
    exact.set_params(params)
    reduced.set_params(params)
    assert [i.dtype for i in reduced.inputs + reduced.params] == [rlx.F32] * 4
    want, got = exact.run(x=x)[0], reduced.run(x=x)[0]
    assert got.dtype == np.float32
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert 0 < err < tol  # rounded (not computed in f32), within a few units
    assert (": %s[" % precision) in reduced.to_dot()
def test_channels_last_option_keeps_results(device, rng):
    """An NCHW conv net compiled with channels_last=True (run NHWC inside) gives the
    NCHW results: conv + relu + max pool, a residual conv, a global average pool."""
    x = rng.standard_normal((2, 3, 8, 6)).astype(np.float32)
    w1 = rng.standard_normal((5, 3, 3, 3)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((5, 5, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(5).astype(np.float32)
    with rlx.Graph() as g:
        t = g.input("x", "f32", x.shape)
        y = g.conv(t, g.constant(w1), g.constant(b), pads=[1, 1, 1, 1]).relu()
        y = g.pool(y, [2, 2], strides=[2, 2])
        y = g.conv(y, g.constant(w2), residual=y, pads=[1, 1, 1, 1], act="relu")
        g.set_outputs(y, g.pool(y, [4, 3], kind="avg"))
        plain = g.compile(device)
        last = g.compile(device, channels_last=True)
    for want, got in zip(plain.run(x=x), last.run(x=x)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
