/* census.h — reading and comparing two state censuses (docs/census.md):
 * the through process's after step K and the resumed process's right after
 * it loaded K. core/census.c writes them for the built-in trainer; an exec
 * trainer may write its own in the same format. A trainer may also write a
 * first-step census (iter_K.rankR.first-step.txt), taken just before the
 * first forward of step K+1: what happens between the load and the first
 * step (a DataLoader drawing its seed from the global RNG) shows only
 * there; its differences join the same diff, marked first_step.
 *
 * Every field of either file is matched by name. A `saved` field that
 * differs, or that only one side has, is a state the load did not restore
 * (or a save that changed the saving process, or a save that wrote a value
 * the saving process does not hold: the through leg's census of what its
 * save wrote, iter_K.rankR.saved.txt, says which); a `derived` field (a
 * setting or value the next step computes with) and a `copy` field (an
 * in-process copy checked against its master) fail the same way; a `local`
 * field that differs is process-local by design and is reported with its
 * note, never as a failure. When the through leg's save changed it (core/census.h keeps
 * a before-save census then), the value before the save is reported too. Values are compared as the
 * strings written, so equal strings are equal state. A line may end in
 * CRLF: the CR is not part of the value (a file written on Windows).
 *
 * Ownership: an rc_census_diff owns its strings; release with
 * rc_census_diff_free. */
#ifndef RC_HARNESS_CENSUS_H
#define RC_HARNESS_CENSUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "base/json.h"

/* A first-step difference, against the census after the load: the field
 * was equal there, differed there too, or is not in it. */
/* A field's class (docs/census.md). */
typedef enum {
  RC_CENSUS_SAVED = 0, /* the checkpoint carries it: a load must restore it */
  RC_CENSUS_LOCAL,     /* process-local by design: listed, never a failure */
  RC_CENSUS_DERIVED,   /* what the next step computes with, from identical state */
  RC_CENSUS_COPY       /* an in-process copy against its master ("ok" when equal) */
} rc_census_class;
const char *rc_census_class_name(rc_census_class c);

typedef enum {
  RC_AFTER_LOAD_NA = 0, /* an after-load difference, or no after-load census */
  RC_AFTER_LOAD_EQUAL,
  RC_AFTER_LOAD_DIFFERS,
  RC_AFTER_LOAD_ABSENT
} rc_census_after_load;

/* The kinds of state a census covers, from its field names (a bit each):
 * what "the census saw no difference" can speak for. */
enum {
  RC_FAM_ITERATION = 1u << 0,    /* iteration */
  RC_FAM_DATA = 1u << 1,         /* data.* */
  RC_FAM_RNG = 1u << 2,          /* rng.* */
  RC_FAM_MOMENTS = 1u << 3,      /* optimizer.exp_avg*, optimizer.momentum_buffer* */
  RC_FAM_OPT_STEP = 1u << 4,     /* optimizer.step* */
  RC_FAM_OPT_OTHER = 1u << 5,    /* optimizer.* else (param groups, ...) */
  RC_FAM_SCHEDULER = 1u << 6,    /* scheduler.* */
  RC_FAM_SCALER = 1u << 7,       /* loss_scaler.*, grad_scaler.* */
  RC_FAM_MODEL = 1u << 8,        /* model.* */
  RC_FAM_MOE = 1u << 9,          /* moe.* */
  RC_FAM_FP8 = 1u << 10,         /* fp8.* */
  RC_FAM_LOCAL_FLAGS = 1u << 11, /* linear.*, main_grad* (process-local) */
  RC_FAM_REGISTERED = 1u << 12,  /* state.<name>.* (python/resumecheck/registry.py) */
  RC_FAM_DERIVED = 1u << 13,     /* class derived: the settings the next step uses */
  RC_FAM_COPIES = 1u << 14       /* class copy: in-process copies against their masters */
};
#define RC_CENSUS_N_FAMILIES 15
#define RC_CENSUS_OTHER_CAP 256

typedef struct {
  char *field;
  bool saved;                      /* either side classes it saved, derived or copy: it fails */
  rc_census_class cls;             /* the failing class when one side has one, else local */
  bool first_step;                 /* seen by the first-step census, not the after-load one */
  rc_census_after_load after_load; /* first-step differences: the field after the load */
  char *a, *b;                     /* values; NULL where that side lacks the field */
  char *before;                    /* the through process's value before its save at K, when a
                                    * before-save census exists and the save changed it; else NULL */
  char *note;                      /* the NOTE column of the side that has one, or NULL */
  /* saved fields: the value the through leg's save wrote for it (its
   * census of what it wrote, iter_K.rankR.saved.txt, or rank 0's for a
   * replicated field), NULL when that census does not have it */
  char *written;
  bool written_rank0; /* ... from rank 0's census of its save: the field is not in this rank's */
  /* derived fields: no saved field differs in the same census pair, so the
   * state the value is computed from is identical */
  bool sources_equal;
  /* a derived field that differs beside saved fields that differ: listed
   * (it may follow from them), but not counted among the failing fields,
   * which the saved ones already fail */
  bool consequence;
} rc_census_field_diff;

typedef struct {
  int n_fields;                /* distinct fields over both files (after the load) */
  int n_saved_differ;          /* failing fields (saved, derived, copy) that differ or are
                                * on one side only */
  int n_derived_differ;        /* of them, derived */
  int n_copy_differ;           /* of them, copies */
  int n_local_differ;          /* local fields that differ (by design) */
  rc_census_field_diff *diffs; /* saved ones first, each group in the through file's order;
                                * then the first-step census's, the same way */
  int n_diffs;
  /* the first-step census, when one was compared (rc_census_compare_first_step) */
  bool first_step;
  int first_fields, first_saved_differ, first_local_differ;
  int first_derived_differ, first_copy_differ;
  /* what the compared files cover: RC_FAM_* bits, the registered objects'
   * names ("ema, sampler" of state.ema.*, state.sampler.*) and the first
   * words of the fields no family names ("counter, weights"), each
   * comma-separated */
  unsigned families;
  char registered[RC_CENSUS_OTHER_CAP];
  char other[RC_CENSUS_OTHER_CAP];
} rc_census_diff;

/* RC_EXIT_NOINPUT if a file is missing, RC_EXIT_DATAERR naming file and
 * line for a malformed one (a line without three tab-separated columns, an
 * unknown class, a field twice), RC_EXIT_IOERR if unreadable. */
int rc_census_compare_files(const char *through, const char *resumed, rc_census_diff *out,
                            rc_err *err);
void rc_census_diff_free(rc_census_diff *d);

/* The first-step census pair (through's before step K+1, resumed's before
 * its first step), compared the same way; its differences are appended to
 * d (first_step set, after_load from the after-load pair, whose paths may
 * be NULL) and its counts set. Errors as rc_census_compare_files; on an
 * error d is left as it was. */
int rc_census_compare_first_step(const char *through, const char *resumed,
                                 const char *through_after, const char *resumed_after,
                                 rc_census_diff *d, rc_err *err);

/* Moves from's differences, counts and families into into (from is left
 * empty), prefixing fields with "rank R: " when prefix_rank >= 0. false
 * when out of memory (into keeps what it had). */
bool rc_census_merge(rc_census_diff *into, rc_census_diff *from, int prefix_rank);

/* "iteration, data position, RNG, optimizer moments, model weights,
 * registered state (ema), other fields: counter, pid": the families d's
 * files cover, "" if none. */
void rc_census_coverage(const rc_census_diff *d, char *buf, size_t cap);
/* The name of family bit i (0 .. RC_CENSUS_N_FAMILIES-1). */
const char *rc_census_family_name(int i);

/* The census file names of a rank at K (docs/census.md). */
void rc_census_first_step_filename(char *buf, size_t cap, int64_t step, int rank);

/* "loss_scaler.hysteresis_tracker: through 1, resumed 2 (saved: not restored by
 * the load)" — `a_name`/`b_name` name the sides. A first-step difference
 * starts "before the first step: ". Control characters in the file's text
 * are written as \xHH (rc_text_escape): the line is for a terminal. */
void rc_census_describe(const rc_census_field_diff *d, const char *a_name, const char *b_name,
                        char *buf, size_t cap);

/* "1 saved field differs", "2 derived fields differ", "1 saved field and 1
 * in-process copy differ": the failing fields of one census (first_step:
 * the first-step census's counts) by class. */
void rc_census_count_phrase(const rc_census_diff *d, bool first_step, char *buf, size_t cap);

/* The first saved field that differs (saved ones lead each rank's list,
 * and ranks follow each other; after-load ones before first-step ones), or
 * NULL. */
const rc_census_field_diff *rc_census_first_saved(const rc_census_diff *d);

/* The differing local fields grouped by kind, e.g.
 * "linear.is_first_microbatch (13 modules: through FALSE, resumed TRUE),
 * main_grad.holds_gradients (through true, resumed false)"; "" if none. */
void rc_census_local_groups(const rc_census_diff *d, char *buf, size_t cap);

/* The differences as a person reads them: each saved field (at most
 * max_saved), then the local ones by group with their notes, a line each;
 * the first-step census's after them, each line starting "before the
 * first step: ". */
void rc_census_print(const rc_census_diff *d, FILE *out, const char *indent, int max_saved);

/* Every after-load difference as a JSON array of objects (field, class,
 * through, resumed, through_before_save, note, text), under `key`: the one
 * form report.json and bisect.json share (docs/report-schema.md). */
void rc_census_json_differences(rc_jw *w, const char *key, const rc_census_diff *d);
/* The first-step differences the same way, each with `after_load`
 * ("equal", "differs", "absent" or null). */
void rc_census_json_first_step_differences(rc_jw *w, const char *key, const rc_census_diff *d);

#endif
