/* cuda_elementwise.cu — the elementwise ops: rounding to bf16/fp16 (in
 * fp32 or into 16-bit storage), add, scale, 2-D copy, SwiGLU and dropout.
 *
 * Rounding and dropout use numeric.h, compiled for the device, so they are
 * bit-identical to the CPU backend; SwiGLU is element_math.h's, the CPU's
 * expressions (its expf is the device's, within tolerance of the host's). Each element is computed
 * independently (grid-stride loops), so results do not depend on the launch shape. */
#include "backend/element_math.h"
#include "backend/numeric.h"
#include "cuda_common.cuh"

#define EW_THREADS 256

#define GRID_STRIDE(i, n)                                                                          \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                          \
       i += (size_t)gridDim.x * blockDim.x)

__global__ void round_bf16_kernel(float *dst, const float *src, size_t n) {
  GRID_STRIDE(i, n) dst[i] = rc_round_bf16(src[i]);
}
__global__ void round_fp16_kernel(float *dst, const float *src, size_t n) {
  GRID_STRIDE(i, n) dst[i] = rc_round_fp16(src[i]);
}

void rc_cuda_round_to(float *dst, const float *src, size_t n, rc_compute ct) {
  if (n == 0) return;
  cudaStream_t s = rc_cuda_stream();
  if (ct == RC_COMPUTE_BF16) {
    round_bf16_kernel<<<rc_grid_1d(n, EW_THREADS), EW_THREADS, 0, s>>>(dst, src, n);
    KERNEL_CHECK();
  } else if (ct == RC_COMPUTE_FP16) {
    round_fp16_kernel<<<rc_grid_1d(n, EW_THREADS), EW_THREADS, 0, s>>>(dst, src, n);
    KERNEL_CHECK();
  } else if (dst != src) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
  }
}

/* cast_half: four elements a thread from one 16-byte load where src is
 * 16-byte aligned (every model buffer is), element by element otherwise;
 * either way each output is numeric.h's encoding of its own input. */
template <bool FP16> __device__ __forceinline__ uint16_t encode_half(float x) {
  return FP16 ? rc_fp16_encode(x) : rc_bf16_encode(x);
}
template <bool FP16> __global__ void cast_half_kernel(uint16_t *dst, const float *src, size_t n) {
  GRID_STRIDE(i, n) dst[i] = encode_half<FP16>(src[i]);
}
template <bool FP16> __global__ void cast_half4_kernel(ushort4 *dst, const float4 *src, size_t n4) {
  GRID_STRIDE(i, n4) {
    float4 x = src[i];
    dst[i] = make_ushort4(encode_half<FP16>(x.x), encode_half<FP16>(x.y), encode_half<FP16>(x.z),
                          encode_half<FP16>(x.w));
  }
}

void rc_cuda_cast_half(uint16_t *dst, const float *src, size_t n, rc_compute ct) {
  if (n == 0) return;
  cudaStream_t s = rc_cuda_stream();
  bool fp16 = ct == RC_COMPUTE_FP16;
  if (n % 4 == 0 && ((uintptr_t)src & 15u) == 0 && ((uintptr_t)dst & 7u) == 0) {
    size_t n4 = n / 4;
    if (fp16)
      cast_half4_kernel<true><<<rc_grid_1d(n4, EW_THREADS), EW_THREADS, 0, s>>>(
          (ushort4 *)dst, (const float4 *)src, n4);
    else
      cast_half4_kernel<false><<<rc_grid_1d(n4, EW_THREADS), EW_THREADS, 0, s>>>(
          (ushort4 *)dst, (const float4 *)src, n4);
  } else if (fp16) {
    cast_half_kernel<true><<<rc_grid_1d(n, EW_THREADS), EW_THREADS, 0, s>>>(dst, src, n);
  } else {
    cast_half_kernel<false><<<rc_grid_1d(n, EW_THREADS), EW_THREADS, 0, s>>>(dst, src, n);
  }
  KERNEL_CHECK();
}

__global__ void add_kernel(float *out, const float *a, const float *b, size_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

/* The same sums four at a time from 16-byte loads (every model buffer is
 * 16-byte aligned): one 4-byte load a thread kept too few bytes in flight
 * to reach the memory bandwidth. Each element is still a[i] + b[i]. */
__global__ void add4_kernel(float4 *out, const float4 *a, const float4 *b, size_t n4) {
  GRID_STRIDE(i, n4) {
    float4 x = a[i], y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

void rc_cuda_add(float *out, const float *a, const float *b, size_t n) {
  if (n == 0) return;
  cudaStream_t s = rc_cuda_stream();
  if ((((uintptr_t)out | (uintptr_t)a | (uintptr_t)b) & 15u) == 0 && n >= 4) {
    size_t n4 = n / 4;
    add4_kernel<<<rc_grid_1d(n4, EW_THREADS), EW_THREADS, 0, s>>>((float4 *)out, (const float4 *)a,
                                                                  (const float4 *)b, n4);
    KERNEL_CHECK();
    if (n % 4 == 0) return;
    out += 4 * n4, a += 4 * n4, b += 4 * n4, n -= 4 * n4; /* the last one to three */
  }
  add_kernel<<<rc_grid_1d(n, EW_THREADS), EW_THREADS, 0, s>>>(out, a, b, n);
  KERNEL_CHECK();
}

__global__ void scale_kernel(float *x, float s, size_t n) {
  GRID_STRIDE(i, n) x[i] *= s;
}

void rc_cuda_scale(float *x, float s, size_t n) {
  if (n == 0) return;
  scale_kernel<<<rc_grid_1d(n, EW_THREADS), EW_THREADS, 0, rc_cuda_stream()>>>(x, s, n);
  KERNEL_CHECK();
}

void rc_cuda_copy2d(float *dst, int ld_dst, const float *src, int ld_src, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)ld_dst * sizeof(float), src,
                               (size_t)ld_src * sizeof(float), (size_t)cols * sizeof(float),
                               (size_t)rows, cudaMemcpyDeviceToDevice, rc_cuda_stream()));
}

/* SwiGLU per element: backend/element_math.h, the CPU backend's expressions. */
/* SwiGLU: a block per row (rows strided over the grid), threads across the
 * row's F columns, four at a time from 16-byte loads when every row is
 * 16-byte aligned: no per-element index division (64-bit division made these
 * kernels 3-4x slower than their memory traffic). Each element is
 * element_math.h's expression of its own inputs, so the bits do not depend
 * on the layout. The fp32 result and/or its 16-bit encoding (ops.h) are
 * stored as asked. */
template <bool FP16> __device__ __forceinline__ ushort4 encode_half4(float4 v) {
  return make_ushort4(encode_half<FP16>(v.x), encode_half<FP16>(v.y), encode_half<FP16>(v.z),
                      encode_half<FP16>(v.w));
}

/* element i (four from i, 4-aligned) of an fp32 input, or of a 16-bit one
 * decoded exactly: the same values either way */
template <bool FP16, bool HALF_IN>
__device__ __forceinline__ float4 load4(const float *f, const uint16_t *h, size_t i) {
  if (HALF_IN) {
    ushort4 v = *(const ushort4 *)(h + i);
    return make_float4(rc_half_decode(v.x, FP16), rc_half_decode(v.y, FP16),
                       rc_half_decode(v.z, FP16), rc_half_decode(v.w, FP16));
  }
  return *(const float4 *)(f + i);
}
template <bool FP16, bool HALF_IN>
__device__ __forceinline__ float load1(const float *f, const uint16_t *h, size_t i) {
  return HALF_IN ? rc_half_decode(h[i], FP16) : f[i];
}

template <bool FP16, bool HALF_IN>
__global__ void swiglu_forward_kernel(float *out, const float *in, const uint16_t *in_half, int T,
                                      int F, int vec, uint16_t *out_half) {
  for (size_t t = blockIdx.x; t < (size_t)T; t += gridDim.x) {
    const size_t g = t * 2 * (size_t)F, u = g + F; /* the row's gate and up, in elements */
    float *o = out ? out + t * (size_t)F : NULL;
    uint16_t *oh = out_half ? out_half + t * (size_t)F : NULL;
    if (vec) {
      for (int j = 4 * threadIdx.x; j < F; j += 4 * blockDim.x) {
        float4 gv = load4<FP16, HALF_IN>(in, in_half, g + j);
        float4 uv = load4<FP16, HALF_IN>(in, in_half, u + j);
        float4 r = make_float4(
            rc_swiglu_forward_element(gv.x, uv.x), rc_swiglu_forward_element(gv.y, uv.y),
            rc_swiglu_forward_element(gv.z, uv.z), rc_swiglu_forward_element(gv.w, uv.w));
        if (o) *(float4 *)(o + j) = r;
        if (oh) *(ushort4 *)(oh + j) = encode_half4<FP16>(r);
      }
    } else {
      for (int j = threadIdx.x; j < F; j += blockDim.x) {
        float r = rc_swiglu_forward_element(load1<FP16, HALF_IN>(in, in_half, g + j),
                                            load1<FP16, HALF_IN>(in, in_half, u + j));
        if (o) o[j] = r;
        if (oh) oh[j] = encode_half<FP16>(r);
      }
    }
  }
}

template <bool FP16, bool HALF_IN>
__global__ void swiglu_backward_kernel(float *din, const float *dout, const float *in,
                                       const uint16_t *in_half, int T, int F, int vec,
                                       uint16_t *din_half, uint16_t *out_half) {
  for (size_t t = blockIdx.x; t < (size_t)T; t += gridDim.x) {
    const size_t g = t * 2 * (size_t)F, u = g + F;
    const float *d = dout + t * (size_t)F;
    float *dg = din ? din + t * 2 * (size_t)F : NULL, *du = dg ? dg + F : NULL;
    uint16_t *hg = din_half ? din_half + t * 2 * (size_t)F : NULL, *hu = hg ? hg + F : NULL;
    uint16_t *oh = out_half ? out_half + t * (size_t)F : NULL; /* the forward's, recomputed */
    if (vec) {
      for (int j = 4 * threadIdx.x; j < F; j += 4 * blockDim.x) {
        float4 gv = load4<FP16, HALF_IN>(in, in_half, g + j);
        float4 uv = load4<FP16, HALF_IN>(in, in_half, u + j);
        float4 dv = *(const float4 *)(d + j), dgv, duv;
        rc_swiglu_backward_element(&dgv.x, &duv.x, gv.x, uv.x, dv.x);
        rc_swiglu_backward_element(&dgv.y, &duv.y, gv.y, uv.y, dv.y);
        rc_swiglu_backward_element(&dgv.z, &duv.z, gv.z, uv.z, dv.z);
        rc_swiglu_backward_element(&dgv.w, &duv.w, gv.w, uv.w, dv.w);
        if (dg) *(float4 *)(dg + j) = dgv, *(float4 *)(du + j) = duv;
        if (hg)
          *(ushort4 *)(hg + j) = encode_half4<FP16>(dgv),
                            *(ushort4 *)(hu + j) = encode_half4<FP16>(duv);
        if (oh)
          *(ushort4 *)(oh + j) = encode_half4<FP16>(make_float4(
              rc_swiglu_forward_element(gv.x, uv.x), rc_swiglu_forward_element(gv.y, uv.y),
              rc_swiglu_forward_element(gv.z, uv.z), rc_swiglu_forward_element(gv.w, uv.w)));
      }
    } else {
      for (int j = threadIdx.x; j < F; j += blockDim.x) {
        float a, b;
        const float gj = load1<FP16, HALF_IN>(in, in_half, g + j),
                    uj = load1<FP16, HALF_IN>(in, in_half, u + j);
        rc_swiglu_backward_element(&a, &b, gj, uj, d[j]);
        if (dg) dg[j] = a, du[j] = b;
        if (hg) hg[j] = encode_half<FP16>(a), hu[j] = encode_half<FP16>(b);
        if (oh) oh[j] = encode_half<FP16>(rc_swiglu_forward_element(gj, uj));
      }
    }
  }
}

/* The 16-bit-input forward (fc1's gemm_to_half output, the model's path) with
 * eight elements a thread from one 16-byte load of gate and of up, where
 * F % 8 == 0 and the rows are 16-byte aligned: at gpu-small (F = 2048) a
 * thread's one load pair covers its share of the row, twice the bytes in
 * flight of the four-at-a-time path above, which stayed at ~60-70% of the
 * bandwidth (ncu, session 25: 47.5 us a call on the H100 for 96 MB; on the
 * H200, session 26: 0.0379 -> 0.0360 ms a dense call, event-timed; the same
 * form of the backward measured 0.0631 -> 0.0642 and was not kept). Each element is the same
 * element_math.h expression of the same decoded inputs, so the bits are the other paths' (cuda_ops
 * compares the 16-bit input's outputs bitwise with its decoded fp32 input's). */
template <bool FP16> __device__ __forceinline__ void decode_half8(float v[8], uint4 w) {
  const unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    v[2 * i] = rc_half_decode((uint16_t)(u[i] & 0xffffu), FP16);
    v[2 * i + 1] = rc_half_decode((uint16_t)(u[i] >> 16), FP16);
  }
}
template <bool FP16> __device__ __forceinline__ uint4 encode_half8(const float v[8]) {
  unsigned u[4];
#pragma unroll
  for (int i = 0; i < 4; i++)
    u[i] = (unsigned)encode_half<FP16>(v[2 * i]) | (unsigned)encode_half<FP16>(v[2 * i + 1]) << 16;
  return make_uint4(u[0], u[1], u[2], u[3]);
}
/* 16-byte stores said explicitly (__stwb: the default write-back store): as
 * plain stores through a cast pointer these kernels' came out as 4-byte ones
 * in the PTX */
__device__ __forceinline__ void store_float8(float *dst, const float v[8]) {
  __stwb((float4 *)dst, make_float4(v[0], v[1], v[2], v[3]));
  __stwb((float4 *)(dst + 4), make_float4(v[4], v[5], v[6], v[7]));
}
__device__ __forceinline__ void store_half8(uint16_t *dst, uint4 w) {
  __stwb((uint4 *)dst, w);
}

template <bool FP16>
__global__ void swiglu_forward_half8_kernel(float *out, const uint16_t *in_half, int T, int F,
                                            uint16_t *out_half) {
  for (size_t t = blockIdx.x; t < (size_t)T; t += gridDim.x) {
    const uint16_t *gr = in_half + t * 2 * (size_t)F, *ur = gr + F;
    for (int j = 8 * threadIdx.x; j < F; j += 8 * blockDim.x) {
      const uint4 gw = *(const uint4 *)(gr + j), uw = *(const uint4 *)(ur + j);
      float g[8], u[8], r[8];
      decode_half8<FP16>(g, gw);
      decode_half8<FP16>(u, uw);
#pragma unroll
      for (int e = 0; e < 8; e++) r[e] = rc_swiglu_forward_element(g[e], u[e]);
      if (out) store_float8(out + t * (size_t)F + j, r);
      if (out_half) store_half8(out_half + t * (size_t)F + j, encode_half8<FP16>(r));
    }
  }
}

/* threads a SwiGLU block (a row): a tuning constant a variant build may set
 * (bench/build_variants.sh); every element is computed alike whatever it is */
#ifndef SWIGLU_THREADS
#define SWIGLU_THREADS EW_THREADS
#endif

/* Rows per launch: enough blocks to fill the GPU several times over. */
static unsigned int swiglu_grid(int T) {
  return (unsigned int)(T < 65535 ? T : 65535);
}

/* The vector path when F % 4 == 0 and every operand is aligned for four
 * elements at a time: 16 bytes for fp32, 8 for 16-bit; NULL ones do not
 * count. */
static int swiglu_vec(int F, const void *a, const void *b, const void *c, const void *half,
                      const void *half_in) {
  return F % 4 == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15u) == 0 &&
         (((uintptr_t)half | (uintptr_t)half_in) & 7u) == 0;
}

/* launches KERNEL<FP16, HALF_IN> for ct and whether the input is 16-bit */
#define SWIGLU_LAUNCH(KERNEL, fp16, half_in, ...)                                                  \
  do {                                                                                             \
    dim3 grid(swiglu_grid(T)), block(SWIGLU_THREADS);                                              \
    cudaStream_t s_ = rc_cuda_stream();                                                            \
    if (fp16 && half_in)                                                                           \
      KERNEL<true, true><<<grid, block, 0, s_>>>(__VA_ARGS__);                                     \
    else if (fp16)                                                                                 \
      KERNEL<true, false><<<grid, block, 0, s_>>>(__VA_ARGS__);                                    \
    else if (half_in)                                                                              \
      KERNEL<false, true><<<grid, block, 0, s_>>>(__VA_ARGS__);                                    \
    else                                                                                           \
      KERNEL<false, false><<<grid, block, 0, s_>>>(__VA_ARGS__);                                   \
    KERNEL_CHECK();                                                                                \
  } while (0)

/* the forward's eight-wide 16-bit-input path: F % 8 == 0 and every operand
 * (NULL ones aside) 16-byte aligned */
static bool swiglu_half8(int F, const void *a, const void *b, const void *c) {
  return F % 8 == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15u) == 0;
}

void rc_cuda_swiglu_forward(float *out, const float *in, const uint16_t *in_half, int T, int F,
                            uint16_t *out_half, rc_compute ct) {
  if ((size_t)T * (size_t)F == 0) return;
  const uint16_t *hin = in ? NULL : in_half;
  if (hin && swiglu_half8(F, hin, out, out_half)) {
    if (ct == RC_COMPUTE_FP16)
      swiglu_forward_half8_kernel<true>
          <<<swiglu_grid(T), SWIGLU_THREADS, 0, rc_cuda_stream()>>>(out, hin, T, F, out_half);
    else
      swiglu_forward_half8_kernel<false>
          <<<swiglu_grid(T), SWIGLU_THREADS, 0, rc_cuda_stream()>>>(out, hin, T, F, out_half);
    KERNEL_CHECK();
    return;
  }
  int vec = swiglu_vec(F, out, in, in, out_half, hin);
  SWIGLU_LAUNCH(swiglu_forward_kernel, ct == RC_COMPUTE_FP16, hin != NULL, out, in, hin, T, F, vec,
                out_half);
}

void rc_cuda_swiglu_backward(float *din, const float *dout, const float *in,
                             const uint16_t *in_half, int T, int F, uint16_t *din_half,
                             uint16_t *out_half, rc_compute ct) {
  if ((size_t)T * (size_t)F == 0) return;
  const uint16_t *hin = in ? NULL : in_half;
  int vec = swiglu_vec(F, din, dout, in, din_half, hin) &&
            ((uintptr_t)out_half & 7u) == 0; /* NULL counts as aligned */
  SWIGLU_LAUNCH(swiglu_backward_kernel, ct == RC_COMPUTE_FP16, hin != NULL, din, dout, in, hin, T,
                F, vec, din_half, out_half);
}
#undef SWIGLU_LAUNCH

/* One thread per Philox block: the four words of block (offset + g) decide
 * elements 4g..4g+3, exactly as rc_dropout_keep does per element. */
__global__ void dropout_kernel(float *x, size_t n, float p, uint64_t seed, uint64_t offset) {
  size_t groups = (n + 3) / 4;
  float keep_scale = 1.0f - p;
  GRID_STRIDE(g, groups) {
    rc_philox4 r = rc_philox4x32(seed, 0, offset + (uint64_t)g);
    for (int w = 0; w < 4; w++) {
      size_t i = 4 * g + (size_t)w;
      if (i >= n) break;
      int keep = rc_uniform01(r.v[w]) >= p;
      x[i] = keep ? x[i] / keep_scale : 0.0f;
    }
  }
}

void rc_cuda_dropout(float *x, size_t n, float p, uint64_t seed, uint64_t offset) {
  if (n == 0) return;
  size_t groups = (n + 3) / 4;
  dropout_kernel<<<rc_grid_1d(groups, EW_THREADS), EW_THREADS, 0, rc_cuda_stream()>>>(x, n, p, seed,
                                                                                      offset);
  KERNEL_CHECK();
}
