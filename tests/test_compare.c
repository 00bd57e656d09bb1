/* test_compare.c — `resumecheck compare` and rc_trace_compare on crafted
 * inputs: HDF5 pairs built here with the HDF5 API, each differing in exactly
 * one known way, so every assertion can name the exact kind and numbers.
 * Every case that must find a difference has a twin that must not (the
 * identical pair, the same pair with --ignore), and every case checks the
 * CLI's exit code as well as the library's result.
 *
 * `test_compare --make-pairs DIR` only writes the pairs (DIR/<case>/a.h5,
 * b.h5) for compare_h5diff.sh, which records what h5diff does with them;
 * `--make-sparse DIR` writes DIR/sparse/ (files declaring a never-written
 * 1 TiB dataset) for hostile_compare.sh. */
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/compare.h"
#include "io/h5_type.h"
#include "io/sha256.h"

#include "check.h"

/* Every HDF5 call in the fixtures must succeed; a failure here is a broken
 * test, not a finding. */
#define H5_CHECK(call)                                                                             \
  do {                                                                                             \
    if ((call) < 0) {                                                                              \
      fprintf(stderr, "%s:%d: HDF5 call failed: %s\n", __FILE__, __LINE__, #call);                 \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* ------------------------------------------------------------------ fixtures */

typedef enum {
  V_BASE,
  V_FLIP_F32,      /* w[1,3] (flat 11): lowest mantissa bit flipped -> 1 ULP */
  V_FLIP_F64,      /* b[2]: mantissa bit 20 flipped -> 2^20 ULP */
  V_NEG_ZERO,      /* b[1] = -0.0 instead of +0.0 */
  V_NAN_A,         /* w[0] = NaN 0x7fc00000 */
  V_NAN_B,         /* w[0] = NaN 0x7fc00001 (payload differs from V_NAN_A) */
  V_NAN_ONE_SIDE,  /* w[5] = NaN where the base has 1.5 */
  V_SHAPE,         /* w is [4,4]: its first 16 values */
  V_DTYPE,         /* b stored as float32, same (exactly representable) values */
  V_MISSING_EXTRA, /* no /model/b; an extra /model/extra */
  V_ATTR,          /* /meta@iteration = 6 instead of 5 */
  V_LAYOUT,        /* w chunked instead of contiguous: other bytes, same content */
  V_BE,            /* w stored big-endian, same values */
  V_BE_FLIP,       /* w stored big-endian, w[11] flipped as in V_FLIP_F32 */
  V_NOTE,          /* /meta@note (a variable-length string) is "lr=3e-4" not "lr=1e-4" */
  V_SIGN_FLIP,     /* b[0] = -1.5 instead of 1.5: the ULP distance crosses zero */
} variant;

static float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static void base_w(float w[32]) {
  for (int i = 0; i < 32; i++) w[i] = (float)(i + 1) * 0.25f;
}

static const double base_b[3] = {1.5, 0.0, -2.25};

static hid_t dcpl_no_times(void) {
  hid_t p = H5Pcreate(H5P_DATASET_CREATE);
  H5_CHECK(p);
  H5_CHECK(H5Pset_obj_track_times(p, 0));
  return p;
}

static void put(hid_t file, const char *path, hid_t ftype, hid_t mtype, int ndim,
                const hsize_t *dims, const void *data, const hsize_t *chunk) {
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5_CHECK(lcpl);
  H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1));
  hid_t dcpl = dcpl_no_times();
  if (chunk) H5_CHECK(H5Pset_chunk(dcpl, ndim, chunk));
  hid_t space = ndim ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR);
  H5_CHECK(space);
  hid_t d = H5Dcreate2(file, path, ftype, space, lcpl, dcpl, H5P_DEFAULT);
  H5_CHECK(d);
  H5_CHECK(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
  H5_CHECK(H5Dclose(d));
  H5_CHECK(H5Sclose(space));
  H5_CHECK(H5Pclose(dcpl));
  H5_CHECK(H5Pclose(lcpl));
}

static void attr_i64(hid_t obj, const char *name, int64_t v) {
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  H5_CHECK(a);
  H5_CHECK(H5Awrite(a, H5T_NATIVE_INT64, &v));
  H5_CHECK(H5Aclose(a));
  H5_CHECK(H5Sclose(s));
}

static void attr_str(hid_t obj, const char *name, const char *v) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5_CHECK(t);
  H5_CHECK(H5Tset_size(t, strlen(v)));
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5_CHECK(a);
  H5_CHECK(H5Awrite(a, t, v));
  H5_CHECK(H5Aclose(a));
  H5_CHECK(H5Sclose(s));
  H5_CHECK(H5Tclose(t));
}

static void attr_vlen_str(hid_t obj, const char *name, const char *v) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5_CHECK(t);
  H5_CHECK(H5Tset_size(t, H5T_VARIABLE));
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5_CHECK(a);
  H5_CHECK(H5Awrite(a, t, &v));
  H5_CHECK(H5Aclose(a));
  H5_CHECK(H5Sclose(s));
  H5_CHECK(H5Tclose(t));
}

/* A small shard: /meta (attributes), /model/w float32[4,8], /model/b
 * float64[3], /optimizer/step int64 scalar; `v` changes one thing. Time
 * tracking is off so equal content gives equal bytes. */
static void write_shard(const char *path, variant v) {
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  H5_CHECK(fcpl);
  H5_CHECK(H5Pset_obj_track_times(fcpl, 0));
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  H5_CHECK(f);
  hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  H5_CHECK(H5Pset_obj_track_times(gcpl, 0));
  hid_t meta = H5Gcreate2(f, "/meta", H5P_DEFAULT, gcpl, H5P_DEFAULT);
  H5_CHECK(meta);
  attr_str(meta, "format", "resumecheck-shard");
  attr_i64(meta, "iteration", v == V_ATTR ? 6 : 5);
  attr_vlen_str(meta, "note", v == V_NOTE ? "lr=3e-4" : "lr=1e-4");
  H5_CHECK(H5Gclose(meta));

  float w[32];
  base_w(w);
  if (v == V_FLIP_F32 || v == V_BE_FLIP) w[11] = f32_from_bits(f32_bits(w[11]) ^ 1u);
  if (v == V_NAN_A) w[0] = f32_from_bits(0x7fc00000u);
  if (v == V_NAN_B) w[0] = f32_from_bits(0x7fc00001u);
  if (v == V_NAN_ONE_SIDE) w[5] = f32_from_bits(0x7fc00000u);
  hsize_t wd[2] = {4, v == V_SHAPE ? 4 : 8}, chunk[2] = {2, 8};
  put(f, "/model/w", v == V_BE || v == V_BE_FLIP ? H5T_IEEE_F32BE : H5T_IEEE_F32LE,
      H5T_NATIVE_FLOAT, 2, wd, w, v == V_LAYOUT ? chunk : NULL);

  double b[3] = {base_b[0], base_b[1], base_b[2]};
  if (v == V_NEG_ZERO) b[1] = -0.0;
  if (v == V_SIGN_FLIP) b[0] = -1.5;
  if (v == V_FLIP_F64) {
    uint64_t u;
    memcpy(&u, &b[2], 8);
    u ^= (uint64_t)1 << 20;
    memcpy(&b[2], &u, 8);
  }
  hsize_t bd[1] = {3};
  if (v == V_DTYPE)
    put(f, "/model/b", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 1, bd, b, NULL);
  else if (v != V_MISSING_EXTRA)
    put(f, "/model/b", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, bd, b, NULL);
  if (v == V_MISSING_EXTRA) {
    int32_t extra[2] = {7, 8};
    hsize_t ed[1] = {2};
    put(f, "/model/extra", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, ed, extra, NULL);
  }
  int64_t step = 5;
  put(f, "/optimizer/step", H5T_STD_I64LE, H5T_NATIVE_INT64, 0, NULL, &step, NULL);
  H5_CHECK(H5Pclose(gcpl));
  H5_CHECK(H5Pclose(fcpl));
  H5_CHECK(H5Fclose(f));
}

static char tmp_root[512];

static void path_of(char *out, size_t cap, const char *rel) {
  snprintf(out, cap, "%s/%s", tmp_root, rel);
}

static void mkdirs(const char *rel) {
  char p[1024], cmd[1200];
  path_of(p, sizeof p, rel);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
  if (system(cmd) != 0) {
    fprintf(stderr, "mkdir -p %s failed\n", p);
    exit(1);
  }
}

static void write_text(const char *rel, const char *text) {
  char p[1024];
  path_of(p, sizeof p, rel);
  FILE *f = fopen(p, "wb");
  if (!f || fputs(text, f) < 0 || fclose(f)) {
    fprintf(stderr, "cannot write %s\n", p);
    exit(1);
  }
}

/* A pair DIR/a.h5, DIR/b.h5. */
static void make_pair(const char *dir, variant va, variant vb) {
  char a[1024], b[1024], rel[512];
  mkdirs(dir);
  snprintf(rel, sizeof rel, "%s/a.h5", dir);
  path_of(a, sizeof a, rel);
  snprintf(rel, sizeof rel, "%s/b.h5", dir);
  path_of(b, sizeof b, rel);
  write_shard(a, va);
  write_shard(b, vb);
}

/* ------------------------------------------------------------------ running */

/* `resumecheck ARGS` with paths under tmp_root; returns its exit code, or
 * -1 without RC_BIN (then the CLI half of the checks is skipped). */
static int cli(const char *args) {
  const char *bin = getenv("RC_BIN");
  if (!bin) return -1;
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >/dev/null 2>&1", tmp_root, bin, args);
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
}
#define CHECK_CLI(args, code)                                                                      \
  do {                                                                                             \
    int got_ = cli(args);                                                                          \
    CHECK(got_ == -1 || got_ == (code), "resumecheck %s: exit %d, expected %d", args, got_, code); \
  } while (0)

static int compare(const char *ra, const char *rb, const rc_compare_opts *opts,
                   rc_compare_result *res, rc_err *err) {
  char a[1024], b[1024];
  path_of(a, sizeof a, ra);
  path_of(b, sizeof b, rb);
  memset(err, 0, sizeof *err);
  return rc_compare_paths(a, b, opts, res, err);
}

/* Compares a pair expected to differ in exactly one failing way; returns the
 * diff (or NULL after recording a failure). */
static const rc_diff *one_diff(const char *dir, rc_compare_result *res, rc_diff_kind kind,
                               const char *object) {
  char ra[512], rb[512];
  snprintf(ra, sizeof ra, "%s/a.h5", dir);
  snprintf(rb, sizeof rb, "%s/b.h5", dir);
  rc_err err;
  int rc = compare(ra, rb, NULL, res, &err);
  CHECK(rc == RC_OK, "%s: rc %d (%s)", dir, rc, err.msg);
  if (rc) return NULL;
  for (int i = 0; i < res->n_diffs; i++)
    fprintf(stderr, "  %s: %s %s %s\n", dir, rc_diff_kind_name(res->diffs[i].kind),
            res->diffs[i].object, res->diffs[i].detail);
  CHECK(res->n_diffs == 1 && res->n_failing == 1, "%s: %d diffs (%d failing), expected 1", dir,
        res->n_diffs, res->n_failing);
  if (res->n_diffs < 1) return NULL;
  const rc_diff *d = &res->diffs[0];
  CHECK(d->kind == kind, "%s: kind %s, expected %s", dir, rc_diff_kind_name(d->kind),
        rc_diff_kind_name(kind));
  CHECK(!strcmp(d->object, object), "%s: object '%s', expected '%s'", dir, d->object, object);
  CHECK(!strcmp(d->file, ""), "%s: file '%s' for a two-file compare", dir, d->file);
  char args[1200];
  snprintf(args, sizeof args, "compare %s/a.h5 %s/b.h5", dir, dir);
  CHECK_CLI(args, 1);
  return d;
}

/* ------------------------------------------------------------------ cases */

static void test_identical(void) {
  make_pair("identical", V_BASE, V_BASE);
  rc_compare_result res;
  rc_err err;
  int rc = compare("identical/a.h5", "identical/b.h5", NULL, &res, &err);
  CHECK(rc == RC_OK, "identical: rc %d %s", rc, err.msg);
  CHECK(res.n_diffs == 0 && res.n_failing == 0, "identical: %d diffs", res.n_diffs);
  CHECK(res.n_files_compared == 1 && res.n_files_identical == 1, "identical: %d/%d files",
        res.n_files_identical, res.n_files_compared);
  CHECK(res.n_datasets_compared == 0, "identical: equal bytes need no dataset compare (%d)",
        res.n_datasets_compared);
  CHECK(!res.fast_path, "identical: no manifests, so no fast path");
  rc_compare_result_free(&res);

  /* --deep opens them anyway and still finds nothing. */
  rc_compare_opts deep = {NULL, 0, true, false, RC_CKPT_FORMAT_AUTO};
  rc = compare("identical/a.h5", "identical/b.h5", &deep, &res, &err);
  CHECK(rc == RC_OK && res.n_diffs == 0, "identical --deep: rc %d, %d diffs", rc, res.n_diffs);
  CHECK(res.n_datasets_compared == 3, "identical --deep: %d datasets compared, expected 3",
        res.n_datasets_compared);
  rc_compare_result_free(&res);
  CHECK_CLI("compare identical/a.h5 identical/b.h5", 0);
  CHECK_CLI("compare --deep identical/a.h5 identical/b.h5", 0);
}

static void test_flip_f32(void) {
  make_pair("flip_f32", V_BASE, V_FLIP_F32);
  rc_compare_result res;
  const rc_diff *d = one_diff("flip_f32", &res, RC_DIFF_VALUES, "/model/w");
  if (d) {
    float w[32];
    base_w(w);
    float flipped = f32_from_bits(f32_bits(w[11]) ^ 1u);
    double expect_abs = fabs((double)w[11] - (double)flipped);
    CHECK(d->n_elements == 32, "n_elements %lld", (long long)d->n_elements);
    CHECK(d->n_different == 1, "n_different %lld", (long long)d->n_different);
    CHECK(d->first_index == 11, "first_index %lld", (long long)d->first_index);
    CHECK(d->max_ulp == 1, "max_ulp %llu", (unsigned long long)d->max_ulp);
    CHECK(d->max_abs == expect_abs, "max_abs %g, expected %g", d->max_abs, expect_abs);
    CHECK(d->max_rel == expect_abs / fmax(fabs(w[11]), fabs(flipped)), "max_rel %g", d->max_rel);
    CHECK(d->n_signed_zero_only == 0 && d->n_nan_payload_only == 0 && d->n_nan_mismatch == 0,
          "special counts %lld %lld %lld", (long long)d->n_signed_zero_only,
          (long long)d->n_nan_payload_only, (long long)d->n_nan_mismatch);
    CHECK(strstr(d->detail, "first at [1,3]"), "detail names the index: %s", d->detail);
  }
  rc_compare_result_free(&res);
}

static void test_flip_f64(void) {
  make_pair("flip_f64", V_BASE, V_FLIP_F64);
  rc_compare_result res;
  const rc_diff *d = one_diff("flip_f64", &res, RC_DIFF_VALUES, "/model/b");
  if (d) {
    CHECK(d->n_elements == 3 && d->n_different == 1 && d->first_index == 2, "%lld %lld %lld",
          (long long)d->n_elements, (long long)d->n_different, (long long)d->first_index);
    CHECK(d->max_ulp == (uint64_t)1 << 20, "max_ulp %llu, expected 2^20",
          (unsigned long long)d->max_ulp);
    CHECK(d->max_abs > 0 && d->max_abs < 1e-9, "max_abs %g", d->max_abs);
  }
  rc_compare_result_free(&res);
}

/* 1.5 vs -1.5: the ULP distance counts the floats on both sides of zero
 * (2 x the ordered value of 1.5, 0x3ff8000000000000), |a-b| = 3, rel = 2. */
static void test_sign_flip(void) {
  make_pair("sign_flip", V_BASE, V_SIGN_FLIP);
  rc_compare_result res;
  const rc_diff *d = one_diff("sign_flip", &res, RC_DIFF_VALUES, "/model/b");
  if (d) {
    CHECK(d->n_different == 1 && d->first_index == 0, "first %lld", (long long)d->first_index);
    CHECK(d->max_ulp == 2 * 0x3ff8000000000000ull, "max_ulp %llx", (unsigned long long)d->max_ulp);
    CHECK(d->max_abs == 3.0 && d->max_rel == 2.0, "abs %g rel %g", d->max_abs, d->max_rel);
  }
  rc_compare_result_free(&res);
}

static void test_signed_zero(void) {
  make_pair("neg_zero", V_BASE, V_NEG_ZERO);
  rc_compare_result res;
  const rc_diff *d = one_diff("neg_zero", &res, RC_DIFF_VALUES, "/model/b");
  if (d) {
    CHECK(d->n_different == 1 && d->first_index == 1, "n_different %lld first %lld",
          (long long)d->n_different, (long long)d->first_index);
    CHECK(d->n_signed_zero_only == 1, "n_signed_zero_only %lld", (long long)d->n_signed_zero_only);
    CHECK(d->n_nan_payload_only == 0 && d->n_nan_mismatch == 0, "NaN counts");
    CHECK(d->max_abs == 0 && d->max_rel == 0 && d->max_ulp == 0,
          "a sign of zero is no numeric difference: abs %g rel %g ulp %llu", d->max_abs, d->max_rel,
          (unsigned long long)d->max_ulp);
  }
  rc_compare_result_free(&res);
}

static void test_nan(void) {
  make_pair("nan_payload", V_NAN_A, V_NAN_B);
  rc_compare_result res;
  const rc_diff *d = one_diff("nan_payload", &res, RC_DIFF_VALUES, "/model/w");
  if (d) {
    CHECK(d->n_different == 1 && d->first_index == 0, "n_different %lld first %lld",
          (long long)d->n_different, (long long)d->first_index);
    CHECK(d->n_nan_payload_only == 1, "n_nan_payload_only %lld", (long long)d->n_nan_payload_only);
    CHECK(d->n_nan_mismatch == 0 && d->n_signed_zero_only == 0, "other counts");
    CHECK(d->max_ulp == 0 && d->max_abs == 0, "NaN payloads have no numeric distance");
  }
  rc_compare_result_free(&res);

  /* Two equal NaNs are equal bytes: nothing to report. */
  make_pair("nan_same", V_NAN_A, V_NAN_A);
  rc_err err;
  int rc = compare("nan_same/a.h5", "nan_same/b.h5", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_diffs == 0, "equal NaNs: rc %d, %d diffs", rc, res.n_diffs);
  rc_compare_result_free(&res);

  make_pair("nan_one_side", V_BASE, V_NAN_ONE_SIDE);
  d = one_diff("nan_one_side", &res, RC_DIFF_VALUES, "/model/w");
  if (d) {
    CHECK(d->n_different == 1 && d->first_index == 5, "first %lld", (long long)d->first_index);
    CHECK(d->n_nan_mismatch == 1 && d->n_nan_payload_only == 0, "n_nan_mismatch %lld",
          (long long)d->n_nan_mismatch);
  }
  rc_compare_result_free(&res);
}

static void test_shape_dtype(void) {
  make_pair("shape", V_BASE, V_SHAPE);
  rc_compare_result res;
  const rc_diff *d = one_diff("shape", &res, RC_DIFF_SHAPE, "/model/w");
  if (d) CHECK(!strcmp(d->detail, "float32[4,8] vs float32[4,4]"), "detail '%s'", d->detail);
  rc_compare_result_free(&res);

  make_pair("dtype", V_BASE, V_DTYPE);
  d = one_diff("dtype", &res, RC_DIFF_DTYPE, "/model/b");
  if (d)
    CHECK(!strcmp(d->detail, "float64[3] vs float32[3]; values equal as float64"), "detail '%s'",
          d->detail);
  rc_compare_result_free(&res);
}

static void test_missing_extra(void) {
  make_pair("missing_extra", V_BASE, V_MISSING_EXTRA);
  rc_compare_result res;
  rc_err err;
  int rc = compare("missing_extra/a.h5", "missing_extra/b.h5", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_diffs == 2 && res.n_failing == 2, "rc %d, %d diffs", rc, res.n_diffs);
  if (res.n_diffs == 2) {
    CHECK(res.diffs[0].kind == RC_DIFF_MISSING_IN_B && !strcmp(res.diffs[0].object, "/model/b"),
          "first: %s %s", rc_diff_kind_name(res.diffs[0].kind), res.diffs[0].object);
    CHECK(res.diffs[1].kind == RC_DIFF_MISSING_IN_A && !strcmp(res.diffs[1].object, "/model/extra"),
          "second: %s %s", rc_diff_kind_name(res.diffs[1].kind), res.diffs[1].object);
  }
  rc_compare_result_free(&res);
  CHECK_CLI("compare missing_extra/a.h5 missing_extra/b.h5", 1);
}

static void test_attribute(void) {
  make_pair("attr", V_BASE, V_ATTR);
  rc_compare_result res;
  const rc_diff *d = one_diff("attr", &res, RC_DIFF_ATTRIBUTE, "/meta@iteration");
  if (d) CHECK(!strcmp(d->detail, "value: 5 vs 6"), "detail '%s'", d->detail);
  rc_compare_result_free(&res);
}

/* One namer for HDF5 types (io/h5_type.h), used by the loader, inspect and
 * compare: each type prints one way. The compare's own namer printed a
 * fixed-length string as "string[8]", the loader's as "string(8)". */
static void test_type_names(void) {
  struct {
    hid_t base;
    size_t str_size; /* > 0: a fixed-length string of this size */
    const char *want;
  } cases[] = {
      {H5T_IEEE_F32LE, 0, "float32"}, {H5T_IEEE_F64BE, 0, "float64be"},
      {H5T_STD_U16BE, 0, "uint16be"}, {H5T_STD_I64LE, 0, "int64"},
      {H5T_C_S1, 8, "string(8)"},     {H5T_C_S1, H5T_VARIABLE, "string(variable)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    hid_t t = H5Tcopy(cases[i].base);
    H5_CHECK(t);
    if (cases[i].str_size) H5_CHECK(H5Tset_size(t, cases[i].str_size));
    char name[64];
    rc_h5_type_name(t, name, sizeof name);
    CHECK(!strcmp(name, cases[i].want), "type %zu named '%s', expected '%s'", i, name,
          cases[i].want);
    H5_CHECK(H5Tclose(t));
  }
  /* a 4-byte float that is not IEEE binary32 does not print as float32 */
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5_CHECK(t);
  H5_CHECK(H5Tset_fields(t, 31, 24, 7, 0, 24));
  char name[64];
  rc_h5_type_name(t, name, sizeof name);
  CHECK(!strcmp(name, "float(4 bytes)"), "non-IEEE float named '%s'", name);
  H5_CHECK(H5Tclose(t));

  /* and compare says the same: a string dataset's size change is a dtype
   * difference named in the loader's spelling */
  mkdirs("strings");
  for (int side = 0; side < 2; side++) {
    char rel[64], path[1024];
    snprintf(rel, sizeof rel, "strings/%c.h5", side ? 'b' : 'a');
    path_of(path, sizeof path, rel);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5_CHECK(fcpl);
    H5_CHECK(H5Pset_obj_track_times(fcpl, 0));
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5_CHECK(f);
    hid_t st = H5Tcopy(H5T_C_S1);
    H5_CHECK(st);
    H5_CHECK(H5Tset_size(st, side ? 4 : 8));
    const char text[2][8] = {"abc", "def"}, text4[2][4] = {"abc", "def"};
    hsize_t dims[1] = {2};
    put(f, "/x", st, st, 1, dims, side ? (const void *)text4 : (const void *)text, NULL);
    H5_CHECK(H5Tclose(st));
    H5_CHECK(H5Pclose(fcpl));
    H5_CHECK(H5Fclose(f));
  }
  rc_compare_result res;
  const rc_diff *d = one_diff("strings", &res, RC_DIFF_DTYPE, "/x");
  if (d) CHECK(!strncmp(d->detail, "string(8)[2] vs string(4)[2]", 28), "detail '%s'", d->detail);
  rc_compare_result_free(&res);
}

/* Byte order: a change of it is a dtype change (values equal), and values
 * stored big-endian are described correctly (same index, same ULP count). */
static void test_byte_order(void) {
  make_pair("be", V_BASE, V_BE);
  rc_compare_result res;
  const rc_diff *d = one_diff("be", &res, RC_DIFF_DTYPE, "/model/w");
  if (d)
    CHECK(!strcmp(d->detail, "float32[4,8] vs float32be[4,8]; values equal as float64"),
          "detail '%s'", d->detail);
  rc_compare_result_free(&res);
  make_pair("be_flip", V_BE, V_BE_FLIP);
  d = one_diff("be_flip", &res, RC_DIFF_VALUES, "/model/w");
  if (d)
    CHECK(d->n_different == 1 && d->first_index == 11 && d->max_ulp == 1 && d->max_abs > 2e-7 &&
              d->max_abs < 3e-7,
          "big-endian flip: n %lld first %lld ulp %llu abs %g", (long long)d->n_different,
          (long long)d->first_index, (unsigned long long)d->max_ulp, d->max_abs);
  rc_compare_result_free(&res);
}

static void test_vlen_attribute(void) {
  make_pair("note", V_BASE, V_NOTE);
  rc_compare_result res;
  const rc_diff *d = one_diff("note", &res, RC_DIFF_ATTRIBUTE, "/meta@note");
  if (d) CHECK(!strcmp(d->detail, "value: \"lr=1e-4\" vs \"lr=3e-4\""), "detail '%s'", d->detail);
  rc_compare_result_free(&res);
}

/* Same content, other storage layout: the bytes differ, the state does not. */
static void test_layout_only(void) {
  make_pair("layout", V_BASE, V_LAYOUT);
  rc_compare_result res;
  rc_err err;
  int rc = compare("layout/a.h5", "layout/b.h5", NULL, &res, &err);
  CHECK(rc == RC_OK, "layout: rc %d %s", rc, err.msg);
  CHECK(res.n_diffs == 1 && res.n_failing == 0, "layout: %d diffs, %d failing", res.n_diffs,
        res.n_failing);
  if (res.n_diffs == 1) CHECK(res.diffs[0].kind == RC_DIFF_INFORMATIONAL, "layout: kind");
  CHECK(res.n_files_identical == 0, "layout: the files are not byte-identical");
  CHECK(res.n_datasets_compared == 3, "layout: %d datasets compared", res.n_datasets_compared);
  rc_compare_result_free(&res);
  CHECK_CLI("compare layout/a.h5 layout/b.h5", 0);
}

static void test_non_hdf5(void) {
  mkdirs("text");
  write_text("text/a.bin", "abc\n");
  write_text("text/b.bin", "abd\n");
  write_text("text/c.bin", "abc\n");
  rc_compare_result res;
  rc_err err;
  int rc = compare("text/a.bin", "text/b.bin", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_diffs == 1 && res.n_failing == 1, "text: rc %d, %d diffs", rc,
        res.n_diffs);
  if (res.n_diffs == 1) {
    CHECK(res.diffs[0].kind == RC_DIFF_BYTES, "text: kind %s",
          rc_diff_kind_name(res.diffs[0].kind));
    CHECK(!strcmp(res.diffs[0].detail,
                  "4 vs 4 bytes, first difference at byte 2: 1 byte differs, in 1 range: [2, 3)"),
          "detail '%s'", res.diffs[0].detail);
  }
  rc_compare_result_free(&res);
  rc = compare("text/a.bin", "text/c.bin", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_diffs == 0 && res.n_files_identical == 1, "equal text: %d diffs",
        res.n_diffs);
  rc_compare_result_free(&res);
  CHECK_CLI("compare text/a.bin text/b.bin", 1);
  CHECK_CLI("compare text/a.bin text/c.bin", 0);
}

/* An iteration directory as the checkpoint layer writes it. manifest: 0 none,
 * 1 a manifest whose SHA-256 values are the files' own, 2 a manifest that
 * claims the shard is `lie_sha` (to show what the fast path trusts). */
static void make_iter(const char *dir, variant v, const char *args, int manifest,
                      const char *lie_sha) {
  char rel[512], p[1024];
  mkdirs(dir);
  snprintf(rel, sizeof rel, "%s/shard_00000_of_00001.h5", dir);
  path_of(p, sizeof p, rel);
  write_shard(p, v);
  snprintf(rel, sizeof rel, "%s/args.json", dir);
  write_text(rel, args);
  snprintf(rel, sizeof rel, "%s/COMPLETE", dir);
  write_text(rel, "");
  if (!manifest) return;
  char sha[RC_SHA256_HEX];
  rc_err err;
  if (rc_sha256_file(p, sha, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
  }
  struct stat st;
  stat(p, &st);
  char text[2048];
  snprintf(text, sizeof text,
           "{\"format\": \"resumecheck-checkpoint\", \"iteration\": 5, \"shards\": [{\"bytes\": "
           "%lld, \"datasets\": [], \"file\": \"shard_00000_of_00001.h5\", \"rank\": 0, "
           "\"sha256\": \"%s\"}], \"version\": 1, \"world_size\": 1}\n",
           (long long)st.st_size, manifest == 2 ? lie_sha : sha);
  snprintf(rel, sizeof rel, "%s/manifest.json", dir);
  write_text(rel, text);
  /* As the checkpoint layer writes it: the marker holds the manifest's hash. */
  char marker[128];
  rc_sha256_hex(text, strlen(text), sha);
  snprintf(marker, sizeof marker, "%s  manifest.json\n", sha);
  snprintf(rel, sizeof rel, "%s/COMPLETE", dir);
  write_text(rel, marker);
}

static void test_iter_dirs(void) {
  /* args.json differs, nothing else: reported, exit 0. */
  make_iter("args/a", V_BASE, "{\"leg\": \"through\"}\n", 1, NULL);
  make_iter("args/b", V_BASE, "{\"leg\": \"resume\"}\n", 1, NULL);
  rc_compare_result res;
  rc_err err;
  int rc = compare("args/a", "args/b", NULL, &res, &err);
  CHECK(rc == RC_OK, "args: rc %d %s", rc, err.msg);
  CHECK(res.n_diffs == 1 && res.n_failing == 0, "args: %d diffs, %d failing", res.n_diffs,
        res.n_failing);
  if (res.n_diffs == 1)
    CHECK(res.diffs[0].kind == RC_DIFF_INFORMATIONAL && !strcmp(res.diffs[0].file, "args.json"),
          "args: %s %s", rc_diff_kind_name(res.diffs[0].kind), res.diffs[0].file);
  /* Equal manifests settle the shard only once both shards were read and
   * verified against them. */
  CHECK(!res.fast_path && res.n_shards_verified == 2 && res.n_files_identical >= 1,
        "args: %d shards verified, %d identical, fast path %d", res.n_shards_verified,
        res.n_files_identical, res.fast_path);
  rc_compare_result_free(&res);
  CHECK_CLI("compare args/a args/b", 0);
  rc_compare_opts trusting = {NULL, 0, false, true, RC_CKPT_FORMAT_AUTO};
  rc = compare("args/a", "args/b", &trusting, &res, &err);
  CHECK(rc == RC_OK && res.fast_path && res.n_shards_verified == 0 && res.n_by_manifest == 1,
        "args --trust-manifests: rc %d, fast path %d, %d verified, %d by manifest", rc,
        res.fast_path, res.n_shards_verified, res.n_by_manifest);
  rc_compare_result_free(&res);
  CHECK_CLI("compare --trust-manifests args/a args/b", 0);

  /* Negative control: a differing shard beside it fails, and the manifest
   * and COMPLETE (which differ too, as a consequence) are not reported. */
  make_iter("args/c", V_FLIP_F32, "{\"leg\": \"resume\"}\n", 1, NULL);
  rc = compare("args/a", "args/c", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 1 && res.n_diffs == 2, "args vs flip: %d diffs",
        res.n_diffs);
  if (res.n_diffs == 2)
    CHECK(res.diffs[1].kind == RC_DIFF_VALUES &&
              !strcmp(res.diffs[1].file, "shard_00000_of_00001.h5") &&
              !strcmp(res.diffs[1].object, "/model/w"),
          "flip in dir: %s %s:%s", rc_diff_kind_name(res.diffs[1].kind), res.diffs[1].file,
          res.diffs[1].object);
  CHECK(!res.fast_path, "a differing shard is read");
  rc_compare_result_free(&res);
  CHECK_CLI("compare args/a args/c", 1);

  /* Manifests that lie: they claim equal hashes for different shards. The
   * default reads both shards and finds neither matches (65, naming the
   * first); --deep verifies too. Negative control: --trust-manifests, the
   * old fast path, settles them as identical without reading them. */
  const char *fake = "0000000000000000000000000000000000000000000000000000000000000000";
  make_iter("trust/a", V_BASE, "{}\n", 2, fake);
  make_iter("trust/b", V_ATTR, "{}\n", 2, fake);
  rc = compare("trust/a", "trust/b", NULL, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "trust/a/shard_00000_of_00001.h5") &&
            strstr(err.msg, "do not match its manifest") && strstr(err.msg, "side A"),
        "lying manifests: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  CHECK_CLI("compare trust/a trust/b", 65);
  rc_compare_opts deep = {NULL, 0, true, false, RC_CKPT_FORMAT_AUTO};
  rc = compare("trust/a", "trust/b", &deep, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR, "lying manifests --deep: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  CHECK_CLI("compare --deep trust/a trust/b", 65);
  rc = compare("trust/a", "trust/b", &trusting, &res, &err);
  /* the sizes agree with the manifests (same structure, same size), so: */
  CHECK(rc == RC_OK && res.n_failing == 0 && res.fast_path && res.n_by_manifest == 1 &&
            res.n_files_identical == res.n_files_compared - 1,
        "trust: rc %d %s, %d failing, %d of %d called byte-identical", rc, err.msg, res.n_failing,
        res.n_files_identical, res.n_files_compared);
  rc_compare_result_free(&res);
  CHECK_CLI("compare --trust-manifests trust/a trust/b", 0);
  CHECK_CLI("compare --trust-manifests --deep trust/a trust/b", 64);

  /* A missing shard and a missing COMPLETE are failing differences. */
  make_iter("missing/a", V_BASE, "{}\n", 0, NULL);
  make_iter("missing/b", V_BASE, "{}\n", 0, NULL);
  char p[1024];
  path_of(p, sizeof p, "missing/b/COMPLETE");
  unlink(p);
  rc = compare("missing/a", "missing/b", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 1, "missing COMPLETE: %d failing", res.n_failing);
  if (res.n_diffs >= 1)
    CHECK(res.diffs[0].kind == RC_DIFF_MISSING_IN_B && !strcmp(res.diffs[0].file, "COMPLETE"),
          "missing COMPLETE: %s %s", rc_diff_kind_name(res.diffs[0].kind), res.diffs[0].file);
  rc_compare_result_free(&res);
}

static void test_ignore(void) {
  /* flip_f32 was written by test_flip_f32 and fails without --ignore. */
  const char *pat[] = {"*:/model/w"};
  rc_compare_opts opts = {pat, 1, false, false, RC_CKPT_FORMAT_AUTO};
  rc_compare_result res;
  rc_err err;
  int rc = compare("flip_f32/a.h5", "flip_f32/b.h5", &opts, &res, &err);
  CHECK(rc == RC_OK && res.n_diffs == 0, "ignored: rc %d, %d diffs", rc, res.n_diffs);
  rc_compare_result_free(&res);
  CHECK_CLI("compare flip_f32/a.h5 flip_f32/b.h5 --ignore '*:/model/w'", 0);
  CHECK_CLI("compare flip_f32/a.h5 flip_f32/b.h5 --ignore '*:/model/b'", 1);

  /* A file pattern inside directories. */
  const char *pat2[] = {"shard_*"};
  rc_compare_opts opts2 = {pat2, 1, false, false, RC_CKPT_FORMAT_AUTO};
  rc = compare("args/a", "args/c", &opts2, &res, &err);
  /* The only shard ignored: what is left (args.json, the manifest and
   * COMPLETE, which differ because the shard does) is no evidence. */
  CHECK(rc == RC_OK && res.n_failing == 0 && res.nothing_compared,
        "file ignored: %d failing, nothing compared %d", res.n_failing, res.nothing_compared);
  rc_compare_result_free(&res);
  CHECK_CLI("compare args/a args/c --ignore 'shard_*'", 66);
  CHECK_CLI("compare args/a args/b --ignore 'args.json'", 0);

  /* --ignore '*' compares nothing: not IDENTICAL but "nothing compared" (66),
   * for two files (every object ignored) and for two directories (every
   * file ignored). Negative controls: the same pairs without --ignore fail
   * (1), and partial patterns still pass on what is left (above). */
  const char *all[] = {"*"};
  rc_compare_opts every = {all, 1, false, false, RC_CKPT_FORMAT_AUTO};
  rc = compare("flip_f32/a.h5", "flip_f32/b.h5", &every, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 0 && res.nothing_compared && res.n_ignored > 0,
        "files --ignore '*': rc %d, %d failing, nothing compared %d", rc, res.n_failing,
        res.nothing_compared);
  rc_compare_result_free(&res);
  rc = compare("args/a", "args/c", &every, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 0 && res.nothing_compared && res.n_files_compared == 0,
        "dirs --ignore '*': rc %d, nothing compared %d, %d files", rc, res.nothing_compared,
        res.n_files_compared);
  rc_compare_result_free(&res);
  CHECK_CLI("compare flip_f32/a.h5 flip_f32/b.h5 --ignore '*'", 66);
  CHECK_CLI("compare args/a args/c --ignore '*'", 66);
  CHECK_CLI("compare flip_f32/a.h5 flip_f32/b.h5", 1);
  CHECK_CLI("compare args/a args/c", 1);
}

static void test_errors(void) {
  CHECK_CLI("compare identical/a.h5 does-not-exist.h5", 66);
  CHECK_CLI("compare identical/a.h5", 64);
  CHECK_CLI("compare identical/a.h5 identical/b.h5 --bogus", 64);
  CHECK_CLI("compare identical/a.h5 identical", 64);
  CHECK_CLI("compare --help", 0);

  /* A shard cut short keeps its signature but cannot be parsed: 65. */
  char a[1024], b[1024], cmd[2200];
  path_of(a, sizeof a, "identical/a.h5");
  mkdirs("corrupt");
  path_of(b, sizeof b, "corrupt/b.h5");
  snprintf(cmd, sizeof cmd, "head -c 1200 '%s' > '%s'", a, b);
  CHECK(system(cmd) == 0, "truncating a copy");
  rc_compare_result res;
  rc_err err;
  int rc = compare("identical/a.h5", "corrupt/b.h5", NULL, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR, "truncated shard: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  CHECK_CLI("compare identical/a.h5 corrupt/b.h5", 65);
}

/* ------------------------------------------------------------------ hostile input */

/* `resumecheck ARGS` prints NEEDLE on stdout or stderr (skipped without RC_BIN). */
static void check_cli_says(const char *args, const char *needle) {
  const char *bin = getenv("RC_BIN");
  if (!bin) return;
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1 | grep -qF -- '%s'", tmp_root, bin, args,
           needle);
  CHECK(system(cmd) == 0, "resumecheck %s: does not say '%s'", args, needle);
}

/* Overwrites `n` bytes at `off` of a file under tmp_root (n == 0: flips one byte). */
static void poke(const char *rel, long off, const void *bytes, size_t n) {
  char p[1024];
  path_of(p, sizeof p, rel);
  FILE *f = fopen(p, "r+b");
  unsigned char c;
  if (!f || fseek(f, off, SEEK_SET) || (n == 0 && fread(&c, 1, 1, f) != 1)) {
    fprintf(stderr, "cannot poke %s\n", p);
    exit(1);
  }
  if (n == 0) c ^= 0x01;
  if (fseek(f, off, SEEK_SET) || fwrite(n ? bytes : &c, 1, n ? n : 1, f) != (n ? n : 1) ||
      fclose(f)) {
    fprintf(stderr, "cannot poke %s\n", p);
    exit(1);
  }
}

static long size_of(const char *rel) {
  char p[1024];
  path_of(p, sizeof p, rel);
  struct stat st;
  return stat(p, &st) ? -1 : (long)st.st_size;
}

/* The same number of pseudo-random bytes as the file has (no HDF5 signature). */
static void garble(const char *rel) {
  long n = size_of(rel);
  unsigned char *buf = malloc((size_t)n);
  uint32_t x = 2463534242u;
  for (long i = 0; buf && i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    buf[i] = (unsigned char)x;
  }
  if (!buf) exit(1);
  poke(rel, 0, buf, (size_t)n);
  free(buf);
}

/* Item 1: a shard with a flipped byte beside a manifest that still matches
 * the other side's. The default reads and verifies every shard: 65 naming
 * the shard and the side. Negative control: --trust-manifests (the old
 * default) settles the pair unread, and says so. */
static void test_flipped_shard_byte(void) {
  make_iter("flipbyte/a", V_BASE, "{}\n", 1, NULL);
  make_iter("flipbyte/b", V_BASE, "{}\n", 1, NULL);
  rc_compare_result res;
  rc_err err;
  int rc = compare("flipbyte/a", "flipbyte/b", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 0 && res.n_shards_verified == 2 &&
            res.bytes_verified == 2 * size_of("flipbyte/a/shard_00000_of_00001.h5"),
        "flipbyte before the flip: rc %d (%s), %d verified, %lld bytes", rc, err.msg,
        res.n_shards_verified, (long long)res.bytes_verified);
  rc_compare_result_free(&res);
  check_cli_says("compare flipbyte/a flipbyte/b", "bytes read and verified against manifests");

  poke("flipbyte/b/shard_00000_of_00001.h5", size_of("flipbyte/b/shard_00000_of_00001.h5") / 2,
       NULL, 0);
  rc = compare("flipbyte/a", "flipbyte/b", NULL, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "flipbyte/b/shard_00000_of_00001.h5") &&
            strstr(err.msg, "side B") && strstr(err.msg, "do not match its manifest"),
        "flipped byte: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  CHECK_CLI("compare flipbyte/a flipbyte/b", 65);
  CHECK_CLI("compare --deep flipbyte/a flipbyte/b", 65);
  check_cli_says("compare flipbyte/a flipbyte/b", "flipbyte/b/shard_00000_of_00001.h5");

  rc_compare_opts trusting = {NULL, 0, false, true, RC_CKPT_FORMAT_AUTO};
  rc = compare("flipbyte/a", "flipbyte/b", &trusting, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 0 && res.fast_path && res.n_shards_verified == 0,
        "flipped byte, --trust-manifests: rc %d, fast path %d", rc, res.fast_path);
  rc_compare_result_free(&res);
  CHECK_CLI("compare --trust-manifests flipbyte/a flipbyte/b", 0);
  check_cli_says("compare --trust-manifests flipbyte/a flipbyte/b",
                 "manifests identical; shard bytes not read");
}

/* Item "weak": a shard replaced by garbage of the same size is a corrupt
 * file (65, named), with or without manifests, with or without --deep.
 * Negative control: a non-shard file that is HDF5 on one side only is still
 * an ordinary difference (1). */
static void test_garbage_shard(void) {
  make_iter("garbage/a", V_BASE, "{}\n", 0, NULL);
  make_iter("garbage/b", V_BASE, "{}\n", 0, NULL);
  garble("garbage/b/shard_00000_of_00001.h5");
  make_iter("garbage/ma", V_BASE, "{}\n", 1, NULL);
  make_iter("garbage/mb", V_BASE, "{}\n", 1, NULL);
  garble("garbage/mb/shard_00000_of_00001.h5");
  rc_compare_result res;
  rc_err err;
  rc_compare_opts deep = {NULL, 0, true, false, RC_CKPT_FORMAT_AUTO};
  int rc = compare("garbage/a", "garbage/b", &deep, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "garbage/b/shard_00000_of_00001.h5") &&
            strstr(err.msg, "not an HDF5 file") && strstr(err.msg, "side B"),
        "garbage shard --deep: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  CHECK_CLI("compare --deep garbage/a garbage/b", 65);
  CHECK_CLI("compare garbage/a garbage/b", 65);
  CHECK_CLI("compare garbage/a/shard_00000_of_00001.h5 garbage/b/shard_00000_of_00001.h5", 65);
  rc = compare("garbage/ma", "garbage/mb", &deep, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "garbage/mb/shard_00000_of_00001.h5") &&
            strstr(err.msg, "side B"),
        "garbage shard with manifests --deep: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  CHECK_CLI("compare --deep garbage/ma garbage/mb", 65);
  CHECK_CLI("compare garbage/ma garbage/mb", 65);

  char a[1024], b[1024], cmd[2200];
  path_of(a, sizeof a, "identical/a.h5");
  path_of(b, sizeof b, "garbage/x.bin");
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", a, b);
  CHECK(system(cmd) == 0, "copying");
  path_of(b, sizeof b, "garbage/y.bin");
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", a, b);
  CHECK(system(cmd) == 0, "copying");
  garble("garbage/y.bin");
  CHECK_CLI("compare garbage/x.bin garbage/y.bin", 1);
}

/* A file declaring /model/w of `n` float32 elements that are never written
 * (late allocation: no storage at all), chunked or contiguous, plus an
 * attribute `v` so two such files differ as bytes. */
static void write_sparse(const char *rel, hsize_t n, bool chunked, int v) {
  char p[1024];
  path_of(p, sizeof p, rel);
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  H5_CHECK(H5Pset_obj_track_times(fcpl, 0));
  hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  H5_CHECK(f);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1));
  hid_t dcpl = dcpl_no_times();
  H5_CHECK(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE));
  hsize_t chunk = (hsize_t)1 << 20;
  if (chunked) H5_CHECK(H5Pset_chunk(dcpl, 1, &chunk));
  hid_t space = H5Screate_simple(1, &n, NULL);
  hid_t d = H5Dcreate2(f, "/model/w", H5T_IEEE_F32LE, space, lcpl, dcpl, H5P_DEFAULT);
  H5_CHECK(d);
  attr_i64(d, "v", v);
  H5_CHECK(H5Dclose(d));
  H5_CHECK(H5Sclose(space));
  H5_CHECK(H5Pclose(dcpl));
  H5_CHECK(H5Pclose(lcpl));
  H5_CHECK(H5Pclose(fcpl));
  H5_CHECK(H5Fclose(f));
}

static void make_sparse_files(void) {
  mkdirs("sparse");
  const hsize_t tib = (hsize_t)1 << 38; /* float32 elements: 1 TiB */
  write_sparse("sparse/a.h5", tib, false, 1);
  write_sparse("sparse/b.h5", tib, false, 2);
  write_sparse("sparse/ca.h5", tib, true, 1);
  write_sparse("sparse/cb.h5", tib, true, 2);
  write_sparse("sparse/small_a.h5", 16, false, 1); /* 64 bytes of fill values: within bounds */
  write_sparse("sparse/small_b.h5", 16, false, 2);
}

/* Item 8: a ~2 KiB file declaring a never-written 1 TiB dataset. compare,
 * compare --deep and inspect refuse it at once (65, naming the dataset and
 * both sizes) instead of reading 1 TiB of fill values. Negative control: a
 * never-written dataset that declares less than the file holds is compared
 * (the attribute differs: 1) and inspected (0). */
static void test_sparse_tib(void) {
  make_sparse_files();
  rc_compare_result res;
  rc_err err;
  int rc = compare("sparse/a.h5", "sparse/b.h5", NULL, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "/model/w claims 1.0 TiB") &&
            strstr(err.msg, "file has") && strstr(err.msg, "sparse/a.h5 (A)"),
        "sparse 1 TiB: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  rc = compare("sparse/ca.h5", "sparse/cb.h5", NULL, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "/model/w claims 1.0 TiB"),
        "sparse chunked 1 TiB: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  CHECK_CLI("compare sparse/a.h5 sparse/b.h5", 65);
  CHECK_CLI("compare --deep sparse/a.h5 sparse/b.h5", 65);
  CHECK_CLI("compare --deep sparse/a.h5 sparse/a.h5", 65);
  CHECK_CLI("compare sparse/ca.h5 sparse/cb.h5", 65);
  CHECK_CLI("inspect sparse/a.h5", 65);
  CHECK_CLI("inspect sparse/ca.h5", 65);
  check_cli_says("inspect sparse/a.h5", "dataset /model/w claims 1.0 TiB (stores 0 B), file has");

  rc = compare("sparse/small_a.h5", "sparse/small_b.h5", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 1, "small sparse: rc %d (%s), %d failing", rc, err.msg,
        res.n_failing);
  rc_compare_result_free(&res);
  CHECK_CLI("compare sparse/small_a.h5 sparse/small_b.h5", 1);
  CHECK_CLI("inspect sparse/small_a.h5", 0);
}

/* The superblock is checked before libhdf5 parses it: an offset size it
 * cannot use and an end-of-file address past the file are refused by our
 * check (its words), 65. Negative control: the unmodified copy compares 0. */
static void test_superblock_bounds(void) {
  char a[1024], b[1024], cmd[2400];
  mkdirs("superblock");
  path_of(a, sizeof a, "identical/a.h5");
  for (int i = 0; i < 4; i++) {
    snprintf(b, sizeof b, "%s/superblock/%d.h5", tmp_root, i);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", a, b);
    CHECK(system(cmd) == 0, "copying");
  }
  /* write_shard's files: superblock version 0, offsets are byte 13 */
  unsigned char three = 3, big[8] = {0, 0, 0, 0, 0, 0, 0, 1};
  poke("superblock/1.h5", 13, &three, 1);
  poke("superblock/2.h5", 24 + 2 * 8, big, 8); /* v0: base, free space, then EOF */
  /* the root group's name heap (v0 root entry scratch pad: B-tree, heap)
   * declaring a 16 GiB data segment: libhdf5 would allocate it */
  FILE *f = fopen(b, "rb");
  unsigned char addr[8];
  CHECK(f && !fseek(f, 24 + 6 * 8 + 8 + 8, SEEK_SET) && fread(addr, 1, 8, f) == 8,
        "reading the heap address");
  if (f) fclose(f);
  long heap = 0;
  for (int i = 7; i >= 0; i--) heap = heap << 8 | addr[i];
  unsigned char huge[8] = {0, 0, 0, 0, 4, 0, 0, 0};
  poke("superblock/3.h5", heap + 8, huge, 8);
  rc_compare_result res;
  rc_err err;
  int rc = compare("superblock/0.h5", "superblock/3.h5", NULL, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "root group's name heap claims 16.0 GiB"),
        "heap size: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  rc = compare("superblock/0.h5", "superblock/1.h5", NULL, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "3-byte offsets"), "offset size: rc %d (%s)", rc,
        err.msg);
  rc_compare_result_free(&res);
  rc = compare("superblock/0.h5", "superblock/2.h5", NULL, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "superblock says the file ends at byte"),
        "EOF address: rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  CHECK_CLI("inspect superblock/2.h5", 65);
  CHECK_CLI("compare superblock/0.h5 identical/b.h5", 0);
  CHECK_CLI("inspect superblock/0.h5", 0);
}

/* ------------------------------------------------------------------ traces */

static const char *trace_header =
    "step,loss,loss_hex,grad_norm,grad_norm_hex,lr,lr_hex,skipped,tokens,fp_params,fp_main_grad\n";

/* One row; step 6's grad norm and main_grad fingerprint change with `gn6`,
 * step 7's loss changes in its last bit (hex only) with `loss7`. */
static void trace_row(char *out, size_t cap, int step, bool gn6, bool loss7) {
  double loss = 4.0 - 0.125 * step;
  if (loss7 && step == 7) loss = nextafter(loss, 0);
  double gn = 1.0 + 0.5 * step;
  if (gn6 && step == 6) gn = 7.25;
  snprintf(out, cap, "%d,%.9g,%a,%.9g,%a,0.001,%a,0,512,%016llx,%016llx\n", step, loss, loss, gn,
           gn, 0.001, 0xa0ull + (unsigned)step,
           (gn6 && step == 6) ? 0xbeefull : 0xc0ull + (unsigned)step);
}

static void write_trace(const char *rel, int first, int last, bool gn6, bool loss7) {
  char text[8192] = "", row[512];
  strcat(text, trace_header);
  for (int s = first; s <= last; s++) {
    trace_row(row, sizeof row, s, gn6, loss7);
    strcat(text, row);
  }
  write_text(rel, text);
}

static void test_traces(void) {
  mkdirs("trace/through");
  mkdirs("trace/resume");
  mkdirs("trace/same");
  mkdirs("trace/loss7");
  mkdirs("trace/other");
  write_trace("trace/through/trace.csv", 1, 8, false, false);
  write_trace("trace/same/trace.csv", 4, 8, false, false);
  write_trace("trace/resume/trace.csv", 4, 8, true, false);
  write_trace("trace/loss7/trace.csv", 1, 8, false, true);
  write_text("trace/other/trace.csv", "step,loss,loss_hex,lr,lr_hex\n1,4,0x1p+2,0.001,0x1p-10\n");
  char a[1024], b[1024];
  rc_trace_diff td;
  rc_err err = {0};

  path_of(a, sizeof a, "trace/through/trace.csv");
  path_of(b, sizeof b, "trace/same/trace.csv");
  int rc = rc_trace_compare(a, b, &td, &err);
  CHECK(rc == RC_OK && td.comparable && td.first_step == -1 && td.steps_compared == 5,
        "same steps: rc %d comparable %d first %lld compared %lld", rc, td.comparable,
        (long long)td.first_step, (long long)td.steps_compared);

  path_of(b, sizeof b, "trace/resume/trace.csv");
  rc = rc_trace_compare(a, b, &td, &err);
  CHECK(rc == RC_OK && td.comparable, "resume: rc %d", rc);
  CHECK(td.first_step == 6, "resume: first step %lld", (long long)td.first_step);
  CHECK(td.steps_compared == 5, "resume: compared %lld", (long long)td.steps_compared);
  CHECK(!strcmp(td.columns, "grad_norm,fp_main_grad"), "columns '%s'", td.columns);
  CHECK(!strcmp(td.equal_columns, "loss,lr,skipped,tokens,fp_params"), "equal '%s'",
        td.equal_columns);
  CHECK(!strcmp(td.a_values, "4,00000000000000c6"), "a_values '%s'", td.a_values);
  CHECK(!strcmp(td.b_values, "7.25,000000000000beef"), "b_values '%s'", td.b_values);

  /* The decimal copies agree at step 7, the exact ones do not. */
  path_of(b, sizeof b, "trace/loss7/trace.csv");
  rc = rc_trace_compare(a, b, &td, &err);
  CHECK(rc == RC_OK && td.first_step == 7 && !strcmp(td.columns, "loss"),
        "hex-only: first %lld columns '%s'", (long long)td.first_step, td.columns);
  CHECK(!strcmp(td.a_values, td.b_values), "hex-only: decimal copies equal ('%s' vs '%s')",
        td.a_values, td.b_values);

  path_of(b, sizeof b, "trace/other/trace.csv");
  rc = rc_trace_compare(a, b, &td, &err);
  CHECK(rc == RC_OK && !td.comparable && td.first_step == -1, "headers: rc %d comparable %d", rc,
        td.comparable);
  CHECK(strstr(err.msg, "headers differ"), "headers: message '%s'", err.msg);

  /* Leg directories: the trace difference is a failing difference. */
  rc_compare_result res;
  rc = compare("trace/through", "trace/resume", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 1, "legs: rc %d (%s), %d failing", rc, err.msg,
        res.n_failing);
  if (res.n_diffs == 1)
    CHECK(!strcmp(res.diffs[0].file, "trace.csv") && !strcmp(res.diffs[0].object, "step 6") &&
              res.diffs[0].first_index == 6,
          "legs: %s:%s", res.diffs[0].file, res.diffs[0].object);
  rc_compare_result_free(&res);
  rc = compare("trace/through", "trace/same", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_diffs == 0, "legs same: rc %d, %d diffs", rc, res.n_diffs);
  rc_compare_result_free(&res);
  CHECK_CLI("compare trace/through trace/resume", 1);
  CHECK_CLI("compare trace/through trace/same", 0);
  CHECK_CLI("compare trace/through/trace.csv trace/resume/trace.csv", 1);
}

/* Legs with checkpoints: iterations on one side only are reported, common ones compared. */
static void test_legs(void) {
  make_iter("legs/through/ckpt/iter_0000003", V_BASE, "{\"leg\": 1}\n", 1, NULL);
  make_iter("legs/through/ckpt/iter_0000006", V_BASE, "{\"leg\": 1}\n", 1, NULL);
  make_iter("legs/resume/ckpt/iter_0000006", V_FLIP_F32, "{\"leg\": 3}\n", 1, NULL);
  make_iter("legs/save/ckpt/iter_0000003", V_BASE, "{\"leg\": 2}\n", 1, NULL);
  rc_compare_result res;
  rc_err err;
  int rc = compare("legs/through", "legs/save", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 0 && !res.fast_path && res.n_shards_verified == 2,
        "A/A: rc %d (%s) %d failing, %d verified", rc, err.msg, res.n_failing,
        res.n_shards_verified);
  rc_compare_result_free(&res);
  rc = compare("legs/through", "legs/resume", NULL, &res, &err);
  CHECK(rc == RC_OK && res.n_failing == 1, "RESUME: rc %d, %d failing", rc, res.n_failing);
  for (int i = 0; i < res.n_diffs; i++)
    if (res.diffs[i].kind == RC_DIFF_VALUES)
      CHECK(!strcmp(res.diffs[i].file, "ckpt/iter_0000006/shard_00000_of_00001.h5"), "file %s",
            res.diffs[i].file);
  rc_compare_result_free(&res);
  /* save has only K, resume only N: nothing in common is bad input. */
  rc = compare("legs/save", "legs/resume", NULL, &res, &err);
  CHECK(rc == RC_EXIT_DATAERR, "no overlap: rc %d", rc);
  rc_compare_result_free(&res);
  /* A run directory: legs matched by name. */
  CHECK_CLI("compare legs legs", 0);
  /* every trace step and iteration ignored: nothing compared, not "no overlap" */
  const char *all[] = {"*"};
  rc_compare_opts every = {all, 1, false, false, RC_CKPT_FORMAT_AUTO};
  rc = compare("legs/through", "legs/resume", &every, &res, &err);
  CHECK(rc == RC_OK && res.nothing_compared, "legs --ignore '*': rc %d (%s)", rc, err.msg);
  rc_compare_result_free(&res);
  CHECK_CLI("compare legs/through legs/resume --ignore '*'", 66);
  CHECK_CLI("compare legs/through legs/resume", 1);
  CHECK_CLI("compare legs/through legs/through/ckpt/iter_0000003", 64);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--make-pairs")) {
    snprintf(tmp_root, sizeof tmp_root, "%s", argv[2]);
    const struct {
      const char *name;
      variant a, b;
    } pairs[] = {{"identical", V_BASE, V_BASE},
                 {"flip_f32", V_BASE, V_FLIP_F32},
                 {"flip_f64", V_BASE, V_FLIP_F64},
                 {"neg_zero", V_BASE, V_NEG_ZERO},
                 {"nan_payload", V_NAN_A, V_NAN_B},
                 {"nan_one_side", V_BASE, V_NAN_ONE_SIDE},
                 {"shape", V_BASE, V_SHAPE},
                 {"dtype", V_BASE, V_DTYPE},
                 {"missing_extra", V_BASE, V_MISSING_EXTRA},
                 {"attr", V_BASE, V_ATTR},
                 {"layout", V_BASE, V_LAYOUT},
                 {"be", V_BASE, V_BE},
                 {"note", V_BASE, V_NOTE}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
      make_pair(pairs[i].name, pairs[i].a, pairs[i].b);
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "--make-sparse")) { /* for tests/hostile_compare.sh */
    snprintf(tmp_root, sizeof tmp_root, "%s", argv[2]);
    make_sparse_files();
    return 0;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(tmp_root, sizeof tmp_root, "%s/rc_compare_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(tmp_root)) {
    perror("mkdtemp");
    return 1;
  }
  test_identical();
  test_flip_f32();
  test_flip_f64();
  test_signed_zero();
  test_sign_flip();
  test_nan();
  test_shape_dtype();
  test_missing_extra();
  test_attribute();
  test_byte_order();
  test_type_names();
  test_vlen_attribute();
  test_layout_only();
  test_non_hdf5();
  test_iter_dirs();
  test_ignore();
  test_errors();
  test_traces();
  test_legs();
  test_flipped_shard_byte();
  test_garbage_shard();
  test_sparse_tib();
  test_superblock_bounds();
  if (!failures) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_root);
  } else {
    fprintf(stderr, "%d check(s) failed; files kept in %s\n", failures, tmp_root);
  }
  return failures ? 1 : 0;
}
