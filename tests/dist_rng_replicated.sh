#!/usr/bin/env bash
# dist_rng_replicated.sh — `--inject rng-saved-as-replicated` (rank 0's
# dropout RNG saved once and restored on every rank) is detected only when
# W > 1: at W=1 there is nothing to confuse (the negative control), at W=2
# the resumed rank 1 draws rank 0's masks and RESUME diverges.
source "$(dirname "$0")/dist_lib.sh"
need_mpi

F=(--preset tiny --dropout 0.1 --inject rng-saved-as-replicated --steps 6 --save-at 3 --progress off)
run_rc w1 "${F[@]}" --world-size 1 --out "$T/w1"
expect_rc 0 "rng-saved-as-replicated at W=1 is harmless" w1
run_rc w2 "${F[@]}" --world-size 2 --out "$T/w2"
expect_rc 1 "rng-saved-as-replicated at W=2" w2
contains "$T/w2.out" "A/A identical"
contains "$T/w2.out" "RESUME diverged at step 4: loss"
# the state census, rank by rank, names rank 1's RNG, and that the save wrote
# rank 0's only (what rank 1 resumes with)
contains "$T/w2.out" "over 2 ranks; 1 saved field differs"
grep -q "^census: state census at step 3 (resume@3): 1 saved field differs; first: rank 1: rng.seed: through [0-9]*, resumed [0-9]* (saved: the save wrote [0-9]* (into rank 0's shard only: this rank's is not in the checkpoint), which differs from the saving process's [0-9]*; the resumed process has what was saved)" "$T/w2.out" ||
  fail "the census does not name rank 1's rng.seed"
# without the bug the same W=2 run is identical: the RNG is per-rank state
run_rc ok2 --preset tiny --dropout 0.1 --steps 6 --save-at 3 --progress off --world-size 2 --out "$T/ok2"
expect_rc 0 "dropout at W=2 without the bug" ok2
contains "$T/ok2.out" "over 2 ranks, saved state identical"
finish
