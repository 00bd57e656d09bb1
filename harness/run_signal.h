/* run_signal.h — which signal interrupted `run` (run_spawn.c keeps it), so
 * that the exit status can follow the shell convention 128 + signal: 130
 * after SIGINT, 143 after SIGTERM. */
#ifndef RC_HARNESS_RUN_SIGNAL_H
#define RC_HARNESS_RUN_SIGNAL_H

/* SIGINT or SIGTERM once one has arrived (the first one counts), else 0. */
int rc_run_interrupt_signal(void);

/* DIR/.lock, held (flock) from rc_run_prepare (or, with --save-at auto's
 * fp16 probe, from before the probe) to the end of the process so that two
 * runs never share an output directory. */
#define RC_RUN_LOCK_NAME ".lock"

#include "base/error.h"

/* Creates DIR (mkdir -p) and takes DIR/.lock for this process's run, kept
 * until it exits; taking it again for the same DIR keeps it (run_prepare.c). */
int rc_run_lock_out(const char *out_dir, rc_err *err);

/* --save-at auto's fp16 probe trains in DIR/.auto-probe.XXXXXX (run_auto.c);
 * one left by a SIGKILLed run is removed by the next run into DIR. */
#define RC_RUN_PROBE_PREFIX ".auto-probe."

#endif
