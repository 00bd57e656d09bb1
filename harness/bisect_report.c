/* bisect_report.c — what `resumecheck bisect` tells people (text) and
 * scripts (JSON, schema resumecheck.bisect-report v1, docs/bisect.md).
 * Both only read a finished rc_bisect. */
#include <inttypes.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "harness/bisect.h"

#define HARMLESS_SHOWN 24 /* harmless differences listed in the text report */

static void print_side(FILE *out, const char *side, const rc_event *e, const char *mark) {
  char f[1024];
  rc_event_format(e, f, sizeof f);
  fprintf(out, "    %-8s %s%s\n", side, f, mark);
}

/* The differing event and the few before it, both sides. */
static void print_context(const rc_bisect *b, FILE *out) {
  const rc_alignment *al = &b->align;
  int lo = al->index - b->opts.context;
  if (lo < 0) lo = 0;
  for (int i = lo; i <= al->index; i++) {
    bool have_t = i < b->ev_through.n, have_r = i < b->ev_resume.n;
    char d[512];
    rc_event_describe(have_t ? &b->ev_through.ev[i] : &b->ev_resume.ev[i], d, sizeof d);
    fprintf(out, "  %s #%d %s\n", i == al->index ? ">>" : "  ", i + 1, d);
    if (have_t)
      print_side(out, "through", &b->ev_through.ev[i], "");
    else
      fprintf(out, "    through  (log ends)\n");
    if (have_r)
      print_side(out, "resume", &b->ev_resume.ev[i], "");
    else
      fprintf(out, "    resume   (log ends)\n");
  }
}

static void print_harmless(const rc_bisect *b, FILE *out) {
  const rc_alignment *al = &b->align;
  if (!al->n_harmless) return;
  fprintf(out,
          "\nharmless here: %d event%s whose flag value or beta differ but whose values agree\n",
          al->n_harmless, al->n_harmless == 1 ? "" : "s");
  for (int i = 0; i < al->n_harmless && i < HARMLESS_SHOWN; i++) {
    const rc_harmless *h = &al->harmless[i];
    const rc_event *et = &b->ev_through.ev[h->a], *er = &b->ev_resume.ev[h->b];
    char d[512];
    rc_event_describe(et, d, sizeof d);
    const char *pt = rc_event_get(et, "passed"), *pr = rc_event_get(er, "passed");
    const char *bt = rc_event_get(et, "beta"), *br = rc_event_get(er, "beta");
    if (bt && br && strcmp(bt, "-1"))
      fprintf(out, "  %s: through %s (beta=%s), resume %s (beta=%s)\n", d, pt ? pt : "?", bt,
              pr ? pr : "?", br);
    else
      fprintf(out, "  %s: through %s, resume %s\n", d, pt ? pt : "?", pr ? pr : "?");
  }
  if (al->n_harmless > HARMLESS_SHOWN)
    fprintf(out, "  ... and %d more (--json lists them all)\n", al->n_harmless - HARMLESS_SHOWN);
}

void rc_bisect_print(const rc_bisect *b, FILE *out) {
  fprintf(out, "resumecheck bisect %s\n", b->opts.run_dir);
  if (b->run_verdict[0]) fprintf(out, "  run: %s (exit %d)\n", b->run_verdict_text, b->run_exit);
  if (b->check[0]) {
    fprintf(out, "  first divergence: %s", b->check);
    if (b->step >= 0) fprintf(out, " at step %" PRId64, b->step);
    if (b->trace_columns[0]) fprintf(out, " (%s)", b->trace_columns);
    fprintf(out, "; %s vs %s, resumed at step %" PRId64 " from %s\n", b->through_leg, b->resume_leg,
            b->resume_step, b->resume_from);
  }
  if (b->ckpt_compared)
    fprintf(out, "  loaded state: %s vs through@%" PRId64 ": %s\n", b->resume_from, b->resume_step,
            b->ckpt_identical ? "identical" : b->ckpt_first);
  if (b->replayed) {
    fprintf(out, "  replay: steps %" PRId64 "..%" PRId64 " with events, in %s\n", b->events_from,
            b->events_to, b->out_dir);
    fprintf(out, "    through: %d events (%s)\n    resume:  %d events (%s)\n", b->ev_through.n,
            b->through_events, b->ev_resume.n, b->resume_events);
  }
  if (b->verdict == RC_BISECT_LOCATED && b->replayed && b->align.index >= 0) {
    fprintf(out, "\nfirst differing event (#%d):\n", b->align.index + 1);
    print_context(b, out);
  }
  if (b->replayed) print_harmless(b, out);
  fprintf(out, "\n%s: %s\n", rc_bisect_verdict_name(b->verdict), b->verdict_text);
  if (b->note[0]) fprintf(out, "  %s\n", b->note);
  if (b->replayed) fprintf(out, "reproduce with:\n  %s\n  %s\n", b->through_cmd, b->resume_cmd);
  fprintf(out, "exit %d\n", b->exit_code);
}

static void jw_str_or_null(rc_jw *w, const char *key, const char *s) {
  rc_jw_key(w, key);
  if (s && s[0])
    rc_jw_str(w, s);
  else
    rc_jw_null(w);
}

static void jw_event(rc_jw *w, const rc_event *e) {
  rc_jw_obj_begin(w);
  rc_jw_key(w, "line");
  rc_jw_int(w, e->line);
  rc_jw_key(w, "step");
  rc_jw_int(w, e->step);
  rc_jw_key(w, "mb");
  rc_jw_int(w, e->mb);
  rc_jw_key(w, "kind");
  rc_jw_str(w, e->kind);
  jw_str_or_null(w, "name", e->name);
  rc_jw_key(w, "call");
  if (e->call >= 0)
    rc_jw_int(w, e->call);
  else
    rc_jw_null(w);
  rc_jw_key(w, "fields");
  rc_jw_obj_begin(w);
  for (int i = 0; i < e->n_fields; i++) {
    rc_jw_key(w, e->key[i]);
    rc_jw_str(w, e->val[i]);
  }
  rc_jw_obj_end(w);
  rc_jw_obj_end(w);
}

static void jw_csv_array(rc_jw *w, const char *key, const char *csv) {
  rc_jw_key(w, key);
  rc_jw_arr_begin(w);
  const char *p = csv;
  while (p && *p) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    char tok[128];
    snprintf(tok, sizeof tok, "%.*s", (int)n, p);
    rc_jw_str(w, tok);
    p = c ? c + 1 : NULL;
  }
  rc_jw_arr_end(w);
}

static void jw_pair(rc_jw *w, const rc_bisect *b, int i) {
  rc_jw_obj_begin(w);
  rc_jw_key(w, "index");
  rc_jw_int(w, i);
  rc_jw_key(w, "through");
  if (i < b->ev_through.n)
    jw_event(w, &b->ev_through.ev[i]);
  else
    rc_jw_null(w);
  rc_jw_key(w, "resume");
  if (i < b->ev_resume.n)
    jw_event(w, &b->ev_resume.ev[i]);
  else
    rc_jw_null(w);
  rc_jw_obj_end(w);
}

int rc_bisect_write_json(const rc_bisect *b, const char *path, rc_err *err) {
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "schema");
  rc_jw_str(&w, "resumecheck.bisect-report");
  rc_jw_key(&w, "schema_version");
  rc_jw_int(&w, 1);
  rc_jw_key(&w, "run_dir");
  rc_jw_str(&w, b->opts.run_dir);
  jw_str_or_null(&w, "run_verdict", b->run_verdict);
  jw_str_or_null(&w, "check", b->check);
  rc_jw_key(&w, "step");
  if (b->step >= 0)
    rc_jw_int(&w, b->step);
  else
    rc_jw_null(&w);
  jw_csv_array(&w, "trace_columns", b->trace_columns);
  jw_str_or_null(&w, "through_leg", b->through_leg);
  jw_str_or_null(&w, "resume_leg", b->resume_leg);
  rc_jw_key(&w, "resume_step");
  if (b->resume_step >= 0)
    rc_jw_int(&w, b->resume_step);
  else
    rc_jw_null(&w);
  jw_str_or_null(&w, "resume_from", b->resume_from);

  rc_jw_key(&w, "loaded_state");
  if (b->ckpt_compared) {
    rc_jw_obj_begin(&w);
    rc_jw_key(&w, "through");
    rc_jw_str(&w, b->through_ckpt);
    rc_jw_key(&w, "loaded");
    rc_jw_str(&w, b->resume_from);
    rc_jw_key(&w, "identical");
    rc_jw_bool(&w, b->ckpt_identical);
    jw_str_or_null(&w, "first_difference", b->ckpt_first);
    rc_jw_obj_end(&w);
  } else {
    rc_jw_null(&w);
  }

  rc_jw_key(&w, "replay");
  if (b->replayed) {
    rc_jw_obj_begin(&w);
    rc_jw_key(&w, "dir");
    rc_jw_str(&w, b->out_dir);
    rc_jw_key(&w, "events_from_step");
    rc_jw_int(&w, b->events_from);
    rc_jw_key(&w, "stop_at");
    rc_jw_int(&w, b->events_to);
    rc_jw_key(&w, "through");
    rc_jw_obj_begin(&w);
    rc_jw_key(&w, "events");
    rc_jw_str(&w, b->through_events);
    rc_jw_key(&w, "n_events");
    rc_jw_int(&w, b->ev_through.n);
    rc_jw_key(&w, "log");
    rc_jw_str(&w, b->through_log);
    rc_jw_key(&w, "command");
    rc_jw_str(&w, b->through_cmd);
    rc_jw_obj_end(&w);
    rc_jw_key(&w, "resume");
    rc_jw_obj_begin(&w);
    rc_jw_key(&w, "events");
    rc_jw_str(&w, b->resume_events);
    rc_jw_key(&w, "n_events");
    rc_jw_int(&w, b->ev_resume.n);
    rc_jw_key(&w, "log");
    rc_jw_str(&w, b->resume_log);
    rc_jw_key(&w, "command");
    rc_jw_str(&w, b->resume_cmd);
    rc_jw_obj_end(&w);
    rc_jw_key(&w, "events_compared");
    rc_jw_int(&w, b->align.n_compared);
    rc_jw_obj_end(&w);
  } else {
    rc_jw_null(&w);
  }

  const rc_alignment *al = &b->align;
  rc_jw_key(&w, "first_event");
  if (b->replayed && al->index >= 0) {
    rc_jw_obj_begin(&w);
    rc_jw_key(&w, "kind");
    rc_jw_str(&w, al->kind == RC_ALIGN_STRUCTURE ? "structure" : "values");
    rc_jw_key(&w, "index");
    rc_jw_int(&w, al->index);
    jw_csv_array(&w, "differing_fields", al->fields);
    jw_csv_array(&w, "differing_context", al->context_fields);
    rc_jw_key(&w, "through");
    if (al->index < b->ev_through.n)
      jw_event(&w, &b->ev_through.ev[al->index]);
    else
      rc_jw_null(&w);
    rc_jw_key(&w, "resume");
    if (al->index < b->ev_resume.n)
      jw_event(&w, &b->ev_resume.ev[al->index]);
    else
      rc_jw_null(&w);
    rc_jw_key(&w, "before");
    rc_jw_arr_begin(&w);
    int lo = al->index - b->opts.context;
    for (int i = lo < 0 ? 0 : lo; i < al->index; i++) jw_pair(&w, b, i);
    rc_jw_arr_end(&w);
    rc_jw_obj_end(&w);
  } else {
    rc_jw_null(&w);
  }

  rc_jw_key(&w, "harmless");
  rc_jw_arr_begin(&w);
  for (int i = 0; b->replayed && i < al->n_harmless; i++) {
    rc_jw_obj_begin(&w);
    jw_csv_array(&w, "differing_context", al->harmless[i].fields);
    rc_jw_key(&w, "through");
    jw_event(&w, &b->ev_through.ev[al->harmless[i].a]);
    rc_jw_key(&w, "resume");
    jw_event(&w, &b->ev_resume.ev[al->harmless[i].b]);
    rc_jw_obj_end(&w);
  }
  rc_jw_arr_end(&w);

  rc_jw_key(&w, "verdict");
  rc_jw_str(&w, rc_bisect_verdict_name(b->verdict));
  rc_jw_key(&w, "verdict_text");
  rc_jw_str(&w, b->verdict_text);
  jw_str_or_null(&w, "note", b->note);
  rc_jw_key(&w, "git_bisect");
  rc_jw_bool(&w, b->opts.git_bisect);
  rc_jw_key(&w, "exit_code");
  rc_jw_int(&w, b->exit_code);
  rc_jw_obj_end(&w);

  int rc = rc_write_output(path, w.buf ? w.buf : "", w.len, err);
  rc_jw_free(&w);
  return rc;
}
