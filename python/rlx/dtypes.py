"""rlx dtypes and their numpy counterparts.

bf16 has no numpy dtype. When the `ml_dtypes` module is importable,
bf16 values come back as ml_dtypes.bfloat16 arrays and such arrays are
accepted; otherwise bf16 travels as uint16 arrays holding the raw bit
patterns (the upper 16 bits of the f32 value). A uint16 array is always
read as bf16 bits: rlx has no u16 dtype. f16 maps to numpy.float16 and
bool to numpy.bool_ (one byte, 0 or 1).
"""

import enum

import numpy as np

from . import _capi
from .errors import check

try:  # optional: a real numpy bfloat16
    import ml_dtypes as _ml_dtypes
    BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None


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
        """The numpy dtype arrays of this dtype have (uint16 bits for bf16 without ml_dtypes)."""
        if self is DType.BF16:
            return BFLOAT16 if BFLOAT16 is not None else np.dtype(np.uint16)
        return _TO_NUMPY[self]

    def __str__(self):
        return self.short_name


F32, F16, BF16, F64, I8, U8, I32, I64, BOOL = (DType.F32, DType.F16, DType.BF16, DType.F64,
                                                DType.I8, DType.U8, DType.I32, DType.I64,
                                                DType.BOOL)

_TO_NUMPY = {
    DType.F32: np.dtype(np.float32), DType.F16: np.dtype(np.float16),
    DType.F64: np.dtype(np.float64), DType.I8: np.dtype(np.int8),
    DType.U8: np.dtype(np.uint8), DType.I32: np.dtype(np.int32),
    DType.I64: np.dtype(np.int64), DType.BOOL: np.dtype(np.bool_),
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}
_FROM_NUMPY[np.dtype(np.uint16)] = DType.BF16
if BFLOAT16 is not None:
    _FROM_NUMPY[BFLOAT16] = DType.BF16

_ALIASES = {"float32": F32, "float": F32, "float16": F16, "half": F16, "bfloat16": BF16,
            "float64": F64, "double": F64, "int8": I8, "uint8": U8, "int32": I32,
            "int64": I64, "bool_": BOOL}


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
    raise TypeError(f"numpy dtype {np_dtype} has no rlx counterpart "
                    "(rlx has f32 f16 bf16 f64 i8 u8 i32 i64 bool; uint16 means bf16 bits)")


def _contiguous(arr):
    """arr in C order (np.ascontiguousarray would turn a 0-d array into 1-d)."""
    arr = np.asarray(arr)
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def dtype_of_array(arr):
    return to_dtype(arr.dtype)


def convert(array, dtype):
    """Converts an array to rlx dtype `dtype` with rlx's Cast rules (rlx_dtype_convert):
    float -> integer truncates toward zero and saturates, NaN -> 0, anything ->
    bool is != 0. Works for bf16 without ml_dtypes (uint16 bits)."""
    src = _contiguous(array)
    src_dtype = dtype_of_array(src)
    dst_dtype = to_dtype(dtype)
    dst = np.empty(src.shape, dst_dtype.numpy)
    status = _capi.lib.rlx_dtype_convert(dst.ctypes.data, dst_dtype, src.ctypes.data,
                                         src_dtype, src.size)
    check(status, f"converting {src_dtype} to {dst_dtype}")
    return dst


def as_array(value, dtype):
    """`value` (array, list or scalar) as a C-contiguous array of rlx dtype `dtype`."""
    dtype = to_dtype(dtype)
    if isinstance(value, np.ndarray) and to_dtype_or_none(value.dtype) is dtype:
        return _contiguous(value)
    if dtype is DType.BF16 and BFLOAT16 is None:
        return convert(np.asarray(value, np.float32), DType.BF16)
    return _contiguous(np.asarray(value).astype(dtype.numpy))


def to_dtype_or_none(np_dtype):
    return _FROM_NUMPY.get(np.dtype(np_dtype))


def bf16_to_f32(bits):
    """uint16 bf16 bit patterns -> float32 values."""
    return convert(np.asarray(bits, np.uint16), DType.F32)


def f32_to_bf16(values):
    """float values -> bf16 (ml_dtypes.bfloat16 if importable, else uint16 bits), rounded to
    nearest even as rlx does."""
    return convert(np.asarray(values, np.float32), DType.BF16)


