/* fuzz_manifest.c — libFuzzer target: the manifest and fragment parsers
 * (src/io/manifest.c) on any bytes. They decide which file the loader opens
 * and how many bytes it reads, so they must reject anything malformed.
 * A hashes-only entry that parses has chunk hashes and no whole-file hash:
 * what compare relies on to never take an empty hash for one. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Exactly one of the two covers the bytes: chunks (hashes-only), or the
 * whole-file hash (every other entry, chunks or not). */
static void check_entry(const rc_mf_shard *s, bool hashes_only) {
  if (hashes_only ? s->sha256[0] != 0 || s->chunk_bytes == 0 : strlen(s->sha256) != 64)
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rc_err err = {0};
  rc_manifest m = {0};
  if (rc_manifest_parse((const char *)data, size, "fuzz", &m, &err) == 0) {
    for (int r = 0; r < m.world_size; r++) check_entry(&m.shards[r], m.hashes_only);
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
  if (rc_fragment_parse((const char *)data, size, "fuzz", &it, &ws, &hashes_only, &s, &err) == 0)
    check_entry(&s, hashes_only);
  rc_mf_shard_free(&s);
  return 0;
}
