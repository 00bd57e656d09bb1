/* steplock.h — legs that share one GPU take turns by priority: an flock on
 * one file that every leg of a run opens (`train --step-lock FILE`).
 *
 * Two processes stepping on one GPU time-slice it: each step takes about
 * twice as long. `run`'s wall time is set by its critical path (save, then
 * resume), so the legs on it step first and the others (through, aa) step
 * while no critical leg does (while save saves and resume loads):
 *   high: holds LOCK_SH during each contiguous run of steps; several high
 *         legs step at once;
 *   low:  before each step takes LOCK_EX and drops it at once, so it starts
 *         a step only while no high leg holds the lock.
 * Scheduling only: it changes when a step starts, never what it computes.
 * The kernel drops an flock when its process ends however it ends, so a
 * high leg that crashed never blocks a low leg. The waits are plain
 * blocking flock calls: a signal whose action is to terminate (SIGTERM,
 * SIGKILL from `run`) still ends a waiting process at once. The start
 * gate (rc_start_gate_wait) is the same kind of lock, held once. */
#ifndef RC_BASE_STEPLOCK_H
#define RC_BASE_STEPLOCK_H

#include <stdbool.h>

#include "error.h"

typedef enum { RC_STEP_PRIORITY_HIGH = 0, RC_STEP_PRIORITY_LOW } rc_step_priority;

typedef struct {
  int fd; /* the lock file, close-on-exec; -1: no lock, every call does nothing */
  rc_step_priority priority;
  bool held;       /* high: LOCK_SH is held now */
  double waited_s; /* seconds spent blocked in flock, summed */
} rc_step_lock;

/* "high" / "low" */
const char *rc_step_priority_name(rc_step_priority p);
/* Parses "high" or "low"; false for anything else. */
bool rc_step_priority_parse(const char *s, rc_step_priority *p);

/* No lock: enter and leave do nothing. */
void rc_step_lock_none(rc_step_lock *l);

/* Opens path (created if missing, 0644). Refuses what is not a regular
 * file (a directory, a FIFO, a device) before opening it for anything but
 * inspection, and a file that cannot be opened: RC_EXIT_IOERR naming the
 * path and why. */
int rc_step_lock_open(rc_step_lock *l, const char *path, rc_step_priority priority, rc_err *err);

/* Before each training step. High: takes LOCK_SH unless held. Low: waits
 * for LOCK_EX, then drops it. The time blocked is added to waited_s. A lock
 * call that fails for another reason than a signal is reported once on
 * stderr and the leg goes on unscheduled (the lock is an optimisation; the
 * leg's results never depend on it). */
void rc_step_lock_enter(rc_step_lock *l);

/* Before anything that is not a step (a save) and after the last step: a
 * high leg drops its LOCK_SH so low legs may step. Low: nothing. */
void rc_step_lock_leave(rc_step_lock *l);

void rc_step_lock_close(rc_step_lock *l);

/* `train --start-gate FILE`: blocks until no process holds an exclusive
 * flock on FILE (opened as rc_step_lock_open opens its file, the same
 * refusals, named --start-gate), then goes on; *waited_s the seconds it
 * blocked. `run` holds the gate while its critical legs set up, so the
 * legs off the critical path set up after them instead of beside them
 * (CUDA contexts, weight draws and page-locking slow each other down).
 * The holder's exit releases it, so the gate never outlives `run`. */
int rc_start_gate_wait(const char *path, double *waited_s, rc_err *err);

#endif
