/* bisect.c — `resumecheck bisect RUN_DIR` (docs/design.md §9, docs/bisect.md):
 * from a finished run's report.json to what first made the resumed process
 * differ from the train-through one.
 *
 * 1. The report says whether there is anything to bisect (an identical run
 *    is good, an A/A failure makes any resume verdict inconclusive, a failed
 *    leg is untestable) and names the first divergent step S, the check that
 *    shows it, and so the through leg and the resumed leg (resumed at K).
 * 2. The checkpoint the resumed leg loaded is compared with through@K: when
 *    the loaded state already differs, the first differing state tensor is
 *    the answer (the events would only show its consequences).
 * 3. Replay, as the legs ran: two fresh `train` processes of this same
 *    binary with each leg's own flags and its own saves up to the stop (a
 *    save may change the saving process's state), --stop-at S, events on S
 *    and on S-1 when S > K+1, into OUT/through and OUT/resume (default
 *    RUN_DIR/bisect). Each replay's trace must be its leg's trace in the run,
 *    or nothing it logs is the leg's.
 * 4. The logs are aligned (bisect_events.c). The first differing event of S
 *    is blamed only when it computed the value: when it is an input of S
 *    (the step_state event, the batch, the first dropout's offset...), the
 *    cause is the update of S-1 that made it differ, or, at S = K+1, the
 *    state the resumed process started from — and then a third process, the
 *    through leg without its saves at or before K, tells a save-time side
 *    effect (it agrees with the resumed one) from state the checkpoint lacks.
 * The harness never calls the core in-process: replays are processes, like
 * legs (run_spawn.c), and bisect only reads what they write. An exec
 * trainer's legs are replayed from the run's --train-cmd template
 * (bisect_exec.c); its event log is the Python package's
 * (python/resumecheck/events.py), in the same format.
 *
 * Paths come from the report, which holds where the run wrote them. A run
 * directory copied or moved elsewhere is read where it is now: every path
 * under the run's --out is taken under RUN_DIR instead, and one outside it is
 * used only if it exists, and said so. Bisect holds OUT/.lock (base/dirlock.h)
 * while it writes the replays, so a second bisect of the same run is refused
 * at once, naming the first. */
#include "bisect.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/dirlock.h"
#include "base/fsutil.h"
#include "base/json.h"
#include "harness/compare.h"
#include "harness/run.h"
#include "harness/schema.h"
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
  case RC_BISECT_REPLAY_MISMATCH:
    return "replay-mismatch";
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
  case RC_BISECT_REPLAY_MISMATCH:
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

/* ---- where the run's files are now ---- */

/* Appends a sentence to b->paths_note. */
static void paths_note(rc_bisect *b, const char *sentence) {
  size_t l = strlen(b->paths_note);
  snprintf(b->paths_note + l, sizeof b->paths_note - l, "%s%s", l ? " " : "", sentence);
}

/* The run's --out (config.out) against RUN_DIR: the same directory (any
 * spelling), or the run was copied or moved and its paths are rebased. */
static void locate_run(rc_bisect *b, const rc_json *rep) {
  copy_str(b->run_out, sizeof b->run_out, rc_json_get_str(rc_json_get(rep, "config"), "out"));
  size_t n = strlen(b->run_out);
  while (n > 1 && b->run_out[n - 1] == '/') b->run_out[--n] = 0;
  char a[PATH_MAX], c[PATH_MAX];
  b->same_dir =
      !b->run_out[0] || (realpath(b->run_out, a) && realpath(b->opts.run_dir, c) && !strcmp(a, c));
  /* Test hook, not a feature: RC_TEST_BISECT_NO_REBASE=1 reads the report's
   * paths as they are, as bisect did before (the copy tests' control). */
  const char *no = getenv("RC_TEST_BISECT_NO_REBASE");
  if (no && !strcmp(no, "1")) b->same_dir = true;
  if (!b->same_dir) {
    char s[8400];
    rc_bufprintf(s, sizeof s,
                 "The run wrote its files under %s; they are read under %s, where the run "
                 "directory is now.",
                 b->run_out, b->opts.run_dir);
    paths_note(b, s);
  }
}

/* Where a path the report names (`what`, for messages) is now: under RUN_DIR
 * when the run wrote it under its --out, else as it is, if it exists; a path
 * outside the run directory that does not exist is refused (66) rather than
 * replaced by a guess. */
static int relocate(rc_bisect *b, const char *what, const char *orig, char *out, size_t cap,
                    rc_err *err) {
  copy_str(out, cap, orig);
  if (!orig || !orig[0] || b->same_dir) return RC_OK;
  size_t n = strlen(b->run_out);
  if (!strncmp(orig, b->run_out, n) && (orig[n] == '/' || orig[n] == 0)) {
    if ((size_t)snprintf(out, cap, "%s%s", b->opts.run_dir, orig + n) >= cap)
      return rc_fail(err, RC_EXIT_USAGE, "%s: path too long under %s", what, b->opts.run_dir);
    b->relocated = true;
    return RC_OK;
  }
  if (!rc_path_exists(orig))
    return rc_fail(err, RC_EXIT_NOINPUT,
                   "%s %s is outside the run directory (the run wrote under %s, read now under "
                   "%s) and does not exist: bisect does not guess where it went",
                   what, orig, b->run_out, b->opts.run_dir);
  char s[4400];
  rc_bufprintf(s, sizeof s, "%s %s is outside the run directory: used as it is.", what, orig);
  paths_note(b, s);
  return RC_OK;
}

/* The flags of a leg's `train` command that describe the leg, not the
 * training: bisect sets its own. Value-taking ones first. A through leg's
 * --save-hashes-at and --save-deferred-at (run --through-checkpoints) go too: the
 * replay's saves write their shards, through the same save code, so their
 * side effects are the leg's. */
static const char *const LEG_VALUE_FLAGS[] = {
    "--save-at",     "--save-hashes-at", "--save-deferred-at", "--out", "--leg", "--stop-at",
    "--resume-from", "--events",         "--events-from-step"};
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
/* The leg's --save-at list, from its argv (the last one given wins, as in
 * the trainer's parser). */
static void leg_saves(const rc_json *argv, int *out, int *n) {
  *n = 0;
  const char *v = NULL;
  for (int i = 1; i + 1 < argv->nkids; i++)
    if (!strcmp(argv->kids[i].str, "--save-at")) v = argv->kids[i + 1].str;
  while (v && *v && *n < RC_BISECT_MAX_SAVES) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || x < 1 || x > INT32_MAX) break;
    out[(*n)++] = (int)x;
    v = *end == ',' ? end + 1 : end;
  }
}

/* A leg's "saves" array from the report (exec legs). */
static void json_saves(const rc_json *arr, int *out, int *n) {
  *n = 0;
  for (int i = 0; arr && arr->type == RC_JSON_ARR && i < arr->nkids; i++) {
    const rc_json *x = &arr->kids[i];
    if (*n < RC_BISECT_MAX_SAVES && x->type == RC_JSON_NUM && x->is_int && x->i64 >= 1 &&
        x->i64 <= INT32_MAX)
      out[(*n)++] = (int)x->i64;
  }
}

/* ---- the state at K ---- */

/* through@K vs the checkpoint the resumed leg loaded. A missing through@K
 * (a trainer that did not save there) leaves ckpt_compared false. */
static int check_loaded_state(rc_bisect *b, rc_err *err) {
  char loaded[160], iter[32];
  if (b->ckpt_producer[0])
    snprintf(loaded, sizeof loaded, "%s@%" PRId64 "'s checkpoint", b->ckpt_producer,
             b->resume_step);
  else
    snprintf(loaded, sizeof loaded, "the loaded checkpoint");
  snprintf(iter, sizeof iter, RC_ITER_NAME_FORMAT, b->resume_step);
  if (!rc_is_dir(b->through_ckpt) || !rc_is_dir(b->resume_from)) {
    rc_bufprintf(b->loaded_text, sizeof b->loaded_text,
                 "not compared: through@%" PRId64 " has no checkpoint to compare %s %s with",
                 b->resume_step, loaded, iter);
    return RC_OK;
  }
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
  b->ckpt_datasets = res.n_datasets_compared;
  int first = -1;
  for (int i = 0; i < res.n_diffs && first < 0; i++)
    if (res.diffs[i].kind != RC_DIFF_INFORMATIONAL && res.diffs[i].object[0]) first = i;
  for (int i = 0; i < res.n_diffs && first < 0; i++)
    if (res.diffs[i].kind != RC_DIFF_INFORMATIONAL) first = i;
  if (first >= 0) rc_diff_describe(&res.diffs[first], b->ckpt_first, sizeof b->ckpt_first);
  rc_compare_result_free(&res);
  if (b->ckpt_identical)
    rc_bufprintf(b->loaded_text, sizeof b->loaded_text,
                 "%s %s (%d datasets) compared with through@%" PRId64
                 "'s: identical. Both processes wrote the same bytes; this does not show the "
                 "state is complete or right (a state both legs save wrongly compares equal)",
                 loaded, iter, b->ckpt_datasets, b->resume_step);
  else
    rc_bufprintf(b->loaded_text, sizeof b->loaded_text,
                 "%s %s (%d datasets) compared with through@%" PRId64 "'s: differs, first %s",
                 loaded, iter, b->ckpt_datasets, b->resume_step, b->ckpt_first);
  return RC_OK;
}

/* The census files the legs wrote at K (rank 0): through's after its save
 * at K, the resumed leg's right after its load, compared field by field
 * (harness/census.h). A census that cannot be compared is said so in the
 * text, never fatal: the replay still answers. */
static void locate_census(rc_bisect *b) {
  char name[96];
  rc_census_filename(name, sizeof name, b->resume_step, 0, false);
  char dir_t[4200], dir_r[4200];
  rc_path_join(dir_t, sizeof dir_t, b->through_dir, RC_CENSUS_DIR_NAME);
  rc_path_join(dir_r, sizeof dir_r, b->resume_dir, RC_CENSUS_DIR_NAME);
  rc_path_join(b->census_through, sizeof b->census_through, dir_t, name);
  rc_path_join(b->census_resumed, sizeof b->census_resumed, dir_r, name);
  b->census_found = b->through_dir[0] && b->resume_dir[0] && rc_path_exists(b->census_through) &&
                    rc_path_exists(b->census_resumed);
  if (!b->census_found) return;
  rc_err err = {0};
  if (rc_census_compare_files(b->census_through, b->census_resumed, &b->census, &err)) {
    rc_bufprintf(b->census_text, sizeof b->census_text, "could not be compared: %s", err.msg);
    return;
  }
  b->census_compared = true;
  const rc_census_diff *d = &b->census;
  const rc_census_field_diff *first = rc_census_first_saved(d);
  if (first) {
    char line[1024];
    rc_census_describe(first, "through", "resumed", line, sizeof line);
    char counts[160];
    rc_census_count_phrase(d, false, counts, sizeof counts);
    rc_bufprintf(b->census_text, sizeof b->census_text, "%s, first %s", counts, line);
  } else {
    char groups[1024];
    rc_census_local_groups(d, groups, sizeof groups);
    rc_bufprintf(b->census_text, sizeof b->census_text, "saved state identical (%d fields)%s%s",
                 d->n_fields, d->n_local_differ ? "; process-local fields differ by design: " : "",
                 groups);
  }
}

/* ---- the replays ---- */

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

/* A rerun of bisect replaces its earlier replay: the checkpoint a replay
 * is about to save (DIR/ckpt/iter_N, which the trainer refuses to
 * overwrite) is removed first. It holds plain files only; anything else
 * there is not ours and stops bisect. */
static int remove_replay_checkpoint(const char *dir, int step, rc_err *err) {
  char iter[4200], name[64];
  snprintf(name, sizeof name, RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT, (int64_t)step);
  rc_path_join(iter, sizeof iter, dir, name);
  struct stat sb;
  if (lstat(iter, &sb))
    return errno == ENOENT ? RC_OK : rc_fail(err, RC_EXIT_IOERR, "%s: %s", iter, strerror(errno));
  if (!S_ISDIR(sb.st_mode))
    return rc_fail(err, RC_EXIT_IOERR, "%s is not a directory: not removing it", iter);
  DIR *d = opendir(iter);
  if (!d) return rc_fail(err, RC_EXIT_IOERR, "%s: %s", iter, strerror(errno));
  int rc = RC_OK;
  struct dirent *e;
  while (!rc && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char f[4500];
    rc_path_join(f, sizeof f, iter, e->d_name);
    if (lstat(f, &sb) || !S_ISREG(sb.st_mode))
      rc = rc_fail(err, RC_EXIT_IOERR, "%s is not a regular file: not removing %s", f, iter);
    else if (unlink(f))
      rc = rc_fail(err, RC_EXIT_IOERR, "removing %s: %s", f, strerror(errno));
  }
  closedir(d);
  if (!rc && rmdir(iter))
    rc = rc_fail(err, RC_EXIT_IOERR, "removing %s: %s", iter, strerror(errno));
  return rc;
}

/* Starts one replay: the leg's own flags, its own saves in (lo, hi] (into
 * the replay's directory, never over the run's), --stop-at hi, events from
 * b->events_from, and --resume-from when the leg resumed. An exec leg saves
 * at hi too: its {save_at} is then never empty (a template's
 * `--save-at {save_at}` would lose its value), and that save comes after
 * everything step hi logs. */
static int start_proc(rc_bisect *b, rc_replay_proc *rp, const char *name, const rc_json *leg_argv,
                      const int *saves, int n_saves, int64_t lo, const char *resume_from,
                      pid_t *pid, rc_err *err) {
  char from[32], to[32], label[64], save_list[RC_BISECT_MAX_SAVES * 12] = "", events[4200];
  rc_path_join(rp->dir, sizeof rp->dir, b->out_dir, name);
  snprintf(events, sizeof events, "%s.events", name);
  rc_path_join(rp->events, sizeof rp->events, b->out_dir, events);
  rc_path_join(rp->log, sizeof rp->log, rp->dir, "log.txt");
  snprintf(from, sizeof from, "%" PRId64, b->events_from);
  snprintf(to, sizeof to, "%" PRId64, b->events_to);
  snprintf(label, sizeof label, "bisect-%s", name);
  rp->n_saves = 0;
  /* Test hook, not a feature: RC_TEST_BISECT_NO_SAVES=1 replays without the
   * legs' saves, as bisect did before, so that tests show what it changes. */
  const char *no_saves = getenv("RC_TEST_BISECT_NO_SAVES");
  if (no_saves && !strcmp(no_saves, "1")) n_saves = 0;
  for (int i = 0; i < n_saves; i++)
    if (saves[i] > lo && saves[i] <= b->events_to) {
      size_t l = strlen(save_list);
      snprintf(save_list + l, sizeof save_list - l, "%s%d", l ? "," : "", saves[i]);
      rp->saves[rp->n_saves++] = saves[i];
    }
  if (b->exec && rp->n_saves < RC_BISECT_MAX_SAVES &&
      (!rp->n_saves || rp->saves[rp->n_saves - 1] != b->events_to)) {
    size_t l = strlen(save_list);
    snprintf(save_list + l, sizeof save_list - l, "%s%" PRId64, l ? "," : "", b->events_to);
    rp->saves[rp->n_saves++] = (int)b->events_to;
  }
  if (b->exec ? rc_bisect_exec_prepare_dir(rp->dir, err) : rc_mkdir_p(rp->dir, err))
    return err->code;
  for (int i = 0; i < rp->n_saves; i++)
    if (remove_replay_checkpoint(rp->dir, rp->saves[i], err)) return err->code;
  /* an earlier bisect's log must not stand in for one this replay failed to write */
  if (unlink(rp->events) && errno != ENOENT)
    return rc_fail(err, RC_EXIT_IOERR, "removing %s: %s", rp->events, strerror(errno));
  if (b->exec)
    return rc_bisect_exec_start(b, rp, resume_from ? b->resume_name : b->through_name,
                                resume_from ? b->resume_leg : b->through_leg,
                                resume_from ? b->resume_arm : b->through_arm, save_list,
                                resume_from, pid, err);
  const char *x[16];
  int k = 0;
  if (resume_from) x[k++] = "--resume-from", x[k++] = resume_from;
  x[k++] = "--stop-at", x[k++] = to, x[k++] = "--events", x[k++] = rp->events;
  x[k++] = "--events-from-step", x[k++] = from, x[k++] = "--out", x[k++] = rp->dir;
  x[k++] = "--leg", x[k++] = label;
  if (rp->n_saves) x[k++] = "--save-at", x[k++] = save_list;
  x[k] = NULL;
  char **av = replay_argv(leg_argv, b->opts.self_exe, x, err);
  if (!av) return err->code;
  /* The command as people can paste it: the real binary, not /proc/self/exe. */
  char self[4096];
  ssize_t sl = readlink(b->opts.self_exe, self, sizeof self - 1);
  if (sl > 0) {
    self[sl] = 0;
    char *keep = av[0];
    av[0] = self;
    rc_argv_quote(av, rp->cmd, sizeof rp->cmd);
    av[0] = keep;
  } else {
    rc_argv_quote(av, rp->cmd, sizeof rp->cmd);
  }
  int rc = rc_spawn_logged(av, NULL, false, rp->log, rp->cmd, pid, err);
  free_argv(av);
  return rc;
}

static int finish_proc(rc_replay_proc *rp, pid_t pid, const char *what, int rc, rc_err *err) {
  int st = 0;
  rc_err werr = {0};
  if (pid > 0 && wait_child(pid, &st, &werr) && !rc) rc = werr.code, *err = werr;
  if (rc || pid <= 0) return rc;
  if (!WIFEXITED(st) || WEXITSTATUS(st)) return child_failed(what, st, rp->log, err);
  rp->ran = true;
  return RC_OK;
}

/* The replay's trace against the run's own trace of that leg, over the
 * steps both have: a replay that trains otherwise did not reproduce the leg,
 * and nothing it logs can be trusted as the leg's. */
static int check_trace(rc_bisect *b, const char *what, const char *leg_dir,
                       const rc_replay_proc *rp, int64_t want_steps, rc_err *err) {
  char run_trace[4200], rep_trace[4200];
  rc_path_join(run_trace, sizeof run_trace, leg_dir, RC_TRACE_NAME);
  rc_path_join(rep_trace, sizeof rep_trace, rp->dir, RC_TRACE_NAME);
  if (!rc_path_exists(run_trace)) return RC_OK; /* nothing to check against */
  rc_trace_diff d;
  if (rc_trace_compare(run_trace, rep_trace, &d, err)) return err->code;
  b->traces_checked = true;
  if (b->trace_mismatch[0]) return RC_OK; /* the first mismatch is reported */
  if (!d.comparable)
    rc_bufprintf(b->trace_mismatch, sizeof b->trace_mismatch,
                 "the %s replay's trace (%s) has other columns than the run's (%s)", what,
                 rep_trace, run_trace);
  else if (d.first_step >= 0)
    rc_bufprintf(b->trace_mismatch, sizeof b->trace_mismatch,
                 "the %s replay's trace (%s) differs from the run's %s at step %" PRId64
                 " (%s): the replay did not reproduce the leg",
                 what, rep_trace, run_trace, d.first_step, d.columns);
  else if (d.steps_compared != want_steps)
    rc_bufprintf(b->trace_mismatch, sizeof b->trace_mismatch,
                 "the %s replay's trace (%s) shares %" PRId64
                 " steps with the run's %s, not %" PRId64 ": the replay did not reproduce the leg",
                 what, rep_trace, d.steps_compared, run_trace, want_steps);
  return RC_OK;
}

/* The two replays, at the same time: the through leg from step 0 with its
 * own saves up to the stop, the resumed leg from its checkpoint with its
 * own saves after K up to the stop. */
static int replay(rc_bisect *b, const rc_json *through_argv, const rc_json *resume_argv,
                  rc_err *err) {
  if (rc_mkdir_p(b->out_dir, err)) return err->code;
  pid_t pt = -1, pr = -1;
  int rc = start_proc(b, &b->rp_through, "through", through_argv, b->through_saves,
                      b->n_through_saves, 0, NULL, &pt, err);
  if (!rc)
    rc = start_proc(b, &b->rp_resume, "resume", resume_argv, b->resume_saves, b->n_resume_saves,
                    b->resume_step, b->resume_from, &pr, err);
  rc = finish_proc(&b->rp_through, pt, "train-through", rc, err);
  rc = finish_proc(&b->rp_resume, pr, "resumed", rc, err);
  if (rc) return rc;
  b->replayed = true;
  if ((rc = check_trace(b, "train-through", b->through_dir, &b->rp_through, b->events_to, err)) ||
      (rc = check_trace(b, "resumed", b->resume_dir, &b->rp_resume, b->events_to - b->resume_step,
                        err)))
    return rc;
  b->traces_match = !b->trace_mismatch[0];
  /* An exec trainer logs events only if it calls events.install: without
   * a log there is nothing to align, which is said, not an error. */
  if (b->exec && (!rc_path_exists(b->rp_through.events) || !rc_path_exists(b->rp_resume.events))) {
    b->events_missing = true;
    return RC_OK;
  }
  if (rc_events_read(b->rp_through.events, &b->log_through, err)) return err->code;
  if (rc_events_read(b->rp_resume.events, &b->log_resume, err)) return err->code;
  return RC_OK;
}

/* The through leg again without its saves at or before K, to tell a
 * save-time side effect (the probe then agrees with the resumed process)
 * from state the checkpoint does not carry (it agrees with through). */
static int probe(rc_bisect *b, const rc_json *through_argv, rc_err *err) {
  pid_t pp = -1;
  int rc = start_proc(b, &b->rp_probe, "through-nosave", through_argv, b->through_saves,
                      b->n_through_saves, b->resume_step, NULL, &pp, err);
  if ((rc = finish_proc(&b->rp_probe, pp, "train-through (without its saves)", rc, err))) return rc;
  if (b->exec && !rc_path_exists(b->rp_probe.events))
    return rc_fail(err, RC_EXIT_SOFTWARE, "the probe replay wrote no event log (%s)",
                   b->rp_probe.events);
  if (rc_events_read(b->rp_probe.events, &b->log_probe, err)) return err->code;
  b->probed = true;
  /* agree at the focus step: its state and every operation's values */
  rc_event_list a, r;
  if (rc_events_filter(&b->log_probe, b->focus, b->focus, NULL, &a, err)) return err->code;
  if (rc_events_filter(&b->log_resume, b->focus, b->focus, NULL, &r, err)) {
    rc_events_free(&a);
    return err->code;
  }
  b->probe_agrees = a.n == r.n && a.n > 0;
  for (int i = 0; i < a.n && i < r.n; i++) {
    char vals[512];
    rc_event_diff_values(&a.ev[i], &r.ev[i], vals, sizeof vals);
    if (vals[0] || strcmp(a.ev[i].kind, r.ev[i].kind) || strcmp(a.ev[i].name, r.ev[i].name)) {
      char d[512];
      rc_event_describe(&a.ev[i], d, sizeof d);
      rc_bufprintf(b->probe_fields, sizeof b->probe_fields, "%s: %s", d,
                   vals[0] ? vals : "a different operation");
      b->probe_agrees = false;
      break;
    }
  }
  rc_events_free(&a);
  rc_events_free(&r);
  return RC_OK;
}

/* The replays' checkpoints at the range's end, when both saved there (the
 * run's state check compared the legs' checkpoints at that step). */
static int compare_replay_checkpoints(rc_bisect *b, rc_err *err) {
  char iter[64];
  snprintf(iter, sizeof iter, RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT, b->events_to);
  rc_path_join(b->replay_ckpt_through, sizeof b->replay_ckpt_through, b->rp_through.dir, iter);
  rc_path_join(b->replay_ckpt_resume, sizeof b->replay_ckpt_resume, b->rp_resume.dir, iter);
  if (!rc_is_dir(b->replay_ckpt_through) || !rc_is_dir(b->replay_ckpt_resume)) return RC_OK;
  rc_compare_result res;
  memset(&res, 0, sizeof res);
  rc_compare_opts o = {0};
  if (rc_compare_paths(b->replay_ckpt_through, b->replay_ckpt_resume, &o, &res, err)) {
    rc_compare_result_free(&res);
    rc_err_prefix(err, "comparing the replays' checkpoints at step %" PRId64, b->events_to);
    return err->code;
  }
  b->replay_ckpt_compared = true;
  b->replay_ckpt_identical = res.n_failing == 0;
  int first = -1;
  for (int i = 0; i < res.n_diffs && first < 0; i++)
    if (res.diffs[i].kind != RC_DIFF_INFORMATIONAL && res.diffs[i].object[0]) first = i;
  for (int i = 0; i < res.n_diffs && first < 0; i++)
    if (res.diffs[i].kind != RC_DIFF_INFORMATIONAL) first = i;
  if (first >= 0)
    rc_diff_describe(&res.diffs[first], b->replay_ckpt_first, sizeof b->replay_ckpt_first);
  rc_compare_result_free(&res);
  return RC_OK;
}

/* ---- reading the logs ---- */

/* The focus step's step_state and operations, and step F-1's updates. */
static int analyse_logs(rc_bisect *b, rc_err *err) {
  /* over the whole range first: the operations aligned, and (without a
   * step from the report) the first step where either log differs */
  rc_event_list ot, orr;
  rc_alignment all;
  if (rc_events_filter(&b->log_through, 0, INT64_MAX, "step_state", &ot, err)) return err->code;
  if (rc_events_filter(&b->log_resume, 0, INT64_MAX, "step_state", &orr, err)) {
    rc_events_free(&ot);
    return err->code;
  }
  int rc = rc_events_align(&ot, &orr, &all, err);
  if (!rc) {
    b->n_compared_all = all.n_compared;
    if (b->focus < 0) {
      int64_t f = -1;
      if (all.index >= 0) f = all.index < ot.n ? ot.ev[all.index].step : orr.ev[all.index].step;
      for (int64_t s = b->events_from; s <= b->events_to && (f < 0 || s < f); s++) {
        const rc_event *st = rc_events_find(&b->log_through, s, "step_state");
        const rc_event *sr = rc_events_find(&b->log_resume, s, "step_state");
        char vals[512] = "";
        if (st && sr) rc_event_diff_values(st, sr, vals, sizeof vals);
        if (vals[0]) f = s;
      }
      b->focus = f;
    }
  }
  rc_alignment_free(&all);
  rc_events_free(&ot);
  rc_events_free(&orr);
  if (rc) return rc;
  if (b->focus < 0) return RC_OK;

  const rc_event *st = rc_events_find(&b->log_through, b->focus, "step_state");
  const rc_event *sr = rc_events_find(&b->log_resume, b->focus, "step_state");
  b->have_state = st && sr;
  if (b->have_state) rc_event_diff_values(st, sr, b->state_fields, sizeof b->state_fields);
  if (rc_events_filter(&b->log_through, b->focus, b->focus, "step_state", &b->ev_through, err) ||
      rc_events_filter(&b->log_resume, b->focus, b->focus, "step_state", &b->ev_resume, err) ||
      rc_events_align(&b->ev_through, &b->ev_resume, &b->align, err))
    return err->code;
  if (b->align.kind == RC_ALIGN_VALUES)
    b->input_reading = rc_event_input_reading(&b->ev_through, b->align.index, b->align.fields);
  /* A batch at the same data position (samples) with other data: the data
   * order differs, not the position. */
  if (b->input_reading && !strcmp(b->ev_through.ev[b->align.index].kind, "batch")) {
    const char *pt = rc_event_get(&b->ev_through.ev[b->align.index], "samples");
    const char *pr = rc_event_get(&b->ev_resume.ev[b->align.index], "samples");
    if (pt && pr && !strcmp(pt, pr))
      b->input_reading = "same data position, different samples: the sampler's state";
  }
  /* The step's first forward counts as an input only because its weights
   * might differ: when the step_state (which fingerprints the weights) is
   * logged and agrees, the forward computed the difference itself. */
  if (b->input_reading && !strcmp(b->ev_through.ev[b->align.index].kind, "forward") &&
      b->have_state && !b->state_fields[0] && rc_event_get(st, "fp_params"))
    b->input_reading = NULL;

  /* step F-1, when logged: its first differing update */
  b->prev_update = -1;
  if (b->focus - 1 < b->events_from) return RC_OK;
  if (rc_events_filter(&b->log_through, b->focus - 1, b->focus - 1, "step_state", &b->prev_through,
                       err) ||
      rc_events_filter(&b->log_resume, b->focus - 1, b->focus - 1, "step_state", &b->prev_resume,
                       err))
    return err->code;
  b->have_prev = true;
  const rc_event_list *pt = &b->prev_through, *pr = &b->prev_resume;
  for (int i = 0; i < pt->n && i < pr->n && b->prev_update < 0; i++) {
    const rc_event *a = &pt->ev[i], *c = &pr->ev[i];
    if (strcmp(a->kind, c->kind) || strcmp(a->name, c->name) || a->mb != c->mb ||
        a->call != c->call) {
      b->prev_structure = true;
      break;
    }
    if (!rc_event_is_update(a)) continue;
    char vals[512];
    rc_event_diff_values(a, c, vals, sizeof vals);
    if (vals[0]) {
      b->prev_update = i;
      snprintf(b->prev_fields, sizeof b->prev_fields, "%s", vals);
    }
  }
  st = rc_events_find(&b->log_through, b->focus - 1, "step_state");
  sr = rc_events_find(&b->log_resume, b->focus - 1, "step_state");
  if (st && sr) rc_event_diff_values(st, sr, b->prev_state_fields, sizeof b->prev_state_fields);
  return RC_OK;
}

/* Has `e` (a backward event at index i) a backward event of the same module
 * earlier in the same step? If not, the step's zeroing left its main_grad
 * at zero, and an overwrite differs from an add at most in signs of zero. */
static bool first_backward_of_step(const rc_event_list *l, int i) {
  const rc_event *e = &l->ev[i];
  for (int j = i - 1; j >= 0 && l->ev[j].step == e->step; j--)
    if (!strcmp(l->ev[j].kind, "backward") && !strcmp(l->ev[j].name, e->name)) return false;
  return true;
}

static const char *get_or(const rc_event *e, const char *key) {
  const char *v = rc_event_get(e, key);
  return v ? v : "?";
}

/* Appends a sentence to b->note. */
static void note_add(rc_bisect *b, const char *text) {
  size_t l = strlen(b->note);
  snprintf(b->note + l, sizeof b->note - l, "%s%s",
           !l                      ? ""
           : b->note[l - 1] == '.' ? " "
                                   : ". ",
           text);
}

/* The census's first derived field that differs, as a clause ("; the
 * census at K names scheduler.min_lr: ..."), or "". */
static void census_derived_clause(const rc_bisect *b, char *buf, size_t cap) {
  buf[0] = 0;
  if (!b->census_compared) return;
  for (int i = 0; i < b->census.n_diffs; i++) {
    const rc_census_field_diff *f = &b->census.diffs[i];
    if (!f->saved || f->cls != RC_CENSUS_DERIVED) continue;
    char line[1024];
    rc_census_describe(f, "through", "resumed", line, sizeof line);
    rc_bufprintf(buf, cap, "; the state census at step %" PRId64 " names the setting: %s",
                 b->resume_step, line);
    return;
  }
}

/* Whether field `key` of two events differs (one missing counts). */
static bool event_differs_in(const rc_event *a, const rc_event *b, const char *key) {
  const char *x = rc_event_get(a, key), *y = rc_event_get(b, key);
  return !x || !y || strcmp(x, y);
}

/* An optimizer event whose values differ: a step count that differs (an
 * input), or a value computed from equal counts (lr, bias corrections, the
 * clip coefficient) and the settings the process computes it with. */
static void explain_optimizer(rc_bisect *b, const rc_event *et, const rc_event *er) {
  const rc_alignment *al = &b->align;
  const char *ot = rc_event_get(et, "optimizer_step"), *orr = rc_event_get(er, "optimizer_step");
  const char *stt = rc_event_get(et, "scheduler_steps"), *str = rc_event_get(er, "scheduler_steps");
  bool opt_equal = ot && orr && !strcmp(ot, orr), sched_equal = stt && str && !strcmp(stt, str);
  char census[1400];
  census_derived_clause(b, census, sizeof census);
  bool bc = strstr(al->fields, "bc1") || strstr(al->fields, "bc2");
  if (!opt_equal && (bc || strstr(al->fields, "optimizer_step"))) {
    rc_bufprintf(b->note, sizeof b->note,
                 "Adam's bias correction differs (optimizer_step %s vs %s): the optimizer step "
                 "count was not restored",
                 get_or(et, "optimizer_step"), get_or(er, "optimizer_step"));
  } else if (bc && opt_equal) {
    rc_bufprintf(b->note, sizeof b->note,
                 "Adam's bias corrections differ (bc1 %s vs %s, bc2 %s vs %s) though the optimizer "
                 "step count is equal (%s in both): computed, not handed over — the resumed "
                 "process computes them otherwise from the same count%s",
                 get_or(et, "bc1"), get_or(er, "bc1"), get_or(et, "bc2"), get_or(er, "bc2"), ot,
                 census);
  } else if (strstr(al->fields, "lr") && sched_equal) {
    rc_bufprintf(b->note, sizeof b->note,
                 "the learning rate differs (%s vs %s) though the scheduler's step count is equal "
                 "(%s in both): computed, not handed over — the resumed process's schedule "
                 "(warmup origin, min_lr, horizon) is not the through process's%s",
                 get_or(et, "lr"), get_or(er, "lr"), stt, census);
  } else if (strstr(al->fields, "lr")) {
    rc_bufprintf(b->note, sizeof b->note,
                 "the learning rate differs (%s vs %s): the scheduler state was not restored",
                 get_or(et, "lr"), get_or(er, "lr"));
  } else if (strstr(al->fields, "max_norm") || strstr(al->fields, "clip")) {
    /* the detached MTP heads' own clip (docs/events.md) when it is what differs */
    bool own = strstr(al->fields, "mtp_") && !event_differs_in(et, er, "clip") &&
               !event_differs_in(et, er, "max_norm");
    rc_bufprintf(b->note, sizeof b->note,
                 "the %sclip differs (coefficient %s vs %s, max-norm %s vs %s) with equal step "
                 "counts: the resumed process clips with another max-norm%s",
                 own ? "MTP heads' " : "", get_or(et, own ? "mtp_clip" : "clip"),
                 get_or(er, own ? "mtp_clip" : "clip"),
                 get_or(et, own ? "mtp_max_norm" : "max_norm"),
                 get_or(er, own ? "mtp_max_norm" : "max_norm"), census);
  }
}

/* An update the event log records (expert_bias, scaler_update) that
 * differs: what each process did. */
static void explain_update(rc_bisect *b, const rc_event *et, const rc_event *er) {
  char text[1200];
  if (!strcmp(et->kind, "expert_bias")) {
    const char *at = get_or(et, "applied"), *ar = get_or(er, "applied");
    const char *ct = get_or(et, "fp_counts"), *cr = get_or(er, "fp_counts");
    if (strcmp(at, ar))
      rc_bufprintf(text, sizeof text,
                   "the MoE expert-bias update of %s ran in the %s process and was skipped in the "
                   "%s one (applied %s vs %s), %s token counts",
                   et->name, !strcmp(at, "1") ? "through" : "resumed",
                   !strcmp(at, "1") ? "resumed" : "through", at, ar,
                   strcmp(ct, cr) ? "from different" : "with the same");
    else
      rc_bufprintf(text, sizeof text,
                   "the MoE expert-bias update of %s left another bias (rate %s vs %s, token "
                   "counts %s)",
                   et->name, get_or(et, "rate"), get_or(er, "rate"),
                   strcmp(ct, cr) ? "differ" : "equal");
  } else {
    rc_bufprintf(text, sizeof text,
                 "the loss scaler decided %s in the through process and %s in the resumed one "
                 "(scale %s vs %s, growth interval %s vs %s, hysteresis %s vs %s)",
                 get_or(et, "decision"), get_or(er, "decision"), get_or(et, "scale"),
                 get_or(er, "scale"), get_or(et, "growth_interval"), get_or(er, "growth_interval"),
                 get_or(et, "hysteresis"), get_or(er, "hysteresis"));
  }
  note_add(b, text);
}

/* What the first differing event means, where its kind says it (b->note). */
static void explain_event(rc_bisect *b, const rc_event *et, const rc_event *er, const char *bt,
                          const char *br) {
  const rc_alignment *al = &b->align;
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
    const char *st = rc_event_get(et, "samples"), *sr = rc_event_get(er, "samples");
    const char *ept = rc_event_get(et, "epoch"), *epr = rc_event_get(er, "epoch");
    if (st && sr && !strcmp(st, sr) && ept && epr && strcmp(ept, epr))
      rc_bufprintf(b->note, sizeof b->note,
                   "same data position, different samples: the sampler's state. Both processes "
                   "read from samples %s, but the through process's sampler is at epoch %s and "
                   "the resumed one's at epoch %s, so they map the position to other corpus "
                   "samples (%s differ)",
                   st, ept, epr, al->fields);
    else if (st && sr && !strcmp(st, sr))
      rc_bufprintf(b->note, sizeof b->note,
                   "same data position, different samples: the sampler's state. The resumed "
                   "process reads other data at the same data position (samples %s in both, %s "
                   "differ): the data order after the resume is not the through process's (a "
                   "sampler or shuffle state the checkpoint does not restore; see the census for "
                   "the data position)",
                   st, al->fields);
    else if (st && sr)
      rc_bufprintf(b->note, sizeof b->note,
                   "the resumed process reads different data (samples %s vs %s): the data "
                   "position was not restored",
                   st, sr);
    else
      rc_bufprintf(b->note, sizeof b->note,
                   "the resumed process reads other data at step %" PRId64
                   " (%s differ): the data position or the data order was not restored (the "
                   "trainer logs no samples= to tell which; see the census)",
                   et->step, al->fields);
  } else if (!strcmp(et->kind, "forward") && rc_event_get(et, "fp_in") &&
             strstr(al->fields, "fp_in")) {
    rc_bufprintf(b->note, sizeof b->note,
                 "its input already differs (fp_in): the difference comes from before this module "
                 "call, from data or code no hooked module's output covers (the batch when the "
                 "trainer logs none with events.batch, or an operation between modules)");
  } else if (!strcmp(et->kind, "forward") && rc_event_get(et, "fp_in") &&
             !strstr(al->fields, "fp_in")) {
    rc_bufprintf(b->note, sizeof b->note,
                 "same input (fp_in), different output: the module computed another value from "
                 "it%s. What it reads besides its input differs: module state the logged state "
                 "does not cover (a non-persistent buffer, a cached tensor, an attribute)",
                 b->have_state && !b->state_fields[0]
                     ? ", while the state going into the step (step_state: the parameters and "
                       "persistent buffers, the optimizer, the RNGs) agrees"
                     : "");
  } else if (!strcmp(et->kind, "dropout")) {
    rc_bufprintf(b->note, sizeof b->note,
                 "the dropout RNG draws from a different state (offset %s vs %s): the RNG state "
                 "was not restored",
                 rc_event_get(et, "offset") ? rc_event_get(et, "offset") : "?",
                 rc_event_get(er, "offset") ? rc_event_get(er, "offset") : "?");
  } else if (!strcmp(et->kind, "optimizer")) {
    explain_optimizer(b, et, er);
  } else if (!strcmp(et->kind, "expert_bias") || !strcmp(et->kind, "scaler_update")) {
    explain_update(b, et, er);
  } else if (!strcmp(et->kind, "backward") && strstr(al->fields, "fp_main_grad") &&
             !strstr(al->fields, "fp_out")) {
    rc_bufprintf(b->note, sizeof b->note,
                 "same flags, same input gradients, different main_grad after the GEMM: the buffer "
                 "held different values before it (not zeroed, or loaded stale)");
  }
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

  explain_event(b, et, er, bt, br);
}

/* "5" or "3,5": the through replay's saves at or before K. */
static void saves_upto(const rc_replay_proc *rp, int64_t k, char *buf, size_t cap) {
  buf[0] = 0;
  for (int i = 0; i < rp->n_saves; i++)
    if (rp->saves[i] <= k) {
      size_t l = strlen(buf);
      snprintf(buf + l, cap - l, "%s%d", l ? "," : "", rp->saves[i]);
    }
}

/* "see the state census: A vs B", or that there is none. */
static void census_phrase(const rc_bisect *b, char *buf, size_t cap) {
  if (b->census_found && b->census_text[0])
    rc_bufprintf(buf, cap, "the state census at step %" PRId64 ": %s", b->resume_step,
                 b->census_text);
  else if (b->census_found)
    rc_bufprintf(buf, cap, "see the state census: %s vs %s", b->census_through, b->census_resumed);
  else
    rc_bufprintf(buf, cap, "see the state census (no census was written by this run)");
}

/* The focus step's inputs differ: say what, and where they came from. */
static void inputs_text(rc_bisect *b) {
  const rc_alignment *al = &b->align;
  char first[1200] = "", state[700] = "", census[8400];
  census_phrase(b, census, sizeof census);
  if (b->state_fields[0])
    rc_bufprintf(state, sizeof state, "%s differ%s going into step %" PRId64, b->state_fields,
                 strchr(b->state_fields, ',') ? "" : "s", b->focus);
  if (al->index >= 0 && al->kind == RC_ALIGN_VALUES) {
    char d[512];
    rc_event_describe(&b->ev_through.ev[al->index], d, sizeof d);
    if (b->input_reading)
      rc_bufprintf(first, sizeof first,
                   "%s: %s differ%s, but it is an input of the step (%s), not what the operation "
                   "computed",
                   d, al->fields, strchr(al->fields, ',') ? "" : "s", b->input_reading);
    else
      rc_bufprintf(first, sizeof first,
                   "step %" PRId64 "'s first differing value (%s: %s) follows from the state the "
                   "step starts from: that operation is not blamed",
                   b->focus, d, al->fields);
  }
  if (b->focus > b->resume_step + 1 && b->have_prev) {
    b->cause = RC_CAUSE_PREVIOUS_UPDATE;
    if (b->prev_update >= 0) {
      char d[512];
      const rc_event *ut = &b->prev_through.ev[b->prev_update];
      rc_event_describe(ut, d, sizeof d);
      if (!strcmp(ut->kind, "expert_bias") || !strcmp(ut->kind, "scaler_update"))
        explain_update(b, ut, &b->prev_resume.ev[b->prev_update]);
      rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                   "%s: %s differ%s — the first differing update of step %" PRId64
                   ", which made the state step %" PRId64 " starts from differ (%s)%s%s",
                   d, b->prev_fields, strchr(b->prev_fields, ',') ? "" : "s", b->focus - 1,
                   b->focus, state[0] ? state : "its inputs", first[0] ? "; " : "", first);
    } else {
      rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                   "step %" PRId64 " starts from different state (%s), but no logged update of "
                   "step %" PRId64 " differs%s: the update that made it differ is not logged%s%s",
                   b->focus, state[0] ? state : "its inputs", b->focus - 1,
                   b->prev_structure ? " before its operations differ in structure" : "",
                   first[0] ? "; " : "", first);
    }
    if (b->prev_state_fields[0]) {
      size_t l = strlen(b->note);
      snprintf(b->note + l, sizeof b->note - l,
               "the state going into step %" PRId64 " already differed (%s)%s%s", b->focus - 1,
               b->prev_state_fields,
               b->focus - 1 == b->resume_step + 1
                   ? ": the state the resumed process started from differs from the through "
                     "process's; "
                   : "",
               b->focus - 1 == b->resume_step + 1 ? census : "");
    }
    return;
  }
  char saves[512];
  saves_upto(&b->rp_through, b->resume_step, saves, sizeof saves);
  if (b->probed && b->probe_agrees) {
    b->cause = RC_CAUSE_SAVE_SIDE_EFFECT;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the train-through process's own save at step %s changed its state: replayed "
                 "without it, the train-through process agrees with the resumed one at step "
                 "%" PRId64 " (state and every logged value); with it, %s. The checkpoint holds "
                 "the state from before the save changed it (a save-time side effect)%s%s",
                 saves, b->focus, state[0] ? state : "step's inputs differ", first[0] ? "; " : "",
                 first);
    return;
  }
  b->cause = RC_CAUSE_RESUME_STATE;
  rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
               "%s%sthe state the resumed process started step %" PRId64
               " from differs from the through process's%s%s%s: %s",
               first, first[0] ? "; " : "", b->focus, state[0] ? " (" : "", state,
               state[0] ? ")" : "", census);
  if (b->probed)
    rc_bufprintf(b->note, sizeof b->note,
                 "not a save-time side effect: replayed without its save at step %s, the "
                 "train-through process still differs from the resumed one (%s)",
                 saves, b->probe_fields[0] ? b->probe_fields : "at that step");
}

/* When the step's first differing input is its batch and the step_state
 * agrees, what orders the data is the suspect: say so after the note. */
static void data_order_note(rc_bisect *b) {
  const rc_alignment *al = &b->align;
  if (al->index < 0 || al->kind != RC_ALIGN_VALUES || b->state_fields[0] ||
      strcmp(b->ev_through.ev[al->index].kind, "batch"))
    return;
  const rc_event *et = &b->ev_through.ev[al->index], *er = &b->ev_resume.ev[al->index];
  const char *st = rc_event_get(et, "samples"), *sr = rc_event_get(er, "samples");
  char line[700];
  if (st && sr && strcmp(st, sr))
    rc_bufprintf(line, sizeof line,
                 "The resumed process reads from another data position (samples %s vs %s) while "
                 "the state going into the step agrees: the data position was not restored.",
                 st, sr);
  else if (st && sr && rc_event_get(et, "epoch") && rc_event_get(er, "epoch") &&
           strcmp(rc_event_get(et, "epoch"), rc_event_get(er, "epoch")))
    rc_bufprintf(line, sizeof line,
                 "Same data position, different samples: the sampler's state. Both processes read "
                 "from samples %s, but the through process's sampler is at epoch %s and the "
                 "resumed one's at epoch %s (%s differ): the sampler's epoch after the resume is "
                 "not the through process's (set_epoch not called, or called with another epoch).",
                 st, rc_event_get(et, "epoch"), rc_event_get(er, "epoch"), al->fields);
  else
    rc_bufprintf(line, sizeof line,
                 "The resumed process reads other data (%s differ%s%s%s) while the state going "
                 "into the step agrees%s: the data order after the resume is not the through "
                 "process's. Whatever orders the data (a sampler's epoch and position, a "
                 "shuffle's generator) is not in the checkpoint, or not restored from it.",
                 al->fields, strchr(al->fields, ',') ? "" : "s",
                 st ? " at the same data position, samples " : "", st ? st : "",
                 b->census_compared && !b->census.n_saved_differ ? " and the census finds the "
                                                                   "saved state identical"
                                                                 : "");
  size_t l = strlen(b->note);
  snprintf(b->note + l, sizeof b->note - l, "%s%s",
           !l                      ? ""
           : b->note[l - 1] == '.' ? " "
                                   : ". ",
           line);
}

static void decide(rc_bisect *b) {
  b->verdict = RC_BISECT_LOCATED;
  if (b->ckpt_compared && !b->ckpt_identical) {
    b->cause = RC_CAUSE_LOADED_STATE;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the checkpoint the resumed leg loaded already differs from through@%" PRId64
                 ": first differing state tensor %s",
                 b->resume_step, b->ckpt_first);
    return;
  }
  if (!b->traces_match) {
    b->verdict = RC_BISECT_REPLAY_MISMATCH;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text, "%s; its events are not the leg's",
                 b->trace_mismatch);
    return;
  }
  if (b->events_missing) {
    b->verdict = RC_BISECT_NOT_REPLAYABLE;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the run diverged (%s) and the trainer's legs were replayed%s, but they wrote no "
                 "event log (%s, %s): the trainer does not call "
                 "resumecheck.events.install(model, optimizer) (docs/bisect.md, \"PyTorch "
                 "trainers\"), so no operation can be named",
                 b->run_verdict_text, b->traces_checked ? " (their traces are the legs')" : "",
                 b->rp_through.events, b->rp_resume.events);
    return;
  }
  bool differs = b->focus >= 0 && (b->align.index >= 0 || b->state_fields[0]);
  if (differs && (b->state_fields[0] || b->input_reading)) {
    inputs_text(b);
    data_order_note(b);
    return;
  }
  if (differs) {
    b->cause = RC_CAUSE_OPERATION;
    located_text(b);
    return;
  }
  char range[160];
  rc_bufprintf(range, sizeof range,
               "the replays of steps %" PRId64 "..%" PRId64 " (their traces are the legs') agree "
               "in every logged value, %d operations and the state going into each step",
               b->events_from, b->events_to, b->n_compared_all);
  if (b->replay_ckpt_compared && !b->replay_ckpt_identical) {
    b->cause = RC_CAUSE_REPLAY_CHECKPOINT;
    rc_bufprintf(
        b->verdict_text, sizeof b->verdict_text,
        "the replays' checkpoints at step %" PRId64 " differ (%s vs %s), first %s, while %s: "
        "the difference is in state that no logged value shows",
        b->events_to, b->replay_ckpt_through, b->replay_ckpt_resume, b->replay_ckpt_first, range);
    return;
  }
  /* nothing any replayed step computes differs, but the processes held
   * different state at K: a divergence still to come */
  if (b->census_compared && b->census.n_saved_differ) {
    b->cause = RC_CAUSE_RESUME_STATE;
    char census[1800];
    census_phrase(b, census, sizeof census);
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the state the resumed process started step %" PRId64
                 " from differs from the through process's (%s), but %s: no replayed step uses "
                 "it yet",
                 b->resume_step + 1, census, range);
    return;
  }
  b->verdict = RC_BISECT_NOT_REPRODUCED;
  if (b->step >= 0)
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the run diverged at step %" PRId64 ", but %s: the divergence is not in a logged "
                 "operation",
                 b->step, range);
  else
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the run's traces agree and its checkpoints differ (%s: %s vs %s, first %s), but "
                 "%s%s",
                 b->check, b->check_a, b->check_b, b->run_dataset[0] ? b->run_dataset : "?", range,
                 b->replay_ckpt_compared ? " and their checkpoints at the range's end are identical"
                                         : "; they did not both save at the range's end");
}

/* The run's first divergence: the check, its two legs, their directories,
 * argv and saves, the resume point. A divergence bisect cannot replay sets
 * b->verdict and returns RC_OK with *replayable false. */
static int read_divergence(rc_bisect *b, const rc_json *rep, const char *path, const rc_json **av_t,
                           const rc_json **av_r, int64_t *last, bool *replayable, rc_err *err) {
  *replayable = false;
  const rc_json *fd = rc_json_get(rep, "first_divergence");
  const char *cls = fd ? rc_json_get_str(fd, "class") : NULL;
  const char *check_name = fd ? rc_json_get_str(fd, "check") : NULL;
  if (!cls || strcmp(cls, "resume") || !check_name) {
    b->verdict = RC_BISECT_NOT_REPLAYABLE;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the run differs (%s) but not as a resume divergence: bisect replays a resumed "
                 "process against a train-through one",
                 b->run_verdict_text);
    return RC_OK;
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
    return rc_fail(err, RC_EXIT_DATAERR, "%s: check '%s' does not name two legs of the run", path,
                   check_name);
  }
  copy_str(b->through_leg, sizeof b->through_leg, la);
  copy_str(b->resume_leg, sizeof b->resume_leg, lb);
  copy_str(b->through_name, sizeof b->through_name, rc_json_get_str(leg_t, "name"));
  copy_str(b->resume_name, sizeof b->resume_name, rc_json_get_str(leg_r, "name"));
  copy_str(b->through_arm, sizeof b->through_arm, rc_json_get_str(leg_t, "arm"));
  copy_str(b->resume_arm, sizeof b->resume_arm, rc_json_get_str(leg_r, "arm"));
  copy_str(b->ckpt_producer, sizeof b->ckpt_producer, rc_json_get_str(leg_r, "depends_on"));
  copy_str(b->run_dataset, sizeof b->run_dataset, rc_json_get_str(fd, "dataset"));
  *av_t = rc_json_get(leg_t, "argv"), *av_r = rc_json_get(leg_r, "argv");
  const char *from = rc_json_get_str(leg_r, "resume_from");
  if (!rc_json_get_i64(leg_r, "resume_step", &b->resume_step) || !from ||
      !rc_json_get_i64(leg_r, "last_step", last)) {
    return rc_fail(err, RC_EXIT_DATAERR, "%s: leg '%s' is not a resumed leg", path, lb);
  }
  char what[160];
  rc_bufprintf(what, sizeof what, "the checkpoint %s loaded,", lb);
  int rc;
  if ((rc = relocate(b, "the through leg's directory", rc_json_get_str(leg_t, "dir"),
                     b->through_dir, sizeof b->through_dir, err)) ||
      (rc = relocate(b, "the resumed leg's directory", rc_json_get_str(leg_r, "dir"), b->resume_dir,
                     sizeof b->resume_dir, err)) ||
      (rc = relocate(b, what, from, b->resume_from, sizeof b->resume_from, err)))
    return rc;
  /* the paths the run's check compared are only named, never read: a
   * missing one is no reason to stop */
  rc_err ignore = {0};
  if (relocate(b, "a checked path", rc_json_get_str(rc_json_get(check, "a"), "path"), b->check_a,
               sizeof b->check_a, &ignore) ||
      relocate(b, "a checked path", rc_json_get_str(rc_json_get(check, "b"), "path"), b->check_b,
               sizeof b->check_b, &ignore))
    copy_str(b->check_a, sizeof b->check_a, ""), copy_str(b->check_b, sizeof b->check_b, "");
  char iter[32];
  snprintf(iter, sizeof iter, RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT, b->resume_step);
  if (b->through_dir[0])
    rc_path_join(b->through_ckpt, sizeof b->through_ckpt, b->through_dir, iter);
  const rc_json *cfg = rc_json_get(rep, "config");
  const char *trainer = rc_json_get_str(cfg, "trainer");
  if (trainer && !strcmp(trainer, "exec")) {
    const char *tmpl = rc_json_get_str(cfg, "train_cmd");
    if (!tmpl || !rc_json_get_i64(cfg, "steps", &b->horizon)) {
      b->verdict = RC_BISECT_NOT_REPLAYABLE;
      rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                   "the run diverged (%s), but its report keeps no --train-cmd template or "
                   "horizon to replay its exec trainer's legs with",
                   b->run_verdict_text);
      return RC_OK;
    }
    if (rc_template_parse(tmpl, &b->tmpl, err)) {
      rc_err_prefix(err, "%s: the run's --train-cmd", path);
      err->code = RC_EXIT_DATAERR;
      return err->code;
    }
    b->exec = true;
    /* an exec leg's argv is the trainer's own: its saves are the report's */
    json_saves(rc_json_get(leg_t, "saves"), b->through_saves, &b->n_through_saves);
    json_saves(rc_json_get(leg_r, "saves"), b->resume_saves, &b->n_resume_saves);
    *replayable = true;
    return RC_OK;
  }
  if (!argv_is_train(*av_t) || !argv_is_train(*av_r)) {
    b->verdict = RC_BISECT_NOT_REPLAYABLE;
    rc_bufprintf(b->verdict_text, sizeof b->verdict_text,
                 "the run diverged (%s), but its legs are not `resumecheck train` processes: "
                 "bisect needs the built-in trainer's event log",
                 b->run_verdict_text);
    return RC_OK;
  }
  *replayable = true;
  return RC_OK;
}

/* Which steps the replays log events for. */
static void plan_events(rc_bisect *b, const rc_json *av_t, const rc_json *av_r, int64_t last) {
  if (!b->exec) {
    leg_saves(av_t, b->through_saves, &b->n_through_saves);
    leg_saves(av_r, b->resume_saves, &b->n_resume_saves);
  }
  /* The trace names S: replay to S with events on S, and on S-1 too when
   * it is after K+1 (its updates are what S starts from). Without a step
   * (state differs, traces equal) replay the whole resumed range. */
  if (b->step > b->resume_step) {
    b->focus = b->step;
    b->events_to = b->step;
    b->events_from = b->step > b->resume_step + 1 ? b->step - 1 : b->step;
  } else {
    b->focus = -1;
    b->events_from = b->resume_step + 1;
    b->events_to = last;
  }
}

/* path made absolute against the current directory: an exec trainer is
 * free to chdir, as `run` assumes of its legs. */
static int absolutize(char *path, size_t cap, rc_err *err) {
  if (!path[0] || path[0] == '/') return RC_OK;
  char cwd[PATH_MAX], tmp[PATH_MAX + 4200];
  if (!getcwd(cwd, sizeof cwd)) return rc_fail(err, RC_EXIT_IOERR, "getcwd: %s", strerror(errno));
  rc_path_join(tmp, sizeof tmp, cwd, path);
  if (strlen(tmp) >= cap) return rc_fail(err, RC_EXIT_USAGE, "%s: path too long", tmp);
  memcpy(path, tmp, strlen(tmp) + 1);
  return RC_OK;
}

/* Replays the legs and reads what they logged, until the first operation
 * whose values differ is found (decide() then says what it means). */
static int investigate(rc_bisect *b, const rc_json *av_t, const rc_json *av_r, rc_err *err) {
  int rc;
  if (!rc_is_dir(b->resume_from))
    return rc_fail(err, RC_EXIT_NOINPUT,
                   "the checkpoint the resumed leg loaded is not there: %s%s%s%s", b->resume_from,
                   b->same_dir ? "" : " (the run wrote its files under ",
                   b->same_dir ? "" : b->run_out,
                   b->same_dir ? "" : "; the run directory given does not hold this one)");
  if ((rc = check_loaded_state(b, err))) return rc;
  locate_census(b);
  if (b->exec && (absolutize(b->out_dir, sizeof b->out_dir, err) ||
                  absolutize(b->resume_from, sizeof b->resume_from, err)))
    return err->code;
  /* one bisect at a time writes the replay directory */
  if (rc_mkdir_p(b->out_dir, err)) return err->code;
  if (rc_dir_lock(b->out_dir, "bisect", &b->lock_fd, err)) return err->code;
  if ((rc = replay(b, av_t, av_r, err))) return rc;
  if (b->traces_match && !b->events_missing && !(b->ckpt_compared && !b->ckpt_identical)) {
    if ((rc = analyse_logs(b, err))) return rc;
    if (b->step < 0 && (rc = compare_replay_checkpoints(b, err))) return rc;
    char saves[512];
    saves_upto(&b->rp_through, b->resume_step, saves, sizeof saves);
    bool inputs = b->focus >= 0 && (b->state_fields[0] || b->input_reading);
    if (inputs && b->focus == b->resume_step + 1 && saves[0] && (rc = probe(b, av_t, err)))
      return rc;
  }
  return RC_OK;
}

static int bisect_body(rc_bisect *b, rc_err *err) {
  char path[4096], jerr[256];
  rc_path_join(path, sizeof path, b->opts.run_dir, RC_REPORT_NAME);
  if (!rc_path_exists(path))
    return rc_fail(err, RC_EXIT_NOINPUT,
                   "%s: no report.json (is this a `resumecheck run` directory?)", b->opts.run_dir);
  char *text;
  size_t n;
  if (rc_read_regular_file(path, RC_READ_CAP_JSON, false, &text, &n, err)) return err->code;
  rc_json *rep = rc_json_parse(text, n, jerr, sizeof jerr);
  free(text);
  if (!rep) return rc_fail(err, RC_EXIT_DATAERR, "%s: %s", path, jerr);
  int rc = RC_OK;
  if ((rc = rc_schema_accept(rep, RC_SCHEMA_RUN, path, err))) goto out;
  const char *verdict = rc_json_get_str(rep, "verdict");
  int64_t run_exit = -1;
  if (!verdict || !rc_json_get_i64(rep, "exit_code", &run_exit)) {
    rc = rc_fail(err, RC_EXIT_DATAERR, "%s: a run report without \"verdict\" and \"exit_code\"",
                 path);
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

  const rc_json *av_t = NULL, *av_r = NULL;
  int64_t last = -1;
  bool replayable;
  locate_run(b, rep);
  if ((rc = read_divergence(b, rep, path, &av_t, &av_r, &last, &replayable, err)) || !replayable)
    goto out;
  plan_events(b, av_t, av_r, last);
  if ((rc = investigate(b, av_t, av_r, err))) goto out;
  decide(b);
out:
  rc_json_free(rep);
  return rc;
}

int rc_bisect_run(rc_bisect *b, const rc_bisect_opts *opts) {
  memset(b, 0, sizeof *b);
  b->lock_fd = -1;
  b->opts = *opts;
  if (!b->opts.self_exe) b->opts.self_exe = "/proc/self/exe";
  if (b->opts.context <= 0) b->opts.context = 3;
  b->step = b->resume_step = b->focus = -1;
  b->align.index = b->prev_update = -1;
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
  if (b->lock_fd >= 0) close(b->lock_fd);
  b->lock_fd = -1;
  rc_template_free(&b->tmpl);
  rc_census_diff_free(&b->census);
  rc_events_free(&b->ev_through);
  rc_events_free(&b->ev_resume);
  rc_events_free(&b->prev_through);
  rc_events_free(&b->prev_resume);
  rc_events_free(&b->log_through);
  rc_events_free(&b->log_resume);
  rc_events_free(&b->log_probe);
  rc_alignment_free(&b->align);
}
