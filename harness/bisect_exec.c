/* bisect_exec.c — replaying an exec trainer's leg for `resumecheck bisect`
 * (docs/bisect.md, "PyTorch trainers").
 *
 * An exec leg is the run's --train-cmd template with the leg's placeholders
 * filled in (docs/exec-trainer.md). The replay fills the same template with
 * the leg's own values, except {stop_at} (the step bisect stops at), {save_at}
 * (the leg's saves up to that step, and that step) and {out} (the replay's
 * directory, never the run's), and sets RC_EVENTS / RC_EVENTS_FROM_STEP, the switch that makes
 * python/resumecheck/events.py log the step (docs/events.md). Nothing here
 * knows the trainer: the event log is the trainer's to write, and bisect
 * reads it as it reads the built-in trainer's. The process is spawned as a
 * run's leg is (rc_spawn_logged, harness/run_spawn.c). */
#define _XOPEN_SOURCE 700 /* nftw */
#include "bisect.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "harness/run.h"

extern char **environ;

/* The RC_* variables an exec leg gets (run_legs.c) and the event switch:
 * any of them in bisect's own environment is replaced, never inherited. */
static const char *const LEG_ENV[] = {
    "RC_SPAWN_TIME=", "RC_WAIT_FD=", "RC_DECIDE_FD=",   "RC_LEG=",
    "RC_STEPS=",      "RC_STOP_AT=", "RC_SAVE_AT=",     "RC_RESUME_FROM=",
    "RC_OUT=",        "RC_FUSION=",  RC_EVENTS_ENV "=", RC_EVENTS_FROM_STEP_ENV "="};
#define N_LEG_ENV (sizeof LEG_ENV / sizeof *LEG_ENV)
#define N_SET 9 /* the variables set below */

static bool is_leg_var(const char *entry) {
  for (size_t k = 0; k < N_LEG_ENV; k++)
    if (!strncmp(entry, LEG_ENV[k], strlen(LEG_ENV[k]))) return true;
  return false;
}

/* environ without LEG_ENV, plus names[i]=vals[i]; the strings added are
 * owned by *mine (free_env). NULL when out of memory. */
static char **replay_env(const char *const *names, const char *const *vals, int n, char ***mine) {
  int ne = 0;
  while (environ[ne]) ne++;
  char **env = calloc((size_t)(ne + n + 1), sizeof *env);
  char **own = calloc((size_t)(n + 1), sizeof *own);
  if (!env || !own) {
    free(env);
    free(own);
    return NULL;
  }
  int m = 0;
  for (int i = 0; i < ne; i++)
    if (!is_leg_var(environ[i])) env[m++] = environ[i];
  for (int i = 0; i < n; i++) {
    size_t sz = strlen(names[i]) + strlen(vals[i]) + 2;
    if (!(own[i] = malloc(sz))) {
      for (int k = 0; k < i; k++) free(own[k]);
      free(own);
      free(env);
      return NULL;
    }
    snprintf(own[i], sz, "%s=%s", names[i], vals[i]);
    env[m++] = own[i];
  }
  *mine = own;
  return env;
}

static void free_env(char **env, char **mine) {
  for (int i = 0; mine && mine[i]; i++) free(mine[i]);
  free(mine);
  free(env);
}

/* The marker that says a directory is an exec replay's, so a later bisect
 * may empty it: another trainer may append to what it finds there (a
 * trace.csv), which the built-in trainer never does. */
#define REPLAY_MARK ".resumecheck-bisect-replay"

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb;
  if (ftw->level == 0) return 0; /* the directory itself stays */
  return (type == FTW_DP ? rmdir(path) : unlink(path)) ? errno : 0;
}

int rc_bisect_exec_prepare_dir(const char *dir, rc_err *err) {
  char mark[4200];
  rc_path_join(mark, sizeof mark, dir, REPLAY_MARK);
  struct stat sb;
  if (lstat(dir, &sb) == 0) {
    if (!S_ISDIR(sb.st_mode))
      return rc_fail(err, RC_EXIT_IOERR, "%s is not a directory: not replaying into it", dir);
    DIR *d = opendir(dir);
    if (!d) return rc_fail(err, RC_EXIT_IOERR, "%s: %s", dir, strerror(errno));
    bool empty = true;
    struct dirent *e;
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
    closedir(d);
    if (!empty && !rc_path_exists(mark))
      return rc_fail(err, RC_EXIT_IOERR,
                     "%s holds files that no earlier bisect replay left (no %s): not removing "
                     "them; choose another --out",
                     dir, REPLAY_MARK);
    int rc = empty ? 0 : nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (rc)
      return rc_fail(err, RC_EXIT_IOERR, "emptying the earlier replay %s: %s", dir,
                     strerror(rc > 0 ? rc : errno));
  } else if (rc_mkdir_p(dir, err)) {
    return err->code;
  }
  static const char text[] = "resumecheck bisect: an exec trainer's replay\n";
  return rc_write_file_atomic(mark, text, sizeof text - 1, err);
}

int rc_bisect_exec_start(const rc_bisect *b, rc_replay_proc *rp, const char *name,
                         const char *label, const char *arm, const char *save_list,
                         const char *resume_from, pid_t *pid, rc_err *err) {
  char steps[24], stop[24], from[24];
  snprintf(steps, sizeof steps, "%" PRId64, b->horizon);
  snprintf(stop, sizeof stop, "%" PRId64, b->events_to);
  snprintf(from, sizeof from, "%" PRId64, b->events_from);
  const char *fusion = !strcmp(arm, "fusion-on") ? "on" : !strcmp(arm, "fusion-off") ? "off" : "";
  const char *rf = resume_from ? resume_from : "";
  const rc_template_var vars[] = {{"steps", steps},    {"stop_at", stop}, {"save_at", save_list},
                                  {"resume_from", rf}, {"out", rp->dir},  {"leg", name},
                                  {"fusion", fusion}};
  char **argv = NULL;
  int argc = 0;
  if (rc_template_expand(&b->tmpl, vars, (int)(sizeof vars / sizeof *vars), &argv, &argc, err)) {
    rc_err_prefix(err, "the run's --train-cmd");
    return err->code;
  }
  const char *names[N_SET] = {"RC_LEG",     "RC_STEPS",       "RC_STOP_AT",
                              "RC_SAVE_AT", "RC_RESUME_FROM", "RC_OUT",
                              "RC_FUSION",  RC_EVENTS_ENV,    RC_EVENTS_FROM_STEP_ENV};
  const char *vals[N_SET] = {label, steps, stop, save_list, rf, rp->dir, fusion, rp->events, from};
  char **mine = NULL;
  char **env = replay_env(names, vals, N_SET, &mine);
  if (!env) {
    rc_argv_free(argv);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  /* The command as a person can paste it: the event switch first, and the
   * checkpoint the resumed leg loads (events.py numbers its steps from it
   * when the trainer passes no start_step). Only the values are quoted: a
   * quoted name is no assignment. */
  char quoted[8192], evq[4400], rfq[4400] = "";
  char *evv[] = {rp->events, NULL}, *rfv[] = {(char *)rf, NULL};
  rc_argv_quote(argv, quoted, sizeof quoted);
  rc_argv_quote(evv, evq, sizeof evq);
  if (rf[0]) rc_argv_quote(rfv, rfq, sizeof rfq);
  rc_bufprintf(rp->cmd, sizeof rp->cmd, RC_EVENTS_ENV "=%s " RC_EVENTS_FROM_STEP_ENV "=%s %s%s%s%s",
               evq, from, rf[0] ? "RC_RESUME_FROM=" : "", rfq, rf[0] ? " " : "", quoted);
  int rc = rc_spawn_logged(argv, env, true, rp->log, rp->cmd, pid, err);
  free_env(env, mine);
  rc_argv_free(argv);
  return rc;
}
