#!/usr/bin/env bash
# ci_heartbeat.sh — heartbeat lines in non-terminal logs (docs/ci.md): with
# stderr a file, each running leg prints
#   resumecheck run: [LEG] step S/N (P%), T s, loss L
# at every tenth of its steps, and after RC_HEARTBEAT_S seconds (default 60)
# without one. Driven by the fake trainer at 0.2 s a step (10 steps a leg):
#   - tenths: the through leg's lines name increasing steps of 10, P is the
#     leg's share of its steps, L is the loss of step S in its trace.csv;
#   - time: RC_HEARTBEAT_S=0.05 repeats a leg's line while one step lasts
#     (the same step twice); control: at the default 60 s no step repeats;
#   - controls: --progress live (the terminal display) and --progress off
#     print no heartbeat line.
. "$(dirname "$0")/run_lib.sh"
cd "$T" || exit 1
unset RC_HEARTBEAT_S
slow() { # NAME [run flags...]
  local name=$1
  shift
  run_rc "$name" --trainer exec --train-cmd "$(tmpl --bug slow)" --steps 10 --save-at 5 \
    --out "$T/$name" "$@"
  expect_rc 0 "$name" "$name"
}
beats() { grep -E '^resumecheck run: \[[^]]+\] step [0-9]+/10 \([0-9]+%\), [0-9.]+ s(, loss [-0-9.]+)?$' "$T/$1.err"; }

slow plain
beats plain | grep -F '[through]' >"$T/through.beats"
[ "$(wc -l <"$T/through.beats")" -ge 3 ] || fail "fewer than 3 heartbeat lines for through: $(cat "$T/plain.err")"
beats plain | grep -qF '[resume@5]' || fail "no heartbeat line for resume@5"
prev=0
while read -r line; do
  s=$(echo "$line" | sed -E 's/.* step ([0-9]+)\/10 \(([0-9]+)%\).*/\1 \2/')
  step=${s% *} pct=${s#* }
  [ "$step" -gt "$prev" ] || fail "through: step $step after $prev (tenths repeat or go back)"
  [ "$pct" = $((step * 10)) ] || fail "through: step $step shown as $pct%"
  want=$(awk -F, -v s="$step" 'NR > 1 && $1 == s { printf "%.4f", $2 }' "$T/plain/through/trace.csv")
  case "$line" in *", loss $want") ;; *) fail "through step $step: '$line', loss in trace $want" ;; esac
  prev=$step
done <"$T/through.beats"
# control: at the default interval no line repeats a step
dup() { beats "$1" | sed -E 's/\), [0-9.]+ s.*//' | sort | uniq -d; }
[ -z "$(dup plain)" ] || fail "a step repeated without RC_HEARTBEAT_S: $(dup plain)"

RC_HEARTBEAT_S=0.05 slow timed
[ -n "$(dup timed)" ] || fail "RC_HEARTBEAT_S=0.05: no line repeated while a 0.2 s step ran"

slow live --progress live
[ -z "$(beats live)" ] || fail "--progress live printed heartbeat lines"
grep -q $'\033\[' "$T/live.err" || fail "--progress live did not draw its block (control is blind)"
slow off --progress off
[ ! -s "$T/off.err" ] || fail "--progress off printed: $(head -3 "$T/off.err")"

[ "$fails" = 0 ] && echo "ci_heartbeat: all checks passed"
exit $((fails > 0))
