/* report_json.c — report.json, the machine-readable record of a run.
 * Its schema is versioned and documented in docs/report-schema.md; any
 * change to names or meanings bumps RC_RUN_REPORT_SCHEMA_VERSION. Keys are
 * always present (null when they do not apply) so that consumers need no
 * guessing. Strings from paths and logs are made valid UTF-8 first. */
#include "report.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "base/kernel_switches.h"
#include "io/layout.h"

#define MAX_DIFFS_PER_CHECK 100

static void str(rc_jw *w, const char *s) {
  if (!s) {
    rc_jw_null(w);
    return;
  }
  size_t cap = strlen(s) * 3 + 1;
  char *clean = malloc(cap);
  if (!clean) {
    rc_jw_null(w);
    return;
  }
  rc_utf8_sanitize(s, clean, cap);
  rc_jw_str(w, clean);
  free(clean);
}

static void kv_str(rc_jw *w, const char *k, const char *v) {
  rc_jw_key(w, k);
  str(w, v);
}

static void kv_str_or_null(rc_jw *w, const char *k, const char *v) {
  rc_jw_key(w, k);
  if (v && *v)
    str(w, v);
  else
    rc_jw_null(w);
}

static void kv_int(rc_jw *w, const char *k, int64_t v) {
  rc_jw_key(w, k);
  rc_jw_int(w, v);
}

static void kv_bool(rc_jw *w, const char *k, bool v) {
  rc_jw_key(w, k);
  rc_jw_bool(w, v);
}

/* A phase of timing.csv in seconds, null where the leg did not measure it. */
static void kv_secs(rc_jw *w, const char *k, double v) {
  rc_jw_key(w, k);
  if (v >= 0)
    rc_jw_double(w, v);
  else
    rc_jw_null(w);
}

/* "a,b,c" as ["a","b","c"] */
static void csv_array(rc_jw *w, const char *list) {
  rc_jw_arr_begin(w);
  const char *p = list;
  while (p && *p) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    char item[256];
    if (n >= sizeof item) n = sizeof item - 1;
    memcpy(item, p, n);
    item[n] = 0;
    str(w, item);
    p = c ? c + 1 : NULL;
  }
  rc_jw_arr_end(w);
}

static void config(rc_jw *w, const rc_run *run) {
  const rc_run_opts *o = &run->opts;
  rc_jw_key(w, "config");
  rc_jw_obj_begin(w);
  kv_int(w, "steps", o->steps);
  rc_jw_key(w, "save_at");
  rc_jw_arr_begin(w);
  for (int i = 0; i < run->n_save_at; i++) rc_jw_int(w, run->save_at[i]);
  rc_jw_arr_end(w);
  kv_bool(w, "save_every", o->save_every);
  kv_bool(w, "save_auto", o->save_auto);
  kv_str_or_null(w, "save_at_why", o->save_auto ? o->save_at_why : NULL);
  kv_bool(w, "aa", o->aa);
  rc_report_calib_config(w, run); /* noise, aa_count, training_steps */
  kv_bool(w, "confirm_arm", o->confirm_arm);
  kv_bool(w, "git_bisect", o->git_bisect);
  kv_bool(w, "keep_going", o->keep_going);
  kv_str(w, "checkpoint_format", RC_CKPT_FORMAT_NAMES[o->ckpt_format]);
  kv_int(w, "jobs", o->jobs);
  rc_jw_key(w, "leg_timeout_s");
  if (o->leg_timeout_s > 0)
    rc_jw_double(w, o->leg_timeout_s);
  else
    rc_jw_null(w);
  kv_str(w, "gpu_scheduling", rc_run_gpu_scheduling_name(run));
  kv_str(w, "through_checkpoints", rc_run_through_checkpoints_name(run));
  kv_bool(w, "handoff", o->handoff && o->trainer == RC_TRAINER_SELF);
  kv_str_or_null(w, "step_lock", run->step_lock[0] ? run->step_lock : NULL);
  kv_str_or_null(w, "start_gate", run->start_gate[0] ? run->start_gate : NULL);
  kv_secs(w, "start_gate_open_s", run->start_gate[0] ? run->start_gate_open_s : -1);
  kv_str(w, "out", o->out_dir);
  kv_str(w, "trainer", o->trainer == RC_TRAINER_EXEC ? "exec" : "resumecheck");
  kv_str_or_null(w, "train_cmd", o->trainer == RC_TRAINER_EXEC ? o->train_cmd : NULL);
  kv_str_or_null(w, "trainer_binary", o->trainer == RC_TRAINER_SELF ? o->self_display : NULL);
  rc_jw_key(w, "forwarded_flags");
  rc_jw_arr_begin(w);
  for (int i = 0; i < o->n_fwd; i++) str(w, o->fwd[i]);
  rc_jw_arr_end(w);
  /* the canonical config from `train --dry-run`, embedded only if it is
   * well-formed JSON */
  rc_jw_key(w, "canonical");
  rc_json *cfg = NULL;
  char eb[128];
  if (run->config_json)
    cfg = rc_json_parse(run->config_json, strlen(run->config_json), eb, sizeof eb);
  if (cfg)
    rc_jw_raw(w, run->config_json);
  else
    rc_jw_null(w);
  rc_json_free(cfg);
  rc_jw_obj_end(w);
}

/* "timing": the leg's start-up phases and saves (docs/trace.md), or null. */
static void timing(rc_jw *w, const rc_leg_timing *t) {
  rc_jw_key(w, "timing");
  if (!t->have) {
    rc_jw_null(w);
    return;
  }
  rc_jw_obj_begin(w);
  kv_secs(w, "exec_s", t->exec_s);
  kv_secs(w, "backend_s", t->backend_s);
  kv_secs(w, "model_init_s", t->model_init_s);
  kv_secs(w, "wait_s", t->wait_s);
  kv_secs(w, "load_s", t->load_s);
  kv_secs(w, "first_step_s", t->first_step_s);
  kv_secs(w, "start_to_first_step_s", t->start_to_first_step_s);
  kv_int(w, "steps", t->n_steps);
  kv_secs(w, "steps_s", t->steps_s);
  kv_int(w, "saves", t->n_saves);
  kv_secs(w, "saves_s", t->saves_s);
  kv_secs(w, "step_lock_wait_s", t->step_lock_wait_s);
  kv_secs(w, "start_gate_s", t->start_gate_s);
  rc_jw_key(w, "loaded_before_durable");
  rc_jw_bool(w, t->handoff_confirm_wait_s >= 0);
  kv_secs(w, "handoff_confirm_wait_s", t->handoff_confirm_wait_s);
  rc_jw_obj_end(w);
}

/* --through-checkpoints on-demand: what the through leg kept at N, and why
 * (run_deferred.c); null for other legs */
static void deferred(rc_jw *w, const rc_leg *l) {
  rc_jw_key(w, "deferred_save");
  if (l->deferred_step <= 0) {
    rc_jw_null(w);
    return;
  }
  rc_jw_obj_begin(w);
  kv_int(w, "step", l->deferred_step);
  kv_str_or_null(w, "kept", l->decision == 'H' ? "hashes" : l->decision == 'F' ? "full" : NULL);
  kv_str_or_null(w, "why", l->decision ? l->decision_why : NULL);
  rc_jw_obj_end(w);
}

static void legs(rc_jw *w, const rc_run *run) {
  rc_jw_key(w, "legs");
  rc_jw_arr_begin(w);
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    bool ran = l->state != RC_LEG_SKIPPED && l->state != RC_LEG_PENDING;
    rc_jw_obj_begin(w);
    kv_str(w, "name", l->name);
    kv_str_or_null(w, "arm", l->arm);
    kv_str(w, "label", l->label);
    kv_str(w, "dir", l->dir);
    kv_str(w, "log", l->log_path);
    kv_int(w, "resume_step", l->resume_step);
    kv_int(w, "last_step", l->last_step);
    kv_str_or_null(w, "resume_from", l->resume_from);
    kv_str_or_null(w, "depends_on", l->depends_on >= 0 ? run->legs[l->depends_on].label : NULL);
    kv_bool(w, "confirming", l->confirming);
    rc_jw_key(w, "saves");
    rc_jw_arr_begin(w);
    for (int k = 0; k < l->n_saves; k++) rc_jw_int(w, l->saves[k]);
    rc_jw_arr_end(w);
    rc_jw_key(w, "argv");
    rc_jw_arr_begin(w);
    for (int k = 0; k < l->argc; k++) str(w, k ? l->argv[k] : rc_leg_argv0(run, l));
    rc_jw_arr_end(w);
    kv_str(w, "status", rc_leg_status_name(l));
    rc_jw_key(w, "exit_code");
    if (ran && !l->term_signal)
      rc_jw_int(w, l->exit_code);
    else
      rc_jw_null(w);
    rc_jw_key(w, "signal");
    if (l->term_signal)
      rc_jw_int(w, l->term_signal);
    else
      rc_jw_null(w);
    rc_jw_key(w, "wall_s");
    if (ran)
      rc_jw_double(w, l->wall_s);
    else
      rc_jw_null(w);
    rc_jw_key(w, "started_s"); /* seconds after the run started */
    if (ran)
      rc_jw_double(w, l->t_start - run->t0);
    else
      rc_jw_null(w);
    kv_str_or_null(w, "reason", l->reason);
    kv_str_or_null(w, "log_tail", l->log_tail);
    rc_jw_key(w, "prewarmed");
    rc_jw_bool(w, l->prewarmed);
    kv_str_or_null(w, "step_priority",
                   l->step_locked ? rc_step_priority_name(l->step_priority) : NULL);
    deferred(w, l);
    timing(w, &l->timing);
    rc_jw_obj_end(w);
  }
  rc_jw_arr_end(w);
}

static void diff_obj(rc_jw *w, const rc_diff *d) {
  rc_jw_obj_begin(w);
  kv_str(w, "kind", rc_diff_kind_name(d->kind));
  kv_str(w, "file", d->file);
  kv_str_or_null(w, "object", d->object);
  kv_str_or_null(w, "detail", d->detail);
  if (d->kind == RC_DIFF_VALUES) {
    kv_int(w, "n_elements", d->n_elements);
    kv_int(w, "n_different", d->n_different);
    kv_int(w, "first_index", d->first_index);
    rc_jw_key(w, "max_abs");
    rc_jw_double(w, d->max_abs);
    rc_jw_key(w, "max_rel");
    rc_jw_double(w, d->max_rel);
    rc_jw_key(w, "max_ulp");
    rc_jw_uint(w, d->max_ulp);
    kv_int(w, "n_signed_zero_only", d->n_signed_zero_only);
    kv_int(w, "n_nan_payload_only", d->n_nan_payload_only);
    kv_int(w, "n_nan_mismatch", d->n_nan_mismatch);
  }
  rc_diff_json_bytes(w, d);
  rc_jw_obj_end(w);
}

/* The families a census covers, then "other fields: ..." when some field
 * is of none. */
static void families(rc_jw *w, const rc_census_diff *d) {
  rc_jw_arr_begin(w);
  for (int i = 0; i < RC_CENSUS_N_FAMILIES; i++) {
    if (!(d->families & (1u << i))) continue;
    if ((1u << i) == RC_FAM_REGISTERED && d->registered[0]) {
      char reg[RC_CENSUS_OTHER_CAP + 32];
      snprintf(reg, sizeof reg, "%s (%s)", rc_census_family_name(i), d->registered);
      str(w, reg);
    } else {
      str(w, rc_census_family_name(i));
    }
  }
  if (d->other[0]) {
    char other[RC_CENSUS_OTHER_CAP + 16];
    snprintf(other, sizeof other, "other fields: %s", d->other);
    str(w, other);
  }
  rc_jw_arr_end(w);
}

/* A census check's comparison: every differing field, saved ones first
 * (docs/report-schema.md). */
static void census(rc_jw *w, const rc_check *c) {
  rc_jw_key(w, "census");
  if (!c->have_census) {
    rc_jw_null(w);
    return;
  }
  const rc_census_diff *d = &c->census;
  rc_jw_obj_begin(w);
  kv_int(w, "ranks", c->census_ranks);
  kv_int(w, "fields", d->n_fields);
  kv_int(w, "saved_differ", d->n_saved_differ);
  kv_int(w, "derived_differ", d->n_derived_differ);
  kv_int(w, "copy_differ", d->n_copy_differ);
  kv_int(w, "local_differ", d->n_local_differ);
  rc_census_json_differences(w, "differences", d);
  /* the first-step census: null when neither leg wrote one */
  rc_jw_key(w, "first_step");
  if (!d->first_step && !c->census_first_only[0]) {
    rc_jw_null(w);
  } else {
    rc_jw_obj_begin(w);
    kv_bool(w, "compared", d->first_step);
    kv_str_or_null(w, "only_in", c->census_first_only);
    kv_int(w, "fields", d->first_fields);
    kv_int(w, "saved_differ", d->first_saved_differ);
    kv_int(w, "derived_differ", d->first_derived_differ);
    kv_int(w, "copy_differ", d->first_copy_differ);
    kv_int(w, "local_differ", d->first_local_differ);
    rc_census_json_first_step_differences(w, "differences", d);
    rc_jw_obj_end(w);
  }
  /* what the compared files cover, from their field names */
  rc_jw_key(w, "covers");
  families(w, d);
  rc_jw_obj_end(w);
}

/* A state check's comparison: tallies, hashes-only sides, the differences. */
static void check_state(rc_jw *w, const rc_check *c) {
  rc_jw_key(w, "state");
  if (c->have_cmp) {
    rc_jw_obj_begin(w);
    kv_int(w, "shards", c->shards);
    kv_int(w, "shards_identical", c->shards_identical);
    kv_int(w, "files", c->files);
    kv_int(w, "files_identical", c->files_identical);
    kv_int(w, "datasets_compared", c->cmp.n_datasets_compared);
    kv_bool(w, "fast_path", c->cmp.fast_path);
    kv_bool(w, "args_json_differs", c->args_differ);
    /* a side that kept hashes only (--through-checkpoints hashes): its
     * shards were decided by SHA-256, their values never compared */
    rc_jw_key(w, "hashes_only");
    rc_jw_arr_begin(w);
    if (c->cmp.hashes_only_a) str(w, "a");
    if (c->cmp.hashes_only_b) str(w, "b");
    rc_jw_arr_end(w);
    kv_int(w, "n_failing", c->cmp.n_failing);
    kv_str_or_null(w, "first_difference", c->first_in_path);
    kv_str_or_null(w, "headline_difference", c->first_dataset);
    kv_str_or_null(w, "headline_rule", c->first_dataset[0] ? c->first_why : NULL);
    kv_str_or_null(w, "largest_difference", c->largest_dataset);
    rc_jw_key(w, "ignore");
    rc_jw_arr_begin(w);
    for (int k = 0; k < c->n_ignore; k++) str(w, c->ignore[k]);
    rc_jw_arr_end(w);
    rc_jw_key(w, "diffs");
    rc_jw_arr_begin(w);
    int shown = 0;
    for (int k = 0; k < c->cmp.n_diffs && shown < MAX_DIFFS_PER_CHECK; k++, shown++)
      diff_obj(w, &c->cmp.diffs[k]);
    rc_jw_arr_end(w);
    kv_int(w, "diffs_truncated", c->cmp.n_diffs - shown);
    rc_jw_obj_end(w);
  } else {
    rc_jw_null(w);
  }
}

/* A trace check's comparison: the first differing step and columns. */
static void check_trace(rc_jw *w, const rc_check *c) {
  rc_jw_key(w, "trace");
  if (c->have_trace) {
    rc_jw_obj_begin(w);
    kv_bool(w, "comparable", c->trace.comparable);
    kv_int(w, "steps_compared", c->trace.steps_compared);
    rc_jw_key(w, "first_step");
    if (c->trace.first_step >= 0)
      rc_jw_int(w, c->trace.first_step);
    else
      rc_jw_null(w);
    rc_jw_key(w, "columns");
    csv_array(w, c->trace.columns);
    rc_jw_key(w, "equal_columns");
    csv_array(w, c->trace.equal_columns);
    kv_str_or_null(w, "a_values", c->trace.a_values);
    kv_str_or_null(w, "b_values", c->trace.b_values);
    rc_jw_obj_end(w);
  } else {
    rc_jw_null(w);
  }
}

static void checks(rc_jw *w, const rc_run *run) {
  rc_jw_key(w, "checks");
  rc_jw_arr_begin(w);
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    rc_jw_obj_begin(w);
    kv_str(w, "name", c->name);
    kv_str_or_null(w, "arm", c->arm);
    kv_str(w, "kind",
           c->what == RC_CHECK_STATE    ? "state"
           : c->what == RC_CHECK_CENSUS ? "census"
                                        : "trace");
    kv_str(w, "class", rc_check_class_name(c->cls));
    const char *sides[2] = {"a", "b"};
    const int leg[2] = {c->leg_a, c->leg_b};
    const char *path[2] = {c->path_a, c->path_b};
    for (int s = 0; s < 2; s++) {
      rc_jw_key(w, sides[s]);
      rc_jw_obj_begin(w);
      kv_str(w, "leg", run->legs[leg[s]].label);
      kv_str(w, "path", path[s]);
      rc_jw_obj_end(w);
    }
    rc_jw_key(w, "step");
    if (c->what == RC_CHECK_STATE || c->what == RC_CHECK_CENSUS)
      rc_jw_int(w, c->step);
    else
      rc_jw_null(w);
    rc_jw_key(w, "steps");
    if (c->what == RC_CHECK_TRACE) {
      rc_jw_arr_begin(w);
      rc_jw_int(w, c->trace_from);
      rc_jw_int(w, c->trace_to);
      rc_jw_arr_end(w);
    } else {
      rc_jw_null(w);
    }
    kv_str(w, "status", rc_check_status_name(c->status));
    kv_bool(w, "during_legs", c->during_legs);
    kv_str(w, "summary", c->summary);
    kv_str_or_null(w, "error", c->status == RC_CHECK_ERROR ? c->err.msg : NULL);
    check_state(w, c);
    check_trace(w, c);
    census(w, c);
    rc_report_calib_check(w, c); /* judged, calibration */
    rc_jw_obj_end(w);
  }
  rc_jw_arr_end(w);
}

static void first_divergence(rc_jw *w, const rc_run *run) {
  rc_jw_key(w, "first_divergence");
  if (run->first_div_check < 0) {
    rc_jw_null(w);
    return;
  }
  const rc_check *c = &run->checks[run->first_div_check];
  rc_jw_obj_begin(w);
  kv_str(w, "check", c->name);
  kv_str(w, "class", rc_check_class_name(c->cls));
  rc_jw_key(w, "step");
  if (run->first_div_step >= 0)
    rc_jw_int(w, run->first_div_step);
  else
    rc_jw_null(w);
  rc_jw_key(w, "columns");
  csv_array(w, c->have_trace ? c->trace.columns : "");
  rc_jw_key(w, "equal_columns");
  csv_array(w, c->have_trace ? c->trace.equal_columns : "");
  kv_str_or_null(w, "dataset", run->first_div_in_path);
  kv_str_or_null(w, "headline", run->first_div_dataset);
  kv_str_or_null(w, "headline_rule", run->first_div_dataset[0] ? run->first_div_why : NULL);
  kv_str_or_null(w, "largest", run->first_div_largest);
  rc_jw_obj_end(w);
}

/* "census_silent": RESUME diverged while every census compared saw no
 * saved field differ; null otherwise. */
static void census_silent(rc_jw *w, const rc_run *run) {
  rc_jw_key(w, "census_silent");
  if (!run->census_silent[0] || run->census_silent_check < 0 ||
      run->census_silent_check >= run->n_checks) {
    rc_jw_null(w);
    return;
  }
  const rc_check *c = &run->checks[run->census_silent_check];
  rc_jw_obj_begin(w);
  kv_str(w, "check", c->name);
  kv_int(w, "step", c->step);
  kv_int(w, "fields", c->census.n_fields);
  rc_jw_key(w, "first_step_fields");
  if (c->census.first_step)
    rc_jw_int(w, c->census.first_fields);
  else
    rc_jw_null(w);
  rc_jw_key(w, "covers");
  families(w, &c->census);
  kv_str(w, "text", run->census_silent);
  rc_jw_obj_end(w);
}

char *rc_report_json_string(const rc_run *run) {
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  kv_str(&w, "schema", RC_RUN_REPORT_SCHEMA);
  kv_int(&w, "schema_version", RC_RUN_REPORT_SCHEMA_VERSION);
  rc_jw_key(&w, "tool");
  rc_jw_obj_begin(&w);
  kv_str(&w, "name", "resumecheck");
  kv_str(&w, "version", RC_VERSION);
  rc_jw_obj_end(&w);
  rc_jw_key(&w, "command");
  rc_jw_arr_begin(&w);
  for (int i = 0; i < run->opts.argc; i++) str(&w, run->opts.argv[i]);
  rc_jw_arr_end(&w);
  /* switches that change bits, as the legs inherited them (each leg's
   * args.json records them too) */
  rc_jw_key(&w, "kernel_switches");
  rc_jw_obj_begin(&w);
  for (size_t i = 0; i < RC_N_KERNEL_SWITCHES; i++)
    if (getenv(RC_KERNEL_SWITCHES[i]))
      kv_str(&w, RC_KERNEL_SWITCHES[i], getenv(RC_KERNEL_SWITCHES[i]));
  rc_jw_obj_end(&w);
  config(&w, run);
  rc_jw_key(&w, "wall_s");
  rc_jw_double(&w, run->wall_s);
  rc_jw_key(&w, "phases_s"); /* where wall_s went */
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "prepare");
  rc_jw_double(&w, run->prepare_s);
  rc_jw_key(&w, "legs");
  rc_jw_double(&w, run->legs_s);
  rc_jw_key(&w, "checks");
  rc_jw_double(&w, run->checks_s);
  rc_jw_obj_end(&w);
  legs(&w, run);
  checks(&w, run);
  first_divergence(&w, run);
  rc_jw_key(&w, "confirm");
  if (run->opts.confirm_arm) {
    rc_jw_obj_begin(&w);
    kv_str(&w, "mechanism", rc_mechanism_name(run->mechanism));
    kv_str(&w, "text", run->mechanism_text);
    rc_jw_obj_end(&w);
  } else {
    rc_jw_null(&w);
  }
  kv_bool(&w, "interrupted", run->interrupted);
  rc_report_calib_run(&w, run);
  kv_str(&w, "verdict", run->verdict);
  kv_str(&w, "verdict_text", run->verdict_text);
  kv_str_or_null(&w, "verdict_hint", run->verdict_hint);
  kv_str_or_null(&w, "census_finding", run->census_finding);
  census_silent(&w, run);
  kv_int(&w, "exit_code", run->exit_code);
  rc_jw_obj_end(&w);
  /* ownership of the buffer passes to the caller */
  char *out = w.buf;
  size_t len = w.len;
  char *res = malloc(len + 2);
  if (res) {
    memcpy(res, out, len);
    res[len] = '\n';
    res[len + 1] = 0;
  }
  rc_jw_free(&w);
  return res;
}

/* Whether a and b name one file (both exist): --json DIR/report.json spelt
 * another way must not be written twice. */
static bool same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The run directory always gets its report.json, and --json FILE a copy:
 * the directory is what people keep, archive and hand to `resumecheck
 * bisect DIR`, and FILE is often a CI artifact path that is moved, uploaded
 * and deleted, or a FIFO that cannot be read twice (docs/bisect.md). Both
 * are written through rc_write_output: atomically, never renamed over what
 * is not a regular file. RC_TEST_REPORT_ONLY_AT_JSON=1 writes FILE alone,
 * as before, so that the tests can show what the directory's copy fixes. */
int rc_report_json(const rc_run *run, const char *path, rc_err *err) {
  char dir_path[4096] = "";
  const char *only_at_json = getenv("RC_TEST_REPORT_ONLY_AT_JSON");
  bool dir_copy =
      run->opts.out_dir && run->opts.out_dir[0] && !(only_at_json && !strcmp(only_at_json, "1"));
  if (dir_copy) {
    int k = snprintf(dir_path, sizeof dir_path, "%s/" RC_REPORT_NAME, run->opts.out_dir);
    if (k < 0 || (size_t)k >= sizeof dir_path)
      return rc_fail(err, RC_EXIT_USAGE, "%s: run directory path too long", run->opts.out_dir);
  }
  if (!path) path = dir_path;
  if (!path[0]) return rc_fail(err, RC_EXIT_SOFTWARE, "report.json: no path and no run directory");
  char *s = rc_report_json_string(run);
  if (!s) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory writing %s", path);
  size_t n = strlen(s);
  int rc = RC_OK;
  bool separate = dir_path[0] && strcmp(dir_path, path) != 0;
  if (separate) rc = rc_write_output(dir_path, s, n, err);
  /* FILE is written even when the directory's copy failed, so that nothing
   * is lost; the first error is the one returned */
  if (!(separate && rc == RC_OK && same_file(dir_path, path))) {
    rc_err ferr = {0};
    int frc = rc_write_output(path, s, n, &ferr);
    if (frc && !rc) {
      rc = frc;
      if (err) *err = ferr;
    }
  }
  free(s);
  return rc;
}
