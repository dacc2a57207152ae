/* Vulkan backend internals: the run-time loaded function table, the shared
 * device context (one per process, created on first use), the parameter
 * encoder and the per-executable state. Only vulkan*.c / vk_*.c include this. */
#ifndef RLX_BACKENDS_VULKAN_VK_INTERNAL_H
#define RLX_BACKENDS_VULKAN_VK_INTERNAL_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/vulkan/vk_backend.h"
#include "runtime/backend.h"

/* ------------------------------------------------------------ function table */

/* Every entry point we call, loaded from libvulkan.so.1 with dlopen: global
 * ones through vkGetInstanceProcAddr(NULL, ...), the rest through the
 * instance. */
#define RLX_VK_GLOBAL_FNS(X)                    \
  X(vkCreateInstance)                           \
  X(vkEnumerateInstanceLayerProperties)         \
  X(vkEnumerateInstanceExtensionProperties)     \
  X(vkEnumerateInstanceVersion)

#define RLX_VK_INSTANCE_FNS(X)                  \
  X(vkDestroyInstance)                          \
  X(vkEnumeratePhysicalDevices)                 \
  X(vkGetPhysicalDeviceProperties)              \
  X(vkGetPhysicalDeviceProperties2)             \
  X(vkGetPhysicalDeviceFeatures2)               \
  X(vkGetPhysicalDeviceQueueFamilyProperties)   \
  X(vkGetPhysicalDeviceMemoryProperties)        \
  X(vkEnumerateDeviceExtensionProperties)       \
  X(vkCreateDevice)                             \
  X(vkDestroyDevice)                            \
  X(vkGetDeviceQueue)                           \
  X(vkCreateBuffer)                             \
  X(vkDestroyBuffer)                            \
  X(vkGetBufferMemoryRequirements)              \
  X(vkAllocateMemory)                           \
  X(vkFreeMemory)                               \
  X(vkBindBufferMemory)                         \
  X(vkMapMemory)                                \
  X(vkUnmapMemory)                              \
  X(vkCreateShaderModule)                       \
  X(vkDestroyShaderModule)                      \
  X(vkCreateDescriptorSetLayout)                \
  X(vkDestroyDescriptorSetLayout)               \
  X(vkCreatePipelineLayout)                     \
  X(vkDestroyPipelineLayout)                    \
  X(vkCreateComputePipelines)                   \
  X(vkDestroyPipeline)                          \
  X(vkCreateDescriptorPool)                     \
  X(vkDestroyDescriptorPool)                    \
  X(vkAllocateDescriptorSets)                   \
  X(vkUpdateDescriptorSets)                     \
  X(vkCreateCommandPool)                        \
  X(vkDestroyCommandPool)                       \
  X(vkAllocateCommandBuffers)                   \
  X(vkFreeCommandBuffers)                       \
  X(vkBeginCommandBuffer)                       \
  X(vkEndCommandBuffer)                         \
  X(vkCmdBindPipeline)                          \
  X(vkCmdBindDescriptorSets)                    \
  X(vkCmdPushConstants)                         \
  X(vkCmdDispatch)                              \
  X(vkCmdPipelineBarrier)                       \
  X(vkCmdCopyBuffer)                            \
  X(vkCmdFillBuffer)                            \
  X(vkQueueSubmit)                              \
  X(vkQueueWaitIdle)                            \
  X(vkCreateFence)                              \
  X(vkDestroyFence)                             \
  X(vkWaitForFences)                            \
  X(vkResetFences)                              \
  X(vkGetFenceStatus)                           \
  X(vkCreateQueryPool)                          \
  X(vkDestroyQueryPool)                         \
  X(vkCmdResetQueryPool)                        \
  X(vkCmdWriteTimestamp)                        \
  X(vkGetQueryPoolResults)                      \
  X(vkDeviceWaitIdle)

#define RLX_VK_OPTIONAL_FNS(X)                  \
  X(vkCreateDebugUtilsMessengerEXT)             \
  X(vkDestroyDebugUtilsMessengerEXT)

typedef struct rlx_vk_fns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define RLX_VK_FIELD(name) PFN_##name name;
  RLX_VK_GLOBAL_FNS(RLX_VK_FIELD)
  RLX_VK_INSTANCE_FNS(RLX_VK_FIELD)
  RLX_VK_OPTIONAL_FNS(RLX_VK_FIELD)
#undef RLX_VK_FIELD
} rlx_vk_fns;

/* dlopen's libvulkan and loads the global entry points. 0 on success, else
 * a reason in `reason`. The library stays loaded for the process. */
int rlx_vk_load_library(rlx_vk_fns* f, char* reason, size_t cap);
/* Loads the instance-level (and device-level, through the instance) entry
 * points; optional ones may stay NULL. 0 on success. */
int rlx_vk_load_instance(rlx_vk_fns* f, VkInstance inst, char* reason, size_t cap);
/* "vkCreateDevice failed: VK_ERROR_OUT_OF_DEVICE_MEMORY" style name. */
const char* rlx_vk_result_name(VkResult r);

/* ------------------------------------------------------------ shaders */

typedef struct rlx_vk_shader_blob {
  const char* name;
  const uint32_t* code;
  size_t bytes;
} rlx_vk_shader_blob;

/* Generated at build time (embed_spirv.cmake). */
extern const rlx_vk_shader_blob rlx_vk_shader_table[];
extern const int rlx_vk_shader_table_count;

/* Every pipeline the backend creates: enum tag and shader (<shader>.comp,
 * embedded as SPIR-V; a "<shader>_sg" build is preferred on devices with
 * subgroup operations where one exists). The generic pipe of each kernel
 * kind comes first; the rest are fast paths picked per step (vk_params.c,
 * vk_fast.c). */
#define RLX_VK_PIPES(X)                                                                       \
  X(ELTWISE, eltwise) X(MATMUL, matmul) X(REDUCE, reduce) X(SOFTMAX, softmax)                  \
  X(ARGREDUCE, argreduce) X(CUMSUM, cumsum) X(TOPK, topk) X(GATHER, gather)                    \
  X(SCATTER, scatter) X(NORM, norm) X(ATTENTION, attention) X(ROPE, rope) X(SAMPLE, sample)    \
  X(POOL, pool) X(RESIZE, resize) X(SAMPLER, sampler) X(GNORM, gnorm)                          \
  X(ATTENTION_BWD, attention_bwd)                                                              \
  /* dense float / raw-copy elementwise, 4 per lane */                                         \
  X(ELTWISE_VEC, eltwise_vec)                                                                  \
  /* softmax / norms over contiguous rows, vec4 loads */                                       \
  X(ROWS, rows)                                                                                \
  /* vec4-loadable f32 operands */                                                             \
  X(MATMUL_F32, matmul_f32)                                                                    \
  /* M <= 4 */                                                                                 \
  X(GEMV, gemv)                                                                                \
  /* f16 cooperative matrices (KHR or NV build) */                                             \
  X(MATMUL_COOP, matmul_coop)                                                                  \
  /* f16 workgroup-scope cooperative matrices, whole tiles */                                  \
  X(MATMUL_CM2, matmul_cm2)                                                                    \
  /* conv: one output element per lane (depthwise; RLX_K_CONV's generic pipe) */              \
  X(CONV_DIRECT, conv_direct)                                                                  \
  /* conv as a tiled implicit GEMM */                                                          \
  X(CONV, conv)                                                                                \
  /* f16 conv on cooperative matrices (KHR or NV build) */                                     \
  X(CONV_COOP, conv_coop)                                                                      \
  /* pool backward: one dx element per lane */                                                 \
  X(POOL_BWD, pool_bwd)                                                                        \
  /* norm / softmax backward rows (the generic pipe of NORM_BWD, SOFTMAX_BWD) */               \
  X(ROWS_BWD, rows_bwd)                                                                        \
  /* training: cross-entropy rows / mean / backward, gather backward, optimizer updates */     \
  X(XENT, xent) X(GATHER_BWD, gather_bwd) X(OPT_UPDATE, opt_update)                          \
  /* MoE: GroupedMatMul with float experts, one output element per lane */                    \
  X(GROUPED_MATMUL, grouped_matmul)                                                         \
  /* DequantMatMul: decode GEMV (the kind's generic pipe), prefill tiles, the */                \
  /* transposed (gradient) role; dequant.comp */                                               \
  X(DQ_GEMV, dequant_gemv) X(DQ_TILE, dequant_tile) X(DQ_T, dequant_t)                      \
  /* DequantGroupedMatMul (quantized experts): decode GEMV, prefill tiles; */                  \
  /* grouped_dequant.comp, both roles, picked in vk_params.c */                                 \
  X(GQ_GEMV, grouped_dequant_gemv) X(GQ_TILE, grouped_dequant_tile)

typedef enum rlx_vk_pipe {
#define RLX_VK_PIPE_ENUM(e, shader) RLX_VK_PIPE_##e,
  RLX_VK_PIPES(RLX_VK_PIPE_ENUM)
#undef RLX_VK_PIPE_ENUM
  RLX_VK_PIPE_COUNT
} rlx_vk_pipe;

/* Generic pipe of each kernel kind (src/backends/kernels.def), expanded into
 * vk_params.c's per-kind table: a kind without a row here does not compile.
 * RLX_VK_PIPE_COUNT = no kernel: the step runs on the host fallback. */
#define RLX_VK_KIND_COPY RLX_VK_PIPE_ELTWISE
#define RLX_VK_KIND_BINARY RLX_VK_PIPE_ELTWISE
#define RLX_VK_KIND_COMPARE RLX_VK_PIPE_ELTWISE
#define RLX_VK_KIND_WHERE RLX_VK_PIPE_ELTWISE
#define RLX_VK_KIND_UNARY RLX_VK_PIPE_ELTWISE
#define RLX_VK_KIND_MATMUL RLX_VK_PIPE_MATMUL
#define RLX_VK_KIND_REDUCE RLX_VK_PIPE_REDUCE
#define RLX_VK_KIND_ARG_REDUCE RLX_VK_PIPE_ARGREDUCE
#define RLX_VK_KIND_SOFTMAX RLX_VK_PIPE_SOFTMAX
#define RLX_VK_KIND_CUMSUM RLX_VK_PIPE_CUMSUM
#define RLX_VK_KIND_TOPK RLX_VK_PIPE_TOPK
#define RLX_VK_KIND_GATHER RLX_VK_PIPE_GATHER
#define RLX_VK_KIND_SCATTER_ADD RLX_VK_PIPE_SCATTER
#define RLX_VK_KIND_NORM RLX_VK_PIPE_NORM
#define RLX_VK_KIND_ATTENTION RLX_VK_PIPE_ATTENTION
#define RLX_VK_KIND_ROPE RLX_VK_PIPE_ROPE
#define RLX_VK_KIND_SAMPLE RLX_VK_PIPE_SAMPLE
#define RLX_VK_KIND_POOL RLX_VK_PIPE_POOL
#define RLX_VK_KIND_RESIZE RLX_VK_PIPE_RESIZE
#define RLX_VK_KIND_SAMPLER RLX_VK_PIPE_SAMPLER
#define RLX_VK_KIND_CONV RLX_VK_PIPE_CONV_DIRECT /* GEMM kernels picked in vk_params.c */
#define RLX_VK_KIND_GROUP_NORM RLX_VK_PIPE_GNORM
#define RLX_VK_KIND_CONV_WGRAD RLX_VK_PIPE_COUNT /* decomposed (rlx_shader_supports_node) */
#define RLX_VK_KIND_POOL_BACKWARD RLX_VK_PIPE_POOL_BWD
#define RLX_VK_KIND_HOST RLX_VK_PIPE_COUNT
#define RLX_VK_KIND_ATTENTION_BWD RLX_VK_PIPE_ATTENTION_BWD
#define RLX_VK_KIND_NORM_BWD RLX_VK_PIPE_ROWS_BWD
#define RLX_VK_KIND_SOFTMAX_BWD RLX_VK_PIPE_ROWS_BWD
#define RLX_VK_KIND_XENT RLX_VK_PIPE_XENT
#define RLX_VK_KIND_GATHER_BACKWARD RLX_VK_PIPE_GATHER_BWD
#define RLX_VK_KIND_OPT_UPDATE RLX_VK_PIPE_OPT_UPDATE
#define RLX_VK_KIND_REGION RLX_VK_PIPE_COUNT /* no kernel yet: the pass does not fuse here */
/* the GEMV; vk_params.c picks the tiled or transposed build per step */
#define RLX_VK_KIND_DEQUANT_MATMUL RLX_VK_PIPE_DQ_GEMV
#define RLX_VK_KIND_GROUPED_MATMUL RLX_VK_PIPE_GROUPED_MATMUL

/* ------------------------------------------------------------ context */

typedef struct rlx_vk_context {
  rlx_vk_fns f;
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice phys;
  VkDevice device;
  VkQueue queue;
  uint32_t queue_family;
  uint32_t instance_api; /* the apiVersion the instance was created with */
  VkPhysicalDeviceMemoryProperties mem;
  VkPhysicalDeviceLimits limits;
  char device_name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
  int software; /* a CPU implementation (lavapipe): usable, never "best" */
  int validation; /* the Khronos layer is on */
  int subgroups;  /* subgroup arithmetic + vote in compute (row-op reductions) */
  uint32_t subgroup_size;
  uint64_t max_allocation; /* maxMemoryAllocationSize */
  uint64_t max_buffer;     /* maxBufferSize (0: not reported, before Vulkan 1.3) */
  /* f16 x f16 -> f32 16x16x16 subgroup cooperative matrices: 0 none, 1 through
   * VK_KHR_cooperative_matrix, 2 through VK_NV_cooperative_matrix. */
  int coopmat;
  /* Workgroup-scope f16 cooperative matrices (VK_NV_cooperative_matrix2,
   * vk_coopmat.c): the matmul_cm2 build in use (NULL: none), its tile
   * (TM, TN, TK) and the workgroup size the device runs it at. */
  const char* cm2_shader;
  int cm2_tile[3];
  uint32_t cm2_invocations;
  /* RLX_VK_PIPELINE_STATS=1 on a device with VK_KHR_pipeline_executable_properties:
   * every pipeline's compiler statistics (registers, spills...) go to stderr. */
  int pipeline_stats;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout pipe_layout;
  VkPipeline pipes[RLX_VK_PIPE_COUNT]; /* created on first use */
  pthread_mutex_t lock;                /* pipes[] and queue submission */
} rlx_vk_context;

/* The process-wide context, created on first call (thread-safe). On failure
 * returns NULL and the reason (also kept for later calls). */
rlx_vk_context* rlx_vk_context_get(char* reason, size_t cap);
/* Pipeline for a shader family, created on first use. */
rlx_status rlx_vk_pipeline(rlx_vk_context* c, rlx_vk_pipe p, rlx_error* err, VkPipeline* out);
/* Cooperative matrices (vk_coopmat.c): sets c->coopmat from the device's
 * extensions, features and listed shapes; before device creation, chains
 * the feature into *chain (storage: *feat) and returns the extension to
 * enable (NULL: none); the embedded shader for the matmul_coop pipeline. */
void rlx_vk_coopmat_detect(rlx_vk_context* c);
const char* rlx_vk_coopmat_enable(const rlx_vk_context* c,
                                  VkPhysicalDeviceCooperativeMatrixFeaturesNV* feat, void** chain);
const char* rlx_vk_coopmat_shader(const rlx_vk_context* c);
/* The same for the conv_coop pipeline. */
const char* rlx_vk_coopmat_conv_shader(const rlx_vk_context* c);
/* VkPhysicalDeviceCooperativeMatrix2FeaturesNV (VK_NV_cooperative_matrix2
 * postdates the installed headers; the registry's layout). */
typedef struct rlx_vk_cm2_features {
  VkStructureType sType;
  void* pNext;
  VkBool32 workgroup_scope, flexible_dimensions, reductions, conversions, per_element_operations,
      tensor_addressing, block_loads;
} rlx_vk_cm2_features;
/* The same for workgroup-scope matrices (after rlx_vk_coopmat_detect):
 * sets c->cm2_*, and before device creation chains the features. */
void rlx_vk_cm2_detect(rlx_vk_context* c);
const char* rlx_vk_cm2_enable(const rlx_vk_context* c, rlx_vk_cm2_features* feat, void** chain);
int rlx_vk_has_device_extension(rlx_vk_context* c, const char* name);
/* Validation messages (warnings + errors) seen since the process started. */
uint64_t rlx_vk_validation_count(void);

/* A buffer with its own memory. */
typedef struct rlx_vk_buffer {
  VkBuffer buf;
  VkDeviceMemory mem;
  VkDeviceSize size;
  void* map; /* persistent mapping when host-visible */
} rlx_vk_buffer;

/* host_visible: mapped, coherent (staging, params, run state); else
 * device-local (the arena). */
rlx_status rlx_vk_buffer_create(rlx_vk_context* c, VkDeviceSize size, int host_visible,
                                rlx_error* err, rlx_vk_buffer* out);
void rlx_vk_buffer_destroy(rlx_vk_context* c, rlx_vk_buffer* b);
/* Submits one command buffer and waits on `fence` (then resets it). */
rlx_status rlx_vk_submit_wait(rlx_vk_context* c, VkCommandBuffer cb, VkFence fence,
                              rlx_error* err);
/* Fails with the VkResult's name and the call that returned it. */
rlx_status rlx_vk_fail(rlx_error* err, VkResult r, const char* call);

/* ------------------------------------------------------------ step encoding */

/* How a step is dispatched. */
typedef struct rlx_vk_dispatch {
  rlx_vk_pipe pipe;
  uint32_t groups_x, groups_y; /* 0 groups: nothing to do */
} rlx_vk_dispatch;

/* Encodes step `index` into its RLXVK_REC_WORDS-word record and picks its
 * pipeline and grid. Returns 0 if the step can run on the GPU, else 1 (it
 * then runs on the host fallback: unsupported dtype or a size the 32-bit
 * shader addressing cannot hold). */
int rlx_vk_encode_step(const rlx_step* s, int32_t index, uint64_t arena_bytes,
                       uint32_t max_groups_x, int32_t* words, rlx_vk_dispatch* out);
/* vk_fast.c: moves a step onto a vectorised kernel (pipe, work items,
 * per_group, its extra record words) where its views (`views`: out0 then
 * the inputs, coalesced for elementwise kinds) allow. 1 if it did. */
int rlx_vk_pick_fast(const rlx_step* s, const rlx_view* views, int n_views, int32_t* words,
                     int64_t* items, int* per_group, rlx_vk_pipe* pipe);
/* Whether the backend runs node ni natively (the vtable's supports()). */
int rlx_vk_supports_node(const rlx_graph* g, int32_t ni);

#endif
