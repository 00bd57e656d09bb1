/* bench_gemm.cuh — what the GEMM benchmarks (bench_gemm_algos.cu,
 * bench_grouped_gemm.cu) share: their operands, uniform bf16 in [-1, 1)
 * from a hash of the index (random-looking data, because constant operands
 * ran up to 20% faster: the tensor cores draw less power and the clocks
 * stay higher; fp32 for the fp32 GEMMs), and the matmul descriptor of a
 * row-major product. */
#ifndef RC_BENCH_GEMM_CUH
#define RC_BENCH_GEMM_CUH

#include <cublasLt.h>
#include <stddef.h>

#include "cuda_common.cuh"

__global__ void fill_bf16(unsigned short *x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    float v = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    x[i] = (unsigned short)(__float_as_uint(v) >> 16);
  }
}

/* the same values as fp32 (the fp32 GEMMs: an MoE router's) */
__global__ void fill_f32(float *x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    x[i] = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
}

/* The descriptor for row-major C[m,n] = op(A) op(B), ta/tb transposing A/B:
 * cuBLASLt is column-major, so it computes C^T = op(B)^T op(A)^T with B
 * passed first, whose transpose is then tb's and A's ta's. fp32 compute. */
static cublasLtMatmulDesc_t row_major_desc(int ta, int tb) {
  cublasLtMatmulDesc_t desc;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                              sizeof op_first));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                              sizeof op_second));
  return desc;
}

#endif
