/* cuda_ops.cu — rc_cuda_backend_ops(): the CUDA backend's rc_ops table
 * (handed to the program through the module entry, cuda_module.cu).
 *
 * Every member is a CUDA implementation from the files of this directory;
 * they all run on the context's single stream (cuda_memory.cu), so the ops
 * execute in call order and the ones returning a host value synchronise.
 * The table is handed out only when a GPU this binary can run on is present;
 * otherwise the caller gets NULL and a reason.
 *
 * Designated initializers (C++20, CMakeLists.txt): a designator out of the
 * header's order is a compile error, so a reorder of ops.h cannot silently
 * swap two members of the same signature (sum/sumsq, rope_forward/backward). */
#include "cuda_common.cuh"

static const rc_ops cuda_ops = {
    .name = "cuda",
    .alloc = rc_cuda_alloc,
    .alloc_failed = rc_cuda_alloc_failed,
    .free = rc_cuda_free,
    .to_device = rc_cuda_to_device,
    .to_host = rc_cuda_to_host,
    .copy = rc_cuda_copy,
    .zero = rc_cuda_zero,
    .zero_many = rc_cuda_zero_many,
    .sync = rc_cuda_sync,
    .timer_mark = rc_cuda_timer_mark,
    .timer_seconds = rc_cuda_timer_seconds,
    .host_alloc = rc_cuda_host_alloc,
    .host_free = rc_cuda_host_free,
    .gemm = rc_cuda_gemm,
    .cast_half = rc_cuda_cast_half,
    .gemm_half = rc_cuda_gemm_half,
    .gemm_half_residual = rc_cuda_gemm_half_residual,
    .gemm_to_half = rc_cuda_gemm_to_half,
    .gemm_half_many = rc_cuda_gemm_half_many,
    .cast_e4m3 = rc_cuda_cast_e4m3,
    .gemm_e4m3 = rc_cuda_gemm_e4m3,
    .amax_update = rc_cuda_amax_update,
    .round_to = rc_cuda_round_to,
    .amax = rc_cuda_amax,
    .add = rc_cuda_add,
    .scale = rc_cuda_scale,
    .copy2d = rc_cuda_copy2d,
    .sum = rc_cuda_sum,
    .sumsq = rc_cuda_sumsq,
    .count_nonfinite = rc_cuda_count_nonfinite,
    .fingerprint = rc_cuda_fingerprint,
    .sumsq_many = rc_cuda_sumsq_many,
    .fingerprint_many = rc_cuda_fingerprint_many,
    .embedding_forward = rc_cuda_embedding_forward,
    .embedding_backward = rc_cuda_embedding_backward,
    .rmsnorm_forward = rc_cuda_rmsnorm_forward,
    .rmsnorm_backward = rc_cuda_rmsnorm_backward,
    .rope_forward = rc_cuda_rope_forward,
    .rope_backward = rc_cuda_rope_backward,
    .attention_forward = rc_cuda_attention_forward,
    .attention_backward = rc_cuda_attention_backward,
    .swiglu_forward = rc_cuda_swiglu_forward,
    .swiglu_backward = rc_cuda_swiglu_backward,
    .cross_entropy = rc_cuda_cross_entropy,
    .dropout = rc_cuda_dropout,
    .init_normal = rc_cuda_init_normal,
    .moe_route = rc_cuda_moe_route,
    .moe_route_backward = rc_cuda_moe_route_backward,
    .moe_permute = rc_cuda_moe_permute,
    .moe_gather = rc_cuda_moe_gather,
    .moe_combine = rc_cuda_moe_combine,
    .moe_combine_backward = rc_cuda_moe_combine_backward,
    .adamw = rc_cuda_adamw,
    .adamw_many = rc_cuda_adamw_many,
};

const rc_ops *rc_cuda_backend_ops(const char **why) {
  if (!rc_cuda_device_usable(why)) return NULL;
  return &cuda_ops;
}
