/* check.h — the assertion the C tests share: CHECK(cond, printf-args...)
 * reports the file, line and message on stderr and counts the failure in
 * `failures`, so a test runs every check and exits non-zero at the end. */
#ifndef RC_TESTS_CHECK_H
#define RC_TESTS_CHECK_H

#include <stdio.h>

static int failures = 0;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#endif
