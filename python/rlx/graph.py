"""The graph builder: Graph (an rlx_graph) and Tensor (a value in one graph).

Every rlx_graph_add_* function has a Graph method of the same name without
the prefix (g.matmul, g.layer_norm, ...); the common ones are also Tensor
methods and operators (a + b, a @ b, -a, x.sum(axis=1), x.relu()). Shapes are
tuples whose entries are ints (static) or str (a symbolic dim, by name).
"""

import ctypes
import collections
import enum
import numbers

import numpy as np

from . import _capi
from .dtypes import DType, as_array, to_dtype
from .errors import check

lib = _capi.lib


class Binary(enum.IntEnum):
    ADD = 0
    SUB = 1
    MUL = 2
    DIV = 3
    MAX = 4
    MIN = 5
    POW = 6


class Compare(enum.IntEnum):
    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5


class Activation(enum.IntEnum):
    NONE = 0
    RELU = 1
    SIGMOID = 2
    TANH = 3
    EXP = 4
    LOG = 5
    SQRT = 6
    RSQRT = 7
    NEG = 8
    ABS = 9
    GELU = 10
    GELU_APPROX = 11
    SILU = 12
    ROUND = 13
    SIN = 14
    COS = 15
    TAN = 16
    ATAN = 17


class Reduce(enum.IntEnum):
    SUM = 0
    MEAN = 1
    MAX = 2
    MIN = 3
    PROD = 4


class Layout(enum.IntEnum):
    BSHD = 0
    BHSD = 1


class Mask(enum.IntEnum):
    NONE = 0
    CAUSAL = 1
    CUSTOM = 2
    SLIDING = 3
    BIAS = 4


class RopeStyle(enum.IntEnum):
    NEOX = 0
    GPTJ = 1


def _enum(cls, value):
    """An enum member from a member, its int, or its name in any case ('relu')."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.upper()]
        except KeyError:
            names = ", ".join(m.name.lower() for m in cls)
            raise ValueError(f"unknown {cls.__name__} {value!r} (one of {names})") from None
    return cls(value)


ValueInfo = collections.namedtuple("ValueInfo", "name dtype shape tensor")
ValueInfo.__doc__ = """An input, param or output: name (None for an unnamed output), DType,
shape (ints, or str for a symbolic dim) and the Tensor (None on an executable)."""

_ACTIVATIONS = [a for a in Activation if a is not Activation.NONE]


class Graph(_capi.Owned):
    """An rlx graph under construction. Use as a context manager, or call close();
    the C graph is also freed when the object is collected. Executables compiled
    from a graph own a copy and outlive it."""

    _destroy = lib.rlx_graph_destroy
    _kind = "graph"

    def __init__(self, _handle=None):
        if _handle is None:
            handle = ctypes.c_void_p()
            check(lib.rlx_graph_create(ctypes.byref(handle)), "rlx_graph_create failed")
            _handle = handle.value
        self._h = _handle
        self._onnx_source = None  # (path, frozen) when made by rlx.load_onnx

    def _error(self):
        return _capi.text(lib.rlx_graph_last_error(self._h)) if self._h else "graph closed"

    def _check(self, status):
        check(status, self._error)

    def _add(self, fn, *args):
        """Calls an rlx_graph_add_* with one output tensor and wraps it."""
        out = ctypes.c_int32()
        self._check(fn(self.handle, *args, ctypes.byref(out)))
        return Tensor(self, out.value)

    # ---- conversions
    def _t(self, x, like=None):
        """A tensor id from a Tensor of this graph or a constant value (typed like `like`)."""
        if x is None:
            return _capi.NONE
        if isinstance(x, Tensor):
            if x.graph is not self:
                raise ValueError("tensor belongs to another graph")
            return x.id
        dtype = like.dtype if isinstance(like, Tensor) else None
        return self.constant(x, dtype).id

    def _dim(self, d, infer=False):
        if isinstance(d, str):
            return self.symbol(d)
        if d is None or (infer and d == -1):
            if not infer:
                raise ValueError("None is not a dim here")
            return _capi.DIM_INFER
        return int(d)

    def _dims(self, shape, infer=False):
        shape = tuple(shape) if not isinstance(shape, (int, str)) else (shape,)
        return _capi.dims(self._dim(d, infer) for d in shape), len(shape)

    def _shape_from_c(self, rank, shape, names=None):
        out = []
        for i in range(rank):
            d = shape[i]
            if d >= 0:
                out.append(int(d))
            elif names is not None and names[i] is not None:
                out.append(_capi.text(names[i]))
            else:
                out.append(self.symbol_name(d))
        return tuple(out)

    # ---- symbols and queries
    def symbol(self, name):
        """The dim code of symbol `name` (created on first use). Shapes accept the name itself."""
        code = ctypes.c_int64()
        self._check(lib.rlx_graph_symbol(self.handle, name.encode(), ctypes.byref(code)))
        return code.value

    _DIM_OPS = {"+": 1, "-": 2, "*": 3, "/": 4, "cdiv": 5, "%": 6, "min": 7, "max": 8}

    def dim_expr(self, op, a, b):
        """The dim code of `a op b` ("+", "-", "*", "/" (floor), "cdiv", "%", "min", "max")
        over dims (sizes, symbol names or codes); shapes report it as a string ("B*T")."""
        if op not in self._DIM_OPS:
            raise ValueError("dim op %r is not one of %s" % (op, sorted(self._DIM_OPS)))
        code = ctypes.c_int64()
        self._check(lib.rlx_graph_dim_expr(self.handle, self._DIM_OPS[op], self._dim(a),
                                           self._dim(b), ctypes.byref(code)))
        return code.value

    def symbol_name(self, code):
        name = ctypes.c_char_p()
        self._check(lib.rlx_graph_symbol_name(self.handle, code, ctypes.byref(name)))
        return _capi.text(name.value)

    @property
    def symbols(self):
        """Names of the graph's symbols, in creation order."""
        return [self.symbol_name(-(i + 1)) for i in range(lib.rlx_graph_symbol_count(self.handle))]

    def tensor_type(self, t):
        """(DType, shape) of tensor t."""
        dtype, rank, shape = ctypes.c_int(), ctypes.c_int32(), _capi.dims([0] * _capi.MAX_RANK)
        self._check(lib.rlx_graph_tensor_type(self.handle, self._t(t), ctypes.byref(dtype),
                                              ctypes.byref(rank), shape))
        return DType(dtype.value), self._shape_from_c(rank.value, shape)

    @property
    def node_count(self):
        return lib.rlx_graph_node_count(self.handle)

    def _infos(self, count_fn, get_fn):
        infos = []
        for i in range(count_fn(self.handle)):
            info = _capi.ValueInfo()
            self._check(get_fn(self.handle, i, ctypes.byref(info)))
            infos.append(ValueInfo(_capi.text(info.name), DType(info.dtype),
                                   self._shape_from_c(info.rank, info.shape, info.dim_names),
                                   Tensor(self, info.tensor)))
        return infos

    @property
    def inputs(self):
        """ValueInfo of each input, in the order they were added."""
        return self._infos(lib.rlx_graph_input_count, lib.rlx_graph_get_input)

    @property
    def params(self):
        return self._infos(lib.rlx_graph_param_count, lib.rlx_graph_get_param)

    @property
    def outputs(self):
        """ValueInfo of each output (name: its set_name label or None)."""
        return self._infos(lib.rlx_graph_output_count, lib.rlx_graph_get_output)

    def set_outputs(self, *tensors):
        """Declares the ordered outputs: set_outputs(a, b) or set_outputs([a, b])."""
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            tensors = tuple(tensors[0])
        ids = [self._t(t) for t in tensors]
        self._check(lib.rlx_graph_set_outputs(self.handle, _capi.int32s(ids), len(ids)))

    def set_name(self, t, name):
        """Labels the node producing t (errors, text, dot; an output's name)."""
        self._check(lib.rlx_graph_set_name(self.handle, self._t(t), name.encode()))
        return t

    # ---- text, dot
    def to_text(self):
        """The graph in rlx's text format."""
        out = ctypes.c_void_p()
        self._check(lib.rlx_graph_print(self.handle, ctypes.byref(out)))
        return _capi.take_string(out.value)

    def __str__(self):
        return self.to_text() if self._h else "<closed rlx.Graph>"

    def __repr__(self):
        if not self._h:
            return "<rlx.Graph (closed)>"
        names = [i.name for i in self.inputs]
        return (f"<rlx.Graph: {self.node_count} nodes, inputs {names}, "
                f"{lib.rlx_graph_output_count(self._h)} outputs>")

    def save(self, path):
        """Writes the text format to path."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_text())

    @classmethod
    def from_text(cls, text):
        """Parses rlx's text format; InvalidArgumentError('line:col: what') on a bad text."""
        handle, err = ctypes.c_void_p(), ctypes.c_void_p()
        status = lib.rlx_graph_parse(text.encode(), ctypes.byref(handle), ctypes.byref(err))
        message = _capi.take_string(err.value)
        check(status, message)
        return cls(handle.value)

    @classmethod
    def load(cls, path):
        """Reads a text-format graph file."""
        with open(path, encoding="utf-8") as f:
            return cls.from_text(f.read())

    def to_dot(self, title=None):
        """A Graphviz digraph of the graph."""
        out = ctypes.c_void_p()
        self._check(lib.rlx_graph_print_dot(self.handle, title.encode() if title else None,
                                            ctypes.byref(out)))
        return _capi.take_string(out.value)

    # ---- compile
    def compile(self, device="cpu", **options):
        """Compiles for `device` ("cpu", "cuda", "vulkan", "webgpu", "best"); see rlx.compile."""
        from .executable import compile as _compile
        return _compile(self, device, **options)

    # ---- leaves
    def input(self, name, dtype, shape):
        """A graph input; shape entries are ints or symbol names."""
        d, rank = self._dims(shape)
        return self._add(lib.rlx_graph_add_input, name.encode(), to_dtype(dtype), d, rank)

    def param(self, name, dtype, shape):
        d, rank = self._dims(shape)
        return self._add(lib.rlx_graph_add_param, name.encode(), to_dtype(dtype), d, rank)

    def constant(self, value, dtype=None):
        """A constant from an array, list or scalar (dtype defaults to the array's;
        Python floats become f32 and ints i64 unless dtype says otherwise)."""
        if dtype is None:
            arr = np.asarray(value)
            if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
                arr = arr.astype(np.float32)  # a bare Python float means f32, as in rlx
            dtype = to_dtype(arr.dtype)
        arr = as_array(value, dtype)
        d, rank = self._dims(arr.shape)
        return self._add(lib.rlx_graph_add_constant, to_dtype(dtype), d, rank, arr.ctypes.data,
                         arr.nbytes)

    # ---- views and layout
    def reshape(self, x, shape):
        """Reshape; one dim may be -1 (inferred); symbolic dims by name."""
        d, rank = self._dims(shape, infer=True)
        return self._add(lib.rlx_graph_add_reshape, self._t(x), d, rank)

    def cast(self, x, dtype):
        return self._add(lib.rlx_graph_add_cast, self._t(x), to_dtype(dtype))

    def stop_gradient(self, x):
        return self._add(lib.rlx_graph_add_stop_gradient, self._t(x))

    def transpose(self, x, perm=None):
        """Permutes dims (default: reversed, as numpy)."""
        if perm is None:
            perm = list(reversed(range(len(self._tensor(x).shape))))
        return self._add(lib.rlx_graph_add_transpose, self._t(x), _capi.int32s(perm), len(perm))

    def narrow(self, x, axis, start, length):
        """x[..., start:start+length, ...] along axis."""
        return self._add(lib.rlx_graph_add_narrow, self._t(x), axis, start, length)

    def concat(self, xs, axis=0):
        ids = [self._t(x) for x in xs]
        return self._add(lib.rlx_graph_add_concat, _capi.int32s(ids), len(ids), axis)

    def expand(self, x, shape):
        """NumPy broadcast of x to shape."""
        d, rank = self._dims(shape)
        return self._add(lib.rlx_graph_add_expand, self._t(x), d, rank)

    def reverse(self, x, axes):
        axes = [axes] if isinstance(axes, int) else list(axes)
        return self._add(lib.rlx_graph_add_reverse, self._t(x), _capi.int32s(axes), len(axes))

    def gather(self, x, indices, axis=0):
        """x.take(indices, axis); indices is an i32/i64 tensor or an integer array."""
        if not isinstance(indices, Tensor):
            indices = self.constant(np.asarray(indices, np.int64))
        return self._add(lib.rlx_graph_add_gather, self._t(x), self._t(indices), axis)

    def scatter_add(self, base, indices, src, axis=0):
        return self._add(lib.rlx_graph_add_scatter_add, self._t(base), self._t(indices),
                         self._t(src, like=base), axis)

    # ---- elementwise
    def _pair(self, a, b):
        """Tensor ids for a binary op; a Python/numpy operand takes the other's dtype."""
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            raise TypeError("at least one operand must be a Tensor")
        return self._t(a, like=b), self._t(b, like=a)

    def binary(self, op, a, b):
        """op in Binary (or 'add', 'sub', 'mul', 'div', 'max', 'min', 'pow')."""
        ia, ib = self._pair(a, b)
        return self._add(lib.rlx_graph_add_binary, _enum(Binary, op), ia, ib)

    def add(self, a, b):
        return self.binary(Binary.ADD, a, b)

    def sub(self, a, b):
        return self.binary(Binary.SUB, a, b)

    def mul(self, a, b):
        return self.binary(Binary.MUL, a, b)

    def div(self, a, b):
        return self.binary(Binary.DIV, a, b)

    def maximum(self, a, b):
        return self.binary(Binary.MAX, a, b)

    def minimum(self, a, b):
        return self.binary(Binary.MIN, a, b)

    def pow(self, a, b):
        return self.binary(Binary.POW, a, b)

    def compare(self, op, a, b):
        """op in Compare (or 'eq', 'ne', 'lt', 'le', 'gt', 'ge'); result is bool."""
        ia, ib = self._pair(a, b)
        return self._add(lib.rlx_graph_add_compare, _enum(Compare, op), ia, ib)

    def equal(self, a, b):
        return self.compare(Compare.EQ, a, b)

    def not_equal(self, a, b):
        return self.compare(Compare.NE, a, b)

    def less(self, a, b):
        return self.compare(Compare.LT, a, b)

    def less_equal(self, a, b):
        return self.compare(Compare.LE, a, b)

    def greater(self, a, b):
        return self.compare(Compare.GT, a, b)

    def greater_equal(self, a, b):
        return self.compare(Compare.GE, a, b)

    def where(self, cond, x, y):
        like = x if isinstance(x, Tensor) else y
        return self._add(lib.rlx_graph_add_where, self._t(cond), self._t(x, like=like),
                         self._t(y, like=like))

    def activation(self, act, x):
        """act in Activation (or its name: 'relu', 'gelu_approx', ...)."""
        return self._add(lib.rlx_graph_add_activation, _enum(Activation, act), self._t(x))

    # ---- contraction
    def matmul(self, a, b, transpose_a=False, transpose_b=False):
        return self._add(lib.rlx_graph_add_matmul, self._t(a), self._t(b), int(transpose_a),
                         int(transpose_b))

    def fused_matmul_bias_act(self, a, b, bias=None, act="none", transpose_a=False,
                              transpose_b=False):
        """act(a @ b + bias); bias is [N] or None."""
        return self._add(lib.rlx_graph_add_fused_matmul_bias_act, self._t(a), self._t(b),
                         self._t(bias), int(transpose_a), int(transpose_b),
                         _enum(Activation, act))

    # ---- reductions
    def reduce(self, op, x, axis=None, keepdims=False):
        """op in Reduce (or 'sum', 'mean', 'max', 'min', 'prod'); axis None = all."""
        axes = [] if axis is None else ([axis] if isinstance(axis, int) else list(axis))
        return self._add(lib.rlx_graph_add_reduce, _enum(Reduce, op), self._t(x),
                         _capi.int32s(axes), len(axes), int(keepdims))

    def sum(self, x, axis=None, keepdims=False):
        return self.reduce(Reduce.SUM, x, axis, keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return self.reduce(Reduce.MEAN, x, axis, keepdims)

    def max(self, x, axis=None, keepdims=False):
        return self.reduce(Reduce.MAX, x, axis, keepdims)

    def min(self, x, axis=None, keepdims=False):
        return self.reduce(Reduce.MIN, x, axis, keepdims)

    def prod(self, x, axis=None, keepdims=False):
        return self.reduce(Reduce.PROD, x, axis, keepdims)

    def argmax(self, x, axis, keepdims=False):
        return self._add(lib.rlx_graph_add_argmax, self._t(x), axis, int(keepdims))

    def argmin(self, x, axis, keepdims=False):
        return self._add(lib.rlx_graph_add_argmin, self._t(x), axis, int(keepdims))

    def softmax(self, x, axis=-1):
        return self._add(lib.rlx_graph_add_softmax, self._t(x), axis)

    def log_softmax(self, x, axis=-1):
        return self._add(lib.rlx_graph_add_log_softmax, self._t(x), axis)

    def cumsum(self, x, axis, exclusive=False, reverse=False):
        return self._add(lib.rlx_graph_add_cumsum, self._t(x), axis, int(exclusive),
                         int(reverse))

    def topk(self, x, k, axis=-1, largest=True):
        """(values, i64 indices) of the k largest (or smallest) along axis, sorted."""
        values, indices = ctypes.c_int32(), ctypes.c_int32()
        self._check(lib.rlx_graph_add_topk(self.handle, self._t(x), k, axis, int(largest),
                                           ctypes.byref(values), ctypes.byref(indices)))
        return Tensor(self, values.value), Tensor(self, indices.value)

    def grouped_matmul(self, x, w, idx, transpose_b=True):
        """MoE matmul: y[r] = x[row of r] . W[idx[r]] with w [E, N, K]
        (transpose_b, the HF / GGUF expert layout) or [E, K, N]; idx shaped
        like x's leading dims, or with one more dim of k experts per row."""
        return self._add(lib.rlx_graph_grouped_matmul, self._t(x), self._t(w), self._t(idx),
                         int(transpose_b))

    # ---- normalization
    def layer_norm(self, x, gamma=None, beta=None, axis=-1, eps=1e-5):
        """Normalizes over dims [axis, rank)."""
        return self._add(lib.rlx_graph_add_layer_norm, self._t(x), self._t(gamma),
                         self._t(beta), axis, eps)

    def rms_norm(self, x, gamma=None, eps=1e-6):
        return self._add(lib.rlx_graph_add_rms_norm, self._t(x), self._t(gamma), eps)

    def fused_residual_layer_norm(self, x, residual, bias=None, gamma=None, beta=None,
                                  eps=1e-5):
        """(layer_norm(x + residual + bias), x + residual + bias)."""
        norm, total = ctypes.c_int32(), ctypes.c_int32()
        self._check(lib.rlx_graph_add_fused_residual_layer_norm(
            self.handle, self._t(x), self._t(residual), self._t(bias), self._t(gamma),
            self._t(beta), eps, ctypes.byref(norm), ctypes.byref(total)))
        return Tensor(self, norm.value), Tensor(self, total.value)

    def fused_residual_rms_norm(self, x, residual, bias=None, gamma=None, eps=1e-6):
        """(rms_norm(x + residual + bias), x + residual + bias)."""
        norm, total = ctypes.c_int32(), ctypes.c_int32()
        self._check(lib.rlx_graph_add_fused_residual_rms_norm(
            self.handle, self._t(x), self._t(residual), self._t(bias), self._t(gamma), eps,
            ctypes.byref(norm), ctypes.byref(total)))
        return Tensor(self, norm.value), Tensor(self, total.value)

    # ---- transformer
    def attention(self, q, k, v, *, num_heads, head_dim, num_kv_heads=0, layout="bshd",
                  mask="none", mask_tensor=None, window=0, scale=0.0, softcap=0.0):
        """Scaled dot-product attention (see rlx_attention_desc): mask is 'none', 'causal',
        'custom' or 'bias' (with mask_tensor), 'sliding' (with window); scale 0 means
        1/sqrt(head_dim); softcap 0 means off."""
        desc = _capi.AttentionDesc(num_heads, num_kv_heads, head_dim, _enum(Layout, layout),
                                   _enum(Mask, mask), window, scale, softcap)
        return self._add(lib.rlx_graph_add_attention, self._t(q), self._t(k), self._t(v),
                         self._t(mask_tensor), ctypes.byref(desc))

    def attention_backward(self, q, k, v, out, d_out, *, num_heads, head_dim, num_kv_heads=0,
                           layout="bshd", mask="none", mask_tensor=None, window=0, scale=0.0,
                           softcap=0.0):
        """(dq, dk, dv) of attention(q, k, v, ...) given its output `out` and the output's
        gradient d_out; the keywords are the forward's (see attention)."""
        desc = _capi.AttentionDesc(num_heads, num_kv_heads, head_dim, _enum(Layout, layout),
                                   _enum(Mask, mask), window, scale, softcap)
        dq, dk, dv = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        self._check(lib.rlx_graph_add_attention_backward(
            self.handle, self._t(q), self._t(k), self._t(v), self._t(mask_tensor), self._t(out),
            self._t(d_out), ctypes.byref(desc), ctypes.byref(dq), ctypes.byref(dk),
            ctypes.byref(dv)))
        return Tensor(self, dq.value), Tensor(self, dk.value), Tensor(self, dv.value)

    def rope(self, x, cos, sin, head_dim, n_rot=None, style="neox", layout="bshd"):
        """Rotary embedding of the first n_rot (default head_dim) dims of each head."""
        n_rot = head_dim if n_rot is None else n_rot
        return self._add(lib.rlx_graph_add_rope, self._t(x), self._t(cos), self._t(sin),
                         head_dim, n_rot, _enum(RopeStyle, style), _enum(Layout, layout))

    def sample(self, logits, top_k=0, top_p=1.0, temperature=1.0):
        """logits [..., V] -> i64 token ids [...]; temperature <= 0 is greedy. Seed per run
        (Executable.set_seed)."""
        return self._add(lib.rlx_graph_add_sample, self._t(logits), top_k, top_p, temperature)

    # ---- vision
    def pool(self, x, kernel, *, kind="max", strides=None, pads=None, dilations=None,
             ceil_mode=False, count_include_pad=False):
        """Max ('max') or average ('avg') pooling of x [N, C, spatial...] over len(kernel)
        spatial dims; pads lists the begin pads of each spatial dim, then the end pads."""
        ns = len(kernel)
        kinds = {"max": 0, "avg": 1}
        if kind not in kinds:
            raise ValueError(f"pool kind {kind!r} is not one of {sorted(kinds)}")
        def dims(v, n):
            if v is None:
                return None
            if len(v) != n:
                raise ValueError(f"expected {n} values, got {len(v)}")
            return (ctypes.c_int64 * n)(*v)
        return self._add(lib.rlx_graph_add_pool, self._t(x), kinds[kind], ns, dims(kernel, ns),
                         dims(strides, ns), dims(pads, 2 * ns), dims(dilations, ns),
                         int(ceil_mode), int(count_include_pad))

    def pad(self, x, pads, *, mode="constant", value=0.0):
        """Pads (or, negative, crops) every dim: pads = begins of every dim, then ends;
        mode 'constant' (value), 'reflect', 'edge' or 'wrap'."""
        modes = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}
        if mode not in modes:
            raise ValueError(f"pad mode {mode!r} is not one of {sorted(modes)}")
        arr = (ctypes.c_int64 * max(len(pads), 1))(*pads)
        return self._add(lib.rlx_graph_add_pad, self._t(x), modes[mode], arr, value)

    _RESIZE_MODES = {"nearest": 0, "linear": 1, "cubic": 2}
    _RESIZE_COORDS = {"half_pixel": 0, "half_pixel_symmetric": 1, "pytorch_half_pixel": 2,
                      "align_corners": 3, "asymmetric": 4, "tf_half_pixel_for_nn": 5,
                      "tf_crop_and_resize": 6}
    _RESIZE_NEAREST = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}

    def resize(self, x, sizes=None, *, scales=None, mode="nearest", coord="half_pixel",
               nearest="round_prefer_floor", cubic_a=-0.75, exclude_outside=False, roi=None,
               extrapolation_value=0.0):
        """ONNX Resize of x to `sizes` (every dim; -1 keeps it), or to floor(dim * scale)
        when only `scales` is given. mode 'nearest' / 'linear' / 'cubic'; coord is the
        coordinate_transformation_mode; roi (starts, then ends) for 'tf_crop_and_resize'."""
        for name, value, table in (("mode", mode, self._RESIZE_MODES),
                                   ("coord", coord, self._RESIZE_COORDS),
                                   ("nearest", nearest, self._RESIZE_NEAREST)):
            if value not in table:
                raise ValueError(f"resize {name} {value!r} is not one of {sorted(table)}")
        xt = x if isinstance(x, Tensor) else None
        rank = len(xt.shape) if xt is not None else len(sizes)
        if sizes is None:
            if scales is None:
                raise ValueError("resize needs sizes or scales")
            sizes = [int(d * s) if s != 1 else -1 for d, s in zip(xt.shape, scales)]
        if len(sizes) != rank or (scales is not None and len(scales) != rank):
            raise ValueError(f"resize of a rank-{rank} tensor needs {rank} sizes / scales")
        floats = lambda v: None if v is None else (ctypes.c_float * max(len(v), 1))(*v)
        return self._add(lib.rlx_graph_add_resize, self._t(x), (ctypes.c_int64 * rank)(*sizes),
                         self._RESIZE_MODES[mode], self._RESIZE_COORDS[coord],
                         self._RESIZE_NEAREST[nearest], cubic_a, int(exclude_outside),
                         floats(scales), floats(roi), extrapolation_value)

    _GRID_PADDING = {"zeros": 0, "border": 1, "reflection": 2}

    def grid_sample(self, x, grid, *, mode="linear", padding="zeros", align_corners=False):
        """PyTorch grid_sample of x [N, C, H, W] at grid [N, Ho, Wo, 2] (x, y in [-1, 1]);
        mode 'nearest' / 'linear' / 'cubic', padding 'zeros' / 'border' / 'reflection'."""
        if mode not in self._RESIZE_MODES:
            raise ValueError(f"grid_sample mode {mode!r} is not one of {sorted(self._RESIZE_MODES)}")
        if padding not in self._GRID_PADDING:
            raise ValueError(f"grid_sample padding {padding!r} is not one of "
                             f"{sorted(self._GRID_PADDING)}")
        return self._add(lib.rlx_graph_add_grid_sample, self._t(x), self._t(grid),
                         self._RESIZE_MODES[mode], self._GRID_PADDING[padding], int(align_corners))

    def roi_align(self, x, rois, batch_indices, output_size, *, mode="avg", sampling_ratio=0,
                  spatial_scale=1.0, half_pixel=True):
        """ONNX RoiAlign: x [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R]
        -> [R, C, out_h, out_w]; mode 'avg' or 'max'."""
        modes = {"max": 0, "avg": 1}
        if mode not in modes:
            raise ValueError(f"roi_align mode {mode!r} is not one of {sorted(modes)}")
        oh, ow = output_size
        return self._add(lib.rlx_graph_add_roi_align, self._t(x), self._t(rois),
                         self._t(batch_indices), modes[mode], oh, ow, sampling_ratio,
                         spatial_scale, int(half_pixel))

    def depth_to_space(self, x, block, mode="dcr"):
        """[N, C*b*b, H, W] -> [N, C, H*b, W*b]; mode 'dcr' or 'crd' (pixel_shuffle)."""
        modes = {"dcr": 0, "crd": 1}
        if mode not in modes:
            raise ValueError(f"depth_to_space mode {mode!r} is not one of {sorted(modes)}")
        return self._add(lib.rlx_graph_add_depth_to_space, self._t(x), block, modes[mode])

    def space_to_depth(self, x, block):
        """[N, C, H*b, W*b] -> [N, C*b*b, H, W] (the inverse of dcr depth_to_space)."""
        return self._add(lib.rlx_graph_add_space_to_depth, self._t(x), block)

    # ---- convolution
    _CONV_LAYOUTS = {"channels_first": 0, "channels_last": 1, "channels_last_ohwi": 2}

    @staticmethod
    def _ints(v, n):
        if v is None:
            return None
        if len(v) != n:
            raise ValueError(f"expected {n} values, got {len(v)}")
        return (ctypes.c_int64 * n)(*v)

    def _conv_layout(self, layout):
        if layout not in self._CONV_LAYOUTS:
            raise ValueError(f"layout {layout!r} is not one of {sorted(self._CONV_LAYOUTS)}")
        return self._CONV_LAYOUTS[layout]

    def conv(self, x, w, bias=None, residual=None, *, strides=None, pads=None, dilations=None,
             groups=1, act="none", layout="channels_first"):
        """act(conv(x, w) + bias + residual); w [OC, C/groups, k...]; x is [N, C,
        spatial...] ('channels_first') or [N, spatial..., C] ('channels_last', and
        'channels_last_ohwi' with w [OC, k..., C/groups]); pads lists the begin pads of
        each spatial dim, then the end pads."""
        ns = len(self._tensor(w).shape) - 2
        return self._add(lib.rlx_graph_add_conv, self._t(x), self._t(w), self._t(bias),
                         self._t(residual), ns, self._ints(strides, ns),
                         self._ints(pads, 2 * ns), self._ints(dilations, ns), groups,
                         _enum(Activation, act), self._conv_layout(layout))

    def conv_transpose(self, x, w, bias=None, residual=None, *, strides=None, pads=None,
                       dilations=None, output_padding=None, groups=1, act="none",
                       layout="channels_first"):
        """Transposed convolution, w [C, OC/groups, k...] (PyTorch's conv_transpose)."""
        ns = len(self._tensor(w).shape) - 2
        return self._add(lib.rlx_graph_add_conv_transpose, self._t(x), self._t(w),
                         self._t(bias), self._t(residual), ns, self._ints(strides, ns),
                         self._ints(pads, 2 * ns), self._ints(dilations, ns),
                         self._ints(output_padding, ns), groups, _enum(Activation, act),
                         self._conv_layout(layout))

    def im2col(self, x, kernel, *, strides=None, pads=None, dilations=None,
               layout="channels_first"):
        """Sliding windows as columns (PyTorch's unfold): [N, C*K, L] channels first, or
        [N, L, K*C] channels last."""
        ns = len(kernel)
        return self._add(lib.rlx_graph_add_im2col, self._t(x), ns, self._ints(kernel, ns),
                         self._ints(strides, ns), self._ints(pads, 2 * ns),
                         self._ints(dilations, ns), self._conv_layout(layout))
    # ---- channel-wise normalization of x [N, C, spatial...]
    def group_norm(self, x, groups, gamma=None, beta=None, eps=1e-5):
        """GroupNorm (groups = C: InstanceNorm); gamma/beta are [C]."""
        return self._add(lib.rlx_graph_add_group_norm, self._t(x), self._t(gamma),
                         self._t(beta), groups, eps)

    def channel_norm(self, x, gamma=None, beta=None, eps=1e-6):
        """LayerNorm2d (ConvNeXt): each position normalised over the channels."""
        return self._add(lib.rlx_graph_add_channel_norm, self._t(x), self._t(gamma),
                         self._t(beta), eps)

    def batch_norm(self, x, gamma, beta, mean, var, eps=1e-5):
        """BatchNorm with running statistics (inference)."""
        return self._add(lib.rlx_graph_add_batch_norm, self._t(x), self._t(gamma),
                         self._t(beta), self._t(mean), self._t(var), eps)

    def lrn(self, x, size, alpha=1e-4, beta=0.75, bias=1.0):
        """Local response norm across channels (ONNX LRN)."""
        return self._add(lib.rlx_graph_add_lrn, self._t(x), size, alpha, beta, bias)

    # ---- training: row-wise backward ops
    def layer_norm_backward(self, x, dy, gamma=None, axis=-1, eps=1e-5):
        """(dx, d_gamma, d_beta) of layer_norm(x, gamma, beta, axis, eps) for output grad dy."""
        dx, dgamma, dbeta = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        self._check(lib.rlx_graph_add_layer_norm_backward(
            self.handle, self._t(x), self._t(gamma), self._t(dy), axis, eps, ctypes.byref(dx),
            ctypes.byref(dgamma), ctypes.byref(dbeta)))
        return Tensor(self, dx.value), Tensor(self, dgamma.value), Tensor(self, dbeta.value)

    def rms_norm_backward(self, x, dy, gamma=None, eps=1e-6):
        """(dx, d_gamma) of rms_norm(x, gamma, eps) for output grad dy."""
        dx, dgamma = ctypes.c_int32(), ctypes.c_int32()
        self._check(lib.rlx_graph_add_rms_norm_backward(
            self.handle, self._t(x), self._t(gamma), self._t(dy), eps, ctypes.byref(dx),
            ctypes.byref(dgamma)))
        return Tensor(self, dx.value), Tensor(self, dgamma.value)

    def softmax_backward(self, y, dy, axis=-1, log_softmax=False):
        """dx from the forward's output y (softmax, or log_softmax when log_softmax)."""
        return self._add(lib.rlx_graph_add_softmax_backward, self._t(y), self._t(dy), axis,
                         int(log_softmax))

    def rope_backward(self, dy, cos, sin, head_dim, n_rot=None, style="neox", layout="bshd"):
        """The inverse rotation of dy (the forward rope's tables and attributes)."""
        n_rot = head_dim if n_rot is None else n_rot
        return self._add(lib.rlx_graph_add_rope_backward, self._t(dy), self._t(cos),
                         self._t(sin), head_dim, n_rot, _enum(RopeStyle, style),
                         _enum(Layout, layout))

    def cumsum_backward(self, dy, axis, exclusive=False, reverse=False):
        """dx of cumsum(x, axis, exclusive, reverse): the cumsum of dy the other way."""
        return self._add(lib.rlx_graph_add_cumsum_backward, self._t(dy), axis, int(exclusive),
                         int(reverse))
    # ---- training: losses, embedding backward, optimizer updates
    def cross_entropy(self, logits, targets, ignore_index=-100, label_smoothing=0.0):
        """Mean cross-entropy of logits [..., V] against integer targets [...]
        (PyTorch's F.cross_entropy, reduction='mean')."""
        return self._add(lib.rlx_graph_add_cross_entropy, self._t(logits), self._t(targets),
                         int(ignore_index), float(label_smoothing))

    def cross_entropy_backward(self, logits, targets, d_loss, ignore_index=-100,
                               label_smoothing=0.0):
        """d_logits of cross_entropy given the scalar d_loss."""
        return self._add(lib.rlx_graph_add_cross_entropy_backward, self._t(logits),
                         self._t(targets), self._t(d_loss, like=logits), int(ignore_index),
                         float(label_smoothing))

    def mse_loss(self, a, b):
        """mean((a - b)^2) over every element (Binary + Reduce)."""
        return self._add(lib.rlx_graph_add_mse_loss, *self._pair(a, b))

    def gather_backward(self, dy, indices, axis, axis_size):
        """dx of gather(x, indices, axis) with x.shape[axis] = axis_size (sums in order)."""
        if not isinstance(indices, Tensor):
            indices = self.constant(np.asarray(indices, np.int64))
        return self._add(lib.rlx_graph_add_gather_backward, self._t(dy), self._t(indices),
                         axis, self._dim(axis_size))

    def sgd_update(self, p, grad, momentum_buf, hyper, momentum=0.0, dampening=0.0,
                   weight_decay=0.0, nesterov=False):
        """PyTorch's SGD step: (p', buf') (buf' is None without a buffer)."""
        desc = _capi.SgdDesc(momentum, dampening, weight_decay, int(nesterov))
        out_p, out_buf = ctypes.c_int32(), ctypes.c_int32()
        self._check(lib.rlx_graph_add_sgd_update(self.handle, self._t(p), self._t(grad),
                                                 self._t(momentum_buf), self._t(hyper),
                                                 ctypes.byref(desc), ctypes.byref(out_p),
                                                 ctypes.byref(out_buf)))
        buf = None if out_buf.value == _capi.NONE else Tensor(self, out_buf.value)
        return Tensor(self, out_p.value), buf

    def adam_update(self, p, grad, m, v, hyper, beta1=0.9, beta2=0.999, eps=1e-8,
                    weight_decay=0.0, decoupled=False):
        """PyTorch's Adam (decoupled=True: AdamW) step: (p', m', v')."""
        desc = _capi.AdamDesc(beta1, beta2, eps, weight_decay, int(decoupled))
        outs = [ctypes.c_int32() for _ in range(3)]
        self._check(lib.rlx_graph_add_adam_update(self.handle, self._t(p), self._t(grad),
                                                  self._t(m), self._t(v), self._t(hyper),
                                                  ctypes.byref(desc),
                                                  *[ctypes.byref(o) for o in outs]))
        return tuple(Tensor(self, o.value) for o in outs)
    # ---- training (Tier 2), vision
    def conv_backward_weight(self, x, dy, w, *, strides=None, pads=None, dilations=None,
                             groups=1, layout="channels_first"):
        """d_w of conv(x, w) from the gradient dy of its output (w gives the kernel sizes
        and layout; the other arguments are the forward's). The input gradient is
        conv_transpose(dy, w, ...), the bias gradient a sum of dy."""
        ns = len(self._tensor(w).shape) - 2
        return self._add(lib.rlx_graph_add_conv_backward_weight, self._t(x), self._t(dy),
                         self._t(w), ns, self._ints(strides, ns), self._ints(pads, 2 * ns),
                         self._ints(dilations, ns), groups, self._conv_layout(layout))

    def pool_backward(self, x, dy, kernel, *, kind="max", strides=None, pads=None,
                      dilations=None, ceil_mode=False, count_include_pad=False):
        """dx of pool(x, ...) ('max' or 'avg', the forward's arguments) from the gradient
        dy of its output; max routes each window's gradient to its first maximum."""
        ns = len(kernel)
        kinds = {"max": 0, "avg": 1}
        if kind not in kinds:
            raise ValueError(f"pool kind {kind!r} is not one of {sorted(kinds)}")
        return self._add(lib.rlx_graph_add_pool_backward, self._t(x), self._t(dy), kinds[kind],
                         ns, self._ints(kernel, ns), self._ints(strides, ns),
                         self._ints(pads, 2 * ns), self._ints(dilations, ns), int(ceil_mode),
                         int(count_include_pad))

    # ---- training: reverse-mode autodiff
    def grad(self, loss, wrt, seed=None):
        """Appends the gradient of `loss` with respect to each tensor of `wrt`
        (rlx_graph_grad) and returns them as a list (same shapes and dtypes).
        seed: the loss's cotangent (a Tensor shaped like loss; None: ones)."""
        ids = [self._t(t) for t in wrt]
        outs = (ctypes.c_int32 * max(len(ids), 1))()
        self._check(lib.rlx_graph_grad(self.handle, self._t(loss), _capi.int32s(ids), len(ids),
                                       self._t(seed, like=loss), outs))
        return [Tensor(self, outs[i]) for i in range(len(ids))]

    def _tensor(self, x):
        return x if isinstance(x, Tensor) else Tensor(self, self._t(x))


def _add_activation_methods():
    for act in _ACTIVATIONS:
        def graph_method(self, x, _act=act):
            return self.activation(_act, x)
        graph_method.__name__ = act.name.lower()
        graph_method.__doc__ = f"Elementwise {act.name.lower()} (rlx_graph_add_activation)."
        if not hasattr(Graph, graph_method.__name__):
            setattr(Graph, graph_method.__name__, graph_method)


_add_activation_methods()


class Tensor:
    """A value of one Graph (its id). Holds the graph alive. Operators build nodes:
    + - * / ** @ and unary -, abs(); < <= > >= compare (== and != keep Python
    identity semantics: use .eq / .ne). Python scalars and numpy arrays become
    constants of the tensor's dtype."""

    __slots__ = ("graph", "id")
    # numpy_array + tensor must reach Tensor.__radd__, not loop over the tensor.
    __array_ufunc__ = None

    def __init__(self, graph, tensor_id):
        self.graph = graph
        self.id = tensor_id

    @property
    def dtype(self):
        return self.graph.tensor_type(self)[0]

    @property
    def shape(self):
        """Tuple of ints (static) and str (symbolic dims)."""
        return self.graph.tensor_type(self)[1]

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        if self.graph.closed:
            return f"<rlx.Tensor {self.id} of a closed graph>"
        dims = ", ".join(str(d) for d in self.shape)
        return f"<rlx.Tensor {self.id}: {self.dtype}[{dims}]>"

    def __bool__(self):
        raise TypeError("an rlx.Tensor has no truth value before it runs")

    __hash__ = object.__hash__

    # arithmetic
    def __add__(self, o): return self.graph.add(self, o)
    def __radd__(self, o): return self.graph.add(o, self)
    def __sub__(self, o): return self.graph.sub(self, o)
    def __rsub__(self, o): return self.graph.sub(o, self)
    def __mul__(self, o): return self.graph.mul(self, o)
    def __rmul__(self, o): return self.graph.mul(o, self)
    def __truediv__(self, o): return self.graph.div(self, o)
    def __rtruediv__(self, o): return self.graph.div(o, self)
    def __pow__(self, o): return self.graph.pow(self, o)
    def __rpow__(self, o): return self.graph.pow(o, self)
    def __matmul__(self, o): return self.graph.matmul(self, o)
    def __rmatmul__(self, o): return self.graph.matmul(self.graph._tensor(o), self)
    def __neg__(self): return self.graph.activation(Activation.NEG, self)
    def __abs__(self): return self.graph.activation(Activation.ABS, self)
    def __lt__(self, o): return self.graph.less(self, o)
    def __le__(self, o): return self.graph.less_equal(self, o)
    def __gt__(self, o): return self.graph.greater(self, o)
    def __ge__(self, o): return self.graph.greater_equal(self, o)

    def eq(self, o): return self.graph.equal(self, o)
    def ne(self, o): return self.graph.not_equal(self, o)

    def __getitem__(self, key):
        """Basic indexing with ints and step-1 slices on static dims (narrow + reshape)."""
        if not isinstance(key, tuple):
            key = (key,)
        shape, out, drop = self.shape, self, []
        if len(key) > len(shape):
            raise IndexError(f"{len(key)} indices for a rank-{len(shape)} tensor")
        for axis, k in enumerate(key):
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise IndexError("only step-1 slices are supported")
                if k == slice(None):
                    continue
                size = _static(shape[axis], "slice")
                start, stop, _ = k.indices(size)
                out = out.graph.narrow(out, axis, start, max(0, stop - start))
            elif isinstance(k, numbers.Integral):
                size = _static(shape[axis], "index")
                i = int(k) + size if k < 0 else int(k)
                if not 0 <= i < size:
                    raise IndexError(f"index {k} outside dim {axis} of size {size}")
                out = out.graph.narrow(out, axis, i, 1)
                drop.append(axis)
            else:
                raise IndexError(f"unsupported index {k!r}")
        if drop:
            new_shape = [d for a, d in enumerate(out.shape) if a not in drop]
            out = out.reshape(new_shape)
        return out

    # methods mirroring the Graph builders
    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = shape[0]
        return self.graph.reshape(self, shape)

    def astype(self, dtype): return self.graph.cast(self, dtype)
    cast = astype

    def transpose(self, *perm):
        if len(perm) == 1 and isinstance(perm[0], (list, tuple)):
            perm = perm[0]
        return self.graph.transpose(self, list(perm) if perm else None)

    @property
    def T(self): return self.graph.transpose(self)

    def narrow(self, axis, start, length): return self.graph.narrow(self, axis, start, length)
    def expand(self, shape): return self.graph.expand(self, shape)
    def reverse(self, axes): return self.graph.reverse(self, axes)
    def gather(self, indices, axis=0): return self.graph.gather(self, indices, axis)
    def sum(self, axis=None, keepdims=False): return self.graph.sum(self, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return self.graph.mean(self, axis, keepdims)
    def max(self, axis=None, keepdims=False): return self.graph.max(self, axis, keepdims)
    def min(self, axis=None, keepdims=False): return self.graph.min(self, axis, keepdims)
    def prod(self, axis=None, keepdims=False): return self.graph.prod(self, axis, keepdims)
    def argmax(self, axis, keepdims=False): return self.graph.argmax(self, axis, keepdims)
    def argmin(self, axis, keepdims=False): return self.graph.argmin(self, axis, keepdims)
    def softmax(self, axis=-1): return self.graph.softmax(self, axis)
    def log_softmax(self, axis=-1): return self.graph.log_softmax(self, axis)
    def cumsum(self, axis, exclusive=False, reverse=False):
        return self.graph.cumsum(self, axis, exclusive, reverse)
    def topk(self, k, axis=-1, largest=True): return self.graph.topk(self, k, axis, largest)
    def stop_gradient(self): return self.graph.stop_gradient(self)
    def set_name(self, name): return self.graph.set_name(self, name)


def _static(d, what):
    if isinstance(d, str):
        raise IndexError(f"cannot {what} along symbolic dim {d!r}")
    return d


def _add_tensor_activations():
    for act in _ACTIVATIONS:
        name = act.name.lower()
        if name in ("neg", "abs"):
            continue  # operators -x and abs(x)
        def method(self, _act=act):
            return self.graph.activation(_act, self)
        method.__name__ = name
        setattr(Tensor, name, method)


_add_tensor_activations()

