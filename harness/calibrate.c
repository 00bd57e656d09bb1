/* calibrate.c — `run --noise calibrated` (calibrate.h has the rule,
 * docs/design.md §7.2 why): the trace checks judged by kind of column, the
 * float tensors of the final state judged against the A/A envelope, and
 * the calibrated verdict's words.
 *
 * It reads what the checks of run_checks.c found (and the traces
 * themselves) and never calls run_checks.c, which calls it: the files of
 * the harness do not call each other around a circle. */
#include "harness/calibrate.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "base/text.h"
#include "harness/run.h"
#include "io/layout.h"

const char *rc_col_kind_name(rc_col_kind k) {
  switch (k) {
  case RC_COL_NOISY:
    return "noisy";
  case RC_COL_EXACT:
    return "exact";
  case RC_COL_FINGERPRINT:
    return "fingerprint";
  case RC_COL_DISCRETE:
    return "discrete";
  }
  return "?";
}

void rc_calib_free(rc_calib *c) {
  free(c->cols);
  free(c->tensors);
  memset(c, 0, sizeof *c);
}

void rc_calib_ratio_text(double ratio, char *buf, size_t cap) {
  if (isinf(ratio) || isnan(ratio))
    snprintf(buf, cap, "an unbounded factor (the fresh runs agree there)");
  else if (ratio >= 100)
    snprintf(buf, cap, "%.0fx", ratio);
  else
    snprintf(buf, cap, "%.2gx", ratio);
}

/* ---- columns ---- */

/* s is a whole number in decimal, sign allowed. */
static bool is_integer(const char *s) {
  if (*s == '-' || *s == '+') s++;
  if (!*s) return false;
  for (; *s; s++)
    if (!isdigit((unsigned char)*s)) return false;
  return true;
}

/* s parses whole as a double (decimal, C99 hex, nan, inf). */
static bool parse_num(const char *s, double *v) {
  if (!*s) return false;
  char *end;
  *v = strtod(s, &end);
  return *end == 0;
}

static bool has_hex_letter(const char *s) {
  for (; *s; s++)
    if (strchr("abcdefABCDEF", *s) && !strchr("eE", *s)) return true;
  return false;
}

/* An accuracy: a count of argmax matches over tokens, which one near-tie
 * moves by a whole 1/n (mtp_acc_1, acc, accuracy, top1_acc). */
static bool name_is_count(const char *n) {
  return strstr(n, "acc") != NULL;
}

static bool name_is_lr(const char *n) {
  size_t len = strlen(n);
  return !strcmp(n, "lr") || !strncmp(n, "lr_", 3) || (len > 3 && !strcmp(n + len - 3, "_lr")) ||
         !strcmp(n, "learning_rate");
}

/* The kind a column has by its name and its values in every table. */
static void default_kind(const rc_trace_column *tc, const rc_trace_table *const *tables, int n,
                         rc_calib_col *out) {
  bool sibling = tc->exact != tc->shown; /* a float with its exact copy */
  bool all_int = true, all_num = true, hex = false;
  for (int k = 0; k < n; k++)
    for (int i = 0; i < tables[k]->nrows; i++) {
      const char *v = tables[k]->cells[(size_t)i * (size_t)tables[k]->ncols + (size_t)tc->exact];
      double d;
      all_int &= is_integer(v);
      if (!parse_num(v, &d)) {
        all_num = false;
        hex |= has_hex_letter(v);
      }
    }
  out->kind = RC_COL_NOISY;
  snprintf(out->why, sizeof out->why, "float");
  if (!strncmp(tc->name, "fp_", 3) || (!sibling && hex)) {
    out->kind = RC_COL_FINGERPRINT;
    snprintf(out->why, sizeof out->why, "fingerprint");
  } else if (name_is_lr(tc->name)) {
    out->kind = RC_COL_EXACT;
    snprintf(out->why, sizeof out->why, "learning rate");
  } else if (!strcmp(tc->name, "loss_scale")) {
    out->kind = RC_COL_EXACT;
    snprintf(out->why, sizeof out->why, "loss scale");
  } else if (!sibling && all_int) {
    out->kind = RC_COL_EXACT;
    snprintf(out->why, sizeof out->why, "integer");
  } else if (name_is_count(tc->name)) {
    out->kind = RC_COL_DISCRETE;
    snprintf(out->why, sizeof out->why, "accuracy (moves in steps of 1/n)");
  } else if (!all_num) {
    out->kind = RC_COL_FINGERPRINT;
    snprintf(out->why, sizeof out->why, "not a number");
  }
}

/* Applies one list of the declaration ("exact" or "noisy"). */
static int declare(const rc_json *j, const char *key, rc_col_kind kind, rc_calib_col *cols, int n,
                   const char *path, rc_err *err) {
  const rc_json *list = rc_json_get(j, key);
  if (!list) return RC_OK;
  if (list->type != RC_JSON_ARR)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: \"%s\" is not a list of column names", path, key);
  for (int i = 0; i < list->nkids; i++) {
    const rc_json *v = &list->kids[i];
    if (v->type != RC_JSON_STR)
      return rc_fail(err, RC_EXIT_DATAERR, "%s: \"%s\"[%d] is not a column name", path, key, i);
    int k = 0;
    while (k < n && strcmp(cols[k].name, v->str)) k++;
    if (k == n)
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s: declares column '%.128s' %s, but trace.csv has no such column", path,
                     v->str, key);
    if (!strcmp(cols[k].why, "declared") && cols[k].kind != kind)
      return rc_fail(err, RC_EXIT_DATAERR, "%s: column '%.128s' is declared both exact and noisy",
                     path, v->str);
    cols[k].kind = kind;
    snprintf(cols[k].why, sizeof cols[k].why, "declared");
  }
  return RC_OK;
}

static int read_declaration(const char *path, rc_calib_col *cols, int n, rc_err *err) {
  if (!path || !rc_path_exists(path)) return RC_OK;
  char *text = NULL;
  size_t len = 0;
  int rc = rc_read_regular_file(path, RC_READ_CAP_SMALL, false, &text, &len, err);
  if (rc) return rc;
  char msg[256];
  rc_json *j = rc_json_parse(text, len, msg, sizeof msg);
  free(text);
  if (!j) return rc_fail(err, RC_EXIT_DATAERR, "%s: not JSON: %s", path, msg);
  const char *schema = rc_json_get_str(j, "schema");
  int64_t version = 1;
  if (j->type != RC_JSON_OBJ)
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s: not a JSON object", path);
  else if (schema && strcmp(schema, RC_TRACE_COLUMNS_SCHEMA))
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s: schema '%.64s', not " RC_TRACE_COLUMNS_SCHEMA, path,
                 schema);
  else if (rc_json_get_i64(j, "schema_version", &version) && version != 1)
    rc = rc_fail(err, RC_EXIT_DATAERR,
                 "%s: schema_version %" PRId64 " is newer than this build reads", path, version);
  if (!rc) rc = declare(j, "exact", RC_COL_EXACT, cols, n, path, err);
  if (!rc) rc = declare(j, "noisy", RC_COL_NOISY, cols, n, path, err);
  rc_json_free(j);
  return rc;
}

int rc_calib_columns(const rc_trace_table *t, const rc_trace_table *const *others, int n_others,
                     const char *decl_path, rc_calib_col **cols, int *n, rc_err *err) {
  *cols = NULL;
  *n = 0;
  rc_trace_column *tc = NULL;
  int m = rc_trace_table_columns(t, &tc);
  if (m < 0) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  const rc_trace_table **all = calloc((size_t)n_others + 1, sizeof *all);
  rc_calib_col *c = calloc((size_t)(m > 0 ? m : 1), sizeof *c);
  if (!all || !c) {
    free(tc), free(all), free(c);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  all[0] = t;
  for (int k = 0; k < n_others; k++) all[k + 1] = others[k];
  for (int i = 0; i < m; i++) {
    snprintf(c[i].name, sizeof c[i].name, "%s", tc[i].name);
    c[i].exact = tc[i].exact;
    c[i].shown = tc[i].shown;
    default_kind(&tc[i], all, n_others + 1, &c[i]);
  }
  free(tc);
  free(all);
  int rc = read_declaration(decl_path, c, m, err);
  if (rc) {
    free(c);
    return rc;
  }
  *cols = c;
  *n = m;
  return RC_OK;
}

/* ---- the trace rule ---- */

static int row_of(const rc_trace_table *t, int64_t step) {
  int lo = 0, hi = t->nrows - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (t->steps[mid] == step) return mid;
    if (t->steps[mid] < step)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

static const char *cell(const rc_trace_table *t, int row, int col) {
  return t->cells[(size_t)row * (size_t)t->ncols + (size_t)col];
}

/* |x - y| with NaN and infinities: equal non-finite values are 0 apart,
 * anything else non-finite is infinitely far. */
static double dist(double x, double y) {
  if (x == y || (isnan(x) && isnan(y))) return 0;
  double d = fabs(x - y);
  return isnan(d) ? INFINITY : d;
}

/* The column's relative noise as the fresh legs show it: level[i] = the
 * largest |x - y| / |x| of any pair at t's steps 1..t->steps[i]. */
static void column_levels(const rc_trace_table *t, const rc_trace_table *const *fresh, int n_fresh,
                          int col, double *fv, double *level) {
  double lv = 0;
  for (int i = 0; i < t->nrows; i++) {
    int nf = 0;
    for (int k = 0; k < n_fresh; k++) {
      int rk = row_of(fresh[k], t->steps[i]);
      if (rk >= 0 && parse_num(cell(fresh[k], rk, col), &fv[nf])) nf++;
    }
    for (int a = 0; a < nf; a++)
      for (int b = a + 1; b < nf; b++) {
        double d = dist(fv[a], fv[b]), m = fabs(fv[a]);
        if (m > 0 && isfinite(d / m) && d / m > lv) lv = d / m;
      }
    level[i] = lv;
  }
}

/* level at the horizon h: the last of t's steps at or before h (0 before
 * the first). */
static double level_at(const rc_trace_table *t, const double *level, int64_t h) {
  double v = 0;
  for (int i = 0; i < t->nrows && t->steps[i] <= h; i++) v = level[i];
  return v;
}

int rc_calib_judge_trace(const rc_trace_table *t, const rc_trace_table *r,
                         const rc_trace_table *const *fresh, int n_fresh, const rc_calib_col *cols,
                         int n_cols, int64_t from, int64_t to, rc_calib *res, rc_err *err) {
  res->cols = calloc((size_t)(n_cols > 0 ? n_cols : 1), sizeof *res->cols);
  if (!res->cols) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  res->n_cols = n_cols;
  res->n_fresh = n_fresh;
  res->n_pairs = n_fresh * (n_fresh - 1) / 2;
  res->step = -1;
  res->resolution = INFINITY;
  res->resolution_step = -1;
  double worst_score = -1;
  double *fv = calloc((size_t)(n_fresh > 0 ? n_fresh : 1), sizeof *fv);
  double *level = calloc((size_t)(t->nrows > 0 ? t->nrows : 1), sizeof *level);
  if (!fv || !level) {
    free(fv), free(level);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  const int64_t K = from - 1; /* the resumed leg's checkpoint */
  for (int c = 0; c < n_cols; c++) {
    const rc_calib_col *col = &cols[c];
    rc_calib_col_result *cr = &res->cols[c];
    snprintf(cr->name, sizeof cr->name, "%s", col->name);
    snprintf(cr->why, sizeof cr->why, "%s", col->why);
    cr->kind = col->kind;
    cr->differ_step = cr->worst_step = cr->exceed_step = cr->floor_step = -1;
    cr->resolution = INFINITY;
    if (col->kind == RC_COL_NOISY) column_levels(t, fresh, n_fresh, col->exact, fv, level);
    double col_worst = -1;
    int64_t first_step = -1;
    for (int i = 0; i < t->nrows; i++) {
      int64_t s = t->steps[i];
      if (s < from || s > to) continue;
      int rr = row_of(r, s);
      if (rr < 0) continue;
      const char *ta = cell(t, i, col->exact), *rb = cell(r, rr, col->exact);
      cr->steps++;
      if (strcmp(ta, rb) && cr->differ_step < 0) cr->differ_step = s;
      if (col->kind != RC_COL_NOISY) continue;
      double x, y;
      if (!parse_num(ta, &x) || !parse_num(rb, &y)) continue;
      /* j steps after K the two legs differ by j steps of noise: the
       * fresh pairs' relative difference after 2j steps bounds it */
      double env = level_at(t, level, 2 * (s - K)) * fabs(x);
      double rdist = dist(x, y);
      double allowed = RC_CALIB_FACTOR * env;
      double floor = RC_CALIB_FLOOR_REL * fabs(x);
      bool floor_bound = isfinite(floor) && floor > allowed;
      if (floor_bound) allowed = floor;
      if (first_step < 0) {
        first_step = s;
        cr->resolution = fabs(x) > 0 ? allowed / fabs(x) : INFINITY;
      }
      double score = rdist == 0 ? 0 : allowed > 0 ? rdist / allowed : INFINITY;
      if (score > col_worst) {
        col_worst = score;
        cr->worst_step = s;
        cr->worst_r = rdist, cr->worst_allowed = allowed, cr->worst_env = env, cr->worst_value = x;
      }
      if (rdist > allowed && floor_bound && rdist <= RC_CALIB_FACTOR * floor) {
        if (cr->floor_step < 0) {
          cr->floor_step = s;
          cr->floor_r = rdist, cr->floor_allowed = allowed, cr->floor_env = env;
          cr->floor_value = x;
        }
      } else if (rdist > allowed && cr->exceed_step < 0) {
        cr->exceed_step = s;
        cr->exceed_r = rdist, cr->exceed_allowed = allowed, cr->exceed_env = env,
        cr->exceed_value = x;
      }
    }
    if (col->kind != RC_COL_NOISY) {
      if ((col->kind == RC_COL_FINGERPRINT || col->kind == RC_COL_DISCRETE) &&
          cr->differ_step >= 0) {
        size_t len = strlen(res->fingerprints);
        snprintf(res->fingerprints + len, sizeof res->fingerprints - len, "%s%s", len ? "," : "",
                 cr->name);
      }
      continue;
    }
    if (first_step >= 0 && cr->resolution < res->resolution) {
      res->resolution = cr->resolution;
      res->resolution_step = first_step;
      snprintf(res->resolution_col, sizeof res->resolution_col, "%s", cr->name);
    }
    /* the headline: the first step any column exceeds (header order
     * breaks ties); else the closest to exceeding */
    if (cr->exceed_step >= 0) {
      if (!res->exceeds || cr->exceed_step < res->step) {
        res->exceeds = true;
        res->step = cr->exceed_step;
        snprintf(res->what, sizeof res->what, "%s", cr->name);
        res->r = cr->exceed_r, res->env = cr->exceed_env, res->allowed = cr->exceed_allowed;
        res->ratio = cr->exceed_env > 0 ? cr->exceed_r / cr->exceed_env : INFINITY;
      }
    } else if (!res->exceeds && cr->worst_step >= 0 && col_worst > worst_score) {
      worst_score = col_worst;
      res->step = cr->worst_step;
      snprintf(res->what, sizeof res->what, "%s", cr->name);
      res->r = cr->worst_r, res->env = cr->worst_env, res->allowed = cr->worst_allowed;
      res->ratio = cr->worst_env > 0 ? cr->worst_r / cr->worst_env : cr->worst_r > 0 ? INFINITY : 0;
    }
  }
  free(fv);
  free(level);
  /* no decisive excess, one at the floor: that one is the headline */
  for (int c = 0; c < n_cols && !res->exceeds; c++) {
    const rc_calib_col_result *cr = &res->cols[c];
    if (cr->floor_step < 0 || (res->at_floor && cr->floor_step >= res->step)) continue;
    res->at_floor = true;
    res->step = cr->floor_step;
    snprintf(res->what, sizeof res->what, "%s", cr->name);
    res->r = cr->floor_r, res->env = cr->floor_env, res->allowed = cr->floor_allowed;
    res->ratio = cr->floor_env > 0 ? cr->floor_r / cr->floor_env : INFINITY;
  }
  res->undecidable =
      !res->exceeds &&
      (res->at_floor || (isfinite(res->resolution) && res->resolution >= RC_CALIB_UNDECIDABLE_REL));
  return RC_OK;
}

/* ---- states ---- */

bool rc_calib_diff_is_float(const rc_diff *d) {
  if (d->kind != RC_DIFF_VALUES) return false;
  const char *s = d->detail;
  if (!strncmp(s, "torch.", 6)) s += 6;
  return (!strncmp(s, "float", 5) && strncmp(s, "float8", 6)) || !strncmp(s, "bfloat16", 8) ||
         !strncmp(s, "half", 4) || !strncmp(s, "double", 6);
}

int rc_calib_exact_diffs(const rc_compare_result *r) {
  int n = 0;
  for (int i = 0; i < r->n_diffs; i++)
    n += r->diffs[i].kind != RC_DIFF_INFORMATIONAL && !rc_calib_diff_is_float(&r->diffs[i]);
  return n;
}

int rc_calib_split(rc_compare_result *all, rc_compare_result *floats, rc_err *err) {
  *floats = *all;
  floats->diffs = NULL;
  floats->n_diffs = floats->cap_diffs = floats->n_failing = 0;
  int nf = 0;
  for (int i = 0; i < all->n_diffs; i++) nf += rc_calib_diff_is_float(&all->diffs[i]);
  if (!nf) return RC_OK;
  floats->diffs = malloc((size_t)nf * sizeof *floats->diffs);
  if (!floats->diffs) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  int kept = 0;
  all->n_failing = 0;
  for (int i = 0; i < all->n_diffs; i++) {
    if (rc_calib_diff_is_float(&all->diffs[i])) {
      floats->diffs[floats->n_diffs++] = all->diffs[i];
      continue;
    }
    all->diffs[kept] = all->diffs[i];
    all->n_failing += all->diffs[kept].kind != RC_DIFF_INFORMATIONAL;
    kept++;
  }
  all->n_diffs = kept;
  floats->cap_diffs = floats->n_failing = floats->n_diffs;
  return RC_OK;
}

/* ---- the checks of a run ---- */

/* The fresh legs of an arm that trained 1..N: through, aa, aa2, ... */
static bool is_fresh(const rc_leg *l, const char *arm) {
  return !strcmp(l->arm, arm) && l->resume_step == 0 &&
         (!strcmp(l->name, "through") || !strncmp(l->name, "aa", 2));
}

static void list_join(char *buf, size_t cap, const char *item) {
  size_t len = strlen(buf);
  if (len + strlen(item) + 4 >= cap) return;
  snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", item);
}

/* The check's c->trace in compare's terms for the reports: the first step
 * where a column of kind `kind` differs, its differing columns and values,
 * the other columns of that kind equal there. */
static void fill_trace(rc_check *c, const rc_trace_table *a, const rc_trace_table *b,
                       const rc_calib_col *cols, int n, bool exact_only) {
  rc_trace_diff *d = &c->trace;
  memset(d, 0, sizeof *d);
  d->comparable = true;
  d->first_step = -1;
  for (int i = 0; i < a->nrows; i++) {
    int64_t s = a->steps[i];
    if (s < c->trace_from || s > c->trace_to) continue;
    int k = row_of(b, s);
    if (k < 0) continue;
    d->steps_compared++;
    if (d->first_step >= 0) continue;
    bool any = false;
    for (int j = 0; j < n && !any; j++)
      any = (!exact_only || cols[j].kind == RC_COL_EXACT) &&
            strcmp(cell(a, i, cols[j].exact), cell(b, k, cols[j].exact));
    if (!any) continue;
    d->first_step = s;
    for (int j = 0; j < n; j++) {
      if (exact_only && cols[j].kind != RC_COL_EXACT) continue;
      if (strcmp(cell(a, i, cols[j].exact), cell(b, k, cols[j].exact))) {
        size_t l = strlen(d->columns);
        snprintf(d->columns + l, sizeof d->columns - l, "%s%s", l ? "," : "", cols[j].name);
        l = strlen(d->a_values);
        snprintf(d->a_values + l, sizeof d->a_values - l, "%s%s", l ? "," : "",
                 cell(a, i, cols[j].shown));
        l = strlen(d->b_values);
        snprintf(d->b_values + l, sizeof d->b_values - l, "%s%s", l ? "," : "",
                 cell(b, k, cols[j].shown));
      } else {
        size_t l = strlen(d->equal_columns);
        snprintf(d->equal_columns + l, sizeof d->equal_columns - l, "%s%s", l ? "," : "",
                 cols[j].name);
      }
    }
  }
}

static void exact_names(const rc_calib_col *cols, int n, char *buf, size_t cap) {
  buf[0] = 0;
  for (int j = 0; j < n; j++)
    if (cols[j].kind == RC_COL_EXACT) list_join(buf, cap, cols[j].name);
}

static void skip(rc_check *c, const char *fmt, const char *x, const char *y, const char *z) {
  c->status = RC_CHECK_SKIPPED;
  snprintf(c->summary, sizeof c->summary, fmt, x, y, z);
}

/* Loads the trace of leg l into *t (false with c an error when it cannot). */
static bool load(rc_check *c, const rc_leg *l, rc_trace_table *t) {
  char path[RC_RUN_PATH_CAP + 32];
  snprintf(path, sizeof path, "%s/" RC_TRACE_NAME, l->dir);
  int rc = rc_trace_table_load(path, t, &c->err);
  if (!rc) return true;
  c->status = RC_CHECK_ERROR;
  if (!c->err.code) c->err.code = rc;
  snprintf(c->summary, sizeof c->summary, "%s: trace comparison failed: %s", l->label, c->err.msg);
  return false;
}

static bool same_header(const rc_trace_table *a, const rc_trace_table *b) {
  if (a->ncols != b->ncols) return false;
  for (int j = 0; j < a->ncols; j++)
    if (strcmp(a->header[j], b->header[j])) return false;
  return true;
}

/* A calibrated trace check: the noisy columns of through and the resumed
 * leg against the fresh legs' envelope. */
static void judge_calibrated(const rc_run *run, rc_check *c, const rc_trace_table *ta,
                             const rc_trace_table *tb, const rc_calib_col *cols, int n) {
  const rc_leg *la = &run->legs[c->leg_a], *lb = &run->legs[c->leg_b];
  rc_trace_table *fresh = calloc((size_t)run->n_legs, sizeof *fresh);
  const rc_trace_table **fp = calloc((size_t)run->n_legs, sizeof *fp);
  if (!fresh || !fp) {
    free(fresh), free(fp);
    c->status = RC_CHECK_ERROR;
    c->err.code = rc_fail(&c->err, RC_EXIT_SOFTWARE, "out of memory");
    snprintf(c->summary, sizeof c->summary, "out of memory");
    return;
  }
  int nf = 0;
  bool ok = true;
  for (int i = 0; ok && i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    if (!is_fresh(l, la->arm) || l->state != RC_LEG_OK) continue;
    if (i == c->leg_a) {
      fp[nf++] = ta;
      continue;
    }
    char path[RC_RUN_PATH_CAP + 32];
    snprintf(path, sizeof path, "%s/" RC_TRACE_NAME, l->dir);
    if (!rc_path_exists(path)) continue;
    ok = load(c, l, &fresh[i]);
    if (ok && same_header(&fresh[i], ta)) fp[nf++] = &fresh[i];
  }
  if (ok && nf < 2) {
    skip(c, "%s vs %s: not judged, %s", la->label, lb->label,
         "no second fresh trace to measure the noise");
  } else if (ok) {
    int rc = rc_calib_judge_trace(ta, tb, fp, nf, cols, n, c->trace_from, c->trace_to, &c->calib,
                                  &c->err);
    if (rc) {
      c->status = RC_CHECK_ERROR;
      c->err.code = rc;
      snprintf(c->summary, sizeof c->summary, "%s", c->err.msg);
    } else {
      c->have_calib = true;
      rc_calib *k = &c->calib;
      bool differ = false;
      for (int j = 0; j < k->n_cols; j++)
        differ |= k->cols[j].kind != RC_COL_EXACT && k->cols[j].differ_step >= 0;
      char ratio[64], fps[320] = "";
      if (k->fingerprints[0])
        snprintf(fps, sizeof fps, "; not judged: fingerprints and counts (%s)", k->fingerprints);
      if (k->exceeds) {
        c->status = RC_CHECK_EXCEEDS_NOISE;
        rc_calib_ratio_text(k->ratio, ratio, sizeof ratio);
        snprintf(c->summary, sizeof c->summary,
                 "exceeds run-to-run noise by %s at step %" PRId64
                 " (%s): |through - resumed| %.3g, the %d fresh runs at most %.3g after %" PRId64
                 " steps of noise",
                 ratio, k->step, k->what, k->r, k->n_fresh, k->env,
                 2 * (k->step - c->trace_from + 1));
      } else if (!differ) {
        c->status = RC_CHECK_IDENTICAL;
        snprintf(c->summary, sizeof c->summary,
                 "%s vs %s: steps %" PRId64 "..%" PRId64 " identical in every noisy column",
                 la->label, lb->label, c->trace_from, c->trace_to);
      } else if (k->at_floor) {
        c->status = RC_CHECK_UNDECIDABLE;
        snprintf(c->summary, sizeof c->summary,
                 "%s vs %s: at the floor, not decided: at step %" PRId64
                 " (%s) |through - resumed| %.3g is %.2g x the floor (%.3g), while the %d fresh "
                 "runs differ there by at most %.3g, under a quarter of it%s",
                 la->label, lb->label, k->step, k->what, k->r, k->r / k->allowed, k->allowed,
                 k->n_fresh, k->env, fps);
      } else if (k->undecidable) {
        c->status = RC_CHECK_UNDECIDABLE;
        snprintf(c->summary, sizeof c->summary,
                 "%s vs %s: the noise is too large to decide: at step %" PRId64
                 " the fresh runs allow %.3g of %s's value (%.2g%%)%s",
                 la->label, lb->label, k->resolution_step, k->resolution, k->resolution_col,
                 100 * k->resolution, fps);
      } else {
        c->status = RC_CHECK_WITHIN_NOISE;
        double frac = k->allowed > 0 ? k->r / k->allowed : 0;
        snprintf(c->summary, sizeof c->summary,
                 "%s vs %s: steps %" PRId64 "..%" PRId64 " within run-to-run noise (%d fresh runs, "
                 "%d pairs); closest: %s at step %" PRId64 ", %.2g of the allowed%s",
                 la->label, lb->label, c->trace_from, c->trace_to, k->n_fresh, k->n_pairs, k->what,
                 k->step, frac, fps);
      }
    }
  }
  for (int i = 0; i < run->n_legs; i++) rc_trace_table_free(&fresh[i]);
  free(fresh);
  free(fp);
}

void rc_calib_trace_check(rc_run *run, rc_check *c) {
  const rc_leg *la = &run->legs[c->leg_a], *lb = &run->legs[c->leg_b];
  if (la->state != RC_LEG_OK || lb->state != RC_LEG_OK) {
    skip(c, "%s vs %s: not compared, leg %s did not finish", la->label, lb->label,
         la->state != RC_LEG_OK ? la->label : lb->label);
    return;
  }
  bool ha = rc_path_exists(c->path_a), hb = rc_path_exists(c->path_b);
  if (!ha && !hb) {
    skip(c, "%s vs %s: no trace.csv (the trainer writes none)%s", la->label, lb->label, "");
    return;
  }
  if (!ha || !hb) {
    if (c->judged == RC_JUDGED_CALIBRATED) {
      skip(c, "%s vs %s: not judged, trace.csv missing in %s (its exact check fails)", la->label,
           lb->label, ha ? lb->label : la->label);
      return;
    }
    c->status = RC_CHECK_DIFFERS;
    snprintf(c->summary, sizeof c->summary, "%s vs %s: trace.csv missing in %s", la->label,
             lb->label, ha ? lb->label : la->label);
    return;
  }
  rc_trace_table ta, tb;
  memset(&tb, 0, sizeof tb);
  if (!load(c, la, &ta) || !load(c, lb, &tb)) {
    rc_trace_table_free(&ta);
    rc_trace_table_free(&tb);
    return;
  }
  c->have_trace = true;
  if (!same_header(&ta, &tb)) {
    memset(&c->trace, 0, sizeof c->trace);
    c->trace.first_step = -1;
    if (c->judged == RC_JUDGED_CALIBRATED)
      skip(c, "%s vs %s: not judged, %s", la->label, lb->label,
           "traces not comparable (its exact check fails)");
    else {
      c->status = RC_CHECK_DIFFERS;
      snprintf(c->summary, sizeof c->summary, "%s vs %s: traces not comparable (headers differ)",
               la->label, lb->label);
    }
    rc_trace_table_free(&ta);
    rc_trace_table_free(&tb);
    return;
  }
  /* the columns' kinds: what the leg that saved (or the first fresh leg)
   * declares beside its trace, else by name and content */
  char decl[RC_RUN_PATH_CAP + 32];
  snprintf(decl, sizeof decl, "%s/" RC_TRACE_COLUMNS_NAME, la->dir);
  const rc_trace_table *other = &tb;
  rc_calib_col *cols = NULL;
  int n = 0;
  int rc = rc_calib_columns(&ta, &other, 1, decl, &cols, &n, &c->err);
  if (rc) {
    c->status = RC_CHECK_ERROR;
    c->err.code = rc;
    snprintf(c->summary, sizeof c->summary, "%s vs %s: %s", la->label, lb->label, c->err.msg);
    rc_trace_table_free(&ta);
    rc_trace_table_free(&tb);
    return;
  }
  char names[512];
  exact_names(cols, n, names, sizeof names);
  int64_t want = c->trace_to - c->trace_from + 1;
  if (c->judged == RC_JUDGED_CALIBRATED) {
    fill_trace(c, &ta, &tb, cols, n, false);
    judge_calibrated(run, c, &ta, &tb, cols, n);
  } else {
    /* exact columns must agree; a noise check's other columns may differ */
    fill_trace(c, &ta, &tb, cols, n, true);
    char phrase[768];
    rc_text_differ_phrase(c->trace.columns, phrase, sizeof phrase);
    if (c->trace.first_step >= 0) {
      c->status = RC_CHECK_DIFFERS;
      snprintf(c->summary, sizeof c->summary, "diverged at step %" PRId64 ": %s (exact)",
               c->trace.first_step, phrase);
    } else if (c->trace.steps_compared < want) {
      c->status = RC_CHECK_DIFFERS;
      snprintf(c->summary, sizeof c->summary,
               "%s vs %s: only %" PRId64 " of steps %" PRId64 "..%" PRId64 " are in both traces",
               la->label, lb->label, c->trace.steps_compared, c->trace_from, c->trace_to);
    } else if (c->judged == RC_JUDGED_NOISE) {
      fill_trace(c, &ta, &tb, cols, n, false);
      if (c->trace.first_step >= 0) {
        c->status = RC_CHECK_NOISE_MEASURED;
        snprintf(c->summary, sizeof c->summary,
                 "%s vs %s: exact columns (%s) identical at steps %" PRId64 "..%" PRId64
                 "; noisy columns differ from step %" PRId64 " (the run-to-run noise)",
                 la->label, lb->label, names[0] ? names : "none", c->trace_from, c->trace_to,
                 c->trace.first_step);
      } else {
        c->status = RC_CHECK_IDENTICAL;
        snprintf(c->summary, sizeof c->summary,
                 "%s vs %s: steps %" PRId64 "..%" PRId64 " identical", la->label, lb->label,
                 c->trace_from, c->trace_to);
      }
    } else {
      c->status = RC_CHECK_IDENTICAL;
      snprintf(c->summary, sizeof c->summary,
               "%s vs %s: exact columns (%s) identical at steps %" PRId64 "..%" PRId64, la->label,
               lb->label, names[0] ? names : "none", c->trace_from, c->trace_to);
    }
  }
  free(cols);
  rc_trace_table_free(&ta);
  rc_trace_table_free(&tb);
}

/* The A/A pair state checks at the twin's step, in its arm. */
static bool is_pair_of(const rc_check *p, const rc_check *twin) {
  return p->judged == RC_JUDGED_NOISE && p->what == RC_CHECK_STATE && p->have_cmp &&
         !strcmp(p->arm, twin->arm) && p->step == twin->step;
}

double rc_calib_tensor_ms(const rc_diff *d) {
  if (!rc_calib_diff_is_float(d)) return 0;
  if (d->n_nan_mismatch > 0 || !isfinite(d->sum_sq)) return INFINITY;
  if (!(d->max_mag > 0) || d->n_elements <= 0) return 0;
  double q = d->sum_sq / ((double)d->n_elements * d->max_mag * d->max_mag);
  return isfinite(q) ? q : INFINITY;
}

double rc_calib_state_rms(const rc_compare_result *r) {
  double num = 0, den = 0;
  for (int i = 0; i < r->n_diffs; i++) {
    const rc_diff *d = &r->diffs[i];
    if (!rc_calib_diff_is_float(d)) continue;
    if (d->n_nan_mismatch > 0 || !isfinite(d->sum_sq)) return INFINITY;
    num += d->sum_sq;
    den += (double)d->n_elements * d->max_mag * d->max_mag;
  }
  double q = den > 0 ? num / den : (num > 0 ? INFINITY : 0);
  return isfinite(q) ? sqrt(q) : INFINITY;
}

/* The A/A pairs' differences of the same tensor, folded into *t. */
static void envelope_of(const rc_run *run, const rc_check *twin, rc_calib_tensor *t) {
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *p = &run->checks[i];
    if (!is_pair_of(p, twin)) continue;
    for (int k = 0; k < p->cmp.n_diffs; k++) {
      const rc_diff *d = &p->cmp.diffs[k];
      if (strcmp(d->file, t->file) || strcmp(d->object, t->object)) continue;
      if (!rc_calib_diff_is_float(d)) continue;
      t->e_pairs++;
      double rms = sqrt(rc_calib_tensor_ms(d));
      if (rms > t->e_rms_rel) t->e_rms_rel = rms;
      if (d->max_abs > t->e_abs) t->e_abs = d->max_abs;
      if (d->max_rel > t->e_rel) t->e_rel = d->max_rel;
      if (d->max_ulp > t->e_ulp) t->e_ulp = d->max_ulp;
      if (d->n_different > t->e_n_different) t->e_n_different = d->n_different;
    }
  }
}

static int fresh_pairs(const rc_run *run, const rc_check *twin, int *n_fresh, double *env) {
  int pairs = 0;
  *n_fresh = 0;
  *env = 0;
  for (int i = 0; i < run->n_legs; i++) *n_fresh += is_fresh(&run->legs[i], twin->arm);
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *p = &run->checks[i];
    if (!is_pair_of(p, twin)) continue;
    pairs++;
    double d = rc_calib_state_rms(&p->cmp);
    if (d > *env) *env = d;
  }
  return pairs;
}

/* One calibrated state twin: the state's RMS relative difference against
 * the largest of the A/A pairs at the same step; each float tensor that
 * differs listed with its share and its pairs' figures. */
static void judge_state(rc_run *run, rc_check *t, const rc_check *exact) {
  if (exact->status == RC_CHECK_SKIPPED || exact->status == RC_CHECK_ERROR || !exact->have_cmp) {
    t->status = RC_CHECK_SKIPPED;
    snprintf(t->summary, sizeof t->summary, "not judged: %s", exact->summary);
    return;
  }
  rc_calib *k = &t->calib;
  k->step = -1;
  k->resolution = INFINITY;
  k->resolution_step = -1;
  k->n_pairs = fresh_pairs(run, t, &k->n_fresh, &k->env);
  t->have_calib = true;
  char a_at[160], b_at[160];
  snprintf(a_at, sizeof a_at, "%s@%" PRId64, run->legs[t->leg_a].label, t->step);
  snprintf(b_at, sizeof b_at, "%s→%" PRId64, run->legs[t->leg_b].label, t->step);
  int n = t->have_cmp ? t->cmp.n_diffs : 0;
  if (!n) {
    t->status = RC_CHECK_IDENTICAL;
    snprintf(t->summary, sizeof t->summary, "%s vs %s: every float tensor byte-identical", a_at,
             b_at);
    return;
  }
  if (k->n_pairs == 0) {
    t->status = RC_CHECK_SKIPPED;
    snprintf(t->summary, sizeof t->summary,
             "%s vs %s: %d float tensors differ, not judged: no A/A pair at %" PRId64
             " measured the noise",
             a_at, b_at, n, t->step);
    return;
  }
  k->tensors = calloc((size_t)n, sizeof *k->tensors);
  if (!k->tensors) {
    t->status = RC_CHECK_ERROR;
    t->err.code = rc_fail(&t->err, RC_EXIT_SOFTWARE, "out of memory");
    snprintf(t->summary, sizeof t->summary, "out of memory");
    return;
  }
  k->r = rc_calib_state_rms(&t->cmp);
  double sq_total = 0;
  for (int i = 0; i < n; i++)
    if (rc_calib_diff_is_float(&t->cmp.diffs[i])) sq_total += t->cmp.diffs[i].sum_sq;
  int top = -1;
  for (int i = 0; i < n; i++) {
    const rc_diff *d = &t->cmp.diffs[i];
    rc_calib_tensor *x = &k->tensors[k->n_tensors++];
    snprintf(x->file, sizeof x->file, "%s", d->file);
    snprintf(x->object, sizeof x->object, "%s", d->object);
    x->r_abs = d->max_abs, x->r_rel = d->max_rel, x->r_ulp = d->max_ulp;
    x->r_n_different = d->n_different, x->n_elements = d->n_elements;
    x->scale = d->max_mag;
    double q = rc_calib_tensor_ms(d);
    x->rms_rel = sqrt(q);
    x->share = sq_total > 0 && isfinite(sq_total) ? d->sum_sq / sq_total : (isinf(q) ? 1 : 0);
    envelope_of(run, t, x);
    x->ratio = x->e_rms_rel > 0 ? x->rms_rel / x->e_rms_rel : (x->rms_rel > 0 ? INFINITY : 0);
    if (top < 0 || x->share > k->tensors[top].share) top = i;
  }
  rc_calib_state_rule(k);
  k->step = t->step;
  const rc_calib_tensor *x = &k->tensors[top];
  snprintf(k->what, sizeof k->what, "%s in %s, %.0f%% of it", x->object[0] ? x->object : x->file,
           x->file, 100 * x->share);
  for (int i = 0; i < k->n_tensors; i++) k->tensors[i].exceeds = k->exceeds;
  k->n_tensors_exceed = k->exceeds ? k->n_tensors : 0;
  char ratio[64];
  rc_calib_ratio_text(k->ratio, ratio, sizeof ratio);
  if (k->at_floor) {
    t->status = RC_CHECK_UNDECIDABLE;
    snprintf(
        t->summary, sizeof t->summary,
        "%s vs %s: at the floor, not decided: the state's RMS relative difference %.3g is "
        "%.2g x the floor (%.3g), while the %d fresh runs' pairs differ by at most %.3g, under "
        "a quarter of it; %d float tensors differ, most: %s",
        a_at, b_at, k->r, k->r / k->allowed, k->allowed, k->n_fresh, k->env, k->n_tensors, k->what);
  } else if (k->exceeds) {
    t->status = RC_CHECK_EXCEEDS_NOISE;
    snprintf(t->summary, sizeof t->summary,
             "%s vs %s: the state's RMS relative difference %.3g exceeds run-to-run noise by %s "
             "(the %d fresh runs' pairs at most %.3g); %d float tensors differ, most: %s",
             a_at, b_at, k->r, ratio, k->n_fresh, k->env, k->n_tensors, k->what);
  } else {
    t->status = RC_CHECK_WITHIN_NOISE;
    snprintf(t->summary, sizeof t->summary,
             "%s vs %s: the state's RMS relative difference %.3g is within run-to-run noise, %s "
             "the largest of %d pairs (%.3g); %d float tensors differ, most: %s",
             a_at, b_at, k->r, ratio, k->n_pairs, k->env, k->n_tensors, k->what);
  }
}

void rc_calib_state_rule(rc_calib *k) {
  double floor = RC_CALIB_FLOOR_REL;
  bool floor_bound = !(RC_CALIB_FACTOR * k->env > floor);
  k->allowed = floor_bound ? floor : RC_CALIB_FACTOR * k->env;
  k->ratio = k->env > 0 ? k->r / k->env : (k->r > 0 ? INFINITY : 0);
  k->exceeds = !(k->r <= k->allowed); /* NaN or inf exceeds */
  /* at the floor (calibrate.h): over it by less than the factor, where the
   * pairs measured less than the floor allows */
  k->at_floor = k->exceeds && floor_bound && k->r <= RC_CALIB_FACTOR * floor;
  if (k->at_floor) k->exceeds = false;
  k->undecidable = k->at_floor;
}

void rc_calib_states(rc_run *run, int from) {
  for (int i = from; i < run->n_checks; i++) {
    rc_check *x = &run->checks[i];
    if (x->what != RC_CHECK_STATE || x->twin < from || x->twin >= run->n_checks) continue;
    rc_check *t = &run->checks[x->twin];
    if (!t->is_twin) continue;
    judge_state(run, t, x);
  }
}

/* ---- replication: every resume leg at K, or not decided ---- */

static bool is_resume_leg_at(const rc_leg *l, const char *arm, int64_t k) {
  return l->depends_on >= 0 && l->resume_step == k && !strcmp(l->arm, arm);
}

int rc_calib_reproduce(rc_run *run) {
  /* two passes: which resume legs exceed, then what each excess becomes,
   * so that demoting one check does not change another's count */
  bool *exceeds = calloc((size_t)(run->n_legs > 0 ? run->n_legs : 1), sizeof *exceeds);
  if (!exceeds) return RC_EXIT_SOFTWARE;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->judged == RC_JUDGED_CALIBRATED &&
        (c->status == RC_CHECK_EXCEEDS_NOISE || (c->have_calib && c->calib.not_reproduced)))
      exceeds[c->leg_b] = true; /* not_reproduced: it exceeded, before a judgement of all */
  }
  for (int i = 0; i < run->n_checks; i++) {
    rc_check *c = &run->checks[i];
    if (c->judged != RC_JUDGED_CALIBRATED || !c->have_calib) continue;
    const rc_leg *lb = &run->legs[c->leg_b];
    int n = 0, m = 0;
    for (int j = 0; j < run->n_legs; j++)
      if (is_resume_leg_at(&run->legs[j], lb->arm, lb->resume_step)) {
        n++;
        m += exceeds[j];
      }
    rc_calib *k = &c->calib;
    k->resume_legs = n, k->resume_legs_exceeding = m;
    if (c->status != RC_CHECK_EXCEEDS_NOISE || m == n) continue;
    c->status = RC_CHECK_UNDECIDABLE;
    k->exceeds = false;
    k->not_reproduced = k->undecidable = true;
    for (int t = 0; t < k->n_tensors; t++) k->tensors[t].exceeds = false;
    k->n_tensors_exceed = 0;
    char was[sizeof c->summary];
    snprintf(was, sizeof was, "%s", c->summary);
    snprintf(c->summary, sizeof c->summary,
             "not reproduced, not decided: %d of the %d resume legs at %" PRId64
             " exceed the noise; here: %s",
             m, n, lb->resume_step, was);
  }
  free(exceeds);
  return RC_OK;
}

/* ---- the verdict ---- */

static const rc_check *first_with(const rc_run *run, rc_check_status s, bool trace_first) {
  const rc_check *best = NULL;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->status != s) continue;
    if (!best) {
      best = c;
      continue;
    }
    bool ct = c->what == RC_CHECK_TRACE && c->have_calib, bt = best->what == RC_CHECK_TRACE;
    if (trace_first && ct && (!bt || c->calib.step < best->calib.step)) best = c;
  }
  return best;
}

/* The first excess that not every resume leg at its K showed. */
static const rc_check *first_not_reproduced(const rc_run *run) {
  for (int i = 0; i < run->n_checks; i++)
    if (run->checks[i].status == RC_CHECK_UNDECIDABLE && run->checks[i].have_calib &&
        run->checks[i].calib.not_reproduced)
      return &run->checks[i];
  return NULL;
}

/* Whether a calibrated check of that leg exceeded without being reproduced. */
static bool leg_not_reproduced(const rc_run *run, int leg) {
  for (int i = 0; i < run->n_checks; i++)
    if (run->checks[i].leg_b == leg && run->checks[i].have_calib &&
        run->checks[i].calib.not_reproduced)
      return true;
  return false;
}

/* Of the resume legs at c's K that do not exceed, the calibrated check
 * that came closest to its allowed deviation (NULL: none judged). */
static const rc_check *closest_other(const rc_run *run, const rc_check *c) {
  const rc_leg *lb = &run->legs[c->leg_b];
  const rc_check *best = NULL;
  double best_f = -1;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *o = &run->checks[i];
    if (o->judged != RC_JUDGED_CALIBRATED || !o->have_calib || o->leg_b == c->leg_b ||
        !is_resume_leg_at(&run->legs[o->leg_b], lb->arm, lb->resume_step) ||
        leg_not_reproduced(run, o->leg_b)) /* a leg that exceeded too */
      continue;
    double f = o->calib.allowed > 0 ? o->calib.r / o->calib.allowed : 0;
    if (f > best_f) best_f = f, best = o;
  }
  return best;
}

int rc_calib_verdict(const rc_run *run, char *text, size_t text_cap, char *hint, size_t hint_cap,
                     int *check) {
  *check = -1;
  hint[0] = 0;
  const rc_check *c = first_with(run, RC_CHECK_EXCEEDS_NOISE, true);
  char ratio[64];
  if (c) {
    *check = (int)(c - run->checks);
    const rc_calib *k = &c->calib;
    rc_calib_ratio_text(k->ratio, ratio, sizeof ratio);
    const char *a = run->legs[c->leg_a].label, *b = run->legs[c->leg_b].label;
    int n = 0;
    if (c->what == RC_CHECK_TRACE)
      n = snprintf(text, text_cap,
                   "RESUME exceeds run-to-run noise by %s at step %" PRId64
                   " (%s): |%s - %s| is %.3g, %" PRId64
                   " step(s) after the checkpoint both legs started from, while %" PRId64
                   " steps of noise move the %d fresh runs apart by at most %.3g (allowed: %g x "
                   "that)",
                   ratio, k->step, k->what, a, b, k->r, k->step - c->trace_from + 1,
                   2 * (k->step - c->trace_from + 1), k->n_fresh, k->env, RC_CALIB_FACTOR);
    else
      n = snprintf(text, text_cap,
                   "RESUME exceeds run-to-run noise by %s in the final state at step %" PRId64
                   " (%s): the RMS relative difference of %s and %s is %.3g, while the %d fresh "
                   "runs differ by at most %.3g",
                   ratio, c->step, k->what, a, b, k->r, k->n_fresh, k->env);
    if (k->resume_legs > 1 && n > 0 && (size_t)n < text_cap)
      snprintf(text + n, text_cap - (size_t)n,
               "; reproduced: all %d resume legs at %" PRId64
               " exceed it, each against the fresh leg whose checkpoint it loaded",
               k->resume_legs, run->legs[c->leg_b].resume_step);
    return RC_CHECK_EXCEEDS_NOISE;
  }
  c = first_not_reproduced(run);
  if (c) {
    *check = (int)(c - run->checks);
    const rc_calib *k = &c->calib;
    rc_calib_ratio_text(k->ratio, ratio, sizeof ratio);
    char where[700], other[400] = "";
    if (c->what == RC_CHECK_TRACE)
      snprintf(where, sizeof where, "at step %" PRId64 " (%s)", k->step, k->what);
    else
      snprintf(where, sizeof where, "in the final state at step %" PRId64 " (%s)", c->step,
               k->what);
    const rc_check *o = closest_other(run, c);
    if (o && o->calib.at_floor)
      snprintf(other, sizeof other,
               "; %s against %s does not (only at the floor: %.2g x it, not decided)",
               run->legs[o->leg_b].label, run->legs[o->leg_a].label,
               o->calib.allowed > 0 ? o->calib.r / o->calib.allowed : 0.0);
    else if (o)
      snprintf(other, sizeof other, "; %s against %s does not (closest: %.2g of the allowed)",
               run->legs[o->leg_b].label, run->legs[o->leg_a].label,
               o->calib.allowed > 0 ? o->calib.r / o->calib.allowed : 0.0);
    snprintf(text, text_cap,
             "inconclusive: not reproduced: %s against %s exceeds run-to-run noise by %s %s, but "
             "not every resume leg at %" PRId64 " does (%d of %d)%s. A resume bug is in what "
             "every resumed process loads and moves every one of them; a rounding flip in one "
             "process moves one",
             run->legs[c->leg_b].label, run->legs[c->leg_a].label, ratio, where,
             run->legs[c->leg_b].resume_step, k->resume_legs_exceeding, k->resume_legs, other);
    snprintf(hint, hint_cap,
             "to decide: run again (each process draws its own noise), more resume legs and fresh "
             "runs (--resumes P --aa M), another K, or the trainer's deterministic mode (then "
             "every check is byte for byte)");
    return RC_CHECK_UNDECIDABLE;
  }
  c = first_with(run, RC_CHECK_UNDECIDABLE, false);
  if (c && c->calib.at_floor) {
    *check = (int)(c - run->checks);
    const rc_calib *k = &c->calib;
    snprintf(text, text_cap,
             "inconclusive: at the floor: %s at step %" PRId64 " is %.2g x the smallest deviation "
             "the check resolves (%g of the value), while the %d fresh runs differ there by at "
             "most %.3g: they measured no noise of that size, yet a single 16-bit rounding flip "
             "that no fresh run happened to make is that size; nothing exceeds the noise by "
             "more",
             c->what == RC_CHECK_TRACE ? k->what : "the final state's RMS difference", k->step,
             k->r / k->allowed, RC_CALIB_FLOOR_REL, k->n_fresh, k->env);
    snprintf(hint, hint_cap,
             "to decide: more fresh runs (--aa M: more pairs to show the noise's jumps), another "
             "K, or the trainer's deterministic mode (then every check is byte for byte)");
    return RC_CHECK_UNDECIDABLE;
  }
  if (c) {
    *check = (int)(c - run->checks);
    const rc_calib *k = &c->calib;
    snprintf(text, text_cap,
             "inconclusive: the noise is too large to decide: at step %" PRId64
             ", the first step %s trains, the %d fresh runs already allow a deviation of %.2g%% of "
             "the value in every noisy column (least: %s), at least %g%%",
             k->resolution_step, run->legs[c->leg_b].label, k->n_fresh, 100 * k->resolution,
             k->resolution_col, 100 * RC_CALIB_UNDECIDABLE_REL);
    snprintf(hint, hint_cap,
             "to decide: an earlier K (the fresh runs drift apart with every step, so the noise "
             "at K+1 is smaller), or the trainer's deterministic mode (then every check is "
             "byte for byte)");
    return RC_CHECK_UNDECIDABLE;
  }
  const rc_check *w = NULL;
  int noisy = 0;
  double res = INFINITY;
  const rc_check *best_res = NULL;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *k = &run->checks[i];
    noisy += k->status == RC_CHECK_NOISE_MEASURED || k->status == RC_CHECK_WITHIN_NOISE;
    if (k->status == RC_CHECK_WITHIN_NOISE && !w) w = k;
    if (k->have_calib && k->what == RC_CHECK_TRACE && k->calib.resolution < res) {
      res = k->calib.resolution;
      best_res = k;
    }
  }
  if (!noisy) return 0;
  char resolution[256] = "";
  if (best_res)
    snprintf(resolution, sizeof resolution,
             "; the smallest effect it resolves at step %" PRId64 ": %.2g relative (%s)",
             best_res->calib.resolution_step, res, best_res->calib.resolution_col);
  if (w) {
    *check = (int)(w - run->checks);
    snprintf(text, text_cap,
             "RESUME within run-to-run noise: every exact check identical; trajectories and the "
             "final state within the noise %d fresh runs measure (each trace column j steps "
             "after the checkpoint within %g x what 2j steps of noise do to the fresh pairs, the "
             "state within %g x their RMS difference)%s",
             w->calib.n_fresh, RC_CALIB_FACTOR, RC_CALIB_FACTOR, resolution);
  } else {
    snprintf(text, text_cap,
             "RESUME identical byte for byte, while the fresh runs differ by run-to-run noise: "
             "every exact check identical, every calibrated check identical");
  }
  return RC_CHECK_WITHIN_NOISE;
}
