/* test_io.c — the checkpoint I/O layer: fsutil, SHA-256, shards, manifests,
 * validated loads (src/io/checkpoint.h, docs/design.md §5).
 *
 *   test_io                  unit tests (in a fresh temp directory)
 *   test_io fixtures DIR     every committed fixture in DIR (fixtures/io) is
 *                            loaded: the good one loads, each damaged one is
 *                            rejected with its own code and message, and
 *                            none of them is touched by the attempt
 *   test_io save ROOT [perturb|uninit] [world N] [big BYTES] [experts N]
 *   test_io load ITER_DIR [experts N]  helpers for the shell tests (two processes,
 *                            full/read-only file systems, valgrind)
 * Every positive check has a negative control next to it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "io/checkpoint.h"
#include "io/checkpoint_internal.h"
#include "io/sha256.h"
#include "io_fixture_state.h"

#include "check.h"

static char g_tmp[4096];

/* snprintf that treats truncation as a test bug. */
__attribute__((format(printf, 3, 4))) static void pathf(char *out, size_t cap, const char *fmt,
                                                        ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, cap, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= cap) {
    fprintf(stderr, "test_io: formatted text does not fit in %zu bytes\n", cap);
    abort();
  }
}

static void tmp_path(char *out, size_t cap, const char *name) {
  pathf(out, cap, "%s/%s", g_tmp, name);
}

static void iter_dir(char *out, size_t cap, const char *root) {
  pathf(out, cap, "%s/iter_%07d", root, IOFIX_ITERATION);
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  chmod(path, 0700);
  return remove(path);
}

static void rm_rf(const char *path) {
  nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- directory snapshots: "name size sha256 mtime" per file, sorted. */

typedef struct {
  char *buf;
  size_t len, cap;
} snap_t;

static void text_add(snap_t *t, const char *s) {
  size_t n = strlen(s);
  if (t->len + n + 1 > t->cap) {
    t->cap = (t->len + n + 1) * 2;
    t->buf = realloc(t->buf, t->cap);
    if (!t->buf) abort();
  }
  memcpy(t->buf + t->len, s, n + 1);
  t->len += n;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void snapshot(const char *dir, snap_t *out) {
  DIR *d = opendir(dir);
  if (!d) {
    text_add(out, "(no directory)\n");
    return;
  }
  char *names[256];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 256)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names[n++] = strdup(e->d_name);
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_name);
  for (int i = 0; i < n; i++) {
    char path[4096], line[4400], sha[RC_SHA256_HEX] = "-";
    rc_path_join(path, sizeof path, dir, names[i]);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      pathf(line, sizeof line, "%s/\n", names[i]);
      text_add(out, line);
      snapshot(path, out);
    } else {
      rc_err err;
      rc_sha256_file(path, sha, &err);
      pathf(line, sizeof line, "%s %lld %s %lld.%09ld\n", names[i], (long long)st.st_size, sha,
            (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
      text_add(out, line);
    }
    free(names[i]);
  }
}

static bool files_equal(const char *a, const char *b) {
  char *x, *y;
  size_t nx, ny;
  rc_err err;
  if (rc_read_file(a, &x, &nx, &err)) return false;
  if (rc_read_file(b, &y, &ny, &err)) {
    free(x);
    return false;
  }
  bool eq = nx == ny && !memcmp(x, y, nx);
  free(x);
  free(y);
  return eq;
}

/* Same set of file names and same bytes in every file. */
static bool dirs_identical(const char *a, const char *b, char *why, size_t cap) {
  snap_t ta = {0}, tb = {0};
  snapshot(a, &ta);
  snapshot(b, &tb);
  DIR *d = opendir(a);
  bool ok = d != NULL;
  struct dirent *e;
  int na = 0;
  while (ok && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    na++;
    char pa[4096], pb[4096];
    rc_path_join(pa, sizeof pa, a, e->d_name);
    rc_path_join(pb, sizeof pb, b, e->d_name);
    if (!files_equal(pa, pb)) {
      pathf(why, cap, "%s differs", e->d_name);
      ok = false;
    }
  }
  if (d) closedir(d);
  d = opendir(b);
  int nb = 0;
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) nb++;
  if (d) closedir(d);
  if (ok && na != nb) {
    pathf(why, cap, "%d files vs %d", na, nb);
    ok = false;
  }
  free(ta.buf);
  free(tb.buf);
  return ok;
}

static bool states_bitwise_equal(const rc_state *a, const rc_state *b) {
  if (a->count != b->count) return false;
  for (int i = 0; i < a->count; i++) {
    size_t n = rc_tensor_nbytes(&a->tensors[i]);
    if (n != rc_tensor_nbytes(&b->tensors[i])) return false;
    if (n && memcmp(a->tensors[i].data, b->tensors[i].data, n)) return false;
  }
  return true;
}

static int save_fix(const char *root, unsigned flags, int nexperts, rc_err *err) {
  iofix f;
  iofix_build(&f, flags, nexperts);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  int rc = rc_checkpoint_save(root, &m, &f.st, "{\"leg\":\"test\"}\n", err);
  iofix_free(&f);
  return rc;
}

/* ------------------------------------------------------------------ tests */

static void test_state_and_sha(void) {
  CHECK(!strcmp(rc_dtype_name(RC_DT_F32), "float32") && !strcmp(rc_dtype_name(RC_DT_I8), "int8"),
        "dtype names");
  CHECK(rc_dtype_size(RC_DT_F64) == 8 && rc_dtype_size(RC_DT_I32) == 4, "dtype sizes");
  rc_state s = {0};
  int64_t sh[2] = {3, 5};
  rc_state_add(&s, "/a/b", RC_DT_F32, 2, sh, NULL);
  rc_state_add(&s, "/c", RC_DT_I64, 0, NULL, NULL);
  CHECK(rc_tensor_numel(&s.tensors[0]) == 15 && rc_tensor_nbytes(&s.tensors[0]) == 60, "numel");
  CHECK(rc_tensor_numel(&s.tensors[1]) == 1 && rc_tensor_nbytes(&s.tensors[1]) == 8,
        "a scalar has one element");
  CHECK(rc_state_find(&s, "/c") == &s.tensors[1] && !rc_state_find(&s, "/a"), "find");
  rc_state_free(&s);

  char hex[RC_SHA256_HEX];
  rc_sha256_hex("abc", 3, hex);
  CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        "SHA-256('abc') is the FIPS 180-2 vector: %s", hex);
  rc_sha256_hex("", 0, hex);
  CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        "SHA-256('')");
  rc_sha256_hex("abd", 3, hex);
  CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        "negative control: 'abd' hashes differently");
  char path[4096], fhex[RC_SHA256_HEX];
  tmp_path(path, sizeof path, "sha.bin");
  size_t n = (9 << 20) + 7; /* spans several read chunks */
  unsigned char *buf = malloc(n);
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 131 + (i >> 13));
  rc_err err = {0};
  CHECK(rc_write_file_atomic(path, buf, n, &err) == 0, "write: %s", err.msg);
  rc_sha256_hex(buf, n, hex);
  CHECK(rc_sha256_file(path, fhex, &err) == 0 && !strcmp(hex, fhex), "file hash == memory hash");
  /* parallel forms: every slot equals the serial hash, for any thread count */
  enum { NPAR = 7 };
  const void *parts[NPAR];
  size_t lens[NPAR];
  char many[NPAR][RC_SHA256_HEX], one[RC_SHA256_HEX];
  for (int i = 0; i < NPAR; i++) parts[i] = buf + (size_t)i * 1000, lens[i] = (size_t)i * 77777;
  for (int threads = 1; threads <= 4; threads += 3) {
    rc_sha256_many(parts, lens, NPAR, threads, many);
    for (int i = 0; i < NPAR; i++) {
      rc_sha256_hex(parts[i], lens[i], one);
      CHECK(!strcmp(one, many[i]), "sha256_many slot %d on %d threads", i, threads);
    }
  }
  CHECK(strcmp(many[1], many[2]), "negative control: different parts hash differently");
  const char *files[3] = {path, path, NULL};
  char fmany[3][RC_SHA256_HEX];
  CHECK(rc_sha256_files(files, 2, 2, fmany, &err) == 0 && !strcmp(fmany[0], hex) &&
            !strcmp(fmany[1], hex),
        "sha256_files: %s", err.msg);
  free(buf);
  tmp_path(path, sizeof path, "no-such-file");
  CHECK(rc_sha256_file(path, fhex, &err) == RC_EXIT_NOINPUT && strstr(err.msg, "no-such-file"),
        "missing file: NOINPUT naming it (%s)", err.msg);
  files[1] = path;
  CHECK(rc_sha256_files(files, 2, 2, fmany, &err) == RC_EXIT_NOINPUT &&
            strstr(err.msg, "no-such-file"),
        "sha256_files: the failing file is named (%s)", err.msg);
}

static void test_fsutil(void) {
  char dir[4096], file[4096], path[4096];
  rc_err err = {0};
  tmp_path(dir, sizeof dir, "fs/a/b/c");
  CHECK(rc_mkdir_p(dir, &err) == 0 && rc_is_dir(dir), "mkdir -p: %s", err.msg);
  CHECK(rc_mkdir_p(dir, &err) == 0, "mkdir -p of an existing directory is fine");
  rc_path_join(file, sizeof file, dir, "f.txt");
  CHECK(rc_write_file_atomic(file, "hello", 5, &err) == 0, "atomic write: %s", err.msg);
  CHECK(rc_write_file_atomic(file, "bye", 3, &err) == 0, "atomic overwrite: %s", err.msg);
  char *data;
  size_t n;
  CHECK(rc_read_file(file, &data, &n, &err) == 0 && n == 3 && !strcmp(data, "bye"),
        "read back (NUL-terminated)");
  free(data);
  CHECK(rc_path_exists(file) && !rc_is_dir(file), "exists / not a dir");
  rc_path_join(path, sizeof path, file, "sub");
  CHECK(rc_mkdir_p(path, &err) == RC_EXIT_IOERR && strstr(err.msg, "f.txt"),
        "mkdir -p through a file: IOERR naming it (%s)", err.msg);
  tmp_path(path, sizeof path, "fs/missing");
  CHECK(rc_read_file(path, &data, &n, &err) == RC_EXIT_NOINPUT, "read missing: NOINPUT");
  /* not a regular file: refused as bad input, naming what it is (65) */
  CHECK(rc_read_file(dir, &data, &n, &err) == RC_EXIT_DATAERR && strstr(err.msg, "is a directory"),
        "read a directory: DATAERR (%s)", err.msg);
  /* No temp files left behind by the writes above. */
  DIR *d = opendir(dir);
  int entries = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') entries++;
  closedir(d);
  CHECK(entries == 1, "only f.txt in the directory (%d entries)", entries);
  char j[64];
  rc_path_join(j, sizeof j, "a/", "b");
  CHECK(!strcmp(j, "a/b"), "join with trailing slash");
  rc_path_join(j, sizeof j, "", "b");
  CHECK(!strcmp(j, "b"), "join with empty dir");
}

/* save -> load -> save: byte-identical files; PERTURB: different files and
 * exactly one dataset hash different in the manifest. 1100 experts make the
 * shard more than 1024 pieces, so the writer's writev batching is used. */
static void test_save_load_save(void) {
  char r1[4096], r2[4096], r3[4096], d1[4096], d2[4096], d3[4096], why[256];
  tmp_path(r1, sizeof r1, "sls1");
  tmp_path(r2, sizeof r2, "sls2");
  tmp_path(r3, sizeof r3, "sls3");
  iter_dir(d1, sizeof d1, r1);
  iter_dir(d2, sizeof d2, r2);
  iter_dir(d3, sizeof d3, r3);
  rc_err err = {0};
  CHECK(save_fix(r1, 0, 1100, &err) == 0, "save: %s", err.msg);

  iofix want, got;
  iofix_build(&want, 0, 1100);
  iofix_build(&got, IOFIX_EMPTY, 1100);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  CHECK(!states_bitwise_equal(&want.st, &got.st), "negative control: empty state differs");
  CHECK(rc_checkpoint_load(d1, &m, &got.st, &err) == 0, "load: %s", err.msg);
  CHECK(states_bitwise_equal(&want.st, &got.st),
        "loaded state is bitwise the saved one (NaN payloads, -0.0, subnormals)");
  CHECK(rc_checkpoint_save(r2, &m, &got.st, "{\"leg\":\"test\"}\n", &err) == 0, "resave: %s",
        err.msg);
  CHECK(dirs_identical(d1, d2, why, sizeof why), "save-load-save not byte-identical: %s", why);
  iofix_free(&want);
  iofix_free(&got);

  CHECK(save_fix(r3, IOFIX_PERTURB, 1100, &err) == 0, "save perturbed: %s", err.msg);
  char a[4096], b[4096];
  pathf(a, sizeof a, "%s/shard_00000_of_00001.h5", d1);
  pathf(b, sizeof b, "%s/shard_00000_of_00001.h5", d3);
  CHECK(!files_equal(a, b), "negative control: a perturbed state gives a different shard");
  pathf(a, sizeof a, "%s/manifest.json", d1);
  pathf(b, sizeof b, "%s/manifest.json", d3);
  CHECK(!files_equal(a, b), "negative control: and a different manifest");
  char *ta, *tb;
  size_t na, nb;
  if (rc_read_file(a, &ta, &na, &err) == 0 && rc_read_file(b, &tb, &nb, &err) == 0) {
    rc_json *ja = rc_json_parse(ta, na, NULL, 0), *jb = rc_json_parse(tb, nb, NULL, 0);
    const rc_json *da = rc_json_get(&rc_json_get(ja, "shards")->kids[0], "datasets");
    const rc_json *db = rc_json_get(&rc_json_get(jb, "shards")->kids[0], "datasets");
    int differing = 0;
    const char *which = "";
    for (int i = 0; i < da->nkids && i < db->nkids; i++)
      if (strcmp(rc_json_get_str(&da->kids[i], "sha256"),
                 rc_json_get_str(&db->kids[i], "sha256"))) {
        differing++;
        which = rc_json_get_str(&da->kids[i], "path");
      }
    CHECK(differing == 1 && !strcmp(which, "/model/decoder/layers/0/attention/qkv/weight"),
          "exactly the perturbed dataset's hash differs (%d, %s)", differing, which);
    rc_json_free(ja);
    rc_json_free(jb);
    free(ta);
    free(tb);
  }
}

/* The writer never copies tensor data through HDF5: it lays the caller's
 * buffers into the raw-data regions of a metadata-only image. The result
 * must be exactly the file HDF5 itself writes with the same property lists
 * when the data goes through H5Dwrite and the image through
 * H5Fget_file_image. Negative control: the reference of a perturbed state
 * differs. */
static size_t reference_image(const rc_state *st, unsigned char **out) {
  rc_shard_meta meta = iofix_meta(0, 1, IOFIX_CONFIG);
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
  hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_obj_track_times(fcpl, 0);
  H5Pset_obj_track_times(gcpl, 0);
  H5Pset_obj_track_times(dcpl, 0);
  H5Pset_fapl_core(fapl, 1 << 20, 0);
  H5Pset_meta_block_size(fapl, rc_shard_meta_block(&meta, st));
  H5Pset_libver_bounds(fapl, RC_SHARD_LIBVER_LOW, RC_SHARD_LIBVER_HIGH);
  H5Pset_layout(dcpl, H5D_CONTIGUOUS);
  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
  H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
  hid_t fid = H5Fcreate("rc-reference", H5F_ACC_TRUNC, fcpl, fapl);
  hid_t g = H5Gcreate2(fid, "meta", H5P_DEFAULT, gcpl, H5P_DEFAULT);
  char sha[RC_SHA256_HEX];
  rc_sha256_hex(IOFIX_CONFIG, strlen(IOFIX_CONFIG), sha);
  const char *strs[3][2] = {
      {"format", RC_SHARD_FORMAT}, {"config", IOFIX_CONFIG}, {"config_sha256", sha}};
  int32_t ints[3] = {RC_SHARD_FORMAT_VERSION, 0, 1};
  const char *int_names[3] = {"format_version", "rank", "world_size"};
  int64_t iteration = IOFIX_ITERATION;
  for (int k = 0; k < 6; k++) { /* the writer's attribute order */
    hid_t sp = H5Screate(H5S_SCALAR), a;
    if (k == 0 || k == 4 || k == 5) {
      const char *v = strs[k == 0 ? 0 : k - 3][1];
      hid_t t = H5Tcopy(H5T_C_S1);
      H5Tset_size(t, strlen(v) + 1);
      H5Tset_strpad(t, H5T_STR_NULLTERM);
      H5Tset_cset(t, H5T_CSET_UTF8);
      a = H5Acreate2(g, strs[k == 0 ? 0 : k - 3][0], t, sp, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(a, t, v);
      H5Tclose(t);
      H5Aclose(a);
    } else {
      a = H5Acreate2(g, int_names[k - 1], H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(a, H5T_NATIVE_INT32, &ints[k - 1]);
      H5Aclose(a);
      if (k == 3) {
        hid_t sp2 = H5Screate(H5S_SCALAR);
        a = H5Acreate2(g, "iteration", H5T_STD_I64LE, sp2, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT64, &iteration);
        H5Aclose(a);
        H5Sclose(sp2);
      }
    }
    H5Sclose(sp);
  }
  H5Gclose(g);
  for (int i = 0; i < st->count; i++) {
    const rc_tensor *t = &st->tensors[i];
    char pre[RC_PATH_MAX];
    for (const char *c = t->path + 1; (c = strchr(c, '/')); c++) {
      pathf(pre, sizeof pre, "%.*s", (int)(c - t->path), t->path);
      if (H5Lexists(fid, pre, H5P_DEFAULT) <= 0)
        H5Gclose(H5Gcreate2(fid, pre, H5P_DEFAULT, gcpl, H5P_DEFAULT));
    }
    hsize_t d[RC_MAX_DIMS];
    for (int k = 0; k < t->ndim; k++) d[k] = (hsize_t)t->shape[k];
    hid_t sp = t->ndim ? H5Screate_simple(t->ndim, d, NULL) : H5Screate(H5S_SCALAR);
    hid_t ds =
        H5Dcreate2(fid, t->path, rc_h5_file_type(t->dtype), sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (rc_tensor_nbytes(t))
      H5Dwrite(ds, rc_h5_mem_type(t->dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data);
    H5Dclose(ds);
    H5Sclose(sp);
  }
  H5Fflush(fid, H5F_SCOPE_GLOBAL);
  ssize_t n = H5Fget_file_image(fid, NULL, 0);
  *out = malloc(n > 0 ? (size_t)n : 1);
  if (n > 0) H5Fget_file_image(fid, *out, (size_t)n);
  H5Fclose(fid);
  H5Pclose(fcpl), H5Pclose(fapl), H5Pclose(gcpl), H5Pclose(dcpl);
  return n > 0 ? (size_t)n : 0;
}

/* The metadata estimate holds for the shapes of state the tests use (a
 * spill is slower, never wrong; this guards the speed without timing). */
static void test_metadata_block(void) {
  static const int experts[] = {0, 3, 40, 200, 1000};
  rc_err err = {0};
  for (size_t i = 0; i < sizeof experts / sizeof experts[0]; i++) {
    iofix f;
    iofix_build(&f, 0, experts[i]);
    rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
    rc_shard_image im;
    CHECK(rc_shard_build_image(&m, &f.st, &im, &err) == 0, "build: %s", err.msg);
    CHECK(!im.meta_spilled, "%d experts: metadata spilled past the estimated block", experts[i]);
    size_t data = 0;
    for (int k = 0; k < f.st.count; k++) data += rc_tensor_nbytes(&f.st.tensors[k]);
    CHECK(im.size < data + 2 * rc_shard_meta_block(&m, &f.st),
          "%d experts: %zu-byte file for %zu bytes of data", experts[i], im.size, data);
    rc_shard_image_free(&im);
    iofix_free(&f);
  }
  /* Negative control: a config far beyond what the estimate allowed for
   * (it is passed in after the estimate was made) does spill. */
  iofix f;
  iofix_build(&f, 0, 3);
  rc_shard_meta small = iofix_meta(0, 1, "{}");
  size_t block = rc_shard_meta_block(&small, &f.st);
  char *big = malloc(60001);
  memset(big, 'x', 60000);
  big[60000] = 0;
  rc_shard_meta m = iofix_meta(0, 1, big);
  CHECK(block < 60000 + rc_shard_meta_block(&m, &f.st), "a bigger config gets a bigger block");
  free(big);
  iofix_free(&f);
}

static void test_matches_hdf5_reference(void) {
  char root[4096], path[4096];
  tmp_path(root, sizeof root, "ref");
  rc_err err = {0};
  CHECK(save_fix(root, 0, 40, &err) == 0, "save: %s", err.msg);
  pathf(path, sizeof path, "%s/iter_%07d/shard_00000_of_00001.h5", root, IOFIX_ITERATION);
  char *ours;
  size_t n;
  CHECK(rc_read_file(path, &ours, &n, &err) == 0, "read: %s", err.msg);
  iofix f, p;
  iofix_build(&f, 0, 40);
  iofix_build(&p, IOFIX_PERTURB, 40);
  unsigned char *ref, *ref_p;
  size_t nref = reference_image(&f.st, &ref), nref_p = reference_image(&p.st, &ref_p);
  CHECK(nref == n && !memcmp(ref, ours, n),
        "the shard is not the file HDF5 writes via H5Dwrite (%zu vs %zu bytes)", n, nref);
  CHECK(nref_p != n || memcmp(ref_p, ours, n), "negative control: a perturbed reference differs");
  free(ref);
  free(ref_p);
  free(ours);
  iofix_free(&f);
  iofix_free(&p);
}

/* What the manifest and marker say is true of the files. */
static void test_manifest_content(void) {
  char root[4096], dir[4096], path[4096];
  tmp_path(root, sizeof root, "mf");
  iter_dir(dir, sizeof dir, root);
  rc_err err = {0};
  CHECK(save_fix(root, 0, 3, &err) == 0, "save: %s", err.msg);
  char *text, *marker;
  size_t n, mn;
  pathf(path, sizeof path, "%s/manifest.json", dir);
  if (rc_read_file(path, &text, &n, &err)) {
    CHECK(0, "read manifest: %s", err.msg);
    return;
  }
  rc_json *j = rc_json_parse(text, n, NULL, 0);
  CHECK(j, "manifest parses");
  int64_t v;
  CHECK(!strcmp(rc_json_get_str(j, "format"), "resumecheck-checkpoint"), "format");
  CHECK(rc_json_get_i64(j, "version", &v) && v == RC_MANIFEST_VERSION, "version");
  CHECK(rc_json_get_i64(j, "iteration", &v) && v == IOFIX_ITERATION, "iteration");
  CHECK(rc_json_get_i64(j, "world_size", &v) && v == 1, "world_size");
  CHECK(!strstr(text, "args.json") && !strstr(text, "\"leg\""),
        "args.json is not listed in the manifest");
  const rc_json *sh = &rc_json_get(j, "shards")->kids[0];
  char hex[RC_SHA256_HEX];
  pathf(path, sizeof path, "%s/%s", dir, rc_json_get_str(sh, "file"));
  struct stat st;
  CHECK(stat(path, &st) == 0 && rc_json_get_i64(sh, "bytes", &v) && v == st.st_size,
        "bytes is the shard's size");
  CHECK(rc_sha256_file(path, hex, &err) == 0 && !strcmp(hex, rc_json_get_str(sh, "sha256")),
        "sha256 is the shard's hash");
  iofix f;
  iofix_build(&f, 0, 3);
  const rc_json *ds = rc_json_get(sh, "datasets");
  CHECK(ds->nkids == f.st.count, "one entry per dataset (%d vs %d)", ds->nkids, f.st.count);
  for (int i = 0; i < ds->nkids && i < f.st.count; i++) {
    const rc_tensor *t = &f.st.tensors[i];
    rc_sha256_hex(t->data, rc_tensor_nbytes(t), hex);
    const rc_json *e = &ds->kids[i];
    const rc_json *shape = rc_json_get(e, "shape");
    CHECK(!strcmp(rc_json_get_str(e, "path"), t->path) &&
              !strcmp(rc_json_get_str(e, "dtype"), rc_dtype_name(t->dtype)) &&
              !strcmp(rc_json_get_str(e, "sha256"), hex) && shape->nkids == t->ndim,
          "dataset entry %d (%s) matches the tensor", i, t->path);
  }
  iofix_free(&f);
  pathf(path, sizeof path, "%s/COMPLETE", dir);
  CHECK(rc_read_file(path, &marker, &mn, &err) == 0, "COMPLETE readable");
  rc_sha256_hex(text, n, hex);
  char want[128];
  pathf(want, sizeof want, "%s  manifest.json\n", hex);
  CHECK(!strcmp(marker, want), "COMPLETE is sha256sum-style: '%s'", marker);
  pathf(path, sizeof path, "%s/args.json", dir);
  CHECK(rc_path_exists(path), "args.json written by rank 0");
  free(marker);
  rc_json_free(j);
  free(text);

  /* Saving again over a complete checkpoint is refused and changes nothing. */
  snap_t before = {0}, after = {0};
  snapshot(dir, &before);
  CHECK(save_fix(root, IOFIX_PERTURB, 3, &err) == RC_EXIT_IOERR &&
            strstr(err.msg, "refusing to overwrite"),
        "overwrite of a complete checkpoint refused (%s)", err.msg);
  snapshot(dir, &after);
  CHECK(!strcmp(before.buf, after.buf), "refused save left the directory as it was");
  free(before.buf);
  free(after.buf);
}

static void test_multi_rank(void) {
  char root[4096], dir[4096], path[4096];
  tmp_path(root, sizeof root, "mr");
  iter_dir(dir, sizeof dir, root);
  rc_err err = {0};
  const int W = 3;
  iofix f[3];
  for (int r = 0; r < W; r++) {
    iofix_build(&f[r], r == 1 ? IOFIX_PERTURB : 0, 2); /* rank states may differ */
    rc_shard_meta m = iofix_meta(r, W, IOFIX_CONFIG);
    CHECK(rc_checkpoint_save(root, &m, &f[r].st, r == 0 ? "{}" : NULL, &err) == 0,
          "save rank %d: %s", r, err.msg);
  }
  pathf(path, sizeof path, "%s/COMPLETE", dir);
  CHECK(!rc_path_exists(path), "no COMPLETE before finalize");
  iofix got;
  iofix_build(&got, IOFIX_EMPTY, 2);
  rc_shard_meta m0 = iofix_meta(0, W, IOFIX_CONFIG);
  CHECK(rc_checkpoint_load(dir, &m0, &got.st, &err) == RC_EXIT_NOINPUT &&
            strstr(err.msg, "no COMPLETE"),
        "an unfinalized multi-rank checkpoint is not loadable (%s)", err.msg);
  CHECK(rc_checkpoint_finalize(dir, W, IOFIX_ITERATION, &err) == 0, "finalize: %s", err.msg);
  CHECK(rc_path_exists(path), "COMPLETE after finalize");
  pathf(path, sizeof path, "%s/shard_00001_of_00003.manifest.json", dir);
  CHECK(!rc_path_exists(path), "fragments removed after the merge");
  for (int r = 0; r < W; r++) {
    rc_shard_meta m = iofix_meta(r, W, IOFIX_CONFIG);
    CHECK(rc_checkpoint_load(dir, &m, &got.st, &err) == 0, "load rank %d: %s", r, err.msg);
    CHECK(states_bitwise_equal(&got.st, &f[r].st), "rank %d gets its own state", r);
    CHECK(!states_bitwise_equal(&got.st, &f[(r + 1) % W].st) || r == 2,
          "negative control: rank %d's state is not rank %d's", r, (r + 1) % W);
  }
  /* A rank that never saved: finalize names it and writes no COMPLETE. */
  char root2[4096], dir2[4096];
  tmp_path(root2, sizeof root2, "mr2");
  iter_dir(dir2, sizeof dir2, root2);
  for (int r = 0; r < 2; r++) {
    rc_shard_meta m = iofix_meta(r, W, IOFIX_CONFIG);
    rc_checkpoint_save(root2, &m, &f[r].st, NULL, &err);
  }
  CHECK(rc_checkpoint_finalize(dir2, W, IOFIX_ITERATION, &err) == RC_EXIT_NOINPUT &&
            strstr(err.msg, "rank 2"),
        "finalize without rank 2: NOINPUT naming it (%s)", err.msg);
  pathf(path, sizeof path, "%s/COMPLETE", dir2);
  CHECK(!rc_path_exists(path), "and no COMPLETE");
  for (int r = 0; r < W; r++) iofix_free(&f[r]);
  iofix_free(&got);
}

static void test_latest(void) {
  char root[4096], path[4096], out[4096];
  rc_err err = {0};
  tmp_path(root, sizeof root, "latest");
  CHECK(rc_checkpoint_latest(root, out, sizeof out, &err) == RC_EXIT_NOINPUT,
        "missing root: NOINPUT");
  const char *dirs[] = {"iter_0000003", "iter_0000007", "iter_0000009", "iter_12x", "other"};
  const bool complete[] = {true, true, false, true, true};
  for (int i = 0; i < 5; i++) {
    pathf(path, sizeof path, "%s/%s", root, dirs[i]);
    rc_mkdir_p(path, &err);
    if (complete[i]) {
      pathf(path, sizeof path, "%s/%s/COMPLETE", root, dirs[i]);
      rc_write_file_atomic(path, "x", 1, &err);
    }
  }
  CHECK(rc_checkpoint_latest(root, out, sizeof out, &err) == 0 && strstr(out, "iter_0000007"),
        "latest complete is 7, not the incomplete 9 (%s)", out);
  char name[32];
  rc_iter_dirname(name, sizeof name, 5);
  CHECK(!strcmp(name, "iter_0000005"), "iter dirname");
  rc_iter_dirname(name, sizeof name, 12345678);
  CHECK(!strcmp(name, "iter_12345678"), "iter dirname beyond 7 digits");
}

/* The writer refuses paths HDF5 would misread and duplicates, before
 * creating anything on disk. */
static void test_writer_rejects(void) {
  static const char *bad[] = {"rel/path", "/meta/x", "/a//b", "/a/", "/a/./b", "/"};
  char root[4096];
  tmp_path(root, sizeof root, "rejects");
  rc_err err = {0};
  float v = 1;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rc_state s = {0};
    rc_state_add(&s, bad[i], RC_DT_F32, 0, NULL, &v);
    rc_shard_meta m = iofix_meta(0, 1, "{}");
    CHECK(rc_checkpoint_save(root, &m, &s, NULL, &err) == RC_EXIT_USAGE && strstr(err.msg, bad[i]),
          "bad path '%s' rejected with USAGE naming it (%s)", bad[i], err.msg);
    rc_state_free(&s);
  }
  rc_state s = {0};
  rc_state_add(&s, "/a/b", RC_DT_F32, 0, NULL, &v);
  rc_state_add(&s, "/a/b", RC_DT_F32, 0, NULL, &v);
  rc_shard_meta m = iofix_meta(0, 1, "{}");
  CHECK(rc_checkpoint_save(root, &m, &s, NULL, &err) == RC_EXIT_USAGE &&
            strstr(err.msg, "duplicate"),
        "duplicate path rejected (%s)", err.msg);
  rc_state_free(&s);
  rc_state_add(&s, "/a/b", RC_DT_F32, 0, NULL, &v);
  rc_state_add(&s, "/a/b/c", RC_DT_F32, 0, NULL, &v);
  CHECK(rc_checkpoint_save(root, &m, &s, NULL, &err) == RC_EXIT_USAGE &&
            strstr(err.msg, "already a dataset"),
        "dataset used as a group rejected (%s)", err.msg);
  rc_state_free(&s);
  CHECK(!rc_path_exists(root), "failed saves created nothing on disk");
  /* Negative control: a good path saves. */
  rc_state_add(&s, "/a/b", RC_DT_F32, 0, NULL, &v);
  CHECK(rc_checkpoint_save(root, &m, &s, NULL, &err) == 0, "good path saves: %s", err.msg);
  rc_state_free(&s);
}

/* Saves in a child process (so limits and permissions stay there); returns
 * the child's exit code, the save's return code. */
static int save_in_child(const char *root, rlim_t fsize_limit) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (fsize_limit) {
      signal(SIGXFSZ, SIG_IGN); /* get EFBIG from write(2) instead of a signal */
      struct rlimit rl = {fsize_limit, fsize_limit};
      setrlimit(RLIMIT_FSIZE, &rl);
    }
    rc_err err = {0};
    int rc = save_fix(root, 0, 3, &err);
    if (rc) fprintf(stderr, "  (child, expected) %s\n", err.msg);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* rc_write_file_atomic itself: a write that fails half-way (file-size
 * limit, EFBIG, in a child) reports IOERR, removes its temp file and leaves
 * the previous contents of the target as they were. Control: the same
 * write without the limit replaces them. */
static void test_atomic_write_failure(void) {
  char dir[4096], path[4096];
  rc_err err = {0};
  tmp_path(dir, sizeof dir, "atomic");
  rc_mkdir_p(dir, &err);
  pathf(path, sizeof path, "%s/target", dir);
  rc_write_file_atomic(path, "old contents", 12, &err);
  size_t n = 1 << 16;
  char *big = malloc(n);
  memset(big, 'n', n);
  for (int limit = 1; limit >= 0; limit--) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      if (limit) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
      }
      rc_err e = {0};
      int rc = rc_write_file_atomic(path, big, n, &e);
      if (rc) fprintf(stderr, "  (child, expected) %s\n", e.msg);
      _exit(rc == RC_EXIT_IOERR && strstr(e.msg, "File too large") ? 3 : rc);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char *data;
    size_t got;
    rc_read_file(path, &data, &got, &err);
    if (limit) {
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3, "failed write: IOERR saying why");
      CHECK(got == 12 && !memcmp(data, "old contents", 12), "target untouched by a failed write");
      CHECK(count_files(dir) == 1, "temp file removed (%d files)", count_files(dir));
    } else {
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "control: the write succeeds");
      CHECK(got == n && data[0] == 'n', "control: the target is replaced");
    }
    free(data);
  }
  free(big);
}

static void test_unwritable(void) {
  char root[4096], dir[4096], path[4096];
  rc_err err = {0};
  /* A write that fails half-way (file-size limit: EFBIG) leaves no shard, no
   * temp file and no COMPLETE. Control: the same save without the limit. */
  tmp_path(root, sizeof root, "efbig");
  iter_dir(dir, sizeof dir, root);
  CHECK(save_in_child(root, 4096) == RC_EXIT_IOERR, "write failure is IOERR");
  CHECK(count_files(dir) == 0, "nothing left in %s after the failed write (%d files)", dir,
        count_files(dir));
  tmp_path(root, sizeof root, "efbig-control");
  iter_dir(dir, sizeof dir, root);
  CHECK(save_in_child(root, 0) == 0, "negative control: the same save without a limit works");
  pathf(path, sizeof path, "%s/COMPLETE", dir);
  CHECK(rc_path_exists(path), "and writes COMPLETE");

  /* An output directory that cannot be created: a file in the way. */
  tmp_path(path, sizeof path, "blocker");
  rc_write_file_atomic(path, "x", 1, &err);
  pathf(root, sizeof root, "%s/ckpt", path);
  CHECK(save_fix(root, 0, 3, &err) == RC_EXIT_IOERR && strstr(err.msg, "blocker"),
        "uncreatable directory: IOERR naming it (%s)", err.msg);
  /* Permission bits: only meaningful when not root (root ignores them). */
  tmp_path(root, sizeof root, "readonly");
  rc_mkdir_p(root, &err);
  chmod(root, 0555);
  pathf(path, sizeof path, "%s/probe", root);
  int fd = open(path, O_WRONLY | O_CREAT, 0644);
  if (fd >= 0) {
    close(fd);
    unlink(path);
    printf("  (running as root: permission-bit case covered by io_full_fs's read-only mount)\n");
  } else {
    CHECK(save_fix(root, 0, 3, &err) == RC_EXIT_IOERR && strstr(err.msg, "Permission denied"),
          "read-only directory: IOERR, permission denied (%s)", err.msg);
    iter_dir(dir, sizeof dir, root);
    pathf(path, sizeof path, "%s/COMPLETE", dir);
    CHECK(!rc_path_exists(path), "and no COMPLETE");
  }
  chmod(root, 0755);
}

static void test_load_misc(void) {
  char root[4096], dir[4096];
  rc_err err = {0};
  iofix got;
  iofix_build(&got, IOFIX_EMPTY, 3);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  tmp_path(dir, sizeof dir, "does-not-exist");
  CHECK(rc_checkpoint_load(dir, &m, &got.st, &err) == RC_EXIT_NOINPUT &&
            strstr(err.msg, "does-not-exist"),
        "missing directory: NOINPUT (%s)", err.msg);
  tmp_path(root, sizeof root, "misc");
  iter_dir(dir, sizeof dir, root);
  CHECK(save_fix(root, 0, 3, &err) == 0, "save: %s", err.msg);
  /* The caller may know only the config hash. */
  char sha[RC_SHA256_HEX];
  rc_sha256_hex(IOFIX_CONFIG, strlen(IOFIX_CONFIG), sha);
  rc_shard_meta by_hash = {
      RC_SHARD_FORMAT_VERSION, 0, 1, IOFIX_ITERATION, NULL, sha, 0, false, false};
  CHECK(rc_checkpoint_load(dir, &by_hash, &got.st, &err) == 0, "load by config hash: %s", err.msg);
  sha[0] = sha[0] == '0' ? '1' : '0';
  CHECK(rc_checkpoint_load(dir, &by_hash, &got.st, &err) == RC_EXIT_DATAERR &&
            strstr(err.msg, "config mismatch"),
        "wrong config hash rejected (%s)", err.msg);
  /* Nested config keys are named with their path. */
  rc_shard_meta nested = iofix_meta(0, 1,
                                    "{\"hidden\":8,\"layers\":2,\"lr\":0.001,\"seed\":1234,"
                                    "\"opt\":{\"beta1\":0.9}}");
  CHECK(rc_checkpoint_load(dir, &nested, &got.st, &err) == RC_EXIT_DATAERR &&
            strstr(err.msg, "'opt' is (absent) in the checkpoint"),
        "extra key named (%s)", err.msg);
  rc_shard_meta bad_rank = iofix_meta(1, 1, IOFIX_CONFIG);
  CHECK(rc_checkpoint_load(dir, &bad_rank, &got.st, &err) == RC_EXIT_USAGE,
        "rank outside the world: USAGE (%s)", err.msg);
  iofix_free(&got);
}

/* ------------------------------------------------- forged shard structure */

static uint64_t get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Loads `shard` as dir's shard with manifest.json and COMPLETE forged to its
 * SHA-256, as a forger would: the hash passes, so only the structure check
 * stands between these bytes and libhdf5. The files are restored after. */
static int load_forged(const char *dir, const unsigned char *shard, size_t n, rc_err *err) {
  char spath[4096], mpath[4096], cpath[4096];
  pathf(spath, sizeof spath, "%s/shard_00000_of_00001.h5", dir);
  pathf(mpath, sizeof mpath, "%s/manifest.json", dir);
  pathf(cpath, sizeof cpath, "%s/COMPLETE", dir);
  char *good_shard = NULL, *manifest = NULL, *complete = NULL;
  size_t good_n = 0, mn = 0, cn = 0;
  rc_err e = {0};
  if (rc_read_file(spath, &good_shard, &good_n, &e) || rc_read_file(mpath, &manifest, &mn, &e) ||
      rc_read_file(cpath, &complete, &cn, &e)) {
    fprintf(stderr, "test_io: %s\n", e.msg);
    abort();
  }
  char good_sha[RC_SHA256_HEX], sha[RC_SHA256_HEX], marker[128];
  rc_sha256_hex(good_shard, good_n, good_sha);
  rc_sha256_hex(shard, n, sha);
  /* every occurrence: the whole-file hash and, for a one-chunk shard, the
   * chunk hash (the same bytes) */
  char *forged = malloc(mn + 1);
  if (!forged) abort();
  memcpy(forged, manifest, mn + 1);
  char *at = strstr(forged, good_sha);
  CHECK(at && n == good_n, "forged load: the manifest lists the shard's hash, sizes equal");
  for (char *p = at; p; p = strstr(p + 64, good_sha)) memcpy(p, sha, 64);
  rc_sha256_hex(forged, mn, sha);
  int k = snprintf(marker, sizeof marker, "%s  manifest.json\n", sha);
  CHECK(rc_write_file_atomic(spath, shard, n, &e) == 0 &&
            rc_write_file_atomic(mpath, forged, mn, &e) == 0 &&
            rc_write_file_atomic(cpath, marker, (size_t)k, &e) == 0,
        "forged load: writing (%s)", e.msg);
  iofix got;
  iofix_build(&got, IOFIX_EMPTY, 3);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  memset(err, 0, sizeof *err);
  int rc = rc_checkpoint_load(dir, &m, &got.st, err);
  iofix_free(&got);
  free(forged);
  CHECK(rc_write_file_atomic(spath, good_shard, good_n, &e) == 0 &&
            rc_write_file_atomic(mpath, manifest, mn, &e) == 0 &&
            rc_write_file_atomic(cpath, complete, cn, &e) == 0,
        "forged load: restoring (%s)", e.msg);
  free(good_shard);
  free(manifest);
  free(complete);
  return rc;
}

/* Shards have no metadata checksums (superblock v0, object header v1), so a
 * forged length field made libhdf5 malloc gigabytes (robust_fuzz). Each
 * forged field must be refused before libhdf5 parses the file: 65, naming
 * the structure. The control: the same bytes unforged, through the same
 * forging path, load. */
static void test_forged_structure(void) {
  char root[4096], dir[4096], spath[4096];
  rc_err err = {0};
  tmp_path(root, sizeof root, "forged");
  iter_dir(dir, sizeof dir, root);
  CHECK(save_fix(root, 0, 3, &err) == 0, "save: %s", err.msg);
  pathf(spath, sizeof spath, "%s/shard_00000_of_00001.h5", dir);
  char *good = NULL;
  size_t n = 0;
  if (rc_read_file(spath, &good, &n, &err) || n < 96) {
    CHECK(0, "reading the shard: %s", err.msg);
    free(good);
    return;
  }
  unsigned char *img = malloc(n);
  if (!img) abort();

  memcpy(img, good, n);
  int rc = load_forged(dir, img, n, &err);
  CHECK(rc == 0, "control: the unforged shard loads through the forging path (%d: %s)", rc,
        err.msg);

  /* superblock: end-of-file address (offset 40) one block past the size */
  CHECK(get_le64(img + 40) == n, "control: the end-of-file address is the size");
  put_le64(img + 40, n + 4096);
  rc = load_forged(dir, img, n, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "superblock") &&
            strstr(err.msg, "end-of-file address"),
        "forged end-of-file address: 65 naming the superblock (%d: %s)", rc, err.msg);
  memcpy(img, good, n);
  img[8] = 2; /* superblock version 2 */
  rc = load_forged(dir, img, n, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "superblock: version 2"),
        "forged superblock version: 65 (%d: %s)", rc, err.msg);

  /* /meta's object header starts with a continuation message (its
   * attributes did not fit in the first chunk): its length forged to the
   * size robust_fuzz's OOM report showed */
  memcpy(img, good, n);
  hid_t fid = H5Fopen(spath, H5F_ACC_RDONLY, H5P_DEFAULT);
  H5O_info_t info;
  bool found =
      fid >= 0 && H5Oget_info_by_name2(fid, "meta", &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0;
  if (fid >= 0) H5Fclose(fid);
  uint64_t msg = found ? (uint64_t)info.addr + 16 : 0;
  CHECK(found && msg + 24 <= n && img[msg] == 0x10 && img[msg + 1] == 0,
        "control: /meta's first message is a continuation");
  if (found && msg + 24 <= n) {
    put_le64(img + msg + 16, 4295491589u);
    rc = load_forged(dir, img, n, &err);
    CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "object header at") &&
              strstr(err.msg, "runs past the end of the file"),
          "forged continuation length: 65 naming the object header (%d: %s)", rc, err.msg);
  }

  /* the root group's local heap (its symbol table message is the root
   * object header's first): data size forged */
  memcpy(img, good, n);
  uint64_t oh = get_le64(img + 64), heap = oh + 40 <= n ? get_le64(img + oh + 32) : n;
  bool have_heap =
      oh + 40 <= n && img[oh + 16] == 0x11 && heap + 32 <= n && !memcmp(img + heap, "HEAP", 4);
  CHECK(have_heap, "control: the root group's heap found");
  if (have_heap) {
    put_le64(img + heap + 8, (uint64_t)1 << 40);
    rc = load_forged(dir, img, n, &err);
    CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "local heap at"),
          "forged local heap size: 65 naming the heap (%d: %s)", rc, err.msg);
  }

  /* and the unforged directory, restored, still loads */
  iofix got;
  iofix_build(&got, IOFIX_EMPTY, 3);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  CHECK(rc_checkpoint_load(dir, &m, &got.st, &err) == 0, "restored copy loads: %s", err.msg);
  iofix_free(&got);
  free(img);
  free(good);
}

/* ---------------------------------------------------------- chunk hashes */

static int load_dir(const char *dir, rc_err *err);

enum { TEST_CHUNK = 4096 }; /* the smallest allowed: an 82 KB shard has 21 chunks */

static int save_fix_chunked(const char *root, int64_t chunk_bytes, rc_err *err) {
  iofix f;
  iofix_build(&f, 0, 3);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  m.chunk_bytes = chunk_bytes;
  int rc = rc_checkpoint_save(root, &m, &f.st, "{\"leg\":\"test\"}\n", err);
  iofix_free(&f);
  return rc;
}

static rc_manifest read_manifest(const char *dir) {
  char path[4096];
  pathf(path, sizeof path, "%s/manifest.json", dir);
  char *text = NULL;
  size_t n = 0;
  rc_err e = {0};
  rc_manifest m = {0};
  if (rc_read_file(path, &text, &n, &e) || rc_manifest_parse(text, n, path, &m, &e)) {
    fprintf(stderr, "test_io: %s\n", e.msg);
    abort();
  }
  free(text);
  return m;
}

/* Writes `text` as dir's manifest with COMPLETE to match (a forger, or an
 * older build), loads, and restores both files. */
static int load_with_manifest_text(const char *dir, const char *text, size_t n, rc_err *err) {
  char mpath[4096], cpath[4096], marker[128], sha[RC_SHA256_HEX];
  pathf(mpath, sizeof mpath, "%s/manifest.json", dir);
  pathf(cpath, sizeof cpath, "%s/COMPLETE", dir);
  char *old = NULL, *complete = NULL;
  size_t on = 0, cn = 0;
  rc_err e = {0};
  if (rc_read_file(mpath, &old, &on, &e) || rc_read_file(cpath, &complete, &cn, &e)) {
    fprintf(stderr, "test_io: %s\n", e.msg);
    abort();
  }
  rc_sha256_hex(text, n, sha);
  int k = snprintf(marker, sizeof marker, "%s  manifest.json\n", sha);
  CHECK(rc_write_file_atomic(mpath, text, n, &e) == 0 &&
            rc_write_file_atomic(cpath, marker, (size_t)k, &e) == 0,
        "manifest text: writing (%s)", e.msg);
  int rc = load_dir(dir, err);
  CHECK(rc_write_file_atomic(mpath, old, on, &e) == 0 &&
            rc_write_file_atomic(cpath, complete, cn, &e) == 0,
        "manifest text: restoring (%s)", e.msg);
  free(old);
  free(complete);
  return rc;
}

/* The manifest `m` as text, loaded in place of dir's. */
static int load_with_manifest(const char *dir, const rc_manifest *m, rc_err *err) {
  size_t n;
  char *text = rc_manifest_text(m, &n);
  int rc = load_with_manifest_text(dir, text, n, err);
  free(text);
  return rc;
}

static void flip_byte(const char *path, uint64_t at) {
  FILE *f = fopen(path, "r+b");
  int c = f && fseek(f, (long)at, SEEK_SET) == 0 ? fgetc(f) : EOF;
  bool ok = c != EOF && fseek(f, (long)at, SEEK_SET) == 0 && fputc(c ^ 0x01, f) != EOF;
  if (f) fclose(f);
  CHECK(ok, "flipping byte %llu of %s", (unsigned long long)at, path);
}

/* A save records the SHA-256 of every chunk_bytes slice of each shard; they
 * equal SHA-256 of the file's slices computed independently (here from
 * the file's bytes; io_chunk_hashes.sh with dd and sha256sum), and the
 * shard is byte-identical to a save without chunk hashes. */
static void test_chunk_hashes_recorded(void) {
  char root[4096], root1[4096], dir[4096], dir1[4096], path[4096], path1[4096];
  rc_err err = {0};
  tmp_path(root, sizeof root, "chunked");
  tmp_path(root1, sizeof root1, "unchunked");
  iter_dir(dir, sizeof dir, root);
  iter_dir(dir1, sizeof dir1, root1);
  CHECK(save_fix_chunked(root, TEST_CHUNK, &err) == 0, "chunked save: %s", err.msg);
  CHECK(save_fix_chunked(root1, RC_CHUNKS_NONE, &err) == 0, "unchunked save: %s", err.msg);
  pathf(path, sizeof path, "%s/shard_00000_of_00001.h5", dir);
  pathf(path1, sizeof path1, "%s/shard_00000_of_00001.h5", dir1);
  CHECK(files_equal(path, path1), "chunk hashes do not change the shard's bytes");
  rc_manifest m = read_manifest(dir), m1 = read_manifest(dir1);
  const rc_mf_shard *s = &m.shards[0];
  char *bytes = NULL;
  size_t n = 0;
  CHECK(rc_read_file(path, &bytes, &n, &err) == 0, "read shard: %s", err.msg);
  uint64_t want = (n + TEST_CHUNK - 1) / TEST_CHUNK;
  CHECK(s->chunk_bytes == TEST_CHUNK && (uint64_t)s->nchunks == want && want > 2,
        "chunk_bytes %llu and %d chunks recorded (want %llu)", (unsigned long long)s->chunk_bytes,
        s->nchunks, (unsigned long long)want);
  int equal = 0;
  for (int k = 0; k < s->nchunks; k++) {
    char hex[RC_SHA256_HEX];
    size_t a = (size_t)k * TEST_CHUNK, len = n - a < TEST_CHUNK ? n - a : TEST_CHUNK;
    rc_sha256_hex(bytes + a, len, hex);
    equal += !strcmp(hex, s->chunk_sha256[k]);
  }
  CHECK(equal == s->nchunks, "every chunk hash is SHA-256 of its slice (%d of %d)", equal,
        s->nchunks);
  /* negative control: each slice with its last byte flipped matches none */
  int flipped = 0;
  for (int k = 0; k < s->nchunks; k++) {
    char hex[RC_SHA256_HEX];
    size_t a = (size_t)k * TEST_CHUNK, len = n - a < TEST_CHUNK ? n - a : TEST_CHUNK;
    bytes[a + len - 1] ^= 1;
    rc_sha256_hex(bytes + a, len, hex);
    bytes[a + len - 1] ^= 1;
    flipped += !strcmp(hex, s->chunk_sha256[k]);
  }
  CHECK(flipped == 0, "negative control: flipped slices match no chunk hash (%d)", flipped);
  CHECK(!strcmp(s->sha256, m1.shards[0].sha256), "whole-file sha256 still recorded, the same");
  CHECK(m1.shards[0].chunk_bytes == 0 && m1.shards[0].nchunks == 0,
        "RC_CHUNKS_NONE records no chunks");
  char mp[4096], *text = NULL;
  size_t tn = 0;
  pathf(mp, sizeof mp, "%s/manifest.json", dir1);
  CHECK(rc_read_file(mp, &text, &tn, &err) == 0 && strstr(text, "\"version\": 1") &&
            !strstr(text, "chunk"),
        "without chunks the manifest is version 1, no chunk fields");
  free(text);
  pathf(mp, sizeof mp, "%s/manifest.json", dir);
  CHECK(rc_read_file(mp, &text, &tn, &err) == 0 && strstr(text, "\"version\": 2") &&
            strstr(text, "\"chunk_bytes\": 4096"),
        "with chunks the manifest is version 2 with chunk_bytes");
  free(text);
  /* the default is RC_CHUNK_BYTES: one chunk for a small shard */
  char root2[4096], dir2[4096];
  tmp_path(root2, sizeof root2, "chunk_default");
  iter_dir(dir2, sizeof dir2, root2);
  CHECK(save_fix_chunked(root2, 0, &err) == 0, "default save: %s", err.msg);
  rc_manifest m2 = read_manifest(dir2);
  CHECK(m2.shards[0].chunk_bytes == RC_CHUNK_BYTES && m2.shards[0].nchunks == 1 &&
            !strcmp(m2.shards[0].chunk_sha256[0], m2.shards[0].sha256),
        "default chunk size recorded; one chunk is the whole file");
  CHECK(save_fix_chunked(root2, 100, &err) == RC_EXIT_USAGE, "a chunk size below %llu refused",
        (unsigned long long)RC_CHUNK_BYTES_MIN);
  rc_manifest_free(&m2);
  free(bytes);
  rc_manifest_free(&m);
  rc_manifest_free(&m1);
}

/* On load, every chunk is verified: one flipped byte in the middle is 65
 * naming that chunk's byte range; a forged chunk hash is 65; a manifest
 * without chunk fields (version 1) still loads through the whole-file hash,
 * and catches the same flip there. rc_shard_verify_file gives the same
 * verdicts on any thread count. */
static void test_chunk_hashes_verified(void) {
  char root[4096], dir[4096], path[4096], range[96];
  rc_err err = {0};
  tmp_path(root, sizeof root, "chunk_verify");
  iter_dir(dir, sizeof dir, root);
  CHECK(save_fix_chunked(root, TEST_CHUNK, &err) == 0, "save: %s", err.msg);
  pathf(path, sizeof path, "%s/shard_00000_of_00001.h5", dir);
  rc_manifest m = read_manifest(dir);
  rc_mf_shard *s = &m.shards[0];
  int mid = s->nchunks / 2;
  uint64_t a, b;
  rc_mf_chunk_range(s, mid, &a, &b);
  pathf(range, sizeof range, "bytes [%llu, %llu)", (unsigned long long)a, (unsigned long long)b);

  CHECK(load_dir(dir, &err) == 0, "control: the chunked checkpoint loads (%s)", err.msg);
  for (int t = 1; t <= 4; t *= 2)
    CHECK(rc_shard_verify_file(path, s, t, &err) == 0, "control: verify_file, %d threads: %s", t,
          err.msg);

  /* a manifest without chunk fields loads through the whole-file hash */
  rc_mf_shard v1 = *s;
  v1.chunk_bytes = 0;
  v1.nchunks = 0;
  v1.chunk_sha256 = NULL;
  rc_manifest m1 = {.iteration = m.iteration, .world_size = 1, .shards = &v1};
  int rc = load_with_manifest(dir, &m1, &err);
  CHECK(rc == 0, "a version-1 manifest (no chunk fields) loads (%d: %s)", rc, err.msg);
  CHECK(rc_shard_verify_file(path, &v1, 0, &err) == 0, "verify_file, whole-file hash: %s", err.msg);

  /* one flipped byte in the middle chunk */
  flip_byte(path, (a + b) / 2);
  rc = load_dir(dir, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "corrupt") && strstr(err.msg, range) &&
            strstr(err.msg, "shard_00000_of_00001.h5"),
        "flipped byte: 65 naming the shard and %s (%d: %s)", range, rc, err.msg);
  printf("  flipped byte, chunked            -> %d  %s\n", rc, err.msg);
  for (int t = 1; t <= 4; t *= 2) {
    rc = rc_shard_verify_file(path, s, t, &err);
    CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, range),
          "verify_file, %d threads: 65 naming %s (%d: %s)", t, range, rc, err.msg);
  }
  /* negative control: through the whole-file hash the flip is caught too,
   * but with no range to name */
  rc = load_with_manifest(dir, &m1, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "corrupt: SHA-256 is") &&
            !strstr(err.msg, "bytes ["),
        "version 1: the flip is 65 by the whole-file hash, no range (%d: %s)", rc, err.msg);
  rc = rc_shard_verify_file(path, &v1, 0, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "corrupt: SHA-256 is"),
        "verify_file, whole-file hash: the flip is 65 (%d: %s)", rc, err.msg);
  flip_byte(path, (a + b) / 2); /* restored */
  CHECK(load_dir(dir, &err) == 0, "restored shard loads again (%s)", err.msg);

  /* a forged chunk hash (COMPLETE rewritten to match): the whole-file hash
   * and every byte are right, yet it is refused, naming the chunk */
  char saved = s->chunk_sha256[mid][7];
  s->chunk_sha256[mid][7] = saved == 'a' ? 'b' : 'a';
  rc = load_with_manifest(dir, &m, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, range), "forged chunk hash: 65 naming %s (%d: %s)",
        range, rc, err.msg);
  printf("  forged chunk hash                -> %d  %s\n", rc, err.msg);
  s->chunk_sha256[mid][7] = saved;
  rc = load_with_manifest(dir, &m, &err);
  CHECK(rc == 0, "control: the same rewrite with the true hash loads (%d: %s)", rc, err.msg);

  /* strict versions: chunk fields only in version 2, required there */
  char mp[4096], *text = NULL;
  size_t n = 0;
  pathf(mp, sizeof mp, "%s/manifest.json", dir);
  if (rc_read_file(mp, &text, &n, &err) == 0) {
    char *v = strstr(text, "\"version\": 2");
    CHECK(v != NULL, "manifest says version 2");
    if (v) {
      v[11] = '1';
      rc = load_with_manifest_text(dir, text, n, &err);
      CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "version 1 manifest"),
            "chunk fields in a version-1 manifest: 65 (%d: %s)", rc, err.msg);
      v[11] = '3';
      rc = load_with_manifest_text(dir, text, n, &err);
      CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "unknown format version 3"),
            "version 3: 65 (%d: %s)", rc, err.msg);
      v[11] = '2';
      char *cb = strstr(text, "\"chunk_bytes\": 4096");
      if (cb) memcpy(cb, "\"chunk_bytex\"", 13);
      rc = load_with_manifest_text(dir, text, n, &err);
      CHECK(cb && rc == RC_EXIT_DATAERR && strstr(err.msg, "chunk_bytes missing"),
            "version 2 without chunk_bytes: 65 (%d: %s)", rc, err.msg);
    }
    free(text);
  }
  rc_manifest_free(&m);
}

/* ---------------------------------------------------------------- fixtures */

typedef struct {
  const char *name;
  int code;
  const char *msg[3]; /* substrings the message must contain */
} fixture_case;

static const fixture_case k_cases[] = {
    {"good", 0, {NULL}},
    {"truncated", RC_EXIT_DATAERR, {"truncated", "shard_00000_of_00001.h5"}},
    {"trailing_data", RC_EXIT_DATAERR, {"wrong size", "shard_00000_of_00001.h5"}},
    {"flipped_byte", RC_EXIT_DATAERR, {"corrupt", "SHA-256"}},
    {"manifest_tampered", RC_EXIT_DATAERR, {"manifest.json does not match", "COMPLETE"}},
    {"missing_dataset", RC_EXIT_DATAERR, {"missing dataset " IOFIX_TARGET}},
    {"unexpected_dataset", RC_EXIT_DATAERR, {"unexpected dataset /model/extra/weight"}},
    {"wrong_shape", RC_EXIT_DATAERR, {IOFIX_TARGET " has shape [24, 9], expected [24, 8]"}},
    {"wrong_dtype", RC_EXIT_DATAERR, {IOFIX_TARGET " has dtype float64, expected float32"}},
    {"unknown_version", RC_EXIT_DATAERR, {"unknown shard format version 99"}},
    {"config_mismatch",
     RC_EXIT_DATAERR,
     {"config mismatch", "'lr' is 0.002 in the checkpoint, 0.001 in this run"}},
    {"world_size_mismatch",
     RC_EXIT_DATAERR,
     {"world size mismatch", "saved with world size 2", "this run has 1"}},
    {"no_complete", RC_EXIT_DATAERR, {"no COMPLETE marker"}},
    {"no_manifest", RC_EXIT_NOINPUT, {"no manifest.json"}},
    {"missing_shard", RC_EXIT_NOINPUT, {"shard_00000_of_00001.h5 is missing"}},
};

static void test_fixtures(const char *fixdir) {
  char dir[4096];
  const char *messages[sizeof k_cases / sizeof k_cases[0]];
  rc_err errs[sizeof k_cases / sizeof k_cases[0]];
  int n = (int)(sizeof k_cases / sizeof k_cases[0]);
  for (int i = 0; i < n; i++) {
    const fixture_case *c = &k_cases[i];
    pathf(dir, sizeof dir, "%s/%s/iter_%07d", fixdir, c->name, IOFIX_ITERATION);
    if (!rc_is_dir(dir)) {
      CHECK(0, "fixture %s missing (%s)", c->name, dir);
      messages[i] = "";
      continue;
    }
    iofix got, want;
    iofix_build(&got, IOFIX_EMPTY, 3);
    iofix_build(&want, 0, 3);
    rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
    snap_t before = {0}, after = {0};
    snapshot(dir, &before);
    memset(&errs[i], 0, sizeof errs[i]);
    int rc = rc_checkpoint_load(dir, &m, &got.st, &errs[i]);
    snapshot(dir, &after);
    messages[i] = errs[i].msg;
    CHECK(rc == c->code, "fixture %s: code %d, expected %d (%s)", c->name, rc, c->code,
          errs[i].msg);
    for (int k = 0; k < 3 && c->msg[k]; k++)
      CHECK(strstr(errs[i].msg, c->msg[k]), "fixture %s: message lacks '%s': %s", c->name,
            c->msg[k], errs[i].msg);
    if (c->code == 0)
      CHECK(states_bitwise_equal(&got.st, &want.st), "fixture good: values load bitwise");
    CHECK(!strcmp(before.buf, after.buf), "fixture %s: the load changed the directory:\n%s---\n%s",
          c->name, before.buf, after.buf);
    if (c->code) printf("  %-20s -> %d  %s\n", c->name, rc, errs[i].msg);
    free(before.buf);
    free(after.buf);
    iofix_free(&got);
    iofix_free(&want);
  }
  /* Each rejection has its own message. */
  for (int i = 1; i < n; i++)
    for (int j = 1; j < i; j++)
      CHECK(strcmp(messages[i], messages[j]), "fixtures %s and %s give the same message",
            k_cases[i].name, k_cases[j].name);
}

/* ------------------------------------------- what a load opens (issue 16) */

/* Loads dir with a fresh state under a 20 s alarm: a load that blocks (a
 * FIFO) or never ends (/dev/zero) kills the test instead of hanging it. */
/* load_dir's mode: a copying load, or one into a caller's buffer whose
 * dataset hashes are taken while the file is read (rc_checkpoint_load_into) */
static bool g_load_into;
static unsigned char *give_buffer(void *ctx, size_t bytes);
typedef struct {
  unsigned char *p;
  size_t cap;
  int calls;
} test_buffer;

static int load_dir(const char *dir, rc_err *err) {
  iofix got;
  iofix_build(&got, IOFIX_EMPTY, 3);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  memset(err, 0, sizeof *err);
  alarm(20);
  int rc;
  if (g_load_into) {
    void **own = calloc((size_t)got.st.count, sizeof *own);
    for (int i = 0; i < got.st.count; i++)
      own[i] = got.st.tensors[i].data, got.st.tensors[i].data = NULL;
    test_buffer buf = {0};
    rc_load_into into = {.buffer = give_buffer, .buffer_ctx = &buf};
    rc = rc_checkpoint_load_into(dir, &m, &got.st, &into, err);
    for (int i = 0; i < got.st.count; i++) got.st.tensors[i].data = own[i];
    free(own);
    free(buf.p);
  } else {
    rc = rc_checkpoint_load(dir, &m, &got.st, err);
  }
  alarm(0);
  iofix_free(&got);
  return rc;
}

/* Replaces dir/name by what make() builds there, loads, restores. */
typedef void (*make_fn)(const char *path, const char *aside);

static void mk_dir(const char *path, const char *aside) {
  (void)aside;
  mkdir(path, 0777);
}
static void mk_fifo(const char *path, const char *aside) {
  (void)aside;
  mkfifo(path, 0666);
}
static void mk_link_to_copy(const char *path, const char *aside) {
  CHECK(symlink(aside, path) == 0, "symlink %s: %s", path, strerror(errno));
}
static char g_fifo[4096];
static void mk_link_to_fifo(const char *path, const char *aside) {
  (void)aside;
  CHECK(symlink(g_fifo, path) == 0, "symlink %s: %s", path, strerror(errno));
}
static void mk_link_to_zero(const char *path, const char *aside) {
  (void)aside; /* a link in the temp dir; /dev itself is never written */
  CHECK(symlink("/dev/zero", path) == 0, "symlink %s: %s", path, strerror(errno));
}
static void mk_huge(const char *path, const char *aside) {
  (void)aside; /* sparse: 65 MiB of nothing */
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  CHECK(fd >= 0 && ftruncate(fd, (off_t)65 << 20) == 0, "sparse file %s", path);
  if (fd >= 0) close(fd);
}

static void hostile_case(const char *dir, const char *name, make_fn make, int want_code,
                         const char *want_msg) {
  char path[4096], aside[4096];
  pathf(path, sizeof path, "%s/%s", dir, name);
  pathf(aside, sizeof aside, "%s/%s.aside", g_tmp, name);
  CHECK(rename(path, aside) == 0, "moving %s aside", path);
  make(path, aside);
  rc_err err;
  int rc = load_dir(dir, &err);
  CHECK(rc == want_code && strstr(err.msg, name) && strstr(err.msg, want_msg),
        "%s replaced: code %d (want %d), message '%s' (want the name and '%s')", name, rc,
        want_code, err.msg, want_msg);
  printf("  %-34s -> %d  %s\n", name, rc, err.msg);
  struct stat st;
  if (lstat(path, &st) == 0) S_ISDIR(st.st_mode) ? rmdir(path) : unlink(path);
  CHECK(rename(aside, path) == 0, "restoring %s", path);
}

/* Metadata (manifest.json, COMPLETE) and shards are read only when they are
 * regular files: a FIFO blocked the load forever, a link to /dev/zero grew
 * it without bound, a directory gave "No such device"-style errors. Each
 * case is refused at once with 65, naming the file and what it is. The
 * control: the restored directory loads, so every refusal is the file's
 * kind, not the replacing. */
static void test_load_regular_files_only(void) {
  char root[4096], dir[4096];
  rc_err err = {0};
  tmp_path(root, sizeof root, "hostile");
  iter_dir(dir, sizeof dir, root);
  CHECK(save_fix(root, 0, 3, &err) == 0, "save: %s", err.msg);
  tmp_path(g_fifo, sizeof g_fifo, "a_fifo");
  CHECK(mkfifo(g_fifo, 0666) == 0, "mkfifo: %s", strerror(errno));
  CHECK(load_dir(dir, &err) == 0, "control: the untouched checkpoint loads (%s)", err.msg);
  const char *shard = "shard_00000_of_00001.h5";
  hostile_case(dir, "manifest.json", mk_dir, RC_EXIT_DATAERR, "is a directory");
  hostile_case(dir, "manifest.json", mk_fifo, RC_EXIT_DATAERR, "is a FIFO");
  hostile_case(dir, "manifest.json", mk_link_to_fifo, RC_EXIT_DATAERR, "symbolic link");
  hostile_case(dir, "manifest.json", mk_link_to_copy, RC_EXIT_DATAERR, "symbolic link");
  hostile_case(dir, "manifest.json", mk_huge, RC_EXIT_DATAERR, "more than the");
  hostile_case(dir, "COMPLETE", mk_link_to_zero, RC_EXIT_DATAERR, "symbolic link");
  hostile_case(dir, "COMPLETE", mk_fifo, RC_EXIT_DATAERR, "is a FIFO");
  hostile_case(dir, "COMPLETE", mk_dir, RC_EXIT_DATAERR, "is a directory");
  hostile_case(dir, shard, mk_fifo, RC_EXIT_DATAERR, "is a FIFO");
  hostile_case(dir, shard, mk_link_to_fifo, RC_EXIT_DATAERR, "is a FIFO");
  hostile_case(dir, shard, mk_link_to_zero, RC_EXIT_DATAERR, "is a character device");
  hostile_case(dir, shard, mk_dir, RC_EXIT_DATAERR, "is a directory");
  /* A shard may be a link to a regular file (a copy kept elsewhere). */
  char path[4096], aside[4096];
  pathf(path, sizeof path, "%s/%s", dir, shard);
  pathf(aside, sizeof aside, "%s/shard.aside", g_tmp);
  CHECK(rename(path, aside) == 0 && symlink(aside, path) == 0, "linking the shard");
  CHECK(load_dir(dir, &err) == 0, "a shard linked to a regular file loads (%s)", err.msg);
  unlink(path);
  rename(aside, path);
  /* inspect takes the same way in */
  alarm(20);
  int rc = rc_shard_inspect(g_fifo, fopen("/dev/null", "w"), &err);
  alarm(0);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, "is a FIFO"), "inspect of a FIFO: 65 (%s)",
        err.msg);
  CHECK(load_dir(dir, &err) == 0, "control: the restored checkpoint loads (%s)", err.msg);
  unlink(g_fifo);
}

/* Rewrites dir's manifest with `edit` applied and COMPLETE to match, as a
 * forger would; returns the load's code. The manifest is restored. */
static int load_with_manifest_edit(const char *dir, const char *find, const char *repl,
                                   rc_err *err) {
  char mpath[4096], cpath[4096], marker[128], sha[RC_SHA256_HEX];
  pathf(mpath, sizeof mpath, "%s/manifest.json", dir);
  pathf(cpath, sizeof cpath, "%s/COMPLETE", dir);
  char *text = NULL, *complete = NULL;
  size_t n = 0, cn = 0;
  rc_err e = {0};
  if (rc_read_file(mpath, &text, &n, &e) || rc_read_file(cpath, &complete, &cn, &e)) {
    fprintf(stderr, "test_io: %s\n", e.msg);
    abort();
  }
  char *edited = strdup(text);
  char *at = find ? strstr(edited, find) : NULL;
  CHECK(!find || (at && strlen(find) == strlen(repl)), "manifest edit: '%s' found", find);
  if (at) memcpy(at, repl, strlen(repl));
  rc_sha256_hex(edited, n, sha);
  int k = snprintf(marker, sizeof marker, "%s  manifest.json\n", sha);
  CHECK(rc_write_file_atomic(mpath, edited, n, &e) == 0 &&
            rc_write_file_atomic(cpath, marker, (size_t)k, &e) == 0,
        "manifest edit: writing (%s)", e.msg);
  int rc = load_dir(dir, err);
  CHECK(rc_write_file_atomic(mpath, text, n, &e) == 0 &&
            rc_write_file_atomic(cpath, complete, cn, &e) == 0,
        "manifest edit: restoring (%s)", e.msg);
  free(edited);
  free(text);
  free(complete);
  return rc;
}

/* A per-dataset SHA-256 in the manifest was never compared on load: a
 * forged one (COMPLETE rewritten to match) loaded. Now every dataset's
 * bytes are hashed as they are copied out, and a mismatch is 65 naming
 * the dataset. Control: the same rewrite with the true hash loads. */
static void test_forged_dataset_hash(void) {
  char root[4096], dir[4096], want[RC_SHA256_HEX], forged[RC_SHA256_HEX];
  rc_err err = {0};
  tmp_path(root, sizeof root, "forged_hash");
  iter_dir(dir, sizeof dir, root);
  CHECK(save_fix(root, 0, 3, &err) == 0, "save: %s", err.msg);
  iofix f;
  iofix_build(&f, 0, 3);
  const rc_tensor *t = &f.st.tensors[0]; /* the first with bytes: its hash is unique */
  for (int i = 0; i < f.st.count && !rc_tensor_nbytes(t); i++) t = &f.st.tensors[i];
  rc_sha256_hex(t->data, rc_tensor_nbytes(t), want);
  memcpy(forged, want, sizeof forged);
  forged[10] = forged[10] == 'a' ? 'b' : 'a';
  CHECK(load_with_manifest_edit(dir, want, want, &err) == 0,
        "control: rewritten manifest with the true hash loads (%s)", err.msg);
  int rc = load_with_manifest_edit(dir, want, forged, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, t->path) && strstr(err.msg, forged),
        "forged hash of %s: 65 naming it (%d: %s)", t->path, rc, err.msg);
  printf("  forged dataset hash              -> %d  %s\n", rc, err.msg);
  /* the same through a load into a buffer of a chunked shard, whose dataset
   * hashes are taken while its chunks are read */
  char root2[4096], dir2[4096];
  tmp_path(root2, sizeof root2, "forged_hash_into");
  iter_dir(dir2, sizeof dir2, root2);
  CHECK(save_fix_chunked(root2, TEST_CHUNK, &err) == 0, "save chunked: %s", err.msg);
  g_load_into = true;
  CHECK(load_with_manifest_edit(dir2, want, want, &err) == 0,
        "control: load into a buffer with the true hash (%s)", err.msg);
  rc = load_with_manifest_edit(dir2, want, forged, &err);
  CHECK(rc == RC_EXIT_DATAERR && strstr(err.msg, t->path) && strstr(err.msg, forged),
        "forged hash of %s, load into a buffer: 65 naming it (%d: %s)", t->path, rc, err.msg);
  g_load_into = false;
  iofix_free(&f);
}

/* A save whose manifest or COMPLETE cannot be written (here: a directory
 * squats on the temp name; a full disk in hostile_io.sh) used to leave the
 * shard and args.json behind while saying nothing was. Now the directory
 * is left as it was. Control: without the squatter the same save
 * succeeds. */
static void test_failed_save_leaves_nothing(void) {
  const char *names[] = {"manifest.json", "COMPLETE"};
  for (int i = 0; i < 2; i++) {
    char root[4096], dir[4096], squat[4096], name[64];
    rc_err err = {0};
    pathf(name, sizeof name, "failed_save_%d", i);
    tmp_path(root, sizeof root, name);
    iter_dir(dir, sizeof dir, root);
    rc_mkdir_p(dir, &err);
    pathf(squat, sizeof squat, "%s/%s.tmp.%ld", dir, names[i], (long)getpid());
    CHECK(mkdir(squat, 0777) == 0, "squatter %s", squat);
    snap_t before = {0}, after = {0};
    snapshot(dir, &before);
    int rc = save_fix(root, 0, 3, &err);
    snapshot(dir, &after);
    CHECK(rc == RC_EXIT_IOERR, "%s not writable: the save fails with 74 (%d: %s)", names[i], rc,
          err.msg);
    CHECK(!strcmp(before.buf, after.buf), "failed save at %s left files behind:\n%s---\n%s",
          names[i], before.buf, after.buf);
    rmdir(squat);
    CHECK(save_fix(root, 0, 3, &err) == 0, "control: the save succeeds (%s)", err.msg);
    CHECK(count_files(dir) == 4, "control: 4 files written (%d)", count_files(dir));
    free(before.buf);
    free(after.buf);
  }
}

/* --------------------------------------------------------------- helpers */

static int helper_save(int argc, char **argv) {
  const char *root = argv[2];
  unsigned flags = 0;
  int world = 1, experts = 3;
  size_t big = 0;
  bool uninit = false;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "perturb")) flags |= IOFIX_PERTURB;
    if (!strcmp(argv[i], "uninit")) uninit = true;
    if (!strcmp(argv[i], "world") && i + 1 < argc) world = atoi(argv[++i]);
    if (!strcmp(argv[i], "big") && i + 1 < argc) big = (size_t)atoll(argv[++i]);
    if (!strcmp(argv[i], "experts") && i + 1 < argc) experts = atoi(argv[++i]);
  }
  iofix f;
  iofix_build(&f, flags, experts);
  void *extra = NULL;
  if (big) {
    int64_t shape[1] = {(int64_t)(big / 4)};
    extra = calloc(big / 4 ? big / 4 : 1, 4);
    rc_state_add(&f.st, "/model/big/weight", RC_DT_F32, 1, shape, extra);
  }
  if (uninit) { /* valgrind's negative control: bytes nobody initialised */
    int64_t shape[1] = {64};
    extra = malloc(64 * 4);
    rc_state_add(&f.st, "/model/uninit/weight", RC_DT_F32, 1, shape, extra);
  }
  rc_err err = {0};
  int rc = 0;
  for (int r = 0; r < world && !rc; r++) {
    rc_shard_meta m = iofix_meta(r, world, IOFIX_CONFIG);
    rc = rc_checkpoint_save(root, &m, &f.st, r == 0 ? "{\"leg\":\"helper\"}\n" : NULL, &err);
  }
  if (!rc && world > 1) {
    char dir[4096];
    iter_dir(dir, sizeof dir, root);
    rc = rc_checkpoint_finalize(dir, world, IOFIX_ITERATION, &err);
  }
  if (rc) fprintf(stderr, "save: %s\n", err.msg);
  free(extra);
  iofix_free(&f);
  return rc;
}

static int helper_load(const char *dir, int experts) {
  iofix got, want;
  iofix_build(&got, IOFIX_EMPTY, experts);
  iofix_build(&want, 0, experts);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  rc_err err = {0};
  int rc = rc_checkpoint_load(dir, &m, &got.st, &err);
  if (rc) fprintf(stderr, "load: %s\n", err.msg);
  if (!rc && !states_bitwise_equal(&got.st, &want.st)) {
    fprintf(stderr, "load: values differ\n");
    rc = 1;
  }
  iofix_free(&got);
  iofix_free(&want);
  return rc;
}

/* The streamed save (datasets landing in any order while the write and the
 * hashes follow) writes the directory rc_checkpoint_save writes, and a load
 * into a caller's buffer points the tensors at the bytes that were saved.
 * Negative controls: a dataset left zero in the stream gives another shard;
 * a borrowed load of a corrupt shard is refused like a copying one. */
/* rc_load_into.landed of the test: each tensor told, with a copy of the
 * bytes it was told about (as a device upload would take them) */
typedef struct {
  int count, calls, out_of_order;
  int *told;                 /* per tensor: times told */
  unsigned char **copy;      /* per tensor: the bytes when told */
  const unsigned char *last; /* the last bytes pointer told */
  const rc_state *st;
} landed_log;

static void log_landed(void *ctx, int tensor, const void *bytes) {
  landed_log *l = ctx;
  l->calls++;
  if (tensor < 0 || tensor >= l->count) return;
  l->told[tensor]++;
  if ((const unsigned char *)bytes < l->last) l->out_of_order++;
  l->last = bytes;
  size_t n = rc_tensor_nbytes(&l->st->tensors[tensor]);
  free(l->copy[tensor]);
  l->copy[tensor] = malloc(n ? n : 1);
  memcpy(l->copy[tensor], bytes, n);
}

static landed_log landed_log_for(const rc_state *st) {
  landed_log l = {.count = st->count, .st = st};
  l.told = calloc((size_t)st->count, sizeof *l.told);
  l.copy = calloc((size_t)st->count, sizeof *l.copy);
  return l;
}

static void landed_log_free(landed_log *l) {
  for (int i = 0; i < l->count; i++) free(l->copy[i]);
  free(l->copy);
  free(l->told);
}

static unsigned char *give_buffer(void *ctx, size_t bytes) {
  test_buffer *b = ctx;
  b->calls++;
  if (b->cap < bytes) {
    free(b->p);
    b->p = malloc(bytes);
    b->cap = b->p ? bytes : 0;
  }
  return b->p;
}

static int save_streamed(const char *root, const rc_state *st, const rc_shard_meta *m, int skip,
                         rc_err *err) {
  test_buffer buf = {0};
  rc_save_stream *s = NULL;
  int ret = rc_save_stream_begin(root, m, st, "{\"leg\":\"test\"}\n", give_buffer, &buf, &s, err);
  if (ret) return ret;
  /* backwards, so the gate opens only at the end: every pass must wait */
  for (int i = st->count - 1; i >= 0; i--) {
    size_t n = rc_tensor_nbytes(&st->tensors[i]);
    if (n == 0) continue;
    unsigned char *dst = rc_save_stream_dataset(s, i);
    if (i == skip)
      memset(dst, 0, n);
    else
      memcpy(dst, st->tensors[i].data, n);
    rc_save_stream_landed(s, i);
  }
  ret = rc_save_stream_end(s, err);
  free(buf.p);
  return ret;
}

/* rc_load_into.deferred: a load that leaves the dataset hashes to its
 * caller verifies every byte by the chunks, points the tensors at them and
 * hands back each dataset with its manifest hash; rc_load_deferred_check
 * then says what the load would have said. Forged: a manifest (and its
 * COMPLETE) whose first dataset hash is wrong but whose chunk hashes are
 * right: a deferred load succeeds and its check refuses (65, naming the
 * dataset); the control, an ordinary load, refuses at once. */
static void test_deferred_dataset_hashes(void) {
  char root[4096], dir[4096], mpath[4096], cpath[4096];
  tmp_path(root, sizeof root, "deferred");
  iter_dir(dir, sizeof dir, root);
  rc_err err = {0};
  iofix f;
  iofix_build(&f, 0, 40);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  m.chunk_bytes = 4096;
  rm_rf(root);
  CHECK(rc_checkpoint_save(root, &m, &f.st, NULL, &err) == 0, "save: %s", err.msg);
  for (int forged = 0; forged < 2; forged++) {
    if (forged) { /* the first dataset's hash in the manifest, COMPLETE to match */
      pathf(mpath, sizeof mpath, "%s/manifest.json", dir);
      pathf(cpath, sizeof cpath, "%s/COMPLETE", dir);
      char *text = NULL;
      size_t n = 0;
      CHECK(rc_read_file(mpath, &text, &n, &err) == 0, "read manifest: %s", err.msg);
      char *at = strstr(text, "\"datasets\"");
      at = at ? strstr(at, "\"sha256\":\"") : NULL;
      CHECK(at != NULL, "the manifest lists a dataset hash");
      if (!at) return;
      at += strlen("\"sha256\":\"");
      *at = *at == '0' ? '1' : '0';
      char sha[RC_SHA256_HEX], marker[128];
      rc_sha256_hex(text, n, sha);
      int k = snprintf(marker, sizeof marker, "%s  manifest.json\n", sha);
      CHECK(rc_write_file_atomic(mpath, text, n, &err) == 0 &&
                rc_write_file_atomic(cpath, marker, (size_t)k, &err) == 0,
            "forge: %s", err.msg);
      free(text);
    }
    for (int deferring = 0; deferring < 2; deferring++) {
      iofix got;
      iofix_build(&got, IOFIX_EMPTY, 40);
      void **own = calloc((size_t)got.st.count, sizeof *own);
      for (int i = 0; i < got.st.count; i++)
        own[i] = got.st.tensors[i].data, got.st.tensors[i].data = NULL;
      test_buffer buf = {0};
      rc_load_deferred d = {0};
      rc_load_into into = {give_buffer, &buf, NULL, NULL, deferring ? &d : NULL};
      int rc = rc_checkpoint_load_into(dir, &m, &got.st, &into, &err);
      int nonempty = 0;
      for (int i = 0; i < got.st.count; i++) nonempty += rc_tensor_nbytes(&got.st.tensors[i]) > 0;
      if (!deferring) {
        CHECK(forged ? rc == RC_EXIT_DATAERR && strstr(err.msg, "the manifest's entry for this")
                     : rc == 0,
              "%s, the load checks the datasets: %d (%s)", forged ? "forged" : "good", rc, err.msg);
      } else {
        CHECK(rc == 0, "%s, deferring: the load succeeds (%s)", forged ? "forged" : "good",
              err.msg);
        CHECK(d.count == nonempty, "every non-empty dataset left to check (%d of %d)", d.count,
              nonempty);
        CHECK(forged || states_bitwise_equal(&f.st, &got.st), "deferring: the saved bytes");
        rc_err e2 = {0};
        int crc = rc_load_deferred_check(&d, 0, &e2);
        CHECK(forged ? crc == RC_EXIT_DATAERR && strstr(e2.msg, "the manifest's entry for this")
                     : crc == 0,
              "%s, the deferred check: %d (%s)", forged ? "forged" : "good", crc, e2.msg);
      }
      rc_load_deferred_free(&d);
      for (int i = 0; i < got.st.count; i++) got.st.tensors[i].data = own[i];
      free(own);
      iofix_free(&got);
      free(buf.p);
    }
  }
  iofix_free(&f);
}

static void test_streamed_save(void) {
  char r1[4096], r2[4096], r3[4096], d1[4096], d2[4096], d3[4096], why[256];
  tmp_path(r1, sizeof r1, "stream1");
  tmp_path(r2, sizeof r2, "stream2");
  tmp_path(r3, sizeof r3, "stream3");
  iter_dir(d1, sizeof d1, r1);
  iter_dir(d2, sizeof d2, r2);
  iter_dir(d3, sizeof d3, r3);
  rc_err err = {0};
  iofix f;
  iofix_build(&f, 0, 40);
  for (int chunked = 0; chunked < 2; chunked++) {
    rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
    m.chunk_bytes = chunked ? 4096 : RC_CHUNKS_NONE;
    rm_rf(r1), rm_rf(r2), rm_rf(r3);
    CHECK(rc_checkpoint_save(r1, &m, &f.st, "{\"leg\":\"test\"}\n", &err) == 0, "save: %s",
          err.msg);
    CHECK(save_streamed(r2, &f.st, &m, -1, &err) == 0, "streamed save: %s", err.msg);
    CHECK(dirs_identical(d1, d2, why, sizeof why), "chunks %d: streamed save differs: %s", chunked,
          why);
    int big = 0; /* the largest dataset, left zero in the control */
    for (int i = 0; i < f.st.count; i++)
      if (rc_tensor_nbytes(&f.st.tensors[i]) > rc_tensor_nbytes(&f.st.tensors[big])) big = i;
    CHECK(save_streamed(r3, &f.st, &m, big, &err) == 0, "control save: %s", err.msg);
    CHECK(!dirs_identical(d1, d3, why, sizeof why), "control: a dataset left zero is seen");

    /* borrowed load: tensors with NULL data point into the buffer */
    iofix got;
    iofix_build(&got, IOFIX_EMPTY, 40);
    void **own = calloc((size_t)got.st.count, sizeof *own);
    for (int i = 0; i < got.st.count; i++)
      own[i] = got.st.tensors[i].data, got.st.tensors[i].data = NULL;
    test_buffer buf = {0};
    rc_load_into into = {.buffer = give_buffer, .buffer_ctx = &buf};
    CHECK(rc_checkpoint_load_into(d2, &m, &got.st, &into, &err) == 0, "borrowed load: %s", err.msg);
    CHECK(buf.calls == 1, "one buffer for the shard (%d)", buf.calls);
    bool inside = true;
    for (int i = 0; i < got.st.count; i++) {
      size_t n = rc_tensor_nbytes(&got.st.tensors[i]);
      unsigned char *p = got.st.tensors[i].data;
      if (n && (!p || p < buf.p || p + n > buf.p + buf.cap)) inside = false;
    }
    CHECK(inside, "every tensor points into the buffer");
    CHECK(states_bitwise_equal(&f.st, &got.st), "borrowed load gives the saved bytes");
    /* landed: every non-empty tensor told once, in file order, with the
     * bytes the load then points it at */
    for (int i = 0; i < got.st.count; i++) got.st.tensors[i].data = NULL;
    landed_log lg = landed_log_for(&got.st);
    rc_load_into told = {give_buffer, &buf, log_landed, &lg, NULL};
    CHECK(rc_checkpoint_load_into(d2, &m, &got.st, &told, &err) == 0, "load with landed: %s",
          err.msg);
    int once = 0, nonempty = 0, same = 0;
    for (int i = 0; i < got.st.count; i++) {
      size_t n = rc_tensor_nbytes(&got.st.tensors[i]);
      if (!n) continue;
      nonempty++;
      once += lg.told[i] == 1;
      same += lg.copy[i] && !memcmp(lg.copy[i], got.st.tensors[i].data, n);
    }
    if (chunked) {
      CHECK(once == nonempty && lg.calls == nonempty,
            "landed: each of %d tensors told once (%d once, %d calls)", nonempty, once, lg.calls);
      CHECK(same == nonempty && !lg.out_of_order,
            "landed: the bytes told are the loaded ones, in file order (%d of %d, %d out of "
            "order)",
            same, nonempty, lg.out_of_order);
    } else { /* one reader and the whole-file hash: nothing is told early */
      CHECK(lg.calls == 0, "landed: not told without chunk hashes (%d calls)", lg.calls);
    }
    landed_log_free(&lg);
    for (int i = 0; i < got.st.count; i++) got.st.tensors[i].data = own[i];
    free(own);
    iofix_free(&got);
    /* the control shard (a zero dataset) against the good manifest: refused */
    char a[4096], b[4096];
    pathf(a, sizeof a, "%s/shard_00000_of_00001.h5", d3);
    pathf(b, sizeof b, "%s/shard_00000_of_00001.h5", d2);
    CHECK(rename(a, b) == 0, "swap in the control shard");
    iofix_build(&got, IOFIX_EMPTY, 40);
    own = calloc((size_t)got.st.count, sizeof *own);
    for (int i = 0; i < got.st.count; i++)
      own[i] = got.st.tensors[i].data, got.st.tensors[i].data = NULL;
    landed_log bad = landed_log_for(&got.st);
    rc_load_into told_bad = {give_buffer, &buf, log_landed, &bad, NULL};
    CHECK(rc_checkpoint_load_into(d2, &m, &got.st, &told_bad, &err) == RC_EXIT_DATAERR,
          "borrowed load of a shard that is not the manifest's: refused (%s)", err.msg);
    /* landed told bytes before they were verified: the zero dataset of the
     * control shard reached it, and only the refusal says they do not count */
    int zeros = 0;
    for (int i = 0; i < got.st.count; i++) {
      size_t n = rc_tensor_nbytes(&got.st.tensors[i]);
      bool all0 = n > 0 && bad.copy[i];
      for (size_t k = 0; all0 && k < n; k++) all0 = bad.copy[i][k] == 0;
      zeros += all0;
    }
    CHECK(!chunked || (bad.calls > 0 && zeros > 0),
          "control: landed is told unverified bytes (%d calls, %d all-zero tensors)", bad.calls,
          zeros);
    landed_log_free(&bad);
    for (int i = 0; i < got.st.count; i++) got.st.tensors[i].data = own[i];
    free(own);
    iofix_free(&got);
    free(buf.p);
  }
  iofix_free(&f);
}

/* A manifest's text, or NULL. */
static char *read_text(const char *dir, size_t *n) {
  char path[4096], *text = NULL;
  rc_err err = {0};
  pathf(path, sizeof path, "%s/manifest.json", dir);
  return rc_read_file(path, &text, n, &err) ? NULL : text;
}

/* Whether two parsed manifests record the same shards: every size, file,
 * chunk and dataset hash, dtype and shape, and with `whole` the whole-file
 * hash (a hashes-only manifest records none). */
static bool same_entries(const rc_manifest *a, const rc_manifest *b, bool whole) {
  if (a->world_size != b->world_size || a->iteration != b->iteration) return false;
  for (int r = 0; r < a->world_size; r++) {
    const rc_mf_shard *x = &a->shards[r], *y = &b->shards[r];
    if (x->bytes != y->bytes || (whole && strcmp(x->sha256, y->sha256)) ||
        strcmp(x->file, y->file) || x->chunk_bytes != y->chunk_bytes || x->nchunks != y->nchunks ||
        x->ndatasets != y->ndatasets)
      return false;
    for (int k = 0; k < x->nchunks; k++)
      if (strcmp(x->chunk_sha256[k], y->chunk_sha256[k])) return false;
    for (int i = 0; i < x->ndatasets; i++)
      if (memcmp(&x->datasets[i], &y->datasets[i], sizeof x->datasets[i])) return false;
  }
  return true;
}

/* Whether no shard entry records a whole-file hash ("" for each). */
static bool no_whole_hash(const rc_manifest *m) {
  for (int r = 0; r < m->world_size; r++)
    if (m->shards[r].sha256[0]) return false;
  return m->world_size > 0;
}

/* A manifest's (or fragment's) text edited by hand, for what the writer
 * must and must not give: with `mark`, the line `  "hashes_only": true,`
 * after the "format" line; with `drop_whole`, every shard's whole-file
 * "sha256" line removed together with the comma that ended the line
 * before it. Shard keys are one per line; a dataset's sha256 sits inside
 * its one-line object, so a line that starts with "sha256" is a shard's. */
static char *edit_text(const char *text, bool mark, bool drop_whole) {
  size_t n = strlen(text);
  char *out = malloc(n + 64), *o = out;
  if (!out) abort();
  for (const char *p = text; *p;) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) + 1 : strlen(p);
    const char *k = p;
    while (*k == ' ') k++;
    if (drop_whole && !strncmp(k, "\"sha256\": ", 10)) {
      if (o - out >= 2 && o[-2] == ',') o[-2] = '\n', o--;
    } else {
      memcpy(o, p, len);
      o += len;
      if (mark && !strncmp(k, "\"format\": ", 10)) {
        const char *line = "  \"hashes_only\": true,\n";
        memcpy(o, line, strlen(line));
        o += strlen(line);
      }
    }
    p += len;
  }
  *o = 0;
  return out;
}

/* rc_manifest_parse of text: its exit code, the message in err. */
static int parse_text(const char *text, rc_err *err) {
  rc_manifest m;
  int rc = rc_manifest_parse(text, strlen(text), "edited", &m, err);
  if (!rc) rc_manifest_free(&m);
  return rc;
}

static int parse_fragment_text(const char *text, rc_err *err) {
  int64_t it;
  int ws;
  bool ho;
  rc_mf_shard s;
  int rc = rc_fragment_parse(text, strlen(text), "edited", &it, &ws, &ho, &s, err);
  if (!rc) rc_mf_shard_free(&s);
  return rc;
}

/* Rank r of 3's fragment text in dir, or NULL. */
static char *read_fragment(const char *dir, int r) {
  char file[64], path[4096], *text = NULL;
  size_t n = 0;
  rc_err err = {0};
  rc_fragment_filename(file, sizeof file, r, 3);
  pathf(path, sizeof path, "%s/%s", dir, file);
  return rc_read_file(path, &text, &n, &err) ? NULL : text;
}

static bool parse_dir(const char *dir, rc_manifest *m) {
  size_t n = 0;
  char *text = read_text(dir, &n);
  rc_err err = {0};
  bool ok = text && rc_manifest_parse(text, n, dir, m, &err) == RC_OK;
  free(text);
  return ok;
}

/* A hashes-only save (rc_shard_meta.hashes_only): the same manifest entries
 * as a full save of the state but no whole-file hash, plain or streamed,
 * one rank or three; no shard file; a load refuses it (65) and
 * rc_checkpoint_latest passes it by. The reader refuses a hashes-only
 * manifest or fragment that claims a whole-file hash or lacks chunk hashes,
 * and a full one without its whole-file hash. */
static void test_hashes_only(void) {
  char rf[4096], rh[4096], rs[4096], rp[4096], df[4096], dh[4096], ds[4096], dp[4096];
  char path[4096], out[4096];
  tmp_path(rf, sizeof rf, "ho_full");
  tmp_path(rh, sizeof rh, "ho_hash");
  tmp_path(rs, sizeof rs, "ho_stream");
  tmp_path(rp, sizeof rp, "ho_perturbed");
  iter_dir(df, sizeof df, rf);
  iter_dir(dh, sizeof dh, rh);
  iter_dir(ds, sizeof ds, rs);
  iter_dir(dp, sizeof dp, rp);
  rc_err err = {0};
  iofix f, g;
  iofix_build(&f, 0, 40);
  iofix_build(&g, IOFIX_PERTURB, 40);
  rc_shard_meta m = iofix_meta(0, 1, IOFIX_CONFIG);
  m.chunk_bytes = 4096;
  CHECK(rc_checkpoint_save(rf, &m, &f.st, "{}\n", &err) == 0, "full save: %s", err.msg);
  m.hashes_only = true;
  CHECK(rc_checkpoint_save(rh, &m, &f.st, "{}\n", &err) == 0, "hashes-only save: %s", err.msg);
  CHECK(save_streamed(rs, &f.st, &m, -1, &err) == 0, "streamed hashes-only save: %s", err.msg);
  CHECK(rc_checkpoint_save(rp, &m, &g.st, "{}\n", &err) == 0, "perturbed: %s", err.msg);
  rc_manifest mf, mh, ms, mp;
  CHECK(parse_dir(df, &mf) && parse_dir(dh, &mh) && parse_dir(ds, &ms) && parse_dir(dp, &mp),
        "the four manifests parse");
  CHECK(!mf.hashes_only && mh.hashes_only && ms.hashes_only, "marked hashes-only exactly when so");
  CHECK(same_entries(&mf, &mh, false), "hashes-only save: the full save's hashes");
  CHECK(same_entries(&mf, &ms, false), "streamed hashes-only save: the full save's hashes");
  CHECK(!same_entries(&mf, &mp, false), "negative control: a perturbed state's hashes differ");
  CHECK(no_whole_hash(&mh) && no_whole_hash(&ms), "hashes-only: no whole-file hash recorded");
  CHECK(!no_whole_hash(&mf) && !same_entries(&mf, &mh, true),
        "negative control: the full save records one, so the whole-file hashes differ");
  /* the text: the full one's with "hashes_only": true and without the
   * shard's whole-file sha256 line */
  size_t nf = 0, nh = 0, ns = 0;
  char *tf = read_text(df, &nf), *th = read_text(dh, &nh), *ts = read_text(ds, &ns);
  char *want = tf ? edit_text(tf, true, true) : NULL;
  char *old_style = tf ? edit_text(tf, true, false) : NULL; /* what earlier builds wrote */
  CHECK(tf && th && ts && !strstr(tf, "hashes_only") && !strcmp(th, want) && !strcmp(ts, want),
        "the manifest text is the full save's plus \"hashes_only\": true, minus its whole-file"
        " sha256");
  CHECK(want && old_style && strcmp(th, old_style) && strstr(old_style, "\"rank\": 0,\n"),
        "negative control: the text with the whole-file sha256 kept is another text");
  /* the reader: a hashes-only manifest with a whole-file sha256 is 65 */
  CHECK(parse_text(want, &err) == 0, "the hashes-only text parses: %s", err.msg);
  CHECK(old_style && parse_text(old_style, &err) == RC_EXIT_DATAERR &&
            strstr(err.msg, "whole-file sha256 in a hashes-only manifest"),
        "a hashes-only manifest with a whole-file sha256 is refused (65, %s)", err.msg);
  /* a full manifest still needs its sha256 (control: it parses with it) */
  char *no_sha = tf ? edit_text(tf, false, true) : NULL;
  CHECK(tf && parse_text(tf, &err) == 0, "the full text parses: %s", err.msg);
  CHECK(no_sha && parse_text(no_sha, &err) == RC_EXIT_DATAERR &&
            strstr(err.msg, "sha256 is not 64 lowercase hex digits"),
        "a full manifest without its whole-file sha256 is refused (65, %s)", err.msg);
  free(no_sha);
  free(old_style);
  free(want);
  free(ts);
  free(tf);
  free(th);
  /* without chunk hashes (version 1): a hashes-only entry would have
   * nothing that covers its bytes, so the reader refuses one (65) and a
   * save refuses to make one (64, nothing left) */
  char rv[4096], dv[4096];
  tmp_path(rv, sizeof rv, "ho_v1");
  iter_dir(dv, sizeof dv, rv);
  rc_shard_meta mv = iofix_meta(0, 1, IOFIX_CONFIG);
  mv.chunk_bytes = RC_CHUNKS_NONE;
  CHECK(rc_checkpoint_save(rv, &mv, &f.st, NULL, &err) == 0, "version-1 full save: %s", err.msg);
  size_t nv = 0;
  char *tv = read_text(dv, &nv), *tv_ho = tv ? edit_text(tv, true, true) : NULL;
  CHECK(tv && !strstr(tv, "chunk_sha256") && parse_text(tv, &err) == 0,
        "control: the version-1 full text parses (%s)", err.msg);
  CHECK(tv_ho && parse_text(tv_ho, &err) == RC_EXIT_DATAERR &&
            strstr(err.msg, "hashes-only entry without chunk hashes"),
        "a hashes-only manifest without chunk hashes is refused (65, %s)", err.msg);
  free(tv_ho);
  free(tv);
  char rv2[4096], dv2[4096];
  tmp_path(rv2, sizeof rv2, "ho_v1_save");
  iter_dir(dv2, sizeof dv2, rv2);
  mv.hashes_only = true;
  CHECK(rc_checkpoint_save(rv2, &mv, &f.st, NULL, &err) == RC_EXIT_USAGE &&
            strstr(err.msg, "a hashes-only save records chunk hashes") && !rc_path_exists(dv2),
        "a hashes-only save without chunk hashes is refused (64, nothing left: %s)", err.msg);
  pathf(path, sizeof path, "%s/shard_00000_of_00001.h5", dh);
  CHECK(!rc_path_exists(path), "no shard file written");
  pathf(path, sizeof path, "%s/shard_00000_of_00001.h5", ds);
  CHECK(!rc_path_exists(path), "no shard file written (streamed)");
  pathf(path, sizeof path, "%s/COMPLETE", dh);
  CHECK(rc_path_exists(path), "COMPLETE written");
  pathf(path, sizeof path, "%s/args.json", dh);
  CHECK(rc_path_exists(path), "args.json written");
  CHECK(rc_checkpoint_is_hashes_only(dh) && !rc_checkpoint_is_hashes_only(df),
        "rc_checkpoint_is_hashes_only");
  iofix got;
  iofix_build(&got, IOFIX_EMPTY, 40);
  m.hashes_only = false;
  CHECK(rc_checkpoint_load(dh, &m, &got.st, &err) == RC_EXIT_DATAERR &&
            strstr(err.msg, "holds hashes only") && strstr(err.msg, "cannot be loaded"),
        "a hashes-only checkpoint is refused (65, %s)", err.msg);
  CHECK(rc_checkpoint_load(df, &m, &got.st, &err) == 0 && states_bitwise_equal(&got.st, &f.st),
        "negative control: the full save loads (%s)", err.msg);
  /* latest: a hashes-only iteration 9 after the full 5 is passed by */
  rc_shard_meta m9 = m;
  m9.iteration = 9;
  m9.hashes_only = true;
  CHECK(rc_checkpoint_save(rf, &m9, &f.st, NULL, &err) == 0, "hashes-only 9: %s", err.msg);
  CHECK(rc_checkpoint_latest(rf, out, sizeof out, &err) == 0 && strstr(out, "iter_0000005"),
        "latest skips the hashes-only iteration 9 (%s)", out);
  m9.hashes_only = false;
  m9.iteration = 11;
  CHECK(rc_checkpoint_save(rf, &m9, &f.st, NULL, &err) == 0, "full 11: %s", err.msg);
  CHECK(rc_checkpoint_latest(rf, out, sizeof out, &err) == 0 && strstr(out, "iter_0000011"),
        "negative control: a full iteration 11 is the latest (%s)", out);
  /* three ranks, full, hashes-only and hashes-only streamed: fragments
   * marked and without whole-file hashes, finalize merges them without
   * shards, and every other hash is the full save's */
  char rw[4096], dw[4096], rwf[4096], dwf[4096], rws[4096], dws[4096];
  tmp_path(rw, sizeof rw, "ho_ranks");
  iter_dir(dw, sizeof dw, rw);
  tmp_path(rwf, sizeof rwf, "ho_ranks_full");
  iter_dir(dwf, sizeof dwf, rwf);
  tmp_path(rws, sizeof rws, "ho_ranks_stream");
  iter_dir(dws, sizeof dws, rws);
  for (int r = 0; r < 3; r++) {
    rc_shard_meta mr = iofix_meta(r, 3, IOFIX_CONFIG);
    CHECK(rc_checkpoint_save(rwf, &mr, &f.st, r == 0 ? "{}" : NULL, &err) == 0, "full rank %d: %s",
          r, err.msg);
    mr.hashes_only = true;
    CHECK(rc_checkpoint_save(rw, &mr, &f.st, r == 0 ? "{}" : NULL, &err) == 0, "rank %d: %s", r,
          err.msg);
    CHECK(save_streamed(rws, &f.st, &mr, -1, &err) == 0, "streamed rank %d: %s", r, err.msg);
  }
  for (int r = 0; r < 3; r++) {
    char *frf = read_fragment(dwf, r), *frh = read_fragment(dw, r), *frs = read_fragment(dws, r);
    char *fwant = frf ? edit_text(frf, true, true) : NULL;
    char *fold = frf ? edit_text(frf, true, false) : NULL;
    CHECK(fwant && frh && frs && !strcmp(frh, fwant) && !strcmp(frs, fwant),
          "rank %d's hashes-only fragment: the full one's plus \"hashes_only\", minus its"
          " whole-file sha256",
          r);
    CHECK(fold && strcmp(frh, fold) && parse_fragment_text(fwant, &err) == 0,
          "negative control: rank %d's fragment with the sha256 kept is another text (%s)", r,
          err.msg);
    CHECK(fold && parse_fragment_text(fold, &err) == RC_EXIT_DATAERR &&
              strstr(err.msg, "whole-file sha256 in a hashes-only manifest"),
          "a hashes-only fragment with a whole-file sha256 is refused (65, %s)", err.msg);
    free(fold);
    free(fwant);
    free(frs);
    free(frh);
    free(frf);
  }
  CHECK(rc_checkpoint_finalize(dwf, 3, IOFIX_ITERATION, &err) == 0, "finalize full: %s", err.msg);
  CHECK(rc_checkpoint_finalize(dw, 3, IOFIX_ITERATION, &err) == 0, "finalize: %s", err.msg);
  CHECK(rc_checkpoint_finalize(dws, 3, IOFIX_ITERATION, &err) == 0, "finalize streamed: %s",
        err.msg);
  rc_manifest mw = {0}, mwf = {0}, mws = {0};
  bool any_shard = false;
  for (int r = 0; r < 3; r++) {
    pathf(path, sizeof path, "%s/shard_%05d_of_00003.h5", dw, r);
    any_shard |= rc_path_exists(path);
    pathf(path, sizeof path, "%s/shard_%05d_of_00003.h5", dws, r);
    any_shard |= rc_path_exists(path);
  }
  CHECK(parse_dir(dw, &mw) && mw.hashes_only && parse_dir(dws, &mws) && mws.hashes_only &&
            !any_shard,
        "three ranks: one hashes-only manifest, no shard");
  CHECK(parse_dir(dwf, &mwf) && same_entries(&mwf, &mw, false) && same_entries(&mwf, &mws, false),
        "three ranks: the full save's hashes");
  CHECK(no_whole_hash(&mw) && no_whole_hash(&mws) && !no_whole_hash(&mwf),
        "three ranks: no whole-file hash where hashes only (the full save has them)");
  size_t nw = 0;
  char *twf = read_text(dwf, &nw), *tw = read_text(dw, &nw);
  char *twant = twf ? edit_text(twf, true, true) : NULL;
  CHECK(twant && tw && !strcmp(tw, twant),
        "three ranks: the finalized text is the full one's plus \"hashes_only\", minus the"
        " whole-file sha256s");
  free(twant);
  free(tw);
  free(twf);
  if (mw.shards) rc_manifest_free(&mw);
  if (mws.shards) rc_manifest_free(&mws);
  if (mwf.shards) rc_manifest_free(&mwf);
  /* a mix of kinds is refused */
  char rx[4096], dx[4096];
  tmp_path(rx, sizeof rx, "ho_mix");
  iter_dir(dx, sizeof dx, rx);
  for (int r = 0; r < 2; r++) {
    rc_shard_meta mr = iofix_meta(r, 2, IOFIX_CONFIG);
    mr.hashes_only = r == 1;
    rc_checkpoint_save(rx, &mr, &f.st, NULL, &err);
  }
  CHECK(rc_checkpoint_finalize(dx, 2, IOFIX_ITERATION, &err) == RC_EXIT_DATAERR &&
            strstr(err.msg, "hashes-only"),
        "finalize refuses a mix of hashes-only and written shards (%s)", err.msg);
  rc_manifest_free(&mf);
  rc_manifest_free(&mh);
  rc_manifest_free(&ms);
  rc_manifest_free(&mp);
  iofix_free(&got);
  iofix_free(&g);
  iofix_free(&f);
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "save")) return helper_save(argc, argv);
  if (argc >= 3 && !strcmp(argv[1], "load"))
    return helper_load(argv[2], argc == 5 && !strcmp(argv[3], "experts") ? atoi(argv[4]) : 3);
  if (argc == 3 && !strcmp(argv[1], "fixtures")) {
    test_fixtures(argv[2]);
  } else if (argc == 1) {
    const char *t = getenv("TMPDIR");
    pathf(g_tmp, sizeof g_tmp, "%s/rc_io_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_tmp)) {
      perror("mkdtemp");
      return 1;
    }
    test_state_and_sha();
    test_fsutil();
    test_save_load_save();
    test_matches_hdf5_reference();
    test_metadata_block();
    test_manifest_content();
    test_multi_rank();
    test_latest();
    test_writer_rejects();
    test_unwritable();
    test_atomic_write_failure();
    test_load_misc();
    test_forged_structure();
    test_load_regular_files_only();
    test_forged_dataset_hash();
    test_failed_save_leaves_nothing();
    test_chunk_hashes_recorded();
    test_chunk_hashes_verified();
    test_streamed_save();
    test_deferred_dataset_hashes();
    test_hashes_only();
    if (!failures) rm_rf(g_tmp);
  } else {
    fprintf(stderr, "usage: test_io | test_io fixtures DIR | test_io save ROOT [...] |"
                    " test_io load ITER_DIR\n");
    return 64;
  }
  if (failures) {
    fprintf(stderr, "%d check(s) failed%s%s\n", failures, g_tmp[0] ? "; files kept in " : "",
            g_tmp);
    return 1;
  }
  printf("io: all checks passed\n");
  return 0;
}
