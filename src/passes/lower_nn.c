/* Lowering of the neural-network ops (matmul, norms, attention, RoPE,
 * sample) to backend-neutral steps.
 *
 * Everything a kernel needs is computed here once: transposes folded into
 * row/column strides, broadcast batch dims as zero batch strides, attention
 * and RoPE geometry from the operand views (so a backend never looks at
 * layouts), the resolved score scale. Kernels read only the step. */
#include <math.h>
#include <string.h>

#include "passes/lower.h"
#include "base/scalar_math.h"

static rlx_view absent_view(void) {
  rlx_view v;
  memset(&v, 0, sizeof v);
  v.rank = -1;
  return v;
}

/* Input slot `slot` of node n as a dense view, or an absent view. */
static rlx_view optional_input(const rlx_graph* g, const rlx_plan* plan, const rlx_node* n,
                               int32_t slot) {
  if (slot >= n->n_in || n->in[slot] == RLX_NONE) return absent_view();
  return rlx_view_of(g, plan, n->in[slot]);
}

static int64_t view_numel(const rlx_view* v) {
  int64_t n = 1;
  for (int32_t i = 0; i < v->rank; i++) n *= v->shape[i];
  return n;
}

static rlx_status fail_node(const rlx_step_list* out, const rlx_graph* g, int32_t ni,
                            const char* what) {
  char buf[160];
  return rlx_fail(out->err, RLX_INVALID_ARGUMENT, "lowering %s: %s",
                  rlx_node_str(g, ni, buf, sizeof buf), what);
}

/* Steps are built locally and appended only once valid, so a failed
 * lowering leaves no half-filled step in the list. */
static void start_step(rlx_step* s, rlx_kernel k, int32_t ni) {
  memset(s, 0, sizeof *s);
  s->kernel = k;
  s->node = ni;
  for (int i = 0; i < RLX_STEP_MAX_IN; i++) s->in[i].rank = -1;
  for (int i = 0; i < RLX_STEP_MAX_OUT; i++) s->out[i].rank = -1;
}

/* Every dim of every view the step uses must be a real size by now. */
static int views_static(const rlx_step* s) {
  for (int32_t i = 0; i < s->n_in + s->n_out; i++) {
    const rlx_view* v = i < s->n_in ? &s->in[i] : &s->out[i - s->n_in];
    for (int32_t d = 0; d < v->rank; d++)
      if (v->shape[d] < 0) return 0;
  }
  return 1;
}

static rlx_status finish_step(const rlx_graph* g, rlx_step* s, rlx_step_list* out) {
  if (!views_static(s)) return fail_node(out, g, s->node, "symbolic dims must be bound before lowering");
  rlx_step* slot = rlx_step_push(out, s->kernel, s->node); /* finished in lower_node */
  if (!slot) return rlx_fail(out->err, RLX_RESOURCE_EXHAUSTED, "out of host memory lowering node %d", s->node);
  *slot = *s;
  return RLX_OK;
}

/* ------------------------------------------------------------------ matmul */

/* Batch strides of an operand of rank r (whose last two dims are the matrix)
 * against the output batch shape: right-aligned, 0 where it broadcasts. */
static void batch_strides(const rlx_view* v, const rlx_matmul_params* mm, int64_t* out) {
  int32_t vb = v->rank - 2, lead = mm->batch_rank - vb;
  for (int32_t i = 0; i < mm->batch_rank; i++) {
    int32_t j = i - lead;
    out[i] = (j >= 0 && v->shape[j] != 1) ? v->stride[j] : 0;
  }
}

static rlx_status lower_matmul(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                               rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view a = rlx_view_of(g, plan, n->in[0]);
  rlx_view b = rlx_view_of(g, plan, n->in[1]);
  rlx_view c = rlx_view_of(g, plan, n->out[0]);
  rlx_view bias = n->op == RLX_OP_FUSED_MATMUL_BIAS_ACT ? optional_input(g, plan, n, 2)
                                                          : absent_view();
  if (a.rank < 2 || b.rank < 2 || c.rank < 2) return fail_node(out, g, ni, "operands must have rank >= 2");
  if (a.rank > c.rank || b.rank > c.rank) return fail_node(out, g, ni, "operand rank exceeds output rank");

  rlx_step st, *s = &st;
  start_step(s, RLX_K_MATMUL, ni);
  rlx_matmul_params* mm = &s->p.mm;
  int ta = n->a.transpose_a != 0, tb = n->a.transpose_b != 0;
  int32_t ra = a.rank, rb = b.rank, rc = c.rank;
  mm->M = c.shape[rc - 2];
  mm->N = c.shape[rc - 1];
  mm->K = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t a_m = ta ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t b_k = tb ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t b_n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  if (a_m != mm->M || b_n != mm->N || b_k != mm->K)
    return fail_node(out, g, ni, "matmul operand dims do not match the output");
  /* A's element (m, k): transposed A is stored [K, M]. */
  mm->a_rs = ta ? a.stride[ra - 1] : a.stride[ra - 2];
  mm->a_cs = ta ? a.stride[ra - 2] : a.stride[ra - 1];
  /* B's element (k, n): transposed B is stored [N, K]. */
  mm->b_rs = tb ? b.stride[rb - 1] : b.stride[rb - 2];
  mm->b_cs = tb ? b.stride[rb - 2] : b.stride[rb - 1];
  mm->c_rs = mm->N;

  mm->batch_rank = rc - 2;
  mm->batch = 1;
  for (int32_t i = 0; i < mm->batch_rank; i++) {
    mm->batch_shape[i] = c.shape[i];
    mm->c_bstride[i] = c.stride[i];
    mm->batch *= c.shape[i];
  }
  batch_strides(&a, mm, mm->a_bstride);
  batch_strides(&b, mm, mm->b_bstride);

  mm->has_bias = bias.rank >= 0;
  if (mm->has_bias && view_numel(&bias) != mm->N) return fail_node(out, g, ni, "bias must have N elements");
  mm->act = n->op == RLX_OP_FUSED_MATMUL_BIAS_ACT ? n->a.act : RLX_ACT_NONE;
  if (mm->act < 0 || mm->act >= RLX_ACT_COUNT) return fail_node(out, g, ni, "activation out of range");

  s->n_in = 3;
  s->in[0] = a;
  s->in[1] = b;
  s->in[2] = bias;
  s->n_out = 1;
  s->out[0] = c;
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ norms */

enum { NORM_X, NORM_RESIDUAL, NORM_BIAS, NORM_GAMMA, NORM_BETA };

static rlx_status lower_norm(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view x = rlx_view_of(g, plan, n->in[0]);
  rlx_view slots[5];
  for (int i = 0; i < 5; i++) slots[i] = absent_view();
  slots[NORM_X] = x;
  int32_t axis = x.rank - 1; /* every norm but LayerNorm runs over the last dim */
  switch (n->op) {
    case RLX_OP_LAYER_NORM:
      slots[NORM_GAMMA] = optional_input(g, plan, n, 1);
      slots[NORM_BETA] = optional_input(g, plan, n, 2);
      axis = n->a.axis;
      break;
    case RLX_OP_RMS_NORM:
      slots[NORM_GAMMA] = optional_input(g, plan, n, 1);
      break;
    case RLX_OP_FUSED_RESIDUAL_LAYER_NORM:
      slots[NORM_BETA] = optional_input(g, plan, n, 4);
      /* fall through */
    case RLX_OP_FUSED_RESIDUAL_RMS_NORM:
      slots[NORM_RESIDUAL] = optional_input(g, plan, n, 1);
      slots[NORM_BIAS] = optional_input(g, plan, n, 2);
      slots[NORM_GAMMA] = optional_input(g, plan, n, 3);
      break;
    default:
      return fail_node(out, g, ni, "not a norm op");
  }
  if (x.rank < 1 || axis < 0 || axis >= x.rank) return fail_node(out, g, ni, "norm axis out of range");

  rlx_step st, *s = &st;
  start_step(s, RLX_K_NORM, ni);
  rlx_norm_params* p = &s->p.norm;
  p->cols = 1;
  for (int32_t d = axis; d < x.rank; d++) p->cols *= x.shape[d];
  int64_t numel = view_numel(&x);
  p->rows = p->cols > 0 ? numel / p->cols : 0;
  p->eps = n->a.eps;
  p->rms = n->op == RLX_OP_RMS_NORM || n->op == RLX_OP_FUSED_RESIDUAL_RMS_NORM;
  p->has_residual = slots[NORM_RESIDUAL].rank >= 0;
  p->has_bias = slots[NORM_BIAS].rank >= 0;
  p->has_gamma = slots[NORM_GAMMA].rank >= 0;
  p->has_beta = slots[NORM_BETA].rank >= 0;
  p->writes_sum = n->n_out > 1;
  if (p->has_residual && view_numel(&slots[NORM_RESIDUAL]) != numel)
    return fail_node(out, g, ni, "residual must match x");
  for (int i = NORM_BIAS; i <= NORM_BETA; i++)
    if (slots[i].rank >= 0 && view_numel(&slots[i]) != p->cols)
      return fail_node(out, g, ni, "bias/gamma/beta must have one element per normalised column");

  s->n_in = 5;
  memcpy(s->in, slots, sizeof slots);
  s->n_out = p->writes_sum ? 2 : 1;
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  if (p->writes_sum) s->out[1] = rlx_view_of(g, plan, n->out[1]);
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ norm backward */

/* LayerNormBackward (x, gamma, dy -> dx, d_gamma, d_beta) and
 * RmsNormBackward (x, gamma, dy -> dx, d_gamma) as steps:
 *   1. NORM without gamma / beta writes xhat into dx's bytes (dx is this
 *      node's own output, so it serves as the scratch row block);
 *   2. BINARY multiplies it by dy in place;
 *   3. REDUCE sums those columns over the rows into d_gamma (and dy's
 *      columns into d_beta): a deterministic column reduction, no atomics;
 *   4. NORM_BWD recomputes each row's statistics and overwrites dx.
 * The read / write ranges order them on every backend. With f16 / bf16 the
 * product of step 2 is rounded to that dtype before the f32 sum. */
static void norm_rows_cols(const rlx_view* x, int32_t axis, rlx_norm_params* p) {
  p->cols = 1;
  for (int32_t d = axis; d < x->rank; d++) p->cols *= x->shape[d];
  p->rows = p->cols > 0 ? view_numel(x) / p->cols : 0;
}

/* The view v of rows x cols elements seen as [cols, rows] (strides 1, cols). */
static rlx_view columns_view(rlx_view v, const rlx_norm_params* p) {
  v.rank = 2;
  v.shape[0] = p->cols, v.stride[0] = 1;
  v.shape[1] = p->rows, v.stride[1] = p->cols;
  return v;
}

static rlx_status push_column_sum(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                  const rlx_view* src, rlx_tensor dst,
                                  const rlx_norm_params* np, rlx_step_list* out) {
  rlx_step st, *s = &st;
  start_step(s, RLX_K_REDUCE, ni);
  s->op = RLX_RED_SUM;
  s->n_in = s->n_out = 1;
  s->in[0] = columns_view(*src, np);
  s->out[0] = rlx_view_of(g, plan, dst);
  s->out[0].rank = 1;
  s->out[0].shape[0] = np->cols;
  s->out[0].stride[0] = 1;
  s->p.reduce.n_keep = 1, s->p.reduce.n_red = 1;
  s->p.reduce.outer = np->cols, s->p.reduce.inner = np->rows;
  return finish_step(g, s, out);
}

static rlx_status lower_norm_param_grads(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                         const rlx_norm_params* np, rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view x = rlx_view_of(g, plan, n->in[0]), dy = rlx_view_of(g, plan, n->in[2]);
  rlx_view dx = rlx_view_of(g, plan, n->out[0]);
  rlx_step st, *s = &st;
  start_step(s, RLX_K_NORM, ni);
  s->p.norm = *np;
  s->p.norm.has_gamma = 0;
  s->n_in = 5;
  s->in[NORM_X] = x;
  s->n_out = 1;
  s->out[0] = dx;
  RLX_RETURN_IF_ERROR(finish_step(g, s, out));
  start_step(s, RLX_K_BINARY, ni);
  s->op = RLX_BIN_MUL;
  s->n_in = 2;
  s->in[0] = dx;
  s->in[1] = dy;
  s->n_out = 1;
  s->out[0] = dx;
  RLX_RETURN_IF_ERROR(finish_step(g, s, out));
  RLX_RETURN_IF_ERROR(push_column_sum(g, plan, ni, &dx, n->out[1], np, out));
  if (n->n_out > 2) RLX_RETURN_IF_ERROR(push_column_sum(g, plan, ni, &dy, n->out[2], np, out));
  return RLX_OK;
}

static rlx_status lower_norm_backward(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                      rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_view x = rlx_view_of(g, plan, n->in[0]);
  int rms = n->op == RLX_OP_RMS_NORM_BACKWARD;
  int32_t axis = rms ? x.rank - 1 : n->a.axis;
  if (x.rank < 1 || axis < 0 || axis >= x.rank) return fail_node(out, g, ni, "norm axis out of range");
  rlx_norm_params np;
  memset(&np, 0, sizeof np);
  norm_rows_cols(&x, axis, &np);
  np.eps = n->a.eps;
  np.rms = rms;
  np.has_gamma = n->in[1] != RLX_NONE;
  rlx_view gamma = optional_input(g, plan, n, 1);
  if (np.has_gamma && view_numel(&gamma) != np.cols)
    return fail_node(out, g, ni, "gamma must have one element per normalised column");
  RLX_RETURN_IF_ERROR(lower_norm_param_grads(g, plan, ni, &np, out));
  rlx_step st, *s = &st;
  start_step(s, RLX_K_NORM_BWD, ni);
  s->p.norm = np;
  s->n_in = 3;
  s->in[0] = x;
  s->in[1] = gamma;
  s->in[2] = rlx_view_of(g, plan, n->in[2]);
  s->n_out = 1;
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ attention */

/* Batch, sequence and head strides of a rank-4 view in `layout`, and its
 * B, S, H, D sizes. The head dim must be contiguous. */
typedef struct bshd {
  int64_t B, S, H, D;
  int64_t sb, ss, sh;
} bshd;

static int split_layout(const rlx_view* v, int32_t layout, bshd* o) {
  if (v->rank != 4 || v->stride[3] != 1) return 0;
  int s_dim = layout == RLX_LAYOUT_BHSD ? 2 : 1, h_dim = layout == RLX_LAYOUT_BHSD ? 1 : 2;
  o->B = v->shape[0];
  o->S = v->shape[s_dim];
  o->H = v->shape[h_dim];
  o->D = v->shape[3];
  o->sb = v->stride[0];
  o->ss = v->stride[s_dim];
  o->sh = v->stride[h_dim];
  return 1;
}

static rlx_status attention_geometry(const rlx_step_list* out, const rlx_graph* g, int32_t ni, const rlx_step* s,
                                     rlx_attention_params* p) {
  int32_t layout = g->nodes[ni].a.layout;
  bshd q, k, v, o;
  if (!split_layout(&s->in[0], layout, &q) || !split_layout(&s->in[1], layout, &k) ||
      !split_layout(&s->in[2], layout, &v) || !split_layout(&s->out[0], layout, &o))
    return fail_node(out, g, ni, "q, k, v and out must be rank 4 with a contiguous head dim");
  if (k.B != q.B || v.B != q.B || v.S != k.S || v.H != k.H || k.D != q.D)
    return fail_node(out, g, ni, "q, k and v disagree on batch, kv length, kv heads or head_dim");
  if (k.H <= 0 || q.H % k.H != 0) return fail_node(out, g, ni, "num_heads must be a multiple of num_kv_heads");
  if (o.B != q.B || o.S != q.S || o.H != q.H || o.D != v.D)
    return fail_node(out, g, ni, "output must be q's shape with v's head dim");
  p->B = q.B;
  p->H = q.H;
  p->Hkv = k.H;
  p->Sq = q.S;
  p->Sk = k.S;
  p->D = q.D;
  p->Dv = v.D;
  p->q_sb = q.sb, p->q_ss = q.ss, p->q_sh = q.sh;
  p->k_sb = k.sb, p->k_ss = k.ss, p->k_sh = k.sh;
  p->v_sb = v.sb, p->v_ss = v.ss, p->v_sh = v.sh;
  p->o_sb = o.sb, p->o_ss = o.ss, p->o_sh = o.sh;
  return RLX_OK;
}

/* The mask, window, softcap and scale of an attention node (the forward or
 * its backward: same attributes, the mask in input 3) into p, with the mask
 * viewed as broadcast over the [B, H, Sq, Sk] scores in s->in[3]. */
static rlx_status attention_mask_and_scale(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                           rlx_step_list* out, rlx_step* s,
                                           rlx_attention_params* p) {
  const rlx_node* n = &g->nodes[ni];
  p->mask = n->a.mask;
  p->window = n->a.window;
  p->softcap = n->a.softcap;
  p->scale = n->a.score_scale != 0.0f ? n->a.score_scale : (float)(1.0 / sqrt((double)p->D));
  if (p->mask < RLX_MASK_NONE || p->mask > RLX_MASK_BIAS) return fail_node(out, g, ni, "unknown mask kind");
  if (p->mask == RLX_MASK_SLIDING && p->window < 1) return fail_node(out, g, ni, "sliding window must be >= 1");
  if (p->mask != RLX_MASK_CUSTOM && p->mask != RLX_MASK_BIAS) return RLX_OK;
  if (n->n_in < 4 || n->in[3] == RLX_NONE) return fail_node(out, g, ni, "mask kind needs a mask tensor");
  const rlx_type* mt = rlx_tensor_type(g, n->in[3]);
  if (mt->rank > 4) return fail_node(out, g, ni, "mask rank must be <= 4");
  rlx_type scores;
  memset(&scores, 0, sizeof scores);
  scores.dtype = mt->dtype;
  scores.rank = 4;
  scores.shape[0] = p->B, scores.shape[1] = p->H, scores.shape[2] = p->Sq, scores.shape[3] = p->Sk;
  for (int32_t i = 0; i < mt->rank; i++) {
    rlx_dim d = mt->shape[i], want = scores.shape[4 - mt->rank + i];
    if (d != 1 && d != want) return fail_node(out, g, ni, "mask does not broadcast to [B, H, Sq, Sk]");
  }
  s->in[3] = rlx_view_broadcast(g, plan, n->in[3], &scores);
  p->m_sb = s->in[3].stride[0];
  p->m_sh = s->in[3].stride[1];
  p->m_sq = s->in[3].stride[2];
  p->m_sk = s->in[3].stride[3];
  return RLX_OK;
}

static rlx_status lower_attention(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                  rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  start_step(s, RLX_K_ATTENTION, ni);
  s->n_in = 4;
  for (int i = 0; i < 3; i++) s->in[i] = rlx_view_of(g, plan, n->in[i]);
  s->in[3] = absent_view();
  s->n_out = 1;
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  rlx_attention_params* p = &s->p.attn;
  RLX_RETURN_IF_ERROR(attention_geometry(out, g, ni, s, p));
  RLX_RETURN_IF_ERROR(attention_mask_and_scale(g, plan, ni, out, s, p));
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ attention backward */

/* The forward's geometry, mask and scale for an AttentionBackward node:
 * lower_attention's checks over a forward-shaped step (q, k, v, mask, out). */
static rlx_status attention_bwd_forward_geometry(const rlx_graph* g, const rlx_plan* plan,
                                                 int32_t ni, rlx_step_list* out,
                                                 rlx_step* fwd) {
  const rlx_node* n = &g->nodes[ni];
  start_step(fwd, RLX_K_ATTENTION, ni);
  fwd->n_in = 4;
  for (int i = 0; i < 3; i++) fwd->in[i] = rlx_view_of(g, plan, n->in[i]);
  fwd->n_out = 1;
  fwd->out[0] = rlx_view_of(g, plan, n->in[4]);
  rlx_attention_params* p = &fwd->p.attn;
  RLX_RETURN_IF_ERROR(attention_geometry(out, g, ni, fwd, p));
  return attention_mask_and_scale(g, plan, ni, out, fwd, p);
}

/* Strides of a gradient (or d_out) view that must match `like` in shape. */
static int bwd_strides(const rlx_view* v, int32_t layout, const bshd* like, int64_t* sb,
                       int64_t* ss, int64_t* sh) {
  bshd x;
  if (!split_layout(v, layout, &x) || x.B != like->B || x.S != like->S || x.H != like->H ||
      x.D != like->D)
    return 0;
  *sb = x.sb, *ss = x.ss, *sh = x.sh;
  return 1;
}

/* The stats as a dense [rows, 2] view over dq's first bytes, when dq is
 * dense and large enough to hold them. */
static int attention_bwd_stats_view(const rlx_view* dq, int64_t rows, rlx_view* stats) {
  rlx_dtype t = dq->dtype == RLX_F64 ? RLX_F64 : RLX_F32;
  int64_t expect = 1, numel = 1;
  for (int32_t d = dq->rank - 1; d >= 0; d--) {
    if (dq->shape[d] != 1 && dq->stride[d] != expect) return 0;
    expect *= dq->shape[d];
    numel *= dq->shape[d];
  }
  if ((uint64_t)rows * 2u * rlx_dtype_size(t) > (uint64_t)numel * rlx_dtype_size(dq->dtype)) return 0;
  memset(stats, 0, sizeof *stats);
  stats->offset = dq->offset;
  stats->dtype = t;
  stats->rank = 2;
  stats->shape[0] = rows, stats->shape[1] = 2;
  stats->stride[0] = 2, stats->stride[1] = 1;
  return 1;
}

static rlx_status lower_attention_backward(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                           rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step fwd;
  RLX_RETURN_IF_ERROR(attention_bwd_forward_geometry(g, plan, ni, out, &fwd));
  rlx_step base;
  start_step(&base, RLX_K_ATTENTION_BWD, ni);
  rlx_attention_bwd_params* p = &base.p.attn_bwd;
  p->a = fwd.p.attn;
  base.n_in = 6;
  for (int i = 0; i < 4; i++) base.in[i] = fwd.in[i];
  base.in[4] = fwd.out[0];
  base.in[5] = rlx_view_of(g, plan, n->in[5]);
  rlx_view dq = rlx_view_of(g, plan, n->out[0]), dk = rlx_view_of(g, plan, n->out[1]),
           dv = rlx_view_of(g, plan, n->out[2]);
  int32_t layout = n->a.layout;
  bshd q, k, v, o;
  split_layout(&fwd.in[0], layout, &q);
  split_layout(&fwd.in[1], layout, &k);
  split_layout(&fwd.in[2], layout, &v);
  split_layout(&fwd.out[0], layout, &o);
  if (!bwd_strides(&base.in[5], layout, &o, &p->do_sb, &p->do_ss, &p->do_sh) ||
      !bwd_strides(&dq, layout, &q, &p->dq_sb, &p->dq_ss, &p->dq_sh) ||
      !bwd_strides(&dk, layout, &k, &p->dk_sb, &p->dk_ss, &p->dk_sh) ||
      !bwd_strides(&dv, layout, &v, &p->dv_sb, &p->dv_ss, &p->dv_sh))
    return fail_node(out, g, ni, "d_out, dq, dk and dv must be shaped like out, q, k and v");
  rlx_view stats;
  if (!attention_bwd_stats_view(&dq, p->a.B * p->a.H * p->a.Sq, &stats)) {
    rlx_step* s = &base;
    s->op = RLX_ATTN_BWD_FULL;
    s->n_out = 3;
    s->out[0] = dq, s->out[1] = dk, s->out[2] = dv;
    return finish_step(g, s, out);
  }
  rlx_step phase[4];
  for (int i = 0; i < 4; i++) {
    phase[i] = base;
    phase[i].op = i; /* RLX_ATTN_BWD_STATS .. DQ */
    phase[i].n_out = 1;
  }
  phase[RLX_ATTN_BWD_STATS].in[2] = absent_view();
  phase[RLX_ATTN_BWD_STATS].out[0] = stats;
  phase[RLX_ATTN_BWD_DV].in[2] = absent_view();
  phase[RLX_ATTN_BWD_DV].in[4] = stats;
  phase[RLX_ATTN_BWD_DV].out[0] = dv;
  phase[RLX_ATTN_BWD_DK].in[4] = stats;
  phase[RLX_ATTN_BWD_DK].out[0] = dk;
  phase[RLX_ATTN_BWD_DQ].out[0] = dq;
  int32_t first = out->n;
  for (int i = 0; i < 4; i++) {
    rlx_status st = finish_step(g, &phase[i], out);
    if (st != RLX_OK) {
      out->n = first; /* no half-lowered node */
      return st;
    }
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ rope */

static rlx_status lower_rope(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  start_step(s, RLX_K_ROPE, ni);
  s->n_in = 3;
  for (int i = 0; i < 3; i++) s->in[i] = rlx_view_of(g, plan, n->in[i]);
  s->n_out = 1;
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  bshd x, o;
  if (!split_layout(&s->in[0], n->a.layout, &x) || !split_layout(&s->out[0], n->a.layout, &o))
    return fail_node(out, g, ni, "x and out must be rank 4 with a contiguous head dim");
  rlx_rope_params* p = &s->p.rope;
  p->B = x.B, p->S = x.S, p->H = x.H, p->D = x.D;
  p->x_sb = x.sb, p->x_ss = x.ss, p->x_sh = x.sh;
  p->o_sb = o.sb, p->o_ss = o.ss, p->o_sh = o.sh;
  p->n_rot = n->a.n_rot;
  p->style = n->a.style;
  p->inverse = n->op == RLX_OP_ROPE_BACKWARD;
  if (p->n_rot < 2 || p->n_rot % 2 || p->n_rot > p->D) return fail_node(out, g, ni, "n_rot must be even, 2..head_dim");
  if (p->style != RLX_ROPE_NEOX && p->style != RLX_ROPE_GPTJ) return fail_node(out, g, ni, "unknown rope style");
  const rlx_view* cs = &s->in[1];
  const rlx_view* sn = &s->in[2];
  if (cs->rank != 2 || sn->rank != 2 || cs->shape[0] != sn->shape[0] ||
      cs->shape[1] != p->n_rot / 2 || sn->shape[1] != p->n_rot / 2)
    return fail_node(out, g, ni, "cos/sin must both be [S or B*S, n_rot/2]");
  /* A table of B*S rows is per token; with B == 1 both readings coincide. */
  if (cs->shape[0] == p->B * p->S) p->per_token = 1;
  else if (cs->shape[0] != p->S) return fail_node(out, g, ni, "cos/sin rows must be S or B*S");
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ sample */

static rlx_status lower_sample(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  start_step(s, RLX_K_SAMPLE, ni);
  s->n_in = 1;
  s->in[0] = rlx_view_of(g, plan, n->in[0]);
  s->n_out = 1;
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  const rlx_view* l = &s->in[0];
  if (l->rank < 1 || l->shape[l->rank - 1] < 1) return fail_node(out, g, ni, "logits need a non-empty last (vocab) dim");
  rlx_sample_params* p = &s->p.sample;
  p->vocab = l->shape[l->rank - 1];
  p->rows = view_numel(l) / p->vocab;
  p->top_k = n->a.top_k;
  p->top_p = n->a.top_p;
  p->temperature = n->a.temperature;
  if (p->top_k < 0) return fail_node(out, g, ni, "top_k must be >= 0");
  if (view_numel(&s->out[0]) != p->rows) return fail_node(out, g, ni, "output must have one token per row");
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ pool, pad */

/* Pool: N and C are window dims of size 1; Pad: every dim has one tap
 * shifted by its begin pad. */
static rlx_status lower_pool(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  int backward = n->op == RLX_OP_POOL_BACKWARD; /* in1 dy; out dx (x's shape) */
  start_step(s, backward ? RLX_K_POOL_BACKWARD : RLX_K_POOL, ni);
  s->n_in = backward ? 2 : 1;
  s->n_out = 1;
  s->in[0] = rlx_view_of(g, plan, n->in[0]);
  if (backward) s->in[1] = rlx_view_of(g, plan, n->in[1]);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  rlx_pool_params* p = &s->p.pool;
  int32_t r = s->in[0].rank;
  p->rank = r;
  for (int32_t d = 0; d < r; d++) p->kernel[d] = p->stride[d] = p->dilation[d] = 1;
  if (n->op == RLX_OP_PAD) {
    s->op = RLX_WIN_PAD_CONSTANT + n->a.pad_mode;
    p->value = n->a.value;
    for (int32_t d = 0; d < r; d++) {
      p->pad[d] = n->a.pads.v[d];
      p->pad_end[d] = n->a.pads.v[r + d];
    }
  } else {
    int32_t ns = n->a.kernel.n;
    /* the window dims: 2.. (channels first) or 1.. (channels last, where
     * channels are a size-1 window dim like N) */
    int32_t first = n->a.conv_layout == RLX_CONV_CHANNELS_LAST ? 1 : 2;
    if (r != ns + 2) return fail_node(out, g, ni, "pool input rank must be 2 + spatial dims");
    s->op = n->a.pool == RLX_POOL_AVG ? RLX_WIN_AVG : RLX_WIN_MAX;
    p->index_out = n->a.pool == RLX_POOL_ARGMAX;
    p->count_include_pad = n->a.count_include_pad;
    for (int32_t i = 0; i < ns; i++) {
      p->kernel[first + i] = n->a.kernel.v[i];
      p->stride[first + i] = n->a.strides.v[i];
      p->dilation[first + i] = n->a.dilations.v[i];
      p->pad[first + i] = n->a.pads.v[i];
      p->pad_end[first + i] = n->a.pads.v[ns + i];
    }
  }
  p->taps = 1;
  for (int32_t d = 0; d < r; d++) p->taps *= p->kernel[d];
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ resize */

/* Whether d is 2^k for a small k (exact reciprocal, exact products). */
static int is_small_pow2(double d) {
  for (int k = -12; k <= 12; k++)
    if (d == ldexp(1.0, k)) return 1;
  return 0;
}

/* Resize dim i of p: its affine coefficients, and whether an f32 kernel
 * rounds the coordinate exactly as the reference does (see lower.h). */
static int resize_dim_coefs(rlx_resize_params* p, int mode, int32_t i) {
  int64_t in = p->in_size[i], o = p->out_size[i];
  double scale = p->scale[i] > 0.0f ? (double)p->scale[i] : (double)o / (double)in;
  double x0 = rlx_resize_source(p->coord, 0, scale, in, o, p->roi_start[i], p->roi_end[i]);
  double x1 = rlx_resize_source(p->coord, 1, scale, in, o, p->roi_start[i], p->roi_end[i]);
  p->coef_a[i] = (float)(x1 - x0);
  p->coef_b[i] = (float)x0;
  if (p->coord == RLX_COORD_TF_CROP_AND_RESIZE) return 0; /* the extrapolation edge */
  if (mode != RLX_RESIZE_NEAREST) return 1;
  return p->coord != RLX_COORD_ALIGN_CORNERS && is_small_pow2(scale) &&
         scale * (double)in == (double)o;
}

/* Resize: the dims that move get a row of the per-dim tables; the others
 * copy their coordinate. */
static rlx_status lower_resize(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                               rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  const rlx_node_attrs* a = &n->a;
  rlx_step st, *s = &st;
  start_step(s, RLX_K_RESIZE, ni);
  s->n_in = s->n_out = 1;
  s->in[0] = rlx_view_of(g, plan, n->in[0]);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  s->op = a->resize_mode;
  rlx_resize_params* p = &s->p.resize;
  p->rank = s->in[0].rank;
  p->coord = a->coord_mode;
  p->nearest = a->nearest_mode;
  p->exclude_outside = a->exclude_outside;
  p->cubic_a = a->cubic_a;
  p->extrapolation = a->value;
  for (int32_t d = 0; d < p->rank; d++) {
    int64_t in = s->in[0].shape[d], o = s->out[0].shape[d];
    if (!rlx_resize_dim_moves(a, d, in, o)) continue;
    if (p->n_dims == RLX_RESIZE_MAX_DIMS) return fail_node(out, g, ni, "too many resized dims");
    int32_t i = p->n_dims++;
    p->dim[i] = d;
    p->in_size[i] = in;
    p->out_size[i] = o;
    p->scale[i] = a->scales.v[d];
    p->roi_start[i] = a->roi.v[d];
    p->roi_end[i] = a->roi.v[p->rank + d];
  }
  p->f32_exact = 1;
  for (int32_t i = 0; i < p->n_dims; i++) p->f32_exact &= resize_dim_coefs(p, s->op, i);
  return finish_step(g, s, out);
}

/* GridSample / RoiAlign: the node's inputs and attributes as they are. */
static rlx_status lower_sampler(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  start_step(s, RLX_K_SAMPLER, ni);
  s->n_in = n->n_in;
  s->n_out = 1;
  for (int32_t i = 0; i < n->n_in; i++) s->in[i] = rlx_view_of(g, plan, n->in[i]);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  rlx_sampler_params* p = &s->p.sampler;
  int grid = n->op == RLX_OP_GRID_SAMPLE;
  s->op = grid ? RLX_SAMPLER_GRID : RLX_SAMPLER_ROI_ALIGN;
  p->mode = grid ? n->a.resize_mode : n->a.pool;
  p->padding = n->a.grid_padding;
  p->align_corners = n->a.align_corners;
  p->sampling_ratio = n->a.sampling_ratio;
  p->spatial_scale = n->a.spatial_scale;
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ conv */

/* The whole geometry of a Conv / ConvTranspose node: every dim past
 * n_spatial is 1 so kernels may always loop over three. */
static void conv_geometry(const rlx_node* n, const rlx_view* x, const rlx_view* w,
                          const rlx_view* y, rlx_conv_params* p) {
  int32_t ns = n->a.strides.n, last = rlx_conv_layout_is_last(n->a.conv_layout);
  p->n_spatial = ns;
  p->layout = n->a.conv_layout;
  p->act = n->a.act;
  p->groups = n->a.groups;
  p->N = x->shape[0];
  p->C = x->shape[last ? ns + 1 : 1];
  p->OC = y->shape[last ? ns + 1 : 1];
  for (int32_t i = 0; i < 3; i++) {
    int inside = i < ns;
    int32_t ax = last ? 1 + i : 2 + i;
    p->in[i] = inside ? x->shape[ax] : 1;
    p->out[i] = inside ? y->shape[ax] : 1;
    p->kernel[i] = inside ? w->shape[rlx_conv_w_axis(n->a.conv_layout, ns, i)] : 1;
    p->stride[i] = inside ? n->a.strides.v[i] : 1;
    p->dilation[i] = inside ? n->a.dilations.v[i] : 1;
    p->pad[i] = inside ? n->a.pads.v[i] : 0;
    p->pad_end[i] = inside ? n->a.pads.v[ns + i] : 0;
    p->output_padding[i] = inside && n->op == RLX_OP_CONV_TRANSPOSE ? n->a.output_padding.v[i] : 0;
  }
}

static rlx_status lower_conv(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  start_step(s, RLX_K_CONV, ni);
  s->op = n->op == RLX_OP_CONV_TRANSPOSE ? RLX_CONV_TRANSPOSE : RLX_CONV_FORWARD;
  s->n_in = 4;
  s->n_out = 1;
  s->in[0] = rlx_view_of(g, plan, n->in[0]);
  s->in[1] = rlx_view_of(g, plan, n->in[1]);
  s->in[2] = optional_input(g, plan, n, 2);
  s->in[3] = optional_input(g, plan, n, 3);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  rlx_conv_params* p = &s->p.conv;
  conv_geometry(n, &s->in[0], &s->in[1], &s->out[0], p);
  p->has_bias = s->in[2].rank >= 0;
  p->has_residual = s->in[3].rank >= 0;
  return finish_step(g, s, out);
}

/* ConvBackwardWeight: x [in0], dy [in1] -> d_w. The geometry is the
 * forward's: conv_geometry reads the kernel sizes off d_w (the weight's
 * layout) and OC and the output sizes off dy. */
static rlx_status lower_conv_wgrad(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                   rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  start_step(s, RLX_K_CONV_WGRAD, ni);
  s->op = RLX_CONV_BACKWARD_WEIGHT;
  s->n_in = 2;
  s->n_out = 1;
  s->in[0] = rlx_view_of(g, plan, n->in[0]);
  s->in[1] = rlx_view_of(g, plan, n->in[1]);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  conv_geometry(n, &s->in[0], &s->out[0], &s->in[1], &s->p.conv);
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ channel norms */

/* GroupNorm, LayerNorm2d and BatchNorm on x [N, C, S...]: one
 * RLX_K_GROUP_NORM step whose geometry says which elements form a group
 * (see rlx_gnorm_params). */
static rlx_status lower_group_norm(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                   rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  start_step(s, RLX_K_GROUP_NORM, ni);
  s->n_in = 5;
  for (int32_t i = 0; i < 5; i++) s->in[i] = optional_input(g, plan, n, i);
  s->n_out = 1;
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  const rlx_view* x = &s->in[RLX_GN_X];
  if (x->rank < 2) return fail_node(out, g, ni, "x must be [N, C, ...]");
  int64_t batch = x->shape[0], ch = x->shape[1];
  int64_t spatial = batch * ch > 0 ? view_numel(x) / (batch * ch) : 0;
  rlx_gnorm_params* p = &s->p.gnorm;
  p->eps = n->a.eps;
  p->has_gamma = s->in[RLX_GN_GAMMA].rank >= 0;
  p->has_beta = s->in[RLX_GN_BETA].rank >= 0;
  p->has_stats = n->op == RLX_OP_BATCH_NORM;
  if (n->op == RLX_OP_CHANNEL_NORM) {
    p->outer = batch, p->n = ch, p->inner = spatial, p->groups = 1, p->cdiv = 1;
  } else {
    int64_t groups = n->op == RLX_OP_GROUP_NORM ? n->a.groups : ch;
    if (groups < 1 || ch % groups != 0) return fail_node(out, g, ni, "groups must divide C");
    p->outer = batch * groups, p->n = ch / groups * spatial, p->inner = 1;
    p->groups = groups, p->cdiv = spatial;
  }
  for (int32_t i = 1; i < 5; i++)
    if (s->in[i].rank >= 0 && view_numel(&s->in[i]) != ch)
      return fail_node(out, g, ni, "gamma, beta, mean and var must have C elements");
  if (p->has_stats && (s->in[RLX_GN_MEAN].rank < 0 || s->in[RLX_GN_VAR].rank < 0))
    return fail_node(out, g, ni, "batch norm needs mean and var");
  return finish_step(g, s, out);
}

/* ------------------------------------------------------------------ quantized matmul */

/* DequantMatMul: x flattened to [M, last dim]; the geometry from w and the
 * attributes (the shape rule checked them). */
static rlx_status lower_dequant_matmul(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                       rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  start_step(s, RLX_K_DEQUANT_MATMUL, ni);
  s->n_in = 4;
  s->n_out = 1;
  for (int32_t i = 0; i < 4; i++) s->in[i] = optional_input(g, plan, n, i);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  const rlx_view *x = &s->in[0], *w = &s->in[1];
  rlx_dqmm_params* p = &s->p.dqmm;
  p->scheme = n->a.quant_scheme;
  p->group = n->a.block;
  p->transposed = !n->a.transpose_b;
  p->has_scale = s->in[2].rank >= 0;
  p->has_aux = s->in[3].rank >= 0;
  p->N = w->shape[0];
  p->row_bytes = w->shape[1];
  int64_t last = x->shape[x->rank - 1];
  p->M = last > 0 ? view_numel(x) / last : 0;
  p->K = p->transposed ? s->out[0].shape[s->out[0].rank - 1] : last;
  return finish_step(g, s, out);
}

/* GroupedMatMul / DequantGroupedMatMul: y [M, N] over idx's M entries;
 * x_rep entries of idx share each row of x (1, or the k of top-k). */
static rlx_status lower_grouped_matmul(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                       rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step st, *s = &st;
  start_step(s, RLX_K_GROUPED_MATMUL, ni);
  s->n_in = 5;
  s->n_out = 1;
  for (int32_t i = 0; i < 5; i++) s->in[i] = optional_input(g, plan, n, i);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  const rlx_view *x = &s->in[0], *w = &s->in[1], *idx = &s->in[2], *y = &s->out[0];
  rlx_gmm_params* p = &s->p.gmm;
  int quant = n->op == RLX_OP_DEQUANT_GROUPED_MATMUL;
  p->scheme = quant ? n->a.quant_scheme : -1;
  p->group = quant ? n->a.block : 0;
  p->wt = n->a.transpose_b != 0;
  p->has_scale = s->in[3].rank >= 0;
  p->has_aux = s->in[4].rank >= 0;
  p->E = w->shape[0];
  p->row_bytes = quant ? w->shape[2] : 0;
  p->N = y->shape[y->rank - 1];
  p->K = x->shape[x->rank - 1];
  p->M = view_numel(idx);
  int64_t x_rows = p->K > 0 ? view_numel(x) / p->K : 0;
  p->x_rep = idx->rank == x->rank ? idx->shape[idx->rank - 1] : 1;
  if (x_rows * p->x_rep != p->M) return fail_node(out, g, ni, "idx does not match x's rows");
  if (!quant) s->n_in = 3;
  return finish_step(g, s, out);
}

rlx_status rlx_lower_nn(const rlx_graph* g, const rlx_plan* plan, int32_t ni, rlx_step_list* out) {
  switch (g->nodes[ni].op) {
    case RLX_OP_MATMUL:
    case RLX_OP_FUSED_MATMUL_BIAS_ACT: return lower_matmul(g, plan, ni, out);
    case RLX_OP_LAYER_NORM:
    case RLX_OP_RMS_NORM:
    case RLX_OP_FUSED_RESIDUAL_LAYER_NORM:
    case RLX_OP_FUSED_RESIDUAL_RMS_NORM: return lower_norm(g, plan, ni, out);
    case RLX_OP_ATTENTION: return lower_attention(g, plan, ni, out);
    case RLX_OP_ATTENTION_BACKWARD: return lower_attention_backward(g, plan, ni, out);
    case RLX_OP_ROPE:
    case RLX_OP_ROPE_BACKWARD: return lower_rope(g, plan, ni, out);
    case RLX_OP_LAYER_NORM_BACKWARD:
    case RLX_OP_RMS_NORM_BACKWARD: return lower_norm_backward(g, plan, ni, out);
    case RLX_OP_SAMPLE: return lower_sample(g, plan, ni, out);
    case RLX_OP_POOL:
    case RLX_OP_POOL_BACKWARD:
    case RLX_OP_PAD: return lower_pool(g, plan, ni, out);
    case RLX_OP_RESIZE: return lower_resize(g, plan, ni, out);
    case RLX_OP_GRID_SAMPLE:
    case RLX_OP_ROI_ALIGN: return lower_sampler(g, plan, ni, out);
    case RLX_OP_CONV:
    case RLX_OP_CONV_TRANSPOSE: return lower_conv(g, plan, ni, out);
    case RLX_OP_CONV_BACKWARD_WEIGHT: return lower_conv_wgrad(g, plan, ni, out);
    case RLX_OP_GROUP_NORM:
    case RLX_OP_CHANNEL_NORM:
    case RLX_OP_BATCH_NORM: return lower_group_norm(g, plan, ni, out);
    case RLX_OP_DEQUANT_MATMUL: return lower_dequant_matmul(g, plan, ni, out);
    case RLX_OP_GROUPED_MATMUL:
    case RLX_OP_DEQUANT_GROUPED_MATMUL: return lower_grouped_matmul(g, plan, ni, out);
    default: return fail_node(out, g, ni, "op is not lowered by rlx_lower_nn");
  }
}
