/* cuda_reduce.cu — full-tensor reductions: amax, sum, sumsq,
 * count_nonfinite, fingerprint.
 *
 * Two stages, no atomics. Stage 1 splits the n elements over a number of
 * blocks that depends only on n; each thread folds its strided elements in
 * increasing index order, then the block folds its threads in a fixed tree.
 * Stage 2, one block, folds the per-block partials in the same fixed tree. The
 * result is therefore the same on every run (and on every GPU of the same
 * kind, since nothing depends on the SM count). sum and sumsq accumulate in
 * double; the fingerprint is a wrapping uint64 sum, exact in any order, so it
 * equals the CPU's loop bit for bit. The batched forms (sumsq_many,
 * fingerprint_many) give every tensor the partition and folds of a single
 * call, in two launches for the whole batch and one read-back: the same
 * bits, without a launch pair and a device round trip per tensor. */
#include <math.h>

#include "backend/numeric.h"
#include "cuda_common.cuh"

#define RED_THREADS 256     /* stage-1 block size (a power of two) */
#define RED_MAX_BLOCKS 1024 /* also stage 2's block size */
#define RED_PER_THREAD 16   /* elements per thread before another block is added */

/* ---- the folds: value of element i, and the combine ---- */
struct SumOp {
  typedef double T;
  const float *x;
  __device__ T identity() const {
    return 0.0;
  }
  __device__ T load(size_t i) const {
    return (double)x[i];
  }
  __device__ T combine(T a, T b) const {
    return a + b;
  }
};
struct SumSqOp {
  typedef double T;
  const float *x;
  __device__ T identity() const {
    return 0.0;
  }
  __device__ T load(size_t i) const {
    double v = (double)x[i];
    return v * v;
  }
  __device__ T combine(T a, T b) const {
    return a + b;
  }
};
struct CountNonfiniteOp {
  typedef unsigned long long T;
  const float *x;
  __device__ T identity() const {
    return 0ull;
  }
  __device__ T load(size_t i) const {
    return isfinite(x[i]) ? 0ull : 1ull;
  }
  __device__ T combine(T a, T b) const {
    return a + b;
  }
};
/* An element is four words from one 16-byte load where the buffer is
 * 16-byte aligned (vec), else one word: a wrapping sum is the same in any
 * grouping, and the scalar loads left half the memory bandwidth unused. */
struct FingerprintOp {
  typedef unsigned long long T;
  const uint32_t *w;
  size_t nwords;
  int vec;
  __device__ T identity() const {
    return 0ull;
  }
  __device__ T load(size_t i) const {
    if (!vec) return rc_fingerprint_word((uint64_t)i, w[i]);
    const size_t j = 4 * i;
    if (j + 4 <= nwords) {
      const uint4 v = ((const uint4 *)w)[i];
      return rc_fingerprint_word((uint64_t)j, v.x) + rc_fingerprint_word((uint64_t)j + 1, v.y) +
             rc_fingerprint_word((uint64_t)j + 2, v.z) + rc_fingerprint_word((uint64_t)j + 3, v.w);
    }
    T acc = 0ull; /* the last, partial element */
    for (size_t k = j; k < nwords; k++) acc += rc_fingerprint_word((uint64_t)k, w[k]);
    return acc;
  }
  __device__ T combine(T a, T b) const {
    return a + b;
  } /* wraps mod 2^64 */
};

/* The fingerprint of nwords words at x: its op and element count. */
static FingerprintOp fingerprint_op(const void *x, size_t nwords, size_t *elements) {
  FingerprintOp op;
  op.w = (const uint32_t *)x;
  op.nwords = nwords;
  op.vec = ((uintptr_t)x & 15u) == 0;
  *elements = op.vec ? (nwords + 3) / 4 : nwords;
  return op;
}
/* max |x| with NaN sticky: once a NaN is seen the result is NaN, whatever the
 * order (so the answer does not depend on the tree). */
struct AmaxOp {
  typedef float T;
  const float *x;
  __device__ T identity() const {
    return 0.0f;
  }
  __device__ T load(size_t i) const {
    return fabsf(x[i]);
  }
  __device__ T combine(T a, T b) const {
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    return b > a ? b : a;
  }
};

/* Fixed-shape tree over a block's threads (blockDim a power of two). */
template <class Op>
__device__ typename Op::T block_fold(const Op &op, typename Op::T v, typename Op::T *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride)
      sh[threadIdx.x] = op.combine(sh[threadIdx.x], sh[threadIdx.x + stride]);
    __syncthreads();
  }
  return sh[0];
}

template <class Op> __global__ void reduce_stage1(Op op, size_t n, typename Op::T *partials) {
  __shared__ typename Op::T sh[RED_THREADS];
  typename Op::T acc = op.identity();
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    acc = op.combine(acc, op.load(i));
  typename Op::T r = block_fold(op, acc, sh);
  if (threadIdx.x == 0) partials[blockIdx.x] = r;
}

template <class Op>
__global__ void reduce_stage2(Op op, const typename Op::T *partials, int nparts,
                              typename Op::T *result) {
  __shared__ typename Op::T sh[RED_MAX_BLOCKS];
  typename Op::T acc = op.identity();
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc = op.combine(acc, partials[i]);
  typename Op::T r = block_fold(op, acc, sh);
  if (threadIdx.x == 0) *result = r;
}

/* Stage 1's block count for n elements: a function of n only. */
static int stage1_blocks(size_t n) {
  size_t per_block = (size_t)RED_THREADS * RED_PER_THREAD;
  size_t nb = (n + per_block - 1) / per_block;
  return nb > RED_MAX_BLOCKS ? RED_MAX_BLOCKS : (int)nb;
}

/* Queues the reduction of n elements into *result (device memory), using
 * partials[0 .. RED_MAX_BLOCKS) as stage 1's output. Reductions queued one
 * after another may share `partials`: the stream runs them in order. */
template <class Op>
static void reduce_enqueue(const Op &op, size_t n, typename Op::T *partials,
                           typename Op::T *result) {
  typedef typename Op::T T;
  cudaStream_t s = rc_cuda_stream();
  if (n == 0) {
    CUDA_CHECK(cudaMemsetAsync(result, 0, sizeof(T), s));
    return;
  }
  int blocks = stage1_blocks(n); /* a function of n only */
  reduce_stage1<Op><<<blocks, RED_THREADS, 0, s>>>(op, n, partials);
  KERNEL_CHECK();
  reduce_stage2<Op><<<1, RED_MAX_BLOCKS, 0, s>>>(op, partials, blocks, result);
  KERNEL_CHECK();
}

template <class Op> static typename Op::T reduce(const Op &op, size_t n) {
  typedef typename Op::T T;
  T *buf = (T *)rc_cuda_scratch(RC_SCRATCH_REDUCE, (RED_MAX_BLOCKS + 1) * sizeof(T));
  reduce_enqueue(op, n, buf, buf + RED_MAX_BLOCKS);
  T r;
  rc_cuda_read_back(&r, buf + RED_MAX_BLOCKS, sizeof r);
  return r;
}

/* ---- batched: every tensor of a step in two launches ----
 * A step fingerprints and sums ~1300 tensors, most of them small; two
 * launches per tensor made the batch launch-bound (1.6 ms for 840 MB). Here
 * one stage-1 launch covers every (tensor, block) pair and one stage-2 launch
 * has a block per tensor. Each tensor keeps exactly the partition and the
 * folds of a single call (its own block count, its own grid stride), so
 * every result has the single call's bits. */
template <class Op> struct Segment {
  Op op;
  size_t n;
  int blocks; /* stage-1 blocks of a single call over n (0 when n == 0) */
  int first;  /* index of its first block in the batch, and of its partials */
};

template <class Op>
__global__ void reduce_many_stage1(const Segment<Op> *seg, int count, typename Op::T *partials) {
  __shared__ typename Op::T sh[RED_THREADS];
  __shared__ int which;
  if (threadIdx.x == 0) which = rc_block_segment(seg, count);
  __syncthreads();
  const Segment<Op> s = seg[which];
  const size_t local = blockIdx.x - (unsigned int)s.first;
  typename Op::T acc = s.op.identity();
  for (size_t i = local * blockDim.x + threadIdx.x; i < s.n; i += (size_t)s.blocks * blockDim.x)
    acc = s.op.combine(acc, s.op.load(i));
  typename Op::T r = block_fold(s.op, acc, sh);
  if (threadIdx.x == 0) partials[blockIdx.x] = r;
}

template <class Op>
__global__ void reduce_many_stage2(const Segment<Op> *seg, const typename Op::T *partials,
                                   typename Op::T *result) {
  __shared__ typename Op::T sh[RED_MAX_BLOCKS];
  const Segment<Op> s = seg[blockIdx.x];
  typename Op::T acc = s.op.identity();
  for (int i = threadIdx.x; i < s.blocks; i += blockDim.x)
    acc = s.op.combine(acc, partials[s.first + i]);
  typename Op::T r = block_fold(s.op, acc, sh);
  if (threadIdx.x == 0) result[blockIdx.x] = r;
}

/* ops[i] over n[i] elements into out[i] (host), one read-back for all. */
template <class Op>
static void reduce_many(const Op *ops, const size_t *n, int count, typename Op::T *out) {
  typedef typename Op::T T;
  if (count <= 0) return;
  Segment<Op> *seg = (Segment<Op> *)malloc((size_t)count * sizeof *seg);
  if (!seg) {
    fprintf(stderr, "resumecheck: out of host memory in a batched reduction\n");
    abort();
  }
  size_t total = 0;
  for (int i = 0; i < count; i++) {
    seg[i].op = ops[i];
    seg[i].n = n[i];
    seg[i].blocks = n[i] ? stage1_blocks(n[i]) : 0;
    seg[i].first = (int)total;
    total += (size_t)seg[i].blocks;
  }
  /* scratch: [partials: total][results: count][segments: count] */
  size_t seg_off = (total + (size_t)count) * sizeof(T);
  seg_off = (seg_off + 15) / 16 * 16;
  unsigned char *buf =
      (unsigned char *)rc_cuda_scratch(RC_SCRATCH_REDUCE, seg_off + (size_t)count * sizeof *seg);
  T *partials = (T *)buf, *results = partials + total;
  Segment<Op> *dseg = (Segment<Op> *)(buf + seg_off);
  cudaStream_t s = rc_cuda_stream();
  CUDA_CHECK(cudaMemcpyAsync(dseg, seg, (size_t)count * sizeof *seg, cudaMemcpyHostToDevice, s));
  if (total > 0) {
    reduce_many_stage1<Op><<<(unsigned int)total, RED_THREADS, 0, s>>>(dseg, count, partials);
    KERNEL_CHECK();
  }
  reduce_many_stage2<Op><<<(unsigned int)count, RED_MAX_BLOCKS, 0, s>>>(dseg, partials, results);
  KERNEL_CHECK();
  rc_cuda_read_back(out, results, (size_t)count * sizeof(T));
  free(seg);
}

float rc_cuda_amax(const float *x, size_t n) {
  AmaxOp op;
  op.x = x;
  return reduce(op, n);
}

double rc_cuda_sum(const float *x, size_t n) {
  SumOp op;
  op.x = x;
  return reduce(op, n);
}

double rc_cuda_sumsq(const float *x, size_t n) {
  SumSqOp op;
  op.x = x;
  return reduce(op, n);
}

long rc_cuda_count_nonfinite(const float *x, size_t n) {
  CountNonfiniteOp op;
  op.x = x;
  return (long)reduce(op, n);
}

uint64_t rc_cuda_fingerprint(const void *x, size_t nbytes) {
  size_t elements = 0;
  FingerprintOp op = fingerprint_op(x, nbytes / 4, &elements);
  return (uint64_t)reduce(op, elements);
}

void rc_cuda_sumsq_many(double *out, const float *const *x, const size_t *n, int count) {
  if (count <= 0) return;
  SumSqOp *ops = (SumSqOp *)malloc((size_t)count * sizeof *ops);
  if (!ops) {
    fprintf(stderr, "resumecheck: out of host memory in sumsq_many\n");
    abort();
  }
  for (int i = 0; i < count; i++) ops[i].x = x[i];
  reduce_many(ops, n, count, out);
  free(ops);
}

void rc_cuda_fingerprint_many(uint64_t *out, const void *const *x, const size_t *nbytes,
                              int count) {
  if (count <= 0) return;
  FingerprintOp *ops = (FingerprintOp *)malloc((size_t)count * sizeof *ops);
  size_t *elements = (size_t *)malloc((size_t)count * sizeof *elements);
  if (!ops || !elements) {
    fprintf(stderr, "resumecheck: out of host memory in fingerprint_many\n");
    abort();
  }
  for (int i = 0; i < count; i++) ops[i] = fingerprint_op(x[i], nbytes[i] / 4, &elements[i]);
  /* unsigned long long and uint64_t are the same 64 bits */
  reduce_many(ops, elements, count, (unsigned long long *)out);
  free(ops);
  free(elements);
}
