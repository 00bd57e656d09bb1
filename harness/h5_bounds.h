/* h5_bounds.h — bounds checks for HDF5 files this tool did not write
 * (foreign shards given to `compare` or `inspect`), so that a small file
 * cannot make them read, allocate or loop over more than it holds.
 *
 * Two steps (docs/compare.md, "Files this tool did not write"):
 *  1. before libhdf5 parses anything: the superblock is read from the raw
 *     bytes and its sizes and addresses must lie inside the file;
 *  2. after opening: every dataset's declared size is set against the
 *     storage it really has (H5Dget_storage_size) and the file's size.
 * A file that fails either cannot be what it claims: RC_EXIT_DATAERR,
 * naming the file and, for step 2, the dataset ("claims 1.0 TiB, file has
 * 2.4 KiB"). Our own shards pass both by construction; the loader's strict
 * validator for them is rc_check_shard_structure in src/io/shard_structure.c. */
#ifndef RC_HARNESS_H5_BOUNDS_H
#define RC_HARNESS_H5_BOUNDS_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* A filtered dataset may declare at most this many times the bytes it
 * stores: DEFLATE's maximum compression ratio (1032:1) rounded up. */
#define RC_H5_MAX_FILTER_RATIO 1100

/* Step 1 on bytes already in memory (the whole file, size bytes). label
 * names the file in messages. */
int rc_h5_precheck_bytes(const unsigned char *data, size_t size, const char *label, rc_err *err);

/* Step 2 on an open file of file_size bytes: every dataset (each object
 * once, H5Ovisit). */
int rc_h5_check_datasets(hid_t file, int64_t file_size, const char *label, rc_err *err);

/* Both steps on a path: reads what step 1 needs, opens the file read-only,
 * runs step 2, closes it. A path that is not a regular file, or has no HDF5
 * signature, passes unchecked (the caller reports those its own way). */
int rc_h5_check_file(const char *path, rc_err *err);

/* "1.0 TiB", "2.4 KiB", "512 B" */
void rc_h5_human_bytes(uint64_t n, char *out, size_t cap);

#endif
