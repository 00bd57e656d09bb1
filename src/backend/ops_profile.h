/* ops_profile.h — a per-op profiler: an rc_ops table that wraps another.
 *
 * Why: the phase profile (RC_PROFILE=1) says which part of the step is slow,
 * not which op; this says where time goes op by op (and, for the GEMM, shape
 * by shape with the achieved TFLOP/s), in one run on the GPU machine.
 *
 * rc_ops_profiled(inner) returns a table whose every member calls inner's,
 * bracketed by inner->sync() before and after and a CLOCK_MONOTONIC timer.
 * It keeps inner->name, so code that branches on the backend's name behaves
 * the same. Wrapping changes no result: it only adds synchronisation, and
 * every op already runs in call order on one stream.
 *
 * The accumulators are file-static, deliberately: the ops signatures carry
 * no context pointer, so a wrapper cannot find per-table state. That makes
 * this process-local, one wrapped backend per process, not thread-safe (the
 * model calls ops from one thread) and debug-only. The wrapper is installed
 * only when asked for (RC_PROFILE=ops in the `train` leg, docs/cuda-backend.md);
 * nothing else pays for it. */
#ifndef RC_BACKEND_OPS_PROFILE_H
#define RC_BACKEND_OPS_PROFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "backend/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The profiling table around inner (which must fill every member, as both
 * backends do). A second call re-targets the same table to the new inner;
 * wrapping the profiling table itself returns it unchanged. */
const rc_ops *rc_ops_profiled(const rc_ops *inner);
/* The same table in the event-timed mode: no synchronisation, each op timed
 * between timer marks on the backend's stream (ops.h timer_mark), resolved
 * when the host waits for the stream anyway (RC_PROFILE=events). Totals are
 * then the device's time per op, not inflated by a round trip per op. */
const rc_ops *rc_ops_profiled_events(const rc_ops *inner);

/* Forgets every count and time (e.g. after a warm-up step). */
void rc_ops_profile_reset(void);

/* Prints the op table (by total time, descending: calls, total ms, ms per
 * call, share of the total), then the GEMM shape table (by time, with
 * TFLOP/s), each with a totals line. Ops never called are left out. */
void rc_ops_profile_report(FILE *f);

/* For tests. Calls of an op ("gemm"), or of an attention op at one compute
 * type ("attention_forward[bf16]"); -1 for a name that is neither. */
long rc_ops_profile_calls(const char *op);
/* Calls of one GEMM shape row (0 if it has none), and of the overflow row
 * that collects shapes beyond the table's capacity. gemm_e4m3's calls are
 * rows of compute type RC_OPS_PROFILE_E4M3 (NT: A [m,k] and B [n,k]). */
#define RC_OPS_PROFILE_E4M3 ((rc_compute)3)
long rc_ops_profile_gemm_calls(rc_compute ct, bool trans_a, bool trans_b, int m, int n, int k,
                               bool beta_zero);
long rc_ops_profile_gemm_other_calls(void);

/* Distinct GEMM shapes tracked one by one; more go to the "other" row. */
#define RC_OPS_PROFILE_GEMM_SHAPES 256

#ifdef __cplusplus
}
#endif

#endif
