#!/usr/bin/env bash
# mtp_lifecycle.sh — the MTP lifecycle's settings (docs/design.md §3.5, seed
# 004) as a user meets them, each assertion with its control:
#   1. the seed's refused combination (a sequence-level main loss with
#      attached MTP heads) exits 64 with the seed's reason from train and
#      run, writing nothing; the same with detached heads, no MTP loss or a
#      token-level loss is accepted;
#   2. the other combinations that cannot be normalised exit 64 naming the
#      flag; their corrected forms are accepted;
#   3. the canonical config leaves every new key out at its default (the
#      checkpoints' config hash of default configs is unchanged:
#      ckpt_golden) and holds it when set; --calculate-per-token-loss is
#      --loss-type token-level --loss-normalize-at finish, and refused beside
#      either; a canonical config with the new keys reads back (--config);
#   4. a detached run's trace has mtp_grad_norm and its exact _hex copy after
#      grad_norm; an attached run's has no such column;
#   5. detached heads detach: with --mtp-detach-heads the main loss and the
#      backbone's grad norm are bit for bit the same whatever the MTP loss
#      scale (no MTP gradient reaches the backbone) while the MTP losses move;
#      attached (the control), the main loss moves at step 2;
#   6. the census lists the new derived settings where a config sets them,
#      and a default config's census has none of them;
#   7. a resume that mixes the two normalisation orders is refused (65,
#      naming loss_normalize_at: it is in the config hash); the same order
#      resumes (the control).
source "$(dirname "$0")/run_lib.sh"

# expect_refused NAME PHRASE FLAGS...: train exits 64, stderr has PHRASE, no --out made
expect_refused() {
  local name=$1 phrase=$2
  shift 2
  "$RC_BIN" train "$@" --steps 2 --out "$T/$name" >"$T/$name.out" 2>"$T/$name.err"
  local rc=$?
  [ "$rc" = 64 ] && grep -qF -- "$phrase" "$T/$name.err" && [ ! -e "$T/$name" ] &&
    echo "ok: refused (64): $*" || {
    fail "$name: exit $rc, want 64 with '$phrase' and nothing written: $*"
    cat "$T/$name.err" >&2
  }
}
# expect_accepted FLAGS...: train --dry-run exits 0
expect_accepted() {
  "$RC_BIN" train "$@" --dry-run >"$T/acc.out" 2>&1 && echo "ok: accepted: $*" || {
    fail "refused: $*"
    cat "$T/acc.out" >&2
  }
}

# 1. the seed's refusal
SEED_REASON="that mixed backbone gradient cannot be corrected after split-step accumulation"
expect_refused seed_refusal "$SEED_REASON" --loss-type sequence-level
expect_refused seed_refusal_finish "$SEED_REASON" --loss-type sequence-level \
  --loss-normalize-at finish --moe-aux-loss-coeff 0
"$RC_BIN" run --loss-type sequence-level --steps 4 --save-at 2 --out "$T/seed_run" >"$T/seed_run.out" 2>&1
rc=$?
[ "$rc" = 64 ] && grep -qF "$SEED_REASON" "$T/seed_run.out" && [ ! -e "$T/seed_run/report.json" ] && echo "ok: run refuses it too (64), before any leg" ||
  fail "run --loss-type sequence-level: exit $rc, want 64 with the seed's reason"
expect_accepted --loss-type sequence-level --mtp-detach-heads
expect_accepted --loss-type sequence-level --mtp-loss-scale 0
expect_accepted --loss-type sequence-level --mtp-depths 0 --mtp-separate-layers
expect_accepted --loss-type token-level

# 2. the other refusals, and their corrected forms
expect_refused finish_mean "--loss-normalize-at finish needs --loss-type" --loss-normalize-at finish
expect_accepted --loss-normalize-at finish --loss-type token-level
expect_refused detach_no_mtp "--mtp-detach-heads needs --mtp-depths >= 1" --mtp-detach-heads \
  --mtp-depths 0 --mtp-separate-layers
expect_refused detach_te_head "--mtp-detach-heads and --te-output-head cannot be combined" \
  --mtp-detach-heads --te-output-head
expect_refused clip_attached "--mtp-clip-grad 0.5 needs --mtp-detach-heads" --mtp-clip-grad 0.5
expect_accepted --mtp-clip-grad 0.5 --mtp-detach-heads
expect_refused seq_finish_aux "where it needs 1/global valid tokens" --loss-type sequence-level \
  --mtp-detach-heads --loss-normalize-at finish
expect_accepted --loss-type sequence-level --mtp-detach-heads --loss-normalize-at finish \
  --moe-layers none
expect_refused inject_mtp_den "needs --loss-type sequence-level and --mtp-detach-heads" \
  --inject mtp-denominator-from-main-after-resume --loss-type token-level --mtp-detach-heads
expect_refused inject_aux_den "needs --loss-type sequence-level, --moe-layers" \
  --inject moe-aux-loss-main-denominator-after-resume --loss-type sequence-level \
  --mtp-detach-heads --moe-layers none
expect_refused inject_clip "--inject mtp-clip-grad-default-after-resume needs --mtp-detach-heads" \
  --inject mtp-clip-grad-default-after-resume

# 3. the canonical config
NEW_KEYS='"(loss_type|loss_normalize_at|mtp_detach_heads|mtp_clip_grad)"'
"$RC_BIN" train --dry-run >"$T/default.json" 2>&1 || fail "default --dry-run failed"
grep -qE "$NEW_KEYS" "$T/default.json" && fail "the default canonical config holds a new key" ||
  echo "ok: the default canonical config leaves the new keys out"
"$RC_BIN" train --loss-type sequence-level --mtp-detach-heads --mtp-clip-grad 0.25 \
  --loss-normalize-at finish --moe-layers none --dry-run >"$T/set.json" 2>&1 || fail "--dry-run failed"
for kv in '"loss_type":"sequence-level"' '"loss_normalize_at":"finish"' '"mtp_detach_heads":true' \
  '"mtp_clip_grad":0.25'; do
  grep -qF "$kv" "$T/set.json" && echo "ok: canonical $kv" || fail "the canonical config lacks $kv"
done
# the file the dry run printed reads back to the same config (the last line is the JSON)
tail -1 "$T/set.json" >"$T/set_config.json"
"$RC_BIN" train --config "$T/set_config.json" --dry-run >"$T/reread.json" 2>&1 &&
  cmp -s <(tail -1 "$T/set.json") <(tail -1 "$T/reread.json") &&
  echo "ok: --config reads the new keys back to the same canonical config" ||
  fail "--config with the new keys did not read back"
"$RC_BIN" train --calculate-per-token-loss --dry-run >"$T/meg.json" 2>&1
"$RC_BIN" train --loss-type token-level --loss-normalize-at finish --dry-run >"$T/nat.json" 2>&1
cmp -s <(tail -1 "$T/meg.json") <(tail -1 "$T/nat.json") &&
  echo "ok: --calculate-per-token-loss is --loss-type token-level --loss-normalize-at finish" ||
  fail "--calculate-per-token-loss gives another config"
cmp -s <(tail -1 "$T/meg.json") <(tail -1 "$T/default.json") &&
  fail "control: --calculate-per-token-loss gives the default config"
expect_refused meg_conflict "contradict" --calculate-per-token-loss --loss-type token-level

# 4. the trace's column
"$RC_BIN" train --mtp-detach-heads --mtp-clip-grad 0.02 --steps 3 --out "$T/det" >/dev/null 2>&1 ||
  fail "detached train failed"
"$RC_BIN" train --steps 3 --out "$T/att" >/dev/null 2>&1 || fail "attached train failed"
python3 - "$T/det/trace.csv" "$T/att/trace.csv" <<'PY' || fail "the trace's mtp_grad_norm column"
import csv, sys
det = list(csv.DictReader(open(sys.argv[1])))
head = open(sys.argv[1]).readline().strip().split(",")
i = head.index("grad_norm_hex")
assert head[i + 1:i + 3] == ["mtp_grad_norm", "mtp_grad_norm_hex"], head
for r in det:
    v = float.fromhex(r["mtp_grad_norm_hex"])
    assert v > 0 and abs(v - float(r["mtp_grad_norm"])) <= 1e-8 * v, r
att = open(sys.argv[2]).readline()
assert "mtp_grad_norm" not in att, "control: an attached run's trace has mtp_grad_norm"
print("ok: a detached trace has mtp_grad_norm and its exact _hex after grad_norm; an attached one has none")
PY

# 5. detached heads detach: the backbone's columns do not see the MTP loss scale
for lam in 0.1 0.5; do
  "$RC_BIN" train --mtp-detach-heads --mtp-loss-scale $lam --steps 3 --out "$T/det_$lam" >/dev/null 2>&1 ||
    fail "detached lambda $lam failed"
  "$RC_BIN" train --mtp-loss-scale $lam --steps 3 --out "$T/att_$lam" >/dev/null 2>&1 ||
    fail "attached lambda $lam failed"
done
python3 - "$T" <<'PY' || fail "detachment"
import csv, sys
t = sys.argv[1]
rows = lambda n: list(csv.DictReader(open("%s/%s/trace.csv" % (t, n))))
a, b = rows("det_0.1"), rows("det_0.5")
for x, y in zip(a, b):
    assert x["loss_hex"] == y["loss_hex"] and x["grad_norm_hex"] == y["grad_norm_hex"], (x["step"], "backbone moved")
assert a[2]["mtp_loss_1_hex"] != b[2]["mtp_loss_1_hex"], "the MTP heads did not train differently"
c, d = rows("att_0.1"), rows("att_0.5")
assert c[1]["loss_hex"] != d[1]["loss_hex"], "control: attached heads left the main loss alone"
print("ok: detached, the main loss and the backbone's grad norm are bit for bit the same at lambda 0.1 "
      "and 0.5 (the MTP losses differ); attached, the main loss differs at step 2")
PY

# 6. the census's derived settings
"$RC_BIN" train --loss-type sequence-level --mtp-detach-heads --mtp-clip-grad 0.02 --steps 3 \
  --save-at 2 --out "$T/cen" >/dev/null 2>&1 || fail "census train failed"
"$RC_BIN" train --steps 3 --save-at 2 --out "$T/cen0" >/dev/null 2>&1 || fail "default census train failed"
C="$T/cen/census/iter_0000002.rank0.txt"
for f in "loss.main_denominator	derived	sequences" "loss.normalize_at	derived	microbatch" \
  "mtp.detach_heads	derived	true" "mtp.loss_denominator	derived	tokens" \
  "moe.aux_loss_denominator	derived	tokens" "mtp.clip_grad	derived	0.02"; do
  grep -qF "$f" "$C" && echo "ok: census: ${f//	/ }" || fail "the census lacks: ${f//	/ }"
done
grep -qE '^(loss|mtp)\.' "$T/cen0/census/iter_0000002.rank0.txt" &&
  fail "control: a default config's census lists the new settings" ||
  echo "ok: control: a default config's census has none of them"

# 7. the order is part of the config: a resume cannot mix them
"$RC_BIN" train --loss-type token-level --steps 3 --save-at 2 --out "$T/ord" >/dev/null 2>&1 ||
  fail "order train failed"
"$RC_BIN" train --loss-type token-level --loss-normalize-at finish --steps 3 \
  --resume-from "$T/ord/ckpt/iter_0000002" --out "$T/ord_mixed" >"$T/ord_mixed.out" 2>&1
rc=$?
[ "$rc" = 65 ] && grep -qF "'loss_normalize_at' is (absent) in the checkpoint, \"finish\" in this run" \
  "$T/ord_mixed.out" && echo "ok: a resume at the other normalisation order is refused (65)" ||
  fail "a resume mixing the orders: exit $rc, want 65 naming loss_normalize_at"
"$RC_BIN" train --loss-type token-level --steps 3 --resume-from "$T/ord/ckpt/iter_0000002" \
  --out "$T/ord_same" >/dev/null 2>&1 && echo "ok: control: the same order resumes" ||
  fail "control: a resume at the same order failed"
finish
