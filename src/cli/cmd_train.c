/* cmd_train.c — `resumecheck train`: one leg, in this process.
 *
 * --wait-for-checkpoint, --handoff, --step-lock, --step-priority and --start-gate are flags of the
 * process, not of the config (they change when the leg loads or steps,
 * never what it computes), so a first parse (base/flags.h, unknown flags
 * forwarded) takes them out of argv before the config parser sees the rest:
 * neither the config, its hash nor args.json's argv holds them. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/flags.h"
#include "cli/cli.h"
#include "core/config.h"
#include "leg/leg.h"

typedef struct {
  bool wait_for_checkpoint, handoff, list_flags;
  const char *step_lock, *step_priority, *start_gate;
} proc_flags;

#define P(flag, kind_, field, mv, help_)                                                           \
  {                                                                                                \
    .name = flag, .kind = kind_, .offset = offsetof(proc_flags, field), .metavar = mv,             \
    .help = help_                                                                                  \
  }

static const rc_flag_spec PROC_FLAGS[] = {
    P("--wait-for-checkpoint", RC_FLAG_BOOL, wait_for_checkpoint, NULL,
      "set up backend and model first, then wait until\n"
      "--resume-from DIR is complete (COMPLETE), then load;\n"
      "`run` starts its resume legs this way. A save that\n"
      "hands DIR over (--handoff) lets the load start before\n"
      "DIR is durable; the leg then confirms, once COMPLETE\n"
      "is written, that DIR's manifest lists exactly the\n"
      "bytes it loaded, and fails (65, 66) otherwise"),
    P("--handoff", RC_FLAG_BOOL, handoff, NULL,
      "hand each checkpoint to a leg waiting for it before it\n"
      "is durable: once a shard's bytes are written and\n"
      "hashed, CKPT/iter_N.handoff.json says where they are,\n"
      "then fsync, rename, manifest and COMPLETE as always\n"
      "(world size 1; the bytes saved do not change); `run`\n"
      "passes it to legs whose checkpoints a leg waits for"),
    P("--step-lock", RC_FLAG_STRING, step_lock, "FILE",
      "legs sharing one GPU take turns (flock on FILE, created\n"
      "if missing): high-priority legs step together, a\n"
      "low-priority leg starts a step only while none of them\n"
      "steps; `run` passes it (--gpu-scheduling). Scheduling\n"
      "only: the trace and the checkpoints are the same"),
    P("--step-priority", RC_FLAG_STRING, step_priority, "high|low",
      "with --step-lock (default high); timing.csv gets a\n"
      "step_lock_wait row: the seconds blocked on the lock"),
    P("--start-gate", RC_FLAG_STRING, start_gate, "FILE",
      "before setting up the backend, wait until no process\n"
      "holds an exclusive flock on FILE (created if missing);\n"
      "`run` holds it while its critical legs set up\n"
      "(--gpu-scheduling critical-first); timing.csv gets a\n"
      "start_gate row: the seconds waited"),
    {.name = "--list-flags",
     .kind = RC_FLAG_BOOL,
     .offset = offsetof(proc_flags, list_flags),
     .tags = RC_FLAG_HIDDEN,
     .help = "print every config and leg flag as a table row, exit"},
};
#undef P

static const char USAGE[] =
    "usage: resumecheck train [flags]\n\n"
    "Runs one training leg: from step 1 (or from --resume-from) to --stop-at or\n"
    "--steps, writing OUT/trace.csv, OUT/timing.csv and OUT/ckpt/iter_NNNNNNN/.\n";

static const char EPILOGUE[] =
    "\nexit codes: 0 ok; 64 usage (bad, unknown or repeated flag, or --out locked by\n"
    "another process); 65 bad checkpoint; 66 missing input (or the checkpoint waited for\n"
    "will not come); 70 internal error; 74 I/O error (the message says why; a complete\n"
    "checkpoint in --out in the way; or a --step-lock or --start-gate FILE that cannot be\n"
    "opened or is not a regular file, refused before any training); 75 the config needs more "
    "memory than is\n"
    "available (need and availability named, nothing allocated); 125 --device cuda without\n"
    "a usable GPU or without the CUDA module.\n";

#define usage_error(...) rc_cli_usage_error("train", false, __VA_ARGS__)

/* --list-flags (hidden): one line per row of the config, Megatron and leg
 * tables, tab-separated: group, name, aliases, kind, canonical key, choices
 * ("-" for none). The tests read it, so that a row added to a table is
 * covered by them without editing them (tests/flags_megatron.sh). */
static void list_flags(const rc_flag_group *groups, int n, FILE *out) {
  static const char *const KINDS[] = {"bool",   "int",    "int64", "uint64",
                                      "double", "string", "choice"};
  static const char *const GROUP_NAMES[] = {"config", "megatron", "leg"};
  for (int g = 0; g < n && g < 3; g++)
    for (int k = 0; k < groups[g].n; k++) {
      const rc_flag_spec *f = &groups[g].flags[k];
      fprintf(out, "%s\t%s\t%s\t%s\t%s\t", GROUP_NAMES[g], f->name, f->aliases ? f->aliases : "-",
              KINDS[f->kind], f->key ? f->key : "-");
      for (int c = 0; f->choices && f->choices[c]; c++)
        fprintf(out, "%s%s", c ? "," : "", f->choices[c]);
      fprintf(out, "%s\n", f->choices ? "" : "-");
    }
}

int rc_cmd_train(int argc, char **argv) {
  rc_leg_proc proc;
  rc_leg_proc_init(&proc); /* first: its clock reading is "main" */
  rc_config cfg;
  rc_leg_opts leg;
  rc_err err = {0};
  rc_config_defaults(&cfg, &leg);
  rc_flag_group groups[4];
  rc_megatron_args meg = {0}; /* for --help: rc_config_parse resolves its own */
  proc_flags pf = {0};
  int n = rc_config_flag_groups(&cfg, &meg, &leg, groups), code;
  groups[n] =
      (rc_flag_group){"process flags (not in the config, nor in args.json's argv):", PROC_FLAGS,
                      (int)(sizeof PROC_FLAGS / sizeof PROC_FLAGS[0]), &pf};
  rc_flag_cmd help = {.usage = USAGE, .epilogue = EPILOGUE, .groups = groups, .n_groups = n + 1};
  rc_flag_cmd first = {
      .groups = &groups[n], .n_groups = 1, .forward_unknown = true, .no_help = true};
  char **kept = calloc((size_t)argc + 1, sizeof *kept);
  if (!kept) return RC_EXIT_SOFTWARE;
  rc_flag_args rest = {.rest = kept + 1};
  kept[0] = argv[0];
  int rc = rc_flags_parse(&first, argc, argv, &rest, &err);
  if (!rc && pf.list_flags) {
    if (rest.n_rest) {
      code = usage_error("--list-flags takes no other flag ('%s')", rest.rest[0]);
    } else {
      list_flags(groups, n, stdout);
      code = RC_OK;
    }
    goto done;
  }
  if (!rc) rc = rc_config_parse(rest.n_rest + 1, kept, &cfg, &leg, &err);
  if (rc_cli_flags_done("train", &help, rc, &err, &code)) goto done;
  code = RC_EXIT_USAGE;
  proc.wait_for_checkpoint = pf.wait_for_checkpoint;
  proc.handoff = pf.handoff;
  proc.step_lock = pf.step_lock;
  if (pf.step_priority && !proc.step_lock) {
    usage_error("--step-priority needs --step-lock FILE");
    goto done;
  }
  if (pf.step_priority && !rc_step_priority_parse(pf.step_priority, &proc.step_priority)) {
    usage_error("--step-priority: '%s' is not high or low", pf.step_priority);
    goto done;
  }
  if (proc.step_lock && !*proc.step_lock) {
    usage_error("--step-lock: empty path");
    goto done;
  }
  proc.start_gate = pf.start_gate;
  if (proc.start_gate && !*proc.start_gate) {
    usage_error("--start-gate: empty path");
    goto done;
  }
  if (leg.dry_run_memory) {
    code = rc_leg_memory_report(&cfg, &leg, stdout, &err);
  } else if (leg.dry_run) {
    char *s = rc_config_canonical(&cfg);
    printf("%s\n", s);
    free(s);
    code = RC_OK;
  } else {
    code = rc_leg_run(&cfg, &leg, &proc, rest.n_rest + 1, kept, &err);
  }
  if (code) fprintf(stderr, "resumecheck train: %s\n", err.msg);
done:
  free(kept);
  return code;
}
