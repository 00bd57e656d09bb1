/* bench_grouped_gemm.cu — one MoE layer's expert GEMMs two ways: one
 * cuBLASLt matmul per expert (what gemm_half_many runs now: the heuristic's
 * first algorithm for each expert's shape) against one
 * cublasGemmGroupedBatchedEx call for all experts (cuBLAS's grouped GEMM,
 * variable m per group). The experts' GEMMs run at ~434 TFLOP/s where the
 * dense MLP's reach ~593 (bench/NOTES.md, session 22): one launch per
 * expert leaves each launch's ramp and tail, and one expert's fc2 forward
 * is 48 tiles of 128 x 256 for 132 SMs. This says whether cuBLAS's grouped
 * GEMM is the way to all experts' tiles in one launch (session 24, cuBLAS
 * 13.1 on the H200: no, bench/NOTES.md: every fp32-output form "not
 * supported", the 16-bit forward at 0.53x). Not a test: one
 * process, CUDA events, one line per (GEMM form, way); the two ways' largest
 * relative difference is printed as a sanity check (they need not agree
 * bitwise: other kernels, other summation blocks).
 *
 *   nvcc -O2 -std=c++20 -arch=sm_90 -Isrc -Ikernels -o /tmp/bgg bench/bench_grouped_gemm.cu \
 *     -lcublasLt -lcublas && /tmp/bgg [reps]
 *
 * gpu-small MoE: T 8192 tokens, top-2 of 8 experts (16384 expert rows),
 * H 768, F 2048; the loads below are uneven as routing makes them. Shapes
 * are row-major C[m,n] = op(A) op(B) as ops.h writes them. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"

#include "bench_gemm.cuh"

#define E 8
#define H 768
#define F 2048
#define WS_BYTES ((size_t)32 << 20)
static const int LOADS[E] = {1900, 2300, 2048, 1700, 2400, 2100, 1848, 2088}; /* sum 16384 */

/* One GEMM form of an expert linear: ta/tb as in bench_gemm_algos; m, n, k
 * with -1 for "the expert's rows"; out16: a 16-bit output; beta1: the
 * wgrad's accumulation into fp32 main_grad. */
typedef struct {
  const char *what;
  int ta, tb, m, n, k, out16, beta1;
} form;

static const form FORMS[] = {
    {"fc1 fwd", 0, 1, -1, 2 * F, H, 1, 0},   {"fc1 dgrad", 0, 0, -1, H, 2 * F, 0, 0},
    {"fc1 wgrad", 1, 0, 2 * F, H, -1, 0, 1}, {"fc2 fwd", 0, 1, -1, H, F, 0, 0},
    {"fc2 dgrad", 0, 0, -1, F, H, 0, 0},     {"fc2 wgrad", 1, 0, H, F, -1, 0, 1},
};

/* expert e's GEMM of form f: operands and output in the three buffers,
 * each expert's rows (or its weight) at its own offset */
typedef struct {
  int m, n, k, rows_a, cols_a, rows_b, cols_b;
  const void *a, *b;
  void *d;
} problem;

static problem expert_problem(const form *f, int e, const char *A, const char *B, char *D) {
  int r0 = 0;
  for (int i = 0; i < e; i++) r0 += LOADS[i];
  problem p;
  p.m = f->m < 0 ? LOADS[e] : f->m, p.n = f->n < 0 ? LOADS[e] : f->n;
  p.k = f->k < 0 ? LOADS[e] : f->k;
  p.rows_a = f->ta ? p.k : p.m, p.cols_a = f->ta ? p.m : p.k;
  p.rows_b = f->tb ? p.n : p.k, p.cols_b = f->tb ? p.k : p.n;
  /* the rows dimension (m, or k for a wgrad) is the expert's slice of the
   * sorted rows; the other operand of a forward or dgrad is its weight */
  size_t a_off = (size_t)r0 * p.cols_a * 2;
  size_t b_off = f->k < 0 ? (size_t)r0 * p.cols_b * 2 : (size_t)e * p.rows_b * p.cols_b * 2;
  size_t d_off = f->m < 0 ? (size_t)r0 * p.n * (f->out16 ? 2 : 4)
                          : (size_t)e * p.m * p.n * 4; /* a wgrad: expert e's main_grad */
  p.a = A + a_off, p.b = B + b_off, p.d = D + d_off;
  return p;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 20;
  if (reps < 1) {
    fprintf(stderr, "usage: %s [reps >= 1]\n", argv[0]);
    return 2;
  }
  cublasLtHandle_t lt;
  cublasHandle_t blas;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  CUBLAS_CHECK(cublasCreate(&blas));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("# %s, %d SMs, cuBLAS %d; %d experts, loads", prop.name, prop.multiProcessorCount,
         CUBLAS_VERSION, E);
  for (int e = 0; e < E; e++) printf(" %d", LOADS[e]);
  printf("; %d reps after 3 warm-ups\n# form | way | ms | TFLOP/s | max rel diff vs per-expert\n",
         reps);
  size_t big = (size_t)16384 * 2 * F * 4; /* the largest buffer: [rows, 2F] fp32 */
  char *A, *B, *D0, *D1;
  void *ws;
  CUDA_CHECK(cudaMalloc(&A, big));
  CUDA_CHECK(cudaMalloc(&B, big));
  CUDA_CHECK(cudaMalloc(&D0, big));
  CUDA_CHECK(cudaMalloc(&D1, big));
  CUDA_CHECK(cudaMalloc(&ws, WS_BYTES));
  fill_bf16<<<1024, 256>>>((unsigned short *)A, big / 2, 1u);
  fill_bf16<<<1024, 256>>>((unsigned short *)B, big / 2, 2u);
  CUDA_CHECK(cudaGetLastError());
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  const float one = 1.0f, zero = 0.0f;
  for (size_t fi = 0; fi < sizeof FORMS / sizeof FORMS[0]; fi++) {
    const form *f = &FORMS[fi];
    const float *beta = f->beta1 ? &one : &zero;
    cudaDataType_t out = f->out16 ? CUDA_R_16BF : CUDA_R_32F;
    problem p[E];
    double flops = 0;
    for (int e = 0; e < E; e++) {
      p[e] = expert_problem(f, e, A, B, D0);
      flops += 2.0 * p[e].m * p[e].n * (double)p[e].k;
    }
    /* way 1: a cuBLASLt matmul per expert, the heuristic's first algorithm */
    cublasLtMatmulDesc_t desc = row_major_desc(f->ta, f->tb);
    cublasLtMatrixLayout_t la[E], lb[E], ld[E];
    cublasLtMatmulHeuristicResult_t algo[E];
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = WS_BYTES;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    for (int e = 0; e < E; e++) {
      CUBLAS_CHECK(
          cublasLtMatrixLayoutCreate(&la[e], CUDA_R_16BF, p[e].cols_b, p[e].rows_b, p[e].cols_b));
      CUBLAS_CHECK(
          cublasLtMatrixLayoutCreate(&lb[e], CUDA_R_16BF, p[e].cols_a, p[e].rows_a, p[e].cols_a));
      CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld[e], out, p[e].n, p[e].m, p[e].n));
      int found = 0;
      CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la[e], lb[e], ld[e], ld[e], pref, 1,
                                                  &algo[e], &found));
      if (!found) {
        fprintf(stderr, "%s: no algorithm for expert %d\n", f->what, e);
        return 1;
      }
    }
    CUDA_CHECK(cudaMemset(D0, 0, big));
    for (int r = -3; r < reps; r++) {
      if (r == 0) CUDA_CHECK(cudaEventRecord(e0, 0));
      for (int e = 0; e < E; e++)
        CUBLAS_CHECK(cublasLtMatmul(lt, desc, &one, p[e].b, la[e], p[e].a, lb[e], beta, p[e].d,
                                    ld[e], p[e].d, ld[e], &algo[e].algo, ws, WS_BYTES, 0));
    }
    CUDA_CHECK(cudaEventRecord(e1, 0));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms_lt = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms_lt, e0, e1));
    ms_lt /= reps;
    printf("%-9s | per-expert cuBLASLt | %.4f | %6.1f |\n", f->what, ms_lt,
           flops / (ms_lt * 1e-3) / 1e12);
    /* way 2: one grouped call, E groups of one problem each (column-major:
     * C^T = op(B)^T op(A)^T, as way 1 passes B first) */
    cublasOperation_t tra[E], trb[E];
    int m[E], n[E], k[E], lda[E], ldb[E], ldc[E], size[E];
    float alphas[E], betas[E];
    const void *ha[E], *hb[E];
    void *hc[E];
    for (int e = 0; e < E; e++) {
      problem q = expert_problem(f, e, A, B, D1);
      tra[e] = f->tb ? CUBLAS_OP_T : CUBLAS_OP_N, trb[e] = f->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
      m[e] = q.n, n[e] = q.m, k[e] = q.k;
      lda[e] = q.cols_b, ldb[e] = q.cols_a, ldc[e] = q.n, size[e] = 1;
      alphas[e] = 1.0f, betas[e] = *beta;
      ha[e] = q.b, hb[e] = q.a, hc[e] = q.d;
    }
    const void **da, **db;
    void **dc;
    CUDA_CHECK(cudaMalloc(&da, sizeof ha));
    CUDA_CHECK(cudaMalloc(&db, sizeof hb));
    CUDA_CHECK(cudaMalloc(&dc, sizeof hc));
    CUDA_CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dc, hc, sizeof hc, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(D1, 0, big));
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    for (int r = -3; r < reps && st == CUBLAS_STATUS_SUCCESS; r++) {
      if (r == 0) CUDA_CHECK(cudaEventRecord(e0, 0));
      st = cublasGemmGroupedBatchedEx(blas, tra, trb, m, n, k, alphas, da, CUDA_R_16BF, lda, db,
                                      CUDA_R_16BF, ldb, betas, dc, out, ldc, E, size,
                                      CUBLAS_COMPUTE_32F);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
      printf("%-9s | grouped cuBLAS      | not supported here (status %d)\n", f->what, (int)st);
    } else {
      CUDA_CHECK(cudaEventRecord(e1, 0));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms_g = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms_g, e0, e1));
      ms_g /= reps;
      /* the outputs after the same number of calls (wgrads accumulate) */
      double worst = 0;
      size_t bytes = 0;
      for (int e = 0; e < E; e++) bytes += (size_t)p[e].m * p[e].n * (f->out16 ? 2 : 4);
      if (!f->out16) {
        size_t count = bytes / 4;
        float *x0 = (float *)malloc(bytes), *x1 = (float *)malloc(bytes);
        if (!x0 || !x1) {
          fprintf(stderr, "out of host memory\n");
          return 1;
        }
        CUDA_CHECK(cudaMemcpy(x0, D0, bytes, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(x1, D1, bytes, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < count; i++) {
          double d = fabs((double)x0[i] - x1[i]) / (fabs((double)x0[i]) + 1e-3);
          worst = d > worst ? d : worst;
        }
        free(x0), free(x1);
      }
      printf("%-9s | grouped cuBLAS      | %.4f | %6.1f | %.2e%s (per-expert / grouped %.3fx)\n",
             f->what, ms_g, flops / (ms_g * 1e-3) / 1e12, worst,
             f->out16 ? " (16-bit output not compared)" : "", ms_lt / ms_g);
    }
    fflush(stdout);
    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(db));
    CUDA_CHECK(cudaFree(dc));
    for (int e = 0; e < E; e++) {
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la[e]));
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb[e]));
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(ld[e]));
    }
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
  }
  CUBLAS_CHECK(cublasDestroy(blas));
  CUBLAS_CHECK(cublasLtDestroy(lt));
  return 0;
}
