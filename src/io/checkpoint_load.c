/* checkpoint_load.c — validated loads (the ordered checks of checkpoint.h).
 *
 * The bytes are trusted step by step: the marker vouches for the manifest
 * (COMPLETE holds its SHA-256), the manifest for each shard's size and
 * hashes (every chunk's, on several threads, where the manifest records
 * them; else the whole file's), and only a shard whose every byte hashes
 * right is handed to libhdf5, from memory. Then the shard's /meta and datasets are checked
 * against what this run expects, all before a byte of tensor data is
 * copied, so a rejected load costs little and every rejection names the
 * file and the field. Nothing is written. */
#include "io/checkpoint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "io/checkpoint_internal.h"

/* ---- config comparison: name the first differing key with both values. */

/* Compact JSON of a value, cut to fit a one-line message. */
static void value_text(const rc_json *v, char *buf, size_t cap) {
  if (!v) {
    snprintf(buf, cap, "(absent)");
    return;
  }
  rc_jw w;
  rc_jw_init(&w, false);
  rc_jw_value(&w, v);
  if (w.len + 1 > cap && cap > 4)
    snprintf(buf, cap, "%.*s...", (int)(cap - 4), w.buf);
  else
    snprintf(buf, cap, "%s", w.buf ? w.buf : "");
  rc_jw_free(&w);
}

static bool json_equal(const rc_json *a, const rc_json *b) {
  if (a->type != b->type) return false;
  switch (a->type) {
  case RC_JSON_NULL:
    return true;
  case RC_JSON_BOOL:
    return a->boolean == b->boolean;
  case RC_JSON_NUM:
    if (a->is_int && b->is_int) return a->i64 == b->i64;
    return a->num == b->num;
  case RC_JSON_STR:
    return !strcmp(a->str, b->str);
  case RC_JSON_ARR:
    if (a->nkids != b->nkids) return false;
    for (int i = 0; i < a->nkids; i++)
      if (!json_equal(&a->kids[i], &b->kids[i])) return false;
    return true;
  case RC_JSON_OBJ:
    if (a->nkids != b->nkids) return false;
    for (int i = 0; i < a->nkids; i++) {
      const rc_json *o = rc_json_get(b, a->kids[i].key);
      if (!o || !json_equal(&a->kids[i], o)) return false;
    }
    return true;
  }
  return false;
}

static int cmp_cstr(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Walks the union of both objects' keys in sorted order (descending into
 * nested objects as "a.b"); returns true with the key path and both values
 * (NULL when absent on one side) at the first difference. */
static bool first_diff(const rc_json *a, const rc_json *b, const char *prefix, char *key,
                       size_t cap, const rc_json **va, const rc_json **vb) {
  int n = a->nkids + b->nkids;
  const char **keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
  if (!keys) return false;
  for (int i = 0; i < a->nkids; i++) keys[i] = a->kids[i].key;
  for (int i = 0; i < b->nkids; i++) keys[a->nkids + i] = b->kids[i].key;
  qsort(keys, (size_t)n, sizeof *keys, cmp_cstr);
  bool found = false;
  for (int i = 0; i < n && !found; i++) {
    if (i > 0 && !strcmp(keys[i], keys[i - 1])) continue;
    const rc_json *x = rc_json_get(a, keys[i]), *y = rc_json_get(b, keys[i]);
    char path[512];
    snprintf(path, sizeof path, "%s%s", prefix, keys[i]);
    if (x && y && x->type == RC_JSON_OBJ && y->type == RC_JSON_OBJ) {
      char sub[sizeof path + 2];
      snprintf(sub, sizeof sub, "%s.", path);
      found = first_diff(x, y, sub, key, cap, va, vb);
    } else if (!x || !y || !json_equal(x, y)) {
      snprintf(key, cap, "%s", path);
      *va = x;
      *vb = y;
      found = true;
    }
  }
  free(keys);
  return found;
}

static int config_mismatch(const char *what, const char *saved, const char *saved_sha,
                           const char *mine, const char *mine_sha, rc_err *err) {
  if (!mine)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: config mismatch: the checkpoint's config_sha256 is %s, this run's is %s",
                   what, saved_sha, mine_sha);
  rc_json *a = rc_json_parse(saved, strlen(saved), NULL, 0);
  rc_json *b = rc_json_parse(mine, strlen(mine), NULL, 0);
  int ret;
  char key[512], va_text[400], vb_text[400];
  const rc_json *va = NULL, *vb = NULL;
  if (a && b && a->type == RC_JSON_OBJ && b->type == RC_JSON_OBJ &&
      first_diff(a, b, "", key, sizeof key, &va, &vb)) {
    value_text(va, va_text, sizeof va_text);
    value_text(vb, vb_text, sizeof vb_text);
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: config mismatch: '%s' is %s in the checkpoint, %s in this run", what, key,
                  va_text, vb_text);
  } else if (a && b && json_equal(a, b)) {
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: config mismatch: same keys and values, different text (not canonical JSON?);"
                  " config_sha256 %s in the checkpoint, %s in this run",
                  what, saved_sha, mine_sha);
  } else {
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: config mismatch: config_sha256 %s in the checkpoint, %s in this run%s", what,
                  saved_sha, mine_sha, (!a || !b) ? " (a config is not a JSON object)" : "");
  }
  rc_json_free(a);
  rc_json_free(b);
  return ret;
}

/* ---- dataset checks */

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t cap) {
  size_t o = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, i ? ", " : "", shape[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

static int cmp_path_ptr(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static bool in_sorted(char *const *sorted, int n, const char *path) {
  return bsearch(&path, sorted, (size_t)n, sizeof *sorted, cmp_path_ptr) != NULL;
}

/* One dataset's dtype and shape against the expected tensor. */
static int check_one(hid_t fid, const char *what, const rc_tensor *t, rc_err *err) {
  int ret = RC_OK;
  hid_t ds = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
  H5_CHECK(ds = H5Dopen2(fid, t->path, H5P_DEFAULT), RC_EXIT_DATAERR, "%s: opening %s", what,
           t->path);
  H5_CHECK(type = H5Dget_type(ds), RC_EXIT_DATAERR, "%s: type of %s", what, t->path);
  H5_CHECK(space = H5Dget_space(ds), RC_EXIT_DATAERR, "%s: dataspace of %s", what, t->path);
  if (H5Tequal(type, rc_h5_file_type(t->dtype)) <= 0) {
    char found[64];
    rc_h5_type_name(type, found, sizeof found);
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: dataset %s has dtype %s, expected %s", what, t->path,
                  found, rc_dtype_name(t->dtype));
  } else {
    H5S_class_t cls = H5Sget_simple_extent_type(space);
    int nd = H5Sget_simple_extent_ndims(space);
    hsize_t dims[H5S_MAX_RANK];
    int64_t got[H5S_MAX_RANK];
    bool same =
        (cls == H5S_SCALAR && t->ndim == 0) || (cls == H5S_SIMPLE && nd == t->ndim && nd > 0 &&
                                                H5Sget_simple_extent_dims(space, dims, NULL) == nd);
    for (int d = 0; same && d < nd; d++) same = (int64_t)dims[d] == t->shape[d];
    if (!same) {
      char want_s[128], got_s[200];
      shape_text(t->shape, t->ndim, want_s, sizeof want_s);
      if (cls == H5S_SIMPLE && nd > 0 && H5Sget_simple_extent_dims(space, dims, NULL) == nd) {
        for (int d = 0; d < nd; d++) got[d] = (int64_t)dims[d];
        shape_text(got, nd, got_s, sizeof got_s);
      } else {
        snprintf(got_s, sizeof got_s, cls == H5S_SCALAR ? "[] (scalar)" : "(null dataspace)");
      }
      ret = rc_fail(err, RC_EXIT_DATAERR, "%s: dataset %s has shape %s, expected %s", what, t->path,
                    got_s, want_s);
    }
  }
done:
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (ds >= 0) H5Dclose(ds);
  return ret;
}

/* Presence both ways, then each dataset's dtype and shape, before reading. */
static int check_datasets(hid_t fid, const char *what, const rc_state *state, rc_err *err) {
  int ret = RC_OK, nfile = 0;
  char **file = NULL;
  const char **want = NULL;
  if ((ret = rc_h5_list_datasets(fid, what, &file, &nfile, err))) return ret;
  want = malloc((size_t)(state->count ? state->count : 1) * sizeof *want);
  if (!want) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", what);
    goto done;
  }
  for (int i = 0; i < state->count; i++) want[i] = state->tensors[i].path;
  qsort(want, (size_t)state->count, sizeof *want, cmp_path_ptr);
  for (int i = 1; i < state->count; i++)
    if (!strcmp(want[i], want[i - 1])) {
      ret = rc_fail(err, RC_EXIT_SOFTWARE, "expected state lists %s twice", want[i]);
      goto done;
    }
  const char *unexpected = NULL;
  int nunexpected = 0;
  for (int i = 0; i < nfile; i++)
    if (!in_sorted((char *const *)want, state->count, file[i]) && nunexpected++ == 0)
      unexpected = file[i];
  for (int i = 0; i < state->count; i++) {
    const rc_tensor *t = &state->tensors[i];
    if (in_sorted(file, nfile, t->path)) continue;
    char shp[128];
    shape_text(t->shape, t->ndim, shp, sizeof shp);
    if (unexpected)
      ret = rc_fail(err, RC_EXIT_DATAERR,
                    "%s: missing dataset %s (expected %s %s); the shard has %d dataset(s) this run"
                    " does not expect, first %s",
                    what, t->path, rc_dtype_name(t->dtype), shp, nunexpected, unexpected);
    else
      ret = rc_fail(err, RC_EXIT_DATAERR, "%s: missing dataset %s (expected %s %s)", what, t->path,
                    rc_dtype_name(t->dtype), shp);
    goto done;
  }
  if (unexpected) {
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: unexpected dataset %s (not in this run's state; %d such)", what, unexpected,
                  nunexpected);
    goto done;
  }
  for (int i = 0; i < state->count && !ret; i++)
    ret = check_one(fid, what, &state->tensors[i], err);
done:
  free(want);
  rc_h5_free_paths(file, nfile);
  return ret;
}

/* Where dataset `path` lies in the image: a contiguous, allocated region
 * of exactly the tensor's size inside the file (the structure check and
 * check_one already admitted its layout, dtype and shape). */
static int locate(hid_t fid, const char *what, const rc_tensor *t, size_t image_size,
                  size_t *offset, rc_err *err) {
  int ret = RC_OK;
  hid_t ds = H5I_INVALID_HID;
  size_t n = rc_tensor_nbytes(t);
  H5_CHECK(ds = H5Dopen2(fid, t->path, H5P_DEFAULT), RC_EXIT_DATAERR, "%s: opening %s", what,
           t->path);
  haddr_t off = H5Dget_offset(ds);
  hsize_t stored = H5Dget_storage_size(ds);
  if (off == HADDR_UNDEF || stored != n || off > image_size || n > image_size - off)
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: dataset %s: its %zu bytes are not one contiguous region inside the file",
                  what, t->path, n);
  else
    *offset = (size_t)off;
done:
  if (ds >= 0) H5Dclose(ds);
  return ret;
}

static int cmp_mf_path(const void *x, const void *y) {
  return strcmp((*(const rc_mf_dataset *const *)x)->path, (*(const rc_mf_dataset *const *)y)->path);
}

/* The dataset hashes a load took while it read the file, at the offsets
 * the layout predicted (see `predict`); used for a dataset whose real
 * offset is the predicted one. */
typedef struct {
  const uint64_t *offset; /* per state tensor */
  char (*hex)[RC_SHA256_HEX];
} predicted;

/* What read_datasets works from, all owned: per state tensor its
 * destination, source in the image, size, hash and manifest entry; the
 * manifest's datasets by path; and the hash jobs still to run (t*, which:
 * the tensor each job is for). */
typedef struct {
  void **dst;
  const void **src;
  size_t *n;
  char (*hex)[RC_SHA256_HEX];
  const rc_mf_dataset **listed;
  const rc_mf_dataset **want;
  void **tdst;
  const void **tsrc;
  size_t *tn;
  int *which;
  char (*thex)[RC_SHA256_HEX];
  bool *deferred; /* per state tensor: its hash is left to the caller */
} read_plan;

static void read_plan_free(read_plan *p) {
  free(p->deferred);
  free(p->thex);
  free(p->which);
  free(p->tn);
  free(p->tsrc);
  free(p->tdst);
  free(p->want);
  free(p->listed);
  free(p->hex);
  free(p->n);
  free(p->src);
  free(p->dst);
}

/* false when out of memory (then read_plan_free still frees what was got). */
static bool read_plan_alloc(read_plan *p, int count, int nlisted) {
  size_t c = (size_t)(count ? count : 1);
  p->dst = calloc(c, sizeof *p->dst);
  p->src = calloc(c, sizeof *p->src);
  p->n = calloc(c, sizeof *p->n);
  p->hex = calloc(c, sizeof *p->hex);
  p->listed = calloc((size_t)(nlisted ? nlisted : 1), sizeof *p->listed);
  p->want = calloc(c, sizeof *p->want);
  p->tdst = calloc(c, sizeof *p->tdst);
  p->tsrc = calloc(c, sizeof *p->tsrc);
  p->tn = calloc(c, sizeof *p->tn);
  p->which = calloc(c, sizeof *p->which);
  p->thex = calloc(c, sizeof *p->thex);
  p->deferred = calloc(c, sizeof *p->deferred);
  return p->dst && p->src && p->n && p->hex && p->listed && p->want && p->tdst && p->tsrc &&
         p->tn && p->which && p->thex && p->deferred;
}

/* Each tensor's manifest entry and where its bytes lie in the image (a
 * tensor with no bytes points at the image's start: nothing is copied). */
static int plan_sources(hid_t fid, const char *what, const unsigned char *image, size_t size,
                        const rc_mf_shard *entry, bool borrow, const rc_state *state, read_plan *p,
                        rc_err *err) {
  int ret = RC_OK;
  for (int i = 0; i < entry->ndatasets; i++) p->listed[i] = &entry->datasets[i];
  qsort(p->listed, (size_t)entry->ndatasets, sizeof *p->listed, cmp_mf_path);
  for (int i = 0; i < state->count && !ret; i++) {
    const rc_tensor *t = &state->tensors[i];
    rc_mf_dataset key;
    const rc_mf_dataset *kp = &key;
    snprintf(key.path, sizeof key.path, "%s", t->path);
    const rc_mf_dataset **hit =
        bsearch(&kp, p->listed, (size_t)entry->ndatasets, sizeof *p->listed, cmp_mf_path);
    if (!hit) {
      ret = rc_fail(err, RC_EXIT_DATAERR, "%s: dataset %s is not listed in %s", what, t->path,
                    RC_MANIFEST_NAME);
      break;
    }
    p->want[i] = *hit;
    p->n[i] = rc_tensor_nbytes(t);
    p->dst[i] = t->data;
    size_t off = 0;
    if (p->n[i] == 0) {
      p->src[i] = image; /* nothing copied; the hash is of no bytes */
      continue;
    }
    if (!t->data && !borrow) {
      ret = rc_fail(err, RC_EXIT_SOFTWARE, "load: no buffer for %s", t->path);
      break;
    }
    if ((ret = locate(fid, what, t, size, &off, err))) break;
    p->src[i] = image + off;
  }
  return ret;
}

/* rc_load_into.deferred: the borrowed tensors' hashes are left to the
 * caller (their bytes, where they lie, and what the manifest says); the
 * plan then hashes only the tensors it copies. */
static int defer_borrowed(const char *what, int count, read_plan *p, rc_load_deferred *d,
                          rc_err *err) {
  size_t c = (size_t)(count ? count : 1);
  d->src = calloc(c, sizeof *d->src);
  d->n = calloc(c, sizeof *d->n);
  d->want = calloc(c, sizeof *d->want);
  d->path = calloc(c, sizeof *d->path);
  if (!d->src || !d->n || !d->want || !d->path)
    return rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", what);
  snprintf(d->what, sizeof d->what, "%s", what);
  snprintf(d->source, sizeof d->source, "%s", RC_MANIFEST_NAME);
  for (int i = 0; i < count; i++) {
    if (p->dst[i] || p->n[i] == 0) continue; /* copied (and hashed) here, or no bytes */
    d->src[d->count] = p->src[i];
    d->n[d->count] = p->n[i];
    memcpy(d->want[d->count], p->want[i]->sha256, RC_SHA256_HEX);
    memcpy(d->path[d->count], p->want[i]->path, RC_PATH_MAX);
    d->count++;
    p->deferred[i] = true;
  }
  return RC_OK;
}

int rc_load_deferred_check(const rc_load_deferred *d, int threads, rc_err *err) {
  if (!d || d->count == 0) return RC_OK;
  char(*hex)[RC_SHA256_HEX] = calloc((size_t)d->count, sizeof *hex);
  if (!hex) return rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", d->what);
  rc_sha256_many(d->src, d->n, d->count, threads, hex);
  int ret = RC_OK;
  for (int k = 0; k < d->count && !ret; k++)
    if (strcmp(hex[k], d->want[k]))
      ret = rc_fail(err, RC_EXIT_DATAERR,
                    "%s: dataset %s: SHA-256 is %s, %s says %s (the file matches its file"
                    " hashes: the manifest's entry for this dataset is wrong)",
                    d->what, d->path[k], hex[k], d->source, d->want[k]);
  free(hex);
  return ret;
}

void rc_load_deferred_free(rc_load_deferred *d) {
  if (!d) return;
  free(d->src), free(d->n), free(d->want), free(d->path);
  memset(d, 0, sizeof *d);
}

/* Copies and hashes in one pass. Borrowed tensors (NULL data) are hashed
 * where they are, in the image; those hashed while the file was read, at
 * this very offset, are not hashed again. */
static void copy_and_hash(const unsigned char *image, const predicted *pred, int count,
                          read_plan *p) {
  int todo = 0;
  for (int i = 0; i < count; i++) {
    if (p->deferred[i]) continue; /* hex stays "": checked by the caller */
    bool known = pred && !p->dst[i] && p->n[i] > 0 && pred->hex[i][0] &&
                 pred->offset[i] == (uint64_t)((const unsigned char *)p->src[i] - image);
    if (known)
      memcpy(p->hex[i], pred->hex[i], RC_SHA256_HEX);
    else {
      p->tdst[todo] = p->dst[i];
      p->tsrc[todo] = p->src[i];
      p->tn[todo] = p->n[i];
      p->which[todo++] = i;
    }
  }
  rc_sha256_copy_many(p->tdst, p->tsrc, p->tn, todo, 0, p->thex);
  for (int k = 0; k < todo; k++) memcpy(p->hex[p->which[k]], p->thex[k], RC_SHA256_HEX);
}

/* Copies every dataset out of the verified image into the state's buffers
 * and checks its SHA-256 against the manifest as it goes: one pass over the
 * bytes, on as many threads as there are datasets and cores. The whole
 * file's hash already matched, so a dataset whose hash differs means a
 * manifest whose per-dataset entry was forged or mis-written (COMPLETE was
 * rewritten to match it): refused, naming the dataset. Only then do
 * borrowed tensors point into the image. */
static int read_datasets(hid_t fid, const char *what, const unsigned char *image, size_t size,
                         const rc_mf_shard *entry, bool borrow, const predicted *pred,
                         rc_load_deferred *deferred, rc_state *state, rc_err *err) {
  int count = state->count, ret = RC_OK;
  read_plan p = {0};
  if (!read_plan_alloc(&p, count, entry->ndatasets)) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", what);
    goto done;
  }
  if ((ret = plan_sources(fid, what, image, size, entry, borrow, state, &p, err))) goto done;
  if (deferred && (ret = defer_borrowed(what, count, &p, deferred, err))) goto done;
  copy_and_hash(image, pred, count, &p);
  for (int i = 0; i < count && !ret; i++)
    if (!p.deferred[i] && strcmp(p.hex[i], p.want[i]->sha256))
      ret = rc_fail(err, RC_EXIT_DATAERR,
                    "%s: dataset %s: SHA-256 is %s, %s says %s (the file matches its file"
                    " hashes: the manifest's entry for this dataset is wrong)",
                    what, state->tensors[i].path, p.hex[i], RC_MANIFEST_NAME, p.want[i]->sha256);
  for (int i = 0; i < count && !ret; i++)
    if (!state->tensors[i].data && p.n[i] > 0) state->tensors[i].data = (void *)p.src[i];
done:
  read_plan_free(&p);
  return ret;
}

/* ---- the load */

/* Everything after the hash check: the shard is now known to be the bytes
 * the manifest lists; check that it is the shard this run expects. */
static int load_image(const char *what, const unsigned char *buf, size_t n,
                      const rc_shard_meta *meta, const rc_mf_shard *entry, int64_t iteration,
                      bool borrow, const predicted *pred, rc_load_deferred *deferred,
                      rc_state *state, rc_err *err) {
  rc_h5_image_ref ref = {buf, n};
  hid_t fid;
  rc_meta_read m;
  int ret = rc_h5_open_image(&ref, what, &fid, err);
  if (ret) return ret;
  if ((ret = rc_h5_read_meta(fid, what, &m, err))) goto close;
  if (strcmp(m.format, RC_SHARD_FORMAT)) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: /meta format is '%s', expected '%s'", what, m.format,
                  RC_SHARD_FORMAT);
  } else if (m.format_version != RC_SHARD_FORMAT_VERSION) {
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: unknown shard format version %" PRId64 " (this build reads version %d)",
                  what, m.format_version, RC_SHARD_FORMAT_VERSION);
  } else if (m.world_size != meta->world_size) {
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: world size mismatch: the shard was saved with world size %" PRId64
                  ", this run has %d",
                  what, m.world_size, meta->world_size);
  } else if (m.rank != meta->rank) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: /meta rank is %" PRId64 ", expected %d", what, m.rank,
                  meta->rank);
  } else if (m.iteration != iteration) {
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: /meta iteration is %" PRId64 ", the manifest says %" PRId64, what,
                  m.iteration, iteration);
  }
  if (ret) goto free_meta;
  char sha[RC_SHA256_HEX], mine_sha[RC_SHA256_HEX];
  rc_sha256_hex(m.config, strlen(m.config), sha);
  if (strcmp(sha, m.config_sha256)) {
    ret =
        rc_fail(err, RC_EXIT_DATAERR, "%s: /meta config_sha256 does not match /meta config", what);
    goto free_meta;
  }
  if (meta->config_json || meta->config_sha256) {
    if (meta->config_sha256)
      snprintf(mine_sha, sizeof mine_sha, "%s", meta->config_sha256);
    else
      rc_sha256_hex(meta->config_json, strlen(meta->config_json), mine_sha);
    if (strcmp(mine_sha, m.config_sha256)) {
      ret = config_mismatch(what, m.config, m.config_sha256, meta->config_json, mine_sha, err);
      goto free_meta;
    }
  }
  if ((ret = check_datasets(fid, what, state, err))) goto free_meta;
  ret = read_datasets(fid, what, buf, n, entry, borrow, pred, deferred, state, err);
free_meta:
  rc_meta_read_free(&m);
close:
  if (H5Fclose(fid) < 0 && !ret) ret = rc_h5_fail(err, RC_EXIT_IOERR, "%s: closing", what);
  return ret;
}

/* Threads for the dataset hashes beside the chunk readers: the datasets
 * are one pass over the file like the chunks, and the largest dataset's
 * one stream, not the thread count, is what they wait on. */
enum { FOLLOW_THREADS = 8 };

/* Bench knobs (bench/gpu_session.sh part loadscan; bits do not depend on
 * them): RC_LOAD_THREADS, the chunk readers (default: the online CPUs, at
 * most 16), and RC_LOAD_FOLLOW_THREADS, the dataset hashers beside them
 * (default FOLLOW_THREADS; 0: none, the datasets hashed after the read). */
static int env_threads(const char *name, int fallback) {
  const char *v = getenv(name);
  if (!v || !*v) return fallback;
  long n = strtol(v, NULL, 10);
  return n < 0 ? fallback : n > 64 ? 64 : (int)n;
}

/* Where the expected state's datasets lie in a file of `bytes` bytes, as
 * the writer would lay it out (its layout, no data), and the follow jobs
 * that hash them (by offset) while the file is read. ok only when the
 * layout is of the file's size. */
typedef struct {
  bool ok;
  uint64_t *offset, *start, *end; /* offset per state tensor; start/end per job, by offset */
  int *order;                     /* follow job k is tensor order[k] */
  char (*hex)[RC_SHA256_HEX];     /* per state tensor */
  char (*job_hex)[RC_SHA256_HEX]; /* per follow job */
  rc_read_follow follow;
  /* rc_load_into.landed, told per follow job (landed_job) */
  const rc_load_into *into;
  const unsigned char *dst;
} prediction;

/* rc_read_follow.landed: follow job k's bytes are in dst */
static void landed_job(void *ctx, int k) {
  prediction *p = ctx;
  p->into->landed(p->into->landed_ctx, p->order[k], p->dst + p->start[k]);
}

static void prediction_free(prediction *p) {
  free(p->offset), free(p->start), free(p->end), free(p->order), free(p->hex), free(p->job_hex);
  memset(p, 0, sizeof *p);
}

static void predict(const rc_shard_meta *meta, int64_t iteration, const rc_state *state,
                    uint64_t bytes, const unsigned char *dst, const rc_load_into *into,
                    prediction *p) {
  rc_shard_meta at = *meta;
  at.iteration = iteration;
  rc_shard_image layout;
  rc_err ignored = {0};
  if (state->count == 0 || !meta->config_json ||
      rc_shard_build_layout(&at, state, &layout, &ignored) != RC_OK)
    return;
  int n = state->count;
  p->offset = calloc((size_t)n, sizeof *p->offset);
  p->start = calloc((size_t)n, sizeof *p->start);
  p->end = calloc((size_t)n, sizeof *p->end);
  p->order = calloc((size_t)n, sizeof *p->order);
  p->hex = calloc((size_t)n, sizeof *p->hex);
  p->job_hex = calloc((size_t)n, sizeof *p->job_hex);
  if (p->offset && p->start && p->end && p->order && p->hex && p->job_hex && layout.size == bytes) {
    int jobs = 0;
    for (int i = 0; i < n; i++) {
      p->offset[i] = layout.offset[i];
      if (rc_tensor_nbytes(&state->tensors[i]) > 0 && !state->tensors[i].data) p->order[jobs++] = i;
    }
    qsort_r(p->order, (size_t)jobs, sizeof *p->order, rc_cmp_index_by_u64, p->offset);
    for (int k = 0; k < jobs; k++) {
      p->start[k] = p->offset[p->order[k]];
      p->end[k] = p->start[k] + rc_tensor_nbytes(&state->tensors[p->order[k]]);
    }
    int follow = env_threads("RC_LOAD_FOLLOW_THREADS", FOLLOW_THREADS);
    p->follow = (rc_read_follow){jobs, p->start, p->end, follow, p->job_hex, NULL, NULL};
    if (!follow) jobs = 0;
    if (into && into->landed) {
      p->into = into, p->dst = dst;
      p->follow.landed = landed_job, p->follow.landed_ctx = p;
    }
    if (into && into->deferred) p->follow.hex = NULL; /* the caller hashes them later */
    p->ok = jobs > 0;
  }
  rc_shard_image_free(&layout);
  if (!p->ok) prediction_free(p);
}

/* After the read: the follow jobs' hashes to the tensors they belong to. */
static void prediction_collect(prediction *p) {
  for (int k = 0; p->ok && k < p->follow.count; k++)
    memcpy(p->hex[p->order[k]], p->job_hex[k], RC_SHA256_HEX);
}

/* The checkpoint is a directory with a manifest and the COMPLETE marker;
 * fills in both paths (each of cap bytes). */
static int check_complete(const char *iter_dir, char *manifest_path, char *marker_path, size_t cap,
                          rc_err *err) {
  if (!rc_is_dir(iter_dir))
    return rc_fail(err, RC_EXIT_NOINPUT, "checkpoint directory %s does not exist", iter_dir);
  rc_path_join(manifest_path, cap, iter_dir, RC_MANIFEST_NAME);
  rc_path_join(marker_path, cap, iter_dir, RC_COMPLETE_NAME);
  bool complete = rc_path_exists(marker_path);
  if (!rc_path_exists(manifest_path))
    return rc_fail(err, RC_EXIT_NOINPUT, "%s: no %s%s", iter_dir, RC_MANIFEST_NAME,
                   complete ? "" : " and no COMPLETE marker (the save never finished)");
  if (!complete)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: no COMPLETE marker: the save did not finish (crashed or still running);"
                   " refusing to load it",
                   iter_dir);
  return RC_OK;
}

/* A manifest (the one COMPLETE vouches for: rc_checkpoint_manifest_read)
 * that a load can use: of written shards, for this world size, with this
 * rank in it. */
static int check_loadable(const char *iter_dir, const rc_manifest *m, const rc_shard_meta *meta,
                          rc_err *err) {
  if (m->hashes_only)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s holds hashes only (a through leg's --save-hashes-at: the shards were hashed,"
                   " never written): it cannot be loaded",
                   iter_dir);
  /* The manifest already says how many ranks saved; checking it here gives
   * the world-size message instead of "shard file missing". */
  if (m->world_size != meta->world_size)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: world size mismatch: the checkpoint was saved with world size %d, this run"
                   " has %d",
                   iter_dir, m->world_size, meta->world_size);
  if (meta->rank < 0 || meta->rank >= meta->world_size)
    return rc_fail(err, RC_EXIT_USAGE, "load: rank %d is outside world size %d", meta->rank,
                   meta->world_size);
  return RC_OK;
}

/* RC_PROFILE (docs/cuda-backend.md): the pieces of a load on stderr. */
static double profile_mark(const char *what, double since) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
  const char *v = getenv("RC_PROFILE");
  if (what && v && *v) fprintf(stderr, "profile: load: %s %.3f s\n", what, now - since);
  return now;
}

/* This rank's shard, read and verified against its manifest entry (into
 * the caller's buffer when there is one), then checked and loaded; from the
 * file named `file` in iter_dir when not NULL (a handed-over shard's
 * temporary name), else the entry's. */
static int load_shard(const char *iter_dir, const char *file, const rc_shard_meta *meta,
                      const rc_manifest *m, rc_state *state, const rc_load_into *into,
                      rc_err *err) {
  char shard_path[4096];
  rc_shard_image shard = {0};
  prediction pr = {0};
  int ret = RC_OK;
  const rc_mf_shard *entry = &m->shards[meta->rank];
  rc_path_join(shard_path, sizeof shard_path, iter_dir, file ? file : entry->file);
  unsigned char *dst = NULL;
  double t = profile_mark(NULL, 0);
  rc_save_buffer_fn buffer = into ? into->buffer : NULL;
  if (buffer && !(dst = buffer(into->buffer_ctx, entry->bytes + 1))) {
    ret = rc_fail(err, RC_EXIT_RESOURCES, "loading %s: no host buffer of %" PRIu64 " bytes",
                  shard_path, entry->bytes + 1);
    goto done;
  }
  /* Into a buffer, the dataset hashes are taken while the file is read: at
   * the offsets the layout of the expected state gives (the writer is
   * deterministic, so they are the file's unless it was written otherwise:
   * read_datasets checks each against the real one and hashes again where
   * they differ). */
  if (dst && entry->chunk_bytes) predict(meta, m->iteration, state, entry->bytes, dst, into, &pr);
  t = profile_mark("buffer and predicted layout", t);
  ret = rc_read_shard_verified(shard_path, entry, env_threads("RC_LOAD_THREADS", 0), dst,
                               pr.ok ? &pr.follow : NULL, &shard, err);
  t = profile_mark("chunks read and verified (dataset hashes, uploads following)", t);
  if (ret) {
    if (ret == RC_EXIT_NOINPUT)
      ret = rc_fail(err, RC_EXIT_NOINPUT, "shard file %s is missing (listed in %s)", shard_path,
                    file ? "the handoff note" : RC_MANIFEST_NAME);
    goto done;
  }
  prediction_collect(&pr);
  predicted pred = {pr.offset, pr.hex};
  ret = load_image(shard_path, shard.data, shard.size, meta, entry, m->iteration, buffer != NULL,
                   pr.ok ? &pred : NULL, buffer ? into->deferred : NULL, state, err);
  profile_mark("structure, /meta, datasets checked against the manifest", t);
done:
  prediction_free(&pr);
  rc_shard_image_free(&shard);
  return ret;
}

int rc_checkpoint_manifest_read(const char *iter_dir, rc_manifest *m, rc_err *err) {
  memset(m, 0, sizeof *m);
  char manifest_path[4096], marker_path[4096];
  int ret = check_complete(iter_dir, manifest_path, marker_path, sizeof manifest_path, err);
  if (ret) return ret;
  char *text = NULL, *marker = NULL;
  size_t text_n = 0, marker_n = 0;
  /* The tool writes both as regular files, never links: anything else is
   * refused before a byte is read (a FIFO, /dev/zero, a directory). */
  ret = rc_read_regular_file(manifest_path, RC_MANIFEST_MAX, true, &text, &text_n, err);
  if (!ret) ret = rc_read_regular_file(marker_path, RC_MARKER_MAX, true, &marker, &marker_n, err);
  char sha[RC_SHA256_HEX];
  if (!ret) {
    rc_sha256_hex(text, text_n, sha);
    if (marker_n < 64 || memcmp(marker, sha, 64) != 0)
      ret = rc_fail(err, RC_EXIT_DATAERR,
                    "%s: %s does not match the SHA-256 in COMPLETE (manifest corrupt or rewritten)",
                    iter_dir, RC_MANIFEST_NAME);
  }
  if (!ret) ret = rc_manifest_parse(text, text_n, manifest_path, m, err);
  free(marker);
  free(text);
  return ret;
}

static int load(const char *iter_dir, const rc_shard_meta *meta, rc_state *state,
                const rc_load_into *into, rc_err *err) {
  rc_manifest m;
  int ret = rc_checkpoint_manifest_read(iter_dir, &m, err);
  if (!ret) ret = check_loadable(iter_dir, &m, meta, err);
  if (!ret) ret = load_shard(iter_dir, NULL, meta, &m, state, into, err);
  rc_manifest_free(&m);
  return ret;
}

int rc_checkpoint_load(const char *iter_dir, const rc_shard_meta *meta, rc_state *state,
                       rc_err *err) {
  rc_h5_quiet quiet;
  rc_h5_quiet_begin(&quiet);
  int ret = load(iter_dir, meta, state, NULL, err);
  rc_h5_quiet_end(&quiet);
  return ret;
}

int rc_checkpoint_load_into(const char *iter_dir, const rc_shard_meta *meta, rc_state *state,
                            const rc_load_into *into, rc_err *err) {
  rc_h5_quiet quiet;
  rc_h5_quiet_begin(&quiet);
  int ret = load(iter_dir, meta, state, into, err);
  rc_h5_quiet_end(&quiet);
  return ret;
}

/* ---- a checkpoint handed over before it was durable (handoff.c) */

int rc_checkpoint_load_handoff(const char *iter_dir, const rc_handoff *h, const rc_shard_meta *meta,
                               rc_state *state, const rc_load_into *into, rc_err *err) {
  if (meta->world_size != 1 || meta->rank != 0)
    return rc_fail(err, RC_EXIT_USAGE, "%s: a handed-over checkpoint is of world size 1", iter_dir);
  rc_manifest m = {.iteration = h->iteration, .world_size = 1, .shards = (rc_mf_shard *)&h->shard};
  rc_h5_quiet quiet;
  rc_h5_quiet_begin(&quiet);
  int ret = load_shard(iter_dir, h->temp_file, meta, &m, state, into, err);
  /* renamed to its final name since the note was read: the same file */
  if (ret == RC_EXIT_NOINPUT) ret = load_shard(iter_dir, NULL, meta, &m, state, into, err);
  rc_h5_quiet_end(&quiet);
  if (!ret && into && into->deferred)
    snprintf(into->deferred->source, sizeof into->deferred->source, "the handoff note");
  if (ret) {
    char note[4096];
    rc_handoff_path(note, sizeof note, iter_dir);
    rc_err_prefix(err,
                  "loading the checkpoint handed over before it was durable (%s stands for %s)",
                  note, RC_MANIFEST_NAME);
  }
  return ret;
}

/* The first field in which the manifest's entry a and the note's entry b
 * differ, into buf; false when none does. */
static bool entry_diff(const rc_mf_shard *a, const rc_mf_shard *b, char *buf, size_t cap) {
  if (strcmp(a->file, b->file) || a->bytes != b->bytes)
    return snprintf(buf, cap, "the shard: %s of %" PRIu64 " bytes, the note %s of %" PRIu64,
                    a->file, a->bytes, b->file, b->bytes),
           true;
  if (a->chunk_bytes != b->chunk_bytes || a->nchunks != b->nchunks)
    return snprintf(buf, cap, "the chunks: %d of %" PRIu64 " bytes, the note %d of %" PRIu64,
                    a->nchunks, a->chunk_bytes, b->nchunks, b->chunk_bytes),
           true;
  for (int k = 0; k < a->nchunks; k++)
    if (strcmp(a->chunk_sha256[k], b->chunk_sha256[k]))
      return snprintf(buf, cap, "chunk %d: SHA-256 %s, the note %s", k, a->chunk_sha256[k],
                      b->chunk_sha256[k]),
             true;
  if (a->ndatasets != b->ndatasets)
    return snprintf(buf, cap, "%d datasets, the note %d", a->ndatasets, b->ndatasets), true;
  for (int i = 0; i < a->ndatasets; i++) {
    const rc_mf_dataset *x = &a->datasets[i], *y = &b->datasets[i];
    bool same = !strcmp(x->path, y->path) && x->dtype == y->dtype && x->ndim == y->ndim &&
                !memcmp(x->shape, y->shape, sizeof x->shape) && !strcmp(x->sha256, y->sha256);
    if (!same)
      return snprintf(buf, cap, "dataset %d (%s): SHA-256 %s, the note %s (%s)", i, x->path,
                      x->sha256, y->sha256, y->path),
             true;
  }
  return false;
}

int rc_checkpoint_handoff_confirm(const char *iter_dir, const rc_handoff *h, rc_err *err) {
  rc_manifest m;
  int ret = rc_checkpoint_manifest_read(iter_dir, &m, err);
  char what[1024];
  if (!ret && (m.world_size != 1 || m.hashes_only))
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: completed as %s, handed over as one written shard",
                  iter_dir, m.hashes_only ? "hashes only" : "several shards");
  else if (!ret && m.iteration != h->iteration)
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s: completed as iteration %" PRId64 ", handed over as %" PRId64, iter_dir,
                  m.iteration, h->iteration);
  else if (!ret && entry_diff(&m.shards[0], &h->shard, what, sizeof what))
    ret = rc_fail(err, RC_EXIT_DATAERR,
                  "%s completed with other bytes than it handed over before they were durable "
                  "(this leg loaded those): %s lists %s",
                  iter_dir, RC_MANIFEST_NAME, what);
  rc_manifest_free(&m);
  return ret;
}
