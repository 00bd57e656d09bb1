/* test_cpu_ops.c — the CPU backend against the semantics of ops.h.
 *
 * Forward ops are compared with straightforward double-precision references;
 * backward ops with central finite differences of a random projection of
 * their forward, loss = sum(r * out), evaluated in double from the float
 * forward. Exact properties (write vs accumulate, summation orders, the GEMM's
 * beta handling, stable permutation, RNG masks) are asserted bitwise. Every
 * check is paired with a negative control showing that it can fail.
 *
 * Finite-difference tolerance: with step h = 1e-2 on O(1) inputs, the float
 * forward's rounding (relative 6e-8 per output, tens of outputs) contributes
 * at most about 1e-6 / h = 1e-4 to a difference quotient, and the central
 * difference's truncation error is h^2/6 |f'''| = 2e-5 |f'''| for these
 * smooth ops (observed errors are below 3e-5). So |fd - g| / (1 + |g|) <=
 * 5e-4 is a pass; a wrong Jacobian term is off by O(|g|), far above that. */
#include "backend/numeric.h"
#include "backend/ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { FD_FAIL_SCALE = 10 };
static const float FD_H = 1e-2f;
static const double FD_TOL = 5e-4;

/* ---- helpers ---- */

static uint64_t next_u64(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static float uniform(uint64_t *state, float lo, float hi) {
  return lo + (hi - lo) * (float)(next_u64(state) >> 40) * 0x1p-24f;
}

static float *falloc(size_t n) {
  float *p = calloc(n ? n : 1, sizeof(float));
  if (!p) abort();
  return p;
}

static float *frand(size_t n, uint64_t *state, float lo, float hi) {
  float *p = falloc(n);
  for (size_t i = 0; i < n; i++) p[i] = uniform(state, lo, hi);
  return p;
}

static float *fdup(const float *x, size_t n) {
  float *p = falloc(n);
  memcpy(p, x, n * sizeof(float));
  return p;
}

static void ffill(float *x, size_t n, float v) {
  for (size_t i = 0; i < n; i++) x[i] = v;
}

static double proj(const float *out, const float *r, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += (double)r[i] * out[i];
  return s;
}

static size_t count_nan(const float *x, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += isnan(x[i]) != 0;
  return c;
}

/* max_i |a_i - b_i| / (1 + |b_i|) */
static double max_err(const float *a, const double *b, size_t n) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]) / (1.0 + fabs(b[i]));
    if (!(e <= worst)) worst = e; /* NaN counts as worst */
  }
  return worst;
}

static int bits_equal(const float *a, const float *b, size_t n) {
  return memcmp(a, b, n * sizeof(float)) == 0;
}

/* ---- finite differences ---- */

typedef double (*loss_fn)(void *ctx);

/* Worst |fd_i - g_i| / (1 + |g_i|) over the n elements of x, the central
 * difference taken over the step actually representable in float. */
static double fd_error(loss_fn loss, void *ctx, float *x, size_t n, const float *g) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    float x0 = x[i];
    x[i] = x0 + FD_H;
    double xp = x[i], lp = loss(ctx);
    x[i] = x0 - FD_H;
    double xm = x[i], lm = loss(ctx);
    x[i] = x0;
    double fd = (lp - lm) / (xp - xm);
    double e = fabs(fd - g[i]) / (1.0 + fabs(g[i]));
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

/* Asserts g matches finite differences, and (negative control) that the same
 * comparison rejects g with one element off by FD_FAIL_SCALE tolerances. */
static void expect_grad(const char *name, loss_fn loss, void *ctx, float *x, size_t n,
                        const float *g) {
  double e = fd_error(loss, ctx, x, n, g);
  CHECK(e <= FD_TOL, "%s: gradient differs from finite differences, error %g > %g", name, e,
        FD_TOL);
  float *bad = fdup(g, n);
  size_t j = n / 2;
  bad[j] += (float)(FD_FAIL_SCALE * FD_TOL * (1.0 + fabs(g[j])));
  double eb = fd_error(loss, ctx, x, n, bad);
  CHECK(eb > FD_TOL, "%s: negative control: a corrupted gradient passed (error %g)", name, eb);
  free(bad);
}

/* ---- GEMM ---- */

/* Stores the [rows, cols] matrix M (contiguous) as op^-1 so that op(X) == M,
 * with row stride ld and NaN padding, which a GEMM must never read. */
static float *store_op(const float *M, int rows, int cols, bool trans, int *ld) {
  int srows = trans ? cols : rows, scols = trans ? rows : cols;
  *ld = scols + 3;
  float *X = falloc((size_t)srows * *ld);
  ffill(X, (size_t)srows * *ld, NAN);
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      if (trans)
        X[(size_t)c * *ld + r] = M[(size_t)r * cols + c];
      else
        X[(size_t)r * *ld + c] = M[(size_t)r * cols + c];
    }
  return X;
}

/* The bug the GEMM contract rules out: the accumulator starts from beta*C. */
static void gemm_acc_from_c(int m, int n, int k, const float *A, const float *B, float *C) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float acc = C[(size_t)i * n + j];
      for (int p = 0; p < k; p++) acc += A[(size_t)i * k + p] * B[(size_t)p * n + j];
      C[(size_t)i * n + j] = acc;
    }
}

static void test_gemm_shape(const rc_ops *ops, int m, int n, int k, uint64_t *rng) {
  float *A = frand((size_t)m * k, rng, -1, 1), *B = frand((size_t)k * n, rng, -1, 1);
  double *ref = calloc((size_t)m * n, sizeof(double));
  double *bound = calloc((size_t)m * n, sizeof(double));
  if (!ref || !bound) abort();
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      for (int p = 0; p < k; p++) {
        double a = A[(size_t)i * k + p], b = B[(size_t)p * n + j];
        ref[(size_t)i * n + j] += a * b;
        bound[(size_t)i * n + j] += fabs(a * b);
      }

  /* All four layouts, leading dimensions wider than the matrices (NaN
   * padding), C prefilled with NaN and beta = 0: every result within the
   * float summation bound of the double reference, and all four bitwise
   * equal (the summation order does not depend on the layout). */
  float *C0 = NULL;
  for (int combo = 0; combo < 4; combo++) {
    bool ta = combo & 1, tb = combo & 2;
    int lda, ldb, ldc = n + 5;
    float *As = store_op(A, m, k, ta, &lda), *Bs = store_op(B, k, n, tb, &ldb);
    float *C = falloc((size_t)m * ldc);
    ffill(C, (size_t)m * ldc, NAN);
    ops->gemm(RC_COMPUTE_FP32, ta, tb, m, n, k, 1.0f, As, lda, Bs, ldb, 0.0f, C, ldc);
    float *Cc = falloc((size_t)m * n);
    int bad = 0;
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        float c = C[(size_t)i * ldc + j];
        Cc[(size_t)i * n + j] = c;
        double tol = (k + 2) * 0x1p-24 * bound[(size_t)i * n + j] + 1e-30;
        if (!(fabs(c - ref[(size_t)i * n + j]) <= tol)) bad++;
      }
    for (int i = 0; i < m; i++)
      for (int j = n; j < ldc; j++) bad += !isnan(C[(size_t)i * ldc + j]); /* padding untouched */
    CHECK(bad == 0, "gemm %dx%dx%d ta=%d tb=%d: %d elements off the reference", m, n, k, ta, tb,
          bad);
    if (!C0)
      C0 = fdup(Cc, (size_t)m * n);
    else
      CHECK(bits_equal(Cc, C0, (size_t)m * n), "gemm ta=%d tb=%d not bitwise equal to NN", ta, tb);
    free(As), free(Bs), free(C), free(Cc);
  }
  /* Negative control for the reference check: one ulp-sized error in a
   * well-conditioned element is still caught at 100x the bound. */
  {
    double tol = (k + 2) * 0x1p-24 * bound[0] + 1e-30;
    CHECK(!(fabs((C0[0] + 100 * tol) - ref[0]) <= tol), "negative control: gemm tolerance");
  }

  /* beta = 1 is bitwise beta = 0 into scratch, then add (fusion on == off). */
  float *Cacc = frand((size_t)m * n, rng, -4, 4), *Cadd = fdup(Cacc, (size_t)m * n);
  float *scratch = falloc((size_t)m * n);
  ffill(scratch, (size_t)m * n, NAN);
  ops->gemm(RC_COMPUTE_FP32, false, false, m, n, k, 1.0f, A, k, B, n, 1.0f, Cacc, n);
  ops->gemm(RC_COMPUTE_FP32, false, false, m, n, k, 1.0f, A, k, B, n, 0.0f, scratch, n);
  float *Cbug = fdup(Cadd, (size_t)m * n);
  ops->add(Cadd, Cadd, scratch, (size_t)m * n);
  CHECK(bits_equal(Cacc, Cadd, (size_t)m * n), "gemm %dx%dx%d: beta=1 != beta=0 + add", m, n, k);
  /* Negative control: starting the accumulator from C breaks that equality
   * (given enough terms for the rounding to differ somewhere). */
  gemm_acc_from_c(m, n, k, A, B, Cbug);
  CHECK(k < 8 || !bits_equal(Cbug, Cadd, (size_t)m * n),
        "negative control: accumulating from C matched scratch + add bitwise");

  /* General alpha and beta: alpha*acc + beta*C. */
  float *Cg = frand((size_t)m * n, rng, -1, 1), *Cg0 = fdup(Cg, (size_t)m * n);
  ops->gemm(RC_COMPUTE_FP32, false, false, m, n, k, 0.5f, A, k, B, n, -2.0f, Cg, n);
  double *want = calloc((size_t)m * n, sizeof(double));
  if (!want) abort();
  for (size_t i = 0; i < (size_t)m * n; i++) want[i] = 0.5 * ref[i] - 2.0 * Cg0[i];
  CHECK(max_err(Cg, want, (size_t)m * n) < 1e-5, "gemm alpha=0.5 beta=-2: error %g",
        max_err(Cg, want, (size_t)m * n));

  free(A), free(B), free(ref), free(bound), free(C0), free(Cacc), free(Cadd), free(scratch);
  free(Cbug), free(Cg), free(Cg0), free(want);
}

static void test_gemm(const rc_ops *ops) {
  uint64_t rng = 11;
  test_gemm_shape(ops, 5, 7, 11, &rng);
  test_gemm_shape(ops, 13, 17, 37, &rng);
  test_gemm_shape(ops, 1, 1, 1, &rng);
  test_gemm_shape(ops, 16, 8, 64, &rng);

  /* k == 0: acc = 0. beta = 0 writes zeros over NaN; beta = 1 leaves C. */
  float C[6], C1[6] = {1, 2, 3, 4, 5, 6};
  ffill(C, 6, NAN);
  ops->gemm(RC_COMPUTE_FP32, false, false, 2, 3, 0, 1.0f, NULL, 1, NULL, 3, 0.0f, C, 3);
  int zeros = 1;
  for (int i = 0; i < 6; i++) zeros &= rc_f32_bits(C[i]) == 0;
  CHECK(zeros, "gemm k=0 beta=0 did not write +0.0 over NaN");
  ops->gemm(RC_COMPUTE_FP32, true, true, 2, 3, 0, 1.0f, NULL, 2, NULL, 1, 1.0f, C1, 3);
  CHECK(C1[0] == 1 && C1[5] == 6, "gemm k=0 beta=1 changed C");
  /* Negative control for the NaN check: reading C as beta*C would propagate it. */
  float nan_c = NAN, naive = 1.0f * 0.0f + 0.0f * nan_c;
  CHECK(isnan(naive), "negative control: 0 * NaN should be NaN");
}

/* ops.h: a BF16/FP16 GEMM rounds its operands itself. With unrounded inputs
 * it gives the bits of the same GEMM on inputs rounded first, in all four
 * layouts (the model relies on it: it no longer rounds GEMM inputs into
 * copies). Negative control: FP32 sees the unrounded values. */
static void test_gemm_rounds_inputs(const rc_ops *ops) {
  enum { M = 9, N = 11, K = 21 };
  uint64_t rng = 23;
  float *A = frand(M * K, &rng, -2, 2), *B = frand(K * N, &rng, -2, 2);
  rc_compute cts[2] = {RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int c = 0; c < 2; c++) {
    float *Ar = fdup(A, M * K), *Br = fdup(B, K * N);
    for (int i = 0; i < M * K; i++) Ar[i] = c ? rc_round_fp16(A[i]) : rc_round_bf16(A[i]);
    for (int i = 0; i < K * N; i++) Br[i] = c ? rc_round_fp16(B[i]) : rc_round_bf16(B[i]);
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        /* the same matrices stored for the requested transposes */
        float *a = falloc(M * K), *b = falloc(K * N), *ar = falloc(M * K), *br = falloc(K * N);
        for (int i = 0; i < M; i++)
          for (int p = 0; p < K; p++) {
            size_t at = ta ? (size_t)p * M + i : (size_t)i * K + p;
            a[at] = A[i * K + p], ar[at] = Ar[i * K + p];
          }
        for (int p = 0; p < K; p++)
          for (int j = 0; j < N; j++) {
            size_t bt = tb ? (size_t)j * K + p : (size_t)p * N + j;
            b[bt] = B[p * N + j], br[bt] = Br[p * N + j];
          }
        int lda = ta ? M : K, ldb = tb ? K : N;
        float got[M * N], want[M * N], fp32[M * N];
        ops->gemm(cts[c], ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, got, N);
        ops->gemm(cts[c], ta, tb, M, N, K, 1.0f, ar, lda, br, ldb, 0.0f, want, N);
        ops->gemm(RC_COMPUTE_FP32, ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, fp32, N);
        CHECK(memcmp(got, want, sizeof got) == 0,
              "gemm %s ta=%d tb=%d: unrounded inputs differ from pre-rounded ones",
              c ? "fp16" : "bf16", ta, tb);
        CHECK(memcmp(got, fp32, sizeof got) != 0,
              "negative control: %s gemm ta=%d tb=%d equals the fp32 gemm of unrounded inputs",
              c ? "fp16" : "bf16", ta, tb);
        free(a), free(b), free(ar), free(br);
      }
    free(Ar), free(Br);
  }
  free(A), free(B);
}

/* ---- bf16/fp16 storage: cast_half and gemm_half ---- */

/* cast_half's 16 bits decode to exactly round_to's value (a NaN to a NaN of
 * its sign, bf16 keeping round_to's top 16 bits), over every
 * class of input: signed zeros, subnormals of both formats, ties to even,
 * fp16 overflow, infinities, NaNs with payloads, random bit patterns. */
static void test_cast_half(const rc_ops *ops) {
  static const uint32_t special[] = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc12345u,
      0x7f812345u, 0x00000001u, 0x80000001u, 0x00400000u, 0x3f808000u, 0x3f818000u,
      0x3f800fffu, 0x3f801000u, 0x477fe000u, 0x477ff000u, 0x477fefffu, 0x33000000u,
      0x33000001u, 0x38800000u, 0x387fffffu, 0xb3800000u, 0x7f7fffffu, 0x3a800001u};
  enum { NS = sizeof special / sizeof special[0], N = NS + 4000 };
  float *x = falloc(N);
  uint64_t rng = 31;
  for (int i = 0; i < N; i++)
    x[i] = i < NS ? rc_bits_f32(special[i]) : rc_bits_f32((uint32_t)next_u64(&rng));
  rc_compute cts[2] = {RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int c = 0; c < 2; c++) {
    uint16_t *h = malloc(N * sizeof *h);
    float *r = falloc(N);
    ops->cast_half(h, x, N, cts[c]);
    ops->round_to(r, x, N, cts[c]);
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++) {
      float d = c ? rc_fp16_decode(h[i]) : rc_bf16_decode(h[i]);
      bool same = isnan(r[i]) ? isnan(d) && signbit(d) == signbit(r[i]) &&
                                    (c || rc_f32_bits(d) >> 16 == rc_f32_bits(r[i]) >> 16)
                              : rc_f32_bits(d) == rc_f32_bits(r[i]);
      if (!same) bad = i;
    }
    CHECK(bad < 0, "cast_half %s: element %d (0x%08x) does not decode to round_to's value",
          c ? "fp16" : "bf16", bad, bad < 0 ? 0 : rc_f32_bits(x[bad]));
    /* control: the same comparison catches a bf16 cast that truncates */
    int caught = 0;
    for (int i = 0; i < N && !c; i++) {
      float d = rc_bf16_decode((uint16_t)(rc_f32_bits(x[i]) >> 16));
      caught += !isnan(r[i]) && rc_f32_bits(d) != rc_f32_bits(r[i]);
    }
    CHECK(c || caught > 0, "control: a truncating bf16 cast would pass the comparison");
    free(h), free(r);
  }
  free(x);
}

/* Random operands of an (M, N, K) GEMM with these transposes, each row
 * padded by pad elements (uniform in [-2, 2)). */
typedef struct {
  int lda, ldb;
  size_t na, nb;
  float *a, *b;
} gemm_operands;

static gemm_operands random_operands(int ta, int tb, int M, int N, int K, int pad, uint64_t *rng) {
  gemm_operands g;
  int rows_a = ta ? K : M, cols_a = ta ? M : K, rows_b = tb ? N : K, cols_b = tb ? K : N;
  g.lda = cols_a + pad, g.ldb = cols_b + pad;
  g.na = (size_t)rows_a * g.lda, g.nb = (size_t)rows_b * g.ldb;
  g.a = frand(g.na, rng, -2, 2), g.b = frand(g.nb, rng, -2, 2);
  return g;
}

/* gemm_half on the encodings is bitwise gemm on the fp32 operands (which it
 * rounds itself), in every layout with padded leading dimensions and with
 * beta 1; the control: gemm_half on operands encoded in the other format
 * gives other bits. */
static void test_gemm_half(const rc_ops *ops) {
  enum { M = 9, N = 11, K = 21, PAD = 3 };
  uint64_t rng = 57;
  rc_compute cts[2] = {RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int c = 0; c < 2; c++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        gemm_operands g = random_operands(ta, tb, M, N, K, PAD, &rng);
        float *c0 = frand(M * N, &rng, -1, 1);
        uint16_t *ha = malloc(g.na * 2), *hb = malloc(g.nb * 2), *oa = malloc(g.na * 2);
        ops->cast_half(ha, g.a, g.na, cts[c]), ops->cast_half(hb, g.b, g.nb, cts[c]);
        ops->cast_half(oa, g.a, g.na, cts[1 - c]);
        for (int beta = 0; beta < 2; beta++) {
          float *want = fdup(c0, M * N), *got = fdup(c0, M * N), *other = fdup(c0, M * N);
          ops->gemm(cts[c], ta, tb, M, N, K, 0.5f, g.a, g.lda, g.b, g.ldb, (float)beta, want, N);
          ops->gemm_half(cts[c], ta, tb, M, N, K, 0.5f, ha, g.lda, hb, g.ldb, (float)beta, got, N);
          ops->gemm_half(cts[c], ta, tb, M, N, K, 0.5f, oa, g.lda, hb, g.ldb, (float)beta, other,
                         N);
          CHECK(memcmp(got, want, M * N * 4) == 0,
                "gemm_half %s ta=%d tb=%d beta=%d differs from gemm", c ? "fp16" : "bf16", ta, tb,
                beta);
          CHECK(memcmp(other, want, M * N * 4) != 0,
                "control: gemm_half %s ta=%d tb=%d on the other format's bits equals gemm",
                c ? "fp16" : "bf16", ta, tb);
          free(want), free(got), free(other);
        }
        free(g.a), free(g.b), free(c0), free(ha), free(hb), free(oa);
      }
  float cz[4] = {1, 2, 3, 4}, cw[4] = {1, 2, 3, 4};
  ops->gemm(RC_COMPUTE_BF16, false, true, 2, 2, 0, 1.0f, NULL, 1, NULL, 1, 1.0f, cw, 2);
  ops->gemm_half(RC_COMPUTE_BF16, false, true, 2, 2, 0, 1.0f, NULL, 1, NULL, 1, 1.0f, cz, 2);
  CHECK(memcmp(cz, cw, sizeof cz) == 0, "gemm_half k=0 differs from gemm k=0");
}

/* gemm_half_residual is bitwise gemm_half (beta 0) and then add(C, R, C), in
 * every layout, with a C row stride beyond n whose padding it leaves alone.
 * Control: R is in the result (it differs from the plain product). */
static void test_gemm_half_residual(const rc_ops *ops) {
  enum { M = 7, N = 10, K = 19, PAD = 3, LDC = N + 2 };
  uint64_t rng = 61;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      gemm_operands g = random_operands(ta, tb, M, N, K, PAD, &rng);
      uint16_t *ha = malloc(g.na * 2), *hb = malloc(g.nb * 2);
      ops->cast_half(ha, g.a, g.na, RC_COMPUTE_BF16),
          ops->cast_half(hb, g.b, g.nb, RC_COMPUTE_BF16);
      float *R = frand(M * LDC, &rng, -4, 4), got[M * LDC], want[M * LDC], plain[M * LDC];
      memset(got, 0xab, sizeof got);
      ops->gemm_half_residual(RC_COMPUTE_BF16, ta, tb, M, N, K, ha, g.lda, hb, g.ldb, R, got, LDC);
      ops->gemm_half(RC_COMPUTE_BF16, ta, tb, M, N, K, 1.0f, ha, g.lda, hb, g.ldb, 0.0f, plain,
                     LDC);
      int bad = 0, pad_kept = 1, with_r = 0;
      for (int i = 0; i < M; i++) {
        ops->add(want + i * LDC, R + i * LDC, plain + i * LDC, N);
        bad += memcmp(got + i * LDC, want + i * LDC, N * 4) != 0;
        with_r += memcmp(got + i * LDC, plain + i * LDC, N * 4) != 0;
        pad_kept &= rc_f32_bits(got[i * LDC + N]) == 0xababababu;
      }
      CHECK(bad == 0, "gemm_half_residual ta=%d tb=%d: %d rows differ from gemm_half + add", ta, tb,
            bad);
      CHECK(pad_kept, "gemm_half_residual wrote past n into C's padding");
      CHECK(with_r == M, "control: gemm_half_residual ta=%d tb=%d left R out", ta, tb);
      free(g.a), free(g.b), free(ha), free(hb), free(R);
    }
}

/* gemm_to_half is bitwise cast_half of gemm_half (alpha 1, beta 0) in every
 * layout, written into a padded C whose padding it leaves alone; k = 0 gives
 * zeros. Control: the fp32 result's own bits are not all representable (so
 * the comparison sees the rounding). */
static void test_gemm_to_half(const rc_ops *ops) {
  enum { M = 7, N = 10, K = 19, PAD = 3, LDC = N + 2 };
  uint64_t rng = 59;
  rc_compute cts[2] = {RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int c = 0; c < 2; c++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        gemm_operands g = random_operands(ta, tb, M, N, K, PAD, &rng);
        float *f = falloc(M * N);
        uint16_t *ha = malloc(g.na * 2), *hb = malloc(g.nb * 2), got[M * LDC], want[M * N];
        ops->cast_half(ha, g.a, g.na, cts[c]), ops->cast_half(hb, g.b, g.nb, cts[c]);
        memset(got, 0xab, sizeof got);
        ops->gemm_to_half(cts[c], ta, tb, M, N, K, ha, g.lda, hb, g.ldb, got, LDC);
        ops->gemm_half(cts[c], ta, tb, M, N, K, 1.0f, ha, g.lda, hb, g.ldb, 0.0f, f, N);
        ops->cast_half(want, f, M * N, cts[c]);
        int bad = 0, pad_kept = 1, rounded = 0;
        for (int i = 0; i < M; i++) {
          bad += memcmp(got + i * LDC, want + i * N, N * 2) != 0;
          pad_kept &= got[i * LDC + N] == 0xabab && got[i * LDC + N + 1] == 0xabab;
        }
        for (int i = 0; i < M * N; i++)
          rounded += rc_f32_bits(c ? rc_fp16_decode(want[i]) : rc_bf16_decode(want[i])) !=
                     rc_f32_bits(f[i]);
        CHECK(bad == 0, "gemm_to_half %s ta=%d tb=%d: %d rows differ from cast_half(gemm_half)",
              c ? "fp16" : "bf16", ta, tb, bad);
        CHECK(pad_kept, "gemm_to_half wrote past n into C's padding");
        CHECK(rounded > 0, "control: gemm_half's result was already representable");
        free(g.a), free(g.b), free(f), free(ha), free(hb);
      }
  uint16_t z[4] = {1, 2, 3, 4};
  ops->gemm_to_half(RC_COMPUTE_BF16, false, true, 2, 2, 0, NULL, 1, NULL, 1, z, 2);
  CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0 && z[3] == 0, "gemm_to_half k=0 is not zeros");
}

/* ---- elementwise and reductions ---- */

/* ---- FP8 (E4M3): the scaled cast, the TN GEMM on bytes, the running amax ---- */

static void test_fp8(const rc_ops *ops) {
  uint64_t rng = 88;
  enum { R = 37, K = 53, LD = 64, N = 21 };
  float *x = frand(R * K, &rng, -600, 600);
  x[3] = 1e-4f, x[4] = -0.0f, x[5] = 1e6f; /* subnormal in e4m3, signed zero, saturating */
  uint8_t d[R * LD], t[K * LD];
  memset(d, 0xab, sizeof d), memset(t, 0xab, sizeof t);
  const float scale = 0.75f;
  ops->cast_e4m3(d, LD, x, K, R, K, scale, false);
  ops->cast_e4m3(t, LD, x, K, R, K, scale, true);
  int ok = 1, pad = 1, tr = 1;
  for (int r = 0; r < R; r++)
    for (int c = 0; c < LD; c++) {
      uint8_t b = d[r * LD + c];
      if (c >= K) {
        pad &= b == 0;
        continue;
      }
      float want = rc_round_e4m3(x[r * K + c] * scale);
      ok &= rc_f32_bits(rc_e4m3_decode(b)) == rc_f32_bits(want);
      tr &= t[c * LD + r] == b;
    }
  for (int c = 0; c < K; c++)
    for (int r = R; r < LD; r++) pad &= t[c * LD + r] == 0;
  CHECK(ok, "cast_e4m3: decode(byte) != rc_round_e4m3(x * scale)");
  CHECK(tr, "cast_e4m3 transposed is not the plain cast's transpose");
  CHECK(pad, "cast_e4m3 left padding bytes unwritten or non-zero");
  CHECK(d[5] == 0x7e && rc_e4m3_decode(d[4]) == 0.0f && (d[4] & 0x80),
        "cast_e4m3: saturation to 448 (0x7e) or the sign of -0 lost");
  ok = 1;
  for (int b = 0; b < 256; b++)
    if ((b & 0x7f) != 0x7f) ok &= rc_e4m3_encode(rc_e4m3_decode((uint8_t)b)) == b;
  CHECK(ok, "rc_e4m3_encode(rc_e4m3_decode(b)) != b for a finite byte");

  /* GEMM: C[m,n] = alpha * A[m,k] B[n,k]^T against a double loop over the
   * decoded bytes (products exact, so only the sum's rounding differs) */
  enum { M = 5, KK = 32 };
  float *a = frand(M * KK, &rng, -3, 3), *bsrc = frand(N * KK, &rng, -3, 3);
  uint8_t a8[M * KK], b8[N * KK];
  ops->cast_e4m3(a8, KK, a, KK, M, KK, 40.0f, false);
  ops->cast_e4m3(b8, KK, bsrc, KK, N, KK, 60.0f, false);
  float alpha = 1.0f / (40.0f * 60.0f), *c0 = falloc(M * N), *c1 = falloc(M * N),
        *acc = falloc(M * N), *scr = falloc(M * N);
  for (int i = 0; i < M * N; i++) c0[i] = NAN; /* beta = 0 never reads C */
  ops->gemm_e4m3(M, N, KK, alpha, a8, b8, 0.0f, c0, N);
  double worst = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double ref = 0, mag = 0;
      for (int p = 0; p < KK; p++) {
        double pr = (double)rc_e4m3_decode(a8[i * KK + p]) * rc_e4m3_decode(b8[j * KK + p]);
        ref += pr, mag += fabs(pr);
      }
      double e = fabs(c0[i * N + j] - alpha * ref) / (alpha * mag + 1e-30);
      worst = e > worst ? e : worst;
    }
  CHECK(worst < 1e-6, "gemm_e4m3 differs from the decoded double sum by %g", worst);
  /* beta = 1 is beta = 0 into scratch then add, bit for bit */
  for (int i = 0; i < M * N; i++) c1[i] = acc[i] = (float)i - 7.25f;
  ops->gemm_e4m3(M, N, KK, alpha, a8, b8, 1.0f, c1, N);
  ops->gemm_e4m3(M, N, KK, alpha, a8, b8, 0.0f, scr, N);
  ops->add(acc, acc, scr, M * N);
  CHECK(bits_equal(c1, acc, M * N), "gemm_e4m3 beta=1 != beta=0 + add");
  CHECK(!bits_equal(c1, c0, M * N), "negative control: beta=1 ignored C");

  /* running amax: folds into amax[0], NaN sticky */
  float am[1] = {700.0f};
  ops->amax_update(am, x, R * K);
  CHECK(am[0] == 1e6f, "amax_update = %g, want 1e6 (the data's max)", am[0]);
  am[0] = 2e6f;
  ops->amax_update(am, x, R * K);
  CHECK(am[0] == 2e6f, "amax_update lowered amax[0] to %g", am[0]);
  x[9] = NAN;
  ops->amax_update(am, x, R * K);
  CHECK(isnan(am[0]), "amax_update ignored a NaN");
  ops->amax_update(am, bsrc, N * KK);
  CHECK(isnan(am[0]), "amax_update forgot a NaN already in amax[0]");
  free(x), free(a), free(bsrc), free(c0), free(c1), free(acc), free(scr);
}

static void test_elementwise(const rc_ops *ops) {
  uint64_t rng = 21;
  enum { N = 1001 };
  float *x = frand(N, &rng, -300, 300), *y = falloc(N);

  ops->round_to(y, x, N, RC_COMPUTE_BF16);
  int ok = 1;
  for (int i = 0; i < N; i++) ok &= rc_f32_bits(y[i]) == rc_f32_bits(rc_round_bf16(x[i]));
  CHECK(ok, "round_to bf16 != rc_round_bf16");
  memcpy(y, x, sizeof(float) * N);
  ops->round_to(y, y, N, RC_COMPUTE_FP16); /* in place */
  ok = 1;
  for (int i = 0; i < N; i++) ok &= rc_f32_bits(y[i]) == rc_f32_bits(rc_round_fp16(x[i]));
  CHECK(ok, "round_to fp16 in place != rc_round_fp16");
  CHECK(!bits_equal(x, y, N), "negative control: fp16 rounding changed nothing");
  ops->round_to(y, x, N, RC_COMPUTE_FP32);
  CHECK(bits_equal(x, y, N), "round_to fp32 is not a copy");

  float a[5] = {1.0f, -7.5f, 3.0f, -0.0f, 2.0f};
  CHECK(ops->amax(a, 5) == 7.5f, "amax = %g, want 7.5", ops->amax(a, 5));
  a[2] = NAN;
  CHECK(isnan(ops->amax(a, 5)), "amax ignored a NaN");
  a[2] = INFINITY;
  CHECK(ops->count_nonfinite(a, 5) == 1, "count_nonfinite with one inf");
  a[0] = NAN;
  CHECK(ops->count_nonfinite(a, 5) == 2, "count_nonfinite with inf and NaN");

  float p[4] = {1, 2, 3, 4}, q[4] = {10, 20, 30, 40};
  ops->add(p, p, q, 4); /* out aliases a */
  CHECK(p[0] == 11 && p[3] == 44, "add aliasing out and a");
  ops->scale(p, 0.5f, 4);
  CHECK(p[0] == 5.5f && p[3] == 22, "scale");

  float src[3 * 5], dst[3 * 4];
  for (int i = 0; i < 15; i++) src[i] = (float)i;
  ffill(dst, 12, -1);
  ops->copy2d(dst, 4, src, 5, 3, 2);
  CHECK(dst[0] == 0 && dst[1] == 1 && dst[2] == -1 && dst[4] == 5 && dst[9] == 11 && dst[10] == -1,
        "copy2d with strides");

  /* sum and sumsq in double, index order: 2^25 + 1 + ... survives, which a
   * float accumulator (the negative control) loses. */
  float big[5] = {33554432.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  CHECK(ops->sum(big, 5) == 33554436.0, "sum not accumulated in double");
  float fs = 0.0f;
  for (int i = 0; i < 5; i++) fs += big[i];
  CHECK(fs != 33554436.0f, "negative control: float accumulation should lose the ones");
  float sq[3] = {3.0f, 4.0f, 0.1f};
  CHECK(ops->sumsq(sq, 3) == 9.0 + 16.0 + (double)0.1f * (double)0.1f, "sumsq in double");

  /* the batched forms return what the single calls do, slot by slot (an
   * empty tensor included); flipping one word of tensor 1 changes slot 1
   * and no other (the negative control: the slots are not all one value) */
  {
    const float *bx[4] = {x, big, sq, x + 7};
    size_t bn[4] = {16, 5, 0, 9}, bbytes[4] = {64, 20, 0, 36};
    double bsq[4];
    uint64_t bfp[4], bfp2[4];
    ops->sumsq_many(bsq, bx, bn, 4);
    ops->fingerprint_many(bfp, (const void *const *)bx, bbytes, 4);
    int same = 1;
    for (int i = 0; i < 4; i++)
      same &= bsq[i] == ops->sumsq(bx[i], bn[i]) && bfp[i] == ops->fingerprint(bx[i], bbytes[i]);
    CHECK(same, "sumsq_many / fingerprint_many differ from the single calls");
    big[2] = 2.0f;
    ops->fingerprint_many(bfp2, (const void *const *)bx, bbytes, 4);
    CHECK(bfp2[1] != bfp[1] && bfp2[0] == bfp[0] && bfp2[2] == bfp[2] && bfp2[3] == bfp[3],
          "fingerprint_many: a changed tensor changes its own slot only");
    ops->sumsq_many(bsq, bx, bn, 0); /* count 0 writes nothing and does not crash */
  }

  void *z = ops->alloc(64);
  const unsigned char *zb = z;
  int zero = 1;
  for (int i = 0; i < 64; i++) zero &= zb[i] == 0;
  CHECK(zero, "alloc is not zero-filled");
  ops->to_device(z, q, sizeof q);
  float back[4];
  ops->to_host(back, z, sizeof back);
  CHECK(bits_equal(back, q, 4), "to_device/to_host round trip");
  ops->zero(z, 16);
  ops->to_host(back, z, sizeof back);
  CHECK(back[0] == 0 && back[3] == 0, "zero");
  ops->sync();
  ops->free(z);
  free(x), free(y);
}

/* ---- embedding ---- */

static void test_embedding(const rc_ops *ops) {
  enum { V = 5, H = 3, T = 5 };
  int32_t ids[T] = {3, 1, 3, 3, 0};
  float table[V * H], out[T * H];
  for (int i = 0; i < V * H; i++) table[i] = (float)i;
  ops->embedding_forward(out, ids, table, T, H);
  CHECK(out[0] == 9 && out[3] == 3 && out[14] == 2, "embedding_forward rows");

  /* Repeated id 3 gets 1, 1e8, -1e8 in token order: (1 + 1e8) - 1e8 = 0 in
   * float, while the reverse order gives 1. dtable starts non-zero (+=). */
  float dout[T * H] = {1, 1, 1, 5, 5, 5, 1e8f, 1e8f, 1e8f, -1e8f, -1e8f, -1e8f, 2, 2, 2};
  float dtable[V * H];
  ffill(dtable, V * H, 0.0f);
  dtable[1 * H] = 0.5f;
  ops->embedding_backward(dtable, ids, dout, T, H, V);
  float in_order = ((0.0f + 1.0f) + 1e8f) + -1e8f, reversed = ((0.0f + -1e8f) + 1e8f) + 1.0f;
  CHECK(dtable[3 * H] == in_order && dtable[3 * H + 2] == in_order,
        "embedding_backward id 3: %g, want the increasing-t sum %g", dtable[3 * H], in_order);
  CHECK(in_order != reversed, "negative control: the order test cannot tell orders apart");
  CHECK(dtable[1 * H] == 5.5f && dtable[1 * H + 1] == 5.0f, "embedding_backward does not +=");
  CHECK(dtable[0] == 2.0f && dtable[2 * H] == 0.0f && dtable[4 * H] == 0.0f,
        "embedding_backward rows");
}

/* ---- RMSNorm ---- */

typedef struct {
  const rc_ops *ops;
  float *x, *w, *r, *out, *rstd;
  int T, H;
} rms_ctx;

static double rms_loss(void *p) {
  rms_ctx *c = p;
  c->ops->rmsnorm_forward(c->out, c->rstd, c->x, c->w, c->T, c->H, 1e-5f, NULL, c->H,
                          RC_COMPUTE_FP32);
  return proj(c->out, c->r, (size_t)c->T * c->H);
}

static void test_rmsnorm(const rc_ops *ops) {
  enum { T = 5, H = 12 };
  uint64_t rng = 31;
  rms_ctx c = {ops,
               frand(T * H, &rng, -1.5f, 1.5f),
               frand(H, &rng, 0.5f, 1.5f),
               frand(T * H, &rng, -1, 1),
               falloc(T * H),
               falloc(T),
               T,
               H};
  rms_loss(&c);
  double want[T * H];
  for (int t = 0; t < T; t++) {
    double ss = 0;
    for (int j = 0; j < H; j++) ss += (double)c.x[t * H + j] * c.x[t * H + j];
    double r = 1.0 / sqrt(ss / H + 1e-5);
    for (int j = 0; j < H; j++) want[t * H + j] = c.x[t * H + j] * r * c.w[j];
  }
  CHECK(max_err(c.out, want, T * H) < 1e-6, "rmsnorm_forward error %g",
        max_err(c.out, want, T * H));
  { /* out_half: bitwise cast_half of out, with out written or not (NULL) */
    uint16_t both[T * H], only[T * H], want_h[T * H];
    float out2[T * H], rstd2[T];
    ops->cast_half(want_h, c.out, T * H, RC_COMPUTE_BF16);
    ops->rmsnorm_forward(out2, rstd2, c.x, c.w, T, H, 1e-5f, both, H, RC_COMPUTE_BF16);
    ops->rmsnorm_forward(NULL, rstd2, c.x, c.w, T, H, 1e-5f, only, H, RC_COMPUTE_BF16);
    CHECK(memcmp(both, want_h, sizeof both) == 0 && memcmp(only, want_h, sizeof only) == 0 &&
              memcmp(out2, c.out, sizeof out2) == 0,
          "rmsnorm_forward out_half is not cast_half(out)");
    /* control: the fp16 encoding of the same values differs */
    ops->rmsnorm_forward(NULL, rstd2, c.x, c.w, T, H, 1e-5f, only, H, RC_COMPUTE_FP16);
    CHECK(memcmp(only, want_h, sizeof only) != 0, "control: fp16 out_half equals bf16's");
    /* ld_half 2H: rows 2H apart (one half of a concatenation), the other
     * half of each row left as it was */
    uint16_t cat[T * 2 * H];
    memset(cat, 0xab, sizeof cat);
    ops->rmsnorm_forward(NULL, rstd2, c.x, c.w, T, H, 1e-5f, cat + H, 2 * H, RC_COMPUTE_BF16);
    int rows_ok = 1, gaps_ok = 1;
    for (int t = 0; t < T; t++) {
      rows_ok &= memcmp(cat + t * 2 * H + H, want_h + t * H, sizeof(uint16_t) * H) == 0;
      for (int j = 0; j < H; j++) gaps_ok &= cat[t * 2 * H + j] == 0xabab;
    }
    CHECK(rows_ok && gaps_ok, "rmsnorm_forward with ld_half 2H: rows %s, other half %s",
          rows_ok ? "ok" : "wrong", gaps_ok ? "kept" : "written");
  }

  float *dx = falloc(T * H), *dw = falloc(H);
  ops->rmsnorm_backward(dx, dw, c.r, c.x, c.w, c.rstd, T, H, H, NULL, RC_COMPUTE_FP32, true);
  expect_grad("rmsnorm dx", rms_loss, &c, c.x, T * H, dx);
  expect_grad("rmsnorm dw", rms_loss, &c, c.w, H, dw);

  /* += : a second call into the same buffers adds the same amount again. */
  float *dx2 = fdup(dx, T * H), *dw2 = fdup(dw, H);
  ops->rmsnorm_backward(dx2, dw2, c.r, c.x, c.w, c.rstd, T, H, H, NULL, RC_COMPUTE_FP32, true);
  int ok = 1;
  for (int i = 0; i < T * H; i++) ok &= dx2[i] == dx[i] + dx[i];
  for (int i = 0; i < H; i++) ok &= fabsf(dw2[i] - 2 * dw[i]) <= 1e-6f * (1 + fabsf(dw[i]));
  CHECK(ok, "rmsnorm_backward does not accumulate");
  { /* dx_accumulate false: dx written as from zero (bitwise the zeroed
     * buffer's result), whatever it held, NaN included; dw still adds */
    float *dx6 = falloc(T * H), *dw6 = fdup(dw, H);
    for (int i = 0; i < T * H; i++) dx6[i] = i % 2 ? NAN : -7.0f;
    ops->rmsnorm_backward(dx6, dw6, c.r, c.x, c.w, c.rstd, T, H, H, NULL, RC_COMPUTE_FP32, false);
    CHECK(memcmp(dx6, dx, sizeof(float) * T * H) == 0 && memcmp(dw6, dw2, sizeof(float) * H) == 0,
          "rmsnorm_backward without dx_accumulate: not the zeroed buffer's dx (or dw not added)");
    for (int i = 0; i < T * H; i++) dx6[i] = -7.0f;
    ops->rmsnorm_backward(dx6, dw6, c.r, c.x, c.w, c.rstd, T, H, H, NULL, RC_COMPUTE_FP32, true);
    CHECK(memcmp(dx6, dx, sizeof(float) * T * H) != 0, "control: accumulating onto -7 gives dx");
    free(dx6), free(dw6);
  }
  { /* dx_half: bitwise cast_half of the accumulated dx, whatever dx held;
     * control: the encoding of dx before the add differs */
    float *dx3 = fdup(dx, T * H), *dw3 = fdup(dw, H);
    uint16_t got[T * H], want_h[T * H], before[T * H];
    ops->cast_half(before, dx3, T * H, RC_COMPUTE_BF16);
    ops->rmsnorm_backward(dx3, dw3, c.r, c.x, c.w, c.rstd, T, H, H, got, RC_COMPUTE_BF16, true);
    ops->cast_half(want_h, dx3, T * H, RC_COMPUTE_BF16);
    CHECK(memcmp(dx3, dx2, sizeof(float) * T * H) == 0 && memcmp(got, want_h, sizeof got) == 0,
          "rmsnorm_backward dx_half is not cast_half of the updated dx (or changed dx)");
    CHECK(memcmp(got, before, sizeof got) != 0, "control: dx_half is the encoding before the add");
    /* ld_dout 2H: dout read as one half of a concatenation, bitwise the
     * contiguous dout's result; control: the other half gives other bits */
    float cat[T * 2 * H], *dx4 = fdup(dx, T * H), *dw4 = fdup(dw, H), *dx5 = fdup(dx, T * H),
                          *dw5 = fdup(dw, H);
    for (int t = 0; t < T; t++)
      for (int j = 0; j < H; j++)
        cat[t * 2 * H + j] = -c.r[t * H + j], cat[t * 2 * H + H + j] = c.r[t * H + j];
    ops->rmsnorm_backward(dx4, dw4, cat + H, c.x, c.w, c.rstd, T, H, 2 * H, NULL, RC_COMPUTE_FP32,
                          true);
    ops->rmsnorm_backward(dx5, dw5, cat, c.x, c.w, c.rstd, T, H, 2 * H, NULL, RC_COMPUTE_FP32,
                          true);
    CHECK(memcmp(dx4, dx2, sizeof(float) * T * H) == 0 && memcmp(dw4, dw2, sizeof(float) * H) == 0,
          "rmsnorm_backward with ld_dout 2H differs from the contiguous dout's");
    CHECK(memcmp(dx5, dx2, sizeof(float) * T * H) != 0,
          "control: the other half gives the same dx");
    free(dx3), free(dw3), free(dx4), free(dw4), free(dx5), free(dw5);
  }
  free(c.x), free(c.w), free(c.r), free(c.out), free(c.rstd), free(dx), free(dw), free(dx2),
      free(dw2);
}

/* ---- RoPE ---- */

static void test_rope(const rc_ops *ops) {
  enum { B = 2, S = 6, NH = 2, HD = 8, ROW = 3 * NH * HD, N = B * S * ROW };
  const float theta = 10000.0f;
  uint64_t rng = 41;
  float *x = frand(N, &rng, -1, 1), *y = fdup(x, N), *r = frand(N, &rng, -1, 1);
  ops->rope_forward(y, NULL, RC_COMPUTE_FP32, B, S, NH, HD, theta, NULL);
  double *want = calloc(N, sizeof(double));
  if (!want) abort();
  for (int b = 0; b < B; b++)
    for (int s = 0; s < S; s++)
      for (int c = 0; c < ROW; c++) {
        size_t i = ((size_t)b * S + s) * ROW + c;
        int d = c % HD, pair = d / 2;
        if (c >= 2 * NH * HD) { /* v: untouched */
          want[i] = x[i];
          continue;
        }
        double ang = s * pow(theta, -2.0 * pair / HD);
        double x0 = x[i - d % 2], x1 = x[i - d % 2 + 1];
        want[i] = d % 2 == 0 ? x0 * cos(ang) - x1 * sin(ang) : x0 * sin(ang) + x1 * cos(ang);
      }
  CHECK(max_err(y, want, N) < 1e-6, "rope_forward error %g", max_err(y, want, N));
  CHECK(bits_equal(y + 2 * NH * HD, x + 2 * NH * HD, NH * HD), "rope_forward touched v");

  /* The backward is the transpose: <R x, r> == <x, R^T r>. */
  float *g = fdup(r, N);
  ops->rope_backward(g, B, S, NH, HD, theta, NULL, RC_COMPUTE_FP32);
  double lhs = proj(y, r, N), rhs = proj(x, g, N);
  CHECK(fabs(lhs - rhs) < 1e-5 * (1 + fabs(lhs)), "rope_backward is not the adjoint: %g vs %g", lhs,
        rhs);
  /* Negative control: using the forward rotation as the backward fails it. */
  float *wrong = fdup(r, N);
  ops->rope_forward(wrong, NULL, RC_COMPUTE_FP32, B, S, NH, HD, theta, NULL);
  double bad = proj(x, wrong, N);
  CHECK(!(fabs(lhs - bad) < 1e-5 * (1 + fabs(lhs))), "negative control: forward passed as adjoint");
  free(x), free(y), free(r), free(want), free(g), free(wrong);
}

/* ---- attention ---- */

typedef struct {
  const rc_ops *ops;
  float *qkv, *r, *out, *lse;
  int B, S, NH, HD;
} attn_ctx;

static double attn_loss(void *p) {
  attn_ctx *c = p;
  c->ops->attention_forward(RC_COMPUTE_FP32, c->out, c->lse, c->qkv, NULL, c->B, c->S, c->NH, c->HD,
                            NULL, RC_COMPUTE_FP32);
  return proj(c->out, c->r, (size_t)c->B * c->S * c->NH * c->HD);
}

static void test_attention(const rc_ops *ops) {
  enum { B = 2, S = 5, NH = 2, HD = 4, ROW = 3 * NH * HD, N = B * S * ROW, NO = B * S * NH * HD };
  uint64_t rng = 51;
  attn_ctx c = {ops,
                frand(N, &rng, -1.5f, 1.5f),
                frand(NO, &rng, -1, 1),
                falloc(NO),
                falloc(B * NH * S),
                B,
                S,
                NH,
                HD};
  attn_loss(&c);

  double want[NO], want_lse[B * NH * S];
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < S; i++) {
        const float *q = c.qkv + ((size_t)b * S + i) * ROW + h * HD;
        double sc[S], mx = -INFINITY, se = 0;
        for (int j = 0; j <= i; j++) {
          const float *k = c.qkv + ((size_t)b * S + j) * ROW + NH * HD + h * HD;
          sc[j] = 0;
          for (int d = 0; d < HD; d++) sc[j] += (double)q[d] * k[d];
          sc[j] /= sqrt(HD);
          if (sc[j] > mx) mx = sc[j];
        }
        for (int j = 0; j <= i; j++) se += exp(sc[j] - mx);
        want_lse[(b * NH + h) * S + i] = mx + log(se);
        for (int d = 0; d < HD; d++) {
          double o = 0;
          for (int j = 0; j <= i; j++)
            o += exp(sc[j] - mx) / se * c.qkv[((size_t)b * S + j) * ROW + 2 * NH * HD + h * HD + d];
          want[((size_t)b * S + i) * NH * HD + h * HD + d] = o;
        }
      }
  CHECK(max_err(c.out, want, NO) < 1e-5, "attention_forward out error %g",
        max_err(c.out, want, NO));
  CHECK(max_err(c.lse, want_lse, B * NH * S) < 1e-5, "attention_forward lse error %g",
        max_err(c.lse, want_lse, B * NH * S));

  float *dqkv = falloc(N);
  ffill(dqkv, N, NAN); /* writes: every element must be overwritten */
  ops->attention_backward(RC_COMPUTE_FP32, dqkv, c.r, c.out, c.lse, c.qkv, NULL, B, S, NH, HD, NULL,
                          0.0f, NULL, RC_COMPUTE_FP32);
  CHECK(count_nan(dqkv, N) == 0, "attention_backward left %zu elements unwritten",
        count_nan(dqkv, N));
  expect_grad("attention dqkv", attn_loss, &c, c.qkv, N, dqkv);
  free(c.qkv), free(c.r), free(c.out), free(c.lse), free(dqkv);
}

/* The BF16 attention contract (ops.h): q, k, v and dout enter rounded, so
 * inputs nudged off bf16 values give the bits of the rounded inputs; the
 * result stays within bf16 tolerance of fp32 but is not fp32's. Negative
 * control: the FP32 path does see the nudge. */
static void test_attention_bf16(const rc_ops *ops) {
  enum { B = 2, S = 37, NH = 2, HD = 16, ROW = 3 * NH * HD, N = B * S * ROW, NO = B * S * NH * HD };
  enum { NL = B * NH * S };
  uint64_t rng = 77;
  float *rounded = frand(N, &rng, -1.5f, 1.5f), *dout_r = frand(NO, &rng, -1, 1);
  for (size_t i = 0; i < N; i++) rounded[i] = rc_round_bf16(rounded[i]);
  for (size_t i = 0; i < NO; i++) dout_r[i] = rc_round_bf16(dout_r[i]);
  float *nudged = fdup(rounded, N), *dout_n = fdup(dout_r, NO);
  for (size_t i = 0; i < N; i++) nudged[i] *= 1.0f + 1e-4f; /* well inside half a bf16 ulp */
  for (size_t i = 0; i < NO; i++) dout_n[i] *= 1.0f + 1e-4f;
  float *o_r = falloc(NO), *o_n = falloc(NO), *o_f = falloc(NO), *l_r = falloc(NL),
        *l_n = falloc(NL), *l_f = falloc(NL);
  float *d_r = falloc(N), *d_n = falloc(N), *d_f = falloc(N);
  ops->attention_forward(RC_COMPUTE_BF16, o_r, l_r, rounded, NULL, B, S, NH, HD, NULL,
                         RC_COMPUTE_FP32);
  ops->attention_forward(RC_COMPUTE_BF16, o_n, l_n, nudged, NULL, B, S, NH, HD, NULL,
                         RC_COMPUTE_FP32);
  CHECK(memcmp(o_r, o_n, sizeof(float) * NO) == 0 && memcmp(l_r, l_n, sizeof(float) * NL) == 0,
        "bf16 attention forward did not round q, k, v");
  ops->attention_backward(RC_COMPUTE_BF16, d_r, dout_r, o_r, l_r, rounded, NULL, B, S, NH, HD, NULL,
                          0.0f, NULL, RC_COMPUTE_FP32);
  ops->attention_backward(RC_COMPUTE_BF16, d_n, dout_n, o_r, l_r, nudged, NULL, B, S, NH, HD, NULL,
                          0.0f, NULL, RC_COMPUTE_FP32);
  CHECK(memcmp(d_r, d_n, sizeof(float) * N) == 0,
        "bf16 attention backward did not round its inputs");
  { /* D reads out rounded to bf16 (ops.h): the output's bf16 encoding
     * (out_bf16, out NULL) and a nudge of out within its rounding give the
     * same bits; a forward with out NULL writes the same out_half.
     * Negative control: fp32 attention sees the nudge. */
    uint16_t *oh = malloc(sizeof(uint16_t) * NO), *oh2 = malloc(sizeof(uint16_t) * NO);
    float *o_nudged = falloc(NO), *d_h = falloc(N), *d_o = falloc(N), *l_2 = falloc(NL);
    ops->attention_forward(RC_COMPUTE_BF16, o_r, l_r, rounded, NULL, B, S, NH, HD, oh,
                           RC_COMPUTE_BF16);
    ops->attention_forward(RC_COMPUTE_BF16, NULL, l_2, rounded, NULL, B, S, NH, HD, oh2,
                           RC_COMPUTE_BF16);
    CHECK(memcmp(oh, oh2, sizeof(uint16_t) * NO) == 0 && memcmp(l_r, l_2, sizeof(float) * NL) == 0,
          "bf16 attention forward with out NULL wrote another out_half or lse");
    for (size_t i = 0; i < NO; i++) o_nudged[i] = rc_round_bf16(o_r[i]) * (1.0f + 1e-4f);
    ops->attention_backward(RC_COMPUTE_BF16, d_h, dout_r, NULL, l_r, rounded, NULL, B, S, NH, HD,
                            oh, 0.0f, NULL, RC_COMPUTE_FP32);
    ops->attention_backward(RC_COMPUTE_BF16, d_o, dout_r, o_nudged, l_r, rounded, NULL, B, S, NH,
                            HD, NULL, 0.0f, NULL, RC_COMPUTE_FP32);
    CHECK(memcmp(d_h, d_r, sizeof(float) * N) == 0,
          "bf16 attention backward from out_bf16 differs from the one from out");
    CHECK(memcmp(d_o, d_r, sizeof(float) * N) == 0,
          "bf16 attention backward's D did not round out to bf16");
    ops->attention_backward(RC_COMPUTE_FP32, d_h, dout_r, o_r, l_r, rounded, NULL, B, S, NH, HD,
                            NULL, 0.0f, NULL, RC_COMPUTE_FP32);
    ops->attention_backward(RC_COMPUTE_FP32, d_o, dout_r, o_nudged, l_r, rounded, NULL, B, S, NH,
                            HD, NULL, 0.0f, NULL, RC_COMPUTE_FP32);
    CHECK(memcmp(d_h, d_o, sizeof(float) * N) != 0,
          "negative control: fp32 attention backward ignored a nudge of out");
    /* dqkv_half: RoPE's backward of the gradient in 16 bits, as
     * attention_backward then rope_backward give it (dqkv NULL) */
    uint16_t *fh = malloc(sizeof(uint16_t) * N), *wh = malloc(sizeof(uint16_t) * N);
    ops->attention_backward(RC_COMPUTE_BF16, NULL, dout_r, o_r, l_r, rounded, NULL, B, S, NH, HD,
                            NULL, 500.0f, fh, RC_COMPUTE_FP16);
    float *d_w = fdup(d_r, N);
    ops->rope_backward(d_w, B, S, NH, HD, 500.0f, wh, RC_COMPUTE_FP16);
    CHECK(memcmp(fh, wh, sizeof(uint16_t) * N) == 0,
          "attention_backward's dqkv_half is not rope_backward's of its dqkv");
    ops->cast_half(wh, d_r, N, RC_COMPUTE_FP16);
    CHECK(memcmp(fh, wh, sizeof(uint16_t) * N) != 0,
          "control: dqkv_half equals the unrotated gradient's encoding");
    free(fh), free(wh), free(d_w);
    free(oh), free(oh2), free(o_nudged), free(d_h), free(d_o), free(l_2);
  }
  /* against fp32: close, not equal */
  ops->attention_forward(RC_COMPUTE_FP32, o_f, l_f, rounded, NULL, B, S, NH, HD, NULL,
                         RC_COMPUTE_FP32);
  ops->attention_backward(RC_COMPUTE_FP32, d_f, dout_r, o_f, l_f, rounded, NULL, B, S, NH, HD, NULL,
                          0.0f, NULL, RC_COMPUTE_FP32);
  double eo = 0, mo = 0, ed = 0, md = 0;
  for (size_t i = 0; i < NO; i++) eo = fmax(eo, fabs(o_r[i] - o_f[i])), mo = fmax(mo, fabs(o_f[i]));
  for (size_t i = 0; i < N; i++) ed = fmax(ed, fabs(d_r[i] - d_f[i])), md = fmax(md, fabs(d_f[i]));
  CHECK(eo / mo < 1e-2 && ed / md < 2e-2, "bf16 attention strays from fp32: out %g, dqkv %g",
        eo / mo, ed / md);
  CHECK(eo / mo > 1e-6 && ed / md > 1e-6,
        "bf16 attention equals fp32 (out %g, dqkv %g): P and dS were not rounded", eo / mo,
        ed / md);
  /* negative control: fp32 sees the nudge */
  float *o_fn = falloc(NO), *l_fn = falloc(NL);
  ops->attention_forward(RC_COMPUTE_FP32, o_fn, l_fn, nudged, NULL, B, S, NH, HD, NULL,
                         RC_COMPUTE_FP32);
  CHECK(memcmp(o_f, o_fn, sizeof(float) * NO) != 0,
        "negative control: fp32 ignored a nudge of q, k, v");
  free(rounded), free(dout_r), free(nudged), free(dout_n), free(o_r), free(o_n), free(o_f);
  free(l_r), free(l_n), free(l_f), free(d_r), free(d_n), free(d_f), free(o_fn), free(l_fn);
}

/* rope_forward's heads and rope_backward's 16-bit gradient (ops.h): heads
 * are the bf16 encoding of the rotated qkv in [3][B][nh][S][hd], and the
 * BF16 attention reads them to the bit as it reads that qkv; the half
 * gradient is cast_half of the rotated one. Negative controls: heads from a
 * rotation-free qkv, and attention from heads of another qkv, differ. */
static void test_rope_heads(const rc_ops *ops) {
  enum { B = 2, S = 19, NH = 2, HD = 16, ROW = 3 * NH * HD, N = B * S * ROW, NO = B * S * NH * HD };
  enum { NL = B * NH * S };
  const float theta = 10000.0f;
  uint64_t rng = 43;
  float *x = frand(N, &rng, -1.5f, 1.5f), *rot = fdup(x, N), *y = fdup(x, N);
  float *dout = frand(NO, &rng, -1, 1);
  uint16_t *heads = malloc(N * 2), *half = malloc(N * 2), *want = malloc(N * 2);
  if (!heads || !half || !want) abort();
  ops->rope_forward(rot, NULL, RC_COMPUTE_FP32, B, S, NH, HD, theta, NULL);
  ops->rope_forward(y, NULL, RC_COMPUTE_FP32, B, S, NH, HD, theta, heads);
  int ok = 1, moved = 0;
  for (int part = 0; part < 3; part++)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        for (int s = 0; s < S; s++)
          for (int d = 0; d < HD; d++) {
            size_t src = ((size_t)b * S + s) * ROW + ((size_t)part * NH + h) * HD + d;
            size_t dst = ((((size_t)part * B + b) * NH + h) * S + s) * HD + d;
            ok &= heads[dst] == rc_bf16_encode(rot[src]);
            moved += heads[dst] != rc_bf16_encode(x[src]);
          }
  CHECK(ok, "rope_forward heads are not the bf16 rotated qkv in head layout");
  CHECK(moved > 0, "negative control: heads equal the unrotated qkv's");
  /* a 16-bit qkv (a half qkv linear's output): the heads of its decoded values */
  for (int k = 0; k < 2; k++) {
    rc_compute ct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    uint16_t *xh = malloc(N * 2), *h16 = malloc(N * 2);
    float *dec = falloc(N), *scratch = falloc(N);
    if (!xh || !h16) abort();
    ops->cast_half(xh, x, N, ct);
    for (size_t i = 0; i < N; i++) dec[i] = rc_half_decode(xh[i], k);
    ops->rope_forward(dec, NULL, RC_COMPUTE_FP32, B, S, NH, HD, theta, want);
    ops->rope_forward(scratch, xh, ct, B, S, NH, HD, theta, h16);
    CHECK(memcmp(h16, want, N * 2) == 0,
          "rope_forward from a %s qkv: not the heads of its decoded values", k ? "fp16" : "bf16");
    CHECK(memcmp(h16, heads, N * 2) != 0,
          "negative control: the %s qkv's heads equal the fp32 qkv's", k ? "fp16" : "bf16");
    free(xh), free(h16), free(dec), free(scratch);
  }
  /* attention from heads: the bits of attention from the rotated qkv */
  float *o1 = falloc(NO), *o2 = falloc(NO), *l1 = falloc(NL), *l2 = falloc(NL);
  float *d1 = falloc(N), *d2 = falloc(N);
  ops->attention_forward(RC_COMPUTE_BF16, o1, l1, rot, NULL, B, S, NH, HD, NULL, RC_COMPUTE_FP32);
  ops->attention_forward(RC_COMPUTE_BF16, o2, l2, NULL, heads, B, S, NH, HD, NULL, RC_COMPUTE_FP32);
  CHECK(bits_equal(o1, o2, NO) && bits_equal(l1, l2, NL), "attention_forward from heads differs");
  /* out_half: cast_half of out */
  uint16_t *oh = malloc(NO * 2), *oh_want = malloc(NO * 2);
  if (!oh || !oh_want) abort();
  ops->attention_forward(RC_COMPUTE_BF16, o2, l2, NULL, heads, B, S, NH, HD, oh, RC_COMPUTE_FP16);
  ops->cast_half(oh_want, o1, NO, RC_COMPUTE_FP16);
  CHECK(memcmp(oh, oh_want, NO * 2) == 0, "attention_forward out_half is not cast_half of out");
  ops->cast_half(oh_want, o1, NO, RC_COMPUTE_BF16);
  CHECK(memcmp(oh, oh_want, NO * 2) != 0, "negative control: fp16 out_half equals the bf16 cast");
  free(oh), free(oh_want);
  ops->attention_backward(RC_COMPUTE_BF16, d1, dout, o1, l1, rot, NULL, B, S, NH, HD, NULL, 0.0f,
                          NULL, RC_COMPUTE_FP32);
  ops->attention_backward(RC_COMPUTE_BF16, d2, dout, o1, l1, NULL, heads, B, S, NH, HD, NULL, 0.0f,
                          NULL, RC_COMPUTE_FP32);
  CHECK(bits_equal(d1, d2, N), "attention_backward from heads differs");
  float *other = fdup(x, N);
  for (size_t i = 0; i < N; i++) other[i] *= 1.01f;
  ops->rope_forward(other, NULL, RC_COMPUTE_FP32, B, S, NH, HD, theta, heads);
  ops->attention_forward(RC_COMPUTE_BF16, o2, l2, NULL, heads, B, S, NH, HD, NULL, RC_COMPUTE_FP32);
  CHECK(!bits_equal(o1, o2, NO), "negative control: heads of another qkv gave the same output");
  /* backward: half gradient = cast_half(rotated back), bf16 and fp16 */
  for (int k = 0; k < 2; k++) {
    rc_compute ct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    float *g = fdup(x, N), *g2 = fdup(x, N);
    ops->rope_backward(g, B, S, NH, HD, theta, NULL, RC_COMPUTE_FP32);
    ops->cast_half(want, g, N, ct);
    ops->rope_backward(g2, B, S, NH, HD, theta, half, ct);
    CHECK(memcmp(half, want, N * 2) == 0, "rope_backward's %s gradient is not cast_half of it",
          k ? "fp16" : "bf16");
    ops->cast_half(want, x, N, ct);
    CHECK(memcmp(half, want, N * 2) != 0, "negative control: the half gradient is unrotated");
    free(g), free(g2);
  }
  free(x), free(rot), free(y), free(dout), free(heads), free(half), free(want), free(o1), free(o2);
  free(l1), free(l2), free(d1), free(d2), free(other);
}

/* ---- SwiGLU ---- */

typedef struct {
  const rc_ops *ops;
  float *in, *r, *out;
  int T, F;
} swiglu_ctx;

static double swiglu_loss(void *p) {
  swiglu_ctx *c = p;
  c->ops->swiglu_forward(c->out, c->in, NULL, c->T, c->F, NULL, RC_COMPUTE_FP32);
  return proj(c->out, c->r, (size_t)c->T * c->F);
}

static void test_swiglu(const rc_ops *ops) {
  enum { T = 3, F = 7 };
  uint64_t rng = 61;
  swiglu_ctx c = {ops, frand(T * 2 * F, &rng, -3, 3), frand(T * F, &rng, -1, 1), falloc(T * F), T,
                  F};
  swiglu_loss(&c);
  double want[T * F];
  for (int t = 0; t < T; t++)
    for (int j = 0; j < F; j++) {
      double g = c.in[t * 2 * F + j], u = c.in[t * 2 * F + F + j];
      want[t * F + j] = g / (1 + exp(-g)) * u;
    }
  CHECK(max_err(c.out, want, T * F) < 1e-6, "swiglu_forward error %g", max_err(c.out, want, T * F));
  float *din = falloc(T * 2 * F);
  ffill(din, T * 2 * F, NAN);
  ops->swiglu_backward(din, c.r, c.in, NULL, T, F, NULL, NULL, RC_COMPUTE_FP32);
  CHECK(count_nan(din, T * 2 * F) == 0, "swiglu_backward left elements unwritten");
  expect_grad("swiglu din", swiglu_loss, &c, c.in, T * 2 * F, din);
  { /* the 16-bit outputs: bitwise cast_half of the fp32 ones, fp32 written or not */
    swiglu_loss(&c);
    float din2[T * 2 * F], out2[T * F];
    ops->swiglu_backward(din2, c.r, c.in, NULL, T, F, NULL, NULL, RC_COMPUTE_FP32);
    uint16_t fh[T * F], fo[T * F], fw[T * F], bh[T * 2 * F], bo[T * 2 * F], bw[T * 2 * F];
    ops->cast_half(fw, c.out, T * F, RC_COMPUTE_FP16);
    ops->cast_half(bw, din2, T * 2 * F, RC_COMPUTE_FP16);
    ops->swiglu_forward(out2, c.in, NULL, T, F, fh, RC_COMPUTE_FP16);
    ops->swiglu_forward(NULL, c.in, NULL, T, F, fo, RC_COMPUTE_FP16);
    ops->swiglu_backward(din2, c.r, c.in, NULL, T, F, bh, NULL, RC_COMPUTE_FP16);
    ops->swiglu_backward(NULL, c.r, c.in, NULL, T, F, bo, NULL, RC_COMPUTE_FP16);
    CHECK(memcmp(fh, fw, sizeof fh) == 0 && memcmp(fo, fw, sizeof fo) == 0,
          "swiglu_forward out_half is not cast_half(out)");
    CHECK(memcmp(bh, bw, sizeof bh) == 0 && memcmp(bo, bw, sizeof bo) == 0,
          "swiglu_backward din_half is not cast_half(din)");
    ops->swiglu_forward(NULL, c.in, NULL, T, F, fo, RC_COMPUTE_BF16);
    CHECK(memcmp(fo, fw, sizeof fo) != 0, "control: bf16 out_half equals fp16's");
  }
  { /* a 16-bit input (in NULL): bitwise the fp32 input of the decoded
     * values, forward and backward, both outputs; control: the undecoded
     * input gives other bits */
    rc_compute cts[2] = {RC_COMPUTE_BF16, RC_COMPUTE_FP16};
    for (int k = 0; k < 2; k++) {
      uint16_t ih[T * 2 * F], oh[T * F], ow[T * F], dh[T * 2 * F], dw[T * 2 * F];
      float dec[T * 2 * F], o1[T * F], o2[T * F], o3[T * F], d1[T * 2 * F], d2[T * 2 * F];
      ops->cast_half(ih, c.in, T * 2 * F, cts[k]);
      for (int i = 0; i < T * 2 * F; i++)
        dec[i] = k ? rc_fp16_decode(ih[i]) : rc_bf16_decode(ih[i]);
      ops->swiglu_forward(o1, dec, NULL, T, F, ow, cts[k]);
      ops->swiglu_forward(o2, NULL, ih, T, F, oh, cts[k]);
      uint16_t rh[T * F];
      ops->swiglu_backward(d1, c.r, dec, NULL, T, F, dw, NULL, cts[k]);
      ops->swiglu_backward(d2, c.r, NULL, ih, T, F, dh, rh, cts[k]);
      /* the forward's output recomputed by the backward (a half fc2's saved
       * input): bitwise the forward's out_half; control: the other type's */
      CHECK(memcmp(rh, oh, sizeof oh) == 0,
            "swiglu_backward's recomputed out_half differs from swiglu_forward's (%s)",
            k ? "fp16" : "bf16");
      uint16_t dx[T * 2 * F];
      ops->swiglu_backward(NULL, c.r, NULL, ih, T, F, dx, rh, cts[1 - k]);
      CHECK(memcmp(rh, oh, sizeof oh) != 0, "control: the other 16-bit type recomputes the same");
      CHECK(memcmp(o1, o2, sizeof o1) == 0 && memcmp(oh, ow, sizeof oh) == 0,
            "swiglu_forward on a %s input differs from its decoded values'", k ? "fp16" : "bf16");
      CHECK(memcmp(d1, d2, sizeof d1) == 0 && memcmp(dh, dw, sizeof dh) == 0,
            "swiglu_backward on a %s input differs from its decoded values'", k ? "fp16" : "bf16");
      ops->swiglu_forward(o3, c.in, ih, T, F, NULL, cts[k]); /* in given: in_half ignored */
      CHECK(memcmp(o3, c.out, sizeof o3) == 0, "swiglu_forward with in given read in_half");
      CHECK(memcmp(o2, c.out, sizeof o2) != 0, "control: the %s input changes nothing",
            k ? "fp16" : "bf16");
    }
  }
  free(c.in), free(c.r), free(c.out), free(din);
}

/* ---- cross-entropy ---- */

typedef struct {
  const rc_ops *ops;
  float *logits, *work, *losses, *correct, *dloss;
  int32_t *labels;
  int T, V;
} ce_ctx;

static double ce_loss(void *p) { /* sum_t dloss[t] * loss[t] */
  ce_ctx *c = p;
  memcpy(c->work, c->logits, sizeof(float) * c->T * c->V);
  c->ops->cross_entropy(c->losses, c->correct, c->work, c->labels, c->dloss, c->T, c->V, NULL,
                        RC_COMPUTE_FP32);
  return proj(c->losses, c->dloss, (size_t)c->T);
}

static void test_cross_entropy(const rc_ops *ops) {
  enum { T = 4, V = 9 };
  uint64_t rng = 71;
  int32_t labels[T] = {2, 0, 8, 5};
  float dloss[T] = {0.7f, -1.3f, 0.0f, 2.0f}; /* row 2 has dloss 0 */
  ce_ctx c = {ops, frand(T * V, &rng, -3, 3), falloc(T * V), falloc(T), falloc(T), dloss, labels, T,
              V};
  c.logits[0 * V + 4] = 5.0f; /* row 0: argmax 4 != label 2 */
  c.logits[1 * V + 0] = 5.0f; /* row 1: argmax == label 0 */
  ce_loss(&c);
  double want[T];
  for (int t = 0; t < T; t++) {
    double mx = -INFINITY, se = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, c.logits[t * V + v]);
    for (int v = 0; v < V; v++) se += exp(c.logits[t * V + v] - mx);
    want[t] = mx + log(se) - c.logits[t * V + labels[t]];
  }
  CHECK(max_err(c.losses, want, T) < 1e-6, "cross_entropy loss error %g",
        max_err(c.losses, want, T));
  CHECK(c.correct[0] == 0.0f && c.correct[1] == 1.0f, "cross_entropy correct flags");

  float *g = fdup(c.work, T * V);
  int zero = 1;
  for (int v = 0; v < V; v++) zero &= rc_f32_bits(g[2 * V + v]) == 0;
  CHECK(zero, "cross_entropy row with dloss 0 is not all +0.0");
  /* Negative control: the naive dloss * (p - onehot) leaves -0.0 at the label. */
  CHECK(rc_f32_bits(0.0f * (0.25f - 1.0f)) != 0, "negative control: 0*(p-1) should be -0.0");
  expect_grad("cross_entropy dlogits", ce_loss, &c, c.logits, T * V, g);

  /* Ties: argmax takes the lowest index. */
  float tie[2 * 4] = {1, 3, 3, 0, 1, 3, 3, 0};
  int32_t tl[2] = {1, 2};
  float tdl[2] = {1, 1}, tloss[2], tcor[2];
  ops->cross_entropy(tloss, tcor, tie, tl, tdl, 2, 4, NULL, RC_COMPUTE_FP32);
  CHECK(tcor[0] == 1.0f && tcor[1] == 0.0f, "cross_entropy argmax ties: %g %g", tcor[0], tcor[1]);
  CHECK(tloss[0] == tloss[1], "cross_entropy equal rows give unequal losses");

  /* The 16-bit gradient: bitwise cast_half of the in-place one, same losses;
   * control: the fp32 gradient's own bits differ from its encoding's. */
  ce_loss(&c); /* c.losses and c.correct of the unperturbed logits again */
  rc_compute cts[2] = {RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int k = 0; k < 2; k++) {
    float *work = fdup(c.logits, T * V), losses[T], correct[T];
    uint16_t half[T * V], want_half[T * V];
    ops->cross_entropy(losses, correct, work, labels, dloss, T, V, half, cts[k]);
    ops->cast_half(want_half, g, T * V, cts[k]);
    CHECK(memcmp(half, want_half, sizeof half) == 0,
          "cross_entropy %s gradient is not cast_half of the in-place one", k ? "fp16" : "bf16");
    CHECK(memcmp(losses, c.losses, sizeof losses) == 0 &&
              memcmp(correct, c.correct, sizeof correct) == 0,
          "cross_entropy with a 16-bit gradient changes the losses");
    int rounded = 0;
    for (int i = 0; i < T * V; i++)
      rounded +=
          rc_f32_bits(k ? rc_fp16_decode(half[i]) : rc_bf16_decode(half[i])) != rc_f32_bits(g[i]);
    CHECK(rounded > 0, "control: no element of the %s gradient was rounded", k ? "fp16" : "bf16");
    free(work);
  }

  /* 16-bit logits (logits NULL): the same losses, flags and 16-bit gradient
   * as fp32 logits holding the decoded values; control: the undecoded fp32
   * logits give other losses */
  for (int k = 0; k < 2; k++) {
    uint16_t in_place[T * V], want_half[T * V];
    float dec[T * V], losses[T], correct[T], want_l[T], want_c[T];
    ops->cast_half(in_place, c.logits, T * V, cts[k]);
    for (int i = 0; i < T * V; i++)
      dec[i] = k ? rc_fp16_decode(in_place[i]) : rc_bf16_decode(in_place[i]);
    ops->cross_entropy(want_l, want_c, dec, labels, dloss, T, V, want_half, cts[k]);
    ops->cross_entropy(losses, correct, NULL, labels, dloss, T, V, in_place, cts[k]);
    CHECK(memcmp(in_place, want_half, sizeof want_half) == 0,
          "cross_entropy on 16-bit %s logits: gradient differs from the decoded logits'",
          k ? "fp16" : "bf16");
    CHECK(memcmp(losses, want_l, sizeof losses) == 0 &&
              memcmp(correct, want_c, sizeof correct) == 0,
          "cross_entropy on 16-bit %s logits: losses differ from the decoded logits'",
          k ? "fp16" : "bf16");
    CHECK(memcmp(losses, c.losses, sizeof losses) != 0,
          "control: the %s-rounded logits give the fp32 logits' losses", k ? "fp16" : "bf16");
  }
  free(c.logits), free(c.work), free(c.losses), free(c.correct), free(g);
}

/* ---- dropout ---- */

static void test_dropout(const rc_ops *ops) {
  enum { N = 4099 };
  const float p = 0.25f;
  float *a = falloc(N), *b = falloc(N), *c = falloc(N), *d = falloc(N);
  ffill(a, N, 3.0f), ffill(b, N, 3.0f), ffill(c, N, 3.0f), ffill(d, N, 3.0f);
  ops->dropout(a, N, p, 1234, 10);
  ops->dropout(b, N, p, 1234, 10);
  ops->dropout(c, N, p, 1234, 11);
  ops->dropout(d, N, p, 1235, 10);
  CHECK(bits_equal(a, b, N), "dropout: same (seed, offset) gave different masks");
  CHECK(!bits_equal(a, c, N), "dropout: a different offset gave the same mask");
  CHECK(!bits_equal(a, d, N), "dropout: a different seed gave the same mask");
  int ok = 1, dropped = 0;
  for (int i = 0; i < N; i++) {
    int keep = rc_dropout_keep(1234, 10, (uint64_t)i, p);
    ok &= keep ? a[i] == 3.0f / (1.0f - p) : rc_f32_bits(a[i]) == 0;
    dropped += !keep;
  }
  CHECK(ok, "dropout disagrees with rc_dropout_keep or the 1/(1-p) scaling");
  CHECK(dropped > N / 5 && dropped < N * 3 / 10, "dropout dropped %d of %d at p=0.25", dropped, N);
  /* Offset k+1 is offset k shifted by one Philox block (4 elements). */
  ok = 1;
  for (int i = 0; i + 4 < N; i++) ok &= rc_f32_bits(c[i]) == rc_f32_bits(a[i + 4]);
  CHECK(ok, "dropout offset is not in units of 4-element blocks");
  free(a), free(b), free(c), free(d);
}

/* ---- init_normal ---- */

/* dst[j] == rc_init_normal(key, first + j, std) for j < n, bit for bit */
static int init_matches(const float *dst, size_t n, uint64_t first, uint64_t key, float std) {
  int ok = 1;
  for (size_t j = 0; j < n; j++)
    ok &= rc_f32_bits(dst[j]) == rc_f32_bits(rc_init_normal(key, first + j, std));
  return ok;
}

/* One call on `threads` threads (RC_INIT_THREADS) into a NaN-filled buffer
 * with a NaN guard element after it. */
static void init_call(const rc_ops *ops, float *dst, size_t n, uint64_t first, uint64_t key,
                      float std, const char *threads) {
  setenv("RC_INIT_THREADS", threads, 1);
  ffill(dst, n + 1, NAN);
  ops->init_normal(dst, n, first, key, std);
  unsetenv("RC_INIT_THREADS");
}

/* The op is numeric.h's per-element draw whatever the range and the split:
 * several threads (splits of 2^18 elements and more), odd first and n, one
 * element, nothing; and it writes exactly [0, n). */
static void test_init_normal(const rc_ops *ops) {
  enum { N = 1200001 };
  const uint64_t key = rc_mix64(1234 ^ 0xA5A5A5A5ull) ^ (3ull << 40);
  float *a = falloc(N + 1), *b = falloc(N + 1);
  struct {
    size_t n;
    uint64_t first;
    float std;
  } cases[] = {{N, 0, 0.02f}, {N, 12345, 1.0f}, {N - 1, 1ull << 40 | 1, 0.02f},
               {1, 7, 1.0f},  {1, 8, 0.02f},    {2, 9, 0.02f},
               {3, 0, 1.0f}};
  const char *threads[] = {"1", "3", "8"};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (size_t t = 0; t < 3; t++) {
      size_t n = cases[c].n;
      init_call(ops, a, n, cases[c].first, key, cases[c].std, threads[t]);
      CHECK(init_matches(a, n, cases[c].first, key, cases[c].std) && isnan(a[n]),
            "init_normal n=%zu first=%llu std=%g on %s thread(s): not rc_init_normal's draws, or "
            "wrote past n",
            n, (unsigned long long)cases[c].first, cases[c].std, threads[t]);
    }
  /* negative control: the draws of the neighbouring range are other values */
  init_call(ops, a, N, 12345, key, 1.0f, "3");
  CHECK(!init_matches(a, N, 12346, key, 1.0f), "negative control: first + 1 matched first's draws");
  /* a sub-range is the same elements of the whole: split-independent */
  init_call(ops, b, 1001, 12345 + 77, key, 1.0f, "1");
  CHECK(bits_equal(a + 77, b, 1001), "init_normal of a sub-range differs from the whole's");
  init_call(ops, b, 1001, 12345 + 78, key, 1.0f, "1");
  CHECK(!bits_equal(a + 77, b, 1001), "negative control: a shifted sub-range matched");
  init_call(ops, a, 0, 5, key, 1.0f, "3");
  CHECK(isnan(a[0]), "init_normal with n = 0 wrote");
  /* N(0, std): the sample's moments */
  init_call(ops, a, N, 0, key, 0.02f, "3");
  double s1 = 0.0, s2 = 0.0;
  for (size_t i = 0; i < N; i++) s1 += a[i], s2 += (double)a[i] * a[i];
  double mean = s1 / N, sd = sqrt(s2 / N - mean * mean);
  CHECK(fabs(mean) < 1e-4 && fabs(sd - 0.02) < 2e-4, "init_normal: mean %g, std %g for N(0, 0.02)",
        mean, sd);
  free(a), free(b);
}

/* ---- MoE ---- */

typedef struct {
  const rc_ops *ops;
  float *logits, *bias, *rw, *dp, *w, *probs;
  int32_t *idx, *idx0;
  int T, E, k;
  rc_moe_scoring scoring;
  int changed; /* the selection moved under a perturbation: bad test data */
} route_ctx;

static double route_loss(void *p) {
  route_ctx *c = p;
  c->ops->moe_route(c->idx, c->w, c->probs, c->logits, c->bias, c->T, c->E, c->k, c->scoring);
  if (memcmp(c->idx, c->idx0, sizeof(int32_t) * c->T * c->k)) c->changed = 1;
  double s = proj(c->w, c->rw, (size_t)c->T * c->k);
  for (int t = 0; t < c->T; t++) s += proj(c->probs + (size_t)t * c->E, c->dp, (size_t)c->E);
  return s;
}

static void test_moe_route_scoring(const rc_ops *ops, rc_moe_scoring scoring) {
  enum { T = 6, E = 5, K = 2 };
  const char *name = scoring == RC_SCORE_SIGMOID ? "sigmoid" : "softmax";
  uint64_t rng = 81 + scoring;
  float logits[T * E], bias[E];
  /* Each row a shuffle of well-separated levels, so finite-difference steps
   * never change the selection. */
  for (int t = 0; t < T; t++) {
    int order[E] = {0, 1, 2, 3, 4};
    for (int i = E - 1; i > 0; i--) {
      int j = (int)(next_u64(&rng) % (uint64_t)(i + 1)), tmp = order[i];
      order[i] = order[j], order[j] = tmp;
    }
    for (int e = 0; e < E; e++)
      logits[t * E + e] = 0.5f * order[e] - 1.0f + uniform(&rng, -0.05f, 0.05f);
  }
  for (int e = 0; e < E; e++) bias[e] = uniform(&rng, -0.01f, 0.01f);
  int32_t idx[T * K], idx0[T * K];
  float w[T * K], probs[T * E];
  route_ctx c = {ops,
                 logits,
                 scoring == RC_SCORE_SIGMOID ? bias : NULL,
                 frand(T * K, &rng, -1, 1),
                 frand(E, &rng, -1, 1),
                 w,
                 probs,
                 idx,
                 idx0,
                 T,
                 E,
                 K,
                 scoring,
                 0};
  ops->moe_route(idx0, w, probs, logits, c.bias, T, E, K, scoring);

  /* Forward against a double reference. */
  int sel_ok = 1;
  double want_w[T * K], want_p[T * E];
  for (int t = 0; t < T; t++) {
    const float *l = logits + t * E;
    double s[E], score[E], tot = 0;
    for (int e = 0; e < E; e++) {
      s[e] = scoring == RC_SCORE_SIGMOID ? 1 / (1 + exp(-(double)l[e])) : exp((double)l[e]);
      score[e] = scoring == RC_SCORE_SIGMOID ? s[e] + bias[e] : l[e];
      tot += s[e];
    }
    for (int e = 0; e < E; e++) want_p[t * E + e] = s[e] / tot;
    int chosen[K];
    double selsum = 0;
    for (int r = 0; r < K; r++) {
      int best = -1;
      for (int e = 0; e < E; e++) {
        int taken = 0;
        for (int q = 0; q < r; q++) taken |= chosen[q] == e;
        if (!taken && (best < 0 || score[e] > score[best])) best = e;
      }
      chosen[r] = best;
      selsum += s[best];
      sel_ok &= idx0[t * K + r] == best;
    }
    for (int r = 0; r < K; r++) want_w[t * K + r] = s[chosen[r]] / selsum;
  }
  CHECK(sel_ok, "moe_route %s: selection differs from the reference", name);
  CHECK(max_err(w, want_w, T * K) < 1e-6, "moe_route %s: weights error %g", name,
        max_err(w, want_w, T * K));
  CHECK(max_err(probs, want_p, T * E) < 1e-6, "moe_route %s: probs error %g", name,
        max_err(probs, want_p, T * E));

  float dlogits[T * E];
  ffill(dlogits, T * E, NAN);
  ops->moe_route_backward(dlogits, c.rw, c.dp, logits, idx0, w, probs, T, E, K, scoring);
  CHECK(count_nan(dlogits, T * E) == 0, "moe_route_backward %s left elements unwritten", name);
  char label[64];
  snprintf(label, sizeof label, "moe_route_backward %s", name);
  expect_grad(label, route_loss, &c, logits, T * E, dlogits);
  CHECK(!c.changed, "moe_route %s: test data not separated, selection moved", name);

  /* Negative control with a plausible bug: the other scoring's Jacobian. */
  ops->moe_route(idx0, w, probs, logits, c.bias, T, E, K, scoring);
  ops->moe_route_backward(dlogits, c.rw, c.dp, logits, idx0, w, probs, T, E, K,
                          scoring == RC_SCORE_SIGMOID ? RC_SCORE_SOFTMAX : RC_SCORE_SIGMOID);
  double e = fd_error(route_loss, &c, logits, T * E, dlogits);
  CHECK(e > FD_TOL, "moe_route %s: negative control: the other scoring's backward passed (%g)",
        name, e);
  free(c.rw), free(c.dp);
}

static void test_moe_route(const rc_ops *ops) {
  test_moe_route_scoring(ops, RC_SCORE_SOFTMAX);
  test_moe_route_scoring(ops, RC_SCORE_SIGMOID);

  /* Ties go to the lower expert index, slot order = rank order. */
  float tl[4] = {1.0f, 2.0f, 2.0f, 2.0f};
  int32_t ti[2];
  float tw[2], tp[4];
  ops->moe_route(ti, tw, tp, tl, NULL, 1, 4, 2, RC_SCORE_SOFTMAX);
  CHECK(ti[0] == 1 && ti[1] == 2, "moe_route ties: selected %d %d, want 1 2", ti[0], ti[1]);
  CHECK(tw[0] == 0.5f && tw[1] == 0.5f, "moe_route tie weights");
  /* Sigmoid: the bias changes the selection but not the weights. */
  float bl[2] = {0.0f, 0.1f}, bb[2] = {0.5f, 0.0f};
  ops->moe_route(ti, tw, tp, bl, bb, 1, 2, 1, RC_SCORE_SIGMOID);
  CHECK(ti[0] == 0 && tw[0] == 1.0f, "moe_route sigmoid: bias did not select expert 0");
  ops->moe_route(ti, tw, tp, bl, NULL, 1, 2, 1, RC_SCORE_SIGMOID);
  CHECK(ti[0] == 1, "negative control: without the bias expert 1 should win");
}

static void test_moe_permute(const rc_ops *ops) {
  enum { T = 6, E = 4, K = 2, N = T * K };
  /* Many ties on expert 2, an unused expert 3, and token 4 picking expert 2
   * in both slots (slot order must break that tie). */
  int32_t idx[N] = {2, 0, 2, 1, 0, 2, 1, 2, 2, 2, 2, 0};
  int32_t perm[N], inv[N], off[E + 1], want[N], woff[E + 1];
  ops->moe_permute(perm, inv, off, idx, T, E, K);
  int n = 0;
  for (int e = 0; e < E; e++) {
    woff[e] = n;
    for (int i = 0; i < N; i++) /* i = t*K + s: (token, slot) order */
      if (idx[i] == e) want[n++] = i;
  }
  woff[E] = n;
  CHECK(memcmp(perm, want, sizeof want) == 0,
        "moe_permute is not ordered by (expert, token, slot)");
  CHECK(memcmp(off, woff, sizeof woff) == 0, "moe_permute offsets");
  int inv_ok = 1;
  for (int i = 0; i < N; i++) inv_ok &= inv[perm[i]] == i;
  CHECK(inv_ok, "moe_permute inv_perm is not the inverse");
  /* Negative control: an unstable order (tokens reversed within an expert). */
  int32_t unstable[N];
  for (int e = 0; e < E; e++)
    for (int i = woff[e]; i < woff[e + 1]; i++) unstable[i] = want[woff[e + 1] - 1 - (i - woff[e])];
  CHECK(memcmp(unstable, want, sizeof want) != 0, "negative control: reversed order matched");
}

typedef struct {
  const rc_ops *ops;
  float *rows, *w, *r, *out;
  int32_t *inv;
  int T, k, H;
} combine_ctx;

static double combine_loss(void *p) {
  combine_ctx *c = p;
  c->ops->moe_combine(c->out, c->rows, c->w, c->inv, c->T, c->k, c->H, NULL);
  return proj(c->out, c->r, (size_t)c->T * c->H);
}

static void test_moe_combine(const rc_ops *ops) {
  enum { T = 4, E = 3, K = 2, H = 5, N = T * K };
  uint64_t rng = 91;
  int32_t idx[N] = {0, 2, 1, 0, 2, 1, 0, 2}, perm[N], inv[N], off[E + 1];
  ops->moe_permute(perm, inv, off, idx, T, E, K);

  /* gather: row i is token perm[i] / k. */
  float *src = frand(T * H, &rng, -1, 1), *g = falloc(N * H);
  ops->moe_gather(g, src, perm, T, K, H, NULL, RC_COMPUTE_BF16);
  int ok = 1;
  for (int i = 0; i < N; i++) ok &= bits_equal(g + i * H, src + (perm[i] / K) * H, H);
  CHECK(ok, "moe_gather rows");
  /* the 16-bit form alone (dst NULL) and beside the fp32 rows: cast_half's
   * encoding of the same rows, for both 16-bit types */
  for (int f = 0; f < 2; f++) {
    const rc_compute ct = f ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    uint16_t alone[N * H], both[N * H], want[N * H];
    float *g2 = falloc(N * H);
    ops->moe_gather(NULL, src, perm, T, K, H, alone, ct);
    ops->moe_gather(g2, src, perm, T, K, H, both, ct);
    ops->cast_half(want, g, N * H, ct);
    CHECK(memcmp(alone, want, sizeof want) == 0, "moe_gather's 16-bit rows alone != cast_half");
    CHECK(memcmp(both, want, sizeof want) == 0 && bits_equal(g2, g, N * H),
          "moe_gather's 16-bit rows beside fp32 != cast_half, or the fp32 rows changed");
    /* negative control: the tokens' rows in their own order (row 2 is token
     * 3's in the gather) encode differently */
    ops->cast_half(want, src, T * H, ct);
    CHECK(memcmp(alone, want, sizeof(uint16_t) * (size_t)(T * H)) != 0,
          "negative control: unpermuted rows matched the gather's");
    free(g2);
  }
  /* combine with w = NULL is gather's adjoint: <gather(x), r> == <x, combine(r)>. */
  float *rr = frand(N * H, &rng, -1, 1), *back = falloc(T * H);
  ops->moe_combine(back, rr, NULL, inv, T, K, H, NULL);
  double lhs = proj(g, rr, N * H), rhs = proj(src, back, T * H);
  CHECK(fabs(lhs - rhs) < 1e-5 * (1 + fabs(lhs)), "moe_combine(w=NULL) is not gather's adjoint");
  /* Negative control: dropping one slot breaks it. */
  ops->moe_combine(back, rr, NULL, inv, T, 1, H, NULL); /* wrong k: only slot 0 */
  CHECK(!(fabs(lhs - proj(src, back, T * H)) < 1e-5 * (1 + fabs(lhs))),
        "negative control: a partial combine passed as the adjoint");
  /* with a residual: bitwise the combine followed by add(out, residual, out) */
  {
    float *ww = frand(N, &rng, 0, 1), *res = frand(T * H, &rng, -1, 1);
    float *fused = falloc(T * H), *sum = falloc(T * H), *want = falloc(T * H);
    ops->moe_combine(fused, rr, ww, inv, T, K, H, res);
    ops->moe_combine(sum, rr, ww, inv, T, K, H, NULL);
    ops->add(want, res, sum, (size_t)T * H);
    CHECK(bits_equal(fused, want, T * H), "moe_combine with a residual != combine then add");
    CHECK(!bits_equal(fused, sum, T * H), "negative control: the residual changed nothing");
    free(ww), free(res), free(fused), free(sum), free(want);
  }

  combine_ctx c = {ops,
                   frand(N * H, &rng, -1, 1),
                   frand(N, &rng, 0, 1),
                   frand(T * H, &rng, -1, 1),
                   falloc(T * H),
                   inv,
                   T,
                   K,
                   H};
  combine_loss(&c);
  double want[T * H];
  for (int t = 0; t < T; t++)
    for (int j = 0; j < H; j++) {
      double s = 0;
      for (int q = 0; q < K; q++) s += (double)c.w[t * K + q] * c.rows[inv[t * K + q] * H + j];
      want[t * H + j] = s;
    }
  CHECK(max_err(c.out, want, T * H) < 1e-6, "moe_combine error %g", max_err(c.out, want, T * H));

  float *drows = falloc(N * H), *dw = falloc(N);
  ffill(drows, N * H, NAN), ffill(dw, N, NAN);
  ops->moe_combine_backward(drows, dw, c.r, c.rows, c.w, inv, T, K, H);
  CHECK(count_nan(drows, N * H) == 0 && count_nan(dw, N) == 0,
        "moe_combine_backward left elements unwritten");
  expect_grad("moe_combine_backward drows", combine_loss, &c, c.rows, N * H, drows);
  expect_grad("moe_combine_backward dw", combine_loss, &c, c.w, N, dw);
  free(src), free(g), free(rr), free(back), free(c.rows), free(c.w), free(c.r), free(c.out);
  free(drows), free(dw);
}

/* ---- AdamW ---- */

static void test_adamw(const rc_ops *ops) {
  /* Constants exactly representable in float, so the hand computation is
   * exact: b1 = 0.75, b2 = 0.9375, lr = 0.125, weight decay 0.25, eps 1e-8.
   * Step 1 (bc1 = 0.25, bc2 = 0.0625), p = 1, grad 1 unscaled by 0.5 -> g = 0.5:
   *   m = 0.25 * 0.5 = 0.125, v = 0.0625 * 0.25 = 0.015625,
   *   m / bc1 = 0.5, sqrt(v / bc2) = 0.5 (+ 1e-8 rounds away in float),
   *   p = 1 - 0.125 * (1 + 0.25 * 1) = 0.84375 exactly. */
  float p = 1.0f, g = 1.0f, m = 0.0f, v = 0.0f;
  ops->adamw(&p, &g, &m, &v, 1, 0.125f, 0.75f, 0.9375f, 1e-8f, 0.25f, 0.5f, 0.25f, 0.0625f);
  CHECK(m == 0.125f && v == 0.015625f, "adamw step 1 moments m=%.9g v=%.9g", m, v);
  CHECK(p == 0.84375f, "adamw step 1 param %.9g, want 0.84375", p);

  /* Step 2 (bc1 = 1 - 0.75^2 = 0.4375, bc2 = 1 - 0.9375^2 = 0.12109375), grad -1 -> g = -0.5:
   *   m = 0.75 * 0.125 - 0.25 * 0.5 = -0.03125,
   *   v = 0.9375 * 0.015625 + 0.0625 * 0.25 = 0.0302734375,
   *   m / bc1 = -1/14, sqrt(v / bc2) = sqrt(0.25) = 0.5,
   *   p = 0.84375 - 0.125 * (-1/7 + 0.25 * 0.84375) = 0.835239955357... */
  g = -1.0f;
  ops->adamw(&p, &g, &m, &v, 1, 0.125f, 0.75f, 0.9375f, 1e-8f, 0.25f, 0.5f, 0.4375f, 0.12109375f);
  const double want = 0.84375 - 0.125 * (-1.0 / 7.0 + 0.25 * 0.84375);
  CHECK(m == -0.03125f && v == 0.0302734375f, "adamw step 2 moments m=%.9g v=%.9g", m, v);
  CHECK(fabs(p - want) < 1e-7, "adamw step 2 param %.9g, want %.9g", p, want);
  /* Negative control: without bias correction step 2 would give
   * 0.84375 - 0.125 * (-0.03125 / sqrt(0.0302734375) + 0.2109375) = 0.8398..., rejected. */
  double no_bc = 0.84375 - 0.125 * (-0.03125 / sqrt(0.0302734375) + 0.25 * 0.84375);
  CHECK(!(fabs(no_bc - want) < 1e-7), "negative control: missing bias correction passed");

  /* Zero gradient, zero moments: only decoupled weight decay moves p. */
  float p2 = 2.0f, g2 = 0.0f, m2 = 0.0f, v2 = 0.0f;
  ops->adamw(&p2, &g2, &m2, &v2, 1, 0.125f, 0.75f, 0.9375f, 1e-8f, 0.5f, 1.0f, 0.25f, 0.0625f);
  CHECK(p2 == 1.875f, "adamw weight decay only: %.9g, want 1.875", p2);
}

/* gemm_half_many: each call bitwise the gemm_half (beta 0 and 1) or
 * gemm_to_half it describes; three groups of a grouped linear, one empty. */
static void test_gemm_half_many(const rc_ops *ops) {
  enum { GR = 3, IN = 16, OUT = 8, ROWS = 11 };
  const int rows[GR] = {4, 0, 7};
  float fx[ROWS * IN], fw[GR * OUT * IN];
  for (int i = 0; i < ROWS * IN; i++) fx[i] = (float)((i * 37) % 23 - 11) * 0.0625f;
  for (int i = 0; i < GR * OUT * IN; i++) fw[i] = (float)((i * 53) % 29 - 14) * 0.03125f;
  float *dx = ops->alloc(sizeof fx), *dw = ops->alloc(sizeof fw);
  ops->to_device(dx, fx, sizeof fx), ops->to_device(dw, fw, sizeof fw);
  uint16_t *x = ops->alloc(sizeof fx / 2), *w = ops->alloc(sizeof fw / 2);
  ops->cast_half(x, dx, ROWS * IN, RC_COMPUTE_BF16);
  ops->cast_half(w, dw, GR * OUT * IN, RC_COMPUTE_BF16);
  float *y[2], init[ROWS * OUT];
  uint16_t *yh[2];
  for (int i = 0; i < ROWS * OUT; i++) init[i] = (float)i;
  for (int r = 0; r < 2; r++) {
    y[r] = ops->alloc(sizeof init), yh[r] = ops->alloc(sizeof init / 2);
    ops->to_device(y[r], init, sizeof init);
  }
  bool same = true, differs = false;
  for (int form = 0; form < 3; form++) { /* beta 0, beta 1, 16-bit output */
    rc_gemm_half_call calls[GR];
    for (int g = 0, r0 = 0; g < GR; r0 += rows[g], g++)
      calls[g] = (rc_gemm_half_call){rows[g],
                                     OUT,
                                     IN,
                                     x + r0 * IN,
                                     w + g * OUT * IN,
                                     IN,
                                     IN,
                                     OUT,
                                     form == 1 ? 1.0f : 0.0f,
                                     form == 2 ? NULL : y[0] + r0 * OUT,
                                     form == 2 ? yh[0] + r0 * OUT : NULL};
    ops->gemm_half_many(RC_COMPUTE_BF16, false, true, calls, GR);
    for (int g = 0, r0 = 0; g < GR; r0 += rows[g], g++) {
      /* control: group 2 given group 0's weights */
      const uint16_t *wg = w + (g == 2 ? 0 : g) * OUT * IN;
      if (form == 2)
        ops->gemm_to_half(RC_COMPUTE_BF16, false, true, rows[g], OUT, IN, x + r0 * IN, IN,
                          w + g * OUT * IN, IN, yh[1] + r0 * OUT, OUT);
      else
        ops->gemm_half(RC_COMPUTE_BF16, false, true, rows[g], OUT, IN, 1.0f, x + r0 * IN, IN,
                       w + g * OUT * IN, IN, form == 1 ? 1.0f : 0.0f, y[1] + r0 * OUT, OUT);
      if (g == 2 && form == 0) {
        float *dctl = ops->alloc(7 * OUT * sizeof(float)), ctl[7 * OUT], got[7 * OUT];
        ops->gemm_half(RC_COMPUTE_BF16, false, true, rows[g], OUT, IN, 1.0f, x + r0 * IN, IN, wg,
                       IN, 0.0f, dctl, OUT);
        ops->to_host(ctl, dctl, sizeof ctl);
        ops->to_host(got, y[0] + r0 * OUT, sizeof got);
        differs = memcmp(got, ctl, sizeof got) != 0;
        ops->free(dctl);
      }
    }
    float a[ROWS * OUT], b[ROWS * OUT];
    if (form == 2) {
      ops->to_host(a, yh[0], sizeof a / 2), ops->to_host(b, yh[1], sizeof b / 2);
      same = same && memcmp(a, b, sizeof a / 2) == 0;
    } else {
      ops->to_host(a, y[0], sizeof a), ops->to_host(b, y[1], sizeof b);
      same = same && memcmp(a, b, sizeof a) == 0;
    }
  }
  CHECK(same, "gemm_half_many differs from its calls made one by one");
  CHECK(differs, "negative control: a group given another group's weights is not detected");
  for (int r = 0; r < 2; r++) ops->free(y[r]), ops->free(yh[r]);
  ops->free(dx), ops->free(dw), ops->free(x), ops->free(w);
}

/* adamw_many: each tensor as adamw with its own weight decay, and the
 * fingerprints of its grad and of the updated param and moments. */
static void test_adamw_many(const rc_ops *ops) {
  enum { NT = 3 };
  const size_t n[NT] = {5, 0, 9};
  const float wd[NT] = {0.25f, 0.5f, 0.0f};
  float buf[2][4][9]; /* [many or single][param, grad, m, v][element] */
  for (int k = 0; k < 4; k++)
    for (int e = 0; e < 9; e++)
      buf[0][k][e] = buf[1][k][e] = (float)(k + 1) * 0.125f * (float)(e + 1);
  float *t[2][NT][4];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < NT; i++)
      for (int k = 0; k < 4; k++) t[r][i][k] = ops->alloc(n[i] * sizeof(float) + 4);
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < NT; i++)
      for (int k = 0; k < 4; k++) ops->to_device(t[r][i][k], buf[r][k], n[i] * sizeof(float));
  rc_adamw_tensor ts[NT];
  uint16_t half[NT][9]; /* the model params copy: bf16 of tensor 0, fp16 of tensor 2 */
  memset(half, 0xab, sizeof half);
  for (int i = 0; i < NT; i++)
    ts[i] = (rc_adamw_tensor){t[0][i][0], t[0][i][2], t[0][i][3], t[0][i][1],
                              n[i],       wd[i],      NULL,       RC_COMPUTE_FP32};
  ts[0].param_half = half[0], ts[0].half_ct = RC_COMPUTE_BF16;
  ts[2].param_half = half[2], ts[2].half_ct = RC_COMPUTE_FP16;
  uint64_t fp[4 * NT];
  ops->adamw_many(ts, NT, 0.125f, 0.75f, 0.9375f, 1e-8f, 0.5f, 0.25f, 0.0625f, fp);
  bool same = true, fps = true;
  for (int i = 0; i < NT; i++) {
    float **o = t[1][i];
    ops->adamw(o[0], o[1], o[2], o[3], n[i], 0.125f, 0.75f, 0.9375f, 1e-8f, wd[i], 0.5f, 0.25f,
               0.0625f);
    for (int k = 0; k < 4; k++) {
      float a[9], b[9];
      ops->to_host(a, t[0][i][k], n[i] * sizeof(float));
      ops->to_host(b, o[k], n[i] * sizeof(float));
      same = same && memcmp(a, b, n[i] * sizeof(float)) == 0;
    }
    fps = fps && fp[4 * i] == ops->fingerprint(o[1], n[i] * 4) &&
          fp[4 * i + 1] == ops->fingerprint(o[0], n[i] * 4) &&
          fp[4 * i + 2] == ops->fingerprint(o[2], n[i] * 4) &&
          fp[4 * i + 3] == ops->fingerprint(o[3], n[i] * 4);
  }
  CHECK(same, "adamw_many updates each tensor as adamw does");
  bool copies = true;
  for (int i = 0; i < NT; i += 2) {
    uint16_t want[9];
    ops->cast_half(want, t[1][i][0], n[i], ts[i].half_ct);
    copies = copies && memcmp(half[i], want, n[i] * 2) == 0;
  }
  CHECK(copies, "adamw_many's param_half is cast_half of the updated param (bf16, fp16)");
  uint16_t old_copy[9];
  ops->cast_half(old_copy, buf[0][0], n[0], RC_COMPUTE_BF16);
  CHECK(memcmp(old_copy, half[0], n[0] * 2) != 0,
        "negative control: the copy of the param before the update is another value");
  CHECK(fps, "adamw_many fingerprints grad, param, exp_avg, exp_avg_sq after the update");
  /* negative control: the fingerprint before the update is another value */
  CHECK(fp[1] != ops->fingerprint(buf[0][0], n[0] * 4),
        "negative control: the param's fingerprint is the updated one, not the old");
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < NT; i++)
      for (int k = 0; k < 4; k++) ops->free(t[r][i][k]);
}

/* zero_many: each buffer's bytes zero, nothing beside them touched, an empty
 * one allowed */
static void test_zero_many(const rc_ops *ops) {
  unsigned char buf[200];
  memset(buf, 0xab, sizeof buf);
  void *dst[3] = {buf + 8, buf + 50, buf + 120};
  size_t bytes[3] = {20, 0, 33};
  ops->zero_many(dst, bytes, 3);
  int ok = 1;
  for (size_t i = 0; i < sizeof buf; i++) {
    const int inside = (i >= 8 && i < 28) || (i >= 120 && i < 153);
    ok &= buf[i] == (inside ? 0 : 0xab);
  }
  CHECK(ok, "zero_many: the named bytes zero, the rest untouched");
  ops->zero_many(dst, bytes, 0); /* none: nothing to do */
}

int main(void) {
  const rc_ops *ops = rc_cpu_ops();
  if (!ops || strcmp(ops->name, "cpu") != 0) {
    fprintf(stderr, "FAIL: rc_cpu_ops() did not return the cpu backend\n");
    return 1;
  }
  /* Every function pointer is filled: the members after `name` are all
   * pointers, so scan them as pointer-sized words. */
  const unsigned char *bytes = (const unsigned char *)ops;
  for (size_t off = sizeof(const char *); off + sizeof(void *) <= sizeof *ops;
       off += sizeof(void *)) {
    uintptr_t word;
    memcpy(&word, bytes + off, sizeof word);
    CHECK(word != 0, "rc_ops member at byte offset %zu is NULL", off);
  }

  test_gemm(ops);
  test_gemm_rounds_inputs(ops);
  test_cast_half(ops);
  test_gemm_half(ops);
  test_gemm_half_residual(ops);
  test_gemm_to_half(ops);
  test_elementwise(ops);
  test_fp8(ops);
  test_embedding(ops);
  test_rmsnorm(ops);
  test_rope(ops);
  test_rope_heads(ops);
  test_attention(ops);
  test_attention_bf16(ops);
  test_swiglu(ops);
  test_cross_entropy(ops);
  test_dropout(ops);
  test_init_normal(ops);
  test_moe_route(ops);
  test_moe_permute(ops);
  test_moe_combine(ops);
  test_zero_many(ops);
  test_adamw(ops);
  test_gemm_half_many(ops);
  test_adamw_many(ops);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("cpu_ops: all checks passed\n");
  return 0;
}
