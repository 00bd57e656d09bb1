/* test_numeric.c — numeric.h against independent references.
 *
 * The rounding functions, the Philox generator and the fingerprint are shared
 * bit for bit by the CPU backend and the CUDA kernels, so they are checked
 * here against references that do not share their tricks: bf16 by comparing
 * distances in double, fp16 by GCC's own _Float16 conversion, E4M3 by brute
 * force over all 256 codes, Philox by the Random123 known-answer vectors.
 * Every check is also run against a deliberately wrong implementation to show
 * that it can fail. */
#include "backend/numeric.h"
#include "backend/ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t next_u64(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Same bits, or both NaN: NaN payloads are checked separately where defined. */
static int same(float a, float b) {
  return (isnan(a) && isnan(b)) || rc_f32_bits(a) == rc_f32_bits(b);
}

/* A growing list of test inputs. */
typedef struct {
  float *v;
  size_t n, cap;
} vals;

static void push(vals *s, float x) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 1024;
    s->v = realloc(s->v, s->cap * sizeof(float));
    if (!s->v) abort();
  }
  s->v[s->n++] = x;
}

static void push_pm(vals *s, float x) { /* x, -x and both float neighbours of each */
  float c[3] = {x, nextafterf(x, INFINITY), nextafterf(x, -INFINITY)};
  for (int i = 0; i < 3; i++) {
    push(s, c[i]);
    push(s, -c[i]);
  }
}

/* Counts inputs where fn disagrees with ref; prints the first few. */
static long mismatches(const char *what, float (*fn)(float), float (*ref)(float), const vals *s,
                       int verbose) {
  long bad = 0;
  for (size_t i = 0; i < s->n; i++) {
    float got = fn(s->v[i]), want = ref(s->v[i]);
    if (!same(got, want)) {
      if (verbose && bad < 5)
        fprintf(stderr, "  %s(%a = 0x%08x) = %a, reference %a\n", what, s->v[i],
                rc_f32_bits(s->v[i]), got, want);
      bad++;
    }
  }
  return bad;
}

/* ---- bf16 ---- */

/* Nearest bf16 by comparing distances in double; ties to the even encoding. */
static float ref_bf16(float x) {
  if (isnan(x) || isinf(x)) return x;
  uint32_t u = rc_f32_bits(x), sign = u & 0x80000000u;
  uint32_t lo = u & 0x7fff0000u; /* bf16 below |x| (truncation) */
  int e = (int)(lo >> 23);
  double ulp = ldexp(1.0, (e ? e : 1) - 127 - 7);
  double a = fabs((double)x), dlo = a - (double)rc_bits_f32(lo),
         dhi = (double)rc_bits_f32(lo) + ulp - a;
  int up = dhi < dlo || (dhi == dlo && ((lo >> 16) & 1u));
  return rc_bits_f32(sign | (up ? lo + 0x10000u : lo)); /* lo + 1 ulp may become inf: correct */
}

static float trunc_bf16(float x) { /* negative control: rounds toward zero */
  return rc_bits_f32(rc_f32_bits(x) & 0xffff0000u);
}

static void test_bf16(void) {
  vals s = {0};
  uint64_t rng = 1;
  for (int i = 0; i < 1000000; i++) push(&s, rc_bits_f32((uint32_t)next_u64(&rng)));
  for (int i = 0; i < 200000; i++) { /* exact ties and their neighbours */
    uint32_t u = ((uint32_t)next_u64(&rng) & 0xffff0000u) | 0x8000u;
    push_pm(&s, rc_bits_f32(u & 0x7fffffffu));
  }
  push_pm(&s, 0.0f);
  push_pm(&s, 1.0f);
  push_pm(&s, 1.00390625f);             /* 1 + 2^-8: tie, rounds down to even */
  push_pm(&s, 1.01171875f);             /* 1 + 3*2^-8: tie, rounds up to even */
  push_pm(&s, rc_bits_f32(0x00000001)); /* smallest subnormal */
  push_pm(&s, rc_bits_f32(0x00008000)); /* subnormal tie */
  push_pm(&s, rc_bits_f32(0x00018000));
  push_pm(&s, rc_bits_f32(0x007fffff)); /* largest subnormal: rounds to the smallest normal */
  push_pm(&s, rc_bits_f32(0x7f7fffff)); /* FLT_MAX: rounds to inf */
  push_pm(&s, rc_bits_f32(0x7f7f7fff)); /* just below the overflow tie */
  push_pm(&s, rc_bits_f32(0x7f7f8000)); /* overflow tie: to inf (even) */
  push(&s, INFINITY);
  push(&s, -INFINITY);
  long bad = mismatches("rc_round_bf16", rc_round_bf16, ref_bf16, &s, 1);
  CHECK(bad == 0, "rc_round_bf16 disagrees with the double-distance reference on %ld of %zu", bad,
        s.n);
  long ctl = mismatches("trunc_bf16", trunc_bf16, ref_bf16, &s, 0);
  CHECK(ctl > 0, "negative control: truncation should disagree with the reference");

  /* NaN: stays NaN, keeps its sign and payload, and is quietened. */
  uint32_t nans[] = {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7fffffffu, 0xffa12345u};
  for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    uint32_t r = rc_f32_bits(rc_round_bf16(rc_bits_f32(nans[i])));
    CHECK(r == (nans[i] | 0x00400000u), "rc_round_bf16(NaN 0x%08x) = 0x%08x", nans[i], r);
  }
  CHECK(rc_f32_bits(rc_round_bf16(-0.0f)) == 0x80000000u, "rc_round_bf16(-0.0) lost the sign");
  free(s.v);
}

/* ---- fp16 ---- */

static float ref_fp16(float x) {
  return (float)(_Float16)x; /* GCC's conversion: nearest, ties to even */
}

static double fp16_value(uint16_t h) {
  _Float16 f;
  memcpy(&f, &h, sizeof f);
  return (double)f;
}

static float trunc_fp16(float x) { /* negative control: no subnormal rounding, no ties */
  return rc_bits_f32(rc_f32_bits(x) & 0xffffe000u);
}

static void test_fp16(void) {
  vals s = {0};
  uint64_t rng = 2;
  for (uint64_t u = 0; u < (1ull << 32); u += 977) push(&s, rc_bits_f32((uint32_t)u));
  for (int i = 0; i < 500000; i++) push(&s, rc_bits_f32((uint32_t)next_u64(&rng)));
  /* Every fp16 magnitude, the midpoint to the next one (a tie), and their
   * float neighbours; covers subnormals, the normal boundary and overflow. */
  for (uint32_t h = 0; h < 0x7c00u; h++) {
    double v = fp16_value((uint16_t)h), nx = fp16_value((uint16_t)(h + 1));
    if (h + 1 == 0x7c00u) nx = 65536.0; /* the "next value" past the max is the overflow point */
    push_pm(&s, (float)v);
    push_pm(&s, (float)((v + nx) / 2)); /* exact: 12 significant bits */
  }
  push_pm(&s, 65504.0f);
  push_pm(&s, 65520.0f);
  push_pm(&s, 1e30f);
  push(&s, INFINITY);
  push(&s, -INFINITY);
  push(&s, NAN);
  long bad = mismatches("rc_round_fp16", rc_round_fp16, ref_fp16, &s, 1);
  CHECK(bad == 0, "rc_round_fp16 disagrees with _Float16 on %ld of %zu values", bad, s.n);
  long ctl = mismatches("trunc_fp16", trunc_fp16, ref_fp16, &s, 0);
  CHECK(ctl > 0, "negative control: truncation should disagree with _Float16");
  free(s.v);
}

/* ---- E4M3 ---- */

/* Value of a non-negative E4M3 code (0..126; 127 is NaN). */
static double e4m3_value(int code) {
  int e = (code >> 3) & 15, m = code & 7;
  return e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp((double)m, -9);
}

/* Nearest of all finite codes, ties to the even code (= even mantissa),
 * saturating at 448. */
static float ref_e4m3(float x) {
  if (isnan(x)) return x;
  double a = fabs((double)x), best = 448.0;
  if (a < 448.0) {
    int bc = -1;
    double bd = INFINITY;
    for (int c = 0; c < 127; c++) {
      double d = fabs(a - e4m3_value(c));
      if (d < bd || (d == bd && (c & 1) == 0)) bd = d, bc = c;
    }
    best = e4m3_value(bc);
  }
  return copysignf((float)best, x);
}

static float bad_e4m3(float x) { /* negative control: ties away from zero */
  if (isnan(x)) return x;
  double a = fabs((double)x), best = 448.0;
  if (a < 448.0) {
    double bd = INFINITY;
    for (int c = 0; c < 127; c++) {
      double d = fabs(a - e4m3_value(c));
      if (d <= bd) bd = d, best = e4m3_value(c);
    }
  }
  return copysignf((float)best, x);
}

static void test_e4m3(void) {
  vals s = {0};
  uint64_t rng = 3;
  for (int c = 0; c < 127; c++) {
    push_pm(&s, (float)e4m3_value(c));
    if (c + 1 < 127) push_pm(&s, (float)((e4m3_value(c) + e4m3_value(c + 1)) / 2)); /* ties */
  }
  push_pm(&s, 448.0f);
  push_pm(&s, 464.0f); /* midpoint to the non-existent 480: saturates */
  push_pm(&s, 1e30f);
  push(&s, INFINITY);
  push(&s, -INFINITY);
  push(&s, NAN);
  for (int i = 0; i < 200000; i++) {
    double u = (double)(next_u64(&rng) >> 11) * 0x1p-53; /* [0, 1) */
    push(&s, (float)((u - 0.5) * 1200.0));               /* beyond +-448 too */
    push(&s, (float)((u - 0.5) * 0.1));                  /* subnormal range */
    push(&s, rc_bits_f32((uint32_t)next_u64(&rng)));
  }
  long bad = mismatches("rc_round_e4m3", rc_round_e4m3, ref_e4m3, &s, 1);
  CHECK(bad == 0, "rc_round_e4m3 disagrees with brute force on %ld of %zu values", bad, s.n);
  long ctl = mismatches("bad_e4m3", bad_e4m3, ref_e4m3, &s, 0);
  CHECK(ctl > 0, "negative control: ties away from zero should disagree with brute force");
  free(s.v);
}

/* ---- Philox4x32-10 ---- */

/* Random123's kat_vectors for philox4x32 with 10 rounds: counter words
 * c0..c3, key words k0..k1, expected output words. */
static const uint32_t philox_kat[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
    {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x408f276du,
     0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
    {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u, 0xd16cfe09u,
     0x94fdccebu, 0x5001e420u, 0x24126ea1u},
};

static int philox_matches(const uint32_t *kv, int swap_counter) {
  uint64_t ctr_lo = kv[0] | (uint64_t)kv[1] << 32, ctr_hi = kv[2] | (uint64_t)kv[3] << 32;
  uint64_t key = kv[4] | (uint64_t)kv[5] << 32;
  rc_philox4 r =
      swap_counter ? rc_philox4x32(key, ctr_lo, ctr_hi) : rc_philox4x32(key, ctr_hi, ctr_lo);
  return r.v[0] == kv[6] && r.v[1] == kv[7] && r.v[2] == kv[8] && r.v[3] == kv[9];
}

static void test_philox(void) {
  for (int i = 0; i < 3; i++) {
    const uint32_t *kv = philox_kat[i];
    rc_philox4 r = rc_philox4x32(kv[4] | (uint64_t)kv[5] << 32, kv[2] | (uint64_t)kv[3] << 32,
                                 kv[0] | (uint64_t)kv[1] << 32);
    CHECK(philox_matches(kv, 0), "Philox KAT %d: got %08x %08x %08x %08x, want %08x %08x %08x %08x",
          i, r.v[0], r.v[1], r.v[2], r.v[3], kv[6], kv[7], kv[8], kv[9]);
  }
  /* Negative control: the third vector has distinct counter words, so the
   * wrong mapping of (counter_hi, counter_lo) to words must fail it. */
  CHECK(!philox_matches(philox_kat[2], 1), "negative control: swapped counter halves matched");

  /* rc_dropout_keep: element i uses word i%4 of block offset + i/4. */
  uint64_t seed = 0x1234, offset = 77;
  for (uint64_t i = 0; i < 64; i++) {
    rc_philox4 r = rc_philox4x32(seed, 0, offset + i / 4);
    int want = rc_uniform01(r.v[i % 4]) >= 0.3f;
    CHECK(rc_dropout_keep(seed, offset, i, 0.3f) == want, "rc_dropout_keep element %llu",
          (unsigned long long)i);
  }
  CHECK(rc_uniform01(0xffffffffu) < 1.0f && rc_uniform01(0) == 0.0f, "rc_uniform01 range");
}

/* ---- fingerprint ---- */

static double value_hash(const float *x, size_t n) { /* negative control: by value */
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += x[i] * (double)(i + 1);
  return s;
}

static void test_fingerprint(void) {
  const rc_ops *ops = rc_cpu_ops();
  enum { N = 1000 };
  float x[N];
  uint64_t rng = 5;
  for (int i = 0; i < N; i++) x[i] = (float)(int)(next_u64(&rng) % 2001) / 100.0f - 10.0f;
  x[10] = 0.0f;

  /* Definition: the wrapping sum of rc_fingerprint_word over 32-bit words,
   * so any order of summation gives the same value. */
  uint64_t fwd = ops->fingerprint(x, sizeof x), rev = 0, chain_f = 0, chain_r = 0;
  for (int i = N - 1; i >= 0; i--) rev += rc_fingerprint_word((uint64_t)i, rc_f32_bits(x[i]));
  CHECK(fwd == rev, "fingerprint is not the order-independent sum: %016llx vs %016llx",
        (unsigned long long)fwd, (unsigned long long)rev);
  /* Negative control: an order-dependent chain fails the same comparison. */
  for (int i = 0; i < N; i++)
    chain_f = rc_fingerprint_combine(chain_f, rc_fingerprint_word((uint64_t)i, rc_f32_bits(x[i])));
  for (int i = N - 1; i >= 0; i--)
    chain_r = rc_fingerprint_combine(chain_r, rc_fingerprint_word((uint64_t)i, rc_f32_bits(x[i])));
  CHECK(chain_f != chain_r, "negative control: an order-dependent chain looked order-independent");

  /* -0.0 and +0.0 differ; a by-value hash cannot tell them apart. */
  float y[N];
  memcpy(y, x, sizeof x);
  y[10] = -0.0f;
  CHECK(ops->fingerprint(x, sizeof x) != ops->fingerprint(y, sizeof y),
        "fingerprint does not distinguish -0.0 from +0.0");
  CHECK(value_hash(x, N) == value_hash(y, N), "negative control: by-value hash saw the sign");

  /* Position matters: swapping two different values changes it. */
  memcpy(y, x, sizeof x);
  float t = y[3];
  y[3] = y[4], y[4] = t;
  CHECK(x[3] == x[4] || ops->fingerprint(x, sizeof x) != ops->fingerprint(y, sizeof y),
        "fingerprint is blind to a swap of two elements");
}

int main(void) {
  test_bf16();
  test_fp16();
  test_e4m3();
  test_philox();
  test_fingerprint();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("numeric: all checks passed\n");
  return 0;
}
