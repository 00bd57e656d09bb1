/* test_ops_profile.c — the per-op profiler (backend/ops_profile.h) around the
 * CPU backend: the wrapped ops give the inner ops' bytes and return values,
 * and the counts it reports (per op, per attention compute type, per GEMM
 * shape, the overflow row, after a reset) are the calls that were made. */
#include "backend/ops_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Deterministic inputs, exactly representable in bf16 (for the bf16 calls). */
static void fill(float *x, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) x[i] = (float)((int)((i * 7 + salt * 13) % 17) - 8) / 8.0f;
}

/* The report as a string, for strstr. Caller frees. */
static char *report_text(void) {
  FILE *f = tmpfile();
  if (!f) abort();
  rc_ops_profile_report(f);
  long n = ftell(f);
  char *s = calloc(1, n + 1);
  rewind(f);
  if (fread(s, 1, n, f) != (size_t)n) abort();
  fclose(f);
  return s;
}

/* The calls column of the row whose label is exactly `label` (the label,
 * then spaces, then a number), -1 if none. */
static long row_calls(const char *text, const char *label) {
  size_t len = strlen(label);
  const char *line = text;
  while (*line) {
    const char *p = line;
    while (*p == ' ') p++;
    if (!strncmp(p, label, len) && p[len] == ' ') {
      char *end;
      long calls = strtol(p + len, &end, 10);
      if (end != p + len) return calls;
    }
    const char *nl = strchr(line, '\n');
    if (!nl) break;
    line = nl + 1;
  }
  return -1;
}

int main(void) {
  const rc_ops *cpu = rc_cpu_ops();
  const rc_ops *ops = rc_ops_profiled(cpu);
  CHECK(ops != cpu, "the profiled table is a table of its own");
  CHECK(!strcmp(ops->name, cpu->name), "the name is kept: %s", ops->name);
  CHECK(rc_ops_profiled(ops) == ops, "wrapping the profiled table returns it");
  rc_ops_profile_reset();

  /* GEMM: three calls of one shape, one of another (beta != 0), bitwise as the CPU */
  enum { M = 4, N = 3, K = 5 };
  float *A = ops->alloc(M * K * sizeof(float)), *B = ops->alloc(K * N * sizeof(float));
  float *C = ops->alloc(M * N * sizeof(float)), ref[M * N];
  float hA[M * K], hB[K * N];
  fill(hA, M * K, 1), fill(hB, K * N, 2);
  ops->to_device(A, hA, sizeof hA);
  ops->to_device(B, hB, sizeof hB);
  for (int i = 0; i < 3; i++)
    ops->gemm(RC_COMPUTE_FP32, false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
  ops->gemm(RC_COMPUTE_BF16, false, false, M, N, K, 0.5f, A, K, B, N, 1.0f, C, N);
  cpu->gemm(RC_COMPUTE_FP32, false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, ref, N);
  cpu->gemm(RC_COMPUTE_BF16, false, false, M, N, K, 0.5f, A, K, B, N, 1.0f, ref, N);
  CHECK(!memcmp(C, ref, sizeof ref), "profiled gemm differs from the CPU's");
  CHECK(rc_ops_profile_calls("gemm") == 4, "gemm calls %ld, want 4", rc_ops_profile_calls("gemm"));
  long s1 = rc_ops_profile_gemm_calls(RC_COMPUTE_FP32, false, false, M, N, K, true);
  long s2 = rc_ops_profile_gemm_calls(RC_COMPUTE_BF16, false, false, M, N, K, false);
  CHECK(s1 == 3, "fp32 NN 4x3x5 beta=0: %ld calls, want 3", s1);
  CHECK(s2 == 1, "bf16 NN 4x3x5 beta!=0: %ld calls, want 1", s2);
  CHECK(rc_ops_profile_gemm_calls(RC_COMPUTE_FP32, false, false, M, N, K, false) == 0,
        "beta is part of the shape");
  CHECK(rc_ops_profile_gemm_calls(RC_COMPUTE_FP32, true, false, M, N, K, true) == 0,
        "trans_a is part of the shape");

  /* ops returning a host value return the inner op's */
  CHECK(ops->sum(A, M * K) == cpu->sum(A, M * K), "sum differs");
  CHECK(ops->fingerprint(C, sizeof ref) == cpu->fingerprint(C, sizeof ref), "fingerprint differs");
  CHECK(rc_ops_profile_calls("sum") == 1, "sum calls %ld", rc_ops_profile_calls("sum"));
  CHECK(rc_ops_profile_calls("sumsq") == 0, "sumsq is not sum");

  /* attention: per compute type as well as in total */
  enum { S = 4, NH = 1, HD = 16 };
  float *qkv = ops->alloc(S * 3 * NH * HD * sizeof(float)), *out = ops->alloc(S * NH * HD * 4);
  float *lse = ops->alloc(S * NH * 4), *dqkv = ops->alloc(S * 3 * NH * HD * 4);
  float hqkv[S * 3 * NH * HD];
  fill(hqkv, S * 3 * NH * HD, 3);
  ops->to_device(qkv, hqkv, sizeof hqkv);
  ops->attention_forward(RC_COMPUTE_FP32, out, lse, qkv, NULL, 1, S, NH, HD, NULL, RC_COMPUTE_FP32);
  ops->attention_forward(RC_COMPUTE_FP32, out, lse, qkv, NULL, 1, S, NH, HD, NULL, RC_COMPUTE_FP32);
  ops->attention_forward(RC_COMPUTE_BF16, out, lse, qkv, NULL, 1, S, NH, HD, NULL, RC_COMPUTE_FP32);
  ops->attention_backward(RC_COMPUTE_BF16, dqkv, out, out, lse, qkv, NULL, 1, S, NH, HD, NULL, 0.0f,
                          NULL, RC_COMPUTE_FP32);
  CHECK(rc_ops_profile_calls("attention_forward") == 3, "attention_forward %ld",
        rc_ops_profile_calls("attention_forward"));
  CHECK(rc_ops_profile_calls("attention_forward[fp32]") == 2, "[fp32] %ld",
        rc_ops_profile_calls("attention_forward[fp32]"));
  CHECK(rc_ops_profile_calls("attention_forward[bf16]") == 1, "[bf16] %ld",
        rc_ops_profile_calls("attention_forward[bf16]"));
  CHECK(rc_ops_profile_calls("attention_backward[bf16]") == 1, "backward [bf16]");
  CHECK(rc_ops_profile_calls("attention_backward[fp32]") == 0, "backward [fp32]");
  CHECK(rc_ops_profile_calls("alloc") == 7, "alloc %ld, want 7", rc_ops_profile_calls("alloc"));
  CHECK(rc_ops_profile_calls("to_device") == 3, "to_device %ld", rc_ops_profile_calls("to_device"));
  CHECK(rc_ops_profile_calls("no_such_op") == -1, "unknown op");
  CHECK(rc_ops_profile_calls("gemm[bf16]") == -1, "gemm has no per-ct rows");
  CHECK(rc_ops_profile_calls("attention_forward[fp8]") == -1, "unknown compute type");

  /* the report shows the same counts */
  char *text = report_text();
  CHECK(row_calls(text, "gemm") == 4, "report: gemm row");
  CHECK(row_calls(text, "fp32 NN 4x3x5 beta=0") == 3, "report: shape row\n%s", text);
  CHECK(row_calls(text, "bf16 NN 4x3x5 beta!=0") == 1, "report: beta!=0 shape row");
  CHECK(row_calls(text, "attention_forward[bf16]") == 1, "report: attention_forward[bf16] row");
  CHECK(row_calls(text, "total gemm") == 4, "report: total gemm");
  CHECK(row_calls(text, "sumsq") == -1, "report: ops never called are left out");
  long total = 0;
  const char *names[] = {
      "gemm",  "sum",      "fingerprint", "attention_forward", "attention_backward",
      "alloc", "to_device"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    total += rc_ops_profile_calls(names[i]);
  CHECK(row_calls(text, "total") == total, "report: total %ld, want %ld", row_calls(text, "total"),
        total);
  free(text);

  /* the FP8 GEMM: its own op, and rows of its own in the shape table */
  enum { K8 = 16 };
  uint8_t *a8 = ops->alloc(M * K8), *b8 = ops->alloc(N * K8);
  ops->cast_e4m3(a8, K8, A, K, M, K, 2.0f, false);
  ops->cast_e4m3(b8, K8, B, N, K, N, 2.0f, true);
  ops->gemm_e4m3(M, N, K8, 0.25f, a8, b8, 0.0f, C, N);
  cpu->gemm_e4m3(M, N, K8, 0.25f, a8, b8, 0.0f, ref, N);
  CHECK(!memcmp(C, ref, sizeof ref), "profiled gemm_e4m3 differs from the CPU's");
  CHECK(rc_ops_profile_calls("gemm_e4m3") == 1 && rc_ops_profile_calls("cast_e4m3") == 2,
        "gemm_e4m3 %ld, cast_e4m3 %ld calls", rc_ops_profile_calls("gemm_e4m3"),
        rc_ops_profile_calls("cast_e4m3"));
  CHECK(rc_ops_profile_gemm_calls(RC_OPS_PROFILE_E4M3, false, true, M, N, K8, true) == 1,
        "no e4m3 NT 4x3x16 row");
  CHECK(rc_ops_profile_calls("gemm") == 4, "gemm_e4m3 was counted as gemm");
  char *text8 = report_text();
  CHECK(row_calls(text8, "e4m3 NT 4x3x16 beta=0") == 1, "the report has no e4m3 row:\n%s", text8);
  CHECK(row_calls(text8, "total gemm") == 5, "the shape table's total leaves gemm_e4m3 out");
  free(text8);
  ops->free(a8), ops->free(b8);

  /* reset forgets everything */
  rc_ops_profile_reset();
  CHECK(rc_ops_profile_calls("gemm") == 0 && rc_ops_profile_calls("attention_forward[fp32]") == 0,
        "reset");
  CHECK(rc_ops_profile_gemm_calls(RC_COMPUTE_FP32, false, false, M, N, K, true) == 0,
        "reset shapes");
  text = report_text();
  CHECK(!strstr(text, "gemm shapes"), "no shape table without gemm calls");
  free(text);

  /* more distinct shapes than the table holds: the rest go to "other" */
  float *big = ops->alloc(512 * sizeof(float)), *one = ops->alloc(sizeof(float));
  int extra = 5;
  for (int k = 1; k <= RC_OPS_PROFILE_GEMM_SHAPES + extra; k++)
    ops->gemm(RC_COMPUTE_FP32, false, false, 1, 1, k, 1.0f, big, k, big, 1, 0.0f, one, 1);
  CHECK(rc_ops_profile_gemm_other_calls() == extra, "other: %ld calls, want %d",
        rc_ops_profile_gemm_other_calls(), extra);
  CHECK(rc_ops_profile_gemm_calls(RC_COMPUTE_FP32, false, false, 1, 1, 1, true) == 1,
        "first shape kept");
  text = report_text();
  CHECK(row_calls(text, "other (beyond 256 shapes)") == extra, "report: other row");
  CHECK(strstr(text, "lighter shapes"), "report: the lighter shapes share a row");
  CHECK(row_calls(text, "total gemm") == RC_OPS_PROFILE_GEMM_SHAPES + extra, "report: total gemm");
  free(text);

  void *bufs[] = {A, B, C, qkv, out, lse, dqkv, big, one};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ops->free(bufs[i]);
  CHECK(rc_ops_profile_calls("free") == 9, "free %ld", rc_ops_profile_calls("free"));
  if (failures)
    fprintf(stderr, "%d failures\n", failures);
  else
    printf("ops_profile: all checks passed\n");
  return failures ? 1 : 0;
}
