/* mem_limits.c — reading the host's and this process's memory limits
 * (mem_limits.h). */
#include "base/mem_limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fsutil.h"

/* A cgroup v1 "no limit" is the largest page-aligned signed 64-bit value;
 * anything this large is no limit. */
#define NO_LIMIT_ABOVE ((uint64_t)1 << 62)

/* Up to cap-1 bytes of path, NUL-terminated, through rc_open_regular (no
 * FIFO, no device); false when it cannot be opened or read. Files of /proc
 * and /sys report a size of 0 or 4096 whatever they hold, so the read is
 * bounded by cap, not by the size. */
static bool read_small(const char *path, char *buf, size_t cap) {
  int fd;
  size_t size;
  rc_err err = {0};
  if (rc_open_regular(path, false, &fd, &size, &err)) return false;
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0) {
      close(fd);
      return false;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = 0;
  return true;
}

/* A number at the start of path ("max" and garbage: false). */
static bool read_u64(const char *path, uint64_t *out) {
  char buf[64];
  if (!read_small(path, buf, sizeof buf)) return false;
  char *end;
  unsigned long long v = strtoull(buf, &end, 10);
  if (end == buf || (*end && *end != '\n')) return false;
  *out = (uint64_t)v;
  return true;
}

/* The value of "KEY: N kB" in a /proc file, in bytes. */
static bool read_kb_field(const char *path, const char *key, uint64_t *out) {
  char buf[8192];
  if (!read_small(path, buf, sizeof buf)) return false;
  size_t klen = strlen(key);
  for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    unsigned long long kb;
    if (!strncmp(line, key, klen) && line[klen] == ':' &&
        sscanf(line + klen + 1, "%llu", &kb) == 1) {
      *out = (uint64_t)kb * 1024;
      return true;
    }
  }
  return false;
}

static void set_limit(rc_mem_limit *l, uint64_t limit, uint64_t used, const char *name) {
  l->limit = limit, l->used = used, l->room = used < limit ? limit - used : 0;
  snprintf(l->name, sizeof l->name, "%s", name);
}

/* Keeps the candidate in *best when it leaves less room. */
static void take_smaller(rc_mem_limit *best, bool *have, uint64_t limit, uint64_t used,
                         const char *name) {
  rc_mem_limit c;
  set_limit(&c, limit, used, name);
  if (!*have || c.room < best->room) *best = c, *have = true;
}

/* One cgroup directory's limit, v2 (memory.max, memory.current) or v1
 * (memory.limit_in_bytes, memory.usage_in_bytes). */
static void cgroup_dir(const char *dir, bool v2, rc_mem_limit *best, bool *have) {
  char max_p[4200], cur_p[4200], name[200];
  snprintf(max_p, sizeof max_p, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
  snprintf(cur_p, sizeof cur_p, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
  uint64_t max, cur = 0;
  if (!read_u64(max_p, &max) || max >= NO_LIMIT_ABOVE) return; /* "max": none here */
  (void)read_u64(cur_p, &cur);
  snprintf(name, sizeof name, "the cgroup's %s (%.150s)",
           v2 ? "memory.max" : "memory.limit_in_bytes", dir);
  take_smaller(best, have, max, cur, name);
}

/* Whether a comma-separated list holds word. */
static bool has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; p && *p; p = strchr(p, ','), p = p ? p + 1 : NULL)
    if (!strncmp(p, word, n) && (p[n] == ',' || !p[n])) return true;
  return false;
}

/* The process's cgroup under root (its path from /proc/self/cgroup: v2's
 * "0::PATH", v1's "N:...memory...:PATH") and every cgroup above it: the
 * tightest of them binds. */
static void cgroup_limits(bool v2, rc_mem_limit *best, bool *have) {
  const char *root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
  char buf[4096], path[4096] = "";
  if (read_small("/proc/self/cgroup", buf, sizeof buf)) {
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
      if (!c2) continue;
      *c1 = *c2 = 0; /* line: the hierarchy's id; c1 + 1: its controllers */
      bool match = v2 ? !strcmp(line, "0") && !c1[1] : has_word(c1 + 1, "memory");
      if (match) snprintf(path, sizeof path, "%s", c2 + 1);
    }
  }
  for (;;) {
    char dir[8200];
    snprintf(dir, sizeof dir, "%s%s", root, strcmp(path, "/") ? path : "");
    cgroup_dir(dir, v2, best, have);
    char *slash = strrchr(path, '/');
    if (!slash || !path[0] || !strcmp(path, "/")) break;
    *slash = 0; /* the parent ("" is the root) */
    if (!path[0]) strcpy(path, "/");
  }
}

bool rc_mem_host_limit(rc_mem_limit *out) {
  bool have = false;
  uint64_t avail;
  if (read_kb_field("/proc/meminfo", "MemAvailable", &avail))
    take_smaller(out, &have, avail, 0, "MemAvailable");
  const char *test_dir = getenv("RC_TEST_CGROUP_DIR");
  if (test_dir && *test_dir) {
    cgroup_dir(test_dir, true, out, &have);
    return have;
  }
  cgroup_limits(true, out, &have);
  cgroup_limits(false, out, &have);
  return have;
}

bool rc_mem_process_limit(rc_mem_limit *out) {
  bool have = false;
  struct rlimit rl;
  long page = sysconf(_SC_PAGESIZE);
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    /* /proc/self/statm's first field: pages mapped (VmSize) */
    char buf[256];
    unsigned long long pages = 0;
    if (read_small("/proc/self/statm", buf, sizeof buf)) (void)sscanf(buf, "%llu", &pages);
    take_smaller(out, &have, (uint64_t)rl.rlim_cur, (uint64_t)pages * (uint64_t)page,
                 "RLIMIT_AS (ulimit -v)");
  }
  if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    uint64_t data = 0;
    (void)read_kb_field("/proc/self/status", "VmData", &data);
    take_smaller(out, &have, (uint64_t)rl.rlim_cur, data, "RLIMIT_DATA (ulimit -d)");
  }
  return have;
}

void rc_mem_limit_describe(const rc_mem_limit *l, char *buf, size_t cap) {
  char limit[32], used[32];
  rc_format_bytes(l->limit, limit, sizeof limit);
  rc_format_bytes(l->used, used, sizeof used);
  if (!l->used)
    snprintf(buf, cap, "%s is %s", l->name, limit);
  else
    snprintf(buf, cap, "%s is %s, %s of it in use", l->name, limit, used);
}
