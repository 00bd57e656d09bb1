/* cmd_train.c — placeholder until `resumecheck train` lands. */
#include <stdio.h>

#include "base/error.h"
#include "cli/cli.h"

int rc_cmd_train(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "resumecheck train: not implemented yet\n");
  return RC_EXIT_SOFTWARE;
}
