/* Shared lowering, part A: the step list builder, views and byte ranges, and
 * the lowering of views, layout, elementwise, reduction and row ops. The nn
 * families (matmul, norms, attention, rope, sample) live in lower_nn.c.
 *
 * Every backend consumes what this file produces, so the rule here is
 * "exactly equivalent, no cleverness": each op becomes the simplest step(s)
 * whose views reproduce its semantics element for element. */
#include "passes/lower.h"

#include "ir/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ steps */

const char* rlx_kernel_name(rlx_kernel k) {
  static const char* const names[RLX_K_COUNT] = {
#define RLX_KERNEL(id, name, params, meaning) [RLX_K_##id] = #name,
#include "backends/kernels.def"
#undef RLX_KERNEL
  };
  return (unsigned)k < RLX_K_COUNT ? names[k] : "?";
}

rlx_step* rlx_step_push(rlx_step_list* l, rlx_kernel k, int32_t ni) {
  if (l->n == l->cap) {
    int32_t cap = l->cap ? l->cap * 2 : 16;
    rlx_step* grown = realloc(l->steps, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    l->steps = grown;
    l->cap = cap;
  }
  rlx_step* s = &l->steps[l->n++];
  memset(s, 0, sizeof *s);
  s->kernel = k;
  s->node = ni;
  /* Unused operand slots read as absent, so a forgotten slot can never be
   * mistaken for a scalar at offset 0. */
  for (int i = 0; i < RLX_STEP_MAX_IN; i++) s->in[i].rank = -1;
  for (int i = 0; i < RLX_STEP_MAX_OUT; i++) s->out[i].rank = -1;
  return s;
}

void rlx_step_list_free(rlx_step_list* l) {
  if (!l) return;
  free(l->steps);
  l->steps = NULL;
  l->n = l->cap = 0;
}

/* ------------------------------------------------------------------ views */

static void dense_strides(const int64_t* shape, int32_t rank, int64_t* stride) {
  int64_t s = 1;
  for (int32_t d = rank - 1; d >= 0; d--) {
    stride[d] = s;
    s *= shape[d];
  }
}

rlx_view rlx_view_of(const rlx_graph* g, const rlx_plan* plan, rlx_tensor t) {
  rlx_view v;
  memset(&v, 0, sizeof v);
  const rlx_type* ty = rlx_tensor_type(g, t);
  v.offset = plan->offset[t];
  v.dtype = ty->dtype;
  v.rank = ty->rank;
  for (int32_t d = 0; d < ty->rank; d++) v.shape[d] = ty->shape[d];
  dense_strides(v.shape, v.rank, v.stride);
  return v;
}

rlx_view rlx_view_broadcast(const rlx_graph* g, const rlx_plan* plan, rlx_tensor t,
                            const rlx_type* out_type) {
  rlx_view src = rlx_view_of(g, plan, t);
  rlx_view v = src;
  int32_t lead = out_type->rank - src.rank;
  v.rank = out_type->rank;
  for (int32_t d = 0; d < out_type->rank; d++) {
    int32_t sd = d - lead;
    v.shape[d] = out_type->shape[d];
    /* Size-1 source dims get stride 0 even when the output dim is 1 too:
     * the bytes touched are the same and kernels see one canonical form. */
    v.stride[d] = (sd < 0 || src.shape[sd] == 1) ? 0 : src.stride[sd];
  }
  return v;
}

static int64_t view_numel(const rlx_view* v) {
  int64_t n = 1;
  for (int32_t d = 0; d < v->rank; d++) n *= v->shape[d];
  return n;
}

rlx_range rlx_view_range(const rlx_view* v) {
  rlx_range r = {v->offset, v->offset};
  if (v->rank < 0 || view_numel(v) == 0) return r;
  int64_t lo = 0, hi = 0; /* element offsets of the extreme elements */
  for (int32_t d = 0; d < v->rank; d++) {
    int64_t span = (v->shape[d] - 1) * v->stride[d];
    if (span < 0) lo += span; else hi += span;
  }
  int64_t es = (int64_t)rlx_dtype_size(v->dtype);
  r.begin = (uint64_t)((int64_t)v->offset + lo * es);
  r.end = (uint64_t)((int64_t)v->offset + (hi + 1) * es);
  return r;
}

static void add_range(rlx_range* list, int32_t* n, int32_t cap, const rlx_view* v) {
  if (v->rank < 0 || *n >= cap) return;
  rlx_range r = rlx_view_range(v);
  if (r.begin == r.end) return; /* touches nothing: no dependency */
  list[(*n)++] = r;
}

void rlx_step_derive_ranges(rlx_step* s) {
  s->n_reads = s->n_writes = 0;
  for (int32_t i = 0; i < s->n_in && i < RLX_STEP_MAX_IN; i++)
    add_range(s->reads, &s->n_reads, RLX_STEP_MAX_IN, &s->in[i]);
  /* ScatterAdd accumulates: it reads the bytes it writes. */
  if (s->kernel == RLX_K_SCATTER_ADD)
    add_range(s->reads, &s->n_reads, RLX_STEP_MAX_IN, &s->out[0]);
  for (int32_t i = 0; i < s->n_out && i < RLX_STEP_MAX_OUT; i++)
    add_range(s->writes, &s->n_writes, RLX_STEP_MAX_OUT, &s->out[i]);
}

static rlx_work work_of(int64_t items, rlx_work_unit unit) {
  rlx_work w = {items, unit};
  return w;
}

rlx_work rlx_step_work(const rlx_step* s) {
  switch (s->kernel) {
    case RLX_K_COPY: case RLX_K_BINARY: case RLX_K_COMPARE: case RLX_K_WHERE: case RLX_K_UNARY:
      return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    case RLX_K_MATMUL: {
      const rlx_matmul_params* p = &s->p.mm;
      int64_t tiles_m = (p->M + RLX_MM_TILE - 1) / RLX_MM_TILE;
      int64_t tiles_n = (p->N + RLX_MM_TILE - 1) / RLX_MM_TILE;
      return work_of(p->batch * tiles_m * tiles_n, RLX_WORK_GROUP);
    }
    case RLX_K_REDUCE: return work_of(s->p.reduce.outer, RLX_WORK_GROUP);
    case RLX_K_SOFTMAX:
      return work_of(s->p.rowop.row.outer * s->p.rowop.row.inner, RLX_WORK_GROUP);
    case RLX_K_SOFTMAX_BWD:
      return work_of(s->p.rowop.row.outer * s->p.rowop.row.inner, RLX_WORK_GROUP);
    case RLX_K_NORM_BWD: return work_of(s->p.norm.rows, RLX_WORK_GROUP);
    case RLX_K_ARG_REDUCE: case RLX_K_CUMSUM:
      return work_of(s->p.rowop.row.outer * s->p.rowop.row.inner, RLX_WORK_LANE);
    case RLX_K_TOPK: {
      const rlx_row_params* r = &s->p.rowop.row;
      return work_of(r->outer * r->n * r->inner, RLX_WORK_LANE);
    }
    case RLX_K_GATHER: {
      const rlx_gather_params* p = &s->p.gather;
      return work_of(p->outer * p->n_idx * p->inner, RLX_WORK_LANE);
    }
    case RLX_K_SCATTER_ADD: {
      const rlx_scatter_params* p = &s->p.scatter;
      int64_t n = 1;
      for (int32_t d = 0; d < p->rank; d++) n *= d == p->axis ? p->axis_len : p->shape[d];
      return work_of(n, RLX_WORK_LANE);
    }
    case RLX_K_NORM: return work_of(s->p.norm.rows, RLX_WORK_GROUP);
    case RLX_K_ATTENTION: {
      const rlx_attention_params* p = &s->p.attn;
      return work_of(p->B * p->H * p->Sq, RLX_WORK_GROUP);
    }
    case RLX_K_ATTENTION_BWD: {
      const rlx_attention_params* a = &s->p.attn_bwd.a;
      if (s->op == RLX_ATTN_BWD_FULL) return work_of(1, RLX_WORK_GROUP);
      int per_key = s->op == RLX_ATTN_BWD_DV || s->op == RLX_ATTN_BWD_DK;
      return work_of(per_key ? a->B * a->Hkv * a->Sk : a->B * a->H * a->Sq, RLX_WORK_GROUP);
    }
    case RLX_K_ROPE: {
      /* n_rot/2 rotated pairs plus D - n_rot copied dims per (b, s, h) */
      const rlx_rope_params* p = &s->p.rope;
      return work_of(p->B * p->S * p->H * (p->n_rot / 2 + p->D - p->n_rot), RLX_WORK_LANE);
    }
    case RLX_K_SAMPLE: return work_of(s->p.sample.rows, RLX_WORK_GROUP);
    case RLX_K_POOL: return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    case RLX_K_RESIZE: return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    case RLX_K_SAMPLER: return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    case RLX_K_CONV: return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    case RLX_K_CONV_WGRAD: return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    case RLX_K_POOL_BACKWARD: return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    case RLX_K_GROUP_NORM: return work_of(s->p.gnorm.outer * s->p.gnorm.inner, RLX_WORK_GROUP);
    case RLX_K_XENT:
      return work_of(s->op == RLX_XENT_MEAN ? 1 : s->p.xent.rows, RLX_WORK_GROUP);
    case RLX_K_GATHER_BACKWARD:
      return work_of(s->p.gather.outer * s->p.gather.axis_len, RLX_WORK_GROUP);
    case RLX_K_OPT_UPDATE: return work_of(s->p.opt.n, RLX_WORK_LANE);
    case RLX_K_REGION: return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    case RLX_K_DEQUANT_MATMUL: return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    case RLX_K_GROUPED_MATMUL: return work_of(view_numel(&s->out[0]), RLX_WORK_LANE);
    default: return work_of(0, RLX_WORK_NONE);
  }
}

void rlx_step_finish(rlx_step* s) {
  rlx_step_derive_ranges(s);
  s->work = rlx_step_work(s);
}

/* The window starts at the step's lowest byte rounded down to the offset
 * alignment, pulled back where needed so it stays inside the buffer. */
int rlx_step_window(const rlx_step* s, uint64_t arena_size, uint64_t window, uint64_t align,
                    uint64_t* base) {
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int32_t k = 0; k < s->n_reads; k++) {
    if (s->reads[k].begin < lo) lo = s->reads[k].begin;
    if (s->reads[k].end > hi) hi = s->reads[k].end;
  }
  for (int32_t k = 0; k < s->n_writes; k++) {
    if (s->writes[k].begin < lo) lo = s->writes[k].begin;
    if (s->writes[k].end > hi) hi = s->writes[k].end;
  }
  if (lo > hi) lo = hi = 0; /* touches nothing */
  uint64_t b = align ? lo / align * align : lo;
  if (window > arena_size) return 0;
  if (b > arena_size - window) b = arena_size - window;
  *base = b;
  return hi <= b + window;
}

static int ranges_touch(rlx_range a, rlx_range b) { return a.begin <= b.end && b.begin <= a.end; }

/* Adds r to the plan's disjoint intervals, absorbing every one it touches. */
static void stage_add(rlx_stage_plan* sp, rlx_range r, uint8_t written) {
  for (int32_t j = 0; j < sp->n;) {
    if (!ranges_touch(r, sp->r[j])) { j++; continue; }
    if (sp->r[j].begin < r.begin) r.begin = sp->r[j].begin;
    if (sp->r[j].end > r.end) r.end = sp->r[j].end;
    written |= sp->written[j];
    sp->n--;
    sp->r[j] = sp->r[sp->n];
    sp->written[j] = sp->written[sp->n];
    j = 0; /* the grown interval may now touch earlier ones */
  }
  sp->r[sp->n] = r;
  sp->written[sp->n++] = written;
}

void rlx_step_stage_plan(const rlx_step* s, uint64_t align, rlx_stage_plan* out) {
  memset(out, 0, sizeof *out);
  if (align < 4) align = 4;
  for (int32_t k = 0; k < s->n_reads + s->n_writes; k++) {
    int w = k >= s->n_reads;
    rlx_range r = w ? s->writes[k - s->n_reads] : s->reads[k];
    r.begin = r.begin / align * align;
    r.end = (r.end + 3) / 4 * 4;
    stage_add(out, r, (uint8_t)w);
  }
  uint64_t at = 0;
  for (int32_t k = 0; k < out->n; k++) {
    out->at[k] = at;
    at = (at + out->r[k].end - out->r[k].begin + align - 1) / align * align;
  }
  out->bytes = at;
}

void rlx_step_staged(const rlx_step* s, const rlx_stage_plan* sp, rlx_step* out) {
  *out = *s;
  rlx_view* views[RLX_STAGE_MAX];
  int nv = 0;
  for (int32_t i = 0; i < s->n_in && i < RLX_STEP_MAX_IN; i++) views[nv++] = &out->in[i];
  for (int32_t i = 0; i < s->n_out && i < RLX_STEP_MAX_OUT; i++) views[nv++] = &out->out[i];
  for (int v = 0; v < nv; v++) {
    if (views[v]->rank < 0) continue;
    rlx_range vr = rlx_view_range(views[v]);
    uint64_t moved = 0;
    for (int32_t k = 0; k < sp->n && vr.begin != vr.end; k++)
      if (vr.begin >= sp->r[k].begin && vr.end <= sp->r[k].end) {
        moved = views[v]->offset - sp->r[k].begin + sp->at[k];
        break;
      }
    views[v]->offset = moved;
  }
}

/* ------------------------------------------------------------------ helpers */

static int64_t prod_range(const rlx_dim* shape, int32_t from, int32_t to) {
  int64_t p = 1;
  for (int32_t d = from; d < to; d++) p *= shape[d];
  return p;
}

static rlx_status push(rlx_step_list* out, rlx_kernel k, int32_t ni, rlx_step** s) {
  *s = rlx_step_push(out, k, ni);
  RLX_CHECK_ALLOC(out->err, *s);
  return RLX_OK;
}

static rlx_status fail_node(const rlx_step_list* out, const rlx_graph* g, int32_t ni,
                            rlx_status st, const char* what) {
  char buf[128];
  return rlx_fail(out->err, st, "lower: %s: %s", rlx_node_str(g, ni, buf, sizeof buf), what);
}

/* Output length of an unpadded window of k taps (dilation d, stride s). */
static int64_t conv_out_len(int64_t in, int64_t k, int64_t s, int64_t d) {
  return (in - d * (k - 1) - 1) / s + 1;
}

static const rlx_type* in_type(const rlx_graph* g, const rlx_node* n, int i) {
  return rlx_tensor_type(g, n->in[i]);
}

/* Row ops see their input as [outer, n, inner] around `axis`. */
static rlx_row_params row_params(const rlx_type* t, int32_t axis) {
  rlx_row_params r;
  if (axis < 0 || axis >= t->rank) { /* rank-0 input: one row of one */
    r.outer = prod_range(t->shape, 0, t->rank);
    r.n = 1;
    r.inner = 1;
    return r;
  }
  r.outer = prod_range(t->shape, 0, axis);
  r.n = t->shape[axis];
  r.inner = prod_range(t->shape, axis + 1, t->rank);
  return r;
}

/* A plain copy of value `src` into value `dst`, both seen with dst's shape
 * (used when the plan did not alias a view with its source). */
static rlx_status lower_alias_copy(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                   rlx_tensor src, rlx_tensor dst, rlx_step_list* out) {
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_COPY, ni, &s));
  s->n_in = s->n_out = 1;
  s->out[0] = rlx_view_of(g, plan, dst);
  s->in[0] = s->out[0];
  s->in[0].offset = plan->offset[src];
  s->in[0].dtype = rlx_tensor_type(g, src)->dtype;
  return RLX_OK;
}

/* ------------------------------------------------------------------ layout */

static rlx_status lower_copy_like(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                  rlx_view in0, rlx_step_list* out) {
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_COPY, ni, &s));
  s->n_in = s->n_out = 1;
  s->in[0] = in0;
  s->out[0] = rlx_view_of(g, plan, g->nodes[ni].out[0]);
  return RLX_OK;
}

static rlx_status lower_transpose(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                  rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view src = rlx_view_of(g, plan, n->in[0]);
  rlx_view v = src;
  for (int32_t d = 0; d < src.rank; d++) {
    int32_t p = n->a.perm[d];
    if (p < 0 || p >= src.rank) return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "bad perm");
    v.shape[d] = src.shape[p];
    v.stride[d] = src.stride[p];
  }
  return lower_copy_like(g, plan, ni, v, out);
}

/* DepthToSpace / SpaceToDepth are index permutations: one COPY whose out
 * view splits the spatial dims [N, C, H, b, W, b] and whose in view reads
 * the matching channel of x through strides (exact, native everywhere the
 * copy kernel is). */
static rlx_status lower_depth_space(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                    rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  int to_space = n->op == RLX_OP_DEPTH_TO_SPACE;
  rlx_view x = rlx_view_of(g, plan, n->in[0]);
  rlx_view y = rlx_view_of(g, plan, n->out[0]);
  int64_t b = n->a.block;
  /* The space side [N, C, H*b, W*b] seen as [N, C, H, b, W, b], dense. */
  const rlx_view* space = to_space ? &y : &x;
  const rlx_view* depth = to_space ? &x : &y;
  int64_t N = space->shape[0], C = space->shape[1], H = space->shape[2] / b, W = space->shape[3] / b;
  rlx_view sv = *space, dv = *depth;
  int64_t sshape[6] = {N, C, H, b, W, b};
  sv.rank = dv.rank = 6;
  int64_t st = 1;
  for (int32_t d = 5; d >= 0; d--) {
    sv.shape[d] = dv.shape[d] = sshape[d];
    sv.stride[d] = st;
    st *= sshape[d];
  }
  /* Depth side [N, C*b*b, H, W] dense: channel of (c, bh, bw). */
  int64_t hw = H * W, ch = C * b * b;
  int dcr = !to_space || n->a.d2s_mode == RLX_D2S_DCR;
  dv.stride[0] = ch * hw;
  dv.stride[1] = dcr ? hw : b * b * hw;         /* c */
  dv.stride[2] = W;                             /* h */
  dv.stride[3] = dcr ? b * C * hw : b * hw;     /* bh */
  dv.stride[4] = 1;                             /* w */
  dv.stride[5] = dcr ? C * hw : hw;             /* bw */
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_COPY, ni, &s));
  s->n_in = s->n_out = 1;
  /* COPY: out dense-or-strided, in aligned to it. */
  if (to_space) { s->out[0] = sv; s->in[0] = dv; }
  else {
    /* out = depth (dense [N, C*b*b, H, W]) is written through the permuted
     * strides; in = the dense space view. */
    s->out[0] = dv;
    s->in[0] = sv;
  }
  return RLX_OK;
}

/* Im2Col without padding (decompose.c puts a Pad in front of a padded one)
 * is one strided copy: the output, dense [N, C, k..., o...] (channels first)
 * or [N, o..., k..., C] (channels last), reads x at o * stride + k *
 * dilation per spatial dim. 3-D uses all RLX_MAX_RANK = 8 dims. */
static rlx_status lower_im2col(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                               rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  int32_t ns = n->a.kernel.n, last = n->a.conv_layout == RLX_CONV_CHANNELS_LAST;
  for (int32_t i = 0; i < 2 * ns; i++)
    if (n->a.pads.v[i])
      return fail_node(out, g, ni, RLX_INTERNAL, "padded im2col reaches lowering (decompose adds a pad)");
  rlx_view x = rlx_view_of(g, plan, n->in[0]), y = rlx_view_of(g, plan, n->out[0]);
  const rlx_type* yt = rlx_tensor_type(g, n->out[0]);
  int32_t ax_c = last ? ns + 1 : 1, r = 2 + 2 * ns;
  int32_t k0 = last ? 1 + ns : 2, o0 = last ? 1 : 2 + ns, c_at = last ? r - 1 : 1;
  rlx_view sv = x, dv = y;
  sv.rank = dv.rank = r;
  sv.shape[0] = x.shape[0];
  sv.stride[0] = x.stride[0];
  sv.shape[c_at] = x.shape[ax_c];
  sv.stride[c_at] = x.stride[ax_c];
  for (int32_t i = 0; i < ns; i++) {
    int32_t ax = last ? 1 + i : 2 + i;
    int64_t o = conv_out_len(x.shape[ax], n->a.kernel.v[i], n->a.strides.v[i], n->a.dilations.v[i]);
    sv.shape[k0 + i] = n->a.kernel.v[i];
    sv.stride[k0 + i] = n->a.dilations.v[i] * x.stride[ax];
    sv.shape[o0 + i] = o;
    sv.stride[o0 + i] = n->a.strides.v[i] * x.stride[ax];
  }
  int64_t st = 1;
  for (int32_t d = r - 1; d >= 0; d--) {
    dv.shape[d] = sv.shape[d];
    dv.stride[d] = st;
    st *= sv.shape[d];
  }
  if (st != rlx_type_numel(yt)) return fail_node(out, g, ni, RLX_INTERNAL, "im2col geometry");
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_COPY, ni, &s));
  s->n_in = s->n_out = 1;
  s->out[0] = dv;
  s->in[0] = sv;
  return RLX_OK;
}

static rlx_status lower_narrow(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                               rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view v = rlx_view_of(g, plan, n->in[0]);
  int32_t ax = n->a.axis;
  if (ax < 0 || ax >= v.rank || n->a.start < 0 || n->a.len < 0 ||
      n->a.start + n->a.len > v.shape[ax])
    return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "narrow window outside the input");
  v.offset += (uint64_t)(n->a.start * v.stride[ax]) * rlx_dtype_size(v.dtype);
  v.shape[ax] = n->a.len;
  return lower_copy_like(g, plan, ni, v, out);
}

static rlx_status lower_reverse(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view v = rlx_view_of(g, plan, n->in[0]);
  for (int32_t d = 0; d < v.rank; d++) {
    if (!(n->a.axes & (1u << d)) || v.shape[d] == 0) continue;
    /* Element [0] of the reversed axis is the source's last element. */
    v.offset += (uint64_t)((v.shape[d] - 1) * v.stride[d]) * rlx_dtype_size(v.dtype);
    v.stride[d] = -v.stride[d];
  }
  return lower_copy_like(g, plan, ni, v, out);
}

static rlx_status lower_concat(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                               rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view whole = rlx_view_of(g, plan, n->out[0]);
  int32_t ax = n->a.axis;
  if (ax < 0 || ax >= whole.rank)
    return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "concat axis out of range");
  int64_t pos = 0;
  for (int32_t i = 0; i < n->n_in; i++) {
    rlx_view src = rlx_view_of(g, plan, n->in[i]);
    int64_t len = src.rank > ax ? src.shape[ax] : 0;
    if (src.rank != whole.rank || pos + len > whole.shape[ax])
      return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "concat input does not fit the output");
    if (view_numel(&src) > 0) {
      rlx_step* s;
      RLX_RETURN_IF_ERROR(push(out, RLX_K_COPY, ni, &s));
      s->n_in = s->n_out = 1;
      s->in[0] = src;
      /* The input-shaped window of the output, at this input's position. */
      s->out[0] = whole;
      for (int32_t d = 0; d < whole.rank; d++) s->out[0].shape[d] = src.shape[d];
      s->out[0].offset += (uint64_t)(pos * whole.stride[ax]) * rlx_dtype_size(whole.dtype);
    }
    pos += len;
  }
  return RLX_OK;
}

static rlx_status lower_gather(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                               rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  const rlx_type* data = in_type(g, n, 0);
  int32_t ax = n->a.axis;
  if (ax < 0 || ax >= data->rank)
    return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "gather axis out of range");
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_GATHER, ni, &s));
  s->n_in = 2;
  s->n_out = 1;
  s->in[0] = rlx_view_of(g, plan, n->in[0]);
  s->in[1] = rlx_view_of(g, plan, n->in[1]);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  s->p.gather.outer = prod_range(data->shape, 0, ax);
  s->p.gather.axis_len = data->shape[ax];
  s->p.gather.inner = prod_range(data->shape, ax + 1, data->rank);
  s->p.gather.n_idx = view_numel(&s->in[1]);
  return RLX_OK;
}

static rlx_status lower_scatter_add(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                    rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view base = rlx_view_of(g, plan, n->in[0]);
  rlx_view idx = rlx_view_of(g, plan, n->in[1]);
  rlx_view src = rlx_view_of(g, plan, n->in[2]);
  rlx_view dst = rlx_view_of(g, plan, n->out[0]);
  int32_t ax = n->a.axis;
  if (ax < 0 || ax >= base.rank || idx.rank != base.rank || src.rank != base.rank)
    return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "scatter_add axis or ranks disagree");
  for (int32_t d = 0; d < base.rank; d++) {
    if (src.shape[d] < idx.shape[d] || (d != ax && idx.shape[d] > base.shape[d]))
      return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "scatter_add index shape exceeds base/src");
  }
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_COPY, ni, &s));
  s->n_in = s->n_out = 1;
  s->in[0] = base;
  s->out[0] = dst;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_SCATTER_ADD, ni, &s));
  s->n_in = 2;
  s->n_out = 1;
  s->in[0] = idx;
  /* src is read only over idx's shape (torch allows a larger src). */
  s->in[1] = src;
  for (int32_t d = 0; d < src.rank; d++) s->in[1].shape[d] = idx.shape[d];
  s->out[0] = dst;
  s->p.scatter.rank = base.rank;
  s->p.scatter.axis = ax;
  for (int32_t d = 0; d < base.rank; d++) {
    s->p.scatter.shape[d] = idx.shape[d];
    s->p.scatter.out_stride[d] = dst.stride[d];
  }
  s->p.scatter.axis_len = base.shape[ax];
  return RLX_OK;
}

/* ------------------------------------------------------------------ elementwise */

static rlx_status lower_elementwise(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                    rlx_kernel k, rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  const rlx_type* ot = rlx_tensor_type(g, n->out[0]);
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, k, ni, &s));
  s->op = n->a.kind;
  s->n_in = n->n_in;
  s->n_out = 1;
  for (int32_t i = 0; i < n->n_in; i++) {
    if (rlx_tensor_type(g, n->in[i])->rank > ot->rank)
      return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "operand rank exceeds the output's");
    s->in[i] = rlx_view_broadcast(g, plan, n->in[i], ot);
  }
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  return RLX_OK;
}

/* ElementwiseRegion: every input broadcast into the output's index space,
 * the program decoded once here (the shape rule validated it). */
static rlx_status lower_region(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                               rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_dtype dt[RLX_REGION_MAX_INPUTS];
  char msg[256];
  if (n->n_in > RLX_REGION_MAX_INPUTS)
    return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "more inputs than a region takes");
  for (int32_t i = 0; i < n->n_in; i++) dt[i] = rlx_tensor_type(g, n->in[i])->dtype;
  rlx_region_program prog;
  if (rlx_region_decode(n->a.data, n->a.data_bytes, dt, n->n_in, &prog, msg, sizeof msg))
    return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, msg);
  RLX_RETURN_IF_ERROR(lower_elementwise(g, plan, ni, RLX_K_REGION, out));
  rlx_step* s = &out->steps[out->n - 1];
  s->op = 0;
  s->p.region = prog;
  return RLX_OK;
}

static rlx_status lower_cast(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                             rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view v = rlx_view_of(g, plan, n->in[0]);
  const rlx_type* ot = rlx_tensor_type(g, n->out[0]);
  if (v.dtype == ot->dtype) { /* identity: aliased by the plan, or copied */
    if (plan->offset[n->in[0]] == plan->offset[n->out[0]]) return RLX_OK;
    return lower_alias_copy(g, plan, ni, n->in[0], n->out[0], out);
  }
  return lower_copy_like(g, plan, ni, v, out);
}

/* ------------------------------------------------------------------ reductions */

static rlx_status lower_reduce(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                               rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view src = rlx_view_of(g, plan, n->in[0]);
  uint32_t all = src.rank >= 32 ? 0xffffffffu : ((1u << src.rank) - 1u);
  uint32_t red = n->a.axes & all;
  if (red == 0) red = all; /* no axes means every axis */
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_REDUCE, ni, &s));
  s->op = n->a.kind;
  s->n_in = s->n_out = 1;
  rlx_view v = src;
  int32_t k = 0;
  /* Keep dims first, in order, then the reduced dims in order. */
  for (int pass = 0; pass < 2; pass++) {
    for (int32_t d = 0; d < src.rank; d++) {
      int reduced = (red >> d) & 1u;
      if (reduced != pass) continue;
      v.shape[k] = src.shape[d];
      v.stride[k] = src.stride[d];
      k++;
    }
    if (pass == 0) s->p.reduce.n_keep = k;
  }
  s->p.reduce.n_red = src.rank - s->p.reduce.n_keep;
  s->p.reduce.outer = prod_range(v.shape, 0, s->p.reduce.n_keep);
  s->p.reduce.inner = prod_range(v.shape, s->p.reduce.n_keep, src.rank);
  s->in[0] = v;
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  if (view_numel(&s->out[0]) != s->p.reduce.outer)
    return fail_node(out, g, ni, RLX_INTERNAL, "reduce output size disagrees with its axes");
  s->out[0].rank = 1;
  s->out[0].shape[0] = s->p.reduce.outer;
  s->out[0].stride[0] = 1;
  return RLX_OK;
}

static rlx_status lower_row_op(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_kernel k,
                               int32_t op, rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  const rlx_type* t = in_type(g, n, 0);
  if (t->rank > 0 && (n->a.axis < 0 || n->a.axis >= t->rank))
    return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "axis out of range");
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, k, ni, &s));
  s->op = op;
  s->n_in = n->n_in; /* 1, or y and dy for the softmax backward */
  s->n_out = n->n_out;
  for (int32_t i = 0; i < n->n_in; i++) s->in[i] = rlx_view_of(g, plan, n->in[i]);
  for (int32_t i = 0; i < n->n_out; i++) s->out[i] = rlx_view_of(g, plan, n->out[i]);
  s->p.rowop.row = row_params(t, n->a.axis);
  s->p.rowop.exclusive = n->a.exclusive;
  s->p.rowop.reverse = n->a.reverse;
  s->p.rowop.k = n->a.k;
  s->p.rowop.largest = n->a.largest;
  /* An arg-reduction over nothing has no answer (torch raises too). */
  const rlx_row_params* row = &s->p.rowop.row;
  if (k == RLX_K_ARG_REDUCE && row->n == 0 && row->outer * row->inner != 0)
    return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "argmax/argmin over an empty axis");
  if (k == RLX_K_TOPK && (n->a.k < 0 || n->a.k > s->p.rowop.row.n))
    return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "topk k exceeds the axis size");
  return RLX_OK;
}

/* ------------------------------------------------------------------ dispatch */

rlx_status rlx_lower_basic(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  int32_t first = out->n;
  rlx_status st;
  switch (n->op) {
    case RLX_OP_RESHAPE:
    case RLX_OP_STOP_GRADIENT:
      st = plan->offset[n->in[0]] == plan->offset[n->out[0]]
               ? RLX_OK
               : lower_alias_copy(g, plan, ni, n->in[0], n->out[0], out);
      break;
    case RLX_OP_CAST: st = lower_cast(g, plan, ni, out); break;
    case RLX_OP_TRANSPOSE: st = lower_transpose(g, plan, ni, out); break;
    case RLX_OP_NARROW: st = lower_narrow(g, plan, ni, out); break;
    case RLX_OP_EXPAND:
      st = lower_copy_like(g, plan, ni,
                           rlx_view_broadcast(g, plan, n->in[0],
                                              rlx_tensor_type(g, n->out[0])),
                           out);
      break;
    case RLX_OP_REVERSE: st = lower_reverse(g, plan, ni, out); break;
    case RLX_OP_CONCAT: st = lower_concat(g, plan, ni, out); break;
    case RLX_OP_GATHER: st = lower_gather(g, plan, ni, out); break;
    case RLX_OP_SCATTER_ADD: st = lower_scatter_add(g, plan, ni, out); break;
    case RLX_OP_BINARY: st = lower_elementwise(g, plan, ni, RLX_K_BINARY, out); break;
    case RLX_OP_COMPARE: st = lower_elementwise(g, plan, ni, RLX_K_COMPARE, out); break;
    case RLX_OP_WHERE: st = lower_elementwise(g, plan, ni, RLX_K_WHERE, out); break;
    case RLX_OP_ACTIVATION: st = lower_elementwise(g, plan, ni, RLX_K_UNARY, out); break;
    case RLX_OP_ELEMENTWISE_REGION: st = lower_region(g, plan, ni, out); break;
    case RLX_OP_REDUCE: st = lower_reduce(g, plan, ni, out); break;
    case RLX_OP_ARGMAX: st = lower_row_op(g, plan, ni, RLX_K_ARG_REDUCE, 0, out); break;
    case RLX_OP_ARGMIN: st = lower_row_op(g, plan, ni, RLX_K_ARG_REDUCE, 1, out); break;
    case RLX_OP_SOFTMAX: st = lower_row_op(g, plan, ni, RLX_K_SOFTMAX, 0, out); break;
    case RLX_OP_LOG_SOFTMAX: st = lower_row_op(g, plan, ni, RLX_K_SOFTMAX, 1, out); break;
    case RLX_OP_CUMSUM: st = lower_row_op(g, plan, ni, RLX_K_CUMSUM, 0, out); break;
    case RLX_OP_TOPK: st = lower_row_op(g, plan, ni, RLX_K_TOPK, 0, out); break;
    case RLX_OP_SOFTMAX_BACKWARD: st = lower_row_op(g, plan, ni, RLX_K_SOFTMAX_BWD, 0, out); break;
    case RLX_OP_LOG_SOFTMAX_BACKWARD:
      st = lower_row_op(g, plan, ni, RLX_K_SOFTMAX_BWD, 1, out);
      break;
    case RLX_OP_CUMSUM_BACKWARD:
      /* The gradient of a prefix sum is the prefix sum the other way: the
       * CUMSUM kind with reverse flipped, no kernel of its own. */
      st = lower_row_op(g, plan, ni, RLX_K_CUMSUM, 0, out);
      if (st == RLX_OK) out->steps[out->n - 1].p.rowop.reverse = !n->a.reverse;
      break;
    case RLX_OP_DEPTH_TO_SPACE:
    case RLX_OP_SPACE_TO_DEPTH: st = lower_depth_space(g, plan, ni, out); break;
    case RLX_OP_IM2COL: st = lower_im2col(g, plan, ni, out); break;
    default: return fail_node(out, g, ni, RLX_UNIMPLEMENTED, "no basic lowering for this op");
  }
  if (st != RLX_OK) {
    out->n = first; /* drop a half-built node */
    return st;
  }
  return RLX_OK; /* ranges and work: rlx_step_finish in lower_node */
}

static int is_nn_op(rlx_op op) {
  switch (op) {
    case RLX_OP_MATMUL:
    case RLX_OP_FUSED_MATMUL_BIAS_ACT:
    case RLX_OP_LAYER_NORM:
    case RLX_OP_RMS_NORM:
    case RLX_OP_FUSED_RESIDUAL_LAYER_NORM:
    case RLX_OP_FUSED_RESIDUAL_RMS_NORM:
    case RLX_OP_ATTENTION:
    case RLX_OP_ATTENTION_BACKWARD:
    case RLX_OP_ROPE:
    case RLX_OP_SAMPLE:
    case RLX_OP_POOL:
    case RLX_OP_PAD:
    case RLX_OP_RESIZE:
    case RLX_OP_GRID_SAMPLE:
    case RLX_OP_ROI_ALIGN: return 1;
    case RLX_OP_CONV:
    case RLX_OP_CONV_TRANSPOSE: return 1;
    case RLX_OP_CONV_BACKWARD_WEIGHT:
    case RLX_OP_POOL_BACKWARD: return 1;
    case RLX_OP_GROUP_NORM:
    case RLX_OP_CHANNEL_NORM:
    case RLX_OP_BATCH_NORM: return 1;
    case RLX_OP_LAYER_NORM_BACKWARD:
    case RLX_OP_RMS_NORM_BACKWARD:
    case RLX_OP_ROPE_BACKWARD: return 1;
    case RLX_OP_DEQUANT_MATMUL: return 1;
    case RLX_OP_GROUPED_MATMUL:
    case RLX_OP_DEQUANT_GROUPED_MATMUL: return 1;
    default: return 0;
  }
}

/* Byte-granular view covering [begin, end): lets a host step with more
 * inputs than slots still declare (a superset of) what it reads. */
static rlx_view hull_view(uint64_t begin, uint64_t end) {
  rlx_view v;
  memset(&v, 0, sizeof v);
  v.offset = begin;
  v.dtype = RLX_U8;
  v.rank = 1;
  v.shape[0] = (int64_t)(end - begin);
  v.stride[0] = 1;
  return v;
}

static rlx_status lower_host(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                             rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_HOST, ni, &s));
  int32_t direct = n->n_in <= RLX_STEP_MAX_IN ? n->n_in : RLX_STEP_MAX_IN - 1;
  for (int32_t i = 0; i < direct; i++)
    if (n->in[i] != RLX_NONE) s->in[i] = rlx_view_of(g, plan, n->in[i]);
  s->n_in = direct;
  if (n->n_in > direct) { /* fold the rest into one covering range */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int32_t i = direct; i < n->n_in; i++) {
      if (n->in[i] == RLX_NONE) continue;
      rlx_view v = rlx_view_of(g, plan, n->in[i]);
      rlx_range r = rlx_view_range(&v);
      if (r.begin == r.end) continue;
      if (r.begin < lo) lo = r.begin;
      if (r.end > hi) hi = r.end;
    }
    if (lo < hi) s->in[s->n_in++] = hull_view(lo, hi);
  }
  s->n_out = n->n_out;
  for (int32_t i = 0; i < n->n_out; i++) s->out[i] = rlx_view_of(g, plan, n->out[i]);
  return RLX_OK;
}

static int node_is_static(const rlx_graph* g, const rlx_node* n) {
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] != RLX_NONE && rlx_type_numel(rlx_tensor_type(g, n->in[i])) < 0) return 0;
  for (int32_t i = 0; i < n->n_out; i++)
    if (rlx_type_numel(rlx_tensor_type(g, n->out[i])) < 0) return 0;
  return 1;
}

/* The lowering functions report failures into out->err; the entry points
 * point it at the caller's error for the duration of the call, so the graph
 * stays const. */
static rlx_status lower_node(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                             rlx_step_list* out) {
  int32_t first = out->n;
  rlx_op op = g->nodes[ni].op;
  rlx_status st = is_nn_op(op)                  ? rlx_lower_nn(g, plan, ni, out)
                  : rlx_lower_is_train_op(op) ? rlx_lower_train(g, plan, ni, out)
                                                : rlx_lower_basic(g, plan, ni, out);
  if (st != RLX_OK) return st;
  for (int32_t i = first; i < out->n; i++) rlx_step_finish(&out->steps[i]);
  return RLX_OK;
}

static rlx_status lower_graph(const rlx_graph* g, const rlx_plan* plan, const uint8_t* host_node,
                              rlx_step_list* out) {
  for (int32_t ni = 0; ni < g->n_nodes; ni++) {
    const rlx_node* n = &g->nodes[ni];
    if (rlx_op_table[n->op].flags & OPF_LEAF) continue;
    if (!node_is_static(g, n))
      return fail_node(out, g, ni, RLX_INVALID_ARGUMENT, "symbolic dims must be bound before lowering");
    if (!(host_node && host_node[ni])) {
      RLX_RETURN_IF_ERROR(lower_node(g, plan, ni, out));
      continue;
    }
    int32_t first = out->n;
    RLX_RETURN_IF_ERROR(lower_host(g, plan, ni, out));
    for (int32_t i = first; i < out->n; i++) rlx_step_finish(&out->steps[i]);
  }
  return RLX_OK;
}

rlx_status rlx_lower_node(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                          rlx_step_list* out, rlx_error* err) {
  rlx_error* saved = out->err;
  out->err = err;
  rlx_status st = lower_node(g, plan, ni, out);
  out->err = saved;
  return st;
}

rlx_status rlx_lower(const rlx_graph* g, const rlx_plan* plan, const uint8_t* host_node,
                     rlx_step_list* out, rlx_error* err) {
  rlx_error* saved = out->err;
  out->err = err;
  rlx_status st = lower_graph(g, plan, host_node, out);
  out->err = saved;
  return st;
}

int64_t rlx_view_numel(const rlx_view* v) {
  int64_t n = 1;
  for (int32_t d = 0; d < v->rank; d++) n *= v->shape[d];
  return n;
}

int rlx_kernel_is_elementwise(rlx_kernel k) {
  return k == RLX_K_COPY || k == RLX_K_BINARY || k == RLX_K_COMPARE || k == RLX_K_WHERE ||
         k == RLX_K_UNARY;
}

void rlx_views_coalesce(rlx_view* views, int n) {
  int32_t rank = views[0].rank, r = 0;
  int64_t shape[RLX_MAX_RANK];
  memcpy(shape, views[0].shape, sizeof shape);
  for (int32_t d = 0; d < rank; d++) {
    if (shape[d] == 1) continue;
    int merge = r > 0;
    for (int k = 0; k < n && merge; k++)
      if (views[k].stride[r - 1] != views[k].stride[d] * shape[d]) merge = 0;
    for (int k = 0; k < n; k++) {
      if (merge) {
        views[k].shape[r - 1] *= shape[d];
        views[k].stride[r - 1] = views[k].stride[d];
      } else {
        views[k].shape[r] = shape[d];
        views[k].stride[r] = views[k].stride[d];
      }
    }
    if (!merge) r++;
  }
  for (int k = 0; k < n; k++) views[k].rank = r;
}

int rlx_step_computes_in_f64(const rlx_step* s) {
  if (s->kernel == RLX_K_COPY || s->kernel == RLX_K_GATHER) return 0;
  if (s->kernel == RLX_K_RESIZE && !s->p.resize.f32_exact) return 1;
  for (int32_t i = 0; i < s->n_in; i++)
    if (s->in[i].rank >= 0 && s->in[i].dtype == RLX_F64) return 1;
  for (int32_t i = 0; i < s->n_out; i++)
    if (s->out[i].rank >= 0 && s->out[i].dtype == RLX_F64) return 1;
  return 0;
}

int64_t rlx_view_first_non_finite(const uint8_t* base, const rlx_view* v) {
  if (v->rank < 0 || !rlx_dtype_is_float(v->dtype)) return -1;
  int64_t idx[RLX_MAX_RANK] = {0}, n = 1;
  for (int32_t d = 0; d < v->rank; d++) n *= v->shape[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int32_t d = 0; d < v->rank; d++) off += idx[d] * v->stride[d];
    if (!isfinite(rlx_load_f64(base + v->offset, v->dtype, off))) return i;
    for (int32_t d = v->rank - 1; d >= 0 && ++idx[d] == v->shape[d]; d--) idx[d] = 0;
  }
  return -1;
}
