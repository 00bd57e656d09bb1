/* config.c — flags, presets, validation and the canonical serialisation of
 * rc_config (see config.h).
 *
 * One table drives parsing, --help and the canonical JSON, so a setting
 * cannot be parsed but forgotten in the config hash. The same table reads
 * `--config FILE` back (each key through its row), and carries Megatron-LM's
 * names of its settings as aliases; Megatron's flags of another shape are a
 * table of their own, resolved into the config after the parse
 * (docs/megatron-flags.md). */
#include "core/config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/ops.h"
#include "base/fsutil.h"
#include "base/json.h"

static const char *const PREC_NAMES[] = {"fp32", "bf16", "fp16", "fp8", NULL};
static const char *const POLICY_NAMES[] = {"legacy",       "untracked-none", "resolve",
                                           "always-false", "persist",        NULL};
static const char *const SCORING_NAMES[] = {"softmax", "sigmoid", NULL};
static const char *const ONOFF_NAMES[] = {"off", "on", NULL};
static const char *const PRESETS[] = {"tiny", "small", "gpu-small", NULL};
static const char *const LOSS_TYPES[] = {"microbatch-mean", "token-level", "sequence-level", NULL};
static const char *const NORMALIZE_AT[] = {"microbatch", "finish", NULL};

static int set_preset(void *cfg, const char *flag, const char *v, rc_err *err);
static int set_inject(void *cfg, const char *flag, const char *v, rc_err *err);

static int set_config_file(void *cfg, const char *flag, const char *v, rc_err *err);

/* A config row: `key` is its canonical config key (NULL: not in the config);
 * A(...) also names the Megatron-LM spelling of the same setting: the same
 * meaning and shape, so the alias is only another name for the row
 * (docs/megatron-flags.md lists each and what was left out, and why). */
#define A(flag, aliases_, key_, kind_, choices_, field, lo, hi, help_)                             \
  {                                                                                                \
    .name = flag, .aliases = aliases_, .kind = kind_, .offset = offsetof(rc_config, field),        \
    .size = sizeof(((rc_config *)0)->field), .min = lo, .max = hi, .choices = choices_,            \
    .help = help_, .key = key_                                                                     \
  }
#define F(flag, key_, kind_, choices_, field, lo, hi, help_)                                       \
  A(flag, NULL, key_, kind_, choices_, field, lo, hi, help_)

/* The order is --help's; the canonical JSON sorts by key. */
static const rc_flag_spec CONFIG_FLAGS[] = {
    {.name = "--preset",
     .kind = RC_FLAG_STRING,
     .choices = PRESETS,
     .set = set_preset,
     .tags = RC_FLAG_FIRST,
     .metavar = "NAME",
     .help = "tiny (default) | small | gpu-small; later flags override"},
    {.name = "--config",
     .kind = RC_FLAG_STRING,
     .set = set_config_file,
     .tags = RC_FLAG_FIRST,
     .conflicts = "--preset",
     .metavar = "FILE",
     .help = "start from the canonical config in FILE (what --dry-run\n"
             "prints; keys it leaves out keep the tiny preset's value);\n"
             "the other flags override it, wherever they are"},
    F("--vocab", "vocab", RC_FLAG_INT, NULL, vocab, 2, 1 << 22, "vocabulary size"),
    A("--hidden", "--hidden-size", "hidden", RC_FLAG_INT, NULL, hidden, 2, 1 << 16,
      "hidden size H"),
    A("--layers", "--num-layers", "layers", RC_FLAG_INT, NULL, layers, 1, RC_MAX_LAYERS,
      "decoder layers L"),
    A("--heads", "--num-attention-heads", "heads", RC_FLAG_INT, NULL, heads, 1, 1024,
      "attention heads (H divisible by heads, head dim even)"),
    A("--ffn", "--ffn-hidden-size", "ffn", RC_FLAG_INT, NULL, ffn, 1, 1 << 18,
      "SwiGLU width F (fc1 is H->2F, fc2 F->H)"),
    A("--seq-len", "--seq-length", "seq_len", RC_FLAG_INT, NULL, seq_len, 2, 1 << 20,
      "sequence length S"),
    A("--mtp-depths", "--mtp-num-layers", "mtp_depths", RC_FLAG_INT, NULL, mtp_depths, 0,
      RC_MAX_MTP_DEPTH, "MTP depths D (0 disables MTP)"),
    A("--mtp-repeated-layer", "--mtp-use-repeated-layer", "mtp_repeated_layer", RC_FLAG_BOOL, NULL,
      mtp_repeated_layer, 0, 0, "one physical MTP layer invoked D times"),
    {.name = "--mtp-separate-layers",
     .kind = RC_FLAG_BOOL,
     .offset = offsetof(rc_config, mtp_repeated_layer),
     .tags = RC_FLAG_CLEARS,
     .conflicts = "--mtp-repeated-layer",
     .help = "one MTP layer per depth (clears --mtp-repeated-layer)"},
    A("--mtp-loss-scale", "--mtp-loss-scaling-factor", "mtp_loss_scale", RC_FLAG_DOUBLE, NULL,
      mtp_loss_scale, 0, 1e6, "lambda"),
    F("--mtp-detach-heads", "mtp_detach_heads", RC_FLAG_BOOL, NULL, mtp_detach_heads, 0, 0,
      "the MTP loss trains the MTP modules only (NeMo-RL's\n"
      "mtp_detach_heads): no MTP gradient reaches the decoder, the\n"
      "embedding or the output head; the MTP modules are a clip\n"
      "group of their own (--mtp-clip-grad)"),
    F("--mtp-clip-grad", "mtp_clip_grad", RC_FLAG_DOUBLE, NULL, mtp_clip_grad, 0, 1e12,
      "with --mtp-detach-heads: the MTP modules' own global-norm\n"
      "clip (0 = off; default 1.0, as --clip-grad's)"),
    F("--loss-type", "loss_type", RC_FLAG_CHOICE, LOSS_TYPES, loss_type, 0, 0,
      "the main loss's denominator: microbatch-mean (default: each\n"
      "microbatch's mean, averaged), token-level (the step's valid\n"
      "tokens), sequence-level (the step's sequences, each its own\n"
      "mean); with the last two the MTP term and the MoE\n"
      "load-balancing loss are over the step's valid tokens"),
    F("--loss-normalize-at", "loss_normalize_at", RC_FLAG_CHOICE, NORMALIZE_AT, loss_normalize_at,
      0, 0,
      "microbatch (default) | finish: with a token- or sequence-level\n"
      "loss, the global denominators enter each microbatch's\n"
      "backward, or the gradients accumulate raw sums scaled once\n"
      "at the step's finish"),
    F("--moe-layers", "moe_layers", RC_FLAG_STRING, NULL, moe_layers, 0, 0,
      "comma-separated 0-based MoE decoder layers, or 'none'"),
    A("--experts", "--num-experts", "experts", RC_FLAG_INT, NULL, experts, 1, 1024, "experts E"),
    A("--topk", "--moe-router-topk", "topk", RC_FLAG_INT, NULL, topk, 1, 1024, "experts per token"),
    A("--moe-scoring", "--moe-router-score-function", "moe_scoring", RC_FLAG_CHOICE, SCORING_NAMES,
      moe_scoring, 0, 0, "softmax | sigmoid (sigmoid: DeepSeek-style expert_bias)"),
    F("--moe-aux-loss-coeff", "moe_aux_loss_coeff", RC_FLAG_DOUBLE, NULL, moe_aux_loss_coeff, 0,
      1e6, "load-balancing loss coefficient"),
    A("--moe-bias-update-rate", "--moe-router-bias-update-rate", "moe_bias_update_rate",
      RC_FLAG_DOUBLE, NULL, moe_bias_update_rate, 0, 1e6,
      "expert_bias += rate * sign(mean(c) - c) per step"),
    F("--tie-embeddings", "tie_embeddings", RC_FLAG_BOOL, NULL, tie_embeddings, 0, 0,
      "output head shares the embedding table"),
    F("--te-output-head", "te_output_head", RC_FLAG_BOOL, NULL, te_output_head, 0, 0,
      "the output head is a TE-style linear with its own flag"),
    A("--rope-theta", "--rotary-base", "rope_theta", RC_FLAG_DOUBLE, NULL, rope_theta, 1, 1e12,
      "RoPE base"),
    A("--norm-eps", "--norm-epsilon", "norm_eps", RC_FLAG_DOUBLE, NULL, norm_eps, 0, 1,
      "RMSNorm epsilon"),
    A("--init-std", "--init-method-std", "init_std", RC_FLAG_DOUBLE, NULL, init_std, 0, 10,
      "weight init standard deviation"),
    A("--micro-batch", "--micro-batch-size", "micro_batch", RC_FLAG_INT, NULL, micro_batch, 1,
      1 << 16, "sequences per microbatch"),
    F("--microbatches", "microbatches", RC_FLAG_INT, NULL, microbatches, 1, 1 << 16,
      "microbatches M per step"),
    A("--steps", "--train-iters", "steps", RC_FLAG_INT, NULL, steps, 1, 1 << 30,
      "training horizon N (also the LR horizon)"),
    F("--precision", "precision", RC_FLAG_CHOICE, PREC_NAMES, precision, 0, 0,
      "fp32 | bf16 | fp16 | fp8: fp8 runs the TE-style linears' GEMMs on e4m3 weights, inputs "
      "and gradients with delayed scaling (docs/fp8.md), the rest in bf16"),
    F("--attention-precision", "attention_precision", RC_FLAG_CHOICE, PREC_NAMES,
      attention_precision, 0, 0,
      "fp32 | bf16: bf16 rounds q, k, v, P, dS and dout at the tensor-core products "
      "(FlashAttention's numerics; head dim a multiple of 16, at most 128)"),
    F("--grad-accum-fusion", "grad_accum_fusion", RC_FLAG_CHOICE, ONOFF_NAMES, grad_accum_fusion, 0,
      0, "on | off: wgrad GEMM straight into main_grad (beta from the flag) or via scratch"),
    F("--first-microbatch-policy", "first_microbatch_policy", RC_FLAG_CHOICE, POLICY_NAMES, policy,
      0, 0, "legacy | untracked-none | resolve | always-false | persist"),
    F("--no-weight-cache", "no_weight_cache", RC_FLAG_BOOL, NULL, no_weight_cache, 0, 0,
      "disable the low-precision weight cache (the seed's 'transpose cache disabled')"),
    F("--lr", "lr", RC_FLAG_DOUBLE, NULL, lr, 0, 1e3, "peak learning rate"),
    F("--min-lr", "min_lr", RC_FLAG_DOUBLE, NULL, min_lr, 0, 1e3,
      "final learning rate of the cosine decay"),
    A("--warmup", "--lr-warmup-iters", "warmup", RC_FLAG_INT, NULL, warmup, 0, 1 << 30,
      "linear warmup steps"),
    F("--clip-grad", "clip_grad", RC_FLAG_DOUBLE, NULL, clip_grad, 0, 1e12,
      "global-norm clip (0 = off)"),
    F("--weight-decay", "weight_decay", RC_FLAG_DOUBLE, NULL, weight_decay, 0, 1e3,
      "AdamW decoupled decay"),
    F("--adam-beta1", "adam_beta1", RC_FLAG_DOUBLE, NULL, adam_beta1, 0, 0.999999, "AdamW beta1"),
    F("--adam-beta2", "adam_beta2", RC_FLAG_DOUBLE, NULL, adam_beta2, 0, 0.999999999,
      "AdamW beta2"),
    F("--adam-eps", "adam_eps", RC_FLAG_DOUBLE, NULL, adam_eps, 0, 1, "AdamW epsilon"),
    A("--dropout", "--hidden-dropout", "dropout", RC_FLAG_DOUBLE, NULL, dropout, 0, 0.95,
      "hidden dropout probability"),
    F("--seed", "seed", RC_FLAG_UINT64, NULL, seed, 0, 0, "seed of init, data and dropout"),
    F("--data", "data", RC_FLAG_STRING, NULL, data, 0, 0,
      "train on the bytes of FILE (default: synthetic corpus)"),
    F("--epoch-samples", "epoch_samples", RC_FLAG_INT64, NULL, epoch_samples, 0, 2147483647,
      "the corpus holds N samples read in epochs, each in an order\n"
      "a sampler shuffles by (seed, epoch), as a DistributedSampler\n"
      "with set_epoch; a multiple of the global batch. 0 (default):\n"
      "one endless stream"),
    F("--prompt-len", "prompt_len", RC_FLAG_INT, NULL, prompt_len, 0, 1 << 20,
      "tokens at the start of each sample masked out of the loss"),
    F("--initial-loss-scale", "initial_loss_scale", RC_FLAG_DOUBLE, NULL, initial_loss_scale, 1,
      1e30, "fp16 dynamic loss scale at start"),
    F("--min-loss-scale", "min_loss_scale", RC_FLAG_DOUBLE, NULL, min_loss_scale, 0, 1e30,
      "fp16 floor"),
    F("--loss-scale-window", "loss_scale_window", RC_FLAG_INT, NULL, loss_scale_window, 1, 1 << 30,
      "fp16: clean steps before the scale doubles"),
    F("--hysteresis", "hysteresis", RC_FLAG_INT, NULL, hysteresis, 1, 1 << 20,
      "fp16: overflows tolerated before the scale halves"),
    A("--fp8-amax-history", "--fp8-amax-history-len", "fp8_amax_history", RC_FLAG_INT, NULL,
      fp8_amax_history, 1, 1024, "fp8 delayed-scaling history length"),
    F("--world-size", "world_size", RC_FLAG_INT, NULL, world_size, 1, 1024,
      "data-parallel ranks (processes; one GPU each with --device cuda)"),
    {.name = "--inject",
     .kind = RC_FLAG_STRING,
     .set = set_inject,
     .tags = RC_FLAG_REPEATABLE,
     .metavar = "NAME",
     .help = "switch on a known resume bug (repeatable; see `resumecheck bugs`)"},
};
#undef F
#undef A

static void apply_preset(rc_config *c, const char *name) {
  /* tiny: what the seed needs — MTP D=2 with a repeated layer, the last
   * decoder layer MoE (so the MTP layer has grouped expert linears), 2
   * microbatches — and fast enough for CI on one core. */
  c->vocab = 256, c->hidden = 64, c->layers = 2, c->heads = 4, c->ffn = 128, c->seq_len = 32;
  c->mtp_depths = 2, c->mtp_repeated_layer = true, c->mtp_loss_scale = 0.1;
  snprintf(c->moe_layers, sizeof c->moe_layers, "1");
  c->experts = 4, c->topk = 2, c->moe_scoring = RC_SCORE_SIGMOID;
  c->micro_batch = 2, c->microbatches = 2;
  c->precision = RC_PREC_BF16, c->attention_precision = RC_PREC_FP32;
  if (!strcmp(name, "small")) {
    c->vocab = 512, c->hidden = 128, c->layers = 4, c->heads = 4, c->ffn = 256, c->seq_len = 64;
    snprintf(c->moe_layers, sizeof c->moe_layers, "3");
    c->experts = 8, c->micro_batch = 4;
  } else if (!strcmp(name, "gpu-small")) {
    c->vocab = 32768, c->hidden = 768, c->layers = 12, c->heads = 12, c->ffn = 2048;
    c->seq_len = 1024, c->micro_batch = 8;
    snprintf(c->moe_layers, sizeof c->moe_layers, "11");
    c->experts = 8;
    /* what PyTorch's bf16 SDPA does, the peer this preset is measured against */
    c->attention_precision = RC_PREC_BF16;
  }
}

void rc_config_defaults(rc_config *c, rc_leg_opts *leg) {
  memset(c, 0, sizeof *c);
  apply_preset(c, "tiny");
  c->moe_aux_loss_coeff = 1e-2, c->moe_bias_update_rate = 1e-3;
  c->rope_theta = 10000.0, c->norm_eps = 1e-5, c->init_std = 0.02;
  c->steps = 10;
  c->grad_accum_fusion = true;
  c->policy = RC_POLICY_RESOLVE;
  c->lr = 3e-3, c->min_lr = 3e-4, c->warmup = 2, c->clip_grad = 1.0, c->weight_decay = 0.1;
  c->mtp_clip_grad = 1.0;
  c->adam_beta1 = 0.9, c->adam_beta2 = 0.95, c->adam_eps = 1e-8;
  c->seed = 1234;
  c->initial_loss_scale = 65536.0, c->min_loss_scale = 1.0, c->loss_scale_window = 1000;
  c->hysteresis = 2, c->fp8_amax_history = 16;
  c->world_size = 1;
  if (leg) {
    memset(leg, 0, sizeof *leg);
    snprintf(leg->device, sizeof leg->device, "cpu");
    snprintf(leg->collectives, sizeof leg->collectives, "auto");
    snprintf(leg->leg, sizeof leg->leg, "train");
  }
}

const char *rc_precision_name(rc_precision p) {
  static const char *names[] = {"fp32", "bf16", "fp16", "fp8"};
  return (unsigned)p < 4 ? names[p] : "?";
}
const char *rc_policy_name(rc_policy p) {
  static const char *names[] = {"legacy", "untracked-none", "resolve", "always-false", "persist"};
  return (unsigned)p < 5 ? names[p] : "?";
}

static const rc_bug_info BUGS[] = {
    {RC_BUG_RNG_NOT_SAVED, "rng-not-saved",
     "the dropout RNG offset is not checkpointed; a resumed run redraws the masks of step 1",
     "RESUME fails; first divergent step K+1, loss first (needs --dropout > 0)"},
    {RC_BUG_DATA_POSITION_NOT_SAVED, "data-position-not-saved",
     "consumed_samples is not checkpointed; a resumed run restarts the data stream",
     "RESUME fails; first divergent step K+1, loss first"},
    {RC_BUG_OPTIMIZER_STEP_NOT_SAVED, "optimizer-step-not-saved",
     "the Adam step count is not checkpointed; bias correction restarts after a resume",
     "RESUME fails; first divergent step K+1, fp_params/fp_optim first (loss equal at K+1)"},
    {RC_BUG_SCHEDULER_NOT_RESTORED, "scheduler-not-restored",
     "the LR scheduler's step count is not restored; warmup starts again",
     "RESUME fails; first divergent step K+1, lr first"},
    {RC_BUG_LOSS_SCALER_NOT_SAVED, "loss-scaler-not-saved",
     "the fp16 loss scaler (scale, growth and hysteresis trackers) restarts from its defaults",
     "RESUME fails; first divergent step K+1, grad_norm and loss_scale first, loss equal (needs "
     "the "
     "scale to move before K, e.g. --loss-scale-window 3)"},
    {RC_BUG_EXPERT_BIAS_NOT_SAVED, "expert-bias-not-saved",
     "the MoE expert_bias (aux-loss-free balancing) is not checkpointed",
     "RESUME fails; first divergent step K+1, loss first (routing changes)"},
    {RC_BUG_AMAX_HISTORY_NOT_SAVED, "amax-history-not-saved",
     "the fp8 amax history is not checkpointed; delayed scaling restarts",
     "RESUME fails; first divergent step K+1, loss first (fp8 only)"},
    {RC_BUG_GRAD_BUFFER_NOT_ZEROED_AFTER_LOAD, "grad-buffer-not-zeroed-after-load",
     "main_grad restored from the checkpoint survives into the first resumed step",
     "RESUME fails; first divergent step K+1, grad_norm first, loss equal"},
    {RC_BUG_MOMENTS_SAVED_IN_BF16, "moments-saved-in-bf16",
     "Adam moments are down-cast to bf16 when saved",
     "RESUME fails; first divergent step K+1, fp_params/fp_optim first, loss equal"},
    {RC_BUG_NONDETERMINISTIC_REDUCTION, "nondeterministic-reduction",
     "the grad-norm reduction sums in an order that varies run to run",
     "A/A fails (exit 2): grad_norm differs between two fresh processes"},
    {RC_BUG_RNG_SAVED_AS_REPLICATED, "rng-saved-as-replicated",
     "a per-rank RNG is saved from rank 0 only and restored on every rank",
     "RESUME fails with world size > 1 and dropout; undetectable at world size 1"},
    {RC_BUG_HYSTERESIS_NOT_SAVED, "hysteresis-not-saved",
     "the fp16 loss scaler's hysteresis tracker is not checkpointed (scale and growth tracker "
     "are); a resumed run restarts it at --hysteresis",
     "RESUME fails when K follows an overflow the hysteresis absorbed (tracker below "
     "--hysteresis); first divergent step K+2 (K+1 overflows again without halving), grad_norm "
     "and loss_scale first; passes at any other K (needs fp16 that overflows: with "
     "--initial-loss-scale 1048576 --loss-scale-window 2 caught at K=3 and 7 only)"},
    {RC_BUG_ADAM_STEP_FROM_ITERATION, "adam-step-from-iteration",
     "on load the Adam step count is recomputed from the iteration instead of read; they differ "
     "once an fp16 step was skipped",
     "RESUME fails once a step was skipped at or before K; first divergent step K+1, fp_params "
     "and fp_optim first (fp_optim alone when K+1 is skipped); passes when no step was skipped "
     "(needs fp16 that overflows: with --initial-loss-scale 1048576 --loss-scale-window 2 caught "
     "at K >= 3)"},
    {RC_BUG_SAVE_DRAWS_RNG, "save-draws-rng",
     "the save draws from the dropout RNG after writing its offset (a temporary name, a sampled "
     "log line): the process that saved continues on another stream than one that loads",
     "RESUME fails; first divergent step K+1, loss first; A/A passes (both saves wrote the same "
     "offset) (needs --dropout > 0)"},
    {RC_BUG_WARMUP_FROM_PROCESS_START, "warmup-from-process-start",
     "after a load the LR schedule counts its warmup from the process's first step, not from "
     "step 0 (the scheduler rebuilt with the resumed iteration as its origin)",
     "RESUME fails; first divergent step K+1, lr first; the census's derived field "
     "scheduler.warmup_origin names it at K"},
    {RC_BUG_MIN_LR_DEFAULT_AFTER_RESUME, "min-lr-default-after-resume",
     "after a load the cosine decay's floor is taken from a default (min_lr 0) instead of "
     "--min-lr (the scheduler rebuilt from defaults)",
     "RESUME fails at the first step after the warmup; lr first; the census's derived field "
     "scheduler.min_lr names it at every K"},
    {RC_BUG_BIAS_CORRECTION_FP32_AFTER_LOAD, "bias-correction-fp32-after-load",
     "after a load Adam's bias corrections are computed in float32 (the step count restored as "
     "a float32 tensor) where a fresh process computes them in double",
     "RESUME fails; first divergent step K+1, fp_params first (loss equal); the census's derived "
     "fields optimizer.bias_correction1/2 name it at K"},
    {RC_BUG_CLIP_GRAD_DEFAULT_AFTER_RESUME, "clip-grad-default-after-resume",
     "after a load the gradient clip's max-norm is taken from a default (1.0) instead of "
     "--clip-grad",
     "RESUME fails (with --clip-grad other than 1); the census's derived field "
     "optimizer.clip_grad names it at K; the trace only once the norm lies between the two"},
    {RC_BUG_LOSS_SCALE_WINDOW_DEFAULT_AFTER_RESUME, "loss-scale-window-default-after-resume",
     "after a load the fp16 loss scaler's growth interval is taken from a default (1000) "
     "instead of --loss-scale-window",
     "RESUME fails at the first growth after K; loss_scale first; the census's derived field "
     "loss_scaler.growth_interval names it at K (needs --precision fp16)"},
    {RC_BUG_EXPERT_BIAS_DEVICE_COPY_STALE, "expert-bias-device-copy-stale-after-load",
     "a load restores the MoE expert_bias on the host but does not refresh its device copy, "
     "which the router reads: the first resumed step routes with the copy from before the load",
     "RESUME fails; first divergent step K+1, loss first; the census's copy field "
     "copy.device.moe.expert_bias.<layer> names it at K (needs sigmoid MoE)"},
    {RC_BUG_HALF_WEIGHT_COPY_NOT_REBUILT, "half-weight-copy-not-rebuilt-after-load",
     "a load marks the 16-bit weight copies current without casting them from the loaded fp32 "
     "weights: the first resumed step's forward uses the copies of the weights from before the "
     "load",
     "RESUME fails; first divergent step K+1, loss first; the census's copy fields "
     "copy.half.model.<param> name it at K (needs bf16 or fp16)"},
    {RC_BUG_CONSUMED_SAMPLES_SAVED_SHORT, "consumed-samples-saved-short",
     "the save writes consumed_samples one microbatch short (a counter read before the step's "
     "last microbatch was counted); the saving process goes on from the right position",
     "RESUME fails; first divergent step K+1, loss first; A/A passes (both saves wrote the same "
     "value); the census says the save wrote data.consumed_samples short, not that the load "
     "lost it"},
    {RC_BUG_EXPERT_BIAS_UPDATE_SKIPPED_AFTER_RESUME, "expert-bias-update-skipped-after-resume",
     "the MoE expert-bias update is skipped on the first step after a load (it reads the "
     "previous step's token counts from a buffer the load leaves empty)",
     "RESUME fails; first divergent step K+2, loss first; the census at K sees nothing; bisect "
     "names step K+1's expert_bias update (needs sigmoid MoE)"},
    {RC_BUG_SAMPLER_EPOCH_NOT_SET_AFTER_RESUME, "sampler-epoch-not-set-after-resume",
     "a resume sets the sampler's epoch only when it resumes inside an epoch: resumed at an "
     "epoch boundary, the sampler stays at epoch 0 and replays that epoch's order at the right "
     "data position",
     "RESUME fails when K ends a data epoch (needs --epoch-samples); first divergent step K+1, "
     "loss first; the census's derived field data.sampler_epoch names it, bisect says same data "
     "position, different samples"},
    {RC_BUG_MTP_DENOMINATOR_FROM_MAIN_AFTER_RESUME, "mtp-denominator-from-main-after-resume",
     "after a load the detached MTP heads' gradient is normalised by the main loss's denominator "
     "(the step's sequences) instead of the step's valid tokens (the MTP scaling rebuilt from the "
     "main loss's)",
     "RESUME fails; first divergent step K+1, mtp_grad_norm first (needs --mtp-detach-heads and "
     "--loss-type sequence-level); the census's derived field mtp.loss_denominator names it at K"},
    {RC_BUG_MOE_AUX_LOSS_MAIN_DENOMINATOR_AFTER_RESUME,
     "moe-aux-loss-main-denominator-after-resume",
     "after a load the MoE load-balancing loss is normalised by the main loss's denominator (the "
     "step's sequences) instead of the step's valid tokens (NeMo-RL's split-path issue, "
     "there in every process)",
     "RESUME fails; first divergent step K+1, grad_norm first (needs --loss-type sequence-level, "
     "MoE layers and --moe-aux-loss-coeff > 0); the census's derived field "
     "moe.aux_loss_denominator names it at K"},
    {RC_BUG_MTP_CLIP_GRAD_DEFAULT_AFTER_RESUME, "mtp-clip-grad-default-after-resume",
     "after a load the detached MTP heads' clip max-norm is taken from a default (1.0) instead "
     "of --mtp-clip-grad",
     "RESUME fails (with --mtp-detach-heads and an --mtp-clip-grad other than 1 that clips); "
     "first divergent step K+1, fp_params first; the census's derived field mtp.clip_grad names "
     "it at K"},
};

const rc_bug_info *rc_bug_catalogue(int *count) {
  *count = (int)(sizeof BUGS / sizeof BUGS[0]);
  return BUGS;
}

/* "5,10" -> sorted unique list. */
static int parse_steps_list(const char *flag, const char *v, int *out, int cap, int *n,
                            rc_err *err) {
  *n = 0;
  const char *p = v;
  while (*p) {
    char *end;
    errno = 0;
    long x = strtol(p, &end, 10);
    if (errno || end == p || x < 1 || x > INT_MAX)
      return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not a list of positive steps", flag, v);
    if (*n == cap) return rc_fail(err, RC_EXIT_USAGE, "%s: more than %d steps", flag, cap);
    int pos = *n;
    while (pos > 0 && out[pos - 1] > x) pos--;
    if (!(pos > 0 && out[pos - 1] == x)) {
      memmove(out + pos + 1, out + pos, (size_t)(*n - pos) * sizeof *out);
      out[pos] = (int)x;
      (*n)++;
    }
    p = end;
    if (*p == ',')
      p++;
    else if (*p)
      return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not a list of positive steps", flag, v);
  }
  return 0;
}

static int parse_moe_layers(rc_config *c, rc_err *err) {
  memset(c->is_moe_layer, 0, sizeof c->is_moe_layer);
  if (!c->moe_layers[0] || !strcmp(c->moe_layers, "none")) {
    c->moe_layers[0] = 0;
    return 0;
  }
  int list[RC_MAX_LAYERS], n = 0;
  /* 0-based layer indices: parse as steps shifted by one */
  char shifted[sizeof c->moe_layers + 64] = "";
  const char *p = c->moe_layers;
  while (*p) {
    char *end;
    long x = strtol(p, &end, 10);
    if (end == p || x < 0 || x >= RC_MAX_LAYERS)
      return rc_fail(err, RC_EXIT_USAGE, "--moe-layers: '%s' is not a list of layer indices",
                     c->moe_layers);
    char buf[16];
    snprintf(buf, sizeof buf, "%s%ld", shifted[0] ? "," : "", x + 1);
    strncat(shifted, buf, sizeof shifted - strlen(shifted) - 1);
    p = end;
    if (*p == ',')
      p++;
    else if (*p)
      return rc_fail(err, RC_EXIT_USAGE, "--moe-layers: '%s' is not a list of layer indices",
                     c->moe_layers);
  }
  if (parse_steps_list("--moe-layers", shifted, list, RC_MAX_LAYERS, &n, err)) return err->code;
  /* canonical form: sorted, unique */
  c->moe_layers[0] = 0;
  for (int i = 0; i < n; i++) {
    c->is_moe_layer[list[i] - 1] = true;
    char buf[16];
    snprintf(buf, sizeof buf, "%s%d", i ? "," : "", list[i] - 1);
    strncat(c->moe_layers, buf, sizeof c->moe_layers - strlen(c->moe_layers) - 1);
  }
  return 0;
}

/* The loss's denominators and the detached MTP heads (docs/design.md
 * §3.5): the combinations whose gradient cannot be normalised correctly,
 * and the injected bugs that need a setting to show. */
static int validate_mtp_lifecycle(const rc_config *c, bool any_moe, rc_err *err) {
  bool global = c->loss_type != RC_LOSS_MICROBATCH_MEAN;
  if (c->loss_normalize_at == RC_NORMALIZE_AT_FINISH && !global)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--loss-normalize-at finish needs --loss-type token-level or sequence-level: "
                   "a microbatch-mean loss divides each microbatch by its own count, which no "
                   "single scale at the finish can give");
  if (c->mtp_detach_heads && c->mtp_depths == 0)
    return rc_fail(err, RC_EXIT_USAGE, "--mtp-detach-heads needs --mtp-depths >= 1");
  if (c->mtp_detach_heads && c->te_output_head)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--mtp-detach-heads and --te-output-head cannot be combined: a detached MTP "
                   "head takes no weight gradient, and a TE-style head's is_first_microbatch "
                   "pairs its first forward call with its last weight gradient");
  if (!c->mtp_detach_heads && c->mtp_clip_grad != 1.0)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--mtp-clip-grad %g needs --mtp-detach-heads: attached MTP heads are clipped "
                   "with the rest (--clip-grad)",
                   c->mtp_clip_grad);
  /* the seed's refusal: attached heads put a token-normalised MTP gradient
   * into the backbone beside the sequence-normalised main loss's */
  if (c->loss_type == RC_LOSS_SEQUENCE_LEVEL && c->mtp_depths > 0 && c->mtp_loss_scale > 0 &&
      !c->mtp_detach_heads)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--loss-type sequence-level with attached MTP heads (--mtp-loss-scale %g "
                   "without --mtp-detach-heads) is refused: the MTP gradient that reaches the "
                   "backbone is normalised by the global valid-token count and the main loss's "
                   "by the global sequence count, and that mixed backbone gradient cannot be "
                   "corrected after split-step accumulation; give --mtp-detach-heads, "
                   "--mtp-loss-scale 0 or --loss-type token-level",
                   c->mtp_loss_scale);
  if (c->loss_type == RC_LOSS_SEQUENCE_LEVEL && c->loss_normalize_at == RC_NORMALIZE_AT_FINISH &&
      any_moe && c->moe_aux_loss_coeff > 0)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--loss-type sequence-level --loss-normalize-at finish with an MoE "
                   "load-balancing loss (--moe-aux-loss-coeff %g) is refused: its raw gradient "
                   "shares the backbone's buffers, which the finish scales by 1/global sequences, "
                   "where it needs 1/global valid tokens; give --loss-normalize-at microbatch or "
                   "--moe-aux-loss-coeff 0",
                   c->moe_aux_loss_coeff);
  if ((c->inject & RC_BUG_MTP_DENOMINATOR_FROM_MAIN_AFTER_RESUME) &&
      (c->loss_type != RC_LOSS_SEQUENCE_LEVEL || !c->mtp_detach_heads))
    return rc_fail(err, RC_EXIT_USAGE,
                   "--inject mtp-denominator-from-main-after-resume needs --loss-type "
                   "sequence-level and --mtp-detach-heads (the MTP term's denominator differs "
                   "from the main loss's only there)");
  if ((c->inject & RC_BUG_MOE_AUX_LOSS_MAIN_DENOMINATOR_AFTER_RESUME) &&
      (c->loss_type != RC_LOSS_SEQUENCE_LEVEL || !any_moe || c->moe_aux_loss_coeff <= 0))
    return rc_fail(err, RC_EXIT_USAGE,
                   "--inject moe-aux-loss-main-denominator-after-resume needs --loss-type "
                   "sequence-level, --moe-layers and --moe-aux-loss-coeff > 0");
  if ((c->inject & RC_BUG_MTP_CLIP_GRAD_DEFAULT_AFTER_RESUME) && !c->mtp_detach_heads)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--inject mtp-clip-grad-default-after-resume needs --mtp-detach-heads");
  return 0;
}

int rc_config_validate(const rc_config *c, rc_err *err) {
  if (c->hidden % c->heads)
    return rc_fail(err, RC_EXIT_USAGE, "--hidden %d is not divisible by --heads %d", c->hidden,
                   c->heads);
  if ((c->hidden / c->heads) % 2)
    return rc_fail(err, RC_EXIT_USAGE, "head dim %d (--hidden / --heads) must be even for RoPE",
                   c->hidden / c->heads);
  if (c->attention_precision != RC_PREC_FP32 && c->attention_precision != RC_PREC_BF16)
    return rc_fail(err, RC_EXIT_USAGE, "--attention-precision must be fp32 or bf16 (got %s)",
                   rc_precision_name(c->attention_precision));
  int head_dim = c->hidden / c->heads;
  if (c->attention_precision == RC_PREC_BF16 && (head_dim % 16 || head_dim > 128))
    return rc_fail(err, RC_EXIT_USAGE,
                   "--attention-precision bf16 needs a head dim (--hidden / --heads) that is a "
                   "multiple of 16 and at most 128 (is %d)",
                   head_dim);
  if (c->mtp_repeated_layer && c->mtp_depths == 0)
    return rc_fail(err, RC_EXIT_USAGE, "--mtp-repeated-layer needs --mtp-depths >= 1");
  if (c->mtp_depths >= c->seq_len)
    return rc_fail(err, RC_EXIT_USAGE, "--mtp-depths %d must be below --seq-len %d", c->mtp_depths,
                   c->seq_len);
  if (c->topk > c->experts)
    return rc_fail(err, RC_EXIT_USAGE, "--topk %d exceeds --experts %d", c->topk, c->experts);
  for (int l = c->layers; l < RC_MAX_LAYERS; l++)
    if (c->is_moe_layer[l])
      return rc_fail(err, RC_EXIT_USAGE,
                     "--moe-layers names layer %d but there are only %d layers (0-based)", l,
                     c->layers);
  if (c->prompt_len >= c->seq_len)
    return rc_fail(err, RC_EXIT_USAGE, "--prompt-len %d leaves no tokens in --seq-len %d",
                   c->prompt_len, c->seq_len);
  if (c->min_lr > c->lr)
    return rc_fail(err, RC_EXIT_USAGE, "--min-lr %g exceeds --lr %g", c->min_lr, c->lr);
  if (c->warmup > c->steps)
    return rc_fail(err, RC_EXIT_USAGE, "--warmup %d exceeds --steps %d", c->warmup, c->steps);
  if (c->data[0] && c->vocab < 256)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--data trains on bytes: --vocab must be at least 256 (is %d)", c->vocab);
  if (c->te_output_head && c->tie_embeddings)
    return rc_fail(err, RC_EXIT_USAGE, "--te-output-head and --tie-embeddings cannot be combined");
  if (c->precision != RC_PREC_FP16 && (c->inject & RC_BUG_LOSS_SCALER_NOT_SAVED))
    return rc_fail(err, RC_EXIT_USAGE, "--inject loss-scaler-not-saved needs --precision fp16");
  if (c->precision != RC_PREC_FP8 && (c->inject & RC_BUG_AMAX_HISTORY_NOT_SAVED))
    return rc_fail(err, RC_EXIT_USAGE, "--inject amax-history-not-saved needs --precision fp8");
  bool any_moe = false;
  for (int l = 0; l < c->layers; l++) any_moe |= c->is_moe_layer[l];
  if (!any_moe && (c->inject & RC_BUG_EXPERT_BIAS_NOT_SAVED))
    return rc_fail(err, RC_EXIT_USAGE, "--inject expert-bias-not-saved needs --moe-layers");
  if ((c->inject & RC_BUG_RNG_NOT_SAVED) && c->dropout == 0)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--inject rng-not-saved needs --dropout > 0 (no RNG is drawn otherwise)");
  if (c->precision != RC_PREC_FP16 && (c->inject & RC_BUG_HYSTERESIS_NOT_SAVED))
    return rc_fail(err, RC_EXIT_USAGE, "--inject hysteresis-not-saved needs --precision fp16");
  if ((c->inject & RC_BUG_SAVE_DRAWS_RNG) && c->dropout == 0)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--inject save-draws-rng needs --dropout > 0 (no RNG is drawn otherwise)");
  int64_t global_batch = (int64_t)c->micro_batch * c->microbatches * c->world_size;
  if (c->epoch_samples % global_batch)
    return rc_fail(
        err, RC_EXIT_USAGE,
        "--epoch-samples %" PRId64 " is not a multiple of the global batch %" PRId64
        " (--micro-batch * --microbatches * --world-size): an epoch must end with a step",
        c->epoch_samples, global_batch);
  if ((c->inject & RC_BUG_SAMPLER_EPOCH_NOT_SET_AFTER_RESUME) && !c->epoch_samples)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--inject sampler-epoch-not-set-after-resume needs --epoch-samples");
  if ((c->inject &
       (RC_BUG_EXPERT_BIAS_DEVICE_COPY_STALE | RC_BUG_EXPERT_BIAS_UPDATE_SKIPPED_AFTER_RESUME)) &&
      (!any_moe || c->moe_scoring != RC_SCORE_SIGMOID))
    return rc_fail(err, RC_EXIT_USAGE,
                   "--inject %s needs --moe-layers with --moe-scoring sigmoid (an expert bias)",
                   (c->inject & RC_BUG_EXPERT_BIAS_DEVICE_COPY_STALE)
                       ? "expert-bias-device-copy-stale-after-load"
                       : "expert-bias-update-skipped-after-resume");
  if ((c->inject & RC_BUG_HALF_WEIGHT_COPY_NOT_REBUILT) && c->precision != RC_PREC_BF16 &&
      c->precision != RC_PREC_FP16)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--inject half-weight-copy-not-rebuilt-after-load needs --precision bf16 or "
                   "fp16 (16-bit weight copies)");
  if (c->precision != RC_PREC_FP16 && (c->inject & RC_BUG_LOSS_SCALE_WINDOW_DEFAULT_AFTER_RESUME))
    return rc_fail(err, RC_EXIT_USAGE,
                   "--inject loss-scale-window-default-after-resume needs --precision fp16");
  if ((long)c->micro_batch * c->seq_len > (1L << 26))
    return rc_fail(err, RC_EXIT_USAGE, "--micro-batch * --seq-len is too large");
  return validate_mtp_lifecycle(c, any_moe, err);
}

static int set_preset(void *cfg, const char *flag, const char *v, rc_err *err) {
  (void)flag, (void)err; /* the row's choices checked v */
  apply_preset(cfg, v);
  return 0;
}

static int set_inject(void *cfg, const char *flag, const char *v, rc_err *err) {
  int n;
  const rc_bug_info *bugs = rc_bug_catalogue(&n);
  for (int k = 0; k < n; k++)
    if (!strcmp(bugs[k].name, v)) return ((rc_config *)cfg)->inject |= bugs[k].bit, 0;
  return rc_fail(err, RC_EXIT_USAGE, "%s: unknown bug '%s' (see `resumecheck bugs`)", flag, v);
}

static int set_save_at(void *leg, const char *flag, const char *v, rc_err *err) {
  rc_leg_opts *l = leg;
  return parse_steps_list(flag, v, l->save_at, 256, &l->n_save_at, err);
}

static int set_save_hashes_at(void *leg, const char *flag, const char *v, rc_err *err) {
  rc_leg_opts *l = leg;
  return parse_steps_list(flag, v, l->save_hashes_at, 256, &l->n_save_hashes_at, err);
}

static int set_save_deferred_at(void *leg, const char *flag, const char *v, rc_err *err) {
  rc_leg_opts *l = leg;
  return parse_steps_list(flag, v, l->save_deferred_at, 256, &l->n_save_deferred_at, err);
}

static int set_dry_run_memory(void *leg, const char *flag, const char *v, rc_err *err) {
  (void)flag, (void)v, (void)err;
  rc_leg_opts *l = leg;
  l->dry_run = l->dry_run_memory = true;
  return 0;
}

static const char *const DEVICES[] = {"cpu", "cuda", "auto", NULL};
static const char *const COLLECTIVES[] = {"auto", "none", "single", "mpi", "nccl", NULL};
static const char *const PROGRESS_NAMES[] = {"auto", "live", "plain", "off", NULL};

#define L(flag, kind_, field, lo, hi, mv, help_)                                                   \
  {                                                                                                \
    .name = flag, .kind = kind_, .offset = offsetof(rc_leg_opts, field),                           \
    .size = sizeof(((rc_leg_opts *)0)->field), .min = lo, .max = hi, .metavar = mv, .help = help_  \
  }

/* Per-leg flags: never part of the canonical config. */
static const rc_flag_spec LEG_FLAGS[] = {
    L("--out", RC_FLAG_STRING, out, 0, 0, "DIR", "output directory (required)"),
    {.name = "--save-at",
     .kind = RC_FLAG_STRING,
     .set = set_save_at,
     .metavar = "K[,K2...]",
     .help = "save a checkpoint after these steps"},
    {.name = "--save-hashes-at",
     .kind = RC_FLAG_STRING,
     .set = set_save_hashes_at,
     .metavar = "K[,...]",
     .help = "of those, the saves that keep hashes only: the shard is\n"
             "built and hashed as a save does, but not written; only\n"
             "manifest.json (\"hashes_only\": true), args.json and\n"
             "COMPLETE. Compared, never loaded (`run` gives its through\n"
             "leg the saves at K < N this way: --through-checkpoints)"},
    {.name = "--save-deferred-at",
     .kind = RC_FLAG_STRING,
     .set = set_save_deferred_at,
     .metavar = "K[,...]",
     .help = "of those, the saves decided late: the state is staged and\n"
             "hashed as --save-hashes-at does, CKPT/iter_K.deferred.json\n"
             "holds the hashes, and the leg waits for one byte on the\n"
             "descriptor RC_DECIDE_FD names: 'H' keeps hashes only, 'F'\n"
             "(or the pipe's end, or no descriptor) writes the shard in\n"
             "full. `run` gives its through leg N this way\n"
             "(--through-checkpoints on-demand). World size 1"},
    L("--stop-at", RC_FLAG_INT, stop_at, 1, INT_MAX, "K",
      "end the process after step K; --steps stays the horizon"),
    L("--resume-from", RC_FLAG_STRING, resume_from, 0, 0, "DIR",
      "continue from DIR = .../ckpt/iter_NNNNNNN"),
    {.name = "--device",
     .kind = RC_FLAG_STRING,
     .offset = offsetof(rc_leg_opts, device),
     .size = sizeof(((rc_leg_opts *)0)->device),
     .choices = DEVICES,
     .metavar = "cpu|cuda|auto",
     .help = "backend (default cpu)"},
    L("--leg", RC_FLAG_STRING, leg, 0, 0, "NAME", "name recorded in args.json"),
    L("--events", RC_FLAG_STRING, events, 0, 0, "FILE",
      "write the bisect event log (docs/events.md)"),
    L("--events-from-step", RC_FLAG_INT, events_from_step, 1, INT_MAX, "S", "log only steps >= S"),
    {.name = "--collectives",
     .kind = RC_FLAG_STRING,
     .offset = offsetof(rc_leg_opts, collectives),
     .size = sizeof(((rc_leg_opts *)0)->collectives),
     .choices = COLLECTIVES,
     .metavar = "KIND",
     .help = "data parallel: auto (none at world size 1, mpi on the CPU,\n"
             "nccl on CUDA) | none | single | mpi | nccl (docs/distributed.md)"},
    L("--rendezvous", RC_FLAG_STRING, rendezvous, 0, 0, "FILE",
      "NCCL: the file carrying the unique id"),
    L("--dry-run", RC_FLAG_BOOL, dry_run, 0, 0, NULL,
      "validate the flags, print the canonical config, exit"),
    {.name = "--dry-run-memory",
     .kind = RC_FLAG_BOOL,
     .set = set_dry_run_memory,
     .help = "print, as JSON, the memory a leg of this config needs\n"
             "and what its device has free (opens the CUDA module\n"
             "for --device cuda), exit"},
    /* `run`'s vocabulary: --progress MODE; a bare --progress (the old
     * spelling) means live */
    {.name = "--progress",
     .kind = RC_FLAG_CHOICE,
     .offset = offsetof(rc_leg_opts, progress),
     .size = sizeof(int),
     .choices = PROGRESS_NAMES,
     .tags = RC_FLAG_OPTIONAL,
     .implicit = "live",
     .metavar = "MODE",
     .help = "auto (default: live on a terminal, else none), live\n"
             "(one line rewritten), plain (a line per step), off;\n"
             "the modes of `run --progress` (bare --progress: live)"},
};
#undef L

/* ---- Megatron-LM flags of another shape (docs/megatron-flags.md) ----
 * Each is what Megatron's flag means, said in resumecheck's terms; where it
 * would contradict a native flag given too, the pair is refused (the row's
 * `conflicts`), whatever the order. */

static int set_untie(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)flag, (void)v, (void)err;
  ((rc_megatron_args *)meg)->cfg->tie_embeddings = false;
  return 0;
}

static int set_no_fusion(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)flag, (void)v, (void)err;
  ((rc_megatron_args *)meg)->cfg->grad_accum_fusion = false;
  return 0;
}

static const char *const FP8_FORMATS[] = {"e4m3", "hybrid", NULL};

static int set_fp8_format(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)flag, (void)err; /* the row's choices checked v */
  ((rc_megatron_args *)meg)->fp8_format = strcmp(v, "e4m3") ? 2 : 1;
  return 0;
}

/* A Megatron choice of which resumecheck implements exactly one value: the
 * flag is accepted with it (a Megatron command line says it), and refused
 * with any other, saying what resumecheck does instead. */
static int only(const char *flag, const char *v, const char *want, const char *why, rc_err *err) {
  if (!strcmp(v, want)) return 0;
  return rc_fail(err, RC_EXIT_USAGE, "%s %s: resumecheck implements only %s (%s)", flag, v, want,
                 why);
}

static int set_lr_decay_style(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)meg;
  return only(flag, v, "cosine", "linear warmup over --warmup, then cosine decay to --min-lr", err);
}

static int set_amax_algo(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)meg;
  return only(flag, v, "max", "the fp8 scale comes from the maximum of the amax history", err);
}

static int set_fp8_recipe(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)meg;
  return only(flag, v, "delayed",
              "scales from an amax history, as Transformer Engine's delayed scaling", err);
}

static int set_normalization(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)meg;
  return only(flag, v, "RMSNorm", "every norm is an RMSNorm", err);
}

static int set_position_embedding(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)meg;
  return only(flag, v, "rope", "positions are rotary, base --rope-theta", err);
}

/* Megatron's --calculate-per-token-loss: the loss is a sum over tokens,
 * divided once by the global token count in finalize_model_grads. */
static int set_per_token_loss(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)flag, (void)v, (void)err;
  rc_config *c = ((rc_megatron_args *)meg)->cfg;
  c->loss_type = RC_LOSS_TOKEN_LEVEL, c->loss_normalize_at = RC_NORMALIZE_AT_FINISH;
  return 0;
}

static int set_mock_data(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)flag, (void)v, (void)err;
  ((rc_megatron_args *)meg)->cfg->data[0] = 0; /* the synthetic corpus */
  return 0;
}

static int set_nothing(void *meg, const char *flag, const char *v, rc_err *err) {
  (void)meg, (void)flag, (void)v, (void)err; /* what the model always is */
  return 0;
}

#define M(flag, kind_, field, lo, hi, conflicts_, mv, help_)                                       \
  {                                                                                                \
    .name = flag, .kind = kind_, .offset = offsetof(rc_megatron_args, field),                      \
    .size = sizeof(((rc_megatron_args *)0)->field), .min = lo, .max = hi, .conflicts = conflicts_, \
    .metavar = mv, .help = help_                                                                   \
  }
#define S(flag, kind_, setter, conflicts_, mv, help_)                                              \
  {                                                                                                \
    .name = flag, .kind = kind_, .set = setter, .conflicts = conflicts_, .metavar = mv,            \
    .help = help_                                                                                  \
  }

static const rc_flag_spec MEGATRON_FLAGS[] = {
    M("--bf16", RC_FLAG_BOOL, bf16, 0, 0, "--precision --fp16", NULL, "= --precision bf16"),
    M("--fp16", RC_FLAG_BOOL, fp16, 0, 0, "--precision", NULL, "= --precision fp16"),
    {.name = "--fp8-format",
     .kind = RC_FLAG_STRING,
     .choices = FP8_FORMATS,
     .set = set_fp8_format,
     .conflicts = "--precision --fp16",
     .metavar = "e4m3|hybrid",
     .help = "with --bf16: = --precision fp8 (TE-style weights in e4m3,\n"
             "delayed scaling; no gradient is quantised, so both formats\n"
             "give the same config)"},
    S("--fp8-recipe", RC_FLAG_STRING, set_fp8_recipe, NULL, "delayed",
      "accepted as delayed only (amax-history scaling)"),
    S("--fp8-amax-compute-algo", RC_FLAG_STRING, set_amax_algo, NULL, "max",
      "accepted as max only (the scale is the history's maximum)"),
    M("--global-batch-size", RC_FLAG_INT64, global_batch_size, 1, 1e12, "--microbatches", "G",
      "= --microbatches G / (--micro-batch * --world-size);\n"
      "refused unless that divides exactly"),
    S("--no-gradient-accumulation-fusion", RC_FLAG_BOOL, set_no_fusion, "--grad-accum-fusion", NULL,
      "= --grad-accum-fusion off"),
    S("--untie-embeddings-and-output-weights", RC_FLAG_BOOL, set_untie, "--tie-embeddings", NULL,
      "the output head has its own table (resumecheck's default;\n"
      "Megatron ties them unless this is given)"),
    S("--lr-decay-style", RC_FLAG_STRING, set_lr_decay_style, NULL, "cosine",
      "accepted as cosine only (the schedule resumecheck has)"),
    M("--lr-decay-iters", RC_FLAG_INT64, lr_decay_iters, 1, 1 << 30, NULL, "N",
      "accepted when N is --steps (the cosine decays over --steps)"),
    S("--normalization", RC_FLAG_STRING, set_normalization, NULL, "RMSNorm",
      "accepted as RMSNorm only"),
    S("--position-embedding-type", RC_FLAG_STRING, set_position_embedding, NULL, "rope",
      "accepted as rope only"),
    M("--moe-layer-freq", RC_FLAG_STRING, moe_layer_freq, 0, 0, "--moe-layers", "N|[..]",
      "N: layers i with i % N == 0 are MoE; [1,0,...]: one 0/1\n"
      "per layer (= --moe-layers; no Python expressions)"),
    S("--moe-grouped-gemm", RC_FLAG_BOOL, set_nothing, NULL, NULL,
      "accepted: the experts' GEMMs are always grouped"),
    S("--mock-data", RC_FLAG_BOOL, set_mock_data, "--data", NULL,
      "train on the synthetic corpus (the default without --data)"),
    S("--swiglu", RC_FLAG_BOOL, set_nothing, NULL, NULL, "accepted: the MLP is always SwiGLU"),
    S("--calculate-per-token-loss", RC_FLAG_BOOL, set_per_token_loss,
      "--loss-type --loss-normalize-at", NULL,
      "= --loss-type token-level --loss-normalize-at finish (the\n"
      "loss summed over tokens, divided once by the global count)"),
    S("--disable-bias-linear", RC_FLAG_BOOL, set_nothing, NULL, NULL,
      "accepted: no linear has a bias"),
};
#undef M
#undef S

/* --moe-layer-freq as Megatron reads it (an int N: layer i is MoE when
 * i % N == 0; a list: one 0/1 per layer) into c->moe_layers. Megatron
 * evaluates Python expressions such as "([1]*3+[0])*2" too; those are
 * refused here rather than half-understood. */
static int moe_layer_freq(const char *v, rc_config *c, rc_err *err) {
  char list[sizeof c->moe_layers] = "";
  const char *p = v;
  int n = 0;
  if (*p == '[') {
    for (p++;; p++) {
      if ((*p != '0' && *p != '1') || (p[1] != ',' && p[1] != ']')) break;
      if (*p == '1') {
        char buf[16];
        snprintf(buf, sizeof buf, "%s%d", list[0] ? "," : "", n);
        strncat(list, buf, sizeof list - strlen(list) - 1);
      }
      n++, p++;
      if (*p == ']') break;
    }
    if (*p != ']' || p[1])
      return rc_fail(err, RC_EXIT_USAGE,
                     "--moe-layer-freq: '%s' is neither N nor a list [0,1,...] of one 0 or 1 per "
                     "layer (Python expressions are not evaluated: write the list out, or give "
                     "--moe-layers)",
                     v);
    if (n != c->layers)
      return rc_fail(err, RC_EXIT_USAGE, "--moe-layer-freq: the list has %d entries for %d layers",
                     n, c->layers);
  } else {
    char *end;
    errno = 0;
    long freq = strtol(v, &end, 10);
    if (errno || end == v || *end || freq < 1 || freq > RC_MAX_LAYERS)
      return rc_fail(err, RC_EXIT_USAGE,
                     "--moe-layer-freq: '%s' is neither N in [1, %d] nor a list [0,1,...] (Python "
                     "expressions are not evaluated: write the list out, or give --moe-layers)",
                     v, RC_MAX_LAYERS);
    for (int l = 0; l < c->layers; l++)
      if (l % freq == 0) {
        char buf[16];
        snprintf(buf, sizeof buf, "%s%d", list[0] ? "," : "", l);
        strncat(list, buf, sizeof list - strlen(list) - 1);
      }
  }
  snprintf(c->moe_layers, sizeof c->moe_layers, "%s", list[0] ? list : "none");
  return 0;
}

/* The Megatron flags' meaning, now that every flag is in: precision from
 * --bf16/--fp16/--fp8-format, microbatches from --global-batch-size, and
 * what --lr-decay-iters asserts. */
static int resolve_megatron(const rc_megatron_args *g, rc_config *c, rc_err *err) {
  if (g->fp8_format && !g->bf16)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--fp8-format %s needs --bf16: resumecheck's fp8 computes the rest in bf16 "
                   "(--precision fp8)",
                   FP8_FORMATS[g->fp8_format - 1]);
  if (g->fp8_format == 2)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--fp8-format hybrid keeps output gradients in E5M2; resumecheck's fp8 is "
                   "Transformer Engine's E4M3 recipe (weights, inputs and output gradients all "
                   "e4m3): use --fp8-format e4m3");
  if (g->fp8_format)
    c->precision = RC_PREC_FP8;
  else if (g->bf16)
    c->precision = RC_PREC_BF16;
  else if (g->fp16)
    c->precision = RC_PREC_FP16;
  if (g->global_batch_size) {
    int64_t per_step = (int64_t)c->micro_batch * c->world_size;
    if (g->global_batch_size % per_step)
      return rc_fail(err, RC_EXIT_USAGE,
                     "--global-batch-size %lld is not a multiple of --micro-batch %d * "
                     "--world-size %d (= %lld sequences per microbatch over all ranks)",
                     (long long)g->global_batch_size, c->micro_batch, c->world_size,
                     (long long)per_step);
    int64_t m = g->global_batch_size / per_step;
    if (m > (1 << 16))
      return rc_fail(err, RC_EXIT_USAGE,
                     "--global-batch-size %lld means %lld microbatches per step, more than %d",
                     (long long)g->global_batch_size, (long long)m, 1 << 16);
    c->microbatches = (int)m;
  }
  if (g->moe_layer_freq[0] && moe_layer_freq(g->moe_layer_freq, c, err)) return err->code;
  if (g->lr_decay_iters && g->lr_decay_iters != c->steps)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--lr-decay-iters %lld is not --steps %d: resumecheck's cosine decays over "
                   "--steps",
                   (long long)g->lr_decay_iters, c->steps);
  return 0;
}

/* ---- --config FILE: the canonical config as the base ---- */

/* The row of canonical key `key`, or NULL. */
static const rc_flag_spec *row_of_key(const char *key) {
  for (size_t k = 0; k < sizeof CONFIG_FLAGS / sizeof CONFIG_FLAGS[0]; k++)
    if (CONFIG_FLAGS[k].key && !strcmp(CONFIG_FLAGS[k].key, key)) return &CONFIG_FLAGS[k];
  return NULL;
}

static const char *json_type_name(const rc_json *v) {
  static const char *const names[] = {"null",     "a bool",   "a number",
                                      "a string", "an array", "an object"};
  return names[v->type];
}

/* One member of the file into c, through its row as the flag would go. */
static int apply_member(rc_config *c, const rc_json *v, rc_err *err) {
  if (!strcmp(v->key, "inject")) {
    if (v->type != RC_JSON_ARR)
      return rc_fail(err, RC_EXIT_USAGE, "\"inject\" is %s, not an array of bug names",
                     json_type_name(v));
    c->inject = 0;
    for (int i = 0; i < v->nkids; i++) {
      if (v->kids[i].type != RC_JSON_STR)
        return rc_fail(err, RC_EXIT_USAGE, "\"inject\"[%d] is %s, not a bug name", i,
                       json_type_name(&v->kids[i]));
      if (set_inject(c, "\"inject\"", v->kids[i].str, err)) return err->code;
    }
    return 0;
  }
  const rc_flag_spec *f = row_of_key(v->key);
  if (!f)
    return rc_fail(err, RC_EXIT_USAGE, "unknown key \"%s\" (not a canonical config key)", v->key);
  char name[96], buf[64];
  snprintf(name, sizeof name, "\"%s\"", v->key);
  bool is_bool = f->kind == RC_FLAG_BOOL || (f->kind == RC_FLAG_CHOICE && f->size == sizeof(bool));
  const char *want = is_bool                     ? "a bool"
                     : f->kind == RC_FLAG_DOUBLE ? "a number"
                     : f->kind == RC_FLAG_INT    ? "an integer"
                     : f->kind == RC_FLAG_UINT64 ? "a non-negative integer"
                     : f->kind == RC_FLAG_INT64  ? "an integer"
                                                 : "a string";
  bool ok = is_bool                     ? v->type == RC_JSON_BOOL
            : f->kind == RC_FLAG_DOUBLE ? v->type == RC_JSON_NUM
            : f->kind == RC_FLAG_INT || f->kind == RC_FLAG_INT64 || f->kind == RC_FLAG_UINT64
                ? v->type == RC_JSON_NUM && v->is_int
                : v->type == RC_JSON_STR;
  if (!ok) {
    /* the JSON reader keeps integers to int64: a larger seed is a double */
    if (f->kind == RC_FLAG_UINT64 && v->type == RC_JSON_NUM && v->num >= 9.2e18)
      return rc_fail(err, RC_EXIT_USAGE,
                     "%s: %.17g is beyond what --config reads (2^63 - 1); give it as %s", name,
                     v->num, f->name);
    return rc_fail(err, RC_EXIT_USAGE, "%s is %s, not %s", name, json_type_name(v), want);
  }
  char *field = (char *)c + f->offset;
  if (f->kind == RC_FLAG_BOOL) {
    *(bool *)field = v->boolean;
    return 0;
  }
  const char *text = buf;
  if (is_bool)
    text = v->boolean ? "on" : "off";
  else if (f->kind == RC_FLAG_DOUBLE)
    snprintf(buf, sizeof buf, "%.17g", v->num); /* %.17g: the same double back */
  else if (f->kind != RC_FLAG_STRING && f->kind != RC_FLAG_CHOICE)
    snprintf(buf, sizeof buf, "%lld", (long long)v->i64);
  else
    text = v->str;
  return rc_flags_apply(f, c, name, text, err);
}

static int set_config_file(void *cfg, const char *flag, const char *path, rc_err *err) {
  char *text = NULL;
  size_t n = 0;
  if (!*path) return rc_fail(err, RC_EXIT_USAGE, "%s: empty path", flag);
  /* sysexits' EX_NOINPUT: an input that does not exist or cannot be read */
  if (access(path, R_OK) != 0)
    return rc_fail(err, RC_EXIT_NOINPUT, "%s %s: %s", flag, path, strerror(errno));
  /* a FIFO or a directory is no input either (66, and opened without
   * blocking); a regular file too big for a config is not one (64) */
  int fd;
  size_t size;
  int rc = rc_open_regular(path, false, &fd, &size, err);
  if (rc) {
    rc_err_prefix(err, "%s", flag);
    return err->code = rc == RC_EXIT_DATAERR ? RC_EXIT_NOINPUT : rc;
  }
  close(fd);
  if (size > RC_CONFIG_FILE_MAX)
    return rc_fail(err, RC_EXIT_USAGE, "%s %s: %zu bytes, more than the %u a config may have", flag,
                   path, size, RC_CONFIG_FILE_MAX);
  rc = rc_read_regular_file(path, RC_CONFIG_FILE_MAX, false, &text, &n, err);
  if (rc) { /* it changed since: grew past the cap (65 from the reader), or went */
    rc_err_prefix(err, "%s", flag);
    return err->code = rc == RC_EXIT_DATAERR ? RC_EXIT_USAGE : rc;
  }
  char jerr[256];
  rc_json *j = rc_json_parse(text, n, jerr, sizeof jerr);
  free(text);
  if (!j) return rc_fail(err, RC_EXIT_USAGE, "%s %s: not JSON: %s", flag, path, jerr);
  rc = 0;
  if (j->type != RC_JSON_OBJ)
    rc = rc_fail(err, RC_EXIT_USAGE, "%s %s: %s, not an object (what `train --dry-run` prints)",
                 flag, path, json_type_name(j));
  for (int i = 0; !rc && i < j->nkids; i++) /* the reader refused repeated keys */
    if ((rc = apply_member(cfg, &j->kids[i], err))) rc_err_prefix(err, "%s %s", flag, path);
  rc_json_free(j);
  return rc;
}

int rc_config_read_file(const char *path, rc_config *cfg, rc_err *err) {
  return set_config_file(cfg, "--config", path, err);
}

int rc_config_flag_groups(rc_config *cfg, rc_megatron_args *meg, rc_leg_opts *leg,
                          rc_flag_group groups[3]) {
  groups[0] = (rc_flag_group){"model and training flags (canonical config keys):", CONFIG_FLAGS,
                              (int)(sizeof CONFIG_FLAGS / sizeof CONFIG_FLAGS[0]), cfg};
  meg->cfg = cfg;
  groups[1] = (rc_flag_group){
      "Megatron-LM flags of another shape (docs/megatron-flags.md):", MEGATRON_FLAGS,
      (int)(sizeof MEGATRON_FLAGS / sizeof MEGATRON_FLAGS[0]), meg};
  if (!leg) return 2;
  groups[2] = (rc_flag_group){"leg flags (not part of the config):", LEG_FLAGS,
                              (int)(sizeof LEG_FLAGS / sizeof LEG_FLAGS[0]), leg};
  return 3;
}

/* What only a leg's flags together with the config can show. */
static int check_leg(const rc_config *c, const rc_leg_opts *leg, rc_err *err) {
  if (leg->stop_at > c->steps)
    return rc_fail(err, RC_EXIT_USAGE, "--stop-at %d is beyond --steps %d", leg->stop_at, c->steps);
  for (int i = 0; i < leg->n_save_at; i++)
    if (leg->save_at[i] > c->steps)
      return rc_fail(err, RC_EXIT_USAGE, "--save-at %d is beyond --steps %d", leg->save_at[i],
                     c->steps);
  /* a hashes-only save is a kind of save: of a step the leg saves */
  for (int i = 0; i < leg->n_save_hashes_at; i++) {
    bool saved = false;
    for (int j = 0; j < leg->n_save_at && !saved; j++)
      saved = leg->save_at[j] == leg->save_hashes_at[i];
    if (!saved)
      return rc_fail(err, RC_EXIT_USAGE,
                     "--save-hashes-at %d is not in --save-at: it names which saves keep hashes"
                     " only, so every step it lists must be saved",
                     leg->save_hashes_at[i]);
  }
  for (int i = 0; i < leg->n_save_deferred_at; i++) {
    bool saved = false, hashes = false;
    for (int j = 0; j < leg->n_save_at; j++)
      saved = saved || leg->save_at[j] == leg->save_deferred_at[i];
    for (int j = 0; j < leg->n_save_hashes_at; j++)
      hashes = hashes || leg->save_hashes_at[j] == leg->save_deferred_at[i];
    if (!saved || hashes)
      return rc_fail(err, RC_EXIT_USAGE, "--save-deferred-at %d %s", leg->save_deferred_at[i],
                     hashes ? "is in --save-hashes-at too: a save is decided late or keeps hashes"
                              " only, not both"
                            : "is not in --save-at: it names which saves are decided late, so "
                              "every step it lists must be saved");
  }
  return 0;
}

/* The flags (rc_flags_parse: presets first, a flag given twice refused —
 * `--steps 8 --steps 6` silently taking the last hides a typo or a pasted
 * command line — --inject repeatable), then what the settings must agree on. */
int rc_config_parse(int argc, char **argv, rc_config *c, rc_leg_opts *leg, rc_err *err) {
  rc_flag_group groups[3];
  rc_megatron_args meg = {0};
  rc_flag_cmd cmd = {.groups = groups, .n_groups = rc_config_flag_groups(c, &meg, leg, groups)};
  int rc = rc_flags_parse(&cmd, argc, argv, NULL, err);
  if (rc) return rc;
  if (resolve_megatron(&meg, c, err)) return err->code;
  if (parse_moe_layers(c, err)) return err->code;
  if (rc_config_validate(c, err)) return err->code;
  return leg ? check_leg(c, leg, err) : 0;
}

/* Keys added after checkpoints were written, left out of the canonical
 * config at their defaults so that those checkpoints' config hash (in every
 * shard) stays the same. */
static bool left_out_at_default(const rc_config *c, const char *key) {
  if (!strcmp(key, "epoch_samples")) return c->epoch_samples == 0;
  if (!strcmp(key, "mtp_detach_heads")) return !c->mtp_detach_heads;
  if (!strcmp(key, "mtp_clip_grad")) return c->mtp_clip_grad == 1.0;
  if (!strcmp(key, "loss_type")) return c->loss_type == RC_LOSS_MICROBATCH_MEAN;
  if (!strcmp(key, "loss_normalize_at")) return c->loss_normalize_at == RC_NORMALIZE_AT_MICROBATCH;
  return false;
}

char *rc_config_canonical(const rc_config *c) {
  /* keys sorted: collect canonical flags, sort by key, then the inject list */
  const rc_flag_spec *specs[sizeof CONFIG_FLAGS / sizeof CONFIG_FLAGS[0]];
  int n = 0;
  for (size_t k = 0; k < sizeof CONFIG_FLAGS / sizeof CONFIG_FLAGS[0]; k++)
    if (CONFIG_FLAGS[k].key) specs[n++] = &CONFIG_FLAGS[k];
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(specs[j - 1]->key, specs[j]->key) > 0; j--) {
      const rc_flag_spec *t = specs[j];
      specs[j] = specs[j - 1], specs[j - 1] = t;
    }
  rc_jw w;
  rc_jw_init(&w, false);
  rc_jw_obj_begin(&w);
  bool inject_written = false;
  for (int i = 0; i < n; i++) {
    const rc_flag_spec *f = specs[i];
    if (!inject_written && strcmp(f->key, "inject") > 0) {
      rc_jw_key(&w, "inject");
      rc_jw_arr_begin(&w);
      int nb;
      const rc_bug_info *bugs = rc_bug_catalogue(&nb);
      for (int b = 0; b < nb; b++)
        if (c->inject & bugs[b].bit) rc_jw_str(&w, bugs[b].name);
      rc_jw_arr_end(&w);
      inject_written = true;
    }
    const char *field = (const char *)c + f->offset;
    /* a key added after checkpoints were written is left out at its
     * default, so that their config hash (in every shard) stays the same */
    if (left_out_at_default(c, f->key)) continue;
    rc_jw_key(&w, f->key);
    switch (f->kind) {
    case RC_FLAG_BOOL:
      rc_jw_bool(&w, *(const bool *)field);
      break;
    case RC_FLAG_INT:
      rc_jw_int(&w, *(const int *)field);
      break;
    case RC_FLAG_DOUBLE:
      rc_jw_double(&w, *(const double *)field);
      break;
    case RC_FLAG_STRING:
      rc_jw_str(&w, field);
      break;
    case RC_FLAG_UINT64:
      rc_jw_uint(&w, *(const uint64_t *)field);
      break;
    case RC_FLAG_CHOICE: /* on | off is a bool; the others are named */
      if (f->size == sizeof(bool))
        rc_jw_bool(&w, *(const bool *)field);
      else
        rc_jw_str(&w, f->choices[*(const int *)field]);
      break;
    case RC_FLAG_INT64: /* no config row is one */
      rc_jw_int(&w, *(const int64_t *)field);
      break;
    }
  }
  rc_jw_obj_end(&w);
  char *s = w.buf; /* ownership passes to the caller */
  return s;
}
