/* shard_write.c — one rank's state as a byte-deterministic HDF5 file image.
 *
 * The whole file is built in memory with the core driver (no backing
 * store), so it can be hashed once and written with one atomic write. What
 * makes equal state give equal bytes (docs/design.md §5, checked by the io tests
 * across processes):
 *   - object time tracking off on the file-creation (root group),
 *     group-creation and dataset-creation property lists;
 *   - libver bounds pinned to EARLIEST..V18 (superblock v0, object header
 *     v1, symbol-table groups): the format does not drift with whatever
 *     "latest" means in the installed HDF5. Not V18..V18: with a v2
 *     superblock, HDF5 1.10.8's H5Fget_file_image returns an image whose
 *     superblock checksum is stale (unreadable; the file as closed differs
 *     only in those 4 bytes). The cost of v1 object headers is a 64 KiB cap
 *     on /meta (RC_META_MAX), checked with a clear message;
 *   - datasets created in the order of the rc_state, groups on demand in
 *     that order, so the allocator sees the same sequence of requests;
 *   - contiguous layout, space allocated when the dataset is created, fill
 *     value never written, so each dataset is one run of raw bytes at a
 *     fixed offset and nothing else is ever written there;
 *   - /meta attributes as fixed-length strings and fixed-width integers
 *     (no global heap, whose collections carry slack).
 * Nothing else varies: file names are not stored in the file.
 *
 * No tensor byte is copied. HDF5 builds only the metadata, in the core
 * driver's buffer (an anonymous mapping lent through the file-image
 * callbacks and kept when the file closes); each dataset's raw-data region
 * stays untouched (zero pages, never faulted in) and its bytes come
 * straight from the caller's buffer when the file is written and hashed,
 * as a list of pieces in file order. Writing the data with H5Dwrite and
 * taking H5Fget_file_image gives the same bytes, at the cost of two full
 * copies of the state (seconds and gigabytes for a large shard); the
 * io tests pin the result. The file length is the superblock's end-of-file
 * address as written at close (closing releases the unused end of the last
 * allocation block, so it can be less than the allocation before). */
#include "io/checkpoint_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A v1 object header message holds at most 64 KiB; /meta's attributes
 * share one header, so the config gets a little less. */
#define RC_META_MAX 65000

/* ---- the image buffer, owned by us, lent to the core driver */

typedef struct {
  unsigned char *buf; /* the driver's current buffer (NULL until first write) */
  size_t cap;         /* its mapped length */
  bool released;      /* the driver let go of it at file close */
  int allocations;    /* more than one: metadata spilled past the first block */
} image_mem;

static void *img_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata) {
  image_mem *m = udata;
  (void)op;
  if (ptr && ptr != m->buf) return NULL; /* only ever one buffer */
  if (ptr && size <= m->cap) return ptr;
  size_t cap;
  unsigned char *p = rc_map_image(size, &cap);
  if (!p) return NULL;
  m->allocations++;
  if (m->buf) {
    memcpy(p, m->buf, m->cap);
    munmap(m->buf, m->cap);
  }
  m->buf = p;
  m->cap = cap;
  return p;
}

static void *img_malloc(size_t size, H5FD_file_image_op_t op, void *udata) {
  image_mem *m = udata;
  return m->buf ? NULL : img_realloc(NULL, size, op, udata);
}

static void *img_memcpy(void *dst, const void *src, size_t size, H5FD_file_image_op_t op,
                        void *udata) {
  (void)op, (void)udata;
  memcpy(dst, src, size);
  return dst;
}

/* At close the driver frees its buffer: keep it, it is the file. */
static herr_t img_free(void *ptr, H5FD_file_image_op_t op, void *udata) {
  image_mem *m = udata;
  if (ptr != m->buf) return -1;
  if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE) {
    m->released = true;
    return 0;
  }
  munmap(m->buf, m->cap);
  m->buf = NULL;
  m->cap = 0;
  return 0;
}

static void *udata_copy(void *udata) {
  return udata;
}

static herr_t udata_free(void *udata) {
  (void)udata;
  return 0;
}

/* End of file as a version-0 superblock records it (with 8-byte offsets):
 * signature 8, versions and sizes 8, B-tree K values 4, consistency flags
 * 4, base address 8, free-space address 8, then the end-of-file address. */
static bool superblock_eof(const unsigned char *p, size_t cap, uint64_t *eof) {
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (cap < 48 || memcmp(p, sig, 8) || p[8] != 0 || p[13] != 8) return false;
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[40 + i];
  *eof = v;
  return true;
}

/* Where a tensor's raw bytes go in the file. */
typedef struct {
  uint64_t offset;
  size_t size;
  const void *data;
} span;

typedef struct {
  hid_t fid, gcpl, dcpl;
  char last_parent[RC_PATH_MAX]; /* groups known to exist up to here */
  span *spans;                   /* one per non-empty tensor */
  int nspans;
  uint64_t *offset; /* per tensor of the state: where its bytes start (0: empty) */
  bool layout_only; /* the tensors' buffers come later (rc_shard_build_layout) */
} writer;

/* Rejects what HDF5 would misread or what would collide with /meta:
 * relative paths, empty or dot components, a trailing slash. */
static int check_path(const char *path, rc_err *err) {
  size_t n = strlen(path);
  if (n < 2 || path[0] != '/' || path[n - 1] == '/')
    return rc_fail(err, RC_EXIT_USAGE, "dataset path '%s' is not an absolute path to a dataset",
                   path);
  if (!strcmp(path, "/meta") || !strncmp(path, "/meta/", 6))
    return rc_fail(err, RC_EXIT_USAGE, "dataset path '%s' is inside the reserved /meta group",
                   path);
  for (const char *c = path; *c;) {
    const char *e = strchr(c + 1, '/');
    size_t len = e ? (size_t)(e - c - 1) : strlen(c + 1);
    if (len == 0 || (len == 1 && c[1] == '.') || (len == 2 && c[1] == '.' && c[2] == '.'))
      return rc_fail(err, RC_EXIT_USAGE, "dataset path '%s' has an empty or '.' component", path);
    if (!e) break;
    c = e;
  }
  return RC_OK;
}

/* Creates the groups above `path` that do not exist yet, top-down. The
 * caller's tensors usually come grouped by module, so the parent of the
 * previous dataset is remembered and most calls do nothing. */
static int ensure_parents(writer *w, const char *path, rc_err *err) {
  int ret = RC_OK;
  char parent[RC_PATH_MAX];
  const char *slash = strrchr(path, '/');
  size_t plen = (size_t)(slash - path);
  memcpy(parent, path, plen);
  parent[plen] = 0;
  if (plen == 0 || !strcmp(parent, w->last_parent)) return RC_OK;
  char prefix[RC_PATH_MAX];
  for (size_t i = 1; i <= plen; i++) {
    if (parent[i] != '/' && parent[i] != 0) continue;
    memcpy(prefix, parent, i);
    prefix[i] = 0;
    htri_t exists = H5Lexists(w->fid, prefix, H5P_DEFAULT);
    H5_CHECK(exists, RC_EXIT_SOFTWARE, "creating %s: checking group %s", path, prefix);
    if (exists) {
      H5O_info_t info;
      H5_CHECK(H5Oget_info_by_name2(w->fid, prefix, &info, H5O_INFO_BASIC, H5P_DEFAULT),
               RC_EXIT_SOFTWARE, "creating %s: inspecting %s", path, prefix);
      if (info.type != H5O_TYPE_GROUP) {
        ret = rc_fail(err, RC_EXIT_USAGE, "dataset path '%s': '%s' is already a dataset", path,
                      prefix);
        goto done;
      }
      continue;
    }
    hid_t g;
    H5_CHECK(g = H5Gcreate2(w->fid, prefix, H5P_DEFAULT, w->gcpl, H5P_DEFAULT), RC_EXIT_SOFTWARE,
             "creating group %s", prefix);
    H5Gclose(g);
  }
  memcpy(w->last_parent, parent, plen + 1);
done:
  return ret;
}

static int write_tensor(writer *w, int index, const rc_tensor *t, rc_err *err) {
  int ret = RC_OK;
  hid_t space = H5I_INVALID_HID, ds = H5I_INVALID_HID;
  if ((ret = check_path(t->path, err))) return ret;
  if (t->ndim < 0 || t->ndim > RC_MAX_DIMS || rc_dtype_size(t->dtype) == 0)
    return rc_fail(err, RC_EXIT_USAGE, "dataset %s: bad ndim %d or dtype %d", t->path, t->ndim,
                   (int)t->dtype);
  hsize_t dims[RC_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0)
      return rc_fail(err, RC_EXIT_USAGE, "dataset %s: negative dimension", t->path);
    dims[i] = (hsize_t)t->shape[i];
  }
  size_t nbytes = rc_tensor_nbytes(t);
  if (nbytes > 0 && !t->data && !w->layout_only)
    return rc_fail(err, RC_EXIT_USAGE, "dataset %s: no data buffer", t->path);
  if ((ret = ensure_parents(w, t->path, err))) return ret;
  htri_t exists = H5Lexists(w->fid, t->path, H5P_DEFAULT);
  H5_CHECK(exists, RC_EXIT_SOFTWARE, "checking %s", t->path);
  if (exists) return rc_fail(err, RC_EXIT_USAGE, "duplicate dataset path %s", t->path);
  if (t->ndim == 0)
    H5_CHECK(space = H5Screate(H5S_SCALAR), RC_EXIT_SOFTWARE, "dataspace for %s", t->path);
  else
    H5_CHECK(space = H5Screate_simple(t->ndim, dims, NULL), RC_EXIT_SOFTWARE, "dataspace for %s",
             t->path);
  H5_CHECK(ds = H5Dcreate2(w->fid, t->path, rc_h5_file_type(t->dtype), space, H5P_DEFAULT, w->dcpl,
                           H5P_DEFAULT),
           RC_EXIT_SOFTWARE, "creating dataset %s", t->path);
  /* Space is allocated at creation; the bytes are placed there when the
   * file is written (see the header). Empty datasets have no storage. */
  if (nbytes > 0) {
    haddr_t off = H5Dget_offset(ds);
    if (off == HADDR_UNDEF) {
      ret = rc_h5_fail(err, RC_EXIT_SOFTWARE, "dataset %s has no contiguous storage", t->path);
      goto done;
    }
    w->spans[w->nspans++] = (span){(uint64_t)off, nbytes, w->layout_only ? NULL : t->data};
    w->offset[index] = (uint64_t)off;
  }
done:
  if (ds >= 0) H5Dclose(ds);
  if (space >= 0) H5Sclose(space);
  return ret;
}

static int attr_write(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *value,
                      rc_err *err) {
  int ret = RC_OK;
  hid_t space = H5I_INVALID_HID, a = H5I_INVALID_HID;
  H5_CHECK(space = H5Screate(H5S_SCALAR), RC_EXIT_SOFTWARE, "/meta@%s: dataspace", name);
  H5_CHECK(a = H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT), RC_EXIT_SOFTWARE,
           "/meta@%s: create", name);
  H5_CHECK(H5Awrite(a, mtype, value), RC_EXIT_SOFTWARE, "/meta@%s: write", name);
done:
  if (a >= 0) H5Aclose(a);
  if (space >= 0) H5Sclose(space);
  return ret;
}

/* Fixed-length, NUL-terminated, UTF-8: stored inside the attribute message
 * itself, so the bytes depend on nothing but the string. */
static int attr_str(hid_t obj, const char *name, const char *s, rc_err *err) {
  int ret = RC_OK;
  hid_t t = H5I_INVALID_HID;
  H5_CHECK(t = H5Tcopy(H5T_C_S1), RC_EXIT_SOFTWARE, "/meta@%s: string type", name);
  H5_CHECK(H5Tset_size(t, strlen(s) + 1), RC_EXIT_SOFTWARE, "/meta@%s: string size", name);
  H5_CHECK(H5Tset_strpad(t, H5T_STR_NULLTERM), RC_EXIT_SOFTWARE, "/meta@%s: strpad", name);
  H5_CHECK(H5Tset_cset(t, H5T_CSET_UTF8), RC_EXIT_SOFTWARE, "/meta@%s: cset", name);
  ret = attr_write(obj, name, t, t, s, err);
done:
  if (t >= 0) H5Tclose(t);
  return ret;
}

static int write_meta(writer *w, const rc_shard_meta *meta, rc_err *err) {
  int ret = RC_OK;
  hid_t g = H5I_INVALID_HID;
  char sha[RC_SHA256_HEX];
  const char *config = meta->config_json ? meta->config_json : "";
  if (strlen(config) > RC_META_MAX)
    return rc_fail(err, RC_EXIT_USAGE,
                   "config JSON is %zu bytes; a shard's /meta holds at most %d (HDF5 v1 object"
                   " header limit)",
                   strlen(config), RC_META_MAX);
  const char *config_sha = meta->config_sha256;
  if (!config_sha) {
    rc_sha256_hex(config, strlen(config), sha);
    config_sha = sha;
  }
  int32_t version = meta->format_version, rank = meta->rank, ws = meta->world_size;
  int64_t iteration = meta->iteration;
  H5_CHECK(g = H5Gcreate2(w->fid, "meta", H5P_DEFAULT, w->gcpl, H5P_DEFAULT), RC_EXIT_SOFTWARE,
           "creating /meta");
  /* The order of creation is the order in the file: keep it fixed. */
  if ((ret = attr_str(g, "format", RC_SHARD_FORMAT, err))) goto done;
  if ((ret = attr_write(g, "format_version", H5T_STD_I32LE, H5T_NATIVE_INT32, &version, err)))
    goto done;
  if ((ret = attr_write(g, "rank", H5T_STD_I32LE, H5T_NATIVE_INT32, &rank, err))) goto done;
  if ((ret = attr_write(g, "world_size", H5T_STD_I32LE, H5T_NATIVE_INT32, &ws, err))) goto done;
  if ((ret = attr_write(g, "iteration", H5T_STD_I64LE, H5T_NATIVE_INT64, &iteration, err)))
    goto done;
  if ((ret = attr_str(g, "config", config, err))) goto done;
  if ((ret = attr_str(g, "config_sha256", config_sha, err))) goto done;
done:
  if (g >= 0) H5Gclose(g);
  return ret;
}

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Bytes of metadata the shard will need. Fitted on HDF5 1.10.8 with these
 * property lists: about 370 B per dataset and 1030 B per group (v1 object
 * header, symbol-table B-tree node, local heap) plus the link names, and
 * the superblock and /meta with its config; estimated at 640 B, 1152 B and
 * an eighth more, which leaves 30-50% headroom on the shapes measured.
 * Groups are counted exactly, as the distinct parent paths of datasets. */
size_t rc_shard_meta_block(const rc_shard_meta *meta, const rc_state *state) {
  size_t groups = 0, names = 0, n = 0;
  for (int i = 0; i < state->count; i++)
    for (const char *c = state->tensors[i].path + 1; (c = strchr(c, '/')); c++) n++;
  char **prefixes = malloc((n ? n : 1) * sizeof *prefixes);
  if (prefixes) {
    for (int i = 0; i < state->count; i++) {
      const char *path = state->tensors[i].path;
      names += strlen(path);
      for (const char *c = path + 1; (c = strchr(c, '/')); c++) {
        size_t len = (size_t)(c - path);
        char *p = malloc(len + 1);
        if (!p) continue;
        memcpy(p, path, len);
        p[len] = 0;
        prefixes[groups++] = p;
      }
    }
    qsort(prefixes, groups, sizeof *prefixes, cmp_cstr);
    size_t distinct = 0;
    for (size_t i = 0; i < groups; i++) {
      if (i == 0 || strcmp(prefixes[i], prefixes[i - 1])) distinct++;
      if (i > 0) free(prefixes[i - 1]);
    }
    if (groups) free(prefixes[groups - 1]);
    free(prefixes);
    groups = distinct;
  } else {
    groups = n; /* an upper bound */
  }
  size_t config = meta->config_json ? strlen(meta->config_json) : 0;
  size_t est = (16 << 10) + 2 * config + 640 * (size_t)state->count + 1152 * groups + names;
  est += est / 8;
  return (est + 4095) & ~(size_t)4095;
}

static int cmp_span(const void *a, const void *b) {
  uint64_t x = ((const span *)a)->offset, y = ((const span *)b)->offset;
  return x < y ? -1 : x > y;
}

/* Bytes HDF5 allocated but never wrote outside its buffer (the unused end
 * of an aggregator block after the data) are zeros, as they are in a file
 * HDF5 writes itself with this build (it zero-fills new space). */
static const unsigned char k_zeros[1 << 16];

static int add_piece(rc_shard_image *im, int *cap, const void *p, size_t n, rc_err *err) {
  if (im->npieces == *cap) {
    int ncap = *cap ? 2 * *cap : 64;
    rc_piece *np = realloc(im->pieces, (size_t)ncap * sizeof *np);
    if (!np) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    im->pieces = np;
    *cap = ncap;
  }
  im->pieces[im->npieces++] = (rc_piece){p, n};
  return RC_OK;
}

/* Bytes [from, to) that are not tensor data: from the image where the
 * driver's buffer reaches, zeros beyond it. */
static int add_gap(rc_shard_image *im, int *cap, uint64_t from, uint64_t to, rc_err *err) {
  int ret = RC_OK;
  if (from < im->cap && from < to) {
    uint64_t end = to < im->cap ? to : im->cap;
    ret = add_piece(im, cap, im->data + from, (size_t)(end - from), err);
    from = end;
  }
  while (!ret && from < to) {
    size_t n = to - from < sizeof k_zeros ? (size_t)(to - from) : sizeof k_zeros;
    ret = add_piece(im, cap, k_zeros, n, err);
    from += n;
  }
  return ret;
}

/* The file in order: image bytes up to each raw-data region, the tensor's
 * own buffer for the region, and so on to the end of file. Regions must
 * lie inside the file and not overlap. */
static int make_pieces(rc_shard_image *im, span *spans, int n, rc_err *err) {
  qsort(spans, (size_t)n, sizeof *spans, cmp_span);
  int cap = 0, ret = RC_OK;
  uint64_t pos = 0;
  for (int i = 0; i <= n && !ret; i++) {
    uint64_t start = i < n ? spans[i].offset : im->size;
    if (start < pos || start > im->size || (i < n && spans[i].size > im->size - start))
      return rc_fail(err, RC_EXIT_SOFTWARE,
                     "raw-data region at %llu (+%zu) overlaps or leaves the %zu-byte file",
                     (unsigned long long)start, i < n ? spans[i].size : 0, im->size);
    ret = add_gap(im, &cap, pos, start, err);
    if (!ret && i < n) {
      ret = add_piece(im, &cap, spans[i].data, spans[i].size, err);
      pos = start + spans[i].size;
    }
  }
  return ret;
}

/* The property lists that make the bytes depend on the state alone (see
 * the header): the core driver on our buffer, one leading metadata block,
 * pinned format versions, no times, contiguous early-allocated datasets.
 * What was created is left in *fcpl, *fapl and w for close_writer. */
static int make_plists(writer *w, size_t meta_block, image_mem *mem, hid_t *fcpl, hid_t *fapl,
                       rc_err *err) {
  int ret = RC_OK;
  H5FD_file_image_callbacks_t cb = {img_malloc, img_memcpy, img_realloc, img_free,
                                    udata_copy, udata_free, mem};
  H5_CHECK(*fcpl = H5Pcreate(H5P_FILE_CREATE), RC_EXIT_SOFTWARE, "H5Pcreate(file create)");
  H5_CHECK(H5Pset_obj_track_times(*fcpl, 0), RC_EXIT_SOFTWARE, "track times off (root group)");
  H5_CHECK(*fapl = H5Pcreate(H5P_FILE_ACCESS), RC_EXIT_SOFTWARE, "H5Pcreate(file access)");
  H5_CHECK(H5Pset_fapl_core(*fapl, meta_block, 0), RC_EXIT_SOFTWARE, "H5Pset_fapl_core");
  H5_CHECK(H5Pset_meta_block_size(*fapl, meta_block), RC_EXIT_SOFTWARE, "H5Pset_meta_block_size");
  H5_CHECK(H5Pset_file_image_callbacks(*fapl, &cb), RC_EXIT_SOFTWARE,
           "H5Pset_file_image_callbacks");
  H5_CHECK(H5Pset_libver_bounds(*fapl, RC_SHARD_LIBVER_LOW, RC_SHARD_LIBVER_HIGH), RC_EXIT_SOFTWARE,
           "H5Pset_libver_bounds");
  H5_CHECK(w->gcpl = H5Pcreate(H5P_GROUP_CREATE), RC_EXIT_SOFTWARE, "H5Pcreate(group create)");
  H5_CHECK(H5Pset_obj_track_times(w->gcpl, 0), RC_EXIT_SOFTWARE, "track times off (groups)");
  H5_CHECK(w->dcpl = H5Pcreate(H5P_DATASET_CREATE), RC_EXIT_SOFTWARE, "H5Pcreate(dataset create)");
  H5_CHECK(H5Pset_obj_track_times(w->dcpl, 0), RC_EXIT_SOFTWARE, "track times off (datasets)");
  H5_CHECK(H5Pset_layout(w->dcpl, H5D_CONTIGUOUS), RC_EXIT_SOFTWARE, "contiguous layout");
  H5_CHECK(H5Pset_fill_time(w->dcpl, H5D_FILL_TIME_NEVER), RC_EXIT_SOFTWARE, "fill time never");
  H5_CHECK(H5Pset_alloc_time(w->dcpl, H5D_ALLOC_TIME_EARLY), RC_EXIT_SOFTWARE,
           "allocation at creation");
done:
  return ret;
}

/* Creates the in-memory file and writes /meta, then the tensors in the
 * state's order; *flushed: the bytes allocated before close. */
static int write_file(writer *w, hid_t fcpl, hid_t fapl, const rc_shard_meta *meta,
                      const rc_state *state, ssize_t *flushed, rc_err *err) {
  int ret = RC_OK;
  /* The name only identifies the in-memory file within this process. */
  char name[64];
  snprintf(name, sizeof name, "rc-shard-%p", (void *)w);
  H5_CHECK(w->fid = H5Fcreate(name, H5F_ACC_TRUNC, fcpl, fapl), RC_EXIT_SOFTWARE,
           "creating the in-memory HDF5 file");
  if ((ret = write_meta(w, meta, err))) goto done;
  for (int i = 0; i < state->count; i++)
    if ((ret = write_tensor(w, i, &state->tensors[i], err))) goto done;
  /* No H5Fflush: flushing "truncates" the core driver's buffer up to the
   * end of allocation, zero-filling every raw-data region. Close writes all
   * metadata anyway; its length is then read from the superblock. */
  H5_CHECK(*flushed = H5Fget_file_image(w->fid, NULL, 0), RC_EXIT_SOFTWARE,
           "sizing the file image");
done:
  return ret;
}

/* Closes the file (which writes its metadata into the buffer) and the
 * property lists; returns ret, or the close's failure where ret was OK. */
static int close_writer(writer *w, hid_t fcpl, hid_t fapl, int ret, rc_err *err) {
  if (w->fid >= 0 && H5Fclose(w->fid) < 0 && !ret)
    ret = rc_h5_fail(err, RC_EXIT_SOFTWARE, "closing the in-memory file");
  if (w->dcpl >= 0) H5Pclose(w->dcpl);
  if (w->gcpl >= 0) H5Pclose(w->gcpl);
  if (fapl >= 0) H5Pclose(fapl);
  if (fcpl >= 0) H5Pclose(fcpl);
  return ret;
}

/* The closed file's buffer as the image, once the driver handed it over
 * and its superblock's end of file lies inside what was allocated; the
 * image takes the buffer and w's offsets. */
static int take_image(const image_mem *mem, ssize_t flushed, const writer *w, int count,
                      rc_shard_image *image, rc_err *err) {
  uint64_t eof = 0;
  if (!mem->released || !mem->buf)
    return rc_fail(err, RC_EXIT_SOFTWARE, "HDF5 did not hand over the file image at close");
  if (!superblock_eof(mem->buf, mem->cap, &eof) || eof > (uint64_t)flushed)
    return rc_fail(err, RC_EXIT_SOFTWARE,
                   "file image inconsistent: superblock end of file %llu, %zd bytes allocated"
                   " before close",
                   (unsigned long long)eof, flushed);
  *image = (rc_shard_image){.data = mem->buf,
                            .size = (size_t)eof,
                            .cap = mem->cap,
                            .meta_spilled = mem->allocations > 1,
                            .offset = w->offset,
                            .count = count};
  return RC_OK;
}

static int build_image(const rc_shard_meta *meta, const rc_state *state, bool layout_only,
                       rc_shard_image *image, rc_err *err) {
  int ret = RC_OK;
  memset(image, 0, sizeof *image);
  writer w = {.fid = H5I_INVALID_HID,
              .gcpl = H5I_INVALID_HID,
              .dcpl = H5I_INVALID_HID,
              .layout_only = layout_only};
  hid_t fcpl = H5I_INVALID_HID, fapl = H5I_INVALID_HID;
  image_mem mem = {0};
  ssize_t flushed = -1;
  rc_h5_quiet quiet;
  rc_h5_quiet_begin(&quiet);

  w.spans = calloc((size_t)(state->count ? state->count : 1), sizeof *w.spans);
  w.offset = calloc((size_t)(state->count ? state->count : 1), sizeof *w.offset);
  if (!w.spans || !w.offset) {
    free(w.spans);
    free(w.offset);
    rc_h5_quiet_end(&quiet);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  /* All metadata goes into one leading block, sized from the state, so the
   * core driver's buffer (which this HDF5 build zero-fills as it grows)
   * covers only that block and never a raw-data region. An estimate that
   * is too small costs speed (a second block after the data), never
   * correctness; the unused tail of the block is zeros in the file. */
  size_t meta_block = rc_shard_meta_block(meta, state);
  ret = make_plists(&w, meta_block, &mem, &fcpl, &fapl, err);
  if (!ret) ret = write_file(&w, fcpl, fapl, meta, state, &flushed, err);
  ret = close_writer(&w, fcpl, fapl, ret, err);
  if (!ret) ret = take_image(&mem, flushed, &w, state->count, image, err);
  if (!ret) ret = make_pieces(image, w.spans, w.nspans, err);
  free(w.spans);
  if (!image->offset) free(w.offset);
  if (ret) {
    if (image->data)
      rc_shard_image_free(image);
    else if (mem.buf)
      munmap(mem.buf, mem.cap);
  }
  rc_h5_quiet_end(&quiet);
  return ret;
}

int rc_shard_build_image(const rc_shard_meta *meta, const rc_state *state, rc_shard_image *image,
                         rc_err *err) {
  return build_image(meta, state, false, image, err);
}

int rc_shard_build_layout(const rc_shard_meta *meta, const rc_state *state, rc_shard_image *image,
                          rc_err *err) {
  return build_image(meta, state, true, image, err);
}

/* The layout's own bytes (metadata, zero gaps) into buf at their offsets;
 * from then on the file is buf[0, size), one piece. */
int rc_shard_image_place(rc_shard_image *image, unsigned char *buf, rc_err *err) {
  uint64_t off = 0;
  for (int i = 0; i < image->npieces; i++) {
    if (image->pieces[i].p) memcpy(buf + off, image->pieces[i].p, image->pieces[i].n);
    off += image->pieces[i].n;
  }
  if (off != image->size)
    return rc_fail(err, RC_EXIT_SOFTWARE, "shard layout: pieces cover %llu of %zu bytes",
                   (unsigned long long)off, image->size);
  image->pieces[0] = (rc_piece){buf, image->size};
  image->npieces = 1;
  return RC_OK;
}
