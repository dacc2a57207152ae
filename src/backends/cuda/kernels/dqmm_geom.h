/* Work geometry of the DequantMatMul decode GEMV (kernels/quant.cu), one
 * definition for the kernels, their launch (cuda_launch.c) and the kernel
 * lab (bench/kernels/dequant_gemv.cu). Plain C: included by nvcc and the
 * host compiler alike. */
#ifndef RLX_CUDA_DQMM_GEOM_H
#define RLX_CUDA_DQMM_GEOM_H

#include <stdint.h>

/* Elements of a W row a warp takes per step: 32 sub-blocks of 32, one a lane. */
#define RLX_DQMM_CHUNK 1024
/* Bytes of one chunk of x as limbs: 6 x 32 uint4 words, 32 float4. */
#define RLX_DQMM_LIMB_CHUNK (6 * 512 + 512)
/* _s1: chunks of W a warp has in flight. */
#define RLX_DQMM_S1_STAGES 2
/* Most warps of an _s1 block. */
#define RLX_DQMM_S1_MAX_WARPS 8

/* W rows of an _s1 block for a scheme of cb bytes a chunk: 4 (x, read
 * once per chunk, serves 4 rows), 2 past 800 bytes a chunk (q6_K, q8_0:
 * there the stages of 4 rows cost blocks per SM; on the H200 2 rows
 * measured 3-10% faster for both, and 2-10% slower for the rest, lab
 * variant 21; 8 rows slower for all, variant 22). */
#define RLX_DQMM_S1_ROWS(cb) ((cb) > 800 ? 2 : 4)

/* Bytes of one W row's chunk in a stage buffer: the chunk's cb bytes, the
 * slack of starting at an aligned 16-byte unit, and sm_u32's overread. */
#define RLX_DQMM_SROW(cb) (((cb) + 15) / 16 * 16 + 32)

/* Chunks of a row of K elements. */
static inline int64_t rlx_dqmm_chunks(int64_t K) { return (K + RLX_DQMM_CHUNK - 1) / RLX_DQMM_CHUNK; }

/* Warps of an _s1 block: the chunks spread evenly over at most
 * RLX_DQMM_S1_MAX_WARPS warps (14 chunks: 7 warps of 2, not 8 of 1-2). */
static inline int rlx_dqmm_s1_warps(int64_t K) {
  int64_t c = rlx_dqmm_chunks(K), per = (c + RLX_DQMM_S1_MAX_WARPS - 1) / RLX_DQMM_S1_MAX_WARPS;
  return (int)((c + per - 1) / per);
}

/* Dynamic shared memory of an _s1 block for a scheme of E elements in B
 * bytes a block. */
static inline int64_t rlx_dqmm_s1_smem(int64_t E, int64_t B, int64_t K) {
  int64_t cb = RLX_DQMM_CHUNK / E * B;
  return (int64_t)rlx_dqmm_s1_warps(K) * RLX_DQMM_S1_STAGES * RLX_DQMM_S1_ROWS(cb) * RLX_DQMM_SROW(cb);
}

#endif
