/* report_step_summary.c — GitHub Actions' job summary: when
 * $GITHUB_STEP_SUMMARY names a file and no --summary-md was given, `run`
 * appends its Markdown summary (report_md.c) to it. Appending is that
 * file's contract (each step adds to what earlier steps wrote), so this is
 * the one report not written by temp + rename: it is opened O_APPEND and
 * written in place. Anything but a regular file (a FIFO, a device, a
 * directory) and a path whose directory is missing are refused untouched;
 * the caller warns, and the verdict does not change (docs/ci.md). */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"

int rc_report_step_summary(const rc_run *run, const char *path, rc_err *err) {
  struct stat st;
  if (stat(path, &st) == 0) {
    if (!S_ISREG(st.st_mode))
      return rc_fail(err, RC_EXIT_IOERR, "%s %s, not a regular file: left untouched", path,
                     rc_file_kind((unsigned)st.st_mode));
  } else {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    if (errno != ENOENT || !rc_is_dir(dirname(dir)))
      return rc_fail(err, RC_EXIT_IOERR, "%s: %s", path,
                     errno == ENOENT ? "its directory does not exist" : strerror(errno));
  }
  rc_sb md = {0};
  rc_report_markdown_render(run, &md);
  if (md.oom) {
    free(md.buf);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory rendering the summary for %s", path);
  }
  const char *text = md.buf ? md.buf : "";
  size_t len = md.len;
  /* O_NONBLOCK: what replaced the file since the stat, if a FIFO, is not
   * waited for; fstat then refuses it */
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
  int rc = 0;
  if (fd < 0) {
    rc = rc_fail(err, RC_EXIT_IOERR, "%s: %s", path, strerror(errno));
  } else if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    rc = rc_fail(err, RC_EXIT_IOERR, "%s is not a regular file: left untouched", path);
  } else {
    /* a blank line between this summary and what an earlier step wrote */
    const char *sep = st.st_size > 0 ? "\n" : "";
    if (write(fd, sep, strlen(sep)) != (ssize_t)strlen(sep))
      rc = rc_fail(err, RC_EXIT_IOERR, "%s: %s", path, strerror(errno));
    for (size_t off = 0; !rc && off < len;) {
      ssize_t w = write(fd, text + off, len - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        rc = rc_fail(err, RC_EXIT_IOERR, "%s: %s", path, w < 0 ? strerror(errno) : "short write");
      else
        off += (size_t)w;
    }
  }
  if (fd >= 0 && close(fd) && !rc)
    rc = rc_fail(err, RC_EXIT_IOERR, "%s: %s", path, strerror(errno));
  free(md.buf);
  return rc;
}
