/* run_progress.c — what a person watching `resumecheck run` sees while the
 * legs train. On a terminal: a live block, one line per running leg with
 * step/N and an ETA read from the row count of its trace.csv (or "waiting
 * for save@K" for a pre-warmed resume leg), redrawn in place, with a permanent line for each leg
 * that ends. In CI logs (not a TTY): one plain line when a leg starts (saying what a pre-warmed leg
 * waits for) and one when it ends, nothing
 * else, so logs stay short and diffable. */
#include "run.h"

#include <inttypes.h>
#include <stdlib.h>
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

void rc_progress_tick(rc_progress *p, rc_run *run, double now) {
  if (p->mode != RC_PROGRESS_LIVE) return;
  if (p->last_draw && now - p->last_draw < 0.25) return;
  for (int i = 0; i < run->n_legs; i++) {
    rc_leg *l = &run->legs[i];
    if (l->state != RC_LEG_RUNNING) continue;
    char path[RC_RUN_PATH_CAP + 16];
    snprintf(path, sizeof path, "%s/" RC_TRACE_NAME, l->dir);
    l->steps_done = rc_trace_rows(path);
    if (l->prewarmed) {
      char marker[RC_RUN_PATH_CAP + 16];
      snprintf(marker, sizeof marker, "%s/" RC_COMPLETE_NAME, l->resume_from);
      l->waiting = !rc_path_exists(marker);
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
