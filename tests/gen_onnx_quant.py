"""Edge cases of the ONNX quantization ops for tests/onnx_quant.sh.

    /usr/bin/python3 tests/gen_onnx_quant.py OUT_DIR

Writes OUT_DIR/node/<case>/model.onnx and test_data_set_0/{input,output}_K.pb
in the layout of ONNX's node tests, so tests/test_onnx_conformance.c runs
them (--data OUT_DIR) on any backend. The expected outputs are computed here
with numpy from ONNX's definitions (not from rlx): round half to even
(np.rint), saturation to the quantized range, per-axis and blocked scales,
exact int32 products (int64 in numpy), and the QLinear requantization
round(f32(acc) * f32(a_scale * b_scale / y_scale)) + y_zero. Cases cover
ties, saturation, zero points, per-axis and blocked (opset 21) layouts,
16-bit and float8 outputs, and reductions long enough to need the
importer's exact chunking (K * 255 * 255 > 2^24). Constant weights (an
initializer B) take the DequantMatMul path. Exit 77 when numpy or onnx is
missing. Prints the number of cases written."""
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # the shell test reports a SKIP
    print(f"SKIP: {e}")
    sys.exit(77)

F8E4M3FN = 17
rng = np.random.default_rng(20261125)
f32 = np.float32


# ------------------------------------------------------------------ float8 (e4m3fn), by table

def e4m3fn_value(code):
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return float("nan")
    if e == 0:
        return s * m / 8.0 * 2.0 ** -6
    return s * (1 + m / 8.0) * 2.0 ** (e - 7)


E4M3 = np.array([e4m3fn_value(c) for c in range(256)])


def to_e4m3fn(x):
    """Nearest e4m3fn code, ties to the even code, saturating to +-448."""
    out = np.zeros(x.shape, np.uint8)
    finite = [c for c in range(256) if not np.isnan(E4M3[c])]
    vals = E4M3[finite]
    for i, v in np.ndenumerate(x.astype(np.float64)):
        v = min(max(v, -448.0), 448.0)
        d = np.abs(vals - v)
        best = np.flatnonzero(d == d.min())
        codes = [finite[b] for b in best]
        even = [c for c in codes if c % 2 == 0]
        pick = (even or codes)[0]
        if v == 0 and np.signbit(v):
            pick = 0x80
        out[i] = pick
    return out


# ------------------------------------------------------------------ writing cases

def tensor(name, a, dtype=None):
    if dtype == F8E4M3FN:
        t = TensorProto()
        t.name = name
        t.data_type = F8E4M3FN
        t.dims.extend(a.shape)
        t.raw_data = a.astype(np.uint8).tobytes()
        return t
    return numpy_helper.from_array(a, name)


def elem_type(a, dtype):
    if dtype is not None:
        return dtype
    return helper.np_dtype_to_tensor_dtype(a.dtype) if hasattr(helper, "np_dtype_to_tensor_dtype") \
        else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype]


class Case:
    def __init__(self, root, name, opset):
        self.dir = os.path.join(root, "node", name)
        self.opset = opset
        self.nodes, self.inputs, self.outputs, self.inits = [], [], [], []
        self.in_data, self.out_data = [], []

    def input(self, name, a, dtype=None):
        self.inputs.append(helper.make_tensor_value_info(name, elem_type(a, dtype), a.shape))
        self.in_data.append(tensor(name, a, dtype))
        return name

    def init(self, name, a):
        self.inits.append(tensor(name, a))
        return name

    def node(self, op, ins, outs, **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, **attrs))

    def output(self, name, a, dtype=None):
        self.outputs.append(helper.make_tensor_value_info(name, elem_type(a, dtype), a.shape))
        self.out_data.append(tensor(name, a, dtype))

    def write(self):
        g = helper.make_graph(self.nodes, "q", self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        os.makedirs(os.path.join(self.dir, "test_data_set_0"), exist_ok=True)
        with open(os.path.join(self.dir, "model.onnx"), "wb") as f:
            f.write(m.SerializeToString())
        for kind, data in (("input", self.in_data), ("output", self.out_data)):
            for i, t in enumerate(data):
                with open(os.path.join(self.dir, "test_data_set_0", f"{kind}_{i}.pb"), "wb") as f:
                    f.write(t.SerializeToString())


RANGES = {np.uint8: (0, 255), np.int8: (-128, 127), np.uint16: (0, 65535), np.int16: (-32768, 32767)}


def quantize(x, scale, zero, qtype):
    """ONNX QuantizeLinear: saturate(rint(x / scale) + zero); x / scale in x's dtype."""
    lo, hi = RANGES[qtype]
    q = np.rint((x / scale.astype(x.dtype)).astype(np.float32)).astype(np.float64)
    return np.clip(q + zero.astype(np.float64), lo, hi).astype(qtype)


def dequantize(x, scale, zero):
    y = (x.astype(np.float32) - zero.astype(np.float32)) * scale.astype(np.float32)
    return y.astype(scale.dtype)


def along(p, axis, rank):
    shape = [1] * rank
    shape[axis] = p.size
    return p.reshape(shape)


def blocked(p, axis, block, dim):
    return np.repeat(p, block, axis=axis).take(np.arange(dim), axis=axis)


# ------------------------------------------------------------------ cases

def quant_cases(root):
    n = 0
    # ties and saturation, u8 and i8, per tensor
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 3.5, 254.5, 255.5, 300.0, -10.0, 1e10, -1e10,
                  126.5, 127.5, -128.5, -129.5], f32)
    for qt, zp in ((np.uint8, 0), (np.uint8, 3), (np.int8, 0), (np.int8, -3)):
        c = Case(root, f"test_q_ties_{np.dtype(qt).name}_zp{zp}", 13)
        s, z = np.array(1.0, f32), np.array(zp, qt)
        c.node("QuantizeLinear", [c.input("x", x), c.input("s", s), c.input("z", z)], ["y"])
        c.output("y", quantize(x, s, z, qt))
        c.write()
        n += 1
    # ties after a scale: x / 0.5 lands on .5 exactly
    x = (np.arange(-20, 20, dtype=f32) * 0.25 + 0.125).astype(f32)
    c = Case(root, "test_q_ties_scaled", 10)
    s, z = np.array(0.25, f32), np.array(128, np.uint8)
    c.node("QuantizeLinear", [c.input("x", x), c.input("s", s), c.input("z", z)], ["y"])
    c.output("y", quantize(x, s, z, np.uint8))
    c.write()
    n += 1
    # per axis, axis 0 and -1, zero points per channel
    x = (rng.standard_normal((3, 4, 5)) * 40).astype(f32)
    for axis in (0, -1):
        C = x.shape[axis]
        s = (rng.uniform(0.1, 0.7, C)).astype(f32)
        z = rng.integers(-20, 20, C).astype(np.int8)
        c = Case(root, f"test_q_axis{axis}", 13)
        c.node("QuantizeLinear", [c.input("x", x), c.input("s", s), c.input("z", z)], ["y"],
               axis=axis)
        c.output("y", quantize(x, along(s, axis, 3), along(z, axis, 3), np.int8))
        c.write()
        n += 1
        c = Case(root, f"test_dq_axis{axis}", 13)
        q = rng.integers(-128, 128, x.shape).astype(np.int8)
        c.node("DequantizeLinear", [c.input("x", q), c.input("s", s), c.input("z", z)], ["y"],
               axis=axis)
        c.output("y", dequantize(q, along(s, axis, 3), along(z, axis, 3)))
        c.write()
        n += 1
    # blocked (opset 21): D = 10 in blocks of 4 (a tail of 2)
    x = (rng.standard_normal((3, 10)) * 30).astype(f32)
    s = rng.uniform(0.2, 0.9, (3, 3)).astype(f32)
    z = rng.integers(0, 255, (3, 3)).astype(np.uint8)
    c = Case(root, "test_q_blocked", 21)
    c.node("QuantizeLinear", [c.input("x", x), c.input("s", s), c.input("z", z)], ["y"],
           axis=1, block_size=4)
    c.output("y", quantize(x, blocked(s, 1, 4, 10), blocked(z, 1, 4, 10), np.uint8))
    c.write()
    n += 1
    q = rng.integers(0, 256, (3, 10)).astype(np.uint8)
    c = Case(root, "test_dq_blocked", 21)
    c.node("DequantizeLinear", [c.input("x", q), c.input("s", s), c.input("z", z)], ["y"],
           axis=1, block_size=4)
    c.output("y", dequantize(q, blocked(s, 1, 4, 10), blocked(z, 1, 4, 10)))
    c.write()
    n += 1
    # a block wider than the axis: one scale per row
    q = rng.integers(-128, 128, (2, 5)).astype(np.int8)
    s = np.array([[0.5], [0.25]], f32)
    c = Case(root, "test_dq_block_wider_than_axis", 21)
    c.node("DequantizeLinear", [c.input("x", q), c.input("s", s)], ["y"], axis=1,
           block_size=1 << 40)
    c.output("y", dequantize(q, s, np.zeros((1, 1), np.int8)))
    c.write()
    n += 1
    # 16-bit outputs: output_dtype without a zero point, and an i16 zero point
    x = np.array([-40000.5, -32768.5, -2.5, -0.5, 0.5, 1.5, 32767.5, 65535.5, 70000.0], f32)
    c = Case(root, "test_q_u16_output_dtype", 21)
    s = np.array(1.0, f32)
    c.node("QuantizeLinear", [c.input("x", x), c.input("s", s)], ["y"],
           output_dtype=TensorProto.UINT16)
    c.output("y", quantize(x, s, np.array(0, np.uint16), np.uint16))
    c.write()
    n += 1
    c = Case(root, "test_q_i16_zp", 21)
    z = np.array(-7, np.int16)
    c.node("QuantizeLinear", [c.input("x", x), c.input("s", s), c.input("z", z)], ["y"])
    c.output("y", quantize(x, s, z, np.int16))
    c.write()
    n += 1
    q = np.array([[0, 1, 65535], [40000, 32768, 7]], np.uint16)
    s, z = np.array([0.5, 0.001], f32), np.array([32768, 3], np.uint16)
    c = Case(root, "test_dq_u16_axis0", 21)
    c.node("DequantizeLinear", [c.input("x", q), c.input("s", s), c.input("z", z)], ["y"], axis=0)
    c.output("y", dequantize(q, s[:, None], z[:, None]))
    c.write()
    n += 1
    # f16 input and scale (opset 19): x / scale in f16, y of the scale's dtype on the way back
    x = (rng.standard_normal(12) * 20).astype(np.float16)
    s, z = np.array(0.3, np.float16), np.array(5, np.uint8)
    c = Case(root, "test_q_f16", 19)
    c.node("QuantizeLinear", [c.input("x", x), c.input("s", s), c.input("z", z)], ["y"])
    c.output("y", quantize(x, s, z, np.uint8))
    c.write()
    n += 1
    q = rng.integers(0, 256, 12).astype(np.uint8)
    c = Case(root, "test_dq_f16", 19)
    c.node("DequantizeLinear", [c.input("x", q), c.input("s", s), c.input("z", z)], ["y"])
    c.output("y", dequantize(q, s, z))
    c.write()
    n += 1
    # int32 input of DequantizeLinear (a bias), per axis, no zero point
    q = rng.integers(-100000, 100000, (2, 3)).astype(np.int32)
    s = np.array([0.001, 0.02, 0.5], f32)
    c = Case(root, "test_dq_i32", 13)
    c.node("DequantizeLinear", [c.input("x", q), c.input("s", s)], ["y"], axis=1)
    c.output("y", dequantize(q, along(s, 1, 2), np.zeros((1, 1), np.int32)))
    c.write()
    n += 1
    # float8 e4m3fn: ties between codes, saturation past 448
    x = np.array([0.0, 1.0625, 1.1875, 17.0, 19.0, 300.0, 460.0, 1000.0, -1000.0, -3.3, 0.001],
                 f32)
    s = np.array(0.5, f32)
    c = Case(root, "test_q_f8e4m3fn", 19)
    zf = np.zeros((), np.uint8)
    c.node("QuantizeLinear", [c.input("x", x), c.input("s", s), c.input("z", zf, F8E4M3FN)],
           ["y"])
    c.output("y", to_e4m3fn(x / s), F8E4M3FN)
    c.write()
    n += 1
    codes = np.array([0x00, 0x01, 0x38, 0x7E, 0xFE, 0x80, 0x44, 0xB3], np.uint8)
    c = Case(root, "test_dq_f8e4m3fn", 19)
    c.node("DequantizeLinear", [c.input("x", codes, F8E4M3FN), c.input("s", s)], ["y"])
    c.output("y", (E4M3[codes].astype(f32) * s).astype(f32))
    c.write()
    n += 1
    # DynamicQuantizeLinear on all-positive data (min clamps to 0) and on mixed data
    for name, x in (("pos", rng.uniform(0.5, 9.0, (4, 5))), ("mixed", rng.standard_normal(17) * 3)):
        x = x.astype(f32)
        lo, hi = min(f32(x.min()), f32(0)), max(f32(x.max()), f32(0))
        scale = f32((f32(hi) - f32(lo)) / f32(255))
        zero = np.rint(np.clip(f32(0) - f32(lo) / scale, 0, 255))
        y = np.clip(np.rint((x / scale).astype(f32)) + zero, 0, 255).astype(np.uint8)
        c = Case(root, f"test_dynq_{name}", 11)
        c.node("DynamicQuantizeLinear", [c.input("x", x)], ["y", "ys", "yz"])
        c.output("y", y)
        c.output("ys", np.array(scale, f32))
        c.output("yz", np.array(zero, np.uint8))
        c.write()
        n += 1
    return n


def qlinear(acc, a_scale, b_scale, y_scale, y_zero, qtype):
    lo, hi = RANGES[qtype]
    m = (a_scale.astype(f32) * b_scale.astype(f32)) / y_scale.astype(f32)
    v = np.rint((acc.astype(f32) * m).astype(f32)).astype(np.float64)
    return np.clip(v + y_zero.astype(np.float64), lo, hi).astype(qtype)


def matmul_cases(root):
    n = 0
    # u8 x u8 at the extremes, K = 1000: 1000 * 255 * 255 > 2^24 (chunked); per-row / per-column
    # zero points, B a graph input (float path) and an initializer (DequantMatMul path)
    M, K, N = 3, 1000, 4
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    a[0] = 255
    b = rng.integers(0, 256, (K, N)).astype(np.uint8)
    b[:, 0] = 255
    az = np.array([0, 7, 255], np.uint8)
    bz = np.array([0, 128, 3, 255], np.uint8)
    want = (a.astype(np.int64) - az[:, None]) @ (b.astype(np.int64) - bz[None, :])
    for where in ("input", "init"):
        c = Case(root, f"test_mmi_u8_long_{where}", 10)
        bn = c.input("b", b) if where == "input" else c.init("b", b)
        bzn = c.input("bz", bz) if where == "input" else c.init("bz", bz)
        c.node("MatMulInteger", [c.input("a", a), bn, c.input("az", az), bzn], ["y"])
        c.output("y", want.astype(np.int32))
        c.write()
        n += 1
    # i8 B, symmetric (no zero point) and with a scalar zero point, batched 3-D A
    a = rng.integers(-128, 128, (2, 3, 300)).astype(np.int8)
    b = rng.integers(-128, 128, (300, 5)).astype(np.int8)
    b[:, 1] = -128
    a[0, 0] = -128
    for zname, bz in (("nozp", None), ("zp", np.array(-5, np.int8))):
        want = a.astype(np.int64) @ (b.astype(np.int64) - (0 if bz is None else bz.astype(np.int64)))
        for where in ("input", "init"):
            c = Case(root, f"test_mmi_i8_{zname}_{where}", 10)
            ins = [c.input("a", a), c.input("b", b) if where == "input" else c.init("b", b)]
            if bz is not None:
                ins += ["", c.input("bz", bz) if where == "input" else c.init("bz", bz)]
            c.node("MatMulInteger", ins, ["y"])
            c.output("y", want.astype(np.int32))
            c.write()
            n += 1
    # a 1-D A
    a = rng.integers(0, 256, 20).astype(np.uint8)
    b = rng.integers(0, 256, (20, 3)).astype(np.uint8)
    c = Case(root, "test_mmi_1d", 10)
    c.node("MatMulInteger", [c.input("a", a), c.input("b", b)], ["y"])
    c.output("y", (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32))
    c.write()
    n += 1
    # QLinearMatMul: per-row a_scale, per-column b_scale, i8 output saturating, long K
    M, K, N = 4, 700, 6
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    az, bz = np.array(120, np.uint8), np.array([0, 1, -1, 5, 0, -128], np.int8)
    as_ = rng.uniform(0.001, 0.01, M).astype(f32)
    bs = rng.uniform(0.001, 0.01, N).astype(f32)
    ys, yz = np.array(0.05, f32), np.array(-10, np.int8)
    acc = (a.astype(np.int64) - az.astype(np.int64)) @ (b.astype(np.int64) - bz[None, :])
    want = qlinear(acc, as_[:, None], bs[None, :], ys, yz, np.int8)
    for where in ("input", "init"):
        c = Case(root, f"test_qlmm_{where}", 10)
        bn = c.input("b", b) if where == "input" else c.init("b", b)
        bzn = c.input("bz", bz) if where == "input" else c.init("bz", bz)
        c.node("QLinearMatMul", [c.input("a", a), c.input("as", as_), c.input("az", az), bn,
                                 c.input("bs", bs), bzn, c.input("ys", ys), c.input("yz", yz)], ["y"])
        c.output("y", want)
        c.write()
        n += 1
    return n


def qdq_matmul_cases(root):
    """MatMul(x, DequantizeLinear(constant W)): the importer's DequantMatMul path."""
    n = 0
    K, N = 64, 5
    specs = [
        ("per_tensor_u8", 13, np.uint8, "tensor", {}, (3, K)),
        ("per_col_i8_zp", 13, np.int8, "col", {"axis": 1}, (2, 3, K)),
        ("blocked_i8_sym", 21, np.int8, "block", {"axis": 0, "block_size": 16}, (4, K)),
        ("per_col_u8_1d", 13, np.uint8, "col", {"axis": 1}, (K,)),
    ]
    for name, opset, qt, layout, attrs, xshape in specs:
        lo, hi = RANGES[qt]
        w = rng.integers(lo, hi + 1, (K, N)).astype(qt)
        if layout == "tensor":
            s, z = np.array(0.02, f32), np.array(117, qt)
            sb, zb = s, z
        elif layout == "col":
            s = rng.uniform(0.005, 0.05, N).astype(f32)
            z = rng.integers(lo // 2, hi // 2, N).astype(qt)
            sb, zb = s[None, :], z[None, :]
        else:
            s = rng.uniform(0.005, 0.05, (K // 16, N)).astype(f32)
            z = None
            sb, zb = np.repeat(s, 16, axis=0), np.zeros((1, 1), qt)
        wf = dequantize(w, sb, zb)
        x = rng.standard_normal(xshape).astype(f32)
        c = Case(root, f"test_qdq_matmul_{name}", opset)
        ins = [c.init("w", w), c.init("s", s)] + ([c.init("z", z)] if z is not None else [])
        c.node("DequantizeLinear", ins, ["wf"], **attrs)
        c.node("MatMul", [c.input("x", x), "wf"], ["y"])
        c.output("y", (x.astype(np.float64) @ wf.astype(np.float64)).astype(f32))
        c.write()
        n += 1
    # Gemm(x, DequantizeLinear(W), C): transB with per-row (axis 0) scales, and with blocks
    # along K (axis 1); alpha and beta
    for name, opset, attrs in (("transb_axis0", 13, {"axis": 0}),
                               ("transb_blocked", 21, {"axis": 1, "block_size": 16})):
        w = rng.integers(-128, 128, (N, K)).astype(np.int8)
        if "block_size" in attrs:
            s = rng.uniform(0.005, 0.05, (N, K // 16)).astype(f32)
            z = rng.integers(-9, 9, (N, K // 16)).astype(np.int8)
            sb, zb = np.repeat(s, 16, axis=1), np.repeat(z, 16, axis=1)
        else:
            s = rng.uniform(0.005, 0.05, N).astype(f32)
            z = rng.integers(-9, 9, N).astype(np.int8)
            sb, zb = s[:, None], z[:, None]
        wf = dequantize(w, sb, zb)
        x = rng.standard_normal((3, K)).astype(f32)
        bias = rng.standard_normal(N).astype(f32)
        c = Case(root, f"test_qdq_gemm_{name}", opset)
        c.node("DequantizeLinear", [c.init("w", w), c.init("s", s), c.init("z", z)], ["wf"], **attrs)
        c.node("Gemm", [c.input("x", x), "wf", c.input("c", bias)], ["y"], transB=1, alpha=0.5,
               beta=2.0)
        want = 0.5 * (x.astype(np.float64) @ wf.astype(np.float64).T) + 2.0 * bias
        c.output("y", want.astype(f32))
        c.write()
        n += 1
    return n


def conv_ref(x, w, pads, stride=1):
    """int64 cross-correlation, NCHW, zero padding."""
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    N, C, H, W = x.shape
    M, _, kh, kw = w.shape
    oh, ow = (H - kh) // stride + 1, (W - kw) // stride + 1
    y = np.zeros((N, M, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return y


def conv_cases(root):
    n = 0
    # 64 channels x 3x3 = 576 terms of up to 255 * 255: channel chunks
    x = rng.integers(0, 256, (1, 64, 5, 5)).astype(np.uint8)
    x[0, :, 0, :] = 255
    w = rng.integers(0, 256, (3, 64, 3, 3)).astype(np.uint8)
    w[0] = 255
    xz, wz = np.array(0, np.uint8), np.array([0, 200, 17], np.uint8)
    pads = [1, 1, 1, 1]
    acc = conv_ref(x.astype(np.int64) - xz, w.astype(np.int64) - wz[:, None, None, None], pads)
    c = Case(root, "test_convi_long", 10)
    c.node("ConvInteger", [c.input("x", x), c.input("w", w), c.input("xz", xz), c.input("wz", wz)],
           ["y"], pads=pads)
    c.output("y", acc.astype(np.int32))
    c.write()
    n += 1
    # QLinearConv: i8 x, per-channel w scale and zero point, bias, i8 output, stride 2
    x = rng.integers(-128, 128, (2, 5, 7, 7)).astype(np.int8)
    w = rng.integers(-128, 128, (4, 5, 3, 3)).astype(np.int8)
    xz, wz = np.array(3, np.int8), np.array([0, -3, 4, 0], np.int8)
    xs, ws = np.array(0.02, f32), rng.uniform(0.005, 0.02, 4).astype(f32)
    ys, yz = np.array(0.3, f32), np.array(2, np.int8)
    bias = rng.integers(-5000, 5000, 4).astype(np.int32)
    acc = conv_ref(x.astype(np.int64) - xz, w.astype(np.int64) - wz[:, None, None, None],
                   [0, 0, 1, 1], stride=2) + bias[None, :, None, None]
    want = qlinear(acc, xs, ws[None, :, None, None], ys, yz, np.int8)
    c = Case(root, "test_qlconv", 10)
    c.node("QLinearConv", [c.input("x", x), c.input("xs", xs), c.input("xz", xz), c.input("w", w),
                           c.input("ws", ws), c.input("wz", wz), c.input("ys", ys),
                           c.input("yz", yz), c.input("b", bias)], ["y"],
           pads=[0, 0, 1, 1], strides=[2, 2])
    c.output("y", want)
    c.write()
    n += 1
    return n


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    root = sys.argv[1]
    n = quant_cases(root) + matmul_cases(root) + qdq_matmul_cases(root) + conv_cases(root)
    print(n)


if __name__ == "__main__":
    main()
