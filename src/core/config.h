/* config.h — every model and training setting (docs/design.md §3), its flags, its
 * validation, and its canonical serialisation.
 *
 * The canonical config is a JSON object with sorted keys holding exactly the
 * settings that determine the math of a run; its SHA-256 goes into every
 * shard's /meta, so a resume with a different setting is refused naming the
 * field. Leg-specific settings (output directory, save/stop steps, device)
 * live in rc_leg_opts and are never part of it. */
#ifndef RC_CORE_CONFIG_H
#define RC_CORE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/flags.h"

/* The deepest multi-token prediction the model holds: D MTP modules and
 * D + 1 output heads (the main one and one per depth). Per-depth arrays in
 * the model and the step are sized by it (core/model.h). */
#define RC_MAX_MTP_DEPTH 16

typedef enum { RC_PREC_FP32 = 0, RC_PREC_BF16, RC_PREC_FP16, RC_PREC_FP8 } rc_precision;

typedef enum {
  RC_POLICY_LEGACY = 0,     /* the module flag: Megatron before the fix */
  RC_POLICY_UNTRACKED_NONE, /* NONE when not tracked, else the flag: the fix's first version */
  RC_POLICY_RESOLVE,        /* NONE when not tracked or repeated, else the flag: the merged fix */
  RC_POLICY_ALWAYS_FALSE,   /* FALSE: the tempting wrong fix (stale quantised cache) */
  RC_POLICY_PERSIST         /* like legacy, but the flags are checkpointed */
} rc_policy;

/* Injectable resume bugs (docs/design.md §8), one bit each. */
typedef enum {
  RC_BUG_RNG_NOT_SAVED = 1u << 0,
  RC_BUG_DATA_POSITION_NOT_SAVED = 1u << 1,
  RC_BUG_OPTIMIZER_STEP_NOT_SAVED = 1u << 2,
  RC_BUG_SCHEDULER_NOT_RESTORED = 1u << 3,
  RC_BUG_LOSS_SCALER_NOT_SAVED = 1u << 4,
  RC_BUG_EXPERT_BIAS_NOT_SAVED = 1u << 5,
  RC_BUG_AMAX_HISTORY_NOT_SAVED = 1u << 6,
  RC_BUG_GRAD_BUFFER_NOT_ZEROED_AFTER_LOAD = 1u << 7,
  RC_BUG_MOMENTS_SAVED_IN_BF16 = 1u << 8,
  RC_BUG_NONDETERMINISTIC_REDUCTION = 1u << 9,
  RC_BUG_RNG_SAVED_AS_REPLICATED = 1u << 10,
  RC_BUG_HYSTERESIS_NOT_SAVED = 1u << 11,
  RC_BUG_ADAM_STEP_FROM_ITERATION = 1u << 12,
  RC_BUG_SAVE_DRAWS_RNG = 1u << 13,
  /* Settings rebuilt on resume rather than carried, copies held only in the
   * process, a save that writes a wrong value, updates a resumed process
   * skips, a sampler left at its first epoch (docs/census.md "derived" and
   * "copy", docs/bisect.md): what the census's derived and copy fields and
   * bisect's update events name. */
  RC_BUG_WARMUP_FROM_PROCESS_START = 1u << 14,
  RC_BUG_MIN_LR_DEFAULT_AFTER_RESUME = 1u << 15,
  RC_BUG_BIAS_CORRECTION_FP32_AFTER_LOAD = 1u << 16,
  RC_BUG_CLIP_GRAD_DEFAULT_AFTER_RESUME = 1u << 17,
  RC_BUG_LOSS_SCALE_WINDOW_DEFAULT_AFTER_RESUME = 1u << 18,
  RC_BUG_EXPERT_BIAS_DEVICE_COPY_STALE = 1u << 19,
  RC_BUG_HALF_WEIGHT_COPY_NOT_REBUILT = 1u << 20,
  RC_BUG_CONSUMED_SAMPLES_SAVED_SHORT = 1u << 21,
  RC_BUG_EXPERT_BIAS_UPDATE_SKIPPED_AFTER_RESUME = 1u << 22,
  RC_BUG_SAMPLER_EPOCH_NOT_SET_AFTER_RESUME = 1u << 23,
  /* The MTP lifecycle's settings (docs/design.md §3.5), rebuilt on resume
   * from the main loss or from a default: the census's derived fields
   * mtp.loss_denominator, moe.aux_loss_denominator and mtp.clip_grad. */
  RC_BUG_MTP_DENOMINATOR_FROM_MAIN_AFTER_RESUME = 1u << 24,
  RC_BUG_MOE_AUX_LOSS_MAIN_DENOMINATOR_AFTER_RESUME = 1u << 25,
  RC_BUG_MTP_CLIP_GRAD_DEFAULT_AFTER_RESUME = 1u << 26,
} rc_bug;

/* --loss-type: what the main loss is divided by (docs/design.md §3.5).
 * microbatch-mean: each microbatch's mean over its valid tokens, averaged
 * over the step's microbatches (Megatron-LM's default); token-level: the sum
 * over the step's valid tokens divided by their global count (Megatron's
 * --calculate-per-token-loss, NeMo-RL's TOKEN_LEVEL); sequence-level: each
 * sample's mean over its valid tokens, summed and divided by the global
 * count of samples with a valid token (NeMo-RL's SEQUENCE_LEVEL). */
typedef enum {
  RC_LOSS_MICROBATCH_MEAN = 0,
  RC_LOSS_TOKEN_LEVEL,
  RC_LOSS_SEQUENCE_LEVEL
} rc_loss_type;

/* --loss-normalize-at: where the global denominators enter the gradient.
 * microbatch: in each microbatch's backward (the counts are taken before
 * the step); finish: the backward accumulates raw sums and the step's
 * finish scales each gradient buffer once (the split path's contract). */
typedef enum { RC_NORMALIZE_AT_MICROBATCH = 0, RC_NORMALIZE_AT_FINISH } rc_normalize_at;

#define RC_MAX_LAYERS 64

typedef struct {
  /* model */
  int vocab, hidden, layers, heads, ffn, seq_len;
  int mtp_depths; /* 0..RC_MAX_MTP_DEPTH */
  bool mtp_repeated_layer;
  double mtp_loss_scale;
  /* --mtp-detach-heads (NeMo-RL's mtp_detach_heads): the MTP loss's
   * gradient reaches the MTP modules only, not the decoder, the embedding
   * or the output head; the MTP modules are then a clip group of their own
   * (--mtp-clip-grad, 0 = off) beside the rest (--clip-grad). */
  bool mtp_detach_heads;
  double mtp_clip_grad;
  int loss_type;         /* rc_loss_type */
  int loss_normalize_at; /* rc_normalize_at */
  char moe_layers[256];  /* comma-separated 0-based decoder layer indices, "" = none */
  bool is_moe_layer[RC_MAX_LAYERS];
  int experts, topk;
  int moe_scoring; /* rc_moe_scoring */
  double moe_aux_loss_coeff, moe_bias_update_rate;
  bool tie_embeddings, te_output_head;
  double rope_theta, norm_eps, init_std;
  /* training */
  int micro_batch, microbatches, steps;
  rc_precision precision;
  rc_precision attention_precision; /* fp32 | bf16: where attention's products round (ops.h) */
  bool grad_accum_fusion;
  rc_policy policy;
  bool no_weight_cache;
  double lr, min_lr, clip_grad, weight_decay, adam_beta1, adam_beta2, adam_eps;
  int warmup;
  double dropout;
  uint64_t seed;
  char data[1024]; /* "" = synthetic corpus */
  /* --epoch-samples: the corpus holds this many samples, read in epochs,
   * each in an order a sampler shuffles by (seed, epoch) (core/data.h);
   * 0 (the default): one endless stream, no epochs. A multiple of the
   * global batch, so that an epoch ends with a step. */
  int64_t epoch_samples;
  int prompt_len;
  double initial_loss_scale, min_loss_scale;
  int loss_scale_window, hysteresis;
  int fp8_amax_history;
  unsigned inject; /* rc_bug bits */
  int world_size;
} rc_config;

/* Per-leg settings: never part of the canonical config. */
typedef struct {
  char out[1024];
  char resume_from[1024];
  char leg[64];
  char device[16]; /* "cpu", "cuda", "auto" */
  int stop_at;     /* 0 = run to steps */
  int save_at[256];
  int n_save_at;
  /* --save-hashes-at: those of save_at whose checkpoint keeps hashes only
   * (io: rc_shard_meta.hashes_only; `run` gives it to its through leg) */
  int save_hashes_at[256];
  int n_save_hashes_at;
  /* --save-deferred-at: those of save_at that stage and hash the state, then
   * wait to be told whether to write the shard (`run` gives its through leg
   * N this way: --through-checkpoints on-demand; core/checkpointing.h) */
  int save_deferred_at[256];
  int n_save_deferred_at;
  char events[1024]; /* --events FILE: the bisect event log */
  int events_from_step;
  bool dry_run;
  bool dry_run_memory; /* --dry-run-memory: print what a leg needs and has, exit */
  int progress;        /* rc_leg_progress: --progress auto | live | plain | off */
  /* data parallel (docs/distributed.md): "auto" (none at world size 1, mpi
   * on the CPU, nccl on CUDA), "none", "single" (one process through the
   * distributed optimizer), "mpi", "nccl" */
  char collectives[16];
  char rendezvous[1024]; /* NCCL: the file carrying the unique id */
} rc_leg_opts;

/* --progress of `train`, the same modes as `run --progress`: auto (live on a
 * terminal, else none), live (one line rewritten in place), plain (one line
 * per step), off. */
typedef enum {
  RC_LEG_PROGRESS_AUTO = 0,
  RC_LEG_PROGRESS_LIVE,
  RC_LEG_PROGRESS_PLAIN,
  RC_LEG_PROGRESS_OFF
} rc_leg_progress;

/* What the Megatron-LM flags of another shape than resumecheck's said
 * (--bf16 for --precision bf16, --global-batch-size for --microbatches,
 * ...): they are resolved into rc_config once every flag is parsed, so
 * their place on the command line does not matter
 * (docs/megatron-flags.md). `cfg` is the config they resolve into; the
 * rest is zero until given. */
typedef struct {
  rc_config *cfg;
  bool bf16, fp16;
  int fp8_format;            /* 0, or 1 + the index of e4m3 | hybrid */
  int64_t global_batch_size; /* --global-batch-size */
  int64_t lr_decay_iters;    /* --lr-decay-iters */
  char moe_layer_freq[256];  /* --moe-layer-freq: N or [0,1,...] */
} rc_megatron_args;

/* Fills cfg with the `tiny` preset (the CI default) and leg with defaults. */
void rc_config_defaults(rc_config *cfg, rc_leg_opts *leg);
/* Parses argv (argv[0] is the subcommand) with rc_flags_parse (base/flags.h).
 * Unknown flags, malformed values and inconsistent settings return
 * RC_EXIT_USAGE naming the flag and reason; --help returns RC_FLAGS_HELP
 * (-1) and --version RC_FLAGS_VERSION (-2), having applied nothing. A
 * non-NULL `leg` accepts the leg flags (--out, --save-at, ...). */
int rc_config_parse(int argc, char **argv, rc_config *cfg, rc_leg_opts *leg, rc_err *err);
/* The flag tables of the config (over cfg), of the Megatron-LM flags of
 * another shape (over meg, whose cfg this sets) and, when leg is non-NULL,
 * of the leg (over leg): fills groups, returns how many (2 or 3). `train`
 * parses and prints its help with them; `run` forwards what they name. */
int rc_config_flag_groups(rc_config *cfg, rc_megatron_args *meg, rc_leg_opts *leg,
                          rc_flag_group groups[3]);
/* The largest --config FILE read (a canonical config is about 1 KiB). */
#define RC_CONFIG_FILE_MAX (1u << 20)
/* `--config FILE`: applies the canonical config in FILE (an object of
 * canonical keys, as `train --dry-run` prints; keys left out keep cfg's
 * value) to cfg, each value through its flag's row (type, range, choices).
 * RC_EXIT_NOINPUT for a file that is missing, unreadable or not a regular
 * file; RC_EXIT_USAGE for one that is not such an object (malformed JSON,
 * an unknown or repeated key, a wrong type, a value out of range). */
int rc_config_read_file(const char *path, rc_config *cfg, rc_err *err);
int rc_config_validate(const rc_config *cfg, rc_err *err);
/* Canonical JSON (sorted keys, no whitespace); caller frees. */
char *rc_config_canonical(const rc_config *cfg);

const char *rc_precision_name(rc_precision p);
const char *rc_policy_name(rc_policy p);

/* Bug catalogue names <-> bits. */
typedef struct {
  rc_bug bit;
  const char *name;
  const char *models;    /* the real-world failure it models */
  const char *signature; /* expected check / step / first quantity */
} rc_bug_info;
const rc_bug_info *rc_bug_catalogue(int *count);

#endif
