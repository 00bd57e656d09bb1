/* cuda_stub.c — rc_cuda_ops() for builds without the CUDA backend. */
#include "backend/ops.h"

#ifndef RC_HAVE_CUDA
const rc_ops *rc_cuda_ops(const char **why) {
  if (why) *why = "this build has no CUDA backend (nvcc was not found at configure time)";
  return 0;
}
#endif
