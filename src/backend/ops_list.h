/* ops_list.h — the members of rc_ops (ops.h), in declaration order, once:
 * the table check (ops_check.c) and the profiler (ops_profile.c) expand it,
 * and both fail to build when ops.h gains a member it does not name. */
#ifndef RC_BACKEND_OPS_LIST_H
#define RC_BACKEND_OPS_LIST_H

/* every op: the function pointers after `name` */
#define RC_OPS_FUNCTIONS(X)                                                                        \
  X(alloc)                                                                                         \
  X(alloc_failed)                                                                                  \
  X(free)                                                                                          \
  X(to_device)                                                                                     \
  X(to_host)                                                                                       \
  X(copy)                                                                                          \
  X(zero)                                                                                          \
  X(zero_many)                                                                                     \
  X(sync)                                                                                          \
  X(timer_mark)                                                                                    \
  X(timer_seconds)                                                                                 \
  X(host_alloc)                                                                                    \
  X(host_free)                                                                                     \
  X(gemm)                                                                                          \
  X(cast_half)                                                                                     \
  X(gemm_half)                                                                                     \
  X(gemm_half_residual)                                                                            \
  X(gemm_to_half)                                                                                  \
  X(gemm_half_many)                                                                                \
  X(cast_e4m3)                                                                                     \
  X(gemm_e4m3)                                                                                     \
  X(amax_update)                                                                                   \
  X(round_to)                                                                                      \
  X(amax)                                                                                          \
  X(add)                                                                                           \
  X(scale)                                                                                         \
  X(copy2d)                                                                                        \
  X(sum)                                                                                           \
  X(sumsq)                                                                                         \
  X(count_nonfinite)                                                                               \
  X(fingerprint)                                                                                   \
  X(sumsq_many)                                                                                    \
  X(fingerprint_many)                                                                              \
  X(embedding_forward)                                                                             \
  X(embedding_backward)                                                                            \
  X(rmsnorm_forward)                                                                               \
  X(rmsnorm_backward)                                                                              \
  X(rope_forward)                                                                                  \
  X(rope_backward)                                                                                 \
  X(attention_forward)                                                                             \
  X(attention_backward)                                                                            \
  X(swiglu_forward)                                                                                \
  X(swiglu_backward)                                                                               \
  X(cross_entropy)                                                                                 \
  X(dropout)                                                                                       \
  X(init_normal)                                                                                   \
  X(moe_route)                                                                                     \
  X(moe_route_backward)                                                                            \
  X(moe_permute)                                                                                   \
  X(moe_gather)                                                                                    \
  X(moe_combine)                                                                                   \
  X(moe_combine_backward)                                                                          \
  X(adamw)                                                                                         \
  X(adamw_many)

#endif
