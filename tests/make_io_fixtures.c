/* make_io_fixtures.c — writes the checkpoint fixtures in fixtures/io/: one
 * good checkpoint and one per rejection the loader must make, each a
 * CASE/iter_0000005/ directory.
 *
 * The damaged cases that sit behind the hash check (missing dataset, wrong
 * shape or dtype, unknown version, config and world-size mismatch) are real
 * saves of a different state, so their manifests are consistent with their
 * bytes and the check that fires is the one named, not the hash. The rest
 * are the good checkpoint with one thing broken after the save.
 *
 *   make_io_fixtures OUTDIR       regenerate (OUTDIR must not exist)
 *   make_io_fixtures --hdf5-version
 * The fixtures are committed; io_fixtures_regen checks this program still
 * reproduces them byte for byte (a cross-process, cross-time determinism
 * check), and skips when the HDF5 library version differs. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/fsutil.h"
#include "io/checkpoint.h"
#include "io_fixture_state.h"

/* snprintf that treats truncation as a bug. */
__attribute__((format(printf, 3, 4))) static void pathf(char *out, size_t cap, const char *fmt,
                                                        ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, cap, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= cap) {
    fprintf(stderr, "make_io_fixtures: path does not fit in %zu bytes\n", cap);
    abort();
  }
}

static int die(const char *what, const rc_err *err) {
  fprintf(stderr, "make_io_fixtures: %s: %s\n", what, err ? err->msg : strerror(errno));
  return 1;
}

static int save(const char *out, const char *name, unsigned flags, int version, int world_size,
                const char *config) {
  char root[4096];
  rc_path_join(root, sizeof root, out, name);
  iofix f;
  iofix_build(&f, flags, 3);
  rc_err err = {0};
  int rc = 0;
  for (int r = 0; r < world_size && !rc; r++) {
    rc_shard_meta m = iofix_meta(r, world_size, config);
    m.format_version = version;
    /* The committed fixtures are version-1 manifests (no chunk hashes), as
     * saves before chunk hashes wrote them: they prove the loader still
     * reads those, and the shard bytes did not change. */
    m.chunk_bytes = RC_CHUNKS_NONE;
    rc = rc_checkpoint_save(root, &m, &f.st, r == 0 ? "{\"leg\":\"fixture\"}\n" : NULL, &err);
  }
  if (!rc && world_size > 1) {
    char dir[4096];
    pathf(dir, sizeof dir, "%s/iter_%07d", root, IOFIX_ITERATION);
    rc = rc_checkpoint_finalize(dir, world_size, IOFIX_ITERATION, &err);
  }
  iofix_free(&f);
  return rc ? die(name, &err) : 0;
}

static void path_of(char *buf, size_t cap, const char *out, const char *name, const char *file) {
  pathf(buf, cap, "%s/%s/iter_%07d/%s", out, name, IOFIX_ITERATION, file);
}

/* Copies the good checkpoint to `name` so it can be damaged. */
static int copy_good(const char *out, const char *name) {
  static const char *files[] = {"shard_00000_of_00001.h5", "manifest.json", "args.json",
                                "COMPLETE"};
  char dir[4096], src[4096], dst[4096];
  pathf(dir, sizeof dir, "%s/%s/iter_%07d", out, name, IOFIX_ITERATION);
  rc_err err = {0};
  if (rc_mkdir_p(dir, &err)) return die(dir, &err);
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char *data;
    size_t n;
    path_of(src, sizeof src, out, "good", files[i]);
    path_of(dst, sizeof dst, out, name, files[i]);
    if (rc_read_file(src, &data, &n, &err)) return die(src, &err);
    int rc = rc_write_file_atomic(dst, data, n, &err);
    free(data);
    if (rc) return die(dst, &err);
  }
  return 0;
}

static int rewrite(const char *out, const char *name, const char *file,
                   void (*edit)(char **data, size_t *n)) {
  char path[4096];
  path_of(path, sizeof path, out, name, file);
  char *data;
  size_t n;
  rc_err err = {0};
  if (rc_read_file(path, &data, &n, &err)) return die(path, &err);
  edit(&data, &n);
  int rc = rc_write_file_atomic(path, data, n, &err);
  free(data);
  return rc ? die(path, &err) : 0;
}

static int remove_file(const char *out, const char *name, const char *file) {
  char path[4096];
  path_of(path, sizeof path, out, name, file);
  return unlink(path) ? die(path, NULL) : 0;
}

static void truncate_half(char **data, size_t *n) {
  (void)data;
  *n /= 2;
}

static void append_bytes(char **data, size_t *n) {
  char *p = realloc(*data, *n + 16);
  if (!p) abort();
  memset(p + *n, 0, 16);
  *data = p;
  *n += 16;
}

/* Flips one bit in the raw data of the embedding, found by its bytes. */
static void flip_data_byte(char **data, size_t *n) {
  iofix f;
  iofix_build(&f, 0, 3);
  const rc_tensor *t = rc_state_find(&f.st, "/model/embedding/weight");
  size_t len = rc_tensor_nbytes(t);
  for (size_t i = 0; i + len <= *n; i++)
    if (!memcmp(*data + i, t->data, len)) {
      (*data)[i + 40] ^= 0x01;
      break;
    }
  iofix_free(&f);
}

/* One hex digit of the shard hash changed: the manifest no longer matches
 * the SHA-256 that COMPLETE holds. */
static void tamper_manifest(char **data, size_t *n) {
  char *p = strstr(*data, "\"sha256\": \"");
  if (p && (size_t)(p - *data) + 12 < *n) p[11] = p[11] == '0' ? '1' : '0';
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--hdf5-version")) {
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);
    printf("%u.%u.%u\n", maj, min, rel);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: make_io_fixtures OUTDIR | --hdf5-version\n");
    return 64;
  }
  const char *out = argv[1];
  if (rc_path_exists(out)) {
    fprintf(stderr, "make_io_fixtures: %s exists; give a new directory\n", out);
    return 64;
  }
  int rc = 0;
  rc |= save(out, "good", 0, RC_SHARD_FORMAT_VERSION, 1, IOFIX_CONFIG);
  rc |= save(out, "missing_dataset", IOFIX_DROP, RC_SHARD_FORMAT_VERSION, 1, IOFIX_CONFIG);
  rc |= save(out, "unexpected_dataset", IOFIX_EXTRA, RC_SHARD_FORMAT_VERSION, 1, IOFIX_CONFIG);
  rc |= save(out, "wrong_shape", IOFIX_WRONG_SHAPE, RC_SHARD_FORMAT_VERSION, 1, IOFIX_CONFIG);
  rc |= save(out, "wrong_dtype", IOFIX_WRONG_DTYPE, RC_SHARD_FORMAT_VERSION, 1, IOFIX_CONFIG);
  rc |= save(out, "unknown_version", 0, 99, 1, IOFIX_CONFIG);
  rc |= save(out, "config_mismatch", 0, RC_SHARD_FORMAT_VERSION, 1, IOFIX_CONFIG_LR2);
  rc |= save(out, "world_size_mismatch", 0, RC_SHARD_FORMAT_VERSION, 2, IOFIX_CONFIG);
  if (rc) return 1;
  const char *shard = "shard_00000_of_00001.h5";
  rc |= copy_good(out, "truncated") || rewrite(out, "truncated", shard, truncate_half);
  rc |= copy_good(out, "trailing_data") || rewrite(out, "trailing_data", shard, append_bytes);
  rc |= copy_good(out, "flipped_byte") || rewrite(out, "flipped_byte", shard, flip_data_byte);
  rc |= copy_good(out, "manifest_tampered") ||
        rewrite(out, "manifest_tampered", "manifest.json", tamper_manifest);
  rc |= copy_good(out, "no_complete") || remove_file(out, "no_complete", "COMPLETE");
  rc |= copy_good(out, "no_manifest") || remove_file(out, "no_manifest", "manifest.json");
  rc |= copy_good(out, "missing_shard") || remove_file(out, "missing_shard", shard);
  if (rc) return 1;
  unsigned maj, min, rel;
  H5get_libversion(&maj, &min, &rel);
  char path[4096], ver[64];
  pathf(ver, sizeof ver, "%u.%u.%u\n", maj, min, rel);
  size_t n = strlen(ver);
  rc_err err = {0};
  rc_path_join(path, sizeof path, out, "HDF5_VERSION");
  if (rc_write_file_atomic(path, ver, n, &err)) return die(path, &err);
  return 0;
}
