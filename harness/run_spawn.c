/* run_spawn.c — starting leg processes and reading what they leave behind.
 *
 * Legs are started with fork and exec (under a supervisor, below), never
 * through a shell: argv words are passed as they are, so paths with spaces,
 * quotes or "$(...)" stay inert. Each leg gets its own process group (so
 * that stopping it also stops what an exec trainer started), stdin from
 * /dev/null, and its stdout and stderr in one log file; it dies with `run`, and nothing it
 * starts outlives it (its supervisor is the leg's child subreaper). The SIGINT/SIGTERM flag
 * below is the only global state of the harness: a signal handler can do nothing else. */
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <poll.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "harness/report.h"
#include "harness/run_signal.h"
#include "io/layout.h"

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

/* ---- legs: a supervisor per leg, so that legs die with `run` ----
 *
 * posix_spawn cannot ask the kernel to signal a child when its parent dies,
 * and a signal to the child alone would leave an exec trainer's own children
 * running. So each leg is a fork of `run` (in a process group of its own)
 * that asks for SIGUSR1 when `run` dies (PR_SET_PDEATHSIG, then getppid() to
 * close the race with a death before the prctl), forks the trainer as the
 * leader of a new process group and waits for it. `run` signals the
 * trainer's group (SIGTERM, SIGKILL after a grace), never the supervisor:
 * the supervisor outlives even a SIGKILLed trainer, so the leg's log always
 * gets its end. When `run` dies, however it dies (SIGKILL included), the
 * supervisor kills the trainer's whole group. Otherwise it leaves with the
 * trainer's own status (the same exit code, or the same signal), so `run`
 * sees what it always saw.
 *
 * The log. The trainer's stdout and stderr are one pipe that the supervisor
 * drains all the time (a trainer never waits for its log) into log.txt: the
 * bytes are written as they come until the log holds RC_LEG_LOG_HEAD +
 * RC_LEG_LOG_TAIL of them; past that the log keeps the first
 * RC_LEG_LOG_HEAD bytes, and at the end the supervisor replaces the rest
 * with one marker line (how many bytes were dropped) and the last
 * RC_LEG_LOG_TAIL bytes, from a ring buffer, starting at a line. So a
 * trainer that prints gigabytes leaves about 2 MiB (docs/robustness.md).
 *
 * The supervisor (a fork that never execs) and the trainer before its exec
 * make only async-signal-safe calls (`run` may have threads): no stdio, no
 * malloc (the ring buffer is mmap'd). */

enum { MSG_ERRNO = 1, MSG_TRAINER_PID = 2 }; /* on the error pipe: {kind, value} */

static void send_msg(int fd, int kind, int value) {
  int msg[2] = {kind, value};
  ssize_t w = write(fd, msg, sizeof msg);
  (void)w; /* `run` has gone: nothing to tell */
}

static bool write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* Decimal digits of v into buf (at least 21 bytes), returns the length. */
static size_t fmt_u64(uint64_t v, char *buf) {
  char tmp[21];
  size_t n = 0;
  do tmp[n++] = (char)('0' + v % 10);
  while ((v /= 10) && n < sizeof tmp);
  for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
  return n;
}

typedef struct {
  int fd;         /* log.txt, O_APPEND */
  off_t base;     /* its size before the trainer's first byte: the command line */
  uint64_t total; /* bytes the trainer wrote */
  char *ring;     /* the last RC_LEG_LOG_TAIL + 1 bytes past the head */
  char head_last; /* the head's last byte */
  bool ok;        /* false after a failed write: the rest is drained, not kept */
} leg_log;

static void log_take(leg_log *l, const char *buf, size_t n) {
  const uint64_t live = (uint64_t)RC_LEG_LOG_HEAD + RC_LEG_LOG_TAIL, ring = RC_LEG_LOG_TAIL + 1;
  if (l->total < live && l->ok) {
    size_t k = l->total + n > live ? (size_t)(live - l->total) : n;
    l->ok = write_all(l->fd, buf, k);
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t at = l->total + i;
    if (at == RC_LEG_LOG_HEAD - 1) l->head_last = buf[i];
    if (at >= RC_LEG_LOG_HEAD && l->ring) l->ring[(at - RC_LEG_LOG_HEAD) % ring] = buf[i];
  }
  l->total += n;
}

/* Past the cap: head, marker, tail. The tail starts at a line unless it is
 * one line; the partial line it drops is counted as dropped. */
static void log_finish(leg_log *l) {
  const uint64_t live = (uint64_t)RC_LEG_LOG_HEAD + RC_LEG_LOG_TAIL, ring = RC_LEG_LOG_TAIL + 1;
  if (l->total <= live || !l->ring || !l->ok) return;
  uint64_t first = l->total - ring - RC_LEG_LOG_HEAD; /* ring index of the byte before the tail */
  size_t start = (size_t)(first % ring);
  size_t skip = 1; /* that byte itself */
  if (l->ring[start] != '\n') {
    for (size_t k = 1; k < ring; k++)
      if (l->ring[(start + k) % ring] == '\n') {
        skip = k + 1;
        break;
      }
    if (skip == 1 || skip == ring) skip = 1; /* no line start in the tail: keep it whole */
  }
  uint64_t dropped = l->total - RC_LEG_LOG_HEAD - (ring - skip);
  if (ftruncate(l->fd, l->base + RC_LEG_LOG_HEAD)) return;
  char m[256];
  size_t n = 0;
  static const char a[] = "[resumecheck: ",
                    b[] = " bytes of this leg's output dropped here; the "
                          "log keeps the first ",
                    c[] = " and the last ", d[] = " bytes]\n";
#define PUT(s) (memcpy(m + n, s, sizeof s - 1), n += sizeof s - 1)
  if (l->head_last != '\n') m[n++] = '\n';
  PUT(a);
  n += fmt_u64(dropped, m + n);
  PUT(b);
  n += fmt_u64(RC_LEG_LOG_HEAD, m + n);
  PUT(c);
  n += fmt_u64(RC_LEG_LOG_TAIL, m + n);
  PUT(d);
#undef PUT
  if (!write_all(l->fd, m, n)) return;
  size_t from = (start + skip) % ring;
  size_t keep = (size_t)ring - skip;
  size_t first_part = from + keep <= ring ? keep : (size_t)ring - from;
  if (write_all(l->fd, l->ring + from, first_part)) write_all(l->fd, l->ring, keep - first_part);
}

/* Reads what the pipe holds now, at most `max` bytes. False at EOF. */
static bool log_drain(int rd, leg_log *l, size_t max) {
  char buf[65536];
  while (max) {
    ssize_t r = read(rd, buf, max < sizeof buf ? max : sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    if (r == 0) return false;
    log_take(l, buf, (size_t)r);
    max -= (size_t)r;
  }
  return true;
}

/* Never returns: in the forked child. */
/* `run` stops a leg with signals to the trainer's group: the supervisor
 * ignores whatever reaches it and waits for the trainer's answer. `run`'s
 * death (SIGUSR1) and the trainer's (SIGCHLD) are blocked here and read
 * through a signalfd. On return *sa is SIG_DFL with an empty mask. */
static void supervisor_signals(struct sigaction *sa, sigset_t *mine) {
  memset(sa, 0, sizeof *sa);
  sa->sa_handler = SIG_IGN;
  sigemptyset(&sa->sa_mask);
  sigaction(SIGTERM, sa, NULL);
  sigaction(SIGINT, sa, NULL);
  sigaction(SIGHUP, sa, NULL);
  sigaction(SIGQUIT, sa, NULL);
  sigaction(SIGPIPE, sa, NULL);
  sa->sa_handler = SIG_DFL;
  sigaction(SIGCHLD, sa, NULL);
  sigemptyset(mine);
  sigaddset(mine, SIGUSR1);
  sigaddset(mine, SIGCHLD);
  sigprocmask(SIG_SETMASK, mine, NULL);
}

/* The supervisor is a copy of `run` that never execs: it must not keep
 * `run`'s descriptors (other legs' wait pipes, the run's lock), so every
 * descriptor but 0-2 (/dev/null and the log), the wait pipe as 3 and the
 * error pipe as 4 goes. Returns false with errno set. */
static bool supervisor_fds(const char *log_path, int wait_fd, int *err_w) {
  int high = fcntl(*err_w, F_DUPFD_CLOEXEC, 10); /* out of the way of 0-4 */
  if (high >= 0) *err_w = high;
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int out = open(log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
  bool ok = in >= 0 && out >= 0 && dup2(in, 0) == 0 && dup2(out, 1) == 1 && dup2(out, 2) == 2;
  if (ok && wait_fd >= 0) ok = dup2(wait_fd, 3) == 3; /* wait_fd > 4: see rc_spawn_leg */
  if (ok && wait_fd < 0) close(3);
  ok = ok && dup2(*err_w, 4) == 4 && fcntl(4, F_SETFD, FD_CLOEXEC) == 0;
  if (!ok) return false;
  *err_w = 4;
  if (close_range(5, ~0U, 0) != 0)
    for (int f = 5; f < 65536; f++) close(f);
  return true;
}

/* The trainer, in the forked child: its own group, default signals, its
 * output into the pipe when the log is capped. Never returns. */
static void exec_trainer(char *const *argv, char *const *env, bool search_path, bool die_with_run,
                         bool cap_log, const int pipe_fd[2], int err_w,
                         const struct sigaction *sa) {
  sigset_t none;
  sigemptyset(&none);
  setpgid(0, 0);
  for (int sig = 1; sig < NSIG; sig++) sigaction(sig, sa, NULL); /* EINVAL for some: fine */
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (die_with_run) prctl(PR_SET_PDEATHSIG, SIGKILL); /* should the supervisor be killed */
  if (cap_log && (dup2(pipe_fd[1], 1) != 1 || dup2(pipe_fd[1], 2) != 2)) {
    send_msg(err_w, MSG_ERRNO, errno);
    _exit(127);
  }
  if (search_path)
    execvpe(argv[0], argv, env);
  else
    execve(argv[0], argv, env);
  send_msg(err_w, MSG_ERRNO, errno);
  _exit(127);
}

/* ---- what the trainer leaves behind. The supervisor is the leg's child
 * subreaper (PR_SET_CHILD_SUBREAPER): whatever the trainer starts and
 * leaves (a background job, a `setsid` daemon, a double fork) is
 * re-parented to it when its own parent ends, not to init. So when the
 * trainer has ended (by itself, stopped by `run`, or killed because `run`
 * died) the supervisor kills its process group and then every child it
 * still has but the trainer, round after round (killing one re-parents
 * that one's children to the supervisor), and reaps them; only then does
 * it end. Nothing a leg started outlives the leg. Async-signal-safe calls
 * only: the pids come from /proc by open/read/getdents64. */

/* The supervisor's children but `except`, up to cap, from
 * /proc/self/task/PID/children (the supervisor has one thread); where the
 * kernel lacks that file, from a scan of /proc/N/stat for the parent pid. */
static int list_children(pid_t self, pid_t except, pid_t *out, int cap) {
  char path[64] = "/proc/self/task/", num[24];
  size_t n = strlen(path), k = fmt_u64((uint64_t)self, num);
  memcpy(path + n, num, k);
  memcpy(path + n + k, "/children", 10);
  int count = 0;
  char buf[4096];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    long v = -1;
    for (ssize_t i = 0; got > 0 && i <= got && count < cap; i++) {
      char c = i < got ? buf[i] : ' ';
      if (c >= '0' && c <= '9') {
        v = (v < 0 ? 0 : v * 10) + (c - '0');
      } else {
        if (v > 0 && v != except) out[count++] = (pid_t)v;
        v = -1;
      }
    }
    return count;
  }
  /* the scan: each numeric entry of /proc, its stat's fourth field */
  int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  for (;;) {
    long nread = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (nread <= 0) break;
    for (long off = 0; off < nread && count < cap;) {
      struct {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[];
      } *d = (void *)(buf + off);
      off += d->reclen;
      long pid = 0;
      const char *p = d->name;
      for (; *p >= '0' && *p <= '9'; p++) pid = pid * 10 + (*p - '0');
      if (*p || pid <= 0 || pid == except) continue;
      char sp[64] = "/proc/", st[512];
      size_t m = 6 + fmt_u64((uint64_t)pid, sp + 6);
      memcpy(sp + m, "/stat", 6);
      int f = open(sp, O_RDONLY | O_CLOEXEC);
      if (f < 0) continue;
      ssize_t got = read(f, st, sizeof st - 1);
      close(f);
      if (got <= 0) continue;
      st[got] = 0;
      char *rp = NULL; /* after the last ')': the comm may hold anything */
      for (char *q = st; *q; q++)
        if (*q == ')') rp = q;
      if (!rp || rp[1] != ' ' || !rp[2] || rp[3] != ' ') continue;
      long ppid = 0;
      for (p = rp + 4; *p >= '0' && *p <= '9'; p++) ppid = ppid * 10 + (*p - '0');
      if (ppid == self) out[count++] = (pid_t)pid;
    }
  }
  close(dir);
  return count;
}

/* Reaps children that ended but the trainer (kept a zombie for its group):
 * re-parented orphans that died while the leg ran. */
static void reap_orphans(pid_t trainer) {
  for (;;) {
    siginfo_t si;
    si.si_pid = 0;
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0 ||
        si.si_pid == trainer)
      return;
    int st;
    (void)waitpid(si.si_pid, &st, WNOHANG);
  }
}

/* The trainer has ended: its group and everything re-parented to this
 * supervisor are killed and reaped (the trainer itself stays a zombie). */
static void end_descendants(pid_t trainer) {
  kill(-trainer, SIGKILL);
  pid_t self = getpid(), kids[256];
  for (int round = 0; round < 4096; round++) {
    int n = list_children(self, trainer, kids, 256);
    if (n == 0) return;
    for (int i = 0; i < n; i++) kill(kids[i], SIGKILL);
    for (int i = 0; i < n; i++) {
      int st;
      while (waitpid(kids[i], &st, 0) < 0 && errno == EINTR) {
      }
    }
  }
}

/* Until the trainer has ended and its output is in the log. The trainer
 * stays a zombie (WNOWAIT) until then, so its group's id cannot be taken
 * by another process while `run` may still signal it. */
static void watch_trainer(pid_t child, int sig_fd, const int pipe_fd[2], bool cap_log,
                          bool subreaper, leg_log *log) {
  bool pipe_open = cap_log, child_done = false;
  while (!child_done || pipe_open) {
    struct pollfd p[2] = {{sig_fd, POLLIN, 0}, {pipe_open ? pipe_fd[0] : -1, POLLIN, 0}};
    poll(p, 2, 1000); /* SIGCHLD wakes it; the timeout is only a fallback */
    struct signalfd_siginfo si;
    bool run_died = false;
    while (read(sig_fd, &si, sizeof si) == (ssize_t)sizeof si) run_died |= si.ssi_signo == SIGUSR1;
    if (run_died) kill(-child, SIGKILL);
    if (subreaper) reap_orphans(child);
    if (pipe_open && p[1].revents) pipe_open = log_drain(pipe_fd[0], log, 1 << 20);
    siginfo_t info;
    info.si_pid = 0;
    int w = child_done ? -1 : waitid(P_PID, (id_t)child, &info, WEXITED | WNOHANG | WNOWAIT);
    if ((w == 0 && info.si_pid == child) || (w < 0 && errno == ECHILD)) {
      child_done = true;
      /* what it wrote is in the pipe now; whatever it left running that
       * still holds the pipe is not waited for */
      int left = 0;
      if (pipe_open && ioctl(pipe_fd[0], FIONREAD, &left) == 0 && left > 0)
        log_drain(pipe_fd[0], log, (size_t)left);
      pipe_open = false;
    }
  }
}

/* Ends the supervisor as the trainer ended: its exit code, or its signal
 * (without a second core dump). Never returns. */
static void exit_as_trainer(pid_t child, const struct sigaction *sa) {
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) _exit(RC_EXIT_SOFTWARE);
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  struct rlimit no_core = {0, 0}; /* the trainer dumped its core, if any */
  setrlimit(RLIMIT_CORE, &no_core);
  sigaction(sig, sa, NULL); /* sa is SIG_DFL */
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigprocmask(SIG_UNBLOCK, &one, NULL);
  kill(getpid(), sig);
  _exit(128 + sig);
}

static void supervise(char *const *argv, char *const *env, bool search_path, const char *log_path,
                      int wait_fd, pid_t run_pid, bool die_with_run, bool cap_log, bool subreaper,
                      int err_w) {
  setpgid(0, 0);
  struct sigaction sa;
  sigset_t mine;
  supervisor_signals(&sa, &mine);
  if (die_with_run && (prctl(PR_SET_PDEATHSIG, SIGUSR1) != 0 || getppid() != run_pid))
    kill(0, SIGKILL); /* nothing started yet: only this supervisor */
  if (subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) subreaper = false; /* as before */
  if (!supervisor_fds(log_path, wait_fd, &err_w)) {
    send_msg(err_w, MSG_ERRNO, errno);
    _exit(127);
  }
  /* 1 and 2 (the log) are the supervisor's; the trainer's are the pipe */
  leg_log log = {.fd = 1, .base = lseek(1, 0, SEEK_END), .head_last = '\n', .ok = true};
  int pipe_fd[2] = {-1, -1};
  int sig_fd = signalfd(-1, &mine, SFD_CLOEXEC | SFD_NONBLOCK);
  bool ok = sig_fd >= 0;
  if (ok && cap_log) {
    void *ring =
        mmap(NULL, RC_LEG_LOG_TAIL + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    log.ring = ring == MAP_FAILED ? NULL : ring;
    ok = log.ring && pipe2(pipe_fd, O_CLOEXEC) == 0 && fcntl(pipe_fd[0], F_SETFL, O_NONBLOCK) == 0;
    if (ok) fcntl(pipe_fd[0], F_SETPIPE_SZ, 1 << 20); /* fewer wake-ups; the default is fine too */
  }
  if (!ok) {
    send_msg(err_w, MSG_ERRNO, errno);
    _exit(127);
  }
  pid_t child = fork();
  if (child == 0) exec_trainer(argv, env, search_path, die_with_run, cap_log, pipe_fd, err_w, &sa);
  if (child < 0) {
    send_msg(err_w, MSG_ERRNO, errno);
    _exit(127);
  }
  setpgid(child, child); /* also here, so that `run` can signal it at once */
  send_msg(err_w, MSG_TRAINER_PID, (int)child);
  close(err_w);               /* the exec closes the trainer's copy: EOF tells `run` it started */
  if (wait_fd >= 0) close(3); /* the wait pipe is the trainer's (without one, 3 is free) */
  if (cap_log) close(pipe_fd[1]);
  watch_trainer(child, sig_fd, pipe_fd, cap_log, subreaper, &log);
  if (subreaper) end_descendants(child);
  log_finish(&log);
  exit_as_trainer(child, &sa);
}

int rc_spawn_leg(char *const *argv, char *const *envp, bool search_path, const char *log_path,
                 const char *header, int wait_fd, pid_t *pid, pid_t *pgid, rc_err *err) {
  *pid = -1;
  if (pgid) *pgid = -1;
  /* The log starts with the command, so that it can be re-run by hand;
   * creating it here also gives a clear error for an unwritable directory.
   * The leg then opens it again by name and appends. */
  int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return rc_fail(err, RC_EXIT_IOERR, "cannot create %s: %s", log_path, strerror(errno));
  if (header) {
    size_t len = strlen(header);
    ssize_t w1 = write(fd, "$ ", 2), w2 = write(fd, header, len), w3 = write(fd, "\n", 1);
    if (w1 != 2 || w2 != (ssize_t)len || w3 != 1) {
      int e = errno;
      close(fd);
      return rc_fail(err, RC_EXIT_IOERR, "cannot write %s: %s", log_path, strerror(e));
    }
  }
  close(fd);
  int errp[2]; /* {kind, value} messages: the trainer's pid, an errno; EOF once it runs */
  if (pipe2(errp, O_CLOEXEC)) return rc_fail(err, RC_EXIT_SOFTWARE, "pipe: %s", strerror(errno));
  char *const *env = envp ? envp : environ;
  pid_t run_pid = getpid();
  /* test hooks (docs/robustness.md): legs that outlive run, as before; a
   * leg log without the cap, as before */
  const char *orphan = getenv("RC_TEST_LEGS_OUTLIVE_RUN");
  bool die_with_run = !(orphan && *orphan == '1');
  const char *uncapped = getenv("RC_TEST_LEG_LOG_UNCAPPED");
  bool cap_log = !(uncapped && *uncapped == '1');
  /* and what a trainer started outlives its leg, as before */
  const char *no_reaper = getenv("RC_TEST_NO_SUBREAPER");
  bool subreaper = !(no_reaper && *no_reaper == '1');
  if (wait_fd >= 0 && wait_fd <= 4) {
    close(errp[0]);
    close(errp[1]);
    return rc_fail(err, RC_EXIT_SOFTWARE, "wait pipe on fd %d: must be above 4", wait_fd);
  }
  fflush(NULL); /* nothing buffered is written twice */
  pid_t p = fork();
  if (p < 0) {
    int e = errno;
    close(errp[0]);
    close(errp[1]);
    return rc_fail(err, RC_EXIT_SOFTWARE, "fork: %s", strerror(e));
  }
  if (p == 0) {
    close(errp[0]);
    supervise(argv, env, search_path, log_path, wait_fd, run_pid, die_with_run, cap_log, subreaper,
              errp[1]);
  }
  setpgid(p, p); /* the supervisor's own group, away from run's terminal */
  close(errp[1]);
  int child_errno = 0, msg[2];
  pid_t trainer = -1;
  for (;;) {
    ssize_t got = read(errp[0], msg, sizeof msg);
    if (got < 0 && errno == EINTR) continue;
    if (got != (ssize_t)sizeof msg) break;
    if (msg[0] == MSG_TRAINER_PID) trainer = (pid_t)msg[1];
    if (msg[0] == MSG_ERRNO && !child_errno) child_errno = msg[1] ? msg[1] : EIO;
  }
  close(errp[0]);
  if (child_errno || trainer <= 1) {
    /* the leg never ran: reap its supervisor here */
    int st;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    return rc_fail(err, RC_EXIT_SOFTWARE, "cannot execute '%s': %s", argv[0],
                   strerror(child_errno ? child_errno : EIO));
  }
  *pid = p;
  if (pgid) *pgid = trainer;
  return RC_OK;
}

int rc_spawn_logged(char *const *argv, char *const *envp, bool search_path, const char *log_path,
                    const char *header, pid_t *pid, rc_err *err) {
  return rc_spawn_leg(argv, envp, search_path, log_path, header, -1, pid, NULL, err);
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
  int fd;
  size_t size;
  rc_err e = {0};
  if (rc_open_regular(path, false, &fd, &size, &e)) return; /* a FIFO or device: no tail */
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

/* What a leg left must be its own (run.h): two checkpoint directories
 * that are, or share, one file. Here, beside the other readers of what
 * legs leave, so that the legs (run_legs.c) and the checks (run_checks.c)
 * both call it without calling each other. */
int rc_run_same_checkpoint(const char *a, const char *b, rc_err *err) {
  struct stat sa, sb;
  if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return RC_OK; /* the check says what is missing */
  if (sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s and %s are the same directory (a link): a checkpoint compared with itself "
                   "proves nothing",
                   a, b);
  DIR *d = opendir(a);
  if (!d) return RC_OK;
  int rc = RC_OK;
  for (struct dirent *e; !rc && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char pa[RC_RUN_PATH_CAP + 320], pb[RC_RUN_PATH_CAP + 320];
    rc_bufprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
    rc_bufprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
    if (stat(pa, &sa) == 0 && stat(pb, &sb) == 0 && sa.st_dev == sb.st_dev &&
        sa.st_ino == sb.st_ino)
      rc = rc_fail(err, RC_EXIT_DATAERR,
                   "%s is the same file on both sides (a hard or symbolic link to %s): a "
                   "checkpoint compared with itself proves nothing",
                   pa, pb);
  }
  closedir(d);
  return rc;
}

int64_t rc_trace_rows(const char *path) {
  /* a FIFO would block the scheduler and a device never ends: regular
   * files only, and no further than the size a trace may have */
  int fd;
  size_t size;
  rc_err e = {0};
  if (rc_open_regular(path, false, &fd, &size, &e)) return 0;
  char chunk[65536];
  int64_t lines = 0;
  for (size_t seen = 0; seen <= RC_READ_CAP_TRACE;) {
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    seen += (size_t)r;
    for (ssize_t i = 0; i < r; i++) lines += chunk[i] == '\n';
  }
  close(fd);
  return lines > 0 ? lines - 1 : 0; /* the header */
}

void rc_leg_timing_read(const char *leg_dir, rc_leg_timing *t) {
  memset(t, 0, sizeof *t);
  t->exec_s = t->backend_s = t->model_init_s = t->wait_s = t->load_s = -1;
  t->first_step_s = t->start_to_first_step_s = t->step_lock_wait_s = t->start_gate_s = -1;
  t->handoff_confirm_wait_s = -1;
  char path[RC_RUN_PATH_CAP + 16];
  snprintf(path, sizeof path, "%s/" RC_TIMING_NAME, leg_dir);
  /* regular files only, bounded: a leg writes a few rows per step */
  char *text = NULL;
  size_t n = 0;
  rc_err e = {0};
  if (rc_read_regular_file(path, RC_READ_CAP_JSON, false, &text, &n, &e)) return;
  FILE *f = n ? fmemopen(text, n, "r") : NULL;
  if (!f) {
    free(text);
    return;
  }
  char line[256];
  if (!fgets(line, sizeof line, f) || strcmp(line, "phase,step,seconds\n")) {
    fclose(f); /* not ours (an exec trainer's), or from before the phases */
    free(text);
    return;
  }
  t->have = true;
  while (fgets(line, sizeof line, f)) {
    char phase[32];
    long long step = 0;
    double sec = 0;
    char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c2 || (size_t)(c1 - line) >= sizeof phase) continue;
    memcpy(phase, line, (size_t)(c1 - line));
    phase[c1 - line] = 0;
    if (c2 > c1 + 1) step = strtoll(c1 + 1, NULL, 10);
    sec = strtod(c2 + 1, NULL);
    (void)step;
    if (!strcmp(phase, "exec"))
      t->exec_s = sec;
    else if (!strcmp(phase, "backend"))
      t->backend_s = sec;
    else if (!strcmp(phase, "model_init"))
      t->model_init_s = sec;
    else if (!strcmp(phase, "wait"))
      t->wait_s = sec;
    else if (!strcmp(phase, "load"))
      t->load_s = sec;
    else if (!strcmp(phase, "start_to_first_step"))
      t->start_to_first_step_s = sec;
    else if (!strcmp(phase, "step_lock_wait"))
      t->step_lock_wait_s = sec;
    else if (!strcmp(phase, "start_gate"))
      t->start_gate_s = sec;
    else if (!strcmp(phase, "handoff_confirm_wait"))
      t->handoff_confirm_wait_s = sec;
    else if (!strcmp(phase, "save")) {
      t->n_saves++;
      t->saves_s += sec;
    } else if (!strcmp(phase, "step")) {
      if (!t->n_steps) t->first_step_s = sec;
      t->n_steps++;
      t->steps_s += sec;
    }
  }
  fclose(f);
  free(text);
}
