/* Cooperative matrices for the f16 matmul kernel (shaders/matmul_coop.comp):
 * whether the device multiplies 16x16x16 f16 x f16 -> f32 subgroup-scope
 * matrices through VK_KHR_cooperative_matrix (preferred) or
 * VK_NV_cooperative_matrix, and what device creation must then enable.
 *
 * The installed Vulkan headers (1.3.239) predate the KHR extension, so its
 * few structures and enums are declared here with the registry's values;
 * the field layout is the registry's. RLX_VK_COOPMAT=0 turns the kernel off,
 * RLX_VK_COOPMAT=nv prefers the NV extension where both exist. */
#ifdef RLX_HAVE_VULKAN
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_internal.h"

#define KHR_STYPE_FEATURES ((VkStructureType)1000506000)
#define KHR_STYPE_PROPERTIES ((VkStructureType)1000506001)
#define KHR_EXT_NAME "VK_KHR_cooperative_matrix"
enum { COMPONENT_F16 = 0, COMPONENT_F32 = 1, SCOPE_SUBGROUP = 3 };

/* VkPhysicalDeviceCooperativeMatrixFeaturesKHR has the NV struct's layout
 * (sType, pNext, cooperativeMatrix, cooperativeMatrixRobustBufferAccess);
 * the NV type is used for both, with the KHR sType where it applies. */
typedef VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat_features;

typedef struct khr_coopmat_properties {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize, NSize, KSize;
  uint32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
  VkBool32 saturatingAccumulation;
  uint32_t scope; /* VkScopeKHR */
} khr_coopmat_properties;

typedef VkResult(VKAPI_PTR* khr_props_fn)(VkPhysicalDevice, uint32_t*, khr_coopmat_properties*);

int rlx_vk_has_device_extension(rlx_vk_context* c, const char* name) {
  uint32_t n = 0;
  if (c->f.vkEnumerateDeviceExtensionProperties(c->phys, NULL, &n, NULL) != VK_SUCCESS || !n)
    return 0;
  VkExtensionProperties* e = calloc(n, sizeof *e);
  if (!e) return 0;
  int found = 0;
  if (c->f.vkEnumerateDeviceExtensionProperties(c->phys, NULL, &n, e) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = strcmp(e[i].extensionName, name) == 0;
  free(e);
  return found;
}

static int shape_fits(uint32_t m, uint32_t n, uint32_t k, uint32_t a, uint32_t b, uint32_t cty,
                      uint32_t r, uint32_t scope) {
  return m == 16 && n == 16 && k == 16 && a == COMPONENT_F16 && b == COMPONENT_F16 &&
         cty == COMPONENT_F32 && r == COMPONENT_F32 && scope == SCOPE_SUBGROUP;
}

static int khr_lists_shape(rlx_vk_context* c) {
  khr_props_fn get = (khr_props_fn)c->f.vkGetInstanceProcAddr(
      c->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  uint32_t n = 0;
  if (!get || get(c->phys, &n, NULL) != VK_SUCCESS || n == 0) return 0;
  khr_coopmat_properties* p = calloc(n, sizeof *p);
  if (!p) return 0;
  for (uint32_t i = 0; i < n; i++) p[i].sType = KHR_STYPE_PROPERTIES;
  int ok = 0;
  if (get(c->phys, &n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !ok; i++)
      ok = shape_fits(p[i].MSize, p[i].NSize, p[i].KSize, p[i].AType, p[i].BType, p[i].CType,
                      p[i].ResultType, p[i].scope);
  free(p);
  return ok;
}

static int nv_lists_shape(rlx_vk_context* c) {
  PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
      (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)c->f.vkGetInstanceProcAddr(
          c->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
  uint32_t n = 0;
  if (!get || get(c->phys, &n, NULL) != VK_SUCCESS || n == 0) return 0;
  VkCooperativeMatrixPropertiesNV* p = calloc(n, sizeof *p);
  if (!p) return 0;
  for (uint32_t i = 0; i < n; i++) p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  int ok = 0;
  if (get(c->phys, &n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !ok; i++)
      ok = shape_fits(p[i].MSize, p[i].NSize, p[i].KSize, (uint32_t)p[i].AType,
                      (uint32_t)p[i].BType, (uint32_t)p[i].CType, (uint32_t)p[i].DType,
                      (uint32_t)p[i].scope);
  free(p);
  return ok;
}

/* The feature bit of the chosen extension (1 = KHR, 2 = NV). */
static int feature_on(rlx_vk_context* c, int which) {
  coopmat_features cf = {.sType = which == 1 ? KHR_STYPE_FEATURES
                                             : VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &cf};
  c->f.vkGetPhysicalDeviceFeatures2(c->phys, &f2);
  return cf.cooperativeMatrix == VK_TRUE;
}

static int embedded(const char* name) {
  for (int i = 0; i < rlx_vk_shader_table_count; i++)
    if (strcmp(rlx_vk_shader_table[i].name, name) == 0) return 1;
  return 0;
}

void rlx_vk_coopmat_detect(rlx_vk_context* c) {
  c->coopmat = 0;
  const char* env = getenv("RLX_VK_COOPMAT");
  if (env && strcmp(env, "0") == 0) return;
  /* matmul_coop.comp lays 8 subgroups of 32 over its tile, and needs f16
   * arithmetic types and the Vulkan memory model glslc emits for it. */
  VkPhysicalDeviceVulkan12Features v12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &v12};
  c->f.vkGetPhysicalDeviceFeatures2(c->phys, &f2);
  if (c->subgroup_size != 32 || !v12.shaderFloat16 || !v12.vulkanMemoryModel) return;
  int prefer_nv = env && strcmp(env, "nv") == 0;
  int khr = embedded("matmul_coop_khr") && rlx_vk_has_device_extension(c, KHR_EXT_NAME) && feature_on(c, 1) && khr_lists_shape(c);
  int nv = embedded("matmul_coop_nv") && rlx_vk_has_device_extension(c, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) && feature_on(c, 2) &&
           nv_lists_shape(c);
  if (khr && !(prefer_nv && nv)) c->coopmat = 1;
  else if (nv) c->coopmat = 2;
}

/* Chains the extension's feature struct (kept in *feat) in front of
 * *chain and names the extension; the Vulkan 1.2 features it needs
 * (shaderFloat16, vulkanMemoryModel) are the caller's to set. */
const char* rlx_vk_coopmat_enable(const rlx_vk_context* c, VkPhysicalDeviceCooperativeMatrixFeaturesNV* feat,
                                  void** chain) {
  if (c->coopmat == 0) return NULL;
  memset(feat, 0, sizeof *feat);
  feat->sType = c->coopmat == 1 ? KHR_STYPE_FEATURES
                                : VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  feat->cooperativeMatrix = VK_TRUE;
  feat->pNext = *chain;
  *chain = feat;
  return c->coopmat == 1 ? KHR_EXT_NAME : VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
}

const char* rlx_vk_coopmat_shader(const rlx_vk_context* c) {
  return c->coopmat == 2 ? "matmul_coop_nv" : "matmul_coop_khr";
}
#else
typedef int rlx_vk_coopmat_unused;
#endif
