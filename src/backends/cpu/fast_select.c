/* CPU fast paths of Where and Gather as block copies (any dtype; 0
 * declines and the reference runs the step).
 *
 * Where(cond, x, y) whose cond is constant over the innermost dims (a
 * mask of rows, e.g. the cache rows a KV-cache step writes): one memcpy of
 * x's or y's block per row, and none at all where y is the output itself
 * (the memory planner put the result in y's bytes) and the row keeps y:
 * such an update costs O(rows written), not O(cache).
 *
 * Gather: each (outer, index) pair copies `inner` contiguous elements. */
#include <string.h>

#include "backends/cpu/cpu.h"
#include "ir/dtype.h"

/* v is dense row-major. */
static int dense(const rlx_view* v) {
  int64_t want = 1;
  for (int32_t d = v->rank - 1; d >= 0; d--) {
    if (v->shape[d] != 1 && v->stride[d] != want) return 0;
    want *= v->shape[d];
  }
  return 1;
}

static int same_shape(const rlx_view* a, const rlx_view* b) {
  if (a->rank != b->rank) return 0;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* Dims [k, rank) of v are laid out as the dense output's (a block of
 * `block` elements is contiguous in v). */
static int inner_dense(const rlx_view* v, const rlx_view* out, int32_t k) {
  for (int32_t d = k; d < out->rank; d++)
    if (out->shape[d] != 1 && v->stride[d] != out->stride[d]) return 0;
  return 1;
}

/* Bytes [lo, hi) that v's elements may touch (no negative strides). */
static int span(const rlx_view* v, size_t es, uint64_t* lo, uint64_t* hi) {
  uint64_t last = 0;
  for (int32_t d = 0; d < v->rank; d++) {
    if (v->stride[d] < 0) return 0;
    if (v->shape[d] > 0) last += (uint64_t)(v->shape[d] - 1) * (uint64_t)v->stride[d];
  }
  *lo = v->offset;
  *hi = v->offset + (last + 1) * es;
  return 1;
}

static int disjoint(const rlx_view* a, const rlx_view* b, size_t es) {
  uint64_t alo, ahi, blo, bhi;
  if (!span(a, es, &alo, &ahi) || !span(b, es, &blo, &bhi)) return 0;
  return ahi <= blo || bhi <= alo;
}

static int same_view(const rlx_view* a, const rlx_view* b) {
  if (a->offset != b->offset || !same_shape(a, b)) return 0;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->shape[d] != 1 && a->stride[d] != b->stride[d]) return 0;
  return 1;
}

/* Element offset of block b (row-major over dims [0, k)) in view v. */
static int64_t block_offset(const rlx_view* v, const rlx_view* out, int32_t k, int64_t b) {
  int64_t off = 0;
  for (int32_t d = k - 1; d >= 0; d--) {
    int64_t i = b % out->shape[d];
    b /= out->shape[d];
    off += i * v->stride[d];
  }
  return off;
}

int rlx_cpu_fast_where(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  (void)f;
  if (s->n_in != 3 || s->n_out < 1) return 0;
  const rlx_view *out = &s->out[0], *c = &s->in[0], *x = &s->in[1], *y = &s->in[2];
  size_t es = rlx_dtype_size(out->dtype);
  if (es == 0 || x->dtype != out->dtype || y->dtype != out->dtype || out->rank < 1) return 0;
  if (!same_shape(c, out) || !same_shape(x, out) || !same_shape(y, out) || !dense(out)) return 0;
  int32_t k = out->rank; /* dims [k, rank): cond is constant over them */
  while (k > 0 && (c->stride[k - 1] == 0 || out->shape[k - 1] == 1)) k--;
  if (k == out->rank) return 0; /* an elementwise mask: the reference */
  if (!inner_dense(x, out, k) || !inner_dense(y, out, k)) return 0;
  int in_place = same_view(y, out);
  if (!disjoint(x, out, es) || (!in_place && !disjoint(y, out, es))) return 0;
  int64_t block = 1, n_blocks = 1;
  for (int32_t d = k; d < out->rank; d++) block *= out->shape[d];
  for (int32_t d = 0; d < k; d++) n_blocks *= out->shape[d];
  const uint8_t* cb = arena + c->offset;
  uint8_t* ob = arena + out->offset;
  for (int64_t b = 0; b < n_blocks; b++) {
    int take_x = rlx_load_i64(cb, c->dtype, block_offset(c, out, k, b)) != 0;
    if (!take_x && in_place) continue; /* the row keeps its bytes */
    const rlx_view* src = take_x ? x : y;
    memcpy(ob + (size_t)(b * block) * es,
           arena + src->offset + (size_t)block_offset(src, out, k, b) * es, (size_t)block * es);
  }
  return 1;
}

int rlx_cpu_fast_gather(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  (void)f;
  const rlx_gather_params* p = &s->p.gather;
  if (s->n_in != 2 || s->n_out < 1 || s->in[0].dtype != s->out[0].dtype) return 0;
  size_t es = rlx_dtype_size(s->out[0].dtype);
  if (es == 0 || !dense(&s->out[0])) return 0;
  const uint8_t* idx = arena + s->in[1].offset;
  for (int64_t q = 0; q < p->n_idx; q++) { /* a bad index: the reference reports it */
    int64_t v = rlx_load_i64(idx, s->in[1].dtype, q);
    if (v < -p->axis_len || v >= p->axis_len) return 0;
  }
  const uint8_t* data = arena + s->in[0].offset;
  uint8_t* o = arena + s->out[0].offset;
  size_t row = (size_t)p->inner * es;
  for (int64_t oi = 0; oi < p->outer; oi++)
    for (int64_t q = 0; q < p->n_idx; q++) {
      int64_t v = rlx_load_i64(idx, s->in[1].dtype, q);
      if (v < 0) v += p->axis_len;
      memcpy(o + (size_t)(oi * p->n_idx + q) * row, data + (size_t)(oi * p->axis_len + v) * row,
             row);
    }
  return 1;
}
