/* cuda_gemm_grouped.cu — gemm_half_many's expert GEMMs in one launch:
 * CUTLASS's Hopper grouped GEMM, the persistent TMA + wgmma kernel whose tile
 * scheduler walks every group's output tiles (the kernel PyTorch's
 * torch._grouped_mm runs on sm_90, in the tile the compiled peer gets: 128 x
 * 256 x 64, cooperative, clusters of two along M).
 *
 * Why: cuBLASLt has no grouped GEMM this toolkit can use (cuBLAS 13.1's
 * cublasGemmGroupedBatchedEx has no fp32 output and ran the 16-bit forward
 * at half the per-expert rate, session 24), and one cuBLASLt launch an expert
 * left the expert GEMMs of a gpu-small MoE step at ~440 TFLOP/s against
 * ~700 for the dense MLPs' (bench/NOTES.md sessions 22-26): each expert's
 * 2048-odd rows are a launch's ramp and tail, an unlucky load (24 rows, 4800)
 * a launch of its own. Here every expert's tiles share one grid.
 *
 * Bits: no split-K or stream-K. Each output tile is one CTA's, its k loop in
 * increasing k, so the result is a function of the call, whichever CTA takes
 * a tile. They are cuBLASLt's wherever its algorithm does not split k
 * (measured on the H200, session 27: bitwise for six of cuda_ops' seven
 * grouped cases and every gpu-small MoE digest; both sum a tile's k in
 * increasing order in wgmma's fp32 accumulator), but that is not promised:
 * ops.h lets a backend choose gemm_half_many's algorithm, within gemm_half's
 * tolerance. The epilogue is D = acc (beta 0: C is never read)
 * or D = C + acc (beta 1: alpha 1 and beta 1 are exact, so one rounding, the
 * fused-accumulation property of ops.h), a 16-bit D rounded to nearest even.
 *
 * Forms: NT with an fp32 or bf16 D (the forward's fc1 and fc2), NN fp32 (the
 * data gradients), TN fp32 with beta 0 or 1 (the weight gradients into
 * main_grad). rc_cuda_gemm_grouped returns false for anything else — fp16, a
 * beta other than 0 or 1 or differing between calls, an empty dimension, an
 * operand not 16-byte aligned, more than GROUPED_MAX calls, code other than
 * sm_90a, RC_CUDA_GROUPED_GEMM=cublas, a problem CUTLASS says it cannot
 * implement — and the caller runs its cuBLASLt loop. Built only where CMake
 * found CUTLASS (RC_HAVE_CUTLASS). */
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/version.h>

#define GROUPED_MAX 64 /* calls a launch: linear.c's GROUP_BATCH */

#ifndef GROUPED_TILE /* a build may try another tile (bench/NOTES.md session 27) */
#define GROUPED_TILE 128, 256, 64
#define GROUPED_CLUSTER 2, 1, 1
#endif
/* GROUPED_PINGPONG=1 (a variant build, bench/build_variants.sh): CUTLASS's ping-pong schedule,
 * two consumer warpgroups on two output tiles in turn (one's epilogue under the other's main
 * loop), instead of both on one tile. Either way each tile is one CTA's, k in increasing order. */
#ifndef GROUPED_PINGPONG
#define GROUPED_PINGPONG 0
#endif
#define GROUPED_STR_(...) #__VA_ARGS__
#define GROUPED_STR(...) GROUPED_STR_(__VA_ARGS__)
template <int... V> using shape_of = cute::Shape<cute::Int<V>...>;

/* One grouped GEMM type: row-major C/D, A and B in the given layouts
 * (CUTLASS's: A is M x K, B is K x N; ColumnMajor B = our [n][k] weights). */
template <class LayoutA, class LayoutB, class ElementD, class ElementC> struct grouped_gemm {
  using Tile = shape_of<GROUPED_TILE>;
  using Cluster = shape_of<GROUPED_CLUSTER>;
  using Problem = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using EpilogueSchedule =
      std::conditional_t<GROUPED_PINGPONG, cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong,
                         cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
  using MainloopSchedule =
      std::conditional_t<GROUPED_PINGPONG, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC,
      cutlass::layout::RowMajor *, 16 / sizeof(ElementD), ElementD, cutlass::layout::RowMajor *,
      16 / sizeof(ElementD), EpilogueSchedule,
      cutlass::epilogue::fusion::LinearCombination<ElementD, float>>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::bfloat16_t, LayoutA *, 8,
      cutlass::bfloat16_t, LayoutB *, 8, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Problem, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

using RowMajor = cutlass::layout::RowMajor;
using ColMajor = cutlass::layout::ColumnMajor;
using gemm_nt16 = grouped_gemm<RowMajor, ColMajor, cutlass::bfloat16_t, void>; /* fc1 forward */
using gemm_nt = grouped_gemm<RowMajor, ColMajor, float, float>;                /* fc2 forward */
using gemm_nn = grouped_gemm<RowMajor, RowMajor, float, float>;                /* dgrad */
using gemm_tn = grouped_gemm<ColMajor, RowMajor, float, float>;                /* wgrad */

/* A stride (row-major's (ld, 1, 0) or column-major's (1, ld, 0)) with its
 * one dynamic member set to ld. */
template <class I>
__device__ cute::Stride<I, cute::Int<1>, cute::Int<0>>
with_ld(cute::Stride<I, cute::Int<1>, cute::Int<0>> s, int ld) {
  cute::get<0>(s) = (I)ld;
  return s;
}
template <class I>
__device__ cute::Stride<cute::Int<1>, I, cute::Int<0>>
with_ld(cute::Stride<cute::Int<1>, I, cute::Int<0>> s, int ld) {
  cute::get<1>(s) = (I)ld;
  return s;
}

/* The calls as the kernel reads them, passed by value to grouped_args_kernel
 * (kernel parameters are stream-ordered: no host buffer to keep alive). */
typedef struct {
  int count;
  int m[GROUPED_MAX], n[GROUPED_MAX], k[GROUPED_MAX];
  int lda[GROUPED_MAX], ldb[GROUPED_MAX], ldc[GROUPED_MAX];
  const void *A[GROUPED_MAX], *B[GROUPED_MAX];
  void *D[GROUPED_MAX];
} grouped_calls;

/* The device arrays CUTLASS's grouped kernel reads: its problem shapes,
 * operand pointers and strides, one each a call. */
template <class G> struct grouped_arrays {
  cute::Shape<int, int, int> shape[GROUPED_MAX];
  const cutlass::bfloat16_t *A[GROUPED_MAX];
  const cutlass::bfloat16_t *B[GROUPED_MAX];
  void *D[GROUPED_MAX];
  typename G::StrideA sa[GROUPED_MAX];
  typename G::StrideB sb[GROUPED_MAX];
  typename G::StrideD sd[GROUPED_MAX];
};

template <class G> __global__ void grouped_args_kernel(grouped_arrays<G> *out, grouped_calls c) {
  const int i = threadIdx.x;
  if (i >= c.count) return;
  out->shape[i] = cute::make_shape(c.m[i], c.n[i], c.k[i]);
  out->A[i] = (const cutlass::bfloat16_t *)c.A[i];
  out->B[i] = (const cutlass::bfloat16_t *)c.B[i];
  out->D[i] = c.D[i];
  out->sa[i] = with_ld(typename G::StrideA{}, c.lda[i]);
  out->sb[i] = with_ld(typename G::StrideB{}, c.ldb[i]);
  out->sd[i] = with_ld(typename G::StrideD{}, c.ldc[i]);
}

/* Whether the grouped kernel runs: asked once per process. It needs a GPU
 * of compute capability 9.0 running the module's sm_90a code (CUTLASS's
 * Hopper kernels are empty in the compute_90 PTX a newer GPU would JIT). */
static bool grouped_on(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("RC_CUDA_GROUPED_GEMM");
    int dev = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    on = !(e && !strcmp(e, "cublas")) && major == 9 && minor == 0 && rc_cuda_sm90a_code();
  }
  return on == 1;
}

const char *rc_cuda_grouped_gemm_path(void) {
  static char line[96];
  if (grouped_on())
    snprintf(line, sizeof line, "expert GEMMs CUTLASS %d.%d.%d grouped (tile %s, cluster %s%s)",
             CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH, GROUPED_STR(GROUPED_TILE),
             GROUPED_STR(GROUPED_CLUSTER), GROUPED_PINGPONG ? ", ping-pong" : "");
  else
    snprintf(line, sizeof line, "expert GEMMs cuBLASLt one by one");
  return line;
}

/* The hardware CUTLASS sizes its persistent grid for: this process's GPU. */
static cutlass::KernelHardwareInfo hardware(void) {
  static cutlass::KernelHardwareInfo hw;
  if (hw.sm_count == 0) {
    CUDA_CHECK(cudaGetDevice(&hw.device_id));
    CUDA_CHECK(cudaDeviceGetAttribute(&hw.sm_count, cudaDevAttrMultiProcessorCount, hw.device_id));
  }
  return hw;
}

static bool aligned16_ptr(const void *p) {
  return ((uintptr_t)p & 15u) == 0;
}

/* Launches G over the calls (already checked): the argument arrays and
 * CUTLASS's workspace in one scratch slot, both stream-ordered. false when
 * CUTLASS says it cannot implement them (nothing was computed: the caller
 * runs its loop); a failure after that is an error, as a CUDA error is. */
template <class G, bool HAS_C>
static bool run_grouped(const grouped_calls &c, const cute::Shape<int, int, int> *host_shapes,
                        float beta) {
  using Gemm = typename G::Gemm;
  cudaStream_t s = rc_cuda_stream();
  const size_t arrays_bytes = (sizeof(grouped_arrays<G>) + 255) & ~(size_t)255;

  typename Gemm::Arguments args;
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.hw_info = hardware();
  /* the workspace's size needs only the shapes; the device arrays come once the slot is known */
  args.problem_shape = {c.count, nullptr, const_cast<cute::Shape<int, int, int> *>(host_shapes)};
  const size_t ws = Gemm::get_workspace_size(args);

  unsigned char *slot = (unsigned char *)rc_cuda_scratch(RC_SCRATCH_GROUPED, arrays_bytes + ws);
  grouped_arrays<G> *arr = (grouped_arrays<G> *)slot;
  grouped_args_kernel<G><<<1, GROUPED_MAX, 0, s>>>(arr, c);
  KERNEL_CHECK();

  args.problem_shape = {c.count, arr->shape, const_cast<cute::Shape<int, int, int> *>(host_shapes)};
  args.mainloop.ptr_A = arr->A;
  args.mainloop.dA = arr->sa;
  args.mainloop.ptr_B = arr->B;
  args.mainloop.dB = arr->sb;
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = beta;
  args.epilogue.thread.alpha_ptr = nullptr;
  args.epilogue.thread.beta_ptr = nullptr;
  args.epilogue.thread.alpha_ptr_array = nullptr;
  args.epilogue.thread.beta_ptr_array = nullptr;
  args.epilogue.thread.dAlpha = {cute::_0{}, cute::_0{}, 0};
  args.epilogue.thread.dBeta = {cute::_0{}, cute::_0{}, 0};
  using ElementD = typename Gemm::ElementD;
  if constexpr (HAS_C) { /* C is D: read only when beta != 0 */
    args.epilogue.ptr_C = (const typename Gemm::ElementC **)arr->D;
    args.epilogue.dC = arr->sd;
  } else {
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = nullptr;
  }
  args.epilogue.ptr_D = (ElementD **)arr->D;
  args.epilogue.dD = arr->sd;

  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return false;
  cutlass::Status st = gemm.initialize(args, slot + arrays_bytes, s);
  if (st == cutlass::Status::kSuccess) st = gemm.run(s);
  if (st != cutlass::Status::kSuccess) {
    fprintf(stderr, "resumecheck: CUTLASS grouped GEMM failed: %s (%d calls)\n",
            cutlassGetStatusString(st), c.count);
    abort();
  }
  KERNEL_CHECK();
  return true;
}

bool rc_cuda_gemm_grouped(rc_compute ct, bool trans_a, bool trans_b, const rc_gemm_half_call *calls,
                          int count) {
  if (ct != RC_COMPUTE_BF16 || count < 1 || count > GROUPED_MAX) return false;
  const bool half_out = calls[0].C == NULL;
  const float beta = calls[0].beta;
  /* the forms the four instantiations cover */
  if (half_out && !(!trans_a && trans_b)) return false;
  if (trans_a && trans_b) return false;
  if (!half_out && beta != 0.0f && beta != 1.0f) return false;
  grouped_calls c;
  memset(&c, 0, sizeof c);
  c.count = count;
  cute::Shape<int, int, int> host_shapes[GROUPED_MAX];
  for (int i = 0; i < count; i++) {
    const rc_gemm_half_call *q = &calls[i];
    if ((q->C == NULL) != half_out || (!half_out && q->beta != beta)) return false;
    if (q->m <= 0 || q->n <= 0 || q->k <= 0) return false;
    const void *D = half_out ? (const void *)q->C_half : (const void *)q->C;
    if (!aligned16_ptr(q->A) || !aligned16_ptr(q->B) || !aligned16_ptr(D)) return false;
    /* TMA: every stride a multiple of 16 bytes, every row inside its ld */
    if (q->lda % 8 || q->ldb % 8 || (half_out ? q->ldc % 8 : q->ldc % 4)) return false;
    if (q->lda < (trans_a ? q->m : q->k) || q->ldb < (trans_b ? q->k : q->n) || q->ldc < q->n)
      return false;
    c.m[i] = q->m, c.n[i] = q->n, c.k[i] = q->k;
    c.lda[i] = q->lda, c.ldb[i] = q->ldb, c.ldc[i] = q->ldc;
    c.A[i] = q->A, c.B[i] = q->B, c.D[i] = (void *)D;
    host_shapes[i] = cute::make_shape(q->m, q->n, q->k);
  }
  if (!grouped_on()) return false;
  if (half_out) return run_grouped<gemm_nt16, false>(c, host_shapes, 0.0f);
  if (!trans_a && trans_b) return run_grouped<gemm_nt, true>(c, host_shapes, beta);
  if (!trans_a) return run_grouped<gemm_nn, true>(c, host_shapes, beta);
  return run_grouped<gemm_tn, true>(c, host_shapes, beta);
}
