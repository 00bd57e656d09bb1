/* run_legs.c — running the planned legs as processes.
 *
 * A small scheduler: legs start in plan order as soon as a job slot is free
 * and the checkpoint they resume from exists (the leg that writes it has
 * finished and left a COMPLETE marker), so through, save and aa start
 * together and each resume leg follows its producer. A leg that exits 0
 * must also have written every checkpoint it was asked for; otherwise it
 * counts as failed, with the reason. On the first failure the other legs
 * are stopped, unless --keep-going; on SIGINT/SIGTERM every leg is stopped.
 * Polling (20 ms) rather than SIGCHLD keeps the harness free of signal
 * state beyond the interrupt flag, and is far below a leg's run time. */
#include "run.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "harness/report.h"
#include "harness/run_signal.h"

extern char **environ;

#define KILL_GRACE_S 5.0 /* SIGTERM, then SIGKILL after this long */

/* environ plus RC_* variables describing the leg, for exec trainers that
 * prefer the environment to placeholders. Strings it adds are owned by
 * *extra (freed by free_env). */
static char **leg_env(const rc_run *run, const rc_leg *leg, char ***extra) {
  static const char *const names[] = {"RC_LEG=",         "RC_STEPS=", "RC_STOP_AT=", "RC_SAVE_AT=",
                                      "RC_RESUME_FROM=", "RC_OUT=",   "RC_FUSION="};
  enum { NX = 7 };
  int n = 0;
  while (environ[n]) n++;
  char **env = calloc((size_t)n + NX + 1, sizeof *env);
  char **mine = calloc(NX + 1, sizeof *mine);
  if (!env || !mine) goto oom;
  int m = 0;
  for (int i = 0; i < n; i++) {
    bool ours = false;
    for (int k = 0; k < NX; k++)
      if (!strncmp(environ[i], names[k], strlen(names[k]))) ours = true;
    if (!ours) env[m++] = environ[i];
  }
  size_t save_len = (size_t)leg->n_saves * 21 + 1;
  char *saves = malloc(save_len);
  if (!saves) goto oom;
  size_t len = 0;
  saves[0] = 0;
  for (int i = 0; i < leg->n_saves; i++)
    len += (size_t)snprintf(saves + len, save_len - len, "%s%" PRId64, i ? "," : "", leg->saves[i]);
  char steps[24], stop[24];
  snprintf(steps, sizeof steps, "%" PRId64, run->opts.steps);
  snprintf(stop, sizeof stop, "%" PRId64, leg->last_step);
  const char *fusion = !strcmp(leg->arm, "fusion-on")    ? "on"
                       : !strcmp(leg->arm, "fusion-off") ? "off"
                                                         : "";
  const char *vals[NX] = {leg->label, steps, stop, saves, leg->resume_from, leg->dir, fusion};
  for (int k = 0; k < NX; k++) {
    size_t sz = strlen(names[k]) + strlen(vals[k]) + 1;
    mine[k] = malloc(sz);
    if (!mine[k]) {
      free(saves);
      goto oom;
    }
    snprintf(mine[k], sz, "%s%s", names[k], vals[k]);
    env[m++] = mine[k];
  }
  free(saves);
  env[m] = NULL;
  *extra = mine;
  return env;
oom:
  if (mine)
    for (int k = 0; k < NX; k++) free(mine[k]);
  free(mine);
  free(env);
  return NULL;
}

static void free_env(char **env, char **extra) {
  if (extra)
    for (int k = 0; extra[k]; k++) free(extra[k]);
  free(extra);
  free(env);
}

static void start_leg(rc_run *run, int i, rc_progress *prog) {
  rc_leg *leg = &run->legs[i];
  rc_err err = {0};
  char **env = NULL, **extra = NULL;
  bool exec = run->opts.trainer == RC_TRAINER_EXEC;
  leg->t_start = rc_now();
  if (exec && !(env = leg_env(run, leg, &extra))) {
    rc_fail(&err, RC_EXIT_SOFTWARE, "out of memory");
  } else {
    char *header = malloc(65536);
    if (header) rc_leg_command(run, leg, header, 65536);
    rc_spawn_logged(leg->argv, env, exec, leg->log_path, header, &leg->pid, &err);
    free(header);
  }
  free_env(env, extra);
  if (err.code) {
    leg->state = RC_LEG_FAILED;
    leg->exit_code = 127;
    leg->wall_s = 0;
    rc_bufprintf(leg->reason, sizeof leg->reason, "%s", err.msg);
    rc_progress_leg_finished(prog, run, i);
    return;
  }
  leg->state = RC_LEG_RUNNING;
  rc_progress_leg_started(prog, run, i);
}

/* A leg that exited 0 must have left every checkpoint it was asked for. */
static bool check_outputs(rc_leg *leg) {
  for (int k = 0; k < leg->n_saves; k++) {
    if (leg->saves[k] > leg->last_step) continue;
    char path[RC_RUN_PATH_CAP + 64];
    snprintf(path, sizeof path, "%s/ckpt/iter_%07" PRId64 "/COMPLETE", leg->dir, leg->saves[k]);
    if (!rc_path_exists(path)) {
      snprintf(leg->reason, sizeof leg->reason,
               "exited 0 but wrote no complete checkpoint ckpt/iter_%07" PRId64
               " (no COMPLETE marker)",
               leg->saves[k]);
      return false;
    }
  }
  return true;
}

static void finish_leg(rc_run *run, int i, int status, bool was_killed) {
  rc_leg *leg = &run->legs[i];
  leg->wall_s = rc_now() - leg->t_start;
  leg->pid = -1;
  if (WIFEXITED(status)) {
    leg->exit_code = WEXITSTATUS(status);
    leg->term_signal = 0;
  } else if (WIFSIGNALED(status)) {
    leg->exit_code = 128 + WTERMSIG(status);
    leg->term_signal = WTERMSIG(status);
  }
  if (was_killed) {
    leg->state = RC_LEG_KILLED; /* reason set when it was stopped; add how far it got */
    char trace[RC_RUN_PATH_CAP + 16];
    snprintf(trace, sizeof trace, "%s/trace.csv", leg->dir);
    int64_t done = rc_trace_rows(trace);
    if (done > leg->steps_done) leg->steps_done = done;
    size_t len = strlen(leg->reason);
    snprintf(leg->reason + len, sizeof leg->reason - len,
             "; it had finished %" PRId64 " of its %" PRId64 " steps", leg->steps_done,
             leg->last_step - leg->resume_step);
  } else if (leg->term_signal) {
    leg->state = RC_LEG_FAILED;
    snprintf(leg->reason, sizeof leg->reason, "killed by signal %d (%s)", leg->term_signal,
             strsignal(leg->term_signal));
  } else if (leg->exit_code != 0) {
    leg->state = RC_LEG_FAILED;
    snprintf(leg->reason, sizeof leg->reason, "exited with status %d", leg->exit_code);
  } else {
    leg->state = check_outputs(leg) ? RC_LEG_OK : RC_LEG_FAILED;
  }
  if (leg->state != RC_LEG_OK) rc_log_tail(leg->log_path, 12, leg->log_tail, sizeof leg->log_tail);
}

int rc_run_legs(rc_run *run, rc_err *err) {
  (void)err;
  rc_progress prog;
  rc_progress_init(&prog, run);
  const int n = run->n_legs;
  double *kill_at = calloc((size_t)n, sizeof *kill_at); /* when SIGTERM was sent, 0 if not */
  if (!kill_at) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  double t0 = rc_now();
  bool stop = false;
  char stop_reason[256] = "";

  for (;;) {
    double now = rc_now();
    if (rc_run_interrupt_requested() && !run->interrupted) {
      run->interrupted = true;
      stop = true;
      int sig = rc_run_interrupt_signal();
      snprintf(stop_reason, sizeof stop_reason, "interrupted by %s",
               sig == SIGTERM  ? "SIGTERM"
               : sig == SIGINT ? "SIGINT"
                               : "a signal");
    }
    /* reap */
    int running = 0;
    for (int i = 0; i < n; i++) {
      rc_leg *leg = &run->legs[i];
      if (leg->state != RC_LEG_RUNNING) continue;
      int status = 0;
      pid_t r = waitpid(leg->pid, &status, WNOHANG);
      if (r == 0) {
        running++;
        continue;
      }
      if (r < 0 && errno == EINTR) {
        running++;
        continue;
      }
      if (r < 0) { /* not our child any more: nothing to wait for */
        status = 0x7f00;
      }
      finish_leg(run, i, status, kill_at[i] > 0);
      rc_progress_leg_finished(&prog, run, i);
      if (leg->state == RC_LEG_FAILED && !run->opts.keep_going && !stop) {
        stop = true;
        snprintf(stop_reason, sizeof stop_reason,
                 "stopped because leg %s failed (--keep-going runs the others)", leg->label);
      }
    }
    /* stop: terminate what runs, escalate after the grace period */
    if (stop) {
      for (int i = 0; i < n; i++) {
        rc_leg *leg = &run->legs[i];
        if (leg->state != RC_LEG_RUNNING) continue;
        if (!kill_at[i]) {
          snprintf(leg->reason, sizeof leg->reason, "%s", stop_reason);
          kill(-leg->pid, SIGTERM);
          kill_at[i] = now;
        } else if (now - kill_at[i] > KILL_GRACE_S) {
          kill(-leg->pid, SIGKILL);
        }
      }
    }
    /* launch */
    int pending = 0;
    for (int i = 0; i < n; i++) {
      rc_leg *leg = &run->legs[i];
      if (leg->state != RC_LEG_PENDING) continue;
      if (stop) {
        leg->state = RC_LEG_SKIPPED;
        snprintf(leg->reason, sizeof leg->reason, "not started: %s", stop_reason);
        continue;
      }
      if (leg->depends_on >= 0) {
        const rc_leg *dep = &run->legs[leg->depends_on];
        if (dep->state == RC_LEG_FAILED || dep->state == RC_LEG_KILLED ||
            dep->state == RC_LEG_SKIPPED) {
          leg->state = RC_LEG_SKIPPED;
          snprintf(leg->reason, sizeof leg->reason,
                   "not started: it needs the checkpoint of %s at step %" PRId64 ", and %s %s",
                   dep->label, leg->resume_step, dep->label,
                   dep->state == RC_LEG_FAILED   ? "failed"
                   : dep->state == RC_LEG_KILLED ? "was stopped"
                                                 : "never ran");
          continue;
        }
        if (dep->state != RC_LEG_OK) {
          pending++;
          continue;
        }
      }
      if (running >= run->opts.jobs) {
        pending++;
        continue;
      }
      start_leg(run, i, &prog);
      if (leg->state == RC_LEG_RUNNING) {
        running++;
      } else if (!run->opts.keep_going && !stop) { /* could not even start */
        stop = true;
        snprintf(stop_reason, sizeof stop_reason,
                 "stopped because leg %s failed (--keep-going runs the others)", leg->label);
      }
    }
    rc_progress_tick(&prog, run, rc_now());
    if (running == 0 && pending == 0) break;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  rc_progress_done(&prog);
  run->wall_s = rc_now() - t0;
  free(kill_at);
  return RC_OK;
}
