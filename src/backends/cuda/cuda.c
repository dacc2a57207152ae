/* CUDA backend: the vtable (backend.h). One device arena per executable;
 * pinned staging for uploads and readback; each step list becomes a
 * "program" of launch records (cuda_launch.c), replayed as a CUDA graph
 * where the schedule is capture-safe (no host-fallback step), eagerly
 * otherwise. Optional multi-stream mode (RLX_CUDA_STREAMS=n): steps go to
 * streams with event waits derived from their byte ranges (read-after-write,
 * write-after-read, write-after-write), so independent branches overlap.
 *
 * Environment knobs (for tests and benchmarks; defaults are the product):
 *   RLX_CUDA_GRAPHS=0      run eagerly, no graph capture
 *   RLX_CUDA_STREAMS=n     streams per executable (default 1)
 *   RLX_CUDA_HOST_OPS=a,b  ops (by text name) forced to the host fallback
 *   RLX_CUDA_NO_CUBLASLT=1 own matmul kernels only
 *   RLX_CUDNN_LIB=path     the cuDNN to load (a path that does not load: no
 *                          cuDNN, convolutions are decomposed)
 *   RLX_CUDA_DISABLE=1     report the device unavailable
 *   RLX_CUDA_PROFILE=1     run eagerly with an event before every launch; device
 *                          time per kernel printed at destroy (stderr)
 *   RLX_TRACE=file.json    runs traced (runtime/trace.h) are eager too, with
 *                          events around every launch (no graph replay) */
#ifdef RLX_HAVE_CUDA

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "backends/common/common.h"
#include "runtime/trace.h"
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/cuda_nvrtc.h"
#include "ir/dtype.h"

#define MAX_STREAMS 8
#define STAGING_BYTES ((size_t)8 << 20)
#define WORKSPACE_BYTES ((size_t)32 << 20)
#define PROF_SLOTS (RLX_CUDA_FN_COUNT + 5) /* kernels, cuBLASLt, copies, host steps, cuDNN, generated */
#define PROF_GEMMS 64

typedef struct prof_gemm {
  char what[96]; /* rlx_cuda_mm_plan_what */
  double ms, flops;
  int64_t calls;
} prof_gemm;

/* Stream assignment and cross-stream waits, per step. */
typedef struct schedule {
  int32_t* stream_of;
  int32_t* wait_begin; /* waits of step i: waits[wait_begin[i] .. wait_begin[i + 1]) */
  int32_t* waits;      /* step indices whose event must complete first */
  CUevent* events;     /* per step; created where another stream waits on it */
} schedule;

typedef struct program {
  int32_t n_steps;
  rlx_launch_list launches;
  CUdeviceptr scratch;
  int has_host;
  schedule sched;
  CUgraphExec graph;
  int no_graph; /* capture failed or unsafe: run eagerly */
  CUdeviceptr dnn_ws; /* n_streams x launches.dnn_workspace (conv plans) */
  CUdeviceptr gemm_pad; /* n_streams x launches.gemm_pad (cuda_matmul.c's padding) */
  uint64_t own_bytes;   /* scratch + dnn_ws + gemm_pad (rlx_memory_stats.backend_bytes) */
} program;

struct rlx_backend_exec {
  const rlx_cuda_dev* d;
  CUdeviceptr arena;
  uint64_t arena_bytes;
  CUdeviceptr state;     /* rlxk_state */
  rlxk_state* state_host; /* pinned */
  uint8_t* staging;      /* pinned */
  size_t staging_used;
  CUstream streams[MAX_STREAMS];
  int n_streams;
  CUevent fork, joins[MAX_STREAMS];
  CUdeviceptr workspace; /* n_streams x WORKSPACE_BYTES, made on first matmul */
  uint64_t extra_bytes;  /* workspace + every live program's own_bytes */
  size_t workspace_bytes;
  rlx_dnn_handle dnn;    /* cuDNN handle, made on the first convolution */
  int32_t dnn_convs, host_convs; /* conv steps on cuDNN / on the host (report) */
  char dnn_first[64];    /* the first conv plan, described (report) */
  int32_t gen_regions, interp_regions; /* region launches: generated (NVRTC) / interpreter (report) */
  rlx_cuda_build build;
  rlx_program_cache programs; /* program* for the compiled list and active extents */
  rlx_host_mirror mirror;      /* host copy of the arena for fallback steps (lazy) */
  int use_graphs;
  CUevent t0, t1; /* RLX_CUDA_TIMING */
  /* RLX_CUDA_PROFILE: one event before each launch of the last run, and the
   * device time summed per kernel (then cuBLASLt, copies, host steps). */
  int profile;
  CUevent* prof_ev;
  int32_t prof_n;
  double prof_ms[PROF_SLOTS];
  int64_t prof_calls[PROF_SLOTS];
  int64_t prof_runs;
  prof_gemm gemms[PROF_GEMMS]; /* RLX_CUDA_PROFILE=2: cuBLASLt time per GEMM shape */
  int32_t n_gemms;
  /* Traced runs (rlx_run_ctx.trace): trace_ev[0] where the run starts on
   * stream 0, then a start and an end event per launch (1 + 2 li, 2 + 2 li)
   * on the launch's stream; trace_t0 the host time at trace_ev[0]. */
  CUevent* trace_ev;
  int32_t trace_n;
  double trace_t0;
};

/* ------------------------------------------------------------------ profile */

static const char* const prof_names[PROF_SLOTS] = {
#define RLX_CUDA_PROF_NAME(e, name, family) #name,
    RLX_CUDA_KERNELS(RLX_CUDA_PROF_NAME)
#undef RLX_CUDA_PROF_NAME
    "cublasLt", "device copy", "host step", "cuDNN", "region (generated)"};

static int prof_slot(const rlx_launch* x) {
  switch (x->kind) {
    case RLX_LAUNCH_KERNEL: return x->gen ? RLX_CUDA_FN_COUNT + 4 : (int)x->fn;
    case RLX_LAUNCH_LT: return RLX_CUDA_FN_COUNT;
    case RLX_LAUNCH_COPY: return RLX_CUDA_FN_COUNT + 1;
    case RLX_LAUNCH_DNN: return RLX_CUDA_FN_COUNT + 3;
    default: return RLX_CUDA_FN_COUNT + 2;
  }
}

/* Events for n launches (+1 closing), grown on demand. */
static rlx_status prof_reserve(rlx_backend_exec* be, int32_t n, rlx_error* err) {
  if (be->prof_n >= n + 1) return RLX_OK;
  CUevent* grown = realloc(be->prof_ev, sizeof(CUevent) * (size_t)(n + 1));
  RLX_CHECK_ALLOC(err, grown);
  be->prof_ev = grown;
  for (int32_t i = be->prof_n; i < n + 1; i++) {
    be->prof_ev[i] = NULL;
    RLX_CU(be->d, err, "cuEventCreate", be->d->cu.event_create(&be->prof_ev[i], CU_EVENT_DEFAULT));
    be->prof_n = i + 1;
  }
  return RLX_OK;
}

static void prof_gemm_add(rlx_backend_exec* be, const rlx_launch* x, float ms);

/* After a synchronised profiled run: launch i took ev[i] -> ev[i + 1]. */
static void prof_collect(rlx_backend_exec* be, const program* pr) {
  for (int32_t i = 0; i < pr->launches.n && i + 1 < be->prof_n; i++) {
    float ms = 0.0f;
    if (be->d->cu.event_elapsed_time(&ms, be->prof_ev[i], be->prof_ev[i + 1]) != CUDA_SUCCESS) continue;
    int k = prof_slot(&pr->launches.v[i]);
    be->prof_ms[k] += ms;
    be->prof_calls[k]++;
    if (be->profile >= 2 && pr->launches.v[i].kind == RLX_LAUNCH_LT) prof_gemm_add(be, &pr->launches.v[i], ms);
  }
  be->prof_runs++;
}

static void prof_gemm_add(rlx_backend_exec* be, const rlx_launch* x, float ms) {
  double flops = 0;
  const char* what = rlx_cuda_mm_plan_what(x->plan, &flops);
  int32_t k = 0;
  while (k < be->n_gemms && strcmp(be->gemms[k].what, what)) k++;
  if (k == be->n_gemms) {
    if (k == PROF_GEMMS) return;
    snprintf(be->gemms[k].what, sizeof be->gemms[k].what, "%s", what);
    be->gemms[k].flops = flops;
    be->n_gemms++;
  }
  be->gemms[k].ms += ms;
  be->gemms[k].calls++;
}

static void prof_print_gemms(const rlx_backend_exec* be) {
  if (be->n_gemms) fprintf(stderr, "  cuBLASLt by shape (dtype MxNxK, lt ops, alignments A/B/C bytes):\n");
  for (int32_t k = 0; k < be->n_gemms; k++) {
    const prof_gemm* q = &be->gemms[k];
    fprintf(stderr, "    %-44s %9.4f ms/run %6.1f calls/run %8.2f us each %7.1f TFLOP/s\n", q->what,
            q->ms / (double)be->prof_runs, (double)q->calls / (double)be->prof_runs,
            1e3 * q->ms / (double)q->calls, q->flops * (double)q->calls / (q->ms * 1e-3) / 1e12);
  }
}

static void prof_print(const rlx_backend_exec* be) {
  double total = 0;
  for (int k = 0; k < PROF_SLOTS; k++) total += be->prof_ms[k];
  if (be->prof_runs == 0 || total <= 0) return;
  double runs = (double)be->prof_runs;
  fprintf(stderr, "rlx cuda profile: %lld runs, %.4f ms of launches per run (eager, event-timed)\n",
          (long long)be->prof_runs, total / runs);
  for (int k = 0; k < PROF_SLOTS; k++)
    if (be->prof_calls[k])
      fprintf(stderr, "  %-24s %9.4f ms/run %5.1f%% %6.1f launches/run %8.2f us each\n", prof_names[k],
              be->prof_ms[k] / runs, 100.0 * be->prof_ms[k] / total, (double)be->prof_calls[k] / runs,
              1e3 * be->prof_ms[k] / (double)be->prof_calls[k]);
  prof_print_gemms(be);
  int32_t n_gen = 0;
  double gen_ms = 0;
  rlx_cuda_gen_stats(&n_gen, &gen_ms);
  if (n_gen) /* per process: every executable's so far */
    fprintf(stderr, "  generated region kernels: %d compiled with NVRTC in %.1f ms (process total)\n",
            (int)n_gen, gen_ms);
}

/* ------------------------------------------------------------------ trace */

/* Events for n launches (2 n + 1), grown on demand. */
static rlx_status trace_reserve(rlx_backend_exec* be, int32_t n, rlx_error* err) {
  int32_t need = 2 * n + 1;
  if (be->trace_n >= need) return RLX_OK;
  CUevent* grown = realloc(be->trace_ev, sizeof(CUevent) * (size_t)need);
  RLX_CHECK_ALLOC(err, grown);
  be->trace_ev = grown;
  for (int32_t i = be->trace_n; i < need; i++) {
    be->trace_ev[i] = NULL;
    RLX_CU(be->d, err, "cuEventCreate", be->d->cu.event_create(&be->trace_ev[i], CU_EVENT_DEFAULT));
    be->trace_n = i + 1;
  }
  return RLX_OK;
}

/* Milliseconds from event a to b (0 if the driver cannot say). */
static double trace_ms(const rlx_backend_exec* be, CUevent a, CUevent b) {
  float ms = 0.0f;
  return be->d->cu.event_elapsed_time(&ms, a, b) == CUDA_SUCCESS ? (double)ms : 0.0;
}

/* One event for step st from its launches [l0, l1): from the first's start
 * to the last's end, named after what they were ("cuBLASLt", a kernel's
 * family, "device copy", "host step", "cuDNN"; joined by '+'). */
static void trace_one_step(const rlx_backend_exec* be, const program* pr, const rlx_step_list* l,
                           int32_t st, int32_t l0, int32_t l1, const rlx_trace_run* tr,
                           double* last_end) {
  char variant[128] = "no launch";
  size_t at = 0;
  for (int32_t li = l0; li < l1; li++) {
    const char* what = prof_names[prof_slot(&pr->launches.v[li])];
    if (li > l0 && !strcmp(what, prof_names[prof_slot(&pr->launches.v[li - 1])])) continue;
    int n = snprintf(variant + at, sizeof variant - at, "%s%s", li > l0 ? "+" : "", what);
    if (n < 0 || (size_t)n >= sizeof variant - at) break;
    at += (size_t)n;
  }
  CUevent base = be->trace_ev[0];
  double start = *last_end, end = *last_end; /* no launch: a mark where the last one ended */
  if (l1 > l0) {
    start = trace_ms(be, base, be->trace_ev[1 + 2 * l0]);
    end = *last_end = trace_ms(be, base, be->trace_ev[2 + 2 * (l1 - 1)]);
  }
  int stream = be->n_streams > 1 ? pr->sched.stream_of[st] : 0;
  rlx_trace_step(tr, st, &l->steps[st], variant, stream, be->trace_t0 + 1e3 * start,
                 1e3 * (end - start), "CUDA events around each launch (eager, no graph)");
}

/* After a synchronised traced run: one event per step. */
static void trace_collect(const rlx_backend_exec* be, const program* pr, const rlx_step_list* l,
                          const rlx_trace_run* tr) {
  int32_t li = 0;
  double last_end = 0;
  for (int32_t st = 0; st < l->n; st++) {
    int32_t l0 = li;
    while (li < pr->launches.n && pr->launches.v[li].step == st) li++;
    trace_one_step(be, pr, l, st, l0, li, tr, &last_end);
  }
}

/* Benchmark hook: device time of the calling thread's last timed run. */
static _Thread_local double t_last_run_ms = -1.0;
double rlx_cuda_last_run_ms(void) { return t_last_run_ms; }

/* ------------------------------------------------------------------ vtable: probe */

static int cuda_probe(char* reason, size_t cap) {
  if (rlx_env_int(RLX_ENV_CUDA_DISABLE)) {
    snprintf(reason, cap, "disabled by RLX_CUDA_DISABLE");
    return 0;
  }
  return rlx_cuda_device(reason, cap) != NULL;
}

/* The kernels whose dtype handling is the generic load/store of
 * kernels/common.cuh (which mirrors ir/dtype.c for every dtype): the
 * elementwise family (copy, cast, binary, compare, where, unary) and pure
 * data movement. Other kernels (reductions, norms, scans, matmul via cuBLAS)
 * were written for the dtypes before i16/u16/u32/u64/float8, so nodes with
 * those dtypes go to the host fallback there instead of risking a kernel
 * that reads them as something else. */
static int generic_dtype_kernel(rlx_op op) {
  switch (op) {
    case RLX_OP_CAST: case RLX_OP_RESHAPE: case RLX_OP_STOP_GRADIENT: case RLX_OP_TRANSPOSE:
    case RLX_OP_NARROW: case RLX_OP_CONCAT: case RLX_OP_EXPAND: case RLX_OP_REVERSE:
    case RLX_OP_GATHER: case RLX_OP_WHERE: case RLX_OP_BINARY: case RLX_OP_COMPARE:
    case RLX_OP_ACTIVATION:
      return 1;
    default: return 0;
  }
}

static int has_newer_dtype(const rlx_graph* g, const rlx_node* n) {
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] != RLX_NONE && rlx_tensor_type(g, n->in[i])->dtype > RLX_BOOL) return 1;
  for (int32_t i = 0; i < n->n_out; i++)
    if (rlx_tensor_type(g, n->out[i])->dtype > RLX_BOOL) return 1;
  return 0;
}

/* Every op of the IR has a kernel (for the dtypes above); RLX_CUDA_HOST_OPS
 * lists ops to force onto the host fallback (to test that path). */
static int cuda_supports(const rlx_graph* g, int32_t ni) {
  const rlx_node* n = &g->nodes[ni];
  /* DequantMatMul: kernels/quant.cu for f32 / f16 / bf16 x (w is u8, an
   * opaque byte array there); f64 x, and RLX_CUDA_NO_QUANT_KERNELS, run on
   * the host fallback. */
  if (n->op == RLX_OP_DEQUANT_MATMUL)
    return rlx_tensor_type(g, n->in[0])->dtype != RLX_F64 &&
           !rlx_env_flag(RLX_ENV_CUDA_NO_QUANT_KERNELS) &&
           !rlx_env_list_has(RLX_ENV_CUDA_HOST_OPS, rlx_op_table[n->op].text);
  if (has_newer_dtype(g, n) && !generic_dtype_kernel(n->op)) return 0;
  /* Regions run in f32 registers: f64 ones are expanded by decompose. */
  if (n->op == RLX_OP_ELEMENTWISE_REGION && rlx_tensor_type(g, n->out[0])->dtype == RLX_F64)
    return 0;
  /* Quantized experts: the kernel takes rows along K in groups of at most
   * RLXK_GMM_MAX_GROUP; the gradient's transposed role runs on the host. */
  if (n->op == RLX_OP_DEQUANT_GROUPED_MATMUL &&
      (!n->a.transpose_b || n->a.block > RLXK_GMM_MAX_GROUP))
    return 0;
  /* The grouped kernels sum in f32: f64 ones keep the reference's precision on the host. */
  if ((n->op == RLX_OP_GROUPED_MATMUL || n->op == RLX_OP_DEQUANT_GROUPED_MATMUL) &&
      rlx_tensor_type(g, n->out[0])->dtype == RLX_F64)
    return 0;
  /* Convolutions run on cuDNN; without it (or for a geometry it does not
   * take) decompose.c rewrites them into the own kernels. */
  if (n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_TRANSPOSE ||
      n->op == RLX_OP_CONV_BACKWARD_WEIGHT) { /* the weight gradient: cuDNN's backward filter */
    const rlx_cuda_dev* d = rlx_cuda_device(NULL, 0);
    if (!d || !rlx_cuda_conv_node_native(d, g, ni)) return 0;
  }
  return !rlx_env_list_has(RLX_ENV_CUDA_HOST_OPS, rlx_op_table[n->op].text);
}

/* ------------------------------------------------------------------ programs */

static void schedule_free(rlx_backend_exec* be, schedule* s, int32_t n_steps) {
  if (s->events)
    for (int32_t i = 0; i < n_steps; i++)
      if (s->events[i]) be->d->cu.event_destroy(s->events[i]);
  free(s->stream_of);
  free(s->wait_begin);
  free(s->waits);
  free(s->events);
  memset(s, 0, sizeof *s);
}

static void program_free(rlx_backend_exec* be, program* p) {
  if (p->graph) be->d->cu.graph_exec_destroy(p->graph);
  if (p->scratch) be->d->cu.mem_free(p->scratch);
  if (p->dnn_ws) be->d->cu.mem_free(p->dnn_ws);
  if (p->gemm_pad) be->d->cu.mem_free(p->gemm_pad);
  be->extra_bytes -= p->own_bytes;
  schedule_free(be, &p->sched, p->n_steps);
  rlx_cuda_launch_list_free(be->d, &p->launches);
  memset(p, 0, sizeof *p);
}

static int ranges_meet(const rlx_range* a, int32_t na, const rlx_range* b, int32_t nb) {
  for (int32_t i = 0; i < na; i++)
    for (int32_t j = 0; j < nb; j++)
      if (a[i].begin < b[j].end && b[j].begin < a[i].end) return 1;
  return 0;
}

/* Must `later` wait for `earlier`? RAW, WAR and WAW all order two steps; a
 * host step orders against everything. */
int rlx_cuda_steps_conflict(const rlx_step* earlier, const rlx_step* later) {
  if (earlier->kernel == RLX_K_HOST || later->kernel == RLX_K_HOST) return 1;
  return ranges_meet(earlier->writes, earlier->n_writes, later->reads, later->n_reads) ||
         ranges_meet(earlier->reads, earlier->n_reads, later->writes, later->n_writes) ||
         ranges_meet(earlier->writes, earlier->n_writes, later->writes, later->n_writes);
}

/* A step joins the stream of its latest dependency (the dependency is then
 * implicit); independent steps round-robin. For every other stream it waits
 * on the latest conflicting step there, once. */
static rlx_status schedule_build(rlx_backend_exec* be, const rlx_step_list* l, schedule* s,
                                 rlx_error* err) {
  int32_t n = l->n, ns = be->n_streams;
  s->stream_of = calloc((size_t)n + 1, sizeof *s->stream_of);
  s->wait_begin = calloc((size_t)n + 1, sizeof *s->wait_begin);
  s->events = calloc((size_t)n + 1, sizeof *s->events);
  s->waits = malloc(((size_t)n * (size_t)ns + 1) * sizeof *s->waits);
  if (!s->stream_of || !s->wait_begin || !s->events || !s->waits)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  int32_t next = 0, nw = 0;
  int32_t latest[MAX_STREAMS];
  for (int32_t i = 0; i < n; i++) {
    const rlx_step* si = &l->steps[i];
    for (int t = 0; t < ns; t++) latest[t] = -1;
    int32_t last_dep = -1;
    for (int32_t j = 0; j < i; j++) {
      if (!rlx_cuda_steps_conflict(&l->steps[j], si)) continue;
      latest[s->stream_of[j]] = j;
      last_dep = j;
    }
    int32_t st = last_dep >= 0 ? s->stream_of[last_dep] : (next++ % ns);
    if (si->kernel == RLX_K_HOST) st = 0;
    s->stream_of[i] = st;
    s->wait_begin[i] = nw;
    for (int t = 0; t < ns; t++) {
      if (t == st || latest[t] < 0) continue;
      s->waits[nw++] = latest[t];
      if (!s->events[latest[t]])
        RLX_CU(be->d, err, "cuEventCreate",
               be->d->cu.event_create(&s->events[latest[t]], CU_EVENT_DISABLE_TIMING));
    }
  }
  s->wait_begin[n] = nw;
  return RLX_OK;
}

/* One cuDNN handle per executable: a handle carries the stream its calls
 * go to, and an executable runs on one thread at a time. */
static rlx_status dnn_handle_create(rlx_backend_exec* be, rlx_error* err) {
  rlx_dnn_status s = be->d->dnn.create(&be->dnn);
  if (s != RLX_DNN_SUCCESS) {
    be->dnn = NULL;
    const char* text = be->d->dnn.get_error_string(s);
    return rlx_fail(err, RLX_INTERNAL, "cuda: cudnnCreate failed: %s (cudnnStatus %d)",
                    text ? text : "?", (int)s);
  }
  be->build.dnn = be->dnn;
  return RLX_OK;
}

/* Counts conv steps by where they run, for the dispatch report. */
static void count_conv(rlx_backend_exec* be, const rlx_launch* x, const rlx_step* s) {
  if (s->kernel != RLX_K_CONV) return;
  if (x->kind == RLX_LAUNCH_HOST) be->host_convs++;
  if (x->kind != RLX_LAUNCH_DNN) return;
  if (be->dnn_convs++ == 0) rlx_cuda_conv_plan_describe(x->conv, be->dnn_first, sizeof be->dnn_first);
}

static rlx_status program_build(rlx_backend_exec* be, const rlx_step_list* l, program* p,
                                rlx_error* err) {
  memset(p, 0, sizeof *p);
  p->n_steps = l->n;
  for (int32_t i = 0; i < l->n; i++)
    if ((l->steps[i].kernel == RLX_K_MATMUL || l->steps[i].kernel == RLX_K_DEQUANT_MATMUL) &&
        !be->workspace && be->d->have_lt) {
      size_t bytes = WORKSPACE_BYTES * (size_t)be->n_streams;
      RLX_CU(be->d, err, "cuMemAlloc(cuBLASLt workspace)", be->d->cu.mem_alloc(&be->workspace, bytes));
      be->workspace_bytes = WORKSPACE_BYTES;
      be->extra_bytes += bytes;
      be->build.workspace = be->workspace;
      be->build.workspace_bytes = WORKSPACE_BYTES;
    }
  for (int32_t i = 0; i < l->n; i++)
    if (rlx_cuda_step_uses_dnn(&l->steps[i]) && !be->dnn && be->d->have_dnn)
      RLX_RETURN_IF_ERROR(dnn_handle_create(be, err));
  /* the generated region kernels, compiled together (in parallel) */
  RLX_RETURN_IF_ERROR(rlx_cuda_regions_prepare(&be->build, l, err));
  for (int32_t i = 0; i < l->n; i++)
    RLX_RETURN_IF_ERROR(rlx_cuda_build_step(&be->build, &l->steps[i], i, &p->launches, err));
  /* One stream only: a merged launch waits on nothing but the stream. */
  if (be->n_streams == 1 && !rlx_env_flag(RLX_ENV_CUDA_NO_OPT_BATCH))
    RLX_RETURN_IF_ERROR(rlx_cuda_batch_updates(&p->launches, l, err));
  if (be->n_streams == 1 && !rlx_env_flag(RLX_ENV_CUDA_NO_CAST_BATCH))
    RLX_RETURN_IF_ERROR(rlx_cuda_batch_casts(&p->launches, l, err));
  if (be->n_streams == 1 && !rlx_env_flag(RLX_ENV_CUDA_NO_LIMB_SHARE)) rlx_cuda_share_limbs(&p->launches);
  for (int32_t i = 0; i < p->launches.n; i++) {
    const rlx_launch* x = &p->launches.v[i];
    if (x->kind == RLX_LAUNCH_HOST) p->has_host = 1;
    count_conv(be, x, &l->steps[x->step]);
    if (x->kind == RLX_LAUNCH_KERNEL && (x->fn == RLX_CUDA_FN_REGION4 || x->fn == RLX_CUDA_FN_REGION1))
      *(x->gen ? &be->gen_regions : &be->interp_regions) += 1;
  }
  if (p->launches.dnn_workspace) {
    size_t bytes = p->launches.dnn_workspace * (size_t)be->n_streams;
    RLX_CU(be->d, err, "cuMemAlloc(cuDNN workspace)", be->d->cu.mem_alloc(&p->dnn_ws, bytes));
    p->own_bytes += bytes;
    be->extra_bytes += bytes;
  }
  if (p->launches.gemm_pad) {
    /* whole 256-byte units, so every stream's part starts aligned (cuBLASLt,
     * the panels' and the limbs' 16-byte accesses) */
    p->launches.gemm_pad = (p->launches.gemm_pad + 255u) & ~(uint64_t)255u;
    size_t bytes = (size_t)p->launches.gemm_pad * (size_t)be->n_streams;
    RLX_CU(be->d, err, "cuMemAlloc(GEMM padding)", be->d->cu.mem_alloc(&p->gemm_pad, bytes));
    p->own_bytes += bytes;
    be->extra_bytes += bytes;
  }
  if (p->launches.scratch_bytes) {
    RLX_CU(be->d, err, "cuMemAlloc(scratch)",
           be->d->cu.mem_alloc(&p->scratch, (size_t)p->launches.scratch_bytes));
    p->own_bytes += p->launches.scratch_bytes;
    be->extra_bytes += p->launches.scratch_bytes;
    /* The fused GEMV's arrival counts start at zero (and are left there). */
    RLX_CU(be->d, err, "cuMemsetD8Async(scratch)",
           be->d->cu.memset_d8_async(p->scratch, 0, (size_t)p->launches.scratch_bytes, be->streams[0]));
    for (int32_t i = 0; i < p->launches.n_init; i++) {
      const rlx_scratch_init* in = &p->launches.init[i];
      RLX_CU(be->d, err, "cuMemcpyHtoDAsync(scratch)",
             be->d->cu.memcpy_htod_async(p->scratch + in->off, in->data, in->bytes, be->streams[0]));
    }
  }
  if (be->n_streams > 1) RLX_RETURN_IF_ERROR(schedule_build(be, l, &p->sched, err));
  /* Capture safety comes from the steps: a host step needs the CPU mid-run. */
  p->no_graph = p->has_host || !be->use_graphs;
  return RLX_OK;
}

/* Program cache callbacks (backends/common): programs live on the heap. */
static rlx_status build_program(void* be, const rlx_step_list* l, rlx_error* err, void** out) {
  program* p = calloc(1, sizeof *p);
  RLX_CHECK_ALLOC(err, p);
  rlx_status s = program_build(be, l, p, err);
  if (s) {
    program_free(be, p);
    free(p);
    return s;
  }
  *out = p;
  return RLX_OK;
}

static void free_program(void* be, void* p) {
  program_free(be, p);
  free(p);
}

/* ------------------------------------------------------------------ issuing launches */

/* One kernel launch; x->early lets it start while the stream's previous
 * kernel finishes (programmatic stream serialization): its launch and
 * prologue overlap that kernel's tail. */
static CUresult launch_kernel(const rlx_cuda_dev* d, const rlx_launch* x, CUstream s, void** args) {
  CUfunction f = x->gen ? x->gen : d->fn[x->fn];
  if (x->early) {
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig c = {x->grid[0], x->grid[1], x->grid[2], x->block, 1, 1, x->smem, s, &attr, 1};
    return d->cu.launch_kernel_ex(&c, f, args, NULL);
  }
  return d->cu.launch_kernel(f, x->grid[0], x->grid[1], x->grid[2], x->block, 1, 1, x->smem, s, args, NULL);
}

static rlx_status issue(rlx_backend_exec* be, const program* pr, const rlx_launch* x, CUstream s,
                        int stream_index, rlx_error* err) {
  const rlx_cuda_dev* d = be->d;
  switch (x->kind) {
    case RLX_LAUNCH_KERNEL: {
      rlx_launch_params p = x->p;
      /* Scratch users carry offsets into the program's scratch buffer. */
      if (x->fn == RLX_CUDA_FN_SAMPLE) p.sample.scratch += pr->scratch;
      if (x->fn >= RLX_CUDA_FN_REDUCE_COLS_V1 && x->fn <= RLX_CUDA_FN_REDUCE_COLS_V8)
        p.cols.partial += pr->scratch;
      if (x->fn >= RLX_CUDA_FN_REDUCE_MID_V1 && x->fn <= RLX_CUDA_FN_REDUCE_MID_H4)
        p.mid.partial += pr->scratch;
      if (x->fn == RLX_CUDA_FN_OPT_MULTI || x->fn == RLX_CUDA_FN_CAST_MULTI)
        p.opt_multi.table += pr->scratch;
      if (x->fn == RLX_CUDA_FN_GEMV_FUSED_V1 || x->fn == RLX_CUDA_FN_GEMV_FUSED_V4) {
        p.mm.partial += pr->scratch;
        p.mm.counters += pr->scratch;
      }
      if (x->fn == RLX_CUDA_FN_ATTN_D64_SPLIT || x->fn == RLX_CUDA_FN_ATTN_D128_SPLIT ||
          x->fn == RLX_CUDA_FN_ATTN_D256_SPLIT || x->fn == RLX_CUDA_FN_ATTN_COMBINE ||
          (x->fn >= RLX_CUDA_FN_ATTN_DEC_1V && x->fn <= RLX_CUDA_FN_ATTN_DEC_4G))
        p.attn.partial += pr->scratch;
      if (rlx_cuda_fn_uses_stream_pad(x->fn)) /* dequantized panels, x as limbs */
        p.dqmm.panel += pr->gemm_pad + (CUdeviceptr)stream_index * pr->launches.gemm_pad;
      if (rlx_cuda_fn_attn_bwd_stats_copy(x->fn)) p.attn_bwd.a.partial += pr->scratch; /* stats copy */
      if (rlx_cuda_fn_attn_bwd_mma_k(x->fn) && p.attn_bwd.stats_copy)
        p.attn_bwd.a.partial += pr->scratch; /* dS tiles for DQ */
      CUdeviceptr arena = be->arena, state = be->state;
      void* args[3] = {&arena, &p, &state};
      CUresult r = launch_kernel(d, x, s, args);
      if (r != CUDA_SUCCESS) {
        char call[96];
        snprintf(call, sizeof call, "cuLaunchKernel(step %d)", x->step);
        return rlx_cuda_fail(d, err, r, call);
      }
      return RLX_OK;
    }
    case RLX_LAUNCH_LT:
      return rlx_cuda_mm_plan_run(d, x->plan, s,
                                  be->workspace + (CUdeviceptr)stream_index * be->workspace_bytes,
                                  be->workspace_bytes,
                                  pr->gemm_pad + (CUdeviceptr)stream_index * pr->launches.gemm_pad, err);
    case RLX_LAUNCH_DNN:
      return rlx_cuda_conv_plan_run(d, x->conv, be->dnn, s,
                                    pr->dnn_ws + (CUdeviceptr)stream_index * pr->launches.dnn_workspace,
                                    pr->launches.dnn_workspace, err);
    case RLX_LAUNCH_COPY:
      RLX_CU(d, err, "cuMemcpyDtoDAsync",
             d->cu.memcpy_dtod_async(be->arena + x->dst, be->arena + x->src, (size_t)x->bytes, s));
      return RLX_OK;
    default:
      return rlx_fail(err, RLX_INTERNAL, "cuda: host launch issued as a device launch");
  }
}

/* Other streams start after everything already queued on stream 0. */
static rlx_status fork_streams(rlx_backend_exec* be, rlx_error* err) {
  if (be->n_streams < 2) return RLX_OK;
  RLX_CU(be->d, err, "cuEventRecord", be->d->cu.event_record(be->fork, be->streams[0]));
  for (int t = 1; t < be->n_streams; t++)
    RLX_CU(be->d, err, "cuStreamWaitEvent", be->d->cu.stream_wait_event(be->streams[t], be->fork, 0));
  return RLX_OK;
}

static rlx_status join_streams(rlx_backend_exec* be, rlx_error* err) {
  for (int t = 1; t < be->n_streams; t++) {
    RLX_CU(be->d, err, "cuEventRecord", be->d->cu.event_record(be->joins[t], be->streams[t]));
    RLX_CU(be->d, err, "cuStreamWaitEvent",
           be->d->cu.stream_wait_event(be->streams[0], be->joins[t], 0));
  }
  return RLX_OK;
}

static rlx_status sync_all(rlx_backend_exec* be, rlx_error* err) {
  for (int t = 0; t < be->n_streams; t++)
    RLX_CU(be->d, err, "cuStreamSynchronize", be->d->cu.stream_synchronize(be->streams[t]));
  return RLX_OK;
}

/* ------------------------------------------------------------------ host fallback */

static rlx_status dtoh(rlx_backend_exec* be, void* dst, uint64_t off, uint64_t bytes, rlx_error* err);
static rlx_status htod(rlx_backend_exec* be, uint64_t off, const void* src, uint64_t bytes, rlx_error* err);

static rlx_status io_read(void* be, uint64_t off, void* dst, uint64_t bytes, rlx_error* err) {
  return dtoh(be, dst, off, bytes, err);
}

static rlx_status io_write(void* be, uint64_t off, const void* src, uint64_t bytes, rlx_error* err) {
  return htod(be, off, src, bytes, err);
}

/* Runs step s with the CPU reference against the host mirror (common.h),
 * once every stream has finished what it was given. */
static rlx_status run_host_step(rlx_backend_exec* be, const rlx_step* s, const rlx_run_ctx* ctx,
                                rlx_error* err) {
  RLX_RETURN_IF_ERROR(sync_all(be, err));
  rlx_arena_io io = {be, io_read, io_write};
  return rlx_host_run_step(&be->mirror, &io, s, NULL, ctx, err);
}

/* ------------------------------------------------------------------ run */

static rlx_status run_steps_of(rlx_backend_exec* be, program* pr, const rlx_step_list* l,
                               const rlx_run_ctx* ctx, int capturing, rlx_error* err) {
  const rlx_cuda_dev* d = be->d;
  int multi = be->n_streams > 1;
  int traced = ctx && ctx->trace && !capturing;
  if (traced) {
    be->trace_t0 = rlx_trace_now_us();
    RLX_CU(d, err, "cuEventRecord", d->cu.event_record(be->trace_ev[0], be->streams[0]));
  }
  RLX_RETURN_IF_ERROR(fork_streams(be, err));
  int32_t li = 0;
  for (int32_t st = 0; st < l->n; st++) {
    int stream = multi ? pr->sched.stream_of[st] : 0;
    if (multi)
      for (int32_t w = pr->sched.wait_begin[st]; w < pr->sched.wait_begin[st + 1]; w++)
        RLX_CU(d, err, "cuStreamWaitEvent",
               d->cu.stream_wait_event(be->streams[stream], pr->sched.events[pr->sched.waits[w]], 0));
    for (; li < pr->launches.n && pr->launches.v[li].step == st; li++) {
      const rlx_launch* x = &pr->launches.v[li];
      if (be->profile && !capturing && li < be->prof_n)
        RLX_CU(d, err, "cuEventRecord", d->cu.event_record(be->prof_ev[li], be->streams[stream]));
      if (traced)
        RLX_CU(d, err, "cuEventRecord", d->cu.event_record(be->trace_ev[1 + 2 * li], be->streams[stream]));
      if (x->kind == RLX_LAUNCH_HOST) {
        if (capturing) return rlx_fail(err, RLX_INTERNAL, "cuda: host step inside a graph capture");
        RLX_RETURN_IF_ERROR(run_host_step(be, &l->steps[st], ctx, err));
        RLX_RETURN_IF_ERROR(fork_streams(be, err));
      } else {
        RLX_RETURN_IF_ERROR(issue(be, pr, x, be->streams[stream], stream, err));
      }
      if (traced)
        RLX_CU(d, err, "cuEventRecord", d->cu.event_record(be->trace_ev[2 + 2 * li], be->streams[stream]));
    }
    /* Every step another stream waits on records its event, launches or not. */
    if (multi && pr->sched.events[st])
      RLX_CU(d, err, "cuEventRecord", d->cu.event_record(pr->sched.events[st], be->streams[stream]));
  }
  RLX_RETURN_IF_ERROR(join_streams(be, err));
  if (be->profile && !capturing && pr->launches.n < be->prof_n)
    RLX_CU(d, err, "cuEventRecord", d->cu.event_record(be->prof_ev[pr->launches.n], be->streams[0]));
  return RLX_OK;
}

/* Captures the program into a graph; on failure the program runs eagerly
 * from then on (the capture is discarded, nothing ran). */
static void capture(rlx_backend_exec* be, program* pr, const rlx_step_list* l,
                    const rlx_run_ctx* ctx) {
  const rlx_cuda_dev* d = be->d;
  rlx_error ignored;
  CUgraph graph = NULL;
  if (d->cu.stream_begin_capture(be->streams[0], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) {
    pr->no_graph = 1;
    return;
  }
  rlx_status s = run_steps_of(be, pr, l, ctx, 1, &ignored);
  CUresult r = d->cu.stream_end_capture(be->streams[0], &graph);
  if (s == RLX_OK && r == CUDA_SUCCESS && graph &&
      d->cu.graph_instantiate(&pr->graph, graph, 0) == CUDA_SUCCESS) {
    d->cu.graph_destroy(graph);
    return;
  }
  if (graph) d->cu.graph_destroy(graph);
  pr->graph = NULL;
  pr->no_graph = 1;
}

/* A kernel recorded a run-time error: name the node as the reference does. */
static rlx_status report_kernel_error(rlx_backend_exec* be, const rlx_step_list* l,
                                      const rlx_run_ctx* ctx, rlx_error* err) {
  const rlxk_state* st = be->state_host;
  int32_t step = (int32_t)(st->err_key >> 8) - 1;
  int code = (int)(st->err_key & 0xff);
  int32_t node = step >= 0 && step < l->n ? l->steps[step].node : -1;
  switch (code) {
    case RLXK_ERR_GATHER:
    case RLXK_ERR_SCATTER:
      return rlx_fail_index(err, ctx, node, code == RLXK_ERR_GATHER ? "gather" : "scatter_add",
                            st->err_a, st->err_b);
    case RLXK_ERR_NONFINITE: return rlx_fail_non_finite(err, ctx, node, st->err_b, st->err_a);
    case RLXK_ERR_XENT:
      return rlx_fail_index(err, ctx, node, "cross_entropy target", st->err_a, st->err_b);
    case RLXK_ERR_EXPERT:
      return rlx_fail_index(err, ctx, node, "grouped_matmul expert", st->err_a, st->err_b);
    default:
      return rlx_fail(err, RLX_INTERNAL, "cuda: step %d reported error code %d", step, code);
  }
}

static rlx_status cuda_run(rlx_backend_exec* be, const rlx_step_list* steps, const rlx_run_ctx* ctx,
                           rlx_error* err) {
  const rlx_cuda_dev* d = be->d;
  RLX_CU(d, err, "cuCtxSetCurrent", d->cu.ctx_set_current(d->ctx));
  void* cached = NULL;
  RLX_RETURN_IF_ERROR(rlx_program_cache_get(&be->programs, steps, err, &cached));
  program* pr = cached;
  /* Per-run state: the seed goes in through device memory, so a captured
   * graph replays with each run's seed. */
  memset(be->state_host, 0, sizeof *be->state_host);
  be->state_host->seed = ctx ? ctx->seed : 0;
  RLX_CU(d, err, "cuMemcpyHtoDAsync(state)",
         d->cu.memcpy_htod_async(be->state, be->state_host, sizeof(rlxk_state), be->streams[0]));
  if (be->profile) { /* eager: events recorded inside a capture are not timing points */
    pr->no_graph = 1;
    RLX_RETURN_IF_ERROR(prof_reserve(be, pr->launches.n, err));
  }
  /* A traced run is eager for the same reason; later untraced runs replay. */
  const rlx_trace_run* tr = ctx ? ctx->trace : NULL;
  if (tr) RLX_RETURN_IF_ERROR(trace_reserve(be, pr->launches.n, err));
  if (!tr && !pr->no_graph && !pr->graph) capture(be, pr, steps, ctx);
  if (be->t0) RLX_CU(d, err, "cuEventRecord", d->cu.event_record(be->t0, be->streams[0]));
  if (pr->graph && !tr) {
    RLX_CU(d, err, "cuGraphLaunch", d->cu.graph_launch(pr->graph, be->streams[0]));
  } else {
    rlx_status s = run_steps_of(be, pr, steps, ctx, 0, err);
    if (s) {
      sync_all(be, NULL);
      return s;
    }
  }
  if (be->t1) RLX_CU(d, err, "cuEventRecord", d->cu.event_record(be->t1, be->streams[0]));
  RLX_CU(d, err, "cuMemcpyDtoHAsync(state)",
         d->cu.memcpy_dtoh_async(be->state_host, be->state, sizeof(rlxk_state), be->streams[0]));
  RLX_RETURN_IF_ERROR(sync_all(be, err));
  be->staging_used = 0;
  float ms = 0.0f;
  if (be->t1 && d->cu.event_elapsed_time(&ms, be->t0, be->t1) == CUDA_SUCCESS) t_last_run_ms = ms;
  if (be->profile) prof_collect(be, pr);
  if (tr) trace_collect(be, pr, steps, tr);
  if (be->state_host->err_key) return report_kernel_error(be, steps, ctx, err);
  return RLX_OK;
}

/* ------------------------------------------------------------------ transfers */

static rlx_status check_range(const rlx_backend_exec* be, uint64_t off, uint64_t bytes,
                              rlx_error* err) {
  if (off > be->arena_bytes || bytes > be->arena_bytes - off)
    return rlx_fail(err, RLX_INTERNAL, "cuda: arena access [%llu, +%llu) outside %llu bytes",
                    (unsigned long long)off, (unsigned long long)bytes,
                    (unsigned long long)be->arena_bytes);
  return RLX_OK;
}

/* Host -> device through pinned staging: small copies queue without waiting
 * (the staging is recycled after the next synchronisation). */
static rlx_status htod(rlx_backend_exec* be, uint64_t off, const void* src, uint64_t bytes,
                       rlx_error* err) {
  const rlx_cuda_dev* d = be->d;
  const uint8_t* p = src;
  while (bytes > 0) {
    if (be->staging_used >= STAGING_BYTES) {
      RLX_CU(d, err, "cuStreamSynchronize", d->cu.stream_synchronize(be->streams[0]));
      be->staging_used = 0;
    }
    size_t room = STAGING_BYTES - be->staging_used;
    size_t n = bytes < room ? (size_t)bytes : room;
    memcpy(be->staging + be->staging_used, p, n);
    RLX_CU(d, err, "cuMemcpyHtoDAsync",
           d->cu.memcpy_htod_async(be->arena + off, be->staging + be->staging_used, n, be->streams[0]));
    be->staging_used += (n + 255) & ~(size_t)255;
    off += n;
    p += n;
    bytes -= n;
  }
  return RLX_OK;
}

static rlx_status dtoh(rlx_backend_exec* be, void* dst, uint64_t off, uint64_t bytes, rlx_error* err) {
  const rlx_cuda_dev* d = be->d;
  uint8_t* p = dst;
  RLX_RETURN_IF_ERROR(sync_all(be, err));
  be->staging_used = 0;
  while (bytes > 0) {
    size_t n = bytes < STAGING_BYTES ? (size_t)bytes : STAGING_BYTES;
    RLX_CU(d, err, "cuMemcpyDtoHAsync",
           d->cu.memcpy_dtoh_async(be->staging, be->arena + off, n, be->streams[0]));
    RLX_CU(d, err, "cuStreamSynchronize", d->cu.stream_synchronize(be->streams[0]));
    memcpy(p, be->staging, n);
    off += n;
    p += n;
    bytes -= n;
  }
  return RLX_OK;
}

static rlx_status cuda_upload(rlx_backend_exec* be, uint64_t offset, const void* src,
                              uint64_t bytes, rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, offset, bytes, err));
  RLX_CU(be->d, err, "cuCtxSetCurrent", be->d->cu.ctx_set_current(be->d->ctx));
  return htod(be, offset, src, bytes, err);
}

static rlx_status cuda_download(rlx_backend_exec* be, uint64_t offset, void* dst, uint64_t bytes,
                                rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, offset, bytes, err));
  RLX_CU(be->d, err, "cuCtxSetCurrent", be->d->cu.ctx_set_current(be->d->ctx));
  return dtoh(be, dst, offset, bytes, err);
}

/* Device-to-device inside the arena (feeds). Overlapping ranges go through
 * a temporary so the copy behaves as memmove. */
static rlx_status cuda_copy(rlx_backend_exec* be, uint64_t dst, uint64_t src, uint64_t bytes,
                            rlx_error* err) {
  const rlx_cuda_dev* d = be->d;
  RLX_RETURN_IF_ERROR(check_range(be, dst, bytes, err));
  RLX_RETURN_IF_ERROR(check_range(be, src, bytes, err));
  if (bytes == 0 || dst == src) return RLX_OK;
  RLX_CU(d, err, "cuCtxSetCurrent", d->cu.ctx_set_current(d->ctx));
  uint64_t lo = dst < src ? dst : src, hi = dst < src ? src : dst;
  if (lo + bytes <= hi) {
    RLX_CU(d, err, "cuMemcpyDtoDAsync",
           d->cu.memcpy_dtod_async(be->arena + dst, be->arena + src, (size_t)bytes, be->streams[0]));
    return RLX_OK;
  }
  CUdeviceptr tmp = 0;
  RLX_CU(d, err, "cuMemAlloc", d->cu.mem_alloc(&tmp, (size_t)bytes));
  CUresult r = d->cu.memcpy_dtod_async(tmp, be->arena + src, (size_t)bytes, be->streams[0]);
  if (r == CUDA_SUCCESS) r = d->cu.memcpy_dtod_async(be->arena + dst, tmp, (size_t)bytes, be->streams[0]);
  if (r == CUDA_SUCCESS) r = d->cu.stream_synchronize(be->streams[0]);
  d->cu.mem_free(tmp);
  if (r != CUDA_SUCCESS) return rlx_cuda_fail(d, err, r, "cuMemcpyDtoDAsync(overlapping feed)");
  return RLX_OK;
}

/* ------------------------------------------------------------------ create / destroy */

static void cuda_destroy(rlx_backend_exec* be) {
  if (!be) return;
  const rlx_cuda_dev* d = be->d;
  d->cu.ctx_set_current(d->ctx);
  for (int t = 0; t < be->n_streams; t++)
    if (be->streams[t]) d->cu.stream_synchronize(be->streams[t]);
  rlx_program_cache_free(&be->programs);
  if (be->profile) prof_print(be);
  for (int32_t i = 0; i < be->prof_n; i++)
    if (be->prof_ev[i]) d->cu.event_destroy(be->prof_ev[i]);
  free(be->prof_ev);
  for (int32_t i = 0; i < be->trace_n; i++)
    if (be->trace_ev[i]) d->cu.event_destroy(be->trace_ev[i]);
  free(be->trace_ev);
  if (be->workspace) d->cu.mem_free(be->workspace);
  if (be->dnn) d->dnn.destroy(be->dnn);
  if (be->arena) d->cu.mem_free(be->arena);
  if (be->state) d->cu.mem_free(be->state);
  if (be->state_host) d->cu.mem_free_host(be->state_host);
  if (be->staging) d->cu.mem_free_host(be->staging);
  if (be->fork) d->cu.event_destroy(be->fork);
  if (be->t0) d->cu.event_destroy(be->t0);
  if (be->t1) d->cu.event_destroy(be->t1);
  for (int t = 0; t < MAX_STREAMS; t++)
    if (be->joins[t]) d->cu.event_destroy(be->joins[t]);
  for (int t = 0; t < be->n_streams; t++)
    if (be->streams[t]) d->cu.stream_destroy(be->streams[t]);
  rlx_host_mirror_free(&be->mirror);
  free(be);
}

static rlx_status create_resources(rlx_backend_exec* be, uint64_t arena_bytes, rlx_error* err) {
  const rlx_cuda_dev* d = be->d;
  RLX_CU(d, err, "cuCtxSetCurrent", d->cu.ctx_set_current(d->ctx));
  for (int t = 0; t < be->n_streams; t++)
    RLX_CU(d, err, "cuStreamCreate", d->cu.stream_create(&be->streams[t], CU_STREAM_NON_BLOCKING));
  if (be->n_streams > 1) {
    RLX_CU(d, err, "cuEventCreate", d->cu.event_create(&be->fork, CU_EVENT_DISABLE_TIMING));
    for (int t = 1; t < be->n_streams; t++)
      RLX_CU(d, err, "cuEventCreate", d->cu.event_create(&be->joins[t], CU_EVENT_DISABLE_TIMING));
  }
  if (rlx_env_int(RLX_ENV_CUDA_TIMING)) {
    RLX_CU(d, err, "cuEventCreate", d->cu.event_create(&be->t0, CU_EVENT_DEFAULT));
    RLX_CU(d, err, "cuEventCreate", d->cu.event_create(&be->t1, CU_EVENT_DEFAULT));
  }
  /* whole 256-byte units: kernels that stage a tensor through aligned
   * 16-byte loads (quant.cu's panels) may read the rest of its last unit */
  size_t n = (size_t)((arena_bytes + 255u) & ~(uint64_t)255u);
  if (n == 0) n = 256;
  CUresult r = d->cu.mem_alloc(&be->arena, n);
  if (r != CUDA_SUCCESS) {
    char call[96];
    snprintf(call, sizeof call, "cuMemAlloc(arena of %llu bytes)", (unsigned long long)arena_bytes);
    return rlx_cuda_fail(d, err, r, call);
  }
  be->arena_bytes = arena_bytes;
  /* Zeroed so that reading a never-written tensor is deterministic. */
  RLX_CU(d, err, "cuMemsetD8Async", d->cu.memset_d8_async(be->arena, 0, n, be->streams[0]));
  RLX_CU(d, err, "cuMemAlloc(state)", d->cu.mem_alloc(&be->state, sizeof(rlxk_state)));
  void* host = NULL;
  RLX_CU(d, err, "cuMemAllocHost(state)", d->cu.mem_alloc_host(&host, sizeof(rlxk_state)));
  be->state_host = host;
  RLX_CU(d, err, "cuMemAllocHost(staging)", d->cu.mem_alloc_host(&host, STAGING_BYTES));
  be->staging = host;
  RLX_CU(d, err, "cuStreamSynchronize", d->cu.stream_synchronize(be->streams[0]));
  return RLX_OK;
}

/* The cuDNN workspace one convolution may take (RLX_CUDNN_WORKSPACE; 0 =
 * auto). Exact-f32 3x3 convolutions are 3-5x faster with the algorithms
 * that need a large workspace (FFT / non-fused Winograd: about 1-2 GiB at
 * B32 C256 56x56 on an H200), and the program allocates one workspace, the
 * largest plan's, so auto allows an eighth of the free memory, at most 4 GiB. */
static size_t dnn_workspace_cap(const rlx_cuda_dev* d) {
  uint64_t set = rlx_env_size(RLX_ENV_CUDNN_WORKSPACE);
  if (set) return (size_t)set;
  size_t free_bytes = 0, total = 0;
  const size_t fallback = (size_t)256 << 20, most = (size_t)4 << 30;
  if (d->cu.mem_get_info(&free_bytes, &total) != CUDA_SUCCESS) return fallback;
  size_t cap = free_bytes / 8;
  return cap > most ? most : cap < fallback ? fallback : cap;
}

static rlx_status cuda_create(const rlx_step_list* steps, uint64_t arena_bytes,
                              const rlx_compile_options* opt, rlx_error* err,
                              rlx_backend_exec** out) {
  char reason[256];
  const rlx_cuda_dev* d = rlx_cuda_device(reason, sizeof reason);
  if (!d) return rlx_fail(err, RLX_UNAVAILABLE, "cuda unavailable: %s", reason);
  rlx_backend_exec* be = calloc(1, sizeof *be);
  RLX_CHECK_ALLOC(err, be);
  be->d = d;
  be->n_streams = (int)rlx_env_int(RLX_ENV_CUDA_STREAMS);
  if (be->n_streams < 1) be->n_streams = 1;
  if (be->n_streams > MAX_STREAMS) be->n_streams = MAX_STREAMS;
  be->use_graphs = rlx_env_int(RLX_ENV_CUDA_GRAPHS) != 0;
  be->profile = rlx_env_int(RLX_ENV_CUDA_PROFILE); /* 2: also GEMMs by shape */
  be->mirror.backend = "cuda";
  be->mirror.arena_bytes = arena_bytes;
  rlx_status s = create_resources(be, arena_bytes, err);
  if (s == RLX_OK) {
    be->build.d = d;
    be->build.arena = be->arena;
    be->build.allow_tf32 = opt && opt->allow_tf32;
    be->build.debug_nans = opt && opt->debug_nans;
    be->build.no_lt = rlx_env_int(RLX_ENV_CUDA_NO_CUBLASLT) != 0;
    be->build.dnn_stream = be->streams[0];
    be->build.dnn_ws_cap = dnn_workspace_cap(d);
    be->build.dnn_heuristic = rlx_env_flag(RLX_ENV_CUDNN_HEURISTIC);
    rlx_program_ops ops = {be, build_program, free_program};
    s = rlx_program_cache_init(&be->programs, &ops, steps, err);
  }
  if (s) {
    cuda_destroy(be);
    return s;
  }
  *out = be;
  return RLX_OK;
}

/* Dispatch report line: where the convolutions and the elementwise
 * regions went (generated code, or the interpreter and why). */
static void cuda_report(const rlx_backend_exec* be, char* buf, size_t cap) {
  size_t n = 0;
  if (be->dnn_convs || be->host_convs)
    n = (size_t)snprintf(buf, cap, "cuda conv: %d on %s (first: %s), %d on the host",
                         (int)be->dnn_convs, be->d->dnn_reason,
                         be->dnn_convs ? be->dnn_first : "-", (int)be->host_convs);
  if ((!be->gen_regions && !be->interp_regions) || n >= cap) return;
  char why[160];
  if (rlx_env_flag(RLX_ENV_CUDA_NO_NVRTC)) snprintf(why, sizeof why, "RLX_CUDA_NO_NVRTC");
  else rlx_nvrtc_available(why, sizeof why);
  snprintf(buf + n, cap - n, "%scuda regions: %d generated (NVRTC), %d on the interpreter (%s)",
           n ? "; " : "", (int)be->gen_regions, (int)be->interp_regions, why);
}

static uint64_t cuda_extra_bytes(const rlx_backend_exec* be) { return be->extra_bytes; }

const rlx_backend rlx_backend_cuda = {
    .name = "cuda",
    .probe = cuda_probe,
    .supports = cuda_supports,
    .report = cuda_report,
    .alignment = 256,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .run = cuda_run,
    .extra_bytes = cuda_extra_bytes,
};

#else
typedef int rlx_cuda_backend_unused_;
#endif
