#!/usr/bin/env bash
# run_usage.sh — usage errors exit 64 with a message, before any leg runs
# (no leg directory is created); each refused command has an accepted twin.
source "$(dirname "$0")/run_lib.sh"

good=(--trainer exec --train-cmd "$(tmpl)" --progress off)
n=0
refuse() { # WHAT ARGS...: must exit 64, say something, and start nothing
  local what=$1
  shift
  n=$((n + 1))
  run_rc "u$n" "$@"
  expect_rc 64 "$what" "u$n"
  [ -s "$T/u$n.err" ] || fail "$what: no message on stderr"
  if [ -d "$T/u$n" ] && [ -n "$(ls "$T/u$n")" ]; then fail "$what: legs were started"; fi
}

refuse "no arguments"
refuse "missing --steps" "${good[@]}" --save-at 2 --out "$T/u$((n + 1))"
refuse "missing --save-at" "${good[@]}" --steps 4 --out "$T/u$((n + 1))"
refuse "missing --out" "${good[@]}" --steps 4 --save-at 2
refuse "--steps not a number" "${good[@]}" --steps ten --save-at 2 --out "$T/u$((n + 1))"
refuse "--save-at at N" "${good[@]}" --steps 4 --save-at 4 --out "$T/u$((n + 1))"
refuse "--save-at 0" "${good[@]}" --steps 4 --save-at 0 --out "$T/u$((n + 1))"
refuse "--save-at twice the same" "${good[@]}" --steps 6 --save-at 2,2 --out "$T/u$((n + 1))"
refuse "--save-at garbage" "${good[@]}" --steps 6 --save-at 2x --out "$T/u$((n + 1))"
refuse "--jobs 0" "${good[@]}" --steps 4 --save-at 2 --jobs 0 --out "$T/u$((n + 1))"
refuse "--progress bogus" "${good[@]}" --steps 4 --save-at 2 --progress bogus --out "$T/u$((n + 1))"
refuse "a leg's own flag" "${good[@]}" --steps 4 --save-at 2 --stop-at 3 --out "$T/u$((n + 1))"
refuse "--resume-from belongs to train" "${good[@]}" --steps 4 --save-at 2 --resume-from x --out "$T/u$((n + 1))"
refuse "a flag given twice" "${good[@]}" --steps 4 --steps 5 --save-at 2 --out "$T/u$((n + 1))"
refuse "a value missing at the end" "${good[@]}" --steps 4 --save-at 2 --out
refuse "unknown --trainer" --trainer pytorch --steps 4 --save-at 2 --out "$T/u$((n + 1))"
refuse "--trainer exec without a template" --trainer exec --steps 4 --save-at 2 --out "$T/u$((n + 1))"
refuse "--train-cmd without --trainer exec" --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/u$((n + 1))"
refuse "exec with a stray flag" "${good[@]}" --preset tiny --steps 4 --save-at 2 --out "$T/u$((n + 1))"
refuse "template with a pipe" --trainer exec --train-cmd "$(tmpl) | tee x" --steps 4 --save-at 2 --out "$T/u$((n + 1))"
refuse "template with an unknown placeholder" --trainer exec --train-cmd "$(tmpl) {outdir}" --steps 4 --save-at 2 --out "$T/u$((n + 1))"
refuse "template without {out}" --trainer exec --train-cmd "bash x --load={resume_from}" --steps 4 --save-at 2 --out "$T/u$((n + 1))"
refuse "a trainer program that does not exist" --trainer exec \
  --train-cmd "/nonexistent/train --out {out} --r={resume_from}" --steps 4 --save-at 2 --out "$T/u$((n + 1))"
refuse "--confirm-arm with exec and no {fusion}" "${good[@]}" --confirm-arm --steps 4 --save-at 2 --out "$T/u$((n + 1))"
contains "$T/u4.err" "--out DIR is required"
contains "$T/u6.err" "outside 1..3"

# the accepted twins
run_rc help --help
expect_rc 0 "--help" help
contains "$T/help.out" "usage: resumecheck run"
run_rc ok "${good[@]}" --steps=4 --save-at=2 --out "$T/ok"
expect_rc 0 "--flag=value forms" ok
run_rc okf --trainer exec --train-cmd "$(tmpl) --fusion={fusion}" --confirm-arm --steps 4 --save-at 2 \
  --out "$T/okf" --progress off
expect_rc 0 "a template with {fusion} is accepted with --confirm-arm" okf

# flags the real trainer rejects are usage errors before any leg runs
if "$RC_BIN" train --steps 2 --dry-run >/dev/null 2>&1; then
  refuse "a bad core flag (train --dry-run)" --preset no-such-preset --steps 4 --save-at 2 --out "$T/u$((n + 1))"
  refuse "--confirm-arm with --grad-accum-fusion" --confirm-arm --grad-accum-fusion on --steps 4 --save-at 2 --out "$T/u$((n + 1))"
else
  echo "note: resumecheck train unavailable, core-flag checks not run"
fi
finish
