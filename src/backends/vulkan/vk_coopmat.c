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
#include <stdio.h>
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

/* ------------------------------------------- workgroup-scope (cm2) matrices
 *
 * VK_NV_cooperative_matrix2 lets a whole workgroup own one large matrix
 * (shaders/matmul_cm2.comp). The device lists, per type combination, the
 * granularity of M, N and K and the one workgroup size it runs them at
 * (VkCooperativeMatrixFlexibleDimensionsPropertiesNV). RLX_VK_CM2=0 turns
 * the kernel off; RLX_VK_CM2=<TMxTNxTK>[_s16] picks one of the embedded
 * tile builds (tuning; "_s16": the SPIR-V 1.6 build). */

#define CM2_EXT_NAME "VK_NV_cooperative_matrix2"
#define CM2_STYPE_FEATURES ((VkStructureType)1000593000)
#define CM2_STYPE_FLEXIBLE ((VkStructureType)1000593001)
#define CM2_STYPE_PROPERTIES ((VkStructureType)1000593002)
enum { SCOPE_WORKGROUP = 2 };

typedef struct cm2_flexible_properties {
  VkStructureType sType;
  void* pNext;
  uint32_t MGranularity, NGranularity, KGranularity;
  uint32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
  VkBool32 saturatingAccumulation;
  uint32_t scope; /* VkScopeKHR */
  uint32_t workgroupInvocations;
} cm2_flexible_properties;

typedef struct cm2_properties {
  VkStructureType sType;
  void* pNext;
  uint32_t workgroupScopeMaxWorkgroupSize;
  uint32_t flexibleDimensionsMaxDimension;
  uint32_t workgroupScopeReservedSharedMemory;
} cm2_properties;

typedef VkResult(VKAPI_PTR* cm2_flexible_fn)(VkPhysicalDevice, uint32_t*, cm2_flexible_properties*);

/* The embedded tile builds, preferred first (CMakeLists.txt builds them). */
static const struct cm2_build {
  const char* name;
  int tm, tn, tk;
} k_cm2_builds[] = {
    {"matmul_cm2_128x128x32", 128, 128, 32},
    {"matmul_cm2_128x256x32", 128, 256, 32},
    {"matmul_cm2_256x128x32", 256, 128, 32},
    {"matmul_cm2_128x128x64", 128, 128, 64},
    {"matmul_cm2_128x128x32_s16", 128, 128, 32},
};

/* The device's f16 x f16 -> f32 workgroup-scope entry: 1 and *out when
 * listed. */
static int cm2_listed(rlx_vk_context* c, cm2_flexible_properties* out) {
  cm2_flexible_fn get = (cm2_flexible_fn)c->f.vkGetInstanceProcAddr(
      c->instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
  uint32_t n = 0;
  if (!get || get(c->phys, &n, NULL) != VK_SUCCESS || n == 0) return 0;
  cm2_flexible_properties* p = calloc(n, sizeof *p);
  if (!p) return 0;
  for (uint32_t i = 0; i < n; i++) p[i].sType = CM2_STYPE_FLEXIBLE;
  int ok = 0;
  if (get(c->phys, &n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !ok; i++) {
      ok = p[i].AType == COMPONENT_F16 && p[i].BType == COMPONENT_F16 && p[i].CType == COMPONENT_F32 &&
           p[i].ResultType == COMPONENT_F32 && p[i].scope == SCOPE_WORKGROUP && !p[i].saturatingAccumulation;
      if (ok) *out = p[i];
    }
  free(p);
  return ok;
}

static int cm2_features_on(rlx_vk_context* c) {
  rlx_vk_cm2_features f = {.sType = CM2_STYPE_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f};
  c->f.vkGetPhysicalDeviceFeatures2(c->phys, &f2);
  return f.workgroup_scope && f.flexible_dimensions;
}

static cm2_properties cm2_limits(rlx_vk_context* c) {
  cm2_properties p = {.sType = CM2_STYPE_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p};
  c->f.vkGetPhysicalDeviceProperties2(c->phys, &p2);
  return p;
}

static int cm2_build_fits(const struct cm2_build* b, const cm2_flexible_properties* fp,
                          const cm2_properties* lim) {
  if (!fp->MGranularity || !fp->NGranularity || !fp->KGranularity) return 0;
  if (b->tm % (int)fp->MGranularity || b->tn % (int)fp->NGranularity || b->tk % (int)fp->KGranularity)
    return 0;
  uint32_t most = lim->flexibleDimensionsMaxDimension;
  return most == 0 || ((uint32_t)b->tm <= most && (uint32_t)b->tn <= most && (uint32_t)b->tk <= most);
}

void rlx_vk_cm2_detect(rlx_vk_context* c) {
  c->cm2_shader = NULL;
  const char* env = getenv("RLX_VK_CM2");
  if (c->coopmat != 1 || (env && strcmp(env, "0") == 0)) return;
  cm2_flexible_properties fp;
  if (!rlx_vk_has_device_extension(c, CM2_EXT_NAME) || !cm2_features_on(c) || !cm2_listed(c, &fp)) return;
  cm2_properties lim = cm2_limits(c);
  if (getenv("RLX_VK_COOPMAT_INFO"))
    fprintf(stderr,
            "vulkan cm2: granularity M %u N %u K %u, %u invocations, max dimension %u, "
            "max workgroup %u, reserved shared memory %u bytes\n",
            fp.MGranularity, fp.NGranularity, fp.KGranularity, fp.workgroupInvocations,
            lim.flexibleDimensionsMaxDimension, lim.workgroupScopeMaxWorkgroupSize,
            lim.workgroupScopeReservedSharedMemory);
  if (fp.workgroupInvocations == 0 || fp.workgroupInvocations > c->limits.maxComputeWorkGroupSize[0])
    return;
  for (size_t i = 0; i < sizeof k_cm2_builds / sizeof k_cm2_builds[0]; i++) {
    const struct cm2_build* b = &k_cm2_builds[i];
    int wanted = env ? strcmp(b->name + strlen("matmul_cm2_"), env) == 0 : 1;
    if (!wanted || !embedded(b->name) || !cm2_build_fits(b, &fp, &lim)) continue;
    c->cm2_shader = b->name;
    c->cm2_tile[0] = b->tm;
    c->cm2_tile[1] = b->tn;
    c->cm2_tile[2] = b->tk;
    c->cm2_invocations = fp.workgroupInvocations;
    return;
  }
}

const char* rlx_vk_cm2_enable(const rlx_vk_context* c, rlx_vk_cm2_features* feat, void** chain) {
  if (!c->cm2_shader) return NULL;
  memset(feat, 0, sizeof *feat);
  feat->sType = CM2_STYPE_FEATURES;
  feat->workgroup_scope = feat->flexible_dimensions = VK_TRUE;
  feat->pNext = *chain;
  *chain = feat;
  return CM2_EXT_NAME;
}
#else
typedef int rlx_vk_coopmat_unused;
#endif
