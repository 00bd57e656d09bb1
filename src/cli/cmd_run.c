/* cmd_run.c — placeholder until `resumecheck run` lands. */
#include <stdio.h>

#include "base/error.h"
#include "cli/cli.h"

int rc_cmd_run(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "resumecheck run: not implemented yet\n");
  return RC_EXIT_SOFTWARE;
}
