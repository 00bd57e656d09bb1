/* manifest.h — manifest.json in memory, and verifying a shard file against
 * its manifest entry (every byte, by chunk hashes in parallel where the
 * manifest has them, by the whole-file SHA-256 where it does not).
 *
 * Public so that `compare` can check shard bytes against manifests with the
 * loader's own parser and verifier; the rest of the checkpoint layer's
 * internals stay in checkpoint_internal.h. */
#ifndef RC_IO_MANIFEST_H
#define RC_IO_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "io/sha256.h"
#include "io/state.h"

/* Version 1: whole-file and per-dataset hashes. Version 2 adds, for every
 * shard, chunk_bytes and chunk_sha256 (SHA-256 of each chunk_bytes-sized
 * slice of the file, the last one shorter). Both are read. */
#define RC_MANIFEST_VERSION 2
#define RC_MANIFEST_VERSION_MIN 1
/* What a save records by default; rc_shard_meta.chunk_bytes overrides it
 * (RC_CHUNKS_NONE: a version-1 manifest, as older builds wrote). */
#define RC_CHUNK_BYTES ((uint64_t)64 << 20)
#define RC_CHUNK_BYTES_MIN ((uint64_t)4096)
#define RC_CHUNK_BYTES_MAX ((uint64_t)1 << 40)

typedef struct {
  char path[RC_PATH_MAX];
  rc_dtype dtype;
  int ndim;
  int64_t shape[RC_MAX_DIMS];
  char sha256[RC_SHA256_HEX]; /* of the raw little-endian bytes */
} rc_mf_dataset;

typedef struct {
  char file[64]; /* shard_%05d_of_%05d.h5, checked against rank on parse */
  int rank;
  uint64_t bytes;
  /* Of the whole file; "" in a hashes-only manifest, which records none
   * (its entries always have chunk hashes: the parser holds to both). */
  char sha256[RC_SHA256_HEX];
  rc_mf_dataset *datasets; /* malloc'd, in the shard's creation order */
  int ndatasets;
  /* Version 2: chunk k is bytes [k * chunk_bytes, min((k + 1) * chunk_bytes,
   * bytes)); nchunks == ceil(bytes / chunk_bytes). chunk_bytes 0 and
   * chunk_sha256 NULL: none recorded (version 1). */
  uint64_t chunk_bytes;
  int nchunks;
  char (*chunk_sha256)[RC_SHA256_HEX]; /* malloc'd */
} rc_mf_shard;

typedef struct {
  int64_t iteration;
  int world_size;
  rc_mf_shard *shards; /* malloc'd, world_size entries, shards[r].rank == r */
  /* "hashes_only": true: the shards were built and hashed but not written
   * (rc_shard_meta.hashes_only); the entries describe files that do not
   * exist. Absent (false) in every ordinary manifest. */
  bool hashes_only;
} rc_manifest;

/* Strict parse of manifest.json's text; `what` names the file in messages.
 * RC_EXIT_DATAERR on any malformed or inconsistent field. */
int rc_manifest_parse(const char *text, size_t n, const char *what, rc_manifest *m, rc_err *err);
void rc_mf_shard_free(rc_mf_shard *s);
void rc_manifest_free(rc_manifest *m);

/* Bytes [*start, *end) of chunk k of a shard entry with chunk hashes. */
void rc_mf_chunk_range(const rc_mf_shard *s, int k, uint64_t *start, uint64_t *end);

/* Checks that the file at `path` is exactly the bytes `entry` describes:
 * its size, then, with chunk hashes, every chunk on `threads` threads
 * (<= 0: the online CPUs) while a reader thread reads the file ahead of
 * them; without, the whole-file SHA-256. Never reads past entry->bytes + 1.
 * 0 when it matches; RC_EXIT_DATAERR naming the file and, for a chunk, the
 * byte range [start, end) that differs; RC_EXIT_NOINPUT if missing,
 * RC_EXIT_IOERR on a read error. The file is not parsed. */
int rc_shard_verify_file(const char *path, const rc_mf_shard *entry, int threads, rc_err *err);

/* A shard file's datasets as its own bytes say (shard_hashes.c): the file
 * is verified against `entry` first (rc_shard_verify_file's checks), then,
 * after the loader's structure check, each dataset's path, dtype, shape,
 * byte range and SHA-256 are read from the verified image; entry's
 * dataset list is not used. With chunk_bytes > 0 (in [RC_CHUNK_BYTES_MIN,
 * RC_CHUNK_BYTES_MAX]), also the SHA-256 of each chunk_bytes-sized chunk of
 * the file, computed from its bytes, as a save of that chunk size records
 * them (else chunk_sha256 is NULL). For comparing against a hashes-only
 * checkpoint, whose manifest is all its side has: its chunk hashes, of
 * whatever size it recorded, against this file's. */
typedef struct {
  rc_mf_dataset *datasets; /* malloc'd, sorted by path */
  uint64_t *offset;        /* malloc'd: where dataset i's bytes start in the file */
  int ndatasets;
  /* the file's size and, with chunk_bytes, its chunk hashes, as an entry */
  rc_mf_shard chunks;
} rc_shard_hashes;
int rc_shard_hash_datasets(const char *path, const rc_mf_shard *entry, uint64_t chunk_bytes,
                           rc_shard_hashes *out, rc_err *err);
void rc_shard_hashes_free(rc_shard_hashes *h);

#endif
