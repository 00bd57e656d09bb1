/* cuda_init.cu — init_normal on the device: the weight initialisation's
 * draws, bit for bit the CPU backend's.
 *
 * One thread per element pair (i, i+1), i even, over a grid-stride loop: each
 * runs numeric.h's rc_init_normal_pair, the text the CPU runs. Its math is
 * IEEE-754 basic double operations only (no library log/sin/cos) and the
 * module is built with --fmad=false, so every rounding is the CPU's. A pair
 * that straddles an end of [first, first + n) writes only its element inside;
 * the launch shape touches no value. */
#include "backend/numeric.h"
#include "cuda_common.cuh"

#define INIT_THREADS 256

/* Pairs pair0 .. pair0 + pairs - 1; elements [first, end) are written. */
__global__ void init_normal_kernel(float *dst, uint64_t first, uint64_t end, uint64_t pair0,
                                   uint64_t pairs, uint64_t key, float std) {
  for (uint64_t p = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; p < pairs;
       p += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t i = 2 * (pair0 + p);
    float even, odd;
    rc_init_normal_pair(key, i, std, &even, &odd);
    if (i >= first) dst[i - first] = even;
    if (i + 1 < end) dst[i + 1 - first] = odd;
  }
}

void rc_cuda_init_normal(float *dst, size_t n, uint64_t first, uint64_t key, float std) {
  if (n == 0) return;
  uint64_t end = first + n, pair0 = first / 2, pairs = (end - 1) / 2 - pair0 + 1;
  init_normal_kernel<<<rc_grid_1d(pairs, INIT_THREADS), INIT_THREADS, 0, rc_cuda_stream()>>>(
      dst, first, end, pair0, pairs, key, std);
  KERNEL_CHECK();
}
