/* bisect_report.c — what `resumecheck bisect` tells people (text) and
 * scripts (JSON, schema RC_BISECT_REPORT_SCHEMA in harness/schema.h, docs/bisect.md).
 * Both only read a finished rc_bisect. */
#include <inttypes.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "harness/bisect.h"
#include "harness/schema.h"

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

static const char *cause_name(rc_bisect_cause c) {
  switch (c) {
  case RC_CAUSE_NONE:
    return NULL;
  case RC_CAUSE_OPERATION:
    return "operation";
  case RC_CAUSE_LOADED_STATE:
    return "loaded-state";
  case RC_CAUSE_PREVIOUS_UPDATE:
    return "previous-update";
  case RC_CAUSE_RESUME_STATE:
    return "resume-state";
  case RC_CAUSE_SAVE_SIDE_EFFECT:
    return "save-side-effect";
  case RC_CAUSE_REPLAY_CHECKPOINT:
    return "replay-checkpoint";
  }
  return NULL;
}

static void print_saves(FILE *out, const rc_replay_proc *rp) {
  if (!rp->n_saves) {
    fprintf(out, "no saves");
    return;
  }
  fprintf(out, "saves at ");
  for (int i = 0; i < rp->n_saves; i++) fprintf(out, "%s%d", i ? "," : "", rp->saves[i]);
}

void rc_bisect_print(const rc_bisect *b, FILE *out) {
  fprintf(out, "resumecheck bisect %s\n", b->opts.run_dir);
  if (b->run_verdict[0]) fprintf(out, "  run: %s (exit %d)\n", b->run_verdict_text, b->run_exit);
  if (b->paths_note[0]) fprintf(out, "  paths: %s\n", b->paths_note);
  if (b->check[0]) {
    fprintf(out, "  first divergence: %s", b->check);
    if (b->step >= 0)
      fprintf(out, " at step %" PRId64, b->step);
    else
      fprintf(out, b->census_compared && !strncmp(b->check, "CENSUS", 6)
                       ? " (no divergent step: every step and the final state agree, the state at "
                         "the resume point differs)"
                       : " (no divergent step: the traces agree, the checkpoints differ)");
    if (b->trace_columns[0]) fprintf(out, " (%s)", b->trace_columns);
    fprintf(out, "; %s vs %s, resumed at step %" PRId64 " from %s\n", b->through_leg, b->resume_leg,
            b->resume_step, b->resume_from);
    if (b->step < 0 && b->check_a[0])
      fprintf(out, "  checkpoints that differ: %s vs %s, first %s\n", b->check_a, b->check_b,
              b->run_dataset[0] ? b->run_dataset : "(not named in the report)");
  }
  if (b->loaded_text[0]) fprintf(out, "  loaded state: %s\n", b->loaded_text);
  if (b->census_found)
    fprintf(out, "  state census at step %" PRId64 " (%s vs %s): %s\n", b->resume_step,
            b->census_through, b->census_resumed, b->census_text);
  if (b->replayed) {
    fprintf(out, "  replay: steps %" PRId64 "..%" PRId64 " with events, in %s\n", b->events_from,
            b->events_to, b->out_dir);
    const rc_replay_proc *rp[3] = {&b->rp_through, &b->rp_resume, &b->rp_probe};
    const rc_event_list *lg[3] = {&b->log_through, &b->log_resume, &b->log_probe};
    const char *nm[3] = {"through", "resume", "through without its saves <= K"};
    for (int i = 0; i < 3; i++) {
      if (!rp[i]->ran) continue;
      fprintf(out, "    %s: %d events (%s), ", nm[i], lg[i]->n, rp[i]->events);
      print_saves(out, rp[i]);
      fprintf(out, "%s\n",
              i == 2 ? " (the leg's saves at or before K dropped)"
                     : " (the leg's own, up to the stop)");
    }
    if (b->replay_ckpt_compared)
      fprintf(out, "    checkpoints at step %" PRId64 ": %s vs %s: %s%s\n", b->events_to,
              b->replay_ckpt_through, b->replay_ckpt_resume,
              b->replay_ckpt_identical ? "identical" : "differ, first ",
              b->replay_ckpt_identical ? "" : b->replay_ckpt_first);
    if (b->traces_checked)
      fprintf(out, "    traces: %s\n",
              b->traces_match ? "each replay's trace is its leg's in the run, step for step"
                              : b->trace_mismatch);
  }
  if (b->verdict == RC_BISECT_LOCATED && b->replayed && b->align.index >= 0) {
    fprintf(out, "\nfirst differing event (#%d of step %" PRId64 "):\n", b->align.index + 1,
            b->focus);
    print_context(b, out);
  }
  if (b->replayed && b->have_state && b->state_fields[0])
    fprintf(out, "\nstate going into step %" PRId64 " (step_state): %s differ%s\n", b->focus,
            b->state_fields, strchr(b->state_fields, ',') ? "" : "s");
  if (b->cause == RC_CAUSE_PREVIOUS_UPDATE && b->prev_update >= 0) {
    char d[512], ft[1024], fr[1024];
    rc_event_describe(&b->prev_through.ev[b->prev_update], d, sizeof d);
    rc_event_format(&b->prev_through.ev[b->prev_update], ft, sizeof ft);
    rc_event_format(&b->prev_resume.ev[b->prev_update], fr, sizeof fr);
    fprintf(out,
            "\nfirst differing update of step %" PRId64
            ":\n  >> %s\n    through  %s\n    resume   %s\n",
            b->focus - 1, d, ft, fr);
  }
  if (b->replayed) print_harmless(b, out);
  fprintf(out, "\n%s: %s\n", rc_bisect_verdict_name(b->verdict), b->verdict_text);
  if (b->note[0]) fprintf(out, "  %s\n", b->note);
  if (b->replayed) {
    fprintf(out, "reproduce with:\n  %s\n  %s\n", b->rp_through.cmd, b->rp_resume.cmd);
    if (b->rp_probe.ran) fprintf(out, "  %s\n", b->rp_probe.cmd);
  }
  fprintf(out, "exit %d\n", b->exit_code);
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
  rc_jw_kv_str_or_null(w, "name", e->name);
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

static void jw_proc_fields(rc_jw *w, const rc_replay_proc *rp, const rc_event_list *log) {
  rc_jw_key(w, "events");
  rc_jw_str(w, rp->events);
  rc_jw_key(w, "n_events");
  rc_jw_int(w, log->n);
  rc_jw_key(w, "log");
  rc_jw_str(w, rp->log);
  rc_jw_key(w, "command");
  rc_jw_str(w, rp->cmd);
  rc_jw_key(w, "saves");
  rc_jw_arr_begin(w);
  for (int i = 0; i < rp->n_saves; i++) rc_jw_int(w, rp->saves[i]);
  rc_jw_arr_end(w);
}

static void jw_proc(rc_jw *w, const char *key, const rc_replay_proc *rp, const rc_event_list *log) {
  rc_jw_key(w, key);
  rc_jw_obj_begin(w);
  jw_proc_fields(w, rp, log);
  rc_jw_obj_end(w);
}

/* through@K against the checkpoint the resumed leg loaded. */
static void json_loaded_state(rc_jw *w, const rc_bisect *b) {
  rc_jw_key(w, "loaded_state");
  if (b->ckpt_compared) {
    rc_jw_obj_begin(w);
    rc_jw_key(w, "through");
    rc_jw_str(w, b->through_ckpt);
    rc_jw_key(w, "loaded");
    rc_jw_str(w, b->resume_from);
    rc_jw_kv_str_or_null(w, "loaded_written_by", b->ckpt_producer);
    rc_jw_key(w, "n_datasets");
    rc_jw_int(w, b->ckpt_datasets);
    rc_jw_key(w, "identical");
    rc_jw_bool(w, b->ckpt_identical);
    rc_jw_kv_str_or_null(w, "first_difference", b->ckpt_first);
    rc_jw_kv_str_or_null(w, "text", b->loaded_text);
    rc_jw_obj_end(w);
  } else {
    rc_jw_null(w);
  }
}

/* The legs' state census at K, field by field. */
static void json_census(rc_jw *w, const rc_bisect *b) {
  rc_jw_key(w, "census");
  if (b->census_found) {
    rc_jw_obj_begin(w);
    rc_jw_key(w, "through");
    rc_jw_str(w, b->census_through);
    rc_jw_key(w, "resumed");
    rc_jw_str(w, b->census_resumed);
    rc_jw_key(w, "compared");
    rc_jw_bool(w, b->census_compared);
    rc_jw_kv_str_or_null(w, "text", b->census_text);
    rc_jw_key(w, "saved_differ");
    rc_jw_int(w, b->census.n_saved_differ);
    rc_jw_key(w, "derived_differ");
    rc_jw_int(w, b->census.n_derived_differ);
    rc_jw_key(w, "copy_differ");
    rc_jw_int(w, b->census.n_copy_differ);
    rc_jw_key(w, "local_differ");
    rc_jw_int(w, b->census.n_local_differ);
    rc_census_json_differences(w, "differences", &b->census);
    rc_jw_obj_end(w);
  } else {
    rc_jw_null(w);
  }
}

/* The replays: their processes, the probe, traces and checkpoints. */
static void json_replay(rc_jw *w, const rc_bisect *b) {
  rc_jw_key(w, "replay");
  if (b->replayed) {
    rc_jw_obj_begin(w);
    rc_jw_key(w, "dir");
    rc_jw_str(w, b->out_dir);
    rc_jw_key(w, "events_from_step");
    rc_jw_int(w, b->events_from);
    rc_jw_key(w, "stop_at");
    rc_jw_int(w, b->events_to);
    jw_proc(w, "through", &b->rp_through, &b->log_through);
    jw_proc(w, "resume", &b->rp_resume, &b->log_resume);
    rc_jw_key(w, "probe");
    if (b->rp_probe.ran) {
      rc_jw_obj_begin(w);
      jw_proc_fields(w, &b->rp_probe, &b->log_probe);
      rc_jw_key(w, "agrees_with_resume");
      rc_jw_bool(w, b->probe_agrees);
      rc_jw_kv_str_or_null(w, "differs", b->probe_fields);
      rc_jw_obj_end(w);
    } else {
      rc_jw_null(w);
    }
    rc_jw_key(w, "traces_match");
    if (b->traces_checked)
      rc_jw_bool(w, b->traces_match);
    else
      rc_jw_null(w);
    rc_jw_kv_str_or_null(w, "trace_mismatch", b->trace_mismatch);
    rc_jw_key(w, "events_compared");
    rc_jw_int(w, b->n_compared_all);
    rc_jw_key(w, "checkpoints");
    if (b->replay_ckpt_compared) {
      rc_jw_obj_begin(w);
      rc_jw_key(w, "through");
      rc_jw_str(w, b->replay_ckpt_through);
      rc_jw_key(w, "resume");
      rc_jw_str(w, b->replay_ckpt_resume);
      rc_jw_key(w, "identical");
      rc_jw_bool(w, b->replay_ckpt_identical);
      rc_jw_kv_str_or_null(w, "first_difference", b->replay_ckpt_first);
      rc_jw_obj_end(w);
    } else {
      rc_jw_null(w);
    }
    rc_jw_obj_end(w);
  } else {
    rc_jw_null(w);
  }
}

/* The focus step, its starting state, and step S-1's updates. */
static void json_focus(rc_jw *w, const rc_bisect *b) {
  rc_jw_key(w, "focus_step");
  if (b->focus >= 0)
    rc_jw_int(w, b->focus);
  else
    rc_jw_null(w);
  rc_jw_key(w, "step_state");
  if (b->have_state) {
    rc_jw_obj_begin(w);
    rc_jw_key(w, "step");
    rc_jw_int(w, b->focus);
    jw_csv_array(w, "differing_fields", b->state_fields);
    rc_jw_obj_end(w);
  } else {
    rc_jw_null(w);
  }
  rc_jw_key(w, "previous_step");
  if (b->have_prev) {
    rc_jw_obj_begin(w);
    rc_jw_key(w, "step");
    rc_jw_int(w, b->focus - 1);
    jw_csv_array(w, "state_differing_fields", b->prev_state_fields);
    rc_jw_key(w, "first_update");
    if (b->prev_update >= 0) {
      rc_jw_obj_begin(w);
      jw_csv_array(w, "differing_fields", b->prev_fields);
      rc_jw_key(w, "through");
      jw_event(w, &b->prev_through.ev[b->prev_update]);
      rc_jw_key(w, "resume");
      jw_event(w, &b->prev_resume.ev[b->prev_update]);
      rc_jw_obj_end(w);
    } else {
      rc_jw_null(w);
    }
    rc_jw_obj_end(w);
  } else {
    rc_jw_null(w);
  }
}

/* The first differing event with its context, and the harmless ones. */
static void json_events(rc_jw *w, const rc_bisect *b) {
  const rc_alignment *al = &b->align;
  rc_jw_key(w, "first_event");
  if (b->replayed && al->index >= 0) {
    rc_jw_obj_begin(w);
    rc_jw_key(w, "kind");
    rc_jw_str(w, al->kind == RC_ALIGN_STRUCTURE ? "structure" : "values");
    rc_jw_key(w, "index");
    rc_jw_int(w, al->index);
    jw_csv_array(w, "differing_fields", al->fields);
    jw_csv_array(w, "differing_context", al->context_fields);
    rc_jw_key(w, "through");
    if (al->index < b->ev_through.n)
      jw_event(w, &b->ev_through.ev[al->index]);
    else
      rc_jw_null(w);
    rc_jw_key(w, "resume");
    if (al->index < b->ev_resume.n)
      jw_event(w, &b->ev_resume.ev[al->index]);
    else
      rc_jw_null(w);
    rc_jw_key(w, "before");
    rc_jw_arr_begin(w);
    int lo = al->index - b->opts.context;
    for (int i = lo < 0 ? 0 : lo; i < al->index; i++) jw_pair(w, b, i);
    rc_jw_arr_end(w);
    rc_jw_obj_end(w);
  } else {
    rc_jw_null(w);
  }

  rc_jw_key(w, "harmless");
  rc_jw_arr_begin(w);
  for (int i = 0; b->replayed && i < al->n_harmless; i++) {
    rc_jw_obj_begin(w);
    jw_csv_array(w, "differing_context", al->harmless[i].fields);
    rc_jw_key(w, "through");
    jw_event(w, &b->ev_through.ev[al->harmless[i].a]);
    rc_jw_key(w, "resume");
    jw_event(w, &b->ev_resume.ev[al->harmless[i].b]);
    rc_jw_obj_end(w);
  }
  rc_jw_arr_end(w);
}

/* What bisect blames, and at which step. */
static void json_cause(rc_jw *w, const rc_bisect *b) {
  const rc_alignment *al = &b->align;
  rc_jw_key(w, "cause");
  if (cause_name(b->cause)) {
    rc_jw_obj_begin(w);
    rc_jw_key(w, "kind");
    rc_jw_str(w, cause_name(b->cause));
    rc_jw_key(w, "step");
    if (b->cause == RC_CAUSE_PREVIOUS_UPDATE)
      rc_jw_int(w, b->focus - 1);
    else if (b->cause == RC_CAUSE_LOADED_STATE)
      rc_jw_int(w, b->resume_step);
    else if (b->focus >= 0)
      rc_jw_int(w, b->focus);
    else
      rc_jw_int(w, b->events_to);
    rc_jw_key(w, "event");
    if (b->cause == RC_CAUSE_PREVIOUS_UPDATE && b->prev_update >= 0)
      jw_event(w, &b->prev_through.ev[b->prev_update]);
    else if (b->cause == RC_CAUSE_OPERATION && al->index < b->ev_through.n)
      jw_event(w, &b->ev_through.ev[al->index]);
    else
      rc_jw_null(w);
    rc_jw_obj_end(w);
  } else {
    rc_jw_null(w);
  }
}

int rc_bisect_write_json(const rc_bisect *b, const char *path, rc_err *err) {
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "schema");
  rc_jw_str(&w, RC_BISECT_REPORT_SCHEMA);
  rc_jw_key(&w, "schema_version");
  rc_jw_int(&w, RC_BISECT_REPORT_SCHEMA_VERSION);
  rc_jw_key(&w, "run_dir");
  rc_jw_str(&w, b->opts.run_dir);
  rc_jw_kv_str_or_null(&w, "run_verdict", b->run_verdict);
  rc_jw_kv_str_or_null(&w, "check", b->check);
  rc_jw_key(&w, "step");
  if (b->step >= 0)
    rc_jw_int(&w, b->step);
  else
    rc_jw_null(&w);
  jw_csv_array(&w, "trace_columns", b->trace_columns);
  rc_jw_kv_str_or_null(&w, "through_leg", b->through_leg);
  rc_jw_kv_str_or_null(&w, "resume_leg", b->resume_leg);
  rc_jw_key(&w, "resume_step");
  if (b->resume_step >= 0)
    rc_jw_int(&w, b->resume_step);
  else
    rc_jw_null(&w);
  rc_jw_kv_str_or_null(&w, "resume_from", b->resume_from);
  /* where the run wrote its files and whether they were read elsewhere */
  rc_jw_key(&w, "paths");
  rc_jw_obj_begin(&w);
  rc_jw_kv_str_or_null(&w, "run_out", b->run_out);
  rc_jw_key(&w, "relocated");
  rc_jw_bool(&w, b->relocated);
  rc_jw_kv_str_or_null(&w, "note", b->paths_note);
  rc_jw_obj_end(&w);
  rc_jw_key(&w, "trainer");
  if (b->check[0])
    rc_jw_str(&w, b->exec ? "exec" : "resumecheck");
  else
    rc_jw_null(&w);

  json_loaded_state(&w, b);
  json_census(&w, b);
  json_replay(&w, b);
  json_focus(&w, b);
  json_events(&w, b);
  json_cause(&w, b);
  rc_jw_key(&w, "verdict");
  rc_jw_str(&w, rc_bisect_verdict_name(b->verdict));
  rc_jw_key(&w, "verdict_text");
  rc_jw_str(&w, b->verdict_text);
  rc_jw_kv_str_or_null(&w, "note", b->note);
  rc_jw_key(&w, "git_bisect");
  rc_jw_bool(&w, b->opts.git_bisect);
  rc_jw_key(&w, "exit_code");
  rc_jw_int(&w, b->exit_code);
  rc_jw_obj_end(&w);

  int rc = rc_write_output(path, w.buf ? w.buf : "", w.len, err);
  rc_jw_free(&w);
  return rc;
}
