/* cuda_module.cu — the one exported symbol of libresumecheck_cuda.so: the
 * table the program's loader reads (backend/cuda_module.h). Everything else
 * in the module has hidden visibility, so the module and the program share
 * no symbol by accident. */
#include <cublasLt.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda_module.h"
#include "cuda_common.cuh"
#include "dist/nccl_shim.h"

#ifndef RC_INTERFACE_HASH
#error "RC_INTERFACE_HASH must be defined by the build (CMakeLists.txt)"
#endif

/* What can change bits on this machine, for args.json. Called after ops()
 * succeeded, so a device is present. */
static const char *describe(void) {
  static char line[512];
  int dev = 0, driver = 0, runtime = 0;
  cudaDeviceProp prop;
  memset(&prop, 0, sizeof prop);
  (void)cudaGetDevice(&dev);
  (void)cudaGetDeviceProperties(&prop, dev);
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  snprintf(line, sizeof line, "%.200s sm_%d%d, driver %d.%d, runtime %d.%d, cuBLASLt %zu, %s, %s",
           prop.name, prop.major, prop.minor, driver / 1000, driver % 1000 / 10, runtime / 1000,
           runtime % 1000 / 10, cublasLtGetVersion(), rc_cuda_attention_path(),
           rc_cuda_grouped_gemm_path());
  return line;
}

static int memory_info(size_t *free_bytes, size_t *total_bytes) {
  return cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess ? 0 : -1;
}

/* Filled member by member, so that a reordered header cannot swap two
 * members of the same type. */
static rc_cuda_module make_table(void) {
  rc_cuda_module t;
  memset(&t, 0, sizeof t);
  t.abi = RC_CUDA_MODULE_ABI;
  t.interface_hash = RC_INTERFACE_HASH;
  t.ops_size = sizeof(rc_ops);
  t.ops = rc_cuda_backend_ops;
  t.describe = describe;
  t.memory_info = memory_info;
#ifdef RC_HAVE_NCCL
  t.nccl_unique_id = rc_nccl_unique_id;
  t.nccl_init = rc_nccl_init;
  t.nccl_version = rc_nccl_version;
  t.nccl_all_to_all = rc_nccl_all_to_all;
  t.nccl_all_gather = rc_nccl_all_gather;
  t.nccl_broadcast = rc_nccl_broadcast;
  t.nccl_barrier = rc_nccl_barrier;
  t.nccl_destroy = rc_nccl_destroy;
#endif
  return t;
}

static const rc_cuda_module module_table = make_table();

extern "C" __attribute__((visibility("default"))) const rc_cuda_module *rc_cuda_module_entry(void) {
  return &module_table;
}
