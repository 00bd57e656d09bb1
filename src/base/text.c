/* text.c — text for a terminal and for XML: the length of a UTF-8
 * sequence, and control characters escaped. Reports and the census both
 * print values a trainer wrote (a census value, a flag, a log line), which
 * may hold ESC or invalid UTF-8; one function escapes them for all. */
#include "base/text.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int rc_utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  int n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07;
  else
    return 0;
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (cp == 0xFFFE || cp == 0xFFFF) return 0; /* not XML characters */
  return n;
}

void rc_text_escape(const char *in, char *out, size_t cap) {
  if (!cap) return;
  const unsigned char *s = (const unsigned char *)in;
  size_t o = 0;
  while (*s) {
    int n = rc_utf8_len(s);
    char esc[8] = "";
    if (n == 0 || (n == 1 && ((*s < 0x20 && *s != '\t') || *s == 0x7f)))
      snprintf(esc, sizeof esc, "\\x%02x", *s);
    else if (n == 2 && s[0] == 0xC2 && s[1] < 0xA0) /* C1: U+0080..U+009F */
      snprintf(esc, sizeof esc, "\\u%04x", s[1]);
    if (esc[0]) {
      size_t k = strlen(esc);
      if (o + k + 1 > cap) break;
      memcpy(out + o, esc, k);
      o += k;
      s += n ? n : 1;
    } else {
      if (o + (size_t)n + 1 > cap) break;
      memcpy(out + o, s, (size_t)n);
      o += (size_t)n;
      s += n;
    }
  }
  out[o] = 0;
}

void rc_text_differ_phrase(const char *list, char *buf, size_t cap) {
  if (!cap) return;
  size_t len = 0;
  buf[0] = 0;
  for (const char *p = list; *p && len + 3 < cap; p++) {
    if (*p == ',') {
      buf[len++] = ',';
      buf[len++] = ' ';
    } else {
      buf[len++] = *p;
    }
  }
  buf[len] = 0;
  snprintf(buf + len, cap - len, " %s", strchr(list, ',') ? "differ" : "differs");
}
