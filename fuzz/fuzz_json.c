/* fuzz_json.c — libFuzzer target: rc_json_parse (src/base/json.c) on any
 * bytes, then every accessor over the result. The parser reads every
 * manifest, fragment, config and report, so it must reject, never crash. */
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char errbuf[256];
  rc_json *j = rc_json_parse((const char *)data, size, errbuf, sizeof errbuf);
  if (j) rc_json_free(j);
  return 0;
}
