/* report_calib.c — what `run --noise calibrated` found, as report.json
 * members (docs/report-schema.md, "Calibrated runs"): the rule and the
 * fresh legs at the top, each check's kind of judgement and, for the
 * calibrated and noise checks, the columns and tensors against their
 * envelope. report_json.c calls these; they write nothing else. */
#include "report.h"

#include <math.h>
#include <string.h>

static void kv_num(rc_jw *w, const char *k, double v) { /* non-finite: null */
  rc_jw_key(w, k);
  rc_jw_double(w, v);
}

static void kv_step(rc_jw *w, const char *k, int64_t s) {
  rc_jw_key(w, k);
  if (s >= 0)
    rc_jw_int(w, s);
  else
    rc_jw_null(w);
}

static void kv_s(rc_jw *w, const char *k, const char *v) {
  rc_jw_key(w, k);
  rc_jw_str(w, v);
}

const char *rc_check_judged_name(rc_check_judged j) {
  switch (j) {
  case RC_JUDGED_BYTES:
    return "bytes";
  case RC_JUDGED_EXACT:
    return "exact";
  case RC_JUDGED_CALIBRATED:
    return "calibrated";
  case RC_JUDGED_NOISE:
    return "noise";
  }
  return "?";
}

void rc_report_calib_config(rc_jw *w, const rc_run *run) {
  const rc_run_opts *o = &run->opts;
  kv_s(w, "noise", o->noise == RC_NOISE_CALIBRATED ? "calibrated" : "bytes");
  rc_jw_key(w, "aa_count");
  rc_jw_int(w, o->aa_count);
  rc_jw_key(w, "resumes"); /* resume legs per K (calibrated), 1 byte for byte */
  rc_jw_int(w, o->noise == RC_NOISE_CALIBRATED ? o->resumes : 1);
  rc_jw_key(w, "confirm_resumes");
  rc_jw_int(w, o->noise == RC_NOISE_CALIBRATED ? o->confirm_resumes : 0);
  rc_jw_key(w, "training_steps");
  rc_jw_int(w, rc_run_training_steps(run));
}

void rc_report_calib_run(rc_jw *w, const rc_run *run) {
  rc_jw_key(w, "calibration");
  if (run->opts.noise != RC_NOISE_CALIBRATED) {
    rc_jw_null(w);
    return;
  }
  rc_jw_obj_begin(w);
  rc_jw_key(w, "rule");
  rc_jw_obj_begin(w);
  kv_num(w, "factor", RC_CALIB_FACTOR);
  kv_num(w, "floor_rel", RC_CALIB_FLOOR_REL);
  kv_num(w, "undecidable_rel", RC_CALIB_UNDECIDABLE_REL);
  kv_s(w, "text",
       "trace: |through - resumed| at step K+j and column c exceeds the noise when it is larger "
       "than max(factor x L(2j), floor_rel) x |through|, L(h) the largest relative difference of "
       "any pair of fresh legs at steps 1..h; state: D, the RMS difference of the differing float "
       "tensors' elements relative to each tensor's scale, exceeds it when larger than max(factor "
       "x the largest D of the pairs, floor_rel); an excess is decided only when every resume leg "
       "at its K (each judged against the fresh leg whose checkpoint it loaded) exceeds");
  rc_jw_obj_end(w);
  rc_jw_key(w, "fresh_legs");
  rc_jw_arr_begin(w);
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    if (l->resume_step == 0 && (!strcmp(l->name, "through") || !strncmp(l->name, "aa", 2)))
      rc_jw_str(w, l->label);
  }
  rc_jw_arr_end(w);
  rc_jw_obj_end(w);
}

static void columns(rc_jw *w, const rc_calib *k) {
  rc_jw_key(w, "columns");
  rc_jw_arr_begin(w);
  for (int i = 0; i < k->n_cols; i++) {
    const rc_calib_col_result *c = &k->cols[i];
    rc_jw_obj_begin(w);
    kv_s(w, "name", c->name);
    kv_s(w, "kind", rc_col_kind_name(c->kind));
    kv_s(w, "why", c->why);
    rc_jw_key(w, "steps");
    rc_jw_int(w, c->steps);
    kv_step(w, "differ_step", c->differ_step);
    kv_step(w, "worst_step", c->worst_step);
    kv_num(w, "worst_r", c->worst_step >= 0 ? c->worst_r : NAN);
    kv_num(w, "worst_allowed", c->worst_step >= 0 ? c->worst_allowed : NAN);
    kv_num(w, "worst_envelope", c->worst_step >= 0 ? c->worst_env : NAN);
    kv_num(w, "worst_value", c->worst_step >= 0 ? c->worst_value : NAN);
    kv_step(w, "exceed_step", c->exceed_step);
    kv_num(w, "exceed_r", c->exceed_step >= 0 ? c->exceed_r : NAN);
    kv_num(w, "exceed_envelope", c->exceed_step >= 0 ? c->exceed_env : NAN);
    kv_step(w, "floor_step", c->floor_step);
    kv_num(w, "floor_r", c->floor_step >= 0 ? c->floor_r : NAN);
    kv_num(w, "resolution", c->resolution);
    rc_jw_obj_end(w);
  }
  rc_jw_arr_end(w);
}

static void tensors(rc_jw *w, const rc_calib *k) {
  rc_jw_key(w, "tensors");
  rc_jw_arr_begin(w);
  for (int i = 0; i < k->n_tensors; i++) {
    const rc_calib_tensor *t = &k->tensors[i];
    rc_jw_obj_begin(w);
    kv_s(w, "file", t->file);
    kv_s(w, "object", t->object);
    kv_num(w, "max_abs", t->r_abs);
    kv_num(w, "max_rel", t->r_rel);
    rc_jw_key(w, "max_ulp");
    rc_jw_uint(w, t->r_ulp);
    rc_jw_key(w, "n_different");
    rc_jw_int(w, t->r_n_different);
    rc_jw_key(w, "n_elements");
    rc_jw_int(w, t->n_elements);
    kv_num(w, "scale", t->scale);
    kv_num(w, "rms_rel", t->rms_rel);
    kv_num(w, "share", t->share);
    kv_num(w, "envelope_rms_rel", t->e_rms_rel);
    kv_num(w, "envelope_max_abs", t->e_abs);
    kv_num(w, "envelope_max_rel", t->e_rel);
    rc_jw_key(w, "envelope_max_ulp");
    rc_jw_uint(w, t->e_ulp);
    rc_jw_key(w, "envelope_n_different");
    rc_jw_int(w, t->e_n_different);
    rc_jw_key(w, "envelope_pairs");
    rc_jw_int(w, t->e_pairs);
    kv_num(w, "ratio", t->ratio);
    rc_jw_key(w, "exceeds");
    rc_jw_bool(w, t->exceeds);
    rc_jw_obj_end(w);
  }
  rc_jw_arr_end(w);
}

void rc_report_calib_check(rc_jw *w, const rc_check *c) {
  kv_s(w, "judged", rc_check_judged_name(c->judged));
  rc_jw_key(w, "calibration");
  if (!c->have_calib) {
    rc_jw_null(w);
    return;
  }
  const rc_calib *k = &c->calib;
  rc_jw_obj_begin(w);
  rc_jw_key(w, "fresh_legs");
  rc_jw_int(w, k->n_fresh);
  rc_jw_key(w, "pairs");
  rc_jw_int(w, k->n_pairs);
  rc_jw_key(w, "exceeds");
  rc_jw_bool(w, k->exceeds);
  kv_step(w, "step", k->step);
  kv_s(w, "what", k->what);
  kv_num(w, "r", k->r);
  kv_num(w, "envelope", k->env);
  kv_num(w, "allowed", k->allowed);
  kv_num(w, "ratio", k->ratio); /* null: the fresh runs agree there */
  kv_num(w, "resolution", k->resolution);
  rc_jw_key(w, "resolution_column");
  if (k->resolution_col[0])
    rc_jw_str(w, k->resolution_col);
  else
    rc_jw_null(w);
  kv_step(w, "resolution_step", k->resolution_step);
  rc_jw_key(w, "undecidable");
  rc_jw_bool(w, k->undecidable);
  rc_jw_key(w, "at_floor");
  rc_jw_bool(w, k->at_floor);
  rc_jw_key(w, "resume_legs");
  rc_jw_int(w, k->resume_legs);
  rc_jw_key(w, "resume_legs_exceeding");
  rc_jw_int(w, k->resume_legs_exceeding);
  rc_jw_key(w, "not_reproduced");
  rc_jw_bool(w, k->not_reproduced);
  rc_jw_key(w, "not_judged");
  rc_jw_arr_begin(w);
  for (const char *p = k->fingerprints; *p;) {
    size_t n = strcspn(p, ",");
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
    rc_jw_str(w, name);
    p += n + (p[n] == ',');
  }
  rc_jw_arr_end(w);
  columns(w, k);
  tensors(w, k);
  rc_jw_obj_end(w);
}
