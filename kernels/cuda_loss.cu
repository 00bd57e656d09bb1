/* cuda_loss.cu — softmax cross-entropy over logits [T, V], in place.
 *
 * One block per row, following the CPU reference step for step: argmax with
 * ties to the lowest index (exact, so `correct` agrees bitwise), the
 * log-sum-exp in double, the loss and the probabilities from double exp()
 * cast to float. The row sum is folded per thread in increasing v and then in
 * a fixed tree, so it is the same on every run. */
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
  double mx = (double)l[amax];

  double se = 0.0;
  for (int v = tid; v < V; v += CE_THREADS) se += exp((double)l[v] - mx);
  sh_sum[tid] = se;
  __syncthreads();
  for (int stride = CE_THREADS / 2; stride > 0; stride >>= 1) {
    if (tid < stride) sh_sum[tid] += sh_sum[tid + stride];
    __syncthreads();
  }
  double lse = mx + log(sh_sum[0]);
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
    float p = (float)exp((double)l[v] - lse);
    l[v] = d * (v == y ? p - 1.0f : p);
  }
}

void rc_cuda_cross_entropy(float *losses, float *correct, float *logits, const int32_t *labels,
                           const float *dloss, int T, int V) {
  if (T <= 0 || V <= 0) return;
  cross_entropy_kernel<<<T, CE_THREADS, 0, rc_cuda_stream()>>>(losses, correct, logits, labels,
                                                               dloss, V);
  KERNEL_CHECK();
}
