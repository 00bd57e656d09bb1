/* error.h — status codes and the error record every layer fills in.
 *
 * Library code never exits: it returns one of the RC_EXIT_* codes below and
 * writes a one-line, human-readable reason into an rc_err. The CLI prints the
 * reason and exits with the code, so the codes double as the tool's exit
 * codes (docs/design.md §10; sysexits.h values for usage and data errors). */
#ifndef RC_BASE_ERROR_H
#define RC_BASE_ERROR_H

#include <stdarg.h>

enum {
  RC_OK = 0,
  RC_EXIT_DIVERGED = 1,          /* a resume check found different bytes */
  RC_EXIT_AA = 2,                /* A/A failure: the run is not deterministic */
  RC_EXIT_NOT_PREFIX = 3,        /* run --aa: the legs are deterministic, but the save leg is not
                                    a prefix of the through leg (resume set-up, not resume) */
  RC_EXIT_NOISE_UNDECIDABLE = 4, /* run --noise calibrated: the run-to-run noise is too large
                                    to tell a resume effect from it */
  RC_EXIT_USAGE = 64,            /* bad flags or an inconsistent config */
  RC_EXIT_DATAERR = 65,          /* bad input data: corrupt/mismatched checkpoint */
  RC_EXIT_NOINPUT = 66,          /* a named input does not exist */
  RC_EXIT_SOFTWARE = 70,         /* internal error */
  RC_EXIT_IOERR = 74,            /* an I/O operation failed (disk full, EACCES) */
  RC_EXIT_RESOURCES = 75,        /* the config needs more memory than there is (sysexits'
                                    EX_TEMPFAIL: retry smaller, with fewer --jobs or elsewhere) */
  RC_EXIT_UNTESTABLE = 125       /* --git-bisect: this revision cannot be judged */
};

typedef struct {
  int code;       /* 0 or one of the codes above */
  char msg[2048]; /* one line, no trailing newline */
} rc_err;

/* Records code and a printf-style message in err (if non-NULL); returns code
 * so callers can write `return rc_fail(err, RC_EXIT_IOERR, "...")`. */
int rc_fail(rc_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message with context ("loading iter_0000005: ..."). */
void rc_err_prefix(rc_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
