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
 * Every buffer of the model, backend or host, is made by the one allocator
 * of model_memory.c, which records it (m->blocks). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/numeric.h"
#include "core/linear.h"
#include "core/model_internal.h"

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
  p->weight = rc_model_alloc(m, RC_MEM_WEIGHTS, p->numel, "weight");
  p->main_grad = rc_model_alloc(m, RC_MEM_MAIN_GRAD, p->numel, "main_grad");
  p->exp_avg = rc_model_alloc(m, RC_MEM_OPTIMIZER, p->numel, "exp_avg");
  p->exp_avg_sq = rc_model_alloc(m, RC_MEM_OPTIMIZER, p->numel, "exp_avg_sq");
  return p;
}

static rc_param *add_norm(rc_model *m, const char *prefix, const char *name) {
  char buf[160];
  snprintf(buf, sizeof buf, "%s/%s/weight", prefix, name);
  return add_param(m, buf, 1, m->H, 0, 0, false);
}

/* The fp8 delayed-scaling histories of a linear (host, [history] each). */
static void alloc_amax_histories(rc_model *m, rc_linear *lin) {
  size_t n = (size_t)m->cfg.fp8_amax_history;
  lin->amax_history = rc_model_host_alloc(m, n, sizeof(float), "amax_history");
  lin->amax_history_input = rc_model_host_alloc(m, n, sizeof(float), "amax_history_input");
  lin->amax_history_grad = rc_model_host_alloc(m, n, sizeof(float), "amax_history_grad");
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
  alloc_amax_histories(m, lin);
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
    L->router = add_linear(m, sub, "router", 1, m->H, m->E, false, repeated);
    snprintf(sub, sizeof sub, "%s/mlp/experts", prefix);
    L->fc1 = add_linear(m, sub, "linear_fc1", m->E, m->H, 2 * m->F, true, repeated);
    L->fc2 = add_linear(m, sub, "linear_fc2", m->E, m->F, m->H, true, repeated);
    L->expert_bias = rc_model_alloc(m, RC_MEM_WEIGHTS, (size_t)m->E, "expert_bias");
    L->expert_bias_host = rc_model_host_alloc(m, (size_t)m->E, sizeof(float), "expert_bias_host");
    L->token_counts = rc_model_host_alloc(m, (size_t)m->E, sizeof(double), "token_counts");
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

/* A rounded copy of n floats for lin's GEMM input, or NULL when its GEMMs
 * round themselves (rc_linear_rounds_inputs). */
static float *alloc_rounded(rc_model *m, const rc_linear *lin, rc_mem_kind kind, size_t n,
                            const char *what) {
  return rc_linear_rounds_inputs(m, lin) ? NULL : rc_model_alloc(m, kind, n, what);
}

/* Where a half linear saves n input elements for its wgrad (NULL for the
 * others): 2 bytes each. */
static uint16_t *alloc_half(rc_model *m, const rc_linear *lin, size_t n, const char *what) {
  return rc_linear_is_half(m, lin)
             ? rc_model_alloc_bytes(m, RC_MEM_ACTIVATIONS, (n ? n : 1) * 2, what)
             : NULL;
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
 * (m->fwd_shared, sized for the largest use: fwd_shared_n); anything else
 * keeps its own, which backward reads again. */
static float *own_or_shared(rc_model *m, bool shared, int slot, size_t n, const char *what) {
  if (!shared) return rc_model_alloc(m, RC_MEM_ACTIVATIONS, n, what);
  if (!m->fwd_shared[slot])
    m->fwd_shared[slot] = rc_model_alloc(m, RC_MEM_SCRATCH, m->fwd_shared_n[slot], what);
  return m->fwd_shared[slot];
}

static void alloc_layer_act(rc_model *m, struct rc_layer_act *a, const rc_layer *L) {
  size_t T = (size_t)m->T, H = (size_t)m->H, F = (size_t)m->F, E = (size_t)m->E, K = (size_t)m->K;
  bool moe = L->moe;
  size_t rows = moe ? T * K : T;
  const rc_mem_kind A = RC_MEM_ACTIVATIONS;
  /* ln1 feeds qkv only (its norm's backward reads the layer input); dense
   * ln2 feeds fc1 only (MoE's also the fp32 router, whose wgrad reads it) */
  /* with a half qkv / dense fc1 / fc2 the norm or SwiGLU writes the 16-bit
   * input alone (ops.h out_half): no fp32 ln1, ln2 or sw_r at all */
  a->ln1 = rc_linear_is_half(m, L->qkv) ? NULL : rc_model_alloc(m, A, T * H, "ln1"),
  a->ln1_rstd = rc_model_alloc(m, A, T, "ln1_rstd"),
  a->ln1_r = alloc_rounded(m, L->qkv, A, T * H, "ln1_r");
  /* BF16 attention reads RoPE's bf16 heads, forward and backward: the fp32
   * qkv is only the GEMM's output, one buffer for all layers */
  bool heads = m->attn_ct == RC_COMPUTE_BF16;
  a->qkv = own_or_shared(m, heads, RC_FWD_SHARED_QKV, T * 3 * H, "qkv");
  /* a half qkv's output in 16 bits, what RoPE reads (rc_layer_forward): in
   * the shared slot after the fp32 qkv, which is then the backend's scratch */
  a->qkv_out_h = qkv_out_16(m, L) ? (uint16_t *)(a->qkv + T * 3 * H) : NULL;
  a->heads = heads ? rc_model_alloc_bytes(m, A, T * 3 * H * 2, "attn_heads") : NULL;
  /* the fp32 attention output feeds only the backward's D, which reads it
   * rounded to bf16 (ops.h): a bf16 proj's saved input is that copy */
  bool attn_16 = heads && m->ct == RC_COMPUTE_BF16 && rc_linear_is_half(m, L->proj);
  a->attn = attn_16 ? NULL : rc_model_alloc(m, A, T * H, "attn");
  a->attn_r = alloc_rounded(m, L->proj, A, T * H, "attn_r");
  a->lse = rc_model_alloc(m, A, (size_t)m->B * m->nh * m->S, "lse");
  /* proj and mlp_out only feed their residual adds: shared whatever the precision */
  a->proj = own_or_shared(m, true, RC_FWD_SHARED_OUT, T * H, "proj"),
  a->xm = rc_model_alloc(m, A, T * H, "xm");
  a->ln2 = !moe && rc_linear_is_half(m, L->fc1) ? NULL : rc_model_alloc(m, A, T * H, "ln2"),
  a->ln2_rstd = rc_model_alloc(m, A, T, "ln2_rstd"),
  a->ln2_r = alloc_rounded(m, L->fc1, A, T * H, "ln2_r");
  /* a half fc1's output is 16-bit, as a bf16/fp16 layer's output is */
  bool fc1_16 = rc_linear_is_half(m, L->fc1);
  a->fc1 = fc1_16 ? NULL : rc_model_alloc(m, A, rows * 2 * F, "fc1");
  a->fc1_out_h = fc1_16 ? rc_model_alloc_bytes(m, A, rows * 2 * F * 2, "fc1_out_h") : NULL;
  a->sw_r = rc_linear_is_half(m, L->fc2) ? NULL : rc_model_alloc(m, A, rows * F, "sw_r");
  a->mlp_out = own_or_shared(m, true, RC_FWD_SHARED_OUT, T * H, "mlp_out"),
  a->y = rc_model_alloc(m, A, T * H, "y");
  a->qkv_h = alloc_half(m, L->qkv, T * H, "qkv_h");
  a->proj_h = alloc_half(m, L->proj, T * H, "proj_h");
  a->fc1_h = alloc_half(m, L->fc1, rows * H, "fc1_h");
  /* recomputed in the backward: the one shared buffer (model.h sw_half) */
  a->fc2_h = m->sw_half && rc_linear_is_half(m, L->fc2) ? m->sw_half
                                                        : alloc_half(m, L->fc2, rows * F, "fc2_h");
  if (moe) {
    a->router_logits = rc_model_alloc(m, A, T * E, "router_logits");
    a->probs = rc_model_alloc(m, A, T * E, "probs");
    a->topk_w = rc_model_alloc(m, A, T * K, "topk_w");
    /* a half fc1 reads the rows the gather writes in 16 bits (fc1_h): no fp32 copy */
    a->xs = rc_linear_is_half(m, L->fc1) ? NULL : rc_model_alloc(m, A, T * K * H, "xs");
    a->e_out = rc_model_alloc(m, A, T * K * H, "e_out");
    a->aux_grad = rc_model_alloc(m, A, E, "aux_grad");
    a->topk_idx = rc_model_alloc_bytes(m, A, T * K * sizeof(int32_t), "topk_idx");
    a->perm = rc_model_alloc_bytes(m, A, T * K * sizeof(int32_t), "perm");
    a->inv_perm = rc_model_alloc_bytes(m, A, T * K * sizeof(int32_t), "inv_perm");
    a->offsets = rc_model_alloc_bytes(m, A, (E + 1) * sizeof(int32_t), "offsets");
    a->group_rows = rc_model_host_alloc(m, E, sizeof(int), "group_rows");
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
  float *ones = malloc(n_ones * sizeof(float));
  if (!ones) return rc_fail(err, RC_EXIT_RESOURCES, "model: out of host memory (init buffer)");
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

/* The sizes, the memory check and the allocation record: everything that
 * can refuse the config comes before any buffer is made. */
static int model_setup(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank,
                       rc_err *err) {
  memset(m, 0, sizeof *m);
  m->ops = ops;
  m->cfg = *cfg;
  m->rank = rank;
  const rc_config *c = &m->cfg;
  m->B = c->micro_batch, m->S = c->seq_len, m->T = m->B * m->S;
  m->H = c->hidden, m->V = c->vocab, m->F = c->ffn, m->nh = c->heads, m->hd = c->hidden / c->heads;
  m->E = c->experts, m->K = c->topk, m->D = c->mtp_depths;
  if (m->E > 1024) return rc_fail(err, RC_EXIT_USAGE, "--experts above 1024 is not supported");
  /* Refuse what cannot fit before allocating any of it: the backends' alloc
   * aborts on failure, and a config of in-range sizes can ask for terabytes.
   * On the CPU "device" memory is host memory. Device memory of other
   * backends is not known here yet (0 = not checked). */
  rc_memory_need need;
  rc_model_memory_need(c, &need);
  bool on_host = !strcmp(ops->name, "cpu");
  uint64_t host_avail = rc_host_memory_available();
  int mrc = rc_model_memory_check(&need, on_host, on_host ? host_avail : 0, host_avail, err);
  if (mrc) return mrc;
  /* the record of every buffer, as long as the need counts them */
  m->cap_blocks = (int)(need.n_allocs + need.n_host_allocs);
  m->blocks = calloc((size_t)m->cap_blocks, sizeof *m->blocks);
  if (!m->blocks) {
    m->cap_blocks = 0;
    return rc_fail(err, RC_EXIT_RESOURCES, "model: out of host memory (allocation record)");
  }
  m->ct = c->precision == RC_PREC_FP32   ? RC_COMPUTE_FP32
          : c->precision == RC_PREC_FP16 ? RC_COMPUTE_FP16
                                         : RC_COMPUTE_BF16;
  m->attn_ct = c->attention_precision == RC_PREC_BF16 ? RC_COMPUTE_BF16 : RC_COMPUTE_FP32;
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
    alloc_amax_histories(m, h);
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
  add_output_head(m);
}

/* The weights as forward uses them: 16-bit copies in the compute type
 * unless fp32 (the router is always fp32), the e4m3 cache and its transpose for fp8 linears, and a
 * wgrad scratch where fusion is off. */
static void alloc_weight_copies(rc_model *m) {
  const rc_config *c = &m->cfg;
  for (int i = 0; i < m->nlinears; i++) {
    rc_linear *lin = &m->linears[i];
    bool is_router = strstr(lin->name, "/router") != NULL;
    if (lin->te_style && c->precision == RC_PREC_FP8) {
      size_t g = (size_t)lin->groups;
      lin->in_pad = rc_fp8_pad(lin->in), lin->out_pad = rc_fp8_pad(lin->out);
      lin->wq8 = rc_model_alloc_bytes(m, RC_MEM_WEIGHT_COPIES,
                                      g * (size_t)lin->out * (size_t)lin->in_pad, "wq8");
      lin->wq8_t = rc_model_alloc_bytes(m, RC_MEM_WEIGHT_COPIES,
                                        g * (size_t)lin->in * (size_t)lin->out_pad, "wq8_t");
      lin->fp8_slot = m->fp8_slots++;
    } else if (m->ct == RC_COMPUTE_FP32 || is_router) {
      lin->wq = lin->w->weight;
    } else {
      lin->wq_half = rc_model_alloc_bytes(m, RC_MEM_WEIGHT_COPIES, lin->w->numel * 2, "wq_half");
    }
    if (lin->te_style && !c->grad_accum_fusion)
      lin->wgrad_scratch =
          rc_model_alloc(m, RC_MEM_WEIGHT_COPIES, (size_t)lin->in * lin->out, "wgrad_scratch");
  }
}

/* fp8: the running amaxes and the two cast buffers, sized for the largest
 * operand any fp8 GEMM casts: at most T rows a call (a token reaches an
 * expert once), padded widths (rc_fp8_scratch_bytes). */
static void alloc_fp8(rc_model *m) {
  if (!m->fp8_slots) return;
  m->fp8_amax =
      rc_model_alloc(m, RC_MEM_SCRATCH, RC_FP8_AMAX_SLOT * (size_t)m->fp8_slots, "fp8_amax");
  m->fp8_amax_host = rc_model_host_alloc(m, RC_FP8_AMAX_SLOT * (size_t)m->fp8_slots, sizeof(float),
                                         "fp8_amax_host");
  m->fp8_scratch_bytes = rc_fp8_scratch_bytes(&m->cfg);
  m->fp8_a = rc_model_alloc_bytes(m, RC_MEM_SCRATCH, m->fp8_scratch_bytes, "fp8_a");
  m->fp8_b = rc_model_alloc_bytes(m, RC_MEM_SCRATCH, m->fp8_scratch_bytes, "fp8_b");
}

/* One MTP depth's activations (depth k >= 1). */
static void alloc_mtp_act(rc_model *m, int k) {
  size_t T = (size_t)m->T, H = (size_t)m->H;
  alloc_layer_act(m, &m->acts[m->cfg.layers + k - 1], mtp_trm(m, k));
  struct rc_mtp_act *ma = &m->mtp_acts[k];
  const rc_mem_kind A = RC_MEM_ACTIVATIONS;
  /* a half eh_proj's [embedding | hidden] input is written by the two norms
   * straight into its 16-bit copy (eh_h, ops.h ld_half): no fp32 en, hn or
   * concatenation at all */
  bool eh_16 = rc_linear_is_half(m, mtp_layer(m, k)->eh_proj);
  ma->emb = rc_model_alloc(m, A, T * H, "mtp emb");
  ma->en = eh_16 ? NULL : rc_model_alloc(m, A, T * H, "mtp en");
  ma->en_rstd = rc_model_alloc(m, A, T, "mtp en_rstd");
  ma->hn = eh_16 ? NULL : rc_model_alloc(m, A, T * H, "mtp hn");
  ma->hn_rstd = rc_model_alloc(m, A, T, "mtp hn_rstd");
  ma->cat_r = eh_16 ? NULL : rc_model_alloc(m, A, T * 2 * H, "mtp cat_r");
  ma->x = rc_model_alloc(m, A, T * H, "mtp x");
  ma->hk = rc_model_alloc(m, A, T * H, "mtp hk");
  ma->hk_rstd = rc_model_alloc(m, A, T, "mtp hk_rstd");
  ma->hk_r = alloc_rounded(m, m->head, A, T * H, "mtp hk_r");
  ma->eh_h = alloc_half(m, mtp_layer(m, k)->eh_proj, T * 2 * H, "mtp eh_h");
  ma->head_h = alloc_half(m, m->head, T * H, "mtp head_h");
}

/* Selective recompute of the SwiGLU output (model.h sw_half), for the half
 * fc2s, unless RC_KEEP_SWIGLU_OUTPUT=1 asks for a saved output per layer
 * (the same bits: tests/core_swiglu_recompute.sh). Costs one 16-bit write
 * per layer in SwiGLU's backward; saves [rows, F] 16-bit values a layer. */
static void alloc_swiglu_recompute(rc_model *m) {
  if (!rc_swiglu_recompute_on()) return;
  size_t rows = 0, T = (size_t)m->T, K = (size_t)m->K;
  for (int l = 0; l < m->cfg.layers + m->D; l++) {
    const rc_layer *L = l < m->cfg.layers ? &m->layers[l] : mtp_trm(m, l - m->cfg.layers + 1);
    if (rc_linear_is_half(m, L->fc2)) rows = max_sz(rows, L->moe ? T * K : T);
  }
  if (!rows) return;
  m->sw_half = rc_model_alloc_bytes(m, RC_MEM_SCRATCH, rows * (size_t)m->F * 2, "sw_half");
  m->fc2_dy_half_elems = rows * (size_t)m->H;
  m->fc2_dy_half = rc_model_alloc_bytes(m, RC_MEM_SCRATCH, m->fc2_dy_half_elems * 2, "fc2_dy_half");
}

/* The activations of every layer and depth, and the heads' inputs. */
static int alloc_activations(rc_model *m, rc_err *err) {
  const rc_config *c = &m->cfg;
  int n_acts = c->layers + m->D;
  m->acts = rc_model_host_alloc(m, (size_t)n_acts, sizeof *m->acts, "acts");
  m->mtp_acts = rc_model_host_alloc(m, (size_t)(m->D + 1), sizeof *m->mtp_acts, "mtp_acts");
  if (!m->acts || !m->mtp_acts)
    return rc_fail(err, RC_EXIT_RESOURCES, "model: out of host memory (activation tables)");
  size_t T = (size_t)m->T, H = (size_t)m->H;
  m->fwd_shared_n[RC_FWD_SHARED_OUT] = T * H;
  bool qkv_16 = false; /* any layer's qkv writes 16 bits: its slot holds them too */
  for (int l = 0; l < c->layers; l++) qkv_16 = qkv_16 || qkv_out_16(m, &m->layers[l]);
  for (int k = 1; k <= m->D; k++) qkv_16 = qkv_16 || qkv_out_16(m, mtp_trm(m, k));
  m->fwd_shared_n[RC_FWD_SHARED_QKV] = T * 3 * H + (qkv_16 ? (T * 3 * H + 1) / 2 : 0);
  alloc_swiglu_recompute(m);
  for (int l = 0; l < c->layers; l++) alloc_layer_act(m, &m->acts[l], &m->layers[l]);
  for (int k = 1; k <= m->D; k++) alloc_mtp_act(m, k);
  const rc_mem_kind A = RC_MEM_ACTIVATIONS;
  m->emb_out = rc_model_alloc(m, A, T * H, "emb_out");
  m->h0 = rc_model_alloc(m, A, T * H, "h0"), m->h0_rstd = rc_model_alloc(m, A, T, "h0_rstd"),
  m->h0_r = alloc_rounded(m, m->head, A, T * H, "h0_r");
  m->head_h0 = alloc_half(m, m->head, T * H, "head_h0");
  return RC_OK;
}

/* The heads' logits and the backward's scratch, sized for the largest use. */
static void alloc_scratch(rc_model *m) {
  size_t T = (size_t)m->T, H = (size_t)m->H, V = (size_t)m->V;
  const rc_mem_kind A = RC_MEM_ACTIVATIONS, SCR = RC_MEM_SCRATCH;
  bool half_head = rc_linear_is_half(m, m->head);
  int n_logits = rc_model_heads_one_at_a_time(&m->cfg) ? 1 : m->D + 1;
  for (int k = 0; k <= m->D; k++) {
    /* a half head's logits are 16-bit (gemm_to_half), and the cross-entropy
     * writes their gradient over them: one [T, V] 16-bit buffer per depth,
     * or one for all */
    if (k < n_logits) {
      m->logits[k] = half_head ? NULL : rc_model_alloc(m, A, T * V, "logits");
      m->dlogits_half[k] = half_head ? rc_model_alloc_bytes(m, A, T * V * 2, "dlogits_half") : NULL;
    } else {
      m->logits[k] = m->logits[0], m->dlogits_half[k] = m->dlogits_half[0];
    }
    m->ids_dev[k] = rc_model_alloc_bytes(m, SCR, T * sizeof(int32_t), "ids");
    m->labels_dev[k] = rc_model_alloc_bytes(m, SCR, T * sizeof(int32_t), "labels");
    m->d_h[k] = rc_model_alloc(m, SCR, T * H, "d_h");
  }
  /* per depth, [D+1][T]: the heads' losses come back in one read a microbatch */
  size_t heads_T = (size_t)(m->D + 1) * T;
  m->ce_losses = rc_model_alloc(m, SCR, heads_T, "ce_losses");
  m->ce_correct = rc_model_alloc(m, SCR, heads_T, "ce_correct");
  m->ce_dloss = rc_model_alloc(m, SCR, heads_T, "ce_dloss");
  /* the host's side of them: dloss, then the losses and flags read back */
  m->heads_host = rc_model_host_alloc(m, 3 * heads_T, sizeof(float), "heads_host");
  size_t K = (size_t)m->K, F = (size_t)m->F, E = (size_t)m->E;
  size_t big =
      max_sz(max_sz(T * 3 * H, T * 2 * F), max_sz(T * K * 2 * F, max_sz(T * K * H, T * E)));
  big = max_sz(big, T * 2 * H);
  m->d_big = rc_model_alloc(m, SCR, big, "d_big"),
  m->d_big2 = rc_model_alloc(m, SCR, big, "d_big2");
  m->d_resid = rc_model_alloc(m, SCR, T * H, "d_resid");
  m->d_tmp = rc_model_alloc(m, SCR, T * H, "d_tmp"),
  m->d_xm = rc_model_alloc(m, SCR, T * H, "d_xm"), m->d_ln = rc_model_alloc(m, SCR, T * H, "d_ln");
  m->d_topk_w = rc_model_alloc(m, SCR, T * K, "d_topk_w");
  /* the half linears' output gradients: any linear but the head */
  m->dy_half_elems = 0;
  for (int i = 0; i < m->nlinears; i++) {
    const rc_linear *lin = &m->linears[i];
    size_t rows = lin->groups > 1 ? T * K : T; /* an expert GEMM sees T*k rows at most */
    if (lin != m->head && rc_linear_is_half(m, lin))
      m->dy_half_elems = max_sz(m->dy_half_elems, rows * (size_t)lin->out);
  }
  if (m->dy_half_elems) m->dy_half = rc_model_alloc_bytes(m, SCR, m->dy_half_elems * 2, "dy_half");
  if (m->dy_half_elems) m->resid_half = rc_model_alloc_bytes(m, SCR, T * H * 2, "resid_half");
}

/* The allocation order is the order of the record and of the backend's
 * buffers: kept as it was, parameters first. */
static int model_init(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank,
                      bool draw_weights, rc_err *err) {
  int rc = model_setup(m, cfg, ops, rank, err);
  if (rc) return rc;
  const rc_config *c = &m->cfg;
  add_params(m);
  alloc_weight_copies(m);
  /* a host allocation failed (or the record could not grow): an error
   * before the weights are drawn into the buffers */
  if (m->alloc_failed)
    return rc_fail(err, RC_EXIT_RESOURCES, "model: out of host memory (small host buffers)");
  if (draw_weights) {
    rc = init_weights(m, err);
    if (rc) return rc;
  } else {
    rc_model_profile_note("model init: weight draws skipped (a load sets them)", 0);
  }
  rc = alloc_activations(m, err);
  if (rc) return rc;
  alloc_scratch(m);
  alloc_fp8(m);
  if (m->alloc_failed)
    return rc_fail(err, RC_EXIT_RESOURCES, "model: out of host memory (small host buffers)");
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

/* Uploads the microbatch's ids and labels and fills dloss with the
 * per-token loss weights: J = [CE0/N0 + lambda/D sum_k CE_k/N_k] / M, times
 * the loss scale. n_valid[k] is depth k's count of unmasked tokens. */
static void microbatch_upload(rc_model *m, int32_t **ids, int32_t **labels, float **mask,
                              float *dloss, double *n_valid) {
  const rc_ops *o = m->ops;
  const rc_config *c = &m->cfg;
  int T = m->T, D = m->D;
  for (int k = 0; k <= D; k++) {
    o->to_device(m->ids_dev[k], ids[k], sizeof(int32_t) * (size_t)T);
    o->to_device(m->labels_dev[k], labels[k], sizeof(int32_t) * (size_t)T);
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
  o->embedding_backward(m->embedding->main_grad, m->ids_dev[k], d_emb, T, H, m->V);
  const float *h_prev_k = k == 1 ? m->h0 : m->mtp_acts[k - 1].hk;
  o->rmsnorm_backward(m->d_h[k - 1], mt->hnorm->main_grad, d_cat + H, h_prev_k, mt->hnorm->weight,
                      ma->hn_rstd, T, H, 2 * H, NULL, m->ct, true);
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

void rc_model_microbatch_io(rc_model *m, int32_t **ids, int32_t **labels, float **mask,
                            double *loss, double *mtp_loss, double *mtp_acc, int64_t *tokens) {
  int T = m->T, D = m->D;
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
  rc_model_profile_mark(m, RC_PROF_FWD_HEADS);
  for (int k = D; k >= 1; k--) backward_mtp_depth(m, k);
  rc_model_profile_mark(m, RC_PROF_BWD_MTP);
  backward_decoder(m);
  rc_model_profile_mark(m, RC_PROF_BWD_DECODER);
  m->grads_dirty = true;
}
