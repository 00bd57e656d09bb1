/* cmd_train.c — `resumecheck train`: one leg, in this process.
 *
 * --wait-for-checkpoint is a flag of the process, not of the config (it
 * changes when the leg loads, never what it computes), so it is taken out
 * of argv here, before the shared config parser sees the rest. */
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
         "  --stop-at K                end the process after step K; --steps stays the horizon\n"
         "  --resume-from DIR          continue from DIR = .../ckpt/iter_NNNNNNN\n"
         "  --wait-for-checkpoint      set up backend and model first, then wait until\n"
         "                             --resume-from DIR is complete (COMPLETE), then load;\n"
         "                             `run` starts its resume legs this way\n"
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
         "will not come); 70 internal error; 74 I/O error (the message says why; or a complete\n"
         "checkpoint in --out in the way); 75 the config needs more memory than is available\n"
         "(need and availability named, nothing allocated); 125 --device cuda without a usable\n"
         "GPU or without the CUDA module.\n");
}

int rc_cmd_train(int argc, char **argv) {
  rc_leg_proc proc;
  rc_leg_proc_init(&proc); /* first: its clock reading is "main" */
  int kept = 0;
  for (int i = 0; i < argc; i++) {
    if (i > 0 && !strcmp(argv[i], "--wait-for-checkpoint")) {
      proc.wait_for_checkpoint = true;
      continue;
    }
    argv[kept++] = argv[i];
  }
  argc = kept;
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
