/* model_internal.h — activation buffers shared by the model's files. */
#ifndef RC_CORE_MODEL_INTERNAL_H
#define RC_CORE_MODEL_INTERNAL_H

#include "core/model.h"

struct rc_layer_act {
  const float *x_in; /* [T,H] the layer's input (owned by the previous producer) */
  float *ln1, *ln1_rstd, *ln1_r;
  float *qkv; /* [T,3H] after RoPE */
  float *attn, *attn_r, *lse;
  float *proj;          /* [T,H] after dropout */
  float *xm;            /* [T,H] residual after attention */
  float *ln2, *ln2_rstd, *ln2_r;
  float *fc1, *sw_r;    /* dense [T,2F],[T,F]; MoE [T*k,2F],[T*k,F] */
  float *mlp_out;       /* [T,H] after dropout */
  float *y;             /* [T,H] output */
  /* MoE */
  float *router_logits, *probs, *topk_w, *xs, *e_out, *aux_grad;
  int32_t *topk_idx, *perm, *inv_perm, *offsets;
  int *group_rows; /* host [E] */
  int call_qkv, call_proj, call_fc1, call_fc2, call_router;
  uint64_t drop_offset[2];
};

struct rc_mtp_act {
  float *emb, *en, *en_rstd, *hn, *hn_rstd, *cat_r, *x;
  float *hk, *hk_rstd, *hk_r; /* final_norm_k output, rounded copy for the head */
  int call_eh;
};

/* model_layer.c */
void rc_layer_forward(rc_model *m, rc_layer *L, struct rc_layer_act *a, const float *x);
void rc_layer_backward(rc_model *m, rc_layer *L, struct rc_layer_act *a, const float *dy, float *dx);

/* Allocation helper: zeroed backend memory of n floats. */
float *rc_model_alloc(rc_model *m, size_t n);

#endif
