// Workgroup-wide (64 invocations) sum and NaN-propagating max that every
// invocation receives. Built twice: with RLX_SUBGROUP (subgroup arithmetic,
// then one partial per subgroup in shared memory) and without (a shared
// memory tree). Both combine in a fixed order, so results are deterministic.
#ifdef RLX_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_vote : require
#endif

shared float wg_part[64];

float fmax_nan(float a, float b) { return (isnan(a) || isnan(b)) ? NAN_F : max(a, b); }

float wg_sum(float v) {
#ifdef RLX_SUBGROUP
  float s = subgroupAdd(v);
  if (subgroupElect()) wg_part[gl_SubgroupID] = s;
  barrier();
  float r = 0.0;
  for (uint i = 0u; i < gl_NumSubgroups; i++) r += wg_part[i];
  barrier();
  return r;
#else
  uint lid = gl_LocalInvocationID.x;
  wg_part[lid] = v;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (lid < s) wg_part[lid] += wg_part[lid + s];
    barrier();
  }
  float r = wg_part[0];
  barrier();
  return r;
#endif
}

float wg_max_nan(float v) {
#ifdef RLX_SUBGROUP
  bool any_nan = subgroupAny(isnan(v));
  float m = subgroupMax(isnan(v) ? -INF_F : v);
  if (subgroupElect()) wg_part[gl_SubgroupID] = any_nan ? NAN_F : m;
  barrier();
  float r = -INF_F;
  for (uint i = 0u; i < gl_NumSubgroups; i++) r = fmax_nan(r, wg_part[i]);
  barrier();
  return r;
#else
  uint lid = gl_LocalInvocationID.x;
  wg_part[lid] = v;
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (lid < s) wg_part[lid] = fmax_nan(wg_part[lid], wg_part[lid + s]);
    barrier();
  }
  float r = wg_part[0];
  barrier();
  return r;
#endif
}
