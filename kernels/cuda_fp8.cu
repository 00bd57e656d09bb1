/* cuda_fp8.cu — the FP8 (E4M3) ops of ops.h besides the GEMM (cuda_gemm.cu):
 * the scaled cast to e4m3 bytes and the running amax.
 *
 * The cast is rc_e4m3_encode(x * scale) (numeric.h, compiled for the device)
 * with the multiply in fp32 like the CPU's, so the bytes are the CPU
 * backend's bit for bit. One difference of the hardware is undone: a NaN
 * product on the GPU is the canonical positive NaN, where the CPU keeps the
 * NaN operand (its sign included) and gives the host's default NaN for
 * inf * 0; the sign is all an e4m3 NaN keeps, so the kernels pick the CPU's
 * NaN. Every byte of every destination row is written (zero padding), so a
 * GEMM's k can be padded. The transposed cast goes through 64 x 64 tiles in
 * shared memory: coalesced float reads along the source rows, coalesced
 * 4-byte writes along the destination rows.
 *
 * amax_update folds max|x| into amax[0] on the stream, without a host round
 * trip, in two stages like cuda_reduce.cu's reductions (a block count that
 * depends only on n, fixed trees, no atomics) into a scratch slot of its
 * own. To be bitwise the CPU's also when x holds NaNs, the fold carries the
 * index of the first NaN next to the max of the other values: the CPU's loop
 * stops at its first NaN and keeps |that NaN| (payload and all). */
#include <math.h>

#include "backend/numeric.h"
#include "cuda_common.cuh"

/* ---- cast ---- */

/* rc_e4m3_encode of the CPU's x * scale (see above for the NaN). */
__device__ __forceinline__ uint8_t cast_one(float x, float scale, float default_nan) {
  float y = x * scale;
  if (isnan(y)) y = isnan(x) ? x : isnan(scale) ? scale : default_nan;
  return rc_e4m3_encode(y);
}

/* The host's NaN for an invalid operation (inf * 0): negative on x86, positive
 * on Arm. Computed at run time, through volatile, so it is the host's. */
static float host_default_nan(void) {
  volatile float inf = INFINITY, zero = 0.0f;
  return inf * zero;
}

/* Row-major, not transposed: one thread writes 4 destination bytes of a row
 * (one 4-byte store when vec4_dst), reading their 4 floats (one 16-byte load
 * when vec4_src and the 4 columns are all inside the row). Rows over grid y,
 * 4-byte groups over grid x, both grid-stride. */
__global__ void cast_rows_kernel(uint8_t *dst, int ld_dst, const float *src, int ld_src, int rows,
                                 int cols, float scale, float default_nan, int vec4_src,
                                 int vec4_dst) {
  int groups = (ld_dst + 3) / 4;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const float *s = src + (size_t)r * (size_t)ld_src;
    uint8_t *d = dst + (size_t)r * (size_t)ld_dst;
    for (int g = blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += gridDim.x * blockDim.x) {
      int c = 4 * g;
      uint8_t b[4];
      if (vec4_src && c + 3 < cols) {
        float4 v = *(const float4 *)(s + c);
        b[0] = cast_one(v.x, scale, default_nan), b[1] = cast_one(v.y, scale, default_nan);
        b[2] = cast_one(v.z, scale, default_nan), b[3] = cast_one(v.w, scale, default_nan);
      } else {
        for (int j = 0; j < 4; j++)
          b[j] = c + j < cols ? cast_one(s[c + j], scale, default_nan) : 0;
      }
      if (vec4_dst) { /* ld_dst % 4 == 0: the group lies inside the row */
        *(uint32_t *)(d + c) =
            (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
      } else {
        for (int j = 0; j < 4 && c + j < ld_dst; j++) d[c + j] = b[j];
      }
    }
  }
}

#define TT 64        /* transpose tile: TT source rows x TT source columns */
#define TT_ROWS 4    /* blockDim.y: the block is TT x TT_ROWS threads */
#define TT_STRIDE 68 /* shared row stride in bytes: conflict-free byte stores, 4-aligned rows */

/* Transposed: dst[c, r] = cast(src[r, c]) for r < rows, 0 for rows <= r <
 * ld_dst, over the cols destination rows. A block takes a tile of TT source
 * rows (r0..) and TT source columns (c0..): it reads the tile row by row (a
 * warp reads 32 consecutive floats), casts each element once into shared
 * memory at [c - c0][r - r0] (zero outside the source), then writes TT
 * destination rows of TT bytes, 16 threads per row of 4 bytes each. The
 * tiles along r cover ld_dst, so the padding of every row is written too.
 * Tiles over grid x (r) and y (c), both grid-stride. */
__global__ void __launch_bounds__(TT *TT_ROWS)
    cast_transpose_kernel(uint8_t *dst, int ld_dst, const float *src, int ld_src, int rows,
                          int cols, float scale, float default_nan, int vec4_dst) {
  __shared__ __align__(16) uint8_t tile[TT * TT_STRIDE];
  int tiles_r = (ld_dst + TT - 1) / TT, tiles_c = (cols + TT - 1) / TT;
  int t = threadIdx.y * TT + threadIdx.x; /* 0 .. TT*TT_ROWS-1 */
  int wq = t % 16, wj = t / 16;           /* write phase: 4-byte word wq of tile row wj (+16p) */
  for (int tc = blockIdx.y; tc < tiles_c; tc += gridDim.y) {
    for (int tr = blockIdx.x; tr < tiles_r; tr += gridDim.x) {
      int r0 = tr * TT, c0 = tc * TT;
      int c = c0 + threadIdx.x;
      for (int i = threadIdx.y; i < TT; i += TT_ROWS) {
        int r = r0 + i;
        uint8_t b = 0;
        if (r < rows && c < cols)
          b = cast_one(src[(size_t)r * (size_t)ld_src + c], scale, default_nan);
        tile[threadIdx.x * TT_STRIDE + i] = b;
      }
      __syncthreads();
      for (int j = wj; j < TT; j += TT * TT_ROWS / 16) {
        int dc = c0 + j;      /* destination row */
        int dr = r0 + 4 * wq; /* its first byte of the four */
        if (dc >= cols || dr >= ld_dst) continue;
        const uint8_t *sp = &tile[j * TT_STRIDE + 4 * wq];
        uint8_t *dp = dst + (size_t)dc * (size_t)ld_dst + dr;
        if (vec4_dst) /* ld_dst % 4 == 0 and dr % 4 == 0: all four bytes inside the row */
          *(uint32_t *)dp = *(const uint32_t *)sp;
        else
          for (int k = 0; k < 4 && dr + k < ld_dst; k++) dp[k] = sp[k];
      }
      __syncthreads(); /* the tile is reused by the next iteration */
    }
  }
}

void rc_cuda_cast_e4m3(uint8_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols,
                       float scale, bool transpose) {
  int out_rows = transpose ? cols : rows;
  if (out_rows <= 0 || ld_dst <= 0) return;
  cudaStream_t s = rc_cuda_stream();
  float dn = host_default_nan();
  int vec4_dst = ld_dst % 4 == 0 && ((uintptr_t)dst & 3u) == 0;
  if (!transpose) {
    int vec4_src = ld_src % 4 == 0 && ((uintptr_t)src & 15u) == 0;
    int groups = (ld_dst + 3) / 4, threads = 256;
    unsigned int gx = rc_cdiv((size_t)groups, (size_t)threads);
    unsigned int gy = rows < 65535 ? (unsigned int)rows : 65535u;
    cast_rows_kernel<<<dim3(gx, gy), threads, 0, s>>>(dst, ld_dst, src, ld_src, rows, cols, scale,
                                                      dn, vec4_src, vec4_dst);
  } else {
    int tiles_r = (ld_dst + TT - 1) / TT, tiles_c = (cols + TT - 1) / TT;
    unsigned int gx = tiles_r < 65535 ? (unsigned int)tiles_r : 65535u;
    unsigned int gy = tiles_c < 65535 ? (unsigned int)tiles_c : 65535u;
    cast_transpose_kernel<<<dim3(gx, gy), dim3(TT, TT_ROWS), 0, s>>>(dst, ld_dst, src, ld_src, rows,
                                                                     cols, scale, dn, vec4_dst);
  }
  KERNEL_CHECK();
}

/* ---- amax_update ---- */

#define AMAX_THREADS 256     /* stage-1 block size (a power of two) */
#define AMAX_MAX_BLOCKS 1024 /* also stage 2's block size */
#define AMAX_PER_THREAD 16   /* elements per thread before another block is added */
#define NO_NAN (~0ull)       /* "no NaN seen" as a first-NaN index */

/* |x| as a bit operation: the sign cleared, a NaN's payload kept (fabsf's
 * NaN result is not specified bit for bit on every target). */
__device__ __forceinline__ float abs_bits(float x) {
  return rc_bits_f32(rc_f32_bits(x) & 0x7fffffffu);
}

/* Folds (max of the non-NaN |x|, smallest NaN index) over the block's
 * threads in a fixed tree (blockDim a power of two). Both parts are exact in
 * any order. Thread 0's return values are the block's. */
__device__ void amax_block_fold(float *m, unsigned long long *idx, float *sh_m,
                                unsigned long long *sh_i) {
  sh_m[threadIdx.x] = *m;
  sh_i[threadIdx.x] = *idx;
  __syncthreads();
  for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      float o = sh_m[threadIdx.x + stride];
      unsigned long long oi = sh_i[threadIdx.x + stride];
      if (o > sh_m[threadIdx.x]) sh_m[threadIdx.x] = o;
      if (oi < sh_i[threadIdx.x]) sh_i[threadIdx.x] = oi;
    }
    __syncthreads();
  }
  *m = sh_m[0];
  *idx = sh_i[0];
}

__device__ __forceinline__ void amax_take(float v, unsigned long long i, float *m,
                                          unsigned long long *idx) {
  if (isnan(v)) {
    if (i < *idx) *idx = i;
  } else {
    float a = abs_bits(v);
    if (a > *m) *m = a;
  }
}

/* Stage 1: partial (max, first NaN) of each block's grid-stride share, read
 * as float4 when x is 16-byte aligned (the tail of n % 4 by thread 0 of
 * block 0). */
__global__ void amax_stage1(const float *x, size_t n, int vec4, float *part_m,
                            unsigned long long *part_i) {
  __shared__ float sh_m[AMAX_THREADS];
  __shared__ unsigned long long sh_i[AMAX_THREADS];
  float m = 0.0f; /* every |x| is >= +0 */
  unsigned long long idx = NO_NAN;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (vec4) {
    size_t n4 = n / 4;
    const float4 *x4 = (const float4 *)x;
    for (size_t i = first; i < n4; i += stride) {
      float4 v = x4[i];
      amax_take(v.x, 4 * i, &m, &idx), amax_take(v.y, 4 * i + 1, &m, &idx);
      amax_take(v.z, 4 * i + 2, &m, &idx), amax_take(v.w, 4 * i + 3, &m, &idx);
    }
    if (first == 0)
      for (size_t i = 4 * n4; i < n; i++) amax_take(x[i], i, &m, &idx);
  } else {
    for (size_t i = first; i < n; i += stride) amax_take(x[i], i, &m, &idx);
  }
  amax_block_fold(&m, &idx, sh_m, sh_i);
  if (threadIdx.x == 0) part_m[blockIdx.x] = m, part_i[blockIdx.x] = idx;
}

/* Stage 2, one block: folds the partials, then amax[0] as the CPU's loop
 * would end: amax[0] if it is NaN, else |x[first NaN]| if there is one, else
 * the larger (amax[0] kept on a tie: the CPU replaces it only when a > m). */
__global__ void amax_stage2(float *amax, const float *x, const float *part_m,
                            const unsigned long long *part_i, int nparts) {
  __shared__ float sh_m[AMAX_MAX_BLOCKS];
  __shared__ unsigned long long sh_i[AMAX_MAX_BLOCKS];
  float m = 0.0f;
  unsigned long long idx = NO_NAN;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) {
    if (part_m[i] > m) m = part_m[i];
    if (part_i[i] < idx) idx = part_i[i];
  }
  amax_block_fold(&m, &idx, sh_m, sh_i);
  if (threadIdx.x == 0) {
    float a0 = amax[0];
    if (isnan(a0)) return; /* stays, bits and all */
    if (idx != NO_NAN)
      amax[0] = abs_bits(x[idx]);
    else if (m > a0)
      amax[0] = m;
  }
}

void rc_cuda_amax_update(float *amax, const float *x, size_t n) {
  if (n == 0) return;
  cudaStream_t s = rc_cuda_stream();
  size_t per_block = (size_t)AMAX_THREADS * AMAX_PER_THREAD;
  size_t nb = (n + per_block - 1) / per_block; /* a function of n only */
  int blocks = nb > AMAX_MAX_BLOCKS ? AMAX_MAX_BLOCKS : (int)nb;
  /* scratch: [indices: AMAX_MAX_BLOCKS x 8 bytes][maxima: AMAX_MAX_BLOCKS x 4 bytes] */
  unsigned char *buf =
      (unsigned char *)rc_cuda_scratch(RC_SCRATCH_FP8, (size_t)AMAX_MAX_BLOCKS * 12);
  unsigned long long *part_i = (unsigned long long *)buf;
  float *part_m = (float *)(buf + (size_t)AMAX_MAX_BLOCKS * 8);
  int vec4 = ((uintptr_t)x & 15u) == 0;
  amax_stage1<<<blocks, AMAX_THREADS, 0, s>>>(x, n, vec4, part_m, part_i);
  KERNEL_CHECK();
  amax_stage2<<<1, AMAX_MAX_BLOCKS, 0, s>>>(amax, x, part_m, part_i, blocks);
  KERNEL_CHECK();
}
