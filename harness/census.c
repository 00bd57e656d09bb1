/* census.c — parsing two state censuses and naming the fields that differ
 * (harness/census.h, docs/census.md).
 *
 * A census is small (a line per tensor and per module), so both files are
 * read whole, split in place into lines and columns, sorted by field name
 * for matching, and reported in the through file's order. The first-step
 * census is compared the same way and its differences appended, each
 * marked with what the after-load census saw of the field. */
#include "harness/census.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "base/text.h"
#include "io/layout.h"

/* A census of gpu-small is ~200 KB; anything past this is not one. */
#define CENSUS_MAX_BYTES (64u << 20)

typedef struct {
  const char *field, *value, *note; /* point into the file's text */
  rc_census_class cls;
  int order; /* line order in its file */
} entry;

static const char *const CLASS_NAMES[] = {"saved", "local", "derived", "copy"};

const char *rc_census_class_name(rc_census_class c) {
  return (unsigned)c < 4 ? CLASS_NAMES[c] : "?";
}

/* Every class but local fails the check when it differs. */
static bool fails(const entry *e) {
  return e && e->cls != RC_CENSUS_LOCAL;
}

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
    /* CRLF: the CR ends the line, it is not part of the value (a census
     * written on Windows would otherwise differ in every field while
     * printing equal values) */
    size_t len = strlen(p);
    if (len && p[len - 1] == '\r') p[len - 1] = 0;
    if (*p && *p != '#') {
      char *col[4] = {p, NULL, NULL, NULL};
      int ncol = 1;
      for (char *t = p; *t && ncol < 4; t++)
        if (*t == '\t') *t = 0, col[ncol++] = t + 1;
      int cls = -1;
      for (int k = 0; ncol >= 3 && k < 4; k++)
        if (!strcmp(col[1], CLASS_NAMES[k])) cls = k;
      if (ncol < 3 || !*col[0] || cls < 0) {
        census_free(c);
        return rc_fail(
            err, RC_EXIT_DATAERR,
            "%s:%d: not a census line (FIELD<TAB>saved|local|derived|copy<TAB>VALUE[<TAB>NOTE])",
            path, line);
      }
      c->e[c->n] = (entry){col[0], col[2], ncol == 4 ? col[3] : NULL, (rc_census_class)cls, c->n};
      c->n++;
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
  entry key = {field, NULL, NULL, RC_CENSUS_SAVED, 0};
  return bsearch(&key, c->e, (size_t)c->n, sizeof *c->e, by_field);
}

static char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

/* ---- what a census covers ---- */

static const char *const FAMILY_NAMES[RC_CENSUS_N_FAMILIES] = {
    "iteration",
    "data position",
    "RNG",
    "optimizer moments",
    "optimizer step",
    "optimizer state (other)",
    "LR scheduler",
    "loss scaler",
    "model weights",
    "MoE expert bias",
    "fp8 amax history",
    "process-local module state",
    "registered state",
    "the settings the next step uses (derived)",
    "in-process copies against their masters"};

const char *rc_census_family_name(int i) {
  return i >= 0 && i < RC_CENSUS_N_FAMILIES ? FAMILY_NAMES[i] : "?";
}

static bool starts(const char *s, const char *prefix) {
  return !strncmp(s, prefix, strlen(prefix));
}

/* The family bit of a field, 0 when no family names it. */
static unsigned family_of(const char *f) {
  if (!strcmp(f, "iteration")) return RC_FAM_ITERATION;
  if (starts(f, "data.")) return RC_FAM_DATA;
  if (starts(f, "rng.")) return RC_FAM_RNG;
  if (starts(f, "optimizer.exp_avg") || starts(f, "optimizer.momentum_buffer"))
    return RC_FAM_MOMENTS;
  if (!strcmp(f, "optimizer.step") || starts(f, "optimizer.step.")) return RC_FAM_OPT_STEP;
  if (starts(f, "optimizer.")) return RC_FAM_OPT_OTHER;
  if (starts(f, "scheduler.")) return RC_FAM_SCHEDULER;
  if (starts(f, "loss_scaler.") || starts(f, "grad_scaler.")) return RC_FAM_SCALER;
  if (starts(f, "model.")) return RC_FAM_MODEL;
  if (starts(f, "moe.")) return RC_FAM_MOE;
  if (starts(f, "fp8.")) return RC_FAM_FP8;
  if (starts(f, "linear.") || starts(f, "main_grad")) return RC_FAM_LOCAL_FLAGS;
  if (starts(f, "state.") && f[6]) return RC_FAM_REGISTERED;
  return 0;
}

/* Adds the word w (n bytes) to a comma-separated list, once; a full list
 * ends in "...". */
static void other_add(char *list, const char *w, size_t n) {
  size_t len = strlen(list);
  if (len >= 3 && !strcmp(list + len - 3, "...")) return;
  for (const char *p = list; *p;) {
    size_t k = strcspn(p, ",");
    if (k == n && !strncmp(p, w, n)) return;
    p += k;
    while (*p == ',' || *p == ' ') p++;
  }
  const char *sep = len ? ", " : "";
  if (len + strlen(sep) + n + 4 >= RC_CENSUS_OTHER_CAP) {
    snprintf(list + len, RC_CENSUS_OTHER_CAP - len, "%s...", sep);
    return;
  }
  snprintf(list + len, RC_CENSUS_OTHER_CAP - len, "%s%.*s", sep, (int)n, w);
}

/* Every field of c into d's families, in c's file order. */
static void add_families(rc_census_diff *d, const census *c) {
  for (int i = 0; i < c->n; i++) {
    const char *f = c->e[i].field;
    unsigned fam = family_of(f);
    d->families |= fam;
    if (c->e[i].cls == RC_CENSUS_DERIVED) d->families |= RC_FAM_DERIVED;
    if (c->e[i].cls == RC_CENSUS_COPY) {
      d->families |= RC_FAM_COPIES;
      continue; /* "copy.*" is named by its class, not as another field */
    }
    if (fam == RC_FAM_REGISTERED)
      other_add(d->registered, f + 6, strcspn(f + 6, "."));
    else if (!fam)
      other_add(d->other, f, strcspn(f, "./"));
  }
}

static void merge_other(char *into, const char *from) {
  for (const char *p = from; *p;) {
    size_t k = strcspn(p, ",");
    if (strncmp(p, "...", 3)) other_add(into, p, k);
    p += k;
    while (*p == ',' || *p == ' ') p++;
  }
}

void rc_census_coverage(const rc_census_diff *d, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < RC_CENSUS_N_FAMILIES; i++)
    if (d->families & (1u << i)) {
      bool named = (1u << i) == RC_FAM_REGISTERED && d->registered[0];
      int w = snprintf(buf + len, cap - len, "%s%s%s%s%s", len ? ", " : "", FAMILY_NAMES[i],
                       named ? " (" : "", named ? d->registered : "", named ? ")" : "");
      if (w < 0 || (size_t)w >= cap - len) return;
      len += (size_t)w;
    }
  if (d->other[0]) snprintf(buf + len, cap - len, "%sother fields: %s", len ? ", " : "", d->other);
}

/* ---- comparing ---- */

static bool add_diff(rc_census_diff *d, const entry *a, const entry *b, const entry *before,
                     const entry *written) {
  rc_census_field_diff *f = &d->diffs[d->n_diffs++];
  const entry *any = a ? a : b;
  f->field = strdup(any->field);
  f->saved = fails(a) || fails(b);
  f->cls = fails(a) ? a->cls : fails(b) ? b->cls : RC_CENSUS_LOCAL;
  f->a = a ? strdup(a->value) : NULL;
  f->b = b ? strdup(b->value) : NULL;
  f->before = before ? strdup(before->value) : NULL;
  f->written = written ? strdup(written->value) : NULL;
  f->note = dup_or_null(a && a->note ? a->note : b ? b->note : NULL);
  if (f->saved) {
    d->n_saved_differ++;
    d->n_derived_differ += f->cls == RC_CENSUS_DERIVED;
    d->n_copy_differ += f->cls == RC_CENSUS_COPY;
  } else {
    d->n_local_differ++;
  }
  return f->field && (!a || f->a) && (!b || f->b) && (!before || f->before) &&
         (!written || f->written);
}

/* A census beside `through` (".txt" → ".<kind>.txt"): the before-save
 * one, the census of what the save wrote. */
static void beside_path(const char *through, const char *kind, char *buf, size_t cap) {
  size_t n = strlen(through);
  if (n < 4 || strcmp(through + n - 4, ".txt") || n + strlen(kind) + 8 > cap) {
    buf[0] = 0;
    return;
  }
  snprintf(buf, cap, "%.*s.%s.txt", (int)(n - 4), through, kind);
}

/* Rank 0's census of what its save wrote, beside `through` (rank R's):
 * with data parallel the replicated state is in rank 0's shard only. ""
 * when through is rank 0's or not named as the core names it. */
static void rank0_written_path(const char *through, char *buf, size_t cap) {
  buf[0] = 0;
  const char *r = strrchr(through, '/');
  r = strstr(r ? r : through, ".rank");
  if (!r) return;
  char *end;
  long rank = strtol(r + 5, &end, 10);
  if (end == r + 5 || rank == 0 || strcmp(end, ".txt")) return;
  snprintf(buf, cap, "%.*s.rank0.saved.txt", (int)(r - through), through);
}

/* The value a save wrote for a saved field: in this rank's census of what
 * its save wrote, else rank 0's (*rank0 set); NULL when neither has it. */
static const entry *written_of(const census *w, const census *w0, const char *field, bool *rank0) {
  const entry *e = w->n ? find(w, field) : NULL;
  *rank0 = false;
  if (!e && w0->n && (e = find(w0, field))) *rank0 = true;
  return e;
}

/* The differences of two parsed censuses (pre: the before-save one, w and
 * w0: this rank's and rank 0's census of what the save wrote; n 0 if
 * none) into out, failing fields first, each group in a's order, then the
 * fields only b has. Sorts a and b; false when out of memory. */
static bool diff_parsed(census *a, census *b, const census *pre, const census *w, const census *w0,
                        rc_census_diff *out) {
  memset(out, 0, sizeof *out);
  out->diffs = calloc((size_t)(a->n + b->n + 1), sizeof *out->diffs);
  bool ok = out->diffs != NULL;
  qsort(a->e, (size_t)a->n, sizeof *a->e, by_order);
  add_families(out, a); /* in a's file order */
  qsort(b->e, (size_t)b->n, sizeof *b->e, by_field);
  int distinct = a->n;
  for (int pass = 0; ok && pass < 2; pass++) /* failing fields first, then local */
    for (int i = 0; ok && i < a->n; i++) {
      const entry *x = &a->e[i], *y = find(b, x->field);
      bool failing = fails(x) || fails(y);
      if (failing != (pass == 0) || (y && !strcmp(x->value, y->value))) continue;
      const entry *p = pre->n ? find(pre, x->field) : NULL;
      bool saved = x->cls == RC_CENSUS_SAVED || (y && y->cls == RC_CENSUS_SAVED), rank0 = false;
      ok = add_diff(out, x, y, p && strcmp(p->value, x->value) ? p : NULL,
                    saved ? written_of(w, w0, x->field, &rank0) : NULL);
      if (ok) out->diffs[out->n_diffs - 1].written_rank0 = rank0;
    }
  qsort(b->e, (size_t)b->n, sizeof *b->e, by_order);
  add_families(out, b);
  qsort(a->e, (size_t)a->n, sizeof *a->e, by_field);
  for (int i = 0; ok && i < b->n; i++) {
    const entry *y = &b->e[i];
    if (find(a, y->field)) continue;
    distinct++;
    ok = add_diff(out, NULL, y, NULL, NULL);
  }
  out->n_fields = distinct;
  /* a derived value that differs while no saved field does was computed
   * from identical state */
  bool saved_differ = false;
  for (int i = 0; ok && i < out->n_diffs; i++)
    saved_differ |= out->diffs[i].cls == RC_CENSUS_SAVED && out->diffs[i].saved;
  for (int i = 0; ok && i < out->n_diffs; i++) {
    rc_census_field_diff *f = &out->diffs[i];
    if (f->cls != RC_CENSUS_DERIVED || !f->saved) continue;
    f->sources_equal = !saved_differ;
    f->consequence = saved_differ;
    if (f->consequence) out->n_saved_differ--, out->n_derived_differ--;
  }
  qsort(b->e, (size_t)b->n, sizeof *b->e, by_field);
  if (!ok) rc_census_diff_free(out);
  return ok;
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
  census w = {0}, w0 = {0};
  char side[4][4200];
  beside_path(through, "before-save", side[0], sizeof side[0]);
  beside_path(through, "saved", side[1], sizeof side[1]);
  rank0_written_path(through, side[2], sizeof side[2]);
  census *into[3] = {&pre, &w, &w0};
  for (int k = 0; k < 3; k++)
    if (side[k][0] && rc_path_exists(side[k]) && (rc = parse(side[k], into[k], err))) {
      census_free(&a), census_free(&b), census_free(&pre), census_free(&w);
      return rc;
    }
  bool ok = diff_parsed(&a, &b, &pre, &w, &w0, out);
  census_free(&a), census_free(&b), census_free(&pre), census_free(&w), census_free(&w0);
  return ok ? RC_OK : rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
}

int rc_census_compare_first_step(const char *through, const char *resumed,
                                 const char *through_after, const char *resumed_after,
                                 rc_census_diff *d, rc_err *err) {
  census a, b, none = {0}, ta = {0}, ra = {0};
  int rc = parse(through, &a, err);
  if (rc) return rc;
  if ((rc = parse(resumed, &b, err))) {
    census_free(&a);
    return rc;
  }
  /* the after-load pair, to say what it saw of each field */
  if (through_after && resumed_after && rc_path_exists(through_after) &&
      rc_path_exists(resumed_after)) {
    if (!(rc = parse(through_after, &ta, err)) && (rc = parse(resumed_after, &ra, err)))
      census_free(&ta);
    if (rc) {
      census_free(&a), census_free(&b);
      return rc;
    }
  }
  rc_census_diff f;
  bool ok = diff_parsed(&a, &b, &none, &none, &none, &f);
  for (int i = 0; ok && i < f.n_diffs; i++) {
    rc_census_field_diff *x = &f.diffs[i];
    x->first_step = true;
    if (!ta.n && !ra.n) continue;
    const entry *p = find(&ta, x->field), *q = find(&ra, x->field);
    x->after_load = !p || !q                     ? RC_AFTER_LOAD_ABSENT
                    : strcmp(p->value, q->value) ? RC_AFTER_LOAD_DIFFERS
                                                 : RC_AFTER_LOAD_EQUAL;
  }
  census_free(&a), census_free(&b), census_free(&ta), census_free(&ra);
  if (!ok) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  int fields = f.n_fields, saved = f.n_saved_differ, local = f.n_local_differ;
  int derived = f.n_derived_differ, copies = f.n_copy_differ;
  f.n_fields = f.n_saved_differ = f.n_local_differ = 0; /* counted as first-step below */
  f.n_derived_differ = f.n_copy_differ = 0;
  if (!rc_census_merge(d, &f, -1)) {
    rc_census_diff_free(&f);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  d->first_step = true;
  d->first_fields += fields;
  d->first_saved_differ += saved;
  d->first_local_differ += local;
  d->first_derived_differ += derived;
  d->first_copy_differ += copies;
  return RC_OK;
}

bool rc_census_merge(rc_census_diff *into, rc_census_diff *from, int prefix_rank) {
  rc_census_field_diff *p =
      realloc(into->diffs, (size_t)(into->n_diffs + from->n_diffs + 1) * sizeof *p);
  if (!p) return false;
  into->diffs = p;
  if (prefix_rank >= 0)
    for (int i = 0; i < from->n_diffs; i++) {
      char *named = NULL;
      if (asprintf(&named, "rank %d: %s", prefix_rank, from->diffs[i].field) < 0) return false;
      free(from->diffs[i].field);
      from->diffs[i].field = named;
    }
  /* after-load differences before first-step ones, whatever the order of
   * the calls: a rank's after-load ones go before any first-step one */
  int at = into->n_diffs;
  bool from_after = from->n_diffs && !from->diffs[0].first_step;
  if (from_after)
    while (at > 0 && into->diffs[at - 1].first_step) at--;
  memmove(&into->diffs[at + from->n_diffs], &into->diffs[at],
          (size_t)(into->n_diffs - at) * sizeof *p);
  memcpy(&into->diffs[at], from->diffs, (size_t)from->n_diffs * sizeof *p);
  into->n_diffs += from->n_diffs;
  into->n_fields += from->n_fields;
  into->n_saved_differ += from->n_saved_differ;
  into->n_local_differ += from->n_local_differ;
  into->n_derived_differ += from->n_derived_differ;
  into->n_copy_differ += from->n_copy_differ;
  into->first_derived_differ += from->first_derived_differ;
  into->first_copy_differ += from->first_copy_differ;
  into->first_step |= from->first_step;
  into->first_fields += from->first_fields;
  into->first_saved_differ += from->first_saved_differ;
  into->first_local_differ += from->first_local_differ;
  into->families |= from->families;
  merge_other(into->registered, from->registered);
  merge_other(into->other, from->other);
  free(from->diffs);
  memset(from, 0, sizeof *from);
  return true;
}

void rc_census_diff_free(rc_census_diff *d) {
  for (int i = 0; i < d->n_diffs; i++) {
    rc_census_field_diff *f = &d->diffs[i];
    free(f->field), free(f->a), free(f->b), free(f->before), free(f->note), free(f->written);
  }
  free(d->diffs);
  memset(d, 0, sizeof *d);
}

void rc_census_first_step_filename(char *buf, size_t cap, int64_t step, int rank) {
  snprintf(buf, cap, RC_ITER_NAME_FORMAT ".rank%d.first-step.txt", step, rank);
}

/* ---- describing ---- */

/* The text of a file, escaped for a terminal, in one of a few buffers. */
typedef struct {
  char field[512], a[512], b[512], before[512], note[1024], written[512];
} escaped;

static void escape_all(const rc_census_field_diff *d, escaped *e) {
  rc_text_escape(d->field, e->field, sizeof e->field);
  rc_text_escape(d->written ? d->written : "", e->written, sizeof e->written);
  rc_text_escape(d->a ? d->a : "", e->a, sizeof e->a);
  rc_text_escape(d->b ? d->b : "", e->b, sizeof e->b);
  rc_text_escape(d->before ? d->before : "", e->before, sizeof e->before);
  rc_text_escape(d->note ? d->note : "", e->note, sizeof e->note);
}

/* Why a saved first-step field differs, as observed: what the census
 * after the load saw of it. */
static const char *after_load_words(rc_census_after_load w) {
  switch (w) {
  case RC_AFTER_LOAD_EQUAL:
    return "saved; equal in the census after the load: it changed between the load and the "
           "first step";
  case RC_AFTER_LOAD_DIFFERS:
    return "saved: not restored by the load; the census after the load saw it too";
  case RC_AFTER_LOAD_ABSENT:
    return "saved; not in both censuses after the load";
  default:
    return "saved; no census after the load to compare";
  }
}

/* "the device copy of moe.expert_bias.decoder/layers/1" for
 * "copy.device.moe.expert_bias.decoder/layers/1": a copy field's name as
 * words (its kind, then its master's field). */
static void copy_words(const char *field, char *buf, size_t cap) {
  static const char *const KINDS[][2] = {{"copy.device.", "the device copy of "},
                                         {"copy.half.", "the 16-bit copy of "},
                                         {"copy.fp8_cache.", "the fp8 weight cache of "},
                                         {"copy.pending.", "the pending "}};
  for (size_t k = 0; k < sizeof KINDS / sizeof KINDS[0]; k++)
    if (starts(field, KINDS[k][0])) {
      snprintf(buf, cap, "%s%s", KINDS[k][1], field + strlen(KINDS[k][0]));
      return;
    }
  snprintf(buf, cap, "the in-process copy %s", field);
}

void rc_census_describe(const rc_census_field_diff *d, const char *a_name, const char *b_name,
                        char *buf, size_t cap) {
  escaped e;
  escape_all(d, &e);
  const char *stage = d->first_step ? "before the first step: " : "";
  if (!d->a || !d->b) {
    snprintf(buf, cap, "%s%s: only %s has it (%s)%s", stage, e.field, d->a ? a_name : b_name,
             d->a ? e.a : e.b, d->saved ? "; a load must restore it" : "");
    return;
  }
  if (!d->saved) {
    snprintf(buf, cap, "%s%s: %s %s, %s %s (process-local by design%s%s)", stage, e.field, a_name,
             e.a, b_name, e.b, d->note ? ": " : "", e.note);
    return;
  }
  if (d->cls == RC_CENSUS_DERIVED) {
    snprintf(buf, cap,
             "%s%s: %s %s, %s %s (derived: the %s process computes %s where the %s process "
             "computes %s, %s)",
             stage, e.field, a_name, e.a, b_name, e.b, b_name, e.b, a_name, e.a,
             d->sources_equal ? "though the state they come from is identical (rebuilt from a "
                                "default?)"
                              : "and saved state it may be computed from differs too");
    return;
  }
  if (d->cls == RC_CENSUS_COPY) {
    char what[600];
    copy_words(e.field, what, sizeof what);
    bool a_ok = !strcmp(d->a, "ok"), b_ok = !strcmp(d->b, "ok");
    if (a_ok && !b_ok)
      snprintf(buf, cap, "%s%s: %s %s, %s %s (copy: %s is not the loaded value in the %s process)",
               stage, e.field, a_name, e.a, b_name, e.b, what, b_name);
    else if (b_ok && !a_ok)
      snprintf(buf, cap,
               "%s%s: %s %s, %s %s (copy: %s is not its master's value in the %s process)", stage,
               e.field, a_name, e.a, b_name, e.b, what, a_name);
    else
      snprintf(buf, cap, "%s%s: %s %s, %s %s (copy: %s)", stage, e.field, a_name, e.a, b_name, e.b,
               what);
    return;
  }
  if (d->first_step) {
    snprintf(buf, cap, "%s%s: %s %s, %s %s (%s)", stage, e.field, a_name, e.a, b_name, e.b,
             after_load_words(d->after_load));
    return;
  }
  if (d->before && !strcmp(d->before, d->b)) {
    snprintf(buf, cap,
             "%s: %s %s, %s %s (saved; the save changed the process that saved: %s before its "
             "save, %s after; the resumed process has what was saved)",
             e.field, a_name, e.a, b_name, e.b, e.before, e.a);
    return;
  }
  /* who wrote it: the through leg's census of what its save wrote (the
   * shard's content; A/A holds the save leg's shard to the same bytes) */
  if (d->written && !strcmp(d->written, d->b) && strcmp(d->written, d->a)) {
    snprintf(buf, cap,
             "%s: %s %s, %s %s (saved: the save wrote %s%s, which differs from the saving "
             "process's %s; the resumed process has what was saved)",
             e.field, a_name, e.a, b_name, e.b, e.written,
             d->written_rank0 ? " (into rank 0's shard only: this rank's is not in the checkpoint)"
                              : "",
             e.a);
    return;
  }
  if (d->written && !strcmp(d->written, d->a))
    snprintf(buf, cap,
             "%s: %s %s, %s %s (saved: not restored by the load); the checkpoint holds %s, as the "
             "saving process does",
             e.field, a_name, e.a, b_name, e.b, e.written);
  else
    snprintf(buf, cap, "%s: %s %s, %s %s (saved: not restored by the load)", e.field, a_name, e.a,
             b_name, e.b);
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

/* The number of local fields from i on that are of f's kind, of f's
 * census and have f's values (a group), 1 at least. */
static int group_size(const rc_census_diff *d, int i) {
  const rc_census_field_diff *f = &d->diffs[i];
  size_t k = kind_len(f->field);
  int same = 1;
  while (i + same < d->n_diffs) {
    const rc_census_field_diff *g = &d->diffs[i + same];
    if (g->saved || g->first_step != f->first_step || kind_len(g->field) != k ||
        strncmp(g->field, f->field, k) || !g->a != !f->a || !g->b != !f->b ||
        (f->a && strcmp(g->a, f->a)) || (f->b && strcmp(g->b, f->b)))
      break;
    same++;
  }
  return same;
}

/* "linear.is_first_microbatch (13 modules: through FALSE, resumed TRUE)" */
static int group_text(const rc_census_field_diff *f, int same, char *buf, size_t cap) {
  escaped e;
  escape_all(f, &e);
  size_t k = kind_len(f->field);
  char kind[512];
  snprintf(kind, sizeof kind, "%.*s", (int)k, f->field);
  char kind_esc[512];
  rc_text_escape(kind, kind_esc, sizeof kind_esc);
  char count[32] = "";
  if (f->field[k]) snprintf(count, sizeof count, "%d module%s: ", same, same == 1 ? "" : "s");
  return snprintf(buf, cap, "%s%s (%sthrough %s, resumed %s)",
                  f->first_step ? "before the first step: " : "", kind_esc, count, f->a ? e.a : "-",
                  f->b ? e.b : "-");
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

/* One census's lines (first_step: which). */
static void print_stage(const rc_census_diff *d, FILE *out, const char *indent, int max_saved,
                        bool first_step) {
  int shown = 0, n_saved = first_step ? d->first_saved_differ : d->n_saved_differ;
  char line[2048];
  for (int i = 0; i < d->n_diffs; i++) {
    const rc_census_field_diff *f = &d->diffs[i];
    if (!f->saved || f->consequence || f->first_step != first_step) continue;
    if (shown++ == max_saved) {
      fprintf(out, "%s... and %d more saved fields%s (report.json lists them all)\n", indent,
              n_saved - max_saved, first_step ? " before the first step" : "");
      break;
    }
    rc_census_describe(f, "through", "resumed", line, sizeof line);
    fprintf(out, "%s%s\n", indent, line);
  }
  for (int i = 0, listed = 0; i < d->n_diffs; i++) {
    const rc_census_field_diff *f = &d->diffs[i];
    if (!f->consequence || f->first_step != first_step || listed++ == max_saved) continue;
    rc_census_describe(f, "through", "resumed", line, sizeof line);
    fprintf(out, "%s%s\n", indent, line);
  }
  for (int i = 0; i < d->n_diffs; i++) {
    const rc_census_field_diff *f = &d->diffs[i];
    if (f->saved || f->first_step != first_step) continue;
    int same = group_size(d, i);
    group_text(f, same, line, sizeof line);
    char note[1024];
    rc_text_escape(f->note ? f->note : "", note, sizeof note);
    fprintf(out, "%s%s: process-local by design%s%s\n", indent, line, f->note ? ": " : "", note);
    i += same - 1;
  }
}

void rc_census_print(const rc_census_diff *d, FILE *out, const char *indent, int max_saved) {
  print_stage(d, out, indent, max_saved, false);
  print_stage(d, out, indent, max_saved, true);
}

void rc_census_count_phrase(const rc_census_diff *d, bool first_step, char *buf, size_t cap) {
  int all = first_step ? d->first_saved_differ : d->n_saved_differ;
  int derived = first_step ? d->first_derived_differ : d->n_derived_differ;
  int copies = first_step ? d->first_copy_differ : d->n_copy_differ;
  int n[3] = {all - derived - copies, derived, copies};
  const char *one[3] = {"saved field", "derived field", "in-process copy"};
  const char *many[3] = {"saved fields", "derived fields", "in-process copies"};
  size_t len = 0;
  buf[0] = 0;
  int parts = 0, total = 0;
  for (int k = 0; k < 3; k++) parts += n[k] > 0, total += n[k];
  for (int k = 0, done = 0; k < 3; k++) {
    if (n[k] <= 0) continue;
    done++;
    const char *sep = done == 1 ? "" : done == parts ? " and " : ", ";
    int w = snprintf(buf + len, cap - len, "%s%d %s", sep, n[k], n[k] == 1 ? one[k] : many[k]);
    if (w < 0 || (size_t)w >= cap - len) return;
    len += (size_t)w;
  }
  if (!parts)
    snprintf(buf, cap, "0 saved fields differ");
  else
    snprintf(buf + len, cap - len, " differ%s", total == 1 ? "s" : "");
}

const rc_census_field_diff *rc_census_first_saved(const rc_census_diff *d) {
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < d->n_diffs; i++)
      if (d->diffs[i].saved && !d->diffs[i].consequence && d->diffs[i].first_step == (pass == 1))
        return &d->diffs[i];
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

static void json_differences(rc_jw *w, const char *key, const rc_census_diff *d, bool first_step) {
  static const char *const after[] = {NULL, "equal", "differs", "absent"};
  rc_jw_key(w, key);
  rc_jw_arr_begin(w);
  for (int k = 0; k < d->n_diffs; k++) {
    const rc_census_field_diff *f = &d->diffs[k];
    if (f->first_step != first_step) continue;
    char text[2048];
    rc_census_describe(f, "through", "resumed", text, sizeof text);
    rc_jw_obj_begin(w);
    value_or_null(w, "field", f->field);
    value_or_null(w, "class", rc_census_class_name(f->cls));
    value_or_null(w, "through", f->a);
    value_or_null(w, "resumed", f->b);
    value_or_null(w, "through_before_save", f->before);
    value_or_null(w, "checkpoint", f->written);
    rc_jw_kv_str_or_null(w, "note", f->note);
    if (first_step) value_or_null(w, "after_load", after[f->after_load]);
    value_or_null(w, "text", text);
    rc_jw_obj_end(w);
  }
  rc_jw_arr_end(w);
}

void rc_census_json_differences(rc_jw *w, const char *key, const rc_census_diff *d) {
  json_differences(w, key, d, false);
}

void rc_census_json_first_step_differences(rc_jw *w, const char *key, const rc_census_diff *d) {
  json_differences(w, key, d, true);
}
