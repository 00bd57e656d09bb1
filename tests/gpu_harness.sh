#!/usr/bin/env bash
# gpu_harness.sh — the verifier on the CUDA backend: A/A for tiny and
# gpu-small (two processes, byte-identical shards and traces), the seed's bug
# through the harness (legacy diverges at K+1 with grad norm first and loss
# equal; resolve and fusion off identical), with fp32 and with bf16 (tensor-core)
# attention; gpu-small's preset uses bf16 attention. Skips without a GPU.
set -u
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "skip: no GPU"; exit 77; }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0
expect() { # name rc flags...
  local name=$1 want=$2; shift 2
  out=$("$RC_BIN" run --device cuda "$@" --out "$t/$name" 2>"$t/$name.err"); rc=$?
  echo "$out" | grep -E "verdict|RESUME diverged|A/A" | head -3
  [ "$rc" = "$want" ] && echo "ok: $name exit $rc" || { echo "FAIL: $name exit $rc, expected $want"; tail -5 "$t/$name.err"; fail=1; }
}
expect tiny_aa 0 --steps 10 --save-at 5 --aa
expect seed_legacy 1 --steps 10 --save-at 5 --precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy
grep -q "RESUME diverged at step 6: grad_norm" <<<"$out" && echo "ok: grad norm first at step 6" || { echo "FAIL: signature"; fail=1; }
grep -q "loss equal" <<<"$out" && echo "ok: loss equal" || { echo "FAIL: loss not equal"; fail=1; }
# the state census on CUDA: the saved state identical at K, the flags local;
# the through leg kept hashes only at K (--through-checkpoints auto on CUDA)
grep -q "census: state census at step 5 (resume@5): saved state identical" <<<"$out" && echo "ok: census saved state identical" || { echo "FAIL: census"; fail=1; }
grep -q "through@5 (hashes only) vs save@5" <<<"$out" && echo "ok: through kept hashes at K" || { echo "FAIL: through@5 not hashes only"; fail=1; }
# at N the through leg wrote its shard because RESUME@10 differs (auto is
# on-demand on CUDA), so the report names values
kept() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print([l for l in d['legs'] if l['label']=='through'][0]['deferred_save']['kept'])" "$1" 2>/dev/null; }
[ "$(kept "$t/seed_legacy/report.json")" = full ] && echo "ok: through@10 written in full (on-demand, RESUME differs)" || { echo "FAIL: through@10 not full"; fail=1; }
expect seed_resolve 0 --steps 10 --save-at 5 --precision bf16 --mtp-repeated-layer --first-microbatch-policy resolve
expect seed_fusion_off 0 --steps 10 --save-at 5 --precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy --grad-accum-fusion off
expect tiny_aa_bf16_attention 0 --steps 10 --save-at 5 --aa --attention-precision bf16
expect seed_legacy_bf16_attention 1 --steps 10 --save-at 5 --precision bf16 --mtp-repeated-layer --first-microbatch-policy legacy --attention-precision bf16
grep -q "RESUME diverged at step 6: grad_norm" <<<"$out" && echo "ok: grad norm first at step 6 (bf16 attention)" || { echo "FAIL: signature (bf16 attention)"; fail=1; }
expect gpu_small_dense_aa 0 --preset gpu-small --moe-layers none --steps 4 --save-at 2 --aa
expect gpu_small_aa 0 --preset gpu-small --steps 4 --save-at 2 --aa
grep -Eq "CENSUS resume@2 +identical" <<<"$out" && echo "ok: gpu-small census identical" || { echo "FAIL: gpu-small census"; fail=1; }
[ "$(kept "$t/gpu_small_aa/report.json")" = hashes ] && echo "ok: gpu-small through@4 kept as hashes (on-demand, A/A@4 and RESUME@4 identical)" || { echo "FAIL: gpu-small through@4 not hashes"; fail=1; }

# bisect on the CUDA backend: the seed's answer is the CPU's — the first
# operation whose values differ is a shared-MTP-layer backward at K+1,
# microbatch 0, call 0, wgrad into main_grad, through FALSE (beta=1), resume
# TRUE (beta=0). Negative control: the fixed run (resolve) has no divergence.
bisect_expect() { # name want_rc run-dir
  "$RC_BIN" bisect "$t/$3" --json "$t/$1.json" >"$t/$1.txt" 2>&1; rc=$?
  grep -E "located|no-divergence|error" "$t/$1.txt" | head -3
  [ "$rc" = "$2" ] && echo "ok: $1 exit $rc" || { echo "FAIL: $1 exit $rc, expected $2"; tail -8 "$t/$1.txt"; fail=1; }
}
bisect_json() { # file step what expr: python over d (the bisect JSON), t/r its first event's sides
  python3 - "$t/$1.json" "$2" "$4" <<'PY' && echo "ok: $3" || { echo "FAIL: $3 ($4)"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
step = int(sys.argv[2])
fe = d.get("first_event") or {}
t, r = fe.get("through") or {}, fe.get("resume") or {}
sys.exit(0 if eval(sys.argv[3]) else 1)
PY
}
SEED_ANSWER='(d["verdict"] == "located" and fe["kind"] == "values" and t["step"] == step and t["mb"] == 0
and t["kind"] == "backward" and t["name"].startswith("mtp/layers/0/") and r["name"] == t["name"]
and t["call"] == 0 and r["call"] == 0 and t["fields"]["passed"] == "FALSE" and t["fields"]["beta"] == "1"
and r["fields"]["passed"] == "TRUE" and r["fields"]["beta"] == "0" and "fp_main_grad" in fe["differing_fields"])'
bisect_expect bisect_tiny_legacy 1 seed_legacy
bisect_json bisect_tiny_legacy 6 "tiny seed: MTP-layer wgrad at step 6, FALSE/beta=1 vs TRUE/beta=0" "$SEED_ANSWER"
expect gpu_small_legacy 1 --preset gpu-small --steps 4 --save-at 2 --mtp-repeated-layer --first-microbatch-policy legacy
bisect_expect bisect_gpu_small_legacy 1 gpu_small_legacy
bisect_json bisect_gpu_small_legacy 3 "gpu-small seed: MTP-layer wgrad at step 3, FALSE/beta=1 vs TRUE/beta=0" "$SEED_ANSWER"
# the same answer as the CPU backend's, event for event identity
"$RC_BIN" run --device cpu --steps 10 --save-at 5 --precision bf16 --mtp-repeated-layer \
  --first-microbatch-policy legacy --out "$t/cpu_legacy" --progress off >/dev/null 2>&1
bisect_expect bisect_cpu_legacy 1 cpu_legacy
python3 - "$t/bisect_cpu_legacy.json" "$t/bisect_tiny_legacy.json" <<'PY' && echo "ok: CUDA bisect names the CPU's event" || { echo "FAIL: CUDA and CPU bisect disagree"; fail=1; }
import json, sys
key = lambda e: (e["step"], e["mb"], e["kind"], e["name"], e["call"], e["fields"]["passed"], e["fields"]["beta"])
a, b = (json.load(open(f))["first_event"] for f in sys.argv[1:3])
print("  cpu :", key(a["through"]), key(a["resume"]))
print("  cuda:", key(b["through"]), key(b["resume"]))
sys.exit(0 if key(a["through"]) == key(b["through"]) and key(a["resume"]) == key(b["resume"]) else 1)
PY
bisect_expect bisect_tiny_resolve 0 seed_resolve
bisect_json bisect_tiny_resolve 0 "resolve: no divergence" 'd["verdict"] == "no-divergence" and d["first_event"] is None'
expect gpu_small_resolve 0 --preset gpu-small --steps 4 --save-at 2 --mtp-repeated-layer --first-microbatch-policy resolve
bisect_expect bisect_gpu_small_resolve 0 gpu_small_resolve
exit $fail
