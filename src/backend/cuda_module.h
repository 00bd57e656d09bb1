/* cuda_module.h — the interface between the program and the CUDA backend
 * module (libresumecheck_cuda.so, built from kernels/).
 *
 * The CUDA backend is a shared library opened with dlopen only when a leg
 * asks for --device cuda (or auto on a machine with a GPU), so the CLI, the
 * CPU backend, compare, inspect and every CPU leg load no CUDA library. The
 * module exports one symbol, rc_cuda_module_entry, returning this table;
 * everything else in it is hidden. The loader (backend/cuda_loader.c)
 * refuses a module built from other sources: `abi` must equal the program's
 * RC_CUDA_MODULE_ABI and `interface_hash` the SHA-256 of ops.h, numeric.h,
 * nccl_shim.h and this header taken at configure time (RC_INTERFACE_HASH),
 * so a stale module can never run with a reordered ops table. */
#ifndef RC_BACKEND_CUDA_MODULE_H
#define RC_BACKEND_CUDA_MODULE_H

#include <stddef.h>

#include "backend/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RC_CUDA_MODULE_ABI 1
#define RC_CUDA_MODULE_FILE "libresumecheck_cuda.so"
#define RC_CUDA_MODULE_ENTRY "rc_cuda_module_entry"

typedef struct rc_cuda_module {
  int abi;                    /* RC_CUDA_MODULE_ABI of the module's build */
  const char *interface_hash; /* RC_INTERFACE_HASH of the module's build */
  size_t ops_size;            /* sizeof(rc_ops) in the module's build */
  /* The ops table when a GPU this module can run on is present, else NULL
   * with *why saying why. */
  const rc_ops *(*ops)(const char **why);
  /* One line naming what can change bits: GPU, compute capability, driver,
   * CUDA runtime and cuBLAS versions (recorded in args.json). */
  const char *(*describe)(void);
  /* cudaMemGetInfo of the current device: 0, or -1 with nothing set. Only
   * after ops() succeeded. */
  int (*memory_info)(size_t *free_bytes, size_t *total_bytes);
  /* NCCL data movement (dist/nccl_shim.h); all NULL when the module was
   * built without NCCL. */
  int (*nccl_unique_id)(unsigned char *id, char *msg, size_t cap);
  void *(*nccl_init)(int rank, int world, const unsigned char *id, char *msg, size_t cap);
  int (*nccl_version)(void);
  int (*nccl_all_to_all)(void *h, const void *send, void *recv, size_t chunk, char *msg,
                         size_t cap);
  int (*nccl_all_gather)(void *h, const void *send, void *recv, size_t chunk, char *msg,
                         size_t cap);
  int (*nccl_broadcast)(void *h, void *buf, size_t bytes, int root, char *msg, size_t cap);
  int (*nccl_barrier)(void *h, char *msg, size_t cap);
  void (*nccl_destroy)(void *h);
} rc_cuda_module;

typedef const rc_cuda_module *(*rc_cuda_module_entry_fn)(void);

/* The loader's side. rc_cuda_ops() (ops.h) opens the module on first use.
 * rc_cuda_module_loaded() is the module once opened (NULL before, or when it
 * could not be opened); rc_cuda_module_path() the file it came from. */
const rc_cuda_module *rc_cuda_module_loaded(void);
/* Opens the module (once) without asking it for its ops table, so without
 * a CUDA context: NULL with *why when it cannot be found or opened. */
const rc_cuda_module *rc_cuda_module_open(const char **why);
const char *rc_cuda_module_path(void);
/* Whether this machine shows an NVIDIA GPU to the kernel driver, looked up
 * without loading any CUDA library (for --device auto). */
int rc_cuda_gpu_visible(void);

#ifdef __cplusplus
}
#endif

#endif
