/* model_layer.c — one pre-norm transformer layer, forward and backward:
 * RMSNorm -> QKV -> RoPE -> causal attention -> out proj -> dropout ->
 * residual; RMSNorm -> SwiGLU MLP or mixture of experts -> dropout ->
 * residual. Used for the decoder layers and for the MTP block's TRM.
 *
 * Inputs of every GEMM are rounded to the compute type (that is how bf16/fp16
 * are emulated, identically on both backends): by the GEMM itself (ops.h), by
 * an fp8 linear's cast to e4m3, or, for the fp32 router of a bf16/fp16 model,
 * into a rounded copy first (rc_linear_round_input). The weight-gradient
 * GEMMs in backward see what the forward GEMMs saw. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/linear.h"
#include "core/model_internal.h"

static void dropout_maybe(rc_model *m, float *x, size_t n, uint64_t *offset_out, bool draw) {
  if (m->cfg.dropout <= 0) return;
  if (draw) {
    *offset_out = m->rng_offset;
    m->rng_offset += (n + 3) / 4; /* one Philox block per 4 elements */
    if (m->events.out)
      fprintf(m->events.out, "step=%d mb=%d kind=dropout seed=%016llx offset=%llu n=%zu\n",
              m->events.step, m->events.microbatch, (unsigned long long)m->rng_seed,
              (unsigned long long)*offset_out, n);
  }
  m->ops->dropout(x, n, (float)m->cfg.dropout, m->rng_seed, *offset_out);
}

/* fc1 on x (or its saved half input): a half fc1's output in 16 bits
 * (a->fc1_out_h), anything else's in fp32 (a->fc1). */
static int fc1_forward(rc_model *m, rc_layer *L, struct rc_layer_act *a, const float *x, int rows,
                       const int *group_rows) {
  if (a->fc1_out_h)
    return rc_linear_forward_to_half(m, L->fc1, x, a->fc1_h, a->fc1_out_h, rows, group_rows);
  return rc_linear_forward(m, L->fc1, x, a->fc1_h, a->fc1, rows, group_rows);
}

/* Returns whether the combine wrote y = xm + the layer's output (no dropout). */
static bool moe_forward(rc_model *m, rc_layer *L, struct rc_layer_act *a) {
  const rc_ops *o = m->ops;
  int T = m->T, H = m->H, E = m->E, K = m->K, F = m->F;
  /* router in fp32 on the unrounded normalised input */
  a->call_router = rc_linear_forward(m, L->router, a->ln2, NULL, a->router_logits, T, NULL);
  o->moe_route(a->topk_idx, a->topk_w, a->probs, a->router_logits,
               m->cfg.moe_scoring == RC_SCORE_SIGMOID ? L->expert_bias : NULL, T, E, K,
               (rc_moe_scoring)m->cfg.moe_scoring);
  o->moe_permute(a->perm, a->inv_perm, a->offsets, a->topk_idx, T, E, K);
  int32_t offsets[1025];
  o->to_host(offsets, a->offsets, sizeof(int32_t) * (size_t)(E + 1));
  for (int e = 0; e < E; e++) {
    a->group_rows[e] = offsets[e + 1] - offsets[e];
    L->token_counts[e] += a->group_rows[e];
  }
  /* a half fc1's input gathered straight into its 16-bit form (a->xs NULL) */
  o->moe_gather(a->xs, a->fc1_in, a->perm, T, K, H, a->xs ? NULL : a->fc1_h, m->ct);
  a->call_fc1 = fc1_forward(m, L, a, a->xs, T * K, a->group_rows);
  /* a half fc2's saved input straight from SwiGLU (no fp32 copy, no cast) */
  o->swiglu_forward(a->fc2_h ? NULL : a->sw_r, a->fc1, a->fc1_out_h, T * K, F, a->fc2_h, m->ct);
  if (!a->fc2_h) rc_linear_round_input(m, L->fc2, a->sw_r, a->sw_r, (size_t)T * K * F);
  a->call_fc2 = rc_linear_forward(m, L->fc2, a->fc2_h ? NULL : a->sw_r, a->fc2_h, a->e_out, T * K,
                                  a->group_rows);
  /* without dropout, y = xm + the experts' sum in the combine (the add's bits) */
  const bool fused = m->cfg.dropout <= 0;
  o->moe_combine(fused ? a->y : a->mlp_out, a->e_out, a->topk_w, a->inv_perm, T, K, H,
                 fused ? a->xm : NULL);
  /* load-balancing loss: J += coeff * E * sum_e f_e * mean_t probs[t,e] / M,
   * so d J / d probs[t,e] = coeff * E * f_e / (T * M), f_e = tokens_e / (T*k) */
  float aux[1024];
  if (m->cfg.moe_aux_loss_coeff > 0 && m->track_aux_loss) { /* the value (model.h) */
    float *probs = malloc(sizeof(float) * (size_t)T * E);
    if (!probs) { /* the step's failure: the leg stops on it (model.h dist_rc) */
      if (!m->dist_rc)
        m->dist_rc = rc_fail(&m->dist_err, RC_EXIT_RESOURCES,
                             "cannot allocate %zu bytes of host memory for the load-balancing "
                             "loss's value",
                             sizeof(float) * (size_t)T * E);
      return fused;
    }
    o->to_host(probs, a->probs, sizeof(float) * (size_t)T * E);
    double v = 0;
    for (int e = 0; e < E; e++) {
      double pe = 0;
      for (int t = 0; t < T; t++) pe += probs[(size_t)t * E + e];
      v += (a->group_rows[e] / ((double)T * K)) * (pe / T);
    }
    m->aux_loss += m->cfg.moe_aux_loss_coeff * E * v;
    free(probs);
  }
  /* with a global denominator (docs/design.md §3.5) the loss is
   * coeff * E * sum_e f_e * sum_t probs[t,e] over the step's valid tokens'
   * count (moe_aux_denominator), not the microbatch's mean over M */
  double scale =
      m->cfg.loss_type == RC_LOSS_MICROBATCH_MEAN
          ? m->cfg.moe_aux_loss_coeff * E / ((double)T * m->cfg.microbatches) * m->loss_scale
          : m->cfg.moe_aux_loss_coeff * E * rc_loss_seed_norm(m, m->hp.moe_aux_denominator) *
                m->loss_scale;
  for (int e = 0; e < E; e++) aux[e] = (float)(scale * a->group_rows[e] / ((double)T * K));
  o->to_device(a->aux_grad, aux, sizeof(float) * (size_t)E);
  return fused;
}

void rc_layer_forward(rc_model *m, rc_layer *L, struct rc_layer_act *a, const float *x) {
  const rc_ops *o = m->ops;
  int T = m->T, H = m->H, F = m->F;
  size_t TH = (size_t)T * H;
  a->x_in = x;
  float eps = (float)m->cfg.norm_eps;
  /* a half qkv's (and dense fc1's) saved input comes straight from the norm */
  o->rmsnorm_forward(a->qkv_h ? NULL : a->ln1, a->ln1_rstd, x, L->ln1->weight, T, H, eps, a->qkv_h,
                     H, m->ct);
  a->qkv_in = a->qkv_h ? NULL : rc_linear_round_input(m, L->qkv, a->ln1_r, a->ln1, TH);
  /* with heads, RoPE writes the attention's bf16 operands and qkv is spent;
   * a half qkv hands it its output in 16 bits (model_internal.h qkv_out_h) */
  if (a->qkv_out_h)
    a->call_qkv = rc_linear_forward_to_half(m, L->qkv, a->qkv_in, a->qkv_h, a->qkv_out_h, T, NULL);
  else
    a->call_qkv = rc_linear_forward(m, L->qkv, a->qkv_in, a->qkv_h, a->qkv, T, NULL);
  o->rope_forward(a->qkv, a->qkv_out_h, m->ct, m->B, m->S, m->nh, m->hd, (float)m->cfg.rope_theta,
                  a->heads);
  /* a half proj's saved input comes straight from the attention (alone,
   * when it is bf16: a->attn NULL) */
  o->attention_forward(m->attn_ct, a->attn, a->lse, a->heads ? NULL : a->qkv, a->heads, m->B, m->S,
                       m->nh, m->hd, a->proj_h, m->ct);
  a->proj_in = rc_linear_round_input(m, L->proj, a->attn_r, a->attn, TH);
  const float *proj_x = a->proj_h ? NULL : a->proj_in;
  if (m->cfg.dropout > 0) {
    a->call_proj = rc_linear_forward(m, L->proj, proj_x, a->proj_h, a->proj, T, NULL);
    dropout_maybe(m, a->proj, TH, &a->drop_offset[0], true);
    o->add(a->xm, x, a->proj, TH);
  } else { /* the residual add in the GEMM's epilogue: the same bits */
    a->call_proj = rc_linear_forward_residual(m, L->proj, proj_x, a->proj_h, x, a->xm, T);
  }
  if (L->moe) { /* ln2 feeds the fp32 router and the gather as it is */
    o->rmsnorm_forward(a->ln2, a->ln2_rstd, a->xm, L->ln2->weight, T, H, eps, NULL, H, m->ct);
    a->fc1_in = rc_linear_round_input(m, L->fc1, a->ln2_r, a->ln2, TH);
    if (moe_forward(m, L, a)) return; /* y written by the combine */
  } else {
    o->rmsnorm_forward(a->fc1_h ? NULL : a->ln2, a->ln2_rstd, a->xm, L->ln2->weight, T, H, eps,
                       a->fc1_h, H, m->ct);
    a->fc1_in = a->fc1_h ? NULL : rc_linear_round_input(m, L->fc1, a->ln2_r, a->ln2, TH);
    a->call_fc1 = fc1_forward(m, L, a, a->fc1_in, T, NULL);
    o->swiglu_forward(a->fc2_h ? NULL : a->sw_r, a->fc1, a->fc1_out_h, T, F, a->fc2_h, m->ct);
    if (!a->fc2_h) rc_linear_round_input(m, L->fc2, a->sw_r, a->sw_r, (size_t)T * F);
    if (m->cfg.dropout <= 0) { /* y = xm + fc2's output, added in its GEMM's epilogue */
      a->call_fc2 = rc_linear_forward_residual(m, L->fc2, a->fc2_h ? NULL : a->sw_r, a->fc2_h,
                                               a->xm, a->y, T);
      return;
    }
    a->call_fc2 =
        rc_linear_forward(m, L->fc2, a->fc2_h ? NULL : a->sw_r, a->fc2_h, a->mlp_out, T, NULL);
  }
  dropout_maybe(m, a->mlp_out, TH, &a->drop_offset[1], true);
  o->add(a->y, a->xm, a->mlp_out, TH);
}

/* Where SwiGLU's backward writes fc1's output gradient for a half fc1: the
 * model's dy_half, in the compute type, which fc1's backward reads as it is;
 * NULL for the other linears (fp32 d_fc1, rounded or cast by the linear). */
static uint16_t *fc1_grad_half(rc_model *m, const rc_linear *fc1) {
  return rc_linear_is_half(m, fc1) ? m->dy_half : NULL;
}

/* fc2's backward around SwiGLU's: d_sw (writes) = d_out W2, then SwiGLU's
 * backward into d_fc1 (or the half fc1's dy_half), then fc2's wgrad. With the
 * SwiGLU output recomputed (model.h sw_half) the wgrad waits until SwiGLU's
 * backward has written fc2's saved input again; the results are the bits a
 * kept output gives (the same values, the same GEMMs). */
static void fc2_swiglu_backward(rc_model *m, rc_layer *L, struct rc_layer_act *a,
                                const float *d_out, const uint16_t *d_out_h, float *d_sw,
                                float *d_fc1, uint16_t *d_fc1_h, int rows, const int *group_rows) {
  const rc_ops *o = m->ops;
  int F = m->F;
  bool recompute = m->sw_half && a->fc2_h == m->sw_half;
  if (!recompute) {
    rc_linear_backward(m, L->fc2, a->call_fc2, d_out, d_out_h, a->sw_r, d_sw, rows, group_rows);
    o->swiglu_backward(d_fc1_h ? NULL : d_fc1, d_sw, a->fc1, a->fc1_out_h, rows, F, d_fc1_h, NULL,
                       m->ct);
    return;
  }
  rc_linear_backward_dgrad(m, L->fc2, a->call_fc2, d_out, d_out_h, m->fc2_dy_half,
                           m->fc2_dy_half_elems, a->sw_r, d_sw, rows, group_rows);
  o->swiglu_backward(d_fc1_h ? NULL : d_fc1, d_sw, a->fc1, a->fc1_out_h, rows, F, d_fc1_h,
                     m->sw_half, m->ct);
  rc_linear_backward_wgrad(m, L->fc2);
}

/* d_ln2 (writes) from d_mlp (the gradient at the MLP output, rounded). */
static void moe_backward(rc_model *m, rc_layer *L, struct rc_layer_act *a, const float *d_mlp,
                         float *d_ln2) {
  const rc_ops *o = m->ops;
  int T = m->T, H = m->H, E = m->E, K = m->K, F = m->F;
  size_t TKH = (size_t)T * K * H;
  float *d_eout = m->d_big, *d_topk_w = m->d_topk_w;
  o->moe_combine_backward(d_eout, d_topk_w, d_mlp, a->e_out, a->topk_w, a->inv_perm, T, K, H);
  rc_linear_round_input(m, L->fc2, d_eout, d_eout, TKH);
  float *d_sw = m->d_big2, *d_fc1 = m->d_big;
  uint16_t *d_fc1_h = fc1_grad_half(m, L->fc1);
  fc2_swiglu_backward(m, L, a, d_eout, NULL, d_sw, d_fc1, d_fc1_h, T * K, a->group_rows);
  if (!d_fc1_h) rc_linear_round_input(m, L->fc1, d_fc1, d_fc1, (size_t)T * K * 2 * F);
  float *d_xs = m->d_big2;
  rc_linear_backward(m, L->fc1, a->call_fc1, d_fc1_h ? NULL : d_fc1, d_fc1_h, a->xs, d_xs, T * K,
                     a->group_rows);
  o->moe_combine(d_ln2, d_xs, NULL, a->inv_perm, T, K, H, NULL);
  /* router: through the routing weights and the load-balancing loss */
  float *d_logits = m->d_big;
  o->moe_route_backward(d_logits, d_topk_w, a->aux_grad, a->router_logits, a->topk_idx, a->topk_w,
                        a->probs, T, E, K, (rc_moe_scoring)m->cfg.moe_scoring);
  float *d_ln2_router = m->d_big2;
  rc_linear_backward(m, L->router, a->call_router, d_logits, NULL, a->ln2, d_ln2_router, T, NULL);
  o->add(d_ln2, d_ln2, d_ln2_router, (size_t)T * H);
}

bool rc_layer_takes_dy_half(const rc_model *m, const rc_layer *L) {
  return m->resid_half && m->cfg.dropout <= 0 && !L->moe && rc_linear_is_half(m, L->fc2);
}

void rc_layer_backward(rc_model *m, rc_layer *L, struct rc_layer_act *a, float *dy,
                       const uint16_t *dy_half, uint16_t *dx_half) {
  const rc_ops *o = m->ops;
  int T = m->T, H = m->H, F = m->F;
  size_t TH = (size_t)T * H;
  bool dropout = m->cfg.dropout > 0;
  float *d_ln = m->d_ln;
  /* y = xm + dropout(mlp): d xm = dy (+ the MLP path below), accumulated
   * in dy itself (the caller's, consumed). The branch's gradient is dy as
   * it is unless something changes it in place: dropout, or MoE's rounding
   * (the routing weights' gradient, a dot product, sees it rounded too); a
   * half fc2 casts it for its GEMMs and leaves it. */
  float *dxm = dy, *d_branch = dy;
  bool branch_copy = dropout || L->moe || !rc_linear_rounds_inputs(m, L->fc2);
  if (L->moe && !dropout) { /* the copy and MoE's rounding in one pass: the same values */
    d_branch = m->d_tmp;
    o->round_to(d_branch, dy, TH, m->ct);
  } else {
    if (branch_copy) {
      d_branch = m->d_tmp;
      o->copy(d_branch, dy, TH * sizeof(float));
    }
    if (dropout) o->dropout(d_branch, TH, (float)m->cfg.dropout, m->rng_seed, a->drop_offset[1]);
    if (L->moe)
      o->round_to(d_branch, d_branch, TH, m->ct);
    else
      rc_linear_round_input(m, L->fc2, d_branch, d_branch, TH);
  }
  float *d_ln2 = m->d_ln;
  if (L->moe) {
    moe_backward(m, L, a, d_branch, d_ln2);
  } else {
    float *d_sw = m->d_big2, *d_fc1 = m->d_big;
    uint16_t *d_fc1_h = fc1_grad_half(m, L->fc1);
    /* dy's 16-bit copy, when the layer above wrote one and fc2 takes dy as it is */
    const uint16_t *d_branch_h = d_branch == dy && rc_layer_takes_dy_half(m, L) ? dy_half : NULL;
    fc2_swiglu_backward(m, L, a, d_branch, d_branch_h, d_sw, d_fc1, d_fc1_h, T, NULL);
    if (!d_fc1_h) rc_linear_round_input(m, L->fc1, d_fc1, d_fc1, (size_t)T * 2 * F);
    rc_linear_backward(m, L->fc1, a->call_fc1, d_fc1_h ? NULL : d_fc1, d_fc1_h, a->fc1_in, d_ln2, T,
                       NULL);
  }
  /* a half proj takes dxm as it is without dropout: its 16-bit copy from
   * the norm's backward, in dy_half (fc1's gradient is spent by now) */
  uint16_t *dxm_h = !dropout && rc_linear_is_half(m, L->proj) ? m->dy_half : NULL;
  o->rmsnorm_backward(dxm, L->ln2->main_grad, d_ln2, a->xm, L->ln2->weight, a->ln2_rstd, T, H, H,
                      dxm_h, m->ct, true);
  /* xm = x + dropout(proj): the branch is dxm as it is unless dropout or a
   * rounded copy changes it */
  d_branch = dxm;
  if (dropout || !rc_linear_rounds_inputs(m, L->proj)) {
    d_branch = m->d_tmp;
    o->copy(d_branch, dxm, TH * sizeof(float));
  }
  if (dropout) o->dropout(d_branch, TH, (float)m->cfg.dropout, m->rng_seed, a->drop_offset[0]);
  rc_linear_round_input(m, L->proj, d_branch, d_branch, TH);
  float *d_attn = m->d_big2;
  rc_linear_backward(m, L->proj, a->call_proj, d_branch, d_branch == dxm ? dxm_h : NULL, a->proj_in,
                     d_attn, T, NULL);
  float *d_qkv = m->d_big;
  /* a half qkv's gradient: RoPE's backward in the compute type, fused into
   * the attention backward's stores (ops.h dqkv_half) */
  uint16_t *d_qkv_h = rc_linear_is_half(m, L->qkv) ? m->dy_half : NULL;
  float theta = (float)m->cfg.rope_theta;
  o->attention_backward(m->attn_ct, d_qkv, d_attn, a->attn, a->lse, a->heads ? NULL : a->qkv,
                        a->heads, m->B, m->S, m->nh, m->hd, a->attn ? NULL : a->proj_h, theta,
                        d_qkv_h, m->ct);
  if (!d_qkv_h) {
    o->rope_backward(d_qkv, m->B, m->S, m->nh, m->hd, theta, NULL, m->ct);
    rc_linear_round_input(m, L->qkv, d_qkv, d_qkv, (size_t)T * 3 * H);
  }
  rc_linear_backward(m, L->qkv, a->call_qkv, d_qkv_h ? NULL : d_qkv, d_qkv_h, a->qkv_in, d_ln, T,
                     NULL);
  /* x feeds the residual and ln1: d x = dxm + ln1's backward, added in place
   * (the same bits as a copy and then the add, one [T,H] pass fewer) */
  o->rmsnorm_backward(dxm, L->ln1->main_grad, d_ln, a->x_in, L->ln1->weight, a->ln1_rstd, T, H, H,
                      dx_half, m->ct, true);
}
