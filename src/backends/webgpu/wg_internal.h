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

#include "backends/webgpu/wg_layout.h"

/* ------------------------------------------------------------ kernels */

/* Every WGSL kernel: enum tag, source file (shaders/<src>.wgsl), entry
 * point, whether it sees the arena as vec4 words (the fast paths), and WGSL
 * constants prepended to select a variant of one source. The generic kernel
 * of each kind comes first; the fast paths are chosen at encode time. */
#define RLX_WG_ROW4 "const ROW_CACHE: u32 = 4u;\n" /* vec4 slots per invocation */
#define RLX_WG_ROW8 "const ROW_CACHE: u32 = 8u;\n"
#define RLX_WG_KERNELS(X)                                                                     \
  X(ELTWISE, eltwise, "main", 0, "") X(MATMUL, matmul, "main", 0, "")                          \
  X(REDUCE, reduce, "main", 0, "") X(SOFTMAX, rows, "softmax_main", 0, "")                     \
  X(ARG, rows, "arg_main", 0, "") X(CUMSUM, rows, "cumsum_main", 0, "")                        \
  X(TOPK, rows, "topk_main", 0, "") X(GATHER, index, "gather_main", 0, "")                     \
  X(SCATTER, index, "scatter_main", 0, "") X(NORM, norm, "main", 0, "")                        \
  X(ATTENTION, attention, "main", 0, "") X(ROPE, rope, "main", 0, "")                          \
  X(POOL, pool, "main", 0, "") X(RESIZE, resize, "main", 0, "")                                \
  X(SAMPLER, sampler, "main", 0, "") X(GNORM, gnorm, "main", 0, "")                            \
  /* dense f32 elementwise, 4 elements per access (fast.wgsl declares the row */               \
  /* kernels too: they need their constant) */                                                 \
  X(ELTWISE_VEC, fast, "eltwise_vec_main", 1, RLX_WG_ROW8)                                     \
  /* 128x128 register-blocked tiles, 8x8 per invocation */                                     \
  X(MATMUL_TILED, mmtile, "main", 1, "const MM_F32 = false;\n")                                \
  /* contiguous f32 rows cached in registers. Four vec4 per invocation for */                  \
  /* rows up to 4096 elements: on the H100 (2026-11-23) 8-slot arrays on */                    \
  /* such rows cost 7-10% (softmax 0.322 -> 0.302 ms, layernorm */                             \
  /* 0.294 -> 0.264 ms at 16384x4096). */                                                      \
  X(SOFTMAX_ROW, fast, "softmax_row_main", 1, RLX_WG_ROW4)                                     \
  X(NORM_ROW, fast, "norm_row_main", 1, RLX_WG_ROW4)                                           \
  /* the same for rows of 4097..8192 elements */                                               \
  X(SOFTMAX_ROW_LONG, fast, "softmax_row_main", 1, RLX_WG_ROW8)                                \
  X(NORM_ROW_LONG, fast, "norm_row_main", 1, RLX_WG_ROW8)                                      \
  /* query-row blocks, K/V tiles in workgroup memory */                                        \
  X(ATTN_FLASH, flash, "main", 1, "const FL_D4: u32 = 16u;\n")                                 \
  /* M <= 4 rows, f32, vec4 weight loads, split-K */                                           \
  X(GEMV, gemv, "main", 1, "")                                                                 \
  /* the tiled matmul for f32 with quad loads of A and B */                                    \
  X(MATMUL_TILED_F32, mmtile, "main_f32", 1, "const MM_F32 = true;\n")                         \
  /* RLX_WG_ATTN_FLASH for head dims 65..128 */                                                \
  X(ATTN_FLASH128, flash, "main", 1, "const FL_D4: u32 = 32u;\n")                              \
  /* Conv: one output element per invocation (depthwise; the generic kernel) */               \
  X(CONV, conv, "main", 0, "")                                                                 \
  /* Conv as an implicit GEMM, 64x64 tiles (keeps the atomic arena: any output dtype) */      \
  X(CONV_TILED, conv, "tiled_main", 0, "")                                                     \
  /* PoolBackward: one dx element per invocation */                                            \
  X(POOL_BWD, pool_bwd, "main", 0, "")                                                         \
  /* AttentionBackward, every phase (the generic kernel of its kind) */                        \
  X(ATTENTION_BWD, attention_bwd, "main", 0, "")                                               \
  /* norm / softmax backward rows (the generic kernels of NORM_BWD, SOFTMAX_BWD) */            \
  X(NORM_BWD, rows_bwd, "norm_bwd_main", 0, "")                                                \
  X(SOFTMAX_BWD, rows_bwd, "softmax_bwd_main", 0, "")                                          \
  /* training: cross-entropy rows / mean / backward, gather backward, updates */               \
  X(XENT, train, "xent_main", 0, "") X(GATHER_BWD, train, "gather_bwd_main", 0, "")            \
  X(OPT_UPDATE, train, "opt_main", 0, "")                                                     \
  /* MoE: GroupedMatMul with float experts */                                                  \
  X(GROUPED_MATMUL, grouped, "main", 0, "")                                                  \
  /* DequantMatMul: decode GEMV (the kind's generic kernel), prefill tiles, */                \
  /* the transposed (gradient) role */                                                         \
  X(DQ_GEMV, dequant, "gemv_main", 0, "") X(DQ_TILE, dequant, "tile_main", 0, "")              \
  X(DQ_T, dequant, "t_main", 0, "")                                                          \
  /* DequantGroupedMatMul (quantized experts): decode GEMV, prefill tiles, both roles */       \
  X(GQ_GEMV, grouped_dequant, "gemv_main", 0, "")                                              \
  X(GQ_TILE, grouped_dequant, "tile_main", 0, "")

typedef enum rlx_wg_kernel {
#define RLX_WG_KERNEL_ENUM(e, src, entry, vec4, defines) RLX_WG_##e,
  RLX_WG_KERNELS(RLX_WG_KERNEL_ENUM)
#undef RLX_WG_KERNEL_ENUM
  RLX_WG_KERNEL_COUNT
} rlx_wg_kernel;

/* Generic kernel of each kernel kind (src/backends/kernels.def), expanded
 * into wg_encode.c's per-kind table: a kind without a row here does not
 * compile. RLX_WG_KERNEL_COUNT = no kernel: the host fallback runs it. */
#define RLX_WG_KIND_COPY RLX_WG_ELTWISE
#define RLX_WG_KIND_BINARY RLX_WG_ELTWISE
#define RLX_WG_KIND_COMPARE RLX_WG_ELTWISE
#define RLX_WG_KIND_WHERE RLX_WG_ELTWISE
#define RLX_WG_KIND_UNARY RLX_WG_ELTWISE
#define RLX_WG_KIND_MATMUL RLX_WG_MATMUL
#define RLX_WG_KIND_REDUCE RLX_WG_REDUCE
#define RLX_WG_KIND_ARG_REDUCE RLX_WG_ARG
#define RLX_WG_KIND_SOFTMAX RLX_WG_SOFTMAX
#define RLX_WG_KIND_CUMSUM RLX_WG_CUMSUM
#define RLX_WG_KIND_TOPK RLX_WG_TOPK
#define RLX_WG_KIND_GATHER RLX_WG_GATHER
#define RLX_WG_KIND_SCATTER_ADD RLX_WG_SCATTER
#define RLX_WG_KIND_NORM RLX_WG_NORM
#define RLX_WG_KIND_ATTENTION RLX_WG_ATTENTION
#define RLX_WG_KIND_ROPE RLX_WG_ROPE
#define RLX_WG_KIND_SAMPLE RLX_WG_KERNEL_COUNT /* no sampling kernel */
#define RLX_WG_KIND_POOL RLX_WG_POOL
#define RLX_WG_KIND_RESIZE RLX_WG_RESIZE
#define RLX_WG_KIND_SAMPLER RLX_WG_SAMPLER
#define RLX_WG_KIND_CONV RLX_WG_CONV
#define RLX_WG_KIND_GROUP_NORM RLX_WG_GNORM
#define RLX_WG_KIND_CONV_WGRAD RLX_WG_KERNEL_COUNT /* decomposed (rlx_shader_supports_node) */
#define RLX_WG_KIND_POOL_BACKWARD RLX_WG_POOL_BWD
#define RLX_WG_KIND_HOST RLX_WG_KERNEL_COUNT
#define RLX_WG_KIND_ATTENTION_BWD RLX_WG_ATTENTION_BWD
#define RLX_WG_KIND_NORM_BWD RLX_WG_NORM_BWD
#define RLX_WG_KIND_SOFTMAX_BWD RLX_WG_SOFTMAX_BWD
#define RLX_WG_KIND_XENT RLX_WG_XENT
#define RLX_WG_KIND_GATHER_BACKWARD RLX_WG_GATHER_BWD
#define RLX_WG_KIND_OPT_UPDATE RLX_WG_OPT_UPDATE
#define RLX_WG_KIND_REGION RLX_WG_KERNEL_COUNT /* no kernel yet: the pass does not fuse here */
/* the GEMV; wg_encode.c picks the tiled or transposed entry per step */
#define RLX_WG_KIND_DEQUANT_MATMUL RLX_WG_DQ_GEMV
#define RLX_WG_KIND_GROUPED_MATMUL RLX_WG_GROUPED_MATMUL

/* WGSL sources embedded at build time (wg_shaders.c, generated by
 * embed_wgsl.cmake): rlx_wg_src_<file stem>. */
extern const char rlx_wg_src_constants[]; /* generated (scripts/gen_shader_constants.c) */
extern const char rlx_wg_src_common[];
extern const char rlx_wg_src_eltwise[];
extern const char rlx_wg_src_matmul[];
extern const char rlx_wg_src_reduce[];
extern const char rlx_wg_src_rows[];
extern const char rlx_wg_src_index[];
extern const char rlx_wg_src_norm[];
extern const char rlx_wg_src_attention[];
extern const char rlx_wg_src_rope[];
extern const char rlx_wg_src_pool[];
extern const char rlx_wg_src_resize[];
extern const char rlx_wg_src_sampler[];
extern const char rlx_wg_src_gnorm[];
extern const char rlx_wg_src_fast[];
extern const char rlx_wg_src_mmtile[];
extern const char rlx_wg_src_flash[];
extern const char rlx_wg_src_gemv[];
extern const char rlx_wg_src_conv[];
extern const char rlx_wg_src_pool_bwd[];
extern const char rlx_wg_src_attention_bwd[];
extern const char rlx_wg_src_rows_bwd[];
extern const char rlx_wg_src_train[];
extern const char rlx_wg_src_grouped[];
extern const char rlx_wg_src_dequant[];
extern const char rlx_wg_src_quant[]; /* block decoders (dequant, grouped_dequant) */
extern const char rlx_wg_src_grouped_dequant[];

/* ------------------------------------------------------------ context */

typedef struct rlx_wg_context {
  rlx_wgpu_fns f;
  void (*device_tick)(WGPUDevice); /* Dawn's wgpuDeviceTick (not in webgpu.h; NULL if absent) */
  void* lib;
  WGPUInstance instance;
  WGPUAdapter adapter;
  WGPUDevice device;
  WGPUQueue queue;
  WGPULimits limits;
  char adapter_name[160];
  int has_f16, has_subgroups; /* offered by the adapter (and requested) */
  int has_timestamps;         /* timestamp-query offered and requested (tracing) */
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
