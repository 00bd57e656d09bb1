/* cmd_train.c — `resumecheck train`: one leg, in this process. */
#include <stdio.h>
#include <stdlib.h>

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
         "  --device cpu|cuda|auto     backend (default cpu)\n"
         "  --leg NAME                 name recorded in args.json\n"
         "  --events FILE              write the bisect event log (docs/events.md)\n"
         "  --events-from-step S       log only steps >= S\n"
         "  --dry-run                  validate the flags, print the canonical config, exit\n"
         "  --progress MODE            auto (default: live on a terminal, else none), live\n"
         "                             (one line rewritten), plain (a line per step), off;\n"
         "                             the modes of `run --progress` (bare --progress: live)\n"
         "\nexit codes: 0 ok; 64 usage (bad, unknown or repeated flag); 65 bad checkpoint;\n"
         "66 missing input; 70 internal error; 74 I/O error (the message says why); 75 the\n"
         "config needs more memory than is available (need and availability named, nothing\n"
         "allocated); 125 --device cuda without a usable GPU.\n");
}

int rc_cmd_train(int argc, char **argv) {
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
  if (leg.dry_run) {
    char *s = rc_config_canonical(&cfg);
    printf("%s\n", s);
    free(s);
    return 0;
  }
  rc = rc_leg_run(&cfg, &leg, argc, argv, &err);
  if (rc) fprintf(stderr, "resumecheck train: %s\n", err.msg);
  return rc;
}
