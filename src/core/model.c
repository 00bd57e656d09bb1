/* model.c — building the model (parameters, linears, activation buffers) and
 * one microbatch's forward and backward through decoder, MTP and heads.
 *
 * Forward order as in Megatron: decoder layers 1..L, MTP layer calls 1..D,
 * MTP heads 1..D, then the main head. Backward is the reverse: main head,
 * MTP heads D..1, MTP layer calls D..1, decoder layers L..1, embedding. The
 * order matters: it decides which forward call of a shared module pairs with
 * which backward, and that pairing is the seed's bug. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/numeric.h"
#include "core/linear.h"
#include "core/model_internal.h"

float *rc_model_alloc(rc_model *m, size_t n) {
  return (float *)m->ops->alloc((n ? n : 1) * sizeof(float));
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
  p->weight = rc_model_alloc(m, p->numel);
  p->main_grad = rc_model_alloc(m, p->numel);
  p->exp_avg = rc_model_alloc(m, p->numel);
  p->exp_avg_sq = rc_model_alloc(m, p->numel);
  return p;
}

static rc_param *add_norm(rc_model *m, const char *prefix, const char *name) {
  char buf[160];
  snprintf(buf, sizeof buf, "%s/%s/weight", prefix, name);
  return add_param(m, buf, 1, m->H, 0, 0, false);
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
  lin->amax_history = calloc((size_t)m->cfg.fp8_amax_history, sizeof(float));
  if (!lin->amax_history) abort();
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
    L->expert_bias = rc_model_alloc(m, (size_t)m->E);
    L->expert_bias_host = calloc((size_t)m->E, sizeof(float));
    L->token_counts = calloc((size_t)m->E, sizeof(double));
    if (!L->expert_bias_host || !L->token_counts) abort();
  } else {
    L->fc1 = add_linear(m, sub, "linear_fc1", 1, m->H, 2 * m->F, true, repeated);
    L->fc2 = add_linear(m, sub, "linear_fc2", 1, m->F, m->H, true, repeated);
  }
}

/* Deterministic init from (seed, parameter index, element): the same on
 * every backend and independent of the order parameters are created in.
 * Element pair (i, i+1) is a pure function of (key, i), so the elements can
 * be filled on several threads in any split with the same bits; a gpu-small
 * model is ~200M Box-Muller draws, seconds on one core. */
typedef struct {
  float *host;
  size_t lo, hi, numel; /* this chunk: pairs starting at even lo .. hi */
  uint64_t key;
  float std;
} init_chunk;

static void fill_normal(const init_chunk *c) {
  for (size_t i = c->lo; i < c->hi; i += 2) {
    uint64_t r = rc_mix64(c->key + i);
    double u1 = ((double)(r >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(rc_mix64(r) >> 11) * (1.0 / 9007199254740992.0);
    double rad = sqrt(-2.0 * log(u1));
    c->host[i] = (float)(c->std * rad * cos(2 * M_PI * u2));
    if (i + 1 < c->numel) c->host[i + 1] = (float)(c->std * rad * sin(2 * M_PI * u2));
  }
}

static void *fill_normal_thread(void *arg) {
  fill_normal(arg);
  return NULL;
}

enum { INIT_MAX_THREADS = 32, INIT_MIN_CHUNK = 1 << 18 };

/* The online CPUs; RC_INIT_THREADS overrides (tests show the split changes
 * no bit: tests/core_init_threads.sh). */
static int init_threads(void) {
  const char *env = getenv("RC_INIT_THREADS");
  long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > INIT_MAX_THREADS ? INIT_MAX_THREADS : (int)n;
}

/* Fills host[0..numel) on up to `threads` threads (this one included); a
 * thread that cannot be started leaves its chunk to this one. */
static void fill_normal_parallel(float *host, size_t numel, uint64_t key, float std, int threads) {
  size_t pairs = (numel + 1) / 2;
  size_t per = (pairs + (size_t)threads - 1) / (size_t)threads;
  if (per * 2 < INIT_MIN_CHUNK) per = INIT_MIN_CHUNK / 2;
  init_chunk chunk[INIT_MAX_THREADS];
  pthread_t tid[INIT_MAX_THREADS];
  bool started[INIT_MAX_THREADS] = {false};
  int n = 0;
  for (size_t lo = 0; lo < numel && n < INIT_MAX_THREADS; lo += 2 * per, n++) {
    size_t hi = lo + 2 * per < numel ? lo + 2 * per : numel;
    chunk[n] = (init_chunk){host, lo, hi, numel, key, std};
    if (n > 0) started[n] = !pthread_create(&tid[n], NULL, fill_normal_thread, &chunk[n]);
  }
  fill_normal(&chunk[0]);
  for (int t = 1; t < n; t++) {
    if (started[t])
      pthread_join(tid[t], NULL);
    else
      fill_normal(&chunk[t]);
  }
}

static void init_param(rc_model *m, rc_param *p, int index, float std, bool ones, int threads) {
  float *host = malloc(p->numel * sizeof(float));
  if (!host) abort();
  if (ones)
    for (size_t i = 0; i < p->numel; i++) host[i] = 1.0f;
  else {
    uint64_t key = rc_mix64(m->cfg.seed ^ 0xA5A5A5A5ull) ^ ((uint64_t)index << 40);
    fill_normal_parallel(host, p->numel, key, std, threads);
  }
  m->ops->to_device(p->weight, host, p->numel * sizeof(float));
  free(host);
}

static size_t max_sz(size_t a, size_t b) {
  return a > b ? a : b;
}

/* The TRM that MTP depth k (1..D) runs: the shared one or its own. */
static rc_layer *mtp_trm(rc_model *m, int k) {
  return &m->mtp[m->cfg.mtp_repeated_layer ? 0 : k - 1].trm;
}

/* A rounded copy of n floats for lin's GEMM input, or NULL when its GEMMs
 * round themselves (rc_linear_rounds_inputs). */
static float *alloc_rounded(rc_model *m, const rc_linear *lin, size_t n) {
  return rc_linear_rounds_inputs(m, lin) ? NULL : rc_model_alloc(m, n);
}

static void alloc_layer_act(rc_model *m, struct rc_layer_act *a, const rc_layer *L) {
  size_t T = (size_t)m->T, H = (size_t)m->H, F = (size_t)m->F, E = (size_t)m->E, K = (size_t)m->K;
  bool moe = L->moe;
  size_t rows = moe ? T * K : T;
  a->ln1 = rc_model_alloc(m, T * H), a->ln1_rstd = rc_model_alloc(m, T),
  a->ln1_r = alloc_rounded(m, L->qkv, T * H);
  a->qkv = rc_model_alloc(m, T * 3 * H);
  a->attn = rc_model_alloc(m, T * H), a->attn_r = alloc_rounded(m, L->proj, T * H);
  a->lse = rc_model_alloc(m, (size_t)m->B * m->nh * m->S);
  a->proj = rc_model_alloc(m, T * H), a->xm = rc_model_alloc(m, T * H);
  a->ln2 = rc_model_alloc(m, T * H), a->ln2_rstd = rc_model_alloc(m, T),
  a->ln2_r = alloc_rounded(m, L->fc1, T * H);
  a->fc1 = rc_model_alloc(m, rows * 2 * F), a->sw_r = rc_model_alloc(m, rows * F);
  a->mlp_out = rc_model_alloc(m, T * H), a->y = rc_model_alloc(m, T * H);
  if (moe) {
    a->router_logits = rc_model_alloc(m, T * E), a->probs = rc_model_alloc(m, T * E);
    a->topk_w = rc_model_alloc(m, T * K), a->xs = rc_model_alloc(m, T * K * H);
    a->e_out = rc_model_alloc(m, T * K * H), a->aux_grad = rc_model_alloc(m, E);
    a->topk_idx = m->ops->alloc(T * K * sizeof(int32_t));
    a->perm = m->ops->alloc(T * K * sizeof(int32_t));
    a->inv_perm = m->ops->alloc(T * K * sizeof(int32_t));
    a->offsets = m->ops->alloc((E + 1) * sizeof(int32_t));
    a->group_rows = calloc(E, sizeof(int));
    if (!a->group_rows) abort();
  }
}

int rc_model_init(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank, rc_err *err) {
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
  /* parameters, in a fixed order: the order of the shards and fingerprints */
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
  if (c->tie_embeddings) {
    if (m->nlinears == RC_MAX_LINEARS) abort();
    rc_linear *h = &m->linears[m->nlinears++];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "output_layer");
    h->w = m->embedding, h->groups = 1, h->in = m->H, h->out = m->V, h->flag = RC_FLAG_TRUE;
    h->amax_history = calloc((size_t)c->fp8_amax_history, sizeof(float));
    m->head = h;
  } else {
    m->head = add_linear(m, "", "output_layer", 1, m->H, m->V, c->te_output_head, false);
    memmove(m->head->name, "output_layer", sizeof "output_layer");
    snprintf(m->head->w->name, sizeof m->head->w->name, "output_layer/weight");
  }
  m->head_param = m->head->w;
  /* weights as used by forward: rounded copies unless fp32 (router always fp32) */
  for (int i = 0; i < m->nlinears; i++) {
    rc_linear *lin = &m->linears[i];
    bool is_router = strstr(lin->name, "/router") != NULL;
    lin->wq =
        (m->ct == RC_COMPUTE_FP32 || is_router) && !(lin->te_style && c->precision == RC_PREC_FP8)
            ? lin->w->weight
            : rc_model_alloc(m, lin->w->numel);
    if (lin->te_style && !c->grad_accum_fusion)
      lin->wgrad_scratch = rc_model_alloc(m, (size_t)lin->in * lin->out);
  }
  /* init: N(0, std), output projections scaled by 1/sqrt(2L) as in GPT-2 */
  int threads = init_threads();
  for (int i = 0; i < m->nparams; i++) {
    rc_param *p = &m->params[i];
    bool norm = p->ndim == 1;
    float std = (float)c->init_std;
    if (strstr(p->name, "linear_proj") || strstr(p->name, "linear_fc2"))
      std /= sqrtf(2.0f * c->layers);
    init_param(m, p, i, std, norm, threads);
  }
  /* activations */
  int n_acts = c->layers + m->D;
  m->acts = calloc((size_t)n_acts, sizeof *m->acts);
  m->mtp_acts = calloc((size_t)(m->D + 1), sizeof *m->mtp_acts);
  if (!m->acts || !m->mtp_acts) abort();
  for (int l = 0; l < c->layers; l++) alloc_layer_act(m, &m->acts[l], &m->layers[l]);
  size_t T = (size_t)m->T, H = (size_t)m->H, V = (size_t)m->V;
  for (int k = 1; k <= m->D; k++) {
    alloc_layer_act(m, &m->acts[c->layers + k - 1], mtp_trm(m, k));
    struct rc_mtp_act *ma = &m->mtp_acts[k];
    ma->emb = rc_model_alloc(m, T * H);
    ma->en = rc_model_alloc(m, T * H), ma->en_rstd = rc_model_alloc(m, T);
    ma->hn = rc_model_alloc(m, T * H), ma->hn_rstd = rc_model_alloc(m, T);
    ma->cat_r = rc_model_alloc(m, T * 2 * H), ma->x = rc_model_alloc(m, T * H);
    ma->hk = rc_model_alloc(m, T * H), ma->hk_rstd = rc_model_alloc(m, T),
    ma->hk_r = alloc_rounded(m, m->head, T * H);
  }
  m->emb_out = rc_model_alloc(m, T * H);
  m->h0 = rc_model_alloc(m, T * H), m->h0_rstd = rc_model_alloc(m, T),
  m->h0_r = alloc_rounded(m, m->head, T * H);
  for (int k = 0; k <= m->D; k++) {
    m->logits[k] = rc_model_alloc(m, T * V);
    m->ids_dev[k] = m->ops->alloc(T * sizeof(int32_t));
    m->labels_dev[k] = m->ops->alloc(T * sizeof(int32_t));
    m->d_h[k] = rc_model_alloc(m, T * H);
  }
  m->ce_losses = rc_model_alloc(m, T), m->ce_correct = rc_model_alloc(m, T),
  m->ce_dloss = rc_model_alloc(m, T);
  size_t K = (size_t)m->K, F = (size_t)m->F, E = (size_t)m->E;
  size_t big =
      max_sz(max_sz(T * 3 * H, T * 2 * F), max_sz(T * K * 2 * F, max_sz(T * K * H, T * E)));
  big = max_sz(big, T * 2 * H);
  m->d_big = rc_model_alloc(m, big), m->d_big2 = rc_model_alloc(m, big);
  m->d_resid = rc_model_alloc(m, 2 * T * H);
  m->d_tmp = rc_model_alloc(m, T * H), m->d_xm = rc_model_alloc(m, T * H),
  m->d_ln = rc_model_alloc(m, T * H);
  m->d_topk_w = rc_model_alloc(m, T * K);
  m->scratch_round = alloc_rounded(m, m->head, T * V); /* the logits' gradient, rounded */
  /* state */
  m->loss_scale = c->precision == RC_PREC_FP16 ? c->initial_loss_scale : 1.0;
  m->hysteresis_tracker = c->hysteresis;
  m->rng_seed = rc_mix64(c->seed ^ 0xD1B54A32D192ED03ull) + (uint64_t)rank; /* per-rank stream */
  return 0;
}

static void free_layer_act(const rc_ops *o, struct rc_layer_act *a) {
  float *bufs[] = {a->ln1,    a->ln1_rstd, a->ln1_r,   a->qkv,     a->attn,          a->attn_r,
                   a->lse,    a->proj,     a->xm,      a->ln2,     a->ln2_rstd,      a->ln2_r,
                   a->fc1,    a->sw_r,     a->mlp_out, a->y,       a->router_logits, a->probs,
                   a->topk_w, a->xs,       a->e_out,   a->aux_grad};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) o->free(bufs[i]);
  o->free(a->topk_idx), o->free(a->perm), o->free(a->inv_perm), o->free(a->offsets);
  free(a->group_rows);
}

static void free_layer(const rc_ops *o, rc_layer *L) {
  o->free(L->expert_bias);
  free(L->expert_bias_host), free(L->token_counts);
}

/* Frees everything rc_model_init allocated, backend buffers included, so a
 * leg is clean under LeakSanitizer. Safe on a partly initialised model:
 * pointers never allocated are NULL (the model is zeroed first) and the
 * backends' free accepts NULL. */
void rc_model_free(rc_model *m) {
  const rc_ops *o = m->ops;
  if (!o) return;
  for (int i = 0; i < m->nparams; i++) {
    rc_param *p = &m->params[i];
    o->free(p->weight), o->free(p->main_grad), o->free(p->exp_avg), o->free(p->exp_avg_sq);
  }
  for (int i = 0; i < m->nlinears; i++) {
    rc_linear *lin = &m->linears[i];
    free(lin->amax_history);
    /* wq aliases the weight when no rounded copy is needed */
    if (lin->wq && lin->wq != lin->w->weight) o->free(lin->wq);
    o->free(lin->wgrad_scratch);
  }
  for (int l = 0; l < m->cfg.layers; l++) free_layer(o, &m->layers[l]);
  for (int p = 0; p < m->n_mtp_physical; p++) free_layer(o, &m->mtp[p].trm);
  if (m->acts)
    for (int l = 0; l < m->cfg.layers + m->D; l++) free_layer_act(o, &m->acts[l]);
  if (m->mtp_acts)
    for (int k = 1; k <= m->D; k++) {
      struct rc_mtp_act *ma = &m->mtp_acts[k];
      float *bufs[] = {ma->emb,   ma->en, ma->en_rstd, ma->hn,      ma->hn_rstd,
                       ma->cat_r, ma->x,  ma->hk,      ma->hk_rstd, ma->hk_r};
      for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) o->free(bufs[i]);
    }
  free(m->acts), free(m->mtp_acts);
  m->acts = NULL, m->mtp_acts = NULL;
  float *bufs[] = {m->emb_out,   m->h0,         m->h0_rstd,       m->h0_r,
                   m->ce_losses, m->ce_correct, m->ce_dloss,      m->d_big,
                   m->d_big2,    m->d_resid,    m->d_tmp,         m->d_xm,
                   m->d_ln,      m->d_topk_w,   m->scratch_round, m->aux_grad_dev};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) o->free(bufs[i]);
  for (int k = 0; k <= m->D && k < 17; k++) {
    o->free(m->logits[k]), o->free(m->ids_dev[k]), o->free(m->labels_dev[k]), o->free(m->d_h[k]);
  }
  rc_dist_free(m);
  m->nparams = m->nlinears = 0;
  m->ops = NULL;
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void rc_model_profile_mark(rc_model *m, int phase) {
  if (!m->profile) return;
  m->ops->sync();
  double now = wall_s();
  if (m->profile_mark > 0) m->profile_s[phase] += now - m->profile_mark;
  m->profile_mark = now;
}

const char *rc_model_profile_phase_name(int phase) {
  static const char *names[RC_PROFILE_PHASES] = {
      "data and upload",    "forward decoder",
      "forward MTP layers", "forward heads + CE",
      "backward heads",     "backward MTP",
      "backward decoder",   "grad norm, optimizer, fingerprints"};
  return phase >= 0 && phase < RC_PROFILE_PHASES ? names[phase] : "?";
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

static rc_mtp_layer *mtp_layer(rc_model *m, int k) {
  return &m->mtp[m->cfg.mtp_repeated_layer ? 0 : k - 1];
}

/* Head call for depth c: logits, then CE in place (dlogits). Returns the
 * masked loss sum and correct count via host arrays. */
static int head_forward(rc_model *m, int c, const float *h_r, const float *dloss_host,
                        const float *mask_host, double *loss_sum, double *correct_sum,
                        float *host_tmp) {
  const rc_ops *o = m->ops;
  int T = m->T;
  int call = rc_linear_forward(m, m->head, h_r, m->logits[c], T, NULL);
  o->to_device(m->ce_dloss, dloss_host, sizeof(float) * (size_t)T);
  o->cross_entropy(m->ce_losses, m->ce_correct, m->logits[c], m->labels_dev[c], m->ce_dloss, T,
                   m->V);
  o->to_host(host_tmp, m->ce_losses, sizeof(float) * (size_t)T);
  double ls = 0, cs = 0;
  for (int t = 0; t < T; t++) ls += mask_host[t] ? (double)host_tmp[t] : 0.0;
  o->to_host(host_tmp, m->ce_correct, sizeof(float) * (size_t)T);
  for (int t = 0; t < T; t++) cs += mask_host[t] ? (double)host_tmp[t] : 0.0;
  *loss_sum = ls, *correct_sum = cs;
  return call;
}

void rc_model_microbatch_io(rc_model *m, int32_t **ids, int32_t **labels, float **mask,
                            double *loss, double *mtp_loss, double *mtp_acc, int64_t *tokens) {
  const rc_ops *o = m->ops;
  const rc_config *c = &m->cfg;
  int T = m->T, H = m->H, D = m->D, L = c->layers;
  size_t TH = (size_t)T * H;
  float eps = (float)c->norm_eps;
  for (int i = 0; i < m->nlinears; i++) m->linears[i].ncalls = 0;
  m->aux_loss = 0;
  for (int k = 0; k <= D; k++) {
    o->to_device(m->ids_dev[k], ids[k], sizeof(int32_t) * (size_t)T);
    o->to_device(m->labels_dev[k], labels[k], sizeof(int32_t) * (size_t)T);
  }
  /* per-token loss weights: J = [CE0/N0 + lambda/D sum_k CE_k/N_k] / M, times the loss scale */
  float *dloss = malloc(sizeof(float) * (size_t)T * (D + 2));
  if (!dloss) abort();
  float *host_tmp = dloss + (size_t)T * (D + 1);
  double n_valid[17];
  for (int k = 0; k <= D; k++) {
    double n = 0;
    for (int t = 0; t < T; t++) n += mask[k][t];
    n_valid[k] = n;
    double w =
        (k == 0 ? 1.0 : c->mtp_loss_scale / D) / (n > 0 ? n : 1) / c->microbatches * m->loss_scale;
    for (int t = 0; t < T; t++) dloss[(size_t)k * T + t] = mask[k][t] ? (float)w : 0.0f;
  }
  *tokens = (int64_t)n_valid[0];

  rc_model_profile_mark(m, 0);
  /* forward: decoder */
  o->embedding_forward(m->emb_out, m->ids_dev[0], m->embedding->weight, T, H);
  const float *x = m->emb_out;
  for (int l = 0; l < L; l++) {
    rc_layer_forward(m, &m->layers[l], &m->acts[l], x);
    x = m->acts[l].y;
  }
  o->rmsnorm_forward(m->h0, m->h0_rstd, x, m->final_norm->weight, T, H, eps);
  m->head_in0 = rc_linear_round_input(m, m->head, m->h0_r, m->h0, TH);
  rc_model_profile_mark(m, 1);
  /* forward: MTP layer calls 1..D */
  const float *h_prev = m->h0;
  for (int k = 1; k <= D; k++) {
    rc_mtp_layer *mt = mtp_layer(m, k);
    struct rc_mtp_act *ma = &m->mtp_acts[k];
    struct rc_layer_act *a = &m->acts[L + k - 1];
    o->embedding_forward(ma->emb, m->ids_dev[k], m->embedding->weight, T, H);
    o->rmsnorm_forward(ma->en, ma->en_rstd, ma->emb, mt->enorm->weight, T, H, eps);
    o->rmsnorm_forward(ma->hn, ma->hn_rstd, h_prev, mt->hnorm->weight, T, H, eps);
    o->copy2d(ma->cat_r, 2 * H, ma->en, H, T, H); /* embedding first, hidden second */
    o->copy2d(ma->cat_r + H, 2 * H, ma->hn, H, T, H);
    rc_linear_round_input(m, mt->eh_proj, ma->cat_r, ma->cat_r, TH * 2);
    ma->call_eh = rc_linear_forward(m, mt->eh_proj, ma->cat_r, ma->x, T, NULL);
    rc_layer_forward(m, mtp_trm(m, k), a, ma->x);
    o->rmsnorm_forward(ma->hk, ma->hk_rstd, a->y, mt->final_norm->weight, T, H, eps);
    ma->head_in = rc_linear_round_input(m, m->head, ma->hk_r, ma->hk, TH);
    h_prev = ma->hk;
  }
  rc_model_profile_mark(m, 2);
  /* forward: MTP heads 1..D, then the main head (loss and dlogits in place) */
  int head_call[17];
  for (int k = 1; k <= D; k++) {
    double ls, cs;
    head_call[k] = head_forward(m, k, m->mtp_acts[k].head_in, dloss + (size_t)k * T, mask[k], &ls,
                                &cs, host_tmp);
    mtp_loss[k - 1] = ls / (n_valid[k] > 0 ? n_valid[k] : 1);
    mtp_acc[k - 1] = cs / (n_valid[k] > 0 ? n_valid[k] : 1);
  }
  {
    double ls, cs;
    head_call[0] = head_forward(m, 0, m->head_in0, dloss, mask[0], &ls, &cs, host_tmp);
    *loss = ls / (n_valid[0] > 0 ? n_valid[0] : 1);
  }

  rc_model_profile_mark(m, 3);
  /* backward: main head, then MTP heads D..1 */
  for (int i = 0; i <= D; i++) {
    int k = i == 0 ? 0 : D + 1 - i;
    const float *dlogits =
        rc_linear_round_input(m, m->head, m->scratch_round, m->logits[k], (size_t)T * m->V);
    rc_linear_backward(m, m->head, head_call[k], dlogits,
                       k == 0 ? m->head_in0 : m->mtp_acts[k].head_in, m->d_h[k], T, NULL);
  }
  rc_model_profile_mark(m, 4);
  /* MTP layer calls D..1 */
  for (int k = D; k >= 1; k--) {
    rc_mtp_layer *mt = mtp_layer(m, k);
    struct rc_mtp_act *ma = &m->mtp_acts[k];
    struct rc_layer_act *a = &m->acts[L + k - 1];
    float *d_y = m->d_resid, *d_x = m->d_resid + TH;
    o->zero(d_y, TH * sizeof(float));
    o->rmsnorm_backward(d_y, mt->final_norm->main_grad, m->d_h[k], a->y, mt->final_norm->weight,
                        ma->hk_rstd, T, H);
    rc_layer_backward(m, mtp_trm(m, k), a, d_y, d_x);
    rc_linear_round_input(m, mt->eh_proj, d_x, d_x, TH);
    float *d_cat = m->d_big;
    rc_linear_backward(m, mt->eh_proj, ma->call_eh, d_x, ma->cat_r, d_cat, T, NULL);
    float *d_en = m->d_tmp, *d_hn = m->d_ln, *d_emb = m->d_xm;
    o->copy2d(d_en, H, d_cat, 2 * H, T, H);
    o->copy2d(d_hn, H, d_cat + H, 2 * H, T, H);
    o->zero(d_emb, TH * sizeof(float));
    o->rmsnorm_backward(d_emb, mt->enorm->main_grad, d_en, ma->emb, mt->enorm->weight, ma->en_rstd,
                        T, H);
    o->embedding_backward(m->embedding->main_grad, m->ids_dev[k], d_emb, T, H, m->V);
    const float *h_prev_k = k == 1 ? m->h0 : m->mtp_acts[k - 1].hk;
    o->rmsnorm_backward(m->d_h[k - 1], mt->hnorm->main_grad, d_hn, h_prev_k, mt->hnorm->weight,
                        ma->hn_rstd, T, H);
  }
  rc_model_profile_mark(m, 5);
  /* final norm, decoder layers L..1, embedding */
  float *dy = m->d_resid, *dx = m->d_resid + TH;
  o->zero(dy, TH * sizeof(float));
  const float *dec_out = L > 0 ? m->acts[L - 1].y : m->emb_out;
  o->rmsnorm_backward(dy, m->final_norm->main_grad, m->d_h[0], dec_out, m->final_norm->weight,
                      m->h0_rstd, T, H);
  for (int l = L - 1; l >= 0; l--) {
    rc_layer_backward(m, &m->layers[l], &m->acts[l], dy, dx);
    float *t = dy;
    dy = dx, dx = t;
  }
  o->embedding_backward(m->embedding->main_grad, m->ids_dev[0], dy, T, H, m->V);
  rc_model_profile_mark(m, 6);
  m->grads_dirty = true;
  free(dloss);
}
