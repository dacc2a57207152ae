#version 450
// COPY / BINARY / COMPARE / WHERE / UNARY: one invocation per output element.
// All operands are aligned to the output's (host-coalesced) shape; the op
// and dtypes come from the record, so one pipeline serves every variant.
#include "common.glsl"
layout(local_size_x = 64) in;

int64_t int_pow(int64_t a, int64_t b) {
  if (b < 0L) return a == 1L ? 1L : (a == -1L ? ((b & 1L) != 0L ? -1L : 1L) : 0L);
  uint64_t r = 1UL, base = uint64_t(a);
  while (b != 0L) {
    if ((b & 1L) != 0L) r *= base;
    base *= base;
    b >>= 1;
  }
  return int64_t(r);
}

int64_t binary_i(int op, int64_t a, int64_t b) {
  switch (op) {
    case RLX_BIN_ADD: return a + b;
    case RLX_BIN_SUB: return a - b;
    case RLX_BIN_MUL: return a * b;
    case RLX_BIN_DIV: return b == 0L ? 0L : (b == -1L ? -a : a / b);
    case RLX_BIN_MAX: return a > b ? a : b;
    case RLX_BIN_MIN: return a < b ? a : b;
    case RLX_BIN_POW: return int_pow(a, b);
  }
  return 0L;
}

bool compare_f(int op, float a, float b) {
  switch (op) {
    case RLX_CMP_EQ: return a == b;
    case RLX_CMP_NE: return a != b || isnan(a) || isnan(b);
    case RLX_CMP_LT: return a < b;
    case RLX_CMP_LE: return a <= b;
    case RLX_CMP_GT: return a > b;
    case RLX_CMP_GE: return a >= b;
  }
  return false;
}

bool compare_i(int op, int64_t a, int64_t b) {
  switch (op) {
    case RLX_CMP_EQ: return a == b;
    case RLX_CMP_NE: return a != b;
    case RLX_CMP_LT: return a < b;
    case RLX_CMP_LE: return a <= b;
    case RLX_CMP_GT: return a > b;
    case RLX_CMP_GE: return a >= b;
  }
  return false;
}

void main() {
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int kind = P(RLXVK_KIND), op = P(RLXVK_OP);
  const int O = RLXVK_SLOT_OUT0, A = RLXVK_SLOT_IN0, B = RLXVK_SLOT_IN0 + 1, C = RLXVK_SLOT_IN0 + 2;
  int oi = view_elem(O, O, gid);
  int ai = view_elem(O, A, gid);
  uint odt = v_dt(O), adt = v_dt(A), oo = v_off(O), ao = v_off(A);
  bool ints = is_intlike(adt);
  if (kind == RLXVK_K_COPY) {
    copy_elem(odt, oo, oi, adt, ao, ai);
  } else if (kind == RLXVK_K_UNARY) {
    if (ints && (op == RLX_ACT_NEG || op == RLX_ACT_ABS || op == RLX_ACT_RELU || op == RLX_ACT_ROUND)) {
      int64_t x = ld_i(adt, ao, ai);
      int64_t y = op == RLX_ACT_NEG ? -x : op == RLX_ACT_ABS ? (x < 0L ? -x : x)
                : op == RLX_ACT_RELU ? (x < 0L ? 0L : x) : x;
      st_i(odt, oo, oi, y);
    } else {
      st_f(odt, oo, oi, activation(op, ld_f(adt, ao, ai)));
    }
  } else {
    int bi = view_elem(O, B, gid);
    uint bdt = v_dt(B), bo = v_off(B);
    if (kind == RLXVK_K_BINARY) {
      if (ints) st_i(odt, oo, oi, binary_i(op, ld_i(adt, ao, ai), ld_i(bdt, bo, bi)));
      else st_f(odt, oo, oi, binary_f(op, ld_f(adt, ao, ai), ld_f(bdt, bo, bi)));
    } else if (kind == RLXVK_K_COMPARE) {
      bool r = ints ? compare_i(op, ld_i(adt, ao, ai), ld_i(bdt, bo, bi))
                    : compare_f(op, ld_f(adt, ao, ai), ld_f(bdt, bo, bi));
      st_i(odt, oo, oi, r ? 1L : 0L);
    } else { // WHERE
      int ci = view_elem(O, C, gid);
      if (ld_i(adt, ao, ai) != 0L) copy_elem(odt, oo, oi, bdt, bo, bi);
      else copy_elem(odt, oo, oi, v_dt(C), v_off(C), ci);
    }
  }
}
