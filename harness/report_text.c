/* report_text.c — the concise table `resumecheck run` prints on stdout:
 * legs with step ranges and wall times, every check with its result, then
 * the findings in the seed's words and the verdict with its exit code. A
 * failed leg comes with its exit status, the last lines of its log and the
 * command that reproduces it. */
#include "report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/kernel_switches.h"

/* Display width of UTF-8 text ("→" is one column, three bytes). */
static int width(const char *s) {
  int w = 0;
  for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
  return w;
}

static void pad(FILE *out, const char *s, int w) {
  fputs(s, out);
  for (int i = width(s); i < w; i++) fputc(' ', out);
}

static const char *check_word(const rc_check *c) {
  switch (c->status) {
  case RC_CHECK_IDENTICAL:
    return "identical";
  case RC_CHECK_DIFFERS:
    return "DIFFERS";
  case RC_CHECK_SKIPPED:
    return "skipped";
  case RC_CHECK_ERROR:
    return "ERROR";
  default:
    return "pending";
  }
}

static void print_config(const rc_run *run, FILE *out) {
  const rc_run_opts *o = &run->opts;
  fprintf(out, "resumecheck run: N=%" PRId64 ", save at ", o->steps);
  if (o->save_every) {
    fprintf(out, "every step");
  } else if (o->save_auto) {
    fprintf(out, "auto: %s", o->save_at_why);
  } else {
    for (int i = 0; i < run->n_save_at; i++)
      fprintf(out, "%s%" PRId64, i ? "," : "", run->save_at[i]);
  }
  fprintf(out, "; %d legs, %d checks", run->n_legs, run->n_checks);
  if (o->trainer == RC_TRAINER_EXEC) {
    fprintf(out, "; trainer: exec\n");
  } else {
    fprintf(out, "; trainer: resumecheck train");
    for (int i = 0; i < o->n_fwd; i++) fprintf(out, " %s", o->fwd[i]);
    fprintf(out, "\n");
  }
  for (size_t i = 0; i < RC_N_KERNEL_SWITCHES; i++)
    if (getenv(RC_KERNEL_SWITCHES[i]))
      fprintf(out,
              "kernel switch %s=%s set: it changes a CUDA leg's bits (in report.json and every "
              "leg's args.json)\n",
              RC_KERNEL_SWITCHES[i], getenv(RC_KERNEL_SWITCHES[i]));
}

static void print_legs(const rc_run *run, FILE *out) {
  int wl = 3;
  for (int i = 0; i < run->n_legs; i++)
    if (width(run->legs[i].label) > wl) wl = width(run->legs[i].label);
  fprintf(out, "\n  ");
  pad(out, "leg", wl + 2);
  fprintf(out, "steps       wall        status\n");
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    char range[48], wall[32] = "-";
    rc_leg_range(l, range, sizeof range);
    if (l->state != RC_LEG_SKIPPED && l->state != RC_LEG_PENDING)
      rc_fmt_seconds(l->wall_s, wall, sizeof wall);
    fprintf(out, "  ");
    pad(out, l->label, wl + 2);
    pad(out, range, 12);
    pad(out, wall, 12);
    if (l->state == RC_LEG_OK)
      fprintf(out, "ok");
    else
      fprintf(out, "%s: %s", rc_leg_status_name(l), l->reason);
    if (l->decision) /* --through-checkpoints on-demand */
      fprintf(out, "; at %" PRId64 " %s", l->deferred_step, l->decision_why);
    fprintf(out, "\n");
  }
}

/* One line: where the legs' time went outside their steps (timing.csv of
 * each `train` leg; nothing for exec trainers). Phases summed over legs. */
static void print_startup(const rc_run *run, FILE *out) {
  double sum[5] = {0}, saves = 0, first = -1;
  int n = 0, n_saves = 0;
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg_timing *t = &run->legs[i].timing;
    if (!t->have) continue;
    const double v[5] = {t->exec_s, t->backend_s, t->model_init_s, t->wait_s, t->load_s};
    for (int k = 0; k < 5; k++)
      if (v[k] > 0) sum[k] += v[k];
    saves += t->saves_s;
    n_saves += t->n_saves;
    if (t->start_to_first_step_s > first) first = t->start_to_first_step_s;
    n++;
  }
  if (!n) return;
  static const char *const names[5] = {"exec", "backend", "model init", "wait", "load"};
  fprintf(out, "\n  start-up, summed over %d legs:", n);
  for (int k = 0; k < 5; k++) {
    char s[32];
    rc_fmt_seconds(sum[k], s, sizeof s);
    fprintf(out, " %s %s%s", names[k], s, k < 4 ? "," : "");
  }
  char s[32], f[32];
  rc_fmt_seconds(saves, s, sizeof s);
  fprintf(out, "; %d saves %s", n_saves, s);
  if (first >= 0) {
    rc_fmt_seconds(first, f, sizeof f);
    fprintf(out, "; slowest start to first step %s", f);
  }
  fprintf(out, "\n");
}

static void print_failed_legs(const rc_run *run, FILE *out) {
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    if (l->state != RC_LEG_FAILED) continue;
    fprintf(out, "\n  leg %s %s (exit status %d). Last lines of %s:\n", l->label, l->reason,
            l->exit_code, l->log_path);
    const char *p = l->log_tail;
    while (*p) {
      const char *nl = strchr(p, '\n');
      int n = nl ? (int)(nl - p) : (int)strlen(p);
      fprintf(out, "    | %.*s\n", n, p);
      p += n + (nl != NULL);
    }
    char cmd[8192];
    rc_leg_command(run, l, cmd, sizeof cmd);
    fprintf(out, "  reproduce: %s\n", cmd);
  }
}

static void print_checks(const rc_run *run, FILE *out) {
  int wn = 5;
  for (int i = 0; i < run->n_checks; i++)
    if (width(run->checks[i].name) > wn) wn = width(run->checks[i].name);
  fprintf(out, "\n  ");
  pad(out, "check", wn + 2);
  fprintf(out, "result      detail\n");
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    fprintf(out, "  ");
    pad(out, c->name, wn + 2);
    pad(out, check_word(c), 12);
    fprintf(out, "%s\n", c->summary);
  }
}

/* What the processes held at the resume point, when it says something: a
 * saved field that differs, or local ones beside a divergence. */
static void print_census(const rc_run *run, FILE *out, const char *arm, const char *prefix,
                         const char *sep, bool diverged) {
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (strcmp(c->arm, arm) || c->what != RC_CHECK_CENSUS || !c->have_census) continue;
    if (!c->census.n_saved_differ && (!diverged || !c->census.n_local_differ)) continue;
    fprintf(out, "  %s%sstate census (%s): %s\n", prefix, sep, c->name, c->summary);
    rc_census_print(&c->census, out, "    ", 8);
  }
}

/* --confirm-arm: fused against unfused without a resume. */
static void print_arms(const rc_run *run, FILE *out) {
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->cls != RC_CLASS_ARMS || c->what != RC_CHECK_STATE) continue;
    if (c->status == RC_CHECK_DIFFERS) {
      fprintf(out,
              "  %s differs (%s): fused and unfused accumulation disagree even without a resume\n",
              c->name, c->summary);
      if (c->first_dataset[0])
        fprintf(out, "  first differing %s: %s\n", c->first_is_dataset ? "dataset" : "file",
                c->first_dataset);
    } else if (c->status == RC_CHECK_IDENTICAL) {
      fprintf(out, "  %s identical (%s)\n", c->name, c->summary);
    }
  }
}

/* The findings, one per line, as the seed words them. */
static void print_findings(const rc_run *run, FILE *out) {
  fprintf(out, "\n");
  const char *arms[3] = {"", "fusion-on", "fusion-off"};
  int first = run->opts.confirm_arm ? 1 : 0, last = run->opts.confirm_arm ? 2 : 0;
  for (int a = first; a <= last; a++) {
    const char *prefix = a ? arms[a] : "";
    const char *sep = a ? ": " : "";
    int aa_total = 0, aa_bad = -1, aa_first = -1, res_total = 0, res_bad = -1, res_last = -1;
    int through_bad = -1, through_ok = -1; /* through vs aa (--aa) */
    for (int i = 0; i < run->n_checks; i++) {
      const rc_check *c = &run->checks[i];
      if (strcmp(c->arm, arms[a]) || c->what != RC_CHECK_STATE) continue;
      if (c->cls == RC_CLASS_AA) {
        aa_total++;
        if (aa_first < 0) aa_first = i;
        if (c->status == RC_CHECK_DIFFERS && aa_bad < 0) aa_bad = i;
        if (strcmp(run->legs[c->leg_b].name, "aa")) continue;
        if (c->status == RC_CHECK_DIFFERS) through_bad = i;
        if (c->status == RC_CHECK_IDENTICAL) through_ok = i;
      } else if (c->cls == RC_CLASS_RESUME) {
        res_total++;
        res_last = i;
        if (c->status == RC_CHECK_DIFFERS && res_bad < 0) res_bad = i;
      }
    }
    /* through vs save differing means non-determinism only when two
     * through legs differ too; with them identical (--aa) the save leg is
     * not a prefix; without --aa either may be the cause */
    if (aa_bad >= 0 && through_bad >= 0) {
      fprintf(out, "  %s%sA/A FAILED (%s): not deterministic, the resume result is inconclusive\n",
              prefix, sep, run->checks[through_bad].summary);
    } else if (aa_bad >= 0 && through_ok >= 0 && !strcmp(run->verdict, "not-a-prefix")) {
      fprintf(out, "  %s%sA/A identical (%s)\n", prefix, sep, run->checks[through_ok].summary);
      fprintf(out,
              "  %s%sSAVE LEG NOT A PREFIX (%s): two through legs agree, the save leg differs, the "
              "resume result is inconclusive\n",
              prefix, sep, run->checks[aa_bad].summary);
    } else if (aa_bad >= 0) {
      fprintf(out,
              "  %s%sA/A FAILED (%s): either not deterministic or the save leg is not a prefix of "
              "the through leg, the resume result is inconclusive\n",
              prefix, sep, run->checks[aa_bad].summary);
    } else if (aa_first >= 0 && run->checks[aa_first].status == RC_CHECK_IDENTICAL)
      fprintf(out, "  %s%sA/A identical (%s)%s\n", prefix, sep, run->checks[aa_first].summary,
              aa_total > 1 ? " and at every other A/A check" : "");
    if (res_bad >= 0) {
      /* the earliest trace divergence of this arm */
      const rc_check *t = NULL;
      for (int i = 0; i < run->n_checks; i++) {
        const rc_check *c = &run->checks[i];
        if (strcmp(c->arm, arms[a]) || c->cls != RC_CLASS_RESUME || c->what != RC_CHECK_TRACE ||
            !c->have_trace || c->trace.first_step < 0)
          continue;
        if (!t || c->trace.first_step < t->trace.first_step) t = c;
      }
      if (t)
        fprintf(out, "  %s%sRESUME %s\n", prefix, sep, t->summary);
      else
        fprintf(out, "  %s%sRESUME diverged (%s)\n", prefix, sep, run->checks[res_bad].summary);
      if (run->checks[res_bad].first_dataset[0])
        fprintf(out, "  %s%sfirst differing %s: %s\n", prefix, sep,
                run->checks[res_bad].first_is_dataset ? "dataset" : "file",
                run->checks[res_bad].first_dataset);
      if (run->checks[res_bad].largest_dataset[0])
        fprintf(out, "  %s%slargest difference: %s\n", prefix, sep,
                run->checks[res_bad].largest_dataset);
    } else if (res_last >= 0 && run->checks[res_last].status == RC_CHECK_IDENTICAL) {
      fprintf(out, "  %s%sRESUME identical (%s)%s\n", prefix, sep, run->checks[res_last].summary,
              res_total > 1 ? " and at every other link" : "");
    }
    print_census(run, out, arms[a], prefix, sep, res_bad >= 0);
  }
  print_arms(run, out);
  if (run->mechanism != RC_MECH_NONE) fprintf(out, "  %s\n", run->mechanism_text);
}

void rc_report_text(const rc_run *run, FILE *out) {
  print_config(run, out);
  print_legs(run, out);
  print_startup(run, out);
  print_checks(run, out);
  print_failed_legs(run, out);
  print_findings(run, out);
  char wall[32], p[32], l[32], c[32];
  rc_fmt_seconds(run->wall_s, wall, sizeof wall);
  rc_fmt_seconds(run->prepare_s, p, sizeof p);
  rc_fmt_seconds(run->legs_s, l, sizeof l);
  rc_fmt_seconds(run->checks_s, c, sizeof c);
  fprintf(out, "\ntime: %s: preparing %s, legs %s, checks %s\n", wall, p, l, c);
  fprintf(out, "verdict: %s (exit %d, %s): %s\n", rc_verdict_headline(run), run->exit_code, wall,
          run->verdict_text);
  if (run->census_finding[0]) fprintf(out, "census: %s\n", run->census_finding);
  if (run->verdict_hint[0]) fprintf(out, "hint: %s\n", run->verdict_hint);
  fflush(out);
}
