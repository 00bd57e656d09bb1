/* config.c — flags, presets, validation and the canonical serialisation of
 * rc_config (see config.h).
 *
 * One table drives parsing, --help and the canonical JSON, so a setting
 * cannot be parsed but forgotten in the config hash. */
#include "core/config.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "base/json.h"

typedef enum { K_INT, K_DOUBLE, K_BOOL, K_ONOFF, K_STR, K_U64, K_PREC, K_POLICY, K_SCORING } kind;

typedef struct {
  const char *flag; /* "--hidden" */
  const char *key;  /* canonical key, NULL = not canonical */
  kind kind;
  size_t offset;
  size_t size; /* for K_STR */
  double min, max;
  const char *help;
} flag_spec;

#define F(flag, key, kind, field, min, max, help)                                                  \
  { flag, key, kind, offsetof(rc_config, field), sizeof(((rc_config *)0)->field), min, max, help }

static const flag_spec FLAGS[] = {
    F("--vocab", "vocab", K_INT, vocab, 2, 1 << 22, "vocabulary size"),
    F("--hidden", "hidden", K_INT, hidden, 2, 1 << 16, "hidden size H"),
    F("--layers", "layers", K_INT, layers, 1, RC_MAX_LAYERS, "decoder layers L"),
    F("--heads", "heads", K_INT, heads, 1, 1024,
      "attention heads (H divisible by heads, head dim even)"),
    F("--ffn", "ffn", K_INT, ffn, 1, 1 << 18, "SwiGLU width F (fc1 is H->2F, fc2 F->H)"),
    F("--seq-len", "seq_len", K_INT, seq_len, 2, 1 << 20, "sequence length S"),
    F("--mtp-depths", "mtp_depths", K_INT, mtp_depths, 0, RC_MAX_MTP_DEPTH,
      "MTP depths D (0 disables MTP)"),
    F("--mtp-repeated-layer", "mtp_repeated_layer", K_BOOL, mtp_repeated_layer, 0, 0,
      "one physical MTP layer invoked D times"),
    F("--mtp-separate-layers", NULL, K_BOOL, mtp_repeated_layer, 0, 0,
      "one MTP layer per depth (clears --mtp-repeated-layer)"),
    F("--mtp-loss-scale", "mtp_loss_scale", K_DOUBLE, mtp_loss_scale, 0, 1e6, "lambda"),
    F("--moe-layers", "moe_layers", K_STR, moe_layers, 0, 0,
      "comma-separated 0-based MoE decoder layers, or 'none'"),
    F("--experts", "experts", K_INT, experts, 1, 1024, "experts E"),
    F("--topk", "topk", K_INT, topk, 1, 1024, "experts per token"),
    F("--moe-scoring", "moe_scoring", K_SCORING, moe_scoring, 0, 0,
      "softmax | sigmoid (sigmoid: DeepSeek-style expert_bias)"),
    F("--moe-aux-loss-coeff", "moe_aux_loss_coeff", K_DOUBLE, moe_aux_loss_coeff, 0, 1e6,
      "load-balancing loss coefficient"),
    F("--moe-bias-update-rate", "moe_bias_update_rate", K_DOUBLE, moe_bias_update_rate, 0, 1e6,
      "expert_bias += rate * sign(mean(c) - c) per step"),
    F("--tie-embeddings", "tie_embeddings", K_BOOL, tie_embeddings, 0, 0,
      "output head shares the embedding table"),
    F("--te-output-head", "te_output_head", K_BOOL, te_output_head, 0, 0,
      "the output head is a TE-style linear with its own flag"),
    F("--rope-theta", "rope_theta", K_DOUBLE, rope_theta, 1, 1e12, "RoPE base"),
    F("--norm-eps", "norm_eps", K_DOUBLE, norm_eps, 0, 1, "RMSNorm epsilon"),
    F("--init-std", "init_std", K_DOUBLE, init_std, 0, 10, "weight init standard deviation"),
    F("--micro-batch", "micro_batch", K_INT, micro_batch, 1, 1 << 16, "sequences per microbatch"),
    F("--microbatches", "microbatches", K_INT, microbatches, 1, 1 << 16, "microbatches M per step"),
    F("--steps", "steps", K_INT, steps, 1, 1 << 30, "training horizon N (also the LR horizon)"),
    F("--precision", "precision", K_PREC, precision, 0, 0, "fp32 | bf16 | fp16 | fp8"),
    F("--attention-precision", "attention_precision", K_PREC, attention_precision, 0, 0,
      "fp32 | bf16: bf16 rounds q, k, v, P, dS and dout at the tensor-core products "
      "(FlashAttention's numerics; head dim a multiple of 16, at most 128)"),
    F("--grad-accum-fusion", "grad_accum_fusion", K_ONOFF, grad_accum_fusion, 0, 0,
      "on | off: wgrad GEMM straight into main_grad (beta from the flag) or via scratch"),
    F("--first-microbatch-policy", "first_microbatch_policy", K_POLICY, policy, 0, 0,
      "legacy | untracked-none | resolve | always-false | persist"),
    F("--no-weight-cache", "no_weight_cache", K_BOOL, no_weight_cache, 0, 0,
      "disable the low-precision weight cache (the seed's 'transpose cache disabled')"),
    F("--lr", "lr", K_DOUBLE, lr, 0, 1e3, "peak learning rate"),
    F("--min-lr", "min_lr", K_DOUBLE, min_lr, 0, 1e3, "final learning rate of the cosine decay"),
    F("--warmup", "warmup", K_INT, warmup, 0, 1 << 30, "linear warmup steps"),
    F("--clip-grad", "clip_grad", K_DOUBLE, clip_grad, 0, 1e12, "global-norm clip (0 = off)"),
    F("--weight-decay", "weight_decay", K_DOUBLE, weight_decay, 0, 1e3, "AdamW decoupled decay"),
    F("--adam-beta1", "adam_beta1", K_DOUBLE, adam_beta1, 0, 0.999999, "AdamW beta1"),
    F("--adam-beta2", "adam_beta2", K_DOUBLE, adam_beta2, 0, 0.999999999, "AdamW beta2"),
    F("--adam-eps", "adam_eps", K_DOUBLE, adam_eps, 0, 1, "AdamW epsilon"),
    F("--dropout", "dropout", K_DOUBLE, dropout, 0, 0.95, "hidden dropout probability"),
    F("--seed", "seed", K_U64, seed, 0, 0, "seed of init, data and dropout"),
    F("--data", "data", K_STR, data, 0, 0,
      "train on the bytes of FILE (default: synthetic corpus)"),
    F("--prompt-len", "prompt_len", K_INT, prompt_len, 0, 1 << 20,
      "tokens at the start of each sample masked out of the loss"),
    F("--initial-loss-scale", "initial_loss_scale", K_DOUBLE, initial_loss_scale, 1, 1e30,
      "fp16 dynamic loss scale at start"),
    F("--min-loss-scale", "min_loss_scale", K_DOUBLE, min_loss_scale, 0, 1e30, "fp16 floor"),
    F("--loss-scale-window", "loss_scale_window", K_INT, loss_scale_window, 1, 1 << 30,
      "fp16: clean steps before the scale doubles"),
    F("--hysteresis", "hysteresis", K_INT, hysteresis, 1, 1 << 20,
      "fp16: overflows tolerated before the scale halves"),
    F("--fp8-amax-history", "fp8_amax_history", K_INT, fp8_amax_history, 1, 1024,
      "fp8 delayed-scaling history length"),
    F("--world-size", "world_size", K_INT, world_size, 1, 1024,
      "data-parallel ranks (processes; one GPU each with --device cuda)"),
};
#undef F

static const char *PRESETS[] = {"tiny", "small", "gpu-small"};

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
};

const rc_bug_info *rc_bug_catalogue(int *count) {
  *count = (int)(sizeof BUGS / sizeof BUGS[0]);
  return BUGS;
}

static int parse_int(const char *flag, const char *v, double lo, double hi, int *out, rc_err *err) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end)
    return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not an integer", flag, v);
  if (x < lo || x > hi)
    return rc_fail(err, RC_EXIT_USAGE, "%s: %ld is out of range [%.0f, %.0f]", flag, x, lo, hi);
  *out = (int)x;
  return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out,
                        rc_err *err) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || x != x)
    return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not a number", flag, v);
  if (x < lo || x > hi)
    return rc_fail(err, RC_EXIT_USAGE, "%s: %g is out of range [%g, %g]", flag, x, lo, hi);
  *out = x;
  return 0;
}

static int parse_enum(const char *flag, const char *v, const char *const *names, int n, int *out,
                      rc_err *err) {
  for (int i = 0; i < n; i++)
    if (!strcmp(v, names[i])) return *out = i, 0;
  char list[256] = "";
  for (int i = 0; i < n; i++) {
    strncat(list, names[i], sizeof list - strlen(list) - 1);
    if (i + 1 < n) strncat(list, " | ", sizeof list - strlen(list) - 1);
  }
  return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not one of %s", flag, v, list);
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

static int copy_str(const char *flag, const char *v, char *dst, size_t cap, rc_err *err) {
  if (strlen(v) >= cap)
    return rc_fail(err, RC_EXIT_USAGE, "%s: value longer than %zu bytes", flag, cap - 1);
  memcpy(dst, v, strlen(v) + 1);
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
  if ((long)c->micro_batch * c->seq_len > (1L << 26))
    return rc_fail(err, RC_EXIT_USAGE, "--micro-batch * --seq-len is too large");
  return 0;
}

static const char *PREC_NAMES[] = {"fp32", "bf16", "fp16", "fp8"};
static const char *POLICY_NAMES[] = {"legacy", "untracked-none", "resolve", "always-false",
                                     "persist"};
static const char *SCORING_NAMES[] = {"softmax", "sigmoid"};
static const char *ONOFF_NAMES[] = {"off", "on"};

static const char *PROGRESS_NAMES[] = {"auto", "live", "plain", "off"};

int rc_config_parse(int argc, char **argv, rc_config *c, rc_leg_opts *leg, rc_err *err) {
  /* presets first, wherever they appear, so explicit flags override them */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--preset")) continue;
    if (i + 1 >= argc) return rc_fail(err, RC_EXIT_USAGE, "--preset needs a value");
    int which;
    if (parse_enum("--preset", argv[i + 1], PRESETS, 3, &which, err)) return err->code;
    apply_preset(c, PRESETS[which]);
  }
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return -1;
  /* A flag given twice is refused: `--steps 8 --steps 6` silently taking the
   * last hides a typo or a pasted command line. --inject is repeatable (each
   * names another bug). Only flags are recorded, never their values. */
  const char *seen[256];
  int n_seen = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--inject")) {
      for (int j = 0; j < n_seen; j++)
        if (!strcmp(seen[j], a))
          return rc_fail(err, RC_EXIT_USAGE, "%s given twice: give each flag once", a);
      if (n_seen < (int)(sizeof seen / sizeof seen[0])) seen[n_seen++] = a;
      bool rep_layer = !strcmp(a, "--mtp-repeated-layer"),
           sep = !strcmp(a, "--mtp-separate-layers");
      for (int j = 0; j < n_seen - 1 && (rep_layer || sep); j++)
        if (!strcmp(seen[j], rep_layer ? "--mtp-separate-layers" : "--mtp-repeated-layer"))
          return rc_fail(err, RC_EXIT_USAGE,
                         "--mtp-repeated-layer and --mtp-separate-layers contradict each other");
    }
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE                                                                                 \
  if (!v) return rc_fail(err, RC_EXIT_USAGE, "%s needs a value", a);                               \
  i++;
    if (!strcmp(a, "--preset")) {
      i++;
      continue;
    }
    if (!strcmp(a, "--inject")) {
      NEED_VALUE;
      int n;
      const rc_bug_info *bugs = rc_bug_catalogue(&n);
      int k = 0;
      while (k < n && strcmp(bugs[k].name, v)) k++;
      if (k == n)
        return rc_fail(err, RC_EXIT_USAGE, "--inject: unknown bug '%s' (see `resumecheck bugs`)",
                       v);
      c->inject |= bugs[k].bit;
      continue;
    }
    if (leg && !strcmp(a, "--out")) {
      NEED_VALUE;
      if (copy_str(a, v, leg->out, sizeof leg->out, err)) return err->code;
      continue;
    }
    if (leg && !strcmp(a, "--resume-from")) {
      NEED_VALUE;
      if (copy_str(a, v, leg->resume_from, sizeof leg->resume_from, err)) return err->code;
      continue;
    }
    if (leg && !strcmp(a, "--leg")) {
      NEED_VALUE;
      if (copy_str(a, v, leg->leg, sizeof leg->leg, err)) return err->code;
      continue;
    }
    if (leg && !strcmp(a, "--device")) {
      NEED_VALUE;
      static const char *devs[] = {"cpu", "cuda", "auto"};
      int d;
      if (parse_enum(a, v, devs, 3, &d, err)) return err->code;
      snprintf(leg->device, sizeof leg->device, "%s", devs[d]);
      continue;
    }
    if (leg && !strcmp(a, "--stop-at")) {
      NEED_VALUE;
      if (parse_int(a, v, 1, INT_MAX, &leg->stop_at, err)) return err->code;
      continue;
    }
    if (leg && !strcmp(a, "--save-at")) {
      NEED_VALUE;
      if (parse_steps_list(a, v, leg->save_at, 256, &leg->n_save_at, err)) return err->code;
      continue;
    }
    if (leg && !strcmp(a, "--save-hashes-at")) {
      NEED_VALUE;
      if (parse_steps_list(a, v, leg->save_hashes_at, 256, &leg->n_save_hashes_at, err))
        return err->code;
      continue;
    }
    if (leg && !strcmp(a, "--events")) {
      NEED_VALUE;
      if (copy_str(a, v, leg->events, sizeof leg->events, err)) return err->code;
      continue;
    }
    if (leg && !strcmp(a, "--events-from-step")) {
      NEED_VALUE;
      if (parse_int(a, v, 1, INT_MAX, &leg->events_from_step, err)) return err->code;
      continue;
    }
    if (leg && !strcmp(a, "--collectives")) {
      NEED_VALUE;
      static const char *kinds[] = {"auto", "none", "single", "mpi", "nccl"};
      int d;
      if (parse_enum(a, v, kinds, 5, &d, err)) return err->code;
      snprintf(leg->collectives, sizeof leg->collectives, "%s", kinds[d]);
      continue;
    }
    if (leg && !strcmp(a, "--rendezvous")) {
      NEED_VALUE;
      if (copy_str(a, v, leg->rendezvous, sizeof leg->rendezvous, err)) return err->code;
      continue;
    }
    if (leg && !strcmp(a, "--dry-run")) {
      leg->dry_run = true;
      continue;
    }
    if (leg && !strcmp(a, "--dry-run-memory")) {
      leg->dry_run = leg->dry_run_memory = true;
      continue;
    }
    if (leg && !strcmp(a, "--progress")) {
      /* `run`'s vocabulary: --progress MODE; a bare --progress (the old
       * spelling) means live */
      int mode = RC_LEG_PROGRESS_LIVE;
      if (v && v[0] != '-') {
        if (parse_enum(a, v, PROGRESS_NAMES, 4, &mode, err)) return err->code;
        i++;
      }
      leg->progress = mode;
      continue;
    }
    const flag_spec *f = NULL;
    for (size_t k = 0; k < sizeof FLAGS / sizeof FLAGS[0]; k++)
      if (!strcmp(a, FLAGS[k].flag)) f = &FLAGS[k];
    if (!f) return rc_fail(err, RC_EXIT_USAGE, "unknown flag '%s' (see --help)", a);
    char *field = (char *)c + f->offset;
    int e = 0, tmp;
    switch (f->kind) {
    case K_BOOL:
      *(bool *)field = strcmp(a, "--mtp-separate-layers") != 0;
      break;
    case K_INT:
      NEED_VALUE;
      e = parse_int(a, v, f->min, f->max, (int *)field, err);
      break;
    case K_DOUBLE:
      NEED_VALUE;
      e = parse_double(a, v, f->min, f->max, (double *)field, err);
      break;
    case K_STR:
      NEED_VALUE;
      e = copy_str(a, v, field, f->size, err);
      break;
    case K_U64: {
      NEED_VALUE;
      char *end;
      errno = 0;
      unsigned long long x = strtoull(v, &end, 10);
      if (errno || end == v || *end || v[0] == '-')
        return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not a non-negative integer", a, v);
      *(uint64_t *)field = x;
      break;
    }
    case K_ONOFF:
      NEED_VALUE;
      e = parse_enum(a, v, ONOFF_NAMES, 2, &tmp, err);
      *(bool *)field = tmp;
      break;
    case K_PREC:
      NEED_VALUE;
      e = parse_enum(a, v, PREC_NAMES, 4, &tmp, err);
      *(rc_precision *)field = tmp;
      break;
    case K_POLICY:
      NEED_VALUE;
      e = parse_enum(a, v, POLICY_NAMES, 5, &tmp, err);
      *(rc_policy *)field = tmp;
      break;
    case K_SCORING:
      NEED_VALUE;
      e = parse_enum(a, v, SCORING_NAMES, 2, &tmp, err);
      *(int *)field = tmp;
      break;
    }
    if (e) return e;
#undef NEED_VALUE
  }
  if (parse_moe_layers(c, err)) return err->code;
  if (rc_config_validate(c, err)) return err->code;
  if (leg) {
    if (leg->stop_at > c->steps)
      return rc_fail(err, RC_EXIT_USAGE, "--stop-at %d is beyond --steps %d", leg->stop_at,
                     c->steps);
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
  }
  return 0;
}

char *rc_config_canonical(const rc_config *c) {
  /* keys sorted: collect canonical flags, sort by key, then the inject list */
  const flag_spec *specs[sizeof FLAGS / sizeof FLAGS[0]];
  int n = 0;
  for (size_t k = 0; k < sizeof FLAGS / sizeof FLAGS[0]; k++)
    if (FLAGS[k].key) specs[n++] = &FLAGS[k];
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(specs[j - 1]->key, specs[j]->key) > 0; j--) {
      const flag_spec *t = specs[j];
      specs[j] = specs[j - 1], specs[j - 1] = t;
    }
  rc_jw w;
  rc_jw_init(&w, false);
  rc_jw_obj_begin(&w);
  bool inject_written = false;
  for (int i = 0; i < n; i++) {
    const flag_spec *f = specs[i];
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
    rc_jw_key(&w, f->key);
    switch (f->kind) {
    case K_BOOL:
    case K_ONOFF:
      rc_jw_bool(&w, *(const bool *)field);
      break;
    case K_INT:
      rc_jw_int(&w, *(const int *)field);
      break;
    case K_DOUBLE:
      rc_jw_double(&w, *(const double *)field);
      break;
    case K_STR:
      rc_jw_str(&w, field);
      break;
    case K_U64:
      rc_jw_uint(&w, *(const uint64_t *)field);
      break;
    case K_PREC:
      rc_jw_str(&w, PREC_NAMES[*(const rc_precision *)field]);
      break;
    case K_POLICY:
      rc_jw_str(&w, POLICY_NAMES[*(const rc_policy *)field]);
      break;
    case K_SCORING:
      rc_jw_str(&w, SCORING_NAMES[*(const int *)field]);
      break;
    }
  }
  rc_jw_obj_end(&w);
  char *s = w.buf; /* ownership passes to the caller */
  return s;
}

void rc_config_print_help(const char *prog, const char *summary) {
  printf("usage: %s [flags]\n\n%s\n\nmodel and training flags (canonical config keys):\n", prog,
         summary);
  printf("  %-28s %s\n", "--preset NAME",
         "tiny (default) | small | gpu-small; later flags override");
  for (size_t k = 0; k < sizeof FLAGS / sizeof FLAGS[0]; k++) {
    const flag_spec *f = &FLAGS[k];
    char left[64];
    const char *arg = f->kind == K_BOOL ? "" : " V";
    snprintf(left, sizeof left, "%s%s", f->flag, arg);
    printf("  %-28s %s\n", left, f->help);
  }
  printf("  %-28s %s\n", "--inject NAME",
         "switch on a known resume bug (repeatable; see `resumecheck bugs`)");
}
