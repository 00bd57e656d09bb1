/* bisect.c — `resumecheck bisect RUN_DIR` (docs/design.md §9): from a finished run's
 * report.json to the first operation whose result differs between the
 * train-through and the resumed process.
 *
 * 1. The report says whether there is anything to bisect (an identical run
 *    is good, an A/A failure makes any resume verdict inconclusive, a failed
 *    leg is untestable) and names the first divergent step S, the check that
 *    shows it, and so the through leg and the resumed leg (resumed at K).
 * 2. The checkpoint the resumed leg loaded is compared with through@K: when
 *    the loaded state already differs, the first differing state tensor is
 *    the answer (the events would only show its consequences).
 * 3. Replay: two fresh `train` processes of this same binary, with each
 *    leg's own flags, to --stop-at S with --events-from-step S — one from
 *    step 0, one --resume-from the checkpoint the leg loaded — run at the
 *    same time into OUT/through and OUT/resume (default RUN_DIR/bisect).
 * 4. The two event logs are aligned (bisect_events.c); the first event whose
 *    values differ is the answer, flag/beta-only differences are "harmless
 *    here".
 * The harness never calls the core in-process: replays are processes, like
 * legs (run_spawn.c), and bisect only reads what they write. */
#include "bisect.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "harness/compare.h"
#include "harness/run.h"
#include "io/layout.h"

const char *rc_bisect_verdict_name(rc_bisect_verdict v) {
  switch (v) {
  case RC_BISECT_NO_DIVERGENCE:
    return "no-divergence";
  case RC_BISECT_LOCATED:
    return "located";
  case RC_BISECT_NOT_REPRODUCED:
    return "not-reproduced";
  case RC_BISECT_NOT_REPLAYABLE:
    return "not-replayable";
  case RC_BISECT_INCONCLUSIVE:
    return "inconclusive";
  case RC_BISECT_UNTESTABLE:
    return "untestable";
  case RC_BISECT_ERROR:
    return "error";
  }
  return "?";
}

/* Exit codes (docs/design.md §10): 0 nothing diverged, 1 a resume divergence
 * (located or not), 2 A/A failure; errors keep their code. With
 * --git-bisect everything that is neither good nor bad is 125. */
static int verdict_exit(const rc_bisect *b) {
  int code;
  switch (b->verdict) {
  case RC_BISECT_NO_DIVERGENCE:
    code = RC_OK;
    break;
  case RC_BISECT_LOCATED:
  case RC_BISECT_NOT_REPRODUCED:
  case RC_BISECT_NOT_REPLAYABLE:
    code = RC_EXIT_DIVERGED;
    break;
  case RC_BISECT_INCONCLUSIVE:
    code = RC_EXIT_AA;
    break;
  case RC_BISECT_UNTESTABLE:
    code = RC_EXIT_UNTESTABLE;
    break;
  default:
    code = b->err.code ? b->err.code : RC_EXIT_SOFTWARE;
    break;
  }
  if (b->opts.git_bisect && code != RC_OK && code != RC_EXIT_DIVERGED) code = RC_EXIT_UNTESTABLE;
  return code;
}

/* ---- report.json ---- */

static const rc_json *find_by(const rc_json *arr, const char *key, const char *value) {
  if (!arr || arr->type != RC_JSON_ARR) return NULL;
  for (int i = 0; i < arr->nkids; i++) {
    const char *s = rc_json_get_str(&arr->kids[i], key);
    if (s && !strcmp(s, value)) return &arr->kids[i];
  }
  return NULL;
}

static void copy_str(char *dst, size_t cap, const char *s) {
  snprintf(dst, cap, "%s", s ? s : "");
}

/* The flags of a leg's `train` command that describe the leg, not the
 * training: bisect sets its own. Value-taking ones first. */
static const char *const LEG_VALUE_FLAGS[] = {
    "--save-at", "--out", "--leg", "--stop-at", "--resume-from", "--events", "--events-from-step"};
static const char *const LEG_BOOL_FLAGS[] = {"--progress", "--dry-run"};

static bool flag_is(const char *arg, const char *flag) {
  size_t n = strlen(flag);
  return !strncmp(arg, flag, n) && (arg[n] == 0 || arg[n] == '=');
}

/* Builds the replay's argv from a leg's: self_exe, "train", the leg's
 * training flags, then extra (NULL-terminated). Returns a malloc'd,
 * NULL-terminated array of malloc'd strings. */
static char **replay_argv(const rc_json *leg_argv, const char *self_exe, const char *const *extra,
                          rc_err *err) {
  int n = leg_argv->nkids, ne = 0;
  while (extra[ne]) ne++;
  char **v = calloc((size_t)(n + ne + 2), sizeof *v);
  if (!v) {
    rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    return NULL;
  }
  int k = 0;
  bool ok = (v[k++] = strdup(self_exe)) != NULL;
  for (int i = 1; ok && i < n; i++) {
    const char *a = leg_argv->kids[i].str;
    bool skip_value = false, skip = false;
    for (size_t f = 0; f < sizeof LEG_VALUE_FLAGS / sizeof *LEG_VALUE_FLAGS; f++)
      if (flag_is(a, LEG_VALUE_FLAGS[f])) skip = true, skip_value = !strchr(a, '=');
    for (size_t f = 0; f < sizeof LEG_BOOL_FLAGS / sizeof *LEG_BOOL_FLAGS; f++)
      if (!strcmp(a, LEG_BOOL_FLAGS[f])) skip = true;
    /* --progress may carry a mode (auto | live | plain | off) */
    if (!strcmp(a, "--progress") && i + 1 < n && leg_argv->kids[i + 1].str &&
        leg_argv->kids[i + 1].str[0] != '-')
      skip_value = true;
    if (skip) {
      if (skip_value) i++;
      continue;
    }
    ok = (v[k++] = strdup(a)) != NULL;
  }
  for (int i = 0; ok && i < ne; i++) ok = (v[k++] = strdup(extra[i])) != NULL;
  if (!ok) {
    for (int i = 0; i < k; i++) free(v[i]);
    free(v);
    rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    return NULL;
  }
  return v;
}

static void free_argv(char **v) {
  if (!v) return;
  for (int i = 0; v[i]; i++) free(v[i]);
  free(v);
}

static bool argv_is_train(const rc_json *a) {
  if (!a || a->type != RC_JSON_ARR || a->nkids < 2) return false;
  for (int i = 0; i < a->nkids; i++)
    if (a->kids[i].type != RC_JSON_STR) return false;
  return !strcmp(a->kids[1].str, "train");
}

/* ---- the state at K ---- */

/* through@K vs the checkpoint the resumed leg loaded. A missing through@K
 * (a trainer that did not save there) leaves ckpt_compared false. */
static int check_loaded_state(rc_bisect *b, rc_err *err) {
  if (!rc_is_dir(b->through_ckpt) || !rc_is_dir(b->resume_from)) return RC_OK;
  rc_compare_result res;
  memset(&res, 0, sizeof res);
  rc_compare_opts o = {0};
  if (rc_compare_paths(b->through_ckpt, b->resume_from, &o, &res, err)) {
    rc_compare_result_free(&res);
    rc_err_prefix(err, "comparing through@%" PRId64 " with the loaded checkpoint", b->resume_step);
    return err->code;
  }
  b->ckpt_compared = true;
  b->ckpt_identical = res.n_failing == 0;
  int first = -1;
  for (int i = 0; i < res.n_diffs && first < 0; i++)
    if (res.diffs[i].kind != RC_DIFF_INFORMATIONAL && res.diffs[i].object[0]) first = i;
  for (int i = 0; i < res.n_diffs && first < 0; i++)
    if (res.diffs[i].kind != RC_DIFF_INFORMATIONAL) first = i;
  if (first >= 0) rc_diff_describe(&res.diffs[first], b->ckpt_first, sizeof b->ckpt_first);
  rc_compare_result_free(&res);
  return RC_OK;
}

/* ---- the replay ---- */

static int wait_child(pid_t pid, int *status, rc_err *err) {
  while (waitpid(pid, status, 0) < 0) {
    if (errno != EINTR) return rc_fail(err, RC_EXIT_SOFTWARE, "waitpid: %s", strerror(errno));
  }
  return RC_OK;
}

static int child_failed(const char *what, int status, const char *log, rc_err *err) {
  char tail[2048];
  rc_log_tail(log, 5, tail, sizeof tail);
  if (WIFSIGNALED(status))
    return rc_fail(err, RC_EXIT_SOFTWARE, "the %s replay died by signal %d (%s): %s", what,
                   WTERMSIG(status), log, tail);
  return rc_fail(err, RC_EXIT_SOFTWARE, "the %s replay exited %d (%s): %s", what,
                 WEXITSTATUS(status), log, tail);
}

static int replay(rc_bisect *b, const rc_json *through_argv, const rc_json *resume_argv,
                  rc_err *err) {
  char dir_t[4096], dir_r[4096], from[32], to[32];
  rc_path_join(dir_t, sizeof dir_t, b->out_dir, "through");
  rc_path_join(dir_r, sizeof dir_r, b->out_dir, "resume");
  rc_path_join(b->through_events, sizeof b->through_events, b->out_dir, "through.events");
  rc_path_join(b->resume_events, sizeof b->resume_events, b->out_dir, "resume.events");
  rc_path_join(b->through_log, sizeof b->through_log, dir_t, "log.txt");
  rc_path_join(b->resume_log, sizeof b->resume_log, dir_r, "log.txt");
  snprintf(from, sizeof from, "%" PRId64, b->events_from);
  snprintf(to, sizeof to, "%" PRId64, b->events_to);
  if (rc_mkdir_p(dir_t, err) || rc_mkdir_p(dir_r, err)) return err->code;

  const char *xt[] = {"--stop-at", to,      "--events", b->through_events, "--events-from-step",
                      from,        "--out", dir_t,      "--leg",           "bisect-through",
                      NULL};
  const char *xr[] = {"--resume-from",  b->resume_from,       "--stop-at", to,      "--events",
                      b->resume_events, "--events-from-step", from,        "--out", dir_r,
                      "--leg",          "bisect-resume",      NULL};
  char **av_t = replay_argv(through_argv, b->opts.self_exe, xt, err);
  if (!av_t) return err->code;
  char **av_r = replay_argv(resume_argv, b->opts.self_exe, xr, err);
  if (!av_r) {
    free_argv(av_t);
    return err->code;
  }
  /* The commands as people can paste them: the real binary, not /proc/self/exe. */
  char self[4096];
  ssize_t sl = readlink(b->opts.self_exe, self, sizeof self - 1);
  if (sl > 0) {
    self[sl] = 0;
    char *keep_t = av_t[0], *keep_r = av_r[0];
    av_t[0] = av_r[0] = self;
    rc_argv_quote(av_t, b->through_cmd, sizeof b->through_cmd);
    rc_argv_quote(av_r, b->resume_cmd, sizeof b->resume_cmd);
    av_t[0] = keep_t, av_r[0] = keep_r;
  } else {
    rc_argv_quote(av_t, b->through_cmd, sizeof b->through_cmd);
    rc_argv_quote(av_r, b->resume_cmd, sizeof b->resume_cmd);
  }

  /* Both at once: they are independent, and each is one step. */
  pid_t pt = -1, pr = -1;
  int rc = rc_spawn_logged(av_t, NULL, false, b->through_log, b->through_cmd, &pt, err);
  if (!rc) rc = rc_spawn_logged(av_r, NULL, false, b->resume_log, b->resume_cmd, &pr, err);
  int st_t = 0, st_r = 0;
  rc_err werr = {0};
  if (pt > 0 && wait_child(pt, &st_t, &werr) && !rc) rc = werr.code, *err = werr;
  if (pr > 0 && wait_child(pr, &st_r, &werr) && !rc) rc = werr.code, *err = werr;
  free_argv(av_t);
  free_argv(av_r);
  if (rc) return rc;
  if (!WIFEXITED(st_t) || WEXITSTATUS(st_t))
    return child_failed("train-through", st_t, b->through_log, err);
  if (!WIFEXITED(st_r) || WEXITSTATUS(st_r))
    return child_failed("resumed", st_r, b->resume_log, err);
  b->replayed = true;
  if (rc_events_read(b->through_events, &b->ev_through, err)) return err->code;
  if (rc_events_read(b->resume_events, &b->ev_resume, err)) return err->code;
  return rc_events_align(&b->ev_through, &b->ev_resume, &b->align, err);
}

/* ---- the verdict ---- */

/* Has `e` (a backward event at index i) a backward event of the same module
 * earlier in the same step? If not, the step's zeroing left its main_grad
 * at zero, and an overwrite differs from an add at most in signs of zero. */
static bool first_backward_of_step(const rc_event_list *l, int i) {
  const rc_event *e = &l->ev[i];
  for (int j = i - 1; j >= 0 && l->ev[j].step == e->step; j--)
    if (!strcmp(l->ev[j].kind, "backward") && !strcmp(l->ev[j].name, e->name)) return false;
  return true;
}

static void located_text(rc_bisect *b) {
  const rc_alignment *al = &b->align;
  const rc_event *et = &b->ev_through.ev[al->index < b->ev_through.n ? al->index : 0];
  const rc_event *er = &b->ev_resume.ev[al->index < b->ev_resume.n ? al->index : 0];
  char where[512];
  if (al->kind == RC_ALIGN_STRUCTURE) {
    if (al->index >= b->ev_through.n || al->index >= b->ev_resume.n) {
      rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                   "the event logs differ in length: %d events in the train-through process, %d in "
                   "the resumed one (the first %d agree in values)",
                   b->ev_through.n, b->ev_resume.n, al->index);
      return;
    }
    char wt[512], wr[512];
    rc_event_describe(et, wt, sizeof wt);
    rc_event_describe(er, wr, sizeof wr);
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "event %d is a different operation: through ran %s, resume ran %s", al->index + 1,
                 wt, wr);
    return;
  }
  rc_event_describe(et, where, sizeof where);
  const char *pt = rc_event_get(et, "passed"), *pr = rc_event_get(er, "passed");
  const char *bt = rc_event_get(et, "beta"), *br = rc_event_get(er, "beta");
  char ctx[256] = "";
  if (pt && pr && bt && br && strcmp(bt, "-1"))
    rc_bufprintf(ctx, sizeof ctx, "; through passed %s (beta=%s), resume passed %s (beta=%s)", pt,
                 bt, pr, br);
  else if (pt && pr)
    rc_bufprintf(ctx, sizeof ctx, "; through passed %s, resume passed %s", pt, pr);
  rc_bufprintf(b->verdict_text, sizeof b->verdict_text, "%s: %s differ%s%s", where, al->fields,
               strchr(al->fields, ',') ? "" : "s", ctx);

  /* What the difference means, where the kind of event says it. */
  if (!strcmp(et->kind, "backward") && bt && br && strcmp(bt, br)) {
    bool zeroed =
        !strcmp(al->fields, "fp_main_grad") && first_backward_of_step(&b->ev_through, al->index);
    if (zeroed)
      rc_bufprintf(b->note, sizeof b->note,
                   "beta differs on the module's first backward of the step, into a buffer the "
                   "step zeroed: an overwrite and an add then differ at most in the sign of zeros, "
                   "which fingerprints see (they hash every bit)");
    else
      rc_bufprintf(
          b->note, sizeof b->note,
          "the fused weight-gradient GEMM %s main_grad in the resumed process and %s it in "
          "the train-through process: %s",
          !strcmp(br, "0") ? "overwrote" : "accumulated into",
          !strcmp(bt, "0") ? "overwrote" : "accumulated into",
          "the gradient of the earlier calls of this step is lost on one side");
  } else if (!strcmp(et->kind, "batch")) {
    rc_bufprintf(b->note, sizeof b->note,
                 "the resumed process reads different data (samples %s vs %s): the data position "
                 "was not restored",
                 rc_event_get(et, "samples") ? rc_event_get(et, "samples") : "?",
                 rc_event_get(er, "samples") ? rc_event_get(er, "samples") : "?");
  } else if (!strcmp(et->kind, "dropout")) {
    rc_bufprintf(b->note, sizeof b->note,
                 "the dropout RNG draws from a different state (offset %s vs %s): the RNG state "
                 "was not restored",
                 rc_event_get(et, "offset") ? rc_event_get(et, "offset") : "?",
                 rc_event_get(er, "offset") ? rc_event_get(er, "offset") : "?");
  } else if (!strcmp(et->kind, "optimizer")) {
    if (strstr(al->fields, "bc1") || strstr(al->fields, "optimizer_step"))
      rc_bufprintf(b->note, sizeof b->note,
                   "Adam's bias correction differs (optimizer_step %s vs %s): the optimizer step "
                   "count was not restored",
                   rc_event_get(et, "optimizer_step") ? rc_event_get(et, "optimizer_step") : "?",
                   rc_event_get(er, "optimizer_step") ? rc_event_get(er, "optimizer_step") : "?");
    else if (strstr(al->fields, "lr"))
      rc_bufprintf(b->note, sizeof b->note,
                   "the learning rate differs (%s vs %s): the scheduler state was not restored",
                   rc_event_get(et, "lr") ? rc_event_get(et, "lr") : "?",
                   rc_event_get(er, "lr") ? rc_event_get(er, "lr") : "?");
  } else if (!strcmp(et->kind, "backward") && strstr(al->fields, "fp_main_grad") &&
             !strstr(al->fields, "fp_out")) {
    rc_bufprintf(b->note, sizeof b->note,
                 "same flags, same input gradients, different main_grad after the GEMM: the buffer "
                 "held different values before it (not zeroed, or loaded stale)");
  }
}

static int bisect_body(rc_bisect *b, rc_err *err) {
  char path[4096], jerr[256];
  rc_path_join(path, sizeof path, b->opts.run_dir, RC_REPORT_NAME);
  if (!rc_path_exists(path))
    return rc_fail(err, RC_EXIT_NOINPUT,
                   "%s: no report.json (is this a `resumecheck run` directory?)", b->opts.run_dir);
  char *text;
  size_t n;
  if (rc_read_file(path, &text, &n, err)) return err->code;
  rc_json *rep = rc_json_parse(text, n, jerr, sizeof jerr);
  free(text);
  if (!rep) return rc_fail(err, RC_EXIT_DATAERR, "%s: %s", path, jerr);
  int rc = RC_OK;
  const char *schema = rc_json_get_str(rep, "schema");
  const char *verdict = rc_json_get_str(rep, "verdict");
  int64_t run_exit = -1;
  if (!schema || strcmp(schema, "resumecheck.run-report") || !verdict ||
      !rc_json_get_i64(rep, "exit_code", &run_exit)) {
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s: not a resumecheck run report", path);
    goto out;
  }
  copy_str(b->run_verdict, sizeof b->run_verdict, verdict);
  copy_str(b->run_verdict_text, sizeof b->run_verdict_text, rc_json_get_str(rep, "verdict_text"));
  b->run_exit = (int)run_exit;

  if (!strcmp(verdict, "identical")) {
    b->verdict = RC_BISECT_NO_DIVERGENCE;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "every check of the run is identical: nothing to bisect");
    goto out;
  }
  if (!strcmp(verdict, "aa-failed")) {
    b->verdict = RC_BISECT_INCONCLUSIVE;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the run's A/A check failed (two fresh processes differ), so a resume "
                 "difference cannot be told from non-determinism");
    goto out;
  }
  if (strcmp(verdict, "resume-diverged") && strcmp(verdict, "arms-differ")) {
    b->verdict = RC_BISECT_UNTESTABLE;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text, "the run's verdict is %s (%s)", verdict,
                 b->run_verdict_text);
    goto out;
  }

  const rc_json *fd = rc_json_get(rep, "first_divergence");
  const char *cls = fd ? rc_json_get_str(fd, "class") : NULL;
  const char *check_name = fd ? rc_json_get_str(fd, "check") : NULL;
  if (!cls || strcmp(cls, "resume") || !check_name) {
    b->verdict = RC_BISECT_NOT_REPLAYABLE;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the run differs (%s) but not as a resume divergence: bisect replays a resumed "
                 "process against a train-through one",
                 b->run_verdict_text);
    goto out;
  }
  copy_str(b->check, sizeof b->check, check_name);
  if (!rc_json_get_i64(fd, "step", &b->step)) b->step = -1;
  const rc_json *cols = rc_json_get(fd, "columns");
  for (int i = 0; cols && cols->type == RC_JSON_ARR && i < cols->nkids; i++)
    if (cols->kids[i].type == RC_JSON_STR) {
      size_t l = strlen(b->trace_columns);
      snprintf(b->trace_columns + l, sizeof b->trace_columns - l, "%s%s", l ? "," : "",
               cols->kids[i].str);
    }

  const rc_json *check = find_by(rc_json_get(rep, "checks"), "name", check_name);
  const rc_json *legs = rc_json_get(rep, "legs");
  const char *la = check ? rc_json_get_str(rc_json_get(check, "a"), "leg") : NULL;
  const char *lb = check ? rc_json_get_str(rc_json_get(check, "b"), "leg") : NULL;
  const rc_json *leg_t = la ? find_by(legs, "label", la) : NULL;
  const rc_json *leg_r = lb ? find_by(legs, "label", lb) : NULL;
  if (!leg_t || !leg_r) {
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s: check '%s' does not name two legs of the run", path,
                 check_name);
    goto out;
  }
  copy_str(b->through_leg, sizeof b->through_leg, la);
  copy_str(b->resume_leg, sizeof b->resume_leg, lb);
  const rc_json *av_t = rc_json_get(leg_t, "argv"), *av_r = rc_json_get(leg_r, "argv");
  const char *from = rc_json_get_str(leg_r, "resume_from");
  int64_t last = -1;
  if (!rc_json_get_i64(leg_r, "resume_step", &b->resume_step) || !from ||
      !rc_json_get_i64(leg_r, "last_step", &last)) {
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s: leg '%s' is not a resumed leg", path, lb);
    goto out;
  }
  copy_str(b->resume_from, sizeof b->resume_from, from);
  const char *dir_t = rc_json_get_str(leg_t, "dir");
  char iter[32];
  snprintf(iter, sizeof iter, RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT, b->resume_step);
  if (dir_t) rc_path_join(b->through_ckpt, sizeof b->through_ckpt, dir_t, iter);
  if (!argv_is_train(av_t) || !argv_is_train(av_r)) {
    b->verdict = RC_BISECT_NOT_REPLAYABLE;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the run diverged (%s), but its legs are not `resumecheck train` processes: "
                 "bisect needs the built-in trainer's event log",
                 b->run_verdict_text);
    goto out;
  }
  /* The trace names S; without one (state differs, trace equal) replay the
   * whole resumed range with events on. */
  b->events_from = b->step > b->resume_step ? b->step : b->resume_step + 1;
  b->events_to = b->step > b->resume_step ? b->step : last;

  if ((rc = check_loaded_state(b, err))) goto out;
  if ((rc = replay(b, av_t, av_r, err))) goto out;

  if (b->ckpt_compared && !b->ckpt_identical) {
    b->verdict = RC_BISECT_LOCATED;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the checkpoint the resumed leg loaded already differs from through@%" PRId64
                 ": first differing state tensor %s",
                 b->resume_step, b->ckpt_first);
  } else if (b->align.index >= 0) {
    b->verdict = RC_BISECT_LOCATED;
    located_text(b);
  } else {
    b->verdict = RC_BISECT_NOT_REPRODUCED;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the run diverged at step %" PRId64
                 ", but the replay's %d events agree in value on both sides: the divergence is "
                 "not in a logged operation of steps %" PRId64 "..%" PRId64,
                 b->step, b->align.n_compared, b->events_from, b->events_to);
  }
out:
  rc_json_free(rep);
  return rc;
}

int rc_bisect_run(rc_bisect *b, const rc_bisect_opts *opts) {
  memset(b, 0, sizeof *b);
  b->opts = *opts;
  if (!b->opts.self_exe) b->opts.self_exe = "/proc/self/exe";
  if (b->opts.context <= 0) b->opts.context = 3;
  b->step = b->resume_step = -1;
  b->align.index = -1;
  if (opts->out_dir)
    copy_str(b->out_dir, sizeof b->out_dir, opts->out_dir);
  else
    rc_path_join(b->out_dir, sizeof b->out_dir, opts->run_dir, "bisect");
  int rc = bisect_body(b, &b->err);
  if (rc) {
    b->verdict = RC_BISECT_ERROR;
    /* the verdict's name ("error") is printed before the text: not again here */
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text, "%s", b->err.msg);
  }
  b->exit_code = verdict_exit(b);
  return rc;
}

void rc_bisect_free(rc_bisect *b) {
  rc_events_free(&b->ev_through);
  rc_events_free(&b->ev_resume);
  rc_alignment_free(&b->align);
}
