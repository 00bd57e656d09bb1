/* cuda_nccl.cu — NCCL data movement for the CUDA backend's collectives
 * (src/dist/nccl_shim.h). All-to-all is grouped ncclSend/ncclRecv, the rest
 * are ncclAllGather / ncclBroadcast: no NCCL reduction is used, so the sums
 * (done in rank order by src/dist/comm.c) do not depend on NCCL's
 * algorithm. Calls are enqueued on the backend's stream, which orders them
 * with the kernels around them, and synchronised so that a failure is
 * reported by the call that caused it. Empty without NCCL. */
#ifdef RC_HAVE_NCCL
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "cuda_common.cuh"
#include "dist/nccl_shim.h"

static int nccl_fail(ncclResult_t r, const char *what, char *msg, size_t cap) {
  snprintf(msg, cap, "NCCL %s failed: %s", what, ncclGetErrorString(r));
  return -1;
}

#define NCCL_TRY(call, what)                                                                       \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) return nccl_fail(r_, what, msg, cap);                                   \
  } while (0)

/* Waits for the enqueued collective and reports asynchronous errors. */
static int finish(ncclComm_t comm, const char *what, char *msg, size_t cap) {
  cudaError_t e = cudaStreamSynchronize(rc_cuda_stream());
  if (e != cudaSuccess) {
    snprintf(msg, cap, "NCCL %s: %s", what, cudaGetErrorString(e));
    return -1;
  }
  ncclResult_t async = ncclSuccess;
  NCCL_TRY(ncclCommGetAsyncError(comm, &async), "async error query");
  if (async != ncclSuccess) return nccl_fail(async, what, msg, cap);
  return 0;
}

extern "C" int rc_nccl_unique_id(unsigned char id[RC_NCCL_ID_BYTES], char *msg, size_t cap) {
  static_assert(sizeof(ncclUniqueId) == RC_NCCL_ID_BYTES, "ncclUniqueId size");
  ncclUniqueId u;
  NCCL_TRY(ncclGetUniqueId(&u), "ncclGetUniqueId");
  memcpy(id, u.internal, RC_NCCL_ID_BYTES);
  return 0;
}

extern "C" void *rc_nccl_init(int rank, int world, const unsigned char id[RC_NCCL_ID_BYTES],
                              char *msg, size_t cap) {
  ncclUniqueId u;
  memcpy(u.internal, id, RC_NCCL_ID_BYTES);
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRank(&comm, world, u, rank);
  if (r != ncclSuccess) {
    nccl_fail(r, "ncclCommInitRank", msg, cap);
    return NULL;
  }
  return comm;
}

extern "C" int rc_nccl_version(void) {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return 0;
  return v;
}

extern "C" int rc_nccl_all_to_all(void *h, const void *send, void *recv, size_t chunk, char *msg,
                                  size_t cap) {
  ncclComm_t comm = (ncclComm_t)h;
  int world = 0;
  NCCL_TRY(ncclCommCount(comm, &world), "ncclCommCount");
  NCCL_TRY(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < world; r++) {
    const char *s = (const char *)send + (size_t)r * chunk;
    char *d = (char *)recv + (size_t)r * chunk;
    ncclResult_t a = ncclSend(s, chunk, ncclChar, r, comm, rc_cuda_stream());
    ncclResult_t b = a == ncclSuccess ? ncclRecv(d, chunk, ncclChar, r, comm, rc_cuda_stream()) : a;
    if (b != ncclSuccess) {
      ncclGroupEnd();
      return nccl_fail(b, "send/recv", msg, cap);
    }
  }
  NCCL_TRY(ncclGroupEnd(), "ncclGroupEnd (all-to-all)");
  return finish(comm, "all-to-all", msg, cap);
}

extern "C" int rc_nccl_all_gather(void *h, const void *send, void *recv, size_t chunk, char *msg,
                                  size_t cap) {
  ncclComm_t comm = (ncclComm_t)h;
  NCCL_TRY(ncclAllGather(send, recv, chunk, ncclChar, comm, rc_cuda_stream()), "ncclAllGather");
  return finish(comm, "all-gather", msg, cap);
}

extern "C" int rc_nccl_broadcast(void *h, void *buf, size_t bytes, int root, char *msg,
                                 size_t cap) {
  ncclComm_t comm = (ncclComm_t)h;
  NCCL_TRY(ncclBroadcast(buf, buf, bytes, ncclChar, root, comm, rc_cuda_stream()), "ncclBroadcast");
  return finish(comm, "broadcast", msg, cap);
}

/* An all-gather of one byte per rank: no rank returns before all arrived. */
extern "C" int rc_nccl_barrier(void *h, char *msg, size_t cap) {
  ncclComm_t comm = (ncclComm_t)h;
  int world = 0;
  NCCL_TRY(ncclCommCount(comm, &world), "ncclCommCount");
  void *buf = NULL;
  if (cudaMalloc(&buf, (size_t)world) != cudaSuccess) {
    snprintf(msg, cap, "NCCL barrier: cudaMalloc failed");
    return -1;
  }
  int rank = 0;
  ncclCommUserRank(comm, &rank);
  ncclResult_t r = ncclAllGather((char *)buf + rank, buf, 1, ncclChar, comm, rc_cuda_stream());
  int rc = r != ncclSuccess ? nccl_fail(r, "barrier", msg, cap) : finish(comm, "barrier", msg, cap);
  cudaFree(buf);
  return rc;
}

extern "C" void rc_nccl_destroy(void *h) {
  if (h) ncclCommDestroy((ncclComm_t)h);
}
#endif
