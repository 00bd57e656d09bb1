/* cuda_attention_bf16.cuh — what the two BF16 attention paths share
 * (cuda_attention_bf16.cu, mma.sync on any sm_80+ GPU; cuda_attention_wgmma.cu,
 * Hopper's warpgroup MMA): the PTX building blocks, the fragment layouts of a
 * 16-row accumulator tile (wgmma's accumulator and register A operand are
 * mma.sync's, four warps stacked), and the stores that end both paths'
 * kernels, so that the two write their outputs with the same code.
 * The contract they implement is described at the top of cuda_attention_bf16.cu. */
#ifndef RC_KERNELS_CUDA_ATTENTION_BF16_CUH
#define RC_KERNELS_CUDA_ATTENTION_BF16_CUH

#include <math.h>

#include <cuda_bf16.h>

#include "backend/numeric.h"
#include "cuda_common.cuh"

#define AB_BQ 64
#define AB_BK 64
#define AB_WARPS 4
#define AB_THREADS (AB_WARPS * 32)

typedef __nv_bfloat16 bf16;

/* ---- PTX building blocks (layouts: PTX ISA, "mma.m16n8k16" and "ldmatrix") ----
 * In a warp, lane = 4 g + t. A 16x8 fp32 accumulator c holds rows g (c[0],
 * c[1]) and g + 8 (c[2], c[3]), columns 2t and 2t + 1. */

__device__ __forceinline__ unsigned smem_addr(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, asynchronously; zeros when !valid (src unread). */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit(void) {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void cp_async_wait_all(void) {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* Four 8x8 bf16 matrices; lane l gives the address of row l % 8 of matrix l / 8. */
__device__ __forceinline__ void ldsm_x4(unsigned r[4], const bf16 *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned r[4], const bf16 *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

/* 2^x for the softmax: the bare MUFU instruction, results below 2^-126
 * flushed to zero (exp2f wraps it in a denormal-preserving sequence: three
 * more instructions an element, 4% of the forward). Every row has a
 * probability of 1 (its max) in the forward and sums to 1 in the backward,
 * so a flushed one is 2^-126 of the row or less: far below fp32's 2^-24. */
__device__ __forceinline__ float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}

/* c += a (16x16, row) * b (16x8, col) */
__device__ __forceinline__ void mma_bf16(float c[4], const unsigned a[4], unsigned b0,
                                         unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* two fp32 -> one register of two bf16 (lo in the low half), round to nearest even */
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *(unsigned *)&v;
}

/* A fragment (16 rows x 16 k) of a row-major shared tile whose row 0 is rows,
 * k columns from k0. */
template <int LDS> __device__ __forceinline__ void load_a(unsigned a[4], const bf16 *rows, int k0) {
  const int lane = threadIdx.x % 32;
  ldsm_x4(a, rows + (lane % 16) * LDS + k0 + 8 * (lane / 16));
}

/* A fragment (16 rows x 16 k) of the transpose of a row-major shared tile:
 * A[r][k] = M[k0 + k][r0 + r], from M's rows (ldmatrix's transposing load
 * of each 8 x 8 block). */
template <int LDS>
__device__ __forceinline__ void load_a_trans(unsigned a[4], const bf16 *M, int r0, int k0) {
  const int lane = threadIdx.x % 32;
  ldsm_x4_trans(a, M + (k0 + lane % 8 + 8 * (lane / 16)) * LDS + r0 + 8 * ((lane / 8) % 2));
}

template <int N> __device__ __forceinline__ void zero_acc(float c[N][4]) {
#pragma unroll
  for (int i = 0; i < N; i++) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
}

/* acc[nt] (16 x 64, 8 n-tiles) += A (16 x HD, fragments a[HD/16]) * B^T where
 * B is a shared [64 x HD] row-major tile: a score tile, S = Q K^T. */
template <int HD, int LDS>
__device__ __forceinline__ void mma_abt(float acc[8][4], const unsigned a[HD / 16][4],
                                        const bf16 *B) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
    for (int np = 0; np < 4; np++) {
      unsigned b[4];
      ldsm_x4(b, B + (np * 16 + lane % 8 + 8 * (lane / 16)) * LDS + kk * 16 + 8 * ((lane / 8) % 2));
      mma_bf16(acc[2 * np], a[kk], b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a[kk], b[2], b[3]);
    }
}

/* The backward's two score tiles, each from zero: sp = A1 B1^T (S or S^T)
 * and dp = A2 B2^T (dP or dP^T). */
template <int HD, int LDS>
__device__ __forceinline__ void score_tiles(float sp[8][4], float dp[8][4],
                                            const unsigned a1[HD / 16][4], const bf16 *B1,
                                            const unsigned a2[HD / 16][4], const bf16 *B2) {
  zero_acc<8>(sp);
  zero_acc<8>(dp);
  mma_abt<HD, LDS>(sp, a1, B1);
  mma_abt<HD, LDS>(dp, a2, B2);
}

/* acc[nt] (16 x HD) += P (16 x 64, fragments p[4]) * X where X is a shared
 * [64 x HD] row-major tile: P V, P^T dO, dS^T Q, dS K. */
template <int HD, int LDS>
__device__ __forceinline__ void mma_px(float acc[HD / 8][4], const unsigned p[4][4],
                                       const bf16 *X) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < 4; kk++)
#pragma unroll
    for (int np = 0; np < HD / 16; np++) {
      unsigned b[4];
      ldsm_x4_trans(b, X + (kk * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * LDS + np * 16 +
                           8 * (lane / 16));
      mma_bf16(acc[2 * np], p[kk], b[0], b[1]);
      mma_bf16(acc[2 * np + 1], p[kk], b[2], b[3]);
    }
}

/* A 16 x 64 fp32 accumulator tile as the A operand (4 k-steps of 16) of the
 * next MMA, rounded to bf16: column 16 kk + 2t of tile 2kk is k 2t of step kk. */
__device__ __forceinline__ void acc_to_a(unsigned a[4][4], const float c[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    a[kk][0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

/* ---- tiles ---- */

/* rows [r0, r0 + 64) of one head's [S x hd] bf16 block into a shared
 * [64 x LDS] tile, asynchronously; rows >= S become zeros. The loop runs
 * over the HD-wide tile's 16-byte pieces, a compile-time count, so its index
 * splits into row and column by shifts: with the runtime hd's pieces it took
 * two integer divisions a piece, the largest share of the forward's
 * instructions (Nsight Compute: the integer ALU its busiest pipe). Pieces
 * past hd are skipped (zero_pad_columns zeroed them once). */
template <int HD, int LDS, int THREADS = AB_THREADS>
__device__ __forceinline__ void load_tile_async(bf16 *dst, const bf16 *head, int r0, int S,
                                                int hd) {
  constexpr int CHUNKS = HD / 8; /* 16-byte pieces per tile row */
#pragma unroll
  for (int idx = threadIdx.x; idx < 64 * CHUNKS; idx += THREADS) {
    const int r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
    if (HD != 16 && c >= hd) continue; /* hd is a multiple of 16, so hd >= 16 */
    const bool valid = r0 + r < S;
    cp_async16(dst + r * LDS + c, valid ? head + (size_t)(r0 + r) * hd + c : head, valid);
  }
}

/* columns hd..HD-1 of ntiles consecutive shared tiles to zero (never written
 * by load_tile_async, read by the HD-wide fragments) */
template <int HD, int LDS, int THREADS = AB_THREADS>
__device__ void zero_pad_columns(bf16 *tiles, int ntiles, int hd) {
  if (hd == HD) return;
  const int w = HD - hd;
  for (int idx = threadIdx.x; idx < ntiles * 64 * w; idx += THREADS)
    tiles[(idx / w) * LDS + hd + idx % w] = __float2bfloat16_rn(0.0f);
}

/* 16 rows x hd of fp32 fragments (times scale) to global rows row0.. of dst
 * (row stride ld); rows >= S skipped. */
template <int HD>
__device__ void store_rows(float *dst, size_t ld, int row0, int S, const float acc[HD / 8][4],
                           float scale, int hd) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int r = row0 + g + 8 * half;
    if (r >= S) continue;
    float *d = dst + (size_t)r * ld;
#pragma unroll
    for (int nt = 0; nt < HD / 8; nt++)
      if (nt * 8 < hd)
        *(float2 *)(d + nt * 8 + 2 * t) =
            make_float2(acc[nt][2 * half] * scale, acc[nt][2 * half + 1] * scale);
  }
}

/* store_rows' values (scale 1) in a 16-bit encoding: bitwise cast_half of
 * what store_rows wrote */
template <int HD>
__device__ void store_rows_half(uint16_t *dst, size_t ld, int row0, int S,
                                const float acc[HD / 8][4], int hd, int fp16) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int r = row0 + g + 8 * half;
    if (r >= S) continue;
    uint16_t *d = dst + (size_t)r * ld;
#pragma unroll
    for (int nt = 0; nt < HD / 8; nt++)
      if (nt * 8 < hd) {
        const float x = acc[nt][2 * half], y = acc[nt][2 * half + 1];
        *(unsigned *)(d + nt * 8 + 2 * t) =
            fp16 ? (unsigned)rc_fp16_encode(x) | (unsigned)rc_fp16_encode(y) << 16
                 : (unsigned)rc_bf16_encode(x) | (unsigned)rc_bf16_encode(y) << 16;
      }
  }
}

/* store_rows' values (times scale) as rope_backward's 16-bit gradient gives
 * them (ops.h attention_backward's dqkv_half): rotated back by RoPE where
 * rotate (dq, dk; row r is position r of the sequence: the table's row),
 * then encoded. The rotation is rc_rope_rotate on the value store_rows
 * would have written, so the bits are store_rows then rope_backward's. */
template <int HD>
__device__ void store_rows_rope_half(uint16_t *dst, size_t ld, int row0, int S,
                                     const float acc[HD / 8][4], float scale, int hd,
                                     const float *cs, bool rotate, int fp16) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, half_hd = hd / 2;
  /* the table's values first, all loads in flight together: loaded between
   * the stores, each waited a memory latency (the stores may alias them) */
  float cv[2][HD / 8], sv[2][HD / 8];
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int r = row0 + g + 8 * half;
#pragma unroll
    for (int nt = 0; nt < HD / 8; nt++) {
      const bool ok = rotate && r < S && nt * 8 < hd;
      const float *c = cs + (size_t)r * half_hd + nt * 4 + t; /* the pair (2i, 2i + 1) */
      cv[half][nt] = ok ? c[0] : 0.0f;
      sv[half][nt] = ok ? c[(size_t)S * half_hd] : 0.0f;
    }
  }
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int r = row0 + g + 8 * half;
    if (r >= S) continue;
    uint16_t *d = dst + (size_t)r * ld;
#pragma unroll
    for (int nt = 0; nt < HD / 8; nt++)
      if (nt * 8 < hd) {
        float2 v = make_float2(acc[nt][2 * half] * scale, acc[nt][2 * half + 1] * scale);
        if (rotate) v = rc_rope_rotate(v.x, v.y, cv[half][nt], -1.0f * sv[half][nt]);
        *(unsigned *)(d + nt * 8 + 2 * t) =
            fp16 ? (unsigned)rc_fp16_encode(v.x) | (unsigned)rc_fp16_encode(v.y) << 16
                 : (unsigned)rc_bf16_encode(v.x) | (unsigned)rc_bf16_encode(v.y) << 16;
      }
  }
}

/* Key rows a dK/dV block owns: 64 R, a warp per 16 (R = 2 since session 17:
 * each Q and dO tile staged serves 128 keys, and there are half as many dQ
 * partials to write and sum: 107 MB at gpu-small instead of 214). */
#define AB_DKV_R 2

/* dQ partials before query tile qt's: sum over q < qt of its key blocks,
 * q / R + 1 each (R = 1: qt (qt + 1) / 2). */
__host__ __device__ __forceinline__ size_t dq_pairs_before(int qt, int R) {
  if (R == 1) return (size_t)qt * (qt + 1) / 2;
  const size_t m = (size_t)qt / 2;
  return qt % 2 ? (m + 1) * (m + 1) : m * (m + 1);
}

/* Four columns c..c + 3 of query s's dQ, the sum of its partials acc: times
 * scale into dqkv's q part, or for a half qkv linear (ops.h dqkv_half) RoPE's
 * backward fused (pairs c/2 and c/2 + 1 of position s rotated back as
 * rope_backward rotates the fp32 values) and encoded: the reduction
 * kernel's epilogue. */
__device__ __forceinline__ void dq_store4(float *dqkv, uint16_t *dqkv_half, float4 acc, int b,
                                          int s, int h, int c, int S, int nh, int hd, float scale,
                                          const float *rope_cs, int half_fp16) {
  const size_t at = ((size_t)b * S + s) * 3 * (size_t)nh * hd + (size_t)h * hd + c;
  const float4 v = make_float4(acc.x * scale, acc.y * scale, acc.z * scale, acc.w * scale);
  if (!dqkv_half) {
    *(float4 *)(dqkv + at) = v;
    return;
  }
  const int half_hd = hd / 2, i = c / 2;
  const float *cs = rope_cs + (size_t)s * half_hd, *sn = cs + (size_t)S * half_hd;
  const float2 a = rc_rope_rotate(v.x, v.y, cs[i], -1.0f * sn[i]),
               e = rc_rope_rotate(v.z, v.w, cs[i + 1], -1.0f * sn[i + 1]);
  *(uint2 *)(dqkv_half + at) =
      half_fp16 ? make_uint2((unsigned)rc_fp16_encode(a.x) | (unsigned)rc_fp16_encode(a.y) << 16,
                             (unsigned)rc_fp16_encode(e.x) | (unsigned)rc_fp16_encode(e.y) << 16)
                : make_uint2((unsigned)rc_bf16_encode(a.x) | (unsigned)rc_bf16_encode(a.y) << 16,
                             (unsigned)rc_bf16_encode(e.x) | (unsigned)rc_bf16_encode(e.y) << 16);
}

/* The end of a dK/dV warp's 16 keys from row0: dK (times scale) and dV
 * into dqkv's k and v parts, or for a half qkv linear (ops.h dqkv_half)
 * RoPE's backward fused: dK rotated back, dV as it is, both encoded. */
template <int HD>
__device__ __forceinline__ void dkv_store(float *dqkv, uint16_t *dqkv_half,
                                          const float dk[HD / 8][4], const float dv[HD / 8][4],
                                          int b, int h, int S, int nh, int hd, int row0,
                                          float scale, const float *rope_cs, int half_fp16) {
  const size_t row = 3 * (size_t)nh * hd, orow = (size_t)nh * hd;
  if (dqkv_half) {
    uint16_t *dst = dqkv_half + (size_t)b * S * row + (size_t)h * hd;
    store_rows_rope_half<HD>(dst + orow, row, row0, S, dk, scale, hd, rope_cs, true, half_fp16);
    store_rows_rope_half<HD>(dst + 2 * orow, row, row0, S, dv, 1.0f, hd, rope_cs, false, half_fp16);
    return;
  }
  float *dst = dqkv + (size_t)b * S * row + (size_t)h * hd;
  store_rows<HD>(dst + orow, row, row0, S, dk, scale, hd);
  store_rows<HD>(dst + 2 * orow, row, row0, S, dv, 1.0f, hd);
}

/* ---- the forward's row arithmetic (both paths: the same bits for the same scores) ---- */

/* One key tile of the online softmax for a warp's 16 rows (row[0], row[1]:
 * this thread's two), s the tile's raw scores (16 x 64): masks, updates the
 * running max m and sum l, gives the factor alpha the output accumulator's
 * rows take (rescale_rows), and leaves P = exp(s - m) (unrounded) in s. */
__device__ __forceinline__ void online_softmax_probs(float s[8][4], float m[2], float l[2],
                                                     float alpha[2], int k0, int wrow0,
                                                     const int row[2], int S, float scale_log2) {
  const int t = threadIdx.x % 4;
  /* online softmax: mask, then the new row max over the quad, of the
   * unscaled scores (c = scale log2 e > 0 keeps the max: p = 2^(s c - m c)
   * is one FFMA). Only a tile reaching past the warp's first row has
   * masked keys: before it every key j < k0 + 64 <= i, and j < S. */
  float mx[2] = {-INFINITY, -INFINITY};
  if (k0 + AB_BK > wrow0) {
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int j = k0 + nt * 8 + 2 * t + (e & 1), i = row[e / 2];
        if (!(j <= i && j < S)) s[nt][e] = -INFINITY;
        mx[e / 2] = fmaxf(mx[e / 2], s[nt][e]);
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
      for (int e = 0; e < 4; e++) mx[e / 2] = fmaxf(mx[e / 2], s[nt][e]);
  }
  float mc[2];
#pragma unroll
  for (int hr = 0; hr < 2; hr++) {
    mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
    mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
    const float m_new = fmaxf(m[hr], mx[hr]); /* finite: key 0 <= every row is valid */
    mc[hr] = m_new * scale_log2;
    alpha[hr] = ex2(m[hr] * scale_log2 - mc[hr]); /* 0 on the first tile: m = -inf */
    m[hr] = m_new;
  }
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      s[nt][e] = ex2(fmaf(s[nt][e], scale_log2, -mc[e / 2]));
      sum[e / 2] += s[nt][e]; /* the unrounded P */
    }
#pragma unroll
  for (int hr = 0; hr < 2; hr++) l[hr] = l[hr] * alpha[hr] + sum[hr];
}

/* the output accumulator's rows rescaled to the new running max */
template <int HD>
__device__ __forceinline__ void rescale_rows(float o[HD / 8][4], const float alpha[2]) {
#pragma unroll
  for (int nt = 0; nt < HD / 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) o[nt][e] *= alpha[e / 2];
}

/* online_softmax_probs then rescale_rows: a whole tile's row arithmetic */
template <int HD>
__device__ __forceinline__ void online_softmax_tile(float s[8][4], float o[HD / 8][4], float m[2],
                                                    float l[2], int k0, int wrow0, const int row[2],
                                                    int S, float scale_log2) {
  float alpha[2];
  online_softmax_probs(s, m, l, alpha, k0, wrow0, row, S, scale_log2);
  rescale_rows<HD>(o, alpha);
}

/* The end of a forward warp's rows: row sums over the quad, out = O / l
 * (fp32 and/or its 16-bit copy) and lse = m + log l. */
template <int HD>
__device__ __forceinline__ void forward_store(float *out, uint16_t *out_half, float *lse,
                                              float o[HD / 8][4], const float m[2], float l[2],
                                              const int row[2], int wrow0, int b, int h, int S,
                                              int nh, int hd, float scale_log2, int fp16) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int hr = 0; hr < 2; hr++) {
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 1);
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 2);
  }
  if (wrow0 >= S) return; /* rows past S: nothing to write */
  const size_t orow = (size_t)nh * hd;
  float inv[2] = {1.0f / l[0], 1.0f / l[1]};
#pragma unroll
  for (int nt = 0; nt < HD / 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) o[nt][e] *= inv[e / 2];
  if (out) /* NULL when only the half copy is kept (ops.h) */
    store_rows<HD>(out + (size_t)b * S * orow + (size_t)h * hd, orow, wrow0, S, o, 1.0f, hd);
  if (out_half) /* a half out-projection's input, without a cast pass over out */
    store_rows_half<HD>(out_half + (size_t)b * S * orow + (size_t)h * hd, orow, wrow0, S, o, hd,
                        fp16);
  if (t == 0)
    for (int hr = 0; hr < 2; hr++)
      if (row[hr] < S)
        lse[((size_t)b * nh + h) * S + row[hr]] = m[hr] * scale_log2 * (float)M_LN2 + logf(l[hr]);
}

/* 4 bytes global -> shared, asynchronously; zero when !valid (src unread) */
__device__ __forceinline__ void cp_async4(void *dst, const void *src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}

/* lse and D of query rows [q0, q0 + AB_BQ) into shared memory as cp.async
 * copies of the caller's next group (rows >= S read as zeros). Asynchronous
 * because a plain load stalls the warps that stage them for a whole memory
 * latency each tile, and their warpgroup's products with them (Nsight
 * Compute, session 20: 4% of the dK/dV kernel's samples). */
template <int THREADS>
__device__ __forceinline__ void stage_lse_D(float *lse_dst, float *D_dst, const float *lse_bh,
                                            const float *D_bh, int q0, int S) {
  /* a fixed count of rounds (one for 128 threads or more): a loop bounded by
   * threadIdx.x compiled to ~150 instructions of unrolling and remainder
   * in the wgmma dK/dV kernel's tile loop (SASS, session 26) */
#pragma unroll
  for (int k = 0; k < (2 * AB_BQ + THREADS - 1) / THREADS; k++) {
    const int c = (int)threadIdx.x + k * THREADS;
    if (c >= 2 * AB_BQ) break;
    const int i = c % AB_BQ;
    const bool valid = q0 + i < S;
    const float *src = c < AB_BQ ? lse_bh : D_bh;
    cp_async4((c < AB_BQ ? lse_dst : D_dst) + i, valid ? src + q0 + i : src, valid);
  }
}

/* ---- the backward's pair arithmetic (both paths) ---- */

/* A key tile's scores and dP for one query tile (q0..q0+63; a warp's 16
 * keys, krow[] this thread's two) into P^T = exp(S^T scale - lse) and
 * dS^T = P^T (dP^T - D), in place; lse_b as the forward wrote it (its
 * product with log2 e is rounded as a separate fp32 multiply). masked: the tile may hold pairs with
 * a key after its query or past S (only where the query tile meets the key block's, and at S's end:
 * everywhere else every query i >= q0 >= the block's last key, and i < S). */
__device__ __forceinline__ void dkv_probs(float sp[8][4], float dp[8][4], int q0, const int krow[2],
                                          int S, const float *lse_b, const float *D_b,
                                          float scale_log2, bool masked) {
  const int t = threadIdx.x % 4;
  if (masked) {
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int c = nt * 8 + 2 * t + (e & 1), i = q0 + c, j = krow[e / 2];
        const bool valid = j <= i && i < S && j < S;
        const float p =
            valid ? ex2(fmaf(sp[nt][e], scale_log2, -(lse_b[c] * (float)M_LOG2E))) : 0.0f;
        sp[nt][e] = p;
        dp[nt][e] = p * (dp[nt][e] - D_b[c]);
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int c = nt * 8 + 2 * t + (e & 1);
        const float p = ex2(fmaf(sp[nt][e], scale_log2, -(lse_b[c] * (float)M_LOG2E)));
        sp[nt][e] = p;
        dp[nt][e] = p * (dp[nt][e] - D_b[c]);
      }
  }
}

#endif
