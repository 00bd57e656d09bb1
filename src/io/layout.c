/* layout.c — the file names of the on-disk layout that take a number
 * (layout.h has the fixed ones and the whole picture). */
#include "io/layout.h"

#include <stdio.h>
#include <string.h>

void rc_iter_dirname(char *buf, size_t cap, int64_t iteration) {
  snprintf(buf, cap, RC_ITER_NAME_FORMAT, iteration);
}

void rc_shard_filename(char *buf, size_t cap, int rank, int world_size) {
  snprintf(buf, cap, RC_SHARD_NAME_FORMAT, rank, world_size);
}

void rc_fragment_filename(char *buf, size_t cap, int rank, int world_size) {
  snprintf(buf, cap, RC_FRAGMENT_NAME_FORMAT, rank, world_size);
}

bool rc_is_fragment_filename(const char *name) {
  int rank, world;
  if (sscanf(name, "shard_%d_of_%d", &rank, &world) != 2) return false;
  char expect[64];
  rc_fragment_filename(expect, sizeof expect, rank, world);
  return !strcmp(name, expect);
}

void rc_census_filename(char *buf, size_t cap, int64_t iteration, int rank, bool before_save) {
  snprintf(buf, cap, RC_ITER_NAME_FORMAT ".rank%d%s.txt", iteration, rank,
           before_save ? ".before-save" : "");
}

void rc_census_saved_filename(char *buf, size_t cap, int64_t iteration, int rank) {
  snprintf(buf, cap, RC_ITER_NAME_FORMAT ".rank%d.saved.txt", iteration, rank);
}

static void beside(char *buf, size_t cap, const char *iter_dir, const char *suffix) {
  size_t n = strlen(iter_dir);
  while (n > 1 && iter_dir[n - 1] == '/') n--;
  snprintf(buf, cap, "%.*s%s", (int)n, iter_dir, suffix);
}

void rc_handoff_path(char *buf, size_t cap, const char *iter_dir) {
  beside(buf, cap, iter_dir, RC_HANDOFF_SUFFIX);
}

void rc_deferred_path(char *buf, size_t cap, const char *iter_dir) {
  beside(buf, cap, iter_dir, RC_DEFERRED_SUFFIX);
}
