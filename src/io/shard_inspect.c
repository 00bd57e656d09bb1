/* shard_inspect.c — `resumecheck inspect`: one HDF5 file's size, SHA-256,
 * /meta and every dataset's type, shape and raw-byte SHA-256, as text.
 *
 * It reads files other trainers wrote too, so it opens the image as any
 * HDF5 file (rc_h5_open_any_image) rather than through the shard structure
 * check, and a missing /meta is reported, not fatal. */
#include "io/checkpoint_internal.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/checkpoint.h"

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
  size_t tsize = H5Tget_size(type);
  if (hashable && npoints >= 0 && tsize && (uint64_t)npoints > SIZE_MAX / tsize) {
    /* a damaged dataspace: the product would wrap and undersize the buffer */
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: %s: %lld elements of %zu bytes", what, path,
                  (long long)npoints, tsize);
    goto done;
  }
  if (hashable && npoints >= 0) {
    size_t n = (size_t)npoints * tsize;
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
  int ret = rc_read_shard(shard_path, -1, NULL, &img, sha, err);
  if (ret) return ret;
  size_t n = img.size;
  rc_h5_image_ref ref = {img.data, n};
  hid_t fid = H5I_INVALID_HID;
  char **paths = NULL;
  int npaths = 0;
  if ((ret = rc_h5_open_any_image(&ref, shard_path, &fid, err))) goto done;
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
