/* cli.h — the subcommands of `resumecheck`. Each returns the process exit
 * code (docs/design.md §10) and handles its own --help. */
#ifndef RC_CLI_H
#define RC_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "base/error.h"
#include "base/flags.h"

int rc_cmd_train(int argc, char **argv);   /* one leg (cmd_train.c) */
int rc_cmd_run(int argc, char **argv);     /* the three legs and the checks (cmd_run.c) */
int rc_cmd_compare(int argc, char **argv); /* compare two checkpoints/shards/runs (cmd_compare.c) */
int rc_cmd_inspect(int argc, char **argv); /* list a shard (cmd_inspect.c) */
int rc_cmd_bugs(int argc, char **argv);    /* the resume-bug catalogue (cmd_bugs.c) */
int rc_cmd_bisect(int argc, char **argv);  /* first divergent operation (cmd_bisect.c) */

/* "resumecheck CMD: MESSAGE" on stderr, then "(see resumecheck CMD --help)"
 * when see_help; returns RC_EXIT_USAGE (main.c). */
__attribute__((format(printf, 3, 4))) int rc_cli_usage_error(const char *cmd, bool see_help,
                                                             const char *fmt, ...);

/* What a subcommand does with rc_flags_parse's result `rc`: prints its help
 * (stdout) or the version the reports carry, "resumecheck VERSION" (stdout),
 * and sets *code to 0; or prints "resumecheck CMD: MESSAGE" on stderr and
 * sets *code to err's code. Returns true when the command is done. */
bool rc_cli_flags_done(const char *cmd, const rc_flag_cmd *flags, int rc, const rc_err *err,
                       int *code);
/* RC_HELP_FORMAT=complete: --help prints the flag list of
 * rc_cli_print_flag_list instead of the help (complete.c), for the build's
 * completion and man page generators. */
bool rc_cli_help_is_list(void);
void rc_cli_print_flag_list(const rc_flag_cmd *cmd, FILE *out);
/* rc_flags_parse, then rc_cli_flags_done. */
bool rc_cli_parse(const char *cmd, const rc_flag_cmd *flags, int argc, char **argv,
                  rc_flag_args *args, int *code);

#endif
