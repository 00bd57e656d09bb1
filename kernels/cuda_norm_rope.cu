/* cuda_norm_rope.cu — RMSNorm forward/backward and RoPE forward/backward.
 *
 * RMSNorm: one warp per row; the row's sums (mean square, and the backward's
 * dot product) are taken in double in a fixed order, like the CPU's double
 * loops, and then used with the CPU's exact float formulas. The weight
 * gradient, a sum over rows, is two-stage without atomics: fixed chunks of
 * rows give per-chunk partials, and a second kernel adds them into dw in a
 * fixed order (eight strided sums, then those in order). Up to H = NORM_FUSED_MAX_H one kernel
 * writes dx and the partials in a single pass over dout and x (a warp a row, the chunk's rows
 * folded in a fixed order); wider rows take separate dx and dw-partial kernels (NORM_CHUNK rows a
 * partial, in t).
 *
 * RoPE: angles s * theta^(-2i/hd) in double, cos/sin in double and cast to
 * float, as the CPU does (kept in a table), then the float rotation. */
#include <math.h>
#include <string.h>

#include "backend/numeric.h"
#include "cuda_common.cuh"

#define NORM_CHUNK 64 /* rows per dw partial */

/* A warp per row: the row's sum (mean square, or the backward's dot
 * product) folded per lane in increasing j, in double, then over the lanes
 * in a fixed xor tree. Rows are independent, so eight share a block and the
 * warps never wait on each other (a block per row spent its time in the
 * block-wide tree's barriers). */
#define NORM_ROWS_PER_BLOCK 8

__device__ __forceinline__ double warp_sum_double(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ uint16_t norm_encode(float v, int fp16) {
  return fp16 ? rc_fp16_encode(v) : rc_bf16_encode(v);
}

/* out and/or out_half (ops.h): the same float value, stored as asked. */
__global__ void rmsnorm_forward_kernel(float *out, float *rstd, const float *x, const float *w,
                                       int T, int H, float eps, uint16_t *out_half, int ld_half,
                                       int fp16) {
  size_t t = (size_t)blockIdx.x * NORM_ROWS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (t >= (size_t)T) return;
  const float *xt = x + t * H;
  double ss = 0.0;
  for (int j = lane; j < H; j += 32) ss += (double)xt[j] * (double)xt[j];
  ss = warp_sum_double(ss);
  float r = 1.0f / sqrtf((float)(ss / H) + eps);
  if (lane == 0) rstd[t] = r;
  for (int j = lane; j < H; j += 32) {
    float v = xt[j] * r * w[j];
    if (out) out[t * H + j] = v;
    if (out_half) out_half[t * ld_half + j] = norm_encode(v, fp16);
  }
}

/* The forward for H <= 768 (session 26; the default since its H200
 * measurement, 0.0204 -> 0.0142 ms a gpu-small call, event-timed): the kernel above with a lane's
 * elements of the row loaded into registers together, summed, and scaled from there, where the
 * kernel above has one 4-byte load a lane in flight at a time and reads the row twice. At gpu-small
 * its 12.6 MB in and 12.6 MB out a call took 24 us on the H100 (ncu, session 25): about half the
 * bandwidth, the latency of one load at a time. The same elements a lane (j = lane + 32 i), the
 * same double sum in increasing i and xor tree, the same float formulas: the same bits. */
template <int PER, bool EXACT>
__global__ void rmsnorm_forward_regs_kernel(float *out, float *rstd, const float *x, const float *w,
                                            int T, int H, float eps, uint16_t *out_half,
                                            int ld_half, int fp16) {
  size_t t = (size_t)blockIdx.x * NORM_ROWS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (t >= (size_t)T) return;
  const float *xt = x + t * H;
  float xr[PER], wr[PER];
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int j = lane + 32 * i;
    xr[i] = EXACT || j < H ? xt[j] : 0.0f;
    wr[i] = EXACT || j < H ? w[j] : 0.0f;
  }
  double ss = 0.0;
#pragma unroll
  for (int i = 0; i < PER; i++)
    if (EXACT || lane + 32 * i < H) ss += (double)xr[i] * (double)xr[i];
  ss = warp_sum_double(ss);
  float r = 1.0f / sqrtf((float)(ss / H) + eps);
  if (lane == 0) rstd[t] = r;
#pragma unroll
  for (int i = 0; i < PER; i++) xr[i] = xr[i] * r * wr[i]; /* the value stored */
  /* the stores, each kind in its own loop: no per-element branch */
  if (out)
#pragma unroll
    for (int i = 0; i < PER; i++)
      if (EXACT || lane + 32 * i < H) out[t * H + lane + 32 * i] = xr[i];
  if (out_half) {
    uint16_t *oh = out_half + t * ld_half + lane;
    if (fp16) {
#pragma unroll
      for (int i = 0; i < PER; i++)
        if (EXACT || lane + 32 * i < H) oh[32 * i] = rc_fp16_encode(xr[i]);
    } else {
#pragma unroll
      for (int i = 0; i < PER; i++)
        if (EXACT || lane + 32 * i < H) oh[32 * i] = rc_bf16_encode(xr[i]);
    }
  }
}

#define NORM_REG_MAX_PER 24 /* the register kernels take H up to 768 */

void rc_cuda_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int H,
                             float eps, uint16_t *out_half, int ld_half, rc_compute ct) {
  if (T <= 0) return;
  const int per = (H + 31) / 32, fp16 = ct == RC_COMPUTE_FP16;
  if (per <= NORM_REG_MAX_PER) {
    const unsigned int grid = rc_cdiv((size_t)T, NORM_ROWS_PER_BLOCK);
    cudaStream_t s = rc_cuda_stream();
    /* EXACT: H = 32 PER (gpu-small's 768), no bound tests, so the compiler
     * issues all of a lane's loads before the first use (with them it
     * interleaved loads and sums, a few round trips a row) */
#define NORM_FWD_REGS(P, E)                                                                        \
  rmsnorm_forward_regs_kernel<P, E><<<grid, 32 * NORM_ROWS_PER_BLOCK, 0, s>>>(                     \
      out, rstd, x, w, T, H, eps, out_half, ld_half, fp16)
    if (H == 32 * NORM_REG_MAX_PER)
      NORM_FWD_REGS(NORM_REG_MAX_PER, true);
    else if (per <= 8)
      NORM_FWD_REGS(8, false);
    else if (per <= 16)
      NORM_FWD_REGS(16, false);
    else
      NORM_FWD_REGS(NORM_REG_MAX_PER, false);
#undef NORM_FWD_REGS
    KERNEL_CHECK();
    return;
  }
  rmsnorm_forward_kernel<<<rc_cdiv((size_t)T, NORM_ROWS_PER_BLOCK), 32 * NORM_ROWS_PER_BLOCK, 0,
                           rc_cuda_stream()>>>(out, rstd, x, w, T, H, eps, out_half, ld_half,
                                               ct == RC_COMPUTE_FP16);
  KERNEL_CHECK();
}

/* dx_j += r w_j g_j - x_j c, c = r^3/H * sum_i g_i w_i x_i (in double). */
__global__ void rmsnorm_backward_dx_kernel(float *dx, const float *dout, const float *x,
                                           const float *w, const float *rstd, int T, int H,
                                           int ld_dout, uint16_t *dx_half, int fp16, int acc) {
  size_t t = (size_t)blockIdx.x * NORM_ROWS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (t >= (size_t)T) return;
  const float *xt = x + t * H, *g = dout + t * ld_dout;
  float r = rstd[t];
  double dot = 0.0;
  for (int j = lane; j < H; j += 32) dot += (double)g[j] * w[j] * xt[j];
  dot = warp_sum_double(dot);
  float c = (float)(dot * r * r * r / H);
  float *dxt = dx + t * H;
  uint16_t *dht = dx_half ? dx_half + t * H : NULL;
  for (int j = lane; j < H; j += 32) {
    const float v = (acc ? dxt[j] : 0.0f) + (r * w[j] * g[j] - xt[j] * c);
    dxt[j] = v;
    if (dht) dht[j] = norm_encode(v, fp16);
  }
}

/* partial[chunk, j] = sum over the chunk's rows, increasing t, of g x r. */
__global__ void rmsnorm_backward_dw_partial_kernel(float *partial, const float *dout,
                                                   const float *x, const float *rstd, int T, int H,
                                                   int ld_dout) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int chunk = blockIdx.y;
  if (j >= H) return;
  int t0 = chunk * NORM_CHUNK, t1 = t0 + NORM_CHUNK < T ? t0 + NORM_CHUNK : T;
  float acc = 0.0f;
  for (int t = t0; t < t1; t++)
    acc += dout[(size_t)t * ld_dout + j] * x[(size_t)t * H + j] * rstd[t];
  partial[(size_t)chunk * H + j] = acc;
}

/* dx and the dw partials in one pass over dout and x (the two kernels above
 * read both twice over): a block per chunk of NORM_FUSED_CHUNK rows and a
 * warp per row, which does dx as rmsnorm_backward_dx_kernel does and leaves
 * its row's g x r in shared memory; then each column's partial is folded in
 * a fixed order, partial[chunk] = sum over w < 8 of (sum over k < 4 of row
 * t0 + w + 8k), inner sums in increasing k, outer in increasing w. That is
 * the order of the kernel before this one, whose eight warps each walked
 * four rows (same bits); it had a quarter of the warps in flight and was
 * latency-bound (Nsight Compute: 24% occupancy, 29% of DRAM bandwidth). No
 * atomics. */
#define NORM_FUSED_CHUNK 32   /* rows per block and partial: a warp each */
#define NORM_FOLD_WAYS 8      /* the fold's outer sum */
#define NORM_FUSED_MAX_H 1536 /* 32 rows x H floats of shared memory: 192 KB */

/* The chunk's dw partial from its rows' g x r in shared memory, every
 * thread of the block taking columns: partial[chunk] = sum over w < 8 of
 * (sum over k < 4 of row t0 + w + 8k), inner sums in increasing k, outer in
 * increasing w. */
__device__ __forceinline__ void fold_chunk_partial(float *partial, const float *rows_s, int T,
                                                   int H, int t0) {
  const int nrows = T - t0 < NORM_FUSED_CHUNK ? T - t0 : NORM_FUSED_CHUNK; /* rows past T: none */
  for (int j = threadIdx.x; j < H; j += blockDim.x) {
    float sum = 0.0f;
    for (int wy = 0; wy < NORM_FOLD_WAYS; wy++) {
      float a = 0.0f;
      for (int k = wy; k < nrows; k += NORM_FOLD_WAYS) a += rows_s[(size_t)k * H + j];
      sum += a;
    }
    partial[(size_t)blockIdx.x * H + j] = sum;
  }
}

__global__ void __launch_bounds__(32 * NORM_FUSED_CHUNK)
    rmsnorm_backward_fused_kernel(float *dx, float *partial, const float *dout, const float *x,
                                  const float *w, const float *rstd, int T, int H, int ld_dout,
                                  uint16_t *dx_half, int fp16, int acc) {
  extern __shared__ float rows_s[]; /* [NORM_FUSED_CHUNK][H]: g x r of each row */
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int t0 = blockIdx.x * NORM_FUSED_CHUNK, t = t0 + warp;
  float *v = rows_s + (size_t)warp * H;
  if (t < T) {
    const float *xt = x + (size_t)t * H, *g = dout + (size_t)t * ld_dout;
    const float r = rstd[t];
    double dot = 0.0;
    for (int j = lane; j < H; j += 32) dot += (double)g[j] * w[j] * xt[j];
    dot = warp_sum_double(dot);
    const float c = (float)(dot * r * r * r / H);
    float *dxt = dx + (size_t)t * H;
    uint16_t *dht = dx_half ? dx_half + (size_t)t * H : NULL;
    for (int j = lane; j < H; j += 32) {
      const float gj = g[j], xj = xt[j];
      const float d = (acc ? dxt[j] : 0.0f) + (r * w[j] * gj - xj * c);
      dxt[j] = d;
      if (dht) dht[j] = norm_encode(d, fp16); /* the residual gradient for a half linear */
      v[j] = gj * xj * r;
    }
  }
  __syncthreads();
  fold_chunk_partial(partial, rows_s, T, H, t0);
}

/* The backward for H <= 768 (session 25; the default since session 26's
 * H200 measurement, 0.0517 -> 0.0425 ms a gpu-small call, event-timed): the fused kernel's rows
 * with each lane's elements of g and x held in registers, so the dx pass reads neither again, and
 * all of a row's loads of a kind issued together. Nsight Compute (H200, gpu-small): the fused
 * kernel runs as one wave whose warps load, reduce and fold in lock step, DRAM at 68%, and its dx
 * pass re-reads g and x mostly from L2 and DRAM (L1 hit 35%: the 96 KB of rows in shared memory
 * leave little L1), 147 MB moved where 114 are needed. Here a block has NORM_REG_WARPS warps, each
 * taking two rows of the same 32-row chunk in turn; the per-row arithmetic (the dot in double over
 * j = lane + 32 i in increasing i, the xor tree, the float formulas) and the fold are the fused
 * kernel's: the same bits by construction. PER = the elements a lane holds (H <= 32 PER). */
#ifndef NORM_REG_WARPS /* a tuning constant a variant build may set (bench/build_variants.sh) */
#define NORM_REG_WARPS 16
#endif
/* NORM_BWD_PRELOAD (a variant, off by default): a row's dx is loaded with its g and x, so a row
 * costs one round trip to memory instead of two; w is then read through L1 where it is used
 * instead of being held (the registers it frees hold dx). The same values into the same
 * formulas: the same bits. */
#ifndef NORM_BWD_PRELOAD
#define NORM_BWD_PRELOAD 0
#endif

template <int PER, bool EXACT>
__global__ void __launch_bounds__(32 * NORM_REG_WARPS)
    rmsnorm_backward_regs_kernel(float *dx, float *partial, const float *dout, const float *x,
                                 const float *w, const float *rstd, int T, int H, int ld_dout,
                                 uint16_t *dx_half, int fp16, int acc) {
  extern __shared__ float rows_s[]; /* [NORM_FUSED_CHUNK][H]: g x r of each row */
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int t0 = blockIdx.x * NORM_FUSED_CHUNK;
  for (int pass = 0; pass < NORM_FUSED_CHUNK / NORM_REG_WARPS; pass++) {
    const int row = warp + pass * NORM_REG_WARPS, t = t0 + row;
    if (t >= T) break; /* the same for the whole warp */
    const float *xt = x + (size_t)t * H, *g = dout + (size_t)t * ld_dout;
    /* w too when EXACT (its registers would spill at PER = 24 otherwise) */
    constexpr bool HOLD_W = EXACT && !NORM_BWD_PRELOAD;
    float *dxt = dx + (size_t)t * H;
    float gr[PER], xr[PER], wr[HOLD_W ? PER : 1], before[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) {
      const int j = lane + 32 * i;
      gr[i] = EXACT || j < H ? g[j] : 0.0f;
      xr[i] = EXACT || j < H ? xt[j] : 0.0f;
      if constexpr (HOLD_W) wr[i] = w[j];
      if constexpr (NORM_BWD_PRELOAD) before[i] = acc && (EXACT || j < H) ? dxt[j] : 0.0f;
    }
    auto w_at = [&](int i, int j) {
      if constexpr (HOLD_W)
        return wr[i];
      else
        return w[j];
    };
    const float r = rstd[t];
    double dot = 0.0;
#pragma unroll
    for (int i = 0; i < PER; i++) {
      const int j = lane + 32 * i;
      if (EXACT || j < H) dot += (double)gr[i] * w_at(i, j) * xr[i];
    }
    dot = warp_sum_double(dot);
    const float c = (float)(dot * r * r * r / H);
    float *v = rows_s + (size_t)row * H;
    uint16_t *dht = dx_half ? dx_half + (size_t)t * H : NULL;
    if constexpr (!NORM_BWD_PRELOAD) {
#pragma unroll
      for (int i = 0; i < PER; i++) {
        const int j = lane + 32 * i;
        before[i] = acc && (EXACT || j < H) ? dxt[j] : 0.0f;
      }
    }
#pragma unroll
    for (int i = 0; i < PER; i++) {
      const int j = lane + 32 * i;
      if (EXACT || j < H) {
        const float gj = gr[i], xj = xr[i];
        const float d = before[i] + (r * w_at(i, j) * gj - xj * c);
        dxt[j] = d;
        if (dht) dht[j] = norm_encode(d, fp16);
        v[j] = gj * xj * r;
      }
    }
  }
  __syncthreads();
  fold_chunk_partial(partial, rows_s, T, H, t0);
}

/* dw[j] += the chunks' partials: thread (x, y) of a 32 x 8 block sums
 * chunks y, y + 8, ... of column j in increasing chunk, and the eight sums
 * are added in increasing y. (A thread per column walking all the chunks
 * was a chain of a few hundred dependent loads: 0.04 ms of the 0.08 a call
 * at gpu-small.) */
#define NORM_FINAL_LANES 8
__global__ void rmsnorm_backward_dw_final_kernel(float *dw, const float *partial, int nchunks,
                                                 int H) {
  __shared__ float sums[NORM_FINAL_LANES][32];
  const int j = blockIdx.x * 32 + threadIdx.x, y = threadIdx.y;
  float acc = 0.0f;
  if (j < H) { /* eight loads in flight, then their adds in increasing chunk: the same sum */
    int c = y;
    for (; c + 7 * NORM_FINAL_LANES < nchunks; c += 8 * NORM_FINAL_LANES) {
      float p[8];
#pragma unroll
      for (int b = 0; b < 8; b++) p[b] = partial[(size_t)(c + b * NORM_FINAL_LANES) * H + j];
#pragma unroll
      for (int b = 0; b < 8; b++) acc += p[b];
    }
    for (; c < nchunks; c += NORM_FINAL_LANES) acc += partial[(size_t)c * H + j];
  }
  sums[y][threadIdx.x] = acc;
  __syncthreads();
  if (y == 0 && j < H) {
    float total = 0.0f;
    for (int k = 0; k < NORM_FINAL_LANES; k++) total += sums[k][threadIdx.x];
    dw[j] += total;
  }
}

static void rmsnorm_dw_final(float *dw, const float *partial, int nchunks, int H, cudaStream_t s) {
  rmsnorm_backward_dw_final_kernel<<<rc_cdiv((size_t)H, 32), dim3(32, NORM_FINAL_LANES), 0, s>>>(
      dw, partial, nchunks, H);
  KERNEL_CHECK();
}

void rc_cuda_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x,
                              const float *w, const float *rstd, int T, int H, int ld_dout,
                              uint16_t *dx_half, rc_compute ct, bool dx_accumulate) {
  const int fp16 = ct == RC_COMPUTE_FP16, acc = dx_accumulate;
  if (T <= 0 || H <= 0) return;
  cudaStream_t s = rc_cuda_stream();
  int nchunks;
  if (H <= 32 * NORM_REG_MAX_PER) {
    nchunks = (T + NORM_FUSED_CHUNK - 1) / NORM_FUSED_CHUNK;
    float *partial =
        (float *)rc_cuda_scratch(RC_SCRATCH_NORM, (size_t)nchunks * (size_t)H * sizeof(float));
    const size_t sm = (size_t)NORM_FUSED_CHUNK * H * sizeof(float);
    const int per = (H + 31) / 32;
#define NORM_REGS(P, E)                                                                            \
  do {                                                                                             \
    static bool opted = false;                                                                     \
    rc_allow_smem(rmsnorm_backward_regs_kernel<P, E>,                                              \
                  (size_t)NORM_FUSED_CHUNK * 32 * (P) * sizeof(float), &opted);                    \
    rmsnorm_backward_regs_kernel<P, E><<<(unsigned int)nchunks, 32 * NORM_REG_WARPS, sm, s>>>(     \
        dx, partial, dout, x, w, rstd, T, H, ld_dout, dx_half, fp16, acc);                         \
  } while (0)
    if (H == 32 * NORM_REG_MAX_PER) /* as the forward's EXACT */
      NORM_REGS(NORM_REG_MAX_PER, true);
    else if (per <= 8)
      NORM_REGS(8, false);
    else if (per <= 16)
      NORM_REGS(16, false);
    else
      NORM_REGS(NORM_REG_MAX_PER, false);
#undef NORM_REGS
    KERNEL_CHECK();
    rmsnorm_dw_final(dw, partial, nchunks, H, s);
    return;
  }
  if (H <= NORM_FUSED_MAX_H) {
    nchunks = (T + NORM_FUSED_CHUNK - 1) / NORM_FUSED_CHUNK;
    float *partial =
        (float *)rc_cuda_scratch(RC_SCRATCH_NORM, (size_t)nchunks * (size_t)H * sizeof(float));
    static bool opted = false; /* once, for the widest row this kernel takes */
    rc_allow_smem(rmsnorm_backward_fused_kernel,
                  (size_t)NORM_FUSED_CHUNK * NORM_FUSED_MAX_H * sizeof(float), &opted);
    const size_t sm = (size_t)NORM_FUSED_CHUNK * H * sizeof(float);
    rmsnorm_backward_fused_kernel<<<(unsigned int)nchunks, 32 * NORM_FUSED_CHUNK, sm, s>>>(
        dx, partial, dout, x, w, rstd, T, H, ld_dout, dx_half, fp16, acc);
    KERNEL_CHECK();
    rmsnorm_dw_final(dw, partial, nchunks, H, s);
    return;
  }
  rmsnorm_backward_dx_kernel<<<rc_cdiv((size_t)T, NORM_ROWS_PER_BLOCK), 32 * NORM_ROWS_PER_BLOCK, 0,
                               s>>>(dx, dout, x, w, rstd, T, H, ld_dout, dx_half, fp16, acc);
  KERNEL_CHECK();
  nchunks = (T + NORM_CHUNK - 1) / NORM_CHUNK;
  float *partial =
      (float *)rc_cuda_scratch(RC_SCRATCH_NORM, (size_t)nchunks * (size_t)H * sizeof(float));
  dim3 grid(rc_cdiv((size_t)H, 128), (unsigned int)nchunks);
  rmsnorm_backward_dw_partial_kernel<<<grid, 128, 0, s>>>(partial, dout, x, rstd, T, H, ld_dout);
  KERNEL_CHECK();
  rmsnorm_dw_final(dw, partial, nchunks, H, s);
}

/* ---- RoPE ----
 * cos and sin of s * theta^(-2i/hd), computed in double and cast to float
 * (the CPU's values), once per (S, hd, theta) into a table the backend keeps
 * (a keyed scratch slot) instead of once per (row, pair) per call: the double
 * pow/cos/sin were most of the kernel's time. The rotation of a pair is
 * written out operation by operation (the CPU's roundings), so the table
 * changed no bits.
 *
 * A block per row (b*S + s); its 3 nh head segments (q heads, k heads, v
 * heads, hd elements each) go to the block's warps, a lane per pair (2i,
 * 2i+1) of the segment: every access an 8-byte piece of a contiguous row,
 * and the only integer division a warp's segment index, once per segment
 * (a flat pair index split by runtime hd and nh cost more than the bytes).
 * Three forms: in place (fp32), forward into the BF16 attention's heads (q,
 * k rotated, v as it is), backward into a half linear's 16-bit gradient. */
#ifndef ROPE_WARPS /* a tuning constant a variant build may set (bench/build_variants.sh) */
#define ROPE_WARPS 8
#endif

__global__ void rope_table_kernel(float *cs, float *sn, int S, int hd, float theta) {
  const int half = hd / 2;
  const size_t n = (size_t)S * half;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
       idx += (size_t)gridDim.x * blockDim.x) {
    const int s = (int)(idx / half), i = (int)(idx % half);
    const double inv_freq = pow((double)theta, -2.0 * i / hd);
    const double ang = (double)s * inv_freq;
    cs[idx] = (float)cos(ang);
    sn[idx] = (float)sin(ang);
  }
}

/* The [S][hd/2] cos table (sin follows it) for these arguments, built on
 * the stream when the slot held another one. */
const float *rc_cuda_rope_table(int S, int hd, float theta) {
  const size_t n = (size_t)S * (hd / 2);
  uint32_t theta_bits;
  memcpy(&theta_bits, &theta, sizeof theta_bits);
  const uint64_t key[2] = {theta_bits, ((uint64_t)(uint32_t)S << 32) | (uint32_t)hd};
  bool stale = false;
  float *cs = (float *)rc_cuda_scratch_keyed(RC_SCRATCH_ROPE, 2 * n * sizeof(float), key, &stale);
  if (stale) {
    rope_table_kernel<<<rc_grid_1d(n, 256), 256, 0, rc_cuda_stream()>>>(cs, cs + n, S, hd, theta);
    KERNEL_CHECK();
  }
  return cs;
}

/* pairs rotate by rc_rope_rotate (cuda_common.cuh): each product rounded */

__device__ __forceinline__ uint32_t rope_encode2(float2 v, int fp16) {
  return (uint32_t)norm_encode(v.x, fp16) | ((uint32_t)norm_encode(v.y, fp16) << 16);
}

/* What the forms share: the block's row, its s, and its cos/sin rows. */
struct rope_row {
  size_t row;
  int s;
  const float *c, *sn;
};

__device__ __forceinline__ rope_row rope_row_of(const float *cs, int S, int half) {
  rope_row r;
  r.row = blockIdx.x;
  r.s = (int)(r.row % S);
  r.c = cs + (size_t)r.s * half;
  r.sn = cs + (size_t)S * half + (size_t)r.s * half;
  return r;
}

/* q and k of the row rotated in place; sign +1 forward, -1 inverse */
__global__ void rope_kernel(float *qkv, const float *cs, int S, int nh, int hd, float sign) {
  const int half = hd / 2, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const rope_row r = rope_row_of(cs, S, half);
  float2 *x = (float2 *)(qkv + r.row * 3 * nh * hd);
  for (int seg = warp; seg < 2 * nh; seg += ROPE_WARPS)
    for (int i = lane; i < half; i += 32) {
      const float2 v = x[seg * half + i];
      x[seg * half + i] = rc_rope_rotate(v.x, v.y, r.c[i], sign * r.sn[i]);
    }
}

/* heads [3][B][nh][S][hd] bf16 from the row of qkv: q and k rotated */
__global__ void rope_heads_kernel(uint32_t *heads, const float *qkv, const float *cs, int B, int S,
                                  int nh, int hd) {
  const int half = hd / 2, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const rope_row r = rope_row_of(cs, S, half);
  const int b = (int)(r.row / S);
  const float2 *x = (const float2 *)(qkv + r.row * 3 * nh * hd);
  for (int seg = warp; seg < 3 * nh; seg += ROPE_WARPS) {
    const int part = seg / nh, h = seg % nh;
    uint32_t *dst = heads + ((((size_t)part * B + b) * nh + h) * S + r.s) * half;
    for (int i = lane; i < half; i += 32) {
      float2 v = x[seg * half + i];
      if (part < 2) v = rc_rope_rotate(v.x, v.y, r.c[i], r.sn[i]);
      dst[i] = rope_encode2(v, 0);
    }
  }
}

/* the row's 16-bit gradient: dq and dk rotated back, every element encoded */
__global__ void rope_backward_half_kernel(uint32_t *dst, const float *dqkv, const float *cs, int S,
                                          int nh, int hd, int fp16) {
  const int half = hd / 2, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const rope_row r = rope_row_of(cs, S, half);
  const size_t off = r.row * 3 * nh * half;
  const float2 *x = (const float2 *)dqkv + off;
  for (int seg = warp; seg < 3 * nh; seg += ROPE_WARPS)
    for (int i = lane; i < half; i += 32) {
      float2 v = x[seg * half + i];
      if (seg < 2 * nh) v = rc_rope_rotate(v.x, v.y, r.c[i], -1.0f * r.sn[i]);
      dst[off + seg * half + i] = rope_encode2(v, fp16);
    }
}

/* The fused forms for hd in {16, 32, 64, 128}: a thread per four elements
 * (two pairs: 16 bytes in, 8 out), the row's units split into segment and
 * position by compile-time shifts, and each segment's output offset (its
 * part and head: the only runtime divisions) computed once per block into
 * shared memory. The forms above move 8 bytes a lane and divide per
 * segment in every lane: twice the memory traffic's time at gpu-small.
 * From a 16-bit qkv (ops.h qkv_half) a thread's four elements are 8 bytes
 * in, decoded exactly, and rotated as the fp32 ones are. */
/* four elements of a row from fp32 qkv, or (HALF_IN) from its 16-bit form
 * (a half qkv linear's output), decoded exactly */
template <bool HALF_IN>
__device__ __forceinline__ float4 rope_load4(const float *qkv, const uint16_t *qkv_half,
                                             size_t unit, int fp16) {
  if (!HALF_IN) return ((const float4 *)qkv)[unit];
  const uint2 w = ((const uint2 *)qkv_half)[unit];
  return make_float4(
      rc_half_decode((uint16_t)(w.x & 0xffffu), fp16), rc_half_decode((uint16_t)(w.x >> 16), fp16),
      rc_half_decode((uint16_t)(w.y & 0xffffu), fp16), rc_half_decode((uint16_t)(w.y >> 16), fp16));
}

template <int HD, bool HALF_IN>
__global__ void rope_heads_vec_kernel(uint2 *heads, const float *qkv, const uint16_t *qkv_half,
                                      int half_fp16, const float *cs, int B, int S, int nh) {
  constexpr int HALF = HD / 2, U = HD / 4; /* pairs, four-element units a segment */
  extern __shared__ size_t seg_base[];     /* [3 nh]: a segment's first unit in heads */
  const rope_row r = rope_row_of(cs, S, HALF);
  const int b = (int)(r.row / S);
  for (int seg = threadIdx.x; seg < 3 * nh; seg += blockDim.x) {
    const int part = seg / nh, h = seg % nh;
    seg_base[seg] = ((((size_t)part * B + b) * nh + h) * S + r.s) * U;
  }
  __syncthreads();
  const size_t row_unit = r.row * 3 * nh * U; /* the row's first four-element unit */
  for (int u = threadIdx.x; u < 3 * nh * U; u += blockDim.x) {
    const int seg = u / U, i = (u % U) * 2;
    const float4 v = rope_load4<HALF_IN>(qkv, qkv_half, row_unit + u, half_fp16);
    float2 a = make_float2(v.x, v.y), c = make_float2(v.z, v.w);
    if (seg < 2 * nh) {
      a = rc_rope_rotate(a.x, a.y, r.c[i], r.sn[i]);
      c = rc_rope_rotate(c.x, c.y, r.c[i + 1], r.sn[i + 1]);
    }
    heads[seg_base[seg] + u % U] = make_uint2(rope_encode2(a, 0), rope_encode2(c, 0));
  }
}

template <int HD>
__global__ void rope_backward_half_vec_kernel(uint2 *dst, const float *dqkv, const float *cs, int S,
                                              int nh, int fp16) {
  constexpr int HALF = HD / 2, U = HD / 4;
  const rope_row r = rope_row_of(cs, S, HALF);
  const size_t off = r.row * 3 * nh * U;
  const float4 *x = (const float4 *)dqkv + off;
  for (int u = threadIdx.x; u < 3 * nh * U; u += blockDim.x) {
    const float4 v = x[u];
    float2 a = make_float2(v.x, v.y), c = make_float2(v.z, v.w);
    if (u < 2 * nh * U) {
      const int i = (u % U) * 2;
      a = rc_rope_rotate(a.x, a.y, r.c[i], -1.0f * r.sn[i]);
      c = rc_rope_rotate(c.x, c.y, r.c[i + 1], -1.0f * r.sn[i + 1]);
    }
    dst[off + u] = make_uint2(rope_encode2(a, fp16), rope_encode2(c, fp16));
  }
}

template <int HD>
static void rope_fused_vec(uint16_t *heads, uint16_t *dqkv_half, const float *src,
                           const uint16_t *src_half, const float *cs, int B, int S, int nh,
                           int fp16) {
  const unsigned rows = (unsigned)((size_t)B * S);
  cudaStream_t st = rc_cuda_stream();
  const size_t sm = 3 * (size_t)nh * sizeof(size_t);
  if (heads && src_half) /* fp16: the input's form; the heads are bf16 */
    rope_heads_vec_kernel<HD, true>
        <<<rows, 32 * ROPE_WARPS, sm, st>>>((uint2 *)heads, NULL, src_half, fp16, cs, B, S, nh);
  else if (heads)
    rope_heads_vec_kernel<HD, false>
        <<<rows, 32 * ROPE_WARPS, sm, st>>>((uint2 *)heads, src, NULL, 0, cs, B, S, nh);
  else
    rope_backward_half_vec_kernel<HD>
        <<<rows, 32 * ROPE_WARPS, 0, st>>>((uint2 *)dqkv_half, src, cs, S, nh, fp16);
  KERNEL_CHECK();
}

/* The vector form where hd has one, true when it ran. */
static bool rope_fused(uint16_t *heads, uint16_t *dqkv_half, const float *src,
                       const uint16_t *src_half, const float *cs, int B, int S, int nh, int hd,
                       int fp16) {
  switch (hd) {
  case 16:
    rope_fused_vec<16>(heads, dqkv_half, src, src_half, cs, B, S, nh, fp16);
    return true;
  case 32:
    rope_fused_vec<32>(heads, dqkv_half, src, src_half, cs, B, S, nh, fp16);
    return true;
  case 64:
    rope_fused_vec<64>(heads, dqkv_half, src, src_half, cs, B, S, nh, fp16);
    return true;
  case 128:
    rope_fused_vec<128>(heads, dqkv_half, src, src_half, cs, B, S, nh, fp16);
    return true;
  default:
    return false;
  }
}

__global__ void rope_decode_kernel(float *dst, const uint16_t *src, size_t n, int fp16) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = rc_half_decode(src[i], fp16);
}

void rc_cuda_rope_forward(float *qkv, const uint16_t *qkv_half, rc_compute half_ct, int B, int S,
                          int nh, int hd, float theta, uint16_t *heads) {
  const size_t rows = (size_t)B * S;
  if (rows == 0 || nh <= 0 || hd <= 0) return;
  const float *cs = rc_cuda_rope_table(S, hd, theta);
  const int in_fp16 = half_ct == RC_COMPUTE_FP16;
  if (heads && rope_fused(heads, NULL, qkv, qkv_half, cs, B, S, nh, hd, in_fp16)) return;
  if (qkv_half) { /* no vector form for this hd: decoded into qkv (scratch then), rotated below */
    const size_t n = rows * 3 * (size_t)nh * hd;
    rope_decode_kernel<<<rc_grid_1d(n, 256), 256, 0, rc_cuda_stream()>>>(qkv, qkv_half, n, in_fp16);
    KERNEL_CHECK();
  }
  if (heads)
    rope_heads_kernel<<<(unsigned)rows, 32 * ROPE_WARPS, 0, rc_cuda_stream()>>>(
        (uint32_t *)heads, qkv, cs, B, S, nh, hd);
  else
    rope_kernel<<<(unsigned)rows, 32 * ROPE_WARPS, 0, rc_cuda_stream()>>>(qkv, cs, S, nh, hd, 1.0f);
  KERNEL_CHECK();
}

void rc_cuda_rope_backward(float *dqkv, int B, int S, int nh, int hd, float theta,
                           uint16_t *dqkv_half, rc_compute ct) {
  const size_t rows = (size_t)B * S;
  if (rows == 0 || nh <= 0 || hd <= 0) return;
  const float *cs = rc_cuda_rope_table(S, hd, theta);
  const int fp16 = ct == RC_COMPUTE_FP16;
  if (dqkv_half && rope_fused(NULL, dqkv_half, dqkv, NULL, cs, B, S, nh, hd, fp16)) return;
  if (dqkv_half)
    rope_backward_half_kernel<<<(unsigned)rows, 32 * ROPE_WARPS, 0, rc_cuda_stream()>>>(
        (uint32_t *)dqkv_half, dqkv, cs, S, nh, hd, fp16);
  else
    rope_kernel<<<(unsigned)rows, 32 * ROPE_WARPS, 0, rc_cuda_stream()>>>(dqkv, cs, S, nh, hd,
                                                                          -1.0f);
  KERNEL_CHECK();
}
