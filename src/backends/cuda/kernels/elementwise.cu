/* Elementwise kernels: copy/cast, binary, compare, where, unary.
 *
 * rlx_ew_generic follows the reference (ref.c run_elementwise) element for
 * element: strided views of any rank and dtype, float math in double, integer
 * math in wrapping int64. Each thread reads all operands of its element before
 * writing it, so an output planned over a dying input (in place) is correct.
 * rlx_ew_f32 is the bandwidth path for contiguous f32 binary/unary steps
 * (16-byte accesses; scalar-broadcast operands allowed). */
#include "common.cuh"

RLXK_DEV void ew_element(char* arena, const rlxk_ew& p, int64_t oi, const int64_t* ii) {
  char* o = atw(arena, p.ooff);
  const char* a = at(arena, p.ioff[0]);
  int at_ = p.idt[0];
  switch (p.kind) {
    case 0: /* RLX_K_COPY */
      copy_elem(o, p.odt, oi, a, at_, ii[0]);
      break;
    case 1: { /* RLX_K_BINARY */
      const char* b = at(arena, p.ioff[1]);
      if (at_ == RLX_U64) /* unsigned div / max / min / pow, as the reference */
        st_i64(o, p.odt, oi, rlx_u64_binary(p.op, ld_i64(a, at_, ii[0]), ld_i64(b, p.idt[1], ii[1])));
      else if (is_intlike(at_))
        st_i64(o, p.odt, oi, rlx_int_binary(p.op, ld_i64(a, at_, ii[0]), ld_i64(b, p.idt[1], ii[1])));
      else
        st_f64(o, p.odt, oi, rlx_binary_f64(p.op, ld_f64(a, at_, ii[0]), ld_f64(b, p.idt[1], ii[1])));
      break;
    }
    case 2: { /* RLX_K_COMPARE */
      const char* b = at(arena, p.ioff[1]);
      int r = at_ == RLX_U64 ? rlx_compare_u64(p.op, ld_i64(a, at_, ii[0]), ld_i64(b, p.idt[1], ii[1]))
              : is_intlike(at_) ? rlx_compare_i64(p.op, ld_i64(a, at_, ii[0]), ld_i64(b, p.idt[1], ii[1]))
                              : rlx_compare_f64(p.op, ld_f64(a, at_, ii[0]), ld_f64(b, p.idt[1], ii[1]));
      st_i64(o, p.odt, oi, r);
      break;
    }
    case 3: { /* RLX_K_WHERE */
      if (ld_i64(a, at_, ii[0]) != 0) copy_elem(o, p.odt, oi, at(arena, p.ioff[1]), p.idt[1], ii[1]);
      else copy_elem(o, p.odt, oi, at(arena, p.ioff[2]), p.idt[2], ii[2]);
      break;
    }
    case 4: { /* RLX_K_UNARY */
      int op = p.op;
      if (is_intlike(at_) && rlx_act_has_int_form(op)) {
        int64_t x = ld_i64(a, at_, ii[0]);
        st_i64(o, p.odt, oi, at_ == RLX_U64 ? rlx_act_u64(op, x) : rlx_act_i64(op, x));
      } else {
        st_f64(o, p.odt, oi, rlx_act_f64(op, ld_f64(a, at_, ii[0])));
      }
      break;
    }
    default: break;
  }
}

/* Index math in I: 32-bit when every offset fits (the host checks), since
 * 64-bit division dominates the strided walk. */
template <typename I>
__device__ void ew_generic(char* arena, const rlxk_ew& p) {
  I shape[RLXK_MAX_RANK], os[RLXK_MAX_RANK], is[3][RLXK_MAX_RANK];
  for (int d = 0; d < p.rank; d++) {
    shape[d] = (I)p.shape[d];
    os[d] = (I)p.ostride[d];
    for (int k = 0; k < 3; k++) is[k][d] = (I)p.istride[k][d];
  }
  for (int64_t i = grid_index(); i < p.n; i += grid_stride()) {
    I rem = (I)i, oi = 0, ii[3] = {0, 0, 0};
    for (int d = p.rank - 1; d >= 0; d--) {
      I s = shape[d], idx = rem % s;
      rem /= s;
      oi += idx * os[d];
      for (int k = 0; k < p.n_in; k++) ii[k] += idx * is[k][d];
    }
    int64_t wide[3] = {(int64_t)ii[0], (int64_t)ii[1], (int64_t)ii[2]};
    ew_element(arena, p, (int64_t)oi, wide);
  }
}

extern "C" __global__ void rlx_ew_generic(char* arena, rlxk_ew p, rlxk_state* st) { ew_generic<int64_t>(arena, p); }
extern "C" __global__ void rlx_ew_generic32(char* arena, rlxk_ew p, rlxk_state* st) { ew_generic<int32_t>(arena, p); }

/* ---------------------------------------------------------------- f32 fast path */

RLXK_DEV float ew_f32_op(int kind, int op, float a, float b) {
  return kind == 1 ? rlx_binary_f32(op, a, b) : rlx_act_f32(op, a);
}

RLXK_DEV float4 ew_f32_op4(int kind, int op, float4 a, float4 b) {
  return make_float4(ew_f32_op(kind, op, a.x, b.x), ew_f32_op(kind, op, a.y, b.y),
                     ew_f32_op(kind, op, a.z, b.z), ew_f32_op(kind, op, a.w, b.w));
}

/* istride[k][0] is 1 (contiguous) or 0 (one scalar); offsets 16-byte aligned. */
extern "C" __global__ void rlx_ew_f32(char* arena, rlxk_ew p, rlxk_state* st) {
  const float* a = (const float*)at(arena, p.ioff[0]);
  const float* b = (const float*)at(arena, p.n_in > 1 ? p.ioff[1] : p.ioff[0]);
  float* o = (float*)atw(arena, p.ooff);
  bool a_vec = p.istride[0][0] != 0, b_vec = p.n_in > 1 && p.istride[1][0] != 0;
  int kind = p.kind, op = p.op;
  int64_t n4 = p.n / 4;
  float as = a[0], bs = b[0];
  float4 a4s = make_float4(as, as, as, as), b4s = make_float4(bs, bs, bs, bs);
  for (int64_t i = grid_index(); i < n4; i += grid_stride()) {
    float4 x = a_vec ? ((const float4*)a)[i] : a4s;
    float4 y = b_vec ? ((const float4*)b)[i] : b4s;
    ((float4*)o)[i] = ew_f32_op4(kind, op, x, y);
  }
  for (int64_t i = n4 * 4 + grid_index(); i < p.n; i += grid_stride())
    o[i] = ew_f32_op(kind, op, a_vec ? a[i] : as, b_vec ? b[i] : bs);
}

/* ---------------------------------------------------------------- float fast path, any views */

/* Copy / binary / unary over f32, f16 and bf16 views of any rank (dims
 * already folded by the host), f32 arithmetic, 32-bit index math (the host
 * checks every offset fits). Threads own V consecutive elements of the
 * innermost dim; with V == 4 the host has checked that the inner extent is a
 * multiple of 4, that the output and every operand stepping 1 along it are
 * 4-element aligned in every row, and that the other operands step 0 (one
 * value for the 4 lanes). Halves round to nearest even at the store, as the
 * reference's stores do. The 4-element loads and stores (ld4_f32, st4_f32)
 * are in common.cuh, shared with the region interpreter. */
RLXK_DEV float ew_float_op(int kind, int op, float a, float b) {
  return kind == 0 ? a : kind == 1 ? rlx_binary_f32(op, a, b) : rlx_act_f32(op, a);
}

template <int V>
__device__ void ew_views(char* arena, const rlxk_ew& p) {
  const int last = p.rank - 1;
  const int32_t inner = (int32_t)p.shape[last], per_row = inner / V;
  const int64_t total = p.n / V;
  char* o = atw(arena, p.ooff);
  const char* in[2] = {at(arena, p.ioff[0]), at(arena, p.ioff[p.n_in > 1 ? 1 : 0])};
  for (int64_t t = grid_index(); t < total; t += grid_stride()) {
    int32_t row = (int32_t)(t / per_row), c = (int32_t)(t % per_row) * V;
    int32_t oi = c * (int32_t)p.ostride[last];
    int32_t ii[2] = {c * (int32_t)p.istride[0][last], c * (int32_t)p.istride[1][last]};
    for (int d = last - 1; d >= 0; d--) { /* row -> outer dim indices */
      int32_t s = (int32_t)p.shape[d], idx = row % s;
      row /= s;
      oi += idx * (int32_t)p.ostride[d];
      ii[0] += idx * (int32_t)p.istride[0][d];
      ii[1] += idx * (int32_t)p.istride[1][d];
    }
    if (V == 4) {
      float4 a = ld4_f32(in[0], p.idt[0], ii[0], p.istride[0][last] != 0);
      float4 b = p.n_in > 1 ? ld4_f32(in[1], p.idt[1], ii[1], p.istride[1][last] != 0) : a;
      float4 r = make_float4(ew_float_op(p.kind, p.op, a.x, b.x), ew_float_op(p.kind, p.op, a.y, b.y),
                             ew_float_op(p.kind, p.op, a.z, b.z), ew_float_op(p.kind, p.op, a.w, b.w));
      st4_f32(o, p.odt, oi, r);
    } else {
      float a = ld_f32(in[0], p.idt[0], ii[0]);
      float b = p.n_in > 1 ? ld_f32(in[1], p.idt[1], ii[1]) : a;
      st_f32(o, p.odt, oi, ew_float_op(p.kind, p.op, a, b));
    }
  }
}

extern "C" __global__ void rlx_ew_views4(char* arena, rlxk_ew p, rlxk_state* st) { ew_views<4>(arena, p); }
extern "C" __global__ void rlx_ew_views1(char* arena, rlxk_ew p, rlxk_state* st) { ew_views<1>(arena, p); }

/* ---------------------------------------------------------------- compare / where, float views */

/* Compare (two float views -> bool) and where (bool cond, two float views
 * -> float) with the same 32-bit folded walk as ew_views: ReLU's gradient
 * is where(x > 0, dy, 0). Float compares give the reference's (double)
 * answers, since f32 / f16 / bf16 values widen exactly; where copies the
 * chosen value through f32, exact for these dtypes. With V == 4 the host
 * has checked the inner extent is a multiple of 4 and that the output and
 * every operand stepping 1 along it are 4-element aligned in every row
 * (4 bytes of bool, 8 of halves, 16 of f32); the others step 0. */
RLXK_DEV uchar4 ld4_bool(const char* b, int32_t i, bool step1) {
  if (step1) return *(const uchar4*)(b + i);
  unsigned char c = (unsigned char)b[i];
  return make_uchar4(c, c, c, c);
}

RLXK_DEV float pick(unsigned char c, float x, float y) { return c ? x : y; }

RLXK_DEV unsigned char cmp1(int op, float a, float b) {
  return (unsigned char)rlx_compare_f64(op, (double)a, (double)b);
}

template <int V>
__device__ void ew_select(char* arena, const rlxk_ew& p) {
  const int last = p.rank - 1;
  const int32_t per_row = (int32_t)p.shape[last] / V;
  const int64_t total = p.n / V;
  char* o = atw(arena, p.ooff);
  const char* in[3] = {at(arena, p.ioff[0]), at(arena, p.ioff[1]),
                       at(arena, p.ioff[p.n_in > 2 ? 2 : 1])};
  bool step1[3];
  for (int k = 0; k < 3; k++) step1[k] = k < p.n_in && p.istride[k][last] != 0;
  for (int64_t t = grid_index(); t < total; t += grid_stride()) {
    int32_t row = (int32_t)(t / per_row), c = (int32_t)(t % per_row) * V;
    int32_t oi = c * (int32_t)p.ostride[last], ii[3];
    for (int k = 0; k < 3; k++) ii[k] = k < p.n_in ? c * (int32_t)p.istride[k][last] : 0;
    for (int d = last - 1; d >= 0; d--) { /* row -> outer dim indices */
      int32_t s = (int32_t)p.shape[d], idx = row % s;
      row /= s;
      oi += idx * (int32_t)p.ostride[d];
      for (int k = 0; k < p.n_in; k++) ii[k] += idx * (int32_t)p.istride[k][d];
    }
    if (p.kind == 2) { /* RLX_K_COMPARE: bool out */
      if (V == 4) {
        float4 a = ld4_f32(in[0], p.idt[0], ii[0], step1[0]);
        float4 b = ld4_f32(in[1], p.idt[1], ii[1], step1[1]);
        *(uchar4*)(o + oi) = make_uchar4(cmp1(p.op, a.x, b.x), cmp1(p.op, a.y, b.y),
                                         cmp1(p.op, a.z, b.z), cmp1(p.op, a.w, b.w));
      } else {
        o[oi] = (char)cmp1(p.op, ld_f32(in[0], p.idt[0], ii[0]), ld_f32(in[1], p.idt[1], ii[1]));
      }
    } else if (V == 4) { /* RLX_K_WHERE */
      uchar4 m = ld4_bool(in[0], ii[0], step1[0]);
      float4 a = ld4_f32(in[1], p.idt[1], ii[1], step1[1]);
      float4 b = ld4_f32(in[2], p.idt[2], ii[2], step1[2]);
      st4_f32(o, p.odt, oi, make_float4(pick(m.x, a.x, b.x), pick(m.y, a.y, b.y),
                                        pick(m.z, a.z, b.z), pick(m.w, a.w, b.w)));
    } else {
      bool m = in[0][ii[0]] != 0;
      st_f32(o, p.odt, oi, m ? ld_f32(in[1], p.idt[1], ii[1]) : ld_f32(in[2], p.idt[2], ii[2]));
    }
  }
}

extern "C" __global__ void rlx_ew_select4(char* arena, rlxk_ew p, rlxk_state* st) { ew_select<4>(arena, p); }
extern "C" __global__ void rlx_ew_select1(char* arena, rlxk_ew p, rlxk_state* st) { ew_select<1>(arena, p); }

/* ---------------------------------------------------------------- debug: finite check */

/* p describes one output view (ostride/shape/odt); op = output slot. */
extern "C" __global__ void rlx_check_finite(char* arena, rlxk_ew p, rlxk_state* st) {
  const char* o = at(arena, p.ooff);
  for (int64_t i = grid_index(); i < p.n; i += grid_stride()) {
    int64_t rem = i, oi = 0;
    for (int d = p.rank - 1; d >= 0; d--) {
      int64_t s = p.shape[d];
      oi += (rem % s) * p.ostride[d];
      rem /= s;
    }
    if (!isfinite(ld_f64(o, p.odt, oi))) report_error(st, p.step, RLXK_ERR_NONFINITE, i, p.op);
  }
}

/* ---------------------------------------------------------------- matmul epilogue */

/* C = act(C + bias) over dense [rows, N], in place. */
extern "C" __global__ void rlx_mm_epilogue(char* arena, rlxk_epilogue p, rlxk_state* st) {
  char* c = atw(arena, p.coff);
  const char* bias = at(arena, p.biasoff);
  int64_t n = p.rows * p.N;
  for (int64_t i = grid_index(); i < n; i += grid_stride()) {
    float x = ld_f32(c, p.cdt, i);
    if (p.has_bias) x += ld_f32(bias, p.biasdt, i % p.N);
    st_f32(c, p.cdt, i, rlx_act_f32(p.act, x));
  }
}

/* ---------------------------------------------------------------- batched casts */

/* Whether a view at byte offset off of dtype t starts 4-element aligned
 * (16 bytes for f32, 8 for halves; the arena base is aligned wider). */
RLXK_DEV bool vec4_ok(uint64_t off, int t) { return off % (t == RLX_F32 ? 16u : 8u) == 0; }

/* Many packed float casts in one launch (a trainer's f32 params to their
 * bf16 copies: one cast each, 148 for GPT-2): m.table holds the entries
 * (the launches' rlxk_ew, each a rank-1 packed copy between float dtypes)
 * then count + 1 chunk starts; a block takes one chunk of one entry's
 * elements, found by binary search, as rlx_opt_multi does. Each element
 * goes through the same load and rounding store as rlx_ew_views, so the
 * bits are those of the separate launches. Four elements per access
 * where both views are 4-element aligned (chunks are multiples of 4). */
extern "C" __global__ void rlx_cast_multi(char* arena, rlxk_opt_multi m, rlxk_state* st) {
  const rlxk_ew* table = (const rlxk_ew*)m.table;
  const int64_t* start = (const int64_t*)(table + m.count);
  for (int64_t c = blockIdx.x; c < m.total_chunks; c += gridDim.x) {
    int lo = 0, hi = m.count - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) >> 1;
      if (start[mid] <= c) lo = mid;
      else hi = mid - 1;
    }
    const rlxk_ew& p = table[lo];
    const int idt = p.idt[0], odt = p.odt;
    const char* in = at(arena, p.ioff[0]);
    char* o = atw(arena, p.ooff);
    const int32_t e0 = (int32_t)((c - start[lo]) * m.chunk);
    const int32_t e1 = (int32_t)(e0 + m.chunk < p.n ? e0 + m.chunk : p.n);
    int32_t tail = e0;
    if (vec4_ok(p.ioff[0], idt) && vec4_ok(p.ooff, odt)) {
      tail = e0 + (e1 - e0) / 4 * 4;
      for (int32_t e = e0 + 4 * (int32_t)threadIdx.x; e < tail; e += 4 * (int32_t)blockDim.x)
        st4_f32(o, odt, e, ld4_f32(in, idt, e, true));
    }
    for (int32_t e = tail + (int32_t)threadIdx.x; e < e1; e += (int32_t)blockDim.x)
      st_f32(o, odt, e, ld_f32(in, idt, e));
  }
}
