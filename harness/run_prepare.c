/* run_prepare.c — everything `run` settles before the first leg starts, so
 * that a mistake costs a second, not a training run: the flags are checked
 * by `train --dry-run` (whose canonical config goes into the report), an
 * exec trainer's program must exist, and the output directory must not hold
 * leg directories from an earlier run (--overwrite removes them, and only
 * where a marker shows that `run` made them). Two runs never share a
 * directory: the first holds an flock on DIR/.lock until it exits, and a
 * second is refused before it touches anything (--overwrite included); a
 * leg directory whose lock a live `train` holds (a leg that outlived an
 * earlier run) is refused, never removed under it. An --out that cannot
 * be written is refused here too, before any leg starts. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/dirlock.h"
#include "base/fsutil.h"
#include "base/json.h"
#include "base/mem_limits.h"
#include "harness/run_signal.h"

#define RUN_MARKER ".resumecheck-run"

int rc_run_train_capture(const rc_run_opts *o, const char *fusion, char *const *extra, char **out,
                         size_t *len, int *status, rc_err *err) {
  int n_extra = 0;
  while (extra && extra[n_extra]) n_extra++;
  char **argv = calloc((size_t)o->n_fwd + (size_t)n_extra + 8, sizeof *argv);
  if (!argv) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  char steps[24];
  snprintf(steps, sizeof steps, "%" PRId64, o->steps);
  int a = 0;
  argv[a++] = (char *)o->self_exe;
  argv[a++] = "train";
  for (int i = 0; i < o->n_fwd; i++) argv[a++] = o->fwd[i];
  if (fusion) {
    argv[a++] = "--grad-accum-fusion";
    argv[a++] = (char *)fusion;
  }
  argv[a++] = "--steps";
  argv[a++] = steps;
  for (int i = 0; i < n_extra; i++) argv[a++] = extra[i];
  argv[a] = NULL;
  *out = NULL;
  *len = 0;
  *status = 0;
  int rc = rc_spawn_capture(argv, out, len, status, err);
  free(argv);
  return rc;
}

/* `train [fwd] [--grad-accum-fusion X] --steps N MODE` (MODE --dry-run or
 * --dry-run-memory). */
static int train_probe(const rc_run *run, const char *fusion, const char *mode, char **out,
                       size_t *len, int *status, rc_err *err) {
  char *extra[] = {(char *)mode, NULL};
  return rc_run_train_capture(&run->opts, fusion, extra, out, len, status, err);
}

/* `train [fwd] [--grad-accum-fusion X] --steps N --dry-run`. */
static int dry_run(rc_run *run, const char *fusion, rc_err *err) {
  char *out;
  size_t len;
  int status;
  int rc = train_probe(run, fusion, "--dry-run", &out, &len, &status, err);
  if (rc) return rc;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    while (len && (out[len - 1] == '\n' || out[len - 1] == ' ')) out[--len] = 0;
    if (!run->config_json) {
      run->config_json = out;
    } else {
      free(out);
    }
    return RC_OK;
  }
  free(out);
  if (WIFEXITED(status) && WEXITSTATUS(status) == RC_EXIT_USAGE)
    return rc_fail(err, RC_EXIT_USAGE, "the training flags were rejected (train --dry-run%s%s)",
                   fusion ? " --grad-accum-fusion " : "", fusion ? fusion : "");
  if (WIFSIGNALED(status))
    return rc_fail(err, RC_EXIT_SOFTWARE, "train --dry-run was killed by signal %d",
                   WTERMSIG(status));
  return rc_fail(err, RC_EXIT_SOFTWARE, "train --dry-run failed with exit status %d",
                 WEXITSTATUS(status));
}

/* `run --jobs J`: legs that run at once share one device (or the host). RC_OK
 * if min(jobs, concurrent_legs) legs of per_leg bytes each fit in available,
 * else RC_EXIT_RESOURCES naming the largest --jobs that fits. available 0:
 * unknown, not checked. */
int rc_run_jobs_memory_check(uint64_t per_leg, int jobs, int concurrent_legs, uint64_t available,
                             const char *what, rc_err *err) {
  int at_once = jobs < concurrent_legs ? jobs : concurrent_legs;
  if (at_once < 1) at_once = 1;
  if (!available || per_leg * (uint64_t)at_once <= available) return RC_OK;
  uint64_t fit = per_leg ? available / per_leg : 0;
  char need_s[32], avail_s[32], leg_s[32];
  rc_format_bytes(per_leg * (uint64_t)at_once, need_s, sizeof need_s);
  rc_format_bytes(available, avail_s, sizeof avail_s);
  rc_format_bytes(per_leg, leg_s, sizeof leg_s);
  if (fit == 0)
    return rc_fail(err, RC_EXIT_RESOURCES,
                   "one leg needs %s of %s but %s is available: not even --jobs 1 fits", leg_s,
                   what, avail_s);
  return rc_fail(err, RC_EXIT_RESOURCES,
                 "--jobs %d runs %d legs at once, needing %s of %s (%s each) but %s is "
                 "available: use --jobs %llu or fewer",
                 jobs, at_once, need_s, what, leg_s, avail_s, (unsigned long long)fit);
}

/* `train [fwd] --steps N --dry-run-memory`: what one leg needs and what its
 * device has free; then every leg that may run at once must fit (legs are
 * pre-warmed, so with enough --jobs all of them hold their memory at once). */
static int check_jobs_memory(rc_run *run, rc_err *err) {
  const rc_run_opts *o = &run->opts;
  char *out;
  size_t len;
  int status;
  int rc = train_probe(run, NULL, "--dry-run-memory", &out, &len, &status, err);
  if (rc) return rc;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    free(out);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : RC_EXIT_SOFTWARE;
    return rc_fail(err, code == RC_EXIT_UNTESTABLE ? code : RC_EXIT_SOFTWARE,
                   "train --dry-run-memory failed (exit %d): the legs' device is not usable", code);
  }
  char jerr[128];
  rc_json *j = rc_json_parse(out, len, jerr, sizeof jerr);
  free(out);
  int64_t need = 0, host_need = 0, avail = 0;
  const char *device = j ? rc_json_get_str(j, "device") : NULL;
  if (!j || !device || !rc_json_get_i64(j, "need_device_bytes", &need) ||
      !rc_json_get_i64(j, "need_host_bytes", &host_need) ||
      !rc_json_get_i64(j, "device_free_bytes", &avail)) {
    rc_json_free(j);
    return rc_fail(err, RC_EXIT_SOFTWARE, "train --dry-run-memory printed no memory report");
  }
  snprintf(run->legs_device, sizeof run->legs_device, "%s",
           device); /* --gpu-scheduling's default */
  bool on_host = !strcmp(device, "cpu");
  /* RLIMIT_AS and RLIMIT_DATA bind each leg alone: a leg inherits them and
   * maps, beside its need, what this process maps now (it is this same
   * program); the leg checks itself exactly before it allocates */
  rc_mem_limit lim;
  uint64_t mapped = (uint64_t)host_need + (on_host ? (uint64_t)need : 0) + RC_MEM_PROCESS_SLACK;
  if (rc_mem_process_limit(&lim) && mapped > lim.room) {
    char need_s[32], what[320];
    rc_format_bytes(mapped, need_s, sizeof need_s);
    rc_mem_limit_describe(&lim, what, sizeof what);
    rc_json_free(j);
    return rc_fail(err, RC_EXIT_RESOURCES,
                   "one leg needs %s in its process but %s (each leg inherits it): not even "
                   "--jobs 1 fits; raise the limit or use smaller sizes",
                   need_s, what);
  }
  rc = rc_run_jobs_memory_check((uint64_t)(on_host ? need + host_need : need), o->jobs, run->n_legs,
                                (uint64_t)avail, on_host ? "host memory" : "device memory", err);
  rc_json_free(j);
  return rc;
}

/* The exec trainer's program: a path that is executable, or a name on PATH. */
static int check_program(const char *prog, rc_err *err) {
  if (strchr(prog, '/')) {
    if (access(prog, X_OK) == 0) return RC_OK;
    return rc_fail(err, RC_EXIT_USAGE, "--train-cmd: '%s' is not an executable file: %s", prog,
                   strerror(errno));
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  const char *p = path;
  for (;;) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char cand[RC_RUN_PATH_CAP];
    if (len + strlen(prog) + 2 < sizeof cand) {
      if (len)
        snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p, prog);
      else
        snprintf(cand, sizeof cand, "./%s", prog);
      struct stat st;
      if (!stat(cand, &st) && S_ISREG(st.st_mode) && !access(cand, X_OK)) return RC_OK;
    }
    if (!end) break;
    p = end + 1;
  }
  return rc_fail(err, RC_EXIT_USAGE, "--train-cmd: '%s' not found on PATH", prog);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return (flag == FTW_DP ? rmdir(path) : unlink(path)) ? -1 : 0;
}

/* Removes a tree without following symbolic links. */
static int remove_tree(const char *path, rc_err *err) {
  if (nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS))
    return rc_fail(err, RC_EXIT_IOERR, "cannot remove %s: %s", path, strerror(errno));
  return RC_OK;
}

/* The lock of this process's run: one run per process, held until exit (the
 * kernel drops it then, however the process ends). Close-on-exec, so a leg
 * never inherits it. */
static int g_lock_fd = -1;
static char g_lock_dir[RC_RUN_PATH_CAP];

int rc_run_lock_out(const char *out_dir, rc_err *err) {
  if (g_lock_fd >= 0 && !strcmp(g_lock_dir, out_dir)) return RC_OK; /* held since the probe */
  if (g_lock_fd >= 0) { /* a second run in this process: the first is over */
    close(g_lock_fd);
    g_lock_fd = -1;
  }
  int rc = rc_mkdir_p(out_dir, err);
  if (!rc) rc = rc_dir_lock(out_dir, "run", &g_lock_fd, err);
  if (!rc) snprintf(g_lock_dir, sizeof g_lock_dir, "%s", out_dir);
  return rc;
}

/* Probe directories a SIGKILLed `run --save-at auto` left in DIR (only a
 * run holding DIR/.lock makes or removes them, and this one holds it). */
static int remove_stale_probes(const char *out_dir, rc_err *err) {
  DIR *d = opendir(out_dir);
  if (!d) return RC_OK;
  int rc = RC_OK;
  for (struct dirent *e; !rc && (e = readdir(d));) {
    if (strncmp(e->d_name, RC_RUN_PROBE_PREFIX, strlen(RC_RUN_PROBE_PREFIX))) continue;
    char path[RC_RUN_PATH_CAP + 300];
    snprintf(path, sizeof path, "%s/%s", out_dir, e->d_name);
    rc = remove_tree(path, err);
  }
  closedir(d);
  return rc;
}

static int clear_stale_legs(rc_run *run, int from, bool ours, rc_err *err);
static int make_leg_dirs(rc_run *run, int from, rc_err *err);

int rc_run_prepare(rc_run *run, rc_err *err) {
  const rc_run_opts *o = &run->opts;
  int rc;
  if (o->trainer == RC_TRAINER_SELF) {
    if (o->confirm_arm) {
      if ((rc = dry_run(run, "on", err)) || (rc = dry_run(run, "off", err))) return rc;
    } else if ((rc = dry_run(run, NULL, err))) {
      return rc;
    }
    if ((rc = check_jobs_memory(run, err))) return rc;
    if ((rc = rc_run_resolve_through_checkpoints(run, err))) return rc;
  } else if (run->n_legs && (rc = check_program(run->legs[0].argv[0], err))) {
    return rc;
  }

  if ((rc = rc_run_lock_out(o->out_dir, err))) return rc;
  if ((rc = remove_stale_probes(o->out_dir, err))) return rc;
  char marker[RC_RUN_PATH_CAP + 32];
  snprintf(marker, sizeof marker, "%s/%s", o->out_dir, RUN_MARKER);
  bool ours = rc_path_exists(marker);
  /* the arm directories first, then the legs: arms hold legs */
  static const char *const arms[] = {"fusion-on", "fusion-off"};
  for (int a = 0; a < 2 && o->confirm_arm; a++) {
    char dir[RC_RUN_PATH_CAP + 32];
    snprintf(dir, sizeof dir, "%s/%s", o->out_dir, arms[a]);
    if (!rc_path_exists(dir)) continue;
    if (!o->overwrite || !ours)
      return rc_fail(err, RC_EXIT_USAGE, "%s already exists: choose a new --out, remove it%s", dir,
                     ours ? ", or pass --overwrite" : "");
    if ((rc = remove_tree(dir, err))) return rc;
  }
  if ((rc = clear_stale_legs(run, 0, ours, err))) return rc;
  static const char text[] = "made by `resumecheck run`; --overwrite may delete the leg "
                             "directories here\n";
  if ((rc = rc_write_file_atomic(marker, text, sizeof text - 1, err))) return rc;
  return make_leg_dirs(run, 0, err);
}

int rc_run_prepare_legs(rc_run *run, int from, rc_err *err) {
  int rc = clear_stale_legs(run, from, true, err);
  return rc ? rc : make_leg_dirs(run, from, err);
}

/* Legs [from, n_legs): a leg directory an earlier run left is refused, or
 * removed with --overwrite over a directory this tool made (ours). */
static int clear_stale_legs(rc_run *run, int from, bool ours, rc_err *err) {
  const rc_run_opts *o = &run->opts;
  int rc;
  for (int i = from; i < run->n_legs; i++) {
    const rc_leg *leg = &run->legs[i];
    if (rc_path_exists(leg->dir)) {
      /* a leg of an earlier run that outlived it (or a `train` by hand)
       * still writes here: neither refused-and-kept nor removed under it */
      if ((rc = rc_dir_lock_probe(leg->dir, "a leg of an earlier run or a `resumecheck train`",
                                  err)))
        return rc;
      if (!o->overwrite || !ours)
        return rc_fail(err, RC_EXIT_USAGE,
                       "%s already exists from an earlier run: choose a new --out, remove it%s",
                       leg->dir, ours ? ", or pass --overwrite" : "");
      if ((rc = remove_tree(leg->dir, err))) return rc;
    }
  }
  return RC_OK;
}

static int make_leg_dirs(rc_run *run, int from, rc_err *err) {
  int rc;
  for (int i = from; i < run->n_legs; i++)
    if ((rc = rc_mkdir_p(run->legs[i].dir, err))) return rc;
  return RC_OK;
}
