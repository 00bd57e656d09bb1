/* ops_check.c — rc_ops_missing(): is every member of an ops table set?
 *
 * A table is filled member by member (designated initializers), so a member
 * added to ops.h and forgotten in a backend compiles to NULL. The table is
 * checked where it is received, and a hole is refused by name instead of
 * crashing at the first call. The members come from ops_list.h; the static
 * assertion fails the build when ops.h gains a member that list does not
 * name. */
#include "backend/ops.h"

#include "backend/ops_list.h"

#define RC_OPS_COUNT_ONE(m) +1
_Static_assert(sizeof(rc_ops) == (1 RC_OPS_FUNCTIONS(RC_OPS_COUNT_ONE)) * sizeof(void (*)(void)),
               "rc_ops_missing() must name every member of rc_ops");

const char *rc_ops_missing(const rc_ops *ops) {
  if (!ops) return "the table itself";
  if (!ops->name) return "name";
#define RC_OPS_CHECK_ONE(m)                                                                        \
  if (!ops->m) return #m;
  RC_OPS_FUNCTIONS(RC_OPS_CHECK_ONE)
#undef RC_OPS_CHECK_ONE
  return NULL;
}
