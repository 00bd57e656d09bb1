/* test_census.c — the state-census comparison (harness/census.c): fields
 * matched by name whatever their order, saved differences counted and
 * described with both values, local ones grouped with their notes, fields
 * on one side only, the before-save census, and every malformed file
 * refused with 65 naming the line; CRLF line ends accepted; the
 * first-step census's differences marked with what the after-load census
 * saw; the families a census covers, named from its fields only; control
 * characters escaped in the described lines; derived and copy fields
 * failing like saved ones with their own words; who wrote a saved field
 * (the census of what the save wrote). Each check has its control:
 * the same files without the difference compare clean. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "check.h"
#include "harness/census.h"

static char dir[64];

static const char *put(const char *name, const char *text) {
  static char path[8][256];
  static int slot;
  char *p = path[slot++ % 8];
  snprintf(p, 256, "%s/%s", dir, name);
  rc_err err = {0};
  if (rc_write_file_atomic(p, text, strlen(text), &err)) CHECK(0, "write %s: %s", p, err.msg);
  return p;
}

static int compare(const char *a, const char *b, rc_census_diff *d, rc_err *err) {
  memset(err, 0, sizeof *err);
  return rc_census_compare_files(put("a.txt", a), put("b.txt", b), d, err);
}

static void test_equal_and_order(void) {
  rc_census_diff d;
  rc_err err;
  const char *a = "# comment\nx\tsaved\t1\ny\tsaved\t2\nz\tlocal\tp\tnote\n";
  const char *b = "z\tlocal\tp\tnote\ny\tsaved\t2\nx\tsaved\t1\n";
  CHECK(compare(a, b, &d, &err) == 0, "%s", err.msg);
  CHECK(d.n_fields == 3 && d.n_diffs == 0 && d.n_saved_differ == 0, "equal: %d %d", d.n_fields,
        d.n_diffs);
  rc_census_diff_free(&d);
  /* the difference: one saved field, one local */
  const char *c = "z\tlocal\tq\tnote\ny\tsaved\t3\nx\tsaved\t1\n";
  CHECK(compare(a, c, &d, &err) == 0, "%s", err.msg);
  CHECK(d.n_saved_differ == 1 && d.n_local_differ == 1 && d.n_diffs == 2, "diff counts %d %d",
        d.n_saved_differ, d.n_local_differ);
  CHECK(d.n_diffs == 2 && d.diffs[0].saved && !strcmp(d.diffs[0].field, "y"), "saved first: %s",
        d.n_diffs ? d.diffs[0].field : "-");
  char line[512];
  rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(!strcmp(line, "y: through 2, resumed 3 (saved: not restored by the load)"), "%s", line);
  rc_census_describe(&d.diffs[1], "through", "resumed", line, sizeof line);
  CHECK(!strcmp(line, "z: through p, resumed q (process-local by design: note)"), "%s", line);
  CHECK(rc_census_first_saved(&d) == &d.diffs[0], "first saved");
  rc_census_diff_free(&d);
}

static void test_one_side_and_groups(void) {
  rc_census_diff d;
  rc_err err;
  const char *a = "k\tsaved\t1\nl.f.m/a\tlocal\tFALSE\tn\nl.f.m/b\tlocal\tFALSE\tn\n";
  const char *b = "l.f.m/a\tlocal\tTRUE\tn\nl.f.m/b\tlocal\tTRUE\tn\nextra\tsaved\t7\n";
  CHECK(compare(a, b, &d, &err) == 0, "%s", err.msg);
  CHECK(d.n_fields == 4 && d.n_saved_differ == 2 && d.n_local_differ == 2, "%d %d %d", d.n_fields,
        d.n_saved_differ, d.n_local_differ);
  char line[512];
  rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(!strcmp(line, "k: only through has it (1); a load must restore it"), "%s", line);
  rc_census_local_groups(&d, line, sizeof line);
  CHECK(!strcmp(line, "l.f (2 modules: through FALSE, resumed TRUE)"), "groups: %s", line);
  CHECK(rc_census_first_saved(&d) && !strcmp(rc_census_first_saved(&d)->field, "k"), "first");
  rc_census_diff_free(&d);
  /* control: only local differences leave no saved one */
  CHECK(compare("l.f.m/a\tlocal\tFALSE\n", "l.f.m/a\tlocal\tTRUE\n", &d, &err) == 0, "%s", err.msg);
  CHECK(d.n_saved_differ == 0 && !rc_census_first_saved(&d), "local only");
  rc_census_diff_free(&d);
}

static void test_before_save(void) {
  rc_census_diff d;
  rc_err err;
  /* the through process's save moved rng.offset from 5 to 9; the resumed
   * process has 5, what was saved */
  put("t.before-save.txt", "rng.offset\tsaved\t5\n");
  CHECK(rc_census_compare_files(put("t.txt", "rng.offset\tsaved\t9\n"),
                                put("r.txt", "rng.offset\tsaved\t5\n"), &d, &err) == 0,
        "%s", err.msg);
  char line[512];
  rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(d.n_diffs == 1 && d.diffs[0].before &&
            strstr(line, "the save changed the process that "
                         "saved: 5 before its save, 9 after"),
        "%s", line);
  rc_census_diff_free(&d);
  /* control: without a before-save census the same values read "not restored" */
  char p[256];
  snprintf(p, sizeof p, "%s/t.before-save.txt", dir);
  unlink(p);
  CHECK(rc_census_compare_files(put("t.txt", "rng.offset\tsaved\t9\n"),
                                put("r.txt", "rng.offset\tsaved\t5\n"), &d, &err) == 0,
        "%s", err.msg);
  rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(!d.diffs[0].before && strstr(line, "not restored by the load"), "%s", line);
  rc_census_diff_free(&d);
}

static void test_malformed(void) {
  rc_census_diff d;
  rc_err err;
  const char *bad[] = {"x\tsaved\n", "x\tkept\t1\n", "\tsaved\t1\n", "x\tsaved\t1\nx\tsaved\t1\n",
                       "x saved 1\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = compare("x\tsaved\t1\n", bad[i], &d, &err);
    CHECK(rc == 65 && strstr(err.msg, "b.txt"), "malformed %zu: rc %d %s", i, rc, err.msg);
  }
  int rc = compare("x\tsaved\t1\n", "x\tsaved\t1\ny local 2\n", &d, &err);
  CHECK(rc == 65 && strstr(err.msg, "b.txt:2"), "the line is named: %s", err.msg);
  rc_census_diff_free(&d);
  /* NUL bytes */
  char path[256];
  snprintf(path, sizeof path, "%s/nul.txt", dir);
  FILE *f = fopen(path, "wb");
  fwrite("x\tsaved\t1\0\n", 1, 11, f);
  fclose(f);
  memset(&err, 0, sizeof err);
  rc = rc_census_compare_files(put("a.txt", "x\tsaved\t1\n"), path, &d, &err);
  CHECK(rc == 65 && strstr(err.msg, "NUL"), "NUL: %d %s", rc, err.msg);
  /* a missing file is 66; a directory is not a census */
  memset(&err, 0, sizeof err);
  rc = rc_census_compare_files(put("a.txt", "x\tsaved\t1\n"), "/nonexistent/census.txt", &d, &err);
  CHECK(rc == 66, "missing: %d %s", rc, err.msg);
  rc = rc_census_compare_files(put("a.txt", "x\tsaved\t1\n"), dir, &d, &err);
  CHECK(rc == 65, "directory: %d %s", rc, err.msg);
  /* control: a well-formed pair */
  CHECK(compare("x\tsaved\t1\n", "x\tsaved\t1\n", &d, &err) == 0, "%s", err.msg);
  rc_census_diff_free(&d);
}

/* CRLF: the CR is not part of the value (a census written on Windows). */
static void test_crlf(void) {
  rc_census_diff d;
  rc_err err;
  const char *crlf = "# comment\r\nx\tsaved\t1\r\ny\tsaved\t2\r\nz\tlocal\tp\tnote\r\n";
  CHECK(compare(crlf, "x\tsaved\t1\ny\tsaved\t2\nz\tlocal\tp\tnote\n", &d, &err) == 0, "%s",
        err.msg);
  CHECK(d.n_fields == 3 && d.n_diffs == 0, "CRLF against LF: %d differences", d.n_diffs);
  rc_census_diff_free(&d);
  /* control: a value that really differs still differs, shown without a CR */
  CHECK(compare(crlf, "x\tsaved\t1\ny\tsaved\t3\nz\tlocal\tp\tnote\n", &d, &err) == 0, "%s",
        err.msg);
  char line[512] = "";
  if (d.n_diffs) rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(d.n_diffs == 1 && d.n_saved_differ == 1 &&
            !strcmp(line, "y: through 2, resumed 3 (saved: not restored by the load)"),
        "CRLF, a real difference: %s", line);
  rc_census_diff_free(&d);
}

/* The first-step pair's differences follow the after-load ones, marked. */
static void test_first_step(void) {
  rc_census_diff d;
  rc_err err = {0};
  const char *after = "iteration\tsaved\t3\nrng.torch_cpu\tsaved\tfp=1\nk\tsaved\t5\n";
  const char *ta = put("ta.txt", after), *ra = put("ra.txt", after);
  CHECK(rc_census_compare_files(ta, ra, &d, &err) == 0 && d.n_diffs == 0, "after-load equal");
  const char *tf = put("tf.txt", "iteration\tsaved\t3\nrng.torch_cpu\tsaved\tfp=1\nk\tsaved\t5\n"
                                 "new\tsaved\t1\n");
  const char *rf = put("rf.txt", "iteration\tsaved\t3\nrng.torch_cpu\tsaved\tfp=2\nk\tsaved\t5\n"
                                 "new\tsaved\t2\n");
  CHECK(rc_census_compare_first_step(tf, rf, ta, ra, &d, &err) == 0, "%s", err.msg);
  CHECK(d.first_step && d.first_fields == 4 && d.first_saved_differ == 2 && d.n_saved_differ == 0,
        "first-step counts %d %d %d", d.first_step, d.first_fields, d.first_saved_differ);
  const rc_census_field_diff *f = rc_census_first_saved(&d);
  char line[512] = "";
  if (f) rc_census_describe(f, "through", "resumed", line, sizeof line);
  CHECK(f && f->first_step && f->after_load == RC_AFTER_LOAD_EQUAL &&
            !strcmp(line, "before the first step: rng.torch_cpu: through fp=1, resumed fp=2 "
                          "(saved; equal in the census after the load: it changed between the "
                          "load and the first step)"),
        "%s", line);
  CHECK(d.n_diffs == 2 && d.diffs[1].after_load == RC_AFTER_LOAD_ABSENT, "a field new at the "
                                                                         "first step");
  /* an after-load difference goes before the first-step ones, and is the first */
  rc_census_diff r0;
  CHECK(rc_census_compare_files(put("x1.txt", "k\tsaved\t5\n"), put("x2.txt", "k\tsaved\t6\n"), &r0,
                                &err) == 0,
        "%s", err.msg);
  CHECK(rc_census_merge(&d, &r0, 1), "merge");
  CHECK(d.n_diffs == 3 && !d.diffs[0].first_step && !strcmp(d.diffs[0].field, "rank 1: k") &&
            rc_census_first_saved(&d) == &d.diffs[0] && d.n_saved_differ == 1 &&
            d.first_saved_differ == 2,
        "merged: %d %s", d.n_diffs, d.n_diffs ? d.diffs[0].field : "-");
  rc_census_diff_free(&d);
  /* control: equal first-step censuses add nothing but their counts */
  CHECK(rc_census_compare_files(ta, ra, &d, &err) == 0, "%s", err.msg);
  CHECK(rc_census_compare_first_step(put("tf.txt", after), put("rf.txt", after), ta, ra, &d,
                                     &err) == 0,
        "%s", err.msg);
  CHECK(d.first_step && d.first_fields == 3 && d.n_diffs == 0 && !rc_census_first_saved(&d),
        "equal first-step censuses");
  rc_census_diff_free(&d);
  /* a malformed first-step census is 65, and d is left as it was */
  CHECK(rc_census_compare_files(ta, ra, &d, &err) == 0, "%s", err.msg);
  memset(&err, 0, sizeof err);
  int rc = rc_census_compare_first_step(put("tf.txt", "x saved 1\n"), rf, ta, ra, &d, &err);
  CHECK(rc == 65 && strstr(err.msg, "tf.txt:1") && !d.first_step, "malformed: %d %s", rc, err.msg);
  rc_census_diff_free(&d);
}

/* What a census covers comes from its field names, and says no more. */
static void test_coverage(void) {
  rc_census_diff d;
  rc_err err;
  const char *a = "iteration\tsaved\t3\ndata.consumed_samples\tsaved\t12\nrng.offset\tsaved\t0\n"
                  "optimizer.exp_avg.w\tsaved\tfp=1\nmodel.w\tsaved\tfp=2\n"
                  "state.ema.shadow.w\tsaved\tfp=3\nstate.sampler.epoch\tsaved\t0\n"
                  "counter\tsaved\t3\n";
  CHECK(compare(a, a, &d, &err) == 0, "%s", err.msg);
  char text[512];
  rc_census_coverage(&d, text, sizeof text);
  CHECK(!strcmp(text, "iteration, data position, RNG, optimizer moments, model weights, "
                      "registered state (ema, sampler), other fields: counter"),
        "coverage: %s", text);
  rc_census_diff_free(&d);
  /* control: without RNG and registered fields neither is claimed */
  CHECK(compare("iteration\tsaved\t3\nweights\tsaved\t1\n", "iteration\tsaved\t3\n", &d, &err) == 0,
        "%s", err.msg);
  rc_census_coverage(&d, text, sizeof text);
  CHECK(!strcmp(text, "iteration, other fields: weights"), "coverage: %s", text);
  rc_census_diff_free(&d);
}

/* A value holding ESC is described as \x1b, never as the byte. */
static void test_escape(void) {
  rc_census_diff d;
  rc_err err;
  CHECK(compare("tag\tsaved\ta\x1b[31mred\n", "tag\tsaved\tb\n", &d, &err) == 0, "%s", err.msg);
  char line[512] = "";
  if (d.n_diffs) rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(
      !strchr(line, 0x1b) &&
          !strcmp(line, "tag: through a\\x1b[31mred, resumed b (saved: not restored by the load)"),
      "escaped: %s", line);
  /* control: the value itself keeps the byte (report.json writes it as it is) */
  CHECK(d.n_diffs == 1 && strchr(d.diffs[0].a, 0x1b), "the raw value holds ESC");
  rc_census_diff_free(&d);
}

/* derived and copy fields fail like saved ones, worded as what the next
 * step computes and as a copy not matching its master; a derived field
 * beside a differing saved one is listed, not counted. Controls: the same
 * fields equal leave no failure; the class names a malformed one. */
static void test_derived_and_copy(void) {
  rc_census_diff d;
  rc_err err;
  const char *a = "scheduler.num_steps\tsaved\t5\nscheduler.min_lr\tderived\t0.0003\n"
                  "copy.device.moe.expert_bias.L1\tcopy\tok\tnote\n";
  const char *b = "scheduler.num_steps\tsaved\t5\nscheduler.min_lr\tderived\t0\n"
                  "copy.device.moe.expert_bias.L1\tcopy\tstale: copy fp=1, master fp=2\tnote\n";
  CHECK(compare(a, b, &d, &err) == 0, "%s", err.msg);
  CHECK(d.n_saved_differ == 2 && d.n_derived_differ == 1 && d.n_copy_differ == 1 &&
            d.n_local_differ == 0,
        "counts %d %d %d", d.n_saved_differ, d.n_derived_differ, d.n_copy_differ);
  char line[1024];
  rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(d.diffs[0].cls == RC_CENSUS_DERIVED && d.diffs[0].sources_equal &&
            !strcmp(line, "scheduler.min_lr: through 0.0003, resumed 0 (derived: the resumed "
                          "process computes 0 where the through process computes 0.0003, though "
                          "the state they come from is identical (rebuilt from a default?))"),
        "%s", line);
  rc_census_describe(&d.diffs[1], "through", "resumed", line, sizeof line);
  CHECK(d.diffs[1].cls == RC_CENSUS_COPY &&
            strstr(line, "(copy: the device copy of moe.expert_bias.L1 is not the loaded value in "
                         "the resumed process)"),
        "%s", line);
  rc_census_count_phrase(&d, false, line, sizeof line);
  CHECK(!strcmp(line, "1 derived field and 1 in-process copy differ"), "phrase: %s", line);
  rc_census_coverage(&d, line, sizeof line);
  CHECK(strstr(line, "the settings the next step uses (derived)") &&
            strstr(line, "in-process copies against their masters") && !strstr(line, "other"),
        "coverage: %s", line);
  rc_census_diff_free(&d);
  /* a saved field differs too: the derived one may follow from it, listed
   * after it and not counted */
  const char *c = "scheduler.num_steps\tsaved\t0\nscheduler.min_lr\tderived\t0\n"
                  "copy.device.moe.expert_bias.L1\tcopy\tok\tnote\n";
  CHECK(compare(a, c, &d, &err) == 0, "%s", err.msg);
  CHECK(d.n_saved_differ == 1 && d.n_derived_differ == 0 && d.n_diffs == 2, "consequence: %d %d",
        d.n_saved_differ, d.n_diffs);
  CHECK(d.diffs[1].consequence && !d.diffs[1].sources_equal &&
            rc_census_first_saved(&d) == &d.diffs[0],
        "the saved field leads");
  rc_census_count_phrase(&d, false, line, sizeof line);
  CHECK(!strcmp(line, "1 saved field differs"), "phrase: %s", line);
  rc_census_diff_free(&d);
  /* control: equal values, nothing fails */
  CHECK(compare(a, a, &d, &err) == 0 && d.n_saved_differ == 0 && d.n_diffs == 0, "equal");
  rc_census_diff_free(&d);
  CHECK(compare(a, "x\tderivd\t1\n", &d, &err) == 65, "an unknown class: %s", err.msg);
}

/* Who wrote it: the through leg's census of what its save wrote (beside
 * its census, .saved.txt) says whether the save or the load is wrong.
 * Control: without it, the old wording. */
static void test_written(void) {
  rc_census_diff d;
  rc_err err;
  char line[1024];
  put("w.saved.txt", "data.consumed_samples\tsaved\t18\nscheduler.num_steps\tsaved\t5\n");
  const char *t = put("w.txt", "data.consumed_samples\tsaved\t20\nscheduler.num_steps\tsaved\t5\n");
  const char *r =
      put("wr.txt", "data.consumed_samples\tsaved\t18\nscheduler.num_steps\tsaved\t0\n");
  CHECK(rc_census_compare_files(t, r, &d, &err) == 0, "%s", err.msg);
  CHECK(d.n_diffs == 2 && d.diffs[0].written && !strcmp(d.diffs[0].written, "18"), "written");
  rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(!strcmp(line, "data.consumed_samples: through 20, resumed 18 (saved: the save wrote 18, "
                      "which differs from the saving process's 20; the resumed process has what "
                      "was saved)"),
        "the save: %s", line);
  rc_census_describe(&d.diffs[1], "through", "resumed", line, sizeof line);
  CHECK(!strcmp(line, "scheduler.num_steps: through 5, resumed 0 (saved: not restored by the "
                      "load); the checkpoint holds 5, as the saving process does"),
        "the load: %s", line);
  rc_census_diff_free(&d);
  /* rank 1's replicated fields are in rank 0's shard only */
  put("c.rank0.saved.txt", "data.consumed_samples\tsaved\t18\n");
  put("c.rank1.saved.txt", "rng.offset\tsaved\t4\n");
  CHECK(rc_census_compare_files(put("c.rank1.txt", "data.consumed_samples\tsaved\t20\n"),
                                put("cr.rank1.txt", "data.consumed_samples\tsaved\t18\n"), &d,
                                &err) == 0,
        "%s", err.msg);
  CHECK(d.n_diffs == 1 && d.diffs[0].written && !strcmp(d.diffs[0].written, "18") &&
            d.diffs[0].written_rank0,
        "rank 0's for a replicated field");
  rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(strstr(line, "the save wrote 18 (into rank 0's shard only: this rank's is not in the "
                     "checkpoint)"),
        "rank 0's: %s", line);
  rc_census_diff_free(&d);
  /* control: no census of the save, no claim about it */
  char p[256];
  snprintf(p, sizeof p, "%s/w.saved.txt", dir);
  unlink(p);
  CHECK(rc_census_compare_files(t, r, &d, &err) == 0, "%s", err.msg);
  rc_census_describe(&d.diffs[0], "through", "resumed", line, sizeof line);
  CHECK(!d.diffs[0].written &&
            !strcmp(line, "data.consumed_samples: through 20, resumed 18 (saved: not restored by "
                          "the load)"),
        "no census of the save: %s", line);
  rc_census_diff_free(&d);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/rc_census_test.XXXXXX");
  if (!mkdtemp(dir)) return 1;
  test_equal_and_order();
  test_one_side_and_groups();
  test_before_save();
  test_malformed();
  test_crlf();
  test_first_step();
  test_coverage();
  test_escape();
  test_derived_and_copy();
  test_written();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (!failures && system(cmd)) return 1;
  if (failures) fprintf(stderr, "%d failure(s); files in %s\n", failures, dir);
  return failures ? 1 : 0;
}
