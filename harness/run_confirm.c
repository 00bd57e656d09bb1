/* run_confirm.c — `run --noise calibrated`'s confirming resume legs
 * (docs/design.md §7.2, "reproduced").
 *
 * Why: under 8- and 16-bit weights the run-to-run noise is discrete — a
 * step either rounds the same way in every process or, in some, flips, and
 * a flip then grows. Three fresh legs can all miss a flip that is common
 * (a third of the processes make it, bench/NOTES.md session 31), and then
 * two resume legs that both make it look like a bug. A resume bug is in
 * what every resumed process loads, so it moves every resume leg at K; a
 * flip moves each with its own chance. So when every resume leg at a K
 * exceeds the noise and nothing exact failed, C more resume legs at that K
 * run before the verdict, and "exceeds" needs every one of them too: the
 * chance that noise fools the rule falls with the power of the legs, while
 * a bug costs C short legs (N - K steps each) and a correct run nothing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run.h"

int rc_run_confirm(rc_run *run, int *n_added, rc_err *err) {
  *n_added = 0;
  const rc_run_opts *o = &run->opts;
  /* exceeds-noise is the verdict only when no leg failed, nothing was
   * interrupted and no exact or A/A check differs (rc_run_verdict) */
  if (o->noise != RC_NOISE_CALIBRATED || o->confirm_resumes <= 0 ||
      strcmp(run->verdict, "exceeds-noise"))
    return RC_OK;
  /* the K whose resume legs all exceeded (after rc_calib_reproduce, a
   * check still exceeding means every resume leg at its K does) */
  int64_t *ks = malloc((size_t)run->n_save_at * sizeof *ks);
  if (!ks) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  int nk = 0;
  for (int i = 0; i < run->n_checks; i++) {
    const rc_check *c = &run->checks[i];
    if (c->judged != RC_JUDGED_CALIBRATED || c->status != RC_CHECK_EXCEEDS_NOISE) continue;
    int64_t k = run->legs[c->leg_b].resume_step;
    bool seen = false;
    for (int j = 0; j < nk && !seen; j++) seen = ks[j] == k;
    if (!seen && nk < run->n_save_at) ks[nk++] = k;
  }
  int first = run->n_legs, rc = RC_OK;
  for (int j = 0; j < nk && !rc; j++)
    rc = rc_run_plan_confirm(run, "", ks[j], o->confirm_resumes, err);
  if (!rc && nk) {
    char list[256] = "";
    size_t len = 0;
    for (int j = 0; j < nk && len < sizeof list - 24; j++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%" PRId64, j ? "," : "", ks[j]);
    FILE *out = o->progress_out ? o->progress_out : stderr;
    if (o->progress != RC_PROGRESS_OFF)
      fprintf(out,
              "resumecheck run: confirming: every resume leg at K=%s exceeds the noise, nothing "
              "exact differs: %d more "
              "resume leg(s) at each such K before the verdict (a resume bug moves them all; a "
              "rounding flip moves each with its own chance)\n",
              list, o->confirm_resumes);
  }
  free(ks);
  if (rc || first == run->n_legs) return rc;
  *n_added = run->n_legs - first;
  if ((rc = rc_run_prepare_legs(run, first, err))) return rc;
  if ((rc = rc_run_legs(run, err))) return rc;
  /* the new checks, then every excess counted again over all the resume
   * legs (rc_calib_reproduce) and the verdict made again */
  return rc_run_checks(run, err);
}
