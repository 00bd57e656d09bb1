/* fuzz_trace.c — libFuzzer target: rc_trace_compare (harness/trace_diff.c)
 * on two traces cut from the input at the first "\n--\n" (the whole input
 * against itself when there is none). Traces come from whatever an exec
 * trainer writes, so the reader must survive any CSV. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "harness/compare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int put(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(p, 1, n, f);
  return fclose(f) == 0 && w == n ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char a[64], b[64];
  if (!a[0]) {
    snprintf(a, sizeof a, "/tmp/rc_fuzz_trace_a.%ld", (long)getpid());
    snprintf(b, sizeof b, "/tmp/rc_fuzz_trace_b.%ld", (long)getpid());
  }
  const uint8_t *cut = memmem(data, size, "\n--\n", 4);
  size_t na = cut ? (size_t)(cut - data) + 1 : size;
  const uint8_t *second = cut ? cut + 4 : data;
  size_t nb = cut ? size - (size_t)(second - data) : size;
  if (put(a, data, na) || put(b, second, nb)) return 0;
  rc_trace_diff diff;
  memset(&diff, 0, sizeof diff);
  rc_err err = {0};
  rc_trace_compare(a, b, &diff, &err);
  unlink(a);
  unlink(b);
  return 0;
}
