/* comm_mpi.c — the CPU backend's collectives across processes, over MPI.
 *
 * Only data movement is used (MPI_Alltoall, MPI_Allgather, MPI_Bcast,
 * MPI_Barrier): the sums happen in comm.c in rank order, so results do not
 * depend on the MPI implementation's reduction algorithm. Errors are
 * returned (MPI_ERRORS_RETURN), never fatal inside MPI, and turned into
 * rc_err messages. Built only when CMake finds MPI (RC_HAVE_MPI). */
#include "dist/comm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef RC_HAVE_MPI
#include <mpi.h>

static int mpi_fail(int code, const char *what, rc_err *err) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) len = 0;
  msg[len] = 0;
  return rc_fail(err, RC_EXIT_IOERR, "MPI %s failed: %s", what, len ? msg : "unknown error");
}

/* MPI counts are ints: refuse what does not fit rather than truncate. */
static int count_of(size_t bytes, int *count, rc_err *err) {
  if (bytes > (size_t)INT_MAX)
    return rc_fail(err, RC_EXIT_SOFTWARE, "MPI message of %zu bytes is too large", bytes);
  *count = (int)bytes;
  return 0;
}

static int mpi_all_to_all(rc_comm *c, const void *send, void *recv, size_t chunk, rc_err *err) {
  (void)c;
  int n = 0, rc;
  if (count_of(chunk, &n, err)) return err->code;
  if ((rc = MPI_Alltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, MPI_COMM_WORLD)) != MPI_SUCCESS)
    return mpi_fail(rc, "all-to-all", err);
  return 0;
}

static int mpi_all_gather(rc_comm *c, const void *send, void *recv, size_t chunk, rc_err *err) {
  (void)c;
  int n = 0, rc;
  if (count_of(chunk, &n, err)) return err->code;
  if ((rc = MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, MPI_COMM_WORLD)) != MPI_SUCCESS)
    return mpi_fail(rc, "all-gather", err);
  return 0;
}

static int mpi_broadcast(rc_comm *c, void *buf, size_t bytes, int root, rc_err *err) {
  (void)c;
  int n = 0, rc;
  if (count_of(bytes, &n, err)) return err->code;
  if ((rc = MPI_Bcast(buf, n, MPI_BYTE, root, MPI_COMM_WORLD)) != MPI_SUCCESS)
    return mpi_fail(rc, "broadcast", err);
  return 0;
}

static int mpi_barrier(rc_comm *c, rc_err *err) {
  (void)c;
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "barrier", err);
  return 0;
}

static void mpi_destroy(rc_comm *c) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  free(c);
}

bool rc_comm_mpi_available(void) {
  return true;
}

int rc_comm_mpi_create(rc_comm **out, int world, rc_err *err) {
  *out = NULL;
  int rc = MPI_Init(NULL, NULL);
  if (rc != MPI_SUCCESS) return rc_fail(err, RC_EXIT_IOERR, "MPI_Init failed (code %d)", rc);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank)) != MPI_SUCCESS ||
      (rc = MPI_Comm_size(MPI_COMM_WORLD, &size)) != MPI_SUCCESS) {
    mpi_fail(rc, "rank/size query", err);
    MPI_Finalize();
    return err->code;
  }
  if (size != world) {
    MPI_Finalize();
    return rc_fail(
        err, RC_EXIT_USAGE,
        "--world-size %d but MPI started %d processes (launch with mpirun -np %d, or without a "
        "launcher and let --world-size spawn them)",
        world, size, world);
  }
  rc_comm *c = calloc(1, sizeof *c);
  if (!c) abort();
  c->name = "mpi";
  c->rank = rank, c->world = size;
  const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  c->local_rank = lr ? atoi(lr) : rank;
  snprintf(c->settings, sizeof c->settings, "MPI data movement only; sums in rank order");
  c->all_to_all = mpi_all_to_all;
  c->all_gather = mpi_all_gather;
  c->broadcast = mpi_broadcast;
  c->barrier = mpi_barrier;
  c->destroy = mpi_destroy;
  *out = c;
  return 0;
}

#else

bool rc_comm_mpi_available(void) {
  return false;
}

int rc_comm_mpi_create(rc_comm **out, int world, rc_err *err) {
  *out = NULL;
  return rc_fail(err, RC_EXIT_UNTESTABLE,
                 "--world-size %d on the CPU backend needs MPI, and this build has none "
                 "(install libopenmpi-dev openmpi-bin and rebuild)",
                 world);
}

#endif
