#!/usr/bin/env bash
# py_compare_torch.sh — `python3 -m resumecheck compare-torch A B`: torch.save
# files and torch.distributed.checkpoint directories compared through the C
# `resumecheck compare` on safetensors conversions (docs/compare.md, "PyTorch
# formats"). The checkpoints are written by py_compare_torch_gen.py in $T.
# Every difference check has its negative control: the same state saved
# twice is IDENTICAL with no FAIL line, and each changed copy is reported
# under its own name only. torch is required: without it the test FAILS.
source "$(dirname "$0")/py_lib.sh"
need_py_modules numpy torch
G="$T/g"
mkdir -p "$G"
"$PY" "$RC_SRC/tests/py_compare_torch_gen.py" "$G" >"$T/gen.log" 2>&1 || {
  fail "generator failed"
  cat "$T/gen.log" >&2
  finish
}

# Every comparison runs in one Python process (the machine is shared and
# each interpreter start imports torch): `ct NAME ARGS...` queues
# `python3 -m resumecheck compare-torch ARGS` (its main(), the CLI's code,
# argument parsing included); run_queued runs them, each with its stdout
# and stderr in $T/NAME.out/.err and its exit status in $T/NAME.rc; then
# `got NAME` sets $rc. A few are also run as separate processes below.
: >"$T/queue"
ct() {
  local name=$1
  shift
  printf '%s' "$name" >>"$T/queue"
  printf '\t%s' "$@" >>"$T/queue"
  printf '\n' >>"$T/queue"
}
run_queued() {
  "$PY" - "$T/queue" "$T" <<'PY' || fail "the queue runner failed"
import contextlib, sys
from resumecheck.__main__ import main
queue, t = sys.argv[1], sys.argv[2]
for line in open(queue, encoding="utf-8").read().splitlines():
    name, *args = line.split("\t")
    with open(f"{t}/{name}.out", "w") as o, open(f"{t}/{name}.err", "w") as e:
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            try:
                rc = main(["compare-torch"] + args)
            except SystemExit as x:
                rc = x.code
    with open(f"{t}/{name}.rc", "w") as f:
        f.write(f"{rc}\n")
PY
}
got() { rc=$(cat "$T/$1.rc" 2>/dev/null || echo none); }
# only_fail NAME OBJECT: exactly one FAIL line, for OBJECT.
only_fail() {
  local n
  n=$(grep -c '^  FAIL ' "$T/$1.out")
  [ "$n" = 1 ] || fail "$1: $n FAIL lines, want 1"
  grep -Eq "^  FAIL [a-z_]+ +$2( in [^ ]+)?  " "$T/$1.out" || fail "$1: no FAIL line names $2"
}

W="model/decoder.layers.0.mlp.linear_fc1.weight"
# inputs built here: a DCP directory without its data, one without .metadata,
# and DCP .metadata pickles that name os.mkdir (marker directories in $T)
mkdir -p "$T/empty_dir"
cp -r "$G/base_dcp" "$T/dcp_cut"
rm "$T/dcp_cut"/*.distcp
for e in evil evil_unsafe; do
  cp -r "$G/base_dcp" "$T/dcp_$e"
  "$PY" - "$T/dcp_$e/.metadata" "$T/ran_$e" <<'PY'
import os, pickle, sys
class Evil:
    def __reduce__(self):
        return (os.mkdir, (sys.argv[2],))
with open(sys.argv[1], "wb") as f:
    pickle.dump(Evil(), f)
PY
done

ct same "$G/base.pt" "$G/base_copy.pt" --json "$T/same.json"
ct dcp "$G/base.pt" "$G/base_dcp"
ct dcp2 "$G/base_dcp" "$G/one_elem_dcp"
ct one "$G/base.pt" "$G/one_elem.pt" --json "$T/one.json"
ct one_dcp "$G/base.pt" "$G/one_elem_dcp"
ct nanp "$G/base.pt" "$G/nan_payload.pt"
ct nann "$G/base.pt" "$G/nan_number.pt"
ct zero "$G/base.pt" "$G/neg_zero.pt"
ct bf16 "$G/base.pt" "$G/bf16_ulp.pt"
ct it "$G/base.pt" "$G/iteration.pt" --json "$T/it.json"
ct itf "$G/base.pt" "$G/iteration_float.pt"
ct lr "$G/base.pt" "$G/lr_ulp.pt"
ct lrz "$G/lr_zero.pt" "$G/lr_neg_zero.pt"
ct str "$G/base.pt" "$G/run_name.pt"
ct dt "$G/base.pt" "$G/dtype.pt"
ct sh "$G/base.pt" "$G/shape.pt"
ct ex "$G/base.pt" "$G/extra_key.pt"
ct view "$G/base_with_t.pt" "$G/view.pt"
ct viewc "$G/base_with_t.pt" "$G/view_changed.pt"
ct ign "$G/base.pt" "$G/iteration.pt" --ignore iteration
ct ignall "$G/base.pt" "$G/iteration.pt" --ignore '*'
ct trunc "$G/base.pt" "$G/truncated.pt"
ct flip "$G/base.pt" "$G/flipped.pt"
ct junk "$G/base.pt" "$G/not_torch.pt"
ct miss "$G/base.pt" "$G/nosuch.pt"
ct notdcp "$G/base_dcp" "$T/empty_dir"
ct dcpcut "$G/base_dcp" "$T/dcp_cut"
ct ns "$G/namespace.pt" "$G/namespace.pt"
ct nsu "$G/namespace.pt" "$G/namespace.pt" --unsafe-pickle
ct nsd "$G/namespace.pt" "$G/base.pt" --unsafe-pickle
ct evil "$G/base_dcp" "$T/dcp_evil"
ct evilu "$G/base_dcp" "$T/dcp_evil_unsafe" --unsafe-pickle
# hostile inputs (the reliability issue): a 2 KB torch.save of memo-shared
# nested lists (2^30 leaves once expanded), and its control of the same
# shape at 2^10 leaves; a DCP directory whose .metadata is a FIFO; one whose
# .metadata sends a tensor's bytes outside the directory
"$PY" - "$T/laughs.pt" "$T/laughs_small.pt" <<'PY'
import sys, torch
for path, depth in ((sys.argv[1], 30), (sys.argv[2], 10)):
    x = [0]
    for _ in range(depth):
        x = [x, x]
    torch.save({"x": x}, path)
PY
ct laughs "$T/laughs.pt" "$T/laughs.pt"
ct laughs_small "$T/laughs_small.pt" "$T/laughs_small.pt"
cp -r "$G/base_dcp" "$T/dcp_fifo"
rm "$T/dcp_fifo/.metadata" && mkfifo "$T/dcp_fifo/.metadata"
cp -r "$G/base_dcp" "$T/dcp_escape"
"$PY" - "$T/dcp_escape/.metadata" <<'PY'
import pickle, sys
md = pickle.load(open(sys.argv[1], "rb"))
k = next(i for i in md.storage_data if i.fqn.endswith("linear_fc1.weight"))
md.storage_data[k].relative_path = "../g/base.pt"
pickle.dump(md, open(sys.argv[1], "wb"))
PY
ct dcpfifo "$G/base_dcp" "$T/dcp_fifo"
ct dcpescape "$G/base_dcp" "$T/dcp_escape"
ct use2 "$G/base.pt" "$G/base.pt" --no-such-flag
ct nobin "$G/base.pt" "$G/base.pt" --resumecheck /nonexistent/resumecheck
run_queued

# identical state, saved twice: the negative control of every check below
got same
expect_rc 0 "same state saved twice" same
contains "$T/same.out" "IDENTICAL"
lacks "$T/same.out" "FAIL"
contains "$T/same.out" "26 tensors compared"
json_true "$T/same.json" "d['verdict'] == 'identical' and d['tensors_compared'] == 26 and d['values_compared'] == 24 and d['diffs'] == []" "same: JSON"

# a DCP directory of the same state against the torch.save file: the same
# names and values (the flattening is the same); and DCP against DCP
got dcp
expect_rc 0 "DCP vs torch.save of one state" dcp
contains "$T/dcp.out" "B: $G/base_dcp (torch.distributed.checkpoint)"
contains "$T/dcp.out" "26 tensors compared"
lacks "$T/dcp.out" "FAIL"
got dcp2
expect_rc 1 "DCP vs DCP, one element" dcp2
only_fail dcp2 "$W"
contains "$T/dcp2.out" "first at [2,3]"

# one element of one tensor
got one
expect_rc 1 "one element changed" one
only_fail one "$W"
# the two values as the generated files hold them (torch's arithmetic moves
# the trained weights in their last digits from one release to the next)
pair=$("$PY" - "$G/base.pt" "$G/one_elem.pt" <<'PY'
import sys, torch
key = "decoder.layers.0.mlp.linear_fc1.weight"
a, b = (torch.load(f, weights_only=False)["model"][key][2, 3].item() for f in sys.argv[1:])
print("%.9g vs %.9g" % (a, b))
PY
)
contains "$T/one.out" "float32[6,4]: 1 of 24 elements differ, first at [2,3]: $pair"
json_true "$T/one.json" "d['exit_code'] == 1 and d['n_failing'] == 1 and d['diffs'][0]['object'] == '$W' and d['diffs'][0]['first_index'] == 11 and d['diffs'][0]['n_different'] == 1" "one: JSON"
got one_dcp
expect_rc 1 "torch.save vs DCP, one element" one_dcp
only_fail one_dcp "$W"

# NaN payloads, NaN vs number, +0 vs -0 (bits, not values), bfloat16
got nanp
expect_rc 1 "NaN payload" nanp
only_fail nanp mask
contains "$T/nanp.out" "first at [3]: nan(0x7fc00000) vs nan(0x7fc00001); 1 NaN payload only"
got nann
expect_rc 1 "NaN vs number" nann
contains "$T/nann.out" "nan(0x7fc00000) vs 7; 1 NaN on one side"
got zero
expect_rc 1 "+0 vs -0" zero
only_fail zero mask
contains "$T/zero.out" "first at [1]: 0 vs -0; 1 sign-of-zero only"
got bf16
expect_rc 1 "bfloat16 one ULP" bf16
only_fail bf16 embedding_bf16
contains "$T/bf16.out" "bfloat16[16]: 1 of 16 elements differ, first at [5]"
contains "$T/bf16.out" "max ULP 1"

# non-tensor leaves: by name, floats by their bits
got it
expect_rc 1 "iteration int" it
only_fail it iteration
contains "$T/it.out" "FAIL values        iteration  int: 100 vs 101"
json_true "$T/it.json" "[x['object'] for x in d['diffs']] == ['iteration'] and d['diffs'][0]['kind'] == 'values'" "it: JSON"
got itf
expect_rc 1 "iteration int vs float" itf
contains "$T/itf.out" "FAIL dtype         iteration  int 100 vs float 100.0 (0x1.9000000000000p+6)"
got lr
expect_rc 1 "lr one ULP" lr
only_fail lr lr
contains "$T/lr.out" "0x1.3a92a30553261p-12) vs 0.00030000000000000003 (0x1.3a92a30553262p-12)"
got lrz
expect_rc 1 "lr 0.0 vs -0.0" lrz
contains "$T/lrz.out" "the sign of zero only"
got str
expect_rc 1 "string" str
contains "$T/str.out" 'run_name  str: "gpt-small" vs "gpt-smalL" (first difference at character 8'

# dtype, shape, a tensor on one side only
got dt
expect_rc 1 "dtype" dt
contains "$T/dt.out" "FAIL dtype         mask  float32[4] vs float64[4]"
got sh
expect_rc 1 "shape" sh
contains "$T/sh.out" "FAIL shape         mask  float32[4] vs float32[5]"
got ex
expect_rc 1 "extra optimizer key" ex
only_fail ex "optimizer/state/0/max_exp_avg_sq"
contains "$T/ex.out" "missing_in_a"

# views and shared storages: their logical values (a transposed view is
# reported at its logical index [2,3], its storage's other name at [3,2])
got view
expect_rc 0 "the same values held as a view" view
contains "$T/view.out" "B: 2 tensors non-contiguous, a view or sharing a storage"
lacks "$T/same.out" "non-contiguous"
got viewc
expect_rc 1 "a changed view" viewc
contains "$T/viewc.out" "FAIL values        $W  float32[6,4]: 1 of 24 elements differ, first at [2,3]"
contains "$T/viewc.out" "FAIL values        model_t  float32[4,6]: 1 of 24 elements differ, first at [3,2]"

# --ignore, and an empty comparison
got ign
expect_rc 0 "--ignore iteration" ign
got ignall
expect_rc 66 "--ignore '*'" ignall
contains "$T/ignall.out" "NOTHING COMPARED"

# bad input: 65 with the reason, 66 missing
got trunc
expect_rc 65 "truncated .pt" trunc
contains "$T/trunc.err" "truncated.pt: corrupt torch.save file: a zip archive with no end-of-central-directory record"
got flip
expect_rc 65 "a flipped byte in a tensor record" flip
contains "$T/flip.err" "does not match its CRC-32"
# control: torch.load itself takes the flipped file without complaint
"$PY" -c "import sys, torch; torch.load(sys.argv[1], weights_only=True)" "$G/flipped.pt" 2>"$T/tl.err" ||
  fail "control: torch.load refused the flipped file (the CRC check would not be what catches it)"
got junk
expect_rc 65 "not a checkpoint" junk
contains "$T/junk.err" "not_torch.pt: cannot load as torch.save"
got miss
expect_rc 66 "missing B" miss
contains "$T/miss.err" "nosuch.pt: no such file or directory"
got notdcp
expect_rc 65 "a directory without .metadata" notdcp
got dcpcut
expect_rc 65 "DCP without its .distcp" dcpcut
contains "$T/dcpcut.err" "dcp_cut/__0_0.distcp: a DCP data file: No such file or directory"

# safe by default: a Namespace (Megatron's args) is refused, 65, naming the
# flag; --unsafe-pickle loads it (with a warning) and compares its fields
got ns
expect_rc 65 "weights_only refuses a Namespace" ns
contains "$T/ns.err" "GLOBAL argparse.Namespace"
contains "$T/ns.err" "--unsafe-pickle"
got nsu
expect_rc 0 "--unsafe-pickle" nsu
contains "$T/nsu.err" "warning: --unsafe-pickle"
lacks "$T/same.err" "warning"
got nsd
expect_rc 1 "args only in A" nsd
contains "$T/nsd.out" "args/micro_batch_size  int 2 in A only"
# a DCP .metadata that names another callable is refused unrun; the control
# (--unsafe-pickle) shows the pickle does run it
got evil
expect_rc 65 "a DCP .metadata naming os.mkdir" evil
contains "$T/evil.err" "names posix.mkdir, not a torch.distributed.checkpoint metadata class: refused"
[ -e "$T/ran_evil" ] && fail "the refused .metadata ran its code"
got evilu
[ -d "$T/ran_evil_unsafe" ] || fail "control: with --unsafe-pickle the .metadata's code did not run"
[ "$rc" = 65 ] || fail "--unsafe-pickle on a .metadata that is no Metadata: exit $rc, want 65"

got laughs
expect_rc 65 "memo-shared nested lists expanding to 2^30 leaves" laughs
contains "$T/laughs.err" "entries once its shared references are expanded"
got laughs_small
expect_rc 0 "control: the same structure at 2^10 leaves" laughs_small
got dcpfifo
expect_rc 65 "a DCP .metadata that is a FIFO" dcpfifo
contains "$T/dcpfifo.err" "dcp_fifo/.metadata: its .metadata is a FIFO, not a regular file"
got dcpescape
expect_rc 65 "a DCP .metadata that stores a tensor outside its directory" dcpescape
contains "$T/dcpescape.err" "is stored in '../g/base.pt', outside the directory"

# usage and the C binary
got use2
expect_rc 64 "unknown flag" use2
got nobin
expect_rc 64 "no resumecheck binary" nobin
contains "$T/nobin.err" "/nonexistent/resumecheck: not an executable resumecheck binary"

# as separate processes: the command line itself, usage (one path), RC_BIN
"$PY" -m resumecheck compare-torch "$G/base.pt" "$G/iteration.pt" >"$T/p1.out" 2>"$T/p1.err"
rc=$?
expect_rc 1 "python3 -m resumecheck compare-torch, a process" p1
contains "$T/p1.out" "FAIL values        iteration  int: 100 vs 101"
"$PY" -m resumecheck compare-torch "$G/base.pt" >"$T/p2.out" 2>"$T/p2.err"
rc=$?
expect_rc 64 "one path" p2
# convert: the forms compared, written out; the C compare reads them
"$PY" -m resumecheck convert "$G/base_dcp" "$T/conv" >"$T/conv.out" 2>&1 || fail "convert: exit $?"
[ -f "$T/conv/tensors.safetensors" ] && [ -f "$T/conv/values.json" ] || fail "convert wrote no tensors.safetensors/values.json"
"$RC_BIN" compare "$T/conv/tensors.safetensors" "$T/conv/tensors.safetensors" >/dev/null || fail "the C compare cannot read convert's safetensors"
json_true "$T/conv/values.json" "d['values']['iteration'] == {'type': 'int', 'value': 100} and d['values']['lr']['hex'] == (3e-4).hex()" "values.json"
finish
