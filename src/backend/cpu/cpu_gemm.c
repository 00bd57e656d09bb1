/* cpu_gemm.c — the CPU GEMM: C = alpha * op(A) op(B) + beta * C.
 *
 * Every output element is a dot product of a row of op(A) with a column of
 * op(B). Both are first made contiguous (op(A) rows, op(B) columns packed
 * into scratch when the layout does not already give them), so the inner
 * loop is a contiguous dot product that gcc vectorises.
 *
 * The summation order is fixed and independent of the transposes, the
 * leading dimensions and the blocking: element p of the dot product goes to
 * partial sum p % 8, and the eight partial sums are combined as
 * ((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7)). So the same matrices give the same
 * bits whichever of the four layouts they arrive in. Under the kernel switch
 * RC_CPU_SUM_ORDER=shuffled (cpu_sum_order.c) a GEMM with op(A) transposed
 * — the weight gradient, a sum over the tokens — adds the eight one after
 * another in an order drawn per call instead, as a wgrad kernel whose
 * partial sums meet in atomics does: not deterministic, on purpose.
 *
 * As ops.h requires, the product is accumulated completely before C is
 * involved: beta == 0 writes alpha*acc without reading C, otherwise
 * alpha*acc + beta*C. With beta == 1 that is bitwise what a beta == 0 GEMM
 * into scratch followed by `add` gives, which keeps the fusion-on and
 * fusion-off arms of the linear layer identical. With a BF16 or FP16
 * compute type both operands are rounded to it as they are packed (ops.h);
 * the products and sums stay fp32. */
#include "backend/cpu/cpu_internal.h"
#include "backend/numeric.h"

#include <stdlib.h>

enum { LANES = 8 };

/* order: NULL for the fixed tree, else the lanes' order (the switch) */
static float combine8(const float s[LANES], const int32_t *order) {
  if (order) {
    float acc = s[order[0]];
    for (int r = 1; r < LANES; r++) acc += s[order[r]];
    return acc;
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* One output: dot(a, b) over k contiguous elements. */
static float dot1(const float *restrict a, const float *restrict b, int k, const int32_t *order) {
  float s[LANES] = {0};
  int p = 0;
  for (; p + LANES <= k; p += LANES)
    for (int r = 0; r < LANES; r++) s[r] += a[p + r] * b[p + r];
  for (int r = 0; p + r < k; r++) s[r] += a[p + r] * b[p + r];
  return combine8(s, order);
}

/* Four outputs sharing a row of op(A): dot(a, b0..b3). Each output sees
 * exactly the arithmetic of dot1; the blocking only reuses loads of a. */
static void dot4(const float *restrict a, const float *restrict b0, const float *restrict b1,
                 const float *restrict b2, const float *restrict b3, int k, float out[4],
                 const int32_t *order) {
  float s0[LANES] = {0}, s1[LANES] = {0}, s2[LANES] = {0}, s3[LANES] = {0};
  int p = 0;
  for (; p + LANES <= k; p += LANES) {
    for (int r = 0; r < LANES; r++) {
      float av = a[p + r];
      s0[r] += av * b0[p + r];
      s1[r] += av * b1[p + r];
      s2[r] += av * b2[p + r];
      s3[r] += av * b3[p + r];
    }
  }
  for (int r = 0; p + r < k; r++) {
    float av = a[p + r];
    s0[r] += av * b0[p + r];
    s1[r] += av * b1[p + r];
    s2[r] += av * b2[p + r];
    s3[r] += av * b3[p + r];
  }
  out[0] = combine8(s0, order);
  out[1] = combine8(s1, order);
  out[2] = combine8(s2, order);
  out[3] = combine8(s3, order);
}

static void store(float *c, float acc, float alpha, float beta) {
  *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

static float round_ct(float x, rc_compute ct) {
  return ct == RC_COMPUTE_BF16 ? rc_round_bf16(x) : ct == RC_COMPUTE_FP16 ? rc_round_fp16(x) : x;
}

/* dst[j*rows + i] = round(src[i*ld + j]): a [rows, cols] matrix with row
 * stride ld becomes its contiguous transpose. Blocked so both sides stay in
 * cache. */
static void transpose(float *restrict dst, const float *restrict src, int rows, int cols, int ld,
                      rc_compute ct) {
  enum { BLK = 32 };
  for (int i0 = 0; i0 < rows; i0 += BLK)
    for (int j0 = 0; j0 < cols; j0 += BLK)
      for (int i = i0; i < rows && i < i0 + BLK; i++)
        for (int j = j0; j < cols && j < j0 + BLK; j++)
          dst[(size_t)j * rows + i] = round_ct(src[(size_t)i * ld + j], ct);
}

/* dst[i*cols + j] = round(src[i*ld + j]): a contiguous rounded copy. */
static void copy_rounded(float *restrict dst, const float *restrict src, int rows, int cols, int ld,
                         rc_compute ct) {
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++)
      dst[(size_t)i * cols + j] = round_ct(src[(size_t)i * ld + j], ct);
}

void rc_cpu_gemm(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  if (m <= 0 || n <= 0) return;
  bool rounds = ct == RC_COMPUTE_BF16 || ct == RC_COMPUTE_FP16;
  if (k <= 0) { /* empty product: acc = 0, and A and B may be NULL */
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) store(&C[(size_t)i * ldc + j], 0.0f, alpha, beta);
    return;
  }

  /* Row i of op(A) at arow + i*astride; column j of op(B) at bcol + j*bstride. */
  const float *arow = A, *bcol = B;
  size_t astride = (size_t)lda, bstride = (size_t)ldb;
  bool pack_a = trans_a || rounds, pack_b = !trans_b || rounds;
  float *apack = pack_a ? rc_cpu_scratch((size_t)m * k * sizeof(float), "gemm (packed A)") : NULL;
  float *bpack = pack_b ? rc_cpu_scratch((size_t)n * k * sizeof(float), "gemm (packed B)") : NULL;
  if ((pack_a && !apack) || (pack_b && !bpack)) { /* recorded: the step stops (cpu_internal.h) */
    free(apack);
    free(bpack);
    return;
  }
  if (pack_a) { /* A is [k, m]: its transpose gives contiguous rows of op(A) */
    if (trans_a)
      transpose(apack, A, k, m, lda, ct);
    else
      copy_rounded(apack, A, m, k, lda, ct);
    arow = apack;
    astride = (size_t)k;
  }
  if (pack_b) { /* B is [k, n]: its transpose gives contiguous columns of op(B) */
    if (!trans_b)
      transpose(bpack, B, k, n, ldb, ct);
    else
      copy_rounded(bpack, B, n, k, ldb, ct);
    bcol = bpack;
    bstride = (size_t)k;
  }

  int32_t lanes[LANES], *order = NULL;
  if (trans_a && rc_cpu_sum_order_shuffled()) { /* a wgrad: the sum over tokens */
    rc_cpu_sum_order_draw(lanes, LANES);
    order = lanes;
  }
  for (int i = 0; i < m; i++) {
    const float *a = arow + (size_t)i * astride;
    float *c = C + (size_t)i * ldc;
    int j = 0;
    for (; j + 4 <= n; j += 4) {
      const float *b = bcol + (size_t)j * bstride;
      float acc[4];
      dot4(a, b, b + bstride, b + 2 * bstride, b + 3 * bstride, k, acc, order);
      for (int q = 0; q < 4; q++) store(&c[j + q], acc[q], alpha, beta);
    }
    for (; j < n; j++) store(&c[j], dot1(a, bcol + (size_t)j * bstride, k, order), alpha, beta);
  }
  free(apack);
  free(bpack);
}

/* ---- bf16/fp16 storage (ops.h cast_half, gemm_half) ---- */

void rc_cpu_cast_half(uint16_t *dst, const float *src, size_t n, rc_compute ct) {
  if (ct == RC_COMPUTE_FP16)
    for (size_t i = 0; i < n; i++) dst[i] = rc_fp16_encode(src[i]);
  else
    for (size_t i = 0; i < n; i++) dst[i] = rc_bf16_encode(src[i]);
}

/* cast_half's inverse: dst[i] = the value of ct's 16 bits src[i], exactly. */
void rc_cpu_decode_half(float *dst, const uint16_t *src, size_t n, rc_compute ct) {
  for (size_t i = 0; i < n; i++) dst[i] = rc_half_decode(src[i], ct == RC_COMPUTE_FP16);
}

/* A rows x cols operand with row stride ld, decoded into a contiguous fp32
 * matrix (freed by the caller). */
static float *decode_half(const uint16_t *x, int rows, int cols, int ld, rc_compute ct) {
  float *out = rc_cpu_scratch((size_t)rows * (size_t)cols * sizeof(float), "gemm_half (decoded)");
  if (!out) return NULL;
  for (int i = 0; i < rows; i++)
    rc_cpu_decode_half(out + (size_t)i * cols, x + (size_t)i * ld, (size_t)cols, ct);
  return out;
}

/* The decoded values are representable in ct, so the fp32 GEMM on them is
 * the ct GEMM's arithmetic (its rounding while packing changes nothing) and
 * the summation order is the one above whatever the layout: bitwise gemm. */
void rc_cpu_gemm_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                      const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                      int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    rc_cpu_gemm(RC_COMPUTE_FP32, trans_a, trans_b, m, n, 0, alpha, NULL, lda, NULL, ldb, beta, C,
                ldc);
    return;
  }
  int rows_a = trans_a ? k : m, cols_a = trans_a ? m : k;
  int rows_b = trans_b ? n : k, cols_b = trans_b ? k : n;
  float *a = decode_half(A, rows_a, cols_a, lda, ct), *b = decode_half(B, rows_b, cols_b, ldb, ct);
  if (a && b)
    rc_cpu_gemm(RC_COMPUTE_FP32, trans_a, trans_b, m, n, k, alpha, a, cols_a, b, cols_b, beta, C,
                ldc);
  free(a);
  free(b);
}

/* gemm_half (beta 0) into C, then R added: ops.h's definition, row by row. */
void rc_cpu_gemm_half_residual(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                               const uint16_t *A, int lda, const uint16_t *B, int ldb,
                               const float *R, float *C, int ldc) {
  if (m <= 0 || n <= 0) return;
  rc_cpu_gemm_half(ct, trans_a, trans_b, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
  for (int i = 0; i < m; i++) /* ops.h `add` of R and the product, element by element */
    for (int j = 0; j < n; j++)
      C[(size_t)i * ldc + j] = R[(size_t)i * ldc + j] + C[(size_t)i * ldc + j];
}

/* gemm_half into fp32 scratch, each element then encoded: bitwise
 * cast_half of gemm_half's result (ops.h). */
void rc_cpu_gemm_to_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                         const uint16_t *A, int lda, const uint16_t *B, int ldb, uint16_t *C,
                         int ldc) {
  if (m <= 0 || n <= 0) return;
  float *c = rc_cpu_scratch((size_t)m * (size_t)n * sizeof(float), "gemm_to_half (fp32 result)");
  if (!c) return;
  rc_cpu_gemm_half(ct, trans_a, trans_b, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, c, n);
  for (int i = 0; i < m; i++)
    rc_cpu_cast_half(C + (size_t)i * ldc, c + (size_t)i * n, (size_t)n, ct);
  free(c);
}

/* One after another, each exactly its own gemm_half or gemm_to_half. */
void rc_cpu_gemm_half_many(rc_compute ct, bool trans_a, bool trans_b,
                           const rc_gemm_half_call *calls, int count) {
  for (int i = 0; i < count; i++) {
    const rc_gemm_half_call *c = &calls[i];
    if (c->C)
      rc_cpu_gemm_half(ct, trans_a, trans_b, c->m, c->n, c->k, 1.0f, c->A, c->lda, c->B, c->ldb,
                       c->beta, c->C, c->ldc);
    else
      rc_cpu_gemm_to_half(ct, trans_a, trans_b, c->m, c->n, c->k, c->A, c->lda, c->B, c->ldb,
                          c->C_half, c->ldc);
  }
}
