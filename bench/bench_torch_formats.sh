#!/usr/bin/env bash
# bench_torch_formats.sh — PyTorch checkpoint formats inside resumecheck,
# against what a PyTorch user would write instead (bench/NOTES.md, issue
# "Check the trainer a team already has"):
#
# 1. compare of a ~1 GiB torch.distributed.checkpoint (DCP) pair:
#    `resumecheck compare A B` (the C walk handing the directory to
#    compare-torch), `python3 -m resumecheck compare-torch A B`, and the peer:
#    DCP's own reader loading both into preallocated tensors, then
#    torch.equal on every pair ("torch.load + torch.equal" for DCP). Equal
#    pairs and a pair with one value changed; and the same for torch.save
#    files against torch.load(mmap=True) + torch.equal.
# 2. `resumecheck run` of one exec trainer (tests/trainers/dcp_trainer.py)
#    saving DCP against the same trainer saving resumecheck shards: wall
#    time and checkpoint bytes written.
#
#   OUT=/dir RC_BIN=build/resumecheck bash bench/bench_torch_formats.sh
# ROUNDS (3): interleaved rounds; MIB (1024): the DCP pair's size; WIDTH
# (262144): the run's trainer's hidden size; RUN=0 leaves part 2 out.
# Results: OUT/bench_torch_formats/.
set -u
RC_BIN="${RC_BIN:-build/resumecheck}"
PY="${RC_PYTHON:-python3}"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$SRC/python${PYTHONPATH:+:$PYTHONPATH}" RC_PYTHON="$PY"
W="${OUT:-/tmp}/bench_torch_formats"
ROUNDS="${ROUNDS:-3}" MIB="${MIB:-1024}" WIDTH="${WIDTH:-262144}"
rm -rf "$W" && mkdir -p "$W"
echo "# $(date -u +%FT%TZ) $(nproc) cores, torch $("$PY" -c 'import torch; print(torch.__version__)'), $MIB MiB pair"

"$PY" - "$W" "$MIB" <<'PY'
import os, sys, torch, torch.distributed.checkpoint as dcp
w, mib = sys.argv[1], int(sys.argv[2])
n = 16
per = mib * (1 << 20) // n // 4
g = torch.Generator().manual_seed(0)
sd = {f"layers.{i}.weight": torch.randn(per, generator=g) for i in range(n)}
sd["step"] = 100
# torch.save names its zip records after the file: one name in three
# directories, as a run's legs write them
for name in ("A", "B"):
    dcp.save(sd, checkpoint_id=f"{w}/{name}_dcp", no_dist=True)
    os.makedirs(f"{w}/{name}", exist_ok=True)
    torch.save(sd, f"{w}/{name}/ckpt.pt")
sd["layers.9.weight"][per // 2] += 1.0
dcp.save(sd, checkpoint_id=f"{w}/C_dcp", no_dist=True)
os.makedirs(f"{w}/C", exist_ok=True)
torch.save(sd, f"{w}/C/ckpt.pt")
PY
du -sh "$W/A_dcp" "$W/A/ckpt.pt" | tr '\n' ' '
echo

cat >"$W/peer.py" <<'PY'
# the peer: what a PyTorch user writes to check two checkpoints are equal
import sys, torch
a, b = sys.argv[1], sys.argv[2]
if a.endswith(".pt"):  # torch.save files
    x = torch.load(a, map_location="cpu", weights_only=True, mmap=True)
    y = torch.load(b, map_location="cpu", weights_only=True, mmap=True)
else:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    def load(path):
        md = FileSystemReader(path).read_metadata()
        sd = {k: torch.empty(tuple(v.size), dtype=v.properties.dtype) for k, v in md.state_dict_metadata.items() if isinstance(v, TensorStorageMetadata)}
        sd.update({k: 0 for k, v in md.state_dict_metadata.items() if not isinstance(v, TensorStorageMetadata)})
        dcp.load(sd, checkpoint_id=path, no_dist=True)
        return sd
    x, y = load(a), load(b)
same = x.keys() == y.keys() and all(torch.equal(x[k], y[k]) if isinstance(x[k], torch.Tensor) else x[k] == y[k] for k in x)
sys.exit(0 if same else 1)
PY

t() { # label cmd...: wall seconds and exit code, into the results
  local label=$1 t0 t1 rc
  shift
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  rc=$?
  t1=$(date +%s.%N)
  printf '%s\t%s\t%.3f\n' "$label" "$rc" "$(echo "$t1 - $t0" | bc)" >>"$W/times.tsv"
}
cat "$W"/A_dcp/* "$W"/B_dcp/* "$W"/C_dcp/* "$W"/[ABC]/ckpt.pt >/dev/null # page cache warm, as after a run
for r in $(seq "$ROUNDS"); do
  t "dcp equal: resumecheck compare" "$RC_BIN" compare "$W/A_dcp" "$W/B_dcp"
  t "dcp equal: compare-torch" "$PY" -m resumecheck compare-torch "$W/A_dcp" "$W/B_dcp" --resumecheck "$RC_BIN"
  t "dcp equal: peer (dcp.load + torch.equal)" "$PY" "$W/peer.py" "$W/A_dcp" "$W/B_dcp"
  t "dcp one value: resumecheck compare" "$RC_BIN" compare "$W/A_dcp" "$W/C_dcp"
  t "dcp one value: peer (dcp.load + torch.equal)" "$PY" "$W/peer.py" "$W/A_dcp" "$W/C_dcp"
  t "torch.save one value: resumecheck compare" "$RC_BIN" compare "$W/A/ckpt.pt" "$W/C/ckpt.pt"
  t "torch.save one value: peer (torch.load mmap + torch.equal)" "$PY" "$W/peer.py" "$W/A/ckpt.pt" "$W/C/ckpt.pt"
  t "torch.save equal: peer (torch.load mmap + torch.equal)" "$PY" "$W/peer.py" "$W/A/ckpt.pt" "$W/B/ckpt.pt"
  t "torch.save equal: resumecheck compare" "$RC_BIN" compare "$W/A/ckpt.pt" "$W/B/ckpt.pt"
done
"$PY" - "$W/times.tsv" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
codes = {}
for line in open(sys.argv[1]):
    label, rc, s = line.rstrip("\n").split("\t")
    rows[label].append(float(s))
    codes[label] = rc
med = {k: statistics.median(v) for k, v in rows.items()}
print("%-62s %4s %8s %8s %8s" % ("command", "exit", "median s", "min", "max"))
for k, v in rows.items():
    print("%-62s %4s %8.3f %8.3f %8.3f" % (k, codes[k], med[k], min(v), max(v)))
for case in ("dcp equal", "dcp one value", "torch.save one value", "torch.save equal"):
    ours = [k for k in med if k.startswith(case + ": resumecheck")]
    peer = [k for k in med if k.startswith(case + ": peer")]
    if ours and peer:
        print(f"ratio {case}: resumecheck compare / peer = {med[ours[0]] / med[peer[0]]:.2f}x")
PY
rm -rf "$W"/A_dcp "$W"/B_dcp "$W"/C_dcp "$W"/A "$W"/B "$W"/C

# 2. run: the same trainer saving DCP and saving resumecheck shards
[ "${RUN:-1}" = 0 ] && exit 0
tmpl() {
  echo "'$PY' '$SRC/tests/trainers/dcp_trainer.py' --format $1 --width $WIDTH --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}"
}
for r in $(seq "$ROUNDS"); do
  for f in dcp rc; do
    rm -rf "$W/run_$f"
    t0=$(date +%s.%N)
    "$RC_BIN" run --trainer exec --train-cmd "$(tmpl $f)" --steps 6 --save-at 3 --out "$W/run_$f" --progress off >"$W/run_$f.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    bytes=$(find "$W/run_$f" -path '*/ckpt/*' -type f -printf '%s\n' | awk '{s += $1} END {print s}')
    checks=$("$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d.get('timing', {}).get('checks_s', ''))" "$W/run_$f/report.json" 2>/dev/null)
    printf 'run %s round %d: exit %s, %.2f s wall, checkpoint bytes written %s, checks %s s\n' "$f" "$r" "$rc" "$(echo "$t1 - $t0" | bc)" "$bytes" "$checks"
  done
done
