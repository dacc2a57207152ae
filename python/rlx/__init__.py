"""rlx: an ML compiler and runtime (Python bindings over the C library librlx.so).

    import numpy as np, rlx
    with rlx.Graph() as g:
        x = g.input("x", "f32", ["n", 8])
        w = g.param("w", "f32", [8, 4])
        g.set_outputs((x @ w).relu())
        exe = g.compile("cpu")
    exe.set_param("w", np.ones((8, 4), np.float32))
    y, = exe.run(x=np.ones((3, 8), np.float32))

The library is found through env RLX_LIBRARY, else the copy installed with the
package (rlx/_lib/librlx.so), else the system's (find_library / prefixes).
bf16 and float8 arrays are ml_dtypes.bfloat16 / float8_* when that module is
importable, else uint16 / uint8 bit patterns; a bare uint16 array is u16 (see
rlx.dtypes).
"""

import ctypes as _ctypes

from . import _capi
from .devices import Device, device, devices, is_available, resolve_device
from .dtypes import (BF16, BOOL, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F16, F32, F64, I8,
                     I16, I32, I64, U8, U16, U32, U64, DType, bf16_to_f32, convert,
                     f32_to_bf16, to_dtype)
from .errors import (FailedPreconditionError, InternalError, InvalidArgumentError,
                     NotFoundError, OutOfRangeError, ResourceExhaustedError, RlxError,
                     UnavailableError, UnimplementedError)
from .executable import Executable, MemoryStats, compile
from .graph import (Activation, Binary, Compare, Graph, Layout, Mask, Reduce, RopeStyle,
                    Tensor, ValueInfo)
from .onnx import load_npy, load_onnx, read_onnx_tensor, save_npy
from .llm import LLM, Tokenizer, load_llm
from .train import Trainer

__version__ = "0.1.0"  # version of these bindings; version() is the library's

library_path = _capi.library_path


def version():
    """The C library's version string (rlx_version()), or this package's version when the
    library predates rlx_version."""
    fn = getattr(_capi.lib, "rlx_version", None)
    if fn is None:
        return __version__
    # Read as a pointer first: a library returning a packed integer instead of a string
    # must not be dereferenced.
    fn.restype, fn.argtypes = _ctypes.c_void_p, []
    value = fn()
    if value is None:
        return __version__
    if value < 65536:
        return str(value)
    return _ctypes.string_at(value).decode("utf-8", "replace")


def status_name(status):
    """The name of an rlx_status code ("INVALID_ARGUMENT")."""
    return _capi.text(_capi.lib.rlx_status_name(status))


def parse(text):
    """A Graph from rlx's text format (Graph.from_text)."""
    return Graph.from_text(text)


def load(path):
    """A Graph from a text-format file, or an ONNX model (by its .onnx suffix)."""
    if str(path).endswith(".onnx"):
        return load_onnx(path)
    return Graph.load(path)


__all__ = [
    "Activation", "BF16", "BOOL", "Binary", "Compare", "DType", "Device", "Executable",
    "F8E4M3FN", "F8E4M3FNUZ", "F8E5M2", "F8E5M2FNUZ", "F16", "F32", "F64",
    "FailedPreconditionError", "Graph", "I8", "I16", "I32", "I64",
    "InternalError", "InvalidArgumentError", "Layout", "Mask", "MemoryStats",
    "NotFoundError", "OutOfRangeError", "Reduce", "ResourceExhaustedError", "RlxError",
    "RopeStyle", "Tensor", "Trainer", "U8", "U16", "U32", "U64", "UnavailableError", "UnimplementedError", "ValueInfo",
    "bf16_to_f32", "compile", "convert", "device", "devices", "f32_to_bf16",
    "is_available", "library_path", "load", "load_npy", "load_onnx", "parse",
    "read_onnx_tensor", "resolve_device", "save_npy", "status_name", "to_dtype", "version",
]
