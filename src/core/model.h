/* model.h — the GPT-style decoder with multi-token prediction (docs/design.md §3),
 * its parameters, its TE-style linears and its training step.
 *
 * Written once against the ops interface: every tensor here lives in backend
 * memory and is touched only through rc_ops, so the same code trains on the
 * CPU reference and on the GPU. */
#ifndef RC_CORE_MODEL_H
#define RC_CORE_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/ops.h"
#include "core/config.h"

#define RC_MAX_PARAMS 1024
#define RC_MAX_LINEARS 512
#define RC_MAX_CALLS 64

/* The phases of a step that RC_PROFILE=1 times (rc_model_profile_mark):
 * each mark charges the time since the previous one to its phase. */
typedef enum {
  RC_PROF_DATA = 0,    /* "data and upload" */
  RC_PROF_FWD_DECODER, /* "forward decoder" */
  RC_PROF_FWD_MTP,     /* "forward MTP layers" */
  RC_PROF_FWD_HEADS,   /* "forward heads + CE" */
  RC_PROF_BWD_HEADS,   /* "backward heads" */
  RC_PROF_BWD_MTP,     /* "backward MTP" */
  RC_PROF_BWD_DECODER, /* "backward decoder" */
  RC_PROF_OPTIMIZER,   /* "grad norm, optimizer, fingerprints" */
  RC_PROFILE_PHASES    /* the count */
} rc_profile_phase;

/* A trainable tensor with its fp32 main_grad and AdamW moments. */
typedef struct {
  char name[160]; /* module path + "/weight", e.g. "decoder/layers/0/attention/qkv/weight" */
  int ndim;
  int64_t shape[3];
  size_t numel;
  float *weight, *main_grad, *exp_avg, *exp_avg_sq;
  bool decay;
} rc_param;

/* A quantised linear's amaxes in rc_model.fp8_amax: slot * RC_FP8_AMAX_SLOT + which. */
enum { RC_FP8_AMAX_INPUT = 0, RC_FP8_AMAX_GRAD = 1, RC_FP8_AMAX_WEIGHT = 2, RC_FP8_AMAX_SLOT = 3 };

/* The slots of rc_model.fwd_shared: the attention and MLP outputs before
 * their residual adds [T,H], and the qkv GEMM's output [T,3H] once RoPE has
 * written the BF16 attention's heads from it. (A half eh_proj's input has no
 * fp32 form: the MTP norms write its 16-bit halves; nor has a half fc1's in
 * an MoE layer: the gather writes fc1_h.) */
enum { RC_FWD_SHARED_OUT = 0, RC_FWD_SHARED_QKV, RC_FWD_SHARED_SLOTS };

/* is_first_microbatch: tri-state. NONE exists only as a value passed. */
typedef enum { RC_FLAG_FALSE = 0, RC_FLAG_TRUE = 1, RC_FLAG_NONE = 2 } rc_flag;
const char *rc_flag_name(rc_flag f);

/* A TE-style linear (docs/design.md §3.1): Y = X W^T with W [out, in] per group
 * (groups = experts for a grouped linear). The process-local flag is state on
 * purpose: it is not checkpointed unless the policy is `persist`. */
typedef struct {
  char name[128]; /* module path, "mtp/layers/0/transformer_layer/mlp/experts/fc1" */
  rc_param *w;
  int groups, in, out;
  bool te_style;           /* false: a plain linear whose wgrad always accumulates */
  bool repeated;           /* a module of the shared MTP layer */
  rc_flag flag;            /* is_first_microbatch, TRUE at construction */
  float *wq;               /* fp32 linears: the weight itself (NULL for half and fp8 linears) */
  uint16_t *wq_half;       /* half linears: the weight in the compute type (ops.h cast_half) */
  uint64_t wq_half_serial; /* the model's weights_serial when wq_half was cast */
  bool cache_valid;        /* fp8: wq8 / wq8_t hold a cached quantisation */
  int cache_step;          /* the step whose weights are in the cache (for tests) */
  float *wgrad_scratch;    /* fusion off */
  /* fp8 (--precision fp8, te_style linears): every GEMM runs on e4m3 bytes
   * (ops.h gemm_e4m3). The weight cache as Transformer Engine keeps it: W
   * [groups][out][in_pad] for forward and its transpose [groups][in][out_pad]
   * for dgrad, widths padded to 16 with zeros (the TN form). */
  uint8_t *wq8, *wq8_t;
  int in_pad, out_pad;
  /* Delayed scaling, one history per GEMM operand (weight, input, output
   * gradient): the step's scale is 448 / the history's max (0 = none
   * recorded yet: the first quantisation scales just in time), and each
   * step's amax is pushed at its end. Histories shape every quantised
   * value, which is why they are checkpointed. */
  float *amax_history, *amax_history_input, *amax_history_grad; /* [history] host */
  float fp8_scale, scale_input, scale_grad;
  bool quantised_this_step, input_seen, grad_seen;
  int fp8_slot; /* this linear's amaxes in rc_model.fp8_amax (RC_FP8_AMAX_*) */
  /* per forward call within the current microbatch */
  int ncalls;
  rc_flag passed[RC_MAX_CALLS];
  const uint16_t *saved_half[RC_MAX_CALLS]; /* half linears: each call's input, for its wgrad */
  /* a backward split by rc_linear_backward_dgrad, finished by
   * rc_linear_backward_wgrad (linear.h); pending_call -1: none */
  int pending_call, pending_rows;
  const int *pending_group_rows;
  const float *pending_dy, *pending_x, *pending_dx;
  const uint16_t *pending_dy_half;
} rc_linear;

/* Saved activations of one transformer-layer invocation. */
typedef struct rc_layer_act rc_layer_act;

/* One transformer layer's modules (decoder layer or the MTP block's TRM). */
typedef struct {
  char prefix[96];
  rc_param *ln1, *ln2;
  rc_linear *qkv, *proj;
  bool moe;
  rc_linear *fc1, *fc2; /* dense, or grouped experts */
  rc_linear *router;    /* MoE router (plain linear, fp32) */
  float *expert_bias;   /* [E] device, MoE only */
  float *expert_bias_host;
  double *token_counts; /* [E] tokens routed this step, host */
} rc_layer;

/* One physical MTP layer. */
typedef struct {
  rc_param *enorm, *hnorm, *final_norm;
  rc_linear *eh_proj;
  rc_layer trm;
} rc_mtp_layer;

/* Events for `bisect` (docs/design.md §9, docs/events.md): off by default and one
 * NULL check when off; one key=value line per event. */
typedef struct {
  FILE *out;     /* where events go during the current step; NULL = off */
  FILE *file;    /* --events FILE */
  int from_step; /* --events-from-step: log steps >= this */
  int step, microbatch;
} rc_event_log;

/* The distributed optimizer (docs/distributed.md): every parameter's
 * gradient laid end to end in one flat fp32 buffer of `total` elements,
 * padded to `padded` = W * `shard`; rank r owns [r*shard, (r+1)*shard) and
 * keeps the Adam moments of that slice only. All pointers are backend memory
 * owned by the model; offset is host. */
typedef struct {
  size_t total, padded, shard, begin, end; /* end = min(begin + shard, total) */
  size_t *offset;                          /* [nparams] param i starts at offset[i] */
  float *flat_grad;                        /* [padded] this rank's gradients */
  float *scratch;                          /* [padded] all-to-all / all-gather landing area */
  float *grad_shard;                       /* [shard] the reduced gradient of the owned slice */
  float *exp_avg, *exp_avg_sq;             /* [shard] Adam moments of the owned slice */
  float *weight_send;                      /* [shard] the owned slice's updated weights */
} rc_dist_opt;

/* What a buffer of the model is for: rc_memory_need's categories, so that
 * the record of what the model allocated can be held against the estimate
 * (hostile_model_memory). All but RC_MEM_HOST are backend memory. */
typedef enum {
  RC_MEM_WEIGHTS = 0,   /* parameters (and the MoE expert bias) */
  RC_MEM_MAIN_GRAD,     /* fp32 gradient accumulators */
  RC_MEM_OPTIMIZER,     /* Adam's two moments */
  RC_MEM_WEIGHT_COPIES, /* rounded/quantised weights, wgrad scratch */
  RC_MEM_ACTIVATIONS,   /* saved per layer call, MTP buffers, logits */
  RC_MEM_SCRATCH,       /* backward scratch, token ids, CE buffers */
  RC_MEM_DIST,          /* distributed optimizer buffers */
  RC_MEM_HOST,          /* host memory (calloc): small tables of the model */
  RC_MEM_KINDS
} rc_mem_kind;

/* One buffer of the model's plan (model_internal.h): what is asked, where
 * the model keeps it, and the buffer once the walk made it. ptr is NULL
 * before the walk, for a request the walk did not reach and once released
 * early (rc_model_release); rc_model_free frees every ptr in one loop. */
typedef struct {
  void *ptr;
  size_t bytes;
  rc_mem_kind kind;
  const char *what; /* a string literal naming the buffer */
  void *dst;        /* the model's pointer field (the address of a float *, uint16_t *, ...) */
} rc_model_block;

/* A pointer into a planned buffer (a shared slot, the weight an fp32 linear
 * reads as it is): after the walk, the field at dst = the one at src plus
 * offset bytes. */
typedef struct {
  void *dst;
  const void *src;
  size_t offset;
} rc_model_alias;

/* The settings the next step computes with (docs/census.md, class
 * `derived`): made from the config at set-up, and what every step reads
 * instead of the config, so that the census reports the values the step
 * will actually use. A correct resume makes them exactly as a fresh
 * process does; the catalogue's *-after-resume bugs (checkpointing.c) take
 * one from a default or rebuild it from the resumed iteration. */
typedef struct {
  double lr, min_lr;     /* the schedule's peak and its cosine floor */
  int64_t warmup;        /* linear warmup steps */
  int64_t warmup_origin; /* the scheduler step the schedule counts from (0) */
  int64_t decay_steps;   /* the horizon the cosine decays over (--steps) */
  double weight_decay;   /* the decay group's; the no-decay group's is 0 */
  double beta1, beta2, eps;
  bool bias_correction_fp32; /* Adam's bias corrections in float32, not double */
  double clip_grad;          /* the global-norm clip's max-norm (0: off) */
  int64_t loss_scale_window; /* fp16: clean steps before the scale grows */
  int64_t hysteresis;        /* fp16: overflows tolerated before it backs off */
  double growth_factor, backoff_factor, min_loss_scale;
  double moe_bias_update_rate; /* the expert-bias update's step */
  /* The loss's denominators (docs/design.md §3.5, rc_denominator): the main
   * loss's, the MTP term's and the MoE load-balancing loss's; where they
   * enter (microbatch or finish); the detached MTP heads' own clip. */
  int main_denominator, mtp_denominator, moe_aux_denominator;
  bool normalize_at_finish;
  double mtp_clip_grad; /* the MTP clip group's max-norm (0: off); detached heads only */
} rc_step_settings;

/* What a term of the loss is divided by (rc_step_settings): each
 * microbatch's own count, averaged over microbatches (the default); the
 * step's valid tokens; the step's valid sequences. The global counts are
 * summed over the step's microbatches and every rank (rc_model.step_counts). */
typedef enum { RC_DENOM_MICROBATCH = 0, RC_DENOM_TOKENS, RC_DENOM_SEQUENCES } rc_denominator;
const char *rc_denominator_name(int d);

typedef struct rc_model {
  const rc_ops *ops;
  rc_config cfg;
  rc_step_settings hp; /* what the steps compute with (made from cfg) */
  int T, B, S, H, V, F, nh, hd, E, K, D;
  rc_compute ct;      /* compute type of GEMM inputs */
  rc_compute attn_ct; /* attention's products: FP32 or BF16 (--attention-precision) */

  rc_param params[RC_MAX_PARAMS];
  int nparams;
  rc_linear linears[RC_MAX_LINEARS];
  int nlinears;

  rc_param *embedding, *final_norm, *head_param;
  /* params[mtp_params_begin .. mtp_params_end): the MTP modules' parameters
   * (contiguous: model.c adds them together), the detached heads' clip group */
  int mtp_params_begin, mtp_params_end;
  rc_linear *head;
  rc_layer layers[RC_MAX_LAYERS];
  rc_mtp_layer mtp[RC_MAX_MTP_DEPTH];
  int n_mtp_physical;

  /* activations: L + D layer invocations, per-depth MTP buffers, heads */
  rc_layer_act *acts;
  struct rc_mtp_act *mtp_acts;
  float *emb_out, *h0, *h0_rstd, *h0_r, *resid_in; /* h0_r: NULL unless the head needs it */
  const float *head_in0;                           /* h0 or h0_r: the main head's GEMM input */
  /* D+1 heads' logits [T, V], dlogits after the forward's CE. A half head
   * has no fp32 logits (NULL): each depth's logits and then their gradient
   * are 16-bit in dlogits_half[k]; otherwise fp32 logits. One buffer per
   * depth, or one that every depth's entry names when the heads run one at
   * a time (rc_model_heads_one_at_a_time). */
  float *logits[RC_MAX_MTP_DEPTH + 1];
  uint16_t *dlogits_half[RC_MAX_MTP_DEPTH + 1];
  uint16_t *head_h0; /* what the half head's main-depth call saved [T,H], or NULL */
  float *ce_losses, *ce_correct, *ce_dloss;
  float *heads_host; /* host [3][D+1][T]: dloss, then the losses and flags read back */
  int32_t *ids_dev[RC_MAX_MTP_DEPTH + 1], *labels_dev[RC_MAX_MTP_DEPTH + 1];
  /* forward buffers nothing reads after the layer's forward (model.c
   * own_or_shared): one buffer per slot for all layers, NULL when no layer
   * shares it; fwd_shared_n[slot] floats each */
  float *fwd_shared[RC_FWD_SHARED_SLOTS];
  size_t fwd_shared_n[RC_FWD_SHARED_SLOTS];
  /* backward scratch */
  float *d_resid, *d_tmp, *d_xm, *d_ln, *d_topk_w, *d_big, *d_big2, *d_h[RC_MAX_MTP_DEPTH + 1];
  /* a half linear's output gradient in the compute type, cast once for its
   * dgrad and wgrad (linear.c); dy_half_elems elements, the largest [rows,
   * out] of a half linear other than the head */
  uint16_t *dy_half;
  size_t dy_half_elems;
  /* Selective recompute of the SwiGLU output (model_layer.c): a half fc2's
   * saved input is not kept per layer but written into sw_half (one buffer
   * for all layers, [rows, F] of the largest) by the forward and again by
   * SwiGLU's backward (ops.h out_half) just before fc2's wgrad; fc2's output
   * gradient in 16 bits waits there in fc2_dy_half (fc2_dy_half_elems),
   * as dy_half holds SwiGLU's input gradient by then. NULL when off
   * (RC_KEEP_SWIGLU_OUTPUT=1 keeps a buffer per layer: the same bits). */
  uint16_t *sw_half, *fc2_dy_half;
  size_t fc2_dy_half_elems;
  /* The residual stream's gradient in 16 bits, [T, H], written by the
   * RMSNorm backward that finishes it (ops.h rmsnorm_backward dx_half) for
   * the half linear that takes it next (the layer below's fc2, an MTP
   * depth's eh_proj), which then casts nothing; NULL without half linears. */
  uint16_t *resid_half;
  /* weights_frozen: true while a train step runs its microbatches, when no
   * weight can change; weights_serial counts those spans. A half linear's
   * weight copy cast in one span serves every forward call of the span (all
   * microbatches, every MTP depth of a shared layer or head): the same bits
   * as a cast per call. Outside a span every call casts. */
  bool weights_frozen;
  uint64_t weights_serial;
  /* fp8: the step's running amax of each quantised linear's input, output
   * gradient and weight on the backend (RC_FP8_AMAX_SLOT per linear, ops.h
   * amax_update: no host round trip per cast), read back once at the step's
   * end; and the two byte buffers the activations are cast into for a GEMM
   * (fp8_scratch_bytes each) */
  float *fp8_amax, *fp8_amax_host;
  int fp8_slots;
  uint8_t *fp8_a, *fp8_b;
  size_t fp8_scratch_bytes;
  size_t scratch_floats;

  /* The plan (model_internal.h): every buffer above and in the parameters,
   * linears, layers and the distributed optimizer, in allocation order, and
   * the pointers into them. alloc_failed: the plan could not record a
   * request (or make a table it writes into); the walk refuses to start. */
  rc_model_block *blocks;
  int n_blocks, cap_blocks;
  rc_model_alias *aliases;
  int n_aliases, cap_aliases;
  bool alloc_failed;

  /* state beyond the parameters */
  int64_t optimizer_step;  /* successful AdamW steps (bias correction) */
  int64_t scheduler_steps; /* LR scheduler position */
  int64_t iteration;       /* steps run, skipped included */
  int64_t consumed_samples;
  double loss_scale;
  int64_t growth_tracker, hysteresis_tracker;
  uint64_t rng_seed, rng_offset; /* Philox dropout stream */
  bool grads_dirty;              /* main_grad holds this process's gradients */
  /* The sampler's epoch (data.h, --epoch-samples): what set_epoch was last
   * given. Not checkpointed: the loop sets it at the end of a step that
   * ends an epoch, a load from consumed_samples. */
  int64_t data_epoch;
  int64_t steps_in_process; /* steps this process has run (not state: a count) */
  /* The step's global counts, the denominators of --loss-type token-level
   * and sequence-level: indexed by rc_denominator (TOKENS: the main loss's
   * valid tokens, SEQUENCES: samples with one), summed over the step's
   * microbatches and every rank before its first microbatch. Not state:
   * every step counts its own batch. */
  double step_counts[3];
  /* The last microbatch's main-loss numerator under those loss types: the
   * sum of its valid tokens' losses (token-level), or of its samples' mean
   * losses (sequence-level); run_microbatches divides the step's sum by the
   * count. */
  double mb_main_numerator;
  bool loaded; /* this process loaded a checkpoint */
  /* The census of what a save wrote (core/census.h): when census_of_save is
   * set, a save makes the text of the saved fields from the staged bytes
   * (the shard's content) into saved_census (malloc'd), which
   * rc_census_write writes beside the process's census and frees. */
  bool census_of_save;
  char *saved_census;

  rc_event_log events;
  /* RC_PROFILE=1: wall time per phase of the step, synchronising at each
   * boundary (so it slows the step; for finding where time goes only) */
  bool profile;
  double profile_s[RC_PROFILE_PHASES], profile_mark;
  int rank;
  /* Data parallel: NULL = one process and no collectives (the original,
   * single-rank path, whose bytes must never change). Not owned. */
  struct rc_comm *comm;
  rc_dist_opt dist;
  /* the step's first failure, 0 if none; the leg stops on it: a collective
   * (dist_optimizer.c), or an op that could not allocate its scratch
   * (ops.h alloc_failed, asked after each microbatch: RC_EXIT_RESOURCES) */
  int dist_rc;
  rc_err dist_err;
  /* The load-balancing loss's value of the last microbatch (sum over MoE
   * calls), kept only when track_aux_loss is set: its gradient never needs
   * it, and the value needs the router's probabilities on the host, one more
   * device synchronisation and download per MoE forward. The gradient check
   * (tests/test_core.c) sets it; nothing reports it. */
  bool track_aux_loss;
  double aux_loss;
  /* Tests of the mechanism: called before each weight-gradient GEMM with that
   * call's operands, so a test can compute per-call contributions itself: a
   * half linear's are dy_half and x_half (dy and x may then be stale or
   * NULL), the others' dy and x. */
  void (*wgrad_hook)(void *ctx, const rc_linear *lin, int call, const float *dy, const float *x,
                     const uint16_t *dy_half, const uint16_t *x_half, int rows);
  void *wgrad_hook_ctx;
  /* Checkpoint staging (checkpointing.c): one host buffer holding a whole
   * shard file, reused by every save and load of the process
   * (ops->host_alloc). rc_model_reserve_staging allocates it on a thread of
   * its own while the leg sets up, waits or trains (page-locked on CUDA when
   * the leg waits idle: device copies then run at the link's speed); the
   * first save or load that needs it joins that thread. */
  unsigned char *staging;
  size_t staging_bytes;
  pthread_t staging_tid;
  bool staging_pending; /* staging_tid runs or has not been joined */
  size_t staging_want;  /* what it was asked to reserve */
  bool staging_locked;  /* ask for page-locked memory (rc_model_reserve_staging) */
  /* how rc_model_free releases the staging buffer: set by checkpointing.c
   * when it makes one (the model's files do not call up into it) */
  void (*release_staging)(struct rc_model *m);
  /* the dataset hashes of the last load, checked on a thread while the leg
   * trains (checkpointing.c, rc_model_load_checked); NULL when none */
  struct rc_load_check *load_check;
} rc_model;

/* Per-step results, the trace row. */
typedef struct {
  int64_t step;
  double loss, mtp_loss[RC_MAX_MTP_DEPTH], mtp_acc[RC_MAX_MTP_DEPTH];
  double grad_norm, lr, loss_scale;
  /* detached MTP heads: the MTP modules' gradient norm before their clip
   * (grad_norm is then the rest's); 0 otherwise (the trace leaves it out) */
  double mtp_grad_norm;
  int skipped;
  int64_t tokens, consumed_samples;
  uint64_t fp_params, fp_main_grad, fp_optim;
} rc_step_stats;

/* What a config needs in memory, in bytes: the sums of the model's plan
 * (model_internal.h), the list of buffers rc_model_init allocates (and, for
 * --world-size > 1, rc_model_attach_comm), so that a config that cannot fit
 * is refused before anything is allocated. The kinds are exact;
 * `overhead` is what an allocator may add to each allocation, and the host
 * side bounds what a save or a load stages (test: hostile_model_memory,
 * against the bytes counted through the backend and measured on the heap). */
typedef struct {
  uint64_t weights, main_grad, optimizer; /* fp32 per parameter; Adam's two moments */
  uint64_t weight_copies; /* rounded/quantised weights, wgrad scratch (fusion off) */
  uint64_t activations;   /* saved per layer call, MTP buffers, logits of the D+1 heads */
  uint64_t scratch;       /* backward scratch, token ids, CE buffers */
  uint64_t dist;          /* distributed optimizer buffers (world size > 1) */
  uint64_t n_allocs;      /* backend allocations */
  uint64_t n_host_allocs; /* host allocations of the model (its tables) */
  uint64_t overhead;      /* what the allocator may add to them (headers, page rounding) */
  uint64_t device;        /* all of the above plus overhead: backend ("device") memory */
  uint64_t host_buffers;  /* host memory of the model itself (rc_model, tables, the plan) */
  uint64_t transient;     /* host buffers freed before rc_model_init returns (init's ones) */
  uint64_t staging;       /* host copy of the state during a save or a load */
  uint64_t host;          /* host_buffers + transient + staging */
  /* what one CPU backend op may allocate and free within its call (a GEMM's
   * decoded and packed operands), bounded from the planned shapes: host
   * memory where device memory is host memory, checked only there */
  uint64_t op_scratch;
} rc_memory_need;
#define RC_ALLOC_OVERHEAD 4096u /* page rounding of a large (mmap'd) allocation */
/* The need of cfg's plan, planned into a scratch model and summed; RC_OK, or
 * the code that refused it (then *need is all zero: unknown). */
int rc_model_memory_need(const rc_config *cfg, rc_memory_need *need);

/* Whether each depth's head runs its forward and backward back to back, in
 * the backward's order, with one logits buffer for all depths: unless the
 * head is TE-style, whose forward order is part of the mechanism (model.c). */
bool rc_model_heads_one_at_a_time(const rc_config *cfg);
/* RC_OK if `need` fits, else RC_EXIT_RESOURCES naming the need and the
 * limit that refused it. device_is_host: one memory (the CPU backend):
 * device + host + op scratch must fit in host_available. Otherwise each in
 * its own; an available value of 0 means unknown and is not checked (CUDA:
 * pass cudaMemGetInfo's free bytes). Then this process's own limits
 * (base/mem_limits.h: RLIMIT_AS, RLIMIT_DATA), read here: what the process
 * maps of the need (its host side, and the device's where that is host
 * memory) plus RC_MEM_PROCESS_SLACK must fit in what they leave.
 * RC_TEST_MEM_AVAILABLE=BYTES in the environment replaces both available
 * values (a test hook, docs/robustness.md). */
int rc_model_memory_check(const rc_memory_need *need, bool device_is_host,
                          uint64_t device_available, uint64_t host_available, rc_err *err);
/* What the host's limits leave to allocate (base/mem_limits.h: the
 * smallest of MemAvailable and the cgroup limits), in bytes; 0 if none can
 * be read. */
uint64_t rc_host_memory_available(void);

int rc_model_init(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank, rc_err *err);
/* The same for a process that loads a checkpoint before its first step:
 * the weights are not drawn (they stay zero) because the load sets every
 * one of them (every parameter is in every checkpoint: checkpointing.c),
 * and drawing 200M normals takes the CPU backend seconds. The model
 * must not be used until the load has succeeded. Bits of the run are those
 * of rc_model_init followed by the load (the resume tests and the
 * catalogue show it). */
int rc_model_init_for_load(rc_model *m, const rc_config *cfg, const rc_ops *ops, int rank,
                           rc_err *err);
/* Switches the model to data parallel over `comm` (world = cfg.world_size)
 * with the distributed optimizer. Call after rc_model_init with the same
 * rank and before loading. */
int rc_model_attach_comm(rc_model *m, struct rc_comm *comm, rc_err *err);
void rc_model_free(rc_model *m);

/* One optimizer step: M microbatches of forward/backward, grad norm, clip,
 * AdamW (or skip on fp16 overflow), scheduler, loss scaler, expert bias. */
struct rc_data;
void rc_model_train_step(rc_model *m, const struct rc_data *data, rc_step_stats *st);

/* Pieces of the step, exposed for tests of the mechanism. */
void rc_model_zero_grads(rc_model *m);
void rc_model_begin_step(rc_model *m); /* re-arm tracked flags, fix fp8 scales */
/* Forward and backward of one microbatch given its per-depth ids, labels and
 * masks (host arrays of T); accumulates into main_grad. */
void rc_model_microbatch_io(rc_model *m, int32_t **ids, int32_t **labels, float **mask,
                            double *loss, double *mtp_loss, double *mtp_acc, int64_t *tokens);
void rc_model_end_step(rc_model *m);
double rc_model_lr(const rc_model *m, int64_t scheduler_step);
/* Adam's bias corrections 1 - beta^step as the optimizer computes them
 * (rc_step_settings: in double, or in float32). */
void rc_model_bias_corrections(const rc_model *m, int64_t optimizer_step, double *bc1, double *bc2);
/* The step's settings made from the config (rc_model_setup calls it). */
void rc_model_settings_from_config(rc_step_settings *hp, const rc_config *cfg);

/* Fingerprints over all parameters / main_grads / optimizer moments. */
uint64_t rc_model_fp_params(const rc_model *m);
uint64_t rc_model_fp_main_grad(const rc_model *m);
uint64_t rc_model_fp_optim(const rc_model *m);

/* Profiling (see rc_model.profile): charges the time since the last mark to
 * `phase` and names the phases for reports. */
void rc_model_profile_mark(rc_model *m, rc_profile_phase phase);
/* Monotonic seconds; with RC_PROFILE set, one "profile: WHAT S s" line on
 * stderr for a piece of start-up, save or load (bench/NOTES.md reads them). */
double rc_model_wall_s(void);
void rc_model_profile_note(const char *what, double seconds);
/* With RC_PROFILE set, on rank 0: the model's allocation record on stderr,
 * by kind and by buffer name (each name's buffers summed, largest first,
 * those of 1% of the backend total or more). Called once the model is
 * allocated; it is what was allocated, not rc_model_memory_need's bound. */
void rc_model_memory_report(const rc_model *m);
const char *rc_model_profile_phase_name(rc_profile_phase phase);

rc_linear *rc_model_find_linear(rc_model *m, const char *name);
rc_param *rc_model_find_param(rc_model *m, const char *name);

#endif
