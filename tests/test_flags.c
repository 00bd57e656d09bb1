/* test_flags.c — the flag facility's table features (base/flags.h): an
 * alias parses as its flag, counts as it for duplicates (the refusal names
 * both spellings), and is found by the "did you mean" lookup; --flag=value
 * and --flag value store the same; a repeatable flag takes every use; a
 * row's `conflicts` is a list, each refused beside it in either order;
 * rc_flags_apply stores as the command line would (range included). Each
 * check has its control: the same call with what it asserts taken away. */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "base/flags.h"
#include "check.h"

typedef struct {
  int hidden;
  int n_tags;
  bool bf16, fp16, prec;
} opts;

static int add_tag(void *t, const char *flag, const char *v, rc_err *err) {
  (void)flag, (void)v, (void)err;
  ((opts *)t)->n_tags++;
  return 0;
}

static const rc_flag_spec FLAGS[] = {
    {.name = "--hidden",
     .aliases = "--hidden-size --hs",
     .kind = RC_FLAG_INT,
     .offset = offsetof(opts, hidden),
     .min = 1,
     .max = 1 << 16},
    {.name = "--tag", .kind = RC_FLAG_STRING, .set = add_tag, .tags = RC_FLAG_REPEATABLE},
    {.name = "--bf16",
     .kind = RC_FLAG_BOOL,
     .offset = offsetof(opts, bf16),
     .conflicts = "--precision --fp16"},
    {.name = "--fp16", .kind = RC_FLAG_BOOL, .offset = offsetof(opts, fp16)},
    {.name = "--precision", .kind = RC_FLAG_BOOL, .offset = offsetof(opts, prec)},
};

static int parse(opts *o, int argc, char **argv, rc_err *err) {
  rc_flag_group g = {NULL, FLAGS, (int)(sizeof FLAGS / sizeof FLAGS[0]), o};
  rc_flag_cmd cmd = {.groups = &g, .n_groups = 1};
  memset(o, 0, sizeof *o);
  return rc_flags_parse(&cmd, argc, argv, NULL, err);
}

int main(void) {
  opts o;
  rc_err err = {0};
  char *alias[] = {"x", "--hidden-size=96"};
  CHECK(parse(&o, 2, alias, &err) == 0 && o.hidden == 96, "alias: rc %d %s", err.code, err.msg);
  char *plain[] = {"x", "--hidden", "96"};
  CHECK(parse(&o, 3, plain, &err) == 0 && o.hidden == 96, "--hidden 96: %s", err.msg);
  char *both[] = {"x", "--hidden", "96", "--hs", "8"};
  CHECK(parse(&o, 5, both, &err) == RC_EXIT_USAGE && strstr(err.msg, "--hidden given twice") &&
            strstr(err.msg, "(--hs is --hidden)"),
        "an alias and its flag: %s", err.msg);
  char *twice[] = {"x", "--hidden", "96", "--hidden", "8"};
  CHECK(parse(&o, 5, twice, &err) == RC_EXIT_USAGE && !strstr(err.msg, " is --hidden)"),
        "control: one spelling twice names no alias: %s", err.msg);
  /* conflicts: each of the list, either order; each alone is taken */
  char *c1[] = {"x", "--bf16", "--fp16"}, *c2[] = {"x", "--precision", "--bf16"};
  CHECK(parse(&o, 3, c1, &err) == RC_EXIT_USAGE && strstr(err.msg, "contradict"), "%s", err.msg);
  CHECK(parse(&o, 3, c2, &err) == RC_EXIT_USAGE && strstr(err.msg, "contradict"), "%s", err.msg);
  char *c3[] = {"x", "--fp16", "--precision"}, *c4[] = {"x", "--bf16"};
  CHECK(parse(&o, 3, c3, &err) == 0 && o.fp16 && o.prec, "control: no conflict: %s", err.msg);
  CHECK(parse(&o, 2, c4, &err) == 0 && o.bf16, "control: --bf16 alone: %s", err.msg);
  /* rc_flags_apply: the row's range, under the name given */
  memset(&o, 0, sizeof o);
  CHECK(rc_flags_apply(&FLAGS[0], &o, "\"hidden\"", "64", &err) == 0 && o.hidden == 64, "apply: %s",
        err.msg);
  CHECK(rc_flags_apply(&FLAGS[0], &o, "\"hidden\"", "0", &err) == RC_EXIT_USAGE &&
            strstr(err.msg, "\"hidden\": 0 is out of range") && o.hidden == 64,
        "apply out of range: %s", err.msg);
  char *tags[] = {"x", "--tag", "a", "--tag=b", "--tag", "c"};
  CHECK(parse(&o, 6, tags, &err) == 0 && o.n_tags == 3, "repeatable: %d", o.n_tags);
  char *typo[] = {"x", "--hiden-size", "8"};
  CHECK(parse(&o, 3, typo, &err) == RC_EXIT_USAGE && strstr(err.msg, "did you mean --hidden-size"),
        "typo of an alias: %s", err.msg);
  /* controls: a name far from every spelling gets no suggestion; a value
   * out of range is refused through the alias too */
  char *far[] = {"x", "--frobnicate"};
  CHECK(parse(&o, 2, far, &err) == RC_EXIT_USAGE && !strstr(err.msg, "did you mean"),
        "far name: %s", err.msg);
  char *range[] = {"x", "--hs=0"};
  CHECK(parse(&o, 2, range, &err) == RC_EXIT_USAGE && strstr(err.msg, "out of range"),
        "range via alias: %s", err.msg);
  char *help[] = {"x", "--hs", "8", "--help"};
  CHECK(parse(&o, 4, help, &err) == RC_FLAGS_HELP && o.hidden == 0, "--help applies nothing");
  return failures ? 1 : 0;
}
