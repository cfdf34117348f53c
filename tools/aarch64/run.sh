#!/usr/bin/env bash
# aarch64 (Kunpeng 920 class) build and test on an x86-64 host: the unmodified sources are cross-compiled
# with aarch64-linux-gnu-g++ against the default torch's aarch64 wheel, and the test suite runs on Debian's arm64
# python3.11 under qemu-user emulating a Neoverse N1 (armv8.2-a, NEON, no SVE, like Kunpeng 920).
#
# Usage: tools/aarch64/run.sh [all|setup|build|test|npu-check [PYTHON]|python ARGS...]     (make test-aarch64 = all)
#   setup   install the Debian tools if missing (g++-aarch64-linux-gnu, qemu-user, ninja-build), build the
#           arm64 sysroot (python3.11 and its libraries, Debian's arm64 packages unpacked with dpkg -x),
#           unpack the torch aarch64 wheel and install the test dependencies (pip --target, aarch64
#           wheels), build stub libraries for the CUDA libraries torch links (cuda_stubs.py), write an ARM
#           /proc/cpuinfo and midr_el1 files into the sysroot, register qemu-aarch64 with binfmt_misc
#   build   cross-build torch_ext._C for aarch64: setup.py runs under the emulated python (so setup.py sees
#           an aarch64 machine and compiles the kernels once, DEFAULT variant) with the host cross compiler
#   test    pytest under emulation (QEMU_CPU, default neoverse-n1), the whole suite but the tests marked arch_independent
#           below names tests that cannot run emulated, spread over TEST_WORKERS processes (default: one per
#           core); extra args go to pytest
#   npu-check [PYTHON]  tools/npu_compile_check.sh for aarch64: every NPU source (csrc/core/npu, csrc/ops/*/npu.cpp) compiled with the cross
#           compiler against the aarch64 torch_npu wheel's headers and the aarch64 torch headers (PYTHON: a
#           host python with the default torch, default .venv/bin/python; part of make npu-check)
#   python  the emulated python with this environment (e.g. tools/aarch64/run.sh python -c 'import torch')
# Everything is cached under build/aarch64 (gitignored; NPU_EXT_AARCH64_DIR overrides): downloads, the
# sysroot, the site-packages, the stubs and the build. Each step is skipped when its stamp is present, so
# reruns do no download and rebuild only when a source changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tools/aarch64"
A="${NPU_EXT_AARCH64_DIR:-$ROOT/build/aarch64}"
SYSROOT="$A/sysroot"
SITE="$A/site"
STUBS="$A/cuda-stubs"
WHEELS="$A/wheels"
EXT="$A/ext"                          # setup.py build --build-base: lib/ holds the aarch64 torch_ext package
HOST_PY="${HOST_PYTHON:-python3}"     # any host python with pip: only downloads and unpacks
# the default torch of the release table (torch_ext/releases.json), unless NPU_EXT_AARCH64_TORCH names another
TORCH_VERSION="${NPU_EXT_AARCH64_TORCH:-$("$HOST_PY" "$ROOT/tools/releases.py" get default.torch)}"

# Debian arm64 packages of the sysroot: python3.11 with its stdlib and headers, and every shared library they
# and the torch wheel load (no dependency resolution: a fixed list, newest bookworm versions).
DEBS=(python3.11 python3.11-minimal libpython3.11 libpython3.11-minimal libpython3.11-stdlib libpython3.11-dev
      libc6 libgcc-s1 libstdc++6 libgomp1 zlib1g libexpat1 libffi8 libssl3 libbz2-1.0 liblzma5 libuuid1
      libsqlite3-0 libncursesw6 libtinfo6 libreadline8 libcrypt1 libdb5.3 libgdbm6 libnsl2 libtirpc3
      libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2 libzstd1 media-types)

log() { echo "aarch64: $*"; }
now() { date +%s; }

export NPU_EXT_AARCH64_SYSROOT="$SYSROOT"
export QEMU_LD_PREFIX="$SYSROOT"
export QEMU_CPU="${QEMU_CPU:-neoverse-n1}"

# ------------------------------------------------------------------------------------------------ setup
install_tools() {
  local missing=()
  command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
  command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
  command -v ninja >/dev/null || missing+=(ninja-build)
  command -v dpkg-deb >/dev/null || missing+=(dpkg)
  if [[ ${#missing[@]} -gt 0 ]]; then
    log "installing ${missing[*]}"
    local sudo=(); [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

build_sysroot() {
  [[ -f "$SYSROOT/.stamp" ]] && return
  local apt="$A/apt"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
  local opts=(-q -oAPT::Architecture=arm64 -oAPT::Architectures=arm64 "-oDir::State::Lists=$apt/lists"
              "-oDir::Cache=$apt/cache" -oDir::State::Status=/dev/null -oDebug::NoLocking=1)
  if [[ ! -f "$apt/.stamp-update" ]]; then
    log "apt-get update (arm64 package lists, into $apt/lists)"
    apt-get "${opts[@]}" update >/dev/null
    touch "$apt/.stamp-update"
  fi
  log "downloading ${#DEBS[@]} arm64 packages"
  (cd "$apt/debs" && apt-get "${opts[@]}" download "${DEBS[@]}" >/dev/null)
  rm -rf "$SYSROOT"
  mkdir -p "$SYSROOT"
  for deb in "$apt/debs"/*.deb; do dpkg-deb -x "$deb" "$SYSROOT"; done
  # Debian's usrmerge: /lib -> usr/lib (the loader path /lib/ld-linux-aarch64.so.1 must resolve)
  for d in lib bin sbin; do
    if [[ -d "$SYSROOT/$d" && ! -L "$SYSROOT/$d" ]]; then
      mkdir -p "$SYSROOT/usr/$d"; cp -a "$SYSROOT/$d/." "$SYSROOT/usr/$d/"; rm -rf "$SYSROOT/$d"
    fi
    [[ -e "$SYSROOT/$d" ]] || ln -s "usr/$d" "$SYSROOT/$d"
  done
  byte_compile "$SYSROOT/usr/lib/python3.11"   # Debian's packages ship no .pyc (their postinst compiles them)
  touch "$SYSROOT/.stamp"
}

# Python's bytecode, compiled natively by the host's Python 3.11 (the same bytecode as the sysroot's 3.11, whatever the
# architecture): otherwise every emulated interpreter compiles what it imports under qemu, and on a fresh machine
# the emulated suite's workers spent about 3 minutes doing so (the stdlib, torch's unpacked wheel).
byte_compile() {
  "$HOST_PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || return 0
  "$HOST_PY" -m compileall -q -j 0 "$1" >/dev/null 2>&1 || true   # (a few files of the stdlib's tests are not Python 3)
}

# An ARM /proc/cpuinfo and midr_el1 files (Kunpeng 920: implementer 0x48 HiSilicon, part 0xd01): PyTorch's
# cpuinfo and oneDNN read them, and qemu -L looks absolute paths up in the sysroot first. Without them
# `import torch` crashes under qemu-user (it would read the host's x86 /proc/cpuinfo).
fake_cpu_files() {
  local n; n="$(nproc)"
  [[ -f "$SYSROOT/.stamp-cpu-$n" ]] && return
  rm -rf "$SYSROOT/proc" "$SYSROOT/sys" "$SYSROOT"/.stamp-cpu-*
  mkdir -p "$SYSROOT/proc" "$SYSROOT/sys/devices/system/cpu"
  : > "$SYSROOT/proc/cpuinfo"
  for ((i = 0; i < n; i++)); do
    cat >> "$SYSROOT/proc/cpuinfo" <<EOF
processor	: $i
BogoMIPS	: 200.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma dcpop asimddp asimdfhm
CPU implementer	: 0x48
CPU architecture: 8
CPU variant	: 0x1
CPU part	: 0xd01
CPU revision	: 0

EOF
    mkdir -p "$SYSROOT/sys/devices/system/cpu/cpu$i/regs/identification"
    echo 0x00000000481fd010 > "$SYSROOT/sys/devices/system/cpu/cpu$i/regs/identification/midr_el1"
    echo 0x0000000000000000 > "$SYSROOT/sys/devices/system/cpu/cpu$i/regs/identification/revidr_el1"
  done
  echo "0-$((n - 1))" > "$SYSROOT/sys/devices/system/cpu/possible"
  echo "0-$((n - 1))" > "$SYSROOT/sys/devices/system/cpu/present"
  echo "0-$((n - 1))" > "$SYSROOT/sys/devices/system/cpu/online"
  touch "$SYSROOT/.stamp-cpu-$n"
}

install_site() {
  local req="$HERE/requirements.txt"
  local stamp="$SITE/.stamp-$TORCH_VERSION-$(sha256sum "$req" | cut -c1-16)"
  [[ -f "$stamp" ]] && return
  mkdir -p "$WHEELS"
  local whl
  whl="$(ls "$WHEELS"/torch-"$TORCH_VERSION"-cp311-cp311-*aarch64.whl 2>/dev/null | head -n1 || true)"
  if [[ -z "$whl" ]]; then
    log "downloading the torch $TORCH_VERSION aarch64 wheel (about 430 MB, once)"
    "$HOST_PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux_2_28_aarch64 -d "$WHEELS" "torch==$TORCH_VERSION"
    whl="$(ls "$WHEELS"/torch-"$TORCH_VERSION"-cp311-cp311-*aarch64.whl | head -n1)"
  fi
  rm -rf "$SITE"
  mkdir -p "$SITE"
  log "installing the test dependencies (aarch64 wheels, pip --target)"
  # Lines marked "# no-deps" (packages that depend on torch, which is unpacked below instead) are installed
  # without their dependencies; the file lists those it needs.
  local pip_target=("$HOST_PY" -m pip install --quiet --target "$SITE" --only-binary=:all: --python-version 3.11
    --implementation cp --abi cp311 --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64
    --cache-dir "$A/pip-cache" --root-user-action=ignore)
  "${pip_target[@]}" -r <(grep -v "# no-deps" "$req") 2> >(grep -v "^WARNING: Location" >&2)
  "${pip_target[@]}" --no-deps -r <(grep "# no-deps" "$req" | sed 's/#.*//') 2> >(grep -v "^WARNING: Location" >&2)
  log "unpacking $(basename "$whl") (without its NVIDIA dependencies)"
  "$HOST_PY" - "$whl" "$SITE" <<'EOF'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
EOF
  rm -rf "$SITE/bin"            # console scripts with the host's shebang
  byte_compile "$SITE/torch"     # (pip compiled the other packages it installed)
  touch "$stamp"
}

build_stubs() {
  [[ -f "$STUBS/.stamp" ]] && return
  rm -rf "$STUBS"
  log "building stub libraries for the CUDA libraries torch links"
  "$HOST_PY" "$HERE/../cuda_stubs.py" "$SITE/torch/lib" "$SYSROOT" "$STUBS" | sed 's/^/  /'
  touch "$STUBS/.stamp"
}

# binfmt_misc: tests and torch start subprocesses (sys.executable = the sysroot's aarch64 python), which the
# kernel can only run through qemu-aarch64 registered as the interpreter of aarch64 ELF files. qemu-user
# resolves the exec path in the sysroot (-L / QEMU_LD_PREFIX), and the child inherits QEMU_LD_PREFIX/QEMU_CPU.
BINFMT=/proc/sys/fs/binfmt_misc
binfmt_ready() {
  [[ -f "$BINFMT/status" ]] && grep -qs '^enabled' "$BINFMT/status" || return 1
  for f in "$BINFMT"/*aarch64*; do
    [[ -f "$f" ]] && grep -qs '^enabled' "$f" && return 0
  done
  return 1
}
register_binfmt() {
  binfmt_ready && return 0
  [[ $(id -u) -eq 0 ]] || return 1
  [[ -f "$BINFMT/register" ]] || mount -t binfmt_misc binfmt_misc "$BINFMT" 2>/dev/null || return 1
  local qemu; qemu="$(command -v qemu-aarch64)"
  printf '%s' ":qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:$qemu:" \
    > "$BINFMT/register" 2>/dev/null || return 1
  binfmt_ready
}

setup() {
  local t0; t0=$(now)
  install_tools
  build_sysroot
  fake_cpu_files
  install_site
  build_stubs
  if register_binfmt; then log "binfmt_misc: aarch64 binaries run through qemu-aarch64"
  else log "binfmt_misc: cannot register qemu-aarch64 (not root, or binfmt_misc cannot be mounted)"; fi
  log "setup done in $(($(now) - t0)) s"
}

# -------------------------------------------------------------------------------------- the emulated python
# PYTHONPATH: the cross-built package (EXT/lib) first, then the aarch64 site-packages. python -P keeps the
# current directory (the repository, whose torch_ext/ has no aarch64 module) out of sys.path.
emu_env() {
  export PYTHONPATH="$EXT/lib:$SITE"
  export LD_LIBRARY_PATH="$STUBS"
  export PYTHONNOUSERSITE=1
  export CC=aarch64-linux-gnu-gcc CXX="$HERE/cxx" LDSHARED="$HERE/cxx -shared"
  # compile jobs: 1 on a shared development machine, every core in CI (CI=true)
  export MAX_JOBS="${MAX_JOBS:-$([[ "${CI:-}" == true ]] && nproc || echo 1)}"
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
  export TORCH_DEVICE_BACKEND_AUTOLOAD=0 NPU_EXT_BUILD_NPU=0 NPU_EXT_EMULATED=1
  export TORCHINDUCTOR_CACHE_DIR="$A/inductor-cache"
}
emu_python() {
  emu_env
  qemu-aarch64 "$SYSROOT/usr/bin/python3.11" -P "$@"
}

# ------------------------------------------------------------------------------------------------ build
build() {
  local so stamp
  so="$(ls "$EXT"/lib/torch_ext/_C.cpython-311-aarch64-linux-gnu.so 2>/dev/null || true)"
  if [[ -n "$so" ]] && [[ -z "$(cd "$ROOT" && find setup.py csrc torch_ext -newer "$so" \( -name '*.cpp' -o -name '*.h' -o -name '*.py' \
       -o -name releases.json \) -print -quit)" ]]; then
    log "build: up to date ($so)"
    return
  fi
  local t0; t0=$(now)
  log "cross-building torch_ext for aarch64 (setup.py under the emulated python, aarch64-linux-gnu-g++)"
  (cd "$ROOT" && emu_python setup.py -q build --build-base "$EXT" --build-lib "$EXT/lib" \
     --build-temp "$EXT/temp")
  so="$EXT/lib/torch_ext/_C.cpython-311-aarch64-linux-gnu.so"
  aarch64-linux-gnu-readelf -h "$so" | grep -q 'Machine:.*AArch64' || { log "build: $so is not an aarch64 ELF" >&2; exit 1; }
  log "build done in $(($(now) - t0)) s: $so"
}

# ------------------------------------------------------------------------------------------------- test
# Tests not run under emulation are marked arch_independent (pyproject.toml; each file or test says why): the files
# with no architecture-specific code of the package, whose npu_ext calls go through the same kernels the op files
# test emulated, and which make test runs natively (torch.compile and export, DDP, Megatron, the examples, the docs,
# docstrings and repository checks, the benchmark's bookkeeping, the version harness, torchair's graph tracing: 130 s
# emulated against 20 s natively), and the scenario tests of tests/npu/test_npu_path_machine.py (each imports torch in a Python
# subprocess: about 43 s emulated, 2-3 s natively). Kept out to hold CI within its budget on an AVX2-only host (the
# emulated suite took most of a CI run there). Tests can also tell they run emulated from NPU_EXT_EMULATED=1 (set in
# emu_env). Tests that start the (aarch64) python as a subprocess are marked subprocess: they need qemu-aarch64
# registered with binfmt_misc. Extra pytest arguments: tools/aarch64/run.sh test ARGS (e.g. -k NAME for a local run).

test_suite() {
  local t0; t0=$(now)
  local select="not arch_independent"
  if ! binfmt_ready; then
    # without binfmt_misc the kernel cannot exec the aarch64 python that these tests start as a subprocess
    log "binfmt_misc has no aarch64 entry (not root, or it cannot be mounted): not running the tests marked" \
        "subprocess (they start python subprocesses)"
    select="$select and not subprocess"
  fi
  local args=(-m "$select")
  # one emulated pytest worker per core (pytest-xdist; TEST_WORKERS=0 runs the tests in one process): each
  # qemu-aarch64 process runs mostly on one host core, so this halves the run on a 2-core machine
  local workers="${TEST_WORKERS:-$(nproc)}"
  log "pytest under qemu-aarch64 (QEMU_CPU=$QEMU_CPU, $workers workers)"
  local targets=(tests)           # the whole suite, unless test paths are given (tools/aarch64/run.sh test tests/x.py)
  for a in "$@"; do [[ "$a" == tests* ]] && targets=(); done
  (cd "$ROOT" && emu_python -m pytest "${targets[@]}" -q -p no:cacheprovider -n "$workers" "${args[@]}" "$@")
  log "tests done in $(($(now) - t0)) s"
}

npu_check() {
  install_tools
  build_sysroot
  install_site
  local py="${1:-$ROOT/.venv/bin/python}"
  NPU_CHECK_ARCH=aarch64 CXX="$HERE/cxx" NPU_CHECK_TORCH_DIR="$SITE/torch" \
    NPU_CHECK_PY_INCLUDE="$SYSROOT/usr/include/python3.11" "$ROOT/tools/npu_compile_check.sh" "$py"
}

cmd="${1:-all}"; shift || true
case "$cmd" in
  setup) setup ;;
  build) setup; build ;;
  test) setup; build; test_suite "$@" ;;
  all) setup; build; test_suite "$@" ;;
  npu-check) npu_check "$@" ;;
  python) emu_python "$@" ;;
  *) echo "usage: $0 [all|setup|build|test|npu-check [PYTHON]|python ARGS...]" >&2; exit 2 ;;
esac
