/* test_census.c — the state-census comparison (harness/census.c): fields
 * matched by name whatever their order, saved differences counted and
 * described with both values, local ones grouped with their notes, fields
 * on one side only, the before-save census, and every malformed file
 * refused with 65 naming the line. Each check has its control: the same
 * files without the difference compare clean. */
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

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/rc_census_test.XXXXXX");
  if (!mkdtemp(dir)) return 1;
  test_equal_and_order();
  test_one_side_and_groups();
  test_before_save();
  test_malformed();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (!failures && system(cmd)) return 1;
  if (failures) fprintf(stderr, "%d failure(s); files in %s\n", failures, dir);
  return failures ? 1 : 0;
}
