/* cuda_wgmma.cuh — Hopper's warpgroup MMA for 64 x 64 bf16 tiles in the
 * 128-byte swizzle: the tile layout, its matrix descriptor, the three operand
 * forms the attention kernels use (cuda_attention_wgmma.cu) and the fences.
 * bench/wgmma_probe.cu checks these very wrappers, one layout at a time.
 *
 * wgmma exists only in sm_90a code; compiled for anything else the wrappers
 * are empty and RC_WGMMA_CODE is 0 (the caller learns which code loaded and
 * never launches a kernel built on empty wrappers). */
#ifndef RC_KERNELS_CUDA_WGMMA_CUH
#define RC_KERNELS_CUDA_WGMMA_CUH

#include <stdint.h>

#include "cuda_attention_bf16.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define RC_WGMMA_CODE 1
#else
#define RC_WGMMA_CODE 0
#endif

/* ---- wgmma building blocks (PTX ISA, "Asynchronous Warpgroup Level Matrix
 * Multiply-Accumulate"; the descriptor's bit fields: "Matrix Descriptor
 * Format") ---- */

/* The first 1024-byte boundary in a kernel's dynamic shared memory (the
 * swizzle is a function of address bits: tiles start 1024-aligned), as an
 * offset from raw so the pointer stays a shared one: aligned through an
 * integer, the compiler lost that and issued generic loads and stores for
 * every shared access the kernels make outside the async copies. */
__device__ __forceinline__ unsigned char *smem_align1024(unsigned char *raw) {
  return raw + ((1024u - (smem_addr(raw) & 1023u)) & 1023u);
}

/* element (r, c) of a [64][64] bf16 tile in the 128-byte swizzle */
__device__ __forceinline__ int sw128(int r, int c) {
  return r * 64 + (((c >> 3) ^ (r & 7)) << 3) + (c & 7);
}

/* The descriptor of a 128-byte-swizzled tile from p (p's tile 1024-byte
 * aligned; p itself may sit 32-byte k-steps into a K-major row or 16-row
 * k-steps down an MN-major tile). Both byte offsets are 1024, one group of
 * eight 128-byte rows: the stride between 8-row groups, the only one a 64-wide
 * tile has in either major, whichever of the two fields the hardware reads. */
__device__ __forceinline__ uint64_t desc_sw128(const void *p) {
  const uint64_t a = smem_addr(p);
  return ((a & 0x3FFFF) >> 4) | ((uint64_t)(1024 >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}

#define WG_D32                                                                                     \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"    \
  "%25,%26,%27,%28,%29,%30,%31}"
#define WG_D32_OPS(d)                                                                              \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),        \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),    \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),    \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),    \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),    \
      "+f"(d[7][2]), "+f"(d[7][3])

/* d (the warpgroup's 64 x 64 fp32 tile, this thread's 8 x 4) += A B, A
 * [64 m][16 k] and B [64 n][16 k] both K-major in shared memory; ACC false:
 * d = A B (the first k-step of a product: no zeroed registers, whose writes
 * the compiler may place after the fence and so make it fence again) */
template <bool ACC = true>
__device__ __forceinline__ void wgmma_ss_kk(float d[8][4], uint64_t da, uint64_t db) {
#if RC_WGMMA_CODE
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_D32
               ", %32, %33, p, 1, 1, 0, 0;\n}\n"
               : WG_D32_OPS(d)
               : "l"(da), "l"(db), "n"(ACC ? 1 : 0));
#else
  (void)d, (void)da, (void)db;
#endif
}

/* d = A B^T over a 64-wide k: four k-steps of 16 in increasing k (the
 * first without accumulating), A [64 m][64 k] and B [64 n][64 k] swizzled
 * K-major tiles. A score tile: S = Q K^T, S^T = K Q^T, dP^T = V dO^T. */
__device__ __forceinline__ void wgmma_tile_kk(float d[8][4], const bf16 *a, const bf16 *b) {
  wgmma_ss_kk<false>(d, desc_sw128(a), desc_sw128(b));
#pragma unroll
  for (int kk = 1; kk < 4; kk++) /* k-steps of 16 head dims: 32 bytes along the rows */
    wgmma_ss_kk(d, desc_sw128(a + 16 * kk), desc_sw128(b + 16 * kk));
}

/* d += A B, A [64 m][16 k] from registers (mma.sync's A layout, warp w
 * holding rows 16w..16w+15), B [16 k][64 n] MN-major in shared memory */
__device__ __forceinline__ void wgmma_rs_mn(float d[8][4], const unsigned a[4], uint64_t db) {
#if RC_WGMMA_CODE
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_D32
               ", {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
               : WG_D32_OPS(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#else
  (void)d, (void)a, (void)db;
#endif
}

/* d += A B, A [16 k][64 m] and B [16 k][64 n] both MN-major in shared memory
 * (the transposes of their stored tiles: dQ = dS K from dS^T's tile) */
template <bool ACC = true>
__device__ __forceinline__ void wgmma_ss_mm(float d[8][4], uint64_t da, uint64_t db) {
#if RC_WGMMA_CODE
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_D32
               ", %32, %33, p, 1, 1, 1, 1;\n}\n"
               : WG_D32_OPS(d)
               : "l"(da), "l"(db), "n"(ACC ? 1 : 0));
#else
  (void)d, (void)da, (void)db;
#endif
}

/* d (a 64 x 32 fp32 tile, this thread's 4 x 4) += A B as wgmma_ss_mm with
 * n = 32: B's 32 columns from db, which may start 64 bytes into the tile's
 * rows (columns 32..63: the swizzle is applied to the address, as for a
 * K-major k-step). Two warpgroups split dQ = dS K by columns this way, each
 * summing all of a block's keys in one chain. */
template <bool ACC = true>
__device__ __forceinline__ void wgmma_ss_mm_n32(float d[4][4], uint64_t da, uint64_t db) {
#if RC_WGMMA_CODE
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
               ", %16, %17, p, 1, 1, 1, 1;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),
                 "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),
                 "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),
                 "+f"(d[3][3])
               : "l"(da), "l"(db), "n"(ACC ? 1 : 0));
#else
  (void)d, (void)da, (void)db;
#endif
}

/* Registers written by ordinary instructions become wgmma operands only
 * after this fence; commit then wait 0 makes the group's results readable. */
__device__ __forceinline__ void wgmma_fence(void) {
#if RC_WGMMA_CODE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit(void) {
#if RC_WGMMA_CODE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_wait(void) {
#if RC_WGMMA_CODE
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
/* every group but the last committed */
__device__ __forceinline__ void wgmma_wait_all_but_last(void) {
#if RC_WGMMA_CODE
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit_wait(void) {
  wgmma_commit();
  wgmma_wait();
}
/* shared memory written by cp.async (the generic proxy) made visible to
 * wgmma's reads (the async proxy); a barrier follows */
__device__ __forceinline__ void fence_proxy_async(void) {
#if RC_WGMMA_CODE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

#endif
