#!/usr/bin/env bash
# dist_mtp_lifecycle.sh — the MTP lifecycle's global denominators under data
# parallel (docs/design.md §3.5, docs/distributed.md):
#   1. one rank through the distributed optimizer (--collectives single)
#      writes the plain path's bytes (trace and shards) for detached heads
#      with a sequence-level loss and for --calculate-per-token-loss: the
#      split norms, the per-group clip and the finish's scale are the same
#      operations in the same order;
#   2. two MPI ranks: A/A and RESUME byte-identical for both configurations;
#      a planted bug (mtp-denominator-from-main-after-resume) is reported at
#      K+1 with mtp_grad_norm first (the verifier is not blind there);
#   3. the counts are global: two ranks of two microbatches and one rank of
#      four read the same samples in a step, and a token-level loss gives the
#      same step-1 loss (1e-12 relative) and grad norm (1e-6: other float
#      orders); control: the microbatch-mean loss of those samples differs
#      by more, so the comparison can tell the denominators apart.
source "$(dirname "$0")/dist_lib.sh"

SEQ=(--loss-type sequence-level --mtp-detach-heads --mtp-clip-grad 0.02)
TOK=(--calculate-per-token-loss --mtp-detach-heads)
# 1. one rank through the distributed optimizer
need_train
for c in SEQ TOK; do
  declare -n flags=$c
  "$RC_BIN" train --preset tiny "${flags[@]}" --steps 3 --save-at 3 --out "$T/plain_$c" >/dev/null 2>&1 ||
    fail "$c: plain leg failed"
  "$RC_BIN" train --preset tiny "${flags[@]}" --steps 3 --save-at 3 --collectives single \
    --out "$T/single_$c" >/dev/null 2>&1 || fail "$c: single leg failed"
  same_files "$T/plain_$c/trace.csv" "$T/single_$c/trace.csv" "$c: trace, plain vs single"
  same_files "$T/plain_$c/ckpt/iter_0000003/shard_00000_of_00001.h5" \
    "$T/single_$c/ckpt/iter_0000003/shard_00000_of_00001.h5" "$c: shard, plain vs single"
  unset -n flags
done
[ "$fails" = 0 ] && echo "ok: one rank through the distributed optimizer writes the plain path's bytes"

need_mpi
F=(--preset tiny --steps 6 --save-at 3 --progress off --world-size 2)
# 2. two ranks
run_rc seq "${F[@]}" "${SEQ[@]}" --out "$T/seq"
expect_rc 0 "sequence-level, detached, W=2" seq
contains "$T/seq.out" "RESUME identical (through@6 vs resume@3→6: 2/2 shards byte-identical"
contains "$T/seq.out" "A/A identical (through@3 vs save@3: 2/2 shards byte-identical"
run_rc tok "${F[@]}" "${TOK[@]}" --out "$T/tok"
expect_rc 0 "per-token loss at the finish, detached, W=2" tok
contains "$T/tok.out" "RESUME identical (through@6 vs resume@3→6: 2/2 shards byte-identical"
run_rc bug "${F[@]}" "${SEQ[@]}" --inject mtp-denominator-from-main-after-resume --out "$T/bug"
expect_rc 1 "control: the planted MTP denominator bug at W=2" bug
contains "$T/bug.out" "diverged at step 4: mtp_grad_norm"

# 3. the counts are global
G=(--preset tiny --steps 1 --warmup 0 --progress off)
"$RC_BIN" train "${G[@]}" --loss-type token-level --world-size 2 --microbatches 2 --out "$T/w2" \
  >"$T/w2.log" 2>&1 || fail "token-level W=2 train failed"
"$RC_BIN" train "${G[@]}" --loss-type token-level --microbatches 4 --out "$T/w1" >/dev/null 2>&1 ||
  fail "token-level W=1 train failed"
"$RC_BIN" train "${G[@]}" --microbatches 4 --out "$T/w1mean" >/dev/null 2>&1 ||
  fail "microbatch-mean W=1 train failed"
python3 - "$T" <<'PY' || fail "the global counts"
import csv, sys
t = sys.argv[1]
row = lambda n: next(csv.DictReader(open("%s/%s/trace.csv" % (t, n))))
f = lambda r, k: float.fromhex(r[k + "_hex"])
rel = lambda a, b: abs(a - b) / abs(b)
w2, w1, mean = row("w2"), row("w1"), row("w1mean")
assert w2["tokens"] == w1["tokens"], (w2["tokens"], w1["tokens"])
assert rel(f(w2, "loss"), f(w1, "loss")) <= 1e-12, (f(w2, "loss"), f(w1, "loss"))
assert rel(f(w2, "grad_norm"), f(w1, "grad_norm")) <= 1e-6, (f(w2, "grad_norm"), f(w1, "grad_norm"))
print("ok: token-level over 2 ranks = over 1 rank of the same samples: loss %.1e, grad norm %.1e" %
      (rel(f(w2, "loss"), f(w1, "loss")), rel(f(w2, "grad_norm"), f(w1, "grad_norm"))))
d = rel(f(mean, "loss"), f(w1, "loss"))
assert d > 1e-9, "control: the microbatch-mean loss is the token-level one on these samples (%g)" % d
print("ok: control: the microbatch-mean loss of the same samples differs by %.1e" % d)
PY
finish
