/* cuda_common.cuh — what every file of the CUDA backend shares: error-check
 * macros, the process-wide context (one stream, one cuBLASLt handle, a fixed
 * GEMM workspace, named scratch buffers), launch helpers and the declarations
 * of the host launchers that cuda_ops.cu assembles into the rc_ops struct.
 *
 * Determinism rules for everything under kernels/ (docs/design.md §3.4):
 *  - one stream, so every op runs in call order and scratch buffers can be
 *    reused by the next op without further synchronisation;
 *  - no floating-point atomics; every reduction has a partition that depends
 *    only on the problem size (never on the SM count or timing) and combines
 *    partials in a fixed tree order;
 *  - the file is compiled with --fmad=false, so a*b+c rounds twice like the
 *    CPU reference; kernels that want FMA speed ask for fmaf() explicitly. */
#ifndef RC_KERNELS_CUDA_COMMON_CUH
#define RC_KERNELS_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"

/* ---- error checking: every failure is fatal (ops return no status) ---- */
static inline void rc_cuda_check(cudaError_t err, const char *what, const char *file, int line) {
  if (err != cudaSuccess) {
    fprintf(stderr, "resumecheck: CUDA error at %s:%d: %s: %s\n", file, line, what,
            cudaGetErrorString(err));
    abort();
  }
}
static inline void rc_cublas_check(cublasStatus_t st, const char *what, const char *file,
                                   int line) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "resumecheck: cuBLAS error at %s:%d: %s: %s\n", file, line, what,
            cublasLtGetStatusString(st));
    abort();
  }
}
#define CUDA_CHECK(call) rc_cuda_check((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) rc_cublas_check((call), #call, __FILE__, __LINE__)
/* After every kernel launch: catches bad launch configurations at once. */
#define KERNEL_CHECK() rc_cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

/* ---- the process-wide context (cuda_memory.cu) ----
 * Created lazily on first use; lives until the process ends. */
cudaStream_t rc_cuda_stream(void);
cublasLtHandle_t rc_cuda_lt(void);
/* The fixed cuBLASLt workspace; its size is part of the GEMM algorithm key. */
void *rc_cuda_gemm_workspace(size_t *bytes);

/* Named scratch buffers. Each op family owns a slot; a slot grows (never
 * shrinks) and its contents are valid until the next op that uses the same
 * slot. Safe because everything runs in order on one stream. */
enum {
  RC_SCRATCH_GEMM_A = 0,
  RC_SCRATCH_GEMM_B,
  RC_SCRATCH_GEMM_D,
  RC_SCRATCH_REDUCE,
  RC_SCRATCH_SORT,
  RC_SCRATCH_NORM,
  RC_SCRATCH_ATTN,
  RC_SCRATCH_ATTN_BF16,
  RC_SCRATCH_ATTN_DQ, /* the bf16 backward's dQ partials, one per (query tile, key tile) */
  RC_SCRATCH_MOE,
  RC_SCRATCH_FP8,       /* amax_update's partials */
  RC_SCRATCH_ROPE,      /* RoPE's cos/sin table (keyed by S, hd, theta) */
  RC_SCRATCH_CE,        /* 16-bit logits decoded for cross_entropy's held-row path */
  RC_SCRATCH_ATTN_DQKV, /* the fp32 attention's dqkv before a fused RoPE backward */
  RC_SCRATCH_ADAMW,     /* adamw_many's segments and fingerprint partials */
  RC_SCRATCH_ZERO,      /* zero_many's segments */
  RC_SCRATCH_GROUPED,   /* the grouped GEMM's argument arrays and CUTLASS workspace */
  RC_SCRATCH_COUNT
};
void *rc_cuda_scratch(int slot, size_t bytes);
/* A scratch slot that caches a derived table: *stale is set when the slot
 * does not hold the contents named by key (first use, another key, or grown),
 * and the caller then rebuilds them on the stream; key is recorded. */
void *rc_cuda_scratch_keyed(int slot, size_t bytes, const uint64_t key[2], bool *stale);

/* Synchronous device-to-host copy of a small result (used by the ops that
 * return a host value and therefore synchronise). */
void rc_cuda_read_back(void *dst_host, const void *src, size_t bytes);

/* ---- launch helpers ---- */
static inline unsigned int rc_cdiv(size_t a, size_t b) {
  return (unsigned int)((a + b - 1) / b);
}
/* Kernels above 48 KiB of dynamic shared memory must opt in, once each
 * (*done remembers it per kernel instantiation). */
template <typename K> static void rc_allow_smem(K kernel, size_t bytes, bool *done) {
  if (*done) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  *done = true;
}

/* Row pieces for the kernels that move whole rows a warp at a time (the
 * embedding, the MoE gather and combine): VEC consecutive floats, one float4
 * when every row is 16-byte aligned (rc_rows_vec4), else one float. The
 * arithmetic on a piece is per element, so VEC never changes a result. */
template <int VEC> struct rc_piece {
  float v[VEC];
  __device__ __forceinline__ void load(const float *p) {
    if constexpr (VEC == 4) {
      const float4 f = *(const float4 *)p;
      v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
      for (int e = 0; e < VEC; e++) v[e] = p[e];
    }
  }
  __device__ __forceinline__ void store(float *p) const {
    if constexpr (VEC == 4)
      *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
    else
      for (int e = 0; e < VEC; e++) p[e] = v[e];
  }
};
static inline bool rc_rows_vec4(const void *a, const void *b, int H) {
  return H % 4 == 0 && ((uintptr_t)a & 15) == 0 && ((uintptr_t)b & 15) == 0;
}

/* The batched kernels' segment search (reduce_many, adamw_many): segments
 * sorted by `first`, their first block in the batch, and the index of the
 * last one starting at or before this block — the segment the block works
 * on. One thread asks; the caller shares the answer. */
template <class Seg> __device__ int rc_block_segment(const Seg *seg, int count) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (seg[mid].first <= (int)blockIdx.x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Grid for a 1-D elementwise kernel with a grid-stride loop: the element
 * partition does not affect results (elementwise), only coverage. */
static inline unsigned int rc_grid_1d(size_t n, int threads) {
  size_t blocks = (n + (size_t)threads - 1) / (size_t)threads;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535u * 16u) blocks = 65535u * 16u;
  return (unsigned int)blocks;
}

/* Whether environment variable `name` is `value`, asked once per call site:
 * *state starts at -1 and keeps the answer (a switch that selects a kernel
 * must not change inside a run). */
static inline bool rc_env_once(int *state, const char *name, const char *value) {
  if (*state < 0) {
    const char *e = getenv(name);
    *state = e && !strcmp(e, value);
  }
  return *state == 1;
}

/* The device's SM count, asked once (for grids of one or two blocks an SM). */
static inline int rc_sm_count(void) {
  static int n = 0;
  if (!n) {
    int dev;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  }
  return n;
}

/* ---- host launchers (one file per family) ---- */
/* cuda_memory.cu */
void *rc_cuda_alloc(size_t bytes);
int rc_cuda_alloc_failed(size_t *bytes, char *what, size_t cap);
void rc_cuda_free(void *ptr);
void rc_cuda_to_device(void *dst, const void *src_host, size_t bytes);
void rc_cuda_to_host(void *dst_host, const void *src, size_t bytes);
void *rc_cuda_host_alloc(size_t bytes, int page_locked);
void rc_cuda_host_free(void *ptr, size_t bytes);
void rc_cuda_copy(void *dst, const void *src, size_t bytes);
void rc_cuda_zero(void *dst, size_t bytes);
void rc_cuda_zero_many(void *const *dst, const size_t *bytes, int count);
void rc_cuda_sync(void);
void rc_cuda_timer_mark(int slot);
double rc_cuda_timer_seconds(int from, int to);
int rc_cuda_device_usable(const char **why);
/* The ops table (cuda_ops.cu), NULL with a reason without a usable GPU. */
const rc_ops *rc_cuda_backend_ops(const char **why);

/* cuda_gemm.cu */
void rc_cuda_gemm(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
void rc_cuda_gemm_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                       const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                       int ldc);
void rc_cuda_gemm_half_residual(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                                const uint16_t *A, int lda, const uint16_t *B, int ldb,
                                const float *R, float *C, int ldc);
void rc_cuda_gemm_to_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                          const uint16_t *A, int lda, const uint16_t *B, int ldb, uint16_t *C,
                          int ldc);
void rc_cuda_gemm_half_many(rc_compute ct, bool trans_a, bool trans_b,
                            const rc_gemm_half_call *calls, int count);
/* cuda_gemm_grouped.cu (built with CUTLASS only, RC_HAVE_CUTLASS): the calls
 * as one CUTLASS grouped GEMM; false when it does not take them (the caller
 * then runs them one by one). */
bool rc_cuda_gemm_grouped(rc_compute ct, bool trans_a, bool trans_b, const rc_gemm_half_call *calls,
                          int count);
/* which kernels run the expert GEMMs, for the module's description */
const char *rc_cuda_grouped_gemm_path(void);
void rc_cuda_gemm_e4m3(int m, int n, int k, float alpha, const uint8_t *A, const uint8_t *B,
                       float beta, float *C, int ldc);

/* cuda_fp8.cu */
void rc_cuda_cast_e4m3(uint8_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols,
                       float scale, bool transpose);
void rc_cuda_amax_update(float *amax, const float *x, size_t n);

/* cuda_elementwise.cu */
void rc_cuda_round_to(float *dst, const float *src, size_t n, rc_compute ct);
void rc_cuda_cast_half(uint16_t *dst, const float *src, size_t n, rc_compute ct);
void rc_cuda_add(float *out, const float *a, const float *b, size_t n);
void rc_cuda_scale(float *x, float s, size_t n);
void rc_cuda_copy2d(float *dst, int ld_dst, const float *src, int ld_src, int rows, int cols);
void rc_cuda_swiglu_forward(float *out, const float *in, const uint16_t *in_half, int T, int F,
                            uint16_t *out_half, rc_compute ct);
void rc_cuda_swiglu_backward(float *din, const float *dout, const float *in,
                             const uint16_t *in_half, int T, int F, uint16_t *din_half,
                             uint16_t *out_half, rc_compute ct);
void rc_cuda_dropout(float *x, size_t n, float p, uint64_t seed, uint64_t offset);

/* cuda_init.cu */
void rc_cuda_init_normal(float *dst, size_t n, uint64_t first, uint64_t key, float std);

/* cuda_reduce.cu */
float rc_cuda_amax(const float *x, size_t n);
double rc_cuda_sum(const float *x, size_t n);
double rc_cuda_sumsq(const float *x, size_t n);
long rc_cuda_count_nonfinite(const float *x, size_t n);
uint64_t rc_cuda_fingerprint(const void *x, size_t nbytes);
void rc_cuda_sumsq_many(double *out, const float *const *x, const size_t *n, int count);
void rc_cuda_fingerprint_many(uint64_t *out, const void *const *x, const size_t *nbytes, int count);

/* cuda_embedding.cu */
void rc_cuda_embedding_forward(float *out, const int32_t *ids, const float *table, int T, int H);
void rc_cuda_embedding_backward(float *dtable, const int32_t *ids, const float *dout, int T, int H,
                                int V);

/* cuda_norm_rope.cu */
void rc_cuda_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int H,
                             float eps, uint16_t *out_half, int ld_half, rc_compute ct);
void rc_cuda_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x,
                              const float *w, const float *rstd, int T, int H, int ld_dout,
                              uint16_t *dx_half, rc_compute ct, bool dx_accumulate);
void rc_cuda_rope_forward(float *qkv, const uint16_t *qkv_half, rc_compute half_ct, int B, int S,
                          int nh, int hd, float theta, uint16_t *heads);
void rc_cuda_rope_backward(float *dqkv, int B, int S, int nh, int hd, float theta,
                           uint16_t *dqkv_half, rc_compute ct);
/* RoPE's table for (S, hd, theta): cos [S][hd/2], then sin [S][hd/2], the
 * CPU's values (built on the stream when its keyed slot held another). */
const float *rc_cuda_rope_table(int S, int hd, float theta);
/* A pair (x0, x1) rotated by (c, sgn), sgn = +-sin: each product rounded,
 * as the CPU's loop does, whatever the including file's --fmad. RoPE's
 * forward and backward and the attention backward's fused RoPE share it. */
__device__ __forceinline__ float2 rc_rope_rotate(float x0, float x1, float c, float sgn) {
  return make_float2(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sgn)),
                     __fadd_rn(__fmul_rn(x0, sgn), __fmul_rn(x1, c)));
}

/* cuda_attention.cu (fp32; dispatches BF16 to cuda_attention_bf16.cu) */
void rc_cuda_attention_forward(rc_compute ct, float *out, float *lse, const float *qkv,
                               const uint16_t *heads, int B, int S, int nh, int hd,
                               uint16_t *out_half, rc_compute half_ct);
void rc_cuda_attention_backward(rc_compute ct, float *dqkv, const float *dout, const float *out,
                                const float *lse, const float *qkv, const uint16_t *heads, int B,
                                int S, int nh, int hd, const uint16_t *out_bf16, float rope_theta,
                                uint16_t *dqkv_half, rc_compute half_ct);

/* cuda_attention_bf16.cu: the BF16 contract of ops.h on tensor cores */
void rc_cuda_attention_bf16_forward(float *out, float *lse, const float *qkv, const uint16_t *heads,
                                    int B, int S, int nh, int hd, uint16_t *out_half,
                                    rc_compute half_ct);
void rc_cuda_attention_bf16_backward(float *dqkv, const float *dout, const float *out,
                                     const float *lse, const float *qkv, const uint16_t *heads,
                                     int B, int S, int nh, int hd, const uint16_t *out_bf16,
                                     float rope_theta, uint16_t *dqkv_half, rc_compute half_ct);

/* cuda_attention_wgmma.cu: the BF16 forward on Hopper's wgmma (hd <= 64),
 * when the module's sm_90a code runs and RC_CUDA_ATTENTION is not "mma" */
bool rc_cuda_attention_wgmma_on(void);
const char *rc_cuda_attention_path(void);
/* whether the running GPU loaded the module's sm_90a code (cuda_attention_wgmma.cu) */
bool rc_cuda_sm90a_code(void);
void rc_cuda_attention_wgmma_forward(float *out, float *lse, const uint16_t *heads, int B, int S,
                                     int nh, int hd, uint16_t *out_half, rc_compute half_ct);
void rc_cuda_attention_wgmma_dkv(float *dqkv, float *dq_part, const float *lse, const float *Dd,
                                 const uint16_t *heads, const uint16_t *doh, int B, int S, int nh,
                                 int hd, uint16_t *dqkv_half, const float *rope_cs,
                                 rc_compute half_ct);

/* cuda_loss.cu */
void rc_cuda_cross_entropy(float *losses, float *correct, float *logits, const int32_t *labels,
                           const float *dloss, int T, int V, uint16_t *dlogits_half, rc_compute ct);

/* cuda_moe.cu */
void rc_cuda_moe_route(int32_t *topk_idx, float *topk_w, float *probs, const float *logits,
                       const float *expert_bias, int T, int E, int k, rc_moe_scoring scoring);
void rc_cuda_moe_route_backward(float *dlogits, const float *dtopk_w, const float *dprobs_e,
                                const float *logits, const int32_t *topk_idx, const float *topk_w,
                                const float *probs, int T, int E, int k, rc_moe_scoring scoring);
void rc_cuda_moe_permute(int32_t *perm, int32_t *inv_perm, int32_t *offsets,
                         const int32_t *topk_idx, int T, int E, int k);
void rc_cuda_moe_gather(float *dst, const float *src, const int32_t *perm, int T, int k, int H,
                        uint16_t *dst_half, rc_compute ct);
void rc_cuda_moe_combine(float *out, const float *rows, const float *w, const int32_t *inv_perm,
                         int T, int k, int H, const float *residual);
void rc_cuda_moe_combine_backward(float *drows, float *dw, const float *dout, const float *rows,
                                  const float *w, const int32_t *inv_perm, int T, int k, int H);

/* cuda_adamw.cu */
void rc_cuda_adamw(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                   float lr, float beta1, float beta2, float eps, float weight_decay,
                   float grad_scale, float bias_correction1, float bias_correction2);
void rc_cuda_adamw_many(const rc_adamw_tensor *ts, int count, float lr, float beta1, float beta2,
                        float eps, float grad_scale, float bias_correction1, float bias_correction2,
                        uint64_t *fp);

#endif
