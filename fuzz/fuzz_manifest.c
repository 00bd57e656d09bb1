/* fuzz_manifest.c — libFuzzer target: the manifest and fragment parsers
 * (src/io/manifest.c) on any bytes. They decide which file the loader opens
 * and how many bytes it reads, so they must reject anything malformed. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/checkpoint_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rc_err err = {0};
  rc_manifest m = {0};
  if (rc_manifest_parse((const char *)data, size, "fuzz", &m, &err) == 0) {
    /* a manifest that parses must print back and parse again */
    size_t len = 0;
    char *text = rc_manifest_text(&m, &len);
    rc_manifest again = {0};
    if (rc_manifest_parse(text, len, "fuzz(2)", &again, &err) != 0) __builtin_trap();
    rc_manifest_free(&again);
    free(text);
  }
  rc_manifest_free(&m);
  int64_t it;
  int ws;
  bool hashes_only;
  rc_mf_shard s = {0};
  rc_fragment_parse((const char *)data, size, "fuzz", &it, &ws, &hashes_only, &s, &err);
  rc_mf_shard_free(&s);
  return 0;
}
