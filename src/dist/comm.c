/* comm.c — the transport-independent part of the collectives: launcher
 * environments, GPU selection, the single-process transport, and the
 * deterministic reductions built from data movement plus a sum in rank
 * order (see comm.h for why). */
#include "dist/comm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- launcher environment ---- */

static int env_int(const char *name, int *out, bool *present, rc_err *err) {
  const char *v = getenv(name);
  *present = v && *v;
  if (!*present) return 0;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < 0 || x > (1 << 20))
    return rc_fail(err, RC_EXIT_USAGE, "environment %s='%s' is not a rank or size", name, v);
  *out = (int)x;
  return 0;
}

int rc_dist_env_read(rc_dist_env *env, rc_err *err) {
  static const struct {
    const char *launcher, *rank, *world, *local;
  } sets[] = {
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"env", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  memset(env, 0, sizeof *env);
  env->launcher = "none";
  env->world = 1;
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
    int rank = 0, world = 0, local = 0;
    bool has_rank, has_world, has_local;
    if (env_int(sets[i].rank, &rank, &has_rank, err) ||
        env_int(sets[i].world, &world, &has_world, err) ||
        env_int(sets[i].local, &local, &has_local, err))
      return err->code;
    if (!has_rank || !has_world) continue;
    if (world < 1 || rank >= world)
      return rc_fail(err, RC_EXIT_USAGE, "environment: %s=%d is outside %s=%d", sets[i].rank, rank,
                     sets[i].world, world);
    env->external = true;
    env->launcher = sets[i].launcher;
    env->rank = rank, env->world = world;
    /* without a local rank, assume one node */
    env->local_rank = has_local ? local : rank;
    return 0;
  }
  return 0;
}

void rc_dist_select_gpu(int local_rank) {
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  char buf[32];
  if (!v || !*v) {
    snprintf(buf, sizeof buf, "%d", local_rank);
    setenv("CUDA_VISIBLE_DEVICES", buf, 1);
    return;
  }
  if (!strchr(v, ',')) return; /* one GPU bound per task already */
  char list[1024];
  snprintf(list, sizeof list, "%s", v);
  int i = 0;
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save), i++)
    if (i == local_rank) {
      setenv("CUDA_VISIBLE_DEVICES", tok, 1);
      return;
    }
}

/* ---- one process ---- */

static int single_copy(rc_comm *c, const void *send, void *recv, size_t bytes, rc_err *err) {
  (void)err;
  const rc_ops *ops = c->impl;
  if (bytes && send != recv) ops->copy(recv, send, bytes);
  return 0;
}

static int single_broadcast(rc_comm *c, void *buf, size_t bytes, int root, rc_err *err) {
  (void)c, (void)buf, (void)bytes;
  if (root != 0) return rc_fail(err, RC_EXIT_SOFTWARE, "broadcast: root %d outside world 1", root);
  return 0;
}

static int single_barrier(rc_comm *c, rc_err *err) {
  (void)c, (void)err;
  return 0;
}

static void single_destroy(rc_comm *c) {
  free(c);
}

rc_comm *rc_comm_single(const rc_ops *ops) {
  rc_comm *c = calloc(1, sizeof *c);
  if (!c) abort();
  c->name = "single";
  c->world = 1;
  c->all_to_all = single_copy;
  c->all_gather = single_copy;
  c->broadcast = single_broadcast;
  c->barrier = single_barrier;
  c->destroy = single_destroy;
  c->impl = (void *)ops;
  return c;
}

/* ---- deterministic reductions ---- */

/* out = chunk 0 + chunk 1 + ... + chunk W-1, left to right. The first add
 * is a copy so that W = 1 gives the input bits exactly. */
static void sum_in_rank_order(const rc_ops *ops, float *out, const float *chunks, int world,
                              size_t n) {
  if (out != chunks) ops->copy(out, chunks, n * sizeof(float));
  for (int r = 1; r < world; r++) ops->add(out, out, chunks + (size_t)r * n, n);
}

int rc_comm_reduce_scatter_sum(rc_comm *c, const rc_ops *ops, const float *send, float *recv,
                               float *scratch, size_t n, rc_err *err) {
  int rc = c->all_to_all(c, send, scratch, n * sizeof(float), err);
  if (rc) return rc;
  sum_in_rank_order(ops, recv, scratch, c->world, n);
  return 0;
}

int rc_comm_all_reduce_sum(rc_comm *c, const rc_ops *ops, float *buf, float *scratch, size_t n,
                           rc_err *err) {
  int rc = c->all_gather(c, buf, scratch, n * sizeof(float), err);
  if (rc) return rc;
  sum_in_rank_order(ops, buf, scratch, c->world, n);
  return 0;
}

/* ---- host helpers ---- */

int rc_comm_all_gather_host(rc_comm *c, const rc_ops *ops, const void *send, void *recv,
                            size_t bytes, rc_err *err) {
  size_t total = bytes * (size_t)c->world;
  char *dev = ops->alloc(bytes + total);
  if (!dev)
    return rc_fail(err, RC_EXIT_RESOURCES, "cannot allocate %zu bytes of %s memory to gather",
                   bytes + total, ops->name);
  ops->to_device(dev, send, bytes);
  int rc = c->all_gather(c, dev, dev + bytes, bytes, err);
  if (!rc) ops->to_host(recv, dev + bytes, total);
  ops->free(dev);
  return rc;
}

int rc_comm_broadcast_host(rc_comm *c, const rc_ops *ops, void *buf, size_t bytes, int root,
                           rc_err *err) {
  if (c->world == 1 || bytes == 0) return 0;
  char *dev = ops->alloc(bytes);
  if (!dev)
    return rc_fail(err, RC_EXIT_RESOURCES, "cannot allocate %zu bytes of %s memory to broadcast",
                   bytes, ops->name);
  ops->to_device(dev, buf, bytes);
  int rc = c->broadcast(c, dev, bytes, root, err);
  if (!rc) ops->to_host(buf, dev, bytes);
  ops->free(dev);
  return rc;
}

int rc_comm_sum_doubles_host(rc_comm *c, const rc_ops *ops, double *x, int n, rc_err *err) {
  if (n <= 0) return 0;
  double *all = malloc(sizeof(double) * (size_t)n * (size_t)c->world);
  if (!all) abort();
  int rc = rc_comm_all_gather_host(c, ops, x, all, sizeof(double) * (size_t)n, err);
  if (!rc)
    for (int i = 0; i < n; i++) {
      double s = all[i];
      for (int r = 1; r < c->world; r++) s += all[(size_t)r * n + i];
      x[i] = s;
    }
  free(all);
  return rc;
}

int rc_comm_agree(rc_comm *c, const rc_ops *ops, int my_rc, rc_err *err) {
  int32_t mine = my_rc;
  int32_t *all = malloc(sizeof(int32_t) * (size_t)c->world);
  if (!all) abort();
  rc_err tmp = {0};
  int rc = rc_comm_all_gather_host(c, ops, &mine, all, sizeof mine, &tmp);
  if (rc) {
    free(all);
    if (!my_rc) *err = tmp;
    return my_rc ? my_rc : rc;
  }
  int first = 0, who = -1;
  for (int r = 0; r < c->world && !first; r++)
    if (all[r]) first = all[r], who = r;
  free(all);
  if (my_rc) return my_rc; /* keep this rank's own message */
  if (first) return rc_fail(err, first, "rank %d failed (its message is on its stderr)", who);
  return 0;
}
