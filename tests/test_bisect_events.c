/* test_bisect_events.c — parsing and aligning event logs (harness/bisect.h)
 * on synthetic logs, so that each rule is tested alone:
 *  - identical logs align with no difference (negative control for all below);
 *  - a flag/beta-only difference is harmless, never the answer;
 *  - the first value difference is the answer, with its context fields named,
 *    even when harmless differences come before and after it;
 *  - a signed-zero difference shows in a fingerprint and is a value difference;
 *  - a different operation, or a shorter log, is a structural difference;
 *  - malformed and truncated lines are data errors (65) naming the line;
 *  - inputs of a step (the batch, the first dropout's offset, the scaler's
 *    scale, the optimizer's lr, the first forward) are told from values an
 *    operation computed (a backward, a later dropout, the scaler's
 *    grad_norm, a later forward), and updates from the rest;
 *  - filtering a log by step and kind keeps exactly those events. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "harness/bisect.h"

static int failures = 0;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#define FWD(mod, passed, fp)                                                                       \
  "step=6 mb=0 kind=forward module=" mod " call=0 passed=" passed " beta=-1 fp_out=" fp "\n"
#define BWD(mod, call, passed, beta, fpo, fpg)                                                     \
  "step=6 mb=0 kind=backward module=" mod " call=" call " passed=" passed " beta=" beta            \
  " fp_out=" fpo " fp_main_grad=" fpg "\n"
#define BATCH "step=6 mb=0 kind=batch samples=20 fp_ids=f13d33af645fbcca\n"
#define OPT                                                                                        \
  "step=6 mb=-1 kind=optimizer lr=0x1.8p-9 clip=0x1p+0 bc1=0x1.dfcdee34fc61p-2 bc2=0x1p-2 "        \
  "optimizer_step=6\n"

/* Parses two logs and aligns them; returns the alignment (caller frees). */
static rc_alignment align(const char *a, const char *b, rc_event_list *la, rc_event_list *lb) {
  rc_err err = {0};
  rc_alignment al;
  memset(&al, 0, sizeof al);
  CHECK(rc_events_parse(a, strlen(a), la, &err) == RC_OK);
  CHECK(rc_events_parse(b, strlen(b), lb, &err) == RC_OK);
  CHECK(rc_events_align(la, lb, &al, &err) == RC_OK);
  return al;
}

static void done(rc_alignment *al, rc_event_list *la, rc_event_list *lb) {
  rc_alignment_free(al);
  rc_events_free(la);
  rc_events_free(lb);
}

static void test_parse(void) {
  const char *log = BATCH FWD("decoder/layers/0/mlp/linear_fc1", "TRUE", "0000000000000001") OPT;
  rc_event_list l;
  rc_err err = {0};
  CHECK(rc_events_parse(log, strlen(log), &l, &err) == RC_OK);
  CHECK(l.n == 3);
  if (l.n == 3) {
    CHECK(l.ev[0].step == 6 && l.ev[0].mb == 0 && !strcmp(l.ev[0].kind, "batch"));
    CHECK(!strcmp(rc_event_get(&l.ev[0], "samples"), "20"));
    CHECK(!strcmp(l.ev[1].name, "decoder/layers/0/mlp/linear_fc1") && l.ev[1].call == 0);
    CHECK(!strcmp(rc_event_get(&l.ev[1], "passed"), "TRUE"));
    CHECK(l.ev[2].mb == -1 && l.ev[2].call == -1 && !l.ev[2].name[0]);
    CHECK(!strcmp(rc_event_get(&l.ev[2], "bc1"), "0x1.dfcdee34fc61p-2"));
    CHECK(rc_event_get(&l.ev[2], "nonexistent") == NULL);
    char d[256];
    rc_event_describe(&l.ev[1], d, sizeof d);
    CHECK(!strcmp(d, "step 6, microbatch 0, forward decoder/layers/0/mlp/linear_fc1 call 0"));
    rc_event_describe(&l.ev[2], d, sizeof d);
    CHECK(!strcmp(d, "step 6, optimizer"));
  }
  rc_events_free(&l);

  /* malformed: no key=value, missing kind, truncated last line */
  const char *bad[] = {"step=6 mb=0 kind=batch samples\n", "step=6 mb=0 samples=1\n",
                       "step=x mb=0 kind=batch\n", BATCH "step=6 mb=0 kind=for"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    memset(&err, 0, sizeof err);
    CHECK(rc_events_parse(bad[i], strlen(bad[i]), &l, &err) == RC_EXIT_DATAERR);
    CHECK(strstr(err.msg, "line ") != NULL);
    CHECK(l.n == 0 && l.ev == NULL);
  }
  /* the negative control of the above: an empty log is fine */
  CHECK(rc_events_parse("", 0, &l, &err) == RC_OK && l.n == 0);
  rc_events_free(&l);
}

static void test_identical(void) {
  const char *log = BATCH FWD("m", "FALSE", "00000000000000aa") OPT;
  rc_event_list la, lb;
  rc_alignment al = align(log, log, &la, &lb);
  CHECK(al.kind == RC_ALIGN_IDENTICAL && al.index == -1 && al.n_harmless == 0);
  CHECK(al.n_compared == 3);
  done(&al, &la, &lb);
}

static void test_harmless_only(void) {
  /* the decoder in the seed: TRUE/beta=0 into a zeroed buffer, same values */
  const char *a = BATCH FWD("decoder/l0", "FALSE", "00000000000000aa")
      BWD("decoder/l0", "0", "FALSE", "1", "00000000000000bb", "00000000000000cc") OPT;
  const char *b = BATCH FWD("decoder/l0", "TRUE", "00000000000000aa")
      BWD("decoder/l0", "0", "TRUE", "0", "00000000000000bb", "00000000000000cc") OPT;
  rc_event_list la, lb;
  rc_alignment al = align(a, b, &la, &lb);
  CHECK(al.kind == RC_ALIGN_IDENTICAL && al.index == -1);
  CHECK(al.n_harmless == 2);
  if (al.n_harmless == 2) {
    CHECK(al.harmless[0].a == 1 && !strcmp(al.harmless[0].fields, "passed"));
    CHECK(al.harmless[1].a == 2 && !strcmp(al.harmless[1].fields, "passed,beta"));
  }
  done(&al, &la, &lb);
}

static void test_first_value_difference(void) {
  /* harmless before (forward), the overwrite (values differ), harmless after */
  const char *a = BATCH FWD("mtp/l0/fc1", "FALSE", "00000000000000aa")
      BWD("mtp/l0/fc1", "1", "FALSE", "1", "0000000000000001", "0000000000000002")
          BWD("mtp/l0/fc1", "0", "FALSE", "1", "0000000000000003", "0000000000000004")
              BWD("decoder/l0", "0", "FALSE", "1", "0000000000000005", "0000000000000006") OPT;
  const char *b = BATCH FWD("mtp/l0/fc1", "TRUE", "00000000000000aa")
      BWD("mtp/l0/fc1", "1", "FALSE", "1", "0000000000000001", "0000000000000002")
          BWD("mtp/l0/fc1", "0", "TRUE", "0", "0000000000000003", "00000000000000ff")
              BWD("decoder/l0", "0", "TRUE", "0", "0000000000000005", "0000000000000006") OPT;
  rc_event_list la, lb;
  rc_alignment al = align(a, b, &la, &lb);
  CHECK(al.kind == RC_ALIGN_VALUES && al.index == 3);
  CHECK(!strcmp(al.fields, "fp_main_grad"));
  CHECK(!strcmp(al.context_fields, "passed,beta"));
  CHECK(al.n_harmless == 2); /* the forward before, the decoder backward after */
  if (al.n_harmless == 2) CHECK(al.harmless[0].a == 1 && al.harmless[1].a == 4);
  done(&al, &la, &lb);

  /* a later value difference does not move the answer */
  const char *c = BATCH OPT;
  const char *d = "step=6 mb=0 kind=batch samples=0 fp_ids=0000000000000001\n"
                  "step=6 mb=-1 kind=optimizer lr=0x1p-9 clip=0x1p+0 bc1=0x1p-1 bc2=0x1p-2 "
                  "optimizer_step=1\n";
  al = align(c, d, &la, &lb);
  CHECK(al.kind == RC_ALIGN_VALUES && al.index == 0 && !strcmp(al.fields, "samples,fp_ids"));
  done(&al, &la, &lb);
}

static void test_signed_zero_is_a_value(void) {
  /* fingerprints hash every bit: +0.0 and -0.0 give different words, which
   * the alignment sees as a value difference (docs/bisect.md says why) */
  const char *a = BWD("m", "0", "FALSE", "1", "0000000000000001", "1111111111111111");
  const char *b = BWD("m", "0", "TRUE", "0", "0000000000000001", "2222222222222222");
  rc_event_list la, lb;
  rc_alignment al = align(a, b, &la, &lb);
  CHECK(al.kind == RC_ALIGN_VALUES && al.index == 0 && al.n_harmless == 0);
  done(&al, &la, &lb);
}

static void test_structure(void) {
  const char *a = BATCH FWD("m1", "FALSE", "00000000000000aa") OPT;
  const char *b = BATCH FWD("m2", "FALSE", "00000000000000aa") OPT;
  rc_event_list la, lb;
  rc_alignment al = align(a, b, &la, &lb);
  CHECK(al.kind == RC_ALIGN_STRUCTURE && al.index == 1);
  done(&al, &la, &lb);

  /* one side logs fewer events */
  al = align(a, BATCH, &la, &lb);
  CHECK(al.kind == RC_ALIGN_STRUCTURE && al.index == 1);
  done(&al, &la, &lb);

  /* an earlier value difference wins over a later structural one */
  const char *c = "step=6 mb=0 kind=batch samples=0 fp_ids=f13d33af645fbcca\n" FWD(
      "m2", "FALSE", "00000000000000aa");
  al = align(a, c, &la, &lb);
  CHECK(al.kind == RC_ALIGN_VALUES && al.index == 0);
  done(&al, &la, &lb);
}

#define DROP(off) "step=6 mb=0 kind=dropout seed=0000000000000001 offset=" off " n=4096\n"
#define SCALER                                                                                     \
  "step=6 mb=-1 kind=loss_scaler scale=0x1p+16 overflow=0 growth_tracker=5 "                       \
  "hysteresis_tracker=2 grad_norm=0x1p+0\n"
#define STATE(step) "step=" step " mb=-1 kind=step_state loss_scale=0x1p+0 rng_offset=0\n"

static void test_inputs(void) {
  const char *log = STATE("6") BATCH FWD("m1", "NONE", "0000000000000001") DROP("0")
      FWD("m2", "NONE", "0000000000000002") DROP("1024")
          BWD("m2", "0", "NONE", "1", "0000000000000003", "0000000000000004") OPT SCALER STATE("7");
  rc_event_list l;
  rc_err err = {0};
  CHECK(rc_events_parse(log, strlen(log), &l, &err) == RC_OK);
  CHECK(l.n == 10);
  if (l.n != 10) return;
  CHECK(rc_event_input_reading(&l, 0, "rng_offset") != NULL); /* step_state */
  CHECK(rc_event_input_reading(&l, 1, "samples,fp_ids") != NULL);
  CHECK(rc_event_input_reading(&l, 2, "fp_out") != NULL);              /* the first forward */
  CHECK(rc_event_input_reading(&l, 3, "offset") != NULL);              /* the first dropout */
  CHECK(rc_event_input_reading(&l, 4, "fp_out") == NULL);              /* a later forward */
  CHECK(rc_event_input_reading(&l, 5, "offset") == NULL);              /* a later dropout */
  CHECK(rc_event_input_reading(&l, 6, "fp_out,fp_main_grad") == NULL); /* backward */
  CHECK(rc_event_input_reading(&l, 7, "lr") != NULL);
  CHECK(rc_event_input_reading(&l, 7, "clip") == NULL); /* from the grad norm */
  CHECK(rc_event_input_reading(&l, 8, "growth_tracker") != NULL);
  CHECK(rc_event_input_reading(&l, 8, "grad_norm") == NULL);
  CHECK(!rc_event_is_update(&l.ev[6]) && rc_event_is_update(&l.ev[7]) &&
        rc_event_is_update(&l.ev[8]));
  /* filter: step 6 without step_state, then step 7 only */
  rc_event_list f;
  CHECK(rc_events_filter(&l, 6, 6, "step_state", &f, &err) == RC_OK);
  CHECK(f.n == 8 && !strcmp(f.ev[0].kind, "batch"));
  rc_events_free(&f);
  CHECK(rc_events_filter(&l, 7, 7, NULL, &f, &err) == RC_OK);
  CHECK(f.n == 1 && f.ev[0].step == 7);
  rc_events_free(&f);
  const rc_event *st = rc_events_find(&l, 7, "step_state");
  CHECK(st && st == &l.ev[9] && !rc_events_find(&l, 8, "step_state"));
  rc_events_free(&l);
}

int main(void) {
  test_parse();
  test_identical();
  test_harmless_only();
  test_first_value_difference();
  test_signed_zero_is_a_value();
  test_structure();
  test_inputs();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
