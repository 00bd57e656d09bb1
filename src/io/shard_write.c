/* shard_write.c — one rank's state as a byte-deterministic HDF5 file image.
 *
 * The whole file is built in memory with the core driver (no backing
 * store), so it can be hashed once and written with one atomic write. What
 * makes equal state give equal bytes (DESIGN §5, checked by the io tests
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
 *   - contiguous layout, fill value never written, every dataset written
 *     whole right after creation, so no byte of raw data is left unset;
 *   - /meta attributes as fixed-length strings and fixed-width integers
 *     (no global heap, whose collections carry slack).
 * Nothing else varies: file names are not stored in the file, and the
 * image is taken with H5Fget_file_image after an explicit flush. */
#include "io/checkpoint_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  hid_t fid, gcpl, dcpl;
  char last_parent[RC_PATH_MAX]; /* groups known to exist up to here */
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

static int write_tensor(writer *w, const rc_tensor *t, rc_err *err) {
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
  if (nbytes > 0 && !t->data)
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
  /* Empty datasets get no storage at all; everything else is written whole
   * now, so allocation and data are one step and no fill is ever needed. */
  if (nbytes > 0)
    H5_CHECK(H5Dwrite(ds, rc_h5_mem_type(t->dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data),
             RC_EXIT_SOFTWARE, "writing dataset %s", t->path);
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

/* A v1 object header message holds at most 64 KiB; /meta's attributes
 * share one header, so the config gets a little less. */
#define RC_META_MAX 65000

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

int rc_shard_build_image(const rc_shard_meta *meta, const rc_state *state, unsigned char **image,
                         size_t *size, rc_err *err) {
  int ret = RC_OK;
  *image = NULL;
  *size = 0;
  writer w = {.fid = H5I_INVALID_HID, .gcpl = H5I_INVALID_HID, .dcpl = H5I_INVALID_HID};
  hid_t fcpl = H5I_INVALID_HID, fapl = H5I_INVALID_HID;
  rc_h5_quiet quiet;
  rc_h5_quiet_begin(&quiet);

  /* Grow the in-memory file in one step: the core driver reallocs by
   * `increment`, so sizing it to the whole state avoids copying a large
   * image several times while it is built. */
  size_t total = 0;
  for (int i = 0; i < state->count; i++) total += rc_tensor_nbytes(&state->tensors[i]);
  size_t increment = total + ((size_t)1 << 20) + (size_t)state->count * 4096;
  increment = (increment + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);

  H5_CHECK(fcpl = H5Pcreate(H5P_FILE_CREATE), RC_EXIT_SOFTWARE, "H5Pcreate(file create)");
  H5_CHECK(H5Pset_obj_track_times(fcpl, 0), RC_EXIT_SOFTWARE, "track times off (root group)");
  H5_CHECK(fapl = H5Pcreate(H5P_FILE_ACCESS), RC_EXIT_SOFTWARE, "H5Pcreate(file access)");
  H5_CHECK(H5Pset_fapl_core(fapl, increment, 0), RC_EXIT_SOFTWARE, "H5Pset_fapl_core");
  H5_CHECK(H5Pset_libver_bounds(fapl, RC_SHARD_LIBVER_LOW, RC_SHARD_LIBVER_HIGH), RC_EXIT_SOFTWARE,
           "H5Pset_libver_bounds");
  H5_CHECK(w.gcpl = H5Pcreate(H5P_GROUP_CREATE), RC_EXIT_SOFTWARE, "H5Pcreate(group create)");
  H5_CHECK(H5Pset_obj_track_times(w.gcpl, 0), RC_EXIT_SOFTWARE, "track times off (groups)");
  H5_CHECK(w.dcpl = H5Pcreate(H5P_DATASET_CREATE), RC_EXIT_SOFTWARE, "H5Pcreate(dataset create)");
  H5_CHECK(H5Pset_obj_track_times(w.dcpl, 0), RC_EXIT_SOFTWARE, "track times off (datasets)");
  H5_CHECK(H5Pset_layout(w.dcpl, H5D_CONTIGUOUS), RC_EXIT_SOFTWARE, "contiguous layout");
  H5_CHECK(H5Pset_fill_time(w.dcpl, H5D_FILL_TIME_NEVER), RC_EXIT_SOFTWARE, "fill time never");
  H5_CHECK(H5Pset_alloc_time(w.dcpl, H5D_ALLOC_TIME_LATE), RC_EXIT_SOFTWARE, "late allocation");

  /* The name only identifies the in-memory file within this process. */
  char name[64];
  snprintf(name, sizeof name, "rc-shard-%p", (void *)&w);
  H5_CHECK(w.fid = H5Fcreate(name, H5F_ACC_TRUNC, fcpl, fapl), RC_EXIT_SOFTWARE,
           "creating the in-memory HDF5 file");
  if ((ret = write_meta(&w, meta, err))) goto done;
  for (int i = 0; i < state->count; i++)
    if ((ret = write_tensor(&w, &state->tensors[i], err))) goto done;

  H5_CHECK(H5Fflush(w.fid, H5F_SCOPE_GLOBAL), RC_EXIT_SOFTWARE, "flushing the in-memory file");
  ssize_t n;
  H5_CHECK(n = H5Fget_file_image(w.fid, NULL, 0), RC_EXIT_SOFTWARE, "sizing the file image");
  *image = malloc(n > 0 ? (size_t)n : 1);
  if (!*image) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "out of memory for a %zd-byte shard image", n);
    goto done;
  }
  ssize_t got;
  H5_CHECK(got = H5Fget_file_image(w.fid, *image, (size_t)n), RC_EXIT_SOFTWARE,
           "copying the file image");
  if (got != n) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "file image changed size (%zd, then %zd bytes)", n, got);
    goto done;
  }
  *size = (size_t)n;
done:
  if (w.fid >= 0 && H5Fclose(w.fid) < 0 && !ret)
    ret = rc_h5_fail(err, RC_EXIT_SOFTWARE, "closing the in-memory file");
  if (w.dcpl >= 0) H5Pclose(w.dcpl);
  if (w.gcpl >= 0) H5Pclose(w.gcpl);
  if (fapl >= 0) H5Pclose(fapl);
  if (fcpl >= 0) H5Pclose(fcpl);
  if (ret) {
    free(*image);
    *image = NULL;
    *size = 0;
  }
  rc_h5_quiet_end(&quiet);
  return ret;
}
