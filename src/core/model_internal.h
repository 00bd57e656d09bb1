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
/* The same for detached MTP heads: the MTP modules' (rc_param_is_mtp) and
 * every other parameter's, each global. */
void rc_dist_grad_sumsq_split(rc_model *m, double *rest, double *mtp);
uint64_t rc_dist_fp_grad(rc_model *m);
uint64_t rc_dist_fp_optim(rc_model *m);
/* clip_mtp: the MTP modules' clip coefficient when the heads are detached
 * (their own clip group), else clip. */
void rc_dist_adamw(rc_model *m, float lr, float clip, float clip_mtp, float bc1, float bc2);
void rc_dist_gather_weights(rc_model *m);
void rc_dist_sum_host(rc_model *m, double *x, int n); /* every rank's x summed in rank order */

/* train_step.c: the sum of per-tensor sums of squares, in order (or, with
 * the injected nondeterministic reduction, in a clock-seeded order). */
double rc_sum_partials(const rc_model *m, const double *part, int n);

/* The model's memory plan (model_memory.c): one list of buffers, m->blocks,
 * that both counts and allocates. Building the model (model.c) appends one
 * request per buffer, in allocation order, and allocates nothing; the
 * memory check sums that list (rc_model_plan_need); the walk then allocates
 * it, in its order, and stops at the first buffer it cannot have (exit 75,
 * naming the buffer, its size and the limits in force). So the check can
 * never count other buffers than the model allocates.
 *
 * rc_plan_buffer: one buffer of `bytes` (0 asks for 1) of a kind
 * (RC_MEM_HOST: zeroed host memory; any other: the backend's alloc, zeroed);
 * dst is the address of the model's pointer field for it, which holds
 * RC_PLANNED (not NULL, never dereferenced) until the walk stores the
 * buffer there. Decisions while planning may test such a field against NULL
 * (rc_linear_is_half reads wq_half), nothing more.
 * rc_plan_table: a host table the plan itself writes into (the layers'
 * activation tables: requests point into them), allocated at once and
 * listed like the others.
 * rc_plan_alias: a pointer into a planned buffer (a shared slot, the
 * weight an fp32 linear reads as it is): after the walk *dst = *src plus
 * offset bytes, NULL when *src is NULL. Aliases are resolved in the order
 * they were made, so one may name another.
 * rc_plan_walk: allocates the requests from `first` on, then resolves the
 * aliases; RC_EXIT_RESOURCES on the first buffer that cannot be had (or
 * that RC_TEST_FAIL_ALLOC_AT names), the rest left unallocated (their
 * fields NULL), what was allocated kept for rc_model_free.
 * rc_model_release: frees one walked buffer before rc_model_free (NULL is a
 * no-op).
 * A request the plan cannot record (its list cannot grow) sets
 * m->alloc_failed; the walk refuses to start then. */
void rc_plan_buffer(rc_model *m, void *dst, rc_mem_kind kind, size_t bytes, const char *what);
void rc_plan_table(rc_model *m, void *dst, size_t count, size_t size, const char *what);
void rc_plan_alias(rc_model *m, void *dst, const void *src, size_t offset);
int rc_plan_walk(rc_model *m, int first, rc_err *err);
void rc_model_release(rc_model *m, void *ptr);
/* Why an allocation failed, for a message: "RC_TEST_FAIL_ALLOC_AT=N (a
 * test's forced failure)", or the process's and the host's limits now. */
void rc_model_describe_refusal(bool forced, char *buf, size_t cap);
extern char rc_planned_marker;
#define RC_PLANNED ((void *)&rc_planned_marker)

/* The model's buffers in order, planned into m (model.c): what rc_model_init
 * walks and what rc_model_memory_need sums. rc_model_setup fills the sizes
 * and compute types from cfg and refuses what the model cannot represent. */
int rc_model_setup(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank, rc_err *err);
void rc_model_plan(rc_model *m);
/* The distributed optimizer's buffers for `world` ranks (rank's slice),
 * appended to the plan; its sizes set in m->dist. */
void rc_model_plan_dist(rc_model *m, int world, int rank);
/* Plans those, walks them and fills the offsets: rc_model_attach_comm. */
int rc_model_alloc_dist(rc_model *m, int world, int rank, rc_err *err);
/* The need of m's plan (every request so far): the sums by kind, the
 * allocator's overhead, the host side (model_memory.c). */
void rc_model_plan_need(const rc_model *m, rc_memory_need *need);

/* The loss's normalisation (docs/design.md §3.5). The factor by which a
 * term whose denominator is d (rc_denominator, TOKENS or SEQUENCES) is
 * divided: world size / the step's global count (rc_model.step_counts; a
 * count of 0 counts as 1), because the ranks' gradients are then averaged,
 * which divides by the world size again. */
static inline double rc_loss_count_norm(const rc_model *m, int d) {
  double n = m->step_counts[d];
  return (double)m->cfg.world_size / (n > 0 ? n : 1);
}
/* What that term's backward seed carries: the factor where each microbatch
 * normalises, 1 where the step's finish does (raw sums until then). */
static inline double rc_loss_seed_norm(const rc_model *m, int d) {
  return m->hp.normalize_at_finish ? 1.0 : rc_loss_count_norm(m, d);
}
/* Whether param i is one of the MTP modules' (model.h mtp_params_begin). */
static inline bool rc_param_is_mtp(const rc_model *m, int i) {
  return i >= m->mtp_params_begin && i < m->mtp_params_end;
}

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
