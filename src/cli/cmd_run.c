/* cmd_run.c — `resumecheck run`: parses the flags it owns, forwards every
 * other flag verbatim to each `train` leg, then plans, prepares, runs and
 * judges the legs (harness/run.h) and writes the reports (harness/report.h).
 * The exit code is the verdict (docs/design.md §10). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "cli/cli.h"
#include "core/config.h"
#include "harness/report.h"
#include "harness/run.h"
#include "harness/run_signal.h"
#include "io/layout.h"

static const char USAGE[] =
    "usage: resumecheck run [core flags] --steps N --save-at K[,K2...]|every|auto --out DIR\n"
    "                       [--aa [M]] [--noise bytes|calibrated] [--resumes P]\n"
    "                       [--confirm-resumes C] [--jobs J] [--json FILE] [--junit FILE]\n"
    "                       [--summary-md FILE] [--plot FILE.svg] [--confirm-arm]\n"
    "                       [--git-bisect] [--keep-going] [--overwrite]\n"
    "                       [--trainer resumecheck|exec --train-cmd TEMPLATE]\n"
    "                       [--progress auto|live|plain|off] [--leg-timeout SECONDS]\n"
    "                       [--gpu-scheduling critical-first|shared]\n"
    "                       [--through-checkpoints full|hashes|hashes-all|on-demand|auto]\n"
    "\n"
    "Runs the legs of a checkpoint-resume check, each a separate process with its own\n"
    "directory DIR/<leg>/ and log DIR/<leg>/log.txt, and compares their state byte for byte:\n"
    "  through    train 1..N, saving at every K and at N\n"
    "  save       train 1..K (same LR horizon N), saving at K\n"
    "  resume@K   load save@K (or the previous chain link), train to the next K or N\n"
    "  aa         (--aa) a second through, for A/A at N (--aa M: M of them, aa..aaM)\n"
    "Checks: A/A@K = through@K vs save@K; RESUME@K→M = through@M vs the leg that resumed at\n"
    "K; and beside each, the traces: first divergent step and columns.\n\n";

static const char EPILOGUE[] =
    "\n"
    "Every other flag (--preset, --precision, --mtp-depths, --first-microbatch-policy,\n"
    "--grad-accum-fusion, --inject, --seed, ...; `--flag value` or `--flag=value`) is passed\n"
    "verbatim to each `resumecheck train` leg and checked with `train --dry-run` before any\n"
    "leg starts; Megatron-LM's names included (docs/megatron-flags.md). --config FILE\n"
    "(the canonical config as the base) is read here first: 66 or 64 before any leg.\n"
    "\n"
    "Exit codes: 0 every check identical; 1 resume divergence (or the fusion arms differ);\n"
    "2 A/A failure (not deterministic: the resume result is inconclusive; without --aa it\n"
    "may also be a save leg that is not a prefix of the through leg); 3 save leg not a\n"
    "prefix (--aa: two through legs agree, the leg that stops at K differs, e.g. an LR\n"
    "schedule built for its stop step instead of --steps); with --noise calibrated 0 also\n"
    "within run-to-run noise, 1 also exceeds it (in every resume leg at K), 4 not decided\n"
    "(the noise too large, an excess only at the floor or not in every resume leg); 64 usage\n"
    "error\n"
    "(bad, unknown or repeated flag); 65 a leg's trace is unreadable; 70 a leg failed or timed\n"
    "out (its exit status and log tail are reported; a leg refused for memory exits 75 itself)\n"
    "or an internal error; 74 I/O error (e.g. a report cannot be written);\n"
    "130/143 interrupted (SIGINT/SIGTERM). With --git-bisect: 0, 1, or 125 for anything "
    "untestable.\n";

/* run's own flags; gpu_scheduling is -1 until given (the default depends on
 * the legs), the other choices are indices into their rows' names. */
typedef struct {
  int64_t steps, jobs;
  const char *save_at, *out, *json, *junit, *md, *plot, *train_cmd;
  int64_t aa; /* --aa [M]: 0 without it */
  bool confirm, bisect, keep_going, overwrite, no_handoff;
  int trainer, progress, gpu_scheduling, through_checkpoints, noise;
  int64_t resumes, confirm_resumes; /* confirm_resumes: -1 until given */
  int ckpt_format;                  /* index into RC_CKPT_FORMAT_NAMES */
  double leg_timeout;
} run_flags;

/* Seconds as digits with an optional fraction ("600", "2.5"): > 0 and at
 * most 1e9; no sign, exponent, hex, inf or nan. */
static int set_leg_timeout(void *target, const char *flag, const char *s, rc_err *err) {
  size_t i = 0, digits = 0;
  while (s[i] >= '0' && s[i] <= '9') i++, digits++;
  if (s[i] == '.')
    for (i++; s[i] >= '0' && s[i] <= '9'; i++) digits++;
  double v = s[i] || !digits ? 0 : strtod(s, NULL);
  if (!(v > 0) || v > 1e9)
    return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not a positive number of seconds (at most 1e9)",
                   flag, s);
  ((run_flags *)target)->leg_timeout = v;
  return 0;
}

/* A flag of a single leg: `run` sets it for each leg itself. */
static int refuse_leg_flag(void *target, const char *flag, const char *v, rc_err *err) {
  (void)target, (void)v;
  return rc_fail(err, RC_EXIT_USAGE,
                 "%s is set by `run` for each leg; it is a flag of `resumecheck train`", flag);
}

static const char *const TRAINERS[] = {"resumecheck", "exec", NULL};
static const char *const PROGRESS[] = {"auto", "live", "plain", "off", NULL};
static const char *const GPU_SCHED[] = {"critical-first", "shared", NULL};
static const char *const THROUGH[] = {"auto", "full", "hashes", "hashes-all", "on-demand", NULL};
static const char *const NOISE[] = {"bytes", "calibrated", NULL};

#define R(flag, kind_, field, lo, hi, choices_, mv, help_)                                         \
  {                                                                                                \
    .name = flag, .kind = kind_, .offset = offsetof(run_flags, field),                             \
    .size = kind_ == RC_FLAG_CHOICE ? sizeof(int) : 0, .min = lo, .max = hi, .choices = choices_,  \
    .metavar = mv, .help = help_                                                                   \
  }
#define LEG(flag, kind_)                                                                           \
  { .name = flag, .kind = kind_, .set = refuse_leg_flag, .tags = RC_FLAG_OPTIONAL | RC_FLAG_HIDDEN }

static const rc_flag_spec RUN_FLAGS[] = {
    {.name = "--steps",
     .aliases = "--train-iters", /* Megatron-LM's name, as `train` has it */
     .kind = RC_FLAG_INT64,
     .offset = offsetof(run_flags, steps),
     .min = 2,
     .max = 1 << 30,
     .metavar = "N",
     .help = "the training horizon (LR schedule) of every leg; it overrides\n"
             "the \"steps\" of a --config FILE"},
    R("--save-at", RC_FLAG_STRING, save_at, 0, 0, NULL, "LIST",
      "save steps, e.g. 5 or 3,6 (a chain: resume at 3, again at 6), or\n"
      "'every' (one resume leg per step 1..N-1), or 'auto' (the CI\n"
      "recommendation): independent points like 'every', chosen for N:\n"
      "an odd and an even K at N/2, warmup+1, N-1 and, for fp16, a\n"
      "skipped step (found by a probe that trains 1..N-1 first,\n"
      "preferring one whose overflow the hysteresis absorbed); the\n"
      "report says which K and why"),
    R("--out", RC_FLAG_STRING, out, 0, 0, NULL, "DIR", "where the legs and report.json go"),
    {.name = "--aa",
     .kind = RC_FLAG_INT64,
     .offset = offsetof(run_flags, aa),
     .min = 1,
     .max = 16,
     .tags = RC_FLAG_OPTIONAL,
     .implicit = "1",
     .metavar = "M",
     .help = "add the aa leg (full A/A at N); tells non-determinism from a save\n"
             "leg that is not a prefix of the through leg (exit 3). --aa M adds\n"
             "M fresh legs (aa, aa2, ...): with --noise calibrated, M >= 2\n"
             "(default 2) measure the run-to-run noise in pairs"},
    R("--noise", RC_FLAG_CHOICE, noise, 0, 0, NOISE, "MODE",
      "how RESUME is judged. bytes (default): every check byte for byte,\n"
      "an A/A difference makes the run inconclusive (exit 2). calibrated:\n"
      "for trainers that are not bitwise deterministic: the census, the\n"
      "learning rate and every exact trace column and the state's\n"
      "non-float values stay exact; the noisy trace columns per step and\n"
      "the float tensors at N are judged against the noise the fresh legs\n"
      "(through, aa, aa2, ...) measure in pairs; each resume leg loads a\n"
      "fresh leg's own checkpoint at K (no save leg; --resumes);\n"
      "'within run-to-run noise' exits 0, 'exceeds run-to-run noise' 1,\n"
      "not decided 4 (the noise too large, an excess only at the floor,\n"
      "or one that not every resume leg shows; docs/design.md, 7.2)"),
    R("--resumes", RC_FLAG_INT64, resumes, 1, 17, NULL, "P",
      "with --noise calibrated: resume legs per K (default 2), each\n"
      "loading its own fresh leg's checkpoint at K (resume@K from\n"
      "through, resume@K.aa from aa, ...) and judged against that leg;\n"
      "an excess is a bug only when every one shows it (a rounding flip\n"
      "moves one leg, a resume bug all of them), else not decided (4).\n"
      "1: one per K, from through; P <= M + 1 for --aa M"),
    R("--confirm-resumes", RC_FLAG_INT64, confirm_resumes, 0, 16, NULL, "C",
      "with --noise calibrated: when every resume leg at a K exceeds the\n"
      "noise and nothing exact differs, C more resume legs at that K\n"
      "(default 4) run before the verdict, and 'exceeds' needs them all\n"
      "(discrete noise: a rounding flip that the fresh legs all missed\n"
      "can fool two legs, rarely six); 0: decide on the first ones"),
    R("--jobs", RC_FLAG_INT64, jobs, 1, 4096, NULL, "J",
      "legs running at once (default: online CPUs)"),
    R("--json", RC_FLAG_STRING, json, 0, 0, NULL, "FILE",
      "a copy of report.json (DIR/report.json is always written; docs/report-schema.md)"),
    R("--junit", RC_FLAG_STRING, junit, 0, 0, NULL, "FILE",
      "JUnit XML: one testcase per check and per leg"),
    R("--summary-md", RC_FLAG_STRING, md, 0, 0, NULL, "FILE",
      "Markdown summary (CI step summary, PR comment)"),
    R("--plot", RC_FLAG_STRING, plot, 0, 0, NULL, "FILE.svg",
      "grad norm and loss per leg against step, K and first divergence"),
    R("--confirm-arm", RC_FLAG_BOOL, confirm, 0, 0, NULL, NULL,
      "run everything twice, under DIR/fusion-on and DIR/fusion-off\n"
      "(--grad-accum-fusion on|off); 'mechanism confirmed' when the\n"
      "resume divergence needs fusion; ARMS@N compares the arms"),
    R("--git-bisect", RC_FLAG_BOOL, bisect, 0, 0, NULL, NULL,
      "exit codes for `git bisect run`: 0 good, 1 divergence, 125 for\n"
      "an A/A failure, a save leg not a prefix or a failed leg\n"
      "(untestable)"),
    R("--checkpoint-format", RC_FLAG_CHOICE, ckpt_format, 0, 0, RC_CKPT_FORMAT_NAMES, "FORMAT",
      "what every leg's checkpoint must hold: auto (default: what it\n"
      "finds), resumecheck, dcp or torch-save; another is an error (65)"),
    R("--keep-going", RC_FLAG_BOOL, keep_going, 0, 0, NULL, NULL,
      "after a leg fails, still run every leg whose input exists"),
    R("--overwrite", RC_FLAG_BOOL, overwrite, 0, 0, NULL, NULL,
      "remove leg directories left in DIR by an earlier run"),
    R("--trainer", RC_FLAG_CHOICE, trainer, 0, 0, TRAINERS, "resumecheck|exec",
      "exec: drive another trainer (needs --train-cmd)"),
    R("--train-cmd", RC_FLAG_STRING, train_cmd, 0, 0, NULL, "TEMPLATE",
      "placeholders {steps} {stop_at} {save_at} {resume_from} {out}\n"
      "{leg} {fusion} (docs/exec-trainer.md)"),
    R("--progress", RC_FLAG_CHOICE, progress, 0, 0, PROGRESS, "MODE",
      "auto (live on a terminal, plain lines otherwise), live, plain, off;\n"
      "plain: a line per leg at start and end, and a heartbeat line per\n"
      "running leg every tenth of its steps or RC_HEARTBEAT_S seconds (60)"),
    {.name = "--leg-timeout",
     .kind = RC_FLAG_DOUBLE,
     .set = set_leg_timeout,
     .metavar = "S",
     .help = "a leg still running after S seconds (e.g. 600 or 2.5) is stopped\n"
             "like an interrupted one (SIGTERM to its process group, SIGKILL 5 s\n"
             "later) and fails as timed-out (exit 70); a pre-warmed resume leg's\n"
             "clock starts when its checkpoint's producer ends. Default: no bound"},
    R("--gpu-scheduling", RC_FLAG_CHOICE, gpu_scheduling, 0, 0, GPU_SCHED, "P",
      "legs sharing one GPU: critical-first (the default with --device\n"
      "cuda, --jobs > 1 and the built-in trainer): save and resume legs\n"
      "step first, through and aa only while none of them steps (`train\n"
      "--step-lock DIR/.step.lock`); shared (the default otherwise): every\n"
      "leg steps whenever it can. Scheduling only: the bits are the same"),
    R("--no-handoff", RC_FLAG_BOOL, no_handoff, 0, 0, NULL, NULL,
      "a pre-warmed resume leg loads its checkpoint only once it is\n"
      "complete and durable (COMPLETE). Default: the save hands it\n"
      "over once its bytes are written and hashed, before the fsync\n"
      "(`train --handoff`), and the resumed leg confirms against the\n"
      "manifest once COMPLETE is written (world size 1, built-in\n"
      "trainer). Scheduling only: the bits are the same"),
    R("--through-checkpoints", RC_FLAG_CHOICE, through_checkpoints, 0, 0, THROUGH, "M",
      "what the through leg keeps of its saves at K < N, used only\n"
      "by A/A@K (and RESUME checks at a chain's inner K): full shards, or\n"
      "hashes (`train --save-hashes-at`: the shard is built and hashed\n"
      "but not written, half a run's checkpoint writes; those checks\n"
      "then decide by SHA-256 and name differing datasets without their\n"
      "values); its saves at N are then full. hashes-all: hashes at N\n"
      "too (no through shard at all; RESUME@N names the differing\n"
      "datasets without values: a CI gate's mode; not with --confirm-arm).\n"
      "on-demand: hashes at K; at N the through leg stages and hashes its\n"
      "state and writes the shard only when a check at N differs (`train\n"
      "--save-deferred-at`), so RESUME@N names values when it must; not\n"
      "with --confirm-arm. auto (default): on-demand when the legs run on\n"
      "CUDA (hashes with --confirm-arm), full otherwise"),
};

/* `train` flags that `run` sets for each leg itself: refused, in any form. */
/* one flag a line */
/* clang-format off */
static const rc_flag_spec PER_LEG_FLAGS[] = {
    LEG("--stop-at", RC_FLAG_STRING),
    LEG("--resume-from", RC_FLAG_STRING),
    LEG("--leg", RC_FLAG_STRING),
    LEG("--dry-run", RC_FLAG_BOOL),
    LEG("--step-lock", RC_FLAG_STRING),
    LEG("--step-priority", RC_FLAG_STRING),
    LEG("--start-gate", RC_FLAG_STRING),
    LEG("--wait-for-checkpoint", RC_FLAG_BOOL),
    LEG("--handoff", RC_FLAG_BOOL),
    LEG("--save-hashes-at", RC_FLAG_STRING),
    LEG("--save-deferred-at", RC_FLAG_STRING),
};
/* clang-format on */
#undef R
#undef LEG

/* A usage error of parse_flags: printed as every subcommand prints one, and
 * kept in *why for the JUnit file of a refused command line. */
#define usage_error(...) (rc_fail(why, RC_EXIT_USAGE, __VA_ARGS__), print_usage_error(why))
static int print_usage_error(const rc_err *why) {
  return rc_cli_usage_error("run", true, "%s", why->msg);
}

/* --junit FILE, looked for before the flags are parsed: a command line that
 * does not parse still leaves a JUnit file saying why, so CI shows a failed
 * test instead of none. The parser's own rules: `--junit FILE` or
 * `--junit=FILE`, flags end at `--`. */
static const char *prescan_junit(int argc, char **argv) {
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
    if (!strncmp(argv[i], "--junit=", 8)) return argv[i][8] ? argv[i] + 8 : NULL;
    if (!strcmp(argv[i], "--junit")) return i + 1 < argc ? argv[i + 1] : NULL;
  }
  return NULL;
}

/* The JUnit file of a refused command line; the exit code stays 64 whether
 * or not it can be written. A refusal of the flags `run` forwards comes from
 * its `train --dry-run` child, which printed the reason itself: the same
 * parse in this process names it in the file too. */
static void junit_usage_error(int argc, char **argv, const rc_run_opts *o, const char *why) {
  const char *path = prescan_junit(argc, argv);
  if (!path) return;
  char msg[sizeof((rc_err *)0)->msg + 64], steps[32];
  size_t len = (size_t)snprintf(msg, sizeof msg, "%s", why);
  char **targv =
      o->fwd && o->trainer == RC_TRAINER_SELF ? calloc((size_t)o->n_fwd + 4, sizeof *targv) : NULL;
  if (targv) {
    targv[0] = "train";
    memcpy(targv + 1, o->fwd, (size_t)o->n_fwd * sizeof *targv);
    snprintf(steps, sizeof steps, "%" PRId64, o->steps);
    targv[o->n_fwd + 1] = "--steps", targv[o->n_fwd + 2] = steps;
    rc_config cfg;
    rc_leg_opts leg;
    rc_err terr = {0};
    rc_config_defaults(&cfg, &leg);
    if (rc_config_parse(o->n_fwd + 3, targv, &cfg, &leg, &terr) == RC_EXIT_USAGE &&
        len < sizeof msg)
      snprintf(msg + len, sizeof msg - len, ": train: %s", terr.msg);
    free(targv);
  }
  rc_err werr = {0};
  if (rc_report_junit_usage("run", msg, RC_EXIT_USAGE, path, &werr))
    fprintf(stderr, "resumecheck run: writing the JUnit file: %s\n", werr.msg);
}

/* `--config FILE` goes to every leg as it is (each reads the file; the
 * flags after it, run's --steps and --grad-accum-fusion among them,
 * override it). It is read here first, so that a file that is missing (66)
 * or not a config (64) is refused before any leg or directory exists.
 * Returns -1 to go on, else the exit code. */
static int check_config_file(char **fwd, int n_fwd, rc_err *why) {
  for (int i = 0; i < n_fwd; i++) {
    const char *path = !strncmp(fwd[i], "--config=", 9)               ? fwd[i] + 9
                       : !strcmp(fwd[i], "--config") && i + 1 < n_fwd ? fwd[i + 1]
                                                                      : NULL;
    if (!path) continue;
    rc_config cfg;
    rc_err err = {0};
    rc_config_defaults(&cfg, NULL);
    if (rc_config_read_file(path, &cfg, &err)) {
      if (err.code == RC_EXIT_USAGE) return usage_error("%s", err.msg);
      fprintf(stderr, "resumecheck run: %s\n", err.msg);
      return err.code;
    }
  }
  return -1;
}

/* The longest path below --out that a leg is given: DIR/fusion-off/
 * resume@N/ckpt/iter_N (an arm, the longest leg name, its iteration
 * directory: a resume leg's --resume-from). */
static size_t leg_suffix_len(int64_t steps) {
  char buf[128];
  int n = snprintf(buf, sizeof buf,
                   "/fusion-off/resume@%" PRId64 "/" RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT,
                   steps, steps);
  return n > 0 ? (size_t)n : sizeof buf;
}

/* --out is refused (64) before anything is made when it is empty, has a
 * component longer than NAME_MAX, or is so long that a leg's paths would
 * not fit what the legs accept: `train --out` and `--resume-from` take at
 * most RC_TRAIN_PATH_MAX bytes (core/config.h), and an exec trainer's
 * files must stay below PATH_MAX with room for a file name of NAME_MAX in
 * the deepest directory. Before, the legs were started and each failed.
 * Returns -1 to go on, else the exit code. */
#define RC_TRAIN_PATH_MAX 1023 /* sizeof(rc_leg_opts.out) - 1 */
static int check_out_path(const char *given, const char *out_abs, const rc_run_opts *o,
                          rc_err *why) {
  if (!*given) return usage_error("--out: an empty path (name the run's directory)");
  for (const char *p = out_abs; *p;) {
    size_t n = strcspn(p, "/");
    if (n > NAME_MAX)
      return usage_error("--out %s: a path component of %zu bytes, more than NAME_MAX (%d)", given,
                         n, NAME_MAX);
    p += n;
    p += strspn(p, "/");
  }
  size_t deepest = strlen(out_abs) + leg_suffix_len(o->steps);
  bool exec = o->trainer == RC_TRAINER_EXEC;
  size_t limit = exec ? (size_t)PATH_MAX - 2 - NAME_MAX : RC_TRAIN_PATH_MAX;
  if (deepest > limit)
    return usage_error("--out: %zu bytes is too long: a leg's directories below it would take "
                       "%zu bytes, more than %s accept%s (%zu); use a shorter --out",
                       strlen(out_abs), deepest, exec ? "the exec trainer's paths" : "the legs",
                       exec ? " with room for a file name below PATH_MAX" : "", limit);
  return -1;
}

/* run's flags into o (and r: the report paths); every other argument into
 * fwd, in order. Returns -1 to go on, else the exit code. */
static int parse_flags(int argc, char **argv, run_flags *r, rc_run_opts *o, char **fwd, int *n_fwd,
                       int64_t **save_at, char *out_abs, size_t cap, rc_err *why) {
  rc_flag_group groups[] = {
      {NULL, RUN_FLAGS, (int)(sizeof RUN_FLAGS / sizeof RUN_FLAGS[0]), r},
      {"flags of `resumecheck train` that `run` sets for each leg (refused here):\n  "
       "--stop-at --resume-from --leg --dry-run --step-lock --step-priority\n  "
       "--wait-for-checkpoint --handoff --save-hashes-at --save-deferred-at",
       PER_LEG_FLAGS, (int)(sizeof PER_LEG_FLAGS / sizeof PER_LEG_FLAGS[0]), NULL}};
  rc_flag_cmd cmd = {.usage = USAGE,
                     .epilogue = EPILOGUE,
                     .groups = groups,
                     .n_groups = 2,
                     .forward_unknown = true};
  rc_flag_args args = {.rest = fwd};
  r->gpu_scheduling = -1;
  int code;
  if (rc_cli_flags_done("run", &cmd, rc_flags_parse(&cmd, argc, argv, &args, why), why, &code))
    return code;
  *n_fwd = args.n_rest;
  if (!r->steps) return usage_error("--steps N is required");
  if (!r->save_at) return usage_error("--save-at K[,K2...]|every|auto is required");
  rc_save_at_mode mode;
  o->steps = r->steps;
  if (rc_run_parse_save_at(r->save_at, o->steps, save_at, &o->n_save_at, &mode, why))
    return rc_cli_usage_error("run", true, "%s", why->msg);
  o->save_every = mode == RC_SAVE_AT_EVERY, o->save_auto = mode == RC_SAVE_AT_AUTO;
  o->save_at = *save_at;
  if (!r->out) return usage_error("--out DIR is required");
  /* Legs, reports and repro lines get an absolute --out, so they mean the
   * same thing from any directory (an exec trainer may chdir). */
  char cwd[PATH_MAX] = "";
  if (r->out[0] != '/' && !getcwd(cwd, sizeof cwd)) {
    fprintf(stderr, "resumecheck run: getcwd: %s\n", strerror(errno));
    return RC_EXIT_IOERR;
  }
  if ((size_t)snprintf(out_abs, cap, "%s%s%s", cwd, *cwd ? "/" : "", r->out) >= cap)
    return usage_error("--out: path too long");
  o->out_dir = out_abs;
  o->trainer = r->trainer ? RC_TRAINER_EXEC : RC_TRAINER_SELF;
  if ((code = check_out_path(r->out, out_abs, o, why)) >= 0) return code;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  o->jobs = r->jobs ? (int)r->jobs : ncpu > 0 ? (int)ncpu : 1;
  o->noise = r->noise ? RC_NOISE_CALIBRATED : RC_NOISE_BYTES;
  /* calibrated: two aa legs unless --aa says how many */
  o->aa_count = r->aa ? (int)r->aa : o->noise == RC_NOISE_CALIBRATED ? 2 : 0;
  o->resumes = (int)r->resumes;
  if (r->confirm_resumes >= 0 && o->noise != RC_NOISE_CALIBRATED)
    return usage_error("--confirm-resumes needs --noise calibrated");
  o->confirm_resumes = r->confirm_resumes >= 0           ? (int)r->confirm_resumes
                       : o->noise == RC_NOISE_CALIBRATED ? 4
                                                         : 0;
  o->aa = o->aa_count > 0, o->confirm_arm = r->confirm, o->git_bisect = r->bisect;
  o->keep_going = r->keep_going, o->overwrite = r->overwrite;
  o->handoff = !r->no_handoff;
  o->progress = (rc_progress_mode)r->progress;
  o->leg_timeout_s = r->leg_timeout;
  o->ckpt_format = (rc_ckpt_format)r->ckpt_format;
  o->gpu_scheduling = r->gpu_scheduling < 0    ? RC_GPU_SCHED_DEFAULT
                      : r->gpu_scheduling == 0 ? RC_GPU_SCHED_CRITICAL_FIRST
                                               : RC_GPU_SCHED_SHARED;
  o->through_checkpoints = (rc_through_ckpt)r->through_checkpoints;
  o->trainer = r->trainer ? RC_TRAINER_EXEC : RC_TRAINER_SELF;
  if (o->trainer == RC_TRAINER_EXEC && !r->train_cmd)
    return usage_error("--trainer exec needs --train-cmd TEMPLATE");
  if (o->trainer == RC_TRAINER_EXEC && *n_fwd)
    return usage_error("'%s' is not a flag of `run`; with --trainer exec, the trainer's own "
                       "flags belong in --train-cmd",
                       fwd[0]);
  if (o->trainer != RC_TRAINER_EXEC && r->train_cmd)
    return usage_error("--train-cmd needs --trainer exec");
  o->train_cmd = r->train_cmd;
  if ((code = check_config_file(fwd, *n_fwd, why)) >= 0) return code;
  for (int i = 0; o->confirm_arm && i < *n_fwd; i++)
    if (!strncmp(fwd[i], "--grad-accum-fusion", 19) ||
        !strcmp(fwd[i], "--no-gradient-accumulation-fusion"))
      return usage_error("--confirm-arm sets --grad-accum-fusion on and off itself; drop %s",
                         fwd[i]);
  return -1;
}

/* The report files: one that cannot be written is an I/O error (125 with
 * --git-bisect). */
static int write_reports(const rc_run *run, const run_flags *r, const rc_run_opts *o) {
  char json_path[RC_RUN_PATH_CAP + 32];
  if (r->json)
    snprintf(json_path, sizeof json_path, "%s", r->json);
  else
    snprintf(json_path, sizeof json_path, "%s/" RC_REPORT_NAME, o->out_dir);
  rc_err rerr = {0};
  if (rc_report_json(run, json_path, &rerr) ||
      (r->junit && rc_report_junit(run, r->junit, &rerr)) ||
      (r->md && rc_report_markdown(run, r->md, &rerr)) ||
      (r->plot && rc_plot_svg(run, r->plot, &rerr))) {
    fprintf(stderr, "resumecheck run: writing a report: %s\n", rerr.msg);
    return o->git_bisect ? RC_EXIT_UNTESTABLE : RC_EXIT_IOERR;
  }
  /* GitHub Actions: the summary goes to the job's page unless --summary-md
   * was given; a file that cannot take it is a warning, not a verdict */
  const char *gh = getenv("GITHUB_STEP_SUMMARY");
  if (!r->md && gh && *gh && rc_report_step_summary(run, gh, &rerr))
    fprintf(stderr, "resumecheck run: warning: GITHUB_STEP_SUMMARY not written: %s\n", rerr.msg);
  return RC_OK;
}

/* Plans the run, prepares its directory, runs the legs and the checks:
 * each phase's time into run. Returns RC_OK or the first phase's error
 * (already printed); *planned says whether run must be freed. */
static int run_phases(rc_run *run, rc_run_opts *o, bool *planned, rc_err *err) {
  int rc;
  rc_run_install_signal_handlers();
  rc_test_crash_points_off(); /* RC_TEST_CRASH_AT_WRITE is for the legs' saves */
  double t_start = rc_now();
  if ((rc = rc_run_plan(run, o, err))) {
    *planned = true;
    fprintf(stderr, "resumecheck run: %s\n", err->msg);
    if (rc == RC_EXIT_USAGE) fprintf(stderr, "(see resumecheck run --help)\n");
    return rc;
  }
  *planned = true;
  run->t0 = t_start; /* the plan starts the run afresh */
  if ((rc = rc_run_prepare(run, err))) {
    fprintf(stderr, "resumecheck run: %s\n", err->msg);
    return rc;
  }
  run->prepare_s = rc_now() - t_start;
  if ((rc = rc_run_legs(run, err))) {
    fprintf(stderr, "resumecheck run: %s\n", err->msg);
    return rc;
  }
  run->legs_s = rc_now() - t_start - run->prepare_s;
  if ((rc = rc_run_checks(run, err))) {
    fprintf(stderr, "resumecheck run: %s\n", err->msg);
    return rc;
  }
  run->checks_s = rc_now() - t_start - run->prepare_s - run->legs_s;
  /* --noise calibrated: every resume leg at a K exceeded the noise and
   * nothing exact differs: more resume legs there before the verdict */
  double t_confirm = rc_now();
  int added = 0;
  if ((rc = rc_run_confirm(run, &added, err))) {
    fprintf(stderr, "resumecheck run: %s\n", err->msg);
    return rc;
  }
  if (added) run->legs_s += rc_now() - t_confirm; /* their checks are a small part */
  /* 128 + the signal, as a shell reports it: 130 for SIGINT, 143 for SIGTERM */
  if (run->interrupted && rc_run_interrupt_signal() > 0)
    run->exit_code = 128 + rc_run_interrupt_signal();
  run->wall_s = rc_now() - t_start; /* the whole run: dry-run, legs and checks */
  return RC_OK;
}

int rc_cmd_run(int argc, char **argv) {
  char **fwd = calloc((size_t)argc + 1, sizeof *fwd);
  if (!fwd) return RC_EXIT_SOFTWARE;
  run_flags r = {0};
  r.confirm_resumes = -1; /* not given */
  int64_t *save_at = NULL;
  rc_run run;
  memset(&run, 0, sizeof run);
  bool planned = false, reported = false; /* reported: the run's own reports were written */
  rc_run_opts o;
  memset(&o, 0, sizeof o);
  rc_err err = {0};
  char out_abs[PATH_MAX];
  int n_fwd = 0,
      rc = parse_flags(argc, argv, &r, &o, fwd, &n_fwd, &save_at, out_abs, sizeof out_abs, &err);
  if (rc >= 0) goto done;
  char self_display[PATH_MAX] = "/proc/self/exe";
  ssize_t len = readlink("/proc/self/exe", self_display, sizeof self_display - 1);
  if (len > 0) self_display[len] = 0;
  o.self_exe = "/proc/self/exe"; /* the very binary running now, even if rebuilt meanwhile */
  o.self_display = self_display;
  o.fwd = fwd;
  o.n_fwd = n_fwd;
  o.argv = argv;
  o.argc = argc;

  /* --save-at auto: the points are chosen now that the trainer and its flags
   * are known (a dry run, and for fp16 a probe that finds skipped steps) */
  if (o.save_auto) {
    if ((rc = rc_run_auto_choose(&o, &save_at, &o.n_save_at, o.save_at_why, sizeof o.save_at_why,
                                 &err))) {
      fprintf(stderr, "resumecheck run: %s\n", err.msg);
      if (rc == RC_EXIT_USAGE) fprintf(stderr, "(see resumecheck run --help)\n");
      goto done;
    }
    o.save_at = save_at;
  }

  if ((rc = run_phases(&run, &o, &planned, &err))) goto done;
  rc_report_text(&run, stdout);

  int report_rc = write_reports(&run, &r, &o);
  reported = true;
  rc = run.exit_code;
  if (report_rc && (rc == RC_OK || rc == RC_EXIT_DIVERGED)) rc = report_rc;

done:
  if (rc == RC_EXIT_USAGE && !reported) junit_usage_error(argc, argv, &o, err.msg);
  if (planned) rc_run_free(&run);
  free(save_at);
  free(fwd);
  return rc;
}
