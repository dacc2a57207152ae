#version 450
// Elementwise fast path (picked at encode time by vk_fast.c): BINARY and
// UNARY over f32 / f16 / bf16, float casts, and same-dtype copies moved as
// raw 32-bit words. The output is dense; each input is dense, one scalar,
// or broadcast along leading dims (index i % period) or trailing dims
// (i / period), periods a multiple of 4. An invocation handles QUADS groups
// of 4 consecutive elements with one vector access per operand; a last
// partial group goes element by element. Op and dtypes are uniform branches
// on the record; the arithmetic is common.glsl's, as in eltwise.comp.
#include "common.glsl"
#extension GL_EXT_control_flow_attributes : require
#include "vec4io.glsl"
layout(local_size_x = 256) in;

const uint QUADS = 4u;
const int O = RLXVK_SLOT_OUT0;

uint src_index(int k, uint i) {
  int mode = PX(EV_MODE + k);
  uint p = PU(RLXVK_X + EV_PERIOD + k);
  if (mode == EV_DENSE) return i;
  if (mode == EV_SCALAR) return 0u;
  return mode == EV_MOD ? i % p : i / p;
}

// A scalar or trailing-dims (EV_DIV) input gives one value to all 4 lanes.
bool splat(int k) {
  int mode = PX(EV_MODE + k);
  return mode == EV_SCALAR || mode == EV_DIV;
}

vec4 load_in(int k, uint dt, uint off, uint i) {
  if (splat(k)) return vec4(ld_f(dt, off, int(src_index(k, i))));
  return ld4(dt, at4(dt, off, src_index(k, i)));
}

// Raw words: word i of input 0 -> output word i (splat only for 4-byte
// elements, where words are elements).
void copy_raw(uint i, uint n) {
  uint ib = v_off(RLXVK_SLOT_IN0) + src_index(0, i) * 4u, ob = v_off(O) + i * 4u;
  if (i + 3u < n) {
    aq4[ob >> 4] = splat(0) ? uvec4(a32[ib >> 2]) : aq4[ib >> 4];
  } else {
    for (uint j = 0u; i + j < n; j++) a32[(ob >> 2) + j] = a32[(v_off(RLXVK_SLOT_IN0) >> 2) + src_index(0, i + j)];
  }
}

vec4 compute4(int kind, int op, vec4 a, vec4 b) {
  if (kind == RLXVK_K_BINARY)
    return vec4(binary_f(op, a.x, b.x), binary_f(op, a.y, b.y), binary_f(op, a.z, b.z),
                binary_f(op, a.w, b.w));
  if (kind == RLXVK_K_UNARY)
    return vec4(activation(op, a.x), activation(op, a.y), activation(op, a.z), activation(op, a.w));
  return a; // COPY (cast)
}

float compute1(int kind, int op, float a, float b) {
  if (kind == RLXVK_K_BINARY) return binary_f(op, a, b);
  if (kind == RLXVK_K_UNARY) return activation(op, a);
  return a;
}

void float_quad(uint i, uint n, int kind, int op) {
  const int A = RLXVK_SLOT_IN0, B = RLXVK_SLOT_IN0 + 1;
  uint odt = v_dt(O), adt = v_dt(A), bdt = kind == RLXVK_K_BINARY ? v_dt(B) : adt;
  uint oo = v_off(O), ao = v_off(A), bo = kind == RLXVK_K_BINARY ? v_off(B) : 0u;
  if (i + 3u < n) {
    vec4 a = load_in(0, adt, ao, i);
    vec4 b = kind == RLXVK_K_BINARY ? load_in(1, bdt, bo, i) : a;
    st4(odt, at4(odt, oo, i), compute4(kind, op, a, b));
    return;
  }
  for (uint e = i; e < n; e++) {
    float a = ld_f(adt, ao, int(src_index(0, e)));
    float b = kind == RLXVK_K_BINARY ? ld_f(bdt, bo, int(src_index(1, e))) : a;
    st_f(odt, oo, int(e), compute1(kind, op, a, b));
  }
}

// Every quad of this invocation is whole: all loads are issued before any
// store (stores to the arena could alias later loads, so the compiler
// would otherwise keep one quad in flight).
void float_whole(uint first, int kind, int op) {
  const int A = RLXVK_SLOT_IN0, B = RLXVK_SLOT_IN0 + 1;
  bool binary = kind == RLXVK_K_BINARY;
  uint odt = v_dt(O), adt = v_dt(A), bdt = binary ? v_dt(B) : adt;
  uint oo = v_off(O), ao = v_off(A), bo = binary ? v_off(B) : 0u;
  vec4 a[QUADS], b[QUADS];
  [[unroll]] for (uint k = 0u; k < QUADS; k++) {
    uint i = (first + k * 256u) * 4u;
    a[k] = load_in(0, adt, ao, i);
    b[k] = binary ? load_in(1, bdt, bo, i) : a[k];
  }
  [[unroll]] for (uint k = 0u; k < QUADS; k++)
    st4(odt, at4(odt, oo, (first + k * 256u) * 4u), compute4(kind, op, a[k], b[k]));
}

void raw_whole(uint first) {
  uint ib = v_off(RLXVK_SLOT_IN0), ob = v_off(O);
  uvec4 w[QUADS];
  [[unroll]] for (uint k = 0u; k < QUADS; k++) {
    uint src = ib + src_index(0, (first + k * 256u) * 4u) * 4u;
    w[k] = splat(0) ? uvec4(a32[src >> 2]) : aq4[src >> 4];
  }
  [[unroll]] for (uint k = 0u; k < QUADS; k++) aq4[(ob >> 4) + first + k * 256u] = w[k];
}

void main() {
  uint n = PU(RLXVK_X + EV_N);
  int kind = P(RLXVK_KIND), op = P(RLXVK_OP);
  bool raw = PX(EV_RAW) != 0;
  uint first = group_linear() * QUADS * 256u + gl_LocalInvocationID.x;
  if ((first + (QUADS - 1u) * 256u) * 4u + 3u < n) {
    if (raw) raw_whole(first);
    else float_whole(first, kind, op);
    return;
  }
  [[unroll]] for (uint k = 0u; k < QUADS; k++) {
    uint i = (first + k * 256u) * 4u;
    if (i >= n) return;
    if (raw) copy_raw(i, n);
    else float_quad(i, n, kind, op);
  }
}
