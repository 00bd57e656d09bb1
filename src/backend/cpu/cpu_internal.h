/* cpu_internal.h — the CPU backend's functions, shared between its files.
 *
 * The CPU backend is split by kind of op (memory/elementwise/optimizer,
 * GEMM, layers, MoE, initialisation); cpu_ops.c assembles them into the
 * rc_ops table that rc_cpu_ops() returns. Each function has exactly the semantics of the
 * matching rc_ops member in backend/ops.h; nothing here is public API. */
#ifndef RC_BACKEND_CPU_INTERNAL_H
#define RC_BACKEND_CPU_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/ops.h"

/* cpu_scratch.c: scratch memory for one op call, freed with free(); NULL
 * when it cannot be had (or RC_TEST_FAIL_ALLOC_AT names it,
 * base/alloc_fail.h). Ops return no status, so an op whose scratch fails
 * skips its work (its outputs keep what they held) and the failure is
 * recorded for ops.h alloc_failed (rc_cpu_alloc_failed), which the model
 * asks after each microbatch: the step stops there with exit 75, and
 * nothing the op skipped is ever saved or traced. `what` names the op for
 * the message. */
void *rc_cpu_scratch(size_t bytes, const char *what);
int rc_cpu_alloc_failed(size_t *bytes, char *what, size_t cap);

/* cpu_gemm.c */
void rc_cpu_gemm(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* cpu_fp8.c */
void rc_cpu_cast_half(uint16_t *dst, const float *src, size_t n, rc_compute ct);
void rc_cpu_decode_half(float *dst, const uint16_t *src, size_t n, rc_compute ct);
void rc_cpu_gemm_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                      const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                      int ldc);
void rc_cpu_gemm_half_residual(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                               const uint16_t *A, int lda, const uint16_t *B, int ldb,
                               const float *R, float *C, int ldc);
void rc_cpu_gemm_to_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                         const uint16_t *A, int lda, const uint16_t *B, int ldb, uint16_t *C,
                         int ldc);
void rc_cpu_gemm_half_many(rc_compute ct, bool trans_a, bool trans_b,
                           const rc_gemm_half_call *calls, int count);
void rc_cpu_cast_e4m3(uint8_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols,
                      float scale, bool transpose);
void rc_cpu_gemm_e4m3(int m, int n, int k, float alpha, const uint8_t *A, const uint8_t *B,
                      float beta, float *C, int ldc);
void rc_cpu_amax_update(float *amax, const float *x, size_t n);

/* cpu_sum_order.c: the kernel switch RC_CPU_SUM_ORDER=shuffled (read once
 * per process): whether order-dependent sums take an order drawn per
 * process, and the next such order (a permutation of 0..n-1). */
bool rc_cpu_sum_order_shuffled(void);
void rc_cpu_sum_order_draw(int32_t *order, int n);

/* cpu_layers.c */
void rc_cpu_embedding_forward(float *out, const int32_t *ids, const float *table, int T, int H);
void rc_cpu_embedding_backward(float *dtable, const int32_t *ids, const float *dout, int T, int H,
                               int V);
void rc_cpu_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int H,
                            float eps, uint16_t *out_half, int ld_half, rc_compute ct);
void rc_cpu_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x,
                             const float *w, const float *rstd, int T, int H, int ld_dout,
                             uint16_t *dx_half, rc_compute ct, bool dx_accumulate);
void rc_cpu_rope_forward(float *qkv, const uint16_t *qkv_half, rc_compute half_ct, int B, int S,
                         int nh, int hd, float theta, uint16_t *heads);
void rc_cpu_rope_backward(float *dqkv, int B, int S, int nh, int hd, float theta,
                          uint16_t *dqkv_half, rc_compute ct);
void rc_cpu_attention_forward(rc_compute ct, float *out, float *lse, const float *qkv,
                              const uint16_t *heads, int B, int S, int nh, int hd,
                              uint16_t *out_half, rc_compute half_ct);
void rc_cpu_attention_backward(rc_compute ct, float *dqkv, const float *dout, const float *out,
                               const float *lse, const float *qkv, const uint16_t *heads, int B,
                               int S, int nh, int hd, const uint16_t *out_bf16, float rope_theta,
                               uint16_t *dqkv_half, rc_compute half_ct);
void rc_cpu_swiglu_forward(float *out, const float *in, const uint16_t *in_half, int T, int F,
                           uint16_t *out_half, rc_compute ct);
void rc_cpu_swiglu_backward(float *din, const float *dout, const float *in, const uint16_t *in_half,
                            int T, int F, uint16_t *din_half, uint16_t *out_half, rc_compute ct);
void rc_cpu_cross_entropy(float *losses, float *correct, float *logits, const int32_t *labels,
                          const float *dloss, int T, int V, uint16_t *dlogits_half, rc_compute ct);
void rc_cpu_dropout(float *x, size_t n, float p, uint64_t seed, uint64_t offset);

/* cpu_init.c */
void rc_cpu_init_normal(float *dst, size_t n, uint64_t first, uint64_t key, float std);

/* cpu_moe.c */
void rc_cpu_moe_route(int32_t *topk_idx, float *topk_w, float *probs, const float *logits,
                      const float *expert_bias, int T, int E, int k, rc_moe_scoring scoring);
void rc_cpu_moe_route_backward(float *dlogits, const float *dtopk_w, const float *dprobs_e,
                               const float *logits, const int32_t *topk_idx, const float *topk_w,
                               const float *probs, int T, int E, int k, rc_moe_scoring scoring);
void rc_cpu_moe_permute(int32_t *perm, int32_t *inv_perm, int32_t *offsets, const int32_t *topk_idx,
                        int T, int E, int k);
void rc_cpu_moe_gather(float *dst, const float *src, const int32_t *perm, int T, int k, int H,
                       uint16_t *dst_half, rc_compute ct);
void rc_cpu_moe_combine(float *out, const float *rows, const float *w, const int32_t *inv_perm,
                        int T, int k, int H, const float *residual);
void rc_cpu_moe_combine_backward(float *drows, float *dw, const float *dout, const float *rows,
                                 const float *w, const int32_t *inv_perm, int T, int k, int H);

#endif
