/* cmd_inspect.c — placeholder until `resumecheck inspect` lands. */
#include <stdio.h>

#include "base/error.h"
#include "cli/cli.h"

int rc_cmd_inspect(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "resumecheck inspect: not implemented yet\n");
  return RC_EXIT_SOFTWARE;
}
