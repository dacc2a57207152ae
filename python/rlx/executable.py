"""Compiled graphs: rlx.compile and Executable (an rlx_exec)."""

import collections
import ctypes

import numpy as np

from . import _capi
from .dtypes import DType, _contiguous, as_array, is_bits_of, to_dtype, to_dtype_or_none
from .errors import check
from .graph import Graph, ValueInfo

lib = _capi.lib

MemoryStats = collections.namedtuple("MemoryStats",
                                     "arena_bytes tensor_bytes peak_live_bytes launches "
                                     "backend_bytes")


def _cstrings(names):
    arr = (ctypes.c_char_p * max(1, len(names)))(*[n.encode() for n in names])
    return ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)), arr


# rlx_precision by name (compile's precision=)
_PRECISIONS = {None: 0, "f32": 0, "bf16": 1, "f16": 2}


def _options(graph, strict, allow_tf32, threads, use_blas, reference, debug_nans, symbols,
             extent_symbol, states, precision=None, channels_last=False):
    """An rlx_compile_options and the ctypes buffers it points into (keep both alive)."""
    o = _capi.CompileOptions()
    lib.rlx_compile_options_init(ctypes.byref(o))
    o.strict, o.allow_tf32, o.reference, o.debug_nans = (int(strict), int(allow_tf32),
                                                         int(reference), int(debug_nans))
    o.channels_last = int(channels_last)
    if threads is not None:
        o.threads = threads
    if use_blas is not None:
        o.use_blas = {True: 1, False: 0}.get(use_blas, use_blas)
    if precision not in _PRECISIONS:
        raise ValueError("precision must be 'bf16', 'f16', 'f32' or None, not %r" % (precision,))
    o.precision = _PRECISIONS[precision]
    keep = []
    if symbols:
        names, arr = _cstrings(list(symbols))
        sizes = _capi.dims(symbols.values())
        o.symbol_names, o.symbol_sizes, o.n_symbols = names, sizes, len(symbols)
        keep += [arr, sizes]
    if extent_symbol:
        o.extent_symbol = extent_symbol.encode()
    if states:
        states = dict(states)
        out_names = [info.name for info in graph.outputs]
        indices = [out_names.index(v) if isinstance(v, str) else int(v) for v in states.values()]
        names, arr = _cstrings(list(states))
        outs = _capi.int32s(indices)
        o.state_inputs, o.state_outputs, o.n_states = names, outs, len(states)
        keep += [arr, outs]
    return o, keep


def compile(graph, device="cpu", *, strict=False, allow_tf32=False, threads=None,
            use_blas=None, reference=False, debug_nans=False, symbols=None,
            extent_symbol=None, states=None, onnx_params=True, precision=None,
            channels_last=False):
    """Compiles `graph` for `device` ("cpu", "cuda", "vulkan", "webgpu" or "best").

    strict: an op the backend cannot run natively is an error.
    threads: CPU threads (0 = all cores); use_blas: -1 auto, False never, True require.
    reference: CPU reference kernels only. debug_nans: fail naming the first node that
    makes NaN/Inf. symbols: {name: size} bindings (others bind from input shapes).
    extent_symbol: symbol compiled at its bound as an upper bound
    (Executable.set_active_extent shrinks it per run). states: {input_name: output index
    or output name}: after each run that output becomes the input, on the device.
    onnx_params: for a graph from rlx.load_onnx, set the file's initializers as params.
    precision: "bf16" or "f16" computes the graph's f32 values in that dtype (f32
    inputs, params and outputs stay f32; kernels accumulate in f32); None or "f32":
    the graph's own dtypes.
    channels_last: run an NCHW convolution network channels-last (NHWC) inside (faster
    convolutions on CUDA); inputs and outputs keep their layout.
    Errors raise the status's RlxError with the message left on the graph.
    """
    if not isinstance(graph, Graph):
        raise TypeError("compile() takes an rlx.Graph")
    o, keep = _options(graph, strict, allow_tf32, threads, use_blas, reference, debug_nans,
                       symbols, extent_symbol, states, precision,
                       channels_last)
    handle = ctypes.c_void_p()
    status = lib.rlx_compile(graph.handle, device.encode(), ctypes.byref(o),
                             ctypes.byref(handle))
    del keep
    graph._check(status)
    outputs = [info._replace(tensor=None) for info in graph.outputs]
    exe = Executable(handle.value, outputs, _resolved(device))
    if onnx_params and graph._onnx_source is not None:
        try:
            exe.set_onnx_params(*graph._onnx_source)
        except BaseException:
            exe.close()
            raise
    return exe


def _resolved(device):
    """The backend a device name stands for ("best" -> "vulkan"), as the library picks it."""
    name = ctypes.c_char_p()
    if lib.rlx_device_resolve(device.encode(), ctypes.byref(name)) == 0 and name.value:
        return _capi.text(name.value)
    return device


class Executable(_capi.Owned):
    """A compiled graph with its own memory. Set params and inputs, run, read outputs.
    Use as a context manager or call close(); also freed when collected."""

    _destroy = lib.rlx_exec_destroy
    _kind = "executable"

    def __init__(self, handle, outputs, device):
        """Made by rlx.compile; .device is the backend it runs on ("cpu", "vulkan", ...)."""
        self._h = handle
        self._compiled_outputs = list(outputs)  # ValueInfo as compiled (symbols by name)
        self.device = device

    def _check(self, status):
        check(status, lambda: _capi.text(lib.rlx_exec_last_error(self._h)))

    def clone(self):
        """A new executable sharing the compiled code, with its own memory (params copied)."""
        out = ctypes.c_void_p()
        self._check(lib.rlx_exec_clone(self.handle, ctypes.byref(out)))
        return Executable(out.value, self._compiled_outputs, self.device)

    # ---- what it takes and gives
    def _infos(self, count_fn, get_fn):
        infos = []
        for i in range(count_fn(self.handle)):
            info = _capi.ValueInfo()
            self._check(get_fn(self.handle, i, ctypes.byref(info)))
            shape = tuple(int(info.shape[d]) if info.shape[d] >= 0
                          else _capi.text(info.dim_names[d]) for d in range(info.rank))
            infos.append(ValueInfo(_capi.text(info.name), DType(info.dtype), shape, None))
        return infos

    @property
    def inputs(self):
        """ValueInfo (name, dtype, shape, None) of each input, symbolic dims by name."""
        return self._infos(lib.rlx_exec_input_count, lib.rlx_exec_get_input)

    @property
    def params(self):
        return self._infos(lib.rlx_exec_param_count, lib.rlx_exec_get_param)

    @property
    def output_count(self):
        return lib.rlx_exec_output_count(self.handle)

    def output_type(self, index):
        """(DType, shape) of output `index` after the last run (as compiled before any run;
        then an unbound symbolic dim is negative)."""
        dtype, rank, shape = ctypes.c_int(), ctypes.c_int32(), _capi.dims([0] * _capi.MAX_RANK)
        self._check(lib.rlx_exec_output_type(self.handle, index, ctypes.byref(dtype),
                                             ctypes.byref(rank), shape))
        return DType(dtype.value), tuple(shape[i] for i in range(rank.value))

    @property
    def outputs(self):
        """ValueInfo of each output: its label (or None), dtype and shape after the last
        run (before a run: as compiled, symbolic dims by name)."""
        from .errors import FailedPreconditionError
        infos = []
        for i, compiled in enumerate(self._compiled_outputs):
            try:
                dtype, shape = self.output_type(i)
            except FailedPreconditionError:
                dtype, shape = compiled.dtype, compiled.shape
            infos.append(ValueInfo(compiled.name, dtype, shape, None))
        return infos

    def _info_named(self, infos, name):
        for info in infos:
            if info.name == name:
                return info
        return None

    # ---- params and inputs
    def set_param(self, name, value):
        """Sets a param from an array of its dtype (or f32 for a float param). Lists and
        scalars are converted to the param's dtype."""
        info = self._info_named(self.params, name) if _needs_info(value) else None
        arr, dtype = _array(value, info)
        self._check(lib.rlx_exec_set_param(self.handle, name.encode(), dtype,
                                           arr.ctypes.data, arr.nbytes))

    def set_params(self, params=None, **kwargs):
        """Sets every param of a dict (name -> array) and keyword arguments."""
        for name, value in dict(params or {}, **kwargs).items():
            self.set_param(name, value)

    def set_input(self, name, value):
        """Copies an array in as input `name`: its dtype must be the input's (a list or
        scalar is converted to it); its shape binds the symbolic dims."""
        info = self._info_named(self.inputs, name) if _needs_info(value) else None
        arr, dtype = _array(value, info)
        self._check(lib.rlx_exec_set_input(self.handle, name.encode(), dtype,
                                           _capi.dims(arr.shape), arr.ndim, arr.ctypes.data,
                                           arr.nbytes))

    def set_inputs(self, inputs=None, **kwargs):
        for name, value in dict(inputs or {}, **kwargs).items():
            self.set_input(name, value)

    def set_seed(self, seed):
        """Seed of the next runs' Sample nodes."""
        self._check(lib.rlx_exec_set_seed(self.handle, seed))

    def set_active_extent(self, n):
        """Runs the compiled extent_symbol at n <= its bound."""
        self._check(lib.rlx_exec_set_active_extent(self.handle, n))

    def feed(self, input_name, output_index, row=-1):
        """After every run, copy output `output_index` (or its row `row` along dim 0) into
        input `input_name`, on the device."""
        self._check(lib.rlx_exec_feed(self.handle, input_name.encode(), output_index, row))

    def select_outputs(self, indices=None):
        """Only these outputs are read back after a run (None: all)."""
        if indices is None:
            self._check(lib.rlx_exec_select_outputs(self.handle, None, -1))
            return
        indices = list(indices)
        self._check(lib.rlx_exec_select_outputs(self.handle, _capi.int32s(indices),
                                                len(indices)))

    def set_onnx_params(self, path, frozen=None):
        """Sets the params rlx.load_onnx made from the file's initializers."""
        from .onnx import set_params
        set_params(self, path, frozen)

    # ---- run and read
    def run(self, inputs=None, **kwargs):
        """Sets the given inputs, runs, and returns every output as a numpy array (None for
        an output not chosen by select_outputs)."""
        self.set_inputs(inputs, **kwargs)
        self._check(lib.rlx_exec_run(self.handle))
        return [self._read_if_selected(i) for i in range(self.output_count)]

    __call__ = run

    def _read_if_selected(self, index):
        from .errors import FailedPreconditionError
        try:
            return self.output(index)
        except FailedPreconditionError:
            return None

    def run_only(self):
        """Runs without reading anything back (read with output())."""
        self._check(lib.rlx_exec_run(self.handle))

    def output(self, index=0, dtype=None):
        """Output `index` of the last run as a numpy array; dtype (float outputs only) asks
        for a conversion, e.g. dtype='f32' for a bf16 output."""
        own, shape = self.output_type(index)
        dtype = own if dtype is None else to_dtype(dtype)
        if any(d < 0 for d in shape):
            # Not yet run with the symbols bound: the library names the problem.
            self._check(lib.rlx_exec_read_output(self.handle, index, dtype, None, 0))
            raise AssertionError("rlx_exec_read_output accepted an unbound shape")
        out = np.empty(shape, dtype.numpy)
        self._check(lib.rlx_exec_read_output(self.handle, index, dtype, out.ctypes.data,
                                             out.nbytes))
        return out

    def output_row(self, index, row, dtype=None):
        """Row `row` (along dim 0) of output `index`."""
        own, shape = self.output_type(index)
        dtype = own if dtype is None else to_dtype(dtype)
        out = np.empty(tuple(max(d, 0) for d in shape[1:]), dtype.numpy)
        self._check(lib.rlx_exec_read_output_row(self.handle, index, row, dtype,
                                                 out.ctypes.data, out.nbytes))
        return out

    # ---- diagnostics
    def report(self):
        """The dispatch report (per op kind native / fused / decomposed / fallback, memory)."""
        out = ctypes.c_void_p()
        self._check(lib.rlx_exec_report(self.handle, ctypes.byref(out)))
        return _capi.take_string(out.value)

    def memory_stats(self):
        s = _capi.MemoryStats()
        self._check(lib.rlx_exec_memory_stats(self.handle, ctypes.byref(s)))
        return MemoryStats(s.arena_bytes, s.tensor_bytes, s.peak_live_bytes, s.launches,
                           s.backend_bytes)

    def to_dot(self, title=None):
        """Graphviz view of the graph after the compiler's passes."""
        out = ctypes.c_void_p()
        self._check(lib.rlx_exec_print_dot(self.handle, title.encode() if title else None,
                                           ctypes.byref(out)))
        return _capi.take_string(out.value)

    def set_trace(self, path):
        """Adds every later run's steps to a Chrome trace-event JSON file (Perfetto);
        None stops tracing. The file is complete once this executable is closed."""
        self._check(lib.rlx_exec_set_trace(self.handle, str(path).encode() if path else None))

    def last_device_ms(self):
        """Device milliseconds of the last run where the backend measures them, else None."""
        ms = ctypes.c_double(-1.0)
        status = lib.rlx_exec_last_device_ms(self.handle, ctypes.byref(ms))
        if status == 3:  # UNIMPLEMENTED: this backend never measures
            return None
        self._check(status)
        return ms.value if ms.value >= 0 else None


def _needs_info(value):
    """Lists and scalars take the declared dtype; uint16 / uint8 arrays may be bf16 /
    float8 bits, which only the declared dtype tells."""
    return not isinstance(value, np.ndarray) or value.dtype in (np.uint16, np.uint8)


def _array(value, info):
    """A C-contiguous array and its rlx dtype for set_input/set_param: an ndarray keeps its
    dtype (the library checks it), except that uint16 / uint8 arrays given for a bf16 /
    float8 slot are that slot's bits; other values take the declared dtype of `info`."""
    if isinstance(value, np.ndarray):
        if info is not None and is_bits_of(value.dtype, info.dtype):
            return _contiguous(value), info.dtype
        if to_dtype_or_none(value.dtype) is None:
            raise TypeError(f"numpy dtype {value.dtype} has no rlx counterpart")
        return _contiguous(value), to_dtype(value.dtype)
    if info is not None:
        return as_array(value, info.dtype), info.dtype
    arr = _contiguous(np.asarray(value))
    return arr, to_dtype(arr.dtype)
