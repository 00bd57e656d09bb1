/* sha256.h — SHA-256 through OpenSSL EVP, as lowercase hex. */
#ifndef RC_IO_SHA256_H
#define RC_IO_SHA256_H

#include <stddef.h>

#include "../base/error.h"

#define RC_SHA256_HEX 65 /* 64 hex digits + NUL */

void rc_sha256_hex(const void *data, size_t n, char hex[RC_SHA256_HEX]);
/* Streams a file; RC_EXIT_NOINPUT / RC_EXIT_IOERR on failure. */
int rc_sha256_file(const char *path, char hex[RC_SHA256_HEX], rc_err *err);

#endif
