/* cuda_norm_rope.cu — RMSNorm forward/backward and RoPE forward/backward.
 *
 * RMSNorm: one warp per row; the row's sums (mean square, and the backward's
 * dot product) are taken in double in a fixed order, like the CPU's double
 * loops, and then used with the CPU's exact float formulas. The weight
 * gradient, a sum over rows, is two-stage without atomics: fixed chunks of
 * rows give per-chunk partials, and a second kernel adds them into dw in a
 * fixed order (eight strided sums, then those in order). Up to H = NORM_FUSED_MAX_H one kernel
 * writes dx and the partials in a single pass over dout and x (each warp's rows in increasing t,
 * then the block's eight warps in order); wider rows take separate dx and dw-partial kernels
 * (NORM_CHUNK rows a partial, in t).
 *
 * RoPE: angles s * theta^(-2i/hd) in double, cos/sin in double and cast to
 * float, as the CPU does, then the same float rotation. */
#include <math.h>

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
                                       int T, int H, float eps, uint16_t *out_half, int fp16) {
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
    if (out_half) out_half[t * H + j] = norm_encode(v, fp16);
  }
}

void rc_cuda_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int H,
                             float eps, uint16_t *out_half, rc_compute ct) {
  if (T <= 0) return;
  rmsnorm_forward_kernel<<<rc_cdiv((size_t)T, NORM_ROWS_PER_BLOCK), 32 * NORM_ROWS_PER_BLOCK, 0,
                           rc_cuda_stream()>>>(out, rstd, x, w, T, H, eps, out_half,
                                               ct == RC_COMPUTE_FP16);
  KERNEL_CHECK();
}

/* dx_j += r w_j g_j - x_j c, c = r^3/H * sum_i g_i w_i x_i (in double). */
__global__ void rmsnorm_backward_dx_kernel(float *dx, const float *dout, const float *x,
                                           const float *w, const float *rstd, int T, int H) {
  size_t t = (size_t)blockIdx.x * NORM_ROWS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (t >= (size_t)T) return;
  const float *xt = x + t * H, *g = dout + t * H;
  float r = rstd[t];
  double dot = 0.0;
  for (int j = lane; j < H; j += 32) dot += (double)g[j] * w[j] * xt[j];
  dot = warp_sum_double(dot);
  float c = (float)(dot * r * r * r / H);
  float *dxt = dx + t * H;
  for (int j = lane; j < H; j += 32) dxt[j] += r * w[j] * g[j] - xt[j] * c;
}

/* partial[chunk, j] = sum over the chunk's rows, increasing t, of g x r. */
__global__ void rmsnorm_backward_dw_partial_kernel(float *partial, const float *dout,
                                                   const float *x, const float *rstd, int T,
                                                   int H) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int chunk = blockIdx.y;
  if (j >= H) return;
  int t0 = chunk * NORM_CHUNK, t1 = t0 + NORM_CHUNK < T ? t0 + NORM_CHUNK : T;
  float acc = 0.0f;
  for (int t = t0; t < t1; t++) acc += dout[(size_t)t * H + j] * x[(size_t)t * H + j] * rstd[t];
  partial[(size_t)chunk * H + j] = acc;
}

/* dx and the dw partials in one pass over dout and x (the two kernels above
 * read both twice over): a block per chunk of NORM_FUSED_CHUNK rows, warp w
 * taking rows t0 + w, t0 + w + 8, ... in increasing t, each row as
 * rmsnorm_backward_dx_kernel does; each warp folds its rows' g x r into its
 * own shared row of H floats, and the block adds the eight in increasing
 * warp into partial[chunk]. Fixed order throughout, no atomics. */
#define NORM_FUSED_CHUNK 32
#define NORM_FUSED_MAX_H 1536 /* 8 warps x H floats of shared memory: 48 KB */

__global__ void __launch_bounds__(32 * NORM_ROWS_PER_BLOCK)
    rmsnorm_backward_fused_kernel(float *dx, float *partial, const float *dout, const float *x,
                                  const float *w, const float *rstd, int T, int H) {
  extern __shared__ float acc_s[]; /* [NORM_ROWS_PER_BLOCK][H] */
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  float *acc = acc_s + (size_t)warp * H;
  for (int j = lane; j < H; j += 32) acc[j] = 0.0f;
  const int t0 = blockIdx.x * NORM_FUSED_CHUNK;
  for (int t = t0 + warp; t < t0 + NORM_FUSED_CHUNK && t < T; t += NORM_ROWS_PER_BLOCK) {
    const float *xt = x + (size_t)t * H, *g = dout + (size_t)t * H;
    const float r = rstd[t];
    double dot = 0.0;
    for (int j = lane; j < H; j += 32) dot += (double)g[j] * w[j] * xt[j];
    dot = warp_sum_double(dot);
    const float c = (float)(dot * r * r * r / H);
    float *dxt = dx + (size_t)t * H;
    for (int j = lane; j < H; j += 32) {
      const float gj = g[j], xj = xt[j];
      dxt[j] += r * w[j] * gj - xj * c;
      acc[j] += gj * xj * r;
    }
  }
  __syncthreads();
  for (int j = threadIdx.x; j < H; j += blockDim.x) {
    float sum = 0.0f;
    for (int k = 0; k < NORM_ROWS_PER_BLOCK; k++) sum += acc_s[(size_t)k * H + j];
    partial[(size_t)blockIdx.x * H + j] = sum;
  }
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
  if (j < H)
    for (int c = y; c < nchunks; c += NORM_FINAL_LANES) acc += partial[(size_t)c * H + j];
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
                              const float *w, const float *rstd, int T, int H) {
  if (T <= 0 || H <= 0) return;
  cudaStream_t s = rc_cuda_stream();
  int nchunks;
  if (H <= NORM_FUSED_MAX_H) {
    nchunks = (T + NORM_FUSED_CHUNK - 1) / NORM_FUSED_CHUNK;
    float *partial =
        (float *)rc_cuda_scratch(RC_SCRATCH_NORM, (size_t)nchunks * (size_t)H * sizeof(float));
    const size_t sm = (size_t)NORM_ROWS_PER_BLOCK * H * sizeof(float);
    rmsnorm_backward_fused_kernel<<<(unsigned int)nchunks, 32 * NORM_ROWS_PER_BLOCK, sm, s>>>(
        dx, partial, dout, x, w, rstd, T, H);
    KERNEL_CHECK();
    rmsnorm_dw_final(dw, partial, nchunks, H, s);
    return;
  }
  rmsnorm_backward_dx_kernel<<<rc_cdiv((size_t)T, NORM_ROWS_PER_BLOCK), 32 * NORM_ROWS_PER_BLOCK, 0,
                               s>>>(dx, dout, x, w, rstd, T, H);
  KERNEL_CHECK();
  nchunks = (T + NORM_CHUNK - 1) / NORM_CHUNK;
  float *partial =
      (float *)rc_cuda_scratch(RC_SCRATCH_NORM, (size_t)nchunks * (size_t)H * sizeof(float));
  dim3 grid(rc_cdiv((size_t)H, 128), (unsigned int)nchunks);
  rmsnorm_backward_dw_partial_kernel<<<grid, 128, 0, s>>>(partial, dout, x, rstd, T, H);
  KERNEL_CHECK();
  rmsnorm_dw_final(dw, partial, nchunks, H, s);
}

/* ---- RoPE ----
 * One thread per (row b*S+s, pair i); it rotates pair i of each of the 2*nh
 * q and k heads of the row, so the double-precision cos/sin is computed once
 * per (row, pair). sign = +1 forward, -1 the inverse rotation. */
__global__ void rope_kernel(float *qkv, int B, int S, int nh, int hd, float theta, float sign) {
  int half = hd / 2;
  size_t n = (size_t)B * S * half;
  size_t row_len = 3 * (size_t)nh * hd;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
       idx += (size_t)gridDim.x * blockDim.x) {
    size_t row = idx / half;
    int i = (int)(idx % half);
    int s = (int)(row % (size_t)S);
    double inv_freq = pow((double)theta, -2.0 * i / hd);
    double ang = (double)s * inv_freq;
    float c = (float)cos(ang), sn = (float)sin(ang);
    float sgn = sign * sn;
    float *x = qkv + row * row_len;
    for (int h = 0; h < 2 * nh; h++) {
      float *v = x + (size_t)h * hd;
      float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * c - x1 * sgn;
      v[2 * i + 1] = x0 * sgn + x1 * c;
    }
  }
}

static void rope(float *qkv, int B, int S, int nh, int hd, float theta, float sign) {
  size_t n = (size_t)B * S * (hd / 2);
  if (n == 0) return;
  rope_kernel<<<rc_grid_1d(n, 256), 256, 0, rc_cuda_stream()>>>(qkv, B, S, nh, hd, theta, sign);
  KERNEL_CHECK();
}

void rc_cuda_rope_forward(float *qkv, int B, int S, int nh, int hd, float theta) {
  rope(qkv, B, S, nh, hd, theta, 1.0f);
}

void rc_cuda_rope_backward(float *dqkv, int B, int S, int nh, int hd, float theta) {
  rope(dqkv, B, S, nh, hd, theta, -1.0f);
}
