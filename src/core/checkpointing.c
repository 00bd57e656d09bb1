/* checkpointing.c — the model's complete state as an rc_state, for saving and
 * loading through io (docs/design.md §3.3, §5).
 *
 * Saving and loading build the same list of tensors, so a piece of state is
 * either saved and restored or, with an injected bug (docs/design.md §8), forgotten
 * or mangled on both paths the way real trainers get it wrong. */
#include "core/checkpointing.h"

#include <pthread.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/numeric.h"
#include "core/census.h"
#include "core/linear.h"
#include "core/model_internal.h"
#include "dist/comm.h"
#include "io/checkpoint.h"
#include "io/sha256.h"

typedef enum { ON_DEVICE, ON_HOST } where;

/* One state item and where its bytes live in the model. */
typedef struct {
  void *src; /* device pointer or host pointer */
  where loc;
  size_t nbytes;
  bool apply_on_load;
  bool replicated; /* data parallel: saved by rank 0 only, broadcast from it on load */
} binding;

typedef struct {
  rc_state st;
  binding *b;
  int cap;
  bool replicated; /* what `add` marks the items it adds as */
} state_list;

static void add(state_list *l, const char *path, rc_dtype dt, int ndim, const int64_t *shape,
                void *src, where loc, bool apply) {
  /* no host buffer: a save copies into the staging buffer, a load reads there */
  rc_tensor *t = rc_state_add(&l->st, path, dt, ndim, shape, NULL);
  size_t n = rc_tensor_nbytes(t);
  if (l->st.count > l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->b = realloc(l->b, sizeof(binding) * (size_t)l->cap);
    if (!l->b) abort();
  }
  l->b[l->st.count - 1] = (binding){src, loc, n, apply, l->replicated};
}

static void add_scalar(state_list *l, const char *path, rc_dtype dt, void *host_src, bool apply) {
  add(l, path, dt, 0, NULL, host_src, ON_HOST, apply);
}

static void add_moe_bias(rc_model *m, state_list *l, rc_layer *L) {
  char path[RC_PATH_MAX];
  snprintf(path, sizeof path, "/moe/expert_bias/%s", L->prefix);
  int64_t shape[1] = {m->E};
  add(l, path, RC_DT_F32, 1, shape, L->expert_bias_host, ON_HOST, true);
}

/* The optimizer moments with data parallel: this rank's segment of each
 * parameter (the whole parameter when the segment is all of it), exp_avg
 * and exp_avg_sq interleaved per parameter as without data parallel, so
 * that W = 1 matches. */
static void add_moment_shards(rc_model *m, state_list *l) {
  char path[RC_PATH_MAX];
  for (int i = 0; i < m->nparams; i++) {
    size_t lo, hi;
    if (!rc_dist_segment(m, i, &lo, &hi)) continue;
    rc_param *p = &m->params[i];
    float *a = rc_dist_shard_ptr(m, m->dist.exp_avg, i, lo),
          *b = rc_dist_shard_ptr(m, m->dist.exp_avg_sq, i, lo);
    if (lo == 0 && hi == p->numel) {
      snprintf(path, sizeof path, "/optimizer/exp_avg/%s", p->name);
      add(l, path, RC_DT_F32, p->ndim, p->shape, a, ON_DEVICE, true);
      snprintf(path, sizeof path, "/optimizer/exp_avg_sq/%s", p->name);
      add(l, path, RC_DT_F32, p->ndim, p->shape, b, ON_DEVICE, true);
    } else {
      int64_t shape[1] = {(int64_t)(hi - lo)};
      snprintf(path, sizeof path, "/optimizer/exp_avg/%s.elements_%zu_%zu", p->name, lo, hi);
      add(l, path, RC_DT_F32, 1, shape, a, ON_DEVICE, true);
      snprintf(path, sizeof path, "/optimizer/exp_avg_sq/%s.elements_%zu_%zu", p->name, lo, hi);
      add(l, path, RC_DT_F32, 1, shape, b, ON_DEVICE, true);
    }
  }
}

/* The weights (replicated), then this rank's optimizer moments, then
 * main_grad where the injected bug carries it. */
static void add_tensors(rc_model *m, state_list *l, bool dp) {
  char path[RC_PATH_MAX];
  l->replicated = dp;
  for (int i = 0; i < m->nparams; i++) {
    rc_param *p = &m->params[i];
    snprintf(path, sizeof path, "/model/%s", p->name);
    add(l, path, RC_DT_F32, p->ndim, p->shape, p->weight, ON_DEVICE, true);
  }
  l->replicated = false;
  if (dp) {
    add_moment_shards(m, l);
  } else {
    for (int i = 0; i < m->nparams; i++) {
      rc_param *p = &m->params[i];
      snprintf(path, sizeof path, "/optimizer/exp_avg/%s", p->name);
      add(l, path, RC_DT_F32, p->ndim, p->shape, p->exp_avg, ON_DEVICE, true);
      snprintf(path, sizeof path, "/optimizer/exp_avg_sq/%s", p->name);
      add(l, path, RC_DT_F32, p->ndim, p->shape, p->exp_avg_sq, ON_DEVICE, true);
    }
  }
  if (m->cfg.inject & RC_BUG_GRAD_BUFFER_NOT_ZEROED_AFTER_LOAD)
    for (int i = 0; i < m->nparams; i++) {
      rc_param *p = &m->params[i];
      snprintf(path, sizeof path, "/optimizer/main_grad/%s", p->name);
      add(l, path, RC_DT_F32, p->ndim, p->shape, p->main_grad, ON_DEVICE, true);
    }
}

/* The counters: optimizer step, scheduler, loss scaler, RNG, data
 * position; each injected bug forgets (or mangles) its own. */
static void add_counters(rc_model *m, state_list *l, bool dp) {
  unsigned bug = m->cfg.inject;
  l->replicated = dp;
  if (!(bug & RC_BUG_OPTIMIZER_STEP_NOT_SAVED))
    add_scalar(l, "/optimizer/step", RC_DT_I64, &m->optimizer_step, true);
  add_scalar(l, "/scheduler/num_steps", RC_DT_I64, &m->scheduler_steps,
             !(bug & RC_BUG_SCHEDULER_NOT_RESTORED));
  if (!(bug & RC_BUG_LOSS_SCALER_NOT_SAVED)) {
    add_scalar(l, "/loss_scaler/scale", RC_DT_F64, &m->loss_scale, true);
    add_scalar(l, "/loss_scaler/growth_tracker", RC_DT_I64, &m->growth_tracker, true);
    /* the injected bug forgets the hysteresis tracker alone: a load keeps
     * the model's initial value, --hysteresis */
    if (!(bug & RC_BUG_HYSTERESIS_NOT_SAVED))
      add_scalar(l, "/loss_scaler/hysteresis_tracker", RC_DT_I64, &m->hysteresis_tracker, true);
  }
  /* per-rank state; the injected bug treats it as replicated: rank 0's
   * stream is saved and every rank resumes with it */
  l->replicated = dp && (bug & RC_BUG_RNG_SAVED_AS_REPLICATED);
  add_scalar(l, "/rng/seed", RC_DT_U64, &m->rng_seed, true);
  if (!(bug & RC_BUG_RNG_NOT_SAVED)) add_scalar(l, "/rng/offset", RC_DT_U64, &m->rng_offset, true);
  l->replicated = dp;
  if (!(bug & RC_BUG_DATA_POSITION_NOT_SAVED))
    add_scalar(l, "/data/consumed_samples", RC_DT_I64, &m->consumed_samples, true);
}

/* The router's expert biases (sigmoid scoring), then per TE-style linear
 * its FP8 amax history and its persisted first-microbatch flag; all
 * replicated. */
static void add_layer_state(rc_model *m, state_list *l, bool dp) {
  const rc_config *c = &m->cfg;
  unsigned bug = c->inject;
  char path[RC_PATH_MAX];
  l->replicated = dp;
  if (!(bug & RC_BUG_EXPERT_BIAS_NOT_SAVED) && c->moe_scoring == RC_SCORE_SIGMOID) {
    for (int i = 0; i < c->layers; i++)
      if (m->layers[i].moe) add_moe_bias(m, l, &m->layers[i]);
    for (int p = 0; p < m->n_mtp_physical; p++)
      if (m->mtp[p].trm.moe) add_moe_bias(m, l, &m->mtp[p].trm);
  }
  for (int i = 0; i < m->nlinears; i++) {
    rc_linear *lin = &m->linears[i];
    if (!lin->te_style) continue;
    if (c->precision == RC_PREC_FP8 && !(bug & RC_BUG_AMAX_HISTORY_NOT_SAVED)) {
      int64_t shape[1] = {c->fp8_amax_history};
      float *histories[3] = {lin->amax_history, lin->amax_history_input, lin->amax_history_grad};
      const char *kinds[3] = {"", "_input", "_grad"};
      for (int h = 0; h < 3; h++) { /* the weight's, then the GEMM inputs' and gradients' */
        snprintf(path, sizeof path, "/fp8/%s/amax_history%s", lin->name, kinds[h]);
        add(l, path, RC_DT_F32, 1, shape, histories[h], ON_HOST, true);
      }
    }
    if (c->policy == RC_POLICY_PERSIST) {
      snprintf(path, sizeof path, "/flags/%s/is_first_microbatch", lin->name);
      add_scalar(l, path, RC_DT_I32, &lin->flag, true);
    }
  }
}

/* Every piece of state in a fixed order. With data parallel (m->comm) each
 * item is either replicated (identical on every rank: rank 0 saves it) or
 * this rank's own (every rank saves its own): the sharded optimizer moments,
 * the dropout RNG, and main_grad when the injected bug carries it. */
static void build(rc_model *m, state_list *l) {
  bool dp = m->comm != NULL;
  add_tensors(m, l, dp);
  add_counters(m, l, dp);
  add_layer_state(m, l, dp);
}

static void free_list(state_list *l) {
  rc_state_free(&l->st);
  free(l->b);
}

/* The items this rank's shard holds: everything with one process; with data
 * parallel, its own items, and the replicated ones on rank 0 only. The
 * tensors borrow the list's buffers. */
static void shard_view(rc_model *m, const state_list *l, rc_state *view, int *item) {
  memset(view, 0, sizeof *view);
  for (int i = 0; i < l->st.count; i++) {
    if (l->b[i].replicated && m->rank != 0) continue;
    const rc_tensor *t = &l->st.tensors[i];
    if (item) item[view->count] = i;
    rc_state_add(view, t->path, t->dtype, t->ndim, t->shape, t->data);
  }
}

/* After a data-parallel load: rank 0's replicated state to every rank. */
static int broadcast_replicated(rc_model *m, const state_list *l, rc_err *err) {
  for (int i = 0; i < l->st.count; i++) {
    const binding *b = &l->b[i];
    if (!b->replicated) continue;
    int rc = b->loc == ON_DEVICE
                 ? m->comm->broadcast(m->comm, b->src, b->nbytes, 0, err)
                 : rc_comm_broadcast_host(m->comm, m->ops, b->src, b->nbytes, 0, err);
    if (rc) return rc;
  }
  return 0;
}

static void fill_meta(rc_model *m, rc_shard_meta *meta, char *config_json, char *hash) {
  memset(meta, 0, sizeof *meta);
  meta->format_version = RC_SHARD_FORMAT_VERSION;
  meta->rank = m->rank;
  meta->world_size = m->cfg.world_size;
  meta->iteration = m->iteration;
  meta->config_json = config_json;
  rc_sha256_hex(config_json, strlen(config_json), hash);
  meta->config_sha256 = hash;
}

/* ---- the staging buffer */

static void *reserve_run(void *arg) {
  rc_model *m = arg;
  unsigned char *p = m->ops->host_alloc(m->staging_want, m->staging_locked);
  /* fault every page in now, off the save's path (page-locked memory
   * already is; ordinary pages are not until written) */
  if (p)
    for (size_t i = 0; i < m->staging_want; i += 4096) p[i] = 0;
  m->staging = p;
  m->staging_bytes = p ? m->staging_want : 0;
  return NULL;
}

static void join_staging(rc_model *m) {
  if (!m->staging_pending) return;
  pthread_join(m->staging_tid, NULL);
  m->staging_pending = false;
}

/* ---- the dataset hashes of a load, checked beside the training */

struct rc_load_check {
  rc_load_deferred d;
  pthread_t tid;
  bool started, joined;
  atomic_int state; /* 0 running, 1 ok, 2 failed */
  int rc;
  rc_err err;
};

static void *load_check_run(void *arg) {
  struct rc_load_check *c = arg;
  c->rc = rc_load_deferred_check(&c->d, 0, &c->err);
  atomic_store(&c->state, c->rc ? 2 : 1);
  return NULL;
}

static void load_check_join(rc_model *m) {
  struct rc_load_check *c = m->load_check;
  if (c && c->started && !c->joined) {
    pthread_join(c->tid, NULL);
    c->joined = true;
  }
}

int rc_model_load_checked(rc_model *m, rc_err *err) {
  struct rc_load_check *c = m->load_check;
  if (!c) return RC_OK;
  load_check_join(m);
  if (c->rc) *err = c->err;
  return c->rc;
}

bool rc_model_load_check_failed(const rc_model *m) {
  return m->load_check && atomic_load(&m->load_check->state) == 2;
}

static void load_check_free(rc_model *m) {
  if (!m->load_check) return;
  load_check_join(m);
  rc_load_deferred_free(&m->load_check->d);
  free(m->load_check);
  m->load_check = NULL;
}

/* After a load that left its dataset hashes (world size 1): the check on a
 * thread, or here when no thread can be had. */
static void load_check_start(rc_model *m, struct rc_load_check *c) {
  m->load_check = c;
  c->started = pthread_create(&c->tid, NULL, load_check_run, c) == 0;
  if (!c->started) load_check_run(c);
}

/* rc_save_buffer_fn: the staging buffer, grown if the shard outgrew it. */
static unsigned char *staging_buffer(void *ctx, size_t bytes) {
  rc_model *m = ctx;
  join_staging(m);
  load_check_join(m); /* its bytes are the buffer's until it is done */
  m->release_staging = rc_model_release_staging;
  if (m->staging && m->staging_bytes >= bytes) return m->staging;
  if (m->staging) m->ops->host_free(m->staging, m->staging_bytes);
  m->staging = m->ops->host_alloc(bytes, 0); /* page-locking here would stall the save */
  m->staging_bytes = m->staging ? bytes : 0;
  return m->staging;
}

void rc_model_release_staging(rc_model *m) {
  join_staging(m);
  load_check_free(m);
  if (m->staging) m->ops->host_free(m->staging, m->staging_bytes);
  m->staging = NULL;
  m->staging_bytes = 0;
}

/* Copies (and, for the injected bugs, down-casts or shortens) item i into
 * dst. Returns whether the staged bytes are other than the item's. */
static bool stage_one(rc_model *m, const state_list *l, int i, void *dst) {
  bool changed = false;
  const binding *b = &l->b[i];
  if (b->loc == ON_DEVICE)
    m->ops->to_host(dst, b->src, b->nbytes);
  else
    memcpy(dst, b->src, b->nbytes);
  /* the injected down-cast: moments stored as bf16 values */
  if ((m->cfg.inject & RC_BUG_MOMENTS_SAVED_IN_BF16) &&
      !strncmp(l->st.tensors[i].path, "/optimizer/exp_avg", 18)) {
    float *f = dst;
    for (size_t j = 0; j < b->nbytes / 4; j++) f[j] = rc_round_bf16(f[j]);
    changed = true;
  }
  /* the injected short counter: consumed_samples written one microbatch
   * (of every rank) short, as a counter read before the step's last
   * microbatch was counted; the process itself keeps the right value */
  if ((m->cfg.inject & RC_BUG_CONSUMED_SAMPLES_SAVED_SHORT) &&
      !strcmp(l->st.tensors[i].path, "/data/consumed_samples")) {
    int64_t v;
    memcpy(&v, dst, sizeof v);
    v -= (int64_t)m->cfg.micro_batch * m->cfg.world_size;
    memcpy(dst, &v, sizeof v);
    changed = true;
  }
  return changed;
}

/* The census of what a save wrote (core/census.h rc_census_saved_line),
 * from the staged items: a tensor staged as an unchanged copy of device
 * memory is fingerprinted there, in one batched call (the same bytes; a
 * host pass over a gpu-small shard would cost seconds), everything else
 * from the staged bytes. changed[j]: stage_one changed item j's bytes.
 * The text into m->saved_census, or none when out of memory. */
static void census_of_save(rc_model *m, const state_list *l, const rc_state *view, const int *item,
                           void *const *staged, const bool *changed) {
  int n = view->count;
  const void **x = calloc((size_t)n + 1, sizeof *x);
  size_t *nb = calloc((size_t)n + 1, sizeof *nb);
  uint64_t *fp = calloc((size_t)n + 1, sizeof *fp);
  int *slot = calloc((size_t)n + 1, sizeof *slot);
  char *text = NULL;
  size_t len = 0;
  FILE *f = x && nb && fp && slot ? open_memstream(&text, &len) : NULL;
  if (f) {
    int k = 0;
    for (int j = 0; j < n; j++) {
      const binding *b = &l->b[item[j]];
      slot[j] = -1;
      if (staged[j] && b->loc == ON_DEVICE && !changed[j] && view->tensors[j].dtype == RC_DT_F32 &&
          b->nbytes % 4 == 0)
        x[k] = b->src, nb[k] = b->nbytes, slot[j] = k++;
    }
    if (k) m->ops->fingerprint_many(fp, x, nb, k);
    fprintf(f,
            "# resumecheck saved census 1: what the save of iteration %" PRId64
            " wrote into rank %d's shard (docs/census.md)\n",
            m->iteration, m->rank);
    for (int j = 0; j < n; j++)
      if (staged[j])
        rc_census_saved_line(f, view->tensors[j].path, (int)view->tensors[j].dtype, staged[j],
                             rc_tensor_nbytes(&view->tensors[j]),
                             slot[j] >= 0 ? &fp[slot[j]] : NULL);
  }
  if (f && !fclose(f)) {
    free(m->saved_census);
    m->saved_census = text;
  } else {
    if (f) free(text);
  }
  free(x), free(nb), free(fp), free(slot);
}

/* Test hook, not a feature: RC_TEST_CHUNK_BYTES=N makes saves record
 * N-byte chunk hashes (0: none), so that tests get multi-chunk shards from
 * small models. The value goes into the manifest; loads read it from
 * there, never from the environment. */
static int64_t chunk_bytes_for_save(void) {
  const char *v = getenv("RC_TEST_CHUNK_BYTES");
  if (!v || !*v) return 0;
  long long n = atoll(v);
  return n == 0 ? RC_CHUNKS_NONE : (int64_t)n;
}

/* Test hook, not a feature: RC_TEST_SAVE_ADVANCES_RNG=1 advances the
 * dropout RNG offset by a fixed amount after a save has written the state,
 * as a save that draws from the RNG would. The saving process then trains on
 * with another RNG state than the one its checkpoint holds: a save-time side
 * effect, for bisect's tests (tests/bisect_save_effect.sh). */
static void test_save_advances_rng(rc_model *m) {
  const char *v = getenv("RC_TEST_SAVE_ADVANCES_RNG");
  if (v && !strcmp(v, "1")) m->rng_offset += 1000;
}

void rc_model_reserve_staging(rc_model *m, bool page_locked) {
  if (m->staging || m->staging_pending) return;
  m->staging_locked = page_locked;
  m->release_staging = rc_model_release_staging;
  state_list l = {0};
  build(m, &l);
  rc_state view;
  shard_view(m, &l, &view, NULL);
  char *config = rc_config_canonical(&m->cfg);
  char hash[RC_SHA256_HEX];
  rc_shard_meta meta;
  fill_meta(m, &meta, config, hash);
  m->staging_want = rc_checkpoint_bytes_estimate(&meta, &view) + 1; /* a load reads one more */
  rc_state_free(&view);
  free(config);
  free_list(&l);
  /* without a thread, the first save or load reserves it */
  m->staging_pending = pthread_create(&m->staging_tid, NULL, reserve_run, m) == 0;
}

/* A streamed save (io/checkpoint.h): this thread copies the items off the
 * device into the staging buffer, in file order, each straight to its place
 * in the file image; the write, the whole-file hash and the dataset and
 * chunk hashes follow the copy on other threads. The bytes are those of
 * copying everything first and saving after (io_unit's streamed-save test,
 * and ckpt_golden against sums of the earlier writer, pin them). */
static int model_save(rc_model *m, const char *ckpt_root, const char *args_json, unsigned how,
                      rc_save_decide_fn decide, void *decide_ctx, rc_err *err) {
  if (m->cfg.world_size > 1) decide = NULL; /* every rank would have to agree: a full save */
  state_list l = {0};
  build(m, &l);
  rc_state view;
  int *item = malloc(sizeof *item * (size_t)(l.st.count ? l.st.count : 1));
  if (!item) abort();
  shard_view(m, &l, &view, item);
  char *config = rc_config_canonical(&m->cfg);
  char hash[RC_SHA256_HEX];
  rc_shard_meta meta;
  fill_meta(m, &meta, config, hash);
  meta.chunk_bytes = chunk_bytes_for_save();
  meta.hashes_only = (how & RC_SAVE_HASHES_ONLY) || decide;
  meta.handoff = how & RC_SAVE_HANDOFF;
  double t0 = rc_model_wall_s();
  rc_save_stream *s = NULL;
  int rc = rc_save_stream_begin(ckpt_root, &meta, &view, m->rank == 0 ? args_json : NULL,
                                staging_buffer, m, &s, err);
  double t1 = rc_model_wall_s();
  rc_model_profile_note("save: layout and staging buffer", t1 - t0);
  /* what this save writes, in census form (the shard's content), when the
   * leg writes a census after it: where each item was staged, and whether
   * staging changed it */
  bool census = !rc && m->census_of_save;
  void **staged = census ? calloc((size_t)view.count + 1, sizeof *staged) : NULL;
  bool *changed = census ? calloc((size_t)view.count + 1, sizeof *changed) : NULL;
  if (!staged || !changed) census = false; /* no census of the save: nothing claimed */
  if (!rc) {
    for (int j = 0; j < view.count; j++) {
      if (rc_tensor_nbytes(&view.tensors[j]) == 0) continue;
      void *dst = rc_save_stream_dataset(s, j);
      bool ch = stage_one(m, &l, item[j], dst);
      if (census) staged[j] = dst, changed[j] = ch;
      rc_save_stream_landed(s, j);
    }
    /* the staged bytes stay in the staging buffer until the stream ends */
    if (census) {
      double tc = rc_model_wall_s();
      census_of_save(m, &l, &view, item, staged, changed);
      rc_model_profile_note("save: the census of what it wrote", rc_model_wall_s() - tc);
    }
    double t2 = rc_model_wall_s();
    rc_model_profile_note("save: device-to-host copy (write and hashes follow it)", t2 - t1);
    if (decide && !(how & RC_SAVE_HASHES_ONLY) &&
        decide(decide_ctx, rc_save_stream_dir(s), m->iteration, rc_save_stream_hashes(s)))
      rc_save_stream_promote(s);
    rc = rc_save_stream_end(s, err);
    rc_model_profile_note("save: rest of the write, hashes, fsync", rc_model_wall_s() - t2);
    if (!rc) test_save_advances_rng(m);
  }
  free(item);
  free(staged), free(changed);
  /* a failed save leaves no census of what it wrote */
  if (rc) {
    free(m->saved_census);
    m->saved_census = NULL;
  }
  /* The injected bug: the save draws from the dropout stream after its
   * offset was written (one Philox block, as a temporary name or a sampled
   * log line would), so this process goes on with another stream than a
   * process that loads the checkpoint. */
  if (!rc && (m->cfg.inject & RC_BUG_SAVE_DRAWS_RNG)) m->rng_offset += 1;
  if (m->comm && m->cfg.world_size > 1) {
    /* every shard is written before rank 0 writes the manifest and COMPLETE */
    rc = rc_comm_agree(m->comm, m->ops, rc, err);
    if (!rc && m->rank == 0) {
      char iter_dir[4096], name[32];
      rc_iter_dirname(name, sizeof name, m->iteration);
      snprintf(iter_dir, sizeof iter_dir, "%s/%s", ckpt_root, name);
      rc = rc_checkpoint_finalize(iter_dir, m->cfg.world_size, m->iteration, err);
    }
    rc = rc_comm_agree(m->comm, m->ops, rc, err);
  }
  rc_state_free(&view);
  free(config);
  free_list(&l);
  return rc;
}

/* The device's tensors go up while the load still reads (rc_load_into.landed,
 * on a thread of the load: this one is inside it, CPU-only, so the backend
 * has one caller at a time). Each is copied from the bytes it was told
 * about; apply_loaded copies again only a tensor the load then pointed at
 * other bytes (a file laid out otherwise than predicted). A failed load
 * leaves the device meaningless, as any failed load does: the model is
 * discarded. Test hook (docs/robustness.md): RC_TEST_NO_EARLY_UPLOAD=1
 * copies everything after the load, as before. */
typedef struct {
  rc_model *m;
  const state_list *l;
  const int *item;   /* view index -> state index */
  const void **sent; /* per state index: the bytes uploaded, NULL: none */
  int n;             /* how many */
} early_upload;

static bool applies(const rc_model *m, const binding *b) {
  return b->apply_on_load && !(b->replicated && m->rank != 0) && b->nbytes > 0;
}

static void upload_landed(void *ctx, int j, const void *bytes) {
  early_upload *u = ctx;
  int i = u->item[j];
  const binding *b = &u->l->b[i];
  if (!applies(u->m, b) || b->loc != ON_DEVICE) return;
  u->m->ops->to_device(b->src, bytes, b->nbytes);
  u->sent[i] = bytes;
  u->n++;
}

/* The loaded bytes into the model, but for what went up as it landed. */
static void apply_loaded(rc_model *m, const state_list *l, const void *const *sent) {
  for (int i = 0; i < l->st.count; i++) {
    const binding *b = &l->b[i];
    if (!applies(m, b) || (sent && sent[i] == l->st.tensors[i].data)) continue;
    if (b->loc == ON_DEVICE)
      m->ops->to_device(b->src, l->st.tensors[i].data, b->nbytes);
    else
      memcpy(b->src, l->st.tensors[i].data, b->nbytes);
  }
  m->ops->sync();
}

/* Whether this load leaves its dataset hashes to a thread (rc_model_load_checked):
 * one rank (with more, every rank would have to agree on a late failure).
 * Test hook: RC_TEST_LOAD_CHECKS_DATASETS=1 has the load check them itself,
 * as before. */
static bool defer_dataset_hashes(const rc_model *m) {
  const char *v = getenv("RC_TEST_LOAD_CHECKS_DATASETS");
  return m->cfg.world_size == 1 && !(v && !strcmp(v, "1"));
}

/* The iteration a checkpoint directory names (.../iter_0000005, trailing
 * slashes dropped into trimmed), checked against the run: -1 with err set. */
static long long resume_iteration(const rc_model *m, const char *iter_dir, char *trimmed,
                                  size_t cap, rc_err *err) {
  snprintf(trimmed, cap, "%s", iter_dir);
  size_t n = strlen(trimmed);
  while (n > 1 && trimmed[n - 1] == '/') trimmed[--n] = 0;
  const char *base = strrchr(trimmed, '/');
  base = base ? base + 1 : trimmed;
  long long iteration;
  char tail;
  if (sscanf(base, RC_ITER_PREFIX "%lld%c", &iteration, &tail) != 1 || iteration < 0)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--resume-from %s: expected a checkpoint directory named iter_NNNNNNN",
                   iter_dir),
           -1;
  if (iteration >= m->cfg.steps)
    return rc_fail(err, RC_EXIT_USAGE, "--resume-from %s: iteration %lld is not before --steps %d",
                   iter_dir, iteration, m->cfg.steps),
           -1;
  return iteration;
}

/* The injected bugs of the settings a resumed process rebuilds rather than
 * takes from the run (docs/design.md §8): each rebuilds one of the step's
 * settings (model.h rc_step_settings) from a default or from the resumed
 * iteration, as a trainer that reconstructs its scheduler, optimizer or
 * scaler from partial arguments after a load does. */
static void rebuild_settings_wrongly(rc_model *m) {
  unsigned bug = m->cfg.inject;
  rc_step_settings *h = &m->hp;
  /* a scheduler made at the resumed step counts its warmup from there */
  if (bug & RC_BUG_WARMUP_FROM_PROCESS_START) h->warmup_origin = m->scheduler_steps;
  if (bug & RC_BUG_MIN_LR_DEFAULT_AFTER_RESUME) h->min_lr = 0.0; /* Megatron's --min-lr default */
  /* the step count restored as a float32 tensor */
  if (bug & RC_BUG_BIAS_CORRECTION_FP32_AFTER_LOAD) h->bias_correction_fp32 = true;
  if (bug & RC_BUG_CLIP_GRAD_DEFAULT_AFTER_RESUME) h->clip_grad = 1.0; /* --clip-grad default */
  if (bug & RC_BUG_LOSS_SCALE_WINDOW_DEFAULT_AFTER_RESUME) h->loss_scale_window = 1000;
  /* the MTP lifecycle's (docs/design.md §3.5): the auxiliary terms' scaling
   * rebuilt from the main loss's, the MTP clip from its default */
  if (bug & RC_BUG_MTP_DENOMINATOR_FROM_MAIN_AFTER_RESUME) h->mtp_denominator = h->main_denominator;
  if (bug & RC_BUG_MOE_AUX_LOSS_MAIN_DENOMINATOR_AFTER_RESUME)
    h->moe_aux_denominator = h->main_denominator;
  if (bug & RC_BUG_MTP_CLIP_GRAD_DEFAULT_AFTER_RESUME) h->mtp_clip_grad = 1.0;
}

/* After the loaded bytes are in: the iteration, the replicated state, the
 * device copies the host copies drive, the 16-bit weight copies, the
 * sampler's epoch. */
static int after_load(rc_model *m, const state_list *l, long long iteration, rc_err *err) {
  int rc = RC_OK;
  unsigned bug = m->cfg.inject;
  m->iteration = iteration;
  m->loaded = true;
  /* new weights: every 16-bit copy is cast again before it is used. The
   * injected bug marks them current instead (as if the optimizer had just
   * written them), so the first resumed step reads the copies of the
   * weights from before the load. */
  for (int i = 0; i < m->nlinears; i++)
    if (bug & RC_BUG_HALF_WEIGHT_COPY_NOT_REBUILT)
      rc_linear_copy_written(m, &m->linears[i]);
    else
      rc_linear_copy_stale(&m->linears[i]);
  if (m->comm) rc = broadcast_replicated(m, l, err);
  /* The injected bug: the Adam step is recomputed from the iteration, as
   * if every step had updated the weights; a skipped fp16 step makes them
   * differ. The step is still saved, just not read. */
  if (bug & RC_BUG_ADAM_STEP_FROM_ITERATION) m->optimizer_step = m->iteration;
  /* the device copies of the expert biases, which the router reads; the
   * injected bug leaves them as they were before the load */
  if (!(bug & RC_BUG_EXPERT_BIAS_DEVICE_COPY_STALE)) {
    for (int i = 0; i < m->cfg.layers; i++)
      if (m->layers[i].moe)
        m->ops->to_device(m->layers[i].expert_bias, m->layers[i].expert_bias_host,
                          sizeof(float) * (size_t)m->E);
    for (int p = 0; p < m->n_mtp_physical; p++)
      if (m->mtp[p].trm.moe)
        m->ops->to_device(m->mtp[p].trm.expert_bias, m->mtp[p].trm.expert_bias_host,
                          sizeof(float) * (size_t)m->E);
  }
  /* the sampler's epoch, from the data position (set_epoch). The injected
   * bug sets it only when the resume lands inside an epoch: at an epoch
   * boundary the sampler stays at its first epoch. */
  int64_t n = m->cfg.epoch_samples;
  if (n && (!(bug & RC_BUG_SAMPLER_EPOCH_NOT_SET_AFTER_RESUME) || m->consumed_samples % n))
    m->data_epoch = m->consumed_samples / n;
  rebuild_settings_wrongly(m);
  return rc;
}

static int model_load(rc_model *m, const char *iter_dir, const rc_handoff *h, rc_err *err) {
  char trimmed[1024];
  long long iteration = resume_iteration(m, iter_dir, trimmed, sizeof trimmed, err);
  if (iteration < 0) return err->code;
  if (h && h->iteration != iteration)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: the handoff note is of iteration %" PRId64, iter_dir,
                   h->iteration);
  state_list l = {0};
  build(m, &l);
  char *config = rc_config_canonical(&m->cfg);
  char hash[RC_SHA256_HEX];
  rc_shard_meta meta;
  m->iteration = iteration;
  fill_meta(m, &meta, config, hash);
  m->iteration = 0;
  rc_state view;
  int *item = malloc(sizeof *item * (size_t)(l.st.count ? l.st.count : 1));
  const void **sent = calloc((size_t)(l.st.count ? l.st.count : 1), sizeof *sent);
  if (!item || !sent) abort();
  shard_view(m, &l, &view, item);
  double t0 = rc_model_wall_s();
  /* read into the staging buffer; the tensors point at their bytes there,
   * the device's go up as they land, the dataset hashes are left to a thread */
  early_upload up = {m, &l, item, sent, 0};
  const char *no_early = getenv("RC_TEST_NO_EARLY_UPLOAD");
  rc_load_into into = {staging_buffer, m, upload_landed, &up, NULL};
  if (no_early && !strcmp(no_early, "1")) into.landed = NULL;
  load_check_free(m); /* a model loads once; a second load would start over */
  struct rc_load_check *check = defer_dataset_hashes(m) ? calloc(1, sizeof *check) : NULL;
  if (check) into.deferred = &check->d;
  /* The injected half-copy bug's copies: cast from the weights this process
   * holds before the load (the load marks them current, and nothing casts
   * them again), so that what the first resumed step reads is defined. */
  if (m->cfg.inject & RC_BUG_HALF_WEIGHT_COPY_NOT_REBUILT)
    for (int i = 0; i < m->nlinears; i++)
      if (m->linears[i].wq_half)
        m->ops->cast_half(m->linears[i].wq_half, m->linears[i].w->weight, m->linears[i].w->numel,
                          m->ct);
  int rc = h ? rc_checkpoint_load_handoff(trimmed, h, &meta, &view, &into, err)
             : rc_checkpoint_load_into(trimmed, &meta, &view, &into, err);
  m->ops->sync();
  double t1 = rc_model_wall_s();
  rc_model_profile_note("load: read and verify (chunk hashes; uploads as tensors land)", t1 - t0);
  for (int j = 0; j < view.count && !rc; j++) l.st.tensors[item[j]].data = view.tensors[j].data;
  free(item);
  rc_state_free(&view);
  /* a failed load on any rank stops every rank before anything is applied */
  if (m->comm) rc = rc_comm_agree(m->comm, m->ops, rc, err);
  if (check && rc == 0 && check->d.count > 0) {
    load_check_start(m, check);
    check = NULL;
  }
  if (check) rc_load_deferred_free(&check->d);
  free(check);
  if (rc == 0) {
    apply_loaded(m, &l, sent);
    char what[96];
    snprintf(what, sizeof what, "load: the rest of the copy (%d tensors went up as they landed)",
             up.n);
    rc_model_profile_note(what, rc_model_wall_s() - t1);
    rc = after_load(m, &l, iteration, err);
  }
  free(sent);
  free(config);
  free_list(&l);
  return rc;
}

int rc_model_save(rc_model *m, const char *ckpt_root, const char *args_json, unsigned how,
                  rc_err *err) {
  return model_save(m, ckpt_root, args_json, how, NULL, NULL, err);
}

int rc_model_save_deferred(rc_model *m, const char *ckpt_root, const char *args_json, unsigned how,
                           rc_save_decide_fn decide, void *ctx, rc_err *err) {
  return model_save(m, ckpt_root, args_json, how, decide, ctx, err);
}

int rc_model_load(rc_model *m, const char *iter_dir, rc_err *err) {
  return model_load(m, iter_dir, NULL, err);
}

int rc_model_load_handoff(rc_model *m, const char *iter_dir, const rc_handoff *h, rc_err *err) {
  return model_load(m, iter_dir, h, err);
}
