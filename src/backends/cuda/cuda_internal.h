/* CUDA backend internals (only compiled with RLX_HAVE_CUDA).
 *
 * libcuda and cuBLASLt are loaded at run time (cuda_loader.c) through tables
 * of function pointers; <cuda.h> and <cublasLt.h> are used for their types
 * only, so the library never links against them and a machine without a GPU
 * gets "cuda: unavailable: <why>". The kernels (kernels/NAME.cu) are compiled by
 * nvcc into fatbins embedded in the library and loaded with cuModuleLoadData.
 *
 * Files: cuda_loader.c (symbol tables, device + module init, once per
 * process), cuda.c (the backend vtable: arena, staging, run loop, graphs,
 * streams, host fallback), cuda_launch.c (step -> kernel launch records),
 * cuda_matmul.c (cuBLASLt plans), cuda_cudnn.c (cuDNN convolution plans;
 * cuDNN is optional and loaded with the device, cudnn_types.h). */
#ifndef RLX_BACKENDS_CUDA_INTERNAL_H
#define RLX_BACKENDS_CUDA_INTERNAL_H

#include <cuda.h>
#include <cublasLt.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cudnn_types.h"
#include "backends/cuda/kernels/params.h"

/* ------------------------------------------------------------------ driver API */

typedef struct rlx_cu_api {
  CUresult (*init)(unsigned int);
  CUresult (*driver_get_version)(int*);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*device_get_count)(int*);
  CUresult (*device_get_name)(char*, int, CUdevice);
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*get_error_string)(CUresult, const char**);
  CUresult (*get_error_name)(CUresult, const char**);
  CUresult (*module_load_data)(CUmodule*, const void*);
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*);
  CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*func_get_attribute)(int*, CUfunction_attribute, CUfunction);
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*mem_alloc_host)(void**, size_t);
  CUresult (*mem_free_host)(void*);
  CUresult (*mem_get_info)(size_t*, size_t*);
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t);
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*memcpy_2d_async)(const CUDA_MEMCPY2D*, CUstream);
  CUresult (*memset_d2d16_async)(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
  CUresult (*memset_d8_async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*launch_kernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                            unsigned int, unsigned int, unsigned int, CUstream, void**, void**);
  CUresult (*stream_create)(CUstream*, unsigned int);
  CUresult (*stream_destroy)(CUstream);
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*stream_wait_event)(CUstream, CUevent, unsigned int);
  CUresult (*event_create)(CUevent*, unsigned int);
  CUresult (*event_destroy)(CUevent);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent);
  CUresult (*stream_begin_capture)(CUstream, CUstreamCaptureMode);
  CUresult (*stream_end_capture)(CUstream, CUgraph*);
  CUresult (*graph_instantiate)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*graph_launch)(CUgraphExec, CUstream);
  CUresult (*graph_exec_destroy)(CUgraphExec);
  CUresult (*graph_destroy)(CUgraph);
  /* optional (NULL on drivers before CUDA 12): launches with attributes,
   * here programmatic dependent launch (rlx_launch.early) */
  CUresult (*launch_kernel_ex)(const CUlaunchConfig*, CUfunction, void**, void**);
} rlx_cu_api;

/* ------------------------------------------------------------------ cuBLASLt */

typedef struct rlx_lt_api {
  cublasStatus_t (*create)(cublasLtHandle_t*);
  cublasStatus_t (*destroy)(cublasLtHandle_t);
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t);
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*,
                             size_t);
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t,
                                  int64_t);
  cublasStatus_t (*layout_set)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t,
                               const void*, size_t);
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t*);
  cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                             const void*, size_t);
  cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t*, int*);
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                           cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t,
                           const void*, const void*, cublasLtMatrixLayout_t, void*,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t,
                           cudaStream_t);
} rlx_lt_api;

/* ------------------------------------------------------------------ kernels */

/* Every kernel the backend launches: enum tag, extern "C" name, and the
 * kernel family (kernels/<family>.cu, one embedded module each). */
#define RLX_CUDA_KERNELS(X)                                                                  \
  X(EW_GENERIC, rlx_ew_generic, elementwise) X(EW_F32, rlx_ew_f32, elementwise)              \
  X(EW_GENERIC32, rlx_ew_generic32, elementwise)                                             \
  X(EW_VIEWS4, rlx_ew_views4, elementwise) X(EW_VIEWS1, rlx_ew_views1, elementwise)           \
  X(CHECK_FINITE, rlx_check_finite, elementwise) X(MM_EPILOGUE, rlx_mm_epilogue, elementwise) \
  X(REDUCE_BLOCK, rlx_reduce_block, reduce) X(REDUCE_THREAD, rlx_reduce_thread, reduce)      \
  X(ARG_REDUCE, rlx_arg_reduce, reduce) X(SOFTMAX_ROWS, rlx_softmax_rows, reduce)            \
  X(SOFTMAX_COLS, rlx_softmax_cols, reduce) X(SOFTMAX_F32_V1, rlx_softmax_f32_v1, reduce)    \
  X(SOFTMAX_F32_V2, rlx_softmax_f32_v2, reduce) X(SOFTMAX_F32_V4, rlx_softmax_f32_v4, reduce) \
  X(SOFTMAX_F32_V8, rlx_softmax_f32_v8, reduce) X(CUMSUM, rlx_cumsum, reduce)                \
  X(TOPK, rlx_topk, reduce) X(GATHER_CHECK, rlx_gather_check, index)                         \
  X(GATHER, rlx_gather, index) X(GATHER_ROWS_F32, rlx_gather_rows_f32, index)                \
  X(SCATTER_CHECK, rlx_scatter_check, index) X(SCATTER_ADD, rlx_scatter_add, index)          \
  X(NORM_GENERIC, rlx_norm_generic, norm) X(NORM_F32_V1, rlx_norm_f32_v1, norm)              \
  X(NORM_F32_V2, rlx_norm_f32_v2, norm) X(NORM_F32_V4, rlx_norm_f32_v4, norm)                \
  X(NORM_F32_V8, rlx_norm_f32_v8, norm) X(ATTN_D64, rlx_attn_d64, attention)                 \
  X(ATTN_D128, rlx_attn_d128, attention) X(ATTN_D256, rlx_attn_d256, attention)              \
  X(ATTN_D64_SPLIT, rlx_attn_d64_split, attention)                                           \
  X(ATTN_D128_SPLIT, rlx_attn_d128_split, attention)                                         \
  X(ATTN_D256_SPLIT, rlx_attn_d256_split, attention)                                         \
  X(ATTN_COMBINE, rlx_attn_combine, attention) X(ROPE, rlx_rope, rope)                       \
  X(SAMPLE, rlx_sample, rope) X(SAMPLE_GREEDY, rlx_sample_greedy, rope) X(MM_TILED, rlx_mm_tiled, matmul) X(MM_F64, rlx_mm_f64, matmul) \
  X(ATTN_MMA_BF16_D64, rlx_attn_mma_bf16_d64, attention_mma)                                 \
  X(ATTN_MMA_BF16_D128, rlx_attn_mma_bf16_d128, attention_mma)                               \
  X(ATTN_MMA_F16_D64, rlx_attn_mma_f16_d64, attention_mma)                                   \
  X(ATTN_MMA_F16_D128, rlx_attn_mma_f16_d128, attention_mma)                               \
  X(GEMV_FUSED_V1, rlx_gemv_fused_v1, matmul) X(GEMV_FUSED_V4, rlx_gemv_fused_v4, matmul)     \
  X(ATTN_DEC_1V, rlx_attn_dec_1v, decode) X(ATTN_DEC_2V, rlx_attn_dec_2v, decode)             \
  X(ATTN_DEC_4V, rlx_attn_dec_4v, decode) X(ATTN_DEC_1G, rlx_attn_dec_1g, decode)             \
  X(ATTN_DEC_2G, rlx_attn_dec_2g, decode) X(ATTN_DEC_4G, rlx_attn_dec_4g, decode)             \
  X(WHERE_ROWS, rlx_where_rows, decode)                                                      \
  X(ATTN_F32_D64, rlx_attn_f32_d64, attention_f32)                                           \
  X(ATTN_F32_D128R8, rlx_attn_f32_d128r8, attention_f32)                                    \
  X(POOL, rlx_pool, pool)                                                                    \
  X(RESIZE, rlx_resize, resize)                                                              \
  X(SAMPLER, rlx_sampler, sampler)                                                           \
  X(GNORM, rlx_gnorm, gnorm)                                                                 \
  X(POOL_BWD, rlx_pool_bwd, pool_bwd)                                                          \
  X(POOL_BWD_2D, rlx_pool_bwd_2d, pool_bwd) X(POOL_BWD_2D_K3, rlx_pool_bwd_2d_k3, pool_bwd)    \
  X(ATTN_BWD_ROWS, rlx_attn_bwd_rows, attention_bwd)                                           \
  X(ATTN_BWD_KEYS, rlx_attn_bwd_keys, attention_bwd)                                           \
  X(ATTN_BWD_Q64, rlx_attn_bwd_q64, attention_bwd_tiled)                                      \
  X(ATTN_BWD_Q128, rlx_attn_bwd_q128, attention_bwd_tiled)                                    \
  X(ATTN_BWD_K64, rlx_attn_bwd_k64, attention_bwd_tiled)                                      \
  X(ATTN_BWD_K128, rlx_attn_bwd_k128, attention_bwd_tiled)                                    \
  X(ATTN_BWD_MMA_Q_BF16_D64, rlx_attn_bwd_mma_q_bf16_d64, attention_bwd_mma)                  \
  X(ATTN_BWD_MMA_Q_BF16_D128, rlx_attn_bwd_mma_q_bf16_d128, attention_bwd_mma)                \
  X(ATTN_BWD_MMA_Q_F16_D64, rlx_attn_bwd_mma_q_f16_d64, attention_bwd_mma)                    \
  X(ATTN_BWD_MMA_Q_F16_D128, rlx_attn_bwd_mma_q_f16_d128, attention_bwd_mma)                  \
  X(ATTN_BWD_MMA_K_BF16_D64, rlx_attn_bwd_mma_k_bf16_d64, attention_bwd_mma)                  \
  X(ATTN_BWD_MMA_K_BF16_D128, rlx_attn_bwd_mma_k_bf16_d128, attention_bwd_mma)                \
  X(ATTN_BWD_MMA_K_F16_D64, rlx_attn_bwd_mma_k_f16_d64, attention_bwd_mma)                    \
  X(ATTN_BWD_MMA_K_F16_D128, rlx_attn_bwd_mma_k_f16_d128, attention_bwd_mma)                  \
  X(NORM_BWD, rlx_norm_bwd, rows_bwd)                                                          \
  X(SOFTMAX_BWD, rlx_softmax_bwd, rows_bwd)                                                    \
  X(XENT_ROWS, rlx_xent_rows, train) X(XENT_MEAN, rlx_xent_mean, train)                        \
  X(XENT_BACKWARD, rlx_xent_backward, train) X(GATHER_BWD, rlx_gather_bwd, train)              \
  X(GATHER_BWD_SORTED, rlx_gather_bwd_sorted, train)                                          \
  X(OPT_UPDATE, rlx_opt_update, train)                                                        \
  X(REDUCE_COLS_V1, rlx_reduce_cols_v1, reduce) X(REDUCE_COLS_V4, rlx_reduce_cols_v4, reduce)  \
  X(REDUCE_COLS_V8, rlx_reduce_cols_v8, reduce)                                              \
  X(OPT_MULTI, rlx_opt_multi, train)                                                         \
  X(NORM_H16_V1, rlx_norm_h16_v1, norm) X(NORM_H16_V2, rlx_norm_h16_v2, norm)                  \
  X(NORM_H16_V4, rlx_norm_h16_v4, norm) X(NORM_H16_V8, rlx_norm_h16_v8, norm)                  \
  X(NORM_BWD_W4, rlx_norm_bwd_w4, rows_bwd) X(NORM_BWD_W8, rlx_norm_bwd_w8, rows_bwd)  \
  X(REGION4, rlx_region4, region) X(REGION1, rlx_region1, region)                            \
  X(REDUCE_MID_V1, rlx_reduce_mid_v1, reduce) X(REDUCE_MID_V4, rlx_reduce_mid_v4, reduce)      \
  X(REDUCE_MID_V8, rlx_reduce_mid_v8, reduce) X(REDUCE_MID_H4, rlx_reduce_mid_h4, reduce)      \
  X(EW_SELECT4, rlx_ew_select4, elementwise) X(EW_SELECT1, rlx_ew_select1, elementwise)        \
  X(ATTN_F32TC_D64, rlx_attn_f32tc_d64, attention_f32)                                        \
  X(ATTN_F32TC_D128, rlx_attn_f32tc_d128, attention_f32)                                       \
  X(ATTN_BWD_F32TC_Q64, rlx_attn_bwd_f32tc_q64, attention_f32)                                 \
  X(ATTN_BWD_F32TC_Q128, rlx_attn_bwd_f32tc_q128, attention_f32)                               \
  X(ATTN_BWD_F32TC_K64, rlx_attn_bwd_f32tc_k64, attention_f32)                                 \
  X(ATTN_BWD_F32TC_K128, rlx_attn_bwd_f32tc_k128, attention_f32)                               \
  X(CAST_MULTI, rlx_cast_multi, elementwise) \
  X(GMM_F, rlx_gmm_f, grouped) X(GMM_F_ROWS, rlx_gmm_f_rows, grouped) X(GMM_Q, rlx_gmm_q, grouped) \
  X(DQMM_GEMV_Q4_0_M1, rlx_dqmm_gemv_q4_0_m1, quant) \
  X(DQMM_GEMV_Q4_0_M8, rlx_dqmm_gemv_q4_0_m8, quant) \
  X(DQMM_GEMV_Q4_0_S1, rlx_dqmm_gemv_q4_0_s1, quant) \
  X(DQMM_GEMV_Q4_1_M1, rlx_dqmm_gemv_q4_1_m1, quant) \
  X(DQMM_GEMV_Q4_1_M8, rlx_dqmm_gemv_q4_1_m8, quant) \
  X(DQMM_GEMV_Q4_1_S1, rlx_dqmm_gemv_q4_1_s1, quant) \
  X(DQMM_GEMV_Q5_0_M1, rlx_dqmm_gemv_q5_0_m1, quant) \
  X(DQMM_GEMV_Q5_0_M8, rlx_dqmm_gemv_q5_0_m8, quant) \
  X(DQMM_GEMV_Q5_0_S1, rlx_dqmm_gemv_q5_0_s1, quant) \
  X(DQMM_GEMV_Q5_1_M1, rlx_dqmm_gemv_q5_1_m1, quant) \
  X(DQMM_GEMV_Q5_1_M8, rlx_dqmm_gemv_q5_1_m8, quant) \
  X(DQMM_GEMV_Q5_1_S1, rlx_dqmm_gemv_q5_1_s1, quant) \
  X(DQMM_GEMV_Q8_0_M1, rlx_dqmm_gemv_q8_0_m1, quant) \
  X(DQMM_GEMV_Q8_0_M8, rlx_dqmm_gemv_q8_0_m8, quant) \
  X(DQMM_GEMV_Q8_0_S1, rlx_dqmm_gemv_q8_0_s1, quant) \
  X(DQMM_GEMV_Q2_K_M1, rlx_dqmm_gemv_q2_k_m1, quant) \
  X(DQMM_GEMV_Q2_K_M8, rlx_dqmm_gemv_q2_k_m8, quant) \
  X(DQMM_GEMV_Q2_K_S1, rlx_dqmm_gemv_q2_k_s1, quant) \
  X(DQMM_GEMV_Q3_K_M1, rlx_dqmm_gemv_q3_k_m1, quant) \
  X(DQMM_GEMV_Q3_K_M8, rlx_dqmm_gemv_q3_k_m8, quant) \
  X(DQMM_GEMV_Q3_K_S1, rlx_dqmm_gemv_q3_k_s1, quant) \
  X(DQMM_GEMV_Q4_K_M1, rlx_dqmm_gemv_q4_k_m1, quant) \
  X(DQMM_GEMV_Q4_K_M8, rlx_dqmm_gemv_q4_k_m8, quant) \
  X(DQMM_GEMV_Q4_K_S1, rlx_dqmm_gemv_q4_k_s1, quant) \
  X(DQMM_GEMV_Q5_K_M1, rlx_dqmm_gemv_q5_k_m1, quant) \
  X(DQMM_GEMV_Q5_K_M8, rlx_dqmm_gemv_q5_k_m8, quant) \
  X(DQMM_GEMV_Q5_K_S1, rlx_dqmm_gemv_q5_k_s1, quant) \
  X(DQMM_GEMV_Q6_K_M1, rlx_dqmm_gemv_q6_k_m1, quant) \
  X(DQMM_GEMV_Q6_K_M8, rlx_dqmm_gemv_q6_k_m8, quant) \
  X(DQMM_GEMV_Q6_K_S1, rlx_dqmm_gemv_q6_k_s1, quant) \
  X(DQMM_XLIMBS, rlx_dqmm_xlimbs, quant) X(DQMM_TILED, rlx_dqmm_tiled, quant) \
  X(DQMM_MMA_F16, rlx_dqmm_mma_f16, quant) X(DQMM_MMA_BF16, rlx_dqmm_mma_bf16, quant) \
  X(DQMM_PANEL_F32, rlx_dqmm_panel_f32, quant) X(DQMM_PANEL_F16, rlx_dqmm_panel_f16, quant) \
  X(DQMM_PANEL_BF16, rlx_dqmm_panel_bf16, quant)

typedef enum rlx_cuda_fn {
#define RLX_CUDA_FN_ENUM(e, name, family) RLX_CUDA_FN_##e,
  RLX_CUDA_KERNELS(RLX_CUDA_FN_ENUM)
#undef RLX_CUDA_FN_ENUM
  RLX_CUDA_FN_COUNT
} rlx_cuda_fn;

/* One fatbin per kernel family, embedded by CMake (generated rlx_cuda_blobs.c);
 * a fatbin carries its own size in its header. */
typedef struct rlx_cuda_blob {
  const char* name;
  const unsigned char* data;
} rlx_cuda_blob;
extern const rlx_cuda_blob rlx_cuda_blobs[];
extern const int rlx_cuda_n_blobs;

/* ------------------------------------------------------------------ device */

/* The process-wide device: driver, context, loaded kernels, cuBLASLt.
 * Initialised once (by the registry's probe) and never torn down: modules
 * and the primary context live as long as the process. */
typedef struct rlx_cuda_dev {
  rlx_cu_api cu;
  rlx_lt_api lt;
  int have_lt;
  char lt_reason[160];
  CUdevice dev;
  CUcontext ctx;
  CUfunction fn[RLX_CUDA_FN_COUNT];
  cublasLtHandle_t lt_handle;
  rlx_dnn_api dnn; /* cuDNN (optional): convolutions */
  int have_dnn;
  char dnn_reason[160];
  int sm_count, cc_major, cc_minor, smem_optin;
  char name[128];
} rlx_cuda_dev;

/* The device, or NULL with the reason ("no libcuda.so.1", "no CUDA device"). */
const rlx_cuda_dev* rlx_cuda_device(char* reason, size_t cap);

/* Turns a driver error into a status naming the call ("cuMemAlloc: out of
 * memory"); RLX_RESOURCE_EXHAUSTED for out-of-memory. */
rlx_status rlx_cuda_fail(const rlx_cuda_dev* d, rlx_error* err, CUresult r, const char* call);
#define RLX_CU(d, err, call, expr)                                        \
  do {                                                                    \
    CUresult rlx_cu_r_ = (expr);                                          \
    if (rlx_cu_r_ != CUDA_SUCCESS) return rlx_cuda_fail((d), (err), rlx_cu_r_, (call)); \
  } while (0)

/* ------------------------------------------------------------------ launches */

/* What one step becomes: kernel launches, a cuBLASLt call, a device copy, or a
 * host-fallback marker. A step may need several (validate + gather). */
typedef enum rlx_launch_kind {
  RLX_LAUNCH_KERNEL,
  RLX_LAUNCH_LT,     /* cuBLASLt plan */
  RLX_LAUNCH_COPY,   /* cuMemcpyDtoDAsync(dst, src, bytes) */
  RLX_LAUNCH_HOST,   /* run the step on the host mirror */
  RLX_LAUNCH_DNN,    /* cuDNN convolution plan */
} rlx_launch_kind;

typedef union rlx_launch_params {
  rlxk_ew ew;
  rlxk_reduce reduce;
  rlxk_row row;
  rlxk_gather gather;
  rlxk_gmm gmm;
  rlxk_scatter scatter;
  rlxk_norm norm;
  rlxk_attn attn;
  rlxk_attn_bwd attn_bwd;
  rlxk_rope rope;
  rlxk_sample sample;
  rlxk_pool pool;
  rlxk_pool_bwd pool_bwd;
  rlxk_pool_bwd2d pool_bwd2d;
  rlxk_resize resize;
  rlxk_sampler sampler;
  rlxk_gnorm gnorm;
  rlxk_mm mm;
  rlxk_epilogue epi;
  rlxk_softmax_bwd softmax_bwd;
  rlxk_xent xent;
  rlxk_opt opt;
  rlxk_cols cols;
  rlxk_opt_multi opt_multi;
  rlxk_region region;
  rlxk_mid mid;
  rlxk_dqmm dqmm;
} rlx_launch_params;

typedef struct rlx_cuda_mm_plan rlx_cuda_mm_plan;
typedef struct rlx_cuda_conv_plan rlx_cuda_conv_plan;

typedef struct rlx_launch {
  rlx_launch_kind kind;
  int32_t step;          /* index in the step list */
  rlx_cuda_fn fn;
  unsigned grid[3], block, smem;
  rlx_launch_params p;
  rlx_cuda_mm_plan* plan; /* RLX_LAUNCH_LT */
  rlx_cuda_conv_plan* conv; /* RLX_LAUNCH_DNN */
  uint64_t dst, src, bytes; /* RLX_LAUNCH_COPY (arena offsets) */
  CUfunction gen; /* RLX_LAUNCH_KERNEL: a generated region kernel (NVRTC) run instead of fn */
  /* RLX_LAUNCH_KERNEL: may start while the stream's previous kernel still
   * runs (programmatic dependent launch; set only on sm_90+ with a driver
   * that has cuLaunchKernelEx): the kernel waits for it
   * (griddepcontrol.wait) before reading what it wrote. Only kernels that
   * do so are flagged (the _S1 GEMV after its XLIMBS). */
  int early;
} rlx_launch;

/* Bytes the program uploads into its scratch once, after zeroing it (the
 * batched optimizer updates' tables). */
typedef struct rlx_scratch_init {
  uint64_t off;
  void* data; /* owned by the launch list */
  size_t bytes;
} rlx_scratch_init;

typedef struct rlx_launch_list {
  rlx_launch* v;
  int32_t n, cap;
  uint64_t scratch_bytes; /* device scratch the launches need (GEMV partials, sample) */
  size_t dnn_workspace;   /* cuDNN workspace (per stream) the largest conv plan needs */
  uint64_t gemm_pad;      /* GEMM padding buffer (per stream) the largest LT plan needs */
  rlx_scratch_init* init;
  int32_t n_init;
} rlx_launch_list;

/* Per-executable context the launch builder needs. */
typedef struct rlx_cuda_build {
  const rlx_cuda_dev* d;
  CUdeviceptr arena;
  CUdeviceptr scratch;    /* base of the scratch buffer (0 while sizing) */
  CUdeviceptr workspace;  /* cuBLASLt workspace */
  size_t workspace_bytes;
  int allow_tf32, debug_nans, no_lt;
  rlx_dnn_handle dnn;     /* the executable's cuDNN handle (NULL: no cuDNN) */
  CUstream dnn_stream;    /* stream the algorithm search runs on */
  size_t dnn_ws_cap;      /* most workspace one convolution may use */
  int dnn_heuristic;      /* pick algorithms by cuDNN's heuristic, not by timing */
} rlx_cuda_build;

/* The tensor-core attention backward's query-tile kernels (STATS, DQ): their
 * a.partial is an offset into the program's scratch until launch. */
static inline int rlx_cuda_fn_attn_bwd_mma_q(rlx_cuda_fn f) {
  return f == RLX_CUDA_FN_ATTN_BWD_MMA_Q_BF16_D64 || f == RLX_CUDA_FN_ATTN_BWD_MMA_Q_BF16_D128 ||
         f == RLX_CUDA_FN_ATTN_BWD_MMA_Q_F16_D64 || f == RLX_CUDA_FN_ATTN_BWD_MMA_Q_F16_D128;
}

/* The one-row limb GEMV of some GGUF scheme (rlx_dqmm_gemv_<scheme>_s1). */
static inline int rlx_cuda_fn_dqmm_s1(rlx_cuda_fn f) {
  return f == RLX_CUDA_FN_DQMM_GEMV_Q4_0_S1 || f == RLX_CUDA_FN_DQMM_GEMV_Q4_1_S1 ||
         f == RLX_CUDA_FN_DQMM_GEMV_Q5_0_S1 || f == RLX_CUDA_FN_DQMM_GEMV_Q5_1_S1 ||
         f == RLX_CUDA_FN_DQMM_GEMV_Q8_0_S1 || f == RLX_CUDA_FN_DQMM_GEMV_Q2_K_S1 ||
         f == RLX_CUDA_FN_DQMM_GEMV_Q3_K_S1 || f == RLX_CUDA_FN_DQMM_GEMV_Q4_K_S1 ||
         f == RLX_CUDA_FN_DQMM_GEMV_Q5_K_S1 || f == RLX_CUDA_FN_DQMM_GEMV_Q6_K_S1;
}

/* The DequantMatMul kernels whose p.dqmm.panel is an offset into the
 * per-stream GEMM padding buffer until launch: the prefill's panels and
 * the decode GEMV's x as limbs (written by XLIMBS, read by the _S1 GEMV). */
static inline int rlx_cuda_fn_uses_stream_pad(rlx_cuda_fn f) {
  return (f >= RLX_CUDA_FN_DQMM_PANEL_F32 && f <= RLX_CUDA_FN_DQMM_PANEL_BF16) || f == RLX_CUDA_FN_DQMM_XLIMBS ||
         rlx_cuda_fn_dqmm_s1(f);
}

/* The query-tile kernels whose STATS launch can leave a float2 (lse, D)
 * copy in scratch for DQ (tensor-core, f32 3xTF32 and SIMT tiled): the launch makes
 * a.partial an address. */
static inline int rlx_cuda_fn_attn_bwd_stats_copy(rlx_cuda_fn f) {
  return rlx_cuda_fn_attn_bwd_mma_q(f) || f == RLX_CUDA_FN_ATTN_BWD_Q64 || f == RLX_CUDA_FN_ATTN_BWD_Q128 ||
         f == RLX_CUDA_FN_ATTN_BWD_F32TC_Q64 || f == RLX_CUDA_FN_ATTN_BWD_F32TC_Q128;
}

/* The tensor-core attention backward's key-tile kernels (DV, DK): a fused
 * DV launch that leaves dS tiles for DQ has a.partial, an offset into the
 * program's scratch until launch. */
static inline int rlx_cuda_fn_attn_bwd_mma_k(rlx_cuda_fn f) {
  return f == RLX_CUDA_FN_ATTN_BWD_MMA_K_BF16_D64 || f == RLX_CUDA_FN_ATTN_BWD_MMA_K_BF16_D128 ||
         f == RLX_CUDA_FN_ATTN_BWD_MMA_K_F16_D64 || f == RLX_CUDA_FN_ATTN_BWD_MMA_K_F16_D128;
}

/* Appends the launches for steps[i] (cuda_launch.c). */
rlx_status rlx_cuda_build_step(const rlx_cuda_build* b, const rlx_step* s, int32_t index,
                               rlx_launch_list* out, rlx_error* err);
void rlx_cuda_launch_list_free(const rlx_cuda_dev* d, rlx_launch_list* l);
/* Runs of optimizer-update launches that share the optimizer and its
 * hyper tensor and touch disjoint bytes become one rlx_opt_multi launch
 * (its table goes to l->init), issued at the run's first or last update;
 * the launches between (steps sl) stay in order and must not conflict with
 * the updates moved past them. Only for a program on one stream. */
rlx_status rlx_cuda_batch_updates(rlx_launch_list* l, const rlx_step_list* sl, rlx_error* err);
/* Runs of consecutive packed float casts (each its step's only launch,
 * none touching bytes another writes: a trainer's params cast to their
 * bf16 copies) become one rlx_cast_multi launch (its table of the casts'
 * rlxk_ew goes to l->init). Only for a program on one stream. */
rlx_status rlx_cuda_batch_casts(rlx_launch_list* l, const rlx_step_list* sl, rlx_error* err);
/* One stream only: drops an XLIMBS launch whose limbs are already in the
 * padding buffer (the same x converted by the XLIMBS before it, with only
 * _S1 GEMVs between: Q / K / V, gate / up). */
void rlx_cuda_share_limbs(rlx_launch_list* l);
/* Must step `later` wait for step `earlier` (their byte ranges meet with
 * a write on either side, or one is a host step)? */
int rlx_cuda_steps_conflict(const rlx_step* earlier, const rlx_step* later);
/* Whether the step would use cuDNN (the executable then makes a handle). */
int rlx_cuda_step_uses_dnn(const rlx_step* s);
/* Whether Conv / ConvTranspose node ni runs on cuDNN (cuda_supports). */
int rlx_cuda_conv_node_native(const rlx_cuda_dev* d, const rlx_graph* g, int32_t ni);

/* cuBLASLt (cuda_matmul.c). Returns RLX_OK with *out == NULL when cuBLASLt
 * cannot take the step (the caller uses the own kernel). */
rlx_status rlx_cuda_mm_plan_create(const rlx_cuda_build* b, const rlx_step* s,
                                   rlx_cuda_mm_plan** out, rlx_error* err);
rlx_status rlx_cuda_mm_plan_run(const rlx_cuda_dev* d, const rlx_cuda_mm_plan* p,
                                CUstream stream, CUdeviceptr workspace, size_t workspace_bytes,
                                CUdeviceptr pad, rlx_error* err);
/* One panel of a DequantMatMul (cuda_launch.c): y[:, n0 .. n0 + rows) of
 * y [M, N] (ooff: its column n0) = x [M, K] (xoff) . panel^T, where the
 * panel, W's rows n0 .. n0 + rows dequantized to x's dtype [rows, K], sits
 * at the start of the plan's padding buffer. tag names the types in the
 * plan's description. */
typedef struct rlx_cuda_panel_mm {
  int64_t M, N, K, rows;
  uint64_t xoff, ooff;
  rlx_dtype xdt, odt;
  const char* tag;
} rlx_cuda_panel_mm;
rlx_status rlx_cuda_mm_plan_create_panel(const rlx_cuda_build* b, const rlx_cuda_panel_mm* q,
                                         rlx_cuda_mm_plan** out, rlx_error* err);
/* Bytes of the padding buffer the plan's run needs (operands whose leading
 * dimension is copied to a 16-byte multiple; 0 for most plans). */
uint64_t rlx_cuda_mm_plan_pad_bytes(const rlx_cuda_mm_plan* p);
void rlx_cuda_mm_plan_destroy(const rlx_cuda_dev* d, rlx_cuda_mm_plan* p);
/* Whether the plan applies bias/activation itself (else an epilogue kernel follows). */
int rlx_cuda_mm_plan_fused(const rlx_cuda_mm_plan* p);
/* The plan's dtype, M x N x K (batch folded), operand ops and alignments, as
 * text (RLX_CUDA_PROFILE=2 groups GEMMs by it), and its flops. */
const char* rlx_cuda_mm_plan_what(const rlx_cuda_mm_plan* p, double* flops);

/* ------------------------------------------------------------------ cuDNN convolution */

/* One convolution as cuDNN sees it (cuda_cudnn.c), filled from the step by
 * cuda_launch.c. Channels come before the spatial dims in every array, in
 * that logical order whatever the memory layout: x_stride / y_stride /
 * res_stride are element strides of (N, C, spatial...), so NCHW and
 * channels-last are both plain strided tensors. ConvTranspose reads x as
 * cuDNN's dy and writes y as its dx (cudnnConvolutionBackwardData). */
typedef struct rlx_cuda_conv {
  int transpose, spatial;    /* spatial dims: 1..3 */
  /* the weight gradient (cudnnConvolutionBackwardFilter): x as the
   * forward's, y (y_off, y_stride) is dy, w (w_off) the d_w written */
  int wgrad;
  rlx_dtype dtype;           /* x, w, y */
  int64_t N, C, OC, groups;  /* C: x's channels; OC: y's */
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad[3], pad_end[3];
  int64_t x_stride[5], y_stride[5], res_stride[5];
  /* x, y channels-last: w ([OC, C/g, k..]) is copied to [OC, k.., C/g]
   * in the workspace each run, so cuDNN's NHWC kernels apply
   * (cudnnTransformTensor, a few MB at most), unless filter_ohwi: w is
   * [OC, k.., C/g] already (RLX_CONV_CHANNELS_LAST_OHWI) and read as it is */
  int channels_last, filter_ohwi;
  int act; /* rlx_activation applied after bias and residual */
  int has_bias, has_residual;
  rlx_dtype bias_dtype, res_dtype;
  uint64_t x_off, w_off, bias_off, res_off, y_off;
} rlx_cuda_conv;

/* Whether cuDNN (loaded) takes a convolution of this kind: dtype
 * f32/f16/bf16 (bias and residual alike), 1..3 spatial dims, symmetric
 * padding. The backend's `supports` asks it per node, so a convolution it
 * refuses is decomposed instead. */
int rlx_cuda_conv_kind_native(const rlx_cuda_dev* d, const rlx_cuda_conv* c);
/* The kind check plus the geometry: packed NCHW-order or channels-last
 * tensors, sizes that fit cuDNN's int dims, consistent output sizes. */
int rlx_cuda_conv_native(const rlx_cuda_dev* d, const rlx_cuda_conv* c);
/* Descriptors and the algorithm (timed search, or cuDNN's heuristic with
 * dnn_heuristic), made once. RLX_OK with *out == NULL when no algorithm
 * takes the problem (the caller runs the step on the host). */
rlx_status rlx_cuda_conv_plan_create(const rlx_cuda_build* b, const rlx_cuda_conv* c,
                                     rlx_cuda_conv_plan** out, rlx_error* err);
/* Issues the convolution (+ bias, residual, ReLU where fused) on stream. */
rlx_status rlx_cuda_conv_plan_run(const rlx_cuda_dev* d, const rlx_cuda_conv_plan* p,
                                  rlx_dnn_handle h, CUstream stream, CUdeviceptr workspace,
                                  size_t workspace_bytes, rlx_error* err);
void rlx_cuda_conv_plan_destroy(const rlx_cuda_dev* d, rlx_cuda_conv_plan* p);
size_t rlx_cuda_conv_plan_workspace(const rlx_cuda_conv_plan* p);
/* Whether the plan applied the activation itself (else a unary kernel follows). */
int rlx_cuda_conv_plan_applies_act(const rlx_cuda_conv_plan* p);
/* Whether the residual must be copied into y before the plan runs (the
 * unfused path accumulates onto y with beta = 1). */
int rlx_cuda_conv_plan_needs_residual_copy(const rlx_cuda_conv_plan* p);
/* Short text for the dispatch report: "fwd algo 1, fused". */
void rlx_cuda_conv_plan_describe(const rlx_cuda_conv_plan* p, char* buf, size_t cap);

/* ------------------------------------------------------------------ generated kernels */
/* ElementwiseRegion kernels generated as CUDA C and compiled by NVRTC
 * (cuda_nvrtc.h), cached per process by source text and never unloaded
 * (like the fatbin modules). */

/* The cached kernel of src, or NULL. */
CUfunction rlx_cuda_gen_lookup(const char* src);
/* Compiles and loads the sources of srcs[0..n) not cached yet (in
 * parallel, one NVRTC program each), then caches them. A failed compile
 * is an error naming NVRTC's log. */
rlx_status rlx_cuda_gen_compile(const rlx_cuda_dev* d, const char* const* srcs, int32_t n,
                                rlx_error* err);
/* Kernels compiled so far in this process and the wall ms spent compiling
 * them (NVRTC and the module load). */
void rlx_cuda_gen_stats(int32_t* n_kernels, double* ms);
/* Whether region steps use generated kernels: libnvrtc loads and
 * RLX_CUDA_NO_NVRTC is not set (else the interpreter, region.cu). */
int rlx_cuda_gen_enabled(void);
/* Generates and compiles, before the launches are built, the kernels of
 * every region step of l at once (cuda_launch.c). */
rlx_status rlx_cuda_regions_prepare(const rlx_cuda_build* b, const rlx_step_list* l, rlx_error* err);

#endif
