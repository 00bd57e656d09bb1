/* dist_optimizer.c — data parallel with the distributed optimizer
 * (docs/design.md §4, docs/distributed.md).
 *
 * Each rank runs its microbatches into its own main_grad. Then:
 *   1. the main_grads are laid end to end in one flat buffer (parameter
 *      order, zero padding to W equal slices);
 *   2. reduce-scatter: rank r receives every rank's slice r and sums them in
 *      rank order (src/dist/comm.c), then multiplies by 1/(W * loss_scale):
 *      the gradient is the mean over ranks, unscaled once;
 *   3. the grad norm is global: per-parameter-segment sums of squares of the
 *      owned slice, summed in order on each rank, then the rank partials
 *      summed in rank order — the same double on every rank;
 *   4. AdamW updates the owned slice (its moments live only on this rank);
 *   5. all-gather: every rank receives every slice's new weights.
 * With W = 1 every step above is a copy or the identical operation in the
 * identical order, so a one-rank run through the collectives writes the
 * bytes of the plain path (tested on the CPU with "single" and on the GPU
 * with NCCL). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/numeric.h"
#include "core/model_internal.h"
#include "dist/comm.h"

static void fail(rc_model *m, int rc, const rc_err *e) {
  if (rc && !m->dist_rc) m->dist_rc = rc, m->dist_err = *e;
}

int rc_model_attach_comm(rc_model *m, rc_comm *comm, rc_err *err) {
  if (comm->world != m->cfg.world_size)
    return rc_fail(err, RC_EXIT_USAGE, "the collectives have %d ranks but --world-size is %d",
                   comm->world, m->cfg.world_size);
  if (comm->rank != m->rank)
    return rc_fail(err, RC_EXIT_SOFTWARE, "model built for rank %d attached as rank %d", m->rank,
                   comm->rank);
  int rc = rc_model_alloc_dist(m, comm->world, comm->rank, err); /* model.c: the plan's */
  if (rc) return rc;
  /* the full-size per-parameter moments are never used now */
  for (int i = 0; i < m->nparams; i++) {
    rc_model_release(m, m->params[i].exp_avg), rc_model_release(m, m->params[i].exp_avg_sq);
    m->params[i].exp_avg = m->params[i].exp_avg_sq = NULL;
  }
  m->comm = comm;
  return 0;
}

bool rc_dist_segment(const rc_model *m, int i, size_t *lo, size_t *hi) {
  const rc_dist_opt *d = &m->dist;
  size_t a = d->offset[i], b = a + m->params[i].numel;
  size_t s = a > d->begin ? a : d->begin, e = b < d->end ? b : d->end;
  if (s >= e) return false;
  *lo = s - a, *hi = e - a;
  return true;
}

float *rc_dist_shard_ptr(const rc_model *m, float *shard_buf, int i, size_t lo) {
  return shard_buf + (m->dist.offset[i] + lo - m->dist.begin);
}

void rc_dist_reduce_grads(rc_model *m) {
  if (m->dist_rc) return;
  rc_dist_opt *d = &m->dist;
  const rc_ops *o = m->ops;
  for (int i = 0; i < m->nparams; i++)
    o->copy(d->flat_grad + d->offset[i], m->params[i].main_grad,
            m->params[i].numel * sizeof(float));
  rc_err e = {0};
  int rc =
      rc_comm_reduce_scatter_sum(m->comm, o, d->flat_grad, d->grad_shard, d->scratch, d->shard, &e);
  if (rc) return fail(m, rc, &e);
  /* mean over ranks and unscale, one rounding; W = 1 is the plain path's
   * `if (loss_scale != 1) scale by 1/loss_scale` */
  double factor = 1.0 / (m->loss_scale * m->comm->world);
  if (factor != 1.0) o->scale(d->grad_shard, (float)factor, d->shard);
}

bool rc_dist_overflow(rc_model *m) {
  double bad = (double)m->ops->count_nonfinite(m->dist.grad_shard, m->dist.end - m->dist.begin);
  rc_err e = {0};
  int rc = rc_comm_sum_doubles_host(m->comm, m->ops, &bad, 1, &e);
  fail(m, rc, &e);
  return bad > 0;
}

double rc_dist_grad_sumsq(rc_model *m) {
  double *part = calloc((size_t)m->nparams + 1, sizeof(double));
  const float **x = calloc((size_t)m->nparams + 1, sizeof(*x));
  size_t *numel = calloc((size_t)m->nparams + 1, sizeof(size_t));
  if (!part || !x || !numel) abort();
  int n = 0;
  for (int i = 0; i < m->nparams; i++) {
    size_t lo, hi;
    if (!rc_dist_segment(m, i, &lo, &hi)) continue;
    x[n] = rc_dist_shard_ptr(m, m->dist.grad_shard, i, lo);
    numel[n++] = hi - lo;
  }
  m->ops->sumsq_many(part, x, numel, n);
  double mine = rc_sum_partials(m, part, n);
  free(part), free(x), free(numel);
  /* rank partials in rank order; with W = 1: 0 + mine == mine exactly */
  rc_err e = {0};
  int rc = rc_comm_sum_doubles_host(m->comm, m->ops, &mine, 1, &e);
  fail(m, rc, &e);
  return mine;
}

void rc_dist_grad_sumsq_split(rc_model *m, double *rest, double *mtp) {
  int n = m->nparams;
  double *part = calloc((size_t)n + 1, sizeof(double));
  double *in = calloc((size_t)n + 1, sizeof(double)), *out = calloc((size_t)n + 1, sizeof(double));
  const float **x = calloc((size_t)n + 1, sizeof(*x));
  size_t *numel = calloc((size_t)n + 1, sizeof(size_t));
  bool *is_mtp = calloc((size_t)n + 1, sizeof(bool));
  if (!part || !in || !out || !x || !numel || !is_mtp) abort();
  int k = 0;
  for (int i = 0; i < n; i++) {
    size_t lo, hi;
    if (!rc_dist_segment(m, i, &lo, &hi)) continue;
    x[k] = rc_dist_shard_ptr(m, m->dist.grad_shard, i, lo);
    numel[k] = hi - lo, is_mtp[k++] = rc_param_is_mtp(m, i);
  }
  m->ops->sumsq_many(part, x, numel, k);
  int a = 0, b = 0;
  for (int j = 0; j < k; j++) {
    if (is_mtp[j])
      in[a++] = part[j];
    else
      out[b++] = part[j];
  }
  /* each group's segment partials in order, then the rank partials in rank order */
  double v[2] = {rc_sum_partials(m, out, b), rc_sum_partials(m, in, a)};
  free(part), free(in), free(out), free(x), free(numel), free(is_mtp);
  rc_err e = {0};
  int rc = rc_comm_sum_doubles_host(m->comm, m->ops, v, 2, &e);
  fail(m, rc, &e);
  *rest = v[0], *mtp = v[1];
}

/* Fingerprints of the owned segments of up to two shard buffers, gathered
 * from every rank and combined in global (= parameter) order, so the value
 * is the same on every rank and, with W = 1, equal to the plain path's. */
static uint64_t global_fp(rc_model *m, uint64_t acc, float *buf_a, float *buf_b) {
  int cap = m->nparams + 1, per = buf_b ? 2 : 1;
  size_t slots = (size_t)cap * per + 1;
  uint64_t *mine = calloc(slots, sizeof(uint64_t));
  uint64_t *all = calloc(slots * (size_t)m->comm->world, sizeof(uint64_t));
  if (!mine || !all) abort();
  const void **x = calloc((size_t)cap * per, sizeof(*x));
  size_t *nbytes = calloc((size_t)cap * per, sizeof(size_t));
  if (!x || !nbytes) abort();
  uint64_t n = 0;
  for (int i = 0; i < m->nparams; i++) {
    size_t lo, hi;
    if (!rc_dist_segment(m, i, &lo, &hi)) continue;
    x[n * per] = rc_dist_shard_ptr(m, buf_a, i, lo);
    nbytes[n * per] = (hi - lo) * 4;
    if (buf_b) {
      x[n * per + 1] = rc_dist_shard_ptr(m, buf_b, i, lo);
      nbytes[n * per + 1] = (hi - lo) * 4;
    }
    n++;
  }
  /* slot 1 + k holds tensor k, in the order the single calls used */
  m->ops->fingerprint_many(mine + 1, x, nbytes, (int)(n * (uint64_t)per));
  free(x), free(nbytes);
  mine[0] = n;
  rc_err e = {0};
  int rc = rc_comm_all_gather_host(m->comm, m->ops, mine, all, slots * sizeof(uint64_t), &e);
  fail(m, rc, &e);
  for (int r = 0; !rc && r < m->comm->world; r++) {
    const uint64_t *v = all + (size_t)r * slots;
    for (uint64_t k = 0; k < v[0] * (uint64_t)per; k++) acc = rc_fingerprint_combine(acc, v[1 + k]);
  }
  free(mine), free(all);
  return acc;
}

uint64_t rc_dist_fp_grad(rc_model *m) {
  return global_fp(m, 0, m->dist.grad_shard, NULL);
}

uint64_t rc_dist_fp_optim(rc_model *m) {
  return global_fp(m, rc_mix64((uint64_t)m->optimizer_step), m->dist.exp_avg, m->dist.exp_avg_sq);
}

void rc_dist_adamw(rc_model *m, float lr, float clip, float clip_mtp, float bc1, float bc2) {
  rc_dist_opt *d = &m->dist;
  for (int i = 0; i < m->nparams; i++) {
    size_t lo, hi;
    rc_param *p = &m->params[i];
    if (!rc_dist_segment(m, i, &lo, &hi)) continue;
    m->ops->adamw(p->weight + lo, rc_dist_shard_ptr(m, d->grad_shard, i, lo),
                  rc_dist_shard_ptr(m, d->exp_avg, i, lo),
                  rc_dist_shard_ptr(m, d->exp_avg_sq, i, lo), hi - lo, lr, (float)m->hp.beta1,
                  (float)m->hp.beta2, (float)m->hp.eps, p->decay ? (float)m->hp.weight_decay : 0.0f,
                  rc_param_is_mtp(m, i) ? clip_mtp : clip, bc1, bc2);
    if (m->events.out)
      fprintf(m->events.out,
              "step=%d mb=-1 kind=adam param=%s elements=%zu:%zu fp_main_grad=%016llx "
              "fp_weight=%016llx "
              "fp_exp_avg=%016llx fp_exp_avg_sq=%016llx\n",
              m->events.step, p->name, lo, hi,
              (unsigned long long)m->ops->fingerprint(rc_dist_shard_ptr(m, d->grad_shard, i, lo),
                                                      (hi - lo) * 4),
              (unsigned long long)m->ops->fingerprint(p->weight + lo, (hi - lo) * 4),
              (unsigned long long)m->ops->fingerprint(rc_dist_shard_ptr(m, d->exp_avg, i, lo),
                                                      (hi - lo) * 4),
              (unsigned long long)m->ops->fingerprint(rc_dist_shard_ptr(m, d->exp_avg_sq, i, lo),
                                                      (hi - lo) * 4));
  }
}

void rc_dist_gather_weights(rc_model *m) {
  if (m->dist_rc) return;
  rc_dist_opt *d = &m->dist;
  const rc_ops *o = m->ops;
  for (int i = 0; i < m->nparams; i++) {
    size_t lo, hi;
    if (rc_dist_segment(m, i, &lo, &hi))
      o->copy(rc_dist_shard_ptr(m, d->weight_send, i, lo), m->params[i].weight + lo,
              (hi - lo) * sizeof(float));
  }
  rc_err e = {0};
  int rc = m->comm->all_gather(m->comm, d->weight_send, d->scratch, d->shard * sizeof(float), &e);
  if (rc) return fail(m, rc, &e);
  for (int i = 0; i < m->nparams; i++)
    o->copy(m->params[i].weight, d->scratch + d->offset[i], m->params[i].numel * sizeof(float));
}

void rc_dist_sum_host(rc_model *m, double *x, int n) {
  if (m->dist_rc) return;
  rc_err e = {0};
  fail(m, rc_comm_sum_doubles_host(m->comm, m->ops, x, n, &e), &e);
}

/* fp8 amax reduction across data-parallel ranks, as Transformer Engine's
 * amax_reduction_group does: every rank's step amaxes gathered and combined
 * by max (exact in any order, NaN sticky), so the histories stay replicated
 * and a checkpoint's one copy serves every rank. */
void rc_dist_max_host(rc_model *m, float *x, int n) {
  if (m->dist_rc || n <= 0) return;
  int W = m->comm->world;
  float *all = malloc(sizeof(float) * (size_t)n * (size_t)W);
  if (!all) {
    rc_err e = {0};
    rc_fail(&e, RC_EXIT_RESOURCES, "fp8: out of host memory gathering amaxes");
    return fail(m, RC_EXIT_RESOURCES, &e);
  }
  rc_err e = {0};
  int rc = rc_comm_all_gather_host(m->comm, m->ops, x, all, sizeof(float) * (size_t)n, &e);
  if (!rc)
    for (int r = 0; r < W; r++)
      for (int i = 0; i < n; i++) {
        float v = all[(size_t)r * n + i];
        if (!isnan(x[i]) && (isnan(v) || v > x[i])) x[i] = v;
      }
  free(all);
  fail(m, rc, &e);
}
