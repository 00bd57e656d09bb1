/* cuda_adamw.cu — the fused AdamW step of ops.h, elementwise, in place.
 *
 * Each element is rc_adamw_element (backend/element_math.h), the function
 * the CPU backend's loop calls; with --fmad=false and IEEE division and
 * sqrtf it rounds identically, so the update agrees with the CPU backend
 * bit for bit. */
#include "backend/element_math.h"
#include "backend/numeric.h"
#include "cuda_common.cuh"

__global__ void adamw_kernel(float *param, const float *grad, float *exp_avg, float *exp_avg_sq,
                             size_t n, float lr, float beta1, float beta2, float eps,
                             float weight_decay, float grad_scale, float bias_correction1,
                             float bias_correction2) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    rc_adamw_element(&param[i], &exp_avg[i], &exp_avg_sq[i], grad[i], lr, beta1, beta2, eps,
                     weight_decay, grad_scale, bias_correction1, bias_correction2);
}

void rc_cuda_adamw(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                   float lr, float beta1, float beta2, float eps, float weight_decay,
                   float grad_scale, float bias_correction1, float bias_correction2) {
  if (n == 0) return;
  adamw_kernel<<<rc_grid_1d(n, 256), 256, 0, rc_cuda_stream()>>>(
      param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, grad_scale,
      bias_correction1, bias_correction2);
  KERNEL_CHECK();
}

/* ---- adamw_many: every tensor's update and its four fingerprints ----
 * A step fingerprints each parameter's main_grad before the update and its
 * weight and both moments after it (trace.csv's fp_main_grad, fp_params,
 * fp_optim): four more passes over the same memory, and the fingerprint's
 * integer hashing made those passes slower than the update itself (ncu:
 * 2.25 ms a gpu-small step against the update's 1.33). Here one stage-1
 * launch covers every (tensor, block of ADAMW_BLOCK_ELEMS elements) pair:
 * each element is updated as adamw_kernel does, and the words of grad and of
 * the new param, exp_avg and exp_avg_sq are hashed while they are in
 * registers. A fingerprint is a wrapping sum of rc_fingerprint_word(index,
 * word) (numeric.h), exact in any order, so the partition cannot change it;
 * stage 2, a block per tensor, adds the blocks' partials. One read-back.
 * A tensor with a param_half also gets its updated weight's 16-bit copy
 * from the same registers (numeric.h's encoding, cast_half's bits): the
 * model params' copy the next step's forward would otherwise cast (session
 * 28; not yet timed on a GPU: ~2 more bytes a weight here against a read
 * of 4 and a write of 2 a weight and ~55 launches in cast_half). */
#define ADAMW_THREADS 256
#define ADAMW_BLOCK_ELEMS 4096 /* four float4 a thread */

typedef struct {
  rc_adamw_tensor t;
  int first, blocks; /* its first stage-1 block, and how many */
  int vec;           /* all four tensors 16-byte aligned (param_half 8): float4 loads */
} adamw_segment;

typedef struct {
  float lr, beta1, beta2, eps, grad_scale, bc1, bc2;
} adamw_hyper;

__device__ __forceinline__ void adamw_fold(unsigned long long acc[4], size_t e, float g, float p,
                                           float m, float v) {
  acc[0] += rc_fingerprint_word((uint64_t)e, __float_as_uint(g));
  acc[1] += rc_fingerprint_word((uint64_t)e, __float_as_uint(p));
  acc[2] += rc_fingerprint_word((uint64_t)e, __float_as_uint(m));
  acc[3] += rc_fingerprint_word((uint64_t)e, __float_as_uint(v));
}

/* adamw_kernel's element, on values in registers */
__device__ __forceinline__ void adamw_one(const rc_adamw_tensor &t, const adamw_hyper &h, float &p,
                                          float &m, float &v, float g) {
  rc_adamw_element(&p, &m, &v, g, h.lr, h.beta1, h.beta2, h.eps, t.weight_decay, h.grad_scale,
                   h.bc1, h.bc2);
}

/* param_half's element: cast_half's encoding of the updated param (numeric.h) */
__device__ __forceinline__ uint16_t adamw_half(const rc_adamw_tensor &t, float p) {
  return t.half_ct == RC_COMPUTE_FP16 ? rc_fp16_encode(p) : rc_bf16_encode(p);
}

/* out[k] = the block's sum of acc[k] over its threads, k < 4: wrapping sums,
 * so any order gives the same bits (both stages end with it). */
__device__ __forceinline__ void block_sum4(unsigned long long acc[4], unsigned long long *out) {
  __shared__ unsigned long long sh[ADAMW_THREADS / 32][4];
#pragma unroll
  for (int k = 0; k < 4; k++)
    for (int off = 16; off > 0; off >>= 1) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (lane == 0)
#pragma unroll
    for (int k = 0; k < 4; k++) sh[warp][k] = acc[k];
  __syncthreads();
  if (threadIdx.x < 4) {
    unsigned long long sum = 0ull;
    for (int w = 0; w < ADAMW_THREADS / 32; w++) sum += sh[w][threadIdx.x];
    out[threadIdx.x] = sum;
  }
}

__global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_many_stage1(const adamw_segment *seg, int count, adamw_hyper h,
                      unsigned long long *partials) {
  __shared__ int which;
  if (threadIdx.x == 0) which = rc_block_segment(seg, count);
  __syncthreads();
  const adamw_segment s = seg[which];
  const rc_adamw_tensor &t = s.t;
  const size_t lo = (size_t)(blockIdx.x - (unsigned int)s.first) * ADAMW_BLOCK_ELEMS;
  const size_t hi = lo + ADAMW_BLOCK_ELEMS < t.n ? lo + ADAMW_BLOCK_ELEMS : t.n;
  unsigned long long acc[4] = {0ull, 0ull, 0ull, 0ull};
  size_t scalar_from = lo;
  if (s.vec) {
    const size_t whole = lo + ((hi - lo) & ~(size_t)3);
    for (size_t e = lo + 4 * threadIdx.x; e < whole; e += 4 * ADAMW_THREADS) {
      float4 p = *(const float4 *)(t.param + e), m = *(const float4 *)(t.exp_avg + e);
      float4 v = *(const float4 *)(t.exp_avg_sq + e);
      const float4 g = *(const float4 *)(t.grad + e);
      adamw_one(t, h, p.x, m.x, v.x, g.x);
      adamw_one(t, h, p.y, m.y, v.y, g.y);
      adamw_one(t, h, p.z, m.z, v.z, g.z);
      adamw_one(t, h, p.w, m.w, v.w, g.w);
      *(float4 *)(t.param + e) = p, *(float4 *)(t.exp_avg + e) = m;
      *(float4 *)(t.exp_avg_sq + e) = v;
      if (t.param_half)
        *(ushort4 *)(t.param_half + e) = make_ushort4(adamw_half(t, p.x), adamw_half(t, p.y),
                                                      adamw_half(t, p.z), adamw_half(t, p.w));
      adamw_fold(acc, e, g.x, p.x, m.x, v.x);
      adamw_fold(acc, e + 1, g.y, p.y, m.y, v.y);
      adamw_fold(acc, e + 2, g.z, p.z, m.z, v.z);
      adamw_fold(acc, e + 3, g.w, p.w, m.w, v.w);
    }
    scalar_from = whole;
  }
  for (size_t e = scalar_from + threadIdx.x; e < hi; e += ADAMW_THREADS) {
    float p = t.param[e], m = t.exp_avg[e], v = t.exp_avg_sq[e];
    const float g = t.grad[e];
    adamw_one(t, h, p, m, v, g);
    t.param[e] = p, t.exp_avg[e] = m, t.exp_avg_sq[e] = v;
    if (t.param_half) t.param_half[e] = adamw_half(t, p);
    adamw_fold(acc, e, g, p, m, v);
  }
  block_sum4(acc, partials + 4 * (size_t)blockIdx.x);
}

/* fp[4 i + k] = the sum of tensor i's partials k. */
__global__ void adamw_many_stage2(const adamw_segment *seg, const unsigned long long *partials,
                                  unsigned long long *fp) {
  const adamw_segment s = seg[blockIdx.x];
  unsigned long long acc[4] = {0ull, 0ull, 0ull, 0ull};
  for (int b = threadIdx.x; b < s.blocks; b += ADAMW_THREADS)
#pragma unroll
    for (int k = 0; k < 4; k++) acc[k] += partials[4 * (size_t)(s.first + b) + k];
  block_sum4(acc, fp + 4 * (size_t)blockIdx.x);
}

static bool aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

void rc_cuda_adamw_many(const rc_adamw_tensor *ts, int count, float lr, float beta1, float beta2,
                        float eps, float grad_scale, float bias_correction1, float bias_correction2,
                        uint64_t *fp) {
  if (count <= 0) return;
  adamw_segment *seg = (adamw_segment *)malloc((size_t)count * sizeof *seg);
  if (!seg) {
    fprintf(stderr, "resumecheck: out of host memory in adamw_many\n");
    abort();
  }
  size_t total = 0;
  for (int i = 0; i < count; i++) {
    seg[i].t = ts[i];
    seg[i].first = (int)total;
    seg[i].blocks = (int)((ts[i].n + ADAMW_BLOCK_ELEMS - 1) / ADAMW_BLOCK_ELEMS);
    seg[i].vec = aligned16(ts[i].param) && aligned16(ts[i].grad) && aligned16(ts[i].exp_avg) &&
                 aligned16(ts[i].exp_avg_sq) && ((uintptr_t)ts[i].param_half & 7u) == 0;
    total += (size_t)seg[i].blocks;
  }
  /* scratch: [partials: 4 total][results: 4 count][segments: count] */
  size_t seg_off = 4 * (total + (size_t)count) * sizeof(unsigned long long);
  seg_off = (seg_off + 15) / 16 * 16;
  unsigned char *buf =
      (unsigned char *)rc_cuda_scratch(RC_SCRATCH_ADAMW, seg_off + (size_t)count * sizeof *seg);
  unsigned long long *partials = (unsigned long long *)buf, *results = partials + 4 * total;
  adamw_segment *dseg = (adamw_segment *)(buf + seg_off);
  cudaStream_t s = rc_cuda_stream();
  CUDA_CHECK(cudaMemcpyAsync(dseg, seg, (size_t)count * sizeof *seg, cudaMemcpyHostToDevice, s));
  const adamw_hyper h = {lr, beta1, beta2, eps, grad_scale, bias_correction1, bias_correction2};
  if (total > 0) {
    adamw_many_stage1<<<(unsigned int)total, ADAMW_THREADS, 0, s>>>(dseg, count, h, partials);
    KERNEL_CHECK();
  }
  adamw_many_stage2<<<(unsigned int)count, ADAMW_THREADS, 0, s>>>(dseg, partials, results);
  KERNEL_CHECK();
  /* unsigned long long and uint64_t are the same 64 bits */
  rc_cuda_read_back(fp, results, 4 * (size_t)count * sizeof(uint64_t));
  free(seg);
}
