/* cmd_inspect.c — `resumecheck inspect SHARD.h5`: list a shard's /meta and
 * every dataset with dtype, shape and the SHA-256 of its raw bytes (the same
 * hashes manifest.json records), without needing the manifest. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"
#include "io/checkpoint.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: resumecheck inspect SHARD.h5\n"
          "\n"
          "Prints the shard's size and SHA-256, its /meta attributes (format, version, rank,\n"
          "world size, iteration, config and its hash) and every dataset in path order with\n"
          "dtype, shape and the SHA-256 of its raw little-endian bytes. Works on any HDF5 file;\n"
          "/meta is reported as absent when the file is not a resumecheck shard.\n"
          "\n"
          "Exit codes: 0 listed, 64 usage, 65 not a readable HDF5 file, 66 no such file,\n"
          "70 internal error (e.g. out of memory), 74 I/O error.\n");
}

int rc_cmd_inspect(int argc, char **argv) {
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
    if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "resumecheck inspect: unknown flag '%s'\n\n", argv[i]);
      usage(stderr);
      return RC_EXIT_USAGE;
    }
    if (path) {
      fprintf(stderr, "resumecheck inspect: one shard at a time\n\n");
      usage(stderr);
      return RC_EXIT_USAGE;
    }
    path = argv[i];
  }
  if (!path) {
    usage(stderr);
    return RC_EXIT_USAGE;
  }
  rc_err err = {0};
  int rc = rc_shard_inspect(path, stdout, &err);
  if (rc) fprintf(stderr, "resumecheck inspect: %s\n", err.msg);
  return rc;
}
