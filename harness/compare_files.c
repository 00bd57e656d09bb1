/* compare_files.c — what is compared with what: run, leg, checkpoint and
 * iteration directories, files, manifests; and the result those comparisons
 * fill (docs/design.md §7, docs/compare.md).
 *
 * Nothing is claimed about bytes that were not read. In a directory with a
 * manifest, every shard it lists is first hashed (rc_sha256_many on the
 * mapped files: every shard of both sides at once, one thread each) and
 * checked against the manifest's whole-file SHA-256; a shard that does not
 * match is a corrupt checkpoint (65). Two verified manifests that give a shard the same
 * SHA-256 then settle the pair as byte-identical. Files without a manifest
 * are compared as bytes, memory-mapped, stopping at the first difference
 * (memcmp of mapped page cache runs at ~10 GB/s here, SHA-256 at ~1.4 per
 * core). --trust-manifests skips the hashing: equal manifests then settle a
 * pair unread, and the summary says exactly that. Only a pair of HDF5 files
 * that differ goes to the slow path in compare_datasets.c, which explains
 * the difference. The result these comparisons fill, the ignore patterns
 * and the mapped files are compare_result.c's. */
#include "harness/compare_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "harness/h5_bounds.h"
#include "io/layout.h"
#include "io/manifest.h"
#include "io/sha256.h"

#define MAX_DERIVED 64 /* manifests and markers per directory */
#define RC_HF_ARGS_NAME "training_args.bin"
#define CMP_CHUNK ((size_t)8 << 20)

/* ---------------------------------------------------------------------------
 * One comparison in progress, beyond rc_cmp_ctx: how many shard pairs were
 * read (fast_path needs none). */

typedef struct {
  rc_cmp_ctx c;
  int n_read; /* shard pairs whose bytes were read (compared or verified) */
} walk_t;

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static void rel_join(char *out, size_t cap, const char *rel, const char *name) {
  if (*rel)
    snprintf(out, cap, "%s/%s", rel, name);
  else
    snprintf(out, cap, "%s", name);
}

static bool is_manifest_name(const char *name) {
  size_t n = strlen(name), m = strlen(RC_MANIFEST_NAME);
  return n >= m && !strcmp(name + n - m, RC_MANIFEST_NAME);
}

/* Files whose content follows from the shards' (compared last). */
static bool is_derived_name(const char *name) {
  return is_manifest_name(name) || !strcmp(name, RC_COMPLETE_NAME);
}

/* *first_diff: the first differing byte offset (the shorter size when one
 * file is a prefix of the other), -1 when equal. */
static void maps_equal(const rc_cmp_map *a, const rc_cmp_map *b, bool *equal, int64_t *first_diff) {
  size_t n = a->size < b->size ? a->size : b->size;
  for (size_t off = 0; off < n; off += CMP_CHUNK) {
    size_t m = n - off < CMP_CHUNK ? n - off : CMP_CHUNK;
    if (memcmp(a->data + off, b->data + off, m)) {
      size_t i = 0;
      while (a->data[off + i] == b->data[off + i]) i++;
      *equal = false;
      *first_diff = (int64_t)(off + i);
      return;
    }
  }
  *equal = a->size == b->size;
  *first_diff = *equal ? -1 : (int64_t)n;
}

static int bytes_equal(const char *pa, const char *pb, bool *equal, int64_t *first_diff,
                       rc_err *err) {
  rc_cmp_map ma, mb;
  int rc = rc_cmp_map_open(pa, &ma, err);
  if (!rc) rc = rc_cmp_map_open(pb, &mb, err);
  if (!rc) {
    maps_equal(&ma, &mb, equal, first_diff);
    rc_cmp_map_close(&mb);
  }
  rc_cmp_map_close(&ma);
  return rc;
}

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) ? -1 : (int64_t)st.st_size;
}

/* ---------------------------------------------------------------------------
 * Manifests: only what comparison needs (each shard's file, size, SHA-256
 * and its datasets' SHA-256), read leniently so that any manifest of this
 * format family can speed a comparison up. The loader's strict checks are
 * not needed here: every whole-file SHA-256 is checked against the shard's
 * bytes before it is used (verify_shards), unless --trust-manifests. The
 * per-dataset hashes are not checked that way, so only --trust-manifests
 * uses them. */

typedef struct {
  const char *file, *sha256;
  int64_t bytes;
  rc_cmp_dset_hash *dsets; /* sorted by path */
  int ndsets;
  bool verified; /* the file's bytes were hashed and match sha256 (or its chunks) */
  /* the io layer's entry when the manifest records chunk hashes (version
   * 2): the shard is then verified chunk by chunk, in parallel, and two
   * shards are equal when their chunk hashes are */
  const rc_mf_shard *chunks;
  const rc_mf_shard *io; /* the io layer's entry, whenever the strict parse succeeded */
  bool same_as_a;        /* side B: byte-identical to side A's shard of this name */
} mf_shard;

typedef struct {
  rc_json *root;
  mf_shard *shards;
  int n;
  rc_manifest io; /* the strict parse, when the manifest is one of ours */
  bool have_io;
  bool hashes_only; /* "hashes_only": true (then have_io: required) */
} manifest_t;

static void manifest_free(manifest_t *m) {
  for (int i = 0; i < m->n; i++) free(m->shards[i].dsets);
  free(m->shards);
  rc_json_free(m->root);
  if (m->have_io) rc_manifest_free(&m->io);
  memset(m, 0, sizeof *m);
}

static int dset_cmp(const void *a, const void *b) {
  return strcmp(((const rc_cmp_dset_hash *)a)->path, ((const rc_cmp_dset_hash *)b)->path);
}

static int manifest_load(const char *path, manifest_t *m, rc_err *err) {
  memset(m, 0, sizeof *m);
  char *text = NULL;
  size_t n = 0;
  int rc = rc_read_regular_file(path, RC_READ_CAP_JSON, false, &text, &n, err);
  if (rc) return rc;
  char jerr[256];
  m->root = rc_json_parse(text, n, jerr, sizeof jerr);
  rc_err ioerr = {0};
  m->have_io = m->root && rc_manifest_parse(text, n, path, &m->io, &ioerr) == RC_OK;
  free(text);
  if (!m->root) return rc_fail(err, RC_EXIT_DATAERR, "%s: malformed manifest: %s", path, jerr);
  /* A hashes-only manifest is all there is of its checkpoint: only the
   * strict parse may vouch for it. */
  const rc_json *ho = rc_json_get(m->root, "hashes_only");
  if (ho && !m->have_io) {
    manifest_free(m);
    return rc_fail(err, RC_EXIT_DATAERR, "%s: a hashes-only manifest that does not parse: %s", path,
                   ioerr.msg);
  }
  m->hashes_only = m->have_io && m->io.hashes_only;
  const rc_json *shards = rc_json_get(m->root, "shards");
  if (!shards || shards->type != RC_JSON_ARR) {
    manifest_free(m);
    return rc_fail(err, RC_EXIT_DATAERR, "%s: manifest has no 'shards' array", path);
  }
  m->shards = calloc((size_t)shards->nkids + 1, sizeof *m->shards);
  if (!m->shards) {
    manifest_free(m);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  for (int i = 0; i < shards->nkids; i++) {
    const rc_json *s = &shards->kids[i];
    mf_shard *e = &m->shards[m->n];
    e->file = rc_json_get_str(s, "file");
    /* a hashes-only entry has no whole-file hash (the strict parse saw to
     * it); its shard is decided by chunks or datasets, never by this */
    e->sha256 = m->hashes_only ? "" : rc_json_get_str(s, "sha256");
    const rc_json *ds = rc_json_get(s, "datasets");
    if (!e->file || !e->sha256 || !rc_json_get_i64(s, "bytes", &e->bytes) || strchr(e->file, '/')) {
      manifest_free(m);
      return rc_fail(err, RC_EXIT_DATAERR, "%s: shards[%d] lacks file, bytes or sha256", path, i);
    }
    for (int r = 0; m->have_io && r < m->io.world_size; r++)
      if (!strcmp(m->io.shards[r].file, e->file)) {
        e->io = &m->io.shards[r];
        if (m->io.shards[r].chunk_sha256) e->chunks = &m->io.shards[r];
      }
    m->n++;
    if (!ds || ds->type != RC_JSON_ARR || ds->nkids == 0) continue;
    e->dsets = calloc((size_t)ds->nkids, sizeof *e->dsets);
    if (!e->dsets) {
      manifest_free(m);
      return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    }
    for (int k = 0; k < ds->nkids; k++) {
      const char *p = rc_json_get_str(&ds->kids[k], "path");
      const char *h = rc_json_get_str(&ds->kids[k], "sha256");
      if (!p || !h) {
        manifest_free(m);
        return rc_fail(err, RC_EXIT_DATAERR, "%s: shards[%d].datasets[%d] lacks path or sha256",
                       path, i, k);
      }
      e->dsets[e->ndsets++] = (rc_cmp_dset_hash){p, h};
    }
    qsort(e->dsets, (size_t)e->ndsets, sizeof *e->dsets, dset_cmp);
  }
  return RC_OK;
}

static const mf_shard *manifest_find(const manifest_t *m, const char *file) {
  for (int i = 0; m && i < m->n; i++)
    if (!strcmp(m->shards[i].file, file)) return &m->shards[i];
  return NULL;
}

/* True when both manifests list the same files with the same SHA-256: then
 * a difference between the manifests is not explained by the shards. */
static bool manifests_agree_on_files(const manifest_t *a, const manifest_t *b) {
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++) {
    const mf_shard *e = manifest_find(b, a->shards[i].file);
    if (!e || strcmp(e->sha256, a->shards[i].sha256)) return false;
  }
  return true;
}

/* ---------------------------------------------------------------------------
 * Directory listings, sorted by name. */

typedef enum { ENT_FILE, ENT_DIR, ENT_OTHER } ent_type;

typedef struct {
  char name[256];
  ent_type type;
} dent;

typedef struct {
  dent *v;
  int n;
} dir_list;

static int dent_cmp(const void *a, const void *b) {
  return strcmp(((const dent *)a)->name, ((const dent *)b)->name);
}

static int list_dir(const char *path, dir_list *l, rc_err *err) {
  memset(l, 0, sizeof *l);
  DIR *d = opendir(path);
  if (!d) return rc_fail(err, RC_EXIT_IOERR, "cannot list %s: %s", path, strerror(errno));
  int cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (strlen(e->d_name) >= sizeof l->v->name) continue; /* cannot be a name this tool writes */
    if (l->n == cap) {
      cap = cap ? 2 * cap : 32;
      dent *v = realloc(l->v, sizeof *v * (size_t)cap);
      if (!v) {
        closedir(d);
        return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
      }
      l->v = v;
    }
    dent *x = &l->v[l->n++];
    snprintf(x->name, sizeof x->name, "%s", e->d_name);
    char full[4096];
    struct stat st;
    snprintf(full, sizeof full, "%s/%s", path, e->d_name);
    x->type = stat(full, &st)       ? ENT_OTHER
              : S_ISREG(st.st_mode) ? ENT_FILE
              : S_ISDIR(st.st_mode) ? ENT_DIR
                                    : ENT_OTHER;
  }
  closedir(d);
  if (l->n > 1) qsort(l->v, (size_t)l->n, sizeof *l->v, dent_cmp);
  return RC_OK;
}

static const dent *dir_find(const dir_list *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (!strcmp(l->v[i].name, name)) return &l->v[i];
  return NULL;
}

/* ---------------------------------------------------------------------------
 * Files. */

static int compare_trace_files(walk_t *w, const char *rel, const char *pa, const char *pb,
                               rc_trace_diff *td, rc_err *err) {
  rc_err why = {0};
  int rc = rc_trace_compare(pa, pb, td, &why);
  if (rc) {
    if (err) *err = why;
    return rc;
  }
  rc_cmp_ctx *c = &w->c;
  c->res->n_trace_steps += td->steps_compared;
  if (!td->comparable) {
    rc_cmp_add(c, RC_DIFF_BYTES, rel, "", "traces not comparable: %s", why.msg);
  } else if (td->first_step >= 0) {
    char obj[64];
    snprintf(obj, sizeof obj, "step %" PRId64, td->first_step);
    rc_diff *d = rc_cmp_add(c, RC_DIFF_BYTES, rel, obj,
                            "first differing step %" PRId64 " (%" PRId64
                            " steps compared): %s differ (A: %s; B: %s); equal: %s",
                            td->first_step, td->steps_compared, td->columns, td->a_values,
                            td->b_values, td->equal_columns[0] ? td->equal_columns : "(none)");
    if (d) d->first_index = td->first_step;
  } else if (td->steps_compared == 0) {
    rc_cmp_add(c, RC_DIFF_INFORMATIONAL, rel, "", "no step in common: nothing compared");
  }
  return RC_OK;
}

/* A file that must be HDF5: listed in a manifest, or named *.h5 / *.hdf5. */
static bool shard_like(const char *name, const mf_shard *e) {
  size_t n = strlen(name);
  return e || (n > 3 && !strcmp(name + n - 3, ".h5")) || (n > 5 && !strcmp(name + n - 5, ".hdf5"));
}

/* Two verified shards hold the same bytes: equal chunk hashes where both
 * were verified by chunks of one size, else equal whole-file hashes (which
 * were then what was verified). A chunk-verified shard's whole-file hash
 * was not recomputed, so it settles nothing. */
static bool verified_equal(const mf_shard *a, const mf_shard *b) {
  if (a->chunks && b->chunks) {
    const rc_mf_shard *x = a->chunks, *y = b->chunks;
    if (x->bytes != y->bytes || x->chunk_bytes != y->chunk_bytes || x->nchunks != y->nchunks)
      return false;
    for (int k = 0; k < x->nchunks; k++)
      if (strcmp(x->chunk_sha256[k], y->chunk_sha256[k])) return false;
    return true;
  }
  return !a->chunks && !b->chunks && !strcmp(a->sha256, b->sha256);
}

/* Compares one pair of files present on both sides. ea / eb: their manifest
 * entries, when both directories have manifests. */
/* Two shards both manifests describe, without --deep: sizes must match the
 * manifests, and equal trusted or verified hashes settle the pair unread.
 * *settled says whether it did; a size mismatch is corrupt input. */
static int manifest_shortcut(walk_t *w, const char *pa, const char *pb, const mf_shard *ea,
                             const mf_shard *eb, bool *settled, rc_err *err) {
  rc_compare_result *res = w->c.res;
  bool trust = w->c.opts && w->c.opts->trust_manifests;
  *settled = false;
  int64_t sa = file_size(pa), sb = file_size(pb);
  if (sa != ea->bytes || sb != eb->bytes) {
    const char *bad = sa != ea->bytes ? pa : pb;
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: %" PRId64 " bytes, its manifest says %" PRId64
                   " (truncated or changed after the checkpoint was written)",
                   bad, sa != ea->bytes ? sa : sb, sa != ea->bytes ? ea->bytes : eb->bytes);
  }
  if (!strcmp(ea->sha256, eb->sha256) && trust) { /* equal by what the manifests say; unread */
    res->n_by_manifest++;
    *settled = true;
  } else if (ea->verified && eb->verified && verified_equal(ea, eb)) {
    /* both read and verified (verify_shards): equal hashes of their bytes */
    res->n_files_identical++;
    res->n_datasets_compared += ea->ndsets;
    w->n_read++;
    *settled = true;
  }
  return RC_OK;
}

/* Two HDF5 files that differ (or --deep): object by object, with what the
 * manifests already know passed on so equal datasets are not read twice. */
static int compare_hdf5_pair(walk_t *w, const char *rel, const char *pa, const char *pb,
                             const mf_shard *ea, const mf_shard *eb, const rc_cmp_map *ma,
                             const rc_cmp_map *mb, bool equal, bool known_different, int64_t first,
                             rc_err *err) {
  rc_cmp_ctx *c = &w->c;
  rc_compare_result *res = c->res;
  bool trust = c->opts && c->opts->trust_manifests;
  /* With --deep and equal bytes the walk still checks every object and
   * attribute; the values are then equal by construction (equal_prefix). */
  int n_before = res->n_diffs, ign_before = c->n_ignored;
  rc_cmp_hashes xa = {0}, xb = {0};
  rc_cmp_known known = {NULL, NULL, ma, mb, equal ? INT64_MAX : known_different ? 0 : first};
  if (known_different && trust) { /* per-dataset hashes: only when trusted */
    xa = (rc_cmp_hashes){ea->dsets, ea->ndsets};
    xb = (rc_cmp_hashes){eb->dsets, eb->ndsets};
    known.ha = &xa;
    known.hb = &xb;
  }
  int rc = rc_cmp_hdf5(c, rel, pa, pb, &known, err);
  if (!rc && !equal && res->n_diffs == n_before && c->n_ignored == ign_before)
    rc_cmp_add(c, RC_DIFF_INFORMATIONAL, rel, "",
               "file bytes differ but every link, dataset and attribute is equal "
               "(HDF5 metadata only: time stamps, layout or free space)");
  return rc;
}

/* Two files that differ and are neither HDF5 nor args.json: tensor files
 * tensor by tensor; what cannot be decoded, or differs outside every tensor
 * (a header's padding, metadata), as bytes. */
static int compare_other_pair(walk_t *w, const char *rel, const char *name, const char *pa,
                              const char *pb, const rc_cmp_map *ma, const rc_cmp_map *mb,
                              int64_t first, rc_err *err) {
  rc_cmp_ctx *c = &w->c;
  rc_compare_result *res = c->res;
  bool decoded = false;
  char why[256] = "";
  int rc = RC_OK, n_before = res->n_diffs, ign_before = c->n_ignored;
  if (rc_cmp_is_tensor_name(name))
    rc = rc_cmp_tensors(c, rel, pa, pb, ma, mb, &decoded, why, sizeof why, err);
  bool all_equal = decoded && res->n_diffs == n_before && c->n_ignored == ign_before;
  size_t nlen = strlen(name);
  if (!rc && all_equal && nlen > 4 && !strcmp(name + nlen - 4, ".npz")) {
    /* like an HDF5 file whose metadata alone differ: numpy stamps each
     * member with the time it was saved */
    rc_cmp_add(c, RC_DIFF_INFORMATIONAL, rel, "",
               "file bytes differ but every tensor is equal (zip metadata only: time stamps, "
               "compression, order)");
  } else if (!rc && (!decoded || all_equal)) {
    rc_diff *d = rc_cmp_add(c, RC_DIFF_BYTES, rel, "", "differs");
    if (d) rc = rc_cmp_bytes_fill(pa, pb, first, d, err);
    if (d && !rc && (why[0] || decoded)) {
      size_t len = strlen(d->detail);
      snprintf(d->detail + len, sizeof d->detail - len, " (%s)",
               why[0] ? why : "every tensor equal: the header differs");
    }
  }
  return rc;
}

/* Two mapped files whose bytes are compared here, and what follows when
 * they differ (or --deep asks for the walk anyway). */
static int compare_mapped(walk_t *w, const char *rel, const char *name, const char *pa,
                          const char *pb, const mf_shard *ea, const mf_shard *eb,
                          bool known_different, rc_err *err) {
  rc_cmp_ctx *c = &w->c;
  rc_compare_result *res = c->res;
  bool deep = c->opts && c->opts->deep;
  bool is_shard = ea || eb;
  rc_cmp_map ma, mb;
  int rc = rc_cmp_map_open(pa, &ma, err);
  if (rc) return rc;
  rc = rc_cmp_map_open(pb, &mb, err);
  if (rc) {
    rc_cmp_map_close(&ma);
    return rc;
  }
  bool equal = false;
  int64_t first = 0;
  if (!known_different) maps_equal(&ma, &mb, &equal, &first);
  bool ha = rc_cmp_is_hdf5(pa), hb = rc_cmp_is_hdf5(pb);
  is_shard |= ha || hb;
  if (is_shard) w->n_read++;
  if (equal) res->n_files_identical++;

  if (equal && !(deep && ha && hb)) {
    /* settled */
  } else if (!strcmp(name, RC_ARGS_NAME)) {
    rc_cmp_add(c, RC_DIFF_INFORMATIONAL, rel, "",
               "differs (run-specific facts: leg, command line, host; not state)");
  } else if (!strcmp(name, RC_HF_ARGS_NAME)) {
    /* the Hugging Face Trainer's TrainingArguments: output_dir and
     * logging_dir (a time stamp) are the leg's own; a pickle of a class
     * weights_only refuses, so it is not loaded either */
    rc_cmp_add(c, RC_DIFF_INFORMATIONAL, rel, "",
               "differs (the Hugging Face Trainer's arguments: output and logging directories "
               "of the leg; not state)");
  } else if (rc_cmp_is_torch_save(name, ma.data, ma.size) &&
             rc_cmp_is_torch_save(name, mb.data, mb.size)) {
    rc = rc_cmp_torch(c, rel, pa, pb, false, err);
  } else if (ha && hb) {
    rc = compare_hdf5_pair(w, rel, pa, pb, ea, eb, &ma, &mb, equal, known_different, first, err);
  } else if ((!ha && shard_like(name, ea)) || (!hb && shard_like(name, eb))) {
    /* a shard that is not HDF5 at all is a corrupt file, not a difference */
    bool bad_a = !ha && shard_like(name, ea);
    rc = rc_fail(err, RC_EXIT_DATAERR,
                 "%s: not an HDF5 file (no HDF5 signature, %zu bytes) although it is a shard: "
                 "corrupt checkpoint (side %s)",
                 bad_a ? pa : pb, bad_a ? ma.size : mb.size, bad_a ? "A" : "B");
  } else if (ha != hb) {
    rc_cmp_add(c, RC_DIFF_BYTES, rel, "", "HDF5 file in %s only (%zu vs %zu bytes)", ha ? "A" : "B",
               ma.size, mb.size);
  } else {
    rc = compare_other_pair(w, rel, name, pa, pb, &ma, &mb, first, err);
  }
  rc_cmp_map_close(&ma);
  rc_cmp_map_close(&mb);
  return rc;
}

static int compare_file(walk_t *w, const char *rel, const char *pa, const char *pb,
                        const mf_shard *ea, const mf_shard *eb, rc_trace_diff *td, rc_err *err) {
  rc_cmp_ctx *c = &w->c;
  rc_compare_result *res = c->res;
  const char *name = *rel ? base_name(rel) : base_name(pa);
  bool deep = c->opts && c->opts->deep;
  bool trust = c->opts && c->opts->trust_manifests;
  res->n_files_compared++;
  if (ea && eb && !deep) {
    bool settled;
    int rc = manifest_shortcut(w, pa, pb, ea, eb, &settled, err);
    if (rc || settled) return rc;
  }
  if (!strcmp(name, RC_TRACE_NAME)) {
    bool same;
    int64_t first;
    int rc = bytes_equal(pa, pb, &same, &first, err);
    if (rc) return rc;
    if (same) res->n_files_identical++;
    return compare_trace_files(w, rel, pa, pb, td, err);
  }
  /* The manifests already said "different": verified, or trusted. */
  bool known_different = ea && eb && !deep && strcmp(ea->sha256, eb->sha256) &&
                         (trust || (ea->verified && eb->verified));
  return compare_mapped(w, rel, name, pa, pb, ea, eb, known_different, err);
}

/* ---------------------------------------------------------------------------
 * Directories. */

typedef enum { DIR_RUN, DIR_LEG, DIR_CKPT_ROOT, DIR_FILES } dir_class;

static const char *dir_class_name(dir_class k) {
  static const char *names[] = {"run directory (legs)", "leg directory (ckpt/, trace.csv)",
                                "checkpoint root (iter_*/)", "directory of files (shards)"};
  return names[k];
}

static bool is_leg_dir(const char *dir) {
  char p[4096];
  snprintf(p, sizeof p, "%s/" RC_CKPT_DIR_NAME, dir);
  if (rc_is_dir(p)) return true;
  snprintf(p, sizeof p, "%s/%s", dir, RC_TRACE_NAME);
  return rc_path_exists(p) && !rc_is_dir(p);
}

static bool is_iter_name(const char *name) {
  return !strncmp(name, RC_ITER_PREFIX, strlen(RC_ITER_PREFIX));
}

static int classify(const char *dir, dir_class *out, rc_err *err) {
  if (is_leg_dir(dir)) {
    *out = DIR_LEG;
    return RC_OK;
  }
  dir_list l;
  int rc = list_dir(dir, &l, err);
  if (rc) return rc;
  *out = DIR_FILES;
  for (int i = 0; i < l.n; i++) {
    if (l.v[i].type != ENT_DIR) continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", dir, l.v[i].name);
    if (is_iter_name(l.v[i].name)) *out = DIR_CKPT_ROOT;
    if (is_leg_dir(sub)) {
      *out = DIR_RUN;
      break;
    }
  }
  free(l.v);
  return RC_OK;
}

/* A manifest or marker: missing on one side is a difference; different
 * content is reported only when report_content (when nothing else explains
 * it). */
static int compare_derived(walk_t *w, const char *rel, const char *da, const char *db,
                           const char *name, const dir_list *la, const dir_list *lb,
                           bool report_content, bool *differs, rc_err *err) {
  rc_cmp_ctx *c = &w->c;
  char r[1024], pa[4096], pb[4096];
  rel_join(r, sizeof r, rel, name);
  const dent *ea = dir_find(la, name), *eb = dir_find(lb, name);
  *differs = true;
  if (!ea || !eb) {
    rc_cmp_add(c, ea ? RC_DIFF_MISSING_IN_B : RC_DIFF_MISSING_IN_A, r, "", "file only in %s",
               ea ? "A" : "B");
    return RC_OK;
  }
  rc_path_join(pa, sizeof pa, da, name);
  rc_path_join(pb, sizeof pb, db, name);
  int64_t first;
  bool equal;
  int rc = bytes_equal(pa, pb, &equal, &first, err);
  if (rc) return rc;
  c->res->n_files_compared++;
  *differs = !equal;
  if (equal)
    c->res->n_files_identical++;
  else if (report_content)
    rc_cmp_add(c, RC_DIFF_BYTES, r, "",
               "differs (first at byte %" PRId64 ") although every shard it describes is equal",
               first);
  return RC_OK;
}

typedef struct {
  const char *pa;
  char pb[4096];
  pthread_t tid;
  bool same;
  int rc;
  rc_err err;
} pair_cmp;

static int same_bytes(const char *pa, const char *pb, bool *same, rc_err *err);

static void *pair_cmp_thread(void *arg) {
  pair_cmp *pc = arg;
  pc->rc = same_bytes(pc->pa, pc->pb, &pc->same, &pc->err);
  return NULL;
}

/* Whether two files of one size hold the same bytes (mapped, compared in
 * order). */
static int same_bytes(const char *pa, const char *pb, bool *same, rc_err *err) {
  rc_cmp_map ma, mb;
  int rc = rc_cmp_map_open(pa, &ma, err);
  if (rc) return rc;
  if ((rc = rc_cmp_map_open(pb, &mb, err))) {
    rc_cmp_map_close(&ma);
    return rc;
  }
  *same = ma.size == mb.size && (ma.size == 0 || !memcmp(ma.data, mb.data, ma.size));
  rc_cmp_map_close(&ma);
  rc_cmp_map_close(&mb);
  return RC_OK;
}

/* Reads every shard the manifests list (mfs[side] NULL: that side has
 * none), both sides in one parallel pass, and checks each against its
 * manifest's size and whole-file SHA-256. A shard that does not match is a
 * corrupt checkpoint: RC_EXIT_DATAERR, naming the file and the side. Files
 * matching --ignore are neither read nor verified.
 *
 * The shards are hashed where they are mapped (rc_sha256_many: one EVP
 * context per thread, one shard per job) rather than streamed through
 * read() (rc_sha256_files): the same hashes without copying the page cache,
 * measured at 1.2 s of system time saved per 2 GiB (bench/NOTES_compare.md). */
/* The shards of a directory pair that have no chunk hashes: mapped, then
 * hashed together (rc_sha256_many) and checked against their manifests. */
typedef struct {
  int cap, n;
  char (*paths)[4096];
  char (*hex)[RC_SHA256_HEX];
  mf_shard **entry;
  int *sides;
  rc_cmp_map *maps;
  const void **data;
  size_t *sizes;
} whole_batch;

static int whole_batch_alloc(whole_batch *b, int cap, rc_err *err) {
  *b = (whole_batch){.cap = cap};
  b->paths = calloc((size_t)cap, sizeof *b->paths);
  b->hex = calloc((size_t)cap, sizeof *b->hex);
  b->entry = calloc((size_t)cap, sizeof *b->entry);
  b->sides = calloc((size_t)cap, sizeof *b->sides);
  b->maps = calloc((size_t)cap, sizeof *b->maps);
  b->data = calloc((size_t)cap, sizeof *b->data);
  b->sizes = calloc((size_t)cap, sizeof *b->sizes);
  if (!b->paths || !b->hex || !b->entry || !b->sides || !b->maps || !b->data || !b->sizes)
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  return RC_OK;
}

static void whole_batch_free(whole_batch *b) {
  for (int i = 0; b->maps && i < b->n; i++) rc_cmp_map_close(&b->maps[i]);
  free(b->paths);
  free(b->hex);
  free(b->entry);
  free(b->sides);
  free(b->maps);
  free(b->data);
  free(b->sizes);
}

static void note_verified(walk_t *w, mf_shard *e) {
  e->verified = true;
  w->c.res->n_shards_verified++;
  w->c.res->bytes_verified += e->bytes;
}

/* A shard a manifest lists must be a regular file of the listed size. */
static int check_listed(const dir_list *list, const mf_shard *e, const char *path, int side,
                        rc_err *err) {
  const dent *d = dir_find(list, e->file);
  if (!d || d->type != ENT_FILE) /* never open a FIFO or device: it may not end */
    return rc_fail(err, RC_EXIT_DATAERR, "%s: not a regular file (side %s)", path,
                   side ? "B" : "A");
  int64_t size = file_size(path);
  if (size != e->bytes)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: %" PRId64 " bytes, its manifest says %" PRId64
                   " (truncated or changed after the checkpoint was written; side %s)",
                   path, size, e->bytes, side ? "B" : "A");
  return RC_OK;
}

/* A side-A shard with chunk hashes: every chunk on every CPU while the file
 * is read ahead (io/manifest.h). When B's manifest records the same bytes,
 * B's file is compared with A's on another thread meanwhile, so B is
 * verified by transitivity without a second hash. */
static int verify_chunked(walk_t *w, const char *r, const char *path, const char *dir_b,
                          mf_shard *e, mf_shard *eb, int side, rc_err *err) {
  pair_cmp pc = {0};
  bool paired = false;
  if (eb && eb->chunks && verified_equal(e, eb) && !rc_cmp_ignored(&w->c, r, "")) {
    rc_path_join(pc.pb, sizeof pc.pb, dir_b, e->file);
    pc.pa = path;
    paired = !pthread_create(&pc.tid, NULL, pair_cmp_thread, &pc);
  }
  int vrc = rc_shard_verify_file(path, e->chunks, 0, err);
  if (paired) {
    pthread_join(pc.tid, NULL);
    eb->same_as_a = !pc.rc && pc.same;
  }
  if (vrc) {
    rc_err_prefix(err, "corrupt checkpoint (side %s)", side ? "B" : "A");
    return vrc;
  }
  note_verified(w, e);
  return RC_OK;
}

/* A shard without chunk hashes joins the batch hashed at the end. */
static int batch_add(whole_batch *b, mf_shard *e, int side, rc_err *err) {
  int i = b->n;
  b->entry[i] = e;
  b->sides[i] = side;
  int rc = rc_cmp_map_open(b->paths[i], &b->maps[i], err);
  if (rc) return rc;
  b->n++;
  if ((int64_t)b->maps[i].size != e->bytes) /* changed since the stat */
    return rc_fail(err, RC_EXIT_DATAERR, "%s: changed while being compared (side %s)", b->paths[i],
                   side ? "B" : "A");
  b->data[i] = b->maps[i].data ? (const void *)b->maps[i].data : "";
  b->sizes[i] = b->maps[i].size;
  return RC_OK;
}

static int batch_verify(walk_t *w, whole_batch *b, rc_err *err) {
  rc_sha256_many(b->data, b->sizes, b->n, 0, b->hex);
  for (int i = 0; i < b->n; i++) {
    if (strcmp(b->hex[i], b->entry[i]->sha256))
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s: its bytes do not match its manifest (SHA-256 %.16s..., manifest says "
                     "%.16s...): corrupt checkpoint (side %s)",
                     b->paths[i], b->hex[i], b->entry[i]->sha256, b->sides[i] ? "B" : "A");
    note_verified(w, b->entry[i]);
  }
  return RC_OK;
}

/* Verifies every shard either manifest lists against its manifest, A's
 * first: then a B shard recorded with the same bytes as a verified A shard
 * and found equal to it needs no hash of its own. */
static int verify_shards(walk_t *w, const char *rel, const char *const dirs[2],
                         const dir_list *const lists[2], manifest_t *const mfs[2], rc_err *err) {
  int total = (mfs[0] ? mfs[0]->n : 0) + (mfs[1] ? mfs[1]->n : 0);
  if (total == 0) return RC_OK;
  whole_batch b;
  int rc = whole_batch_alloc(&b, total, err);
  for (int side = 0; side < 2 && !rc; side++) {
    for (int i = 0; mfs[side] && i < mfs[side]->n && !rc; i++) {
      mf_shard *e = &mfs[side]->shards[i];
      char r[1024];
      rel_join(r, sizeof r, rel, e->file);
      if (rc_cmp_ignored(&w->c, r, "")) continue;
      char *path = b.paths[b.n];
      rc_path_join(path, sizeof b.paths[b.n], dirs[side], e->file);
      if ((rc = check_listed(lists[side], e, path, side, err))) break;
      const mf_shard *ea = side ? manifest_find(mfs[0], e->file) : NULL;
      if (side && ea && ea->verified && e->same_as_a) {
        /* B's manifest records the same bytes as A's, A's bytes were verified
         * against it, and B's bytes are A's (compared while A was hashed) */
        note_verified(w, e);
        continue;
      }
      mf_shard *eb = side || !mfs[1] ? NULL : (mf_shard *)manifest_find(mfs[1], e->file);
      if (e->chunks)
        rc = verify_chunked(w, r, path, dirs[1], e, eb, side, err);
      else
        rc = batch_add(&b, e, side, err);
    }
  }
  if (!rc) rc = batch_verify(w, &b, err);
  whole_batch_free(&b);
  return rc;
}

/* ---------------------------------------------------------------------------
 * A directory pair where a side is a hashes-only checkpoint (docs/compare.md):
 * its manifest is all that side has. Every shard file either manifest lists
 * is decided by SHA-256 (compare_hashes.c); the other files are compared as
 * usual by the caller. */

static int compare_hashes_only_shards(walk_t *w, const char *rel, const char *da, const char *db,
                                      const manifest_t *ma, const manifest_t *mb, const bool ho[2],
                                      rc_err *err) {
  const manifest_t *m[2] = {ma, mb};
  for (int side = 0; side < 2; side++)
    for (int i = 0; i < m[side]->io.world_size; i++) {
      const rc_mf_shard *e = &m[side]->io.shards[i];
      const mf_shard *fa = manifest_find(ma, e->file), *fb = manifest_find(mb, e->file);
      if (side == 1 && fa) continue; /* the pair was taken from A's list */
      char r[1024], pa[4096], pb[4096];
      rel_join(r, sizeof r, rel, e->file);
      if (rc_cmp_ignored(&w->c, r, "")) {
        w->c.n_ignored++;
        continue;
      }
      if (!fa || !fb || !fa->io || !fb->io) {
        rc_cmp_add(&w->c, fa ? RC_DIFF_MISSING_IN_B : RC_DIFF_MISSING_IN_A, r, "",
                   "shard only in %s's manifest%s", fa ? "A" : "B",
                   ho[fa ? 0 : 1] ? " (hashes only: no file)" : "");
        continue;
      }
      rc_path_join(pa, sizeof pa, da, e->file);
      rc_path_join(pb, sizeof pb, db, e->file);
      rc_cmp_side sides[2] = {{fa->io, ho[0], ho[0] ? NULL : pa, fa->verified},
                              {fb->io, ho[1], ho[1] ? NULL : pb, fb->verified}};
      int rc = rc_cmp_hashes_shard(&w->c, r, sides, err);
      if (rc) return rc;
      if (!ho[0] || !ho[1]) w->n_read++;
    }
  return RC_OK;
}

/* Whether two strictly parsed manifests record the same checkpoint but for
 * "hashes_only" and the chunk size (how the hashes were recorded):
 * iteration, world size, and every shard's size, whole-file hash where
 * both record one (a hashes-only side has none), chunk hashes where of one
 * size, and datasets. */
static bool manifests_same_records(const rc_manifest *a, const rc_manifest *b) {
  if (a->iteration != b->iteration || a->world_size != b->world_size) return false;
  bool whole = !a->hashes_only && !b->hashes_only;
  for (int r = 0; r < a->world_size; r++) {
    const rc_mf_shard *x = &a->shards[r], *y = &b->shards[r];
    if (x->bytes != y->bytes || (whole && strcmp(x->sha256, y->sha256)) ||
        x->ndatasets != y->ndatasets)
      return false;
    for (int k = 0; x->chunk_bytes == y->chunk_bytes && k < x->nchunks; k++)
      if (strcmp(x->chunk_sha256[k], y->chunk_sha256[k])) return false;
    for (int i = 0; i < x->ndatasets; i++) {
      const rc_mf_dataset *p = &x->datasets[i], *q = &y->datasets[i];
      if (strcmp(p->path, q->path) || p->dtype != q->dtype || p->ndim != q->ndim ||
          memcmp(p->shape, q->shape, sizeof(int64_t) * (size_t)p->ndim) ||
          strcmp(p->sha256, q->sha256))
        return false;
    }
  }
  return true;
}

/* manifest.json and COMPLETE of such a pair: they differ by construction
 * when one side is hashes-only (the "hashes_only" key, and COMPLETE holds
 * the manifest's SHA-256). Reported as information when the records are
 * otherwise the same; as a difference when they are not and no shard
 * explains it (shards_clean). */
static int compare_hashes_only_derived(walk_t *w, const char *rel, const char *da, const char *db,
                                       const manifest_t *ma, const manifest_t *mb,
                                       bool shards_clean, rc_err *err) {
  char r[1024], pa[4096], pb[4096];
  bool same_records = manifests_same_records(&ma->io, &mb->io);
  const char *names[2] = {RC_MANIFEST_NAME, RC_COMPLETE_NAME};
  for (int j = 0; j < 2; j++) {
    rel_join(r, sizeof r, rel, names[j]);
    if (rc_cmp_ignored(&w->c, r, "")) {
      w->c.n_ignored++;
      continue;
    }
    rc_path_join(pa, sizeof pa, da, names[j]);
    rc_path_join(pb, sizeof pb, db, names[j]);
    bool in_a = rc_path_exists(pa), in_b = rc_path_exists(pb);
    if (!in_a || !in_b) {
      rc_cmp_add(&w->c, in_a ? RC_DIFF_MISSING_IN_B : RC_DIFF_MISSING_IN_A, r, "",
                 "file only in %s", in_a ? "A" : "B");
      continue;
    }
    bool equal;
    int64_t first;
    int rc = bytes_equal(pa, pb, &equal, &first, err);
    if (rc) return rc;
    w->c.res->n_files_compared++;
    if (equal) {
      w->c.res->n_files_identical++;
    } else if (same_records || !shards_clean || j == 1) {
      rc_cmp_add(&w->c, RC_DIFF_INFORMATIONAL, r, "", "%s",
                 j == 1 ? "differs with the manifest, whose SHA-256 it holds"
                 /* a shard that differs explains it, even where no recorded
                  * hash of one kind on both sides tells them apart */
                 : same_records && shards_clean
                     ? "differs only in how it records (\"hashes_only\": one side kept hashes"
                       " only; chunk size); every recorded size and hash is the same"
                     : "differs with the shards it describes (above)");
    } else {
      rc_cmp_add(&w->c, RC_DIFF_BYTES, r, "",
                 "records other hashes than the other side's (first difference at byte %" PRId64
                 ") although every shard it describes is SHA-256-identical",
                 first);
    }
  }
  return RC_OK;
}

/* Every file and subdirectory in either, by name; manifests are loaded to
 * settle shards and are themselves reported only when the shards they list
 * agree (otherwise their differences are the shards' differences, which are
 * reported, or ignored, on their own). */
/* A directory pair being compared: both listings, each side's manifest
 * (when it has one), and whether a side is a hashes-only checkpoint. */
typedef struct {
  const char *rel, *dir[2];
  dir_list list[2];
  manifest_t mf[2];
  bool mf_in[2], ho[2], have_mf;
  const char *derived[MAX_DERIVED]; /* derived names in the listings: compared last */
  int n_derived;
  bool dcp;     /* both sides are DCP directories: .metadata and *.distcp compared as one unit */
  bool by_rank; /* the manifests' world sizes differ: shards paired by rank, not by name */
} dir_pair;

static void dir_pair_free(dir_pair *p) {
  for (int side = 0; side < 2; side++) manifest_free(&p->mf[side]), free(p->list[side].v);
}

/* A side's manifest, when it has one (a side's shards are verified against
 * its own manifest even when the other side has none). A manifest that
 * names a file the directory lacks is an incomplete checkpoint; a
 * hashes-only one names files that were never written. */
static int load_side_manifest(dir_pair *p, int side, rc_err *err) {
  const dent *f = dir_find(&p->list[side], RC_MANIFEST_NAME);
  if (!f || f->type != ENT_FILE) return RC_OK;
  char pm[4096];
  rc_path_join(pm, sizeof pm, p->dir[side], RC_MANIFEST_NAME);
  manifest_t *m = &p->mf[side];
  int rc = manifest_load(pm, m, err);
  if (rc) return rc;
  p->mf_in[side] = true;
  for (int i = 0; i < m->n; i++) {
    bool present = dir_find(&p->list[side], m->shards[i].file) != NULL;
    if (!present && !m->hashes_only)
      return rc_fail(err, RC_EXIT_NOINPUT, "%s/%s: listed in its manifest but missing",
                     p->dir[side], m->shards[i].file);
    if (present && m->hashes_only)
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s/%s: present although its manifest says the checkpoint kept hashes only",
                     p->dir[side], m->shards[i].file);
  }
  return RC_OK;
}

/* Lists both sides, loads the manifests and verifies every shard they list
 * (unless they are trusted). */
static int dir_pair_open(walk_t *w, dir_pair *p, rc_err *err) {
  rc_cmp_ctx *c = &w->c;
  int rc = list_dir(p->dir[0], &p->list[0], err);
  if (!rc) rc = list_dir(p->dir[1], &p->list[1], err);
  for (int side = 0; side < 2 && !rc; side++) rc = load_side_manifest(p, side, err);
  if (rc) return rc;
  p->have_mf = p->mf_in[0] && p->mf_in[1];
  for (int side = 0; side < 2; side++) p->ho[side] = p->mf_in[side] && p->mf[side].hashes_only;
  c->res->hashes_only_a |= p->ho[0];
  c->res->hashes_only_b |= p->ho[1];
  bool ho = p->ho[0] || p->ho[1];
  if (ho && (!p->have_mf || !p->mf[0].have_io || !p->mf[1].have_io))
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: cannot compare the hashes-only checkpoint %s with %s: %s",
                   *p->rel ? p->rel : ".", p->dir[p->ho[0] ? 0 : 1], p->dir[p->ho[0] ? 1 : 0],
                   !p->have_mf ? "it has no manifest.json to verify its shards against"
                               : "its manifest.json is not one this build reads");
  if (c->opts && c->opts->trust_manifests) return RC_OK;
  const dir_list *lists[2] = {&p->list[0], &p->list[1]};
  /* a hashes-only side has no shard to verify */
  manifest_t *mfs[2];
  for (int side = 0; side < 2; side++)
    mfs[side] = p->mf_in[side] && !p->ho[side] ? &p->mf[side] : NULL;
  return verify_shards(w, p->rel, p->dir, lists, mfs, err);
}

static int compare_files_dir(walk_t *w, const char *rel, const char *da, const char *db,
                             rc_err *err);

/* One name of the merged listing (ea or eb NULL where a side lacks it). */
static int compare_entry(walk_t *w, dir_pair *p, const dent *ea, const dent *eb, rc_err *err) {
  rc_cmp_ctx *c = &w->c;
  const char *name = ea ? ea->name : eb->name;
  char r[1024], pa[4096], pb[4096];
  rel_join(r, sizeof r, p->rel, name);
  rc_path_join(pa, sizeof pa, p->dir[0], name);
  rc_path_join(pb, sizeof pb, p->dir[1], name);
  if (rc_cmp_ignored(c, r, "")) {
    c->n_ignored++;
    return RC_OK;
  }
  if (p->dcp && rc_cmp_is_dcp_member(name)) return RC_OK; /* compared as a unit */
  if (p->by_rank && (manifest_find(&p->mf[0], name) || manifest_find(&p->mf[1], name)))
    return RC_OK;              /* a shard, paired by rank (compare_by_rank) */
  if (is_derived_name(name)) { /* later, once the shards are settled */
    if (p->n_derived < MAX_DERIVED) p->derived[p->n_derived++] = name;
    return RC_OK;
  }
  if ((p->ho[0] || p->ho[1]) && (manifest_find(&p->mf[0], name) || manifest_find(&p->mf[1], name)))
    return RC_OK; /* a shard, settled by SHA-256 */
  if (!ea || !eb) {
    const dent *e = ea ? ea : eb;
    rc_diff_kind kind = ea ? RC_DIFF_MISSING_IN_B : RC_DIFF_MISSING_IN_A;
    if (!strcmp(name, RC_ARGS_NAME)) kind = RC_DIFF_INFORMATIONAL;
    rc_cmp_add(c, kind, r, "", "%s only in %s", e->type == ENT_DIR ? "directory" : "file",
               ea ? "A" : "B");
    return RC_OK;
  }
  if (ea->type == ENT_DIR && eb->type == ENT_DIR) return compare_files_dir(w, r, pa, pb, err);
  if (ea->type == ENT_FILE && eb->type == ENT_FILE) {
    rc_trace_diff td;
    return compare_file(w, r, pa, pb, p->have_mf ? manifest_find(&p->mf[0], name) : NULL,
                        p->have_mf ? manifest_find(&p->mf[1], name) : NULL, &td, err);
  }
  if (ea->type == ENT_OTHER || eb->type == ENT_OTHER)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: not a regular file or directory in %s", r,
                   ea->type == ENT_OTHER ? "A" : "B");
  rc_cmp_add(c, RC_DIFF_BYTES, r, "", "%s in A, %s in B",
             ea->type == ENT_DIR ? "directory" : "file",
             eb->type == ENT_DIR ? "directory" : "file");
  return RC_OK;
}

/* Manifests (and per-rank manifest fragments) last, then the COMPLETE
 * marker, which holds the manifest's SHA-256: its content differs exactly
 * when the manifest does, and only its absence is news then. */
static int compare_derived_all(walk_t *w, dir_pair *p, bool shards_agree, rc_err *err) {
  bool manifests_differ = false, differs;
  int rc = RC_OK;
  for (int j = 0; j < p->n_derived && !rc; j++) {
    if (!strcmp(p->derived[j], RC_COMPLETE_NAME)) continue;
    rc = compare_derived(w, p->rel, p->dir[0], p->dir[1], p->derived[j], &p->list[0], &p->list[1],
                         shards_agree, &differs, err);
    if (!rc && !strcmp(p->derived[j], RC_MANIFEST_NAME)) manifests_differ = differs;
  }
  for (int j = 0; j < p->n_derived && !rc; j++)
    if (!strcmp(p->derived[j], RC_COMPLETE_NAME))
      rc = compare_derived(w, p->rel, p->dir[0], p->dir[1], p->derived[j], &p->list[0], &p->list[1],
                           !manifests_differ, &differs, err);
  return rc;
}

/* Two checkpoints written by different world sizes: "W shards against W'"
 * said once, then rank r's shard of A against rank r's of B (datasets by
 * name: a replicated model compares equal, slices of a sharded optimizer
 * show as the shapes they are), and the ranks only one side has listed as
 * such rather than as unexplained missing files. */
static int compare_by_rank(walk_t *w, dir_pair *p, rc_err *err) {
  rc_cmp_ctx *c = &w->c;
  const rc_manifest *m[2] = {&p->mf[0].io, &p->mf[1].io};
  int wa = m[0]->world_size, wb = m[1]->world_size;
  rc_cmp_add(c, RC_DIFF_INFORMATIONAL, p->rel, "",
             "%d shard%s against %d (world size %d against %d): compared by name, rank r's shard "
             "of A against rank r's of B",
             wa, wa == 1 ? "" : "s", wb, wa, wb);
  for (int r = 0; r < (wa > wb ? wa : wb); r++) {
    const char *fa = r < wa ? m[0]->shards[r].file : NULL,
               *fb = r < wb ? m[1]->shards[r].file : NULL;
    char rl[1024], pa[4096], pb[4096];
    rel_join(rl, sizeof rl, p->rel, fa ? fa : fb);
    if (rc_cmp_ignored(c, rl, "")) {
      c->n_ignored++;
      continue;
    }
    if (!fa || !fb) {
      rc_cmp_add(c, fa ? RC_DIFF_MISSING_IN_B : RC_DIFF_MISSING_IN_A, rl, "",
                 "rank %d's shard only in %s (world size %d against %d): its state is not "
                 "compared",
                 r, fa ? "A" : "B", wa, wb);
      continue;
    }
    rc_path_join(pa, sizeof pa, p->dir[0], fa);
    rc_path_join(pb, sizeof pb, p->dir[1], fb);
    rc_trace_diff td;
    int rc = compare_file(w, rl, pa, pb, NULL, NULL, &td, err);
    if (rc) return rc;
  }
  return RC_OK;
}

static int compare_files_dir(walk_t *w, const char *rel, const char *da, const char *db,
                             rc_err *err) {
  rc_cmp_ctx *c = &w->c;
  dir_pair p = {.rel = rel, .dir = {da, db}};
  int rc = dir_pair_open(w, &p, err);
  bool ho = p.ho[0] || p.ho[1];
  int failing_before = c->res->n_failing;
  /* torch.distributed.checkpoint: .metadata and the rank files by content
   * (compare_torch.c); whatever else the directory holds as usual */
  p.dcp = rc_cmp_is_dcp_dir(da) && rc_cmp_is_dcp_dir(db);
  if (!rc && p.dcp) {
    rc = rc_cmp_torch(c, rel, da, db, true, err);
    w->n_read++;
  }
  p.by_rank = !rc && !ho && p.have_mf && p.mf[0].have_io && p.mf[1].have_io &&
              p.mf[0].io.world_size != p.mf[1].io.world_size;
  if (p.by_rank) rc = compare_by_rank(w, &p, err);
  if (!rc && ho) rc = compare_hashes_only_shards(w, rel, da, db, &p.mf[0], &p.mf[1], p.ho, err);
  const dir_list *la = &p.list[0], *lb = &p.list[1];
  for (int i = 0, k = 0; !rc && (i < la->n || k < lb->n);) {
    int cmp = i == la->n ? 1 : k == lb->n ? -1 : strcmp(la->v[i].name, lb->v[k].name);
    const dent *ea = cmp <= 0 ? &la->v[i] : NULL, *eb = cmp >= 0 ? &lb->v[k] : NULL;
    if (cmp <= 0) i++;
    if (cmp >= 0) k++;
    rc = compare_entry(w, &p, ea, eb, err);
  }
  if (!rc && ho) {
    rc = compare_hashes_only_derived(w, rel, da, db, &p.mf[0], &p.mf[1],
                                     c->res->n_failing == failing_before, err);
  } else if (!rc) {
    bool shards_agree = p.have_mf ? manifests_agree_on_files(&p.mf[0], &p.mf[1])
                                  : c->res->n_failing == failing_before;
    rc = compare_derived_all(w, &p, shards_agree, err);
  }
  dir_pair_free(&p);
  return rc;
}

const char *const RC_CKPT_FORMAT_NAMES[] = {"auto", "resumecheck", "dcp", "torch-save", NULL};

/* With --checkpoint-format other than auto: dir (a checkpoint directory of
 * side A or B) holds that format, or 65 saying what it lacks. */
static int check_format(const walk_t *w, const char *dir, const char *side, rc_err *err) {
  rc_ckpt_format f = w->c.opts ? w->c.opts->format : RC_CKPT_FORMAT_AUTO;
  if (f == RC_CKPT_FORMAT_AUTO) return RC_OK;
  char p[4096];
  const char *lacks = NULL;
  if (f == RC_CKPT_FORMAT_RESUMECHECK) {
    rc_path_join(p, sizeof p, dir, RC_MANIFEST_NAME);
    if (!rc_path_exists(p) || rc_is_dir(p)) lacks = "no manifest.json (resumecheck shards)";
  } else if (f == RC_CKPT_FORMAT_DCP) {
    if (!rc_cmp_is_dcp_dir(dir)) lacks = "no .metadata (a torch.distributed.checkpoint directory)";
  } else {
    dir_list l;
    int rc = list_dir(dir, &l, err);
    if (rc) return rc;
    bool any = false;
    for (int i = 0; i < l.n && !any; i++) {
      if (l.v[i].type != ENT_FILE) continue;
      rc_path_join(p, sizeof p, dir, l.v[i].name);
      unsigned char head[4] = {0};
      FILE *fp = fopen(p, "rb");
      size_t got = fp ? fread(head, 1, sizeof head, fp) : 0;
      if (fp) fclose(fp);
      any = rc_cmp_is_torch_save(l.v[i].name, head, got);
    }
    free(l.v);
    if (!any) lacks = "no torch.save file (.pt, .pth, .bin or .ckpt holding a zip or a pickle)";
  }
  if (!lacks) return RC_OK;
  return rc_fail(err, RC_EXIT_DATAERR, "%s (side %s): --checkpoint-format %s, but it holds %s", dir,
                 side, RC_CKPT_FORMAT_NAMES[f], lacks);
}

/* The same for a file given to compare: a shard (HDF5) for resumecheck, a
 * torch.save file for torch-save; a DCP checkpoint is a directory. */
static int check_file_format(const walk_t *w, const char *path, const char *side, rc_err *err) {
  rc_ckpt_format f = w->c.opts ? w->c.opts->format : RC_CKPT_FORMAT_AUTO;
  if (f == RC_CKPT_FORMAT_AUTO) return RC_OK;
  unsigned char head[4] = {0};
  FILE *fp = fopen(path, "rb");
  size_t got = fp ? fread(head, 1, sizeof head, fp) : 0;
  if (fp) fclose(fp);
  bool ok = f == RC_CKPT_FORMAT_RESUMECHECK  ? rc_cmp_is_hdf5(path)
            : f == RC_CKPT_FORMAT_TORCH_SAVE ? rc_cmp_is_torch_save(base_name(path), head, got)
                                             : false;
  if (ok) return RC_OK;
  return rc_fail(err, RC_EXIT_DATAERR, "%s (side %s): --checkpoint-format %s, but it is %s", path,
                 side, RC_CKPT_FORMAT_NAMES[f],
                 f == RC_CKPT_FORMAT_DCP ? "a file (a torch.distributed.checkpoint is a directory)"
                 : f == RC_CKPT_FORMAT_RESUMECHECK ? "not an HDF5 shard"
                                                   : "not a torch.save file");
}

/* Two checkpoint roots: every iter_* in both is compared; one present on a
 * single side is reported, not failed (legs save different iterations: the
 * through leg has K and N, the resumed leg only N). */
static int compare_ckpt_roots(walk_t *w, const char *rel, const char *da, const char *db,
                              int *n_common, rc_err *err) {
  dir_list la = {0}, lb = {0};
  int rc = list_dir(da, &la, err);
  if (!rc) rc = list_dir(db, &lb, err);
  int i = 0, k = 0;
  while (!rc && (i < la.n || k < lb.n)) {
    int cmp = i == la.n ? 1 : k == lb.n ? -1 : strcmp(la.v[i].name, lb.v[k].name);
    const dent *ea = cmp <= 0 ? &la.v[i] : NULL, *eb = cmp >= 0 ? &lb.v[k] : NULL;
    if (cmp <= 0) i++;
    if (cmp >= 0) k++;
    const dent *e = ea ? ea : eb;
    if (!is_iter_name(e->name) || e->type != ENT_DIR) continue;
    char r[1024], pa[4096], pb[4096];
    rel_join(r, sizeof r, rel, e->name);
    if (rc_cmp_ignored(&w->c, r, "")) {
      w->c.n_ignored++;
      continue;
    }
    if (!ea || !eb || ea->type != ENT_DIR || eb->type != ENT_DIR) {
      rc_cmp_add(&w->c, RC_DIFF_INFORMATIONAL, r, "", "iteration only in %s: not compared",
                 ea && ea->type == ENT_DIR ? "A" : "B");
      continue;
    }
    rc_path_join(pa, sizeof pa, da, e->name);
    rc_path_join(pb, sizeof pb, db, e->name);
    (*n_common)++;
    rc = check_format(w, pa, "A", err);
    if (!rc) rc = check_format(w, pb, "B", err);
    if (!rc) rc = compare_files_dir(w, r, pa, pb, err);
  }
  free(la.v);
  free(lb.v);
  return rc;
}

/* Two legs: the trace first (its first differing step is the headline of
 * any divergence), then the checkpoints. */
static int compare_legs(walk_t *w, const char *rel, const char *da, const char *db, rc_err *err) {
  char pa[4096], pb[4096], r[1024];
  int n_common = 0, rc = RC_OK;
  rc_path_join(pa, sizeof pa, da, RC_TRACE_NAME);
  rc_path_join(pb, sizeof pb, db, RC_TRACE_NAME);
  rel_join(r, sizeof r, rel, RC_TRACE_NAME);
  bool ta = rc_path_exists(pa) && !rc_is_dir(pa), tb = rc_path_exists(pb) && !rc_is_dir(pb);
  int ignored_before = w->c.n_ignored;
  if (ta && tb && rc_cmp_ignored(&w->c, r, "")) {
    w->c.n_ignored++;
  } else if (ta && tb) {
    rc_trace_diff td = {0};
    rc = compare_file(w, r, pa, pb, NULL, NULL, &td, err);
    if (rc) return rc;
    n_common += td.steps_compared > 0 || !td.comparable; /* headers differing is a finding */
  } else if (ta != tb) {
    rc_cmp_add(&w->c, RC_DIFF_INFORMATIONAL, r, "", "trace only in %s: not compared",
               ta ? "A" : "B");
  }

  rc_path_join(pa, sizeof pa, da, RC_CKPT_DIR_NAME);
  rc_path_join(pb, sizeof pb, db, RC_CKPT_DIR_NAME);
  rel_join(r, sizeof r, rel, RC_CKPT_DIR_NAME);
  bool ca = rc_is_dir(pa), cb = rc_is_dir(pb);
  if (ca && cb)
    rc = compare_ckpt_roots(w, r, pa, pb, &n_common, err);
  else if (ca || cb)
    rc_cmp_add(&w->c, RC_DIFF_INFORMATIONAL, r, "", "checkpoints only in %s: not compared",
               ca ? "A" : "B");
  if (rc) return rc;
  if (n_common == 0 && w->c.n_ignored == ignored_before)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s and %s share no checkpoint iteration and no trace step: nothing to compare",
                   da, db);
  return RC_OK;
}

/* Two run directories: legs matched by name. */
static int compare_runs(walk_t *w, const char *da, const char *db, rc_err *err) {
  dir_list la = {0}, lb = {0};
  int rc = list_dir(da, &la, err);
  if (!rc) rc = list_dir(db, &lb, err);
  int i = 0, k = 0;
  while (!rc && (i < la.n || k < lb.n)) {
    int cmp = i == la.n ? 1 : k == lb.n ? -1 : strcmp(la.v[i].name, lb.v[k].name);
    const dent *ea = cmp <= 0 ? &la.v[i] : NULL, *eb = cmp >= 0 ? &lb.v[k] : NULL;
    if (cmp <= 0) i++;
    if (cmp >= 0) k++;
    const dent *e = ea ? ea : eb;
    char pa[4096], pb[4096];
    rc_path_join(pa, sizeof pa, da, e->name);
    rc_path_join(pb, sizeof pb, db, e->name);
    bool la_leg = ea && ea->type == ENT_DIR && is_leg_dir(pa);
    bool lb_leg = eb && eb->type == ENT_DIR && is_leg_dir(pb);
    if (!la_leg && !lb_leg) continue; /* reports, logs: not legs */
    if (rc_cmp_ignored(&w->c, e->name, "")) {
      w->c.n_ignored++;
      continue;
    }
    if (!la_leg || !lb_leg) {
      rc_cmp_add(&w->c, la_leg ? RC_DIFF_MISSING_IN_B : RC_DIFF_MISSING_IN_A, e->name, "",
                 "leg only in %s", la_leg ? "A" : "B");
      continue;
    }
    rc = compare_legs(w, e->name, pa, pb, err);
  }
  free(la.v);
  free(lb.v);
  return rc;
}

int rc_compare_paths(const char *a, const char *b, const rc_compare_opts *opts,
                     rc_compare_result *res, rc_err *err) {
  memset(res, 0, sizeof *res);
  walk_t w = {{opts, res, 0}, 0};
  struct stat sa, sb;
  if (stat(a, &sa)) return rc_fail(err, RC_EXIT_NOINPUT, "%s: %s", a, strerror(errno));
  if (stat(b, &sb)) return rc_fail(err, RC_EXIT_NOINPUT, "%s: %s", b, strerror(errno));
  int rc;
  if (S_ISREG(sa.st_mode) && S_ISREG(sb.st_mode)) {
    rc_trace_diff td;
    rc = check_file_format(&w, a, "A", err);
    if (!rc) rc = check_file_format(&w, b, "B", err);
    if (!rc) rc = compare_file(&w, "", a, b, NULL, NULL, &td, err);
  } else if (S_ISDIR(sa.st_mode) && S_ISDIR(sb.st_mode)) {
    dir_class ka, kb;
    rc = classify(a, &ka, err);
    if (!rc) rc = classify(b, &kb, err);
    if (!rc && ka != kb)
      rc = rc_fail(err, RC_EXIT_USAGE, "cannot compare a %s (%s) with a %s (%s)",
                   dir_class_name(ka), a, dir_class_name(kb), b);
    if (!rc) {
      int n_common = 0;
      switch (ka) {
      case DIR_RUN:
        rc = compare_runs(&w, a, b, err);
        break;
      case DIR_LEG:
        rc = compare_legs(&w, "", a, b, err);
        break;
      case DIR_CKPT_ROOT:
        rc = compare_ckpt_roots(&w, "", a, b, &n_common, err);
        if (!rc && n_common == 0 && w.c.n_ignored == 0)
          rc = rc_fail(err, RC_EXIT_DATAERR, "%s and %s share no iter_* directory", a, b);
        break;
      case DIR_FILES:
        rc = check_format(&w, a, "A", err);
        if (!rc) rc = check_format(&w, b, "B", err);
        if (!rc) rc = compare_files_dir(&w, "", a, b, err);
        break;
      }
    }
  } else if (!S_ISREG(sa.st_mode) && !S_ISDIR(sa.st_mode)) {
    /* a FIFO, device or socket is no checkpoint, trace or shard: say what
     * it is (never "a file"), bad input (65) */
    rc = rc_fail(err, RC_EXIT_DATAERR, "cannot compare %s: not a regular file or directory: %s", a,
                 rc_file_kind((unsigned)sa.st_mode) + 3);
  } else if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
    rc = rc_fail(err, RC_EXIT_DATAERR, "cannot compare %s: not a regular file or directory: %s", b,
                 rc_file_kind((unsigned)sb.st_mode) + 3);
  } else {
    rc = rc_fail(err, RC_EXIT_USAGE, "cannot compare %s (%s) with %s (%s)", a,
                 S_ISDIR(sa.st_mode) ? "a directory" : "a regular file", b,
                 S_ISDIR(sb.st_mode) ? "a directory" : "a regular file");
  }
  res->n_ignored = w.c.n_ignored;
  res->fast_path = !rc && res->n_by_manifest > 0 && w.n_read == 0;
  /* Nothing is IDENTICAL by default: when --ignore left no evidence at all
   * (no pair equal, no dataset or trace step compared), say so. */
  res->nothing_compared = !rc && res->n_failing == 0 && res->n_ignored > 0 &&
                          res->n_files_identical == 0 && res->n_by_manifest == 0 &&
                          res->n_datasets_compared == 0 && res->n_trace_steps == 0;
  return rc;
}
