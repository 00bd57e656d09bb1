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

int rc_handoff_write(const char *iter_dir, int64_t iteration, const char *temp_file,
                     const rc_mf_shard *shard, rc_err *err) {
  size_t frag_len;
  char *frag = rc_fragment_text(iteration, 1, true, shard, &frag_len);
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "format");
  rc_jw_str(&w, RC_HANDOFF_FORMAT);
  rc_jw_key(&w, "version");
  rc_jw_int(&w, RC_HANDOFF_VERSION);
  rc_jw_key(&w, "temp_file");
  rc_jw_str(&w, temp_file);
  rc_jw_key(&w, "fragment");
  rc_jw_raw(&w, frag);
  rc_jw_obj_end(&w);
  free(frag);
  char path[4096];
  rc_handoff_path(path, sizeof path, iter_dir);
  int ret = rc_write_file_visible(path, w.buf, w.len, err);
  rc_jw_free(&w);
  return ret;
}

void rc_handoff_remove(const char *iter_dir) {
  char path[4096];
  rc_handoff_path(path, sizeof path, iter_dir);
  (void)unlink(path);
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

static int parse_note(const char *text, size_t n, const char *what, rc_handoff *h, rc_err *err) {
  char jerr[256];
  rc_json *root = rc_json_parse(text, n, jerr, sizeof jerr);
  if (!root) return rc_fail(err, RC_EXIT_DATAERR, "%s: %s", what, jerr);
  int ret = RC_OK;
  const char *format = rc_json_get_str(root, "format"), *temp = rc_json_get_str(root, "temp_file");
  int64_t version = 0;
  const rc_json *frag = rc_json_get(root, "fragment");
  if (!format || strcmp(format, RC_HANDOFF_FORMAT) || !rc_json_get_i64(root, "version", &version) ||
      version != RC_HANDOFF_VERSION || !temp || !frag) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: not a %s note of version %d", what, RC_HANDOFF_FORMAT,
                  RC_HANDOFF_VERSION);
    goto done;
  }
  rc_jw w;
  rc_jw_init(&w, false);
  rc_jw_value(&w, frag);
  int world = 0;
  bool hashes_only = false;
  ret = rc_fragment_parse(w.buf, w.len, what, &h->iteration, &world, &hashes_only, &h->shard, err);
  rc_jw_free(&w);
  if (ret) goto done;
  if (world != 1 || !hashes_only || !h->shard.chunk_bytes || strlen(temp) >= sizeof h->temp_file ||
      !is_temp_of(temp, h->shard.file)) {
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: the note must describe one shard (world size 1) by its chunk hashes and name"
                  " its temporary file (%s.tmp.PID)",
                  what, h->shard.file);
    goto done;
  }
  snprintf(h->temp_file, sizeof h->temp_file, "%s", temp);
done:
  rc_json_free(root);
  if (ret) rc_handoff_free(h);
  return ret;
}

int rc_handoff_read(const char *iter_dir, rc_handoff *h, rc_err *err) {
  memset(h, 0, sizeof *h);
  char path[4096];
  rc_handoff_path(path, sizeof path, iter_dir);
  char *text = NULL;
  size_t n = 0;
  int ret = rc_read_regular_file(path, RC_HANDOFF_MAX, true, &text, &n, err);
  if (!ret) ret = parse_note(text, n, path, h, err);
  free(text);
  return ret;
}

void rc_handoff_free(rc_handoff *h) {
  rc_mf_shard_free(&h->shard);
  memset(h, 0, sizeof *h);
}

/* ---- the hashes of a deferred save */

int rc_deferred_note_write(const char *iter_dir, int64_t iteration, const rc_mf_shard *shard,
                           rc_err *err) {
  size_t frag_len;
  char *frag = rc_fragment_text(iteration, 1, true, shard, &frag_len);
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "format");
  rc_jw_str(&w, RC_DEFERRED_FORMAT);
  rc_jw_key(&w, "version");
  rc_jw_int(&w, RC_HANDOFF_VERSION);
  rc_jw_key(&w, "fragment");
  rc_jw_raw(&w, frag);
  rc_jw_obj_end(&w);
  free(frag);
  char path[4096];
  rc_deferred_path(path, sizeof path, iter_dir);
  int ret = rc_write_file_visible(path, w.buf, w.len, err);
  rc_jw_free(&w);
  return ret;
}

int rc_deferred_note_read(const char *iter_dir, int64_t *iteration, rc_mf_shard *shard,
                          rc_err *err) {
  memset(shard, 0, sizeof *shard);
  char path[4096];
  rc_deferred_path(path, sizeof path, iter_dir);
  char *text = NULL;
  size_t n = 0;
  int ret = rc_read_regular_file(path, RC_HANDOFF_MAX, true, &text, &n, err);
  if (ret) return ret;
  char jerr[256];
  rc_json *root = rc_json_parse(text, n, jerr, sizeof jerr);
  free(text);
  if (!root) return rc_fail(err, RC_EXIT_DATAERR, "%s: %s", path, jerr);
  const char *format = rc_json_get_str(root, "format");
  int64_t version = 0;
  const rc_json *frag = rc_json_get(root, "fragment");
  if (!format || strcmp(format, RC_DEFERRED_FORMAT) || !rc_json_get_i64(root, "version", &version) ||
      version != RC_HANDOFF_VERSION || !frag) {
    rc_json_free(root);
    return rc_fail(err, RC_EXIT_DATAERR, "%s: not a %s note of version %d", path,
                   RC_DEFERRED_FORMAT, RC_HANDOFF_VERSION);
  }
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

void rc_deferred_note_remove(const char *iter_dir) {
  char path[4096];
  rc_deferred_path(path, sizeof path, iter_dir);
  (void)unlink(path);
}
