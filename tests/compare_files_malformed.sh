#!/usr/bin/env bash
# compare_files_malformed.sh — a .npy, .npz or safetensors file whose header
# is truncated, does not parse, points outside the file or makes tensors
# overlap: `compare` exits 65 with a message naming the file and the
# problem, never crashes or hangs. Then every truncation of a valid file of
# each format, and seeded random byte changes in their headers: the exit is
# 0, 1 or 65, within a time limit. Control: the valid files compare (0).
set -u
: "${RC_BIN:?RC_BIN is not set}" "${RC_SRC:?RC_SRC is not set}"
command -v python3 >/dev/null 2>&1 || { echo "no python3: skipping"; exit 77; }
T=$(mktemp -d /tmp/rc_cmp_bad.XXXXXX)
fails=0
trap 'if [ "$fails" = 0 ]; then rm -rf "$T"; else echo "files kept in $T" >&2; fi' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
GEN="python3 $RC_SRC/tests/compare_tensors_gen.py"

# bad NAME FILE MESSAGE: compare GOOD FILE exits 65 naming FILE and MESSAGE
bad() {
  local name=$1 file=$2 msg=$3 good=$T/good.${2##*.}
  timeout 20 "$RC_BIN" compare "$good" "$file" >"$T/$name.out" 2>&1
  local got=$?
  [ "$got" = 65 ] || fail "$name: exit $got, want 65"
  grep -qF -- "$file: malformed" "$T/$name.out" || fail "$name: message does not name $file"
  grep -qF -- "$msg" "$T/$name.out" || { fail "$name: message lacks '$msg'"; sed 's/^/  | /' "$T/$name.out" >&2; }
}
# edit SRC DST PYTHON: DST = SRC's bytes b after the python statement
edit() {
  python3 - "$1" "$2" "$3" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
exec(sys.argv[3])
open(sys.argv[2], "wb").write(b)
PY
}

$GEN npy "$T/good.npy"; $GEN npz "$T/good.npz" deflated; $GEN st "$T/good.safetensors"
for x in npy npz safetensors; do
  cp "$T/good.$x" "$T/copy.$x"
  "$RC_BIN" compare "$T/good.$x" "$T/copy.$x" >/dev/null 2>&1 || fail "control: valid .$x pair does not compare equal"
done

# .npy
edit "$T/good.npy" "$T/trunc.npy" 'del b[-5:]'
bad npy_trunc "$T/trunc.npy" "truncated: the header declares 64 bytes of data"
edit "$T/good.npy" "$T/magic.npy" 'b[1] = 0x4d'
bad npy_magic "$T/magic.npy" "no .npy magic"
edit "$T/good.npy" "$T/ver.npy" 'b[6] = 9'
bad npy_version "$T/ver.npy" "unknown .npy format version"
edit "$T/good.npy" "$T/hlen.npy" 'b[8:10] = struct.pack("<H", 60000)'
bad npy_hlen "$T/hlen.npy" "the header length runs past the end of the file"
edit "$T/good.npy" "$T/dict.npy" 'i = b.index(b"fortran"); b[i - 1] = ord("x")'
bad npy_dict "$T/dict.npy" "malformed header dict"
edit "$T/good.npy" "$T/shape.npy" 'i = b.index(b"(4, 4)"); b[i + 1] = ord("z")'
bad npy_shape "$T/shape.npy" "malformed 'shape'"
# shape KEY SHAPE: the header's shape replaced (and its length fixed)
shape() {
  edit "$T/good.npy" "$T/$1.npy" "h = struct.unpack('<H', b[8:10])[0]; s = b'$2'; i = b.index(b'(4, 4)'); b[i:i + 6] = s; b[8:10] = struct.pack('<H', h + len(s) - 6)"
}
shape huge "(99999999999, 99999999999, 99999999)"
bad npy_overflow "$T/huge.npy" "shape too large"
shape big "(1000000, 1000000)"
bad npy_big "$T/big.npy" "truncated: the header declares 4000000000000 bytes of data"
: >"$T/empty.npy"
bad npy_empty "$T/empty.npy" "truncated"

# .npz
head -c 200 /dev/urandom >"$T/notzip.npz"
bad npz_notzip "$T/notzip.npz" "not a zip archive"
edit "$T/good.npz" "$T/cd.npz" 'i = b.rindex(b"PK\x05\x06"); b[i + 16:i + 20] = struct.pack("<I", len(b))'
bad npz_cd "$T/cd.npz" "central directory outside the file"
edit "$T/good.npz" "$T/loc.npz" 'i = b.index(b"PK\x01\x02"); b[i + 42:i + 46] = struct.pack("<I", 0x7fffffff)'
bad npz_local "$T/loc.npz" "local header outside the file"
edit "$T/good.npz" "$T/z.npz" 'i = b.index(b"PK\x03\x04"); n = 30 + struct.unpack("<H", b[i + 26:i + 28])[0] + struct.unpack("<H", b[i + 28:i + 30])[0]; b[i + n:i + n + 8] = b"\xff" * 8'
bad npz_deflate "$T/z.npz" "member 'w.npy'"
edit "$T/good.npz" "$T/meth.npz" 'i = b.index(b"PK\x01\x02"); b[i + 10:i + 12] = struct.pack("<H", 12)'
bad npz_method "$T/meth.npz" "compression method 12"

# safetensors
printf 'abc' >"$T/short.safetensors"
bad st_short "$T/short.safetensors" "truncated (shorter than the 8-byte length)"
edit "$T/good.safetensors" "$T/len.safetensors" 'b[0:8] = struct.pack("<Q", 1 << 40)'
bad st_len "$T/len.safetensors" "runs past the end of the file"
$GEN st_raw "$T/json.safetensors" '{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]' 4
bad st_json "$T/json.safetensors" "not valid JSON"
$GEN st_raw "$T/out.safetensors" '{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}' 8
bad st_outside "$T/out.safetensors" "data_offsets outside the data"
$GEN st_raw "$T/ovl.safetensors" '{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}' 12
bad st_overlap "$T/ovl.safetensors" "tensors 'a' and 'b' overlap"
$GEN st_raw "$T/span.safetensors" '{"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}' 8
bad st_span "$T/span.safetensors" "data_offsets span 8 bytes, float32 of 3 elements needs 12"
$GEN st_raw "$T/dt.safetensors" '{"a": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}}' 1
bad st_dtype "$T/dt.safetensors" "unknown dtype 'Q7'"
$GEN st_raw "$T/arr.safetensors" '[1, 2]' 0
bad st_notobj "$T/arr.safetensors" "not a JSON object"

# Every truncation of each valid file, and random changes to its first 160
# bytes (seeded): never a crash (exit >= 128), never a hang (timeout: 124).
python3 - "$T" <<'PY'
import os, random, sys
t = sys.argv[1]
r = random.Random(1234)
os.makedirs(t + "/fz", exist_ok=True)
for x in ("npy", "npz", "safetensors"):
    b = open("%s/good.%s" % (t, x), "rb").read()
    for n in range(0, len(b), 1 if len(b) < 400 else 3):
        open("%s/fz/cut%04d.%s" % (t, n, x), "wb").write(b[:n])
    for k in range(80):
        m = bytearray(b)
        for _ in range(r.randint(1, 4)):
            m[r.randrange(min(160, len(m)))] = r.randrange(256)
        open("%s/fz/mut%04d.%s" % (t, k, x), "wb").write(bytes(m))
PY
n=0
for f in "$T"/fz/*; do
  x=${f##*.}
  timeout 20 "$RC_BIN" compare "$T/good.$x" "$f" >"$T/fz.out" 2>&1
  got=$?
  n=$((n + 1))
  case $got in
    0 | 1 | 65) ;;
    *) fail "$(basename "$f"): exit $got"; sed 's/^/  | /' "$T/fz.out" >&2 ;;
  esac
  case $(basename "$f") in
    cut*) [ "$got" = 65 ] || fail "$(basename "$f"): a truncated file gave exit $got, want 65" ;;
  esac
done
echo "$n damaged files compared"

if [ "$fails" = 0 ]; then echo "all compare_files_malformed checks passed"; fi
exit $((fails > 0))
