/* train_step.c — one optimizer step: zero main_grad, M microbatches,
 * the finish's normalisation (--loss-normalize-at finish), unscale, grad
 * norm (recorded before clipping; the detached MTP heads' apart), clip,
 * AdamW with bias correction, LR warmup + cosine, the fp16 dynamic loss
 * scaler (overflow skips the step), fp8 amax bookkeeping and the MoE
 * expert_bias update. Everything a later step depends on is in rc_model and
 * is checkpointed. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/numeric.h"
#include "core/data.h"
#include "core/linear.h"
#include "core/model_internal.h"
#include "dist/comm.h"

/* every main_grad zeroed in one zero_many (a memset each was ~100 launches
 * a step on the GPU) */
void rc_model_zero_grads(rc_model *m) {
  void **dst = malloc((size_t)m->nparams * sizeof *dst);
  size_t *bytes = malloc((size_t)m->nparams * sizeof *bytes);
  if (!dst || !bytes) { /* the same zeros, one at a time */
    for (int i = 0; i < m->nparams; i++)
      m->ops->zero(m->params[i].main_grad, m->params[i].numel * sizeof(float));
  } else {
    for (int i = 0; i < m->nparams; i++)
      dst[i] = m->params[i].main_grad, bytes[i] = m->params[i].numel * sizeof(float);
    m->ops->zero_many(dst, bytes, m->nparams);
  }
  free(dst);
  free(bytes);
}

static void for_each_moe_layer(rc_model *m, void (*fn)(rc_model *, rc_layer *)) {
  for (int l = 0; l < m->cfg.layers; l++)
    if (m->layers[l].moe) fn(m, &m->layers[l]);
  for (int p = 0; p < m->n_mtp_physical; p++)
    if (m->mtp[p].trm.moe) fn(m, &m->mtp[p].trm);
}

static void clear_counts(rc_model *m, rc_layer *L) {
  memset(L->token_counts, 0, sizeof(double) * (size_t)m->E);
}

void rc_model_begin_step(rc_model *m) {
  /* Quantised configs are "tracked": every flag is re-armed before
   * microbatch 0. Nothing re-arms them otherwise. */
  bool tracked = m->cfg.precision == RC_PREC_FP8;
  for (int i = 0; i < m->nlinears; i++) {
    rc_linear *lin = &m->linears[i];
    if (tracked && lin->te_style) lin->flag = RC_FLAG_TRUE;
    rc_linear_begin_step(m, lin);
  }
  if (m->fp8_slots)
    m->ops->zero(m->fp8_amax, RC_FP8_AMAX_SLOT * (size_t)m->fp8_slots * sizeof(float));
  for_each_moe_layer(m, clear_counts);
}

/* DeepSeek-V3 aux-loss-free balancing: bias += rate * sign(mean(c) - c).
 * With the event log on, one `expert_bias` event per layer says whether
 * the update ran and what it left (docs/events.md). */
static void update_expert_bias(rc_model *m, rc_layer *L) {
  if (m->cfg.moe_scoring != RC_SCORE_SIGMOID || m->hp.moe_bias_update_rate == 0) return;
  /* the bias is replicated: every rank updates it from the global counts */
  if (m->comm) rc_dist_sum_host(m, L->token_counts, m->E);
  /* The injected bug: a process's first step after a load skips the
   * update (it reads the previous step's counts from a buffer the load
   * leaves empty). */
  bool skip = (m->cfg.inject & RC_BUG_EXPERT_BIAS_UPDATE_SKIPPED_AFTER_RESUME) && m->loaded &&
              m->steps_in_process == 0;
  if (!skip) {
    double mean = 0;
    for (int e = 0; e < m->E; e++) mean += L->token_counts[e];
    mean /= m->E;
    for (int e = 0; e < m->E; e++) {
      double d = mean - L->token_counts[e];
      L->expert_bias_host[e] += (float)(m->hp.moe_bias_update_rate * (d > 0 ? 1 : d < 0 ? -1 : 0));
    }
    m->ops->to_device(L->expert_bias, L->expert_bias_host, sizeof(float) * (size_t)m->E);
  }
  if (m->events.out)
    fprintf(
        m->events.out,
        "step=%d mb=-1 kind=expert_bias module=%s rate=%a applied=%d fp_counts=%016llx "
        "fp_bias=%016llx\n",
        m->events.step, L->prefix, m->hp.moe_bias_update_rate, !skip,
        (unsigned long long)rc_fingerprint_host(L->token_counts, sizeof(double) * (size_t)m->E),
        (unsigned long long)rc_fingerprint_host(L->expert_bias_host, sizeof(float) * (size_t)m->E));
}

void rc_model_end_step(rc_model *m) {
  if (m->fp8_slots) { /* the step's amaxes (weights, inputs, grads), one read back for all */
    m->ops->to_host(m->fp8_amax_host, m->fp8_amax,
                    RC_FP8_AMAX_SLOT * (size_t)m->fp8_slots * sizeof(float));
    if (m->comm) rc_dist_max_host(m, m->fp8_amax_host, RC_FP8_AMAX_SLOT * m->fp8_slots);
  }
  for (int i = 0; i < m->nlinears; i++) rc_linear_end_step(m, &m->linears[i]);
  for_each_moe_layer(m, update_expert_bias);
}

double rc_model_lr(const rc_model *m, int64_t s) {
  const rc_step_settings *h = &m->hp;
  s -= h->warmup_origin;
  if (h->warmup > 0 && s <= h->warmup) return h->lr * (double)s / (double)h->warmup;
  int64_t span = h->decay_steps - h->warmup;
  double progress = span > 0 ? (double)(s - h->warmup) / (double)span : 1.0;
  if (progress > 1) progress = 1;
  return h->min_lr + 0.5 * (h->lr - h->min_lr) * (1.0 + cos(M_PI * progress));
}

void rc_model_bias_corrections(const rc_model *m, int64_t step, double *bc1, double *bc2) {
  const rc_step_settings *h = &m->hp;
  if (h->bias_correction_fp32) {
    *bc1 = 1.0f - powf((float)h->beta1, (float)step);
    *bc2 = 1.0f - powf((float)h->beta2, (float)step);
  } else {
    *bc1 = 1.0 - pow(h->beta1, (double)step);
    *bc2 = 1.0 - pow(h->beta2, (double)step);
  }
}

/* --loss-normalize-at finish (docs/design.md §3.5): the microbatches left
 * raw sums in main_grad; each buffer is scaled once by its group's factor
 * (rc_loss_count_norm): the MTP modules' by the MTP term's denominator when
 * the heads are detached, every other one by the main loss's. The loss
 * scale is still in: the unscale follows, as an optimizer's step follows
 * the finish's scale_gradients. */
static void normalise_at_finish(rc_model *m) {
  double main = rc_loss_count_norm(m, m->hp.main_denominator);
  double mtp = rc_loss_count_norm(m, m->hp.mtp_denominator);
  for (int i = 0; i < m->nparams; i++) {
    bool own = m->cfg.mtp_detach_heads && rc_param_is_mtp(m, i);
    m->ops->scale(m->params[i].main_grad, (float)(own ? mtp : main), m->params[i].numel);
  }
}

/* Detached MTP heads: the sums of squares of the MTP modules' gradients and
 * of every other one, each in parameter order, from one batched call. */
static void grad_sumsq_split(rc_model *m, double *rest, double *mtp) {
  int n = m->nparams;
  double *part = calloc((size_t)n + 1, sizeof(double));
  double *in = calloc((size_t)n + 1, sizeof(double)), *out = calloc((size_t)n + 1, sizeof(double));
  const float **x = calloc((size_t)n + 1, sizeof(*x));
  size_t *numel = calloc((size_t)n + 1, sizeof(size_t));
  if (!part || !in || !out || !x || !numel) abort();
  for (int i = 0; i < n; i++) x[i] = m->params[i].main_grad, numel[i] = m->params[i].numel;
  m->ops->sumsq_many(part, x, numel, n);
  int a = 0, b = 0;
  for (int i = 0; i < n; i++) {
    if (rc_param_is_mtp(m, i))
      in[a++] = part[i];
    else
      out[b++] = part[i];
  }
  *mtp = rc_sum_partials(m, in, a);
  *rest = rc_sum_partials(m, out, b);
  free(part), free(in), free(out), free(x), free(numel);
}

/* Sum of squares of every main_grad in parameter order. */
static double grad_sumsq(rc_model *m) {
  int n = m->nparams;
  double *part = calloc((size_t)n + 1, sizeof(double));
  const float **x = calloc((size_t)n + 1, sizeof(*x));
  size_t *numel = calloc((size_t)n + 1, sizeof(size_t));
  if (!part || !x || !numel) abort();
  for (int i = 0; i < n; i++) x[i] = m->params[i].main_grad, numel[i] = m->params[i].numel;
  m->ops->sumsq_many(part, x, numel, n);
  double total = rc_sum_partials(m, part, n);
  free(part), free(x), free(numel);
  return total;
}

/* Megatron's DynamicGradScaler. With the event log on, a
 * `scaler_update` event says what it decided and with which settings
 * (docs/events.md). */
static void update_loss_scale(rc_model *m, bool overflow) {
  const rc_step_settings *h = &m->hp;
  if (m->cfg.precision != RC_PREC_FP16) return;
  const char *decision;
  if (overflow) {
    m->growth_tracker = 0;
    m->hysteresis_tracker -= 1;
    decision = "absorb"; /* the hysteresis takes the overflow: the scale is kept */
    if (m->hysteresis_tracker <= 0) {
      m->loss_scale = fmax(m->loss_scale * h->backoff_factor, h->min_loss_scale);
      m->hysteresis_tracker = h->hysteresis;
      decision = "back_off";
    }
  } else {
    m->growth_tracker += 1;
    decision = "count";
    if (m->growth_tracker == h->loss_scale_window) {
      m->growth_tracker = 0;
      m->hysteresis_tracker = h->hysteresis;
      m->loss_scale *= h->growth_factor;
      decision = "grow";
    }
  }
  if (m->events.out)
    fprintf(m->events.out,
            "step=%d mb=-1 kind=scaler_update decision=%s scale=%a growth_tracker=%lld "
            "hysteresis_tracker=%lld growth_interval=%lld hysteresis=%lld\n",
            m->events.step, decision, m->loss_scale, (long long)m->growth_tracker,
            (long long)m->hysteresis_tracker, (long long)h->loss_scale_window,
            (long long)h->hysteresis);
}

/* The event `step_state` (docs/events.md): the state the step starts from,
 * logged before anything of the step runs, so that bisect can tell a value
 * the step computed from one it was handed. Host scalars as they are, the
 * weights, moments and expert biases as fingerprints. With data parallel
 * only rank 0 logs, so nothing collective is called here: the moments are
 * sharded and left out. */
static void log_step_state(rc_model *m) {
  uint64_t fp_bias = 0;
  for (int l = 0; l < m->cfg.layers; l++)
    if (m->layers[l].moe)
      fp_bias = rc_fingerprint_combine(fp_bias, rc_fingerprint_host(m->layers[l].expert_bias_host,
                                                                    sizeof(float) * (size_t)m->E));
  for (int p = 0; p < m->n_mtp_physical; p++)
    if (m->mtp[p].trm.moe)
      fp_bias = rc_fingerprint_combine(fp_bias, rc_fingerprint_host(m->mtp[p].trm.expert_bias_host,
                                                                    sizeof(float) * (size_t)m->E));
  fprintf(m->events.out,
          "step=%d mb=-1 kind=step_state loss_scale=%a growth_tracker=%lld hysteresis_tracker=%lld "
          "optimizer_step=%lld scheduler_steps=%lld consumed_samples=%lld rng_seed=%016llx "
          "rng_offset=%llu fp_params=%016llx fp_expert_bias=%016llx",
          m->events.step, m->loss_scale, (long long)m->growth_tracker,
          (long long)m->hysteresis_tracker, (long long)m->optimizer_step,
          (long long)m->scheduler_steps, (long long)m->consumed_samples,
          (unsigned long long)m->rng_seed, (unsigned long long)m->rng_offset,
          (unsigned long long)rc_model_fp_params(m), (unsigned long long)fp_bias);
  if (!m->comm)
    fprintf(m->events.out, " fp_optim=%016llx", (unsigned long long)rc_model_fp_optim(m));
  fputc('\n', m->events.out);
}

/* The step's global counts (model.h step_counts), the denominators of a
 * global --loss-type: every microbatch's mask of this rank read before the
 * first one runs, then summed over the ranks, as a trainer all-reduces its
 * valid-token count before the step (docs/design.md §3.5). The batches are
 * read again by the microbatches: the sampler is a pure function of the
 * position. */
static void count_step(rc_model *m, const struct rc_data *data, int32_t **ids, int32_t **labels,
                       float **mask, int64_t *indices) {
  const rc_config *c = &m->cfg;
  int M = c->microbatches;
  double counts[2] = {0, 0}; /* tokens, sequences */
  for (int mb = 0; mb < M; mb++) {
    int64_t first = m->consumed_samples + ((int64_t)m->rank * M + mb) * m->B;
    rc_data_sampler_batch(data, m->data_epoch, first, m->B, m->S, m->D, ids, labels, mask, indices);
    for (int b = 0; b < m->B; b++) {
      double n = 0;
      for (int s = 0; s < m->S; s++) n += mask[0][(size_t)b * m->S + s];
      counts[0] += n, counts[1] += n > 0;
    }
  }
  if (m->comm) rc_dist_sum_host(m, counts, 2);
  m->step_counts[RC_DENOM_MICROBATCH] = 0;
  m->step_counts[RC_DENOM_TOKENS] = counts[0];
  m->step_counts[RC_DENOM_SEQUENCES] = counts[1];
}

/* The step's M microbatches on this rank: forward and backward of each,
 * accumulating into main_grad; st gets the mean losses and the tokens
 * (with a global denominator, the main loss as it defines it: the step's
 * sum over its count, this rank's share of it times the world size, which
 * the ranks' mean then divides out). */
static void run_microbatches(rc_model *m, const struct rc_data *data, rc_step_stats *st) {
  const rc_config *c = &m->cfg;
  int T = m->T, D = m->D, M = c->microbatches;
  int32_t *ids[RC_MAX_MTP_DEPTH + 1], *labels[RC_MAX_MTP_DEPTH + 1];
  float *mask[RC_MAX_MTP_DEPTH + 1];
  for (int k = 0; k <= D; k++) {
    ids[k] = malloc(sizeof(int32_t) * (size_t)T);
    labels[k] = malloc(sizeof(int32_t) * (size_t)T);
    mask[k] = malloc(sizeof(float) * (size_t)T);
    if (!ids[k] || !labels[k] || !mask[k]) abort();
  }
  int64_t *indices = malloc(sizeof(int64_t) * (size_t)m->B);
  if (!indices) abort();
  rc_model_profile_mark(m, RC_PROF_OPTIMIZER);
  const bool global = c->loss_type != RC_LOSS_MICROBATCH_MEAN;
  double numerator = 0;
  if (global) count_step(m, data, ids, labels, mask, indices);
  for (int mb = 0; mb < M; mb++) {
    m->events.microbatch = mb;
    /* rank r's microbatch mb of this step: W ranks together consume W*M*B
     * samples, rank-major (docs/distributed.md); the sampler at its epoch
     * maps them to corpus samples */
    int64_t first = m->consumed_samples + ((int64_t)m->rank * M + mb) * m->B;
    rc_data_sampler_batch(data, m->data_epoch, first, m->B, m->S, D, ids, labels, mask, indices);
    if (m->events.out) {
      fprintf(m->events.out, "step=%d mb=%d kind=batch samples=%lld fp_ids=%016llx", m->events.step,
              mb, (long long)first,
              (unsigned long long)rc_fingerprint_host(ids[0], sizeof(int32_t) * (size_t)T));
      /* with epochs, the sampler's state: its epoch and the corpus samples */
      if (c->epoch_samples)
        fprintf(m->events.out, " epoch=%lld fp_indices=%016llx", (long long)m->data_epoch,
                (unsigned long long)rc_fingerprint_host(indices, sizeof(int64_t) * (size_t)m->B));
      fputc('\n', m->events.out);
    }
    double loss, mtp_loss[RC_MAX_MTP_DEPTH], mtp_acc[RC_MAX_MTP_DEPTH];
    int64_t tokens;
    rc_model_microbatch_io(m, ids, labels, mask, &loss, mtp_loss, mtp_acc, &tokens);
    st->loss += loss / M;
    numerator += m->mb_main_numerator;
    for (int k = 0; k < D; k++)
      st->mtp_loss[k] += mtp_loss[k] / M, st->mtp_acc[k] += mtp_acc[k] / M;
    st->tokens += tokens;
  }
  for (int k = 0; k <= D; k++) free(ids[k]), free(labels[k]), free(mask[k]);
  free(indices);
  if (global) st->loss = numerator * rc_loss_count_norm(m, m->hp.main_denominator);
  m->consumed_samples += (int64_t)M * m->B * c->world_size;
  /* the loader ran out at the end of an epoch: set_epoch(the next one) */
  if (c->epoch_samples && m->consumed_samples % c->epoch_samples == 0)
    m->data_epoch = m->consumed_samples / c->epoch_samples;
}

/* Data parallel: the trace shows the mean over ranks of the losses and the
 * summed tokens; the gradients are reduce-scattered (mean over ranks,
 * unscaled), and the overflow and the norm are global. Returns overflow. */
static bool reduce_across_ranks(rc_model *m, rc_step_stats *st) {
  int D = m->D;
  double v[2 + 2 * RC_MAX_MTP_DEPTH]; /* loss, tokens, and a loss and an accuracy per depth */
  int n = 0;
  v[n++] = st->loss;
  for (int k = 0; k < D; k++) v[n++] = st->mtp_loss[k], v[n++] = st->mtp_acc[k];
  v[n++] = (double)st->tokens;
  rc_dist_sum_host(m, v, n);
  int W = m->comm->world;
  n = 0;
  st->loss = v[n++] / W;
  for (int k = 0; k < D; k++) st->mtp_loss[k] = v[n++] / W, st->mtp_acc[k] = v[n++] / W;
  st->tokens = (int64_t)v[n++];
  rc_dist_reduce_grads(m);
  bool overflow = m->cfg.precision == RC_PREC_FP16 && rc_dist_overflow(m);
  if (m->cfg.mtp_detach_heads) {
    double rest, mtp;
    rc_dist_grad_sumsq_split(m, &rest, &mtp);
    st->grad_norm = sqrt(rest), st->mtp_grad_norm = sqrt(mtp);
  } else {
    st->grad_norm = sqrt(rc_dist_grad_sumsq(m));
  }
  st->fp_main_grad = rc_dist_fp_grad(m);
  return overflow;
}

/* One rank without an event log: the optimizer is adamw_many, which also
 * fingerprints main_grad, the weights and the moments (optimizer_update). */
static bool fused_optimizer(const rc_model *m) {
  return !m->comm && !m->events.out;
}

/* One rank: unscale once, before the grad norm. Returns overflow. */
static bool unscale_local(rc_model *m, rc_step_stats *st) {
  const rc_ops *o = m->ops;
  bool overflow = false;
  if (m->loss_scale != 1.0)
    for (int i = 0; i < m->nparams; i++)
      o->scale(m->params[i].main_grad, (float)(1.0 / m->loss_scale), m->params[i].numel);
  if (m->cfg.precision == RC_PREC_FP16)
    for (int i = 0; i < m->nparams && !overflow; i++)
      overflow = o->count_nonfinite(m->params[i].main_grad, m->params[i].numel) > 0;
  if (m->cfg.mtp_detach_heads) {
    double rest, mtp;
    grad_sumsq_split(m, &rest, &mtp);
    st->grad_norm = sqrt(rest), st->mtp_grad_norm = sqrt(mtp);
  } else {
    st->grad_norm = sqrt(grad_sumsq(m));
  }
  /* else the optimizer fingerprints main_grad as it reads it */
  if (overflow || !fused_optimizer(m)) st->fp_main_grad = rc_model_fp_main_grad(m);
  return overflow;
}

/* AdamW on every parameter in one batched op, which also returns the
 * fingerprints the step reports (main_grad as the update read it; the
 * weights and moments it wrote), folded as rc_model_fp_main_grad,
 * rc_model_fp_params and rc_model_fp_optim fold them: the same values. It
 * also writes each half linear's weight copy from the updated weight
 * (linear.h rc_model_params_from_optimizer), so the next step's forward
 * casts none; a weight two linears copy (none at present) is written for
 * the first, and the other casts its own. */
static void adamw_fused(rc_model *m, rc_step_stats *st, float clip, float clip_mtp, float bc1,
                        float bc2) {
  const rc_step_settings *h = &m->hp;
  int n = m->nparams;
  rc_adamw_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
  uint64_t *fp = calloc(4 * (size_t)n + 1, sizeof *fp);
  bool *copied = calloc((size_t)m->nlinears + 1, sizeof *copied);
  if (!ts || !fp || !copied) abort();
  for (int i = 0; i < n; i++) {
    const rc_param *p = &m->params[i];
    ts[i] = (rc_adamw_tensor){.param = p->weight,
                              .exp_avg = p->exp_avg,
                              .exp_avg_sq = p->exp_avg_sq,
                              .grad = p->main_grad,
                              .n = p->numel,
                              .weight_decay = p->decay ? (float)h->weight_decay : 0.0f};
  }
  const bool copy_params = rc_model_params_from_optimizer();
  for (int l = 0; l < m->nlinears && copy_params; l++) {
    rc_linear *lin = &m->linears[l];
    uint16_t *copy = rc_linear_optimizer_copy(m, lin);
    rc_adamw_tensor *t = &ts[lin->w - m->params];
    if (!copy || t->param_half) continue;
    t->param_half = copy, t->half_ct = m->ct;
    copied[l] = true;
  }
  /* one call, or with detached heads three: the parameters before the MTP
   * modules', theirs with their own clip, the rest (the output head); each
   * tensor's update is its own, so the split changes no bit of it */
  int cut[4] = {0, n, n, n};
  if (m->cfg.mtp_detach_heads) cut[1] = m->mtp_params_begin, cut[2] = m->mtp_params_end;
  for (int g = 0; g < 3; g++)
    if (cut[g + 1] > cut[g])
      m->ops->adamw_many(ts + cut[g], cut[g + 1] - cut[g], (float)st->lr, (float)h->beta1,
                         (float)h->beta2, (float)h->eps, g == 1 ? clip_mtp : clip, bc1, bc2,
                         fp + 4 * (size_t)cut[g]);
  for (int l = 0; l < m->nlinears; l++)
    if (copied[l]) rc_linear_copy_written(m, &m->linears[l]);
  uint64_t grad = 0, params = 0, optim = rc_mix64((uint64_t)m->optimizer_step);
  for (int i = 0; i < n; i++) {
    grad = rc_fingerprint_combine(grad, fp[4 * i]);
    params = rc_fingerprint_combine(params, fp[4 * i + 1]);
    optim = rc_fingerprint_combine(optim, fp[4 * i + 2]);
    optim = rc_fingerprint_combine(optim, fp[4 * i + 3]);
  }
  st->fp_main_grad = grad, st->fp_params = params, st->fp_optim = optim;
  free(ts), free(fp), free(copied);
}

/* The optimizer step of a step that did not overflow: clipping, the
 * scheduler, bias corrections, AdamW on every parameter (or this rank's
 * slice, then the all-gather). */
static bool optimizer_update(rc_model *m, rc_step_stats *st) {
  const rc_ops *o = m->ops;
  const rc_step_settings *h = &m->hp;
  double clip = 1.0;
  if (h->clip_grad > 0 && st->grad_norm > h->clip_grad)
    clip = h->clip_grad / (st->grad_norm + 1e-6);
  /* detached MTP heads: their own clip on their own norm (docs/design.md §3.5) */
  double clip_mtp = clip;
  if (m->cfg.mtp_detach_heads)
    clip_mtp = h->mtp_clip_grad > 0 && st->mtp_grad_norm > h->mtp_clip_grad
                   ? h->mtp_clip_grad / (st->mtp_grad_norm + 1e-6)
                   : 1.0;
  m->optimizer_step += 1;
  m->scheduler_steps += 1;
  st->lr = rc_model_lr(m, m->scheduler_steps);
  double bc1, bc2;
  rc_model_bias_corrections(m, m->optimizer_step, &bc1, &bc2);
  /* lr, clip and the bias corrections are computed from the counters and
   * settings logged beside them: bisect tells a value computed from equal
   * counters from a counter that differs (docs/bisect.md) */
  if (m->events.out) {
    fprintf(m->events.out,
            "step=%d mb=-1 kind=optimizer lr=%a clip=%a bc1=%a bc2=%a optimizer_step=%lld "
            "scheduler_steps=%lld max_norm=%a",
            m->events.step, st->lr, clip, bc1, bc2, (long long)m->optimizer_step,
            (long long)m->scheduler_steps, h->clip_grad);
    if (m->cfg.mtp_detach_heads)
      fprintf(m->events.out, " mtp_clip=%a mtp_max_norm=%a", clip_mtp, h->mtp_clip_grad);
    fputc('\n', m->events.out);
  }
  if (m->comm) {
    rc_dist_adamw(m, (float)st->lr, (float)clip, (float)clip_mtp, (float)bc1, (float)bc2);
    rc_dist_gather_weights(m);
    return false;
  }
  if (fused_optimizer(m)) {
    adamw_fused(m, st, (float)clip, (float)clip_mtp, (float)bc1, (float)bc2);
    return true;
  }
  for (int i = 0; i < m->nparams; i++) {
    rc_param *p = &m->params[i];
    double c_i = m->cfg.mtp_detach_heads && rc_param_is_mtp(m, i) ? clip_mtp : clip;
    o->adamw(p->weight, p->main_grad, p->exp_avg, p->exp_avg_sq, p->numel, (float)st->lr,
             (float)h->beta1, (float)h->beta2, (float)h->eps,
             p->decay ? (float)h->weight_decay : 0.0f, (float)c_i, (float)bc1, (float)bc2);
    if (m->events.out)
      fprintf(m->events.out,
              "step=%d mb=-1 kind=adam param=%s fp_main_grad=%016llx fp_weight=%016llx "
              "fp_exp_avg=%016llx "
              "fp_exp_avg_sq=%016llx\n",
              m->events.step, p->name,
              (unsigned long long)o->fingerprint(p->main_grad, p->numel * 4),
              (unsigned long long)o->fingerprint(p->weight, p->numel * 4),
              (unsigned long long)o->fingerprint(p->exp_avg, p->numel * 4),
              (unsigned long long)o->fingerprint(p->exp_avg_sq, p->numel * 4));
  }
  return false;
}

void rc_model_train_step(rc_model *m, const struct rc_data *data, rc_step_stats *st) {
  memset(st, 0, sizeof *st);
  st->step = m->iteration + 1;
  st->loss_scale = m->loss_scale;
  m->events.step = (int)st->step;
  m->events.out = m->events.file && st->step >= m->events.from_step ? m->events.file : NULL;
  if (m->events.out) log_step_state(m);

  /* Zero main_grad at the start of every step. The injected bug models a
   * "zero only if this process produced gradients" shortcut combined with a
   * checkpoint that carries main_grad: after a load the stale buffer is
   * accumulated into. */
  if (!(m->cfg.inject & RC_BUG_GRAD_BUFFER_NOT_ZEROED_AFTER_LOAD) || m->grads_dirty)
    rc_model_zero_grads(m);
  rc_model_begin_step(m);
  m->weights_serial++, m->weights_frozen = true; /* until the optimizer (model.h) */
  run_microbatches(m, data, st);
  m->weights_frozen = false;
  if (m->hp.normalize_at_finish && !m->dist_rc) normalise_at_finish(m);
  bool overflow = m->comm ? reduce_across_ranks(m, st) : unscale_local(m, st);
  bool fingerprinted = false; /* the state's fingerprints came with the update */
  if (overflow) {
    st->skipped = 1;
    st->lr = rc_model_lr(m, m->scheduler_steps + 1);
  } else {
    fingerprinted = optimizer_update(m, st);
  }
  if (m->events.out)
    fprintf(m->events.out,
            "step=%d mb=-1 kind=loss_scaler scale=%a overflow=%d growth_tracker=%lld "
            "hysteresis_tracker=%lld "
            "grad_norm=%a\n",
            m->events.step, m->loss_scale, overflow, (long long)m->growth_tracker,
            (long long)m->hysteresis_tracker, st->grad_norm);
  update_loss_scale(m, overflow);
  m->iteration += 1;
  rc_model_end_step(m);
  m->steps_in_process += 1;
  st->consumed_samples = m->consumed_samples;
  if (!fingerprinted) {
    st->fp_params = rc_model_fp_params(m);
    st->fp_optim = m->comm ? rc_dist_fp_optim(m) : rc_model_fp_optim(m);
  }
  rc_model_profile_mark(m, RC_PROF_OPTIMIZER);
}

/* Folds, into acc, the fingerprints of `per` float tensors of every
 * parameter (tensor k of parameter i at offsets[k] bytes into rc_param), in
 * the order parameter by parameter, tensor by tensor — one batched op. */
static uint64_t fp_params_fold(const rc_model *m, uint64_t acc, const size_t *offsets, int per) {
  int n = m->nparams * per;
  const void **x = calloc((size_t)n + 1, sizeof(*x));
  size_t *nbytes = calloc((size_t)n + 1, sizeof(size_t));
  uint64_t *fp = calloc((size_t)n + 1, sizeof(uint64_t));
  if (!x || !nbytes || !fp) abort();
  for (int i = 0; i < m->nparams; i++)
    for (int k = 0; k < per; k++) {
      const char *p = (const char *)&m->params[i];
      x[i * per + k] = *(float *const *)(p + offsets[k]);
      nbytes[i * per + k] = m->params[i].numel * 4;
    }
  m->ops->fingerprint_many(fp, x, nbytes, n);
  for (int j = 0; j < n; j++) acc = rc_fingerprint_combine(acc, fp[j]);
  free(x), free(nbytes), free(fp);
  return acc;
}

uint64_t rc_model_fp_params(const rc_model *m) {
  const size_t off[] = {offsetof(rc_param, weight)};
  return fp_params_fold(m, 0, off, 1);
}

uint64_t rc_model_fp_main_grad(const rc_model *m) {
  const size_t off[] = {offsetof(rc_param, main_grad)};
  return fp_params_fold(m, 0, off, 1);
}

uint64_t rc_model_fp_optim(const rc_model *m) {
  const size_t off[] = {offsetof(rc_param, exp_avg), offsetof(rc_param, exp_avg_sq)};
  return fp_params_fold(m, rc_mix64((uint64_t)m->optimizer_step), off, 2);
}
