/* numeric.h — bit-exact number formats, the counter-based RNG, the weight
 * initialisation's draws and the tensor fingerprint, shared by the CPU
 * backend and the CUDA kernels.
 *
 * Everything here is a pure function of its arguments and compiles for host
 * and device, so both backends round, draw and fingerprint identically: a
 * bf16 value rounded on the CPU has the same bits as one rounded on the GPU,
 * and dropout masks, initial weights and fingerprints agree bit for bit
 * across backends. */
#ifndef RC_BACKEND_NUMERIC_H
#define RC_BACKEND_NUMERIC_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#ifdef __CUDACC__
#define RC_HD __host__ __device__ __forceinline__
#else
#define RC_HD static inline
#endif

RC_HD uint32_t rc_f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
RC_HD float rc_bits_f32(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/* Round to the nearest bfloat16 (ties to even), returned as a float whose low
 * 16 bits are zero. NaN stays NaN (quietened), infinities stay infinite. */
RC_HD float rc_round_bf16(float x) {
  uint32_t u = rc_f32_bits(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x007fffffu) ? rc_bits_f32(u | 0x00400000u) : x;
  u += 0x7fffu + ((u >> 16) & 1u);
  return rc_bits_f32(u & 0xffff0000u);
}

/* Round to the nearest IEEE binary16 value (ties to even, subnormals kept,
 * overflow to +-inf), returned as a float. */
RC_HD float rc_round_fp16(float x) {
  uint32_t u = rc_f32_bits(x);
  uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  if (mag >= 0x7f800000u) return x;                               /* inf/nan */
  if (mag >= 0x477ff000u) return rc_bits_f32(sign | 0x7f800000u); /* >= 65520: overflow */
  if (mag < 0x38800000u) {                                        /* fp16 subnormal range */
    /* quantum is 2^-24: round mag to a multiple of it, ties to even */
    float q = rc_bits_f32(mag) * 16777216.0f; /* exact: scales by 2^24 */
    float r = rintf(q);                       /* ties to even */
    return rc_bits_f32(sign | rc_f32_bits(r * 5.9604644775390625e-08f));
  }
  mag += 0xfffu + ((mag >> 13) & 1u);
  return rc_bits_f32(sign | (mag & 0xffffe000u));
}

/* bf16 and fp16 storage (ops.h cast_half / gemm_half): the 16 bits of a
 * value rounded by rc_round_bf16 or rc_round_fp16, and back. decode(encode(x))
 * is exactly round(x) for every x but NaN; a NaN stays a quiet NaN of its
 * sign (bf16 keeps its top 16 bits, fp16 becomes 0x7e00). */
RC_HD uint16_t rc_bf16_encode(float x) {
  return (uint16_t)(rc_f32_bits(rc_round_bf16(x)) >> 16);
}
RC_HD float rc_bf16_decode(uint16_t b) {
  return rc_bits_f32((uint32_t)b << 16);
}
RC_HD uint16_t rc_fp16_encode(float x) {
  uint32_t u = rc_f32_bits(rc_round_fp16(x));
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (mag == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
  if (mag < 0x38800000u) /* subnormal (or zero): an exact multiple of 2^-24 */
    return (uint16_t)(sign | (uint32_t)(rc_bits_f32(mag) * 16777216.0f));
  return (uint16_t)(sign | (((mag >> 23) - 112u) << 10) | ((mag >> 13) & 0x3ffu));
}
RC_HD float rc_fp16_decode(uint16_t b) {
  uint32_t sign = (uint32_t)(b & 0x8000u) << 16, e = (b >> 10) & 31u, m = b & 0x3ffu;
  if (e == 31u) return rc_bits_f32(sign | 0x7f800000u | (m ? 0x00400000u : 0u));
  if (e == 0) { /* m * 2^-24, exact */
    float v = (float)m * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return rc_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}
/* a 16-bit value of either form (fp16 nonzero: fp16, else bf16) */
RC_HD float rc_half_decode(uint16_t b, int fp16) {
  return fp16 ? rc_fp16_decode(b) : rc_bf16_decode(b);
}

/* Round to the nearest FP8 E4M3 (OCP "fn": max 448, no inf, subnormals down to
 * 2^-9), saturating to +-448; NaN stays NaN. */
RC_HD float rc_round_e4m3(float x) {
  uint32_t u = rc_f32_bits(x);
  uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return x;
  if (mag >= 0x43e00000u) return rc_bits_f32(sign | 0x43e00000u); /* >= 448 saturates */
  if (mag < 0x3c800000u) { /* below 2^-6: subnormal step 2^-9 */
    float q = rc_bits_f32(mag) * 512.0f;
    float r = rintf(q);
    return rc_bits_f32(sign | rc_f32_bits(r * 0.001953125f));
  }
  mag += 0x7ffffu + ((mag >> 20) & 1u);
  mag &= 0xfff00000u;
  if (mag > 0x43e00000u) mag = 0x43e00000u;
  return rc_bits_f32(sign | mag);
}

/* FP8 E4M3 bytes (OCP "fn"): sign, 4 exponent bits (bias 7), 3 mantissa bits;
 * exponent 0 is subnormal (m * 2^-9), 0x7f / 0xff the only NaNs, no
 * infinities. rc_e4m3_encode(x) is the byte of rc_round_e4m3(x) (so it
 * saturates to +-448; NaN becomes sign | 0x7f); rc_e4m3_decode inverts it
 * exactly. Both backends cast through these, so fp8 bytes agree bitwise. */
RC_HD uint8_t rc_e4m3_encode(float x) {
  float r = rc_round_e4m3(x);
  uint32_t u = rc_f32_bits(r);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
  if (mag == 0) return sign;
  int e = (int)(mag >> 23) - 127 + 7;
  if (e >= 1) return (uint8_t)(sign | (uint32_t)e << 3 | ((mag >> 20) & 7u));
  return (uint8_t)(sign | (uint32_t)(rc_bits_f32(mag) * 512.0f)); /* subnormal: exact 1..7 */
}
RC_HD float rc_e4m3_decode(uint8_t b) {
  uint32_t e = (b >> 3) & 15u, m = b & 7u;
  float mag;
  if (e == 15u && m == 7u)
    mag = rc_bits_f32(0x7fc00000u);
  else if (e == 0)
    mag = (float)m * 0.001953125f; /* m * 2^-9, exact */
  else
    mag = rc_bits_f32((e + 120u) << 23 | m << 20); /* (1 + m/8) * 2^(e-7) */
  return (b & 0x80u) ? -mag : mag;
}

/* ---- Philox4x32-10 (Salmon et al. 2011), the generator of cuRAND and of
 * PyTorch's CUDA dropout. A draw is a pure function of (key, counter), so the
 * RNG "state" is just an offset: forgetting to checkpoint it is a real bug. */
typedef struct {
  uint32_t v[4];
} rc_philox4;

RC_HD uint32_t rc_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * (uint64_t)b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

RC_HD rc_philox4 rc_philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  uint32_t c0 = (uint32_t)counter_lo, c1 = (uint32_t)(counter_lo >> 32);
  uint32_t c2 = (uint32_t)counter_hi, c3 = (uint32_t)(counter_hi >> 32);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int round = 0; round < 10; round++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = rc_mulhilo32(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = rc_mulhilo32(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  rc_philox4 r = {{c0, c1, c2, c3}};
  return r;
}

/* Uniform in [0, 1) from 32 random bits (24-bit resolution, exact in float). */
RC_HD float rc_uniform01(uint32_t bits) {
  return (float)(bits >> 8) * 5.9604644775390625e-08f;
}

/* Dropout keep decision for element i of a draw at `offset`: element i uses
 * word i%4 of Philox block (offset + i/4). A call consuming n elements
 * advances the offset by ceil(n/4). */
RC_HD int rc_dropout_keep(uint64_t seed, uint64_t offset, uint64_t i, float p) {
  rc_philox4 r = rc_philox4x32(seed, 0, offset + (i >> 2));
  return rc_uniform01(r.v[i & 3]) >= p;
}

/* ---- Fingerprints. fp(x) = sum_i mix(i, word_i) mod 2^64 over the 32-bit
 * words of a buffer: order-independent (so a parallel reduction gives the
 * same answer as a loop), sensitive to every bit (so -0.0 != +0.0 and NaN
 * payloads differ), and identical on every backend. */
RC_HD uint64_t rc_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
RC_HD uint64_t rc_fingerprint_word(uint64_t index, uint32_t word) {
  return rc_mix64((index << 32) ^ (uint64_t)word ^ (index >> 32) * 0x100000001B3ull);
}
/* The fingerprint of a buffer in host memory: what every backend's
 * fingerprint() computes, for data that lives on the host whatever the
 * backend (a batch's token ids before they are copied to the device). */
static inline uint64_t rc_fingerprint_host(const void *x, size_t nbytes) {
  const unsigned char *p = (const unsigned char *)x;
  uint64_t fp = 0;
  for (size_t i = 0; i < nbytes / 4; i++) {
    uint32_t w;
    memcpy(&w, p + 4 * i, 4);
    fp += rc_fingerprint_word(i, w); /* wraps mod 2^64 by definition */
  }
  return fp;
}
/* Combines per-tensor fingerprints in a fixed (caller's) order. */
RC_HD uint64_t rc_fingerprint_combine(uint64_t acc, uint64_t fp) {
  return rc_mix64(acc ^ fp) + fp;
}

/* ---- The weight initialisation's draws: N(0, std) from (key, element).
 *
 * Box-Muller in double. The libraries' log, sin and cos are not one function
 * everywhere (glibc's and CUDA's differ in the last ulp for some arguments,
 * and a draw rounded to float then differs in rare elements), so the draw
 * uses its own, built from IEEE-754 basic operations only: + - * /, sqrt and
 * exact bit manipulation, no library call, no fused multiply-add. The CPU is
 * compiled with -ffp-contract=off (x86-64 doubles are SSE2) and the kernels
 * with --fmad=false (CMakeLists.txt), so this one text gives the same bits
 * on both. Their accuracy is the libraries' (under one ulp): the draws are
 * glibc's but in rare elements (tests/test_init_math.c; the count at
 * gpu-small is in docs/cuda-backend.md).
 *
 * The algorithms and coefficients are fdlibm's (Sun Microsystems, 1993), in
 * the forms FreeBSD's msun keeps (e_log.c, k_sin.c, k_cos.c), written anew
 * here for the arguments the draw needs; the argument reduction is our own. */

RC_HD uint64_t rc_f64_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return u;
}
RC_HD double rc_bits_f64(uint64_t u) {
  double x;
  memcpy(&x, &u, 8);
  return x;
}

/* log(x) for finite normal x > 0 (the draw's u1 lies in [2^-53, 1]).
 * x = 2^k m with m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f / (2 + f):
 * log(m) = 2 atanh(s) = f - hfsq + s (hfsq + R(s^2)), hfsq = f^2/2, R a
 * minimax polynomial; k ln 2 is added in two parts (ln2_hi k is exact). */
RC_HD double rc_log_portable(double x) {
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  const double Lg1 = 6.666666666666735130e-01, Lg2 = 3.999999999940941908e-01;
  const double Lg3 = 2.857142874366239149e-01, Lg4 = 2.222219843214978396e-01;
  const double Lg5 = 1.818357216161805012e-01, Lg6 = 1.531383769920937332e-01;
  const double Lg7 = 1.479819860511658591e-01;
  uint64_t b = rc_f64_bits(x);
  int32_t hx = (int32_t)((b >> 32) & 0xfffffu); /* the significand's top 20 bits */
  int k = (int)(b >> 52) - 1023;
  int32_t half = (hx + 0x95f64) & 0x100000; /* significand >= sqrt(2): use x/2 */
  double m = rc_bits_f64((b & 0x000fffffffffffffull) | (uint64_t)(half ^ 0x3ff00000) << 32);
  k += half >> 20;
  double f = m - 1.0, dk = (double)k;
  if (((2 + hx) & 0xfffff) < 3) { /* |f| < 2^-20: three terms of the series */
    if (f == 0.0) return dk * ln2_hi + dk * ln2_lo;
    double R = f * f * (0.5 - 0.33333333333333333 * f);
    return dk * ln2_hi - ((R - dk * ln2_lo) - f);
  }
  double s = f / (2.0 + f), z = s * s, w = z * z;
  double t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  double t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  double R = t2 + t1;
  if (((hx - 0x6147a) | (0x6b851 - hx)) > 0) { /* m in about [1.38, 1.42]: f^2/2 apart */
    double hfsq = 0.5 * f * f;
    return dk * ln2_hi - ((hfsq - (s * (hfsq + R) + dk * ln2_lo)) - f);
  }
  return dk * ln2_hi - ((s * (f - R) - dk * ln2_lo) - f);
}

/* a * b = *hi + *lo exactly (Dekker): Veltkamp's split of each factor into
 * halves of 26 and 27 bits makes every partial product exact, so no FMA is
 * needed. No overflow for the draw's |a|, |b| < 8. */
RC_HD void rc_two_prod(double a, double b, double *hi, double *lo) {
  const double split = 134217729.0; /* 2^27 + 1 */
  double p = a * b;
  double ta = split * a, ah = ta - (ta - a), al = a - ah;
  double tb = split * b, bh = tb - (tb - b), bl = b - bh;
  *hi = p;
  *lo = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
}

/* sin(x + y) and cos(x + y) for |x| <= pi/4 (a little beyond is harmless),
 * y a tail below ulp(x): fdlibm's __kernel_sin (iy = 1) and __kernel_cos. */
RC_HD double rc_sin_kernel(double x, double y) {
  const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03;
  const double S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06;
  const double S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
  double z = x * x, v = z * x;
  double r = S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)));
  return x - ((z * (0.5 * y - v * r) - y) - v * S1);
}
RC_HD double rc_cos_kernel(double x, double y) {
  const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03;
  const double C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07;
  const double C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;
  double z = x * x;
  double r = z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
  double hz = 0.5 * z, w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + (z * r - x * y));
}

/* sin and cos of X = fl(RC_TWO_PI * t) for t in [0, 1): the double that C's
 * `2 * M_PI * t` gives, so these are sin(2 * M_PI * t) and cos(2 * M_PI * t)
 * as a library computes them, not of the exact 2 pi t. The quadrant comes
 * from t exactly: k = round(4t), f = t - k/4 (exact, |f| <= 1/8), and
 *   X - k pi/2 = RC_TWO_PI f + (X - RC_TWO_PI t) - k (pi/2 - RC_TWO_PI/4),
 * the first two terms exact by rc_two_prod, the last k times a constant:
 * the reduced argument as a double-double correct to about 1e-32, without
 * fdlibm's general reduction (pi/2 in three parts and its branches). */
#define RC_TWO_PI 6.28318530717958623200e+00 /* 2 * M_PI, exactly */
RC_HD void rc_sincos_2pi(double t, double *sn, double *cs) {
  const double pio2_lo = 6.12323399573676603587e-17; /* pi/2 - RC_TWO_PI/4 */
  int k = (int)(t * 4.0 + 0.5);                      /* 0..4 */
  double f = t - (double)k * 0.25;
  double X, Xe, rh, rl;
  rc_two_prod(RC_TWO_PI, t, &X, &Xe); /* RC_TWO_PI t = X + Xe */
  rc_two_prod(RC_TWO_PI, f, &rh, &rl);
  double tail = (rl - Xe) - (double)k * pio2_lo;
  double x = rh + tail, bb = x - rh, y = (rh - (x - bb)) + (tail - bb); /* Knuth's two-sum */
  double s = rc_sin_kernel(x, y), c = rc_cos_kernel(x, y);
  /* quadrant k: (sin, cos) turned by k quarter turns; negation is exact */
  double a = k & 1 ? c : s, b = k & 1 ? -s : c;
  *sn = k & 2 ? -a : a;
  *cs = k & 2 ? -b : b;
}

/* Elements i and i + 1 (i even) of a parameter whose draws use `key`:
 * Box-Muller on two uniforms from rc_mix64(key + i), u1 in [2^-53, 1] and
 * u2 in [0, 1) (1 / 9007199254740993.0 is 2^-53 as a double), rounded to
 * float last. Element i's value depends on (key, i, std) only, so any split
 * of a parameter, over threads or GPU threads, gives the same bits. */
RC_HD void rc_init_normal_pair(uint64_t key, uint64_t i, float std, float *even, float *odd) {
  uint64_t r = rc_mix64(key + i);
  double u1 = ((double)(r >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = (double)(rc_mix64(r) >> 11) * (1.0 / 9007199254740992.0);
  double rad = sqrt(-2.0 * rc_log_portable(u1));
  double s, c;
  rc_sincos_2pi(u2, &s, &c);
  *even = (float)(std * rad * c);
  *odd = (float)(std * rad * s);
}

/* Element i alone: the cosine of pair i & ~1 for even i, the sine for odd. */
RC_HD float rc_init_normal(uint64_t key, uint64_t i, float std) {
  float even, odd;
  rc_init_normal_pair(key, i & ~(uint64_t)1, std, &even, &odd);
  return i & 1 ? odd : even;
}

#endif
