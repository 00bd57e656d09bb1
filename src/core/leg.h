/* leg.h — one training leg: `resumecheck train` (DESIGN §6). */
#ifndef RC_CORE_LEG_H
#define RC_CORE_LEG_H

#include "base/error.h"
#include "core/config.h"

/* Trains from step 1 (or after --resume-from) to --stop-at / --steps,
 * writing OUT/trace.csv, OUT/timing.csv and checkpoints at --save-at. A
 * failed load writes nothing. argv is recorded in args.json. */
int rc_leg_run(const rc_config *cfg, const rc_leg_opts *leg, int argc, char **argv, rc_err *err);

#endif
