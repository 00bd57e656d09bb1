/* bench_operands.cuh — the GEMM benchmarks' operands (bench_gemm_algos.cu,
 * bench_grouped_gemm.cu): uniform bf16 in [-1, 1) from a hash of the index.
 * Random-looking data, because constant operands ran up to 20% faster (the
 * tensor cores draw less power and the clocks stay higher). */
#ifndef RC_BENCH_OPERANDS_CUH
#define RC_BENCH_OPERANDS_CUH

#include <stddef.h>

__global__ void fill_bf16(unsigned short *x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    float v = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    x[i] = (unsigned short)(__float_as_uint(v) >> 16);
  }
}

#endif
