/* shard_verify.c — reading a shard file into memory and verifying it as it
 * is read: rc_read_shard (whole-file SHA-256, for `inspect` and version-1
 * manifests), rc_read_shard_verified (a load: size, then every byte checked
 * by the manifest's chunk hashes on several threads, with the dataset
 * hashes following the chunks) and rc_shard_verify_file (`verify`: the same
 * checks without keeping the bytes).
 *
 * Nothing here parses HDF5: the bytes are vouched for first, and only then
 * handed to libhdf5 (h5_util.c), so a shard that fails here is never
 * opened. */
#include "io/checkpoint_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/fsutil.h"

/* ---- reading a shard: size check, then read and hash at once.
 *
 * A reader thread read(2)s the file into the mapping, a chunk at a time, and
 * publishes how far it got; the calling thread hashes behind it, so the
 * load costs max(read, SHA-256) rather than their sum, and each chunk is
 * hashed shortly after it landed (often still in cache). The whole-file
 * SHA-256 is one serial stream; where the manifest records chunk hashes
 * (version 2) the chunks are hashed instead, each by the next free thread
 * of several, each following the reader through its own chunk. */

enum { READ_CHUNK = 1 << 20 }; /* per read(2); hashed in pieces of up to this */

typedef struct {
  int fd;
  unsigned char *buf;
  size_t want; /* size + 1: one byte more than expected sees growth */
  size_t got;  /* bytes read so far (under mu) */
  bool done;   /* EOF or error (under mu) */
  int err_no;  /* errno of a failed read, 0 otherwise */
  pthread_mutex_t mu;
  pthread_cond_t cv;
} shard_reader;

static void *reader_run(void *arg) {
  shard_reader *r = arg;
  size_t got = 0;
  int e = 0;
  while (got < r->want) {
    size_t n = r->want - got < READ_CHUNK ? r->want - got : READ_CHUNK;
    ssize_t k = read(r->fd, r->buf + got, n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) e = errno;
    if (k <= 0) break;
    got += (size_t)k;
    pthread_mutex_lock(&r->mu);
    r->got = got;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
  }
  pthread_mutex_lock(&r->mu);
  r->got = got;
  r->err_no = e;
  r->done = true;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

int rc_read_shard(const char *path, int64_t expect_size, unsigned char *dst, rc_shard_image *out,
                  char hex[RC_SHA256_HEX], rc_err *err) {
  memset(out, 0, sizeof *out);
  int fd;
  size_t size;
  /* A shard may be a link (to a copy elsewhere), but what it names must be
   * a regular file: a FIFO would block the open, a device never end. */
  int ret = rc_open_regular(path, false, &fd, &size, err);
  if (ret) return ret;
  EVP_MD_CTX *ctx = NULL;
  if (expect_size >= 0 && (int64_t)size != expect_size) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: %s: %zu bytes, the manifest says %" PRId64, path,
                  (int64_t)size < expect_size ? "truncated" : "wrong size (trailing data)", size,
                  expect_size);
    goto done;
  }
  out->data = dst ? dst : rc_map_image(size + 1, &out->cap);
  out->borrowed = dst != NULL;
  ctx = EVP_MD_CTX_new();
  if (!out->data || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "reading %s: out of memory (%zu bytes)", path, size);
    goto done;
  }
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  shard_reader r = {.fd = fd, .buf = out->data, .want = size + 1};
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  pthread_t tid;
  bool threaded = pthread_create(&tid, NULL, reader_run, &r) == 0;
  if (!threaded) reader_run(&r); /* then read first, hash after */
  size_t hashed = 0;
  for (;;) {
    pthread_mutex_lock(&r.mu);
    while (r.got == hashed && !r.done) pthread_cond_wait(&r.cv, &r.mu);
    size_t avail = r.got;
    bool done = r.done;
    pthread_mutex_unlock(&r.mu);
    /* never past `size`: a grown file is refused below, not hashed */
    size_t upto = avail < size ? avail : size;
    if (upto > hashed) EVP_DigestUpdate(ctx, out->data + hashed, upto - hashed);
    hashed = upto > hashed ? upto : hashed;
    if (done && hashed >= (avail < size ? avail : size)) break;
  }
  if (threaded) pthread_join(tid, NULL);
  pthread_cond_destroy(&r.cv);
  pthread_mutex_destroy(&r.mu);
  if (r.err_no) {
    ret = rc_fail(err, RC_EXIT_IOERR, "reading %s: %s", path, strerror(r.err_no));
    goto done;
  }
  if (r.got > size) {
    ret = rc_fail(err, RC_EXIT_IOERR, "%s grew while being read", path);
    goto done;
  }
  if (r.got != size) {
    ret = rc_fail(err, RC_EXIT_IOERR, "%s shrank while being read (%zu of %zu bytes)", path, r.got,
                  size);
    goto done;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!EVP_DigestFinal_ex(ctx, md, &len) || len != 32) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "hashing %s failed", path);
    goto done;
  }
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
  out->size = size;
done:
  EVP_MD_CTX_free(ctx);
  close(fd);
  if (ret) rc_shard_image_free(out);
  return ret;
}

/* Chunk k of the manifest entry against the hash just computed; the
 * message names the byte range, which is what a user can act on (dd it
 * out, compare it with a good copy). */
static int chunk_mismatch(const char *path, const rc_mf_shard *e, int k, const char *hex,
                          rc_err *err) {
  uint64_t a, b;
  rc_mf_chunk_range(e, k, &a, &b);
  return rc_fail(err, RC_EXIT_DATAERR,
                 "%s: corrupt: bytes [%" PRIu64 ", %" PRIu64
                 ") (chunk %d of %d, chunk_bytes %" PRIu64
                 ") have SHA-256 %s, the manifest says %s",
                 path, a, b, k, e->nchunks, e->chunk_bytes, hex, e->chunk_sha256[k]);
}

/* Hash workers for one shard's chunks: each takes the next chunk and
 * hashes it as the reader's bytes arrive (with a reader), or preads it
 * itself (without one). Results by index, so the verdict does not depend
 * on the thread count. */
typedef struct {
  const rc_mf_shard *entry;
  int fd;
  unsigned char *dst; /* read into dst at the file offset; NULL: through a small buffer */
  atomic_int next;
  char (*hex)[RC_SHA256_HEX];
  int *err_no; /* per chunk: errno of a failed pread; -1: short file */
  /* with followers (rc_read_follow): which chunks are in dst, and the gate
   * raised to the prefix of them */
  rc_gate *gate;
  bool *done; /* per chunk, under gate->mu */
  int done_prefix;
} chunk_jobs;

/* Chunk k is in dst (read, whatever its hash): raise the gate over the
 * prefix of chunks that are. */
static void chunk_landed(chunk_jobs *j, int k) {
  if (!j->gate) return;
  pthread_mutex_lock(&j->gate->mu);
  j->done[k] = true;
  while (j->done_prefix < j->entry->nchunks && j->done[j->done_prefix]) j->done_prefix++;
  uint64_t upto = j->entry->bytes, end;
  if (j->done_prefix < j->entry->nchunks) rc_mf_chunk_range(j->entry, j->done_prefix, &upto, &end);
  pthread_mutex_unlock(&j->gate->mu);
  rc_gate_raise(j->gate, upto);
}

/* Bytes [a, b) of the file, a read's worth at a time, each hashed right
 * after it is read, while it is still in cache: into dst at the file
 * offset (a load) or through buf (a verification). */
static bool hash_chunk_pread(chunk_jobs *j, uint64_t a, uint64_t b, EVP_MD_CTX *ctx,
                             unsigned char *buf, int *err_no) {
  for (uint64_t at = a; at < b;) {
    size_t want = b - at < READ_CHUNK ? (size_t)(b - at) : READ_CHUNK;
    unsigned char *to = j->dst ? j->dst + at : buf;
    ssize_t k = pread(j->fd, to, want, (off_t)at);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      *err_no = k < 0 ? errno : -1;
      return false;
    }
    if (!EVP_DigestUpdate(ctx, to, (size_t)k)) return false;
    at += (uint64_t)k;
  }
  return true;
}

static void *chunk_worker(void *arg) {
  chunk_jobs *j = arg;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char *buf = j->dst ? NULL : malloc(READ_CHUNK);
  if (!ctx || (!j->dst && !buf)) {
    fprintf(stderr, "shard verify: out of memory\n");
    abort();
  }
  for (int k; (k = atomic_fetch_add(&j->next, 1)) < j->entry->nchunks;) {
    uint64_t a, b;
    rc_mf_chunk_range(j->entry, k, &a, &b);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    bool ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
              hash_chunk_pread(j, a, b, ctx, buf, &j->err_no[k]) &&
              EVP_DigestFinal_ex(ctx, md, &len) && len == 32;
    if (ok)
      for (int i = 0; i < 32; i++) snprintf(j->hex[k] + 2 * i, 3, "%02x", md[i]);
    else
      j->hex[k][0] = 0; /* not hashed: the read failed (the caller says how) */
    chunk_landed(j, k);
  }
  free(buf);
  EVP_MD_CTX_free(ctx);
  return NULL;
}

/* Runs the chunk workers on `threads` threads, the calling one included. */
static void run_chunk_jobs(chunk_jobs *j, int threads) {
  pthread_t tid[RC_SHA256_MAX_THREADS];
  int started = 0;
  for (int t = 1; t < threads; t++)
    if (!pthread_create(&tid[started], NULL, chunk_worker, j)) started++;
  chunk_worker(j);
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
}

/* The first chunk in file order whose hash differs. Chunks left unhashed
 * (a failed read) are the caller's to report. */
static int first_bad_chunk(const char *path, const rc_mf_shard *e, char (*hex)[RC_SHA256_HEX],
                           rc_err *err) {
  for (int k = 0; k < e->nchunks; k++)
    if (hex[k][0] && strcmp(hex[k], e->chunk_sha256[k]))
      return chunk_mismatch(path, e, k, hex[k], err);
  return RC_OK;
}

/* The chunks of an open file of the manifest's size, each read (into dst
 * at its offset, or through a small buffer) and hashed by the next free of
 * `threads` threads; then the first failed read, a change of size, or the
 * first chunk whose hash differs, in that order. */
typedef struct {
  const rc_read_follow *f;
  rc_piece piece;
  rc_gate *gate;
} follow_job;

static void *follow_run(void *arg) {
  follow_job *fj = arg;
  rc_sha256_ranges_gated(&fj->piece, 1, fj->f->start, fj->f->end, fj->f->count, fj->f->threads,
                         fj->gate, fj->f->hex);
  return NULL;
}

/* rc_read_follow.landed, range by range in file order as the prefix of read
 * chunks passes each range's end. After a failed read the gate is opened
 * all the way: the rest are told too, and the load's failure says they do
 * not count. */
static void *landed_run(void *arg) {
  follow_job *fj = arg;
  for (int k = 0; k < fj->f->count; k++) {
    rc_gate_wait(fj->gate, fj->f->end[k]);
    fj->f->landed(fj->f->landed_ctx, k);
  }
  return NULL;
}

static int verify_chunks(const char *path, int fd, const rc_mf_shard *entry, int threads,
                         unsigned char *dst, const rc_read_follow *follow, rc_err *err) {
  int ret = RC_OK, n = entry->nchunks ? entry->nchunks : 1;
  char(*hex)[RC_SHA256_HEX] = calloc((size_t)n, sizeof *hex);
  int *err_no = calloc((size_t)n, sizeof *err_no);
  bool *done = calloc((size_t)n, sizeof *done);
  if (!hex || !err_no || !done) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "verifying %s: out of memory", path);
    goto done;
  }
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  chunk_jobs j = {.entry = entry, .fd = fd, .dst = dst, .hex = hex, .err_no = err_no};
  atomic_init(&j.next, 0);
  /* Followers hash ranges of dst as the chunks land, beside the chunk
   * hashes (a load's dataset hashes): their results mean something only
   * if every chunk then verifies, which the caller checks. */
  rc_gate gate;
  follow_job fj;
  pthread_t ftid, ltid;
  bool followed = false, told = false;
  if (follow && follow->count > 0 && dst) {
    rc_gate_init(&gate, 0);
    j.gate = &gate;
    j.done = done;
    fj = (follow_job){follow, {dst, (size_t)entry->bytes}, &gate};
    /* no hashes asked for (hex NULL): only the landed ranges are told */
    followed = follow->hex && pthread_create(&ftid, NULL, follow_run, &fj) == 0;
    /* no thread for it: the caller copies everything after the load */
    told = follow->landed && pthread_create(&ltid, NULL, landed_run, &fj) == 0;
    if (!followed && !told) j.gate = NULL, rc_gate_destroy(&gate);
  }
  run_chunk_jobs(&j, rc_sha256_threads(threads, entry->nchunks));
  if (followed || told) { /* a failed read left a hole: let the followers finish anyway */
    rc_gate_raise(&gate, UINT64_MAX);
    if (followed) pthread_join(ftid, NULL);
    if (told) pthread_join(ltid, NULL);
    rc_gate_destroy(&gate);
  }
  if (follow && follow->hex && !followed)
    for (int i = 0; i < follow->count; i++) follow->hex[i][0] = 0; /* not hashed */
  for (int k = 0; k < entry->nchunks && !ret; k++)
    if (err_no[k] || !hex[k][0]) {
      uint64_t a, b;
      rc_mf_chunk_range(entry, k, &a, &b);
      ret = rc_fail(err, RC_EXIT_IOERR, "reading %s, bytes [%" PRIu64 ", %" PRIu64 "): %s", path, a,
                    b, err_no[k] > 0 ? strerror(err_no[k]) : "the file shrank");
    }
  /* A file that grew after the size check: the chunks cover only `bytes`. */
  struct stat st;
  if (!ret && fstat(fd, &st) == 0 && (uint64_t)st.st_size != entry->bytes)
    ret = rc_fail(err, RC_EXIT_IOERR, "%s changed size while being read", path);
  if (!ret) ret = first_bad_chunk(path, entry, hex, err);
done:
  free(done);
  free(err_no);
  free(hex);
  return ret;
}

static int size_mismatch(const char *path, size_t size, uint64_t bytes, rc_err *err) {
  return rc_fail(err, RC_EXIT_DATAERR, "%s: %s: %zu bytes, the manifest says %" PRIu64, path,
                 (uint64_t)size < bytes ? "truncated" : "wrong size (trailing data)", size, bytes);
}

int rc_read_shard_verified(const char *path, const rc_mf_shard *entry, int threads,
                           unsigned char *dst, const rc_read_follow *follow, rc_shard_image *out,
                           rc_err *err) {
  if (follow)
    for (int i = 0; follow->hex && i < follow->count; i++)
      follow->hex[i][0] = 0; /* until hashed below */
  if (!entry->chunk_bytes) { /* version 1: the whole-file hash */
    char hex[RC_SHA256_HEX];
    int ret = rc_read_shard(path, (int64_t)entry->bytes, dst, out, hex, err);
    if (!ret && strcmp(hex, entry->sha256)) {
      ret = rc_fail(err, RC_EXIT_DATAERR, "%s: corrupt: SHA-256 is %s, the manifest says %s", path,
                    hex, entry->sha256);
      rc_shard_image_free(out);
    }
    return ret;
  }
  memset(out, 0, sizeof *out);
  int fd;
  size_t size;
  int ret = rc_open_regular(path, false, &fd, &size, err);
  if (ret) return ret;
  if ((uint64_t)size != entry->bytes) {
    ret = size_mismatch(path, size, entry->bytes, err);
    goto done;
  }
  out->data = dst ? dst : rc_map_image(size + 1, &out->cap);
  out->borrowed = dst != NULL;
  if (!out->data) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "reading %s: out of memory (%zu bytes)", path, size);
    goto done;
  }
  if (!(ret = verify_chunks(path, fd, entry, threads, out->data, dst ? follow : NULL, err)))
    out->size = size;
done:
  close(fd);
  if (ret) rc_shard_image_free(out);
  return ret;
}

/* Without a load there is no need for the file in memory: each thread
 * preads its own chunks through a small buffer (memory: threads x 1 MiB). */
int rc_shard_verify_file(const char *path, const rc_mf_shard *entry, int threads, rc_err *err) {
  int fd;
  size_t size;
  int ret = rc_open_regular(path, false, &fd, &size, err);
  if (ret) return ret;
  if ((uint64_t)size != entry->bytes) {
    ret = size_mismatch(path, size, entry->bytes, err);
  } else if (!entry->chunk_bytes) { /* version 1: one stream, the whole-file hash */
    char whole[RC_SHA256_HEX];
    if (!(ret = rc_sha256_file(path, whole, err)) && strcmp(whole, entry->sha256))
      ret = rc_fail(err, RC_EXIT_DATAERR, "%s: corrupt: SHA-256 is %s, the manifest says %s", path,
                    whole, entry->sha256);
  } else {
    ret = verify_chunks(path, fd, entry, threads, NULL, NULL, err);
  }
  close(fd);
  return ret;
}
