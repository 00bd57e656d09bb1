/* linear.h — the TE-style linear's forward/backward and its policies
 * (docs/design.md §3.1); see linear.c for the mechanism. */
#ifndef RC_CORE_LINEAR_H
#define RC_CORE_LINEAR_H

#include <stdlib.h>

#include "core/model.h"

/* The value a forward call passes under the configured policy. */
rc_flag rc_linear_policy_value(const rc_model *m, const rc_linear *lin);

/* Whether lin's GEMMs take care of their inputs themselves: a BF16/FP16 GEMM
 * rounds its operands (ops.h), an fp8 linear casts them to e4m3. Not so for
 * an fp32 linear (the router) in a bf16/fp16 model: its inputs are rounded
 * to the model's compute type first. */
bool rc_linear_rounds_inputs(const rc_model *m, const rc_linear *lin);
/* The input or output gradient for lin's GEMMs: src itself when the GEMM
 * rounds it, else src rounded into dst (dst may equal src; n floats). */
const float *rc_linear_round_input(rc_model *m, const rc_linear *lin, float *dst, const float *src,
                                   size_t n);
/* fp8: fix the step's scales from the amax histories / push the step's
 * amaxes (from rc_model.fp8_amax_host, read back first). */
void rc_linear_begin_step(rc_model *m, rc_linear *lin);
void rc_linear_end_step(rc_model *m, rc_linear *lin);
/* Whether lin is a half linear: its GEMMs run on 16-bit operands in the
 * model's compute type (bf16/fp16; not fp8, not an fp32 linear). */
bool rc_linear_is_half(const rc_model *m, const rc_linear *lin);
/* Megatron's copy of the main params (the fp32 weights) to the model params
 * (a half linear's weight copy, wq_half), made by the optimizer where it
 * updates a weight in one op (adamw_many's param_half) instead of by the
 * next step's first forward call (cast_half): the same bits, one pass over
 * the weights fewer a step. On unless RC_MODEL_PARAMS_FROM_OPTIMIZER=0
 * (tests/core_model_params_copy.sh: the same bytes either way). */
bool rc_model_params_from_optimizer(void);
/* The copy the optimizer may write for lin: its wq_half, or NULL (fp32 and
 * fp8 linears). */
uint16_t *rc_linear_optimizer_copy(const rc_model *m, const rc_linear *lin);
/* The optimizer has written lin's copy from the updated weight: it serves
 * the next step's span (model.h weights_serial). */
void rc_linear_copy_written(rc_model *m, rc_linear *lin);
/* The weight changed otherwise (a load): the next forward casts again. */
void rc_linear_copy_stale(rc_linear *lin);
/* y[rows, out] = x[rows, in] W^T (x already rounded to the compute type).
 * A half linear casts x into x_half ([rows, in], the caller's, kept until the
 * call's backward, which reads it for the wgrad), or with x NULL takes x_half
 * as its producer wrote it (ops.h out_half); others ignore x_half (may be
 * NULL). Grouped linears take group_rows[g] consecutive rows per group.
 * Returns the call index within the microbatch, for the backward. */
int rc_linear_forward(rc_model *m, rc_linear *lin, const float *x, uint16_t *x_half, float *y,
                      int rows, const int *group_rows);
/* y = R + x W^T (R [rows, out], not overlapping y), bitwise
 * rc_linear_forward into y and then `add` of R: a residual connection in
 * the GEMM's epilogue where the linear is half (ops.h gemm_half_residual).
 * One group only. */
int rc_linear_forward_residual(rc_model *m, rc_linear *lin, const float *x, uint16_t *x_half,
                               const float *R, float *y, int rows);
/* The same for a half linear, its output y_half [rows, out] in the compute
 * type's 16-bit form (ops.h gemm_to_half): the fp32 accumulator rounded
 * once, as a bf16/fp16 layer's output is. */
int rc_linear_forward_to_half(rc_model *m, rc_linear *lin, const float *x, uint16_t *x_half,
                              uint16_t *y_half, int rows, const int *group_rows);
/* dx (writes, may be NULL) = dy W; main_grad (+)= dy^T x, beta from the call's
 * flag when fusion is on, via scratch + add when off. x is the forward's fp32
 * input (a half linear uses the copy it saved; x may be NULL). A half linear
 * takes dy already in the compute type as dy_half, or casts dy once itself
 * when dy_half is NULL. */
void rc_linear_backward(rc_model *m, rc_linear *lin, int call, const float *dy,
                        const uint16_t *dy_half, const float *x, float *dx, int rows,
                        const int *group_rows);
/* rc_linear_backward in two halves, for a caller that recomputes a half
 * linear's saved input between them instead of keeping it (a half fc2's
 * SwiGLU output, model_layer.c): the first casts dy into dy_half_buf (the
 * caller's, dy_half_cap elements, kept until the second) unless dy_half
 * (kept as long) already holds it and runs dgrad; the second
 * runs the wgrad on the call's saved input as it is then (and the wgrad hook
 * and event log), so the results are rc_linear_backward's bit for bit. A
 * linear that is not half does all of it in the first call; the second is
 * then a no-op. dx must stay unchanged in between (the event log reads it). */
void rc_linear_backward_dgrad(rc_model *m, rc_linear *lin, int call, const float *dy,
                              const uint16_t *dy_half, uint16_t *dy_half_buf, size_t dy_half_cap,
                              const float *x, float *dx, int rows, const int *group_rows);
void rc_linear_backward_wgrad(rc_model *m, rc_linear *lin);
/* The input's gradient alone, dx = dy W, for a call that used the weight
 * as a constant (a detached MTP head, docs/design.md §3.5): no weight
 * gradient, so main_grad and the call's flag are left alone. One group; not
 * for a quantised linear (the config that would ask is refused). */
void rc_linear_backward_input(rc_model *m, rc_linear *lin, int call, const float *dy,
                              const uint16_t *dy_half, float *dx, int rows);

#endif
