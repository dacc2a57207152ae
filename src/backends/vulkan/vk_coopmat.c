/* Cooperative matrices for the f16 matmul kernels: whether the device
 * multiplies 16x16x16 f16 x f16 -> f32 subgroup-scope matrices through
 * VK_KHR_cooperative_matrix (preferred) or VK_NV_cooperative_matrix
 * (shaders/matmul_coop.comp), whether it also has VK_NV_cooperative_matrix2's
 * workgroup-scope matrices at the size shaders/matmul_cm2.comp needs, and
 * what device creation must then enable.
 *
 * The installed Vulkan headers (1.3.239) predate the KHR extension, so its
 * few structures and enums are declared here with the registry's values;
 * the field layout is the registry's. RLX_VK_COOPMAT=0 turns the kernel off,
 * RLX_VK_COOPMAT=nv prefers the NV extension where both exist. */
#ifdef RLX_HAVE_VULKAN
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
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

/* The three cooperative-matrix property queries (KHR, NV, NV flexible
 * dimensions) share this shape; each element starts with sType / pNext. */
typedef VkResult(VKAPI_PTR* list_query_fn)(VkPhysicalDevice, uint32_t*, void*);

/* The device's list from query `fn_name`: *count elements of `size` bytes
 * with sType `stype`; NULL when the query is missing, fails or lists
 * nothing. The caller frees it. */
static void* query_list(rlx_vk_context* c, const char* fn_name, size_t size, VkStructureType stype,
                        uint32_t* count) {
  list_query_fn get = (list_query_fn)c->f.vkGetInstanceProcAddr(c->instance, fn_name);
  uint32_t n = 0;
  if (!get || get(c->phys, &n, NULL) != VK_SUCCESS || n == 0) return NULL;
  unsigned char* p = calloc(n, size);
  if (!p) return NULL;
  for (uint32_t i = 0; i < n; i++) memcpy(p + i * size, &stype, sizeof stype);
  if (get(c->phys, &n, p) != VK_SUCCESS) {
    free(p);
    return NULL;
  }
  *count = n;
  return p;
}

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
  uint32_t n = 0;
  khr_coopmat_properties* p = query_list(c, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR",
                                         sizeof *p, KHR_STYPE_PROPERTIES, &n);
  int ok = 0;
  for (uint32_t i = 0; p && i < n && !ok; i++)
    ok = shape_fits(p[i].MSize, p[i].NSize, p[i].KSize, p[i].AType, p[i].BType, p[i].CType,
                    p[i].ResultType, p[i].scope);
  free(p);
  return ok;
}

static int nv_lists_shape(rlx_vk_context* c) {
  uint32_t n = 0;
  VkCooperativeMatrixPropertiesNV* p =
      query_list(c, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV", sizeof *p,
                 VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV, &n);
  int ok = 0;
  for (uint32_t i = 0; p && i < n && !ok; i++)
    ok = shape_fits(p[i].MSize, p[i].NSize, p[i].KSize, (uint32_t)p[i].AType, (uint32_t)p[i].BType,
                    (uint32_t)p[i].CType, (uint32_t)p[i].DType, (uint32_t)p[i].scope);
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
  if (rlx_env_is(RLX_ENV_VK_COOPMAT, "0")) return;
  /* matmul_coop.comp lays 8 subgroups of 32 over its tile, and needs f16
   * arithmetic types and the Vulkan memory model glslc emits for it. */
  VkPhysicalDeviceVulkan12Features v12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &v12};
  c->f.vkGetPhysicalDeviceFeatures2(c->phys, &f2);
  if (c->subgroup_size != 32 || !v12.shaderFloat16 || !v12.vulkanMemoryModel) return;
  int prefer_nv = rlx_env_is(RLX_ENV_VK_COOPMAT, "nv");
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

const char* rlx_vk_coopmat_conv_shader(const rlx_vk_context* c) {
  return c->coopmat == 2 ? "conv_coop_nv" : "conv_coop_khr";
}

/* ------------------------------------------- workgroup-scope (cm2) matrices
 *
 * VK_NV_cooperative_matrix2 lets a whole workgroup own one large matrix
 * (shaders/matmul_cm2.comp). The device lists, per type combination and
 * workgroup size, the granularity of M, N and K
 * (VkCooperativeMatrixFlexibleDimensionsPropertiesNV); the kernel needs
 * f16 x f16 -> f32 at its own workgroup size and tile, and its shared
 * memory plus the driver's reserve within the device's limit.
 * RLX_VK_CM2=0 turns the kernel off (matmul_coop takes its matmuls);
 * RLX_VK_COOPMAT_INFO=1 prints what the device lists. */

#define CM2_EXT_NAME "VK_NV_cooperative_matrix2"
#define CM2_STYPE_FEATURES ((VkStructureType)1000593000)
#define CM2_STYPE_FLEXIBLE ((VkStructureType)1000593001)
#define CM2_STYPE_PROPERTIES ((VkStructureType)1000593002)
enum { SCOPE_WORKGROUP = 2 };
/* matmul_cm2.comp's tile, workgroup size and shared memory (two slabs of
 * A[m][k] and of B[k][n] or B[n][k], rows of 16-byte words padded by one). */
enum { CM2_TM = 128, CM2_TN = 128, CM2_TK = 32, CM2_NT = 256 };
#define CM2_B_ROWS_WORDS (CM2_TN * (CM2_TK / 8 + 1) > CM2_TK * (CM2_TN / 8 + 1) ? CM2_TN * (CM2_TK / 8 + 1) : CM2_TK * (CM2_TN / 8 + 1))
#define CM2_SHARED_BYTES (2u * (CM2_TM * (CM2_TK / 8 + 1) + CM2_B_ROWS_WORDS) * 16u)

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

static int cm2_entry_fits(const cm2_flexible_properties* p) {
  return p->AType == COMPONENT_F16 && p->BType == COMPONENT_F16 && p->CType == COMPONENT_F32 &&
         p->ResultType == COMPONENT_F32 && p->scope == SCOPE_WORKGROUP && !p->saturatingAccumulation &&
         p->workgroupInvocations == CM2_NT && p->MGranularity && p->NGranularity && p->KGranularity &&
         CM2_TM % p->MGranularity == 0 && CM2_TN % p->NGranularity == 0 && CM2_TK % p->KGranularity == 0;
}

/* Whether the device lists the kernel's types at its workgroup size and
 * tile. */
static int cm2_listed(rlx_vk_context* c) {
  uint32_t n = 0;
  cm2_flexible_properties* p = query_list(c, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV",
                                          sizeof *p, CM2_STYPE_FLEXIBLE, &n);
  int ok = 0;
  for (uint32_t i = 0; p && i < n; i++) {
    if (rlx_env_flag(RLX_ENV_VK_COOPMAT_INFO))
      fprintf(stderr, "vulkan cm2 entry %u: types %u %u %u %u scope %u, granularity %u %u %u, %u invocations\n", i,
              p[i].AType, p[i].BType, p[i].CType, p[i].ResultType, p[i].scope, p[i].MGranularity,
              p[i].NGranularity, p[i].KGranularity, p[i].workgroupInvocations);
    ok |= cm2_entry_fits(&p[i]);
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

/* The kernel's dimensions and shared memory within the device's limits.
 * Past the shared-memory limit the NVIDIA driver still builds the pipeline
 * and the submit loses the device, so this is checked here. */
static int cm2_limits_fit(rlx_vk_context* c) {
  cm2_properties p = {.sType = CM2_STYPE_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p};
  c->f.vkGetPhysicalDeviceProperties2(c->phys, &p2);
  uint32_t most = p.flexibleDimensionsMaxDimension;
  if (most && (CM2_TM > most || CM2_TN > most || CM2_TK > most)) return 0;
  if (p.workgroupScopeMaxWorkgroupSize && CM2_NT > p.workgroupScopeMaxWorkgroupSize) return 0;
  return CM2_SHARED_BYTES + p.workgroupScopeReservedSharedMemory <= c->limits.maxComputeSharedMemorySize &&
         CM2_NT <= c->limits.maxComputeWorkGroupSize[0];
}

void rlx_vk_cm2_detect(rlx_vk_context* c) {
  c->cm2_shader = NULL;
  if (c->coopmat != 1 || rlx_env_is(RLX_ENV_VK_CM2, "0") || !embedded("matmul_cm2")) return;
  VkPhysicalDeviceProperties dp;
  c->f.vkGetPhysicalDeviceProperties(c->phys, &dp);
  if (c->instance_api < VK_API_VERSION_1_3 || dp.apiVersion < VK_API_VERSION_1_3) return; /* SPIR-V 1.6 */
  if (!rlx_vk_has_device_extension(c, CM2_EXT_NAME) || !cm2_features_on(c) || !cm2_listed(c) ||
      !cm2_limits_fit(c))
    return;
  c->cm2_shader = "matmul_cm2";
  c->cm2_tile[0] = CM2_TM;
  c->cm2_tile[1] = CM2_TN;
  c->cm2_tile[2] = CM2_TK;
  c->cm2_invocations = CM2_NT;
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
