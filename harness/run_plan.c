/* run_plan.c — which legs a run needs, with which arguments, and which
 * checks compare what (docs/design.md §6). Pure planning: no files, no processes,
 * so the shape of every run (single K, chains, every K, A/A, both fusion
 * arms) is unit-tested without training anything.
 *
 * Per arm:
 *   through   1..N, saves at every K and at N
 *   save      1..K1 (horizon N), saves at K1; with "every" or "auto" (independent
 *             points): 1..the last K, saving at each K
 *   resume@K  from the checkpoint at K to the next K (chain link) or N;
 *             with "every" or "auto": one per K, each from save@K to N
 *   aa        a second `through`, for A/A at N (--aa)
 * Checks per arm: A/A@K (through vs save), RESUME@K→M (through vs the leg
 * that resumed at K, at its last step M), A/A@N against aa, and a trace
 * check beside each leg that is compared with through. */
#include "run.h"
#include "io/layout.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *rc_leg_state_name(rc_leg_state s) {
  switch (s) {
  case RC_LEG_PENDING:
    return "pending";
  case RC_LEG_RUNNING:
    return "running";
  case RC_LEG_OK:
    return "ok";
  case RC_LEG_FAILED:
    return "failed";
  case RC_LEG_KILLED:
    return "killed";
  case RC_LEG_SKIPPED:
    return "skipped";
  }
  return "?";
}

const char *rc_check_status_name(rc_check_status s) {
  switch (s) {
  case RC_CHECK_PENDING:
    return "pending";
  case RC_CHECK_IDENTICAL:
    return "identical";
  case RC_CHECK_DIFFERS:
    return "differs";
  case RC_CHECK_SKIPPED:
    return "skipped";
  case RC_CHECK_ERROR:
    return "error";
  case RC_CHECK_WITHIN_NOISE:
    return "within-noise";
  case RC_CHECK_EXCEEDS_NOISE:
    return "exceeds-noise";
  case RC_CHECK_UNDECIDABLE:
    return "inconclusive";
  case RC_CHECK_NOISE_MEASURED:
    return "noise-measured";
  }
  return "?";
}

const char *rc_check_class_name(rc_check_class c) {
  switch (c) {
  case RC_CLASS_AA:
    return "aa";
  case RC_CLASS_RESUME:
    return "resume";
  case RC_CLASS_ARMS:
    return "arms";
  }
  return "?";
}

const char *rc_mechanism_name(rc_mechanism m) {
  switch (m) {
  case RC_MECH_NONE:
    return "none";
  case RC_MECH_CONFIRMED:
    return "confirmed";
  case RC_MECH_NOT_CONFIRMED:
    return "not-confirmed";
  case RC_MECH_NOTHING:
    return "nothing-to-confirm";
  case RC_MECH_INCONCLUSIVE:
    return "inconclusive";
  }
  return "?";
}

bool rc_run_critical_first(const rc_run *run) {
  const rc_run_opts *o = &run->opts;
  if (o->trainer != RC_TRAINER_SELF || o->gpu_scheduling == RC_GPU_SCHED_SHARED) return false;
  if (o->gpu_scheduling == RC_GPU_SCHED_CRITICAL_FIRST) return true;
  return o->jobs > 1 && !strcmp(run->legs_device, "cuda");
}

rc_step_priority rc_leg_step_priority(const rc_leg *leg) {
  return !strcmp(leg->name, "through") || !strcmp(leg->name, "aa") ? RC_STEP_PRIORITY_LOW
                                                                   : RC_STEP_PRIORITY_HIGH;
}

const char *rc_run_gpu_scheduling_name(const rc_run *run) {
  return run->step_lock[0] ? "critical-first" : "shared";
}

void rc_leg_range(const rc_leg *leg, char *buf, size_t cap) {
  snprintf(buf, cap, "%" PRId64 "→%" PRId64, leg->resume_step, leg->last_step);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int rc_run_parse_save_at(const char *s, int64_t steps, int64_t **out, int *n, rc_save_at_mode *mode,
                         rc_err *err) {
  *out = NULL;
  *n = 0;
  *mode = RC_SAVE_AT_LIST;
  if (steps < 2)
    return rc_fail(err, RC_EXIT_USAGE, "--steps must be at least 2 to save and resume");
  if (!strcmp(s, "auto")) {
    *mode = RC_SAVE_AT_AUTO;
    return RC_OK;
  }
  if (!strcmp(s, "every")) {
    int64_t *v = malloc((size_t)(steps - 1) * sizeof *v);
    if (!v) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    for (int64_t k = 1; k < steps; k++) v[k - 1] = k;
    *out = v;
    *n = (int)(steps - 1);
    *mode = RC_SAVE_AT_EVERY;
    return RC_OK;
  }
  int cap = 1;
  for (const char *p = s; *p; p++) cap += *p == ',';
  int64_t *v = malloc((size_t)cap * sizeof *v);
  if (!v) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  int m = 0;
  const char *p = s;
  for (;;) {
    char *end = NULL;
    errno = 0;
    long long k = strtoll(p, &end, 10);
    if (end == p || errno || (*end && *end != ',') || *p == '-' || *p == '+' || *p == ' ') {
      free(v);
      return rc_fail(err, RC_EXIT_USAGE,
                     "--save-at: '%s' is not a comma-separated list of steps, 'every' or 'auto'",
                     s);
    }
    if (k < 1 || k >= steps) {
      free(v);
      return rc_fail(err, RC_EXIT_USAGE,
                     "--save-at: step %lld is outside 1..%" PRId64
                     " (it must be before --steps %" PRId64 " so that a resume leg has steps left)",
                     k, steps - 1, steps);
    }
    v[m++] = k;
    if (!*end) break;
    p = end + 1;
  }
  qsort(v, (size_t)m, sizeof *v, cmp_i64);
  for (int i = 1; i < m; i++)
    if (v[i] == v[i - 1]) {
      int64_t dup = v[i];
      free(v);
      return rc_fail(err, RC_EXIT_USAGE, "--save-at: step %" PRId64 " is listed twice", dup);
    }
  *out = v;
  *n = m;
  return RC_OK;
}

/* Adds step k with reason why to the points (ascending, unique). */
static void auto_add(rc_auto_point *p, int *n, int64_t k, unsigned why) {
  int i = 0;
  while (i < *n && p[i].step < k) i++;
  if (i < *n && p[i].step == k) {
    p[i].why |= why;
    return;
  }
  memmove(p + i + 1, p + i, (size_t)(*n - i) * sizeof *p);
  p[i] = (rc_auto_point){k, why};
  (*n)++;
}

int rc_run_auto_save_points(int64_t steps, int64_t warmup, const int64_t *skipped,
                            const bool *absorbed, int n_skipped, rc_auto_point *out) {
  int n = 0;
  if (steps < 2) return 0;
  /* an adjacent pair in the middle: state that alternates (a counter the
   * overflow pattern resets every other step) is caught at one of them */
  int64_t a = steps / 2, b = a + 1 <= steps - 1 ? a + 1 : a - 1;
  auto_add(out, &n, a, a % 2 ? RC_AUTO_ODD : RC_AUTO_EVEN);
  if (b >= 1) auto_add(out, &n, b, b % 2 ? RC_AUTO_ODD : RC_AUTO_EVEN);
  if (warmup >= 1 && warmup + 1 <= steps - 1) auto_add(out, &n, warmup + 1, RC_AUTO_AFTER_WARMUP);
  auto_add(out, &n, steps - 1, RC_AUTO_LAST);
  /* a skipped step: the optimizer step and the iteration part there, and an
   * absorbed overflow leaves the hysteresis tracker mid-count */
  int pick = -1;
  for (int i = 0; i < n_skipped && pick < 0; i++)
    if (skipped[i] >= 1 && skipped[i] <= steps - 1 && absorbed && absorbed[i]) pick = i;
  for (int i = 0; i < n_skipped && pick < 0; i++)
    if (skipped[i] >= 1 && skipped[i] <= steps - 1) pick = i;
  if (pick >= 0)
    auto_add(out, &n, skipped[pick],
             RC_AUTO_SKIPPED | (absorbed && absorbed[pick] ? RC_AUTO_ABSORBED : 0));
  return n;
}

int rc_run_auto_add_config_points(rc_auto_point *p, int n, int64_t steps, int64_t epoch_steps,
                                  int64_t growth_window) {
  /* a sampler's epoch is set at an epoch boundary: a resume there is where
   * a resume that sets it wrongly shows */
  if (epoch_steps >= 1 && epoch_steps <= steps - 1) auto_add(p, &n, epoch_steps, RC_AUTO_EPOCH_END);
  /* a scaler whose growth interval is rebuilt wrongly shows only when the
   * resumed leg reaches a growth: leave it a full window */
  if (growth_window >= 1 && steps - growth_window >= 1)
    auto_add(p, &n, steps - growth_window, RC_AUTO_GROWTH_WINDOW);
  return n;
}

void rc_run_auto_describe(const rc_auto_point *p, int n, char *buf, size_t cap) {
  static const char *const names[] = {"odd",
                                      "even",
                                      "first after warmup",
                                      "N-1",
                                      "skipped fp16 step",
                                      "its overflow absorbed by the hysteresis",
                                      "last step of a data epoch",
                                      "a full loss-scale growth window before N"};
  size_t len = 0;
  if (cap) buf[0] = 0;
  for (int i = 0; i < n && len < cap; i++) {
    len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64 " (", i ? ", " : "", p[i].step);
    bool first = true;
    for (int r = 0; r < 8 && len < cap; r++)
      if (p[i].why & (1u << r)) {
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", first ? "" : ", ", names[r]);
        first = false;
      }
    if (len < cap) len += (size_t)snprintf(buf + len, cap - len, ")");
  }
}

void rc_bufprintf(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
}

/* Paths derived from --out cannot be cut: rc_run_plan refuses an --out
 * within 256 bytes of the buffer size. */
#define pathf rc_bufprintf

/* ---- building argv ---- */

typedef struct {
  char **v;
  int n, cap;
} strvec;

static int sv_push(strvec *s, const char *word) {
  if (s->n + 2 > s->cap) {
    int cap = s->cap ? 2 * s->cap : 32;
    char **p = realloc(s->v, (size_t)cap * sizeof *p);
    if (!p) return -1;
    s->v = p;
    s->cap = cap;
  }
  char *w = strdup(word);
  if (!w) return -1;
  s->v[s->n++] = w;
  s->v[s->n] = NULL;
  return 0;
}

/* "5,10" for the leg's saves; malloc'd. */
static char *join_steps(const int64_t *v, int n) {
  size_t cap = (size_t)n * 21 + 1;
  char *s = malloc(cap);
  if (!s) return NULL;
  size_t len = 0;
  s[0] = 0;
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(s + len, cap - len, "%s%" PRId64, i ? "," : "", v[i]);
  return s;
}

static int build_argv(rc_run *run, rc_leg *leg, rc_err *err) {
  const rc_run_opts *o = &run->opts;
  char *save_list = join_steps(leg->saves, leg->n_saves);
  if (!save_list) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  char steps[24], stop[24];
  snprintf(steps, sizeof steps, "%" PRId64, o->steps);
  snprintf(stop, sizeof stop, "%" PRId64, leg->last_step);
  const char *fusion = !strcmp(leg->arm, "fusion-on")    ? "on"
                       : !strcmp(leg->arm, "fusion-off") ? "off"
                                                         : "";
  int rc = RC_OK;
  if (o->trainer == RC_TRAINER_EXEC) {
    rc_template_var vars[] = {{"steps", steps},       {"stop_at", stop},
                              {"save_at", save_list}, {"resume_from", leg->resume_from},
                              {"out", leg->dir},      {"leg", leg->name},
                              {"fusion", fusion}};
    rc = rc_template_expand(&run->tmpl, vars, (int)(sizeof vars / sizeof vars[0]), &leg->argv,
                            &leg->argc, err);
    free(save_list);
    return rc;
  }
  strvec a = {0};
  bool ok = !sv_push(&a, o->self_exe) && !sv_push(&a, "train");
  for (int i = 0; ok && i < o->n_fwd; i++) ok = !sv_push(&a, o->fwd[i]);
  if (ok && *fusion) ok = !sv_push(&a, "--grad-accum-fusion") && !sv_push(&a, fusion);
  ok = ok && !sv_push(&a, "--steps") && !sv_push(&a, steps);
  if (ok && leg->last_step != o->steps) ok = !sv_push(&a, "--stop-at") && !sv_push(&a, stop);
  ok = ok && !sv_push(&a, "--save-at") && !sv_push(&a, save_list);
  int n_hashes = run->through_hashes_all ? leg->n_saves : leg->n_saves - 1;
  bool through = !strcmp(leg->name, "through");
  if (ok && run->through_hashes && through && n_hashes > 0) {
    /* every save but the last (N) keeps hashes only (--through-checkpoints);
     * with hashes-all the last one too */
    char *hashes = join_steps(leg->saves, n_hashes);
    ok = hashes && !sv_push(&a, "--save-hashes-at") && !sv_push(&a, hashes);
    free(hashes);
  }
  leg->deferred_step = 0;
  if (ok && run->through_on_demand && through && leg->n_saves > 0) {
    /* on-demand: the save at N is decided late (run_legs.c, decide_deferred) */
    char *last = join_steps(leg->saves + leg->n_saves - 1, 1);
    ok = last && !sv_push(&a, "--save-deferred-at") && !sv_push(&a, last);
    free(last);
    leg->deferred_step = leg->saves[leg->n_saves - 1];
  }
  if (ok && leg->resume_from[0])
    ok = !sv_push(&a, "--resume-from") && !sv_push(&a, leg->resume_from);
  ok = ok && !sv_push(&a, "--out") && !sv_push(&a, leg->dir) && !sv_push(&a, "--leg") &&
       !sv_push(&a, leg->label);
  free(save_list);
  if (!ok) {
    rc_argv_free(a.v);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  leg->argv = a.v;
  leg->argc = a.n;
  return RC_OK;
}

/* ---- legs and checks ---- */

static rc_leg *add_leg(rc_run *run, int *cap, const char *arm, const char *name, int64_t from,
                       int64_t last, int depends_on, const int64_t *saves, int n_saves) {
  if (run->n_legs + 1 > *cap) {
    int c = *cap ? 2 * *cap : 8;
    rc_leg *p = realloc(run->legs, (size_t)c * sizeof *p);
    if (!p) return NULL;
    run->legs = p;
    *cap = c;
  }
  rc_leg *leg = &run->legs[run->n_legs];
  memset(leg, 0, sizeof *leg);
  leg->saves = malloc((size_t)(n_saves ? n_saves : 1) * sizeof *leg->saves);
  if (!leg->saves) return NULL;
  run->n_legs++;
  memcpy(leg->saves, saves, (size_t)n_saves * sizeof *saves);
  leg->n_saves = n_saves;
  snprintf(leg->name, sizeof leg->name, "%s", name);
  snprintf(leg->arm, sizeof leg->arm, "%s", arm);
  snprintf(leg->label, sizeof leg->label, "%s%s%s", arm, *arm ? "/" : "", name);
  char armdir[RC_RUN_PATH_CAP];
  if (*arm)
    pathf(armdir, sizeof armdir, "%s/%s", run->opts.out_dir, arm);
  else
    pathf(armdir, sizeof armdir, "%s", run->opts.out_dir);
  pathf(leg->dir, sizeof leg->dir, "%s/%s", armdir, name);
  pathf(leg->log_path, sizeof leg->log_path, "%s/log.txt", leg->dir);
  leg->resume_step = from;
  leg->last_step = last;
  leg->depends_on = depends_on;
  leg->pid = -1;
  if (depends_on >= 0) {
    char iter[32];
    rc_iter_dirname(iter, sizeof iter, from);
    pathf(leg->resume_from, sizeof leg->resume_from, "%s/" RC_CKPT_DIR_NAME "/%s",
          run->legs[depends_on].dir, iter);
  }
  return leg;
}

static rc_check *add_check(rc_run *run, int *cap, const char *arm, const char *name,
                           rc_check_what what, rc_check_class cls, int a, int b, int64_t step) {
  if (run->n_checks + 1 > *cap) {
    int c = *cap ? 2 * *cap : 8;
    rc_check *p = realloc(run->checks, (size_t)c * sizeof *p);
    if (!p) return NULL;
    run->checks = p;
    *cap = c;
  }
  rc_check *ck = &run->checks[run->n_checks++];
  memset(ck, 0, sizeof *ck);
  snprintf(ck->name, sizeof ck->name, "%s%s%s", arm, *arm ? "/" : "", name);
  snprintf(ck->arm, sizeof ck->arm, "%s", arm);
  ck->what = what;
  ck->cls = cls;
  ck->leg_a = a;
  ck->leg_b = b;
  ck->step = step;
  ck->twin = -1;
  const rc_leg *la = &run->legs[a], *lb = &run->legs[b];
  if (what == RC_CHECK_STATE) {
    char iter[32];
    rc_iter_dirname(iter, sizeof iter, step);
    pathf(ck->path_a, sizeof ck->path_a, "%s/" RC_CKPT_DIR_NAME "/%s", la->dir, iter);
    pathf(ck->path_b, sizeof ck->path_b, "%s/" RC_CKPT_DIR_NAME "/%s", lb->dir, iter);
  } else if (what == RC_CHECK_CENSUS) {
    pathf(ck->path_a, sizeof ck->path_a, "%s/" RC_CENSUS_DIR_NAME, la->dir);
    pathf(ck->path_b, sizeof ck->path_b, "%s/" RC_CENSUS_DIR_NAME, lb->dir);
  } else {
    pathf(ck->path_a, sizeof ck->path_a, "%s/" RC_TRACE_NAME, la->dir);
    pathf(ck->path_b, sizeof ck->path_b, "%s/" RC_TRACE_NAME, lb->dir);
    ck->trace_from = lb->resume_step + 1;
    ck->trace_to = lb->last_step;
  }
  return ck;
}

/* The name of the i-th aa leg (0-based): aa, aa2, aa3, ... */
static void aa_name(int i, char *buf, size_t cap) {
  if (i == 0)
    snprintf(buf, cap, "aa");
  else
    snprintf(buf, cap, "aa%d", i + 1);
}

/* The through leg's saves: every K, then N (malloc'd; NULL out of memory). */
static int64_t *through_saves(const rc_run *run) {
  const int nk = run->n_save_at;
  int64_t *saves = malloc((size_t)(nk + 1) * sizeof *saves);
  if (!saves) return NULL;
  memcpy(saves, run->save_at, (size_t)nk * sizeof *saves);
  saves[nk] = run->opts.steps;
  return saves;
}

/* The name of a calibrated run's resume leg at K from the p-th fresh leg:
 * resume@K (from through), resume@K.aa, resume@K.aa2, ... */
static void resume_name(int64_t k, int p, char *buf, size_t cap) {
  char an[32] = "";
  if (p > 0) aa_name(p - 1, an, sizeof an);
  snprintf(buf, cap, "resume@%" PRId64 "%s%s", k, p > 0 ? "." : "", an);
}

/* The checks of a calibrated run's resume leg r, each against the fresh
 * leg whose checkpoint it loaded (its depends_on): its state at N split in
 * two (the exact part, which compares, and its calibrated twin); its trace
 * judged twice (exact columns, noisy columns); its census at K (exact:
 * the fresh process at K is the one whose checkpoint the resumed leg
 * loads, so it is exact whatever the noise). */
static bool add_resume_state_checks(rc_run *run, int *cap, const char *arm, int r) {
  const int64_t N = run->opts.steps;
  const rc_leg *leg = &run->legs[r];
  const int64_t k = leg->resume_step;
  const int src = leg->depends_on;
  /* RESUME@K→N for resume@K, RESUME@K.aa→N for resume@K.aa, ... */
  const char *from = strchr(leg->name, '.');
  if (!from) from = "";
  char name[96];
  snprintf(name, sizeof name, "RESUME@%" PRId64 "%s→%" PRId64 " exact", k, from, N);
  int exact = run->n_checks;
  rc_check *c = add_check(run, cap, arm, name, RC_CHECK_STATE, RC_CLASS_RESUME, src, r, N);
  if (!c) return false;
  c->judged = RC_JUDGED_EXACT;
  snprintf(name, sizeof name, "RESUME@%" PRId64 "%s→%" PRId64, k, from, N);
  c = add_check(run, cap, arm, name, RC_CHECK_STATE, RC_CLASS_RESUME, src, r, N);
  if (!c) return false;
  c->judged = RC_JUDGED_CALIBRATED;
  c->is_twin = true;
  run->checks[exact].twin = run->n_checks - 1;
  return true;
}

static bool add_resume_trace_checks(rc_run *run, int *cap, const char *arm, int r) {
  char name[96];
  const int src = run->legs[r].depends_on;
  snprintf(name, sizeof name, "TRACE %s exact", run->legs[r].name);
  rc_check *c = add_check(run, cap, arm, name, RC_CHECK_TRACE, RC_CLASS_RESUME, src, r, 0);
  if (!c) return false;
  c->judged = RC_JUDGED_EXACT;
  snprintf(name, sizeof name, "TRACE %s", run->legs[r].name);
  c = add_check(run, cap, arm, name, RC_CHECK_TRACE, RC_CLASS_RESUME, src, r, 0);
  if (!c) return false;
  c->judged = RC_JUDGED_CALIBRATED;
  return true;
}

static bool add_resume_census(rc_run *run, int *cap, const char *arm, int r) {
  char name[96];
  snprintf(name, sizeof name, "CENSUS %s", run->legs[r].name);
  rc_check *c = add_check(run, cap, arm, name, RC_CHECK_CENSUS, RC_CLASS_RESUME,
                          run->legs[r].depends_on, r, run->legs[r].resume_step);
  if (!c) return false;
  c->judged = RC_JUDGED_EXACT;
  return true;
}

/* --noise calibrated (harness/calibrate.h): through and M aa legs (the
 * same command, saves included) train 1..N from scratch and measure the
 * noise in pairs; per K, P resume legs (--resumes, default 2) each load
 * their own fresh leg's checkpoint at K (the shared trajectory: no save
 * leg) and run to N: resume@K from through, resume@K.aa from aa, ...; each
 * is judged against the leg it continues, so a rounding flip in any one
 * leg moves one pair while a resume bug moves all of them. A list of K is
 * independent points, as every and auto are. Per pair of fresh legs an A/A
 * state check at N and a trace check (judged as noise); per resume leg its
 * RESUME state check split in two (the exact part, which compares, and its
 * calibrated twin), its trace judged twice (exact columns, noisy columns)
 * and its census (exact). */
static int plan_arm_calibrated(rc_run *run, const char *arm, int *leg_cap, int *check_cap) {
  const rc_run_opts *o = &run->opts;
  const int64_t N = o->steps;
  const int64_t *K = run->save_at;
  const int nk = run->n_save_at;
  int64_t *saves = through_saves(run);
  if (!saves) return -1;
  int through = run->n_legs;
  bool ok = add_leg(run, leg_cap, arm, "through", 0, N, -1, saves, nk + 1) != NULL;
  int *fresh = malloc((size_t)(o->aa_count + 1) * sizeof *fresh);
  if (!fresh) {
    free(saves);
    return -1;
  }
  fresh[0] = through;
  char name[96], an[32], bn[32];
  for (int i = 0; ok && i < o->aa_count; i++) {
    fresh[i + 1] = run->n_legs;
    aa_name(i, an, sizeof an);
    /* the through leg's command again, saves included: a save's side
     * effects are the same in every fresh leg */
    ok = add_leg(run, leg_cap, arm, an, 0, N, -1, saves, nk + 1) != NULL;
  }
  free(saves);
  int first_resume = run->n_legs;
  for (int i = 0; ok && i < nk; i++)
    for (int p = 0; ok && p < o->resumes; p++) {
      resume_name(K[i], p, name, sizeof name);
      ok = add_leg(run, leg_cap, arm, name, K[i], N, fresh[p], &N, 1) != NULL;
    }
  int nf = o->aa_count + 1;
  rc_check *c;
  for (int i = 0; ok && i < nf; i++)
    for (int j = i + 1; ok && j < nf; j++) {
      snprintf(an, sizeof an, "%s", run->legs[fresh[i]].name);
      snprintf(bn, sizeof bn, "%s", run->legs[fresh[j]].name);
      if (i == 0)
        snprintf(name, sizeof name, "A/A@%" PRId64 "%s%s", N, j > 1 ? " " : "", j > 1 ? bn : "");
      else
        snprintf(name, sizeof name, "A/A@%" PRId64 " %s/%s", N, an, bn);
      ok = (c = add_check(run, check_cap, arm, name, RC_CHECK_STATE, RC_CLASS_AA, fresh[i],
                          fresh[j], N)) != NULL;
      if (ok) c->judged = RC_JUDGED_NOISE;
    }
  for (int r = first_resume; ok && r < run->n_legs; r++)
    ok = add_resume_state_checks(run, check_cap, arm, r);
  for (int i = 0; ok && i < nf; i++)
    for (int j = i + 1; ok && j < nf; j++) {
      if (i == 0)
        snprintf(name, sizeof name, "TRACE %s", run->legs[fresh[j]].name);
      else
        snprintf(name, sizeof name, "TRACE %s/%s", run->legs[fresh[i]].name,
                 run->legs[fresh[j]].name);
      ok = (c = add_check(run, check_cap, arm, name, RC_CHECK_TRACE, RC_CLASS_AA, fresh[i],
                          fresh[j], 0)) != NULL;
      if (ok) c->judged = RC_JUDGED_NOISE;
    }
  for (int r = first_resume; ok && r < run->n_legs; r++)
    ok = add_resume_trace_checks(run, check_cap, arm, r);
  for (int r = first_resume; ok && r < run->n_legs; r++)
    ok = add_resume_census(run, check_cap, arm, r);
  free(fresh);
  return ok ? through : -1;
}

int rc_run_plan_confirm(rc_run *run, const char *arm, int64_t k, int count, rc_err *err) {
  /* the primary resume legs at K, in plan order: resume@K, resume@K.aa, ... */
  int prim[RC_RUN_MAX_RESUMES], n_prim = 0, at_k = 0;
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    if (l->depends_on < 0 || l->resume_step != k || strcmp(l->arm, arm)) continue;
    at_k++;
    if (!l->confirming && n_prim < RC_RUN_MAX_RESUMES) prim[n_prim++] = i;
  }
  if (!n_prim) return rc_fail(err, RC_EXIT_SOFTWARE, "no resume leg at %" PRId64 " to confirm", k);
  int first = run->n_legs, leg_cap = run->n_legs, check_cap = run->n_checks;
  const int64_t N = run->opts.steps;
  for (int c = 0; c < count; c++) {
    const rc_leg *p = &run->legs[prim[c % n_prim]];
    char name[64];
    /* resume@K.2, resume@K.aa.2, resume@K.3, ...: the n-th from that fresh leg */
    snprintf(name, sizeof name, "%s.%d", p->name, (at_k - n_prim + c) / n_prim + 2);
    int src = p->depends_on;
    rc_leg *leg = add_leg(run, &leg_cap, arm, name, k, N, src, &N, 1);
    if (!leg) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory planning the confirming legs");
    leg->confirming = true;
  }
  for (int r = first; r < run->n_legs; r++) {
    int rc = build_argv(run, &run->legs[r], err);
    if (rc) return rc;
    if (!add_resume_state_checks(run, &check_cap, arm, r) ||
        !add_resume_trace_checks(run, &check_cap, arm, r) ||
        !add_resume_census(run, &check_cap, arm, r))
      return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory planning the confirming checks");
  }
  return RC_OK;
}

/* The legs and checks of one arm ("" when there is only one). Returns the
 * index of its through leg, or -1 on OOM. */
static int plan_arm(rc_run *run, const char *arm, int *leg_cap, int *check_cap) {
  const rc_run_opts *o = &run->opts;
  if (o->noise == RC_NOISE_CALIBRATED) return plan_arm_calibrated(run, arm, leg_cap, check_cap);
  const int64_t N = o->steps;
  const int64_t *K = run->save_at;
  const int nk = run->n_save_at;
  int64_t *saves = through_saves(run);
  if (!saves) return -1;

  int through = run->n_legs;
  int ok = add_leg(run, leg_cap, arm, "through", 0, N, -1, saves, nk + 1) != NULL;
  /* every and auto: independent points, one save leg saving at each K */
  const bool independent = o->save_every || o->save_auto;
  int save = run->n_legs;
  if (ok && independent)
    ok = add_leg(run, leg_cap, arm, "save", 0, K[nk - 1], -1, K, nk) != NULL;
  else if (ok)
    ok = add_leg(run, leg_cap, arm, "save", 0, K[0], -1, K, 1) != NULL;
  int aa = -1; /* the first aa leg; --aa M adds aa2..aaM after it */
  for (int i = 0; ok && i < o->aa_count; i++) {
    char an[32];
    aa_name(i, an, sizeof an);
    if (i == 0) aa = run->n_legs;
    ok = add_leg(run, leg_cap, arm, an, 0, N, -1, saves, nk + 1) != NULL;
  }
  /* resume legs: one per K; a chain link resumes from the previous link */
  int first_resume = run->n_legs;
  for (int i = 0; ok && i < nk; i++) {
    char name[48];
    snprintf(name, sizeof name, "resume@%" PRId64, K[i]);
    int64_t last = (!independent && i + 1 < nk) ? K[i + 1] : N;
    int dep = (independent || i == 0) ? save : run->n_legs - 1;
    ok = add_leg(run, leg_cap, arm, name, K[i], last, dep, &last, 1) != NULL;
  }
  free(saves);
  if (!ok) return -1;

  /* checks: state first, in step order, then the traces */
  char name[96];
  for (int i = 0; ok && i < (independent ? nk : 1); i++) {
    snprintf(name, sizeof name, "A/A@%" PRId64, K[i]);
    ok = add_check(run, check_cap, arm, name, RC_CHECK_STATE, RC_CLASS_AA, through, save, K[i]) !=
         NULL;
  }
  for (int i = 0; ok && aa >= 0 && i < o->aa_count; i++) {
    if (i == 0)
      snprintf(name, sizeof name, "A/A@%" PRId64, N);
    else
      snprintf(name, sizeof name, "A/A@%" PRId64 " %s", N, run->legs[aa + i].name);
    ok = add_check(run, check_cap, arm, name, RC_CHECK_STATE, RC_CLASS_AA, through, aa + i, N) !=
         NULL;
  }
  for (int r = first_resume; ok && r < run->n_legs; r++) {
    const rc_leg *leg = &run->legs[r];
    snprintf(name, sizeof name, "RESUME@%" PRId64 "→%" PRId64, leg->resume_step, leg->last_step);
    ok = add_check(run, check_cap, arm, name, RC_CHECK_STATE, RC_CLASS_RESUME, through, r,
                   leg->last_step) != NULL;
  }
  if (ok)
    ok = add_check(run, check_cap, arm, "TRACE save", RC_CHECK_TRACE, RC_CLASS_AA, through, save,
                   0) != NULL;
  for (int i = 0; ok && aa >= 0 && i < o->aa_count; i++) {
    snprintf(name, sizeof name, "TRACE %s", run->legs[aa + i].name);
    ok = add_check(run, check_cap, arm, name, RC_CHECK_TRACE, RC_CLASS_AA, through, aa + i, 0) !=
         NULL;
  }
  for (int r = first_resume; ok && r < run->n_legs; r++) {
    snprintf(name, sizeof name, "TRACE %s", run->legs[r].name);
    ok = add_check(run, check_cap, arm, name, RC_CHECK_TRACE, RC_CLASS_RESUME, through, r, 0) !=
         NULL;
  }
  /* what each resumed process held before its first step, against the
   * through process after the same step (docs/census.md) */
  for (int r = first_resume; ok && r < run->n_legs; r++) {
    snprintf(name, sizeof name, "CENSUS %s", run->legs[r].name);
    ok = add_check(run, check_cap, arm, name, RC_CHECK_CENSUS, RC_CLASS_RESUME, through, r,
                   run->legs[r].resume_step) != NULL;
  }
  return ok ? through : -1;
}

int rc_run_plan(rc_run *run, const rc_run_opts *opts, rc_err *err) {
  memset(run, 0, sizeof *run);
  run->opts = *opts;
  run->first_div_check = -1;
  run->first_div_step = -1;
  run->early_check = -1;
  run->start_gate_fd = -1;
  if (opts->steps < 2) return rc_fail(err, RC_EXIT_USAGE, "--steps must be at least 2");
  if (opts->n_save_at < 1) return rc_fail(err, RC_EXIT_USAGE, "--save-at needs at least one step");
  if (opts->jobs < 1) return rc_fail(err, RC_EXIT_USAGE, "--jobs must be at least 1");
  if (!opts->out_dir || !*opts->out_dir)
    return rc_fail(err, RC_EXIT_USAGE, "--out DIR is required");
  if (strlen(opts->out_dir) > RC_RUN_PATH_CAP - 256)
    return rc_fail(err, RC_EXIT_USAGE, "--out: path too long (%zu bytes)", strlen(opts->out_dir));
  for (int i = 0; i < opts->n_save_at; i++)
    if (opts->save_at[i] < 1 || opts->save_at[i] >= opts->steps ||
        (i && opts->save_at[i] <= opts->save_at[i - 1]))
      return rc_fail(err, RC_EXIT_USAGE, "--save-at steps must be ascending and within 1..N-1");
  run->save_at = malloc((size_t)opts->n_save_at * sizeof *run->save_at);
  if (!run->save_at) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  memcpy(run->save_at, opts->save_at, (size_t)opts->n_save_at * sizeof *run->save_at);
  run->n_save_at = opts->n_save_at;
  run->opts.save_at = run->save_at;

  int rc;
  if (opts->trainer == RC_TRAINER_EXEC) {
    if (!opts->train_cmd)
      return rc_fail(err, RC_EXIT_USAGE, "--trainer exec needs --train-cmd TEMPLATE");
    if ((rc = rc_template_parse(opts->train_cmd, &run->tmpl, err))) return rc;
    if (!rc_template_uses(&run->tmpl, "out"))
      return rc_fail(err, RC_EXIT_USAGE,
                     "--train-cmd: the template must use {out} (where the leg writes its state)");
    if (!rc_template_uses(&run->tmpl, "resume_from"))
      return rc_fail(err, RC_EXIT_USAGE,
                     "--train-cmd: the template must use {resume_from} (how a leg resumes)");
    if (opts->confirm_arm && !rc_template_uses(&run->tmpl, "fusion"))
      return rc_fail(err, RC_EXIT_USAGE,
                     "--confirm-arm with --trainer exec needs {fusion} (on/off) in --train-cmd");
  } else if (!opts->self_exe) {
    return rc_fail(err, RC_EXIT_SOFTWARE, "no trainer executable");
  }
  if (run->opts.aa && run->opts.aa_count < 1) run->opts.aa_count = 1; /* a bare --aa */
  run->opts.aa = run->opts.aa_count > 0;
  if (opts->noise == RC_NOISE_CALIBRATED) {
    if (run->opts.aa_count < 2)
      return rc_fail(err, RC_EXIT_USAGE,
                     "--noise calibrated needs --aa 2 or more: the noise is measured by pairs of "
                     "fresh legs (through and each aa leg), and one pair is one sample of it");
    if (opts->resumes > run->opts.aa_count + 1)
      return rc_fail(err, RC_EXIT_USAGE,
                     "--resumes %d needs --aa %d or more: each resume leg at K loads its own "
                     "fresh leg's checkpoint (through, aa, aa2, ...)",
                     opts->resumes, opts->resumes - 1);
    if (opts->confirm_arm)
      return rc_fail(err, RC_EXIT_USAGE,
                     "--noise calibrated with --confirm-arm: ARMS@N compares two arms byte for "
                     "byte, which run-to-run noise makes meaningless");
    if (opts->through_checkpoints != RC_THROUGH_CKPT_AUTO &&
        opts->through_checkpoints != RC_THROUGH_CKPT_FULL)
      return rc_fail(err, RC_EXIT_USAGE,
                     "--noise calibrated needs the through leg's shards (--through-checkpoints "
                     "full): the resume legs load its checkpoints, and the final state is "
                     "compared value by value");
  }
  if (opts->resumes < 0 || (opts->resumes > 0 && opts->noise != RC_NOISE_CALIBRATED))
    return rc_fail(err, RC_EXIT_USAGE,
                   "--resumes needs --noise calibrated (byte for byte, one resume leg per K "
                   "decides)");
  if (opts->noise == RC_NOISE_CALIBRATED && !opts->resumes) run->opts.resumes = 2; /* default */
  if (opts->trainer == RC_TRAINER_EXEC && opts->gpu_scheduling == RC_GPU_SCHED_CRITICAL_FIRST)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--gpu-scheduling critical-first needs the built-in trainer (an exec trainer "
                   "does not know `train --step-lock`)");

  bool all = opts->through_checkpoints == RC_THROUGH_CKPT_HASHES_ALL;
  bool on_demand = opts->through_checkpoints == RC_THROUGH_CKPT_ON_DEMAND;
  if (opts->trainer == RC_TRAINER_EXEC &&
      (opts->through_checkpoints == RC_THROUGH_CKPT_HASHES || all || on_demand))
    return rc_fail(err, RC_EXIT_USAGE,
                   "--through-checkpoints %s needs the built-in trainer (an exec trainer "
                   "does not know `train --save-hashes-at`)",
                   all         ? "hashes-all"
                   : on_demand ? "on-demand"
                               : "hashes");
  if ((all || on_demand) && opts->confirm_arm)
    return rc_fail(err, RC_EXIT_USAGE,
                   "--through-checkpoints %s with --confirm-arm: ARMS@N compares the "
                   "two arms' through states value by value, which needs their shards at N",
                   all ? "hashes-all" : "on-demand");
  run->through_hashes = opts->through_checkpoints == RC_THROUGH_CKPT_HASHES || all || on_demand;
  run->through_hashes_all = all;
  run->through_on_demand = on_demand;

  int leg_cap = 0, check_cap = 0;
  if (!opts->confirm_arm) {
    if (plan_arm(run, "", &leg_cap, &check_cap) < 0) goto oom;
  } else {
    int on = plan_arm(run, "fusion-on", &leg_cap, &check_cap);
    if (on < 0) goto oom;
    int off = plan_arm(run, "fusion-off", &leg_cap, &check_cap);
    if (off < 0) goto oom;
    char name[64];
    snprintf(name, sizeof name, "ARMS@%" PRId64, opts->steps);
    rc_check *c =
        add_check(run, &check_cap, "", name, RC_CHECK_STATE, RC_CLASS_ARMS, on, off, opts->steps);
    if (!c) goto oom;
    /* The arms' configs differ by the fusion flag alone: /meta carries the
     * config and its hash, the manifests hash the shard bytes, and COMPLETE
     * hashes the manifest. The datasets themselves are compared in full. */
    c->ignore[0] = "manifest*.json";
    c->ignore[1] = RC_COMPLETE_NAME;
    c->ignore[2] = "*:/meta*";
    c->n_ignore = 3;
    c = add_check(run, &check_cap, "", "TRACE arms", RC_CHECK_TRACE, RC_CLASS_ARMS, on, off, 0);
    if (!c) goto oom;
  }
  for (int i = 0; i < run->n_legs; i++)
    if ((rc = build_argv(run, &run->legs[i], err))) return rc;
  return RC_OK;
oom:
  return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory while planning the legs");
}

int rc_run_resolve_through_checkpoints(rc_run *run, rc_err *err) {
  const rc_run_opts *o = &run->opts;
  if (o->through_checkpoints != RC_THROUGH_CKPT_AUTO || o->trainer != RC_TRAINER_SELF ||
      strcmp(run->legs_device, "cuda") || o->noise == RC_NOISE_CALIBRATED)
    return RC_OK;
  run->through_hashes = true;
  /* at N on demand, unless ARMS@N needs both arms' values there */
  run->through_on_demand = !o->confirm_arm;
  for (int i = 0; i < run->n_legs; i++) {
    rc_leg *leg = &run->legs[i];
    if (strcmp(leg->name, "through")) continue;
    rc_argv_free(leg->argv);
    leg->argv = NULL;
    int rc = build_argv(run, leg, err);
    if (rc) return rc;
  }
  return RC_OK;
}

const char *rc_run_through_checkpoints_name(const rc_run *run) {
  return run->through_hashes_all  ? "hashes-all"
         : run->through_on_demand ? "on-demand"
         : run->through_hashes    ? "hashes"
                                  : "full";
}

void rc_run_free(rc_run *run) {
  if (!run) return;
  for (int i = 0; i < run->n_legs; i++) {
    free(run->legs[i].saves);
    rc_argv_free(run->legs[i].argv);
  }
  free(run->legs);
  for (int i = 0; i < run->n_checks; i++) {
    if (run->checks[i].have_cmp) rc_compare_result_free(&run->checks[i].cmp);
    if (run->checks[i].have_census) rc_census_diff_free(&run->checks[i].census);
    rc_calib_free(&run->checks[i].calib);
  }
  free(run->checks);
  free(run->save_at);
  free(run->config_json);
  rc_template_free(&run->tmpl);
  memset(run, 0, sizeof *run);
}

int64_t rc_run_training_steps(const rc_run *run) {
  int64_t n = 0;
  for (int i = 0; i < run->n_legs; i++) n += run->legs[i].last_step - run->legs[i].resume_step;
  return n;
}

const char *rc_leg_argv0(const rc_run *run, const rc_leg *leg) {
  if (run->opts.trainer == RC_TRAINER_SELF && run->opts.self_display) return run->opts.self_display;
  return leg->argv ? leg->argv[0] : "";
}

void rc_leg_command(const rc_run *run, const rc_leg *leg, char *buf, size_t cap) {
  if (!leg->argv) {
    if (cap) buf[0] = 0;
    return;
  }
  char *saved = leg->argv[0];
  leg->argv[0] = (char *)rc_leg_argv0(run, leg); /* shown, not run */
  rc_argv_quote(leg->argv, buf, cap);
  leg->argv[0] = saved;
}

/* Single-quotes words that need it, for copy-pasteable repro lines. */
void rc_argv_quote(char *const *argv, char *buf, size_t cap) {
  size_t len = 0;
  if (cap) buf[0] = 0;
  for (int i = 0; argv && argv[i]; i++) {
    const char *w = argv[i];
    bool plain = *w != 0;
    for (const char *p = w; *p; p++)
      if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@%+", *p))
        plain = false;
    if (i && len + 1 < cap) buf[len++] = ' ';
    if (plain) {
      for (const char *p = w; *p && len + 1 < cap; p++) buf[len++] = *p;
    } else {
      if (len + 1 < cap) buf[len++] = '\'';
      for (const char *p = w; *p; p++) {
        if (*p == '\'') {
          const char *esc = "'\\''";
          for (const char *e = esc; *e && len + 1 < cap; e++) buf[len++] = *e;
        } else if (len + 1 < cap) {
          buf[len++] = *p;
        }
      }
      if (len + 1 < cap) buf[len++] = '\'';
    }
    if (cap) buf[len] = 0;
  }
}
