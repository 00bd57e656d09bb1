/* report_md.c — a Markdown summary for CI step summaries and pull-request
 * comments, shaped like the seed's "Verification" table: the verdict as a
 * heading, one row per check, the findings in the seed's words, and the
 * legs folded away below.
 *
 * Text from outside (paths, file and tensor names, flag values, logs) is
 * written so that GitHub Flavored Markdown (the GFM spec, CommonMark 0.29
 * plus its table extension) shows it as it is:
 *  - plain text: ASCII punctuation that could start markup is
 *    backslash-escaped (CommonMark 2.4: any ASCII punctuation may be), and
 *    so is a leading '#', '+', '-', '=' or "1." that would make a heading
 *    or a list; line breaks become spaces (a row or list item is one line);
 *  - code spans: backslashes are literal inside them (CommonMark 6.1), so
 *    nothing is escaped; a backtick in the text gets a fence one longer
 *    than its longest run of backticks, padded with a space when the text
 *    starts or ends with a backtick or a space;
 *  - code spans in table cells: the table parser splits a row into cells
 *    before inlines are parsed, and it takes "\|" as a pipe that is not a
 *    cell boundary, inside code spans too, dropping the backslash (GFM
 *    spec, tables, example 200: `\|` in a cell renders <code>|</code>). So
 *    every '|' is written "\|" there and nothing else changes; a backslash
 *    of the text right before a '|' stays, "\\|", which cmark-gfm (GitHub's
 *    renderer) shows as "\|";
 *  - fenced blocks (leg logs): the fence is longer than any run of
 *    backticks in the log, so no line of it can close the block (a closing
 *    fence may be indented up to three spaces). */
#include "report.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* s made valid UTF-8 with control characters replaced (malloc'd; NULL and
 * b->oom set when out of memory). */
static char *clean_copy(rc_sb *b, const char *s) {
  size_t cap = strlen(s) * 3 + 1;
  char *clean = malloc(cap);
  if (!clean) {
    b->oom = 1;
    return NULL;
  }
  rc_utf8_sanitize(s, clean, cap);
  return clean;
}

/* Plain text, in a table cell or not. */
static void md_text(rc_sb *b, const char *s) {
  char *clean = clean_copy(b, s);
  if (!clean) return;
  const char *p = clean;
  /* what would start a block at the beginning of a line or list item */
  if (*p == '#' || *p == '+' || *p == '-' || *p == '=') {
    rc_sb_printf(b, "\\%c", *p);
    p++;
  } else {
    const char *d = p;
    while (*d >= '0' && *d <= '9') d++;
    if (d > p && (*d == '.' || *d == ')')) {
      rc_sb_printf(b, "%.*s\\%c", (int)(d - p), p, *d);
      p = d + 1;
    }
  }
  for (; *p; p++) {
    if (*p == '\n' || *p == '\r')
      rc_sb_puts(b, " ");
    else if (strchr("\\`*_[]<>|~&$!", *p))
      rc_sb_printf(b, "\\%c", *p);
    else
      rc_sb_printf(b, "%c", *p);
  }
  free(clean);
}

/* One code span of s[0..n), which holds no line break. */
static void code_span(rc_sb *b, const char *s, size_t n, bool in_table) {
  if (n == 0) return;
  size_t run = 0, longest = 0;
  for (size_t i = 0; i < n; i++) {
    run = s[i] == '`' ? run + 1 : 0;
    if (run > longest) longest = run;
  }
  char fence[64];
  size_t k = longest + 1 < sizeof fence ? longest + 1 : sizeof fence - 1;
  memset(fence, '`', k);
  fence[k] = 0;
  if (longest + 1 > k) { /* more backticks in a row than any fence: plain text */
    char *t = malloc(n + 1);
    if (!t) {
      b->oom = 1;
      return;
    }
    memcpy(t, s, n);
    t[n] = 0;
    md_text(b, t);
    free(t);
    return;
  }
  bool all_spaces = strspn(s, " ") >= n;
  bool pad = s[0] == '`' || s[n - 1] == '`' || (s[0] == ' ' && s[n - 1] == ' ' && !all_spaces);
  rc_sb_puts(b, fence);
  if (pad) rc_sb_puts(b, " ");
  for (size_t i = 0; i < n; i++) {
    if (in_table && s[i] == '|')
      rc_sb_puts(b, "\\|");
    else
      rc_sb_printf(b, "%c", s[i]);
  }
  if (pad) rc_sb_puts(b, " ");
  rc_sb_puts(b, fence);
}

/* s as inline code: in_table when it goes into a table cell. */
static void md_code(rc_sb *b, const char *s, bool in_table) {
  char *clean = clean_copy(b, s);
  if (!clean) return;
  for (char *p = clean; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' '; /* a line break would end the row or item */
  code_span(b, clean, strlen(clean), in_table);
  free(clean);
}

static const char *result_word(const rc_check *c) {
  switch (c->status) {
  case RC_CHECK_IDENTICAL:
    return "identical";
  case RC_CHECK_DIFFERS:
    return "**differs**";
  case RC_CHECK_SKIPPED:
    return "skipped";
  case RC_CHECK_ERROR:
    return "**error**";
  case RC_CHECK_WITHIN_NOISE:
    return "within noise";
  case RC_CHECK_EXCEEDS_NOISE:
    return "**exceeds noise**";
  case RC_CHECK_UNDECIDABLE:
    return "**undecidable**";
  case RC_CHECK_NOISE_MEASURED:
    return "noise";
  default:
    return "pending";
  }
}

/* A leg's log as a fenced block, every line indented by two spaces as
 * before; the fence outgrows any run of backticks in the log. */
static void md_log(rc_sb *b, const char *log) {
  char *clean = clean_copy(b, log);
  if (!clean) return;
  size_t run = 0, longest = 0;
  for (const char *p = clean; *p; p++) {
    run = *p == '`' ? run + 1 : 0;
    if (run > longest) longest = run;
  }
  size_t n_fence = longest >= 3 ? longest + 1 : 3;
  for (size_t i = 0; i < n_fence; i++) rc_sb_puts(b, "`");
  rc_sb_puts(b, "\n");
  const char *p = clean;
  while (*p) {
    const char *nl = strchr(p, '\n');
    int n = nl ? (int)(nl - p) : (int)strlen(p);
    rc_sb_printf(b, "  %.*s\n", n, p);
    p += n + (nl != NULL);
  }
  for (size_t i = 0; i < n_fence; i++) rc_sb_puts(b, "`");
  rc_sb_puts(b, "\n");
  free(clean);
}

/* The headline, what was run, and the flags. */
static void md_header(rc_sb *b, const rc_run *run) {
  const rc_run_opts *o = &run->opts;
  rc_sb_printf(b, "## resumecheck: %s (exit %d)\n\n", rc_verdict_headline(run), run->exit_code);
  rc_sb_printf(b, "Train-through to step %" PRId64 ", save at ", o->steps);
  if (o->save_every)
    rc_sb_puts(b, "every step");
  else if (o->save_auto) {
    rc_sb_puts(b, "the points `--save-at auto` chose, ");
    md_text(b, o->save_at_why);
  } else
    for (int i = 0; i < run->n_save_at; i++)
      rc_sb_printf(b, "%s%" PRId64, i ? ", " : "", run->save_at[i]);
  rc_sb_puts(b, run->opts.noise == RC_NOISE_CALIBRATED
                    ? ", resume in a fresh process; exact checks byte for byte, trajectories and "
                      "float state against the run-to-run noise of the A/A pairs"
                    : ", resume in a fresh process; checkpoint state compared byte for byte");
  if (o->confirm_arm) rc_sb_puts(b, ", with gradient-accumulation fusion on and off");
  rc_sb_puts(b, ".\n\n");
  if (o->trainer == RC_TRAINER_SELF && o->n_fwd) {
    rc_sb flags = {0};
    for (int i = 0; i < o->n_fwd; i++) {
      rc_sb_puts(&flags, i ? " " : "");
      rc_sb_puts(&flags, o->fwd[i]);
    }
    if (flags.oom) b->oom = 1;
    rc_sb_puts(b, "Flags: ");
    md_code(b, flags.buf ? flags.buf : "", false);
    rc_sb_puts(b, "\n\n");
    free(flags.buf);
  }
}

/* One table row per check. */
static void md_checks(rc_sb *b, const rc_run *run) {
  rc_sb_puts(b, "| check | result | detail |\n|---|---|---|\n");
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    rc_sb_puts(b, "| ");
    md_text(b, c->name);
    /* --noise calibrated: the kind of check beside its name */
    if (run->opts.noise == RC_NOISE_CALIBRATED)
      rc_sb_printf(b, " (%s)", rc_check_judged_name(c->judged));
    rc_sb_printf(b, " | %s | ", result_word(c));
    md_text(b, c->summary);
    if (c->status == RC_CHECK_DIFFERS && c->first_dataset[0]) {
      rc_sb_printf(b, "; first differing %s ", c->first_is_dataset ? "dataset" : "file");
      md_code(b, c->first_dataset, true);
      if (c->first_why[0] && strcmp(c->first_why, "path order")) {
        rc_sb_puts(b, " (ranked by ");
        md_text(b, c->first_why);
        rc_sb_puts(b, ")");
      }
    }
    rc_sb_puts(b, " |\n");
  }
}

/* The verdict, its hint and what was found, then the logs of failed legs. */
static void md_findings(rc_sb *b, const rc_run *run) {
  rc_sb_puts(b, "\n");
  rc_sb_puts(b, "- ");
  md_text(b, run->verdict_text);
  rc_sb_puts(b, "\n");
  if (run->verdict_hint[0]) {
    rc_sb_puts(b, "- hint: ");
    md_text(b, run->verdict_hint);
    rc_sb_puts(b, "\n");
  }
  if (run->census_finding[0]) {
    rc_sb_puts(b, "- ");
    md_text(b, run->census_finding);
    rc_sb_puts(b, "\n");
  }
  if (run->census_silent[0]) {
    rc_sb_puts(b, "- ");
    md_text(b, run->census_silent);
    rc_sb_puts(b, "\n");
  }
  if (run->first_div_dataset[0]) {
    rc_sb_printf(b, "- first differing %s: ", run->first_div_is_dataset ? "dataset" : "file");
    md_code(b, run->first_div_dataset, false);
    if (run->first_div_why[0] && strcmp(run->first_div_why, "path order")) {
      rc_sb_puts(b, " (ranked by ");
      md_text(b, run->first_div_why);
      rc_sb_puts(b, ")");
    }
    rc_sb_puts(b, "\n");
  }
  if (run->first_div_largest[0]) {
    rc_sb_puts(b, "- largest difference: ");
    md_code(b, run->first_div_largest, false);
    rc_sb_puts(b, "\n");
  }
  if (run->mechanism != RC_MECH_NONE) {
    rc_sb_puts(b, "- ");
    md_text(b, run->mechanism_text);
    rc_sb_puts(b, "\n");
  }
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    if (l->state != RC_LEG_FAILED) continue;
    rc_sb_puts(b, "\n**leg ");
    md_text(b, l->label);
    rc_sb_puts(b, "** ");
    md_text(b, l->reason);
    rc_sb_puts(b, ":\n\n");
    md_log(b, l->log_tail);
  }
}

/* The legs, folded. */
static void md_legs(rc_sb *b, const rc_run *run) {
  rc_sb_puts(
      b,
      "\n<details><summary>legs</summary>\n\n| leg | steps | wall | status |\n|---|---|---|---|\n");
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    char range[48], wall[32] = "-";
    rc_leg_range(l, range, sizeof range);
    if (l->state != RC_LEG_SKIPPED && l->state != RC_LEG_PENDING)
      rc_fmt_seconds(l->wall_s, wall, sizeof wall);
    rc_sb_puts(b, "| ");
    md_text(b, l->label);
    rc_sb_printf(b, " | %s | %s | %s", range, wall, rc_leg_status_name(l));
    if (l->state != RC_LEG_OK && l->reason[0]) {
      rc_sb_puts(b, ": ");
      md_text(b, l->reason);
    }
    rc_sb_puts(b, " |\n");
  }
  rc_sb_puts(b, "\n</details>\n");
}

void rc_report_markdown_render(const rc_run *run, rc_sb *b) {
  md_header(b, run);
  md_checks(b, run);
  md_findings(b, run);
  md_legs(b, run);
}

int rc_report_markdown(const rc_run *run, const char *path, rc_err *err) {
  rc_sb b = {0};
  rc_report_markdown_render(run, &b);
  int rc = rc_sb_write(&b, path, err);
  free(b.buf);
  return rc;
}
