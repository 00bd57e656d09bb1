/* reduce_order.c — the sum of partial sums, in one fixed order: what makes
 * the grad norm bitwise the same run to run (no atomics, no order that
 * depends on timing). The catalogue's injected `nondeterministic-reduction`
 * lives here too, so the tool can show what a reduction without a fixed
 * order does to the verdict. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "backend/numeric.h"
#include "core/model_internal.h"

/* The sum of per-tensor partial sums of squares in order. The injected
 * `nondeterministic-reduction` sums them in float, in an order seeded by the
 * clock — the way an atomics-based reduction behaves. */
double rc_sum_partials(const rc_model *m, const double *part, int n) {
  double total = 0;
  if (m->cfg.inject & RC_BUG_NONDETERMINISTIC_REDUCTION) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t r = rc_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32));
    int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!order) abort();
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
      r = rc_mix64(r);
      int j = (int)(r % (uint64_t)(i + 1)), t = order[i];
      order[i] = order[j], order[j] = t;
    }
    float acc = 0;
    for (int i = 0; i < n; i++) acc += (float)part[order[i]];
    total = acc;
    free(order);
  } else {
    for (int i = 0; i < n; i++) total += part[i];
  }
  return total;
}
