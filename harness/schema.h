/* schema.h — the names of the JSON documents resumecheck writes, in one
 * place for the writers (harness, src/cli) and the readers (bisect reads a
 * run's report.json). Every document is named `resumecheck.<kind>-report`
 * and carries an integer `schema_version` (docs/report-schema.md, "Schema
 * names"): a reader dispatches on the two and never on the file's name.
 *
 * Within a schema_version keys are never renamed or removed, so a reader
 * accepts versions 1..current of its kind; a newer one was written by a
 * newer resumecheck and is refused rather than half understood. A name a
 * kind had before (compare's was "resumecheck-compare" with `version`) is
 * still accepted for one version, so reports kept from older builds read. */
#ifndef RC_HARNESS_SCHEMA_H
#define RC_HARNESS_SCHEMA_H

#include "base/error.h"
#include "base/json.h"

#define RC_RUN_REPORT_SCHEMA "resumecheck.run-report"
#define RC_RUN_REPORT_SCHEMA_VERSION 1
/* 2: the name and version key changed from "resumecheck-compare"/`version` */
#define RC_COMPARE_REPORT_SCHEMA "resumecheck.compare-report"
#define RC_COMPARE_REPORT_SCHEMA_VERSION 2
#define RC_BISECT_REPORT_SCHEMA "resumecheck.bisect-report"
#define RC_BISECT_REPORT_SCHEMA_VERSION 1

/* Before the names were made one (schema_version 1 of the compare report);
 * readers accept it until the compare report's schema_version 3. */
#define RC_COMPARE_REPORT_SCHEMA_OLD "resumecheck-compare"
#define RC_COMPARE_REPORT_VERSION_KEY_OLD "version"

typedef enum { RC_SCHEMA_RUN, RC_SCHEMA_COMPARE, RC_SCHEMA_BISECT } rc_schema_kind;

/* 0 when doc is a report of that kind this build reads: its name with a
 * schema_version from 1 to the current one, or its old name (above). Else
 * RC_EXIT_DATAERR, err saying what doc is instead ("<what>: not a resumecheck
 * run report ...", "<what>: ... schema_version 3, newer than this build
 * reads"). what names the document in the message (its path). */
int rc_schema_accept(const rc_json *doc, rc_schema_kind kind, const char *what, rc_err *err);

#endif
