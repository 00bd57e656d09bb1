/* sha256.h — SHA-256 through OpenSSL EVP, as lowercase hex. */
#ifndef RC_IO_SHA256_H
#define RC_IO_SHA256_H

#include <stddef.h>

#include <stdint.h>

#include "../base/error.h"
#include "../base/fsutil.h"

#define RC_SHA256_HEX 65 /* 64 hex digits + NUL */

void rc_sha256_hex(const void *data, size_t n, char hex[RC_SHA256_HEX]);
/* Streams a regular file (anything else: RC_EXIT_DATAERR, never opened
 * blocking); RC_EXIT_NOINPUT / RC_EXIT_IOERR on failure. */
int rc_sha256_file(const char *path, char hex[RC_SHA256_HEX], rc_err *err);

/* Parallel forms: one EVP context per worker thread, jobs taken in index
 * order, each result written to its own slot (the hashes do not depend on the
 * thread count). threads <= 0 picks the online CPUs, capped at
 * RC_SHA256_MAX_THREADS; never more threads than jobs. */
#define RC_SHA256_MAX_THREADS 16
int rc_sha256_threads(int threads, int jobs);
void rc_sha256_many(const void *const *data, const size_t *n, int count, int threads,
                    char (*hex)[RC_SHA256_HEX]);
/* Streams count files at once. Returns the first failure in index order
 * (every file is still attempted); err names that file. */
int rc_sha256_files(const char *const *paths, int count, int threads, char (*hex)[RC_SHA256_HEX],
                    rc_err *err);

/* Copies each src[i] to dst[i] (n[i] bytes) and hashes the bytes as they
 * are copied, a cache-sized chunk at a time: one pass over memory for both,
 * jobs spread over threads as in rc_sha256_many. A load uses it to move
 * datasets out of the verified file image and check their hashes. A NULL
 * dst[i] hashes src[i] where it is (a dataset the caller reads in place). */
void rc_sha256_copy_many(void *const *dst, const void *const *src, const size_t *n, int count,
                         int threads, char (*hex)[RC_SHA256_HEX]);

/* Hashes slices of one byte sequence given as pieces (a shard image: its
 * metadata and the tensor buffers, fsutil.h): job i is bytes
 * [start[i], end[i]) of the concatenation of pieces[0..npieces), each
 * inside it. A save uses it for the manifest's chunk hashes, straight from
 * the pieces, with no copy. Threads as in rc_sha256_many. */
void rc_sha256_ranges(const rc_piece *pieces, int npieces, const uint64_t *start,
                      const uint64_t *end, int count, int threads, char (*hex)[RC_SHA256_HEX]);
/* The same while the bytes still arrive: a job hashes each stretch once
 * `gate` (offsets into the concatenation) has passed it. Jobs are taken in
 * index order, so jobs sorted by start follow the arrival. */
void rc_sha256_ranges_gated(const rc_piece *pieces, int npieces, const uint64_t *start,
                            const uint64_t *end, int count, int threads, rc_gate *gate,
                            char (*hex)[RC_SHA256_HEX]);

#endif
