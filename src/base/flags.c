/* flags.c — the flag parser, help printer and nearest-name lookup of
 * flags.h. Two passes over argv: the first checks every token (unknown,
 * repeated, contradicting, missing values) and applies RC_FLAG_FIRST rows,
 * the second applies the rest in order, so a preset anywhere is overridden
 * by explicit flags and a refused command line has applied nothing but its
 * presets. */
#include "base/flags.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HELP_COL 28 /* width of the "--name METAVAR" column */

/* The name part of a token: "--x=v" -> "--x" (into buf), else the token. */
static const char *name_part(const char *a, char *buf, size_t cap) {
  const char *eq = strncmp(a, "--", 2) ? NULL : strchr(a, '=');
  if (!eq) return a;
  size_t n = (size_t)(eq - a);
  if (n >= cap) n = cap - 1;
  memcpy(buf, a, n);
  buf[n] = 0;
  return buf;
}

/* Does the space-separated list hold `name`? */
static bool in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    while (*p == ' ') p++;
    size_t w = strcspn(p, " ");
    if (w == n && !strncmp(p, name, n)) return true;
    p += w;
  }
  return false;
}

/* Global row index (over all groups) of the row named `name`, or -1. */
static int find_index(const rc_flag_cmd *cmd, const char *name, int *group) {
  int idx = 0;
  for (int g = 0; g < cmd->n_groups; g++)
    for (int k = 0; k < cmd->groups[g].n; k++, idx++) {
      const rc_flag_spec *f = &cmd->groups[g].flags[k];
      if (!strcmp(f->name, name) || in_list(f->aliases, name)) {
        if (group) *group = g;
        return idx;
      }
    }
  return -1;
}

static const rc_flag_spec *row_at(const rc_flag_cmd *cmd, int idx) {
  for (int g = 0; g < cmd->n_groups; g++) {
    if (idx < cmd->groups[g].n) return &cmd->groups[g].flags[idx];
    idx -= cmd->groups[g].n;
  }
  return NULL;
}

const rc_flag_spec *rc_flags_find(const rc_flag_cmd *cmd, const char *name, int *group) {
  char buf[128];
  int idx = find_index(cmd, name_part(name, buf, sizeof buf), group);
  return idx < 0 ? NULL : row_at(cmd, idx);
}

/* Levenshtein distance of a and b (each cut at 63 bytes). */
static int edit_distance(const char *a, const char *b) {
  int row[64], n = (int)strlen(b), m = (int)strlen(a);
  if (n > 63) n = 63;
  if (m > 63) m = 63;
  for (int j = 0; j <= n; j++) row[j] = j;
  for (int i = 1; i <= m; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= n; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[n];
}

/* Nearest of one spelling; *best and *out keep the winner so far. */
static void consider(const char *name, const char *cand, size_t len, int *best, const char **out) {
  char buf[64];
  if (len >= sizeof buf) return;
  memcpy(buf, cand, len);
  buf[len] = 0;
  int d = edit_distance(name, buf);
  if (d < *best) *best = d, *out = cand;
}

const char *rc_flags_suggest(const rc_flag_cmd *cmd, const char *name) {
  char buf[128];
  name = name_part(name, buf, sizeof buf);
  /* a likely typo: one edit in a short name, two in a longer one */
  int limit = strlen(name) >= 6 ? 2 : 1, best = limit + 1;
  const char *out = NULL;
  for (int g = 0; g < cmd->n_groups; g++)
    for (int k = 0; k < cmd->groups[g].n; k++) {
      const rc_flag_spec *f = &cmd->groups[g].flags[k];
      consider(name, f->name, strlen(f->name), &best, &out);
      for (const char *p = f->aliases; p && *p;) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (w) consider(name, p, w, &best, &out);
        p += w;
      }
    }
  return out;
}

static int parse_long(const char *flag, const char *v, double lo, double hi, long long *out,
                      rc_err *err) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end)
    return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not an integer", flag, v);
  if ((double)x < lo || (double)x > hi)
    return rc_fail(err, RC_EXIT_USAGE, "%s: %lld is out of range [%.0f, %.0f]", flag, x, lo, hi);
  *out = x;
  return 0;
}

static int choice_index(const char *flag, const char *v, const char *const *names, int *out,
                        rc_err *err) {
  for (int i = 0; names[i]; i++)
    if (!strcmp(v, names[i])) return *out = i, 0;
  char list[256] = "";
  for (int i = 0; names[i]; i++) {
    if (i) strncat(list, " | ", sizeof list - strlen(list) - 1);
    strncat(list, names[i], sizeof list - strlen(list) - 1);
  }
  return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not one of %s", flag, v, list);
}

/* Stores value v of row f (spelt `flag`) into target. */
static int apply(const rc_flag_spec *f, void *target, const char *flag, const char *v,
                 rc_err *err) {
  int idx;
  if (f->set && f->choices && v && choice_index(flag, v, f->choices, &idx, err)) return err->code;
  if (f->set) return f->set(target, flag, v, err);
  char *p = (char *)target + f->offset;
  long long x;
  switch (f->kind) {
  case RC_FLAG_BOOL:
    *(bool *)p = !(f->tags & RC_FLAG_CLEARS);
    return 0;
  case RC_FLAG_INT:
    if (parse_long(flag, v, f->min, f->max, &x, err)) return err->code;
    *(int *)p = (int)x;
    return 0;
  case RC_FLAG_INT64:
    if (parse_long(flag, v, f->min, f->max, &x, err)) return err->code;
    *(int64_t *)p = (int64_t)x;
    return 0;
  case RC_FLAG_UINT64: {
    char *end;
    errno = 0;
    unsigned long long u = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-')
      return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not a non-negative integer", flag, v);
    *(uint64_t *)p = u;
    return 0;
  }
  case RC_FLAG_DOUBLE: {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || d != d)
      return rc_fail(err, RC_EXIT_USAGE, "%s: '%s' is not a number", flag, v);
    if (d < f->min || d > f->max)
      return rc_fail(err, RC_EXIT_USAGE, "%s: %g is out of range [%g, %g]", flag, d, f->min,
                     f->max);
    *(double *)p = d;
    return 0;
  }
  case RC_FLAG_STRING:
    if (f->choices && choice_index(flag, v, f->choices, &idx, err)) return err->code;
    if (!f->size) {
      *(const char **)p = v;
      return 0;
    }
    if (strlen(v) >= f->size)
      return rc_fail(err, RC_EXIT_USAGE, "%s: value longer than %zu bytes", flag, f->size - 1);
    memcpy(p, v, strlen(v) + 1);
    return 0;
  case RC_FLAG_CHOICE:
    if (choice_index(flag, v, f->choices, &idx, err)) return err->code;
    if (f->size == sizeof(bool))
      *(bool *)p = idx != 0;
    else
      *(int *)p = idx;
    return 0;
  }
  return rc_fail(err, RC_EXIT_SOFTWARE, "%s: unknown flag kind %d", flag, (int)f->kind);
}

int rc_flags_apply(const rc_flag_spec *f, void *target, const char *flag, const char *value,
                   rc_err *err) {
  return apply(f, target, flag, value, err);
}

/* Has a row that contradicts row idx been seen? Names the pair in err. */
static int check_conflict(const rc_flag_cmd *cmd, int idx, const unsigned char *seen, int total,
                          rc_err *err) {
  const rc_flag_spec *f = row_at(cmd, idx);
  for (int j = 0; j < total; j++) {
    const rc_flag_spec *o = row_at(cmd, j);
    if (!seen[j] || j == idx) continue;
    if (in_list(f->conflicts, o->name))
      return rc_fail(err, RC_EXIT_USAGE,
                     "%s and %s contradict each other (both set one setting: give one)", o->name,
                     f->name);
    if (in_list(o->conflicts, f->name))
      return rc_fail(err, RC_EXIT_USAGE,
                     "%s and %s contradict each other (both set one setting: give one)", f->name,
                     o->name);
  }
  return 0;
}

static void push(char **list, int *n, char *a) {
  if (list) list[*n] = a;
  (*n)++;
}

int rc_flags_parse(const rc_flag_cmd *cmd, int argc, char **argv, rc_flag_args *args, rc_err *err) {
  rc_flag_args none = {0};
  if (!args) args = &none;
  args->n_positional = args->n_rest = 0;
  if (!cmd->no_help)
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
      if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return RC_FLAGS_HELP;
      if (!strcmp(argv[i], "--version")) return RC_FLAGS_VERSION;
    }
  int total = 0;
  for (int g = 0; g < cmd->n_groups; g++) total += cmd->groups[g].n;
  if (total > RC_FLAGS_MAX)
    return rc_fail(err, RC_EXIT_SOFTWARE, "%d flags: more than RC_FLAGS_MAX", total);
  unsigned char seen[RC_FLAGS_MAX] = {0};
  for (int pass = 0; pass < 2; pass++) {
    bool ended = false; /* after `--` */
    for (int i = 1; i < argc; i++) {
      char *a = argv[i];
      if (!ended && !strcmp(a, "--")) {
        ended = true;
        if (!pass && cmd->forward_unknown) push(args->rest, &args->n_rest, a);
        continue;
      }
      if (ended || a[0] != '-' || !a[1]) { /* not a flag */
        if (pass) continue;
        if (cmd->forward_unknown && (ended || !cmd->positionals))
          push(args->rest, &args->n_rest, a);
        else if (cmd->positionals)
          push(args->positional, &args->n_positional, a);
        else
          return rc_fail(err, RC_EXIT_USAGE, "unexpected argument '%s' (see --help)", a);
        continue;
      }
      char buf[128];
      const char *name = name_part(a, buf, sizeof buf);
      int g = 0, idx = find_index(cmd, name, &g);
      if (idx < 0) {
        if (pass) continue;
        if (cmd->forward_unknown) {
          push(args->rest, &args->n_rest, a);
          continue;
        }
        const char *near = rc_flags_suggest(cmd, name);
        if (near)
          return rc_fail(err, RC_EXIT_USAGE, "unknown flag '%s' (did you mean %.*s? see --help)", a,
                         (int)strcspn(near, " "), near);
        return rc_fail(err, RC_EXIT_USAGE, "unknown flag '%s' (see --help)", a);
      }
      const rc_flag_spec *f = row_at(cmd, idx);
      const char *v = NULL, *eq = name == buf ? a + strlen(buf) : NULL;
      if (f->kind == RC_FLAG_BOOL) {
        if (eq) return rc_fail(err, RC_EXIT_USAGE, "%s takes no value", name);
      } else if (eq) {
        v = eq + 1;
      } else if (f->tags & RC_FLAG_OPTIONAL) {
        v = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : f->implicit;
      } else {
        if (i + 1 >= argc) return rc_fail(err, RC_EXIT_USAGE, "%s needs a value", name);
        v = argv[++i];
      }
      if (!pass) {
        if (seen[idx] && !(f->tags & RC_FLAG_REPEATABLE)) {
          if (strcmp(name, f->name)) /* an alias: say which flag it spells */
            return rc_fail(err, RC_EXIT_USAGE, "%s given twice: give each flag once (%s is %s)",
                           f->name, name, f->name);
          return rc_fail(err, RC_EXIT_USAGE, "%s given twice: give each flag once", f->name);
        }
        seen[idx] = 1;
        if (check_conflict(cmd, idx, seen, total, err)) return err->code;
      }
      if (!pass == !!(f->tags & RC_FLAG_FIRST) && apply(f, cmd->groups[g].target, name, v, err))
        return err->code;
    }
  }
  return 0;
}

/* Prints text, indenting the lines after the first to the help column. */
static void print_indented(FILE *out, const char *text) {
  for (const char *p = text; *p; p++) {
    fputc(*p, out);
    if (*p == '\n') fprintf(out, "%*s", HELP_COL + 3, "");
  }
}

void rc_flags_print_help(const rc_flag_cmd *cmd, FILE *out) {
  fputs(cmd->usage, out);
  for (int g = 0; g < cmd->n_groups; g++) {
    const rc_flag_group *grp = &cmd->groups[g];
    if (grp->title) fprintf(out, "\n%s\n", grp->title);
    for (int k = 0; k < grp->n; k++) {
      const rc_flag_spec *f = &grp->flags[k];
      if (f->tags & RC_FLAG_HIDDEN) continue;
      char left[128];
      const char *mv = f->metavar ? f->metavar : "V";
      if (f->kind == RC_FLAG_BOOL)
        snprintf(left, sizeof left, "%s", f->name);
      else if (f->tags & RC_FLAG_OPTIONAL)
        snprintf(left, sizeof left, "%s [%s]", f->name, mv);
      else
        snprintf(left, sizeof left, "%s %s", f->name, mv);
      if (strlen(left) <= HELP_COL)
        fprintf(out, "  %-*s ", HELP_COL, left);
      else
        fprintf(out, "  %s\n%*s", left, HELP_COL + 3, "");
      print_indented(out, f->help ? f->help : "");
      if (f->aliases && *f->aliases) {
        fprintf(out, "\n%*s(also %s)", HELP_COL + 3, "", f->aliases);
      }
      fputc('\n', out);
    }
  }
  if (cmd->epilogue) fputs(cmd->epilogue, out);
}
