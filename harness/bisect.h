/* bisect.h — `resumecheck bisect RUN_DIR`: the first operation whose result
 * differs between the train-through and the resumed process (docs/design.md §9).
 *
 * Three parts, so that each can be tested alone:
 *  - event logs (bisect_events.c): parse the `train --events` format
 *    (docs/events.md) and align two logs event by event. The answer is the
 *    first event whose *values* (fingerprints, counters, hex floats) differ;
 *    events whose values agree but whose flag or beta differ are collected
 *    as "harmless here".
 *  - the replay (bisect.c): read a run's report.json, check the checkpoint
 *    the resumed leg loaded against through@K, re-run the first divergent
 *    step in two fresh `train` processes with the event log on, align.
 *  - reports (bisect_report.c): the text summary and bisect.json.
 *  - exec replays (bisect_exec.c): an exec trainer's legs re-run from the
 *    --train-cmd template the run recorded, with the Python package's event
 *    log switched on by environment (python/resumecheck/events.py).
 *
 * Ownership: an rc_event_list owns its events and their strings; an
 * rc_bisect owns everything in it and is released with rc_bisect_free. */
#ifndef RC_HARNESS_BISECT_H
#define RC_HARNESS_BISECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "base/error.h"
#include "harness/census.h"
#include "harness/exec_template.h"

#define RC_EVENT_MAX_FIELDS 16

/* One line of the event log. `name` is the module (linear events) or the
 * parameter (adam events), "" otherwise; `call` is -1 where absent. Fields
 * are every key=value pair after kind/module/param/call, in line order. */
typedef struct {
  int64_t step;
  int mb;
  char kind[16];
  char name[256];
  int call;
  int n_fields;
  char key[RC_EVENT_MAX_FIELDS][24];
  char val[RC_EVENT_MAX_FIELDS][40];
  int line; /* 1-based line number in its file */
} rc_event;

typedef struct {
  rc_event *ev;
  int n, cap;
} rc_event_list;

/* Parses a whole log (text of length n). RC_EXIT_DATAERR names the line of
 * a malformed event. */
int rc_events_parse(const char *text, size_t n, rc_event_list *out, rc_err *err);
int rc_events_read(const char *path, rc_event_list *out, rc_err *err);
void rc_events_free(rc_event_list *l);

/* Fields that describe how an operation was asked to run (the flag value
 * passed, the GEMM's beta), not what it produced. */
bool rc_event_field_is_context(const char *key);
const char *rc_event_get(const rc_event *e, const char *key); /* NULL if absent */
/* "step 6, microbatch 0, backward, mtp/layers/0/... call 0" */
void rc_event_describe(const rc_event *e, char *buf, size_t cap);
/* The line again, key=value pairs (for context listings). */
void rc_event_format(const rc_event *e, char *buf, size_t cap);

/* The value fields of a and b (same identity) that differ, comma-separated. */
void rc_event_diff_values(const rc_event *a, const rc_event *b, char *vals, size_t cap);
/* The first event of `kind` in `step`, NULL if none. */
const rc_event *rc_events_find(const rc_event_list *l, int64_t step, const char *kind);
/* Copies the events of steps step_lo..step_hi into out, without those of
 * drop_kind (NULL: none dropped). */
int rc_events_filter(const rc_event_list *l, int64_t step_lo, int64_t step_hi,
                     const char *drop_kind, rc_event_list *out, rc_err *err);
/* When event i's differing `fields` are values the step was handed rather
 * than computed (state that existed before the step began: the step_state
 * event, the data position of a batch, the first dropout's seed/offset, the
 * loss scaler's scale and trackers going into the step, the optimizer's lr
 * and step counts, the output of the step's first forward while its batch
 * agrees), a short reading of what that input is; NULL when the event
 * computed the value. Blaming such an event would blame the messenger. */
const char *rc_event_input_reading(const rc_event_list *l, int i, const char *fields);
/* Events that update state a later step starts from: optimizer, loss_scaler,
 * adam, expert_bias, scaler_update, and a Python trainer's update. */
bool rc_event_is_update(const rc_event *e);

typedef enum {
  RC_ALIGN_IDENTICAL = 0, /* same events, same values (context may differ) */
  RC_ALIGN_VALUES,        /* event `index` has differing values */
  RC_ALIGN_STRUCTURE,     /* event `index` is a different operation, or one log ended */
} rc_align_kind;

typedef struct {
  int a, b;         /* indices into the two lists */
  char fields[256]; /* context fields that differ, comma-separated ("passed,beta") */
} rc_harmless;

typedef struct {
  rc_align_kind kind;
  int index;                /* first differing event (both lists), -1 if identical */
  char fields[512];         /* value fields that differ there, comma-separated */
  char context_fields[256]; /* context fields that differ there too */
  rc_harmless *harmless;    /* context-only differences, in order, over the whole logs */
  int n_harmless, cap_harmless;
  int n_compared; /* events aligned */
} rc_alignment;

/* Aligns a (train-through) and b (resumed) by position: both processes run
 * the same code, so event i is the same operation on both sides unless the
 * identity (step, mb, kind, name, call) differs, which is a structural
 * difference. Harmless differences are collected across both logs' common
 * prefix (those after the answer too: the seed's decoder modules pass TRUE
 * after the MTP layer's overwrite and are still harmless). */
int rc_events_align(const rc_event_list *a, const rc_event_list *b, rc_alignment *out, rc_err *err);
void rc_alignment_free(rc_alignment *al);

/* ---- the whole command ---- */
typedef struct {
  const char *run_dir;
  const char *out_dir;  /* replay directory; NULL = RUN_DIR/bisect */
  const char *self_exe; /* the binary that replays ("/proc/self/exe") */
  bool git_bisect;
  int context; /* events listed before the first difference (default 3) */
} rc_bisect_opts;

typedef enum {
  RC_BISECT_NO_DIVERGENCE = 0, /* the run is identical: nothing to bisect */
  RC_BISECT_LOCATED,           /* a first differing event or state tensor was named */
  RC_BISECT_NOT_REPRODUCED,    /* the run diverged, the replay's events all agree */
  RC_BISECT_NOT_REPLAYABLE,    /* diverged, but not a resume divergence of our own trainer */
  RC_BISECT_REPLAY_MISMATCH,   /* a replay's trace is not the run's trace of its leg */
  RC_BISECT_INCONCLUSIVE,      /* the run's A/A check failed */
  RC_BISECT_UNTESTABLE,        /* a leg failed, or the run reported an error */
  RC_BISECT_ERROR              /* bisect itself failed (err) */
} rc_bisect_verdict;

/* What the answer blames (docs/bisect.md "What is blamed"). */
typedef enum {
  RC_CAUSE_NONE = 0,
  RC_CAUSE_OPERATION,         /* the first differing event of S computed the value */
  RC_CAUSE_LOADED_STATE,      /* the loaded checkpoint differs from through@K */
  RC_CAUSE_PREVIOUS_UPDATE,   /* S's inputs differ; an update of step S-1 made them differ */
  RC_CAUSE_RESUME_STATE,      /* S == K+1 and S's inputs differ: the state at the resume point */
  RC_CAUSE_SAVE_SIDE_EFFECT,  /* ... and the through process's own save changed it */
  RC_CAUSE_REPLAY_CHECKPOINT, /* no event differs, the replays' checkpoints do */
} rc_bisect_cause;

#define RC_BISECT_MAX_SAVES 256
/* The environment switch of python/resumecheck/events.py: the event log's
 * path, and the first step it logs (the built-in trainer's --events and
 * --events-from-step). */
#define RC_EVENTS_ENV "RC_EVENTS"
#define RC_EVENTS_FROM_STEP_ENV "RC_EVENTS_FROM_STEP"

/* One replayed process. */
typedef struct {
  char dir[4096], events[4096], log[4096], cmd[8192];
  int saves[RC_BISECT_MAX_SAVES]; /* the leg's own saves the replay kept */
  int n_saves;
  bool ran;
} rc_replay_proc;

typedef struct {
  rc_bisect_opts opts;
  char out_dir[4096];
  int lock_fd; /* the flock on out_dir/.lock while bisect writes there, -1 none */
  /* where the run wrote its files (the report's config.out) and what that
   * means for a copied or moved run directory: paths under it are read
   * under RUN_DIR instead (relocated), others as they are (paths_note) */
  char run_out[4096];
  bool same_dir, relocated;
  char paths_note[2048];
  /* an exec trainer's run (`run --trainer exec`): its template, horizon and
   * the legs' arms and labels, for {fusion} and {leg} */
  bool exec;
  rc_template tmpl;
  int64_t horizon;
  char through_arm[16], resume_arm[16];
  char through_name[64], resume_name[64]; /* {leg} is the name, RC_LEG the label */
  bool events_missing; /* an exec replay wrote no event log (no events.install) */
  /* from the report */
  char run_verdict[64], run_verdict_text[1024];
  int run_exit;
  char check[128]; /* the check that showed the first divergence */
  char through_leg[96], resume_leg[96];
  int64_t step;                      /* the first divergent step S, -1 unknown */
  int64_t resume_step;               /* K */
  char resume_from[4096];            /* the checkpoint the resumed leg loaded */
  char through_ckpt[4096];           /* through@K */
  char trace_columns[1024];          /* the trace columns differing at S */
  char run_dataset[1024];            /* the report's first differing dataset (a state check) */
  char check_a[4096], check_b[4096]; /* the paths the run's first divergent check compared */
  char through_dir[4096], resume_dir[4096]; /* the legs' --out directories */
  char ckpt_producer[96]; /* the leg that wrote resume_from ("save"), "" unknown */
  int through_saves[RC_BISECT_MAX_SAVES], n_through_saves; /* the legs' --save-at */
  int resume_saves[RC_BISECT_MAX_SAVES], n_resume_saves;
  /* state at K */
  bool ckpt_compared, ckpt_identical;
  int ckpt_datasets;      /* datasets compared */
  char ckpt_first[1024];  /* first differing state tensor (described) */
  char loaded_text[1024]; /* what was compared with what, and what it does not show */
  /* the census the legs wrote at K (harness/census.h): found, compared
   * field by field, and what it says in one line */
  bool census_found, census_compared;
  char census_through[4096], census_resumed[4096];
  rc_census_diff census;
  char census_text[1536];
  /* the replay */
  bool replayed;
  int64_t events_from, events_to;
  rc_replay_proc rp_through, rp_resume, rp_probe;   /* probe: through without its saves <= K */
  rc_event_list log_through, log_resume, log_probe; /* whole logs */
  int n_compared_all;                               /* operation events aligned over the range */
  /* the replays against the run's own traces of their legs */
  bool traces_checked, traces_match;
  char trace_mismatch[1024];
  /* the focus step F (S, or without one the first step where the logs differ) */
  int64_t focus;
  rc_event_list ev_through, ev_resume; /* F's operation events (no step_state) */
  rc_alignment align;
  bool have_state;           /* both logs have F's step_state */
  char state_fields[512];    /* its differing fields */
  const char *input_reading; /* the first differing event is an input of F (NULL: computed) */
  /* step F-1, when logged */
  bool have_prev;
  rc_event_list prev_through, prev_resume;
  int prev_update;             /* first differing update event of F-1, -1 none */
  char prev_fields[512];       /* its differing fields */
  bool prev_structure;         /* F-1's operations differ in structure before any update */
  char prev_state_fields[512]; /* F-1's step_state differences */
  /* the probe (the through leg replayed without its saves at or before K) */
  bool probed, probe_agrees;
  char probe_fields[512]; /* what still differs between the probe and the resumed replay */
  /* the replays' checkpoints at the range's end (no step in the report) */
  bool replay_ckpt_compared, replay_ckpt_identical;
  char replay_ckpt_first[1024], replay_ckpt_through[4096], replay_ckpt_resume[4096];
  rc_bisect_cause cause;
  /* verdict */
  rc_bisect_verdict verdict;
  char verdict_text[2048];
  char note[2048]; /* extra explanation (e.g. the overwrite, or sign of zeros) */
  rc_err err;      /* RC_BISECT_ERROR */
  int exit_code;
} rc_bisect;

/* Runs the whole bisect. Returns RC_OK when a verdict was reached (the
 * verdict's exit code is in b->exit_code), or an error code (b->err) when
 * bisect could not run; b->exit_code then holds the code to exit with
 * (125 under --git-bisect). */
int rc_bisect_run(rc_bisect *b, const rc_bisect_opts *opts);
void rc_bisect_free(rc_bisect *b);
const char *rc_bisect_verdict_name(rc_bisect_verdict v);

/* Starts an exec trainer's replay (bisect_exec.c): b->tmpl expanded with
 * the leg's own values ({steps} the horizon, {stop_at} the stop, {save_at}
 * save_list, {resume_from}, {out} rp->dir, {leg} name, {fusion} from arm),
 * the same values as RC_* variables (RC_LEG the label, as `run` sets it), and RC_EVENTS /
 * RC_EVENTS_FROM_STEP naming rp->events and b->events_from; PATH searched, stdin /dev/null, output
 * into rp->log. rp->cmd is the command as a person can paste it. */
int rc_bisect_exec_start(const rc_bisect *b, rc_replay_proc *rp, const char *name,
                         const char *label, const char *arm, const char *save_list,
                         const char *resume_from, pid_t *pid, rc_err *err);

/* Makes dir ready for an exec replay (bisect_exec.c): created, or emptied
 * when an earlier replay left it (its marker file says so; another trainer
 * may append to what it finds, where the built-in one rewrites), and refused
 * (74) when it holds files no replay left. */
int rc_bisect_exec_prepare_dir(const char *dir, rc_err *err);

/* Reports (bisect_report.c). */
void rc_bisect_print(const rc_bisect *b, FILE *out);
int rc_bisect_write_json(const rc_bisect *b, const char *path, rc_err *err);

#endif
