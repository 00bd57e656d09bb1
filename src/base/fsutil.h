/* fsutil.h — the few file-system operations everything uses, done safely:
 * atomic writes (temp name, fsync, rename, fsync of the directory), whole
 * file reads, mkdir -p. Errors come back as RC_EXIT_IOERR / RC_EXIT_NOINPUT
 * with the path and strerror in the message. */
#ifndef RC_BASE_FSUTIL_H
#define RC_BASE_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

int rc_mkdir_p(const char *path, rc_err *err);
/* Writes path via path.tmp.<pid>: write all, fsync, rename, fsync parent dir. */
int rc_write_file_atomic(const char *path, const void *data, size_t n, rc_err *err);
/* Reads a whole file into a malloc'd buffer (NUL-terminated for text use). */
int rc_read_file(const char *path, char **data, size_t *n, rc_err *err);
bool rc_path_exists(const char *path);
bool rc_is_dir(const char *path);
/* path = dir + "/" + name; aborts if it does not fit. */
void rc_path_join(char *out, size_t cap, const char *dir, const char *name);

#endif
