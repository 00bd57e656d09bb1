/* wgmma_probe.cu — the Hopper warpgroup MMA's operand layouts, checked one
 * by one before an attention kernel relies on them.
 *
 * Each case computes one 64 x 64 product (k = 64) with the project's wgmma
 * wrappers (kernels/cuda_wgmma.cuh) from 128-byte
 * swizzled shared tiles (the layout cp.async writes in the attention
 * kernels: row r's 16-byte chunk c at chunk c ^ (r % 8) of a 128-byte row),
 * and compares it with a host product in double precision and, where the
 * same k order exists, with mma.sync m16n8k16 bit for bit:
 *   ss_kk  D = A B^T, A [m][k] and B [n][k] both K-major (S = Q K^T)
 *   rs_mn  D = P B, P from registers, B [k][n] MN-major (O = P V)
 *   ss_mm  D = A^T B, A stored [k][m], B [k][n], both MN-major (dQ = dS K)
 *   ss_mm_n32  the same as two n = 32 halves, columns 32.. from a descriptor
 *          64 bytes into B's rows (the dK/dV kernel's split of dQ)
 *
 *   nvcc -O2 -std=c++20 -gencode arch=compute_90a,code=sm_90a -Isrc -Ikernels \
 *     -o wgmma_probe bench/wgmma_probe.cu && ./wgmma_probe
 *
 * Exit status 0 when every case is within 1e-3 relative of the host. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_wgmma.cuh" /* the wrappers under test (and CUDA_CHECK, mma_bf16) */

__device__ __forceinline__ unsigned pack2(bf16 lo, bf16 hi) {
  return (unsigned)__bfloat16_as_ushort(lo) | (unsigned)__bfloat16_as_ushort(hi) << 16;
}

/* the accumulator's element e of n-tile i for thread lane of warp w: row, col */
__device__ __forceinline__ void acc_rc(int w, int lane, int i, int e, int *r, int *c) {
  *r = 16 * w + lane / 4 + 8 * (e / 2);
  *c = 8 * i + 2 * (lane % 4) + (e & 1);
}

/* mode 0: ss_kk, 1: rs_mn, 2: ss_mm; 3: ss_kk by mma.sync (A, B row-major [m][k], [n][k]);
 * 4: ss_mm as two n = 32 halves */
__global__ void probe_kernel(int mode, const bf16 *A, const bf16 *B, float *D) {
  __shared__ __align__(1024) bf16 As[64 * 64];
  __shared__ __align__(1024) bf16 Bs[64 * 64];
  const int tid = threadIdx.x, w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int i = tid; i < 64 * 64; i += 128) {
    As[sw128(i / 64, i % 64)] = A[i];
    Bs[sw128(i / 64, i % 64)] = B[i];
  }
  fence_proxy_async();
  __syncthreads();
  float d[8][4];
  zero_acc<8>(d);
  if (mode == 0) { /* A [m][k], B [n][k]: k-steps at +32 bytes */
    wgmma_fence();
    for (int kk = 0; kk < 4; kk++)
      wgmma_ss_kk(d, desc_sw128(As + 16 * kk), desc_sw128(Bs + 16 * kk));
    wgmma_commit_wait();
  } else if (mode == 1) { /* A [m][k] from registers, B [k][n]: k-steps at +16 rows */
    unsigned a[4][4];
    for (int kk = 0; kk < 4; kk++) {
      const int r0 = 16 * w + g, c0 = 16 * kk + 2 * t;
      a[kk][0] = pack2(A[r0 * 64 + c0], A[r0 * 64 + c0 + 1]);
      a[kk][1] = pack2(A[(r0 + 8) * 64 + c0], A[(r0 + 8) * 64 + c0 + 1]);
      a[kk][2] = pack2(A[r0 * 64 + c0 + 8], A[r0 * 64 + c0 + 9]);
      a[kk][3] = pack2(A[(r0 + 8) * 64 + c0 + 8], A[(r0 + 8) * 64 + c0 + 9]);
    }
    wgmma_fence();
    for (int kk = 0; kk < 4; kk++) wgmma_rs_mn(d, a[kk], desc_sw128(Bs + 16 * 64 * kk));
    wgmma_commit_wait();
  } else if (mode == 2) { /* A stored [k][m], B [k][n]: both transposed, k-steps at +16 rows */
    wgmma_fence();
    for (int kk = 0; kk < 4; kk++)
      wgmma_ss_mm(d, desc_sw128(As + 16 * 64 * kk), desc_sw128(Bs + 16 * 64 * kk));
    wgmma_commit_wait();
  } else if (mode == 4) { /* ss_mm by halves: columns 0..31, then 32..63 at +64 bytes */
    for (int half = 0; half < 2; half++) {
      float h[4][4];
      wgmma_fence();
      wgmma_ss_mm_n32<false>(h, desc_sw128(As), desc_sw128(Bs + 32 * half));
      for (int kk = 1; kk < 4; kk++)
        wgmma_ss_mm_n32(h, desc_sw128(As + 16 * 64 * kk),
                        desc_sw128(Bs + 16 * 64 * kk + 32 * half));
      wgmma_commit_wait();
      for (int i = 0; i < 4; i++)
        for (int e = 0; e < 4; e++) d[4 * half + i][e] = h[i][e];
    }
  } else { /* mma.sync, the attention kernels' order: k-steps 0..3 per n-tile */
    for (int i = 0; i < 8; i++)
      for (int kk = 0; kk < 4; kk++) {
        const int r0 = 16 * w + g, c0 = 16 * kk + 2 * t;
        unsigned a[4];
        a[0] = pack2(A[r0 * 64 + c0], A[r0 * 64 + c0 + 1]);
        a[1] = pack2(A[(r0 + 8) * 64 + c0], A[(r0 + 8) * 64 + c0 + 1]);
        a[2] = pack2(A[r0 * 64 + c0 + 8], A[r0 * 64 + c0 + 9]);
        a[3] = pack2(A[(r0 + 8) * 64 + c0 + 8], A[(r0 + 8) * 64 + c0 + 9]);
        const int n = 8 * i + g;
        const unsigned b0 = pack2(B[n * 64 + c0], B[n * 64 + c0 + 1]);
        const unsigned b1 = pack2(B[n * 64 + c0 + 8], B[n * 64 + c0 + 9]);
        mma_bf16(d[i], a, b0, b1);
      }
  }
  for (int i = 0; i < 8; i++)
    for (int e = 0; e < 4; e++) {
      int r, c;
      acc_rc(w, lane, i, e, &r, &c);
      D[r * 64 + c] = d[i][e];
    }
}

static float bf16_to_float(bf16 x) {
  uint16_t u;
  memcpy(&u, &x, 2);
  uint32_t v = (uint32_t)u << 16;
  float f;
  memcpy(&f, &v, 4);
  return f;
}

int main(void) {
  const int n = 64 * 64;
  bf16 hA[64 * 64], hB[64 * 64];
  srand(7);
  for (int i = 0; i < n; i++) {
    hA[i] = __float2bfloat16((float)rand() / RAND_MAX * 2.0f - 1.0f);
    hB[i] = __float2bfloat16((float)rand() / RAND_MAX * 2.0f - 1.0f);
  }
  bf16 *dA, *dB;
  float *dD;
  CUDA_CHECK(cudaMalloc(&dA, n * 2));
  CUDA_CHECK(cudaMalloc(&dB, n * 2));
  CUDA_CHECK(cudaMalloc(&dD, n * 4));
  CUDA_CHECK(cudaMemcpy(dA, hA, n * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dB, hB, n * 2, cudaMemcpyHostToDevice));
  static float got[5][64 * 64];
  const char *names[5] = {"ss_kk", "rs_mn", "ss_mm", "mma.sync ss_kk", "ss_mm_n32"};
  int bad = 0;
  for (int mode = 0; mode < 5; mode++) {
    CUDA_CHECK(cudaMemset(dD, 0xff, n * 4));
    probe_kernel<<<1, 128>>>(mode, dA, dB, dD);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(got[mode], dD, n * 4, cudaMemcpyDeviceToHost));
    double maxerr = 0, maxref = 0;
    for (int r = 0; r < 64; r++)
      for (int c = 0; c < 64; c++) {
        double ref = 0;
        for (int k = 0; k < 64; k++) {
          const double a = mode == 2 || mode == 4 ? bf16_to_float(hA[k * 64 + r])
                                                  : bf16_to_float(hA[r * 64 + k]);
          const double b = mode == 0 || mode == 3 ? bf16_to_float(hB[c * 64 + k])
                                                  : bf16_to_float(hB[k * 64 + c]);
          ref += a * b;
        }
        const double e = fabs(ref - got[mode][r * 64 + c]);
        if (!(e <= maxerr)) maxerr = e; /* NaN counts */
        if (fabs(ref) > maxref) maxref = fabs(ref);
      }
    const int ok = maxerr <= 1e-3 * maxref;
    bad += !ok;
    printf("wgmma_probe %-15s max |err| %.3g (max |ref| %.3g) %s\n", names[mode], maxerr, maxref,
           ok ? "ok" : "WRONG");
  }
  printf("wgmma_probe ss_kk vs mma.sync: %s\n",
         memcmp(got[0], got[3], sizeof got[0]) ? "bits differ" : "bitwise equal");
  printf("wgmma_probe ss_mm_n32 vs ss_mm: %s\n",
         memcmp(got[2], got[4], sizeof got[2]) ? "bits differ" : "bitwise equal");
  return bad ? 1 : 0;
}
