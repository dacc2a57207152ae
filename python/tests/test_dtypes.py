"""Every rlx dtype goes in and comes out as the right numpy array."""

import numpy as np
import pytest

import rlx
from conftest import run_graph

SAMPLES = {
    rlx.F32: np.array([[1.5, -2.25, 0.0], [3.0e8, -1e-3, 7.0]], np.float32),
    rlx.F16: np.array([[1.5, -2.25, 0.0], [6.0e4, -1e-3, 7.0]], np.float16),
    rlx.F64: np.array([[1.5, -2.25, 0.0], [1e300, -1e-300, 7.0]], np.float64),
    rlx.I8: np.array([[1, -128, 0], [127, -1, 7]], np.int8),
    rlx.U8: np.array([[1, 255, 0], [128, 2, 7]], np.uint8),
    rlx.I32: np.array([[1, -2 ** 31, 0], [2 ** 31 - 1, -1, 7]], np.int32),
    rlx.I64: np.array([[1, -2 ** 63, 0], [2 ** 63 - 1, -1, 7]], np.int64),
    rlx.BOOL: np.array([[True, False, True], [False, False, True]]),
    # bf16 bits of 1.5, -2.25, 0, 3.0e8 (rounded), -1e-3 (rounded), 7
    rlx.BF16: rlx.f32_to_bf16(np.array([[1.5, -2.25, 0.0], [3.0e8, -1e-3, 7.0]], np.float32)),
}


def test_dtype_table():
    assert [d.short_name for d in rlx.DType] == ["f32", "f16", "bf16", "f64", "i8", "u8",
                                                 "i32", "i64", "bool"]
    assert [d.size for d in rlx.DType] == [4, 2, 2, 8, 1, 1, 4, 8, 1]
    assert [d.is_float for d in rlx.DType] == [True, True, True, True] + [False] * 5
    assert rlx.to_dtype("float16") is rlx.F16 and rlx.to_dtype(np.int8) is rlx.I8
    assert rlx.to_dtype(np.uint16) is rlx.BF16  # uint16 arrays are bf16 bit patterns
    with pytest.raises(TypeError):
        rlx.to_dtype(np.complex64)


def test_bf16_helpers():
    values = np.array([1.0, -2.5, 3.140625, 65280.0], np.float32)  # exact in bf16
    bits = rlx.f32_to_bf16(values)
    assert bits.dtype == rlx.BF16.numpy
    if bits.dtype == np.uint16:
        np.testing.assert_array_equal(bits, (values.view(np.uint32) >> 16).astype(np.uint16))
    np.testing.assert_array_equal(rlx.bf16_to_f32(bits.view(np.uint16)), values)


@pytest.mark.parametrize("dtype", list(rlx.DType), ids=str)
def test_round_trip(dtype, device):
    """input -> (reshape to the same shape: a copy through the device) -> output."""
    x = SAMPLES[dtype]
    assert rlx.to_dtype(x.dtype) is dtype
    (y,) = run_graph(lambda g, t: t.reshape(2, 3), {"x": x}, device)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize("dtype", list(rlx.DType), ids=str)
def test_cast_from_f32(dtype, device):
    """Cast f32 -> every dtype matches rlx.convert (rlx's own Cast rules) and numpy where
    numpy agrees (values in range)."""
    x = np.array([[0.0, 1.0, -3.75], [100.5, -100.5, 2.0]], np.float32)
    (y,) = run_graph(lambda g, t: t.astype(dtype), {"x": x}, device)
    assert y.dtype == dtype.numpy
    np.testing.assert_array_equal(y.view(np.uint8), rlx.convert(x, dtype).view(np.uint8))
    if dtype is rlx.BF16:
        np.testing.assert_array_equal(rlx.bf16_to_f32(y.view(np.uint16)), x)
    elif dtype is not rlx.U8:  # negative -> u8 is rlx's saturation, numpy's wrap
        np.testing.assert_array_equal(y, x.astype(dtype.numpy))


def test_read_float_output_as_other_float():
    x = np.array([1.0, 2.5, -0.125], np.float32)
    with rlx.Graph() as g:
        g.set_outputs(g.input("x", "f32", [3]).astype("bf16"))
        exe = g.compile("cpu")
    exe.run(x=x)
    np.testing.assert_array_equal(exe.output(0, dtype="f32"), x)
    np.testing.assert_array_equal(exe.output(0, dtype=np.float64), x.astype(np.float64))
    with pytest.raises(rlx.InvalidArgumentError):
        exe.output(0, dtype="i32")  # float -> integer is not a read conversion


def test_lists_and_scalars_take_the_declared_dtype():
    with rlx.Graph() as g:
        x = g.input("x", "i32", [3])
        s = g.input("s", "f16", [])
        p = g.param("p", "i32", [3])
        g.set_outputs(x + p, s * 2.0)
        exe = g.compile("cpu")
    exe.set_param("p", [10, 20, 30])
    a, b = exe.run(x=[1, 2, 3], s=1.5)
    assert a.dtype == np.int32 and b.dtype == np.float16 and b.shape == ()
    np.testing.assert_array_equal(a, [11, 22, 33])
    assert b == 3.0


def test_f32_data_sets_a_float_param_of_another_dtype():
    with rlx.Graph() as g:
        w = g.param("w", "f16", [2])
        g.set_outputs(w + g.input("x", "f16", [2]))
        exe = g.compile("cpu")
    exe.set_param("w", np.array([0.5, 1.5], np.float32))  # converted by the library
    (y,) = exe.run(x=np.array([1, 2], np.float16))
    np.testing.assert_array_equal(y, np.array([1.5, 3.5], np.float16))
