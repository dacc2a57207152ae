"""ONNX import (rlx_onnx_*) and tensor file readers (.pb, .npy) through the library."""

import ctypes
import os

import numpy as np

from . import _capi
from .dtypes import DType, _contiguous, as_array, to_dtype
from .errors import check, error_for
from .graph import Graph

lib = _capi.lib


def _frozen(frozen):
    """An rlx_onnx_frozen_input array from {name: array} (and the buffers it points into)."""
    frozen = dict(frozen or {})
    items = (_capi.FrozenInput * max(1, len(frozen)))()
    keep = []
    for i, (name, value) in enumerate(frozen.items()):
        arr = _contiguous(value) if isinstance(value, np.ndarray) else \
            as_array(value, DType.I64 if np.asarray(value).dtype.kind in "iu" else DType.F32)
        shape = _capi.dims(arr.shape)
        keep += [arr, shape]
        items[i] = _capi.FrozenInput(name.encode(), to_dtype(arr.dtype), arr.ndim,
                                     ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                                     arr.ctypes.data, arr.nbytes)
    return items, len(frozen), keep


def load_onnx(path, frozen=None):
    """Imports an ONNX model as a Graph: initializers become params (set automatically
    by compile), inputs stay inputs, symbolic dims become symbols.

    A model whose shapes depend on the values of some inputs (a Reshape target,
    Slice bounds, TopK k fed as graph inputs) imports as its interface; the
    compiled executable builds the model for each distinct value given to run
    (and keeps the last few builds).

    frozen: {input_name: array} of inputs given a value at import instead (a
    dict, even empty, asks for this mode); they become constants. When one more
    is needed the FailedPreconditionError has .needed_input naming it.
    """
    path = os.fspath(path)
    items, n, keep = _frozen(frozen)
    handle, needed, err = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    if frozen is None:
        status = lib.rlx_onnx_load(path.encode(), ctypes.byref(handle), ctypes.byref(err))
    else:
        status = lib.rlx_onnx_load_frozen_ex(path.encode(), items, n, ctypes.byref(handle),
                                             ctypes.byref(needed), ctypes.byref(err))
    del keep
    needed_input = _capi.take_string(needed.value) or None
    message = _capi.take_string(err.value)
    if status != 0:
        exc = error_for(status, message or f"cannot import {path}")
        exc.needed_input = needed_input
        raise exc
    graph = Graph(handle.value)
    graph._onnx_source = (path, dict(frozen or {}))
    return graph


def set_params(exe, path, frozen=None):
    """Sets on executable `exe` every param load_onnx made from the file's initializers."""
    items, n, keep = _frozen(frozen)
    err = ctypes.c_void_p()
    status = lib.rlx_onnx_set_params_frozen(exe.handle, os.fspath(path).encode(), items, n,
                                            ctypes.byref(err))
    del keep
    message = _capi.take_string(err.value)
    check(status, lambda: message or _capi.text(lib.rlx_exec_last_error(exe.handle)))


def _read(fn, path):
    dtype, rank = ctypes.c_int(), ctypes.c_int32()
    shape = _capi.dims([0] * _capi.MAX_RANK)
    data, nbytes, err = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p()
    status = fn(os.fspath(path).encode(), ctypes.byref(dtype), ctypes.byref(rank), shape,
                ctypes.byref(data), ctypes.byref(nbytes), ctypes.byref(err))
    message = _capi.take_string(err.value)
    check(status, message)
    try:
        dt = DType(dtype.value)
        out = np.empty(tuple(shape[i] for i in range(rank.value)), dt.numpy)
        ctypes.memmove(out.ctypes.data, data.value, min(out.nbytes, nbytes.value))
        return out
    finally:
        lib.rlx_free(data.value)


def read_onnx_tensor(path):
    """Reads an ONNX TensorProto file (.pb, as in the ONNX test data) into an array."""
    return _read(lib.rlx_onnx_read_tensor, path)


def load_npy(path):
    """Reads a .npy file with rlx's reader (numpy.load does the same for numpy dtypes)."""
    return _read(lib.rlx_npy_load, path)


def save_npy(path, array):
    """Writes a .npy file with rlx's writer (bf16 and float8 have no .npy dtype: save them
    as f32, or their bits as uint16 / uint8)."""
    arr = _contiguous(array)
    err = ctypes.c_void_p()
    status = lib.rlx_npy_save(os.fspath(path).encode(), to_dtype(arr.dtype), arr.ndim,
                              _capi.dims(arr.shape), arr.ctypes.data, arr.nbytes,
                              ctypes.byref(err))
    message = _capi.take_string(err.value)
    check(status, message)
