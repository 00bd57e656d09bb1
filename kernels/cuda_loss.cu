/* cuda_loss.cu — softmax cross-entropy over logits [T, V]: the gradient in
 * place, or as 16-bit values for a half head, whose logits are 16-bit too
 * and read and overwritten in place (ops.h).
 *
 * With V a multiple of 4 (every model vocabulary) a block per row makes two
 * passes over it without holding it (cross_entropy_2pass_kernel, below):
 * eight rows share an SM, one expf per element in the first pass, the
 * gradient written in the second (a row staged in shared memory first, so
 * that it is read from global memory once, bought nothing: the second read
 * hits L2; session 24). Otherwise rows up to V = 32768 are held in
 * registers, one block per row, and longer rows are re-read from global
 * memory. The argmax takes ties to the lowest index (exact, so `correct`
 * agrees with the CPU bit for bit). Exponentials are fp32 expf; the row sum
 * is folded in double and the log-sum-exp and the loss are double. The CPU
 * reference takes double exp() (ops.h promises tolerances, not bits, here).
 * Every sum is folded per thread in increasing v and then in a fixed tree,
 * so it is the same on every run. */
#include <cuda_bf16.h>
#include <limits.h>
#include <math.h>

#include "backend/numeric.h"
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

/* ---- two passes over a row, no row held ----
 * The kernels above hold a row (registers or shared memory), so an SM works
 * on one or two rows at a time and waits on each row's reductions: 1.32 ms
 * for 8192 x 32768, about 3x the memory bound. Here a block of CE2_THREADS
 * takes a row and nothing more, so eight rows share an SM: pass 1 reads the
 * row once (16-byte loads) and keeps per thread, in increasing v, the
 * running maximum with its lowest index and the sum of exp(x - running
 * maximum), a float4 at a time: the four elements move the maximum first
 * (selects, no branch), then the sum so far is rescaled to it (one 2^x,
 * exactly 1 when it did not move) and the four terms at the new maximum
 * (2^x, ce_ex2), added in fp32, are folded into the double. (Until session 20 the maximum moved an
 * element at a time under a branch, half of whose warps diverged, and the
 * fp16 flag was a run-time one: 69 instructions an element, the kernel
 * bound by issue at 0.64 ms a call for gpu-small's 8192 x 32768 bf16
 * logits.) The block combines the threads' (max, index) and their sums
 * rescaled to the row's maximum in fixed trees. Pass 2 reads the row again and writes the
 * gradient, fp32 in place or 16-bit (numeric.h's encoding of the same fp32
 * value) into dlogits_half, so the separate cast over [T, V] goes too.
 * HALF_IN: the logits are dlogits_half's 16-bit values (decoded exactly,
 * 8-byte loads), and the gradient is written over them: each thread writes
 * only the four elements it has just read again, and the label's logit is
 * read before the barrier that precedes every write.
 * Since session 25 the kernel does a third less integer work, the same bits
 * (digests unchanged): after a thread's first float4 the maximum moves a
 * float4 at a time (fmaxf of the four, one compare) and its element is found
 * once at the end; bf16 is decoded one op an element and encoded two
 * elements an instruction; the label's compare is made once a float4; and
 * CE2_UNROLL float4s' loads go out together. Nsight Compute had found it
 * bound by the ALU pipe (71%, 37 instructions an element, DRAM at 61%);
 * after, DRAM at 83%: 0.439 -> 0.389 ms a gpu-small call on the H200.
 * Needs V % 4 == 0 and 16-byte aligned rows (8-byte for the 16-bit rows). */
#define CE2_THREADS 256
#define CE2_WARPS (CE2_THREADS / 32)
#define CE2_UNROLL 4 /* float4s a thread loads before using them (both passes) */

/* elements 4*i4 .. 4*i4+3 of row t, from fp32 logits or 16-bit ones */
template <bool HALF_IN, bool FP16>
__device__ __forceinline__ float4 ce_load4(const float *logits, const uint16_t *half, size_t t,
                                           int V, int i4) {
  /* bf16: a word's low half shifted up, its high half masked: one op each */
  if (HALF_IN && !FP16) {
    const uint2 w = ((const uint2 *)(half + t * (size_t)V))[i4];
    return make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u),
                       __uint_as_float(w.y << 16), __uint_as_float(w.y & 0xffff0000u));
  }
  if (HALF_IN) {
    ushort4 h = ((const ushort4 *)(half + t * (size_t)V))[i4];
    return make_float4(rc_half_decode(h.x, FP16), rc_half_decode(h.y, FP16),
                       rc_half_decode(h.z, FP16), rc_half_decode(h.w, FP16));
  }
  return ((const float4 *)(logits + t * (size_t)V))[i4];
}

/* 2^x by the special function unit (relative error ~2^-22, subnormal results
 * flushed to 0): pass 1's terms exp(x - m) as 2^(x log2 e - m log2 e), one
 * FFMA and one MUFU where expf takes ten instructions. The row's sum moves
 * by ~1e-7 relative; the gradient (pass 2) keeps expf. */
#define CE_LOG2E 1.4426950408889634f
__device__ __forceinline__ float ce_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* rc_bf16_encode's bits without its branches (round to nearest even; NaN
 * kept quiet with its sign and top payload bits): numeric.h's form branched
 * on every element of pass 2 */
__device__ __forceinline__ uint16_t ce_bf16_encode(float x) {
  const uint32_t u = __float_as_uint(x);
  const uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t special = (u | ((u & 0x7fffffu) ? 0x400000u : 0u)) >> 16;
  return (uint16_t)((u & 0x7f800000u) == 0x7f800000u ? special : rne);
}

/* Pass 1's step for elements 4*i4 .. 4*i4+3 (q): the four move the
 * running maximum first (increasing v, strict >: the lowest index wins),
 * then the sum so far is rescaled to it (2^0 = 1 exactly when it did not
 * move; nothing before the thread's first element: a select, no branch) and
 * the four terms at the new maximum, added in fp32, folded into the double. */
__device__ __forceinline__ void ce_pass1_step(float4 q, int i4, float *m, float *mc, int *mi,
                                              double *se) {
  const float xs[4] = {q.x, q.y, q.z, q.w};
  float m4 = *m;
  int mi4 = *mi;
  if (*mi == INT_MAX) m4 = xs[0], mi4 = 4 * i4; /* the thread's first element, whatever it is */
#pragma unroll
  for (int e = 0; e < 4; e++)
    if (xs[e] > m4) m4 = xs[e], mi4 = 4 * i4 + e;
  const float mc4 = m4 * CE_LOG2E, moved = ce_ex2(*mc - mc4);
  const double rescale = *mi == INT_MAX ? 0.0 : (double)moved;
  float part = 0.0f;
#pragma unroll
  for (int e = 0; e < 4; e++) part += ce_ex2(fmaf(xs[e], CE_LOG2E, -mc4));
  *se = *se * rescale + (double)part;
  *m = m4, *mc = mc4, *mi = mi4;
}

/* ce_pass1_step for a float4 after the thread's first, with the maximum's
 * group i4 (mg) kept instead of its element: the four's maximum by fmaxf
 * (NaN dropped, as x > m drops it), one strict compare against the running
 * maximum (a NaN maximum stays, as it does there), and the element found once
 * at the end (ce_group_first). The running maximum and the sum take the same
 * values as ce_pass1_step's (a -0 / +0 tie may leave the other zero, which
 * neither 2^x nor a compare tells apart); a third of its integer work. */
__device__ __forceinline__ void ce_pass1_step_group(float4 q, int i4, float *m, float *mc, int *mg,
                                                    double *se) {
  const float y = fmaxf(fmaxf(q.x, q.y), fmaxf(q.z, q.w));
  const bool up = y > *m;
  const float m4 = up ? y : *m;
  if (up) *mg = i4;
  const float mc4 = m4 * CE_LOG2E;
  const double rescale = (double)ce_ex2(*mc - mc4);
  const float part = ce_ex2(fmaf(q.x, CE_LOG2E, -mc4)) + ce_ex2(fmaf(q.y, CE_LOG2E, -mc4)) +
                     ce_ex2(fmaf(q.z, CE_LOG2E, -mc4)) + ce_ex2(fmaf(q.w, CE_LOG2E, -mc4));
  *se = *se * rescale + (double)part;
  *m = m4, *mc = mc4;
}

/* the lowest element of group q equal to m, its group's maximum: where the
 * element-wise scan (strict >) last moved the maximum */
__device__ __forceinline__ int ce_group_first(float4 q, int i4, float m) {
  return 4 * i4 + (q.x == m ? 0 : q.y == m ? 1 : q.z == m ? 2 : 3);
}

/* Pass 2's gradient of elements 4*j4 .. 4*j4+3: d (p - 1) at the label y,
 * d p elsewhere, p = exp(x - lse). */
__device__ __forceinline__ float4 ce_grad4(float4 q, int j4, int y, float d, float lse_f) {
  const float p[4] = {expf(q.x - lse_f), expf(q.y - lse_f), expf(q.z - lse_f), expf(q.w - lse_f)};
  float4 g = make_float4(d * p[0], d * p[1], d * p[2], d * p[3]);
  const unsigned int at = (unsigned int)(y - 4 * j4); /* the label's place, if it is here */
  if (at < 4u) { /* once a row: the compare a float4, not an element */
    if (at == 0) g.x = d * (p[0] - 1.0f);
    if (at == 1) g.y = d * (p[1] - 1.0f);
    if (at == 2) g.z = d * (p[2] - 1.0f);
    if (at == 3) g.w = d * (p[3] - 1.0f);
  }
  return g;
}

/* the gradient of elements 4*j4 .. 4*j4+3 of row t: 16-bit into
 * dlogits_half (HALF) or fp32 over the logits */
template <bool HALF, bool FP16>
__device__ __forceinline__ void ce_pass2_store(float *logits, uint16_t *dlogits_half, size_t t,
                                               int V, int j4, float4 g) {
  if (HALF && !FP16) {
    /* two floats to bf16 in one instruction (round to nearest even: ce_bf16_encode's bits for
     * every number and infinity); a NaN, which it would make canonical, takes the encoding
     * that keeps its sign and payload */
    uint2 w;
    if (isnan(g.x) || isnan(g.y) || isnan(g.z) || isnan(g.w)) {
      w.x = (uint32_t)ce_bf16_encode(g.x) | (uint32_t)ce_bf16_encode(g.y) << 16;
      w.y = (uint32_t)ce_bf16_encode(g.z) | (uint32_t)ce_bf16_encode(g.w) << 16;
    } else {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(g.x, g.y),
                           hi = __floats2bfloat162_rn(g.z, g.w);
      w.x = *(const uint32_t *)&lo;
      w.y = *(const uint32_t *)&hi;
    }
    ((uint2 *)(dlogits_half + t * (size_t)V))[j4] = w;
  } else if (HALF) {
    ushort4 h;
    h.x = rc_fp16_encode(g.x);
    h.y = rc_fp16_encode(g.y);
    h.z = rc_fp16_encode(g.z);
    h.w = rc_fp16_encode(g.w);
    ((ushort4 *)(dlogits_half + t * (size_t)V))[j4] = h;
  } else {
    ((float4 *)(logits + t * (size_t)V))[j4] = g;
  }
}

template <bool HALF, bool HALF_IN, bool FP16>
__global__ void __launch_bounds__(CE2_THREADS)
    cross_entropy_2pass_kernel(float *losses, float *correct, float *logits, const int32_t *labels,
                               const float *dloss, int V, uint16_t *dlogits_half) {
  __shared__ float sh_val[CE2_WARPS];
  __shared__ int sh_idx[CE2_WARPS];
  __shared__ double sh_sum[CE2_WARPS];
  __shared__ float sh_max;
  __shared__ int sh_amax;
  __shared__ double sh_lse;
  const size_t t = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, V4 = V / 4;

  float m = -INFINITY, mc = -INFINITY; /* mc: m log2 e */
  int mi = INT_MAX;
  double se = 0.0;
  /* the thread's first float4 element by element (it starts the maximum,
   * whatever it is), the rest a group at a time; CE2_UNROLL float4s' loads
   * issued before their steps, which run in increasing i4: more of the row
   * in flight a thread, the same bits */
  int i4 = tid, mg = -1;
  if (i4 < V4) {
    ce_pass1_step(ce_load4<HALF_IN, FP16>(logits, dlogits_half, t, V, i4), i4, &m, &mc, &mi, &se);
    i4 += CE2_THREADS;
  }
  for (; i4 + (CE2_UNROLL - 1) * CE2_THREADS < V4; i4 += CE2_UNROLL * CE2_THREADS) {
    float4 q[CE2_UNROLL];
#pragma unroll
    for (int u = 0; u < CE2_UNROLL; u++)
      q[u] = ce_load4<HALF_IN, FP16>(logits, dlogits_half, t, V, i4 + u * CE2_THREADS);
#pragma unroll
    for (int u = 0; u < CE2_UNROLL; u++)
      ce_pass1_step_group(q[u], i4 + u * CE2_THREADS, &m, &mc, &mg, &se);
  }
  for (; i4 < V4; i4 += CE2_THREADS)
    ce_pass1_step_group(ce_load4<HALF_IN, FP16>(logits, dlogits_half, t, V, i4), i4, &m, &mc, &mg,
                        &se);
  if (mg >= 0) /* the maximum moved after the first float4: its element, from one more load */
    mi = ce_group_first(ce_load4<HALF_IN, FP16>(logits, dlogits_half, t, V, mg), mg, m);
  /* the row's maximum and its lowest index */
  float best = m;
  int bi = mi;
  warp_argmax(&best, &bi);
  if (lane == 0) sh_val[warp] = best, sh_idx[warp] = bi;
  __syncthreads();
  if (warp == 0) {
    best = lane < CE2_WARPS ? sh_val[lane] : -INFINITY;
    bi = lane < CE2_WARPS ? sh_idx[lane] : INT_MAX;
    warp_argmax(&best, &bi);
    if (lane == 0) sh_max = best, sh_amax = bi;
  }
  __syncthreads();
  const float mx = sh_max;
  /* the threads' sums at the row's maximum, in a fixed tree */
  double mine = mi == INT_MAX ? 0.0 : se * (double)expf(m - mx);
  mine = warp_sum(mine);
  if (lane == 0) sh_sum[warp] = mine;
  __syncthreads();
  if (warp == 0) {
    double v = lane < CE2_WARPS ? sh_sum[lane] : 0.0;
    v = warp_sum(v);
    if (lane == 0) sh_lse = (double)mx + log(v);
  }
  __syncthreads();
  const double lse = sh_lse;
  const int y = labels[t];
  if (tid == 0) {
    float ly =
        HALF_IN ? rc_half_decode(dlogits_half[t * (size_t)V + y], FP16) : logits[t * (size_t)V + y];
    losses[t] = (float)(lse - (double)ly);
    correct[t] = sh_amax == y ? 1.0f : 0.0f;
  }
  const float d = dloss ? dloss[t] : 0.0f, lse_f = (float)lse;
  __syncthreads(); /* every read of logits[t, y] is done before the row is overwritten */
  int j4 = tid;
  if (d != 0.0f)
    for (; j4 + (CE2_UNROLL - 1) * CE2_THREADS < V4; j4 += CE2_UNROLL * CE2_THREADS) {
      float4 q[CE2_UNROLL];
#pragma unroll
      for (int u = 0; u < CE2_UNROLL; u++)
        q[u] = ce_load4<HALF_IN, FP16>(logits, dlogits_half, t, V, j4 + u * CE2_THREADS);
#pragma unroll
      for (int u = 0; u < CE2_UNROLL; u++)
        ce_pass2_store<HALF, FP16>(logits, dlogits_half, t, V, j4 + u * CE2_THREADS,
                                   ce_grad4(q[u], j4 + u * CE2_THREADS, y, d, lse_f));
    }
  for (; j4 < V4; j4 += CE2_THREADS) {
    /* d == 0: all +0.0 (d * (p - 1) would leave -0.0 at the label) */
    const float4 g = d == 0.0f ? make_float4(0.0f, 0.0f, 0.0f, 0.0f)
                               : ce_grad4(ce_load4<HALF_IN, FP16>(logits, dlogits_half, t, V, j4),
                                          j4, y, d, lse_f);
    ce_pass2_store<HALF, FP16>(logits, dlogits_half, t, V, j4, g);
  }
}

__global__ void decode_half_kernel(float *dst, const uint16_t *src, size_t n, int fp16) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = rc_half_decode(src[i], fp16);
}

static void cross_entropy_held_rows(float *losses, float *correct, float *logits,
                                    const int32_t *labels, const float *dloss, int T, int V);

void rc_cuda_cross_entropy(float *losses, float *correct, float *logits, const int32_t *labels,
                           const float *dloss, int T, int V, uint16_t *dlogits_half,
                           rc_compute ct) {
  if (T <= 0 || V <= 0) return;
  cudaStream_t s = rc_cuda_stream();
  bool fp16 = ct == RC_COMPUTE_FP16;
  if (V % 4 == 0 && ((uintptr_t)logits & 15u) == 0 && ((uintptr_t)dlogits_half & 7u) == 0) {
    /* the 16-bit form is a template argument: a run-time flag left a branch
     * around every decode and encode */
    if (!logits && fp16)
      cross_entropy_2pass_kernel<true, true, true>
          <<<T, CE2_THREADS, 0, s>>>(losses, correct, NULL, labels, dloss, V, dlogits_half);
    else if (!logits)
      cross_entropy_2pass_kernel<true, true, false>
          <<<T, CE2_THREADS, 0, s>>>(losses, correct, NULL, labels, dloss, V, dlogits_half);
    else if (dlogits_half && fp16)
      cross_entropy_2pass_kernel<true, false, true>
          <<<T, CE2_THREADS, 0, s>>>(losses, correct, logits, labels, dloss, V, dlogits_half);
    else if (dlogits_half)
      cross_entropy_2pass_kernel<true, false, false>
          <<<T, CE2_THREADS, 0, s>>>(losses, correct, logits, labels, dloss, V, dlogits_half);
    else
      cross_entropy_2pass_kernel<false, false, false>
          <<<T, CE2_THREADS, 0, s>>>(losses, correct, logits, labels, dloss, V, NULL);
    KERNEL_CHECK();
    return;
  }
  if (!logits) { /* 16-bit logits on the held-row path: decoded into scratch first */
    size_t n = (size_t)T * (size_t)V;
    logits = (float *)rc_cuda_scratch(RC_SCRATCH_CE, n * sizeof(float));
    decode_half_kernel<<<rc_grid_1d(n, 256), 256, 0, s>>>(logits, dlogits_half, n, fp16);
    KERNEL_CHECK();
  }
  cross_entropy_held_rows(losses, correct, logits, labels, dloss, T, V);
  if (dlogits_half) rc_cuda_cast_half(dlogits_half, logits, (size_t)T * (size_t)V, ct);
}

/* V % 4 != 0 or unaligned rows: the row held in registers, or re-read. */
static void cross_entropy_held_rows(float *losses, float *correct, float *logits,
                                    const int32_t *labels, const float *dloss, int T, int V) {
  cudaStream_t s = rc_cuda_stream();
  int per_thread = (V + CE_ROW_THREADS - 1) / CE_ROW_THREADS;
  if (V % 4 == 0 && per_thread <= 32) {
    static bool opted[4]; /* per template, for its largest row: P * CE_ROW_THREADS floats */
    size_t sm = (size_t)V * sizeof(float);
    unsigned int grid = (unsigned int)(T < rc_sm_count() ? T : rc_sm_count());
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
