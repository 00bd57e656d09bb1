/* run_signal.h — which signal interrupted `run` (run_spawn.c keeps it), so
 * that the exit status can follow the shell convention 128 + signal: 130
 * after SIGINT, 143 after SIGTERM. */
#ifndef RC_HARNESS_RUN_SIGNAL_H
#define RC_HARNESS_RUN_SIGNAL_H

/* SIGINT or SIGTERM once one has arrived (the first one counts), else 0. */
int rc_run_interrupt_signal(void);

/* DIR/.lock, held (flock) from rc_run_prepare to the end of the process so
 * that two runs never share an output directory. */
#define RC_RUN_LOCK_NAME ".lock"

#endif
