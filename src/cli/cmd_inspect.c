/* cmd_inspect.c — `resumecheck inspect SHARD.h5`: list a shard's /meta and
 * every dataset with dtype, shape and the SHA-256 of its raw bytes (the same
 * hashes manifest.json records), without needing the manifest. Any HDF5 file
 * may be given, so its claims are bounded first (harness/h5_bounds.h): a
 * file declaring more than it holds is refused (65) before anything is read
 * or allocated for it. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"
#include "harness/h5_bounds.h"
#include "io/checkpoint.h"

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: resumecheck inspect SHARD.h5\n"
      "\n"
      "Prints the shard's size and SHA-256, its /meta attributes (format, version, rank,\n"
      "world size, iteration, config and its hash) and every dataset in path order with\n"
      "dtype, shape and the SHA-256 of its raw little-endian bytes. Works on any HDF5 file;\n"
      "/meta is reported as absent when the file is not a resumecheck shard. A file whose\n"
      "superblock points outside it, or whose datasets declare more bytes than it holds\n"
      "(e.g. a never-written 1 TiB dataset in a 2 KiB file), is refused before it is read.\n"
      "\n"
      "Exit codes: 0 listed, 64 usage, 65 not a readable HDF5 file (or one that claims more\n"
      "than it holds), 66 no such file, 70 internal error (e.g. out of memory), 74 I/O error.\n");
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
  int rc = rc_h5_check_file(path, &err);
  if (!rc) rc = rc_shard_inspect(path, stdout, &err);
  if (rc) fprintf(stderr, "resumecheck inspect: %s\n", err.msg);
  return rc;
}
