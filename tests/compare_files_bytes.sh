#!/usr/bin/env bash
# compare_files_bytes.sh — what `compare` says about two files that are not
# HDF5: how many bytes differ and in which ranges (merged when adjacent,
# also across the read chunks), sizes that differ; and .npy / .npz /
# safetensors compared tensor by tensor (name, index, NaN, ULP). Each case
# has its control: identical files report nothing.
set -u
: "${RC_BIN:?RC_BIN is not set}" "${RC_SRC:?RC_SRC is not set}"
command -v python3 >/dev/null 2>&1 || { echo "no python3: skipping"; exit 77; }
T=$(mktemp -d /tmp/rc_cmp_bytes.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
GEN="python3 $RC_SRC/tests/compare_tensors_gen.py"

# cmp NAME WANT A B: compare A B --json, output in $T/NAME.{out,json}
cmp() {
  local name=$1 want=$2
  "$RC_BIN" compare "$3" "$4" --json "$T/$name.json" >"$T/$name.out" 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then
    fail "$name: exit $got, want $want"
    sed 's/^/  | /' "$T/$name.out" >&2
  fi
}
has() { grep -qF -- "$2" "$T/$1.out" || { fail "$1: output lacks: $2"; sed 's/^/  | /' "$T/$1.out" >&2; }; }
hasnt() { if grep -qF -- "$2" "$T/$1.out"; then fail "$1: output should not contain: $2"; fi; }
# js NAME EXPR: EXPR true of the JSON (d), its first failing diff (f)
js() {
  python3 - "$T/$1.json" "$2" <<'PY' || fail "$1: JSON: $2"
import json, sys
d = json.load(open(sys.argv[1]))
fl = [x for x in d.get("diffs", []) if x["failing"]]
f = fl[0] if fl else {}
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
# poke FILE OFFSET [BYTE]: overwrite one byte (default: its complement)
poke() {
  python3 - "$@" <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read())
b[off] = int(sys.argv[3]) if len(sys.argv) > 3 else b[off] ^ 0xff
open(p, "wb").write(b)
PY
}

# ---- raw bytes -------------------------------------------------------------
head -c 300000 /dev/urandom >"$T/a.bin"
cp "$T/a.bin" "$T/same.bin"
cmp same 0 "$T/a.bin" "$T/same.bin"
js same "d['verdict'] == 'identical' and d['diffs'] == []"
# the report's name (harness/schema.h): resumecheck.compare-report, schema_version 2, no old `version`
js same "d['schema'] == 'resumecheck.compare-report' and d['schema_version'] == 2 and 'version' not in d"

cp "$T/a.bin" "$T/one.bin"; poke "$T/one.bin" 1000
cmp one 1 "$T/a.bin" "$T/one.bin"
has one "1 byte differs, in 1 range: [1000, 1001)"
js one "f['kind'] == 'bytes' and f['n_bytes_different'] == 1 and f['n_ranges'] == 1 and f['ranges'] == [[1000, 1001]] and f['size_a'] == f['size_b'] == 300000"

cp "$T/a.bin" "$T/two.bin"; poke "$T/two.bin" 5000; poke "$T/two.bin" 5100
cmp two 1 "$T/a.bin" "$T/two.bin"
has two "2 bytes differ, in 2 ranges: [5000, 5001), [5100, 5101)"
js two "f['ranges'] == [[5000, 5001], [5100, 5101]]"

# four adjacent bytes across a 64-byte block boundary: one range
cp "$T/a.bin" "$T/adj.bin"; for o in 126 127 128 129; do poke "$T/adj.bin" $o; done
cmp adj 1 "$T/a.bin" "$T/adj.bin"
has adj "4 bytes differ, in 1 range: [126, 130)"

# across the 4 MiB read chunk: still one range (the pass is streamed)
head -c 5000000 /dev/urandom >"$T/big.bin"
cp "$T/big.bin" "$T/big2.bin"
for o in 4194302 4194303 4194304 4194305; do poke "$T/big2.bin" $o; done
cmp chunk 1 "$T/big.bin" "$T/big2.bin"
has chunk "4 bytes differ, in 1 range: [4194302, 4194306)"

# many ranges: the first 8 listed, the count of all
cp "$T/a.bin" "$T/many.bin"; for i in $(seq 0 19); do poke "$T/many.bin" $((10000 + 10 * i)); done
cmp many 1 "$T/a.bin" "$T/many.bin"
has many "20 bytes differ, in 20 ranges: [10000, 10001)"
has many "and 12 more"
js many "f['n_ranges'] == 20 and len(f['ranges']) == 8 and f['n_bytes_different'] == 20"

# sizes differ: said, counted over the common prefix
cp "$T/a.bin" "$T/long.bin"; printf 'tail' >>"$T/long.bin"
cmp long 1 "$T/a.bin" "$T/long.bin"
has long "300000 vs 300004 bytes (sizes differ: B is 4 bytes longer; counted over the common 300000), no byte of the common 300000 differs"
js long "f['n_bytes_different'] == 0 and f['n_ranges'] == 0 and f['size_b'] == 300004"
poke "$T/long.bin" 7
cmp long2 1 "$T/a.bin" "$T/long.bin"
has long2 "1 byte differs, in 1 range: [7, 8)"

# ---- .npy ------------------------------------------------------------------
$GEN npy "$T/a.npy"; $GEN npy "$T/same.npy"
cmp npy_same 0 "$T/a.npy" "$T/same.npy"
$GEN npy "$T/c.npy" change 6 42.5
cmp npy_one 1 "$T/a.npy" "$T/c.npy"
has npy_one " a  float32[4,4]: 1 of 16 elements differ, first at [1,2]: 7 vs 42.5; max |a-b| 35.5"
js npy_one "f['kind'] == 'values' and f['object'] == 'a' and f['first_index'] == 6 and f['n_different'] == 1 and f['n_elements'] == 16"
$GEN npy "$T/f1.npy" fortran; $GEN npy "$T/f2.npy" fortran change 6 42.5
cmp npy_fortran 1 "$T/f1.npy" "$T/f2.npy"
has npy_fortran "first at [2,1]"
$GEN npy "$T/v2a.npy" v2 be8; $GEN npy "$T/v2b.npy" v2 be8 ulp
cmp npy_be 1 "$T/v2a.npy" "$T/v2b.npy"
has npy_be "float64be[4,4]: 1 of 16 elements differ, first at [0,3]"
js npy_be "f['max_ulp'] == 1"
$GEN npy "$T/s.npy" shape4x2
cmp npy_shape 1 "$T/a.npy" "$T/s.npy"
js npy_shape "f['kind'] == 'shape'"
$GEN npy "$T/i.npy" i8
cmp npy_dtype 1 "$T/a.npy" "$T/i.npy"
has npy_dtype "float32[4,4] vs int64[4,4]"
# a directory of state files: the tensor is named after its file
mkdir -p "$T/da" "$T/db"; cp "$T/a.npy" "$T/da/exp_avg.npy"; cp "$T/c.npy" "$T/db/exp_avg.npy"
cmp npy_dir 1 "$T/da" "$T/db"
has npy_dir "exp_avg.npy:exp_avg  float32[4,4]"

# ---- .npz: stored and deflated ---------------------------------------------
for m in stored deflated; do
  $GEN npz "$T/$m.a.npz" $m; $GEN npz "$T/$m.same.npz" $m; $GEN npz "$T/$m.c.npz" $m change
  $GEN npz "$T/$m.d.npz" $m drop
  cmp npz_${m}_same 0 "$T/$m.a.npz" "$T/$m.same.npz"
  cmp npz_${m}_one 1 "$T/$m.a.npz" "$T/$m.c.npz"
  has npz_${m}_one "w  float32[4,4]: 1 of 16 elements differ, first at [1,1]: 6 vs 99"
  js npz_${m}_one "f['object'] == 'w' and f['first_index'] == 5 and d['datasets_compared'] == 2"
  cmp npz_${m}_drop 1 "$T/$m.a.npz" "$T/$m.d.npz"
  js npz_${m}_drop "f['kind'] == 'missing_in_b' and f['object'] == 'step'"
done
# same tensors, different container bytes: informational, like HDF5 metadata
cmp npz_container 0 "$T/stored.a.npz" "$T/deflated.a.npz"
has npz_container "every tensor is equal (zip metadata only"

# ---- safetensors -----------------------------------------------------------
$GEN st "$T/a.safetensors"; $GEN st "$T/same.safetensors"
cmp st_same 0 "$T/a.safetensors" "$T/same.safetensors"
$GEN st "$T/nan.safetensors" nan
cmp st_nan 1 "$T/a.safetensors" "$T/nan.safetensors"
has st_nan "model.w  float32[4,4]: 1 of 16 elements differ, first at [0,0]: 1 vs nan(0x7fc00000); 1 NaN on one side"
hasnt st_nan "max |a-b|"
js st_nan "f['n_nan_mismatch'] == 1 and f['object'] == 'model.w'"
$GEN st "$T/ulp.safetensors" bf16ulp
cmp st_bf16 1 "$T/a.safetensors" "$T/ulp.safetensors"
has st_bf16 "model.b  bfloat16[8]: 1 of 8 elements differ, first at [6]"
has st_bf16 "max ULP 1"
js st_bf16 "f['max_ulp'] == 1"
$GEN st "$T/extra.safetensors" extra
cmp st_extra 1 "$T/a.safetensors" "$T/extra.safetensors"
js st_extra "f['kind'] == 'missing_in_a' and f['object'] == 'opt.step'"
$GEN st "$T/dt.safetensors" dtype
cmp st_dtype 1 "$T/a.safetensors" "$T/dt.safetensors"
has st_dtype "bfloat16[8] vs float16[8]"
$GEN st "$T/m1.safetensors" meta 1; $GEN st "$T/m2.safetensors" meta 2
cmp st_meta 1 "$T/m1.safetensors" "$T/m2.safetensors"
has st_meta "(every tensor equal: the header differs)"

if [ "$fails" = 0 ]; then echo "all compare_files_bytes checks passed"; fi
exit $((fails > 0))
