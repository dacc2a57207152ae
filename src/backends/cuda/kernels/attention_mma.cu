/* Tensor-core flash-attention forward for f16 / bf16 Q, K, V (sm_80+ mma.sync
 * m16n8k16, f32 accumulation), head dims 64 and 128 with D == Dv.
 *
 * One block of 4 warps per (batch, head, 64-query tile); each warp owns 16
 * query rows, whose Q fragments stay in registers for the whole key loop.
 * Key/value tiles of 64 rows arrive in shared memory by cp.async: V of tile
 * j loads while Q·K^T and the softmax of tile j run, K of tile j+1 while
 * P·V of tile j runs. Scores and the online softmax (max, sum, rescale) are
 * f32 in the log2 domain; P is rounded to the input dtype for P·V (as every
 * flash kernel does). Causal / sliding masks skip key tiles nobody sees, and
 * per-element masking (scale, softcap, custom and bias masks, edges) runs
 * only on tiles that need it. Anything else (other dtypes, head dims,
 * unaligned strides, decode-sized query counts) takes attention.cu. */
#include "attention_common.cuh"

namespace {

constexpr int kRows = 64;   /* query rows per block and key rows per tile */
constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

RLXK_DEV uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, zero-filled when !valid (rows past the end). */
RLXK_DEV void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
RLXK_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
RLXK_DEV void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

RLXK_DEV void ldmatrix_x4(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
RLXK_DEV void ldmatrix_x4_trans(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

/* c += a (16x16, row) * b (16x8, col); f32 accumulators. */
template <bool BF>
RLXK_DEV void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  if constexpr (BF) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/* Two floats -> one register of two halves (x in the low half). */
template <bool BF>
RLXK_DEV uint32_t pack2(float x, float y) {
  if constexpr (BF) {
    __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *(uint32_t*)&v;
  } else {
    __half2 v = __floats2half2_rn(x, y);
    return *(uint32_t*)&v;
  }
}

/* Rows [r0, r0 + 64) x D halves of a strided operand into a padded tile
 * (row stride LD halves); rows past `rows` read as zero. */
template <int D, int LD>
RLXK_DEV void load_tile(uint16_t* dst, const uint16_t* src, int64_t rstride, int64_t r0,
                        int64_t rows) {
  constexpr int chunks = D / 8; /* 16-byte pieces per row */
  for (int idx = threadIdx.x; idx < kRows * chunks; idx += kThreads) {
    int r = idx / chunks, c = idx % chunks;
    bool valid = r0 + r < rows;
    const uint16_t* g = src + (valid ? (r0 + r) * rstride : 0) + c * 8;
    cp_async16(dst + r * LD + c * 8, g, valid);
  }
}

template <int D, bool BF>
__device__ void flash_mma(char* arena, const rlxk_attn& p) {
  constexpr int LD = D + 8; /* padded rows: ldmatrix's 8 row reads hit 8 distinct bank groups */
  constexpr int KD = D / 16; /* k-steps of Q·K^T over the head dim */
  constexpr int NO = D / 8;  /* output n-tiles of 8 columns */
  __shared__ __align__(16) uint16_t smem[2 * kRows * LD];
  uint16_t* QV = smem; /* Q, then each V tile (Q lives in registers by then) */
  uint16_t* Ks = smem + kRows * LD;

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3, mi = lane >> 3, mr = lane & 7;
  /* Heaviest causal tiles (the last query rows) are launched first. */
  int64_t blk = blockIdx.x;
  int64_t tile = p.q_tiles - 1 - blk % p.q_tiles, bh = blk / p.q_tiles;
  int64_t h = bh % p.H, b = bh / p.H, kvh = h / (p.H / p.Hkv);
  int64_t q0 = tile * kRows;
  const uint16_t* q = (const uint16_t*)at(arena, p.qoff) + b * p.q_sb + h * p.q_sh;
  const uint16_t* k = (const uint16_t*)at(arena, p.koff) + b * p.k_sb + kvh * p.k_sh;
  const uint16_t* v = (const uint16_t*)at(arena, p.voff) + b * p.v_sb + kvh * p.v_sh;
  const char* mask = at(arena, p.moff);

  int64_t k_begin, k_end;
  attn_key_range(p, q0, kRows, &k_begin, &k_end);
  int64_t k_first = (k_begin / kRows) * kRows;

  load_tile<D, LD>(QV, q, p.q_ss, q0, p.Sq);
  if (k_first < k_end) load_tile<D, LD>(Ks, k, p.k_ss, k_first, p.Sk);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  uint32_t qf[KD][4];
#pragma unroll
  for (int ks = 0; ks < KD; ks++)
    ldmatrix_x4(qf[ks], QV + (warp * 16 + (mi & 1) * 8 + mr) * LD + ks * 16 + (mi >> 1) * 8);

  float o[NO][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < NO; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const float scale2 = p.scale * kLog2e;

  for (int64_t k0 = k_first; k0 < k_end; k0 += kRows) {
    /* K(k0) has landed; every warp is done with Q / the previous V. */
    cp_async_wait_all();
    __syncthreads();
    load_tile<D, LD>(QV, v, p.v_ss, k0, p.Sk);
    cp_async_commit();

    float s[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KD; ks++)
#pragma unroll
      for (int np = 0; np < 4; np++) {
        uint32_t kf[4];
        ldmatrix_x4(kf, Ks + (np * 16 + (mi >> 1) * 8 + mr) * LD + ks * 16 + (mi & 1) * 8);
        mma16816<BF>(s[2 * np], qf[ks], kf[0], kf[1]);
        mma16816<BF>(s[2 * np + 1], qf[ks], kf[2], kf[3]);
      }

    /* Scores in the log2 domain; element (n, e): row g + 8*(e>>1), key n*8 + 2t + (e&1). */
    if (attn_tile_open(p, q0, kRows, k0, kRows)) {
      if (p.softcap > 0.0f) {
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) s[n][e] = p.softcap * tanhf(s[n][e] * p.scale / p.softcap) * kLog2e;
      } else {
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) s[n][e] *= scale2;
      }
    } else {
      int64_t row0 = q0 + warp * 16 + g;
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          s[n][e] = masked_score(p, mask, s[n][e], b, h, row0 + 8 * (e >> 1), k0 + n * 8 + 2 * t + (e & 1)) *
                    kLog2e;
    }

    /* Online softmax, rows g (r = 0) and g + 8 (r = 1); a row lives in one lane quad. */
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < 8; n++) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float m_new = fmaxf(m[r], mx), alpha = 1.0f, rs = 0.0f;
      if (m_new == -INFINITY) {
#pragma unroll
        for (int n = 0; n < 8; n++) s[n][2 * r] = s[n][2 * r + 1] = 0.0f;
      } else {
        alpha = m[r] == -INFINITY ? 0.0f : exp2f(m[r] - m_new);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; e++) {
            s[n][e] = exp2f(s[n][e] - m_new);
            rs += s[n][e];
          }
        m[r] = m_new;
      }
      l[r] = l[r] * alpha + rs;
#pragma unroll
      for (int n = 0; n < NO; n++) {
        o[n][2 * r] *= alpha;
        o[n][2 * r + 1] *= alpha;
      }
    }

    /* V(k0) has landed; every warp is done with K(k0): prefetch K(k0 + 64). */
    cp_async_wait_all();
    __syncthreads();
    if (k0 + kRows < k_end) load_tile<D, LD>(Ks, k, p.k_ss, k0 + kRows, p.Sk);
    cp_async_commit();

    /* O += P·V: the score accumulators of n-tiles 2j, 2j+1 are exactly the
     * A fragment of k-step j (keys 16j..16j+15). */
#pragma unroll
    for (int j = 0; j < 4; j++) {
      uint32_t pf[4] = {pack2<BF>(s[2 * j][0], s[2 * j][1]), pack2<BF>(s[2 * j][2], s[2 * j][3]),
                        pack2<BF>(s[2 * j + 1][0], s[2 * j + 1][1]),
                        pack2<BF>(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; dp++) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, QV + (j * 16 + (mi & 1) * 8 + mr) * LD + dp * 16 + (mi >> 1) * 8);
        mma16816<BF>(o[2 * dp], pf, vf[0], vf[1]);
        mma16816<BF>(o[2 * dp + 1], pf, vf[2], vf[3]);
      }
    }
  }
  cp_async_wait_all(); /* nothing may stay in flight past the block */

  char* out = atw(arena, p.ooff);
  const int same = p.odt == (BF ? RLX_BF16 : RLX_F16);
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float tot = l[r];
    tot += __shfl_xor_sync(0xffffffffu, tot, 1);
    tot += __shfl_xor_sync(0xffffffffu, tot, 2);
    int64_t qi = q0 + warp * 16 + g + 8 * r;
    if (qi >= p.Sq) continue;
    float inv = tot > 0.0f ? 1.0f / tot : 0.0f;
    int64_t ob = b * p.o_sb + qi * p.o_ss + h * p.o_sh;
#pragma unroll
    for (int n = 0; n < NO; n++) {
      int64_t col = n * 8 + 2 * t;
      float x = o[n][2 * r] * inv, y = o[n][2 * r + 1] * inv;
      uint16_t* dst = (uint16_t*)out + ob + col;
      if (same && ((uintptr_t)dst & 3u) == 0) {
        *(uint32_t*)dst = pack2<BF>(x, y);
      } else {
        st_f32(out, p.odt, ob + col, x);
        st_f32(out, p.odt, ob + col + 1, y);
      }
    }
  }
}

} // namespace

/* d64: at most 128 registers, so 4 blocks (16 warps) fit an SM; d128 keeps 2. */
#define FLASH_MMA(name, d, bf, min_blocks)                                                        \
  extern "C" __global__ void __launch_bounds__(kThreads, min_blocks) name(char* a, rlxk_attn p, \
                                                                          rlxk_state* s) {     \
    flash_mma<d, bf>(a, p);                                                                       \
  }
FLASH_MMA(rlx_attn_mma_bf16_d64, 64, true, 4)
FLASH_MMA(rlx_attn_mma_bf16_d128, 128, true, 2)
FLASH_MMA(rlx_attn_mma_f16_d64, 64, false, 4)
FLASH_MMA(rlx_attn_mma_f16_d128, 128, false, 2)
