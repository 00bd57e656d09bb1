/* shard_read.c — HDF5 helpers for reading shards: quiet error handling with
 * HDF5's reason in our messages, dtype mapping, opening a file image from
 * memory without a copy, reading /meta and listing datasets.
 *
 * Shards are only ever opened from memory, after their bytes have been
 * hashed: libhdf5 never parses a byte the manifest has not vouched for, and
 * what is parsed is exactly what was hashed (no second read from disk). */
#include "io/checkpoint_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/fsutil.h"
#include "io/checkpoint.h"

/* Shards are written as little-endian on disk and read into native memory
 * with a plain memcpy-like H5Dread; the per-dataset SHA-256 in the manifest
 * is of these little-endian bytes. Big-endian hosts would need a swap. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "resumecheck's checkpoint layer assumes a little-endian host"
#endif

void rc_h5_quiet_begin(rc_h5_quiet *q) {
  q->fn = NULL;
  q->data = NULL;
  H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void rc_h5_quiet_end(const rc_h5_quiet *q) {
  H5Eset_auto2(H5E_DEFAULT, q->fn, q->data);
}

typedef struct {
  char innermost[256];
  int seen;
} h5_walk;

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
  h5_walk *w = data;
  (void)n;
  if (w->seen++ == 0 && e->desc) snprintf(w->innermost, sizeof w->innermost, "%s", e->desc);
  return 0;
}

int rc_h5_fail(rc_err *err, int code, const char *fmt, ...) {
  char what[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  h5_walk w = {{0}, 0};
  /* Upward: the first record is where the error was detected, which is the
   * most specific reason HDF5 has. */
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);
  H5Eclear2(H5E_DEFAULT);
  if (w.innermost[0]) return rc_fail(err, code, "%s (HDF5: %s)", what, w.innermost);
  return rc_fail(err, code, "%s", what);
}

hid_t rc_h5_file_type(rc_dtype dt) {
  switch (dt) {
  case RC_DT_F32:
    return H5T_IEEE_F32LE;
  case RC_DT_F64:
    return H5T_IEEE_F64LE;
  case RC_DT_I64:
    return H5T_STD_I64LE;
  case RC_DT_U64:
    return H5T_STD_U64LE;
  case RC_DT_I32:
    return H5T_STD_I32LE;
  case RC_DT_I8:
    return H5T_STD_I8LE;
  }
  return H5I_INVALID_HID;
}

hid_t rc_h5_mem_type(rc_dtype dt) {
  switch (dt) {
  case RC_DT_F32:
    return H5T_NATIVE_FLOAT;
  case RC_DT_F64:
    return H5T_NATIVE_DOUBLE;
  case RC_DT_I64:
    return H5T_NATIVE_INT64;
  case RC_DT_U64:
    return H5T_NATIVE_UINT64;
  case RC_DT_I32:
    return H5T_NATIVE_INT32;
  case RC_DT_I8:
    return H5T_NATIVE_INT8;
  }
  return H5I_INVALID_HID;
}

void rc_h5_type_name(hid_t type, char *buf, size_t cap) {
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  const char *be = H5Tget_order(type) == H5T_ORDER_BE ? "be" : "";
  switch (cls) {
  case H5T_FLOAT:
    snprintf(buf, cap, "float%zu%s", 8 * size, be);
    return;
  case H5T_INTEGER:
    snprintf(buf, cap, "%sint%zu%s", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", 8 * size, be);
    return;
  case H5T_STRING:
    if (H5Tis_variable_str(type) > 0)
      snprintf(buf, cap, "string(variable)");
    else
      snprintf(buf, cap, "string(%zu)", size);
    return;
  case H5T_BITFIELD:
    snprintf(buf, cap, "bitfield%zu", 8 * size);
    return;
  case H5T_OPAQUE:
    snprintf(buf, cap, "opaque%zu", 8 * size);
    return;
  case H5T_COMPOUND:
    snprintf(buf, cap, "compound(%zu bytes)", size);
    return;
  case H5T_ENUM:
    snprintf(buf, cap, "enum(%zu bytes)", size);
    return;
  case H5T_ARRAY:
    snprintf(buf, cap, "array(%zu bytes)", size);
    return;
  case H5T_VLEN:
    snprintf(buf, cap, "vlen");
    return;
  case H5T_REFERENCE:
    snprintf(buf, cap, "reference");
    return;
  default:
    snprintf(buf, cap, "unknown-type");
    return;
  }
}

/* ---- reading a shard: size check, then read and hash in one pass */

enum { HASH_CHUNK = 256 << 10 }; /* fits in L2: read(2) lands it, SHA-256 reads it warm */

int rc_read_shard(const char *path, int64_t expect_size, rc_shard_image *out,
                  char hex[RC_SHA256_HEX], rc_err *err) {
  memset(out, 0, sizeof *out);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return rc_fail(err, e == ENOENT ? RC_EXIT_NOINPUT : RC_EXIT_IOERR, "cannot open %s: %s", path,
                   strerror(e));
  }
  int ret = RC_OK;
  EVP_MD_CTX *ctx = NULL;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ret = rc_fail(err, RC_EXIT_IOERR, "cannot read %s: %s", path, strerror(errno));
    goto done;
  }
  if (!S_ISREG(st.st_mode)) {
    ret = rc_fail(err, RC_EXIT_IOERR, "cannot read %s: not a regular file", path);
    goto done;
  }
  size_t size = (size_t)st.st_size;
  if (expect_size >= 0 && st.st_size != expect_size) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: %s: %zu bytes, the manifest says %" PRId64, path,
                  st.st_size < expect_size ? "truncated" : "wrong size (trailing data)", size,
                  expect_size);
    goto done;
  }
  out->data = rc_map_image(size + 1, &out->cap);
  ctx = EVP_MD_CTX_new();
  if (!out->data || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "reading %s: out of memory (%zu bytes)", path, size);
    goto done;
  }
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  size_t got = 0;
  for (;;) {
    size_t want = size + 1 - got; /* one byte more than expected: sees growth */
    if (want > HASH_CHUNK) want = HASH_CHUNK;
    ssize_t r = read(fd, out->data + got, want);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ret = rc_fail(err, RC_EXIT_IOERR, "reading %s: %s", path, strerror(errno));
      goto done;
    }
    if (r == 0) break;
    if (got + (size_t)r > size) {
      ret = rc_fail(err, RC_EXIT_IOERR, "%s grew while being read", path);
      goto done;
    }
    EVP_DigestUpdate(ctx, out->data + got, (size_t)r);
    got += (size_t)r;
  }
  if (got != size) {
    ret = rc_fail(err, RC_EXIT_IOERR, "%s shrank while being read (%zu of %zu bytes)", path, got,
                  size);
    goto done;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!EVP_DigestFinal_ex(ctx, md, &len) || len != 32) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "hashing %s failed", path);
    goto done;
  }
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
  out->size = size;
done:
  EVP_MD_CTX_free(ctx);
  close(fd);
  if (ret) rc_shard_image_free(out);
  return ret;
}

/* ---- zero-copy file images.
 * H5Pset_file_image normally copies the buffer into the property list, again
 * into the driver, for each copy of the list. These callbacks hand HDF5 our
 * buffer instead and make every "copy" a no-op, as H5LTopen_file_image does
 * with H5LT_FILE_IMAGE_DONT_COPY. Safe because the file is opened read-only:
 * the core driver never writes to, resizes or frees the buffer. */

static void *img_malloc(size_t size, H5FD_file_image_op_t op, void *udata) {
  rc_h5_image_ref *ref = udata;
  (void)op;
  return size == ref->size ? (void *)ref->buf : NULL;
}

static void *img_memcpy(void *dst, const void *src, size_t size, H5FD_file_image_op_t op,
                        void *udata) {
  (void)op;
  (void)udata;
  if (dst != src) memcpy(dst, src, size);
  return dst;
}

static void *img_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata) {
  (void)ptr, (void)size, (void)op, (void)udata;
  return NULL; /* a read-only image never grows */
}

static herr_t img_free(void *ptr, H5FD_file_image_op_t op, void *udata) {
  (void)ptr, (void)op, (void)udata;
  return 0; /* the caller owns the buffer */
}

static void *udata_copy(void *udata) {
  return udata;
}

static herr_t udata_free(void *udata) {
  (void)udata;
  return 0;
}

int rc_h5_open_image(rc_h5_image_ref *ref, const char *what, hid_t *fid, rc_err *err) {
  int ret = RC_OK;
  *fid = H5I_INVALID_HID;
  hid_t fapl = H5I_INVALID_HID;
  if (ref->size == 0) return rc_fail(err, RC_EXIT_DATAERR, "%s: empty file", what);
  H5FD_file_image_callbacks_t cb = {img_malloc, img_memcpy, img_realloc, img_free,
                                    udata_copy, udata_free, ref};
  H5_CHECK(fapl = H5Pcreate(H5P_FILE_ACCESS), RC_EXIT_SOFTWARE, "%s: H5Pcreate", what);
  H5_CHECK(H5Pset_fapl_core(fapl, 1 << 20, 0), RC_EXIT_SOFTWARE, "%s: H5Pset_fapl_core", what);
  H5_CHECK(H5Pset_file_image_callbacks(fapl, &cb), RC_EXIT_SOFTWARE,
           "%s: H5Pset_file_image_callbacks", what);
  H5_CHECK(H5Pset_file_image(fapl, (void *)ref->buf, ref->size), RC_EXIT_SOFTWARE,
           "%s: H5Pset_file_image", what);
  /* The name only identifies the in-memory file to HDF5; it must be unique
   * among files open at once, so it carries the buffer address. */
  char name[64];
  snprintf(name, sizeof name, "rc-image-%p", ref->buf);
  H5_CHECK(*fid = H5Fopen(name, H5F_ACC_RDONLY, fapl), RC_EXIT_DATAERR,
           "%s: not a readable HDF5 file", what);
done:
  if (fapl >= 0) H5Pclose(fapl);
  return ret;
}

/* ---- /meta */

static int read_str_attr(hid_t obj, const char *name, const char *what, char **out, rc_err *err) {
  int ret = RC_OK;
  hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, space = H5I_INVALID_HID;
  *out = NULL;
  H5_CHECK(a = H5Aopen(obj, name, H5P_DEFAULT), RC_EXIT_DATAERR, "%s: /meta attribute '%s' missing",
           what, name);
  H5_CHECK(t = H5Aget_type(a), RC_EXIT_DATAERR, "%s: /meta@%s: no type", what, name);
  H5_CHECK(space = H5Aget_space(a), RC_EXIT_DATAERR, "%s: /meta@%s: no dataspace", what, name);
  if (H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) != 0 ||
      H5Sget_simple_extent_type(space) != H5S_SCALAR) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: /meta@%s is not a fixed-length scalar string", what,
                  name);
    goto done;
  }
  size_t n = H5Tget_size(t);
  *out = calloc(n + 1, 1);
  if (!*out) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", what);
    goto done;
  }
  H5_CHECK(H5Aread(a, t, *out), RC_EXIT_IOERR, "%s: reading /meta@%s", what, name);
done:
  if (space >= 0) H5Sclose(space);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  if (ret) {
    free(*out);
    *out = NULL;
  }
  return ret;
}

static int read_int_attr(hid_t obj, const char *name, const char *what, int64_t *out, rc_err *err) {
  int ret = RC_OK;
  hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, space = H5I_INVALID_HID;
  H5_CHECK(a = H5Aopen(obj, name, H5P_DEFAULT), RC_EXIT_DATAERR, "%s: /meta attribute '%s' missing",
           what, name);
  H5_CHECK(t = H5Aget_type(a), RC_EXIT_DATAERR, "%s: /meta@%s: no type", what, name);
  H5_CHECK(space = H5Aget_space(a), RC_EXIT_DATAERR, "%s: /meta@%s: no dataspace", what, name);
  if (H5Tget_class(t) != H5T_INTEGER || H5Sget_simple_extent_type(space) != H5S_SCALAR) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: /meta@%s is not a scalar integer", what, name);
    goto done;
  }
  H5_CHECK(H5Aread(a, H5T_NATIVE_INT64, out), RC_EXIT_DATAERR, "%s: reading /meta@%s", what, name);
done:
  if (space >= 0) H5Sclose(space);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  return ret;
}

int rc_h5_read_meta(hid_t fid, const char *what, rc_meta_read *m, rc_err *err) {
  int ret = RC_OK;
  memset(m, 0, sizeof *m);
  hid_t g = H5I_INVALID_HID;
  htri_t has = H5Lexists(fid, "meta", H5P_DEFAULT);
  if (has <= 0) return rc_fail(err, RC_EXIT_DATAERR, "%s: no /meta group (not a shard)", what);
  H5_CHECK(g = H5Gopen2(fid, "meta", H5P_DEFAULT), RC_EXIT_DATAERR, "%s: /meta is not a group",
           what);
  if ((ret = read_str_attr(g, "format", what, &m->format, err))) goto done;
  if ((ret = read_int_attr(g, "format_version", what, &m->format_version, err))) goto done;
  if ((ret = read_int_attr(g, "rank", what, &m->rank, err))) goto done;
  if ((ret = read_int_attr(g, "world_size", what, &m->world_size, err))) goto done;
  if ((ret = read_int_attr(g, "iteration", what, &m->iteration, err))) goto done;
  if ((ret = read_str_attr(g, "config", what, &m->config, err))) goto done;
  if ((ret = read_str_attr(g, "config_sha256", what, &m->config_sha256, err))) goto done;
done:
  if (g >= 0) H5Gclose(g);
  if (ret) rc_meta_read_free(m);
  return ret;
}

void rc_meta_read_free(rc_meta_read *m) {
  free(m->format);
  free(m->config);
  free(m->config_sha256);
  m->format = m->config = m->config_sha256 = NULL;
}

/* ---- dataset listing */

typedef struct {
  char **paths;
  int n, cap;
  bool oom, other; /* named datatypes and the like are not shard content */
  char other_name[RC_PATH_MAX];
} ds_list;

static herr_t visit_cb(hid_t obj, const char *name, const H5O_info_t *info, void *data) {
  ds_list *l = data;
  (void)obj;
  if (info->type == H5O_TYPE_GROUP) return 0;
  if (info->type != H5O_TYPE_DATASET) {
    l->other = true;
    snprintf(l->other_name, sizeof l->other_name, "/%s", name);
    return 1; /* stop */
  }
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    char **p = realloc(l->paths, (size_t)cap * sizeof *p);
    if (!p) {
      l->oom = true;
      return -1;
    }
    l->paths = p;
    l->cap = cap;
  }
  size_t len = strlen(name);
  char *s = malloc(len + 2);
  if (!s) {
    l->oom = true;
    return -1;
  }
  s[0] = '/';
  memcpy(s + 1, name, len + 1);
  l->paths[l->n++] = s;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int rc_h5_list_datasets(hid_t fid, const char *what, char ***paths, int *n, rc_err *err) {
  ds_list l = {0};
  int ret = RC_OK;
  *paths = NULL;
  *n = 0;
  herr_t r = H5Ovisit2(fid, H5_INDEX_NAME, H5_ITER_INC, visit_cb, &l, H5O_INFO_BASIC);
  if (l.oom) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory listing datasets", what);
  } else if (l.other) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: unexpected object %s (not a group or dataset)", what,
                  l.other_name);
  } else if (r < 0) {
    ret = rc_h5_fail(err, RC_EXIT_DATAERR, "%s: cannot list the file's objects", what);
  }
  if (ret) {
    rc_h5_free_paths(l.paths, l.n);
    return ret;
  }
  qsort(l.paths, (size_t)l.n, sizeof *l.paths, cmp_str);
  *paths = l.paths;
  *n = l.n;
  return RC_OK;
}

void rc_h5_free_paths(char **paths, int n) {
  for (int i = 0; i < n; i++) free(paths[i]);
  free(paths);
}

/* ---- `resumecheck inspect` */

/* Raw bytes of one dataset (read with its own file type, so no conversion
 * happens) hashed; variable-length data has no raw bytes to hash. */
static int inspect_dataset(hid_t fid, const char *path, FILE *out, const char *what, rc_err *err) {
  int ret = RC_OK;
  hid_t ds = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
  void *buf = NULL;
  H5_CHECK(ds = H5Dopen2(fid, path, H5P_DEFAULT), RC_EXIT_DATAERR, "%s: opening %s", what, path);
  H5_CHECK(type = H5Dget_type(ds), RC_EXIT_DATAERR, "%s: type of %s", what, path);
  H5_CHECK(space = H5Dget_space(ds), RC_EXIT_DATAERR, "%s: dataspace of %s", what, path);
  char tname[64], shape[256] = "[";
  rc_h5_type_name(type, tname, sizeof tname);
  int nd = H5Sget_simple_extent_ndims(space);
  hsize_t dims[H5S_MAX_RANK];
  H5_CHECK(nd, RC_EXIT_DATAERR, "%s: rank of %s", what, path);
  H5_CHECK(H5Sget_simple_extent_dims(space, dims, NULL), RC_EXIT_DATAERR, "%s: dims of %s", what,
           path);
  size_t o = 1;
  for (int d = 0; d < nd && o < sizeof shape; d++)
    o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%llu", d ? ", " : "",
                          (unsigned long long)dims[d]);
  if (o < sizeof shape) snprintf(shape + o, sizeof shape - o, "]");
  hssize_t npoints = H5Sget_simple_extent_npoints(space);
  H5T_class_t cls = H5Tget_class(type);
  bool hashable = cls != H5T_VLEN && cls != H5T_REFERENCE && H5Tis_variable_str(type) == 0 &&
                  H5Tdetect_class(type, H5T_VLEN) == 0;
  char sha[RC_SHA256_HEX] = "-";
  if (hashable && npoints >= 0) {
    size_t n = (size_t)npoints * H5Tget_size(type);
    buf = malloc(n ? n : 1);
    if (!buf) {
      ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory reading %s", what, path);
      goto done;
    }
    if (n > 0)
      H5_CHECK(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), RC_EXIT_DATAERR,
               "%s: reading %s", what, path);
    rc_sha256_hex(buf, n, sha);
  }
  fprintf(out, "  %-8s %-16s %s  %s\n", tname, shape, sha, path);
done:
  free(buf);
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (ds >= 0) H5Dclose(ds);
  return ret;
}

static int inspect(const char *shard_path, FILE *out, rc_err *err) {
  rc_shard_image img;
  char sha[RC_SHA256_HEX];
  int ret = rc_read_shard(shard_path, -1, &img, sha, err);
  if (ret) return ret;
  size_t n = img.size;
  rc_h5_image_ref ref = {img.data, n};
  hid_t fid = H5I_INVALID_HID;
  char **paths = NULL;
  int npaths = 0;
  if ((ret = rc_h5_open_image(&ref, shard_path, &fid, err))) goto done;
  fprintf(out, "file: %s\nbytes: %zu\nsha256: %s\n", shard_path, n, sha);
  rc_meta_read m;
  rc_err merr = {0};
  if (rc_h5_read_meta(fid, shard_path, &m, &merr) == RC_OK) {
    fprintf(out,
            "meta:\n  format: %s\n  format_version: %" PRId64 "\n  rank: %" PRId64
            "\n  world_size: %" PRId64 "\n  iteration: %" PRId64 "\n  config_sha256: %s\n"
            "  config: %s\n",
            m.format, m.format_version, m.rank, m.world_size, m.iteration, m.config_sha256,
            m.config);
    rc_meta_read_free(&m);
  } else {
    /* Not fatal: inspect is also for HDF5 files other trainers wrote. */
    fprintf(out, "meta: (none: %s)\n", merr.msg);
  }
  if ((ret = rc_h5_list_datasets(fid, shard_path, &paths, &npaths, err))) goto done;
  fprintf(out, "datasets: %d\n", npaths);
  for (int i = 0; i < npaths && !ret; i++)
    ret = inspect_dataset(fid, paths[i], out, shard_path, err);
done:
  rc_h5_free_paths(paths, npaths);
  if (fid >= 0 && H5Fclose(fid) < 0 && !ret)
    ret = rc_h5_fail(err, RC_EXIT_IOERR, "%s: closing", shard_path);
  rc_shard_image_free(&img);
  return ret;
}

int rc_shard_inspect(const char *shard_path, FILE *out, rc_err *err) {
  rc_h5_quiet quiet;
  rc_h5_quiet_begin(&quiet);
  int ret = inspect(shard_path, out, err);
  rc_h5_quiet_end(&quiet);
  return ret;
}
