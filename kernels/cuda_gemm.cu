/* cuda_gemm.cu — ops.h GEMM on cuBLASLt, deterministic by construction.
 *
 * Row-major C[m,n] = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so
 * cuBLASLt is called with the operands swapped and the transposes kept.
 *
 * How results are made a function of (compute type, transposes, m, n, k and
 * the input values) only:
 *  - cuBLASLt only ever sees canonical layouts: every operand and the output
 *    with leading dimension round_up(width, 8) and at least 16-byte aligned.
 *    A caller's fp32 operand that already has that form is used in place;
 *    anything else is copied (fp32) or converted (bf16/fp16: rounded to
 *    nearest even, the rounding ops.h asks of the GEMM) into a scratch
 *    buffer first.
 *  - The algorithm is chosen once per key by the cuBLASLt heuristic (with a
 *    fixed workspace, split-K only with a separate reduction pass, never the
 *    in-place counter scheme) and cached, so it never changes within a
 *    process and is the same choice in every process on the same GPU model.
 *    The heuristic's first, or for a pinned key (below, measured) the one of
 *    its list with the pinned configuration.
 *  - cuBLASLt runs with beta = 0, and beta != 0 is applied by our own
 *    epilogue kernel, C = D + beta*C, where D is the beta = 0 result in a
 *    scratch buffer. A beta = 1 GEMM is therefore, bit for bit, a beta = 0
 *    GEMM into scratch followed by `add` — exactly the fused/unfused
 *    gradient-accumulation property of ops.h — whatever a split-K reduction
 *    would have done. The exception (run_plan): alpha = 1, beta = 1 on an
 *    algorithm without split-K, where cuBLASLt's own epilogue is that one
 *    rounding of acc + C (checked bitwise by cuda_ops for the model's wgrad
 *    shapes).
 * FP32 uses CUBLAS_COMPUTE_32F_PEDANTIC (true fp32 FMA, never TF32 or an
 * emulation); BF16/FP16 use tensor cores with fp32 accumulation and fp32
 * output.
 *
 * gemm_e4m3 (ops.h's FP8 GEMM) goes through the same plans, buckets and
 * epilogue: its operands are already e4m3 bytes in the one layout Hopper's
 * FP8 kernels take (row-major A[m,k] and B[n,k], i.e. the trans_b GEMM, which
 * is cuBLASLt's "TN"), with k a multiple of 16 so that they are canonical as
 * they come; fp32 output, CUBLAS_COMPUTE_32F, no scale pointers (alpha
 * carries the scales) and no fast accumulation (cuBLASLt's default: partial
 * sums are promoted to fp32 periodically). cuBLASLt 13.1 has no FP8
 * algorithm when our n (its m) is not a multiple of 8 (measured on the H200;
 * m and k = 16 are fine), so such a B gets zero rows up to the next multiple
 * of 8 in scratch: the plan is the padded shape's (a function of n), the
 * extra columns of D are zeros nobody reads, and no other column changes (an
 * output element is its own row of A times its own row of B). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <string.h>
#include <time.h>

#include "cuda_common.cuh"

/* Leading dimension of every matrix cuBLASLt sees: a multiple of 8 elements
 * keeps rows 16-byte aligned for both 2- and 4-byte types. */
static int canon_ld(int width) {
  return (width + 7) & ~7;
}
static int aligned16(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

/* The plan key's compute type of gemm_e4m3: an internal value beside
 * rc_compute's (FP32 0, BF16 1, FP16 2), not part of ops.h. */
#define GEMM_CT_E4M3 8
/* Or'ed into a plan key's compute type: the output D is the compute type's
 * 16-bit form (gemm_to_half) instead of fp32. */
#define GEMM_OUT16 0x100

/* ---- plan cache: one cuBLASLt configuration per GEMM key ---- */
typedef struct {
  int ct, ta, tb, m, n, k;
  int group; /* a grouped linear's typical row count (grouped_bucket), 0 for any other GEMM */
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t lay_a, lay_b, lay_d; /* cuBLASLt's A = our B, its B = our A */
  cublasLtMatmulAlgo_t algo;
  int splitk; /* the algorithm's split-K count (1: none), for run_plan's beta = 1 */
} gemm_plan;

static gemm_plan *g_plans = NULL;
static int g_nplans = 0, g_capplans = 0;

/* how many of the heuristic's algorithms a bucket keeps (below) */
#define GEMM_BUCKET_ALGOS 8

static cudaDataType_t input_type(int ct) {
  switch (ct & ~GEMM_OUT16) {
  case RC_COMPUTE_BF16:
    return CUDA_R_16BF;
  case RC_COMPUTE_FP16:
    return CUDA_R_16F;
  case GEMM_CT_E4M3:
    return CUDA_R_8F_E4M3;
  default:
    return CUDA_R_32F;
  }
}

/* RC_CUDA_GEMM_LOG=1 prints each plan as it is made: which algorithm the
 * heuristic fixed for a shape (for diagnosing a GEMM that changed bits). */
static double plan_clock_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* source: where the algorithm came from; ms: the host time the plan took */
static void log_plan(const gemm_plan *p, cublasComputeType_t compute, size_t ws, const char *source,
                     double ms) {
  int id = -1, tile = -1, splitk = -1, scheme = -1, stages = -1;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile,
                                       &w);
  cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                       sizeof splitk, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                       sizeof scheme, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                       sizeof stages, &w);
  fprintf(stderr,
          "resumecheck: gemm plan ct=%d%s%s ta=%d tb=%d m=%d n=%d k=%d: compute=%d algo=%d tile=%d "
          "splitk=%d reduction=%d stages=%d workspace=%zu from=%s (%.3f ms)\n",
          p->ct & ~GEMM_OUT16, p->ct == GEMM_CT_E4M3 ? " (e4m3)" : "",
          (p->ct & GEMM_OUT16) ? " (16-bit output)" : "", p->ta, p->tb, p->m, p->n, p->k,
          (int)compute, id, tile, splitk, scheme, stages, ws, source, ms);
}

/* Column-major views of the row-major operands of an (m, n, k) GEMM. */
static void make_layouts(int ct, int ta, int tb, int m, int n, int k, cublasLtMatrixLayout_t *lay_a,
                         cublasLtMatrixLayout_t *lay_b, cublasLtMatrixLayout_t *lay_d) {
  cudaDataType_t in = input_type(ct);
  int rows_a = ta ? k : m, cols_a = ta ? m : k;
  int rows_b = tb ? n : k, cols_b = tb ? k : n;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(lay_a, in, (uint64_t)cols_b, (uint64_t)rows_b,
                                          (int64_t)canon_ld(cols_b)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(lay_b, in, (uint64_t)cols_a, (uint64_t)rows_a,
                                          (int64_t)canon_ld(cols_a)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(lay_d, (ct & GEMM_OUT16) ? in : CUDA_R_32F, (uint64_t)n,
                                          (uint64_t)m, (int64_t)canon_ld(n)));
}

static void destroy_layouts(cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                            cublasLtMatrixLayout_t d) {
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(a));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(b));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(d));
}

/* The heuristic's first `want` algorithms for these layouts under our
 * constraints (fixed workspace; split-K only with a separate reduction pass,
 * never the in-place counter scheme; 16-byte alignment), best first, into
 * algos; ws_needed: the first one's workspace. Returns how many (0: none). */
static int heuristic_algos(int ct, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t lay_a,
                           cublasLtMatrixLayout_t lay_b, cublasLtMatrixLayout_t lay_d, int want,
                           cublasLtMatmulAlgo_t *algos, size_t *ws_needed) {
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws_bytes = 0;
  rc_cuda_gemm_workspace(&ws_bytes);
  uint64_t ws64 = ws_bytes;
  /* a 16-bit output: split-K partials summed in fp32 only (a sum in the
   * output type would round twice) */
  uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                     ((ct & GEMM_OUT16) ? 0u : (uint32_t)CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
  uint32_t align = 16; /* what canonical layouts guarantee, whoever owns the buffer */
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws64, sizeof ws64));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof align));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align));
  cublasLtMatmulHeuristicResult_t results[GEMM_BUCKET_ALGOS];
  int found = 0;
  if (want > GEMM_BUCKET_ALGOS) want = GEMM_BUCKET_ALGOS;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(rc_cuda_lt(), desc, lay_a, lay_b, lay_d, lay_d,
                                                     pref, want, results, &found);
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (st != CUBLAS_STATUS_SUCCESS) return 0;
  int n = 0;
  for (int i = 0; i < found; i++) /* the usable ones, in the heuristic's order */
    if (results[i].state == CUBLAS_STATUS_SUCCESS) {
      if (n == 0) *ws_needed = results[i].workspaceSize;
      algos[n++] = results[i].algo;
    }
  return n;
}

/* ---- pinned algorithms ----
 * The heuristic's first algorithm is not the fastest for every key. Each
 * algorithm the heuristic offers for gpu-small's GEMMs was timed on the H200
 * (bench/bench_gemm_algos.cu: cuBLASLt 13.1, random operands, two passes of
 * 30 calls; bench/NOTES.md session 18; B16 x M1's in session 24), and where
 * another one was faster by more than the noise it is pinned here by its
 * configuration. On a GPU of compute capability 9.0 a pinned key takes the
 * algorithm of the heuristic's list (the same list, in the same order, as
 * the unpinned choice sees) with that configuration; when the list has
 * none (another library), the first. The choice stays a function of the GPU
 * model, the library and the key, so every process makes the same one.
 * A key may also be a grouped linear's bucket shape (an expert GEMM's row
 * dimension at 2048 or 4096 at gpu-small: plan_try, grouped_bucket): its
 * pinned algorithm then goes first in the bucket's list, the others keep the
 * heuristic's order (since session 26; the expert keys below since
 * session 27).
 * RC_CUDA_GEMM_PINS=0 ignores the table (a kernel switch: it changes bits;
 * base/kernel_switches.h). */
typedef struct {
  int ct, ta, tb, m, n, k;                              /* the plan key (ct with GEMM_OUT16) */
  int tile, stages, splitk, reduction, swizzle, custom; /* CUBLASLT_ALGO_CONFIG_* */
  double us_first, us_pinned;                           /* measured: the first, the pinned */
} gemm_pin;

static const gemm_pin PINS[] = {
    {RC_COMPUTE_BF16 | GEMM_OUT16, 0, 1, 8192, 32768, 768, 201, 35, 1, 0, 0, 2, 573.5, 521.9},
    {RC_COMPUTE_BF16, 0, 0, 8192, 768, 32768, 20, 35, 1, 0, 0, 1, 570.3, 539.5},
    {RC_COMPUTE_BF16 | GEMM_OUT16, 0, 1, 8192, 4096, 768, 20, 35, 1, 0, 0, 1, 91.6, 72.4},
    {RC_COMPUTE_BF16, 0, 1, 8192, 2304, 768, 20, 35, 1, 0, 0, 1, 58.6, 46.1},
    {RC_COMPUTE_BF16, 0, 0, 8192, 768, 2304, 20, 35, 1, 0, 0, 1, 43.7, 42.6},
    {RC_COMPUTE_BF16, 0, 1, 8192, 768, 2048, 28, 35, 1, 0, 0, 0, 44.1, 40.8},
    {RC_COMPUTE_BF16, 1, 0, 768, 2048, 8192, 116, 35, 1, 0, 0, 0, 40.8, 37.5},
    {RC_COMPUTE_BF16, 0, 0, 8192, 2048, 768, 20, 35, 1, 0, 0, 1, 46.9, 41.2},
    {RC_COMPUTE_BF16, 0, 1, 8192, 768, 768, 20, 35, 1, 0, 0, 1, 20.4, 18.2},
    {RC_COMPUTE_BF16, 0, 0, 8192, 768, 768, 20, 35, 1, 0, 0, 1, 19.5, 18.1},
    /* B16 x M1 (16384 tokens a microbatch; session 24, one pass of 20 calls,
     * kept where the gain is over 5%: the head's keys gain under 3%) */
    {RC_COMPUTE_BF16 | GEMM_OUT16, 0, 1, 16384, 4096, 768, 29, 35, 1, 0, 0, 1, 188.1, 160.8},
    {RC_COMPUTE_BF16, 1, 0, 4096, 768, 16384, 208, 35, 1, 0, 0, 3, 159.1, 138.8},
    {RC_COMPUTE_BF16, 0, 1, 16384, 2304, 768, 197, 35, 1, 0, 0, 2, 115.1, 88.3},
    {RC_COMPUTE_BF16, 0, 1, 16384, 768, 2048, 20, 35, 1, 0, 0, 1, 91.9, 79.4},
    {RC_COMPUTE_BF16, 1, 0, 768, 2048, 16384, 116, 35, 1, 0, 0, 0, 75.1, 70.1},
    {RC_COMPUTE_BF16, 0, 0, 16384, 2048, 768, 20, 35, 1, 0, 0, 1, 88.8, 78.4},
    {RC_COMPUTE_BF16, 0, 1, 16384, 768, 768, 20, 35, 1, 0, 0, 1, 57.4, 47.4},
    {RC_COMPUTE_BF16, 0, 0, 16384, 768, 768, 20, 35, 1, 0, 0, 1, 38.0, 33.1},
    {RC_COMPUTE_BF16, 0, 1, 16384, 768, 1536, 20, 35, 1, 0, 0, 1, 59.8, 56.4},
    {RC_COMPUTE_BF16, 0, 0, 16384, 1536, 768, 20, 35, 1, 0, 0, 1, 67.7, 60.4},
    /* MoE expert GEMMs at their row buckets (E8 top-2 at gpu-small: 2048
     * rows an expert, or 4096; session 26, three passes of 30 calls on the
     * H200, bench/results/gemm_algos_h200_session26_experts.txt; kept where
     * all three passes agree on a gain over 5%) */
    {RC_COMPUTE_BF16, 0, 0, 2048, 768, 4096, 208, 35, 1, 0, 0, 3, 21.5, 19.6},
    {RC_COMPUTE_BF16, 0, 0, 2048, 2048, 768, 20, 35, 1, 0, 0, 1, 14.0, 12.3},
    {RC_COMPUTE_BF16 | GEMM_OUT16, 0, 1, 4096, 4096, 768, 20, 35, 1, 0, 0, 1, 40.1, 37.0},
    {RC_COMPUTE_BF16, 1, 0, 768, 2048, 4096, 116, 35, 1, 0, 0, 0, 22.2, 19.7},
    {RC_COMPUTE_BF16, 0, 0, 4096, 2048, 768, 20, 35, 1, 0, 0, 1, 25.3, 22.6},
};

static int algo_attr(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  int v = -1;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(a, attr, &v, sizeof v, &w);
  return v;
}

/* The pin of key (ct, ta, tb, m, n, k) on this GPU, or NULL. */
static const gemm_pin *find_pin(int ct, int ta, int tb, int m, int n, int k) {
  const char *off = getenv("RC_CUDA_GEMM_PINS");
  if (off && strcmp(off, "0") == 0) return NULL;
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (major != 9 || minor != 0) return NULL;
  for (size_t i = 0; i < sizeof PINS / sizeof PINS[0]; i++) {
    const gemm_pin *q = &PINS[i];
    if (q->ct == ct && q->ta == ta && q->tb == tb && q->m == m && q->n == n && q->k == k) return q;
  }
  return NULL;
}

static bool pin_matches(const gemm_pin *q, const cublasLtMatmulAlgo_t *a) {
  return algo_attr(a, CUBLASLT_ALGO_CONFIG_TILE_ID) == q->tile &&
         algo_attr(a, CUBLASLT_ALGO_CONFIG_STAGES_ID) == q->stages &&
         algo_attr(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) == q->splitk &&
         algo_attr(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) == q->reduction &&
         algo_attr(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING) == q->swizzle &&
         algo_attr(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION) == q->custom;
}

/* The heuristic's first algorithm, or the pinned one of its list (above);
 * *pinned says which. */
static int heuristic_algo(int ct, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t lay_a,
                          cublasLtMatrixLayout_t lay_b, cublasLtMatrixLayout_t lay_d,
                          const gemm_pin *pin, cublasLtMatmulAlgo_t *algo, size_t *ws_needed,
                          bool *pinned) {
  *pinned = false;
  if (!pin) return heuristic_algos(ct, desc, lay_a, lay_b, lay_d, 1, algo, ws_needed) > 0;
  cublasLtMatmulAlgo_t list[GEMM_BUCKET_ALGOS];
  int found = heuristic_algos(ct, desc, lay_a, lay_b, lay_d, GEMM_BUCKET_ALGOS, list, ws_needed);
  if (found == 0) return 0;
  *algo = list[0];
  for (int i = 0; i < found; i++)
    if (pin_matches(pin, &list[i])) {
      *algo = list[i];
      *pinned = true;
      break;
    }
  return 1;
}

/* ---- algorithm buckets for the grouped (MoE) GEMMs ----
 * An expert's row count changes with every routing decision, so its GEMMs
 * (m for forward and dgrad, k for wgrad) rarely repeat a shape, and asking
 * the heuristic costs host time per new shape — hundreds of queries a step,
 * during which the GPU idles (a query costs milliseconds on the H200:
 * bench/NOTES.md, round three). A dimension that is not a multiple of 64
 * (the model's own widths all are) is therefore rounded up to the next power
 * of two (at least 64) — expert loads range over two orders of magnitude, so
 * finer buckets kept missing — the heuristic is asked once for that
 * bucket's shape for its best GEMM_BUCKET_ALGOS algorithms, and a shape of
 * the bucket takes the first of them, in the heuristic's order, that
 * cublasLtMatmulAlgoCheck accepts within our workspace (only when none does
 * does the shape get its own heuristic answer: with the bucket's best alone,
 * a few shapes a step were refused and each query stalled the GPU for 3-8
 * ms). The algorithm stays a pure function of the shape: the bucket's shape
 * and its list are fixed by the shape, not by which shape came first. */
typedef struct {
  int ct, ta, tb, m, n, k, compute, found; /* found: how many of algos */
  cublasLtMatmulAlgo_t algos[GEMM_BUCKET_ALGOS];
} algo_bucket;

static algo_bucket *g_buckets = NULL;
static int g_nbuckets = 0, g_capbuckets = 0;

/* The least power of two >= x, at least 64, at most 2^cap_log2. */
static int pow2_bucket(long long x, int cap_log2) {
  int b = 64;
  while (b < x && b < (1 << cap_log2)) b <<= 1;
  return b;
}

static int bucket_dim(int x) {
  return x % 64 == 0 ? x : pow2_bucket(x, 30);
}

static const algo_bucket *bucket_algo(cublasLtMatmulDesc_t desc, int ct, int ta, int tb, int m,
                                      int n, int k, cublasComputeType_t compute) {
  for (int i = 0; i < g_nbuckets; i++) {
    const algo_bucket *b = &g_buckets[i];
    if (b->ct == ct && b->ta == ta && b->tb == tb && b->m == m && b->n == n && b->k == k &&
        b->compute == (int)compute)
      return b;
  }
  if (g_nbuckets == g_capbuckets) {
    int cap = g_capbuckets ? 2 * g_capbuckets : 64;
    algo_bucket *nb = (algo_bucket *)realloc(g_buckets, (size_t)cap * sizeof *nb);
    if (!nb) {
      fprintf(stderr, "resumecheck: out of host memory for GEMM buckets\n");
      abort();
    }
    g_buckets = nb;
    g_capbuckets = cap;
  }
  algo_bucket *b = &g_buckets[g_nbuckets++];
  memset(b, 0, sizeof *b);
  b->ct = ct, b->ta = ta, b->tb = tb, b->m = m, b->n = n, b->k = k, b->compute = (int)compute;
  cublasLtMatrixLayout_t la, lb, ld;
  make_layouts(ct, ta, tb, m, n, k, &la, &lb, &ld);
  size_t ws_needed = 0;
  b->found = heuristic_algos(ct, desc, la, lb, ld, GEMM_BUCKET_ALGOS, b->algos, &ws_needed);
  destroy_layouts(la, lb, ld);
  return b;
}

/* A grouped linear's row dimension (gemm_half_many: m, or k for trans_a)
 * takes one of two buckets, its typical row count `group` (a power of two,
 * the rows per group of the call rounded up) or twice that, however the
 * routing falls. Each new bucket shape brings algorithms with kernels of
 * their own, and cuBLASLt loads a kernel on its first launch, 2-4 ms of host
 * time while the GPU idles (RC_CUDA_GEMM_LOG=2 on the H200, session 22):
 * with power-of-two buckets every rare expert load (24 rows, 366, 4800) was
 * such a launch, a whole step slower each time. Two buckets are both met in
 * the first steps. An algorithm stays a function of the key (group in it). */
static int grouped_bucket(int rows, int group) {
  return rows <= group ? group : 2 * group;
}

/* Builds the descriptor and chooses one algorithm (the bucket's, when it is
 * valid for this shape, else the heuristic's for the shape). Returns 0 when
 * there is none for this compute type. */
static int plan_try(gemm_plan *p, cublasComputeType_t compute) {
  cublasOperation_t op_a = p->tb ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A is our B */
  cublasOperation_t op_b = p->ta ? CUBLAS_OP_T : CUBLAS_OP_N;

  /* A compute type this cuBLASLt does not know is "no plan", not an error. */
  if (cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return 0;
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  make_layouts(p->ct, p->ta, p->tb, p->m, p->n, p->k, &p->lay_a, &p->lay_b, &p->lay_d);

  size_t ws_bytes = 0, ws_needed = 0;
  rc_cuda_gemm_workspace(&ws_bytes);
  double t0 = getenv("RC_CUDA_GEMM_LOG") ? plan_clock_ms() : 0.0;
  int mb = bucket_dim(p->m), kb = bucket_dim(p->k);
  if (p->group && p->ta)
    kb = grouped_bucket(p->k, p->group);
  else if (p->group)
    mb = grouped_bucket(p->m, p->group);
  if (mb != p->m || kb != p->k) {
    const algo_bucket *b = bucket_algo(p->desc, p->ct, p->ta, p->tb, mb, p->n, kb, compute);
    /* A pin of the bucket's shape (the expert GEMMs' are timed at their two
     * row buckets) puts its algorithm of the bucket's list first; the rest
     * keep the heuristic's order. Still a function of the shape. */
    const gemm_pin *bpin = find_pin(p->ct, p->ta, p->tb, mb, p->n, kb);
    int pinned_i = -1, order[GEMM_BUCKET_ALGOS], n_order = 0;
    for (int i = 0; i < b->found && bpin && pinned_i < 0; i++)
      if (pin_matches(bpin, &b->algos[i])) pinned_i = i;
    const bool bucket_pinned = pinned_i >= 0;
    if (bucket_pinned) order[n_order++] = pinned_i;
    for (int i = 0; i < b->found; i++)
      if (i != pinned_i) order[n_order++] = i;
    for (int j = 0; j < n_order; j++) {
      const int i = order[j];
      cublasLtMatmulHeuristicResult_t check;
      if (cublasLtMatmulAlgoCheck(rc_cuda_lt(), p->desc, p->lay_a, p->lay_b, p->lay_d, p->lay_d,
                                  &b->algos[i], &check) == CUBLAS_STATUS_SUCCESS &&
          check.state == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= ws_bytes) {
        p->algo = b->algos[i];
        if (getenv("RC_CUDA_GEMM_LOG")) {
          char source[40];
          snprintf(source, sizeof source, "bucket#%d%s", i,
                   bucket_pinned && j == 0 ? " (pinned)" : "");
          log_plan(p, compute, check.workspaceSize, source, plan_clock_ms() - t0);
        }
        return 1;
      }
    }
  }
  const gemm_pin *pin = find_pin(p->ct, p->ta, p->tb, p->m, p->n, p->k);
  bool pinned = false;
  if (heuristic_algo(p->ct, p->desc, p->lay_a, p->lay_b, p->lay_d, pin, &p->algo, &ws_needed,
                     &pinned)) {
    if (getenv("RC_CUDA_GEMM_LOG"))
      log_plan(p, compute, ws_needed,
               pinned                     ? "pinned"
               : pin                      ? "heuristic (pinned configuration not offered)"
               : mb != p->m || kb != p->k ? "heuristic (bucket refused)"
                                          : "heuristic",
               plan_clock_ms() - t0);
    return 1;
  }
  destroy_layouts(p->lay_a, p->lay_b, p->lay_d);
  CUBLAS_CHECK(cublasLtMatmulDescDestroy(p->desc));
  return 0;
}

/* The plan of key (ct, ta, tb, m, n, k, group); group: grouped_bucket's, or 0. */
static const gemm_plan *get_plan_grouped(int ct, bool ta, bool tb, int m, int n, int k, int group) {
  for (int i = 0; i < g_nplans; i++) {
    const gemm_plan *p = &g_plans[i];
    if (p->ct == ct && p->ta == (int)ta && p->tb == (int)tb && p->m == m && p->n == n &&
        p->k == k && p->group == group)
      return p;
  }
  if (g_nplans == g_capplans) {
    int cap = g_capplans ? 2 * g_capplans : 64;
    gemm_plan *np = (gemm_plan *)realloc(g_plans, (size_t)cap * sizeof *np);
    if (!np) {
      fprintf(stderr, "resumecheck: out of host memory for GEMM plans\n");
      abort();
    }
    g_plans = np;
    g_capplans = cap;
  }
  gemm_plan *p = &g_plans[g_nplans];
  p->ct = ct;
  p->ta = ta;
  p->tb = tb;
  p->m = m;
  p->n = n;
  p->k = k;
  p->group = group;
  /* fp32: pedantic first (no TF32, no emulation). The plain 32F compute type
   * with fp32 inputs is also true fp32 in cuBLASLt, so it is the fallback. */
  int ok = ct == RC_COMPUTE_FP32
               ? (plan_try(p, CUBLAS_COMPUTE_32F_PEDANTIC) || plan_try(p, CUBLAS_COMPUTE_32F))
               : plan_try(p, CUBLAS_COMPUTE_32F);
  if (!ok && ct == GEMM_CT_E4M3) {
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    fprintf(stderr,
            "resumecheck: cuBLASLt has no FP8 (e4m3) algorithm for GEMM m=%d n=%d k=%d on this "
            "GPU (compute capability %d.%d; cuBLASLt's FP8 GEMMs need 8.9 or later)\n",
            m, n, k, major, minor);
    abort();
  }
  if (!ok) {
    fprintf(stderr,
            "resumecheck: cuBLASLt has no algorithm for GEMM ct=%d ta=%d tb=%d m=%d n=%d k=%d\n",
            ct, (int)ta, (int)tb, m, n, k);
    abort();
  }
  size_t w = 0;
  p->splitk = 0; /* unknown unless cuBLASLt says */
  cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &p->splitk,
                                       sizeof p->splitk, &w);
  g_nplans++;
  return p;
}

static const gemm_plan *get_plan(int ct, bool ta, bool tb, int m, int n, int k) {
  return get_plan_grouped(ct, ta, tb, m, n, k, 0);
}

/* cublasLtMatmul of plan p in cuBLASLt's operand order (its A is our B):
 * D = alpha op(a) op(b) + beta C on the stream, with the fixed workspace.
 * RC_CUDA_GEMM_LOG=2 also times each launch — the host call, and the GPU's
 * time by events with a synchronisation (so it slows the run) — and reports
 * those over 0.5 ms: what a GEMM's first use of a kernel costs, say. */
static void plan_matmul(const gemm_plan *p, const float *alpha, const void *b, const void *a,
                        const float *beta, const void *C, void *D) {
  static int level = -1;
  if (level < 0) {
    const char *v = getenv("RC_CUDA_GEMM_LOG");
    level = v ? atoi(v) : 0;
  }
  size_t ws_bytes = 0;
  void *ws = rc_cuda_gemm_workspace(&ws_bytes);
  cudaStream_t s = rc_cuda_stream();
  cudaEvent_t ev[2];
  double t0 = 0.0;
  if (level >= 2) {
    CUDA_CHECK(cudaEventCreate(&ev[0]));
    CUDA_CHECK(cudaEventCreate(&ev[1]));
    CUDA_CHECK(cudaEventRecord(ev[0], s));
    t0 = plan_clock_ms();
  }
  CUBLAS_CHECK(cublasLtMatmul(rc_cuda_lt(), p->desc, alpha, b, p->lay_a, a, p->lay_b, beta, C,
                              p->lay_d, D, p->lay_d, &p->algo, ws, ws_bytes, s));
  if (level >= 2) {
    double host = plan_clock_ms() - t0;
    float gpu = 0.0f;
    CUDA_CHECK(cudaEventRecord(ev[1], s));
    CUDA_CHECK(cudaEventSynchronize(ev[1]));
    CUDA_CHECK(cudaEventElapsedTime(&gpu, ev[0], ev[1]));
    static double first = 0.0;
    if (first == 0.0) first = t0;
    if (host > 0.5 || gpu > 0.5)
      fprintf(stderr,
              "resumecheck: gemm launch ct=%d ta=%d tb=%d m=%d n=%d k=%d tile=%d: host %.3f ms, "
              "GPU %.3f ms (%.1f ms after the first launch)\n",
              p->ct, p->ta, p->tb, p->m, p->n, p->k,
              algo_attr(&p->algo, CUBLASLT_ALGO_CONFIG_TILE_ID), host, (double)gpu, t0 - first);
    CUDA_CHECK(cudaEventDestroy(ev[0]));
    CUDA_CHECK(cudaEventDestroy(ev[1]));
  }
}

/* ---- kernels ---- */

/* dst (canonical ld) = convert(src) for a rows x cols row-major matrix:
 * rounded to nearest even, as rc_round_bf16 / rc_round_fp16 (ops.h). */
template <typename T> __device__ __forceinline__ T convert_from_float(float x);
template <> __device__ __forceinline__ __nv_bfloat16 convert_from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half convert_from_float<__half>(float x) {
  return __float2half_rn(x);
}

template <typename T>
__global__ void convert_matrix_kernel(T *dst, int ld_dst, const float *src, int ld_src, int rows,
                                      int cols) {
  size_t total = (size_t)rows * (size_t)cols;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    size_t r = idx / (size_t)cols, c = idx % (size_t)cols;
    dst[r * (size_t)ld_dst + c] = convert_from_float<T>(src[r * (size_t)ld_src + c]);
  }
}

/* The same conversion when source and destination are both contiguous
 * (ld == cols, the common case: model widths are multiples of 8): a flat
 * loop, four elements per step from one 16-byte load. Per-element index
 * division made the strided kernel ALU-bound on the largest operands (the
 * output head's [T, V] gradient); the values written are the same. */
template <typename T> struct __align__(8) Packed4 {
  T v[4];
};
template <typename T>
__global__ void convert_flat4_kernel(Packed4<T> *dst, const float4 *src, size_t n4) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 x = src[i];
    Packed4<T> y;
    y.v[0] = convert_from_float<T>(x.x), y.v[1] = convert_from_float<T>(x.y);
    y.v[2] = convert_from_float<T>(x.z), y.v[3] = convert_from_float<T>(x.w);
    dst[i] = y;
  }
}

template <typename T>
static void convert_matrix(T *dst, int ld_dst, const float *src, int ld_src, int rows, int cols) {
  cudaStream_t s = rc_cuda_stream();
  size_t total = (size_t)rows * (size_t)cols;
  if (ld_dst == cols && ld_src == cols && total % 4 == 0 && aligned16(src) &&
      ((uintptr_t)dst & 7u) == 0) {
    convert_flat4_kernel<T><<<rc_grid_1d(total / 4, 256), 256, 0, s>>>(
        (Packed4<T> *)dst, (const float4 *)src, total / 4);
  } else {
    convert_matrix_kernel<T>
        <<<rc_grid_1d(total, 256), 256, 0, s>>>(dst, ld_dst, src, ld_src, rows, cols);
  }
  KERNEL_CHECK();
}

/* C = acc + beta*C with acc the beta = 0 result (alpha already applied by
 * cuBLASLt) or, for k == 0, alpha*0. beta == 0 never reads C; beta == 1 is a
 * plain add, the same single rounding as the `add` op. */
__global__ void gemm_epilogue_kernel(float *C, int ldc, const float *D, int ldd, int m, int n,
                                     float alpha, float beta, int zero_acc) {
  size_t total = (size_t)m * (size_t)n;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    size_t r = idx / (size_t)n, c = idx % (size_t)n;
    float acc = zero_acc ? alpha * 0.0f : D[r * (size_t)ldd + c];
    float *dst = &C[r * (size_t)ldc + c];
    if (beta == 0.0f)
      *dst = acc;
    else if (beta == 1.0f)
      *dst = acc + *dst;
    else
      *dst = acc + beta * *dst;
  }
}

/* The epilogue over contiguous C and D (ldc == ldd == n): the same
 * arithmetic element for element, without per-element index division. */
__global__ void gemm_epilogue_flat_kernel(float *C, const float *D, size_t total, float beta) {
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    float acc = D[idx];
    if (beta == 0.0f)
      C[idx] = acc;
    else if (beta == 1.0f)
      C[idx] = acc + C[idx];
    else
      C[idx] = acc + beta * C[idx];
  }
}

/* Returns a pointer cuBLASLt may read as a canonical rows x cols operand. */
static const void *prepare_operand(rc_compute ct, const float *X, int ldx, int rows, int cols,
                                   int slot) {
  int ld = canon_ld(cols);
  cudaStream_t s = rc_cuda_stream();
  if (ct == RC_COMPUTE_FP32) {
    if (ldx == ld && aligned16(X)) return X;
    float *dst = (float *)rc_cuda_scratch(slot, (size_t)rows * (size_t)ld * sizeof(float));
    CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)ld * sizeof(float), X, (size_t)ldx * sizeof(float),
                                 (size_t)cols * sizeof(float), (size_t)rows,
                                 cudaMemcpyDeviceToDevice, s));
    return dst;
  }
  void *dst = rc_cuda_scratch(slot, (size_t)rows * (size_t)ld * 2);
  if (ct == RC_COMPUTE_BF16)
    convert_matrix<__nv_bfloat16>((__nv_bfloat16 *)dst, ld, X, ldx, rows, cols);
  else
    convert_matrix<__half>((__half *)dst, ld, X, ldx, rows, cols);
  return dst;
}

/* k == 0: C = alpha*0 (+ beta*C), by the epilogue alone. */
static void gemm_zero_k(int m, int n, float alpha, float beta, float *C, int ldc) {
  size_t total = (size_t)m * (size_t)n;
  gemm_epilogue_kernel<<<rc_grid_1d(total, 256), 256, 0, rc_cuda_stream()>>>(C, ldc, NULL, 0, m, n,
                                                                             alpha, beta, 1);
  KERNEL_CHECK();
}

/* Runs plan p on canonical operands a (our A) and b (our B): cuBLASLt with
 * beta = 0 straight into C when C is canonical and beta == 0, else into the
 * scratch D and then our epilogue C = D + beta*C over the first n columns
 * (the plan's p->n may be larger: gemm_e4m3's padding).
 * One exception, the wgrad accumulation into main_grad: with alpha = 1,
 * beta = 1, a canonical C and an algorithm without split-K, cuBLASLt adds C
 * in its own epilogue, acc + C in fp32 with one rounding — the bits of the
 * beta = 0 GEMM followed by `add`, which cuda_ops checks for every wgrad
 * shape of the model (gemm_fusion_property), without the scratch round trip
 * of C. Any other alpha (one more rounding: alpha*acc) or a split-K
 * reduction (its own order) keeps the scratch and our epilogue. */
static void run_plan(const gemm_plan *p, int m, int n, float alpha, const void *a, const void *b,
                     float beta, float *C, int ldc) {
  cudaStream_t s = rc_cuda_stream();
  size_t total = (size_t)m * (size_t)n;
  int ldd = canon_ld(p->n);
  int canonical_c = p->n == n && ldc == ldd && aligned16(C);
  int accumulate = canonical_c && beta == 1.0f && alpha == 1.0f && p->splitk == 1;
  int direct = (canonical_c && beta == 0.0f) || accumulate;
  float *D = direct ? C : (float *)rc_cuda_scratch(RC_SCRATCH_GEMM_D, (size_t)m * ldd * 4);

  const float zero = 0.0f, one = 1.0f;
  plan_matmul(p, &alpha, b, a, accumulate ? &one : &zero, D, D);
  if (!direct) {
    if (ldc == n && ldd == n)
      gemm_epilogue_flat_kernel<<<rc_grid_1d(total, 256), 256, 0, s>>>(C, D, total, beta);
    else
      gemm_epilogue_kernel<<<rc_grid_1d(total, 256), 256, 0, s>>>(C, ldc, D, ldd, m, n, alpha, beta,
                                                                  0);
    KERNEL_CHECK();
  }
}

void rc_cuda_gemm(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    gemm_zero_k(m, n, alpha, beta, C, ldc);
    return;
  }
  if (ct != RC_COMPUTE_BF16 && ct != RC_COMPUTE_FP16) ct = RC_COMPUTE_FP32;
  const gemm_plan *p = get_plan(ct, trans_a, trans_b, m, n, k);

  int rows_a = trans_a ? k : m, cols_a = trans_a ? m : k;
  int rows_b = trans_b ? n : k, cols_b = trans_b ? k : n;
  const void *a = prepare_operand(ct, A, lda, rows_a, cols_a, RC_SCRATCH_GEMM_A);
  const void *b = prepare_operand(ct, B, ldb, rows_b, cols_b, RC_SCRATCH_GEMM_B);

  run_plan(p, m, n, alpha, a, b, beta, C, ldc);
}

/* A half operand (2-byte elements, row stride ldx) as cuBLASLt may read it:
 * in place when it is canonical, else copied to canonical scratch. */
static const void *canonical_half(const uint16_t *X, int ldx, int rows, int cols, int slot) {
  int ld = canon_ld(cols);
  if (ldx == ld && aligned16(X)) return X;
  void *dst = rc_cuda_scratch(slot, (size_t)rows * (size_t)ld * 2);
  CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)ld * 2, X, (size_t)ldx * 2, (size_t)cols * 2,
                               (size_t)rows, cudaMemcpyDeviceToDevice, rc_cuda_stream()));
  return dst;
}

/* gemm on operands already in ct's 16-bit form: the plan of the same key as
 * rc_cuda_gemm's and the same epilogue, on the same values, so the same bits
 * (ops.h) — only the per-call conversion is gone. */
static void gemm_half_grouped(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                              float alpha, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                              float beta, float *C, int ldc, int group) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    gemm_zero_k(m, n, alpha, beta, C, ldc);
    return;
  }
  if (ct != RC_COMPUTE_FP16) ct = RC_COMPUTE_BF16;
  const gemm_plan *p = get_plan_grouped(ct, trans_a, trans_b, m, n, k, group);
  int rows_a = trans_a ? k : m, cols_a = trans_a ? m : k;
  int rows_b = trans_b ? n : k, cols_b = trans_b ? k : n;
  const void *a = canonical_half(A, lda, rows_a, cols_a, RC_SCRATCH_GEMM_A);
  const void *b = canonical_half(B, ldb, rows_b, cols_b, RC_SCRATCH_GEMM_B);
  run_plan(p, m, n, alpha, a, b, beta, C, ldc);
}

void rc_cuda_gemm_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                       const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                       int ldc) {
  gemm_half_grouped(ct, trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, 0);
}

/* C[r, c] = R[r, c] + C[r, c] (ld both ldc): the add after a beta = 0 GEMM */
__global__ void residual_add_kernel(float *C, const float *R, int ldc, int m, int n) {
  size_t total = (size_t)m * (size_t)n;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    size_t at = idx / (size_t)n * (size_t)ldc + idx % (size_t)n;
    C[at] = R[at] + C[at];
  }
}

/* gemm_half_residual (ops.h): cuBLASLt's own epilogue, D = acc + C with C :=
 * R and D := our C, where run_plan would accumulate in place (alpha 1, beta
 * 1, canonical, no split-K): acc + R in fp32 with one rounding, the bits of
 * the beta = 0 GEMM and then `add` (cuda_ops checks it for the model's proj
 * and fc2 shapes). Otherwise the beta = 0 GEMM into C and the add. Either way
 * the [m, n] fp32 product never makes its own round trip through memory. */
void rc_cuda_gemm_half_residual(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                                const uint16_t *A, int lda, const uint16_t *B, int ldb,
                                const float *R, float *C, int ldc) {
  if (m <= 0 || n <= 0) return;
  cudaStream_t s = rc_cuda_stream();
  if (k > 0) {
    if (ct != RC_COMPUTE_FP16) ct = RC_COMPUTE_BF16;
    const gemm_plan *p = get_plan(ct, trans_a, trans_b, m, n, k);
    if (p->splitk == 1 && ldc == canon_ld(n) && aligned16(C) && aligned16(R)) {
      int rows_a = trans_a ? k : m, cols_a = trans_a ? m : k;
      int rows_b = trans_b ? n : k, cols_b = trans_b ? k : n;
      const void *a = canonical_half(A, lda, rows_a, cols_a, RC_SCRATCH_GEMM_A);
      const void *b = canonical_half(B, ldb, rows_b, cols_b, RC_SCRATCH_GEMM_B);
      const float one = 1.0f;
      plan_matmul(p, &one, b, a, &one, R, C);
      return;
    }
  }
  rc_cuda_gemm_half(ct, trans_a, trans_b, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
  residual_add_kernel<<<rc_grid_1d((size_t)m * (size_t)n, 256), 256, 0, s>>>(C, R, ldc, m, n);
  KERNEL_CHECK();
}

/* gemm_half with alpha 1, beta 0 and the output in ct's 16-bit form: a plan
 * of its own (GEMM_OUT16), cuBLASLt rounding its fp32 accumulator to nearest
 * even in the epilogue (split-K partials, if any, summed in fp32 first). A
 * C that is not canonical gets the result through scratch. */
static void gemm_to_half_grouped(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                                 const uint16_t *A, int lda, const uint16_t *B, int ldb,
                                 uint16_t *C, int ldc, int group) {
  if (m <= 0 || n <= 0) return;
  cudaStream_t s = rc_cuda_stream();
  if (k <= 0) { /* 0 encodes as 0 in both 16-bit forms */
    CUDA_CHECK(cudaMemset2DAsync(C, (size_t)ldc * 2, 0, (size_t)n * 2, (size_t)m, s));
    return;
  }
  if (ct != RC_COMPUTE_FP16) ct = RC_COMPUTE_BF16;
  const gemm_plan *p = get_plan_grouped((int)ct | GEMM_OUT16, trans_a, trans_b, m, n, k, group);
  int rows_a = trans_a ? k : m, cols_a = trans_a ? m : k;
  int rows_b = trans_b ? n : k, cols_b = trans_b ? k : n;
  const void *a = canonical_half(A, lda, rows_a, cols_a, RC_SCRATCH_GEMM_A);
  const void *b = canonical_half(B, ldb, rows_b, cols_b, RC_SCRATCH_GEMM_B);
  int ldd = canon_ld(n);
  bool direct = ldc == ldd && aligned16(C);
  void *D = direct ? (void *)C : rc_cuda_scratch(RC_SCRATCH_GEMM_D, (size_t)m * ldd * 2);
  const float one = 1.0f, zero = 0.0f;
  plan_matmul(p, &one, b, a, &zero, D, D);
  if (!direct)
    CUDA_CHECK(cudaMemcpy2DAsync(C, (size_t)ldc * 2, D, (size_t)ldd * 2, (size_t)n * 2, (size_t)m,
                                 cudaMemcpyDeviceToDevice, s));
}

void rc_cuda_gemm_to_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                          const uint16_t *A, int lda, const uint16_t *B, int ldb, uint16_t *C,
                          int ldc) {
  gemm_to_half_grouped(ct, trans_a, trans_b, m, n, k, A, lda, B, ldb, C, ldc, 0);
}

/* Operand bytes in a caller's buffer that is not 16-byte aligned, copied
 * into a scratch slot that is (the FP8 plans require 16-byte alignment). */
static const uint8_t *aligned_bytes(const uint8_t *X, size_t bytes, int slot) {
  if (aligned16(X)) return X;
  void *dst = rc_cuda_scratch(slot, bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, X, bytes, cudaMemcpyDeviceToDevice, rc_cuda_stream()));
  return (const uint8_t *)dst;
}

void rc_cuda_gemm_e4m3(int m, int n, int k, float alpha, const uint8_t *A, const uint8_t *B,
                       float beta, float *C, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    gemm_zero_k(m, n, alpha, beta, C, ldc);
    return;
  }
  if (k % 16 != 0) { /* ops.h: the FP8 tensor cores' row alignment */
    fprintf(stderr, "resumecheck: gemm_e4m3 with k=%d, not a multiple of 16 (m=%d n=%d)\n", k, m,
            n);
    abort();
  }
  /* the TN form: row-major C = A . B^T, cuBLASLt's A = our B with op T, its
   * B = our A with op N; both operands have leading dimension k = canon_ld(k) */
  int np = (n + 7) & ~7; /* see the top of the file */
  const gemm_plan *p = get_plan(GEMM_CT_E4M3, false, true, m, np, k);
  const uint8_t *a = aligned_bytes(A, (size_t)m * (size_t)k, RC_SCRATCH_GEMM_A);
  const uint8_t *b;
  if (np != n) {
    cudaStream_t s = rc_cuda_stream();
    uint8_t *pb = (uint8_t *)rc_cuda_scratch(RC_SCRATCH_GEMM_B, (size_t)np * (size_t)k);
    CUDA_CHECK(cudaMemcpyAsync(pb, B, (size_t)n * (size_t)k, cudaMemcpyDeviceToDevice, s));
    CUDA_CHECK(cudaMemsetAsync(pb + (size_t)n * (size_t)k, 0, (size_t)(np - n) * (size_t)k, s));
    b = pb;
  } else {
    b = aligned_bytes(B, (size_t)n * (size_t)k, RC_SCRATCH_GEMM_B);
  }
  run_plan(p, m, n, alpha, a, b, beta, C, ldc);
}

/* gemm_half_many (ops.h). On sm_90a code built with CUTLASS the calls with
 * work are one grouped GEMM (cuda_gemm_grouped.cu: every expert's tiles in
 * one persistent launch); an empty one needs none (m or n 0) or is written
 * here (k 0: beta 0 zeroes C). Otherwise, or where the grouped kernel does
 * not take the calls (RC_CUDA_GROUPED_GEMM=cublas, fp16, ...), one cuBLASLt
 * GEMM a call on the stream, its row dimension (m, or k when trans_a: the
 * weight gradient) bucketed as a grouped linear's (grouped_bucket) around the
 * call's rows per group. Side streams for that loop were tried (session 22:
 * four and eight lanes, each call bitwise the same) and bought nothing at
 * gpu-small: cuBLASLt's Hopper kernels here are persistent, their grid
 * min(tiles, SMs), and most expert GEMMs already cover all 132 SMs; cuBLAS
 * 13.1's cublasGemmGroupedBatchedEx is no grouped kernel for it (session 24,
 * bench/bench_grouped_gemm.cu on the H200): no fp32-output form, and the
 * 16-bit forward at half the per-expert rate. */
#define GEMM_MANY_MAX 64 /* calls the grouped kernel takes at once (linear.c's GROUP_BATCH) */
static void gemm_half_call(rc_compute ct, bool trans_a, bool trans_b, const rc_gemm_half_call *c,
                           int group) {
  if (c->C)
    gemm_half_grouped(ct, trans_a, trans_b, c->m, c->n, c->k, 1.0f, c->A, c->lda, c->B, c->ldb,
                      c->beta, c->C, c->ldc, group);
  else
    gemm_to_half_grouped(ct, trans_a, trans_b, c->m, c->n, c->k, c->A, c->lda, c->B, c->ldb,
                         c->C_half, c->ldc, group);
}

void rc_cuda_gemm_half_many(rc_compute ct, bool trans_a, bool trans_b,
                            const rc_gemm_half_call *calls, int count) {
  if (count <= 0) return;
  rc_gemm_half_call work[GEMM_MANY_MAX];
  int n_work = 0;
  bool grouped = count <= GEMM_MANY_MAX;
  for (int i = 0; i < count && grouped; i++)
    if (calls[i].m > 0 && calls[i].n > 0 && calls[i].k > 0) work[n_work++] = calls[i];
  if (grouped && n_work > 0) grouped = rc_cuda_gemm_grouped(ct, trans_a, trans_b, work, n_work);
  if (grouped) { /* the empty calls' outputs: k 0 writes beta * C (gemm_half's zero_k) */
    for (int i = 0; i < count; i++)
      if (calls[i].m > 0 && calls[i].n > 0 && calls[i].k <= 0)
        gemm_half_call(ct, trans_a, trans_b, &calls[i], 0);
    return;
  }
  long long rows = 0;
  for (int i = 0; i < count; i++) rows += trans_a ? calls[i].k : calls[i].m;
  int group = pow2_bucket((rows + count - 1) / count, 29); /* 2 * group fits an int */
  for (int i = 0; i < count; i++) gemm_half_call(ct, trans_a, trans_b, &calls[i], group);
}

#ifndef RC_HAVE_CUTLASS
bool rc_cuda_gemm_grouped(rc_compute, bool, bool, const rc_gemm_half_call *, int) {
  return false;
}
const char *rc_cuda_grouped_gemm_path(void) {
  return "expert GEMMs cuBLASLt one by one (built without CUTLASS)";
}
#endif
