/* cpu_ops.c — the CPU backend's table, memory, elementwise ops, reductions
 * and the AdamW step.
 *
 * On the CPU "device" memory is host memory, so the memory ops are calloc
 * and memcpy and sync is a no-op. Reductions run in index order in double so
 * their results are deterministic and as close to exact as is cheap; the
 * elementwise ops are the literal formulas of ops.h in float, since this
 * backend is the numerical reference the CUDA kernels are checked against.
 * The AdamW element update is backend/element_math.h's, shared with them. */
#include "backend/cpu/cpu_internal.h"
#include "base/host_pages.h"
#include "backend/element_math.h"
#include "backend/numeric.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- memory ---- */

/* NULL on failure, printing nothing: the caller names the buffer and the
 * limit (ops.h alloc). */
static void *cpu_alloc(size_t bytes) {
  /* calloc(0) may return NULL legitimately; ask for one byte instead so that
   * NULL always means failure. */
  return calloc(1, bytes ? bytes : 1);
}

static void cpu_free(void *ptr) {
  free(ptr);
}

static void cpu_memcpy(void *dst, const void *src, size_t bytes) {
  if (bytes) memcpy(dst, src, bytes);
}

static void cpu_zero(void *dst, size_t bytes) {
  if (bytes) memset(dst, 0, bytes);
}

static void cpu_zero_many(void *const *dst, const size_t *bytes, int count) {
  for (int i = 0; i < count; i++) cpu_zero(dst[i], bytes[i]);
}

static void cpu_sync(void) {}

/* ops.h timer_mark: the clock now (a CPU op is done when it returns). The
 * marks are the profiler's alone, so a file-static table like its own. */
static double cpu_marks[RC_TIMER_SLOTS];

static void cpu_timer_mark(int slot) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (slot >= 0 && slot < RC_TIMER_SLOTS) cpu_marks[slot] = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_timer_seconds(int from, int to) {
  if (from < 0 || to < 0 || from >= RC_TIMER_SLOTS || to >= RC_TIMER_SLOTS) return 0.0;
  return cpu_marks[to] - cpu_marks[from];
}

/* ---- elementwise ---- */

static void cpu_round_to(float *dst, const float *src, size_t n, rc_compute ct) {
  switch (ct) {
  case RC_COMPUTE_BF16:
    for (size_t i = 0; i < n; i++) dst[i] = rc_round_bf16(src[i]);
    break;
  case RC_COMPUTE_FP16:
    for (size_t i = 0; i < n; i++) dst[i] = rc_round_fp16(src[i]);
    break;
  default:
    if (dst != src && n) memmove(dst, src, n * sizeof(float));
    break;
  }
}

static float cpu_amax(const float *x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; i++) {
    if (isnan(x[i])) return NAN;
    float a = fabsf(x[i]);
    if (a > m) m = a;
  }
  return m;
}

static void cpu_add(float *out, const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void cpu_scale(float *x, float s, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] *= s;
}

static void cpu_copy2d(float *dst, int ld_dst, const float *src, int ld_src, int rows, int cols) {
  if (cols <= 0) return;
  for (int r = 0; r < rows; r++)
    memmove(dst + (size_t)r * ld_dst, src + (size_t)r * ld_src, (size_t)cols * sizeof(float));
}

/* ---- reductions ---- */

static double cpu_sum(const float *x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += (double)x[i];
  return s;
}

static double cpu_sumsq(const float *x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
  return s;
}

static long cpu_count_nonfinite(const float *x, size_t n) {
  long c = 0;
  for (size_t i = 0; i < n; i++) c += !isfinite(x[i]);
  return c;
}

static uint64_t cpu_fingerprint(const void *x, size_t nbytes) {
  return rc_fingerprint_host(x, nbytes);
}

static void cpu_sumsq_many(double *out, const float *const *x, const size_t *n, int count) {
  for (int i = 0; i < count; i++) out[i] = cpu_sumsq(x[i], n[i]);
}

static void cpu_fingerprint_many(uint64_t *out, const void *const *x, const size_t *nbytes,
                                 int count) {
  for (int i = 0; i < count; i++) out[i] = cpu_fingerprint(x[i], nbytes[i]);
}

/* ---- optimizer ---- */

static void cpu_adamw(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                      float lr, float beta1, float beta2, float eps, float weight_decay,
                      float grad_scale, float bias_correction1, float bias_correction2) {
  for (size_t i = 0; i < n; i++)
    rc_adamw_element(&param[i], &exp_avg[i], &exp_avg_sq[i], grad[i], lr, beta1, beta2, eps,
                     weight_decay, grad_scale, bias_correction1, bias_correction2);
}

static void cpu_adamw_many(const rc_adamw_tensor *ts, int count, float lr, float beta1, float beta2,
                           float eps, float grad_scale, float bias_correction1,
                           float bias_correction2, uint64_t *fp) {
  for (int i = 0; i < count; i++) {
    const rc_adamw_tensor *t = &ts[i];
    cpu_adamw(t->param, t->grad, t->exp_avg, t->exp_avg_sq, t->n, lr, beta1, beta2, eps,
              t->weight_decay, grad_scale, bias_correction1, bias_correction2);
    if (t->param_half) rc_cpu_cast_half(t->param_half, t->param, t->n, t->half_ct);
    fp[4 * i + 0] = cpu_fingerprint(t->grad, t->n * sizeof(float));
    fp[4 * i + 1] = cpu_fingerprint(t->param, t->n * sizeof(float));
    fp[4 * i + 2] = cpu_fingerprint(t->exp_avg, t->n * sizeof(float));
    fp[4 * i + 3] = cpu_fingerprint(t->exp_avg_sq, t->n * sizeof(float));
  }
}

/* ---- the table ---- */

static const rc_ops cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .alloc_failed = rc_cpu_alloc_failed,
    .free = cpu_free,
    .to_device = cpu_memcpy,
    .to_host = cpu_memcpy,
    .copy = cpu_memcpy,
    .zero = cpu_zero,
    .zero_many = cpu_zero_many,
    .sync = cpu_sync,
    .timer_mark = cpu_timer_mark,
    .timer_seconds = cpu_timer_seconds,
    .host_alloc = rc_host_pages_alloc_any,
    .host_free = rc_host_pages_free,
    .gemm = rc_cpu_gemm,
    .cast_half = rc_cpu_cast_half,
    .gemm_half = rc_cpu_gemm_half,
    .gemm_half_residual = rc_cpu_gemm_half_residual,
    .gemm_to_half = rc_cpu_gemm_to_half,
    .gemm_half_many = rc_cpu_gemm_half_many,
    .cast_e4m3 = rc_cpu_cast_e4m3,
    .gemm_e4m3 = rc_cpu_gemm_e4m3,
    .amax_update = rc_cpu_amax_update,
    .round_to = cpu_round_to,
    .amax = cpu_amax,
    .add = cpu_add,
    .scale = cpu_scale,
    .copy2d = cpu_copy2d,
    .sum = cpu_sum,
    .sumsq = cpu_sumsq,
    .count_nonfinite = cpu_count_nonfinite,
    .fingerprint = cpu_fingerprint,
    .sumsq_many = cpu_sumsq_many,
    .fingerprint_many = cpu_fingerprint_many,
    .embedding_forward = rc_cpu_embedding_forward,
    .embedding_backward = rc_cpu_embedding_backward,
    .rmsnorm_forward = rc_cpu_rmsnorm_forward,
    .rmsnorm_backward = rc_cpu_rmsnorm_backward,
    .rope_forward = rc_cpu_rope_forward,
    .rope_backward = rc_cpu_rope_backward,
    .attention_forward = rc_cpu_attention_forward,
    .attention_backward = rc_cpu_attention_backward,
    .swiglu_forward = rc_cpu_swiglu_forward,
    .swiglu_backward = rc_cpu_swiglu_backward,
    .cross_entropy = rc_cpu_cross_entropy,
    .dropout = rc_cpu_dropout,
    .init_normal = rc_cpu_init_normal,
    .moe_route = rc_cpu_moe_route,
    .moe_route_backward = rc_cpu_moe_route_backward,
    .moe_permute = rc_cpu_moe_permute,
    .moe_gather = rc_cpu_moe_gather,
    .moe_combine = rc_cpu_moe_combine,
    .moe_combine_backward = rc_cpu_moe_combine_backward,
    .adamw = cpu_adamw,
    .adamw_many = cpu_adamw_many,
};

/* The table is checked on every call (a comparison per op, a few calls per
 * process): a member left NULL is an internal error of this build, stated
 * once by name, rather than a crash at the first call of the missing op.
 * 70 is RC_EXIT_SOFTWARE (base/error.h, which the backend does not use). */
const rc_ops *rc_cpu_ops(void) {
  const char *missing = rc_ops_missing(&cpu_ops);
  if (missing) {
    fprintf(stderr, "resumecheck: internal error: the cpu backend's ops table has no %s\n",
            missing);
    exit(70);
  }
  return &cpu_ops;
}
