/* state.h — a plain description of the tensors a shard holds.
 *
 * The core fills an rc_state with host buffers (it owns them) and hands it to
 * io to save, or fills one with the names, dtypes, shapes and empty buffers
 * it expects and asks io to load into it. io knows nothing of models or legs:
 * only paths, dtypes, shapes and bytes. */
#ifndef RC_IO_STATE_H
#define RC_IO_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RC_MAX_DIMS 4
#define RC_PATH_MAX 256

typedef enum {
  RC_DT_F32 = 0,
  RC_DT_F64,
  RC_DT_I64,
  RC_DT_U64,
  RC_DT_I32,
  RC_DT_I8,
} rc_dtype;

typedef struct {
  char path[RC_PATH_MAX]; /* HDF5 dataset path, e.g. "/model/decoder/layers/0/attention/qkv/weight"
                           */
  rc_dtype dtype;
  int ndim; /* 0 = scalar dataset */
  int64_t shape[RC_MAX_DIMS];
  void *data; /* host memory, rc_tensor_nbytes() bytes, owned by whoever built the state */
} rc_tensor;

typedef struct {
  rc_tensor *tensors;
  int count, capacity;
} rc_state;

/* What /meta holds: only what must match between legs. */
typedef struct {
  int format_version;
  int rank, world_size;
  int64_t iteration;
  const char *config_json;   /* canonical config (sorted keys) */
  const char *config_sha256; /* hex */
  /* Save only: the size of the chunks whose SHA-256s the manifest records
   * (manifest.h). 0: RC_CHUNK_BYTES; RC_CHUNKS_NONE: none (a version-1
   * manifest). A load always uses the manifest's own chunk_bytes. */
  int64_t chunk_bytes;
  /* Save only: build the shard and its dataset and chunk hashes exactly as
   * a save does, but write no shard file and compute no whole-file hash:
   * only the manifest (marked "hashes_only"), args.json and COMPLETE. Needs
   * chunk hashes (not RC_CHUNKS_NONE: 64). Such a checkpoint can be
   * compared, never loaded (docs/checkpoint-format.md, "Hashes-only
   * checkpoints"). */
  bool hashes_only;
  /* Save only: hand the checkpoint to a leg waiting for it before it is
   * durable (io/handoff.c): once the shard's bytes are all in its temporary
   * file and its chunk and dataset hashes are known, publish
   * ITER_DIR.handoff.json, then fsync, rename, manifest and COMPLETE as
   * always; the note goes once COMPLETE is written. World size 1, full
   * saves with chunk hashes only; ignored otherwise. The checkpoint's
   * bytes do not depend on it. */
  bool handoff;
} rc_shard_meta;

#define RC_CHUNKS_NONE ((int64_t)-1)

#define RC_SHARD_FORMAT "resumecheck-shard"
#define RC_SHARD_FORMAT_VERSION 1

const char *
rc_dtype_name(rc_dtype dt); /* "float32", "float64", "int64", "uint64", "int32", "int8" */
size_t rc_dtype_size(rc_dtype dt);
int64_t rc_tensor_numel(const rc_tensor *t);
size_t rc_tensor_nbytes(const rc_tensor *t);

/* Appends a tensor (path copied; data pointer borrowed); returns it. Aborts on OOM. */
rc_tensor *rc_state_add(rc_state *s, const char *path, rc_dtype dt, int ndim, const int64_t *shape,
                        void *data);
rc_tensor *rc_state_find(const rc_state *s, const char *path);
void rc_state_free(rc_state *s); /* frees the array only, never the data buffers */

#endif
