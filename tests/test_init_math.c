/* test_init_math.c — numeric.h's portable log, sin and cos, and the weight
 * initialisation's draw built on them, against glibc.
 *
 * The draw needs log on [2^-53, 1] and sin and cos of 2 * M_PI * t for t in
 * [0, 1). numeric.h computes them from basic IEEE operations so that the CPU
 * and the GPU give the same bits (tests/test_cuda_ops.c checks that); here
 * they are held to glibc within 2 ulp over many arguments, the edges of the
 * ranges and of the algorithms' branches included, and the draw to the libm
 * draw it replaced (rare float differences allowed, and counted). Every check
 * is also run on a deliberately wrong variant, which must fail it. */
#include "backend/numeric.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define ULP_TOL 2.0

static uint64_t next_u64(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Distance in ulps: the difference of the doubles' positions on the ordered
 * line of all doubles (sign-magnitude mapped to two's complement), so it is
 * finite across zero and between neighbours of different exponents; taken
 * in uint64 (exact), not in double (which would round it). */
static double ulp_dist(double a, double b) {
  int64_t ia = (int64_t)rc_f64_bits(a), ib = (int64_t)rc_f64_bits(b);
  if (ia < 0) ia = INT64_MIN - ia;
  if (ib < 0) ib = INT64_MIN - ib;
  return (double)(ia > ib ? (uint64_t)ia - (uint64_t)ib : (uint64_t)ib - (uint64_t)ia);
}

/* A growing list of arguments. */
typedef struct {
  double *v;
  size_t n, cap;
} args;

static void push(args *s, double x) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 4096;
    s->v = realloc(s->v, s->cap * sizeof(double));
    if (!s->v) abort();
  }
  s->v[s->n++] = x;
}

/* x and its `k` neighbours on each side that lie in [lo, hi] */
static void push_around(args *s, double x, int k, double lo, double hi) {
  if (x >= lo && x <= hi) push(s, x);
  double up = x, down = x;
  for (int j = 0; j < k; j++) {
    up = nextafter(up, INFINITY), down = nextafter(down, -INFINITY);
    if (up >= lo && up <= hi) push(s, up);
    if (down >= lo && down <= hi) push(s, down);
  }
}

/* ---- log ---- */

static double log_3ulp(double x) { /* negative control: 3 ulp off */
  double y = rc_log_portable(x);
  for (int i = 0; i < 3; i++) y = nextafter(y, -INFINITY);
  return y;
}

/* The worst distance of fn from glibc's log over s, and where. */
static double log_worst(double (*fn)(double), const args *s, double *where) {
  double worst = 0.0;
  for (size_t i = 0; i < s->n; i++) {
    double d = ulp_dist(fn(s->v[i]), log(s->v[i]));
    if (d > worst) worst = d, *where = s->v[i];
  }
  return worst;
}

static void log_args(args *s) {
  const double lo = 0x1p-53, hi = 1.0;
  uint64_t rng = 11;
  for (int e = 0; e <= 53; e++) push_around(s, ldexp(1.0, -e), 8, lo, hi); /* powers of two */
  push_around(s, 1.0, 20000, lo, hi);                                      /* near 1 */
  for (int e = 1; e <= 53; e++) /* the significand's sqrt(2) switch, below each power */
    push_around(s, ldexp(M_SQRT2, -e), 64, lo, hi);
  /* fdlibm's branch edges: significand top bits 0x6147a, 0x6b851 (the
   * hfsq form) and |f| < 2^-20 */
  uint32_t edges[] = {0x6147a, 0x6b851, 0xffffe, 0x00001};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
    for (int e = 1; e <= 52; e += 3)
      push_around(s, rc_bits_f64((uint64_t)((0x3ffu - (uint32_t)e) << 20 | edges[i]) << 32), 16, lo,
                  hi);
  for (int i = 0; i < 2000000; i++) { /* the draw's u1, and log-uniform over the range */
    uint64_t r = next_u64(&rng);
    push(s, ((double)(r >> 11) + 1.0) * 0x1p-53);
    push(s, ldexp(1.0 + (double)(next_u64(&rng) >> 12) * 0x1p-52, -1 - (int)(r % 53)));
  }
}

static void test_log(void) {
  args s = {0};
  log_args(&s);
  double where = 0.0, worst = log_worst(rc_log_portable, &s, &where);
  CHECK(worst <= ULP_TOL, "rc_log_portable is %g ulp from glibc's log at %a (%zu arguments)", worst,
        where, s.n);
  printf("log: %zu arguments in [2^-53, 1], at most %g ulp from glibc\n", s.n, worst);
  CHECK(rc_log_portable(1.0) == 0.0 && !signbit(rc_log_portable(1.0)), "log(1) is not +0");
  double ctl = log_worst(log_3ulp, &s, &where);
  CHECK(ctl > ULP_TOL, "negative control: a log 3 ulp off passed (%g ulp)", ctl);
  printf("log: negative control (3 ulp off): %g ulp\n", ctl);
  free(s.v);
}

/* ---- sin and cos of 2 pi t ---- */

/* negative control: sin and cos of the exact 2 pi t (2 pi in two parts), not
 * of the double 2 * M_PI * t the library is given */
static void sincos_exact_arg(double t, double *sn, double *cs) {
  int k = (int)(t * 4.0 + 0.5);
  double f = t - k * 0.25;
  double x = f * RC_TWO_PI + f * 2.44929359829470635445e-16;
  double s = rc_sin_kernel(x, 0.0), c = rc_cos_kernel(x, 0.0);
  double a = k & 1 ? c : s, b = k & 1 ? -s : c;
  *sn = k & 2 ? -a : a, *cs = k & 2 ? -b : b;
}

/* The worst distance of fn's sin and cos from glibc's over s (ulps), and the
 * worst absolute difference. */
static double sincos_worst(void (*fn)(double, double *, double *), const args *s, double *where,
                           double *abs_worst) {
  double worst = 0.0;
  *abs_worst = 0.0;
  for (size_t i = 0; i < s->n; i++) {
    double t = s->v[i], sn, cs;
    fn(t, &sn, &cs);
    double ds = ulp_dist(sn, sin(2 * M_PI * t)), dc = ulp_dist(cs, cos(2 * M_PI * t));
    double d = ds > dc ? ds : dc;
    if (d > worst) worst = d, *where = t;
    double a = fmax(fabs(sn - sin(2 * M_PI * t)), fabs(cs - cos(2 * M_PI * t)));
    if (a > *abs_worst) *abs_worst = a;
  }
  return worst;
}

static void test_sincos(void) {
  args s = {0};
  uint64_t rng = 12;
  const double lo = 0.0, hi = 1.0 - 0x1p-53;
  for (int j = 0; j <= 8; j++) push_around(&s, j / 8.0, 4000, lo, hi); /* 0, 1/8 .. 7/8, 1- */
  for (int j = 1; j < 64; j += 2) push_around(&s, j / 64.0, 100, lo, hi);
  for (int i = 0; i < 2000000; i++) push(&s, (double)(next_u64(&rng) >> 11) * 0x1p-53);
  double where = 0.0, abs_worst, worst = sincos_worst(rc_sincos_2pi, &s, &where, &abs_worst);
  CHECK(worst <= ULP_TOL && abs_worst <= 0x1p-52,
        "rc_sincos_2pi is %g ulp (%g absolute) from glibc's sin/cos(2 * M_PI * t) at t = %a", worst,
        abs_worst, where);
  printf("sin, cos of 2 pi t: %zu arguments in [0, 1), at most %g ulp (%g absolute) from glibc\n",
         s.n, worst, abs_worst);
  double sn, cs;
  rc_sincos_2pi(0.0, &sn, &cs);
  CHECK(rc_f64_bits(sn) == 0 && cs == 1.0, "sin, cos of 0: %a %a", sn, cs);
  double ctl = sincos_worst(sincos_exact_arg, &s, &where, &abs_worst);
  CHECK(ctl > ULP_TOL, "negative control: sin/cos of the exact 2 pi t passed (%g ulp)", ctl);
  printf("sin, cos: negative control (of the exact 2 pi t): %g ulp\n", ctl);
  free(s.v);
}

/* ---- the draw ---- */

/* The draw before numeric.h had it: glibc's log, cos and sin. */
static void draw_libm(uint64_t key, uint64_t i, float std, float *even, float *odd) {
  uint64_t r = rc_mix64(key + i);
  double u1 = ((double)(r >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = (double)(rc_mix64(r) >> 11) * (1.0 / 9007199254740992.0);
  double rad = sqrt(-2.0 * log(u1));
  *even = (float)(std * rad * cos(2 * M_PI * u2));
  *odd = (float)(std * rad * sin(2 * M_PI * u2));
}

/* negative control: the same draw in float arithmetic (what a port to
 * float math would give) */
static void draw_float(uint64_t key, uint64_t i, float std, float *even, float *odd) {
  uint64_t r = rc_mix64(key + i);
  float u1 = (float)(((double)(r >> 11) + 1.0) * (1.0 / 9007199254740993.0));
  float u2 = (float)((double)(rc_mix64(r) >> 11) * (1.0 / 9007199254740992.0));
  float rad = sqrtf(-2.0f * logf(u1));
  *even = std * rad * cosf(6.2831853f * u2);
  *odd = std * rad * sinf(6.2831853f * u2);
}

/* Elements [0, n) of key: how many differ from the libm draw. */
static long draw_diffs(void (*fn)(uint64_t, uint64_t, float, float *, float *), uint64_t key,
                       uint64_t n, float std) {
  long diffs = 0;
  for (uint64_t i = 0; i < n; i += 2) {
    float a, b, ra, rb;
    fn(key, i, std, &a, &b);
    draw_libm(key, i, std, &ra, &rb);
    diffs += (rc_f32_bits(a) != rc_f32_bits(ra)) + (rc_f32_bits(b) != rc_f32_bits(rb));
  }
  return diffs;
}

static void test_draw(void) {
  /* the constants the comments promise */
  CHECK(1.0 / 9007199254740993.0 == 0x1p-53 && RC_TWO_PI == 2 * M_PI,
        "1 / 9007199254740993.0 is not 2^-53, or RC_TWO_PI is not 2 * M_PI");
  CHECK(1.0 / 9007199254740995.0 != 0x1p-53, "negative control: 1 / (2^53 + 3) rounded to 2^-53");
  /* the single element is the pair's half */
  uint64_t key = rc_mix64(1234 ^ 0xA5A5A5A5ull) ^ (5ull << 40);
  int halves = 1;
  for (uint64_t i = 0; i < 1000; i += 2) {
    float e, o;
    rc_init_normal_pair(key, i, 0.02f, &e, &o);
    halves &= rc_f32_bits(rc_init_normal(key, i, 0.02f)) == rc_f32_bits(e) &&
              rc_f32_bits(rc_init_normal(key, i + 1, 0.02f)) == rc_f32_bits(o);
  }
  CHECK(halves, "rc_init_normal is not the half of rc_init_normal_pair");
  /* against the libm draw: a difference is a rounding of the float at a
   * near-tie (glibc and these disagree in the double's last bit) */
  const uint64_t n = 4000000;
  long d1 = draw_diffs(rc_init_normal_pair, key, n, 0.02f);
  long d2 = draw_diffs(rc_init_normal_pair, key ^ 0xfeedull, n, 1.0f);
  CHECK(d1 + d2 <= 4, "%ld and %ld of %llu elements differ from the libm draw", d1, d2,
        (unsigned long long)n);
  printf("draw: %ld of %llu elements differ from the libm draw\n", d1 + d2,
         (unsigned long long)(2 * n));
  long ctl = draw_diffs(draw_float, key, n, 0.02f);
  CHECK(ctl > 4, "negative control: the draw in float matched the libm draw (%ld differ)", ctl);
  printf("draw: negative control (in float): %ld of %llu differ\n", ctl, (unsigned long long)n);
}

int main(void) {
  test_log();
  test_sincos();
  test_draw();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("init math: all checks passed\n");
  return 0;
}
