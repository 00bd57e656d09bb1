/* run.h — `resumecheck run`: the legs, their processes, the checks and the
 * verdict (docs/design.md §6, §10).
 *
 * A run is planned first (rc_run_plan: which legs, with which arguments,
 * depending on which checkpoint; which checks compare what), then executed
 * (rc_run_legs: every leg a separate process with its own directory and log,
 * independent legs concurrently), then judged (rc_run_checks: byte-exact
 * state comparisons and trace comparisons, the verdict and the exit code).
 * Reports (report.h) only read the finished rc_run.
 *
 * Ownership: rc_run owns its legs, checks and every string in them; the
 * options it was planned from are copied, except `fwd` and `argv`, which are
 * borrowed and must outlive the run. */
#ifndef RC_HARNESS_RUN_H
#define RC_HARNESS_RUN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "base/error.h"
#include "base/steplock.h"
#include "harness/calibrate.h"
#include "harness/census.h"
#include "harness/compare.h"
#include "harness/exec_template.h"

#define RC_RUN_PATH_CAP 4096
#define RC_RUN_INTERRUPTED 130 /* exit code after SIGINT/SIGTERM: 128 + SIGINT */
/* A leg's log.txt keeps at most the first HEAD and the last TAIL bytes of
 * its output, with a marker line between (run_spawn.c). Constants, not
 * flags: enough for a trainer's start-up and its end (where a failure is),
 * and a bound on the disk a run's legs take whatever they print. */
#define RC_LEG_LOG_HEAD (1 << 20)
#define RC_LEG_LOG_TAIL (1 << 20)

typedef enum { RC_TRAINER_SELF = 0, RC_TRAINER_EXEC } rc_trainer_kind;
typedef enum {
  RC_PROGRESS_AUTO = 0,
  RC_PROGRESS_LIVE,
  RC_PROGRESS_PLAIN,
  RC_PROGRESS_OFF
} rc_progress_mode;
/* --gpu-scheduling: whether legs sharing one GPU take turns (docs/robustness.md).
 * DEFAULT is critical-first when the legs run on CUDA with --jobs > 1 and the
 * built-in trainer, shared otherwise. */
typedef enum {
  RC_GPU_SCHED_DEFAULT = 0,
  RC_GPU_SCHED_CRITICAL_FIRST,
  RC_GPU_SCHED_SHARED
} rc_gpu_scheduling;

/* --through-checkpoints: what the through leg keeps of its saves at K < N,
 * whose one use is A/A@K (and RESUME checks at a chain's inner K): the
 * shards (FULL), or their hashes only (HASHES: `train --save-hashes-at`,
 * half the disk writes of a run; docs/checkpoint-format.md). AUTO is
 * ON_DEMAND when the legs run on CUDA (HASHES with --confirm-arm), FULL
 * otherwise. HASHES_ALL keeps
 * hashes at N too: the through leg writes no shard at all, and RESUME@N
 * names the differing datasets without their values (a gate's mode). */
typedef enum {
  RC_THROUGH_CKPT_AUTO = 0,
  RC_THROUGH_CKPT_FULL,
  RC_THROUGH_CKPT_HASHES,
  RC_THROUGH_CKPT_HASHES_ALL,
  /* ON_DEMAND: hashes at K < N; at N the through leg stages and hashes its
   * state and `run` tells it to write the shard only when a check at N
   * differs (`train --save-deferred-at N`), so RESUME@N names values when
   * it must and costs a hashes-only save when it need not. AUTO on CUDA. */
  RC_THROUGH_CKPT_ON_DEMAND
} rc_through_ckpt;

/* --noise: how RESUME is judged. BYTES (the default): every check byte for
 * byte, any A/A difference makes the run inconclusive. CALIBRATED: exact
 * checks stay exact, trajectories and float state are judged against the
 * run-to-run noise the fresh legs measure (harness/calibrate.h). */
typedef enum { RC_NOISE_BYTES = 0, RC_NOISE_CALIBRATED } rc_noise_mode;

typedef struct {
  int64_t steps;    /* N, the LR horizon of every leg */
  int64_t *save_at; /* sorted, unique, each in 1..N-1 (owned by the caller) */
  int n_save_at;
  bool save_every; /* --save-at every: save_at is 1..N-1 */
  /* --save-at auto: save_at was chosen by rc_run_auto_choose; its points are
   * independent like every's (one save leg, one resume leg per K to N), and
   * save_at_why says why each was chosen */
  bool save_auto;
  char save_at_why[512];
  const char *out_dir;
  bool aa, confirm_arm, git_bisect, keep_going, overwrite;
  int aa_count;        /* --aa [M]: fresh legs beside through (aa, aa2, ...); aa is aa_count > 0 */
  rc_noise_mode noise; /* --noise */
  /* --resumes P (--noise calibrated): resumed legs per K, each from its own
   * fresh leg's checkpoint at K (resume@K from through, resume@K.aa from
   * aa, ...); an excess is a bug only when every one of them shows it
   * (calibrate.h). 0: the default, which rc_run_plan makes 2 */
  int resumes;
  /* --confirm-resumes C (--noise calibrated): when every resume leg at a K
   * exceeds the noise and no exact check failed, C more resume legs at
   * that K (from the same fresh legs in turn) run before the verdict, and
   * "exceeds" needs every one of them too. 0: none */
  int confirm_resumes;
  /* not --no-handoff: a leg whose checkpoint a pre-warmed leg waits for
   * hands it over before it is durable (`train --handoff`, io/handoff.c) */
  bool handoff;
  int jobs;                   /* concurrent legs, >= 1 */
  double leg_timeout_s;       /* --leg-timeout: a leg running longer is stopped, 0 = no bound */
  rc_ckpt_format ckpt_format; /* --checkpoint-format: what every leg's checkpoint must hold */
  rc_trainer_kind trainer;
  const char *self_exe;     /* what train legs execute ("/proc/self/exe") */
  const char *self_display; /* its resolved path, for reports and repro lines */
  const char *train_cmd;    /* exec trainers: the template text */
  char **fwd;               /* core flags forwarded verbatim to every train leg */
  int n_fwd;
  char **argv; /* the run's own command line, for the report */
  int argc;
  rc_progress_mode progress;
  FILE *progress_out; /* stderr */
  rc_gpu_scheduling gpu_scheduling;
  rc_through_ckpt through_checkpoints;
} rc_run_opts;

typedef enum {
  RC_LEG_PENDING = 0,
  RC_LEG_RUNNING,
  RC_LEG_OK,
  RC_LEG_FAILED, /* non-zero exit, signal, or missing checkpoint */
  RC_LEG_KILLED, /* terminated by the harness (another leg failed, or interrupt) */
  RC_LEG_SKIPPED /* never started: its input does not exist */
} rc_leg_state;

/* A leg's start-up and save times, read from its timing.csv when it ended
 * (docs/trace.md); -1 where the leg did not measure a phase. Legs of exec
 * trainers write their own timing.csv, if any: have stays false. */
typedef struct {
  bool have;
  double exec_s, backend_s, model_init_s, wait_s, load_s;
  double first_step_s;          /* the leg's first training step */
  double start_to_first_step_s; /* spawn to the end of that step */
  int n_steps, n_saves;
  double steps_s, saves_s; /* sums over the step and save rows */
  double step_lock_wait_s; /* --step-lock: seconds blocked on the lock, -1 without */
  double start_gate_s;     /* --start-gate: seconds waited at the gate, -1 without */
  /* loaded a checkpoint handed over before it was durable (io/handoff.c):
   * the seconds it then blocked for COMPLETE and the confirmation; -1 when
   * it loaded a complete checkpoint (or none) */
  double handoff_confirm_wait_s;
} rc_leg_timing;

typedef struct {
  char name[64];  /* "through", "save", "resume@5", "aa" */
  char arm[16];   /* "" or "fusion-on" / "fusion-off" */
  char label[96]; /* "through" or "fusion-on/through": unique in the run */
  char dir[RC_RUN_PATH_CAP];
  char log_path[RC_RUN_PATH_CAP];
  int64_t resume_step;               /* K loaded, 0 for a fresh leg */
  int64_t last_step;                 /* the leg trains resume_step+1 .. last_step */
  int depends_on;                    /* index of the leg whose checkpoint it loads, -1 if none */
  char resume_from[RC_RUN_PATH_CAP]; /* "" if none */
  int64_t *saves;                    /* steps it saves at, ascending (owned) */
  int n_saves;
  char **argv; /* owned, NULL-terminated */
  int argc;
  /* outcome */
  rc_leg_state state;
  pid_t pid;       /* its supervisor (waited for) */
  pid_t pgid;      /* the trainer's process group (signalled), valid while > 1 */
  bool timed_out;  /* stopped by --leg-timeout: state is RC_LEG_FAILED */
  double t_bound;  /* when its --leg-timeout clock started (a pre-warmed leg's: at its release) */
  int exit_code;   /* valid when it exited */
  int term_signal; /* > 0 when a signal ended it */
  double t_start, wall_s;
  int64_t steps_done; /* trace rows seen (progress) */
  double beat_t;      /* when its last heartbeat line was printed, 0 before (progress) */
  int64_t beat_step;  /* steps_done at that line */
  /* pre-warmed resume legs (`train --wait-for-checkpoint`): started while
   * their producer still runs; `run` holds the write end of a pipe whose
   * read end is the leg's fd 3 and closes it when the producer ends */
  bool prewarmed;
  /* a confirming resume leg (--noise calibrated, --confirm-resumes): added
   * after the checks, because every resume leg at its K exceeded the noise */
  bool confirming;
  bool waiting; /* its checkpoint was not complete at the last look (progress) */
  int wait_wfd; /* the write end, valid while > 0 */
  /* critical-first GPU scheduling: the leg got --step-lock with this
   * priority (high for save and resume legs, low for through and aa) */
  bool step_locked;
  rc_step_priority step_priority;
  bool gated; /* it got --start-gate run->start_gate */
  /* --through-checkpoints on-demand: the through leg's save at N waits for
   * run's word on a pipe (its fd 3, RC_DECIDE_FD): deferred_step N (0: no
   * such save), decide_wfd the write end (valid while > 0), decision 'H'
   * (hashes only: every check at N byte-identical), 'F' (the shard) or 'X'
   * (its note vanished: the leg fails), 0 until sent, and why */
  int64_t deferred_step;
  int decide_wfd;
  bool deferred_seen; /* its note was read once: missing later means removed */
  char decision;
  char decision_why[512];
  rc_leg_timing timing;
  char reason[1024];   /* why it failed, was killed or skipped */
  char log_tail[4096]; /* last lines of its log when it failed */
} rc_leg;

/* STATE: two checkpoints byte for byte; TRACE: two trace.csv files; CENSUS:
 * the state census the through leg wrote after step K against the one the
 * resumed leg wrote after loading K (harness/census.h). */
typedef enum { RC_CHECK_STATE = 0, RC_CHECK_TRACE, RC_CHECK_CENSUS } rc_check_what;
/* What a failing check means for the verdict. */
typedef enum {
  RC_CLASS_AA = 0, /* two fresh processes differ: non-determinism, or (through vs save)
                      a save leg that is not a prefix of the through leg */
  RC_CLASS_RESUME, /* resumed state differs from train-through */
  RC_CLASS_ARMS    /* fused vs unfused accumulation differ (--confirm-arm) */
} rc_check_class;
typedef enum {
  RC_CHECK_PENDING = 0,
  RC_CHECK_IDENTICAL,
  RC_CHECK_DIFFERS,
  RC_CHECK_SKIPPED, /* an input leg did not finish, or neither leg wrote a trace */
  RC_CHECK_ERROR,   /* the comparison itself failed (unreadable file) */
  /* --noise calibrated (harness/calibrate.h): a calibrated check's bytes
   * differ and its values are within the noise, exceed it, or the noise is
   * too large to decide; a noise check's (an A/A pair) differ only where
   * noise may change them, which measures it */
  RC_CHECK_WITHIN_NOISE,
  RC_CHECK_EXCEEDS_NOISE,
  RC_CHECK_UNDECIDABLE,
  RC_CHECK_NOISE_MEASURED
} rc_check_status;

/* How the verdict reads a check (--noise calibrated keeps the kinds apart
 * in every report). */
typedef enum {
  RC_JUDGED_BYTES = 0,  /* byte for byte: --noise bytes */
  RC_JUDGED_EXACT,      /* must agree whatever the noise: the census, exact trace columns,
                           the final state's structure and non-float values */
  RC_JUDGED_CALIBRATED, /* against the A/A envelope: noisy trace columns, float tensors */
  RC_JUDGED_NOISE       /* an A/A pair of fresh legs: measures the noise; its exact part
                           must agree (else A/A failed) */
} rc_check_judged;

typedef struct {
  char name[128]; /* "A/A@5", "RESUME@5→10", "TRACE resume@5", "ARMS@10" (arm-prefixed) */
  char arm[16];
  rc_check_what what;
  rc_check_class cls;
  int leg_a, leg_b;
  int64_t step;                 /* state checks: the iteration compared */
  int64_t trace_from, trace_to; /* trace checks: the steps both legs trained */
  char path_a[RC_RUN_PATH_CAP], path_b[RC_RUN_PATH_CAP];
  const char *ignore[4]; /* compare ignore globs (static strings) */
  int n_ignore;
  /* outcome */
  rc_check_status status;
  char summary[1024]; /* one line in the seed's words */
  rc_err err;         /* RC_CHECK_ERROR */
  bool have_cmp;
  rc_compare_result cmp;
  int shards, shards_identical; /* *.h5 files */
  int files, files_identical;   /* every compared file, informational ones excluded */
  bool args_differ;             /* args.json differs by construction */
  /* the headline: the failing difference ranked first by evidence (the
   * census's saved fields, then the kind of state; rc_run_rank_differences),
   * described; first_in_path: the first in path order; first_why: the rule
   * that put the headline first */
  char first_dataset[1024];
  char first_in_path[1024];
  char first_why[256];
  char largest_dataset[1024]; /* the dataset that differs most (weights first), described */
  bool first_is_dataset;      /* first_dataset names an HDF5 object, not a whole file */
  int first_index;            /* the headline's index in cmp.diffs (first_dataset set) */
  bool have_trace;
  rc_trace_diff trace;
  /* census checks: path_a/path_b are the two legs' census directories;
   * ranks compared (rank r's fields prefixed "rank r: " when > 1) */
  bool have_census;
  rc_census_diff census;
  int census_ranks;
  /* the first-step census (census.first_step when compared): when only
   * one leg wrote one, that leg's label (not compared, not an error) */
  char census_first_only[96];
  bool during_legs; /* a state check run while legs still ran (rc_run_early_checks_poll) */
  /* --noise calibrated: how it is judged; a RESUME state check's exact
   * part (judged EXACT, it runs the comparison) hands its float-value
   * differences to its calibrated twin (twin: that check's index, -1 none;
   * is_twin on the twin, which compares nothing itself) */
  rc_check_judged judged;
  int twin;
  bool is_twin;
  bool have_calib;
  rc_calib calib;
} rc_check;

typedef enum {
  RC_MECH_NONE = 0,      /* no --confirm-arm */
  RC_MECH_CONFIRMED,     /* diverges with fusion on, identical with fusion off */
  RC_MECH_NOT_CONFIRMED, /* diverges in both arms */
  RC_MECH_NOTHING,       /* no resume divergence with fusion on */
  RC_MECH_INCONCLUSIVE   /* an A/A failure or a failed leg in an arm */
} rc_mechanism;

typedef struct {
  rc_run_opts opts; /* copied; save_at points at run->save_at */
  int64_t *save_at;
  int n_save_at;
  rc_template tmpl; /* exec trainers */
  rc_leg *legs;
  int n_legs;
  rc_check *checks;
  int n_checks;
  char *config_json;   /* `train --dry-run` output (canonical config), NULL for exec */
  char legs_device[8]; /* where `train --dry-run-memory` says the legs run: "cpu", "cuda", "" */
  /* --through-checkpoints as it applies: the through legs' saves at K < N
   * keep hashes only (decided by rc_run_plan, for AUTO once legs_device is
   * known: rc_run_resolve_through_checkpoints) */
  bool through_hashes;
  bool through_hashes_all; /* HASHES_ALL: and at N (through_hashes is set too) */
  bool through_on_demand;  /* ON_DEMAND: at N decided late (through_hashes is set too) */
  /* --gpu-scheduling as it applied (decided when the legs start): the lock
   * file every leg was given, "" when the legs shared the GPU unscheduled */
  char step_lock[RC_RUN_PATH_CAP];
  /* with it, the start gate: run holds an exclusive flock on this file
   * (fd start_gate_fd, -1 once let go) from before the first spawn until
   * every critical leg that starts the run (save legs) has finished its
   * first step or ended; the legs off the critical path (through, aa) and
   * pre-warmed resume legs wait at it before setting up their backend
   * (`train --start-gate`), so the critical legs set up alone.
   * start_gate_open_s: when it was let go (seconds since the legs began),
   * -1 if never held */
  char start_gate[RC_RUN_PATH_CAP];
  int start_gate_fd;
  double start_gate_open_s;
  double wall_s;
  /* where the run's wall time went: from the start to the first leg's
   * spawn (planning, the dry-run and memory checks), the legs (first spawn
   * to last exit), the checks after them; t0 is the run's start */
  double t0, prepare_s, legs_s, checks_s;
  /* the state check running on its own thread while the legs run (-1 when
   * none): early_done is set by that thread as it ends */
  int early_check;
  /* checks [0, checks_run) have run (rc_run_checks): confirming legs add
   * checks after them, which a second rc_run_checks runs alone */
  int checks_run;
  pthread_t early_tid;
  _Atomic bool early_done;
  bool interrupted;
  /* verdict */
  int exit_code;
  char verdict[64];        /* "identical", "resume-diverged", "aa-failed", "not-a-prefix", ... */
  char verdict_text[1024]; /* one line */
  char verdict_hint[512];  /* what to do next, one line; "" when there is nothing to add */
  int first_div_check;     /* the check that names the first divergence, -1 if none */
  int64_t first_div_step;  /* -1 if unknown */
  char first_div_dataset[1024]; /* the state check's headline difference (first_dataset) */
  char first_div_in_path[1024]; /* ... and its first in path order */
  char first_div_why[256];
  char first_div_largest[1024];
  bool first_div_is_dataset;
  rc_mechanism mechanism;
  char mechanism_text[512];
  /* what the census of the diverging resumed leg shows at its resume
   * point, one line ("" when there is no census or nothing to say) */
  char census_finding[1024];
  /* RESUME diverged while every census compared (after the load and
   * before the first step) saw no saved field differ: what the census of
   * the diverging leg covered, and what it cannot see (docs/census.md);
   * census_silent_check is that census check; census_silent "" when this
   * does not apply */
  int census_silent_check;
  char census_silent[1024];
} rc_run;

typedef enum { RC_SAVE_AT_LIST = 0, RC_SAVE_AT_EVERY, RC_SAVE_AT_AUTO } rc_save_at_mode;

/* Parses "5", "3,6", "every" or "auto" against the horizon N. RC_EXIT_USAGE
 * with a message for malformed lists, steps outside 1..N-1, or duplicates.
 * *out is malloc'd (caller frees); for "auto" it is NULL and *n 0: the
 * points are chosen by rc_run_auto_choose. */
int rc_run_parse_save_at(const char *s, int64_t steps, int64_t **out, int *n, rc_save_at_mode *mode,
                         rc_err *err);

/* --save-at auto (docs/design.md §6): why a save point was chosen, a bit
 * each (one K may have several reasons). */
typedef enum {
  RC_AUTO_ODD = 1u << 0,          /* the odd one of a pair of adjacent steps at N/2 */
  RC_AUTO_EVEN = 1u << 1,         /* the even one */
  RC_AUTO_AFTER_WARMUP = 1u << 2, /* warmup + 1: the first step of the decay */
  RC_AUTO_LAST = 1u << 3,         /* N-1 */
  RC_AUTO_SKIPPED = 1u << 4,      /* an fp16 step that was skipped (the save right after it) */
  RC_AUTO_ABSORBED = 1u << 5,     /* ... whose overflow the hysteresis absorbed */
  RC_AUTO_EPOCH_END = 1u << 6, /* the last step of a data epoch: the resumed leg starts the next */
  RC_AUTO_GROWTH_WINDOW = 1u << 7 /* N-W: the resumed leg holds a full loss-scale growth window */
} rc_auto_reason;

#define RC_AUTO_MAX 7

typedef struct {
  int64_t step;
  unsigned why; /* rc_auto_reason bits */
} rc_auto_point;

/* The save points of --save-at auto for N steps, ascending, at most
 * RC_AUTO_MAX: an odd and an even K (N/2 and its neighbour), warmup + 1 when
 * warmup >= 1 and it is below N, N-1, and of the steps `skipped` (ascending,
 * from a probe; absorbed[i]: the loss scale was not halved after
 * skipped[i]) the first absorbed one below N, else the first one below N.
 * A step chosen twice keeps one entry with both reasons. Pure. */
int rc_run_auto_save_points(int64_t steps, int64_t warmup, const int64_t *skipped,
                            const bool *absorbed, int n_skipped, rc_auto_point *out);
/* The points that need more of the config than the warmup, added to the n
 * points p holds (ascending, unique), where the run has them: the last
 * step of the first data epoch that ends before N (epoch_steps >= 1: steps
 * per data epoch, --epoch-samples over the global batch; 0: no epochs), so
 * the resumed leg starts an epoch; and N - W for fp16 with a loss-scale
 * growth interval W < N (growth_window; 0: not fp16), so the resumed leg
 * holds a full growth window. Returns the new count. Pure. */
int rc_run_auto_add_config_points(rc_auto_point *p, int n, int64_t steps, int64_t epoch_steps,
                                  int64_t growth_window);
/* "3 (first after warmup), 5 (odd), ..." into buf. */
void rc_run_auto_describe(const rc_auto_point *p, int n, char *buf, size_t cap);
/* Chooses the points for opts (steps, trainer, fwd, self_exe): with the
 * built-in trainer it reads warmup and precision from `train --dry-run`, and
 * for fp16 trains a probe (steps 1..N-1, no checkpoints, in a temporary
 * directory it removes) whose trace shows where steps are skipped; an exec
 * trainer gets the odd, even and N-1 points only. *save_at is malloc'd. */
int rc_run_auto_choose(const rc_run_opts *opts, int64_t **save_at, int *n, char *why, size_t cap,
                       rc_err *err);

/* Whether the legs take turns on the GPU: --gpu-scheduling, or by default
 * CUDA legs (legs_device) with --jobs > 1 and the built-in trainer. */
bool rc_run_critical_first(const rc_run *run);
/* A leg's priority under critical-first: through and aa are off the
 * critical path (low), save and the resume legs are on it (high). */
rc_step_priority rc_leg_step_priority(const rc_leg *leg);
/* "critical-first" or "shared", as it applied (run->step_lock). */
const char *rc_run_gpu_scheduling_name(const rc_run *run);

/* Builds the legs and checks; no file system access, no processes. */
int rc_run_plan(rc_run *run, const rc_run_opts *opts, rc_err *err);
/* --through-checkpoints auto, once legs_device is known (rc_run_prepare
 * calls it): on CUDA hashes at K and on-demand at N (the shard at N with
 * --confirm-arm), and the through legs' argv rebuilt. */
int rc_run_resolve_through_checkpoints(rc_run *run, rc_err *err);
/* --through-checkpoints on-demand, from the legs' loop: sends each through
 * leg waiting at N its word once it can be given (run_deferred.c);
 * running: the legs running now. */
void rc_run_deferred_poll(rc_run *run, int running);
/* "full", "hashes", "hashes-all" or "on-demand", as it applies. */
const char *rc_run_through_checkpoints_name(const rc_run *run);
void rc_run_free(rc_run *run);

/* Validates the flags with `train --dry-run` (keeps the canonical config) or
 * checks the exec trainer's program, then prepares DIR (refusing to clobber
 * earlier leg directories unless opts.overwrite). */
int rc_run_prepare(rc_run *run, rc_err *err);

/* Runs every leg as its own process (at most opts.jobs at once), each with
 * DIR/<leg>/log.txt as stdout+stderr. Leg failures are recorded in the legs,
 * not returned; the return value is for harness errors only. */
int rc_run_legs(rc_run *run, rc_err *err);
/* RC_EXIT_DATAERR when checkpoint directories a and b are the same
 * directory, or share a file (same device and inode: a hard or symbolic
 * link), naming it: a leg whose checkpoint is another's fails
 * (run_legs.c), and a state check on such a pair is an error, never
 * identical. RC_OK otherwise (and when either is missing). */
int rc_run_same_checkpoint(const char *a, const char *b, rc_err *err);

/* Runs the checks whose legs finished, then sets the verdict and exit code. */
int rc_run_checks(rc_run *run, rc_err *err);
/* Ranks the failing differences of every state check that differs, for its
 * headline (first_dataset): a dataset holding a saved field the census of
 * the same leg names first, then by kind of state (data position, RNG and
 * counters; optimizer state; model weights; everything else), then path
 * order (docs/report-schema.md). rc_run_checks calls it once every check
 * ran. RC_TEST_FIRST_IN_PATH_ORDER=1 (a test's control) keeps path order. */
void rc_run_rank_differences(rc_run *run);
/* "3 datasets: /optimizer/exp_avg/w, /model/w, /extra/ema/0" (in the
 * headline's rank order, at most max named, "(first 3)" when more; names
 * escaped for a terminal) of a state check that ran; "" when nothing in it
 * differs. */
void rc_run_differing_names(const rc_run *run, const rc_check *c, int max, char *buf, size_t cap);
/* While the legs run (each scheduler tick): starts, on a thread of its own
 * and one at a time, the next state check whose two checkpoints are both
 * complete (their COMPLETE markers, and no rank's manifest fragment left
 * for finalize to remove: from then on a checkpoint never changes again), so the comparisons of a
 * run overlap its later legs instead of following them; joins the one that ended. The verdict still
 * waits for every leg. Built-in trainer only: an exec trainer's checkpoint may gain files after its
 * marker, so its checks run after its legs. rc_run_early_checks_join waits for the one in flight.
 */
void rc_run_early_checks_poll(rc_run *run);
void rc_run_early_checks_join(rc_run *run);
void rc_run_verdict(rc_run *run);

/* --noise calibrated (calibrate.c). A trace check judged exact, calibrated
 * or as noise: its exact columns compared, its noisy ones against the
 * envelope of the fresh legs (through and aa...) of its arm. */
void rc_calib_trace_check(rc_run *run, rc_check *c);
/* After every check ran: each calibrated state twin at index from or
 * later judged against the A/A pairs' differences (its exact part's status
 * copied when that was skipped or failed). */
void rc_calib_states(rc_run *run, int from);
/* After rc_calib_states: a calibrated check that exceeds the noise stays
 * "exceeds" only when every resume leg at its K (its arm) has a calibrated
 * check that exceeds; otherwise each such excess becomes not decided
 * (RC_CHECK_UNDECIDABLE, calib.not_reproduced). Fills calib.resume_legs
 * and resume_legs_exceeding of every calibrated check. 70 out of memory. */
int rc_calib_reproduce(rc_run *run);
/* The calibrated verdict when no exact check failed: 0 none applies
 * (every check identical), else RC_CHECK_EXCEEDS_NOISE, RC_CHECK_UNDECIDABLE
 * or RC_CHECK_WITHIN_NOISE with its words (*check: the check it names). */
int rc_calib_verdict(const rc_run *run, char *text, size_t text_cap, char *hint, size_t hint_cap,
                     int *check);
/* The most resume legs per K a calibrated run plans at first (--resumes). */
#define RC_RUN_MAX_RESUMES 17
/* Adds count confirming resume legs at K in arm (resume@K.2, resume@K.aa.2,
 * resume@K.3, ...: from the primary resume legs' fresh legs in turn), each
 * with its argv and its checks, as the plan gives a resume leg; the legs
 * are pending, the checks not yet run. 70 out of memory. */
int rc_run_plan_confirm(rc_run *run, const char *arm, int64_t k, int count, rc_err *err);
/* --confirm-resumes (run_confirm.c): after rc_run_checks, when the verdict
 * is exceeds-noise, the confirming legs of every K that exceeded are
 * planned, prepared and run, their checks run and every calibrated check
 * judged again, and the verdict made again. *n_added: legs added (0: none
 * needed). Errors as rc_run_legs and rc_run_checks. */
int rc_run_confirm(rc_run *run, int *n_added, rc_err *err);
/* Makes the directories of legs [from, n_legs), as rc_run_prepare does for
 * every leg (a stale one of an earlier run removed under --overwrite). */
int rc_run_prepare_legs(rc_run *run, int from, rc_err *err);

/* The training steps every leg of the run takes together (each leg's
 * last_step - resume_step): what a verdict costs. */
int64_t rc_run_training_steps(const rc_run *run);

/* Installs SIGINT/SIGTERM handlers that make rc_run_legs stop its legs. */
void rc_run_install_signal_handlers(void);
bool rc_run_interrupt_requested(void);

/* Progress on the terminal (run_progress.c): live lines per running leg
 * with step/N and ETA when the stream is a TTY, plain start/end lines and
 * a heartbeat line per running leg every 10% of its steps or every
 * RC_HEARTBEAT_S seconds (default 60) otherwise (CI logs), nothing when off. */
typedef struct {
  FILE *out;
  rc_progress_mode mode; /* resolved: LIVE, PLAIN or OFF */
  int lines_drawn;       /* live block currently on screen */
  double last_draw;
  double beat_s; /* plain: seconds between a running leg's heartbeat lines (RC_HEARTBEAT_S) */
} rc_progress;

void rc_progress_init(rc_progress *p, const rc_run *run);
void rc_progress_leg_started(rc_progress *p, const rc_run *run, int leg);
void rc_progress_leg_finished(rc_progress *p, const rc_run *run, int leg);
/* Refreshes steps_done of running legs from their traces; redraws (live). */
void rc_progress_tick(rc_progress *p, rc_run *run, double now);
void rc_progress_done(rc_progress *p);
double rc_now(void); /* CLOCK_MONOTONIC seconds */

/* Helpers shared by the run and report files. */
/* snprintf for messages and paths where cutting an over-long value is the
 * intended behaviour (buffers are sized for the common case). */
void rc_bufprintf(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *rc_leg_state_name(rc_leg_state s);
/* The status reports show: the state's name, or "timed-out". */
const char *rc_leg_status_name(const rc_leg *leg);
const char *rc_check_status_name(rc_check_status s);
const char *rc_check_class_name(rc_check_class c);
const char *rc_mechanism_name(rc_mechanism m);
/* "0→10" style step range of a leg: resume_step→last_step. */
void rc_leg_range(const rc_leg *leg, char *buf, size_t cap);
/* Shell-quoted command line, for "reproduce with" lines. */
void rc_argv_quote(char *const *argv, char *buf, size_t cap);
/* A leg's command as a person can paste it: the trainer binary's real path
 * in place of /proc/self/exe. */
void rc_leg_command(const rc_run *run, const rc_leg *leg, char *buf, size_t cap);
/* argv[0] as shown to people (the resolved binary for `train` legs). */
const char *rc_leg_argv0(const rc_run *run, const rc_leg *leg);

/* Spawns argv (PATH search when search_path) in its own process group with
 * stdin from /dev/null and stdout+stderr into log_path (truncated), whose
 * first line is "$ " + header when header is non-NULL, capped at
 * RC_LEG_LOG_HEAD + RC_LEG_LOG_TAIL bytes of output. envp NULL = inherit.
 * *pid is a small supervisor, the trainer's parent, that kills the
 * trainer's whole group when the caller dies (run_spawn.c); its exit status
 * is the trainer's. */
int rc_spawn_logged(char *const *argv, char *const *envp, bool search_path, const char *log_path,
                    const char *header, pid_t *pid, rc_err *err);
/* The same, with wait_fd (>= 0) as the leg's fd 3 (RC_WAIT_FD=3 is the
 * caller's to put into envp), and *pgid (if non-NULL) the trainer's process
 * group: the one to signal to stop the leg (the supervisor ignores
 * signals; it ends with the trainer and has its log's end written). */
int rc_spawn_leg(char *const *argv, char *const *envp, bool search_path, const char *log_path,
                 const char *header, int wait_fd, pid_t *pid, pid_t *pgid, rc_err *err);
/* Reads DIR/timing.csv of a `train` leg into *t. */
void rc_leg_timing_read(const char *leg_dir, rc_leg_timing *t);
/* Runs argv to completion, collecting its stdout (malloc'd, NUL-terminated)
 * while its stderr goes to ours. *status is the waitpid status. */
/* The memory `run --jobs` needs (run_prepare.c): RC_OK if min(jobs,
 * concurrent_legs) legs of per_leg bytes fit in available (0: unknown, not
 * checked), else RC_EXIT_RESOURCES naming the largest --jobs that fits. */
int rc_run_jobs_memory_check(uint64_t per_leg, int jobs, int concurrent_legs, uint64_t available,
                             const char *what, rc_err *err);
int rc_spawn_capture(char *const *argv, char **out, size_t *n, int *status, rc_err *err);
/* `train [fwd] [--grad-accum-fusion X] --steps N EXTRA...` (extra NULL-ended),
 * its stdout in *out (malloc'd), its wait status in *status. */
int rc_run_train_capture(const rc_run_opts *o, const char *fusion, char *const *extra, char **out,
                         size_t *len, int *status, rc_err *err);
/* The last max_lines lines of a text file (at most cap-1 bytes), made valid
 * UTF-8. "" if unreadable. */
void rc_log_tail(const char *path, int max_lines, char *buf, size_t cap);
/* Count of complete rows after the header in a CSV file, 0 if absent. */
int64_t rc_trace_rows(const char *path);

#endif
