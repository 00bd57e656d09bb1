#!/usr/bin/env bash
# nvml_probe.sh — `train --dry-run-memory --device cuda` reads the GPU's
# free memory through NVML when NVML can name the device
# (backend/nvml_probe.c), without a CUDA context; a stand-in
# libnvidia-ml.so.1 built here (on LD_LIBRARY_PATH) plays the driver, so
# no GPU is needed. Asserted: one GPU: source "nvml", its free bytes; two
# GPUs under CUDA_DEVICE_ORDER=PCI_BUS_ID and CUDA_VISIBLE_DEVICES=1:
# index 1 asked for; a UUID in CUDA_VISIBLE_DEVICES: looked up by UUID;
# `run` refuses a --jobs that does not fit the NVML figure (75) before
# any leg starts. Negative controls: two GPUs in CUDA's default order
# (ambiguous) and no NVML at all fall back to CUDA itself, which here
# (no GPU) is 125 as before. Needs the CUDA module (its libraries must
# open): skipped without it.
source "$(dirname "$0")/run_lib.sh"
need_train
MOD="$(dirname "$RC_BIN")/libresumecheck_cuda.so"
[ -n "${RC_CUDA_MODULE:-}" ] && MOD=$RC_CUDA_MODULE
[ -f "$MOD" ] || {
  echo "skip: no CUDA module beside $RC_BIN (a build without CUDA)"
  exit 77
}
CC=${CC:-cc}
command -v "$CC" >/dev/null || {
  echo "skip: no C compiler to build the stand-in NVML"
  exit 77
}
mkdir -p "$T/nvml"
cat >"$T/nvml/fake.c" <<'EOF'
/* a stand-in for the six NVML entry points the probe uses */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef struct { unsigned long long total, free, used; } mem_t;
static int idx = -1;
static void note(const char *what, const char *v) {
  const char *p = getenv("FAKE_NVML_LOG");
  FILE *f = p ? fopen(p, "a") : NULL;
  if (f) fprintf(f, "%s %s\n", what, v), fclose(f);
}
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) {
  *n = (unsigned)atoi(getenv("FAKE_NVML_COUNT") ? getenv("FAKE_NVML_COUNT") : "1");
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) {
  char b[16];
  snprintf(b, sizeof b, "%u", i);
  note("index", b);
  idx = (int)i;
  *d = &idx;
  return 0;
}
int nvmlDeviceGetHandleByUUID(const char *u, void **d) {
  note("uuid", u);
  idx = 7;
  *d = &idx;
  return strncmp(u, "GPU-", 4) ? 13 : 0;
}
int nvmlDeviceGetMemoryInfo(void *d, mem_t *m) {
  int i = *(int *)d;
  m->total = 80ull << 30;
  m->free = strtoull(getenv("FAKE_NVML_FREE") ? getenv("FAKE_NVML_FREE") : "1000", NULL, 10) + (unsigned long long)i;
  m->used = m->total - m->free;
  return 0;
}
EOF
"$CC" -shared -fPIC -o "$T/nvml/libnvidia-ml.so.1" "$T/nvml/fake.c" || fail "building the stand-in NVML"
LOG="$T/nvml.log"
TR=(train --preset tiny --steps 2 --device cuda --dry-run-memory)
# probe NAME [VAR=VALUE...]: the dry-run-memory JSON in $T/NAME.json, exit in $T/NAME.rc
probe() {
  local name=$1
  shift
  : >"$LOG"
  env -u CUDA_VISIBLE_DEVICES -u CUDA_DEVICE_ORDER LD_LIBRARY_PATH="$T/nvml:${LD_LIBRARY_PATH:-}" \
    FAKE_NVML_LOG="$LOG" RC_CUDA_MODULE="$MOD" "$@" "$RC_BIN" "${TR[@]}" >"$T/$name.json" 2>"$T/$name.err"
  echo $? >"$T/$name.rc"
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$T/$1.json" "$2"; }

probe one FAKE_NVML_COUNT=1 FAKE_NVML_FREE=123456789
[ "$(cat "$T/one.rc")" = 0 ] || fail "one GPU: exit $(cat "$T/one.rc"): $(cat "$T/one.err")"
[ "$(field one device)" = cuda ] || fail "one GPU: device $(field one device)"
[ "$(field one device_free_source)" = nvml ] || fail "one GPU: source $(field one device_free_source)"
[ "$(field one device_free_bytes)" = 123456789 ] || fail "one GPU: free $(field one device_free_bytes)"
contains "$LOG" "index 0"

probe pci FAKE_NVML_COUNT=2 FAKE_NVML_FREE=5000 CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1,0
[ "$(cat "$T/pci.rc")" = 0 ] || fail "PCI order: exit $(cat "$T/pci.rc")"
contains "$LOG" "index 1"
[ "$(field pci device_free_bytes)" = 5001 ] || fail "PCI order: free of device 1 expected (5001), got $(field pci device_free_bytes)"

probe uuid FAKE_NVML_COUNT=4 CUDA_VISIBLE_DEVICES=GPU-0a1b2c3d-aaaa-bbbb-cccc-000000000001
[ "$(cat "$T/uuid.rc")" = 0 ] || fail "UUID: exit $(cat "$T/uuid.rc")"
contains "$LOG" "uuid GPU-0a1b2c3d-aaaa-bbbb-cccc-000000000001"
[ "$(field uuid device_free_source)" = nvml ] || fail "UUID: source $(field uuid device_free_source)"

# negative controls: ambiguous (two GPUs, CUDA's default order) and no
# NVML at all: CUDA itself is asked, and this machine has no usable GPU
if ! nvidia-smi -L >/dev/null 2>&1; then
  probe ambiguous FAKE_NVML_COUNT=2
  [ "$(cat "$T/ambiguous.rc")" = 125 ] || fail "two GPUs, default order: exit $(cat "$T/ambiguous.rc"), want 125 (CUDA asked)"
  lacks "$LOG" "index"
  : >"$LOG"
  env -u CUDA_VISIBLE_DEVICES RC_CUDA_MODULE="$MOD" LD_LIBRARY_PATH="$T/none" "$RC_BIN" "${TR[@]}" \
    >"$T/none.json" 2>"$T/none.err"
  rc=$?
  [ "$rc" = 125 ] || fail "no NVML: exit $rc, want 125"
  contains "$T/none.err" "--device cuda:"
fi

# run: the NVML figure decides --jobs before any leg starts
env -u CUDA_VISIBLE_DEVICES LD_LIBRARY_PATH="$T/nvml:${LD_LIBRARY_PATH:-}" FAKE_NVML_COUNT=1 \
  FAKE_NVML_FREE=1000 RC_CUDA_MODULE="$MOD" "$RC_BIN" run --preset tiny --device cuda --steps 4 \
  --save-at 2 --jobs 3 --out "$T/run" --progress off >"$T/run.out" 2>"$T/run.err"
rc=$?
[ "$rc" = 75 ] || fail "run with 1000 bytes free (NVML): exit $rc, want 75"
contains "$T/run.err" "device memory"
[ -e "$T/run/through" ] && fail "run started a leg although the legs cannot fit"
finish
