/* checkpoint.h — deterministic HDF5 shards, manifests and validated loads
 * (docs/design.md §5).
 *
 * Layout (the names: layout.h): CKPT_ROOT/iter_%07d/shard_%05d_of_%05d.h5 (one per rank),
 * manifest.json (every shard's and dataset's SHA-256, dtype and shape),
 * args.json (run-specific facts, rank 0, not a state shard) and COMPLETE,
 * written last. Every file is written to a temporary name, fsync'd and
 * renamed; a directory without COMPLETE is never loaded.
 *
 * Equal state gives byte-identical shard files and manifests: no time
 * stamps, pinned libver bounds, a fixed creation order, contiguous datasets
 * written whole, the file built as an in-memory image and hashed once. */
#ifndef RC_IO_CHECKPOINT_H
#define RC_IO_CHECKPOINT_H

#include "../base/error.h"
#include "layout.h"
#include "manifest.h"
#include "sha256.h"
#include "state.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Writes one rank's shard (and, for world_size 1, the manifest, args.json
 * and COMPLETE) into ckpt_root/iter_%07d/. For world_size > 1 the caller
 * runs rc_checkpoint_finalize on rank 0 after all ranks have written.
 * args_json (may be NULL) is written by rank 0 only. Fails with
 * RC_EXIT_IOERR (and no COMPLETE) on any write error; refuses to overwrite a
 * directory that already has COMPLETE (RC_EXIT_IOERR). */
int rc_checkpoint_save(const char *ckpt_root, const rc_shard_meta *meta, const rc_state *state,
                       const char *args_json, rc_err *err);

/* A host buffer of at least `bytes` for a shard, or NULL when there is
 * none to be had. The caller owns it; it must outlive the save or load. */
typedef unsigned char *(*rc_save_buffer_fn)(void *ctx, size_t bytes);

/* The same save, streamed: the tensors' bytes arrive after it starts (a
 * model's state copied off the device). rc_save_stream_begin lays the shard
 * out from the state's paths, dtypes and shapes (its data pointers are not
 * read), takes one buffer for the whole file from `buffer`, puts the HDF5
 * metadata there and starts the write and the hashes. The caller then
 * copies tensor i's bytes to rc_save_stream_dataset(s, i), in any order,
 * and calls rc_save_stream_landed(s, i) once they are final (every
 * non-empty tensor, exactly once); the write and the hashes follow the
 * landed bytes in file order. rc_save_stream_end, called once whatever
 * happened, waits for them and finishes as rc_checkpoint_save does; it
 * frees s. The file, its manifest and COMPLETE are byte for byte those of
 * rc_checkpoint_save of the same state (tests/test_io.c checks it). */
typedef struct rc_save_stream rc_save_stream;
/* About the size of the shard file of state (its metadata block and its
 * tensors' bytes; a little more rather than less), for reserving a buffer
 * ahead of the save. */
size_t rc_checkpoint_bytes_estimate(const rc_shard_meta *meta, const rc_state *state);
int rc_save_stream_begin(const char *ckpt_root, const rc_shard_meta *meta, const rc_state *state,
                         const char *args_json, rc_save_buffer_fn buffer, void *buffer_ctx,
                         rc_save_stream **out, rc_err *err);
unsigned char *rc_save_stream_dataset(const rc_save_stream *s, int i);
void rc_save_stream_landed(rc_save_stream *s, int i);
int rc_save_stream_end(rc_save_stream *s, rc_err *err);
/* A save decided late (`train --save-deferred-at`): begun as hashes-only,
 * once every tensor has landed rc_save_stream_hashes waits for and returns
 * the shard's entry (size, chunk and dataset hashes, no whole-file hash).
 * rc_save_stream_promote then makes it a full save of the same image (the
 * write and the whole-file hash start now); without it, rc_save_stream_end
 * finishes it as hashes-only. Either way the files are those of a save made
 * that way from the start. */
const rc_mf_shard *rc_save_stream_hashes(rc_save_stream *s);
void rc_save_stream_promote(rc_save_stream *s);
/* ckpt_root/iter_%07d of the save */
const char *rc_save_stream_dir(const rc_save_stream *s);

/* Where rc_checkpoint_load_into reads the shard (one buffer of the file's
 * size from `buffer`), and what it tells the caller while it reads:
 * landed (may be NULL) is called on a thread of the load, in file order,
 * for each tensor to be pointed at the buffer, once its bytes are there
 * (at the offset the expected state's layout predicts: the writer is
 * deterministic), before anything is verified; only for a manifest with
 * chunk hashes (the bytes are then read on several threads, in order of
 * chunks landing), never for version 1. A caller may copy them on
 * at once (a model's upload to the device, overlapping the read); only the
 * load's result says whether they count, and where a tensor's real offset
 * differs from the prediction, state->tensors[i].data afterwards points at
 * other bytes than `bytes` (the caller copies those again). */
typedef struct rc_load_deferred rc_load_deferred;
typedef struct {
  rc_save_buffer_fn buffer;
  void *buffer_ctx;
  void (*landed)(void *ctx, int tensor, const void *bytes);
  void *landed_ctx;
  /* deferred (may be NULL): the tensors pointed at the buffer are not
   * hashed by the load (the chunk hashes have verified every byte); what
   * their manifest entries say is left in *deferred for
   * rc_load_deferred_check, which the caller runs before the load counts
   * and before the buffer changes (a model: on a thread while it trains,
   * joined before its first save). The load itself checks all the rest. */
  rc_load_deferred *deferred;
} rc_load_into;

/* The dataset hashes a load left to check (rc_load_into.deferred): each
 * tensor's bytes in the buffer against its manifest entry. */
struct rc_load_deferred {
  int count;
  const void **src;
  size_t *n;
  char (*want)[RC_SHA256_HEX];
  char (*path)[RC_PATH_MAX];
  char what[4096]; /* the shard, for messages */
  char source[64]; /* what lists the hashes: RC_MANIFEST_NAME, or "the handoff note" */
};
/* Hashes them on `threads` threads (<= 0: the online CPUs): RC_OK, or
 * RC_EXIT_DATAERR naming the first dataset whose bytes do not hash to the
 * manifest's entry, as the load would have (the file matched its chunk
 * hashes: the manifest's entry is wrong). The bytes must be unchanged. */
int rc_load_deferred_check(const rc_load_deferred *d, int threads, rc_err *err);
void rc_load_deferred_free(rc_load_deferred *d);

/* ---- a checkpoint handed over before it is durable (handoff.c) ----
 * What a save with rc_shard_meta.handoff publishes beside ITER_DIR while
 * it makes the bytes durable: the shard's temporary name and its entry
 * (size, chunk and dataset hashes; no whole-file hash). */
typedef struct {
  int64_t iteration;
  char temp_file[96]; /* shard_%05d_of_%05d.h5.tmp.<pid>, a name in ITER_DIR */
  rc_mf_shard shard;  /* owned */
} rc_handoff;
/* Reads ITER_DIR.handoff.json: RC_OK with *h filled; RC_EXIT_NOINPUT when
 * there is none (not yet, or no longer); RC_EXIT_DATAERR when malformed. */
int rc_handoff_read(const char *iter_dir, rc_handoff *h, rc_err *err);
void rc_handoff_free(rc_handoff *h);
/* rc_checkpoint_load_into from a handoff: the shard's temporary file (its
 * final name once the save has renamed it), every byte verified against
 * the note's chunk hashes and every dataset against its hash, then the
 * checks of an ordinary load. The state loaded counts only once
 * rc_checkpoint_handoff_confirm says so. */
int rc_checkpoint_load_handoff(const char *iter_dir, const rc_handoff *h, const rc_shard_meta *meta,
                               rc_state *state, const rc_load_into *into, rc_err *err);
/* Once ITER_DIR has COMPLETE: its manifest (the one COMPLETE vouches for)
 * lists, for the handed-over shard, exactly the note's size, chunk hashes
 * and datasets with their hashes, so what was loaded is the checkpoint.
 * RC_EXIT_DATAERR naming the first difference; the errors of a load for a
 * missing or unvouched manifest. */
int rc_checkpoint_handoff_confirm(const char *iter_dir, const rc_handoff *h, rc_err *err);

/* The manifest of a complete checkpoint, the one its COMPLETE vouches for
 * (hashes-only ones too): the errors of a load for a missing marker or
 * manifest, one COMPLETE does not vouch for, or a malformed one. */
int rc_checkpoint_manifest_read(const char *iter_dir, rc_manifest *m, rc_err *err);

/* ---- a save that waits to be told whether to write its shard (handoff.c)
 * ITER_DIR.deferred.json: the shard's entry as a hashes-only fragment,
 * written by a deferred save while it waits (`train --save-deferred-at`),
 * read by `run` to decide, removed by the leg once the save is done. */
int rc_deferred_note_write(const char *iter_dir, int64_t iteration, const rc_mf_shard *shard,
                           rc_err *err);
/* RC_OK with *shard (owned) and *iteration; RC_EXIT_NOINPUT when there is
 * none; RC_EXIT_DATAERR when malformed. */
int rc_deferred_note_read(const char *iter_dir, int64_t *iteration, rc_mf_shard *shard,
                          rc_err *err);
void rc_deferred_note_remove(const char *iter_dir);

/* Rank 0, world_size > 1: merges the per-rank manifest fragments into
 * manifest.json and writes COMPLETE. */
int rc_checkpoint_finalize(const char *iter_dir, int world_size, int64_t iteration, rc_err *err);

/* Loads rank meta->rank's shard from iter_dir into state, whose tensors name
 * the expected paths, dtypes and shapes and provide buffers. Checks, in this
 * order, each with its own message:
 *   iter_dir or manifest missing          -> RC_EXIT_NOINPUT
 *   no COMPLETE marker                    -> RC_EXIT_DATAERR
 *   shard file missing                    -> RC_EXIT_NOINPUT
 *   file size / SHA-256 != manifest       -> RC_EXIT_DATAERR ("truncated" / "corrupt"),
 *                                            checked before libhdf5 parses a byte
 *   format name or version unknown        -> RC_EXIT_DATAERR
 *   world size differs                    -> RC_EXIT_DATAERR (both values)
 *   config hash differs                   -> RC_EXIT_DATAERR (names the first differing
 *                                            config key with both values)
 *   missing / unexpected dataset, wrong dtype or shape -> RC_EXIT_DATAERR (names it)
 *   read error                            -> RC_EXIT_IOERR
 * Nothing is written. On failure the state buffers' contents are undefined. */
int rc_checkpoint_load(const char *iter_dir, const rc_shard_meta *meta, rc_state *state,
                       rc_err *err);
/* The same, reading the shard into one buffer from `buffer` (the file's
 * size) instead of memory of its own: tensors whose data is NULL are not
 * copied but pointed at their bytes in that buffer (valid while it is),
 * after the same checks; the chunks are read and hashed on several threads
 * at once. A model loads this way from a pinned staging buffer, straight to
 * the device. */
int rc_checkpoint_load_into(const char *iter_dir, const rc_shard_meta *meta, rc_state *state,
                            const rc_load_into *into, rc_err *err);

/* Newest iter_* directory under ckpt_root that has COMPLETE and is not
 * hashes-only; 0 and path set if found, RC_EXIT_NOINPUT if none. */
int rc_checkpoint_latest(const char *ckpt_root, char *path, size_t cap, rc_err *err);
/* Whether iter_dir's manifest parses and says "hashes_only" (a save with
 * rc_shard_meta.hashes_only: hashes of shards that were never written).
 * Such a checkpoint is compared, never loaded (the load refuses it, 65). */
bool rc_checkpoint_is_hashes_only(const char *iter_dir);

/* `resumecheck inspect SHARD.h5`: every dataset with dtype, shape, SHA-256
 * and the /meta attributes, as text to `out`. */
int rc_shard_inspect(const char *shard_path, FILE *out, rc_err *err);

/* Whether bytes are an HDF5 file as this tool's shard writer produces it:
 * the loader's structure check (every length and address inside the file,
 * only the message types the writer uses). Such a file is safe to hand to
 * libhdf5; `compare` isolates every other file (docs/compare.md). */
bool rc_shard_structure_is_ours(const void *data, size_t size);

#endif
