#!/usr/bin/env bash
# Compile check of the NPU path: compiles every NPU source (csrc/core/npu/*.cpp, csrc/ops/*/npu.cpp) against the real torch_npu headers, without
# installing or importing torch_npu (no CANN, no NPU needed).
#
# The torch_npu wheel is downloaded once with `pip download --no-deps` into a cache directory and only its
# include/ tree is unpacked; later runs reuse it (idempotent, no network). A compile error fails the script.
#
# Usage: tools/npu_compile_check.sh [PYTHON]        (PYTHON: an interpreter with torch installed;
#                                                     default .venv/bin/python, else python3)
# Environment:
#   TORCH_NPU_VERSION   torch_npu wheel version (default: the release table's default, tools/releases.py);
#                       -DCURRENT_VERSION=V<major>R<minor> follows it
#   NPU_CHECK_CACHE     cache directory (default <repo>/build/npu-check, gitignored)
#   NPU_CHECK_MODE      -fsyntax-only (default) or -c (full compile, objects in the cache directory)
#   NPU_CHECK_JOBS      parallel compiles (default 2)
#   NPU_CHECK_ARCH      x86_64 (default) or aarch64: the platform of the torch_npu wheel; aarch64 compiles with
#                       aarch64-linux-gnu-g++ (CXX overrides) and caches under <cache>/*-aarch64
#   NPU_CHECK_TORCH_DIR a torch package directory of the same version to take the headers from instead of
#                       PYTHON's (e.g. the unpacked aarch64 wheel); PYTHON still gives the include layout and ABI
#   NPU_CHECK_PY_INCLUDE  the Python include directory to use instead of PYTHON's
# tools/aarch64/run.sh npu-check runs the aarch64 check (make npu-check runs both).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${1:-}"
if [[ -z "$PY" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
VERSION="${TORCH_NPU_VERSION:-$("$PY" "$ROOT/tools/releases.py" get default.torch_npu)}"
CACHE="${NPU_CHECK_CACHE:-$ROOT/build/npu-check}"
MODE="${NPU_CHECK_MODE:--fsyntax-only}"
JOBS="${NPU_CHECK_JOBS:-2}"
ARCH="${NPU_CHECK_ARCH:-x86_64}"
case "$ARCH" in
  x86_64) DEFAULT_CXX=g++; SUFFIX="" ;;
  aarch64) DEFAULT_CXX=aarch64-linux-gnu-g++; SUFFIX="-aarch64" ;;
  *) echo "npu-check: NPU_CHECK_ARCH must be x86_64 or aarch64, not $ARCH" >&2; exit 2 ;;
esac
CXX="${CXX:-$DEFAULT_CXX}"

major="${VERSION%%.*}"
rest="${VERSION#*.}"
minor="${rest%%.*}"
CURRENT_VERSION="V${major}R${minor}"

mkdir -p "$CACHE"
WHEEL_DIR="$CACHE/wheels/$VERSION$SUFFIX"
HEADERS="$CACHE/torch_npu-$VERSION$SUFFIX"

# 1. The wheel (any manylinux $ARCH cp311 build of that version: only its headers are used).
wheel="$(ls "$WHEEL_DIR"/torch_npu-"$VERSION"-*"$ARCH".whl 2>/dev/null | head -n1 || true)"
if [[ -z "$wheel" ]]; then
  mkdir -p "$WHEEL_DIR"
  echo "npu-check: downloading torch_npu==$VERSION (headers only are used) into $WHEEL_DIR"
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
    --platform "manylinux_2_28_$ARCH" --platform "manylinux2014_$ARCH" \
    -d "$WHEEL_DIR" "torch-npu==$VERSION"
  wheel="$(ls "$WHEEL_DIR"/torch_npu-"$VERSION"-*"$ARCH".whl | head -n1)"
fi

# 2. Its include/ tree, unpacked once (stamp written last, so an interrupted unpack is redone).
if [[ ! -f "$HEADERS/.unpacked" ]]; then
  rm -rf "$HEADERS"
  mkdir -p "$HEADERS"
  "$PY" - "$wheel" "$HEADERS" <<'PYEOF'
import sys, zipfile
wheel, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith("torch_npu/include/")])
PYEOF
  touch "$HEADERS/.unpacked"
fi
NPU_INC="$HEADERS/torch_npu/include"

# 3. torch's include paths and ABI flag from the given interpreter.
mapfile -t TORCH_FLAGS < <("$PY" - <<'PYEOF'
import os, sysconfig, torch
from torch.utils.cpp_extension import include_paths
here = os.path.dirname(torch.__file__)
there = os.environ.get("NPU_CHECK_TORCH_DIR") or here
for p in include_paths():
    print("-I" + os.path.join(there, os.path.relpath(p, here)))
print("-I" + (os.environ.get("NPU_CHECK_PY_INCLUDE") or sysconfig.get_paths()["include"]))
print("-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
PYEOF
)

# hit_cache_ext's form, from the headers as setup.py reads it
LEVEL_FORM=0
grep -qF "const uint32_t level, Args&&... args" "$NPU_INC/third_party/op-plugin/op_plugin/utils/op_api_common_base.h" \
  2>/dev/null && LEVEL_FORM=1
FLAGS=(-std=c++20 -fPIC -Wall -Wno-unused-function -Werror=return-type
       "-DCURRENT_VERSION=$CURRENT_VERSION" "-DNPU_EXT_TORCH_NPU_VERSION=$((major * 100 + minor))"
       "-DNPU_EXT_HIT_CACHE_LEVEL=$LEVEL_FORM"
       -DTORCH_EXTENSION_NAME=_C_npu -DNPU_EXT_NPU_MODULE
       "-I$ROOT/csrc"
       "-I$NPU_INC" "-I$NPU_INC/third_party/op-plugin" "-I$NPU_INC/third_party/acl/inc"
       "-I$NPU_INC/third_party/hccl/inc"
       "${TORCH_FLAGS[@]}")

mapfile -t SOURCES < <(cd "$ROOT" && ls csrc/core/npu/*.cpp csrc/ops/*/npu.cpp)
[[ ${#SOURCES[@]} -gt 0 ]] || { echo "npu-check: no NPU sources (csrc/core/npu/*.cpp, csrc/ops/*/npu.cpp)" >&2; exit 1; }
echo "npu-check: compiling ${#SOURCES[@]} sources ($MODE, $ARCH, $CXX) against torch_npu $VERSION headers, CURRENT_VERSION=$CURRENT_VERSION"

OBJ="$CACHE/obj$SUFFIX"
mkdir -p "$OBJ"
fail=0
pids=()
names=()
for src in "${SOURCES[@]}"; do
  name="$(echo "${src%.cpp}" | tr / _)"
  if [[ "$MODE" == "-c" ]]; then out=(-c -o "$OBJ/$name.o"); else out=(-fsyntax-only); fi
  ( cd "$ROOT" && "$CXX" "${FLAGS[@]}" "${out[@]}" "$src" ) > "$OBJ/$name.log" 2>&1 &
  pids+=($!)
  names+=("$src")
  if [[ ${#pids[@]} -ge $JOBS ]]; then
    if ! wait "${pids[0]}"; then echo "npu-check: FAILED ${names[0]}"; cat "$OBJ/$(echo "${names[0]%.cpp}" | tr / _).log"; fail=1; else echo "npu-check: ok ${names[0]}"; fi
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then echo "npu-check: FAILED ${names[$i]}"; cat "$OBJ/$(echo "${names[$i]%.cpp}" | tr / _).log"; fail=1; else echo "npu-check: ok ${names[$i]}"; fi
done
if [[ $fail -ne 0 ]]; then
  echo "npu-check: compile errors against the torch_npu $VERSION headers" >&2
  exit 1
fi
echo "npu-check: all ${#SOURCES[@]} NPU sources compile against torch_npu $VERSION ($ARCH)"
