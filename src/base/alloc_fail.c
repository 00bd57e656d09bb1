/* alloc_fail.c — the RC_TEST_FAIL_ALLOC_AT counter (alloc_fail.h).
 *
 * Process state on purpose: the allocations it counts are made by the model
 * and by backend ops that take no context, and a test names the Nth of the
 * whole process. The switch is read once; the count is atomic, since the
 * threads of a save may allocate beside a step. */
#include "base/alloc_fail.h"

#include <pthread.h>
#include <stdlib.h>

static long g_fail_at; /* 0: off */
static long g_count;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_switch(void) {
  const char *v = getenv("RC_TEST_FAIL_ALLOC_AT");
  char *end = NULL;
  long n = v && *v ? strtol(v, &end, 10) : 0;
  g_fail_at = end && *end == 0 && n > 0 ? n : 0;
}

bool rc_alloc_fail_now(void) {
  pthread_once(&g_once, read_switch);
  if (!g_fail_at) return false;
  return __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED) == g_fail_at;
}
