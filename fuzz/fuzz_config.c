/* fuzz_config.c — libFuzzer target: rc_config_parse (src/core/config.c) on
 * argument vectors made from the input (one argument per line), then
 * validation and the canonical config. Every flag of `train` and `run`
 * passes through here, and the canonical text goes into every shard. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  enum { MAX_ARGS = 64 };
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  argv[argc++] = "train";
  for (char *p = text; argc < MAX_ARGS + 1;) {
    argv[argc++] = p;
    char *nl = memchr(p, '\n', (size_t)(text + size - p));
    if (!nl) break;
    *nl = 0;
    p = nl + 1;
  }
  argv[argc] = NULL;
  rc_config cfg;
  rc_leg_opts leg;
  rc_config_defaults(&cfg, &leg);
  rc_err err = {0};
  if (rc_config_parse(argc, argv, &cfg, &leg, &err) == 0 && rc_config_validate(&cfg, &err) == 0) {
    char *canon = rc_config_canonical(&cfg);
    free(canon);
  }
  free(text);
  return 0;
}
