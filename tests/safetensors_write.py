#!/usr/bin/python3
"""Writes the safetensors files tests/test_safetensors.c reads, by hand
(struct + json + numpy: Debian has no safetensors package), into OUTDIR:

  all_dtypes.safetensors   one [2, 3] tensor per dtype, a scalar, an empty
                           tensor and __metadata__; values follow the rules
                           in value_of() so the C test recomputes them
  sharded/                 two shards and model.safetensors.index.json
  bad/NAME.safetensors     malformed files; bad/expect.txt lists, per file,
                           the status and a piece of the message expected
  bad_index/*/             broken sharded checkpoints (same expect.txt)

usage: safetensors_write.py OUTDIR
"""
import json
import os
import struct
import sys

import numpy as np


def header_bytes(header, pad_to=8):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % pad_to)  # writers pad the header with spaces
    return text


def write_file(path, tensors, metadata=None, pad_to=8):
    """tensors: list of (name, dtype string, shape, raw bytes)."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = header_bytes(header, pad_to)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# Element i of every [2, 3] test tensor (the C test recomputes these).
FLOATS = [(i - 2) * 0.5 for i in range(6)]
F8_E4M3 = bytes([0xB8, 0xB0, 0x00, 0x30, 0x38, 0x3C])  # -1 -0.5 0 0.5 1 1.5
F8_E5M2 = bytes([0xBC, 0xB8, 0x00, 0x38, 0x3C, 0x3E])


def dtype_tensors():
    i = np.arange(6)
    f32 = np.array(FLOATS, dtype="<f4")
    bf16 = (f32.view("<u4") >> 16).astype("<u2").tobytes()
    out = [
        ("t_F64", "F64", np.array(FLOATS, "<f8").tobytes()),
        ("t_F32", "F32", f32.tobytes()),
        ("t_F16", "F16", np.array(FLOATS, "<f2").tobytes()),
        ("t_BF16", "BF16", bf16),
        ("t_F8_E4M3", "F8_E4M3", F8_E4M3),
        ("t_F8_E5M2", "F8_E5M2", F8_E5M2),
    ]
    for code, np_type in [("I64", "<i8"), ("I32", "<i4"), ("I16", "<i2"), ("I8", "i1")]:
        out.append(("t_" + code, code, ((i - 2) * 3).astype(np_type).tobytes()))
    for code, np_type in [("U64", "<u8"), ("U32", "<u4"), ("U16", "<u2"), ("U8", "u1")]:
        out.append(("t_" + code, code, (i * 3).astype(np_type).tobytes()))
    out.append(("t_BOOL", "BOOL", (i % 2).astype("u1").tobytes()))
    return [(name, code, (2, 3), raw) for name, code, raw in out]


def write_good(out):
    tensors = dtype_tensors()
    tensors.append(("scalar", "F32", (), np.array([7.25], "<f4").tobytes()))
    tensors.append(("empty", "F32", (0, 4), b""))
    # pad_to=1: the data region starts unaligned, as the format allows
    write_file(os.path.join(out, "all_dtypes.safetensors"), tensors,
               {"format": "pt", "note": "rlx test"}, pad_to=1)


def write_sharded(out):
    d = os.path.join(out, "sharded")
    os.makedirs(d, exist_ok=True)
    shards = {"model-00001-of-00002.safetensors": ["a.weight", "b.weight"],
              "model-00002-of-00002.safetensors": ["c.weight"]}
    weight_map = {}
    for k, (shard, names) in enumerate(sorted(shards.items())):
        tensors = []
        for j, name in enumerate(names):
            values = np.arange(4, dtype="<f4") + 10 * (k * 2 + j)
            tensors.append((name, "F32", (2, 2), values.tobytes()))
            weight_map[name] = shard
        write_file(os.path.join(d, shard), tensors, {"shard": str(k)})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 48}, "weight_map": weight_map}, f)


def bad_files():
    """(name, file bytes, status, message piece)."""
    ok = {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}

    def hdr(h):
        return json.dumps(h).encode()

    def entry(**kw):
        e = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
        e.update(kw)
        return {"x": e}

    def file(h, data=b"\0" * 8):
        return struct.pack("<Q", len(h)) + h + data

    big = 1 << 62
    return [
        ("empty", b"", "INVALID_ARGUMENT", "too short"),
        ("short", b"\x05\0\0\0", "INVALID_ARGUMENT", "too short"),
        ("huge_header_len", struct.pack("<Q", 1 << 40) + hdr(ok), "INVALID_ARGUMENT",
         "header length"),
        ("header_past_end", struct.pack("<Q", 500) + hdr(ok), "INVALID_ARGUMENT",
         "header length"),
        ("not_json", file(b"{not json}"), "INVALID_ARGUMENT", "malformed JSON"),
        ("json_ends_early", file(b'{"x": {"dtype": '), "INVALID_ARGUMENT", "ends inside"),
        ("not_object", file(b"[1, 2]"), "INVALID_ARGUMENT", "not a JSON object"),
        ("garbage_after_json", file(hdr(ok) + b" x"), "INVALID_ARGUMENT", "malformed JSON"),
        ("entry_not_object", file(hdr({"x": 3})), "INVALID_ARGUMENT", "not an object"),
        ("unknown_dtype", file(hdr(entry(dtype="F4"))), "UNIMPLEMENTED", "dtype 'F4'"),
        ("no_dtype", file(hdr({"x": {"shape": [2], "data_offsets": [0, 8]}})),
         "INVALID_ARGUMENT", "\"dtype\""),
        ("no_shape", file(hdr({"x": {"dtype": "F32", "data_offsets": [0, 8]}})),
         "INVALID_ARGUMENT", "\"shape\""),
        ("negative_dim", file(hdr(entry(shape=[-2]))), "INVALID_ARGUMENT", "shape[0]"),
        ("float_dim", file(hdr(entry(shape=[2.0]))), "INVALID_ARGUMENT", "shape[0]"),
        ("rank_9", file(hdr(entry(shape=[1] * 9))), "UNIMPLEMENTED", "rank 9"),
        ("numel_overflow", file(hdr(entry(shape=[big, big]))), "INVALID_ARGUMENT", "overflows"),
        ("offsets_past_end", file(hdr(entry(data_offsets=[0, 16]))), "INVALID_ARGUMENT",
         "outside the data region"),
        ("begin_after_end", file(hdr(entry(data_offsets=[8, 0]))), "INVALID_ARGUMENT",
         "begin > end"),
        ("offsets_one_number", file(hdr(entry(data_offsets=[0]))), "INVALID_ARGUMENT",
         "data_offsets"),
        ("offsets_float", file(hdr(entry(data_offsets=[0.0, 8]))), "INVALID_ARGUMENT",
         "data_offsets"),
        ("bytes_mismatch", file(hdr(entry(shape=[3]))), "INVALID_ARGUMENT", "12"),
        ("overlap", file(hdr({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})),
         "INVALID_ARGUMENT", "overlap"),
        ("truncated_data", file(hdr(ok), b"\0" * 5), "INVALID_ARGUMENT",
         "outside the data region"),
        ("metadata_not_object", file(hdr({"__metadata__": [1], **ok})), "INVALID_ARGUMENT",
         "__metadata__"),
    ]


def write_bad(out):
    d = os.path.join(out, "bad")
    os.makedirs(d, exist_ok=True)
    lines = []
    for name, data, status, piece in bad_files():
        with open(os.path.join(d, name + ".safetensors"), "wb") as f:
            f.write(data)
        lines.append(f"bad/{name}.safetensors\t{status}\t{piece}")
    lines += write_bad_indexes(out)
    with open(os.path.join(d, "expect.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_bad_indexes(out):
    """Sharded checkpoints whose index is wrong: a missing shard, a shard
    outside the folder, a tensor not where the index says."""
    cases = [
        ("missing_shard", {"a": "nowhere.safetensors"}, "NOT_FOUND", "cannot open"),
        ("outside_folder", {"a": "../all_dtypes.safetensors"}, "INVALID_ARGUMENT",
         "file name beside"),
        ("wrong_shard", {"a": "one.safetensors", "zzz": "one.safetensors"},
         "INVALID_ARGUMENT", "not in its shard"),
        ("no_weight_map", None, "INVALID_ARGUMENT", "weight_map"),
    ]
    lines = []
    for name, weight_map, status, piece in cases:
        d = os.path.join(out, "bad_index", name)
        os.makedirs(d, exist_ok=True)
        write_file(os.path.join(d, "one.safetensors"),
                   [("a", "F32", (1,), np.ones(1, "<f4").tobytes())])
        index = {"weight_map": weight_map} if weight_map is not None else {"metadata": {}}
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f)
        lines.append(f"bad_index/{name}\t{status}\t{piece}")
    return lines


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write_good(out)
    write_sharded(out)
    write_bad(out)


if __name__ == "__main__":
    main()
