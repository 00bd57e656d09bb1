/* fsutil.c — safe file-system primitives (see fsutil.h).
 *
 * rc_write_file_atomic is the only way this tool writes a file that someone
 * else reads: the bytes go to path.tmp.<pid>, are fsync'd, renamed over path,
 * and the parent directory is fsync'd so the rename itself survives a crash.
 * A reader therefore sees the old file, no file, or the whole new file; on
 * any failure the temp file is removed and path is left as it was. It never
 * renames over what is not a regular file.
 *
 * rc_write_output is the rule for files a user names (reports): it decides
 * by what the path is whether to replace it atomically, write through to it
 * (a character device, a FIFO) or refuse. */
#include "fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ENOSPC and EDQUOT get a plain-language tail: they are the common case in
 * CI and the raw strerror does not say that nothing was left behind. */
static const char *hint(int e) {
  if (e == ENOSPC || e == EDQUOT) return " (disk full; nothing was left behind)";
  if (e == EACCES || e == EPERM || e == EROFS) return " (directory not writable)";
  return "";
}

int rc_mkdir_p(const char *path, rc_err *err) {
  size_t n = strlen(path);
  if (n == 0) return rc_fail(err, RC_EXIT_USAGE, "mkdir: empty path");
  char *p = malloc(n + 1);
  if (!p) return rc_fail(err, RC_EXIT_SOFTWARE, "mkdir %s: out of memory", path);
  memcpy(p, path, n + 1);
  int ret = RC_OK;
  /* Create each prefix in turn; EEXIST is fine as long as it is a directory
   * (several ranks create the same iteration directory concurrently). */
  for (size_t i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != 0) continue;
    char saved = p[i];
    p[i] = 0;
    if (mkdir(p, 0777) != 0) {
      int e = errno;
      if (e != EEXIST || !rc_is_dir(p)) {
        ret = rc_fail(err, RC_EXIT_IOERR, "cannot create directory %s: %s%s", p,
                      e == EEXIST ? "exists and is not a directory" : strerror(e), hint(e));
        break;
      }
    }
    p[i] = saved;
  }
  free(p);
  return ret;
}

/* All pieces with writev, up to IOV_MAX at a time, resuming after short
 * writes: states with thousands of small tensors cost few system calls. */
/* Bytes [a, b) of the concatenation of pieces, with writev (no copy),
 * resuming after short writes; -1 with errno. */
static int write_range(int fd, const rc_piece *pieces, int n, uint64_t a, uint64_t b) {
  enum { BATCH = 1024 }; /* IOV_MAX on Linux */
  struct iovec iov[BATCH];
  while (a < b) {
    int k = 0;
    uint64_t off = 0, want = 0;
    for (int j = 0; j < n && k < BATCH && off < b && want < ((uint64_t)1 << 30); j++) {
      uint64_t s = off, e = off + pieces[j].n;
      off = e;
      if (e <= a) continue;
      uint64_t from = a > s ? a : s, to = b < e ? b : e;
      if (to <= from) continue;
      iov[k].iov_base = (void *)((const char *)pieces[j].p + (from - s));
      iov[k].iov_len = (size_t)(to - from);
      want += iov[k].iov_len;
      k++;
    }
    ssize_t w = writev(fd, iov, k);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -1;
    if (w == 0 && want > 0) {
      errno = EIO;
      return -1;
    }
    a += (uint64_t)w;
  }
  return 0;
}

/* Streaming writes: the file goes out in windows, each once the gate says
 * its bytes are final, and the kernel is asked to start writing back every
 * few windows (sync_file_range, advice only) so that the fsync at the end
 * finds little left to do: the disk works while the bytes still arrive. */
enum { WRITE_WINDOW = 16 << 20, WRITEBACK_EVERY = 64 << 20 };

typedef struct {
  rc_gate *gate;
  uint64_t flushed; /* writeback requested up to here */
} write_stream;

static int write_gated(int fd, const rc_piece *pieces, int n, uint64_t a, uint64_t b,
                       write_stream *ws) {
  while (a < b) {
    uint64_t e = b - a < WRITE_WINDOW ? b : a + WRITE_WINDOW;
    rc_gate_wait(ws->gate, e);
    if (write_range(fd, pieces, n, a, e) != 0) return -1;
    a = e;
    if (a - ws->flushed >= WRITEBACK_EVERY) {
      (void)sync_file_range(fd, (off_t)ws->flushed, (off_t)(a - ws->flushed),
                            SYNC_FILE_RANGE_WRITE);
      ws->flushed = a;
    }
  }
  return 0;
}

/* fsync of the directory makes the rename durable. Some file systems refuse
 * fsync on a directory (EINVAL); that is not a failure of this write. */
static int fsync_parent(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash) {
    dir[0] = '.', dir[1] = 0;
  } else {
    size_t n = (size_t)(slash - path);
    if (n == 0) n = 1; /* "/file" -> "/" */
    if (n >= sizeof dir) {
      errno = ENAMETOOLONG;
      return -1;
    }
    memcpy(dir, path, n);
    dir[n] = 0;
  }
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int r = fsync(fd);
  int e = errno;
  close(fd);
  if (r != 0 && e != EINVAL && e != EROFS) {
    errno = e;
    return -1;
  }
  return 0;
}

/* ---- the crash hook: read the environment once (several save threads may
 * reach a crash point), count atomically. */
static pthread_once_t crash_once = PTHREAD_ONCE_INIT;
static long crash_at = 0; /* 0: never */
static bool crash_trace = false;
static atomic_long crash_count;

static void crash_init(void) {
  const char *v = getenv("RC_TEST_CRASH_AT_WRITE");
  if (v && *v) {
    char *end;
    long n = strtol(v, &end, 10);
    if (*end == 0 && n > 0) crash_at = n;
  }
  const char *t = getenv("RC_TEST_CRASH_TRACE");
  crash_trace = t && !strcmp(t, "1");
}

void rc_test_crash_points_off(void) {
  pthread_once(&crash_once, crash_init);
  crash_at = 0;
  crash_trace = false;
}

void rc_test_crash_point(const char *what, const char *path) {
  pthread_once(&crash_once, crash_init);
  long n = atomic_fetch_add(&crash_count, 1) + 1;
  if (crash_trace) fprintf(stderr, "crash point %ld: %s %s\n", n, what, path);
  if (n == crash_at) {
    fprintf(stderr, "RC_TEST_CRASH_AT_WRITE=%ld: SIGKILL %s %s\n", n, what, path);
    raise(SIGKILL);
  }
}

void rc_remove_stale_temps(const char *dir, const char *const *names, int n) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    for (int i = 0; i < n; i++) {
      size_t len = strlen(names[i]);
      const char *rest = e->d_name + len;
      if (strncmp(e->d_name, names[i], len) || strncmp(rest, ".tmp.", 5) || !rest[5]) continue;
      bool digits = true;
      for (const char *p = rest + 5; *p; p++) digits = digits && *p >= '0' && *p <= '9';
      if (!digits) continue;
      int k = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (k > 0 && (size_t)k < sizeof path) unlink(path);
    }
  }
  closedir(d);
}

/* What kind of file system object st describes, for messages. */
static const char *kind_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/* 0 when path is missing or a regular file, else -1 with errno = EEXIST and
 * *mode set: rename would replace a device node, FIFO, directory, socket or
 * symlink with a regular file (as root, `--json /dev/null` once did). */
static int check_replaceable(const char *path, mode_t *mode) {
  struct stat st;
  if (lstat(path, &st) != 0) return 0; /* missing: nothing to replace */
  *mode = st.st_mode;
  if (S_ISREG(st.st_mode)) return 0;
  errno = EEXIST;
  return -1;
}

typedef struct {
  rc_gate *gate;            /* NULL: every byte at once */
  rc_before_sync_fn before; /* NULL: none */
  void *before_ctx;
  bool durable; /* fsync the file and its directory */
} write_how;

/* The crash hook counts the writes of state (durable ones): a note between
 * processes is not state, and counting it would move every crash point of
 * a save that also hands its checkpoint over. */
static void crash_point(const write_how *how, const char *what, const char *path) {
  if (how->durable) rc_test_crash_point(what, path);
}

static int write_pieces_atomic(const char *path, const rc_piece *pieces, int npieces,
                               bool check_target, const write_how *how, rc_err *err) {
  size_t n = 0;
  for (int i = 0; i < npieces; i++) n += pieces[i].n;
  mode_t mode = 0;
  if (check_target && check_replaceable(path, &mode) != 0)
    return rc_fail(err, RC_EXIT_IOERR, "%s is %s: refusing to replace it with a regular file", path,
                   kind_name(mode));
  char tmp[4096];
  int len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  if (len < 0 || (size_t)len >= sizeof tmp)
    return rc_fail(err, RC_EXIT_USAGE, "path too long: %s", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    int e = errno;
    return rc_fail(err, RC_EXIT_IOERR, "cannot create %s: %s%s", tmp, strerror(e), hint(e));
  }
  crash_point(how, "created", tmp);
  const char *step = "writing";
  /* in two halves, so that the crash hook can leave a half-written temp */
  write_stream ws = {.gate = how->gate};
  if (write_gated(fd, pieces, npieces, 0, n / 2, &ws) != 0) goto fail;
  crash_point(how, "half written", tmp);
  if (write_gated(fd, pieces, npieces, n / 2, n, &ws) != 0) goto fail;
  crash_point(how, "written", tmp);
  if (how->before) how->before(how->before_ctx, tmp);
  step = "fsync of";
  if (how->durable && fsync(fd) != 0) goto fail;
  step = "closing";
  int r = close(fd);
  fd = -1;
  if (r != 0) goto fail;
  crash_point(how, "synced", tmp);
  /* again, just before the rename: what was missing may have appeared */
  if (check_target && check_replaceable(path, &mode) != 0) {
    unlink(tmp);
    return rc_fail(err, RC_EXIT_IOERR, "%s is %s: refusing to replace it with a regular file", path,
                   kind_name(mode));
  }
  step = "renaming";
  if (rename(tmp, path) != 0) goto fail;
  crash_point(how, "renamed", path);
  /* From here the new file is in place; a failed directory fsync is still
   * reported because durability was asked for. */
  if (how->durable && fsync_parent(path) != 0) {
    int e = errno;
    return rc_fail(err, RC_EXIT_IOERR, "fsync of the directory of %s: %s%s", path, strerror(e),
                   hint(e));
  }
  crash_point(how, "directory synced", path);
  return RC_OK;
fail:;
  int e = errno;
  if (fd >= 0) close(fd);
  unlink(tmp);
  return rc_fail(err, RC_EXIT_IOERR, "%s %s (%zu bytes): %s%s", step, tmp, n, strerror(e), hint(e));
}

int rc_write_pieces_atomic(const char *path, const rc_piece *pieces, int npieces, rc_err *err) {
  write_how how = {.durable = true};
  return write_pieces_atomic(path, pieces, npieces, true, &how, err);
}

int rc_write_pieces_atomic_gated(const char *path, const rc_piece *pieces, int npieces,
                                 rc_gate *gate, rc_err *err) {
  write_how how = {.gate = gate, .durable = true};
  return write_pieces_atomic(path, pieces, npieces, true, &how, err);
}

int rc_write_pieces_atomic_hooked(const char *path, const rc_piece *pieces, int npieces,
                                  rc_gate *gate, rc_before_sync_fn before_sync, void *ctx,
                                  rc_err *err) {
  write_how how = {.gate = gate, .before = before_sync, .before_ctx = ctx, .durable = true};
  return write_pieces_atomic(path, pieces, npieces, true, &how, err);
}

int rc_write_file_visible(const char *path, const void *data, size_t n, rc_err *err) {
  rc_piece whole = {data, n};
  write_how how = {.durable = false};
  return write_pieces_atomic(path, &whole, 1, true, &how, err);
}

int rc_write_file_atomic(const char *path, const void *data, size_t n, rc_err *err) {
  /* two pieces, so that the crash hook's "half written" leaves half a file */
  rc_piece halves[2] = {{data, n / 2}, {(const char *)data + n / 2, n - n / 2}};
  return rc_write_pieces_atomic(path, halves, 2, err);
}

/* Writes all of data to fd, resuming after short writes; -1 with errno. A
 * reader that closes a FIFO early must give EPIPE, not kill the process with
 * SIGPIPE: the signal is blocked for the writes and a SIGPIPE they raise is
 * taken off the pending set before the mask is restored. */
static int write_all_nosigpipe(int fd, const void *data, size_t n) {
  sigset_t pipe_set, old, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  const char *p = data;
  size_t done = 0;
  int ret = 0, e = 0;
  while (done < n) {
    ssize_t w = write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      ret = -1, e = errno;
      break;
    }
    if (w == 0) {
      ret = -1, e = EIO;
      break;
    }
    done += (size_t)w;
  }
  if (e == EPIPE && !was_pending) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = e;
  return ret;
}

/* A character device or FIFO named as an output: opened as it is (no
 * O_CREAT, no O_TRUNC) and written; a FIFO is opened without blocking so
 * that one nobody reads is refused rather than waited on for ever. */
static int write_through(const char *path, mode_t mode, const void *data, size_t n, rc_err *err) {
  bool fifo = S_ISFIFO(mode);
  int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0));
  if (fd < 0) {
    int e = errno;
    if (fifo && e == ENXIO)
      return rc_fail(err, RC_EXIT_IOERR, "%s is a FIFO with no reader: not waiting for one", path);
    return rc_fail(err, RC_EXIT_IOERR, "cannot open %s (%s) for writing: %s", path, kind_name(mode),
                   strerror(e));
  }
  /* what was opened must still be what was checked: writing into a regular
   * file that took its place, without truncating it, would corrupt it */
  struct stat st;
  if (fstat(fd, &st) != 0 || (st.st_mode & S_IFMT) != (mode & S_IFMT)) {
    close(fd);
    return rc_fail(err, RC_EXIT_IOERR, "%s changed while it was opened: not written", path);
  }
  const char *step = "writing";
  if (fifo) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) goto fail;
  }
  if (write_all_nosigpipe(fd, data, n) != 0) goto fail;
  step = "closing";
  if (close(fd) != 0) {
    fd = -1;
    goto fail;
  }
  return RC_OK;
fail:;
  int e = errno;
  if (fd >= 0) close(fd);
  return rc_fail(err, RC_EXIT_IOERR, "%s %s (%s, %zu bytes): %s", step, path, kind_name(mode), n,
                 strerror(e));
}

/* Test hook (docs/robustness.md): RC_TEST_OUTPUT_ALWAYS_RENAME=1 restores the
 * old rule — temp file renamed over whatever the path is — so that a test
 * can show that it detects what the rule prevents. */
static bool output_always_rename(void) {
  const char *v = getenv("RC_TEST_OUTPUT_ALWAYS_RENAME");
  return v && !strcmp(v, "1");
}

int rc_write_output(const char *path, const void *data, size_t n, rc_err *err) {
  rc_piece halves[2] = {{data, n / 2}, {(const char *)data + n / 2, n - n / 2}};
  if (output_always_rename()) {
    write_how how = {.durable = true};
    return write_pieces_atomic(path, halves, 2, false, &how, err);
  }
  struct stat st;
  if (lstat(path, &st) != 0) {
    int e = errno;
    if (e != ENOENT)
      return rc_fail(err, RC_EXIT_IOERR, "cannot write %s: %s%s", path, strerror(e), hint(e));
    return rc_write_file_atomic(path, data, n, err); /* missing: created atomically */
  }
  char resolved[PATH_MAX];
  const char *target = path;
  bool via_link = S_ISLNK(st.st_mode);
  if (via_link) {
    char link[PATH_MAX] = "?";
    ssize_t k = readlink(path, link, sizeof link - 1);
    if (k >= 0) link[k] = 0;
    if (stat(path, &st) != 0) {
      int e = errno;
      return rc_fail(err, RC_EXIT_IOERR,
                     "%s is a symbolic link to %s, which cannot be written: %s (refusing to "
                     "replace the link)",
                     path, link, strerror(e));
    }
    if (S_ISREG(st.st_mode)) {
      /* the target is replaced in its own directory, so the link stays */
      if (!realpath(path, resolved)) {
        int e = errno;
        return rc_fail(err, RC_EXIT_IOERR, "cannot resolve the symbolic link %s: %s", path,
                       strerror(e));
      }
      target = resolved;
    }
  }
  if (S_ISREG(st.st_mode)) return rc_write_file_atomic(target, data, n, err);
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
    return write_through(path, st.st_mode, data, n, err);
  return rc_fail(err, RC_EXIT_IOERR,
                 "%s%s is %s: a report is written to a regular file (replaced atomically), a "
                 "character device or a FIFO",
                 path, via_link ? " (through a symbolic link)" : "", kind_name(st.st_mode));
}

/* Reads fd (of `size` bytes by fstat) to EOF into a malloc'd, NUL-ended
 * buffer and closes it. Room for one byte more than fstat said, so that the
 * read that sees EOF needs no growth; a file that grows while read is
 * followed up to cap + 1 bytes (then refused, RC_EXIT_DATAERR), so the
 * buffer never exceeds cap + 2. */
static int read_to_end(int fd, const char *path, size_t size, size_t cap, char **data, size_t *n,
                       rc_err *err) {
  char *buf = malloc(size + 2);
  size_t room = size + 1, len = 0;
  if (!buf) {
    close(fd);
    return rc_fail(err, RC_EXIT_SOFTWARE, "reading %s: out of memory (%zu bytes)", path, size);
  }
  for (;;) {
    if (len == room) { /* grew while read: take what is there, up to cap + 1 */
      size_t nroom = room * 2 < cap + 1 ? room * 2 : cap + 1;
      char *nb = nroom > room ? realloc(buf, nroom + 1) : NULL;
      if (!nb) {
        free(buf);
        close(fd);
        return nroom > room ? rc_fail(err, RC_EXIT_SOFTWARE, "reading %s: out of memory", path)
                            : rc_fail(err, RC_EXIT_DATAERR,
                                      "%s grew past %zu bytes while being read", path, cap);
      }
      buf = nb;
      room = nroom;
    }
    ssize_t got = read(fd, buf + len, room - len);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return rc_fail(err, RC_EXIT_IOERR, "reading %s: %s", path, strerror(e));
    }
    if (got == 0) break;
    len += (size_t)got;
  }
  close(fd);
  if (len > cap) {
    free(buf);
    return rc_fail(err, RC_EXIT_DATAERR, "%s grew past %zu bytes while being read", path, cap);
  }
  buf[len] = 0;
  *data = buf;
  *n = len;
  return RC_OK;
}

int rc_read_file(const char *path, char **data, size_t *n, rc_err *err) {
  return rc_read_regular_file(path, RC_READ_CAP_DEFAULT, false, data, n, err);
}

bool rc_path_exists(const char *path) {
  /* lstat: a symbolic link that loops or dangles is something at the path,
   * not an absence; its reader then refuses it, naming it (before, a trace
   * or census that was a loop counted as never written) */
  struct stat st;
  return lstat(path, &st) == 0;
}

bool rc_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

void rc_path_join(char *out, size_t cap, const char *dir, const char *name) {
  size_t nd = strlen(dir);
  int len;
  if (nd == 0)
    len = snprintf(out, cap, "%s", name);
  else if (dir[nd - 1] == '/')
    len = snprintf(out, cap, "%s%s", dir, name);
  else
    len = snprintf(out, cap, "%s/%s", dir, name);
  if (len < 0 || (size_t)len >= cap) {
    fprintf(stderr, "rc_path_join: path does not fit in %zu bytes: %s/%s\n", cap, dir, name);
    abort();
  }
}

/* ---- regular files only, for what a load reads */

const char *rc_file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
  case S_IFREG:
    return "is a regular file";
  case S_IFDIR:
    return "is a directory";
  case S_IFIFO:
    return "is a FIFO";
  case S_IFCHR:
    return "is a character device";
  case S_IFBLK:
    return "is a block device";
  case S_IFSOCK:
    return "is a socket";
  case S_IFLNK:
    return "is a symbolic link";
  }
  return "is not a regular file";
}

/* Test hook (docs/robustness.md), not a feature: RC_TEST_READ_ANY_FILE=1
 * opens whatever the path is, blocking, and reads it without a cap, as
 * readers did before; a test shows with it that its FIFOs block and its
 * device nodes stream. */
static bool read_any_file(void) {
  const char *v = getenv("RC_TEST_READ_ANY_FILE");
  return v && !strcmp(v, "1");
}

int rc_open_regular(const char *path, bool nofollow, int *fd, size_t *size, rc_err *err) {
  *fd = -1;
  *size = 0;
  if (read_any_file()) {
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0)
      return rc_fail(err, errno == ENOENT ? RC_EXIT_NOINPUT : RC_EXIT_IOERR, "cannot open %s: %s",
                     path, strerror(errno));
    struct stat st;
    *fd = f;
    *size = fstat(f, &st) == 0 && S_ISREG(st.st_mode) ? (size_t)st.st_size : 0;
    return RC_OK;
  }
  /* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer
   * forever. It means nothing for a regular file and is cleared below. */
  int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
  if (f < 0) {
    int e = errno;
    struct stat lst;
    if (nofollow && e == ELOOP && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s is a symbolic link; this file is never a link, so it is not followed",
                     path);
    /* a link that names itself, or a chain too long to follow: bad data in
     * the directory, not an I/O failure */
    if (e == ELOOP)
      return rc_fail(err, RC_EXIT_DATAERR,
                     "%s: a symbolic link that loops (too many levels of symbolic links); "
                     "refusing to read it",
                     path);
    return rc_fail(err, e == ENOENT ? RC_EXIT_NOINPUT : RC_EXIT_IOERR, "cannot open %s: %s", path,
                   strerror(e));
  }
  struct stat st;
  if (fstat(f, &st) != 0) {
    int e = errno;
    close(f);
    return rc_fail(err, RC_EXIT_IOERR, "cannot read %s: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(f);
    return rc_fail(err, RC_EXIT_DATAERR, "%s %s, not a regular file; refusing to read it", path,
                   rc_file_kind((unsigned)st.st_mode));
  }
  int flags = fcntl(f, F_GETFL);
  if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(f);
    return rc_fail(err, RC_EXIT_IOERR, "cannot read %s: %s", path, strerror(e));
  }
  *fd = f;
  *size = (size_t)st.st_size;
  return RC_OK;
}

int rc_read_regular_file(const char *path, size_t cap, bool nofollow, char **data, size_t *n,
                         rc_err *err) {
  *data = NULL;
  *n = 0;
  int fd;
  size_t size;
  int ret = rc_open_regular(path, nofollow, &fd, &size, err);
  if (ret) return ret;
  if (read_any_file()) cap = SIZE_MAX - 2;
  if (size > cap) {
    close(fd);
    return rc_fail(err, RC_EXIT_DATAERR, "%s is %zu bytes, more than the %zu this file may have",
                   path, size, cap);
  }
  return read_to_end(fd, path, size, cap, data, n, err);
}

void rc_format_bytes(uint64_t b, char *buf, size_t cap) {
  if (b >= (1ull << 30))
    snprintf(buf, cap, "%.1f GiB", (double)b / (1ull << 30));
  else
    snprintf(buf, cap, "%.1f MiB", (double)b / (1ull << 20));
}
