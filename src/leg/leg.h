/* leg.h — one training leg: `resumecheck train` (docs/design.md §6), the
 * process around the core: locks, waiting, ranks, trace, args.json. */
#ifndef RC_LEG_LEG_H
#define RC_LEG_LEG_H

#include <stdbool.h>
#include <stdio.h>

#include "base/error.h"
#include "base/steplock.h"

#include "core/config.h"

/* How this process was started and what it waits for: facts of the
 * process, not of the config, never in the trace or the shards. */
typedef struct {
  /* --wait-for-checkpoint: set up the backend and the model first, then wait
   * until --resume-from DIR has its COMPLETE marker, then load */
  bool wait_for_checkpoint;
  /* --handoff: each save publishes its checkpoint for a waiting leg before
   * it is durable (io/handoff.c) */
  bool handoff;
  /* RC_WAIT_FD: the read end of a pipe whose write end `run` holds; EOF
   * means "stop waiting" (the producer ended, or `run` itself ended). -1
   * when absent: the wait then ends only with the marker or the parent. */
  int wait_fd;
  /* RC_DECIDE_FD: the read end of a pipe on which `run` says, for a save of
   * --save-deferred-at, 'F' (write the shard) or 'H' (hashes only); -1 when
   * absent: such saves are then full */
  int decide_fd;
  /* CLOCK_MONOTONIC seconds: when `run` spawned this process (RC_SPAWN_TIME,
   * -1 if not given) and when main started */
  double t_spawn, t_main;
  /* --step-lock FILE (NULL when absent; borrowed from argv) and
   * --step-priority: legs sharing one GPU take turns (base/steplock.h) */
  const char *step_lock;
  rc_step_priority step_priority;
  /* --start-gate FILE (NULL when absent; borrowed): wait, before the
   * backend is set up, until `run` lets go of FILE (rc_start_gate_wait) */
  const char *start_gate;
} rc_leg_proc;

/* Fills proc from the environment (RC_WAIT_FD, RC_SPAWN_TIME) and the clock. */
void rc_leg_proc_init(rc_leg_proc *proc);

/* Trains from step 1 (or after --resume-from) to --stop-at / --steps,
 * writing OUT/trace.csv, OUT/timing.csv and checkpoints at --save-at. It
 * locks OUT (base/dirlock.h) and checks that no checkpoint it would write
 * is already complete before it writes anything. A failed load writes
 * nothing but the lock. argv is recorded in args.json. */
/* `train --dry-run-memory`: one JSON object on out — need_device_bytes and
 * need_host_bytes (rc_model_memory_need), the device ("cpu" or "cuda"),
 * device_free_bytes with device_free_source: "nvml" (--device cuda, NVML
 * could name the device: no CUDA context is made, backend/nvml_probe.c),
 * "cuda" (cudaMemGetInfo: --device auto, or NVML could not say) or "host"
 * (the host's available memory, for the CPU); and host_available_bytes.
 * `run` reads it to refuse a --jobs whose legs cannot fit together. */
int rc_leg_memory_report(const rc_config *cfg, const rc_leg_opts *leg, FILE *out, rc_err *err);
int rc_leg_run(const rc_config *cfg, const rc_leg_opts *leg, const rc_leg_proc *proc, int argc,
               char **argv, rc_err *err);

#endif
