/* error.c — filling in rc_err records (see error.h). */
#include "error.h"

#include <stdio.h>
#include <string.h>

int rc_fail(rc_err *err, int code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
  }
  return code;
}

void rc_err_prefix(rc_err *err, const char *fmt, ...) {
  if (!err) return;
  char prefix[512], old[sizeof err->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, err->msg, sizeof old);
  size_t n = strlen(prefix);
  if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
  memcpy(err->msg, prefix, n);
  memcpy(err->msg + n, ": ", 2);
  size_t room = sizeof err->msg - n - 3;
  size_t m = strnlen(old, room);
  memcpy(err->msg + n + 2, old, m);
  err->msg[n + 2 + m] = 0;
}
