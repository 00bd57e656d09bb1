/* cpu_init.c — init_normal on the CPU: the weight initialisation's draws
 * (numeric.h's rc_init_normal_pair), split over threads.
 *
 * Every element is a pure function of (key, index, std), so the split changes
 * no bit (tests/core_init_threads.sh); it only buys time: a gpu-small model is
 * ~200M Box-Muller draws, seconds on one core. The threads are this op's
 * alone, started and joined within the call: the op is synchronous like every
 * CPU op. RC_INIT_THREADS overrides the thread count (default: the online
 * CPUs, at most INIT_MAX_THREADS). */
#include "backend/cpu/cpu_internal.h"
#include "backend/numeric.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* a split below INIT_MIN_SPLIT elements is not worth a thread */
enum { INIT_MAX_THREADS = 32, INIT_MIN_SPLIT = 1 << 18 };

typedef struct {
  float *dst;      /* element i goes to dst[i - first] */
  uint64_t first;  /* the call's first element */
  uint64_t lo, hi; /* this split: elements [lo, hi) */
  uint64_t key;
  float std;
} init_split;

/* Pairs (i, i+1) with i even where both lie in the split; an element alone
 * at either end draws its pair and keeps its half. */
static void fill_split(const init_split *c) {
  uint64_t i = c->lo, f = c->first;
  if (i < c->hi && (i & 1)) {
    c->dst[i - f] = rc_init_normal(c->key, i, c->std);
    i++;
  }
  for (; i + 1 < c->hi; i += 2)
    rc_init_normal_pair(c->key, i, c->std, &c->dst[i - f], &c->dst[i + 1 - f]);
  if (i < c->hi) c->dst[i - f] = rc_init_normal(c->key, i, c->std);
}

static void *fill_thread(void *arg) {
  fill_split(arg);
  return NULL;
}

/* The online CPUs, or RC_INIT_THREADS; 1 to INIT_MAX_THREADS. */
static int init_threads(void) {
  const char *env = getenv("RC_INIT_THREADS");
  long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > INIT_MAX_THREADS ? INIT_MAX_THREADS : (int)n;
}

/* Splits of about n / threads elements (at least INIT_MIN_SPLIT) that start
 * at even indices after the first, so no pair is drawn twice; this thread
 * fills the first, and any split whose thread could not be started. */
void rc_cpu_init_normal(float *dst, size_t n, uint64_t first, uint64_t key, float std) {
  if (n == 0) return;
  int threads = init_threads();
  uint64_t end = first + n, per = (n + (uint64_t)threads - 1) / (uint64_t)threads;
  if (per < INIT_MIN_SPLIT) per = INIT_MIN_SPLIT;
  init_split split[INIT_MAX_THREADS];
  pthread_t tid[INIT_MAX_THREADS];
  bool started[INIT_MAX_THREADS] = {false};
  int count = 0;
  for (uint64_t lo = first; lo < end && count < INIT_MAX_THREADS; count++) {
    uint64_t hi = end - lo > per ? (lo + per + 1) & ~(uint64_t)1 : end;
    if (count == INIT_MAX_THREADS - 1 || hi > end) hi = end;
    split[count] = (init_split){dst, first, lo, hi, key, std};
    if (count > 0) started[count] = !pthread_create(&tid[count], NULL, fill_thread, &split[count]);
    lo = hi;
  }
  fill_split(&split[0]);
  for (int t = 1; t < count; t++) {
    if (started[t])
      pthread_join(tid[t], NULL);
    else
      fill_split(&split[t]);
  }
}
