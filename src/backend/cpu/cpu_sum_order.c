/* cpu_sum_order.c — the kernel switch RC_CPU_SUM_ORDER=shuffled: a CPU leg
 * that is not bitwise deterministic, on purpose (src/base/kernel_switches.h).
 *
 * Real GPU trainers reorder float sums from run to run (atomics in the
 * embedding or dQ reduction, all-reduce without a pinned algorithm), and
 * `run --noise calibrated` exists to judge them (docs/design.md §7.2). This
 * switch gives the CPU reference the same property so the calibrated
 * verdict can be tested and its false-alarm rate measured without a GPU:
 * with it set to "shuffled", the backward's sums over tokens — the embedding
 * backward's tokens, and each weight-gradient GEMM's eight partial sums
 * (cpu_gemm.c) — are added in an order drawn per call from a stream seeded
 * per process (the clock and the pid), as atomics in a backward kernel
 * would; any other value, or none, keeps ops.h's fixed orders. The forward
 * is untouched, as a trainer's usually is. Nothing else changes.
 *
 * A file of its own that calls no other file of the backend (like
 * cpu_scratch.c): the switch's state is the process's, read once, and the
 * CPU ops run on one thread. */
#include "backend/cpu/cpu_internal.h"
#include "backend/numeric.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
  int read;       /* 0 until the switch was read */
  bool shuffled;  /* RC_CPU_SUM_ORDER=shuffled */
  uint64_t state; /* the process's stream: seeded once, advanced per draw */
} sum_order;

bool rc_cpu_sum_order_shuffled(void) {
  if (!sum_order.read) {
    const char *v = getenv("RC_CPU_SUM_ORDER");
    sum_order.shuffled = v && !strcmp(v, "shuffled");
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sum_order.state =
        rc_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 40));
    sum_order.read = 1;
  }
  return sum_order.shuffled;
}

void rc_cpu_sum_order_draw(int32_t *order, int n) {
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = n - 1; i > 0; i--) { /* Fisher-Yates from the process's stream */
    sum_order.state = rc_mix64(sum_order.state + 0x9E3779B97F4A7C15ull);
    int j = (int)(sum_order.state % (uint64_t)(i + 1));
    int32_t t = order[i];
    order[i] = order[j], order[j] = t;
  }
}
