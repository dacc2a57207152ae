"""ONNX import through rlx_onnx_load: a small model made with the onnx module."""

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx", reason="the onnx Python module is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(path, rng):
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["pre"]),
             helper.make_node("Relu", ["pre"], ["y"])]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))
    return w, b


def test_load_and_run(tmp_path, device, rng):
    path = tmp_path / "tiny.onnx"
    w, b = _model(path, rng)
    with rlx.load_onnx(path) as g:
        assert [(i.name, i.shape) for i in g.inputs] == [("x", ("batch", 4))]
        assert sorted(p.name for p in g.params) == ["b", "w"]
        exe = g.compile(device)  # the initializers are set as params
    for batch in (1, 5):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        (y,) = exe.run(x=x)
        np.testing.assert_allclose(y, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)


def test_params_set_explicitly(tmp_path, rng):
    path = tmp_path / "tiny.onnx"
    w, b = _model(path, rng)
    g = rlx.load(path)
    exe = g.compile("cpu", onnx_params=False)
    del g
    exe.set_onnx_params(path)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(exe.run(x=x)[0], np.maximum(x @ w + b, 0), rtol=1e-5)


def test_read_tensor_pb(tmp_path):
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    (tmp_path / "t.pb").write_bytes(numpy_helper.from_array(a, "t").SerializeToString())
    np.testing.assert_array_equal(rlx.read_onnx_tensor(tmp_path / "t.pb"), a)


def test_errors(tmp_path):
    with pytest.raises(rlx.RlxError, match="missing.onnx"):
        rlx.load_onnx(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x01\x02not a model")
    with pytest.raises(rlx.InvalidArgumentError):
        rlx.load_onnx(tmp_path / "junk.onnx")
    node = helper.make_node("FrobnicateOp", ["x"], ["y"])
    graph = helper.make_graph([node], "bad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              str(tmp_path / "bad.onnx"))
    with pytest.raises(rlx.UnimplementedError, match="FrobnicateOp"):
        rlx.load_onnx(tmp_path / "bad.onnx")


def test_frozen_input(tmp_path):
    """A Reshape target fed as a graph input must be frozen; the error names it."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    graph = helper.make_graph(
        nodes, "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    path = tmp_path / "reshape.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    with pytest.raises(rlx.FailedPreconditionError) as err:
        rlx.load_onnx(path, frozen={})
    assert err.value.needed_input == "shape"
    with rlx.load_onnx(path, frozen={"shape": np.array([3, 2], np.int64)}) as g:
        assert [i.name for i in g.inputs] == ["x"]
        exe = g.compile("cpu")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(exe.run(x=x)[0], x.reshape(3, 2))


def test_value_inputs_at_run_time(device):
    """Without frozen values the model imports as its interface and each run
    builds it for the value of `shape` (tests/data/onnx/value_params.onnx from
    scripts/gen_value_input_models.py: y = Reshape(x W + b, shape), W and b
    initializers)."""
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "onnx" / "value_params.onnx"
    model = onnx.load(str(path))
    w = numpy_helper.to_array(model.graph.initializer[0])
    b = numpy_helper.to_array(model.graph.initializer[1])
    with rlx.load_onnx(path) as g:
        assert [i.name for i in g.inputs] == ["x", "shape"]
        exe = g.compile(device)
    x = np.array([[1, 2, 3], [-1, 0.5, 2]], np.float32)
    want = x @ w + b
    for shape in ([4, 2], [8, 1], [4, 2]):
        got = exe.run(x=x, shape=np.array(shape, np.int64))[0]
        np.testing.assert_allclose(got, want.reshape(shape), rtol=1e-5, atol=1e-5)


def test_shape_values_as_data_and_bounds(tmp_path, device):
    """Shape/Size of a symbolic dim used as data (cast to float) and as a Slice
    bound (N - 1), then a Concat along the symbolic axis: one import, two sizes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "nf"], ["xm"]),
        helper.make_node("Gather", ["sf", "zero"], ["s0"], axis=0),
        helper.make_node("Add", ["xm", "s0"], ["xa"]),
        helper.make_node("Slice", ["s", "zero1", "one"], ["e"]),
        helper.make_node("Sub", ["e", "one"], ["e1"]),
        helper.make_node("Slice", ["x", "one", "e1", "zero1"], ["xs"]),
        helper.make_node("Concat", ["xa", "xs"], ["y"], axis=0),
    ]
    inits = [helper.make_tensor("zero", TensorProto.INT64, [], [0]),
             helper.make_tensor("one", TensorProto.INT64, [1], [1]),
             helper.make_tensor("zero1", TensorProto.INT64, [1], [0])]
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    path = tmp_path / "shapes.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)
    with rlx.load_onnx(path) as g:
        dim0, dim1 = g.outputs[0].shape
        assert isinstance(dim0, str) and "N" in dim0 and dim1 == 3  # a dim expression
        exe = g.compile(device)
    for n in (4, 6):
        xs = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        (got,) = exe.run(x=xs)
        np.testing.assert_array_equal(got, np.concatenate([xs * (3 * n) + n, xs[1:n - 1]], 0))


def test_slice_static_end_on_symbolic_axis_clamps(tmp_path, device):
    """x[:5] on a symbolic axis is x[:min(N, 5)], as in NumPy and ONNX."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [helper.make_tensor("five", TensorProto.INT64, [1], [5]),
             helper.make_tensor("zero1", TensorProto.INT64, [1], [0])]
    graph = helper.make_graph([helper.make_node("Slice", ["x", "zero1", "five"], ["y"])], "g",
                              [x], [y], inits)
    path = tmp_path / "slice.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)
    with rlx.load_onnx(path) as g:
        assert g.outputs[0].shape == ("min(N,5)", 3)
        exe = g.compile(device)
    for n in (4, 6):
        xs = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        (got,) = exe.run(x=xs)
        np.testing.assert_array_equal(got, xs[:5])
