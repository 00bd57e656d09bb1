/* test_run_report.c — the verdict and the report files, on runs whose
 * outcomes are set by hand (no process is started):
 *  - exit codes: identical 0, resume divergence 1, A/A failure 2 (and it
 *    wins over a divergence), failed leg 70, interrupt 130; with
 *    --git-bisect 0 / 1 / 125; the mechanism of --confirm-arm; with --aa a
 *    save leg that is not a prefix (3) told from non-determinism (2);
 *  - report.json parses with the strict reader and carries the schema name,
 *    version, verdict and first divergence;
 *  - the report names (harness/schema.h): what readers accept;
 *  - the Markdown summary's escaping under GFM (harness/report_md.c);
 *  - JUnit XML and the SVG plot stay well-formed when leg reasons, logs and
 *    paths hold markup, control characters and invalid UTF-8; checked with
 *    python3 or xmllint when present (the validator itself must reject a
 *    broken document first), and by byte scans in C regardless;
 *  - the text report writes control characters of flags, summaries, leg
 *    reasons and logs as \xHH, never raw;
 *  - a census missing from a leg of the built-in trainer that finished is
 *    an error (66, naming the file); an exec trainer's is a skip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/json.h"
#include "harness/report.h"
#include "harness/run.h"
#include "harness/schema.h"

#include "check.h"

static char tmpdir[256];

static void plan_in(rc_run *r, bool confirm, bool bisect, bool aa, const char *out) {
  static int64_t ks[] = {5};
  rc_run_opts o;
  memset(&o, 0, sizeof o);
  o.steps = 10;
  o.save_at = ks;
  o.n_save_at = 1;
  o.out_dir = out;
  o.jobs = 1;
  o.trainer = RC_TRAINER_SELF;
  o.self_exe = "/bin/true";
  o.confirm_arm = confirm;
  o.git_bisect = bisect;
  o.aa = aa;
  rc_err err = {0};
  if (rc_run_plan(r, &o, &err)) {
    fprintf(stderr, "plan: %s\n", err.msg);
    exit(1);
  }
  for (int i = 0; i < r->n_legs; i++) r->legs[i].state = RC_LEG_OK;
  for (int i = 0; i < r->n_checks; i++) r->checks[i].status = RC_CHECK_IDENTICAL;
}

static void plan_aa(rc_run *r, bool confirm, bool bisect, bool aa) {
  plan_in(r, confirm, bisect, aa, tmpdir);
}

static void plan(rc_run *r, bool confirm, bool bisect) {
  plan_aa(r, confirm, bisect, false);
}

static rc_check *check_named(rc_run *r, const char *name) {
  for (int i = 0; i < r->n_checks; i++)
    if (!strcmp(r->checks[i].name, name)) return &r->checks[i];
  fprintf(stderr, "no check %s\n", name);
  exit(1);
}

static int verdict_of(rc_run *r) {
  rc_run_verdict(r);
  return r->exit_code;
}

static void test_exit_codes(void) {
  for (int bisect = 0; bisect < 2; bisect++) {
    rc_run r;
    plan(&r, false, bisect);
    CHECK(verdict_of(&r) == 0 && !strcmp(r.verdict, "identical"), "all identical -> 0");

    check_named(&r, "RESUME@5→10")->status = RC_CHECK_DIFFERS;
    CHECK(verdict_of(&r) == 1 && !strcmp(r.verdict, "resume-diverged"),
          "resume differs -> 1 (bisect %d)", bisect);

    check_named(&r, "A/A@5")->status = RC_CHECK_DIFFERS;
    CHECK(verdict_of(&r) == (bisect ? 125 : 2) && !strcmp(r.verdict, "aa-failed"),
          "A/A failure -> %d, even with a divergence", bisect ? 125 : 2);
    CHECK(strstr(r.verdict_text, "inconclusive") != NULL, "A/A failure says inconclusive");
    check_named(&r, "A/A@5")->status = RC_CHECK_IDENTICAL;
    check_named(&r, "TRACE save")->status = RC_CHECK_DIFFERS;
    CHECK(verdict_of(&r) == (bisect ? 125 : 2), "a trace difference before K is an A/A failure");
    check_named(&r, "TRACE save")->status = RC_CHECK_IDENTICAL;

    r.legs[2].state = RC_LEG_FAILED;
    snprintf(r.legs[2].reason, sizeof r.legs[2].reason, "exited with status 3");
    CHECK(verdict_of(&r) == (bisect ? 125 : 70) && !strcmp(r.verdict, "leg-failed"),
          "failed leg -> %d", bisect ? 125 : 70);
    CHECK(strstr(r.verdict_text, "exited with status 3") != NULL, "names the exit status");
    r.legs[2].state = RC_LEG_OK;
    check_named(&r, "RESUME@5→10")->status = RC_CHECK_IDENTICAL;
    CHECK(verdict_of(&r) == 0, "back to identical -> 0");
    r.interrupted = true;
    CHECK(verdict_of(&r) == 130, "interrupted -> 130");
    rc_run_free(&r);
  }
}

/* --aa tells a save leg that is not a prefix (through vs aa identical,
 * through vs save differs: exit 3) from non-determinism (through vs aa
 * differs: exit 2); only an A/A@N that was compared and found identical
 * counts, in every arm. */
static void test_not_a_prefix(void) {
  for (int bisect = 0; bisect < 2; bisect++) {
    rc_run r;
    plan_aa(&r, false, bisect, true);
    check_named(&r, "TRACE save")->status = RC_CHECK_DIFFERS;
    check_named(&r, "RESUME@5→10")->status = RC_CHECK_DIFFERS;
    CHECK(verdict_of(&r) == (bisect ? 125 : 3) && !strcmp(r.verdict, "not-a-prefix"),
          "through vs aa identical, save differs -> not-a-prefix (bisect %d)", bisect);
    CHECK(!strcmp(rc_verdict_headline(&r), "SAVE LEG NOT A PREFIX"), "headline");
    CHECK(strstr(r.verdict_text, "A/A@10 identical") != NULL, "names the A/A@N that agrees");
    CHECK(r.verdict_hint[0] != 0, "a hint");
    check_named(&r, "A/A@10")->status = RC_CHECK_DIFFERS;
    CHECK(verdict_of(&r) == (bisect ? 125 : 2) && !strcmp(r.verdict, "aa-failed"),
          "control: through vs aa differ -> aa-failed");
    CHECK(strstr(r.verdict_text, "not deterministic") && !strstr(r.verdict_text, "not a prefix"),
          "control: non-determinism alone");
    check_named(&r, "A/A@10")->status = RC_CHECK_SKIPPED;
    CHECK(verdict_of(&r) == (bisect ? 125 : 2), "an A/A@N not compared is no evidence");
    check_named(&r, "A/A@10")->status = RC_CHECK_IDENTICAL;
    check_named(&r, "TRACE aa")->status = RC_CHECK_DIFFERS;
    CHECK(verdict_of(&r) == (bisect ? 125 : 2), "through vs aa traces differ -> aa-failed");
    check_named(&r, "TRACE aa")->status = RC_CHECK_SKIPPED;
    CHECK(verdict_of(&r) == (bisect ? 125 : 3), "no traces at all: the states decide");
    rc_run_free(&r);
  }
  rc_run r;
  plan_aa(&r, true, false, true);
  check_named(&r, "fusion-on/A/A@5")->status = RC_CHECK_DIFFERS;
  CHECK(verdict_of(&r) == 3, "confirm-arm: not a prefix with both arms' A/A@N identical");
  CHECK(strstr(r.mechanism_text, "not a prefix") != NULL, "the mechanism says why inconclusive");
  check_named(&r, "fusion-off/A/A@10")->status = RC_CHECK_DIFFERS;
  CHECK(verdict_of(&r) == 2, "confirm-arm: one arm's through legs differ -> aa-failed");
  rc_run_free(&r);
  /* without --aa: the same difference is an A/A failure naming both causes */
  plan(&r, false, false);
  check_named(&r, "TRACE save")->status = RC_CHECK_DIFFERS;
  CHECK(verdict_of(&r) == 2 && strstr(r.verdict_text, "either the run is not deterministic") &&
            strstr(r.verdict_hint, "--aa"),
        "no --aa: aa-failed, both explanations, the --aa suggestion");
  rc_run_free(&r);
}

static void test_mechanism(void) {
  rc_run r;
  plan(&r, true, false);
  CHECK(verdict_of(&r) == 0 && r.mechanism == RC_MECH_NOTHING, "nothing to confirm");
  check_named(&r, "fusion-on/RESUME@5→10")->status = RC_CHECK_DIFFERS;
  CHECK(verdict_of(&r) == 1 && r.mechanism == RC_MECH_CONFIRMED &&
            strstr(r.mechanism_text, "mechanism confirmed"),
        "divergence with fusion on only: confirmed");
  check_named(&r, "fusion-off/RESUME@5→10")->status = RC_CHECK_DIFFERS;
  CHECK(verdict_of(&r) == 1 && r.mechanism == RC_MECH_NOT_CONFIRMED,
        "divergence in both arms: not confirmed");
  check_named(&r, "fusion-off/RESUME@5→10")->status = RC_CHECK_IDENTICAL;
  check_named(&r, "fusion-off/A/A@5")->status = RC_CHECK_DIFFERS;
  CHECK(verdict_of(&r) == 2 && r.mechanism == RC_MECH_INCONCLUSIVE, "A/A failure: inconclusive");
  check_named(&r, "fusion-off/A/A@5")->status = RC_CHECK_IDENTICAL;
  check_named(&r, "fusion-on/RESUME@5→10")->status = RC_CHECK_IDENTICAL;
  check_named(&r, "ARMS@10")->status = RC_CHECK_DIFFERS;
  CHECK(verdict_of(&r) == 1 && !strcmp(r.verdict, "arms-differ"), "arms differ -> 1");
  rc_run_free(&r);
}

/* python3 or xmllint on path; 0 valid, 1 invalid, -1 no validator. */
static int xml_valid(const char *path) {
  char cmd[1024];
  if (system("command -v python3 >/dev/null 2>&1") == 0) {
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys,xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' '%s' "
             ">/dev/null 2>&1",
             path);
    return system(cmd) == 0 ? 0 : 1;
  }
  if (system("command -v xmllint >/dev/null 2>&1") == 0) {
    snprintf(cmd, sizeof cmd, "xmllint --noout '%s' >/dev/null 2>&1", path);
    return system(cmd) == 0 ? 0 : 1;
  }
  return -1;
}

/* Bytes an XML 1.0 document may not contain raw, and invalid UTF-8. */
static bool clean_bytes(const char *text, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') return false;
    if (c == 0xFF || c == 0xFE) return false;
  }
  return true;
}

static char *slurp(const char *path, size_t *n) {
  char *text = NULL;
  rc_err err = {0};
  if (rc_read_file(path, &text, n, &err)) return NULL;
  return text;
}

static void write_trace(const char *dir, int from, int to, int diverge_at) {
  char path[512];
  rc_err err = {0};
  rc_mkdir_p(dir, &err);
  snprintf(path, sizeof path, "%s/trace.csv", dir);
  FILE *f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "step,loss,loss_hex,grad_norm,grad_norm_hex\n");
  for (int s = from; s <= to; s++) {
    double loss = 5.0 - 0.1 * s, g = 1.0 + 0.01 * s + (diverge_at && s >= diverge_at ? 1e-4 : 0);
    fprintf(f, "%d,%.9g,%a,%.9g,%a\n", s, loss, loss, g, g);
  }
  fclose(f);
}

static void test_files(void) {
  rc_run r;
  plan(&r, false, false);
  /* a divergence with hostile strings in every free-text field */
  rc_check *res = check_named(&r, "RESUME@5→10");
  res->status = RC_CHECK_DIFFERS;
  snprintf(res->summary, sizeof res->summary,
           "through@10 vs resume@5→10: <b>&\"quoted\"' \x01\x1b[31m bad\xff\xfe utf8 ]]> --");
  snprintf(res->first_dataset, sizeof res->first_dataset, "/model/<x>&y");
  rc_check *tr = check_named(&r, "TRACE resume@5");
  tr->status = RC_CHECK_DIFFERS;
  tr->have_trace = true;
  tr->trace.comparable = true;
  tr->trace.first_step = 6;
  snprintf(tr->trace.columns, sizeof tr->trace.columns, "grad_norm,fp_main_grad");
  snprintf(tr->trace.equal_columns, sizeof tr->trace.equal_columns, "loss,lr");
  snprintf(tr->summary, sizeof tr->summary, "diverged at step 6: grad_norm differs; loss equal");
  r.legs[2].state = RC_LEG_FAILED;
  r.legs[2].exit_code = 3;
  snprintf(r.legs[2].reason, sizeof r.legs[2].reason, "exited with status 3 <&>");
  snprintf(r.legs[2].log_tail, sizeof r.legs[2].log_tail,
           "line one\n</error>]]><![CDATA[ \x07 bell \xc3\x28 bad\nlast line");
  rc_run_verdict(&r);
  CHECK(r.exit_code == 70, "failed leg verdict");
  write_trace(r.legs[0].dir, 1, 10, 0);
  write_trace(r.legs[1].dir, 1, 5, 0);
  write_trace(r.legs[2].dir, 6, 10, 6);
  r.first_div_step = 6;

  char path[512];
  rc_err err = {0};
  /* JSON */
  snprintf(path, sizeof path, "%s/report.json", tmpdir);
  CHECK(rc_report_json(&r, path, &err) == 0, "%s", err.msg);
  size_t n = 0;
  char *text = slurp(path, &n);
  char eb[256] = "";
  rc_json *j = text ? rc_json_parse(text, n, eb, sizeof eb) : NULL;
  CHECK(j != NULL, "report.json parses: %s", eb);
  if (j) {
    CHECK(!strcmp(rc_json_get_str(j, "schema"), RC_RUN_REPORT_SCHEMA), "schema name");
    int64_t v = 0;
    CHECK(rc_json_get_i64(j, "schema_version", &v) && v == RC_RUN_REPORT_SCHEMA_VERSION, "version");
    CHECK(rc_json_get_i64(j, "exit_code", &v) && v == 70, "exit_code in the report");
    CHECK(!strcmp(rc_json_get_str(j, "verdict"), "leg-failed"), "verdict in the report");
    const rc_json *legs = rc_json_get(j, "legs"), *checks = rc_json_get(j, "checks");
    CHECK(legs && legs->type == RC_JSON_ARR && legs->nkids == 3, "three legs");
    CHECK(checks && checks->type == RC_JSON_ARR && checks->nkids == 5,
          "five checks (A/A, RESUME, two traces, CENSUS)");
    if (legs && legs->nkids == 3) {
      CHECK(!strcmp(rc_json_get_str(&legs->kids[2], "status"), "failed"), "leg status");
      CHECK(rc_json_get_i64(&legs->kids[2], "exit_code", &v) && v == 3, "leg exit code");
    }
    rc_json_free(j);
  }
  CHECK(text && clean_bytes(text, n), "JSON has no raw control bytes or invalid UTF-8");
  free(text);

  /* JUnit, SVG, Markdown */
  char junit[512], svg[512], md[512], broken[512];
  snprintf(junit, sizeof junit, "%s/junit.xml", tmpdir);
  snprintf(svg, sizeof svg, "%s/plot.svg", tmpdir);
  snprintf(md, sizeof md, "%s/summary.md", tmpdir);
  CHECK(rc_report_junit(&r, junit, &err) == 0, "%s", err.msg);
  CHECK(rc_plot_svg(&r, svg, &err) == 0, "%s", err.msg);
  CHECK(rc_report_markdown(&r, md, &err) == 0, "%s", err.msg);
  text = slurp(junit, &n);
  CHECK(text && clean_bytes(text, n), "JUnit bytes are XML-clean");
  CHECK(text && strstr(text, "&lt;b&gt;&amp;&quot;quoted&quot;&apos;"), "markup escaped");
  CHECK(text && !strstr(text, "<b>") && !strstr(text, "</error>]]>"), "no raw markup from data");
  CHECK(text && strstr(text, "<failure") && strstr(text, "type=\"leg-failed\""),
        "a failure for the check, an error for the leg");
  free(text);
  text = slurp(svg, &n);
  CHECK(text && clean_bytes(text, n), "SVG bytes are XML-clean");
  CHECK(text && strstr(text, "<polyline") && strstr(text, "first divergence: step 6") &&
            strstr(text, "K=5"),
        "SVG has series, the K line and the divergence line");
  free(text);
  text = slurp(md, &n);
  CHECK(text && strstr(text, "## resumecheck: LEG FAILED (exit 70)") && strstr(text, "| A/A@5 |"),
        "Markdown heading and table");
  free(text);

  snprintf(broken, sizeof broken, "%s/broken.xml", tmpdir);
  FILE *f = fopen(broken, "w");
  if (f) {
    fputs("<?xml version=\"1.0\"?>\n<a><b></a>\n", f);
    fclose(f);
  }
  int v = xml_valid(broken);
  if (v < 0) {
    printf("run_report: no python3 or xmllint: XML validated by byte scans only\n");
  } else {
    CHECK(v == 1, "the validator rejects a broken document (negative control)");
    CHECK(xml_valid(junit) == 0, "JUnit is well-formed XML");
    CHECK(xml_valid(svg) == 0, "the SVG is well-formed XML");
  }
  rc_run_free(&r);
}

/* The Markdown summary shows text from outside as it is (harness/report_md.c
 * says which GFM rules): one value with '|', a backtick, '*', '_', '<', a
 * line break and a backslash before a '|' in each place it can land. */
#define HOSTILE "a|b`c*d_e<f\ng\\|h"
static void test_markdown(void) {
  rc_run r;
  plan(&r, false, false);
  char *fwd[] = {"--tag", "v|`*_<\nw"};
  r.opts.fwd = fwd;
  r.opts.n_fwd = 2;
  rc_check *res = check_named(&r, "RESUME@5→10");
  res->status = RC_CHECK_DIFFERS;
  snprintf(res->summary, sizeof res->summary, "s " HOSTILE);
  snprintf(res->first_dataset, sizeof res->first_dataset, "/m/" HOSTILE);
  res->first_is_dataset = true;
  r.legs[2].state = RC_LEG_FAILED;
  snprintf(r.legs[2].reason, sizeof r.legs[2].reason, "*died*");
  snprintf(r.legs[2].log_tail, sizeof r.legs[2].log_tail, "x\n   ```\n````y");
  rc_run_verdict(&r);
  snprintf(r.verdict_text, sizeof r.verdict_text, "# " HOSTILE);
  snprintf(r.first_div_dataset, sizeof r.first_div_dataset, "/m/" HOSTILE);
  r.first_div_is_dataset = true;
  snprintf(r.first_div_largest, sizeof r.first_div_largest, "`x`");

  char md[512];
  rc_err err = {0};
  snprintf(md, sizeof md, "%s/escape.md", tmpdir);
  CHECK(rc_report_markdown(&r, md, &err) == 0, "%s", err.msg);
  size_t n = 0;
  char *t = slurp(md, &n);
  if (!t) {
    CHECK(0, "no %s", md);
    rc_run_free(&r);
    return;
  }
  /* outside tables a code span takes no backslashes; a fence longer than
   * the text's backticks; the line break a space */
  CHECK(strstr(t, "- first differing dataset: ``/m/a|b`c*d_e<f g\\|h``\n"),
        "code span outside a table: verbatim, a double fence");
  CHECK(strstr(t, "Flags: ``--tag v|`*_< w``\n"), "flags as one code span, verbatim");
  CHECK(strstr(t, "- largest difference: `` `x` ``\n"), "backticks at the ends: padded");
  /* in a table cell every '|' of a code span is "\|" (GFM example 200) */
  CHECK(strstr(t,
               "| RESUME@5→10 | **differs** | s a\\|b\\`c\\*d\\_e\\<f g\\\\\\|h; first differing "
               "dataset ``/m/a\\|b`c*d_e<f g\\\\|h`` |\n"),
        "table cell: text escaped, code span with \\| for each pipe");
  /* plain text: punctuation escaped, a leading '#' too */
  CHECK(strstr(t, "- \\# a\\|b\\`c\\*d\\_e\\<f g\\\\\\|h\n"), "plain text escaped");
  CHECK(strstr(t, "** \\*died\\*:\n"), "a leg's reason cannot close the bold label");
  /* a log line of backticks, even indented, cannot close the block */
  CHECK(strstr(t, "\n`````\n  x\n     ```\n  ````y\n`````\n"), "the log fence outgrows the log");
  /* what the writer did before: "\|" in a single-backtick span outside a table */
  CHECK(!strstr(t, "dataset: `/m/a\\|b"), "no backslash in a code span outside a table");
  free(t);
  rc_run_free(&r);
}

/* harness/schema.h: readers accept each kind's name with schema_version
 * 1..current, the compare report's old name ("resumecheck-compare" with
 * `version` 1) for one more version, and nothing else. */
static int accepts(const char *doc, rc_schema_kind kind) {
  char eb[128];
  rc_json *j = rc_json_parse(doc, strlen(doc), eb, sizeof eb);
  if (!j) {
    fprintf(stderr, "bad test document %s: %s\n", doc, eb);
    exit(1);
  }
  rc_err err = {0};
  int rc = rc_schema_accept(j, kind, "doc", &err);
  rc_json_free(j);
  return rc;
}

static void test_schema(void) {
  CHECK(accepts("{\"schema\": \"resumecheck.run-report\", \"schema_version\": 1}", RC_SCHEMA_RUN) ==
            0,
        "run report v1");
  CHECK(accepts("{\"schema\": \"resumecheck.compare-report\", \"schema_version\": 2}",
                RC_SCHEMA_COMPARE) == 0,
        "compare report v2");
  CHECK(accepts("{\"schema\": \"resumecheck.compare-report\", \"schema_version\": 1}",
                RC_SCHEMA_COMPARE) == 0,
        "compare report, an older schema_version");
  CHECK(accepts("{\"schema\": \"resumecheck.bisect-report\", \"schema_version\": 1}",
                RC_SCHEMA_BISECT) == 0,
        "bisect report v1");
  CHECK(accepts("{\"schema\": \"resumecheck-compare\", \"version\": 1}", RC_SCHEMA_COMPARE) == 0,
        "the compare report's old name is still read");
  /* negative controls */
  CHECK(accepts("{\"schema\": \"resumecheck-compare\", \"version\": 2}", RC_SCHEMA_COMPARE) ==
            RC_EXIT_DATAERR,
        "the old name only had version 1");
  CHECK(accepts("{\"schema\": \"resumecheck-compare\", \"schema_version\": 1}",
                RC_SCHEMA_COMPARE) == RC_EXIT_DATAERR,
        "the old name with the new key is no report that was ever written");
  CHECK(accepts("{\"schema\": \"resumecheck.compare-report\", \"version\": 2}",
                RC_SCHEMA_COMPARE) == RC_EXIT_DATAERR,
        "the new name needs schema_version");
  CHECK(accepts("{\"schema\": \"resumecheck.compare-report\", \"schema_version\": 3}",
                RC_SCHEMA_COMPARE) == RC_EXIT_DATAERR,
        "a newer schema_version is refused");
  CHECK(accepts("{\"schema\": \"resumecheck-compare\", \"version\": 1}", RC_SCHEMA_RUN) ==
            RC_EXIT_DATAERR,
        "a compare report is not a run report");
  CHECK(accepts("{\"schema\": \"resumecheck.run-report\", \"schema_version\": 0}", RC_SCHEMA_RUN) ==
            RC_EXIT_DATAERR,
        "schema_version 0");
  CHECK(accepts("[1]", RC_SCHEMA_RUN) == RC_EXIT_DATAERR, "not an object");
}

/* The text report for a terminal: ESC in a forwarded flag, a check's
 * summary, a leg's reason and its log reaches it as \x1b. Control: the
 * same strings reach report.json as they are (\u001b). */
static void test_text_escape(void) {
  rc_run r;
  plan(&r, false, false);
  char *fwd[] = {"--tag", "a\x1b[31mred"};
  r.opts.fwd = fwd;
  r.opts.n_fwd = 2;
  rc_check *res = check_named(&r, "RESUME@5→10");
  res->status = RC_CHECK_DIFFERS;
  snprintf(res->summary, sizeof res->summary,
           "s \x1b]0;title\x07 \xc2\x9b"
           "2J");
  r.legs[2].state = RC_LEG_FAILED;
  snprintf(r.legs[2].reason, sizeof r.legs[2].reason, "died \x1b[2J");
  snprintf(r.legs[2].log_tail, sizeof r.legs[2].log_tail, "one\n\x1b[1mtwo\nthree\r");
  rc_run_verdict(&r);
  char path[512];
  snprintf(path, sizeof path, "%s/report.txt", tmpdir);
  FILE *f = fopen(path, "w");
  if (!f) {
    CHECK(0, "cannot write %s", path);
    rc_run_free(&r);
    return;
  }
  rc_report_text(&r, f);
  fclose(f);
  size_t n = 0;
  char *t = slurp(path, &n);
  CHECK(t && !memchr(t, 0x1b, n) && !memchr(t, 0x07, n) && !memchr(t, '\r', n) &&
            !strstr(t, "\xc2\x9b"),
        "no raw control character in the text report");
  CHECK(t && strstr(t, "--tag a\\x1b[31mred"), "the flag's ESC as \\x1b");
  CHECK(t && strstr(t, "s \\x1b]0;title\\x07 \\u009b2J"), "the summary's controls escaped");
  CHECK(t && strstr(t, "died \\x1b[2J") && strstr(t, "    | \\x1b[1mtwo\n") &&
            strstr(t, "    | three\\x0d\n"),
        "the leg's reason and log escaped, line by line");
  free(t);
  /* control: with the escaping switched off the same report holds ESC */
  setenv("RC_TEST_TEXT_RAW", "1", 1);
  f = fopen(path, "w");
  if (f) {
    rc_report_text(&r, f);
    fclose(f);
  }
  unsetenv("RC_TEST_TEXT_RAW");
  t = slurp(path, &n);
  CHECK(t && memchr(t, 0x1b, n) && strstr(t, "--tag a\x1b[31mred"),
        "control: unescaped, the flag's ESC reaches the report");
  free(t);
  rc_run_free(&r);
}

/* writes DIR/census/iter_0000005.rank0.txt */
static void write_census(const char *leg_dir, const char *text) {
  char dir[600], path[700];
  rc_err err = {0};
  snprintf(dir, sizeof dir, "%s/census", leg_dir);
  rc_mkdir_p(dir, &err);
  snprintf(path, sizeof path, "%s/iter_0000005.rank0.txt", dir);
  CHECK(rc_write_file_atomic(path, text, strlen(text), &err) == 0, "%s", err.msg);
}

/* A census missing from a built-in leg that finished: error 66 naming the
 * file. Controls: an exec trainer's missing census is skipped; the built-in
 * trainer's pair present compares identical. */
static void test_missing_census(void) {
  char out[400];
  rc_err err = {0};
  snprintf(out, sizeof out, "%s/missing", tmpdir);
  CHECK(rc_mkdir_p(out, &err) == 0, "%s", err.msg);
  for (int exec = 0; exec < 2; exec++) {
    rc_run r;
    plan_in(&r, false, false, false, out);
    r.opts.trainer = exec ? RC_TRAINER_EXEC : RC_TRAINER_SELF;
    write_census(r.legs[0].dir, "iteration\tsaved\t5\n"); /* through wrote one, resume@5 none */
    rc_run_checks(&r, &err);
    rc_check *c = check_named(&r, "CENSUS resume@5");
    char want[700];
    snprintf(want, sizeof want, "%s/census/iter_0000005.rank0.txt: missing", r.legs[2].dir);
    if (!exec) {
      CHECK(c->status == RC_CHECK_ERROR && c->err.code == 66 && strstr(c->err.msg, want),
            "built-in: a missing census is an error naming it: %d %s", c->status, c->err.msg);
      CHECK(r.exit_code == 66 && !strcmp(r.verdict, "error"), "built-in: exit %d (%s)", r.exit_code,
            r.verdict);
    } else {
      CHECK(c->status == RC_CHECK_SKIPPED && strstr(c->summary, "no census from resume@5"),
            "exec: skipped: %s", c->summary);
      CHECK(r.exit_code == 0, "exec: exit %d", r.exit_code);
    }
    /* the pair present: identical, exit 0 */
    write_census(r.legs[2].dir, "iteration\tsaved\t5\n");
    rc_run_free(&r);
    plan_in(&r, false, false, false, out);
    r.opts.trainer = exec ? RC_TRAINER_EXEC : RC_TRAINER_SELF;
    rc_run_checks(&r, &err);
    c = check_named(&r, "CENSUS resume@5");
    CHECK(c->status == RC_CHECK_IDENTICAL && r.exit_code == 0, "control (exec %d): %s", exec,
          c->summary);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/census' '%s/census'", r.legs[0].dir, r.legs[2].dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    rc_run_free(&r);
  }
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/rc_test_run_report.XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_exit_codes();
  test_not_a_prefix();
  test_mechanism();
  test_files();
  test_markdown();
  test_schema();
  test_text_escape();
  test_missing_census();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (!failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  if (failures) {
    fprintf(stderr, "%d check(s) failed (files kept in %s)\n", failures, tmpdir);
    return 1;
  }
  printf("run_report: ok\n");
  return 0;
}
