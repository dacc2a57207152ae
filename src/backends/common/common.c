/* Host fallback, program cache, run-time messages and native-support rules
 * shared by the GPU backends (see common.h). */
#include "backends/common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"

/* ------------------------------------------------------------ host fallback */

void rlx_host_mirror_free(rlx_host_mirror* m) {
  free(m->bytes);
  m->bytes = NULL;
}

static rlx_status ensure_mirror(rlx_host_mirror* m, rlx_error* err) {
  if (m->bytes) return RLX_OK;
  m->bytes = calloc(1, (size_t)(m->arena_bytes ? m->arena_bytes : 1));
  if (!m->bytes)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "%s: no host memory for a %llu-byte arena mirror",
                    m->backend, (unsigned long long)m->arena_bytes);
  return RLX_OK;
}

static rlx_status transfer_ranges(rlx_host_mirror* m, const rlx_arena_io* io, const rlx_range* r,
                                  int32_t n, int upload, rlx_error* err) {
  for (int32_t k = 0; k < n; k++) {
    uint64_t bytes = r[k].end - r[k].begin;
    if (upload)
      RLX_RETURN_IF_ERROR(io->write(io->be, r[k].begin, m->bytes + r[k].begin, bytes, err));
    else
      RLX_RETURN_IF_ERROR(io->read(io->be, r[k].begin, m->bytes + r[k].begin, bytes, err));
  }
  return RLX_OK;
}

/* The native steps of a RLX_K_HOST step's node, run with the reference. */
static rlx_status run_host_node(rlx_host_mirror* m, const rlx_step* s, rlx_step_list* lowered,
                                const rlx_run_ctx* ctx, rlx_error* err) {
  if (!ctx || !ctx->graph || !ctx->plan)
    return rlx_fail(err, RLX_INTERNAL, "%s: host step of node %d run without its graph",
                    m->backend, s->node);
  rlx_step_list once = {0};
  rlx_step_list* l = lowered ? lowered : &once;
  rlx_status st = RLX_OK;
  if (l->n == 0) {
    rlx_error why;
    st = rlx_lower_node(ctx->graph, ctx->plan, s->node, l, &why);
    if (st) rlx_fail(err, st, "%s host fallback: %s", m->backend, why.msg);
  }
  for (int32_t k = 0; k < l->n && st == RLX_OK; k++)
    st = rlx_ref_run_step(m->bytes, &l->steps[k], ctx, err);
  rlx_step_list_free(&once);
  return st;
}

rlx_status rlx_host_run_step(rlx_host_mirror* m, const rlx_arena_io* io, const rlx_step* s,
                             rlx_step_list* lowered, const rlx_run_ctx* ctx, rlx_error* err) {
  RLX_RETURN_IF_ERROR(ensure_mirror(m, err));
  RLX_RETURN_IF_ERROR(transfer_ranges(m, io, s->reads, s->n_reads, 0, err));
  RLX_RETURN_IF_ERROR(transfer_ranges(m, io, s->writes, s->n_writes, 0, err));
  if (s->kernel == RLX_K_HOST)
    RLX_RETURN_IF_ERROR(run_host_node(m, s, lowered, ctx, err));
  else
    RLX_RETURN_IF_ERROR(rlx_ref_run_step(m->bytes, s, ctx, err));
  return transfer_ranges(m, io, s->writes, s->n_writes, 1, err);
}

rlx_status rlx_host_check_finite(rlx_host_mirror* m, const rlx_arena_io* io, const rlx_step* s,
                                 const rlx_run_ctx* ctx, rlx_error* err) {
  RLX_RETURN_IF_ERROR(ensure_mirror(m, err));
  RLX_RETURN_IF_ERROR(transfer_ranges(m, io, s->writes, s->n_writes, 0, err));
  for (int32_t k = 0; k < s->n_out; k++) {
    int64_t bad = rlx_view_first_non_finite(m->bytes, &s->out[k]);
    if (bad >= 0) return rlx_fail_non_finite(err, ctx, s->node, k, bad);
  }
  return RLX_OK;
}

/* ------------------------------------------------------------ messages */

const char* rlx_run_node_name(const rlx_run_ctx* ctx, int32_t node, char* buf, size_t cap) {
  if (ctx && ctx->graph && node >= 0 && node < ctx->graph->n_nodes)
    return rlx_node_str(ctx->graph, node, buf, cap);
  snprintf(buf, cap, "node %d", node);
  return buf;
}

rlx_status rlx_fail_non_finite(rlx_error* err, const rlx_run_ctx* ctx, int32_t node, int64_t out,
                               int64_t element) {
  char nb[160];
  return rlx_fail(err, RLX_OUT_OF_RANGE, "debug_nans: %s output %lld element %lld is not finite",
                  rlx_run_node_name(ctx, node, nb, sizeof nb), (long long)out, (long long)element);
}

rlx_status rlx_fail_index(rlx_error* err, const rlx_run_ctx* ctx, int32_t node, const char* kind,
                          int64_t value, int64_t axis_len) {
  char nb[160];
  return rlx_fail(err, RLX_OUT_OF_RANGE, "%s: %s index %lld out of range for an axis of size %lld",
                  rlx_run_node_name(ctx, node, nb, sizeof nb), kind, (long long)value,
                  (long long)axis_len);
}

/* ------------------------------------------------------------ program cache */

static uint64_t hash_steps(const rlx_step_list* l) {
  const uint8_t* p = (const uint8_t*)l->steps;
  size_t n = (size_t)l->n * sizeof(rlx_step);
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static int same_steps(const rlx_step* a, int32_t na, const rlx_step_list* l) {
  return na == l->n && (na == 0 || memcmp(a, l->steps, (size_t)na * sizeof *a) == 0);
}

rlx_status rlx_program_cache_init(rlx_program_cache* c, const rlx_program_ops* ops,
                                  const rlx_step_list* compiled, rlx_error* err) {
  memset(c, 0, sizeof *c);
  c->ops = *ops;
  c->compiled = compiled;
  return c->ops.build(c->ops.be, compiled, err, &c->main);
}

static void free_slot(rlx_program_cache* c, int i) {
  if (c->slot[i].program) c->ops.free(c->ops.be, c->slot[i].program);
  free(c->slot[i].steps);
  memset(&c->slot[i], 0, sizeof c->slot[i]);
}

rlx_status rlx_program_cache_get(rlx_program_cache* c, const rlx_step_list* steps, rlx_error* err,
                                 void** out) {
  c->clock++;
  if (steps == c->compiled) {
    *out = c->main;
    return RLX_OK;
  }
  uint64_t h = hash_steps(steps);
  int victim = 0;
  for (int i = 0; i < RLX_PROGRAM_CACHE_SLOTS; i++) {
    if (c->slot[i].program && c->slot[i].hash == h &&
        same_steps(c->slot[i].steps, c->slot[i].n, steps)) {
      c->slot[i].age = c->clock;
      *out = c->slot[i].program;
      return RLX_OK;
    }
    if (!c->slot[i].program || c->slot[i].age < c->slot[victim].age) victim = i;
  }
  if (same_steps(c->compiled->steps, c->compiled->n, steps)) {
    *out = c->main;
    return RLX_OK;
  }
  free_slot(c, victim);
  size_t bytes = (size_t)steps->n * sizeof(rlx_step);
  c->slot[victim].steps = malloc(bytes ? bytes : 1);
  RLX_CHECK_ALLOC(err, c->slot[victim].steps);
  if (bytes) memcpy(c->slot[victim].steps, steps->steps, bytes);
  c->slot[victim].n = steps->n;
  rlx_status s = c->ops.build(c->ops.be, steps, err, &c->slot[victim].program);
  if (s) {
    free_slot(c, victim);
    return s;
  }
  c->slot[victim].hash = h;
  c->slot[victim].age = c->clock;
  *out = c->slot[victim].program;
  return RLX_OK;
}

void rlx_program_cache_free(rlx_program_cache* c) {
  if (c->main && c->ops.free) c->ops.free(c->ops.be, c->main);
  c->main = NULL;
  for (int i = 0; i < RLX_PROGRAM_CACHE_SLOTS; i++)
    if (c->ops.free) free_slot(c, i);
}

/* ------------------------------------------------------------ native support */

/* The dtypes both shader languages' load/store switches know. i16, u16,
 * u32, u64 and the float8 types have no case in the WGSL kernels (a shader
 * would read them as something else), so every node touching one runs on
 * the host fallback, which is the CPU reference: slower, never wrong. The
 * GLSL kernels know them for cast and data movement: rlx_vk_supports_node
 * takes those back. */
static int shader_has_dtype(rlx_dtype t) { return t <= RLX_BOOL; }

int rlx_shader_node_has_newer_dtype(const rlx_graph* g, int32_t ni) {
  const rlx_node* n = &g->nodes[ni];
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] != RLX_NONE && !shader_has_dtype(rlx_tensor_type(g, n->in[i])->dtype)) return 1;
  for (int32_t i = 0; i < n->n_out; i++)
    if (!shader_has_dtype(rlx_tensor_type(g, n->out[i])->dtype)) return 1;
  return 0;
}

static int is_integer_or_bool(rlx_dtype t) { return rlx_dtype_is_int(t) || t == RLX_BOOL; }

/* The shaders convert between f64 and integers through f32 (i32 / i64 lose
 * their low bits) or through int64 without the narrow type's saturation
 * (f64 -> i8 wrapped); the cast_pairs parity case showed both. Such casts
 * run on the host until the shaders convert f64 <-> int exactly. */
static int f64_int_cast(const rlx_graph* g, const rlx_node* n) {
  if (n->op != RLX_OP_CAST) return 0;
  rlx_dtype from = rlx_tensor_type(g, n->in[0])->dtype, to = rlx_tensor_type(g, n->out[0])->dtype;
  return (from == RLX_F64 && is_integer_or_bool(to)) || (to == RLX_F64 && is_integer_or_bool(from));
}

int rlx_shader_supports_node(const rlx_graph* g, int32_t ni) {
  const rlx_node* n = &g->nodes[ni];
  if (rlx_shader_node_has_newer_dtype(g, ni) || f64_int_cast(g, n)) return 0;
  /* No conv kernel in the shaders yet: decompose.c rewrites Conv and
   * ConvTranspose into Pad, Im2Col (a strided copy) and MatMul. */
  if (n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_TRANSPOSE) return 0;
  /* The conv weight gradient is Pad + Im2Col + a batched MatMul + Reduce
   * there (decompose.c): native ops whose GEMM is each backend's fastest. */
  if (n->op == RLX_OP_CONV_BACKWARD_WEIGHT) return 0;
  switch (n->op) {
    case RLX_OP_CAST: case RLX_OP_TRANSPOSE: case RLX_OP_NARROW: case RLX_OP_CONCAT:
    case RLX_OP_EXPAND: case RLX_OP_REVERSE: case RLX_OP_RESHAPE: case RLX_OP_STOP_GRADIENT:
    case RLX_OP_GATHER:
      return 1; /* data movement: any dtype, converted exactly */
    default: break;
  }
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] != RLX_NONE && rlx_tensor_type(g, n->in[i])->dtype == RLX_F64) return 0;
  for (int32_t i = 0; i < n->n_out; i++)
    if (rlx_tensor_type(g, n->out[i])->dtype == RLX_F64) return 0;
  return 1;
}

int rlx_shader_gqmm_geometry(const rlx_gmm_params* p, uint64_t w_offset, int64_t* rows,
                             int64_t* cols) {
  if (p->scheme < 0 || p->scheme >= RLX_QUANT_COUNT || p->group < 1 || p->N < 1 || p->x_rep < 1)
    return 0;
  *rows = p->wt ? p->N : p->K;
  *cols = p->wt ? p->K : p->N;
  int64_t xn = p->M / p->x_rep * p->K, yn = p->M * p->N, groups = p->E * *rows * (*cols / p->group);
  return xn <= INT32_MAX && yn <= INT32_MAX && groups <= INT32_MAX && w_offset % 4 == 0 &&
         w_offset + (uint64_t)(p->E * *rows * p->row_bytes) <= UINT32_MAX;
}
