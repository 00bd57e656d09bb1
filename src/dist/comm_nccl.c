/* comm_nccl.c — the CUDA backend's collectives: NCCL, joined through a
 * rendezvous file on a shared file system.
 *
 * Rank 0 creates the NCCL unique id and publishes it as hex in the
 * rendezvous file (temporary name, fsync, rename: readers never see half a
 * file); the other ranks poll for it. Once ncclCommInitRank returns on rank
 * 0 every rank has joined, so rank 0 removes the file: a stale id is never
 * left for the next job. Use a fresh path per job (the local launcher does;
 * with Slurm, put $SLURM_JOB_ID in it).
 *
 * NCCL_ALGO=Ring and NCCL_PROTO=Simple are pinned unless the user set them,
 * NCCL_NVLS_ENABLE=0 always; what was used is recorded in `settings`. Only
 * data movement is used (see comm.h), so the pins are belt and braces. */
#include "dist/comm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef RC_HAVE_NCCL
#include "base/fsutil.h"
#include "dist/nccl_shim.h"

#define RENDEZVOUS_TIMEOUT_S 600

typedef struct {
  void *h;
} nccl_impl;

static int shim_fail(const char *msg, rc_err *err) {
  return rc_fail(err, RC_EXIT_IOERR, "%s", msg);
}

static int n_all_to_all(rc_comm *c, const void *send, void *recv, size_t chunk, rc_err *err) {
  char msg[256];
  if (rc_nccl_all_to_all(((nccl_impl *)c->impl)->h, send, recv, chunk, msg, sizeof msg))
    return shim_fail(msg, err);
  return 0;
}

static int n_all_gather(rc_comm *c, const void *send, void *recv, size_t chunk, rc_err *err) {
  char msg[256];
  if (rc_nccl_all_gather(((nccl_impl *)c->impl)->h, send, recv, chunk, msg, sizeof msg))
    return shim_fail(msg, err);
  return 0;
}

static int n_broadcast(rc_comm *c, void *buf, size_t bytes, int root, rc_err *err) {
  char msg[256];
  if (rc_nccl_broadcast(((nccl_impl *)c->impl)->h, buf, bytes, root, msg, sizeof msg))
    return shim_fail(msg, err);
  return 0;
}

static int n_barrier(rc_comm *c, rc_err *err) {
  char msg[256];
  if (rc_nccl_barrier(((nccl_impl *)c->impl)->h, msg, sizeof msg)) return shim_fail(msg, err);
  return 0;
}

static void n_destroy(rc_comm *c) {
  nccl_impl *impl = c->impl;
  rc_nccl_destroy(impl->h);
  free(impl);
  free(c);
}

static void pin_env(rc_comm *c) {
  setenv("NCCL_ALGO", "Ring", 0);
  setenv("NCCL_PROTO", "Simple", 0);
  setenv("NCCL_NVLS_ENABLE", "0", 1); /* NVLink SHARP reduces in the switch: never */
  snprintf(c->settings, sizeof c->settings, "NCCL %d NCCL_ALGO=%s NCCL_PROTO=%s NCCL_NVLS_ENABLE=0",
           rc_nccl_version(), getenv("NCCL_ALGO"), getenv("NCCL_PROTO"));
}

static int publish(const char *path, const unsigned char *id, rc_err *err) {
  char hex[2 * RC_NCCL_ID_BYTES + 2];
  for (int i = 0; i < RC_NCCL_ID_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", id[i]);
  hex[2 * RC_NCCL_ID_BYTES] = '\n';
  return rc_write_file_atomic(path, hex, 2 * RC_NCCL_ID_BYTES + 1, err);
}

static int wait_for(const char *path, unsigned char *id, rc_err *err) {
  for (int waited_ms = 0;; waited_ms += 50) {
    FILE *f = fopen(path, "r");
    if (f) {
      char hex[2 * RC_NCCL_ID_BYTES + 2] = {0};
      size_t n = fread(hex, 1, 2 * RC_NCCL_ID_BYTES, f);
      fclose(f);
      if (n != 2 * RC_NCCL_ID_BYTES)
        return rc_fail(err, RC_EXIT_DATAERR, "--rendezvous %s: not an NCCL id (%zu bytes)", path,
                       n);
      for (int i = 0; i < RC_NCCL_ID_BYTES; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
          return rc_fail(err, RC_EXIT_DATAERR, "--rendezvous %s: not an NCCL id", path);
        id[i] = (unsigned char)v;
      }
      return 0;
    }
    if (errno != ENOENT)
      return rc_fail(err, RC_EXIT_IOERR, "--rendezvous %s: %s", path, strerror(errno));
    if (waited_ms >= RENDEZVOUS_TIMEOUT_S * 1000)
      return rc_fail(err, RC_EXIT_IOERR,
                     "--rendezvous %s: rank 0 did not publish the NCCL id within %d s", path,
                     RENDEZVOUS_TIMEOUT_S);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

bool rc_comm_nccl_available(void) {
  return true;
}

int rc_comm_nccl_create(rc_comm **out, int rank, int world, int local_rank,
                        const char *rendezvous_file, rc_err *err) {
  *out = NULL;
  if (!rendezvous_file || !*rendezvous_file)
    return rc_fail(err, RC_EXIT_USAGE,
                   "NCCL needs --rendezvous FILE on a file system every rank sees");
  rc_comm *c = calloc(1, sizeof *c);
  nccl_impl *impl = calloc(1, sizeof *impl);
  if (!c || !impl) abort();
  pin_env(c);
  unsigned char id[RC_NCCL_ID_BYTES];
  char msg[256];
  int rc = 0;
  if (rank == 0) {
    if (rc_nccl_unique_id(id, msg, sizeof msg))
      rc = shim_fail(msg, err);
    else
      rc = publish(rendezvous_file, id, err);
  } else {
    rc = wait_for(rendezvous_file, id, err);
  }
  if (!rc) {
    impl->h = rc_nccl_init(rank, world, id, msg, sizeof msg);
    if (!impl->h) rc = shim_fail(msg, err);
  }
  if (rank == 0) unlink(rendezvous_file); /* everyone joined (or it failed): the id is spent */
  if (rc) {
    free(impl), free(c);
    return rc;
  }
  c->name = "nccl";
  c->rank = rank, c->world = world, c->local_rank = local_rank;
  c->all_to_all = n_all_to_all;
  c->all_gather = n_all_gather;
  c->broadcast = n_broadcast;
  c->barrier = n_barrier;
  c->destroy = n_destroy;
  c->impl = impl;
  *out = c;
  return 0;
}

#else

bool rc_comm_nccl_available(void) {
  return false;
}

int rc_comm_nccl_create(rc_comm **out, int rank, int world, int local_rank,
                        const char *rendezvous_file, rc_err *err) {
  (void)rank, (void)local_rank, (void)rendezvous_file;
  *out = NULL;
  return rc_fail(err, RC_EXIT_UNTESTABLE,
                 "--world-size %d on the CUDA backend needs NCCL, and this build has none", world);
}

#endif
