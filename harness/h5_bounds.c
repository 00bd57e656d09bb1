/* h5_bounds.c — bounds checks for foreign HDF5 files (see h5_bounds.h).
 *
 * Why: libhdf5 trusts what a file declares. A 2.4 KiB file can declare a
 * 1 TiB dataset that was never written; reading it returns fill values, so
 * comparing two such files ran for hours at 100% CPU and `inspect` tried to
 * allocate 1 TiB. The work a file may cause is therefore bounded by what it
 * holds: the storage each dataset really has (H5Dget_storage_size) and the
 * file's size. The superblock is checked from the raw bytes first, because
 * that is what libhdf5 reads before anything else: sizes it cannot use and
 * addresses outside the file are refused before it follows them.
 *
 * The rule for datasets (docs/compare.md): a dataset may declare more bytes
 * than it stores only as fill values (never-written space) or through a
 * filter. Its excess is declared - stored (unfiltered) or declared -
 * RC_H5_MAX_FILTER_RATIO * stored (filtered), and the excess of all datasets
 * of a file together must not exceed the file's size. So everything that is
 * read from a file, fill values included, is at most a small multiple of
 * its size. Data stored outside the file (external raw storage, virtual
 * datasets) is refused: following it would read files the user never named. */
#include "harness/h5_bounds.h"
#include "io/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char H5_SIGNATURE[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

void rc_h5_human_bytes(uint64_t n, char *out, size_t cap) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) {
    snprintf(out, cap, "%" PRIu64 " B", n);
    return;
  }
  double x = (double)n;
  int u = 0;
  while (x >= 1024 && u < 6) {
    x /= 1024;
    u++;
  }
  snprintf(out, cap, "%.1f %s", x, units[u]);
}

/* ---------------------------------------------------------------------------
 * Step 1: the superblock, from the raw bytes (HDF5 file format spec §II.A). */

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* An address field: defined (not all ones) and inside [0, limit). */
static bool addr_inside(uint64_t a, int size, uint64_t limit) {
  uint64_t undef = size == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * size)) - 1;
  return a != undef && a < limit;
}

static bool addr_undef_or_inside(uint64_t a, int size, uint64_t limit) {
  uint64_t undef = size == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * size)) - 1;
  return a == undef || a < limit;
}

/* v0/v1 superblocks cache the root group's symbol table in the root entry's
 * scratch pad: the B-tree and the local heap of its names. libhdf5
 * allocates a heap's declared data segment before reading it, so a forged
 * size (16 GiB in an 80 KiB file) costs that allocation: refused here. */
static int check_root_heap(const unsigned char *p, size_t avail, size_t entry, int so, int sl,
                           const unsigned char *d, size_t size, uint64_t eof, const char *label,
                           rc_err *err) {
  size_t scratch = entry + 2 * (size_t)so + 8;
  if (avail < scratch + 16) return rc_fail(err, RC_EXIT_DATAERR, "%s: superblock cut short", label);
  if (le(p + entry + 2 * (size_t)so, 4) != 1 || so > 8) return RC_OK; /* nothing cached */
  uint64_t btree = le(p + scratch, so), heap = le(p + scratch + (size_t)so, so);
  if (!addr_inside(btree, so, eof) || !addr_inside(heap, so, eof))
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: root group B-tree or name heap address is outside the file", label);
  size_t need = 8 + 2 * (size_t)sl + (size_t)so;
  if (heap > size || size - heap < need || memcmp(d + heap, "HEAP", 4))
    return RC_OK; /* not a heap where the cache says: libhdf5 reports that itself */
  uint64_t seg_size = le(d + heap + 8, sl), seg_addr = le(d + heap + 8 + 2 * (size_t)sl, so);
  if (seg_size > eof || (addr_inside(seg_addr, so, UINT64_MAX) && seg_addr > eof - seg_size)) {
    char hs[32], hf[32];
    rc_h5_human_bytes(seg_size, hs, sizeof hs);
    rc_h5_human_bytes(size, hf, sizeof hf);
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: the root group's name heap claims %s at byte %" PRIu64
                   ", file has %s: not read",
                   label, hs, seg_addr, hf);
  }
  return RC_OK;
}

static int check_superblock(const unsigned char *d, size_t size, const char *label, rc_err *err) {
  /* The signature is at 0 or at a user-block boundary 512, 1024, 2048, ... */
  size_t sb = SIZE_MAX;
  for (size_t off = 0; off + 8 <= size; off = off ? 2 * off : 512)
    if (!memcmp(d + off, H5_SIGNATURE, 8)) {
      sb = off;
      break;
    }
  if (sb == SIZE_MAX) return rc_fail(err, RC_EXIT_DATAERR, "%s: no HDF5 signature", label);
  const unsigned char *p = d + sb;
  size_t avail = size - sb;
  if (avail < 12) return rc_fail(err, RC_EXIT_DATAERR, "%s: superblock cut short", label);
  int version = p[8], so, sl;
  size_t addrs; /* where the address fields start */
  int n_addrs;
  if (version == 0 || version == 1) {
    if (avail < 24) return rc_fail(err, RC_EXIT_DATAERR, "%s: superblock cut short", label);
    so = p[13];
    sl = p[14];
    if (le(p + 16, 2) == 0 || le(p + 18, 2) == 0)
      return rc_fail(err, RC_EXIT_DATAERR, "%s: superblock declares a group B-tree K of 0", label);
    addrs = version == 0 ? 24 : 28;
    n_addrs = 6; /* base, free space, EOF, driver, root entry: name offset, header */
  } else if (version == 2 || version == 3) {
    so = p[9];
    sl = p[10];
    addrs = 12;
    n_addrs = 4; /* base, extension, EOF, root object header */
  } else {
    return rc_fail(err, RC_EXIT_DATAERR, "%s: superblock version %d, which this tool does not read",
                   label, version);
  }
  if ((so != 2 && so != 4 && so != 8) || (sl != 2 && sl != 4 && sl != 8))
    return rc_fail(
        err, RC_EXIT_DATAERR,
        "%s: superblock declares %d-byte offsets and %d-byte lengths (2, 4 or 8 expected)", label,
        so, sl);
  if (avail < addrs + (size_t)n_addrs * (size_t)so)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: superblock cut short", label);
  uint64_t a[6];
  for (int i = 0; i < n_addrs; i++) a[i] = le(p + addrs + (size_t)i * (size_t)so, so);
  uint64_t base = a[0], eof = a[2];
  char has[32];
  rc_h5_human_bytes(size, has, sizeof has);
  if (!addr_inside(base, so, (uint64_t)size + 1))
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: superblock base address %" PRIu64 " is outside the file (%zu bytes)", label,
                   base, size);
  /* libhdf5 compares the end-of-file address with the file's size as an
   * absolute offset; so does this check */
  if (!addr_inside(eof, so, UINT64_MAX) || eof > (uint64_t)size)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: superblock says the file ends at byte %" PRIu64 ", the file has %zu bytes "
                   "(%s): truncated or not what it claims",
                   label, eof, size, has);
  uint64_t root = version <= 1 ? a[5] : a[3];
  if (!addr_inside(root, so, eof))
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: root group header address %" PRIu64 " is outside the file's %" PRIu64
                   " bytes",
                   label, root, eof);
  bool others_ok = version <= 1
                       ? addr_undef_or_inside(a[1], so, eof) && addr_undef_or_inside(a[3], so, eof)
                       : addr_undef_or_inside(a[1], so, eof);
  if (!others_ok)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: a superblock address (free space, driver or extension) is outside the file",
                   label);
  if (version <= 1)
    return check_root_heap(p, avail, addrs + 4 * (size_t)so, so, sl, d, size, eof, label, err);
  return RC_OK;
}

/* Every refusal of step 1 reads "LABEL: cannot open as HDF5: WHY", as
 * libhdf5's own refusals do in compare. */
int rc_h5_precheck_bytes(const unsigned char *d, size_t size, const char *label, rc_err *err) {
  char lab[4400];
  snprintf(lab, sizeof lab, "%s: cannot open as HDF5", label);
  return check_superblock(d, size, lab, err);
}

/* ---------------------------------------------------------------------------
 * Step 2: what each dataset declares against what it stores. */

typedef struct {
  int64_t file_size;
  uint64_t excess; /* bytes declared beyond storage, so far */
  const char *label;
  rc_err *err;
  int rc;
} bounds_walk;

static int dataset_fail(bounds_walk *w, const char *name, const char *fmt, uint64_t a, uint64_t b) {
  char ha[32], hb[32], hf[32], msg[256];
  rc_h5_human_bytes(a, ha, sizeof ha);
  rc_h5_human_bytes(b, hb, sizeof hb);
  rc_h5_human_bytes((uint64_t)w->file_size, hf, sizeof hf);
  snprintf(msg, sizeof msg, fmt, ha, hb, hf);
  w->rc = rc_fail(w->err, RC_EXIT_DATAERR, "%s: dataset /%s %s: not read", w->label, name, msg);
  return -1;
}

static int check_one(bounds_walk *w, hid_t dset, const char *name) {
  hid_t type = H5Dget_type(dset), space = H5Dget_space(dset), dcpl = H5Dget_create_plist(dset);
  int ret = 0;
  if (type < 0 || space < 0 || dcpl < 0) {
    w->rc = rc_fail(w->err, RC_EXIT_DATAERR, "%s: cannot read the type, shape or layout of /%s",
                    w->label, name);
    ret = -1;
    goto done;
  }
  hssize_t npoints = H5Sget_simple_extent_npoints(space);
  size_t esize = H5Tget_size(type);
  H5D_layout_t layout = H5Pget_layout(dcpl);
  int nfilters = H5Pget_nfilters(dcpl), nexternal = H5Pget_external_count(dcpl);
  if (npoints < 0 || esize == 0 || layout < 0 || nfilters < 0 || nexternal < 0) {
    w->rc = rc_fail(w->err, RC_EXIT_DATAERR, "%s: cannot read the type, shape or layout of /%s",
                    w->label, name);
    ret = -1;
    goto done;
  }
  if (nexternal > 0 || layout == H5D_VIRTUAL) {
    w->rc = rc_fail(w->err, RC_EXIT_DATAERR,
                    "%s: dataset /%s keeps its values outside this file (%s): not followed",
                    w->label, name, nexternal > 0 ? "external raw storage" : "virtual dataset");
    ret = -1;
    goto done;
  }
  /* declared bytes, saturating: dimensions can multiply past 2^64 */
  uint64_t declared =
      (uint64_t)npoints > UINT64_MAX / esize ? UINT64_MAX : (uint64_t)npoints * esize;
  uint64_t stored = H5Dget_storage_size(dset);
  if (stored > (uint64_t)w->file_size) {
    ret = dataset_fail(w, name, "claims to store %s (declares %s), file has %s", stored, declared);
    goto done;
  }
  /* Unfiltered layouts store exactly what they declare: compact data is in
   * the object header (libhdf5 reads it from a buffer of the stored size),
   * contiguous data is one run, allocated (all of it) or not (0 bytes). */
  if (nfilters == 0 && layout == H5D_COMPACT && stored != declared) {
    ret = dataset_fail(w, name, "is compact and declares %s but stores %s (file has %s)", declared,
                       stored);
    goto done;
  }
  if (nfilters == 0 && layout == H5D_CONTIGUOUS && stored != 0 && stored != declared) {
    ret = dataset_fail(w, name, "is contiguous and declares %s but stores %s (file has %s)",
                       declared, stored);
    goto done;
  }
  uint64_t cap = nfilters > 0 ? stored * RC_H5_MAX_FILTER_RATIO : stored;
  uint64_t excess = declared > cap ? declared - cap : 0;
  if (excess > (uint64_t)w->file_size) {
    ret = dataset_fail(w, name, "claims %s (stores %s), file has %s", declared, stored);
    goto done;
  }
  w->excess += excess;
  if (w->excess > (uint64_t)w->file_size)
    ret = dataset_fail(w, name,
                       "brings the bytes declared beyond storage to %s (this one stores %s), "
                       "file has %s",
                       w->excess, stored);
done:
  if (dcpl >= 0) H5Pclose(dcpl);
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  return ret;
}

static herr_t visit_object(hid_t obj, const char *name, const H5O_info_t *info, void *data) {
  bounds_walk *w = data;
  if (info->type != H5O_TYPE_DATASET) return 0;
  hid_t d = H5Dopen2(obj, name, H5P_DEFAULT);
  if (d < 0) {
    w->rc = rc_fail(w->err, RC_EXIT_DATAERR, "%s: cannot open dataset /%s (corrupt HDF5)", w->label,
                    name);
    return -1;
  }
  int ret = check_one(w, d, name);
  H5Dclose(d);
  return ret;
}

int rc_h5_check_datasets(hid_t file, int64_t file_size, const char *label, rc_err *err) {
  bounds_walk w = {file_size, 0, label, err, RC_OK};
  if (H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, visit_object, &w, H5O_INFO_BASIC) < 0 &&
      w.rc == RC_OK)
    w.rc = rc_fail(err, RC_EXIT_DATAERR, "%s: cannot list the objects (corrupt HDF5)", label);
  return w.rc;
}

static int open_and_check(const char *path, int64_t file_size, rc_err *err);

int rc_h5_check_file(const char *path, rc_err *err) {
  /* O_NONBLOCK: a FIFO must not block here; only regular files are checked */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return RC_OK; /* the caller's own open reports it */
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < 8) {
    close(fd);
    return RC_OK;
  }
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return RC_OK;
  const unsigned char *d = m;
  bool sig = false;
  for (size_t off = 0; !sig && off + 8 <= (size_t)st.st_size; off = off ? 2 * off : 512)
    sig = !memcmp(d + off, H5_SIGNATURE, 8);
  int rc = sig ? rc_h5_precheck_bytes(d, (size_t)st.st_size, path, err) : RC_OK;
  bool ours = sig && !rc && rc_shard_structure_is_ours(d, (size_t)st.st_size);
  munmap(m, (size_t)st.st_size);
  if (rc || !sig) return rc;
  /* a file that is not one of our shards is opened first in a child: libhdf5
   * 1.10 can crash on a crafted file (compare_datasets.c, probe_in_child) */
  if (!ours && !getenv("RC_TEST_COMPARE_UNISOLATED")) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      rc_err child_err = {0};
      (void)open_and_check(path, (int64_t)st.st_size, &child_err);
      _exit(0);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
    if (pid > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s: libhdf5 crashed reading this file: a malformed HDF5 file; not read",
                     path);
  }
  return open_and_check(path, (int64_t)st.st_size, err);
}

/* Step 2 on a path whose step 1 passed. */
static int open_and_check(const char *path, int64_t file_size, rc_err *err) {
  int rc = RC_OK;

  H5E_auto2_t old_func;
  void *old_data;
  H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  /* a file libhdf5 cannot open passes: the caller's own open reports it */
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f >= 0) {
    rc = rc_h5_check_datasets(f, file_size, path, err);
    H5Fclose(f);
  }
  H5Eset_auto2(H5E_DEFAULT, old_func, old_data);
  return rc;
}
