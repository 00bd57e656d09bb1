/* cmd_compare.c — `resumecheck compare A B`: two checkpoints, shards, legs or
 * runs, compared byte for byte (harness/compare.h, docs/compare.md).
 *
 * Exit codes are the verdict, so that a CI step or `git bisect run` can use
 * the command as it is: 0 identical (informational differences such as
 * args.json do not count), 1 different, 64 usage, 65 unreadable or corrupt
 * input (a shard whose bytes do not match its manifest included), 66
 * missing input, and also 66 when --ignore left nothing to compare: an
 * empty comparison must not pass, and 64 is kept for what the command line
 * alone shows to be wrong (this depends on what A and B contain). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "base/json.h"
#include "cli/cli.h"
#include "harness/compare.h"

#define MAX_IGNORE 64

static void usage(FILE *out) {
  fprintf(out,
          "usage: resumecheck compare A B [--ignore PATTERN]... [--deep | --trust-manifests]\n"
          "                               [--json FILE] [--max-lines N]\n"
          "\n"
          "Compares two shard files, two checkpoint iteration directories, two checkpoint roots,\n"
          "two leg directories (ckpt/ and trace.csv) or two run directories, byte for byte.\n"
          "Every shard a manifest lists is read first and its bytes verified against the\n"
          "manifest's SHA-256 (all shards of both sides in parallel); a shard that does not\n"
          "match is a corrupt checkpoint (65). Verified equal manifests then settle a pair;\n"
          "other files are compared as bytes. Differing HDF5 shards are explained per dataset\n"
          "(dtype, shape, attributes, count of differing elements, first index, max abs/rel\n"
          "difference, max ULP, sign-of-zero and NaN-payload differences). HDF5 files that\n"
          "claim more than they hold are refused (65). args.json is reported, never failed.\n"
          "See docs/compare.md.\n"
          "\n"
          "  --ignore PATTERN  skip what matches (fnmatch) \"FILE\" or \"FILE:OBJECT\",\n"
          "                    e.g. 'ckpt/*/args.json' or '*:/optimizer/*'; repeatable\n"
          "  --deep            compare datasets even when manifests or file bytes agree\n"
          "  --trust-manifests do not read shards: equal manifests settle them unread (the\n"
          "                    summary says \"manifests identical; shard bytes not read\")\n"
          "  --json FILE       write every difference as JSON (schema resumecheck-compare v1)\n"
          "  --max-lines N     list at most N differences on stdout (default 40; -1: all)\n"
          "\n"
          "exit: 0 identical, 1 different, 64 usage (bad, unknown or repeated flag), 65\n"
          "unreadable/corrupt input, 66 missing input or nothing compared (--ignore matched\n"
          "everything), 70 internal error (e.g. out of memory), 74 I/O error (e.g. --json cannot\n"
          "be written)\n");
}

static void write_diff_json(rc_jw *w, const rc_diff *d) {
  rc_jw_obj_begin(w);
  rc_jw_key(w, "kind");
  rc_jw_str(w, rc_diff_kind_name(d->kind));
  rc_jw_key(w, "failing");
  rc_jw_bool(w, d->kind != RC_DIFF_INFORMATIONAL);
  rc_jw_key(w, "file");
  rc_jw_str(w, d->file);
  rc_jw_key(w, "object");
  rc_jw_str(w, d->object);
  rc_jw_key(w, "detail");
  rc_jw_str(w, d->detail);
  if (d->kind == RC_DIFF_VALUES && d->n_elements > 0) {
    rc_jw_key(w, "n_elements");
    rc_jw_int(w, d->n_elements);
    rc_jw_key(w, "n_different");
    rc_jw_int(w, d->n_different);
    rc_jw_key(w, "first_index");
    rc_jw_int(w, d->first_index);
    rc_jw_key(w, "max_abs");
    rc_jw_double(w, d->max_abs);
    rc_jw_key(w, "max_rel");
    rc_jw_double(w, d->max_rel);
    rc_jw_key(w, "max_ulp");
    rc_jw_uint(w, d->max_ulp);
    rc_jw_key(w, "n_signed_zero_only");
    rc_jw_int(w, d->n_signed_zero_only);
    rc_jw_key(w, "n_nan_payload_only");
    rc_jw_int(w, d->n_nan_payload_only);
    rc_jw_key(w, "n_nan_mismatch");
    rc_jw_int(w, d->n_nan_mismatch);
  } else if (d->first_index >= 0) {
    rc_jw_key(w, "first_index");
    rc_jw_int(w, d->first_index);
  }
  rc_diff_json_bytes(w, d);
  rc_jw_obj_end(w);
}

/* The report: the result when there is one, else the error that stopped it. */
static int write_json(const char *path, const char *a, const char *b, const rc_compare_result *res,
                      int code, const rc_err *cerr, rc_err *err) {
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "schema");
  rc_jw_str(&w, "resumecheck-compare");
  rc_jw_key(&w, "version");
  rc_jw_int(&w, 1);
  rc_jw_key(&w, "a");
  rc_jw_str(&w, a);
  rc_jw_key(&w, "b");
  rc_jw_str(&w, b);
  rc_jw_key(&w, "exit_code");
  rc_jw_int(&w, code);
  rc_jw_key(&w, "verdict");
  rc_jw_str(&w, cerr                    ? "error"
                : res->n_failing        ? "different"
                : res->nothing_compared ? "nothing_compared"
                                        : "identical");
  if (cerr) {
    rc_jw_key(&w, "error");
    rc_jw_str(&w, cerr->msg);
  } else {
    rc_jw_key(&w, "files_compared");
    rc_jw_int(&w, res->n_files_compared);
    rc_jw_key(&w, "files_identical");
    rc_jw_int(&w, res->n_files_identical);
    rc_jw_key(&w, "datasets_compared");
    rc_jw_int(&w, res->n_datasets_compared);
    rc_jw_key(&w, "shards_verified");
    rc_jw_int(&w, res->n_shards_verified);
    rc_jw_key(&w, "bytes_verified");
    rc_jw_int(&w, res->bytes_verified);
    rc_jw_key(&w, "pairs_by_manifest_unread");
    rc_jw_int(&w, res->n_by_manifest);
    if (res->n_hashes_only) { /* only then, so other outputs stay as they were */
      rc_jw_key(&w, "pairs_by_sha256_hashes_only");
      rc_jw_int(&w, res->n_hashes_only);
      rc_jw_key(&w, "hashes_only_sides");
      rc_jw_str(&w, res->hashes_only_a && res->hashes_only_b ? "A,B"
                    : res->hashes_only_a                     ? "A"
                                                             : "B");
    }
    rc_jw_key(&w, "n_ignored");
    rc_jw_int(&w, res->n_ignored);
    rc_jw_key(&w, "fast_path");
    rc_jw_bool(&w, res->fast_path);
    rc_jw_key(&w, "n_failing");
    rc_jw_int(&w, res->n_failing);
    rc_jw_key(&w, "diffs");
    rc_jw_arr_begin(&w);
    for (int i = 0; i < res->n_diffs; i++) write_diff_json(&w, &res->diffs[i]);
    rc_jw_arr_end(&w);
  }
  rc_jw_obj_end(&w);
  char *text = malloc(w.len + 2);
  int rc = RC_OK;
  if (!text) {
    rc = rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  } else {
    memcpy(text, w.buf, w.len);
    text[w.len] = '\n';
    rc = rc_write_output(path, text, w.len + 1, err);
  }
  free(text);
  rc_jw_free(&w);
  return rc;
}

/* "--name VALUE" or "--name=VALUE"; advances *i past what it consumed. */
static const char *flag_value(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n)) return NULL;
  if (argv[*i][n] == '=') return argv[*i] + n + 1;
  if (argv[*i][n] != 0) return NULL;
  if (*i + 1 >= argc) return NULL;
  return argv[++*i];
}

int rc_cmd_compare(int argc, char **argv) {
  const char *paths[2] = {NULL, NULL};
  const char *ignore[MAX_IGNORE];
  int n_paths = 0, n_ignore = 0, max_lines = 40;
  const char *json = NULL;
  bool deep = false, trust = false, seen_max_lines = false;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *v;
    /* every flag but --ignore (repeatable) is given once */
    bool again =
        (!strcmp(arg, "--deep") && deep) || (!strcmp(arg, "--trust-manifests") && trust) ||
        (!strncmp(arg, "--json", 6) && (arg[6] == 0 || arg[6] == '=') && json) ||
        (!strncmp(arg, "--max-lines", 11) && (arg[11] == 0 || arg[11] == '=') && seen_max_lines);
    if (again) {
      fprintf(stderr, "resumecheck compare: %.*s given twice\n", (int)strcspn(arg, "="), arg);
      return RC_EXIT_USAGE;
    }
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      usage(stdout);
      return RC_OK;
    } else if (!strcmp(arg, "--deep")) {
      deep = true;
    } else if (!strcmp(arg, "--trust-manifests")) {
      trust = true;
    } else if (!strncmp(arg, "--ignore", 8) && (arg[8] == 0 || arg[8] == '=')) {
      if (!(v = flag_value(argc, argv, &i, "--ignore")) || n_ignore == MAX_IGNORE) {
        fprintf(stderr, "resumecheck compare: --ignore needs a pattern (at most %d)\n", MAX_IGNORE);
        return RC_EXIT_USAGE;
      }
      ignore[n_ignore++] = v;
    } else if (!strncmp(arg, "--json", 6) && (arg[6] == 0 || arg[6] == '=')) {
      if (!(json = flag_value(argc, argv, &i, "--json")) || !*json) {
        fprintf(stderr, "resumecheck compare: --json needs a file name\n");
        return RC_EXIT_USAGE;
      }
    } else if (!strncmp(arg, "--max-lines", 11) && (arg[11] == 0 || arg[11] == '=')) {
      char *end = NULL;
      v = flag_value(argc, argv, &i, "--max-lines");
      long n = v ? strtol(v, &end, 10) : 0;
      if (!v || !*v || *end || n < -1 || n > 1000000) {
        fprintf(stderr, "resumecheck compare: --max-lines needs an integer >= -1\n");
        return RC_EXIT_USAGE;
      }
      max_lines = (int)n;
      seen_max_lines = true;
    } else if (arg[0] == '-' && arg[1] != 0) {
      fprintf(stderr, "resumecheck compare: unknown flag '%s'\n\n", arg);
      usage(stderr);
      return RC_EXIT_USAGE;
    } else if (n_paths < 2) {
      paths[n_paths++] = arg;
    } else {
      fprintf(stderr, "resumecheck compare: expected two paths, got a third: '%s'\n\n", arg);
      usage(stderr);
      return RC_EXIT_USAGE;
    }
  }
  if (n_paths != 2) {
    fprintf(stderr, "resumecheck compare: expected two paths (A and B)\n\n");
    usage(stderr);
    return RC_EXIT_USAGE;
  }

  if (deep && trust) {
    fprintf(stderr, "resumecheck compare: --deep reads every shard and --trust-manifests reads "
                    "none: give one of them\n");
    return RC_EXIT_USAGE;
  }
  rc_compare_opts opts = {ignore, n_ignore, deep, trust};
  rc_compare_result res;
  rc_err err = {0};
  int rc = rc_compare_paths(paths[0], paths[1], &opts, &res, &err);
  int code = rc                     ? rc
             : res.n_failing        ? RC_EXIT_DIVERGED
             : res.nothing_compared ? RC_EXIT_NOINPUT
                                    : RC_OK;
  if (rc) {
    fprintf(stderr, "resumecheck compare: %s\n", err.msg);
  } else {
    printf("A: %s\nB: %s\n", paths[0], paths[1]);
    rc_compare_print(&res, stdout, max_lines);
  }
  if (json && rc != RC_EXIT_USAGE) {
    rc_err jerr = {0};
    if (write_json(json, paths[0], paths[1], &res, code, rc ? &err : NULL, &jerr)) {
      fprintf(stderr, "resumecheck compare: %s\n", jerr.msg);
      if (!rc) code = jerr.code;
    }
  }
  rc_compare_result_free(&res);
  return code;
}
