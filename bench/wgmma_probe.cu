/* wgmma_probe.cu — the Hopper warpgroup MMA's operand layouts, checked one
 * by one before an attention kernel relies on them.
 *
 * Each case computes one 64 x 64 product (k = 64) with wgmma from 128-byte
 * swizzled shared tiles (the layout cp.async writes in the attention
 * kernels: row r's 16-byte chunk c at chunk c ^ (r % 8) of a 128-byte row),
 * and compares it with a host product in double precision and, where the
 * same k order exists, with mma.sync m16n8k16 bit for bit:
 *   ss_kk  D = A B^T, A [m][k] and B [n][k] both K-major (S = Q K^T)
 *   rs_mn  D = P B, P from registers, B [k][n] MN-major (O = P V)
 *   ss_mm  D = A^T B, A stored [k][m], B [k][n], both MN-major (dQ = dS K)
 *
 *   nvcc -O2 -arch=sm_90a -o wgmma_probe bench/wgmma_probe.cu && ./wgmma_probe
 *
 * Exit status 0 when every case is within 1e-3 relative of the host. */
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                  \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ unsigned smem_u32(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

/* element (r, c) of a [64][64] bf16 tile in the 128-byte swizzle */
__device__ __forceinline__ int sw128(int r, int c) {
  return r * 64 + (((c >> 3) ^ (r & 7)) << 3) + (c & 7);
}

/* sm90 matrix descriptor: start, both byte offsets 1024 (one 8-row group of
 * 128-byte rows; the only stride a 64-wide tile needs in either major), 128B swizzle */
__device__ __forceinline__ uint64_t desc_sw128(const void *p) {
  const uint64_t a = smem_u32(p);
  return ((a & 0x3FFFF) >> 4) | ((uint64_t)(1024 >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}

#define WG_D32                                                                                     \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"    \
  "%25,%26,%27,%28,%29,%30,%31}"
#define WG_D32_OPS(d)                                                                              \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),     \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),   \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),   \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

template <int TA, int TB>
__device__ __forceinline__ void wgmma_ss(float d[32], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_D32
               ", %32, %33, p, 1, 1, %34, %35;\n}\n"
               : WG_D32_OPS(d)
               : "l"(da), "l"(db), "n"(TA), "n"(TB));
}
template <int TB>
__device__ __forceinline__ void wgmma_rs(float d[32], const unsigned a[4], uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_D32
               ", {%32,%33,%34,%35}, %36, p, 1, 1, %37;\n}\n"
               : WG_D32_OPS(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB));
}
__device__ __forceinline__ void wg_fence(void) {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit_wait(void) {
  asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
__device__ __forceinline__ void mma_bf16(float c[4], const unsigned a[4], unsigned b0,
                                         unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned pack2(bf16 lo, bf16 hi) {
  return (unsigned)__bfloat16_as_ushort(lo) | (unsigned)__bfloat16_as_ushort(hi) << 16;
}

/* the accumulator's element e of n-tile i for thread lane of warp w: row, col */
__device__ __forceinline__ void acc_rc(int w, int lane, int i, int e, int *r, int *c) {
  *r = 16 * w + lane / 4 + 8 * (e / 2);
  *c = 8 * i + 2 * (lane % 4) + (e & 1);
}

/* mode 0: ss_kk, 1: rs_mn, 2: ss_mm; 3: ss_kk by mma.sync (A, B row-major [m][k], [n][k]) */
__global__ void probe_kernel(int mode, const bf16 *A, const bf16 *B, float *D) {
  __shared__ __align__(1024) bf16 As[64 * 64];
  __shared__ __align__(1024) bf16 Bs[64 * 64];
  const int tid = threadIdx.x, w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int i = tid; i < 64 * 64; i += 128) {
    As[sw128(i / 64, i % 64)] = A[i];
    Bs[sw128(i / 64, i % 64)] = B[i];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  float d[32];
  for (int i = 0; i < 32; i++) d[i] = 0.0f;
  if (mode == 0) { /* A [m][k], B [n][k]: k-steps at +32 bytes */
    wg_fence();
    for (int kk = 0; kk < 4; kk++)
      wgmma_ss<0, 0>(d, desc_sw128(As + 16 * kk), desc_sw128(Bs + 16 * kk));
    wg_commit_wait();
  } else if (mode == 1) { /* A [m][k] from registers, B [k][n]: k-steps at +16 rows */
    unsigned a[4][4];
    for (int kk = 0; kk < 4; kk++) {
      const int r0 = 16 * w + g, c0 = 16 * kk + 2 * t;
      a[kk][0] = pack2(A[r0 * 64 + c0], A[r0 * 64 + c0 + 1]);
      a[kk][1] = pack2(A[(r0 + 8) * 64 + c0], A[(r0 + 8) * 64 + c0 + 1]);
      a[kk][2] = pack2(A[r0 * 64 + c0 + 8], A[r0 * 64 + c0 + 9]);
      a[kk][3] = pack2(A[(r0 + 8) * 64 + c0 + 8], A[(r0 + 8) * 64 + c0 + 9]);
    }
    wg_fence();
    for (int kk = 0; kk < 4; kk++) wgmma_rs<1>(d, a[kk], desc_sw128(Bs + 16 * 64 * kk));
    wg_commit_wait();
  } else if (mode == 2) { /* A stored [k][m], B [k][n]: both transposed, k-steps at +16 rows */
    wg_fence();
    for (int kk = 0; kk < 4; kk++)
      wgmma_ss<1, 1>(d, desc_sw128(As + 16 * 64 * kk), desc_sw128(Bs + 16 * 64 * kk));
    wg_commit_wait();
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
        mma_bf16(d + 4 * i, a, b0, b1);
      }
  }
  for (int i = 0; i < 8; i++)
    for (int e = 0; e < 4; e++) {
      int r, c;
      acc_rc(w, lane, i, e, &r, &c);
      D[r * 64 + c] = d[4 * i + e];
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
  CHECK(cudaMalloc(&dA, n * 2));
  CHECK(cudaMalloc(&dB, n * 2));
  CHECK(cudaMalloc(&dD, n * 4));
  CHECK(cudaMemcpy(dA, hA, n * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, hB, n * 2, cudaMemcpyHostToDevice));
  static float got[4][64 * 64];
  const char *names[4] = {"ss_kk", "rs_mn", "ss_mm", "mma.sync ss_kk"};
  int bad = 0;
  for (int mode = 0; mode < 4; mode++) {
    CHECK(cudaMemset(dD, 0xff, n * 4));
    probe_kernel<<<1, 128>>>(mode, dA, dB, dD);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(got[mode], dD, n * 4, cudaMemcpyDeviceToHost));
    double maxerr = 0, maxref = 0;
    for (int r = 0; r < 64; r++)
      for (int c = 0; c < 64; c++) {
        double ref = 0;
        for (int k = 0; k < 64; k++) {
          const double a =
              mode == 2 ? bf16_to_float(hA[k * 64 + r]) : bf16_to_float(hA[r * 64 + k]);
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
  return bad ? 1 : 0;
}
