/* test_core.c — the training core on the CPU backend: gradients against
 * finite differences, the first-microbatch mechanism of the seed, fusion-arm
 * equality, and the fp8 weight cache (issue: training core, show 1, 4-6).
 *
 * Usage: test_core gradcheck | mechanism | fusion-arms | fp8-cache | fp8-vs-bf16 | aux-loss |
 *        heads-order */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/numeric.h"
#include "core/config.h"
#include "core/data.h"
#include "core/linear.h"
#include "core/model.h"
#include "core/model_internal.h"

#include "check.h"

static void make_config(rc_config *c, const char *const *flags, int n) {
  rc_leg_opts leg;
  rc_config_defaults(c, &leg);
  char *argv[64];
  argv[0] = "test";
  for (int i = 0; i < n; i++) argv[i + 1] = (char *)flags[i];
  rc_err err = {0};
  int rc = rc_config_parse(n + 1, argv, c, NULL, &err);
  if (rc) {
    printf("config: %s\n", err.msg);
    exit(2);
  }
}

static void new_model(rc_model *m, const rc_config *c) {
  rc_err err = {0};
  if (rc_model_init(m, c, rc_cpu_ops(), 0, &err)) {
    printf("init: %s\n", err.msg);
    exit(2);
  }
}

/* A config from flags, its model on the CPU and its data. */
static void open_run(rc_config *c, rc_model *m, rc_data *d, const char *const *flags, int n) {
  make_config(c, flags, n);
  new_model(m, c);
  rc_data_open(d, c, NULL);
}

/* ---- 1. gradients of every parameter against central differences ---- */

typedef struct {
  int32_t *ids[17], *labels[17];
  float *mask[17];
} batch;

static void get_batch(const rc_model *m, const rc_data *d, batch *b) {
  for (int k = 0; k <= m->D; k++) {
    b->ids[k] = malloc(sizeof(int32_t) * (size_t)m->T);
    b->labels[k] = malloc(sizeof(int32_t) * (size_t)m->T);
    b->mask[k] = malloc(sizeof(float) * (size_t)m->T);
  }
  rc_data_batch(d, 0, m->B, m->S, m->D, b->ids, b->labels, b->mask);
}

static void free_batch(const rc_model *m, batch *b) {
  for (int k = 0; k <= m->D; k++) free(b->ids[k]), free(b->labels[k]), free(b->mask[k]);
}

/* J = main loss + lambda/D * sum_k mtp_loss_k + aux (M = 1): the objective
 * whose gradient backward accumulates into main_grad. */
static double objective(rc_model *m, batch *b) {
  double loss, mtp_loss[16], mtp_acc[16];
  int64_t tokens;
  rc_model_microbatch_io(m, b->ids, b->labels, b->mask, &loss, mtp_loss, mtp_acc, &tokens);
  double j = loss;
  for (int k = 0; k < m->D; k++) j += m->cfg.mtp_loss_scale / m->D * mtp_loss[k];
  return j + m->aux_loss;
}

/* Fingerprint of every routing decision: a finite difference is only
 * meaningful where top-k selection did not flip between the two sides. */
static uint64_t routing_fp(const rc_model *m) {
  uint64_t acc = 0;
  for (int l = 0; l < m->cfg.layers + m->D; l++) {
    bool moe = l < m->cfg.layers ? m->cfg.is_moe_layer[l] : m->cfg.is_moe_layer[m->cfg.layers - 1];
    if (moe)
      acc = rc_fingerprint_combine(
          acc, m->ops->fingerprint(m->acts[l].topk_idx, (size_t)m->T * m->K * 4));
  }
  return acc;
}

static int gradcheck(void) {
  static const char *flags[] = {"--precision",
                                "fp32",
                                "--microbatches",
                                "1",
                                "--mtp-depths",
                                "2",
                                "--mtp-repeated-layer",
                                "--moe-layers",
                                "1",
                                "--moe-scoring",
                                "softmax",
                                "--te-output-head"};
  int first = getenv("RC_VARIANT") ? atoi(getenv("RC_VARIANT")) : 0;
  for (int variant = first; variant < 4; variant++) {
    rc_config c;
    make_config(&c, flags, variant == 0 ? 12 : 11); /* second: plain head, sigmoid scoring */
    c.moe_scoring =
        variant == 0 ? 0 : 1; /* 0: softmax scoring + TE head; 1: sigmoid + plain head */
    if (variant >= 2) {       /* dense everywhere; 3: also without MTP */
      memset(c.is_moe_layer, 0, sizeof c.is_moe_layer);
      c.moe_layers[0] = 0;
      if (variant == 3) c.mtp_depths = 0, c.mtp_repeated_layer = false;
    }
    rc_model m;
    new_model(&m, &c);
    m.track_aux_loss = true; /* the objective includes the load-balancing loss's value */
    rc_data d;
    rc_data_open(&d, &c, NULL);
    batch b;
    get_batch(&m, &d, &b);
    rc_model_zero_grads(&m);
    objective(&m, &b);
    uint64_t base_routing = routing_fp(&m);
    const rc_ops *o = m.ops;
    int checked = 0, skipped = 0, caught = 0, significant = 0;
    /* snapshot every gradient first: each objective() call accumulates more */
    float *grads[RC_MAX_PARAMS];
    for (int i = 0; i < m.nparams; i++) {
      grads[i] = malloc(m.params[i].numel * 4);
      o->to_host(grads[i], m.params[i].main_grad, m.params[i].numel * 4);
    }
    for (int i = 0; i < m.nparams; i++) {
      rc_param *p = &m.params[i];
      float *w0 = malloc(p->numel * 4), *g = grads[i], *v = malloc(p->numel * 4),
            *w = malloc(p->numel * 4);
      o->to_host(w0, p->weight, p->numel * 4);
      double gv = 0;
      uint64_t r = 99 + (uint64_t)i;
      for (size_t j = 0; j < p->numel; j++) {
        r = rc_mix64(r);
        /* +-1 on a random subset of about 256 elements: a large perturbation
         * of every element at once leaves the region where top-k routing is
         * smooth long before any single decision flips */
        v[j] = (r >> 32) % (p->numel > 256 ? p->numel / 256 : 1) ? 0.0f : (r & 1) ? 1.0f : -1.0f;
        gv += (double)g[j] * v[j];
      }
      /* a +-1 direction, step 1e-3: large against float rounding of J
       * (~1e-7); halved while any top-k routing decision flips */
      double eps = 1e-3, jp, jm;
      bool flipped;
      int tries = 0;
      do {
        eps *= 0.5;
        for (size_t j = 0; j < p->numel; j++) w[j] = w0[j] + (float)eps * v[j];
        o->to_device(p->weight, w, p->numel * 4);
        jp = objective(&m, &b);
        flipped = routing_fp(&m) != base_routing;
        for (size_t j = 0; j < p->numel; j++) w[j] = w0[j] - (float)eps * v[j];
        o->to_device(p->weight, w, p->numel * 4);
        jm = objective(&m, &b);
        flipped |= routing_fp(&m) != base_routing;
        o->to_device(p->weight, w0, p->numel * 4);
      } while (flipped && ++tries < 8);
      if (flipped) { /* a near-tie in top-k: the objective is not differentiable here */
        printf("  skipped %s: routing flips even at eps %g\n", p->name, eps);
        skipped++;
        free(w0), free(g), free(v), free(w);
        continue;
      }
      double fd = (jp - jm) / (2 * eps);
      /* J carries float rounding of about 1e-7, so the difference quotient
       * carries about 1e-7/eps: the tolerance grows when a routing flip forces
       * a smaller step */
      double noise = 2e-7 / eps, err = fabs(fd - gv), tol = 3e-2 * fabs(gv) + noise;
      CHECK(err <= tol, "variant %d %s: finite difference %.6g vs backward %.6g", variant, p->name,
            fd, gv);
      /* negative control: where the directional derivative is well above the
       * noise floor, a gradient 10% off must fail the same tolerance */
      if (noise < 0.02 * fabs(gv)) {
        significant++;
        caught += fabs(fd - 1.1 * gv) > 3e-2 * fabs(1.1 * gv) + noise;
      }
      if (err > tol || getenv("RC_VERBOSE"))
        printf("  %-60s fd %+.6e  bwd %+.6e\n", p->name, fd, gv);
      checked++;
      free(w0), free(g), free(v), free(w);
    }
    printf("variant %d: %d parameter tensors checked, %d skipped\n", variant, checked, skipped);
    CHECK(skipped <= 1, "variant %d: too many parameters skipped for routing flips", variant);
    CHECK(caught == significant && significant >= 3,
          "variant %d: a 10%% gradient error is caught for %d of %d tensors above the noise floor "
          "(of %d)",
          variant, caught, significant, checked);
    free_batch(&m, &b);
    rc_model_free(&m);
    rc_data_close(&d);
  }
  return failures;
}

/* ---- 4. the mechanism, in one process ---- */

typedef struct {
  rc_model *m;
  const char *names[3];
  float *contrib[3][4]; /* per linear, per call: dY^T X of that call alone */
} capture;

static void hook(void *ctx, const rc_linear *lin, int call, const float *dy, const float *x,
                 const uint16_t *dy_half, const uint16_t *x_half, int rows) {
  capture *cap = ctx;
  const rc_ops *o = cap->m->ops;
  for (int i = 0; i < 3; i++) {
    if (strcmp(lin->name, cap->names[i]) || call >= 4) continue;
    if (!cap->contrib[i][call]) cap->contrib[i][call] = o->alloc(lin->w->numel * 4);
    if (rc_linear_is_half(cap->m, lin))
      o->gemm_half(cap->m->ct, true, false, lin->out, lin->in, rows, 1.0f, dy_half, lin->out,
                   x_half, lin->in, 0.0f, cap->contrib[i][call], lin->in);
    else
      o->gemm(RC_COMPUTE_FP32, true, false, lin->out, lin->in, rows, 1.0f, dy, lin->out, x, lin->in,
              0.0f, cap->contrib[i][call], lin->in);
  }
}

static void step_with_capture(const char *policy, const char *fusion, capture *cap, rc_model *m) {
  const char *flags[] = {"--precision",
                         "bf16",
                         "--mtp-depths",
                         "2",
                         "--mtp-repeated-layer",
                         "--microbatches",
                         "1",
                         "--first-microbatch-policy",
                         policy,
                         "--grad-accum-fusion",
                         fusion};
  rc_config c;
  make_config(&c, flags, 11);
  new_model(m, &c);
  memset(cap, 0, sizeof *cap);
  cap->m = m;
  cap->names[0] = "mtp/layers/0/eh_proj";
  cap->names[1] = "mtp/layers/0/transformer_layer/self_attention/linear_qkv";
  cap->names[2] = "mtp/layers/0/transformer_layer/self_attention/linear_proj";
  m->wgrad_hook = hook;
  m->wgrad_hook_ctx = cap;
  rc_data d;
  rc_data_open(&d, &c, NULL);
  rc_step_stats st;
  rc_model_train_step(m, &d, &st);
  rc_data_close(&d);
}

static bool same_bytes(const rc_ops *o, const float *a, const float *b, size_t n) {
  float *ha = malloc(n * 4), *hb = malloc(n * 4);
  o->to_host(ha, a, n * 4);
  o->to_host(hb, b, n * 4);
  bool eq = memcmp(ha, hb, n * 4) == 0;
  free(ha), free(hb);
  return eq;
}

static int mechanism(void) {
  struct {
    const char *policy, *fusion;
    bool expect_depth1_only;
  } cases[] = {{"legacy", "on", true},    {"resolve", "on", false},
               {"legacy", "off", false},  {"persist", "off", false},
               {"resolve", "off", false}, {"untracked-none", "on", false}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    rc_model m;
    capture cap;
    step_with_capture(cases[ci].policy, cases[ci].fusion, &cap, &m);
    for (int i = 0; i < 3; i++) {
      rc_linear *lin = rc_model_find_linear(&m, cap.names[i]);
      CHECK(lin && lin->ncalls == 2, "%s: expected two calls (one per depth)", cap.names[i]);
      if (!lin || !cap.contrib[i][0] || !cap.contrib[i][1]) continue;
      size_t n = lin->w->numel;
      float *sum = m.ops->alloc(n * 4);
      m.ops->add(sum, cap.contrib[i][0], cap.contrib[i][1], n); /* depth 1 + depth 2 */
      bool is_d1 = same_bytes(m.ops, lin->w->main_grad, cap.contrib[i][0], n);
      bool is_sum = same_bytes(m.ops, lin->w->main_grad, sum, n);
      bool d1_is_sum = same_bytes(m.ops, cap.contrib[i][0], sum, n);
      CHECK(!d1_is_sum, "%s: depth 2 contributes nothing; the test would be vacuous", lin->name);
      if (cases[ci].expect_depth1_only)
        CHECK(is_d1 && !is_sum,
              "%s %s fusion %s: main_grad should be the depth-1 contribution alone", lin->name,
              cases[ci].policy, cases[ci].fusion);
      else
        CHECK(is_sum && !is_d1, "%s %s fusion %s: main_grad should be the sum over depths",
              lin->name, cases[ci].policy, cases[ci].fusion);
      CHECK(lin->passed[0] ==
                (!strcmp(cases[ci].policy, "legacy") || !strcmp(cases[ci].policy, "persist")
                     ? RC_FLAG_TRUE
                     : RC_FLAG_NONE),
            "%s %s: depth 1 passed %s", lin->name, cases[ci].policy, rc_flag_name(lin->passed[0]));
      m.ops->free(sum);
    }
    for (int i = 0; i < 3; i++)
      for (int c = 0; c < 4; c++)
        if (cap.contrib[i][c]) m.ops->free(cap.contrib[i][c]);
    printf("%-15s fusion %-3s: ok\n", cases[ci].policy, cases[ci].fusion);
    rc_model_free(&m);
  }
  return failures;
}

/* Steps a, b and a control model together for `steps` steps on one data
 * stream: b's every main_grad, its parameters' fingerprint and its loss
 * must equal a's (`what` names the pair in a failure); returns how many
 * (param, step) pairs of the control's main_grad differ from a's. */
static int step_together(rc_model *a, rc_model *b, rc_model *control, const rc_config *c, int steps,
                         const char *what) {
  rc_data d;
  rc_data_open(&d, c, NULL);
  int control_differs = 0;
  for (int step = 1; step <= steps; step++) {
    rc_step_stats sa, sb, sc;
    rc_model_train_step(a, &d, &sa);
    rc_model_train_step(b, &d, &sb);
    rc_model_train_step(control, &d, &sc);
    for (int i = 0; i < a->nparams; i++) {
      CHECK(same_bytes(a->ops, a->params[i].main_grad, b->params[i].main_grad, a->params[i].numel),
            "step %d %s: main_grad differs between %s", step, a->params[i].name, what);
      control_differs += !same_bytes(a->ops, a->params[i].main_grad, control->params[i].main_grad,
                                     a->params[i].numel);
    }
    CHECK(sa.fp_params == sb.fp_params && sa.loss == sb.loss,
          "step %d: parameters or loss differ between %s", step, what);
  }
  rc_data_close(&d);
  return control_differs;
}

/* ---- 5. resolve: fusion on and off give bitwise equal main_grad ---- */

static int fusion_arms(void) {
  const char *on[] = {"--first-microbatch-policy", "resolve", "--grad-accum-fusion", "on"};
  const char *off[] = {"--first-microbatch-policy", "resolve", "--grad-accum-fusion", "off"};
  const char *bad[] = {"--first-microbatch-policy", "legacy", "--grad-accum-fusion", "on"};
  rc_config ca, cb, cc;
  make_config(&ca, on, 4);
  make_config(&cb, off, 4);
  make_config(&cc, bad, 4);
  rc_model a, b, l;
  new_model(&a, &ca), new_model(&b, &cb), new_model(&l, &cc);
  int legacy_differs = step_together(&a, &b, &l, &ca, 5, "fusion on and off");
  /* negative control: the seed's bug (legacy, fusion on) makes main_grad differ */
  CHECK(legacy_differs > 0, "legacy + fusion on did not change any main_grad: comparison is blind");
  printf("5 steps compared, legacy differs in %d (param, step) pairs\n", legacy_differs);
  rc_model_free(&a), rc_model_free(&b), rc_model_free(&l);
  return failures;
}

/* ---- 6. fp8: the e4m3 weight cache and its transpose, delayed scaling ---- */

/* wq8_t is wq8 transposed, padding zero (the TN form of dgrad's operand). */
static bool transpose_holds(const rc_linear *lin) {
  size_t a = (size_t)lin->out * lin->in_pad, b = (size_t)lin->in * lin->out_pad;
  for (int o = 0; o < lin->out; o++)
    for (int i = 0; i < lin->in_pad; i++)
      if (lin->wq8[o * (size_t)lin->in_pad + i] !=
          (i < lin->in ? lin->wq8_t[i * (size_t)lin->out_pad + o] : 0))
        return false;
  for (int i = 0; i < lin->in; i++)
    for (int o = lin->out; o < lin->out_pad; o++)
      if (lin->wq8_t[i * (size_t)lin->out_pad + o]) return false;
  return a > 0 && b > 0;
}

/* Largest |decode(wq8) / scale - w| relative to |w|, over elements in the
 * normal range (|w| * scale >= 2^-6, where e4m3 keeps 3 mantissa bits). */
static double cache_rel_err(const rc_linear *lin, const float *w, float scale) {
  double worst = 0;
  for (int o = 0; o < lin->out; o++)
    for (int i = 0; i < lin->in; i++) {
      float x = w[o * (size_t)lin->in + i];
      if (fabsf(x) * scale < 0.015625f) continue;
      double q = rc_e4m3_decode(lin->wq8[o * (size_t)lin->in_pad + i]) / (double)scale;
      double e = fabs(q - x) / fabs(x);
      worst = e > worst ? e : worst;
    }
  return worst;
}

static int history_len(const rc_model *m, const float *h) {
  int n = 0;
  while (n < m->cfg.fp8_amax_history && h[n] > 0) n++;
  return n;
}

/* always-false never refreshes the cache, resolve does; the cache is the
 * weights at its step, in e4m3 at the history's scale, with its transpose;
 * the input and gradient histories grow a step at a time. */
static int fp8_cache(void) {
  const char *names[] = {"always-false", "resolve"};
  for (int pi = 0; pi < 2; pi++) {
    const char *flags[] = {"--precision", "fp8", "--first-microbatch-policy", names[pi]};
    rc_config c;
    rc_model m;
    rc_data d;
    open_run(&c, &m, &d, flags, 4);
    rc_linear *lin = rc_model_find_linear(&m, "decoder/layers/0/self_attention/linear_qkv");
    size_t n = (size_t)lin->out * lin->in_pad;
    float *w0 = malloc(lin->w->numel * 4);
    memcpy(w0, lin->w->weight, lin->w->numel * 4);
    uint8_t *after1 = malloc(n), *now = malloc(n);
    rc_step_stats st;
    rc_model_train_step(&m, &d, &st);
    memcpy(after1, lin->wq8, n);
    for (int s = 2; s <= 3; s++) rc_model_train_step(&m, &d, &st);
    memcpy(now, lin->wq8, n);
    bool stale = memcmp(after1, now, n) == 0;
    CHECK(transpose_holds(lin), "%s: wq8_t is not wq8 transposed with zero padding", names[pi]);
    CHECK(history_len(&m, lin->amax_history_input) == 3 &&
              history_len(&m, lin->amax_history_grad) == 3,
          "%s: input/grad histories hold %d/%d steps after 3, expected 3", names[pi],
          history_len(&m, lin->amax_history_input), history_len(&m, lin->amax_history_grad));
    if (pi == 0) {
      CHECK(lin->cache_step == 1, "always-false: cache filled at step %d, expected 1",
            lin->cache_step);
      CHECK(stale, "always-false: the forward of step 3 should still use step-1 quantised weights");
      /* quantised once, at step 1, just in time: scale = 448 / amax(w0) */
      CHECK(history_len(&m, lin->amax_history) == 1, "always-false: weight history has %d steps",
            history_len(&m, lin->amax_history));
      double e = cache_rel_err(lin, w0, 448.0f / lin->amax_history[0]);
      CHECK(e <= 1.0 / 16, "always-false: the cache is not the initial weights in e4m3 (rel %g)",
            e);
      /* negative control: the moved weights are not what the cache holds */
      CHECK(cache_rel_err(lin, lin->w->weight, 448.0f / lin->amax_history[0]) > 0 &&
                memcmp(w0, lin->w->weight, lin->w->numel * 4) != 0,
            "always-false: the weights did not move");
    } else {
      CHECK(lin->cache_step == 3, "resolve: cache filled at step %d, expected 3", lin->cache_step);
      CHECK(!stale, "resolve: the cache should be refreshed every step");
    }
    printf("%s: cache from step %d, input amax %g, grad amax %g\n", names[pi], lin->cache_step,
           lin->amax_history_input[0], lin->amax_history_grad[0]);
    free(w0), free(after1), free(now);
    rc_model_free(&m);
    rc_data_close(&d);
  }
  return failures;
}

/* fp8 GEMMs undo their scales: a step's loss and grad norm at fp8 stay
 * within e4m3's error of bf16's (a missing or doubled unscale is off by
 * orders of magnitude). */
static int fp8_vs_bf16(void) {
  const char *prec[] = {"bf16", "fp8"};
  rc_step_stats st[2][3];
  for (int p = 0; p < 2; p++) {
    const char *flags[] = {"--precision", prec[p], "--first-microbatch-policy", "resolve"};
    rc_config c;
    rc_model m;
    rc_data d;
    open_run(&c, &m, &d, flags, 4);
    for (int s = 0; s < 3; s++) rc_model_train_step(&m, &d, &st[p][s]);
    rc_model_free(&m);
    rc_data_close(&d);
  }
  for (int s = 0; s < 3; s++) {
    double dl = fabs(st[1][s].loss - st[0][s].loss) / st[0][s].loss;
    double dg = fabs(st[1][s].grad_norm - st[0][s].grad_norm) / st[0][s].grad_norm;
    printf("step %d: loss bf16 %.6f fp8 %.6f (rel %.2e), grad norm bf16 %.6f fp8 %.6f (rel %.2e)\n",
           s + 1, st[0][s].loss, st[1][s].loss, dl, st[0][s].grad_norm, st[1][s].grad_norm, dg);
    CHECK(dl < 1e-3, "step %d: fp8 loss %g is not within 0.1%% of bf16's %g", s + 1, st[1][s].loss,
          st[0][s].loss);
    CHECK(dg < 2e-2, "step %d: fp8 grad norm %g is not within 2%% of bf16's %g", s + 1,
          st[1][s].grad_norm, st[0][s].grad_norm);
  }
  /* negative control: fp8 is not silently bf16 */
  CHECK(st[1][0].loss != st[0][0].loss || st[1][0].grad_norm != st[0][0].grad_norm,
        "fp8 and bf16 give identical steps: fp8 GEMMs did not run");
  return failures;
}

/* ---- aux-loss: the load-balancing loss's value only when tracked ----
 * The value (a download of the router's probabilities per MoE forward) is
 * read by the gradient check alone, so the model computes it only under
 * track_aux_loss. Tracked: aux_loss is coeff * E * sum_e f_e * mean_t p[t,e]
 * summed over the MoE layers' forwards, recomputed here from each one's
 * probabilities and top-k choices; not tracked: 0. Either way the same
 * gradients (the loss's gradient needs only the counts). */
static int aux_loss_tracking(void) {
  static const char *flags[] = {"--microbatches",       "1",  "--mtp-depths",  "2",
                                "--moe-layers",         "1",  "--moe-scoring", "softmax",
                                "--moe-aux-loss-coeff", "0.5"};
  rc_config c;
  make_config(&c, flags, 10);
  rc_model m;
  new_model(&m, &c);
  rc_data d;
  rc_data_open(&d, &c, NULL);
  batch b;
  get_batch(&m, &d, &b);
  double value[2];
  uint64_t grads[2];
  double expected = 0;
  int moe_forwards = 0;
  for (int tracked = 0; tracked <= 1; tracked++) {
    m.track_aux_loss = tracked;
    rc_model_zero_grads(&m);
    objective(&m, &b);
    value[tracked] = m.aux_loss;
    grads[tracked] = 0;
    for (int i = 0; i < m.nparams; i++)
      grads[tracked] = rc_fingerprint_combine(
          grads[tracked], m.ops->fingerprint(m.params[i].main_grad, m.params[i].numel * 4));
  }
  int T = m.T, E = m.E, K = m.K;
  float *probs = malloc(sizeof(float) * (size_t)T * E);
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)T * K);
  for (int l = 0; l < m.cfg.layers + m.D; l++) {
    bool moe = l < m.cfg.layers ? m.cfg.is_moe_layer[l] : m.cfg.is_moe_layer[m.cfg.layers - 1];
    if (!moe) continue;
    moe_forwards++;
    m.ops->to_host(probs, m.acts[l].probs, sizeof(float) * (size_t)T * E);
    m.ops->to_host(idx, m.acts[l].topk_idx, sizeof(int32_t) * (size_t)T * K);
    double v = 0;
    for (int e = 0; e < E; e++) {
      int tokens = 0;
      for (int t = 0; t < T * K; t++) tokens += idx[t] == e;
      double pe = 0;
      for (int t = 0; t < T; t++) pe += probs[(size_t)t * E + e];
      v += (tokens / ((double)T * K)) * (pe / T);
    }
    expected += c.moe_aux_loss_coeff * E * v;
  }
  free(probs), free(idx);
  printf("aux loss: tracked %.12g, recomputed %.12g over %d MoE forwards, untracked %g\n", value[1],
         expected, moe_forwards, value[0]);
  CHECK(moe_forwards == 3, "%d MoE forwards, want 3 (layer 1 and the MTP layer twice)",
        moe_forwards);
  CHECK(fabs(value[1] - expected) <= 1e-9 * expected,
        "tracked aux loss %.12g != %.12g recomputed from the probabilities", value[1], expected);
  CHECK(value[0] == 0.0, "untracked aux loss is %g, want 0", value[0]);
  /* control: the value is not trivially small (it would equal an untracked 0) */
  CHECK(expected > 0.1 * c.moe_aux_loss_coeff, "control: recomputed aux loss %g is near 0",
        expected);
  CHECK(grads[0] == grads[1], "tracking the aux loss's value changed the gradients");
  free_batch(&m, &b);
  rc_model_free(&m);
  rc_data_close(&d);
  return failures;
}

/* ---- 8. heads one at a time: the default head's order, one logits buffer ---- */

/* The record's buffers named `what`, and their bytes. */
static int blocks_named(const rc_model *m, const char *what, size_t *bytes) {
  int n = 0;
  *bytes = 0;
  for (int i = 0; i < m->n_blocks; i++)
    if (m->blocks[i].what && !strcmp(m->blocks[i].what, what)) n++, *bytes += m->blocks[i].bytes;
  return n;
}

/* A plain head (no flag, its wgrad always accumulates) runs each depth's
 * forward and backward back to back; a TE-style head keeps Megatron's
 * forward order. With a policy that passes no flag (untracked-none) the
 * TE-style head also only accumulates, so both models must reach the same
 * bits: the interleaving changes when the head's GEMMs run, not what
 * main_grad sees. The plain head holds one [T, V] logits buffer, the
 * TE-style head D + 1, and the memory need says the same. Negative control:
 * the TE-style head under legacy (its first forward passes TRUE, and with
 * fusion that call's backward, the last, overwrites) differs. */
static int heads_order(void) {
  /* the same flags for all three but the policy (f[7]) and, last, the
   * TE-style head */
  const char *f[] = {"--precision",
                     "bf16",
                     "--mtp-depths",
                     "2",
                     "--microbatches",
                     "2",
                     "--first-microbatch-policy",
                     "untracked-none",
                     "--te-output-head"};
  rc_config cp, ct, cb;
  make_config(&cp, f, 8), make_config(&ct, f, 9);
  f[7] = "legacy";
  make_config(&cb, f, 9);
  rc_model p, t, b;
  new_model(&p, &cp), new_model(&t, &ct), new_model(&b, &cb);
  CHECK(rc_model_heads_one_at_a_time(&cp) && !rc_model_heads_one_at_a_time(&ct),
        "the plain head should run one depth at a time, the TE-style head not");
  size_t tv = (size_t)p.T * p.V * 2, pb, tb;
  int pn = blocks_named(&p, "dlogits_half", &pb), tn = blocks_named(&t, "dlogits_half", &tb);
  CHECK(pn == 1 && pb == tv, "plain head: %d logits buffers of %zu bytes, want 1 of %zu", pn, pb,
        tv);
  CHECK(tn == p.D + 1 && tb == (size_t)(p.D + 1) * tv,
        "TE-style head: %d logits buffers (%zu bytes), want %d", tn, tb, p.D + 1);
  rc_memory_need np, nt;
  rc_model_memory_need(&cp, &np), rc_model_memory_need(&ct, &nt);
  CHECK(nt.activations - np.activations == (uint64_t)p.D * tv,
        "memory need: TE-style head's activations exceed the plain head's by %llu, want %zu",
        (unsigned long long)(nt.activations - np.activations), (size_t)p.D * tv);
  int bad_differs = step_together(&p, &t, &b, &cp, 3, "the plain and the TE-style head");
  CHECK(bad_differs > 0, "control: the TE-style head under legacy changed no main_grad");
  printf("3 steps, 2 microbatches, D = %d: the head orders agree; legacy differs in %d (param, "
         "step) pairs\n",
         p.D, bad_differs);
  rc_model_free(&p), rc_model_free(&t), rc_model_free(&b);
  return failures;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  int f = !strcmp(argv[1], "gradcheck")     ? gradcheck()
          : !strcmp(argv[1], "mechanism")   ? mechanism()
          : !strcmp(argv[1], "fusion-arms") ? fusion_arms()
          : !strcmp(argv[1], "fp8-cache")   ? fp8_cache()
          : !strcmp(argv[1], "fp8-vs-bf16") ? fp8_vs_bf16()
          : !strcmp(argv[1], "aux-loss")    ? aux_loss_tracking()
          : !strcmp(argv[1], "heads-order") ? heads_order()
                                            : -1;
  if (f < 0) return 2;
  printf("%s: %s\n", argv[1], f ? "FAILED" : "passed");
  return f ? 1 : 0;
}
