#!/usr/bin/env bash
# run_jobs_memory.sh — `run` refuses, before any leg starts, a --jobs whose
# legs cannot fit in memory together (exit 75, naming the largest --jobs
# that fits), from what `train --dry-run-memory` reports. The available
# memory is pretended with RC_TEST_MEM_AVAILABLE (docs/robustness.md).
# Negative control: the --jobs it names does run, and so does plenty.
set -u
: "${RC_BIN:?RC_BIN is not set}"
T=$(mktemp -d /tmp/rc_jobs_memory.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
report=$("$RC_BIN" train --steps 6 --dry-run-memory) || fail "dry-run-memory failed"
per_leg=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["need_device_bytes"] + d["need_host_bytes"])' "$report")
[ "$per_leg" -gt 0 ] 2>/dev/null || fail "no per-leg need in: $report"
avail=$((per_leg * 5 / 2)) # two legs fit, three do not
RC_TEST_MEM_AVAILABLE=$avail "$RC_BIN" run --steps 6 --save-at 3 --jobs 3 --out "$T/three" --progress off >"$T/three.out" 2>&1
r=$?
[ "$r" = 75 ] || fail "--jobs 3 with room for 2: exit $r, want 75: $(tail -3 "$T/three.out")"
grep -q "use --jobs 2 or fewer" "$T/three.out" || fail "the message names no --jobs that fits: $(cat "$T/three.out")"
ls -d "$T/three"/through "$T/three"/save >/dev/null 2>&1 && fail "legs started although the run was refused"
RC_TEST_MEM_AVAILABLE=$avail "$RC_BIN" run --steps 6 --save-at 3 --jobs 2 --out "$T/two" --progress off >"$T/two.out" 2>&1
r=$?
[ "$r" = 0 ] || fail "negative control: --jobs 2 with room for 2: exit $r: $(tail -3 "$T/two.out")"
RC_TEST_MEM_AVAILABLE=$((per_leg / 2)) "$RC_BIN" run --steps 6 --save-at 3 --jobs 1 --out "$T/one" --progress off >"$T/one.out" 2>&1
r=$?
[ "$r" = 75 ] || fail "no room for one leg: exit $r, want 75"
grep -q "not even --jobs 1 fits" "$T/one.out" || fail "one leg: message: $(cat "$T/one.out")"
[ "$fails" = 0 ] && echo "ok"
exit $((fails > 0))
