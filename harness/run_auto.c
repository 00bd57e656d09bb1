/* run_auto.c — `run --save-at auto`: the few save points a CI run should use
 * (docs/design.md §6). The choice itself is pure (rc_run_auto_save_points in
 * run_plan.c); this file gathers what it needs before any leg is planned:
 * the LR warmup and the precision from `train --dry-run`'s canonical config,
 * and, for fp16, where steps are skipped. A run cannot know that before it
 * trains, so an fp16 run first trains a probe: the same flags, steps 1..N-1,
 * no checkpoints. Training is deterministic (the run's A/A checks confirm
 * it), so the through leg skips the same steps.
 *
 * The probe is a leg in all but name (docs/robustness.md, "The fp16
 * probe"): it runs under a leg's supervisor (run_spawn.c: its own process
 * group, killed with `run` however `run` dies, nothing it starts outlives
 * it), SIGINT and SIGTERM to `run` stop it as they stop legs (SIGTERM to
 * its group, SIGKILL after the grace) and `run` then exits 130 or 143
 * without starting a leg, and its directory is DIR/.auto-probe.XXXXXX
 * inside the run's --out, under the run's lock: removed on every exit
 * path, and a `run` SIGKILLed meanwhile leaves it where the next run into
 * DIR removes it (rc_run_prepare), never in $TMPDIR. */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "harness/run.h"
#include "harness/run_signal.h"
#include "io/layout.h"

/* One CSV row of the probe's trace, split on commas in place; the fields
 * point into line. Returns the count. */
static int split_csv(char *line, char **field, int cap) {
  int n = 0;
  for (char *p = line; n < cap;) {
    field[n++] = p;
    char *c = strchr(p, ',');
    if (!c) break;
    *c = 0;
    p = c + 1;
  }
  return n;
}

/* The skipped steps in the probe's trace (ascending) and, for each, whether
 * the loss scale of the next row is the same (the hysteresis absorbed the
 * overflow). The arrays hold `cap` entries. */
static int read_skips(const char *trace, int64_t *skipped, bool *absorbed, int cap, int *n,
                      rc_err *err) {
  *n = 0;
  char *text = NULL;
  size_t len = 0;
  rc_err rerr = {0};
  if (rc_read_regular_file(trace, RC_READ_CAP_TRACE, false, &text, &len, &rerr))
    return rc_fail(err, RC_EXIT_SOFTWARE, "--save-at auto: the probe's trace: %s", rerr.msg);
  FILE *f = len ? fmemopen(text, len, "r") : NULL;
  if (!f) {
    free(text);
    return rc_fail(err, RC_EXIT_SOFTWARE, "--save-at auto: the probe's %s is empty", trace);
  }
  char line[8192];
  char *field[256];
  int c_step = -1, c_scale = -1, c_skip = -1;
  if (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    int nf = split_csv(line, field, 256);
    for (int i = 0; i < nf; i++) {
      if (!strcmp(field[i], "step")) c_step = i;
      if (!strcmp(field[i], "loss_scale")) c_scale = i;
      if (!strcmp(field[i], "skipped")) c_skip = i;
    }
  }
  if (c_step < 0 || c_scale < 0 || c_skip < 0) {
    fclose(f);
    free(text);
    return rc_fail(err, RC_EXIT_SOFTWARE,
                   "--save-at auto: the probe's %s has no step, loss_scale and skipped columns",
                   trace);
  }
  char prev_scale[64] = "";
  bool prev_stored = false; /* the previous row is a skipped step held in the arrays */
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    int nf = split_csv(line, field, 256);
    if (nf <= c_step || nf <= c_scale || nf <= c_skip) continue;
    /* the row after a skipped step tells whether its overflow halved the scale */
    if (prev_stored) absorbed[*n - 1] = !strcmp(prev_scale, field[c_scale]);
    prev_stored = !strcmp(field[c_skip], "1") && *n < cap;
    snprintf(prev_scale, sizeof prev_scale, "%s", field[c_scale]);
    if (prev_stored) {
      skipped[*n] = strtoll(field[c_step], NULL, 10);
      absorbed[*n] = false; /* unknown until the next row */
      (*n)++;
    }
  }
  fclose(f);
  free(text);
  return RC_OK;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return (flag == FTW_DP ? rmdir(path) : unlink(path)) ? -1 : 0;
}

#define PROBE_KILL_GRACE_S 5.0 /* SIGTERM, then SIGKILL after this long, as for a leg */

/* Test hook (docs/robustness.md), not a feature: RC_TEST_PROBE_UNSUPERVISED=1
 * runs the probe as before: a plain child of `run` (no supervisor, no
 * process group of its own), waited for without looking at signals, in a
 * directory under $TMPDIR. */
static bool probe_unsupervised(void) {
  const char *v = getenv("RC_TEST_PROBE_UNSUPERVISED");
  return v && !strcmp(v, "1");
}

/* The probe's argv: `train [fwd] --steps N --stop-at N-1 --out OUT --leg
 * auto-probe --progress off` (malloc'd; the words are borrowed). */
static char **probe_argv(const rc_run_opts *o, char *steps, char *stop, char *out_dir) {
  char **argv = calloc((size_t)o->n_fwd + 16, sizeof *argv);
  if (!argv) return NULL;
  int a = 0;
  argv[a++] = (char *)o->self_exe;
  argv[a++] = "train";
  for (int i = 0; i < o->n_fwd; i++) argv[a++] = o->fwd[i];
  char *rest[] = {"--steps", steps,   "--stop-at",  stop,         "--out",
                  out_dir,   "--leg", "auto-probe", "--progress", "off"};
  for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) argv[a++] = rest[i];
  argv[a] = NULL;
  return argv;
}

/* Runs the probe as a leg is run (rc_spawn_leg: a supervisor, its own
 * process group, its output in dir/log.txt) and waits for it, stopping it
 * on SIGINT/SIGTERM. *status is its wait status; RC_OK, or 128 + the
 * signal when `run` was interrupted (the probe then stopped), or a spawn
 * error. */
static int probe_supervised(const char *dir, char **argv, int *status, rc_err *err) {
  char log_path[RC_RUN_PATH_CAP + 16], header[4096];
  snprintf(log_path, sizeof log_path, "%s/log.txt", dir);
  rc_argv_quote(argv, header, sizeof header);
  pid_t pid = -1, pgid = -1;
  int rc = rc_spawn_leg(argv, NULL, false, log_path, header, -1, &pid, &pgid, err);
  if (rc) return rc;
  double kill_at = 0;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      *status = st;
      break;
    }
    if (r < 0 && errno != EINTR) {
      *status = 0x7f00; /* not our child any more: nothing to wait for */
      break;
    }
    double now = rc_now();
    if (rc_run_interrupt_requested() && kill_at == 0) {
      kill(-pgid, SIGTERM);
      kill_at = now;
    }
    if (kill_at > 0 && now - kill_at > PROBE_KILL_GRACE_S) kill(-pgid, SIGKILL);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  int sig = rc_run_interrupt_signal();
  if (kill_at > 0 || sig)
    return rc_fail(err, 128 + (sig ? sig : SIGTERM),
                   "interrupted by %s during --save-at auto's fp16 probe: the probe was stopped "
                   "and no leg was started",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
  return RC_OK;
}

/* The probe: `train [fwd] --steps N --stop-at N-1 --out DIR/.auto-probe.X/probe`,
 * then its trace's skipped steps; the directory removed on every path. */
static int probe_skips(const rc_run_opts *o, int64_t *skipped, bool *absorbed, int cap, int *n,
                       rc_err *err) {
  bool old_way = probe_unsupervised();
  char dir[RC_RUN_PATH_CAP], out_dir[RC_RUN_PATH_CAP + 16], trace[RC_RUN_PATH_CAP + 32];
  int rc;
  if (old_way) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/resumecheck-auto.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  } else {
    /* inside --out, under the run's lock (taken here, kept for the run) */
    if ((rc = rc_run_lock_out(o->out_dir, err))) return rc;
    snprintf(dir, sizeof dir, "%s/" RC_RUN_PROBE_PREFIX "XXXXXX", o->out_dir);
  }
  if (!mkdtemp(dir))
    return rc_fail(err, RC_EXIT_IOERR, "--save-at auto: cannot make a probe directory %s: %s", dir,
                   strerror(errno));
  snprintf(out_dir, sizeof out_dir, "%s/probe", dir);
  snprintf(trace, sizeof trace, "%s/" RC_TRACE_NAME, out_dir);
  char stop[24], steps[24];
  snprintf(stop, sizeof stop, "%" PRId64, o->steps - 1);
  snprintf(steps, sizeof steps, "%" PRId64, o->steps);
  int status = 0;
  if (old_way) {
    char *extra[] = {"--stop-at",  stop,         "--out", out_dir, "--leg",
                     "auto-probe", "--progress", "off",   NULL};
    char *out = NULL;
    size_t len = 0;
    rc = rc_run_train_capture(o, NULL, extra, &out, &len, &status, err);
    free(out);
  } else {
    char **argv = probe_argv(o, steps, stop, out_dir);
    rc = argv ? probe_supervised(dir, argv, &status, err)
              : rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
    free(argv);
  }
  if (!rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    char tail[2048] = "";
    char log_path[RC_RUN_PATH_CAP + 16];
    snprintf(log_path, sizeof log_path, "%s/log.txt", dir);
    if (!old_way) rc_log_tail(log_path, 6, tail, sizeof tail);
    rc = rc_fail(err, RC_EXIT_SOFTWARE,
                 "--save-at auto: the probe (train --stop-at %s) failed with %s %d%s%s", stop,
                 WIFSIGNALED(status) ? "signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), *tail ? ": " : "",
                 tail);
  }
  if (!rc) rc = read_skips(trace, skipped, absorbed, cap, n, err);
  if (nftw(dir, rm_entry, 32, FTW_DEPTH | FTW_PHYS) && !rc)
    rc = rc_fail(err, RC_EXIT_IOERR, "--save-at auto: cannot remove the probe directory %s: %s",
                 dir, strerror(errno));
  return rc;
}

/* What --save-at auto needs of the config, from `train --dry-run`. */
typedef struct {
  int64_t warmup;
  bool fp16;
  int64_t epoch_steps;   /* steps per data epoch (--epoch-samples / global batch), 0: none */
  int64_t growth_window; /* fp16: --loss-scale-window */
} auto_config;

/* Warmup, precision, the data epoch and the loss-scale window from
 * `train [fwd] --steps N --dry-run`. */
static int read_config(const rc_run_opts *o, auto_config *ac, rc_err *err) {
  char *extra[] = {"--dry-run", NULL};
  char *out = NULL;
  size_t len = 0;
  int status = 0;
  int rc = rc_run_train_capture(o, NULL, extra, &out, &len, &status, err);
  if (rc) return rc;
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    free(out);
    if (WIFEXITED(status) && WEXITSTATUS(status) == RC_EXIT_USAGE)
      return rc_fail(err, RC_EXIT_USAGE, "the training flags were rejected (train --dry-run)");
    return rc_fail(err, RC_EXIT_SOFTWARE, "train --dry-run failed with %s %d",
                   WIFSIGNALED(status) ? "signal" : "exit status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  char jerr[128];
  rc_json *j = rc_json_parse(out, len, jerr, sizeof jerr);
  free(out);
  const char *prec = j ? rc_json_get_str(j, "precision") : NULL;
  if (!j || !prec || !rc_json_get_i64(j, "warmup", &ac->warmup)) {
    rc_json_free(j);
    return rc_fail(err, RC_EXIT_SOFTWARE,
                   "train --dry-run printed no canonical config with warmup and precision");
  }
  ac->fp16 = !strcmp(prec, "fp16");
  /* epoch_samples is in the config only when set; the batch keys always */
  int64_t epoch = 0, mb = 0, m = 0, world = 0, window = 0;
  (void)rc_json_get_i64(j, "epoch_samples", &epoch);
  if (epoch > 0 && rc_json_get_i64(j, "micro_batch", &mb) &&
      rc_json_get_i64(j, "microbatches", &m) && rc_json_get_i64(j, "world_size", &world) &&
      mb > 0 && m > 0 && world > 0)
    ac->epoch_steps = epoch / (mb * m * world);
  if (ac->fp16 && rc_json_get_i64(j, "loss_scale_window", &window)) ac->growth_window = window;
  rc_json_free(j);
  return RC_OK;
}

int rc_run_auto_choose(const rc_run_opts *o, int64_t **save_at, int *n, char *why, size_t cap,
                       rc_err *err) {
  *save_at = NULL;
  *n = 0;
  auto_config ac = {0};
  int n_skipped = 0, rc;
  int64_t skipped[RC_AUTO_MAX * 64];
  bool absorbed[RC_AUTO_MAX * 64];
  /* SIGINT and SIGTERM are the run's from here: the probe is stopped by
   * them as a leg is (a handler installed only with the legs lost a SIGINT
   * that came during the probe where the shell ignored it, and SIGTERM's
   * default ended `run` alone) */
  if (!probe_unsupervised()) rc_run_install_signal_handlers();
  if (o->trainer == RC_TRAINER_SELF) {
    if ((rc = read_config(o, &ac, err))) return rc;
    int cap_skips = (int)(sizeof skipped / sizeof skipped[0]);
    if (ac.fp16 && (rc = probe_skips(o, skipped, absorbed, cap_skips, &n_skipped, err))) return rc;
  }
  rc_auto_point p[RC_AUTO_MAX];
  int np = rc_run_auto_save_points(o->steps, ac.warmup, skipped, absorbed, n_skipped, p);
  np = rc_run_auto_add_config_points(p, np, o->steps, ac.epoch_steps, ac.growth_window);
  int64_t *v = malloc((size_t)(np ? np : 1) * sizeof *v);
  if (!v) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  for (int i = 0; i < np; i++) v[i] = p[i].step;
  rc_run_auto_describe(p, np, why, cap);
  size_t len = strlen(why);
  if (o->trainer == RC_TRAINER_EXEC)
    snprintf(why + len, cap - len, "; exec trainer: warmup and skipped steps not known");
  else if (ac.fp16 && !n_skipped)
    snprintf(why + len, cap - len, "; fp16: the probe skipped no step");
  *save_at = v;
  *n = np;
  return RC_OK;
}
