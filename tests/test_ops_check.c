/* test_ops_check.c — rc_ops_missing(), the check every received ops table
 * passes (the CPU table in rc_cpu_ops(), the CUDA module's in rc_cuda_ops()).
 *
 * The real CPU table passes (the control); a copy with one member NULL is
 * refused and the member named, for every one of its pointer-sized slots in
 * turn, so a member the check forgot to name fails here as well as at its
 * static assertion. */
#include <stdio.h>
#include <string.h>

#include "backend/ops.h"
#include "check.h"

int main(void) {
  const rc_ops *cpu = rc_cpu_ops();
  const char *missing = rc_ops_missing(cpu);
  CHECK(missing == NULL, "the CPU table is refused: no %s", missing ? missing : "?");
  CHECK(rc_ops_missing(NULL) != NULL, "a NULL table passes");

  /* the pairs a positional table could swap: named exactly */
  rc_ops t = *cpu;
  t.sumsq = NULL;
  missing = rc_ops_missing(&t);
  CHECK(missing && !strcmp(missing, "sumsq"), "sumsq NULL: got %s", missing ? missing : "(none)");
  t = *cpu;
  t.rope_backward = NULL;
  missing = rc_ops_missing(&t);
  CHECK(missing && !strcmp(missing, "rope_backward"), "rope_backward NULL: got %s",
        missing ? missing : "(none)");

  /* every slot: zero its bytes (NULL on every platform this builds on) */
  size_t slots = sizeof(rc_ops) / sizeof(void *);
  CHECK(slots * sizeof(void *) == sizeof(rc_ops), "rc_ops is not a table of pointers");
  for (size_t i = 0; i < slots; i++) {
    t = *cpu;
    memset((char *)&t + i * sizeof(void *), 0, sizeof(void *));
    missing = rc_ops_missing(&t);
    CHECK(missing != NULL, "slot %zu of rc_ops set to NULL passes the check", i);
  }
  if (failures) return 1;
  printf("ops check: the CPU table passes; each of %zu members set to NULL is refused by name\n",
         slots);
  return 0;
}
