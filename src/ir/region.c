/* ElementwiseRegion programs: encoding, decoding and validation (region.h). */
#include "ir/region.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph.h"

const char* rlx_region_kind_name(int32_t kind) {
  static const char* const names[RLX_RI_KIND_COUNT] = {"unary", "binary", "cast", "const"};
  return kind >= 0 && kind < RLX_RI_KIND_COUNT ? names[kind] : "?";
}

static void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void rlx_region_encode(const rlx_region_program* p, uint8_t* buf) {
  memset(buf, 0, rlx_region_bytes(p->n_instrs));
  buf[0] = RLX_REGION_VERSION;
  buf[1] = (uint8_t)p->dtype;
  buf[2] = (uint8_t)p->n_inputs;
  buf[3] = (uint8_t)p->n_instrs;
  for (int32_t k = 0; k < p->n_instrs; k++) {
    uint8_t* q = buf + RLX_REGION_HEADER + (size_t)k * RLX_REGION_INSTR_BYTES;
    q[0] = p->code[k].kind;
    q[1] = p->code[k].op;
    q[2] = p->code[k].a;
    q[3] = p->code[k].b;
    uint64_t bits;
    memcpy(&bits, &p->imm[k], sizeof bits);
    put_u64(q + 4, bits);
  }
}

static rlx_status bad(char* msg, size_t cap, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static rlx_status bad(char* msg, size_t cap, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return RLX_INVALID_ARGUMENT;
}

static rlx_status decode_header(const uint8_t* b, size_t n, rlx_region_program* p, char* msg,
                                size_t cap) {
  if (n < RLX_REGION_HEADER)
    return bad(msg, cap, "program has %zu bytes, less than its %d-byte header", n,
               RLX_REGION_HEADER);
  if (b[0] != RLX_REGION_VERSION)
    return bad(msg, cap, "program version %d is not %d", b[0], RLX_REGION_VERSION);
  if (b[4] | b[5] | b[6] | b[7]) return bad(msg, cap, "program header bytes 4..7 must be zero");
  p->dtype = b[1];
  p->n_inputs = b[2];
  p->n_instrs = b[3];
  if (!rlx_dtype_is_compute_float((rlx_dtype)p->dtype) || p->dtype >= RLX_DTYPE_COUNT)
    return bad(msg, cap, "region dtype %d is not f32, f16, bf16 or f64", p->dtype);
  if (p->n_inputs < 1 || p->n_inputs > RLX_REGION_MAX_INPUTS)
    return bad(msg, cap, "%d inputs, a region takes 1..%d", p->n_inputs, RLX_REGION_MAX_INPUTS);
  if (p->n_instrs < 1 || p->n_instrs > RLX_REGION_MAX_INSTRS)
    return bad(msg, cap, "%d instructions, a region has 1..%d", p->n_instrs,
               RLX_REGION_MAX_INSTRS);
  if (n != rlx_region_bytes(p->n_instrs))
    return bad(msg, cap, "program has %zu bytes, %d instructions need %zu", n, p->n_instrs,
               rlx_region_bytes(p->n_instrs));
  return RLX_OK;
}

/* Operand slot s of instruction k: an input or an earlier result. */
static int slot_ok(const rlx_region_program* p, int32_t k, int32_t s) {
  return s < p->n_inputs + k;
}

static rlx_status check_instr(const rlx_region_program* p, int32_t k, char* msg, size_t cap) {
  const rlx_region_instr* in = &p->code[k];
  int operands = 0;
  switch (in->kind) {
    case RLX_RI_UNARY:
      if (in->op <= RLX_ACT_NONE || in->op >= RLX_ACT_COUNT)
        return bad(msg, cap, "instruction %d: activation %d is out of range", k, in->op);
      operands = 1;
      break;
    case RLX_RI_BINARY:
      if (in->op >= RLX_BIN_COUNT)
        return bad(msg, cap, "instruction %d: binary op %d is out of range", k, in->op);
      operands = 2;
      break;
    case RLX_RI_CAST:
      if (in->op != 0) return bad(msg, cap, "instruction %d: cast takes op 0, got %d", k, in->op);
      if (in->a >= p->n_inputs)
        return bad(msg, cap, "instruction %d: cast reads slot %d, not an input (0..%d)", k,
                   in->a, p->n_inputs - 1);
      operands = 1;
      break;
    case RLX_RI_CONST:
      if (in->op != 0) return bad(msg, cap, "instruction %d: const takes op 0, got %d", k, in->op);
      break;
    default: return bad(msg, cap, "instruction %d: kind %d is not an instruction kind", k, in->kind);
  }
  if (operands >= 1 && !slot_ok(p, k, in->a))
    return bad(msg, cap, "instruction %d (%s): operand a = slot %d is neither an input nor an "
               "earlier result (slots 0..%d)", k, rlx_region_kind_name(in->kind), in->a,
               p->n_inputs + k - 1);
  if (operands >= 2 && !slot_ok(p, k, in->b))
    return bad(msg, cap, "instruction %d (%s): operand b = slot %d is neither an input nor an "
               "earlier result (slots 0..%d)", k, rlx_region_kind_name(in->kind), in->b,
               p->n_inputs + k - 1);
  if (operands < 2 && in->b != 0)
    return bad(msg, cap, "instruction %d (%s): unused operand b must be 0", k,
               rlx_region_kind_name(in->kind));
  if (operands < 1 && in->a != 0)
    return bad(msg, cap, "instruction %d (%s): unused operand a must be 0", k,
               rlx_region_kind_name(in->kind));
  if (in->kind != RLX_RI_CONST && p->imm[k] != 0.0)
    return bad(msg, cap, "instruction %d (%s): immediate must be 0", k,
               rlx_region_kind_name(in->kind));
  return RLX_OK;
}

/* Which inputs each kind of instruction reads: bit 0 a non-cast read, bit 1
 * a cast. */
static void input_reads(const rlx_region_program* p, uint8_t* reads) {
  memset(reads, 0, RLX_REGION_MAX_INPUTS);
  for (int32_t k = 0; k < p->n_instrs; k++) {
    const rlx_region_instr* in = &p->code[k];
    uint8_t bit = in->kind == RLX_RI_CAST ? 2 : 1;
    if (in->kind != RLX_RI_CONST && in->a < p->n_inputs) reads[in->a] |= bit;
    if (in->kind == RLX_RI_BINARY && in->b < p->n_inputs) reads[in->b] |= bit;
  }
}

static rlx_status check_inputs(const rlx_region_program* p, const rlx_dtype* dt, char* msg,
                               size_t cap) {
  uint8_t reads[RLX_REGION_MAX_INPUTS];
  input_reads(p, reads);
  for (int32_t i = 0; i < p->n_inputs; i++) {
    if (!reads[i]) return bad(msg, cap, "input %d is never read", i);
    if (!dt) continue;
    int same = dt[i] == (rlx_dtype)p->dtype;
    if ((reads[i] & 1) && !same)
      return bad(msg, cap, "input %d is %s but the region computes in %s (read it through a "
                 "cast instruction)", i, rlx_dtype_name(dt[i]),
                 rlx_dtype_name((rlx_dtype)p->dtype));
    if ((reads[i] & 2) && (same || !rlx_dtype_is_compute_float(dt[i])))
      return bad(msg, cap, "input %d is %s: a cast instruction reads a float input of another "
                 "dtype than the region's %s", i, rlx_dtype_name(dt[i]),
                 rlx_dtype_name((rlx_dtype)p->dtype));
  }
  return RLX_OK;
}

rlx_status rlx_region_decode(const void* bytes, size_t n_bytes, const rlx_dtype* in_dtypes,
                             int32_t n_in, rlx_region_program* out, char* msg, size_t msg_cap) {
  rlx_region_program p;
  memset(&p, 0, sizeof p);
  if (!bytes && n_bytes) return bad(msg, msg_cap, "program bytes are NULL");
  const uint8_t* b = bytes;
  RLX_RETURN_IF_ERROR(decode_header(b, n_bytes, &p, msg, msg_cap));
  if (n_in != p.n_inputs)
    return bad(msg, msg_cap, "program declares %d inputs, the node has %d", p.n_inputs, n_in);
  for (int32_t k = 0; k < p.n_instrs; k++) {
    const uint8_t* q = b + RLX_REGION_HEADER + (size_t)k * RLX_REGION_INSTR_BYTES;
    p.code[k] = (rlx_region_instr){q[0], q[1], q[2], q[3]};
    uint64_t bits = get_u64(q + 4);
    memcpy(&p.imm[k], &bits, sizeof bits);
    RLX_RETURN_IF_ERROR(check_instr(&p, k, msg, msg_cap));
  }
  RLX_RETURN_IF_ERROR(check_inputs(&p, in_dtypes, msg, msg_cap));
  if (out) *out = p;
  return RLX_OK;
}

/* Operand slots of instruction in that occupy registers (a cast's input is
 * read by the cast itself; a constant has none). */
static int live_operands(const rlx_region_instr* in, int32_t* ops) {
  if (in->kind == RLX_RI_CONST || in->kind == RLX_RI_CAST) return 0;
  ops[0] = in->a;
  ops[1] = in->b;
  if (in->kind == RLX_RI_UNARY) return 1;
  return in->a == in->b ? 1 : 2;
}

int32_t rlx_region_max_live(const rlx_region_program* p) {
  int32_t last_use[RLX_REGION_MAX_SLOTS];
  uint8_t in_reg[RLX_REGION_MAX_SLOTS] = {0};
  for (int32_t s = 0; s < RLX_REGION_MAX_SLOTS; s++) last_use[s] = -1;
  for (int32_t k = 0; k < p->n_instrs; k++) {
    int32_t ops[2], n = live_operands(&p->code[k], ops);
    for (int i = 0; i < n; i++) last_use[ops[i]] = k;
  }
  int32_t out = p->n_inputs + p->n_instrs - 1, live = 0, most = 0;
  last_use[out] = p->n_instrs;
  for (int32_t k = 0; k < p->n_instrs; k++) {
    const rlx_region_instr* in = &p->code[k];
    if (in->kind == RLX_RI_CONST) continue;
    int32_t ops[2], n = live_operands(in, ops);
    for (int i = 0; i < n; i++)
      if (ops[i] < p->n_inputs && !in_reg[ops[i]]) { /* loaded before its first read */
        in_reg[ops[i]] = 1;
        if (++live > most) most = live;
      }
    for (int i = 0; i < n; i++) /* immediates hold no register */
      if (last_use[ops[i]] == k && in_reg[ops[i]]) live--;
    if (++live > most) most = live;
    in_reg[p->n_inputs + k] = 1;
    if (last_use[p->n_inputs + k] < 0) live--;
  }
  if (p->code[p->n_instrs - 1].kind == RLX_RI_CONST && live + 1 > most) most = live + 1;
  return most;
}
