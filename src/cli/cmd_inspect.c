/* cmd_inspect.c — `resumecheck inspect SHARD.h5`: list a shard's /meta and
 * every dataset with dtype, shape and the SHA-256 of its raw bytes (the same
 * hashes manifest.json records), without needing the manifest. Any HDF5 file
 * may be given, so its claims are bounded first (harness/h5_bounds.h): a
 * file declaring more than it holds is refused (65) before anything is read
 * or allocated for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/flags.h"
#include "cli/cli.h"
#include "harness/h5_bounds.h"
#include "base/fsutil.h"
#include "io/checkpoint.h"
#include "io/layout.h"
#include "io/manifest.h"

static const char USAGE[] =
    "usage: resumecheck inspect SHARD.h5 | ITER_DIR\n"
    "\n"
    "Prints the shard's size and SHA-256, its /meta attributes (format, version, rank,\n"
    "world size, iteration, config and its hash) and every dataset in path order with\n"
    "dtype, shape and the SHA-256 of its raw little-endian bytes. Works on any HDF5 file;\n"
    "/meta is reported as absent when the file is not a resumecheck shard. A file whose\n"
    "superblock points outside it, or whose datasets declare more bytes than it holds\n"
    "(e.g. a never-written 1 TiB dataset in a 2 KiB file), is refused before it is read.\n"
    "ITER_DIR: a hashes-only checkpoint (a through leg's `train --save-hashes-at`): says\n"
    "so and lists what its manifest records, as its shards were never written.\n"
    "\n"
    "Exit codes: 0 listed, 64 usage, 65 not a readable HDF5 file (or one that claims more\n"
    "than it holds), 66 no such file, 70 internal error (e.g. out of memory), 74 I/O error.\n";

/* A hashes-only checkpoint has no shard to inspect: what its manifest
 * records is all there is, and that is what it prints (0). */
static int inspect_dir(const char *dir) {
  char path[4096], *text = NULL;
  size_t n = 0;
  rc_err err = {0};
  rc_manifest m;
  rc_path_join(path, sizeof path, dir, RC_MANIFEST_NAME);
  int rc = rc_read_regular_file(path, RC_READ_CAP_JSON, false, &text, &n, &err);
  if (!rc) rc = rc_manifest_parse(text, n, path, &m, &err);
  free(text);
  if (rc) {
    fprintf(stderr, "resumecheck inspect: %s\n", err.msg);
    return rc;
  }
  printf("%s: a hashes-only checkpoint (a through leg's --save-hashes-at): iteration %lld,"
         " world size %d; its shards were built and hashed but never written, so it can be"
         " compared, not loaded. Its manifest records:\n",
         dir, (long long)m.iteration, m.world_size);
  for (int r = 0; r < m.world_size; r++) {
    const rc_mf_shard *s = &m.shards[r];
    /* the save computed no whole-file hash: the chunk hashes cover the bytes */
    printf("shard %s (not on disk): %llu bytes, whole-file sha256 not recorded (hashes only),"
           " %d chunk hash%s of %llu bytes each\n",
           s->file, (unsigned long long)s->bytes, s->nchunks, s->nchunks == 1 ? "" : "es",
           (unsigned long long)s->chunk_bytes);
    for (int i = 0; i < s->ndatasets; i++) {
      const rc_mf_dataset *d = &s->datasets[i];
      char shape[128];
      size_t o = (size_t)snprintf(shape, sizeof shape, "[");
      for (int k = 0; k < d->ndim && o < sizeof shape; k++)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%lld", k ? ", " : "",
                              (long long)d->shape[k]);
      if (o < sizeof shape) snprintf(shape + o, sizeof shape - o, "]");
      printf("  %-8s %-16s %s  %s\n", rc_dtype_name(d->dtype), shape, d->sha256, d->path);
    }
  }
  rc_manifest_free(&m);
  return RC_OK;
}

int rc_cmd_inspect(int argc, char **argv) {
  char **paths = calloc((size_t)argc + 1, sizeof *paths);
  if (!paths) return RC_EXIT_SOFTWARE;
  rc_flag_cmd cmd = {.usage = USAGE, .positionals = true}; /* no flags but --help, --version */
  rc_flag_args args = {.positional = paths};
  int code;
  bool done = rc_cli_parse("inspect", &cmd, argc, argv, &args, &code);
  if (!done && args.n_positional != 1) {
    if (args.n_positional > 1) fprintf(stderr, "resumecheck inspect: one shard at a time\n\n");
    rc_flags_print_help(&cmd, stderr);
    done = true, code = RC_EXIT_USAGE;
  }
  const char *path = paths[0];
  free(paths);
  if (done) return code;
  /* other directories go on to be refused as not a file, as before */
  if (rc_is_dir(path) && rc_checkpoint_is_hashes_only(path)) return inspect_dir(path);
  rc_err err = {0};
  int rc = rc_h5_check_file(path, &err);
  if (!rc) rc = rc_shard_inspect(path, stdout, &err);
  if (rc) fprintf(stderr, "resumecheck inspect: %s\n", err.msg);
  /* a shard of a hashes-only checkpoint was never written: say why */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  if (rc == RC_EXIT_NOINPUT && rc_checkpoint_is_hashes_only(slash ? dir : "."))
    fprintf(stderr,
            "resumecheck inspect: %s holds hashes only: its shards were never written"
            " (`resumecheck inspect %s` lists what its manifest records)\n",
            slash ? dir : ".", slash ? dir : ".");
  return rc;
}
