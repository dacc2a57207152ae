#!/usr/bin/env python3
"""Turns a SPIR-V module that uses SPV_NV_cooperative_matrix into one that
uses SPV_KHR_cooperative_matrix (build-time tool for the Vulkan backend).

Debian's glslc (shaderc 2023.2) knows GL_NV_cooperative_matrix but not the
KHR extension, and the two differ only in encoding:

  NV                                   KHR
  Capability CooperativeMatrixNV 5357  CooperativeMatrixKHR 6022
  TypeCooperativeMatrixNV 5358         TypeCooperativeMatrixKHR 4456 (+ Use id)
     comp scope rows cols                 comp scope rows cols use
  CooperativeMatrixLoadNV 5359         CooperativeMatrixLoadKHR 4457
     ptr stride colmajor(bool) [mem]      ptr layout(int) stride [mem]
  CooperativeMatrixStoreNV 5360        CooperativeMatrixStoreKHR 4458
     ptr obj stride colmajor [mem]        ptr obj layout stride [mem]
  CooperativeMatrixMulAddNV 5361       CooperativeMatrixMulAddKHR 4459
  CooperativeMatrixLengthNV 5362       CooperativeMatrixLengthKHR 4460

KHR matrix types carry a Use (A = 0, B = 1, accumulator = 2), so the A and
B types must be distinct. The shader marks them: A's column count is the
specialization constant with SpecId --a-spec (default 90), B's row count the
one with SpecId --b-spec (91); every other matrix type is an accumulator.
Those two spec constants become plain constants (their SpecId decorations
are dropped), so a driver sees fixed sizes.

Usage: spirv_coopmat_khr.py in.spv out.spv [--a-spec N] [--b-spec N]
Exits non-zero, writing nothing, on anything it does not recognise.
"""
import argparse
import struct
import sys

MAGIC = 0x07230203
OP_EXTENSION, OP_CAPABILITY = 10, 17
OP_TYPE_INT = 21
OP_CONSTANT_TRUE, OP_CONSTANT_FALSE, OP_CONSTANT = 41, 42, 43
OP_SPEC_CONSTANT, OP_SPEC_CONSTANT_OP = 50, 52
OP_DECORATE = 71
DECORATION_SPEC_ID = 1
CAP_NV, CAP_KHR = 5357, 6022
NV_TYPE, NV_LOAD, NV_STORE, NV_MULADD, NV_LENGTH = 5358, 5359, 5360, 5361, 5362
KHR_TYPE, KHR_LOAD, KHR_STORE, KHR_MULADD, KHR_LENGTH = 4456, 4457, 4458, 4459, 4460
NV_TO_KHR = {NV_MULADD: KHR_MULADD, NV_LENGTH: KHR_LENGTH}
USE_A, USE_B, USE_ACC = 0, 1, 2
ROW_MAJOR, COL_MAJOR = 0, 1


class RewriteError(Exception):
    pass


def instructions(words):
    """(opcode, operand list) for each instruction after the header."""
    i = 5
    while i < len(words):
        count, op = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            raise RewriteError(f"malformed instruction at word {i}")
        yield op, list(words[i + 1:i + count])
        i += count


def encode(op, operands):
    return [((len(operands) + 1) << 16) | op] + operands


def string_operand(text):
    raw = text.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 4)
    return list(struct.unpack(f"<{len(raw) // 4}I", raw))


def decode_string(operands):
    raw = struct.pack(f"<{len(operands)}I", *operands)
    return raw.split(b"\0", 1)[0].decode()


def rewrite(words, a_spec, b_spec):
    if len(words) < 5 or words[0] != MAGIC:
        raise RewriteError("not a little-endian SPIR-V module")
    insts = list(instructions(words))
    spec_ids = {}  # result id -> SpecId
    bools = {}     # OpConstantTrue/False id -> True/False
    int32_type = None
    for op, ops in insts:
        if op == OP_DECORATE and len(ops) == 3 and ops[1] == DECORATION_SPEC_ID:
            spec_ids[ops[0]] = ops[2]
        elif op in (OP_CONSTANT_TRUE, OP_CONSTANT_FALSE):
            bools[ops[1]] = op == OP_CONSTANT_TRUE
        elif op == OP_TYPE_INT and ops[1] == 32 and (int32_type is None or ops[2] == 0):
            int32_type = ops[0]  # prefer the unsigned one
    a_id = [i for i, s in spec_ids.items() if s == a_spec]
    b_id = [i for i, s in spec_ids.items() if s == b_spec]
    if len(a_id) != 1 or len(b_id) != 1:
        raise RewriteError(f"need one spec constant with SpecId {a_spec} (A's K) and one with {b_spec} (B's K)")
    a_id, b_id = a_id[0], b_id[0]
    if int32_type is None:
        raise RewriteError("no 32-bit integer type to build Use / layout constants from")

    bound = words[3]
    const_ids = {v: bound + v for v in range(3)}  # uint constants 0, 1, 2
    bound += 3
    out = []
    types = {USE_A: 0, USE_B: 0, USE_ACC: 0}
    for op, ops in insts:
        if op == OP_CAPABILITY and ops == [CAP_NV]:
            out += encode(OP_CAPABILITY, [CAP_KHR])
        elif op == OP_EXTENSION and decode_string(ops) == "SPV_NV_cooperative_matrix":
            out += encode(OP_EXTENSION, string_operand("SPV_KHR_cooperative_matrix"))
        elif op == OP_DECORATE and len(ops) == 3 and ops[1] == DECORATION_SPEC_ID and ops[0] in (a_id, b_id):
            continue
        elif op == OP_SPEC_CONSTANT and ops[1] in (a_id, b_id):
            out += encode(OP_CONSTANT, ops)
        elif op == OP_TYPE_INT and ops[0] == int32_type:
            out += encode(op, ops)
            for v in range(3):  # right after the type: before any matrix type uses them
                out += encode(OP_CONSTANT, [int32_type, const_ids[v], v])
        elif op == NV_TYPE:
            if len(ops) != 5:
                raise RewriteError("unexpected TypeCooperativeMatrixNV operands")
            use = USE_A if ops[4] == a_id else USE_B if ops[3] == b_id else USE_ACC
            if ops[3] == a_id or ops[4] == b_id:
                raise RewriteError("the A/B marker constants are in the wrong dimension")
            types[use] += 1
            out += encode(KHR_TYPE, ops + [const_ids[use]])
        elif op == NV_LOAD:
            rtype, res, ptr, stride, colmajor = ops[:5]
            out += encode(KHR_LOAD, [rtype, res, ptr, layout_id(bools, colmajor, const_ids), stride] + ops[5:])
        elif op == NV_STORE:
            ptr, obj, stride, colmajor = ops[:4]
            out += encode(KHR_STORE, [ptr, obj, layout_id(bools, colmajor, const_ids), stride] + ops[4:])
        elif op in NV_TO_KHR:
            out += encode(NV_TO_KHR[op], ops)
        elif op == OP_SPEC_CONSTANT_OP and len(ops) >= 3 and ops[2] == NV_LENGTH:
            out += encode(op, ops[:2] + [KHR_LENGTH] + ops[3:])
        elif 5357 <= op <= 5362:
            raise RewriteError(f"unhandled NV cooperative-matrix opcode {op}")
        else:
            out += encode(op, ops)
    if types[USE_A] != 1 or types[USE_B] != 1:
        raise RewriteError(f"expected one A and one B matrix type, found {types}")
    header = list(words[:5])
    header[3] = bound
    return header + out


def layout_id(bools, colmajor, const_ids):
    if colmajor not in bools:
        raise RewriteError("a load/store's column-major flag is not a constant bool")
    return const_ids[COL_MAJOR if bools[colmajor] else ROW_MAJOR]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--a-spec", type=int, default=90)
    ap.add_argument("--b-spec", type=int, default=91)
    args = ap.parse_args()
    data = open(args.input, "rb").read()
    if len(data) % 4:
        sys.exit(f"{args.input}: not a whole number of words")
    words = list(struct.unpack(f"<{len(data) // 4}I", data))
    try:
        result = rewrite(words, args.a_spec, args.b_spec)
    except RewriteError as e:
        sys.exit(f"spirv_coopmat_khr: {args.input}: {e}")
    with open(args.output, "wb") as f:
        f.write(struct.pack(f"<{len(result)}I", *result))


if __name__ == "__main__":
    main()
