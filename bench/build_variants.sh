#!/usr/bin/env bash
# build_variants.sh — CUDA modules that differ from a build's in one kernel
# file's tuning constants, for the "variants" part of bench/gpu_session.sh.
#
#   bash bench/build_variants.sh BUILD SPEC OUTDIR
#
# BUILD is a configured and built tree (CMake writes its
# compile_commands.json: the root CMakeLists asks for it). SPEC has a line a
# variant, "name kernels/file.cu MACRO=value ...", '#' starting a comment;
# values may hold commas (GROUPED_TILE=cute::Shape<cute::_128,cute::_128,cute::_64>)
# but no spaces. For each, the one file is compiled again with the build's own
# command and the macros defined in a header given to nvcc with --pre-include
# (nvcc splits a -D value at its commas), and the module is linked again from
# the build's objects with that one replaced: OUTDIR/name.so. The kernels
# keep every tuning constant behind #ifndef, so a variant changes nothing
# else. The nvcc output (with RC_VARIANT_PTXAS=1, -Xptxas -v: registers and
# spills) goes to OUTDIR/name.ptxas. RC_VARIANT_PACK=1 strips the debug
# sections and gzips each module (OUTDIR/name.so.gz, ~2 MB where the .so is
# ~10: small enough to carry a dozen to the GPU machine, whose session
# script unpacks them). RC_VARIANT_JOBS variants build at once (default:
# the cores). Nothing here runs a GPU.
set -euo pipefail
[ $# -eq 3 ] || {
  echo "usage: $0 BUILD SPEC OUTDIR" >&2
  exit 2
}
BUILD=$(cd "$1" && pwd)
SPEC=$2
OUTDIR=$3
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
CC_JSON="$BUILD/compile_commands.json"
LINK="$BUILD/CMakeFiles/resumecheck_cuda.dir/link.txt"
OBJS="$BUILD/CMakeFiles/resumecheck_cuda.dir/objects1"
for f in "$CC_JSON" "$LINK" "$OBJS"; do
  [ -f "$f" ] || {
    echo "$0: $f is missing: configure and build $BUILD first (the CUDA module)" >&2
    exit 2
  }
done

# the build's compile command for SOURCE (its directory first), one line
compile_command() {
  python3 - "$CC_JSON" "$1" << 'EOF'
import json, os, shlex, sys
entries = json.load(open(sys.argv[1]))
want = os.path.realpath(sys.argv[2])
for e in entries:
    if os.path.realpath(os.path.join(e["directory"], e["file"])) == want:
        cmd = e.get("command") or shlex.join(e["arguments"])
        print(e["directory"])
        print(cmd)
        sys.exit(0)
sys.exit(f"no compile command for {sys.argv[2]} in {sys.argv[1]}")
EOF
}

# one variant: NAME FILE MACROS... -> OUTDIR/NAME.so (or .so.gz packed)
build_one() {
  local name=$1 file=$2
  shift 2
  local src dir cmd obj_rel hdr obj link m
  local -a cc extra
  src=$(cd "$(dirname "$file")" && pwd)/$(basename "$file")
  mapfile -t cc < <(compile_command "$src")
  [ ${#cc[@]} -eq 2 ] || return 1
  dir=${cc[0]} cmd=${cc[1]}
  obj_rel=$(sed -E 's/.* -o ([^ ]+).*/\1/' <<< "$cmd")
  hdr="$OUTDIR/$name.h"
  {
    echo "/* variant $name of $file */"
    for m in "$@"; do echo "#define ${m%%=*} ${m#*=}"; done
  } > "$hdr"
  obj="$OUTDIR/$name.o"
  extra=(--pre-include "$hdr")
  [ "${RC_VARIANT_PTXAS:-0}" = 1 ] && extra+=(-Xptxas -v)
  # the build's command with the object elsewhere and the macros' header first
  (cd "$dir" && eval "${cmd/ -o $obj_rel/ -o $obj} ${extra[*]}") 2> "$OUTDIR/$name.ptxas" || {
    echo "variant $name: the compile failed:" >&2
    grep -m 20 -E "error|Error" "$OUTDIR/$name.ptxas" >&2
    return 1
  }
  # the module's objects with this one swapped, linked by the build's own line
  tr -s ' \n' '\n\n' < "$OBJS" | grep -v '^$' |
    sed "s|^$obj_rel\$|$obj|; s|^\([^/]\)|$BUILD/\1|" > "$OUTDIR/$name.objects"
  grep -qx "$obj" "$OUTDIR/$name.objects" || {
    echo "$0: $BUILD/$obj_rel is not among the module's objects" >&2
    return 1
  }
  link=$(sed "s|-o libresumecheck_cuda.so|-o $OUTDIR/$name.so|; s|@CMakeFiles/resumecheck_cuda.dir/objects1|@$OUTDIR/$name.objects|" "$LINK")
  (cd "$BUILD" && eval "$link") || return 1
  rm -f "$obj" "$OUTDIR/$name.objects"
  if [ "${RC_VARIANT_PACK:-0}" = 1 ]; then
    strip --strip-debug "$OUTDIR/$name.so" && gzip -f "$OUTDIR/$name.so" || return 1
  fi
  echo "variant $name: $file $*"
}

# the variants RC_VARIANT_JOBS at a time (default: the cores), then each one's status
jobs_max=${RC_VARIANT_JOBS:-$(nproc)}
pids=() names=()
while read -r name file macros; do
  case "$name" in "" | \#*) continue ;; esac
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do sleep 1; done
  # shellcheck disable=SC2086 # the macros are words
  build_one "$name" "$file" $macros &
  pids+=($!) names+=("$name")
done < "$SPEC"
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || {
    echo "variant ${names[$i]}: FAILED" >&2
    failed=$((failed + 1))
  }
done
echo "$((${#pids[@]} - failed)) of ${#pids[@]} variant module(s) in $OUTDIR"
[ "$failed" -eq 0 ]
