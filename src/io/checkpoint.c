/* checkpoint.c — saving checkpoints: shards, manifest, args.json, COMPLETE
 * (docs/design.md §5; the loader is in checkpoint_load.c).
 *
 * Every file is written atomically (fsutil.h) and COMPLETE goes last, so a
 * directory is either loadable and whole or visibly unfinished. COMPLETE
 * holds the manifest's SHA-256 in `sha256sum -c` form, which ties the
 * manifest to the marker: a manifest rewritten after the fact no longer
 * matches. A shard is written and hashed from its pieces (the metadata
 * image and the caller's tensor buffers, see shard_write.c) by threads at
 * once: the write, the whole-file SHA-256, and the per-tensor and per-chunk
 * SHA-256s (manifest.h) on the remaining cores. No tensor byte is copied in user space and, where
 * there are cores to spare, hashing costs little wall time. A hashes-only
 * save has neither the write nor the whole-file hash (see save_launch). */
#include "io/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/fsutil.h"
#include "io/checkpoint_internal.h"

static void iter_path(char *out, size_t cap, const char *root, int64_t iteration) {
  char name[32];
  rc_iter_dirname(name, sizeof name, iteration);
  rc_path_join(out, cap, root, name);
}

/* ---- one shard's save in flight.
 *
 * Independent passes over the bytes run at once, each on its own thread:
 * the write (mostly the kernel's copy and the device), the SHA-256 of the
 * whole file (one serial stream), and, spread over the cores those leave,
 * the SHA-256 of each dataset and of each chunk of the file (a context per
 * thread, results by index, so the manifest does not depend on the thread
 * count). All read the same bytes the write sends, and none copies them.
 * In a streamed save (rc_save_stream_begin) the bytes are still arriving
 * from the device: every pass follows the gate, which the caller raises as
 * datasets land, so the copy, the hashes and the write overlap and the
 * save costs about as much as its slowest pass (bench/NOTES_io.md).
 *
 * A hashes-only save runs only the dataset and chunk hashes: it writes no
 * file, and the whole-file hash, one serial stream that sets the pace of a
 * full save, would describe a file that never exists. The chunk hashes
 * cover every byte of the image, so nothing is lost (docs/checkpoint-format.md,
 * "Hashes-only checkpoints"). */

typedef struct {
  const char *path;
  const rc_shard_image *image;
  rc_gate *gate;
  rc_before_sync_fn before_sync; /* the handoff, or NULL */
  void *before_ctx;
  rc_err err;
  int ret;
} write_job;

static void *write_job_run(void *arg) {
  write_job *j = arg;
  j->ret = rc_write_pieces_atomic_hooked(j->path, j->image->pieces, j->image->npieces, j->gate,
                                         j->before_sync, j->before_ctx, &j->err);
  return NULL;
}

enum { WHOLE_SLICE = 8 << 20 }; /* the whole-file hash waits for this much at a time */
enum { PARTS_THREADS = 8 };     /* at most, for the dataset and chunk hashes (save_launch) */

typedef struct {
  const rc_shard_image *image;
  rc_gate *gate;
  char *out; /* RC_SHA256_HEX bytes */
} hash_job;

static void *hash_job_run(void *arg) {
  hash_job *j = arg;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  uint64_t off = 0;
  for (int i = 0; ok && i < j->image->npieces; i++) {
    const rc_piece *p = &j->image->pieces[i];
    for (uint64_t at = 0; ok && at < p->n;) {
      uint64_t n = p->n - at < WHOLE_SLICE ? p->n - at : WHOLE_SLICE;
      rc_gate_wait(j->gate, off + at + n);
      ok = EVP_DigestUpdate(ctx, (const char *)p->p + at, n);
      at += n;
    }
    off += p->n;
  }
  ok = ok && EVP_DigestFinal_ex(ctx, md, &len) && len == 32;
  EVP_MD_CTX_free(ctx);
  if (!ok) { /* as rc_sha256_hex: OpenSSL only fails here when out of memory */
    fprintf(stderr, "rc_checkpoint_save: OpenSSL SHA-256 failed\n");
    abort();
  }
  for (int i = 0; i < 32; i++) snprintf(j->out + 2 * i, 3, "%02x", md[i]);
  return NULL;
}

/* "<sha256>  manifest.json\n": the marker doubles as a sha256sum check file. */
static int write_manifest_and_marker(const char *iter_dir, const rc_manifest *m, rc_err *err) {
  char path[4096], sha[RC_SHA256_HEX], marker[128];
  size_t len;
  char *text = rc_manifest_text(m, &len);
  rc_path_join(path, sizeof path, iter_dir, RC_MANIFEST_NAME);
  int ret = rc_write_file_atomic(path, text, len, err);
  if (!ret) {
    rc_sha256_hex(text, len, sha);
    int n = snprintf(marker, sizeof marker, "%s  %s\n", sha, RC_MANIFEST_NAME);
    rc_path_join(path, sizeof path, iter_dir, RC_COMPLETE_NAME);
    ret = rc_write_file_atomic(path, marker, (size_t)n, err);
    /* A manifest without its marker is never loaded, but it is this save's
     * leftover: remove it so that a failure leaves nothing behind. */
    if (ret) {
      rc_path_join(path, sizeof path, iter_dir, RC_MANIFEST_NAME);
      unlink(path);
    }
  }
  free(text);
  return ret;
}

/* The chunk size this save records: 0 when none (version-1 manifest). */
static int chunk_size(const rc_shard_meta *meta, uint64_t *chunk, rc_err *err) {
  *chunk = 0;
  if (meta->chunk_bytes == RC_CHUNKS_NONE) return RC_OK;
  *chunk = meta->chunk_bytes == 0 ? RC_CHUNK_BYTES : (uint64_t)meta->chunk_bytes;
  if (meta->chunk_bytes < 0 || *chunk < RC_CHUNK_BYTES_MIN || *chunk > RC_CHUNK_BYTES_MAX)
    return rc_fail(err, RC_EXIT_USAGE,
                   "checkpoint save: chunk size %" PRId64 " outside [%" PRIu64 ", %" PRIu64 "]",
                   meta->chunk_bytes, RC_CHUNK_BYTES_MIN, RC_CHUNK_BYTES_MAX);
  return RC_OK;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) { /* a few bytes per dataset and chunk: nothing to save without them */
    fprintf(stderr, "rc_checkpoint_save: out of memory\n");
    abort();
  }
  return p;
}

/* The hashes beside the write and the whole-file SHA-256, on the cores
 * those two (and a streamed save's copy) leave: each dataset's and each
 * chunk's, all as byte ranges of the file, taken in file order so that the
 * workers follow the gate. */
typedef struct {
  const rc_shard_image *image;
  rc_gate *gate;
  uint64_t chunk;
  int threads;
  const uint64_t *nbytes; /* per dataset */
  rc_mf_shard *shard;
} parts_job;

static void *parts_job_run(void *arg) {
  parts_job *p = arg;
  const rc_shard_image *im = p->image;
  rc_mf_shard *shard = p->shard;
  int nd = shard->ndatasets;
  uint64_t nc = p->chunk ? (uint64_t)im->size / p->chunk + ((uint64_t)im->size % p->chunk != 0) : 0;
  if (p->chunk) {
    shard->chunk_bytes = p->chunk;
    shard->nchunks = (int)nc;
    shard->chunk_sha256 = xcalloc(nc, sizeof *shard->chunk_sha256);
  }
  int jobs = nd + (int)nc;
  uint64_t *start = xcalloc((size_t)jobs, sizeof *start), *end = xcalloc((size_t)jobs, sizeof *end);
  int *order = xcalloc((size_t)jobs, sizeof *order);
  for (int i = 0; i < nd; i++) {
    start[i] = im->offset[i];
    end[i] = im->offset[i] + p->nbytes[i];
  }
  for (int k = 0; k < (int)nc; k++) rc_mf_chunk_range(shard, k, &start[nd + k], &end[nd + k]);
  for (int i = 0; i < jobs; i++) order[i] = i;
  qsort_r(order, (size_t)jobs, sizeof *order, rc_cmp_index_by_u64, start);
  uint64_t *s2 = xcalloc((size_t)jobs, sizeof *s2), *e2 = xcalloc((size_t)jobs, sizeof *e2);
  for (int i = 0; i < jobs; i++) s2[i] = start[order[i]], e2[i] = end[order[i]];
  char(*hex)[RC_SHA256_HEX] = xcalloc((size_t)jobs, sizeof *hex);
  rc_sha256_ranges_gated(im->pieces, im->npieces, s2, e2, jobs, p->threads, p->gate, hex);
  for (int i = 0; i < jobs; i++) {
    int j = order[i];
    if (j < nd)
      memcpy(shard->datasets[j].sha256, hex[i], RC_SHA256_HEX);
    else
      memcpy(shard->chunk_sha256[j - nd], hex[i], RC_SHA256_HEX);
  }
  free(hex);
  free(e2);
  free(s2);
  free(order);
  free(end);
  free(start);
  return NULL;
}

struct rc_save_stream {
  char dir[4096], path[4096];
  int rank, world_size;
  int64_t iteration;
  char *args_json; /* rank 0's, or NULL */
  bool made_dir;
  bool hashes_only; /* rc_shard_meta.hashes_only: hash, write no shard */
  uint64_t chunk;
  rc_mf_shard shard;
  rc_shard_image image;
  rc_gate gate;
  bool streamed;    /* the gate is in use */
  uint64_t *nbytes; /* per dataset */
  /* streamed: the datasets in file order and which of them have landed */
  int *order, norder, pending;
  bool *landed;
  write_job write;
  hash_job whole;
  parts_job parts;
  pthread_t write_tid, whole_tid, parts_tid;
  bool write_thread, whole_thread, parts_thread;
  bool parts_done; /* the dataset and chunk hashes are in shard (finish_parts) */
  bool handoff;    /* rc_shard_meta.handoff, where it applies (save_prepare) */
};

static void stream_free(rc_save_stream *s) {
  rc_shard_image_free(&s->image);
  rc_mf_shard_free(&s->shard);
  if (s->streamed) rc_gate_destroy(&s->gate);
  free(s->order);
  free(s->landed);
  free(s->nbytes);
  free(s->args_json);
  free(s);
}

/* Checks, lays the shard out (the image with the tensors' bytes, or only
 * their places), makes the directory and clears this rank's stale temps. */
static int save_prepare(rc_save_stream *s, const char *ckpt_root, const rc_shard_meta *meta,
                        const rc_state *state, const char *args_json, bool layout_only,
                        rc_err *err) {
  if (meta->world_size < 1 || meta->world_size > 99999 || meta->rank < 0 ||
      meta->rank >= meta->world_size || meta->iteration < 0)
    return rc_fail(err, RC_EXIT_USAGE,
                   "checkpoint save: bad rank %d / world size %d / iteration %" PRId64, meta->rank,
                   meta->world_size, meta->iteration);
  int ret = chunk_size(meta, &s->chunk, err);
  if (ret) return ret;
  /* Its chunk hashes are all that covers a hashes-only shard's bytes. */
  if (meta->hashes_only && !s->chunk)
    return rc_fail(err, RC_EXIT_USAGE,
                   "checkpoint save: a hashes-only save records chunk hashes (its manifest has no"
                   " whole-file hash); it cannot be saved without them (RC_CHUNKS_NONE)");
  s->rank = meta->rank;
  s->world_size = meta->world_size;
  s->iteration = meta->iteration;
  s->hashes_only = meta->hashes_only;
  if (meta->rank == 0 && args_json) s->args_json = strdup(args_json);
  char path[4096], file[64];
  iter_path(s->dir, sizeof s->dir, ckpt_root, meta->iteration);
  rc_path_join(path, sizeof path, s->dir, RC_COMPLETE_NAME);
  if (rc_path_exists(path))
    return rc_fail(err, RC_EXIT_IOERR, "refusing to overwrite the complete checkpoint %s", s->dir);
  /* The image first: a state the writer rejects leaves nothing on disk. */
  ret = layout_only ? rc_shard_build_layout(meta, state, &s->image, err)
                    : rc_shard_build_image(meta, state, &s->image, err);
  if (ret) {
    rc_err_prefix(err, "building shard %d of iteration %" PRId64, meta->rank, meta->iteration);
    return ret;
  }
  s->made_dir = !rc_is_dir(s->dir);
  if ((ret = rc_mkdir_p(s->dir, err))) return ret;
  rc_mf_shard *shard = &s->shard;
  shard->rank = meta->rank;
  shard->bytes = s->image.size;
  rc_shard_filename(shard->file, sizeof shard->file, meta->rank, meta->world_size);
  /* A save killed here before left NAME.tmp.<pid> files: remove this rank's
   * (only this rank writes those names, so they are stale). The renamed
   * files of an unfinished save are simply replaced. */
  rc_fragment_filename(file, sizeof file, meta->rank, meta->world_size);
  const char *mine[] = {shard->file, file, RC_ARGS_NAME, RC_MANIFEST_NAME, RC_COMPLETE_NAME};
  rc_remove_stale_temps(s->dir, mine, meta->rank == 0 ? 5 : 2);
  /* a note of an earlier save of this iteration that was killed is stale */
  if (meta->world_size == 1) rc_handoff_remove(s->dir);
  s->handoff = meta->handoff && meta->world_size == 1 && !meta->hashes_only && s->chunk;
  rc_path_join(s->path, sizeof s->path, s->dir, shard->file);
  shard->datasets = xcalloc((size_t)state->count, sizeof *shard->datasets);
  shard->ndatasets = state->count;
  s->nbytes = xcalloc((size_t)state->count, sizeof *s->nbytes);
  for (int i = 0; i < state->count; i++) {
    const rc_tensor *t = &state->tensors[i];
    s->nbytes[i] = rc_tensor_nbytes(t);
    rc_mf_dataset *d = &shard->datasets[i];
    memcpy(d->path, t->path, sizeof d->path);
    d->dtype = t->dtype;
    d->ndim = t->ndim;
    memcpy(d->shape, t->shape, sizeof d->shape);
  }
  return RC_OK;
}

/* The dataset and chunk hashes, finished: joined, or run here when no
 * thread could be had. Called by the handoff (on the write's thread) or by
 * save_complete once the write's thread has ended: never both at once. */
static void finish_parts(rc_save_stream *s) {
  if (s->parts_done) return;
  if (s->parts_thread)
    pthread_join(s->parts_tid, NULL);
  else
    parts_job_run(&s->parts);
  s->parts_done = true;
}

/* Test hook (docs/robustness.md), not a feature: RC_TEST_HANDOFF, a comma-
 * separated list: "delay:MS" holds a save MS milliseconds after it handed
 * its checkpoint over, before the fsync (so that a test on a fast disk
 * sees a leg load from the note); "kill" SIGKILLs the saving process there;
 * "bad-note" hands over a note with the first dataset's hash altered;
 * "manifest-differs" records another hash for that dataset in the manifest
 * than the note gave (a writer whose manifest disagrees with what it
 * handed over). */
static bool test_handoff_has(const char *what, long *value) {
  const char *t = getenv("RC_TEST_HANDOFF");
  size_t n = strlen(what);
  for (const char *p = t; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    if (strncmp(p, what, n) || (p[n] && p[n] != ',' && p[n] != ':')) continue;
    if (value) *value = p[n] == ':' ? strtol(p + n + 1, NULL, 10) : 0;
    return true;
  }
  return false;
}

static void test_handoff_after(rc_save_stream *s) {
  long ms = 0;
  if (test_handoff_has("manifest-differs", NULL) && s->shard.ndatasets > 0) {
    char *h = s->shard.datasets[0].sha256;
    h[0] = h[0] == '0' ? '1' : '0';
  }
  if (test_handoff_has("delay", &ms) && ms > 0) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (test_handoff_has("kill", NULL)) raise(SIGKILL);
}

/* rc_before_sync_fn of a save that hands its checkpoint over: every byte
 * is in tmp; once the hashes are known, the note. A note that cannot be
 * written is an early start lost, not a failed save: the waiting leg then
 * waits for COMPLETE, as without a handoff. */
static void handoff_before_sync(void *ctx, const char *tmp) {
  rc_save_stream *s = ctx;
  finish_parts(s);
  char *first = s->shard.ndatasets > 0 ? s->shard.datasets[0].sha256 : NULL, kept = 0;
  if (test_handoff_has("bad-note", NULL) && first) {
    kept = first[0];
    first[0] = first[0] == '0' ? '1' : '0';
  }
  const char *base = strrchr(tmp, '/');
  rc_err e = {0};
  if (rc_handoff_write(s->dir, s->iteration, base ? base + 1 : tmp, &s->shard, &e))
    fprintf(stderr,
            "note: the checkpoint %s is not handed over before it is durable (%s); a leg that "
            "waits for it waits for COMPLETE\n",
            s->dir, e.msg);
  if (kept) first[0] = kept;
  test_handoff_after(s);
}

static void save_launch(rc_save_stream *s, int copy_threads) {
  rc_gate *gate = s->streamed ? &s->gate : NULL;
  int online = rc_sha256_threads(0, 1 << 20);
  /* the write and the whole-file hash (neither in a hashes-only save), the copy */
  int busy = (s->hashes_only ? 0 : 2) + copy_threads;
  /* The dataset and chunk hashes are two passes over the file on these
   * threads, the whole-file hash one pass on one: at most PARTS_THREADS
   * finish theirs well before it (5 GB at 8 x 1.4 GB/s is 0.45 s, one
   * 2.5 GB stream 1.8 s), and more would only take memory bandwidth and
   * clock speed from the one stream that sets the pace. Without it (hashes
   * only) they set the pace themselves, with the copy. */
  int parts = online > busy + 1 ? online - busy : 1;
  if (parts > PARTS_THREADS) parts = PARTS_THREADS;
  s->write = (write_job){.path = s->path,
                         .image = &s->image,
                         .gate = gate,
                         .before_sync = s->handoff ? handoff_before_sync : NULL,
                         .before_ctx = s};
  s->whole = (hash_job){.image = &s->image, .gate = gate, .out = s->shard.sha256};
  s->parts = (parts_job){.image = &s->image,
                         .gate = gate,
                         .chunk = s->chunk,
                         .threads = parts,
                         .nbytes = s->nbytes,
                         .shard = &s->shard};
  /* Without threads (none to be had) a streamed save cannot follow its own
   * copy: the passes then run in rc_save_stream_end, once it is done. A
   * hashes-only save has no write and no whole-file hash (shard.sha256
   * stays ""): the same image, the same dataset and chunk hashes. */
  s->write_thread =
      !s->hashes_only && pthread_create(&s->write_tid, NULL, write_job_run, &s->write) == 0;
  s->whole_thread =
      !s->hashes_only && pthread_create(&s->whole_tid, NULL, hash_job_run, &s->whole) == 0;
  s->parts_thread = pthread_create(&s->parts_tid, NULL, parts_job_run, &s->parts) == 0;
}

/* Waits for the passes, then args.json, the manifest (or this rank's
 * fragment) and COMPLETE; on failure removes what the save wrote. Frees s. */
static int save_complete(rc_save_stream *s, rc_err *err) {
  if (s->streamed) rc_gate_raise(&s->gate, s->image.size);
  if (!s->write_thread && !s->hashes_only) write_job_run(&s->write);
  if (!s->whole_thread && !s->hashes_only) hash_job_run(&s->whole);
  if (s->write_thread) pthread_join(s->write_tid, NULL);
  if (s->whole_thread) pthread_join(s->whole_tid, NULL);
  finish_parts(s); /* after the write's thread: its handoff may have done it */
  int ret = RC_OK;
  bool wrote_shard = false, wrote_args = false;
  char path[4096], file[64];
  if (s->write.ret) {
    ret = rc_fail(err, s->write.ret, "%s", s->write.err.msg);
    goto done;
  }
  if (s->hashes_only) {
    /* A shard file of this name can only be an unfinished save's (COMPLETE
     * is absent): remove it, so that the directory holds what its manifest
     * says, no shard. */
    if (unlink(s->path) != 0 && errno != ENOENT) {
      ret =
          rc_fail(err, RC_EXIT_IOERR, "removing the stale shard %s: %s", s->path, strerror(errno));
      goto done;
    }
  } else {
    wrote_shard = true;
  }
  if (s->args_json) {
    rc_path_join(path, sizeof path, s->dir, RC_ARGS_NAME);
    if ((ret = rc_write_file_atomic(path, s->args_json, strlen(s->args_json), err))) goto done;
    wrote_args = true;
  }
  if (s->world_size == 1) {
    rc_manifest m = {.iteration = s->iteration,
                     .world_size = 1,
                     .shards = &s->shard,
                     .hashes_only = s->hashes_only};
    ret = write_manifest_and_marker(s->dir, &m, err);
  } else {
    size_t len;
    char *text = rc_fragment_text(s->iteration, s->world_size, s->hashes_only, &s->shard, &len);
    rc_fragment_filename(file, sizeof file, s->rank, s->world_size);
    rc_path_join(path, sizeof path, s->dir, file);
    ret = rc_write_file_atomic(path, text, len, err);
    free(text);
  }
done:
  /* the note has served: COMPLETE is there, or the save failed */
  if (s->handoff) rc_handoff_remove(s->dir);
  if (ret) {
    /* The temp file of the write that failed is already gone (fsutil). The
     * manifest and COMPLETE never outlive a failure (write_manifest_and_marker);
     * a fragment is written last, so it is never left either. */
    if (wrote_shard) unlink(s->path);
    if (wrote_args) {
      rc_path_join(path, sizeof path, s->dir, RC_ARGS_NAME);
      unlink(path);
    }
    /* Only with one rank: other ranks may be writing into it right now. */
    if (s->made_dir && s->world_size == 1) rmdir(s->dir);
  }
  stream_free(s);
  return ret;
}

int rc_checkpoint_save(const char *ckpt_root, const rc_shard_meta *meta, const rc_state *state,
                       const char *args_json, rc_err *err) {
  rc_save_stream *s = xcalloc(1, sizeof *s);
  int ret = save_prepare(s, ckpt_root, meta, state, args_json, false, err);
  if (ret) {
    if (s->made_dir && meta->world_size == 1) rmdir(s->dir);
    stream_free(s);
    return ret;
  }
  save_launch(s, 0);
  return save_complete(s, err);
}

int rc_save_stream_begin(const char *ckpt_root, const rc_shard_meta *meta, const rc_state *state,
                         const char *args_json, rc_save_buffer_fn buffer, void *buffer_ctx,
                         rc_save_stream **out, rc_err *err) {
  *out = NULL;
  rc_save_stream *s = xcalloc(1, sizeof *s);
  int ret = save_prepare(s, ckpt_root, meta, state, args_json, true, err);
  unsigned char *buf = NULL;
  if (!ret && !(buf = buffer(buffer_ctx, s->image.size)))
    ret = rc_fail(err, RC_EXIT_RESOURCES,
                  "checkpoint save: no host buffer of %zu bytes for the shard (out of memory)",
                  s->image.size);
  if (!ret) ret = rc_shard_image_place(&s->image, buf, err);
  if (ret) {
    if (s->made_dir && meta->world_size == 1) rmdir(s->dir);
    stream_free(s);
    return ret;
  }
  /* the datasets in file order; what lies before the first is final */
  s->order = xcalloc((size_t)state->count, sizeof *s->order);
  s->landed = xcalloc((size_t)state->count, sizeof *s->landed);
  for (int i = 0; i < state->count; i++)
    if (rc_tensor_nbytes(&state->tensors[i]) > 0) s->order[s->norder++] = i;
  qsort_r(s->order, (size_t)s->norder, sizeof *s->order, rc_cmp_index_by_u64, s->image.offset);
  s->streamed = true;
  rc_gate_init(&s->gate, s->norder ? s->image.offset[s->order[0]] : s->image.size);
  save_launch(s, 1);
  *out = s;
  return RC_OK;
}

size_t rc_checkpoint_bytes_estimate(const rc_shard_meta *meta, const rc_state *state) {
  size_t n = rc_shard_meta_block(meta, state);
  for (int i = 0; i < state->count; i++) n += rc_tensor_nbytes(&state->tensors[i]);
  return n + ((size_t)1 << 20); /* alignment of the last block, the end of the file */
}

const rc_mf_shard *rc_save_stream_hashes(rc_save_stream *s) {
  if (s->streamed) rc_gate_raise(&s->gate, s->image.size);
  finish_parts(s);
  return &s->shard;
}

const char *rc_save_stream_dir(const rc_save_stream *s) {
  return s->dir;
}

void rc_save_stream_promote(rc_save_stream *s) {
  if (!s->hashes_only || s->write_thread || s->whole_thread) return;
  /* the image is whole and final: the write and the whole-file hash need
   * no gate; the hashes already taken are those of the same bytes */
  s->hashes_only = false;
  s->write = (write_job){.path = s->path, .image = &s->image};
  s->whole = (hash_job){.image = &s->image, .out = s->shard.sha256};
  s->write_thread = pthread_create(&s->write_tid, NULL, write_job_run, &s->write) == 0;
  s->whole_thread = pthread_create(&s->whole_tid, NULL, hash_job_run, &s->whole) == 0;
}

unsigned char *rc_save_stream_dataset(const rc_save_stream *s, int i) {
  return (unsigned char *)s->image.pieces[0].p + s->image.offset[i];
}

void rc_save_stream_landed(rc_save_stream *s, int i) {
  s->landed[i] = true;
  while (s->pending < s->norder && s->landed[s->order[s->pending]]) s->pending++;
  rc_gate_raise(&s->gate,
                s->pending < s->norder ? s->image.offset[s->order[s->pending]] : s->image.size);
}

int rc_save_stream_end(rc_save_stream *s, rc_err *err) {
  return save_complete(s, err);
}

/* Rank r's manifest fragment into m->shards[r], checked against what
 * finalize expects and against rank 0's (one kind of save, one manifest
 * version); rank 0's sets m->hashes_only. */
static int merge_fragment(const char *iter_dir, int r, int world_size, int64_t iteration,
                          rc_manifest *m, rc_err *err) {
  char path[4096], file[64];
  rc_fragment_filename(file, sizeof file, r, world_size);
  rc_path_join(path, sizeof path, iter_dir, file);
  char *text = NULL;
  size_t n = 0;
  int ret = rc_read_regular_file(path, RC_MANIFEST_MAX, true, &text, &n, err);
  if (ret) {
    if (ret == RC_EXIT_NOINPUT)
      ret = rc_fail(err, RC_EXIT_NOINPUT,
                    "finalize %s: rank %d's manifest fragment %s is missing"
                    " (did rank %d save?)",
                    iter_dir, r, file, r);
    return ret;
  }
  int64_t it;
  int ws;
  bool hashes_only = false;
  ret = rc_fragment_parse(text, n, path, &it, &ws, &hashes_only, &m->shards[r], err);
  free(text);
  if (ret) return ret;
  if (r == 0) m->hashes_only = hashes_only;
  if (hashes_only != m->hashes_only)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: rank %d's fragment is %s, rank 0's %s (one kind of save for all ranks)",
                   path, r, hashes_only ? "hashes-only" : "of a written shard",
                   m->hashes_only ? "hashes-only" : "of a written shard");
  if (it != iteration || ws != world_size || m->shards[r].rank != r)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: fragment is for rank %d of %d at iteration %" PRId64
                   ", expected rank %d of %d at iteration %" PRId64,
                   path, m->shards[r].rank, ws, it, r, world_size, iteration);
  if (r > 0 && (m->shards[r].chunk_bytes != 0) != (m->shards[0].chunk_bytes != 0))
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: rank %d's fragment %s chunk hashes and rank 0's %s (one manifest version"
                   " for all)",
                   path, r, m->shards[r].chunk_bytes ? "has" : "lacks",
                   m->shards[0].chunk_bytes ? "has" : "lacks");
  return RC_OK;
}

/* The shard itself was renamed into place before its fragment was
 * written; a size check catches a fragment left over from another save. */
static int check_shard_size(const char *iter_dir, const rc_mf_shard *shard, rc_err *err) {
  char path[4096];
  struct stat st;
  rc_path_join(path, sizeof path, iter_dir, shard->file);
  if (stat(path, &st) != 0)
    return rc_fail(err, RC_EXIT_NOINPUT, "finalize: shard %s is missing", path);
  if ((uint64_t)st.st_size != shard->bytes)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "finalize: shard %s has %lld bytes, its fragment says %" PRIu64, path,
                   (long long)st.st_size, shard->bytes);
  return RC_OK;
}

/* The fragments are merged: remove them so the directory holds only the
 * checkpoint. COMPLETE is already durable; a leftover fragment is untidy,
 * not wrong, so failing to remove one is reported but changes nothing. */
static int remove_fragments(const char *iter_dir, int world_size, rc_err *err) {
  char path[4096], file[64];
  for (int r = 0; r < world_size; r++) {
    rc_fragment_filename(file, sizeof file, r, world_size);
    rc_path_join(path, sizeof path, iter_dir, file);
    if (unlink(path) != 0 && errno != ENOENT)
      return rc_fail(err, RC_EXIT_IOERR, "removing merged fragment %s: %s", path, strerror(errno));
  }
  return RC_OK;
}

int rc_checkpoint_finalize(const char *iter_dir, int world_size, int64_t iteration, rc_err *err) {
  if (world_size < 1 || world_size > 99999 || iteration < 0)
    return rc_fail(err, RC_EXIT_USAGE,
                   "checkpoint finalize: bad world size %d / iteration %" PRId64, world_size,
                   iteration);
  char path[4096];
  rc_path_join(path, sizeof path, iter_dir, RC_COMPLETE_NAME);
  if (rc_path_exists(path))
    return rc_fail(err, RC_EXIT_IOERR, "refusing to overwrite the complete checkpoint %s",
                   iter_dir);
  const char *mine[] = {RC_MANIFEST_NAME, RC_COMPLETE_NAME};
  rc_remove_stale_temps(iter_dir, mine, 2);
  rc_manifest m = {.iteration = iteration, .world_size = world_size};
  m.shards = calloc((size_t)world_size, sizeof *m.shards);
  if (!m.shards) return rc_fail(err, RC_EXIT_SOFTWARE, "finalize %s: out of memory", iter_dir);
  int ret = RC_OK;
  for (int r = 0; r < world_size && !ret; r++) {
    ret = merge_fragment(iter_dir, r, world_size, iteration, &m, err);
    /* A hashes-only save wrote no shard. */
    if (!ret && !m.hashes_only) ret = check_shard_size(iter_dir, &m.shards[r], err);
  }
  if (!ret) ret = write_manifest_and_marker(iter_dir, &m, err);
  /* a test's window between COMPLETE and the fragments' removal, which a
   * reader of complete checkpoints must wait out (tests/dist_early_checks.sh) */
  const char *delay = getenv("RC_TEST_FINALIZE_DELAY_MS");
  if (!ret && delay && *delay) {
    unsigned long ms = strtoul(delay, NULL, 10);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (!ret) ret = remove_fragments(iter_dir, world_size, err);
  rc_manifest_free(&m);
  return ret;
}

bool rc_checkpoint_is_hashes_only(const char *iter_dir) {
  char path[4096], *text = NULL;
  size_t n = 0;
  rc_err ignored = {0};
  rc_path_join(path, sizeof path, iter_dir, RC_MANIFEST_NAME);
  if (rc_read_regular_file(path, RC_MANIFEST_MAX, true, &text, &n, &ignored)) return false;
  rc_manifest m;
  bool parsed = rc_manifest_parse(text, n, path, &m, &ignored) == RC_OK;
  bool yes = parsed && m.hashes_only;
  if (parsed) rc_manifest_free(&m);
  free(text);
  return yes;
}

/* iter_<digits> only: anything else in the root is not ours to consider. */
static bool parse_iter_name(const char *name, int64_t *it) {
  size_t prefix = strlen(RC_ITER_PREFIX);
  if (strncmp(name, RC_ITER_PREFIX, prefix) != 0 || !name[prefix]) return false;
  int64_t v = 0;
  for (const char *p = name + prefix; *p; p++) {
    if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (*p - '0');
  }
  *it = v;
  return true;
}

int rc_checkpoint_latest(const char *ckpt_root, char *path, size_t cap, rc_err *err) {
  DIR *d = opendir(ckpt_root);
  if (!d)
    return rc_fail(err, errno == ENOENT ? RC_EXIT_NOINPUT : RC_EXIT_IOERR,
                   "cannot open checkpoint root %s: %s", ckpt_root, strerror(errno));
  int64_t best = -1;
  char best_name[256] = "", buf[4096], marker[4096];
  struct dirent *e;
  while ((e = readdir(d))) {
    int64_t it;
    if (!parse_iter_name(e->d_name, &it) || it <= best) continue;
    rc_path_join(buf, sizeof buf, ckpt_root, e->d_name);
    rc_path_join(marker, sizeof marker, buf, RC_COMPLETE_NAME);
    if (rc_path_exists(marker) && strlen(e->d_name) < sizeof best_name &&
        !rc_checkpoint_is_hashes_only(buf)) {
      best = it;
      memcpy(best_name, e->d_name, strlen(e->d_name) + 1);
    }
  }
  closedir(d);
  if (best < 0)
    return rc_fail(err, RC_EXIT_NOINPUT, "no complete checkpoint (iter_*/COMPLETE) under %s",
                   ckpt_root);
  int n = snprintf(path, cap, "%s/%s", ckpt_root, best_name);
  if (n < 0 || (size_t)n >= cap)
    return rc_fail(err, RC_EXIT_USAGE, "path of %s/%s does not fit in %zu bytes", ckpt_root,
                   best_name, cap);
  return RC_OK;
}
