#!/usr/bin/python3
"""Writes GGUF test files for tests/test_gguf.c with llama.cpp's gguf-py
writer (third_party/llama.cpp/gguf-py), plus, for each file, an
expectation list the C test compares rlx's reader against:

  kv KEY TYPE VALUE                 one scalar (strings as hex bytes)
  arr KEY ELEMTYPE N V1 V2 ...      an array
  tensor NAME TYPE NDIMS D0.. BYTES FNV  dims in file order (ggml ne),
                                    FNV-1a 64 of the bytes numpy handed over
  alignment N / kv_count N / tensor_count N

Usage: gguf_write.py OUT_DIR   (writes OUT_DIR/<case>.gguf and .expect)
Exits 77 when the llama.cpp tree is missing (the C test reports a skip).
"""
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GGUF_PY = os.path.join(ROOT, "third_party", "llama.cpp", "gguf-py")
if not os.path.isdir(GGUF_PY):
    print("gguf_write.py: third_party/llama.cpp/gguf-py is missing", file=sys.stderr)
    sys.exit(77)
sys.path.insert(0, GGUF_PY)

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q, GGUFValueType as V  # noqa: E402
from gguf import quants  # noqa: E402

TYPE_NAMES = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16",
              V.UINT32: "u32", V.INT32: "i32", V.FLOAT32: "f32", V.BOOL: "bool",
              V.STRING: "string", V.UINT64: "u64", V.INT64: "i64", V.FLOAT64: "f64"}


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def text(v, t):
    if t == V.STRING:
        b = v.encode("utf-8")
        return b.hex() if b else "-"
    if t == V.BOOL:
        return "1" if v else "0"
    if t == V.FLOAT32:
        return repr(float(np.float32(v)))
    if t == V.FLOAT64:
        return repr(float(v))
    return str(int(v))


SCALARS = [
    (V.UINT8, 250), (V.INT8, -100), (V.UINT16, 65000), (V.INT16, -32000),
    (V.UINT32, 4000000000), (V.INT32, -2000000000), (V.FLOAT32, 3.25),
    (V.BOOL, True), (V.STRING, "héllo, GGUF ✓"), (V.UINT64, 2**63 + 5),
    (V.INT64, -(2**62)), (V.FLOAT64, -1.0 / 3.0),
]
ARRAYS = [
    (V.UINT8, [0, 1, 255]), (V.INT8, [-128, 0, 127]), (V.UINT16, [1, 65535]),
    (V.INT16, [-32768, 7]), (V.UINT32, [1, 2, 3, 4000000000]), (V.INT32, [-5, 5]),
    (V.FLOAT32, [0.5, -2.0, 1e-3]), (V.BOOL, [True, False, True]),
    (V.STRING, ["a", "", "Ġworld", "<0x0A>", "日本"]), (V.UINT64, [2**64 - 1, 0]),
    (V.INT64, [-1, 2**63 - 1]), (V.FLOAT64, [1e300, -0.0]),
]


def tensors(rng):
    """(name, bytes array handed to the writer, ggml type or None for plain)."""
    w = rng.standard_normal((4, 64)).astype(np.float32)
    k = rng.standard_normal((2, 512)).astype(np.float32)
    q4k = rng.integers(0, 256, size=(3, 2 * 144), dtype=np.uint8)  # 3 rows of 2 blocks
    return [
        ("t.f32", rng.standard_normal((3, 5)).astype(np.float32), None),
        ("t.f16", rng.standard_normal((2, 3, 7)).astype(np.float16), None),
        ("t.q8_0", quants.quantize(w, Q.Q8_0), Q.Q8_0),
        ("t.q4_0", quants.quantize(k, Q.Q4_0), Q.Q4_0),
        ("t.q4_K", q4k, Q.Q4_K),  # gguf-py cannot quantize q4_K: raw blocks
        ("t.scalar_f32", np.array([7.5], dtype=np.float32), None),
    ]


def write_case(out_dir, name, alignment):
    path = os.path.join(out_dir, name + ".gguf")
    w = gguf.GGUFWriter(path, "rlxtest")
    exp = []
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for t, v in SCALARS:
        key = "test.scalar." + TYPE_NAMES[t]
        w.add_key_value(key, v, t)
        exp.append(f"kv {key} {TYPE_NAMES[t]} {text(v, t)}")
    for t, vals in ARRAYS:
        key = "test.array." + TYPE_NAMES[t]
        w.add_key_value(key, vals, V.ARRAY, sub_type=t)
        exp.append(f"arr {key} {TYPE_NAMES[t]} {len(vals)} " +
                   " ".join(text(v, t) for v in vals))
    rng = np.random.default_rng(17)
    for tname, data, qtype in tensors(rng):
        if qtype is None:
            w.add_tensor(tname, data)
            ggml = Q.F32 if data.dtype == np.float32 else Q.F16
            dims = list(reversed(data.shape))
        else:
            w.add_tensor(tname, data, raw_shape=data.shape, raw_dtype=qtype)
            shape = gguf.quant_shape_from_byte_shape(data.shape, qtype)
            dims = list(reversed(shape))
        raw = data.tobytes()
        exp.append(f"tensor {tname} {int(ggml if qtype is None else qtype)} {len(dims)} " +
                   " ".join(str(d) for d in dims) + f" {len(raw)} {fnv1a64(raw):016x}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "rb") as f:
        head = f.read(24)
    _, _, n_tensors, n_kv = struct.unpack("<IIQQ", head)
    exp += [f"alignment {alignment or 32}", f"kv_count {n_kv}", f"tensor_count {n_tensors}"]
    with open(os.path.join(out_dir, name + ".expect"), "w") as f:
        f.write("\n".join(exp) + "\n")


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    write_case(out_dir, "default_align", None)
    write_case(out_dir, "align1", 1)
    write_case(out_dir, "align64", 64)


if __name__ == "__main__":
    main()
