/* test_cuda_ops.c — the CUDA backend against the CPU reference, op by op.
 *
 * For every rc_ops member: fresh random inputs from a fixed seed go to both
 * backends; GPU outputs are poisoned with NaN (0xFF bytes) before each call,
 * so an element the kernel forgets to write shows up as a failure; results
 * are compared by relative error ||gpu - cpu|| / ||cpu|| (1e-5 for fp32
 * paths, 1e-2 for bf16/fp16 GEMMs) or bit for bit where ops.h promises it
 * (fingerprints, rounding, dropout masks, initial weights, MoE permutations
 * and top-k indices). Every GPU op is run twice and the two results must be
 * the same bytes (run-to-run determinism), and the GEMM's fused-accumulation
 * property (beta = 1 equals beta = 0 into scratch plus `add`, bitwise) is
 * checked on shapes where cuBLASLt would be tempted to split K.
 *
 * Exits 77 (skip) when rc_cuda_ops() returns NULL: no GPU, or a build
 * without the CUDA backend. A last section times a few production-sized
 * calls (seq 1024, head dim 64, 12 heads, batch 8) for information. */
#include "backend/numeric.h"
#include "backend/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const rc_ops *G; /* CUDA */
static const rc_ops *C; /* CPU reference */
static int failures, checks;
static int quick; /* --quick: skip the large shapes (for compute-sanitizer runs) */
/* --cpu-twin: the CPU backend in the GPU's place (and --quick). Every setup,
 * buffer and reference of this file then runs where CI runs, so a test that
 * corrupts its own inputs fails on the CPU instead of waiting for a GPU; the
 * timer check, which times the GPU's events, is skipped. */
static int twin;

/* ---- random inputs (splitmix64; a fixed seed) ---- */

static uint64_t rng_state = 0x5eed5eed12345678ull;
static uint64_t rnd64(void) {
  rng_state += 0x9E3779B97F4A7C15ull;
  return rc_mix64(rng_state);
}
static float rndu(void) { /* uniform in [-1, 1) */
  return (float)((double)(rnd64() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}
static int rndi(int n) {
  return (int)(rnd64() % (uint64_t)n);
}
static float *rand_host(size_t n, float scale) {
  float *x = malloc(n * sizeof(float) + 4);
  for (size_t i = 0; i < n; i++) x[i] = rndu() * scale;
  return x;
}

/* ---- buffers on a backend ---- */

static void *put(const rc_ops *o, const void *host, size_t bytes) {
  void *d = o->alloc(bytes);
  if (bytes) o->to_device(d, host, bytes);
  return d;
}
static void *get(const rc_ops *o, const void *dev, size_t bytes) {
  void *h = malloc(bytes + 4);
  if (bytes) o->to_host(h, dev, bytes);
  return h;
}
static void poison(const rc_ops *o, void *dev, size_t bytes) {
  unsigned char *h = malloc(bytes + 4);
  memset(h, 0xff, bytes); /* float NaN, int32 -1 */
  if (bytes) o->to_device(dev, h, bytes);
  free(h);
}
static void upload(const rc_ops *o, void *dev, const void *host, size_t bytes) {
  if (bytes) o->to_device(dev, host, bytes);
}

/* ---- checks ---- */

static double rel_err(const float *got, const float *ref, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - (double)ref[i];
    num += d * d;
    den += (double)ref[i] * (double)ref[i];
  }
  if (den == 0.0) return sqrt(num);
  return sqrt(num / den);
}

static void check_rel(const char *what, const float *got, const float *ref, size_t n, double tol) {
  checks++;
  double e = rel_err(got, ref, n);
  int ok = e <= tol; /* NaN fails */
  if (!ok) failures++;
  printf("%s  %-52s rel err %.3g (tol %.0e)\n", ok ? "ok  " : "FAIL", what, e, tol);
}

static void check_bits(const char *what, const void *a, const void *b, size_t bytes) {
  checks++;
  if (memcmp(a, b, bytes) == 0) {
    printf("ok    %-52s bitwise equal (%zu bytes)\n", what, bytes);
    return;
  }
  failures++;
  const unsigned char *x = a, *y = b;
  size_t i = 0;
  while (i < bytes && x[i] == y[i]) i++;
  uint32_t wa = 0, wb = 0;
  memcpy(&wa, x + (i & ~(size_t)3), 4);
  memcpy(&wb, y + (i & ~(size_t)3), 4);
  printf("FAIL  %-52s first difference at word %zu: %08x vs %08x\n", what, i / 4, wa, wb);
}

static void check_true(const char *what, int cond) {
  checks++;
  if (!cond) failures++;
  printf("%s  %s\n", cond ? "ok  " : "FAIL", what);
}

/* Information only: whether a tolerance-checked result is in fact bitwise. */
static void note_bits(const char *what, const void *a, const void *b, size_t bytes) {
  printf("      (%s: %s)\n", what,
         memcmp(a, b, bytes) ? "not bitwise, within tolerance" : "bitwise equal to the CPU");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ======================= GEMM ======================= */

static float round_ct(float x, rc_compute ct) {
  return ct == RC_COMPUTE_BF16 ? rc_round_bf16(x) : ct == RC_COMPUTE_FP16 ? rc_round_fp16(x) : x;
}
static const char *ct_name(rc_compute ct) {
  return ct == RC_COMPUTE_BF16 ? "bf16" : ct == RC_COMPUTE_FP16 ? "fp16" : "fp32";
}

/* One GEMM configuration against the CPU: beta = 0 into NaN (and the
 * padding columns of C must stay untouched), beta = 1 onto random C, run to
 * run determinism. */
/* The [m, n] regions of a GEMM's output (got) and the reference (ref), both
 * with row stride ldc, copied out contiguous into rg and rc. Returns whether
 * got's padding columns n..ldc-1 are what they were: C0's with beta, the
 * poison's NaN without (a GEMM writes no element outside [m, n]). */
static int gemm_region(float *rg, float *rc, const float *got, const float *ref, const float *C0,
                       int m, int n, int ldc, int beta) {
  int pad_ok = 1;
  for (int i = 0; i < m; i++) {
    memcpy(rg + (size_t)i * n, got + (size_t)i * ldc, (size_t)n * 4);
    memcpy(rc + (size_t)i * n, ref + (size_t)i * ldc, (size_t)n * 4);
    for (int j = n; j < ldc; j++) {
      float want = beta ? C0[(size_t)i * ldc + j] : NAN;
      float have = got[(size_t)i * ldc + j];
      if (!(beta ? memcmp(&want, &have, 4) == 0 : isnan(have))) pad_ok = 0;
    }
  }
  return pad_ok;
}

static void gemm_case(rc_compute ct, int ta, int tb, int m, int n, int k, int pad, float alpha) {
  int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
  int lda = ca + pad, ldb = cb + 2 * pad, ldc = n + 3 * pad;
  size_t na = (size_t)ra * lda, nb = (size_t)rb * ldb, nc = (size_t)m * ldc;
  float *A = rand_host(na, 1.0f), *B = rand_host(nb, 1.0f), *C0 = rand_host(nc, 1.0f);
  for (size_t i = 0; i < na; i++) A[i] = round_ct(A[i], ct);
  for (size_t i = 0; i < nb; i++) B[i] = round_ct(B[i], ct);
  double tol = ct == RC_COMPUTE_FP32 ? 1e-5 : 1e-2;
  char name[128];

  float *cA = put(C, A, na * 4), *cB = put(C, B, nb * 4), *cC = C->alloc(nc * 4);
  float *gA = put(G, A, na * 4), *gB = put(G, B, nb * 4), *gC = G->alloc(nc * 4);

  for (int beta = 0; beta <= 1; beta++) {
    /* beta 0: C starts as NaN on both (the CPU must not read it either) */
    if (beta) {
      upload(C, cC, C0, nc * 4);
    } else {
      poison(C, cC, nc * 4);
    }
    C->gemm(ct, ta, tb, m, n, k, alpha, cA, lda, cB, ldb, (float)beta, cC, ldc);
    float *ref = get(C, cC, nc * 4);
    float *got[2];
    for (int rep = 0; rep < 2; rep++) {
      if (beta)
        upload(G, gC, C0, nc * 4);
      else
        poison(G, gC, nc * 4);
      G->gemm(ct, ta, tb, m, n, k, alpha, gA, lda, gB, ldb, (float)beta, gC, ldc);
      got[rep] = get(G, gC, nc * 4);
    }
    /* compare the [m, n] region; the padding must be what it was */
    float *rg = malloc((size_t)m * n * 4), *rc = malloc((size_t)m * n * 4);
    int pad_ok = gemm_region(rg, rc, got[0], ref, C0, m, n, ldc, beta);
    snprintf(name, sizeof name, "gemm %s ta=%d tb=%d %dx%dx%d a=%g beta=%d", ct_name(ct), ta, tb, m,
             n, k, alpha, beta);
    check_rel(name, rg, rc, (size_t)m * n, tol);
    if (ct == RC_COMPUTE_FP32 && !ta && !tb && pad == 0) note_bits(name, rg, rc, (size_t)m * n * 4);
    snprintf(name, sizeof name, "gemm %s ta=%d tb=%d beta=%d: padding untouched", ct_name(ct), ta,
             tb, beta);
    if (pad) check_true(name, pad_ok);
    snprintf(name, sizeof name, "gemm %s ta=%d tb=%d beta=%d run-to-run", ct_name(ct), ta, tb,
             beta);
    check_bits(name, got[0], got[1], nc * 4);
    free(rg);
    free(rc);
    free(ref);
    free(got[0]);
    free(got[1]);
  }
  C->free(cA);
  C->free(cB);
  C->free(cC);
  G->free(gA);
  G->free(gB);
  G->free(gC);
  free(A);
  free(B);
  free(C0);
}

/* The fused/unfused gradient-accumulation arms (docs/design.md §3.1) on the GPU:
 * gemm(beta=1) into main_grad must equal gemm(beta=0) into scratch followed
 * by add(main_grad, main_grad, scratch), bit for bit. Shapes are wgrad-like
 * (dY^T X: small m*n, long k) so cuBLASLt considers split-K. */
static void gemm_fusion_property(rc_compute ct, int ta, int tb, int m, int n, int k, float alpha) {
  int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
  size_t na = (size_t)ra * ca, nb = (size_t)rb * cb, nc = (size_t)m * n;
  float *A = rand_host(na, 1.0f), *B = rand_host(nb, 1.0f), *M0 = rand_host(nc, 4.0f);
  for (size_t i = 0; i < na; i++) A[i] = round_ct(A[i], ct);
  for (size_t i = 0; i < nb; i++) B[i] = round_ct(B[i], ct);
  float *gA = put(G, A, na * 4), *gB = put(G, B, nb * 4);
  float *fused = put(G, M0, nc * 4), *unfused = put(G, M0, nc * 4), *scratch = G->alloc(nc * 4);
  poison(G, scratch, nc * 4);
  double t0 = now_s();
  G->gemm(ct, ta, tb, m, n, k, alpha, gA, ca, gB, cb, 1.0f, fused, n);
  G->sync();
  double t1 = now_s();
  G->gemm(ct, ta, tb, m, n, k, alpha, gA, ca, gB, cb, 0.0f, scratch, n);
  G->add(unfused, unfused, scratch, nc);
  float *hf = get(G, fused, nc * 4), *hu = get(G, unfused, nc * 4);
  char name[128];
  snprintf(name, sizeof name, "gemm %s ta=%d tb=%d %dx%dx%d beta=1 == beta=0 + add", ct_name(ct),
           ta, tb, m, n, k);
  check_bits(name, hf, hu, nc * 4);
  printf("      (first call incl. plan: %.3f ms)\n", 1e3 * (t1 - t0));
  G->free(gA);
  G->free(gB);
  G->free(fused);
  G->free(unfused);
  G->free(scratch);
  free(A);
  free(B);
  free(M0);
  free(hf);
  free(hu);
}

/* gemm_half_residual (ops.h), the forward's residual connection in the GEMM
 * epilogue: bitwise gemm_half (beta 0) and then add(C, R, C) on the GPU, run
 * to run, and within tolerance of the CPU. pad > 0 gives C (and R) a row
 * stride beyond n, which takes the unfused path; the model's proj and fc2
 * shapes are canonical (cuBLASLt adds R itself where the algorithm has no
 * split-K, cuda_gemm.cu). */
static void gemm_residual_property(rc_compute ct, int ta, int tb, int m, int n, int k, int pad) {
  int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n, ldc = n + pad;
  size_t na = (size_t)ra * ca, nb = (size_t)rb * cb, nc = (size_t)m * ldc;
  float *A = rand_host(na, 1.0f), *B = rand_host(nb, 1.0f), *R = rand_host(nc, 4.0f);
  uint16_t *gA = G->alloc(na * 2), *gB = G->alloc(nb * 2), *cA = C->alloc(na * 2),
           *cB = C->alloc(nb * 2);
  float *fA = put(G, A, na * 4), *fB = put(G, B, nb * 4);
  G->cast_half(gA, fA, na, ct), G->cast_half(gB, fB, nb, ct);
  uint16_t *hA = get(G, gA, na * 2), *hB = get(G, gB, nb * 2);
  upload(C, cA, hA, na * 2), upload(C, cB, hB, nb * 2);
  float *gR = put(G, R, nc * 4), *fused = G->alloc(nc * 4), *unfused = G->alloc(nc * 4);
  float *got[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, fused, nc * 4);
    G->gemm_half_residual(ct, ta, tb, m, n, k, gA, ca, gB, cb, gR, fused, ldc);
    got[rep] = get(G, fused, nc * 4);
  }
  poison(G, unfused, nc * 4);
  G->gemm_half(ct, ta, tb, m, n, k, 1.0f, gA, ca, gB, cb, 0.0f, unfused, ldc);
  for (int i = 0; i < m; i++)
    G->add(unfused + (size_t)i * ldc, gR + (size_t)i * ldc, unfused + (size_t)i * ldc, (size_t)n);
  float *want = get(G, unfused, nc * 4);
  float *cR = put(C, R, nc * 4), *cC = C->alloc(nc * 4);
  C->gemm_half_residual(ct, ta, tb, m, n, k, cA, ca, cB, cb, cR, cC, ldc);
  float *ref = get(C, cC, nc * 4);
  size_t rows_bytes = ((size_t)(m - 1) * ldc + n) * 4; /* C's padding is not written */
  char name[128];
  snprintf(name, sizeof name,
           "gemm_half_residual %s ta=%d tb=%d %dx%dx%d ldc=%d == gemm_half + add", ct_name(ct), ta,
           tb, m, n, k, ldc);
  check_bits(name, got[0], want, rows_bytes);
  check_bits("  run to run", got[1], got[0], rows_bytes);
  if (pad == 0) check_rel("  vs the CPU", got[0], ref, (size_t)m * n, 1e-3);
  G->free(gA), G->free(gB), G->free(fA), G->free(fB), G->free(gR), G->free(fused);
  G->free(unfused), C->free(cA), C->free(cB), C->free(cR), C->free(cC);
  free(A), free(B), free(R), free(hA), free(hB), free(got[0]), free(got[1]), free(want), free(ref);
}

/* The keys kernels/cuda_gemm.cu pins to a measured algorithm (gpu-small's
 * dense GEMMs): on bf16 operands, within tolerance of the GPU's fp32 GEMM of
 * the decoded values (a plan of its own), and the same bits run to run.
 * Whether the pin was taken is tests/gpu_gemm_pins.sh's question. */
static void gemm_pinned_key(int ta, int tb, int m, int n, int k, bool out16) {
  int ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
  size_t na = (size_t)ra * ca, nb = (size_t)rb * cb, nc = (size_t)m * n;
  float *A = rand_host(na, 1.0f), *B = rand_host(nb, 1.0f);
  for (size_t i = 0; i < na; i++) A[i] = round_ct(A[i], RC_COMPUTE_BF16);
  for (size_t i = 0; i < nb; i++) B[i] = round_ct(B[i], RC_COMPUTE_BF16);
  float *fA = put(G, A, na * 4), *fB = put(G, B, nb * 4), *ref = G->alloc(nc * 4);
  uint16_t *hA = G->alloc(na * 2), *hB = G->alloc(nb * 2), *h16 = G->alloc(nc * 2);
  G->cast_half(hA, fA, na, RC_COMPUTE_BF16), G->cast_half(hB, fB, nb, RC_COMPUTE_BF16);
  G->gemm(RC_COMPUTE_FP32, ta, tb, m, n, k, 1.0f, fA, ca, fB, cb, 0.0f, ref, n);
  float *want = get(G, ref, nc * 4), *got[2];
  for (int rep = 0; rep < 2; rep++) {
    if (out16) {
      poison(G, h16, nc * 2);
      G->gemm_to_half(RC_COMPUTE_BF16, ta, tb, m, n, k, hA, ca, hB, cb, h16, n);
      uint16_t *h = get(G, h16, nc * 2);
      got[rep] = malloc(nc * 4);
      for (size_t i = 0; i < nc; i++) got[rep][i] = rc_bf16_decode(h[i]);
      free(h);
    } else {
      poison(G, ref, nc * 4);
      G->gemm_half(RC_COMPUTE_BF16, ta, tb, m, n, k, 1.0f, hA, ca, hB, cb, 0.0f, ref, n);
      got[rep] = get(G, ref, nc * 4);
    }
  }
  char name[128];
  snprintf(name, sizeof name, "pinned key bf16 %s%s %dx%dx%d%s vs the fp32 GEMM", ta ? "T" : "N",
           tb ? "T" : "N", m, n, k, out16 ? " ->16" : "");
  check_rel(name, got[0], want, nc, out16 ? 1e-2 : 1e-3);
  check_bits("  run to run", got[1], got[0], nc * 4);
  G->free(fA), G->free(fB), G->free(ref), G->free(hA), G->free(hB), G->free(h16);
  free(A), free(B), free(want), free(got[0]), free(got[1]);
}

static void gemm_k0(void) {
  int m = 5, n = 7;
  float *C0 = rand_host((size_t)m * n, 1.0f);
  for (int beta = 0; beta <= 1; beta++) {
    float *c = put(C, C0, (size_t)m * n * 4), *g = put(G, C0, (size_t)m * n * 4);
    if (!beta) poison(G, g, (size_t)m * n * 4);
    if (!beta) poison(C, c, (size_t)m * n * 4);
    C->gemm(RC_COMPUTE_FP32, 0, 0, m, n, 0, -2.0f, NULL, 1, NULL, 1, (float)beta, c, n);
    G->gemm(RC_COMPUTE_FP32, 0, 0, m, n, 0, -2.0f, NULL, 1, NULL, 1, (float)beta, g, n);
    float *hc = get(C, c, (size_t)m * n * 4), *hg = get(G, g, (size_t)m * n * 4);
    check_bits(beta ? "gemm k=0 beta=1 (C unchanged + -0)" : "gemm k=0 beta=0 (alpha*0)", hg, hc,
               (size_t)m * n * 4);
    C->free(c);
    G->free(g);
    free(hc);
    free(hg);
  }
  free(C0);
}

/* ops.h: a BF16/FP16 GEMM rounds its operands itself. Unrounded inputs give
 * the bits of pre-rounded ones on the GPU (both the flat conversion of
 * contiguous operands, pad 0, and the strided one, pad > 0) and agree with
 * the CPU's rounding GEMM. */
static void gemm_rounds_inputs(rc_compute ct, int pad) {
  int m = 70, n = 48, k = 96, lda = k + pad, ldb = k + pad;
  size_t na = (size_t)m * lda, nb = (size_t)n * ldb, nc = (size_t)m * n;
  float *A = rand_host(na, 1.0f), *B = rand_host(nb, 1.0f);
  float *Ar = malloc(na * 4), *Br = malloc(nb * 4);
  for (size_t i = 0; i < na; i++) Ar[i] = round_ct(A[i], ct);
  for (size_t i = 0; i < nb; i++) Br[i] = round_ct(B[i], ct);
  float *gA = put(G, A, na * 4), *gB = put(G, B, nb * 4), *gAr = put(G, Ar, na * 4),
        *gBr = put(G, Br, nb * 4), *gC = G->alloc(nc * 4);
  G->gemm(ct, false, true, m, n, k, 1.0f, gA, lda, gB, ldb, 0.0f, gC, n);
  float *got = get(G, gC, nc * 4);
  G->gemm(ct, false, true, m, n, k, 1.0f, gAr, lda, gBr, ldb, 0.0f, gC, n);
  float *want = get(G, gC, nc * 4);
  float *cA = put(C, A, na * 4), *cB = put(C, B, nb * 4), *cC = C->alloc(nc * 4);
  C->gemm(ct, false, true, m, n, k, 1.0f, cA, lda, cB, ldb, 0.0f, cC, n);
  float *ref = get(C, cC, nc * 4);
  char name[96];
  snprintf(name, sizeof name, "gemm %s pad=%d rounds its inputs (unrounded vs rounded)",
           ct == RC_COMPUTE_BF16 ? "bf16" : "fp16", pad);
  check_bits(name, got, want, nc * 4);
  check_rel("  vs the CPU's rounding gemm", got, ref, nc, 1e-5);
  free(A), free(B), free(Ar), free(Br), free(got), free(want), free(ref);
  G->free(gA), G->free(gB), G->free(gAr), G->free(gBr), G->free(gC);
  C->free(cA), C->free(cB), C->free(cC);
}

static void test_gemm(void) {
  printf("-- gemm\n");
  for (int pad = 0; pad <= 3; pad += 3) {
    gemm_rounds_inputs(RC_COMPUTE_BF16, pad);
    gemm_rounds_inputs(RC_COMPUTE_FP16, pad);
  }
  rc_compute cts[3] = {RC_COMPUTE_FP32, RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int c = 0; c < 3; c++)
    for (int ta = 0; ta <= 1; ta++)
      for (int tb = 0; tb <= 1; tb++) gemm_case(cts[c], ta, tb, 67, 45, 93, 3, 1.0f);
  gemm_case(RC_COMPUTE_FP32, 0, 0, 64, 48, 40, 0, 1.0f); /* canonical layout: direct write */
  gemm_case(RC_COMPUTE_FP32, 0, 1, 33, 17, 129, 1, 0.75f);
  gemm_case(RC_COMPUTE_BF16, 1, 0, 33, 17, 129, 1, -1.5f);
  if (!quick) {
    gemm_case(RC_COMPUTE_FP32, 0, 1, 256, 512, 768, 0, 1.0f);
    gemm_case(RC_COMPUTE_BF16, 0, 1, 256, 512, 768, 0, 1.0f);
  }
  /* expert-like row counts: a bucket's algorithm, checked for the shape */
  gemm_case(RC_COMPUTE_BF16, 0, 1, 1064, 256, 768, 0, 1.0f);
  gemm_case(RC_COMPUTE_BF16, 1, 0, 256, 192, 245, 0, 1.0f);
  gemm_case(RC_COMPUTE_FP32, 1, 0, 128, 96, 4096, 0, 1.0f); /* wgrad-like */
  gemm_case(RC_COMPUTE_BF16, 1, 0, 128, 96, 4096, 0, 1.0f);
  /* an MoE router's fp32 GEMMs (E = 8): forward, dgrad, wgrad; then each
   * small dimension at odd sizes under every transpose, padded */
  gemm_case(RC_COMPUTE_FP32, 0, 1, quick ? 1024 : 8192, 8, 768, 0, 1.0f);
  gemm_case(RC_COMPUTE_FP32, 0, 0, quick ? 1024 : 8192, 768, 8, 0, 1.0f);
  gemm_case(RC_COMPUTE_FP32, 1, 0, 8, 768, quick ? 1024 : 8192, 0, 1.0f);
  for (int ta = 0; ta <= 1; ta++)
    for (int tb = 0; tb <= 1; tb++) {
      gemm_case(RC_COMPUTE_FP32, ta, tb, 5, 300, 2000, 3, 1.0f); /* m small */
      gemm_case(RC_COMPUTE_FP32, ta, tb, 300, 3, 700, 3, 0.75f); /* n small */
      gemm_case(RC_COMPUTE_FP32, ta, tb, 70, 90, 7, 3, 1.0f);    /* k small */
      gemm_case(RC_COMPUTE_FP32, ta, tb, 16, 16, 100, 3, -1.5f); /* all at the limit */
    }
  gemm_k0();
  for (int c = 0; c < 3; c++) {
    gemm_fusion_property(cts[c], 1, 0, 64, 64, quick ? 2048 : 16384, 1.0f);
    if (!quick) gemm_fusion_property(cts[c], 1, 0, 768, 768, 8192, 1.0f);
    gemm_fusion_property(cts[c], 0, 1, 96, 80, 777, 0.5f);
  }
  gemm_fusion_property(RC_COMPUTE_FP32, 1, 0, 8, 768, 8192, 1.0f); /* a router's wgrad */
  /* gpu-small's wgrad shapes (beta = 1 into main_grad: cuBLASLt's own
   * epilogue where the algorithm has no split-K, cuda_gemm.cu run_plan) */
  int wgrad[][2] = {{2304, 768}, {768, 768}, {4096, 768}, {768, 2048}, {768, 1536}};
  for (size_t i = 0; !quick && i < sizeof wgrad / sizeof wgrad[0]; i++)
    gemm_fusion_property(RC_COMPUTE_BF16, 1, 0, wgrad[i][0], wgrad[i][1], 8192, 1.0f);
  /* the residual in the epilogue: gpu-small's proj and fc2 forward shapes,
   * a split-K candidate, a padded C (the unfused path), fp16 */
  gemm_residual_property(RC_COMPUTE_BF16, 0, 1, 96, 80, 200, 0);
  gemm_residual_property(RC_COMPUTE_BF16, 0, 1, 33, 20, 72, 3);
  gemm_residual_property(RC_COMPUTE_FP16, 0, 1, 96, 80, 200, 0);
  gemm_residual_property(RC_COMPUTE_BF16, 0, 1, 64, 64, quick ? 2048 : 16384, 0);
  if (!quick) {
    gemm_residual_property(RC_COMPUTE_BF16, 0, 1, 8192, 768, 768, 0);
    gemm_residual_property(RC_COMPUTE_BF16, 0, 1, 8192, 768, 2048, 0);
    /* every pinned key (cuda_gemm.cu PINS) */
    gemm_pinned_key(0, 1, 8192, 32768, 768, true);
    gemm_pinned_key(0, 0, 8192, 768, 32768, false);
    gemm_pinned_key(0, 1, 8192, 4096, 768, true);
    gemm_pinned_key(0, 1, 8192, 2304, 768, false);
    gemm_pinned_key(0, 0, 8192, 768, 2304, false);
    gemm_pinned_key(0, 1, 8192, 768, 2048, false);
    gemm_pinned_key(1, 0, 768, 2048, 8192, false);
    gemm_pinned_key(0, 0, 8192, 2048, 768, false);
    gemm_pinned_key(0, 1, 8192, 768, 768, false);
    gemm_pinned_key(0, 0, 8192, 768, 768, false);
  }
}

/* ======================= elementwise and reductions ======================= */

static float special(int i) {
  static const uint32_t bits[] = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc12345u, 0x7f812345u,
      0x00000001u, 0x80000001u, 0x00400000u, 0x3f808000u, 0x3f818000u, 0x3f800fffu, 0x3f801000u,
      0x477fe000u, 0x477ff000u, 0x477fefffu, 0x33000000u, 0x33000001u, 0x43e00000u, 0x43e80000u,
      0x43f00000u, 0x3c800000u, 0x3b000000u, 0x3a800000u, 0x3a800001u, 0x7f7fffffu, 0xc3e7ffffu};
  return rc_bits_f32(bits[i % (int)(sizeof bits / sizeof bits[0])]);
}

static float *wide_values(size_t n) {
  float *x = malloc(n * 4 + 4);
  for (size_t i = 0; i < n; i++) {
    if (i % 7 == 0)
      x[i] = special((int)(i / 7));
    else
      x[i] = rc_bits_f32((uint32_t)rnd64()); /* every bit pattern class */
  }
  return x;
}

static void test_rounding(void) {
  printf("-- round_to\n");
  size_t n = 20011;
  float *x = wide_values(n);
  rc_compute cts[3] = {RC_COMPUTE_FP32, RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int c = 0; c < 3; c++) {
    for (int inplace = 0; inplace <= 1; inplace++) {
      float *cs = put(C, x, n * 4), *cd = inplace ? cs : C->alloc(n * 4);
      C->round_to(cd, cs, n, cts[c]);
      float *ref = get(C, cd, n * 4);
      float *got[2];
      for (int rep = 0; rep < 2; rep++) {
        float *gs = put(G, x, n * 4), *gd = inplace ? gs : G->alloc(n * 4);
        if (!inplace) poison(G, gd, n * 4);
        G->round_to(gd, gs, n, cts[c]);
        got[rep] = get(G, gd, n * 4);
        if (!inplace) G->free(gd);
        G->free(gs);
      }
      char name[96];
      snprintf(name, sizeof name, "round_to %s%s", ct_name(cts[c]), inplace ? " in place" : "");
      check_bits(name, got[0], ref, n * 4);
      check_bits("  run-to-run", got[0], got[1], n * 4);
      if (!inplace) C->free(cd);
      C->free(cs);
      free(ref);
      free(got[0]);
      free(got[1]);
    }
  }
  free(x);
}

/* ======================= bf16/fp16 storage ======================= */

/* cast_half: the GPU's 16-bit encodings are the CPU's, bit for bit (every
 * class of bit pattern, NaN and infinities included), and run to run; both
 * layouts of the kernel (vectorised when aligned, else element by element)
 * and an odd count (the tail). Every element written: the destination is
 * poisoned first. */
static void test_cast_half(void) {
  printf("-- cast_half\n");
  size_t n = 20011;
  float *x = wide_values(n + 1);
  rc_compute cts[2] = {RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int c = 0; c < 2; c++) {
    for (int off = 0; off <= 1; off++) { /* off = 1: a source that is not 16-byte aligned */
      float *cs = put(C, x, (n + 1) * 4);
      uint16_t *cd = C->alloc(n * 2);
      C->cast_half(cd, cs + off, n, cts[c]);
      uint16_t *ref = get(C, cd, n * 2);
      uint16_t *got[2];
      for (int rep = 0; rep < 2; rep++) {
        float *gs = put(G, x, (n + 1) * 4);
        uint16_t *gd = G->alloc(n * 2);
        poison(G, gd, n * 2);
        G->cast_half(gd, gs + off, n - off, cts[c]);
        G->cast_half(gd + (n - off), gs + off + (n - off), off, cts[c]);
        got[rep] = get(G, gd, n * 2);
        G->free(gd), G->free(gs);
      }
      char name[96];
      snprintf(name, sizeof name, "cast_half %s%s", ct_name(cts[c]),
               off ? " (unaligned source)" : "");
      check_bits(name, got[0], ref, n * 2);
      check_bits("  run-to-run", got[0], got[1], n * 2);
      free(ref), free(got[0]), free(got[1]);
      C->free(cd), C->free(cs);
    }
  }
  free(x);
}

/* gemm_half on 16-bit operands is bitwise gemm on the fp32 operands they
 * encode (the same plan, the same values): every transpose, canonical and
 * padded leading dimensions, beta 0 (into NaN) and 1, a wgrad-like k. The
 * control: the same GEMM on operands that are not representable in ct
 * differs from gemm_half on their encodings unless gemm rounds them, so
 * gemm's rounding is what the equality rests on. */
static void gemm_half_case(rc_compute ct, int ta, int tb, int m, int n, int k, int pad) {
  int rows_a = ta ? k : m, cols_a = ta ? m : k, rows_b = tb ? n : k, cols_b = tb ? k : n;
  int lda = cols_a + pad, ldb = cols_b + pad, ldc = n + pad;
  size_t na = (size_t)rows_a * lda, nb = (size_t)rows_b * ldb, nc = (size_t)m * ldc;
  float *A = rand_host(na, 1.0f), *B = rand_host(nb, 1.0f), *C0 = rand_host(nc, 1.0f);
  float *gA = put(G, A, na * 4), *gB = put(G, B, nb * 4);
  uint16_t *hA = G->alloc(na * 2), *hB = G->alloc(nb * 2);
  G->cast_half(hA, gA, na, ct), G->cast_half(hB, gB, nb, ct);
  for (int beta = 0; beta <= 1; beta++) {
    float *gC1 = put(G, C0, nc * 4), *gC2 = put(G, C0, nc * 4);
    if (!beta) poison(G, gC1, nc * 4), poison(G, gC2, nc * 4);
    G->gemm(ct, ta, tb, m, n, k, 0.5f, gA, lda, gB, ldb, (float)beta, gC1, ldc);
    G->gemm_half(ct, ta, tb, m, n, k, 0.5f, hA, lda, hB, ldb, (float)beta, gC2, ldc);
    float *want = get(G, gC1, nc * 4), *got = get(G, gC2, nc * 4);
    G->gemm_half(ct, ta, tb, m, n, k, 0.5f, hA, lda, hB, ldb, (float)beta, gC2, ldc);
    float *again = get(G, gC2, nc * 4);
    char name[128];
    snprintf(name, sizeof name, "gemm_half %s %c%c %dx%dx%d pad=%d beta=%d == gemm", ct_name(ct),
             ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, pad, beta);
    /* the C columns beyond n (the padding) are compared too: never written */
    check_bits(name, got, want, nc * 4);
    if (!beta) check_bits("  run-to-run", got, again, nc * 4);
    if (!beta) { /* control: fp32 operands that gemm is not allowed to round */
      G->gemm(RC_COMPUTE_FP32, ta, tb, m, n, k, 0.5f, gA, lda, gB, ldb, 0.0f, gC1, ldc);
      float *fp32 = get(G, gC1, nc * 4);
      check_true("  control: the fp32 GEMM on unrounded operands differs",
                 memcmp(fp32, got, nc * 4) != 0);
      free(fp32);
    }
    free(want), free(got), free(again);
    G->free(gC1), G->free(gC2);
  }
  free(A), free(B), free(C0);
  G->free(gA), G->free(gB), G->free(hA), G->free(hB);
}

static void test_gemm_half(void) {
  printf("-- gemm_half\n");
  rc_compute cts[2] = {RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int c = 0; c < 2; c++)
    for (int ta = 0; ta <= 1; ta++)
      for (int tb = 0; tb <= 1; tb++) {
        gemm_half_case(cts[c], ta, tb, 67, 45, 93, 3); /* padded: copied to canonical */
        gemm_half_case(cts[c], ta, tb, 64, 48, 96, 0); /* canonical: read in place */
      }
  gemm_half_case(RC_COMPUTE_BF16, 1, 0, 768, 256, quick ? 1024 : 8192, 0); /* wgrad-like */
  gemm_half_case(RC_COMPUTE_BF16, 0, 1, 1064, 2048, 768, 0); /* an expert's row count */
  /* k == 0: C = alpha*0 + beta*C, as gemm */
  float c0[6] = {1, 2, 3, 4, 5, 6};
  float *g1 = put(G, c0, sizeof c0), *g2 = put(G, c0, sizeof c0);
  G->gemm(RC_COMPUTE_BF16, false, true, 2, 3, 0, 1.0f, NULL, 1, NULL, 1, 1.0f, g1, 3);
  G->gemm_half(RC_COMPUTE_BF16, false, true, 2, 3, 0, 1.0f, NULL, 1, NULL, 1, 1.0f, g2, 3);
  float *a = get(G, g1, sizeof c0), *b = get(G, g2, sizeof c0);
  check_bits("gemm_half k=0 == gemm k=0", a, b, sizeof c0);
  free(a), free(b), G->free(g1), G->free(g2);
}

/* gemm_to_half: the fp32 accumulator rounded to ct's 16 bits by cuBLASLt's
 * epilogue. Against the CPU (cast_half of its gemm_half) within tolerance:
 * a 16-bit output is a plan of its own, and where the two fp32 sums differ in
 * the last bits the rounding may land on either side. Against the GPU's own
 * fp32 gemm_half of the same operands: the output is its round-to-nearest-
 * even encoding nearly everywhere (the control: truncation matches far
 * fewer). Every element of C written (poisoned first), the padding columns
 * never, and two runs bitwise equal. */
static void gemm_to_half_case(rc_compute ct, int ta, int tb, int m, int n, int k, int pad) {
  int rows_a = ta ? k : m, cols_a = ta ? m : k, rows_b = tb ? n : k, cols_b = tb ? k : n;
  int lda = cols_a + pad, ldb = cols_b + pad, ldc = n + pad;
  size_t na = (size_t)rows_a * lda, nb = (size_t)rows_b * ldb, nc = (size_t)m * ldc;
  size_t mn = (size_t)m * n;
  float *A = rand_host(na, 1.0f), *B = rand_host(nb, 1.0f);
  float *gA = put(G, A, na * 4), *gB = put(G, B, nb * 4), *cA = put(C, A, na * 4),
        *cB = put(C, B, nb * 4);
  uint16_t *hA = G->alloc(na * 2), *hB = G->alloc(nb * 2), *chA = C->alloc(na * 2),
           *chB = C->alloc(nb * 2), *gC = G->alloc(nc * 2), *cC = C->alloc(nc * 2);
  G->cast_half(hA, gA, na, ct), G->cast_half(hB, gB, nb, ct);
  C->cast_half(chA, cA, na, ct), C->cast_half(chB, cB, nb, ct);
  float *gF = G->alloc(mn * 4);
  uint16_t *got[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, gC, nc * 2);
    G->gemm_to_half(ct, ta, tb, m, n, k, hA, lda, hB, ldb, gC, ldc);
    got[rep] = get(G, gC, nc * 2);
  }
  poison(C, cC, nc * 2);
  C->gemm_to_half(ct, ta, tb, m, n, k, chA, lda, chB, ldb, cC, ldc);
  uint16_t *ref = get(C, cC, nc * 2);
  G->gemm_half(ct, ta, tb, m, n, k, 1.0f, hA, lda, hB, ldb, 0.0f, gF, n);
  float *f32 = get(G, gF, mn * 4);
  float *dg = malloc(mn * 4), *dr = malloc(mn * 4);
  size_t rne = 0, trunc = 0, pad_ok = 1;
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < n; j++) {
      uint16_t g = got[0][(size_t)i * ldc + j], r = ref[(size_t)i * ldc + j];
      float x = f32[(size_t)i * n + j];
      dg[(size_t)i * n + j] = ct == RC_COMPUTE_FP16 ? rc_fp16_decode(g) : rc_bf16_decode(g);
      dr[(size_t)i * n + j] = ct == RC_COMPUTE_FP16 ? rc_fp16_decode(r) : rc_bf16_decode(r);
      uint16_t e = ct == RC_COMPUTE_FP16 ? rc_fp16_encode(x) : rc_bf16_encode(x);
      rne += g == e;
      trunc += ct == RC_COMPUTE_BF16 && g == (uint16_t)(rc_f32_bits(x) >> 16);
    }
    for (int j = n; j < ldc; j++) pad_ok &= got[0][(size_t)i * ldc + j] == 0xffff;
  }
  char name[128];
  snprintf(name, sizeof name, "gemm_to_half %s %c%c %dx%dx%d pad=%d vs CPU", ct_name(ct),
           ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, pad);
  check_rel(name, dg, dr, mn, ct == RC_COMPUTE_FP16 ? 1e-3 : 4e-3);
  snprintf(name, sizeof name, "  RNE of the GPU's fp32 result: %zu of %zu elements", rne, mn);
  check_true(name, rne >= mn - mn / 100);
  if (ct == RC_COMPUTE_BF16) {
    snprintf(name, sizeof name, "  control: truncation matches fewer (%zu)", trunc);
    check_true(name, trunc < rne - rne / 10);
  }
  check_true("  every element written, the padding columns untouched", pad_ok);
  check_bits("  run-to-run", got[0], got[1], nc * 2);
  free(A), free(B), free(got[0]), free(got[1]), free(ref), free(f32), free(dg), free(dr);
  G->free(gA), G->free(gB), G->free(hA), G->free(hB), G->free(gC), G->free(gF);
  C->free(cA), C->free(cB), C->free(chA), C->free(chB), C->free(cC);
}

static void test_gemm_to_half(void) {
  printf("-- gemm_to_half\n");
  rc_compute cts[2] = {RC_COMPUTE_BF16, RC_COMPUTE_FP16};
  for (int c = 0; c < 2; c++)
    for (int ta = 0; ta <= 1; ta++)
      for (int tb = 0; tb <= 1; tb++) {
        gemm_to_half_case(cts[c], ta, tb, 67, 45, 93, 3); /* padded: through scratch */
        gemm_to_half_case(cts[c], ta, tb, 64, 48, 96, 0); /* canonical: written in place */
      }
  gemm_to_half_case(RC_COMPUTE_BF16, 0, 1, quick ? 64 : 256, 32768, 768, 0); /* the head */
  uint16_t z0[6] = {1, 2, 3, 4, 5, 6};
  uint16_t *gz = put(G, z0, sizeof z0);
  G->gemm_to_half(RC_COMPUTE_BF16, false, true, 2, 3, 0, NULL, 1, NULL, 1, gz, 3);
  uint16_t *z = get(G, gz, sizeof z0);
  int zeros = 1;
  for (int i = 0; i < 6; i++) zeros &= z[i] == 0;
  check_true("gemm_to_half k=0 writes zeros", zeros);
  free(z), G->free(gz);
}

/* gemm_half_many: the GEMMs of a grouped linear, each the gemm_half /
 * gemm_to_half call it describes up to the algorithm — on sm_90a one CUTLASS
 * grouped GEMM for all of them (cuda_gemm_grouped.cu: another summation
 * order than cuBLASLt's), else one cuBLASLt call each with the row count in
 * one of two buckets (cuda_gemm.cu grouped_bucket), so a rare expert load
 * may run another algorithm than the same call alone: within a
 * summation-order tolerance of the calls made one by one (1e-5 for fp32
 * outputs, 4e-3 for 16-bit ones, as gemm_to_half against the CPU), the same
 * bits run to run. An expert's three GEMM forms at the model's widths
 * (forward NT into 16 or 32 bits, dgrad NN, wgrad TN with beta 0 and 1),
 * eight groups of uneven rows (one empty: k = 0 for the wgrad), every output
 * poisoned first; against the CPU's on a small case. With beta 1, bit for bit
 * the beta 0 calls followed by an add. Control: group 1 given group 3's
 * weights (or one row short) is outside the tolerance. */
typedef struct {
  int ta, tb, out16, in, out, groups;
  const int *rows;
  float beta;
  const uint16_t *x, *y, *w;
} many_shape;

/* The calls of one grouped GEMM into dst; control: group 1 given group 3's
 * weights (forward, dgrad) or one row fewer (wgrad). */
static void many_calls(rc_gemm_half_call *calls, const many_shape *s, void *dst, int control) {
  int wgrad = s->ta, dgrad = !s->ta && !s->tb, in = s->in, out = s->out;
  for (int g = 0, r0 = 0; g < s->groups; r0 += s->rows[g], g++) {
    int wg = control && g == 1 ? 3 : g;
    size_t wo = (size_t)wg * out * in;
    if (wgrad)
      calls[g] = (rc_gemm_half_call){out,
                                     in,
                                     s->rows[g],
                                     s->y + (size_t)r0 * out,
                                     s->x + (size_t)r0 * in,
                                     out,
                                     in,
                                     in,
                                     s->beta,
                                     (float *)dst + (size_t)g * out * in,
                                     NULL};
    else if (dgrad)
      calls[g] = (rc_gemm_half_call){
          s->rows[g], in, out,     s->x + (size_t)r0 * out,        s->w + wo, out,
          in,         in, s->beta, (float *)dst + (size_t)r0 * in, NULL};
    else if (s->out16)
      calls[g] = (rc_gemm_half_call){s->rows[g],
                                     out,
                                     in,
                                     s->x + (size_t)r0 * in,
                                     s->w + wo,
                                     in,
                                     in,
                                     out,
                                     0.0f,
                                     NULL,
                                     (uint16_t *)dst + (size_t)r0 * out};
    else
      calls[g] = (rc_gemm_half_call){
          s->rows[g], out, in,      s->x + (size_t)r0 * in,          s->w + wo, in,
          in,         out, s->beta, (float *)dst + (size_t)r0 * out, NULL};
    if (control && g == 1 && wgrad) calls[g].k = s->rows[g] - 1;
  }
}

static void many_one_by_one(const many_shape *s, const rc_gemm_half_call *calls) {
  for (int g = 0; g < s->groups; g++) {
    const rc_gemm_half_call *c = &calls[g];
    if (c->C)
      G->gemm_half(RC_COMPUTE_BF16, s->ta, s->tb, c->m, c->n, c->k, 1.0f, c->A, c->lda, c->B,
                   c->ldb, c->beta, c->C, c->ldc);
    else
      G->gemm_to_half(RC_COMPUTE_BF16, s->ta, s->tb, c->m, c->n, c->k, c->A, c->lda, c->B, c->ldb,
                      c->C_half, c->ldc);
  }
}

static void gemm_many_case(const char *form, int ta, int tb, int out16, float beta, int in, int out,
                           const int *rows, int groups) {
  rc_compute ct = RC_COMPUTE_BF16;
  int total = 0;
  for (int g = 0; g < groups; g++) total += rows[g];
  int wgrad = ta, dgrad = !ta && !tb;
  size_t nx = (size_t)total * (dgrad ? out : in), ny = wgrad ? (size_t)total * out : 1;
  size_t nw = (size_t)groups * out * in;
  size_t nc = wgrad ? nw : (size_t)total * (dgrad ? in : out);
  float *hx = rand_host(nx, 1.0f), *hy = rand_host(ny, 1.0f), *hw = rand_host(nw, 0.05f),
        *hc = rand_host(nc, 1.0f);
  float *gx = put(G, hx, nx * 4), *gy = put(G, hy, ny * 4), *gw = put(G, hw, nw * 4);
  uint16_t *x = G->alloc(nx * 2), *y = G->alloc(ny * 2), *w = G->alloc(nw * 2);
  G->cast_half(x, gx, nx, ct), G->cast_half(y, gy, ny, ct), G->cast_half(w, gw, nw, ct);
  many_shape sh = {ta, tb, out16, in, out, groups, rows, beta, x, y, w};
  size_t cbytes = nc * (out16 ? 2 : 4);
  void *buf[4]; /* many, many again, one by one, the control one by one */
  rc_gemm_half_call calls[16];
  for (int b = 0; b < 4; b++) {
    buf[b] = put(G, hc, cbytes);
    if (beta == 0.0f) poison(G, buf[b], cbytes);
    many_calls(calls, &sh, buf[b], b == 3);
    if (b < 2)
      G->gemm_half_many(ct, ta, tb, calls, groups);
    else
      many_one_by_one(&sh, calls);
  }
  void *h[4];
  for (int b = 0; b < 4; b++) h[b] = get(G, buf[b], cbytes);
  char name[192];
  snprintf(name, sizeof name,
           "gemm_half_many %s, %d groups (%d rows) in=%d out=%d beta=%g == one by one", form,
           groups, total, in, out, (double)beta);
  float *f[4];
  for (int b = 0; b < 4; b++) {
    f[b] = malloc(nc * 4);
    for (size_t i = 0; i < nc; i++)
      f[b][i] = out16 ? rc_bf16_decode(((uint16_t *)h[b])[i]) : ((float *)h[b])[i];
  }
  double tol = out16 ? 4e-3 : 1e-5;
  check_rel(name, f[0], f[2], nc, tol);
  printf("      (many vs one by one: %s)\n",
         memcmp(h[0], h[2], cbytes) ? "another algorithm for some group" : "bitwise equal");
  check_bits("  run-to-run", h[0], h[1], cbytes);
  double ctl = rel_err(f[3], f[2], nc);
  char what[128];
  snprintf(what, sizeof what, "  control: %s is off by %.3g",
           wgrad ? "a group one row short" : "a group given another's weights", ctl);
  check_true(what, ctl > 10 * tol);
  for (int b = 0; b < 4; b++) free(f[b]);
  if (beta == 1.0f) {
    /* ops.h's fusion property, for the op as a whole: accumulating (beta 1)
     * is bit for bit the beta = 0 calls into fresh outputs followed by an
     * fp32 add (the host's add rounds as the device's). Control: the add
     * against another starting C (hc + 1) differs. */
    void *fresh = G->alloc(cbytes);
    poison(G, fresh, cbytes);
    many_calls(calls, &sh, fresh, 0);
    for (int g = 0; g < groups; g++) calls[g].beta = 0.0f;
    G->gemm_half_many(ct, ta, tb, calls, groups);
    float *d = get(G, fresh, cbytes), *sum = malloc(cbytes), *ctl_sum = malloc(cbytes);
    for (size_t i = 0; i < nc; i++) sum[i] = d[i] + hc[i], ctl_sum[i] = d[i] + (hc[i] + 1.0f);
    check_bits("  beta 1 == beta 0 then add", h[0], sum, cbytes);
    check_true("  control: the add on another C differs", memcmp(h[0], ctl_sum, cbytes) != 0);
    free(d), free(sum), free(ctl_sum), G->free(fresh);
  }
  if (beta == 0.0f) { /* every element written: none of the poison left */
    size_t left = 0;
    for (size_t i = 0; i < nc; i++)
      left += out16 ? ((uint16_t *)h[0])[i] == 0xffff : isnan(((float *)h[0])[i]);
    check_true("  every element written", left == 0);
  }
  for (int b = 0; b < 4; b++) free(h[b]), G->free(buf[b]);
  free(hx), free(hy), free(hw), free(hc);
  G->free(gx), G->free(gy), G->free(gw), G->free(x), G->free(y), G->free(w);
}

/* The CPU's gemm_half_many (its gemm_half / gemm_to_half one after another)
 * against the GPU's, within gemm_half's bf16 tolerance. */
static void gemm_many_vs_cpu(void) {
  enum { GR = 3, IN = 64, OUT = 48 };
  const int rows[GR] = {37, 0, 70};
  int total = 107;
  float *hx = rand_host((size_t)total * IN, 1.0f), *hw = rand_host((size_t)GR * OUT * IN, 0.1f);
  const rc_ops *be[2] = {G, C};
  float *res[2];
  for (int b = 0; b < 2; b++) {
    const rc_ops *o = be[b];
    float *fx = put(o, hx, (size_t)total * IN * 4), *fw = put(o, hw, (size_t)GR * OUT * IN * 4);
    uint16_t *x = o->alloc((size_t)total * IN * 2), *w = o->alloc((size_t)GR * OUT * IN * 2);
    o->cast_half(x, fx, (size_t)total * IN, RC_COMPUTE_BF16);
    o->cast_half(w, fw, (size_t)GR * OUT * IN, RC_COMPUTE_BF16);
    float *y = o->alloc((size_t)total * OUT * 4);
    poison(o, y, (size_t)total * OUT * 4);
    rc_gemm_half_call calls[GR];
    for (int g = 0, r0 = 0; g < GR; r0 += rows[g], g++)
      calls[g] = (rc_gemm_half_call){rows[g],
                                     OUT,
                                     IN,
                                     x + (size_t)r0 * IN,
                                     w + (size_t)g * OUT * IN,
                                     IN,
                                     IN,
                                     OUT,
                                     0.0f,
                                     y + (size_t)r0 * OUT,
                                     NULL};
    o->gemm_half_many(RC_COMPUTE_BF16, false, true, calls, GR);
    res[b] = get(o, y, (size_t)total * OUT * 4);
    o->free(fx), o->free(fw), o->free(x), o->free(w), o->free(y);
  }
  check_rel("gemm_half_many 3 groups (one empty) vs the CPU", res[0], res[1], (size_t)total * OUT,
            1e-2);
  free(res[0]), free(res[1]), free(hx), free(hw);
}

static void test_gemm_half_many(void) {
  printf("-- gemm_half_many\n");
  /* an MoE layer's eight experts: uneven, one empty, rows not multiples of 8 */
  const int rows[8] = {2048, 366, 24, 0, 1500, 3001, 1221, 7};
  const int few[2] = {300, 129};
  int H = quick ? 128 : 768, F2 = quick ? 256 : 4096, F = quick ? 128 : 2048;
  gemm_many_case("fc1 forward NT 16-bit", 0, 1, 1, 0.0f, H, F2, rows, 8);
  gemm_many_case("fc2 forward NT", 0, 1, 0, 0.0f, F, H, rows, 8);
  gemm_many_case("fc1 dgrad NN", 0, 0, 0, 0.0f, H, F2, rows, 8);
  gemm_many_case("fc2 dgrad NN", 0, 0, 0, 0.0f, F, H, rows, 8);
  gemm_many_case("fc1 wgrad TN", 1, 0, 0, 0.0f, H, F2, rows, 8);
  gemm_many_case("fc2 wgrad TN", 1, 0, 0, 1.0f, F, H, rows, 8);
  gemm_many_case("fc1 wgrad TN, fewer groups than lanes", 1, 0, 0, 1.0f, H, F2, few, 2);
  gemm_many_vs_cpu();
}

/* ======================= FP8 (E4M3) ======================= */

/* cast_e4m3 of a rows x cols source (row stride ld_src; src_off floats into
 * its buffer, so that an offset of 1 takes the unaligned path) against the
 * CPU, bit for bit. Both destinations start as 0xff (an e4m3 NaN, never a
 * padding zero), so a byte the kernel forgets shows; 64 guard bytes after the
 * last row must stay 0xff; the padding columns must be zero; two runs give the
 * same bytes. wide: every float class (NaN payloads of both signs, infinities,
 * subnormals, huge values); else values in [-4, 4) with specials sprinkled. */
static void cast_case(int rows, int cols, int ld_src, int ld_dst, int src_off, float scale,
                      int transpose, int wide) {
  size_t ns = (size_t)rows * (size_t)ld_src + (size_t)src_off;
  float *x = wide ? wide_values(ns) : rand_host(ns, 4.0f);
  if (!wide)
    for (size_t i = 0; i < ns; i += 97) x[i] = special((int)(i / 97));
  int out_rows = transpose ? cols : rows, out_cols = transpose ? rows : cols;
  size_t nd = (size_t)out_rows * (size_t)ld_dst, guard = 64;
  float *cs = put(C, x, ns * 4), *gs = put(G, x, ns * 4);
  uint8_t *cd = C->alloc(nd + guard), *gd = G->alloc(nd + guard);
  poison(C, cd, nd + guard);
  C->cast_e4m3(cd, ld_dst, cs + src_off, ld_src, rows, cols, scale, transpose);
  uint8_t *ref = get(C, cd, nd + guard), *got[2];
  double ms = 0.0;
  for (int rep = 0; rep < 2; rep++) {
    poison(G, gd, nd + guard);
    G->sync();
    double t0 = now_s();
    G->cast_e4m3(gd, ld_dst, gs + src_off, ld_src, rows, cols, scale, transpose);
    G->sync();
    if (rep) ms = 1e3 * (now_s() - t0);
    got[rep] = get(G, gd, nd + guard);
  }
  int pad_zero = 1, guard_ok = 1;
  for (int r = 0; r < out_rows; r++)
    for (int c = out_cols; c < ld_dst; c++) pad_zero &= got[0][(size_t)r * ld_dst + c] == 0;
  for (size_t i = nd; i < nd + guard; i++) guard_ok &= got[0][i] == 0xff;
  char name[128];
  snprintf(name, sizeof name, "cast_e4m3%s %dx%d lds=%d ldd=%d%s scale=%g%s", transpose ? " T" : "",
           rows, cols, ld_src, ld_dst, src_off ? " src+1" : "", scale, wide ? " wide" : "");
  check_bits(name, got[0], ref, nd);
  if (ld_dst > out_cols) check_true("  padding columns zero", pad_zero);
  check_true("  nothing written past the last row", guard_ok);
  check_bits("  run-to-run", got[0], got[1], nd + guard);
  if (nd >= ((size_t)1 << 22))
    printf("      (%.3f ms, %.0f GB/s)\n", ms, (double)(ns * 4 + nd) / (ms * 1e6));
  C->free(cs), C->free(cd), G->free(gs), G->free(gd);
  free(x), free(ref), free(got[0]), free(got[1]);
}

/* Both orientations of a rows x cols source: ld_n / ld_t are the
 * destination strides of the plain and the transposed cast. */
static void cast_both(int rows, int cols, int ld_src, int ld_n, int ld_t, int src_off, float scale,
                      int wide) {
  cast_case(rows, cols, ld_src, ld_n, src_off, scale, 0, wide);
  cast_case(rows, cols, ld_src, ld_t, src_off, scale, 1, wide);
}

/* amax_update of x[off .. off+n) from amax0 against the CPU, bit for bit
 * (NaN payloads included: the CPU keeps |first NaN|), twice the same bits. */
static void amax_case(const char *what, const float *x, size_t n, int off, float amax0) {
  size_t bytes = (n + (size_t)off) * 4;
  float *cx = put(C, x, bytes ? bytes : 4), *gx = put(G, x, bytes ? bytes : 4);
  float *ca = put(C, &amax0, 4), *ga = G->alloc(4);
  C->amax_update(ca, cx + off, n);
  float ref, got[2];
  C->to_host(&ref, ca, 4);
  for (int rep = 0; rep < 2; rep++) {
    upload(G, ga, &amax0, 4);
    G->amax_update(ga, gx + off, n);
    G->to_host(&got[rep], ga, 4);
  }
  char name[160];
  snprintf(name, sizeof name, "amax_update %s n=%zu%s amax0=%g -> %g (%08x)", what, n,
           off ? " x+1" : "", amax0, got[0], rc_f32_bits(got[0]));
  check_bits(name, &got[0], &ref, 4);
  check_bits("  run-to-run", &got[0], &got[1], 4);
  C->free(cx), C->free(ca), G->free(gx), G->free(ga);
}

static float host_amax(const float *x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
  return m;
}

static void test_amax_update(void) {
  size_t n = 100003; /* not a multiple of 4, of the block or of a block's share */
  float *x = rand_host(n + 1, 3.0f);
  float mx = host_amax(x, n);
  amax_case("below the data", x, n, 0, 0.5f);
  amax_case("above the data", x, n, 0, 7.0f);
  amax_case("equal to the max", x, n, 0, mx);
  amax_case("unaligned", x, n, 1, 0.5f);
  float nan_a = rc_bits_f32(0x7fc0abcdu);
  amax_case("amax0 NaN stays", x, n, 0, nan_a);
  x[777] = -INFINITY;
  amax_case("-inf in x", x, n, 0, 0.5f);
  /* Two NaNs: the CPU keeps |x[4]| (the first). In the kernel's vectorised
   * partition (25 blocks of 256 threads, a float4 each) x[25600] belongs to
   * thread 0 and x[4] to thread 1: a fold that kept the lower thread's NaN
   * instead of the lower index would give the other payload. */
  x[25600] = rc_bits_f32(0x7fc01234u);
  x[4] = rc_bits_f32(0xffc0beefu);
  amax_case("two NaNs (first kept)", x, n, 0, 0.5f);
  amax_case("two NaNs unaligned", x, n, 1, 0.5f);
  amax_case("NaN in amax0 and in x", x, n, 0, nan_a);
  free(x);
  size_t small[5] = {0, 1, 3, 5, 4097};
  for (int i = 0; i < 5; i++) {
    float *y = rand_host(small[i] + 1, 2.0f);
    amax_case("small", y, small[i], 0, 0.25f);
    amax_case("small", y, small[i], 1, 0.25f);
    free(y);
  }
  if (!quick) { /* more blocks than stage 1's cap */
    size_t big = ((size_t)1 << 22) + 3;
    float *y = rand_host(big, 2.0f);
    amax_case("large", y, big, 0, 1.0f);
    y[big - 1] = rc_bits_f32(0xff800001u);
    amax_case("large, NaN last", y, big, 0, 1.0f);
    free(y);
  }
}

/* e4m3 bytes of values in [-mag, mag) (never NaN). */
static uint8_t *e4m3_host(size_t n, float mag) {
  uint8_t *b = malloc(n + 4);
  for (size_t i = 0; i < n; i++) b[i] = rc_e4m3_encode(rndu() * mag);
  return b;
}

/* GPU against CPU for gemm_e4m3, relative error over the [m, n] result.
 * Every product of two e4m3 values is exact in fp32 (4 x 4 significant bits),
 * so the backends differ only in how the k products are summed. The CPU sums
 * them in fp32 (relative error ~1e-7, like the fp32 GEMM). Hopper's FP8 tensor
 * cores do not: with fast accumulation off (ours) cuBLASLt promotes partial
 * sums to fp32 registers every few MMA instructions, but inside one the
 * accumulator keeps about 13 mantissa bits and truncates (e8m13 by others'
 * measurements; DeepSeek-V3's "around 14 bits"). A truncation of a partial sum
 * costs up to 2^-13 = 1.2e-4 of it, always towards zero; partial sums grow
 * like the result, so the norm-relative error is about 2^-13 whatever k is.
 * Measured on the H200 (cuBLASLt 13.1): 2e-5 at k = 16, 1.1e-4 for every
 * k >= 768 up to 8192 (no growth with k); elementwise at most 0.31 * 2^-13 of
 * sum |a b|. The tolerance is 5e-4, 4.5x the measured error, and still 100x
 * and more below a wrong result (a skipped k block of 16 at k = 768 is ~1e-1,
 * one bad row of 24 ~2e-1, alpha or beta misapplied ~1). */
#define FP8_GEMM_TOL 5e-4

/* One gemm_e4m3 shape: beta = 0 into NaN (C must not be read, padding columns
 * untouched), beta = 1 onto random C (padding kept), each twice bitwise. */
static void gemm_e4m3_case(int m, int n, int k, int pad, float alpha) {
  int ldc = n + pad;
  size_t na = (size_t)m * k, nb = (size_t)n * k, nc = (size_t)m * ldc;
  uint8_t *A = e4m3_host(na, 4.0f), *B = e4m3_host(nb, 4.0f);
  float *C0 = rand_host(nc, 50.0f);
  uint8_t *cA = put(C, A, na), *cB = put(C, B, nb), *gA = put(G, A, na), *gB = put(G, B, nb);
  float *cC = C->alloc(nc * 4), *gC = G->alloc(nc * 4);
  char name[128];
  for (int beta = 0; beta <= 1; beta++) {
    if (beta)
      upload(C, cC, C0, nc * 4);
    else
      poison(C, cC, nc * 4);
    C->gemm_e4m3(m, n, k, alpha, cA, cB, (float)beta, cC, ldc);
    float *ref = get(C, cC, nc * 4), *got[2];
    double ms = 0.0;
    for (int rep = 0; rep < 2; rep++) {
      if (beta)
        upload(G, gC, C0, nc * 4);
      else
        poison(G, gC, nc * 4);
      G->sync();
      double t0 = now_s();
      G->gemm_e4m3(m, n, k, alpha, gA, gB, (float)beta, gC, ldc);
      G->sync();
      if (rep) ms = 1e3 * (now_s() - t0);
      got[rep] = get(G, gC, nc * 4);
    }
    float *rg = malloc((size_t)m * n * 4), *rc = malloc((size_t)m * n * 4);
    int pad_ok = gemm_region(rg, rc, got[0], ref, C0, m, n, ldc, beta);
    snprintf(name, sizeof name, "gemm_e4m3 %dx%dx%d ldc=%d a=%g beta=%d (%.3f ms)", m, n, k, ldc,
             alpha, beta, ms);
    check_rel(name, rg, rc, (size_t)m * n, FP8_GEMM_TOL);
    note_bits(name, rg, rc, (size_t)m * n * 4);
    if (!beta) { /* information: the worst error of sampled elements in units of sum |a b| */
      double worst = 0.0;
      for (size_t e = 0; e < (size_t)m * n; e += 97) {
        size_t i = e / (size_t)n, j = e % (size_t)n;
        double mag = 0.0;
        for (int t = 0; t < k; t++)
          mag += fabs((double)rc_e4m3_decode(A[i * k + t]) * rc_e4m3_decode(B[j * k + t]));
        double d = fabs((double)rg[e] - (double)rc[e]) / (fabs(alpha) * mag + 1e-30);
        if (d > worst) worst = d;
      }
      printf("      (sampled max |gpu - cpu| / (|alpha| sum |a b|) = %.3g = %.3g * 2^-13)\n", worst,
             worst * 8192.0);
    }
    if (pad) check_true("  padding columns untouched", pad_ok);
    check_bits("  run-to-run", got[0], got[1], nc * 4);
    free(rg), free(rc), free(ref), free(got[0]), free(got[1]);
  }
  C->free(cA), C->free(cB), C->free(cC), G->free(gA), G->free(gB), G->free(gC);
  free(A), free(B), free(C0);
}

/* gemm_e4m3 with beta = 1 equals beta = 0 into scratch followed by add, bit for
 * bit (the fused/unfused arms); and operands at an address that is not
 * 16-byte aligned (copied by the backend) give the aligned call's bits. */
static void gemm_e4m3_fusion(int m, int n, int k, float alpha) {
  size_t na = (size_t)m * k, nb = (size_t)n * k, nc = (size_t)m * n;
  uint8_t *A = e4m3_host(na, 4.0f), *B = e4m3_host(nb, 4.0f);
  float *M0 = rand_host(nc, 100.0f);
  uint8_t *gA = put(G, A, na), *gB = put(G, B, nb);
  float *fused = put(G, M0, nc * 4), *unfused = put(G, M0, nc * 4), *scratch = G->alloc(nc * 4);
  poison(G, scratch, nc * 4);
  G->gemm_e4m3(m, n, k, alpha, gA, gB, 1.0f, fused, n);
  G->gemm_e4m3(m, n, k, alpha, gA, gB, 0.0f, scratch, n);
  G->add(unfused, unfused, scratch, nc);
  float *hf = get(G, fused, nc * 4), *hu = get(G, unfused, nc * 4), *hs = get(G, scratch, nc * 4);
  char name[128];
  snprintf(name, sizeof name, "gemm_e4m3 %dx%dx%d beta=1 == beta=0 + add", m, n, k);
  check_bits(name, hf, hu, nc * 4);
  /* the same bytes one byte into a larger buffer */
  uint8_t *A1 = malloc(na + 1), *B1 = malloc(nb + 1);
  A1[0] = B1[0] = 0x55;
  memcpy(A1 + 1, A, na);
  memcpy(B1 + 1, B, nb);
  uint8_t *gA1 = put(G, A1, na + 1), *gB1 = put(G, B1, nb + 1);
  poison(G, scratch, nc * 4);
  G->gemm_e4m3(m, n, k, alpha, gA1 + 1, gB1 + 1, 0.0f, scratch, n);
  float *h1 = get(G, scratch, nc * 4);
  check_bits("  unaligned operands give the aligned bits", h1, hs, nc * 4);
  G->free(gA), G->free(gB), G->free(gA1), G->free(gB1);
  G->free(fused), G->free(unfused), G->free(scratch);
  free(A), free(B), free(A1), free(B1), free(M0), free(hf), free(hu), free(hs), free(h1);
}

/* k = 0: alpha*0 (+ C), bitwise the CPU's. */
static void gemm_e4m3_k0(void) {
  int m = 5, n = 7;
  float *C0 = rand_host((size_t)m * n, 1.0f);
  for (int beta = 0; beta <= 1; beta++) {
    float *c = put(C, C0, (size_t)m * n * 4), *g = put(G, C0, (size_t)m * n * 4);
    if (!beta) poison(G, g, (size_t)m * n * 4), poison(C, c, (size_t)m * n * 4);
    C->gemm_e4m3(m, n, 0, -2.0f, NULL, NULL, (float)beta, c, n);
    G->gemm_e4m3(m, n, 0, -2.0f, NULL, NULL, (float)beta, g, n);
    float *hc = get(C, c, (size_t)m * n * 4), *hg = get(G, g, (size_t)m * n * 4);
    check_bits(beta ? "gemm_e4m3 k=0 beta=1" : "gemm_e4m3 k=0 beta=0", hg, hc, (size_t)m * n * 4);
    C->free(c), G->free(g), free(hc), free(hg);
  }
  free(C0);
}

static void test_fp8(void) {
  printf("-- fp8: cast_e4m3, amax_update, gemm_e4m3\n");
  float scales[6] = {1.0f, 3.7f, 1.0f / 448.0f, 448.0f, 0.0078125f, 1e6f};
  for (int si = 0; si < 6; si++) {
    cast_both(37, 53, 53, 64, 64, 0, scales[si], 0);
    cast_both(37, 53, 53, 64, 64, 0, scales[si], 1);
  }
  cast_both(37, 53, 61, 55, 39, 1, 3.7f, 1);    /* odd strides, unaligned source: scalar paths */
  cast_both(64, 128, 128, 128, 64, 0, 1.0f, 0); /* whole tiles, vector paths, no padding */
  cast_both(1, 1, 1, 16, 16, 0, 2.0f, 1);
  cast_both(37, 53, 53, 64, 64, 0, 0.0f, 1);    /* inf * 0: the host's NaN (negative on x86) */
  cast_both(100, 3, 3, 16, 112, 0, 0.5f, 0);    /* padding into a second tile */
  cast_both(130, 70, 70, 200, 200, 0, 1.0f, 1); /* tiles of padding only */
  if (!quick) {
    cast_both(4096, 2048, 2048, 2048, 4096, 0, 0.25f, 0);
    cast_case(8192, 4096, 4096, 8192, 0, 1.0f, 1, 0); /* the target shape, transposed */
  }
  test_amax_update();
  gemm_e4m3_case(67, 45, 96, 3, 1.0f);           /* m, n not multiples of 8: B padded */
  gemm_e4m3_case(50, 40, 48, 2, 2.0f);           /* n a multiple of 8, not of 16 */
  gemm_e4m3_case(33, 17, 16, 1, -1.5f);          /* k = 16 */
  gemm_e4m3_case(64, 48, 768, 0, 0.25f);         /* canonical C: written directly */
  gemm_e4m3_case(128, 96, 8192, 5, 1.0f / 3.0f); /* long k */
  gemm_e4m3_case(24, 768, 768, 0, 1.0f);         /* MoE-like row counts (bucketed m) */
  gemm_e4m3_case(245, 2048, 768, 0, 0.5f);
  gemm_e4m3_case(428, 768, 768, 8, 1.0f);
  gemm_e4m3_case(245, 768, 2048, 0, 1.0f);
  if (!quick) {
    gemm_e4m3_case(256, 512, 768, 0, 1.0f);
    gemm_e4m3_case(1024, 2304, 768, 0, 1.0f);
  }
  gemm_e4m3_k0();
  gemm_e4m3_fusion(96, 80, 784, 0.5f);
  gemm_e4m3_fusion(37, 45, 96, 1.0f);                   /* B padded */
  gemm_e4m3_fusion(64, 64, quick ? 2048 : 16384, 1.0f); /* wgrad-like: split-K prone */
  if (!quick) gemm_e4m3_fusion(768, 768, 8192, 1.0f);
}

/* sumsq_many / fingerprint_many: on the GPU, what the single calls return,
 * for a count of tensors larger than the reduction's partials block (so the
 * scratch grows) and sizes on both sides of every partition boundary. */
/* ops.h timer_mark / timer_seconds (the profiler's event-timed mode): a
 * mark pair around queued work measures it without a sync in between —
 * positive, below the host's wall time for the same span, and longer for
 * eight times the work; control: a pair around nothing measures less than
 * the pair around one memset. */
static void test_timer_marks(void) {
  printf("-- timer_mark, timer_seconds\n");
  if (twin) { /* the GPU's event timer; the CPU's wall clock under load proves nothing */
    printf("skip  timer (--cpu-twin)\n");
    return;
  }
  size_t bytes = (size_t)256 << 20;
  void *buf = G->alloc(bytes);
  G->sync();
  double t0 = now_s();
  G->timer_mark(0);
  G->zero(buf, bytes);
  G->timer_mark(1);
  for (int i = 0; i < 8; i++) G->zero(buf, bytes);
  G->timer_mark(2);
  double one = G->timer_seconds(0, 1), eight = G->timer_seconds(1, 2);
  double wall = now_s() - t0;
  G->timer_mark(3);
  G->timer_mark(4);
  double none = G->timer_seconds(3, 4);
  char name[128];
  snprintf(name, sizeof name, "timer: one memset %.3f ms, eight %.3f ms (wall %.3f ms)", 1e3 * one,
           1e3 * eight, 1e3 * wall);
  check_true(name, one > 0 && eight > 2 * one && one + eight <= wall);
  check_true("  control: a pair around nothing measures less", none >= 0 && none < one);
  G->free(buf);
}

static void test_reductions_many(void) {
  printf("-- sumsq_many, fingerprint_many\n");
  enum { COUNT = 1500 };
  size_t total = 0, *n = malloc(COUNT * sizeof *n), *nbytes = malloc(COUNT * sizeof *nbytes);
  for (int i = 0; i < COUNT; i++) {
    n[i] = i % 97 == 0 ? 0
                       : (i % 3 == 0 ? 4096u * (size_t)(1 + i % 5) + (size_t)(i % 7)
                                     : 1 + (size_t)(i % 300));
    if (i == 7) n[i] = (1u << 22) + 3; /* more than RED_MAX_BLOCKS blocks' worth */
    nbytes[i] = n[i] * 4;
    total += n[i];
  }
  float *x = rand_host(total, 2.0f);
  float *g = put(G, x, total * 4);
  const float **gx = malloc(COUNT * sizeof *gx);
  size_t off = 0;
  for (int i = 0; i < COUNT; i++) gx[i] = g + off, off += n[i];
  double *sq = malloc(COUNT * sizeof *sq);
  uint64_t *fp = malloc(COUNT * sizeof *fp), *fp_cpu = malloc(COUNT * sizeof *fp_cpu);
  G->sumsq_many(sq, gx, n, COUNT);
  G->fingerprint_many(fp, (const void *const *)gx, nbytes, COUNT);
  int same_sq = 1, same_fp = 1;
  off = 0;
  for (int i = 0; i < COUNT; i++) {
    double s1 = G->sumsq(gx[i], n[i]);
    same_sq &= memcmp(&s1, &sq[i], 8) == 0;
    same_fp &= G->fingerprint(gx[i], nbytes[i]) == fp[i];
    fp_cpu[i] = C->fingerprint(x + off, nbytes[i]);
    off += n[i];
  }
  check_true("sumsq_many (1500 tensors) bitwise the single calls", same_sq);
  check_true("fingerprint_many (1500 tensors) equal to the single calls", same_fp);
  check_bits("fingerprint_many equal to the CPU's", fp, fp_cpu, COUNT * 8);
  /* negative control: one changed word changes its own slot only */
  x[0] = x[0] + 1.0f; /* tensor 0 is empty (n = 0); the word belongs to tensor 1 */
  upload(G, g, x, total * 4);
  uint64_t *fp2 = malloc(COUNT * sizeof *fp2);
  G->fingerprint_many(fp2, (const void *const *)gx, nbytes, COUNT);
  int others = 1;
  for (int i = 0; i < COUNT; i++)
    if (i != 1) others &= fp2[i] == fp[i];
  check_true("  a changed tensor changes its own slot only", fp2[1] != fp[1] && others);
  G->free(g);
  free(x), free(gx), free(n), free(nbytes), free(sq), free(fp), free(fp_cpu), free(fp2);
}

static void test_reductions(void) {
  printf("-- amax, sum, sumsq, count_nonfinite, fingerprint\n");
  size_t sizes[5] = {0, 1, 1000, 65537, (1u << 22) + 3};
  for (int si = 0; si < 5; si++) {
    size_t n = sizes[si];
    float *x = rand_host(n, 3.0f);
    float *c = put(C, x, n * 4), *g = put(G, x, n * 4);
    char name[96];
    double cs = C->sum(c, n), gs = G->sum(g, n), gs2 = G->sum(g, n);
    double cq = C->sumsq(c, n), gq = G->sumsq(g, n), gq2 = G->sumsq(g, n);
    snprintf(name, sizeof name, "sum n=%zu (cpu %.17g gpu %.17g)", n, cs, gs);
    check_true(name, fabs(gs - cs) <= 1e-12 * (fabs(cs) + (double)n) && memcmp(&gs, &gs2, 8) == 0);
    snprintf(name, sizeof name, "sumsq n=%zu (cpu %.17g gpu %.17g)", n, cq, gq);
    check_true(name, fabs(gq - cq) <= 1e-11 * fabs(cq) && memcmp(&gq, &gq2, 8) == 0);
    float ca = C->amax(c, n), ga = G->amax(g, n);
    snprintf(name, sizeof name, "amax n=%zu (%g)", n, ga);
    check_true(name, memcmp(&ca, &ga, 4) == 0);
    uint64_t cf = C->fingerprint(c, n * 4), gf = G->fingerprint(g, n * 4);
    snprintf(name, sizeof name, "fingerprint n=%zu (%016llx)", n, (unsigned long long)gf);
    check_true(name, cf == gf && gf == G->fingerprint(g, n * 4));
    if (n >= 1000) { /* non-finite values: counts, NaN-sticky amax, payload-sensitive fp */
      x[3] = INFINITY;
      x[n / 2] = rc_bits_f32(0x7fc00001u);
      x[n - 1] = -INFINITY;
      upload(C, c, x, n * 4);
      upload(G, g, x, n * 4);
      long cn = C->count_nonfinite(c, n), gn = G->count_nonfinite(g, n);
      snprintf(name, sizeof name, "count_nonfinite n=%zu (%ld)", n, gn);
      check_true(name, cn == gn && gn == 3);
      snprintf(name, sizeof name, "amax with NaN n=%zu", n);
      check_true(name, isnan(G->amax(g, n)));
      cf = C->fingerprint(c, n * 4);
      gf = G->fingerprint(g, n * 4);
      snprintf(name, sizeof name, "fingerprint with NaN payload n=%zu", n);
      check_true(name, cf == gf);
      x[5] = -0.0f;
      upload(G, g, x, n * 4);
      x[5] = 0.0f;
      upload(C, c, x, n * 4);
      snprintf(name, sizeof name, "fingerprint tells -0.0 from +0.0 n=%zu", n);
      check_true(name, C->fingerprint(c, n * 4) != G->fingerprint(g, n * 4));
    } else {
      snprintf(name, sizeof name, "count_nonfinite n=%zu", n);
      check_true(name, C->count_nonfinite(c, n) == G->count_nonfinite(g, n));
    }
    C->free(c);
    G->free(g);
    free(x);
  }
}

/* Host copies of 32 MiB and more go through the backend's pinned bounce
 * buffers (cuda_memory.cu): a round trip of an odd size over several
 * chunks, and a device-to-device copy read back, must be the same bytes.
 * Negative control: the read-back differs from a buffer with one byte
 * changed. */
static void test_large_copies(void) {
  printf("-- large host copies (pinned bounce buffers)\n");
  size_t bytes = ((size_t)53 << 20) + 12;
  unsigned char *h = malloc(bytes), *back = malloc(bytes);
  for (size_t i = 0; i < bytes; i++) h[i] = (unsigned char)(i * 2654435761u >> 13);
  void *d = G->alloc(bytes), *d2 = G->alloc(bytes);
  G->to_device(d, h, bytes);
  G->copy(d2, d, bytes);
  memset(back, 0xA5, bytes);
  G->to_host(back, d2, bytes);
  check_bits("to_device, copy, to_host of 53 MiB + 12 bytes (bounced)", back, h, bytes);
  back[bytes / 2] ^= 1;
  check_true("negative control: one changed byte is seen", memcmp(back, h, bytes) != 0);
  /* the same through the staging buffers host_alloc gives (page-locked on
   * CUDA: one DMA each way, no bounce), and the CPU backend's */
  unsigned char *ph = G->host_alloc(bytes, 1), *pback = G->host_alloc(bytes, 1);
  unsigned char *ch = C->host_alloc(bytes, 1), *gh = G->host_alloc(bytes, 0);
  check_true("host_alloc gives memory (CUDA and CPU backends)", ph && pback && ch);
  if (ph && pback && ch) {
    memcpy(ph, h, bytes);
    memset(pback, 0x5A, bytes);
    G->to_device(d2, ph, bytes);
    G->to_host(pback, d2, bytes);
    check_bits("to_device, to_host of 53 MiB + 12 bytes from and to host_alloc memory", pback, h,
               bytes);
    memcpy(ch, pback, bytes);
    check_bits("the CPU backend's host_alloc memory holds them", ch, h, bytes);
    if (gh) { /* ordinary pages from the CUDA backend: bounced copies */
      memset(gh, 0x3C, bytes);
      G->to_host(gh, d2, bytes);
      check_bits("to_host into CUDA host_alloc memory that is not page-locked", gh, h, bytes);
    }
    pback[7] ^= 1;
    check_true("negative control: one changed byte is seen", memcmp(pback, h, bytes) != 0);
  }
  G->host_free(ph, bytes);
  G->host_free(pback, bytes);
  C->host_free(ch, bytes);
  G->host_free(gh, bytes);
  G->free(d);
  G->free(d2);
  free(h);
  free(back);
}

/* Small uploads from one host buffer rewritten after each call, every one
 * followed at once by a device copy out of its landing place, which the
 * next upload then overwrites: the uploads run from pinned slots without a
 * stream sync (cuda_memory.cu; more uploads than slots, so
 * slots are reused while copies may be in flight), and each copy must still
 * see its own upload. Sizes 4 B .. 256 KiB (the largest staged). Control:
 * the landing place ends with the last upload's bytes, which differ from
 * the first's. */
static void test_small_uploads(void) {
  printf("-- small uploads\n");
  enum { N = 40 };
  const size_t max = (size_t)256 << 10;
  unsigned char *h = malloc(max), *back = malloc(max), *want[N];
  size_t len[N];
  void *landing = G->alloc(max), *out[N];
  for (int i = 0; i < N; i++) {
    len[i] = i == 0 ? 4 : i == N - 1 ? max : (size_t)1 + (size_t)rndi((int)max);
    want[i] = malloc(len[i]);
    for (size_t j = 0; j < len[i]; j++) h[j] = want[i][j] = (unsigned char)rndi(256);
    out[i] = G->alloc(len[i]);
    G->to_device(landing, h, len[i]);
    memset(h, 0xEE, max); /* the caller reuses its buffer at once */
    G->copy(out[i], landing, len[i]);
  }
  int ok = 1;
  for (int i = 0; i < N; i++) {
    G->to_host(back, out[i], len[i]);
    ok &= memcmp(back, want[i], len[i]) == 0;
  }
  check_true("40 uploads of 4 B .. 256 KiB from one reused buffer, each copied out before the next",
             ok);
  /* control: the landing place ends with the last upload, not the first,
   * so every copy ran between two overwrites of what it copied */
  G->to_host(back, landing, len[N - 1]);
  check_true("  control: the landing place holds the last upload, which differs from the first",
             memcmp(back, want[N - 1], len[N - 1]) == 0 && memcmp(want[0], want[N - 1], 4) != 0);
  for (int i = 0; i < N; i++) G->free(out[i]), free(want[i]);
  G->free(landing);
  free(h), free(back);
}

/* zero_many: buffers of many sizes (empty, a few bytes, aligned and not,
 * several blocks' chunks) zeroed in one call, the bytes around each kept;
 * control: a buffer left out keeps its bytes */
static void test_zero_many(void) {
  const size_t total = (size_t)3 << 20;
  unsigned char *host = malloc(total), *want = malloc(total);
  for (size_t i = 0; i < total; i++) host[i] = (unsigned char)(i * 7 + 1) | 1u; /* never 0 */
  memcpy(want, host, total);
  unsigned char *g = put(G, host, total);
  const size_t off[] = {0, 100, 256, 4096 + 3, 70001, 1 << 20, (size_t)2 << 20};
  const size_t len[] = {16, 0, 1, 999, 40000, 600000, 1000003};
  void *dst[7];
  for (int i = 0; i < 7; i++) {
    dst[i] = g + off[i];
    memset(want + off[i], 0, len[i]);
  }
  G->zero_many(dst, len, 6); /* the last one left out */
  unsigned char *got = get(G, g, total);
  check_true("zero_many: six buffers zero, every other byte kept", memcmp(got, want, off[6]) == 0);
  check_true("  control: the buffer left out keeps its bytes",
             memcmp(got + off[6], host + off[6], len[6]) == 0);
  free(got);
  G->zero_many(dst + 6, len + 6, 1);
  got = get(G, g, total);
  check_true("  then alone: zero too", memcmp(got, want, total) == 0);
  free(got), free(host), free(want);
  G->free(g);
}

static void test_basic(void) {
  printf("-- add, scale, copy2d\n");
  size_t n = 100003;
  float *a = rand_host(n, 1.0f), *b = rand_host(n, 1.0f);
  float *ca = put(C, a, n * 4), *cb = put(C, b, n * 4), *co = C->alloc(n * 4);
  float *ga = put(G, a, n * 4), *gb = put(G, b, n * 4), *go = G->alloc(n * 4);
  poison(G, go, n * 4);
  C->add(co, ca, cb, n);
  G->add(go, ga, gb, n);
  float *r = get(C, co, n * 4), *h = get(G, go, n * 4);
  check_bits("add", h, r, n * 4);
  free(r);
  free(h);
  { /* one float off 16-byte alignment: the scalar kernel, the same bits */
    poison(G, go, n * 4);
    G->add(go + 1, ga + 1, gb + 1, n - 1);
    float *u = get(G, go, n * 4), *want = get(C, co, n * 4);
    check_bits("add, unaligned (scalar path)", u + 1, want + 1, (n - 1) * 4);
    free(u), free(want);
  }
  G->add(ga, ga, gb, n); /* aliasing out == a */
  h = get(G, ga, n * 4);
  r = get(C, co, n * 4);
  check_bits("add in place", h, r, n * 4);
  free(r);
  free(h);
  C->scale(cb, 0.3f, n);
  G->scale(gb, 0.3f, n);
  r = get(C, cb, n * 4);
  h = get(G, gb, n * 4);
  check_bits("scale", h, r, n * 4);
  free(r);
  free(h);
  /* copy2d: 37 x 29 from ld 41 into ld 53; the rest of dst keeps its NaN */
  int rows = 37, cols = 29, lds = 41, ldd = 53;
  float *cd = C->alloc((size_t)rows * ldd * 4), *gd = G->alloc((size_t)rows * ldd * 4);
  poison(C, cd, (size_t)rows * ldd * 4);
  poison(G, gd, (size_t)rows * ldd * 4);
  upload(C, ca, a, n * 4); /* the same source on both (ga was added to above) */
  upload(G, ga, a, n * 4);
  C->copy2d(cd, ldd, ca, lds, rows, cols);
  G->copy2d(gd, ldd, ga, lds, rows, cols);
  r = get(C, cd, (size_t)rows * ldd * 4);
  h = get(G, gd, (size_t)rows * ldd * 4);
  check_bits("copy2d (with untouched padding)", h, r, (size_t)rows * ldd * 4);
  free(r);
  free(h);
  C->free(ca);
  C->free(cb);
  C->free(co);
  C->free(cd);
  G->free(ga);
  G->free(gb);
  G->free(go);
  G->free(gd);
  free(a);
  free(b);
}

/* ======================= layers ======================= */

/* hot >= 0: three tokens in four are id `hot`, one long run of adds (a
 * frequent token; the backward batches its loads). hot == EMB_RUN_LENGTHS:
 * ids 0, 1, ... repeated 1, 2, 31, 32, ..., 129, 1, ... times (runs shorter
 * than the backward's 16-row load batch, runs across one or several batch
 * boundaries, and around the long-run kernel's 64: at most 64 rows, just
 * over, exactly two of its 64-row chunks and one more), then shuffled in t.
 * hot == EMB_PADDED: gpu-small's data, documents of 1024 tokens whose last
 * 0..255 are the padding token 0 (a run of ~T/8 rows) */
#define EMB_RUN_LENGTHS (-2)
#define EMB_PADDED (-3)
static void test_embedding(int T, int H, int V, int hot) {
  int32_t *ids = malloc((size_t)T * 4);
  for (int t = 0; t < T; t++) ids[t] = hot >= 0 && t % 4 != 0 ? hot : rndi(V);
  if (hot == EMB_PADDED)
    for (int d = 0; d < T; d += 1024) {
      const int pad = rndi(256), end = d + 1024 < T ? d + 1024 : T;
      for (int t = end - pad; t < end; t++) ids[t] = 0;
    }
  if (hot == EMB_RUN_LENGTHS) {
    static const int len[] = {1, 2, 31, 32, 33, 34, 63, 64, 65, 100, 128, 129};
    const int nlen = (int)(sizeof len / sizeof len[0]);
    for (int t = 0, id = 0, left = len[0]; t < T; t++) {
      ids[t] = id % V;
      if (--left == 0) id++, left = len[id % nlen];
    }
    for (int t = T - 1; t > 0; t--) {
      int u = rndi(t + 1), x = ids[t];
      ids[t] = ids[u], ids[u] = x;
    }
  }
  float *table = rand_host((size_t)V * H, 1.0f), *dout = rand_host((size_t)T * H, 1.0f);
  float *dtab0 = rand_host((size_t)V * H, 0.1f);
  char name[96];
  /* forward */
  int32_t *cid = put(C, ids, (size_t)T * 4), *gid = put(G, ids, (size_t)T * 4);
  float *ctab = put(C, table, (size_t)V * H * 4), *gtab = put(G, table, (size_t)V * H * 4);
  float *co = C->alloc((size_t)T * H * 4), *go = G->alloc((size_t)T * H * 4);
  poison(G, go, (size_t)T * H * 4);
  C->embedding_forward(co, cid, ctab, T, H);
  G->embedding_forward(go, gid, gtab, T, H);
  float *r = get(C, co, (size_t)T * H * 4), *h = get(G, go, (size_t)T * H * 4);
  snprintf(name, sizeof name, "embedding_forward T=%d H=%d V=%d", T, H, V);
  check_bits(name, h, r, (size_t)T * H * 4);
  free(r);
  free(h);
  /* backward: += into a non-zero table */
  float *cdo = put(C, dout, (size_t)T * H * 4), *gdo = put(G, dout, (size_t)T * H * 4);
  float *cdt = put(C, dtab0, (size_t)V * H * 4), *gdt = put(G, dtab0, (size_t)V * H * 4);
  C->embedding_backward(cdt, cid, cdo, T, H, V);
  r = get(C, cdt, (size_t)V * H * 4);
  float *got[2];
  for (int rep = 0; rep < 2; rep++) {
    upload(G, gdt, dtab0, (size_t)V * H * 4);
    G->embedding_backward(gdt, gid, gdo, T, H, V);
    got[rep] = get(G, gdt, (size_t)V * H * 4);
  }
  snprintf(name, sizeof name, "embedding_backward T=%d H=%d V=%d%s", T, H, V,
           hot >= 0                 ? " (one hot id)"
           : hot == EMB_RUN_LENGTHS ? " (runs of 1..129)"
           : hot == EMB_PADDED      ? " (padded documents)"
                                    : "");
  check_rel(name, got[0], r, (size_t)V * H, 1e-5);
  /* rows sum in increasing t, one rounding per term, as on the CPU */
  check_bits("  same order as the CPU", got[0], r, (size_t)V * H * 4);
  check_bits("  run-to-run", got[0], got[1], (size_t)V * H * 4);
  free(r);
  free(got[0]);
  free(got[1]);
  C->free(cid);
  C->free(ctab);
  C->free(co);
  C->free(cdo);
  C->free(cdt);
  G->free(gid);
  G->free(gtab);
  G->free(go);
  G->free(gdo);
  G->free(gdt);
  free(ids);
  free(table);
  free(dout);
  free(dtab0);
}

static void test_rmsnorm(int T, int H) {
  float *x = rand_host((size_t)T * H, 2.0f), *w = rand_host((size_t)H, 1.0f);
  float *dout = rand_host((size_t)T * H, 1.0f), *dx0 = rand_host((size_t)T * H, 0.5f);
  float *dw0 = rand_host((size_t)H, 0.5f);
  float eps = 1e-5f;
  size_t nx = (size_t)T * H;
  char name[96];
  float *cx = put(C, x, nx * 4), *cw = put(C, w, (size_t)H * 4), *co = C->alloc(nx * 4),
        *cr = C->alloc((size_t)T * 4);
  float *gx = put(G, x, nx * 4), *gw = put(G, w, (size_t)H * 4), *go = G->alloc(nx * 4),
        *gr = G->alloc((size_t)T * 4);
  C->rmsnorm_forward(co, cr, cx, cw, T, H, eps, NULL, H, RC_COMPUTE_FP32);
  float *ro = get(C, co, nx * 4), *rr = get(C, cr, (size_t)T * 4);
  float *o[2], *rs[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, go, nx * 4);
    poison(G, gr, (size_t)T * 4);
    G->rmsnorm_forward(go, gr, gx, gw, T, H, eps, NULL, H, RC_COMPUTE_FP32);
    o[rep] = get(G, go, nx * 4);
    rs[rep] = get(G, gr, (size_t)T * 4);
  }
  snprintf(name, sizeof name, "rmsnorm_forward out T=%d H=%d", T, H);
  check_rel(name, o[0], ro, nx, 1e-5);
  check_rel("rmsnorm_forward rstd", rs[0], rr, (size_t)T, 1e-5);
  check_bits("  run-to-run out", o[0], o[1], nx * 4);
  check_bits("  run-to-run rstd", rs[0], rs[1], (size_t)T * 4);
  { /* out_half: bitwise cast_half of out, with out written beside it or not */
    uint16_t *gh = G->alloc(nx * 2), *gw16 = G->alloc(nx * 2);
    G->cast_half(gw16, go, nx, RC_COMPUTE_BF16);
    for (int only = 0; only <= 1; only++) {
      poison(G, gh, nx * 2);
      G->rmsnorm_forward(only ? NULL : go, gr, gx, gw, T, H, eps, gh, H, RC_COMPUTE_BF16);
      uint16_t *h = get(G, gh, nx * 2), *w16 = get(G, gw16, nx * 2);
      check_bits(only ? "  out_half alone == cast_half(out)" : "  out_half == cast_half(out)", h,
                 w16, nx * 2);
      free(h), free(w16);
    }
    /* ld_half 2H (the MTP concatenation's second half): every row where
     * it belongs, the first half of each row untouched */
    uint16_t *gcat = G->alloc(nx * 4), *w16 = get(G, gw16, nx * 2);
    upload(G, gcat, w16, nx * 2), upload(G, (char *)gcat + nx * 2, w16, nx * 2);
    uint16_t *before = get(G, gcat, nx * 4);
    G->rmsnorm_forward(NULL, gr, gx, gw, T, H, eps, gcat + H, 2 * H, RC_COMPUTE_BF16);
    uint16_t *cat = get(G, gcat, nx * 4);
    int rows_ok = 1, gaps_ok = 1;
    for (int t = 0; t < T; t++) {
      rows_ok &= memcmp(cat + (size_t)t * 2 * H + H, w16 + (size_t)t * H, (size_t)H * 2) == 0;
      gaps_ok &= memcmp(cat + (size_t)t * 2 * H, before + (size_t)t * 2 * H, (size_t)H * 2) == 0;
    }
    check_true("  out_half with ld_half 2H: rows in place, the other half kept",
               rows_ok && gaps_ok);
    free(w16), free(before), free(cat);
    G->free(gh), G->free(gw16), G->free(gcat);
  }
  /* backward from the CPU's rstd on both */
  float *cdo = put(C, dout, nx * 4), *gdo = put(G, dout, nx * 4);
  float *cdx = put(C, dx0, nx * 4), *cdw = put(C, dw0, (size_t)H * 4);
  float *gdx = G->alloc(nx * 4), *gdw = G->alloc((size_t)H * 4);
  upload(G, gr, rr, (size_t)T * 4);
  C->rmsnorm_backward(cdx, cdw, cdo, cx, cw, cr, T, H, H, NULL, RC_COMPUTE_FP32, true);
  float *rdx = get(C, cdx, nx * 4), *rdw = get(C, cdw, (size_t)H * 4);
  float *dx[2], *dw[2];
  for (int rep = 0; rep < 2; rep++) {
    upload(G, gdx, dx0, nx * 4);
    upload(G, gdw, dw0, (size_t)H * 4);
    G->rmsnorm_backward(gdx, gdw, gdo, gx, gw, gr, T, H, H, NULL, RC_COMPUTE_FP32, true);
    dx[rep] = get(G, gdx, nx * 4);
    dw[rep] = get(G, gdw, (size_t)H * 4);
  }
  check_rel("rmsnorm_backward dx", dx[0], rdx, nx, 1e-5);
  check_rel("rmsnorm_backward dw", dw[0], rdw, (size_t)H, 1e-5);
  check_bits("  run-to-run dx", dx[0], dx[1], nx * 4);
  check_bits("  run-to-run dw", dw[0], dw[1], (size_t)H * 4);
  /* dx_half (both encodings): bitwise cast_half of the updated dx, and dx
   * and dw as without it; control: the encoding of dx before the add differs */
  for (int k = 0; k < 2; k++) {
    rc_compute hct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    uint16_t *gdh = G->alloc(nx * 2);
    upload(G, gdx, dx0, nx * 4);
    upload(G, gdw, dw0, (size_t)H * 4);
    G->cast_half(gdh, gdx, nx, hct);
    uint16_t *before = get(G, gdh, nx * 2);
    poison(G, gdh, nx * 2);
    G->rmsnorm_backward(gdx, gdw, gdo, gx, gw, gr, T, H, H, gdh, hct, true);
    uint16_t *got = get(G, gdh, nx * 2);
    float *hdx = get(G, gdx, nx * 4), *hdw = get(G, gdw, (size_t)H * 4);
    G->cast_half(gdh, gdx, nx, hct);
    uint16_t *want = get(G, gdh, nx * 2);
    check_bits(k ? "  dx_half (fp16) == cast_half(dx)" : "  dx_half (bf16) == cast_half(dx)", got,
               want, nx * 2);
    check_bits("  dx with dx_half unchanged", hdx, dx[0], nx * 4);
    check_bits("  dw with dx_half unchanged", hdw, dw[0], (size_t)H * 4);
    check_true("  control: dx_half is not the encoding before the add",
               memcmp(got, before, nx * 2) != 0);
    free(before), free(got), free(hdx), free(hdw), free(want);
    G->free(gdh);
  }
  { /* dx_accumulate false: dx written as from zero over whatever it held
     * (poisoned: NaN bytes), bitwise the zeroed buffer's result; dw adds */
    float *zero = calloc(nx, 4);
    upload(G, gdx, zero, nx * 4);
    upload(G, gdw, dw0, (size_t)H * 4);
    G->rmsnorm_backward(gdx, gdw, gdo, gx, gw, gr, T, H, H, NULL, RC_COMPUTE_FP32, true);
    float *zdx = get(G, gdx, nx * 4), *zdw = get(G, gdw, (size_t)H * 4);
    poison(G, gdx, nx * 4);
    upload(G, gdw, dw0, (size_t)H * 4);
    G->rmsnorm_backward(gdx, gdw, gdo, gx, gw, gr, T, H, H, NULL, RC_COMPUTE_FP32, false);
    float *wdx = get(G, gdx, nx * 4), *wdw = get(G, gdw, (size_t)H * 4);
    check_bits("  dx written (no dx_accumulate) == onto zeros", wdx, zdx, nx * 4);
    check_bits("  dw (no dx_accumulate) == onto zeros", wdw, zdw, (size_t)H * 4);
    check_true("  control: onto dx0 differs", memcmp(wdx, dx[0], nx * 4) != 0);
    free(zero), free(zdx), free(zdw), free(wdx), free(wdw);
  }
  { /* ld_dout 2H (the MTP concatenation's gradient, second half): bitwise
     * the contiguous dout's dx and dw */
    float *cat = malloc(nx * 8);
    for (int t = 0; t < T; t++)
      for (int j = 0; j < H; j++)
        cat[(size_t)t * 2 * H + j] = 0.5f, cat[(size_t)t * 2 * H + H + j] = dout[(size_t)t * H + j];
    float *gcat = put(G, cat, nx * 8);
    upload(G, gdx, dx0, nx * 4);
    upload(G, gdw, dw0, (size_t)H * 4);
    G->rmsnorm_backward(gdx, gdw, gcat + H, gx, gw, gr, T, H, 2 * H, NULL, RC_COMPUTE_FP32, true);
    float *sdx = get(G, gdx, nx * 4), *sdw = get(G, gdw, (size_t)H * 4);
    check_bits("  dx with ld_dout 2H == contiguous", sdx, dx[0], nx * 4);
    check_bits("  dw with ld_dout 2H == contiguous", sdw, dw[0], (size_t)H * 4);
    free(cat), free(sdx), free(sdw);
    G->free(gcat);
  }
  for (int rep = 0; rep < 2; rep++) {
    free(o[rep]);
    free(rs[rep]);
    free(dx[rep]);
    free(dw[rep]);
  }
  free(ro);
  free(rr);
  free(rdx);
  free(rdw);
  C->free(cx);
  C->free(cw);
  C->free(co);
  C->free(cr);
  C->free(cdo);
  C->free(cdx);
  C->free(cdw);
  G->free(gx);
  G->free(gw);
  G->free(go);
  G->free(gr);
  G->free(gdo);
  G->free(gdx);
  G->free(gdw);
  free(x);
  free(w);
  free(dout);
  free(dx0);
  free(dw0);
}

static void test_rope(int B, int S, int nh, int hd) {
  size_t n = (size_t)B * S * 3 * nh * hd;
  float *x = rand_host(n, 1.0f);
  char name[96];
  for (int dir = 0; dir < 2; dir++) {
    float *c = put(C, x, n * 4), *g = put(G, x, n * 4);
    if (dir == 0)
      C->rope_forward(c, NULL, RC_COMPUTE_FP32, B, S, nh, hd, 10000.0f, NULL);
    else
      C->rope_backward(c, B, S, nh, hd, 10000.0f, NULL, RC_COMPUTE_FP32);
    float *r = get(C, c, n * 4);
    float *got[2];
    for (int rep = 0; rep < 2; rep++) {
      upload(G, g, x, n * 4);
      if (dir == 0)
        G->rope_forward(g, NULL, RC_COMPUTE_FP32, B, S, nh, hd, 10000.0f, NULL);
      else
        G->rope_backward(g, B, S, nh, hd, 10000.0f, NULL, RC_COMPUTE_FP32);
      got[rep] = get(G, g, n * 4);
    }
    snprintf(name, sizeof name, "rope_%s B=%d S=%d nh=%d hd=%d", dir ? "backward" : "forward", B, S,
             nh, hd);
    check_rel(name, got[0], r, n, 1e-5);
    check_bits("  run-to-run", got[0], got[1], n * 4);
    C->free(c);
    G->free(g);
    free(r);
    free(got[0]);
    free(got[1]);
  }
  free(x);
}

/* The fused forms (ops.h): rope_forward's bf16 heads bitwise the GPU's own
 * in-place rotation encoded into head layout, and within a bf16 ulp of the
 * CPU's heads (device and host cos/sin in double may round apart);
 * BF16 attention from the heads bitwise attention from that rotated qkv;
 * rope_backward's 16-bit gradient bitwise cast_half of the in-place inverse
 * rotation. Every output element written (poisoned first), two runs equal.
 * Negative control: heads of the unrotated qkv are not the rotated ones. */
static void test_rope_fused(int B, int S, int nh, int hd) {
  size_t n = (size_t)B * S * 3 * nh * hd, no = (size_t)B * S * nh * hd, nl = (size_t)B * nh * S;
  float *x = rand_host(n, 1.5f), *dout = rand_host(no, 1.0f);
  char name[128];
  /* the reference: in-place rotation on the GPU, then heads by hand */
  float *g = put(G, x, n * 4);
  G->rope_forward(g, NULL, RC_COMPUTE_FP32, B, S, nh, hd, 10000.0f, NULL);
  float *rot = get(G, g, n * 4);
  uint16_t *want = malloc(n * 2), *want_x = malloc(n * 2), *cpu_heads = malloc(n * 2);
  size_t row = 3 * (size_t)nh * hd;
  for (int part = 0; part < 3; part++)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < nh; h++)
        for (int t = 0; t < S; t++)
          for (int d = 0; d < hd; d++) {
            size_t src = ((size_t)b * S + t) * row + ((size_t)part * nh + h) * hd + d;
            size_t dst = ((((size_t)part * B + b) * nh + h) * S + t) * hd + d;
            want[dst] = rc_bf16_encode(rot[src]);
            want_x[dst] = rc_bf16_encode(x[src]);
          }
  float *c = put(C, x, n * 4);
  uint16_t *ch = C->alloc(n * 2);
  C->rope_forward(c, NULL, RC_COMPUTE_FP32, B, S, nh, hd, 10000.0f, ch);
  C->to_host(cpu_heads, ch, n * 2);
  uint16_t *gh = G->alloc(n * 2), *got[2];
  for (int rep = 0; rep < 2; rep++) {
    upload(G, g, x, n * 4);
    poison(G, gh, n * 2);
    G->rope_forward(g, NULL, RC_COMPUTE_FP32, B, S, nh, hd, 10000.0f, gh);
    got[rep] = get(G, gh, n * 2);
  }
  snprintf(name, sizeof name, "rope_forward heads B=%d S=%d nh=%d hd=%d", B, S, nh, hd);
  check_bits(name, got[0], want, n * 2);
  check_bits("  run-to-run heads", got[0], got[1], n * 2);
  size_t apart = 0, unrotated = 0;
  for (size_t i = 0; i < n; i++) {
    float a = rc_bf16_decode(got[0][i]), r = rc_bf16_decode(cpu_heads[i]);
    apart += fabsf(a - r) > 1e-2f * fabsf(r) + 1e-6f; /* one bf16 ulp is 2^-8 relative */
    unrotated += got[0][i] != want_x[i];
  }
  checks += 2;
  failures += apart != 0;
  failures += unrotated == 0;
  printf("%s  %-52s %zu of %zu beyond a bf16 ulp\n", apart ? "FAIL" : "ok  ",
         "  against the CPU's heads", apart, n);
  printf("%s  %-52s %zu elements differ\n", unrotated ? "ok  " : "FAIL",
         "  negative control: unrotated heads differ", unrotated);
  /* a 16-bit qkv (a half qkv linear's output, ops.h qkv_half): bitwise the
   * heads of its decoded values on the GPU's fp32 path, every element written */
  for (int k = 0; k < 2; k++) {
    const rc_compute ct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    uint16_t *xh = malloc(n * 2);
    float *dec = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
      xh[i] = k ? rc_fp16_encode(x[i]) : rc_bf16_encode(x[i]);
      dec[i] = rc_half_decode(xh[i], k);
    }
    /* the reference heads in a buffer of their own: gh holds the heads of
     * rot, which the attention block below reads */
    uint16_t *gxh = put(G, xh, n * 2), *gh16 = G->alloc(n * 2), *gref = G->alloc(n * 2);
    upload(G, g, dec, n * 4);
    G->rope_forward(g, NULL, RC_COMPUTE_FP32, B, S, nh, hd, 10000.0f, gref);
    uint16_t *ref = get(G, gref, n * 2);
    poison(G, gh16, n * 2);
    poison(G, g, n * 4); /* scratch now */
    G->rope_forward(g, gxh, ct, B, S, nh, hd, 10000.0f, gh16);
    uint16_t *h16 = get(G, gh16, n * 2);
    snprintf(name, sizeof name, "  rope_forward heads from a %s qkv", k ? "fp16" : "bf16");
    check_bits(name, h16, ref, n * 2);
    check_true("  control: they differ from the fp32 qkv's", memcmp(h16, got[0], n * 2) != 0);
    free(xh), free(dec), free(ref), free(h16);
    G->free(gxh), G->free(gh16), G->free(gref);
  }
  if (hd % 16 == 0 && hd <= 128) { /* the bf16 attention from heads and from qkv */
    float *go = G->alloc(no * 4), *gl = G->alloc(nl * 4), *gdq = G->alloc(n * 4);
    float *gdo = put(G, dout, no * 4);
    upload(G, g, rot, n * 4);
    G->attention_forward(RC_COMPUTE_BF16, go, gl, g, NULL, B, S, nh, hd, NULL, RC_COMPUTE_FP32);
    G->attention_backward(RC_COMPUTE_BF16, gdq, gdo, go, gl, g, NULL, B, S, nh, hd, NULL, 0.0f,
                          NULL, RC_COMPUTE_FP32);
    float *o1 = get(G, go, no * 4), *l1 = get(G, gl, nl * 4), *d1 = get(G, gdq, n * 4);
    poison(G, go, no * 4);
    poison(G, gl, nl * 4);
    poison(G, gdq, n * 4);
    G->attention_forward(RC_COMPUTE_BF16, go, gl, NULL, gh, B, S, nh, hd, NULL, RC_COMPUTE_FP32);
    float *o2 = get(G, go, no * 4), *l2 = get(G, gl, nl * 4);
    upload(G, go, o1, no * 4);
    upload(G, gl, l1, nl * 4);
    G->attention_backward(RC_COMPUTE_BF16, gdq, gdo, go, gl, NULL, gh, B, S, nh, hd, NULL, 0.0f,
                          NULL, RC_COMPUTE_FP32);
    float *d2 = get(G, gdq, n * 4);
    check_bits("  attention_forward from heads: out", o2, o1, no * 4);
    check_bits("  attention_forward from heads: lse", l2, l1, nl * 4);
    check_bits("  attention_backward from heads: dqkv", d2, d1, n * 4);
    /* only the bf16 output kept (out NULL): the same out_half and lse, and
     * the backward from it (out_bf16) the dqkv of the fp32 out, whose D reads
     * it rounded to bf16 either way (ops.h) */
    uint16_t *goh = G->alloc(no * 2);
    poison(G, goh, no * 2), poison(G, gl, nl * 4), poison(G, gdq, n * 4);
    G->attention_forward(RC_COMPUTE_BF16, go, gl, NULL, gh, B, S, nh, hd, goh, RC_COMPUTE_BF16);
    uint16_t *oh1 = get(G, goh, no * 2);
    poison(G, goh, no * 2), poison(G, gl, nl * 4);
    G->attention_forward(RC_COMPUTE_BF16, NULL, gl, NULL, gh, B, S, nh, hd, goh, RC_COMPUTE_BF16);
    uint16_t *oh2 = get(G, goh, no * 2);
    float *l3 = get(G, gl, nl * 4);
    check_bits("  attention_forward, out NULL: out_half", oh2, oh1, no * 2);
    check_bits("  attention_forward, out NULL: lse", l3, l1, nl * 4);
    G->attention_backward(RC_COMPUTE_BF16, gdq, gdo, NULL, gl, NULL, gh, B, S, nh, hd, goh, 0.0f,
                          NULL, RC_COMPUTE_FP32);
    float *d3 = get(G, gdq, n * 4);
    check_bits("  attention_backward from out_bf16: dqkv", d3, d1, n * 4);
    free(oh1), free(oh2), free(l3), free(d3);
    G->free(goh);
    free(o1), free(l1), free(d1), free(o2), free(l2), free(d2);
    G->free(go), G->free(gl), G->free(gdq), G->free(gdo);
  }
  /* backward into 16 bits */
  for (int k = 0; k < 2; k++) {
    rc_compute ct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    upload(G, g, x, n * 4);
    G->rope_backward(g, B, S, nh, hd, 10000.0f, NULL, RC_COMPUTE_FP32);
    G->cast_half(gh, g, n, ct);
    uint16_t *ref = get(G, gh, n * 2), *h2[2];
    for (int rep = 0; rep < 2; rep++) {
      upload(G, g, x, n * 4);
      poison(G, gh, n * 2);
      G->rope_backward(g, B, S, nh, hd, 10000.0f, gh, ct);
      h2[rep] = get(G, gh, n * 2);
    }
    snprintf(name, sizeof name, "rope_backward %s gradient B=%d S=%d nh=%d hd=%d",
             k ? "fp16" : "bf16", B, S, nh, hd);
    check_bits(name, h2[0], ref, n * 2);
    check_bits("  run-to-run", h2[0], h2[1], n * 2);
    free(ref), free(h2[0]), free(h2[1]);
  }
  free(x), free(dout), free(rot), free(want), free(want_x), free(cpu_heads), free(got[0]);
  free(got[1]);
  C->free(c), C->free(ch), G->free(g), G->free(gh);
}

/* ct FP32: the fp32 kernels against the CPU within 1e-5. ct BF16: the
 * tensor-core kernels against the CPU's emulation of the same contract
 * within 1e-2, and (negative control) visibly apart from the fp32 result:
 * the rounding the contract names really happens. */
static void test_attention(rc_compute ct, int B, int S, int nh, int hd) {
  const char *tag = ct == RC_COMPUTE_BF16 ? "bf16" : "fp32";
  double tol = ct == RC_COMPUTE_BF16 ? 1e-2 : 1e-5;
  size_t nqkv = (size_t)B * S * 3 * nh * hd, no = (size_t)B * S * nh * hd, nl = (size_t)B * nh * S;
  float *qkv = rand_host(nqkv, 1.5f), *dout = rand_host(no, 1.0f);
  char name[128];
  float *cq = put(C, qkv, nqkv * 4), *co = C->alloc(no * 4), *cl = C->alloc(nl * 4);
  float *gq = put(G, qkv, nqkv * 4), *go = G->alloc(no * 4), *gl = G->alloc(nl * 4);
  C->attention_forward(ct, co, cl, cq, NULL, B, S, nh, hd, NULL, RC_COMPUTE_FP32);
  float *ro = get(C, co, no * 4), *rl = get(C, cl, nl * 4);
  float *o[2], *l[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, go, no * 4);
    poison(G, gl, nl * 4);
    G->attention_forward(ct, go, gl, gq, NULL, B, S, nh, hd, NULL, RC_COMPUTE_FP32);
    o[rep] = get(G, go, no * 4);
    l[rep] = get(G, gl, nl * 4);
  }
  snprintf(name, sizeof name, "attention_forward %s out B=%d S=%d nh=%d hd=%d", tag, B, S, nh, hd);
  check_rel(name, o[0], ro, no, tol);
  check_rel("attention_forward lse", l[0], rl, nl, tol);
  if (ct == RC_COMPUTE_BF16) {
    float *fo = C->alloc(no * 4), *fl = C->alloc(nl * 4);
    C->attention_forward(RC_COMPUTE_FP32, fo, fl, cq, NULL, B, S, nh, hd, NULL, RC_COMPUTE_FP32);
    float *f = get(C, fo, no * 4);
    checks++;
    double e = rel_err(o[0], f, no);
    if (!(e > 1e-5)) failures++;
    printf("%s  %-52s rel err %.3g (must exceed 1e-5)\n", e > 1e-5 ? "ok  " : "FAIL",
           "  bf16 out differs from fp32 out", e);
    free(f);
    C->free(fo);
    C->free(fl);
  }
  check_bits("  run-to-run out", o[0], o[1], no * 4);
  check_bits("  run-to-run lse", l[0], l[1], nl * 4);
  /* out_half: bitwise cast_half of out (bf16 and fp16), out itself unchanged;
   * negative control: the two encodings differ */
  uint16_t *gh = G->alloc(no * 2), *hh[2];
  for (int k = 0; k < 2; k++) {
    rc_compute hct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    poison(G, gh, no * 2);
    G->attention_forward(ct, go, gl, gq, NULL, B, S, nh, hd, gh, hct);
    hh[k] = get(G, gh, no * 2);
    float *o2 = get(G, go, no * 4);
    G->cast_half(gh, go, no, hct);
    uint16_t *want = get(G, gh, no * 2);
    snprintf(name, sizeof name, "  out_half (%s) is cast_half of out", k ? "fp16" : "bf16");
    check_bits(name, hh[k], want, no * 2);
    check_bits("  out with out_half unchanged", o2, o[0], no * 4);
    free(o2);
    free(want);
  }
  checks++;
  failures += memcmp(hh[0], hh[1], no * 2) == 0;
  printf("%s  %-52s\n", memcmp(hh[0], hh[1], no * 2) ? "ok  " : "FAIL",
         "  negative control: bf16 and fp16 encodings differ");
  free(hh[0]);
  free(hh[1]);
  G->free(gh);
  /* backward from the CPU's forward results on both */
  upload(G, go, ro, no * 4);
  upload(G, gl, rl, nl * 4);
  float *cdo = put(C, dout, no * 4), *gdo = put(G, dout, no * 4);
  float *cdq = C->alloc(nqkv * 4), *gdq = G->alloc(nqkv * 4);
  C->attention_backward(ct, cdq, cdo, co, cl, cq, NULL, B, S, nh, hd, NULL, 0.0f, NULL,
                        RC_COMPUTE_FP32);
  float *rd = get(C, cdq, nqkv * 4);
  float *d[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, gdq, nqkv * 4);
    G->attention_backward(ct, gdq, gdo, go, gl, gq, NULL, B, S, nh, hd, NULL, 0.0f, NULL,
                          RC_COMPUTE_FP32);
    d[rep] = get(G, gdq, nqkv * 4);
  }
  snprintf(name, sizeof name, "attention_backward %s dqkv B=%d S=%d nh=%d hd=%d", tag, B, S, nh,
           hd);
  check_rel(name, d[0], rd, nqkv, tol);
  check_bits("  run-to-run dqkv", d[0], d[1], nqkv * 4);
  /* dqkv_half (ops.h): RoPE's backward fused into the backward's stores,
   * bitwise the backward into dqkv and then rope_backward into 16 bits, for
   * both encodings, with dqkv NULL (the fp32 kernels then use scratch), run
   * to run. Control: the gradient's encoding without the rotation differs. */
  uint16_t *gdh = G->alloc(nqkv * 2);
  for (int k = 0; k < 2; k++) {
    rc_compute hct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    upload(G, gdq, d[0], nqkv * 4);
    G->rope_backward(gdq, B, S, nh, hd, 10000.0f, gdh, hct);
    uint16_t *want = get(G, gdh, nqkv * 2), *fused[2];
    for (int rep = 0; rep < 2; rep++) {
      poison(G, gdh, nqkv * 2);
      G->attention_backward(ct, NULL, gdo, go, gl, gq, NULL, B, S, nh, hd, NULL, 10000.0f, gdh,
                            hct);
      fused[rep] = get(G, gdh, nqkv * 2);
    }
    upload(G, gdq, d[0], nqkv * 4);
    G->cast_half(gdh, gdq, nqkv, hct);
    uint16_t *unrotated = get(G, gdh, nqkv * 2);
    snprintf(name, sizeof name, "  dqkv_half (%s, RoPE's backward fused) == rope_backward's",
             k ? "fp16" : "bf16");
    check_bits(name, fused[0], want, nqkv * 2);
    check_bits("  run-to-run dqkv_half", fused[1], fused[0], nqkv * 2);
    check_true("  control: the unrotated gradient's encoding differs",
               memcmp(unrotated, want, nqkv * 2) != 0);
    free(want), free(fused[0]), free(fused[1]), free(unrotated);
  }
  G->free(gdh);
  for (int rep = 0; rep < 2; rep++) {
    free(o[rep]);
    free(l[rep]);
    free(d[rep]);
  }
  free(ro);
  free(rl);
  free(rd);
  C->free(cq);
  C->free(co);
  C->free(cl);
  C->free(cdo);
  C->free(cdq);
  G->free(gq);
  G->free(go);
  G->free(gl);
  G->free(gdo);
  G->free(gdq);
  free(qkv);
  free(dout);
}

static void test_swiglu(int T, int F) {
  size_t ni = (size_t)T * 2 * F, no = (size_t)T * F;
  float *in = rand_host(ni, 4.0f), *dout = rand_host(no, 1.0f);
  float *ci = put(C, in, ni * 4), *co = C->alloc(no * 4), *cdo = put(C, dout, no * 4),
        *cdi = C->alloc(ni * 4);
  float *gi = put(G, in, ni * 4), *go = G->alloc(no * 4), *gdo = put(G, dout, no * 4),
        *gdi = G->alloc(ni * 4);
  C->swiglu_forward(co, ci, NULL, T, F, NULL, RC_COMPUTE_FP32);
  C->swiglu_backward(cdi, cdo, ci, NULL, T, F, NULL, NULL, RC_COMPUTE_FP32);
  float *ro = get(C, co, no * 4), *rdi = get(C, cdi, ni * 4);
  float *o[2], *di[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, go, no * 4);
    poison(G, gdi, ni * 4);
    G->swiglu_forward(go, gi, NULL, T, F, NULL, RC_COMPUTE_FP32);
    G->swiglu_backward(gdi, gdo, gi, NULL, T, F, NULL, NULL, RC_COMPUTE_FP32);
    o[rep] = get(G, go, no * 4);
    di[rep] = get(G, gdi, ni * 4);
  }
  check_rel("swiglu_forward", o[0], ro, no, 1e-5);
  check_rel("swiglu_backward", di[0], rdi, ni, 1e-5);
  check_bits("  run-to-run forward", o[0], o[1], no * 4);
  check_bits("  run-to-run backward", di[0], di[1], ni * 4);
  { /* buffers one float off 16-byte alignment take the scalar path: the same bits */
    float *ui = G->alloc(ni * 4 + 4), *uo = G->alloc(no * 4 + 4), *udo = G->alloc(no * 4 + 4),
          *udi = G->alloc(ni * 4 + 4);
    upload(G, ui + 1, in, ni * 4), upload(G, udo + 1, dout, no * 4);
    G->swiglu_forward(uo + 1, ui + 1, NULL, T, F, NULL, RC_COMPUTE_FP32);
    G->swiglu_backward(udi + 1, udo + 1, ui + 1, NULL, T, F, NULL, NULL, RC_COMPUTE_FP32);
    float *uo_h = get(G, uo + 1, no * 4), *udi_h = get(G, udi + 1, ni * 4);
    check_bits("  unaligned (scalar) == aligned, forward", uo_h, o[0], no * 4);
    check_bits("  unaligned (scalar) == aligned, backward", udi_h, di[0], ni * 4);
    /* the 16-bit outputs: bitwise cast_half of the fp32 ones, alone or beside them */
    for (int only = 0; only <= 1; only++) {
      uint16_t *fh = G->alloc(no * 2), *bh = G->alloc(ni * 2), *fw = G->alloc(no * 2),
               *bw = G->alloc(ni * 2);
      float *fo = put(G, o[0], no * 4), *bo = put(G, di[0], ni * 4);
      G->cast_half(fw, fo, no, RC_COMPUTE_FP16), G->cast_half(bw, bo, ni, RC_COMPUTE_FP16);
      poison(G, fh, no * 2), poison(G, bh, ni * 2);
      G->swiglu_forward(only ? NULL : go, gi, NULL, T, F, fh, RC_COMPUTE_FP16);
      G->swiglu_backward(only ? NULL : gdi, gdo, gi, NULL, T, F, bh, NULL, RC_COMPUTE_FP16);
      uint16_t *a = get(G, fh, no * 2), *b = get(G, fw, no * 2), *c = get(G, bh, ni * 2),
               *d = get(G, bw, ni * 2);
      check_bits(only ? "  forward out_half alone == cast_half(out)"
                      : "  forward out_half == cast_half(out)",
                 a, b, no * 2);
      check_bits(only ? "  backward din_half alone == cast_half(din)"
                      : "  backward din_half == cast_half(din)",
                 c, d, ni * 2);
      free(a), free(b), free(c), free(d);
      G->free(fh), G->free(bh), G->free(fw), G->free(bw), G->free(fo), G->free(bo);
    }
    free(uo_h), free(udi_h);
    G->free(ui), G->free(uo), G->free(udo), G->free(udi);
  }
  /* a 16-bit input (in NULL; fc1's gemm_to_half output): bitwise the fp32
   * input of its decoded values, both outputs, vector and scalar paths (an
   * input 2 bytes off alignment), twice; control: the fp32 input differs */
  for (int k = 0; k < 2; k++) {
    rc_compute ct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    uint16_t *ih = G->alloc(ni * 2 + 2), *oh = G->alloc(no * 2), *dh = G->alloc(ni * 2),
             *rh = G->alloc(no * 2 + 2);
    float *dec = malloc(ni * 4), *gdec = G->alloc(ni * 4);
    G->cast_half(ih, gi, ni, ct);
    uint16_t *ih_host = get(G, ih, ni * 2);
    for (size_t i = 0; i < ni; i++)
      dec[i] = k ? rc_fp16_decode(ih_host[i]) : rc_bf16_decode(ih_host[i]);
    upload(G, gdec, dec, ni * 4);
    G->swiglu_forward(go, gdec, NULL, T, F, oh, ct);
    G->swiglu_backward(gdi, gdo, gdec, NULL, T, F, dh, NULL, ct);
    float *wo = get(G, go, no * 4), *wdi = get(G, gdi, ni * 4);
    uint16_t *woh = get(G, oh, no * 2), *wdh = get(G, dh, ni * 2);
    for (int unaligned = 0; unaligned <= 1; unaligned++) {
      const uint16_t *in_h = ih + unaligned;
      if (unaligned) upload(G, ih + 1, ih_host, ni * 2);
      poison(G, go, no * 4), poison(G, gdi, ni * 4), poison(G, oh, no * 2), poison(G, dh, ni * 2);
      G->swiglu_forward(go, NULL, in_h, T, F, oh, ct);
      /* and the forward's output recomputed (a half fc2's saved input),
       * vector path or (2 bytes off) scalar */
      poison(G, rh, no * 2 + 2);
      G->swiglu_backward(gdi, gdo, NULL, in_h, T, F, dh, rh + unaligned, ct);
      float *ho = get(G, go, no * 4), *hdi = get(G, gdi, ni * 4);
      uint16_t *hoh = get(G, oh, no * 2), *hdh = get(G, dh, ni * 2);
      uint16_t *hrh = get(G, rh + unaligned, no * 2);
      char name[96];
      snprintf(name, sizeof name, "swiglu on a %s input%s == on its decoded values", ct_name(ct),
               unaligned ? " (scalar path)" : "");
      check_bits(name, ho, wo, no * 4);
      check_bits("  out_half", hoh, woh, no * 2);
      check_bits("  backward din", hdi, wdi, ni * 4);
      check_bits("  backward din_half", hdh, wdh, ni * 2);
      check_bits("  backward's recomputed out_half == the forward's", hrh, woh, no * 2);
      free(hrh);
      if (!unaligned)
        check_true("  control: the fp32 input's output differs", memcmp(ho, o[0], no * 4) != 0);
      free(ho), free(hdi), free(hoh), free(hdh);
    }
    free(dec), free(ih_host), free(wo), free(wdi), free(woh), free(wdh);
    G->free(ih), G->free(oh), G->free(dh), G->free(rh), G->free(gdec);
  }
  for (int rep = 0; rep < 2; rep++) {
    free(o[rep]);
    free(di[rep]);
  }
  free(ro);
  free(rdi);
  C->free(ci);
  C->free(co);
  C->free(cdo);
  C->free(cdi);
  G->free(gi);
  G->free(go);
  G->free(gdo);
  G->free(gdi);
  free(in);
  free(dout);
}

static void test_cross_entropy(int T, int V, int with_dloss) {
  size_t n = (size_t)T * V;
  float *logits = rand_host(n, 4.0f), *dloss = rand_host((size_t)T, 1.0f);
  int32_t *labels = malloc((size_t)T * 4);
  for (int t = 0; t < T; t++) labels[t] = rndi(V);
  for (int t = 0; t < T; t += 5) dloss[t] = 0.0f;
  /* ties for the argmax: rows 1 and 2 have their maximum twice */
  if (T > 2 && V > 10) {
    for (int t = 1; t <= 2; t++) {
      logits[(size_t)t * V + 3] = 9.0f;
      logits[(size_t)t * V + V - 2] = 9.0f;
    }
    labels[1] = 3;     /* the lower index wins: correct */
    labels[2] = V - 2; /* the higher one loses: incorrect */
  }
  float *cl = put(C, logits, n * 4), *cls = C->alloc((size_t)T * 4), *ccr = C->alloc((size_t)T * 4);
  int32_t *clab = put(C, labels, (size_t)T * 4);
  float *cdl = with_dloss ? put(C, dloss, (size_t)T * 4) : NULL;
  C->cross_entropy(cls, ccr, cl, clab, cdl, T, V, NULL, RC_COMPUTE_FP32);
  float *rl = get(C, cl, n * 4), *rls = get(C, cls, (size_t)T * 4),
        *rcr = get(C, ccr, (size_t)T * 4);
  float *gl = G->alloc(n * 4), *gls = G->alloc((size_t)T * 4), *gcr = G->alloc((size_t)T * 4);
  int32_t *glab = put(G, labels, (size_t)T * 4);
  float *gdl = with_dloss ? put(G, dloss, (size_t)T * 4) : NULL;
  float *l[2], *ls[2], *cr[2];
  for (int rep = 0; rep < 2; rep++) {
    upload(G, gl, logits, n * 4);
    poison(G, gls, (size_t)T * 4);
    poison(G, gcr, (size_t)T * 4);
    G->cross_entropy(gls, gcr, gl, glab, gdl, T, V, NULL, RC_COMPUTE_FP32);
    l[rep] = get(G, gl, n * 4);
    ls[rep] = get(G, gls, (size_t)T * 4);
    cr[rep] = get(G, gcr, (size_t)T * 4);
  }
  char name[96];
  snprintf(name, sizeof name, "cross_entropy losses T=%d V=%d%s", T, V,
           with_dloss ? "" : " dloss=NULL");
  check_rel(name, ls[0], rls, (size_t)T, 1e-5);
  check_bits("cross_entropy correct (argmax ties to lowest)", cr[0], rcr, (size_t)T * 4);
  if (T > 2 && V > 10)
    check_true("  tie rows: 1 correct, 2 incorrect", cr[0][1] == 1.0f && cr[0][2] == 0.0f);
  check_rel("cross_entropy dlogits", l[0], rl, n, 1e-5);
  int zero_rows_ok = 1;
  for (int t = 0; t < T; t++)
    if (!with_dloss || dloss[t] == 0.0f)
      for (int v = 0; v < V; v++)
        if (rc_f32_bits(l[0][(size_t)t * V + v]) != 0u) zero_rows_ok = 0;
  check_true("  rows with dloss 0 are all +0.0", zero_rows_ok);
  check_bits("  run-to-run dlogits", l[0], l[1], n * 4);
  check_bits("  run-to-run losses", ls[0], ls[1], (size_t)T * 4);
  /* the 16-bit gradient: bitwise cast_half of the in-place one (the same
   * kernel's values), the same losses and flags; every element written */
  for (int k = 0; k < 2; k++) {
    rc_compute ct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    uint16_t *gh = G->alloc(n * 2), *gw = G->alloc(n * 2);
    float *gf = put(G, l[0], n * 4);
    G->cast_half(gw, gf, n, ct);
    poison(G, gh, n * 2);
    upload(G, gl, logits, n * 4);
    G->cross_entropy(gls, gcr, gl, glab, gdl, T, V, gh, ct);
    uint16_t *h = get(G, gh, n * 2), *w = get(G, gw, n * 2);
    float *hls = get(G, gls, (size_t)T * 4), *hcr = get(G, gcr, (size_t)T * 4);
    snprintf(name, sizeof name, "cross_entropy %s gradient == cast_half(in place) T=%d V=%d",
             ct_name(ct), T, V);
    check_bits(name, h, w, n * 2);
    check_bits("  the same losses", hls, ls[0], (size_t)T * 4);
    check_bits("  the same correct flags", hcr, cr[0], (size_t)T * 4);
    free(h), free(w), free(hls), free(hcr);
    G->free(gh), G->free(gw), G->free(gf);
  }
  /* 16-bit logits in place (logits NULL): bitwise what the fp32 path gives
   * on the decoded values (losses, flags, the 16-bit gradient over the
   * logits), twice; control: the undecoded fp32 logits give other losses */
  for (int k = 0; k < 2; k++) {
    rc_compute ct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    uint16_t *gin = G->alloc(n * 2), *gw = G->alloc(n * 2);
    float *dec = malloc(n * 4);
    float *gf = put(G, logits, n * 4);
    G->cast_half(gin, gf, n, ct);
    uint16_t *in_host = get(G, gin, n * 2);
    for (size_t i = 0; i < n; i++)
      dec[i] = k ? rc_fp16_decode(in_host[i]) : rc_bf16_decode(in_host[i]);
    upload(G, gf, dec, n * 4);
    poison(G, gw, n * 2);
    G->cross_entropy(gls, gcr, gf, glab, gdl, T, V, gw, ct);
    uint16_t *w = get(G, gw, n * 2);
    float *wls = get(G, gls, (size_t)T * 4), *wcr = get(G, gcr, (size_t)T * 4);
    for (int rep = 0; rep < 2; rep++) {
      upload(G, gin, in_host, n * 2);
      poison(G, gls, (size_t)T * 4);
      poison(G, gcr, (size_t)T * 4);
      G->cross_entropy(gls, gcr, NULL, glab, gdl, T, V, gin, ct);
      uint16_t *h = get(G, gin, n * 2);
      float *hls = get(G, gls, (size_t)T * 4), *hcr = get(G, gcr, (size_t)T * 4);
      snprintf(name, sizeof name, "cross_entropy on %s logits in place T=%d V=%d%s", ct_name(ct), T,
               V, rep ? " (again)" : "");
      check_bits(name, h, w, n * 2);
      check_bits("  the decoded logits' losses", hls, wls, (size_t)T * 4);
      check_bits("  the decoded logits' correct flags", hcr, wcr, (size_t)T * 4);
      if (!rep)
        check_true("  control: the fp32 logits' losses differ",
                   memcmp(hls, ls[0], (size_t)T * 4) != 0);
      free(h), free(hls), free(hcr);
    }
    free(w), free(wls), free(wcr), free(dec), free(in_host);
    G->free(gin), G->free(gw), G->free(gf);
  }
  for (int rep = 0; rep < 2; rep++) {
    free(l[rep]);
    free(ls[rep]);
    free(cr[rep]);
  }
  free(rl);
  free(rls);
  free(rcr);
  C->free(cl);
  C->free(cls);
  C->free(ccr);
  C->free(clab);
  if (cdl) C->free(cdl);
  G->free(gl);
  G->free(gls);
  G->free(gcr);
  G->free(glab);
  if (gdl) G->free(gdl);
  free(logits);
  free(dloss);
  free(labels);
}

/* The streamed cross-entropy's edges (session 25: the maximum moves a float4
 * at a time after a thread's first, bf16 is encoded two at an instruction):
 * ties inside one float4 and across a thread's float4s, a NaN and an inf
 * logit, and a row whose gradient is subnormal. V = 8192 and 256 threads a
 * row: element 4 * (256 * g + tid) + e is thread tid's float4 g. */
static void test_cross_entropy_edges(void) {
  const int T = 6, V = 8192;
  const size_t n = (size_t)T * V;
  float *logits = rand_host(n, 4.0f), *dloss = rand_host((size_t)T, 1.0f);
  int32_t labels[6] = {5, 7, 11, 0, 0, 13};
  const int in_group = 4 * (256 * 3 + 7) + 1, across_a = 4 * (256 * 2 + 9),
            across_b = 4 * (256 * 5 + 9) + 2;
  logits[0 * (size_t)V + 4 * (256 * 2 + 1) + 1] = NAN;
  logits[1 * (size_t)V + 4 * (256 * 4 + 3) + 3] = INFINITY;
  logits[2 * (size_t)V + 4 * (256 * 6 + 2)] = 100.0f; /* exp(-104): subnormal gradients */
  logits[3 * (size_t)V + in_group] = logits[3 * (size_t)V + in_group + 1] = 9.0f;
  labels[3] = in_group; /* the lower of a tie inside one float4: correct */
  logits[4 * (size_t)V + across_a] = logits[4 * (size_t)V + across_b] = 9.0f;
  labels[4] = across_b; /* the later float4 of the same thread: incorrect */
  dloss[2] = 1.0f;
  float *gl = G->alloc(n * 4), *gls = G->alloc((size_t)T * 4), *gcr = G->alloc((size_t)T * 4);
  float *gdl = put(G, dloss, (size_t)T * 4);
  int32_t *glab = put(G, labels, (size_t)T * 4);
  upload(G, gl, logits, n * 4);
  G->cross_entropy(gls, gcr, gl, glab, gdl, T, V, NULL, RC_COMPUTE_FP32);
  float *l = get(G, gl, n * 4), *ls = get(G, gls, (size_t)T * 4), *cr = get(G, gcr, (size_t)T * 4);
  check_true("cross_entropy edges: ties (in a float4: correct; across: not)",
             cr[3] == 1.0f && cr[4] == 0.0f);
  check_true("  control: the NaN row's loss is NaN, the others finite",
             isnan(ls[0]) && isfinite(ls[2]) && isfinite(ls[3]) && isfinite(ls[5]));
  int subnormals = 0;
  for (int v = 0; v < V; v++) {
    const float g = l[2 * (size_t)V + v];
    subnormals += g != 0.0f && fabsf(g) < 1.17549435e-38f;
  }
  check_true("  the subnormal row has subnormal gradients", subnormals > 100);
  for (int k = 0; k < 2; k++) {
    const rc_compute ct = k ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    uint16_t *gh = G->alloc(n * 2), *gw = G->alloc(n * 2), *gin = G->alloc(n * 2);
    float *gf = put(G, l, n * 4);
    G->cast_half(gw, gf, n, ct); /* the fp32 gradient, encoded */
    poison(G, gh, n * 2);
    upload(G, gl, logits, n * 4);
    G->cross_entropy(gls, gcr, gl, glab, gdl, T, V, gh, ct);
    uint16_t *h = get(G, gh, n * 2), *w = get(G, gw, n * 2);
    float *hcr = get(G, gcr, (size_t)T * 4);
    char name[96];
    snprintf(name, sizeof name, "  %s gradient == cast_half(fp32 gradient), edge rows",
             ct_name(ct));
    check_bits(name, h, w, n * 2);
    check_bits("  the same correct flags", hcr, cr, (size_t)T * 4);
    /* 16-bit logits in place: what the fp32 path gives on the decoded values */
    upload(G, gf, logits, n * 4);
    G->cast_half(gin, gf, n, ct);
    uint16_t *in_host = get(G, gin, n * 2);
    float *dec = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
      dec[i] = k ? rc_fp16_decode(in_host[i]) : rc_bf16_decode(in_host[i]);
    upload(G, gf, dec, n * 4);
    G->cross_entropy(gls, gcr, gf, glab, gdl, T, V, gw, ct);
    uint16_t *w2 = get(G, gw, n * 2);
    float *wcr = get(G, gcr, (size_t)T * 4);
    G->cross_entropy(gls, gcr, NULL, glab, gdl, T, V, gin, ct);
    uint16_t *h2 = get(G, gin, n * 2);
    float *h2cr = get(G, gcr, (size_t)T * 4);
    snprintf(name, sizeof name, "  %s logits in place == the decoded logits, edge rows",
             ct_name(ct));
    check_bits(name, h2, w2, n * 2);
    check_bits("  the same correct flags", h2cr, wcr, (size_t)T * 4);
    free(h), free(w), free(hcr), free(in_host), free(dec), free(w2), free(wcr), free(h2),
        free(h2cr);
    G->free(gh), G->free(gw), G->free(gin), G->free(gf);
  }
  free(l), free(ls), free(cr), free(logits), free(dloss);
  G->free(gl), G->free(gls), G->free(gcr), G->free(gdl), G->free(glab);
}

static void test_dropout(size_t n, float p, uint64_t seed, uint64_t offset) {
  float *x = rand_host(n, 1.0f);
  for (size_t i = 0; i < n; i++)
    if (x[i] == 0.0f) x[i] = 1.0f; /* so a zero output means "dropped" */
  float *c = put(C, x, n * 4), *g = put(G, x, n * 4);
  C->dropout(c, n, p, seed, offset);
  G->dropout(g, n, p, seed, offset);
  float *r = get(C, c, n * 4), *h = get(G, g, n * 4);
  unsigned char *mask_g = malloc(n + 1), *mask_ref = malloc(n + 1);
  for (size_t i = 0; i < n; i++) {
    mask_g[i] = h[i] != 0.0f;
    mask_ref[i] = (unsigned char)rc_dropout_keep(seed, offset, i, p);
  }
  char name[96];
  snprintf(name, sizeof name, "dropout mask n=%zu p=%g offset=%llu", n, p,
           (unsigned long long)offset);
  check_bits(name, mask_g, mask_ref, n);
  check_rel("dropout values", h, r, n, 1e-7);
  note_bits("dropout values", h, r, n * 4);
  upload(G, g, x, n * 4);
  G->dropout(g, n, p, seed, offset);
  float *h2 = get(G, g, n * 4);
  check_bits("  run-to-run", h, h2, n * 4);
  C->free(c);
  G->free(g);
  free(r);
  free(h);
  free(h2);
  free(mask_g);
  free(mask_ref);
  free(x);
}

/* ======================= initialisation ======================= */

/* init_normal: bitwise the CPU's (ops.h promises it), every element of
 * [0, n) written (the buffer is poisoned) and none past it (a poisoned guard
 * element), the same bytes run to run. Negative control: the CPU's draws of
 * the range shifted by one element are other bytes, so the comparison sees
 * a misplaced pair or an off-by-one first. */
static void test_init_normal(size_t n, uint64_t first, uint64_t key, float std) {
  size_t bytes = n * 4;
  float *c = C->alloc(bytes + 4), *g = G->alloc(bytes + 4), *c1 = C->alloc(bytes + 4);
  poison(C, c, bytes + 4);
  poison(G, g, bytes + 4);
  C->init_normal(c, n, first, key, std);
  C->init_normal(c1, n, first + 1, key, std);
  G->init_normal(g, n, first, key, std);
  float *h = get(G, g, bytes + 4);
  char name[128];
  snprintf(name, sizeof name, "init_normal n=%zu first=%llu std=%g", n, (unsigned long long)first,
           std);
  check_bits(name, h, c, bytes);
  uint32_t guard;
  memcpy(&guard, h + n, 4);
  check_true("  nothing written past n", guard == 0xffffffffu);
  check_true("  negative control: the range one element on differs", memcmp(c1, c, bytes) != 0);
  poison(G, g, bytes);
  G->init_normal(g, n, first, key, std);
  float *h2 = get(G, g, bytes);
  check_bits("  run-to-run", h, h2, bytes);
  C->free(c);
  C->free(c1);
  G->free(g);
  free(h);
  free(h2);
}

/* ======================= MoE ======================= */

static void test_moe_route(int T, int E, int k, rc_moe_scoring sc, int with_bias) {
  size_t nl = (size_t)T * E, nk = (size_t)T * k;
  float *logits = rand_host(nl, 3.0f), *bias = rand_host((size_t)E, 0.2f);
  float *dw = rand_host(nk, 1.0f), *dp = rand_host((size_t)E, 1.0f);
  float *cl = put(C, logits, nl * 4), *cb = with_bias ? put(C, bias, (size_t)E * 4) : NULL;
  float *gl = put(G, logits, nl * 4), *gb = with_bias ? put(G, bias, (size_t)E * 4) : NULL;
  int32_t *ci = C->alloc(nk * 4), *gi = G->alloc(nk * 4);
  float *cw = C->alloc(nk * 4), *cp = C->alloc(nl * 4), *gw = G->alloc(nk * 4),
        *gp = G->alloc(nl * 4);
  C->moe_route(ci, cw, cp, cl, cb, T, E, k, sc);
  int32_t *ri = get(C, ci, nk * 4);
  float *rw = get(C, cw, nk * 4), *rp = get(C, cp, nl * 4);
  int32_t *idx[2];
  float *w[2], *p[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, gi, nk * 4);
    poison(G, gw, nk * 4);
    poison(G, gp, nl * 4);
    G->moe_route(gi, gw, gp, gl, gb, T, E, k, sc);
    idx[rep] = get(G, gi, nk * 4);
    w[rep] = get(G, gw, nk * 4);
    p[rep] = get(G, gp, nl * 4);
  }
  char name[128];
  snprintf(name, sizeof name, "moe_route %s%s T=%d E=%d k=%d: topk_idx",
           sc == RC_SCORE_SIGMOID ? "sigmoid" : "softmax", with_bias ? "+bias" : "", T, E, k);
  check_bits(name, idx[0], ri, nk * 4);
  check_rel("moe_route topk_w", w[0], rw, nk, 1e-5);
  check_rel("moe_route probs", p[0], rp, nl, 1e-5);
  check_bits("  run-to-run idx", idx[0], idx[1], nk * 4);
  check_bits("  run-to-run w", w[0], w[1], nk * 4);
  check_bits("  run-to-run probs", p[0], p[1], nl * 4);
  /* backward from the CPU's routing on both */
  upload(G, gi, ri, nk * 4);
  upload(G, gw, rw, nk * 4);
  upload(G, gp, rp, nl * 4);
  float *cdw = put(C, dw, nk * 4), *cdp = put(C, dp, (size_t)E * 4), *cdl = C->alloc(nl * 4);
  float *gdw = put(G, dw, nk * 4), *gdp = put(G, dp, (size_t)E * 4), *gdl = G->alloc(nl * 4);
  C->moe_route_backward(cdl, cdw, cdp, cl, ci, cw, cp, T, E, k, sc);
  float *rdl = get(C, cdl, nl * 4);
  float *dl[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, gdl, nl * 4);
    G->moe_route_backward(gdl, gdw, gdp, gl, gi, gw, gp, T, E, k, sc);
    dl[rep] = get(G, gdl, nl * 4);
  }
  check_rel("moe_route_backward dlogits", dl[0], rdl, nl, 1e-5);
  check_bits("  run-to-run", dl[0], dl[1], nl * 4);
  for (int rep = 0; rep < 2; rep++) {
    free(idx[rep]);
    free(w[rep]);
    free(p[rep]);
    free(dl[rep]);
  }
  free(ri);
  free(rw);
  free(rp);
  free(rdl);
  C->free(cl);
  if (cb) C->free(cb);
  C->free(ci);
  C->free(cw);
  C->free(cp);
  C->free(cdw);
  C->free(cdp);
  C->free(cdl);
  G->free(gl);
  if (gb) G->free(gb);
  G->free(gi);
  G->free(gw);
  G->free(gp);
  G->free(gdw);
  G->free(gdp);
  G->free(gdl);
  free(logits);
  free(bias);
  free(dw);
  free(dp);
}

/* permute, gather, combine and combine_backward on one routing. skew puts
 * most entries on one expert (a long run across many chunks). */
static void test_moe_dispatch(int T, int E, int k, int H, int skew) {
  size_t nk = (size_t)T * k;
  int32_t *topk = malloc(nk * 4);
  for (int t = 0; t < T; t++)
    for (int s = 0; s < k; s++) {
      int e;
      int again;
      do { /* distinct experts per token, like a real top-k */
        e = skew && rndi(4) ? (s % E) : rndi(E);
        again = 0;
        for (int r = 0; r < s; r++) again |= topk[(size_t)t * k + r] == e;
      } while (again);
      topk[(size_t)t * k + s] = e;
    }
  char name[128];
  int32_t *ct = put(C, topk, nk * 4), *gt = put(G, topk, nk * 4);
  int32_t *cperm = C->alloc(nk * 4), *cinv = C->alloc(nk * 4),
          *coff = C->alloc((size_t)(E + 1) * 4);
  int32_t *gperm = G->alloc(nk * 4), *ginv = G->alloc(nk * 4),
          *goff = G->alloc((size_t)(E + 1) * 4);
  C->moe_permute(cperm, cinv, coff, ct, T, E, k);
  int32_t *rperm = get(C, cperm, nk * 4), *rinv = get(C, cinv, nk * 4),
          *roff = get(C, coff, (size_t)(E + 1) * 4);
  int32_t *pg[2], *ig[2], *og[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, gperm, nk * 4);
    poison(G, ginv, nk * 4);
    poison(G, goff, (size_t)(E + 1) * 4);
    G->moe_permute(gperm, ginv, goff, gt, T, E, k);
    pg[rep] = get(G, gperm, nk * 4);
    ig[rep] = get(G, ginv, nk * 4);
    og[rep] = get(G, goff, (size_t)(E + 1) * 4);
  }
  snprintf(name, sizeof name, "moe_permute T=%d E=%d k=%d%s: perm", T, E, k, skew ? " skewed" : "");
  check_bits(name, pg[0], rperm, nk * 4);
  check_bits("moe_permute inv_perm", ig[0], rinv, nk * 4);
  check_bits("moe_permute offsets", og[0], roff, (size_t)(E + 1) * 4);
  check_bits("  run-to-run perm", pg[0], pg[1], nk * 4);

  /* gather */
  size_t nx = (size_t)T * H, nr = nk * H;
  float *x = rand_host(nx, 1.0f), *rows = rand_host(nr, 1.0f), *w = rand_host(nk, 1.0f);
  float *dout = rand_host(nx, 1.0f);
  float *cx = put(C, x, nx * 4), *gx = put(G, x, nx * 4);
  float *cdst = C->alloc(nr * 4), *gdst = G->alloc(nr * 4);
  poison(G, gdst, nr * 4);
  C->moe_gather(cdst, cx, cperm, T, k, H, NULL, RC_COMPUTE_BF16);
  G->moe_gather(gdst, gx, gperm, T, k, H, NULL, RC_COMPUTE_BF16);
  float *r1 = get(C, cdst, nr * 4), *h1 = get(G, gdst, nr * 4);
  check_bits("moe_gather", h1, r1, nr * 4);
  /* the 16-bit rows (alone, and beside the fp32 ones): bitwise the CPU's,
   * which are cast_half's encoding of the gathered rows (test_cpu_ops) */
  for (int f = 0; f < 2; f++) {
    const rc_compute ct = f ? RC_COMPUTE_FP16 : RC_COMPUTE_BF16;
    uint16_t *ch = C->alloc(nr * 2), *gh = G->alloc(nr * 2);
    C->moe_gather(NULL, cx, cperm, T, k, H, ch, ct);
    poison(G, gh, nr * 2);
    G->moe_gather(NULL, gx, gperm, T, k, H, gh, ct);
    uint16_t *rh = get(C, ch, nr * 2), *hh = get(G, gh, nr * 2);
    check_bits(f ? "  moe_gather fp16 rows alone" : "  moe_gather bf16 rows alone", hh, rh, nr * 2);
    poison(G, gh, nr * 2);
    poison(G, gdst, nr * 4);
    G->moe_gather(gdst, gx, gperm, T, k, H, gh, ct);
    uint16_t *hb = get(G, gh, nr * 2);
    float *fb = get(G, gdst, nr * 4);
    check_bits("  the 16-bit rows beside fp32 ones", hb, rh, nr * 2);
    check_bits("  the fp32 rows beside 16-bit ones", fb, r1, nr * 4);
    free(rh), free(hh), free(hb), free(fb);
    C->free(ch), G->free(gh);
  }
  free(r1);
  free(h1);

  /* combine, with weights and without */
  float *crows = put(C, rows, nr * 4), *grows = put(G, rows, nr * 4);
  float *cw = put(C, w, nk * 4), *gw = put(G, w, nk * 4);
  float *cout = C->alloc(nx * 4), *gout = G->alloc(nx * 4);
  for (int weighted = 1; weighted >= 0; weighted--) {
    C->moe_combine(cout, crows, weighted ? cw : NULL, cinv, T, k, H, NULL);
    float *r = get(C, cout, nx * 4);
    float *h[2];
    for (int rep = 0; rep < 2; rep++) {
      poison(G, gout, nx * 4);
      G->moe_combine(gout, grows, weighted ? gw : NULL, ginv, T, k, H, NULL);
      h[rep] = get(G, gout, nx * 4);
    }
    snprintf(name, sizeof name, "moe_combine%s", weighted ? " weighted" : " w=NULL");
    check_rel(name, h[0], r, nx, 1e-5);
    note_bits(name, h[0], r, nx * 4);
    check_bits("  run-to-run", h[0], h[1], nx * 4);
    /* with a residual (the MoE layer's y = xm + its output): bitwise the
     * combine above followed by add */
    float *gres = put(G, dout, nx * 4), *gsum = put(G, h[0], nx * 4), *gy = G->alloc(nx * 4);
    poison(G, gout, nx * 4);
    G->moe_combine(gout, grows, weighted ? gw : NULL, ginv, T, k, H, gres);
    G->add(gy, gres, gsum, nx);
    float *fy = get(G, gout, nx * 4), *wy = get(G, gy, nx * 4);
    check_bits("  with a residual == combine then add", fy, wy, nx * 4);
    free(fy), free(wy);
    G->free(gres), G->free(gsum), G->free(gy);
    free(r);
    free(h[0]);
    free(h[1]);
  }

  /* combine backward */
  float *cdo = put(C, dout, nx * 4), *gdo = put(G, dout, nx * 4);
  float *cdr = C->alloc(nr * 4), *gdr = G->alloc(nr * 4), *cdw = C->alloc(nk * 4),
        *gdw = G->alloc(nk * 4);
  C->moe_combine_backward(cdr, cdw, cdo, crows, cw, cinv, T, k, H);
  float *rdr = get(C, cdr, nr * 4), *rdw = get(C, cdw, nk * 4);
  float *dr[2], *dwg[2];
  for (int rep = 0; rep < 2; rep++) {
    poison(G, gdr, nr * 4);
    poison(G, gdw, nk * 4);
    G->moe_combine_backward(gdr, gdw, gdo, grows, gw, ginv, T, k, H);
    dr[rep] = get(G, gdr, nr * 4);
    dwg[rep] = get(G, gdw, nk * 4);
  }
  check_rel("moe_combine_backward drows", dr[0], rdr, nr, 1e-5);
  check_rel("moe_combine_backward dw", dwg[0], rdw, nk, 1e-5);
  check_bits("  run-to-run drows", dr[0], dr[1], nr * 4);
  check_bits("  run-to-run dw", dwg[0], dwg[1], nk * 4);
  for (int rep = 0; rep < 2; rep++) {
    free(pg[rep]);
    free(ig[rep]);
    free(og[rep]);
    free(dr[rep]);
    free(dwg[rep]);
  }
  free(rperm);
  free(rinv);
  free(roff);
  free(rdr);
  free(rdw);
  C->free(ct);
  C->free(cperm);
  C->free(cinv);
  C->free(coff);
  C->free(cx);
  C->free(cdst);
  C->free(crows);
  C->free(cw);
  C->free(cout);
  C->free(cdo);
  C->free(cdr);
  C->free(cdw);
  G->free(gt);
  G->free(gperm);
  G->free(ginv);
  G->free(goff);
  G->free(gx);
  G->free(gdst);
  G->free(grows);
  G->free(gw);
  G->free(gout);
  G->free(gdo);
  G->free(gdr);
  G->free(gdw);
  free(topk);
  free(x);
  free(rows);
  free(w);
  free(dout);
}

/* ======================= optimizer ======================= */

static void test_adamw(size_t n) {
  float *p = rand_host(n, 1.0f), *g = rand_host(n, 0.1f), *m = rand_host(n, 0.01f);
  float *v = rand_host(n, 0.001f);
  for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
  int step = 7;
  float b1 = 0.9f, b2 = 0.95f;
  float bc1 = (float)(1.0 - pow(b1, step)), bc2 = (float)(1.0 - pow(b2, step));
  float *bufs_h[4] = {p, g, m, v};
  float *cb[4], *gb[4];
  for (int i = 0; i < 4; i++) {
    cb[i] = put(C, bufs_h[i], n * 4);
    gb[i] = put(G, bufs_h[i], n * 4);
  }
  C->adamw(cb[0], cb[1], cb[2], cb[3], n, 3e-4f, b1, b2, 1e-8f, 0.1f, 0.5f, bc1, bc2);
  G->adamw(gb[0], gb[1], gb[2], gb[3], n, 3e-4f, b1, b2, 1e-8f, 0.1f, 0.5f, bc1, bc2);
  const char *names[4] = {"adamw param", "adamw grad (unchanged)", "adamw exp_avg",
                          "adamw exp_avg_sq"};
  for (int i = 0; i < 4; i++) {
    float *r = get(C, cb[i], n * 4), *h = get(G, gb[i], n * 4);
    check_rel(names[i], h, r, n, 1e-5);
    note_bits(names[i], h, r, n * 4);
    free(r);
    free(h);
    C->free(cb[i]);
    G->free(gb[i]);
  }
  free(p);
  free(g);
  free(m);
  free(v);
}

/* adamw_many: every tensor's update bitwise the GPU's adamw (and within
 * adamw's tolerance of the CPU's), its four fingerprints those of fingerprint()
 * on the GPU; tensors of odd sizes (the scalar tail), one starting 4 bytes
 * into its buffers (no float4 path), one empty, and several blocks each (the
 * segment search). The model params copy (param_half: bf16 on tensors 0 and
 * 4, fp16 on 3, none on 1, bf16 on the empty 2) bitwise cast_half of the
 * updated param, on the float4 path and off it. */
static void test_adamw_many(void) {
  enum { NT = 5 };
  const size_t n[NT] = {100003, 7, 0, 4096 * 3 + 1, 50000};
  const float wd[NT] = {0.1f, 0.0f, 0.1f, 0.05f, 0.1f};
  const float b1 = 0.9f, b2 = 0.95f, bc1 = (float)(1.0 - pow(b1, 7)),
              bc2 = (float)(1.0 - pow(b2, 7));
  float *host[NT][4], *cb[NT][4], *gb[NT][4], *rb[NT][4]; /* CPU, GPU many, GPU adamw */
  rc_adamw_tensor ct[NT], gt[NT];
  const rc_compute half_ct[NT] = {RC_COMPUTE_BF16, RC_COMPUTE_FP32, RC_COMPUTE_BF16,
                                  RC_COMPUTE_FP16, RC_COMPUTE_BF16};
  uint16_t *gh[NT]; /* the GPU's param_half, one element of slack */
  for (int i = 0; i < NT; i++) {
    const size_t off = i == 4 ? 1 : 0, bytes = (n[i] + 1) * 4;
    for (int k = 0; k < 4; k++) {
      host[i][k] = rand_host(n[i] + 1, k == 0 ? 1.0f : k == 1 ? 0.1f : 0.01f);
      if (k == 3)
        for (size_t e = 0; e <= n[i]; e++) host[i][k][e] = fabsf(host[i][k][e]);
      cb[i][k] = put(C, host[i][k], bytes);
      gb[i][k] = put(G, host[i][k], bytes);
      rb[i][k] = put(G, host[i][k], bytes);
    }
    ct[i] = (rc_adamw_tensor){cb[i][0] + off, cb[i][2] + off, cb[i][3] + off, cb[i][1] + off,
                              n[i],           wd[i],          NULL,           RC_COMPUTE_FP32};
    gt[i] = (rc_adamw_tensor){gb[i][0] + off, gb[i][2] + off, gb[i][3] + off, gb[i][1] + off,
                              n[i],           wd[i],          NULL,           RC_COMPUTE_FP32};
    gh[i] = G->alloc((n[i] + 1) * 2);
    poison(G, gh[i], (n[i] + 1) * 2);
    if (half_ct[i] != RC_COMPUTE_FP32) gt[i].param_half = gh[i] + off, gt[i].half_ct = half_ct[i];
    G->adamw(rb[i][0] + off, rb[i][1] + off, rb[i][2] + off, rb[i][3] + off, n[i], 3e-4f, b1, b2,
             1e-8f, wd[i], 0.5f, bc1, bc2);
  }
  uint64_t cfp[4 * NT], gfp[4 * NT];
  C->adamw_many(ct, NT, 3e-4f, b1, b2, 1e-8f, 0.5f, bc1, bc2, cfp);
  G->adamw_many(gt, NT, 3e-4f, b1, b2, 1e-8f, 0.5f, bc1, bc2, gfp);
  int single = 0;
  for (int i = 0; i < NT; i++) {
    const size_t bytes = (n[i] + 1) * 4;
    char name[96];
    for (int k = 0; k < 4; k++) {
      float *r = get(G, rb[i][k], bytes), *h = get(G, gb[i][k], bytes),
            *c = get(C, cb[i][k], bytes);
      snprintf(name, sizeof name, "adamw_many tensor %d (n=%zu) buffer %d vs adamw", i, n[i], k);
      check_bits(name, h, r, bytes);
      snprintf(name, sizeof name, "adamw_many tensor %d buffer %d vs the CPU", i, k);
      check_rel(name, h, c, n[i] + 1, 1e-5);
      free(r), free(h), free(c);
    }
    single += gfp[4 * i] == G->fingerprint(gt[i].grad, n[i] * 4);
    single += gfp[4 * i + 1] == G->fingerprint(gt[i].param, n[i] * 4);
    single += gfp[4 * i + 2] == G->fingerprint(gt[i].exp_avg, n[i] * 4);
    single += gfp[4 * i + 3] == G->fingerprint(gt[i].exp_avg_sq, n[i] * 4);
  }
  char what[96];
  snprintf(what, sizeof what, "adamw_many fingerprints: %d of %d equal fingerprint()'s", single,
           4 * NT);
  check_true(what, single == 4 * NT);
  /* the model params copy: cast_half of the param the update wrote */
  for (int i = 0; i < NT; i++) {
    if (half_ct[i] == RC_COMPUTE_FP32 || n[i] == 0) continue;
    uint16_t *ref = G->alloc(n[i] * 2);
    G->cast_half(ref, gt[i].param, n[i], half_ct[i]);
    uint16_t *a = get(G, gt[i].param_half, n[i] * 2), *b = get(G, ref, n[i] * 2);
    snprintf(what, sizeof what, "adamw_many tensor %d param_half (%s) = cast_half of the update", i,
             half_ct[i] == RC_COMPUTE_FP16 ? "fp16" : "bf16");
    check_bits(what, a, b, n[i] * 2);
    if (i == 0) { /* control: the old param's cast is another value */
      float *old = put(G, host[0][0], n[0] * 4);
      G->cast_half(ref, old, n[0], half_ct[0]);
      uint16_t *c = get(G, ref, n[0] * 2);
      check_true("  control: the old param's copy differs", memcmp(a, c, n[0] * 2) != 0);
      free(c);
      G->free(old);
    }
    free(a), free(b);
    G->free(ref);
  }
  /* control: the param's fingerprint before the update is another value */
  float *before = put(G, host[0][0], n[0] * 4);
  check_true("  control: the old param's fingerprint differs",
             gfp[1] != G->fingerprint(before, n[0] * 4));
  G->free(before);
  for (int i = 0; i < NT; i++) {
    for (int k = 0; k < 4; k++) {
      C->free(cb[i][k]), G->free(gb[i][k]), G->free(rb[i][k]);
      free(host[i][k]);
    }
    G->free(gh[i]);
  }
}

/* ======================= production-sized timing ======================= */

static void bench(void) {
  printf("-- production shapes (GPU only: determinism + timing)\n");
  int B = 8, S = 1024, nh = 12, hd = 64, H = nh * hd;
  size_t nqkv = (size_t)B * S * 3 * H, no = (size_t)B * S * H, nl = (size_t)B * nh * S;
  float *qkv = rand_host(nqkv, 1.5f), *dout = rand_host(no, 1.0f);
  float *gq = put(G, qkv, nqkv * 4), *gdo = put(G, dout, no * 4);
  float *go = G->alloc(no * 4), *gl = G->alloc(nl * 4), *gd = G->alloc(nqkv * 4);
  for (int pass = 0; pass < 2; pass++) {
    rc_compute act = pass ? RC_COMPUTE_BF16 : RC_COMPUTE_FP32;
    uint64_t fo[2], fd[2];
    double tf = 0, tb = 0;
    for (int rep = 0; rep < 3; rep++) {
      G->sync();
      double t0 = now_s();
      G->attention_forward(act, go, gl, gq, NULL, B, S, nh, hd, NULL, RC_COMPUTE_FP32);
      G->sync();
      double t1 = now_s();
      G->attention_backward(act, gd, gdo, go, gl, gq, NULL, B, S, nh, hd, NULL, 0.0f, NULL,
                            RC_COMPUTE_FP32);
      G->sync();
      double t2 = now_s();
      if (rep > 0) {
        fo[rep - 1] = G->fingerprint(go, no * 4);
        fd[rep - 1] = G->fingerprint(gd, nqkv * 4);
        tf += t1 - t0;
        tb += t2 - t1;
      }
    }
    double flops = 4.0 * B * nh * (double)S * S * hd / 2; /* causal forward: QK^T and PV */
    printf("      attention %s B=%d S=%d nh=%d hd=%d: forward %.3f ms (%.1f TFLOP/s), backward "
           "%.3f ms (%.1f TFLOP/s)\n",
           pass ? "bf16" : "fp32", B, S, nh, hd, 1e3 * tf / 2, flops / (tf / 2) / 1e12,
           1e3 * tb / 2, 2.5 * flops / (tb / 2) / 1e12);
    check_true(pass ? "attention bf16 production shape: run-to-run out"
                    : "attention fp32 production shape: run-to-run out",
               fo[0] == fo[1]);
    check_true(pass ? "attention bf16 production shape: run-to-run dqkv"
                    : "attention fp32 production shape: run-to-run dqkv",
               fd[0] == fd[1]);
  }
  G->free(gq);
  G->free(gdo);
  G->free(go);
  G->free(gl);
  G->free(gd);
  free(qkv);
  free(dout);

  /* the QKV GEMM and its weight gradient at T = 8192 */
  int T = B * S;
  rc_compute cts[2] = {RC_COMPUTE_FP32, RC_COMPUTE_BF16};
  float *x = rand_host((size_t)T * H, 1.0f), *w = rand_host((size_t)3 * H * H, 0.05f);
  for (size_t i = 0; i < (size_t)T * H; i++) x[i] = rc_round_bf16(x[i]);
  for (size_t i = 0; i < (size_t)3 * H * H; i++) w[i] = rc_round_bf16(w[i]);
  float *gx = put(G, x, (size_t)T * H * 4), *gw = put(G, w, (size_t)3 * H * H * 4);
  float *gy = G->alloc((size_t)T * 3 * H * 4), *gdw = G->alloc((size_t)3 * H * H * 4);
  for (int c = 0; c < 2; c++) {
    G->gemm(cts[c], 0, 1, T, 3 * H, H, 1.0f, gx, H, gw, H, 0.0f, gy, 3 * H); /* plan */
    G->gemm(cts[c], 1, 0, 3 * H, H, T, 1.0f, gy, 3 * H, gx, H, 1.0f, gdw, H);
    G->sync();
    double t0 = now_s();
    G->gemm(cts[c], 0, 1, T, 3 * H, H, 1.0f, gx, H, gw, H, 0.0f, gy, 3 * H);
    G->sync();
    double t1 = now_s();
    G->gemm(cts[c], 1, 0, 3 * H, H, T, 1.0f, gy, 3 * H, gx, H, 1.0f, gdw, H);
    G->sync();
    double t2 = now_s();
    double f = 2.0 * T * 3.0 * H * H;
    printf("      gemm %s fwd %dx%dx%d: %.3f ms (%.1f TFLOP/s); wgrad beta=1: %.3f ms (%.1f "
           "TFLOP/s)\n",
           ct_name(cts[c]), T, 3 * H, H, 1e3 * (t1 - t0), f / (t1 - t0) / 1e12, 1e3 * (t2 - t1),
           f / (t2 - t1) / 1e12);
  }
  G->free(gx);
  G->free(gw);
  G->free(gy);
  G->free(gdw);
  free(x);
  free(w);

  /* many repetitions of split-K-prone weight-gradient GEMMs: every run must
   * give the same bits (fingerprints), fused (beta=1) or not */
  int shapes[3][3] = {{768, 768, 8192}, {64, 64, 16384}, {2304, 768, 8192}};
  for (int c = 0; c < 2; c++)
    for (int si = 0; si < 3; si++) {
      int m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
      float *A = rand_host((size_t)k * m, 1.0f), *Bm = rand_host((size_t)k * n, 1.0f);
      for (size_t i = 0; i < (size_t)k * m; i++) A[i] = rc_round_bf16(A[i]);
      for (size_t i = 0; i < (size_t)k * n; i++) Bm[i] = rc_round_bf16(Bm[i]);
      float *gA = put(G, A, (size_t)k * m * 4), *gB = put(G, Bm, (size_t)k * n * 4);
      float *gC = G->alloc((size_t)m * n * 4);
      uint64_t first = 0;
      int same = 1;
      for (int rep = 0; rep < 20; rep++) {
        G->zero(gC, (size_t)m * n * 4);
        G->gemm(cts[c], 1, 0, m, n, k, 1.0f, gA, m, gB, n, rep & 1 ? 1.0f : 0.0f, gC, n);
        uint64_t f = G->fingerprint(gC, (size_t)m * n * 4);
        if (rep == 0) first = f;
        same &= f == first;
      }
      char name[128];
      snprintf(name, sizeof name, "gemm %s ta=1 %dx%dx%d: 20 runs, beta 0/1 alternating, same bits",
               ct_name(cts[c]), m, n, k);
      check_true(name, same);
      G->free(gA);
      G->free(gB);
      G->free(gC);
      free(A);
      free(Bm);
    }
}

int main(int argc, char **argv) {
  quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  const char *why = NULL;
  twin = argc > 1 && strcmp(argv[1], "--cpu-twin") == 0;
  quick |= twin;
  G = twin ? rc_cpu_ops() : rc_cuda_ops(&why);
  if (!G) {
    printf("SKIP: %s\n", why ? why : "no CUDA backend");
    return 77;
  }
  C = rc_cpu_ops();
  setvbuf(stdout, NULL, _IOLBF, 0);
  double t0 = now_s();

  test_gemm();
  test_rounding();
  test_cast_half();
  test_gemm_half();
  test_gemm_to_half();
  test_fp8();
  test_reductions();
  test_reductions_many();
  test_timer_marks();
  test_basic();
  test_zero_many();
  test_large_copies();
  test_small_uploads();

  printf("-- layers\n");
  test_embedding(1000, 72, 37, -1);
  test_embedding(5000, 40, 300, -1); /* several sort chunks */
  test_embedding(3000, 768, 500, 5); /* a run of 2250 adds, batched loads per column */
  test_embedding(700, 37, 60, 2);    /* H % 4 != 0: the rows a float at a time */
  test_embedding(3000, 768, 500, EMB_RUN_LENGTHS);
  test_embedding(2000, 37, 400, EMB_RUN_LENGTHS);
  test_embedding(8192, 768, 32768, -1);             /* gpu-small: runs of one or two */
  test_embedding(8192, 768, 32768, EMB_PADDED);     /* and its padding token's run */
  test_embedding(5000, 200, 3000, EMB_RUN_LENGTHS); /* H not a multiple of the long runs' 128 */
  test_rmsnorm(300, 200);
  test_rmsnorm(130, 768);
  test_rmsnorm(50, 1000);
  test_rmsnorm(70, 2000); /* wider than the fused backward: the two-kernel path */
  test_rope(2, 50, 3, 16);
  if (!quick) test_rope(1, 1024, 2, 64);
  test_rope_fused(2, 50, 3, 16);
  test_rope_fused(1, 77, 2, 48);
  test_rope_fused(1, 40, 2, 6); /* hd % 16 != 0: RoPE alone, no bf16 attention */
  if (!quick) test_rope_fused(2, 1024, 12, 64);
  test_attention(RC_COMPUTE_FP32, 2, 100, 3, 16);
  test_attention(RC_COMPUTE_FP32, 1, 130, 2, 64);
  test_attention(RC_COMPUTE_FP32, 2, 64, 2, 32);
  test_attention(RC_COMPUTE_FP32, 1, 77, 1, 128);
  test_attention(RC_COMPUTE_FP32, 1, 40, 2, 6);
  if (!quick) test_attention(RC_COMPUTE_FP32, 1, 1024, 2, 64);
  /* bf16: every head-dim template (16, 32, 64 with hd 48, 128), partial tiles */
  test_attention(RC_COMPUTE_BF16, 2, 100, 3, 16);
  test_attention(RC_COMPUTE_BF16, 1, 130, 2, 64);
  test_attention(RC_COMPUTE_BF16, 2, 64, 2, 32);
  test_attention(RC_COMPUTE_BF16, 1, 77, 2, 48);
  test_attention(RC_COMPUTE_BF16, 1, 77, 1, 128);
  test_attention(RC_COMPUTE_BF16, 1, 5, 1, 16);
  if (!quick) test_attention(RC_COMPUTE_BF16, 1, 1024, 2, 64);
  test_swiglu(100, 300);
  test_swiglu(37, 301);   /* F % 4 != 0: the scalar path */
  test_swiglu(512, 2048); /* gpu-small's F */
  test_cross_entropy(64, 1000, 1);
  test_cross_entropy(8, 50257, 1);  /* beyond rows in registers */
  test_cross_entropy(24, 32768, 1); /* 32 per thread, gpu-small's vocab */
  test_cross_entropy(12, 9000, 1);  /* 16 per thread, a partial last stripe */
  test_cross_entropy(8, 5000, 0);   /* 8 per thread */
  test_cross_entropy(16, 300, 0);
  test_cross_entropy(40, 4099, 1);  /* V % 4 != 0: rows in registers, not streamed */
  test_cross_entropy(300, 4096, 1); /* more rows than SMs: a block streams several */
  test_cross_entropy(8, 50304, 1);  /* dense16's vocabulary */
  test_cross_entropy(4, 70000, 1);  /* a row longer than 64K elements */
  test_cross_entropy_edges();
  test_dropout(10003, 0.1f, 42, 12345);
  test_dropout(4096, 0.5f, 0xdeadbeefcafef00dull, 0);

  printf("-- initialisation\n");
  uint64_t init_key = rc_mix64(1234 ^ 0xA5A5A5A5ull) ^ (7ull << 40);
  test_init_normal(100003, 0, init_key, 0.02f);
  test_init_normal(100002, 12345, init_key, 1.0f);           /* odd first, even n */
  test_init_normal(77777, 1ull << 40 | 1, ~init_key, 0.02f); /* odd first and n */
  test_init_normal(1, 7, init_key, 1.0f);
  test_init_normal(1, 8, init_key, 0.02f);
  test_init_normal(2, 9, init_key, 0.02f); /* two halves of two pairs */
  if (!quick) test_init_normal((1u << 24) + 3, 5, init_key, 0.02f);

  printf("-- moe\n");
  test_moe_route(500, 16, 4, RC_SCORE_SOFTMAX, 0);
  test_moe_route(500, 16, 4, RC_SCORE_SIGMOID, 1);
  test_moe_route(333, 64, 8, RC_SCORE_SIGMOID, 0);
  test_moe_route(100, 8, 1, RC_SCORE_SOFTMAX, 0);
  test_moe_dispatch(3000, 16, 4, 40, 0);
  test_moe_dispatch(2000, 8, 2, 24, 1);
  test_moe_dispatch(77, 1, 1, 8, 0);
  test_moe_dispatch(300, 4, 2, 13, 1); /* H % 4 != 0: the rows a float at a time */

  test_gemm_half_many();

  printf("-- optimizer\n");
  test_adamw(100003);
  test_adamw_many();

  if (!quick) bench();

  printf("%d checks, %d failures (%.1f s)\n", checks, failures, now_s() - t0);
  return failures ? 1 : 0;
}
