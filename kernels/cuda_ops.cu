/* cuda_ops.cu — placeholder until the CUDA backend lands. */
#include "backend/ops.h"

extern "C" const rc_ops *rc_cuda_ops(const char **why) {
  if (why) *why = "CUDA backend not implemented yet";
  return 0;
}
