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
 * cache: NONE quantises afresh, TRUE refreshes the cache, FALSE reuses it.
 *
 * bf16/fp16 linears ("half" linears) keep every GEMM operand once in the
 * compute type's 16-bit form (ops.h cast_half / gemm_half): the weight copy,
 * the input the forward saves for the wgrad, and the output gradient that
 * dgrad and wgrad both read. The values are the ones a GEMM on the fp32
 * operands would round them to, so the results are the same bits; what goes
 * is a conversion inside every GEMM and half the bytes of each copy.
 *
 * fp8 is real FP8: all three GEMMs of a quantised linear (forward, dgrad,
 * wgrad) run on e4m3 bytes with fp32 accumulation (ops.h gemm_e4m3;
 * cuBLASLt on the GPU), each operand scaled per tensor by delayed scaling
 * from its own amax history, as Transformer Engine's E4M3 recipe does. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/linear.h"
#include "core/model_internal.h"

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
 * scales just in time). The histories therefore shape every quantised
 * value, which is why they are checkpointed. */
static float scale_from_amax(float amax) {
  if (!(amax > 0) || !isfinite(amax)) return 1.0f;
  return (float)(448.0 / (double)amax);
}

static float history_scale(const rc_model *m, const float *history) {
  float h = 0;
  for (int i = 0; i < m->cfg.fp8_amax_history; i++) h = history[i] > h ? history[i] : h;
  return h > 0 ? scale_from_amax(h) : 0.0f;
}

static void push_history(const rc_model *m, float *history, float amax) {
  int n = m->cfg.fp8_amax_history;
  memmove(history + 1, history, sizeof(float) * (size_t)(n - 1));
  history[0] = amax;
}

/* lin's amax `which` (RC_FP8_AMAX_*) in a model-wide amax array. */
static float *amax_slot(float *amaxes, const rc_linear *lin, int which) {
  return amaxes + (size_t)RC_FP8_AMAX_SLOT * (size_t)lin->fp8_slot + (size_t)which;
}

void rc_linear_begin_step(rc_model *m, rc_linear *lin) {
  if (!is_quantised(m, lin)) return;
  lin->fp8_scale = history_scale(m, lin->amax_history);
  lin->scale_input = history_scale(m, lin->amax_history_input);
  lin->scale_grad = history_scale(m, lin->amax_history_grad);
  lin->quantised_this_step = lin->input_seen = lin->grad_seen = false;
}

void rc_linear_end_step(rc_model *m, rc_linear *lin) {
  if (!is_quantised(m, lin)) return;
  const float *step = amax_slot(m->fp8_amax_host, lin, 0); /* read back by the model */
  if (lin->quantised_this_step) push_history(m, lin->amax_history, step[RC_FP8_AMAX_WEIGHT]);
  if (lin->input_seen) push_history(m, lin->amax_history_input, step[RC_FP8_AMAX_INPUT]);
  if (lin->grad_seen) push_history(m, lin->amax_history_grad, step[RC_FP8_AMAX_GRAD]);
}

/* The weight cache: W and its transpose as e4m3 bytes, per group. The
 * weight's amax is folded on the backend like the activations' (a host
 * round trip per quantisation would stall the stream at every linear). */
static void quantise(rc_model *m, rc_linear *lin, int step) {
  const rc_ops *o = m->ops;
  size_t n = lin->w->numel, wsz = (size_t)lin->out * lin->in;
  o->amax_update(amax_slot(m->fp8_amax, lin, RC_FP8_AMAX_WEIGHT), lin->w->weight, n);
  if (lin->fp8_scale == 0) lin->fp8_scale = scale_from_amax(o->amax(lin->w->weight, n));
  lin->quantised_this_step = true;
  for (int g = 0; g < lin->groups; g++) {
    const float *w = lin->w->weight + g * wsz;
    o->cast_e4m3(lin->wq8 + g * (size_t)lin->out * lin->in_pad, lin->in_pad, w, lin->in, lin->out,
                 lin->in, lin->fp8_scale, false);
    o->cast_e4m3(lin->wq8_t + g * (size_t)lin->in * lin->out_pad, lin->out_pad, w, lin->in,
                 lin->out, lin->in, lin->fp8_scale, true);
  }
  lin->cache_step = step;
}

/* Makes the weight this forward call uses: lin->wq (fp32), the half copy
 * or the e4m3 cache. */
static void prepare_weight(rc_model *m, rc_linear *lin, rc_flag p) {
  const rc_ops *o = m->ops;
  if (!is_quantised(m, lin)) {
    if (!lin->wq_half) return;
    if (m->weights_frozen && lin->wq_half_serial == m->weights_serial) return; /* cast this span */
    o->cast_half(lin->wq_half, lin->w->weight, lin->w->numel, m->ct);
    lin->wq_half_serial = m->weights_serial;
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

/* Records x's amax for the history (on the backend) and returns the step's
 * scale for it, fixing it just in time from x when the history is empty. */
static float activation_scale(rc_model *m, float *scale, float *slot_amax, const float *x,
                              size_t n) {
  m->ops->amax_update(slot_amax, x, n);
  if (*scale == 0) *scale = scale_from_amax(m->ops->amax(x, n));
  return *scale;
}

/* 1 / (s_a s_b): the factor that takes a product of scaled operands back. */
static float unscale(float s_a, float s_b) {
  return (float)(1.0 / ((double)s_a * (double)s_b));
}

static void check_fp8_rows(const rc_model *m, const rc_linear *lin, int rows) {
  size_t widest = (size_t)(lin->in_pad > lin->out_pad ? lin->in_pad : lin->out_pad);
  if ((size_t)rc_fp8_pad(rows) * widest > m->fp8_scratch_bytes) {
    fprintf(stderr, "resumecheck: internal error: %s: %d rows exceed the fp8 cast buffers\n",
            lin->name, rows);
    abort();
  }
}

/* y = x W^T on e4m3 bytes: x cast with the input scale, W from the cache. */
static void forward_fp8(rc_model *m, rc_linear *lin, const float *x, float *y, int rows,
                        const int *group_rows) {
  const rc_ops *o = m->ops;
  float sx = activation_scale(m, &lin->scale_input, amax_slot(m->fp8_amax, lin, RC_FP8_AMAX_INPUT),
                              x, (size_t)rows * lin->in);
  lin->input_seen = true;
  float alpha = unscale(sx, lin->fp8_scale);
  int r0 = 0;
  for (int g = 0; g < lin->groups; g++) {
    int r = group_rows ? group_rows[g] : rows;
    if (r > 0) {
      check_fp8_rows(m, lin, r);
      o->cast_e4m3(m->fp8_a, lin->in_pad, x + (size_t)r0 * lin->in, lin->in, r, lin->in, sx, false);
      o->gemm_e4m3(r, lin->out, lin->in_pad, alpha, m->fp8_a,
                   lin->wq8 + g * (size_t)lin->out * lin->in_pad, 0.0f, y + (size_t)r0 * lin->out,
                   lin->out);
    }
    r0 += r;
  }
}

/* dx = dy W (dy cast with the gradient scale, W^T from the cache) and
 * wgrad = dy^T x (both cast transposed, so k = the rows, padded). */
static void backward_fp8(rc_model *m, rc_linear *lin, const float *dy, const float *x, float *dx,
                         int rows, const int *group_rows, bool overwrite) {
  const rc_ops *o = m->ops;
  float sg = activation_scale(m, &lin->scale_grad, amax_slot(m->fp8_amax, lin, RC_FP8_AMAX_GRAD),
                              dy, (size_t)rows * lin->out);
  lin->grad_seen = true;
  float sx = lin->scale_input;
  size_t wsz = (size_t)lin->out * lin->in;
  int r0 = 0;
  for (int g = 0; g < lin->groups; g++) {
    int r = group_rows ? group_rows[g] : rows, rp = rc_fp8_pad(r);
    const float *dy_g = dy + (size_t)r0 * lin->out, *x_g = x + (size_t)r0 * lin->in;
    check_fp8_rows(m, lin, r);
    if (dx && r > 0) {
      o->cast_e4m3(m->fp8_a, lin->out_pad, dy_g, lin->out, r, lin->out, sg, false);
      o->gemm_e4m3(r, lin->in, lin->out_pad, unscale(sg, lin->fp8_scale), m->fp8_a,
                   lin->wq8_t + g * (size_t)lin->in * lin->out_pad, 0.0f, dx + (size_t)r0 * lin->in,
                   lin->in);
    }
    if (r > 0) {
      o->cast_e4m3(m->fp8_a, rp, dy_g, lin->out, r, lin->out, sg, true);
      o->cast_e4m3(m->fp8_b, rp, x_g, lin->in, r, lin->in, sx, true);
    }
    float *main_grad = lin->w->main_grad + g * wsz, alpha = unscale(sg, sx);
    if (m->cfg.grad_accum_fusion) {
      o->gemm_e4m3(lin->out, lin->in, rp, alpha, m->fp8_a, m->fp8_b, overwrite ? 0.0f : 1.0f,
                   main_grad, lin->in);
    } else {
      o->gemm_e4m3(lin->out, lin->in, rp, alpha, m->fp8_a, m->fp8_b, 0.0f, lin->wgrad_scratch,
                   lin->in);
      o->add(main_grad, main_grad, lin->wgrad_scratch, wsz);
    }
    r0 += r;
  }
}

/* Half linears run in the model's compute type, the others in fp32 (fp8
 * linears run gemm_e4m3 instead). */
static rc_compute gemm_compute(const rc_model *m, const rc_linear *lin) {
  return lin->wq_half ? m->ct : RC_COMPUTE_FP32;
}

bool rc_linear_is_half(const rc_model *m, const rc_linear *lin) {
  return lin->wq_half != NULL && !is_quantised(m, lin);
}

bool rc_model_params_from_optimizer(void) {
  const char *v = getenv("RC_MODEL_PARAMS_FROM_OPTIMIZER");
  return !(v && strcmp(v, "0") == 0);
}

uint16_t *rc_linear_optimizer_copy(const rc_model *m, const rc_linear *lin) {
  return rc_linear_is_half(m, lin) ? lin->wq_half : NULL;
}

/* The next span's serial (train_step.c takes it when the span starts), so
 * prepare_weight finds the copy current there as if its first call had cast
 * it. Nothing writes a weight between the optimizer and that span; a load
 * marks every copy stale (rc_linear_copy_stale) all the same. */
void rc_linear_copy_written(rc_model *m, rc_linear *lin) {
  lin->wq_half_serial = m->weights_serial + 1;
}

void rc_linear_copy_stale(rc_linear *lin) {
  lin->wq_half_serial = 0; /* spans count from 1 */
}

/* fp8 linears cast their fp32 inputs to e4m3 themselves. A bf16 rounding
 * first (what Transformer Engine's bf16 activations would give) is one more
 * pass over every input, and differs only where it lands a value exactly on
 * an e4m3 midpoint (a tie, then to even, instead of the nearer side). */
bool rc_linear_rounds_inputs(const rc_model *m, const rc_linear *lin) {
  return is_quantised(m, lin) || gemm_compute(m, lin) == m->ct;
}

const float *rc_linear_round_input(rc_model *m, const rc_linear *lin, float *dst, const float *src,
                                   size_t n) {
  if (rc_linear_rounds_inputs(m, lin)) return src;
  m->ops->round_to(dst, src, n, m->ct);
  return dst;
}

static void log_event(rc_model *m, const char *dir, const rc_linear *lin, int call, rc_flag p,
                      int beta, const void *out, size_t out_bytes) {
  rc_event_log *ev = &m->events;
  const rc_ops *o = m->ops;
  fprintf(ev->out, "step=%d mb=%d kind=%s module=%s call=%d passed=%s beta=%d fp_out=%016llx",
          ev->step, ev->microbatch, dir, lin->name, call, rc_flag_name(p), beta,
          (unsigned long long)o->fingerprint(out, out_bytes));
  if (beta >= 0)
    fprintf(ev->out, " fp_main_grad=%016llx",
            (unsigned long long)o->fingerprint(lin->w->main_grad, lin->w->numel * sizeof(float)));
  fputc('\n', ev->out);
}

/* A grouped half linear's GEMMs (the experts of an MoE layer), handed to
 * gemm_half_many together, so that the backend sees their row counts at once
 * (the GPU picks their algorithms by the rows per group); at most
 * GROUP_BATCH per call. Each GEMM writes its own group's rows or weights, so
 * none reads or writes what another writes (ops.h). */
#define GROUP_BATCH 64
typedef struct {
  bool trans_a, trans_b;
  int n;
  rc_gemm_half_call calls[GROUP_BATCH];
} group_batch;

static void batch_flush(rc_model *m, group_batch *b) {
  if (b->n) m->ops->gemm_half_many(m->ct, b->trans_a, b->trans_b, b->calls, b->n);
  b->n = 0;
}

static void batch_add(rc_model *m, group_batch *b, rc_gemm_half_call call) {
  if (b->n == GROUP_BATCH) batch_flush(m, b);
  b->calls[b->n++] = call;
}

/* y = x W^T: in fp32, or (half) on x cast once into x_half, which the
 * call's backward reads again; y_half (a half linear): the output in the
 * compute type's 16-bit form instead of y. R (a half linear with one group,
 * or NULL): y = R + x W^T in the GEMM's epilogue (ops.h gemm_half_residual). */
static void forward_gemm(rc_model *m, rc_linear *lin, const float *x, uint16_t *x_half, float *y,
                         uint16_t *y_half, const float *R, int rows, const int *group_rows) {
  const rc_ops *o = m->ops;
  size_t wsz = (size_t)lin->out * lin->in;
  bool half = lin->wq_half != NULL;
  if (half && x) o->cast_half(x_half, x, (size_t)rows * lin->in, m->ct); /* else its producer did */
  group_batch batch = {.trans_a = false, .trans_b = true, .n = 0};
  int r0 = 0;
  for (int g = 0; g < lin->groups; g++) {
    int r = group_rows ? group_rows[g] : rows;
    if (R)
      o->gemm_half_residual(m->ct, false, true, rows, lin->out, lin->in, x_half, lin->in,
                            lin->wq_half, lin->in, R, y, lin->out);
    else if (r > 0 && half && lin->groups > 1)
      batch_add(m, &batch,
                (rc_gemm_half_call){.m = r,
                                    .n = lin->out,
                                    .k = lin->in,
                                    .A = x_half + (size_t)r0 * lin->in,
                                    .lda = lin->in,
                                    .B = lin->wq_half + g * wsz,
                                    .ldb = lin->in,
                                    .ldc = lin->out,
                                    .beta = 0.0f,
                                    .C = y_half ? NULL : y + (size_t)r0 * lin->out,
                                    .C_half = y_half ? y_half + (size_t)r0 * lin->out : NULL});
    else if (r > 0 && y_half)
      o->gemm_to_half(m->ct, false, true, r, lin->out, lin->in, x_half + (size_t)r0 * lin->in,
                      lin->in, lin->wq_half + g * wsz, lin->in, y_half + (size_t)r0 * lin->out,
                      lin->out);
    else if (r > 0 && half)
      o->gemm_half(m->ct, false, true, r, lin->out, lin->in, 1.0f, x_half + (size_t)r0 * lin->in,
                   lin->in, lin->wq_half + g * wsz, lin->in, 0.0f, y + (size_t)r0 * lin->out,
                   lin->out);
    else if (r > 0)
      o->gemm(RC_COMPUTE_FP32, false, true, r, lin->out, lin->in, 1.0f, x + (size_t)r0 * lin->in,
              lin->in, lin->wq + g * wsz, lin->in, 0.0f, y + (size_t)r0 * lin->out, lin->out);
    r0 += r;
  }
  batch_flush(m, &batch);
}

/* R (may be NULL): y = R + x W^T, as the forward into y and then add(y, R,
 * y) gives it; fused into the GEMM where that is one (rc_linear_is_half, one
 * group, no event log: the log records the linear's own output). */
static int linear_forward(rc_model *m, rc_linear *lin, const float *x, uint16_t *x_half, float *y,
                          uint16_t *y_half, const float *R, int rows, const int *group_rows) {
  rc_flag p = lin->te_style ? rc_linear_policy_value(m, lin) : RC_FLAG_NONE;
  int call = lin->ncalls++;
  if (call >= RC_MAX_CALLS) {
    fprintf(stderr, "resumecheck: internal error: %s called more than %d times\n", lin->name,
            RC_MAX_CALLS);
    abort();
  }
  if (rc_linear_is_half(m, lin) ? !x_half : !x) {
    fprintf(stderr, "resumecheck: internal error: %s: a forward without its input\n", lin->name);
    abort();
  }
  lin->passed[call] = p;
  lin->saved_half[call] = x_half;
  prepare_weight(m, lin, p);
  if (lin->te_style) lin->flag = RC_FLAG_FALSE;
  bool fused = R && rc_linear_is_half(m, lin) && lin->groups == 1 && !m->events.out;
  if (is_quantised(m, lin))
    forward_fp8(m, lin, x, y, rows, group_rows);
  else
    forward_gemm(m, lin, x, x_half, y, y_half, fused ? R : NULL, rows, group_rows);
  size_t out_n = (size_t)rows * lin->out;
  if (m->events.out)
    log_event(m, "forward", lin, call, p, -1, y_half ? (const void *)y_half : (const void *)y,
              out_n * (y_half ? sizeof(uint16_t) : sizeof(float)));
  if (R && !fused) m->ops->add(y, R, y, out_n);
  return call;
}

int rc_linear_forward(rc_model *m, rc_linear *lin, const float *x, uint16_t *x_half, float *y,
                      int rows, const int *group_rows) {
  return linear_forward(m, lin, x, x_half, y, NULL, NULL, rows, group_rows);
}

int rc_linear_forward_residual(rc_model *m, rc_linear *lin, const float *x, uint16_t *x_half,
                               const float *R, float *y, int rows) {
  return linear_forward(m, lin, x, x_half, y, NULL, R, rows, NULL);
}

int rc_linear_forward_to_half(rc_model *m, rc_linear *lin, const float *x, uint16_t *x_half,
                              uint16_t *y_half, int rows, const int *group_rows) {
  if (!rc_linear_is_half(m, lin)) {
    fprintf(stderr, "resumecheck: internal error: %s: a 16-bit output needs a half linear\n",
            lin->name);
    abort();
  }
  return linear_forward(m, lin, x, x_half, NULL, y_half, NULL, rows, group_rows);
}

/* One GEMM of dgrad_gemm or wgrad_gemm, on half or fp32 operands: C = alpha op(A) op(B)
 * + beta C, the operands at element offsets a0 and b0. */
typedef struct {
  const float *f32;
  const uint16_t *half;
} operand;

static void gemm_either(rc_model *m, bool half, bool ta, bool tb, int M, int N, int K, operand A,
                        size_t a0, int lda, operand B, size_t b0, int ldb, float beta, float *C,
                        int ldc) {
  if (half)
    m->ops->gemm_half(m->ct, ta, tb, M, N, K, 1.0f, A.half + a0, lda, B.half + b0, ldb, beta, C,
                      ldc);
  else
    m->ops->gemm(RC_COMPUTE_FP32, ta, tb, M, N, K, 1.0f, A.f32 + a0, lda, B.f32 + b0, ldb, beta, C,
                 ldc);
}

/* dx = dy W, on the half operands (dy, the weight copy) or in fp32. */
static void dgrad_gemm(rc_model *m, rc_linear *lin, operand dy, float *dx, int rows,
                       const int *group_rows) {
  bool half = lin->wq_half != NULL;
  operand w = {lin->wq, lin->wq_half};
  size_t wsz = (size_t)lin->out * lin->in;
  group_batch batch = {.trans_a = false, .trans_b = false, .n = 0};
  int r0 = 0;
  for (int g = 0; g < lin->groups; g++) {
    int r = group_rows ? group_rows[g] : rows;
    if (dx && r > 0 && half && lin->groups > 1)
      batch_add(m, &batch,
                (rc_gemm_half_call){.m = r,
                                    .n = lin->in,
                                    .k = lin->out,
                                    .A = dy.half + (size_t)r0 * lin->out,
                                    .lda = lin->out,
                                    .B = w.half + g * wsz,
                                    .ldb = lin->in,
                                    .ldc = lin->in,
                                    .beta = 0.0f,
                                    .C = dx + (size_t)r0 * lin->in});
    else if (dx && r > 0)
      gemm_either(m, half, false, false, r, lin->in, lin->out, dy, (size_t)r0 * lin->out, lin->out,
                  w, g * wsz, lin->in, 0.0f, dx + (size_t)r0 * lin->in, lin->in);
    r0 += r;
  }
  batch_flush(m, &batch);
}

/* main_grad (+)= dy^T x, on the half operands (dy, the saved input) or in
 * fp32. Independent of dgrad_gemm's GEMMs: either order gives the same bits. */
static void wgrad_gemm(rc_model *m, rc_linear *lin, operand dy, operand x, int rows,
                       const int *group_rows, bool overwrite) {
  const rc_ops *o = m->ops;
  bool half = lin->wq_half != NULL;
  size_t wsz = (size_t)lin->out * lin->in;
  group_batch batch = {.trans_a = true, .trans_b = false, .n = 0};
  int r0 = 0;
  for (int g = 0; g < lin->groups; g++) {
    int r = group_rows ? group_rows[g] : rows;
    size_t dy0 = (size_t)r0 * lin->out, x0 = (size_t)r0 * lin->in;
    float *main_grad = lin->w->main_grad + g * wsz;
    bool fused = !lin->te_style || m->cfg.grad_accum_fusion;
    if (fused && half && lin->groups > 1) { /* the same GEMM, beside the other groups' */
      batch_add(m, &batch,
                (rc_gemm_half_call){.m = lin->out,
                                    .n = lin->in,
                                    .k = r,
                                    .A = dy.half + dy0,
                                    .lda = lin->out,
                                    .B = x.half + x0,
                                    .ldb = lin->in,
                                    .ldc = lin->in,
                                    .beta = overwrite ? 0.0f : 1.0f,
                                    .C = main_grad});
    } else if (fused) {
      /* fused: one GEMM into the fp32 main_grad, beta picked by the flag */
      gemm_either(m, half, true, false, lin->out, lin->in, r, dy, dy0, lin->out, x, x0, lin->in,
                  overwrite ? 0.0f : 1.0f, main_grad, lin->in);
    } else {
      /* unfused: wgrad into scratch, then always accumulate */
      gemm_either(m, half, true, false, lin->out, lin->in, r, dy, dy0, lin->out, x, x0, lin->in,
                  0.0f, lin->wgrad_scratch, lin->in);
      o->add(main_grad, main_grad, lin->wgrad_scratch, wsz);
    }
    r0 += r;
  }
  batch_flush(m, &batch);
}

static bool overwrites(const rc_model *m, const rc_linear *lin, int call) {
  return lin->te_style && m->cfg.grad_accum_fusion && lin->passed[call] == RC_FLAG_TRUE;
}

/* dy cast once into buf (cap elements) for a half linear given no dy_half:
 * what dgrad and wgrad both read */
static const uint16_t *cast_dy(rc_model *m, const rc_linear *lin, const float *dy,
                               const uint16_t *dy_half, uint16_t *buf, size_t cap, int rows) {
  if (dy_half) return dy_half;
  size_t n = (size_t)rows * lin->out;
  if (!buf || n > cap) {
    fprintf(stderr, "resumecheck: internal error: %s: %zu gradient elements exceed dy_half\n",
            lin->name, n);
    abort();
  }
  m->ops->cast_half(buf, dy, n, m->ct);
  return buf;
}

/* A backward call's event: its output (dx, or main_grad without one). */
static void log_backward(rc_model *m, const rc_linear *lin, int call, const float *dx, int rows) {
  log_event(m, "backward", lin, call, lin->passed[call], overwrites(m, lin, call) ? 0 : 1,
            dx ? dx : lin->w->main_grad,
            (dx ? (size_t)rows * lin->in : lin->w->numel) * sizeof(float));
}

/* The wgrad of a half or fp32 linear and what follows it: the tail both
 * rc_linear_backward and rc_linear_backward_wgrad end with. */
static void finish_wgrad(rc_model *m, rc_linear *lin, int call, const float *dy,
                         const uint16_t *dy_half, const float *x, const float *dx, int rows,
                         const int *group_rows) {
  const uint16_t *x_half = rc_linear_is_half(m, lin) ? lin->saved_half[call] : NULL;
  if (m->wgrad_hook) m->wgrad_hook(m->wgrad_hook_ctx, lin, call, dy, x, dy_half, x_half, rows);
  wgrad_gemm(m, lin, (operand){dy, dy_half}, (operand){x, x_half}, rows, group_rows,
             overwrites(m, lin, call));
  if (m->events.out) log_backward(m, lin, call, dx, rows);
}

void rc_linear_backward(rc_model *m, rc_linear *lin, int call, const float *dy,
                        const uint16_t *dy_half, const float *x, float *dx, int rows,
                        const int *group_rows) {
  if (is_quantised(m, lin)) {
    if (m->wgrad_hook) m->wgrad_hook(m->wgrad_hook_ctx, lin, call, dy, x, NULL, NULL, rows);
    backward_fp8(m, lin, dy, x, dx, rows, group_rows, overwrites(m, lin, call));
    if (m->events.out) log_backward(m, lin, call, dx, rows);
    return;
  }
  if (rc_linear_is_half(m, lin))
    dy_half = cast_dy(m, lin, dy, dy_half, m->dy_half, m->dy_half_elems, rows);
  dgrad_gemm(m, lin, (operand){dy, dy_half}, dx, rows, group_rows);
  finish_wgrad(m, lin, call, dy, dy_half, x, dx, rows, group_rows);
}

void rc_linear_backward_dgrad(rc_model *m, rc_linear *lin, int call, const float *dy,
                              const uint16_t *dy_half, uint16_t *dy_half_buf, size_t dy_half_cap,
                              const float *x, float *dx, int rows, const int *group_rows) {
  if (!rc_linear_is_half(m, lin)) {
    rc_linear_backward(m, lin, call, dy, NULL, x, dx, rows, group_rows);
    return;
  }
  dy_half = cast_dy(m, lin, dy, dy_half, dy_half_buf, dy_half_cap, rows);
  dgrad_gemm(m, lin, (operand){dy, dy_half}, dx, rows, group_rows);
  lin->pending_call = call, lin->pending_rows = rows, lin->pending_group_rows = group_rows;
  lin->pending_dy = dy, lin->pending_x = x, lin->pending_dx = dx, lin->pending_dy_half = dy_half;
}

void rc_linear_backward_wgrad(rc_model *m, rc_linear *lin) {
  if (lin->pending_call < 0) return; /* not half: done by the first half */
  int call = lin->pending_call;
  lin->pending_call = -1;
  finish_wgrad(m, lin, call, lin->pending_dy, lin->pending_dy_half, lin->pending_x, lin->pending_dx,
               lin->pending_rows, lin->pending_group_rows);
}

void rc_linear_backward_input(rc_model *m, rc_linear *lin, int call, const float *dy,
                              const uint16_t *dy_half, float *dx, int rows) {
  if (is_quantised(m, lin) || lin->groups != 1) {
    fprintf(stderr, "resumecheck: internal error: %s: no input-only backward for a %s linear\n",
            lin->name, lin->groups != 1 ? "grouped" : "quantised");
    abort();
  }
  if (rc_linear_is_half(m, lin))
    dy_half = cast_dy(m, lin, dy, dy_half, m->dy_half, m->dy_half_elems, rows);
  dgrad_gemm(m, lin, (operand){dy, dy_half}, dx, rows, NULL);
  /* beta -1: no weight gradient was taken (the event has no fp_main_grad) */
  if (m->events.out)
    log_event(m, "backward", lin, call, lin->passed[call], -1, dx,
              (size_t)rows * lin->in * sizeof(float));
}
