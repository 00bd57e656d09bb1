/* model_memory.c — the model's memory: one allocator that records every
 * buffer it hands out (m->blocks), rc_model_free as one loop over that
 * record, and what a config needs before anything is allocated
 * (rc_model_memory_need, checked against what the machine has).
 *
 * The record is what hostile_model_memory holds against the need, kind by
 * kind: the need mirrors model.c's allocations, and a buffer added there
 * without its line here fails that test. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "core/model_internal.h"

/* ---- the model's memory: one allocator that records every buffer ---- */

/* Room for one more record; the record grows (doubling) when the need's
 * count fell short, e.g. rc_model_attach_comm at world size 1. */
static bool reserve_block(rc_model *m) {
  if (m->n_blocks < m->cap_blocks) return true;
  int cap = m->cap_blocks ? 2 * m->cap_blocks : 64;
  rc_model_block *b = realloc(m->blocks, (size_t)cap * sizeof *b);
  if (!b) return false;
  m->blocks = b, m->cap_blocks = cap;
  return true;
}

static void *record(rc_model *m, void *ptr, size_t bytes, rc_mem_kind kind, const char *what) {
  m->blocks[m->n_blocks++] = (rc_model_block){ptr, bytes, kind, what};
  return ptr;
}

/* A failure to record is reported like a host allocation failure (NULL and
 * alloc_failed), never by an abort: the callers check before any use. */
void *rc_model_alloc_bytes(rc_model *m, rc_mem_kind kind, size_t bytes, const char *what) {
  if (!reserve_block(m)) {
    m->alloc_failed = true;
    return NULL;
  }
  return record(m, m->ops->alloc(bytes), bytes, kind, what); /* aborts on failure */
}

float *rc_model_alloc(rc_model *m, rc_mem_kind kind, size_t n, const char *what) {
  return (float *)rc_model_alloc_bytes(m, kind, (n ? n : 1) * sizeof(float), what);
}

void *rc_model_host_alloc(rc_model *m, size_t count, size_t size, const char *what) {
  size_t bytes = count * size;
  if (!bytes) bytes = 1;
  void *p = reserve_block(m) ? calloc(1, bytes) : NULL;
  if (!p) {
    m->alloc_failed = true;
    return NULL;
  }
  return record(m, p, bytes, RC_MEM_HOST, what);
}

void rc_model_release(rc_model *m, void *ptr) {
  if (!ptr) return;
  for (int i = m->n_blocks - 1; i >= 0; i--) {
    rc_model_block *b = &m->blocks[i];
    if (b->ptr != ptr) continue;
    if (b->kind == RC_MEM_HOST)
      free(ptr);
    else
      m->ops->free(ptr);
    b->ptr = NULL;
    return;
  }
}

/* ---- memory need: mirrors the allocations of model.c's rc_model_init ---- */

typedef struct {
  rc_memory_need *n;
  uint64_t host;
  uint64_t fp8_slots; /* fp8-quantised linears so far */
} need_acc;

/* What an allocator may add to a request of `bytes`: a heap chunk's header
 * and alignment below glibc's smallest mmap threshold (128 KiB), page
 * rounding and a header above it (CUDA's granule is the lead's to add). */
static uint64_t alloc_overhead(uint64_t bytes) {
  return bytes < (128u << 10) ? 64 : RC_ALLOC_OVERHEAD + 64;
}

static void need_host(need_acc *a, uint64_t bytes) {
  a->n->n_host_allocs++;
  a->host += (bytes ? bytes : 1) + alloc_overhead(bytes);
}

/* One backend allocation of `bytes` bytes (at least one) charged to *field. */
static void need_dev_bytes(need_acc *a, uint64_t *field, uint64_t bytes) {
  bytes = bytes ? bytes : 1;
  *field += bytes;
  a->n->n_allocs++;
  a->n->overhead += alloc_overhead(bytes);
}

/* One backend allocation of `floats` 4-byte elements charged to *field. */
static void need_dev(need_acc *a, uint64_t *field, uint64_t floats) {
  need_dev_bytes(a, field, 4 * (floats ? floats : 1));
}

size_t rc_fp8_scratch_bytes(const rc_config *c) {
  int width = 3 * c->hidden; /* linear_qkv's out */
  int widths[] = {2 * c->ffn, 2 * c->hidden,
                  c->te_output_head && !c->tie_embeddings ? c->vocab : 0};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
    width = widths[i] > width ? widths[i] : width;
  return (size_t)rc_fp8_pad(width) * (size_t)rc_fp8_pad(c->micro_batch * c->seq_len);
}

/* add_param: weight, main_grad and the two moments */
static void need_param(need_acc *a, uint64_t numel) {
  need_dev(a, &a->n->weights, numel);
  need_dev(a, &a->n->main_grad, numel);
  need_dev(a, &a->n->optimizer, numel);
  need_dev(a, &a->n->optimizer, numel);
}

/* Whether a linear is a half linear (linear.c rc_linear_is_half): a 16-bit
 * weight copy, a saved 16-bit input per call, 16-bit output gradients. */
static bool half_linear(const rc_config *c, bool te_style, bool router) {
  return !(c->precision == RC_PREC_FP32 || router || (te_style && c->precision == RC_PREC_FP8));
}

/* add_linear plus what rc_model_init gives each linear (wq, wgrad scratch) */
static void need_linear(need_acc *a, const rc_config *c, uint64_t groups, uint64_t in, uint64_t out,
                        bool te_style, bool router, bool has_param) {
  if (has_param) need_param(a, groups * in * out);
  for (int h = 0; h < 3; h++) need_host(a, (uint64_t)c->fp8_amax_history * sizeof(float));
  if (te_style && c->precision == RC_PREC_FP8) {
    need_dev_bytes(a, &a->n->weight_copies, groups * out * (uint64_t)rc_fp8_pad((int)in));
    need_dev_bytes(a, &a->n->weight_copies, groups * in * (uint64_t)rc_fp8_pad((int)out));
    a->fp8_slots++;
  } else if (half_linear(c, te_style, router)) {
    need_dev_bytes(a, &a->n->weight_copies, groups * in * out * 2);
  }
  if (te_style && !c->grad_accum_fusion) need_dev(a, &a->n->weight_copies, in * out);
}

/* build_layer */
static void need_layer(need_acc *a, const rc_config *c, bool moe) {
  uint64_t H = (uint64_t)c->hidden, F = (uint64_t)c->ffn, E = (uint64_t)c->experts;
  need_param(a, H); /* input_layernorm */
  need_linear(a, c, 1, H, 3 * H, true, false, true);
  need_linear(a, c, 1, H, H, true, false, true);
  need_param(a, H); /* pre_mlp_layernorm */
  if (moe) {
    need_linear(a, c, 1, H, E, false, true, true);
    need_linear(a, c, E, H, 2 * F, true, false, true);
    need_linear(a, c, E, F, H, true, false, true);
    need_dev(a, &a->n->weights, E); /* expert_bias */
    need_host(a, E * sizeof(float));
    need_host(a, E * sizeof(double));
  } else {
    need_linear(a, c, 1, H, 2 * F, true, false, true);
    need_linear(a, c, 1, F, H, true, false, true);
  }
}

/* alloc_layer_act; the rounded copies (ln1_r, attn_r, ln2_r) are charged
 * always: whether a precision needs them depends on the linear */
/* model_internal.h: here, where the memory bound and model.c's allocation
 * (which calls into this file) both read it */
bool rc_swiglu_recompute_on(void) {
  const char *keep = getenv("RC_KEEP_SWIGLU_OUTPUT");
  return !(keep && strcmp(keep, "1") == 0);
}

/* A head whose forward order nothing observes — a plain linear: no flag,
 * its fused wgrad always accumulates — runs each depth's forward and
 * backward back to back, in the backward's order (0, D..1): main_grad sees
 * the same wgrads in the same order, and one [T, V] logits buffer serves
 * every depth. A TE-style head (--te-output-head) keeps Megatron's forward
 * order, MTP heads 1..D then the main head: its first forward's flag pairs
 * with its last backward, the pairing under test; its depths' logits all
 * live from the forward's cross-entropy to their backward. Here, where the
 * memory bound and model.c's allocation (which calls into this file) both
 * read it. */
bool rc_model_heads_one_at_a_time(const rc_config *c) {
  return !c->te_output_head;
}

static void need_layer_act(need_acc *a, const rc_config *c, bool moe) {
  uint64_t T = (uint64_t)c->micro_batch * c->seq_len, H = (uint64_t)c->hidden;
  uint64_t F = (uint64_t)c->ffn, E = (uint64_t)c->experts, K = (uint64_t)c->topk;
  uint64_t rows = moe ? T * K : T, *act = &a->n->activations;
  uint64_t th[] = {T * H,                                            /* 0 ln1 */
                   T,                                                /* 1 ln1_rstd */
                   T * H,                                            /* 2 ln1_r */
                   3 * T * H,                                        /* 3 qkv */
                   T * H,                                            /* 4 attn */
                   T * H,                                            /* 5 attn_r */
                   (uint64_t)c->micro_batch * c->heads * c->seq_len, /* 6 lse */
                   T * H,                                            /* 7 proj */
                   T * H,                                            /* 8 xm */
                   T * H,                                            /* 9 ln2 */
                   T,                                                /* 10 ln2_rstd */
                   T * H,                                            /* 11 ln2_r */
                   rows * 2 * F,                                     /* 12 fc1 */
                   rows * F,                                         /* 13 sw_r */
                   T * H,                                            /* 14 mlp_out */
                   T * H};                                           /* 15 y */
  /* proj and mlp_out are shared (model.c own_or_shared; charged in
   * rc_model_memory_need), and so is qkv under BF16 attention, which keeps
   * RoPE's bf16 heads instead; with half linears there is no ln1, dense ln2
   * or sw_r (their producers write the 16-bit inputs alone), and fc1's
   * output is 16-bit (fc1_out_h) */
  bool hl = half_linear(c, true, false), heads = c->attention_precision == RC_PREC_BF16;
  /* a bf16 model under BF16 attention keeps the attention output only as
   * proj's 16-bit input (the backward's D reads it) */
  bool attn_16 = heads && hl && c->precision == RC_PREC_BF16;
  for (size_t i = 0; i < sizeof th / sizeof th[0]; i++)
    if (i != 7 && i != 14 && !(hl && (i == 0 || (i == 9 && !moe) || i == 12 || i == 13)) &&
        !(heads && i == 3) && !(attn_16 && i == 4))
      need_dev(a, act, th[i]);
  if (heads) need_dev_bytes(a, act, 2 * 3 * T * H); /* attn_heads; qkv shared */
  if (hl) { /* qkv_h, proj_h, fc1_h, fc2_h (unless recomputed: sw_half), fc1_out_h */
    uint64_t hh[] = {T * H, T * H, rows * H, rows * F, rows * 2 * F};
    for (size_t i = 0; i < sizeof hh / sizeof hh[0]; i++)
      if (!(i == 3 && rc_swiglu_recompute_on())) need_dev_bytes(a, act, 2 * hh[i]);
  }
  if (moe) {
    uint64_t mo[] = {T * E, T * E, T * K, T * K * H, T * K * H, E, T * K, T * K, T * K, E + 1};
    for (size_t i = 0; i < sizeof mo / sizeof mo[0]; i++)
      if (!(hl && i == 3)) need_dev(a, act, mo[i]); /* xs: none with a half fc1 */
    need_host(a, E * sizeof(int));
  }
}

void rc_model_memory_need(const rc_config *c, rc_memory_need *n) {
  memset(n, 0, sizeof *n);
  need_acc a = {n, 0, 0};
  uint64_t H = (uint64_t)c->hidden, V = (uint64_t)c->vocab, F = (uint64_t)c->ffn;
  uint64_t E = (uint64_t)c->experts, K = (uint64_t)c->topk, D = (uint64_t)c->mtp_depths;
  uint64_t T = (uint64_t)c->micro_batch * c->seq_len, L = (uint64_t)c->layers;
  bool last_moe = c->layers > 0 && c->is_moe_layer[c->layers - 1];
  bool half_head = half_linear(c, c->te_output_head, false);
  /* parameters and linears, in rc_model_init's order */
  need_param(&a, V * H); /* embedding */
  for (uint64_t l = 0; l < L; l++) need_layer(&a, c, c->is_moe_layer[l]);
  need_param(&a, H); /* final_layernorm */
  uint64_t n_mtp = D == 0 ? 0 : c->mtp_repeated_layer ? 1 : D;
  for (uint64_t p = 0; p < n_mtp; p++) {
    need_param(&a, H), need_param(&a, H); /* enorm, hnorm */
    need_linear(&a, c, 1, 2 * H, H, true, false, true);
    need_layer(&a, c, last_moe);
    need_param(&a, H); /* final_layernorm */
  }
  need_linear(&a, c, 1, H, V, c->te_output_head, false, !c->tie_embeddings);
  /* the init's ones for the norm weights (model.c); the draws go straight
   * into the weights (ops.h init_normal) */
  n->transient = 4 * H + alloc_overhead(4 * H);
  /* activations: L + D layer calls, per-depth MTP buffers, heads */
  need_host(&a, (L + D) * sizeof(struct rc_layer_act));
  need_host(&a, (D + 1) * sizeof(struct rc_mtp_act));
  for (uint64_t l = 0; l < L; l++) need_layer_act(&a, c, c->is_moe_layer[l]);
  uint64_t *act = &n->activations, *scr = &n->scratch;
  bool hl = half_linear(c, true, false);
  for (uint64_t k = 1; k <= D; k++) {
    need_layer_act(&a, c, last_moe);
    uint64_t mt[] = {T * H, T * H, T, T * H, T, 2 * T * H, T * H, T * H, T, T * H};
    for (size_t i = 0; i < sizeof mt / sizeof mt[0]; i++) /* en, hn, cat_r: not with half eh */
      if (!(hl && (i == 1 || i == 3 || i == 5))) need_dev(&a, act, mt[i]);
    if (hl) need_dev_bytes(&a, act, 2 * 2 * T * H);    /* eh_h */
    if (half_head) need_dev_bytes(&a, act, 2 * T * H); /* head_h */
  }
  if (L + D > 0) need_dev(&a, scr, T * H);                 /* RC_FWD_SHARED_OUT */
  if (L + D > 0 && c->attention_precision == RC_PREC_BF16) /* RC_FWD_SHARED_QKV, and qkv_out_h */
    need_dev(&a, scr, 3 * T * H + (half_linear(c, true, false) ? (3 * T * H + 1) / 2 : 0));
  need_dev(&a, act, T * H), need_dev(&a, act, T * H), need_dev(&a, act, T);
  need_dev(&a, act, T * H);                          /* emb_out, h0, h0_rstd, h0_r */
  if (half_head) need_dev_bytes(&a, act, 2 * T * H); /* head_h0 */
  uint64_t n_logits = rc_model_heads_one_at_a_time(c) ? 1 : D + 1;
  for (uint64_t k = 0; k <= D; k++) {
    /* logits: fp32, or (a half head) 16-bit logits that the cross-entropy
     * turns into the 16-bit dlogits in place; per depth, or one for all */
    if (k < n_logits && !half_head) need_dev(&a, act, T * V);
    if (k < n_logits && half_head) need_dev_bytes(&a, act, 2 * T * V);
    need_dev(&a, scr, T), need_dev(&a, scr, T); /* ids, labels (int32) */
    need_dev(&a, scr, T * H);                   /* d_h */
  }
  need_dev(&a, scr, (D + 1) * T), need_dev(&a, scr, (D + 1) * T); /* CE: losses, correct */
  need_dev(&a, scr, (D + 1) * T);                                 /* CE: dloss */
  need_host(&a, 3 * (D + 1) * T * sizeof(float));                 /* heads_host */
  uint64_t big = T * 3 * H;
  uint64_t cand[] = {T * 2 * F, T * K * 2 * F, T * K * H, T * E, T * 2 * H};
  for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) big = cand[i] > big ? cand[i] : big;
  need_dev(&a, scr, big), need_dev(&a, scr, big);
  need_dev(&a, scr, T * H); /* d_resid */
  need_dev(&a, scr, T * H), need_dev(&a, scr, T * H), need_dev(&a, scr, T * H);
  need_dev(&a, scr, T * K);
  if (half_linear(c, true, false)) { /* dy_half: the largest [rows, out] but the head's */
    uint64_t dy = T * 3 * H > T * 2 * F ? T * 3 * H : T * 2 * F;
    bool any_moe = false;
    for (uint64_t l = 0; l < L; l++) any_moe = any_moe || c->is_moe_layer[l];
    if (any_moe) dy = dy > T * K * 2 * F ? dy : T * K * 2 * F;
    need_dev_bytes(&a, scr, 2 * dy);
    need_dev_bytes(&a, scr, 2 * T * H); /* resid_half */
    if (rc_swiglu_recompute_on()) {     /* sw_half and fc2_dy_half, for the most rows */
      uint64_t rows = any_moe || (D > 0 && last_moe) ? T * K : T;
      need_dev_bytes(&a, scr, 2 * rows * F), need_dev_bytes(&a, scr, 2 * rows * H);
    }
  }
  if (a.fp8_slots) { /* alloc_fp8: amaxes, the two cast buffers */
    need_dev(&a, scr, RC_FP8_AMAX_SLOT * a.fp8_slots);
    need_host(&a, RC_FP8_AMAX_SLOT * a.fp8_slots * sizeof(float));
    need_dev_bytes(&a, scr, rc_fp8_scratch_bytes(c));
    need_dev_bytes(&a, scr, rc_fp8_scratch_bytes(c));
  }
  uint64_t params = n->weights / 4;
  /* rc_model_attach_comm: flat gradient, landing area, the owned slice */
  if (c->world_size > 1) {
    uint64_t W = (uint64_t)c->world_size, shard = (params + W - 1) / W;
    need_dev(&a, &n->dist, shard * W), need_dev(&a, &n->dist, shard * W);
    for (int i = 0; i < 4; i++) need_dev(&a, &n->dist, shard);
    need_host(&a, RC_MAX_PARAMS * sizeof(size_t));
  }
  n->device = n->weights + n->main_grad + n->optimizer + n->weight_copies + n->activations +
              n->scratch + n->dist + n->overhead;
  /* checkpoint staging (core/checkpointing.c, io/): a save copies the state
   * (weights, both moments, main_grad when a bug carries it) to host
   * tensors; a load holds those and the shard file read whole. Twice the
   * state plus metadata bounds both. */
  uint64_t state = n->weights + n->main_grad + n->optimizer;
  /* the model's record of its buffers (m->blocks), one entry per allocation */
  uint64_t record = (n->n_allocs + n->n_host_allocs) * sizeof(rc_model_block);
  a.host += record + alloc_overhead(record);
  n->host_buffers = a.host + sizeof(rc_model) + alloc_overhead(sizeof(rc_model));
  n->staging = 2 * state + (16u << 20);
  n->host = n->host_buffers + n->transient + n->staging;
}

/* RC_TEST_MEM_AVAILABLE=BYTES: the available memory a test pretends */
static bool test_available(uint64_t *out) {
  const char *v = getenv("RC_TEST_MEM_AVAILABLE");
  if (!v || !*v) return false;
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end) return false;
  *out = x;
  return true;
}

int rc_model_memory_check(const rc_memory_need *n, bool device_is_host, uint64_t device_available,
                          uint64_t host_available, rc_err *err) {
  uint64_t t;
  const char *src = "MemAvailable";
  if (test_available(&t)) device_available = host_available = t, src = "RC_TEST_MEM_AVAILABLE";
  char need_s[32], avail_s[32], parts[320], host_s[32];
  char b[6][32];
  uint64_t v[6] = {n->weights,       n->main_grad,   n->optimizer,
                   n->weight_copies, n->activations, n->scratch + n->dist + n->overhead};
  for (int i = 0; i < 6; i++) rc_format_bytes(v[i], b[i], sizeof b[i]);
  snprintf(parts, sizeof parts,
           "weights %s, main_grad %s, Adam moments %s, weight copies %s, activations %s, "
           "scratch %s",
           b[0], b[1], b[2], b[3], b[4], b[5]);
  rc_format_bytes(n->host, host_s, sizeof host_s);
  if (device_is_host) {
    uint64_t total = n->device + n->host;
    if (host_available && total > host_available) {
      rc_format_bytes(total, need_s, sizeof need_s),
          rc_format_bytes(host_available, avail_s, sizeof avail_s);
      return rc_fail(err, RC_EXIT_RESOURCES,
                     "this config needs %s of memory (%s; checkpoint staging and host buffers "
                     "%s) but %s is available (%s): nothing was allocated; use smaller sizes",
                     need_s, parts, host_s, avail_s, src);
    }
    return RC_OK;
  }
  if (device_available && n->device > device_available) {
    rc_format_bytes(n->device, need_s, sizeof need_s),
        rc_format_bytes(device_available, avail_s, sizeof avail_s);
    return rc_fail(err, RC_EXIT_RESOURCES,
                   "this config needs %s of device memory (%s) but %s is free on the device: "
                   "nothing was allocated; use smaller sizes",
                   need_s, parts, avail_s);
  }
  if (host_available && n->host > host_available) {
    rc_format_bytes(n->host, need_s, sizeof need_s),
        rc_format_bytes(host_available, avail_s, sizeof avail_s);
    return rc_fail(err, RC_EXIT_RESOURCES,
                   "this config needs %s of host memory (checkpoint staging and host buffers) but "
                   "%s is available (%s): nothing was allocated",
                   need_s, avail_s, src);
  }
  return RC_OK;
}

static bool read_u64_file(const char *path, unsigned long long *out) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool ok = fscanf(f, "%llu", out) == 1;
  fclose(f);
  return ok;
}

uint64_t rc_host_memory_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
  fclose(f);
  uint64_t avail = (uint64_t)kb * 1024;
  /* a cgroup v2 limit below it (a container) is what really bounds us;
   * memory.max reads "max" when there is none, which fails the parse */
  unsigned long long max, cur;
  if (read_u64_file("/sys/fs/cgroup/memory.max", &max) &&
      read_u64_file("/sys/fs/cgroup/memory.current", &cur) && cur <= max && max - cur < avail)
    avail = max - cur;
  return avail;
}

/* ---- RC_PROFILE's memory table ---- */

/* A name's buffers of one kind, summed (every layer's "attn" together). */
typedef struct {
  const char *what;
  rc_mem_kind kind;
  uint64_t bytes;
  int count;
} mem_row;

static int by_bytes_desc(const void *a, const void *b) {
  const mem_row *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : strcmp(x->what, y->what);
}

static const char *const MEM_KIND_NAMES[RC_MEM_KINDS] = {[RC_MEM_WEIGHTS] = "weights",
                                                         [RC_MEM_MAIN_GRAD] = "main_grad",
                                                         [RC_MEM_OPTIMIZER] = "Adam moments",
                                                         [RC_MEM_WEIGHT_COPIES] = "weight copies",
                                                         [RC_MEM_ACTIVATIONS] = "activations",
                                                         [RC_MEM_SCRATCH] = "scratch",
                                                         [RC_MEM_DIST] = "distributed optimizer",
                                                         [RC_MEM_HOST] = "host tables"};

void rc_model_memory_report(const rc_model *m) {
  const char *v = getenv("RC_PROFILE");
  if (!v || !*v || m->rank != 0) return;
  uint64_t kind_bytes[RC_MEM_KINDS] = {0}, backend = 0;
  int live = 0;
  mem_row *rows = calloc((size_t)(m->n_blocks ? m->n_blocks : 1), sizeof *rows);
  if (!rows) return; /* a report, not a result: nothing to fail */
  int nrows = 0;
  for (int i = 0; i < m->n_blocks; i++) {
    const rc_model_block *b = &m->blocks[i];
    if (!b->ptr) continue; /* released early */
    live++;
    kind_bytes[b->kind] += b->bytes;
    if (b->kind != RC_MEM_HOST) backend += b->bytes;
    int j = 0;
    while (j < nrows && !(rows[j].kind == b->kind && !strcmp(rows[j].what, b->what))) j++;
    if (j == nrows) rows[nrows++] = (mem_row){b->what, b->kind, 0, 0};
    rows[j].bytes += b->bytes, rows[j].count++;
  }
  qsort(rows, (size_t)nrows, sizeof *rows, by_bytes_desc);
  char total[32], each[32];
  rc_format_bytes(backend, total, sizeof total);
  fprintf(stderr,
          "profile: memory: the model's %d buffers, %s of backend memory (what it allocated; "
          "the backend's own scratch and context are not in it)\n",
          live, total);
  for (int k = 0; k < RC_MEM_KINDS; k++) {
    if (!kind_bytes[k]) continue;
    rc_format_bytes(kind_bytes[k], each, sizeof each);
    fprintf(stderr, "profile: memory:   %-22s %10s\n", MEM_KIND_NAMES[k], each);
  }
  /* the names worth looking at: 1% of the backend total or more */
  for (int j = 0; j < nrows; j++) {
    if (rows[j].kind == RC_MEM_HOST || rows[j].bytes * 100 < backend) continue;
    rc_format_bytes(rows[j].bytes, each, sizeof each);
    fprintf(stderr, "profile: memory:     %-20s %10s  %-14s %d buffer%s\n", rows[j].what, each,
            MEM_KIND_NAMES[rows[j].kind], rows[j].count, rows[j].count == 1 ? "" : "s");
  }
  free(rows);
}

/* Frees everything the model allocated, backend buffers included, so a leg
 * is clean under LeakSanitizer: one loop over the record, newest first.
 * Safe on a partly initialised model: the record holds what was made (the
 * model is zeroed first, so an empty record is NULL), and released entries
 * are NULL, which both frees accept. */
void rc_model_free(rc_model *m) {
  const rc_ops *o = m->ops;
  if (!o) return;
  if (m->release_staging) m->release_staging(m); /* joins its thread, frees it */
  for (int i = m->n_blocks - 1; i >= 0; i--) {
    rc_model_block *b = &m->blocks[i];
    if (b->kind == RC_MEM_HOST)
      free(b->ptr);
    else
      o->free(b->ptr);
  }
  free(m->blocks);
  m->blocks = NULL, m->n_blocks = m->cap_blocks = 0;
  m->acts = NULL, m->mtp_acts = NULL;
  memset(&m->dist, 0, sizeof m->dist);
  m->nparams = m->nlinears = 0;
  m->ops = NULL;
}
