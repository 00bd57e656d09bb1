/* cmd_bisect.c — placeholder until `resumecheck bisect` lands. */
#include <stdio.h>

#include "base/error.h"
#include "cli/cli.h"

int rc_cmd_bisect(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "resumecheck bisect: not implemented yet\n");
  return RC_EXIT_SOFTWARE;
}
