/* report.h — what `resumecheck run` tells people and CI systems: a text
 * table on stdout, report.json (schema in docs/report-schema.md), JUnit XML,
 * a Markdown summary and an SVG plot of the traces. Every writer only reads
 * a finished rc_run; files are written atomically. */
#ifndef RC_HARNESS_REPORT_H
#define RC_HARNESS_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "base/error.h"
#include "base/text.h" /* rc_text_escape, rc_utf8_len: what the reports print */
#include "harness/run.h"
#include "harness/schema.h" /* RC_RUN_REPORT_SCHEMA and its version */

#ifndef RC_VERSION
#define RC_VERSION "0.1.0"
#endif

/* The table for people: legs, checks, verdict, first divergence. */
void rc_report_text(const rc_run *run, FILE *out);

/* report.json; rc_report_json_string returns the document (malloc'd).
 * rc_report_json writes it to the run directory (opts.out_dir/report.json)
 * always, and to path as well when path names another file (--json FILE);
 * path NULL: the directory's only. Both atomically (rc_write_output). */
char *rc_report_json_string(const rc_run *run);
int rc_report_json(const rc_run *run, const char *path, rc_err *err);

/* JUnit XML: one testcase per check and per leg. */
int rc_report_junit(const rc_run *run, const char *path, rc_err *err);
/* JUnit XML for a command line refused before anything ran: one failed
 * testcase "usage" of suite "resumecheck CMD" whose message is the
 * refusal, so a CI page shows why the gate did not run. */
int rc_report_junit_usage(const char *cmd, const char *message, int exit_code, const char *path,
                          rc_err *err);

/* A Markdown summary (CI step summaries, PR comments). */
int rc_report_markdown(const rc_run *run, const char *path, rc_err *err);
/* The same summary appended to GitHub's $GITHUB_STEP_SUMMARY file `path`
 * (report_step_summary.c): only a regular file, or a new one in an
 * existing directory, is written; anything else is refused untouched. */
int rc_report_step_summary(const rc_run *run, const char *path, rc_err *err);

/* Grad norm and loss against step, one series per leg, K and the first
 * divergence marked. */
int rc_plot_svg(const rc_run *run, const char *path, rc_err *err);

/* ---- shared helpers (report_util.c) ---- */

/* A growing string; every append is checked, ownership of buf passes to
 * whoever takes it. */
typedef struct {
  char *buf;
  size_t len, cap;
  int oom;
} rc_sb;

void rc_sb_printf(rc_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rc_sb_puts(rc_sb *b, const char *s);
/* XML text/attribute escaping, valid UTF-8 and XML 1.0 characters only. */
void rc_sb_xml(rc_sb *b, const char *s);
/* Writes the buffer to path atomically; frees nothing. */
int rc_sb_write(const rc_sb *b, const char *path, rc_err *err);
/* rc_report_markdown's summary appended to b (b->oom on failure), for
 * writers that do not replace a file: the job summary
 * (report_step_summary.c). */
void rc_report_markdown_render(const rc_run *run, rc_sb *b);

/* Copies in to out (cap bytes, NUL-terminated), replacing invalid UTF-8 and
 * control characters other than \n and \t with U+FFFD / '?'. */
void rc_utf8_sanitize(const char *in, char *out, size_t cap);

/* --noise calibrated in report.json (report_calib.c): config's noise,
 * aa_count and training_steps; the top-level "calibration" (null in bytes
 * mode); a check's "judged" and "calibration" (null when it has none). */
void rc_report_calib_config(rc_jw *w, const rc_run *run);
void rc_report_calib_run(rc_jw *w, const rc_run *run);
void rc_report_calib_check(rc_jw *w, const rc_check *c);
/* "bytes", "exact", "calibrated" or "noise". */
const char *rc_check_judged_name(rc_check_judged j);

/* The verdict's headline, e.g. "RESUME DIVERGED". */
const char *rc_verdict_headline(const rc_run *run);
/* "1/1 shards byte-identical" style tally of a state check. */
void rc_check_tally(const rc_check *c, char *buf, size_t cap);
/* Seconds as "1.23 s" / "2 min 3 s". */
void rc_fmt_seconds(double s, char *buf, size_t cap);

#endif
