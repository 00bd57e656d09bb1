/* data.c — synthetic and file-backed samples (see data.h). */
#include "core/data.h"

#include <stdlib.h>
#include <string.h>

#include "backend/numeric.h"
#include "base/fsutil.h"

int rc_data_open(rc_data *d, const rc_config *cfg, rc_err *err) {
  memset(d, 0, sizeof *d);
  d->cfg = cfg;
  if (!cfg->data[0]) return 0;
  char *buf;
  size_t n;
  /* regular files only (a FIFO or a device is refused, 65); the whole file
   * is held in memory, so its size is bounded by what a host can hold */
  int rc = rc_read_regular_file(cfg->data, (size_t)64 << 30, false, &buf, &n, err);
  if (rc) return rc;
  if (n < (size_t)cfg->seq_len + 2) {
    free(buf);
    return rc_fail(err, RC_EXIT_DATAERR, "--data %s: %zu bytes is shorter than one sample (%d)",
                   cfg->data, n, cfg->seq_len + 2);
  }
  d->file = (uint8_t *)buf;
  d->file_len = n;
  return 0;
}

void rc_data_close(rc_data *d) {
  free(d->file);
  d->file = NULL;
}

static uint64_t hash3(uint64_t seed, uint64_t a, uint64_t b) {
  return rc_mix64(rc_mix64(seed ^ 0x5DEECE66Dull) ^ rc_mix64(a * 0x9E3779B97F4A7C15ull + b));
}

/* The successor of token `prev` in the synthetic chain: one of four
 * seed-chosen successors with probabilities 0.55/0.25/0.12/0.08, so a model
 * that learns the bigram table reaches a loss near 1.1 nats. */
static int32_t next_token(uint64_t seed, int V, int32_t prev, uint64_t r) {
  double u = (double)(r >> 11) * (1.0 / 9007199254740992.0);
  int j = u < 0.55 ? 0 : u < 0.80 ? 1 : u < 0.92 ? 2 : 3;
  return 1 + (int32_t)(hash3(seed, (uint64_t)prev, (uint64_t)j + 7) % (uint64_t)(V - 1));
}

static void make_sample(const rc_data *d, int64_t i, int S, int32_t *x /* S+1 */, int *len) {
  const rc_config *c = d->cfg;
  uint64_t seed = c->seed;
  if (d->file) {
    uint64_t start = hash3(seed, (uint64_t)i, 1) % (uint64_t)(d->file_len - (size_t)S - 1);
    for (int t = 0; t <= S; t++) x[t] = d->file[start + (uint64_t)t];
    *len = S + 1;
    return;
  }
  /* documents of varying length, padded with token 0 */
  int span = S / 4 > 0 ? S / 4 : 1;
  *len = S + 1 - (int)(hash3(seed, (uint64_t)i, 2) % (uint64_t)span);
  x[0] = 1 + (int32_t)(hash3(seed, (uint64_t)i, 3) % (uint64_t)(c->vocab - 1));
  for (int t = 1; t <= S; t++)
    x[t] = t < *len
               ? next_token(seed, c->vocab, x[t - 1], hash3(seed, (uint64_t)i, 100 + (uint64_t)t))
               : 0;
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

/* An affine permutation of [0, n) per epoch: j -> (a j + c) mod n with a
 * coprime to n, a and c drawn from (seed, epoch). Cheap, and every epoch
 * reads every sample once. */
int64_t rc_data_corpus_index(const rc_data *d, int64_t epoch, int64_t i) {
  uint64_t n = (uint64_t)d->cfg->epoch_samples;
  if (!n) return i;
  uint64_t seed = d->cfg->seed, j = (uint64_t)i % n;
  uint64_t a = 1 + hash3(seed, (uint64_t)epoch, 11) % n, c = hash3(seed, (uint64_t)epoch, 12) % n;
  while (gcd64(a, n) != 1) a = a % n + 1;
  return (int64_t)((a * j + c) % n); /* n < 2^31 (config.c): no overflow */
}

void rc_data_batch(const rc_data *d, int64_t first, int B, int S, int D, int32_t **ids,
                   int32_t **labels, float **mask) {
  int64_t n = d->cfg->epoch_samples;
  rc_data_sampler_batch(d, n ? first / n : 0, first, B, S, D, ids, labels, mask, NULL);
}

void rc_data_sampler_batch(const rc_data *d, int64_t epoch, int64_t first, int B, int S, int D,
                           int32_t **ids, int32_t **labels, float **mask, int64_t *indices) {
  int32_t *x = malloc(sizeof(int32_t) * (size_t)(S + 1));
  if (!x) abort();
  for (int b = 0; b < B; b++) {
    int len;
    int64_t index = rc_data_corpus_index(d, epoch, first + b);
    if (indices) indices[b] = index;
    make_sample(d, index, S, x, &len);
    for (int t = 0; t < S; t++) {
      size_t o = (size_t)b * S + t;
      ids[0][o] = x[t];
      labels[0][o] = x[t + 1];
      mask[0][o] = (t + 1 < len && t >= d->cfg->prompt_len) ? 1.0f : 0.0f;
    }
    for (int k = 1; k <= D; k++)
      for (int t = 0; t < S; t++) {
        size_t o = (size_t)b * S + t;
        bool last = t == S - 1;
        ids[k][o] = last ? 0 : ids[k - 1][o + 1];
        labels[k][o] = last ? 0 : labels[k - 1][o + 1];
        mask[k][o] = last ? 0.0f : mask[k - 1][o + 1];
      }
  }
  free(x);
}
