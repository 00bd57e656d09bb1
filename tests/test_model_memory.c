/* test_model_memory.c — the model's memory plan (core/model_internal.h):
 * one list of buffers that both counts and allocates, and the checks of its
 * sum against the machine's limits (issue 46 cause 4; issue 16 item 9,
 * issue 15 item 6).
 *
 * plan_vs_backend: every allocation rc_model_init makes through the backend
 * is counted by a wrapping ops table (bytes and calls); the plan's backend
 * total (rc_model_memory_need's device need less the allocator overhead)
 * and its count must equal them exactly, kind by kind against the plan's
 * own entries, and the need rc_model_memory_need plans from the config
 * alone must equal the one the init checked. Configs cover every planning
 * branch: dense and MoE layers, shared and separate MTP layers, fp32 / bf16
 * / fp16 / fp8, BF16 attention, fusion off, the tied and the TE-style head,
 * a kept SwiGLU output. Negative control: the same plan with one backend
 * buffer omitted (each kind's first, in turn) fails the same comparison.
 *
 * heap_bound: glibc's mallinfo2 (heap in use plus mmap'd blocks) before and
 * after the init: measured <= need.device + need.host_buffers, and the need
 * at most 1.25x the measurement plus 1 MiB; control: the need without its
 * activations is below the measurement.
 *
 * checks: the refusals built on the need, with injected available values,
 * this process's RLIMIT_AS and RLIMIT_DATA lowered around them (the
 * pre-check refuses naming the limit, before allocating; control: a limit
 * above the plan passes), a cgroup v2 memory.max through RC_TEST_CGROUP_DIR
 * (control: "max"; a FIFO there is not read and does not block), and
 * `run --jobs`' check. World size 1 only (rc_model_attach_comm's buffers
 * need collectives; their plan is summed for --world-size 2 below). */
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem_limits.h"
#include "core/config.h"
#include "core/model_internal.h"
#include "harness/run.h"

#include "check.h"

/* ---- counting what the backend is asked for ---- */

static const rc_ops *g_cpu;
static uint64_t g_bytes, g_calls, g_frees;

static void *count_alloc(size_t bytes) {
  g_bytes += bytes, g_calls++;
  return g_cpu->alloc(bytes);
}
static void count_free(void *p) {
  g_frees += p != NULL;
  g_cpu->free(p);
}

static const rc_ops *counting_ops(void) {
  static rc_ops counted;
  g_cpu = rc_cpu_ops();
  counted = *g_cpu;
  counted.alloc = count_alloc, counted.free = count_free;
  return &counted;
}

static void make_config(rc_config *c, const char *flags) {
  rc_config_defaults(c, NULL);
  char buf[512], *argv[64];
  snprintf(buf, sizeof buf, "%s", flags);
  int argc = 0;
  argv[argc++] = "test";
  for (char *t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
  rc_err err = {0};
  if (rc_config_parse(argc, argv, c, NULL, &err)) {
    printf("config '%s': %s\n", flags, err.msg);
    exit(2);
  }
}

/* The backend's part of a need: its kinds, without the allocator overhead. */
static uint64_t backend_bytes(const rc_memory_need *n) {
  return n->device - n->overhead;
}

/* The check itself: what the backend was asked for is what the plan sums. */
static bool plan_matches(const rc_memory_need *n, uint64_t bytes, uint64_t calls) {
  return backend_bytes(n) == bytes && n->n_allocs == calls;
}

/* m's plan without entry `skip`, summed: a plan that forgot one buffer. */
static void need_without(const rc_model *m, int skip, rc_memory_need *out) {
  rc_model *copy = malloc(sizeof *copy);
  rc_model_block *blocks = malloc((size_t)m->n_blocks * sizeof *blocks);
  if (!copy || !blocks) exit(2);
  *copy = *m;
  int n = 0;
  for (int i = 0; i < m->n_blocks; i++)
    if (i != skip) blocks[n++] = m->blocks[i];
  copy->blocks = blocks, copy->n_blocks = n;
  rc_model_plan_need(copy, out);
  free(blocks);
  free(copy);
}

static void plan_vs_backend(const char *flags) {
  rc_config c;
  make_config(&c, flags);
  rc_memory_need from_cfg;
  CHECK(rc_model_memory_need(&c, &from_cfg) == RC_OK, "'%s': rc_model_memory_need failed", flags);
  rc_model *m = calloc(1, sizeof *m);
  rc_err err = {0};
  const rc_ops *ops = counting_ops();
  g_bytes = g_calls = g_frees = 0;
  if (!m || rc_model_init(m, &c, ops, 0, &err)) {
    printf("init '%s': %s\n", flags, err.msg);
    exit(2);
  }
  rc_memory_need n;
  rc_model_plan_need(m, &n);
  CHECK(
      plan_matches(&n, g_bytes, g_calls),
      "'%s': the backend was asked for %llu bytes in %llu allocations, the plan sums %llu in %llu",
      flags, (unsigned long long)g_bytes, (unsigned long long)g_calls,
      (unsigned long long)backend_bytes(&n), (unsigned long long)n.n_allocs);
  CHECK(
      from_cfg.device == n.device && from_cfg.n_allocs == n.n_allocs &&
          from_cfg.n_host_allocs == n.n_host_allocs && from_cfg.host == n.host,
      "'%s': the need planned from the config (%llu, %llu buffers) is not the init's (%llu, %llu)",
      flags, (unsigned long long)from_cfg.device, (unsigned long long)from_cfg.n_allocs,
      (unsigned long long)n.device, (unsigned long long)n.n_allocs);
  /* every entry walked, well formed, and the kinds' sums the need's */
  uint64_t got[RC_MEM_KINDS] = {0};
  int first_of_kind[RC_MEM_KINDS];
  for (int k = 0; k < RC_MEM_KINDS; k++) first_of_kind[k] = -1;
  for (int i = 0; i < m->n_blocks; i++) {
    const rc_model_block *b = &m->blocks[i];
    CHECK(b->ptr && b->bytes > 0 && b->what && b->kind < RC_MEM_KINDS && b->dst,
          "'%s': plan entry %d (%s) is malformed or was not allocated", flags, i,
          b->what ? b->what : "?");
    got[b->kind] += b->bytes;
    if (first_of_kind[b->kind] < 0) first_of_kind[b->kind] = i;
  }
  uint64_t want[] = {n.weights,     n.main_grad, n.optimizer, n.weight_copies,
                     n.activations, n.scratch,   n.dist};
  for (int k = 0; k < RC_MEM_HOST; k++)
    CHECK(got[k] == want[k], "'%s': kind %d: the plan holds %llu bytes, the need says %llu", flags,
          k, (unsigned long long)got[k], (unsigned long long)want[k]);
  /* negative control: a plan that omits one buffer, of each backend kind */
  int controls = 0;
  for (int k = 0; k < RC_MEM_HOST; k++) {
    if (first_of_kind[k] < 0) continue;
    rc_memory_need omitted;
    need_without(m, first_of_kind[k], &omitted);
    CHECK(!plan_matches(&omitted, g_bytes, g_calls),
          "(negative control) '%s': a plan without '%s' still matches the backend", flags,
          m->blocks[first_of_kind[k]].what);
    controls++;
  }
  CHECK(controls >= 5, "'%s': only %d kinds to omit", flags, controls);
  printf("%-60s plan %d buffers (%llu backend, %llu bytes) = backend's %llu calls, %llu bytes\n",
         flags, m->n_blocks, (unsigned long long)n.n_allocs, (unsigned long long)backend_bytes(&n),
         (unsigned long long)g_calls, (unsigned long long)g_bytes);
  uint64_t calls = g_calls;
  rc_model_free(m);
  free(m);
  CHECK(g_frees == calls, "'%s': %llu backend buffers allocated, %llu freed", flags,
        (unsigned long long)calls, (unsigned long long)g_frees);
}

static uint64_t in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

static void heap_bound(const char *flags) {
  rc_config c;
  make_config(&c, flags);
  rc_memory_need n;
  rc_model_memory_need(&c, &n);
  uint64_t before = in_use();
  rc_model *m = calloc(1, sizeof *m); /* as the leg allocates it */
  rc_err err = {0};
  if (!m || rc_model_init(m, &c, rc_cpu_ops(), 0, &err)) {
    printf("init '%s': %s\n", flags, err.msg);
    exit(2);
  }
  uint64_t measured = in_use() - before;
  rc_model_free(m);
  free(m);
  uint64_t need = n.device + n.host_buffers;
  uint64_t no_act = need - n.activations;
  printf("%-60s measured %9llu  need %9llu (%.2fx)  without activations %9llu\n", flags,
         (unsigned long long)measured, (unsigned long long)need, (double)need / (double)measured,
         (unsigned long long)no_act);
  CHECK(measured <= need, "'%s': rc_model_init allocated %llu bytes, more than the need %llu",
        flags, (unsigned long long)measured, (unsigned long long)need);
  CHECK(need <= measured + measured / 4 + (1u << 20),
        "'%s': need %llu is more than 1.25x the %llu allocated: not a useful bound", flags,
        (unsigned long long)need, (unsigned long long)measured);
  CHECK(no_act < measured,
        "(negative control) '%s': leaving the activations out (%llu) still covers the measured "
        "%llu: the comparison cannot see a missing term",
        flags, (unsigned long long)no_act, (unsigned long long)measured);
}

static const char *const CONFIGS[] = {
    "",
    "--moe-layers none --mtp-separate-layers --mtp-depths 0",
    "--precision fp32",
    "--precision fp16",
    "--precision fp8",
    "--precision fp8 --te-output-head --moe-layers 0,1",
    "--attention-precision bf16",
    "--attention-precision bf16 --precision fp32",
    "--grad-accum-fusion off",
    "--mtp-separate-layers --mtp-depths 3 --moe-layers 0,1",
    "--tie-embeddings --moe-layers none --mtp-separate-layers --mtp-depths 0",
    "--tie-embeddings --precision fp8",
    "--te-output-head --precision fp32 --attention-precision fp32",
    "--preset small",
    "--hidden 128 --vocab 4096 --ffn 512 --seq-len 64 --micro-batch 4",
};
#define N_CONFIGS (sizeof CONFIGS / sizeof CONFIGS[0])

/* VmSize of this process, bytes. */
static uint64_t vm_size(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long pages = 0;
  if (f) {
    if (fscanf(f, "%llu", &pages) != 1) pages = 0;
    fclose(f);
  }
  return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The check under this process's own limit `which` set `room` bytes above
 * what is in use now (RLIMIT_AS: VmSize; RLIMIT_DATA: VmData, read through
 * rc_mem_process_limit); the limit restored after. */
static int check_under(int which, uint64_t room, const rc_memory_need *n, rc_err *err) {
  struct rlimit old, lim;
  getrlimit(which, &old);
  uint64_t used = 0;
  if (which == RLIMIT_AS) {
    used = vm_size();
  } else { /* VmData: set a loose limit first, and read it back */
    lim = old, lim.rlim_cur = (rlim_t)1 << 45;
    setrlimit(which, &lim);
    rc_mem_limit l;
    if (rc_mem_process_limit(&l)) used = l.used;
    setrlimit(which, &old);
  }
  lim = old, lim.rlim_cur = (rlim_t)(used + room);
  CHECK(setrlimit(which, &lim) == 0, "setrlimit(%d) failed", which);
  int rc = rc_model_memory_check(n, true, 0, 0, err); /* host unknown: only the process's */
  setrlimit(which, &old);
  return rc;
}

static void process_checks(const rc_memory_need *n) {
  rc_err err = {0};
  uint64_t mapped = n->device + n->op_scratch + n->host + RC_MEM_PROCESS_SLACK;
  const int which[] = {RLIMIT_AS, RLIMIT_DATA};
  const char *name[] = {"RLIMIT_AS", "RLIMIT_DATA"};
  for (int i = 0; i < 2; i++) {
    /* a few pages of slack for what the check itself maps while it reads */
    CHECK(check_under(which[i], mapped + (4u << 20), n, &err) == RC_OK,
          "(control) %s 4 MiB above the plan refuses it: %s", name[i], err.msg);
    err.msg[0] = 0;
    CHECK(check_under(which[i], mapped / 2, n, &err) == RC_EXIT_RESOURCES,
          "%s at half the plan passes", name[i]);
    CHECK(strstr(err.msg, name[i]) && strstr(err.msg, "nothing was allocated"),
          "%s's refusal does not name it: %s", name[i], err.msg);
  }
  /* no limit: nothing to check */
  CHECK(rc_model_memory_check(n, true, 0, 0, &err) == RC_OK, "%s", "no limit refuses");
}

/* RC_TEST_CGROUP_DIR: a cgroup v2 directory the test writes. */
static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) < 0 || fclose(f)) {
    printf("cannot write %s\n", path);
    exit(2);
  }
}

static void alarm_fail(int sig) {
  (void)sig;
  static const char msg[] = "FAIL: reading a FIFO as memory.max blocked\n";
  if (write(1, msg, sizeof msg - 1) < 0) _exit(1);
  _exit(1);
}

static void cgroup_checks(const rc_memory_need *n) {
  char dir[] = "/tmp/rc_cgroup.XXXXXX", max_p[64], cur_p[64];
  if (!mkdtemp(dir)) exit(2);
  snprintf(max_p, sizeof max_p, "%s/memory.max", dir);
  snprintf(cur_p, sizeof cur_p, "%s/memory.current", dir);
  setenv("RC_TEST_CGROUP_DIR", dir, 1);
  rc_err err = {0};
  uint64_t total = n->device + n->op_scratch + n->host;
  char buf[64];
  /* a limit below the plan: the host check refuses, naming memory.max */
  snprintf(buf, sizeof buf, "%llu\n", (unsigned long long)(total / 2 + 1000));
  write_file(max_p, buf);
  write_file(cur_p, "1000\n");
  uint64_t avail = rc_host_memory_available();
  CHECK(avail == total / 2, "cgroup room %llu, want memory.max - memory.current = %llu",
        (unsigned long long)avail, (unsigned long long)(total / 2));
  CHECK(rc_model_memory_check(n, true, avail, avail, &err) == RC_EXIT_RESOURCES, "%s",
        "a cgroup limit below the plan passes");
  CHECK(strstr(err.msg, "memory.max") != NULL, "the refusal does not name memory.max: %s", err.msg);
  /* control: "max" is no limit (MemAvailable remains) */
  write_file(max_p, "max\n");
  avail = rc_host_memory_available();
  CHECK(avail > total / 2 + 1000, "memory.max \"max\" still limits to %llu",
        (unsigned long long)avail);
  /* a FIFO as memory.max is not read (it would block) and sets no limit */
  unlink(max_p);
  CHECK(mkfifo(max_p, 0600) == 0, "%s", "mkfifo");
  signal(SIGALRM, alarm_fail);
  alarm(10);
  uint64_t fifo_avail = rc_host_memory_available();
  alarm(0);
  CHECK(fifo_avail > total / 2 + 1000, "a FIFO memory.max limits to %llu",
        (unsigned long long)fifo_avail);
  unlink(max_p), unlink(cur_p), rmdir(dir);
  unsetenv("RC_TEST_CGROUP_DIR");
}

static void checks(bool plain_allocator) {
  unsetenv("RC_TEST_MEM_AVAILABLE");
  rc_config c;
  make_config(&c, "");
  rc_memory_need n;
  rc_model_memory_need(&c, &n);
  rc_err err = {0};
  /* one memory (CPU): device, the ops' scratch and host against the host's */
  uint64_t total = n.device + n.op_scratch + n.host;
  CHECK(rc_model_memory_check(&n, true, total, total, &err) == RC_OK, "%s",
        "rc_model_memory_check(&n, true, total, total, &err) == RC_OK");
  CHECK(rc_model_memory_check(&n, true, total - 1, total - 1, &err) == RC_EXIT_RESOURCES, "%s",
        "rc_model_memory_check(&n, true, total - 1, total - 1, &err) == RC_EXIT_RESOURCES");
  CHECK(strstr(err.msg, "needs") && strstr(err.msg, "available"), "%s",
        "strstr(err.msg, \"needs\") && strstr(err.msg, \"available\")");
  CHECK(rc_model_memory_check(&n, true, 0, 0, &err) == RC_OK, "%s",
        "rc_model_memory_check(&n, true, 0, 0, &err) == RC_OK"); /* unknown: not checked */
  /* two memories (CUDA): each against its own */
  CHECK(rc_model_memory_check(&n, false, n.device, n.host, &err) == RC_OK, "%s",
        "rc_model_memory_check(&n, false, n.device, n.host, &err) == RC_OK");
  CHECK(rc_model_memory_check(&n, false, n.device - 1, n.host, &err) == RC_EXIT_RESOURCES, "%s",
        "rc_model_memory_check(&n, false, n.device - 1, n.host, &err) == RC_EXIT_RESOURCES");
  CHECK(strstr(err.msg, "device memory") != NULL, "%s",
        "strstr(err.msg, \"device memory\") != NULL");
  CHECK(rc_model_memory_check(&n, false, n.device, n.host - 1, &err) == RC_EXIT_RESOURCES, "%s",
        "rc_model_memory_check(&n, false, n.device, n.host - 1, &err) == RC_EXIT_RESOURCES");
  CHECK(strstr(err.msg, "host memory") != NULL, "%s", "strstr(err.msg, \"host memory\") != NULL");
  CHECK(rc_model_memory_check(&n, false, 0, n.host, &err) == RC_OK, "%s",
        "rc_model_memory_check(&n, false, 0, n.host, &err) == RC_OK");
  /* the test hook replaces both available values */
  setenv("RC_TEST_MEM_AVAILABLE", "1000", 1);
  CHECK(rc_model_memory_check(&n, true, total, total, &err) == RC_EXIT_RESOURCES, "%s",
        "rc_model_memory_check(&n, true, total, total, &err) == RC_EXIT_RESOURCES");
  CHECK(strstr(err.msg, "RC_TEST_MEM_AVAILABLE") != NULL, "%s",
        "strstr(err.msg, \"RC_TEST_MEM_AVAILABLE\") != NULL");
  unsetenv("RC_TEST_MEM_AVAILABLE");
  if (plain_allocator) process_checks(&n);
  cgroup_checks(&n);

  /* the distributed optimizer's buffers are in the plan: --world-size 2
   * adds [padded] twice and [shard] four times, and a host offset table */
  rc_config c2 = c;
  c2.world_size = 2;
  rc_memory_need n2;
  CHECK(rc_model_memory_need(&c2, &n2) == RC_OK, "%s", "the need of --world-size 2");
  uint64_t params = n.main_grad / 4, shard = (params + 1) / 2; /* a main_grad per parameter */
  CHECK(n2.dist == 4 * (2 * 2 * shard + 4 * shard) && n2.n_allocs == n.n_allocs + 6 &&
            n2.n_host_allocs == n.n_host_allocs + 1,
        "--world-size 2: dist %llu in %llu buffers, want %llu in %llu", (unsigned long long)n2.dist,
        (unsigned long long)(n2.n_allocs - n.n_allocs),
        (unsigned long long)(4 * (4 * shard + 4 * shard)), 6ull);

  /* --jobs: min(jobs, legs that can run at once) legs of per_leg bytes */
  uint64_t leg = 100u << 20;
  CHECK(rc_run_jobs_memory_check(leg, 4, 3, 3 * leg, "device memory", &err) == RC_OK, "%s",
        "rc_run_jobs_memory_check(leg, 4, 3, 3 * leg, \"device memory\", &err) == RC_OK");
  CHECK(rc_run_jobs_memory_check(leg, 4, 3, 3 * leg - 1, "device memory", &err) ==
            RC_EXIT_RESOURCES,
        "%s",
        "rc_run_jobs_memory_check(leg, 4, 3, 3 * leg - 1, \"device memory\", &err) == "
        "RC_EXIT_RESOURCES");
  CHECK(strstr(err.msg, "--jobs 2 or fewer") != NULL, "%s",
        "strstr(err.msg, \"--jobs 2 or fewer\") != NULL");
  CHECK(strstr(err.msg, "--jobs 4 runs 3 legs at once") != NULL, "%s",
        "strstr(err.msg, \"--jobs 4 runs 3 legs at once\") != NULL");
  CHECK(rc_run_jobs_memory_check(leg, 1, 3, leg, "device memory", &err) == RC_OK, "%s",
        "rc_run_jobs_memory_check(leg, 1, 3, leg, \"device memory\", &err) == RC_OK");
  CHECK(
      rc_run_jobs_memory_check(leg, 1, 3, leg - 1, "device memory", &err) == RC_EXIT_RESOURCES,
      "%s",
      "rc_run_jobs_memory_check(leg, 1, 3, leg - 1, \"device memory\", &err) == RC_EXIT_RESOURCES");
  CHECK(strstr(err.msg, "not even --jobs 1") != NULL, "%s",
        "strstr(err.msg, \"not even --jobs 1\") != NULL");
  CHECK(rc_run_jobs_memory_check(leg, 64, 3, 0, "device memory", &err) == RC_OK, "%s",
        "rc_run_jobs_memory_check(leg, 64, 3, 0, \"device memory\", &err) == RC_OK"); /* unknown */
  /* the RC_TEST_MEM_AVAILABLE hook reaches run through train --dry-run-memory:
   * tests/run_jobs_memory.sh */
  /* the need of a real config, as `run` would pass it */
  CHECK(rc_run_jobs_memory_check(n.device, 3, 3, 3 * n.device, "device memory", &err) == RC_OK,
        "%s",
        "rc_run_jobs_memory_check(n.device, 3, 3, 3 * n.device, \"device memory\", &err) == RC_OK");
  CHECK(rc_run_jobs_memory_check(n.device, 3, 3, 2 * n.device, "device memory", &err) ==
            RC_EXIT_RESOURCES,
        "%s",
        "rc_run_jobs_memory_check(n.device, 3, 3, 2 * n.device, \"device memory\", &err) == "
        "RC_EXIT_RESOURCES");
  CHECK(rc_host_memory_available() > 0, "%s", "rc_host_memory_available() > 0");
}

/* AddressSanitizer replaces malloc: glibc's mallinfo2 no longer sees the
 * model's allocations, so the heap bound needs the plain allocator (the
 * main suite); the rest runs in every build. An address-space limit does
 * not mix with the sanitizer's shadow memory either. */
#if defined(__SANITIZE_ADDRESS__)
#define RC_PLAIN_ALLOCATOR 0
#else
#define RC_PLAIN_ALLOCATOR 1
#endif

int main(void) {
  unsetenv("RC_KEEP_SWIGLU_OUTPUT");
  for (size_t i = 0; i < N_CONFIGS; i++) plan_vs_backend(CONFIGS[i]);
  setenv("RC_KEEP_SWIGLU_OUTPUT", "1", 1); /* a saved SwiGLU output per layer */
  plan_vs_backend("");
  unsetenv("RC_KEEP_SWIGLU_OUTPUT");
  if (RC_PLAIN_ALLOCATOR)
    for (size_t i = 0; i < N_CONFIGS; i++) heap_bound(CONFIGS[i]);
  else
    printf("heap bound and process limits not checked: a sanitizer's allocator is not glibc's\n");
  checks(RC_PLAIN_ALLOCATOR);
  if (failures) printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
