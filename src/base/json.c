/* json.c — the JSON writer and the strict reader (see json.h).
 *
 * The writer produces the canonical text of manifests and reports: the same
 * calls give the same bytes, numbers are printed with a fixed format and the
 * caller controls key order. The reader is a recursive-descent parser for
 * RFC 8259 JSON that rejects everything else (trailing commas, comments,
 * NaN, lone surrogates, control characters in strings, duplicate keys,
 * trailing garbage) with a message naming the byte offset. Nesting is
 * limited so hostile input cannot exhaust the stack. */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ writer */

#define JW_MAX_DEPTH 63 /* need_comma[] has 64 slots: depth 0..63 */

static void jw_oom(void) {
  fprintf(stderr, "rc_jw: out of memory\n");
  abort();
}

static void jw_put(rc_jw *w, const char *s, size_t n) {
  if (w->len + n + 1 > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (w->len + n + 1 > cap) cap *= 2;
    char *b = realloc(w->buf, cap);
    if (!b) jw_oom();
    w->buf = b;
    w->cap = cap;
  }
  memcpy(w->buf + w->len, s, n);
  w->len += n;
  w->buf[w->len] = 0; /* always a valid C string */
}

static void jw_puts(rc_jw *w, const char *s) {
  jw_put(w, s, strlen(s));
}

static void jw_newline(rc_jw *w) {
  if (!w->pretty) return;
  jw_put(w, "\n", 1);
  for (int i = 0; i < w->depth; i++) jw_put(w, "  ", 2);
}

/* Everything a value needs before it: nothing right after a key (the buffer
 * then ends in ':', which no complete value ends with), otherwise the comma
 * and the line break of its container. */
static void jw_begin_value(rc_jw *w) {
  if (w->len > 0 && w->buf[w->len - 1] == ':') {
    if (w->pretty) jw_put(w, " ", 1);
    return;
  }
  if (w->depth > 0) {
    if (w->need_comma[w->depth]) jw_put(w, ",", 1);
    jw_newline(w);
  }
  w->need_comma[w->depth] = true;
}

void rc_jw_init(rc_jw *w, bool pretty) {
  memset(w, 0, sizeof *w);
  w->pretty = pretty;
}

void rc_jw_free(rc_jw *w) {
  free(w->buf);
  memset(w, 0, sizeof *w);
}

static void jw_open(rc_jw *w, const char *c) {
  jw_begin_value(w);
  jw_puts(w, c);
  if (w->depth >= JW_MAX_DEPTH) {
    fprintf(stderr, "rc_jw: nesting deeper than %d\n", JW_MAX_DEPTH);
    abort();
  }
  w->depth++;
  w->need_comma[w->depth] = false;
}

static void jw_close(rc_jw *w, const char *c) {
  bool had_members = w->need_comma[w->depth];
  w->depth--;
  if (had_members) jw_newline(w);
  jw_puts(w, c);
}

void rc_jw_obj_begin(rc_jw *w) {
  jw_open(w, "{");
}
void rc_jw_obj_end(rc_jw *w) {
  jw_close(w, "}");
}
void rc_jw_arr_begin(rc_jw *w) {
  jw_open(w, "[");
}
void rc_jw_arr_end(rc_jw *w) {
  jw_close(w, "]");
}

static void jw_string(rc_jw *w, const char *s) {
  jw_put(w, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[8];
    switch (*p) {
    case '"':
      jw_put(w, "\\\"", 2);
      break;
    case '\\':
      jw_put(w, "\\\\", 2);
      break;
    case '\n':
      jw_put(w, "\\n", 2);
      break;
    case '\r':
      jw_put(w, "\\r", 2);
      break;
    case '\t':
      jw_put(w, "\\t", 2);
      break;
    case '\b':
      jw_put(w, "\\b", 2);
      break;
    case '\f':
      jw_put(w, "\\f", 2);
      break;
    default:
      if (*p < 0x20) {
        snprintf(esc, sizeof esc, "\\u%04x", *p);
        jw_put(w, esc, 6);
      } else {
        jw_put(w, (const char *)p, 1);
      }
    }
  }
  jw_put(w, "\"", 1);
}

void rc_jw_key(rc_jw *w, const char *key) {
  jw_begin_value(w);
  jw_string(w, key);
  jw_put(w, ":", 1);
}

void rc_jw_str(rc_jw *w, const char *s) {
  jw_begin_value(w);
  jw_string(w, s);
}

void rc_jw_int(rc_jw *w, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%" PRId64, v);
  jw_begin_value(w);
  jw_puts(w, b);
}

void rc_jw_uint(rc_jw *w, uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%" PRIu64, v);
  jw_begin_value(w);
  jw_puts(w, b);
}

void rc_jw_double(rc_jw *w, double v) {
  if (!isfinite(v)) {
    rc_jw_null(w);
    return;
  }
  char b[40];
  snprintf(b, sizeof b, "%.17g", v);
  jw_begin_value(w);
  jw_puts(w, b);
}

void rc_jw_bool(rc_jw *w, bool v) {
  jw_begin_value(w);
  jw_puts(w, v ? "true" : "false");
}

void rc_jw_null(rc_jw *w) {
  jw_begin_value(w);
  jw_puts(w, "null");
}

void rc_jw_raw(rc_jw *w, const char *json) {
  jw_begin_value(w);
  jw_puts(w, json);
}

void rc_jw_kv_str_or_null(rc_jw *w, const char *key, const char *s) {
  rc_jw_key(w, key);
  if (s && *s)
    rc_jw_str(w, s);
  else
    rc_jw_null(w);
}

/* A parsed value written back, keys in file order. */
void rc_jw_value(rc_jw *w, const rc_json *v) {
  switch (v->type) {
  case RC_JSON_NULL:
    rc_jw_null(w);
    break;
  case RC_JSON_BOOL:
    rc_jw_bool(w, v->boolean);
    break;
  case RC_JSON_NUM:
    if (v->is_int)
      rc_jw_int(w, v->i64);
    else
      rc_jw_double(w, v->num);
    break;
  case RC_JSON_STR:
    rc_jw_str(w, v->str);
    break;
  case RC_JSON_ARR:
    rc_jw_arr_begin(w);
    for (int i = 0; i < v->nkids; i++) rc_jw_value(w, &v->kids[i]);
    rc_jw_arr_end(w);
    break;
  case RC_JSON_OBJ:
    rc_jw_obj_begin(w);
    for (int i = 0; i < v->nkids; i++) {
      rc_jw_key(w, v->kids[i].key);
      rc_jw_value(w, &v->kids[i]);
    }
    rc_jw_obj_end(w);
    break;
  }
}

/* ------------------------------------------------------------------ reader */

#define JSON_MAX_DEPTH 64
#define JSON_MAX_NUMBER 512 /* longest number literal accepted */

typedef struct {
  const char *s;
  size_t n, pos;
  int depth;
  char *errbuf;
  size_t errcap;
  bool failed;
} parser;

__attribute__((format(printf, 2, 3))) static void perr(parser *p, const char *fmt, ...) {
  if (p->failed) return; /* keep the first, innermost reason */
  p->failed = true;
  if (!p->errbuf || p->errcap == 0) return;
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(p->errbuf, p->errcap, "json: %s at offset %zu", what, p->pos);
}

static void skip_ws(parser *p) {
  while (p->pos < p->n) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static void free_node(rc_json *j) {
  free(j->str);
  free(j->key);
  for (int i = 0; i < j->nkids; i++) free_node(&j->kids[i]);
  free(j->kids);
}

void rc_json_free(rc_json *j) {
  if (!j) return;
  free_node(j);
  free(j);
}

static bool parse_value(parser *p, rc_json *out);

static bool literal(parser *p, const char *word) {
  size_t n = strlen(word);
  if (p->n - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) {
    perr(p, "invalid literal (expected '%s')", word);
    return false;
  }
  p->pos += n;
  return true;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Four hex digits after "\u"; -1 on error. */
static long read_u4(parser *p) {
  if (p->n - p->pos < 4) {
    perr(p, "truncated \\u escape");
    return -1;
  }
  long v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(p->s[p->pos + (size_t)i]);
    if (h < 0) {
      perr(p, "bad hex digit in \\u escape");
      return -1;
    }
    v = v * 16 + h;
  }
  p->pos += 4;
  return v;
}

static size_t put_utf8(char *o, unsigned long cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Parses a string starting at the opening quote into a malloc'd C string.
 * Escapes never grow the text (\uXXXX is 6 bytes for at most 3 of UTF-8, a
 * surrogate pair 12 for 4), so the raw span bounds the output size. */
/* \uXXXX (p->pos just after the 'u'), with a surrogate pair joined:
 * the code point, or -1 after perr. */
static long parse_u_escape(parser *p) {
  long cp = read_u4(p);
  if (cp < 0) return -1;
  if (cp >= 0xDC00 && cp <= 0xDFFF) {
    perr(p, "lone low surrogate \\u%04lX", cp);
    return -1;
  }
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (p->n - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
      perr(p, "high surrogate \\u%04lX not followed by a low surrogate", cp);
      return -1;
    }
    p->pos += 2;
    long lo = read_u4(p);
    if (lo < 0) return -1;
    if (lo < 0xDC00 || lo > 0xDFFF) {
      perr(p, "high surrogate \\u%04lX followed by \\u%04lX, not a low surrogate", cp, lo);
      return -1;
    }
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
  }
  if (cp == 0) {
    perr(p, "\\u0000 is not supported (strings are C strings)");
    return -1;
  }
  return cp;
}

/* One escape (p->pos at the backslash), its bytes appended at out + *o.
 * False after perr. */
static bool parse_escape(parser *p, char *out, size_t *o) {
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  char e = p->s[p->pos + 1];
  p->pos += 2;
  const char *hit = e ? strchr(from, e) : NULL;
  if (hit) {
    out[(*o)++] = to[hit - from];
    return true;
  }
  if (e == 'u') {
    long cp = parse_u_escape(p);
    if (cp < 0) return false;
    *o += put_utf8(out + *o, (unsigned long)cp);
    return true;
  }
  p->pos -= 1;
  perr(p, "invalid escape '\\%c'", (e >= 0x20 && e < 0x7f) ? e : '?');
  return false;
}

static char *parse_string(parser *p) {
  p->pos++; /* opening quote */
  size_t start = p->pos, end = start;
  while (end < p->n && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
  if (end >= p->n) {
    perr(p, "unterminated string");
    return NULL;
  }
  char *out = malloc(end - start + 1);
  if (!out) {
    perr(p, "out of memory");
    return NULL;
  }
  size_t o = 0;
  while (p->pos < end) {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c < 0x20) {
      perr(p, "control character 0x%02x in string", c);
      goto fail;
    }
    if (c != '\\') {
      out[o++] = (char)c;
      p->pos++;
      continue;
    }
    if (!parse_escape(p, out, &o)) goto fail;
    if (p->pos > end) { /* an escape ran past the closing quote we found */
      perr(p, "unterminated string");
      goto fail;
    }
  }
  out[o] = 0;
  p->pos = end + 1;
  return out;
fail:
  free(out);
  return NULL;
}

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

static bool parse_number(parser *p, rc_json *out) {
  size_t start = p->pos, i = p->pos;
  bool integral = true;
  if (i < p->n && p->s[i] == '-') i++;
  if (i >= p->n || !is_digit(p->s[i])) {
    p->pos = i;
    perr(p, "invalid number");
    return false;
  }
  if (p->s[i] == '0') {
    i++;
    if (i < p->n && is_digit(p->s[i])) {
      p->pos = i;
      perr(p, "leading zero in number");
      return false;
    }
  } else {
    while (i < p->n && is_digit(p->s[i])) i++;
  }
  if (i < p->n && p->s[i] == '.') {
    integral = false;
    i++;
    if (i >= p->n || !is_digit(p->s[i])) {
      p->pos = i;
      perr(p, "expected digits after '.'");
      return false;
    }
    while (i < p->n && is_digit(p->s[i])) i++;
  }
  if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
    integral = false;
    i++;
    if (i < p->n && (p->s[i] == '+' || p->s[i] == '-')) i++;
    if (i >= p->n || !is_digit(p->s[i])) {
      p->pos = i;
      perr(p, "expected digits in exponent");
      return false;
    }
    while (i < p->n && is_digit(p->s[i])) i++;
  }
  size_t len = i - start;
  if (len >= JSON_MAX_NUMBER) {
    perr(p, "number literal longer than %d characters", JSON_MAX_NUMBER - 1);
    return false;
  }
  char buf[JSON_MAX_NUMBER];
  memcpy(buf, p->s + start, len);
  buf[len] = 0;
  out->type = RC_JSON_NUM;
  out->num = strtod(buf, NULL); /* overflow gives +-HUGE_VAL, accepted as a double */
  if (integral) {
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno == 0) {
      out->is_int = true;
      out->i64 = (int64_t)v;
    }
  }
  p->pos = i;
  return true;
}

static bool push_kid(parser *p, rc_json *parent, int *cap) {
  if (parent->nkids == *cap) {
    int ncap = *cap ? 2 * *cap : 4;
    rc_json *k = realloc(parent->kids, (size_t)ncap * sizeof *k);
    if (!k) {
      perr(p, "out of memory");
      return false;
    }
    parent->kids = k;
    *cap = ncap;
  }
  memset(&parent->kids[parent->nkids], 0, sizeof(rc_json));
  parent->nkids++;
  return true;
}

static int cmp_key(const void *a, const void *b) {
  return strcmp((*(const rc_json *const *)a)->key, (*(const rc_json *const *)b)->key);
}

/* Duplicate keys make "the value of key k" ambiguous; sorting pointers keeps
 * the check O(n log n) on hostile input. */
static bool check_duplicates(parser *p, const rc_json *obj) {
  if (obj->nkids < 2) return true;
  const rc_json **v = malloc((size_t)obj->nkids * sizeof *v);
  if (!v) {
    perr(p, "out of memory");
    return false;
  }
  for (int i = 0; i < obj->nkids; i++) v[i] = &obj->kids[i];
  qsort(v, (size_t)obj->nkids, sizeof *v, cmp_key);
  bool ok = true;
  for (int i = 1; i < obj->nkids && ok; i++)
    if (!strcmp(v[i - 1]->key, v[i]->key)) {
      perr(p, "duplicate key \"%.100s\" in object", v[i]->key);
      ok = false;
    }
  free(v);
  return ok;
}

static bool parse_container(parser *p, rc_json *out, bool is_obj) {
  if (++p->depth > JSON_MAX_DEPTH) {
    perr(p, "nesting deeper than %d", JSON_MAX_DEPTH);
    return false;
  }
  out->type = is_obj ? RC_JSON_OBJ : RC_JSON_ARR;
  char close = is_obj ? '}' : ']';
  int cap = 0;
  p->pos++; /* '{' or '[' */
  skip_ws(p);
  if (p->pos < p->n && p->s[p->pos] == close) {
    p->pos++;
    p->depth--;
    return true;
  }
  for (;;) {
    skip_ws(p);
    if (!push_kid(p, out, &cap)) return false;
    rc_json *kid = &out->kids[out->nkids - 1];
    if (is_obj) {
      if (p->pos >= p->n || p->s[p->pos] != '"') {
        perr(p, p->pos >= p->n ? "unexpected end of input (expected a key)" : "expected a key");
        return false;
      }
      kid->key = parse_string(p);
      if (!kid->key) return false;
      skip_ws(p);
      if (p->pos >= p->n || p->s[p->pos] != ':') {
        perr(p, "expected ':' after key");
        return false;
      }
      p->pos++;
      skip_ws(p);
    }
    if (!parse_value(p, kid)) return false;
    skip_ws(p);
    if (p->pos >= p->n) {
      perr(p, "unexpected end of input (expected ',' or '%c')", close);
      return false;
    }
    char c = p->s[p->pos];
    if (c == ',') {
      p->pos++;
      continue;
    }
    if (c == close) {
      p->pos++;
      break;
    }
    perr(p, "expected ',' or '%c'", close);
    return false;
  }
  p->depth--;
  return is_obj ? check_duplicates(p, out) : true;
}

static bool parse_value(parser *p, rc_json *out) {
  skip_ws(p);
  if (p->pos >= p->n) {
    perr(p, "unexpected end of input (expected a value)");
    return false;
  }
  char c = p->s[p->pos];
  switch (c) {
  case '{':
    return parse_container(p, out, true);
  case '[':
    return parse_container(p, out, false);
  case '"':
    out->type = RC_JSON_STR;
    out->str = parse_string(p);
    return out->str != NULL;
  case 't':
    out->type = RC_JSON_BOOL;
    out->boolean = true;
    return literal(p, "true");
  case 'f':
    out->type = RC_JSON_BOOL;
    return literal(p, "false");
  case 'n':
    out->type = RC_JSON_NULL;
    return literal(p, "null");
  default:
    if (c == '-' || is_digit(c)) return parse_number(p, out);
    if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
      perr(p, "unexpected character '%c'", c);
    else
      perr(p, "unexpected byte 0x%02x", (unsigned char)c);
    return false;
  }
}

rc_json *rc_json_parse(const char *text, size_t n, char *errbuf, size_t errcap) {
  if (errbuf && errcap) errbuf[0] = 0;
  parser p = {.s = text, .n = n, .errbuf = errbuf, .errcap = errcap};
  rc_json *root = calloc(1, sizeof *root);
  if (!root) {
    perr(&p, "out of memory");
    return NULL;
  }
  if (!text) {
    perr(&p, "no input");
    free(root);
    return NULL;
  }
  bool ok = parse_value(&p, root);
  if (ok) {
    skip_ws(&p);
    if (p.pos != p.n) {
      perr(&p, "trailing characters after the JSON value");
      ok = false;
    }
  }
  if (!ok) {
    rc_json_free(root);
    return NULL;
  }
  return root;
}

const rc_json *rc_json_get(const rc_json *obj, const char *key) {
  if (!obj || obj->type != RC_JSON_OBJ) return NULL;
  for (int i = 0; i < obj->nkids; i++)
    if (!strcmp(obj->kids[i].key, key)) return &obj->kids[i];
  return NULL;
}

const char *rc_json_get_str(const rc_json *obj, const char *key) {
  const rc_json *v = rc_json_get(obj, key);
  return v && v->type == RC_JSON_STR ? v->str : NULL;
}

bool rc_json_get_i64(const rc_json *obj, const char *key, int64_t *out) {
  const rc_json *v = rc_json_get(obj, key);
  if (!v || v->type != RC_JSON_NUM || !v->is_int) return false;
  *out = v->i64;
  return true;
}
