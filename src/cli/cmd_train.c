/* cmd_train.c — `resumecheck train`: one leg, in this process.
 *
 * --wait-for-checkpoint, --step-lock and --step-priority are flags of the
 * process, not of the config (they change when the leg loads or steps,
 * never what it computes), so they are taken out of argv here, before the
 * shared config parser sees the rest: neither the config, its hash nor
 * args.json's argv holds them. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"
#include "core/config.h"
#include "core/leg.h"

static void help(void) {
  rc_config_print_help(
      "resumecheck train",
      "Runs one training leg: from step 1 (or from --resume-from) to --stop-at or\n"
      "--steps, writing OUT/trace.csv, OUT/timing.csv and OUT/ckpt/iter_NNNNNNN/.");
  printf("\nleg flags (not part of the config):\n"
         "  --out DIR                  output directory (required)\n"
         "  --save-at K[,K2...]        save a checkpoint after these steps\n"
         "  --save-hashes-at K[,...]   of those, the saves that keep hashes only: the shard is\n"
         "                             built and hashed as a save does, but not written; only\n"
         "                             manifest.json (\"hashes_only\": true), args.json and\n"
         "                             COMPLETE. Compared, never loaded (`run` gives its through\n"
         "                             leg the saves at K < N this way: --through-checkpoints)\n"
         "  --stop-at K                end the process after step K; --steps stays the horizon\n"
         "  --resume-from DIR          continue from DIR = .../ckpt/iter_NNNNNNN\n"
         "  --wait-for-checkpoint      set up backend and model first, then wait until\n"
         "                             --resume-from DIR is complete (COMPLETE), then load;\n"
         "                             `run` starts its resume legs this way\n"
         "  --step-lock FILE           legs sharing one GPU take turns (flock on FILE, created\n"
         "                             if missing): high-priority legs step together, a\n"
         "                             low-priority leg starts a step only while none of them\n"
         "                             steps; `run` passes it (--gpu-scheduling). Scheduling\n"
         "                             only: the trace and the checkpoints are the same\n"
         "  --step-priority high|low   with --step-lock (default high); timing.csv gets a\n"
         "                             step_lock_wait row: the seconds blocked on the lock\n"
         "  --device cpu|cuda|auto     backend (default cpu)\n"
         "  --leg NAME                 name recorded in args.json\n"
         "  --events FILE              write the bisect event log (docs/events.md)\n"
         "  --events-from-step S       log only steps >= S\n"
         "  --dry-run                  validate the flags, print the canonical config, exit\n"
         "  --dry-run-memory           print, as JSON, the memory a leg of this config needs\n"
         "                             and what its device has free (opens the CUDA module\n"
         "                             for --device cuda), exit\n"
         "  --progress MODE            auto (default: live on a terminal, else none), live\n"
         "                             (one line rewritten), plain (a line per step), off;\n"
         "                             the modes of `run --progress` (bare --progress: live)\n"
         "\nexit codes: 0 ok; 64 usage (bad, unknown or repeated flag, or --out locked by\n"
         "another process); 65 bad checkpoint; 66 missing input (or the checkpoint waited for\n"
         "will not come); 70 internal error; 74 I/O error (the message says why; a complete\n"
         "checkpoint in --out in the way; or a --step-lock FILE that cannot be opened or is not\n"
         "a regular file, refused before any training); 75 the config needs more memory than is\n"
         "available (need and availability named, nothing allocated); 125 --device cuda without\n"
         "a usable GPU or without the CUDA module.\n");
}

#define usage_error(...) rc_cli_usage_error("train", false, __VA_ARGS__)

int rc_cmd_train(int argc, char **argv) {
  rc_leg_proc proc;
  rc_leg_proc_init(&proc); /* first: its clock reading is "main" */
  int kept = 0;
  const char *priority = NULL;
  for (int i = 0; i < argc; i++) {
    if (i > 0 && !strcmp(argv[i], "--wait-for-checkpoint")) {
      proc.wait_for_checkpoint = true;
      continue;
    }
    bool lock = i > 0 && !strcmp(argv[i], "--step-lock");
    if (lock || (i > 0 && !strcmp(argv[i], "--step-priority"))) {
      const char **slot = lock ? &proc.step_lock : &priority;
      if (i + 1 >= argc) return usage_error("%s needs a value", argv[i]);
      if (*slot) return usage_error("%s given twice: give each flag once", argv[i]);
      *slot = argv[++i];
      continue;
    }
    argv[kept++] = argv[i];
  }
  argc = kept;
  if (priority && !proc.step_lock) return usage_error("--step-priority needs --step-lock FILE");
  if (priority && !rc_step_priority_parse(priority, &proc.step_priority))
    return usage_error("--step-priority: '%s' is not high or low", priority);
  if (proc.step_lock && !*proc.step_lock) return usage_error("--step-lock: empty path");
  rc_config cfg;
  rc_leg_opts leg;
  rc_err err = {0};
  rc_config_defaults(&cfg, &leg);
  int rc = rc_config_parse(argc, argv, &cfg, &leg, &err);
  if (rc == -1) {
    help();
    return 0;
  }
  if (rc) {
    fprintf(stderr, "resumecheck train: %s\n", err.msg);
    return rc;
  }
  if (leg.dry_run_memory) {
    rc = rc_leg_memory_report(&cfg, &leg, stdout, &err);
    if (rc) fprintf(stderr, "resumecheck train: %s\n", err.msg);
    return rc;
  }
  if (leg.dry_run) {
    char *s = rc_config_canonical(&cfg);
    printf("%s\n", s);
    free(s);
    return 0;
  }
  rc = rc_leg_run(&cfg, &leg, &proc, argc, argv, &err);
  if (rc) fprintf(stderr, "resumecheck train: %s\n", err.msg);
  return rc;
}
