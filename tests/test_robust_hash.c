/* test_robust_hash.c — hash before parse (issue #10, item 1): a shard whose
 * bytes do not match its manifest is refused before libhdf5 parses a byte.
 *
 * Linked with -Wl,--wrap=H5Fopen (tests/robust.cmake), so every H5Fopen the
 * loader makes is counted; "parsed" means H5Fopen was called. Cases, each a
 * copy of fixtures/io/good/iter_0000005 with one change:
 *   valid_other   the shard replaced by another valid shard of the same size
 *                 (fixtures/io/config_mismatch: parsing it would say "config
 *                 mismatch") -> 65 "corrupt", H5Fopen never called
 *   garbage       the shard replaced by random bytes of the same size
 *                 -> 65 "corrupt", never parsed
 *   entry_removed garbage shard, and the manifest's shard entry removed with
 *                 COMPLETE forged to match -> 65, never parsed
 * Negative controls: the good copy loads and H5Fopen is called (the counter
 * sees the loader's opens); the replacement shard really is valid HDF5.
 * The limit (hashes catch corruption, not forgery): a forger who rewrites
 * the manifest entry and COMPLETE gets past the hash. Garbage is then still
 * refused before libhdf5, by the superblock check (65, never parsed); a
 * well-formed shard (the valid_other one) reaches libhdf5 and the /meta
 * checks ("config mismatch"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/fsutil.h"
#include "io/checkpoint.h"
#include "io/sha256.h"
#include "io_fixture_state.h"

static int g_fails = 0;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      g_fails++;                                                                                   \
    }                                                                                              \
  } while (0)

/* ---- the H5Fopen counter */
static int g_h5_opens = 0;
hid_t __real_H5Fopen(const char *name, unsigned flags, hid_t fapl);
hid_t __wrap_H5Fopen(const char *name, unsigned flags, hid_t fapl);
hid_t __wrap_H5Fopen(const char *name, unsigned flags, hid_t fapl) {
  g_h5_opens++;
  return __real_H5Fopen(name, flags, fapl);
}

#define SHARD "shard_00000_of_00001.h5"

static char *slurp(const char *dir, const char *name, size_t *n) {
  char path[4096];
  rc_path_join(path, sizeof path, dir, name);
  char *data = NULL;
  rc_err err = {0};
  if (rc_read_file(path, &data, n, &err)) {
    fprintf(stderr, "FATAL: %s\n", err.msg);
    exit(1);
  }
  return data;
}

static void put(const char *dir, const char *name, const void *data, size_t n) {
  char path[4096];
  rc_path_join(path, sizeof path, dir, name);
  rc_err err = {0};
  if (rc_write_file_atomic(path, data, n, &err)) {
    fprintf(stderr, "FATAL: %s\n", err.msg);
    exit(1);
  }
}

/* A copy of the good fixture in root/name; returns its path in out. */
static void copy_good(const char *fixtures, const char *root, const char *name, char *out,
                      size_t cap) {
  char src[4096];
  snprintf(src, sizeof src, "%s/io/good/iter_0000005", fixtures);
  snprintf(out, cap, "%s/%s", root, name);
  rc_err err = {0};
  if (rc_mkdir_p(out, &err)) {
    fprintf(stderr, "FATAL: %s\n", err.msg);
    exit(1);
  }
  static const char *const files[] = {SHARD, "manifest.json", "COMPLETE", "args.json"};
  for (int i = 0; i < 4; i++) {
    size_t n;
    char *d = slurp(src, files[i], &n);
    put(out, files[i], d, n);
    free(d);
  }
}

/* Rewrites manifest.json and forges COMPLETE to match it. */
static void forge_manifest(const char *dir, const char *text) {
  put(dir, "manifest.json", text, strlen(text));
  char sha[RC_SHA256_HEX], marker[128];
  rc_sha256_hex(text, strlen(text), sha);
  int n = snprintf(marker, sizeof marker, "%s  manifest.json\n", sha);
  put(dir, "COMPLETE", marker, (size_t)n);
}

/* Replaces the first occurrence of `from` in *text by `to` (malloc'd). */
static void replace(char **text, const char *from, const char *to) {
  char *at = strstr(*text, from);
  if (!at) {
    fprintf(stderr, "FATAL: '%s' not in the manifest\n", from);
    exit(1);
  }
  size_t pre = (size_t)(at - *text), fl = strlen(from), tl = strlen(to);
  char *out = malloc(strlen(*text) - fl + tl + 1);
  if (!out) exit(1);
  memcpy(out, *text, pre);
  memcpy(out + pre, to, tl);
  strcpy(out + pre + tl, at + fl);
  free(*text);
  *text = out;
}

/* Loads dir; returns the code, message in err, H5Fopen calls in *opens. */
static int load(const char *dir, rc_err *err, int *opens) {
  iofix got;
  iofix_build(&got, IOFIX_EMPTY, 3);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  memset(err, 0, sizeof *err);
  g_h5_opens = 0;
  int rc = rc_checkpoint_load(dir, &m, &got.st, err);
  *opens = g_h5_opens;
  iofix_free(&got);
  return rc;
}

int main(void) {
  const char *fixtures = getenv("RC_FIXTURES");
  if (!fixtures) {
    fprintf(stderr, "RC_FIXTURES is not set\n");
    return 1;
  }
  char root[] = "/tmp/rc_robust_hash.XXXXXX";
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  char dir[4096], other[4096];
  rc_err err;
  int opens, rc;
  size_t n_good, n_other;
  snprintf(other, sizeof other, "%s/io/config_mismatch/iter_0000005", fixtures);

  /* negative control: the good copy loads, and the counter sees its H5Fopen */
  copy_good(fixtures, root, "good", dir, sizeof dir);
  rc = load(dir, &err, &opens);
  CHECK(rc == 0 && opens >= 1, "good copy: code %d, %d H5Fopen (%s)", rc, opens, err.msg);

  /* valid HDF5 of the same size, other bytes */
  copy_good(fixtures, root, "valid_other", dir, sizeof dir);
  char *good_shard = slurp(dir, SHARD, &n_good);
  char *valid = slurp(other, SHARD, &n_other);
  CHECK(n_good == n_other, "fixture shards differ in size (%zu, %zu): the case needs equal sizes",
        n_good, n_other);
  put(dir, SHARD, valid, n_other);
  char path[4096];
  rc_path_join(path, sizeof path, dir, SHARD);
  hid_t fid = __real_H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  CHECK(fid >= 0, "negative control: the replacement shard is not valid HDF5");
  if (fid >= 0) H5Fclose(fid);
  rc = load(dir, &err, &opens);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "corrupt") && !strstr(err.msg, "config"),
        "valid HDF5, wrong bytes: code %d (%s)", rc, err.msg);
  CHECK(opens == 0, "valid HDF5, wrong bytes: libhdf5 opened it %d time(s)", opens);
  printf("valid_other: %d: %s\n", rc, err.msg);

  /* garbage of the same size */
  copy_good(fixtures, root, "garbage", dir, sizeof dir);
  char *garbage = malloc(n_good);
  if (!garbage) return 1;
  uint32_t x = 12345;
  for (size_t i = 0; i < n_good; i++) garbage[i] = (char)((x = x * 1664525u + 1013904223u) >> 24);
  put(dir, SHARD, garbage, n_good);
  rc = load(dir, &err, &opens);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "corrupt"), "garbage: code %d (%s)", rc, err.msg);
  CHECK(opens == 0, "garbage: libhdf5 opened it %d time(s)", opens);
  printf("garbage: %d: %s\n", rc, err.msg);

  /* garbage, with the manifest's shard entry removed and COMPLETE forged */
  copy_good(fixtures, root, "entry_removed", dir, sizeof dir);
  put(dir, SHARD, garbage, n_good);
  size_t n_text;
  char *text = slurp(dir, "manifest.json", &n_text);
  char *shards = strstr(text, "\"shards\": [");
  char *version = strstr(text, "\"version\"");
  CHECK(shards && version && version > shards, "manifest layout not as documented");
  if (shards && version && version > shards) {
    char *t2 = malloc(strlen(text) + 32);
    if (!t2) return 1;
    int pre = (int)(shards - text);
    snprintf(t2, strlen(text) + 32, "%.*s\"shards\": [],\n  %s", pre, text, version);
    forge_manifest(dir, t2);
    rc = load(dir, &err, &opens);
    CHECK(rc == RC_EXIT_DATAERR, "entry removed: code %d (%s)", rc, err.msg);
    CHECK(opens == 0, "entry removed: libhdf5 opened it %d time(s)", opens);
    printf("entry_removed: %d: %s\n", rc, err.msg);
    free(t2);
  }

  /* the limit: a forger who rewrites the entry gets past the hash; garbage
   * is still refused by the superblock check, before libhdf5 */
  copy_good(fixtures, root, "forged", dir, sizeof dir);
  put(dir, SHARD, garbage, n_good);
  char good_sha[RC_SHA256_HEX], bad_sha[RC_SHA256_HEX];
  rc_sha256_hex(good_shard, n_good, good_sha);
  rc_sha256_hex(garbage, n_good, bad_sha);
  free(text);
  text = slurp(dir, "manifest.json", &n_text);
  replace(&text, good_sha, bad_sha);
  forge_manifest(dir, text);
  rc = load(dir, &err, &opens);
  CHECK(rc == RC_EXIT_DATAERR && opens == 0 && strstr(err.msg, "superblock"),
        "forged entry, garbage: code %d, %d H5Fopen (%s)", rc, opens, err.msg);
  printf("forged garbage (past the hash, not parsed): %d: %s\n", rc, err.msg);

  /* ... and a well-formed forged shard reaches libhdf5 and /meta */
  copy_good(fixtures, root, "forged_valid", dir, sizeof dir);
  put(dir, SHARD, valid, n_other);
  rc_sha256_hex(valid, n_other, bad_sha);
  free(text);
  text = slurp(dir, "manifest.json", &n_text);
  replace(&text, good_sha, bad_sha);
  forge_manifest(dir, text);
  rc = load(dir, &err, &opens);
  CHECK(rc == RC_EXIT_DATAERR && opens >= 1 && strstr(err.msg, "config mismatch"),
        "forged entry, valid shard: code %d, %d H5Fopen (%s)", rc, opens, err.msg);
  printf("forged valid shard (reaches libhdf5 by design): %d: %s\n", rc, err.msg);

  free(text);
  free(garbage);
  free(valid);
  free(good_shard);
  if (g_fails == 0) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", root);
    printf("ok\n");
    return 0;
  }
  fprintf(stderr, "%d check(s) failed; files kept in %s\n", g_fails, root);
  return 1;
}
