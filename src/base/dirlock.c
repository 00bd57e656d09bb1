/* dirlock.c — the directory lock of dirlock.h: flock(LOCK_EX | LOCK_NB) on
 * DIR/.lock, refused at once (never waited for) when another process holds
 * it, with a message that names the holder from the file's text. */
#include "dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* "another `resumecheck run` (pid 12) is using": from the text "12 run\n"
 * (or the older "12\n", which names no command). */
static void holder_text(int fd, char *buf, size_t cap) {
  char text[64] = "";
  ssize_t got = pread(fd, text, sizeof text - 1, 0);
  long pid = 0;
  char what[32] = "";
  if (got > 0) {
    text[got] = 0;
    if (sscanf(text, "%ld %31[a-z]", &pid, what) < 1) pid = 0;
  }
  if (pid > 0 && what[0])
    snprintf(buf, cap, "another `resumecheck %s` (pid %ld)", what, pid);
  else if (pid > 0)
    snprintf(buf, cap, "another resumecheck process (pid %ld)", pid);
  else
    snprintf(buf, cap, "another resumecheck process");
}

int rc_dir_lock(const char *dir, const char *what, int *fd_out, rc_err *err) {
  *fd_out = -1;
  char path[4200];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, RC_DIR_LOCK_NAME) >= sizeof path)
    return rc_fail(err, RC_EXIT_USAGE, "--out %s: path too long", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    int e = errno;
    return rc_fail(err, RC_EXIT_IOERR, "--out %s is not writable: cannot create %s: %s", dir, path,
                   strerror(e));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    char holder[96];
    holder_text(fd, holder, sizeof holder);
    close(fd);
    if (e != EWOULDBLOCK)
      return rc_fail(err, RC_EXIT_IOERR, "cannot lock %s: %s", path, strerror(e));
    return rc_fail(err, RC_EXIT_USAGE,
                   "%s is using %s (it holds %s): choose another --out or wait for it to finish",
                   holder, dir, path);
  }
  char text[64];
  int n = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), what);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n) {
    int e = errno;
    close(fd);
    return rc_fail(err, RC_EXIT_IOERR, "--out %s is not writable: writing %s: %s", dir, path,
                   strerror(e));
  }
  *fd_out = fd;
  return RC_OK;
}

int rc_dir_lock_probe(const char *dir, const char *context, rc_err *err) {
  char path[4200];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, RC_DIR_LOCK_NAME) >= sizeof path)
    return RC_OK;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return RC_OK; /* no lock file: nobody has locked it */
  int rc = RC_OK;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    char holder[96];
    holder_text(fd, holder, sizeof holder);
    /* "another" reads wrong here: it is the process that holds it */
    const char *who = !strncmp(holder, "another ", 8) ? holder + 8 : holder;
    rc = rc_fail(err, RC_EXIT_USAGE,
                 "%s is still in use by %s, %s (it holds %s): stop it or wait for it to end", dir,
                 who, context, path);
  }
  close(fd); /* drops the lock if it was taken */
  return rc;
}
