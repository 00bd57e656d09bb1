/* dirlock.h — one writer per output directory: an flock on DIR/.lock.
 *
 * `run` locks its --out and every `train` locks its --out, with this one
 * implementation, so that two processes never interleave their files in one
 * directory. The lock is the flock, held until the descriptor is closed or
 * the process ends however it ends (the kernel drops it); the file's text,
 * "PID WHAT\n", only names the holder in the refusal message. */
#ifndef RC_BASE_DIRLOCK_H
#define RC_BASE_DIRLOCK_H

#include "error.h"

#define RC_DIR_LOCK_NAME ".lock"

/* Takes the exclusive lock on dir/.lock (creating the file; dir must exist)
 * and writes "PID WHAT\n" into it; *fd is the open descriptor, close-on-exec,
 * to keep open as long as the directory is in use. Held by another process:
 * RC_EXIT_USAGE, "another `resumecheck WHAT` (pid P) is using DIR (it holds
 * DIR/.lock): ...". A directory that cannot be written: RC_EXIT_IOERR. */
int rc_dir_lock(const char *dir, const char *what, int *fd, rc_err *err);

/* Whether some process holds dir/.lock now, without keeping it: RC_OK when
 * free (or there is no lock file), RC_EXIT_USAGE naming the holder when
 * held, with `context` (e.g. "a leg of an earlier run") in the message. */
int rc_dir_lock_probe(const char *dir, const char *context, rc_err *err);

#endif
