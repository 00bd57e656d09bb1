/* numeric.h — bit-exact number formats, the counter-based RNG and the tensor
 * fingerprint, shared by the CPU backend and the CUDA kernels.
 *
 * Everything here is a pure function of its arguments and compiles for host
 * and device, so both backends round, draw and fingerprint identically: a
 * bf16 value rounded on the CPU has the same bits as one rounded on the GPU,
 * and dropout masks and fingerprints agree bit for bit across backends. */
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

#endif
