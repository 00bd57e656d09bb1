/* census.c — the state census of one process (core/census.h, docs/census.md).
 *
 * Fields come in a fixed order: counters, the loss scaler, the RNG, the
 * settings the next step computes with (class `derived`: the schedule, the
 * optimizer's hyperparameters and bias corrections, the clip, the scaler's
 * window, the sampler's epoch), every parameter's weights and Adam moments
 * (fingerprints), expert biases, fp8 amax histories, then every in-process
 * copy checked against its master (class `copy`: the device copy of a host
 * tensor, the 16-bit weight copies, the fp8 weight cache, pending updates),
 * then the process-local state of the TE modules and of main_grad. Tensors
 * are fingerprinted on the backend in batched calls (ops->fingerprint_many),
 * so a census of gpu-small costs a pass over its weights and moments, one
 * cast of the 16-bit copies the next step reuses, and no copy to the host.
 *
 * A save can also describe what it wrote (rc_census_saved_line, from the
 * staged bytes, i.e. the shard's content): `run` holds it against the
 * saving process's census to tell a save that wrote a wrong value from a
 * load that did not restore the right one. */
#include "core/census.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/numeric.h"
#include "base/fsutil.h"
#include "core/linear.h"
#include "core/model_internal.h"
#include "io/layout.h"
#include "io/state.h"

#define CLASS_SAVED "saved"
#define CLASS_LOCAL "local"
#define CLASS_DERIVED "derived"
#define CLASS_COPY "copy"
#define NAME_MAX_LEN 512 /* a field name: a prefix and a module path */

static void field(FILE *f, const char *name, const char *cls, const char *value, const char *note) {
  fprintf(f, "%s\t%s\t%s%s%s\n", name, cls, value, note ? "\t" : "", note ? note : "");
}

static void field_i64(FILE *f, const char *name, int64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%" PRId64, v);
  field(f, name, CLASS_SAVED, s, NULL);
}

static void field_u64(FILE *f, const char *name, uint64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%" PRIu64, v);
  field(f, name, CLASS_SAVED, s, NULL);
}

static void field_fp(FILE *f, const char *name, const char *cls, uint64_t fp, const char *note) {
  char s[32];
  snprintf(s, sizeof s, "fp=%016" PRIx64, fp);
  field(f, name, cls, s, note);
}

/* Every parameter's weight and Adam moments, fingerprinted in one batched
 * call: with data parallel the moments are this rank's slice (what its
 * shard holds). Returns false when out of memory. */
static bool param_fields(FILE *f, const rc_model *m) {
  int n = 3 * m->nparams;
  const void **x = calloc((size_t)n + 1, sizeof *x);
  size_t *nbytes = calloc((size_t)n + 1, sizeof *nbytes);
  uint64_t *fp = calloc((size_t)n + 1, sizeof *fp);
  bool *have = calloc((size_t)n + 1, sizeof *have);
  bool ok = x && nbytes && fp && have;
  int count = 0;
  for (int i = 0; ok && i < m->nparams; i++) {
    const rc_param *p = &m->params[i];
    x[count] = p->weight, nbytes[count] = p->numel * sizeof(float), have[3 * i] = true;
    count++;
    if (m->comm) {
      size_t lo, hi;
      if (!rc_dist_segment(m, i, &lo, &hi)) continue;
      x[count] = rc_dist_shard_ptr(m, m->dist.exp_avg, i, lo);
      x[count + 1] = rc_dist_shard_ptr(m, m->dist.exp_avg_sq, i, lo);
      nbytes[count] = nbytes[count + 1] = (hi - lo) * sizeof(float);
    } else {
      x[count] = p->exp_avg, x[count + 1] = p->exp_avg_sq;
      nbytes[count] = nbytes[count + 1] = p->numel * sizeof(float);
    }
    have[3 * i + 1] = have[3 * i + 2] = true;
    count += 2;
  }
  if (ok && count) m->ops->fingerprint_many(fp, x, nbytes, count);
  char name[NAME_MAX_LEN];
  int k = 0;
  for (int i = 0; ok && i < m->nparams; i++) {
    const char *pn = m->params[i].name;
    snprintf(name, sizeof name, "model.%s", pn);
    field_fp(f, name, CLASS_SAVED, fp[k++], NULL);
    if (!have[3 * i + 1]) continue; /* a slice this rank does not own */
    snprintf(name, sizeof name, "optimizer.exp_avg.%s", pn);
    field_fp(f, name, CLASS_SAVED, fp[k++], m->comm ? "this rank's slice" : NULL);
    snprintf(name, sizeof name, "optimizer.exp_avg_sq.%s", pn);
    field_fp(f, name, CLASS_SAVED, fp[k++], m->comm ? "this rank's slice" : NULL);
  }
  free(x), free(nbytes), free(fp), free(have);
  return ok;
}

static void field_f64(FILE *f, const char *name, const char *cls, double v, const char *note) {
  char s[64];
  snprintf(s, sizeof s, "%.17g", v);
  field(f, name, cls, s, note);
}

static void derived_i64(FILE *f, const char *name, int64_t v, const char *note) {
  char s[32];
  snprintf(s, sizeof s, "%" PRId64, v);
  field(f, name, CLASS_DERIVED, s, note);
}

/* The loss's denominators and the detached MTP heads' clip
 * (docs/design.md §3.5), listed where a config sets them (a default config's
 * census is unchanged): what the next step's backward and finish normalise
 * each term by. */
static void loss_fields(FILE *f, const rc_model *m) {
  const rc_step_settings *h = &m->hp;
  const rc_config *c = &m->cfg;
  if (c->loss_type == RC_LOSS_MICROBATCH_MEAN && !c->mtp_detach_heads) return;
  field(f, "loss.main_denominator", CLASS_DERIVED, rc_denominator_name(h->main_denominator),
        "what the main loss is divided by (--loss-type)");
  field(f, "loss.normalize_at", CLASS_DERIVED, h->normalize_at_finish ? "finish" : "microbatch",
        "where the global denominators enter the gradient");
  if (m->D > 0) {
    field(f, "mtp.detach_heads", CLASS_DERIVED, c->mtp_detach_heads ? "true" : "false",
          "whether the MTP loss's gradient stops at the MTP modules");
    field(f, "mtp.loss_denominator", CLASS_DERIVED, rc_denominator_name(h->mtp_denominator),
          "what the MTP term is divided by");
  }
  bool any_moe = false;
  for (int i = 0; i < c->layers; i++) any_moe |= m->layers[i].moe;
  if (any_moe && c->moe_aux_loss_coeff > 0)
    field(f, "moe.aux_loss_denominator", CLASS_DERIVED, rc_denominator_name(h->moe_aux_denominator),
          "what the load-balancing loss is divided by");
  if (c->mtp_detach_heads)
    field_f64(f, "mtp.clip_grad", CLASS_DERIVED, h->mtp_clip_grad,
              "the detached MTP modules' own clip max-norm (0: off)");
}

/* What the next step computes with (model.h rc_step_settings), made from
 * the config or rebuilt by a load, and the values it derives from the
 * counters: the learning rate, Adam's bias corrections (as the float the
 * update gets). Settings come before the values derived from them, so the
 * first that differs is the cause. */
static void derived_fields(FILE *f, const rc_model *m) {
  const rc_step_settings *h = &m->hp;
  const rc_config *c = &m->cfg;
  derived_i64(f, "scheduler.warmup_origin", h->warmup_origin,
              "the scheduler step the warmup and the decay count from");
  derived_i64(f, "scheduler.warmup_steps", h->warmup, NULL);
  derived_i64(f, "scheduler.decay_steps", h->decay_steps, "the cosine's horizon");
  field_f64(f, "scheduler.max_lr", CLASS_DERIVED, h->lr, NULL);
  field_f64(f, "scheduler.min_lr", CLASS_DERIVED, h->min_lr, NULL);
  field_f64(f, "scheduler.lr", CLASS_DERIVED, rc_model_lr(m, m->scheduler_steps + 1),
            "the learning rate of the next optimizer step");
  field_f64(f, "optimizer.param_groups.decay.weight_decay", CLASS_DERIVED, h->weight_decay, NULL);
  field_f64(f, "optimizer.param_groups.no_decay.weight_decay", CLASS_DERIVED, 0.0,
            "norms and biases");
  char s[96];
  snprintf(s, sizeof s, "%.17g,%.17g", h->beta1, h->beta2);
  field(f, "optimizer.betas", CLASS_DERIVED, s, NULL);
  field_f64(f, "optimizer.eps", CLASS_DERIVED, h->eps, NULL);
  double bc1, bc2;
  rc_model_bias_corrections(m, m->optimizer_step + 1, &bc1, &bc2);
  field_f64(f, "optimizer.bias_correction1", CLASS_DERIVED, (float)bc1,
            "1 - beta1^step of the next optimizer step, as the update gets it (float)");
  field_f64(f, "optimizer.bias_correction2", CLASS_DERIVED, (float)bc2,
            "1 - beta2^step of the next optimizer step, as the update gets it (float)");
  field_f64(f, "optimizer.clip_grad", CLASS_DERIVED, h->clip_grad,
            "the global-norm clip's max-norm (0: off)");
  loss_fields(f, m);
  if (c->precision == RC_PREC_FP16) {
    derived_i64(f, "loss_scaler.growth_interval", h->loss_scale_window,
                "clean steps before the scale grows (--loss-scale-window)");
    derived_i64(f, "loss_scaler.hysteresis", h->hysteresis, NULL);
    field_f64(f, "loss_scaler.growth_factor", CLASS_DERIVED, h->growth_factor, NULL);
    field_f64(f, "loss_scaler.backoff_factor", CLASS_DERIVED, h->backoff_factor, NULL);
    field_f64(f, "loss_scaler.min_scale", CLASS_DERIVED, h->min_loss_scale, NULL);
  }
  bool bias = false;
  for (int i = 0; i < c->layers; i++) bias |= m->layers[i].moe;
  if (bias && c->moe_scoring == RC_SCORE_SIGMOID)
    field_f64(f, "moe.expert_bias_update_rate", CLASS_DERIVED, h->moe_bias_update_rate, NULL);
  if (c->precision == RC_PREC_FP8) {
    snprintf(s, sizeof s, "e4m3 delayed scaling, amax history %d, max", c->fp8_amax_history);
    field(f, "fp8.recipe", CLASS_DERIVED, s, NULL);
  }
  if (c->epoch_samples)
    derived_i64(f, "data.sampler_epoch", m->data_epoch,
                "the epoch the sampler orders the next samples by (set_epoch)");
}

static void moe_bias_field(FILE *f, const rc_model *m, const rc_layer *L) {
  if (!L->moe || m->cfg.moe_scoring != RC_SCORE_SIGMOID) return;
  char name[NAME_MAX_LEN];
  snprintf(name, sizeof name, "moe.expert_bias.%s", L->prefix);
  field_fp(f, name, CLASS_SAVED, rc_fingerprint_host(L->expert_bias_host, sizeof(float) * m->E),
           NULL);
}

/* What the policy makes of a module's process-local is_first_microbatch at
 * the next step, in words, for the NOTE column. */
static void flag_note(const rc_model *m, const rc_linear *lin, char *buf, size_t cap) {
  const rc_config *c = &m->cfg;
  const char *policy = rc_policy_name(c->policy);
  rc_linear t = *lin, f = *lin;
  t.flag = RC_FLAG_TRUE, f.flag = RC_FLAG_FALSE;
  rc_flag pt = rc_linear_policy_value(m, &t), pf = rc_linear_policy_value(m, &f);
  if (c->precision == RC_PREC_FP8)
    snprintf(buf, cap, "re-armed to TRUE before every step (fp8 is tracked): no step sees it");
  else if (pt == pf)
    snprintf(buf, cap, "policy %s passes %s whatever the flag", policy, rc_flag_name(pt));
  else if (c->grad_accum_fusion)
    snprintf(buf, cap,
             "policy %s passes the flag: a fresh process passes TRUE at the first forward call, "
             "and with fusion on that call's wgrad GEMM overwrites main_grad (beta=0)",
             policy);
  else
    snprintf(buf, cap,
             "policy %s passes the flag, but with fusion off the wgrad always accumulates: it "
             "picks no beta",
             policy);
}

/* The fp8 weight cache: what the next step's first forward call does with
 * it (the flag is re-armed to TRUE before every step). */
static void cache_note(const rc_model *m, const rc_linear *lin, char *buf, size_t cap) {
  rc_linear t = *lin;
  t.flag = RC_FLAG_TRUE;
  rc_flag p = m->cfg.no_weight_cache ? RC_FLAG_NONE : rc_linear_policy_value(m, &t);
  snprintf(buf, cap, "the next step's first call passes %s: %s", rc_flag_name(p),
           p == RC_FLAG_NONE   ? "it quantises afresh, the cache is not used"
           : p == RC_FLAG_TRUE ? "it refreshes the cache"
                               : "it reuses a valid cache, fills an invalid one");
}

static void linear_fields(FILE *f, const rc_model *m) {
  const rc_config *c = &m->cfg;
  char name[NAME_MAX_LEN], value[64], note[512];
  if (c->precision == RC_PREC_FP8)
    for (int i = 0; i < m->nlinears; i++) {
      const rc_linear *lin = &m->linears[i];
      if (!lin->te_style) continue;
      const float *histories[3] = {lin->amax_history, lin->amax_history_input,
                                   lin->amax_history_grad};
      const char *kinds[3] = {"", "_input", "_grad"};
      for (int h = 0; h < 3; h++) {
        snprintf(name, sizeof name, "fp8.amax_history%s.%s", kinds[h], lin->name);
        field_fp(f, name, CLASS_SAVED,
                 rc_fingerprint_host(histories[h], sizeof(float) * c->fp8_amax_history), NULL);
      }
    }
  for (int i = 0; i < m->nlinears; i++) {
    const rc_linear *lin = &m->linears[i];
    if (!lin->te_style) continue;
    snprintf(name, sizeof name, "linear.is_first_microbatch.%s", lin->name);
    if (c->policy == RC_POLICY_PERSIST) {
      field(f, name, CLASS_SAVED, rc_flag_name(lin->flag), "checkpointed (policy persist)");
    } else {
      flag_note(m, lin, note, sizeof note);
      field(f, name, CLASS_LOCAL, rc_flag_name(lin->flag), note);
    }
  }
  if (c->precision != RC_PREC_FP8) return;
  for (int i = 0; i < m->nlinears; i++) {
    const rc_linear *lin = &m->linears[i];
    if (!lin->te_style) continue;
    snprintf(name, sizeof name, "linear.weight_cache.%s", lin->name);
    if (lin->cache_valid)
      snprintf(value, sizeof value, "valid fp=%016" PRIx64 " step=%d",
               m->ops->fingerprint(lin->wq8, (size_t)lin->groups * lin->out * lin->in_pad),
               lin->cache_step);
    else
      snprintf(value, sizeof value, "invalid");
    cache_note(m, lin, note, sizeof note);
    field(f, name, CLASS_LOCAL, value, note);
  }
}

/* ---- in-process copies against their masters (class `copy`) ---- */

/* The device copy the router reads against the host copy the checkpoint
 * saves: "ok" when they hold the same bits, else "stale". */
static void device_copy_field(FILE *f, const rc_model *m, const rc_layer *L) {
  if (!L->moe || m->cfg.moe_scoring != RC_SCORE_SIGMOID) return;
  char name[NAME_MAX_LEN];
  size_t bytes = sizeof(float) * (size_t)m->E;
  uint64_t dev = m->ops->fingerprint(L->expert_bias, bytes);
  uint64_t host = rc_fingerprint_host(L->expert_bias_host, bytes);
  snprintf(name, sizeof name, "copy.device.moe.expert_bias.%s", L->prefix);
  char value[96];
  if (dev == host)
    snprintf(value, sizeof value, "ok");
  else
    snprintf(value, sizeof value, "stale: copy fp=%016" PRIx64 ", master fp=%016" PRIx64, dev,
             host);
  field(f, name, CLASS_COPY, value, "the router reads the device copy");
}

/* Whether the next step's forward uses lin's 16-bit copy as it is, without
 * casting it again (linear.c prepare_weight: a copy written for the next
 * span). */
static bool half_copy_reused(const rc_model *m, const rc_linear *lin) {
  return lin->wq_half && lin->wq_half_serial == m->weights_serial + 1;
}

/* Each half linear's 16-bit weight copy: "ok" when the next step casts it
 * again before use, or when it equals cast(master); "stale" when the next
 * step reads it as it is and it is not the cast of the fp32 weight. The
 * cast is made in one scratch buffer; fingerprints compare it. Returns
 * false when the scratch cannot be had. */
static bool half_copy_fields(FILE *f, const rc_model *m) {
  size_t most = 0;
  for (int i = 0; i < m->nlinears; i++)
    if (half_copy_reused(m, &m->linears[i]) && m->linears[i].w->numel > most)
      most = m->linears[i].w->numel;
  uint16_t *scratch = most ? m->ops->alloc((most + 2) * sizeof(uint16_t)) : NULL;
  if (most && !scratch) return false;
  char name[NAME_MAX_LEN], value[96];
  for (int i = 0; i < m->nlinears; i++) {
    const rc_linear *lin = &m->linears[i];
    if (!lin->wq_half) continue;
    snprintf(name, sizeof name, "copy.half.model.%s", lin->w->name);
    if (!half_copy_reused(m, lin)) {
      field(f, name, CLASS_COPY, "ok", "cast again from the fp32 weight before its next use");
      continue;
    }
    size_t n = lin->w->numel;
    m->ops->cast_half(scratch, lin->w->weight, n, m->ct);
    /* fingerprints take whole words: an odd count leaves one element out,
     * compared on the host */
    size_t words = n & ~(size_t)1;
    const void *x[2] = {lin->wq_half, scratch};
    size_t nb[2] = {words * sizeof(uint16_t), words * sizeof(uint16_t)};
    uint64_t fp[2] = {0, 0};
    if (words) m->ops->fingerprint_many(fp, x, nb, 2);
    bool same = fp[0] == fp[1];
    if (same && n % 2) {
      uint16_t last[2];
      m->ops->to_host(&last[0], lin->wq_half + n - 1, sizeof(uint16_t));
      m->ops->to_host(&last[1], scratch + n - 1, sizeof(uint16_t));
      same = last[0] == last[1];
    }
    if (same)
      snprintf(value, sizeof value, "ok");
    else
      snprintf(value, sizeof value, "stale: copy fp=%016" PRIx64 ", cast(master) fp=%016" PRIx64,
               fp[0], fp[1]);
    field(f, name, CLASS_COPY, value,
          "the next step's forward reads this copy as it is (written by the optimizer)");
  }
  if (scratch) m->ops->free(scratch);
  return true;
}

/* The fp8 weight cache: "ok" when the next step's first call quantises the
 * weight again (NONE, TRUE) or fills an invalid cache; otherwise it reuses
 * a quantisation of the weights of an earlier step, said so. */
static void fp8_cache_fields(FILE *f, const rc_model *m) {
  if (m->cfg.precision != RC_PREC_FP8) return;
  char name[NAME_MAX_LEN], value[96];
  for (int i = 0; i < m->nlinears; i++) {
    const rc_linear *lin = &m->linears[i];
    if (!lin->te_style) continue;
    rc_linear t = *lin;
    /* the next step's first call: flags are re-armed before every fp8 step */
    t.flag = RC_FLAG_TRUE;
    rc_flag p = m->cfg.no_weight_cache ? RC_FLAG_NONE : rc_linear_policy_value(m, &t);
    snprintf(name, sizeof name, "copy.fp8_cache.model.%s", lin->w->name);
    if (p != RC_FLAG_FALSE || !lin->cache_valid)
      snprintf(value, sizeof value, "ok");
    else
      snprintf(value, sizeof value, "reused: quantised from the weights of step %d",
               lin->cache_step);
    field(f, name, CLASS_COPY, value, "e4m3 weight and its transpose for the next forward");
  }
}

/* Work a step left for later: a linear's weight-gradient GEMM split from
 * its dgrad and not yet run (linear.h). At a step boundary there is none. */
static void pending_field(FILE *f, const rc_model *m) {
  char value[512] = "none";
  size_t len = 0;
  int n = 0;
  for (int i = 0; i < m->nlinears; i++)
    if (m->linears[i].pending_call >= 0) {
      if (!n++) len = 0;
      int w = snprintf(value + len, sizeof value - len, "%swgrad of %s", len ? ", " : "",
                       m->linears[i].name);
      if (w < 0 || (size_t)w >= sizeof value - len) break;
      len += (size_t)w;
    }
  field(f, "copy.pending.updates", CLASS_COPY, value,
        "updates computed but not yet applied to their state");
}

static void main_grad_fields(FILE *f, const rc_model *m) {
  bool carried = m->cfg.inject & RC_BUG_GRAD_BUFFER_NOT_ZEROED_AFTER_LOAD;
  field(f, "main_grad.holds_gradients", CLASS_LOCAL, m->grads_dirty ? "true" : "false",
        carried ? "the injected grad-buffer-not-zeroed-after-load skips the zeroing of a "
                  "main_grad that does not hold this process's gradients"
                : "main_grad is zeroed at the start of every step");
  field_fp(f, "main_grad", carried ? CLASS_SAVED : CLASS_LOCAL, rc_model_fp_main_grad(m),
           carried ? "the injected grad-buffer-not-zeroed-after-load carries it"
                   : "zeroed at the start of the next step");
}

char *rc_census_text(const rc_model *m, size_t *len) {
  char *text = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  if (!f) return NULL;
  fprintf(f, "# resumecheck state census 1: iteration %" PRId64 ", rank %d of %d\n", m->iteration,
          m->rank, m->cfg.world_size);
  fprintf(f, "# FIELD\tCLASS\tVALUE\tNOTE; CLASS saved: a load must restore it; local: "
             "process-local by design (docs/census.md)\n");
  field_i64(f, "iteration", m->iteration);
  field_i64(f, "data.consumed_samples", m->consumed_samples);
  field_i64(f, "optimizer.step", m->optimizer_step);
  field_i64(f, "scheduler.num_steps", m->scheduler_steps);
  char s[64];
  snprintf(s, sizeof s, "%.17g", m->loss_scale);
  field(f, "loss_scaler.scale", CLASS_SAVED, s, NULL);
  field_i64(f, "loss_scaler.growth_tracker", m->growth_tracker);
  field_i64(f, "loss_scaler.hysteresis_tracker", m->hysteresis_tracker);
  field_u64(f, "rng.seed", m->rng_seed);
  field_u64(f, "rng.offset", m->rng_offset);
  derived_fields(f, m);
  bool ok = param_fields(f, m);
  for (int i = 0; i < m->cfg.layers; i++) moe_bias_field(f, m, &m->layers[i]);
  for (int p = 0; p < m->n_mtp_physical; p++) moe_bias_field(f, m, &m->mtp[p].trm);
  for (int i = 0; i < m->cfg.layers; i++) device_copy_field(f, m, &m->layers[i]);
  for (int p = 0; p < m->n_mtp_physical; p++) device_copy_field(f, m, &m->mtp[p].trm);
  ok = half_copy_fields(f, m) && ok;
  fp8_cache_fields(f, m);
  pending_field(f, m);
  linear_fields(f, m);
  main_grad_fields(f, m);
  if (fclose(f) || !ok) {
    free(text);
    return NULL;
  }
  if (len) *len = n;
  return text;
}

/* ---- what a save wrote ---- */

/* "/a/b/rest" -> its first component into top (cap), *rest after the
 * second slash ("" when none); false when path is not absolute. */
static bool split_path(const char *path, char *top, size_t cap, const char **second,
                       const char **rest) {
  if (path[0] != '/') return false;
  const char *p = path + 1, *slash = strchr(p, '/');
  if (!slash || (size_t)(slash - p) >= cap) return false;
  snprintf(top, cap, "%.*s", (int)(slash - p), p);
  *second = slash + 1;
  const char *s2 = strchr(*second, '/');
  *rest = s2 ? s2 + 1 : "";
  return true;
}

void rc_census_saved_line(FILE *f, const char *path, int dtype, const void *bytes, size_t nbytes,
                          const uint64_t *fp) {
  char top[64], name[NAME_MAX_LEN], value[64];
  const char *second, *rest;
  if (!split_path(path, top, sizeof top, &second, &rest)) return;
  size_t second_len = strcspn(second, "/");
  const char *last = strrchr(path, '/'); /* the last component follows it */
  name[0] = 0;
  if (!strcmp(top, "model")) {
    snprintf(name, sizeof name, "model.%s", second);
  } else if (!strcmp(top, "optimizer") && *rest &&
             (!strncmp(second, "exp_avg/", 8) || !strncmp(second, "exp_avg_sq/", 11))) {
    /* a data-parallel slice is named "<param>.elements_LO_HI": the census
     * names the rank's slice by the parameter */
    const char *dot = strstr(rest, ".elements_");
    snprintf(name, sizeof name, "optimizer.%.*s.%.*s", (int)second_len, second,
             (int)(dot ? (size_t)(dot - rest) : strlen(rest)), rest);
  } else if (!strcmp(top, "moe") && !strncmp(second, "expert_bias/", 12)) {
    snprintf(name, sizeof name, "moe.expert_bias.%s", rest);
  } else if (!strcmp(top, "fp8") && last > second) {
    /* /fp8/<linear>/amax_history[_input|_grad] */
    snprintf(name, sizeof name, "fp8.%s.%.*s", last + 1, (int)(last - second), second);
  } else if (!strcmp(top, "flags") && last > second && !strcmp(last + 1, "is_first_microbatch")) {
    snprintf(name, sizeof name, "linear.is_first_microbatch.%.*s", (int)(last - second), second);
  } else if (!*rest) {
    snprintf(name, sizeof name, "%s.%s", top, second); /* a counter: /data/consumed_samples */
  }
  if (!name[0]) return;
  if (dtype == RC_DT_F32) {
    if (nbytes % 4) return;
    field_fp(f, name, CLASS_SAVED, fp ? *fp : rc_fingerprint_host(bytes, nbytes), NULL);
    return;
  }
  if (!strncmp(name, "linear.", 7) && dtype == RC_DT_I32 && nbytes == sizeof(int32_t)) {
    int32_t v;
    memcpy(&v, bytes, sizeof v);
    field(f, name, CLASS_SAVED, rc_flag_name((rc_flag)v), NULL);
    return;
  }
  if (dtype == RC_DT_I64 && nbytes == 8) {
    int64_t v;
    memcpy(&v, bytes, 8);
    snprintf(value, sizeof value, "%" PRId64, v);
  } else if (dtype == RC_DT_U64 && nbytes == 8) {
    uint64_t v;
    memcpy(&v, bytes, 8);
    snprintf(value, sizeof value, "%" PRIu64, v);
  } else if (dtype == RC_DT_F64 && nbytes == 8) {
    double v;
    memcpy(&v, bytes, 8);
    snprintf(value, sizeof value, "%.17g", v);
  } else {
    return; /* no census field is of this form */
  }
  field(f, name, CLASS_SAVED, value, NULL);
}

static int write_one(const char *dir, const char *name, const char *text, rc_err *err) {
  char path[4200];
  rc_path_join(path, sizeof path, dir, name);
  return rc_write_file_atomic(path, text, strlen(text), err);
}

int rc_census_write(rc_model *m, const char *out_dir, const char *before_save, rc_err *err) {
  char dir[4096], name[96];
  rc_path_join(dir, sizeof dir, out_dir, RC_CENSUS_DIR_NAME);
  char *text = rc_census_text(m, NULL);
  if (!text)
    return rc_fail(err, RC_EXIT_SOFTWARE, "census of step %" PRId64 ": out of memory",
                   m->iteration);
  int rc = rc_mkdir_p(dir, err);
  if (!rc && before_save && strcmp(before_save, text)) {
    rc_census_filename(name, sizeof name, m->iteration, m->rank, true);
    rc = write_one(dir, name, before_save, err);
  }
  if (!rc && m->saved_census) { /* what the save at this iteration wrote */
    rc_census_saved_filename(name, sizeof name, m->iteration, m->rank);
    rc = write_one(dir, name, m->saved_census, err);
  }
  free(m->saved_census);
  m->saved_census = NULL;
  if (!rc) {
    rc_census_filename(name, sizeof name, m->iteration, m->rank, false);
    rc = write_one(dir, name, text, err);
  }
  free(text);
  return rc;
}
