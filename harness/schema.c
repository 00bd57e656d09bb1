/* schema.c — the one check every reader of a resumecheck report makes
 * before it trusts a key: is this the kind of document it expects, under a
 * name and schema_version this build knows (harness/schema.h). */
#include "schema.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

typedef struct {
  const char *noun;            /* for messages: "run report" */
  const char *name;            /* the `schema` value */
  int64_t version;             /* the newest `schema_version` this build reads */
  const char *old_name;        /* the name before, or NULL */
  const char *old_version_key; /* the key its version had */
  int64_t old_version;         /* the only version the old name had */
} schema_def;

static const schema_def DEFS[] = {
    [RC_SCHEMA_RUN] = {"run report", RC_RUN_REPORT_SCHEMA, RC_RUN_REPORT_SCHEMA_VERSION, NULL, NULL,
                       0},
    [RC_SCHEMA_COMPARE] = {"compare report", RC_COMPARE_REPORT_SCHEMA,
                           RC_COMPARE_REPORT_SCHEMA_VERSION, RC_COMPARE_REPORT_SCHEMA_OLD,
                           RC_COMPARE_REPORT_VERSION_KEY_OLD, 1},
    [RC_SCHEMA_BISECT] = {"bisect report", RC_BISECT_REPORT_SCHEMA, RC_BISECT_REPORT_SCHEMA_VERSION,
                          NULL, NULL, 0},
};

int rc_schema_accept(const rc_json *doc, rc_schema_kind kind, const char *what, rc_err *err) {
  if ((unsigned)kind >= sizeof DEFS / sizeof DEFS[0])
    return rc_fail(err, RC_EXIT_SOFTWARE, "%s: unknown report kind %d", what, (int)kind);
  const schema_def *d = &DEFS[kind];
  const char *name = doc && doc->type == RC_JSON_OBJ ? rc_json_get_str(doc, "schema") : NULL;
  if (!name)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: not a resumecheck %s (no \"schema\" string)", what,
                   d->noun);
  bool old = d->old_name && !strcmp(name, d->old_name);
  if (!old && strcmp(name, d->name))
    return rc_fail(err, RC_EXIT_DATAERR, "%s: not a resumecheck %s (schema \"%s\", want \"%s\")",
                   what, d->noun, name, d->name);
  const char *key = old ? d->old_version_key : "schema_version";
  int64_t v = 0, newest = old ? d->old_version : d->version;
  if (!rc_json_get_i64(doc, key, &v) || v < 1)
    return rc_fail(err, RC_EXIT_DATAERR, "%s: %s without a valid \"%s\"", what, name, key);
  if (v > newest)
    return rc_fail(err, RC_EXIT_DATAERR,
                   "%s: %s schema_version %" PRId64 ", newer than this build reads (%" PRId64
                   "): use the resumecheck that wrote it",
                   what, name, v, newest);
  return RC_OK;
}
