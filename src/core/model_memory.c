/* model_memory.c — the model's memory: the plan that both counts and
 * allocates (model_internal.h), the need it sums and the check of that need
 * against the machine's limits, the walk that allocates it, and
 * rc_model_free as one loop over it.
 *
 * There is one list: model.c appends a request per buffer while it builds
 * the model (allocating nothing), rc_model_plan_need sums that list, and
 * rc_plan_walk allocates it. hostile_model_memory holds the plan's sums
 * against the bytes the backend was asked for. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc_fail.h"
#include "base/fsutil.h"
#include "base/mem_limits.h"
#include "core/model_internal.h"

char rc_planned_marker;

/* ---- the plan ---- */

/* Room for one more request (the list doubles). */
static bool reserve_block(rc_model *m) {
  if (m->n_blocks < m->cap_blocks) return true;
  int cap = m->cap_blocks ? 2 * m->cap_blocks : 256;
  rc_model_block *b = realloc(m->blocks, (size_t)cap * sizeof *b);
  if (!b) return false;
  m->blocks = b, m->cap_blocks = cap;
  return true;
}

/* The model's pointer field at dst, whatever its pointer type: written and
 * read as bytes, so no pointer type is read through another. */
static void set_field(void *dst, void *value) {
  memcpy(dst, &value, sizeof value);
}
static void *get_field(const void *src) {
  void *v;
  memcpy(&v, src, sizeof v);
  return v;
}

void rc_plan_buffer(rc_model *m, void *dst, rc_mem_kind kind, size_t bytes, const char *what) {
  set_field(dst, RC_PLANNED);
  if (!reserve_block(m)) {
    m->alloc_failed = true;
    return;
  }
  m->blocks[m->n_blocks++] = (rc_model_block){NULL, bytes ? bytes : 1, kind, what, dst};
}

void rc_plan_table(rc_model *m, void *dst, size_t count, size_t size, const char *what) {
  size_t bytes = count * size;
  if (!bytes) bytes = 1;
  void *p = reserve_block(m) ? calloc(1, bytes) : NULL;
  set_field(dst, p);
  if (!p) {
    m->alloc_failed = true;
    return;
  }
  m->blocks[m->n_blocks++] = (rc_model_block){p, bytes, RC_MEM_HOST, what, dst};
}

void rc_plan_alias(rc_model *m, void *dst, const void *src, size_t offset) {
  set_field(dst, get_field(src)); /* planned (or NULL) as its source is */
  if (m->n_aliases == m->cap_aliases) {
    int cap = m->cap_aliases ? 2 * m->cap_aliases : 64;
    rc_model_alias *a = realloc(m->aliases, (size_t)cap * sizeof *a);
    if (!a) {
      m->alloc_failed = true;
      return;
    }
    m->aliases = a, m->cap_aliases = cap;
  }
  m->aliases[m->n_aliases++] = (rc_model_alias){dst, src, offset};
}

void rc_model_describe_refusal(bool forced, char *buf, size_t cap) {
  if (forced) {
    snprintf(buf, cap, "RC_TEST_FAIL_ALLOC_AT=%s (a test's forced failure)",
             getenv("RC_TEST_FAIL_ALLOC_AT"));
    return;
  }
  rc_mem_limit host, proc;
  char h[320] = "the host's memory could not be read", p[320] = "no RLIMIT_AS or RLIMIT_DATA";
  if (rc_mem_host_limit(&host)) rc_mem_limit_describe(&host, h, sizeof h);
  if (rc_mem_process_limit(&proc)) rc_mem_limit_describe(&proc, p, sizeof p);
  snprintf(buf, cap, "the allocator refused it (%s; %s)", p, h);
}

int rc_plan_walk(rc_model *m, int first, rc_err *err) {
  if (m->alloc_failed)
    return rc_fail(err, RC_EXIT_RESOURCES,
                   "model: out of host memory while planning its buffers: nothing was allocated");
  uint64_t done = 0;
  int walked = 0, to_walk = 0;
  for (int i = first; i < m->n_blocks; i++) to_walk += !m->blocks[i].ptr;
  for (int i = first; i < m->n_blocks; i++) {
    rc_model_block *b = &m->blocks[i];
    if (b->ptr) continue; /* a table, made while planning */
    walked++;
    bool forced = rc_alloc_fail_now();
    void *p = NULL;
    if (!forced) p = b->kind == RC_MEM_HOST ? calloc(1, b->bytes) : m->ops->alloc(b->bytes);
    if (!p) {
      for (int j = i; j < m->n_blocks; j++)
        if (!m->blocks[j].ptr) set_field(m->blocks[j].dst, NULL);
      char why[800], got[32];
      rc_model_describe_refusal(forced, why, sizeof why);
      rc_format_bytes(done, got, sizeof got);
      return rc_fail(err, RC_EXIT_RESOURCES,
                     "model: cannot allocate %zu bytes of %s for '%s' (allocation %d of the %d "
                     "the plan makes, %s made before it): %s",
                     b->bytes, b->kind == RC_MEM_HOST ? "host memory" : "backend memory", b->what,
                     walked, to_walk, got, why);
    }
    b->ptr = p;
    set_field(b->dst, p);
    done += b->bytes;
  }
  for (int i = 0; i < m->n_aliases; i++) {
    const rc_model_alias *a = &m->aliases[i];
    char *src = get_field(a->src);
    set_field(a->dst, src ? src + a->offset : NULL);
  }
  return RC_OK;
}

void rc_model_release(rc_model *m, void *ptr) {
  if (!ptr) return;
  for (int i = m->n_blocks - 1; i >= 0; i--) {
    rc_model_block *b = &m->blocks[i];
    if (b->ptr != ptr) continue;
    if (b->kind == RC_MEM_HOST)
      free(ptr);
    else
      m->ops->free(ptr);
    b->ptr = NULL;
    return;
  }
}

/* ---- the need: the plan's sums ---- */

/* What an allocator may add to a request of `bytes`: a heap chunk's header
 * and alignment below glibc's smallest mmap threshold (128 KiB), page
 * rounding and a header above it (CUDA's granule is the lead's to add). */
static uint64_t alloc_overhead(uint64_t bytes) {
  return bytes < (128u << 10) ? 64 : RC_ALLOC_OVERHEAD + 64;
}

size_t rc_fp8_scratch_bytes(const rc_config *c) {
  int width = 3 * c->hidden; /* linear_qkv's out */
  int widths[] = {2 * c->ffn, 2 * c->hidden,
                  c->te_output_head && !c->tie_embeddings ? c->vocab : 0};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
    width = widths[i] > width ? widths[i] : width;
  return (size_t)rc_fp8_pad(width) * (size_t)rc_fp8_pad(c->micro_batch * c->seq_len);
}

/* model_internal.h: here, where the need and the plan both read it */
bool rc_swiglu_recompute_on(void) {
  const char *keep = getenv("RC_KEEP_SWIGLU_OUTPUT");
  return !(keep && strcmp(keep, "1") == 0);
}

/* A head whose forward order nothing observes — a plain linear: no flag,
 * its fused wgrad always accumulates — runs each depth's forward and
 * backward back to back, in the backward's order (0, D..1): main_grad sees
 * the same wgrads in the same order, and one [T, V] logits buffer serves
 * every depth. A TE-style head (--te-output-head) keeps Megatron's forward
 * order, MTP heads 1..D then the main head: its first forward's flag pairs
 * with its last backward, the pairing under test; its depths' logits all
 * live from the forward's cross-entropy to their backward. */
bool rc_model_heads_one_at_a_time(const rc_config *c) {
  return !c->te_output_head;
}

static uint64_t max_u64(uint64_t a, uint64_t b) {
  return a > b ? a : b;
}

/* The CPU backend's scratch within one op (backend/cpu): a GEMM (m, n, k)
 * holds at most its fp32 result, both operands decoded and both packed,
 * m*n + 2 (m*k + n*k) floats; a linear of R rows runs forward (R, out, in),
 * dgrad (R, in, out) and wgrad (out, in, R). The BF16 attention backward
 * holds 11 [T, H] copies (qkv three times, dout, out, dqkv); the
 * cross-entropy one [V] row. Five buffers' overhead at most. */
static uint64_t op_scratch_bound(const rc_model *m) {
  uint64_t T = (uint64_t)m->T, K = (uint64_t)m->K, floats = 11 * T * (uint64_t)m->H;
  floats = max_u64(floats, (uint64_t)m->V);
  for (int i = 0; i < m->nlinears; i++) {
    const rc_linear *lin = &m->linears[i];
    uint64_t R = lin->groups > 1 ? T * K : T, I = (uint64_t)lin->in, O = (uint64_t)lin->out;
    uint64_t gemms[3][3] = {{R, O, I}, {R, I, O}, {O, I, R}};
    for (int g = 0; g < 3; g++) {
      uint64_t a = gemms[g][0], b = gemms[g][1], k = gemms[g][2];
      floats = max_u64(floats, a * b + 2 * (a * k + b * k));
    }
  }
  return 4 * floats + 5 * (RC_ALLOC_OVERHEAD + 64);
}

void rc_model_plan_need(const rc_model *m, rc_memory_need *n) {
  memset(n, 0, sizeof *n);
  uint64_t host = 0;
  uint64_t *kind[RC_MEM_KINDS] = {[RC_MEM_WEIGHTS] = &n->weights,
                                  [RC_MEM_MAIN_GRAD] = &n->main_grad,
                                  [RC_MEM_OPTIMIZER] = &n->optimizer,
                                  [RC_MEM_WEIGHT_COPIES] = &n->weight_copies,
                                  [RC_MEM_ACTIVATIONS] = &n->activations,
                                  [RC_MEM_SCRATCH] = &n->scratch,
                                  [RC_MEM_DIST] = &n->dist,
                                  [RC_MEM_HOST] = &host};
  for (int i = 0; i < m->n_blocks; i++) {
    const rc_model_block *b = &m->blocks[i];
    *kind[b->kind] += b->bytes;
    if (b->kind == RC_MEM_HOST) {
      n->n_host_allocs++;
      host += alloc_overhead(b->bytes);
    } else {
      n->n_allocs++;
      n->overhead += alloc_overhead(b->bytes);
    }
  }
  n->device = n->weights + n->main_grad + n->optimizer + n->weight_copies + n->activations +
              n->scratch + n->dist + n->overhead;
  /* the plan itself (its requests and aliases), and the model */
  uint64_t plan = (uint64_t)m->cap_blocks * sizeof(rc_model_block) +
                  (uint64_t)m->cap_aliases * sizeof(rc_model_alias);
  n->host_buffers =
      host + plan + 2 * alloc_overhead(plan) + sizeof(rc_model) + alloc_overhead(sizeof(rc_model));
  /* the init's ones for the norm weights (model.c init_weights): the
   * largest 1-D parameter; the draws go straight into the weights */
  uint64_t ones = 1;
  for (int i = 0; i < m->nparams; i++)
    if (m->params[i].ndim == 1) ones = max_u64(ones, m->params[i].numel);
  n->transient = 4 * ones + alloc_overhead(4 * ones);
  /* checkpoint staging (core/checkpointing.c, io/): a save copies the state
   * (weights, both moments, main_grad when a bug carries it) to host
   * tensors; a load holds those and the shard file read whole. Twice the
   * state plus metadata bounds both. */
  uint64_t state = n->weights + n->main_grad + n->optimizer;
  n->staging = 2 * state + (16u << 20);
  n->host = n->host_buffers + n->transient + n->staging;
  n->op_scratch = op_scratch_bound(m);
}

/* RC_TEST_MEM_AVAILABLE=BYTES: the available memory a test pretends */
static bool test_available(uint64_t *out) {
  const char *v = getenv("RC_TEST_MEM_AVAILABLE");
  if (!v || !*v) return false;
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end) return false;
  *out = x;
  return true;
}

/* This process's own limits against what it maps of the need. */
static int process_check(const rc_memory_need *n, bool device_is_host, const char *parts,
                         rc_err *err) {
  rc_mem_limit lim;
  if (!rc_mem_process_limit(&lim)) return RC_OK;
  uint64_t mapped = n->host + (device_is_host ? n->device + n->op_scratch : 0);
  if (mapped + RC_MEM_PROCESS_SLACK <= lim.room) return RC_OK;
  char need_s[32], room_s[32], host_s[32], slack_s[32], what[320];
  rc_format_bytes(mapped + RC_MEM_PROCESS_SLACK, need_s, sizeof need_s);
  rc_format_bytes(lim.room, room_s, sizeof room_s);
  rc_format_bytes(n->host, host_s, sizeof host_s);
  rc_format_bytes(RC_MEM_PROCESS_SLACK, slack_s, sizeof slack_s);
  rc_mem_limit_describe(&lim, what, sizeof what);
  return rc_fail(err, RC_EXIT_RESOURCES,
                 "this config needs %s in this process (%s%scheckpoint staging and host buffers "
                 "%s; threads and libraries %s) but %s, which leaves %s: nothing was allocated; "
                 "raise the limit or use smaller sizes",
                 need_s, device_is_host ? parts : "", device_is_host ? "; " : "", host_s, slack_s,
                 what, room_s);
}

int rc_model_memory_check(const rc_memory_need *n, bool device_is_host, uint64_t device_available,
                          uint64_t host_available, rc_err *err) {
  uint64_t t;
  char src[240] = "available host memory";
  rc_mem_limit host_lim;
  if (test_available(&t)) {
    device_available = host_available = t;
    snprintf(src, sizeof src, "RC_TEST_MEM_AVAILABLE");
  } else if (rc_mem_host_limit(&host_lim) && host_lim.room == host_available) {
    /* MemAvailable names itself; a cgroup's limit says what it is and uses */
    if (host_lim.used)
      rc_mem_limit_describe(&host_lim, src, sizeof src);
    else
      snprintf(src, sizeof src, "%s", host_lim.name);
  }
  char need_s[32], avail_s[32], parts[400], host_s[32];
  char b[7][32];
  uint64_t v[7] = {n->weights,       n->main_grad,   n->optimizer,
                   n->weight_copies, n->activations, n->scratch + n->dist + n->overhead,
                   n->op_scratch};
  for (int i = 0; i < 7; i++) rc_format_bytes(v[i], b[i], sizeof b[i]);
  snprintf(parts, sizeof parts,
           "weights %s, main_grad %s, Adam moments %s, weight copies %s, activations %s, "
           "scratch %s",
           b[0], b[1], b[2], b[3], b[4], b[5]);
  if (device_is_host) /* the CPU ops' own scratch is host memory too */
    snprintf(parts + strlen(parts), sizeof parts - strlen(parts), ", op scratch %s", b[6]);
  rc_format_bytes(n->host, host_s, sizeof host_s);
  if (device_is_host) {
    uint64_t total = n->device + n->op_scratch + n->host;
    if (host_available && total > host_available) {
      rc_format_bytes(total, need_s, sizeof need_s),
          rc_format_bytes(host_available, avail_s, sizeof avail_s);
      return rc_fail(err, RC_EXIT_RESOURCES,
                     "this config needs %s of memory (%s; checkpoint staging and host buffers "
                     "%s) but %s is available (%s): nothing was allocated; use smaller sizes",
                     need_s, parts, host_s, avail_s, src);
    }
    return process_check(n, true, parts, err);
  }
  if (device_available && n->device > device_available) {
    rc_format_bytes(n->device, need_s, sizeof need_s),
        rc_format_bytes(device_available, avail_s, sizeof avail_s);
    return rc_fail(err, RC_EXIT_RESOURCES,
                   "this config needs %s of device memory (%s) but %s is free on the device: "
                   "nothing was allocated; use smaller sizes",
                   need_s, parts, avail_s);
  }
  if (host_available && n->host > host_available) {
    rc_format_bytes(n->host, need_s, sizeof need_s),
        rc_format_bytes(host_available, avail_s, sizeof avail_s);
    return rc_fail(err, RC_EXIT_RESOURCES,
                   "this config needs %s of host memory (checkpoint staging and host buffers) but "
                   "%s is available (%s): nothing was allocated",
                   need_s, avail_s, src);
  }
  return process_check(n, false, parts, err);
}

uint64_t rc_host_memory_available(void) {
  rc_mem_limit lim;
  return rc_mem_host_limit(&lim) ? lim.room : 0;
}

/* ---- RC_PROFILE's memory table ---- */

/* A name's buffers of one kind, summed (every layer's "attn" together). */
typedef struct {
  const char *what;
  rc_mem_kind kind;
  uint64_t bytes;
  int count;
} mem_row;

static int by_bytes_desc(const void *a, const void *b) {
  const mem_row *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : strcmp(x->what, y->what);
}

static const char *const MEM_KIND_NAMES[RC_MEM_KINDS] = {[RC_MEM_WEIGHTS] = "weights",
                                                         [RC_MEM_MAIN_GRAD] = "main_grad",
                                                         [RC_MEM_OPTIMIZER] = "Adam moments",
                                                         [RC_MEM_WEIGHT_COPIES] = "weight copies",
                                                         [RC_MEM_ACTIVATIONS] = "activations",
                                                         [RC_MEM_SCRATCH] = "scratch",
                                                         [RC_MEM_DIST] = "distributed optimizer",
                                                         [RC_MEM_HOST] = "host tables"};

void rc_model_memory_report(const rc_model *m) {
  const char *v = getenv("RC_PROFILE");
  if (!v || !*v || m->rank != 0) return;
  uint64_t kind_bytes[RC_MEM_KINDS] = {0}, backend = 0;
  int live = 0;
  mem_row *rows = calloc((size_t)(m->n_blocks ? m->n_blocks : 1), sizeof *rows);
  if (!rows) return; /* a report, not a result: nothing to fail */
  int nrows = 0;
  for (int i = 0; i < m->n_blocks; i++) {
    const rc_model_block *b = &m->blocks[i];
    if (!b->ptr) continue; /* released early */
    live++;
    kind_bytes[b->kind] += b->bytes;
    if (b->kind != RC_MEM_HOST) backend += b->bytes;
    int j = 0;
    while (j < nrows && !(rows[j].kind == b->kind && !strcmp(rows[j].what, b->what))) j++;
    if (j == nrows) rows[nrows++] = (mem_row){b->what, b->kind, 0, 0};
    rows[j].bytes += b->bytes, rows[j].count++;
  }
  qsort(rows, (size_t)nrows, sizeof *rows, by_bytes_desc);
  char total[32], each[32];
  rc_format_bytes(backend, total, sizeof total);
  fprintf(stderr,
          "profile: memory: the model's %d buffers, %s of backend memory (what it allocated; "
          "the backend's own scratch and context are not in it)\n",
          live, total);
  for (int k = 0; k < RC_MEM_KINDS; k++) {
    if (!kind_bytes[k]) continue;
    rc_format_bytes(kind_bytes[k], each, sizeof each);
    fprintf(stderr, "profile: memory:   %-22s %10s\n", MEM_KIND_NAMES[k], each);
  }
  /* the names worth looking at: 1% of the backend total or more */
  for (int j = 0; j < nrows; j++) {
    if (rows[j].kind == RC_MEM_HOST || rows[j].bytes * 100 < backend) continue;
    rc_format_bytes(rows[j].bytes, each, sizeof each);
    fprintf(stderr, "profile: memory:     %-20s %10s  %-14s %d buffer%s\n", rows[j].what, each,
            MEM_KIND_NAMES[rows[j].kind], rows[j].count, rows[j].count == 1 ? "" : "s");
  }
  free(rows);
}

/* Frees everything the model allocated, backend buffers included, so a leg
 * is clean under LeakSanitizer: one loop over the plan, newest first. Safe
 * on a partly initialised model and on one only planned (rc_model_memory_need,
 * no ops): an entry the walk did not reach, or released early, is NULL. */
void rc_model_free(rc_model *m) {
  if (!m->ops && !m->blocks) return;             /* nothing made, or freed already */
  if (m->release_staging) m->release_staging(m); /* joins its thread, frees it */
  free(m->saved_census);                         /* a save's census never written */
  m->saved_census = NULL;
  for (int i = m->n_blocks - 1; i >= 0; i--) {
    rc_model_block *b = &m->blocks[i];
    if (!b->ptr) continue;
    if (b->kind == RC_MEM_HOST)
      free(b->ptr);
    else
      m->ops->free(b->ptr);
  }
  free(m->blocks);
  free(m->aliases);
  m->blocks = NULL, m->n_blocks = m->cap_blocks = 0;
  m->aliases = NULL, m->n_aliases = m->cap_aliases = 0;
  m->acts = NULL, m->mtp_acts = NULL;
  memset(&m->dist, 0, sizeof m->dist);
  m->nparams = m->nlinears = 0;
  m->ops = NULL;
}
