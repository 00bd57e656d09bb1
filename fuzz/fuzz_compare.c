/* fuzz_compare.c — libFuzzer target: `compare` and `inspect`'s bounds check
 * on a foreign HDF5 file (harness/compare_*.c, harness/h5_bounds.c). The
 * rest of the input after the first byte is written as B.h5; the first byte
 * picks what it is compared with:
 *   bit 0  --deep (every object and attribute walked even when bytes agree)
 *   bit 1  A is B itself (both sides are the fuzzed file), else A is
 *          fixtures/io/good's shard (one side trusted, one foreign).
 * Then rc_h5_check_file (what `inspect` runs first) on B. Any outcome is
 * fine except a crash, a hang (libFuzzer's -timeout), an allocation past
 * -rss_limit_mb, or an HDF5 id left open (counted per kind, as in
 * fuzz_checkpoint.c). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/fsutil.h"
#include "harness/compare.h"
#include "harness/h5_bounds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_b[256];
static const char *g_good = RC_FIXTURES "/io/good/iter_0000005/shard_00000_of_00001.h5";

static void setup(void) {
  /* the harness silences libhdf5 around its own calls; this covers the rest */
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  char dir[128];
  snprintf(dir, sizeof dir, "/tmp/rc_fuzz_compare.%ld", (long)getpid());
  rc_err err = {0};
  if (rc_mkdir_p(dir, &err)) {
    fprintf(stderr, "fuzz_compare setup: %s\n", err.msg);
    abort();
  }
  snprintf(g_b, sizeof g_b, "%s/B.h5", dir);
}

static void check_ids(const char *what) {
  static const H5I_type_t kinds[] = {H5I_FILE,    H5I_GROUP, H5I_DATATYPE,   H5I_DATASPACE,
                                     H5I_DATASET, H5I_ATTR,  H5I_GENPROP_LST};
  static hsize_t base[7];
  static bool have_base = false;
  for (int k = 0; k < 7; k++) {
    hsize_t n_ids = 0;
    H5Inmembers(kinds[k], &n_ids);
    if (!have_base) {
      base[k] = n_ids;
    } else if (n_ids > base[k]) {
      fprintf(stderr, "fuzz_compare: HDF5 id kind %d: %llu open, %llu before (%s)\n", (int)kinds[k],
              (unsigned long long)n_ids, (unsigned long long)base[k], what);
      __builtin_trap();
    }
  }
  have_base = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_b[0]) setup();
  if (size < 1) return 0;
  FILE *f = fopen(g_b, "wb");
  if (!f || fwrite(data + 1, 1, size - 1, f) != size - 1 || fclose(f)) {
    fprintf(stderr, "fuzz_compare: cannot write %s\n", g_b);
    abort();
  }
  rc_compare_opts opts = {NULL, 0, (data[0] & 1) != 0, false, RC_CKPT_FORMAT_AUTO};
  rc_compare_result res;
  rc_err err = {0};
  rc_compare_paths(data[0] & 2 ? g_b : g_good, g_b, &opts, &res, &err);
  rc_compare_result_free(&res);
  check_ids("compare");
  rc_h5_check_file(g_b, &err);
  check_ids("rc_h5_check_file");
  return 0;
}
