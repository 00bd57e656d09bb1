/* run_legs.c — running the planned legs as processes.
 *
 * A small scheduler: legs start in plan order as soon as a job slot is free,
 * so through, save and aa start together. A resume leg of the built-in
 * trainer starts as soon as its producer runs, pre-warmed: `train
 * --wait-for-checkpoint` sets up its backend and model, then waits for the
 * checkpoint's COMPLETE marker, and run tells it through a pipe when the
 * producer has ended (docs/robustness.md: why a pipe). Exec trainers cannot
 * be pre-warmed: their resume legs start once the producer has finished and
 * left the checkpoint. A leg that exits 0
 * must also have written every checkpoint it was asked for; otherwise it
 * counts as failed, with the reason. On the first failure the other legs
 * are stopped, unless --keep-going; on SIGINT/SIGTERM every leg is stopped;
 * a leg running longer than --leg-timeout is stopped the same way and fails
 * as timed out. Stopping is SIGTERM to the trainer's process group, SIGKILL
 * after a grace period.
 * Legs that share one GPU take turns (--gpu-scheduling critical-first): each
 * built-in leg gets `--step-lock DIR/.step.lock`, save and resume legs with
 * priority high, through and aa low (base/steplock.h): the critical path
 * save → resume steps alone, through and aa step in its gaps (while save
 * saves and resume loads) and after it.
 * Polling (20 ms) rather than SIGCHLD keeps the harness free of signal
 * state beyond the interrupt flag, and is far below a leg's run time. */
#include "run.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "harness/report.h"
#include "harness/run_signal.h"
#include "io/layout.h"

extern char **environ;

#define KILL_GRACE_S 5.0 /* SIGTERM, then SIGKILL after this long */

/* environ plus RC_* variables describing the leg: for every leg the spawn
 * time (start-up timing) and, pre-warmed, the wait pipe; for exec trainers,
 * which may prefer the environment to placeholders, the leg itself. Any
 * RC_* of these names in run's own environment is replaced. Strings it adds
 * are owned by *extra (freed by free_env). */
static char **leg_env(const rc_run *run, const rc_leg *leg, bool exec, double t_spawn,
                      char ***extra) {
  static const char *const names[] = {
      "RC_SPAWN_TIME=", "RC_WAIT_FD=", "RC_DECIDE_FD=",   "RC_LEG=", "RC_STEPS=",
      "RC_STOP_AT=",    "RC_SAVE_AT=", "RC_RESUME_FROM=", "RC_OUT=", "RC_FUSION="};
  enum { NX = 10 };
  int n = 0;
  while (environ[n]) n++;
  char **env = calloc((size_t)n + NX + 1, sizeof *env);
  char **mine = calloc(NX + 1, sizeof *mine);
  char *saves = NULL;
  if (!env || !mine) goto oom;
  int m = 0;
  for (int i = 0; i < n; i++) {
    bool ours = false;
    for (int k = 0; k < NX; k++)
      if (!strncmp(environ[i], names[k], strlen(names[k]))) ours = true;
    if (!ours) env[m++] = environ[i];
  }
  size_t save_len = (size_t)leg->n_saves * 21 + 1;
  saves = malloc(save_len);
  if (!saves) goto oom;
  size_t len = 0;
  saves[0] = 0;
  for (int i = 0; i < leg->n_saves; i++)
    len += (size_t)snprintf(saves + len, save_len - len, "%s%" PRId64, i ? "," : "", leg->saves[i]);
  char steps[24], stop[24], spawn[40];
  snprintf(steps, sizeof steps, "%" PRId64, run->opts.steps);
  snprintf(stop, sizeof stop, "%" PRId64, leg->last_step);
  snprintf(spawn, sizeof spawn, "%.9f", t_spawn);
  const char *fusion = !strcmp(leg->arm, "fusion-on")    ? "on"
                       : !strcmp(leg->arm, "fusion-off") ? "off"
                                                         : "";
  const char *vals[NX] = {spawn,    "3",   "3", leg->label, steps, stop, saves, leg->resume_from,
                          leg->dir, fusion};
  int k_mine = 0;
  for (int k = 0; k < NX; k++) {
    if (k == 1 && !leg->prewarmed) continue;
    if (k == 2 && leg->deferred_step <= 0) continue;
    if (k >= 3 && !exec) break;
    size_t sz = strlen(names[k]) + strlen(vals[k]) + 1;
    if (!(mine[k_mine] = malloc(sz))) goto oom;
    snprintf(mine[k_mine], sz, "%s%s", names[k], vals[k]);
    env[m++] = mine[k_mine++];
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
  free(saves);
  return NULL;
}

static void free_env(char **env, char **extra) {
  if (extra)
    for (int k = 0; extra[k]; k++) free(extra[k]);
  free(extra);
  free(env);
}

/* Whether the leg hands its checkpoints to the legs that load them before
 * they are durable (`train --handoff`): the built-in trainer, not
 * --no-handoff, and some leg of the run resumes from it (a waiting leg
 * accepts a note; one started after the producer ended finds COMPLETE).
 * With several ranks the save ignores it (io/handoff.c). */
static bool hands_over(const rc_run *run, const rc_leg *leg) {
  if (!run->opts.handoff || run->opts.trainer != RC_TRAINER_SELF) return false;
  int self = (int)(leg - run->legs);
  for (int j = 0; j < run->n_legs; j++)
    if (run->legs[j].depends_on == self) return true;
  return false;
}

/* argv plus the flags only this process needs: --wait-for-checkpoint for a
 * pre-warmed leg, --handoff for its producer, --step-lock FILE --step-priority P when the legs take
 * turns on the GPU. Neither is in leg->argv: a leg re-run by hand from its
 * repro line needs no wait and no turn. Borrows the words; leg->argv itself
 * when nothing is added; NULL on OOM. */
static char **spawn_argv(const rc_run *run, const rc_leg *leg) {
  bool handoff = hands_over(run, leg);
  if (!leg->prewarmed && !leg->step_locked && !handoff) return leg->argv;
  char **v = calloc((size_t)leg->argc + 9, sizeof *v);
  if (!v) return NULL;
  int n = 0;
  for (int k = 0; k < leg->argc; k++) v[n++] = leg->argv[k];
  if (leg->prewarmed) v[n++] = "--wait-for-checkpoint";
  if (handoff) v[n++] = "--handoff";
  if (leg->step_locked) {
    v[n++] = "--step-lock";
    v[n++] = (char *)run->step_lock;
    v[n++] = "--step-priority";
    v[n++] = (char *)rc_step_priority_name(leg->step_priority);
  }
  if (leg->gated) {
    v[n++] = "--start-gate";
    v[n++] = (char *)run->start_gate;
  }
  return v;
}

/* Whether a leg starting now waits at the start gate: it is held, and the
 * leg is off the critical path (low) or a pre-warmed resume leg, whose
 * set-up has until its producer's save is done. */
static bool gate_applies(const rc_run *run, const rc_leg *leg) {
  return run->start_gate_fd >= 0 && leg->step_locked &&
         (leg->step_priority == RC_STEP_PRIORITY_LOW || leg->prewarmed);
}

/* A leg that starts the run's critical path: high priority, loading from
 * no other leg (the save legs). */
static bool critical_head(const rc_leg *leg) {
  return leg->step_locked && leg->step_priority == RC_STEP_PRIORITY_HIGH && leg->depends_on < 0;
}

/* Lets go of the start gate once no critical head is still setting up: each
 * has finished its first step (a trace row) or ended, or has not started
 * (no job slot: waiting for it could deadlock the legs that hold the slots). */
static void open_gate_when_due(rc_run *run, bool stopping, double t0) {
  if (run->start_gate_fd < 0) return;
  bool due = true;
  for (int i = 0; i < run->n_legs && due && !stopping; i++) {
    const rc_leg *leg = &run->legs[i];
    if (!critical_head(leg) || leg->state != RC_LEG_RUNNING) continue;
    char path[RC_RUN_PATH_CAP + 16];
    snprintf(path, sizeof path, "%s/" RC_TRACE_NAME, leg->dir);
    due = rc_trace_rows(path) > 0;
  }
  if (!due) return;
  (void)flock(run->start_gate_fd, LOCK_UN); /* for every copy of the descriptor */
  close(run->start_gate_fd);
  run->start_gate_fd = -1;
  run->start_gate_open_s = rc_now() - t0;
}

/* The pipe of a pre-warmed leg: the read end above fd 4 (the supervisor
 * makes it the leg's fd 3), both ends close-on-exec so no other leg holds
 * them: the write end's last copy is run's, and its closing (by run, or by
 * the kernel when run dies) is what the leg sees. */
static int wait_pipe(int *rfd, int *wfd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC)) return -1;
  int r = fcntl(p[0], F_DUPFD_CLOEXEC, 10);
  close(p[0]);
  if (r < 0) {
    close(p[1]);
    return -1;
  }
  *rfd = r;
  *wfd = p[1];
  return 0;
}

static void close_wait_pipe(rc_leg *leg) {
  if (leg->wait_wfd > 0) close(leg->wait_wfd);
  leg->wait_wfd = 0;
  /* a deferred save never told: the leg read the end of the pipe (full) */
  if (leg->decide_wfd > 0) close(leg->decide_wfd);
  leg->decide_wfd = 0;
}

static void start_leg(rc_run *run, int i, rc_progress *prog) {
  rc_leg *leg = &run->legs[i];
  rc_err err = {0};
  char **env = NULL, **extra = NULL, **argv = leg->argv;
  bool exec = run->opts.trainer == RC_TRAINER_EXEC;
  int rfd = -1;
  leg->t_start = rc_now();
  leg->gated = gate_applies(run, leg);
  /* fd 3 of the leg: the wait pipe of a pre-warmed leg, or the decision
   * pipe of a deferred save (a through leg: never pre-warmed) */
  if ((leg->prewarmed && wait_pipe(&rfd, &leg->wait_wfd)) ||
      (!leg->prewarmed && leg->deferred_step > 0 && wait_pipe(&rfd, &leg->decide_wfd))) {
    rc_fail(&err, RC_EXIT_SOFTWARE, "pipe: %s", strerror(errno));
  } else if (!(argv = spawn_argv(run, leg))) {
    rc_fail(&err, RC_EXIT_SOFTWARE, "out of memory");
  } else if (!(env = leg_env(run, leg, exec, leg->t_start, &extra))) {
    rc_fail(&err, RC_EXIT_SOFTWARE, "out of memory");
  } else {
    char *header = malloc(65536);
    if (header) rc_leg_command(run, leg, header, 65536);
    rc_spawn_leg(argv, env, exec, leg->log_path, header, rfd, &leg->pid, &leg->pgid, &err);
    free(header);
  }
  if (rfd >= 0) close(rfd); /* the leg's copy is its own now */
  if (argv != leg->argv) free(argv);
  free_env(env, extra);
  if (err.code) {
    close_wait_pipe(leg);
    leg->state = RC_LEG_FAILED;
    leg->exit_code = 127;
    leg->wall_s = 0;
    rc_bufprintf(leg->reason, sizeof leg->reason, "%s", err.msg);
    rc_progress_leg_finished(prog, run, i);
    return;
  }
  leg->state = RC_LEG_RUNNING;
  leg->t_bound = leg->t_start;
  rc_progress_leg_started(prog, run, i);
}

/* A leg that exited 0 must have left every checkpoint it was asked for. */
static bool check_outputs(rc_leg *leg) {
  for (int k = 0; k < leg->n_saves; k++) {
    if (leg->saves[k] > leg->last_step) continue;
    char path[RC_RUN_PATH_CAP + 64];
    snprintf(path, sizeof path, "%s/" RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT "/" RC_COMPLETE_NAME,
             leg->dir, leg->saves[k]);
    if (!rc_path_exists(path)) {
      snprintf(leg->reason, sizeof leg->reason,
               "exited 0 but wrote no complete checkpoint " RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT
               " (no " RC_COMPLETE_NAME " marker)",
               leg->saves[k]);
      return false;
    }
  }
  return true;
}

/* A leg's checkpoint must be its own: its ckpt directory and each iteration
 * directory a real directory inside the leg's directory (not a symbolic
 * link), and none of its files the very file (device and inode) that
 * another leg has at the same step. A checkpoint linked to another leg's
 * would be compared with itself and called identical; it fails the leg
 * instead, with the reason. What is a link may be anything; lstat only. */
static bool is_real_dir(const char *path, struct stat *st) {
  return lstat(path, st) == 0 && S_ISDIR(st->st_mode);
}

static bool same_file_as(const rc_run *run, rc_leg *leg, int64_t step, const char *iter) {
  for (int j = 0; j < run->n_legs; j++) {
    const rc_leg *other = &run->legs[j];
    if (other == leg) continue;
    char oi[RC_RUN_PATH_CAP + 64];
    rc_bufprintf(oi, sizeof oi, "%s/" RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT, other->dir, step);
    rc_err e = {0};
    if (rc_run_same_checkpoint(iter, oi, &e)) {
      rc_bufprintf(leg->reason, sizeof leg->reason,
                   "its checkpoint " RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT
                   " is not its own but %s's: %s",
                   step, other->label, e.msg);
      return true;
    }
  }
  return false;
}

static bool own_checkpoints(const rc_run *run, rc_leg *leg) {
  char ckpt[RC_RUN_PATH_CAP + 16], iter[RC_RUN_PATH_CAP + 64];
  struct stat st;
  rc_bufprintf(ckpt, sizeof ckpt, "%s/" RC_CKPT_DIR_NAME, leg->dir);
  bool any = false;
  for (int k = 0; k < leg->n_saves; k++) any = any || leg->saves[k] <= leg->last_step;
  if (!any) return true;
  if (!is_real_dir(leg->dir, &st) || !is_real_dir(ckpt, &st)) {
    rc_bufprintf(leg->reason, sizeof leg->reason,
                 "%s is not a real directory (a symbolic link?): a leg's checkpoints must be "
                 "real directories inside its leg directory",
                 is_real_dir(leg->dir, &st) ? ckpt : leg->dir);
    return false;
  }
  for (int k = 0; k < leg->n_saves; k++) {
    if (leg->saves[k] > leg->last_step) continue;
    rc_bufprintf(iter, sizeof iter, "%s/" RC_ITER_NAME_FORMAT, ckpt, leg->saves[k]);
    if (!is_real_dir(iter, &st)) {
      char target[RC_RUN_PATH_CAP] = "";
      ssize_t n = readlink(iter, target, sizeof target - 1);
      if (n > 0) target[n] = 0;
      rc_bufprintf(leg->reason, sizeof leg->reason,
                   "its checkpoint " RC_CKPT_DIR_NAME "/" RC_ITER_NAME_FORMAT
                   " is %s%s: a leg's checkpoint must be a real directory inside its leg "
                   "directory, never a link",
                   leg->saves[k], n > 0 ? "a symbolic link to " : "not a directory",
                   n > 0 ? target : "");
      return false;
    }
    if (same_file_as(run, leg, leg->saves[k], iter)) return false;
  }
  return true;
}

/* "failed" or "timed out", for the legs that follow it. */
static const char *failed_how(const rc_leg *leg) {
  return leg->timed_out ? "timed out" : "failed";
}

static void finish_leg(rc_run *run, int i, int status, bool was_killed) {
  rc_leg *leg = &run->legs[i];
  leg->wall_s = rc_now() - leg->t_start;
  leg->pid = -1;
  leg->pgid = -1;
  if (WIFEXITED(status)) {
    leg->exit_code = WEXITSTATUS(status);
    leg->term_signal = 0;
  } else if (WIFSIGNALED(status)) {
    leg->exit_code = 128 + WTERMSIG(status);
    leg->term_signal = WTERMSIG(status);
  }
  if (was_killed) {
    /* reason set when it was stopped; add how far it got */
    leg->state = leg->timed_out ? RC_LEG_FAILED : RC_LEG_KILLED;
    char trace[RC_RUN_PATH_CAP + 16];
    snprintf(trace, sizeof trace, "%s/" RC_TRACE_NAME, leg->dir);
    int64_t done = rc_trace_rows(trace);
    if (done > leg->steps_done) leg->steps_done = done;
    size_t len = strlen(leg->reason);
    snprintf(leg->reason + len, sizeof leg->reason - len,
             "; it had finished %" PRId64 " of its %" PRId64 " steps", leg->steps_done,
             leg->last_step - leg->resume_step);
  } else if (leg->prewarmed && leg->exit_code == RC_EXIT_NOINPUT &&
             run->legs[leg->depends_on].state != RC_LEG_OK) {
    /* it ended its wait because run said the checkpoint will not come */
    const rc_leg *dep = &run->legs[leg->depends_on];
    leg->state = RC_LEG_KILLED;
    snprintf(leg->reason, sizeof leg->reason,
             "stopped waiting: it needs the checkpoint of %s at step %" PRId64 ", and %s %s",
             dep->label, leg->resume_step, dep->label,
             dep->state == RC_LEG_FAILED ? failed_how(dep) : "was stopped");
  } else if (leg->term_signal) {
    leg->state = RC_LEG_FAILED;
    snprintf(leg->reason, sizeof leg->reason, "killed by signal %d (%s)", leg->term_signal,
             strsignal(leg->term_signal));
  } else if (leg->exit_code != 0) {
    leg->state = RC_LEG_FAILED;
    snprintf(leg->reason, sizeof leg->reason, "exited with status %d", leg->exit_code);
  } else {
    leg->state = check_outputs(leg) && own_checkpoints(run, leg) ? RC_LEG_OK : RC_LEG_FAILED;
  }
  if (leg->state != RC_LEG_OK) rc_log_tail(leg->log_path, 12, leg->log_tail, sizeof leg->log_tail);
  close_wait_pipe(leg);
  leg->waiting = false;
  if (run->opts.trainer == RC_TRAINER_SELF) rc_leg_timing_read(leg->dir, &leg->timing);
}

/* A leg ended: the pre-warmed legs that wait for its checkpoints are told,
 * by the end of their pipe. Each then loads, if the checkpoint it needs is
 * complete, or ends at once (66, "will not come"). RC_TEST_KEEP_WAIT_PIPES
 * (tests only) skips this, to show that nothing else would end the wait. */
static void release_waiters(rc_run *run, int producer, bool keep_pipes, double now) {
  for (int j = 0; j < run->n_legs; j++) {
    rc_leg *leg = &run->legs[j];
    if (leg->depends_on != producer) continue;
    if (leg->state == RC_LEG_RUNNING) leg->t_bound = now; /* it waited: its own time starts now */
    if (!keep_pipes) close_wait_pipe(leg);
  }
}

/* Sends sig to the leg's trainer and everything in its process group. */
static void signal_leg(const rc_leg *leg, int sig) {
  if (leg->pgid > 1) kill(-leg->pgid, sig);
}

/* --gpu-scheduling: decides whether the legs take turns and, if so, creates
 * the lock file inside the run directory (a regular file, refused as an
 * I/O error when something else is in its place) and gives each leg its
 * priority. The file holds nothing; it is removed when the legs are done. */
/* A lock file of the run directory, DIR/name: a regular file (refused as an
 * I/O error when something else is in its place), opened close-on-exec;
 * its path in path. */
static int open_run_lock_file(const rc_run *run, const char *name, char *path, size_t cap, int *fd,
                              rc_err *err) {
  rc_bufprintf(path, cap, "%s/%s", run->opts.out_dir, name);
  *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644);
  struct stat st;
  if (*fd < 0 || fstat(*fd, &st) || !S_ISREG(st.st_mode)) {
    int e = *fd < 0 ? errno : 0;
    if (*fd >= 0) close(*fd);
    *fd = -1;
    return rc_fail(err, RC_EXIT_IOERR, "--gpu-scheduling critical-first: cannot use %s: %s", path,
                   e ? strerror(e) : "not a regular file");
  }
  return RC_OK;
}

static int setup_step_lock(rc_run *run, rc_err *err) {
  run->step_lock[0] = run->start_gate[0] = 0;
  run->start_gate_fd = -1;
  run->start_gate_open_s = -1;
  if (!rc_run_critical_first(run)) return RC_OK;
  char path[RC_RUN_PATH_CAP];
  int fd;
  int rc = open_run_lock_file(run, ".step.lock", path, sizeof path, &fd, err);
  if (rc) return rc;
  close(fd);
  snprintf(run->step_lock, sizeof run->step_lock, "%s", path);
  /* the start gate, held from here; nobody else opens it before the legs
   * (DIR/.lock keeps other runs out), so LOCK_NB cannot lose a race */
  if ((rc = open_run_lock_file(run, ".start.gate", path, sizeof path, &fd, err))) return rc;
  if (flock(fd, LOCK_EX | LOCK_NB)) {
    int e = errno;
    close(fd);
    return rc_fail(err, RC_EXIT_IOERR, "--gpu-scheduling critical-first: cannot lock %s: %s", path,
                   strerror(e));
  }
  snprintf(run->start_gate, sizeof run->start_gate, "%s", path);
  run->start_gate_fd = fd;
  for (int i = 0; i < run->n_legs; i++) {
    run->legs[i].step_locked = true;
    run->legs[i].step_priority = rc_leg_step_priority(&run->legs[i]);
  }
  return RC_OK;
}

/* The scheduler's state across its ticks. */
typedef struct {
  rc_run *run;
  double *kill_at; /* per leg: when SIGTERM was sent, 0 if not */
  bool stop;       /* start nothing more, stop what runs */
  bool keep_pipes; /* RC_TEST_KEEP_WAIT_PIPES: a test keeps a stopped leg's wait pipe open */
  char stop_reason[256];
  rc_progress prog;
} scheduler;

__attribute__((format(printf, 2, 3))) static void stop_because(scheduler *s, const char *fmt, ...) {
  s->stop = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->stop_reason, sizeof s->stop_reason, fmt, ap);
  va_end(ap);
}

static void note_interrupt(scheduler *s) {
  if (!rc_run_interrupt_requested() || s->run->interrupted) return;
  s->run->interrupted = true;
  int sig = rc_run_interrupt_signal();
  stop_because(s, "interrupted by %s",
               sig == SIGTERM  ? "SIGTERM"
               : sig == SIGINT ? "SIGINT"
                               : "a signal");
}

/* Reaps the legs that ended; returns how many still run. */
static int reap(scheduler *s, double now) {
  rc_run *run = s->run;
  int running = 0;
  for (int i = 0; i < run->n_legs; i++) {
    rc_leg *leg = &run->legs[i];
    if (leg->state != RC_LEG_RUNNING) continue;
    int status = 0;
    pid_t r = waitpid(leg->pid, &status, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR)) {
      running++;
      continue;
    }
    if (r < 0) status = 0x7f00; /* not our child any more: nothing to wait for */
    finish_leg(run, i, status, s->kill_at[i] > 0);
    release_waiters(run, i, s->keep_pipes, now);
    rc_progress_leg_finished(&s->prog, run, i);
    if (leg->state == RC_LEG_FAILED && !run->opts.keep_going && !s->stop)
      stop_because(s, "stopped because leg %s %s (--keep-going runs the others)", leg->label,
                   failed_how(leg));
  }
  return running;
}

static void terminate_leg(scheduler *s, int i, double now) {
  rc_leg *leg = &s->run->legs[i];
  if (!s->keep_pipes) close_wait_pipe(leg);
  signal_leg(leg, SIGTERM);
  s->kill_at[i] = now;
}

/* --leg-timeout: a leg past its bound is stopped as an interrupted one is,
 * and fails as "timed out"; on stop, every running leg is terminated; and
 * whatever was told to stop and still runs after the grace period is killed. */
static void enforce_stops(scheduler *s, double now) {
  rc_run *run = s->run;
  const double bound = run->opts.leg_timeout_s;
  for (int i = 0; i < run->n_legs && bound > 0; i++) {
    rc_leg *leg = &run->legs[i];
    if (leg->state != RC_LEG_RUNNING || s->kill_at[i] || now - leg->t_bound <= bound) continue;
    leg->timed_out = true;
    snprintf(leg->reason, sizeof leg->reason, "timed out after %g s (--leg-timeout)", bound);
    terminate_leg(s, i, now);
  }
  for (int i = 0; i < run->n_legs && s->stop; i++) {
    rc_leg *leg = &run->legs[i];
    if (leg->state != RC_LEG_RUNNING || s->kill_at[i]) continue;
    snprintf(leg->reason, sizeof leg->reason, "%s", s->stop_reason);
    terminate_leg(s, i, now);
  }
  for (int i = 0; i < run->n_legs; i++)
    if (run->legs[i].state == RC_LEG_RUNNING && s->kill_at[i] && now - s->kill_at[i] > KILL_GRACE_S)
      signal_leg(&run->legs[i], SIGKILL);
}

/* Whether a pending leg's producer lets it start now. A producer that
 * failed, was stopped or never ran skips it. Self-trainer legs start
 * pre-warmed once their producer runs (not before: a waiting leg holds a
 * job slot, and waits only for a leg that holds one too); exec trainers
 * once it has finished. */
static bool producer_ready(rc_run *run, rc_leg *leg) {
  if (leg->depends_on < 0) return true;
  const rc_leg *dep = &run->legs[leg->depends_on];
  if (dep->state == RC_LEG_FAILED || dep->state == RC_LEG_KILLED || dep->state == RC_LEG_SKIPPED) {
    leg->state = RC_LEG_SKIPPED;
    snprintf(leg->reason, sizeof leg->reason,
             "not started: it needs the checkpoint of %s at step %" PRId64 ", and %s %s",
             dep->label, leg->resume_step, dep->label,
             dep->state == RC_LEG_FAILED   ? failed_how(dep)
             : dep->state == RC_LEG_KILLED ? "was stopped"
                                           : "never ran");
    return false;
  }
  bool prewarm = run->opts.trainer == RC_TRAINER_SELF;
  if (dep->state != RC_LEG_OK && !(prewarm && dep->state == RC_LEG_RUNNING)) return false;
  leg->prewarmed = prewarm && dep->state == RC_LEG_RUNNING;
  return true;
}

/* Starts what may start, within --jobs; returns how many wait. */
static int launch(scheduler *s, int *running) {
  rc_run *run = s->run;
  int pending = 0;
  for (int i = 0; i < run->n_legs; i++) {
    rc_leg *leg = &run->legs[i];
    if (leg->state != RC_LEG_PENDING) continue;
    if (s->stop) {
      leg->state = RC_LEG_SKIPPED;
      snprintf(leg->reason, sizeof leg->reason, "not started: %s", s->stop_reason);
      continue;
    }
    if (!producer_ready(run, leg)) {
      if (leg->state == RC_LEG_PENDING) pending++;
      continue;
    }
    if (*running >= run->opts.jobs) {
      pending++;
      continue;
    }
    start_leg(run, i, &s->prog);
    if (leg->state == RC_LEG_RUNNING)
      (*running)++;
    else if (!run->opts.keep_going && !s->stop) /* could not even start */
      stop_because(s, "stopped because leg %s failed (--keep-going runs the others)", leg->label);
  }
  return pending;
}

int rc_run_legs(rc_run *run, rc_err *err) {
  scheduler s = {.run = run};
  s.kill_at = calloc((size_t)run->n_legs, sizeof *s.kill_at);
  if (!s.kill_at) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  int rc = setup_step_lock(run, err);
  if (rc) {
    free(s.kill_at);
    return rc;
  }
  rc_progress_init(&s.prog, run);
  double t0 = rc_now();
  const char *keep_env = getenv("RC_TEST_KEEP_WAIT_PIPES");
  s.keep_pipes = keep_env && *keep_env == '1';
  for (;;) {
    double now = rc_now();
    note_interrupt(&s);
    int running = reap(&s, now);
    enforce_stops(&s, now);
    int pending = launch(&s, &running);
    open_gate_when_due(run, s.stop, t0);
    rc_run_deferred_poll(run, running);
    rc_run_early_checks_poll(run);
    rc_progress_tick(&s.prog, run, rc_now());
    if (running == 0 && pending == 0) break;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  rc_progress_done(&s.prog);
  run->wall_s = rc_now() - t0;
  free(s.kill_at);
  if (run->start_gate_fd >= 0) close(run->start_gate_fd);
  run->start_gate_fd = -1;
  if (run->step_lock[0]) (void)unlink(run->step_lock); /* every leg has ended: nobody holds it */
  if (run->start_gate[0]) (void)unlink(run->start_gate);
  return RC_OK;
}
