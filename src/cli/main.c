/* main.c — `resumecheck SUBCOMMAND ...`: dispatch and top-level help. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "cli.h"

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
          "`resumecheck SUBCOMMAND --help` describes each. Exit codes: 0 identical, 1 resume\n"
          "divergence, 2 A/A failure, 64 usage, 65 bad data, 66 missing input, 74 I/O error.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return RC_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return 0;
  }
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } cmds[] = {{"train", rc_cmd_train},     {"run", rc_cmd_run},   {"compare", rc_cmd_compare},
              {"inspect", rc_cmd_inspect}, {"bugs", rc_cmd_bugs}, {"bisect", rc_cmd_bisect}};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(cmd, cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "resumecheck: unknown subcommand '%s'\n\n", cmd);
  usage(stderr);
  return RC_EXIT_USAGE;
}
