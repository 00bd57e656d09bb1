/* h5_util.c — the HDF5 helpers every part of the checkpoint layer shares:
 * quiet error handling with HDF5's reason in our messages, dtype mapping
 * and the one type namer (h5_type.h), opening a file image from memory
 * without a copy, reading /meta and listing datasets.
 *
 * One file so that the writer (shard_write.c), the reader (shard_verify.c),
 * the loader and `inspect` all depend on it and not on one another.
 *
 * Shards are only ever opened from memory, after their bytes have been
 * hashed: libhdf5 never parses a byte the manifest has not vouched for, and
 * what is parsed is exactly what was hashed (no second read from disk).
 * A hash stops corruption, not forgery, so the metadata's structure is
 * checked before libhdf5 sees it (rc_check_shard_structure,
 * shard_structure.c). */
#include "io/checkpoint_internal.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* An IEEE binary32 or binary64 layout (what float32/float64 name): a
 * float of another layout prints its size instead, so two types that print
 * alike are alike. */
static bool is_ieee_float(hid_t type, size_t size) {
  size_t spos, epos, esize, mpos, msize;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  if (size == 4) return spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23;
  if (size == 8) return spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52;
  return false;
}

/* The class of a type HDF5 names by its class (and, where it has one, size). */
static const char *class_name(H5T_class_t cls) {
  switch (cls) {
  case H5T_BITFIELD:
    return "bitfield";
  case H5T_OPAQUE:
    return "opaque";
  case H5T_COMPOUND:
    return "compound";
  case H5T_ENUM:
    return "enum";
  case H5T_ARRAY:
    return "array";
  case H5T_VLEN:
    return "vlen";
  case H5T_REFERENCE:
    return "reference";
  case H5T_TIME:
    return "time";
  default:
    return "unknown type";
  }
}

void rc_h5_type_name(hid_t type, char *buf, size_t cap) {
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  const char *be = "";
  if ((cls == H5T_INTEGER || cls == H5T_FLOAT) && H5Tget_order(type) == H5T_ORDER_BE) be = "be";
  switch (cls) {
  case H5T_FLOAT:
    if (size == 2 || is_ieee_float(type, size))
      snprintf(buf, cap, "float%zu%s", 8 * size, be);
    else
      snprintf(buf, cap, "float(%zu bytes)%s", size, be);
    return;
  case H5T_INTEGER:
    snprintf(buf, cap, "%sint%zu%s", H5Tget_sign(type) == H5T_SGN_2 ? "" : "u", 8 * size, be);
    return;
  case H5T_STRING:
    if (H5Tis_variable_str(type) > 0)
      snprintf(buf, cap, "string(variable)");
    else
      snprintf(buf, cap, "string(%zu)", size);
    return;
  case H5T_BITFIELD:
  case H5T_OPAQUE:
  case H5T_COMPOUND:
  case H5T_ENUM:
  case H5T_ARRAY:
    snprintf(buf, cap, "%s(%zu bytes)", class_name(cls), size);
    return;
  default:
    snprintf(buf, cap, "%s", class_name(cls));
    return;
  }
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

/* Opens the image as any HDF5 file: for `inspect`, which also reads files
 * other programs wrote. The loader's entry point is rc_h5_open_image. */
int rc_h5_open_any_image(rc_h5_image_ref *ref, const char *what, hid_t *fid, rc_err *err) {
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

/* A shard's structure is checked before libhdf5 parses a byte of it (see
 * rc_check_shard_structure for why). */
int rc_h5_open_image(rc_h5_image_ref *ref, const char *what, hid_t *fid, rc_err *err) {
  *fid = H5I_INVALID_HID;
  if (ref->size == 0) return rc_fail(err, RC_EXIT_DATAERR, "%s: empty file", what);
  int ret = rc_check_shard_structure(ref, what, err);
  return ret ? ret : rc_h5_open_any_image(ref, what, fid, err);
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
