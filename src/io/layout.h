/* layout.h — the names of the on-disk layout, defined once.
 *
 * A leg's output directory OUT (docs/design.md §5, docs/checkpoint-format.md):
 *
 *   OUT/trace.csv                   the per-step trace (bitwise compared)
 *   OUT/timing.csv                  wall times (never compared)
 *   OUT/ckpt/iter_%07d/             one checkpoint, named by its iteration
 *     shard_%05d_of_%05d.h5         one rank's state shard
 *     shard_%05d_of_%05d.manifest.json  a rank's manifest fragment (world
 *                                   size > 1, merged away by rank 0)
 *     manifest.json                 every shard's and dataset's SHA-256
 *     args.json                     run-specific facts (not state)
 *     COMPLETE                      written last: the manifest's SHA-256
 *   OUT/ckpt/iter_%07d.handoff.json  while a save is between its write and
 *                                   its fsync, and only when it was asked to
 *                                   hand the checkpoint over: where its
 *                                   bytes are and their hashes (io/handoff.c;
 *                                   removed once COMPLETE is written)
 *   OUT/ckpt/iter_%07d.deferred.json while a deferred save waits for `run`'s
 *                                   word: its hashes (io/handoff.c)
 *   OUT/census/iter_%07d.rank%d.txt the state census of one rank at that
 *                                   iteration (docs/census.md; never in a
 *                                   checkpoint, never byte-compared)
 *     iter_%07d.rank%d.before-save.txt  the same taken before the save, kept
 *                                   only when the save changed the process
 *     iter_%07d.rank%d.saved.txt    what the save wrote into the rank's
 *                                   shard, in census form
 *
 * and `run`'s directory holds report.json beside the legs' directories.
 * Every writer and reader (io, core, harness, cli) spells these names
 * through this header, so a reader cannot drift from its writer. The
 * spellings are part of the format: changing one changes every directory. */
#ifndef RC_IO_LAYOUT_H
#define RC_IO_LAYOUT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RC_TRACE_NAME "trace.csv"
#define RC_TIMING_NAME "timing.csv"
#define RC_CKPT_DIR_NAME "ckpt"
#define RC_MANIFEST_NAME "manifest.json"
#define RC_COMPLETE_NAME "COMPLETE"
#define RC_ARGS_NAME "args.json"
#define RC_REPORT_NAME "report.json"
#define RC_CENSUS_DIR_NAME "census"

/* A checkpoint directory is RC_ITER_PREFIX then the iteration, 7 digits
 * zero-padded (more when it needs more): RC_ITER_NAME_FORMAT takes an int64_t. */
#define RC_ITER_PREFIX "iter_"
#define RC_ITER_NAME_FORMAT RC_ITER_PREFIX "%07" PRId64
#define RC_SHARD_NAME_FORMAT "shard_%05d_of_%05d.h5"
#define RC_FRAGMENT_NAME_FORMAT "shard_%05d_of_%05d.manifest.json"

/* "iter_0000005.rank0.txt" for rank 0's census at iteration 5, or
 * "iter_0000005.rank0.before-save.txt" for the one taken before the save. */
void rc_census_filename(char *buf, size_t cap, int64_t iteration, int rank, bool before_save);
/* "iter_0000005.rank0.saved.txt": the saved fields as the save of iteration
 * 5 wrote them into rank 0's shard (core/census.h). */
void rc_census_saved_filename(char *buf, size_t cap, int64_t iteration, int rank);
/* "iter_0000005" for 5. */
void rc_iter_dirname(char *buf, size_t cap, int64_t iteration);
/* "shard_00001_of_00004.h5" for rank 1 of 4. */
void rc_shard_filename(char *buf, size_t cap, int rank, int world_size);
/* "shard_00001_of_00004.manifest.json" for rank 1 of 4. */
void rc_fragment_filename(char *buf, size_t cap, int rank, int world_size);
/* Whether name is some rank's fragment name (rc_fragment_filename's form). */
bool rc_is_fragment_filename(const char *name);
/* ITER_DIR.handoff.json beside the iteration directory (trailing slashes of
 * iter_dir dropped): the handoff note of a save in progress (io/handoff.c). */
#define RC_HANDOFF_SUFFIX ".handoff.json"
void rc_handoff_path(char *buf, size_t cap, const char *iter_dir);
/* ITER_DIR.deferred.json: the hashes of a save that waits to be told
 * whether to write its shard (`train --save-deferred-at`, io/handoff.c). */
#define RC_DEFERRED_SUFFIX ".deferred.json"
void rc_deferred_path(char *buf, size_t cap, const char *iter_dir);

#endif
