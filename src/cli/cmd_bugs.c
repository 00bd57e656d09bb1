/* cmd_bugs.c — placeholder until `resumecheck bugs` lands. */
#include <stdio.h>

#include "base/error.h"
#include "cli/cli.h"

int rc_cmd_bugs(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "resumecheck bugs: not implemented yet\n");
  return RC_EXIT_SOFTWARE;
}
