/* steplock.c — the step lock of steplock.h: flock(2) on one shared file,
 * LOCK_SH held by high-priority legs while they step, LOCK_EX taken and
 * dropped by low-priority legs before each step. */
#include "steplock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *rc_step_priority_name(rc_step_priority p) {
  return p == RC_STEP_PRIORITY_LOW ? "low" : "high";
}

bool rc_step_priority_parse(const char *s, rc_step_priority *p) {
  if (!strcmp(s, "high")) {
    *p = RC_STEP_PRIORITY_HIGH;
    return true;
  }
  if (!strcmp(s, "low")) {
    *p = RC_STEP_PRIORITY_LOW;
    return true;
  }
  return false;
}

void rc_step_lock_none(rc_step_lock *l) {
  memset(l, 0, sizeof *l);
  l->fd = -1;
}

static const char *kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

/* Opens path for flock (created if missing, 0644) as `flag` FILE: refuses
 * what is not a regular file before opening it for anything but
 * inspection (opening a FIFO or a device can block or act), and checks
 * again what was opened, in case it was swapped meanwhile. */
static int open_lock_file(const char *path, const char *flag, int *out, rc_err *err) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return rc_fail(err, RC_EXIT_IOERR, "%s %s: %s, not a regular file (nothing was trained)", flag,
                   path, kind_of(st.st_mode));
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
  if (fd < 0 && (errno == EACCES || errno == EROFS)) /* an existing file we may only read */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return rc_fail(err, RC_EXIT_IOERR, "%s %s: cannot open: %s (nothing was trained)", flag, path,
                   strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = errno;
    close(fd);
    return rc_fail(err, RC_EXIT_IOERR, "%s %s: %s (nothing was trained)", flag, path,
                   e ? strerror(e) : kind_of(st.st_mode));
  }
  *out = fd;
  return RC_OK;
}

int rc_step_lock_open(rc_step_lock *l, const char *path, rc_step_priority priority, rc_err *err) {
  rc_step_lock_none(l);
  int rc = open_lock_file(path, "--step-lock", &l->fd, err);
  if (!rc) l->priority = priority;
  return rc;
}

/* flock, blocking, retried after a signal that did not end the process;
 * the seconds it blocked are added to waited_s. */
static int lock_wait(rc_step_lock *l, int op) {
  double t = now_s();
  int r;
  while ((r = flock(l->fd, op)) != 0 && errno == EINTR) {
  }
  l->waited_s += now_s() - t;
  return r;
}

/* A failed lock call (not a signal: EBADF, ENOLCK...): said once, then the
 * leg steps unscheduled. */
static void give_up(rc_step_lock *l, const char *what) {
  fprintf(stderr,
          "resumecheck train: warning: --step-lock: %s: %s; stepping unscheduled from now\n", what,
          strerror(errno));
  rc_step_lock_close(l);
}

void rc_step_lock_enter(rc_step_lock *l) {
  if (l->fd < 0) return;
  if (l->priority == RC_STEP_PRIORITY_HIGH) {
    if (l->held) return;
    if (lock_wait(l, LOCK_SH)) {
      give_up(l, "flock(LOCK_SH)");
      return;
    }
    l->held = true;
    return;
  }
  /* low: only while no high leg holds its shared lock */
  if (lock_wait(l, LOCK_EX)) {
    give_up(l, "flock(LOCK_EX)");
    return;
  }
  if (flock(l->fd, LOCK_UN)) give_up(l, "flock(LOCK_UN)");
}

void rc_step_lock_leave(rc_step_lock *l) {
  if (l->fd < 0 || !l->held) return;
  l->held = false;
  if (flock(l->fd, LOCK_UN)) give_up(l, "flock(LOCK_UN)");
}

void rc_step_lock_close(rc_step_lock *l) {
  if (l->fd >= 0) close(l->fd); /* drops any lock still held */
  l->fd = -1;
  l->held = false;
}

int rc_start_gate_wait(const char *path, double *waited_s, rc_err *err) {
  *waited_s = 0;
  rc_step_lock l;
  rc_step_lock_none(&l);
  int rc = open_lock_file(path, "--start-gate", &l.fd, err);
  if (rc) return rc;
  /* shared: every gated leg passes at once when the holder lets go */
  if (lock_wait(&l, LOCK_SH))
    fprintf(stderr, "resumecheck train: warning: --start-gate: flock(LOCK_SH): %s; not waiting\n",
            strerror(errno));
  *waited_s = l.waited_s;
  rc_step_lock_close(&l); /* drops the shared lock */
  return RC_OK;
}
