"""rlx dtypes and their numpy counterparts.

Integers map one to one (int8/16/32/64, uint8/16/32/64), f16 to
numpy.float16, bool to numpy.bool_ (one byte, 0 or 1).

bf16 and the float8 types (f8e4m3fn, f8e5m2, f8e4m3fnuz, f8e5m2fnuz) have no
numpy dtype. When the `ml_dtypes` module is importable they come back as
ml_dtypes.bfloat16 / float8_* arrays and such arrays are accepted. Without
it they travel as their raw bits: uint16 arrays for bf16, uint8 for float8.
A bare uint16 / uint8 array always means u16 / u8; it is read as bits only
where the dtype is said: an input or param declared bf16 / f8*, or an
explicit dtype, e.g. rlx.convert(bits, "f32", src_dtype="bf16").
"""

import enum

import numpy as np

from . import _capi
from .errors import check

try:  # optional: real numpy bfloat16 and float8 dtypes
    import ml_dtypes as _ml_dtypes
except ImportError:
    _ml_dtypes = None


def _ml_dtype(name):
    kind = getattr(_ml_dtypes, name, None) if _ml_dtypes is not None else None
    return np.dtype(kind) if kind is not None else None


BFLOAT16 = _ml_dtype("bfloat16")


class DType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2
    F64 = 3
    I8 = 4
    U8 = 5
    I32 = 6
    I64 = 7
    BOOL = 8
    I16 = 9
    U16 = 10
    U32 = 11
    U64 = 12
    F8E4M3FN = 13
    F8E5M2 = 14
    F8E4M3FNUZ = 15
    F8E5M2FNUZ = 16

    @property
    def size(self):
        """Bytes per element."""
        return _capi.lib.rlx_dtype_size(self)

    @property
    def short_name(self):
        """rlx's lower-case name: 'f32', 'bf16', 'bool'."""
        return _capi.text(_capi.lib.rlx_dtype_name(self))

    @property
    def is_float(self):
        return bool(_capi.lib.rlx_dtype_is_float(self))

    @property
    def numpy(self):
        """The numpy dtype arrays of this dtype have (for bf16 and float8 without ml_dtypes:
        the bits dtype, uint16 / uint8)."""
        if self in _ML_NUMPY:
            return _ML_NUMPY[self] if _ML_NUMPY[self] is not None else _BITS[self]
        return _TO_NUMPY[self]

    @property
    def bits_numpy(self):
        """For bf16 and float8: the unsigned integer dtype holding their bits; else None."""
        return _BITS.get(self)

    def __str__(self):
        return self.short_name


F32, F16, BF16, F64, I8, U8, I32, I64, BOOL = (DType.F32, DType.F16, DType.BF16, DType.F64,
                                                DType.I8, DType.U8, DType.I32, DType.I64,
                                                DType.BOOL)
I16, U16, U32, U64 = DType.I16, DType.U16, DType.U32, DType.U64
F8E4M3FN, F8E5M2, F8E4M3FNUZ, F8E5M2FNUZ = (DType.F8E4M3FN, DType.F8E5M2, DType.F8E4M3FNUZ,
                                            DType.F8E5M2FNUZ)

# Types numpy lacks: their ml_dtypes dtype (None when ml_dtypes is missing or
# lacks it) and the integer dtype of their bits.
_ML_NUMPY = {BF16: BFLOAT16, F8E4M3FN: _ml_dtype("float8_e4m3fn"),
             F8E5M2: _ml_dtype("float8_e5m2"), F8E4M3FNUZ: _ml_dtype("float8_e4m3fnuz"),
             F8E5M2FNUZ: _ml_dtype("float8_e5m2fnuz")}
_BITS = {d: np.dtype(np.uint16 if d is BF16 else np.uint8) for d in _ML_NUMPY}

_TO_NUMPY = {
    DType.F32: np.dtype(np.float32), DType.F16: np.dtype(np.float16),
    DType.F64: np.dtype(np.float64), DType.I8: np.dtype(np.int8),
    DType.U8: np.dtype(np.uint8), DType.I32: np.dtype(np.int32),
    DType.I64: np.dtype(np.int64), DType.BOOL: np.dtype(np.bool_),
    DType.I16: np.dtype(np.int16), DType.U16: np.dtype(np.uint16),
    DType.U32: np.dtype(np.uint32), DType.U64: np.dtype(np.uint64),
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}
_FROM_NUMPY.update({v: k for k, v in _ML_NUMPY.items() if v is not None})

_ALIASES = {"float32": F32, "float": F32, "float16": F16, "half": F16, "bfloat16": BF16,
            "float64": F64, "double": F64, "int8": I8, "uint8": U8, "int32": I32,
            "int64": I64, "bool_": BOOL, "int16": I16, "uint16": U16, "uint32": U32,
            "uint64": U64, "float8_e4m3fn": F8E4M3FN, "float8_e5m2": F8E5M2,
            "float8_e4m3fnuz": F8E4M3FNUZ, "float8_e5m2fnuz": F8E5M2FNUZ}


def to_dtype(value):
    """A DType from a DType, an int, a name ('f32', 'float32', 'bf16'), or a numpy dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return DType(value)
    if isinstance(value, str):
        for d in DType:
            if d.short_name == value:
                return d
        if value in _ALIASES:
            return _ALIASES[value]
        raise TypeError(f"unknown rlx dtype name {value!r}")
    try:
        np_dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"cannot make an rlx dtype from {value!r}") from None
    if np_dtype in _FROM_NUMPY:
        return _FROM_NUMPY[np_dtype]
    raise TypeError(f"numpy dtype {np_dtype} has no rlx counterpart (rlx has f32 f16 bf16 "
                    "f64 f8e4m3fn f8e5m2 f8e4m3fnuz f8e5m2fnuz i8 i16 i32 i64 u8 u16 u32 u64 "
                    "bool)")


def _contiguous(arr):
    """arr in C order (np.ascontiguousarray would turn a 0-d array into 1-d)."""
    arr = np.asarray(arr)
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def dtype_of_array(arr):
    return to_dtype(arr.dtype)


def is_bits_of(arr_dtype, dtype):
    """Whether an array of numpy dtype arr_dtype holds the raw bits of rlx dtype `dtype`
    (uint16 for bf16, uint8 for float8)."""
    bits = to_dtype(dtype).bits_numpy
    return bits is not None and np.dtype(arr_dtype) == bits


def convert(array, dtype, src_dtype=None):
    """Converts an array to rlx dtype `dtype` with rlx's Cast rules (rlx_dtype_convert):
    float -> integer truncates toward zero and saturates, NaN -> 0, anything ->
    bool is != 0, into float8: round to nearest even, saturating to +-max. src_dtype
    says what the array holds when that is not its numpy dtype: raw bits of bf16 or
    float8 (uint16 / uint8 arrays) without ml_dtypes."""
    src = _contiguous(array)
    if src_dtype is None:
        src_dtype = dtype_of_array(src)
    else:
        src_dtype = to_dtype(src_dtype)
        if not (is_bits_of(src.dtype, src_dtype) or to_dtype_or_none(src.dtype) is src_dtype):
            raise TypeError(f"a {src.dtype} array does not hold {src_dtype} values")
    dst_dtype = to_dtype(dtype)
    dst = np.empty(src.shape, dst_dtype.numpy)
    status = _capi.lib.rlx_dtype_convert(dst.ctypes.data, dst_dtype, src.ctypes.data,
                                         src_dtype, src.size)
    check(status, f"converting {src_dtype} to {dst_dtype}")
    return dst


def as_array(value, dtype):
    """`value` (array, list or scalar) as a C-contiguous array of rlx dtype `dtype`."""
    dtype = to_dtype(dtype)
    if isinstance(value, np.ndarray) and (to_dtype_or_none(value.dtype) is dtype
                                          or is_bits_of(value.dtype, dtype)):
        return _contiguous(value)
    if dtype.bits_numpy is not None and dtype.numpy == dtype.bits_numpy:
        return convert(np.asarray(value, np.float32), dtype)
    return _contiguous(np.asarray(value).astype(dtype.numpy))


def to_dtype_or_none(np_dtype):
    return _FROM_NUMPY.get(np.dtype(np_dtype))


def bf16_to_f32(bits):
    """uint16 bf16 bit patterns -> float32 values."""
    return convert(np.asarray(bits, np.uint16), DType.F32, src_dtype=DType.BF16)


def f32_to_bf16(values):
    """float values -> bf16 (ml_dtypes.bfloat16 if importable, else uint16 bits), rounded to
    nearest even as rlx does."""
    return convert(np.asarray(values, np.float32), DType.BF16)


