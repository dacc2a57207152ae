"""Loads the rlx shared library and declares the C API (include/rlx.h) to ctypes.

Everything here mirrors rlx.h one to one; the Pythonic layer lives in the
other modules. The library is looked up in a fixed order and never replaced
by a guess: if the named place does not hold a usable librlx, import fails
saying where it looked.
"""

import ctypes
import ctypes.util
import os
import sys

from ctypes import (POINTER, Structure, c_char_p, c_double, c_float, c_int, c_int32,
                    c_int64, c_size_t, c_uint64, c_void_p)

MAX_RANK = 8
NONE = -1  # RLX_NONE: an absent optional tensor
DIM_INFER = -(2 ** 63)  # RLX_DIM_INFER

_LIB_NAME = "librlx.so"


def _candidates():
    """(description, path) pairs in lookup order, after RLX_LIBRARY."""
    here = os.path.dirname(os.path.abspath(__file__))
    yield "bundled with the package", os.path.join(here, "_lib", _LIB_NAME)
    # None (nothing found) is listed too, so the error shows it was asked.
    yield "ctypes.util.find_library('rlx')", ctypes.util.find_library("rlx")
    prefixes = [sys.prefix, "/usr/local", "/usr"]
    for prefix in dict.fromkeys(prefixes):
        for libdir in ("lib", "lib64", "lib/x86_64-linux-gnu"):
            yield "installed prefix", os.path.join(prefix, libdir, _LIB_NAME)


def _open(path):
    lib = ctypes.CDLL(path)
    # A library that loads but is not rlx (a stale or foreign librlx) is refused.
    if not hasattr(lib, "rlx_graph_create") or not hasattr(lib, "rlx_compile"):
        raise OSError(f"{path} does not export the rlx C API (rlx_graph_create)")
    return lib


def _load():
    explicit = os.environ.get("RLX_LIBRARY")
    if explicit:
        # An explicit choice is final: no fallback when it is wrong.
        try:
            return _open(explicit), explicit
        except OSError as err:
            raise ImportError(f"rlx: RLX_LIBRARY={explicit} cannot be loaded: {err}") from None
    looked = []
    for what, path in _candidates():
        if path is None:
            looked.append(f"{what}: found nothing")
            continue
        # find_library returns a bare soname that dlopen resolves itself.
        if os.path.sep in path and not os.path.exists(path):
            looked.append(f"{path} ({what}: absent)")
            continue
        try:
            return _open(path), path
        except OSError as err:
            looked.append(f"{path} ({what}: {err})")
    looked.insert(0, "RLX_LIBRARY (unset)")
    raise ImportError("rlx: the shared library librlx.so was not found. Looked in:\n  "
                      + "\n  ".join(looked)
                      + "\nBuild it (scripts/build.sh makes build/librlx.so) and reinstall "
                      "the package, or set RLX_LIBRARY to its path.")


lib, library_path = _load()


class ValueInfo(Structure):
    _fields_ = [("name", c_char_p), ("tensor", c_int32), ("dtype", c_int), ("rank", c_int32),
                ("shape", c_int64 * MAX_RANK), ("dim_names", c_char_p * MAX_RANK)]


class AttentionDesc(Structure):
    _fields_ = [("num_heads", c_int32), ("num_kv_heads", c_int32), ("head_dim", c_int32),
                ("layout", c_int), ("mask", c_int), ("window", c_int32),
                ("score_scale", c_float), ("softcap", c_float)]


class DeviceInfo(Structure):
    _fields_ = [("name", c_char_p), ("available", c_int32), ("detail", c_char_p)]


class CompileOptions(Structure):
    _fields_ = [("strict", c_int32), ("allow_tf32", c_int32), ("threads", c_int32),
                ("use_blas", c_int32), ("reference", c_int32), ("debug_nans", c_int32),
                ("symbol_names", POINTER(c_char_p)), ("symbol_sizes", POINTER(c_int64)),
                ("n_symbols", c_int32), ("extent_symbol", c_char_p),
                ("state_inputs", POINTER(c_char_p)), ("state_outputs", POINTER(c_int32)),
                ("n_states", c_int32), ("precision", c_int32),
                ("channels_last", c_int32)]


class MemoryStats(Structure):
    _fields_ = [("arena_bytes", c_uint64), ("tensor_bytes", c_uint64),
                ("peak_live_bytes", c_uint64), ("launches", c_int32),
                ("backend_bytes", c_uint64)]


class FrozenInput(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("rank", c_int32),
                ("shape", POINTER(c_int64)), ("data", c_void_p), ("bytes", c_size_t)]


class SgdDesc(Structure):
    _fields_ = [("momentum", c_float), ("dampening", c_float), ("weight_decay", c_float),
                ("nesterov", c_int32)]


class AdamDesc(Structure):
    _fields_ = [("beta1", c_float), ("beta2", c_float), ("eps", c_float),
                ("weight_decay", c_float), ("decoupled", c_int32)]


class TrainOptions(Structure):
    _fields_ = [("optimizer", c_int), ("lr", c_float), ("sgd", SgdDesc), ("adam", AdamDesc),
                ("clip_norm", c_float), ("accumulate", c_int32), ("loss_scale", c_float),
                ("dynamic_loss_scale", c_int32), ("frozen", POINTER(c_char_p)),
                ("n_frozen", c_int32), ("keep_grads", c_int32)]


class LlmOptions(Structure):
    _fields_ = [("batch", c_int64), ("seq_len", c_int64), ("max_seq", c_int64)]


P = c_void_p           # rlx_graph* / rlx_exec* / data pointers
S = c_int              # rlx_status
T = c_int32            # rlx_tensor
OUT_T = POINTER(c_int32)
DIMS = POINTER(c_int64)
I32S = POINTER(c_int32)
OUT_STR = POINTER(c_void_p)  # char** filled with a malloc'd string (rlx_free)
OUT_CSTR = POINTER(c_char_p)  # const char** owned by the library

_PROTOTYPES = {
    "rlx_status_name": (c_char_p, [c_int]),
    "rlx_dtype_size": (c_size_t, [c_int]),
    "rlx_dtype_name": (c_char_p, [c_int]),
    "rlx_dtype_is_float": (c_int32, [c_int]),
    "rlx_dtype_convert": (S, [P, c_int, P, c_int, c_int64]),
    "rlx_graph_create": (S, [POINTER(c_void_p)]),
    "rlx_graph_destroy": (None, [P]),
    "rlx_graph_last_error": (c_char_p, [P]),
    "rlx_graph_symbol": (S, [P, c_char_p, DIMS]),
    "rlx_graph_dim_expr": (S, [P, c_int, c_int64, c_int64, DIMS]),
    "rlx_graph_tensor_type": (S, [P, T, POINTER(c_int), I32S, DIMS]),
    "rlx_graph_node_count": (c_int32, [P]),
    "rlx_graph_input_count": (c_int32, [P]),
    "rlx_graph_param_count": (c_int32, [P]),
    "rlx_graph_output_count": (c_int32, [P]),
    "rlx_graph_get_input": (S, [P, c_int32, POINTER(ValueInfo)]),
    "rlx_graph_get_param": (S, [P, c_int32, POINTER(ValueInfo)]),
    "rlx_graph_get_output": (S, [P, c_int32, POINTER(ValueInfo)]),
    "rlx_graph_symbol_count": (c_int32, [P]),
    "rlx_graph_symbol_name": (S, [P, c_int64, OUT_CSTR]),
    "rlx_graph_set_name": (S, [P, T, c_char_p]),
    "rlx_graph_set_outputs": (S, [P, I32S, c_int32]),
    "rlx_graph_add_input": (S, [P, c_char_p, c_int, DIMS, c_int32, OUT_T]),
    "rlx_graph_add_param": (S, [P, c_char_p, c_int, DIMS, c_int32, OUT_T]),
    "rlx_graph_add_constant": (S, [P, c_int, DIMS, c_int32, P, c_size_t, OUT_T]),
    "rlx_graph_add_reshape": (S, [P, T, DIMS, c_int32, OUT_T]),
    "rlx_graph_add_cast": (S, [P, T, c_int, OUT_T]),
    "rlx_graph_add_stop_gradient": (S, [P, T, OUT_T]),
    "rlx_graph_add_transpose": (S, [P, T, I32S, c_int32, OUT_T]),
    "rlx_graph_add_narrow": (S, [P, T, c_int32, c_int64, c_int64, OUT_T]),
    "rlx_graph_add_concat": (S, [P, I32S, c_int32, c_int32, OUT_T]),
    "rlx_graph_add_expand": (S, [P, T, DIMS, c_int32, OUT_T]),
    "rlx_graph_add_reverse": (S, [P, T, I32S, c_int32, OUT_T]),
    "rlx_graph_add_gather": (S, [P, T, T, c_int32, OUT_T]),
    "rlx_graph_add_scatter_add": (S, [P, T, T, T, c_int32, OUT_T]),
    "rlx_graph_add_binary": (S, [P, c_int, T, T, OUT_T]),
    "rlx_graph_add_compare": (S, [P, c_int, T, T, OUT_T]),
    "rlx_graph_add_where": (S, [P, T, T, T, OUT_T]),
    "rlx_graph_add_activation": (S, [P, c_int, T, OUT_T]),
    "rlx_graph_add_matmul": (S, [P, T, T, c_int32, c_int32, OUT_T]),
    "rlx_graph_add_fused_matmul_bias_act": (S, [P, T, T, T, c_int32, c_int32, c_int, OUT_T]),
    "rlx_graph_add_reduce": (S, [P, c_int, T, I32S, c_int32, c_int32, OUT_T]),
    "rlx_graph_add_argmax": (S, [P, T, c_int32, c_int32, OUT_T]),
    "rlx_graph_add_argmin": (S, [P, T, c_int32, c_int32, OUT_T]),
    "rlx_graph_add_softmax": (S, [P, T, c_int32, OUT_T]),
    "rlx_graph_add_log_softmax": (S, [P, T, c_int32, OUT_T]),
    "rlx_graph_add_cumsum": (S, [P, T, c_int32, c_int32, c_int32, OUT_T]),
    "rlx_graph_add_topk": (S, [P, T, c_int64, c_int32, c_int32, OUT_T, OUT_T]),
    "rlx_graph_add_layer_norm": (S, [P, T, T, T, c_int32, c_float, OUT_T]),
    "rlx_graph_add_rms_norm": (S, [P, T, T, c_float, OUT_T]),
    "rlx_graph_add_fused_residual_layer_norm": (S, [P, T, T, T, T, T, c_float, OUT_T, OUT_T]),
    "rlx_graph_add_fused_residual_rms_norm": (S, [P, T, T, T, T, c_float, OUT_T, OUT_T]),
    "rlx_graph_add_attention": (S, [P, T, T, T, T, POINTER(AttentionDesc), OUT_T]),
    "rlx_graph_add_attention_backward": (S, [P, T, T, T, T, T, T, POINTER(AttentionDesc), OUT_T,
                                             OUT_T, OUT_T]),
    "rlx_graph_add_rope": (S, [P, T, T, T, c_int32, c_int32, c_int, c_int, OUT_T]),
    "rlx_graph_add_sample": (S, [P, T, c_int32, c_float, c_float, OUT_T]),
    "rlx_graph_add_pool": (S, [P, T, c_int, c_int32, DIMS, DIMS, DIMS, DIMS, c_int32, c_int32,
                               OUT_T]),
    "rlx_graph_add_pad": (S, [P, T, c_int, DIMS, c_float, OUT_T]),
    "rlx_graph_add_depth_to_space": (S, [P, T, c_int32, c_int, OUT_T]),
    "rlx_graph_add_space_to_depth": (S, [P, T, c_int32, OUT_T]),
    "rlx_graph_add_resize": (S, [P, T, DIMS, c_int, c_int, c_int, c_float, c_int32,
                                 POINTER(c_float), POINTER(c_float), c_float, OUT_T]),
    "rlx_graph_add_grid_sample": (S, [P, T, T, c_int, c_int, c_int32, OUT_T]),
    "rlx_graph_add_roi_align": (S, [P, T, T, T, c_int, c_int64, c_int64, c_int32, c_float,
                                    c_int32, OUT_T]),
    "rlx_graph_add_conv": (S, [P, T, T, T, T, c_int32, DIMS, DIMS, DIMS, c_int32, c_int, c_int,
                               OUT_T]),
    "rlx_graph_add_conv_transpose": (S, [P, T, T, T, T, c_int32, DIMS, DIMS, DIMS, DIMS, c_int32,
                                         c_int, c_int, OUT_T]),
    "rlx_graph_add_im2col": (S, [P, T, c_int32, DIMS, DIMS, DIMS, DIMS, c_int, OUT_T]),
    "rlx_graph_add_group_norm": (S, [P, T, T, T, c_int32, c_float, OUT_T]),
    "rlx_graph_add_channel_norm": (S, [P, T, T, T, c_float, OUT_T]),
    "rlx_graph_add_batch_norm": (S, [P, T, T, T, T, T, c_float, OUT_T]),
    "rlx_graph_add_lrn": (S, [P, T, c_int32, c_float, c_float, c_float, OUT_T]),
    # training: row-wise backward ops
    "rlx_graph_add_layer_norm_backward": (S, [P, T, T, T, c_int32, c_float, OUT_T, OUT_T,
                                              OUT_T]),
    "rlx_graph_add_rms_norm_backward": (S, [P, T, T, T, c_float, OUT_T, OUT_T]),
    "rlx_graph_add_softmax_backward": (S, [P, T, T, c_int32, c_int32, OUT_T]),
    "rlx_graph_add_rope_backward": (S, [P, T, T, T, c_int32, c_int32, c_int, c_int, OUT_T]),
    "rlx_graph_add_cumsum_backward": (S, [P, T, c_int32, c_int32, c_int32, OUT_T]),
    "rlx_graph_add_cross_entropy": (S, [P, T, T, c_int64, c_float, OUT_T]),
    "rlx_graph_add_cross_entropy_backward": (S, [P, T, T, T, c_int64, c_float, OUT_T]),
    "rlx_graph_add_mse_loss": (S, [P, T, T, OUT_T]),
    "rlx_graph_add_gather_backward": (S, [P, T, T, c_int32, c_int64, OUT_T]),
    "rlx_graph_add_sgd_update": (S, [P, T, T, T, T, POINTER(SgdDesc), OUT_T, OUT_T]),
    "rlx_graph_add_adam_update": (S, [P, T, T, T, T, T, POINTER(AdamDesc), OUT_T, OUT_T,
                                      OUT_T]),
    # training (Tier 2), vision
    "rlx_graph_add_conv_backward_weight": (S, [P, T, T, T, c_int32, DIMS, DIMS, DIMS, c_int32,
                                               c_int, OUT_T]),
    "rlx_graph_add_pool_backward": (S, [P, T, T, c_int, c_int32, DIMS, DIMS, DIMS, DIMS, c_int32,
                                        c_int32, OUT_T]),
    "rlx_graph_grad": (S, [P, T, POINTER(c_int32), c_int32, T, OUT_T]),
    "rlx_graph_print": (S, [P, OUT_STR]),
    "rlx_graph_parse": (S, [c_char_p, POINTER(c_void_p), OUT_STR]),
    "rlx_free": (None, [c_void_p]),
    "rlx_graph_print_dot": (S, [P, c_char_p, OUT_STR]),
    "rlx_npy_load": (S, [c_char_p, POINTER(c_int), I32S, DIMS, POINTER(c_void_p),
                         POINTER(c_size_t), OUT_STR]),
    "rlx_npy_save": (S, [c_char_p, c_int, c_int32, DIMS, P, c_size_t, OUT_STR]),
    "rlx_onnx_load": (S, [c_char_p, POINTER(c_void_p), OUT_STR]),
    "rlx_onnx_set_params": (S, [P, c_char_p, OUT_STR]),
    "rlx_onnx_load_frozen": (S, [c_char_p, POINTER(FrozenInput), c_int32, POINTER(c_void_p),
                                 OUT_STR]),
    "rlx_onnx_set_params_frozen": (S, [P, c_char_p, POINTER(FrozenInput), c_int32, OUT_STR]),
    "rlx_onnx_load_frozen_ex": (S, [c_char_p, POINTER(FrozenInput), c_int32,
                                    POINTER(c_void_p), OUT_STR, OUT_STR]),
    "rlx_onnx_read_tensor": (S, [c_char_p, POINTER(c_int), I32S, DIMS, POINTER(c_void_p),
                                 POINTER(c_size_t), OUT_STR]),
    "rlx_device_count": (c_int32, []),
    "rlx_device_get": (S, [c_int32, POINTER(DeviceInfo)]),
    "rlx_device_resolve": (S, [c_char_p, OUT_CSTR]),
    "rlx_compile_options_init": (None, [POINTER(CompileOptions)]),
    "rlx_compile": (S, [P, c_char_p, POINTER(CompileOptions), POINTER(c_void_p)]),
    "rlx_exec_destroy": (None, [P]),
    "rlx_exec_last_error": (c_char_p, [P]),
    "rlx_exec_clone": (S, [P, POINTER(c_void_p)]),
    "rlx_exec_set_param": (S, [P, c_char_p, c_int, P, c_size_t]),
    "rlx_exec_set_input": (S, [P, c_char_p, c_int, DIMS, c_int32, P, c_size_t]),
    "rlx_exec_set_seed": (S, [P, c_uint64]),
    "rlx_exec_set_active_extent": (S, [P, c_int64]),
    "rlx_exec_feed": (S, [P, c_char_p, c_int32, c_int64]),
    "rlx_exec_select_outputs": (S, [P, I32S, c_int32]),
    "rlx_exec_run": (S, [P]),
    "rlx_exec_output_count": (c_int32, [P]),
    "rlx_exec_output_type": (S, [P, c_int32, POINTER(c_int), I32S, DIMS]),
    "rlx_exec_read_output": (S, [P, c_int32, c_int, P, c_size_t]),
    "rlx_exec_input_count": (c_int32, [P]),
    "rlx_exec_get_input": (S, [P, c_int32, POINTER(ValueInfo)]),
    "rlx_exec_param_count": (c_int32, [P]),
    "rlx_exec_get_param": (S, [P, c_int32, POINTER(ValueInfo)]),
    "rlx_exec_print_dot": (S, [P, c_char_p, OUT_STR]),
    "rlx_exec_last_device_ms": (S, [P, POINTER(c_double)]),
    "rlx_exec_set_trace": (S, [P, c_char_p]),
    "rlx_exec_read_output_row": (S, [P, c_int32, c_int64, c_int, P, c_size_t]),
    "rlx_exec_report": (S, [P, OUT_STR]),
    "rlx_exec_memory_stats": (S, [P, POINTER(MemoryStats)]),
    # training (rlx_trainer)
    "rlx_train_options_init": (None, [POINTER(TrainOptions), c_int]),
    "rlx_train_compile": (S, [P, T, c_char_p, POINTER(CompileOptions), POINTER(TrainOptions),
                              POINTER(c_void_p)]),
    "rlx_trainer_destroy": (None, [P]),
    "rlx_trainer_last_error": (c_char_p, [P]),
    "rlx_trainer_set_param": (S, [P, c_char_p, c_int, P, c_size_t]),
    "rlx_trainer_read_param": (S, [P, c_char_p, c_int, P, c_size_t]),
    "rlx_trainer_set_input": (S, [P, c_char_p, c_int, DIMS, c_int32, P, c_size_t]),
    "rlx_trainer_set_lr": (S, [P, c_float]),
    "rlx_trainer_step": (S, [P, POINTER(c_float)]),
    "rlx_trainer_step_count": (c_int64, [P]),
    "rlx_trainer_read_grad": (S, [P, c_char_p, c_int, P, c_size_t]),
    "rlx_trainer_save": (S, [P, c_char_p]),
    "rlx_trainer_load": (S, [P, c_char_p]),
    "rlx_trainer_exec": (P, [P]),
    "rlx_llm_options_init": (None, [POINTER(LlmOptions)]),
    "rlx_llm_load": (S, [c_char_p, POINTER(LlmOptions), POINTER(c_void_p), OUT_STR]),
    "rlx_llm_destroy": (None, [P]),
    "rlx_llm_last_error": (c_char_p, [P]),
    "rlx_llm_graph": (P, [P]),
    "rlx_llm_set_params": (S, [P, P]),
    "rlx_tokenizer_load": (S, [c_char_p, POINTER(c_void_p), OUT_STR]),
    "rlx_tokenizer_destroy": (None, [P]),
    "rlx_tokenizer_last_error": (c_char_p, [P]),
    "rlx_tokenizer_kind": (c_char_p, [P]),
    "rlx_tokenizer_vocab_size": (c_int32, [P]),
    "rlx_tokenizer_bos": (c_int32, [P]),
    "rlx_tokenizer_eos": (c_int32, [P]),
    "rlx_tokenizer_encode": (S, [P, c_char_p, c_size_t, c_int32, POINTER(POINTER(c_int32)),
                                 POINTER(c_int64)]),
    "rlx_tokenizer_decode": (S, [P, POINTER(c_int32), c_int64, c_int32, OUT_STR,
                                 POINTER(c_size_t)]),
    "rlx_tokenizer_from_hf": (S, [c_char_p, POINTER(c_void_p), OUT_STR]),
    "rlx_tokenizer_chat_template": (c_char_p, [P]),
    "rlx_tokenizer_end_ids": (c_int32, [P, POINTER(POINTER(c_int32))]),
    "rlx_graph_grouped_matmul": (S, [P, T, T, T, c_int32, OUT_T]),
}


def _declare():
    missing = []
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name, None)
        if fn is None:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise ImportError(f"rlx: {library_path} lacks {', '.join(missing)} "
                          "(a library older than this package?)")


_declare()


def take_string(ptr):
    """Decodes and frees a malloc'd char* the library handed out (NULL -> '')."""
    if not ptr:
        return ""
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.rlx_free(ptr)


def text(b):
    return b.decode("utf-8", "replace") if b is not None else None


def dims(values):
    """A ctypes int64 array of `values` (never a NULL pointer, even when empty)."""
    values = list(values)
    return (c_int64 * max(1, len(values)))(*values)


def int32s(values):
    values = list(values)
    return (c_int32 * max(1, len(values)))(*values)


class Owned:
    """A C object this Python object owns (an rlx_graph* or rlx_exec* in _h):
    close(), the end of a with-block or collection destroys it once; using it
    afterwards raises ValueError instead of touching freed memory."""

    _destroy = None  # the rlx_*_destroy function, set by the subclass
    _kind = "object"  # for the closed message

    def close(self):
        """Frees the C object now. Later calls on this object raise ValueError."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            type(self)._destroy(h)

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return not self._h

    @property
    def handle(self):
        """The C pointer as an int (for other ctypes code)."""
        if not self._h:
            raise ValueError(f"the {self._kind} is closed")
        return self._h
