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

static void put(FILE *out, const char *s);

static void pad(FILE *out, const char *s, int w) {
  put(out, s);
  for (int i = width(s); i < w; i++) fputc(' ', out);
}

/* s for a terminal: control characters written as \xHH (rc_text_escape),
 * so text from trainers, files and flags cannot drive it.
 * RC_TEST_TEXT_RAW=1 (a test's control) writes s as it is. */
static void put(FILE *out, const char *s) {
  const char *raw = getenv("RC_TEST_TEXT_RAW");
  if (raw && !strcmp(raw, "1")) {
    fputs(s, out);
    return;
  }
  size_t cap = strlen(s) * 6 + 1;
  char *esc = malloc(cap);
  if (!esc) {
    fputs("(out of memory)", out);
    return;
  }
  rc_text_escape(s, esc, cap);
  fputs(esc, out);
  free(esc);
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
  case RC_CHECK_WITHIN_NOISE:
    return "within noise";
  case RC_CHECK_EXCEEDS_NOISE:
    return "EXCEEDS NOISE";
  case RC_CHECK_UNDECIDABLE:
    return "UNDECIDABLE";
  case RC_CHECK_NOISE_MEASURED:
    return "noise";
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
    for (int i = 0; i < o->n_fwd; i++) {
      fputc(' ', out);
      put(out, o->fwd[i]);
    }
    fprintf(out, "\n");
  }
  for (size_t i = 0; i < RC_N_KERNEL_SWITCHES; i++)
    if (getenv(RC_KERNEL_SWITCHES[i])) {
      fprintf(out, "kernel switch %s=", RC_KERNEL_SWITCHES[i]);
      put(out, getenv(RC_KERNEL_SWITCHES[i]));
      fprintf(out,
              " set: it changes a %s leg's bits (in report.json and every leg's "
              "args.json)\n",
              strcmp(RC_KERNEL_SWITCH_BACKENDS[i], "cpu") ? "CUDA" : "CPU");
    }
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
    if (l->state == RC_LEG_OK) {
      fprintf(out, "ok");
    } else {
      fprintf(out, "%s: ", rc_leg_status_name(l));
      put(out, l->reason);
    }
    if (l->decision) { /* --through-checkpoints on-demand */
      fprintf(out, "; at %" PRId64 " ", l->deferred_step);
      put(out, l->decision_why);
    }
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
    fprintf(out, "\n  leg %s ", l->label);
    put(out, l->reason);
    fprintf(out, " (exit status %d). Last lines of ", l->exit_code);
    put(out, l->log_path);
    fprintf(out, ":\n");
    const char *p = l->log_tail;
    char line[4096];
    while (*p) {
      const char *nl = strchr(p, '\n');
      int n = nl ? (int)(nl - p) : (int)strlen(p);
      rc_bufprintf(line, sizeof line, "%.*s", n, p);
      fprintf(out, "    | ");
      put(out, line);
      fputc('\n', out);
      p += n + (nl != NULL);
    }
    char cmd[8192];
    rc_leg_command(run, l, cmd, sizeof cmd);
    fprintf(out, "  reproduce: ");
    put(out, cmd);
    fputc('\n', out);
  }
}

static void print_check_rows(const rc_run *run, FILE *out, int wn, int judged) {
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (judged >= 0 && (int)c->judged != judged) continue;
    fprintf(out, "  ");
    pad(out, c->name, wn + 2);
    pad(out, check_word(c), 14);
    put(out, c->summary);
    fputc('\n', out);
  }
}

/* --noise calibrated keeps the kinds of check apart: what must agree
 * whatever the noise, what is judged against it, and what measures it. */
static void print_checks(const rc_run *run, FILE *out) {
  int wn = 5;
  for (int i = 0; i < run->n_checks; i++)
    if (width(run->checks[i].name) > wn) wn = width(run->checks[i].name);
  fprintf(out, "\n  ");
  pad(out, "check", wn + 2);
  fprintf(out, "result        detail\n");
  if (run->opts.noise != RC_NOISE_CALIBRATED) {
    print_check_rows(run, out, wn, -1);
    return;
  }
  static const struct {
    rc_check_judged judged;
    const char *title;
  } groups[] = {
      {RC_JUDGED_EXACT, "exact checks (they hold whatever the noise; one that differs fails the "
                        "run at once)"},
      {RC_JUDGED_CALIBRATED,
       "calibrated checks (against the run-to-run noise the A/A pairs measure, per step and "
       "column, per tensor)"},
      {RC_JUDGED_NOISE, "A/A pairs (they measure the noise; their exact columns and non-float "
                        "state must agree)"}};
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
    fprintf(out, "  %s:\n", groups[g].title);
    print_check_rows(run, out, wn, (int)groups[g].judged);
  }
}

/* What the processes held at the resume point, when it says something: a
 * saved field that differs, or local ones beside a divergence. */
static void print_census(const rc_run *run, FILE *out, const char *arm, const char *prefix,
                         const char *sep, bool diverged) {
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (strcmp(c->arm, arm) || c->what != RC_CHECK_CENSUS || !c->have_census) continue;
    const rc_census_diff *d = &c->census;
    if (!d->n_saved_differ && !d->first_saved_differ &&
        (!diverged || (!d->n_local_differ && !d->first_local_differ)))
      continue;
    fprintf(out, "  %s%sstate census (%s): ", prefix, sep, c->name);
    put(out, c->summary);
    fputc('\n', out);
    rc_census_print(d, out, "    ", 8);
  }
}

/* A differing state check's headline difference, and on the next line why
 * it is first when something other than path order put it there. */
static void print_first(FILE *out, const char *prefix, const char *sep, const rc_check *c) {
  if (!c->first_dataset[0]) return;
  fprintf(out, "  %s%sfirst differing %s: ", prefix, sep, c->first_is_dataset ? "dataset" : "file");
  put(out, c->first_dataset);
  fputc('\n', out);
  if (c->first_why[0] && strcmp(c->first_why, "path order")) {
    fprintf(out, "  %s%sranked first by ", prefix, sep);
    put(out, c->first_why);
    fputc('\n', out);
  }
}

/* "A/A failed: not deterministic (through@6 vs aa@6 differ in 3 datasets:
 * /a, /b, /c)": the datasets an A/A state check found differing. */
static void print_aa_names(const rc_run *run, FILE *out, const char *prefix, const char *sep,
                           const rc_check *c, const char *why) {
  if (c->what != RC_CHECK_STATE || !c->have_cmp) return;
  char names[1400];
  rc_run_differing_names(run, c, 3, names, sizeof names);
  if (!names[0]) return;
  fprintf(out, "  %s%sA/A failed: %s (%s@%" PRId64 " vs %s@%" PRId64 " differ in ", prefix, sep,
          why, run->legs[c->leg_a].label, c->step, run->legs[c->leg_b].label, c->step);
  put(out, names);
  fprintf(out, ")\n");
}

/* --confirm-arm: fused against unfused without a resume. */
static void print_arms(const rc_run *run, FILE *out) {
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->cls != RC_CLASS_ARMS || c->what != RC_CHECK_STATE) continue;
    if (c->status == RC_CHECK_DIFFERS) {
      fprintf(out, "  %s differs (", c->name);
      put(out, c->summary);
      fprintf(out, "): fused and unfused accumulation disagree even without a resume\n");
      print_first(out, "", "", c);
    } else if (c->status == RC_CHECK_IDENTICAL) {
      fprintf(out, "  %s identical (", c->name);
      put(out, c->summary);
      fprintf(out, ")\n");
    }
  }
}

/* --noise calibrated: what the A/A pairs measured, and each calibrated
 * check that is not identical (the exact ones that fail are the seed's
 * RESUME lines, print_findings). */
static void print_calibrated(const rc_run *run, FILE *out) {
  int pairs = 0, measured = 0, fresh = 0;
  const rc_check *bad = NULL;
  for (int i = 0; i < run->n_legs; i++)
    fresh += run->legs[i].resume_step == 0 &&
             (!strcmp(run->legs[i].name, "through") || !strncmp(run->legs[i].name, "aa", 2));
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->judged != RC_JUDGED_NOISE) continue;
    pairs += c->what == RC_CHECK_STATE;
    measured += c->status == RC_CHECK_NOISE_MEASURED;
    if (c->status == RC_CHECK_DIFFERS && !bad) bad = c;
  }
  if (bad) {
    fprintf(out, "  A/A FAILED (%s: ", bad->name);
    put(out, bad->summary);
    fprintf(out, "): two fresh runs differ where no run-to-run noise may, the resume result is "
                 "inconclusive\n");
  } else if (measured) {
    fprintf(out,
            "  A/A: %d fresh runs (%d pairs) differ only where run-to-run noise may: their exact "
            "columns and non-float state agree\n",
            fresh, pairs);
  } else {
    fprintf(out, "  A/A identical (%d fresh runs, %d pairs): no run-to-run noise seen\n", fresh,
            pairs);
  }
  static const char *const words[] = {[RC_CHECK_WITHIN_NOISE] = "within run-to-run noise",
                                      [RC_CHECK_EXCEEDS_NOISE] = "EXCEEDS RUN-TO-RUN NOISE",
                                      [RC_CHECK_UNDECIDABLE] = "UNDECIDABLE"};
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->judged != RC_JUDGED_CALIBRATED) continue;
    if (c->status != RC_CHECK_WITHIN_NOISE && c->status != RC_CHECK_EXCEEDS_NOISE &&
        c->status != RC_CHECK_UNDECIDABLE)
      continue;
    fprintf(out, "  %s %s (", c->name, words[c->status]);
    put(out, c->summary);
    fprintf(out, ")\n");
  }
}

/* The findings, one per line, as the seed words them. */
static void print_findings(const rc_run *run, FILE *out) {
  fprintf(out, "\n");
  if (run->opts.noise == RC_NOISE_CALIBRATED) print_calibrated(run, out);
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
        if (strncmp(run->legs[c->leg_b].name, "aa", 2)) continue; /* aa, aa2, ... */
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
    bool calibrated = run->opts.noise == RC_NOISE_CALIBRATED; /* print_calibrated says it */
    if (calibrated) {
      /* the A/A pairs: print_calibrated */
    } else if (aa_bad >= 0 && through_bad >= 0) {
      fprintf(out, "  %s%sA/A FAILED (", prefix, sep);
      put(out, run->checks[through_bad].summary);
      fprintf(out, "): not deterministic, the resume result is inconclusive\n");
      print_aa_names(run, out, prefix, sep, &run->checks[through_bad], "not deterministic");
    } else if (aa_bad >= 0 && through_ok >= 0 && !strcmp(run->verdict, "not-a-prefix")) {
      fprintf(out, "  %s%sA/A identical (", prefix, sep);
      put(out, run->checks[through_ok].summary);
      fprintf(out, ")\n  %s%sSAVE LEG NOT A PREFIX (", prefix, sep);
      put(out, run->checks[aa_bad].summary);
      fprintf(out, "): two through legs agree, the save leg differs, the resume result is "
                   "inconclusive\n");
    } else if (aa_bad >= 0) {
      fprintf(out, "  %s%sA/A FAILED (", prefix, sep);
      put(out, run->checks[aa_bad].summary);
      fprintf(out, "): either not deterministic or the save leg is not a prefix of the through "
                   "leg, the resume result is inconclusive\n");
      print_aa_names(run, out, prefix, sep, &run->checks[aa_bad],
                     "not deterministic, or the save leg is not a prefix");
    } else if (aa_first >= 0 && run->checks[aa_first].status == RC_CHECK_IDENTICAL) {
      fprintf(out, "  %s%sA/A identical (", prefix, sep);
      put(out, run->checks[aa_first].summary);
      fprintf(out, ")%s\n", aa_total > 1 ? " and at every other A/A check" : "");
    }
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
      if (t) {
        fprintf(out, "  %s%sRESUME ", prefix, sep);
        put(out, t->summary);
        fputc('\n', out);
      } else {
        fprintf(out, "  %s%sRESUME diverged (", prefix, sep);
        put(out, run->checks[res_bad].summary);
        fprintf(out, ")\n");
      }
      print_first(out, prefix, sep, &run->checks[res_bad]);
      if (run->checks[res_bad].largest_dataset[0]) {
        fprintf(out, "  %s%slargest difference: ", prefix, sep);
        put(out, run->checks[res_bad].largest_dataset);
        fputc('\n', out);
      }
    } else if (res_last >= 0 && run->checks[res_last].status == RC_CHECK_IDENTICAL && !calibrated) {
      fprintf(out, "  %s%sRESUME identical (", prefix, sep);
      put(out, run->checks[res_last].summary);
      fprintf(out, ")%s\n", res_total > 1 ? " and at every other link" : "");
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
  fprintf(out, "verdict: %s (exit %d, %s): ", rc_verdict_headline(run), run->exit_code, wall);
  put(out, run->verdict_text);
  fputc('\n', out);
  const char *lines[3][2] = {{"census: ", run->census_finding},
                             {"census: ", run->census_silent},
                             {"hint: ", run->verdict_hint}};
  for (int i = 0; i < 3; i++)
    if (lines[i][1][0]) {
      fputs(lines[i][0], out);
      put(out, lines[i][1]);
      fputc('\n', out);
    }
  fflush(out);
}
