/* launch.h — starting the ranks of a data-parallel leg on this machine when
 * no external launcher did (see launch.c). */
#ifndef RC_DIST_LAUNCH_H
#define RC_DIST_LAUNCH_H

#include "base/error.h"

/* Runs `self train argv[1..]` as `world` ranks with the collectives `kind`
 * ("mpi": through mpiexec; "nccl": forked children with RANK/WORLD_SIZE/
 * LOCAL_RANK and --rendezvous `rendezvous` unless argv has one) and waits.
 * Returns 0 or the first failing rank's exit code. */
int rc_dist_launch_local(const char *kind, int world, int argc, char **argv, const char *rendezvous,
                         rc_err *err);

#endif
