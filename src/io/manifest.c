/* manifest.c — manifest.json and the per-rank manifest fragments.
 *
 * The manifest is what makes comparing two checkpoints cheap: it lists every
 * shard's size and SHA-256 and every dataset's dtype, shape and SHA-256, and
 * it is canonical text (sorted keys, fixed number format, one dataset per
 * line, no time stamps), so equal state gives byte-identical manifests.
 * Run-specific files (args.json) are deliberately not listed: they differ
 * between legs by construction and would make every manifest differ.
 *
 * Version 2 adds each shard's chunk hashes (chunk_bytes, chunk_sha256),
 * which let a load verify every byte on several threads; version 1 (no
 * chunk fields) is still read, and still written when a save records no
 * chunks (rc_shard_meta.chunk_bytes = RC_CHUNKS_NONE).
 *
 * A hashes-only manifest ("hashes_only": true) describes shards that were
 * never written: its entries have no whole-file "sha256" (the save does
 * not compute one) and always have chunk hashes, which then are what
 * covers every byte of each file. The reader holds both ways to that.
 *
 * Parsing is strict and validates everything the loader later relies on,
 * in particular that each shard's file name is exactly the one its rank
 * implies, so a manifest can never point the loader outside the directory. */
#include "io/checkpoint_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rc_dtype_from_name(const char *name, rc_dtype *dt) {
  static const rc_dtype all[] = {RC_DT_F32, RC_DT_F64, RC_DT_I64, RC_DT_U64, RC_DT_I32, RC_DT_I8};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (!strcmp(name, rc_dtype_name(all[i]))) {
      *dt = all[i];
      return true;
    }
  return false;
}

/* ---------------------------------------------------------------- writing */

/* One dataset as a compact one-line object, so that `diff` of two manifests
 * points at the dataset that differs. Keys sorted. */
static void dataset_json(rc_jw *w, const rc_mf_dataset *d) {
  rc_jw line;
  rc_jw_init(&line, false);
  rc_jw_obj_begin(&line);
  rc_jw_key(&line, "dtype");
  rc_jw_str(&line, rc_dtype_name(d->dtype));
  rc_jw_key(&line, "path");
  rc_jw_str(&line, d->path);
  rc_jw_key(&line, "sha256");
  rc_jw_str(&line, d->sha256);
  rc_jw_key(&line, "shape");
  rc_jw_arr_begin(&line);
  for (int i = 0; i < d->ndim; i++) rc_jw_int(&line, d->shape[i]);
  rc_jw_arr_end(&line);
  rc_jw_obj_end(&line);
  rc_jw_raw(w, line.buf);
  rc_jw_free(&line);
}

/* Chunk hashes one per line, like datasets; keys stay sorted ("bytes" <
 * "chunk_bytes" < "chunk_sha256" < "datasets"). Written only when recorded,
 * so a save without them gives the version-1 text byte for byte. The
 * whole-file "sha256" is left out of a hashes-only entry, which has none;
 * every other entry's text is what it always was. */
static void shard_json(rc_jw *w, const rc_mf_shard *s, bool hashes_only) {
  rc_jw_obj_begin(w);
  rc_jw_key(w, "bytes");
  rc_jw_uint(w, s->bytes);
  if (s->chunk_bytes) {
    rc_jw_key(w, "chunk_bytes");
    rc_jw_uint(w, s->chunk_bytes);
    rc_jw_key(w, "chunk_sha256");
    rc_jw_arr_begin(w);
    for (int k = 0; k < s->nchunks; k++) rc_jw_str(w, s->chunk_sha256[k]);
    rc_jw_arr_end(w);
  }
  rc_jw_key(w, "datasets");
  rc_jw_arr_begin(w);
  for (int i = 0; i < s->ndatasets; i++) dataset_json(w, &s->datasets[i]);
  rc_jw_arr_end(w);
  rc_jw_key(w, "file");
  rc_jw_str(w, s->file);
  rc_jw_key(w, "rank");
  rc_jw_int(w, s->rank);
  if (!hashes_only) {
    rc_jw_key(w, "sha256");
    rc_jw_str(w, s->sha256);
  }
  rc_jw_obj_end(w);
}

static char *finish(rc_jw *w, size_t *len) {
  char *out = malloc(w->len + 2);
  if (!out) {
    fprintf(stderr, "manifest: out of memory\n");
    abort();
  }
  memcpy(out, w->buf, w->len);
  out[w->len] = '\n';
  out[w->len + 1] = 0;
  *len = w->len + 1;
  rc_jw_free(w);
  return out;
}

/* Version 2 exactly when the shards carry chunk hashes (the writer gives
 * all of them or none: rc_checkpoint_finalize refuses a mix). */
static int text_version(const rc_mf_shard *s) {
  return s->chunk_bytes ? RC_MANIFEST_VERSION : RC_MANIFEST_VERSION_MIN;
}

/* Written only when true ("format" < "hashes_only" < "iteration"), so an
 * ordinary manifest is byte for byte what it was before the key existed. */
static void hashes_only_json(rc_jw *w, bool hashes_only) {
  if (!hashes_only) return;
  rc_jw_key(w, "hashes_only");
  rc_jw_bool(w, true);
}

char *rc_manifest_text(const rc_manifest *m, size_t *len) {
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "format");
  rc_jw_str(&w, RC_MANIFEST_FORMAT);
  hashes_only_json(&w, m->hashes_only);
  rc_jw_key(&w, "iteration");
  rc_jw_int(&w, m->iteration);
  rc_jw_key(&w, "shards");
  rc_jw_arr_begin(&w);
  for (int r = 0; r < m->world_size; r++) shard_json(&w, &m->shards[r], m->hashes_only);
  rc_jw_arr_end(&w);
  rc_jw_key(&w, "version");
  rc_jw_int(&w, m->world_size > 0 ? text_version(&m->shards[0]) : RC_MANIFEST_VERSION_MIN);
  rc_jw_key(&w, "world_size");
  rc_jw_int(&w, m->world_size);
  rc_jw_obj_end(&w);
  return finish(&w, len);
}

char *rc_fragment_text(int64_t iteration, int world_size, bool hashes_only, const rc_mf_shard *s,
                       size_t *len) {
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "format");
  rc_jw_str(&w, RC_FRAGMENT_FORMAT);
  hashes_only_json(&w, hashes_only);
  rc_jw_key(&w, "iteration");
  rc_jw_int(&w, iteration);
  rc_jw_key(&w, "shard");
  shard_json(&w, s, hashes_only);
  rc_jw_key(&w, "version");
  rc_jw_int(&w, text_version(s));
  rc_jw_key(&w, "world_size");
  rc_jw_int(&w, world_size);
  rc_jw_obj_end(&w);
  return finish(&w, len);
}

/* ---------------------------------------------------------------- parsing */

static bool is_sha_hex(const char *s) {
  if (!s || strlen(s) != 64) return false;
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

static int parse_dataset(const rc_json *j, const char *what, int idx, rc_mf_dataset *d,
                         rc_err *err) {
  char field[64];
  snprintf(field, sizeof field, "datasets[%d]", idx);
  if (!j || j->type != RC_JSON_OBJ)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: %s is not an object", what, field);
  const char *path = rc_json_get_str(j, "path");
  const char *dtype = rc_json_get_str(j, "dtype");
  const char *sha = rc_json_get_str(j, "sha256");
  const rc_json *shape = rc_json_get(j, "shape");
  if (!path || path[0] != '/' || strlen(path) >= RC_PATH_MAX)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: %s.path missing or not an absolute dataset path",
                   what, field);
  memcpy(d->path, path, strlen(path) + 1);
  if (!dtype || !rc_dtype_from_name(dtype, &d->dtype))
    return rc_fail(err, RC_EXIT_DATAERR, "%s: %s (%s): unknown dtype '%s'", what, field, path,
                   dtype ? dtype : "(missing)");
  if (!is_sha_hex(sha))
    return rc_fail(err, RC_EXIT_DATAERR, "%s: %s (%s): sha256 is not 64 lowercase hex digits", what,
                   field, path);
  memcpy(d->sha256, sha, RC_SHA256_HEX);
  if (!shape || shape->type != RC_JSON_ARR || shape->nkids > RC_MAX_DIMS)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: %s (%s): shape is not an array of at most %d dims",
                   what, field, path, RC_MAX_DIMS);
  d->ndim = shape->nkids;
  for (int i = 0; i < d->ndim; i++) {
    const rc_json *v = &shape->kids[i];
    if (v->type != RC_JSON_NUM || !v->is_int || v->i64 < 0)
      return rc_fail(err, RC_EXIT_DATAERR, "%s: %s (%s): shape[%d] is not a non-negative integer",
                     what, field, path, i);
    d->shape[i] = v->i64;
  }
  return RC_OK;
}

void rc_mf_chunk_range(const rc_mf_shard *s, int k, uint64_t *start, uint64_t *end) {
  *start = (uint64_t)k * s->chunk_bytes;
  *end = s->bytes - *start < s->chunk_bytes ? s->bytes : *start + s->chunk_bytes;
}

/* Version 2's chunk fields, both required; version 1 must have neither
 * (a strict reader: a field it would ignore is a manifest it misreads). */
static int parse_chunks(const rc_json *j, const char *what, int64_t version, rc_mf_shard *s,
                        rc_err *err) {
  const rc_json *cb = rc_json_get(j, "chunk_bytes"), *cs = rc_json_get(j, "chunk_sha256");
  if (version < 2) {
    if (cb || cs)
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s: shard %s: chunk_bytes/chunk_sha256 in a version 1 manifest", what,
                     s->file);
    return RC_OK;
  }
  int64_t size;
  if (!rc_json_get_i64(j, "chunk_bytes", &size) || size < (int64_t)RC_CHUNK_BYTES_MIN ||
      (uint64_t)size > RC_CHUNK_BYTES_MAX)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: shard %s: chunk_bytes missing or outside [%" PRIu64 ", %" PRIu64 "]", what,
                   s->file, RC_CHUNK_BYTES_MIN, RC_CHUNK_BYTES_MAX);
  s->chunk_bytes = (uint64_t)size;
  uint64_t want = s->bytes / s->chunk_bytes + (s->bytes % s->chunk_bytes != 0);
  if (!cs || cs->type != RC_JSON_ARR || (uint64_t)cs->nkids != want)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: shard %s: chunk_sha256 is not an array of %" PRIu64
                   " hashes (bytes / chunk_bytes, rounded up)",
                   what, s->file, want);
  if (cs->nkids > 0) {
    s->chunk_sha256 = calloc((size_t)cs->nkids, sizeof *s->chunk_sha256);
    if (!s->chunk_sha256) return rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", what);
  }
  s->nchunks = cs->nkids;
  for (int k = 0; k < cs->nkids; k++) {
    const rc_json *h = &cs->kids[k];
    if (h->type != RC_JSON_STR || !is_sha_hex(h->str))
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s: shard %s: chunk_sha256[%d] is not 64 lowercase hex digits", what, s->file,
                     k);
    memcpy(s->chunk_sha256[k], h->str, RC_SHA256_HEX);
  }
  return RC_OK;
}

/* The whole-file "sha256": required, except in a hashes-only entry, where
 * it must be absent (the save computes none; hashes-only manifests of
 * earlier builds carried one and are refused: save them again) and the
 * chunk hashes must be there, as nothing else would cover the bytes. */
static int parse_whole_sha(const rc_json *j, const char *what, int64_t version, bool hashes_only,
                           rc_mf_shard *s, rc_err *err) {
  const char *sha = rc_json_get_str(j, "sha256");
  if (hashes_only) {
    if (rc_json_get(j, "sha256"))
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s: shard %s: a whole-file sha256 in a hashes-only manifest (this build"
                     " writes none there: not a manifest of this build; save it again)",
                     what, s->file);
    if (version < 2)
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s: shard %s: a hashes-only entry without chunk hashes (chunk_sha256):"
                     " nothing would cover the file's bytes",
                     what, s->file);
    s->sha256[0] = 0;
    return RC_OK;
  }
  if (!is_sha_hex(sha))
    return rc_fail(err, RC_EXIT_DATAERR, "%s: shard %s: sha256 is not 64 lowercase hex digits",
                   what, s->file);
  memcpy(s->sha256, sha, RC_SHA256_HEX);
  return RC_OK;
}

static int parse_shard(const rc_json *j, const char *what, int64_t version, bool hashes_only,
                       int rank, int world_size, rc_mf_shard *s, rc_err *err) {
  memset(s, 0, sizeof *s);
  if (!j || j->type != RC_JSON_OBJ)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: shard entry %d is not an object", what, rank);
  int64_t r, bytes;
  if (!rc_json_get_i64(j, "rank", &r) || r != rank)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: shard entry %d has rank field missing or != %d", what,
                   rank, rank);
  s->rank = rank;
  rc_shard_filename(s->file, sizeof s->file, rank, world_size);
  const char *file = rc_json_get_str(j, "file");
  if (!file || strcmp(file, s->file))
    return rc_fail(err, RC_EXIT_DATAERR, "%s: shard entry %d names file '%s', expected '%s'", what,
                   rank, file ? file : "(missing)", s->file);
  if (!rc_json_get_i64(j, "bytes", &bytes) || bytes < 0)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: shard %s: bytes missing or negative", what, s->file);
  s->bytes = (uint64_t)bytes;
  int crc = parse_whole_sha(j, what, version, hashes_only, s, err);
  if (!crc) crc = parse_chunks(j, what, version, s, err);
  if (crc) return crc;
  const rc_json *ds = rc_json_get(j, "datasets");
  if (!ds || ds->type != RC_JSON_ARR)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: shard %s: datasets is not an array", what, s->file);
  if (ds->nkids > 0) {
    s->datasets = calloc((size_t)ds->nkids, sizeof *s->datasets);
    if (!s->datasets) return rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", what);
  }
  s->ndatasets = ds->nkids;
  for (int i = 0; i < ds->nkids; i++) {
    int rc = parse_dataset(&ds->kids[i], what, i, &s->datasets[i], err);
    if (rc) return rc;
  }
  return RC_OK;
}

/* The fields manifest and fragment share: format name, version, iteration
 * and world size, each checked. */
static int parse_header(const rc_json *root, const char *what, const char *format, int64_t *version,
                        int64_t *iteration, int *world_size, rc_err *err) {
  if (root->type != RC_JSON_OBJ)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: not a JSON object", what);
  const char *f = rc_json_get_str(root, "format");
  if (!f || strcmp(f, format))
    return rc_fail(err, RC_EXIT_DATAERR, "%s: format is '%s', expected '%s'", what,
                   f ? f : "(missing)", format);
  int64_t v, ws;
  if (!rc_json_get_i64(root, "version", &v))
    return rc_fail(err, RC_EXIT_DATAERR, "%s: version missing", what);
  if (v < RC_MANIFEST_VERSION_MIN || v > RC_MANIFEST_VERSION)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: unknown format version %" PRId64 " (this build reads versions %d to %d)",
                   what, v, RC_MANIFEST_VERSION_MIN, RC_MANIFEST_VERSION);
  *version = v;
  if (!rc_json_get_i64(root, "iteration", iteration) || *iteration < 0)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: iteration missing or negative", what);
  if (!rc_json_get_i64(root, "world_size", &ws) || ws < 1 || ws > 99999)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: world_size missing or out of range", what);
  *world_size = (int)ws;
  return RC_OK;
}

/* Optional "hashes_only": only `true` is ever written, so anything else
 * (false included) is a manifest this build did not write. */
static int parse_hashes_only(const rc_json *root, const char *what, bool *hashes_only,
                             rc_err *err) {
  const rc_json *h = rc_json_get(root, "hashes_only");
  *hashes_only = false;
  if (!h) return RC_OK;
  if (h->type != RC_JSON_BOOL || !h->boolean)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: hashes_only is present but not true", what);
  *hashes_only = true;
  return RC_OK;
}

int rc_manifest_parse(const char *text, size_t n, const char *what, rc_manifest *m, rc_err *err) {
  memset(m, 0, sizeof *m);
  char jerr[256];
  rc_json *root = rc_json_parse(text, n, jerr, sizeof jerr);
  if (!root) return rc_fail(err, RC_EXIT_DATAERR, "%s: %s", what, jerr);
  int64_t version = 0;
  int rc =
      parse_header(root, what, RC_MANIFEST_FORMAT, &version, &m->iteration, &m->world_size, err);
  if (!rc) rc = parse_hashes_only(root, what, &m->hashes_only, err);
  if (rc) goto done;
  const rc_json *shards = rc_json_get(root, "shards");
  if (!shards || shards->type != RC_JSON_ARR || shards->nkids != m->world_size) {
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s: shards is not an array of world_size (%d) entries",
                 what, m->world_size);
    goto done;
  }
  m->shards = calloc((size_t)m->world_size, sizeof *m->shards);
  if (!m->shards) {
    rc = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", what);
    goto done;
  }
  for (int r = 0; r < m->world_size && !rc; r++)
    rc = parse_shard(&shards->kids[r], what, version, m->hashes_only, r, m->world_size,
                     &m->shards[r], err);
done:
  rc_json_free(root);
  if (rc) rc_manifest_free(m);
  return rc;
}

int rc_fragment_parse(const char *text, size_t n, const char *what, int64_t *iteration,
                      int *world_size, bool *hashes_only, rc_mf_shard *s, rc_err *err) {
  memset(s, 0, sizeof *s);
  char jerr[256];
  rc_json *root = rc_json_parse(text, n, jerr, sizeof jerr);
  if (!root) return rc_fail(err, RC_EXIT_DATAERR, "%s: %s", what, jerr);
  int64_t version = 0;
  int rc = parse_header(root, what, RC_FRAGMENT_FORMAT, &version, iteration, world_size, err);
  if (!rc) rc = parse_hashes_only(root, what, hashes_only, err);
  if (!rc) {
    const rc_json *sh = rc_json_get(root, "shard");
    int64_t rank = -1;
    if (!sh || !rc_json_get_i64(sh, "rank", &rank) || rank < 0 || rank >= *world_size)
      rc = rc_fail(err, RC_EXIT_DATAERR, "%s: shard.rank missing or out of range", what);
    else
      rc = parse_shard(sh, what, version, *hashes_only, (int)rank, *world_size, s, err);
  }
  rc_json_free(root);
  if (rc) rc_mf_shard_free(s);
  return rc;
}

void rc_mf_shard_free(rc_mf_shard *s) {
  free(s->datasets);
  s->datasets = NULL;
  s->ndatasets = 0;
  free(s->chunk_sha256);
  s->chunk_sha256 = NULL;
  s->nchunks = 0;
  s->chunk_bytes = 0;
}

void rc_manifest_free(rc_manifest *m) {
  if (m->shards)
    for (int r = 0; r < m->world_size; r++) rc_mf_shard_free(&m->shards[r]);
  free(m->shards);
  m->shards = NULL;
}
