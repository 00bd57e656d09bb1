#!/usr/bin/env bash
# dist_early_checks.sh — with several ranks a checkpoint's directory still
# changes after its COMPLETE marker: finalize then removes the ranks'
# manifest fragments. `run`'s state checks that start while legs run
# (rc_run_early_checks_poll) must wait for that. With
# RC_TEST_FINALIZE_DELAY_MS holding the save leg's fragments 1.5 s after
# COMPLETE (RC_TEST_FINALIZE_DELAY_LEG=save; through removes its at once),
# a W=2 run with policy resolve is still identical everywhere, and A/A@3
# still ran during the legs (a check that trusted COMPLETE alone fails here:
# a fragment only in save@3). Negative control: the hook really leaves
# COMPLETE and a fragment side by side (seen from outside while a leg
# saves), and only for the leg it names.
source "$(dirname "$0")/dist_lib.sh"
need_mpi

L=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer --progress off --world-size 2
  --first-microbatch-policy resolve)
F=("${L[@]}" --steps 6 --save-at 3)
export RC_TEST_FINALIZE_DELAY_MS=1500 RC_TEST_FINALIZE_DELAY_LEG=save
run_rc w2 "${F[@]}" --out "$T/w2"
expect_rc 0 "resolve at W=2, fragments held 1.5 s after COMPLETE" w2
contains "$T/w2.out" "A/A identical (through@3 vs save@3: 2/2 shards byte-identical"
contains "$T/w2.out" "RESUME identical (through@6 vs resume@3→6: 2/2 shards byte-identical"
json_true "$T/w2/report.json" "[c['during_legs'] for c in d['checks'] if c['name'] == 'A/A@3'] == [True]" "A/A@3 ran while legs ran"

# control: the window exists (COMPLETE and a fragment at once)
"$RC_BIN" train "${L[@]}" --steps 2 --save-at 1 --leg save --out "$T/t" >"$T/t.log" 2>&1 &
leg=$!
seen=0
for ((i = 0; i < 600 && !seen; i++)); do
  d="$T/t/ckpt/iter_0000001"
  if [ -f "$d/COMPLETE" ] && ls "$d"/shard_*_of_*.manifest.json >/dev/null 2>&1; then seen=1; fi
  sleep 0.05
done
wait "$leg" || fail "the control leg failed: $(tail -2 "$T/t.log")"
[ "$seen" = 1 ] || fail "control: never saw COMPLETE beside a fragment with the hook on"
ls "$T/t/ckpt/iter_0000001"/shard_*_of_*.manifest.json >/dev/null 2>&1 && fail "control: fragments left after finalize"
# and only for the leg named: another leg finalizes at once
"$RC_BIN" train "${L[@]}" --steps 2 --save-at 1 --leg through --out "$T/u" >"$T/u.log" 2>&1 || fail "the other leg failed"
grep -q '^save,1,' "$T/u/timing.csv" || fail "the other leg: no save row"
awk -F, '$1 == "save" && $3 >= 1.5 { exit 1 }' "$T/u/timing.csv" || fail "the other leg's save waited out the delay"
finish
