/* test_run_plan.c — the shape of a run (docs/design.md §6) without training
 * anything: which legs exist, what each is told (steps, stop, saves, resume
 * directory, forwarded flags), what it waits for, and which checks compare
 * what — for one K, a chain, every K, --aa, both fusion arms, and exec
 * templates. Also --save-at parsing, each accepted form beside a rejected
 * one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run.h"

#include "check.h"

/* The value after flag in a leg's argv, NULL if the flag is absent. */
static const char *arg_of(const rc_leg *l, const char *flag) {
  for (int i = 0; i + 1 < l->argc; i++)
    if (!strcmp(l->argv[i], flag)) return l->argv[i + 1];
  return NULL;
}

static bool has_word(const rc_leg *l, const char *word) {
  for (int i = 0; i < l->argc; i++)
    if (!strcmp(l->argv[i], word)) return true;
  return false;
}

static int leg_index(const rc_run *r, const char *label) {
  for (int i = 0; i < r->n_legs; i++)
    if (!strcmp(r->legs[i].label, label)) return i;
  return -1;
}

static const rc_check *check_named(const rc_run *r, const char *name) {
  for (int i = 0; i < r->n_checks; i++)
    if (!strcmp(r->checks[i].name, name)) return &r->checks[i];
  return NULL;
}

static bool str_eq(const char *a, const char *b) {
  return a && b && !strcmp(a, b);
}

static void test_parse_save_at(void) {
  int64_t *v = NULL;
  int n = 0;
  rc_save_at_mode every = RC_SAVE_AT_LIST;
  rc_err err = {0};
  CHECK(rc_run_parse_save_at("5", 10, &v, &n, &every, &err) == 0 && n == 1 && v[0] == 5 &&
            every == RC_SAVE_AT_LIST,
        "5 of 10");
  free(v);
  CHECK(rc_run_parse_save_at("6,3", 10, &v, &n, &every, &err) == 0 && n == 2 && v[0] == 3 &&
            v[1] == 6,
        "a chain is sorted");
  free(v);
  CHECK(rc_run_parse_save_at("every", 4, &v, &n, &every, &err) == 0 && n == 3 &&
            every == RC_SAVE_AT_EVERY && v[0] == 1 && v[2] == 3,
        "every = 1..N-1");
  free(v);
  const char *bad[] = {"0", "10", "11", "3,3", "a", "3,", ",3", "-1", "", "3;4", " 3", "+3", "3x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = NULL;
    int rc = rc_run_parse_save_at(bad[i], 10, &v, &n, &every, &err);
    CHECK(rc == RC_EXIT_USAGE, "--save-at '%s' with N=10 must be a usage error (got %d)", bad[i],
          rc);
    free(v);
  }
  v = NULL;
  CHECK(rc_run_parse_save_at("1", 1, &v, &n, &every, &err) == RC_EXIT_USAGE, "N=1 cannot resume");
  free(v);
  CHECK(rc_run_parse_save_at("auto", 10, &v, &n, &every, &err) == 0 && every == RC_SAVE_AT_AUTO &&
            n == 0 && !v,
        "auto: chosen later");
  CHECK(rc_run_parse_save_at("autos", 10, &v, &n, &every, &err) == RC_EXIT_USAGE,
        "auto is a word, not a prefix");
  free(v);
}

static char *FWD[] = {"--preset", "tiny", "--seed", "7"};

static rc_run_opts base_opts(int64_t *ks, int nk) {
  rc_run_opts o;
  memset(&o, 0, sizeof o);
  o.steps = 10;
  o.save_at = ks;
  o.n_save_at = nk;
  o.out_dir = "/out dir";
  o.jobs = 2;
  o.trainer = RC_TRAINER_SELF;
  o.self_exe = "/bin/resumecheck";
  o.fwd = FWD;
  o.n_fwd = 4;
  return o;
}

static void test_single_k(void) {
  int64_t ks[] = {5};
  rc_run_opts o = base_opts(ks, 1);
  rc_run r;
  rc_err err = {0};
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  CHECK(r.n_legs == 3, "three legs, got %d", r.n_legs);
  int t = leg_index(&r, "through"), s = leg_index(&r, "save"), m = leg_index(&r, "resume@5");
  CHECK(t >= 0 && s >= 0 && m >= 0, "legs through, save, resume@5");
  if (t < 0 || s < 0 || m < 0) return;
  const rc_leg *T = &r.legs[t], *S = &r.legs[s], *M = &r.legs[m];
  /* forwarded flags come verbatim, in order, right after `train` */
  CHECK(!strcmp(T->argv[0], "/bin/resumecheck") && !strcmp(T->argv[1], "train"), "argv head");
  for (int i = 0; i < 4; i++) CHECK(!strcmp(T->argv[2 + i], FWD[i]), "forwarded word %d", i);
  CHECK(str_eq(arg_of(T, "--steps"), "10") && str_eq(arg_of(T, "--save-at"), "5,10") &&
            !arg_of(T, "--stop-at") && !arg_of(T, "--resume-from"),
        "through: 0→10 saving 5,10");
  CHECK(str_eq(arg_of(S, "--steps"), "10") && str_eq(arg_of(S, "--stop-at"), "5") &&
            str_eq(arg_of(S, "--save-at"), "5"),
        "save keeps the horizon N=10, stops at 5");
  CHECK(str_eq(arg_of(M, "--resume-from"), "/out dir/save/ckpt/iter_0000005") &&
            str_eq(arg_of(M, "--save-at"), "10") && !arg_of(M, "--stop-at"),
        "resume from save@5 to 10 (got %s)", arg_of(M, "--resume-from"));
  CHECK(str_eq(arg_of(M, "--out"), "/out dir/resume@5") && str_eq(arg_of(M, "--leg"), "resume@5"),
        "each leg its own directory");
  CHECK(T->depends_on < 0 && S->depends_on < 0 && M->depends_on == s, "resume waits for save");
  CHECK(!strcmp(M->log_path, "/out dir/resume@5/log.txt"), "log path");
  CHECK(r.n_checks == 5, "5 checks, got %d", r.n_checks);
  const rc_check *aa = check_named(&r, "A/A@5"), *res = check_named(&r, "RESUME@5→10");
  CHECK(aa && aa->cls == RC_CLASS_AA && aa->leg_a == t && aa->leg_b == s &&
            !strcmp(aa->path_b, "/out dir/save/ckpt/iter_0000005"),
        "A/A@5 = through@5 vs save@5");
  CHECK(res && res->cls == RC_CLASS_RESUME && res->leg_b == m && res->step == 10 &&
            !strcmp(res->path_a, "/out dir/through/ckpt/iter_0000010"),
        "RESUME@5→10 = through@10 vs resume@10");
  const rc_check *ts = check_named(&r, "TRACE save"), *tr = check_named(&r, "TRACE resume@5");
  CHECK(ts && ts->what == RC_CHECK_TRACE && ts->cls == RC_CLASS_AA && ts->trace_from == 1 &&
            ts->trace_to == 5,
        "trace through vs save over 1..5");
  CHECK(tr && tr->cls == RC_CLASS_RESUME && tr->trace_from == 6 && tr->trace_to == 10,
        "trace through vs resume over 6..10");
  const rc_check *cs = check_named(&r, "CENSUS resume@5");
  CHECK(cs && cs->what == RC_CHECK_CENSUS && cs->cls == RC_CLASS_RESUME && cs->leg_a == t &&
            cs->leg_b == m && cs->step == 5 && !strcmp(cs->path_a, "/out dir/through/census") &&
            !strcmp(cs->path_b, "/out dir/resume@5/census"),
        "census through@5 vs resume@5 after its load");
  CHECK(!check_named(&r, "ARMS@10"), "no arms check without --confirm-arm");
  rc_run_free(&r);
}

static void test_chain(void) {
  int64_t ks[] = {3, 6};
  rc_run_opts o = base_opts(ks, 2);
  rc_run r;
  rc_err err = {0};
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  int s = leg_index(&r, "save"), a = leg_index(&r, "resume@3"), b = leg_index(&r, "resume@6");
  CHECK(r.n_legs == 4 && s >= 0 && a >= 0 && b >= 0, "through, save, resume@3, resume@6");
  if (s < 0 || a < 0 || b < 0) return;
  CHECK(str_eq(arg_of(&r.legs[leg_index(&r, "through")], "--save-at"), "3,6,10"),
        "through saves at every K and N");
  CHECK(str_eq(arg_of(&r.legs[s], "--stop-at"), "3"), "save stops at the first K");
  CHECK(r.legs[a].depends_on == s && str_eq(arg_of(&r.legs[a], "--stop-at"), "6") &&
            str_eq(arg_of(&r.legs[a], "--save-at"), "6"),
        "resume@3 runs to 6 and saves there");
  CHECK(r.legs[b].depends_on == a &&
            str_eq(arg_of(&r.legs[b], "--resume-from"), "/out dir/resume@3/ckpt/iter_0000006") &&
            !arg_of(&r.legs[b], "--stop-at"),
        "resume@6 continues from resume@3's checkpoint to N");
  CHECK(check_named(&r, "RESUME@3→6") && check_named(&r, "RESUME@6→10"), "one check per link");
  const rc_check *t6 = check_named(&r, "TRACE resume@6");
  CHECK(t6 && t6->trace_from == 7 && t6->trace_to == 10, "link trace over 7..10");
  rc_run_free(&r);
}

static void test_every_and_aa(void) {
  int64_t ks[] = {1, 2, 3};
  rc_run_opts o = base_opts(ks, 3);
  o.steps = 4;
  o.save_every = true;
  o.aa = true;
  rc_run r;
  rc_err err = {0};
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  int s = leg_index(&r, "save"), aa = leg_index(&r, "aa");
  CHECK(r.n_legs == 6 && s >= 0 && aa >= 0, "through, save, aa, 3 resume legs (got %d)", r.n_legs);
  if (s < 0 || aa < 0) return;
  CHECK(str_eq(arg_of(&r.legs[s], "--stop-at"), "3") &&
            str_eq(arg_of(&r.legs[s], "--save-at"), "1,2,3"),
        "one save leg saving at every K < N");
  CHECK(str_eq(arg_of(&r.legs[leg_index(&r, "through")], "--save-at"), "1,2,3,4"),
        "through saves every step");
  for (int k = 1; k <= 3; k++) {
    char name[32], want[64];
    snprintf(name, sizeof name, "resume@%d", k);
    snprintf(want, sizeof want, "/out dir/save/ckpt/iter_%07d", k);
    int m = leg_index(&r, name);
    CHECK(m >= 0 && r.legs[m].depends_on == s && str_eq(arg_of(&r.legs[m], "--resume-from"), want),
          "%s resumes from save@%d", name, k);
    snprintf(name, sizeof name, "A/A@%d", k);
    CHECK(check_named(&r, name), "%s", name);
  }
  const rc_check *c = check_named(&r, "A/A@4");
  CHECK(c && c->leg_b == aa && c->cls == RC_CLASS_AA, "aa gives A/A at N");
  CHECK(str_eq(arg_of(&r.legs[aa], "--save-at"), "1,2,3,4") && !arg_of(&r.legs[aa], "--stop-at"),
        "aa runs exactly like through");
  rc_run_free(&r);
}

/* "5:1,6:2" for points (step:reasons) to compare against a wanted string. */
static void points_str(const rc_auto_point *p, int n, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld:%u", i ? "," : "", (long long)p[i].step,
                            p[i].why);
}

static void test_auto_points(void) {
  rc_auto_point p[RC_AUTO_MAX];
  char got[256], why[512];
  const unsigned O = RC_AUTO_ODD, E = RC_AUTO_EVEN, W = RC_AUTO_AFTER_WARMUP, L = RC_AUTO_LAST,
                 S = RC_AUTO_SKIPPED, A = RC_AUTO_ABSORBED;
  char want[256];
  /* no skips: an odd and an even K at N/2, warmup + 1, N-1 */
  int n = rc_run_auto_save_points(10, 2, NULL, NULL, 0, p);
  points_str(p, n, got, sizeof got);
  snprintf(want, sizeof want, "3:%u,5:%u,6:%u,9:%u", W, O, E, L);
  CHECK(!strcmp(got, want), "N=10 warmup 2: %s, want %s", got, want);
  rc_run_auto_describe(p, n, why, sizeof why);
  CHECK(!strcmp(why, "3 (first after warmup), 5 (odd), 6 (even), 9 (N-1)"), "described: %s", why);
  /* a skipped step whose overflow the hysteresis absorbed is preferred to an
   * earlier one that halved the scale (negative control: without the
   * absorbed flags the first skipped step is taken) */
  int64_t sk[] = {2, 4, 7, 8};
  bool ab[] = {false, true, true, false}, none[] = {false, false, false, false};
  n = rc_run_auto_save_points(10, 0, sk, ab, 4, p);
  points_str(p, n, got, sizeof got);
  snprintf(want, sizeof want, "4:%u,5:%u,6:%u,9:%u", S | A, O, E, L);
  CHECK(!strcmp(got, want), "absorbed skip at 4: %s, want %s", got, want);
  n = rc_run_auto_save_points(10, 0, sk, none, 4, p);
  points_str(p, n, got, sizeof got);
  snprintf(want, sizeof want, "2:%u,5:%u,6:%u,9:%u", S, O, E, L);
  CHECK(!strcmp(got, want), "no absorbed skip: the first, 2: %s, want %s", got, want);
  rc_run_auto_describe(p, n, why, sizeof why);
  CHECK(!strcmp(why, "2 (skipped fp16 step), 5 (odd), 6 (even), 9 (N-1)"), "described: %s", why);
  /* a skipped step already chosen adds its reason, not a point */
  int64_t sk5[] = {5};
  bool ab5[] = {true};
  n = rc_run_auto_save_points(10, 2, sk5, ab5, 1, p);
  points_str(p, n, got, sizeof got);
  snprintf(want, sizeof want, "3:%u,5:%u,6:%u,9:%u", W, O | S | A, E, L);
  CHECK(!strcmp(got, want), "skip at 5 merges: %s, want %s", got, want);
  rc_run_auto_describe(p, n, why, sizeof why);
  CHECK(strstr(why, "5 (odd, skipped fp16 step, its overflow absorbed by the hysteresis)"),
        "merged reasons: %s", why);
  /* a skip at N cannot be resumed after; all five reasons on separate K */
  int64_t sk10[] = {1, 10};
  bool ab10[] = {false, true};
  n = rc_run_auto_save_points(10, 6, sk10, ab10, 2, p);
  points_str(p, n, got, sizeof got);
  snprintf(want, sizeof want, "1:%u,5:%u,6:%u,7:%u,9:%u", S, O, E, W, L);
  CHECK(n == 5 && !strcmp(got, want), "skip at N ignored: %s, want %s", got, want);
  /* short horizons: everything within 1..N-1, warmup + 1 = N dropped */
  n = rc_run_auto_save_points(2, 1, NULL, NULL, 0, p);
  points_str(p, n, got, sizeof got);
  snprintf(want, sizeof want, "1:%u", O | L);
  CHECK(!strcmp(got, want), "N=2: %s, want %s", got, want);
  n = rc_run_auto_save_points(3, 2, NULL, NULL, 0, p);
  points_str(p, n, got, sizeof got);
  snprintf(want, sizeof want, "1:%u,2:%u", O, E | L);
  CHECK(!strcmp(got, want), "N=3: %s, want %s", got, want);
  n = rc_run_auto_save_points(11, 0, NULL, NULL, 0, p);
  points_str(p, n, got, sizeof got);
  snprintf(want, sizeof want, "5:%u,6:%u,10:%u", O, E, L);
  CHECK(!strcmp(got, want), "N=11, no warmup: %s, want %s", got, want);
  CHECK(rc_run_auto_save_points(1, 0, NULL, NULL, 0, p) == 0, "N=1: nothing to resume");
  /* the config's points: the end of the first data epoch (5 steps an epoch:
   * K = 5, merged with odd) and N - W for a growth window of 3 (K = 7);
   * every point of five reasons plus both make seven, RC_AUTO_MAX */
  const unsigned P = RC_AUTO_EPOCH_END, G = RC_AUTO_GROWTH_WINDOW;
  n = rc_run_auto_save_points(10, 2, NULL, NULL, 0, p);
  n = rc_run_auto_add_config_points(p, n, 10, 5, 3);
  points_str(p, n, got, sizeof got);
  snprintf(want, sizeof want, "3:%u,5:%u,6:%u,7:%u,9:%u", W, O | P, E, G, L);
  CHECK(!strcmp(got, want), "epoch of 5 steps, window 3: %s, want %s", got, want);
  rc_run_auto_describe(p, n, why, sizeof why);
  CHECK(strstr(why, "5 (odd, last step of a data epoch)") &&
            strstr(why, "7 (a full loss-scale growth window before N)"),
        "described: %s", why);
  n = rc_run_auto_save_points(10, 6, sk10, ab10, 2, p);
  n = rc_run_auto_add_config_points(p, n, 10, 2, 2);
  CHECK(n == RC_AUTO_MAX, "seven points: %d", n);
  /* negative control: no epochs, an epoch as long as the run, a window that
   * leaves no step before it: nothing added */
  n = rc_run_auto_save_points(10, 2, NULL, NULL, 0, p);
  int before = n;
  n = rc_run_auto_add_config_points(p, n, 10, 0, 0);
  n = rc_run_auto_add_config_points(p, n, 10, 10, 10);
  n = rc_run_auto_add_config_points(p, n, 10, 12, 1000);
  CHECK(n == before, "nothing to add: %d points, was %d", n, before);
}

/* auto plans like every: one save leg saving at each K, one resume leg per K
 * from save@K to N, an A/A check per K (negative control: the same points
 * as a plain list make a chain) */
static void test_auto_plan(void) {
  int64_t ks[] = {3, 5, 6, 9};
  rc_run_opts o = base_opts(ks, 4);
  o.save_auto = true;
  snprintf(o.save_at_why, sizeof o.save_at_why, "3 (first after warmup)");
  rc_run r;
  rc_err err = {0};
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  int s = leg_index(&r, "save");
  CHECK(r.n_legs == 6 && s >= 0, "through, save, 4 resume legs (got %d)", r.n_legs);
  if (s < 0) return;
  CHECK(str_eq(arg_of(&r.legs[s], "--stop-at"), "9") &&
            str_eq(arg_of(&r.legs[s], "--save-at"), "3,5,6,9"),
        "one save leg to the last K saving at each");
  for (int i = 0; i < 4; i++) {
    char name[32], want[64];
    snprintf(name, sizeof name, "resume@%d", (int)ks[i]);
    snprintf(want, sizeof want, "/out dir/save/ckpt/iter_%07d", (int)ks[i]);
    int m = leg_index(&r, name);
    CHECK(m >= 0 && r.legs[m].depends_on == s &&
              str_eq(arg_of(&r.legs[m], "--resume-from"), want) && !arg_of(&r.legs[m], "--stop-at"),
          "%s resumes from save@%d and runs to N", name, (int)ks[i]);
    snprintf(name, sizeof name, "A/A@%d", (int)ks[i]);
    CHECK(check_named(&r, name), "%s", name);
  }
  CHECK(!strcmp(r.opts.save_at_why, "3 (first after warmup)"), "the reasons travel with the run");
  rc_run_free(&r);
  o.save_auto = false;
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  CHECK(check_named(&r, "RESUME@3→5") && !check_named(&r, "A/A@5"),
        "a plain list is a chain (control)");
  rc_run_free(&r);
}

static void test_confirm_arm(void) {
  int64_t ks[] = {5};
  rc_run_opts o = base_opts(ks, 1);
  o.confirm_arm = true;
  rc_run r;
  rc_err err = {0};
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  CHECK(r.n_legs == 6, "three legs per arm, got %d", r.n_legs);
  int on = leg_index(&r, "fusion-on/through"), off = leg_index(&r, "fusion-off/through");
  int ron = leg_index(&r, "fusion-on/resume@5");
  CHECK(on >= 0 && off >= 0 && ron >= 0, "arm-prefixed labels");
  if (on < 0 || off < 0 || ron < 0) return;
  CHECK(str_eq(arg_of(&r.legs[on], "--grad-accum-fusion"), "on") &&
            str_eq(arg_of(&r.legs[off], "--grad-accum-fusion"), "off"),
        "each arm sets the fusion flag");
  CHECK(!strcmp(r.legs[on].dir, "/out dir/fusion-on/through"), "arm directories");
  CHECK(str_eq(arg_of(&r.legs[ron], "--resume-from"), "/out dir/fusion-on/save/ckpt/iter_0000005"),
        "an arm resumes from its own save leg");
  const rc_check *arms = check_named(&r, "ARMS@10");
  CHECK(arms && arms->cls == RC_CLASS_ARMS && arms->leg_a == on && arms->leg_b == off &&
            arms->n_ignore == 3,
        "ARMS@10 compares the arms' through@N, ignoring the config in /meta and the manifest");
  CHECK(check_named(&r, "fusion-on/A/A@5") && check_named(&r, "fusion-off/RESUME@5→10"),
        "every check exists in both arms");
  rc_run_free(&r);
}

static void test_exec(void) {
  int64_t ks[] = {5};
  rc_run_opts o = base_opts(ks, 1);
  o.fwd = NULL;
  o.n_fwd = 0;
  o.trainer = RC_TRAINER_EXEC;
  o.train_cmd = "python3 'my train.py' --max {steps} --stop {stop_at} --ckpt-steps {save_at} "
                "--load={resume_from} --dir {out}";
  rc_run r;
  rc_err err = {0};
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  int s = leg_index(&r, "save"), m = leg_index(&r, "resume@5"), t = leg_index(&r, "through");
  if (s < 0 || m < 0 || t < 0) {
    CHECK(0, "legs missing");
    return;
  }
  CHECK(!strcmp(r.legs[s].argv[1], "my train.py"), "template quoting respected");
  CHECK(str_eq(arg_of(&r.legs[s], "--stop"), "5") && str_eq(arg_of(&r.legs[t], "--stop"), "10"),
        "{stop_at} is the leg's last step (N when it runs to the end)");
  CHECK(has_word(&r.legs[m], "--load=/out dir/save/ckpt/iter_0000005") &&
            !has_word(&r.legs[t], "--load="),
        "{resume_from}: kept for resume legs, its word dropped for fresh legs");
  rc_run_free(&r);

  o.train_cmd = "train --steps {steps} --load={resume_from}";
  CHECK(rc_run_plan(&r, &o, &err) == RC_EXIT_USAGE && strstr(err.msg, "{out}"),
        "a template without {out} is refused");
  rc_run_free(&r);
  o.train_cmd = "train --out {out}";
  CHECK(rc_run_plan(&r, &o, &err) == RC_EXIT_USAGE && strstr(err.msg, "{resume_from}"),
        "a template without {resume_from} is refused");
  rc_run_free(&r);
  o.train_cmd = "train --out {out} --load={resume_from}";
  o.confirm_arm = true;
  CHECK(rc_run_plan(&r, &o, &err) == RC_EXIT_USAGE && strstr(err.msg, "{fusion}"),
        "--confirm-arm with exec needs {fusion}");
  rc_run_free(&r);
  o.train_cmd = "train --out {out} --load={resume_from} --fusion {fusion}";
  CHECK(rc_run_plan(&r, &o, &err) == 0, "with {fusion} it plans: %s", err.msg);
  int off = leg_index(&r, "fusion-off/save");
  CHECK(off >= 0 && str_eq(arg_of(&r.legs[off], "--fusion"), "off"), "{fusion} = off");
  rc_run_free(&r);
}

/* --gpu-scheduling: the default turns critical-first on only for CUDA legs
 * with --jobs > 1 and the built-in trainer; the explicit values win; an
 * exec trainer refuses critical-first; save and resume legs are high,
 * through and aa low, and the planned argv never holds --step-lock (the
 * repro line). */
static void test_gpu_scheduling(void) {
  int64_t ks[] = {3, 6};
  rc_run_opts o = base_opts(ks, 2);
  o.aa = true;
  rc_run r;
  rc_err err = {0};
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  CHECK(!rc_run_critical_first(&r), "default, device unknown: shared");
  snprintf(r.legs_device, sizeof r.legs_device, "cpu");
  CHECK(!rc_run_critical_first(&r), "default on the CPU: shared");
  snprintf(r.legs_device, sizeof r.legs_device, "cuda");
  CHECK(rc_run_critical_first(&r), "default on CUDA with --jobs 2: critical-first");
  r.opts.jobs = 1;
  CHECK(!rc_run_critical_first(&r), "default with --jobs 1: shared");
  r.opts.gpu_scheduling = RC_GPU_SCHED_CRITICAL_FIRST;
  snprintf(r.legs_device, sizeof r.legs_device, "cpu");
  CHECK(rc_run_critical_first(&r), "explicit critical-first applies on the CPU too");
  r.opts.jobs = 4;
  r.opts.gpu_scheduling = RC_GPU_SCHED_SHARED;
  snprintf(r.legs_device, sizeof r.legs_device, "cuda");
  CHECK(!rc_run_critical_first(&r), "explicit shared on CUDA: shared");
  static const char *const want[][2] = {{"through", "low"},
                                        {"save", "high"},
                                        {"aa", "low"},
                                        {"resume@3", "high"},
                                        {"resume@6", "high"}};
  for (int i = 0; i < 5; i++) {
    int k = leg_index(&r, want[i][0]);
    CHECK(k >= 0 && !strcmp(rc_step_priority_name(rc_leg_step_priority(&r.legs[k])), want[i][1]),
          "%s has priority %s", want[i][0], want[i][1]);
    CHECK(k >= 0 && !has_word(&r.legs[k], "--step-lock"), "%s: no --step-lock in the planned argv",
          want[i][0]);
  }
  CHECK(!strcmp(rc_run_gpu_scheduling_name(&r), "shared"), "no lock file yet: shared");
  rc_run_free(&r);
  o.trainer = RC_TRAINER_EXEC;
  o.train_cmd = "t --out {out} --resume-from {resume_from}";
  o.gpu_scheduling = RC_GPU_SCHED_CRITICAL_FIRST;
  CHECK(rc_run_plan(&r, &o, &err) == RC_EXIT_USAGE && strstr(err.msg, "--gpu-scheduling"),
        "exec trainer with critical-first: usage error (%s)", err.msg);
  rc_run_free(&r);
}

/* --through-checkpoints: with hashes the through legs (each arm's) get
 * --save-hashes-at with every K < N, no other leg does; on-demand also
 * --save-deferred-at N, the through leg only; auto resolves to on-demand on
 * CUDA (hashes with --confirm-arm, whose ARMS@N needs the shards), full on
 * the CPU; full and the exec trainer never get either. */
static void test_through_checkpoints(void) {
  int64_t ks[] = {3, 6};
  rc_err err = {0};
  static const char *const names[] = {"on-demand", "full", "hashes", "on-demand"};
  for (int mode = 0; mode < 4; mode++) {
    rc_run_opts o = base_opts(ks, 2);
    o.aa = true;
    o.through_checkpoints = mode == 0   ? RC_THROUGH_CKPT_AUTO
                            : mode == 1 ? RC_THROUGH_CKPT_FULL
                            : mode == 2 ? RC_THROUGH_CKPT_HASHES
                                        : RC_THROUGH_CKPT_ON_DEMAND;
    rc_run r;
    CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
    int t = leg_index(&r, "through");
    bool hashes = mode >= 2, deferred = mode == 3;
    CHECK(t >= 0 && (hashes ? str_eq(arg_of(&r.legs[t], "--save-hashes-at"), "3,6")
                            : !arg_of(&r.legs[t], "--save-hashes-at")),
          "mode %d, planned: through %s", mode, hashes ? "hashes at 3,6" : "full");
    CHECK(deferred ? str_eq(arg_of(&r.legs[t], "--save-deferred-at"), "10")
                   : !arg_of(&r.legs[t], "--save-deferred-at"),
          "mode %d, planned: through %s at 10", mode, deferred ? "deferred" : "not deferred");
    for (int i = 0; i < r.n_legs; i++)
      CHECK(i == t || (!arg_of(&r.legs[i], "--save-hashes-at") &&
                       !arg_of(&r.legs[i], "--save-deferred-at")),
            "mode %d: %s keeps its shards", mode, r.legs[i].name);
    snprintf(r.legs_device, sizeof r.legs_device, "cuda");
    CHECK(rc_run_resolve_through_checkpoints(&r, &err) == 0, "%s", err.msg);
    t = leg_index(&r, "through");
    hashes = mode != 1, deferred = mode == 0 || mode == 3;
    CHECK(hashes ? str_eq(arg_of(&r.legs[t], "--save-hashes-at"), "3,6")
                 : !arg_of(&r.legs[t], "--save-hashes-at"),
          "mode %d on CUDA: through %s", mode, hashes ? "hashes at 3,6" : "full");
    CHECK(deferred ? str_eq(arg_of(&r.legs[t], "--save-deferred-at"), "10") &&
                         r.legs[t].deferred_step == 10
                   : !arg_of(&r.legs[t], "--save-deferred-at") && r.legs[t].deferred_step == 0,
          "mode %d on CUDA: N %s", mode, deferred ? "deferred" : "not deferred");
    CHECK(!strcmp(rc_run_through_checkpoints_name(&r), names[mode]), "mode %d: name %s", mode,
          rc_run_through_checkpoints_name(&r));
    rc_run_free(&r);
  }
  /* auto with --confirm-arm on CUDA: hashes at K, the shards at N */
  rc_run_opts o = base_opts(ks, 2);
  o.confirm_arm = true;
  rc_run r;
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  snprintf(r.legs_device, sizeof r.legs_device, "cuda");
  CHECK(rc_run_resolve_through_checkpoints(&r, &err) == 0, "%s", err.msg);
  int deferring = 0;
  for (int i = 0; i < r.n_legs; i++) deferring += arg_of(&r.legs[i], "--save-deferred-at") != NULL;
  CHECK(deferring == 0 && !strcmp(rc_run_through_checkpoints_name(&r), "hashes"),
        "auto with --confirm-arm on CUDA: hashes, nothing deferred (%d, %s)", deferring,
        rc_run_through_checkpoints_name(&r));
  rc_run_free(&r);
  /* on-demand with --confirm-arm is refused */
  o.through_checkpoints = RC_THROUGH_CKPT_ON_DEMAND;
  CHECK(rc_run_plan(&r, &o, &err) == RC_EXIT_USAGE && strstr(err.msg, "ARMS@N"),
        "on-demand with --confirm-arm: 64 (%s)", err.msg);
  rc_run_free(&r);
  /* auto on the CPU stays full */
  o = base_opts(ks, 2);
  CHECK(rc_run_plan(&r, &o, &err) == 0, "%s", err.msg);
  snprintf(r.legs_device, sizeof r.legs_device, "cpu");
  CHECK(rc_run_resolve_through_checkpoints(&r, &err) == 0 &&
            !arg_of(&r.legs[leg_index(&r, "through")], "--save-hashes-at") &&
            !arg_of(&r.legs[leg_index(&r, "through")], "--save-deferred-at"),
        "auto on the CPU: full");
  rc_run_free(&r);
  /* the exec trainer does not know the flag */
  o.trainer = RC_TRAINER_EXEC;
  o.train_cmd = "t {out} {resume_from}";
  o.through_checkpoints = RC_THROUGH_CKPT_HASHES;
  CHECK(rc_run_plan(&r, &o, &err) == RC_EXIT_USAGE && strstr(err.msg, "built-in trainer"),
        "hashes with an exec trainer: 64 (%s)", err.msg);
  rc_run_free(&r);
}

int main(void) {
  test_parse_save_at();
  test_single_k();
  test_chain();
  test_every_and_aa();
  test_auto_points();
  test_auto_plan();
  test_confirm_arm();
  test_exec();
  test_gpu_scheduling();
  test_through_checkpoints();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("run_plan: ok\n");
  return 0;
}
