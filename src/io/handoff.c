/* handoff.c — the notes a save leaves beside its checkpoint for another
 * process: the checkpoint handed to a waiting leg before it is durable, and
 * the hashes of a save that waits to be told whether to write its shard.
 *
 * A pre-warmed resume leg waits for the checkpoint at K; the save that
 * writes it spends the second half of its time making the bytes durable
 * (the fsync of gigabytes, the whole-file SHA-256), time the waiting leg
 * could spend loading them. So a save asked to hand over (rc_shard_meta.handoff)
 * publishes a note once every byte of its shard is in the temporary file
 * and the chunk and dataset hashes are known, before the fsync:
 *
 *   CKPT_ROOT/iter_%07d.handoff.json
 *   {"format": "resumecheck-handoff", "version": 1,
 *    "temp_file": "shard_00000_of_00001.h5.tmp.<pid>",
 *    "fragment": <the shard's manifest entry as a hashes-only fragment:
 *                 size, chunk hashes, dataset hashes, no whole-file hash>}
 *
 * The note sits beside the iteration directory, never in it, so the
 * checkpoint's files are exactly those of a save without it; it is written
 * atomically but not fsync'd (it is not state: base/fsutil.h,
 * rc_write_file_visible) and removed once COMPLETE is written, or when the
 * save fails. The reader verifies every byte it loads against the note's
 * chunk and dataset hashes (checkpoint_load.c), and its loaded state counts
 * only once COMPLETE appears with a manifest whose entry for the shard
 * equals the note's (rc_checkpoint_handoff_confirm): what was loaded early
 * is then, hash for hash, the checkpoint. World size 1 only: with more
 * ranks rank 0's finalize is what makes the checkpoint, and the legs wait
 * for it as before.
 *
 * A deferred save (`train --save-deferred-at`: `run` gives it to its through
 * leg at N, --through-checkpoints on-demand) stages and hashes its state as
 * a hashes-only save does and then waits for `run`'s word: the full shard
 * only when a check at N differs, so that the check can name values. While
 * it waits, CKPT_ROOT/iter_%07d.deferred.json holds its hashes
 * ({"format": "resumecheck-deferred", "version": 1, "fragment": ...}) for
 * `run` to compare; the leg removes it once the save is done. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "io/checkpoint.h"
#include "io/checkpoint_internal.h"

#define RC_HANDOFF_FORMAT "resumecheck-handoff"
#define RC_DEFERRED_FORMAT "resumecheck-deferred"
#define RC_HANDOFF_VERSION 1
#define RC_HANDOFF_MAX ((size_t)64 << 20) /* a fragment's size, as a manifest's */

/* ---- a note: {"format": F, "version": 1, ["temp_file": T,] "fragment": ...},
 * the fragment the shard's entry as a hashes-only manifest fragment (size,
 * chunk hashes, dataset hashes; no whole-file hash), written atomically
 * without an fsync (not state: base/fsutil.h, rc_write_file_visible). */

static int write_note(const char *path, const char *format, const char *temp_file,
                      int64_t iteration, const rc_mf_shard *shard, rc_err *err) {
  size_t frag_len;
  char *frag = rc_fragment_text(iteration, 1, true, shard, &frag_len);
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "format");
  rc_jw_str(&w, format);
  rc_jw_key(&w, "version");
  rc_jw_int(&w, RC_HANDOFF_VERSION);
  if (temp_file) {
    rc_jw_key(&w, "temp_file");
    rc_jw_str(&w, temp_file);
  }
  rc_jw_key(&w, "fragment");
  rc_jw_raw(&w, frag);
  rc_jw_obj_end(&w);
  free(frag);
  int ret = rc_write_file_visible(path, w.buf, w.len, err);
  rc_jw_free(&w);
  return ret;
}

/* Reads the note at path: of `format`, one shard (world size 1) by its chunk
 * hashes, into *iteration and *shard (owned); with temp (cap bytes), its
 * temp_file too, which must then be there. RC_EXIT_NOINPUT when there is no
 * note; RC_EXIT_DATAERR when it is not one. */
static int read_note(const char *path, const char *format, int64_t *iteration, rc_mf_shard *shard,
                     char *temp, size_t cap, rc_err *err) {
  memset(shard, 0, sizeof *shard);
  char *text = NULL, jerr[256];
  size_t n = 0;
  int ret = rc_read_regular_file(path, RC_HANDOFF_MAX, true, &text, &n, err);
  if (ret) return ret;
  rc_json *root = rc_json_parse(text, n, jerr, sizeof jerr);
  free(text);
  if (!root) return rc_fail(err, RC_EXIT_DATAERR, "%s: %s", path, jerr);
  const char *f = rc_json_get_str(root, "format"), *t = rc_json_get_str(root, "temp_file");
  int64_t version = 0;
  const rc_json *frag = rc_json_get(root, "fragment");
  if (!f || strcmp(f, format) || !rc_json_get_i64(root, "version", &version) ||
      version != RC_HANDOFF_VERSION || !frag || (temp && (!t || strlen(t) >= cap))) {
    rc_json_free(root);
    return rc_fail(err, RC_EXIT_DATAERR, "%s: not a %s note of version %d", path, format,
                   RC_HANDOFF_VERSION);
  }
  if (temp) snprintf(temp, cap, "%s", t);
  rc_jw w;
  rc_jw_init(&w, false);
  rc_jw_value(&w, frag);
  rc_json_free(root);
  int world = 0;
  bool hashes_only = false;
  ret = rc_fragment_parse(w.buf, w.len, path, iteration, &world, &hashes_only, shard, err);
  rc_jw_free(&w);
  if (!ret && (world != 1 || !hashes_only || !shard->chunk_bytes)) {
    rc_mf_shard_free(shard);
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: the note must describe one shard by its chunk hashes",
                  path);
  }
  return ret;
}

static void remove_note(const char *iter_dir, void (*path_of)(char *, size_t, const char *)) {
  char path[4096];
  path_of(path, sizeof path, iter_dir);
  (void)unlink(path);
}

/* ---- the checkpoint handed over */

int rc_handoff_write(const char *iter_dir, int64_t iteration, const char *temp_file,
                     const rc_mf_shard *shard, rc_err *err) {
  char path[4096];
  rc_handoff_path(path, sizeof path, iter_dir);
  return write_note(path, RC_HANDOFF_FORMAT, temp_file, iteration, shard, err);
}

void rc_handoff_remove(const char *iter_dir) {
  remove_note(iter_dir, rc_handoff_path);
}

/* The temporary name a save of `file` gives it: FILE.tmp.<digits>. Anything
 * else in a note is refused: a reader opens only a name of the iteration
 * directory that a save can have made. */
static bool is_temp_of(const char *name, const char *file) {
  size_t n = strlen(file);
  if (strncmp(name, file, n) || strncmp(name + n, ".tmp.", 5) || !name[n + 5]) return false;
  for (const char *p = name + n + 5; *p; p++)
    if (*p < '0' || *p > '9') return false;
  return true;
}

int rc_handoff_read(const char *iter_dir, rc_handoff *h, rc_err *err) {
  memset(h, 0, sizeof *h);
  char path[4096];
  rc_handoff_path(path, sizeof path, iter_dir);
  int ret = read_note(path, RC_HANDOFF_FORMAT, &h->iteration, &h->shard, h->temp_file,
                      sizeof h->temp_file, err);
  if (!ret && !is_temp_of(h->temp_file, h->shard.file))
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: the note must name the shard's temporary file (%s.tmp.PID)", path,
                  h->shard.file);
  if (ret) rc_handoff_free(h);
  return ret;
}

void rc_handoff_free(rc_handoff *h) {
  rc_mf_shard_free(&h->shard);
  memset(h, 0, sizeof *h);
}

/* ---- the hashes of a deferred save */

int rc_deferred_note_write(const char *iter_dir, int64_t iteration, const rc_mf_shard *shard,
                           rc_err *err) {
  char path[4096];
  rc_deferred_path(path, sizeof path, iter_dir);
  return write_note(path, RC_DEFERRED_FORMAT, NULL, iteration, shard, err);
}

int rc_deferred_note_read(const char *iter_dir, int64_t *iteration, rc_mf_shard *shard,
                          rc_err *err) {
  char path[4096];
  rc_deferred_path(path, sizeof path, iter_dir);
  return read_note(path, RC_DEFERRED_FORMAT, iteration, shard, NULL, 0, err);
}

void rc_deferred_note_remove(const char *iter_dir) {
  remove_note(iter_dir, rc_deferred_path);
}
