/* fuzz_checkpoint.c — libFuzzer target: rc_checkpoint_load
 * (src/io/checkpoint_load.c) on a checkpoint directory in a temp dir, built
 * from the input. The first byte picks what the fuzzer controls:
 *   even  the rest is manifest.json; COMPLETE is forged to match it and the
 *         shard is fixtures/io/good's: the manifest checks and the
 *         hash-before-parse gate;
 *   odd   the rest is the shard; manifest.json and COMPLETE are forged to
 *         match its size and SHA-256, so libhdf5 and the /meta, config and
 *         dataset checks see the fuzzed bytes (a forger's view: the hash
 *         stops corruption, not a deliberate edit).
 * Loads into the fixture state of tests/io_fixture_state.h; afterwards no
 * HDF5 object may be left open (a leaked id is a leak per load, and makes
 * HDF5 loop at exit). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/fsutil.h"
#include "io/checkpoint.h"
#include "io/checkpoint_internal.h"
#include "io/sha256.h"
#include "tests/io_fixture_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[256];
static char *g_good_shard, *g_good_manifest;
static size_t g_good_shard_n, g_good_manifest_n;

static void setup(void) {
  /* libhdf5's automatic error-stack printing: hundreds of MB of log per
   * minute of fuzzing; the loader reports its own errors */
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  char root[128];
  snprintf(root, sizeof root, "/tmp/rc_fuzz_ckpt.%ld", (long)getpid());
  snprintf(g_dir, sizeof g_dir, "%s/iter_0000005", root);
  rc_err err = {0};
  const char *good = RC_FIXTURES "/io/good/iter_0000005";
  char path[512];
  snprintf(path, sizeof path, "%s/shard_00000_of_00001.h5", good);
  if (rc_read_file(path, &g_good_shard, &g_good_shard_n, &err)) goto fatal;
  snprintf(path, sizeof path, "%s/manifest.json", good);
  if (rc_read_file(path, &g_good_manifest, &g_good_manifest_n, &err)) goto fatal;
  if (rc_mkdir_p(g_dir, &err)) goto fatal;
  return;
fatal:
  fprintf(stderr, "fuzz_checkpoint setup: %s\n", err.msg);
  abort();
}

static void put(const char *name, const void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
    fprintf(stderr, "fuzz_checkpoint: cannot write %s\n", path);
    abort();
  }
}

static void put_manifest(const char *text, size_t n) {
  put("manifest.json", text, n);
  char sha[RC_SHA256_HEX], marker[128];
  rc_sha256_hex(text, n, sha);
  int k = snprintf(marker, sizeof marker, "%s  manifest.json\n", sha);
  put("COMPLETE", marker, (size_t)k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_dir[0]) setup();
  if (size < 1) return 0;
  const char *rest = (const char *)data + 1;
  size_t n = size - 1;
  if ((data[0] & 1) == 0) {
    put("shard_00000_of_00001.h5", g_good_shard, g_good_shard_n);
    put_manifest(rest, n);
  } else {
    put("shard_00000_of_00001.h5", rest, n);
    rc_manifest m = {0};
    rc_err err = {0};
    if (rc_manifest_parse(g_good_manifest, g_good_manifest_n, "good", &m, &err)) abort();
    m.shards[0].bytes = n;
    rc_sha256_hex(rest, n, m.shards[0].sha256);
    size_t len;
    char *text = rc_manifest_text(&m, &len);
    put_manifest(text, len);
    free(text);
    rc_manifest_free(&m);
  }
  iofix got;
  iofix_build(&got, IOFIX_EMPTY, 3);
  rc_shard_meta meta = iofix_meta(0, 1, IOFIX_CONFIG);
  rc_err err = {0};
  rc_checkpoint_load(g_dir, &meta, &got.st, &err);
  iofix_free(&got);
  /* a load, failed or not, must close every HDF5 id it opened: the count
   * of each kind must be what it was after the first load */
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
      fprintf(stderr, "fuzz_checkpoint: HDF5 id kind %d: %llu open, %llu before; load said: %s\n",
              (int)kinds[k], (unsigned long long)n_ids, (unsigned long long)base[k], err.msg);
      __builtin_trap();
    }
  }
  have_base = true;
  return 0;
}
