// Four consecutive elements of an f32 / f16 / bf16 view in one 16-byte
// (f32) or 8-byte (f16, bf16) access, for the vectorised kernels
// (eltwise_vec.comp, rows.comp). The caller guarantees the byte address is
// aligned to four elements. Conversions match common.glsl's scalar ones
// (round-to-nearest-even stores), so results equal the scalar kernels'.
layout(std430, set = 0, binding = 0) buffer ArenaQuad { uvec4 aq4[]; };
layout(std430, set = 0, binding = 0) buffer ArenaHalfQuad { uvec2 ah4[]; };

vec4 ld4(uint dt, uint b) {
  if (dt == RLXVK_F32) return uintBitsToFloat(aq4[b >> 4]);
  uvec2 h = ah4[b >> 3];
  if (dt == RLXVK_F16) return vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
  return vec4(uintBitsToFloat(h.x << 16), uintBitsToFloat(h.x & 0xffff0000u),
              uintBitsToFloat(h.y << 16), uintBitsToFloat(h.y & 0xffff0000u));
}

void st4(uint dt, uint b, vec4 v) {
  if (dt == RLXVK_F32) {
    aq4[b >> 4] = floatBitsToUint(v);
    return;
  }
  uvec4 u = dt == RLXVK_F16
                ? uvec4(f32_to_f16(v.x), f32_to_f16(v.y), f32_to_f16(v.z), f32_to_f16(v.w))
                : uvec4(f32_to_bf16(v.x), f32_to_bf16(v.y), f32_to_bf16(v.z), f32_to_bf16(v.w));
  ah4[b >> 3] = uvec2(u.x | (u.y << 16), u.z | (u.w << 16));
}

// Byte address of element e of a view starting at byte off.
uint at4(uint dt, uint off, uint e) { return off + e * (dt == RLXVK_F32 ? 4u : 2u); }
