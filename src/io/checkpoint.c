/* checkpoint.c — saving checkpoints: shards, manifest, args.json, COMPLETE
 * (DESIGN §5; the loader is in checkpoint_load.c).
 *
 * Every file is written atomically (fsutil.h) and COMPLETE goes last, so a
 * directory is either loadable and whole or visibly unfinished. COMPLETE
 * holds the manifest's SHA-256 in `sha256sum -c` form, which ties the
 * manifest to the marker: a manifest rewritten after the fact no longer
 * matches. A shard is written and hashed from its pieces (the metadata
 * image and the caller's tensor buffers, see shard_write.c) by threads at
 * once: the write, the whole-file SHA-256, and the per-tensor and per-chunk
 * SHA-256s (manifest.h) on the remaining cores. No tensor byte is copied in user space and, where
 * there are cores to spare, hashing costs little wall time. */
#include "io/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/fsutil.h"
#include "io/checkpoint_internal.h"

void rc_iter_dirname(char *buf, size_t cap, int64_t iteration) {
  snprintf(buf, cap, "iter_%07" PRId64, iteration);
}

static void iter_path(char *out, size_t cap, const char *root, int64_t iteration) {
  char name[32];
  rc_iter_dirname(name, sizeof name, iteration);
  rc_path_join(out, cap, root, name);
}

typedef struct {
  const char *path;
  const rc_shard_image *image;
  rc_err err;
  int ret;
} write_job;

static void *write_job_run(void *arg) {
  write_job *j = arg;
  j->ret = rc_write_pieces_atomic(j->path, j->image->pieces, j->image->npieces, &j->err);
  return NULL;
}

typedef struct {
  const rc_shard_image *image;
  char *out; /* RC_SHA256_HEX bytes */
} hash_job;

static void *hash_job_run(void *arg) {
  hash_job *j = arg;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  for (int i = 0; ok && i < j->image->npieces; i++)
    ok = EVP_DigestUpdate(ctx, j->image->pieces[i].p, j->image->pieces[i].n);
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

/* The hashes that run beside the write and the whole-file SHA-256, on the
 * cores those two leave: each tensor's (unless the caller hashed them as
 * they landed) and each chunk's of the file, straight from the pieces. */
static void hash_parts(const rc_state *state, const rc_shard_image *image, uint64_t chunk,
                       const char (*given)[RC_SHA256_HEX], rc_mf_shard *shard) {
  int online = rc_sha256_threads(0, 1 << 20);
  int threads = online > 3 ? online - 2 : 1;
  if (given) {
    for (int i = 0; i < state->count; i++)
      memcpy(shard->datasets[i].sha256, given[i], RC_SHA256_HEX);
  } else if (state->count > 0) {
    const void **data = calloc((size_t)state->count, sizeof *data);
    size_t *nbytes = calloc((size_t)state->count, sizeof *nbytes);
    char(*hex)[RC_SHA256_HEX] = calloc((size_t)state->count, sizeof *hex);
    if (!data || !nbytes || !hex) {
      fprintf(stderr, "rc_checkpoint_save: out of memory\n");
      abort();
    }
    for (int i = 0; i < state->count; i++) {
      data[i] = state->tensors[i].data;
      nbytes[i] = rc_tensor_nbytes(&state->tensors[i]);
    }
    rc_sha256_many(data, nbytes, state->count, threads, hex);
    for (int i = 0; i < state->count; i++) memcpy(shard->datasets[i].sha256, hex[i], RC_SHA256_HEX);
    free(hex);
    free(nbytes);
    free(data);
  }
  if (!chunk) return;
  uint64_t n = (uint64_t)image->size / chunk + ((uint64_t)image->size % chunk != 0);
  shard->chunk_bytes = chunk;
  shard->nchunks = (int)n;
  uint64_t *start = calloc(n ? n : 1, sizeof *start), *end = calloc(n ? n : 1, sizeof *end);
  shard->chunk_sha256 = calloc(n ? n : 1, sizeof *shard->chunk_sha256);
  if (!start || !end || !shard->chunk_sha256) {
    fprintf(stderr, "rc_checkpoint_save: out of memory\n");
    abort();
  }
  for (int k = 0; k < shard->nchunks; k++) rc_mf_chunk_range(shard, k, &start[k], &end[k]);
  rc_sha256_ranges(image->pieces, image->npieces, start, end, shard->nchunks, threads,
                   shard->chunk_sha256);
  free(end);
  free(start);
}

int rc_checkpoint_save(const char *ckpt_root, const rc_shard_meta *meta, const rc_state *state,
                       const char *args_json, rc_err *err) {
  return rc_checkpoint_save_hashed(ckpt_root, meta, state, NULL, args_json, err);
}

int rc_checkpoint_save_hashed(const char *ckpt_root, const rc_shard_meta *meta,
                              const rc_state *state, const char (*dataset_sha256)[RC_SHA256_HEX],
                              const char *args_json, rc_err *err) {
  if (meta->world_size < 1 || meta->world_size > 99999 || meta->rank < 0 ||
      meta->rank >= meta->world_size || meta->iteration < 0)
    return rc_fail(err, RC_EXIT_USAGE,
                   "checkpoint save: bad rank %d / world size %d / iteration %" PRId64, meta->rank,
                   meta->world_size, meta->iteration);
  uint64_t chunk;
  int ret = chunk_size(meta, &chunk, err);
  if (ret) return ret;
  char dir[4096], path[4096], file[64];
  iter_path(dir, sizeof dir, ckpt_root, meta->iteration);
  rc_path_join(path, sizeof path, dir, RC_COMPLETE_NAME);
  if (rc_path_exists(path))
    return rc_fail(err, RC_EXIT_IOERR, "refusing to overwrite the complete checkpoint %s", dir);
  /* The image first: a state the writer rejects leaves nothing on disk. */
  rc_mf_shard shard = {0};
  rc_shard_image image;
  ret = rc_shard_build_image(meta, state, &image, err);
  if (ret) {
    rc_err_prefix(err, "building shard %d of iteration %" PRId64, meta->rank, meta->iteration);
    return ret;
  }
  /* On failure the save removes what it wrote, and the directory if it made
   * it, so that a failed save (a full disk) leaves things as they were. */
  bool made_dir = !rc_is_dir(dir), wrote_shard = false, wrote_args = false;
  if ((ret = rc_mkdir_p(dir, err))) {
    rc_shard_image_free(&image);
    return ret;
  }
  shard.rank = meta->rank;
  shard.bytes = image.size;
  rc_shard_filename(shard.file, sizeof shard.file, meta->rank, meta->world_size);
  /* A save killed here before left NAME.tmp.<pid> files: remove this rank's
   * (only this rank writes those names, so they are stale). The renamed
   * files of an unfinished save are simply replaced. */
  rc_fragment_filename(file, sizeof file, meta->rank, meta->world_size);
  const char *mine[] = {shard.file, file, RC_ARGS_NAME, RC_MANIFEST_NAME, RC_COMPLETE_NAME};
  rc_remove_stale_temps(dir, mine, meta->rank == 0 ? 5 : 2);
  rc_path_join(path, sizeof path, dir, shard.file);
  if (state->count > 0) {
    shard.datasets = calloc((size_t)state->count, sizeof *shard.datasets);
    if (!shard.datasets) {
      fprintf(stderr, "rc_checkpoint_save: out of memory\n");
      abort();
    }
  }
  shard.ndatasets = state->count;

  /* Independent passes over the bytes run at once: the write (mostly the
   * kernel's copy and the device), the SHA-256 of the whole image (one
   * serial stream), and, spread over the cores the other two leave, the
   * SHA-256 of each tensor (unless the caller gave them) and of each chunk
   * of the file (a context per thread, results by index, so the manifest
   * does not depend on the thread count). All read the caller's buffers,
   * the same bytes the write sends: nothing is copied. Where there are
   * cores for all of it, the disk or the one whole-file hash sets the pace
   * (bench/NOTES_io.md). */
  write_job job = {.path = path, .image = &image};
  hash_job whole = {.image = &image, .out = shard.sha256};
  pthread_t wtid, htid;
  bool wthread = pthread_create(&wtid, NULL, write_job_run, &job) == 0;
  if (!wthread) write_job_run(&job);
  bool hthread = pthread_create(&htid, NULL, hash_job_run, &whole) == 0;
  if (!hthread) hash_job_run(&whole);
  for (int i = 0; i < state->count; i++) {
    const rc_tensor *t = &state->tensors[i];
    rc_mf_dataset *d = &shard.datasets[i];
    memcpy(d->path, t->path, sizeof d->path);
    d->dtype = t->dtype;
    d->ndim = t->ndim;
    memcpy(d->shape, t->shape, sizeof d->shape);
  }
  hash_parts(state, &image, chunk, dataset_sha256, &shard);
  if (hthread) pthread_join(htid, NULL);
  if (wthread) pthread_join(wtid, NULL);
  rc_shard_image_free(&image);
  if (job.ret) {
    ret = rc_fail(err, job.ret, "%s", job.err.msg);
    goto done;
  }
  wrote_shard = true;

  if (meta->rank == 0 && args_json) {
    rc_path_join(path, sizeof path, dir, RC_ARGS_NAME);
    if ((ret = rc_write_file_atomic(path, args_json, strlen(args_json), err))) goto done;
    wrote_args = true;
  }
  if (meta->world_size == 1) {
    rc_manifest m = {.iteration = meta->iteration, .world_size = 1, .shards = &shard};
    ret = write_manifest_and_marker(dir, &m, err);
  } else {
    size_t len;
    char *text = rc_fragment_text(meta->iteration, meta->world_size, &shard, &len);
    rc_fragment_filename(file, sizeof file, meta->rank, meta->world_size);
    rc_path_join(path, sizeof path, dir, file);
    ret = rc_write_file_atomic(path, text, len, err);
    free(text);
  }
done:
  if (ret) {
    /* The temp file of the write that failed is already gone (fsutil). The
     * manifest and COMPLETE never outlive a failure (write_manifest_and_marker);
     * a fragment is written last, so it is never left either. */
    if (wrote_shard) {
      rc_path_join(path, sizeof path, dir, shard.file);
      unlink(path);
    }
    if (wrote_args) {
      rc_path_join(path, sizeof path, dir, RC_ARGS_NAME);
      unlink(path);
    }
    /* Only with one rank: other ranks may be writing into it right now. */
    if (made_dir && meta->world_size == 1) rmdir(dir);
  }
  rc_mf_shard_free(&shard);
  return ret;
}

int rc_checkpoint_finalize(const char *iter_dir, int world_size, int64_t iteration, rc_err *err) {
  if (world_size < 1 || world_size > 99999 || iteration < 0)
    return rc_fail(err, RC_EXIT_USAGE,
                   "checkpoint finalize: bad world size %d / iteration %" PRId64, world_size,
                   iteration);
  char path[4096], file[64];
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
    rc_fragment_filename(file, sizeof file, r, world_size);
    rc_path_join(path, sizeof path, iter_dir, file);
    char *text = NULL;
    size_t n = 0;
    if ((ret = rc_read_regular_file(path, RC_MANIFEST_MAX, true, &text, &n, err))) {
      if (ret == RC_EXIT_NOINPUT)
        ret = rc_fail(err, RC_EXIT_NOINPUT,
                      "finalize %s: rank %d's manifest fragment %s is missing"
                      " (did rank %d save?)",
                      iter_dir, r, file, r);
      break;
    }
    int64_t it;
    int ws;
    ret = rc_fragment_parse(text, n, path, &it, &ws, &m.shards[r], err);
    free(text);
    if (ret) break;
    if (it != iteration || ws != world_size || m.shards[r].rank != r) {
      ret = rc_fail(err, RC_EXIT_DATAERR,
                    "%s: fragment is for rank %d of %d at iteration %" PRId64
                    ", expected rank %d of %d at iteration %" PRId64,
                    path, m.shards[r].rank, ws, it, r, world_size, iteration);
      break;
    }
    if (r > 0 && (m.shards[r].chunk_bytes != 0) != (m.shards[0].chunk_bytes != 0)) {
      ret = rc_fail(err, RC_EXIT_DATAERR,
                    "%s: rank %d's fragment %s chunk hashes and rank 0's %s (one manifest version"
                    " for all)",
                    path, r, m.shards[r].chunk_bytes ? "has" : "lacks",
                    m.shards[0].chunk_bytes ? "has" : "lacks");
      break;
    }
    /* The shard itself was renamed into place before its fragment was
     * written; a size check catches a fragment left over from another save. */
    struct stat st;
    rc_path_join(path, sizeof path, iter_dir, m.shards[r].file);
    if (stat(path, &st) != 0)
      ret = rc_fail(err, RC_EXIT_NOINPUT, "finalize: shard %s is missing", path);
    else if ((uint64_t)st.st_size != m.shards[r].bytes)
      ret = rc_fail(err, RC_EXIT_DATAERR,
                    "finalize: shard %s has %lld bytes, its fragment says %" PRIu64, path,
                    (long long)st.st_size, m.shards[r].bytes);
  }
  if (!ret) ret = write_manifest_and_marker(iter_dir, &m, err);
  /* The fragments are merged: remove them so the directory holds only the
   * checkpoint. COMPLETE is already durable; a leftover fragment is untidy,
   * not wrong, so failing to remove one is reported but changes nothing. */
  for (int r = 0; r < world_size && !ret; r++) {
    rc_fragment_filename(file, sizeof file, r, world_size);
    rc_path_join(path, sizeof path, iter_dir, file);
    if (unlink(path) != 0 && errno != ENOENT)
      ret = rc_fail(err, RC_EXIT_IOERR, "removing merged fragment %s: %s", path, strerror(errno));
  }
  rc_manifest_free(&m);
  return ret;
}

/* iter_<digits> only: anything else in the root is not ours to consider. */
static bool parse_iter_name(const char *name, int64_t *it) {
  if (strncmp(name, "iter_", 5) != 0 || !name[5]) return false;
  int64_t v = 0;
  for (const char *p = name + 5; *p; p++) {
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
    if (rc_path_exists(marker) && strlen(e->d_name) < sizeof best_name) {
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
