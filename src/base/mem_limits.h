/* mem_limits.h — what bounds this process's memory, read from the system.
 *
 * Two kinds of limit (docs/robustness.md, "Allocation failures and memory
 * limits"): the host's, which every process shares (MemAvailable of
 * /proc/meminfo; a cgroup v2 memory.max or v1 memory.limit_in_bytes, less
 * what the cgroup already uses, at the process's cgroup and each one above
 * it), and this process's own (RLIMIT_AS, the address space that `ulimit
 * -v` sets, less what is mapped; RLIMIT_DATA, `ulimit -d`, less the data
 * already mapped). Each is read when asked, nothing is cached: a leg asks
 * once before it allocates, `run` once before it starts the legs. In base
 * so that both the model's check (core) and `run`'s (harness) read the same.
 *
 * Every file is opened with rc_open_regular and read at most a few KiB: a
 * FIFO or a device put in place of a cgroup file never blocks or streams. */
#ifndef RC_BASE_MEM_LIMITS_H
#define RC_BASE_MEM_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t limit; /* the limit itself, bytes */
  uint64_t used;  /* what counts against it now (0 for MemAvailable) */
  uint64_t room;  /* limit - used, 0 when used is at or above it */
  char
      name[200]; /* which limit: "RLIMIT_AS (ulimit -v)", "cgroup v2 memory.max of /sys/...", ... */
} rc_mem_limit;

/* What a leg's process maps beyond the memory need it was planned with:
 * thread stacks, the C library's and HDF5's own allocations. Checked with
 * the need against RLIMIT_AS and RLIMIT_DATA (a thread that cannot be
 * started is done on the caller's, so this need not hold every stack). */
#define RC_MEM_PROCESS_SLACK ((uint64_t)8 << 20)

/* The smallest room the host's limits leave; false when none can be read. */
bool rc_mem_host_limit(rc_mem_limit *out);
/* The smaller room of RLIMIT_AS and RLIMIT_DATA; false when neither is set. */
bool rc_mem_process_limit(rc_mem_limit *out);
/* "RLIMIT_AS (ulimit -v) is 40.0 MiB, 26.1 MiB of it in use": for messages. */
void rc_mem_limit_describe(const rc_mem_limit *l, char *buf, size_t cap);

/* Test hook (not a feature): RC_TEST_CGROUP_DIR=DIR reads memory.max and
 * memory.current of DIR as the process's cgroup v2, in place of the real
 * cgroups, so a test can set a cgroup limit (or put a FIFO there). */

#endif
