/* cmd_bugs.c — `resumecheck bugs`: the injectable resume bugs (docs/design.md §8). */
#include <stdio.h>

#include "base/error.h"
#include "base/flags.h"
#include "cli/cli.h"
#include "core/config.h"

int rc_cmd_bugs(int argc, char **argv) {
  rc_flag_cmd cmd = {
      .usage = "usage: resumecheck bugs\n\nLists the resume bugs `--inject NAME` switches on, the "
               "real-world\n"
               "failure each models, and the signature `resumecheck run` reports for it.\n"
               "\nExit codes: 0 listed, 64 usage (an argument was given).\n"};
  int code;
  if (rc_cli_parse("bugs", &cmd, argc, argv, NULL, &code)) return code;
  int n;
  const rc_bug_info *bugs = rc_bug_catalogue(&n);
  for (int i = 0; i < n; i++)
    printf("%s\n  models:    %s\n  signature: %s\n", bugs[i].name, bugs[i].models,
           bugs[i].signature);
  return 0;
}
