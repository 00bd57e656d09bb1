/* model_internal.h — what the model's files share: the activation buffers,
 * the distributed optimizer's steps and the model's allocator. */
#ifndef RC_CORE_MODEL_INTERNAL_H
#define RC_CORE_MODEL_INTERNAL_H

#include "core/model.h"

struct rc_layer_act {
  const float *x_in; /* [T,H] the layer's input (owned by the previous producer) */
  float *ln1, *ln1_rstd, *ln1_r;
  float *qkv; /* [T,3H] after RoPE; with heads, the GEMM's output (shared) */
  /* BF16 attention: q, k, v after RoPE as the attention's bf16 operands,
   * [3][B][nh][S][hd] (ops.h rope_forward), what its backward reads; NULL
   * for FP32 attention, which keeps qkv */
  uint16_t *heads;
  /* a half qkv's output under BF16 attention: [T,3H] in the compute type
   * (gemm_to_half), rounded once before RoPE as Megatron-LM's bf16 QKV
   * projection's is; RoPE reads it into heads (shared, beside qkv) */
  uint16_t *qkv_out_h;
  float *attn, *attn_r, *lse;
  float *proj; /* [T,H] after dropout */
  float *xm;   /* [T,H] residual after attention */
  float *ln2, *ln2_rstd, *ln2_r;
  float *fc1, *sw_r; /* dense [T,2F],[T,F]; MoE [T*k,2F],[T*k,F] */
  /* a half fc1's output in the compute type (gemm_to_half), what SwiGLU
   * reads forward and backward; fc1 is then NULL */
  uint16_t *fc1_out_h;
  float *mlp_out; /* [T,H] after dropout */
  float *y;       /* [T,H] output */
  /* MoE */
  float *router_logits, *probs, *topk_w, *xs, *e_out, *aux_grad;
  int32_t *topk_idx, *perm, *inv_perm, *offsets;
  int *group_rows; /* host [E] */
  /* what the qkv, proj and fc1 GEMMs were given (forward and wgrad): the
   * normalised/attention output itself, or its rounded copy (*_r, allocated
   * only for linears whose GEMMs do not round: rc_linear_rounds_inputs) */
  const float *qkv_in, *proj_in, *fc1_in;
  /* the inputs the half linears saved in the compute type (linear.c), NULL
   * for fp32 and fp8 linears: qkv and proj [T,H], fc1 [rows,H], fc2 [rows,F] */
  uint16_t *qkv_h, *proj_h, *fc1_h, *fc2_h;
  int call_qkv, call_proj, call_fc1, call_fc2, call_router;
  uint64_t drop_offset[2];
};

struct rc_mtp_act {
  float *emb, *en, *en_rstd, *hn, *hn_rstd, *cat_r, *x;
  float *hk, *hk_rstd, *hk_r; /* final_norm_k output, rounded copy for the head (or NULL) */
  const float *head_in;       /* hk or hk_r: what the head's GEMMs were given */
  uint16_t *eh_h, *head_h;    /* what the half eh_proj [T,2H] and head [T,H] saved, or NULL */
  int call_eh;
};

/* model_layer.c */
void rc_layer_forward(rc_model *m, rc_layer *L, struct rc_layer_act *a, const float *x);
/* The gradient at the layer's input from dy, the one at its output, in
 * place: dy holds the result. */
/* Whether a half fc2's SwiGLU output is recomputed in the backward (model.h
 * sw_half): unless RC_KEEP_SWIGLU_OUTPUT=1. model.c allocates by it,
 * model_memory.c (which defines it) counts by it. */
bool rc_swiglu_recompute_on(void);
/* dy_half (may be NULL): dy's 16-bit encoding, valid when
 * rc_layer_takes_dy_half (fc2 reads it instead of casting dy); dx_half (may
 * be NULL): where the input's gradient (dy, on return) is also written in 16
 * bits, for the half linear below. */
void rc_layer_backward(rc_model *m, rc_layer *L, struct rc_layer_act *a, float *dy,
                       const uint16_t *dy_half, uint16_t *dx_half);
/* Whether layer L's backward reads a dy_half: its fc2 half, taking dy as it
 * is (no dropout, not MoE). */
bool rc_layer_takes_dy_half(const rc_model *m, const rc_layer *L);

/* dist_optimizer.c: the distributed optimizer's steps (m->comm set). */
/* Param i's overlap with the owned slice, as element offsets [lo, hi)
 * within the parameter; false if none. */
bool rc_dist_segment(const rc_model *m, int i, size_t *lo, size_t *hi);
/* Element lo of param i inside a [shard]-sized buffer of the owned slice. */
float *rc_dist_shard_ptr(const rc_model *m, float *shard_buf, int i, size_t lo);
void rc_dist_reduce_grads(rc_model *m);
bool rc_dist_overflow(rc_model *m);
double rc_dist_grad_sumsq(rc_model *m);
uint64_t rc_dist_fp_grad(rc_model *m);
uint64_t rc_dist_fp_optim(rc_model *m);
void rc_dist_adamw(rc_model *m, float lr, float clip, float bc1, float bc2);
void rc_dist_gather_weights(rc_model *m);
void rc_dist_sum_host(rc_model *m, double *x, int n); /* every rank's x summed in rank order */

/* train_step.c: the sum of per-tensor sums of squares, in order (or, with
 * the injected nondeterministic reduction, in a clock-seeded order). */
double rc_sum_partials(const rc_model *m, const double *part, int n);

/* The model's one allocator (model.c). Every buffer of the model is made
 * here and recorded in m->blocks with its size, kind and name, so that
 * rc_model_free frees them all in one loop and a test can hold the record
 * against rc_model_memory_need.
 *
 * rc_model_alloc: zeroed backend memory of n floats (at least one).
 * rc_model_alloc_bytes: zeroed backend memory of `bytes` (int32 buffers).
 * rc_model_host_alloc: zeroed host memory of count * size bytes (at least
 * one); NULL on failure, which also sets m->alloc_failed.
 * rc_model_release: frees one recorded buffer before rc_model_free (NULL is
 * a no-op). */
float *rc_model_alloc(rc_model *m, rc_mem_kind kind, size_t n, const char *what);
void *rc_model_alloc_bytes(rc_model *m, rc_mem_kind kind, size_t bytes, const char *what);
void *rc_model_host_alloc(rc_model *m, size_t count, size_t size, const char *what);
void rc_model_release(rc_model *m, void *ptr);

/* fp8: a GEMM dimension padded with zeros to the multiple of 16 bytes that
 * e4m3 GEMMs take (ops.h gemm_e4m3), and the size of each of the model's two
 * cast buffers (model_memory.c): the widest fp8 linear's padded width times
 * T padded, which holds any operand cast for one call. */
static inline int rc_fp8_pad(int x) {
  return (x + 15) & ~15;
}
size_t rc_fp8_scratch_bytes(const rc_config *c);
void rc_dist_max_host(rc_model *m, float *x, int n); /* every rank's x, elementwise max */

#endif
