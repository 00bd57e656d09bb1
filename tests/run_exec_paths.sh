#!/usr/bin/env bash
# run_exec_paths.sh — paths never pass through a shell: an output directory
# and a trainer path with spaces, quotes, "$(...)", backticks and ';' work,
# and nothing in them is executed (no "pwned" file appears anywhere).
source "$(dirname "$0")/run_lib.sh"

mkdir -p "$T/cwd"
cd "$T/cwd" || exit 1
odd="$T/out dir/it's \"quoted\" \$(touch pwned) \`touch pwned2\` ; touch pwned3"
tdir="$T/trainer 'dir' \$(touch pwned4)"
mkdir -p "$tdir"
cp "$FAKE" "$tdir/fake trainer.sh"
# the template quotes the trainer path in double quotes: inside them '$' and
# backticks are plain characters, exactly as the words reach the trainer
tpl="bash \"$tdir/fake trainer.sh\" --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out}"
run_rc odd --trainer exec --train-cmd "$tpl" --steps 6 --save-at 3 --out "$odd" --progress plain
expect_rc 0 "odd paths" odd
[ -f "$odd/resume@3/ckpt/iter_0000006/COMPLETE" ] || fail "the resume leg wrote into the odd directory"
[ -f "$odd/report.json" ] || fail "report.json in the odd directory"
json_true "$odd/report.json" "d['config']['out'] == sys.argv[1].rsplit('/report.json', 1)[0]" "out path kept verbatim"
found=$(find "$T" / -xdev -maxdepth 1 -name 'pwned*' 2>/dev/null; find "$T" -name 'pwned*' 2>/dev/null)
[ -z "$found" ] || fail "something was executed: $found"

# the same with a failing trainer: the failure is still found and reported
run_rc oddf --trainer exec --train-cmd "$tpl --bug forget-momentum" --steps 6 --save-at 3 \
  --out "$odd-2" --progress off
expect_rc 1 "odd paths, resume bug" oddf
contains "$T/oddf.out" "first differing file: optim.txt"
found=$(find "$T" -name 'pwned*' 2>/dev/null)
[ -z "$found" ] || fail "something was executed: $found"
finish
