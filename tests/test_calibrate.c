/* test_calibrate.c — the rule of `run --noise calibrated`
 * (harness/calibrate.h, docs/design.md §7.2) on hand-made traces and
 * comparison results: the kinds of trace column (defaults, a declaration,
 * malformed declarations), the trace rule (within, exceeds and by how much,
 * the 2j horizon, a column the fresh runs agree on, the resolution floor,
 * undecidable noise), the split of a state comparison into its exact
 * part and its float values, and the plan of a calibrated run. Each judgement has its control: the
 * same traces without the planted deviation, or with the noise it needs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "harness/calibrate.h"
#include "harness/run.h"

static char dir[] = "/tmp/rc_calib_unit.XXXXXX";

static void put(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(1);
  }
  fputs(text, f);
  fclose(f);
}

static void load(const char *name, rc_trace_table *t) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  rc_err err = {0};
  if (rc_trace_table_load(path, t, &err)) {
    fprintf(stderr, "%s: %s\n", path, err.msg);
    exit(1);
  }
}

/* A trace with step, loss (and loss_hex), lr (and lr_hex): loss[i] for
 * steps 1..n, lr fixed. */
static void trace(const char *name, const double *loss, int n, double lr) {
  char text[4096] = "step,loss,loss_hex,lr,lr_hex\n";
  for (int i = 0; i < n; i++) {
    size_t len = strlen(text);
    snprintf(text + len, sizeof text - len, "%d,%.9g,%a,%.9g,%a\n", i + 1, loss[i], loss[i], lr,
             lr);
  }
  put(name, text);
}

static const rc_calib_col *col(const rc_calib_col *c, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(c[i].name, name)) return &c[i];
  return NULL;
}

static void test_kinds(void) {
  put("k.csv",
      "step,loss,loss_hex,lr,lr_hex,mtp_acc_1,mtp_acc_1_hex,tokens,fp_params,batch\n"
      "1,5.5,0x1.6p+2,0.001,0x1.0624dd2f1a9fcp-10,0.25,0x1p-2,64,00ab3fe1c2d4e5f6,17\n"
      "2,5.4,0x1.599999999999ap+2,0.002,0x1.0624dd2f1a9fcp-9,0.5,0x1p-1,64,9f3e11aa00cd0b7e,93\n");
  rc_trace_table t;
  load("k.csv", &t);
  rc_calib_col *c = NULL;
  int n = 0;
  rc_err err = {0};
  CHECK(!rc_calib_columns(&t, NULL, 0, NULL, &c, &n, &err), "columns: %s", err.msg);
  CHECK(n == 6, "6 logical columns, got %d", n);
  const struct {
    const char *name;
    rc_col_kind kind;
  } want[] = {{"loss", RC_COL_NOISY},
              {"lr", RC_COL_EXACT},
              {"mtp_acc_1", RC_COL_DISCRETE},
              {"tokens", RC_COL_EXACT},
              {"fp_params", RC_COL_FINGERPRINT},
              {"batch", RC_COL_EXACT}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const rc_calib_col *k = col(c, n, want[i].name);
    CHECK(k && k->kind == want[i].kind, "%s: kind %s, want %s", want[i].name,
          k ? rc_col_kind_name(k->kind) : "(none)", rc_col_kind_name(want[i].kind));
  }
  free(c);
  /* a declaration overrides the defaults */
  char decl[256];
  snprintf(decl, sizeof decl, "%s/decl.json", dir);
  put("decl.json", "{\"schema\": \"resumecheck.trace-columns\", \"schema_version\": 1, "
                   "\"exact\": [\"loss\"], \"noisy\": [\"tokens\"]}");
  CHECK(!rc_calib_columns(&t, NULL, 0, decl, &c, &n, &err), "declared: %s", err.msg);
  const rc_calib_col *loss = col(c, n, "loss"), *tokens = col(c, n, "tokens");
  CHECK(loss && loss->kind == RC_COL_EXACT && !strcmp(loss->why, "declared"),
        "declared exact: loss is %s", loss ? rc_col_kind_name(loss->kind) : "?");
  CHECK(tokens && tokens->kind == RC_COL_NOISY, "declared noisy: tokens is %s",
        tokens ? rc_col_kind_name(tokens->kind) : "?");
  free(c);
  /* malformed declarations are bad data (65), naming the file */
  const char *bad[] = {"{\"exact\": [\"no_such_column\"]}",
                       "{\"exact\": [\"loss\"], \"noisy\": [\"loss\"]}",
                       "{\"exact\": \"loss\"}",
                       "{\"schema\": \"other\", \"exact\": []}",
                       "{\"schema_version\": 2}",
                       "[1, 2]",
                       "{\"exact\": [3]}",
                       "not json"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    put("decl.json", bad[i]);
    rc_err e = {0};
    c = NULL;
    int rc = rc_calib_columns(&t, NULL, 0, decl, &c, &n, &e);
    CHECK(rc == RC_EXIT_DATAERR && strstr(e.msg, "decl.json"), "declaration %s: rc %d (%s)", bad[i],
          rc, e.msg);
    free(c);
  }
  rc_trace_table_free(&t);
}

/* Judges resumed series r (steps 1..n) against through t and fresh a, b,
 * resumed from K (judged K+1..n), the loss column. */
static void judge(const double *t, const double *a, const double *b, const double *r, int n,
                  int64_t K, rc_calib *res) {
  trace("t.csv", t, n, 1e-3);
  trace("a.csv", a, n, 1e-3);
  trace("b.csv", b, n, 1e-3);
  trace("r.csv", r, n, 1e-3);
  rc_trace_table tt, ta, tb, tr;
  load("t.csv", &tt);
  load("a.csv", &ta);
  load("b.csv", &tb);
  load("r.csv", &tr);
  rc_calib_col *c = NULL;
  int nc = 0;
  rc_err err = {0};
  CHECK(!rc_calib_columns(&tt, NULL, 0, NULL, &c, &nc, &err), "columns: %s", err.msg);
  const rc_trace_table *fresh[3] = {&tt, &ta, &tb};
  memset(res, 0, sizeof *res);
  CHECK(!rc_calib_judge_trace(&tt, &tr, fresh, 3, c, nc, K + 1, n, res, &err), "judge: %s",
        err.msg);
  free(c);
  rc_trace_table_free(&tt);
  rc_trace_table_free(&ta);
  rc_trace_table_free(&tb);
  rc_trace_table_free(&tr);
}

static void test_rule(void) {
  enum { N = 8 };
  double t[N], a[N], b[N], r[N];
  rc_calib res;
  /* fresh runs that part by a relative 1e-3 from step 1 on */
  for (int i = 0; i < N; i++) t[i] = 5.0 - 0.1 * i, a[i] = t[i] * 1.001, b[i] = t[i] * 0.999;
  /* within: the resumed leg 1e-3 off at K+1 (the pairs reach 2e-3) */
  for (int i = 0; i < N; i++) r[i] = t[i];
  r[3] = t[3] * 1.001;
  judge(t, a, b, r, N, 3, &res);
  CHECK(!res.exceeds && !res.undecidable, "a deviation the pairs reach: exceeds %d", res.exceeds);
  CHECK(res.n_pairs == 3 && res.n_fresh == 3, "3 fresh runs, 3 pairs: %d %d", res.n_fresh,
        res.n_pairs);
  CHECK(fabs(res.resolution - RC_CALIB_FACTOR * 0.002 / 1.001) < 1e-4,
        "resolution %g at K+1, want factor x the pairs' 2e-3", res.resolution);
  rc_calib_free(&res);
  /* exceeds: 10x the pairs' relative difference at K+2, named with its
   * step, column and ratio */
  r[4] = t[4] + 10 * (0.002 / 1.001) * t[4];
  judge(t, a, b, r, N, 3, &res);
  CHECK(res.exceeds && res.step == 5 && !strcmp(res.what, "loss"),
        "exceeds at 5 (loss): %d %lld %s", res.exceeds, (long long)res.step, res.what);
  CHECK(fabs(res.ratio - 10) < 0.01, "ratio to the envelope %g, want 10", res.ratio);
  rc_calib_free(&res);
  /* control: 3x is within the factor 4 */
  r[4] = t[4] + 3 * (0.002 / 1.001) * t[4];
  judge(t, a, b, r, N, 3, &res);
  CHECK(!res.exceeds, "3x the envelope exceeds (factor %g)", RC_CALIB_FACTOR);
  rc_calib_free(&res);
  /* j steps after K are held to what 2j steps of noise do: fresh runs that
   * agree for 2 steps and part by 1e-2 from step 3 on; the resumed leg 5e-3
   * off at K+1 (j = 1, horizon 2: they agreed) exceeds, at K+2 (horizon 4)
   * it does not */
  for (int i = 0; i < N; i++) {
    a[i] = b[i] = r[i] = t[i];
    if (i >= 2) a[i] = t[i] * 1.01;
  }
  r[4] = t[4] * 1.005;
  judge(t, a, b, r, N, 3, &res);
  CHECK(!res.exceeds, "K+2 within what 4 steps of noise do: exceeds %d at %lld", res.exceeds,
        (long long)res.step);
  rc_calib_free(&res);
  r[4] = t[4], r[3] = t[3] * 1.005;
  judge(t, a, b, r, N, 3, &res);
  CHECK(res.exceeds && res.step == 4 && isinf(res.ratio),
        "K+1 beyond what 2 steps of noise do: exceeds %d at %lld, ratio %g", res.exceeds,
        (long long)res.step, res.ratio);
  rc_calib_free(&res);
  /* fresh runs that agree everywhere: a deviation above the resolution
   * floor exceeds (unbounded ratio), one below it does not */
  for (int i = 0; i < N; i++) a[i] = b[i] = r[i] = t[i];
  r[5] = t[5] * (1 + 1e-3);
  judge(t, a, b, r, N, 3, &res);
  CHECK(res.exceeds && isinf(res.ratio), "agreeing fresh runs, 1e-3 off: exceeds %d ratio %g",
        res.exceeds, res.ratio);
  rc_calib_free(&res);
  r[5] = t[5] * (1 + RC_CALIB_FLOOR_REL / 4);
  judge(t, a, b, r, N, 3, &res);
  CHECK(!res.exceeds, "a deviation below the resolution floor exceeds");
  rc_calib_free(&res);
  /* at the floor: fresh runs that agree, the resumed leg 2x the floor off
   * at K+3: not decided (not a bug, not a pass), named with its step;
   * control: 5x the floor (over the factor) exceeds */
  r[5] = t[5] * (1 + 2 * RC_CALIB_FLOOR_REL);
  judge(t, a, b, r, N, 3, &res);
  CHECK(!res.exceeds && res.at_floor && res.undecidable && res.step == 6 &&
            !strcmp(res.what, "loss") && fabs(res.r / res.allowed - 2) < 0.01,
        "2x the floor with agreeing pairs: exceeds %d at_floor %d undecidable %d step %lld "
        "r/allowed %g",
        res.exceeds, res.at_floor, res.undecidable, (long long)res.step, res.r / res.allowed);
  rc_calib_free(&res);
  r[5] = t[5] * (1 + 5 * RC_CALIB_FLOOR_REL);
  judge(t, a, b, r, N, 3, &res);
  CHECK(res.exceeds && !res.at_floor && !res.undecidable && res.step == 6,
        "5x the floor exceeds: exceeds %d at_floor %d", res.exceeds, res.at_floor);
  rc_calib_free(&res);
  /* an excess at the floor first, a decisive one later: exceeds, at the later step */
  r[5] = t[5] * (1 + 2 * RC_CALIB_FLOOR_REL), r[7] = t[7] * (1 + 1e-3);
  judge(t, a, b, r, N, 3, &res);
  CHECK(res.exceeds && !res.at_floor && res.step == 8,
        "floor at 6, 1e-3 at 8: exceeds %d at_floor %d step %lld", res.exceeds, res.at_floor,
        (long long)res.step);
  rc_calib_free(&res);
  /* the floor only where it set the bound: pairs that part by half the
   * floor allow 2x it (4 x their difference); 3x the floor then exceeds */
  for (int i = 0; i < N; i++) a[i] = t[i] * (1 + RC_CALIB_FLOOR_REL / 2), b[i] = r[i] = t[i];
  r[5] = t[5] * (1 + 3 * RC_CALIB_FLOOR_REL);
  judge(t, a, b, r, N, 3, &res);
  CHECK(res.exceeds && !res.at_floor,
        "pairs at half the floor, 3x the floor: exceeds %d at_floor %d", res.exceeds, res.at_floor);
  rc_calib_free(&res);
  /* undecidable: the pairs part by 30% from step 1; control: 0.2% */
  for (int i = 0; i < N; i++) a[i] = t[i] * 1.3, b[i] = t[i] * 0.8, r[i] = t[i] * 1.05;
  judge(t, a, b, r, N, 3, &res);
  CHECK(res.undecidable && !res.exceeds && res.resolution >= RC_CALIB_UNDECIDABLE_REL,
        "noise of 30%%: undecidable %d resolution %g", res.undecidable, res.resolution);
  rc_calib_free(&res);
  for (int i = 0; i < N; i++) a[i] = t[i] * 1.002, b[i] = t[i] * 0.999, r[i] = t[i] * 1.001;
  judge(t, a, b, r, N, 3, &res);
  CHECK(!res.undecidable && !res.exceeds, "noise of 0.2%%: undecidable %d", res.undecidable);
  rc_calib_free(&res);
}

/* The state rule: pairs that agree (0) or differ under the floor, the
 * resumed state 2x the floor off: at the floor; 5x: exceeds; pairs at 1e-3
 * allow 4e-3: 2x the floor within; NaN exceeds. */
static void test_state_rule(void) {
  const double F = RC_CALIB_FLOOR_REL;
  struct {
    double r, env;
    bool exceeds, at_floor;
  } cases[] = {{2 * F, 0, false, true},    {2 * F, F / 8, false, true}, {5 * F, 0, true, false},
               {0.5 * F, 0, false, false}, {2 * F, 1e-3, false, false}, {NAN, 0, true, false},
               {3 * F, F / 2, true, false}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rc_calib k = {0};
    k.r = cases[i].r, k.env = cases[i].env;
    rc_calib_state_rule(&k);
    CHECK(k.exceeds == cases[i].exceeds && k.at_floor == cases[i].at_floor &&
              k.undecidable == cases[i].at_floor,
          "state r %g env %g: exceeds %d at_floor %d undecidable %d", cases[i].r, cases[i].env,
          k.exceeds, k.at_floor, k.undecidable);
  }
}

static rc_diff diff(rc_diff_kind kind, const char *object, const char *detail) {
  rc_diff d;
  memset(&d, 0, sizeof d);
  d.kind = kind;
  snprintf(d.file, sizeof d.file, "shard.h5");
  snprintf(d.object, sizeof d.object, "%s", object);
  snprintf(d.detail, sizeof d.detail, "%s", detail);
  return d;
}

static void test_split(void) {
  rc_compare_result all;
  memset(&all, 0, sizeof all);
  rc_diff ds[] = {diff(RC_DIFF_VALUES, "/model/w", "float32[4,4]: 3 of 16 elements differ"),
                  diff(RC_DIFF_VALUES, "/data/consumed_samples", "int64: 1 of 1 elements differ"),
                  diff(RC_DIFF_MISSING_IN_B, "/optimizer/step", ""),
                  diff(RC_DIFF_VALUES, "/model/h", "bfloat16[8]: 1 of 8 elements differ"),
                  diff(RC_DIFF_INFORMATIONAL, "", "args.json differs by construction"),
                  diff(RC_DIFF_VALUES, "/fp8/cache", "float8_e4m3[8]: raw bytes differ")};
  int n = (int)(sizeof ds / sizeof ds[0]);
  all.diffs = malloc(sizeof ds);
  memcpy(all.diffs, ds, sizeof ds);
  all.n_diffs = all.cap_diffs = n;
  all.n_failing = n - 1;
  all.n_files_compared = 2;
  CHECK(rc_calib_exact_diffs(&all) == 3, "exact differences %d, want 3",
        rc_calib_exact_diffs(&all));
  rc_compare_result floats;
  rc_err err = {0};
  CHECK(!rc_calib_split(&all, &floats, &err), "split: %s", err.msg);
  CHECK(floats.n_diffs == 2 && floats.n_failing == 2, "float part: %d diffs, %d failing",
        floats.n_diffs, floats.n_failing);
  CHECK(all.n_diffs == 4 && all.n_failing == 3, "exact part: %d diffs, %d failing", all.n_diffs,
        all.n_failing);
  CHECK(floats.n_files_compared == 2, "the float part keeps the counters");
  for (int i = 0; i < floats.n_diffs; i++)
    CHECK(rc_calib_diff_is_float(&floats.diffs[i]), "moved a non-float: %s",
          floats.diffs[i].detail);
  for (int i = 0; i < all.n_diffs; i++)
    CHECK(!rc_calib_diff_is_float(&all.diffs[i]), "kept a float: %s", all.diffs[i].detail);
  rc_compare_result_free(&all);
  rc_compare_result_free(&floats);
}

static const char *arg_of(const rc_leg *l, const char *flag) {
  for (int i = 0; i + 1 < l->argc; i++)
    if (!strcmp(l->argv[i], flag)) return l->argv[i + 1];
  return NULL;
}

static const rc_check *named(const rc_run *r, const char *name) {
  for (int i = 0; i < r->n_checks; i++)
    if (!strcmp(r->checks[i].name, name)) return &r->checks[i];
  return NULL;
}

/* The options of a calibrated plan of tiny: N = 10, K = 3 and 6, --aa 2. */
static rc_run_opts calibrated_opts(void) {
  static int64_t ks[] = {3, 6};
  static char *fwd[] = {"--preset", "tiny"};
  rc_run_opts o;
  memset(&o, 0, sizeof o);
  o.steps = 10, o.save_at = ks, o.n_save_at = 2, o.out_dir = "/out", o.jobs = 2;
  o.trainer = RC_TRAINER_SELF, o.self_exe = "/bin/resumecheck", o.fwd = fwd, o.n_fwd = 2;
  o.noise = RC_NOISE_CALIBRATED, o.aa_count = 2;
  return o;
}

/* The plan of --noise calibrated: no save leg, two resume legs per K, one
 * from the through leg's own checkpoint and one from aa's, each checked
 * against its source; aa legs that save like through, every check's kind,
 * the twin of the RESUME state check; --resumes 3 and 1; the refusals.
 * Control: the same options byte for byte plan a save leg and nothing but
 * bytes. */
static void test_plan(void) {
  rc_run_opts o = calibrated_opts();
  rc_run r;
  rc_err err = {0};
  CHECK(!rc_run_plan(&r, &o, &err), "plan: %s", err.msg);
  const char *labels[] = {"through",     "aa",       "aa2",        "resume@3",
                          "resume@3.aa", "resume@6", "resume@6.aa"};
  CHECK(r.n_legs == 7, "7 legs, got %d", r.n_legs);
  for (int i = 0; i < r.n_legs && i < 7; i++)
    CHECK(!strcmp(r.legs[i].label, labels[i]), "leg %d: %s, want %s", i, r.legs[i].label,
          labels[i]);
  if (r.n_legs == 7) {
    const char *from = arg_of(&r.legs[5], "--resume-from");
    CHECK(from && !strcmp(from, "/out/through/ckpt/iter_0000006") && r.legs[5].depends_on == 0 &&
              r.legs[5].last_step == 10,
          "resume@6 loads through@6 (the shared trajectory) and runs to N: %s", from ? from : "-");
    from = arg_of(&r.legs[6], "--resume-from");
    CHECK(from && !strcmp(from, "/out/aa/ckpt/iter_0000006") && r.legs[6].depends_on == 1 &&
              r.legs[6].last_step == 10,
          "resume@6.aa loads aa@6 (its own trajectory): %s", from ? from : "-");
    const char *saves = arg_of(&r.legs[2], "--save-at");
    CHECK(saves && !strcmp(saves, "3,6,10"), "aa2 saves like through: %s", saves ? saves : "-");
  }
  const struct {
    const char *name;
    rc_check_judged judged;
  } want[] = {{"A/A@10", RC_JUDGED_NOISE},
              {"A/A@10 aa2", RC_JUDGED_NOISE},
              {"A/A@10 aa/aa2", RC_JUDGED_NOISE},
              {"RESUME@3→10 exact", RC_JUDGED_EXACT},
              {"RESUME@3→10", RC_JUDGED_CALIBRATED},
              {"TRACE aa/aa2", RC_JUDGED_NOISE},
              {"TRACE resume@6 exact", RC_JUDGED_EXACT},
              {"TRACE resume@6", RC_JUDGED_CALIBRATED},
              {"CENSUS resume@6", RC_JUDGED_EXACT},
              {"RESUME@6.aa→10 exact", RC_JUDGED_EXACT},
              {"RESUME@6.aa→10", RC_JUDGED_CALIBRATED},
              {"TRACE resume@6.aa exact", RC_JUDGED_EXACT},
              {"TRACE resume@6.aa", RC_JUDGED_CALIBRATED},
              {"CENSUS resume@6.aa", RC_JUDGED_EXACT}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const rc_check *c = named(&r, want[i].name);
    CHECK(c && c->judged == want[i].judged, "%s: %s", want[i].name,
          c ? "another kind" : "not planned");
  }
  const rc_check *ex = named(&r, "RESUME@3→10 exact"), *tw = named(&r, "RESUME@3→10");
  CHECK(ex && tw && ex->twin == (int)(tw - r.checks) && tw->is_twin && !ex->is_twin,
        "the exact RESUME check hands its floats to its twin");
  const rc_check *census = named(&r, "CENSUS resume@6.aa"), *state = named(&r, "RESUME@6.aa→10");
  CHECK(census && census->leg_a == 1 && state && state->leg_a == 1 && state->leg_b == 6,
        "resume@6.aa is judged against aa, the leg whose checkpoint it loaded");
  CHECK(!named(&r, "A/A@3"), "no through-vs-save check without a save leg");
  CHECK(rc_run_training_steps(&r) == 3 * 10 + 2 * 7 + 2 * 4, "training steps %lld",
        (long long)rc_run_training_steps(&r));
  rc_run_free(&r);
  /* --resumes 3: resume@K.aa2 from aa2; --resumes 1: one resume leg per K */
  rc_run_opts three = o;
  three.resumes = 3;
  CHECK(!rc_run_plan(&r, &three, &err), "--resumes 3: %s", err.msg);
  CHECK(r.n_legs == 9 && !strcmp(r.legs[5].label, "resume@3.aa2") && r.legs[5].depends_on == 2,
        "--resumes 3: %d legs, the third from aa2", r.n_legs);
  rc_run_free(&r);
  rc_run_opts one = o;
  one.resumes = 1;
  CHECK(!rc_run_plan(&r, &one, &err) && r.n_legs == 5 && !named(&r, "TRACE resume@3.aa"),
        "--resumes 1: 5 legs, got %d", r.n_legs);
  rc_run_free(&r);
  /* refusals: one aa leg, the fusion arms, hashes-only through checkpoints */
  rc_run_opts bad = o;
  bad.aa_count = 1;
  CHECK(rc_run_plan(&r, &bad, &err) == RC_EXIT_USAGE && strstr(err.msg, "--aa 2"), "--aa 1: %s",
        err.msg);
  rc_run_free(&r);
  bad = o, bad.resumes = 4;
  CHECK(rc_run_plan(&r, &bad, &err) == RC_EXIT_USAGE && strstr(err.msg, "--aa 3"),
        "--resumes 4 with --aa 2: %s", err.msg);
  rc_run_free(&r);
  bad = o, bad.noise = RC_NOISE_BYTES, bad.resumes = 2;
  CHECK(rc_run_plan(&r, &bad, &err) == RC_EXIT_USAGE, "--resumes byte for byte");
  rc_run_free(&r);
  bad = o, bad.confirm_arm = true;
  CHECK(rc_run_plan(&r, &bad, &err) == RC_EXIT_USAGE, "--confirm-arm");
  rc_run_free(&r);
  bad = o, bad.through_checkpoints = RC_THROUGH_CKPT_HASHES;
  CHECK(rc_run_plan(&r, &bad, &err) == RC_EXIT_USAGE, "--through-checkpoints hashes");
  rc_run_free(&r);
  /* control: byte for byte, a save leg and byte checks only; --aa 2 gives
   * two aa legs, each against through */
  rc_run_opts bytes = o;
  bytes.noise = RC_NOISE_BYTES;
  CHECK(!rc_run_plan(&r, &bytes, &err), "bytes plan: %s", err.msg);
  bool save = false, judged = false;
  for (int i = 0; i < r.n_legs; i++) save |= !strcmp(r.legs[i].name, "save");
  for (int i = 0; i < r.n_checks; i++) judged |= r.checks[i].judged != RC_JUDGED_BYTES;
  CHECK(save && !judged, "bytes: a save leg %d, a check not judged by bytes %d", save, judged);
  CHECK(named(&r, "A/A@10") && named(&r, "A/A@10 aa2") && !named(&r, "A/A@10 aa/aa2"),
        "bytes --aa 2: A/A@10 and A/A@10 aa2 against through");
  rc_run_free(&r);
}

/* Sets a calibrated check's outcome by hand, as the rule would. */
static void outcome(rc_run *r, const char *name, rc_check_status s) {
  rc_check *c = (rc_check *)named(r, name);
  CHECK(c != NULL, "%s planned", name);
  if (!c) return;
  c->status = s;
  c->have_calib = true;
  c->calib.exceeds = s == RC_CHECK_EXCEEDS_NOISE;
}

/* Reproduced: an excess is decided only when every resume leg at its K
 * exceeds (in its trace or its state), each against its own fresh leg;
 * one leg of two is not decided (not_reproduced), its K's counts filled,
 * another K untouched. Control: the same excess in both legs stays. */
static void test_reproduce(void) {
  rc_run_opts o = calibrated_opts();
  rc_run r;
  rc_err err = {0};
  CHECK(!rc_run_plan(&r, &o, &err), "plan: %s", err.msg);
  const char *within[] = {"RESUME@3→10", "RESUME@3.aa→10", "TRACE resume@3.aa", "RESUME@6.aa→10",
                          "TRACE resume@6.aa"};
  for (size_t i = 0; i < sizeof within / sizeof within[0]; i++)
    outcome(&r, within[i], RC_CHECK_WITHIN_NOISE);
  outcome(&r, "TRACE resume@3", RC_CHECK_EXCEEDS_NOISE); /* one leg of two at 3 */
  outcome(&r, "TRACE resume@6", RC_CHECK_EXCEEDS_NOISE); /* both legs at 6 ... */
  outcome(&r, "RESUME@6→10", RC_CHECK_EXCEEDS_NOISE);
  outcome(&r, "RESUME@6.aa→10", RC_CHECK_EXCEEDS_NOISE); /* ... the other by its state */
  CHECK(!rc_calib_reproduce(&r), "reproduce");
  const rc_check *t3 = named(&r, "TRACE resume@3"), *t3a = named(&r, "TRACE resume@3.aa");
  const rc_check *t6 = named(&r, "TRACE resume@6"), *s6a = named(&r, "RESUME@6.aa→10");
  if (t3 && t3a && t6 && s6a) {
    CHECK(t3->status == RC_CHECK_UNDECIDABLE && t3->calib.not_reproduced && !t3->calib.exceeds &&
              t3->calib.resume_legs == 2 && t3->calib.resume_legs_exceeding == 1,
          "one resume leg of two: not decided (status %d, %d of %d)", (int)t3->status,
          t3->calib.resume_legs_exceeding, t3->calib.resume_legs);
    CHECK(t3a->status == RC_CHECK_WITHIN_NOISE && !t3a->calib.not_reproduced,
          "the leg within the noise stays within");
    CHECK(t6->status == RC_CHECK_EXCEEDS_NOISE && s6a->status == RC_CHECK_EXCEEDS_NOISE &&
              t6->calib.resume_legs_exceeding == 2,
          "control: both resume legs at 6 exceed (one by its trace, one by its state): decided");
  }
  /* confirming legs at 3: from through and aa in turn, each with its checks
   * against its own fresh leg, pending; a second batch numbers on */
  int before = r.n_legs, checks_before = r.n_checks;
  CHECK(!rc_run_plan_confirm(&r, "", 3, 4, &err), "confirm: %s", err.msg);
  const char *conf[] = {"resume@3.2", "resume@3.aa.2", "resume@3.3", "resume@3.aa.3"};
  CHECK(r.n_legs == before + 4 && r.n_checks == checks_before + 4 * 5, "4 legs, 20 checks: %d, %d",
        r.n_legs - before, r.n_checks - checks_before);
  for (int i = 0; i < 4 && before + i < r.n_legs; i++) {
    const rc_leg *l = &r.legs[before + i];
    CHECK(!strcmp(l->label, conf[i]) && l->confirming && l->depends_on == (i % 2) &&
              l->resume_step == 3 && l->state == RC_LEG_PENDING && arg_of(l, "--resume-from"),
          "confirming leg %d: %s from %d", i, l->label, l->depends_on);
  }
  const rc_check *ct = named(&r, "TRACE resume@3.aa.3"), *cs = named(&r, "RESUME@3.aa.3→10");
  CHECK(ct && ct->judged == RC_JUDGED_CALIBRATED && ct->leg_a == 1 &&
            ct->status == RC_CHECK_PENDING && cs && cs->is_twin,
        "a confirming leg's checks: against aa, pending");
  CHECK(!rc_run_plan_confirm(&r, "", 3, 2, &err) &&
            !strcmp(r.legs[r.n_legs - 2].label, "resume@3.4"),
        "a second batch numbers on: %s", r.legs[r.n_legs - 2].label);
  CHECK(rc_run_plan_confirm(&r, "", 5, 2, &err) == RC_EXIT_SOFTWARE, "no resume leg at 5");
  char text[2048], hint[512];
  int check = -1;
  CHECK(rc_calib_verdict(&r, text, sizeof text, hint, sizeof hint, &check) ==
            RC_CHECK_EXCEEDS_NOISE,
        "the reproduced excess decides the verdict: %s", text);
  /* without the reproduced one, the verdict is not decided and says why */
  outcome(&r, "TRACE resume@6", RC_CHECK_WITHIN_NOISE);
  outcome(&r, "RESUME@6→10", RC_CHECK_WITHIN_NOISE);
  outcome(&r, "RESUME@6.aa→10", RC_CHECK_EXCEEDS_NOISE);
  CHECK(!rc_calib_reproduce(&r), "reproduce again");
  CHECK(rc_calib_verdict(&r, text, sizeof text, hint, sizeof hint, &check) ==
                RC_CHECK_UNDECIDABLE &&
            strstr(text, "not reproduced") && strstr(hint, "--resumes"),
        "an excess in one leg only: %s / %s", text, hint);
  rc_run_free(&r);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_kinds();
  test_rule();
  test_state_rule();
  test_split();
  test_plan();
  test_reproduce();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok: column kinds, declarations, the trace rule (within, exceeds, the 2j horizon, "
         "agreeing fresh runs, floor, at the floor, undecidable), the state rule, the state split, "
         "the calibrated plan\n");
  return 0;
}
