"""Failures raise the status's RlxError subclass carrying the C library's message."""

import numpy as np
import pytest

import rlx


def _exe(device="cpu"):
    with rlx.Graph() as g:
        x = g.input("x", "f32", [2, 3])
        g.param("w", "f32", [3])
        g.set_outputs(x * 2.0)
        return g.compile(device)


def test_status_classes():
    classes = [rlx.InvalidArgumentError, rlx.NotFoundError, rlx.UnimplementedError,
               rlx.UnavailableError, rlx.ResourceExhaustedError, rlx.OutOfRangeError,
               rlx.FailedPreconditionError, rlx.InternalError]
    for code, cls in enumerate(classes, start=1):
        assert cls.status == code and issubclass(cls, rlx.RlxError)
        assert cls("m").status_name == rlx.status_name(code)
    assert rlx.status_name(2) == "NOT_FOUND"
    assert issubclass(rlx.InvalidArgumentError, ValueError)
    assert issubclass(rlx.NotFoundError, LookupError)


def test_unknown_input_name():
    with _exe() as exe:
        with pytest.raises(rlx.NotFoundError) as err:
            exe.set_input("y", np.zeros((2, 3), np.float32))
        assert "'y'" in err.value.message or '"y"' in err.value.message or " y" in err.value.message
        assert str(err.value) == "NOT_FOUND: " + err.value.message
        with pytest.raises(rlx.NotFoundError):
            exe.set_param("nope", np.zeros(3, np.float32))


def test_wrong_dtype_and_shape():
    with _exe() as exe:
        with pytest.raises(rlx.InvalidArgumentError, match="f64|dtype") as err:
            exe.set_input("x", np.zeros((2, 3), np.float64))
        assert "x" in err.value.message
        with pytest.raises(rlx.InvalidArgumentError, match="shape|dim|\\[") as err:
            exe.set_input("x", np.zeros((3, 2), np.float32))
        with pytest.raises(rlx.InvalidArgumentError):
            exe.set_param("w", np.zeros(4, np.float32))
        # the executable stays usable after errors
        exe.set_param("w", np.zeros(3, np.float32))
        (y,) = exe.run(x=np.ones((2, 3), np.float32))
        np.testing.assert_array_equal(y, np.full((2, 3), 2, np.float32))


def test_bad_device():
    with rlx.Graph() as g:
        g.set_outputs(g.input("x", "f32", [1]))
        with pytest.raises(rlx.NotFoundError, match="tpu"):
            g.compile("tpu")
    with pytest.raises(rlx.NotFoundError, match="tpu"):
        rlx.device("tpu")


def test_read_before_run():
    with _exe() as exe:
        with pytest.raises(rlx.FailedPreconditionError) as err:
            exe.output(0)
        assert err.value.message
    with rlx.Graph() as g:
        g.set_outputs(g.input("x", "f32", ["n"]) + 1.0)
        with g.compile("cpu") as exe, pytest.raises(rlx.FailedPreconditionError, match="run"):
            exe.output(0)


def test_run_without_params_or_inputs():
    with _exe() as exe:
        with pytest.raises(rlx.FailedPreconditionError, match="'w'"):
            exe.run(x=np.ones((2, 3), np.float32))
        exe.set_param("w", np.zeros(3, np.float32))
        (y,) = exe.run()  # x is still set from the failed call
        assert y.shape == (2, 3)
    with _exe() as exe:
        exe.set_param("w", np.zeros(3, np.float32))
        with pytest.raises(rlx.FailedPreconditionError, match="'x'"):
            exe.run()


def test_builder_errors_name_the_problem():
    with rlx.Graph() as g:
        a = g.input("a", "f32", [2, 3])
        b = g.input("b", "f32", [4, 5])
        with pytest.raises(rlx.InvalidArgumentError, match="matmul|MatMul") as err:
            a @ b
        assert "3" in err.value.message and "4" in err.value.message
        with pytest.raises(rlx.InvalidArgumentError):
            a + g.input("c", "i32", [2, 3])  # mixed dtypes
        with pytest.raises(rlx.InvalidArgumentError):
            g.input("a", "f32", [1])  # duplicate name
        with pytest.raises(rlx.InvalidArgumentError):
            g.compile("cpu")  # no outputs
        g.set_outputs(a.relu())  # the graph is still usable
        assert g.compile("cpu").output_count == 1


def test_bad_tensor_and_output_index():
    with rlx.Graph() as g:
        g.set_outputs(g.input("x", "f32", [1]))
        with pytest.raises(rlx.InvalidArgumentError, match="%99"):
            g.tensor_type(rlx.Tensor(g, 99))
        with g.compile("cpu") as exe, pytest.raises(rlx.RlxError, match="index 5"):
            exe.output_type(5)


def test_gather_index_out_of_range_at_run_time():
    with rlx.Graph() as g:
        x = g.input("x", "f32", [4])
        g.set_outputs(x.gather(g.input("i", "i64", [2])))
        exe = g.compile("cpu")
    with pytest.raises(rlx.OutOfRangeError):
        exe.run(x=np.zeros(4, np.float32), i=np.array([0, 9]))
    (y,) = exe.run(i=np.array([3, -1]))  # still usable
    np.testing.assert_array_equal(y, [0, 0])


def test_python_side_errors():
    with rlx.Graph() as g, rlx.Graph() as h:
        a, b = g.input("a", "f32", [1]), h.input("b", "f32", [1])
        with pytest.raises(ValueError, match="another graph"):
            a + b
        with pytest.raises(TypeError):
            bool(a < 1.0)
        with pytest.raises(ValueError, match="activation|Activation"):
            g.activation("frobnicate", a)
        with pytest.raises(TypeError):
            g.input("c", np.complex64, [1])
