/* cuda_moe.cu — mixture-of-experts routing, permutation, gather and combine.
 *
 * Routing and its backward: one thread per token running
 * rc_moe_route_token / rc_moe_route_backward_token (backend/element_math.h),
 * the functions the CPU backend's loops call (E and k are small), so top-k
 * selection, tie-breaking and the order of every sum are the reference's.
 *
 * Permutation: a stable counting sort by expert without atomics. The T*k
 * (token, slot) entries are cut into fixed chunks of MOE_CHUNK; one thread
 * per (chunk, expert) counts, one block turns the counts into per-(chunk,
 * expert) start positions (expert-major, chunk-minor: exactly the order of
 * a stable sort) and the offsets, and one thread per (chunk, expert) then
 * places its entries in increasing index. The result is a pure function of
 * topk_idx, equal to the CPU's bit for bit.
 *
 * Combine sums slots in slot order starting from slot 0's term (as the CPU
 * does, so a single slot passes through exactly); its backward's weight
 * gradient is a per-(token, slot) dot product folded in a fixed warp tree. */
#include "backend/element_math.h"
#include "cuda_common.cuh"

#define MOE_CHUNK 256

/* ---- routing ---- */

__global__ void moe_route_kernel(int32_t *topk_idx, float *topk_w, float *probs,
                                 const float *logits, const float *expert_bias, int T, int E, int k,
                                 int sigmoid_scoring) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  rc_moe_route_token(topk_idx + (size_t)t * k, topk_w + (size_t)t * k, probs + (size_t)t * E,
                     logits + (size_t)t * E, expert_bias, E, k, sigmoid_scoring);
}

void rc_cuda_moe_route(int32_t *topk_idx, float *topk_w, float *probs, const float *logits,
                       const float *expert_bias, int T, int E, int k, rc_moe_scoring scoring) {
  if (T <= 0 || E <= 0) return;
  moe_route_kernel<<<rc_cdiv((size_t)T, 128), 128, 0, rc_cuda_stream()>>>(
      topk_idx, topk_w, probs, logits, expert_bias, T, E, k, scoring == RC_SCORE_SIGMOID);
  KERNEL_CHECK();
}

__global__ void moe_route_backward_kernel(float *dlogits, const float *dtopk_w,
                                          const float *dprobs_e, const float *logits,
                                          const int32_t *topk_idx, const float *topk_w,
                                          const float *probs, int T, int E, int k,
                                          int sigmoid_scoring) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  rc_moe_route_backward_token(dlogits + (size_t)t * E, dtopk_w + (size_t)t * k, dprobs_e,
                              logits + (size_t)t * E, topk_idx + (size_t)t * k,
                              topk_w + (size_t)t * k, probs + (size_t)t * E, E, k, sigmoid_scoring);
}

void rc_cuda_moe_route_backward(float *dlogits, const float *dtopk_w, const float *dprobs_e,
                                const float *logits, const int32_t *topk_idx, const float *topk_w,
                                const float *probs, int T, int E, int k, rc_moe_scoring scoring) {
  if (T <= 0 || E <= 0) return;
  moe_route_backward_kernel<<<rc_cdiv((size_t)T, 128), 128, 0, rc_cuda_stream()>>>(
      dlogits, dtopk_w, dprobs_e, logits, topk_idx, topk_w, probs, T, E, k,
      scoring == RC_SCORE_SIGMOID);
  KERNEL_CHECK();
}

/* ---- stable permutation by expert ---- */

/* cnt[chunk * E + e] = number of entries of the chunk routed to e. */
__global__ void moe_count_kernel(int32_t *cnt, const int32_t *topk_idx, size_t n, int E,
                                 int nchunks) {
  size_t id = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (id >= (size_t)nchunks * E) return;
  size_t chunk = id / E;
  int e = (int)(id % E);
  size_t i0 = chunk * MOE_CHUNK, i1 = i0 + MOE_CHUNK < n ? i0 + MOE_CHUNK : n;
  int32_t c = 0;
  for (size_t i = i0; i < i1; i++) c += topk_idx[i] == e;
  cnt[id] = c;
}

/* Single block: offsets[e] = entries of experts < e; cnt becomes the start
 * position of each (chunk, expert) run. Sequential loops, fixed order. */
__global__ void moe_scan_kernel(int32_t *cnt, int32_t *totals, int32_t *offsets, int E,
                                int nchunks) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t s = 0;
    for (int c = 0; c < nchunks; c++) s += cnt[(size_t)c * E + e];
    totals[e] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t run = 0;
    for (int e = 0; e < E; e++) {
      offsets[e] = run;
      run += totals[e];
    }
    offsets[E] = run;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t pos = offsets[e];
    for (int c = 0; c < nchunks; c++) {
      int32_t here = cnt[(size_t)c * E + e];
      cnt[(size_t)c * E + e] = pos;
      pos += here;
    }
  }
}

__global__ void moe_place_kernel(int32_t *perm, int32_t *inv_perm, const int32_t *start,
                                 const int32_t *topk_idx, size_t n, int E, int nchunks) {
  size_t id = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (id >= (size_t)nchunks * E) return;
  size_t chunk = id / E;
  int e = (int)(id % E);
  size_t i0 = chunk * MOE_CHUNK, i1 = i0 + MOE_CHUNK < n ? i0 + MOE_CHUNK : n;
  int32_t pos = start[id];
  for (size_t i = i0; i < i1; i++)
    if (topk_idx[i] == e) {
      perm[pos] = (int32_t)i;
      inv_perm[i] = pos;
      pos++;
    }
}

void rc_cuda_moe_permute(int32_t *perm, int32_t *inv_perm, int32_t *offsets,
                         const int32_t *topk_idx, int T, int E, int k) {
  if (E <= 0) return;
  cudaStream_t s = rc_cuda_stream();
  size_t n = (size_t)(T > 0 ? T : 0) * (size_t)(k > 0 ? k : 0);
  int nchunks = (int)((n + MOE_CHUNK - 1) / MOE_CHUNK);
  size_t cells = (size_t)nchunks * E;
  int32_t *cnt = (int32_t *)rc_cuda_scratch(RC_SCRATCH_MOE, (cells + (size_t)E) * sizeof(int32_t));
  int32_t *totals = cnt + cells;
  if (cells > 0) {
    moe_count_kernel<<<rc_cdiv(cells, 128), 128, 0, s>>>(cnt, topk_idx, n, E, nchunks);
    KERNEL_CHECK();
  }
  moe_scan_kernel<<<1, 256, 0, s>>>(cnt, totals, offsets, E, nchunks);
  KERNEL_CHECK();
  if (cells > 0) {
    moe_place_kernel<<<rc_cdiv(cells, 128), 128, 0, s>>>(perm, inv_perm, cnt, topk_idx, n, E,
                                                         nchunks);
    KERNEL_CHECK();
  }
}

/* ---- gather and combine ---- */

__global__ void moe_gather_kernel(float *dst, const float *src, const int32_t *perm, int k, int H,
                                  size_t n) {
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
       idx += (size_t)gridDim.x * blockDim.x) {
    size_t i = idx / (size_t)H, h = idx % (size_t)H;
    dst[idx] = src[(size_t)(perm[i] / k) * H + h];
  }
}

void rc_cuda_moe_gather(float *dst, const float *src, const int32_t *perm, int T, int k, int H) {
  size_t n = (size_t)T * (size_t)k * (size_t)H;
  if (T <= 0 || k <= 0 || H <= 0) return;
  moe_gather_kernel<<<rc_grid_1d(n, 256), 256, 0, rc_cuda_stream()>>>(dst, src, perm, k, H, n);
  KERNEL_CHECK();
}

__global__ void moe_combine_kernel(float *out, const float *rows, const float *w,
                                   const int32_t *inv_perm, int k, int H, size_t n) {
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
       idx += (size_t)gridDim.x * blockDim.x) {
    size_t t = idx / (size_t)H, h = idx % (size_t)H;
    float o = 0.0f;
    for (int s = 0; s < k; s++) {
      size_t ts = t * (size_t)k + s;
      float r = rows[(size_t)inv_perm[ts] * H + h];
      float term = w ? w[ts] * r : r;
      o = s == 0 ? term : o + term;
    }
    out[idx] = o;
  }
}

void rc_cuda_moe_combine(float *out, const float *rows, const float *w, const int32_t *inv_perm,
                         int T, int k, int H) {
  size_t n = (size_t)T * (size_t)H;
  if (n == 0 || T <= 0 || H <= 0) return;
  moe_combine_kernel<<<rc_grid_1d(n, 256), 256, 0, rc_cuda_stream()>>>(out, rows, w, inv_perm, k, H,
                                                                       n);
  KERNEL_CHECK();
}

__global__ void moe_combine_backward_rows_kernel(float *drows, const float *dout, const float *w,
                                                 const int32_t *inv_perm, int k, int H, size_t n) {
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
       idx += (size_t)gridDim.x * blockDim.x) {
    size_t ts = idx / (size_t)H, h = idx % (size_t)H, t = ts / (size_t)k;
    float g = dout[t * H + h];
    drows[(size_t)inv_perm[ts] * H + h] = w ? w[ts] * g : g;
  }
}

/* One warp per (token, slot): lanes fold strided elements in double, then a
 * fixed xor tree; lane 0 writes. */
__global__ void moe_combine_backward_dw_kernel(float *dw, const float *dout, const float *rows,
                                               const int32_t *inv_perm, int k, int H, size_t nts) {
  size_t ts = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (ts >= nts) return; /* whole warps exit together: nts is per warp */
  size_t t = ts / (size_t)k;
  const float *g = dout + t * H, *r = rows + (size_t)inv_perm[ts] * H;
  double acc = 0.0;
  for (int h = lane; h < H; h += 32) acc += (double)g[h] * (double)r[h];
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) dw[ts] = (float)acc;
}

void rc_cuda_moe_combine_backward(float *drows, float *dw, const float *dout, const float *rows,
                                  const float *w, const int32_t *inv_perm, int T, int k, int H) {
  if (T <= 0 || k <= 0) return;
  cudaStream_t s = rc_cuda_stream();
  size_t nts = (size_t)T * (size_t)k;
  size_t n = nts * (size_t)(H > 0 ? H : 0);
  if (n > 0) {
    moe_combine_backward_rows_kernel<<<rc_grid_1d(n, 256), 256, 0, s>>>(drows, dout, w, inv_perm, k,
                                                                        H, n);
    KERNEL_CHECK();
  }
  if (dw) {
    moe_combine_backward_dw_kernel<<<rc_cdiv(nts * 32, 256), 256, 0, s>>>(dw, dout, rows, inv_perm,
                                                                          k, H, nts);
    KERNEL_CHECK();
  }
}
