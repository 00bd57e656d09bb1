/* cuda_loss.cu — softmax cross-entropy over logits [T, V], in place.
 *
 * Rows up to V = 32768 are held in registers, one block per row, or (V a
 * multiple of 4) streamed through shared memory by a block per SM that
 * fetches the next row while it works on the current one; longer rows are
 * re-read from global memory. The argmax takes ties to the
 * lowest index (exact, so `correct` agrees with the CPU bit for bit). The
 * exponentials are fp32 expf, summed in double; the log-sum-exp and the
 * loss are double. The CPU reference takes double exp() (ops.h promises
 * tolerances, not bits, here): fp64 exponentials made these kernels
 * FP64-bound on an H200 (1.7-1.9 ms per 8192 x 32768 call); with fp32 ones
 * they take 1.32-1.35 ms, still ~3x the memory bound: bound by the
 * instruction stream (double sums and conversions, two expf per element),
 * not by memory, so prefetching rows gained little. Relative error of p
 * stays below ~1e-6. The row sum
 * is folded per thread in increasing v and then in a fixed tree, so it is
 * the same on every run. */
#include <limits.h>
#include <math.h>

#include "cuda_common.cuh"

#define CE_THREADS 256 /* a power of two */

__global__ void cross_entropy_kernel(float *losses, float *correct, float *logits,
                                     const int32_t *labels, const float *dloss, int V) {
  __shared__ float sh_val[CE_THREADS];
  __shared__ int sh_idx[CE_THREADS];
  __shared__ double sh_sum[CE_THREADS];
  size_t t = blockIdx.x;
  float *l = logits + t * (size_t)V;
  int tid = threadIdx.x;

  /* argmax: per thread in increasing v (strict >, so its lowest index wins),
   * then a tree that prefers the larger value, or the lower index on a tie */
  float best = -INFINITY;
  int bi = INT_MAX;
  for (int v = tid; v < V; v += CE_THREADS)
    if (bi == INT_MAX || l[v] > best) {
      best = l[v];
      bi = v;
    }
  sh_val[tid] = best;
  sh_idx[tid] = bi;
  __syncthreads();
  for (int stride = CE_THREADS / 2; stride > 0; stride >>= 1) {
    if (tid < stride) {
      float ov = sh_val[tid + stride];
      int oi = sh_idx[tid + stride];
      if (oi != INT_MAX &&
          (sh_idx[tid] == INT_MAX || ov > sh_val[tid] || (ov == sh_val[tid] && oi < sh_idx[tid]))) {
        sh_val[tid] = ov;
        sh_idx[tid] = oi;
      }
    }
    __syncthreads();
  }
  int amax = sh_idx[0];

  double se = 0.0;
  float mxf = l[amax];
  for (int v = tid; v < V; v += CE_THREADS) se += (double)expf(l[v] - mxf);
  sh_sum[tid] = se;
  __syncthreads();
  for (int stride = CE_THREADS / 2; stride > 0; stride >>= 1) {
    if (tid < stride) sh_sum[tid] += sh_sum[tid + stride];
    __syncthreads();
  }
  double lse = (double)mxf + log(sh_sum[0]);
  int y = labels[t];
  if (tid == 0) {
    losses[t] = (float)(lse - (double)l[y]);
    correct[t] = amax == y ? 1.0f : 0.0f;
  }
  __syncthreads(); /* every read of the row's logits is done before they are overwritten */

  float d = dloss ? dloss[t] : 0.0f;
  if (d == 0.0f) { /* all +0.0: d*(p-1) would leave -0.0 at the label */
    for (int v = tid; v < V; v += CE_THREADS) l[v] = 0.0f;
    return;
  }
  for (int v = tid; v < V; v += CE_THREADS) {
    float p = expf((float)((double)l[v] - lse));
    l[v] = d * (v == y ? p - 1.0f : p);
  }
}

/* ---- rows held in registers ----
 * The kernel above reads each row three times from global memory (argmax,
 * sum, gradient) and writes it once. For V up to CE_ROW_THREADS * 32 each
 * thread keeps its PER_THREAD elements (v = tid + i * CE_ROW_THREADS) in
 * registers: one read, one write, the same arithmetic per element. The row
 * sum folds per thread in increasing i, then through a fixed shuffle tree
 * per warp and a fixed tree over the warps: the same on every run. */

#define CE_ROW_THREADS 1024
#define CE_ROW_WARPS (CE_ROW_THREADS / 32)

/* (val, idx) wins over (ov, oi): the larger value, the lower index on a tie,
 * and anything over "no element" (INT_MAX) */
__device__ __forceinline__ void argmax_take(float *val, int *idx, float ov, int oi) {
  if (oi != INT_MAX && (*idx == INT_MAX || ov > *val || (ov == *val && oi < *idx))) {
    *val = ov;
    *idx = oi;
  }
}

__device__ __forceinline__ void warp_argmax(float *val, int *idx) {
  for (int off = 16; off > 0; off >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, *val, off);
    int oi = __shfl_xor_sync(0xffffffffu, *idx, off);
    argmax_take(val, idx, ov, oi);
  }
}

__device__ __forceinline__ double warp_sum(double x) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

/* One row t whose elements v = tid + i * CE_ROW_THREADS are in x[i]: loss,
 * correct, and (written to l) the gradient. The caller has read every element
 * it will read of the row; this writes the row. Ends with no thread still
 * reading the shared variables, so it can be called again at once. */
template <int PER_THREAD>
__device__ __forceinline__ void ce_row(float *losses, float *correct, float *l, const float *x,
                                       int y, float d, size_t t, int V) {
  __shared__ float sh_val[CE_ROW_WARPS];
  __shared__ int sh_idx[CE_ROW_WARPS];
  __shared__ double sh_sum[CE_ROW_WARPS];
  __shared__ float sh_max, sh_ly;
  __shared__ double sh_lse;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float best = -INFINITY;
  int bi = INT_MAX;
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++) {
    int v = tid + i * CE_ROW_THREADS;
    if (v < V && (bi == INT_MAX || x[i] > best)) { /* increasing v, strict > */
      best = x[i];
      bi = v;
    }
    if (v == y) sh_ly = x[i];
  }
  warp_argmax(&best, &bi);
  if (lane == 0) {
    sh_val[warp] = best;
    sh_idx[warp] = bi;
  }
  __syncthreads();
  if (warp == 0) {
    best = sh_val[lane];
    bi = sh_idx[lane];
    warp_argmax(&best, &bi);
    if (lane == 0) sh_max = best, sh_idx[0] = bi; /* best: the logit at the argmax */
  }
  __syncthreads();
  const int amax = sh_idx[0];
  const float mxf = sh_max;

  double se = 0.0;
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++)
    if (tid + i * CE_ROW_THREADS < V) se += (double)expf(x[i] - mxf);
  se = warp_sum(se);
  if (lane == 0) sh_sum[warp] = se;
  __syncthreads();
  if (warp == 0) {
    se = warp_sum(sh_sum[lane]);
    if (lane == 0) sh_lse = (double)mxf + log(se);
  }
  __syncthreads();
  const double lse = sh_lse;
  if (tid == 0) {
    losses[t] = (float)(lse - (double)sh_ly);
    correct[t] = amax == y ? 1.0f : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++) {
    int v = tid + i * CE_ROW_THREADS;
    if (v >= V) continue;
    if (d == 0.0f) { /* all +0.0: d*(p-1) would leave -0.0 at the label */
      l[v] = 0.0f;
    } else {
      float p = expf((float)((double)x[i] - lse));
      l[v] = d * (v == y ? p - 1.0f : p);
    }
  }
  __syncthreads(); /* sh_ly, sh_max, sh_idx[0], sh_lse read by all before a next row */
}

template <int PER_THREAD>
__global__ void __launch_bounds__(CE_ROW_THREADS)
    cross_entropy_rows_kernel(float *losses, float *correct, float *logits, const int32_t *labels,
                              const float *dloss, int V) {
  const size_t t = blockIdx.x;
  float *l = logits + t * (size_t)V;
  float x[PER_THREAD];
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++) {
    int v = threadIdx.x + i * CE_ROW_THREADS;
    x[i] = v < V ? l[v] : 0.0f;
  }
  ce_row<PER_THREAD>(losses, correct, l, x, labels[t], dloss ? dloss[t] : 0.0f, t, V);
}

/* ---- rows streamed through shared memory ----
 * A row in registers takes the whole register file's worth of a block, so an
 * SM holds one row at a time and, in the kernel above, its read, its
 * reductions and its write run one after another (1.35 ms for 8192 x 32768,
 * ~3x the memory bound). Here a block per SM walks rows t, t + grid, ...
 * and fetches the next row into shared memory (cp.async) while it reduces
 * and writes the current one. Rows stay independent, each computed by
 * ce_row exactly as above, so the grid size does not touch the results.
 * Needs V % 4 == 0 (16-byte copies) and V * 4 bytes of shared memory. */
__device__ __forceinline__ void ce_prefetch(float *dst, const float *row, int V) {
  for (int c = threadIdx.x * 4; c < V; c += CE_ROW_THREADS * 4) {
    unsigned sa = (unsigned)__cvta_generic_to_shared(dst + c);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(row + c));
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int PER_THREAD>
__global__ void __launch_bounds__(CE_ROW_THREADS)
    cross_entropy_stream_kernel(float *losses, float *correct, float *logits, const int32_t *labels,
                                const float *dloss, int T, int V) {
  extern __shared__ __align__(16) float next_row[];
  size_t t = blockIdx.x;
  ce_prefetch(next_row, logits + t * (size_t)V, V);
  for (; t < (size_t)T; t += gridDim.x) {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
    float x[PER_THREAD];
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) {
      int v = threadIdx.x + i * CE_ROW_THREADS;
      x[i] = v < V ? next_row[v] : 0.0f;
    }
    __syncthreads(); /* the buffer is free for the next row */
    if (t + gridDim.x < (size_t)T) ce_prefetch(next_row, logits + (t + gridDim.x) * V, V);
    ce_row<PER_THREAD>(losses, correct, logits + t * (size_t)V, x, labels[t],
                       dloss ? dloss[t] : 0.0f, t, V);
  }
}

static int sm_count(void) {
  static int n = 0;
  if (!n) {
    int dev;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  }
  return n;
}

void rc_cuda_cross_entropy(float *losses, float *correct, float *logits, const int32_t *labels,
                           const float *dloss, int T, int V) {
  if (T <= 0 || V <= 0) return;
  cudaStream_t s = rc_cuda_stream();
  int per_thread = (V + CE_ROW_THREADS - 1) / CE_ROW_THREADS;
  if (V % 4 == 0 && per_thread <= 32) {
    static bool opted[4]; /* per template, for its largest row: P * CE_ROW_THREADS floats */
    size_t sm = (size_t)V * sizeof(float);
    unsigned int grid = (unsigned int)(T < sm_count() ? T : sm_count());
#define CE_STREAM(P, slot)                                                                         \
  do {                                                                                             \
    rc_allow_smem(cross_entropy_stream_kernel<P>, (size_t)(P)*CE_ROW_THREADS * sizeof(float),      \
                  &opted[slot]);                                                                   \
    cross_entropy_stream_kernel<P>                                                                 \
        <<<grid, CE_ROW_THREADS, sm, s>>>(losses, correct, logits, labels, dloss, T, V);           \
  } while (0)
    if (per_thread <= 4)
      CE_STREAM(4, 0);
    else if (per_thread <= 8)
      CE_STREAM(8, 1);
    else if (per_thread <= 16)
      CE_STREAM(16, 2);
    else
      CE_STREAM(32, 3);
#undef CE_STREAM
    KERNEL_CHECK();
    return;
  }
#define CE_ROWS(P)                                                                                 \
  cross_entropy_rows_kernel<P>                                                                     \
      <<<T, CE_ROW_THREADS, 0, s>>>(losses, correct, logits, labels, dloss, V)
  if (per_thread <= 4)
    CE_ROWS(4);
  else if (per_thread <= 8)
    CE_ROWS(8);
  else if (per_thread <= 16)
    CE_ROWS(16);
  else if (per_thread <= 32)
    CE_ROWS(32);
  else
    cross_entropy_kernel<<<T, CE_THREADS, 0, s>>>(losses, correct, logits, labels, dloss, V);
#undef CE_ROWS
  KERNEL_CHECK();
}
