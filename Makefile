# Every target is idempotent: it creates .venv (torch 2.13.0 and the test tools) and (re)builds the
# extension only when something it depends on changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
SOURCES := setup.py $(shell find csrc torch_ext -name '*.cpp' -o -name '*.h' -o -name '*.py' 2>/dev/null)

.PHONY: all venv build test bench bench-full clean npu-check npu-test test-asan test-aarch64 build-aarch64

all: test

$(VENV)/.stamp-venv: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade "pip>=23" "setuptools>=64"
	$(PIP) install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.stamp-venv

# The first build installs the package in development mode (pip install -e, which compiles everything in a
# throw-away directory and puts the modules into torch_ext/); later builds recompile only what changed, in
# place, with ninja and a kept build/temp. The stamp is dated from the start of the build, so a source edited
# while it runs is rebuilt next time.
$(VENV)/.stamp-build: $(VENV)/.stamp-venv $(SOURCES)
	touch $@.start
	if [ -f $(VENV)/.stamp-develop ]; then \
	  MAX_JOBS=$${MAX_JOBS:-2} $(PY) setup.py -q build_ext --inplace --build-temp build/temp; \
	else \
	  MAX_JOBS=$${MAX_JOBS:-2} $(PIP) install --quiet --no-build-isolation --no-deps -e . && touch $(VENV)/.stamp-develop; \
	fi
	mv $@.start $@

build: $(VENV)/.stamp-build

# The tests, plus the NPU compile check against the real torch_npu 2.13.0 headers (see npu-check below).
# The whole suite runs once per CPU kernel variant this machine can run: first as the process picks it (the
# best one), then with each lower variant forced through ATEN_CPU_CAPABILITY (x86-64: avx2, default; other
# architectures build the DEFAULT variant alone). tools/cpu_variants.py lists them. Each pass spreads the tests
# over TEST_WORKERS processes (pytest-xdist, default: one per core; TEST_WORKERS=0 runs them in this process).
TEST_WORKERS ?= $(shell nproc)
test: build npu-check
	$(PY) -m pytest tests -q -n $(TEST_WORKERS)
	@for cap in $$($(PY) tools/cpu_variants.py --lower); do \
	  echo "== the whole suite again with ATEN_CPU_CAPABILITY=$$cap"; \
	  ATEN_CPU_CAPABILITY=$$cap $(PY) -m pytest tests -q -n $(TEST_WORKERS) || exit 1; \
	done

# make bench BENCH_ARGS=--variants: once per kernel variant the CPU has (see docs/performance.md).
bench: build
	$(PY) -m benchmarks.run --quick $(BENCH_ARGS)

bench-full: build
	$(PY) -m benchmarks.run --full

# NPU path, no NPU needed. npu-check: every csrc/npu source compiles against the torch_npu 2.13.0 wheel's headers
# (downloaded once into build/npu-check, never installed), for x86-64 with g++ and for aarch64 with
# aarch64-linux-gnu-g++ against the aarch64 wheels (tools/aarch64/run.sh npu-check).
# npu-test: the NPU sources run against the host aclnn stand-in (compiled once into build/npu_standin) and are
# compared with the CPU kernels.
npu-check: venv
	tools/npu_compile_check.sh $(PY)
	HOST_PYTHON=$(PY) tools/aarch64/run.sh npu-check $(PY)

npu-test: build
	$(PY) -m pytest tests/test_npu_standin.py tests/test_npu_device.py -q

# AddressSanitizer + UBSan: the extension built with -fsanitize=address,undefined into build/asan (the normal
# build is untouched) and the op tests run against it. ASan must be preloaded into Python, and libstdc++ with
# it, or C++ exceptions (every validation error) abort; leaks are not checked (CPython's own allocations).
# UBSan findings halt the run. See docs/robustness.md.
ASAN_DIR := build/asan
ASAN_TESTS ?= tests/test_ops.py tests/test_errors.py tests/test_properties.py tests/test_generic.py tests/test_range.py tests/test_forward.py tests/test_determinism.py
test-asan: venv
	NPU_EXT_SANITIZE=1 NPU_EXT_BUILD_NPU=0 MAX_JOBS=$${MAX_JOBS:-2} $(PY) setup.py -q build_ext \
		--build-temp $(ASAN_DIR)/temp --build-lib $(ASAN_DIR)/lib
	cp -f torch_ext/*.py $(ASAN_DIR)/lib/torch_ext/
	cd $(ASAN_DIR) && LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)" \
		ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 PYTHONPATH=$(CURDIR)/$(ASAN_DIR)/lib \
		NPU_EXT_EXPECT_SANITIZED=1 $(CURDIR)/$(PY) -m pytest -q -p no:cacheprovider --rootdir=$(CURDIR) \
		$(addprefix $(CURDIR)/,$(ASAN_TESTS))

# aarch64 (Kunpeng 920 class) on this x86-64 host: cross-builds the unmodified sources with aarch64-linux-gnu-g++
# against the torch 2.13.0 aarch64 wheel and runs the test suite on an arm64 python under qemu-user
# (neoverse-n1, no SVE). Installs its Debian tools if missing; everything else is cached in build/aarch64
# (.venv's pip only downloads the aarch64 wheels).
build-aarch64: venv
	HOST_PYTHON=$(PY) tools/aarch64/run.sh build

test-aarch64: venv
	HOST_PYTHON=$(PY) tools/aarch64/run.sh all

clean:
	rm -rf build torch_ext/*.so $(VENV)/.stamp-build $(VENV)/.stamp-develop
