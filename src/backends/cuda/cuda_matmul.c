/* cuBLASLt plans for MATMUL steps, made once when the executable is created
 * (descriptors, layouts, the heuristic's algorithm); a run only calls
 * cublasLtMatmul.
 *
 * rlx is row-major and cuBLASLt column-major, so C[M,N] = A·B is computed as
 * C^T[N,M] = B^T·A^T: the column-major problem has m' = N, n' = M, with our B
 * as its first operand. Each operand needs one unit stride (rows or
 * columns); the other becomes the leading dimension and a transpose flag.
 * Batches must collapse to one stride per operand; a batch that broadcasts B
 * over a contiguous A folds into M. Exact f32 unless allow_tf32; f16/bf16
 * run on tensor cores with f32 accumulation. Bias and ReLU / GELU-tanh
 * epilogues are fused (cuBLASLt's GELU is the tanh form, so it serves only
 * GeluApprox); other activations run as an epilogue kernel.
 *
 * The algorithm: cuBLASLt's heuristic ranks up to 8 candidates; the plan
 * times them (one warm-up, then TIMED_REPS calls each, into a temporary
 * output) and keeps the fastest. The heuristic's first pick was up to 4x
 * slower than the best on some bf16 shapes of a GPT-2 training step (bias
 * epilogues, the weight gradients' transposed operands). The winner's rank
 * is remembered per problem (dtype, shape, ops, alignments, epilogue,
 * compute type) for the rest of the process, so repeated shapes (every
 * layer of a model) are timed once. RLX_CUDA_GEMM_HEURISTIC keeps the
 * heuristic's first pick.
 *
 * Padding: cuBLASLt's fast half kernels load 16-byte vectors, so a half
 * operand whose leading dimension is not a multiple of 16 bytes, or a
 * product whose N or K is not a multiple of 8 (GPT-2's LM head: vocab
 * 50257), runs on slow kernels. In a large single (unbatched) f16 / bf16
 * product such operands are copied to a padding buffer: the leading
 * dimension rounded up, and an odd N or K rounded up to 8 with the new
 * rows / columns zero (zero terms leave each dot product as it was; the
 * output's extra rows are dropped when it is copied back). Measured on the
 * H200 (GPT-2 bf16 step): the LM head's weight gradient, 50257x768x4096,
 * 1.93 -> 0.98 ms with its copy; padding only the leading dimension of
 * the forward and the input gradient, whose N / K is the vocab itself, made
 * them slower (3.09 -> 3.40, 2.34 -> 2.85 ms), and f32 too (18.1 -> 21.0 ms
 * for the three), so f32 keeps its layout. The buffer is one per stream,
 * sized for the largest plan (launch list's gemm_pad), since a stream runs
 * its products in order. */
#ifdef RLX_HAVE_CUDA

#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "base/env.h"
#include "ir/dtype.h"

/* One operand copied between its own layout and a padded one: `cols`
 * runs of `rows` contiguous elements (the stored column-major matrix),
 * grown to rows_pad x cols_pad with zeros where N or K is rounded up. */
typedef struct pad_copy {
  int on;
  uint64_t off; /* in the padding buffer */
  int64_t ld, ld_pad; /* elements */
  uint64_t rows, cols, rows_pad, cols_pad;
} pad_copy;

enum { PAD_A, PAD_B, PAD_C }; /* column-major roles (see describe) */

struct rlx_cuda_mm_plan {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  CUdeviceptr a, b, c; /* a = our B, b = our A (column-major roles) */
  double alpha64, beta64;
  float alpha32, beta32;
  int f64, fused;
  int a_in_pad; /* operand a is at the padding buffer's start (a dequantized panel) */
  size_t es;
  pad_copy pad[3];
  uint64_t pad_bytes;
  char what[96]; /* "bf16 4096x768x2304 NT al16/16/16": RLX_CUDA_PROFILE=2's key */
  double flops;
};

typedef struct lt_operand {
  cublasOperation_t op;
  uint64_t rows, cols; /* as stored (column-major) */
  int64_t ld, bstride;
} lt_operand;

static int lt_type(rlx_dtype t, cudaDataType_t* out) {
  switch (t) {
    case RLX_F32: *out = CUDA_R_32F; return 1;
    case RLX_F16: *out = CUDA_R_16F; return 1;
    case RLX_BF16: *out = CUDA_R_16BF; return 1;
    case RLX_F64: *out = CUDA_R_64F; return 1;
    default: return 0;
  }
}

/* Column-major view of a row-major-addressed operand with element (i, j) at
 * i*rs + j*cs, used as an (r x c) matrix: op N if cs == 1 (stored c... ) */
static int describe(int64_t rows, int64_t cols, int64_t rs, int64_t cs, lt_operand* o) {
  /* Element (i, j) of the wanted (rows x cols) column-major operand sits at
   * i*rs + j*cs. Unit rs: stored as is, ld = cs. Unit cs: stored transposed. */
  if (rs == 1 || rows == 1) {
    o->op = CUBLAS_OP_N;
    o->rows = (uint64_t)rows;
    o->cols = (uint64_t)cols;
    o->ld = cols == 1 ? (rows > 0 ? rows : 1) : cs;
    return o->ld >= rows;
  }
  if (cs == 1 || cols == 1) {
    o->op = CUBLAS_OP_T;
    o->rows = (uint64_t)cols;
    o->cols = (uint64_t)rows;
    o->ld = rows == 1 ? (cols > 0 ? cols : 1) : rs;
    return o->ld >= cols;
  }
  return 0;
}

/* One stride for the whole batch, or -1 if the batch dims do not collapse. */
static int64_t batch_stride(const rlx_matmul_params* m, const int64_t* bs) {
  int64_t stride = -1, expect = 0;
  for (int32_t d = m->batch_rank - 1; d >= 0; d--) {
    if (m->batch_shape[d] == 1) continue;
    if (stride < 0) {
      stride = bs[d];
      expect = bs[d] * m->batch_shape[d];
      continue;
    }
    if (bs[d] != expect) return -1;
    expect = bs[d] * m->batch_shape[d];
  }
  return stride < 0 ? 0 : stride;
}

static uint32_t alignment_of(uint64_t addr, int64_t stride_bytes) {
  uint64_t x = addr | (uint64_t)stride_bytes | 256u;
  return (uint32_t)(x & (~x + 1u));
}

static int lt_ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

/* ---- timing the heuristic's candidates */

enum { MAX_CANDIDATES = 8, TIMED_REPS = 2, RANK_MEMO = 256 };

/* The winning candidate's rank per problem key, for this thread (compiles
 * run on the caller's thread; a missing entry only costs a timing). */
static _Thread_local struct {
  char key[128];
  int rank;
} t_memo[RANK_MEMO];
static _Thread_local int t_memo_n;

static int memo_find(const char* key) {
  for (int i = 0; i < t_memo_n; i++)
    if (strcmp(t_memo[i].key, key) == 0) return t_memo[i].rank;
  return -1;
}

static void memo_put(const char* key, int rank) {
  if (t_memo_n == RANK_MEMO) return;
  snprintf(t_memo[t_memo_n].key, sizeof t_memo[t_memo_n].key, "%s", key);
  t_memo[t_memo_n++].rank = rank;
}

/* The operands one product call reads and writes. */
typedef struct mm_ptrs {
  CUdeviceptr a, b, c;
} mm_ptrs;

static rlx_status run_with(const rlx_cuda_dev* d, const rlx_cuda_mm_plan* p,
                           const cublasLtMatmulAlgo_t* algo, mm_ptrs io, CUstream stream,
                           CUdeviceptr ws, size_t ws_bytes);

/* Milliseconds per call of candidate `algo` on io (< 0: it failed). */
static float time_candidate(const rlx_cuda_build* b, const rlx_cuda_mm_plan* p,
                            const cublasLtMatmulAlgo_t* algo, mm_ptrs io) {
  const rlx_cuda_dev* d = b->d;
  CUstream st = b->dnn_stream;
  CUevent e0 = NULL, e1 = NULL;
  float ms = -1.0f;
  int ok = run_with(d, p, algo, io, st, b->workspace, b->workspace_bytes) == RLX_OK &&
           d->cu.event_create(&e0, 0) == CUDA_SUCCESS && d->cu.event_create(&e1, 0) == CUDA_SUCCESS &&
           d->cu.event_record(e0, st) == CUDA_SUCCESS;
  for (int r = 0; ok && r < TIMED_REPS; r++)
    ok = run_with(d, p, algo, io, st, b->workspace, b->workspace_bytes) == RLX_OK;
  if (ok) ok = d->cu.event_record(e1, st) == CUDA_SUCCESS;
  if (ok) ok = d->cu.stream_synchronize(st) == CUDA_SUCCESS;
  if (ok && d->cu.event_elapsed_time(&ms, e0, e1) == CUDA_SUCCESS) ms /= TIMED_REPS;
  else ms = -1.0f;
  if (e0) d->cu.event_destroy(e0);
  if (e1) d->cu.event_destroy(e1);
  return ms;
}

/* The operands of a run whose padding buffer starts at pad. */
static mm_ptrs operands(const rlx_cuda_mm_plan* p, CUdeviceptr pad) {
  mm_ptrs io = {p->a, p->b, p->c};
  if (p->a_in_pad) io.a = pad;
  if (p->pad[PAD_A].on) io.a = pad + p->pad[PAD_A].off;
  if (p->pad[PAD_B].on) io.b = pad + p->pad[PAD_B].off;
  if (p->pad[PAD_C].on) io.c = pad + p->pad[PAD_C].off;
  return io;
}

/* Rank of the fastest of the n candidates (0 when timing is impossible:
 * no memory for the temporary output and padded operands, or no candidate
 * ran). The temporary holds the output (or, padded, the whole padding
 * buffer: the inputs' contents do not matter for timing). */
static int fastest_candidate(const rlx_cuda_build* b, const rlx_cuda_mm_plan* p,
                             const cublasLtMatmulHeuristicResult_t* res, int n, size_t c_bytes) {
  CUdeviceptr tmp = 0;
  size_t bytes = p->pad[PAD_C].on ? 0 : c_bytes;
  if (b->d->cu.mem_alloc(&tmp, bytes + (size_t)p->pad_bytes) != CUDA_SUCCESS) return 0;
  mm_ptrs io = operands(p, tmp + bytes);
  if (!p->pad[PAD_C].on) io.c = tmp;
  int best = 0;
  float best_ms = -1.0f;
  for (int i = 0; i < n; i++) {
    float ms = time_candidate(b, p, &res[i].algo, io);
    if (ms >= 0.0f && (best_ms < 0.0f || ms < best_ms)) {
      best = i;
      best_ms = ms;
    }
  }
  b->d->cu.mem_free(tmp);
  return best;
}

/* Copies of at least this many bytes per padded operand are worth it only
 * when the product does PAD_MIN_INTENSITY flops per byte copied (the LM
 * head: ~380). */
enum { PAD_MIN_BYTES = 1 << 20, PAD_MIN_INTENSITY = 64 };

static uint64_t round_up(uint64_t x, uint64_t unit) { return (x + unit - 1) / unit * unit; }

/* The stored size operand k (column-major role) takes when N and / or K
 * grow to multiples of unit: op(A) is N x K, op(B) K x M, C N x M. */
static void padded_extent(int k, const lt_operand* o, int pad_n, int pad_k, uint64_t unit,
                          uint64_t* rows, uint64_t* cols) {
  int first_n = k == PAD_C || (k == PAD_A && o->op == CUBLAS_OP_N); /* rows run along N */
  int first_k = (k == PAD_A && o->op != CUBLAS_OP_N) || (k == PAD_B && o->op == CUBLAS_OP_N);
  int second_k = (k == PAD_A && o->op == CUBLAS_OP_N) || (k == PAD_B && o->op != CUBLAS_OP_N);
  int second_n = k == PAD_A && o->op != CUBLAS_OP_N;
  *rows = o->rows;
  *cols = o->cols;
  if ((first_n && pad_n) || (first_k && pad_k)) *rows = round_up(*rows, unit);
  if ((second_n && pad_n) || (second_k && pad_k)) *cols = round_up(*cols, unit);
}

/* Marks the operands to pad and lays them out in the padding buffer (see
 * the top of the file for when that pays). */
static void plan_padding(rlx_cuda_mm_plan* p, lt_operand* ops[3], int64_t batch, double flops,
                         int64_t N, int64_t K, int has_bias) {
  uint64_t unit = 16 / p->es;
  if (batch > 1 || p->es != 2) return;
  int pad_n = N % (int64_t)unit != 0, pad_k = K % (int64_t)unit != 0;
  if (pad_n && has_bias) return; /* the bias epilogue would read N rounded up */
  double copied = 0.0;
  for (int k = 0; k < 3; k++) {
    lt_operand* o = ops[k];
    uint64_t rows, cols, bytes = o->rows * o->cols * p->es;
    padded_extent(k, o, pad_n, pad_k, unit, &rows, &cols);
    int grows = rows != o->rows || cols != o->cols;
    int unaligned = o->ld % (int64_t)unit != 0 && o->rows >= 2 && o->cols >= 2 && bytes >= PAD_MIN_BYTES;
    if (!grows && !unaligned) continue;
    pad_copy* c = &p->pad[k];
    c->on = 1;
    c->rows = o->rows;
    c->cols = o->cols;
    c->rows_pad = rows;
    c->cols_pad = cols;
    c->ld = o->ld;
    c->ld_pad = (int64_t)round_up(rows, unit);
    c->off = p->pad_bytes;
    p->pad_bytes += ((uint64_t)c->ld_pad * cols * p->es + 255u) & ~(uint64_t)255u;
    copied += 2.0 * (double)bytes;
  }
  if (copied == 0.0 || flops >= PAD_MIN_INTENSITY * copied) {
    for (int k = 0; k < 3; k++) {
      if (!p->pad[k].on) continue;
      ops[k]->rows = p->pad[k].rows_pad;
      ops[k]->cols = p->pad[k].cols_pad;
      ops[k]->ld = p->pad[k].ld_pad;
    }
    return;
  }
  memset(p->pad, 0, sizeof p->pad);
  p->pad_bytes = 0;
}

static rlx_status make_layout(const rlx_cuda_dev* d, cudaDataType_t t, const lt_operand* o,
                              int64_t batch, cublasLtMatrixLayout_t* out, rlx_error* err) {
  if (!lt_ok(d->lt.layout_create(out, t, o->rows, o->cols, o->ld)))
    return rlx_fail(err, RLX_INTERNAL, "cuda: cublasLtMatrixLayoutCreate failed");
  if (batch > 1) {
    int32_t count = (int32_t)batch;
    d->lt.layout_set(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    d->lt.layout_set(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &o->bstride,
                     sizeof o->bstride);
  }
  return RLX_OK;
}

void rlx_cuda_mm_plan_destroy(const rlx_cuda_dev* d, rlx_cuda_mm_plan* p) {
  if (!p) return;
  if (p->la) d->lt.layout_destroy(p->la);
  if (p->lb) d->lt.layout_destroy(p->lb);
  if (p->lc) d->lt.layout_destroy(p->lc);
  if (p->desc) d->lt.desc_destroy(p->desc);
  free(p);
}

int rlx_cuda_mm_plan_fused(const rlx_cuda_mm_plan* p) { return p->fused; }

uint64_t rlx_cuda_mm_plan_pad_bytes(const rlx_cuda_mm_plan* p) { return p->pad_bytes; }

const char* rlx_cuda_mm_plan_what(const rlx_cuda_mm_plan* p, double* flops) {
  *flops = p->flops;
  return p->what;
}

static int pick_epilogue(const rlx_matmul_params* m, int64_t batch, cublasLtEpilogue_t* out) {
  if (batch > 1) return 0;
  if (m->act == RLX_ACT_NONE) {
    *out = m->has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    return 1;
  }
  if (m->act == RLX_ACT_RELU) {
    *out = m->has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    return 1;
  }
  if (m->act == RLX_ACT_GELU_APPROX) {
    *out = m->has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    return 1;
  }
  return 0;
}

/* What plan_finish needs besides the plan's operands (p->a, p->b, p->c):
 * the column-major problem, its types and what the heuristic and the
 * timing see. */
typedef struct mm_problem {
  lt_operand A, B, C;
  cudaDataType_t ab_type, c_type;
  cublasComputeType_t compute;
  cublasLtEpilogue_t epi;
  CUdeviceptr bias; /* epilogue bias (0: none) */
  int64_t M, N, K, batch, sa, sb, sc;
  size_t c_es;      /* bytes of an output element */
  const char* tag;  /* dtype(s) for the plan's description */
  const char* note; /* appended to the description ("" or " +bias" ...) */
} mm_problem;

/* Describes, lays out and picks the algorithm of the problem pr into p
 * (whose operand pointers, es and padding are set). Returns RLX_OK with
 * *out NULL when cuBLASLt has no algorithm for it. */
static rlx_status plan_finish(const rlx_cuda_build* b, rlx_cuda_mm_plan* p, const mm_problem* pr,
                              rlx_cuda_mm_plan** out, rlx_error* err) {
  const rlx_cuda_dev* d = b->d;
  rlx_status st = RLX_OK;
  cudaDataType_t scale = p->f64 ? CUDA_R_64F : CUDA_R_32F;
  if (!lt_ok(d->lt.desc_create(&p->desc, pr->compute, scale))) {
    st = rlx_fail(err, RLX_INTERNAL, "cuda: cublasLtMatmulDescCreate failed");
    goto fail;
  }
  d->lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &pr->A.op, sizeof pr->A.op);
  d->lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &pr->B.op, sizeof pr->B.op);
  if (pr->epi != CUBLASLT_EPILOGUE_DEFAULT) {
    d->lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &pr->epi, sizeof pr->epi);
    if (pr->bias) {
      void* bias = (void*)(uintptr_t)pr->bias;
      d->lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    }
  }
  if ((st = make_layout(d, pr->ab_type, &pr->A, pr->batch, &p->la, err)) != RLX_OK) goto fail;
  if ((st = make_layout(d, pr->ab_type, &pr->B, pr->batch, &p->lb, err)) != RLX_OK) goto fail;
  if ((st = make_layout(d, pr->c_type, &pr->C, pr->batch, &p->lc, err)) != RLX_OK) goto fail;
  p->alpha64 = 1.0;
  p->alpha32 = 1.0f;

  cublasLtMatmulPreference_t pref = NULL;
  if (!lt_ok(d->lt.pref_create(&pref))) {
    st = rlx_fail(err, RLX_INTERNAL, "cuda: cublasLtMatmulPreferenceCreate failed");
    goto fail;
  }
  uint64_t ws = b->workspace_bytes;
  size_t es = p->es;
  /* padded operands sit at 256-byte multiples of the padding buffer */
  mm_ptrs at_pad = operands(p, 0);
  uint32_t al_a = alignment_of(at_pad.a, pr->sb * (int64_t)es),
           al_b = alignment_of(at_pad.b, pr->sa * (int64_t)es),
           al_c = alignment_of(at_pad.c, pr->sc * (int64_t)pr->c_es);
  d->lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  d->lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
  d->lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
  d->lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
  d->lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
  cublasLtMatmulHeuristicResult_t res[MAX_CANDIDATES];
  int found = 0;
  memset(res, 0, sizeof res);
  cublasStatus_t hs = d->lt.heuristic(d->lt_handle, p->desc, p->la, p->lb, p->lc, p->lc, pref,
                                      MAX_CANDIDATES, res, &found);
  d->lt.pref_destroy(pref);
  if (!lt_ok(hs) || found < 1) { /* not a cuBLASLt problem: the own kernel runs it */
    rlx_cuda_mm_plan_destroy(d, p);
    return RLX_OK;
  }
  p->algo = res[0].algo;
  /* column-major roles: op(A) is our B, op(B) our A (see describe) */
  snprintf(p->what, sizeof p->what, "%s %lldx%lldx%lld%s%s %c%c al%u/%u/%u%s%s", pr->tag,
           (long long)pr->M, (long long)pr->N, (long long)pr->K, pr->batch > 1 ? " batch " : "",
           pr->batch > 1 ? "n" : "", pr->B.op == CUBLAS_OP_N ? 'N' : 'T',
           pr->A.op == CUBLAS_OP_N ? 'N' : 'T', al_b, al_a, al_c, pr->note,
           p->pad_bytes && !p->a_in_pad ? " padded" : "");
  if (found > 1 && !rlx_env_flag(RLX_ENV_CUDA_GEMM_HEURISTIC)) {
    char key[128];
    snprintf(key, sizeof key, "%s|c%d|e%d|dev%d", p->what, (int)pr->compute, (int)pr->epi, (int)d->dev);
    int rank = memo_find(key);
    if (rank < 0) {
      int64_t ldc = (int64_t)pr->C.ld;
      size_t c_bytes = (size_t)((pr->batch - 1) * (pr->sc > 0 ? pr->sc : 0) +
                                (int64_t)(pr->C.cols - 1) * ldc + (int64_t)pr->C.rows) * pr->c_es;
      rank = fastest_candidate(b, p, res, found, c_bytes);
      memo_put(key, rank);
    }
    if (rank < found) p->algo = res[rank].algo;
  }
  *out = p;
  return RLX_OK;
fail:
  rlx_cuda_mm_plan_destroy(d, p);
  return st;
}

rlx_status rlx_cuda_mm_plan_create(const rlx_cuda_build* b, const rlx_step* s,
                                   rlx_cuda_mm_plan** out, rlx_error* err) {
  const rlx_matmul_params* m = &s->p.mm;
  *out = NULL;
  rlx_dtype at = s->in[0].dtype, ct = s->out[0].dtype;
  mm_problem pr;
  memset(&pr, 0, sizeof pr);
  if (at != s->in[1].dtype || at != ct || !lt_type(at, &pr.ab_type)) return RLX_OK;
  pr.c_type = pr.ab_type;
  pr.sa = batch_stride(m, m->a_bstride), pr.sb = batch_stride(m, m->b_bstride),
  pr.sc = batch_stride(m, m->c_bstride);
  if (pr.sa < 0 || pr.sb < 0 || pr.sc < 0) return RLX_OK;
  int64_t M = m->M, batch = m->batch;
  /* x[batch.., M, K] @ W[K, N]: fold the batch into M when A's rows run on. */
  if (batch > 1 && pr.sb == 0 && m->a_cs == 1 && pr.sa == M * m->a_rs && pr.sc == M * m->N) {
    M *= batch;
    batch = 1;
  }
  /* column-major roles: A = our B (N x K), B = our A (K x M) */
  if (!describe(m->N, m->K, m->b_cs, m->b_rs, &pr.A) || !describe(m->K, M, m->a_cs, m->a_rs, &pr.B))
    return RLX_OK;
  pr.C.op = CUBLAS_OP_N;
  pr.C.rows = (uint64_t)m->N;
  pr.C.cols = (uint64_t)M;
  pr.C.ld = m->N;
  pr.A.bstride = pr.sb;
  pr.B.bstride = pr.sa;
  pr.C.bstride = pr.sc;
  pr.M = M, pr.N = m->N, pr.K = m->K, pr.batch = batch;

  rlx_cuda_mm_plan* p = calloc(1, sizeof *p);
  RLX_CHECK_ALLOC(err, p);
  p->f64 = at == RLX_F64;
  p->es = rlx_dtype_size(at);
  pr.c_es = p->es;
  p->flops = 2.0 * (double)M * (double)m->N * (double)m->K * (double)batch;
  lt_operand* ops[3] = {&pr.A, &pr.B, &pr.C};
  plan_padding(p, ops, batch, p->flops, m->N, m->K, m->has_bias);
  pr.compute = p->f64 ? CUBLAS_COMPUTE_64F
               : (at == RLX_F32 && b->allow_tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                 : CUBLAS_COMPUTE_32F;
  pr.epi = CUBLASLT_EPILOGUE_DEFAULT;
  p->fused = pick_epilogue(m, batch, &pr.epi);
  if (!p->fused) pr.epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (p->fused && m->has_bias) pr.bias = b->arena + s->in[2].offset;
  pr.tag = rlx_dtype_name(at);
  pr.note = p->fused && m->has_bias ? " +bias" : "";
  p->a = b->arena + s->in[1].offset;
  p->b = b->arena + s->in[0].offset;
  p->c = b->arena + s->out[0].offset;
  return plan_finish(b, p, &pr, out, err);
}

rlx_status rlx_cuda_mm_plan_create_panel(const rlx_cuda_build* b, const rlx_cuda_panel_mm* q,
                                         rlx_cuda_mm_plan** out, rlx_error* err) {
  *out = NULL;
  mm_problem pr;
  memset(&pr, 0, sizeof pr);
  if (!lt_type(q->xdt, &pr.ab_type) || !lt_type(q->odt, &pr.c_type) || q->xdt == RLX_F64)
    return RLX_OK;
  /* y[m][n0 + j] = sum_k x[m][k] panel[j][k]: column-major y^T (rows x M,
   * ld N) = op(A) op(B) with A the panel (K x rows stored, transposed) and
   * B x (K x M stored) */
  pr.A.op = CUBLAS_OP_T, pr.A.rows = (uint64_t)q->K, pr.A.cols = (uint64_t)q->rows, pr.A.ld = q->K;
  pr.B.op = CUBLAS_OP_N, pr.B.rows = (uint64_t)q->K, pr.B.cols = (uint64_t)q->M, pr.B.ld = q->K;
  pr.C.op = CUBLAS_OP_N, pr.C.rows = (uint64_t)q->rows, pr.C.cols = (uint64_t)q->M, pr.C.ld = q->N;
  pr.M = q->M, pr.N = q->rows, pr.K = q->K, pr.batch = 1;
  pr.c_es = rlx_dtype_size(q->odt);
  pr.compute = q->xdt == RLX_F32 && b->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  pr.epi = CUBLASLT_EPILOGUE_DEFAULT;
  pr.tag = q->tag;
  pr.note = " panel";
  rlx_cuda_mm_plan* p = calloc(1, sizeof *p);
  RLX_CHECK_ALLOC(err, p);
  p->es = rlx_dtype_size(q->xdt);
  p->flops = 2.0 * (double)q->M * (double)q->rows * (double)q->K;
  p->a_in_pad = 1; /* the panel: at the start of the padding buffer */
  p->pad_bytes = ((uint64_t)q->rows * (uint64_t)q->K * p->es + 255u) & ~(uint64_t)255u;
  p->b = b->arena + q->xoff;
  p->c = b->arena + q->ooff;
  return plan_finish(b, p, &pr, out, err);
}

/* p's product with algorithm `algo` on io (p's operands, or timing buffers). */
static rlx_status run_with(const rlx_cuda_dev* d, const rlx_cuda_mm_plan* p,
                           const cublasLtMatmulAlgo_t* algo, mm_ptrs io, CUstream stream,
                           CUdeviceptr ws, size_t ws_bytes) {
  const void* alpha = p->f64 ? (const void*)&p->alpha64 : (const void*)&p->alpha32;
  const void* beta = p->f64 ? (const void*)&p->beta64 : (const void*)&p->beta32;
  void* cp = (void*)(uintptr_t)io.c;
  cublasStatus_t s = d->lt.matmul(d->lt_handle, p->desc, alpha, (const void*)(uintptr_t)io.a, p->la,
                                  (const void*)(uintptr_t)io.b, p->lb, beta, cp, p->lc, cp, p->lc,
                                  algo, (void*)(uintptr_t)ws, ws_bytes, (cudaStream_t)stream);
  return s == CUBLAS_STATUS_SUCCESS ? RLX_OK : RLX_INTERNAL;
}

/* Copies operand c's matrix from src (leading dimension src_ld) to dst. */
static CUresult copy_matrix(const rlx_cuda_dev* d, const rlx_cuda_mm_plan* p, const pad_copy* c,
                            CUdeviceptr dst, int64_t dst_ld, CUdeviceptr src, int64_t src_ld,
                            CUstream stream) {
  CUDA_MEMCPY2D m;
  memset(&m, 0, sizeof m);
  m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  m.srcDevice = src;
  m.srcPitch = (size_t)src_ld * p->es;
  m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  m.dstDevice = dst;
  m.dstPitch = (size_t)dst_ld * p->es;
  m.WidthInBytes = (size_t)c->rows * p->es;
  m.Height = (size_t)c->cols;
  return d->cu.memcpy_2d_async(&m, stream);
}

/* Input c copied into its padded layout at dst, the rows and columns it
 * grew by zeroed (the buffer is shared, so every run). Half types only. */
static rlx_status pad_input(const rlx_cuda_dev* d, const rlx_cuda_mm_plan* p, const pad_copy* c,
                            CUdeviceptr dst, CUdeviceptr src, CUstream stream, rlx_error* err) {
  size_t pitch = (size_t)c->ld_pad * p->es;
  RLX_CU(d, err, "cuMemcpy2DAsync(GEMM operand padding)",
         copy_matrix(d, p, c, dst, c->ld_pad, src, c->ld, stream));
  if (c->rows_pad > c->rows)
    RLX_CU(d, err, "cuMemsetD2D16Async(GEMM operand padding)",
           d->cu.memset_d2d16_async(dst + c->rows * p->es, pitch, 0, (size_t)(c->rows_pad - c->rows),
                                    (size_t)c->cols, stream));
  if (c->cols_pad > c->cols)
    RLX_CU(d, err, "cuMemsetD2D16Async(GEMM operand padding)",
           d->cu.memset_d2d16_async(dst + c->cols * pitch, pitch, 0, (size_t)c->rows_pad,
                                    (size_t)(c->cols_pad - c->cols), stream));
  return RLX_OK;
}

rlx_status rlx_cuda_mm_plan_run(const rlx_cuda_dev* d, const rlx_cuda_mm_plan* p, CUstream stream,
                                CUdeviceptr workspace, size_t workspace_bytes, CUdeviceptr pad,
                                rlx_error* err) {
  mm_ptrs io = operands(p, pad);
  const CUdeviceptr own[3] = {p->a, p->b, p->c}, padded[3] = {io.a, io.b, io.c};
  for (int k = PAD_A; k <= PAD_B; k++) {
    const pad_copy* c = &p->pad[k];
    if (c->on) RLX_RETURN_IF_ERROR(pad_input(d, p, c, padded[k], own[k], stream, err));
  }
  if (run_with(d, p, &p->algo, io, stream, workspace, workspace_bytes) != RLX_OK)
    return rlx_fail(err, RLX_INTERNAL, "cuda: cublasLtMatmul failed");
  const pad_copy* c = &p->pad[PAD_C];
  if (c->on)
    RLX_CU(d, err, "cuMemcpy2DAsync(GEMM output padding)",
           copy_matrix(d, p, c, own[PAD_C], c->ld, padded[PAD_C], c->ld_pad, stream));
  return RLX_OK;
}

#else
typedef int rlx_cuda_matmul_unused_;
#endif
