/* json.h — a small JSON writer and a strict reader for the files this tool
 * writes itself (manifests, reports, configs). Not a general-purpose library:
 * numbers are read as double (and as int64 when integral), strings are UTF-8
 * passed through, depth is limited, and any malformed input is an error, never
 * a crash (the reader is a fuzz target). */
#ifndef RC_BASE_JSON_H
#define RC_BASE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- writer: appends to a growing buffer, pretty-prints with 2 spaces,
 * inserts commas itself. Keys are written in the order given: callers that
 * need canonical output write keys sorted. */
typedef struct {
  char *buf;
  size_t len, cap;
  int depth;
  bool need_comma[64];
  bool pretty;
} rc_jw;

void rc_jw_init(rc_jw *w, bool pretty);
void rc_jw_free(rc_jw *w);
void rc_jw_obj_begin(rc_jw *w);
void rc_jw_obj_end(rc_jw *w);
void rc_jw_arr_begin(rc_jw *w);
void rc_jw_arr_end(rc_jw *w);
void rc_jw_key(rc_jw *w, const char *key); /* next value belongs to this key */
void rc_jw_str(rc_jw *w, const char *s);   /* escaped */
void rc_jw_int(rc_jw *w, int64_t v);
void rc_jw_uint(rc_jw *w, uint64_t v);
void rc_jw_double(rc_jw *w, double v); /* %.17g; non-finite written as null */
void rc_jw_bool(rc_jw *w, bool v);
void rc_jw_null(rc_jw *w);
void rc_jw_raw(rc_jw *w, const char *json); /* an already-serialised value */
/* key, then the string, or null when s is NULL or "" (reports: "not known") */
void rc_jw_kv_str_or_null(rc_jw *w, const char *key, const char *s);
struct rc_json;
void rc_jw_value(rc_jw *w, const struct rc_json *v); /* a parsed value, keys in file order */

/* ---- reader ---- */
typedef enum {
  RC_JSON_NULL,
  RC_JSON_BOOL,
  RC_JSON_NUM,
  RC_JSON_STR,
  RC_JSON_ARR,
  RC_JSON_OBJ
} rc_json_type;

typedef struct rc_json {
  rc_json_type type;
  bool boolean;
  double num;
  bool is_int; /* the literal was an integer that fits int64 */
  int64_t i64;
  char *str;            /* RC_JSON_STR */
  char *key;            /* set for members of an object */
  struct rc_json *kids; /* array elements / object members, in file order */
  int nkids;
} rc_json;

/* Parses text[0..n). Returns NULL and writes a message with the byte offset
 * into errbuf on malformed input. */
rc_json *rc_json_parse(const char *text, size_t n, char *errbuf, size_t errcap);
void rc_json_free(rc_json *j);
const rc_json *rc_json_get(const rc_json *obj,
                           const char *key); /* NULL if absent / not an object */
const char *rc_json_get_str(const rc_json *obj, const char *key); /* NULL unless a string */
bool rc_json_get_i64(const rc_json *obj, const char *key, int64_t *out);

#endif
