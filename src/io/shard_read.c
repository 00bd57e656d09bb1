/* shard_read.c — HDF5 helpers for reading shards: quiet error handling with
 * HDF5's reason in our messages, dtype mapping, opening a file image from
 * memory without a copy, reading /meta and listing datasets.
 *
 * Shards are only ever opened from memory, after their bytes have been
 * hashed: libhdf5 never parses a byte the manifest has not vouched for, and
 * what is parsed is exactly what was hashed (no second read from disk).
 * A hash stops corruption, not forgery, so the metadata's structure is
 * checked before libhdf5 sees it (check_shard_structure). */
#include "io/checkpoint_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
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
#include "io/checkpoint.h"

/* Shards are written as little-endian on disk and read into native memory
 * with a plain memcpy-like H5Dread; the per-dataset SHA-256 in the manifest
 * is of these little-endian bytes. Big-endian hosts would need a swap. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "resumecheck's checkpoint layer assumes a little-endian host"
#endif

void rc_h5_quiet_begin(rc_h5_quiet *q) {
  q->fn = NULL;
  q->data = NULL;
  H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void rc_h5_quiet_end(const rc_h5_quiet *q) {
  H5Eset_auto2(H5E_DEFAULT, q->fn, q->data);
}

typedef struct {
  char innermost[256];
  int seen;
} h5_walk;

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
  h5_walk *w = data;
  (void)n;
  if (w->seen++ == 0 && e->desc) snprintf(w->innermost, sizeof w->innermost, "%s", e->desc);
  return 0;
}

int rc_h5_fail(rc_err *err, int code, const char *fmt, ...) {
  char what[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  h5_walk w = {{0}, 0};
  /* Upward: the first record is where the error was detected, which is the
   * most specific reason HDF5 has. */
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);
  H5Eclear2(H5E_DEFAULT);
  if (w.innermost[0]) return rc_fail(err, code, "%s (HDF5: %s)", what, w.innermost);
  return rc_fail(err, code, "%s", what);
}

hid_t rc_h5_file_type(rc_dtype dt) {
  switch (dt) {
  case RC_DT_F32:
    return H5T_IEEE_F32LE;
  case RC_DT_F64:
    return H5T_IEEE_F64LE;
  case RC_DT_I64:
    return H5T_STD_I64LE;
  case RC_DT_U64:
    return H5T_STD_U64LE;
  case RC_DT_I32:
    return H5T_STD_I32LE;
  case RC_DT_I8:
    return H5T_STD_I8LE;
  }
  return H5I_INVALID_HID;
}

hid_t rc_h5_mem_type(rc_dtype dt) {
  switch (dt) {
  case RC_DT_F32:
    return H5T_NATIVE_FLOAT;
  case RC_DT_F64:
    return H5T_NATIVE_DOUBLE;
  case RC_DT_I64:
    return H5T_NATIVE_INT64;
  case RC_DT_U64:
    return H5T_NATIVE_UINT64;
  case RC_DT_I32:
    return H5T_NATIVE_INT32;
  case RC_DT_I8:
    return H5T_NATIVE_INT8;
  }
  return H5I_INVALID_HID;
}

/* An IEEE binary32 or binary64 layout (what float32/float64 name): a
 * float of another layout prints its size instead, so two types that print
 * alike are alike. */
static bool is_ieee_float(hid_t type, size_t size) {
  size_t spos, epos, esize, mpos, msize;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  if (size == 4) return spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23;
  if (size == 8) return spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52;
  return false;
}

void rc_h5_type_name(hid_t type, char *buf, size_t cap) {
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  const char *be = "";
  if ((cls == H5T_INTEGER || cls == H5T_FLOAT) && H5Tget_order(type) == H5T_ORDER_BE) be = "be";
  switch (cls) {
  case H5T_FLOAT:
    if (size == 2 || is_ieee_float(type, size))
      snprintf(buf, cap, "float%zu%s", 8 * size, be);
    else
      snprintf(buf, cap, "float(%zu bytes)%s", size, be);
    return;
  case H5T_INTEGER:
    snprintf(buf, cap, "%sint%zu%s", H5Tget_sign(type) == H5T_SGN_2 ? "" : "u", 8 * size, be);
    return;
  case H5T_STRING:
    if (H5Tis_variable_str(type) > 0)
      snprintf(buf, cap, "string(variable)");
    else
      snprintf(buf, cap, "string(%zu)", size);
    return;
  case H5T_BITFIELD:
    snprintf(buf, cap, "bitfield(%zu bytes)", size);
    return;
  case H5T_OPAQUE:
    snprintf(buf, cap, "opaque(%zu bytes)", size);
    return;
  case H5T_COMPOUND:
    snprintf(buf, cap, "compound(%zu bytes)", size);
    return;
  case H5T_ENUM:
    snprintf(buf, cap, "enum(%zu bytes)", size);
    return;
  case H5T_ARRAY:
    snprintf(buf, cap, "array(%zu bytes)", size);
    return;
  case H5T_VLEN:
    snprintf(buf, cap, "vlen");
    return;
  case H5T_REFERENCE:
    snprintf(buf, cap, "reference");
    return;
  case H5T_TIME:
    snprintf(buf, cap, "time");
    return;
  default:
    snprintf(buf, cap, "unknown type");
    return;
  }
}

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
  pthread_t ftid;
  bool followed = false;
  if (follow && follow->count > 0 && dst) {
    rc_gate_init(&gate, 0);
    j.gate = &gate;
    j.done = done;
    fj = (follow_job){follow, {dst, (size_t)entry->bytes}, &gate};
    followed = pthread_create(&ftid, NULL, follow_run, &fj) == 0;
    if (!followed) j.gate = NULL, rc_gate_destroy(&gate);
  }
  run_chunk_jobs(&j, rc_sha256_threads(threads, entry->nchunks));
  if (followed) { /* a failed read left a hole: let the followers finish anyway */
    rc_gate_raise(&gate, UINT64_MAX);
    pthread_join(ftid, NULL);
    rc_gate_destroy(&gate);
  } else if (follow) {
    for (int i = 0; i < follow->count; i++) follow->hex[i][0] = 0; /* not hashed */
  }
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
    for (int i = 0; i < follow->count; i++) follow->hex[i][0] = 0; /* until hashed below */
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

/* ---- zero-copy file images.
 * H5Pset_file_image normally copies the buffer into the property list, again
 * into the driver, for each copy of the list. These callbacks hand HDF5 our
 * buffer instead and make every "copy" a no-op, as H5LTopen_file_image does
 * with H5LT_FILE_IMAGE_DONT_COPY. Safe because the file is opened read-only:
 * the core driver never writes to, resizes or frees the buffer. */

static void *img_malloc(size_t size, H5FD_file_image_op_t op, void *udata) {
  rc_h5_image_ref *ref = udata;
  (void)op;
  return size == ref->size ? (void *)ref->buf : NULL;
}

static void *img_memcpy(void *dst, const void *src, size_t size, H5FD_file_image_op_t op,
                        void *udata) {
  (void)op;
  (void)udata;
  if (dst != src) memcpy(dst, src, size);
  return dst;
}

static void *img_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata) {
  (void)ptr, (void)size, (void)op, (void)udata;
  return NULL; /* a read-only image never grows */
}

static herr_t img_free(void *ptr, H5FD_file_image_op_t op, void *udata) {
  (void)ptr, (void)op, (void)udata;
  return 0; /* the caller owns the buffer */
}

static void *udata_copy(void *udata) {
  return udata;
}

static herr_t udata_free(void *udata) {
  (void)udata;
  return 0;
}

/* ---- the structure check before libhdf5 parses a shard.
 *
 * Shards are superblock version 0 with version 1 object headers and
 * symbol-table groups (libver EARLIEST..V18, shard_write.c): metadata without
 * checksums, whose length fields libhdf5 1.10 believes. Its metadata cache
 * mallocs the length an object header continuation message or a local heap
 * states before it reads a byte, and only the read is bounded by the
 * end-of-allocation address, so a forged length makes it allocate gigabytes
 * (robust_fuzz: malloc(4295491589) and a 2^64-scale request in H5C_protect).
 * The SHA-256 check stops corruption, not forgery (docs/robustness.md), so
 * before H5Fopen the loader checks the superblock, then walks every object
 * header, group B-tree node, symbol table node and local heap that libhdf5
 * can reach from the root group and refuses the image unless each lies
 * inside it. The walk admits only what resumecheck writes (these message
 * types, contiguous layouts, integer, float and fixed-string types, hard
 * links), so libhdf5 never meets a structure the walk has not bounded; and
 * the walk is bounded itself: its work by the image size, its depth by
 * RC_PATH_MAX. `resumecheck inspect` reads other writers' files and skips it. */

#define ADDR_UNDEF UINT64_MAX /* an undefined address: all bits set */

enum {
  SB_SIZE = 96,                      /* superblock v0 with 8-byte offsets and lengths */
  SB_ROOT_ENTRY = 56,                /* where its root group's symbol table entry starts */
  ENTRY_SIZE = 40,                   /* a symbol table entry */
  OH_PREFIX = 16,                    /* a version 1 object header's prefix, padded to 8 */
  BTREE_MAX_LEVEL = 16,              /* recursion cap; a group's B-tree is a few levels deep */
  GROUP_MAX_DEPTH = RC_PATH_MAX / 2, /* "/a/b/...": 2 characters a level */
  HEAP_FREE_NULL = 1,                /* the end of a local heap's free list */
};

/* The object header messages a shard has. */
enum {
  MSG_NULL = 0x0000,
  MSG_DATASPACE = 0x0001,
  MSG_DATATYPE = 0x0003,
  MSG_FILL = 0x0005,
  MSG_LAYOUT = 0x0008,
  MSG_ATTRIBUTE = 0x000C,
  MSG_CONTINUATION = 0x0010,
  MSG_SYMBOL_TABLE = 0x0011,
};

typedef struct {
  const unsigned char *p;
  uint64_t size;   /* of the image, and so its end-of-file address */
  unsigned leaf_k; /* a symbol table node holds up to 2 * leaf_k links */
  unsigned node_k; /* a group B-tree node holds up to 2 * node_k children */
  uint64_t budget; /* structures and entries the walk may still visit */
  int code;        /* RC_EXIT_DATAERR, or RC_EXIT_SOFTWARE when out of memory */
  char why[256];
} shard_walk;

typedef struct {
  uint64_t data, size; /* a local heap's data segment: a group's link names */
} heap_ref;

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* [addr, addr + len) lies inside the image; no sum that could overflow */
static bool inside(const shard_walk *w, uint64_t addr, uint64_t len) {
  return addr <= w->size && len <= w->size - addr;
}

static bool bad(shard_walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool bad(shard_walk *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->why, sizeof w->why, fmt, ap);
  va_end(ap);
  return false;
}

/* One unit of work: a structure or one of its entries. Each takes at least
 * 8 bytes of a file whose structures are not shared (resumecheck shares none),
 * so running out means the metadata loops back on itself. */
static bool spend(shard_walk *w) {
  if (w->budget == 0)
    return bad(w, "more metadata than %" PRIu64 " bytes can hold (it loops)", w->size);
  w->budget--;
  return true;
}

static uint64_t btree_node_size(const shard_walk *w) {
  /* header 24, then 2K child addresses and 2K + 1 keys (heap offsets) */
  return 24 + 16 * (uint64_t)w->node_k + 8 * (2 * (uint64_t)w->node_k + 1);
}

static uint64_t symbol_node_size(const shard_walk *w) {
  return 8 + 2 * (uint64_t)w->leaf_k * ENTRY_SIZE;
}

/* The superblock as shard_write.c's libver bounds make it: version 0 (and
 * version 0 of the free-space, root entry and shared header formats), 8-byte
 * offsets and lengths, base address 0, no free-space or driver info block,
 * and an end-of-file address equal to the image's size: libhdf5 bounds its
 * reads by that address, so it must not claim bytes that are not there. */
static bool check_superblock(shard_walk *w) {
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  const unsigned char *p = w->p;
  if (w->size < SB_SIZE || memcmp(p, sig, sizeof sig))
    return bad(w, "superblock: no HDF5 signature at offset 0");
  if (p[8] != 0) return bad(w, "superblock: version %u, a shard's is 0", p[8]);
  if (p[9] || p[10] || p[12])
    return bad(w, "superblock: free-space, root entry or shared header format version is not 0");
  if (p[13] != 8 || p[14] != 8)
    return bad(w, "superblock: %u-byte offsets and %u-byte lengths, a shard's are 8 and 8", p[13],
               p[14]);
  w->leaf_k = (unsigned)le(p + 16, 2);
  w->node_k = (unsigned)le(p + 18, 2);
  if (w->leaf_k == 0 || w->node_k == 0 || symbol_node_size(w) > w->size ||
      btree_node_size(w) > w->size)
    return bad(w, "superblock: group node sizes (K %u and %u) do not fit in the file", w->leaf_k,
               w->node_k);
  if (le(p + 24, 8) != 0) return bad(w, "superblock: base address is not 0");
  if (le(p + 32, 8) != ADDR_UNDEF || le(p + 48, 8) != ADDR_UNDEF)
    return bad(w, "superblock: has a free-space or driver info block address");
  uint64_t eof = le(p + 40, 8);
  if (eof != w->size)
    return bad(w, "superblock: end-of-file address %" PRIu64 ", the file has %" PRIu64 " bytes",
               eof, w->size);
  return true;
}

/* A symbol table entry: a hard link, with nothing cached (0) or its group's
 * B-tree and heap addresses (1); soft links (2) are not shard content. */
static bool check_entry(shard_walk *w, const unsigned char *e, uint64_t *object) {
  uint64_t at = (uint64_t)(e - w->p), cache = le(e + 16, 4);
  if (cache > 1)
    return bad(w, "symbol table entry at %" PRIu64 ": cache type %" PRIu64 " (not a hard link)", at,
               cache);
  if (cache == 1 && (!inside(w, le(e + 24, 8), 1) || !inside(w, le(e + 32, 8), 1)))
    return bad(w, "symbol table entry at %" PRIu64 ": cached addresses outside the file", at);
  *object = le(e + 8, 8);
  return true;
}

/* A link name: a NUL-terminated string inside the group's heap, no longer
 * than a path may be (which also bounds the scan). */
static bool check_name(shard_walk *w, const heap_ref *h, uint64_t off) {
  if (off < h->size) {
    uint64_t n = h->size - off < RC_PATH_MAX ? h->size - off : RC_PATH_MAX;
    if (memchr(w->p + h->data + off, 0, (size_t)n)) return true;
  }
  return bad(w, "local heap data at %" PRIu64 ": no link name at offset %" PRIu64, h->data, off);
}

static bool check_object_header(shard_walk *w, uint64_t addr, int depth);

static bool check_symbol_node(shard_walk *w, uint64_t addr, const heap_ref *h, int depth) {
  if (!spend(w)) return false;
  if (!inside(w, addr, symbol_node_size(w)))
    return bad(w, "symbol table node at %" PRIu64 " runs past the end of the file", addr);
  const unsigned char *p = w->p + addr;
  unsigned n = (unsigned)le(p + 6, 2);
  if (memcmp(p, "SNOD", 4) || p[4] != 1)
    return bad(w, "no version 1 symbol table node at %" PRIu64, addr);
  if (n > 2 * w->leaf_k)
    return bad(w, "symbol table node at %" PRIu64 ": %u links, at most %u fit", addr, n,
               2 * w->leaf_k);
  for (unsigned i = 0; i < n; i++) {
    const unsigned char *e = p + 8 + i * ENTRY_SIZE;
    uint64_t object;
    if (!spend(w) || !check_name(w, h, le(e, 8)) || !check_entry(w, e, &object) ||
        !check_object_header(w, object, depth + 1))
      return false;
  }
  return true;
}

/* A group B-tree node (version 1, type 0): keys are link names in the
 * group's heap; children are nodes one level down, or symbol table nodes at
 * level 0. want_level < 0: the root, any level. */
static bool check_btree_node(shard_walk *w, uint64_t addr, int want_level, const heap_ref *h,
                             int depth) {
  if (!spend(w)) return false;
  uint64_t size = btree_node_size(w);
  if (!inside(w, addr, size))
    return bad(w, "group B-tree node at %" PRIu64 " runs past the end of the file", addr);
  const unsigned char *p = w->p + addr;
  unsigned level = p[5], n = (unsigned)le(p + 6, 2);
  if (memcmp(p, "TREE", 4) || p[4] != 0) return bad(w, "no group B-tree node at %" PRIu64, addr);
  if (level > BTREE_MAX_LEVEL || (want_level >= 0 && level != (unsigned)want_level))
    return bad(w, "group B-tree node at %" PRIu64 ": level %u out of place", addr, level);
  if (n > 2 * w->node_k)
    return bad(w, "group B-tree node at %" PRIu64 ": %u children, at most %u fit", addr, n,
               2 * w->node_k);
  for (int s = 8; s <= 16; s += 8) {
    uint64_t sibling = le(p + s, 8);
    if (sibling != ADDR_UNDEF && !inside(w, sibling, size))
      return bad(w, "group B-tree node at %" PRIu64 ": sibling outside the file", addr);
  }
  for (unsigned i = 0; i <= n; i++)
    if (!check_name(w, h, le(p + 24 + 16 * i, 8))) return false;
  for (unsigned i = 0; i < n; i++) {
    uint64_t child = le(p + 32 + 16 * i, 8);
    bool ok = level > 0 ? check_btree_node(w, child, (int)level - 1, h, depth)
                        : check_symbol_node(w, child, h, depth);
    if (!ok) return false;
  }
  return true;
}

/* A local heap (version 0): its data segment inside the file, and a free
 * list of (next offset, size) blocks inside the data that ends. */
static bool check_local_heap(shard_walk *w, uint64_t addr, heap_ref *h) {
  if (!spend(w)) return false;
  if (!inside(w, addr, 32) || memcmp(w->p + addr, "HEAP", 4) || w->p[addr + 4] != 0)
    return bad(w, "no version 0 local heap at %" PRIu64, addr);
  const unsigned char *p = w->p + addr;
  h->size = le(p + 8, 8);
  h->data = le(p + 24, 8);
  if (!inside(w, h->data, h->size))
    return bad(w,
               "local heap at %" PRIu64 ": %" PRIu64 " bytes of data at %" PRIu64
               " run past the end of the file",
               addr, h->size, h->data);
  for (uint64_t off = le(p + 16, 8); off != HEAP_FREE_NULL;) {
    if (!spend(w)) return false;
    if (off >= h->size || h->size - off < 16 || le(w->p + h->data + off + 8, 8) > h->size - off)
      return bad(w, "local heap at %" PRIu64 ": free block at offset %" PRIu64 " outside its data",
                 addr, off);
    off = le(w->p + h->data + off, 8);
  }
  return true;
}

/* Dataspace version 1: rank <= 32, dimensions (and maximum dimensions)
 * inside the message; *points = their product. */
static bool check_dataspace(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len,
                            uint64_t *points) {
  if (len < 8 || b[0] != 1)
    return bad(w, "object header at %" PRIu64 ": dataspace is not version 1", oh);
  unsigned rank = b[1], flags = b[2];
  if (rank > 32 || (flags & ~1u))
    return bad(w, "object header at %" PRIu64 ": dataspace of rank %u, flags 0x%x", oh, rank,
               flags);
  if (8 + 8 * (uint64_t)rank * (flags & 1 ? 2 : 1) > len)
    return bad(w, "object header at %" PRIu64 ": dataspace cut off", oh);
  uint64_t n = 1;
  for (unsigned r = 0; r < rank; r++) {
    uint64_t d = le(b + 8 + 8 * r, 8);
    if (d != 0 && n > UINT64_MAX / d)
      return bad(w, "object header at %" PRIu64 ": dataspace of more than 2^64 elements", oh);
    n *= d;
  }
  *points = n;
  return true;
}

/* Datatype: integer, float or fixed-length string (class 0, 1, 3), the only
 * ones in a shard; their properties are fixed-size. */
static bool check_datatype(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len,
                           uint64_t *size) {
  if (len < 8) return bad(w, "object header at %" PRIu64 ": datatype cut off", oh);
  unsigned cls = b[0] & 0x0f;
  if (cls != 0 && cls != 1 && cls != 3)
    return bad(w,
               "object header at %" PRIu64 ": datatype class %u is not an integer, float or string",
               oh, cls);
  *size = le(b + 4, 4);
  if (*size == 0 || 8 + (cls == 0 ? 4 : cls == 1 ? 12 : 0) > len)
    return bad(w, "object header at %" PRIu64 ": datatype cut off or of size 0", oh);
  return true;
}

/* Attribute version 1: name, datatype and dataspace padded to 8 bytes, then
 * the value, which must fit in what is left of the message. */
static bool check_attribute(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len) {
  if (len < 8 || b[0] != 1)
    return bad(w, "object header at %" PRIu64 ": attribute message is not version 1", oh);
  uint64_t name_len = le(b + 2, 2), type_len = le(b + 4, 2), space_len = le(b + 6, 2);
  uint64_t type_at = 8 + (name_len + 7) / 8 * 8, space_at = type_at + (type_len + 7) / 8 * 8;
  uint64_t value_at = space_at + (space_len + 7) / 8 * 8, type_size, points;
  if (value_at > len) return bad(w, "object header at %" PRIu64 ": attribute cut off", oh);
  if (name_len == 0 || b[8 + name_len - 1] != 0)
    return bad(w, "object header at %" PRIu64 ": attribute name is not a string", oh);
  if (!check_datatype(w, oh, b + type_at, type_len, &type_size) ||
      !check_dataspace(w, oh, b + space_at, space_len, &points))
    return false;
  if (points > (len - value_at) / type_size)
    return bad(w, "object header at %" PRIu64 ": attribute value larger than its message", oh);
  return true;
}

/* Fill value (new) message, versions 1-3: a defined value must fit in the
 * message (libhdf5 mallocs and copies the size it states). */
static bool check_fill(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len) {
  uint64_t at, size;
  if (len >= 4 && (b[0] == 1 || b[0] == 2)) {
    if (!b[3]) return true; /* no value defined */
    at = 8;
    size = len >= at ? le(b + 4, 4) : 0;
    if (size >= 0x80000000u) size = 0; /* negative: "no value" */
  } else if (len >= 2 && b[0] == 3) {
    if (!(b[1] & 0x20)) return true; /* no value stored */
    at = 6;
    size = len >= at ? le(b + 2, 4) : 0;
  } else {
    return bad(w, "object header at %" PRIu64 ": fill value message is not version 1, 2 or 3", oh);
  }
  if (len < at || size > len - at)
    return bad(w, "object header at %" PRIu64 ": fill value larger than its message", oh);
  return true;
}

/* Layout version 3, contiguous: the data inside the file (or not allocated). */
static bool check_layout(shard_walk *w, uint64_t oh, const unsigned char *b, uint64_t len) {
  if (len < 18 || b[0] != 3 || b[1] != 1)
    return bad(w, "object header at %" PRIu64 ": layout is not a version 3 contiguous one", oh);
  uint64_t addr = le(b + 2, 8), size = le(b + 10, 8);
  if (addr != ADDR_UNDEF && !inside(w, addr, size))
    return bad(w,
               "object header at %" PRIu64 ": %" PRIu64 " bytes of data at %" PRIu64
               " run past the end of the file",
               oh, size, addr);
  return true;
}

static bool check_message(shard_walk *w, uint64_t oh, unsigned type, const unsigned char *b,
                          uint64_t len, int depth) {
  uint64_t unused;
  heap_ref h;
  switch (type) {
  case MSG_NULL:
    return true;
  case MSG_DATASPACE:
    return check_dataspace(w, oh, b, len, &unused);
  case MSG_DATATYPE:
    return check_datatype(w, oh, b, len, &unused);
  case MSG_FILL:
    return check_fill(w, oh, b, len);
  case MSG_LAYOUT:
    return check_layout(w, oh, b, len);
  case MSG_ATTRIBUTE:
    return check_attribute(w, oh, b, len);
  case MSG_SYMBOL_TABLE:
    if (len < 16) return bad(w, "object header at %" PRIu64 ": symbol table message cut off", oh);
    return check_local_heap(w, le(b + 8, 8), &h) && check_btree_node(w, le(b, 8), -1, &h, depth);
  default:
    return bad(w, "object header at %" PRIu64 ": message type 0x%04x is not one a shard has", oh,
               type);
  }
}

/* Object header version 1: chunk 0 after the prefix, then each chunk a
 * continuation message names, every one inside the file and made of whole
 * messages, no more of them than the prefix counts. */
static bool check_object_header(shard_walk *w, uint64_t addr, int depth) {
  if (!spend(w)) return false;
  if (depth > GROUP_MAX_DEPTH) return bad(w, "groups nested more than %d deep", GROUP_MAX_DEPTH);
  if (!inside(w, addr, OH_PREFIX))
    return bad(w, "object header at %" PRIu64 " lies outside the file", addr);
  const unsigned char *p = w->p + addr;
  if (p[0] != 1) return bad(w, "object header at %" PRIu64 ": version %u, not 1", addr, p[0]);
  uint64_t nmesgs = le(p + 2, 2), seen = 0;
  typedef struct {
    uint64_t addr, len;
  } chunk;
  chunk first = {addr + OH_PREFIX, le(p + 8, 4)}, *chunks = &first;
  size_t nchunks = 1, cap = 1;
  bool ok = true;
  for (size_t c = 0; ok && c < nchunks; c++) {
    uint64_t at = chunks[c].addr, len = chunks[c].len;
    if (!inside(w, at, len)) {
      ok = bad(w,
               "object header at %" PRIu64 ": chunk of %" PRIu64 " bytes at %" PRIu64
               " runs past the end of the file",
               addr, len, at);
      break;
    }
    if (len == 0) {
      ok = bad(w, "object header at %" PRIu64 ": empty chunk at %" PRIu64, addr, at);
      break;
    }
    for (uint64_t end = at + len; ok && at < end;) {
      const unsigned char *m = w->p + at;
      if (end - at < 8 || le(m + 2, 2) > end - at - 8) {
        ok = bad(w, "object header at %" PRIu64 ": message at %" PRIu64 " cut off", addr, at);
        break;
      }
      uint64_t size = le(m + 2, 2);
      unsigned type = (unsigned)le(m, 2);
      if (++seen > nmesgs) {
        ok = bad(w, "object header at %" PRIu64 ": more messages than its %" PRIu64, addr, nmesgs);
      } else if (m[4] & 0x02) {
        ok = bad(w, "object header at %" PRIu64 ": shared message (type 0x%04x)", addr, type);
      } else if (type == MSG_CONTINUATION) {
        if (size < 16) {
          ok = bad(w, "object header at %" PRIu64 ": continuation message cut off", addr);
        } else if (nchunks == cap) {
          chunk *more = malloc(2 * cap * sizeof *more);
          if (!more) {
            w->code = RC_EXIT_SOFTWARE;
            ok = bad(w, "out of memory");
          } else {
            memcpy(more, chunks, nchunks * sizeof *more);
            if (chunks != &first) free(chunks);
            chunks = more;
            cap *= 2;
          }
        }
        if (ok) chunks[nchunks++] = (chunk){le(m + 8, 8), le(m + 16, 8)};
      } else {
        ok = spend(w) && check_message(w, addr, type, m + 8, size, depth);
      }
      at += 8 + size;
    }
  }
  if (chunks != &first) free(chunks);
  return ok;
}

/* Why: see the section comment. RC_OK, or RC_EXIT_DATAERR naming the part. */
static int check_shard_structure(const rc_h5_image_ref *ref, const char *what, rc_err *err) {
  shard_walk w = {.p = ref->buf, .size = ref->size, .code = RC_EXIT_DATAERR};
  w.budget = w.size / 8 + 64;
  if (check_superblock(&w)) {
    uint64_t root;
    if (check_entry(&w, w.p + SB_ROOT_ENTRY, &root) && check_object_header(&w, root, 0))
      return RC_OK;
  }
  return rc_fail(err, w.code, "%s: not an HDF5 file as resumecheck writes it: %s", what, w.why);
}

bool rc_shard_structure_is_ours(const void *data, size_t size) {
  rc_h5_image_ref ref = {data, size};
  rc_err err = {0};
  return size > 0 && check_shard_structure(&ref, "", &err) == RC_OK;
}

/* Opens the image as any HDF5 file: for `inspect`, which also reads files
 * other programs wrote. The loader's entry point is rc_h5_open_image. */
static int open_any_image(rc_h5_image_ref *ref, const char *what, hid_t *fid, rc_err *err) {
  int ret = RC_OK;
  *fid = H5I_INVALID_HID;
  hid_t fapl = H5I_INVALID_HID;
  if (ref->size == 0) return rc_fail(err, RC_EXIT_DATAERR, "%s: empty file", what);
  H5FD_file_image_callbacks_t cb = {img_malloc, img_memcpy, img_realloc, img_free,
                                    udata_copy, udata_free, ref};
  H5_CHECK(fapl = H5Pcreate(H5P_FILE_ACCESS), RC_EXIT_SOFTWARE, "%s: H5Pcreate", what);
  H5_CHECK(H5Pset_fapl_core(fapl, 1 << 20, 0), RC_EXIT_SOFTWARE, "%s: H5Pset_fapl_core", what);
  H5_CHECK(H5Pset_file_image_callbacks(fapl, &cb), RC_EXIT_SOFTWARE,
           "%s: H5Pset_file_image_callbacks", what);
  H5_CHECK(H5Pset_file_image(fapl, (void *)ref->buf, ref->size), RC_EXIT_SOFTWARE,
           "%s: H5Pset_file_image", what);
  /* The name only identifies the in-memory file to HDF5; it must be unique
   * among files open at once, so it carries the buffer address. */
  char name[64];
  snprintf(name, sizeof name, "rc-image-%p", ref->buf);
  H5_CHECK(*fid = H5Fopen(name, H5F_ACC_RDONLY, fapl), RC_EXIT_DATAERR,
           "%s: not a readable HDF5 file", what);
done:
  if (fapl >= 0) H5Pclose(fapl);
  return ret;
}

/* A shard's structure is checked before libhdf5 parses a byte of it (see
 * check_shard_structure for why). */
int rc_h5_open_image(rc_h5_image_ref *ref, const char *what, hid_t *fid, rc_err *err) {
  *fid = H5I_INVALID_HID;
  if (ref->size == 0) return rc_fail(err, RC_EXIT_DATAERR, "%s: empty file", what);
  int ret = check_shard_structure(ref, what, err);
  return ret ? ret : open_any_image(ref, what, fid, err);
}

/* ---- /meta */

static int read_str_attr(hid_t obj, const char *name, const char *what, char **out, rc_err *err) {
  int ret = RC_OK;
  hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, space = H5I_INVALID_HID;
  *out = NULL;
  H5_CHECK(a = H5Aopen(obj, name, H5P_DEFAULT), RC_EXIT_DATAERR, "%s: /meta attribute '%s' missing",
           what, name);
  H5_CHECK(t = H5Aget_type(a), RC_EXIT_DATAERR, "%s: /meta@%s: no type", what, name);
  H5_CHECK(space = H5Aget_space(a), RC_EXIT_DATAERR, "%s: /meta@%s: no dataspace", what, name);
  if (H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) != 0 ||
      H5Sget_simple_extent_type(space) != H5S_SCALAR) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: /meta@%s is not a fixed-length scalar string", what,
                  name);
    goto done;
  }
  size_t n = H5Tget_size(t);
  *out = calloc(n + 1, 1);
  if (!*out) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", what);
    goto done;
  }
  H5_CHECK(H5Aread(a, t, *out), RC_EXIT_IOERR, "%s: reading /meta@%s", what, name);
done:
  if (space >= 0) H5Sclose(space);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  if (ret) {
    free(*out);
    *out = NULL;
  }
  return ret;
}

static int read_int_attr(hid_t obj, const char *name, const char *what, int64_t *out, rc_err *err) {
  int ret = RC_OK;
  hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, space = H5I_INVALID_HID;
  H5_CHECK(a = H5Aopen(obj, name, H5P_DEFAULT), RC_EXIT_DATAERR, "%s: /meta attribute '%s' missing",
           what, name);
  H5_CHECK(t = H5Aget_type(a), RC_EXIT_DATAERR, "%s: /meta@%s: no type", what, name);
  H5_CHECK(space = H5Aget_space(a), RC_EXIT_DATAERR, "%s: /meta@%s: no dataspace", what, name);
  if (H5Tget_class(t) != H5T_INTEGER || H5Sget_simple_extent_type(space) != H5S_SCALAR) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: /meta@%s is not a scalar integer", what, name);
    goto done;
  }
  H5_CHECK(H5Aread(a, H5T_NATIVE_INT64, out), RC_EXIT_DATAERR, "%s: reading /meta@%s", what, name);
done:
  if (space >= 0) H5Sclose(space);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  return ret;
}

int rc_h5_read_meta(hid_t fid, const char *what, rc_meta_read *m, rc_err *err) {
  int ret = RC_OK;
  memset(m, 0, sizeof *m);
  hid_t g = H5I_INVALID_HID;
  htri_t has = H5Lexists(fid, "meta", H5P_DEFAULT);
  if (has <= 0) return rc_fail(err, RC_EXIT_DATAERR, "%s: no /meta group (not a shard)", what);
  H5_CHECK(g = H5Gopen2(fid, "meta", H5P_DEFAULT), RC_EXIT_DATAERR, "%s: /meta is not a group",
           what);
  if ((ret = read_str_attr(g, "format", what, &m->format, err))) goto done;
  if ((ret = read_int_attr(g, "format_version", what, &m->format_version, err))) goto done;
  if ((ret = read_int_attr(g, "rank", what, &m->rank, err))) goto done;
  if ((ret = read_int_attr(g, "world_size", what, &m->world_size, err))) goto done;
  if ((ret = read_int_attr(g, "iteration", what, &m->iteration, err))) goto done;
  if ((ret = read_str_attr(g, "config", what, &m->config, err))) goto done;
  if ((ret = read_str_attr(g, "config_sha256", what, &m->config_sha256, err))) goto done;
done:
  if (g >= 0) H5Gclose(g);
  if (ret) rc_meta_read_free(m);
  return ret;
}

void rc_meta_read_free(rc_meta_read *m) {
  free(m->format);
  free(m->config);
  free(m->config_sha256);
  m->format = m->config = m->config_sha256 = NULL;
}

/* ---- dataset listing */

typedef struct {
  char **paths;
  int n, cap;
  bool oom, other; /* named datatypes and the like are not shard content */
  char other_name[RC_PATH_MAX];
} ds_list;

static herr_t visit_cb(hid_t obj, const char *name, const H5O_info_t *info, void *data) {
  ds_list *l = data;
  (void)obj;
  if (info->type == H5O_TYPE_GROUP) return 0;
  if (info->type != H5O_TYPE_DATASET) {
    l->other = true;
    snprintf(l->other_name, sizeof l->other_name, "/%s", name);
    return 1; /* stop */
  }
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    char **p = realloc(l->paths, (size_t)cap * sizeof *p);
    if (!p) {
      l->oom = true;
      return -1;
    }
    l->paths = p;
    l->cap = cap;
  }
  size_t len = strlen(name);
  char *s = malloc(len + 2);
  if (!s) {
    l->oom = true;
    return -1;
  }
  s[0] = '/';
  memcpy(s + 1, name, len + 1);
  l->paths[l->n++] = s;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int rc_h5_list_datasets(hid_t fid, const char *what, char ***paths, int *n, rc_err *err) {
  ds_list l = {0};
  int ret = RC_OK;
  *paths = NULL;
  *n = 0;
  herr_t r = H5Ovisit2(fid, H5_INDEX_NAME, H5_ITER_INC, visit_cb, &l, H5O_INFO_BASIC);
  if (l.oom) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory listing datasets", what);
  } else if (l.other) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: unexpected object %s (not a group or dataset)", what,
                  l.other_name);
  } else if (r < 0) {
    ret = rc_h5_fail(err, RC_EXIT_DATAERR, "%s: cannot list the file's objects", what);
  }
  if (ret) {
    rc_h5_free_paths(l.paths, l.n);
    return ret;
  }
  qsort(l.paths, (size_t)l.n, sizeof *l.paths, cmp_str);
  *paths = l.paths;
  *n = l.n;
  return RC_OK;
}

void rc_h5_free_paths(char **paths, int n) {
  for (int i = 0; i < n; i++) free(paths[i]);
  free(paths);
}

/* ---- `resumecheck inspect` */

/* Raw bytes of one dataset (read with its own file type, so no conversion
 * happens) hashed; variable-length data has no raw bytes to hash. */
static int inspect_dataset(hid_t fid, const char *path, FILE *out, const char *what, rc_err *err) {
  int ret = RC_OK;
  hid_t ds = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
  void *buf = NULL;
  H5_CHECK(ds = H5Dopen2(fid, path, H5P_DEFAULT), RC_EXIT_DATAERR, "%s: opening %s", what, path);
  H5_CHECK(type = H5Dget_type(ds), RC_EXIT_DATAERR, "%s: type of %s", what, path);
  H5_CHECK(space = H5Dget_space(ds), RC_EXIT_DATAERR, "%s: dataspace of %s", what, path);
  char tname[64], shape[256] = "[";
  rc_h5_type_name(type, tname, sizeof tname);
  int nd = H5Sget_simple_extent_ndims(space);
  hsize_t dims[H5S_MAX_RANK];
  H5_CHECK(nd, RC_EXIT_DATAERR, "%s: rank of %s", what, path);
  H5_CHECK(H5Sget_simple_extent_dims(space, dims, NULL), RC_EXIT_DATAERR, "%s: dims of %s", what,
           path);
  size_t o = 1;
  for (int d = 0; d < nd && o < sizeof shape; d++)
    o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%llu", d ? ", " : "",
                          (unsigned long long)dims[d]);
  if (o < sizeof shape) snprintf(shape + o, sizeof shape - o, "]");
  hssize_t npoints = H5Sget_simple_extent_npoints(space);
  H5T_class_t cls = H5Tget_class(type);
  bool hashable = cls != H5T_VLEN && cls != H5T_REFERENCE && H5Tis_variable_str(type) == 0 &&
                  H5Tdetect_class(type, H5T_VLEN) == 0;
  char sha[RC_SHA256_HEX] = "-";
  size_t tsize = H5Tget_size(type);
  if (hashable && npoints >= 0 && tsize && (uint64_t)npoints > SIZE_MAX / tsize) {
    /* a damaged dataspace: the product would wrap and undersize the buffer */
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: %s: %lld elements of %zu bytes", what, path,
                  (long long)npoints, tsize);
    goto done;
  }
  if (hashable && npoints >= 0) {
    size_t n = (size_t)npoints * tsize;
    buf = malloc(n ? n : 1);
    if (!buf) {
      ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory reading %s", what, path);
      goto done;
    }
    if (n > 0)
      H5_CHECK(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), RC_EXIT_DATAERR,
               "%s: reading %s", what, path);
    rc_sha256_hex(buf, n, sha);
  }
  fprintf(out, "  %-8s %-16s %s  %s\n", tname, shape, sha, path);
done:
  free(buf);
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (ds >= 0) H5Dclose(ds);
  return ret;
}

static int inspect(const char *shard_path, FILE *out, rc_err *err) {
  rc_shard_image img;
  char sha[RC_SHA256_HEX];
  int ret = rc_read_shard(shard_path, -1, NULL, &img, sha, err);
  if (ret) return ret;
  size_t n = img.size;
  rc_h5_image_ref ref = {img.data, n};
  hid_t fid = H5I_INVALID_HID;
  char **paths = NULL;
  int npaths = 0;
  if ((ret = open_any_image(&ref, shard_path, &fid, err))) goto done;
  fprintf(out, "file: %s\nbytes: %zu\nsha256: %s\n", shard_path, n, sha);
  rc_meta_read m;
  rc_err merr = {0};
  if (rc_h5_read_meta(fid, shard_path, &m, &merr) == RC_OK) {
    fprintf(out,
            "meta:\n  format: %s\n  format_version: %" PRId64 "\n  rank: %" PRId64
            "\n  world_size: %" PRId64 "\n  iteration: %" PRId64 "\n  config_sha256: %s\n"
            "  config: %s\n",
            m.format, m.format_version, m.rank, m.world_size, m.iteration, m.config_sha256,
            m.config);
    rc_meta_read_free(&m);
  } else {
    /* Not fatal: inspect is also for HDF5 files other trainers wrote. */
    fprintf(out, "meta: (none: %s)\n", merr.msg);
  }
  if ((ret = rc_h5_list_datasets(fid, shard_path, &paths, &npaths, err))) goto done;
  fprintf(out, "datasets: %d\n", npaths);
  for (int i = 0; i < npaths && !ret; i++)
    ret = inspect_dataset(fid, paths[i], out, shard_path, err);
done:
  rc_h5_free_paths(paths, npaths);
  if (fid >= 0 && H5Fclose(fid) < 0 && !ret)
    ret = rc_h5_fail(err, RC_EXIT_IOERR, "%s: closing", shard_path);
  rc_shard_image_free(&img);
  return ret;
}

int rc_shard_inspect(const char *shard_path, FILE *out, rc_err *err) {
  rc_h5_quiet quiet;
  rc_h5_quiet_begin(&quiet);
  int ret = inspect(shard_path, out, err);
  rc_h5_quiet_end(&quiet);
  return ret;
}
