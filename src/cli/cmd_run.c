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
#include "harness/report.h"
#include "harness/run.h"
#include "harness/run_signal.h"
#include "io/layout.h"

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: resumecheck run [core flags] --steps N --save-at K[,K2...]|every|auto --out DIR\n"
      "                       [--aa] [--jobs J] [--json FILE] [--junit FILE]\n"
      "                       [--summary-md FILE] [--plot FILE.svg] [--confirm-arm]\n"
      "                       [--git-bisect] [--keep-going] [--overwrite]\n"
      "                       [--trainer resumecheck|exec --train-cmd TEMPLATE]\n"
      "                       [--progress auto|live|plain|off] [--leg-timeout SECONDS]\n"
      "                       [--gpu-scheduling critical-first|shared]\n"
      "                       [--through-checkpoints full|hashes|auto]\n"
      "\n"
      "Runs the legs of a checkpoint-resume check, each a separate process with its own\n"
      "directory DIR/<leg>/ and log DIR/<leg>/log.txt, and compares their state byte for byte:\n"
      "  through    train 1..N, saving at every K and at N\n"
      "  save       train 1..K (same LR horizon N), saving at K\n"
      "  resume@K   load save@K (or the previous chain link), train to the next K or N\n"
      "  aa         (--aa) a second through, for A/A at N\n"
      "Checks: A/A@K = through@K vs save@K; RESUME@K→M = through@M vs the leg that resumed at\n"
      "K; and beside each, the traces: first divergent step and columns.\n"
      "\n"
      "  --steps N           the training horizon (LR schedule) of every leg\n"
      "  --save-at LIST      save steps, e.g. 5 or 3,6 (a chain: resume at 3, again at 6), or\n"
      "                      'every' (one resume leg per step 1..N-1), or 'auto' (the CI\n"
      "                      recommendation): independent points like 'every', chosen for N:\n"
      "                      an odd and an even K at N/2, warmup+1, N-1 and, for fp16, a\n"
      "                      skipped step (found by a probe that trains 1..N-1 first,\n"
      "                      preferring one whose overflow the hysteresis absorbed); the\n"
      "                      report says which K and why\n"
      "  --out DIR           where the legs and report.json go\n"
      "  --aa                add the aa leg (full A/A at N); tells non-determinism from a save\n"
      "                      leg that is not a prefix of the through leg (exit 3)\n"
      "  --jobs J            legs running at once (default: online CPUs)\n"
      "  --json FILE         report.json path (default DIR/report.json; docs/report-schema.md)\n"
      "  --junit FILE        JUnit XML: one testcase per check and per leg\n"
      "  --summary-md FILE   Markdown summary (CI step summary, PR comment)\n"
      "  --plot FILE.svg     grad norm and loss per leg against step, K and first divergence\n"
      "  --confirm-arm       run everything twice, under DIR/fusion-on and DIR/fusion-off\n"
      "                      (--grad-accum-fusion on|off); 'mechanism confirmed' when the\n"
      "                      resume divergence needs fusion; ARMS@N compares the arms\n"
      "  --git-bisect        exit codes for `git bisect run`: 0 good, 1 divergence, 125 for\n"
      "                      an A/A failure, a save leg not a prefix or a failed leg\n"
      "                      (untestable)\n"
      "  --keep-going        after a leg fails, still run every leg whose input exists\n"
      "  --overwrite         remove leg directories left in DIR by an earlier run\n"
      "  --trainer exec --train-cmd TEMPLATE\n"
      "                      drive another trainer; placeholders {steps} {stop_at} {save_at}\n"
      "                      {resume_from} {out} {leg} {fusion} (docs/exec-trainer.md)\n"
      "  --progress MODE     auto (live on a terminal, plain lines otherwise), live, plain, off\n"
      "  --leg-timeout S     a leg still running after S seconds (e.g. 600 or 2.5) is stopped\n"
      "                      like an interrupted one (SIGTERM to its process group, SIGKILL 5 s\n"
      "                      later) and fails as timed-out (exit 70); a pre-warmed resume leg's\n"
      "                      clock starts when its checkpoint's producer ends. Default: no bound\n"
      "  --gpu-scheduling P  legs sharing one GPU: critical-first (the default with --device\n"
      "                      cuda, --jobs > 1 and the built-in trainer): save and resume legs\n"
      "                      step first, through and aa only while none of them steps (`train\n"
      "                      --step-lock DIR/.step.lock`); shared (the default otherwise): every\n"
      "                      leg steps whenever it can. Scheduling only: the bits are the same\n"
      "  --through-checkpoints M  what the through leg keeps of its saves at K < N, used only\n"
      "                      by A/A@K (and RESUME checks at a chain's inner K): full shards, or\n"
      "                      hashes (`train --save-hashes-at`: the shard is built and hashed\n"
      "                      but not written, half a run's checkpoint writes; those checks\n"
      "                      then decide by SHA-256 and name differing datasets without their\n"
      "                      values). auto (default): hashes when the legs run on CUDA, full\n"
      "                      otherwise. Its saves at N are always full\n"
      "\n"
      "Every other flag (--preset, --precision, --mtp-depths, --first-microbatch-policy,\n"
      "--grad-accum-fusion, --inject, --seed, ...) is passed verbatim to each `resumecheck\n"
      "train` leg and checked with `train --dry-run` before any leg starts.\n"
      "\n"
      "Exit codes: 0 every check identical; 1 resume divergence (or the fusion arms differ);\n"
      "2 A/A failure (not deterministic: the resume result is inconclusive; without --aa it\n"
      "may also be a save leg that is not a prefix of the through leg); 3 save leg not a\n"
      "prefix (--aa: two through legs agree, the leg that stops at K differs, e.g. an LR\n"
      "schedule built for its stop step instead of --steps); 64 usage error\n"
      "(bad, unknown or repeated flag); 65 a leg's trace is unreadable; 70 a leg failed or timed\n"
      "out (its exit status and log tail are reported; a leg refused for memory exits 75 itself)\n"
      "or an internal error; 74 I/O error (e.g. a report cannot be written);\n"
      "130/143 interrupted (SIGINT/SIGTERM). With --git-bisect: 0, 1, or 125 for anything "
      "untestable.\n");
}

typedef struct {
  const char *name;
  bool takes_value;
} flag_def;

/* clang-format off */
static const flag_def RUN_FLAGS[] = {
    {"--steps", true},     {"--save-at", true},      {"--out", true},         {"--aa", false},
    {"--jobs", true},      {"--junit", true},        {"--summary-md", true},  {"--plot", true},
    {"--json", true},      {"--confirm-arm", false}, {"--git-bisect", false}, {"--trainer", true},
    {"--train-cmd", true}, {"--keep-going", false},  {"--overwrite", false},  {"--progress", true},
    {"--leg-timeout", true}, {"--gpu-scheduling", true}, {"--through-checkpoints", true},
};
/* clang-format on */

/* Flags of a single leg: `run` sets them for each leg itself. */
static const char *const LEG_FLAGS[] = {
    "--stop-at",       "--resume-from",         "--leg",           "--dry-run", "--step-lock",
    "--step-priority", "--wait-for-checkpoint", "--save-hashes-at"};

#define usage_error(...) rc_cli_usage_error("run", true, __VA_ARGS__)

/* Seconds as digits with an optional fraction ("600", "2.5"): > 0 and at
 * most 1e9; no sign, exponent, hex, inf or nan. */
static bool parse_seconds(const char *s, double *out) {
  size_t i = 0, digits = 0;
  while (s[i] >= '0' && s[i] <= '9') i++, digits++;
  if (s[i] == '.')
    for (i++; s[i] >= '0' && s[i] <= '9'; i++) digits++;
  if (s[i] || !digits) return false;
  double v = strtod(s, NULL);
  if (!(v > 0) || v > 1e9) return false;
  *out = v;
  return true;
}

static bool parse_i64(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < 0) return false;
  *out = v;
  return true;
}

typedef struct {
  const char *steps, *save_at, *out, *jobs, *junit, *md, *plot, *json, *trainer, *train_cmd,
      *progress, *leg_timeout, *gpu_scheduling, *through_checkpoints;
  bool aa, confirm, bisect, keep_going, overwrite;
} raw_flags;

static const char **value_slot(raw_flags *r, const char *name) {
  if (!strcmp(name, "--steps")) return &r->steps;
  if (!strcmp(name, "--save-at")) return &r->save_at;
  if (!strcmp(name, "--out")) return &r->out;
  if (!strcmp(name, "--jobs")) return &r->jobs;
  if (!strcmp(name, "--junit")) return &r->junit;
  if (!strcmp(name, "--summary-md")) return &r->md;
  if (!strcmp(name, "--plot")) return &r->plot;
  if (!strcmp(name, "--json")) return &r->json;
  if (!strcmp(name, "--trainer")) return &r->trainer;
  if (!strcmp(name, "--train-cmd")) return &r->train_cmd;
  if (!strcmp(name, "--progress")) return &r->progress;
  if (!strcmp(name, "--leg-timeout")) return &r->leg_timeout;
  if (!strcmp(name, "--gpu-scheduling")) return &r->gpu_scheduling;
  if (!strcmp(name, "--through-checkpoints")) return &r->through_checkpoints;
  return NULL;
}

static bool *bool_slot(raw_flags *r, const char *name) {
  if (!strcmp(name, "--aa")) return &r->aa;
  if (!strcmp(name, "--confirm-arm")) return &r->confirm;
  if (!strcmp(name, "--git-bisect")) return &r->bisect;
  if (!strcmp(name, "--keep-going")) return &r->keep_going;
  if (!strcmp(name, "--overwrite")) return &r->overwrite;
  return NULL;
}

/* Splits argv into run's flags and the forwarded rest (in order). */
static int split_args(int argc, char **argv, raw_flags *r, char **fwd, int *n_fwd) {
  *n_fwd = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    char name[64];
    const char *eq = strchr(a, '=');
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    if (nlen >= sizeof name) nlen = sizeof name - 1;
    memcpy(name, a, nlen);
    name[nlen] = 0;
    const flag_def *def = NULL;
    for (size_t k = 0; k < sizeof RUN_FLAGS / sizeof RUN_FLAGS[0]; k++)
      if (!strncmp(a, "--", 2) && !strcmp(name, RUN_FLAGS[k].name)) def = &RUN_FLAGS[k];
    for (size_t k = 0; k < sizeof LEG_FLAGS / sizeof LEG_FLAGS[0]; k++)
      if (!strcmp(name, LEG_FLAGS[k]))
        return usage_error("%s is set by `run` for each leg; it is a flag of `resumecheck train`",
                           name);
    if (!def) {
      fwd[(*n_fwd)++] = argv[i];
      continue;
    }
    if (!def->takes_value) {
      if (eq) return usage_error("%s takes no value", name);
      if (*bool_slot(r, name)) return usage_error("%s given twice", name);
      *bool_slot(r, name) = true;
      continue;
    }
    const char *v;
    if (eq) {
      v = eq + 1;
    } else {
      if (i + 1 >= argc) return usage_error("%s needs a value", name);
      v = argv[++i];
    }
    const char **slot = value_slot(r, name);
    if (*slot) return usage_error("%s given twice", name);
    *slot = v;
  }
  return RC_OK;
}

int rc_cmd_run(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return RC_OK;
    }
  char **fwd = calloc((size_t)argc + 1, sizeof *fwd);
  if (!fwd) return RC_EXIT_SOFTWARE;
  raw_flags r = {0};
  int n_fwd = 0, rc = split_args(argc, argv, &r, fwd, &n_fwd);
  int64_t *save_at = NULL;
  rc_run run;
  memset(&run, 0, sizeof run);
  bool planned = false;
  if (rc) goto done;

  rc_run_opts o;
  memset(&o, 0, sizeof o);
  rc = RC_EXIT_USAGE;
  if (!r.steps) {
    usage_error("--steps N is required");
    goto done;
  }
  if (!parse_i64(r.steps, &o.steps) || o.steps < 2) {
    usage_error("--steps: '%s' is not a step count of at least 2", r.steps);
    goto done;
  }
  if (!r.save_at) {
    usage_error("--save-at K[,K2...]|every|auto is required");
    goto done;
  }
  rc_err err = {0};
  rc_save_at_mode save_mode;
  if (rc_run_parse_save_at(r.save_at, o.steps, &save_at, &o.n_save_at, &save_mode, &err)) {
    usage_error("%s", err.msg);
    goto done;
  }
  o.save_every = save_mode == RC_SAVE_AT_EVERY;
  o.save_auto = save_mode == RC_SAVE_AT_AUTO;
  o.save_at = save_at;
  if (!r.out) {
    usage_error("--out DIR is required");
    goto done;
  }
  /* Legs, reports and repro lines get an absolute --out, so they mean the
   * same thing from any directory (an exec trainer may chdir). */
  char out_abs[PATH_MAX];
  if (r.out[0] == '/') {
    snprintf(out_abs, sizeof out_abs, "%s", r.out);
  } else {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) {
      fprintf(stderr, "resumecheck run: getcwd: %s\n", strerror(errno));
      rc = RC_EXIT_IOERR;
      goto done;
    }
    if ((size_t)snprintf(out_abs, sizeof out_abs, "%s/%s", cwd, r.out) >= sizeof out_abs) {
      usage_error("--out: path too long");
      goto done;
    }
  }
  o.out_dir = out_abs;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  o.jobs = ncpu > 0 ? (int)ncpu : 1;
  if (r.jobs) {
    int64_t j;
    if (!parse_i64(r.jobs, &j) || j < 1 || j > 4096) {
      usage_error("--jobs: '%s' is not a number of legs (1..4096)", r.jobs);
      goto done;
    }
    o.jobs = (int)j;
  }
  o.aa = r.aa;
  o.confirm_arm = r.confirm;
  o.git_bisect = r.bisect;
  o.keep_going = r.keep_going;
  o.overwrite = r.overwrite;
  o.progress = RC_PROGRESS_AUTO;
  if (r.progress) {
    static const char *const modes[] = {"auto", "live", "plain", "off"};
    int m = -1;
    for (int k = 0; k < 4; k++)
      if (!strcmp(r.progress, modes[k])) m = k;
    if (m < 0) {
      usage_error("--progress: '%s' is not auto, live, plain or off", r.progress);
      goto done;
    }
    o.progress = (rc_progress_mode)m;
  }
  if (r.leg_timeout && !parse_seconds(r.leg_timeout, &o.leg_timeout_s)) {
    usage_error("--leg-timeout: '%s' is not a positive number of seconds (at most 1e9)",
                r.leg_timeout);
    goto done;
  }
  o.gpu_scheduling = RC_GPU_SCHED_DEFAULT;
  if (r.gpu_scheduling && !strcmp(r.gpu_scheduling, "critical-first")) {
    o.gpu_scheduling = RC_GPU_SCHED_CRITICAL_FIRST;
  } else if (r.gpu_scheduling && !strcmp(r.gpu_scheduling, "shared")) {
    o.gpu_scheduling = RC_GPU_SCHED_SHARED;
  } else if (r.gpu_scheduling) {
    usage_error("--gpu-scheduling: '%s' is not critical-first or shared", r.gpu_scheduling);
    goto done;
  }
  o.through_checkpoints = RC_THROUGH_CKPT_AUTO;
  if (r.through_checkpoints && !strcmp(r.through_checkpoints, "full")) {
    o.through_checkpoints = RC_THROUGH_CKPT_FULL;
  } else if (r.through_checkpoints && !strcmp(r.through_checkpoints, "hashes")) {
    o.through_checkpoints = RC_THROUGH_CKPT_HASHES;
  } else if (r.through_checkpoints && strcmp(r.through_checkpoints, "auto")) {
    usage_error("--through-checkpoints: '%s' is not full, hashes or auto", r.through_checkpoints);
    goto done;
  }
  o.progress_out = stderr;
  o.trainer = RC_TRAINER_SELF;
  if (r.trainer && !strcmp(r.trainer, "exec")) {
    o.trainer = RC_TRAINER_EXEC;
  } else if (r.trainer && strcmp(r.trainer, "resumecheck")) {
    usage_error("--trainer: '%s' is not 'resumecheck' or 'exec'", r.trainer);
    goto done;
  }
  if (o.trainer == RC_TRAINER_EXEC) {
    if (!r.train_cmd) {
      usage_error("--trainer exec needs --train-cmd TEMPLATE");
      goto done;
    }
    if (n_fwd) {
      usage_error("'%s' is not a flag of `run`; with --trainer exec, the trainer's own flags "
                  "belong in --train-cmd",
                  fwd[0]);
      goto done;
    }
    o.train_cmd = r.train_cmd;
  } else if (r.train_cmd) {
    usage_error("--train-cmd needs --trainer exec");
    goto done;
  }
  if (o.confirm_arm)
    for (int i = 0; i < n_fwd; i++)
      if (!strncmp(fwd[i], "--grad-accum-fusion", 19)) {
        usage_error("--confirm-arm sets --grad-accum-fusion on and off itself; drop %s", fwd[i]);
        goto done;
      }
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

  rc_run_install_signal_handlers();
  rc_test_crash_points_off(); /* RC_TEST_CRASH_AT_WRITE is for the legs' saves */
  double t_start = rc_now();
  if ((rc = rc_run_plan(&run, &o, &err))) {
    planned = true;
    fprintf(stderr, "resumecheck run: %s\n", err.msg);
    if (rc == RC_EXIT_USAGE) fprintf(stderr, "(see resumecheck run --help)\n");
    goto done;
  }
  planned = true;
  run.t0 = t_start; /* the plan starts the run afresh */
  if ((rc = rc_run_prepare(&run, &err))) {
    fprintf(stderr, "resumecheck run: %s\n", err.msg);
    goto done;
  }
  run.prepare_s = rc_now() - t_start;
  if ((rc = rc_run_legs(&run, &err))) {
    fprintf(stderr, "resumecheck run: %s\n", err.msg);
    goto done;
  }
  run.legs_s = rc_now() - t_start - run.prepare_s;
  if ((rc = rc_run_checks(&run, &err))) {
    fprintf(stderr, "resumecheck run: %s\n", err.msg);
    goto done;
  }
  run.checks_s = rc_now() - t_start - run.prepare_s - run.legs_s;
  /* 128 + the signal, as a shell reports it: 130 for SIGINT, 143 for SIGTERM */
  if (run.interrupted && rc_run_interrupt_signal() > 0)
    run.exit_code = 128 + rc_run_interrupt_signal();
  run.wall_s = rc_now() - t_start; /* the whole run: dry-run, legs and checks */
  rc_report_text(&run, stdout);

  /* reports: a file that cannot be written is an I/O error */
  char json_path[RC_RUN_PATH_CAP + 32];
  if (r.json)
    snprintf(json_path, sizeof json_path, "%s", r.json);
  else
    snprintf(json_path, sizeof json_path, "%s/" RC_REPORT_NAME, o.out_dir);
  int report_rc = RC_OK;
  rc_err rerr = {0};
  if (rc_report_json(&run, json_path, &rerr) ||
      (r.junit && rc_report_junit(&run, r.junit, &rerr)) ||
      (r.md && rc_report_markdown(&run, r.md, &rerr)) ||
      (r.plot && rc_plot_svg(&run, r.plot, &rerr))) {
    fprintf(stderr, "resumecheck run: writing a report: %s\n", rerr.msg);
    report_rc = o.git_bisect ? RC_EXIT_UNTESTABLE : RC_EXIT_IOERR;
  }
  rc = run.exit_code;
  if (report_rc && (rc == RC_OK || rc == RC_EXIT_DIVERGED)) rc = report_rc;

done:
  if (planned) rc_run_free(&run);
  free(save_at);
  free(fwd);
  return rc;
}
