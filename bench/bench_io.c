/* bench_io.c — times the checkpoint writer, loader and file hashing on a
 * large state, for bench_io.sh (which times dd, openssl and sha256sum on the
 * same disk and prints the ratios). Not a test.
 *
 *   bench_io save ROOT BYTES     build a BYTES-sized float32 state in 64 MiB
 *                                tensors and time rc_checkpoint_save
 *   bench_io hashsave ROOT BYTES the same as a hashes-only save
 *                                (rc_shard_meta.hashes_only: no shard written,
 *                                no whole-file hash)
 *   bench_io load ITER_DIR BYTES time rc_checkpoint_load of that state
 *   bench_io hash FILE           time rc_sha256_file
 *   bench_io memhash BYTES       time rc_sha256_hex over memory (the CPU bound)
 * Each prints "seconds=S" and a few facts on stdout; the saves also the
 * process's CPU seconds over the save ("cpu_s=", every thread), which a
 * busy machine disturbs less than wall time. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "io/checkpoint.h"
#include "io/sha256.h"

enum { TENSOR_BYTES = 64 << 20 };

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Noise, not zeros: the bytes should look like trained weights to anything
 * between us and the disk. */
static void build_state(rc_state *s, size_t bytes, bool fill, void ***bufs, int *n) {
  int count = (int)((bytes + TENSOR_BYTES - 1) / TENSOR_BYTES);
  *bufs = calloc((size_t)count, sizeof **bufs);
  *n = count;
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < count; i++) {
    size_t nb = bytes - (size_t)i * TENSOR_BYTES;
    if (nb > TENSOR_BYTES) nb = TENSOR_BYTES;
    uint64_t *p = malloc(nb);
    if (!p) {
      fprintf(stderr, "bench_io: out of memory\n");
      exit(1);
    }
    for (size_t k = 0; fill && k < nb / 8; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      p[k] = x;
    }
    if (!fill) memset(p, 0, nb);
    char path[RC_PATH_MAX];
    snprintf(path, sizeof path, "/model/decoder/layers/%d/mlp/fc1/weight", i);
    int64_t shape[2] = {(int64_t)(nb / 4 / 1024), 1024};
    rc_state_add(s, path, RC_DT_F32, 2, shape, p);
    (*bufs)[i] = p;
  }
}

/* user + system CPU seconds of the process so far, all threads */
static double cpu_now(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
         1e-6 * (double)u.ru_stime.tv_usec;
}

static rc_shard_meta meta(void) {
  rc_shard_meta m = {.format_version = RC_SHARD_FORMAT_VERSION,
                     .rank = 0,
                     .world_size = 1,
                     .iteration = 1000,
                     .config_json = "{\"bench\":true}"};
  return m;
}

int main(int argc, char **argv) {
  rc_err err = {0};
  if (argc == 4 &&
      (!strcmp(argv[1], "save") || !strcmp(argv[1], "hashsave") || !strcmp(argv[1], "load"))) {
    bool save = strcmp(argv[1], "load") != 0;
    size_t bytes = (size_t)strtoull(argv[3], NULL, 10);
    rc_state s = {0};
    void **bufs;
    int n;
    build_state(&s, bytes, save, &bufs, &n);
    rc_shard_meta m = meta();
    m.hashes_only = !strcmp(argv[1], "hashsave");
    double c0 = cpu_now(), t0 = now();
    int rc = save ? rc_checkpoint_save(argv[2], &m, &s, NULL, &err)
                  : rc_checkpoint_load(argv[2], &m, &s, &err);
    double t = now() - t0, cpu = cpu_now() - c0;
    if (rc) {
      fprintf(stderr, "bench_io %s: %s\n", argv[1], err.msg);
      return rc;
    }
    printf("seconds=%.3f tensors=%d bytes=%zu GiB/s=%.3f cpu_s=%.3f\n", t, n, bytes,
           (double)bytes / t / (1 << 30), cpu);
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    rc_state_free(&s);
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "hash")) {
    char hex[RC_SHA256_HEX];
    double t0 = now();
    int rc = rc_sha256_file(argv[2], hex, &err);
    double t = now() - t0;
    if (rc) {
      fprintf(stderr, "bench_io hash: %s\n", err.msg);
      return rc;
    }
    printf("seconds=%.3f sha256=%s\n", t, hex);
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "memhash")) {
    size_t bytes = (size_t)strtoull(argv[2], NULL, 10);
    unsigned char *p = malloc(bytes);
    if (!p) return 1;
    memset(p, 0x5a, bytes);
    char hex[RC_SHA256_HEX];
    double t0 = now();
    rc_sha256_hex(p, bytes, hex);
    double t = now() - t0;
    printf("seconds=%.3f GiB/s=%.3f\n", t, (double)bytes / t / (1 << 30));
    free(p);
    return 0;
  }
  fprintf(stderr, "usage: bench_io save ROOT BYTES | hashsave ROOT BYTES | load ITER_DIR BYTES |"
                  " hash FILE | memhash BYTES\n");
  return 64;
}
