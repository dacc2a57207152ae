/* CPU backend internals: the reference kernels (the oracle every backend is
 * tested against) and the fast paths (threaded / SIMD / BLAS), each fast
 * path tested against the reference. */
#ifndef RLX_BACKENDS_CPU_H
#define RLX_BACKENDS_CPU_H

#include "runtime/backend.h"

/* Reference kernels: obviously correct, f64 accumulation for reductions,
 * matmul, norms and attention. `arena` is the base of the arena; views in the
 * step are offsets into it. Run-time input errors (an index out of range)
 * return RLX_OUT_OF_RANGE with a message naming the step's node. */
rlx_status rlx_ref_run_step(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                            rlx_error* err);

/* Per family (ref.c: COPY, BINARY, COMPARE, WHERE, UNARY, REDUCE, ARG_REDUCE,
 * SOFTMAX, CUMSUM, TOPK, GATHER, SCATTER_ADD; ref_nn.c: MATMUL, NORM,
 * ATTENTION, ROPE, SAMPLE). */
rlx_status rlx_ref_basic(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                         rlx_error* err);
rlx_status rlx_ref_nn(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                      rlx_error* err);
/* AttentionBackward phases (ref_attn_bwd.c). */
rlx_status rlx_ref_attention_bwd(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                 rlx_error* err);
/* ref_rows_backward.c: NORM_BWD, SOFTMAX_BWD. */
rlx_status rlx_ref_rows_backward(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                 rlx_error* err);
/* ref_train.c: XENT, GATHER_BACKWARD, OPT_UPDATE. */
rlx_status rlx_ref_train(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                         rlx_error* err);
/* ref_vision_bwd.c: CONV_WGRAD, POOL_BACKWARD. */
rlx_status rlx_ref_vision_bwd(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                              rlx_error* err);

/* ref_quant.c: DEQUANT_MATMUL. */
rlx_status rlx_ref_quant(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                         rlx_error* err);

/* ref_grouped.c: GROUPED_MATMUL (float and quantized experts). */
rlx_status rlx_ref_grouped(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                           rlx_error* err);
/* Stored rows [row0, row0 + n_rows) of expert e of a quantized grouped
 * matmul, dequantized into out (n_rows x the stored row's elements). */
void rlx_gmm_dequant_rows(const uint8_t* arena, const rlx_step* s, int64_t e, int64_t row0,
                          int64_t n_rows, float* out);

/* Scalar semantics shared with the fast paths (so both agree exactly on what
 * an op means). */
double rlx_ref_activation(int act, double x);
double rlx_ref_binary(int op, double a, double b);

/* Deterministic per-run random numbers for Sample: a counter-based generator
 * (splitmix64 of seed and counter) so every backend can reproduce it. Returns
 * a uniform double in [0, 1). */
double rlx_rand_uniform(uint64_t seed, uint64_t counter);

/* ---- fast paths (fast.c, gemm.c, threads.c) */

typedef struct rlx_cpu_pool rlx_cpu_pool;
/* threads = 0: one per core. */
rlx_status rlx_cpu_pool_create(int threads, rlx_cpu_pool** out);
void rlx_cpu_pool_destroy(rlx_cpu_pool* p);
int rlx_cpu_pool_threads(const rlx_cpu_pool* p);
/* Runs fn(ctx, begin, end) over [0, n) split into chunks of at least `grain`
 * across the pool; returns when all are done. */
void rlx_cpu_parallel_for(rlx_cpu_pool* p, int64_t n, int64_t grain,
                          void (*fn)(void* ctx, int64_t begin, int64_t end), void* ctx);

/* A Q4_0 / Q8_0 DequantMatMul's W the CPU backend stores rows-interleaved
 * in place (repack.c: the layout, when and which). */
typedef struct rlx_cpu_packed {
  uint64_t offset; /* W's first byte in the arena */
  int64_t N, row_bytes;
  int32_t scheme;  /* RLX_QUANT_Q4_0 or RLX_QUANT_Q8_0 */
  int packed;      /* 1: its full groups of 8 rows are interleaved now */
} rlx_cpu_packed;

typedef struct rlx_cpu_fast {
  rlx_cpu_pool* pool;
  int use_blas; /* resolved: 1 if OpenBLAS sgemm is loaded and chosen */
  rlx_cpu_packed* packed; /* the W the backend may interleave (NULL: none) */
  int32_t n_packed;
  uint8_t* pack_tmp; /* rlx_cpu_repack_tmp_bytes: so converting never allocates */
} rlx_cpu_fast;

/* ---- rows-interleaved Q4_0 / Q8_0 weights (repack.c) */
/* 1 when this CPU has the packed kernel (AVX-512 VNNI) and it is not
 * switched off (RLX_CPU_SIMD below avx512, RLX_CPU_NO_REPACK). */
int rlx_cpu_repack_available(void);
/* The W of `steps` that may be stored interleaved (plain for now);
 * *out NULL when none. RLX_RESOURCE_EXHAUSTED without memory. */
rlx_status rlx_cpu_repack_plan(const rlx_step_list* steps, rlx_cpu_packed** out, int32_t* out_n);
/* 1 when a step of `steps` touches r other than as its packable W. */
int rlx_cpu_repack_conflicts(const rlx_cpu_packed* r, const rlx_step_list* steps);
/* Bytes of the buffer the conversions below use (8 rows of the widest W). */
uint64_t rlx_cpu_repack_tmp_bytes(const rlx_cpu_packed* rs, int32_t n);
/* Stores r interleaved (pack 1) or plain (0), in place, through tmp. */
void rlx_cpu_repack_set(uint8_t* arena, rlx_cpu_packed* r, int pack, uint8_t* tmp);
/* Stores plain every packed W of rs[0 .. n) overlapping bytes [begin, end). */
void rlx_cpu_repack_unpack_range(uint8_t* arena, rlx_cpu_packed* rs, int32_t n, uint64_t begin,
                                 uint64_t end, uint8_t* tmp);
/* The packed W at `offset`, or NULL when W there is plain. */
rlx_cpu_packed* rlx_cpu_packed_w(const rlx_cpu_fast* f, uint64_t offset);

/* Runs the step with a fast path if one applies (returns 1), else returns 0
 * and the caller uses the reference. */
int rlx_cpu_fast_step(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);
/* Conv (im2col + GEMM) and ConvTranspose (GEMM + col2im) in f32
 * (fast_conv.c); 0 declines. */
int rlx_cpu_fast_conv(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);
/* Conv weight gradient (RLX_K_CONV_WGRAD, f32): per image and group the
 * im2col columns times dy in one GEMM, summed over images (fast_conv.c). */
int rlx_cpu_fast_conv_wgrad(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);
/* AttentionBackward's phases in f32, threaded (fast_attn_bwd.c); 0 declines. */
int rlx_cpu_fast_attention_bwd(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);
/* NORM_BWD and SOFTMAX_BWD in f32 (fast_rows_backward.c); 0 declines. */
int rlx_cpu_fast_rows_backward(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);
/* Where with a cond constant over the inner dims (row masks: rows kept in
 * place are not touched) and Gather, as block copies of any dtype
 * (fast_select.c); 0 declines. */
int rlx_cpu_fast_where(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);
int rlx_cpu_fast_gather(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);
/* SGD / Adam updates with f32 operands, threaded (fast_train.c); 0 declines. */
int rlx_cpu_fast_opt_update(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);
/* PoolBackward, f32 channels first: planes scattered window by window
 * (fast_pool_bwd.c); 0 declines. */
int rlx_cpu_fast_pool_backward(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);

/* DequantMatMul with f32 / f16 / bf16 x (fast_quant.c): threaded over W's
 * rows, each row's groups dequantized into a thread's buffer (never all of
 * W); fused block dots for Q8_0, Q4_0, Q4_K and Q6_K. 0 declines. */
int rlx_cpu_fast_dequant_matmul(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);

/* GroupedMatMul with f32 x and y (fast_grouped.c): rows sorted by expert,
 * each expert's rows gathered and multiplied by its W in one SGEMM
 * (quantized W dequantized a tile of rows at a time). 0 declines. */
int rlx_cpu_fast_grouped_matmul(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s);

/* Row-major f32 GEMM, C[M,N] = A[M,K]·B[K,N] with leading dims and either
 * operand possibly transposed (a_trans: A stored [K,M]). Blocked, SIMD,
 * threaded. */
void rlx_cpu_sgemm(rlx_cpu_pool* p, int a_trans, int b_trans, int64_t M, int64_t N, int64_t K,
                   const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                   int64_t ldc);
/* SIMD level of the fast paths, fixed at first use: 2 = AVX-512, 1 = AVX2 +
 * FMA, 0 = portable code. RLX_CPU_SIMD=avx2|none in the environment lowers
 * it (to test every level on one machine); it never rises above the CPU's. */
int rlx_cpu_simd_level(void);
/* The blocked GEMM's choices, for the kernel lab (bench/kernels/gemm.c):
 * the register-tile kernel by SIMD level and the cache blocks (rows of A,
 * depth, columns of B per packed panel). */
typedef struct rlx_cpu_gemm_blocking {
  int simd;
  int64_t mc, kc, nc;
} rlx_cpu_gemm_blocking;
/* What rlx_cpu_sgemm uses on this CPU. */
rlx_cpu_gemm_blocking rlx_cpu_gemm_default_blocking(void);
/* rlx_cpu_sgemm with another blocking (mc, nc rounded up to whole register
 * tiles; at most 4 rows or columns take the unblocked path as there).
 * Returns 0, computing nothing, when the CPU or build lacks the SIMD level
 * or a block is not positive. */
int rlx_cpu_sgemm_blocked(rlx_cpu_pool* p, const rlx_cpu_gemm_blocking* blk, int a_trans,
                          int b_trans, int64_t M, int64_t N, int64_t K, const float* A,
                          int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc);
/* OpenBLAS cblas_sgemm loaded with dlopen; 0 if not present. */
int rlx_cpu_blas_available(void);
void rlx_cpu_blas_sgemm(int a_trans, int b_trans, int64_t M, int64_t N, int64_t K,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                        int64_t ldc);

#endif
