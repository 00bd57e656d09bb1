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
  snprintf(line, sizeof line, "%.200s sm_%d%d, driver %d.%d, runtime %d.%d, cuBLASLt %zu",
           prop.name, prop.major, prop.minor, driver / 1000, driver % 1000 / 10, runtime / 1000,
           runtime % 1000 / 10, cublasLtGetVersion());
  return line;
}

static const rc_cuda_module module_table = {
    RC_CUDA_MODULE_ABI, RC_INTERFACE_HASH, sizeof(rc_ops),  rc_cuda_backend_ops, describe,
#ifdef RC_HAVE_NCCL
    rc_nccl_unique_id,  rc_nccl_init,      rc_nccl_version, rc_nccl_all_to_all,  rc_nccl_all_gather,
    rc_nccl_broadcast,  rc_nccl_barrier,   rc_nccl_destroy,
#else
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
#endif
};

extern "C" __attribute__((visibility("default"))) const rc_cuda_module *rc_cuda_module_entry(void) {
  return &module_table;
}
