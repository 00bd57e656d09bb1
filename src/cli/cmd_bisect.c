/* cmd_bisect.c — `resumecheck bisect RUN_DIR`: the first operation whose
 * result differs between the train-through and the resumed process of a
 * diverged run (harness/bisect.h, docs/bisect.md). The exit code is the
 * verdict, and with --git-bisect it speaks `git bisect run`. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/flags.h"
#include "cli/cli.h"
#include "harness/bisect.h"

static const char USAGE[] =
    "usage: resumecheck bisect RUN_DIR [--json FILE] [--out DIR] [--context N]\n"
    "                          [--git-bisect]\n"
    "\n"
    "Reads RUN_DIR/report.json (written by `resumecheck run`), then replays the first\n"
    "divergent step S of the resume check in two fresh `train` processes of this binary\n"
    "with the event log on (docs/events.md): one trained from step 0 with the through\n"
    "leg's flags, one resumed from the checkpoint the resumed leg loaded, each with its\n"
    "leg's own saves up to S (into the replay directory). It aligns the two logs and names\n"
    "the first event whose values (fingerprints, counters) differ, with both sides' flags\n"
    "and betas and the events before it. When that value is an input of step S, the cause\n"
    "named is the update of step S-1 that made it differ, or at S = K+1 the state the\n"
    "resumed process started from (a save-time side effect when the through leg replayed\n"
    "without its saves agrees with the resumed one). Events whose flag value or beta\n"
    "differ but whose values agree are listed as \"harmless here\". When the loaded\n"
    "checkpoint already differs from through@K, the first differing state tensor is the\n"
    "answer. An exec trainer's legs (`run --trainer exec`) are replayed from the run's\n"
    "--train-cmd template with RC_EVENTS=FILE RC_EVENTS_FROM_STEP=S set: a PyTorch trainer\n"
    "that calls resumecheck.events.install(model, optimizer) logs the same events, and\n"
    "the answer names a module call (docs/bisect.md, \"PyTorch trainers\"). A copied or\n"
    "moved run directory is read where it is. See docs/bisect.md.\n"
    "\n"
    "\n";

static const char EPILOGUE[] =
    "\n"
    "Exit codes: 0 the run has no divergence; 1 resume divergence (the first differing\n"
    "event or state tensor is named when the replay shows one, or a replay did not train\n"
    "as its leg did); 2 the run's A/A check\n"
    "failed (inconclusive); 64 usage, or another bisect is replaying into the same\n"
    "directory (it names its pid); 65 unreadable report or event log; 66 no report, or\n"
    "a checkpoint it names is not there;\n"
    "70 a replay failed; 74 I/O error; 125 the run itself was untestable (a leg failed).\n"
    "With --git-bisect every code other than 0 and 1 becomes 125.\n";

#define B(flag, kind_, field, lo, hi, mv, help_)                                                   \
  {                                                                                                \
    .name = flag, .kind = kind_, .offset = offsetof(rc_bisect_opts, field), .min = lo, .max = hi,  \
    .metavar = mv, .help = help_                                                                   \
  }

static const rc_flag_spec BISECT_FLAGS[] = {
    B("--out", RC_FLAG_STRING, out_dir, 0, 0, "DIR",
      "where the replays go (default RUN_DIR/bisect)"),
    B("--context", RC_FLAG_INT, context, 1, 1000, "N",
      "events listed before the first difference (default 3)"),
    B("--git-bisect", RC_FLAG_BOOL, git_bisect, 0, 0, NULL,
      "exit codes for `git bisect run`: 0 good, 1 bad, 125 untestable"),
};
#undef B

/* --json is the command's own (the result's writer), not the bisect's */
static const rc_flag_spec JSON_FLAG[] = {
    {.name = "--json",
     .kind = RC_FLAG_STRING,
     .metavar = "FILE",
     .help = "write the result as JSON (schema resumecheck.bisect-report v1)"},
};

int rc_cmd_bisect(int argc, char **argv) {
  rc_bisect_opts opts = {0};
  const char *json = NULL;
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  if (!pos) return RC_EXIT_SOFTWARE;
  rc_flag_group groups[] = {{NULL, JSON_FLAG, 1, &json}, {NULL, BISECT_FLAGS, 3, &opts}};
  rc_flag_cmd cmd = {
      .usage = USAGE, .epilogue = EPILOGUE, .groups = groups, .n_groups = 2, .positionals = true};
  rc_flag_args args = {.positional = pos};
  int code;
  bool done = rc_cli_parse("bisect", &cmd, argc, argv, &args, &code);
  if (!done && args.n_positional > 1)
    done = true,
    code = rc_cli_usage_error("bisect", false, "one RUN_DIR only ('%s' and '%s')", pos[0], pos[1]);
  if (!done && !args.n_positional)
    done = true, code = RC_EXIT_USAGE, rc_flags_print_help(&cmd, stderr);
  opts.run_dir = pos[0];
  free(pos);
  if (done) return code;
  opts.self_exe = "/proc/self/exe";
  rc_bisect b;
  int rc = rc_bisect_run(&b, &opts);
  if (rc) fprintf(stderr, "resumecheck bisect: %s\n", b.err.msg);
  rc_bisect_print(&b, stdout);
  code = b.exit_code;
  if (json) {
    rc_err err = {0};
    if (rc_bisect_write_json(&b, json, &err)) {
      fprintf(stderr, "resumecheck bisect: %s\n", err.msg);
      if (code == RC_OK || code == RC_EXIT_DIVERGED)
        code = opts.git_bisect ? RC_EXIT_UNTESTABLE : err.code;
    }
  }
  rc_bisect_free(&b);
  return code;
}
