/* census.c — the state census of one process (core/census.h, docs/census.md).
 *
 * Fields come in a fixed order: counters, the loss scaler, the RNG, every
 * parameter's weights and Adam moments (fingerprints), expert biases, fp8
 * amax histories, then the process-local state of the TE modules and of
 * main_grad. Tensors are fingerprinted on the backend in one batched call
 * (ops->fingerprint_many), so a census of gpu-small costs one pass over
 * its weights and moments and no copy to the host. */
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

#define CLASS_SAVED "saved"
#define CLASS_LOCAL "local"
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
  bool ok = param_fields(f, m);
  for (int i = 0; i < m->cfg.layers; i++) moe_bias_field(f, m, &m->layers[i]);
  for (int p = 0; p < m->n_mtp_physical; p++) moe_bias_field(f, m, &m->mtp[p].trm);
  linear_fields(f, m);
  main_grad_fields(f, m);
  if (fclose(f) || !ok) {
    free(text);
    return NULL;
  }
  if (len) *len = n;
  return text;
}

static int write_one(const char *dir, int64_t iteration, int rank, bool before_save,
                     const char *text, rc_err *err) {
  char name[96], path[4200];
  rc_census_filename(name, sizeof name, iteration, rank, before_save);
  rc_path_join(path, sizeof path, dir, name);
  return rc_write_file_atomic(path, text, strlen(text), err);
}

int rc_census_write(const rc_model *m, const char *out_dir, const char *before_save, rc_err *err) {
  char dir[4096];
  rc_path_join(dir, sizeof dir, out_dir, RC_CENSUS_DIR_NAME);
  char *text = rc_census_text(m, NULL);
  if (!text)
    return rc_fail(err, RC_EXIT_SOFTWARE, "census of step %" PRId64 ": out of memory",
                   m->iteration);
  int rc = rc_mkdir_p(dir, err);
  if (!rc && before_save && strcmp(before_save, text))
    rc = write_one(dir, m->iteration, m->rank, true, before_save, err);
  if (!rc) rc = write_one(dir, m->iteration, m->rank, false, text, err);
  free(text);
  return rc;
}
