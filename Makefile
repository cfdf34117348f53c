# Every target is idempotent: it creates .venv (the default torch and the test tools) and (re)builds the
# extension only when something it depends on changed.
PYTHON ?= python3
# The release table (torch_ext/releases.json) through tools/releases.py: the releases below are read from it (each
# variable that takes one, TORCH_NPU or MCORE, can still be set on the command line; test-megatron's PYTHON=3.N names
# a venv's Python, not a command, hence python3 then).
RELEASE_VALUES := $(shell $(if $(filter 3.%,$(PYTHON)),python3,$(PYTHON)) tools/releases.py get default.torch_npu \
	default.torch megatron_core.default)
ifneq ($(words $(RELEASE_VALUES)),3)
$(error tools/releases.py could not read the release table (torch_ext/releases.json))
endif
DEFAULT_TORCH_NPU := $(word 1,$(RELEASE_VALUES))
DEFAULT_TORCH := $(word 2,$(RELEASE_VALUES))
DEFAULT_MCORE := $(word 3,$(RELEASE_VALUES))
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
SOURCES := setup.py torch_ext/releases.json $(shell find csrc torch_ext -name '*.cpp' -o -name '*.h' -o -name '*.py' \
	2>/dev/null)

.PHONY: all venv build test test-docs bench bench-full clean npu-check test-npu npu-build test-ranks test-asan test-aarch64 build-aarch64 \
	test-versions test-mindspeed

# Compiles go through ccache when it is there (Debian's package; `make venv` installs it when run as root):
# the second build of the same sources with the same flags (make test-npu's) reuses the first one's objects.
# Preprocessor mode (CCACHE_NODIRECT): the builds' command lines differ in include directories that hold nothing
# and in their output paths; the preprocessed sources are the same. CCACHE_NOHASHDIR: ninja runs each build in its
# own build directory, and -g would otherwise put that directory into the hash (no base_dir either: it makes the
# paths relative to that directory). Checked when a build runs (not when make starts), so the first build on a
# fresh machine already fills the cache.
CCACHE_ENV = PATH="$$([ -x /usr/lib/ccache/g++ ] && echo /usr/lib/ccache:)$$PATH" CCACHE_NODIRECT=1 CCACHE_NOHASHDIR=1

# pytest as the stages that run outside the source tree run it (from a build directory, where the checkout's sources
# are not on sys.path): the checkout's configuration and root, no cache directory
PYTEST_OUT_OF_TREE = -m pytest -q -p no:cacheprovider --rootdir=$(CURDIR) -c $(CURDIR)/pyproject.toml

# A build outside the source tree (make test-npu's, make test-asan's): setup.py's build_ext with the Python $(1) and
# the settings $(3) into $(2)/lib (objects in $(2)/temp), beside a copy of the package's Python files
OUT_OF_TREE_BUILD = $(CCACHE_ENV) $(3) MAX_JOBS=$${MAX_JOBS:-2} $(1) setup.py -q build_ext --build-temp $(2)/temp \
	--build-lib $(2)/lib && cp -rf torch_ext/*.py torch_ext/testing torch_ext/releases.json $(2)/lib/torch_ext/

all: test

$(VENV)/.stamp-venv: requirements-dev.txt
	@command -v ccache >/dev/null || [ "$$(id -u)" != 0 ] || (apt-get install -y -qq ccache >/dev/null 2>&1 || \
	  (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq ccache >/dev/null 2>&1)) || \
	  echo "ccache could not be installed: builds will not share objects"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade "pip>=23" "setuptools>=70.1"
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
	  $(CCACHE_ENV) MAX_JOBS=$${MAX_JOBS:-2} $(PY) setup.py -q build_ext --inplace --build-temp build/temp; \
	else \
	  $(CCACHE_ENV) MAX_JOBS=$${MAX_JOBS:-2} $(PIP) install --quiet --no-build-isolation --no-deps -e . && touch $(VENV)/.stamp-develop; \
	fi
	mv $@.start $@

build: $(VENV)/.stamp-build

# The tests: the whole suite natively, then the NPU path inside the real runtime of the default torch_npu (test-npu
# below, which also builds every NPU source against that torch_npu's headers).
# The suite runs once per CPU kernel variant this machine can run: first whole, as the process picks it (the best
# one), then with each lower variant forced through ATEN_CPU_CAPABILITY (x86-64: avx2, default; other
# architectures build the DEFAULT variant alone) but for the tests marked arch_independent (no architecture-specific
# code of the package: what they call runs through the kernels the other tests hold in every variant, as under the
# aarch64 emulation). tools/cpu_variants.py lists the variants. Each pass spreads the tests
# over TEST_WORKERS processes (pytest-xdist, default: one per core; TEST_WORKERS=0 runs them in this process).
TEST_WORKERS ?= $(shell nproc)
test: build
	$(PY) -m pytest tests -q -n $(TEST_WORKERS)
	@for cap in $$($(PY) tools/cpu_variants.py --lower); do \
	  echo "== the suite again with ATEN_CPU_CAPABILITY=$$cap, but for the tests marked arch_independent"; \
	  ATEN_CPU_CAPABILITY=$$cap $(PY) -m pytest tests -q -n $(TEST_WORKERS) -m "not arch_independent" || exit 1; \
	done
	$(MAKE) test-npu TORCH_NPU=$(DEFAULT_TORCH_NPU)

# make bench BENCH_ARGS=--variants: once per kernel variant the CPU has (see docs/performance.md).
bench: build
	$(PY) -m benchmarks.run --quick $(BENCH_ARGS)

bench-full: build
	$(PY) -m benchmarks.run --full

# NPU path, no NPU needed. npu-check: every NPU source compiles against the default torch_npu wheel's headers
# (downloaded once into build/npu-check, never installed), for x86-64 with g++ and for aarch64 with
# aarch64-linux-gnu-g++ against the aarch64 wheels (tools/aarch64/run.sh npu-check). Not in CI: make test's
# test-npu builds the same sources against the same (architecture-independent) headers for real, and the aarch64
# suite cross-compiles them for the stand-in. TORCH_NPU_VERSION=<release> ... checks another release.
npu-check: venv
	tools/npu_compile_check.sh $(PY)
	HOST_PYTHON=$(PY) tools/aarch64/run.sh npu-check $(PY)

# The NPU path inside the REAL runtime of the default torch_npu, on fake CANN libraries (tests/fake_cann,
# docs/testing.md): .venv-npu layers that torch_npu (--no-deps) and what it imports (pyyaml; protobuf for
# torchair) over .venv's packages (the same torch, so the build shares .venv's objects through ccache); the package
# is built the way README's Ascend install builds it (setup.py with torch_npu installed: torch_ext._C_npu linked
# against the real libtorch_npu.so) into build/npu/lib, and the tests import that build (tests/conftest.py checks
# it, and turns every skip into a failure). The fake libraries are built into build/fake_cann/<hash>/lib and put on LD_LIBRARY_PATH.
# The tests are those marked npu (tests/npu), spread over TEST_WORKERS processes as make test's passes (the tests of one
# xdist_group in one worker, as in the release rows); NPU_TESTS=<paths> runs those of some files only.
NPU_VENV := .venv-npu
NPU_PY := $(NPU_VENV)/bin/python
NPU_BUILD := build/npu
NPU_TESTS ?= tests

$(NPU_VENV)/.stamp-venv: $(VENV)/.stamp-venv
	$(PYTHON) tools/venvs.py layer $(NPU_VENV) --over $(VENV) --pip-no-deps torch-npu==$(DEFAULT_TORCH_NPU) pyyaml protobuf
	touch $@

$(NPU_BUILD)/.stamp: $(NPU_VENV)/.stamp-venv $(SOURCES)
	mkdir -p $(NPU_BUILD) && touch $@.start
	$(call OUT_OF_TREE_BUILD,$(NPU_PY),$(NPU_BUILD),TORCH_DEVICE_BACKEND_AUTOLOAD=0 NPU_EXT_BUILD_NPU=1)
	mv $@.start $@

npu-build: $(NPU_BUILD)/.stamp

# The default torch_npu's runtime for a command from build/npu: .venv-npu's Python over the fake CANN's libraries,
# importing that build (tests/conftest.py checks it, and turns every skip into a failure)
NPU_RUNTIME = fake_lib=$$($(NPU_PY) tests/fake_cann/build.py | tail -n 1) && cd $(NPU_BUILD) && \
	LD_LIBRARY_PATH=$$fake_lib PYTHONPATH=$(CURDIR)/$(NPU_BUILD)/lib:$(CURDIR) NPU_EXT_EXPECT_NPU=1 $(CURDIR)/$(NPU_PY)

# The documentation's code blocks, as a reader runs them (tests/docs/test_pages.py; docs/testing.md): those of the CPU
# sandbox and those of the default torch_npu's runtime over the fake CANN, each in a scratch venv over .venv's (or
# .venv-npu's) packages and a copy of the tree under build/docs; the MindSpeed runtime's run in make test-mindspeed.
# A page's blocks run one after the other (each may need what the one before it did), mostly on one core; the two
# runtimes share nothing, so they run side by side, each into its log (build/docs/<runtime>.log), printed when both
# are done.
test-docs: build $(NPU_VENV)/.stamp-venv
	mkdir -p build/docs
	for rt in cpu npu; do \
	  (NPU_EXT_DOCS_RUNTIME=$$rt $(PY) -m pytest -q -p no:cacheprovider tests/docs > build/docs/$$rt.log 2>&1; \
	   echo $$? > build/docs/$$rt.status) & \
	done; wait; \
	failed=0; for rt in cpu npu; do \
	  echo "== the documentation's blocks of the $$rt runtime"; cat build/docs/$$rt.log; \
	  [ "$$(cat build/docs/$$rt.status)" = 0 ] || failed=1; \
	done; exit $$failed

# make test-npu TORCH_NPU=<release> (any row of the release table): that torch_npu and its torch in
# their own venv (build/versions/<release>), the package installed there with README's Ascend command from a clean
# copy of the working tree, NPU_TESTS run in that release's runtime on its fake CANN, every skip a failure.
# Without TORCH_NPU (or with the default release's flow below): .venv-npu, sharing .venv's torch and compiled objects.
TORCH_NPU ?= $(DEFAULT_TORCH_NPU)
ifeq ($(TORCH_NPU),$(DEFAULT_TORCH_NPU))
test-npu: npu-build
	$(NPU_RUNTIME) $(PYTEST_OUT_OF_TREE) -m npu -n $(TEST_WORKERS) --dist loadgroup $(addprefix $(CURDIR)/,$(NPU_TESTS))
else
# other releases: the tests marked npu or release (the NPU suite, that build imported under other pairs, the op values
# and autograd, whose C++ nodes differ by torch, and the Megatron tests against the release's megatron-core: the
# release table's, the newest beside the newest torch_npu)
test-npu: venv
	$(PYTHON) tools/versions.py run $(TORCH_NPU) --tests $(NPU_TESTS)
endif

# Across ranks: torch.distributed between processes on the npu device over the fake CANN's HCCL (tests/ranks,
# docs/testing.md), in the runtime of make test-npu: every operation x dtype on 2 and 4 ranks for TASK_QUEUE_ENABLE
# unset, 0, 1 and 2, a killed rank, /dev/shm, PER_STREAM_QUEUE=1, each rank on its own device of the fake; and
# Megatron at TP=2 on the npu device against its CPU run over gloo. RANKS_SELECT=2ranks-tqdefault runs the subset
# for CI (2 ranks, the default task queue, the Megatron test too); RANKS_SELECT is pytest's -k.
RANKS_SELECT ?=
test-ranks: npu-build
	$(NPU_RUNTIME) $(PYTEST_OUT_OF_TREE) -m ranks $(if $(RANKS_SELECT),-k "$(RANKS_SELECT)") $(CURDIR)/tests/ranks

# Every torch / torch_npu release of the supported range (the release table), each in its own venv and
# runtime: the tests marked npu or release against the package installed with README's Ascend command; one line per
# release and a table at the end (docs/platforms.md). VERSIONS=... runs some.
VERSIONS ?=
test-versions: venv
	$(PYTHON) tools/versions.py all $(VERSIONS)

# The real MindSpeed pairs (the release table's mindspeed), each in its own venv (build/mindspeed/<branch>): the pair's
# Python, torch and torch_npu on the fake CANN, Megatron-LM's megatron/ on PYTHONPATH and MindSpeed installed
# as its guide says (both unpacked from the archives in $NPU_EXT_THIRDPARTY), the package installed with
# README's command; tests/integrations/test_mindspeed.py there (docs/megatron.md#mindspeed). MINDSPEED=<branch> runs one pair;
# MINDSPEED_SUBSET=ci runs CI's subset: the two-rank tests (tests/integrations/test_mindspeed_ranks.py) on the first pair
# only, and the second pair without the NPU device suite.
# The first pair also builds the cluster wheel, which the second installs without compiling (docs/install.md).
MINDSPEED ?=
MINDSPEED_SUBSET ?= all
test-mindspeed: venv
	NPU_EXT_MINDSPEED_SUBSET=$(MINDSPEED_SUBSET) $(PYTHON) tools/versions.py mindspeed $(MINDSPEED)

# AddressSanitizer + UBSan: the extension built with -fsanitize=address,undefined into build/asan (the normal
# build is untouched) and the op tests run against it. ASan must be preloaded into Python, and libstdc++ with
# it, or C++ exceptions (every validation error) abort; leaks are not checked (CPython's own allocations).
# UBSan findings halt the run. See docs/robustness.md. The tests are those marked asan, over TEST_WORKERS processes
# (each preloads the sanitizer: the workers inherit LD_PRELOAD).
ASAN_DIR := build/asan
ASAN_TESTS ?= tests
test-asan: venv
	$(call OUT_OF_TREE_BUILD,$(PY),$(ASAN_DIR),NPU_EXT_SANITIZE=1 NPU_EXT_BUILD_NPU=0)
	cd $(ASAN_DIR) && LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)" \
		ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 PYTHONPATH=$(CURDIR)/$(ASAN_DIR)/lib \
		NPU_EXT_EXPECT_SANITIZED=1 $(CURDIR)/$(PY) $(PYTEST_OUT_OF_TREE) -m asan -n $(TEST_WORKERS) \
		$(addprefix $(CURDIR)/,$(ASAN_TESTS))

# aarch64 (Kunpeng 920 class) on this x86-64 host: cross-builds the unmodified sources with aarch64-linux-gnu-g++
# against the default torch's aarch64 wheel and runs the test suite on an arm64 python under qemu-user
# (neoverse-n1, no SVE). Installs its Debian tools if missing; everything else is cached in build/aarch64
# (.venv's pip only downloads the aarch64 wheels).
build-aarch64: venv
	HOST_PYTHON=$(PY) tools/aarch64/run.sh build

test-aarch64: venv
	HOST_PYTHON=$(PY) tools/aarch64/run.sh all

clean:
	rm -rf build torch_ext/*.so torch_ext/*.versions.json $(VENV)/.stamp-build $(VENV)/.stamp-develop $(NPU_VENV)

# ------------------------------------------------------------------------------------------------------------
# test-megatron: the Megatron tests (those marked megatron; MCORE_TESTS=<paths> narrows them) on one megatron-core
# release, in a venv of its own (tools/versions.py megatron; docs/megatron.md#releases):
#   make test-megatron MCORE=0.X.Y                the Python of the release table's rules for that series: on the
#                                                 default's, .venv-megatron/0.X.Y-py3.11 layered over .venv as
#                                                 .venv-npu is, importing the source tree's build; from 0.17, Python
#                                                 3.12 and a venv of its own with the tree installed in it
#   make test-megatron MCORE=0.X.Y PYTHON=3.12    another Python for that venv (.venv is then made with python3)
# MCORE_WORKERS: pytest-xdist workers.
MCORE ?= $(DEFAULT_MCORE)
ifneq ($(filter 3.%,$(PYTHON)),)
MCORE_PYTHON := $(PYTHON)
override PYTHON := python3
endif
MCORE_TESTS ?=
MCORE_WORKERS ?= 2
.PHONY: test-megatron

test-megatron: build
	$(PYTHON) tools/versions.py megatron $(MCORE) $(if $(MCORE_PYTHON),--python $(MCORE_PYTHON)) \
	  --workers $(MCORE_WORKERS) $(if $(MCORE_TESTS),--tests $(MCORE_TESTS))
