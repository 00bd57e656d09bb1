/* report_junit.c — JUnit XML for CI systems: one testcase per check (a
 * <failure> with the details when it differs, <skipped> when it could not
 * run, <error> when the comparison itself failed) and one per leg (an
 * <error> with the exit status and log tail when it failed), so that a CI
 * page shows both what differed and what crashed. Every string goes through
 * rc_sb_xml, so the document is well-formed whatever paths and logs hold. */
#include "report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void attr(rc_sb *b, const char *name, const char *value) {
  rc_sb_printf(b, " %s=\"", name);
  rc_sb_xml(b, value);
  rc_sb_puts(b, "\"");
}

static void check_case(rc_sb *b, const rc_run *run, const rc_check *c) {
  rc_sb_puts(b, "    <testcase");
  attr(b, "classname", "resumecheck.run.checks");
  attr(b, "name", c->name);
  rc_sb_puts(b, " time=\"0\">\n");
  /* --noise calibrated: a calibrated check that exceeds the noise fails,
   * one where the noise is too large to decide is a failure CI must see */
  if (c->status == RC_CHECK_EXCEEDS_NOISE || c->status == RC_CHECK_UNDECIDABLE) {
    rc_sb_puts(b, "      <failure");
    attr(b, "type", c->status == RC_CHECK_EXCEEDS_NOISE ? "exceeds-noise" : "noise-inconclusive");
    attr(b, "message", c->summary);
    rc_sb_puts(b, ">");
    rc_sb_xml(b, c->summary);
    rc_sb_puts(b, "\n      </failure>\n");
  }
  if (c->status == RC_CHECK_DIFFERS) {
    /* a through-vs-save difference under the not-a-prefix verdict is not
     * an A/A failure: two through legs agreed */
    bool not_prefix = c->cls == RC_CLASS_AA && !strcmp(run->verdict, "not-a-prefix") &&
                      !strcmp(run->legs[c->leg_b].name, "save");
    const char *type = not_prefix                ? "not-a-prefix"
                       : c->cls == RC_CLASS_AA   ? "aa-failure"
                       : c->cls == RC_CLASS_ARMS ? "arms-difference"
                                                 : "resume-divergence";
    rc_sb_puts(b, "      <failure");
    attr(b, "type", type);
    attr(b, "message", c->summary);
    rc_sb_puts(b, ">");
    rc_sb_xml(b, c->summary);
    rc_sb_puts(b, "\n");
    if (c->first_dataset[0]) {
      rc_sb_xml(b, "first difference: ");
      rc_sb_xml(b, c->first_dataset);
      rc_sb_puts(b, "\n");
    }
    if (c->have_trace && c->trace.first_step >= 0) {
      char line[4096];
      rc_bufprintf(line, sizeof line, "step %" PRId64 ": columns %s; a = %s; b = %s\n",
                   c->trace.first_step, c->trace.columns, c->trace.a_values, c->trace.b_values);
      rc_sb_xml(b, line);
    }
    for (int k = 0, shown = 0; c->have_cmp && k < c->cmp.n_diffs && shown < 20; k++) {
      const rc_diff *d = &c->cmp.diffs[k];
      char line[2048];
      rc_bufprintf(line, sizeof line, "%s %s%s%s %s\n", rc_diff_kind_name(d->kind), d->file,
                   d->object[0] ? ":" : "", d->object, d->detail);
      rc_sb_xml(b, line);
      shown++;
    }
    for (int k = 0, shown = 0; c->have_census && k < c->census.n_diffs && shown < 20; k++) {
      char line[2048];
      rc_census_describe(&c->census.diffs[k], "through", "resumed", line, sizeof line);
      rc_sb_xml(b, line);
      rc_sb_puts(b, "\n");
      shown++;
    }
    rc_sb_puts(b, "</failure>\n");
  } else if (c->status == RC_CHECK_ERROR) {
    rc_sb_puts(b, "      <error");
    attr(b, "type", "compare-error");
    attr(b, "message", c->err.msg);
    rc_sb_puts(b, "/>\n");
  } else if (c->status == RC_CHECK_SKIPPED || c->status == RC_CHECK_PENDING) {
    rc_sb_puts(b, "      <skipped");
    attr(b, "message", c->summary);
    rc_sb_puts(b, "/>\n");
  } else {
    rc_sb_puts(b, "      <system-out>");
    rc_sb_xml(b, c->summary);
    rc_sb_puts(b, "</system-out>\n");
  }
  rc_sb_puts(b, "    </testcase>\n");
}

static void leg_case(rc_sb *b, const rc_leg *l) {
  char name[128], range[48];
  snprintf(name, sizeof name, "leg %s", l->label);
  rc_leg_range(l, range, sizeof range);
  rc_sb_puts(b, "    <testcase");
  attr(b, "classname", "resumecheck.run.legs");
  attr(b, "name", name);
  rc_sb_printf(b, " time=\"%.3f\">\n", l->state == RC_LEG_SKIPPED ? 0.0 : l->wall_s);
  if (l->state == RC_LEG_FAILED) {
    char msg[1200];
    rc_bufprintf(msg, sizeof msg, "leg %s (steps %s) %s", l->label, range, l->reason);
    rc_sb_puts(b, "      <error");
    attr(b, "type", l->timed_out ? "leg-timed-out" : "leg-failed");
    attr(b, "message", msg);
    rc_sb_puts(b, ">");
    rc_sb_xml(b, l->log_tail);
    rc_sb_puts(b, "</error>\n");
  } else if (l->state == RC_LEG_SKIPPED || l->state == RC_LEG_KILLED) {
    rc_sb_puts(b, "      <skipped");
    attr(b, "message", l->reason);
    rc_sb_puts(b, "/>\n");
  }
  rc_sb_puts(b, "    </testcase>\n");
}

int rc_report_junit(const rc_run *run, const char *path, rc_err *err) {
  int tests = run->n_checks + run->n_legs, failures = 0, errors = 0, skipped = 0;
  for (int i = 0; i < run->n_checks; i++) {
    rc_check_status s = run->checks[i].status;
    failures += s == RC_CHECK_DIFFERS || s == RC_CHECK_EXCEEDS_NOISE || s == RC_CHECK_UNDECIDABLE;
    errors += s == RC_CHECK_ERROR;
    skipped += s == RC_CHECK_SKIPPED || s == RC_CHECK_PENDING;
  }
  for (int i = 0; i < run->n_legs; i++) {
    rc_leg_state s = run->legs[i].state;
    errors += s == RC_LEG_FAILED;
    skipped += s == RC_LEG_SKIPPED || s == RC_LEG_KILLED;
  }
  rc_sb b = {0};
  rc_sb_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  rc_sb_printf(&b,
               "<testsuites name=\"resumecheck\" tests=\"%d\" failures=\"%d\" errors=\"%d\" "
               "skipped=\"%d\" time=\"%.3f\">\n",
               tests, failures, errors, skipped, run->wall_s);
  rc_sb_printf(&b,
               "  <testsuite name=\"resumecheck run\" tests=\"%d\" failures=\"%d\" errors=\"%d\" "
               "skipped=\"%d\" time=\"%.3f\">\n",
               tests, failures, errors, skipped, run->wall_s);
  rc_sb_puts(&b, "    <properties>\n");
  char v[64];
  snprintf(v, sizeof v, "%" PRId64, run->opts.steps);
  const char *props[][2] = {
      {"steps", v},
      {"verdict", run->verdict},
      {"verdict_text", run->verdict_text},
      {"verdict_hint", run->verdict_hint},
      {"census_finding", run->census_finding},
      {"trainer", run->opts.trainer == RC_TRAINER_EXEC ? "exec" : "resumecheck"},
      {"out", run->opts.out_dir},
      {"tool_version", RC_VERSION}};
  for (size_t i = 0; i < sizeof props / sizeof props[0]; i++) {
    rc_sb_puts(&b, "      <property");
    attr(&b, "name", props[i][0]);
    attr(&b, "value", props[i][1]);
    rc_sb_puts(&b, "/>\n");
  }
  char code[16];
  snprintf(code, sizeof code, "%d", run->exit_code);
  rc_sb_puts(&b, "      <property name=\"exit_code\"");
  attr(&b, "value", code);
  rc_sb_puts(&b, "/>\n    </properties>\n");
  for (int i = 0; i < run->n_checks; i++) check_case(&b, run, &run->checks[i]);
  for (int i = 0; i < run->n_legs; i++) leg_case(&b, &run->legs[i]);
  rc_sb_puts(&b, "  </testsuite>\n</testsuites>\n");
  int rc = rc_sb_write(&b, path, err);
  free(b.buf);
  return rc;
}

int rc_report_junit_usage(const char *cmd, const char *message, int exit_code, const char *path,
                          rc_err *err) {
  char suite[64], classname[64], code[16];
  snprintf(suite, sizeof suite, "resumecheck %s", cmd);
  snprintf(classname, sizeof classname, "resumecheck.%s", cmd);
  snprintf(code, sizeof code, "%d", exit_code);
  rc_sb b = {0};
  rc_sb_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  rc_sb_puts(&b, "<testsuites name=\"resumecheck\" tests=\"1\" failures=\"1\" errors=\"0\" "
                 "skipped=\"0\" time=\"0\">\n");
  rc_sb_puts(&b, "  <testsuite");
  attr(&b, "name", suite);
  rc_sb_puts(&b, " tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"0\">\n");
  rc_sb_puts(&b, "    <properties>\n      <property name=\"tool_version\"");
  attr(&b, "value", RC_VERSION);
  rc_sb_puts(&b, "/>\n      <property name=\"exit_code\"");
  attr(&b, "value", code);
  rc_sb_puts(&b, "/>\n    </properties>\n    <testcase");
  attr(&b, "classname", classname);
  rc_sb_puts(&b, " name=\"usage\" time=\"0\">\n      <failure type=\"usage-error\"");
  attr(&b, "message", message);
  rc_sb_puts(&b, ">");
  rc_sb_xml(&b, message);
  rc_sb_puts(&b, "\n(nothing ran: the command line was refused)</failure>\n");
  rc_sb_puts(&b, "    </testcase>\n  </testsuite>\n</testsuites>\n");
  int rc = rc_sb_write(&b, path, err);
  free(b.buf);
  return rc;
}
