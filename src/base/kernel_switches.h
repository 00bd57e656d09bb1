/* kernel_switches.h — environment switches that select another kernel or
 * algorithm and so change the bits of a run (docs/cuda-backend.md).
 *
 * RC_CUDA_ATTENTION=simple picks the one-row-per-thread attention kernels
 * (kernels/cuda_attention.cu), RC_CUDA_ATTENTION=mma the mma.sync BF16
 * kernels where Hopper's wgmma ones would run (kernels/cuda_attention_wgmma.cu);
 * RC_CUDA_GEMM_PINS=0 the cuBLASLt heuristic's first algorithm for the keys
 * kernels/cuda_gemm.cu pins; RC_CUDA_GROUPED_GEMM=cublas the expert GEMMs
 * one cuBLASLt call an expert where the CUTLASS grouped kernel would run
 * (kernels/cuda_gemm_grouped.cu). RC_CPU_SUM_ORDER=shuffled makes a CPU leg
 * reorder the backward's sums over tokens (the embedding backward, the
 * weight-gradient GEMMs) per call (src/backend/cpu/cpu_sum_order.c): not
 * deterministic on purpose, the test bench of `run --noise calibrated`
 * (docs/design.md §7.2); RC_CUDA_SUM_ORDER=atomic is the GPU's: the
 * embedding backward by atomicAdd, in the order the blocks run
 * (kernels/cuda_embedding.cu). (RC_CUDA_NORM=regs, the RMSNorm kernels holding
 * rows in registers, became their default path in session 26 and is gone;
 * RC_CUDA_ATTENTION=pipelined and =pipelined-dq, RC_CUDA_EMBEDDING=vec and
 * RC_CUDA_GEMM_SMALL=1 lost on the H200 in session 26 and were removed in
 * session 27.) Logging switches
 * (RC_CUDA_GEMM_LOG) and ones shown to change no bit (RC_INIT_THREADS, tests/core_init_threads.sh;
 * RC_KEEP_SWIGLU_OUTPUT, tests/core_swiglu_recompute.sh; RC_MODEL_PARAMS_FROM_OPTIMIZER,
 * tests/core_model_params_copy.sh) are not listed. A leg records the ones set
 * in its args.json and says so on stderr (src/leg/leg.c); `run` records them in report.json and its
 * text report (its legs inherit its environment). One list, read by both. */
#ifndef RC_BASE_KERNEL_SWITCHES_H
#define RC_BASE_KERNEL_SWITCHES_H

#include <stddef.h>

static const char *const RC_KERNEL_SWITCHES[] = {"RC_CUDA_ATTENTION", "RC_CUDA_GEMM_PINS",
                                                 "RC_CUDA_GROUPED_GEMM", "RC_CPU_SUM_ORDER",
                                                 "RC_CUDA_SUM_ORDER"};
#define RC_N_KERNEL_SWITCHES (sizeof RC_KERNEL_SWITCHES / sizeof RC_KERNEL_SWITCHES[0])
/* The backend that reads each switch, in the list's order: a leg on the
 * other one records it and says it does not read it. */
static const char *const RC_KERNEL_SWITCH_BACKENDS[] = {"cuda", "cuda", "cuda", "cpu", "cuda"};

#endif
