/* model.c — building the model (parameters, linears, activation buffers) and
 * one microbatch's forward and backward through decoder, MTP and heads.
 *
 * Forward order as in Megatron: decoder layers 1..L, MTP layer calls 1..D,
 * MTP heads 1..D, then the main head. Backward is the reverse: main head,
 * MTP heads D..1, MTP layer calls D..1, decoder layers L..1, embedding. The
 * order matters: it decides which forward call of a shared module pairs with
 * which backward, and that pairing is the seed's bug. A plain output head
 * (no flag) runs each depth's forward and backward back to back instead,
 * in the backward's order: nothing observes its forward order, and one
 * logits buffer serves every depth (rc_model_heads_one_at_a_time).
 *
 * Every buffer of the model, backend or host, is one request of the model's
 * plan (model_internal.h): building the model plans them, in order, and
 * model_memory.c sums the plan for the memory check and then walks it. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/numeric.h"
#include "base/alloc_fail.h"
#include "core/linear.h"
#include "core/model_internal.h"

/* ---- the plan: every buffer, in allocation order ----
 *
 * Building the model records what it will allocate (model_internal.h, the
 * plan) and allocates nothing: the functions below fill the parameters,
 * linears and layers and append each buffer to m->blocks. rc_model_init
 * checks the plan's sum against the machine and then walks it. The order is
 * the order the buffers were always allocated in: parameters first. */

/* n floats (at least one) of kind at *dst */
static void plan_floats(rc_model *m, void *dst, rc_mem_kind kind, size_t n, const char *what) {
  rc_plan_buffer(m, dst, kind, (n ? n : 1) * sizeof(float), what);
}

/* ---- parameters ---- */

static rc_param *add_param(rc_model *m, const char *name, int ndim, int64_t d0, int64_t d1,
                           int64_t d2, bool decay) {
  if (m->nparams == RC_MAX_PARAMS) abort();
  rc_param *p = &m->params[m->nparams++];
  snprintf(p->name, sizeof p->name, "%s", name);
  p->ndim = ndim;
  p->shape[0] = d0, p->shape[1] = d1, p->shape[2] = d2;
  p->numel = (size_t)d0 * (ndim > 1 ? (size_t)d1 : 1) * (ndim > 2 ? (size_t)d2 : 1);
  p->decay = decay;
  plan_floats(m, &p->weight, RC_MEM_WEIGHTS, p->numel, "weight");
  plan_floats(m, &p->main_grad, RC_MEM_MAIN_GRAD, p->numel, "main_grad");
  plan_floats(m, &p->exp_avg, RC_MEM_OPTIMIZER, p->numel, "exp_avg");
  plan_floats(m, &p->exp_avg_sq, RC_MEM_OPTIMIZER, p->numel, "exp_avg_sq");
  return p;
}

static rc_param *add_norm(rc_model *m, const char *prefix, const char *name) {
  char buf[160];
  snprintf(buf, sizeof buf, "%s/%s/weight", prefix, name);
  return add_param(m, buf, 1, m->H, 0, 0, false);
}

/* The fp8 delayed-scaling histories of a linear (host, [history] each). */
static void plan_amax_histories(rc_model *m, rc_linear *lin) {
  size_t bytes = (size_t)m->cfg.fp8_amax_history * sizeof(float);
  rc_plan_buffer(m, &lin->amax_history, RC_MEM_HOST, bytes, "amax_history");
  rc_plan_buffer(m, &lin->amax_history_input, RC_MEM_HOST, bytes, "amax_history_input");
  rc_plan_buffer(m, &lin->amax_history_grad, RC_MEM_HOST, bytes, "amax_history_grad");
}

static rc_linear *add_linear(rc_model *m, const char *prefix, const char *name, int groups, int in,
                             int out, bool te_style, bool repeated) {
  if (m->nlinears == RC_MAX_LINEARS) abort();
  rc_linear *lin = &m->linears[m->nlinears++];
  memset(lin, 0, sizeof *lin);
  snprintf(lin->name, sizeof lin->name, "%s/%s", prefix, name);
  char pname[160];
  snprintf(pname, sizeof pname, "%s/weight", lin->name);
  lin->w = groups > 1 ? add_param(m, pname, 3, groups, out, in, true)
                      : add_param(m, pname, 2, out, in, 0, true);
  lin->groups = groups, lin->in = in, lin->out = out;
  lin->te_style = te_style, lin->repeated = repeated;
  lin->flag = RC_FLAG_TRUE;
  lin->pending_call = -1; /* no split backward open */
  plan_amax_histories(m, lin);
  return lin;
}

static void build_layer(rc_model *m, rc_layer *L, const char *prefix, bool moe, bool repeated) {
  snprintf(L->prefix, sizeof L->prefix, "%s", prefix);
  char sub[128];
  L->ln1 = add_norm(m, prefix, "input_layernorm");
  snprintf(sub, sizeof sub, "%s/self_attention", prefix);
  L->qkv = add_linear(m, sub, "linear_qkv", 1, m->H, 3 * m->H, true, repeated);
  L->proj = add_linear(m, sub, "linear_proj", 1, m->H, m->H, true, repeated);
  L->ln2 = add_norm(m, prefix, "pre_mlp_layernorm");
  L->moe = moe;
  snprintf(sub, sizeof sub, "%s/mlp", prefix);
  if (moe) {
    size_t E = (size_t)m->E;
    L->router = add_linear(m, sub, "router", 1, m->H, m->E, false, repeated);
    snprintf(sub, sizeof sub, "%s/mlp/experts", prefix);
    L->fc1 = add_linear(m, sub, "linear_fc1", m->E, m->H, 2 * m->F, true, repeated);
    L->fc2 = add_linear(m, sub, "linear_fc2", m->E, m->F, m->H, true, repeated);
    plan_floats(m, &L->expert_bias, RC_MEM_WEIGHTS, E, "expert_bias");
    rc_plan_buffer(m, &L->expert_bias_host, RC_MEM_HOST, E * sizeof(float), "expert_bias_host");
    rc_plan_buffer(m, &L->token_counts, RC_MEM_HOST, E * sizeof(double), "token_counts");
  } else {
    L->fc1 = add_linear(m, sub, "linear_fc1", 1, m->H, 2 * m->F, true, repeated);
    L->fc2 = add_linear(m, sub, "linear_fc2", 1, m->F, m->H, true, repeated);
  }
}

/* Deterministic init from (seed, parameter index, element): the same on
 * every backend and independent of the order parameters are created in.
 * The backend draws straight into the parameter's memory (ops.h
 * init_normal: the CPU on its threads, a GPU in a kernel), bit for bit the
 * same on each, so no host copy of the weights is made or uploaded. Norm
 * weights are ones, uploaded from `ones` (at least numel floats). */
static void init_param(rc_model *m, rc_param *p, int index, float std, const float *ones) {
  if (ones) {
    m->ops->to_device(p->weight, ones, p->numel * sizeof(float));
    return;
  }
  uint64_t key = rc_mix64(m->cfg.seed ^ 0xA5A5A5A5ull) ^ ((uint64_t)index << 40);
  m->ops->init_normal(p->weight, p->numel, 0, key, std);
}

static size_t max_sz(size_t a, size_t b) {
  return a > b ? a : b;
}

/* The MTP layer that depth k (1..D) runs, and its TRM: the shared one or
 * its own. */
static rc_mtp_layer *mtp_layer(rc_model *m, int k) {
  return &m->mtp[m->cfg.mtp_repeated_layer ? 0 : k - 1];
}
static rc_layer *mtp_trm(rc_model *m, int k) {
  return &mtp_layer(m, k)->trm;
}

/* A rounded copy of n floats for lin's GEMM input at *dst, unless its GEMMs
 * round themselves (rc_linear_rounds_inputs): then *dst stays NULL. */
static void plan_rounded(rc_model *m, void *dst, const rc_linear *lin, rc_mem_kind kind, size_t n,
                         const char *what) {
  if (!rc_linear_rounds_inputs(m, lin)) plan_floats(m, dst, kind, n, what);
}

/* Where a half linear saves n input elements for its wgrad (*dst NULL for
 * the others): 2 bytes each. */
static void plan_half(rc_model *m, void *dst, const rc_linear *lin, size_t n, const char *what) {
  if (rc_linear_is_half(m, lin)) rc_plan_buffer(m, dst, RC_MEM_ACTIVATIONS, (n ? n : 1) * 2, what);
}

/* Whether layer L's qkv GEMM writes its output in 16 bits (gemm_to_half) for
 * RoPE, which then reads that: a half qkv under BF16 attention, whose heads
 * hold the rotated q, k, v (ops.h rope_forward qkv_half). */
static bool qkv_out_16(const rc_model *m, const rc_layer *L) {
  return m->attn_ct == RC_COMPUTE_BF16 && rc_linear_is_half(m, L->qkv);
}

/* A forward buffer that nothing reads after the layer's forward: an fp32
 * GEMM input once a half linear has saved its 16-bit copy, or an output that
 * only feeds a residual add. All layers share one buffer per slot
 * (m->fwd_shared, sized for the largest use: fwd_shared_n), planned by its
 * first user; anything else keeps its own, which backward reads again. */
static void own_or_shared(rc_model *m, void *dst, bool shared, int slot, size_t n,
                          const char *what) {
  if (!shared) {
    plan_floats(m, dst, RC_MEM_ACTIVATIONS, n, what);
    return;
  }
  if (!m->fwd_shared[slot])
    plan_floats(m, &m->fwd_shared[slot], RC_MEM_SCRATCH, m->fwd_shared_n[slot], what);
  rc_plan_alias(m, dst, &m->fwd_shared[slot], 0);
}

static void plan_layer_act(rc_model *m, struct rc_layer_act *a, const rc_layer *L) {
  size_t T = (size_t)m->T, H = (size_t)m->H, F = (size_t)m->F, E = (size_t)m->E, K = (size_t)m->K;
  bool moe = L->moe;
  size_t rows = moe ? T * K : T;
  const rc_mem_kind A = RC_MEM_ACTIVATIONS;
  /* ln1 feeds qkv only (its norm's backward reads the layer input); dense
   * ln2 feeds fc1 only (MoE's also the fp32 router, whose wgrad reads it) */
  /* with a half qkv / dense fc1 / fc2 the norm or SwiGLU writes the 16-bit
   * input alone (ops.h out_half): no fp32 ln1, ln2 or sw_r at all */
  if (!rc_linear_is_half(m, L->qkv)) plan_floats(m, &a->ln1, A, T * H, "ln1");
  plan_floats(m, &a->ln1_rstd, A, T, "ln1_rstd");
  plan_rounded(m, &a->ln1_r, L->qkv, A, T * H, "ln1_r");
  /* BF16 attention reads RoPE's bf16 heads, forward and backward: the fp32
   * qkv is only the GEMM's output, one buffer for all layers */
  bool heads = m->attn_ct == RC_COMPUTE_BF16;
  own_or_shared(m, &a->qkv, heads, RC_FWD_SHARED_QKV, T * 3 * H, "qkv");
  /* a half qkv's output in 16 bits, what RoPE reads (rc_layer_forward): in
   * the shared slot after the fp32 qkv, which is then the backend's scratch */
  if (qkv_out_16(m, L)) rc_plan_alias(m, &a->qkv_out_h, &a->qkv, T * 3 * H * sizeof(float));
  if (heads) rc_plan_buffer(m, &a->heads, A, T * 3 * H * 2, "attn_heads");
  /* the fp32 attention output feeds only the backward's D, which reads it
   * rounded to bf16 (ops.h): a bf16 proj's saved input is that copy */
  bool attn_16 = heads && m->ct == RC_COMPUTE_BF16 && rc_linear_is_half(m, L->proj);
  if (!attn_16) plan_floats(m, &a->attn, A, T * H, "attn");
  plan_rounded(m, &a->attn_r, L->proj, A, T * H, "attn_r");
  plan_floats(m, &a->lse, A, (size_t)m->B * m->nh * m->S, "lse");
  /* proj and mlp_out only feed their residual adds: shared whatever the precision */
  own_or_shared(m, &a->proj, true, RC_FWD_SHARED_OUT, T * H, "proj");
  plan_floats(m, &a->xm, A, T * H, "xm");
  if (moe || !rc_linear_is_half(m, L->fc1)) plan_floats(m, &a->ln2, A, T * H, "ln2");
  plan_floats(m, &a->ln2_rstd, A, T, "ln2_rstd");
  plan_rounded(m, &a->ln2_r, L->fc1, A, T * H, "ln2_r");
  /* a half fc1's output is 16-bit, as a bf16/fp16 layer's output is */
  if (rc_linear_is_half(m, L->fc1))
    rc_plan_buffer(m, &a->fc1_out_h, A, rows * 2 * F * 2, "fc1_out_h");
  else
    plan_floats(m, &a->fc1, A, rows * 2 * F, "fc1");
  if (!rc_linear_is_half(m, L->fc2)) plan_floats(m, &a->sw_r, A, rows * F, "sw_r");
  own_or_shared(m, &a->mlp_out, true, RC_FWD_SHARED_OUT, T * H, "mlp_out");
  plan_floats(m, &a->y, A, T * H, "y");
  plan_half(m, &a->qkv_h, L->qkv, T * H, "qkv_h");
  plan_half(m, &a->proj_h, L->proj, T * H, "proj_h");
  plan_half(m, &a->fc1_h, L->fc1, rows * H, "fc1_h");
  /* recomputed in the backward: the one shared buffer (model.h sw_half) */
  if (m->sw_half && rc_linear_is_half(m, L->fc2))
    rc_plan_alias(m, &a->fc2_h, &m->sw_half, 0);
  else
    plan_half(m, &a->fc2_h, L->fc2, rows * F, "fc2_h");
  if (moe) {
    plan_floats(m, &a->router_logits, A, T * E, "router_logits");
    plan_floats(m, &a->probs, A, T * E, "probs");
    plan_floats(m, &a->topk_w, A, T * K, "topk_w");
    /* a half fc1 reads the rows the gather writes in 16 bits (fc1_h): no fp32 copy */
    if (!rc_linear_is_half(m, L->fc1)) plan_floats(m, &a->xs, A, T * K * H, "xs");
    plan_floats(m, &a->e_out, A, T * K * H, "e_out");
    plan_floats(m, &a->aux_grad, A, E, "aux_grad");
    rc_plan_buffer(m, &a->topk_idx, A, T * K * sizeof(int32_t), "topk_idx");
    rc_plan_buffer(m, &a->perm, A, T * K * sizeof(int32_t), "perm");
    rc_plan_buffer(m, &a->inv_perm, A, T * K * sizeof(int32_t), "inv_perm");
    rc_plan_buffer(m, &a->offsets, A, (E + 1) * sizeof(int32_t), "offsets");
    rc_plan_buffer(m, &a->group_rows, RC_MEM_HOST, E * sizeof(int), "group_rows");
  }
}

/* init: N(0, std), output projections scaled by 1/sqrt(2L) as in GPT-2;
 * the norm weights (the 1-D parameters, [H] each) ones */
static int init_weights(rc_model *m, rc_err *err) {
  const rc_config *c = &m->cfg;
  double t_init = rc_model_wall_s();
  size_t n_ones = 1;
  for (int i = 0; i < m->nparams; i++)
    if (m->params[i].ndim == 1 && m->params[i].numel > n_ones) n_ones = m->params[i].numel;
  bool forced = rc_alloc_fail_now(); /* counted after the plan's (base/alloc_fail.h) */
  float *ones = forced ? NULL : malloc(n_ones * sizeof(float));
  if (!ones) {
    char why[800];
    rc_model_describe_refusal(forced, why, sizeof why);
    return rc_fail(err, RC_EXIT_RESOURCES,
                   "model: cannot allocate %zu bytes of host memory for the norm weights' ones: %s",
                   n_ones * sizeof(float), why);
  }
  for (size_t j = 0; j < n_ones; j++) ones[j] = 1.0f;
  for (int i = 0; i < m->nparams; i++) {
    rc_param *p = &m->params[i];
    float std = (float)c->init_std;
    if (strstr(p->name, "linear_proj") || strstr(p->name, "linear_fc2"))
      std /= sqrtf(2.0f * c->layers);
    init_param(m, p, i, std, p->ndim == 1 ? ones : NULL);
  }
  m->ops->sync(); /* the draws and uploads done, so the time noted below is theirs */
  free(ones);
  rc_model_profile_note("model init: weight draws on the backend", rc_model_wall_s() - t_init);
  return RC_OK;
}

/* The settings a fresh process's steps compute with: the config's, and
 * Megatron's DynamicGradScaler's fixed growth and backoff factors. */
void rc_model_settings_from_config(rc_step_settings *hp, const rc_config *c) {
  memset(hp, 0, sizeof *hp);
  hp->lr = c->lr, hp->min_lr = c->min_lr;
  hp->warmup = c->warmup, hp->warmup_origin = 0, hp->decay_steps = c->steps;
  hp->weight_decay = c->weight_decay;
  hp->beta1 = c->adam_beta1, hp->beta2 = c->adam_beta2, hp->eps = c->adam_eps;
  hp->clip_grad = c->clip_grad;
  hp->loss_scale_window = c->loss_scale_window, hp->hysteresis = c->hysteresis;
  hp->growth_factor = 2.0, hp->backoff_factor = 0.5, hp->min_loss_scale = c->min_loss_scale;
  hp->moe_bias_update_rate = c->moe_bias_update_rate;
  /* the main loss's denominator as --loss-type says; the MTP term's and the
   * load-balancing loss's are the step's valid tokens whenever the main
   * loss's is a global one, whatever that one is (docs/design.md §3.5) */
  hp->main_denominator = c->loss_type == RC_LOSS_TOKEN_LEVEL      ? RC_DENOM_TOKENS
                         : c->loss_type == RC_LOSS_SEQUENCE_LEVEL ? RC_DENOM_SEQUENCES
                                                                  : RC_DENOM_MICROBATCH;
  int aux = c->loss_type == RC_LOSS_MICROBATCH_MEAN ? RC_DENOM_MICROBATCH : RC_DENOM_TOKENS;
  hp->mtp_denominator = hp->moe_aux_denominator = aux;
  hp->normalize_at_finish = c->loss_normalize_at == RC_NORMALIZE_AT_FINISH;
  hp->mtp_clip_grad = c->mtp_clip_grad;
}

const char *rc_denominator_name(int d) {
  return d == RC_DENOM_TOKENS       ? "tokens"
         : d == RC_DENOM_SEQUENCES  ? "sequences"
         : d == RC_DENOM_MICROBATCH ? "microbatch-mean"
                                    : "?";
}

/* The sizes and compute types: everything but memory. */
int rc_model_setup(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank, rc_err *err) {
  memset(m, 0, sizeof *m);
  m->ops = ops;
  m->cfg = *cfg;
  m->rank = rank;
  const rc_config *c = &m->cfg;
  m->B = c->micro_batch, m->S = c->seq_len, m->T = m->B * m->S;
  m->H = c->hidden, m->V = c->vocab, m->F = c->ffn, m->nh = c->heads, m->hd = c->hidden / c->heads;
  m->E = c->experts, m->K = c->topk, m->D = c->mtp_depths;
  if (m->E > 1024) return rc_fail(err, RC_EXIT_USAGE, "--experts above 1024 is not supported");
  m->ct = c->precision == RC_PREC_FP32   ? RC_COMPUTE_FP32
          : c->precision == RC_PREC_FP16 ? RC_COMPUTE_FP16
                                         : RC_COMPUTE_BF16;
  m->attn_ct = c->attention_precision == RC_PREC_BF16 ? RC_COMPUTE_BF16 : RC_COMPUTE_FP32;
  rc_model_settings_from_config(&m->hp, c);
  return RC_OK;
}

/* The output head: the embedding itself when tied, else its own linear. */
static void add_output_head(rc_model *m) {
  const rc_config *c = &m->cfg;
  if (c->tie_embeddings) {
    if (m->nlinears == RC_MAX_LINEARS) abort();
    rc_linear *h = &m->linears[m->nlinears++];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "output_layer");
    h->w = m->embedding, h->groups = 1, h->in = m->H, h->out = m->V, h->flag = RC_FLAG_TRUE;
    plan_amax_histories(m, h);
    m->head = h;
  } else {
    m->head = add_linear(m, "", "output_layer", 1, m->H, m->V, c->te_output_head, false);
    memmove(m->head->name, "output_layer", sizeof "output_layer");
    snprintf(m->head->w->name, sizeof m->head->w->name, "output_layer/weight");
  }
  m->head_param = m->head->w;
}

/* The parameters, in a fixed order: the order of the shards and the
 * fingerprints. */
static void add_params(rc_model *m) {
  const rc_config *c = &m->cfg;
  m->embedding = add_param(m, "embedding/word_embeddings/weight", 2, m->V, m->H, 0, true);
  for (int l = 0; l < c->layers; l++) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "decoder/layers/%d", l);
    build_layer(m, &m->layers[l], prefix, c->is_moe_layer[l], false);
  }
  m->final_norm = add_norm(m, "decoder", "final_layernorm");
  bool last_moe = c->is_moe_layer[c->layers - 1];
  m->n_mtp_physical = m->D == 0 ? 0 : c->mtp_repeated_layer ? 1 : m->D;
  m->mtp_params_begin = m->nparams;
  for (int p = 0; p < m->n_mtp_physical; p++) {
    char prefix[64], trm[96];
    snprintf(prefix, sizeof prefix, "mtp/layers/%d", p);
    bool repeated = c->mtp_repeated_layer && m->D > 1;
    rc_mtp_layer *mt = &m->mtp[p];
    mt->enorm = add_norm(m, prefix, "enorm");
    mt->hnorm = add_norm(m, prefix, "hnorm");
    mt->eh_proj = add_linear(m, prefix, "eh_proj", 1, 2 * m->H, m->H, true, repeated);
    snprintf(trm, sizeof trm, "%s/transformer_layer", prefix);
    build_layer(m, &mt->trm, trm, last_moe, repeated);
    mt->final_norm = add_norm(m, prefix, "final_layernorm");
  }
  m->mtp_params_end = m->nparams;
  add_output_head(m);
}

/* The weights as forward uses them: 16-bit copies in the compute type
 * unless fp32 (the router is always fp32: it reads the weight itself), the
 * e4m3 cache and its transpose for fp8 linears, and a wgrad scratch where
 * fusion is off. */
static void plan_weight_copies(rc_model *m) {
  const rc_config *c = &m->cfg;
  const rc_mem_kind W = RC_MEM_WEIGHT_COPIES;
  for (int i = 0; i < m->nlinears; i++) {
    rc_linear *lin = &m->linears[i];
    bool is_router = strstr(lin->name, "/router") != NULL;
    if (lin->te_style && c->precision == RC_PREC_FP8) {
      size_t g = (size_t)lin->groups;
      lin->in_pad = rc_fp8_pad(lin->in), lin->out_pad = rc_fp8_pad(lin->out);
      rc_plan_buffer(m, &lin->wq8, W, g * (size_t)lin->out * (size_t)lin->in_pad, "wq8");
      rc_plan_buffer(m, &lin->wq8_t, W, g * (size_t)lin->in * (size_t)lin->out_pad, "wq8_t");
      lin->fp8_slot = m->fp8_slots++;
    } else if (m->ct == RC_COMPUTE_FP32 || is_router) {
      rc_plan_alias(m, &lin->wq, &lin->w->weight, 0);
    } else {
      rc_plan_buffer(m, &lin->wq_half, W, lin->w->numel * 2, "wq_half");
    }
    if (lin->te_style && !c->grad_accum_fusion)
      plan_floats(m, &lin->wgrad_scratch, W, (size_t)lin->in * lin->out, "wgrad_scratch");
  }
}

/* fp8: the running amaxes and the two cast buffers, sized for the largest
 * operand any fp8 GEMM casts: at most T rows a call (a token reaches an
 * expert once), padded widths (rc_fp8_scratch_bytes). */
static void plan_fp8(rc_model *m) {
  if (!m->fp8_slots) return;
  size_t slots = RC_FP8_AMAX_SLOT * (size_t)m->fp8_slots;
  plan_floats(m, &m->fp8_amax, RC_MEM_SCRATCH, slots, "fp8_amax");
  rc_plan_buffer(m, &m->fp8_amax_host, RC_MEM_HOST, slots * sizeof(float), "fp8_amax_host");
  m->fp8_scratch_bytes = rc_fp8_scratch_bytes(&m->cfg);
  rc_plan_buffer(m, &m->fp8_a, RC_MEM_SCRATCH, m->fp8_scratch_bytes, "fp8_a");
  rc_plan_buffer(m, &m->fp8_b, RC_MEM_SCRATCH, m->fp8_scratch_bytes, "fp8_b");
}

/* One MTP depth's activations (depth k >= 1). */
static void plan_mtp_act(rc_model *m, int k) {
  size_t T = (size_t)m->T, H = (size_t)m->H;
  plan_layer_act(m, &m->acts[m->cfg.layers + k - 1], mtp_trm(m, k));
  struct rc_mtp_act *ma = &m->mtp_acts[k];
  const rc_mem_kind A = RC_MEM_ACTIVATIONS;
  /* a half eh_proj's [embedding | hidden] input is written by the two norms
   * straight into its 16-bit copy (eh_h, ops.h ld_half): no fp32 en, hn or
   * concatenation at all */
  bool eh_16 = rc_linear_is_half(m, mtp_layer(m, k)->eh_proj);
  plan_floats(m, &ma->emb, A, T * H, "mtp emb");
  if (!eh_16) plan_floats(m, &ma->en, A, T * H, "mtp en");
  plan_floats(m, &ma->en_rstd, A, T, "mtp en_rstd");
  if (!eh_16) plan_floats(m, &ma->hn, A, T * H, "mtp hn");
  plan_floats(m, &ma->hn_rstd, A, T, "mtp hn_rstd");
  if (!eh_16) plan_floats(m, &ma->cat_r, A, T * 2 * H, "mtp cat_r");
  plan_floats(m, &ma->x, A, T * H, "mtp x");
  plan_floats(m, &ma->hk, A, T * H, "mtp hk");
  plan_floats(m, &ma->hk_rstd, A, T, "mtp hk_rstd");
  plan_rounded(m, &ma->hk_r, m->head, A, T * H, "mtp hk_r");
  plan_half(m, &ma->eh_h, mtp_layer(m, k)->eh_proj, T * 2 * H, "mtp eh_h");
  plan_half(m, &ma->head_h, m->head, T * H, "mtp head_h");
}

/* Selective recompute of the SwiGLU output (model.h sw_half), for the half
 * fc2s, unless RC_KEEP_SWIGLU_OUTPUT=1 asks for a saved output per layer
 * (the same bits: tests/core_swiglu_recompute.sh). Costs one 16-bit write
 * per layer in SwiGLU's backward; saves [rows, F] 16-bit values a layer. */
static void plan_swiglu_recompute(rc_model *m) {
  if (!rc_swiglu_recompute_on()) return;
  size_t rows = 0, T = (size_t)m->T, K = (size_t)m->K;
  for (int l = 0; l < m->cfg.layers + m->D; l++) {
    const rc_layer *L = l < m->cfg.layers ? &m->layers[l] : mtp_trm(m, l - m->cfg.layers + 1);
    if (rc_linear_is_half(m, L->fc2)) rows = max_sz(rows, L->moe ? T * K : T);
  }
  if (!rows) return;
  rc_plan_buffer(m, &m->sw_half, RC_MEM_SCRATCH, rows * (size_t)m->F * 2, "sw_half");
  m->fc2_dy_half_elems = rows * (size_t)m->H;
  rc_plan_buffer(m, &m->fc2_dy_half, RC_MEM_SCRATCH, m->fc2_dy_half_elems * 2, "fc2_dy_half");
}

/* The activations of every layer and depth, and the heads' inputs. */
static void plan_activations(rc_model *m) {
  const rc_config *c = &m->cfg;
  int n_acts = c->layers + m->D;
  rc_plan_table(m, &m->acts, (size_t)n_acts, sizeof *m->acts, "acts");
  rc_plan_table(m, &m->mtp_acts, (size_t)(m->D + 1), sizeof *m->mtp_acts, "mtp_acts");
  if (!m->acts || !m->mtp_acts) return; /* alloc_failed is set: nothing is walked */
  size_t T = (size_t)m->T, H = (size_t)m->H;
  m->fwd_shared_n[RC_FWD_SHARED_OUT] = T * H;
  bool qkv_16 = false; /* any layer's qkv writes 16 bits: its slot holds them too */
  for (int l = 0; l < c->layers; l++) qkv_16 = qkv_16 || qkv_out_16(m, &m->layers[l]);
  for (int k = 1; k <= m->D; k++) qkv_16 = qkv_16 || qkv_out_16(m, mtp_trm(m, k));
  m->fwd_shared_n[RC_FWD_SHARED_QKV] = T * 3 * H + (qkv_16 ? (T * 3 * H + 1) / 2 : 0);
  plan_swiglu_recompute(m);
  for (int l = 0; l < c->layers; l++) plan_layer_act(m, &m->acts[l], &m->layers[l]);
  for (int k = 1; k <= m->D; k++) plan_mtp_act(m, k);
  const rc_mem_kind A = RC_MEM_ACTIVATIONS;
  plan_floats(m, &m->emb_out, A, T * H, "emb_out");
  plan_floats(m, &m->h0, A, T * H, "h0");
  plan_floats(m, &m->h0_rstd, A, T, "h0_rstd");
  plan_rounded(m, &m->h0_r, m->head, A, T * H, "h0_r");
  plan_half(m, &m->head_h0, m->head, T * H, "head_h0");
}

/* The heads' logits and the backward's scratch, sized for the largest use. */
static void plan_scratch(rc_model *m) {
  size_t T = (size_t)m->T, H = (size_t)m->H, V = (size_t)m->V;
  const rc_mem_kind A = RC_MEM_ACTIVATIONS, SCR = RC_MEM_SCRATCH;
  bool half_head = rc_linear_is_half(m, m->head);
  int n_logits = rc_model_heads_one_at_a_time(&m->cfg) ? 1 : m->D + 1;
  for (int k = 0; k <= m->D; k++) {
    /* a half head's logits are 16-bit (gemm_to_half), and the cross-entropy
     * writes their gradient over them: one [T, V] 16-bit buffer per depth,
     * or one for all */
    if (k >= n_logits) {
      rc_plan_alias(m, &m->logits[k], &m->logits[0], 0);
      rc_plan_alias(m, &m->dlogits_half[k], &m->dlogits_half[0], 0);
    } else if (half_head) {
      rc_plan_buffer(m, &m->dlogits_half[k], A, T * V * 2, "dlogits_half");
    } else {
      plan_floats(m, &m->logits[k], A, T * V, "logits");
    }
    rc_plan_buffer(m, &m->ids_dev[k], SCR, T * sizeof(int32_t), "ids");
    rc_plan_buffer(m, &m->labels_dev[k], SCR, T * sizeof(int32_t), "labels");
    plan_floats(m, &m->d_h[k], SCR, T * H, "d_h");
  }
  /* per depth, [D+1][T]: the heads' losses come back in one read a microbatch */
  size_t heads_T = (size_t)(m->D + 1) * T;
  plan_floats(m, &m->ce_losses, SCR, heads_T, "ce_losses");
  plan_floats(m, &m->ce_correct, SCR, heads_T, "ce_correct");
  plan_floats(m, &m->ce_dloss, SCR, heads_T, "ce_dloss");
  /* the host's side of them: dloss, then the losses and flags read back */
  rc_plan_buffer(m, &m->heads_host, RC_MEM_HOST, 3 * heads_T * sizeof(float), "heads_host");
  size_t K = (size_t)m->K, F = (size_t)m->F, E = (size_t)m->E;
  size_t big =
      max_sz(max_sz(T * 3 * H, T * 2 * F), max_sz(T * K * 2 * F, max_sz(T * K * H, T * E)));
  big = max_sz(big, T * 2 * H);
  plan_floats(m, &m->d_big, SCR, big, "d_big");
  plan_floats(m, &m->d_big2, SCR, big, "d_big2");
  plan_floats(m, &m->d_resid, SCR, T * H, "d_resid");
  plan_floats(m, &m->d_tmp, SCR, T * H, "d_tmp");
  plan_floats(m, &m->d_xm, SCR, T * H, "d_xm");
  plan_floats(m, &m->d_ln, SCR, T * H, "d_ln");
  plan_floats(m, &m->d_topk_w, SCR, T * K, "d_topk_w");
  /* the half linears' output gradients: any linear but the head */
  m->dy_half_elems = 0;
  for (int i = 0; i < m->nlinears; i++) {
    const rc_linear *lin = &m->linears[i];
    size_t rows = lin->groups > 1 ? T * K : T; /* an expert GEMM sees T*k rows at most */
    if (lin != m->head && rc_linear_is_half(m, lin))
      m->dy_half_elems = max_sz(m->dy_half_elems, rows * (size_t)lin->out);
  }
  if (m->dy_half_elems) {
    rc_plan_buffer(m, &m->dy_half, SCR, m->dy_half_elems * 2, "dy_half");
    rc_plan_buffer(m, &m->resid_half, SCR, T * H * 2, "resid_half");
  }
}

void rc_model_plan(rc_model *m) {
  add_params(m);
  plan_weight_copies(m);
  plan_activations(m);
  plan_scratch(m);
  plan_fp8(m);
}

/* The distributed optimizer's buffers (model.h rc_dist_opt): every
 * parameter's gradient end to end, padded to world * shard; this rank owns
 * one shard. The offsets are written once the table is walked
 * (rc_model_alloc_dist). */
void rc_model_plan_dist(rc_model *m, int world, int rank) {
  rc_dist_opt *d = &m->dist;
  size_t W = (size_t)world;
  d->total = 0;
  for (int i = 0; i < m->nparams; i++) d->total += m->params[i].numel;
  d->shard = (d->total + W - 1) / W;
  d->padded = d->shard * W;
  d->begin = d->shard * (size_t)rank;
  d->end = d->begin + d->shard < d->total ? d->begin + d->shard : d->total;
  if (d->end < d->begin) d->end = d->begin;
  rc_plan_buffer(m, &d->offset, RC_MEM_HOST, (size_t)m->nparams * sizeof(size_t), "dist offset");
  const rc_mem_kind K = RC_MEM_DIST;
  plan_floats(m, &d->flat_grad, K, d->padded, "dist flat_grad");
  plan_floats(m, &d->scratch, K, d->padded, "dist scratch");
  plan_floats(m, &d->grad_shard, K, d->shard, "dist grad_shard");
  plan_floats(m, &d->exp_avg, K, d->shard, "dist exp_avg");
  plan_floats(m, &d->exp_avg_sq, K, d->shard, "dist exp_avg_sq");
  plan_floats(m, &d->weight_send, K, d->shard, "dist weight_send");
}

int rc_model_alloc_dist(rc_model *m, int world, int rank, rc_err *err) {
  int first = m->n_blocks;
  rc_model_plan_dist(m, world, rank);
  int rc = rc_plan_walk(m, first, err);
  if (rc) return rc;
  rc_dist_opt *d = &m->dist;
  for (size_t i = 0, at = 0; i < (size_t)m->nparams; at += m->params[i].numel, i++)
    d->offset[i] = at;
  return RC_OK;
}

/* The plan of cfg in a scratch model, summed; nothing is allocated but the
 * scratch model and its plan. Here, with the planning, so that
 * model_memory.c (which sums and walks) never calls back into this file. */
int rc_model_memory_need(const rc_config *c, rc_memory_need *n) {
  memset(n, 0, sizeof *n);
  rc_model *m = calloc(1, sizeof *m); /* planned into, never allocated */
  if (!m) return RC_EXIT_RESOURCES;
  rc_err err = {0};
  int rc = rc_model_setup(m, c, NULL, 0, &err);
  if (!rc) {
    rc_model_plan(m);
    if (c->world_size > 1) rc_model_plan_dist(m, c->world_size, 0);
    rc = m->alloc_failed ? RC_EXIT_RESOURCES : RC_OK;
  }
  if (!rc) rc_model_plan_need(m, n);
  rc_model_free(m);
  free(m);
  return rc;
}

/* The plan, its check against the machine, its walk, then the weights:
 * everything that can refuse the config comes before any buffer is made. */
static int model_init(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank,
                      bool draw_weights, rc_err *err) {
  int rc = rc_model_setup(m, cfg, ops, rank, err);
  if (rc) return rc;
  const rc_config *c = &m->cfg;
  rc_model_plan(m);
  /* Refuse what cannot fit before allocating any of it: a config of
   * in-range sizes can ask for terabytes. On the CPU "device" memory is
   * host memory. Device memory of other backends is not known here yet
   * (0 = not checked: the leg checks it before, through the module). */
  rc_memory_need need;
  rc_model_plan_need(m, &need);
  bool on_host = !strcmp(ops->name, "cpu");
  uint64_t host_avail = rc_host_memory_available();
  rc = rc_model_memory_check(&need, on_host, on_host ? host_avail : 0, host_avail, err);
  if (!rc) rc = rc_plan_walk(m, 0, err);
  if (rc) return rc;
  if (draw_weights) {
    rc = init_weights(m, err);
    if (rc) return rc;
  } else {
    rc_model_profile_note("model init: weight draws skipped (a load sets them)", 0);
  }
  /* state */
  m->loss_scale = c->precision == RC_PREC_FP16 ? c->initial_loss_scale : 1.0;
  m->hysteresis_tracker = c->hysteresis;
  m->rng_seed = rc_mix64(c->seed ^ 0xD1B54A32D192ED03ull) + (uint64_t)rank; /* per-rank stream */
  rc_model_memory_report(m);
  return 0;
}

int rc_model_init(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank, rc_err *err) {
  return model_init(m, cfg, ops, rank, true, err);
}

int rc_model_init_for_load(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank,
                           rc_err *err) {
  return model_init(m, cfg, ops, rank, false, err);
}

rc_linear *rc_model_find_linear(rc_model *m, const char *name) {
  for (int i = 0; i < m->nlinears; i++)
    if (!strcmp(m->linears[i].name, name)) return &m->linears[i];
  return NULL;
}

rc_param *rc_model_find_param(rc_model *m, const char *name) {
  for (int i = 0; i < m->nparams; i++)
    if (!strcmp(m->params[i].name, name)) return &m->params[i];
  return NULL;
}

/* ---- one microbatch ---- */

/* Head call for depth c: logits, then CE in place (dlogits). A half head's
 * logits are the compute type's 16-bit values, as a bf16/fp16 output layer's
 * are (Megatron-LM's, and autocast's), read by the cross-entropy in fp32 and
 * replaced by the 16-bit gradient its backward GEMMs read. The per-token
 * losses and correct flags go to depth c's rows of ce_losses / ce_correct,
 * read back once for all depths (no stall of the stream per head). */
static int head_forward(rc_model *m, int c) {
  const rc_ops *o = m->ops;
  int T = m->T;
  size_t c0 = (size_t)c * T;
  const float *h = c == 0 ? m->head_in0 : m->mtp_acts[c].head_in;
  uint16_t *h_half = c == 0 ? m->head_h0 : m->mtp_acts[c].head_h;
  /* a half head's input is already in h_half: the final norm wrote it */
  int call = m->dlogits_half[c]
                 ? rc_linear_forward_to_half(m, m->head, h_half ? NULL : h, h_half,
                                             m->dlogits_half[c], T, NULL)
                 : rc_linear_forward(m, m->head, h_half ? NULL : h, h_half, m->logits[c], T, NULL);
  o->cross_entropy(m->ce_losses + c0, m->ce_correct + c0, m->logits[c], m->labels_dev[c],
                   m->ce_dloss + c0, T, m->V, m->dlogits_half[c], m->ct);
  return call;
}

/* Head call `call` (depth c) backward: the head's input gradient into
 * d_h[c], its wgrad into main_grad, from the dlogits the forward's
 * cross-entropy left (the head rounds nothing: its GEMMs take the 16-bit
 * logits' gradient, or the fp32 one at fp32). */
static void head_backward(rc_model *m, int c, int call) {
  const float *h = c == 0 ? m->head_in0 : m->mtp_acts[c].head_in;
  /* a detached MTP head uses the output head's weight as a constant: its
   * input's gradient only (docs/design.md §3.5) */
  if (c > 0 && m->cfg.mtp_detach_heads) {
    rc_linear_backward_input(m, m->head, call, m->dlogits_half[c] ? NULL : m->logits[c],
                             m->dlogits_half[c], m->d_h[c], m->T);
    return;
  }
  rc_linear_backward(m, m->head, call, m->dlogits_half[c] ? NULL : m->logits[c], m->dlogits_half[c],
                     h, m->d_h[c], m->T, NULL);
}

/* Depth c's masked loss sum and correct count from the heads' host copies. */
static void head_sums(const rc_model *m, int c, const float *losses_host, const float *correct_host,
                      const float *mask_host, double *loss_sum, double *correct_sum) {
  int T = m->T;
  const float *l = losses_host + (size_t)c * T, *k = correct_host + (size_t)c * T;
  double ls = 0, cs = 0;
  for (int t = 0; t < T; t++) ls += mask_host[t] ? (double)l[t] : 0.0;
  for (int t = 0; t < T; t++) cs += mask_host[t] ? (double)k[t] : 0.0;
  *loss_sum = ls, *correct_sum = cs;
}

/* A sample's count of valid main-loss tokens: mask[b*S .. b*S+S). */
static double sample_tokens(const rc_model *m, const float *mask0, int b) {
  double n = 0;
  for (int s = 0; s < m->S; s++) n += mask0[(size_t)b * m->S + s];
  return n;
}

/* The per-token loss weights of --loss-type token-level and sequence-level
 * (docs/design.md §3.5), times the loss scale: the main loss's
 * 1/N_tokens, or 1/(n_b N_sequences) for a token of sample b with n_b valid
 * tokens; each MTP depth's lambda/D / N of the MTP term's denominator. Where
 * the finish normalises, the global counts are left out here (raw sums). */
static void global_weights(rc_model *m, float **mask, float *dloss) {
  const rc_config *c = &m->cfg;
  const rc_step_settings *h = &m->hp;
  int T = m->T, D = m->D;
  double w0 = rc_loss_seed_norm(m, h->main_denominator) * m->loss_scale;
  for (int b = 0; b < m->B; b++) {
    double w = w0;
    if (h->main_denominator == RC_DENOM_SEQUENCES) {
      double n = sample_tokens(m, mask[0], b);
      w = w0 / (n > 0 ? n : 1);
    }
    for (int s = 0; s < m->S; s++) {
      size_t t = (size_t)b * m->S + s;
      dloss[t] = mask[0][t] ? (float)w : 0.0f;
    }
  }
  for (int k = 1; k <= D; k++) {
    double w = c->mtp_loss_scale / D * rc_loss_seed_norm(m, h->mtp_denominator) * m->loss_scale;
    for (int t = 0; t < T; t++) dloss[(size_t)k * T + t] = mask[k][t] ? (float)w : 0.0f;
  }
}

/* Uploads the microbatch's ids and labels and fills dloss with the
 * per-token loss weights: by default J = [CE0/N0 + lambda/D sum_k CE_k/N_k]
 * / M, times the loss scale; with a global denominator, global_weights'.
 * n_valid[k] is depth k's count of unmasked tokens. */
static void microbatch_upload(rc_model *m, int32_t **ids, int32_t **labels, float **mask,
                              float *dloss, double *n_valid) {
  const rc_ops *o = m->ops;
  const rc_config *c = &m->cfg;
  int T = m->T, D = m->D;
  for (int k = 0; k <= D; k++) {
    o->to_device(m->ids_dev[k], ids[k], sizeof(int32_t) * (size_t)T);
    o->to_device(m->labels_dev[k], labels[k], sizeof(int32_t) * (size_t)T);
  }
  if (c->loss_type != RC_LOSS_MICROBATCH_MEAN) {
    for (int k = 0; k <= D; k++) {
      double n = 0;
      for (int t = 0; t < T; t++) n += mask[k][t];
      n_valid[k] = n;
    }
    global_weights(m, mask, dloss);
    return;
  }
  for (int k = 0; k <= D; k++) {
    double n = 0;
    for (int t = 0; t < T; t++) n += mask[k][t];
    n_valid[k] = n;
    double w =
        (k == 0 ? 1.0 : c->mtp_loss_scale / D) / (n > 0 ? n : 1) / c->microbatches * m->loss_scale;
    for (int t = 0; t < T; t++) dloss[(size_t)k * T + t] = mask[k][t] ? (float)w : 0.0f;
  }
}

/* Forward through the decoder to the main head's (rounded) input. */
static void forward_decoder(rc_model *m) {
  const rc_ops *o = m->ops;
  int T = m->T, H = m->H;
  o->embedding_forward(m->emb_out, m->ids_dev[0], m->embedding->weight, T, H);
  const float *x = m->emb_out;
  for (int l = 0; l < m->cfg.layers; l++) {
    rc_layer_forward(m, &m->layers[l], &m->acts[l], x);
    x = m->acts[l].y;
  }
  /* h0 feeds the first MTP depth as fp32; a half head's saved input comes
   * from the norm as well */
  o->rmsnorm_forward(m->h0, m->h0_rstd, x, m->final_norm->weight, T, H, (float)m->cfg.norm_eps,
                     m->head_h0, H, m->ct);
  m->head_in0 = rc_linear_round_input(m, m->head, m->h0_r, m->h0, (size_t)T * H);
}

/* Forward: MTP layer calls 1..D, each on the previous depth's hidden state. */
static void forward_mtp(rc_model *m) {
  const rc_ops *o = m->ops;
  int T = m->T, H = m->H;
  size_t TH = (size_t)T * H;
  float eps = (float)m->cfg.norm_eps;
  const float *h_prev = m->h0;
  for (int k = 1; k <= m->D; k++) {
    rc_mtp_layer *mt = mtp_layer(m, k);
    struct rc_mtp_act *ma = &m->mtp_acts[k];
    struct rc_layer_act *a = &m->acts[m->cfg.layers + k - 1];
    o->embedding_forward(ma->emb, m->ids_dev[k], m->embedding->weight, T, H);
    if (ma->eh_h && !ma->cat_r) { /* the halves of eh_proj's 16-bit input, in place */
      o->rmsnorm_forward(NULL, ma->en_rstd, ma->emb, mt->enorm->weight, T, H, eps, ma->eh_h, 2 * H,
                         m->ct);
      o->rmsnorm_forward(NULL, ma->hn_rstd, h_prev, mt->hnorm->weight, T, H, eps, ma->eh_h + H,
                         2 * H, m->ct);
    } else {
      o->rmsnorm_forward(ma->en, ma->en_rstd, ma->emb, mt->enorm->weight, T, H, eps, NULL, H,
                         m->ct);
      o->rmsnorm_forward(ma->hn, ma->hn_rstd, h_prev, mt->hnorm->weight, T, H, eps, NULL, H, m->ct);
      o->copy2d(ma->cat_r, 2 * H, ma->en, H, T, H); /* embedding first, hidden second */
      o->copy2d(ma->cat_r + H, 2 * H, ma->hn, H, T, H);
      rc_linear_round_input(m, mt->eh_proj, ma->cat_r, ma->cat_r, TH * 2);
    }
    ma->call_eh = rc_linear_forward(m, mt->eh_proj, ma->cat_r, ma->eh_h, ma->x, T, NULL);
    rc_layer_forward(m, mtp_trm(m, k), a, ma->x);
    o->rmsnorm_forward(ma->hk, ma->hk_rstd, a->y, mt->final_norm->weight, T, H, eps, ma->head_h, H,
                       m->ct);
    ma->head_in = rc_linear_round_input(m, m->head, ma->hk_r, ma->hk, TH);
    h_prev = ma->hk;
  }
}

/* Backward through MTP depth k's layer call: its gradient reaches the
 * embedding and, through hnorm, d_h[k - 1]. */
static void backward_mtp_depth(rc_model *m, int k) {
  const rc_ops *o = m->ops;
  int T = m->T, H = m->H;
  size_t TH = (size_t)T * H;
  rc_mtp_layer *mt = mtp_layer(m, k);
  struct rc_mtp_act *ma = &m->mtp_acts[k];
  struct rc_layer_act *a = &m->acts[m->cfg.layers + k - 1];
  float *d_x = m->d_resid; /* the gradient at the layer's output, then at its input */
  /* the residual gradient in 16 bits for the half linear that takes it:
   * the layer's fc2, then eh_proj (model.h resid_half) */
  rc_layer *trm = mtp_trm(m, k);
  uint16_t *top_h = rc_layer_takes_dy_half(m, trm) ? m->resid_half : NULL;
  uint16_t *eh_h = m->resid_half && rc_linear_is_half(m, mt->eh_proj) ? m->resid_half : NULL;
  /* written, not added to: as from zero, without zeroing d_x first */
  o->rmsnorm_backward(d_x, mt->final_norm->main_grad, m->d_h[k], a->y, mt->final_norm->weight,
                      ma->hk_rstd, T, H, H, top_h, m->ct, false);
  rc_layer_backward(m, trm, a, d_x, top_h, eh_h);
  rc_linear_round_input(m, mt->eh_proj, d_x, d_x, TH);
  float *d_cat = m->d_big;
  rc_linear_backward(m, mt->eh_proj, ma->call_eh, d_x, eh_h, ma->cat_r, d_cat, T, NULL);
  /* the two norms read their halves of d_cat in place (ops.h ld_dout) */
  float *d_emb = m->d_xm;
  o->rmsnorm_backward(d_emb, mt->enorm->main_grad, d_cat, ma->emb, mt->enorm->weight, ma->en_rstd,
                      T, H, 2 * H, NULL, m->ct, false);
  /* detached heads (docs/design.md §3.5): the embedding and, at depth 1,
   * the decoder's output are constants to the MTP loss; the norms' weights
   * still get their gradients, the input gradient of depth 1's hnorm goes
   * to scratch (d_tmp) instead of the decoder's d_h[0] */
  bool detach = m->cfg.mtp_detach_heads;
  if (!detach) o->embedding_backward(m->embedding->main_grad, m->ids_dev[k], d_emb, T, H, m->V);
  const float *h_prev_k = k == 1 ? m->h0 : m->mtp_acts[k - 1].hk;
  bool sink = detach && k == 1;
  o->rmsnorm_backward(sink ? m->d_tmp : m->d_h[k - 1], mt->hnorm->main_grad, d_cat + H, h_prev_k,
                      mt->hnorm->weight, ma->hn_rstd, T, H, 2 * H, NULL, m->ct, !sink);
}

/* Backward: the final norm, decoder layers L..1, the embedding. */
static void backward_decoder(rc_model *m) {
  const rc_ops *o = m->ops;
  int T = m->T, H = m->H, L = m->cfg.layers;
  float *dy = m->d_resid; /* each layer's backward turns it into its input's gradient */
  const float *dec_out = L > 0 ? m->acts[L - 1].y : m->emb_out;
  /* each gradient that enters a layer also in 16 bits when that layer's fc2
   * takes it (model.h resid_half): from the final norm, then from each
   * layer's last norm for the layer below */
  uint16_t *top_h = L > 0 && rc_layer_takes_dy_half(m, &m->layers[L - 1]) ? m->resid_half : NULL;
  o->rmsnorm_backward(dy, m->final_norm->main_grad, m->d_h[0], dec_out, m->final_norm->weight,
                      m->h0_rstd, T, H, H, top_h, m->ct, false); /* written: as from zero */
  const uint16_t *dy_h = top_h;
  for (int l = L - 1; l >= 0; l--) {
    uint16_t *dx_h = l > 0 && rc_layer_takes_dy_half(m, &m->layers[l - 1]) ? m->resid_half : NULL;
    rc_layer_backward(m, &m->layers[l], &m->acts[l], dy, dy_h, dx_h);
    dy_h = dx_h;
  }
  o->embedding_backward(m->embedding->main_grad, m->ids_dev[0], dy, T, H, m->V);
}

/* Whether an op could not allocate its scratch (ops.h alloc_failed): then
 * the step's first failure, RC_EXIT_RESOURCES, which the leg stops on
 * before it traces or saves anything the skipped op left behind. */
static bool op_alloc_failed(rc_model *m) {
  size_t bytes = 0;
  char what[128];
  int failed = m->ops->alloc_failed(&bytes, what, sizeof what);
  if (!failed) return false;
  if (!m->dist_rc) {
    char why[800];
    rc_model_describe_refusal(failed == 2, why, sizeof why);
    m->dist_rc = rc_fail(&m->dist_err, RC_EXIT_RESOURCES,
                         "the %s backend could not allocate %zu bytes of scratch for %s: %s; the "
                         "step stopped",
                         m->ops->name, bytes, what, why);
  }
  return true;
}

void rc_model_microbatch_io(rc_model *m, int32_t **ids, int32_t **labels, float **mask,
                            double *loss, double *mtp_loss, double *mtp_acc, int64_t *tokens) {
  int T = m->T, D = m->D;
  if (m->dist_rc) { /* the step already failed: nothing more is computed */
    *loss = 0, *tokens = 0, m->mb_main_numerator = 0;
    for (int k = 0; k < D; k++) mtp_loss[k] = mtp_acc[k] = 0;
    return;
  }
  for (int i = 0; i < m->nlinears; i++) m->linears[i].ncalls = 0;
  m->aux_loss = 0;
  size_t heads_T = (size_t)T * (D + 1);
  float *dloss = m->heads_host;
  float *losses_host = dloss + heads_T, *correct_host = losses_host + heads_T;
  double n_valid[RC_MAX_MTP_DEPTH + 1];
  microbatch_upload(m, ids, labels, mask, dloss, n_valid);
  *tokens = (int64_t)n_valid[0];
  rc_model_profile_mark(m, RC_PROF_DATA);
  forward_decoder(m);
  rc_model_profile_mark(m, RC_PROF_FWD_DECODER);
  forward_mtp(m);
  rc_model_profile_mark(m, RC_PROF_FWD_MTP);
  const rc_ops *o = m->ops;
  o->to_device(m->ce_dloss, dloss, sizeof(float) * heads_T);
  if (rc_model_heads_one_at_a_time(&m->cfg)) {
    for (int i = 0; i <= D; i++) { /* main head, then MTP heads D..1 */
      int k = i == 0 ? 0 : D + 1 - i;
      int call = head_forward(m, k);
      rc_model_profile_mark(m, RC_PROF_FWD_HEADS);
      head_backward(m, k, call);
      rc_model_profile_mark(m, RC_PROF_BWD_HEADS);
    }
  } else {
    /* forward: MTP heads 1..D, then the main head (loss and dlogits in
     * place); backward: main head, then MTP heads D..1 */
    int head_call[RC_MAX_MTP_DEPTH + 1];
    for (int k = 1; k <= D; k++) head_call[k] = head_forward(m, k);
    head_call[0] = head_forward(m, 0);
    rc_model_profile_mark(m, RC_PROF_FWD_HEADS);
    for (int i = 0; i <= D; i++) {
      int k = i == 0 ? 0 : D + 1 - i;
      head_backward(m, k, head_call[k]);
    }
    rc_model_profile_mark(m, RC_PROF_BWD_HEADS);
  }
  /* the losses read back once the heads are done: the read drains the
   * stream, and what the host queues next (the backward of the MTP layers
   * and the decoder) keeps the GPU busy while it returns and prepares the
   * next microbatch; read at the end, the GPU would idle through that */
  o->to_host(losses_host, m->ce_losses, sizeof(float) * heads_T);
  o->to_host(correct_host, m->ce_correct, sizeof(float) * heads_T);
  for (int k = 1; k <= D; k++) {
    double ls, cs;
    head_sums(m, k, losses_host, correct_host, mask[k], &ls, &cs);
    mtp_loss[k - 1] = ls / (n_valid[k] > 0 ? n_valid[k] : 1);
    mtp_acc[k - 1] = cs / (n_valid[k] > 0 ? n_valid[k] : 1);
  }
  double ls, cs;
  head_sums(m, 0, losses_host, correct_host, mask[0], &ls, &cs);
  *loss = ls / (n_valid[0] > 0 ? n_valid[0] : 1);
  /* the main loss's numerator under a global denominator (model.h) */
  m->mb_main_numerator = ls;
  if (m->hp.main_denominator == RC_DENOM_SEQUENCES) {
    m->mb_main_numerator = 0;
    for (int b = 0; b < m->B; b++) {
      double n = sample_tokens(m, mask[0], b), sum = 0;
      for (int s = 0; s < m->S; s++) {
        size_t t = (size_t)b * m->S + s;
        sum += mask[0][t] ? (double)losses_host[t] : 0.0;
      }
      if (n > 0) m->mb_main_numerator += sum / n;
    }
  }
  rc_model_profile_mark(m, RC_PROF_FWD_HEADS);
  for (int k = D; k >= 1; k--) backward_mtp_depth(m, k);
  rc_model_profile_mark(m, RC_PROF_BWD_MTP);
  backward_decoder(m);
  rc_model_profile_mark(m, RC_PROF_BWD_DECODER);
  m->grads_dirty = true;
  (void)op_alloc_failed(m);
}
