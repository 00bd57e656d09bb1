/* exec_template.c — splitting and expanding --train-cmd templates (see
 * exec_template.h). Values are substituted after the split so that paths
 * never pass through a shell. */
#include "exec_template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *const rc_template_placeholders[] = {"steps", "stop_at", "save_at", "resume_from",
                                                "out",   "leg",     "fusion",  NULL};

/* A growing byte buffer: the word being built. */
typedef struct {
  char *buf;
  size_t len, cap;
} sbuf;

static int sb_putc(sbuf *b, char c) {
  if (b->len + 2 > b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 64;
    char *p = realloc(b->buf, cap);
    if (!p) return -1;
    b->buf = p;
    b->cap = cap;
  }
  b->buf[b->len++] = c;
  b->buf[b->len] = 0;
  return 0;
}

static int sb_puts(sbuf *b, const char *s) {
  for (; *s; s++)
    if (sb_putc(b, *s)) return -1;
  return 0;
}

static int push_word(char ***words, int *n, int *cap, char *w) {
  if (*n + 2 > *cap) {
    int c = *cap ? 2 * *cap : 8;
    char **p = realloc(*words, (size_t)c * sizeof *p);
    if (!p) return -1;
    *words = p;
    *cap = c;
  }
  (*words)[(*n)++] = w;
  (*words)[*n] = NULL;
  return 0;
}

static bool known_placeholder(const char *name, size_t len) {
  for (int i = 0; rc_template_placeholders[i]; i++)
    if (strlen(rc_template_placeholders[i]) == len &&
        !strncmp(rc_template_placeholders[i], name, len))
      return true;
  return false;
}

/* Walks the placeholders of one word. For each "{name}" calls fn (when
 * non-NULL) and appends its value to out (when non-NULL); literal text and
 * "{{" / "}}" go to out as text. Returns 0, or -1 with *bad set to the
 * offending offset for an unknown or unterminated placeholder. */
typedef const char *(*lookup_fn)(const char *name, size_t len, void *ctx);

static int walk_word(const char *w, sbuf *out, lookup_fn fn, void *ctx, bool *any_empty,
                     size_t *bad) {
  for (size_t i = 0; w[i];) {
    if (w[i] == '{' && w[i + 1] == '{') {
      if (out && sb_putc(out, '{')) return -2;
      i += 2;
    } else if (w[i] == '}' && w[i + 1] == '}') {
      if (out && sb_putc(out, '}')) return -2;
      i += 2;
    } else if (w[i] == '{') {
      const char *end = strchr(w + i + 1, '}');
      size_t len = end ? (size_t)(end - (w + i + 1)) : 0;
      if (!end || !known_placeholder(w + i + 1, len)) {
        *bad = i;
        return -1;
      }
      if (fn) {
        const char *v = fn(w + i + 1, len, ctx);
        if (!v || !*v) {
          if (any_empty) *any_empty = true;
        } else if (out && sb_puts(out, v)) {
          return -2;
        }
      }
      i += len + 2;
    } else if (w[i] == '}') {
      *bad = i;
      return -1;
    } else {
      if (out && sb_putc(out, w[i])) return -2;
      i++;
    }
  }
  return 0;
}

void rc_template_free(rc_template *t) {
  if (!t) return;
  for (int i = 0; i < t->n; i++) free(t->words[i]);
  free(t->words);
  t->words = NULL;
  t->n = 0;
}

void rc_argv_free(char **argv) {
  if (!argv) return;
  for (char **p = argv; *p; p++) free(*p);
  free(argv);
}

/* Moves the word being built (possibly "", from '' or "") into t. */
static int end_word(rc_template *t, int *cap, sbuf *cur) {
  char *w = cur->buf ? cur->buf : strdup("");
  if (!w) return -1;
  *cur = (sbuf){0};
  if (push_word(&t->words, &t->n, cap, w)) {
    free(w);
    return -1;
  }
  return 0;
}

enum { LEX_OOM = -1 };

/* A quoted part of a word, from the quote at text[*i]: single quotes keep
 * everything; double quotes take a backslash before " \\ $ ` as the shell
 * does. *i ends after the closing quote. RC_OK, LEX_OOM, or
 * RC_EXIT_USAGE for an unterminated quote. */
static int lex_quoted(const char *text, size_t *i, sbuf *cur, rc_err *err) {
  char q = text[*i];
  size_t j = *i + 1;
  for (;;) {
    if (!text[j])
      return rc_fail(err, RC_EXIT_USAGE, "--train-cmd: unterminated %s quote at offset %zu",
                     q == '\'' ? "single" : "double", *i);
    if (text[j] == q) break;
    if (q == '"' && text[j] == '\\' && text[j + 1] && strchr("\"\\$`", text[j + 1])) j++;
    if (sb_putc(cur, text[j])) return LEX_OOM;
    j++;
  }
  *i = j + 1;
  return RC_OK;
}

/* Every placeholder of every word is one this tool fills. */
static int check_placeholders(const rc_template *t, rc_err *err) {
  for (int w = 0; w < t->n; w++) {
    size_t bad = 0;
    if (walk_word(t->words[w], NULL, NULL, NULL, NULL, &bad) == -1)
      return rc_fail(err, RC_EXIT_USAGE,
                     "--train-cmd: word %d ('%s'): unknown or unterminated placeholder at '%s' "
                     "(placeholders: {steps} {stop_at} {save_at} {resume_from} {out} {leg} "
                     "{fusion}; write {{ and }} for literal braces)",
                     w + 1, t->words[w], t->words[w] + bad);
  }
  return RC_OK;
}

int rc_template_parse(const char *text, rc_template *t, rc_err *err) {
  t->words = NULL;
  t->n = 0;
  int cap = 0;
  sbuf cur = {0};
  bool in_word = false;
  size_t i = 0;
  int rc = RC_OK;
  while (text[i]) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) {
        if (end_word(t, &cap, &cur)) goto oom;
        in_word = false;
      }
      i++;
      continue;
    }
    in_word = true;
    if (c == '\'' || c == '"') {
      int q = lex_quoted(text, &i, &cur, err);
      if (q == LEX_OOM) goto oom;
      if ((rc = q)) goto fail;
    } else if (c == '\\') {
      if (!text[i + 1]) {
        rc = rc_fail(err, RC_EXIT_USAGE, "--train-cmd: trailing backslash");
        goto fail;
      }
      if (sb_putc(&cur, text[i + 1])) goto oom;
      i += 2;
    } else if (strchr("|&;<>()$`", c)) {
      rc = rc_fail(err, RC_EXIT_USAGE,
                   "--train-cmd: unquoted '%c' at offset %zu: the template is not run by a shell "
                   "(quote it, or run 'bash -c SCRIPT _ {out} ...' and use \"$1\" in SCRIPT)",
                   c, i);
      goto fail;
    } else {
      if (sb_putc(&cur, c)) goto oom;
      i++;
    }
  }
  if (in_word && end_word(t, &cap, &cur)) goto oom;
  if (t->n == 0) {
    rc = rc_fail(err, RC_EXIT_USAGE, "--train-cmd: empty template");
    goto fail;
  }
  if ((rc = check_placeholders(t, err))) goto fail;
  return RC_OK;
oom:
  rc = rc_fail(err, RC_EXIT_SOFTWARE, "--train-cmd: out of memory");
fail:
  free(cur.buf);
  rc_template_free(t);
  return rc;
}

typedef struct {
  const char *name;
  bool found;
} find_ctx;

static const char *find_name(const char *name, size_t len, void *ctx) {
  find_ctx *f = ctx;
  if (strlen(f->name) == len && !strncmp(f->name, name, len)) f->found = true;
  return "";
}

bool rc_template_uses(const rc_template *t, const char *name) {
  find_ctx f = {name, false};
  for (int w = 0; w < t->n; w++) {
    size_t bad = 0;
    walk_word(t->words[w], NULL, find_name, &f, NULL, &bad);
  }
  return f.found;
}

typedef struct {
  const rc_template_var *vars;
  int n;
} var_table;

static const char *lookup_var(const char *name, size_t len, void *ctx) {
  const var_table *vt = ctx;
  for (int i = 0; i < vt->n; i++)
    if (strlen(vt->vars[i].name) == len && !strncmp(vt->vars[i].name, name, len))
      return vt->vars[i].value;
  return NULL;
}

int rc_template_expand(const rc_template *t, const rc_template_var *vars, int n_vars,
                       char ***argv_out, int *argc_out, rc_err *err) {
  var_table vt = {vars, n_vars};
  char **argv = NULL;
  int argc = 0, cap = 0;
  for (int w = 0; w < t->n; w++) {
    sbuf out = {0};
    bool empty = false;
    size_t bad = 0;
    int r = walk_word(t->words[w], &out, lookup_var, &vt, &empty, &bad);
    if (r == -1) {
      free(out.buf);
      rc_argv_free(argv);
      return rc_fail(err, RC_EXIT_USAGE, "--train-cmd: bad placeholder in '%s'", t->words[w]);
    }
    if (r == -2) goto oom;
    if (empty) { /* an option whose value this leg does not have */
      free(out.buf);
      continue;
    }
    if (!out.buf && !(out.buf = strdup(""))) goto oom;
    if (push_word(&argv, &argc, &cap, out.buf)) {
      free(out.buf);
      goto oom;
    }
  }
  if (argc == 0) {
    free(argv);
    return rc_fail(err, RC_EXIT_USAGE, "--train-cmd: every word expanded to nothing");
  }
  *argv_out = argv;
  *argc_out = argc;
  return RC_OK;
oom:
  rc_argv_free(argv);
  return rc_fail(err, RC_EXIT_SOFTWARE, "--train-cmd: out of memory");
}
