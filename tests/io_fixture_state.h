/* io_fixture_state.h — the small, deterministic training state the io tests
 * and the fixture generator save and load (header-only so both programs
 * build it identically).
 *
 * It has the shape of a real shard (nested module groups, optimizer, step,
 * scheduler, RNG, data position, flags, a zero-size dataset, a group with
 * many members) and values chosen to catch any canonicalisation on the way
 * through HDF5: -0.0, NaN with a payload, infinities, subnormals. Variants
 * change exactly one thing each, for the rejection fixtures. */
#ifndef RC_TESTS_IO_FIXTURE_STATE_H
#define RC_TESTS_IO_FIXTURE_STATE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/state.h"

enum {
  IOFIX_PERTURB = 1 << 0,     /* one element of one tensor differs */
  IOFIX_DROP = 1 << 1,        /* layer 1's qkv weight is not saved */
  IOFIX_WRONG_SHAPE = 1 << 2, /* layer 1's qkv weight is [24, 9] */
  IOFIX_WRONG_DTYPE = 1 << 3, /* layer 1's qkv weight is float64 */
  IOFIX_EXTRA = 1 << 4,       /* an extra /model/extra/weight */
  IOFIX_EMPTY = 1 << 5,       /* buffers zeroed: an expected state to load into */
};

#define IOFIX_ITERATION 5
#define IOFIX_CONFIG "{\"hidden\":8,\"layers\":2,\"lr\":0.001,\"seed\":1234}"
#define IOFIX_CONFIG_LR2 "{\"hidden\":8,\"layers\":2,\"lr\":0.002,\"seed\":1234}"
#define IOFIX_TARGET "/model/decoder/layers/1/attention/qkv/weight"

typedef struct {
  rc_state st;
  void *bufs[2048];
  int nbufs;
} iofix;

static uint32_t iofix_mix(uint32_t x) {
  x ^= x >> 16, x *= 0x7feb352dU, x ^= x >> 15, x *= 0x846ca68bU, x ^= x >> 16;
  return x;
}

static void *iofix_alloc(iofix *f, size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p || f->nbufs == (int)(sizeof f->bufs / sizeof f->bufs[0])) abort();
  f->bufs[f->nbufs++] = p;
  return p;
}

/* Adds a tensor whose element i is a pure function of (path, i). */
static void iofix_add(iofix *f, unsigned flags, const char *path, rc_dtype dt, int ndim,
                      const int64_t *shape) {
  rc_tensor tmp = {.dtype = dt, .ndim = ndim};
  for (int i = 0; i < ndim; i++) tmp.shape[i] = shape[i];
  size_t n = (size_t)rc_tensor_numel(&tmp);
  void *p = iofix_alloc(f, rc_tensor_nbytes(&tmp));
  uint32_t seed = 2166136261U;
  for (const char *c = path; *c; c++) seed = (seed ^ (uint8_t)*c) * 16777619U;
  for (size_t i = 0; i < n && !(flags & IOFIX_EMPTY); i++) {
    uint32_t r = iofix_mix(seed + (uint32_t)i);
    switch (dt) {
    case RC_DT_F32: {
      float v = ((float)(r % 20001) - 10000.0f) / 4096.0f;
      /* A few special values in every float tensor. */
      if (i == 1) v = -0.0f;
      if (i == 2) {
        uint32_t nan = 0x7fc0beefU; /* NaN with a payload */
        memcpy(&v, &nan, 4);
      }
      if (i == 3) v = 1e-45f; /* subnormal */
      if (i == 4) v = -INFINITY;
      ((float *)p)[i] = v;
      break;
    }
    case RC_DT_F64:
      ((double *)p)[i] = (double)r / 3.0;
      break;
    case RC_DT_I64:
      ((int64_t *)p)[i] = (int64_t)r * -7;
      break;
    case RC_DT_U64:
      ((uint64_t *)p)[i] = ((uint64_t)r << 32) | r;
      break;
    case RC_DT_I32:
      ((int32_t *)p)[i] = (int32_t)r;
      break;
    case RC_DT_I8:
      ((int8_t *)p)[i] = (int8_t)r;
      break;
    }
  }
  rc_state_add(&f->st, path, dt, ndim, shape, p);
}

static void iofix_build(iofix *f, unsigned flags, int nexperts) {
  memset(f, 0, sizeof *f);
  const int64_t emb[2] = {16, 8}, qkv[2] = {24, 8}, qkv_bad[2] = {24, 9}, fc1[2] = {32, 8},
                norm[1] = {8}, rng[1] = {2}, flags3[1] = {3}, empty[2] = {0, 4}, expert[2] = {2, 4};
  iofix_add(f, flags, "/model/embedding/weight", RC_DT_F32, 2, emb);
  iofix_add(f, flags, "/model/decoder/layers/0/attention/qkv/weight", RC_DT_F32, 2, qkv);
  iofix_add(f, flags, "/model/decoder/layers/0/mlp/fc1/weight", RC_DT_F32, 2, fc1);
  if (flags & IOFIX_WRONG_SHAPE)
    iofix_add(f, flags, IOFIX_TARGET, RC_DT_F32, 2, qkv_bad);
  else if (flags & IOFIX_WRONG_DTYPE)
    iofix_add(f, flags, IOFIX_TARGET, RC_DT_F64, 2, qkv);
  else if (!(flags & IOFIX_DROP))
    iofix_add(f, flags, IOFIX_TARGET, RC_DT_F32, 2, qkv);
  iofix_add(f, flags, "/model/final_norm/weight", RC_DT_F32, 1, norm);
  if (flags & IOFIX_EXTRA) iofix_add(f, flags, "/model/extra/weight", RC_DT_F32, 1, norm);
  for (int e = 0; e < nexperts; e++) {
    char path[RC_PATH_MAX];
    snprintf(path, sizeof path, "/model/decoder/layers/1/mlp/experts/%d/fc1/weight", e);
    iofix_add(f, flags, path, RC_DT_F32, 2, expert);
  }
  iofix_add(f, flags, "/optimizer/exp_avg/model/embedding/weight", RC_DT_F32, 2, emb);
  iofix_add(f, flags, "/optimizer/exp_avg_sq/model/embedding/weight", RC_DT_F32, 2, emb);
  iofix_add(f, flags, "/optimizer/step", RC_DT_I64, 0, NULL);
  iofix_add(f, flags, "/scheduler/lr", RC_DT_F64, 0, NULL);
  iofix_add(f, flags, "/rng/philox_offset", RC_DT_U64, 1, rng);
  iofix_add(f, flags, "/data/consumed_samples", RC_DT_I64, 0, NULL);
  iofix_add(f, flags, "/loss_scaler/growth_tracker", RC_DT_I32, 0, NULL);
  iofix_add(f, flags, "/flags/is_first_microbatch", RC_DT_I8, 1, flags3);
  iofix_add(f, flags, "/empty/weight", RC_DT_F32, 2, empty);
  if (flags & IOFIX_PERTURB) ((float *)f->st.tensors[1].data)[5] += 1.0f;
}

static void iofix_free(iofix *f) {
  for (int i = 0; i < f->nbufs; i++) free(f->bufs[i]);
  rc_state_free(&f->st);
}

static rc_shard_meta iofix_meta(int rank, int world_size, const char *config) {
  rc_shard_meta m = {
      RC_SHARD_FORMAT_VERSION, rank, world_size, IOFIX_ITERATION, config, NULL, 0, false, false};
  return m;
}

#endif
