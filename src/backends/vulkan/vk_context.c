/* The process-wide Vulkan context: instance (+ the Khronos validation layer
 * and a message counter when RLX_VK_VALIDATION=1), the first physical device
 * with a compute queue and the features our shaders need, the descriptor set
 * and pipeline layouts every pipeline shares, pipelines made on first use,
 * and buffer / submission helpers.
 *
 * One context serves every executable (pipelines are compiled once, clones
 * share them); it lives until the process exits, since tearing a device down
 * while another thread may compile for it would need reference counting for
 * no practical gain. */
#ifdef RLX_HAVE_VULKAN
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/env.h"
#include "backends/vulkan/shaders/layout.h"
#include "backends/vulkan/vk_internal.h"

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static rlx_vk_context* g_ctx;
static int g_ctx_tried;
static char g_ctx_reason[256];
static atomic_uint_fast64_t g_validation_messages;


uint64_t rlx_vk_validation_count(void) { return atomic_load(&g_validation_messages); }
uint64_t rlx_vk_validation_messages(void) { return rlx_vk_validation_count(); }

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  (void)types;
  (void)user;
  if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                  VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
    atomic_fetch_add(&g_validation_messages, 1);
    fprintf(stderr, "rlx vulkan validation: %s\n", data && data->pMessage ? data->pMessage : "?");
  }
  return VK_FALSE;
}

static int want_validation(void) {
  return rlx_env_flag(RLX_ENV_VK_VALIDATION);
}

static int has_layer(rlx_vk_fns* f, const char* name) {
  uint32_t n = 0;
  if (f->vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
  VkLayerProperties* props = calloc(n, sizeof *props);
  if (!props) return 0;
  int found = 0;
  if (f->vkEnumerateInstanceLayerProperties(&n, props) == VK_SUCCESS)
    for (uint32_t i = 0; i < n; i++)
      if (strcmp(props[i].layerName, name) == 0) found = 1;
  free(props);
  return found;
}

static int create_instance(rlx_vk_context* c, char* reason, size_t cap) {
  rlx_vk_fns* f = &c->f;
  uint32_t version = VK_API_VERSION_1_0;
  if (f->vkEnumerateInstanceVersion) f->vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_2) {
    snprintf(reason, cap, "the Vulkan loader is older than 1.2");
    return 1;
  }
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "rlx";
  app.pEngineName = "rlx";
  /* 1.3 where the loader has it: the matmul_cm2 builds are SPIR-V 1.6. */
  c->instance_api = app.apiVersion = version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;
  const char* layers[1] = {"VK_LAYER_KHRONOS_validation"};
  const char* exts[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  if (want_validation()) {
    if (!has_layer(f, layers[0])) {
      snprintf(reason, cap,
               "RLX_VK_VALIDATION=1 but VK_LAYER_KHRONOS_validation is not installed "
               "(vulkan-validationlayers)");
      return 1;
    }
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = exts;
    c->validation = 1;
  }
  VkResult r = f->vkCreateInstance(&ci, NULL, &c->instance);
  if (r != VK_SUCCESS) {
    snprintf(reason, cap, "vkCreateInstance failed: %s%s", rlx_vk_result_name(r),
             r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no Vulkan driver installed?)" : "");
    return 1;
  }
  if (rlx_vk_load_instance(f, c->instance, reason, cap)) return 1;
  if (c->validation && f->vkCreateDebugUtilsMessengerEXT) {
    VkDebugUtilsMessengerCreateInfoEXT mi = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    mi.pfnUserCallback = on_validation_message;
    r = f->vkCreateDebugUtilsMessengerEXT(c->instance, &mi, NULL, &c->messenger);
    if (r != VK_SUCCESS) {
      snprintf(reason, cap, "vkCreateDebugUtilsMessengerEXT failed: %s", rlx_vk_result_name(r));
      return 1;
    }
  }
  return 0;
}

/* Features every shader relies on (see shaders/common.glsl). */
typedef struct needed_features {
  VkPhysicalDeviceFeatures2 f2;
  VkPhysicalDeviceVulkan11Features v11;
  VkPhysicalDeviceVulkan12Features v12;
} needed_features;

static void chain_features(needed_features* nf) {
  memset(nf, 0, sizeof *nf);
  nf->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  nf->v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  nf->v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  nf->f2.pNext = &nf->v11;
  nf->v11.pNext = &nf->v12;
}

/* Why device d cannot run our shaders, or NULL if it can. */
static const char* device_unfit(rlx_vk_context* c, VkPhysicalDevice d, uint32_t* family) {
  VkPhysicalDeviceProperties props;
  c->f.vkGetPhysicalDeviceProperties(d, &props);
  if (props.apiVersion < VK_API_VERSION_1_2) return "device is older than Vulkan 1.2";
  needed_features nf;
  chain_features(&nf);
  c->f.vkGetPhysicalDeviceFeatures2(d, &nf.f2);
  if (!nf.f2.features.shaderInt64) return "no shaderInt64";
  if (!nf.v11.storageBuffer16BitAccess) return "no storageBuffer16BitAccess";
  if (!nf.v12.storageBuffer8BitAccess) return "no storageBuffer8BitAccess";
  uint32_t n = 0;
  c->f.vkGetPhysicalDeviceQueueFamilyProperties(d, &n, NULL);
  VkQueueFamilyProperties q[16];
  if (n > 16) n = 16;
  c->f.vkGetPhysicalDeviceQueueFamilyProperties(d, &n, q);
  for (uint32_t i = 0; i < n; i++)
    if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      *family = i;
      return NULL;
    }
  return "no compute queue";
}

/* Subgroup reductions where compute has arithmetic + vote (RLX_VK_NO_SUBGROUP=1
 * forces the shared-memory variants, to test both). */
static void detect_subgroups(rlx_vk_context* c) {
  VkPhysicalDeviceSubgroupProperties sp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sp};
  c->f.vkGetPhysicalDeviceProperties2(c->phys, &p2);
  const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT |
                                      VK_SUBGROUP_FEATURE_ARITHMETIC_BIT |
                                      VK_SUBGROUP_FEATURE_VOTE_BIT;
  c->subgroup_size = sp.subgroupSize;
  c->subgroups = (sp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                 (sp.supportedOperations & need) == need && sp.subgroupSize >= 1 &&
                 sp.subgroupSize <= 64 && !rlx_env_flag(RLX_ENV_VK_NO_SUBGROUP);
}

/* Largest single allocation and buffer: the arena is one of each. */
static void detect_memory_limits(rlx_vk_context* c, uint32_t api_version) {
  VkPhysicalDeviceMaintenance4Properties m4 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  if (api_version >= VK_API_VERSION_1_3) m3.pNext = &m4;
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
  c->f.vkGetPhysicalDeviceProperties2(c->phys, &p2);
  c->max_allocation = m3.maxMemoryAllocationSize;
  c->max_buffer = api_version >= VK_API_VERSION_1_3 ? m4.maxBufferSize : 0;
}

static int pick_device(rlx_vk_context* c, char* reason, size_t cap) {
  uint32_t n = 0;
  VkResult r = c->f.vkEnumeratePhysicalDevices(c->instance, &n, NULL);
  if (r != VK_SUCCESS || n == 0) {
    snprintf(reason, cap, "no Vulkan device (is a driver installed? e.g. mesa-vulkan-drivers)");
    return 1;
  }
  VkPhysicalDevice devs[16];
  if (n > 16) n = 16;
  c->f.vkEnumeratePhysicalDevices(c->instance, &n, devs);
  /* Prefer a discrete GPU, then any fit device (lavapipe is a CPU device). */
  const char* why = "no device";
  int best = -1, best_rank = -1;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t fam = 0;
    const char* unfit = device_unfit(c, devs[i], &fam);
    if (unfit) { why = unfit; continue; }
    VkPhysicalDeviceProperties p;
    c->f.vkGetPhysicalDeviceProperties(devs[i], &p);
    int rank = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU     ? 3
               : p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? 2
                                                                        : 1;
    if (rank > best_rank) { best = (int)i; best_rank = rank; c->queue_family = fam; }
  }
  if (best < 0) {
    snprintf(reason, cap, "no usable Vulkan device: %s", why);
    return 1;
  }
  c->phys = devs[best];
  VkPhysicalDeviceProperties p;
  c->f.vkGetPhysicalDeviceProperties(c->phys, &p);
  c->limits = p.limits;
  detect_subgroups(c);
  rlx_vk_coopmat_detect(c);
  rlx_vk_cm2_detect(c);
  detect_memory_limits(c, p.apiVersion);
  snprintf(c->device_name, sizeof c->device_name, "%s", p.deviceName);
  c->software = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  c->f.vkGetPhysicalDeviceMemoryProperties(c->phys, &c->mem);
  return 0;
}

static int create_device(rlx_vk_context* c, char* reason, size_t cap) {
  needed_features nf;
  chain_features(&nf);
  nf.f2.features.shaderInt64 = VK_TRUE;
  nf.v11.storageBuffer16BitAccess = VK_TRUE;
  nf.v12.storageBuffer8BitAccess = VK_TRUE;
  /* The f16 cooperative-matrix matmul, where the device has it (vk_coopmat.c). */
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop;
  void* chain = nf.f2.pNext;
  const char* coop_ext = rlx_vk_coopmat_enable(c, &coop, &chain);
  nf.f2.pNext = chain;
  rlx_vk_cm2_features cm2;
  const char* cm2_ext = rlx_vk_cm2_enable(c, &cm2, &chain);
  nf.f2.pNext = chain;
  if (coop_ext) nf.v12.shaderFloat16 = nf.v12.vulkanMemoryModel = VK_TRUE;
  const char* exts[3];
  uint32_t n_ext = 0;
  if (coop_ext) exts[n_ext++] = coop_ext;
  if (cm2_ext) exts[n_ext++] = cm2_ext;
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pe = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
      .pipelineExecutableInfo = VK_TRUE};
  c->pipeline_stats = rlx_env_flag(RLX_ENV_VK_PIPELINE_STATS) &&
                      rlx_vk_has_device_extension(c, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  if (c->pipeline_stats) {
    pe.pNext = nf.f2.pNext;
    nf.f2.pNext = &pe;
    exts[n_ext++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
  }
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = c->queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.pNext = &nf.f2;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = n_ext;
  di.ppEnabledExtensionNames = exts;
  VkResult r = c->f.vkCreateDevice(c->phys, &di, NULL, &c->device);
  if (r != VK_SUCCESS) {
    snprintf(reason, cap, "vkCreateDevice failed: %s", rlx_vk_result_name(r));
    return 1;
  }
  c->f.vkGetDeviceQueue(c->device, c->queue_family, 0, &c->queue);
  return 0;
}

/* binding 0: the arena (dynamic: its offset places a step's window), 1: step
 * parameters, 2: run state; push constant: the step's record index. */
static int create_layouts(rlx_vk_context* c, char* reason, size_t cap) {
  VkDescriptorSetLayoutBinding b[3];
  memset(b, 0, sizeof b);
  for (uint32_t i = 0; i < 3; i++) {
    b[i].binding = i;
    b[i].descriptorType = i == 0 ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC
                                 : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = 3;
  li.pBindings = b;
  VkResult r = c->f.vkCreateDescriptorSetLayout(c->device, &li, NULL, &c->set_layout);
  if (r != VK_SUCCESS) {
    snprintf(reason, cap, "vkCreateDescriptorSetLayout failed: %s", rlx_vk_result_name(r));
    return 1;
  }
  VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
  VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pi.setLayoutCount = 1;
  pi.pSetLayouts = &c->set_layout;
  pi.pushConstantRangeCount = 1;
  pi.pPushConstantRanges = &pr;
  r = c->f.vkCreatePipelineLayout(c->device, &pi, NULL, &c->pipe_layout);
  if (r != VK_SUCCESS) {
    snprintf(reason, cap, "vkCreatePipelineLayout failed: %s", rlx_vk_result_name(r));
    return 1;
  }
  return 0;
}

static rlx_vk_context* context_create(char* reason, size_t cap) {
  rlx_vk_context* c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(reason, cap, "out of host memory");
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  if (rlx_vk_load_library(&c->f, reason, cap) || create_instance(c, reason, cap) ||
      pick_device(c, reason, cap) || create_device(c, reason, cap) ||
      create_layouts(c, reason, cap)) {
    /* Leave the half-made objects to the process: a failed probe happens once. */
    if (c->device && c->f.vkDestroyDevice) c->f.vkDestroyDevice(c->device, NULL);
    if (c->messenger && c->f.vkDestroyDebugUtilsMessengerEXT)
      c->f.vkDestroyDebugUtilsMessengerEXT(c->instance, c->messenger, NULL);
    if (c->instance && c->f.vkDestroyInstance) c->f.vkDestroyInstance(c->instance, NULL);
    pthread_mutex_destroy(&c->lock);
    free(c);
    return NULL;
  }
  return c;
}

rlx_vk_context* rlx_vk_context_get(char* reason, size_t cap) {
  pthread_mutex_lock(&g_ctx_lock);
  if (!g_ctx_tried) {
    g_ctx_tried = 1;
    g_ctx = context_create(g_ctx_reason, sizeof g_ctx_reason);
  }
  rlx_vk_context* c = g_ctx;
  if (!c && reason) snprintf(reason, cap, "%s", g_ctx_reason);
  pthread_mutex_unlock(&g_ctx_lock);
  return c;
}

/* ------------------------------------------------------------ pipelines */

static const char* const k_pipe_names[RLX_VK_PIPE_COUNT] = {
#define RLX_VK_PIPE_NAME(e, shader) [RLX_VK_PIPE_##e] = #shader,
    RLX_VK_PIPES(RLX_VK_PIPE_NAME)
#undef RLX_VK_PIPE_NAME
};

static const rlx_vk_shader_blob* find_blob(const char* name) {
  for (int i = 0; i < rlx_vk_shader_table_count; i++)
    if (strcmp(rlx_vk_shader_table[i].name, name) == 0) return &rlx_vk_shader_table[i];
  return NULL;
}

static void print_statistic(const VkPipelineExecutableStatisticKHR* st) {
  switch (st->format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: fprintf(stderr, " %s=%u", st->name, st->value.b32); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: fprintf(stderr, " %s=%lld", st->name, (long long)st->value.i64); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: fprintf(stderr, " %s=%llu", st->name, (unsigned long long)st->value.u64); break;
    default: fprintf(stderr, " %s=%g", st->name, st->value.f64); break;
  }
}

/* The driver's statistics of a pipeline's executables, one line each
 * (RLX_VK_PIPELINE_STATS: kernel tuning). */
static void print_pipeline_stats(rlx_vk_context* c, VkPipeline pipe, const char* name) {
  PFN_vkGetPipelineExecutablePropertiesKHR props = (PFN_vkGetPipelineExecutablePropertiesKHR)
      c->f.vkGetInstanceProcAddr(c->instance, "vkGetPipelineExecutablePropertiesKHR");
  PFN_vkGetPipelineExecutableStatisticsKHR stats = (PFN_vkGetPipelineExecutableStatisticsKHR)
      c->f.vkGetInstanceProcAddr(c->instance, "vkGetPipelineExecutableStatisticsKHR");
  if (!props || !stats) return;
  VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pipe};
  uint32_t n = 0;
  if (props(c->device, &pi, &n, NULL) != VK_SUCCESS) return;
  for (uint32_t x = 0; x < n && x < 4; x++) {
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                      .pipeline = pipe, .executableIndex = x};
    VkPipelineExecutableStatisticKHR st[32];
    uint32_t ns = 32;
    for (uint32_t i = 0; i < ns; i++)
      st[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    VkResult r = stats(c->device, &ei, &ns, st);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) continue;
    fprintf(stderr, "vulkan pipeline %s[%u]:", name, x);
    for (uint32_t i = 0; i < ns; i++) print_statistic(&st[i]);
    fprintf(stderr, "\n");
  }
}

static rlx_status make_pipeline(rlx_vk_context* c, rlx_vk_pipe p, rlx_error* err,
                                VkPipeline* out) {
  const rlx_vk_shader_blob* blob = NULL;
  if (c->subgroups) { /* a "<name>_sg" variant, where one was built */
    char sg[64];
    snprintf(sg, sizeof sg, "%s_sg", k_pipe_names[p]);
    blob = find_blob(sg);
  }
  if (p == RLX_VK_PIPE_MATMUL_COOP) blob = find_blob(rlx_vk_coopmat_shader(c));
  if (p == RLX_VK_PIPE_CONV_COOP) blob = find_blob(rlx_vk_coopmat_conv_shader(c));
  if (p == RLX_VK_PIPE_MATMUL_CM2 && c->cm2_shader) blob = find_blob(c->cm2_shader);
  if (!blob) blob = find_blob(k_pipe_names[p]);
  if (!blob)
    return rlx_fail(err, RLX_INTERNAL, "vulkan: shader '%s' was not embedded", k_pipe_names[p]);
  VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = blob->bytes;
  mi.pCode = blob->code;
  VkShaderModule mod;
  VkResult r = c->f.vkCreateShaderModule(c->device, &mi, NULL, &mod);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkCreateShaderModule");
  VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  /* matmul_cm2's workgroup size is the device's (specialization constant 0). */
  VkSpecializationMapEntry entry = {.constantID = 0, .offset = 0, .size = sizeof(uint32_t)};
  VkSpecializationInfo spec = {.mapEntryCount = 1, .pMapEntries = &entry, .dataSize = sizeof(uint32_t),
                               .pData = &c->cm2_invocations};
  if (p == RLX_VK_PIPE_MATMUL_CM2) ci.stage.pSpecializationInfo = &spec;
  ci.layout = c->pipe_layout;
  if (c->pipeline_stats) ci.flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  r = c->f.vkCreateComputePipelines(c->device, VK_NULL_HANDLE, 1, &ci, NULL, out);
  c->f.vkDestroyShaderModule(c->device, mod, NULL);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkCreateComputePipelines");
  if (c->pipeline_stats) print_pipeline_stats(c, *out, blob->name);
  return RLX_OK;
}

rlx_status rlx_vk_pipeline(rlx_vk_context* c, rlx_vk_pipe p, rlx_error* err, VkPipeline* out) {
  rlx_status s = RLX_OK;
  pthread_mutex_lock(&c->lock);
  if (!c->pipes[p]) s = make_pipeline(c, p, err, &c->pipes[p]);
  *out = c->pipes[p];
  pthread_mutex_unlock(&c->lock);
  return s;
}

/* ------------------------------------------------------------ buffers */

static int find_memory_type(const rlx_vk_context* c, uint32_t bits, VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < c->mem.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (c->mem.memoryTypes[i].propertyFlags & want) == want) return (int)i;
  return -1;
}

rlx_status rlx_vk_buffer_create(rlx_vk_context* c, VkDeviceSize size, int host_visible,
                                rlx_error* err, rlx_vk_buffer* out) {
  memset(out, 0, sizeof *out);
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = c->f.vkCreateBuffer(c->device, &bi, NULL, &out->buf);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkCreateBuffer");
  out->size = size;
  VkMemoryRequirements req;
  c->f.vkGetBufferMemoryRequirements(c->device, out->buf, &req);
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                   VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int type = host_visible ? find_memory_type(c, req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
                          : find_memory_type(c, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0) type = find_memory_type(c, req.memoryTypeBits, host_visible ? hv : 0);
  if (type < 0) {
    rlx_vk_buffer_destroy(c, out);
    return rlx_fail(err, RLX_UNAVAILABLE, "vulkan: no suitable memory type for a %s buffer",
                    host_visible ? "host-visible" : "device");
  }
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = (uint32_t)type;
  r = c->f.vkAllocateMemory(c->device, &ai, NULL, &out->mem);
  if (r != VK_SUCCESS) {
    rlx_vk_buffer_destroy(c, out);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED,
                    "vulkan: cannot allocate %llu bytes of %s memory (%s)",
                    (unsigned long long)size, host_visible ? "host-visible" : "device",
                    rlx_vk_result_name(r));
  }
  r = c->f.vkBindBufferMemory(c->device, out->buf, out->mem, 0);
  if (r == VK_SUCCESS && host_visible) r = c->f.vkMapMemory(c->device, out->mem, 0, VK_WHOLE_SIZE, 0, &out->map);
  if (r != VK_SUCCESS) {
    rlx_vk_buffer_destroy(c, out);
    return rlx_vk_fail(err, r, host_visible ? "vkMapMemory" : "vkBindBufferMemory");
  }
  return RLX_OK;
}

void rlx_vk_buffer_destroy(rlx_vk_context* c, rlx_vk_buffer* b) {
  if (!b) return;
  if (b->map) c->f.vkUnmapMemory(c->device, b->mem);
  if (b->buf) c->f.vkDestroyBuffer(c->device, b->buf, NULL);
  if (b->mem) c->f.vkFreeMemory(c->device, b->mem, NULL);
  memset(b, 0, sizeof *b);
}

rlx_status rlx_vk_submit_wait(rlx_vk_context* c, VkCommandBuffer cb, VkFence fence,
                              rlx_error* err) {
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  pthread_mutex_lock(&c->lock); /* vkQueueSubmit needs the queue externally synchronised */
  VkResult r = c->f.vkQueueSubmit(c->queue, 1, &si, fence);
  pthread_mutex_unlock(&c->lock);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkQueueSubmit");
  /* On a GPU, poll for up to ~2 ms first: a blocking wait adds the driver's
   * wake-up latency to every synchronous run. (Not on a CPU device: the
   * spinning thread would take a core from the device's own workers.) */
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  r = VK_NOT_READY;
  while (!c->software) {
    r = c->f.vkGetFenceStatus(c->device, fence);
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (r != VK_NOT_READY || (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 2000000L)
      break;
  }
  if (r == VK_NOT_READY || r == VK_SUCCESS)
    r = c->f.vkWaitForFences(c->device, 1, &fence, VK_TRUE, UINT64_MAX);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkWaitForFences");
  r = c->f.vkResetFences(c->device, 1, &fence);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkResetFences");
  return RLX_OK;
}
#else
typedef int rlx_vk_context_unused;
#endif
