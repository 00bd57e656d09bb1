/* trace_table.h — a trace.csv read into memory (docs/trace.md): its
 * header, its rows keyed by step, and its logical columns (a float column
 * X and its exact sibling X_hex are one). trace_diff.c compares two of
 * them byte for byte; calibrate.c reads several to measure run-to-run
 * noise. The reader is trace_diff.c's. */
#ifndef RC_HARNESS_TRACE_TABLE_H
#define RC_HARNESS_TRACE_TABLE_H

#include <stdint.h>

#include "base/error.h"

typedef struct {
  char *text;    /* the whole file, split in place (owned) */
  char **header; /* ncols names, pointing into text */
  int ncols;
  char **cells;   /* nrows * ncols fields, row-major, pointing into text */
  int64_t *steps; /* nrows, strictly increasing */
  int nrows;
} rc_trace_table;

/* One logical column: the name reported, the column that decides equality
 * (X_hex when there is one) and the column shown to people. */
typedef struct {
  char name[128];
  int exact, shown;
} rc_trace_column;

/* Reads path (a regular file, at most RC_READ_CAP_TRACE bytes): 65 for a
 * malformed trace (no step column, a row of another width, steps that do
 * not increase), naming the line. *t is filled even on error, so that
 * rc_trace_table_free always applies. */
int rc_trace_table_load(const char *path, rc_trace_table *t, rc_err *err);
void rc_trace_table_free(rc_trace_table *t);
/* The index of the header column name, -1 if none. */
int rc_trace_table_col(const rc_trace_table *t, const char *name);
/* The logical columns, in header order, step excluded: *out malloc'd
 * (caller frees); the count, or -1 out of memory. */
int rc_trace_table_columns(const rc_trace_table *t, rc_trace_column **out);

#endif
