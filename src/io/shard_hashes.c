/* shard_hashes.c — what a shard file holds, by SHA-256, from its own bytes.
 *
 * For `compare` against a hashes-only checkpoint (docs/checkpoint-format.md):
 * that side has nothing but its manifest, so the other side must not offer
 * its manifest too. Its file is read and verified against its manifest
 * entry as a load does (every chunk, or the whole file), handed to libhdf5
 * only after the loader's structure check, and every dataset is hashed
 * where it lies in the verified bytes: the manifest's dataset entries are
 * never used, so a manifest forged together with its COMPLETE cannot make a
 * differing dataset look equal. On request it also hashes the verified
 * bytes in chunks of another size than the manifest's: what a hashes-only
 * side of that chunk size recorded, so that the pair is still decided on
 * the whole file's bytes. */
#include "io/checkpoint_internal.h"

#include <stdlib.h>
#include <string.h>

void rc_shard_hashes_free(rc_shard_hashes *h) {
  free(h->datasets);
  free(h->offset);
  rc_mf_shard_free(&h->chunks);
  memset(h, 0, sizeof *h);
}

/* The verified image's chunk hashes at chunk size C, on every core. */
static int hash_chunks(const char *path, const rc_shard_image *image, uint64_t C, rc_mf_shard *out,
                       rc_err *err) {
  if (C < RC_CHUNK_BYTES_MIN || C > RC_CHUNK_BYTES_MAX)
    return rc_fail(err, RC_EXIT_SOFTWARE, "%s: chunk size %llu out of range", path,
                   (unsigned long long)C);
  uint64_t size = image->size, nc = size / C + (size % C != 0);
  if (nc > (uint64_t)INT32_MAX)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: too many chunks of %llu bytes", path,
                   (unsigned long long)C);
  out->bytes = size;
  out->chunk_bytes = C;
  out->nchunks = (int)nc;
  out->chunk_sha256 = calloc((size_t)(nc ? nc : 1), sizeof *out->chunk_sha256);
  const void **data = calloc((size_t)(nc ? nc : 1), sizeof *data);
  size_t *sizes = calloc((size_t)(nc ? nc : 1), sizeof *sizes);
  int ret = RC_OK;
  if (!out->chunk_sha256 || !data || !sizes) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", path);
  } else {
    for (int k = 0; k < out->nchunks; k++) {
      uint64_t start, end;
      rc_mf_chunk_range(out, k, &start, &end);
      data[k] = image->data + start;
      sizes[k] = (size_t)(end - start);
    }
    rc_sha256_many(data, sizes, out->nchunks, 0, out->chunk_sha256);
  }
  free(sizes);
  free(data);
  return ret;
}

/* The dtype whose file type `type` is, if any: the writer's types only. */
static bool dtype_of(hid_t type, rc_dtype *dt) {
  static const rc_dtype all[] = {RC_DT_F32, RC_DT_F64, RC_DT_I64, RC_DT_U64, RC_DT_I32, RC_DT_I8};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (H5Tequal(type, rc_h5_file_type(all[i])) > 0) {
      *dt = all[i];
      return true;
    }
  return false;
}

/* Dataset `path`: its dtype, shape and the byte range it occupies. */
static int describe(hid_t fid, const char *what, const char *path, size_t file_size,
                    rc_mf_dataset *d, uint64_t *offset, size_t *nbytes, rc_err *err) {
  int ret = RC_OK;
  hid_t ds = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
  snprintf(d->path, sizeof d->path, "%s", path);
  H5_CHECK(ds = H5Dopen2(fid, path, H5P_DEFAULT), RC_EXIT_DATAERR, "%s: opening %s", what, path);
  H5_CHECK(type = H5Dget_type(ds), RC_EXIT_DATAERR, "%s: type of %s", what, path);
  H5_CHECK(space = H5Dget_space(ds), RC_EXIT_DATAERR, "%s: dataspace of %s", what, path);
  if (!dtype_of(type, &d->dtype)) {
    char found[64];
    rc_h5_type_name(type, found, sizeof found);
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: dataset %s has type %s, which no shard holds", what,
                  path, found);
    goto done;
  }
  H5S_class_t cls = H5Sget_simple_extent_type(space);
  int nd = cls == H5S_SCALAR ? 0 : H5Sget_simple_extent_ndims(space);
  hsize_t dims[H5S_MAX_RANK];
  if (cls == H5S_NULL || nd < 0 || nd > RC_MAX_DIMS ||
      (nd > 0 && H5Sget_simple_extent_dims(space, dims, NULL) != nd)) {
    ret = rc_fail(err, RC_EXIT_DATAERR, "%s: dataset %s: a dataspace no shard has", what, path);
    goto done;
  }
  d->ndim = nd;
  size_t n = rc_dtype_size(d->dtype);
  for (int i = 0; i < nd; i++) {
    d->shape[i] = (int64_t)dims[i];
    n *= (size_t)dims[i];
  }
  *nbytes = n;
  *offset = 0;
  if (n > 0) {
    haddr_t off = H5Dget_offset(ds);
    hsize_t stored = H5Dget_storage_size(ds);
    if (off == HADDR_UNDEF || stored != n || off > file_size || n > file_size - off) {
      ret = rc_fail(err, RC_EXIT_DATAERR,
                    "%s: dataset %s: its %zu bytes are not one contiguous region inside the file",
                    what, path, n);
      goto done;
    }
    *offset = (uint64_t)off;
  }
done:
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (ds >= 0) H5Dclose(ds);
  return ret;
}

int rc_shard_hash_datasets(const char *path, const rc_mf_shard *entry, uint64_t chunk_bytes,
                           rc_shard_hashes *out, rc_err *err) {
  memset(out, 0, sizeof *out);
  rc_shard_image image = {0};
  rc_h5_quiet quiet;
  rc_h5_quiet_begin(&quiet);
  int ret = rc_read_shard_verified(path, entry, 0, NULL, NULL, &image, err);
  if (ret) {
    rc_h5_quiet_end(&quiet);
    return ret;
  }
  rc_h5_image_ref ref = {image.data, image.size};
  hid_t fid = H5I_INVALID_HID;
  char **paths = NULL;
  int n = 0;
  const void **data = NULL;
  size_t *sizes = NULL;
  char(*hex)[RC_SHA256_HEX] = NULL;
  out->chunks.bytes = image.size;
  if (chunk_bytes && (ret = hash_chunks(path, &image, chunk_bytes, &out->chunks, err))) goto done;
  if ((ret = rc_h5_open_image(&ref, path, &fid, err))) goto done;
  if ((ret = rc_h5_list_datasets(fid, path, &paths, &n, err))) goto done;
  out->datasets = calloc((size_t)(n ? n : 1), sizeof *out->datasets);
  out->offset = calloc((size_t)(n ? n : 1), sizeof *out->offset);
  data = calloc((size_t)(n ? n : 1), sizeof *data);
  sizes = calloc((size_t)(n ? n : 1), sizeof *sizes);
  hex = calloc((size_t)(n ? n : 1), sizeof *hex);
  if (!out->datasets || !out->offset || !data || !sizes || !hex) {
    ret = rc_fail(err, RC_EXIT_SOFTWARE, "%s: out of memory", path);
    goto done;
  }
  for (int i = 0; i < n && !ret; i++) {
    ret = describe(fid, path, paths[i], image.size, &out->datasets[i], &out->offset[i], &sizes[i],
                   err);
    data[i] = image.data + out->offset[i];
  }
  if (ret) goto done;
  out->ndatasets = n;
  rc_sha256_many(data, sizes, n, 0, hex);
  for (int i = 0; i < n; i++) memcpy(out->datasets[i].sha256, hex[i], RC_SHA256_HEX);
done:
  if (fid >= 0 && H5Fclose(fid) < 0 && !ret)
    ret = rc_h5_fail(err, RC_EXIT_IOERR, "%s: closing", path);
  rc_h5_free_paths(paths, n);
  free(hex);
  free(sizes);
  free(data);
  rc_shard_image_free(&image);
  if (ret) rc_shard_hashes_free(out);
  rc_h5_quiet_end(&quiet);
  return ret;
}
