/* comm.h — the collectives interface of data parallel training (docs/design.md §4,
 * docs/distributed.md).
 *
 * An rc_comm moves bytes between the W ranks of one job; it never does
 * arithmetic. Every reduction (rc_comm_reduce_scatter_sum,
 * rc_comm_all_reduce_sum) is built here from an all-to-all or an all-gather
 * followed by a sum in rank order with the backend's elementwise `add`, so
 * the result is a fixed function of the inputs: the same on every rank, run
 * to run, on MPI and on NCCL, whatever algorithm the transport picks. That is
 * why MPI_Allreduce / ncclAllReduce (implementation-defined order) are not
 * used.
 *
 * Buffers live in the backend's memory: host memory for the CPU backend
 * (MPI), device memory for the CUDA backend (NCCL). The *_host helpers stage
 * small host values (return codes, partial sums, fingerprints) through
 * backend memory so callers need not care which it is.
 *
 * Implementations: "single" (one process, copies), "mpi" (comm_mpi.c) and
 * "nccl" (comm_nccl.c over kernels/cuda_nccl.cu). */
#ifndef RC_DIST_COMM_H
#define RC_DIST_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/ops.h"
#include "base/error.h"

typedef struct rc_comm rc_comm;
struct rc_comm {
  const char *name; /* "single", "mpi", "nccl" */
  int rank, world, local_rank;
  char settings[256]; /* transport settings that were pinned, recorded in args.json */
  /* recv holds world chunks of chunk_bytes: chunk r is what rank r sent as
   * its chunk `rank` (send holds world chunks too). */
  int (*all_to_all)(rc_comm *c, const void *send, void *recv, size_t chunk_bytes, rc_err *err);
  /* recv holds world chunks: chunk r is rank r's send. */
  int (*all_gather)(rc_comm *c, const void *send, void *recv, size_t chunk_bytes, rc_err *err);
  int (*broadcast)(rc_comm *c, void *buf, size_t bytes, int root, rc_err *err);
  int (*barrier)(rc_comm *c, rc_err *err);
  void (*destroy)(rc_comm *c); /* frees c */
  void *impl;
};

/* Where this process sits in a job, from the launcher's environment. */
typedef struct {
  bool external;        /* a launcher set the variables below */
  const char *launcher; /* "slurm", "openmpi", "env" (RANK/WORLD_SIZE), "none" */
  int rank, world, local_rank;
} rc_dist_env;

/* Reads SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, then
 * OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, then RANK/WORLD_SIZE/LOCAL_RANK
 * (torchrun style), first complete set wins. Malformed values are an error. */
int rc_dist_env_read(rc_dist_env *env, rc_err *err);

/* Makes GPU local_rank this process's device before CUDA starts: sets
 * CUDA_VISIBLE_DEVICES to it, or to the local_rank-th entry of a list the
 * launcher already set. A single-entry list (a launcher that binds one GPU
 * per task) is left alone. */
void rc_dist_select_gpu(int local_rank);

/* One process, world 1: the transport is a copy. */
rc_comm *rc_comm_single(const rc_ops *ops);
/* MPI (CPU backend). Calls MPI_Init; the world must be `world`. */
int rc_comm_mpi_create(rc_comm **out, int world, rc_err *err);
/* NCCL (CUDA backend): rank 0 publishes the unique id in `rendezvous_file`
 * (written to a temporary name and renamed), the others wait for it; rank 0
 * removes it once every rank has joined. Pins NCCL_ALGO=Ring and
 * NCCL_PROTO=Simple unless set, and NCCL_NVLS_ENABLE=0 always. */
int rc_comm_nccl_create(rc_comm **out, int rank, int world, int local_rank,
                        const char *rendezvous_file, rc_err *err);
bool rc_comm_mpi_available(void);
bool rc_comm_nccl_available(void);

/* recv[n] = sum over ranks r (in order 0, 1, ..., W-1) of rank r's chunk
 * `rank` of send[W*n]; scratch holds W*n floats. */
int rc_comm_reduce_scatter_sum(rc_comm *c, const rc_ops *ops, const float *send, float *recv,
                               float *scratch, size_t n, rc_err *err);
/* buf[n] = sum over ranks in rank order; scratch holds W*n floats. The same
 * bits on every rank. */
int rc_comm_all_reduce_sum(rc_comm *c, const rc_ops *ops, float *buf, float *scratch, size_t n,
                           rc_err *err);

/* Host-memory variants for small control data. recv holds W * bytes. */
int rc_comm_all_gather_host(rc_comm *c, const rc_ops *ops, const void *send, void *recv,
                            size_t bytes, rc_err *err);
int rc_comm_broadcast_host(rc_comm *c, const rc_ops *ops, void *buf, size_t bytes, int root,
                           rc_err *err);
/* Every rank's x summed in rank order (doubles, host). */
int rc_comm_sum_doubles_host(rc_comm *c, const rc_ops *ops, double *x, int n, rc_err *err);
/* Agreement on failure: every rank passes its own code; returns the first
 * non-zero code in rank order (0 if all succeeded), the same on every rank.
 * When another rank failed, err says which. A transport error is returned
 * as is. */
int rc_comm_agree(rc_comm *c, const rc_ops *ops, int my_rc, rc_err *err);

#endif
