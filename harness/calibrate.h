/* calibrate.h — `run --noise calibrated`: a resume verdict for trainers
 * that are not bitwise deterministic (docs/design.md §7.2).
 *
 * Two kinds of check, kept apart. Exact checks hold whatever the kernels
 * do: the census at K (what the resumed process holds against what the
 * process that saved held), the trace columns a trainer marks exact (the
 * learning rate, counters, the data position, a batch fingerprint) and
 * every part of the final state that is not a float value. Calibrated
 * checks judge the rest — the noisy trace columns per step and the float
 * tensors of the final state — against the envelope the fresh legs
 * measure: the through leg and the --aa legs run the same steps from
 * scratch, and every pair of them differs only by run-to-run noise.
 *
 * The rule (deterministic given the traces and shards):
 *   trace, noisy column c, step s = K + j (the resumed leg's j-th step):
 *     L(h) = the largest relative difference |x - y| / |x| of any pair of
 *     fresh legs at steps 1..h; r = |through_s - resumed_s|;
 *     allowed = max(RC_CALIB_FACTOR * L(2j) * |through_s|,
 *                   RC_CALIB_FLOOR_REL * |through_s|);
 *     r > allowed exceeds the noise. The resumed leg starts from the
 *     through leg's own checkpoint at K (the shared trajectory), so at K+j
 *     the two differ by j steps of kernel noise, not K+j: they are held to
 *     what j steps of noise do, with 2j as the horizon so that a schedule
 *     whose early steps amplify less (a warmup) is not a false alarm.
 *     Fingerprints and counts (accuracies) are not judged: they have no
 *     size, or move in whole steps.
 *   state at N:  D = sqrt(sum_t sum_i (a_i - b_i)^2 / sum_t n_t * scale_t^2)
 *     over the float tensors t that differ: the state's RMS difference
 *     relative to each tensor's scale (compare's sum_sq, n_elements and
 *     max_mag, the largest magnitude among its differing elements), every
 *     element weighing the same; D(through, resumed) > max(RC_CALIB_FACTOR
 *     * the largest D of the fresh pairs, RC_CALIB_FLOOR_REL) exceeds the
 *     noise. One statistic for the state, not one per tensor: Adam turns
 *     noise on a near-zero gradient into a whole update of either sign, so
 *     a tensor's largest element difference jumps from nothing to lr-sized
 *     at random, and a tensor of a few elements moved by the sign of a
 *     count (an MoE expert bias) jumps by whole steps, while a resume bug
 *     moves many elements. The per-tensor figures are reported for the
 *     diagnosis.
 *   undecidable: within the noise, but at the first resumed step every
 *     noisy numeric column's allowed deviation is at least
 *     RC_CALIB_UNDECIDABLE_REL of its value: no effect smaller than that
 *     could have been seen.
 *   at the floor (undecidable too): the only excess is one where the floor
 *     set the bound (the fresh pairs measured less than RC_CALIB_FLOOR_REL /
 *     RC_CALIB_FACTOR there) and the deviation is within RC_CALIB_FACTOR x
 *     the floor. Kernels whose noise is sparse (atomics on a few rows)
 *     under 16-bit weights move a run either not at all or by a whole
 *     rounding flip; three fresh runs can all miss the flip that the
 *     resumed leg then shows (an H100, bench/NOTES.md session 30: 1.07e-4
 *     against pairs at 1.3e-9), so such an excess is not called a bug.
 *   reproduced: per K, P resume legs (run --resumes, default 2) each load
 *     their own fresh leg's checkpoint (resume@K from through, resume@K.aa
 *     from aa, ...) and each is judged, as above, against the leg it
 *     continues. An excess decides "exceeds" only when every one of them
 *     exceeds (in its trace or its state); otherwise it is not decided. A
 *     resume bug is in what every resumed process loads, so it moves every
 *     pair; a rounding flip is one process's, so it moves one pair (the
 *     CPU bench, bench/NOTES.md session 30: 3 false alarms in 150 runs of
 *     one pair, each a flip in one leg of 8- or 16-bit weights).
 * The resumed leg starts from the through leg's own checkpoint at K (the
 * shared trajectory), so it and the through leg differ by N-K steps of
 * noise while the fresh pairs differ by N: the envelope at the same step
 * is a bound a correct resume stays under. */
#ifndef RC_HARNESS_CALIBRATE_H
#define RC_HARNESS_CALIBRATE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "harness/compare.h"
#include "harness/trace_table.h"

/* The rule's constants (docs/design.md §7.2 has the measurements that set
 * them). */
#define RC_CALIB_FACTOR 4.0
#define RC_CALIB_FLOOR_REL 0x1p-14 /* a trace's resolution: 6.1e-5 of the value */
#define RC_CALIB_UNDECIDABLE_REL 0.1
/* A leg's declaration of its trace columns, beside its trace.csv. */
#define RC_TRACE_COLUMNS_NAME "trace_columns.json"
#define RC_TRACE_COLUMNS_SCHEMA "resumecheck.trace-columns"

typedef enum {
  RC_COL_NOISY = 0,   /* a float that run-to-run noise may change: calibrated */
  RC_COL_EXACT,       /* must be equal whatever the noise: an exact check */
  RC_COL_FINGERPRINT, /* a hash of values (fp_*): changes with any noise, has no size */
  RC_COL_DISCRETE     /* a count (an accuracy): one near-tie flips it by a whole step */
} rc_col_kind;

const char *rc_col_kind_name(rc_col_kind k);

/* One logical trace column and its kind. */
typedef struct {
  char name[128];
  int exact, shown; /* rc_trace_column's indices */
  rc_col_kind kind;
  char why[48]; /* "declared", "integer", "learning rate", "loss scale", "fingerprint", "float" */
} rc_calib_col;

/* The kinds of t's columns: what decl_path (trace_columns.json; absent is
 * fine) declares, else by name and content: lr* and loss_scale exact,
 * columns without a float sibling whose every value is an integer exact,
 * fp_* and values with hex letters fingerprints, floats noisy. *cols
 * malloc'd. 65 for a malformed declaration or one naming a column t has
 * not. */
int rc_calib_columns(const rc_trace_table *t, const rc_trace_table *const *others, int n_others,
                     const char *decl_path, rc_calib_col **cols, int *n, rc_err *err);

/* A noisy column's judgement over the resumed steps. */
typedef struct {
  char name[128];
  rc_col_kind kind;
  char why[48];
  int64_t steps;       /* steps judged (noisy numeric) or compared (exact) */
  int64_t differ_step; /* first step the two sides differ at all, -1 */
  /* noisy numeric columns */
  int64_t worst_step; /* the largest r / allowed, -1 when none judged */
  double worst_r, worst_allowed, worst_env, worst_value;
  int64_t exceed_step; /* first step r > allowed, -1 (not counting steps at the floor) */
  double exceed_r, exceed_allowed, exceed_env, exceed_value;
  /* first step r > allowed where the floor set the bound and r is within
   * RC_CALIB_FACTOR x it: at the floor, not decided (-1) */
  int64_t floor_step;
  double floor_r, floor_allowed, floor_env, floor_value;
  double resolution; /* at the first judged step: allowed / |value| (inf when 0) */
} rc_calib_col_result;

/* A float tensor of the final state against its envelope. */
typedef struct {
  char file[512], object[512];
  double r_abs, r_rel; /* through vs resumed: max |a-b|, max relative */
  uint64_t r_ulp;
  int64_t r_n_different, n_elements;
  double e_abs, e_rel;       /* the largest over the fresh pairs (0: they agree) */
  double scale;              /* the largest |value| among the differing elements, either run */
  double rms_rel, e_rms_rel; /* RMS difference relative to scale: resumed, the pairs' largest */
  double share;              /* its part of the state's summed squared difference */
  uint64_t e_ulp;
  int64_t e_n_different;
  int e_pairs;  /* fresh pairs in which this tensor differs */
  double ratio; /* rms_rel / e_rms_rel; inf when the pairs agree on it */
  bool exceeds; /* the state (not this tensor alone) exceeds the noise */
} rc_calib_tensor;

/* What a calibrated or noise check found (owned by its rc_check). */
typedef struct {
  int n_fresh, n_pairs; /* fresh legs (through, aa...) and their pairs */
  rc_calib_col_result *cols;
  int n_cols;
  rc_calib_tensor *tensors;
  int n_tensors, n_tensors_exceed;
  /* the headline: the first exceeding step and column (trace) or the
   * largest ratio (state); the worst within the noise otherwise */
  int64_t step;
  char what[640]; /* column or tensor */
  double r, env, allowed, ratio;
  bool exceeds;
  /* the smallest relative effect the trace could resolve at its first
   * resumed step, and in which column; inf when no noisy numeric column */
  double resolution;
  char resolution_col[128];
  int64_t resolution_step;
  bool undecidable;
  /* undecidable at the floor (above): step, what, r, env and allowed are
   * that excess's */
  bool at_floor;
  /* replication (run --resumes P): the resume legs at this check's K (its
   * arm) and how many of them exceed the noise in a calibrated check of
   * their own; an excess that not all of them show is not decided
   * (not_reproduced: exceeds false, the figures its pair's) */
  int resume_legs, resume_legs_exceeding;
  bool not_reproduced;
  char fingerprints[256]; /* columns not judged (fingerprints, counts), comma-separated */
} rc_calib;

void rc_calib_free(rc_calib *c);

/* A float difference's mean squared difference relative to its scale
 * (sum_sq / (n_elements * max_mag^2)); inf for NaN on one side; 0 for what
 * is not a float. rc_calib_state_rms: D of r, above (inf for a NaN on one
 * side). */
double rc_calib_tensor_ms(const rc_diff *d);
double rc_calib_state_rms(const rc_compare_result *r);

/* Whether a difference is a float tensor's values (calibrated) rather
 * than something exact: VALUES of a float dtype, by compare's detail
 * ("float32[64,64]: ...", "bfloat16[...]"). */
bool rc_calib_diff_is_float(const rc_diff *d);
/* The failing differences of r that are not float values (an A/A pair's
 * exact part). */
int rc_calib_exact_diffs(const rc_compare_result *r);

/* Moves the float-value differences of *all into *floats (a new result
 * whose counters are all's), leaving the others in *all, n_failing
 * recomputed on both. 70 out of memory (nothing moved). */
int rc_calib_split(rc_compare_result *all, rc_compare_result *floats, rc_err *err);

/* The trace rule on loaded tables: through t, resumed r, fresh legs
 * fresh[0..n_fresh) (t among them), columns cols, steps from..to. Fills
 * res (cols, headline, resolution). Pure. */
int rc_calib_judge_trace(const rc_trace_table *t, const rc_trace_table *r,
                         const rc_trace_table *const *fresh, int n_fresh, const rc_calib_col *cols,
                         int n_cols, int64_t from, int64_t to, rc_calib *res, rc_err *err);
/* The state rule on k->r (through vs resumed) and k->env (the pairs'
 * largest): sets allowed, ratio, exceeds, at_floor and undecidable. Pure. */
void rc_calib_state_rule(rc_calib *k);
/* "exceeds the noise by 37x" style ratio text: "37x", "inf (the fresh
 * runs agree there)". */
void rc_calib_ratio_text(double ratio, char *buf, size_t cap);

#endif
