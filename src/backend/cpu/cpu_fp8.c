/* cpu_fp8.c — the FP8 (E4M3) ops on the CPU: the scaled cast, the running
 * amax and the TN GEMM on e4m3 bytes (ops.h).
 *
 * The reference for the CUDA backend's cuBLASLt FP8 GEMMs. The bytes are
 * decoded exactly (numeric.h) and multiplied by the fp32 GEMM: a product of
 * two e4m3 values has at most 8 significant bits, so every product is exact
 * in fp32 and the CPU and the GPU differ only in the order of the fp32 sum. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/numeric.h"

void rc_cpu_cast_e4m3(uint8_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols,
                      float scale, bool transpose) {
  int out_rows = transpose ? cols : rows, out_cols = transpose ? rows : cols;
  for (int r = 0; r < out_rows; r++) {
    uint8_t *d = dst + (size_t)r * (size_t)ld_dst;
    for (int c = 0; c < out_cols; c++) {
      float x = transpose ? src[(size_t)c * (size_t)ld_src + (size_t)r]
                          : src[(size_t)r * (size_t)ld_src + (size_t)c];
      d[c] = rc_e4m3_encode(x * scale);
    }
    if (ld_dst > out_cols) memset(d + out_cols, 0, (size_t)(ld_dst - out_cols));
  }
}

/* An m x k byte matrix decoded into a fresh fp32 matrix (freed by the caller). */
static float *decode(const uint8_t *x, int rows, int k) {
  size_t n = (size_t)rows * (size_t)k;
  float *out = (float *)rc_cpu_scratch(n * sizeof(float), "gemm_e4m3 (decoded)");
  if (!out) return NULL;
  float table[256];
  for (int b = 0; b < 256; b++) table[b] = rc_e4m3_decode((uint8_t)b);
  for (size_t i = 0; i < n; i++) out[i] = table[x[i]];
  return out;
}

void rc_cpu_gemm_e4m3(int m, int n, int k, float alpha, const uint8_t *A, const uint8_t *B,
                      float beta, float *C, int ldc) {
  if (m <= 0 || n <= 0) return;
  float *a = decode(A, m, k), *b = decode(B, n, k);
  if (a && b) /* else recorded: the step stops (cpu_internal.h) */
    rc_cpu_gemm(RC_COMPUTE_FP32, false, true, m, n, k, alpha, a, k, b, k, beta, C, ldc);
  free(a);
  free(b);
}

void rc_cpu_amax_update(float *amax, const float *x, size_t n) {
  float m = amax[0];
  for (size_t i = 0; i < n && !isnan(m); i++) {
    float a = fabsf(x[i]);
    if (isnan(a))
      m = a;
    else if (a > m)
      m = a;
  }
  amax[0] = m;
}
