/* cuda_attention.cu — causal softmax attention, forward and backward, fp32.
 *
 * A plain tiled ("flash"-style) implementation, deterministic by structure:
 * every output element is produced by exactly one thread, which folds its
 * terms in a fixed order; there are no atomics and no split reductions.
 *
 * Tiles are BQ = 64 queries by BK = 64 keys. Each query (or key) row of a
 * tile is owned by LANES = 4 adjacent threads of one warp: for scores each
 * lane computes full dot products for every 4th key, for the weighted sums
 * each lane owns every 4th head dimension. Row statistics (max, sum) are
 * combined across the 4 lanes with xor shuffles, which give every lane the
 * same bits (float addition is commutative).
 *
 *  forward  one block per (query tile, head, batch); online softmax over the
 *           key tiles up to the diagonal; writes out and lse.
 *  backward D = rowsum(dout * out) first; then dK/dV with one block per key
 *           tile looping over the query tiles at or after it, and dQ with one
 *           block per query tile looping over the key tiles up to it. P is
 *           recomputed from lse in both, by the same arithmetic.
 *
 * Two implementations of that scheme: the register-tiled kernels (the
 * default, further below: each thread computes a 4 x 4 block of every tile
 * product) and the original one-row-per-thread kernels, kept as a baseline
 * (RC_CUDA_ATTENTION=simple). Both are fp32 throughout (ops.h's FP32
 * attention); the BF16 contract runs on tensor cores in cuda_attention_bf16.cu.
 *
 * The head dimension is a template bound HD in {32, 64, 128} (hd <= HD; the
 * unused dimensions are zero-filled). Hot loops use explicit fmaf: the file
 * is built with --fmad=false, and fused multiply-adds here are fine — the
 * CPU agreement is a tolerance, the run-to-run result is fixed either way. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/numeric.h"
#include "cuda_common.cuh"

#define ATT_BQ 64
#define ATT_BK 64
#define ATT_LANES 4
#define ATT_THREADS (ATT_BQ * ATT_LANES)
#define FULL_MASK 0xffffffffu

/* ---- forward ---- */

template <int HD>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_forward_kernel(float *out, float *lse, const float *qkv, int S, int nh, int hd,
                             float scale) {
  constexpr int LD = HD + 1; /* padded rows: lanes of a warp hit distinct banks */
  constexpr int DPL = HD / ATT_LANES;
  constexpr int KPL = ATT_BK / ATT_LANES;
  extern __shared__ float smem[];
  float *Ks = smem;             /* [BK][LD] */
  float *Vs = Ks + ATT_BK * LD; /* [BK][LD] */
  float *Ps = Vs + ATT_BK * LD; /* [BQ][BK+1] */

  int ntq = (S + ATT_BQ - 1) / ATT_BQ;
  int qt = ntq - 1 - (int)blockIdx.x; /* the longest (last) query tiles start first */
  int h = blockIdx.y, b = blockIdx.z;
  int r = threadIdx.x / ATT_LANES, c = threadIdx.x % ATT_LANES;
  int i = qt * ATT_BQ + r;
  size_t rs = 3 * (size_t)nh * hd;
  const float *base = qkv + (size_t)b * S * rs;
  const float *Qg = base + (size_t)h * hd;
  const float *Kg = base + (size_t)nh * hd + (size_t)h * hd;
  const float *Vg = base + 2 * (size_t)nh * hd + (size_t)h * hd;

  float q[HD];
#pragma unroll
  for (int d = 0; d < HD; d++) q[d] = (d < hd && i < S) ? Qg[(size_t)i * rs + d] : 0.0f;

  float o[DPL];
#pragma unroll
  for (int dd = 0; dd < DPL; dd++) o[dd] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  int last_key = qt * ATT_BQ + ATT_BQ - 1 < S - 1 ? qt * ATT_BQ + ATT_BQ - 1 : S - 1;
  int nkt = last_key / ATT_BK + 1;
  for (int kt = 0; kt < nkt; kt++) {
    __syncthreads(); /* the previous tile is no longer read */
    for (int idx = threadIdx.x; idx < ATT_BK * HD; idx += ATT_THREADS) {
      int jj = idx / HD, d = idx % HD, j = kt * ATT_BK + jj;
      bool ok = j < S && d < hd;
      Ks[jj * LD + d] = ok ? Kg[(size_t)j * rs + d] : 0.0f;
      Vs[jj * LD + d] = ok ? Vg[(size_t)j * rs + d] : 0.0f;
    }
    __syncthreads();

    float sc[KPL];
#pragma unroll
    for (int t = 0; t < KPL; t++) sc[t] = 0.0f;
#pragma unroll
    for (int d = 0; d < HD; d++) {
      float qd = q[d];
#pragma unroll
      for (int t = 0; t < KPL; t++) sc[t] = fmaf(qd, Ks[(c + ATT_LANES * t) * LD + d], sc[t]);
    }
    float tmax = -INFINITY;
#pragma unroll
    for (int t = 0; t < KPL; t++) {
      int j = kt * ATT_BK + c + ATT_LANES * t;
      float s = sc[t] * scale;
      if (j > i) s = -INFINITY; /* causal (also masks keys past S for real rows) */
      sc[t] = s;
      tmax = fmaxf(tmax, s);
    }
    tmax = fmaxf(tmax, __shfl_xor_sync(FULL_MASK, tmax, 1));
    tmax = fmaxf(tmax, __shfl_xor_sync(FULL_MASK, tmax, 2));
    float mnew = fmaxf(m, tmax);
    float corr = expf(m - mnew);
    float psum = 0.0f;
#pragma unroll
    for (int t = 0; t < KPL; t++) {
      float p = expf(sc[t] - mnew);
      Ps[r * (ATT_BK + 1) + c + ATT_LANES * t] = p;
      psum += p;
    }
    psum += __shfl_xor_sync(FULL_MASK, psum, 1);
    psum += __shfl_xor_sync(FULL_MASK, psum, 2);
    l = l * corr + psum;
    m = mnew;
    __syncwarp(); /* the row's 4 lanes (same warp) have written their P values */
#pragma unroll
    for (int dd = 0; dd < DPL; dd++) o[dd] *= corr;
    for (int jj = 0; jj < ATT_BK; jj++) {
      float p = Ps[r * (ATT_BK + 1) + jj];
#pragma unroll
      for (int dd = 0; dd < DPL; dd++) o[dd] = fmaf(p, Vs[jj * LD + c + ATT_LANES * dd], o[dd]);
    }
  }

  if (i < S) {
    float inv = 1.0f / l;
    float *orow = out + ((size_t)b * S + i) * (size_t)nh * hd + (size_t)h * hd;
#pragma unroll
    for (int dd = 0; dd < DPL; dd++) {
      int d = c + ATT_LANES * dd;
      if (d < hd) orow[d] = o[dd] * inv;
    }
    if (c == 0) lse[((size_t)b * nh + h) * S + i] = m + logf(l);
  }
}

/* ---- backward ---- */

/* D[b, h, i] = dot(dout row, out row), in increasing d like the CPU. (The
 * BF16 path takes D in its rounding pass over dout, cuda_attention_bf16.cu.) */
__global__ void attention_backward_d_kernel(float *Dd, const float *dout, const float *out, int B,
                                            int S, int nh, int hd) {
  size_t n = (size_t)B * nh * S;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
       idx += (size_t)gridDim.x * blockDim.x) {
    size_t b = idx / ((size_t)nh * S), h = (idx / S) % nh, i = idx % S;
    size_t off = (b * S + i) * (size_t)nh * hd + h * hd;
    float acc = 0.0f;
    for (int d = 0; d < hd; d++) acc += dout[off + d] * out[off + d];
    Dd[idx] = acc;
  }
}

/* D for every (batch, head, query), in the attention scratch slot (returned) */
static float *attention_rowdot(const float *dout, const float *out, int B, int S, int nh, int hd) {
  size_t nrows = (size_t)B * nh * S;
  float *Dd = (float *)rc_cuda_scratch(RC_SCRATCH_ATTN, nrows * sizeof(float));
  attention_backward_d_kernel<<<rc_grid_1d(nrows, 256), 256, 0, rc_cuda_stream()>>>(Dd, dout, out,
                                                                                    B, S, nh, hd);
  KERNEL_CHECK();
  return Dd;
}

/* One block per (key tile, head, batch): dK = scale * dS^T Q, dV = P^T dout,
 * folded over the query tiles in increasing order. */
template <int HD>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dkv_kernel(float *dqkv, const float *dout, const float *lse, const float *Dd,
                                  const float *qkv, int S, int nh, int hd, float scale) {
  constexpr int LD = HD + 1;
  constexpr int DPL = HD / ATT_LANES;
  constexpr int QPL = ATT_BQ / ATT_LANES;
  extern __shared__ float smem[];
  float *Ks = smem;                        /* [BK][LD] this block's keys */
  float *Vs = Ks + ATT_BK * LD;            /* [BK][LD] */
  float *Qs = Vs + ATT_BK * LD;            /* [BQ][LD] current query tile */
  float *Gs = Qs + ATT_BQ * LD;            /* [BQ][LD] dout of the query tile */
  float *Ps = Gs + ATT_BQ * LD;            /* [BK][BQ+1] */
  float *dSs = Ps + ATT_BK * (ATT_BQ + 1); /* [BK][BQ+1] */
  float *Ls = dSs + ATT_BK * (ATT_BQ + 1); /* [BQ] lse */
  float *Ds = Ls + ATT_BQ;                 /* [BQ] D */

  int ntq = (S + ATT_BQ - 1) / ATT_BQ;
  int kt = blockIdx.x; /* the first key tiles see the most queries: start them first */
  int h = blockIdx.y, b = blockIdx.z;
  int r = threadIdx.x / ATT_LANES, c = threadIdx.x % ATT_LANES;
  int j = kt * ATT_BK + r;
  size_t rs = 3 * (size_t)nh * hd, ors = (size_t)nh * hd;
  const float *base = qkv + (size_t)b * S * rs;
  const float *Qg = base + (size_t)h * hd;
  const float *Kg = base + (size_t)nh * hd + (size_t)h * hd;
  const float *Vg = base + 2 * (size_t)nh * hd + (size_t)h * hd;
  const float *Gg = dout + (size_t)b * S * ors + (size_t)h * hd;
  const float *Lg = lse + ((size_t)b * nh + h) * S;
  const float *Dg = Dd + ((size_t)b * nh + h) * S;

  for (int idx = threadIdx.x; idx < ATT_BK * HD; idx += ATT_THREADS) {
    int jj = idx / HD, d = idx % HD, jg = kt * ATT_BK + jj;
    bool ok = jg < S && d < hd;
    Ks[jj * LD + d] = ok ? Kg[(size_t)jg * rs + d] : 0.0f;
    Vs[jj * LD + d] = ok ? Vg[(size_t)jg * rs + d] : 0.0f;
  }

  float dk[DPL], dv[DPL];
#pragma unroll
  for (int dd = 0; dd < DPL; dd++) dk[dd] = dv[dd] = 0.0f;

  /* BQ == BK, so query tile kt is the first that sees any of these keys */
  for (int qt = kt; qt < ntq; qt++) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < ATT_BQ * HD; idx += ATT_THREADS) {
      int ii = idx / HD, d = idx % HD, ig = qt * ATT_BQ + ii;
      bool ok = ig < S && d < hd;
      Qs[ii * LD + d] = ok ? Qg[(size_t)ig * rs + d] : 0.0f;
      Gs[ii * LD + d] = ok ? Gg[(size_t)ig * ors + d] : 0.0f;
    }
    for (int ii = threadIdx.x; ii < ATT_BQ; ii += ATT_THREADS) {
      int ig = qt * ATT_BQ + ii;
      Ls[ii] = ig < S ? Lg[ig] : 0.0f;
      Ds[ii] = ig < S ? Dg[ig] : 0.0f;
    }
    __syncthreads();

    float s[QPL], dp[QPL];
#pragma unroll
    for (int t = 0; t < QPL; t++) s[t] = dp[t] = 0.0f;
#pragma unroll
    for (int d = 0; d < HD; d++) {
      float kd = Ks[r * LD + d], vd = Vs[r * LD + d];
#pragma unroll
      for (int t = 0; t < QPL; t++) {
        int ii = c + ATT_LANES * t;
        s[t] = fmaf(Qs[ii * LD + d], kd, s[t]);
        dp[t] = fmaf(Gs[ii * LD + d], vd, dp[t]);
      }
    }
#pragma unroll
    for (int t = 0; t < QPL; t++) {
      int ii = c + ATT_LANES * t, ig = qt * ATT_BQ + ii;
      float p = (ig < S && ig >= j) ? expf(s[t] * scale - Ls[ii]) : 0.0f;
      Ps[r * (ATT_BQ + 1) + ii] = p;
      dSs[r * (ATT_BQ + 1) + ii] = p * (dp[t] - Ds[ii]);
    }
    __syncwarp();
    for (int ii = 0; ii < ATT_BQ; ii++) {
      float p = Ps[r * (ATT_BQ + 1) + ii], ds = dSs[r * (ATT_BQ + 1) + ii];
#pragma unroll
      for (int dd = 0; dd < DPL; dd++) {
        int d = c + ATT_LANES * dd;
        dv[dd] = fmaf(p, Gs[ii * LD + d], dv[dd]);
        dk[dd] = fmaf(ds, Qs[ii * LD + d], dk[dd]);
      }
    }
  }

  if (j < S) {
    float *row = dqkv + ((size_t)b * S + j) * rs;
#pragma unroll
    for (int dd = 0; dd < DPL; dd++) {
      int d = c + ATT_LANES * dd;
      if (d < hd) {
        row[(size_t)nh * hd + (size_t)h * hd + d] = dk[dd] * scale;
        row[2 * (size_t)nh * hd + (size_t)h * hd + d] = dv[dd];
      }
    }
  }
}

/* One block per (query tile, head, batch): dQ = scale * dS K, folded over the
 * key tiles up to the diagonal in increasing order. */
template <int HD>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dq_kernel(float *dqkv, const float *dout, const float *lse, const float *Dd,
                                 const float *qkv, int S, int nh, int hd, float scale) {
  constexpr int LD = HD + 1;
  constexpr int DPL = HD / ATT_LANES;
  constexpr int KPL = ATT_BK / ATT_LANES;
  extern __shared__ float smem[];
  float *Qs = smem;              /* [BQ][LD] this block's queries */
  float *Gs = Qs + ATT_BQ * LD;  /* [BQ][LD] their dout */
  float *Ks = Gs + ATT_BQ * LD;  /* [BK][LD] current key tile */
  float *Vs = Ks + ATT_BK * LD;  /* [BK][LD] */
  float *dSs = Vs + ATT_BK * LD; /* [BQ][BK+1] */

  int ntq = (S + ATT_BQ - 1) / ATT_BQ;
  int qt = ntq - 1 - (int)blockIdx.x;
  int h = blockIdx.y, b = blockIdx.z;
  int r = threadIdx.x / ATT_LANES, c = threadIdx.x % ATT_LANES;
  int i = qt * ATT_BQ + r;
  size_t rs = 3 * (size_t)nh * hd, ors = (size_t)nh * hd;
  const float *base = qkv + (size_t)b * S * rs;
  const float *Qg = base + (size_t)h * hd;
  const float *Kg = base + (size_t)nh * hd + (size_t)h * hd;
  const float *Vg = base + 2 * (size_t)nh * hd + (size_t)h * hd;
  const float *Gg = dout + (size_t)b * S * ors + (size_t)h * hd;
  float lse_i = i < S ? lse[((size_t)b * nh + h) * S + i] : 0.0f;
  float D_i = i < S ? Dd[((size_t)b * nh + h) * S + i] : 0.0f;

  for (int idx = threadIdx.x; idx < ATT_BQ * HD; idx += ATT_THREADS) {
    int ii = idx / HD, d = idx % HD, ig = qt * ATT_BQ + ii;
    bool ok = ig < S && d < hd;
    Qs[ii * LD + d] = ok ? Qg[(size_t)ig * rs + d] : 0.0f;
    Gs[ii * LD + d] = ok ? Gg[(size_t)ig * ors + d] : 0.0f;
  }

  float dq[DPL];
#pragma unroll
  for (int dd = 0; dd < DPL; dd++) dq[dd] = 0.0f;

  int last_key = qt * ATT_BQ + ATT_BQ - 1 < S - 1 ? qt * ATT_BQ + ATT_BQ - 1 : S - 1;
  int nkt = last_key / ATT_BK + 1;
  for (int kt = 0; kt < nkt; kt++) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < ATT_BK * HD; idx += ATT_THREADS) {
      int jj = idx / HD, d = idx % HD, jg = kt * ATT_BK + jj;
      bool ok = jg < S && d < hd;
      Ks[jj * LD + d] = ok ? Kg[(size_t)jg * rs + d] : 0.0f;
      Vs[jj * LD + d] = ok ? Vg[(size_t)jg * rs + d] : 0.0f;
    }
    __syncthreads();

    float s[KPL], dp[KPL];
#pragma unroll
    for (int t = 0; t < KPL; t++) s[t] = dp[t] = 0.0f;
#pragma unroll
    for (int d = 0; d < HD; d++) {
      float qd = Qs[r * LD + d], gd = Gs[r * LD + d];
#pragma unroll
      for (int t = 0; t < KPL; t++) {
        int jj = c + ATT_LANES * t;
        s[t] = fmaf(qd, Ks[jj * LD + d], s[t]);
        dp[t] = fmaf(gd, Vs[jj * LD + d], dp[t]);
      }
    }
#pragma unroll
    for (int t = 0; t < KPL; t++) {
      int jj = c + ATT_LANES * t, jg = kt * ATT_BK + jj;
      float p = (i < S && jg <= i) ? expf(s[t] * scale - lse_i) : 0.0f;
      dSs[r * (ATT_BK + 1) + jj] = p * (dp[t] - D_i);
    }
    __syncwarp();
    for (int jj = 0; jj < ATT_BK; jj++) {
      float ds = dSs[r * (ATT_BK + 1) + jj];
#pragma unroll
      for (int dd = 0; dd < DPL; dd++) dq[dd] = fmaf(ds, Ks[jj * LD + c + ATT_LANES * dd], dq[dd]);
    }
  }

  if (i < S) {
    float *row = dqkv + ((size_t)b * S + i) * rs + (size_t)h * hd;
#pragma unroll
    for (int dd = 0; dd < DPL; dd++) {
      int d = c + ATT_LANES * dd;
      if (d < hd) row[d] = dq[dd] * scale;
    }
  }
}

/* ---- register-tiled kernels (the default) ----
 *
 * The kernels above give every thread one row and read one shared-memory
 * operand per FMA, so they run at the shared-memory bandwidth (~11 TFLOP/s
 * forward). These keep the same tiles (64 x 64, 256 threads) and the same
 * ownership rule (one thread per output element, fixed fold order), but each
 * thread computes a 4 x 4 block of a tile product from registers, as an SGEMM
 * does: one float4 load of the transposed operand and four conflict-free
 * scalar loads of the row-major one feed 16 (or 32) FMAs.
 *
 * Thread (ty, tx) = (tid / 16, tid % 16) owns the 4 "row-side" entries
 * ty*4 + a (a < 4) and the 4 "column-side" entries tx + 16*b (b < 4) of a
 * score tile, and the dimensions tx + 16*u (u < HD/16) of an accumulator
 * row. The 16 threads of one ty are one half-warp, so row statistics are
 * combined with xor shuffles 1, 2, 4, 8, which give all 16 lanes the same
 * bits. Dot products over d run in increasing d, accumulations over keys
 * (or queries) in increasing index: the result is a function of the inputs
 * only. Row-major tiles use a padded stride HD + 1 (scalar reads by 16
 * consecutive rows hit distinct banks); transposed tiles use BQ + 4 = 68
 * (16-byte aligned float4 reads). */

#define RT_LDT (ATT_BQ + 4) /* stride of transposed [HD][64] tiles and of P/dS tiles */

/* Loads rows [row0, row0 + 64) of a strided [S, *] matrix, columns [0, hd),
 * into dst either row-major [64][HD + 1] or transposed [HD][RT_LDT];
 * rows >= S and columns >= hd become 0. */
template <int HD, bool TRANSPOSE>
__device__ __forceinline__ void rt_load_tile(float *dst, const float *src, size_t stride, int row0,
                                             int S, int hd) {
  for (int idx = threadIdx.x; idx < ATT_BQ * HD; idx += ATT_THREADS) {
    int rr = idx / HD, d = idx % HD, row = row0 + rr;
    float v = (row < S && d < hd) ? src[(size_t)row * stride + d] : 0.0f;
    if (TRANSPOSE)
      dst[d * RT_LDT + rr] = v;
    else
      dst[rr * (HD + 1) + d] = v;
  }
}

template <int HD>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_forward_rt_kernel(float *out, float *lse, const float *qkv, int S, int nh, int hd,
                                float scale) {
  constexpr int LD = HD + 1, NU = HD / 16;
  extern __shared__ float smem[];
  float *Qt = smem;             /* [HD][RT_LDT] this block's queries, transposed */
  float *Ks = Qt + HD * RT_LDT; /* [BK][LD] */
  float *Vs = Ks + ATT_BK * LD; /* [BK][LD] */
  float *Ps = Vs + ATT_BK * LD; /* [BK][RT_LDT] P of the tile, key-major */

  int ntq = (S + ATT_BQ - 1) / ATT_BQ;
  int qt = ntq - 1 - (int)blockIdx.x; /* the longest (last) query tiles start first */
  int h = blockIdx.y, b = blockIdx.z;
  int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  size_t rs = 3 * (size_t)nh * hd;
  const float *base = qkv + (size_t)b * S * rs;
  const float *Qg = base + (size_t)h * hd;
  const float *Kg = base + (size_t)nh * hd + (size_t)h * hd;
  const float *Vg = base + 2 * (size_t)nh * hd + (size_t)h * hd;

  rt_load_tile<HD, true>(Qt, Qg, rs, qt * ATT_BQ, S, hd);

  float o[4][NU], m[4], l[4];
#pragma unroll
  for (int a = 0; a < 4; a++) {
    m[a] = -INFINITY, l[a] = 0.0f;
#pragma unroll
    for (int u = 0; u < NU; u++) o[a][u] = 0.0f;
  }

  int last_key = qt * ATT_BQ + ATT_BQ - 1 < S - 1 ? qt * ATT_BQ + ATT_BQ - 1 : S - 1;
  int nkt = last_key / ATT_BK + 1;
  for (int kt = 0; kt < nkt; kt++) {
    __syncthreads(); /* the previous tile's K, V and P are no longer read */
    rt_load_tile<HD, false>(Ks, Kg, rs, kt * ATT_BK, S, hd);
    rt_load_tile<HD, false>(Vs, Vg, rs, kt * ATT_BK, S, hd);
    __syncthreads();

    float s[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int c = 0; c < 4; c++) s[a][c] = 0.0f;
#pragma unroll 8
    for (int d = 0; d < HD; d++) {
      float4 q4 = *(const float4 *)&Qt[d * RT_LDT + ty * 4];
      float qa[4] = {q4.x, q4.y, q4.z, q4.w}, kc[4];
#pragma unroll
      for (int c = 0; c < 4; c++) kc[c] = Ks[(tx + 16 * c) * LD + d];
#pragma unroll
      for (int a = 0; a < 4; a++)
#pragma unroll
        for (int c = 0; c < 4; c++) s[a][c] = fmaf(qa[a], kc[c], s[a][c]);
    }
#pragma unroll
    for (int a = 0; a < 4; a++) {
      int i = qt * ATT_BQ + ty * 4 + a;
      float tmax = -INFINITY;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        int j = kt * ATT_BK + tx + 16 * c;
        float v = s[a][c] * scale;
        if (j > i) v = -INFINITY; /* causal (also masks keys past S for real rows) */
        s[a][c] = v;
        tmax = fmaxf(tmax, v);
      }
#pragma unroll
      for (int x = 1; x < 16; x <<= 1) tmax = fmaxf(tmax, __shfl_xor_sync(FULL_MASK, tmax, x));
      float mnew = fmaxf(m[a], tmax);
      float corr = expf(m[a] - mnew);
      float psum = 0.0f;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        float p = expf(s[a][c] - mnew);
        Ps[(tx + 16 * c) * RT_LDT + ty * 4 + a] = p;
        psum += p;
      }
#pragma unroll
      for (int x = 1; x < 16; x <<= 1) psum += __shfl_xor_sync(FULL_MASK, psum, x);
      l[a] = l[a] * corr + psum;
      m[a] = mnew;
#pragma unroll
      for (int u = 0; u < NU; u++) o[a][u] *= corr;
    }
    __syncwarp(); /* P rows ty*4.. are written and read by the same half-warp */
#pragma unroll 4
    for (int jj = 0; jj < ATT_BK; jj++) {
      float4 p4 = *(const float4 *)&Ps[jj * RT_LDT + ty * 4];
      float pa[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
      for (int u = 0; u < NU; u++) {
        float v = Vs[jj * LD + tx + 16 * u];
#pragma unroll
        for (int a = 0; a < 4; a++) o[a][u] = fmaf(pa[a], v, o[a][u]);
      }
    }
  }

#pragma unroll
  for (int a = 0; a < 4; a++) {
    int i = qt * ATT_BQ + ty * 4 + a;
    if (i >= S) continue;
    float inv = 1.0f / l[a];
    float *orow = out + ((size_t)b * S + i) * (size_t)nh * hd + (size_t)h * hd;
#pragma unroll
    for (int u = 0; u < NU; u++) {
      int d = tx + 16 * u;
      if (d < hd) orow[d] = o[a][u] * inv;
    }
    if (tx == 0) lse[((size_t)b * nh + h) * S + i] = m[a] + logf(l[a]);
  }
}

/* One block per (key tile, head, batch): dK = scale * dS^T Q, dV = P^T dout,
 * folded over the query tiles in increasing order. Row side = keys. */
template <int HD>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dkv_rt_kernel(float *dqkv, const float *dout, const float *lse,
                                     const float *Dd, const float *qkv, int S, int nh, int hd,
                                     float scale) {
  constexpr int LD = HD + 1, NU = HD / 16;
  extern __shared__ float smem[];
  float *Kt = smem;                  /* [HD][RT_LDT] this block's keys, transposed */
  float *Vt = Kt + HD * RT_LDT;      /* [HD][RT_LDT] */
  float *Qs = Vt + HD * RT_LDT;      /* [BQ][LD] current query tile */
  float *Gs = Qs + ATT_BQ * LD;      /* [BQ][LD] its dout */
  float *Ps = Gs + ATT_BQ * LD;      /* [BQ][RT_LDT] P, query-major */
  float *dSs = Ps + ATT_BQ * RT_LDT; /* [BQ][RT_LDT] */
  float *Ls = dSs + ATT_BQ * RT_LDT; /* [BQ] */
  float *Ds = Ls + ATT_BQ;           /* [BQ] */

  int ntq = (S + ATT_BQ - 1) / ATT_BQ;
  int kt = blockIdx.x; /* the first key tiles see the most queries: start them first */
  int h = blockIdx.y, b = blockIdx.z;
  int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  size_t rs = 3 * (size_t)nh * hd, ors = (size_t)nh * hd;
  const float *base = qkv + (size_t)b * S * rs;
  const float *Qg = base + (size_t)h * hd;
  const float *Kg = base + (size_t)nh * hd + (size_t)h * hd;
  const float *Vg = base + 2 * (size_t)nh * hd + (size_t)h * hd;
  const float *Gg = dout + (size_t)b * S * ors + (size_t)h * hd;
  const float *Lg = lse + ((size_t)b * nh + h) * S;
  const float *Dg = Dd + ((size_t)b * nh + h) * S;

  rt_load_tile<HD, true>(Kt, Kg, rs, kt * ATT_BK, S, hd);
  rt_load_tile<HD, true>(Vt, Vg, rs, kt * ATT_BK, S, hd);

  float dk[4][NU], dv[4][NU];
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int u = 0; u < NU; u++) dk[a][u] = dv[a][u] = 0.0f;

  /* BQ == BK, so query tile kt is the first that sees any of these keys */
  for (int qt = kt; qt < ntq; qt++) {
    __syncthreads(); /* the previous query tile, P and dS are no longer read */
    rt_load_tile<HD, false>(Qs, Qg, rs, qt * ATT_BQ, S, hd);
    rt_load_tile<HD, false>(Gs, Gg, ors, qt * ATT_BQ, S, hd);
    for (int ii = threadIdx.x; ii < ATT_BQ; ii += ATT_THREADS) {
      int ig = qt * ATT_BQ + ii;
      Ls[ii] = ig < S ? Lg[ig] : 0.0f;
      Ds[ii] = ig < S ? Dg[ig] : 0.0f;
    }
    __syncthreads();

    float s[4][4], dp[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int c = 0; c < 4; c++) s[a][c] = dp[a][c] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < HD; d++) {
      float4 k4 = *(const float4 *)&Kt[d * RT_LDT + ty * 4];
      float4 v4 = *(const float4 *)&Vt[d * RT_LDT + ty * 4];
      float ka[4] = {k4.x, k4.y, k4.z, k4.w}, va[4] = {v4.x, v4.y, v4.z, v4.w}, qc[4], gc[4];
#pragma unroll
      for (int c = 0; c < 4; c++) {
        qc[c] = Qs[(tx + 16 * c) * LD + d];
        gc[c] = Gs[(tx + 16 * c) * LD + d];
      }
#pragma unroll
      for (int a = 0; a < 4; a++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
          s[a][c] = fmaf(qc[c], ka[a], s[a][c]);
          dp[a][c] = fmaf(gc[c], va[a], dp[a][c]);
        }
    }
#pragma unroll
    for (int a = 0; a < 4; a++) {
      int j = kt * ATT_BK + ty * 4 + a;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        int ii = tx + 16 * c, ig = qt * ATT_BQ + ii;
        float p = (ig < S && ig >= j) ? expf(s[a][c] * scale - Ls[ii]) : 0.0f;
        Ps[ii * RT_LDT + ty * 4 + a] = p;
        dSs[ii * RT_LDT + ty * 4 + a] = p * (dp[a][c] - Ds[ii]);
      }
    }
    __syncwarp(); /* columns ty*4.. of P and dS are written and read by the same half-warp */
#pragma unroll 4
    for (int ii = 0; ii < ATT_BQ; ii++) {
      float4 p4 = *(const float4 *)&Ps[ii * RT_LDT + ty * 4];
      float4 s4 = *(const float4 *)&dSs[ii * RT_LDT + ty * 4];
      float pa[4] = {p4.x, p4.y, p4.z, p4.w}, sa[4] = {s4.x, s4.y, s4.z, s4.w};
#pragma unroll
      for (int u = 0; u < NU; u++) {
        float g = Gs[ii * LD + tx + 16 * u], q = Qs[ii * LD + tx + 16 * u];
#pragma unroll
        for (int a = 0; a < 4; a++) {
          dv[a][u] = fmaf(pa[a], g, dv[a][u]);
          dk[a][u] = fmaf(sa[a], q, dk[a][u]);
        }
      }
    }
  }

#pragma unroll
  for (int a = 0; a < 4; a++) {
    int j = kt * ATT_BK + ty * 4 + a;
    if (j >= S) continue;
    float *row = dqkv + ((size_t)b * S + j) * rs;
#pragma unroll
    for (int u = 0; u < NU; u++) {
      int d = tx + 16 * u;
      if (d < hd) {
        row[(size_t)nh * hd + (size_t)h * hd + d] = dk[a][u] * scale;
        row[2 * (size_t)nh * hd + (size_t)h * hd + d] = dv[a][u];
      }
    }
  }
}

/* One block per (query tile, head, batch): dQ = scale * dS K, folded over the
 * key tiles up to the diagonal in increasing order. Row side = queries. */
template <int HD>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dq_rt_kernel(float *dqkv, const float *dout, const float *lse,
                                    const float *Dd, const float *qkv, int S, int nh, int hd,
                                    float scale) {
  constexpr int LD = HD + 1, NU = HD / 16;
  extern __shared__ float smem[];
  float *Qt = smem;              /* [HD][RT_LDT] this block's queries, transposed */
  float *Gt = Qt + HD * RT_LDT;  /* [HD][RT_LDT] their dout, transposed */
  float *Ks = Gt + HD * RT_LDT;  /* [BK][LD] current key tile */
  float *Vs = Ks + ATT_BK * LD;  /* [BK][LD] */
  float *dSs = Vs + ATT_BK * LD; /* [BK][RT_LDT] dS, key-major */

  int ntq = (S + ATT_BQ - 1) / ATT_BQ;
  int qt = ntq - 1 - (int)blockIdx.x;
  int h = blockIdx.y, b = blockIdx.z;
  int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  size_t rs = 3 * (size_t)nh * hd, ors = (size_t)nh * hd;
  const float *base = qkv + (size_t)b * S * rs;
  const float *Qg = base + (size_t)h * hd;
  const float *Kg = base + (size_t)nh * hd + (size_t)h * hd;
  const float *Vg = base + 2 * (size_t)nh * hd + (size_t)h * hd;
  const float *Gg = dout + (size_t)b * S * ors + (size_t)h * hd;

  rt_load_tile<HD, true>(Qt, Qg, rs, qt * ATT_BQ, S, hd);
  rt_load_tile<HD, true>(Gt, Gg, ors, qt * ATT_BQ, S, hd);
  float lse_i[4], D_i[4], dq[4][NU];
#pragma unroll
  for (int a = 0; a < 4; a++) {
    int i = qt * ATT_BQ + ty * 4 + a;
    lse_i[a] = i < S ? lse[((size_t)b * nh + h) * S + i] : 0.0f;
    D_i[a] = i < S ? Dd[((size_t)b * nh + h) * S + i] : 0.0f;
#pragma unroll
    for (int u = 0; u < NU; u++) dq[a][u] = 0.0f;
  }

  int last_key = qt * ATT_BQ + ATT_BQ - 1 < S - 1 ? qt * ATT_BQ + ATT_BQ - 1 : S - 1;
  int nkt = last_key / ATT_BK + 1;
  for (int kt = 0; kt < nkt; kt++) {
    __syncthreads(); /* the previous key tile and dS are no longer read */
    rt_load_tile<HD, false>(Ks, Kg, rs, kt * ATT_BK, S, hd);
    rt_load_tile<HD, false>(Vs, Vg, rs, kt * ATT_BK, S, hd);
    __syncthreads();

    float s[4][4], dp[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int c = 0; c < 4; c++) s[a][c] = dp[a][c] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < HD; d++) {
      float4 q4 = *(const float4 *)&Qt[d * RT_LDT + ty * 4];
      float4 g4 = *(const float4 *)&Gt[d * RT_LDT + ty * 4];
      float qa[4] = {q4.x, q4.y, q4.z, q4.w}, ga[4] = {g4.x, g4.y, g4.z, g4.w}, kc[4], vc[4];
#pragma unroll
      for (int c = 0; c < 4; c++) {
        kc[c] = Ks[(tx + 16 * c) * LD + d];
        vc[c] = Vs[(tx + 16 * c) * LD + d];
      }
#pragma unroll
      for (int a = 0; a < 4; a++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
          s[a][c] = fmaf(qa[a], kc[c], s[a][c]);
          dp[a][c] = fmaf(ga[a], vc[c], dp[a][c]);
        }
    }
#pragma unroll
    for (int a = 0; a < 4; a++) {
      int i = qt * ATT_BQ + ty * 4 + a;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        int jj = tx + 16 * c, jg = kt * ATT_BK + jj;
        float p = (i < S && jg <= i) ? expf(s[a][c] * scale - lse_i[a]) : 0.0f;
        dSs[jj * RT_LDT + ty * 4 + a] = p * (dp[a][c] - D_i[a]);
      }
    }
    __syncwarp(); /* columns ty*4.. of dS are written and read by the same half-warp */
#pragma unroll 4
    for (int jj = 0; jj < ATT_BK; jj++) {
      float4 s4 = *(const float4 *)&dSs[jj * RT_LDT + ty * 4];
      float sa[4] = {s4.x, s4.y, s4.z, s4.w};
#pragma unroll
      for (int u = 0; u < NU; u++) {
        float k = Ks[jj * LD + tx + 16 * u];
#pragma unroll
        for (int a = 0; a < 4; a++) dq[a][u] = fmaf(sa[a], k, dq[a][u]);
      }
    }
  }

#pragma unroll
  for (int a = 0; a < 4; a++) {
    int i = qt * ATT_BQ + ty * 4 + a;
    if (i >= S) continue;
    float *row = dqkv + ((size_t)b * S + i) * rs + (size_t)h * hd;
#pragma unroll
    for (int u = 0; u < NU; u++) {
      int d = tx + 16 * u;
      if (d < hd) row[d] = dq[a][u] * scale;
    }
  }
}

/* ---- launchers ---- */

template <int HD> static size_t fwd_smem(void) {
  return (size_t)(2 * ATT_BK * (HD + 1) + ATT_BQ * (ATT_BK + 1)) * sizeof(float);
}
template <int HD> static size_t dkv_smem(void) {
  return (size_t)(2 * ATT_BK * (HD + 1) + 2 * ATT_BQ * (HD + 1) + 2 * ATT_BK * (ATT_BQ + 1) +
                  2 * ATT_BQ) *
         sizeof(float);
}
template <int HD> static size_t dq_smem(void) {
  return (size_t)(2 * ATT_BQ * (HD + 1) + 2 * ATT_BK * (HD + 1) + ATT_BQ * (ATT_BK + 1)) *
         sizeof(float);
}

template <int HD> static size_t fwd_rt_smem(void) {
  return (size_t)(HD * RT_LDT + 2 * ATT_BK * (HD + 1) + ATT_BK * RT_LDT) * sizeof(float);
}
template <int HD> static size_t dkv_rt_smem(void) {
  return (size_t)(2 * HD * RT_LDT + 2 * ATT_BQ * (HD + 1) + 2 * ATT_BQ * RT_LDT + 2 * ATT_BQ) *
         sizeof(float);
}
template <int HD> static size_t dq_rt_smem(void) {
  return (size_t)(2 * HD * RT_LDT + 2 * ATT_BK * (HD + 1) + ATT_BK * RT_LDT) * sizeof(float);
}

/* RC_CUDA_ATTENTION=simple selects the one-row-per-thread kernels (the
 * previous default, kept as a baseline for benchmarks and as a second
 * implementation to test against). Read once per process: the choice
 * changes bits, so it must not change inside a run. */
static bool use_simple(void) {
  static int v = -1;
  return rc_env_once(&v, "RC_CUDA_ATTENTION", "simple");
}

template <int HD>
static void forward_impl(float *out, float *lse, const float *qkv, int B, int S, int nh, int hd) {
  static bool opted = false, opted_rt = false;
  dim3 grid((unsigned int)((S + ATT_BQ - 1) / ATT_BQ), (unsigned int)nh, (unsigned int)B);
  float scale = 1.0f / sqrtf((float)hd);
  if (use_simple()) {
    size_t sm = fwd_smem<HD>();
    rc_allow_smem(attention_forward_kernel<HD>, sm, &opted);
    attention_forward_kernel<HD>
        <<<grid, ATT_THREADS, sm, rc_cuda_stream()>>>(out, lse, qkv, S, nh, hd, scale);
  } else {
    size_t sm = fwd_rt_smem<HD>();
    rc_allow_smem(attention_forward_rt_kernel<HD>, sm, &opted_rt);
    attention_forward_rt_kernel<HD>
        <<<grid, ATT_THREADS, sm, rc_cuda_stream()>>>(out, lse, qkv, S, nh, hd, scale);
  }
  KERNEL_CHECK();
}

template <int HD>
static void backward_impl(float *dqkv, const float *dout, const float *out, const float *lse,
                          const float *qkv, int B, int S, int nh, int hd) {
  static bool opted_dkv = false, opted_dq = false;
  cudaStream_t s = rc_cuda_stream();
  float *Dd = attention_rowdot(dout, out, B, S, nh, hd);

  float scale = 1.0f / sqrtf((float)hd);
  dim3 grid((unsigned int)((S + ATT_BQ - 1) / ATT_BQ), (unsigned int)nh, (unsigned int)B);
  if (use_simple()) {
    size_t sm_dkv = dkv_smem<HD>(), sm_dq = dq_smem<HD>();
    rc_allow_smem(attention_backward_dkv_kernel<HD>, sm_dkv, &opted_dkv);
    rc_allow_smem(attention_backward_dq_kernel<HD>, sm_dq, &opted_dq);
    attention_backward_dkv_kernel<HD>
        <<<grid, ATT_THREADS, sm_dkv, s>>>(dqkv, dout, lse, Dd, qkv, S, nh, hd, scale);
    KERNEL_CHECK();
    attention_backward_dq_kernel<HD>
        <<<grid, ATT_THREADS, sm_dq, s>>>(dqkv, dout, lse, Dd, qkv, S, nh, hd, scale);
    KERNEL_CHECK();
    return;
  }
  static bool opted_dkv_rt = false, opted_dq_rt = false;
  size_t sm_dkv = dkv_rt_smem<HD>(), sm_dq = dq_rt_smem<HD>();
  rc_allow_smem(attention_backward_dkv_rt_kernel<HD>, sm_dkv, &opted_dkv_rt);
  rc_allow_smem(attention_backward_dq_rt_kernel<HD>, sm_dq, &opted_dq_rt);
  attention_backward_dkv_rt_kernel<HD>
      <<<grid, ATT_THREADS, sm_dkv, s>>>(dqkv, dout, lse, Dd, qkv, S, nh, hd, scale);
  KERNEL_CHECK();
  attention_backward_dq_rt_kernel<HD>
      <<<grid, ATT_THREADS, sm_dq, s>>>(dqkv, dout, lse, Dd, qkv, S, nh, hd, scale);
  KERNEL_CHECK();
}

static void check_head_dim(int hd) {
  if (hd > 128) {
    fprintf(stderr, "resumecheck: CUDA attention supports head dim <= 128 (got %d)\n", hd);
    abort();
  }
}

void rc_cuda_attention_forward(rc_compute ct, float *out, float *lse, const float *qkv,
                               const uint16_t *heads, int B, int S, int nh, int hd,
                               uint16_t *out_half, rc_compute half_ct) {
  if (B <= 0 || S <= 0 || nh <= 0 || hd <= 0) return;
  check_head_dim(hd);
  if (ct == RC_COMPUTE_BF16) {
    rc_cuda_attention_bf16_forward(out, lse, qkv, heads, B, S, nh, hd, out_half, half_ct);
    return;
  }
  if (hd <= 32)
    forward_impl<32>(out, lse, qkv, B, S, nh, hd);
  else if (hd <= 64)
    forward_impl<64>(out, lse, qkv, B, S, nh, hd);
  else
    forward_impl<128>(out, lse, qkv, B, S, nh, hd);
  if (out_half) rc_cuda_cast_half(out_half, out, (size_t)B * S * nh * hd, half_ct);
}

void rc_cuda_attention_backward(rc_compute ct, float *dqkv, const float *dout, const float *out,
                                const float *lse, const float *qkv, const uint16_t *heads, int B,
                                int S, int nh, int hd, const uint16_t *out_bf16, float rope_theta,
                                uint16_t *dqkv_half, rc_compute half_ct) {
  if (B <= 0 || S <= 0 || nh <= 0 || hd <= 0) return;
  check_head_dim(hd);
  if (ct == RC_COMPUTE_BF16) {
    rc_cuda_attention_bf16_backward(dqkv, dout, out, lse, qkv, heads, B, S, nh, hd, out_bf16,
                                    rope_theta, dqkv_half, half_ct);
    return;
  }
  /* fp32: into dqkv (scratch when the caller gave none), then RoPE's
   * backward into dqkv_half: ops.h's definition */
  if (dqkv_half && !dqkv)
    dqkv = (float *)rc_cuda_scratch(RC_SCRATCH_ATTN_DQKV, (size_t)B * S * 3 * nh * hd * 4);
  if (hd <= 32)
    backward_impl<32>(dqkv, dout, out, lse, qkv, B, S, nh, hd);
  else if (hd <= 64)
    backward_impl<64>(dqkv, dout, out, lse, qkv, B, S, nh, hd);
  else
    backward_impl<128>(dqkv, dout, out, lse, qkv, B, S, nh, hd);
  if (dqkv_half) rc_cuda_rope_backward(dqkv, B, S, nh, hd, rope_theta, dqkv_half, half_ct);
}
