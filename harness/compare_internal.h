/* compare_internal.h — what compare_files.c (paths, directories, manifests,
 * results) and compare_datasets.c (the HDF5 slow path) share. Not part of
 * the contract in compare.h. */
#ifndef RC_HARNESS_COMPARE_INTERNAL_H
#define RC_HARNESS_COMPARE_INTERNAL_H

#include <stdarg.h>

#include "harness/compare.h"

/* One comparison in progress: options, the result being filled and the
 * count of differences that --ignore suppressed. */
typedef struct {
  const rc_compare_opts *opts;
  rc_compare_result *res;
  int n_ignored;
} rc_cmp_ctx;

/* True when an --ignore pattern matches "file", "file:object" or (comparing
 * two files, file == "") the object alone. */
bool rc_cmp_ignored(const rc_cmp_ctx *c, const char *file, const char *object);

/* Records a difference unless ignored; returns it (for the caller to fill in
 * the numbers) or NULL when ignored. Aborts on out-of-memory, like the other
 * growing arrays of this project. */
rc_diff *rc_cmp_add(rc_cmp_ctx *c, rc_diff_kind kind, const char *file, const char *object,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A manifest's per-dataset SHA-256 values for one shard, sorted by path. The
 * strings are borrowed from the parsed manifest. */
typedef struct {
  const char *path, *sha256;
} rc_cmp_dset_hash;
typedef struct {
  const rc_cmp_dset_hash *items;
  int n;
} rc_cmp_hashes;

/* A whole file mapped read-only (data NULL for an empty file). Mapping
 * instead of read() saves the copy out of the page cache, which is most of
 * the cost of comparing two cached shards. */
typedef struct {
  const unsigned char *data;
  size_t size;
} rc_cmp_map;
int rc_cmp_map_open(const char *path, rc_cmp_map *m, rc_err *err);
void rc_cmp_map_close(rc_cmp_map *m);

/* What the slow path may take as already known about two HDF5 files. */
typedef struct {
  const rc_cmp_hashes *ha, *hb; /* manifest SHA-256 per dataset, or NULL: a dataset both
                                   give the same hash is not read */
  const rc_cmp_map *ma, *mb;    /* the files mapped, or NULL: contiguous datasets are then
                                   compared in place instead of through H5Dread */
  int64_t equal_prefix;         /* the files' first equal_prefix bytes are known equal: a
                                   contiguous dataset at the same offset inside it is equal;
                                   INT64_MAX: the files are equal, no value is read */
} rc_cmp_known;

/* The slow path for two HDF5 files: every link both ways, object kinds,
 * dtypes, shapes, attributes, raw values. file_rel names the pair in the
 * diffs. Errors: RC_EXIT_DATAERR when a file cannot be parsed or read. */
int rc_cmp_hdf5(rc_cmp_ctx *c, const char *file_rel, const char *path_a, const char *path_b,
                const rc_cmp_known *known, rc_err *err);

/* True when the file starts with the HDF5 signature (at byte 0 or at a
 * user-block boundary: 512, 1024, 2048, ...). */
bool rc_cmp_is_hdf5(const char *path);

#endif
