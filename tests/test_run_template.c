/* test_run_template.c — the --train-cmd template of exec trainers: words
 * are split once with shell-like quoting, placeholders are substituted
 * inside words afterwards (so values never meet a shell), empty optional
 * placeholders drop their word, and every malformed template is a usage
 * error. Each accepting case has a rejecting twin and vice versa. */
#include <stdio.h>
#include <string.h>

#include "harness/exec_template.h"

#include "check.h"

/* Parses text and compares the words with want (NULL-terminated). */
static void split_is(const char *text, const char *const *want) {
  rc_template t;
  rc_err err = {0};
  int rc = rc_template_parse(text, &t, &err);
  CHECK(rc == 0, "parse [%s]: %s", text, err.msg);
  if (rc) return;
  int n = 0;
  while (want[n]) n++;
  CHECK(t.n == n, "parse [%s]: %d words, want %d", text, t.n, n);
  for (int i = 0; i < n && i < t.n; i++)
    CHECK(!strcmp(t.words[i], want[i]), "parse [%s]: word %d is [%s], want [%s]", text, i,
          t.words[i], want[i]);
  rc_template_free(&t);
}

static void rejects(const char *text, const char *why) {
  rc_template t;
  rc_err err = {0};
  int rc = rc_template_parse(text, &t, &err);
  CHECK(rc == RC_EXIT_USAGE, "parse [%s] should fail (%s), got %d", text, why, rc);
  CHECK(rc == 0 || strstr(err.msg, "--train-cmd"), "message names --train-cmd: %s", err.msg);
  if (rc == 0) rc_template_free(&t);
}

static void test_split(void) {
  split_is("a b  c", (const char *const[]){"a", "b", "c", NULL});
  split_is("  lead\ttabs\nnewline  ", (const char *const[]){"lead", "tabs", "newline", NULL});
  split_is("'a b' \"c \\\"d\\\" \\$x\" e\\ f",
           (const char *const[]){"a b", "c \"d\" $x", "e f", NULL});
  split_is("x '' y \"\"", (const char *const[]){"x", "", "y", "", NULL});
  split_is("pre'mid dle'post", (const char *const[]){"premid dlepost", NULL});
  /* single quotes keep backslashes literally; double quotes keep unknown escapes */
  split_is("'a\\b' \"c\\d\"", (const char *const[]){"a\\b", "c\\d", NULL});
  /* shell operators are fine when quoted: they are plain characters then */
  split_is("'|' \";\" '$(x)' \\&", (const char *const[]){"|", ";", "$(x)", "&", NULL});
  /* placeholders stay in place until expansion, quoted or not */
  split_is("--out '{out}' {{lit}}", (const char *const[]){"--out", "{out}", "{{lit}}", NULL});
}

static void test_rejects(void) {
  rejects("", "empty");
  rejects("   ", "only blanks");
  rejects("a 'b", "unterminated single quote");
  rejects("a \"b", "unterminated double quote");
  rejects("a b\\", "trailing backslash");
  rejects("train | tee log", "unquoted pipe");
  rejects("train ; rm x", "unquoted semicolon");
  rejects("train > log", "unquoted redirection");
  rejects("train $HOME", "unquoted dollar: no expansion happens");
  rejects("train `id`", "unquoted backtick");
  rejects("train (x)", "unquoted parenthesis");
  rejects("train --out {outdir}", "unknown placeholder");
  rejects("train --out {out", "unterminated placeholder");
  rejects("train --out out}", "stray closing brace");
}

static void test_expand(void) {
  rc_template t;
  rc_err err = {0};
  const char *text = "bash trainer.sh --steps {steps} --out {out} --resume-from={resume_from} "
                     "--leg {leg} {{literal}} --fusion={fusion}";
  CHECK(rc_template_parse(text, &t, &err) == 0, "%s", err.msg);
  CHECK(rc_template_uses(&t, "out"), "uses {out}");
  CHECK(rc_template_uses(&t, "resume_from"), "uses {resume_from}");
  CHECK(!rc_template_uses(&t, "stop_at"), "does not use {stop_at}");
  CHECK(!rc_template_uses(&t, "save_at"), "does not use {save_at}");

  const char *nasty = "/tmp/a b/it's \"q\" $(touch pwned) `id`";
  rc_template_var vars[] = {{"steps", "10"}, {"out", nasty},   {"resume_from", ""},
                            {"leg", "save"}, {"fusion", NULL}, {"stop_at", "5"},
                            {"save_at", "5"}};
  char **argv = NULL;
  int argc = 0;
  CHECK(rc_template_expand(&t, vars, 7, &argv, &argc, &err) == 0, "%s", err.msg);
  const char *want[] = {"bash", "trainer.sh", "--steps", "10",        "--out",
                        nasty,  "--leg",      "save",    "{literal}", NULL};
  int n = 0;
  while (want[n]) n++;
  CHECK(argc == n, "expanded to %d words, want %d (empty placeholders drop their word)", argc, n);
  for (int i = 0; i < n && i < argc; i++)
    CHECK(!strcmp(argv[i], want[i]), "word %d is [%s], want [%s]", i, argv[i], want[i]);
  CHECK(argv && argv[argc] == NULL, "argv is NULL-terminated");
  rc_argv_free(argv);

  /* the twin: with a resume directory and a fusion value the words stay */
  vars[2].value = "/ckpt dir/iter_0000005";
  vars[4].value = "off";
  CHECK(rc_template_expand(&t, vars, 7, &argv, &argc, &err) == 0, "%s", err.msg);
  CHECK(argc == n + 2, "with values: %d words, want %d", argc, n + 2);
  bool saw_resume = false, saw_fusion = false;
  for (int i = 0; i < argc; i++) {
    saw_resume |= !strcmp(argv[i], "--resume-from=/ckpt dir/iter_0000005");
    saw_fusion |= !strcmp(argv[i], "--fusion=off");
  }
  CHECK(saw_resume, "--resume-from= word kept with its value");
  CHECK(saw_fusion, "--fusion= word kept with its value");
  rc_argv_free(argv);
  rc_template_free(&t);

  /* a template whose every word is an empty placeholder has nothing to run */
  CHECK(rc_template_parse("{resume_from}", &t, &err) == 0, "%s", err.msg);
  rc_template_var none[] = {{"resume_from", ""}};
  CHECK(rc_template_expand(&t, none, 1, &argv, &argc, &err) == RC_EXIT_USAGE,
        "nothing left to execute is a usage error");
  rc_template_var some[] = {{"resume_from", "x"}};
  CHECK(rc_template_expand(&t, some, 1, &argv, &argc, &err) == 0 && argc == 1 &&
            !strcmp(argv[0], "x"),
        "its twin with a value expands");
  if (argc == 1) rc_argv_free(argv);
  rc_template_free(&t);
}

int main(void) {
  test_split();
  test_rejects();
  test_expand();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("run_template: ok\n");
  return 0;
}
