/* census.h — reading and comparing two state censuses (docs/census.md):
 * the through process's after step K and the resumed process's right after
 * it loaded K. core/census.c writes them for the built-in trainer; an exec
 * trainer may write its own in the same format.
 *
 * Every field of either file is matched by name. A `saved` field that
 * differs, or that only one side has, is a state the load did not restore
 * (or a save that changed the saving process); a `local` field that
 * differs is process-local by design and is reported with its note, never
 * as a failure. When the through leg's save changed it (core/census.h keeps
 * a before-save census then), the value before the save is reported too. Values are compared as the
 * strings written, so equal strings are equal state.
 *
 * Ownership: an rc_census_diff owns its strings; release with
 * rc_census_diff_free. */
#ifndef RC_HARNESS_CENSUS_H
#define RC_HARNESS_CENSUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/error.h"
#include "base/json.h"

typedef struct {
  char *field;
  bool saved;   /* either side classes it `saved` */
  char *a, *b;  /* values; NULL where that side lacks the field */
  char *before; /* the through process's value before its save at K, when a
                 * before-save census exists and the save changed it; else NULL */
  char *note;   /* the NOTE column of the side that has one, or NULL */
} rc_census_field_diff;

typedef struct {
  int n_fields;                /* distinct fields over both files */
  int n_saved_differ;          /* saved fields that differ or are on one side only */
  int n_local_differ;          /* local fields that differ (by design) */
  rc_census_field_diff *diffs; /* saved ones first, each group in the through file's order */
  int n_diffs;
} rc_census_diff;

/* RC_EXIT_NOINPUT if a file is missing, RC_EXIT_DATAERR naming file and
 * line for a malformed one (a line without three tab-separated columns, an
 * unknown class, a field twice), RC_EXIT_IOERR if unreadable. */
int rc_census_compare_files(const char *through, const char *resumed, rc_census_diff *out,
                            rc_err *err);
void rc_census_diff_free(rc_census_diff *d);

/* "loss_scaler.hysteresis_tracker: through 1, resumed 2 (saved: not restored by
 * the load)" — `a_name`/`b_name` name the sides. */
void rc_census_describe(const rc_census_field_diff *d, const char *a_name, const char *b_name,
                        char *buf, size_t cap);

/* The first saved field that differs (saved ones lead each rank's list,
 * and ranks follow each other), or NULL. */
const rc_census_field_diff *rc_census_first_saved(const rc_census_diff *d);

/* The differing local fields grouped by kind, e.g.
 * "linear.is_first_microbatch (13 modules: through FALSE, resumed TRUE),
 * main_grad.holds_gradients (through true, resumed false)"; "" if none. */
void rc_census_local_groups(const rc_census_diff *d, char *buf, size_t cap);

/* The differences as a person reads them: each saved field (at most
 * max_saved), then the local ones by group with their notes, a line each. */
void rc_census_print(const rc_census_diff *d, FILE *out, const char *indent, int max_saved);

/* Every difference as a JSON array of objects (field, class, through,
 * resumed, through_before_save, note, text), under `key`: the one form
 * report.json and bisect.json share (docs/report-schema.md). */
void rc_census_json_differences(rc_jw *w, const char *key, const rc_census_diff *d);

#endif
