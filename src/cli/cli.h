/* cli.h — the subcommands of `resumecheck`. Each returns the process exit
 * code (docs/design.md §10) and handles its own --help. */
#ifndef RC_CLI_H
#define RC_CLI_H

int rc_cmd_train(int argc, char **argv);   /* one leg (cmd_train.c) */
int rc_cmd_run(int argc, char **argv);     /* the three legs and the checks (cmd_run.c) */
int rc_cmd_compare(int argc, char **argv); /* compare two checkpoints/shards/runs (cmd_compare.c) */
int rc_cmd_inspect(int argc, char **argv); /* list a shard (cmd_inspect.c) */
int rc_cmd_bugs(int argc, char **argv);    /* the resume-bug catalogue (cmd_bugs.c) */
int rc_cmd_bisect(int argc, char **argv);  /* first divergent operation (cmd_bisect.c) */

#endif
