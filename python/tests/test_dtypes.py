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
    rlx.I16: np.array([[1, -2 ** 15, 0], [2 ** 15 - 1, -1, 7]], np.int16),
    rlx.U16: np.array([[1, 2 ** 16 - 1, 0], [2 ** 15, 2, 7]], np.uint16),
    rlx.U32: np.array([[1, 2 ** 32 - 1, 0], [2 ** 31, 2, 7]], np.uint32),
    rlx.U64: np.array([[1, 2 ** 64 - 1, 0], [2 ** 63, 2, 7]], np.uint64),
}
# float8 samples: every kind of code (normal, subnormal, max, NaN, zero).
for _d in (rlx.F8E4M3FN, rlx.F8E5M2, rlx.F8E4M3FNUZ, rlx.F8E5M2FNUZ):
    SAMPLES[_d] = rlx.convert(np.array([[1.5, -2.25, 0.0], [1e6, 1e-3, np.nan]], np.float32), _d)


def run_declared(build, x, dtype, device):
    """run_graph with the input declared as `dtype` (bits arrays need the declaration)."""
    with rlx.Graph() as g:
        g.set_outputs(build(g, g.input("x", dtype, x.shape)))
        exe = g.compile(device)
    with exe:
        return exe.run(x=x)


def test_dtype_table():
    assert [d.short_name for d in rlx.DType] == [
        "f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool", "i16", "u16", "u32",
        "u64", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz"]
    assert [d.size for d in rlx.DType] == [4, 2, 2, 8, 1, 1, 4, 8, 1, 2, 2, 4, 8, 1, 1, 1, 1]
    assert [d.is_float for d in rlx.DType] == [True] * 4 + [False] * 9 + [True] * 4
    assert rlx.to_dtype("float16") is rlx.F16 and rlx.to_dtype(np.int8) is rlx.I8
    assert rlx.to_dtype(np.uint16) is rlx.U16  # a bare uint16 array is u16, not bf16 bits
    assert rlx.to_dtype(np.uint64) is rlx.U64 and rlx.to_dtype("f8e4m3fn") is rlx.F8E4M3FN
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
    assert rlx.to_dtype(x.dtype) is dtype or x.dtype == dtype.bits_numpy
    (y,) = run_declared(lambda g, t: t.reshape(2, 3), x, dtype, device)
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
    elif dtype.bits_numpy is not None:  # float8: 0, 1 and 2 are exact in every format
        back = rlx.convert(y.view(np.uint8), "f32", src_dtype=dtype)
        np.testing.assert_array_equal([back[0, 0], back[0, 1], back[1, 2]], [0.0, 1.0, 2.0])
    elif not dtype.short_name.startswith("u"):  # negative -> unsigned: rlx saturates, numpy wraps
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


def test_bits_arrays_need_a_declared_dtype():
    """uint16 / uint8 arrays are u16 / u8 unless a bf16 / float8 slot or src_dtype says
    they are bits."""
    bits = rlx.f32_to_bf16(np.array([1.0, -2.0], np.float32)).view(np.uint16)
    np.testing.assert_array_equal(rlx.convert(bits, "f32", src_dtype="bf16"), [1.0, -2.0])
    np.testing.assert_array_equal(rlx.convert(bits, "f32"), bits.astype(np.float32))
    with pytest.raises(TypeError):
        rlx.convert(bits.astype(np.int32), "f32", src_dtype="bf16")


@pytest.mark.parametrize("dtype,codes", [
    (rlx.F8E4M3FN, [0x38, 0x30, 0x7E, 0x7E, 0x7F, 0x01, 0x80]),
    (rlx.F8E5M2, [0x3C, 0x38, 0x5F, 0x7B, 0x7F, 0x18, 0x80]),
    (rlx.F8E4M3FNUZ, [0x40, 0x38, 0x7F, 0x7F, 0x80, 0x02, 0x00]),
    (rlx.F8E5M2FNUZ, [0x40, 0x3C, 0x63, 0x7F, 0x80, 0x1C, 0x00]),
], ids=str)
def test_float8_codes(dtype, codes):
    """Hand-computed codes of 1, 0.5, 448, 1e6 (saturates), NaN, 2^-9 and -0."""
    x = np.array([1.0, 0.5, 448.0, 1e6, np.nan, 2.0 ** -9, -0.0], np.float32)
    got = rlx.convert(x, dtype)
    np.testing.assert_array_equal(got.view(np.uint8), np.array(codes, np.uint8))
