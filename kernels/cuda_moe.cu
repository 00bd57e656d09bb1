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

/* cnt[chunk * E + e] = number of entries of the chunk routed to e: a warp
 * per (chunk, expert), 32 entries a look (a thread walking the chunk's 256
 * entries one load at a time took 12.6 us under ncu, place 31.5). */
#define MOE_WARPS 4 /* (chunk, expert) cells per block */
__global__ void moe_count_kernel(int32_t *cnt, const int32_t *topk_idx, size_t n, int E,
                                 int nchunks) {
  size_t id = blockIdx.x * (size_t)MOE_WARPS + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (id >= (size_t)nchunks * E) return; /* whole warps: id is per warp */
  size_t chunk = id / E;
  int e = (int)(id % E);
  size_t i0 = chunk * MOE_CHUNK, i1 = i0 + MOE_CHUNK < n ? i0 + MOE_CHUNK : n;
  int32_t c = 0;
  for (size_t i = i0; i < i1; i += 32)
    c += __popc(__ballot_sync(0xffffffffu, i + lane < i1 && topk_idx[i + lane] == e));
  if (lane == 0) cnt[id] = c;
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

/* The entries of (chunk, expert) placed in increasing index from the run's
 * start: each look's matches are ranked by the lanes below them. */
__global__ void moe_place_kernel(int32_t *perm, int32_t *inv_perm, const int32_t *start,
                                 const int32_t *topk_idx, size_t n, int E, int nchunks) {
  size_t id = blockIdx.x * (size_t)MOE_WARPS + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (id >= (size_t)nchunks * E) return;
  size_t chunk = id / E;
  int e = (int)(id % E);
  size_t i0 = chunk * MOE_CHUNK, i1 = i0 + MOE_CHUNK < n ? i0 + MOE_CHUNK : n;
  int32_t pos = start[id];
  const unsigned int below = (1u << lane) - 1u;
  for (size_t i = i0; i < i1; i += 32) {
    const bool in = i + lane < i1 && topk_idx[i + lane] == e;
    const unsigned int hits = __ballot_sync(0xffffffffu, in);
    if (in) {
      const int32_t at = pos + __popc(hits & below);
      perm[at] = (int32_t)(i + lane);
      inv_perm[i + lane] = at;
    }
    pos += __popc(hits);
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
    moe_count_kernel<<<rc_cdiv(cells, MOE_WARPS), 32 * MOE_WARPS, 0, s>>>(cnt, topk_idx, n, E,
                                                                          nchunks);
    KERNEL_CHECK();
  }
  moe_scan_kernel<<<1, 256, 0, s>>>(cnt, totals, offsets, E, nchunks);
  KERNEL_CHECK();
  if (cells > 0) {
    moe_place_kernel<<<rc_cdiv(cells, MOE_WARPS), 32 * MOE_WARPS, 0, s>>>(perm, inv_perm, cnt,
                                                                          topk_idx, n, E, nchunks);
    KERNEL_CHECK();
  }
}

/* ---- gather and combine ----
 * A warp per row, lanes over its columns (rc_piece: a float4 each when rows
 * are 16-byte aligned). A flat element index split by H was a 64-bit
 * division per element: gather 911 GB/s, combine's backward 684 (ncu). */
#define MOE_ROW_WARPS 8

/* dst (may be NULL) and/or dst_half, ct's 16 bits of the same values
 * (numeric.h's encodings, cast_half's bits): a half fc1's input gathered
 * straight into its 16-bit form, where a gather and a cast_half moved the
 * fp32 rows twice (31 + 24 us a gpu-small MoE forward on the H100, ncu). */
template <int VEC>
__global__ void moe_gather_kernel(float *dst, const float *src, const int32_t *perm, int k, int H,
                                  size_t nrows, uint16_t *dst_half, int fp16) {
  const size_t i = blockIdx.x * (size_t)MOE_ROW_WARPS + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (i >= nrows) return;
  const float *from = src + (size_t)(perm[i] / k) * H;
  for (int h = VEC * lane; h < H; h += 32 * VEC) {
    rc_piece<VEC> p;
    p.load(from + h);
    if (dst) p.store(dst + i * H + h);
    if (dst_half) {
      uint16_t q[VEC];
      for (int e = 0; e < VEC; e++) q[e] = fp16 ? rc_fp16_encode(p.v[e]) : rc_bf16_encode(p.v[e]);
      if constexpr (VEC == 4) /* one 8-byte store */
        *(ushort4 *)(dst_half + i * H + h) = make_ushort4(q[0], q[1], q[2], q[3]);
      else
        for (int e = 0; e < VEC; e++) dst_half[i * H + h + e] = q[e];
    }
  }
}

void rc_cuda_moe_gather(float *dst, const float *src, const int32_t *perm, int T, int k, int H,
                        uint16_t *dst_half, rc_compute ct) {
  if (T <= 0 || k <= 0 || H <= 0) return;
  const size_t nrows = (size_t)T * (size_t)k;
  const unsigned int blocks = rc_cdiv(nrows, MOE_ROW_WARPS);
  const int fp16 = ct == RC_COMPUTE_FP16;
  if (rc_rows_vec4(dst ? (const void *)dst : (const void *)src, src, H) &&
      ((uintptr_t)dst_half & 7u) == 0)
    moe_gather_kernel<4><<<blocks, 32 * MOE_ROW_WARPS, 0, rc_cuda_stream()>>>(
        dst, src, perm, k, H, nrows, dst_half, fp16);
  else
    moe_gather_kernel<1><<<blocks, 32 * MOE_ROW_WARPS, 0, rc_cuda_stream()>>>(
        dst, src, perm, k, H, nrows, dst_half, fp16);
  KERNEL_CHECK();
}

/* out[t] = sum over slots s of w[t k + s] rows[inv_perm[t k + s]], from slot
 * 0's term (w NULL: the rows alone); residual (may be NULL) added to the sum
 * after, residual first, as the `add` it replaces: the MoE layer's y = xm +
 * its output without writing the output (22 us an add at gpu-small, H100). */
template <int VEC>
__global__ void moe_combine_kernel(float *out, const float *rows, const float *w,
                                   const int32_t *inv_perm, int k, int H, int T,
                                   const float *residual) {
  const int t = blockIdx.x * MOE_ROW_WARPS + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (t >= T) return;
  for (int h = VEC * lane; h < H; h += 32 * VEC) {
    rc_piece<VEC> o;
#pragma unroll
    for (int e = 0; e < VEC; e++) o.v[e] = 0.0f; /* k = 0: no slot, a zero row */
    for (int s = 0; s < k; s++) {
      const size_t ts = (size_t)t * k + s;
      rc_piece<VEC> r;
      r.load(rows + (size_t)inv_perm[ts] * H + h);
#pragma unroll
      for (int e = 0; e < VEC; e++) {
        const float term = w ? w[ts] * r.v[e] : r.v[e];
        o.v[e] = s == 0 ? term : o.v[e] + term;
      }
    }
    if (residual) {
      rc_piece<VEC> x;
      x.load(residual + (size_t)t * H + h);
#pragma unroll
      for (int e = 0; e < VEC; e++) o.v[e] = x.v[e] + o.v[e];
    }
    o.store(out + (size_t)t * H + h);
  }
}

void rc_cuda_moe_combine(float *out, const float *rows, const float *w, const int32_t *inv_perm,
                         int T, int k, int H, const float *residual) {
  if (T <= 0 || H <= 0) return;
  const unsigned int blocks = rc_cdiv((size_t)T, MOE_ROW_WARPS);
  if (rc_rows_vec4(out, rows, H) && ((uintptr_t)residual & 15u) == 0)
    moe_combine_kernel<4><<<blocks, 32 * MOE_ROW_WARPS, 0, rc_cuda_stream()>>>(
        out, rows, w, inv_perm, k, H, T, residual);
  else
    moe_combine_kernel<1><<<blocks, 32 * MOE_ROW_WARPS, 0, rc_cuda_stream()>>>(
        out, rows, w, inv_perm, k, H, T, residual);
  KERNEL_CHECK();
}

/* drows[inv_perm[t k + s]] = w[t k + s] dout[t] (w NULL: dout[t]). */
template <int VEC>
__global__ void moe_combine_backward_rows_kernel(float *drows, const float *dout, const float *w,
                                                 const int32_t *inv_perm, int k, int H,
                                                 size_t nts) {
  const size_t ts = blockIdx.x * (size_t)MOE_ROW_WARPS + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (ts >= nts) return;
  const float *g = dout + (ts / (size_t)k) * H;
  float *to = drows + (size_t)inv_perm[ts] * H;
  for (int h = VEC * lane; h < H; h += 32 * VEC) {
    rc_piece<VEC> p;
    p.load(g + h);
#pragma unroll
    for (int e = 0; e < VEC; e++) p.v[e] = w ? w[ts] * p.v[e] : p.v[e];
    p.store(to + h);
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
  if (H > 0) {
    const unsigned int blocks = rc_cdiv(nts, MOE_ROW_WARPS);
    if (rc_rows_vec4(drows, dout, H))
      moe_combine_backward_rows_kernel<4>
          <<<blocks, 32 * MOE_ROW_WARPS, 0, s>>>(drows, dout, w, inv_perm, k, H, nts);
    else
      moe_combine_backward_rows_kernel<1>
          <<<blocks, 32 * MOE_ROW_WARPS, 0, s>>>(drows, dout, w, inv_perm, k, H, nts);
    KERNEL_CHECK();
  }
  if (dw) {
    moe_combine_backward_dw_kernel<<<rc_cdiv(nts * 32, 256), 256, 0, s>>>(dw, dout, rows, inv_perm,
                                                                          k, H, nts);
    KERNEL_CHECK();
  }
}
