/* cpu_scratch.c — the scratch memory the CPU ops take within a call, and
 * the record of the first one that could not be had (ops.h alloc_failed).
 *
 * A file of its own, which calls no other file of the backend: every op
 * file allocates through it and the table (cpu_ops.c) reads the record, so
 * no two files of the backend call each other (layers_no_file_cycles). */
#include "backend/cpu/cpu_internal.h"
#include "base/alloc_fail.h"

#include <stdio.h>
#include <stdlib.h>

/* The first op scratch that could not be had. The backend's state, like its
 * timer marks: its ops take no context, and they run on one thread (the
 * init's fill threads allocate nothing). */
static struct {
  int failed; /* ops.h alloc_failed: 0, 1 (refused) or 2 (forced) */
  size_t bytes;
  char what[96];
} cpu_failure;

void *rc_cpu_scratch(size_t bytes, const char *what) {
  bool forced = rc_alloc_fail_now();
  void *p = forced ? NULL : malloc(bytes ? bytes : 1);
  if (!p && !cpu_failure.failed) { /* the first one is the cause */
    cpu_failure.failed = forced ? 2 : 1;
    cpu_failure.bytes = bytes;
    snprintf(cpu_failure.what, sizeof cpu_failure.what, "%s", what);
  }
  return p;
}

int rc_cpu_alloc_failed(size_t *bytes, char *what, size_t cap) {
  if (!cpu_failure.failed) return 0;
  *bytes = cpu_failure.bytes;
  snprintf(what, cap, "%s", cpu_failure.what);
  return cpu_failure.failed;
}
