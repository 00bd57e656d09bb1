/* bench_gemm_algos.cu — every algorithm cuBLASLt's heuristic offers for the
 * GEMM shapes of a gpu-small step, under the constraints the core's plans
 * use (kernels/cuda_gemm.cu: 32 MiB workspace, 16-byte alignment, split-K
 * only with a separate reduction pass), each timed on its own. The core
 * takes the heuristic's first; this says what the others would give, so
 * that a pinned choice (a fixed function of GPU, library and shape, which
 * keeps results deterministic) is decided from measurements. Not a test:
 * one process, CUDA events, one line per (shape, algorithm).
 *
 *   nvcc -O2 -std=c++20 -arch=sm_90 -Isrc -Ikernels -o /tmp/bga bench/bench_gemm_algos.cu \
 *     -lcublasLt && /tmp/bga [reps [gpu-small|dense16|experts|router|all]]
 *
 * The sets: gpu-small's dense step (the default; T 8192, V 32768), the
 * second dense shape of issue 19 (B16 x M1: T 16384, V 50304; its own
 * buckets, none of them pinned so far), and one expert's GEMMs at the two
 * row buckets a grouped linear plans with at gpu-small MoE (2048 and 4096
 * rows: kernels/cuda_gemm.cu, gemm_half_many), and an MoE router's fp32 GEMMs.
 *
 * Shapes are row-major C[m,n] = op(A) op(B) as ops.h writes them; beta 1 is
 * the wgrad accumulation into main_grad (C = D, in place), out16 the
 * 16-bit-output forwards (gemm_to_half). */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CUDA_CHECK, CUBLAS_CHECK: the backend's checks (kernels/cuda_common.cuh) */
#include "cuda_common.cuh"

#include "bench_gemm.cuh"

#define MAX_ALGOS 16

#define WS_BYTES ((size_t)32 << 20)

typedef struct {
  const char *what;
  int ta, tb, m, n, k, beta1, out16, fp32; /* fp32: fp32 operands and output (the router) */
} shape;

/* a dense step's GEMMs at T tokens a microbatch and vocabulary V (H 768,
 * F 2048, as gpu-small): head, fc1, qkv, fc2, proj and eh_proj, each
 * forward, wgrad and dgrad */
#define DENSE_SHAPES(T, V)                                                                         \
  {"head fwd", 0, 1, T, V, 768, 0, 1, 0}, {"head wgrad", 1, 0, V, 768, T, 1, 0, 0},                \
      {"head dgrad", 0, 0, T, 768, V, 0, 0, 0}, {"fc1 fwd", 0, 1, T, 4096, 768, 0, 1, 0},          \
      {"fc1 wgrad", 1, 0, 4096, 768, T, 1, 0, 0}, {"fc1 dgrad", 0, 0, T, 768, 4096, 0, 0, 0},      \
      {"qkv fwd", 0, 1, T, 2304, 768, 0, 0, 0}, {"qkv wgrad", 1, 0, 2304, 768, T, 1, 0, 0},        \
      {"qkv dgrad", 0, 0, T, 768, 2304, 0, 0, 0}, {"fc2 fwd", 0, 1, T, 768, 2048, 1, 0, 0},        \
      {"fc2 wgrad", 1, 0, 768, 2048, T, 1, 0, 0}, {"fc2 dgrad", 0, 0, T, 2048, 768, 0, 0, 0},      \
      {"proj fwd", 0, 1, T, 768, 768, 1, 0, 0}, {"proj wgrad", 1, 0, 768, 768, T, 1, 0, 0},        \
      {"proj dgrad", 0, 0, T, 768, 768, 0, 0, 0}, {"eh fwd", 0, 1, T, 768, 1536, 0, 0, 0},         \
      {"eh wgrad", 1, 0, 768, 1536, T, 1, 0, 0}, {"eh dgrad", 0, 0, T, 1536, 768, 0, 0, 0},

static const shape GPU_SMALL[] = {DENSE_SHAPES(8192, 32768)};
static const shape DENSE16[] = {DENSE_SHAPES(16384, 50304)};

/* one expert's GEMMs (fc1 H -> 2F with a 16-bit output, fc2 F -> H) at
 * each row bucket; the wgrads accumulate (beta 1) */
#define EXPERT_SHAPES(R)                                                                           \
  {"x fc1 fwd", 0, 1, R, 4096, 768, 0, 1, 0}, {"x fc1 wgrad", 1, 0, 4096, 768, R, 1, 0, 0},        \
      {"x fc1 dgrad", 0, 0, R, 768, 4096, 0, 0, 0}, {"x fc2 fwd", 0, 1, R, 768, 2048, 0, 0, 0},    \
      {"x fc2 wgrad", 1, 0, 768, 2048, R, 1, 0, 0}, {"x fc2 dgrad", 0, 0, R, 2048, 768, 0, 0, 0},

static const shape EXPERTS[] = {EXPERT_SHAPES(2048) EXPERT_SHAPES(4096)};

/* an MoE router's fp32 GEMMs at gpu-small (E 8, H 768, T 8192): logits =
 * x W^T, main_grad += dlogits^T x, dx = dlogits W (0.48 ms of a step on
 * cuBLASLt's first choice, session 27: 2-7 TFLOP/s for work bound by reading
 * x once) */
static const shape ROUTER[] = {{"router fwd", 0, 1, 8192, 8, 768, 0, 0, 1},
                               {"router wgrad", 1, 0, 8, 768, 8192, 1, 0, 1},
                               {"router dgrad", 0, 0, 8192, 768, 8, 0, 0, 1}};

typedef struct {
  const char *name;
  const shape *shapes;
  size_t count;
} shape_set;

#define SET(name, a)                                                                               \
  { name, a, sizeof a / sizeof a[0] }
static const shape_set SETS[] = {SET("gpu-small", GPU_SMALL), SET("dense16", DENSE16),
                                 SET("experts", EXPERTS), SET("router", ROUTER)};

static int cfg(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  int v = -1;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(a, attr, &v, sizeof v, &w);
  return v;
}

/* the largest operand or output of a set's shapes, in bytes */
static size_t set_bytes(const shape_set *set) {
  size_t most = 0;
  for (size_t i = 0; i < set->count; i++) {
    const shape *sh = &set->shapes[i];
    const size_t in = sh->fp32 ? 4 : 2;
    size_t a = (size_t)sh->m * sh->k * in, b = (size_t)sh->k * sh->n * in,
           d = (size_t)sh->m * sh->n * (sh->out16 ? 2 : 4);
    most = a > most ? a : most, most = b > most ? b : most, most = d > most ? d : most;
  }
  return most;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 20;
  const char *which = argc > 2 ? argv[2] : "gpu-small";
  bool any = !strcmp(which, "all");
  for (size_t i = 0; i < sizeof SETS / sizeof SETS[0]; i++)
    any = any || !strcmp(which, SETS[i].name);
  if (reps < 1 || !any) {
    fprintf(stderr, "usage: %s [reps >= 1 [gpu-small|dense16|experts|router|all]]\n", argv[0]);
    return 2;
  }
  cublasLtHandle_t lt;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("# %s, %d SMs, cuBLASLt %zu; %d reps per algorithm after 3 warm-ups\n", prop.name,
         prop.multiProcessorCount, cublasLtGetVersion(), reps);
  printf("# shape | algorithm index (0 = the core's) | ms | TFLOP/s | id tile stages splitk "
         "reduction swizzle custom cluster; operands uniform in [-1, 1)\n");
  size_t maxbytes = 0;
  for (size_t i = 0; i < sizeof SETS / sizeof SETS[0]; i++)
    if (!strcmp(which, "all") || !strcmp(which, SETS[i].name)) {
      size_t b = set_bytes(&SETS[i]);
      maxbytes = b > maxbytes ? b : maxbytes;
    }
  void *A, *B, *D, *ws;
  CUDA_CHECK(cudaMalloc(&A, maxbytes));
  CUDA_CHECK(cudaMalloc(&B, maxbytes));
  CUDA_CHECK(cudaMalloc(&D, maxbytes));
  CUDA_CHECK(cudaMalloc(&ws, WS_BYTES));
  CUDA_CHECK(cudaMemset(D, 0, maxbytes)); /* A and B are filled per shape (bf16 or fp32) */
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  for (size_t q = 0; q < sizeof SETS / sizeof SETS[0]; q++) {
    if (strcmp(which, "all") && strcmp(which, SETS[q].name)) continue;
    printf("# set %s\n", SETS[q].name);
    for (size_t s = 0; s < SETS[q].count; s++) {
      const shape *sh = &SETS[q].shapes[s];
      int rows_a = sh->ta ? sh->k : sh->m, cols_a = sh->ta ? sh->m : sh->k;
      int rows_b = sh->tb ? sh->n : sh->k, cols_b = sh->tb ? sh->k : sh->n;
      cublasLtMatmulDesc_t desc = row_major_desc(sh->ta, sh->tb);
      cublasLtMatrixLayout_t la, lb, ld;
      const cudaDataType_t in_type = sh->fp32 ? CUDA_R_32F : CUDA_R_16BF;
      if (sh->fp32) { /* fp32 operands of the same values */
        fill_f32<<<1024, 256>>>((float *)A, maxbytes / 4, 1u);
        fill_f32<<<1024, 256>>>((float *)B, maxbytes / 4, 2u);
      } else {
        fill_bf16<<<1024, 256>>>((unsigned short *)A, maxbytes / 2, 1u);
        fill_bf16<<<1024, 256>>>((unsigned short *)B, maxbytes / 2, 2u);
      }
      CUDA_CHECK(cudaGetLastError());
      CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, in_type, cols_b, rows_b, cols_b));
      CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, in_type, cols_a, rows_a, cols_a));
      CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, sh->out16 ? CUDA_R_16BF : CUDA_R_32F, sh->n,
                                              sh->m, sh->n));
      cublasLtMatmulPreference_t pref;
      CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      uint64_t wsb = WS_BYTES;
      uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                         (sh->out16 ? 0u : (uint32_t)CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
      uint32_t align = 16;
      CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
      CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
      cublasLtMatmulPreferenceAttributes_t aligns[4] = {
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
      for (int i = 0; i < 4; i++)
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align));
      cublasLtMatmulHeuristicResult_t res[MAX_ALGOS];
      int found = 0;
      CUBLAS_CHECK(
          cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, MAX_ALGOS, res, &found));
      double flops = 2.0 * sh->m * sh->n * (double)sh->k;
      const float one = 1.0f, zero = 0.0f;
      const float *beta = sh->beta1 ? &one : &zero;
      for (int i = 0; i < found; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        const cublasLtMatmulAlgo_t *al = &res[i].algo;
        for (int r = 0; r < 3; r++)
          CUBLAS_CHECK(cublasLtMatmul(lt, desc, &one, B, la, A, lb, beta, D, ld, D, ld, al, ws,
                                      WS_BYTES, 0));
        CUDA_CHECK(cudaEventRecord(e0, 0));
        for (int r = 0; r < reps; r++)
          CUBLAS_CHECK(cublasLtMatmul(lt, desc, &one, B, la, A, lb, beta, D, ld, D, ld, al, ws,
                                      WS_BYTES, 0));
        CUDA_CHECK(cudaEventRecord(e1, 0));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        ms /= reps;
        printf("%-10s %s%s %5dx%5dx%5d | %2d | %.4f | %6.1f | %d %d %d %d %d %d %d %d\n", sh->what,
               sh->ta ? "T" : "N", sh->tb ? "T" : "N", sh->m, sh->n, sh->k, i, ms,
               flops / (ms * 1e-3) / 1e12, cfg(al, CUBLASLT_ALGO_CONFIG_ID),
               cfg(al, CUBLASLT_ALGO_CONFIG_TILE_ID), cfg(al, CUBLASLT_ALGO_CONFIG_STAGES_ID),
               cfg(al, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
               cfg(al, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
               cfg(al, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
               cfg(al, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
               cfg(al, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
        fflush(stdout);
      }
      CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(ld));
      CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
    }
  }
  return 0;
}
