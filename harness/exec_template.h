/* exec_template.h — the --train-cmd template of exec trainers
 * (docs/exec-trainer.md).
 *
 * The template is split into words once, with shell-like quoting rules for
 * the template text itself: '...' is literal, "..." honours \" \\ \$ \` and
 * a backslash outside quotes escapes the next character. No shell ever sees
 * the words: there is no expansion, globbing, redirection or command
 * substitution, so unquoted shell operators (| & ; < > ( ) $ `) are refused
 * rather than passed on literally by surprise.
 *
 * Placeholders ({steps} {stop_at} {save_at} {resume_from} {out} {leg}
 * {fusion}) are substituted inside each word after splitting, so a value
 * with spaces, quotes or "$(...)" stays one literal argument. A word that
 * contains a placeholder whose value is empty is dropped entirely, which is
 * how optional options are written: "--resume-from={resume_from}". "{{" and
 * "}}" stand for literal braces. */
#ifndef RC_HARNESS_EXEC_TEMPLATE_H
#define RC_HARNESS_EXEC_TEMPLATE_H

#include <stdbool.h>

#include "base/error.h"

typedef struct {
  char **words; /* owned, quotes removed, placeholders still in place */
  int n;
} rc_template;

typedef struct {
  const char *name;  /* "steps", without braces */
  const char *value; /* "" or NULL: the placeholder is empty */
} rc_template_var;

/* The placeholders a template may use, NULL-terminated. */
extern const char *const rc_template_placeholders[];

/* Splits text into words and checks every placeholder name. RC_EXIT_USAGE
 * with a message naming the offset on unbalanced quotes, a trailing
 * backslash, an unquoted shell operator, an unknown placeholder or an empty
 * template. */
int rc_template_parse(const char *text, rc_template *t, rc_err *err);
void rc_template_free(rc_template *t);

/* True when some word uses {name}. */
bool rc_template_uses(const rc_template *t, const char *name);

/* Substitutes vars into a NULL-terminated argv (owned by the caller; free
 * with rc_argv_free). Words with an empty placeholder are dropped.
 * RC_EXIT_USAGE if nothing is left to execute. */
int rc_template_expand(const rc_template *t, const rc_template_var *vars, int n_vars,
                       char ***argv_out, int *argc_out, rc_err *err);

void rc_argv_free(char **argv);

#endif
