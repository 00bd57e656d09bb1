/* run_spawn.c — starting leg processes and reading what they leave behind.
 *
 * Legs are started with posix_spawn, never through a shell: argv words are
 * passed as they are, so paths with spaces, quotes or "$(...)" stay inert.
 * Each leg gets its own process group (so that stopping it also stops what
 * an exec trainer started), stdin from /dev/null, and its stdout and stderr
 * in one log file. The SIGINT/SIGTERM flag below is the only global state of
 * the harness: a signal handler can do nothing else. */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/report.h"
#include "harness/run_signal.h"

extern char **environ;

static volatile sig_atomic_t g_interrupt = 0;

static void on_signal(int sig) {
  if (!g_interrupt) g_interrupt = sig; /* the first signal decides the exit status */
}

void rc_run_install_signal_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: the poll loop's sleep should end early */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

bool rc_run_interrupt_requested(void) {
  return g_interrupt != 0;
}

int rc_run_interrupt_signal(void) {
  return (int)g_interrupt;
}

/* Default dispositions and an empty mask in the child, whatever the harness
 * itself has installed or inherited. */
static int init_attr(posix_spawnattr_t *attr, bool new_group) {
  if (posix_spawnattr_init(attr)) return -1;
  sigset_t def, empty;
  sigemptyset(&def);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGHUP);
  sigaddset(&def, SIGQUIT);
  sigemptyset(&empty);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (new_group) flags |= POSIX_SPAWN_SETPGROUP;
  if (posix_spawnattr_setsigdefault(attr, &def) || posix_spawnattr_setsigmask(attr, &empty) ||
      posix_spawnattr_setflags(attr, flags) || (new_group && posix_spawnattr_setpgroup(attr, 0))) {
    posix_spawnattr_destroy(attr);
    return -1;
  }
  return 0;
}

int rc_spawn_logged(char *const *argv, char *const *envp, bool search_path, const char *log_path,
                    const char *header, pid_t *pid, rc_err *err) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  if (posix_spawn_file_actions_init(&fa))
    return rc_fail(err, RC_EXIT_SOFTWARE, "posix_spawn_file_actions_init failed");
  if (init_attr(&attr, true)) {
    posix_spawn_file_actions_destroy(&fa);
    return rc_fail(err, RC_EXIT_SOFTWARE, "posix_spawnattr setup failed");
  }
  int rc = RC_OK;
  /* The log starts with the command, so that it can be re-run by hand;
   * creating it here also gives a clear error for an unwritable directory.
   * The child then opens it again by name and appends. */
  int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    rc = rc_fail(err, RC_EXIT_IOERR, "cannot create %s: %s", log_path, strerror(errno));
    goto out;
  }
  if (header) {
    size_t len = strlen(header);
    ssize_t w1 = write(fd, "$ ", 2), w2 = write(fd, header, len), w3 = write(fd, "\n", 1);
    if (w1 != 2 || w2 != (ssize_t)len || w3 != 1) {
      int e = errno;
      close(fd);
      rc = rc_fail(err, RC_EXIT_IOERR, "cannot write %s: %s", log_path, strerror(e));
      goto out;
    }
  }
  close(fd);
  if (posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) ||
      posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_APPEND, 0644) ||
      posix_spawn_file_actions_adddup2(&fa, 1, 2)) {
    rc = rc_fail(err, RC_EXIT_SOFTWARE, "posix_spawn file actions failed");
    goto out;
  }
  char *const *env = envp ? envp : environ;
  int e = search_path ? posix_spawnp(pid, argv[0], &fa, &attr, argv, env)
                      : posix_spawn(pid, argv[0], &fa, &attr, argv, env);
  if (e) rc = rc_fail(err, RC_EXIT_SOFTWARE, "cannot execute '%s': %s", argv[0], strerror(e));
out:
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

int rc_spawn_capture(char *const *argv, char **out, size_t *n, int *status, rc_err *err) {
  *out = NULL;
  *n = 0;
  int fds[2];
  if (pipe(fds)) return rc_fail(err, RC_EXIT_SOFTWARE, "pipe: %s", strerror(errno));
  /* close-on-exec, so that legs started later do not hold the pipe open */
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  if (posix_spawn_file_actions_init(&fa)) {
    close(fds[0]);
    close(fds[1]);
    return rc_fail(err, RC_EXIT_SOFTWARE, "posix_spawn_file_actions_init failed");
  }
  if (init_attr(&attr, false)) {
    posix_spawn_file_actions_destroy(&fa);
    close(fds[0]);
    close(fds[1]);
    return rc_fail(err, RC_EXIT_SOFTWARE, "posix_spawnattr setup failed");
  }
  int rc = RC_OK;
  pid_t pid = -1;
  if (posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) ||
      posix_spawn_file_actions_adddup2(&fa, fds[1], 1)) {
    rc = rc_fail(err, RC_EXIT_SOFTWARE, "posix_spawn file actions failed");
  } else {
    int e = posix_spawn(&pid, argv[0], &fa, &attr, argv, environ);
    if (e) rc = rc_fail(err, RC_EXIT_SOFTWARE, "cannot execute '%s': %s", argv[0], strerror(e));
  }
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  size_t cap = 0, len = 0;
  char *buf = NULL;
  while (rc == RC_OK) {
    if (len + 4097 > cap) {
      size_t c = cap ? 2 * cap : 8192;
      char *p = realloc(buf, c);
      if (!p) {
        rc = rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
        break;
      }
      buf = p;
      cap = c;
    }
    ssize_t r = read(fds[0], buf + len, 4096);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      rc = rc_fail(err, RC_EXIT_IOERR, "reading the output of '%s': %s", argv[0], strerror(errno));
      break;
    }
    if (r == 0) break;
    len += (size_t)r;
  }
  close(fds[0]);
  if (pid > 0) {
    while (waitpid(pid, status, 0) < 0) {
      if (errno != EINTR) {
        if (rc == RC_OK) rc = rc_fail(err, RC_EXIT_SOFTWARE, "waitpid: %s", strerror(errno));
        break;
      }
    }
  }
  if (rc != RC_OK) {
    free(buf);
    return rc;
  }
  if (!buf && !(buf = malloc(1))) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  buf[len] = 0;
  *out = buf;
  *n = len;
  return RC_OK;
}

void rc_log_tail(const char *path, int max_lines, char *buf, size_t cap) {
  if (!cap) return;
  buf[0] = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st)) {
    close(fd);
    return;
  }
  enum { WINDOW = 16384 };
  char raw[WINDOW + 1];
  off_t start = st.st_size > WINDOW ? st.st_size - WINDOW : 0;
  ssize_t got = pread(fd, raw, WINDOW, start);
  close(fd);
  if (got <= 0) return;
  size_t n = (size_t)got;
  while (n && (raw[n - 1] == '\n' || raw[n - 1] == '\r')) n--; /* trailing newlines */
  raw[n] = 0;
  size_t from = 0;
  int lines = 0;
  for (size_t i = n; i > 0; i--)
    if (raw[i - 1] == '\n' && ++lines == max_lines) {
      from = i;
      break;
    }
  /* keep the end if even the lines do not fit */
  size_t keep = n - from;
  if (keep > cap / 2) from = n - cap / 2;
  rc_utf8_sanitize(raw + from, buf, cap);
}

int64_t rc_trace_rows(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char chunk[65536];
  int64_t lines = 0;
  for (;;) {
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    for (ssize_t i = 0; i < r; i++) lines += chunk[i] == '\n';
  }
  close(fd);
  return lines > 0 ? lines - 1 : 0; /* the header */
}
