/* Run-time loading of the CUDA driver (libcuda.so.1), cuBLASLt and cuDNN, and
 * the one-time device setup: primary context, the embedded kernel modules, the
 * cuBLASLt handle. Nothing here links against CUDA: a machine without the
 * driver gets a reason string instead of a load failure. */
#ifdef RLX_HAVE_CUDA

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/env.h"
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/cuda_nvrtc.h"

static rlx_cuda_dev g_dev;
static int g_ok;
static char g_reason[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Stores dlsym's result in a function-pointer slot (no object/function
 * pointer cast, which ISO C leaves undefined). */
static int load_sym(void* lib, const char* name, void* slot) {
  void* p = dlsym(lib, name);
  if (!p) return 0;
  memcpy(slot, &p, sizeof p);
  return 1;
}

#define SYM(lib, field, name)                                                   \
  do {                                                                          \
    if (!load_sym((lib), (name), &(field))) {                                   \
      snprintf(g_reason, sizeof g_reason, "%s lacks symbol %s", libname, name); \
      return 0;                                                                 \
    }                                                                           \
  } while (0)

static int load_driver(rlx_cu_api* c) {
  const char* libname = "libcuda.so.1";
  void* lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(g_reason, sizeof g_reason, "no NVIDIA driver (cannot load libcuda.so.1)");
    return 0;
  }
  SYM(lib, c->init, "cuInit");
  SYM(lib, c->driver_get_version, "cuDriverGetVersion");
  SYM(lib, c->device_get, "cuDeviceGet");
  SYM(lib, c->device_get_count, "cuDeviceGetCount");
  SYM(lib, c->device_get_name, "cuDeviceGetName");
  SYM(lib, c->device_get_attribute, "cuDeviceGetAttribute");
  SYM(lib, c->primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  SYM(lib, c->ctx_set_current, "cuCtxSetCurrent");
  SYM(lib, c->get_error_string, "cuGetErrorString");
  SYM(lib, c->get_error_name, "cuGetErrorName");
  SYM(lib, c->module_load_data, "cuModuleLoadData");
  SYM(lib, c->module_get_function, "cuModuleGetFunction");
  SYM(lib, c->func_set_attribute, "cuFuncSetAttribute");
  SYM(lib, c->func_get_attribute, "cuFuncGetAttribute");
  SYM(lib, c->mem_alloc, "cuMemAlloc_v2");
  SYM(lib, c->mem_free, "cuMemFree_v2");
  SYM(lib, c->mem_alloc_host, "cuMemAllocHost_v2");
  SYM(lib, c->mem_free_host, "cuMemFreeHost");
  SYM(lib, c->mem_get_info, "cuMemGetInfo_v2");
  SYM(lib, c->memcpy_htod, "cuMemcpyHtoD_v2");
  SYM(lib, c->memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
  SYM(lib, c->memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
  SYM(lib, c->memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
  SYM(lib, c->memcpy_2d_async, "cuMemcpy2DAsync_v2");
  SYM(lib, c->memset_d2d16_async, "cuMemsetD2D16Async");
  SYM(lib, c->memset_d8_async, "cuMemsetD8Async");
  SYM(lib, c->launch_kernel, "cuLaunchKernel");
  SYM(lib, c->stream_create, "cuStreamCreate");
  SYM(lib, c->stream_destroy, "cuStreamDestroy_v2");
  SYM(lib, c->stream_synchronize, "cuStreamSynchronize");
  SYM(lib, c->stream_wait_event, "cuStreamWaitEvent");
  SYM(lib, c->event_create, "cuEventCreate");
  SYM(lib, c->event_destroy, "cuEventDestroy_v2");
  SYM(lib, c->event_record, "cuEventRecord");
  SYM(lib, c->event_elapsed_time, "cuEventElapsedTime_v2");
  SYM(lib, c->stream_begin_capture, "cuStreamBeginCapture_v2");
  SYM(lib, c->stream_end_capture, "cuStreamEndCapture");
  SYM(lib, c->graph_instantiate, "cuGraphInstantiateWithFlags");
  SYM(lib, c->graph_launch, "cuGraphLaunch");
  SYM(lib, c->graph_exec_destroy, "cuGraphExecDestroy");
  SYM(lib, c->graph_destroy, "cuGraphDestroy");
  if (!load_sym(lib, "cuLaunchKernelEx", &c->launch_kernel_ex)) c->launch_kernel_ex = NULL;
  return 1; /* the library stays loaded for the life of the process */
}

/* cuBLASLt is optional: without it matmuls use the own kernels. */
static void load_cublaslt(rlx_cuda_dev* d) {
  const char* env = rlx_env_str(RLX_ENV_CUDA_CUBLASLT);
  const char* names[] = {env, "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                         "/usr/local/cuda/lib64/libcublasLt.so.13",
                         "/usr/local/cuda/lib64/libcublasLt.so.12"};
  void* lib = NULL;
  const char* libname = "libcublasLt";
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    if (names[i] && names[i][0]) {
      lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
      if (lib) libname = names[i];
    }
  if (!lib) {
    snprintf(d->lt_reason, sizeof d->lt_reason, "cuBLASLt not found (libcublasLt.so.13)");
    return;
  }
  rlx_lt_api* t = &d->lt;
  int ok = load_sym(lib, "cublasLtCreate", &t->create) &&
           load_sym(lib, "cublasLtDestroy", &t->destroy) &&
           load_sym(lib, "cublasLtMatmulDescCreate", &t->desc_create) &&
           load_sym(lib, "cublasLtMatmulDescSetAttribute", &t->desc_set) &&
           load_sym(lib, "cublasLtMatmulDescDestroy", &t->desc_destroy) &&
           load_sym(lib, "cublasLtMatrixLayoutCreate", &t->layout_create) &&
           load_sym(lib, "cublasLtMatrixLayoutSetAttribute", &t->layout_set) &&
           load_sym(lib, "cublasLtMatrixLayoutDestroy", &t->layout_destroy) &&
           load_sym(lib, "cublasLtMatmulPreferenceCreate", &t->pref_create) &&
           load_sym(lib, "cublasLtMatmulPreferenceSetAttribute", &t->pref_set) &&
           load_sym(lib, "cublasLtMatmulPreferenceDestroy", &t->pref_destroy) &&
           load_sym(lib, "cublasLtMatmulAlgoGetHeuristic", &t->heuristic) &&
           load_sym(lib, "cublasLtMatmul", &t->matmul);
  if (!ok) {
    snprintf(d->lt_reason, sizeof d->lt_reason, "%s lacks cublasLt symbols", libname);
    return;
  }
  if (t->create(&d->lt_handle) != CUBLAS_STATUS_SUCCESS) {
    snprintf(d->lt_reason, sizeof d->lt_reason, "cublasLtCreate failed");
    return;
  }
  d->have_lt = 1;
  snprintf(d->lt_reason, sizeof d->lt_reason, "cuBLASLt");
}

/* Opens the first of names[] that loads; *used names it. */
static void* open_first(const char* const* names, size_t n, const char** used) {
  for (size_t i = 0; i < n; i++)
    if (names[i] && names[i][0]) {
      void* lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
      if (lib) {
        *used = names[i];
        return lib;
      }
    }
  return NULL;
}

static int load_cudnn_syms(void* lib, rlx_dnn_api* a) {
  return load_sym(lib, "cudnnGetVersion", &a->get_version) &&
         load_sym(lib, "cudnnGetErrorString", &a->get_error_string) &&
         load_sym(lib, "cudnnCreate", &a->create) && load_sym(lib, "cudnnDestroy", &a->destroy) &&
         load_sym(lib, "cudnnSetStream", &a->set_stream) &&
         load_sym(lib, "cudnnCreateTensorDescriptor", &a->create_tensor) &&
         load_sym(lib, "cudnnSetTensorNdDescriptor", &a->set_tensor_nd) &&
         load_sym(lib, "cudnnDestroyTensorDescriptor", &a->destroy_tensor) &&
         load_sym(lib, "cudnnCreateFilterDescriptor", &a->create_filter) &&
         load_sym(lib, "cudnnSetFilterNdDescriptor", &a->set_filter_nd) &&
         load_sym(lib, "cudnnDestroyFilterDescriptor", &a->destroy_filter) &&
         load_sym(lib, "cudnnCreateConvolutionDescriptor", &a->create_conv) &&
         load_sym(lib, "cudnnSetConvolutionNdDescriptor", &a->set_conv_nd) &&
         load_sym(lib, "cudnnSetConvolutionGroupCount", &a->set_conv_groups) &&
         load_sym(lib, "cudnnSetConvolutionMathType", &a->set_conv_math) &&
         load_sym(lib, "cudnnDestroyConvolutionDescriptor", &a->destroy_conv) &&
         load_sym(lib, "cudnnCreateActivationDescriptor", &a->create_act) &&
         load_sym(lib, "cudnnSetActivationDescriptor", &a->set_act) &&
         load_sym(lib, "cudnnDestroyActivationDescriptor", &a->destroy_act) &&
         load_sym(lib, "cudnnFindConvolutionForwardAlgorithm", &a->find_fwd) &&
         load_sym(lib, "cudnnGetConvolutionForwardAlgorithm_v7", &a->heur_fwd) &&
         load_sym(lib, "cudnnGetConvolutionForwardWorkspaceSize", &a->fwd_ws) &&
         load_sym(lib, "cudnnFindConvolutionBackwardDataAlgorithm", &a->find_bwd_data) &&
         load_sym(lib, "cudnnGetConvolutionBackwardDataAlgorithm_v7", &a->heur_bwd_data) &&
         load_sym(lib, "cudnnGetConvolutionBackwardDataWorkspaceSize", &a->bwd_data_ws) &&
         load_sym(lib, "cudnnConvolutionForward", &a->forward) &&
         load_sym(lib, "cudnnConvolutionBiasActivationForward", &a->forward_fused) &&
         load_sym(lib, "cudnnConvolutionBackwardData", &a->backward_data) &&
         load_sym(lib, "cudnnTransformTensor", &a->transform) &&
         load_sym(lib, "cudnnAddTensor", &a->add_tensor);
}

/* cuDNN 9 is optional: without it (or with RLX_CUDNN_LIB naming a file that
 * does not load) convolutions are decomposed into the own kernels. With
 * RLX_CUDNN_LIB set, only that file is tried, so it can also switch cuDNN
 * off. Handles are per executable (cuda.c): a handle carries its stream. */
static void load_cudnn(rlx_cuda_dev* d) {
  const char* env = rlx_env_str(RLX_ENV_CUDNN_LIB);
  const char* names[] = {"libcudnn.so.9", "libcudnn.so", "/usr/local/cuda/lib64/libcudnn.so.9",
                         "/usr/local/cuda/lib/libcudnn.so.9"};
  const char* libname = "libcudnn";
  void* lib = env && env[0] ? open_first(&env, 1, &libname)
                            : open_first(names, sizeof names / sizeof names[0], &libname);
  if (!lib) {
    snprintf(d->dnn_reason, sizeof d->dnn_reason, "no cuDNN (cannot load %.100s)",
             env && env[0] ? env : "libcudnn.so.9");
    return;
  }
  rlx_dnn_api a;
  memset(&a, 0, sizeof a);
  if (!load_cudnn_syms(lib, &a)) {
    snprintf(d->dnn_reason, sizeof d->dnn_reason, "%.100s lacks cuDNN 9 symbols", libname);
    return;
  }
  /* The weight gradient's calls are optional: all four or none. */
  if (!load_sym(lib, "cudnnFindConvolutionBackwardFilterAlgorithm", &a.find_bwd_filter) ||
      !load_sym(lib, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", &a.heur_bwd_filter) ||
      !load_sym(lib, "cudnnGetConvolutionBackwardFilterWorkspaceSize", &a.bwd_filter_ws) ||
      !load_sym(lib, "cudnnConvolutionBackwardFilter", &a.backward_filter))
    a.find_bwd_filter = a.heur_bwd_filter = NULL, a.bwd_filter_ws = NULL, a.backward_filter = NULL;
  size_t v = a.get_version();
  if (v < 90000 || v >= 100000) { /* the legacy convolution API as declared in cudnn_types.h */
    snprintf(d->dnn_reason, sizeof d->dnn_reason, "cuDNN %zu is not cuDNN 9", v);
    return;
  }
  d->dnn = a;
  d->have_dnn = 1;
  snprintf(d->dnn_reason, sizeof d->dnn_reason, "cuDNN %zu.%zu.%zu", v / 10000, v / 100 % 100,
           v % 100);
}

static const char* kernel_names[RLX_CUDA_FN_COUNT] = {
#define RLX_CUDA_FN_NAME(e, name, family) #name,
    RLX_CUDA_KERNELS(RLX_CUDA_FN_NAME)
#undef RLX_CUDA_FN_NAME
};
static const char* kernel_families[RLX_CUDA_FN_COUNT] = {
#define RLX_CUDA_FN_FAMILY(e, name, family) #family,
    RLX_CUDA_KERNELS(RLX_CUDA_FN_FAMILY)
#undef RLX_CUDA_FN_FAMILY
};

static int fail_cu(rlx_cuda_dev* d, CUresult r, const char* call) {
  const char* s = NULL;
  if (d->cu.get_error_string) d->cu.get_error_string(r, &s);
  snprintf(g_reason, sizeof g_reason, "%s failed: %s (%d)", call, s ? s : "?", (int)r);
  return 0;
}

static int load_modules(rlx_cuda_dev* d) {
  for (int b = 0; b < rlx_cuda_n_blobs; b++) {
    CUmodule m;
    CUresult r = d->cu.module_load_data(&m, rlx_cuda_blobs[b].data);
    if (r != CUDA_SUCCESS) {
      char call[96];
      snprintf(call, sizeof call, "cuModuleLoadData(%s)", rlx_cuda_blobs[b].name);
      return fail_cu(d, r, call);
    }
    /* Each kernel is looked up only in its own family's module. */
    for (int f = 0; f < RLX_CUDA_FN_COUNT; f++) {
      if (strcmp(kernel_families[f], rlx_cuda_blobs[b].name) != 0) continue;
      if ((r = d->cu.module_get_function(&d->fn[f], m, kernel_names[f])) != CUDA_SUCCESS)
        return fail_cu(d, r, kernel_names[f]);
    }
  }
  for (int f = 0; f < RLX_CUDA_FN_COUNT; f++)
    if (!d->fn[f]) {
      snprintf(g_reason, sizeof g_reason, "kernel %s missing from the embedded modules",
               kernel_names[f]);
      return 0;
    }
  /* The attention kernels keep Q, K/V and P tiles in shared memory. */
  rlx_cuda_fn big[] = {RLX_CUDA_FN_ATTN_D64, RLX_CUDA_FN_ATTN_D128, RLX_CUDA_FN_ATTN_D256,
                       RLX_CUDA_FN_ATTN_D64_SPLIT, RLX_CUDA_FN_ATTN_D128_SPLIT,
                       RLX_CUDA_FN_ATTN_D256_SPLIT, RLX_CUDA_FN_ATTN_MMA_BF16_D128,
                       RLX_CUDA_FN_ATTN_MMA_F16_D128, RLX_CUDA_FN_ATTN_MMA_BF16_D64,
                       RLX_CUDA_FN_ATTN_MMA_F16_D64, RLX_CUDA_FN_ATTN_F32_D64,
                       RLX_CUDA_FN_ATTN_F32_D128R8, RLX_CUDA_FN_ATTN_BWD_Q64,
                       RLX_CUDA_FN_ATTN_BWD_Q128, RLX_CUDA_FN_ATTN_BWD_K64,
                       RLX_CUDA_FN_ATTN_BWD_K128, RLX_CUDA_FN_ATTN_BWD_MMA_Q_BF16_D64,
                       RLX_CUDA_FN_ATTN_BWD_MMA_Q_BF16_D128, RLX_CUDA_FN_ATTN_BWD_MMA_Q_F16_D64,
                       RLX_CUDA_FN_ATTN_BWD_MMA_Q_F16_D128, RLX_CUDA_FN_ATTN_BWD_MMA_K_BF16_D64,
                       RLX_CUDA_FN_ATTN_BWD_MMA_K_BF16_D128, RLX_CUDA_FN_ATTN_BWD_MMA_K_F16_D64,
                       RLX_CUDA_FN_ATTN_BWD_MMA_K_F16_D128, RLX_CUDA_FN_ATTN_F32TC_D64,
                       RLX_CUDA_FN_ATTN_F32TC_D128, RLX_CUDA_FN_ATTN_BWD_F32TC_Q64,
                       RLX_CUDA_FN_ATTN_BWD_F32TC_Q128, RLX_CUDA_FN_ATTN_BWD_F32TC_K64,
                       RLX_CUDA_FN_ATTN_BWD_F32TC_K128,
                       /* the decode GEMV keeps x (K floats) in shared memory */
                       RLX_CUDA_FN_DQMM_GEMV_Q4_0_M1, RLX_CUDA_FN_DQMM_GEMV_Q4_1_M1,
                       RLX_CUDA_FN_DQMM_GEMV_Q5_0_M1, RLX_CUDA_FN_DQMM_GEMV_Q5_1_M1,
                       RLX_CUDA_FN_DQMM_GEMV_Q8_0_M1, RLX_CUDA_FN_DQMM_GEMV_Q2_K_M1,
                       RLX_CUDA_FN_DQMM_GEMV_Q3_K_M1, RLX_CUDA_FN_DQMM_GEMV_Q4_K_M1,
                       RLX_CUDA_FN_DQMM_GEMV_Q5_K_M1, RLX_CUDA_FN_DQMM_GEMV_Q6_K_M1,
                       /* and the split-K limb GEMV's W stages (up to ~72 KB for q8_0) */
                       RLX_CUDA_FN_DQMM_GEMV_Q4_0_S1, RLX_CUDA_FN_DQMM_GEMV_Q4_1_S1,
                       RLX_CUDA_FN_DQMM_GEMV_Q5_0_S1, RLX_CUDA_FN_DQMM_GEMV_Q5_1_S1,
                       RLX_CUDA_FN_DQMM_GEMV_Q8_0_S1, RLX_CUDA_FN_DQMM_GEMV_Q2_K_S1,
                       RLX_CUDA_FN_DQMM_GEMV_Q3_K_S1, RLX_CUDA_FN_DQMM_GEMV_Q4_K_S1,
                       RLX_CUDA_FN_DQMM_GEMV_Q5_K_S1, RLX_CUDA_FN_DQMM_GEMV_Q6_K_S1};
  /* dynamic + static shared memory may not pass the opt-in limit: asking
   * for all of it as dynamic from a kernel with static shared memory fails
   * and leaves the 48 KB default (a launch error later) */
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    int static_bytes = 0;
    if (d->cu.func_get_attribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, d->fn[big[i]]) != CUDA_SUCCESS)
      static_bytes = 0;
    d->cu.func_set_attribute(d->fn[big[i]], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             d->smem_optin - static_bytes);
  }
  return 1;
}

static int init_device(rlx_cuda_dev* d) {
  if (!load_driver(&d->cu)) return 0;
  CUresult r = d->cu.init(0);
  if (r != CUDA_SUCCESS) return fail_cu(d, r, "cuInit");
  int n = 0;
  r = d->cu.device_get_count(&n);
  if (r != CUDA_SUCCESS) return fail_cu(d, r, "cuDeviceGetCount");
  if (n < 1) {
    snprintf(g_reason, sizeof g_reason, "no CUDA device");
    return 0;
  }
  int ordinal = (int)rlx_env_int(RLX_ENV_CUDA_DEVICE);
  if ((r = d->cu.device_get(&d->dev, ordinal)) != CUDA_SUCCESS) return fail_cu(d, r, "cuDeviceGet");
  d->cu.device_get_name(d->name, (int)sizeof d->name, d->dev);
  d->cu.device_get_attribute(&d->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev);
  d->cu.device_get_attribute(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev);
  d->cu.device_get_attribute(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev);
  d->cu.device_get_attribute(&d->smem_optin,
                             CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d->dev);
  if (d->cc_major < 8) {
    snprintf(g_reason, sizeof g_reason, "%s is compute capability %d.%d; rlx needs 8.0+", d->name,
             d->cc_major, d->cc_minor);
    return 0;
  }
  if ((r = d->cu.primary_ctx_retain(&d->ctx, d->dev)) != CUDA_SUCCESS)
    return fail_cu(d, r, "cuDevicePrimaryCtxRetain");
  if ((r = d->cu.ctx_set_current(d->ctx)) != CUDA_SUCCESS) return fail_cu(d, r, "cuCtxSetCurrent");
  if (!load_modules(d)) return 0;
  load_cublaslt(d);
  load_cudnn(d);
  return 1;
}

static void init_once(void) {
  g_ok = init_device(&g_dev);
  if (g_ok)
    snprintf(g_reason, sizeof g_reason, "%.100s, sm_%d%d, %d SMs, %.60s, %.60s", g_dev.name,
             g_dev.cc_major, g_dev.cc_minor, g_dev.sm_count, g_dev.lt_reason, g_dev.dnn_reason);
}

const rlx_cuda_dev* rlx_cuda_device(char* reason, size_t cap) {
  pthread_once(&g_once, init_once);
  if (reason && cap) snprintf(reason, cap, "%s", g_reason);
  return g_ok ? &g_dev : NULL;
}

rlx_status rlx_cuda_fail(const rlx_cuda_dev* d, rlx_error* err, CUresult r, const char* call) {
  const char* s = NULL;
  if (d && d->cu.get_error_string) d->cu.get_error_string(r, &s);
  rlx_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? RLX_RESOURCE_EXHAUSTED : RLX_INTERNAL;
  return rlx_fail(err, st, "cuda: %s failed: %s (CUresult %d)", call, s ? s : "unknown error",
                  (int)r);
}

/* ------------------------------------------------------------------ generated kernels */

typedef struct gen_kernel {
  char* src;
  CUmodule module;
  CUfunction fn;
  struct gen_kernel* next;
} gen_kernel;

static pthread_mutex_t g_gen_lock = PTHREAD_MUTEX_INITIALIZER;
static gen_kernel* g_gen;
static int32_t g_gen_n;
static double g_gen_ms;

int rlx_cuda_gen_enabled(void) {
  return !rlx_env_flag(RLX_ENV_CUDA_NO_NVRTC) && rlx_nvrtc_available(NULL, 0);
}

static gen_kernel* gen_find(const char* src) { /* with g_gen_lock held */
  for (gen_kernel* k = g_gen; k; k = k->next)
    if (strcmp(k->src, src) == 0) return k;
  return NULL;
}

CUfunction rlx_cuda_gen_lookup(const char* src) {
  pthread_mutex_lock(&g_gen_lock);
  gen_kernel* k = gen_find(src);
  pthread_mutex_unlock(&g_gen_lock);
  return k ? k->fn : NULL;
}

void rlx_cuda_gen_stats(int32_t* n_kernels, double* ms) {
  pthread_mutex_lock(&g_gen_lock);
  *n_kernels = g_gen_n;
  *ms = g_gen_ms;
  pthread_mutex_unlock(&g_gen_lock);
}

/* One NVRTC compile, run on its own thread. */
typedef struct gen_job {
  const char* src;
  int cc_major, cc_minor;
  void* image;
  size_t bytes;
  double ms;
  rlx_status status;
  rlx_error err;
  pthread_t thread;
  int started;
} gen_job;

static void* gen_job_run(void* arg) {
  gen_job* j = arg;
  j->status = rlx_nvrtc_compile(j->src, j->cc_major, j->cc_minor, &j->image, &j->bytes, &j->ms,
                                &j->err);
  return NULL;
}

/* Loads a compiled image and caches it (with g_gen_lock held). */
static rlx_status gen_insert(const rlx_cuda_dev* d, gen_job* j, rlx_error* err) {
  gen_kernel* k = calloc(1, sizeof *k);
  RLX_CHECK_ALLOC(err, k);
  k->src = strdup(j->src);
  CUresult r = CUDA_SUCCESS;
  if (!k->src) r = CUDA_ERROR_OUT_OF_MEMORY;
  else if ((r = d->cu.module_load_data(&k->module, j->image)) == CUDA_SUCCESS)
    r = d->cu.module_get_function(&k->fn, k->module, RLX_NVRTC_REGION_KERNEL);
  if (r != CUDA_SUCCESS) {
    free(k->src);
    free(k);
    return rlx_cuda_fail(d, err, r, "cuModuleLoadData(generated region kernel)");
  }
  k->next = g_gen;
  g_gen = k;
  g_gen_n++;
  return RLX_OK;
}

/* The jobs for the sources not cached and not repeated in srcs. */
static int32_t gen_jobs(const rlx_cuda_dev* d, const char* const* srcs, int32_t n, gen_job* jobs) {
  int32_t m = 0;
  for (int32_t i = 0; i < n; i++) {
    int seen = gen_find(srcs[i]) != NULL;
    for (int32_t k = 0; k < m && !seen; k++) seen = strcmp(jobs[k].src, srcs[i]) == 0;
    if (seen) continue;
    memset(&jobs[m], 0, sizeof jobs[m]);
    jobs[m].src = srcs[i];
    jobs[m].cc_major = d->cc_major;
    jobs[m].cc_minor = d->cc_minor;
    m++;
  }
  return m;
}

rlx_status rlx_cuda_gen_compile(const rlx_cuda_dev* d, const char* const* srcs, int32_t n,
                                rlx_error* err) {
  if (n <= 0) return RLX_OK;
  gen_job* jobs = calloc((size_t)n, sizeof *jobs);
  RLX_CHECK_ALLOC(err, jobs);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_mutex_lock(&g_gen_lock);
  int32_t m = gen_jobs(d, srcs, n, jobs);
  /* NVRTC programs compile independently: one thread each (a thread that
   * cannot start compiles on this one). */
  for (int32_t i = 1; i < m; i++)
    jobs[i].started = pthread_create(&jobs[i].thread, NULL, gen_job_run, &jobs[i]) == 0;
  if (m > 0) gen_job_run(&jobs[0]);
  for (int32_t i = 1; i < m; i++) {
    if (jobs[i].started) pthread_join(jobs[i].thread, NULL);
    else gen_job_run(&jobs[i]);
  }
  rlx_status s = RLX_OK;
  for (int32_t i = 0; i < m; i++) {
    if (s == RLX_OK && jobs[i].status != RLX_OK) s = rlx_fail(err, jobs[i].status, "%s", jobs[i].err.msg);
    if (s == RLX_OK) s = gen_insert(d, &jobs[i], err);
    free(jobs[i].image);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  g_gen_ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  pthread_mutex_unlock(&g_gen_lock);
  free(jobs);
  return s;
}

#else
typedef int rlx_cuda_loader_unused_;
#endif
