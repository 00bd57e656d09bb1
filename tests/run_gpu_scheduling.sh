#!/usr/bin/env bash
# run_gpu_scheduling.sh — `run --gpu-scheduling critical-first` on the CPU
# core (where it is not the default): every leg gets `--step-lock
# DIR/.step.lock`, save and resume legs priority high, through and aa low;
# the seed reproduces exactly as without it (legacy: the same verdict,
# first divergent step and columns, A/A identical; resolve: identical; a
# chain), every leg's trace and shards are byte-identical to the run
# without it, the run records the choice, the repro lines hold no
# --step-lock and the lock file is gone afterwards. Negative controls: the
# default on the CPU and an explicit `shared` give no leg --step-lock and
# record "shared". A bad value, critical-first with an exec trainer, and
# --step-lock given to `run` are usage errors (64). The start gate: under
# critical-first through, aa and resume wait at DIR/.start.gate until save
# has finished its first step; save never waits; with --jobs 1 (save has no
# slot while through runs) the gate opens rather than deadlock; controls:
# shared runs have no gate.
source "$(dirname "$0")/run_lib.sh"
need_train

F=(--preset tiny --precision bf16 --mtp-depths 2 --mtp-repeated-layer)
A=(--steps 10 --save-at 5 --aa --jobs 4 --progress off)
LEGS=(through save aa resume@5)

# locked DIR: the legs ran under critical-first with the right priorities
locked() {
  local leg prio
  for leg in "${LEGS[@]}"; do
    case $leg in through | aa) prio=low ;; *) prio=high ;; esac
    contains "$1/$leg/log.txt" "--step-lock $1/.step.lock, priority $prio"
    json_true "$1/report.json" "[l for l in d['legs'] if l['label'] == '$leg'][0]['step_priority'] == '$prio'" "$leg: priority $prio"
    grep -q '^step_lock_wait,,' "$1/$leg/timing.csv" || fail "$1/$leg: no step_lock_wait row"
    # the repro line (the log's first line) and the recorded command hold no lock
    head -1 "$1/$leg/log.txt" | grep -q -- '--step-lock' && fail "$1/$leg: the repro line holds --step-lock"
  done
  json_true "$1/report.json" "d['config']['gpu_scheduling'] == 'critical-first' and d['config']['step_lock'] == '$1/.step.lock'" "critical-first recorded"
  json_true "$1/report.json" "not any('--step-lock' in l['argv'] for l in d['legs'])" "no --step-lock in the legs' recorded argv"
  [ -e "$1/.step.lock" ] && fail "$1/.step.lock left behind"
  gated "$1"
}
# gated DIR: the start gate (run holds DIR/.start.gate while save sets up):
# through, aa and the pre-warmed resume@5 waited at it, save did not, and
# none of them passed it before save had finished its first step
gated() {
  local leg
  for leg in through aa resume@5; do
    grep -q '^start_gate,,' "$1/$leg/timing.csv" || fail "$1/$leg: no start_gate row"
    json_true "$1/report.json" "(lambda l, s: l['started_s'] + l['timing']['exec_s'] + l['timing']['start_gate_s'] >= s['started_s'] + s['timing']['start_to_first_step_s'] - 0.05)([l for l in d['legs'] if l['label'] == '$leg'][0], [l for l in d['legs'] if l['label'] == 'save'][0])" "$leg passed the gate after save's first step"
  done
  if grep -q '^start_gate,' "$1/save/timing.csv"; then fail "$1/save waited at the start gate"; fi
  json_true "$1/report.json" "d['config']['start_gate'] == '$1/.start.gate' and d['config']['start_gate_open_s'] is not None" "start gate recorded"
  [ -e "$1/.start.gate" ] && fail "$1/.start.gate left behind"
}
# unlocked DIR WHAT: no leg got --step-lock (negative control)
unlocked() {
  local leg
  for leg in "${LEGS[@]}"; do
    lacks "$1/$leg/log.txt" "--step-lock"
    if grep -q '^step_lock_wait,' "$1/$leg/timing.csv"; then fail "$2: $leg has a lock row"; fi
    if grep -q '^start_gate,' "$1/$leg/timing.csv"; then fail "$2: $leg has a gate row"; fi
  done
  json_true "$1/report.json" "d['config']['start_gate'] is None" "$2: no start gate"
  json_true "$1/report.json" "d['config']['gpu_scheduling'] == 'shared' and d['config']['step_lock'] is None" "$2: shared recorded"
  json_true "$1/report.json" "all(l['step_priority'] is None for l in d['legs'])" "$2: no priorities"
}
# same_bits A B: every leg's trace and shards are byte-identical across the two runs
same_bits() {
  local leg f n=0
  for leg in "${LEGS[@]}"; do
    cmp -s "$1/$leg/trace.csv" "$2/$leg/trace.csv" || fail "$leg: trace.csv differs between $1 and $2"
    for f in "$1/$leg"/ckpt/iter_*/*.h5; do
      cmp -s "$f" "$2/${f#"$1/"}" || fail "$leg: ${f#"$1/"} differs"
      n=$((n + 1))
    done
  done
  [ "$n" -ge 4 ] || fail "same_bits: only $n shards compared"
}
# same_verdict A B: verdict, exit code, first divergence and every check's status
same_verdict() {
  json_true "$1/report.json" "(lambda e: d['verdict'] == e['verdict'] and d['exit_code'] == e['exit_code'] and (d['first_divergence'] or {}).get('step') == (e['first_divergence'] or {}).get('step') and (d['first_divergence'] or {}).get('columns') == (e['first_divergence'] or {}).get('columns') and [(c['name'], c['status']) for c in d['checks']] == [(c['name'], c['status']) for c in e['checks']])(json.load(open('$2/report.json')))" "$1 and $2: the same verdict and checks"
}

# the seed, legacy: diverges at 6 in grad_norm, loss equal, A/A identical
run_rc legacy "${F[@]}" --first-microbatch-policy legacy "${A[@]}" --out "$T/l"
expect_rc 1 "legacy, default scheduling" legacy
unlocked "$T/l" "default on the CPU"
run_rc legacy_cf "${F[@]}" --first-microbatch-policy legacy "${A[@]}" --out "$T/lc" \
  --gpu-scheduling critical-first
expect_rc 1 "legacy, critical-first" legacy_cf
locked "$T/lc"
contains "$T/legacy_cf.out" "A/A identical (through@5 vs save@5: 1/1 shards byte-identical"
contains "$T/legacy_cf.out" "RESUME diverged at step 6: grad_norm"
contains "$T/legacy_cf.out" "; loss equal"
json_true "$T/lc/report.json" "d['first_divergence']['step'] == 6 and 'grad_norm' in d['first_divergence']['columns'] and 'loss' in d['first_divergence']['equal_columns']" "diverges at 6 in grad_norm, loss equal"
same_verdict "$T/lc" "$T/l"
same_bits "$T/l" "$T/lc"

# resolve: every check identical, with and without
run_rc resolve_cf "${F[@]}" --first-microbatch-policy resolve "${A[@]}" --out "$T/rc" \
  --gpu-scheduling critical-first
expect_rc 0 "resolve, critical-first" resolve_cf
locked "$T/rc"
contains "$T/resolve_cf.out" "RESUME identical (through@10 vs resume@5→10: 1/1 shards byte-identical"
run_rc resolve_sh "${F[@]}" --first-microbatch-policy resolve "${A[@]}" --out "$T/rs" \
  --gpu-scheduling shared
expect_rc 0 "resolve, shared" resolve_sh
unlocked "$T/rs" "explicit shared"
same_verdict "$T/rc" "$T/rs"
same_bits "$T/rs" "$T/rc"

# a chain: resume@6 (high) waits for resume@3 (high)
run_rc chain "${F[@]}" --first-microbatch-policy resolve --steps 8 --save-at 3,6 --jobs 4 \
  --progress off --out "$T/c" --gpu-scheduling critical-first
expect_rc 0 "chain 3,6, critical-first" chain
for leg in resume@3 resume@6 save; do contains "$T/c/$leg/log.txt" "priority high"; done
contains "$T/c/through/log.txt" "priority low"

# one job slot: through (first in plan order) is gated while save cannot
# start; the gate must not wait for a leg that has no slot (no deadlock)
run_rc jobs1 "${F[@]}" --first-microbatch-policy resolve --steps 4 --save-at 2 --jobs 1 \
  --progress off --out "$T/j1" --gpu-scheduling critical-first --leg-timeout 120
expect_rc 0 "--jobs 1, critical-first" jobs1
grep -q '^start_gate,,' "$T/j1/through/timing.csv" || fail "--jobs 1: through was not gated"

# usage errors
run_rc bad "${F[@]}" "${A[@]}" --out "$T/b" --gpu-scheduling fastest
expect_rc 64 "bad --gpu-scheduling" bad
contains "$T/bad.err" "--gpu-scheduling: 'fastest' is not one of critical-first | shared"
run_rc exec --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/x" \
  --gpu-scheduling critical-first
expect_rc 64 "critical-first with an exec trainer" exec
contains "$T/exec.err" "needs the built-in trainer"
run_rc leg_flag "${F[@]}" "${A[@]}" --out "$T/f" --step-lock "$T/lock"
expect_rc 64 "--step-lock given to run" leg_flag
contains "$T/leg_flag.err" "--step-lock is set by \`run\` for each leg"
run_rc gate_flag "${F[@]}" "${A[@]}" --out "$T/g" --start-gate "$T/gate"
expect_rc 64 "--start-gate given to run" gate_flag
contains "$T/gate_flag.err" "--start-gate is set by \`run\` for each leg"
# control: an exec trainer with the default or shared scheduling runs
run_rc exec_ok --trainer exec --train-cmd "$(tmpl)" --steps 4 --save-at 2 --out "$T/xo" \
  --gpu-scheduling shared
expect_rc 0 "exec trainer, shared" exec_ok
finish
