/* main.c — `resumecheck SUBCOMMAND ...`: dispatch and top-level help. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "cli.h"
#include "harness/report.h" /* RC_VERSION */

int rc_cli_usage_error(const char *cmd, bool see_help, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "resumecheck %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  if (see_help) fprintf(stderr, "(see resumecheck %s --help)\n", cmd);
  va_end(ap);
  return RC_EXIT_USAGE;
}

bool rc_cli_flags_done(const char *cmd, const rc_flag_cmd *flags, int rc, const rc_err *err,
                       int *code) {
  *code = RC_OK;
  if (rc == RC_FLAGS_HELP && rc_cli_help_is_list())
    rc_cli_print_flag_list(flags, stdout);
  else if (rc == RC_FLAGS_HELP)
    rc_flags_print_help(flags, stdout);
  else if (rc == RC_FLAGS_VERSION)
    printf("resumecheck %s\n", RC_VERSION);
  else if (rc)
    *code = rc, fprintf(stderr, "resumecheck %s: %s\n", cmd, err->msg);
  return rc != 0;
}

bool rc_cli_parse(const char *cmd, const rc_flag_cmd *flags, int argc, char **argv,
                  rc_flag_args *args, int *code) {
  rc_err err = {0};
  int rc = rc_flags_parse(flags, argc, argv, args, &err);
  return rc_cli_flags_done(cmd, flags, rc, &err, code);
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: resumecheck SUBCOMMAND [flags]\n"
          "\n"
          "Checkpoint-resume determinism verifier: trains through to step N, trains to K and\n"
          "saves, resumes from K to N (three processes), and compares the state byte for byte.\n"
          "\n"
          "subcommands:\n"
          "  run      run the legs and the checks (A/A, RESUME, traces); the CI gate\n"
          "  train    run one leg (what `run` spawns)\n"
          "  compare  compare two checkpoints, shards or run directories\n"
          "  bisect   name the first operation that differs after a resume\n"
          "  inspect  list a shard's datasets, dtypes, shapes and hashes\n"
          "  bugs     list the injectable resume bugs and their signatures\n"
          "\n"
          "`resumecheck SUBCOMMAND --help` describes each; `--version` (after any subcommand, or\n"
          "alone) prints the version. Exit codes: 0 identical, 1 resume divergence, 2 A/A\n"
          "failure, 64 usage, 65 bad data, 66 missing input, 74 I/O error.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return RC_EXIT_USAGE;
  }
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } cmds[] = {{"train", rc_cmd_train},     {"run", rc_cmd_run},   {"compare", rc_cmd_compare},
              {"inspect", rc_cmd_inspect}, {"bugs", rc_cmd_bugs}, {"bisect", rc_cmd_bisect}};
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    if (rc_cli_help_is_list()) { /* the subcommands, one a line (complete.c) */
      for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) printf("%s\n", cmds[i].name);
      return 0;
    }
    usage(stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("resumecheck %s\n", RC_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(cmd, cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "resumecheck: unknown subcommand '%s'\n\n", cmd);
  usage(stderr);
  return RC_EXIT_USAGE;
}
