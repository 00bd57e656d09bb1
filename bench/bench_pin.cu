/* bench_pin.cu — what page-locking a checkpoint's staging buffer costs, and
 * what it buys: cudaHostAlloc/cudaFreeHost against an anonymous mapping
 * (2 MiB-aligned, with and without transparent huge pages) faulted in and
 * then cudaHostRegister/cudaHostUnregister'd, and the host-to-device copy
 * from each, for a buffer of a gpu-small checkpoint's size. A pre-warmed
 * resume leg locks its staging buffer while it waits (hidden) and frees it
 * as it ends (on the run's critical path: 0.3-0.45 s measured). Not a test:
 * one process, its own timers, one line per variant.
 *
 *   nvcc -O2 -std=c++20 -arch=sm_90 -Isrc -Ikernels -o /tmp/bench_pin bench/bench_pin.cu \
 *     -lcublasLt && /tmp/bench_pin [GiB]
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* CUDA_CHECK, CUBLAS_CHECK: the backend's checks (kernels/cuda_common.cuh) */
#include "cuda_common.cuh"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void touch(char *p, size_t n) {
  for (size_t i = 0; i < n; i += 4096) p[i] = (char)i;
}

static double h2d(void *dev, const void *host, size_t n) {
  double t = now();
  CUDA_CHECK(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice));
  return now() - t;
}

static void mapped(size_t n, void *dev, int huge) {
  size_t a = (size_t)2 << 20, len = (n + a - 1) & ~(a - 1);
  double t0 = now();
  char *raw =
      (char *)mmap(NULL, len + a, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *p = (char *)(((unsigned long)raw + a - 1) & ~(a - 1));
  madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  touch(p, len);
  double t1 = now();
  CUDA_CHECK(cudaHostRegister(p, len, cudaHostRegisterPortable));
  double t2 = now();
  double copy = h2d(dev, p, n);
  double t3 = now();
  CUDA_CHECK(cudaHostUnregister(p));
  double t4 = now();
  munmap(raw, len + a);
  double t5 = now();
  printf("mmap%s: fault-in %.3f s, register %.3f s, H2D %.3f s (%.1f GB/s), unregister %.3f s, "
         "munmap %.3f s\n",
         huge ? "+THP" : "", t1 - t0, t2 - t1, copy, n / copy / 1e9, t4 - t3, t5 - t4);
}

int main(int argc, char **argv) {
  double gib = argc > 1 ? atof(argv[1]) : 2.35;
  size_t n = (size_t)(gib * (1 << 30));
  void *dev;
  CUDA_CHECK(cudaMalloc(&dev, n));
  CUDA_CHECK(cudaFree(0));
  for (int round = 0; round < 2; round++) {
    double t0 = now();
    void *h;
    CUDA_CHECK(cudaHostAlloc(&h, n, cudaHostAllocPortable));
    double t1 = now();
    touch((char *)h, n);
    double t2 = now();
    double copy = h2d(dev, h, n);
    double t3 = now();
    CUDA_CHECK(cudaFreeHost(h));
    double t4 = now();
    printf("round %d: cudaHostAlloc %.3f s, touch %.3f s, H2D %.3f s (%.1f GB/s), cudaFreeHost "
           "%.3f s\n",
           round, t1 - t0, t2 - t1, copy, n / copy / 1e9, t4 - t3);
    mapped(n, dev, 1);
    mapped(n, dev, 0);
    void *pg = malloc(n);
    touch((char *)pg, n);
    double c = h2d(dev, pg, n);
    printf("pageable malloc: H2D %.3f s (%.1f GB/s)\n", c, n / c / 1e9);
    free(pg);
  }
  CUDA_CHECK(cudaFree(dev));
  return 0;
}
