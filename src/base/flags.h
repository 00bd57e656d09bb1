/* flags.h — one command-line flag facility for every subcommand
 * (docs/design.md §10): a flag is a table row, and one parser, one help
 * printer and one "did you mean" lookup read the tables.
 *
 * A row names the flag, its aliases (other spellings, e.g. Megatron-LM's),
 * its kind, where its value goes (an offset into the group's target struct,
 * or a callback), its range or choices, its help text and its tags. The
 * tables are const; the targets are given at parse time, so nothing here
 * holds mutable state.
 *
 * Syntax, the same for every subcommand: `--flag value` and `--flag=value`
 * mean the same; a bool is `--flag` and takes no value; `--` ends the flags
 * (what follows is positional); a flag given twice is refused unless it is
 * RC_FLAG_REPEATABLE; an unknown flag is refused naming the nearest known
 * one; `--help`/`-h` and `--version` anywhere before `--` win over the rest.
 * Every refusal is RC_EXIT_USAGE with the reason in an rc_err; nothing
 * aborts. */
#ifndef RC_BASE_FLAGS_H
#define RC_BASE_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/error.h"

typedef enum {
  RC_FLAG_BOOL,   /* `--flag`: sets a bool (false with RC_FLAG_CLEARS) */
  RC_FLAG_INT,    /* int in [min, max] */
  RC_FLAG_INT64,  /* int64_t in [min, max] */
  RC_FLAG_UINT64, /* uint64_t, any non-negative decimal */
  RC_FLAG_DOUBLE, /* double in [min, max], not NaN */
  RC_FLAG_STRING, /* size > 0: copied into char[size]; size 0: a const char * into argv.
                     With choices: must be one of them */
  RC_FLAG_CHOICE  /* one of choices: its index into an int, or into a bool (size 1) */
} rc_flag_kind;

enum {
  RC_FLAG_REPEATABLE = 1u << 0, /* may be given more than once (each use applied in order) */
  RC_FLAG_FIRST = 1u << 1,      /* applied before every other flag, wherever it is (a preset) */
  RC_FLAG_CLEARS = 1u << 2,     /* a bool that sets its field to false */
  RC_FLAG_OPTIONAL = 1u << 3,   /* the value may be left out (then `implicit`); a separate
                                   value is taken only when it does not start with '-' */
  RC_FLAG_HIDDEN = 1u << 4,     /* parsed, not listed in --help (its group's title says why) */
};

/* A flag's own parser: value is NULL for a bool; flag is the spelling given. */
typedef int (*rc_flag_set_fn)(void *target, const char *flag, const char *value, rc_err *err);

typedef struct {
  const char *name;    /* "--hidden" */
  const char *aliases; /* other spellings, space-separated ("--hidden-size"), or NULL */
  rc_flag_kind kind;
  size_t offset, size;        /* where in the group's target, and how big (strings: capacity) */
  double min, max;            /* INT, INT64, DOUBLE */
  const char *const *choices; /* NULL-terminated: CHOICE, or STRING restricted to them */
  rc_flag_set_fn set;         /* when set: called instead of storing */
  const char *metavar;        /* help: "N", "DIR"; NULL: "V" */
  const char *help;           /* may hold '\n': continuation lines are indented */
  unsigned tags;              /* RC_FLAG_* above */
  const char *key;            /* the name in a serialised record (the canonical config) */
  const char *conflicts;      /* flags that contradict this one, space-separated: this one
                                 and any of them given together is refused */
  const char *implicit;       /* RC_FLAG_OPTIONAL: the value when none is given */
} rc_flag_spec;

/* One table and what its offsets are into. */
typedef struct {
  const char *title; /* help heading; NULL: no heading */
  const rc_flag_spec *flags;
  int n;
  void *target;
} rc_flag_group;

typedef struct {
  const char *usage;    /* help: the usage lines and the description, before the flags */
  const char *epilogue; /* help: after the flags (exit codes); may be NULL */
  const rc_flag_group *groups;
  int n_groups;
  bool positionals;     /* takes non-flag arguments */
  bool forward_unknown; /* unknown arguments (and from `--` on, all) go to rest, in order */
  bool no_help;         /* --help and --version are not this parser's (an earlier stage) */
} rc_flag_cmd;

/* What is left after the flags: caller-owned arrays of argc entries each. */
typedef struct {
  char **positional;
  int n_positional;
  char **rest;
  int n_rest;
} rc_flag_args;

enum { RC_FLAGS_HELP = -1, RC_FLAGS_VERSION = -2 };
#define RC_FLAGS_MAX 256 /* rows in all the groups of one command */

/* Parses argv[1..argc-1] (argv[0] is the subcommand). Returns 0,
 * RC_FLAGS_HELP or RC_FLAGS_VERSION (nothing else applied), or
 * RC_EXIT_USAGE with the reason in err. args may be NULL when the command
 * takes neither positionals nor forwards. */
int rc_flags_parse(const rc_flag_cmd *cmd, int argc, char **argv, rc_flag_args *args, rc_err *err);

/* Stores `value` (NULL for a bool) into target as row f would from the
 * command line (range, choices, setter), naming `flag` in a refusal: for
 * values that come from elsewhere than argv (`train --config FILE`). */
int rc_flags_apply(const rc_flag_spec *f, void *target, const char *flag, const char *value,
                   rc_err *err);

/* The row named (or aliased) `name` ("--x", or "--x=v": the name part), or NULL. */
const rc_flag_spec *rc_flags_find(const rc_flag_cmd *cmd, const char *name, int *group);

/* The known name or alias nearest to `name` by edit distance, when it is
 * close enough to be a likely typo; else NULL. */
const char *rc_flags_suggest(const rc_flag_cmd *cmd, const char *name);

/* usage, then each group's rows ("  --name METAVAR  help"), then epilogue. */
void rc_flags_print_help(const rc_flag_cmd *cmd, FILE *out);

#endif
