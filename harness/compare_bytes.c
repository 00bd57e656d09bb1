/* compare_bytes.c — what differs between two files that are compared as
 * bytes (not HDF5, not decoded as tensors): how many bytes, and where.
 *
 * "first difference at byte N" does not tell a user whether N starts one
 * stray word or the rest of the file; a defect of 4 uninitialised bytes in a
 * 1.5 GB state file reads "4 bytes differ, in 1 range: [N, N+4)". The count
 * is over the common prefix (the shorter size), and sizes that differ are
 * said as such. Both files are read in chunks, side by side, with pread:
 * memory stays at two chunks whatever the size, and the pass is linear. */
#include "harness/compare_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"

#define BYTES_CHUNK ((size_t)4 << 20) /* per side, per read */
#define BYTES_BLOCK 64                /* memcmp granule inside a chunk */

/* The ranges being collected: runs of differing bytes, merged across chunk
 * and block boundaries (a run open at the end of one chunk continues at the
 * start of the next). */
typedef struct {
  rc_diff *d;
  bool open;      /* the byte before the next one fed differed */
  int64_t start;  /* start of the open run */
  int64_t ndiff;  /* differing bytes so far */
  int64_t nrange; /* runs closed so far */
} ranges_t;

static void range_close(ranges_t *r, int64_t end) {
  if (!r->open) return;
  if (r->nrange < RC_DIFF_MAX_RANGES) {
    r->d->ranges[r->nrange].start = r->start;
    r->d->ranges[r->nrange].end = end;
  }
  r->nrange++;
  r->open = false;
}

/* n bytes of each side, the first at file offset off. */
static void feed(ranges_t *r, const unsigned char *a, const unsigned char *b, size_t n,
                 int64_t off) {
  size_t i = 0;
  while (i < n) {
    size_t m = n - i < BYTES_BLOCK ? n - i : BYTES_BLOCK;
    if (!memcmp(a + i, b + i, m)) { /* an equal block ends any open run */
      range_close(r, off + (int64_t)i);
      i += m;
      continue;
    }
    for (size_t k = i; k < i + m; k++) {
      if (a[k] != b[k]) {
        r->ndiff++;
        if (!r->open) {
          r->open = true;
          r->start = off + (int64_t)k;
        }
      } else {
        range_close(r, off + (int64_t)k);
      }
    }
    i += m;
  }
}

/* Reads exactly n bytes at off (a short read is a file that changed). */
static int read_at(int fd, const char *path, unsigned char *buf, size_t n, int64_t off,
                   rc_err *err) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = pread(fd, buf + got, n - got, (off_t)(off + (int64_t)got));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return rc_fail(err, RC_EXIT_IOERR, "cannot read %s: %s", path, strerror(errno));
    if (k == 0)
      return rc_fail(err, RC_EXIT_DATAERR, "%s: shorter than it was (changed while compared)",
                     path);
    got += (size_t)k;
  }
  return RC_OK;
}

/* "[2, 3), [102, 103)" and, past the listed ones, "and N more". */
static void ranges_text(const rc_diff *d, char *out, size_t cap) {
  size_t len = 0;
  out[0] = 0;
  for (int i = 0; i < d->n_ranges_listed && len < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%s[%" PRId64 ", %" PRId64 ")", i ? ", " : "",
                            d->ranges[i].start, d->ranges[i].end);
  if (d->n_ranges > d->n_ranges_listed && len < cap)
    snprintf(out + len, cap - len, " and %" PRId64 " more", d->n_ranges - d->n_ranges_listed);
}

int rc_cmp_bytes_fill(const char *path_a, const char *path_b, int64_t from, rc_diff *d,
                      rc_err *err) {
  int fa = -1, fb = -1;
  size_t sa = 0, sb = 0;
  int rc = rc_open_regular(path_a, false, &fa, &sa, err);
  if (rc) return rc;
  if ((rc = rc_open_regular(path_b, false, &fb, &sb, err))) {
    close(fa);
    return rc;
  }
  unsigned char *ba = malloc(BYTES_CHUNK), *bb = malloc(BYTES_CHUNK);
  ranges_t r = {d, false, 0, 0, 0};
  int64_t common = (int64_t)(sa < sb ? sa : sb);
  if (from < 0 || from > common) from = 0;
  if (!ba || !bb) {
    rc = rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    goto done;
  }
  posix_fadvise(fa, 0, 0, POSIX_FADV_SEQUENTIAL);
  posix_fadvise(fb, 0, 0, POSIX_FADV_SEQUENTIAL);
  for (int64_t off = from; off < common; off += (int64_t)BYTES_CHUNK) {
    size_t n = common - off < (int64_t)BYTES_CHUNK ? (size_t)(common - off) : BYTES_CHUNK;
    if ((rc = read_at(fa, path_a, ba, n, off, err)) || (rc = read_at(fb, path_b, bb, n, off, err)))
      goto done;
    feed(&r, ba, bb, n, off);
  }
  range_close(&r, common);
  d->have_bytes = true;
  d->size_a = (int64_t)sa;
  d->size_b = (int64_t)sb;
  d->n_bytes_different = r.ndiff;
  d->n_ranges = r.nrange;
  d->n_ranges_listed = r.nrange < RC_DIFF_MAX_RANGES ? (int)r.nrange : RC_DIFF_MAX_RANGES;
  d->first_index = r.nrange ? d->ranges[0].start : common;

  char list[RC_DIFF_MAX_RANGES * 48 + 32];
  ranges_text(d, list, sizeof list);
  char sizes[160];
  if (sa == sb)
    snprintf(sizes, sizeof sizes, "%zu vs %zu bytes", sa, sb);
  else
    snprintf(sizes, sizeof sizes,
             "%zu vs %zu bytes (sizes differ: %s is %" PRId64 " bytes longer; counted over the "
             "common %" PRId64 ")",
             sa, sb, sa > sb ? "A" : "B", (int64_t)(sa > sb ? sa - sb : sb - sa), common);
  if (r.ndiff == 0)
    snprintf(d->detail, sizeof d->detail, "%s, no byte of the common %" PRId64 " differs", sizes,
             common);
  else
    snprintf(d->detail, sizeof d->detail,
             "%s, first difference at byte %" PRId64 ": %" PRId64 " byte%s differ%s, in %" PRId64
             " range%s: %s",
             sizes, d->ranges[0].start, r.ndiff, r.ndiff == 1 ? "" : "s", r.ndiff == 1 ? "s" : "",
             r.nrange, r.nrange == 1 ? "" : "s", list);
done:
  free(ba);
  free(bb);
  close(fa);
  close(fb);
  return rc;
}

void rc_diff_json_bytes(rc_jw *w, const rc_diff *d) {
  if (!d->have_bytes) return;
  rc_jw_key(w, "size_a");
  rc_jw_int(w, d->size_a);
  rc_jw_key(w, "size_b");
  rc_jw_int(w, d->size_b);
  rc_jw_key(w, "n_bytes_different");
  rc_jw_int(w, d->n_bytes_different);
  rc_jw_key(w, "n_ranges");
  rc_jw_int(w, d->n_ranges);
  rc_jw_key(w, "ranges");
  rc_jw_arr_begin(w);
  for (int i = 0; i < d->n_ranges_listed; i++) {
    rc_jw_arr_begin(w);
    rc_jw_int(w, d->ranges[i].start);
    rc_jw_int(w, d->ranges[i].end);
    rc_jw_arr_end(w);
  }
  rc_jw_arr_end(w);
}
