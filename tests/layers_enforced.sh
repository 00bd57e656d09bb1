#!/usr/bin/env bash
# layers_enforced.sh — the build's layer checks catch a call that goes up.
# A scratch file standing in for an io source calls the core
# (rc_model_save) and is linked, as the build's check links io, with the
# io and base objects and nothing else: the link must fail, naming the
# symbol. The same for a harness source calling the core (rc_config_parse)
# with the harness, io and base objects, and for a core source calling the
# leg above it (rc_leg_run) with the core's objects and the layers below.
# Controls: scratch files that call only their own layer or one below
# (rc_sha256_hex, rc_compare_paths, rc_config_parse) link.
#   layers_enforced.sh CC IO_AND_BASE_OBJECTS HARNESS_IO_BASE_OBJECTS LIBS LINK_FLAGS CORE_AND_BELOW_OBJECTS
# (lists separated by ':')
set -u
CC=$1
IFS=':' read -r -a low <<<"$2"
IFS=':' read -r -a harness <<<"$3"
IFS=':' read -r -a libs <<<"$4"
read -r -a extra <<<"${5:-}"
IFS=':' read -r -a core <<<"${6:?core objects}"
T=$(mktemp -d /tmp/rc_layers.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
try() { # name expect(ok|undefined:SYM) objects-var code
  local name=$1 expect=$2
  local -n objs=$3
  printf '%s\n' "$4" >"$T/$name.c"
  "$CC" -o "$T/$name" "$T/$name.c" "${objs[@]}" "${libs[@]}" "${extra[@]}" -lpthread -lm -ldl >"$T/$name.log" 2>&1
  local rc=$?
  if [ "$expect" = ok ]; then
    if [ $rc = 0 ]; then echo "ok: $name links"; else echo "FAIL: $name does not link:"; cat "$T/$name.log"; fail=1; fi
  else
    local sym=${expect#undefined:}
    if [ $rc != 0 ] && grep -q "undefined reference to \`$sym'" "$T/$name.log"; then
      echo "ok: $name fails to link (undefined $sym)"
    else
      echo "FAIL: $name: expected an undefined reference to $sym (exit $rc)"; cat "$T/$name.log"; fail=1
    fi
  fi
}
try io_calls_core undefined:rc_model_save low '
struct rc_model;
int rc_model_save(struct rc_model *m, const char *root, const char *args, void *err);
int main(void) { return rc_model_save(0, "", "", 0); }'
try io_calls_io ok low '
#include <stddef.h>
void rc_sha256_hex(const void *data, size_t n, char hex[65]);
int main(void) { char h[65]; rc_sha256_hex("", 0, h); return h[0] == 0; }'
try harness_calls_core undefined:rc_config_parse harness '
int rc_config_parse(int argc, char **argv, void *cfg, void *leg, void *err);
int main(int c, char **v) { return rc_config_parse(c, v, 0, 0, 0); }'
try harness_calls_harness ok harness '
int rc_compare_paths(const char *a, const char *b, const void *o, void *r, void *e);
int main(int c, char **v) { return c > 5 ? rc_compare_paths(v[0], v[1], 0, 0, 0) : 0; }'
try core_calls_leg undefined:rc_leg_run core '
int rc_leg_run(const void *cfg, const void *leg, const void *proc, int argc, char **argv, void *err);
int main(int c, char **v) { return rc_leg_run(0, 0, 0, c, v, 0); }'
try core_calls_core ok core '
int rc_config_parse(int argc, char **argv, void *cfg, void *leg, void *err);
int main(int c, char **v) { return c > 5 ? rc_config_parse(c, v, 0, 0, 0) : 0; }'
exit $fail
