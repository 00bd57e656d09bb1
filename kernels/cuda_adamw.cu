/* cuda_adamw.cu — the fused AdamW step of ops.h, elementwise, in place.
 *
 * Each element is rc_adamw_element (backend/element_math.h), the function
 * the CPU backend's loop calls; with --fmad=false and IEEE division and
 * sqrtf it rounds identically, so the update agrees with the CPU backend
 * bit for bit. */
#include "backend/element_math.h"
#include "cuda_common.cuh"

__global__ void adamw_kernel(float *param, const float *grad, float *exp_avg, float *exp_avg_sq,
                             size_t n, float lr, float beta1, float beta2, float eps,
                             float weight_decay, float grad_scale, float bias_correction1,
                             float bias_correction2) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    rc_adamw_element(&param[i], &exp_avg[i], &exp_avg_sq[i], grad[i], lr, beta1, beta2, eps,
                     weight_decay, grad_scale, bias_correction1, bias_correction2);
}

void rc_cuda_adamw(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, size_t n,
                   float lr, float beta1, float beta2, float eps, float weight_decay,
                   float grad_scale, float bias_correction1, float bias_correction2) {
  if (n == 0) return;
  adamw_kernel<<<rc_grid_1d(n, 256), 256, 0, rc_cuda_stream()>>>(
      param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, grad_scale,
      bias_correction1, bias_correction2);
  KERNEL_CHECK();
}
