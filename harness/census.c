/* census.c — parsing two state censuses and naming the fields that differ
 * (harness/census.h, docs/census.md).
 *
 * A census is small (a line per tensor and per module), so both files are
 * read whole, split in place into lines and columns, sorted by field name
 * for matching, and reported in the through file's order. */
#include "harness/census.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/json.h"

/* A census of gpu-small is ~200 KB; anything past this is not one. */
#define CENSUS_MAX_BYTES (64u << 20)

typedef struct {
  const char *field, *value, *note; /* point into the file's text */
  bool saved;
  int order; /* line order in its file */
} entry;

typedef struct {
  char *text;
  entry *e;
  int n;
} census;

static void census_free(census *c) {
  free(c->text);
  free(c->e);
  memset(c, 0, sizeof *c);
}

static int by_field(const void *a, const void *b) {
  return strcmp(((const entry *)a)->field, ((const entry *)b)->field);
}

static int by_order(const void *a, const void *b) {
  return ((const entry *)a)->order - ((const entry *)b)->order;
}

/* Splits the text into entries (sorted by field). */
static int parse(const char *path, census *c, rc_err *err) {
  memset(c, 0, sizeof *c);
  size_t n = 0;
  int rc = rc_read_regular_file(path, CENSUS_MAX_BYTES, false, &c->text, &n, err);
  if (rc) return rc;
  if (memchr(c->text, 0, n)) {
    census_free(c);
    return rc_fail(err, RC_EXIT_DATAERR, "%s: a census is text, this file holds NUL bytes", path);
  }
  int lines = 1;
  for (size_t i = 0; i < n; i++) lines += c->text[i] == '\n';
  c->e = calloc((size_t)lines, sizeof *c->e);
  if (!c->e) {
    census_free(c);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  char *p = c->text;
  for (int line = 1; *p; line++) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = 0;
    char *next = nl ? nl + 1 : p + strlen(p);
    if (*p && *p != '#') {
      char *col[4] = {p, NULL, NULL, NULL};
      int ncol = 1;
      for (char *t = p; *t && ncol < 4; t++)
        if (*t == '\t') *t = 0, col[ncol++] = t + 1;
      bool saved = ncol >= 3 && !strcmp(col[1], "saved");
      bool local = ncol >= 3 && !strcmp(col[1], "local");
      if (ncol < 3 || !*col[0] || (!saved && !local)) {
        census_free(c);
        return rc_fail(err, RC_EXIT_DATAERR,
                       "%s:%d: not a census line (FIELD<TAB>saved|local<TAB>VALUE[<TAB>NOTE])",
                       path, line);
      }
      c->e[c->n++] = (entry){col[0], col[2], ncol == 4 ? col[3] : NULL, saved, c->n};
    }
    p = next;
  }
  qsort(c->e, (size_t)c->n, sizeof *c->e, by_field);
  for (int i = 1; i < c->n; i++)
    if (!strcmp(c->e[i].field, c->e[i - 1].field)) {
      int rc2 = rc_fail(err, RC_EXIT_DATAERR, "%s: field %s appears twice", path, c->e[i].field);
      census_free(c);
      return rc2;
    }
  return RC_OK;
}

static const entry *find(const census *c, const char *field) {
  entry key = {field, NULL, NULL, false, 0};
  return bsearch(&key, c->e, (size_t)c->n, sizeof *c->e, by_field);
}

static char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

static bool add_diff(rc_census_diff *d, const entry *a, const entry *b, const entry *before) {
  rc_census_field_diff *f = &d->diffs[d->n_diffs++];
  const entry *any = a ? a : b;
  f->field = strdup(any->field);
  f->saved = (a && a->saved) || (b && b->saved);
  f->a = a ? strdup(a->value) : NULL;
  f->b = b ? strdup(b->value) : NULL;
  f->before = before ? strdup(before->value) : NULL;
  f->note = dup_or_null(a && a->note ? a->note : b ? b->note : NULL);
  return f->field && (!a || f->a) && (!b || f->b) && (!before || f->before);
}

/* The before-save census beside `through` (".txt" → ".before-save.txt"). */
static void before_save_path(const char *through, char *buf, size_t cap) {
  size_t n = strlen(through);
  if (n < 4 || strcmp(through + n - 4, ".txt") || n + 16 > cap) {
    buf[0] = 0;
    return;
  }
  snprintf(buf, cap, "%.*s.before-save.txt", (int)(n - 4), through);
}

int rc_census_compare_files(const char *through, const char *resumed, rc_census_diff *out,
                            rc_err *err) {
  memset(out, 0, sizeof *out);
  census a, b, pre = {0};
  int rc = parse(through, &a, err);
  if (rc) return rc;
  if ((rc = parse(resumed, &b, err))) {
    census_free(&a);
    return rc;
  }
  char pre_path[4200];
  before_save_path(through, pre_path, sizeof pre_path);
  if (pre_path[0] && rc_path_exists(pre_path) && (rc = parse(pre_path, &pre, err))) {
    census_free(&a), census_free(&b);
    return rc;
  }
  out->diffs = calloc((size_t)(a.n + b.n + 1), sizeof *out->diffs);
  bool ok = out->diffs != NULL;
  /* in the through file's order; then fields only the resumed side has */
  qsort(a.e, (size_t)a.n, sizeof *a.e, by_order);
  int distinct = a.n;
  for (int pass = 0; ok && pass < 2; pass++) /* saved fields first, then local */
    for (int i = 0; ok && i < a.n; i++) {
      const entry *x = &a.e[i], *y = find(&b, x->field);
      bool saved = x->saved || (y && y->saved);
      if (saved != (pass == 0) || (y && !strcmp(x->value, y->value))) continue;
      const entry *p = pre.n ? find(&pre, x->field) : NULL;
      ok = add_diff(out, x, y, p && strcmp(p->value, x->value) ? p : NULL);
      if (saved)
        out->n_saved_differ++;
      else
        out->n_local_differ++;
    }
  qsort(b.e, (size_t)b.n, sizeof *b.e, by_order);
  qsort(a.e, (size_t)a.n, sizeof *a.e, by_field);
  for (int i = 0; ok && i < b.n; i++) {
    const entry *y = &b.e[i];
    if (find(&a, y->field)) continue;
    distinct++;
    ok = add_diff(out, NULL, y, NULL);
    if (y->saved)
      out->n_saved_differ++;
    else
      out->n_local_differ++;
  }
  out->n_fields = distinct;
  census_free(&a), census_free(&b), census_free(&pre);
  if (!ok) {
    rc_census_diff_free(out);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  return RC_OK;
}

void rc_census_diff_free(rc_census_diff *d) {
  for (int i = 0; i < d->n_diffs; i++) {
    rc_census_field_diff *f = &d->diffs[i];
    free(f->field), free(f->a), free(f->b), free(f->before), free(f->note);
  }
  free(d->diffs);
  memset(d, 0, sizeof *d);
}

void rc_census_describe(const rc_census_field_diff *d, const char *a_name, const char *b_name,
                        char *buf, size_t cap) {
  if (!d->a || !d->b) {
    snprintf(buf, cap, "%s: only %s has it (%s)%s", d->field, d->a ? a_name : b_name,
             d->a ? d->a : d->b, d->saved ? "; a load must restore it" : "");
    return;
  }
  if (!d->saved) {
    snprintf(buf, cap, "%s: %s %s, %s %s (process-local by design%s%s)", d->field, a_name, d->a,
             b_name, d->b, d->note ? ": " : "", d->note ? d->note : "");
    return;
  }
  if (d->before && !strcmp(d->before, d->b)) {
    snprintf(buf, cap,
             "%s: %s %s, %s %s (saved; the save changed the process that saved: %s before its "
             "save, %s after; the resumed process has what was saved)",
             d->field, a_name, d->a, b_name, d->b, d->before, d->a);
    return;
  }
  snprintf(buf, cap, "%s: %s %s, %s %s (saved: not restored by the load)", d->field, a_name, d->a,
           b_name, d->b);
}

/* The kind of a field: its name up to the last '.' before a module path
 * ("linear.is_first_microbatch" of "linear.is_first_microbatch.mtp/..."),
 * or the whole name when it names no module. */
static size_t kind_len(const char *field) {
  const char *slash = strchr(field, '/');
  if (!slash) return strlen(field);
  const char *dot = NULL;
  for (const char *p = field; p < slash; p++)
    if (*p == '.') dot = p;
  return dot ? (size_t)(dot - field) : strlen(field);
}

/* The number of local fields from i on that are of f's kind and have f's
 * values (a group), 1 at least. */
static int group_size(const rc_census_diff *d, int i) {
  const rc_census_field_diff *f = &d->diffs[i];
  size_t k = kind_len(f->field);
  int same = 1;
  while (i + same < d->n_diffs) {
    const rc_census_field_diff *g = &d->diffs[i + same];
    if (g->saved || kind_len(g->field) != k || strncmp(g->field, f->field, k) || !g->a != !f->a ||
        !g->b != !f->b || (f->a && strcmp(g->a, f->a)) || (f->b && strcmp(g->b, f->b)))
      break;
    same++;
  }
  return same;
}

/* "linear.is_first_microbatch (13 modules: through FALSE, resumed TRUE)" */
static int group_text(const rc_census_field_diff *f, int same, char *buf, size_t cap) {
  size_t k = kind_len(f->field);
  char count[32] = "";
  if (f->field[k]) snprintf(count, sizeof count, "%d module%s: ", same, same == 1 ? "" : "s");
  return snprintf(buf, cap, "%.*s (%sthrough %s, resumed %s)", (int)k, f->field, count,
                  f->a ? f->a : "-", f->b ? f->b : "-");
}

void rc_census_local_groups(const rc_census_diff *d, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < d->n_diffs && len + 3 < cap; i++) {
    if (d->diffs[i].saved) continue;
    int same = group_size(d, i);
    if (len) buf[len++] = ',', buf[len++] = ' ', buf[len] = 0;
    int w = group_text(&d->diffs[i], same, buf + len, cap - len);
    if (w < 0 || (size_t)w >= cap - len) break;
    len += (size_t)w;
    i += same - 1;
  }
}

void rc_census_print(const rc_census_diff *d, FILE *out, const char *indent, int max_saved) {
  int shown = 0;
  char line[2048];
  for (int i = 0; i < d->n_diffs; i++) {
    const rc_census_field_diff *f = &d->diffs[i];
    if (!f->saved) continue;
    if (shown++ == max_saved) {
      fprintf(out, "%s... and %d more saved fields (report.json lists them all)\n", indent,
              d->n_saved_differ - max_saved);
      break;
    }
    rc_census_describe(f, "through", "resumed", line, sizeof line);
    fprintf(out, "%s%s\n", indent, line);
  }
  for (int i = 0; i < d->n_diffs; i++) {
    const rc_census_field_diff *f = &d->diffs[i];
    if (f->saved) continue;
    int same = group_size(d, i);
    group_text(f, same, line, sizeof line);
    fprintf(out, "%s%s: process-local by design%s%s\n", indent, line, f->note ? ": " : "",
            f->note ? f->note : "");
    i += same - 1;
  }
}

const rc_census_field_diff *rc_census_first_saved(const rc_census_diff *d) {
  for (int i = 0; i < d->n_diffs; i++)
    if (d->diffs[i].saved) return &d->diffs[i];
  return NULL;
}

/* A value as written (an empty one stays ""), or null where absent. */
static void value_or_null(rc_jw *w, const char *key, const char *v) {
  rc_jw_key(w, key);
  if (v)
    rc_jw_str(w, v);
  else
    rc_jw_null(w);
}

void rc_census_json_differences(rc_jw *w, const char *key, const rc_census_diff *d) {
  rc_jw_key(w, key);
  rc_jw_arr_begin(w);
  for (int k = 0; k < d->n_diffs; k++) {
    const rc_census_field_diff *f = &d->diffs[k];
    char text[2048];
    rc_census_describe(f, "through", "resumed", text, sizeof text);
    rc_jw_obj_begin(w);
    value_or_null(w, "field", f->field);
    value_or_null(w, "class", f->saved ? "saved" : "local");
    value_or_null(w, "through", f->a);
    value_or_null(w, "resumed", f->b);
    value_or_null(w, "through_before_save", f->before);
    rc_jw_kv_str_or_null(w, "note", f->note);
    value_or_null(w, "text", text);
    rc_jw_obj_end(w);
  }
  rc_jw_arr_end(w);
}
