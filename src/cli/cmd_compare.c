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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/flags.h"
#include "base/fsutil.h"
#include "base/json.h"
#include "cli/cli.h"
#include "harness/compare.h"
#include "harness/schema.h"

#define MAX_IGNORE 64

static const char USAGE[] =
    "usage: resumecheck compare A B [--ignore PATTERN]... [--deep | --trust-manifests]\n"
    "                               [--checkpoint-format FORMAT] [--json FILE] [--max-lines N]\n"
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
    "\n";

static const char EPILOGUE[] =
    "\n"
    "exit: 0 identical, 1 different, 64 usage (bad, unknown or repeated flag), 65\n"
    "unreadable/corrupt input, 66 missing input or nothing compared (--ignore matched\n"
    "everything), 70 internal error (e.g. out of memory), 74 I/O error (e.g. --json cannot\n"
    "be written)\n";

typedef struct {
  const char *ignore[MAX_IGNORE];
  int n_ignore, max_lines;
  bool deep, trust;
  int format; /* index into RC_CKPT_FORMAT_NAMES */
  const char *json;
} compare_flags;

static int add_ignore(void *target, const char *flag, const char *v, rc_err *err) {
  compare_flags *c = target;
  if (c->n_ignore == MAX_IGNORE)
    return rc_fail(err, RC_EXIT_USAGE, "%s: at most %d patterns", flag, MAX_IGNORE);
  c->ignore[c->n_ignore++] = v;
  return 0;
}

#define C(flag, kind_, field, lo, hi, mv, help_)                                                   \
  {                                                                                                \
    .name = flag, .kind = kind_, .offset = offsetof(compare_flags, field), .min = lo, .max = hi,   \
    .metavar = mv, .help = help_                                                                   \
  }

static const rc_flag_spec COMPARE_FLAGS[] = {
    {.name = "--ignore",
     .kind = RC_FLAG_STRING,
     .set = add_ignore,
     .tags = RC_FLAG_REPEATABLE,
     .metavar = "PATTERN",
     .help = "skip what matches (fnmatch) \"FILE\" or \"FILE:OBJECT\",\n"
             "e.g. 'ckpt/*/args.json' or '*:/optimizer/*'; repeatable"},
    C("--deep", RC_FLAG_BOOL, deep, 0, 0, NULL,
      "compare datasets even when manifests or file bytes agree"),
    C("--trust-manifests", RC_FLAG_BOOL, trust, 0, 0, NULL,
      "do not read shards: equal manifests settle them unread (the\n"
      "summary says \"manifests identical; shard bytes not read\")"),
    {.name = "--checkpoint-format",
     .kind = RC_FLAG_CHOICE,
     .offset = offsetof(compare_flags, format),
     .size = sizeof(int),
     .choices = RC_CKPT_FORMAT_NAMES,
     .metavar = "FORMAT",
     .help = "what each checkpoint directory must hold: auto (default: what\n"
             "it finds), resumecheck, dcp or torch-save; another is refused (65)"},
    C("--json", RC_FLAG_STRING, json, 0, 0, "FILE",
      "write every difference as JSON (schema " RC_COMPARE_REPORT_SCHEMA ",\n"
      "docs/compare.md)"),
    C("--max-lines", RC_FLAG_INT, max_lines, -1, 1000000, "N",
      "list at most N differences on stdout (default 40; -1: all)"),
};
#undef C

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
    rc_jw_key(w, "max_mag");
    rc_jw_double(w, d->max_mag);
    rc_jw_key(w, "sum_sq");
    rc_jw_double(w, d->sum_sq);
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
  rc_jw_str(&w, RC_COMPARE_REPORT_SCHEMA);
  rc_jw_key(&w, "schema_version");
  rc_jw_int(&w, RC_COMPARE_REPORT_SCHEMA_VERSION);
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

int rc_cmd_compare(int argc, char **argv) {
  compare_flags f = {.max_lines = 40};
  char **paths = calloc((size_t)argc + 1, sizeof *paths);
  if (!paths) return RC_EXIT_SOFTWARE;
  rc_flag_group group = {NULL, COMPARE_FLAGS, (int)(sizeof COMPARE_FLAGS / sizeof COMPARE_FLAGS[0]),
                         &f};
  rc_flag_cmd cmd = {
      .usage = USAGE, .epilogue = EPILOGUE, .groups = &group, .n_groups = 1, .positionals = true};
  rc_flag_args args = {.positional = paths};
  int code;
  bool done = rc_cli_parse("compare", &cmd, argc, argv, &args, &code);
  if (!done && f.json && !*f.json)
    done = true, code = rc_cli_usage_error("compare", false, "--json needs a file name");
  if (!done && args.n_positional != 2) {
    fprintf(stderr, "resumecheck compare: expected two paths (A and B), got %d\n\n",
            args.n_positional);
    rc_flags_print_help(&cmd, stderr);
    done = true, code = RC_EXIT_USAGE;
  }
  const char *a = paths[0], *b = paths[1];
  free(paths);
  if (done) return code;
  if (f.deep && f.trust) {
    fprintf(stderr, "resumecheck compare: --deep reads every shard and --trust-manifests reads "
                    "none: give one of them\n");
    return RC_EXIT_USAGE;
  }
  rc_compare_opts opts = {f.ignore, f.n_ignore, f.deep, f.trust, (rc_ckpt_format)f.format};
  rc_compare_result res;
  rc_err err = {0};
  int rc = rc_compare_paths(a, b, &opts, &res, &err);
  code = rc                     ? rc
         : res.n_failing        ? RC_EXIT_DIVERGED
         : res.nothing_compared ? RC_EXIT_NOINPUT
                                : RC_OK;
  if (rc) {
    fprintf(stderr, "resumecheck compare: %s\n", err.msg);
  } else {
    printf("A: %s\nB: %s\n", a, b);
    rc_compare_print(&res, stdout, f.max_lines);
  }
  if (f.json && rc != RC_EXIT_USAGE) {
    rc_err jerr = {0};
    if (write_json(f.json, a, b, &res, code, rc ? &err : NULL, &jerr)) {
      fprintf(stderr, "resumecheck compare: %s\n", jerr.msg);
      if (!rc) code = jerr.code;
    }
  }
  rc_compare_result_free(&res);
  return code;
}
