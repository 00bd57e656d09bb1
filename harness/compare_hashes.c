/* compare_hashes.c — a shard pair where a side kept hashes only.
 *
 * A hashes-only checkpoint (a through leg's `train --save-hashes-at`,
 * docs/checkpoint-format.md) has a manifest but no shard: the save built
 * the file and hashed it, and wrote nothing else. Against it there are no
 * values to compare, only SHA-256s: of the file's chunks (it records no
 * whole-file hash: the chunks cover every byte), and of each dataset. What
 * is compared is said in every message.
 *
 * The file is decided by chunk lists of one size: the two manifests' when
 * their chunk sizes agree; else, where one side has its shard, that
 * shard's bytes hashed at the other side's chunk size. Only where neither
 * can be had (both sides hashes-only with other chunk sizes, or
 * --trust-manifests) is the pair decided dataset by dataset alone, and the
 * message says that the file's other bytes (/meta, the HDF5 layout) were
 * not compared: "identical" is never said of bytes nobody compared.
 *
 * Never trusting manifests: the side that has its shard was verified
 * against its manifest (every chunk) before this runs, and its dataset
 * hashes are then computed from those verified bytes (io's
 * rc_shard_hash_datasets), not taken from its manifest, whose dataset list
 * the chunk check does not cover. Only --trust-manifests takes them from
 * the manifest, and then the message says so. */
#include "harness/compare_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Both entries record chunks of one size for files of one size. */
static bool chunks_comparable(const rc_mf_shard *a, const rc_mf_shard *b) {
  return a->chunk_sha256 && b->chunk_sha256 && a->bytes == b->bytes &&
         a->chunk_bytes == b->chunk_bytes && a->nchunks == b->nchunks;
}

static bool chunks_equal(const rc_mf_shard *a, const rc_mf_shard *b) {
  for (int k = 0; k < a->nchunks; k++)
    if (strcmp(a->chunk_sha256[k], b->chunk_sha256[k])) return false;
  return true;
}

static int cmp_dataset_path(const void *x, const void *y) {
  return strcmp(((const rc_mf_dataset *)x)->path, ((const rc_mf_dataset *)y)->path);
}

/* One side's datasets, sorted by path, with their byte offsets where the
 * side's bytes were read (offset NULL otherwise). */
typedef struct {
  rc_shard_hashes computed; /* from the file (owned) */
  rc_mf_dataset *listed;    /* a sorted copy of the manifest's (owned) */
  const rc_mf_dataset *d;
  const uint64_t *offset;
  int n;
  bool from_bytes;
} side_datasets;

static void side_free(side_datasets *s) {
  rc_shard_hashes_free(&s->computed);
  free(s->listed);
}

/* rechunk > 0: also the side's file hashed in chunks of that size
 * (s->computed.chunks); only for a side whose bytes are read. */
static int side_load(const rc_cmp_side *side, bool trust, uint64_t rechunk, side_datasets *out,
                     rc_err *err) {
  memset(out, 0, sizeof *out);
  if (side->hashes_only || trust) {
    int n = side->entry->ndatasets;
    out->listed = malloc((size_t)(n ? n : 1) * sizeof *out->listed);
    if (!out->listed) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    memcpy(out->listed, side->entry->datasets, (size_t)n * sizeof *out->listed);
    qsort(out->listed, (size_t)n, sizeof *out->listed, cmp_dataset_path);
    out->d = out->listed;
    out->n = n;
    return RC_OK;
  }
  int rc = rc_shard_hash_datasets(side->path, side->entry, rechunk, &out->computed, err);
  if (rc) return rc;
  out->d = out->computed.datasets;
  out->offset = out->computed.offset;
  out->n = out->computed.ndatasets;
  out->from_bytes = true;
  return RC_OK;
}

static void shape_text(const rc_mf_dataset *d, char *buf, size_t cap) {
  size_t o = (size_t)snprintf(buf, cap, "%s[", rc_dtype_name(d->dtype));
  for (int i = 0; i < d->ndim && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, i ? "," : "", d->shape[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* "; chunks 3-4 of 40 differ there (bytes [X, Y))", or "" when the chunks
 * cannot say (no comparable chunk lists, no known offset). */
static void chunk_note(const rc_mf_shard *a, const rc_mf_shard *b, uint64_t off, size_t n,
                       char *buf, size_t cap) {
  buf[0] = 0;
  if (!chunks_comparable(a, b) || n == 0 || a->nchunks < 2) return; /* one chunk: the file */
  uint64_t C = a->chunk_bytes;
  int first = -1, last = -1;
  for (uint64_t k = off / C; k <= (off + n - 1) / C && k < (uint64_t)a->nchunks; k++)
    if (strcmp(a->chunk_sha256[k], b->chunk_sha256[k])) {
      if (first < 0) first = (int)k;
      last = (int)k;
    }
  if (first < 0) return;
  uint64_t s, e, s2, e2;
  rc_mf_chunk_range(a, first, &s, &e);
  rc_mf_chunk_range(a, last, &s2, &e2);
  if (first == last)
    snprintf(buf, cap, "; chunk %d of %d differs there (bytes [%" PRIu64 ", %" PRIu64 "))", first,
             a->nchunks, s, e2);
  else
    snprintf(buf, cap, "; chunks %d-%d of %d differ there (bytes [%" PRIu64 ", %" PRIu64 "))",
             first, last, a->nchunks, s, e2);
}

/* A dataset on both sides: dtype, then shape, then SHA-256; a differing
 * hash names the chunks it lies in where its offset is known (off). */
static void compare_pair(rc_cmp_ctx *c, const char *rel, const char *who,
                         const rc_mf_shard *const chunks[2], const rc_mf_dataset *a,
                         const rc_mf_dataset *b, const uint64_t *off, const char *from) {
  c->res->n_datasets_compared++;
  char ta[96], tb[96];
  shape_text(a, ta, sizeof ta);
  shape_text(b, tb, sizeof tb);
  if (a->dtype != b->dtype) {
    rc_cmp_add(c, RC_DIFF_DTYPE, rel, a->path, "%s vs %s (%s)", ta, tb, who);
    return;
  }
  if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim)) {
    rc_cmp_add(c, RC_DIFF_SHAPE, rel, a->path, "%s vs %s (%s)", ta, tb, who);
    return;
  }
  if (!strcmp(a->sha256, b->sha256)) return;
  char note[160] = "";
  if (off) {
    uint64_t n = rc_dtype_size(a->dtype);
    for (int d = 0; d < a->ndim; d++) n *= (uint64_t)a->shape[d];
    chunk_note(chunks[0], chunks[1], *off, (size_t)n, note, sizeof note);
  }
  rc_cmp_add(c, RC_DIFF_SHA256, rel, a->path,
             "SHA-256 differs (%s: values not compared); %s, A %.16s..., B %.16s...%s%s", who, ta,
             a->sha256, b->sha256, note, from);
}

/* Both sides' datasets merged in path order (each list is sorted): one
 * side only is a missing dataset, both sides are compared. */
static void compare_datasets(rc_cmp_ctx *c, const char *rel, const char *who,
                             const rc_mf_shard *const chunks[2], const side_datasets ds[2],
                             const char *from) {
  int i = 0, k = 0;
  while (i < ds[0].n || k < ds[1].n) {
    int cmp = i == ds[0].n ? 1 : k == ds[1].n ? -1 : strcmp(ds[0].d[i].path, ds[1].d[k].path);
    const rc_mf_dataset *a = cmp <= 0 ? &ds[0].d[i] : NULL, *b = cmp >= 0 ? &ds[1].d[k] : NULL;
    const uint64_t *off = cmp <= 0 && ds[0].offset   ? &ds[0].offset[i]
                          : cmp >= 0 && ds[1].offset ? &ds[1].offset[k]
                                                     : NULL;
    if (cmp <= 0) i++;
    if (cmp >= 0) k++;
    if (!a || !b) {
      rc_cmp_add(c, a ? RC_DIFF_MISSING_IN_B : RC_DIFF_MISSING_IN_A, rel, a ? a->path : b->path,
                 "dataset only in %s (%s)", a ? "A" : "B", who);
      continue;
    }
    compare_pair(c, rel, who, chunks, a, b, off, from);
  }
}

/* Why no chunk lists of one size could be had: "the chunk sizes differ (A
 * 65536, B 67108864 bytes)" or "B records no chunk hashes". */
static void why_not_chunks(const rc_mf_shard *const chunks[2], char *buf, size_t cap) {
  if (chunks[0]->chunk_sha256 && chunks[1]->chunk_sha256)
    snprintf(buf, cap, "the chunk sizes differ (A %" PRIu64 ", B %" PRIu64 " bytes)",
             chunks[0]->chunk_bytes, chunks[1]->chunk_bytes);
  else
    snprintf(buf, cap, "%s records no chunk hashes", chunks[0]->chunk_sha256 ? "B" : "A");
}

/* Every dataset's SHA-256 was equal (none newly failing): say what that
 * leaves. By chunk lists of one size, or sizes, the file is known to
 * differ (failing); without either, its other bytes were not compared,
 * which is information, not a difference, and never "identical". */
static void datasets_all_equal(rc_cmp_ctx *c, const char *rel, const char *who,
                               const rc_mf_shard *const chunks[2], bool by_chunks, bool ignored,
                               bool trust, const char *from) {
  if (by_chunks || chunks[0]->bytes != chunks[1]->bytes) {
    if (ignored) return; /* an ignored dataset may be what differs */
    if (by_chunks)
      rc_cmp_add(c, RC_DIFF_SHA256, rel, "",
                 "chunk SHA-256s differ but every dataset's is equal (%s: /meta or layout differ;"
                 " nothing else compared)%s",
                 who, from);
    else
      rc_cmp_add(c, RC_DIFF_SHA256, rel, "",
                 "file sizes differ (A %" PRIu64 ", B %" PRIu64 " bytes) but every dataset's"
                 " SHA-256 is equal (%s: /meta or layout differ; nothing else compared)%s",
                 chunks[0]->bytes, chunks[1]->bytes, who, from);
    return;
  }
  char why[128];
  why_not_chunks(chunks, why, sizeof why);
  rc_cmp_add(c, RC_DIFF_INFORMATIONAL, rel, "",
             "every dataset's SHA-256 equal%s; the file's other bytes (/meta attributes, HDF5"
             " layout) not compared (%s, and %s%s)%s",
             ignored ? " (outside the ignored ones)" : "", who, why,
             trust ? "; --trust-manifests: no bytes read" : "", from);
}

int rc_cmp_hashes_shard(rc_cmp_ctx *c, const char *rel, const rc_cmp_side side[2], rc_err *err) {
  rc_compare_result *res = c->res;
  bool trust = c->opts && c->opts->trust_manifests;
  const char *who = side[0].hashes_only && side[1].hashes_only ? "both sides kept hashes only"
                    : side[0].hashes_only                      ? "A kept hashes only"
                                                               : "B kept hashes only";
  res->n_files_compared++;
  res->n_hashes_only++;
  for (int s = 0; s < 2; s++)
    if (!side[s].hashes_only && !side[s].verified && !trust)
      return rc_fail(err, RC_EXIT_SOFTWARE, "%s: shard of side %s compared unverified", rel,
                     s ? "B" : "A");

  /* The chunk lists the file is decided by: the manifests', or a side's
   * bytes hashed at the other side's chunk size (a hashes-only side always
   * records chunks, and never a whole-file hash). */
  side_datasets ds[2] = {0};
  bool loaded[2] = {false, false};
  const rc_mf_shard *chunks[2] = {side[0].entry, side[1].entry};
  int rc = RC_OK;
  if (!chunks_comparable(chunks[0], chunks[1]) && !trust)
    for (int s = 0; s < 2 && !rc; s++)
      if (!side[s].hashes_only && side[1 - s].entry->chunk_sha256) {
        rc = side_load(&side[s], trust, side[1 - s].entry->chunk_bytes, &ds[s], err);
        loaded[s] = !rc;
        if (!rc) chunks[s] = &ds[s].computed.chunks;
      }
  if (rc) goto done;
  bool by_chunks = chunks_comparable(chunks[0], chunks[1]);
  if (by_chunks && chunks_equal(chunks[0], chunks[1])) {
    res->n_files_identical++;
    res->n_datasets_compared += side[0].entry->ndatasets;
    goto done;
  }

  /* Different, or no chunks to say: dataset by dataset, in path order. */
  for (int s = 0; s < 2 && !rc; s++)
    if (!loaded[s]) rc = side_load(&side[s], trust, 0, &ds[s], err);
  if (rc) goto done;
  int n_before = res->n_diffs, ign_before = c->n_ignored;
  char from[160] = "";
  for (int s = 0; s < 2; s++)
    if (!side[s].hashes_only && !ds[s].from_bytes)
      snprintf(from + strlen(from), sizeof from - strlen(from),
               "; %s's dataset hashes taken from its manifest (--trust-manifests)", s ? "B" : "A");
  compare_datasets(c, rel, who, chunks, ds, from);
  if (res->n_diffs == n_before)
    datasets_all_equal(c, rel, who, chunks, by_chunks, c->n_ignored != ign_before, trust, from);
done:
  side_free(&ds[0]);
  side_free(&ds[1]);
  return rc;
}
