// sanitizer_control.cu — the negative controls of the compute-sanitizer test:
// kernels with exactly the bugs memcheck and racecheck exist to find. The test
// (gpu_sanitizer.sh) runs our training step under the sanitizer and expects
// no report; that verdict means something only if the same invocation, with
// the same filters, does report these. `clean` is the positive control.
//
//   sanitizer_control oob|race|clean     exit 0 after the launch
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CUDA_CHECK(call)                                                                           \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));     \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

// One element past the end: the classic tail-tile bug.
__global__ void write_one_past_end(float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) out[i] = 1.0f;
}

// Reads a neighbour's shared-memory slot with no barrier in between: the
// classic missing __syncthreads() in a tree reduction.
__global__ void shared_race(float *out) {
  __shared__ float slot[64];
  slot[threadIdx.x] = (float)threadIdx.x;
  out[threadIdx.x] = slot[(threadIdx.x + 32) % 64];
}

__global__ void shared_synced(float *out) {
  __shared__ float slot[64];
  slot[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = slot[(threadIdx.x + 32) % 64];
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: sanitizer_control oob|race|clean\n");
    return 2;
  }
  const int n = 64;
  float *out = NULL;
  CUDA_CHECK(cudaMalloc(&out, n * sizeof(float)));
  if (strcmp(argv[1], "oob") == 0)
    write_one_past_end<<<1, n + 32>>>(out, n);
  else if (strcmp(argv[1], "race") == 0)
    shared_race<<<1, n>>>(out);
  else if (strcmp(argv[1], "clean") == 0)
    shared_synced<<<1, n>>>(out);
  else {
    fprintf(stderr, "sanitizer_control: unknown mode '%s'\n", argv[1]);
    return 2;
  }
  // The out-of-bounds write may land in the allocation's padding, so the
  // runtime alone need not fail: only the sanitizer is the judge.
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) fprintf(stderr, "sanitizer_control: %s\n", cudaGetErrorString(err));
  CUDA_CHECK(cudaFree(out));
  return 0;
}
