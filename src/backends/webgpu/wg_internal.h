/* WebGPU backend internals: the process-wide Dawn context (library, device,
 * limits, features, pipelines), the step encoder and the WGSL sources. Only
 * webgpu.c / wg_*.c include this. */
#ifndef RLX_BACKENDS_WEBGPU_WG_INTERNAL_H
#define RLX_BACKENDS_WEBGPU_WG_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/webgpu/webgpu_api.h"
#include "runtime/backend.h"

/* ------------------------------------------------------------ record layout */

/* One step's parameter record: RLX_WG_REC_WORDS u32 words at a 1 KiB-aligned
 * offset of the parameter buffer, bound with a dynamic offset. The same names
 * become WGSL constants (rlx_wg_constants_wgsl), so host and kernels cannot
 * disagree. Views: [offset bytes, dtype, rank, shape[8], stride[8]]; slots
 * 0 out0, 1 out1, 2.. in0..in4. Kind words start at R_X. */
#define RLX_WG_REC_WORDS 256
#define RLX_WG_VIEW_WORDS 19

#define RLX_WG_U32_CONSTS(X)                                                                   \
  X(R_KIND, 0) X(R_OP, 1) X(R_COUNT, 2) X(R_STEP, 3) X(R_GROUPS_X, 4) X(R_INF, 5) X(R_NAN, 6) \
  X(R_VIEW0, 8) X(R_VIEW_WORDS, RLX_WG_VIEW_WORDS) X(R_X, 144)                                  \
  X(DT_F32, 0) X(DT_F16, 1) X(DT_BF16, 2) X(DT_F64, 3) X(DT_I8, 4) X(DT_U8, 5) X(DT_I32, 6)     \
  X(DT_I64, 7) X(DT_BOOL, 8)                                                                    \
  X(K_COPY, 0) X(K_BINARY, 1) X(K_COMPARE, 2) X(K_WHERE, 3) X(K_UNARY, 4)                       \
  X(RED_SUM, 0) X(RED_MEAN, 1) X(RED_MAX, 2) X(RED_MIN, 3) X(RED_PROD, 4)                       \
  X(RUN_SEED_LO, 0) X(RUN_SEED_HI, 1) X(RUN_ERR, 2) X(RUN_ERR_STEP, 3) X(RUN_ERR_LO, 4)         \
  X(RUN_ERR_HI, 5) X(RUN_ERR_LEN, 6)                                                            \
  X(MM_M, 0) X(MM_N, 1) X(MM_K, 2) X(MM_BATCH, 3) X(MM_BRANK, 4) X(MM_BSHAPE, 5) X(MM_ABS, 13)  \
  X(MM_BBS, 21) X(MM_CBS, 29) X(MM_ARS, 37) X(MM_ACS, 38) X(MM_BRS, 39) X(MM_BCS, 40)           \
  X(MM_CRS, 41) X(MM_HAS_BIAS, 42) X(MM_ACT, 43) X(MM_FAST_A, 44) X(MM_FAST_B, 45)              \
  X(MM_PAIR_OUT, 46)                                                                            \
  X(EV_MODE, 0) X(EV_PERIOD, 5) X(EV_VECS, 10)                                                  \
  X(RD_NKEEP, 0) X(RD_NRED, 1) X(RD_OUTER, 2) X(RD_INNER, 3)                                    \
  X(RW_OUTER, 0) X(RW_N, 1) X(RW_INNER, 2) X(RW_EXCLUSIVE, 3) X(RW_REVERSE, 4) X(RW_K, 5)       \
  X(RW_LARGEST, 6)                                                                              \
  X(GA_OUTER, 0) X(GA_AXIS_LEN, 1) X(GA_INNER, 2) X(GA_NIDX, 3)                                 \
  X(SC_RANK, 0) X(SC_AXIS, 1) X(SC_SHAPE, 2) X(SC_OSTRIDE, 10) X(SC_AXIS_LEN, 18)               \
  X(NM_ROWS, 0) X(NM_COLS, 1) X(NM_EPS, 2) X(NM_RMS, 3) X(NM_HAS_RES, 4) X(NM_HAS_BIAS, 5)      \
  X(NM_HAS_GAMMA, 6) X(NM_HAS_BETA, 7) X(NM_WRITES_SUM, 8)                                      \
  X(AT_B, 0) X(AT_H, 1) X(AT_HKV, 2) X(AT_SQ, 3) X(AT_SK, 4) X(AT_D, 5) X(AT_DV, 6) X(AT_Q, 7)  \
  X(AT_K, 10) X(AT_V, 13) X(AT_O, 16) X(AT_M, 19) X(AT_MASK, 23) X(AT_WINDOW, 24)               \
  X(AT_SCALE, 25) X(AT_SOFTCAP, 26) X(AT_PAIR_OUT, 27) X(AT_FAST_KV, 28)                        \
  X(RP_B, 0) X(RP_S, 1) X(RP_H, 2) X(RP_D, 3) X(RP_X, 4) X(RP_O, 7) X(RP_NROT, 10)              \
  X(RP_STYLE, 11) X(RP_PER_TOKEN, 12)                                                           \
  X(SM_ROWS, 0) X(SM_VOCAB, 1) X(SM_TOPK, 2) X(SM_TOPP, 3) X(SM_TEMP, 4)

/* Constants compared with signed record words. */
#define RLX_WG_I32_CONSTS(X) \
  X(MASK_CAUSAL, 1) X(MASK_CUSTOM, 2) X(MASK_SLIDING, 3) X(MASK_BIAS, 4) X(ROPE_GPTJ, 1)

enum {
#define RLX_WG_ENUM(name, value) WG_##name = (value),
  RLX_WG_U32_CONSTS(RLX_WG_ENUM) RLX_WG_I32_CONSTS(RLX_WG_ENUM)
#undef RLX_WG_ENUM
};

#define RLX_WG_RUN_WORDS 8

/* ------------------------------------------------------------ kernels */

typedef enum rlx_wg_kernel {
  RLX_WG_ELTWISE,
  RLX_WG_MATMUL,
  RLX_WG_REDUCE,
  RLX_WG_SOFTMAX,
  RLX_WG_ARG,
  RLX_WG_CUMSUM,
  RLX_WG_TOPK,
  RLX_WG_GATHER,
  RLX_WG_SCATTER,
  RLX_WG_NORM,
  RLX_WG_ATTENTION,
  RLX_WG_ROPE,
  /* fast paths chosen at encode time (vec4 arena view, wider workgroups) */
  RLX_WG_ELTWISE_VEC, /* dense f32 elementwise, 4 elements per access */
  RLX_WG_MATMUL_TILED, /* 128x128 register-blocked tiles, 8x8 per invocation */
  RLX_WG_SOFTMAX_ROW, /* contiguous f32 rows cached in registers */
  RLX_WG_NORM_ROW,
  RLX_WG_SOFTMAX_ROW_LONG, /* the same for rows of 4097..8192 elements */
  RLX_WG_NORM_ROW_LONG,
  RLX_WG_ATTN_FLASH, /* query-row blocks, K/V tiles in workgroup memory */
  RLX_WG_GEMV,       /* M <= 4 rows, f32, vec4 weight loads, split-K */
  RLX_WG_MATMUL_TILED_F32, /* the same for f32 with quad loads of A and B */
  RLX_WG_ATTN_FLASH128,    /* RLX_WG_ATTN_FLASH for head dims 65..128 */
  RLX_WG_KERNEL_COUNT
} rlx_wg_kernel;

/* WGSL sources embedded at build time (wg_shaders.c, generated by
 * embed_wgsl.cmake): rlx_wg_src_<file stem>. */
extern const char rlx_wg_src_common[];
extern const char rlx_wg_src_eltwise[];
extern const char rlx_wg_src_matmul[];
extern const char rlx_wg_src_reduce[];
extern const char rlx_wg_src_rows[];
extern const char rlx_wg_src_index[];
extern const char rlx_wg_src_norm[];
extern const char rlx_wg_src_attention[];
extern const char rlx_wg_src_rope[];
extern const char rlx_wg_src_fast[];
extern const char rlx_wg_src_mmtile[];
extern const char rlx_wg_src_flash[];
extern const char rlx_wg_src_gemv[];

/* ------------------------------------------------------------ context */

typedef struct rlx_wg_context {
  rlx_wgpu_fns f;
  void* lib;
  WGPUInstance instance;
  WGPUAdapter adapter;
  WGPUDevice device;
  WGPUQueue queue;
  WGPULimits limits;
  char adapter_name[160];
  int has_f16, has_subgroups; /* offered by the adapter (and requested) */
  int use_f16, use_subgroups; /* used by the kernels: unless RLX_WG_NO_F16 /
                                 RLX_WG_NO_SUBGROUPS force the fallbacks */
  uint32_t subgroup_min, subgroup_max;
  int cpu_adapter;       /* a CPU implementation (lavapipe) */
  int spin_waits;        /* poll GPU futures before blocking: not on a CPU adapter
                            (lavapipe) nor with RLX_WG_WAIT=block */
  char toggles[160];     /* Dawn device toggles enabled, comma-separated ("" none) */
  uint64_t max_binding;   /* arena window size: limit, or RLX_WG_MAX_BINDING */
  uint32_t offset_align;  /* minStorageBufferOffsetAlignment */
  WGPUBindGroupLayout bgl;
  WGPUPipelineLayout layout;
  /* [kernel][atomic arena view] created on first use */
  WGPUComputePipeline pipes[RLX_WG_KERNEL_COUNT][2];
  pthread_mutex_t lock; /* pipes[] and every device/queue call */
} rlx_wg_context;

/* The process-wide context, created on first call (thread-safe). NULL and
 * the reason (kept for later calls) when the library or an adapter is
 * missing. */
rlx_wg_context* rlx_wg_context_get(char* reason, size_t cap);
/* Pipeline of kernel k (atomic: the arena seen as atomic words, for steps
 * that store sub-word elements). Caller holds c->lock. */
rlx_status rlx_wg_pipeline(rlx_wg_context* c, rlx_wg_kernel k, int atomic, rlx_error* err,
                           WGPUComputePipeline* out);
/* Error scopes around a group of calls: push, then pop and fail with the
 * first validation / out-of-memory message naming `what`. */
void rlx_wg_scope_push(rlx_wg_context* c);
rlx_status rlx_wg_scope_pop(rlx_wg_context* c, rlx_error* err, const char* what);
/* Waits for a future (WaitAny, no timeout). */
rlx_status rlx_wg_wait(rlx_wg_context* c, WGPUFuture fut, rlx_error* err, const char* what);
/* The same for a future that completes with GPU work: with spin_waits it
 * polls for up to 2 ms before blocking (a blocking wait adds the driver's
 * wake-up latency to every synchronous run). */
rlx_status rlx_wg_wait_gpu(rlx_wg_context* c, WGPUFuture fut, rlx_error* err, const char* what);
/* Creates a buffer; NULL with a message on failure. */
rlx_status rlx_wg_buffer(rlx_wg_context* c, uint64_t size, WGPUFlags usage, rlx_error* err,
                         const char* what, WGPUBuffer* out);
/* Maps `buf` for reading, copies [0, bytes) to dst, unmaps. */
rlx_status rlx_wg_map_read(rlx_wg_context* c, WGPUBuffer buf, void* dst, uint64_t bytes,
                           rlx_error* err);

/* ------------------------------------------------------------ step encoding */

typedef struct rlx_wg_dispatch {
  rlx_wg_kernel kernel;
  int atomic;                  /* stores sub-word elements: atomic arena view */
  uint32_t groups_x, groups_y; /* 0: nothing to dispatch */
} rlx_wg_dispatch;

/* Encodes step `index` into its record with view offsets relative to
 * `base` (the byte offset its arena window starts at) and picks its kernel
 * and grid. 0 if the GPU runs it, 1 if it goes to the host fallback. */
int rlx_wg_encode_step(const rlx_step* s, int32_t index, uint64_t base, uint64_t window,
                       uint32_t max_groups, uint32_t* words, rlx_wg_dispatch* out);
int rlx_wg_supports_node(const rlx_graph* g, int32_t ni);

#endif
