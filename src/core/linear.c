/* linear.c — the TE-style linear: the mechanism under test (docs/design.md §3.1).
 *
 * Per forward call the policy picks the value passed (TRUE/FALSE/NONE) from
 * the module's process-local is_first_microbatch flag; the flag then becomes
 * FALSE. The value is remembered for that call's backward, where, with
 * gradient-accumulation fusion on, it picks the wgrad GEMM's beta:
 * TRUE overwrites main_grad (beta = 0), anything else accumulates (beta = 1).
 * With a shared MTP layer the first forward (depth 1, TRUE after a fresh
 * start) pairs with the last backward, so its overwrite discards the other
 * depths' gradients: the seed's bug. The same value drives the fp8 weight
 * cache: NONE quantises afresh, TRUE refreshes the cache, FALSE reuses it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/linear.h"

const char *rc_flag_name(rc_flag f) {
  return f == RC_FLAG_TRUE ? "TRUE" : f == RC_FLAG_FALSE ? "FALSE" : "NONE";
}

static bool is_tracked(const rc_model *m) {
  return m->cfg.precision == RC_PREC_FP8;
}

static bool is_quantised(const rc_model *m, const rc_linear *lin) {
  return lin->te_style && m->cfg.precision == RC_PREC_FP8;
}

rc_flag rc_linear_policy_value(const rc_model *m, const rc_linear *lin) {
  const rc_config *c = &m->cfg;
  bool tracked = is_tracked(m);
  switch (c->policy) {
  case RC_POLICY_LEGACY:
  case RC_POLICY_PERSIST:
    return c->no_weight_cache ? RC_FLAG_NONE : lin->flag;
  case RC_POLICY_UNTRACKED_NONE:
    return (c->no_weight_cache || !tracked) ? RC_FLAG_NONE : lin->flag;
  case RC_POLICY_RESOLVE:
    return (c->no_weight_cache || !tracked || lin->repeated) ? RC_FLAG_NONE : lin->flag;
  case RC_POLICY_ALWAYS_FALSE:
    return RC_FLAG_FALSE;
  }
  return RC_FLAG_NONE;
}

/* Delayed scaling as in Transformer Engine: scale = fp8_max / amax, amax the
 * maximum of the history (0 = none recorded yet: the first quantisation
 * scales just in time). The history therefore shapes every quantised
 * weight, which is why it is checkpointed. */
static float scale_from_amax(float amax) {
  if (!(amax > 0) || !isfinite(amax)) return 1.0f;
  return (float)(448.0 / (double)amax);
}

void rc_linear_begin_step(rc_model *m, rc_linear *lin) {
  if (!is_quantised(m, lin)) return;
  float h = 0;
  for (int i = 0; i < m->cfg.fp8_amax_history; i++)
    h = lin->amax_history[i] > h ? lin->amax_history[i] : h;
  lin->fp8_scale = h > 0 ? scale_from_amax(h) : 0.0f;
  lin->step_amax = 0;
  lin->quantised_this_step = false;
}

void rc_linear_end_step(rc_model *m, rc_linear *lin) {
  if (!is_quantised(m, lin) || !lin->quantised_this_step) return;
  int n = m->cfg.fp8_amax_history;
  memmove(lin->amax_history + 1, lin->amax_history, sizeof(float) * (size_t)(n - 1));
  lin->amax_history[0] = lin->step_amax;
}

static void quantise(rc_model *m, rc_linear *lin, int step) {
  const rc_ops *o = m->ops;
  size_t n = lin->w->numel;
  float amax = o->amax(lin->w->weight, n);
  if (lin->fp8_scale == 0) lin->fp8_scale = scale_from_amax(amax);
  if (amax > lin->step_amax) lin->step_amax = amax;
  lin->quantised_this_step = true;
  o->quantize_e4m3(lin->wq, lin->w->weight, n, lin->fp8_scale);
  lin->cache_step = step;
}

/* Makes lin->wq the weight this forward call uses. */
static void prepare_weight(rc_model *m, rc_linear *lin, rc_flag p) {
  const rc_ops *o = m->ops;
  if (!is_quantised(m, lin)) {
    if (lin->wq != lin->w->weight) o->round_to(lin->wq, lin->w->weight, lin->w->numel, m->ct);
    return;
  }
  int step = (int)m->iteration + 1;
  if (m->cfg.no_weight_cache || p == RC_FLAG_NONE) {
    quantise(m, lin, step); /* afresh, not cached */
    lin->cache_valid = false;
  } else if (p == RC_FLAG_TRUE || !lin->cache_valid) {
    quantise(m, lin, step); /* refresh, or fill on a miss */
    lin->cache_valid = true;
  } /* FALSE with a valid cache: reuse, even if the weights moved since */
}

/* fp32 weights and fp8-dequantised weights (arbitrary floats) run fp32 GEMMs;
 * bf16/fp16 weights run in their compute type. */
static rc_compute gemm_compute(const rc_model *m, const rc_linear *lin) {
  return lin->wq == lin->w->weight || is_quantised(m, lin) ? RC_COMPUTE_FP32 : m->ct;
}

bool rc_linear_rounds_inputs(const rc_model *m, const rc_linear *lin) {
  return gemm_compute(m, lin) == m->ct;
}

const float *rc_linear_round_input(rc_model *m, const rc_linear *lin, float *dst, const float *src,
                                   size_t n) {
  if (rc_linear_rounds_inputs(m, lin)) return src;
  m->ops->round_to(dst, src, n, m->ct);
  return dst;
}

static void log_event(rc_model *m, const char *dir, const rc_linear *lin, int call, rc_flag p,
                      int beta, const float *out, size_t out_n) {
  rc_event_log *ev = &m->events;
  const rc_ops *o = m->ops;
  fprintf(ev->out, "step=%d mb=%d kind=%s module=%s call=%d passed=%s beta=%d fp_out=%016llx",
          ev->step, ev->microbatch, dir, lin->name, call, rc_flag_name(p), beta,
          (unsigned long long)o->fingerprint(out, out_n * sizeof(float)));
  if (beta >= 0)
    fprintf(ev->out, " fp_main_grad=%016llx",
            (unsigned long long)o->fingerprint(lin->w->main_grad, lin->w->numel * sizeof(float)));
  fputc('\n', ev->out);
}

int rc_linear_forward(rc_model *m, rc_linear *lin, const float *x, float *y, int rows,
                      const int *group_rows) {
  rc_flag p = lin->te_style ? rc_linear_policy_value(m, lin) : RC_FLAG_NONE;
  int call = lin->ncalls++;
  if (call >= RC_MAX_CALLS) {
    fprintf(stderr, "resumecheck: internal error: %s called more than %d times\n", lin->name,
            RC_MAX_CALLS);
    abort();
  }
  lin->passed[call] = p;
  prepare_weight(m, lin, p);
  if (lin->te_style) lin->flag = RC_FLAG_FALSE;
  rc_compute ct = gemm_compute(m, lin);
  size_t wsz = (size_t)lin->out * lin->in;
  int r0 = 0;
  for (int g = 0; g < lin->groups; g++) {
    int r = group_rows ? group_rows[g] : rows;
    if (r > 0)
      m->ops->gemm(ct, false, true, r, lin->out, lin->in, 1.0f, x + (size_t)r0 * lin->in, lin->in,
                   lin->wq + g * wsz, lin->in, 0.0f, y + (size_t)r0 * lin->out, lin->out);
    r0 += r;
  }
  if (m->events.out) log_event(m, "forward", lin, call, p, -1, y, (size_t)rows * lin->out);
  return call;
}

void rc_linear_backward(rc_model *m, rc_linear *lin, int call, const float *dy, const float *x,
                        float *dx, int rows, const int *group_rows) {
  const rc_ops *o = m->ops;
  rc_flag p = lin->passed[call];
  rc_compute ct = gemm_compute(m, lin);
  size_t wsz = (size_t)lin->out * lin->in;
  bool overwrite = lin->te_style && m->cfg.grad_accum_fusion && p == RC_FLAG_TRUE;
  if (m->wgrad_hook) m->wgrad_hook(m->wgrad_hook_ctx, lin, call, dy, x, rows);
  int r0 = 0;
  for (int g = 0; g < lin->groups; g++) {
    int r = group_rows ? group_rows[g] : rows;
    const float *dy_g = dy + (size_t)r0 * lin->out, *x_g = x + (size_t)r0 * lin->in;
    if (dx && r > 0)
      o->gemm(ct, false, false, r, lin->in, lin->out, 1.0f, dy_g, lin->out, lin->wq + g * wsz,
              lin->in, 0.0f, dx + (size_t)r0 * lin->in, lin->in);
    float *main_grad = lin->w->main_grad + g * wsz;
    if (!lin->te_style || m->cfg.grad_accum_fusion) {
      /* fused: one GEMM into the fp32 main_grad, beta picked by the flag */
      o->gemm(ct, true, false, lin->out, lin->in, r, 1.0f, dy_g, lin->out, x_g, lin->in,
              overwrite ? 0.0f : 1.0f, main_grad, lin->in);
    } else {
      /* unfused: wgrad into scratch, then always accumulate */
      o->gemm(ct, true, false, lin->out, lin->in, r, 1.0f, dy_g, lin->out, x_g, lin->in, 0.0f,
              lin->wgrad_scratch, lin->in);
      o->add(main_grad, main_grad, lin->wgrad_scratch, wsz);
    }
    r0 += r;
  }
  if (m->events.out)
    log_event(m, "backward", lin, call, p, overwrite ? 0 : 1, dx ? dx : lin->w->main_grad,
              dx ? (size_t)rows * lin->in : lin->w->numel);
}
