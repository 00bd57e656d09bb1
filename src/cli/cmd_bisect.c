/* cmd_bisect.c — `resumecheck bisect RUN_DIR`: the first operation whose
 * result differs between the train-through and the resumed process of a
 * diverged run (harness/bisect.h, docs/bisect.md). The exit code is the
 * verdict, and with --git-bisect it speaks `git bisect run`. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"
#include "harness/bisect.h"

static void usage(FILE *out) {
  fprintf(out,
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
          "answer. See docs/bisect.md.\n"
          "\n"
          "  --json FILE   write the result as JSON (schema resumecheck.bisect-report v1)\n"
          "  --out DIR     where the replays go (default RUN_DIR/bisect)\n"
          "  --context N   events listed before the first difference (default 3)\n"
          "  --git-bisect  exit codes for `git bisect run`: 0 good, 1 bad, 125 untestable\n"
          "\n"
          "Exit codes: 0 the run has no divergence; 1 resume divergence (the first differing\n"
          "event or state tensor is named when the replay shows one, or a replay did not train\n"
          "as its leg did); 2 the run's A/A check\n"
          "failed (inconclusive); 64 usage; 65 unreadable report or event log; 66 no report;\n"
          "70 a replay failed; 74 I/O error; 125 the run itself was untestable (a leg failed).\n"
          "With --git-bisect every code other than 0 and 1 becomes 125.\n");
}

int rc_cmd_bisect(int argc, char **argv) {
  rc_bisect_opts opts = {0};
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return RC_OK;
    }
    bool again = (!strcmp(a, "--git-bisect") && opts.git_bisect) ||
                 (!strcmp(a, "--json") && json) || (!strcmp(a, "--out") && opts.out_dir) ||
                 (!strcmp(a, "--context") && opts.context);
    if (again) {
      fprintf(stderr, "resumecheck bisect: %s given twice\n", a);
      return RC_EXIT_USAGE;
    }
    if (!strcmp(a, "--git-bisect")) {
      opts.git_bisect = true;
    } else if (!strcmp(a, "--json") || !strcmp(a, "--out") || !strcmp(a, "--context")) {
      if (!v) {
        fprintf(stderr, "resumecheck bisect: %s needs a value\n", a);
        return RC_EXIT_USAGE;
      }
      i++;
      if (!strcmp(a, "--json")) {
        json = v;
      } else if (!strcmp(a, "--out")) {
        opts.out_dir = v;
      } else {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || end == v || *end || n < 1 || n > 1000) {
          fprintf(stderr, "resumecheck bisect: --context: '%s' is not in 1..1000\n", v);
          return RC_EXIT_USAGE;
        }
        opts.context = (int)n;
      }
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "resumecheck bisect: unknown flag '%s' (see --help)\n", a);
      return RC_EXIT_USAGE;
    } else if (opts.run_dir) {
      fprintf(stderr, "resumecheck bisect: one RUN_DIR only ('%s' and '%s')\n", opts.run_dir, a);
      return RC_EXIT_USAGE;
    } else {
      opts.run_dir = a;
    }
  }
  if (!opts.run_dir) {
    usage(stderr);
    return RC_EXIT_USAGE;
  }
  opts.self_exe = "/proc/self/exe";
  rc_bisect b;
  int rc = rc_bisect_run(&b, &opts);
  if (rc) fprintf(stderr, "resumecheck bisect: %s\n", b.err.msg);
  rc_bisect_print(&b, stdout);
  int code = b.exit_code;
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
