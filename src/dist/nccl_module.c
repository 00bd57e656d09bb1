/* nccl_module.c — dist/nccl_shim.h, forwarded to the CUDA module.
 *
 * NCCL lives in the CUDA backend module (libresumecheck_cuda.so) with the
 * stream its collectives are enqueued on, so the program itself links no
 * NCCL. comm_nccl.c is only reached for a CUDA leg, after rc_cuda_ops()
 * opened the module; each call still checks, and fails with a message
 * rather than calling through a missing table. */
#include "dist/nccl_shim.h"

#ifdef RC_HAVE_NCCL
#include <stdio.h>

#include "backend/cuda_module.h"

static const rc_cuda_module *nccl_module(char *msg, size_t cap) {
  const rc_cuda_module *m = rc_cuda_module_loaded();
  if (!m || !m->nccl_init) {
    snprintf(msg, cap, "NCCL collectives need the CUDA module built with NCCL%s",
             m ? " (this one was built without it)" : " (it is not loaded)");
    return NULL;
  }
  return m;
}

int rc_nccl_unique_id(unsigned char id[RC_NCCL_ID_BYTES], char *msg, size_t cap) {
  const rc_cuda_module *m = nccl_module(msg, cap);
  return m ? m->nccl_unique_id(id, msg, cap) : -1;
}

void *rc_nccl_init(int rank, int world, const unsigned char id[RC_NCCL_ID_BYTES], char *msg,
                   size_t cap) {
  const rc_cuda_module *m = nccl_module(msg, cap);
  return m ? m->nccl_init(rank, world, id, msg, cap) : NULL;
}

int rc_nccl_version(void) {
  const rc_cuda_module *m = rc_cuda_module_loaded();
  return m && m->nccl_version ? m->nccl_version() : 0;
}

int rc_nccl_all_to_all(void *h, const void *send, void *recv, size_t chunk, char *msg, size_t cap) {
  const rc_cuda_module *m = nccl_module(msg, cap);
  return m ? m->nccl_all_to_all(h, send, recv, chunk, msg, cap) : -1;
}

int rc_nccl_all_gather(void *h, const void *send, void *recv, size_t chunk, char *msg, size_t cap) {
  const rc_cuda_module *m = nccl_module(msg, cap);
  return m ? m->nccl_all_gather(h, send, recv, chunk, msg, cap) : -1;
}

int rc_nccl_broadcast(void *h, void *buf, size_t bytes, int root, char *msg, size_t cap) {
  const rc_cuda_module *m = nccl_module(msg, cap);
  return m ? m->nccl_broadcast(h, buf, bytes, root, msg, cap) : -1;
}

int rc_nccl_barrier(void *h, char *msg, size_t cap) {
  const rc_cuda_module *m = nccl_module(msg, cap);
  return m ? m->nccl_barrier(h, msg, cap) : -1;
}

void rc_nccl_destroy(void *h) {
  const rc_cuda_module *m = rc_cuda_module_loaded();
  if (m && m->nccl_destroy) m->nccl_destroy(h);
}
#endif
