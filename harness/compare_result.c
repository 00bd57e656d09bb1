/* compare_result.c — what every comparison shares: the result it fills
 * (the list of differences, their kinds and descriptions, the printed
 * summary), the --ignore patterns, and read-only maps of regular files.
 * The walks (compare_files.c), the HDF5 explanation (compare_datasets.c),
 * tensor files (compare_tensors.c) and hashes-only pairs
 * (compare_hashes.c) all call into it; it calls none of them. */
#include "harness/compare_internal.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/fsutil.h"

const char *rc_diff_kind_name(rc_diff_kind k) {
  switch (k) {
  case RC_DIFF_NONE:
    return "none";
  case RC_DIFF_MISSING_IN_A:
    return "missing_in_a";
  case RC_DIFF_MISSING_IN_B:
    return "missing_in_b";
  case RC_DIFF_DTYPE:
    return "dtype";
  case RC_DIFF_SHAPE:
    return "shape";
  case RC_DIFF_ATTRIBUTE:
    return "attribute";
  case RC_DIFF_VALUES:
    return "values";
  case RC_DIFF_BYTES:
    return "bytes";
  case RC_DIFF_SHA256:
    return "sha256";
  case RC_DIFF_INFORMATIONAL:
    return "informational";
  }
  return "unknown";
}

bool rc_cmp_ignored(const rc_cmp_ctx *c, const char *file, const char *object) {
  if (!c->opts || !c->opts->ignore) return false;
  char both[1100];
  snprintf(both, sizeof both, "%s:%s", file, object);
  for (int i = 0; i < c->opts->n_ignore; i++) {
    const char *pat = c->opts->ignore[i];
    if (*file && !fnmatch(pat, file, 0)) return true;
    if (*object && !fnmatch(pat, both, 0)) return true;
    if (!*file && *object && !fnmatch(pat, object, 0)) return true;
  }
  return false;
}

rc_diff *rc_cmp_add(rc_cmp_ctx *c, rc_diff_kind kind, const char *file, const char *object,
                    const char *fmt, ...) {
  if (rc_cmp_ignored(c, file, object)) {
    c->n_ignored++;
    return NULL;
  }
  rc_compare_result *r = c->res;
  if (r->n_diffs == r->cap_diffs) {
    int cap = r->cap_diffs ? 2 * r->cap_diffs : 16;
    rc_diff *v = realloc(r->diffs, sizeof *v * (size_t)cap);
    if (!v) {
      fprintf(stderr, "resumecheck: out of memory\n");
      abort();
    }
    r->diffs = v;
    r->cap_diffs = cap;
  }
  rc_diff *d = &r->diffs[r->n_diffs++];
  memset(d, 0, sizeof *d);
  d->kind = kind;
  d->first_index = -1;
  snprintf(d->file, sizeof d->file, "%s", file);
  snprintf(d->object, sizeof d->object, "%s", object);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->detail, sizeof d->detail, fmt, ap);
  va_end(ap);
  if (kind != RC_DIFF_INFORMATIONAL) r->n_failing++;
  return d;
}

void rc_compare_result_free(rc_compare_result *res) {
  free(res->diffs);
  memset(res, 0, sizeof *res);
}

void rc_diff_describe(const rc_diff *d, char *buf, size_t cap) {
  const char *where = d->object[0] ? d->object : d->file;
  char extra[sizeof d->detail + 4] = "";
  if (d->detail[0]) snprintf(extra, sizeof extra, ": %s", d->detail);
  if (d->object[0] && d->file[0])
    snprintf(buf, cap, "%s in %s (%s%s)", where, d->file, rc_diff_kind_name(d->kind), extra);
  else
    snprintf(buf, cap, "%s (%s%s)", where, rc_diff_kind_name(d->kind), extra);
}

void rc_compare_print(const rc_compare_result *res, FILE *out, int max_lines) {
  int shown = 0;
  for (int i = 0; i < res->n_diffs; i++) {
    if (max_lines >= 0 && shown == max_lines) {
      fprintf(out, "  ... %d more (use --json FILE for the full list)\n", res->n_diffs - shown);
      break;
    }
    const rc_diff *d = &res->diffs[i];
    const char *sep = d->file[0] && d->object[0] ? ":" : "";
    fprintf(out, "  %-4s %-13s %s%s%s  %s\n", d->kind == RC_DIFF_INFORMATIONAL ? "info" : "FAIL",
            rc_diff_kind_name(d->kind), d->file, sep, d->object, d->detail);
    shown++;
  }
  fprintf(out, "%d file pairs compared, %d byte-identical; %d datasets compared\n",
          res->n_files_compared, res->n_files_identical, res->n_datasets_compared);
  if (res->n_shards_verified)
    fprintf(out, "shard bytes: %d files, %" PRId64 " bytes read and verified against manifests\n",
            res->n_shards_verified, res->bytes_verified);
  if (res->n_hashes_only)
    fprintf(out,
            "%d shard pair%s against a hashes-only checkpoint (side %s: no shard file, only its"
            " manifest's SHA-256s): decided by SHA-256, values not compared\n",
            res->n_hashes_only, res->n_hashes_only == 1 ? "" : "s",
            res->hashes_only_a && res->hashes_only_b ? "A and B"
            : res->hashes_only_a                     ? "A"
                                                     : "B");
  if (res->fast_path)
    fprintf(out, "manifests identical; shard bytes not read\n");
  else if (res->n_by_manifest)
    fprintf(out, "%d shard pair%s equal by manifests; their bytes not read\n", res->n_by_manifest,
            res->n_by_manifest == 1 ? "" : "s");
  int info = res->n_diffs - res->n_failing;
  if (res->n_failing)
    fprintf(out, "DIFFERENT: %d difference%s", res->n_failing, res->n_failing == 1 ? "" : "s");
  else if (res->nothing_compared)
    fprintf(
        out,
        "NOTHING COMPARED: nothing compared (every file and dataset ignored: %d matched --ignore)",
        res->n_ignored);
  else
    fprintf(out, "IDENTICAL");
  if (info) fprintf(out, " (%d informational, not failed)", info);
  fprintf(out, "\n");
}

/* ---------------------------------------------------------------------------
 * Mapped files. */

int rc_cmp_map_open(const char *path, rc_cmp_map *m, rc_err *err) {
  memset(m, 0, sizeof *m);
  /* regular files only: a directory, FIFO or device is named as such (65),
   * never opened blocking or mapped */
  int fd = -1;
  size_t size = 0;
  int rc = rc_open_regular(path, false, &fd, &size, err);
  if (rc) return rc;
  if (size > 0) {
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      rc = rc_fail(err, RC_EXIT_IOERR, "cannot map %s: %s", path, strerror(errno));
    } else {
      madvise(p, size, MADV_SEQUENTIAL);
      m->data = p;
      m->size = size;
    }
  }
  close(fd);
  return rc;
}

void rc_cmp_map_close(rc_cmp_map *m) {
  if (m->data) munmap((void *)m->data, m->size);
  memset(m, 0, sizeof *m);
}
