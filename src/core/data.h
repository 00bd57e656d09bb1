/* data.h — the deterministic data stream (docs/design.md §3.3).
 *
 * Sample i is a pure function of (seed, i): a synthetic corpus from a
 * seed-defined Markov chain (learnable, so the loss falls) or windows of the
 * bytes of a file. The stream position is `consumed_samples`, which is
 * checkpointed state; forgetting it replays data after a resume. */
#ifndef RC_CORE_DATA_H
#define RC_CORE_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "core/config.h"

typedef struct rc_data {
  const rc_config *cfg;
  uint8_t *file; /* --data bytes, or NULL */
  size_t file_len;
} rc_data;

int rc_data_open(rc_data *d, const rc_config *cfg, rc_err *err);
void rc_data_close(rc_data *d);

/* Fills B sequences starting at sample `first`: for each depth k = 0..D,
 * ids[k], labels[k] ([B*S] int32) and mask[k] ([B*S] float 0/1). Depth k is
 * depth k-1 rolled left by one within each sequence (last position: token 0,
 * masked), so MTP never trains on padding or the prompt. */
void rc_data_batch(const rc_data *d, int64_t first, int B, int S, int D, int32_t **ids,
                   int32_t **labels, float **mask);

/* With --epoch-samples N the corpus is N samples read in epochs: position i
 * of the stream (consumed_samples + ...) reads corpus sample
 * rc_data_corpus_index(d, epoch, i), a permutation of i mod N drawn from
 * (seed, epoch), as a DistributedSampler whose set_epoch(epoch) was called.
 * `epoch` is the sampler's, which the training loop sets (model.h
 * data_epoch): a process whose sampler is at the wrong epoch reads other
 * samples at the same data position. Without epochs (N = 0) it is i. */
int64_t rc_data_corpus_index(const rc_data *d, int64_t epoch, int64_t i);
/* rc_data_batch with the sampler at `epoch`; indices (may be NULL) gets the
 * B corpus indices read. */
void rc_data_sampler_batch(const rc_data *d, int64_t epoch, int64_t first, int B, int S, int D,
                           int32_t **ids, int32_t **labels, float **mask, int64_t *indices);

#endif
