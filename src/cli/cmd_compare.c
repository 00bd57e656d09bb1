/* cmd_compare.c — placeholder until `resumecheck compare` lands. */
#include <stdio.h>

#include "base/error.h"
#include "cli/cli.h"

int rc_cmd_compare(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "resumecheck compare: not implemented yet\n");
  return RC_EXIT_SOFTWARE;
}
