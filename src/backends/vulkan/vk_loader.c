/* libvulkan loaded at run time, so one build runs on machines without it
 * (the backend then reports "unavailable: <why>"). */
#ifdef RLX_HAVE_VULKAN
#include <dlfcn.h>
#include <stdio.h>

#include "backends/vulkan/vk_internal.h"

int rlx_vk_load_library(rlx_vk_fns* f, char* reason, size_t cap) {
  static const char* names[] = {"libvulkan.so.1", "libvulkan.so"};
  void* lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(reason, cap, "no libvulkan.so.1 (install libvulkan1 and a driver, e.g. mesa-vulkan-drivers)");
    return 1;
  }
  /* dlsym returns void*; the cast through a union keeps -Wpedantic quiet. */
  union { void* p; PFN_vkGetInstanceProcAddr fn; } u;
  u.p = dlsym(lib, "vkGetInstanceProcAddr");
  if (!u.p) {
    snprintf(reason, cap, "libvulkan has no vkGetInstanceProcAddr");
    return 1;
  }
  f->vkGetInstanceProcAddr = u.fn;
#define RLX_VK_LOAD_GLOBAL(name) f->name = (PFN_##name)f->vkGetInstanceProcAddr(NULL, #name);
  RLX_VK_GLOBAL_FNS(RLX_VK_LOAD_GLOBAL)
#undef RLX_VK_LOAD_GLOBAL
  if (!f->vkCreateInstance || !f->vkEnumerateInstanceLayerProperties ||
      !f->vkEnumerateInstanceExtensionProperties) {
    snprintf(reason, cap, "libvulkan is missing core entry points");
    return 1;
  }
  return 0;
}

int rlx_vk_load_instance(rlx_vk_fns* f, VkInstance inst, char* reason, size_t cap) {
#define RLX_VK_LOAD(name)                                                  \
  f->name = (PFN_##name)f->vkGetInstanceProcAddr(inst, #name);             \
  if (!f->name) {                                                          \
    snprintf(reason, cap, "the Vulkan driver does not export %s", #name);  \
    return 1;                                                              \
  }
  RLX_VK_INSTANCE_FNS(RLX_VK_LOAD)
#undef RLX_VK_LOAD
#define RLX_VK_LOAD_OPT(name) f->name = (PFN_##name)f->vkGetInstanceProcAddr(inst, #name);
  RLX_VK_OPTIONAL_FNS(RLX_VK_LOAD_OPT)
#undef RLX_VK_LOAD_OPT
  return 0;
}

const char* rlx_vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_UNKNOWN: return "VK_ERROR_UNKNOWN";
    default: return "VkResult (unknown)";
  }
}

rlx_status rlx_vk_fail(rlx_error* err, VkResult r, const char* call) {
  rlx_status s = (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY ||
                  r == VK_ERROR_TOO_MANY_OBJECTS)
                     ? RLX_RESOURCE_EXHAUSTED
                     : RLX_INTERNAL;
  return rlx_fail(err, s, "vulkan: %s failed: %s (%d)", call, rlx_vk_result_name(r), (int)r);
}
#else
typedef int rlx_vk_loader_unused;
#endif
