/* test_json.c — the JSON writer and strict reader (src/base/json.h).
 *
 * Round trip: what the writer produces the reader accepts, with the same
 * values, and re-serialising gives the same bytes. Rejection: every
 * malformed input (truncated, bad escapes, lone surrogates, deep nesting,
 * trailing garbage, ...) gives NULL and a message naming the offset, and
 * its well-formed twin parses (the negative control). A small
 * deterministic mutation loop checks that nothing crashes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#include "check.h"

static rc_json *parse(const char *s, char *err, size_t cap) {
  return rc_json_parse(s, strlen(s), err, cap);
}

static void build_doc(rc_jw *w) {
  rc_jw_obj_begin(w);
  rc_jw_key(w, "a_int");
  rc_jw_int(w, -9007199254740993LL);
  rc_jw_key(w, "b_uint");
  rc_jw_uint(w, 18446744073709551615ULL);
  rc_jw_key(w, "c_double");
  rc_jw_double(w, 0.1);
  rc_jw_key(w, "d_nan");
  rc_jw_double(w, 0.0 / 0.0);
  rc_jw_key(w, "e_str");
  rc_jw_str(w, "quote\" backslash\\ nl\n tab\t ctl\x01 utf8 \xc3\xa9");
  rc_jw_key(w, "f_arr");
  rc_jw_arr_begin(w);
  rc_jw_bool(w, true);
  rc_jw_bool(w, false);
  rc_jw_null(w);
  rc_jw_arr_begin(w);
  rc_jw_arr_end(w);
  rc_jw_obj_begin(w);
  rc_jw_obj_end(w);
  rc_jw_raw(w, "{\"raw\":[1,2]}");
  rc_jw_arr_end(w);
  rc_jw_key(w, "g_obj");
  rc_jw_obj_begin(w);
  rc_jw_key(w, "nested");
  rc_jw_double(w, -1.5e-300);
  rc_jw_obj_end(w);
  rc_jw_obj_end(w);
}

static void test_round_trip(void) {
  for (int pretty = 0; pretty < 2; pretty++) {
    rc_jw w;
    rc_jw_init(&w, pretty);
    build_doc(&w);
    char err[256];
    rc_json *j = rc_json_parse(w.buf, w.len, err, sizeof err);
    CHECK(j, "round trip (pretty=%d) does not parse: %s\n%s", pretty, err, w.buf);
    if (!j) {
      rc_jw_free(&w);
      continue;
    }
    int64_t i;
    CHECK(rc_json_get_i64(j, "a_int", &i) && i == -9007199254740993LL, "a_int");
    const rc_json *b = rc_json_get(j, "b_uint");
    CHECK(b && b->type == RC_JSON_NUM && !b->is_int && b->num == 18446744073709551615.0,
          "b_uint beyond int64 is a double, not an int");
    const rc_json *c = rc_json_get(j, "c_double");
    CHECK(c && !c->is_int && c->num == 0.1, "0.1 survives %%.17g exactly");
    CHECK(rc_json_get(j, "d_nan") && rc_json_get(j, "d_nan")->type == RC_JSON_NULL,
          "NaN written as null");
    CHECK(!strcmp(rc_json_get_str(j, "e_str"),
                  "quote\" backslash\\ nl\n tab\t ctl\x01 utf8 \xc3\xa9"),
          "escaped string round trip");
    const rc_json *arr = rc_json_get(j, "f_arr");
    CHECK(arr && arr->type == RC_JSON_ARR && arr->nkids == 6, "array length");
    if (arr && arr->nkids == 6) {
      CHECK(arr->kids[0].type == RC_JSON_BOOL && arr->kids[0].boolean, "true");
      CHECK(arr->kids[3].type == RC_JSON_ARR && arr->kids[3].nkids == 0, "empty array");
      CHECK(arr->kids[4].type == RC_JSON_OBJ && arr->kids[4].nkids == 0, "empty object");
      CHECK(rc_json_get(&arr->kids[5], "raw") != NULL, "raw value embedded");
    }
    const rc_json *g = rc_json_get(j, "g_obj");
    CHECK(g && rc_json_get(g, "nested") && rc_json_get(g, "nested")->num == -1.5e-300, "nested");
    CHECK(rc_json_get_str(j, "a_int") == NULL, "get_str on a number is NULL");
    CHECK(!rc_json_get_i64(j, "c_double", &i), "get_i64 on a non-integer fails");
    CHECK(rc_json_get(j, "absent") == NULL, "absent key");
    /* Re-serialising gives the same bytes (NaN already became null). */
    rc_jw w2;
    rc_jw_init(&w2, pretty);
    rc_jw_value(&w2, j);
    rc_json *j2 = rc_json_parse(w2.buf, w2.len, err, sizeof err);
    rc_jw w3;
    rc_jw_init(&w3, pretty);
    if (j2) rc_jw_value(&w3, j2);
    CHECK(j2 && w2.len == w3.len && !memcmp(w2.buf, w3.buf, w2.len), "re-serialisation stable");
    rc_json_free(j2);
    rc_jw_free(&w2);
    rc_jw_free(&w3);
    rc_json_free(j);
    rc_jw_free(&w);
  }
  /* The exact pretty layout manifests rely on. */
  rc_jw w;
  rc_jw_init(&w, true);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "a");
  rc_jw_arr_begin(&w);
  rc_jw_int(&w, 1);
  rc_jw_int(&w, 2);
  rc_jw_arr_end(&w);
  rc_jw_key(&w, "b");
  rc_jw_obj_begin(&w);
  rc_jw_obj_end(&w);
  rc_jw_obj_end(&w);
  const char *want = "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}";
  CHECK(!strcmp(w.buf, want), "pretty layout:\n%s\nwanted\n%s", w.buf, want);
  rc_jw_free(&w);
  rc_jw_init(&w, false);
  rc_jw_obj_begin(&w);
  rc_jw_key(&w, "a");
  rc_jw_arr_begin(&w);
  rc_jw_int(&w, 1);
  rc_jw_str(&w, "x");
  rc_jw_arr_end(&w);
  rc_jw_obj_end(&w);
  CHECK(!strcmp(w.buf, "{\"a\":[1,\"x\"]}"), "compact layout: %s", w.buf);
  rc_jw_free(&w);
}

static void test_unicode(void) {
  char err[256];
  rc_json *j = parse("[\"\\u00e9\", \"\\ud83d\\ude00\", \"\\u20AC\", \"a\\/b\", \"\\b\\f\\r\"]",
                     err, sizeof err);
  CHECK(j && j->nkids == 5, "unicode array parses: %s", err);
  if (j && j->nkids == 5) {
    CHECK(!strcmp(j->kids[0].str, "\xc3\xa9"), "\\u00e9 -> C3 A9");
    CHECK(!strcmp(j->kids[1].str, "\xf0\x9f\x98\x80"), "surrogate pair -> F0 9F 98 80");
    CHECK(!strcmp(j->kids[2].str, "\xe2\x82\xac"), "\\u20AC (upper-case hex) -> E2 82 AC");
    CHECK(!strcmp(j->kids[3].str, "a/b"), "\\/");
    CHECK(!strcmp(j->kids[4].str, "\b\f\r"), "\\b\\f\\r");
  }
  rc_json_free(j);
}

/* Each malformed input next to a well-formed twin: the twin must parse, so
 * the rejection is about the defect and not about the surroundings. */
static void test_malformed(void) {
  static const struct {
    const char *bad, *good, *why;
  } cases[] = {
      {"", "0", "empty input"},
      {"   ", " 0 ", "only whitespace"},
      {"{", "{}", "truncated object"},
      {"{\"a\":1", "{\"a\":1}", "truncated after a member"},
      {"{\"a\":", "{\"a\":1}", "truncated after a colon"},
      {"[1,2", "[1,2]", "truncated array"},
      {"\"abc", "\"abc\"", "unterminated string"},
      {"\"abc\\", "\"abc\\\\\"", "string ending in a backslash"},
      {"[1,]", "[1]", "trailing comma in array"},
      {"{\"a\":1,}", "{\"a\":1}", "trailing comma in object"},
      {"{\"a\" 1}", "{\"a\": 1}", "missing colon"},
      {"{1:2}", "{\"1\":2}", "non-string key"},
      {"{'a':1}", "{\"a\":1}", "single quotes"},
      {"\"\\x41\"", "\"\\u0041\"", "bad escape \\x"},
      {"\"\\u12\"", "\"\\u0012\"", "short \\u escape"},
      {"\"\\u12G4\"", "\"\\u1234\"", "bad hex digit"},
      {"\"\\ud800\"", "\"\\ud800\\udc00\"", "lone high surrogate"},
      {"\"\\udc00\"", "\"\\ud800\\udc00\"", "lone low surrogate"},
      {"\"\\ud800\\u0041\"", "\"\\ud800\\udfff\"", "high surrogate + non-surrogate"},
      {"\"\\u0000\"", "\"\\u0001\"", "NUL escape"},
      {"\"a\x01z\"", "\"a\\u0001z\"", "raw control character in string"},
      {"\"a\nz\"", "\"a\\nz\"", "raw newline in string"},
      {"01", "1", "leading zero"},
      {"-", "-1", "lone minus"},
      {"1.", "1.0", "no digits after point"},
      {".5", "0.5", "no digits before point"},
      {"1e", "1e0", "no exponent digits"},
      {"1e+", "1e+1", "no exponent digits after sign"},
      {"+1", "1", "leading plus"},
      {"NaN", "null", "NaN"},
      {"Infinity", "null", "Infinity"},
      {"tru", "true", "truncated literal"},
      {"nul", "null", "truncated null"},
      {"True", "true", "capitalised literal"},
      {"[1] x", "[1] ", "trailing garbage"},
      {"{}{}", "{}", "two values"},
      {"{\"a\":1,\"a\":2}", "{\"a\":1,\"b\":2}", "duplicate key"},
      {"[1 2]", "[1, 2]", "missing comma"},
      {"/*c*/1", "1", "comment"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char err[256] = "";
    rc_json *j = parse(cases[i].bad, err, sizeof err);
    CHECK(!j, "malformed input accepted (%s): %s", cases[i].why, cases[i].bad);
    CHECK(strstr(err, "offset") != NULL, "message without offset (%s): '%s'", cases[i].why, err);
    rc_json_free(j);
    j = parse(cases[i].good, err, sizeof err);
    CHECK(j, "well-formed twin rejected (%s): %s -> %s", cases[i].why, cases[i].good, err);
    rc_json_free(j);
  }
  /* Embedded NUL inside the given length. */
  char err[256];
  rc_json *j = rc_json_parse("[1]\0", 4, err, sizeof err);
  CHECK(!j, "NUL after the value is trailing garbage");
  rc_json_free(j);
  CHECK(rc_json_parse(NULL, 0, err, sizeof err) == NULL, "NULL text");
  /* A NULL error buffer is allowed. */
  CHECK(rc_json_parse("[", 1, NULL, 0) == NULL, "NULL errbuf");
}

static void test_depth(void) {
  char buf[512], err[256];
  for (int depth = 63; depth <= 66; depth++) {
    int n = 0;
    for (int i = 0; i < depth; i++) buf[n++] = '[';
    for (int i = 0; i < depth; i++) buf[n++] = ']';
    rc_json *j = rc_json_parse(buf, (size_t)n, err, sizeof err);
    if (depth <= 64)
      CHECK(j, "nesting %d within the limit rejected: %s", depth, err);
    else
      CHECK(!j && strstr(err, "nesting"), "nesting %d beyond the limit accepted (%s)", depth, err);
    rc_json_free(j);
  }
  /* Far beyond the limit: must fail cleanly, not overflow the stack. */
  size_t big = 1000000;
  char *deep = malloc(big);
  memset(deep, '[', big);
  rc_json *j = rc_json_parse(deep, big, err, sizeof err);
  CHECK(!j && strstr(err, "nesting"), "a million '[' rejected (%s)", err);
  free(deep);
}

static void test_numbers(void) {
  char err[256];
  rc_json *j = parse("[0, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808,"
                     " 1.5, 1e3, 2E-2, 1e400]",
                     err, sizeof err);
  CHECK(j && j->nkids == 9, "numbers parse: %s", err);
  if (j && j->nkids == 9) {
    CHECK(j->kids[0].is_int && j->kids[0].i64 == 0, "0");
    CHECK(j->kids[2].is_int && j->kids[2].i64 == INT64_MAX, "INT64_MAX");
    CHECK(j->kids[3].is_int && j->kids[3].i64 == INT64_MIN, "INT64_MIN");
    CHECK(!j->kids[4].is_int, "INT64_MAX+1 is not an int64");
    CHECK(!j->kids[5].is_int && j->kids[5].num == 1.5, "1.5");
    CHECK(!j->kids[6].is_int && j->kids[6].num == 1000, "1e3 is a double");
    CHECK(j->kids[7].num == 0.02, "2E-2");
  }
  rc_json_free(j);
}

/* Every strict prefix of an object is invalid; the whole is valid. Then
 * deterministic byte mutations: any result is fine except a crash (run
 * under ASan/valgrind to make that check sharp). */
static void test_truncation_and_mutation(void) {
  rc_jw w;
  rc_jw_init(&w, true);
  build_doc(&w);
  char err[256];
  int accepted = 0;
  for (size_t n = 0; n < w.len; n++) {
    rc_json *j = rc_json_parse(w.buf, n, err, sizeof err);
    if (j) accepted++;
    rc_json_free(j);
  }
  CHECK(accepted == 0, "%d strict prefixes of an object were accepted", accepted);
  rc_json *whole = rc_json_parse(w.buf, w.len, err, sizeof err);
  CHECK(whole, "the whole document parses: %s", err);
  rc_json_free(whole);
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  char *m = malloc(w.len);
  static const char alphabet[] = "{}[]\",:\\u0123456789abcdefEe+-.tfn \n\x01\x80\xff";
  for (int iter = 0; iter < 20000; iter++) {
    memcpy(m, w.buf, w.len);
    for (int k = 0; k < 3; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      m[x % w.len] = alphabet[(x >> 32) % (sizeof alphabet - 1)];
    }
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t n = (size_t)(x % (w.len + 1));
    rc_json *j = rc_json_parse(m, n, err, sizeof err);
    rc_json_free(j);
  }
  free(m);
  rc_jw_free(&w);
}

int main(void) {
  test_round_trip();
  test_unicode();
  test_malformed();
  test_depth();
  test_numbers();
  test_truncation_and_mutation();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("json: all checks passed\n");
  return 0;
}
