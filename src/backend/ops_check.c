/* ops_check.c — rc_ops_missing(): is every member of an ops table set?
 *
 * A table is filled member by member (designated initializers), so a member
 * added to ops.h and forgotten in a backend compiles to NULL. The table is
 * checked where it is received, and a hole is refused by name instead of
 * crashing at the first call. The list below is ops.h's members in order;
 * the static assertion fails the build when ops.h gains a member this list
 * does not name. */
#include "backend/ops.h"

#define RC_OPS_MEMBERS(X)                                                                          \
  X(name)                                                                                          \
  X(alloc)                                                                                         \
  X(free)                                                                                          \
  X(to_device)                                                                                     \
  X(to_host)                                                                                       \
  X(copy)                                                                                          \
  X(zero)                                                                                          \
  X(sync)                                                                                          \
  X(host_alloc)                                                                                    \
  X(host_free)                                                                                     \
  X(gemm)                                                                                          \
  X(round_to)                                                                                      \
  X(quantize_e4m3)                                                                                 \
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
  X(moe_route)                                                                                     \
  X(moe_route_backward)                                                                            \
  X(moe_permute)                                                                                   \
  X(moe_gather)                                                                                    \
  X(moe_combine)                                                                                   \
  X(moe_combine_backward)                                                                          \
  X(adamw)

#define RC_OPS_COUNT_ONE(m) +1
_Static_assert(sizeof(rc_ops) == (0 RC_OPS_MEMBERS(RC_OPS_COUNT_ONE)) * sizeof(void (*)(void)),
               "rc_ops_missing() must name every member of rc_ops");

const char *rc_ops_missing(const rc_ops *ops) {
  if (!ops) return "the table itself";
#define RC_OPS_CHECK_ONE(m)                                                                        \
  if (!ops->m) return #m;
  RC_OPS_MEMBERS(RC_OPS_CHECK_ONE)
#undef RC_OPS_CHECK_ONE
  return NULL;
}
