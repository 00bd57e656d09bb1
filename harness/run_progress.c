/* run_progress.c — what a person watching `resumecheck run` sees while the
 * legs train. On a terminal: a live block, one line per running leg with
 * step/N and an ETA read from the row count of its trace.csv (or "waiting
 * for save@K" for a pre-warmed resume leg), redrawn in place, with a
 * permanent line for each leg that ends. In CI logs (not a TTY): one plain
 * line when a leg starts (saying what a pre-warmed leg waits for) and one
 * when it ends, and between them a heartbeat line per running leg at every
 * 10% of its steps or after RC_HEARTBEAT_S seconds (default 60) without
 * one, whichever comes first, so a long leg in a CI log is visibly alive
 * and the log stays short:
 *   resumecheck run: [through] step 40/100 (40%), 12.30 s, loss 3.2101 */
#include "run.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "harness/report.h"
#include "io/layout.h"

double rc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rc_progress_init(rc_progress *p, const rc_run *run) {
  memset(p, 0, sizeof *p);
  p->out = run->opts.progress_out ? run->opts.progress_out : stderr;
  p->mode = run->opts.progress;
  /* RC_HEARTBEAT_S: seconds, > 0 (tests use a fraction); anything else: 60 */
  const char *beat = getenv("RC_HEARTBEAT_S");
  char *end = NULL;
  p->beat_s = beat ? strtod(beat, &end) : 0;
  if (!beat || end == beat || *end || !(p->beat_s > 0) || !isfinite(p->beat_s)) p->beat_s = 60;
  if (p->mode == RC_PROGRESS_AUTO) {
    const char *term = getenv("TERM");
    bool dumb = term && !strcmp(term, "dumb");
    p->mode = (isatty(fileno(p->out)) && !dumb) ? RC_PROGRESS_LIVE : RC_PROGRESS_PLAIN;
  }
}

static void erase_block(rc_progress *p) {
  if (p->mode != RC_PROGRESS_LIVE || !p->lines_drawn) return;
  fprintf(p->out, "\033[%dA\033[J", p->lines_drawn); /* up n lines, clear to end */
  p->lines_drawn = 0;
}

static void draw_block(rc_progress *p, const rc_run *run, double now) {
  int running = 0, done = 0, pending = 0;
  for (int i = 0; i < run->n_legs; i++) {
    rc_leg_state s = run->legs[i].state;
    running += s == RC_LEG_RUNNING;
    pending += s == RC_LEG_PENDING;
    done += s != RC_LEG_RUNNING && s != RC_LEG_PENDING;
  }
  int shown = 0;
  for (int i = 0; i < run->n_legs && shown < 16; i++) {
    const rc_leg *l = &run->legs[i];
    if (l->state != RC_LEG_RUNNING) continue;
    int64_t total = l->last_step - l->resume_step;
    int64_t doneN = l->steps_done < total ? l->steps_done : total;
    double el = now - l->t_start;
    char eta[32] = "ETA -";
    if (doneN > 0) {
      char s[24];
      rc_fmt_seconds(el / (double)doneN * (double)(total - doneN), s, sizeof s);
      snprintf(eta, sizeof eta, "ETA %s", s);
    }
    if (l->waiting) {
      fprintf(p->out, "  %-22s waiting for %s@%" PRId64 " (set up, not loaded)\033[K\n", l->label,
              run->legs[l->depends_on].label, l->resume_step);
      shown++;
      continue;
    }
    int width = 20, fill = total > 0 ? (int)(width * doneN / total) : 0;
    char bar[32];
    for (int k = 0; k < width; k++) bar[k] = k < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(p->out, "  %-22s [%s] step %" PRId64 "/%" PRId64 "  %s\033[K\n", l->label, bar,
            l->resume_step + doneN, l->last_step, eta);
    shown++;
  }
  fprintf(p->out, "  %d running, %d done, %d waiting\033[K\n", running, done, pending);
  p->lines_drawn = shown + 1;
  fflush(p->out);
}

void rc_progress_leg_started(rc_progress *p, const rc_run *run, int i) {
  const rc_leg *l = &run->legs[i];
  char range[48];
  rc_leg_range(l, range, sizeof range);
  if (p->mode == RC_PROGRESS_PLAIN) {
    if (l->prewarmed)
      fprintf(p->out, "resumecheck run: leg %s started (steps %s), waiting for %s@%" PRId64 "\n",
              l->label, range, run->legs[l->depends_on].label, l->resume_step);
    else
      fprintf(p->out, "resumecheck run: leg %s started (steps %s)\n", l->label, range);
    fflush(p->out);
  }
}

void rc_progress_leg_finished(rc_progress *p, const rc_run *run, int i) {
  const rc_leg *l = &run->legs[i];
  if (p->mode == RC_PROGRESS_OFF) return;
  char wall[32], range[48];
  rc_fmt_seconds(l->wall_s, wall, sizeof wall);
  rc_leg_range(l, range, sizeof range);
  erase_block(p);
  if (l->state == RC_LEG_OK)
    fprintf(p->out, "resumecheck run: leg %s finished (steps %s, %s)\n", l->label, range, wall);
  else
    fprintf(p->out, "resumecheck run: leg %s %s after %s: %s\n", l->label,
            rc_leg_state_name(l->state), wall, l->reason);
  fflush(p->out);
  p->last_draw = 0; /* redraw at the next tick */
}

/* Column `name` of a CSV header line, or -1. */
static int column(const char *h, const char *name) {
  size_t n = strlen(name);
  for (int c = 0;; c++) {
    size_t w = strcspn(h, ",\n");
    if (w == n && !strncmp(h, name, n)) return c;
    if (h[w] != ',') return -1;
    h += w + 1;
  }
}

/* Field c of a CSV row as a number, or NAN. */
static double field(const char *row, int c) {
  for (int k = 0; k < c && row; k++) row = strchr(row, ','), row = row ? row + 1 : NULL;
  char *end = NULL;
  double v = row ? strtod(row, &end) : NAN;
  return row && end != row && (*end == ',' || !*end) ? v : NAN;
}

/* Does trace.csv exist with a header that has no column `name`? */
static bool column_missing(const char *path, const char *name) {
  int fd;
  size_t size;
  rc_err e = {0};
  if (rc_open_regular(path, false, &fd, &size, &e)) return false; /* regular files only */
  char head[4096];
  ssize_t n = read(fd, head, sizeof head - 1);
  close(fd);
  if (n <= 0 || !memchr(head, '\n', (size_t)n)) return false;
  head[n] = 0;
  return column(head, name) < 0;
}

/* The step and loss of the last complete row of trace.csv (NAN where the
 * column is missing), read from the file's first and last 4 KiB only: a
 * heartbeat must not read a long trace, and both numbers come from one row. */
static void last_row(const char *path, double *step, double *loss) {
  *step = *loss = NAN;
  int fd;
  size_t size;
  rc_err e = {0};
  if (rc_open_regular(path, false, &fd, &size, &e)) return; /* regular files only */
  char head[4096], tail[4097];
  struct stat st;
  ssize_t nh = read(fd, head, sizeof head - 1), nt = -1;
  if (nh > 0 && !fstat(fd, &st) && S_ISREG(st.st_mode)) {
    off_t at = st.st_size < (off_t)sizeof tail ? 0 : st.st_size - (off_t)(sizeof tail - 1);
    nt = pread(fd, tail, sizeof tail - 1, at);
  }
  close(fd);
  if (nh <= 0 || nt <= 0) return;
  head[nh] = 0, tail[nt] = 0;
  /* the last complete row: the text after the second-to-last newline */
  char *nl = strrchr(tail, '\n');
  if (!nl) return;
  *nl = 0;
  char *row = strrchr(tail, '\n');
  if (!row) return;
  int cs = column(head, "step"), cl = column(head, "loss");
  if (cs >= 0) *step = field(row + 1, cs);
  if (cl >= 0) *loss = field(row + 1, cl);
}

/* A heartbeat line per running leg that crossed a tenth of its steps, or
 * has been quiet for beat_s seconds (a waiting leg says what it waits for). */
static void heartbeat(rc_progress *p, rc_run *run, double now) {
  for (int i = 0; i < run->n_legs; i++) {
    rc_leg *l = &run->legs[i];
    if (l->state != RC_LEG_RUNNING) continue;
    if (l->beat_t < l->t_start) l->beat_t = l->t_start, l->beat_step = 0;
    char path[RC_RUN_PATH_CAP + 16];
    snprintf(path, sizeof path, "%s/" RC_TRACE_NAME, l->dir);
    /* steps done from the last row's step (8 KiB read, however long the
     * trace), its loss with it; a trace without a step column is counted */
    double step, loss;
    last_row(path, &step, &loss);
    int64_t total = l->last_step - l->resume_step;
    int64_t done = !isnan(step)                   ? (int64_t)step - l->resume_step
                   : column_missing(path, "step") ? rc_trace_rows(path)
                                                  : 0;
    if (done < 0) done = 0;
    if (done > total) done = total;
    l->steps_done = done;
    bool tenth = total > 0 && done * 10 / total > l->beat_step * 10 / total;
    if (!tenth && now - l->beat_t < p->beat_s) continue;
    char el[32];
    rc_fmt_seconds(now - l->t_start, el, sizeof el);
    if (l->prewarmed && !done) {
      char marker[RC_RUN_PATH_CAP + 16];
      snprintf(marker, sizeof marker, "%s/" RC_COMPLETE_NAME, l->resume_from);
      if (!rc_path_exists(marker)) {
        fprintf(p->out, "resumecheck run: [%s] waiting for %s@%" PRId64 ", %s\n", l->label,
                run->legs[l->depends_on].label, l->resume_step, el);
        l->beat_t = now;
        continue;
      }
    }
    char loss_s[48] = "";
    if (done > 0 && !isnan(loss)) snprintf(loss_s, sizeof loss_s, ", loss %.4f", loss);
    fprintf(p->out, "resumecheck run: [%s] step %" PRId64 "/%" PRId64 " (%d%%), %s%s\n", l->label,
            l->resume_step + done, l->last_step, total > 0 ? (int)(done * 100 / total) : 100, el,
            loss_s);
    l->beat_t = now, l->beat_step = done;
  }
  fflush(p->out);
}

void rc_progress_tick(rc_progress *p, rc_run *run, double now) {
  if (p->mode == RC_PROGRESS_PLAIN) {
    /* traces are read at most 4 times a second, or as often as beats are due */
    double poll = p->beat_s < 0.25 ? p->beat_s : 0.25;
    if (p->last_draw && now - p->last_draw < poll) return;
    heartbeat(p, run, now);
    p->last_draw = now;
    return;
  }
  if (p->mode != RC_PROGRESS_LIVE) return;
  if (p->last_draw && now - p->last_draw < 0.25) return;
  for (int i = 0; i < run->n_legs; i++) {
    rc_leg *l = &run->legs[i];
    if (l->state != RC_LEG_RUNNING) continue;
    char path[RC_RUN_PATH_CAP + 16];
    snprintf(path, sizeof path, "%s/" RC_TRACE_NAME, l->dir);
    l->steps_done = rc_trace_rows(path);
    if (l->prewarmed) { /* until COMPLETE or, handed over, its first step */
      char marker[RC_RUN_PATH_CAP + 16];
      snprintf(marker, sizeof marker, "%s/" RC_COMPLETE_NAME, l->resume_from);
      l->waiting = !rc_path_exists(marker) && l->steps_done == 0;
    }
  }
  erase_block(p);
  draw_block(p, run, now);
  p->last_draw = now;
}

void rc_progress_done(rc_progress *p) {
  erase_block(p);
  fflush(p->out);
}
