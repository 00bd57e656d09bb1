/* cuda_attention_bf16.cu — causal attention under ops.h's BF16 contract, on
 * tensor cores (WMMA, bf16 x bf16 -> fp32, m16n16k16).
 *
 * The fp32 kernels (cuda_attention.cu) spend their time in CUDA-core
 * arithmetic; PyTorch's SDPA, the peer of the gpu-small benchmark, runs bf16
 * products on tensor cores. This file gives resumecheck the same numerics
 * class, selected explicitly (--attention-precision bf16), never silently.
 *
 * Determinism: a tensor-core MMA folds its 16 products in a fixed order, and
 * every tile product here is a fixed sequence of MMAs into one accumulator;
 * softmax statistics use a fixed xor-shuffle tree (every lane ends with the
 * same bits); there are no atomics and no split reductions. Each output
 * element is written by exactly one block.
 *
 * Tiles are 64 queries x 64 keys; a block has 4 warps, each owning 16 rows
 * of the block's tile (query rows in the forward and dQ, key rows in dK/dV).
 * Tiles are read from the fp32 qkv buffer, rounded to bf16 into shared
 * memory (round to nearest even, as rc_round_bf16), and used from there.
 *
 *  forward  per (query tile, head, batch): online softmax over key tiles up
 *           to the diagonal; P = exp(s - running max) rounded to bf16 for
 *           P V; the row sum keeps the unrounded P; out = O / l.
 *  backward D = rowsum(bf16(dout) * out) first; dK/dV per key tile looping
 *           over query tiles at or after it; dQ per query tile looping over
 *           key tiles up to it. P = exp(s - lse) is recomputed in both.
 *
 * Head dims: multiples of 16 up to 128 (the config enforces it); HD is the
 * template bound, smaller hd use the first hd/16 column blocks. */
#include <math.h>
#include <mma.h>

#include <cuda_bf16.h>

#include "cuda_common.cuh"

using namespace nvcuda;

#define AB_BQ 64
#define AB_BK 64
#define AB_WARPS 4
#define AB_THREADS (AB_WARPS * 32)
#define AB_LDP (AB_BK + 8) /* bf16 row stride of 16 x 64 probability tiles */

typedef __nv_bfloat16 bf16;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_acc;

/* Strides: ldh for bf16 [rows x HD] tiles, ldf for the fp32 [16 x max(BK, HD)]
 * per-warp scratch. Both keep WMMA's alignment (32-byte tiles) and spread
 * rows over banks. */
template <int HD> struct AbDims {
  static constexpr int ldh = HD + 8;
  static constexpr int ldf = (HD > AB_BK ? HD : AB_BK) + 4;
  static constexpr size_t tile_h = (size_t)64 * ldh * sizeof(bf16);    /* one 64-row bf16 tile */
  static constexpr size_t warp_f = (size_t)16 * ldf * sizeof(float);   /* one warp's fp32 scratch */
  static constexpr size_t warp_p = (size_t)16 * AB_LDP * sizeof(bf16); /* one warp's bf16 16x64 */
};

/* rows [r0, r0 + 64) of one head's q, k or v (column offset col) of the
 * [B*S, 3*nh*hd] buffer src of batch b, rounded to bf16 into dst [64 x ldh];
 * rows >= S and columns >= hd are zero. Also used for dout ([B*S, nh*hd]). */
template <int HD>
__device__ void load_tile_bf16(bf16 *dst, const float *src, size_t row_stride, int r0, int S,
                               int hd) {
  constexpr int ldh = AbDims<HD>::ldh;
  for (int idx = threadIdx.x; idx < 64 * (HD / 4); idx += AB_THREADS) {
    int r = idx / (HD / 4), c = (idx % (HD / 4)) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r0 + r < S && c < hd) v = *(const float4 *)(src + (size_t)(r0 + r) * row_stride + c);
    bf16 *d = dst + r * ldh + c;
    d[0] = __float2bfloat16_rn(v.x), d[1] = __float2bfloat16_rn(v.y);
    d[2] = __float2bfloat16_rn(v.z), d[3] = __float2bfloat16_rn(v.w);
  }
}

/* acc_out[16 x 64] (fp32, ld ldf) = A[16 x hd] . B[64 x hd]^T, A and B bf16
 * row-major with stride ldh: a score tile. */
template <int HD> __device__ void tile_abt(float *acc_out, const bf16 *A, const bf16 *B, int hd) {
  constexpr int ldh = AbDims<HD>::ldh, ldf = AbDims<HD>::ldf;
  frag_a a;
  frag_b_col b;
  frag_acc c;
#pragma unroll
  for (int nt = 0; nt < AB_BK / 16; nt++) {
    wmma::fill_fragment(c, 0.0f);
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
      if (kk * 16 >= hd) break;
      wmma::load_matrix_sync(a, A + kk * 16, ldh);
      wmma::load_matrix_sync(b, B + nt * 16 * ldh + kk * 16, ldh);
      wmma::mma_sync(c, a, b, c);
    }
    wmma::store_matrix_sync(acc_out + nt * 16, c, ldf, wmma::mem_row_major);
  }
}

/* acc[nt] += P[16 x 64] (bf16, ld AB_LDP) . X[64 x hd] (bf16 row-major, ldh),
 * folded over the 4 k-steps in order. */
template <int HD> __device__ void tile_px_acc(frag_acc *acc, const bf16 *P, const bf16 *X, int hd) {
  constexpr int ldh = AbDims<HD>::ldh;
  frag_a a;
  frag_b_row b;
#pragma unroll
  for (int nt = 0; nt < HD / 16; nt++) {
    if (nt * 16 >= hd) break;
#pragma unroll
    for (int kk = 0; kk < AB_BK / 16; kk++) {
      wmma::load_matrix_sync(a, P + kk * 16, AB_LDP);
      wmma::load_matrix_sync(b, X + kk * 16 * ldh + nt * 16, ldh);
      wmma::mma_sync(acc[nt], a, b, acc[nt]);
    }
  }
}

/* Writes 16 rows x hd of fragments acc (times scale) to global dst (row
 * stride row_stride) through the warp's fp32 scratch; rows >= nrows skipped. */
template <int HD>
__device__ void store_rows(float *dst, size_t row_stride, int nrows, frag_acc *acc, float scale,
                           float *scratch, int hd, int lane) {
  constexpr int ldf = AbDims<HD>::ldf;
#pragma unroll
  for (int nt = 0; nt < HD / 16; nt++) {
    if (nt * 16 >= hd) break;
    for (int t = 0; t < acc[nt].num_elements; t++) acc[nt].x[t] *= scale;
    wmma::store_matrix_sync(scratch + nt * 16, acc[nt], ldf, wmma::mem_row_major);
  }
  __syncwarp();
  for (int r = 0; r < 16 && r < nrows; r++)
    for (int c = lane; c < hd; c += 32) dst[(size_t)r * row_stride + c] = scratch[r * ldf + c];
  __syncwarp();
}

/* ---- forward ---- */

template <int HD>
__global__ void __launch_bounds__(AB_THREADS)
    attention_bf16_forward_kernel(float *out, float *lse, const float *qkv, int S, int nh, int hd,
                                  float scale) {
  typedef AbDims<HD> Dm;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int q0 = qt * AB_BQ;
  bf16 *Qs = (bf16 *)smem;
  bf16 *Ks = (bf16 *)(smem + Dm::tile_h);
  bf16 *Vs = (bf16 *)(smem + 2 * Dm::tile_h);
  float *Sw = (float *)(smem + 3 * Dm::tile_h + warp * Dm::warp_f);
  float *Ow = (float *)(smem + 3 * Dm::tile_h + (AB_WARPS + warp) * Dm::warp_f);
  bf16 *Pw = (bf16 *)(smem + 3 * Dm::tile_h + 2 * AB_WARPS * Dm::warp_f + warp * Dm::warp_p);
  float *stats =
      (float *)(smem + 3 * Dm::tile_h + 2 * AB_WARPS * Dm::warp_f + AB_WARPS * Dm::warp_p) +
      warp * 48; /* m, l, alpha per row */
  float *m_row = stats, *l_row = stats + 16, *alpha_row = stats + 32;

  const size_t row = 3 * (size_t)nh * hd, orow = (size_t)nh * hd;
  const float *base = qkv + (size_t)b * S * row + (size_t)h * hd;
  load_tile_bf16<HD>(Qs, base, row, q0, S, hd);
  for (int c = lane; c < 16 * Dm::ldf; c += 32) Ow[c] = 0.0f;
  if (lane < 16) m_row[lane] = -INFINITY, l_row[lane] = 0.0f;

  for (int kt = 0; kt <= qt; kt++) {
    const int k0 = kt * AB_BK;
    __syncthreads(); /* every warp is done with the previous K, V */
    load_tile_bf16<HD>(Ks, base + orow, row, k0, S, hd);
    load_tile_bf16<HD>(Vs, base + 2 * orow, row, k0, S, hd);
    __syncthreads();
    tile_abt<HD>(Sw, Qs + warp * 16 * Dm::ldh, Ks, hd);
    __syncwarp();
    /* online softmax, one row at a time; lanes own columns lane, lane + 32 */
    for (int r = 0; r < 16; r++) {
      const int i = q0 + warp * 16 + r;
      float s[2];
      float mx = -INFINITY;
      for (int u = 0; u < 2; u++) {
        int j = k0 + lane + 32 * u;
        s[u] = j <= i && j < S ? Sw[r * Dm::ldf + lane + 32 * u] * scale : -INFINITY;
        mx = fmaxf(mx, s[u]);
      }
      for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_old = m_row[r], m_new = fmaxf(m_old, mx); /* finite: key k0 <= i is valid */
      float sum = 0.0f;
      for (int u = 0; u < 2; u++) {
        float p = expf(s[u] - m_new);
        sum += p;
        Pw[r * AB_LDP + lane + 32 * u] = __float2bfloat16_rn(p);
      }
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      __syncwarp();
      if (lane == 0) {
        float alpha = expf(m_old - m_new); /* 0 on the first tile: m_old = -inf */
        alpha_row[r] = alpha;
        l_row[r] = l_row[r] * alpha + sum;
        m_row[r] = m_new;
      }
    }
    __syncwarp();
    /* PV into the score scratch, then O = O * alpha + PV */
    frag_acc pv[HD / 16];
#pragma unroll
    for (int nt = 0; nt < HD / 16; nt++) wmma::fill_fragment(pv[nt], 0.0f);
    tile_px_acc<HD>(pv, Pw, Vs, hd);
#pragma unroll
    for (int nt = 0; nt < HD / 16; nt++)
      if (nt * 16 < hd) wmma::store_matrix_sync(Sw + nt * 16, pv[nt], Dm::ldf, wmma::mem_row_major);
    __syncwarp();
    for (int r = 0; r < 16; r++) {
      const float alpha = alpha_row[r];
      for (int c = lane; c < hd; c += 32)
        Ow[r * Dm::ldf + c] = Ow[r * Dm::ldf + c] * alpha + Sw[r * Dm::ldf + c];
    }
    __syncwarp();
  }
  for (int r = 0; r < 16; r++) {
    const int i = q0 + warp * 16 + r;
    if (i >= S) break;
    const float inv = 1.0f / l_row[r];
    float *o = out + ((size_t)b * S + i) * orow + (size_t)h * hd;
    for (int c = lane; c < hd; c += 32) o[c] = Ow[r * Dm::ldf + c] * inv;
    if (lane == 0) lse[((size_t)b * nh + h) * S + i] = m_row[r] + logf(l_row[r]);
  }
}

/* ---- backward ---- */

/* One block per (key tile, head, batch); warp w owns key rows 16w..16w+15.
 * Per query tile: S^T = K Q^T, P^T = exp(S^T scale - lse), dV += bf16(P^T) dO,
 * dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += bf16(dS^T) Q; dK *= scale. */
template <int HD>
__global__ void __launch_bounds__(AB_THREADS)
    attention_bf16_dkv_kernel(float *dqkv, const float *dout, const float *lse, const float *Dd,
                              const float *qkv, int S, int nh, int hd, float scale) {
  typedef AbDims<HD> Dm;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int k0 = kt * AB_BK, ntiles = (S + AB_BQ - 1) / AB_BQ;
  bf16 *Ks = (bf16 *)smem;
  bf16 *Vs = (bf16 *)(smem + Dm::tile_h);
  bf16 *Qs = (bf16 *)(smem + 2 * Dm::tile_h);
  bf16 *dOs = (bf16 *)(smem + 3 * Dm::tile_h);
  unsigned char *wbase = smem + 4 * Dm::tile_h;
  float *St = (float *)(wbase + warp * Dm::warp_f); /* S^T, then P^T (fp32) */
  float *dPt = (float *)(wbase + (AB_WARPS + warp) * Dm::warp_f);
  bf16 *Pt = (bf16 *)(wbase + 2 * AB_WARPS * Dm::warp_f + warp * Dm::warp_p);
  bf16 *dSt = (bf16 *)(wbase + 2 * AB_WARPS * Dm::warp_f + (AB_WARPS + warp) * Dm::warp_p);
  float *lse_s = (float *)(wbase + 2 * AB_WARPS * Dm::warp_f + 2 * AB_WARPS * Dm::warp_p);
  float *D_s = lse_s + AB_BQ;

  const size_t row = 3 * (size_t)nh * hd, orow = (size_t)nh * hd;
  const float *base = qkv + (size_t)b * S * row + (size_t)h * hd;
  const float *dbase = dout + (size_t)b * S * orow + (size_t)h * hd;
  const float *lse_bh = lse + ((size_t)b * nh + h) * S, *D_bh = Dd + ((size_t)b * nh + h) * S;
  load_tile_bf16<HD>(Ks, base + orow, row, k0, S, hd);
  load_tile_bf16<HD>(Vs, base + 2 * orow, row, k0, S, hd);

  frag_acc dk[HD / 16], dv[HD / 16];
#pragma unroll
  for (int nt = 0; nt < HD / 16; nt++)
    wmma::fill_fragment(dk[nt], 0.0f), wmma::fill_fragment(dv[nt], 0.0f);

  for (int qt = kt; qt < ntiles; qt++) {
    const int q0 = qt * AB_BQ;
    __syncthreads(); /* previous Q, dO, lse, D no longer read */
    load_tile_bf16<HD>(Qs, base, row, q0, S, hd);
    load_tile_bf16<HD>(dOs, dbase, orow, q0, S, hd);
    for (int c = threadIdx.x; c < AB_BQ; c += AB_THREADS) {
      lse_s[c] = q0 + c < S ? lse_bh[q0 + c] : 0.0f;
      D_s[c] = q0 + c < S ? D_bh[q0 + c] : 0.0f;
    }
    __syncthreads();
    tile_abt<HD>(St, Ks + warp * 16 * Dm::ldh, Qs, hd);
    tile_abt<HD>(dPt, Vs + warp * 16 * Dm::ldh, dOs, hd);
    __syncwarp();
    for (int r = 0; r < 16; r++) {
      const int j = k0 + warp * 16 + r;
      for (int u = 0; u < 2; u++) {
        const int c = lane + 32 * u, i = q0 + c;
        const bool valid = j <= i && i < S && j < S;
        const float p = valid ? expf(St[r * Dm::ldf + c] * scale - lse_s[c]) : 0.0f;
        const float ds = p * (dPt[r * Dm::ldf + c] - D_s[c]);
        Pt[r * AB_LDP + c] = __float2bfloat16_rn(p);
        dSt[r * AB_LDP + c] = __float2bfloat16_rn(ds);
      }
    }
    __syncwarp();
    tile_px_acc<HD>(dv, Pt, dOs, hd);
    tile_px_acc<HD>(dk, dSt, Qs, hd);
  }
  __syncwarp();
  const int nrows = S - (k0 + warp * 16);
  float *dst = dqkv + ((size_t)b * S + k0 + warp * 16) * row + (size_t)h * hd;
  if (nrows > 0) {
    store_rows<HD>(dst + orow, row, nrows, dk, scale, St, hd, lane);
    store_rows<HD>(dst + 2 * orow, row, nrows, dv, 1.0f, St, hd, lane);
  }
}

/* One block per (query tile, head, batch); warp w owns query rows 16w..+15.
 * Per key tile up to the diagonal: S = Q K^T, dP = dO V^T,
 * dS = exp(S scale - lse) (dP - D), dQ += bf16(dS) K; dQ *= scale. */
template <int HD>
__global__ void __launch_bounds__(AB_THREADS)
    attention_bf16_dq_kernel(float *dqkv, const float *dout, const float *lse, const float *Dd,
                             const float *qkv, int S, int nh, int hd, float scale) {
  typedef AbDims<HD> Dm;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int q0 = qt * AB_BQ;
  bf16 *Qs = (bf16 *)smem;
  bf16 *dOs = (bf16 *)(smem + Dm::tile_h);
  bf16 *Ks = (bf16 *)(smem + 2 * Dm::tile_h);
  bf16 *Vs = (bf16 *)(smem + 3 * Dm::tile_h);
  unsigned char *wbase = smem + 4 * Dm::tile_h;
  float *Sw = (float *)(wbase + warp * Dm::warp_f);
  float *dPw = (float *)(wbase + (AB_WARPS + warp) * Dm::warp_f);
  bf16 *dSw = (bf16 *)(wbase + 2 * AB_WARPS * Dm::warp_f + warp * Dm::warp_p);
  float *lse_s = (float *)(wbase + 2 * AB_WARPS * Dm::warp_f + 2 * AB_WARPS * Dm::warp_p);
  float *D_s = lse_s + AB_BQ;

  const size_t row = 3 * (size_t)nh * hd, orow = (size_t)nh * hd;
  const float *base = qkv + (size_t)b * S * row + (size_t)h * hd;
  const float *dbase = dout + (size_t)b * S * orow + (size_t)h * hd;
  const float *lse_bh = lse + ((size_t)b * nh + h) * S, *D_bh = Dd + ((size_t)b * nh + h) * S;
  load_tile_bf16<HD>(Qs, base, row, q0, S, hd);
  load_tile_bf16<HD>(dOs, dbase, orow, q0, S, hd);
  for (int c = threadIdx.x; c < AB_BQ; c += AB_THREADS) {
    lse_s[c] = q0 + c < S ? lse_bh[q0 + c] : 0.0f;
    D_s[c] = q0 + c < S ? D_bh[q0 + c] : 0.0f;
  }

  frag_acc dq[HD / 16];
#pragma unroll
  for (int nt = 0; nt < HD / 16; nt++) wmma::fill_fragment(dq[nt], 0.0f);

  for (int kt = 0; kt <= qt; kt++) {
    const int k0 = kt * AB_BK;
    __syncthreads(); /* previous K, V no longer read (and Q, dO, lse, D loaded) */
    load_tile_bf16<HD>(Ks, base + orow, row, k0, S, hd);
    load_tile_bf16<HD>(Vs, base + 2 * orow, row, k0, S, hd);
    __syncthreads();
    tile_abt<HD>(Sw, Qs + warp * 16 * Dm::ldh, Ks, hd);
    tile_abt<HD>(dPw, dOs + warp * 16 * Dm::ldh, Vs, hd);
    __syncwarp();
    for (int r = 0; r < 16; r++) {
      const int il = warp * 16 + r, i = q0 + il;
      for (int u = 0; u < 2; u++) {
        const int c = lane + 32 * u, j = k0 + c;
        const bool valid = j <= i && i < S && j < S;
        const float p = valid ? expf(Sw[r * Dm::ldf + c] * scale - lse_s[il]) : 0.0f;
        dSw[r * AB_LDP + c] = __float2bfloat16_rn(p * (dPw[r * Dm::ldf + c] - D_s[il]));
      }
    }
    __syncwarp();
    tile_px_acc<HD>(dq, dSw, Ks, hd);
  }
  __syncwarp();
  const int nrows = S - (q0 + warp * 16);
  if (nrows > 0)
    store_rows<HD>(dqkv + ((size_t)b * S + q0 + warp * 16) * row + (size_t)h * hd, row, nrows, dq,
                   scale, Sw, hd, lane);
}

/* ---- host side ---- */

template <int HD> static size_t fwd_smem(void) {
  typedef AbDims<HD> Dm;
  return 3 * Dm::tile_h + 2 * AB_WARPS * Dm::warp_f + AB_WARPS * Dm::warp_p +
         AB_WARPS * 48 * sizeof(float);
}
template <int HD> static size_t bwd_smem(void) {
  typedef AbDims<HD> Dm;
  return 4 * Dm::tile_h + 2 * AB_WARPS * Dm::warp_f + 2 * AB_WARPS * Dm::warp_p +
         2 * AB_BQ * sizeof(float);
}

template <int HD>
static void forward_bf16(float *out, float *lse, const float *qkv, int B, int S, int nh, int hd) {
  static bool opted = false;
  size_t sm = fwd_smem<HD>();
  rc_allow_smem(attention_bf16_forward_kernel<HD>, sm, &opted);
  dim3 grid((unsigned int)((S + AB_BQ - 1) / AB_BQ), (unsigned int)nh, (unsigned int)B);
  attention_bf16_forward_kernel<HD><<<grid, AB_THREADS, sm, rc_cuda_stream()>>>(
      out, lse, qkv, S, nh, hd, 1.0f / sqrtf((float)hd));
  KERNEL_CHECK();
}

template <int HD>
static void backward_bf16(float *dqkv, const float *dout, const float *out, const float *lse,
                          const float *qkv, int B, int S, int nh, int hd) {
  static bool opted_dkv = false, opted_dq = false;
  cudaStream_t s = rc_cuda_stream();
  /* D = rowsum(bf16(dout) * out), the CPU's loop */
  float *Dd = rc_cuda_attention_rowdot(dout, out, B, S, nh, hd, true);
  size_t sm = bwd_smem<HD>();
  rc_allow_smem(attention_bf16_dkv_kernel<HD>, sm, &opted_dkv);
  rc_allow_smem(attention_bf16_dq_kernel<HD>, sm, &opted_dq);
  dim3 grid((unsigned int)((S + AB_BQ - 1) / AB_BQ), (unsigned int)nh, (unsigned int)B);
  float scale = 1.0f / sqrtf((float)hd);
  attention_bf16_dkv_kernel<HD>
      <<<grid, AB_THREADS, sm, s>>>(dqkv, dout, lse, Dd, qkv, S, nh, hd, scale);
  KERNEL_CHECK();
  attention_bf16_dq_kernel<HD>
      <<<grid, AB_THREADS, sm, s>>>(dqkv, dout, lse, Dd, qkv, S, nh, hd, scale);
  KERNEL_CHECK();
}

static void check_bf16_head_dim(int hd) {
  if (hd % 16 || hd > 128) {
    fprintf(stderr,
            "resumecheck: bf16 attention needs a head dim that is a multiple of 16, at most 128 "
            "(got %d)\n",
            hd);
    abort();
  }
}

void rc_cuda_attention_bf16_forward(float *out, float *lse, const float *qkv, int B, int S, int nh,
                                    int hd) {
  check_bf16_head_dim(hd);
  if (hd <= 16)
    forward_bf16<16>(out, lse, qkv, B, S, nh, hd);
  else if (hd <= 32)
    forward_bf16<32>(out, lse, qkv, B, S, nh, hd);
  else if (hd <= 64)
    forward_bf16<64>(out, lse, qkv, B, S, nh, hd);
  else
    forward_bf16<128>(out, lse, qkv, B, S, nh, hd);
}

void rc_cuda_attention_bf16_backward(float *dqkv, const float *dout, const float *out,
                                     const float *lse, const float *qkv, int B, int S, int nh,
                                     int hd) {
  check_bf16_head_dim(hd);
  if (hd <= 16)
    backward_bf16<16>(dqkv, dout, out, lse, qkv, B, S, nh, hd);
  else if (hd <= 32)
    backward_bf16<32>(dqkv, dout, out, lse, qkv, B, S, nh, hd);
  else if (hd <= 64)
    backward_bf16<64>(dqkv, dout, out, lse, qkv, B, S, nh, hd);
  else
    backward_bf16<128>(dqkv, dout, out, lse, qkv, B, S, nh, hd);
}
