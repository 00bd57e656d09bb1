/* nccl_shim.h — the C-callable NCCL calls that kernels/cuda_nccl.cu exports
 * and src/dist/comm_nccl.c uses. Data movement only (send/recv, all-gather,
 * broadcast) on the CUDA backend's stream; no file I/O, no policy: the
 * rendezvous and the environment live in comm_nccl.c. Each call returns 0 or
 * -1 with a message in msg. Present only when built with NCCL. */
#ifndef RC_DIST_NCCL_SHIM_H
#define RC_DIST_NCCL_SHIM_H

#include <stddef.h>

#define RC_NCCL_ID_BYTES 128

#ifdef __cplusplus
extern "C" {
#endif

int rc_nccl_unique_id(unsigned char id[RC_NCCL_ID_BYTES], char *msg, size_t cap);
/* Joins the communicator (blocks until every rank has joined). */
void *rc_nccl_init(int rank, int world, const unsigned char id[RC_NCCL_ID_BYTES], char *msg,
                   size_t cap);
int rc_nccl_version(void);
int rc_nccl_all_to_all(void *h, const void *send, void *recv, size_t chunk, char *msg, size_t cap);
int rc_nccl_all_gather(void *h, const void *send, void *recv, size_t chunk, char *msg, size_t cap);
int rc_nccl_broadcast(void *h, void *buf, size_t bytes, int root, char *msg, size_t cap);
int rc_nccl_barrier(void *h, char *msg, size_t cap);
void rc_nccl_destroy(void *h);

#ifdef __cplusplus
}
#endif

#endif
