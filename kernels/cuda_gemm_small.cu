/* cuda_gemm_small.cu — fp32 GEMMs with one dimension of at most SMALL_MAX
 * (an MoE router's: E experts) as plain kernels, under the kernel switch
 * RC_CUDA_GEMM_SMALL=1 (opt-in until a GPU has measured it).
 *
 * Why: the router's three fp32 GEMMs a layer and microbatch (logits
 * [T, E] = x W^T, dx = dlogits W, dW += dlogits^T x; E = 8, H = 768, T =
 * 8192 at gpu-small) run on cuBLASLt's SIMT fp32 kernels at 2-7 TFLOP/s:
 * 0.042 + 0.025 + 0.015 ms, ~0.49 ms of an MoE step on the H100 (session 25,
 * RC_PROFILE=events), for work bound by reading x once (25 MB, ~8 us).
 *
 * Each result is a fixed fold, the same on every run and launch:
 *  - k small (k <= SMALL_MAX): a thread per element, fmaf over kk in
 *    increasing kk.
 *  - m small: k cut into SMALL_CHUNK-row chunks; a thread per column j and
 *    chunk folds the chunk's rows in increasing kk into m accumulators
 *    (partials in scratch), then a thread per element adds the chunks'
 *    partials in increasing chunk.
 *  - n small: a warp per row i; lane l folds kk = l, l + 32, ... in
 *    increasing kk into n accumulators; lane 0's xor-tree total is stored.
 * Then the epilogue of cuda_gemm.cu's gemm_epilogue_kernel: alpha * acc
 * (alpha applied as cuBLASLt applies it), plus C (beta == 1: one rounding,
 * the fused/unfused accumulation property of ops.h) or beta * C, and
 * beta == 0 never reads C. The values differ from cuBLASLt's in the last
 * bits (another summation order): ops.h promises tolerances for fp32 GEMMs,
 * and the switch is recorded in every run (src/base/kernel_switches.h). */
#include "cuda_common.cuh"

#define SMALL_MAX 16   /* the small dimension's limit: accumulators a thread */
#define SMALL_CHUNK 64 /* rows of k a partial (m small) */
#define SMALL_ROWS 8   /* warps a block (n small) */

/* op(X)(r, c) of a row-major X with leading dimension ld */
__device__ __forceinline__ float op_at(const float *X, int ld, bool trans, int r, int c) {
  return trans ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c];
}

__device__ __forceinline__ void small_store(float *dst, float acc, float alpha, float beta) {
  acc = alpha * acc;
  if (beta == 0.0f)
    *dst = acc;
  else if (beta == 1.0f)
    *dst = acc + *dst;
  else
    *dst = acc + beta * *dst;
}

__global__ void gemm_small_k_kernel(bool ta, bool tb, int m, int n, int k, float alpha,
                                    const float *A, int lda, const float *B, int ldb, float beta,
                                    float *C, int ldc) {
  const size_t total = (size_t)m * (size_t)n;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    const int i = (int)(idx / (size_t)n), j = (int)(idx % (size_t)n);
    float acc = 0.0f;
    for (int kk = 0; kk < k; kk++)
      acc = fmaf(op_at(A, lda, ta, i, kk), op_at(B, ldb, tb, kk, j), acc);
    small_store(&C[(size_t)i * ldc + j], acc, alpha, beta);
  }
}

/* partial[(chunk * m + i) * n + j] = the chunk's rows folded in increasing kk */
__global__ void gemm_small_m_partial_kernel(bool ta, bool tb, int m, int n, int k, const float *A,
                                            int lda, const float *B, int ldb, float *partial) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (j >= n) return;
  const int k0 = chunk * SMALL_CHUNK, k1 = k0 + SMALL_CHUNK < k ? k0 + SMALL_CHUNK : k;
  float acc[SMALL_MAX];
#pragma unroll
  for (int i = 0; i < SMALL_MAX; i++) acc[i] = 0.0f;
  for (int kk = k0; kk < k1; kk++) {
    const float b = op_at(B, ldb, tb, kk, j);
#pragma unroll
    for (int i = 0; i < SMALL_MAX; i++)
      if (i < m) acc[i] = fmaf(op_at(A, lda, ta, i, kk), b, acc[i]);
  }
#pragma unroll
  for (int i = 0; i < SMALL_MAX; i++)
    if (i < m) partial[((size_t)chunk * m + i) * n + j] = acc[i];
}

__global__ void gemm_small_m_final_kernel(int m, int n, int nchunks, const float *partial,
                                          float alpha, float beta, float *C, int ldc) {
  const size_t total = (size_t)m * (size_t)n;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    const int i = (int)(idx / (size_t)n), j = (int)(idx % (size_t)n);
    float acc = 0.0f;
    for (int c = 0; c < nchunks; c++) acc += partial[((size_t)c * m + i) * n + j];
    small_store(&C[(size_t)i * ldc + j], acc, alpha, beta);
  }
}

__global__ void gemm_small_n_kernel(bool ta, bool tb, int m, int n, int k, float alpha,
                                    const float *A, int lda, const float *B, int ldb, float beta,
                                    float *C, int ldc) {
  const int i = blockIdx.x * SMALL_ROWS + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (i >= m) return;
  float acc[SMALL_MAX];
#pragma unroll
  for (int j = 0; j < SMALL_MAX; j++) acc[j] = 0.0f;
  for (int kk = lane; kk < k; kk += 32) {
    const float a = op_at(A, lda, ta, i, kk);
#pragma unroll
    for (int j = 0; j < SMALL_MAX; j++)
      if (j < n) acc[j] = fmaf(a, op_at(B, ldb, tb, kk, j), acc[j]);
  }
#pragma unroll
  for (int j = 0; j < SMALL_MAX; j++) {
    if (j >= n) break; /* the same for the whole warp */
    float v = acc[j];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) small_store(&C[(size_t)i * ldc + j], v, alpha, beta);
  }
}

bool rc_cuda_gemm_small(bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc) {
  static int on = -1;
  if (!rc_env_once(&on, "RC_CUDA_GEMM_SMALL", "1")) return false;
  cudaStream_t s = rc_cuda_stream();
  if (k <= SMALL_MAX) {
    gemm_small_k_kernel<<<rc_grid_1d((size_t)m * (size_t)n, 256), 256, 0, s>>>(
        ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  } else if (m <= SMALL_MAX) {
    const int nchunks = (k + SMALL_CHUNK - 1) / SMALL_CHUNK;
    float *partial =
        (float *)rc_cuda_scratch(RC_SCRATCH_GEMM_D, (size_t)nchunks * (size_t)m * (size_t)n * 4);
    gemm_small_m_partial_kernel<<<dim3(rc_cdiv((size_t)n, 128), (unsigned int)nchunks), 128, 0,
                                  s>>>(ta, tb, m, n, k, A, lda, B, ldb, partial);
    KERNEL_CHECK();
    gemm_small_m_final_kernel<<<rc_grid_1d((size_t)m * (size_t)n, 256), 256, 0, s>>>(
        m, n, nchunks, partial, alpha, beta, C, ldc);
  } else if (n <= SMALL_MAX) {
    gemm_small_n_kernel<<<rc_cdiv((size_t)m, SMALL_ROWS), 32 * SMALL_ROWS, 0, s>>>(
        ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  } else {
    return false;
  }
  KERNEL_CHECK();
  return true;
}
