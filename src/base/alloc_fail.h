/* alloc_fail.h — RC_TEST_FAIL_ALLOC_AT=N, a test-only switch: the Nth
 * allocation that this switch counts fails as if the memory were not there,
 * so a test can reach every allocation failure path at a chosen point
 * (docs/robustness.md, "Allocation failures"). Not a feature.
 *
 * Counted, in the order they happen: the model's buffers as its plan's
 * walk allocates them (core/model_memory.c: backend and host alike; not the
 * two activation tables the plan makes while planning), the init's row of
 * ones for the norm weights (model.c, when it draws the weights), and then
 * every scratch buffer a CPU backend op asks for during the steps
 * (backend/cpu/cpu_internal.h). Unset, 0 or not a number: nothing fails and
 * the count is one atomic add per allocation. */
#ifndef RC_BASE_ALLOC_FAIL_H
#define RC_BASE_ALLOC_FAIL_H

#include <stdbool.h>

/* Counts one allocation; true when it is the one RC_TEST_FAIL_ALLOC_AT names
 * (then the caller fails it without asking the allocator). */
bool rc_alloc_fail_now(void);

#endif
