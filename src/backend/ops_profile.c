/* ops_profile.c — the per-op profiler (ops_profile.h): an rc_ops table whose
 * every member synchronises, times and then calls the wrapped backend.
 *
 * Each wrapper is `t0 = begin(); inner->op(...); end(OP_op, t0);`. begin()
 * and end() call inner->sync(), so the time charged to an op is that op's
 * work alone (on a GPU: its launch and its kernels), not work queued before
 * it. The state is file-static on purpose (see the header): the ops carry no
 * context pointer, and this is a debug tool installed only on request. */
#include "backend/ops_profile.h"

#include "backend/ops_list.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* every op (backend/ops_list.h) */
#define RC_PROFILED_OPS(X) RC_OPS_FUNCTIONS(X)

#define AS_ENUM(op) OP_##op,
#define AS_NAME(op) #op,
enum { RC_PROFILED_OPS(AS_ENUM) OP_COUNT };
static const char *op_names[OP_COUNT] = {RC_PROFILED_OPS(AS_NAME)};

/* rc_ops is `name` plus one function pointer per op. An op added to ops.h
 * without a wrapper here would be left NULL in the table below and crash
 * only when called; this catches it at compile time instead. */
_Static_assert(sizeof(rc_ops) == (1 + OP_COUNT) * sizeof(void *),
               "ops.h changed: wrap the new op in ops_profile.c");

typedef struct {
  long calls;
  double seconds;
} tally;

typedef struct {
  rc_compute ct;
  bool trans_a, trans_b, beta_zero, out16; /* out16: gemm_to_half's 16-bit output */
  int m, n, k;
  long calls;
  double seconds, flops;
} gemm_shape;

#define N_CT 3 /* RC_COMPUTE_FP32, BF16, FP16; then RC_OPS_PROFILE_E4M3's rows */
static const char *ct_names[N_CT + 1] = {"fp32", "bf16", "fp16", "e4m3"};
_Static_assert((int)RC_OPS_PROFILE_E4M3 == N_CT, "e4m3 rows follow the compute types");

static const rc_ops *inner;
static tally ops_tally[OP_COUNT];
static tally attn_fwd_ct[N_CT], attn_bwd_ct[N_CT];
static gemm_shape shapes[RC_OPS_PROFILE_GEMM_SHAPES];
static int n_shapes;
static gemm_shape other;   /* all calls of shapes beyond the table; m, n, k unused */
static gemm_shape grouped; /* gemm_half_many's calls: a grouped linear's GEMMs, one row */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the event-timed mode (rc_ops_profiled_events) ----
 * No synchronisation: each op is bracketed by two timer marks queued on the
 * backend's stream (ops.h timer_mark) and charged when they are read back —
 * at the next op that returns a value to the host (it waits for the stream
 * anyway), when the marks run out, and before a report. An op's interval is
 * then its own kernels' time while the device runs behind the host, which
 * is the case the profile is for; where the host is behind, the wait for
 * the op's launch counts too. Charges a wrapper makes after end() (GEMM
 * shape, attention compute type) wait with the op. */
typedef enum { CHARGE_OP, CHARGE_GEMM, CHARGE_CT, CHARGE_MANY } charge_kind;
typedef struct {
  int op;
  charge_kind kind;
  rc_compute ct;
  bool ta, tb, beta_zero, out16;
  int m, n, k;
  double flops; /* CHARGE_MANY */
  tally *per_ct;
} pending_op;

static bool events;
static pending_op pending[RC_TIMER_SLOTS / 2];
static int npending;

/* ops that hand a value back to the host, so the stream is drained anyway */
static bool returns_to_host(int op) {
  return op == OP_to_host || op == OP_sync || op == OP_amax || op == OP_sum || op == OP_sumsq ||
         op == OP_count_nonfinite || op == OP_fingerprint || op == OP_sumsq_many ||
         op == OP_fingerprint_many || op == OP_adamw_many;
}

static void gemm_row_add(rc_compute ct, bool ta, bool tb, int m, int n, int k, bool beta_zero,
                         bool out16, double dt);

static void many_row_add(double flops, double dt) {
  grouped.calls++;
  grouped.seconds += dt;
  grouped.flops += flops;
}

static void ct_row_add(tally *per_ct, rc_compute ct, double dt) {
  if ((int)ct < 0 || (int)ct >= N_CT) return; /* invalid; the op total still counts it */
  per_ct[ct].calls++;
  per_ct[ct].seconds += dt;
}

/* Reads every pending op's marks back and charges them, in call order. */
static void resolve(void) {
  for (int i = 0; i < npending; i++) {
    const pending_op *p = &pending[i];
    double dt = inner->timer_seconds(2 * i, 2 * i + 1);
    ops_tally[p->op].calls++;
    ops_tally[p->op].seconds += dt;
    if (p->kind == CHARGE_GEMM)
      gemm_row_add(p->ct, p->ta, p->tb, p->m, p->n, p->k, p->beta_zero, p->out16, dt);
    else if (p->kind == CHARGE_CT)
      ct_row_add(p->per_ct, p->ct, dt);
    else if (p->kind == CHARGE_MANY)
      many_row_add(p->flops, dt);
  }
  npending = 0;
}

/* Drains work queued before the op, so the op is charged for itself only
 * (events: marks the op's start instead; returns its pending index). */
static double begin(void) {
  if (events) {
    if (npending == RC_TIMER_SLOTS / 2) resolve();
    inner->timer_mark(2 * npending);
    return (double)npending;
  }
  inner->sync();
  return now_s();
}

/* Waits for the op to finish and charges it. Returns its seconds (events:
 * marks its end and returns -1, the charge to come). */
static double end(int op, double t0) {
  if (events) {
    int i = (int)t0;
    inner->timer_mark(2 * i + 1);
    pending[i] = (pending_op){.op = op, .kind = CHARGE_OP};
    npending = i + 1;
    if (returns_to_host(op)) resolve();
    return -1.0;
  }
  inner->sync();
  double dt = now_s() - t0;
  ops_tally[op].calls++;
  ops_tally[op].seconds += dt;
  return dt;
}

static void charge_ct(tally *per_ct, rc_compute ct, double dt) {
  if (dt < 0 && npending > 0) { /* events: with the op's own charge */
    pending_op *p = &pending[npending - 1];
    p->kind = CHARGE_CT, p->per_ct = per_ct, p->ct = ct;
    return;
  }
  ct_row_add(per_ct, ct, dt);
}

static void charge_gemm(rc_compute ct, bool ta, bool tb, int m, int n, int k, bool beta_zero,
                        bool out16, double dt) {
  if (dt < 0 && npending > 0) { /* events: with the op's own charge */
    pending_op *p = &pending[npending - 1];
    *p = (pending_op){.op = p->op,
                      .kind = CHARGE_GEMM,
                      .ct = ct,
                      .ta = ta,
                      .tb = tb,
                      .beta_zero = beta_zero,
                      .out16 = out16,
                      .m = m,
                      .n = n,
                      .k = k};
    return;
  }
  gemm_row_add(ct, ta, tb, m, n, k, beta_zero, out16, dt);
}

static void charge_many(double flops, double dt) {
  if (dt < 0 && npending > 0) { /* events: with the op's own charge */
    pending_op *p = &pending[npending - 1];
    p->kind = CHARGE_MANY, p->flops = flops;
    return;
  }
  many_row_add(flops, dt);
}

static void gemm_row_add(rc_compute ct, bool ta, bool tb, int m, int n, int k, bool beta_zero,
                         bool out16, double dt) {
  gemm_shape *s = NULL;
  for (int i = 0; i < n_shapes && !s; i++) {
    gemm_shape *x = &shapes[i];
    if (x->ct == ct && x->trans_a == ta && x->trans_b == tb && x->m == m && x->n == n &&
        x->k == k && x->beta_zero == beta_zero && x->out16 == out16)
      s = x;
  }
  if (!s && n_shapes < RC_OPS_PROFILE_GEMM_SHAPES) {
    s = &shapes[n_shapes++];
    *s = (gemm_shape){.ct = ct,
                      .trans_a = ta,
                      .trans_b = tb,
                      .m = m,
                      .n = n,
                      .k = k,
                      .beta_zero = beta_zero,
                      .out16 = out16};
  }
  if (!s) s = &other;
  s->calls++;
  s->seconds += dt;
  s->flops += 2.0 * m * n * k;
}

/* ---- the wrappers: one per member, same signature ---- */

static void *p_alloc(size_t bytes) {
  double t0 = begin();
  void *p = inner->alloc(bytes);
  end(OP_alloc, t0);
  return p;
}
static int p_alloc_failed(size_t *bytes, char *what, size_t cap) {
  return inner->alloc_failed(bytes, what, cap); /* a query, not timed */
}
static void p_free(void *ptr) {
  double t0 = begin();
  inner->free(ptr);
  end(OP_free, t0);
}
static void p_to_device(void *dst, const void *src_host, size_t bytes) {
  double t0 = begin();
  inner->to_device(dst, src_host, bytes);
  end(OP_to_device, t0);
}
static void p_to_host(void *dst_host, const void *src, size_t bytes) {
  double t0 = begin();
  inner->to_host(dst_host, src, bytes);
  end(OP_to_host, t0);
}
static void *p_host_alloc(size_t bytes, int page_locked) {
  double t0 = begin();
  void *p = inner->host_alloc(bytes, page_locked);
  end(OP_host_alloc, t0);
  return p;
}
static void p_host_free(void *ptr, size_t bytes) {
  double t0 = begin();
  inner->host_free(ptr, bytes);
  end(OP_host_free, t0);
}
static void p_copy(void *dst, const void *src, size_t bytes) {
  double t0 = begin();
  inner->copy(dst, src, bytes);
  end(OP_copy, t0);
}
static void p_zero(void *dst, size_t bytes) {
  double t0 = begin();
  inner->zero(dst, bytes);
  end(OP_zero, t0);
}
static void p_zero_many(void *const *dst, const size_t *bytes, int count) {
  double t0 = begin();
  inner->zero_many(dst, bytes, count);
  end(OP_zero_many, t0);
}
/* The timer ops are the profiler's own instrument: passed through, not
 * charged (and not used by the model). */
static void p_timer_mark(int slot) {
  inner->timer_mark(slot);
}
static double p_timer_seconds(int from, int to) {
  return inner->timer_seconds(from, to);
}
/* With every op already synchronised, an explicit sync finds nothing to
 * wait for; it is counted so the call count is complete. */
static void p_sync(void) {
  double t0 = begin();
  inner->sync();
  end(OP_sync, t0);
}
static void p_gemm(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C,
                   int ldc) {
  double t0 = begin();
  inner->gemm(ct, trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  double dt = end(OP_gemm, t0);
  charge_gemm(ct, trans_a, trans_b, m, n, k, beta == 0.0f, false, dt);
}
static void p_cast_half(uint16_t *dst, const float *src, size_t n, rc_compute ct) {
  double t0 = begin();
  inner->cast_half(dst, src, n, ct);
  end(OP_cast_half, t0);
}
static void p_gemm_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                        const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta,
                        float *C, int ldc) {
  double t0 = begin();
  inner->gemm_half(ct, trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  double dt = end(OP_gemm_half, t0);
  charge_gemm(ct, trans_a, trans_b, m, n, k, beta == 0.0f, false, dt);
}
static void p_gemm_half_residual(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                                 const uint16_t *A, int lda, const uint16_t *B, int ldb,
                                 const float *R, float *C, int ldc) {
  double t0 = begin();
  inner->gemm_half_residual(ct, trans_a, trans_b, m, n, k, A, lda, B, ldb, R, C, ldc);
  double dt = end(OP_gemm_half_residual, t0);
  charge_gemm(ct, trans_a, trans_b, m, n, k, false, false, dt);
}
static void p_gemm_to_half(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                           const uint16_t *A, int lda, const uint16_t *B, int ldb, uint16_t *C,
                           int ldc) {
  double t0 = begin();
  inner->gemm_to_half(ct, trans_a, trans_b, m, n, k, A, lda, B, ldb, C, ldc);
  double dt = end(OP_gemm_to_half, t0);
  charge_gemm(ct, trans_a, trans_b, m, n, k, true, true, dt);
}
/* Charged as one op and one row of the shape table (its GEMMs' shapes
 * change with every routing decision, so one row a shape would be noise). */
static void p_gemm_half_many(rc_compute ct, bool trans_a, bool trans_b,
                             const rc_gemm_half_call *calls, int count) {
  double flops = 0;
  for (int i = 0; i < count; i++)
    flops += 2.0 * calls[i].m * calls[i].n * (calls[i].k > 0 ? calls[i].k : 0);
  double t0 = begin();
  inner->gemm_half_many(ct, trans_a, trans_b, calls, count);
  charge_many(flops, end(OP_gemm_half_many, t0));
}
static void p_cast_e4m3(uint8_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols,
                        float scale, bool transpose) {
  double t0 = begin();
  inner->cast_e4m3(dst, ld_dst, src, ld_src, rows, cols, scale, transpose);
  end(OP_cast_e4m3, t0);
}
static void p_gemm_e4m3(int m, int n, int k, float alpha, const uint8_t *A, const uint8_t *B,
                        float beta, float *C, int ldc) {
  double t0 = begin();
  inner->gemm_e4m3(m, n, k, alpha, A, B, beta, C, ldc);
  double dt = end(OP_gemm_e4m3, t0);
  charge_gemm(RC_OPS_PROFILE_E4M3, false, true, m, n, k, beta == 0.0f, false, dt);
}
static void p_amax_update(float *amax, const float *x, size_t n) {
  double t0 = begin();
  inner->amax_update(amax, x, n);
  end(OP_amax_update, t0);
}
static void p_round_to(float *dst, const float *src, size_t n, rc_compute ct) {
  double t0 = begin();
  inner->round_to(dst, src, n, ct);
  end(OP_round_to, t0);
}
static float p_amax(const float *x, size_t n) {
  double t0 = begin();
  float r = inner->amax(x, n);
  end(OP_amax, t0);
  return r;
}
static void p_add(float *out, const float *a, const float *b, size_t n) {
  double t0 = begin();
  inner->add(out, a, b, n);
  end(OP_add, t0);
}
static void p_scale(float *x, float s, size_t n) {
  double t0 = begin();
  inner->scale(x, s, n);
  end(OP_scale, t0);
}
static void p_copy2d(float *dst, int ld_dst, const float *src, int ld_src, int rows, int cols) {
  double t0 = begin();
  inner->copy2d(dst, ld_dst, src, ld_src, rows, cols);
  end(OP_copy2d, t0);
}
static double p_sum(const float *x, size_t n) {
  double t0 = begin();
  double r = inner->sum(x, n);
  end(OP_sum, t0);
  return r;
}
static double p_sumsq(const float *x, size_t n) {
  double t0 = begin();
  double r = inner->sumsq(x, n);
  end(OP_sumsq, t0);
  return r;
}
static long p_count_nonfinite(const float *x, size_t n) {
  double t0 = begin();
  long r = inner->count_nonfinite(x, n);
  end(OP_count_nonfinite, t0);
  return r;
}
static uint64_t p_fingerprint(const void *x, size_t nbytes) {
  double t0 = begin();
  uint64_t r = inner->fingerprint(x, nbytes);
  end(OP_fingerprint, t0);
  return r;
}
static void p_sumsq_many(double *out, const float *const *x, const size_t *n, int count) {
  double t0 = begin();
  inner->sumsq_many(out, x, n, count);
  end(OP_sumsq_many, t0);
}
static void p_fingerprint_many(uint64_t *out, const void *const *x, const size_t *nbytes,
                               int count) {
  double t0 = begin();
  inner->fingerprint_many(out, x, nbytes, count);
  end(OP_fingerprint_many, t0);
}
static void p_embedding_forward(float *out, const int32_t *ids, const float *table, int T, int H) {
  double t0 = begin();
  inner->embedding_forward(out, ids, table, T, H);
  end(OP_embedding_forward, t0);
}
static void p_embedding_backward(float *dtable, const int32_t *ids, const float *dout, int T, int H,
                                 int V) {
  double t0 = begin();
  inner->embedding_backward(dtable, ids, dout, T, H, V);
  end(OP_embedding_backward, t0);
}
static void p_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int H,
                              float eps, uint16_t *out_half, int ld_half, rc_compute ct) {
  double t0 = begin();
  inner->rmsnorm_forward(out, rstd, x, w, T, H, eps, out_half, ld_half, ct);
  end(OP_rmsnorm_forward, t0);
}
static void p_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x,
                               const float *w, const float *rstd, int T, int H, int ld_dout,
                               uint16_t *dx_half, rc_compute ct, bool dx_accumulate) {
  double t0 = begin();
  inner->rmsnorm_backward(dx, dw, dout, x, w, rstd, T, H, ld_dout, dx_half, ct, dx_accumulate);
  end(OP_rmsnorm_backward, t0);
}
static void p_rope_forward(float *qkv, const uint16_t *qkv_half, rc_compute half_ct, int B, int S,
                           int nh, int hd, float theta, uint16_t *heads) {
  double t0 = begin();
  inner->rope_forward(qkv, qkv_half, half_ct, B, S, nh, hd, theta, heads);
  end(OP_rope_forward, t0);
}
static void p_rope_backward(float *dqkv, int B, int S, int nh, int hd, float theta,
                            uint16_t *dqkv_half, rc_compute ct) {
  double t0 = begin();
  inner->rope_backward(dqkv, B, S, nh, hd, theta, dqkv_half, ct);
  end(OP_rope_backward, t0);
}
static void p_attention_forward(rc_compute ct, float *out, float *lse, const float *qkv,
                                const uint16_t *heads, int B, int S, int nh, int hd,
                                uint16_t *out_half, rc_compute half_ct) {
  double t0 = begin();
  inner->attention_forward(ct, out, lse, qkv, heads, B, S, nh, hd, out_half, half_ct);
  charge_ct(attn_fwd_ct, ct, end(OP_attention_forward, t0));
}
static void p_attention_backward(rc_compute ct, float *dqkv, const float *dout, const float *out,
                                 const float *lse, const float *qkv, const uint16_t *heads, int B,
                                 int S, int nh, int hd, const uint16_t *out_bf16, float rope_theta,
                                 uint16_t *dqkv_half, rc_compute half_ct) {
  double t0 = begin();
  inner->attention_backward(ct, dqkv, dout, out, lse, qkv, heads, B, S, nh, hd, out_bf16,
                            rope_theta, dqkv_half, half_ct);
  charge_ct(attn_bwd_ct, ct, end(OP_attention_backward, t0));
}
static void p_swiglu_forward(float *out, const float *in, const uint16_t *in_half, int T, int F,
                             uint16_t *out_half, rc_compute ct) {
  double t0 = begin();
  inner->swiglu_forward(out, in, in_half, T, F, out_half, ct);
  end(OP_swiglu_forward, t0);
}
static void p_swiglu_backward(float *din, const float *dout, const float *in,
                              const uint16_t *in_half, int T, int F, uint16_t *din_half,
                              uint16_t *out_half, rc_compute ct) {
  double t0 = begin();
  inner->swiglu_backward(din, dout, in, in_half, T, F, din_half, out_half, ct);
  end(OP_swiglu_backward, t0);
}
static void p_cross_entropy(float *losses, float *correct, float *logits, const int32_t *labels,
                            const float *dloss, int T, int V, uint16_t *dlogits_half,
                            rc_compute ct) {
  double t0 = begin();
  inner->cross_entropy(losses, correct, logits, labels, dloss, T, V, dlogits_half, ct);
  end(OP_cross_entropy, t0);
}
static void p_dropout(float *x, size_t n, float p, uint64_t seed, uint64_t offset) {
  double t0 = begin();
  inner->dropout(x, n, p, seed, offset);
  end(OP_dropout, t0);
}
static void p_init_normal(float *dst, size_t n, uint64_t first, uint64_t key, float std) {
  double t0 = begin();
  inner->init_normal(dst, n, first, key, std);
  end(OP_init_normal, t0);
}
static void p_moe_route(int32_t *topk_idx, float *topk_w, float *probs, const float *logits,
                        const float *expert_bias, int T, int E, int k, rc_moe_scoring scoring) {
  double t0 = begin();
  inner->moe_route(topk_idx, topk_w, probs, logits, expert_bias, T, E, k, scoring);
  end(OP_moe_route, t0);
}
static void p_moe_route_backward(float *dlogits, const float *dtopk_w, const float *dprobs_e,
                                 const float *logits, const int32_t *topk_idx, const float *topk_w,
                                 const float *probs, int T, int E, int k, rc_moe_scoring scoring) {
  double t0 = begin();
  inner->moe_route_backward(dlogits, dtopk_w, dprobs_e, logits, topk_idx, topk_w, probs, T, E, k,
                            scoring);
  end(OP_moe_route_backward, t0);
}
static void p_moe_permute(int32_t *perm, int32_t *inv_perm, int32_t *offsets,
                          const int32_t *topk_idx, int T, int E, int k) {
  double t0 = begin();
  inner->moe_permute(perm, inv_perm, offsets, topk_idx, T, E, k);
  end(OP_moe_permute, t0);
}
static void p_moe_gather(float *dst, const float *src, const int32_t *perm, int T, int k, int H,
                         uint16_t *dst_half, rc_compute ct) {
  double t0 = begin();
  inner->moe_gather(dst, src, perm, T, k, H, dst_half, ct);
  end(OP_moe_gather, t0);
}
static void p_moe_combine(float *out, const float *rows, const float *w, const int32_t *inv_perm,
                          int T, int k, int H, const float *residual) {
  double t0 = begin();
  inner->moe_combine(out, rows, w, inv_perm, T, k, H, residual);
  end(OP_moe_combine, t0);
}
static void p_moe_combine_backward(float *drows, float *dw, const float *dout, const float *rows,
                                   const float *w, const int32_t *inv_perm, int T, int k, int H) {
  double t0 = begin();
  inner->moe_combine_backward(drows, dw, dout, rows, w, inv_perm, T, k, H);
  end(OP_moe_combine_backward, t0);
}
static void p_adamw(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                    float lr, float beta1, float beta2, float eps, float weight_decay,
                    float grad_scale, float bias_correction1, float bias_correction2) {
  double t0 = begin();
  inner->adamw(param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, grad_scale,
               bias_correction1, bias_correction2);
  end(OP_adamw, t0);
}

static void p_adamw_many(const rc_adamw_tensor *ts, int count, float lr, float beta1, float beta2,
                         float eps, float grad_scale, float bias_correction1,
                         float bias_correction2, uint64_t *fp) {
  double t0 = begin();
  inner->adamw_many(ts, count, lr, beta1, beta2, eps, grad_scale, bias_correction1,
                    bias_correction2, fp);
  end(OP_adamw_many, t0);
}

/* name is filled in from inner by rc_ops_profiled */
static rc_ops profiled = {
    .alloc = p_alloc,
    .alloc_failed = p_alloc_failed,
    .free = p_free,
    .to_device = p_to_device,
    .to_host = p_to_host,
    .host_alloc = p_host_alloc,
    .host_free = p_host_free,
    .copy = p_copy,
    .timer_mark = p_timer_mark,
    .timer_seconds = p_timer_seconds,
    .zero = p_zero,
    .zero_many = p_zero_many,
    .sync = p_sync,
    .gemm = p_gemm,
    .cast_half = p_cast_half,
    .gemm_half = p_gemm_half,
    .gemm_half_residual = p_gemm_half_residual,
    .gemm_to_half = p_gemm_to_half,
    .gemm_half_many = p_gemm_half_many,
    .cast_e4m3 = p_cast_e4m3,
    .gemm_e4m3 = p_gemm_e4m3,
    .amax_update = p_amax_update,
    .round_to = p_round_to,
    .amax = p_amax,
    .add = p_add,
    .scale = p_scale,
    .copy2d = p_copy2d,
    .sum = p_sum,
    .sumsq = p_sumsq,
    .count_nonfinite = p_count_nonfinite,
    .fingerprint = p_fingerprint,
    .sumsq_many = p_sumsq_many,
    .fingerprint_many = p_fingerprint_many,
    .embedding_forward = p_embedding_forward,
    .embedding_backward = p_embedding_backward,
    .rmsnorm_forward = p_rmsnorm_forward,
    .rmsnorm_backward = p_rmsnorm_backward,
    .rope_forward = p_rope_forward,
    .rope_backward = p_rope_backward,
    .attention_forward = p_attention_forward,
    .attention_backward = p_attention_backward,
    .swiglu_forward = p_swiglu_forward,
    .swiglu_backward = p_swiglu_backward,
    .cross_entropy = p_cross_entropy,
    .dropout = p_dropout,
    .init_normal = p_init_normal,
    .moe_route = p_moe_route,
    .moe_route_backward = p_moe_route_backward,
    .moe_permute = p_moe_permute,
    .moe_gather = p_moe_gather,
    .moe_combine = p_moe_combine,
    .moe_combine_backward = p_moe_combine_backward,
    .adamw = p_adamw,
    .adamw_many = p_adamw_many,
};

const rc_ops *rc_ops_profiled(const rc_ops *in) {
  if (in == &profiled) return in; /* wrapping twice would recurse forever */
  inner = in;
  /* the same name: code that branches on it (leg.c: "cpu") must not change */
  profiled.name = in->name;
  events = false;
  return &profiled;
}

const rc_ops *rc_ops_profiled_events(const rc_ops *in) {
  const rc_ops *p = rc_ops_profiled(in);
  events = true;
  return p;
}

void rc_ops_profile_reset(void) {
  npending = 0; /* marks in flight: forgotten with the rest */
  memset(ops_tally, 0, sizeof ops_tally);
  memset(attn_fwd_ct, 0, sizeof attn_fwd_ct);
  memset(attn_bwd_ct, 0, sizeof attn_bwd_ct);
  memset(shapes, 0, sizeof shapes);
  n_shapes = 0;
  memset(&other, 0, sizeof other);
  memset(&grouped, 0, sizeof grouped);
}

/* ---- the report ---- */

/* GEMM shape rows printed one by one; the lighter ones share a row. */
#define REPORT_SHAPES 40

/* Sort key for qsort: an index and its seconds, by time descending, then by
 * index so equal times print in a stable order. */
typedef struct {
  int i;
  double seconds;
} by_time;

static int cmp_by_time(const void *a, const void *b) {
  const by_time *x = a, *y = b;
  if (x->seconds != y->seconds) return x->seconds > y->seconds ? -1 : 1;
  return x->i - y->i;
}

static void shape_label(char *buf, size_t cap, const gemm_shape *s) {
  const char *ct = (int)s->ct >= 0 && (int)s->ct <= N_CT ? ct_names[s->ct] : "ct?";
  snprintf(buf, cap, "%s %c%c %dx%dx%d beta%s%s", ct, s->trans_a ? 'T' : 'N',
           s->trans_b ? 'T' : 'N', s->m, s->n, s->k, s->beta_zero ? "=0" : "!=0",
           s->out16 ? " ->16" : "");
}

static void shape_row(FILE *f, const char *label, const gemm_shape *s, double gemm_total) {
  fprintf(f, "  %-34s %8ld %11.3f %10.4f %9.3f %6.1f%%\n", label, s->calls, 1e3 * s->seconds,
          1e3 * s->seconds / s->calls, s->seconds > 0 ? s->flops / s->seconds / 1e12 : 0.0,
          gemm_total > 0 ? 100 * s->seconds / gemm_total : 0.0);
}

void rc_ops_profile_report(FILE *f) {
  if (events) resolve(); /* the marks still pending */
  double total = 0;
  long calls = 0;
  by_time order[OP_COUNT];
  for (int op = 0; op < OP_COUNT; op++) {
    total += ops_tally[op].seconds;
    calls += ops_tally[op].calls;
    order[op] = (by_time){op, ops_tally[op].seconds};
  }
  qsort(order, OP_COUNT, sizeof order[0], cmp_by_time);
  if (events)
    fprintf(f, "ops profile (event-timed: marks queued before and after each op, no "
               "synchronisation; an op's time includes any wait for its launch)\n");
  else
    fprintf(f, "ops profile (each op synchronised before and after; totals are inflated)\n");
  fprintf(f, "  %-34s %8s %11s %10s %7s\n", "op", "calls", "total ms", "ms/call", "share");
  for (int r = 0; r < OP_COUNT; r++) {
    int op = order[r].i;
    const tally *t = &ops_tally[op];
    if (!t->calls) continue;
    fprintf(f, "  %-34s %8ld %11.3f %10.4f %6.1f%%\n", op_names[op], t->calls, 1e3 * t->seconds,
            1e3 * t->seconds / t->calls, total > 0 ? 100 * t->seconds / total : 0.0);
    /* attention by compute type, indented: part of the row above, not added */
    const tally *per_ct = op == OP_attention_forward    ? attn_fwd_ct
                          : op == OP_attention_backward ? attn_bwd_ct
                                                        : NULL;
    for (int c = 0; per_ct && c < N_CT; c++) {
      if (!per_ct[c].calls) continue;
      char name[64];
      snprintf(name, sizeof name, "  %s[%s]", op_names[op], ct_names[c]);
      fprintf(f, "  %-34s %8ld %11.3f %10.4f %6.1f%%\n", name, per_ct[c].calls,
              1e3 * per_ct[c].seconds, 1e3 * per_ct[c].seconds / per_ct[c].calls,
              total > 0 ? 100 * per_ct[c].seconds / total : 0.0);
    }
  }
  fprintf(f, "  %-34s %8ld %11.3f %10s %6.1f%%\n", "total", calls, 1e3 * total, "",
          total > 0 ? 100.0 : 0.0);

  /* the shape table covers the five GEMM ops; shares are of their sum */
  tally gemms = {ops_tally[OP_gemm].calls + ops_tally[OP_gemm_half].calls +
                     ops_tally[OP_gemm_to_half].calls + ops_tally[OP_gemm_e4m3].calls +
                     ops_tally[OP_gemm_half_many].calls,
                 ops_tally[OP_gemm].seconds + ops_tally[OP_gemm_half].seconds +
                     ops_tally[OP_gemm_to_half].seconds + ops_tally[OP_gemm_e4m3].seconds +
                     ops_tally[OP_gemm_half_many].seconds};
  const tally *g = &gemms;
  if (!g->calls) return;
  by_time sorder[RC_OPS_PROFILE_GEMM_SHAPES];
  double flops = other.flops + grouped.flops;
  for (int i = 0; i < n_shapes; i++) {
    sorder[i] = (by_time){i, shapes[i].seconds};
    flops += shapes[i].flops;
  }
  qsort(sorder, n_shapes, sizeof sorder[0], cmp_by_time);
  fprintf(f, "gemm shapes (compute type, op(A) op(B) N/T, m x n x k, beta), by time:\n");
  fprintf(f, "  %-34s %8s %11s %10s %9s %7s\n", "shape", "calls", "total ms", "ms/call", "TFLOP/s",
          "share");
  char label[96];
  /* MoE gives a shape per expert row count: print the heaviest, sum the rest */
  gemm_shape rest = {0};
  for (int r = 0; r < n_shapes; r++) {
    const gemm_shape *s = &shapes[sorder[r].i];
    if (r < REPORT_SHAPES) {
      shape_label(label, sizeof label, s);
      shape_row(f, label, s, g->seconds);
    } else {
      rest.calls += s->calls;
      rest.seconds += s->seconds;
      rest.flops += s->flops;
    }
  }
  if (rest.calls) {
    snprintf(label, sizeof label, "%d lighter shapes", n_shapes - REPORT_SHAPES);
    shape_row(f, label, &rest, g->seconds);
  }
  if (other.calls) {
    snprintf(label, sizeof label, "other (beyond %d shapes)", RC_OPS_PROFILE_GEMM_SHAPES);
    shape_row(f, label, &other, g->seconds);
  }
  if (grouped.calls) shape_row(f, "grouped (gemm_half_many)", &grouped, g->seconds);
  gemm_shape all = {.calls = g->calls, .seconds = g->seconds, .flops = flops};
  shape_row(f, "total gemm", &all, g->seconds);
}

/* ---- queries for tests ---- */

long rc_ops_profile_calls(const char *op) {
  for (int i = 0; i < OP_COUNT; i++) {
    size_t len = strlen(op_names[i]);
    if (strncmp(op, op_names[i], len)) continue;
    if (!op[len]) return ops_tally[i].calls;
    if (i != OP_attention_forward && i != OP_attention_backward) continue;
    const tally *per_ct = i == OP_attention_forward ? attn_fwd_ct : attn_bwd_ct;
    for (int c = 0; c < N_CT; c++) {
      char want[16];
      snprintf(want, sizeof want, "[%s]", ct_names[c]);
      if (!strcmp(op + len, want)) return per_ct[c].calls;
    }
  }
  return -1;
}

long rc_ops_profile_gemm_calls(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                               bool beta_zero) {
  for (int i = 0; i < n_shapes; i++) {
    const gemm_shape *x = &shapes[i];
    if (x->ct == ct && x->trans_a == trans_a && x->trans_b == trans_b && x->m == m && x->n == n &&
        x->k == k && x->beta_zero == beta_zero)
      return x->calls;
  }
  return 0;
}

long rc_ops_profile_gemm_other_calls(void) {
  return other.calls;
}
