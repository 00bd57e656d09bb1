/* bisect_events.c — reading `train --events` logs (docs/events.md) and
 * aligning two of them (docs/design.md §9).
 *
 * Both processes of a replay run the same code on the same step, so their
 * logs have the same operations in the same order; event i on one side is
 * event i on the other unless the identity (step, microbatch, kind, module or
 * parameter, call) differs, which is reported as a structural difference.
 * Fields are compared as the strings the core wrote: fingerprints are hex
 * words and floats are C99 hex, so string equality is bit equality.
 *
 * The answer is the first event whose *values* differ. `passed` and `beta`
 * are how a GEMM was asked to run, not what it produced: in the seed every
 * module's first forward after a resume passes TRUE, and an overwrite of a
 * freshly zeroed main_grad equals an add into it, so those differences are
 * collected as "harmless here" and only named as context of the answer. */
#include "bisect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"

bool rc_event_field_is_context(const char *key) {
  return !strcmp(key, "passed") || !strcmp(key, "beta");
}

const char *rc_event_get(const rc_event *e, const char *key) {
  for (int i = 0; i < e->n_fields; i++)
    if (!strcmp(e->key[i], key)) return e->val[i];
  return NULL;
}

static bool parse_long(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* Copies [s, s+n) into dst[cap]; false when it does not fit. */
static bool copy_tok(char *dst, size_t cap, const char *s, size_t n) {
  if (n >= cap) return false;
  memcpy(dst, s, n);
  dst[n] = 0;
  return true;
}

static int parse_line(const char *s, size_t len, int lineno, rc_event *e, rc_err *err) {
  memset(e, 0, sizeof *e);
  e->call = -1;
  e->line = lineno;
  bool have_step = false, have_mb = false, have_kind = false;
  size_t i = 0;
  while (i < len) {
    while (i < len && s[i] == ' ') i++;
    if (i >= len) break;
    size_t j = i;
    while (j < len && s[j] != ' ') j++;
    const char *tok = s + i;
    size_t tlen = j - i;
    const char *eq = memchr(tok, '=', tlen);
    if (!eq || eq == tok)
      return rc_fail(err, RC_EXIT_DATAERR, "line %d: '%.*s' is not key=value", lineno, (int)tlen,
                     tok);
    char key[24], val[256];
    if (!copy_tok(key, sizeof key, tok, (size_t)(eq - tok)) ||
        !copy_tok(val, sizeof val, eq + 1, tlen - (size_t)(eq - tok) - 1))
      return rc_fail(err, RC_EXIT_DATAERR, "line %d: field too long", lineno);
    long long v;
    if (!strcmp(key, "step")) {
      if (!parse_long(val, 0, INT64_MAX, &v))
        return rc_fail(err, RC_EXIT_DATAERR, "line %d: bad step '%s'", lineno, val);
      e->step = v;
      have_step = true;
    } else if (!strcmp(key, "mb")) {
      if (!parse_long(val, -1, 1 << 30, &v))
        return rc_fail(err, RC_EXIT_DATAERR, "line %d: bad mb '%s'", lineno, val);
      e->mb = (int)v;
      have_mb = true;
    } else if (!strcmp(key, "kind")) {
      if (!copy_tok(e->kind, sizeof e->kind, val, strlen(val)))
        return rc_fail(err, RC_EXIT_DATAERR, "line %d: kind too long", lineno);
      have_kind = true;
    } else if (!strcmp(key, "module") || !strcmp(key, "param")) {
      if (!copy_tok(e->name, sizeof e->name, val, strlen(val)))
        return rc_fail(err, RC_EXIT_DATAERR, "line %d: name too long", lineno);
    } else if (!strcmp(key, "call")) {
      if (!parse_long(val, 0, 1 << 30, &v))
        return rc_fail(err, RC_EXIT_DATAERR, "line %d: bad call '%s'", lineno, val);
      e->call = (int)v;
    } else {
      if (e->n_fields == RC_EVENT_MAX_FIELDS)
        return rc_fail(err, RC_EXIT_DATAERR, "line %d: more than %d fields", lineno,
                       RC_EVENT_MAX_FIELDS);
      if (!copy_tok(e->val[e->n_fields], sizeof e->val[0], val, strlen(val)))
        return rc_fail(err, RC_EXIT_DATAERR, "line %d: value of %s too long", lineno, key);
      memcpy(e->key[e->n_fields], key, sizeof key);
      e->n_fields++;
    }
    i = j;
  }
  if (!have_step || !have_mb || !have_kind)
    return rc_fail(err, RC_EXIT_DATAERR, "line %d: an event needs step=, mb= and kind=", lineno);
  return RC_OK;
}

/* Room for one more event; false (the list freed) when out of memory. */
static bool grow(rc_event_list *out) {
  if (out->n < out->cap) return true;
  int cap = out->cap ? 2 * out->cap : 256;
  rc_event *p = realloc(out->ev, sizeof *p * (size_t)cap);
  if (!p) {
    rc_events_free(out);
    return false;
  }
  out->ev = p;
  out->cap = cap;
  return true;
}

int rc_events_parse(const char *text, size_t n, rc_event_list *out, rc_err *err) {
  memset(out, 0, sizeof *out);
  size_t i = 0;
  int lineno = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && text[j] != '\n') j++;
    lineno++;
    size_t len = j - i;
    if (len > 0 && text[i + len - 1] == '\r') len--;
    if (len > 0) {
      if (j == n) {
        /* a writer killed mid-line leaves a partial last event: not data */
        rc_events_free(out);
        return rc_fail(err, RC_EXIT_DATAERR, "line %d: truncated (no newline)", lineno);
      }
      if (!grow(out)) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
      if (parse_line(text + i, len, lineno, &out->ev[out->n], err)) {
        rc_events_free(out);
        return err->code;
      }
      out->n++;
    }
    i = j + 1;
  }
  return RC_OK;
}

int rc_events_read(const char *path, rc_event_list *out, rc_err *err) {
  char *text;
  size_t n;
  memset(out, 0, sizeof *out);
  if (rc_read_regular_file(path, RC_READ_CAP_TRACE, false, &text, &n, err)) return err->code;
  int rc = rc_events_parse(text, n, out, err);
  free(text);
  if (rc) rc_err_prefix(err, "%s", path);
  return rc;
}

void rc_events_free(rc_event_list *l) {
  free(l->ev);
  memset(l, 0, sizeof *l);
}

void rc_event_describe(const rc_event *e, char *buf, size_t cap) {
  int n;
  if (e->mb >= 0)
    n = snprintf(buf, cap, "step %lld, microbatch %d, %s", (long long)e->step, e->mb, e->kind);
  else
    n = snprintf(buf, cap, "step %lld, %s", (long long)e->step, e->kind);
  if (n < 0 || (size_t)n >= cap) return;
  if (e->name[0]) n += snprintf(buf + n, cap - (size_t)n, " %s", e->name);
  if (n < 0 || (size_t)n >= cap) return;
  if (e->call >= 0) snprintf(buf + n, cap - (size_t)n, " call %d", e->call);
}

void rc_event_format(const rc_event *e, char *buf, size_t cap) {
  size_t n = 0;
  int w = 0;
  buf[0] = 0;
  for (int i = 0; i < e->n_fields && n < cap; i++) {
    w = snprintf(buf + n, cap - n, "%s%s=%s", i ? " " : "", e->key[i], e->val[i]);
    if (w < 0) return;
    n += (size_t)w;
  }
}

static bool same_identity(const rc_event *a, const rc_event *b) {
  return a->step == b->step && a->mb == b->mb && !strcmp(a->kind, b->kind) &&
         !strcmp(a->name, b->name) && a->call == b->call;
}

/* Appends "key" to a comma list. */
static void list_add(char *list, size_t cap, const char *key) {
  size_t n = strlen(list);
  snprintf(list + n, cap - n, "%s%s", n ? "," : "", key);
}

/* Differences between two events of the same identity: value fields into
 * vals, context fields into ctx. A field present on one side only is a value
 * difference. */
static void diff_fields(const rc_event *a, const rc_event *b, char *vals, size_t vcap, char *ctx,
                        size_t ccap) {
  vals[0] = ctx[0] = 0;
  for (int i = 0; i < a->n_fields; i++) {
    const char *vb = rc_event_get(b, a->key[i]);
    if (vb && !strcmp(vb, a->val[i])) continue;
    if (vb && rc_event_field_is_context(a->key[i]))
      list_add(ctx, ccap, a->key[i]);
    else
      list_add(vals, vcap, a->key[i]);
  }
  for (int i = 0; i < b->n_fields; i++)
    if (!rc_event_get(a, b->key[i])) list_add(vals, vcap, b->key[i]);
}

static int add_harmless(rc_alignment *al, int i, const char *ctx, rc_err *err) {
  if (al->n_harmless == al->cap_harmless) {
    int cap = al->cap_harmless ? 2 * al->cap_harmless : 32;
    rc_harmless *p = realloc(al->harmless, sizeof *p * (size_t)cap);
    if (!p) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    al->harmless = p;
    al->cap_harmless = cap;
  }
  rc_harmless *h = &al->harmless[al->n_harmless++];
  h->a = h->b = i;
  snprintf(h->fields, sizeof h->fields, "%s", ctx);
  return RC_OK;
}

int rc_events_align(const rc_event_list *a, const rc_event_list *b, rc_alignment *out,
                    rc_err *err) {
  memset(out, 0, sizeof *out);
  out->kind = RC_ALIGN_IDENTICAL;
  out->index = -1;
  int n = a->n < b->n ? a->n : b->n;
  for (int i = 0; i < n; i++) {
    const rc_event *ea = &a->ev[i], *eb = &b->ev[i];
    out->n_compared = i + 1;
    if (!same_identity(ea, eb)) {
      if (out->index < 0) {
        out->kind = RC_ALIGN_STRUCTURE;
        out->index = i;
      }
      /* past a structural difference positions no longer correspond */
      return RC_OK;
    }
    char vals[512], ctx[256];
    diff_fields(ea, eb, vals, sizeof vals, ctx, sizeof ctx);
    if (vals[0] && out->index < 0) {
      out->kind = RC_ALIGN_VALUES;
      out->index = i;
      snprintf(out->fields, sizeof out->fields, "%s", vals);
      snprintf(out->context_fields, sizeof out->context_fields, "%s", ctx);
    } else if (!vals[0] && ctx[0]) {
      if (add_harmless(out, i, ctx, err)) {
        rc_alignment_free(out);
        return err->code;
      }
    }
  }
  if (a->n != b->n && out->index < 0) {
    out->kind = RC_ALIGN_STRUCTURE;
    out->index = n;
  }
  return RC_OK;
}

void rc_alignment_free(rc_alignment *al) {
  free(al->harmless);
  al->harmless = NULL;
  al->n_harmless = al->cap_harmless = 0;
}

void rc_event_diff_values(const rc_event *a, const rc_event *b, char *vals, size_t cap) {
  char ctx[256];
  diff_fields(a, b, vals, cap, ctx, sizeof ctx);
}

const rc_event *rc_events_find(const rc_event_list *l, int64_t step, const char *kind) {
  for (int i = 0; i < l->n; i++)
    if (l->ev[i].step == step && !strcmp(l->ev[i].kind, kind)) return &l->ev[i];
  return NULL;
}

int rc_events_filter(const rc_event_list *l, int64_t step_lo, int64_t step_hi,
                     const char *drop_kind, rc_event_list *out, rc_err *err) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < l->n; i++) {
    const rc_event *e = &l->ev[i];
    if (e->step < step_lo || e->step > step_hi || (drop_kind && !strcmp(e->kind, drop_kind)))
      continue;
    if (!grow(out)) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    out->ev[out->n++] = *e;
  }
  return RC_OK;
}

/* Is there an event of `kind` before index i in i's step? */
static bool earlier_in_step(const rc_event_list *l, int i, const char *kind) {
  for (int j = i - 1; j >= 0 && l->ev[j].step == l->ev[i].step; j--)
    if (!strcmp(l->ev[j].kind, kind)) return true;
  return false;
}

static bool has_field(const char *list, const char *key) {
  size_t n = strlen(key);
  for (const char *p = list; p && *p;) {
    const char *c = strchr(p, ',');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    if (len == n && !strncmp(p, key, n)) return true;
    p = c ? c + 1 : NULL;
  }
  return false;
}

const char *rc_event_input_reading(const rc_event_list *l, int i, const char *fields) {
  const rc_event *e = &l->ev[i];
  if (!strcmp(e->kind, "step_state")) return "the state the step starts from";
  if (!strcmp(e->kind, "batch")) {
    /* at the same position other samples: what maps positions to samples
     * (a sampler's epoch, its order) differs, not the position */
    if (!has_field(fields, "samples") && rc_event_get(e, "samples"))
      return "same data position, different samples: the sampler's state";
    return "the data position (which samples the step reads)";
  }
  if (!strcmp(e->kind, "dropout") && !earlier_in_step(l, i, "dropout") &&
      (has_field(fields, "seed") || has_field(fields, "offset")))
    return "the dropout RNG state the step starts from";
  if (!strcmp(e->kind, "loss_scaler") &&
      (has_field(fields, "scale") || has_field(fields, "growth_tracker") ||
       has_field(fields, "hysteresis_tracker")))
    return "the loss scaler's state going into the step";
  if (!strcmp(e->kind, "optimizer")) {
    /* the counters are inputs; lr, the bias corrections and the clip
     * coefficient are computed from them (and from settings): when the log
     * carries both counters and they agree, a value that differs was
     * computed differently, not handed over */
    if (has_field(fields, "optimizer_step") || has_field(fields, "scheduler_steps"))
      return "the scheduler's and optimizer's step counts the step starts from";
    bool counted = rc_event_get(e, "optimizer_step") && rc_event_get(e, "scheduler_steps");
    if (!counted &&
        (has_field(fields, "lr") || has_field(fields, "bc1") || has_field(fields, "bc2")))
      return "the scheduler's and optimizer's step counts the step starts from";
    return NULL;
  }
  if (!strcmp(e->kind, "forward") && !earlier_in_step(l, i, "forward") &&
      !earlier_in_step(l, i, "backward"))
    return "the weights the step's first forward reads (its input batch agrees)";
  return NULL;
}

bool rc_event_is_update(const rc_event *e) {
  /* "update": a Python trainer's optimizer step, per parameter (docs/events.md) */
  return !strcmp(e->kind, "optimizer") || !strcmp(e->kind, "loss_scaler") ||
         !strcmp(e->kind, "adam") || !strcmp(e->kind, "update") ||
         !strcmp(e->kind, "expert_bias") || !strcmp(e->kind, "scaler_update");
}
