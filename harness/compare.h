/* compare.h — byte-exact comparison of checkpoints, shards and run
 * directories (docs/design.md §7), and of per-step traces (docs/design.md §6).
 *
 * Before any verdict every shard a manifest lists is read and its bytes
 * checked against the manifest's whole-file SHA-256, both sides, in one
 * parallel pass: a shard that does not match is a corrupt checkpoint
 * (RC_EXIT_DATAERR, naming it). Then two verified manifests that give a
 * shard the same SHA-256 settle the pair; other pairs are compared as bytes.
 * trust_manifests skips the verification (the old fast path: equal
 * manifests settle shards without reading them, and the result says so).
 * Slow path, per dataset in sorted path order: presence, dtype, shape,
 * attributes, raw bytes; for a differing float dataset, the count of
 * differing elements, the first differing index, max |a-b|, max relative
 * difference, max ULP distance, and NaN-payload / signed-zero differences
 * named as such. Foreign HDF5 files are bounded first (h5_bounds.h).
 * .npy, .npz and safetensors files are compared tensor by tensor with the
 * same numbers (compare_tensors.c). Other files are compared byte for
 * byte: how many bytes differ and in which ranges (compare_bytes.c). args.json differs by
 * construction: it is reported, never failed. */
#ifndef RC_HARNESS_COMPARE_H
#define RC_HARNESS_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "base/json.h"

typedef enum {
  RC_DIFF_NONE = 0,
  RC_DIFF_MISSING_IN_A, /* file or dataset only in B */
  RC_DIFF_MISSING_IN_B, /* only in A */
  RC_DIFF_DTYPE,        /* dtype differs (values may be equal) */
  RC_DIFF_SHAPE,
  RC_DIFF_ATTRIBUTE,    /* an attribute is missing, extra or different */
  RC_DIFF_VALUES,       /* same dtype and shape, different bytes */
  RC_DIFF_BYTES,        /* a non-HDF5 file differs */
  RC_DIFF_SHA256,       /* SHA-256 differs where one side kept hashes only (a through leg's
                           --save-hashes-at): the values were not compared, they do not exist */
  RC_DIFF_INFORMATIONAL /* differs by construction (args.json): reported, not failed */
} rc_diff_kind;

#define RC_DIFF_MAX_RANGES 8 /* byte ranges listed per differing file */

typedef struct {
  rc_diff_kind kind;
  char file[512];   /* relative to the compared roots, "" when comparing two files */
  char object[512]; /* dataset or attribute path inside the file, "" for whole files */
  char detail[512]; /* human-readable: "float32[64,64] vs float32[64,32]" ... */
  /* RC_DIFF_VALUES only: */
  int64_t n_elements, n_different, first_index;
  double max_abs, max_rel;
  double max_mag; /* the largest |value| of either side among the differing elements: the
                     scale max_abs is measured against (run --noise calibrated) */
  double sum_sq;  /* floats: the sum of (a-b)^2 over the differing elements, NaN and
                     sign-of-zero cases left out (run --noise calibrated's RMS difference) */
  uint64_t max_ulp;
  int64_t n_signed_zero_only; /* elements equal but for the sign of zero */
  int64_t n_nan_payload_only; /* both NaN, different payloads */
  int64_t n_nan_mismatch;     /* NaN on one side only */
  /* RC_DIFF_BYTES of two files compared as bytes (not HDF5, not decoded as
   * tensors), when have_bytes: their sizes, the bytes that differ over the
   * common prefix (min of the sizes), and the maximal runs of differing
   * bytes, [start, end) offsets, adjacent bytes merged: n_ranges in all, the
   * first n_ranges_listed of them in ranges. */
  bool have_bytes;
  int64_t size_a, size_b, n_bytes_different, n_ranges;
  int n_ranges_listed;
  struct {
    int64_t start, end;
  } ranges[RC_DIFF_MAX_RANGES];
} rc_diff;

typedef struct {
  int n_files_compared, n_files_identical; /* byte-identical: bytes compared, or both sides
                                              verified against equal manifest hashes */
  int n_datasets_compared;
  int n_shards_verified;  /* shard files whose bytes were hashed and match their manifest */
  int64_t bytes_verified; /* the bytes those shards hold */
  int n_by_manifest;      /* trust_manifests only: pairs equal by manifests, bytes not read */
  int n_ignored;          /* files, iterations, legs, objects skipped by --ignore */
  int64_t n_trace_steps;  /* trace steps compared */
  bool nothing_compared;  /* no failing difference, but only because --ignore left nothing */
  bool fast_path;         /* trust_manifests and every shard pair settled by manifests, none read */
  /* shard pairs where a side is a hashes-only checkpoint (manifest.json
   * "hashes_only": true, no shard file): decided by SHA-256 alone, the
   * other side's dataset hashes computed from its verified bytes */
  int n_hashes_only;
  bool hashes_only_a, hashes_only_b; /* that side had a hashes-only checkpoint */
  /* PyTorch units compared by content (compare_torch.c): DCP directories and
   * torch.save file pairs whose bytes differ; and how many had no failing
   * difference */
  int n_by_content, n_by_content_equal;
  rc_diff *diffs; /* every difference found, informational ones included */
  int n_diffs, cap_diffs;
  int n_failing; /* diffs that are not RC_DIFF_INFORMATIONAL */
} rc_compare_result;

/* What a checkpoint directory must hold (--checkpoint-format): AUTO takes
 * what it finds; the others refuse (65) a checkpoint of another format, so
 * a CI gate cannot pass on a directory the trainer did not mean to write. */
typedef enum {
  RC_CKPT_FORMAT_AUTO = 0,
  RC_CKPT_FORMAT_RESUMECHECK, /* HDF5 shards and manifest.json */
  RC_CKPT_FORMAT_DCP,         /* torch.distributed.checkpoint: .metadata and *.distcp */
  RC_CKPT_FORMAT_TORCH_SAVE   /* one or more torch.save files (.pt, .pth, .bin, .ckpt) */
} rc_ckpt_format;
/* "auto", "resumecheck", "dcp", "torch-save": the flag's choices, in order */
extern const char *const RC_CKPT_FORMAT_NAMES[];

typedef struct {
  const char **ignore; /* glob patterns (fnmatch) on "file" or "file:object"; may be NULL */
  int n_ignore;
  bool deep;             /* compare datasets even when manifests / file hashes agree */
  bool trust_manifests;  /* do not read shards whose manifests agree (and do not verify any) */
  rc_ckpt_format format; /* what each checkpoint directory must hold */
} rc_compare_opts;

/* a and b: two checkpoint iter directories, two shard files, or two run
 * directories (then every ckpt/iter_* present in either is compared, plus
 * trace.csv). Returns RC_OK with the result filled (identical or not), or an
 * error code when an input is missing or unreadable. */
int rc_compare_paths(const char *a, const char *b, const rc_compare_opts *opts,
                     rc_compare_result *res, rc_err *err);
void rc_compare_result_free(rc_compare_result *res);
/* Human-readable listing of the differences (at most max_lines lines). */
void rc_compare_print(const rc_compare_result *res, FILE *out, int max_lines);
/* One difference on one line, with compare's own detail (NaN, ULP, byte
 * ranges): "OBJECT in FILE (KIND: DETAIL)". run's and bisect's summaries. */
void rc_diff_describe(const rc_diff *d, char *buf, size_t cap);
const char *rc_diff_kind_name(rc_diff_kind k);
/* The byte fields of d (d->have_bytes) as JSON members of the object being
 * written: size_a, size_b, n_bytes_different, n_ranges, ranges [[start,
 * end], ...] (the first RC_DIFF_MAX_RANGES). compare --json and run's
 * report.json both write them with this. */
void rc_diff_json_bytes(rc_jw *w, const rc_diff *d);

/* ---- traces (trace.csv, documented in docs/trace.md) ---- */
typedef struct {
  bool comparable;          /* headers agree and both parsed */
  int64_t steps_compared;   /* steps present in both */
  int64_t first_step;       /* first step whose row differs, -1 if none */
  char columns[1024];       /* differing columns at first_step, comma-separated, header order,
                               "_hex" stripped ("grad_norm,fp_main_grad") */
  char equal_columns[1024]; /* columns equal at first_step (e.g. "loss,...") */
  char a_values[1024], b_values[1024]; /* the differing columns' decimal values at first_step */
} rc_trace_diff;

int rc_trace_compare(const char *trace_a, const char *trace_b, rc_trace_diff *out, rc_err *err);

#endif
