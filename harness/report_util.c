/* report_util.c — the small pieces every report writer shares: a growing
 * string, XML escaping that always yields well-formed documents, UTF-8
 * clean-up for text that came from logs and paths, and the wording of
 * tallies and verdicts, so that every format says the same thing. */
#include "report.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"

static void sb_reserve(rc_sb *b, size_t more) {
  if (b->oom) return;
  if (b->len + more + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more + 1) cap *= 2;
  char *p = realloc(b->buf, cap);
  if (!p) {
    b->oom = 1;
    return;
  }
  b->buf = p;
  b->cap = cap;
}

void rc_sb_printf(rc_sb *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = 1;
    return;
  }
  sb_reserve(b, (size_t)n);
  if (b->oom) return;
  va_start(ap, fmt);
  vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void rc_sb_puts(rc_sb *b, const char *s) {
  size_t n = strlen(s);
  sb_reserve(b, n);
  if (b->oom) return;
  memcpy(b->buf + b->len, s, n + 1);
  b->len += n;
}

void rc_utf8_sanitize(const char *in, char *out, size_t cap) {
  if (!cap) return;
  const unsigned char *s = (const unsigned char *)in;
  size_t o = 0;
  while (*s) {
    int n = rc_utf8_len(s);
    if (n == 1 && *s < 0x20 && *s != '\n' && *s != '\t') {
      if (o + 2 > cap) break;
      out[o++] = '?';
      s++;
    } else if (n == 0) {
      if (o + 4 > cap) break;
      memcpy(out + o, "\xEF\xBF\xBD", 3); /* U+FFFD */
      o += 3;
      s++;
    } else {
      if (o + (size_t)n + 1 > cap) break;
      memcpy(out + o, s, (size_t)n);
      o += (size_t)n;
      s += n;
    }
  }
  out[o] = 0;
}

void rc_sb_xml(rc_sb *b, const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    int n = rc_utf8_len(s);
    if (n == 0) {
      rc_sb_puts(b, "\xEF\xBF\xBD");
      s++;
      continue;
    }
    if (n > 1) {
      sb_reserve(b, (size_t)n);
      if (b->oom) return;
      memcpy(b->buf + b->len, s, (size_t)n);
      b->len += (size_t)n;
      b->buf[b->len] = 0;
      s += n;
      continue;
    }
    switch (*s) {
    case '&':
      rc_sb_puts(b, "&amp;");
      break;
    case '<':
      rc_sb_puts(b, "&lt;");
      break;
    case '>':
      rc_sb_puts(b, "&gt;");
      break;
    case '"':
      rc_sb_puts(b, "&quot;");
      break;
    case '\'':
      rc_sb_puts(b, "&apos;");
      break;
    case '\n':
      rc_sb_puts(b, "&#10;");
      break; /* survives inside attributes */
    case '\t':
      rc_sb_puts(b, "&#9;");
      break;
    case '\r':
      rc_sb_puts(b, "&#13;");
      break;
    default:
      if (*s < 0x20)
        rc_sb_puts(b, "?"); /* not representable in XML 1.0 */
      else
        rc_sb_printf(b, "%c", *s);
    }
    s++;
  }
}

int rc_sb_write(const rc_sb *b, const char *path, rc_err *err) {
  if (b->oom) return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory writing %s", path);
  return rc_write_output(path, b->buf ? b->buf : "", b->len, err);
}

const char *rc_leg_status_name(const rc_leg *leg) {
  return leg->timed_out ? "timed-out" : rc_leg_state_name(leg->state);
}

const char *rc_verdict_headline(const rc_run *run) {
  if (run->interrupted) return "INTERRUPTED";
  if (!strcmp(run->verdict, "identical")) return "IDENTICAL";
  if (!strcmp(run->verdict, "resume-diverged")) return "RESUME DIVERGED";
  if (!strcmp(run->verdict, "arms-differ")) return "ARMS DIFFER";
  if (!strcmp(run->verdict, "aa-failed")) return "A/A FAILED";
  if (!strcmp(run->verdict, "not-a-prefix")) return "SAVE LEG NOT A PREFIX";
  if (!strcmp(run->verdict, "leg-failed")) return "LEG FAILED";
  if (!strcmp(run->verdict, "error")) return "ERROR";
  if (!strcmp(run->verdict, "within-noise")) return "WITHIN RUN-TO-RUN NOISE";
  if (!strcmp(run->verdict, "exceeds-noise")) return "EXCEEDS RUN-TO-RUN NOISE";
  if (!strcmp(run->verdict, "noise-inconclusive")) return "INCONCLUSIVE (NOISE)";
  return "UNKNOWN";
}

void rc_check_tally(const rc_check *c, char *buf, size_t cap) {
  if (!c->have_cmp) {
    snprintf(buf, cap, "not compared");
    return;
  }
  const char *noun = c->shards ? "shards" : "files";
  int total = c->shards ? c->shards : c->files;
  int same = c->shards ? c->shards_identical : c->files_identical;
  if (c->n_ignore)
    snprintf(buf, cap, "%d/%d %s identical outside the ignored config (/meta, manifests)", same,
             total, noun);
  else if (c->cmp.n_hashes_only)
    snprintf(buf, cap, "%d/%d %s SHA-256-identical", same, total, noun);
  else if (c->twin >= 0) /* --noise calibrated: its float values are its twin's to judge */
    snprintf(buf, cap, "%d/%d %s identical but for float values", same, total, noun);
  else
    snprintf(buf, cap, "%d/%d %s byte-identical", same, total, noun);
  /* PyTorch checkpoints (DCP, torch.save) are state by their content: their
   * files may differ by construction (DCP's .metadata ids and paths) */
  int nc = c->cmp.n_by_content;
  size_t len = strlen(buf);
  if (nc && len < cap)
    snprintf(buf + len, cap - len, "; %d/%d PyTorch checkpoint%s equal by content",
             c->cmp.n_by_content_equal, nc, nc == 1 ? "" : "s");
}

void rc_fmt_seconds(double s, char *buf, size_t cap) {
  if (s < 0)
    snprintf(buf, cap, "-");
  else if (s < 100)
    snprintf(buf, cap, "%.2f s", s);
  else if (s < 3600)
    snprintf(buf, cap, "%d min %d s", (int)(s / 60), (int)s % 60);
  else
    snprintf(buf, cap, "%d h %d min", (int)(s / 3600), ((int)s % 3600) / 60);
}
