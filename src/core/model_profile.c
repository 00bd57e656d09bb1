/* model_profile.c — RC_PROFILE: where a step's time goes, by phase
 * (docs/cuda-backend.md). A mark syncs the backend, so profiling changes
 * when work finishes, never what it computes. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/model_internal.h"

double rc_model_wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void rc_model_profile_note(const char *what, double seconds) {
  const char *v = getenv("RC_PROFILE");
  if (v && *v) fprintf(stderr, "profile: %s %.3f s\n", what, seconds);
}

void rc_model_profile_mark(rc_model *m, rc_profile_phase phase) {
  if (!m->profile) return;
  m->ops->sync();
  double now = rc_model_wall_s();
  if (m->profile_mark > 0) m->profile_s[phase] += now - m->profile_mark;
  m->profile_mark = now;
}

const char *rc_model_profile_phase_name(rc_profile_phase phase) {
  static const char *names[RC_PROFILE_PHASES] = {[RC_PROF_DATA] = "data and upload",
                                                 [RC_PROF_FWD_DECODER] = "forward decoder",
                                                 [RC_PROF_FWD_MTP] = "forward MTP layers",
                                                 [RC_PROF_FWD_HEADS] = "forward heads + CE",
                                                 [RC_PROF_BWD_HEADS] = "backward heads",
                                                 [RC_PROF_BWD_MTP] = "backward MTP",
                                                 [RC_PROF_BWD_DECODER] = "backward decoder",
                                                 [RC_PROF_OPTIMIZER] =
                                                     "grad norm, optimizer, fingerprints"};
  return (int)phase >= 0 && phase < RC_PROFILE_PHASES ? names[phase] : "?";
}
