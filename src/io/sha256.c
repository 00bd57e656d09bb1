/* sha256.c — SHA-256 through OpenSSL EVP, as lowercase hex (see sha256.h).
 *
 * EVP picks the SHA-NI / AVX2 code paths, which is what makes hashing a whole
 * checkpoint cheap next to writing it. Files are streamed through a large
 * buffer with plain read(2): no stdio buffering in between. */
#include "sha256.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

static void to_hex(const unsigned char *md, char hex[RC_SHA256_HEX]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    hex[2 * i] = digits[md[i] >> 4];
    hex[2 * i + 1] = digits[md[i] & 15];
  }
  hex[64] = 0;
}

void rc_sha256_hex(const void *data, size_t n, char hex[RC_SHA256_HEX]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  /* EVP_Digest only fails on allocation failure inside OpenSSL; there is no
   * meaningful way to continue without a hash. */
  if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) || len != 32) {
    fprintf(stderr, "rc_sha256_hex: OpenSSL EVP_Digest failed\n");
    abort();
  }
  to_hex(md, hex);
}

/* 256 KiB fits in L2: read(2) lands the chunk there and SHA-256 reads it
 * warm (measured a little faster than 4 MiB chunks, and than openssl's 8 KiB). */
enum { READ_CHUNK = 256 << 10 };

int rc_sha256_file(const char *path, char hex[RC_SHA256_HEX], rc_err *err) {
  int fd;
  size_t size;
  int opened = rc_open_regular(path, false, &fd, &size, err); /* a FIFO or device: 65 */
  if (opened) return opened;
  (void)size; /* read to EOF: a file that changes while hashed gets the hash of what was read */
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  int ret = RC_OK;
  unsigned char *buf = malloc(READ_CHUNK);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!buf || !ctx) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "hashing %s: out of memory", path);
    goto done;
  }
  if (!EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "hashing %s: EVP_DigestInit_ex failed", path);
    goto done;
  }
  for (;;) {
    ssize_t got = read(fd, buf, READ_CHUNK);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      ret = rc_fail(err, RC_EXIT_IOERR, "reading %s: %s", path, strerror(errno));
      goto done;
    }
    if (got == 0) break;
    if (!EVP_DigestUpdate(ctx, buf, (size_t)got)) {
      ret = rc_fail(err, RC_EXIT_SOFTWARE, "hashing %s: EVP_DigestUpdate failed", path);
      goto done;
    }
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!EVP_DigestFinal_ex(ctx, md, &len) || len != 32) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "hashing %s: EVP_DigestFinal_ex failed", path);
    goto done;
  }
  to_hex(md, hex);
done:
  EVP_MD_CTX_free(ctx);
  free(buf);
  close(fd);
  return ret;
}

/* ---- parallel hashing ---- */

enum { GATE_SLICE = 8 << 20 }; /* gated range jobs wait for this much at a time */

int rc_sha256_threads(int threads, int jobs) {
  if (threads <= 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    threads = online > 0 ? (int)online : 1;
  }
  if (threads > RC_SHA256_MAX_THREADS) threads = RC_SHA256_MAX_THREADS;
  if (threads > jobs) threads = jobs;
  return threads < 1 ? 1 : threads;
}

typedef struct {
  int count;
  atomic_int next; /* the next job index: a work queue, not a reduction */
  const void *const *data;
  const size_t *n;
  const char *const *paths;
  void *const *dst; /* copy-and-hash jobs: data is the source */
  char (*hex)[RC_SHA256_HEX];
  rc_err *errs; /* per file, files only */
  int *rcs;
  const rc_piece *pieces; /* range jobs: [start[i], end[i]) of these */
  int npieces;
  const uint64_t *poff; /* where each piece starts */
  const uint64_t *start, *end;
  rc_gate *gate; /* range jobs: bytes are hashed once final (NULL: all are) */
} hash_jobs;

/* Bytes [a, b) of the pieces: the first piece found by bisection, then
 * every piece the range overlaps, each fed to the digest in place. */
static void range_hash(const hash_jobs *j, uint64_t a, uint64_t b, char hex[RC_SHA256_HEX]) {
  int lo = 0, hi = j->npieces - 1;
  while (lo < hi) { /* the last piece that starts at or before a */
    int mid = (lo + hi + 1) / 2;
    if (j->poff[mid] <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  for (int p = lo; ok && p < j->npieces && j->poff[p] < b; p++) {
    uint64_t s = a > j->poff[p] ? a : j->poff[p];
    uint64_t e = j->poff[p] + j->pieces[p].n < b ? j->poff[p] + j->pieces[p].n : b;
    /* in slices, each once the gate has passed it: a save hashes behind its copy */
    for (uint64_t at = s; ok && at < e;) {
      uint64_t to = e - at < GATE_SLICE ? e : at + GATE_SLICE;
      rc_gate_wait(j->gate, to);
      ok = EVP_DigestUpdate(ctx, (const char *)j->pieces[p].p + (at - j->poff[p]), to - at);
      at = to;
    }
  }
  ok = ok && EVP_DigestFinal_ex(ctx, md, &len) && len == 32;
  EVP_MD_CTX_free(ctx);
  if (!ok) { /* as rc_sha256_hex: OpenSSL only fails here when out of memory */
    fprintf(stderr, "rc_sha256_ranges: OpenSSL SHA-256 failed\n");
    abort();
  }
  to_hex(md, hex);
}

/* One buffer copied and hashed chunk by chunk: each chunk is hashed from
 * the destination right after the copy, while it is still in cache. */
static void copy_and_hash(void *dst, const void *src, size_t n, char hex[RC_SHA256_HEX]) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  for (size_t o = 0; ok && o < n; o += READ_CHUNK) {
    size_t k = n - o < READ_CHUNK ? n - o : READ_CHUNK;
    memcpy((char *)dst + o, (const char *)src + o, k);
    ok = EVP_DigestUpdate(ctx, (const char *)dst + o, k);
  }
  ok = ok && EVP_DigestFinal_ex(ctx, md, &len) && len == 32;
  EVP_MD_CTX_free(ctx);
  if (!ok) { /* as rc_sha256_hex: OpenSSL only fails here when out of memory */
    fprintf(stderr, "rc_sha256_copy_many: OpenSSL SHA-256 failed\n");
    abort();
  }
  to_hex(md, hex);
}

static void *hash_worker(void *arg) {
  hash_jobs *j = arg;
  for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->count;) {
    if (j->paths)
      j->rcs[i] = rc_sha256_file(j->paths[i], j->hex[i], &j->errs[i]);
    else if (j->pieces)
      range_hash(j, j->start[i], j->end[i], j->hex[i]);
    else if (j->dst && j->dst[i])
      copy_and_hash(j->dst[i], j->data[i], j->n[i], j->hex[i]);
    else
      rc_sha256_hex(j->data[i], j->n[i], j->hex[i]);
  }
  return NULL;
}

/* Runs the jobs on `threads` threads, this one included; a thread that
 * cannot be created leaves its share to the others. */
static void run_jobs(hash_jobs *j, int threads) {
  pthread_t tid[RC_SHA256_MAX_THREADS];
  int started = 0;
  for (int t = 1; t < threads; t++)
    if (!pthread_create(&tid[started], NULL, hash_worker, j)) started++;
  hash_worker(j);
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
}

void rc_sha256_many(const void *const *data, const size_t *n, int count, int threads,
                    char (*hex)[RC_SHA256_HEX]) {
  if (count <= 0) return;
  hash_jobs j = {.count = count, .data = data, .n = n, .hex = hex};
  atomic_init(&j.next, 0);
  run_jobs(&j, rc_sha256_threads(threads, count));
}

void rc_sha256_copy_many(void *const *dst, const void *const *src, const size_t *n, int count,
                         int threads, char (*hex)[RC_SHA256_HEX]) {
  if (count <= 0) return;
  hash_jobs j = {.count = count, .data = src, .n = n, .dst = dst, .hex = hex};
  atomic_init(&j.next, 0);
  run_jobs(&j, rc_sha256_threads(threads, count));
}

int rc_sha256_files(const char *const *paths, int count, int threads, char (*hex)[RC_SHA256_HEX],
                    rc_err *err) {
  if (count <= 0) return RC_OK;
  rc_err *errs = calloc((size_t)count, sizeof *errs);
  int *rcs = calloc((size_t)count, sizeof *rcs);
  if (!errs || !rcs) {
    free(errs), free(rcs);
    return rc_fail(err, RC_EXIT_SOFTWARE, "hashing %d files: out of memory", count);
  }
  hash_jobs j = {.count = count, .paths = paths, .hex = hex, .errs = errs, .rcs = rcs};
  atomic_init(&j.next, 0);
  run_jobs(&j, rc_sha256_threads(threads, count));
  int ret = RC_OK;
  for (int i = 0; i < count && !ret; i++)
    if (rcs[i]) {
      ret = rcs[i];
      if (err) *err = errs[i];
    }
  free(errs), free(rcs);
  return ret;
}

void rc_sha256_ranges(const rc_piece *pieces, int npieces, const uint64_t *start,
                      const uint64_t *end, int count, int threads, char (*hex)[RC_SHA256_HEX]) {
  rc_sha256_ranges_gated(pieces, npieces, start, end, count, threads, NULL, hex);
}

void rc_sha256_ranges_gated(const rc_piece *pieces, int npieces, const uint64_t *start,
                            const uint64_t *end, int count, int threads, rc_gate *gate,
                            char (*hex)[RC_SHA256_HEX]) {
  if (count <= 0) return;
  uint64_t *poff = malloc(sizeof *poff * (size_t)(npieces > 0 ? npieces : 1));
  if (!poff) {
    fprintf(stderr, "rc_sha256_ranges: out of memory\n");
    abort();
  }
  uint64_t o = 0;
  for (int p = 0; p < npieces; p++) poff[p] = o, o += pieces[p].n;
  hash_jobs j = {.count = count,
                 .hex = hex,
                 .pieces = pieces,
                 .npieces = npieces,
                 .poff = poff,
                 .start = start,
                 .end = end,
                 .gate = gate};
  atomic_init(&j.next, 0);
  run_jobs(&j, rc_sha256_threads(threads, count));
  free(poff);
}
