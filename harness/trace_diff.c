/* trace_diff.c — compares two trace.csv files (docs/trace.md) step by step.
 *
 * Traces of different legs cover different step ranges (the resumed leg
 * starts at K+1), so rows are keyed by `step` and only steps present in both
 * are compared. A float column X has an exact sibling X_hex (C99 %a): the
 * sibling decides equality, because two decimal copies printed with %.9g can
 * agree while the bits differ; the decimal copy is what the report shows.
 * Other columns (counters, fingerprints) are compared as strings. */
#include "harness/compare.h"
#include "harness/trace_table.h"

#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"

typedef rc_trace_table trace_table;

void rc_trace_table_free(rc_trace_table *t) {
  free(t->text);
  free(t->header);
  free(t->cells);
  free(t->steps);
  memset(t, 0, sizeof *t);
}

/* Splits one line at commas in place; returns the number of fields, or -1
 * when there are more than cap. */
static int split_fields(char *line, char **out, int cap) {
  int n = 0;
  for (char *p = line;;) {
    if (n == cap) return -1;
    out[n++] = p;
    char *comma = strchr(p, ',');
    if (!comma) break;
    *comma = 0;
    p = comma + 1;
  }
  return n;
}

/* Next line of text starting at *pos (NUL-terminated, '\r' stripped), or NULL at the end. */
static char *next_line(char **pos) {
  char *s = *pos;
  if (!s || !*s) return NULL;
  char *nl = strchr(s, '\n');
  if (nl) {
    *nl = 0;
    *pos = nl + 1;
  } else {
    *pos = s + strlen(s);
  }
  size_t n = strlen(s);
  if (n && s[n - 1] == '\r') s[n - 1] = 0;
  return s;
}

static int parse_step(const char *s, int64_t *out) {
  if (!*s) return -1;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (*end) return -1;
  *out = v;
  return 0;
}

int rc_trace_table_load(const char *path, rc_trace_table *t, rc_err *err) {
  memset(t, 0, sizeof *t);
  size_t n;
  int rc = rc_read_regular_file(path, RC_READ_CAP_TRACE, false, &t->text, &n, err);
  if (rc) return rc;
  if (strlen(t->text) != n) return rc_fail(err, RC_EXIT_DATAERR, "%s: NUL byte in trace", path);

  char *pos = t->text;
  char *line = next_line(&pos);
  if (!line || !*line) return rc_fail(err, RC_EXIT_DATAERR, "%s: empty trace (no header)", path);
  int cap = 1;
  for (const char *p = line; *p; p++) cap += *p == ',';
  t->header = malloc(sizeof *t->header * (size_t)cap);
  if (!t->header) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  t->ncols = split_fields(line, t->header, cap);

  int step_col = -1;
  for (int j = 0; j < t->ncols; j++)
    if (!strcmp(t->header[j], "step")) step_col = j;
  if (step_col < 0) return rc_fail(err, RC_EXIT_DATAERR, "%s: header has no 'step' column", path);

  int row_cap = 0;
  int lineno = 1;
  while ((line = next_line(&pos))) {
    lineno++;
    if (!*line) continue; /* a trailing blank line */
    if (t->nrows == row_cap) {
      row_cap = row_cap ? 2 * row_cap : 64;
      char **cells = realloc(t->cells, sizeof *cells * (size_t)row_cap * (size_t)t->ncols);
      int64_t *steps = realloc(t->steps, sizeof *steps * (size_t)row_cap);
      if (cells) t->cells = cells;
      if (steps) t->steps = steps;
      if (!cells || !steps) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    }
    char **row = t->cells + (size_t)t->nrows * (size_t)t->ncols;
    int got = split_fields(line, row, t->ncols);
    if (got != t->ncols)
      return rc_fail(err, RC_EXIT_DATAERR, "%s:%d: expected %d fields, got %s%d", path, lineno,
                     t->ncols, got < 0 ? "more than " : "", got < 0 ? t->ncols : got);
    int64_t step;
    if (parse_step(row[step_col], &step))
      return rc_fail(err, RC_EXIT_DATAERR, "%s:%d: step '%s' is not an integer", path, lineno,
                     row[step_col]);
    if (t->nrows && step <= t->steps[t->nrows - 1])
      return rc_fail(err, RC_EXIT_DATAERR, "%s:%d: step %lld after step %lld (steps must increase)",
                     path, lineno, (long long)step, (long long)t->steps[t->nrows - 1]);
    t->steps[t->nrows++] = step;
  }
  return RC_OK;
}

/* Appends item to a comma-separated list in buf[cap]; a list that does not
 * fit ends in "..." rather than being cut silently. */
static void list_append(char *buf, size_t cap, const char *item) {
  size_t len = strlen(buf);
  if (len >= 3 && !strcmp(buf + len - 3, "...")) return;
  size_t need = (len ? 1 : 0) + strlen(item);
  if (len + need + 4 > cap) {
    if (len + 5 <= cap) strcat(buf, len ? ",..." : "..."); /* 4 bytes and the NUL */
    return;
  }
  if (len) strcat(buf, ",");
  strcat(buf, item);
}

int rc_trace_table_col(const rc_trace_table *t, const char *name) {
  for (int j = 0; j < t->ncols; j++)
    if (!strcmp(t->header[j], name)) return j;
  return -1;
}

typedef rc_trace_column logical_col;

int rc_trace_table_columns(const rc_trace_table *t, rc_trace_column **out) {
  logical_col *cols = calloc(t->ncols > 0 ? (size_t)t->ncols : 1, sizeof *cols);
  if (!cols) return -1;
  int n = 0;
  for (int j = 0; j < t->ncols; j++) {
    const char *h = t->header[j];
    size_t len = strlen(h);
    bool is_hex = len > 4 && !strcmp(h + len - 4, "_hex");
    if (!strcmp(h, "step")) continue;
    if (is_hex) {
      char base[128];
      snprintf(base, sizeof base, "%.*s", (int)(len - 4), h);
      if (rc_trace_table_col(t, base) >= 0) continue; /* reported at its decimal sibling */
      snprintf(cols[n].name, sizeof cols[n].name, "%s", base);
      cols[n].exact = cols[n].shown = j;
    } else {
      char hex[140];
      snprintf(hex, sizeof hex, "%s_hex", h);
      int k = rc_trace_table_col(t, hex);
      snprintf(cols[n].name, sizeof cols[n].name, "%s", h);
      cols[n].exact = k >= 0 ? k : j;
      cols[n].shown = j;
    }
    n++;
  }
  *out = cols;
  return n;
}

static void headers_message(const trace_table *a, const trace_table *b, rc_trace_diff *out,
                            rc_err *err) {
  int n = a->ncols < b->ncols ? a->ncols : b->ncols;
  int j = 0;
  while (j < n && !strcmp(a->header[j], b->header[j])) j++;
  for (int i = 0; i < a->ncols; i++) {
    list_append(out->a_values, sizeof out->a_values, a->header[i]);
    if (rc_trace_table_col(b, a->header[i]) < 0)
      list_append(out->columns, sizeof out->columns, a->header[i]);
  }
  for (int i = 0; i < b->ncols; i++) {
    list_append(out->b_values, sizeof out->b_values, b->header[i]);
    if (rc_trace_table_col(a, b->header[i]) < 0)
      list_append(out->columns, sizeof out->columns, b->header[i]);
  }
  if (err) {
    if (j < n)
      snprintf(err->msg, sizeof err->msg, "trace headers differ at column %d: '%s' vs '%s'", j + 1,
               a->header[j], b->header[j]);
    else
      snprintf(err->msg, sizeof err->msg, "trace headers differ: %d vs %d columns", a->ncols,
               b->ncols);
  }
}

int rc_trace_compare(const char *trace_a, const char *trace_b, rc_trace_diff *out, rc_err *err) {
  memset(out, 0, sizeof *out);
  out->first_step = -1;
  trace_table a, b;
  int rc = rc_trace_table_load(trace_a, &a, err);
  if (rc) {
    rc_trace_table_free(&a);
    return rc;
  }
  rc = rc_trace_table_load(trace_b, &b, err);
  if (rc) {
    rc_trace_table_free(&a);
    rc_trace_table_free(&b);
    return rc;
  }

  bool same_header = a.ncols == b.ncols;
  for (int j = 0; same_header && j < a.ncols; j++) same_header = !strcmp(a.header[j], b.header[j]);
  if (!same_header) {
    /* Not an error of the inputs: the result says "not comparable", and
     * err->msg (with code 0) says why. */
    headers_message(&a, &b, out, err);
    if (err) err->code = RC_OK;
    rc_trace_table_free(&a);
    rc_trace_table_free(&b);
    return RC_OK;
  }
  out->comparable = true;

  logical_col *cols = NULL;
  int ncols = rc_trace_table_columns(&a, &cols);
  if (ncols < 0) {
    rc_trace_table_free(&a);
    rc_trace_table_free(&b);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  int i = 0, k = 0;
  while (i < a.nrows && k < b.nrows) {
    if (a.steps[i] < b.steps[k]) {
      i++;
      continue;
    }
    if (b.steps[k] < a.steps[i]) {
      k++;
      continue;
    }
    out->steps_compared++;
    if (out->first_step < 0) {
      char **ra = a.cells + (size_t)i * (size_t)a.ncols;
      char **rb = b.cells + (size_t)k * (size_t)b.ncols;
      bool any = false;
      for (int c = 0; c < ncols; c++) any |= strcmp(ra[cols[c].exact], rb[cols[c].exact]) != 0;
      if (any) {
        out->first_step = a.steps[i];
        for (int c = 0; c < ncols; c++) {
          if (strcmp(ra[cols[c].exact], rb[cols[c].exact])) {
            list_append(out->columns, sizeof out->columns, cols[c].name);
            list_append(out->a_values, sizeof out->a_values, ra[cols[c].shown]);
            list_append(out->b_values, sizeof out->b_values, rb[cols[c].shown]);
          } else {
            list_append(out->equal_columns, sizeof out->equal_columns, cols[c].name);
          }
        }
      }
    }
    i++;
    k++;
  }
  free(cols);
  rc_trace_table_free(&a);
  rc_trace_table_free(&b);
  return RC_OK;
}
