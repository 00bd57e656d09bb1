/* report_md.c — a Markdown summary for CI step summaries and pull-request
 * comments, shaped like the seed's "Verification" table: the verdict as a
 * heading, one row per check, the findings in the seed's words, and the
 * legs folded away below. Table cells escape '|' and line breaks. */
#include "report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Text for a table cell: '|' escaped, newlines as spaces, valid UTF-8. */
static void cell(rc_sb *b, const char *s) {
  size_t cap = strlen(s) * 3 + 1;
  char *clean = malloc(cap);
  if (!clean) {
    b->oom = 1;
    return;
  }
  rc_utf8_sanitize(s, clean, cap);
  for (const char *p = clean; *p; p++) {
    if (*p == '|')
      rc_sb_puts(b, "\\|");
    else if (*p == '\n')
      rc_sb_puts(b, " ");
    else
      rc_sb_printf(b, "%c", *p);
  }
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
  default:
    return "pending";
  }
}

int rc_report_markdown(const rc_run *run, const char *path, rc_err *err) {
  rc_sb b = {0};
  const rc_run_opts *o = &run->opts;
  rc_sb_printf(&b, "## resumecheck: %s (exit %d)\n\n", rc_verdict_headline(run), run->exit_code);
  rc_sb_printf(&b, "Train-through to step %" PRId64 ", save at ", o->steps);
  if (o->save_every)
    rc_sb_puts(&b, "every step");
  else if (o->save_auto)
    rc_sb_printf(&b, "the points `--save-at auto` chose, %s", o->save_at_why);
  else
    for (int i = 0; i < run->n_save_at; i++)
      rc_sb_printf(&b, "%s%" PRId64, i ? ", " : "", run->save_at[i]);
  rc_sb_puts(&b, ", resume in a fresh process; checkpoint state compared byte for byte");
  if (o->confirm_arm) rc_sb_puts(&b, ", with gradient-accumulation fusion on and off");
  rc_sb_puts(&b, ".\n\n");
  if (o->trainer == RC_TRAINER_SELF && o->n_fwd) {
    rc_sb_puts(&b, "Flags: `");
    for (int i = 0; i < o->n_fwd; i++) {
      rc_sb_puts(&b, i ? " " : "");
      cell(&b, o->fwd[i]);
    }
    rc_sb_puts(&b, "`\n\n");
  }

  rc_sb_puts(&b, "| check | result | detail |\n|---|---|---|\n");
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    rc_sb_puts(&b, "| ");
    cell(&b, c->name);
    rc_sb_printf(&b, " | %s | ", result_word(c));
    cell(&b, c->summary);
    rc_sb_puts(&b, " |\n");
  }

  rc_sb_puts(&b, "\n");
  rc_sb_puts(&b, "- ");
  cell(&b, run->verdict_text);
  rc_sb_puts(&b, "\n");
  if (run->verdict_hint[0]) {
    rc_sb_puts(&b, "- hint: ");
    cell(&b, run->verdict_hint);
    rc_sb_puts(&b, "\n");
  }
  if (run->census_finding[0]) {
    rc_sb_puts(&b, "- ");
    cell(&b, run->census_finding);
    rc_sb_puts(&b, "\n");
  }
  if (run->first_div_dataset[0]) {
    rc_sb_printf(&b, "- first differing %s: `", run->first_div_is_dataset ? "dataset" : "file");
    cell(&b, run->first_div_dataset);
    rc_sb_puts(&b, "`\n");
  }
  if (run->first_div_largest[0]) {
    rc_sb_puts(&b, "- largest difference: `");
    cell(&b, run->first_div_largest);
    rc_sb_puts(&b, "`\n");
  }
  if (run->mechanism != RC_MECH_NONE) {
    rc_sb_puts(&b, "- ");
    cell(&b, run->mechanism_text);
    rc_sb_puts(&b, "\n");
  }
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    if (l->state != RC_LEG_FAILED) continue;
    rc_sb_puts(&b, "\n**leg ");
    cell(&b, l->label);
    rc_sb_puts(&b, "** ");
    cell(&b, l->reason);
    rc_sb_puts(&b, ":\n\n```\n");
    /* a fence inside the log cannot close ours: indent every line */
    size_t cap = strlen(l->log_tail) * 3 + 1;
    char *clean = malloc(cap);
    if (clean) {
      rc_utf8_sanitize(l->log_tail, clean, cap);
      const char *p = clean;
      while (*p) {
        const char *nl = strchr(p, '\n');
        int n = nl ? (int)(nl - p) : (int)strlen(p);
        rc_sb_printf(&b, "  %.*s\n", n, p);
        p += n + (nl != NULL);
      }
      free(clean);
    }
    rc_sb_puts(&b, "```\n");
  }

  rc_sb_puts(
      &b,
      "\n<details><summary>legs</summary>\n\n| leg | steps | wall | status |\n|---|---|---|---|\n");
  for (int i = 0; i < run->n_legs; i++) {
    const rc_leg *l = &run->legs[i];
    char range[48], wall[32] = "-";
    rc_leg_range(l, range, sizeof range);
    if (l->state != RC_LEG_SKIPPED && l->state != RC_LEG_PENDING)
      rc_fmt_seconds(l->wall_s, wall, sizeof wall);
    rc_sb_puts(&b, "| ");
    cell(&b, l->label);
    rc_sb_printf(&b, " | %s | %s | %s", range, wall, rc_leg_status_name(l));
    if (l->state != RC_LEG_OK && l->reason[0]) {
      rc_sb_puts(&b, ": ");
      cell(&b, l->reason);
    }
    rc_sb_puts(&b, " |\n");
  }
  rc_sb_puts(&b, "\n</details>\n");
  int rc = rc_sb_write(&b, path, err);
  free(b.buf);
  return rc;
}
