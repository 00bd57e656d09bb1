/* checkpointing.h — saving and loading the model's complete state. */
#ifndef RC_CORE_CHECKPOINTING_H
#define RC_CORE_CHECKPOINTING_H

#include "base/error.h"
#include "core/model.h"
#include "io/checkpoint.h"

/* How a save goes (flags, io: rc_shard_meta): RC_SAVE_HASHES_ONLY every
 * hash as a save, no shard file; RC_SAVE_HANDOFF hand the checkpoint to a
 * leg waiting for it before it is durable (io/handoff.c). */
enum { RC_SAVE_HASHES_ONLY = 1u << 0, RC_SAVE_HANDOFF = 1u << 1 };
/* Saves the state after m->iteration steps into ckpt_root/iter_%07d/. */
int rc_model_save(rc_model *m, const char *ckpt_root, const char *args_json, unsigned how,
                  rc_err *err);
/* A save decided late: the state is staged and hashed as a hashes-only
 * save, then decide(ctx, iter_dir, iteration, entry) — entry the shard's
 * size, chunk and dataset hashes — says whether to write the shard in full
 * (true: the files of rc_model_save's full save) or keep hashes only (false:
 * those of RC_SAVE_HASHES_ONLY). With world size > 1 a full save, not
 * asked (the ranks would have to agree). */
typedef bool (*rc_save_decide_fn)(void *ctx, const char *iter_dir, int64_t iteration,
                                  const rc_mf_shard *entry);
int rc_model_save_deferred(rc_model *m, const char *ckpt_root, const char *args_json, unsigned how,
                           rc_save_decide_fn decide, void *ctx, rc_err *err);
/* Loads iter_dir (validated: marker, hashes, format, config, shapes); on
 * failure the model must be discarded. */
int rc_model_load(rc_model *m, const char *iter_dir, rc_err *err);
/* The same from the handoff note h of iter_dir's save in progress
 * (rc_handoff_read): the bytes the note describes, verified against it.
 * What it loads is the checkpoint only once rc_checkpoint_handoff_confirm
 * says so; the caller must not let it count before. */
int rc_model_load_handoff(rc_model *m, const char *iter_dir, const rc_handoff *h, rc_err *err);
/* A load leaves its dataset hashes (each tensor against its manifest entry;
 * every byte was already verified by the chunk hashes) to a thread of its
 * own, so the leg trains while they are checked (world size 1, chunked
 * checkpoints; otherwise the load checks them itself). The loaded state
 * counts only once this says RC_OK: a leg calls it before its first save
 * and after its last step (the save's buffer is the loaded bytes, so a
 * save joins it too). RC_EXIT_DATAERR naming the dataset, as a load would
 * have; RC_OK when there was nothing to check. Idempotent. */
int rc_model_load_checked(rc_model *m, rc_err *err);
/* Whether that check has ended and failed (the leg stops at once). */
bool rc_model_load_check_failed(const rc_model *m);

/* Starts reserving (and faulting in) the staging buffer for this rank's
 * shard in the background: a leg that saves or resumes calls it once the
 * model is initialised, so that neither its first save nor its load pays
 * for gigabytes of fresh host memory. Optional: without it the first save
 * or load reserves the buffer itself. page_locked asks for page-locked
 * memory (device copies at the link's speed, no bounce buffers): the CUDA
 * backend locks faulted-in huge pages, 0.05-0.09 s for 2.5 GB on the H200
 * host, during which the process's CUDA calls may wait. */
void rc_model_reserve_staging(rc_model *m, bool page_locked);
/* Joins the reserving thread and frees the buffer (rc_model_free calls it). */
void rc_model_release_staging(rc_model *m);

#endif
