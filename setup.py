"""Build of torch_ext._C: the npu_ext operators for CPU and Meta (and, with torch_npu, the NPU).

Two kinds of C++ sources are compiled differently:
  * registration, validation and op-level code (csrc/core, and every csrc/ops/<family>/*.cpp but the kernels):
    once, with no ISA flags, so nothing that runs at import time can contain an instruction the CPU lacks;
  * math kernels (csrc/ops/<family>/kernel_*.cpp): once per ISA variant, each with its own CPU_CAPABILITY macro
    and -m flags, into its own object directory, then linked into the same module.
"""

import glob
import json
import os
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(ROOT, "csrc")


def _rel(paths):
    return sorted(os.path.relpath(p, ROOT) for p in paths)


# The sources of each operator family (csrc/ops/<family>/, see docs/adding-an-operator.md) and of the shared core
# (csrc/core/): every .cpp is found by its place and name, so a new operator folder needs no edit here.
#   kernel_*.cpp  the CPU kernels, compiled once per ISA variant;
#   npu.cpp       the NPU launch, compiled into torch_ext._C_npu (with the core/npu sources, and the checks and
#                 composites it calls);
#   any other     compiled once into torch_ext._C.
OPS = os.path.join(CSRC, "ops")
OP_SOURCES = glob.glob(os.path.join(OPS, "*", "*.cpp"))
KERNEL_SOURCES = _rel(p for p in OP_SOURCES if os.path.basename(p).startswith("kernel_"))
MAIN_SOURCES = _rel(
    glob.glob(os.path.join(CSRC, "core", "*.cpp"))
    + glob.glob(os.path.join(CSRC, "core", "cpu", "*.cpp"))
    + [p for p in OP_SOURCES if not os.path.basename(p).startswith("kernel_") and os.path.basename(p) != "npu.cpp"]
)
NPU_SOURCES = _rel(
    glob.glob(os.path.join(CSRC, "core", "npu", "*.cpp"))
    + [os.path.join(CSRC, "core", "checks.cpp")]
    + [p for p in OP_SOURCES if os.path.basename(p) in ("npu.cpp", "checks.cpp", "composite.cpp")]
)
HEADERS = _rel(glob.glob(os.path.join(CSRC, "**", "*.h"), recursive=True))

# ISA variant name -> extra compiler flags for the kernel sources, per target architecture (the variants and
# flags ATen uses for its own kernels). x86-64: DEFAULT, AVX2 and AVX512, chosen at run time; aarch64 and
# every other architecture: DEFAULT alone (on aarch64 ATen's Vectorized is NEON code without any flag; Kunpeng
# 920, the CPU of Ascend training hosts, has no SVE). No ISA flag ever reaches a compiler of another target.
# DEFAULT must stay first: the linker keeps the first copy of any inline function the variants share, and
# that copy must be the one without ISA flags. csrc/core/cpu/isa.cpp picks the variant at run time; the
# NPU_EXT_X86_VARIANTS macro tells it (and every other source) that the AVX2/AVX512 variants are linked in.
# -ffp-contract=off: no implicit FMA contraction, so the rounding of every kernel expression is the one
# written in the source, the same for full vectors and tails.
KERNEL_FLAGS = ["-ffp-contract=off", "-Wno-unknown-pragmas"]
X86_VARIANTS = {
    "DEFAULT": ["-DCPU_CAPABILITY=DEFAULT", "-DCPU_CAPABILITY_DEFAULT"],
    "AVX2": ["-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2", "-mavx2", "-mfma", "-mf16c"],
    # -mavx512bf16 only makes the bf16 conversion intrinsic available: vec_utils.h uses it where the CPU reports
    # AVX512_BF16 at run time (the compiler emits no such instruction by itself for c10::BFloat16).
    "AVX512": ["-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512", "-mavx512f", "-mavx512bw", "-mavx512vl",
               "-mavx512dq", "-mavx512bf16", "-mfma", "-mf16c"],
}
PORTABLE_VARIANTS = {"DEFAULT": X86_VARIANTS["DEFAULT"]}


def _target_is_x86():
    """Whether the extension is built for x86-64. The target is the machine the build runs on (a cross build
    runs setup.py under emulation, see tools/aarch64/); NPU_EXT_TARGET_ARCH overrides it."""
    import platform

    arch = os.environ.get("NPU_EXT_TARGET_ARCH") or platform.machine()
    return arch.lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def _package_version():
    """torch_ext/_version.py's __version__ (read, not imported: the package needs its built _C to import)."""
    import re

    with open(os.path.join(ROOT, "torch_ext", "_version.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _load(name, path):
    """A standard-library-only module of the tree, loaded by its path (the package needs its built _C to import)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _releases():
    """torch_ext/_releases.py, the reader of the release table torch_ext/releases.json."""
    return _load("_torch_ext_releases", os.path.join("torch_ext", "_releases.py"))


def _supported_torch():
    """((major, minor) of the oldest torch, of the newest) of the release table: the supported torch releases, as
    torch_ext/_compat.py's MIN_TORCH and MAX_TORCH."""
    releases = _releases()
    return releases.supported_torch(releases.load())


def _check_torch():
    """Refuses to build for a torch outside the supported range: its headers would fail somewhere in the middle of
    the build, or worse, compile."""
    import torch

    lo, hi = _supported_torch()
    have = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
    if not lo <= have <= hi:
        raise RuntimeError(f"torch_ext builds against torch {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]} (with their "
                           f"torch_npu); this environment has torch {torch.__version__}")
    return lo, hi


SUPPORTED_TORCH = _check_torch()
TARGET_X86 = _target_is_x86()
# NPU_EXT_KERNEL_VARIANTS=default builds the DEFAULT variant alone on x86-64 too (as on every other architecture):
# a third of the kernel compile time, for builds that test something else than the kernels' ISA variants (the
# version stages: make test-versions, make test-megatron). The package then runs its DEFAULT kernels everywhere.
_VARIANTS_MODE = os.environ.get("NPU_EXT_KERNEL_VARIANTS", "all")
if _VARIANTS_MODE not in ("all", "default"):
    raise RuntimeError(f"NPU_EXT_KERNEL_VARIANTS must be 'all' or 'default', not {_VARIANTS_MODE!r}")
ALL_VARIANTS = TARGET_X86 and _VARIANTS_MODE == "all"
ISA_VARIANTS = X86_VARIANTS if ALL_VARIANTS else PORTABLE_VARIANTS
ARCH_DEFINES = ["-DNPU_EXT_X86_VARIANTS"] if ALL_VARIANTS else []

# -g0: no debug information (Python's own CFLAGS, which setuptools puts first, ask for -g): it doubles the compile
# time of every torch-heavy source (an autograd source of 0.5.0: 58 s with -g, 30 s without, AMD EPYC Zen 3) for
# symbols nobody reads in a release build. The sanitizer build below turns line tables (-g1) back on.
CXX_FLAGS = ["-O3", "-g0", "-std=c++20", "-fopenmp", "-Wall", "-Wno-unused-function"] + ARCH_DEFINES
LINK_FLAGS = ["-fopenmp"]
# NPU_EXT_SANITIZE=1: AddressSanitizer + UndefinedBehaviorSanitizer build (make test-asan builds it into
# build/asan, apart from the normal build).
if os.environ.get("NPU_EXT_SANITIZE") == "1":
    # -g1: line tables, what ASan's and UBSan's reports print (file:line), at a fraction of -g's compile time
    CXX_FLAGS += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g1", "-O1"]
    LINK_FLAGS += ["-fsanitize=address,undefined"]


# Unity build: the sources of each kind are compiled as a few generated translation units that #include them, one
# per job the build runs at once (MAX_JOBS, as torch's ninja build; else one per core). Most of an object's compile
# time is torch's headers (ATen/ATen.h and the templates they instantiate: about 80% of a CPU op source
# measured on an AMD EPYC Zen 3), and a unity unit pays for them once for all its sources: three op sources in one
# unit compile in the time of one. The sources stay one file per op per backend (the file-local helpers of each
# sit in a namespace of its own, so they can share a unit); compiler messages name them. NPU_EXT_UNITY=0 compiles
# each source on its own (a development build that edits one file, and the check that each source includes what
# it uses).
UNITY = os.environ.get("NPU_EXT_UNITY", "1") != "0"


def _unity_sources(sources, ext_name, stem):
    """sources (paths relative to ROOT, all under csrc/) -> the generated units that #include them, one per compile
    job (tools/unity.py). They are written to build/unity/<module>/ whatever the build directory, so that every build
    of the tree compiles the same file (ccache then serves make test-npu's second build of _C from the first one's
    objects)."""
    if not UNITY or len(sources) < 2:
        return sources
    unity = _load("_torch_ext_unity", os.path.join("tools", "unity.py"))
    return unity.write_units([os.path.join(ROOT, p) for p in sources],
                             os.path.join(ROOT, "build", "unity", ext_name.split(".")[-1]), stem, CSRC, unity.jobs(),
                             "// Generated by setup.py (unity build, NPU_EXT_UNITY): compiles these sources as one "
                             "unit.\n")


def _module_versions(ext_name):
    """What a compiled module is built against, recorded beside it (torch_ext/_compat.py checks it before the
    module is loaded, and refuses a module without it): the torch release, torch's C++ ABI (the same release comes
    in both: torch 2.6's PyPI wheels are pre-C++11, its +cpu.cxx11.abi builds C++11; cpp_extension compiles with
    the installed torch's), the Python, and torch_npu's release for _C_npu."""
    import torch

    info = {"module": ext_name, "torch": torch.__version__.split("+")[0],
            "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI), "python": "%d.%d" % sys.version_info[:2]}
    if ext_name.endswith("_C_npu"):
        info["torch_npu"] = _torch_npu_location()[1].split("+")[0]
    return info


def _versions_file(module_file):
    """torch_ext/_C.cpython-311-x86_64-linux-gnu.so -> torch_ext/_C.versions.json"""
    base = os.path.basename(module_file).split(".")[0]
    return os.path.join(os.path.dirname(module_file), base + ".versions.json")


class BuildWithIsaKernels(BuildExtension):
    """BuildExtension that compiles the kernel sources once per ISA variant and links every variant, and writes
    each module's versions file beside it (in the build directory, and into the source tree with --inplace and
    editable installs, as setuptools copies the module itself)."""

    def finalize_options(self):
        super().finalize_options()
        if getattr(self, "editable_mode", False):
            # An editable install compiles where a regular one does (build/temp.<platform>-<python> of the tree; pip's
            # editable build otherwise compiles in a throw-away directory): a second editable install, or one after
            # `pip install .`, recompiles only what changed.
            import sysconfig

            self.build_temp = os.path.join(
                ROOT, "build", f"temp.{sysconfig.get_platform()}-{sys.implementation.cache_tag}")

    def _versions_pairs(self):
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            inplace_file, regular_file = self._get_inplace_equivalent(build_py, ext)
            yield _versions_file(regular_file), _versions_file(inplace_file)

    def copy_extensions_to_source(self):
        super().copy_extensions_to_source()
        for regular, inplace in self._versions_pairs():
            self.copy_file(regular, inplace, level=self.verbose)

    def get_outputs(self):
        if self.inplace:
            return super().get_outputs() + [inplace for _, inplace in self._versions_pairs()]
        return super().get_outputs() + [_versions_file(self.get_ext_fullpath(e.name)) for e in self.extensions]

    def get_output_mapping(self):
        mapping = super().get_output_mapping()
        if self.inplace:
            mapping.update(dict(self._versions_pairs()))
        return mapping

    def build_extension(self, ext):
        self._build_isa_extension(ext)
        path = _versions_file(self.get_ext_fullpath(ext.name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(_module_versions(ext.name), f)
            f.write("\n")

    def _build_isa_extension(self, ext):
        if not hasattr(ext, "per_file_sources"):  # the sources as listed (build_extension may run twice)
            ext.per_file_sources = list(ext.sources)
        ext.sources = _unity_sources(ext.per_file_sources, ext.name, "sources")
        kernel_sources = _unity_sources(getattr(ext, "isa_kernel_sources", []), ext.name, "kernels")
        if kernel_sources:
            base_flags = list(ext.extra_compile_args.get("cxx", []) if isinstance(ext.extra_compile_args, dict)
                              else ext.extra_compile_args)
            for isa, flags in ISA_VARIANTS.items():
                objects = self.compiler.compile(
                    kernel_sources,
                    output_dir=os.path.join(self.build_temp, "isa", isa),
                    include_dirs=ext.include_dirs,
                    extra_postargs={"cxx": base_flags + KERNEL_FLAGS + flags} if self.use_ninja
                    else base_flags + KERNEL_FLAGS + flags,
                    depends=ext.depends,
                )
                ext.extra_objects = [o for o in ext.extra_objects if o not in objects] + objects
        super().build_extension(ext)


def _cpu_extension():
    ext = CppExtension(
        name="torch_ext._C",
        sources=MAIN_SOURCES,
        include_dirs=[CSRC],
        depends=HEADERS,
        extra_compile_args={"cxx": CXX_FLAGS},
        extra_link_args=LINK_FLAGS,
    )
    ext.isa_kernel_sources = KERNEL_SOURCES
    return ext


# ---------------------------------------------------------------------------------------------------------
# NPU (Ascend): torch_ext._C_npu, the PrivateUse1 kernels (csrc/ops/<family>/npu.cpp) calling aclnn through torch_npu's
# EXEC_NPU_CMD_EXT. Built only when torch_npu is installed (found WITHOUT importing it: importing needs CANN);
# NPU_EXT_BUILD_NPU=0 forces it off, NPU_EXT_BUILD_NPU=1 forces it on (and fails if torch_npu is missing).

def _torch_npu_location():
    """(package directory, version) of the installed torch_npu, or None. Does not import torch_npu."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("torch_npu")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        version = importlib.metadata.version("torch_npu")
    except importlib.metadata.PackageNotFoundError:
        version = importlib.metadata.version("torch-npu")
    return list(spec.submodule_search_locations)[0], version


# op-plugin's extension API as torch_npu's include directory ships it (relative to include/third_party/op-plugin):
# the functions and the executor-cache template csrc/core/npu/torch_npu_compat.h calls aclnn with from torch_npu 2.7.
OP_API_EXTENSION_HEADERS = ("op_plugin/include/npu_cpp_extension.h", "op_plugin/utils/op_api_common_base.h")


def _op_api_extension(include):
    """How _C_npu calls aclnn against the torch_npu whose include directory is `include` (NPU_EXT_OP_API_EXTENSION,
    read by csrc/core/npu/torch_npu_compat.h): 1, op-plugin's extension API, when the directory ships both
    OP_API_EXTENSION_HEADERS; 0, CANN's C API and OpCommand::RunOpApiV2 (the torch_npu 2.6 path), when it ships
    neither or only one. Decided by the headers, not by the version: torch_npu 2.6 has none of them, and neither
    have the first .postN of torch_npu 2.7 (those before the release table's extension_api_from)."""
    base = os.path.join(include, "third_party", "op-plugin")
    return int(all(os.path.isfile(os.path.join(base, h)) for h in OP_API_EXTENSION_HEADERS))


def _npu_extension():
    mode = os.environ.get("NPU_EXT_BUILD_NPU", "auto")
    if mode == "0":
        return None
    found = _torch_npu_location()
    if found is None:
        if mode == "1":
            raise RuntimeError("NPU_EXT_BUILD_NPU=1 but torch_npu is not installed")
        return None
    npu_dir, version = found
    major, minor = version.split("+")[0].split(".")[:2]
    include = os.path.join(npu_dir, "include")
    # hit_cache_ext's shape is read from the headers, not from the version: torch_npu changed it inside a release
    # (a .postN with 2.13's deterministic-level form and no SetExecConfig, the release table's post_release_evidence;
    # csrc/core/npu/torch_npu_compat.h)
    common_base = os.path.join(include, "third_party", "op-plugin", "op_plugin", "utils", "op_api_common_base.h")
    try:
        with open(common_base) as f:
            level_form = int("const uint32_t level, Args&&... args" in f.read())
    except OSError:
        level_form = int(int(major) * 100 + int(minor) >= 213)
    return CppExtension(
        name="torch_ext._C_npu",
        # with private copies of the checks and of the composites (the fallback of the forward ops' native kernels):
        # extension modules do not share symbols. NPU_EXT_NPU_MODULE keeps the composites from registering again.
        sources=NPU_SOURCES,
        include_dirs=[CSRC, include, os.path.join(include, "third_party", "op-plugin"),
                      os.path.join(include, "third_party", "acl", "inc"),
                      os.path.join(include, "third_party", "hccl", "inc")],
        depends=HEADERS,
        # CURRENT_VERSION: torch_npu's headers select their variant by it; NPU_EXT_TORCH_NPU_VERSION: the release;
        # NPU_EXT_OP_API_EXTENSION: csrc/core/npu/torch_npu_compat.h calls aclnn through op-plugin's extension API
        # (1) or CANN's C API (0), by the headers (_op_api_extension); NPU_EXT_HIT_CACHE_LEVEL: hit_cache_ext takes
        # the deterministic level
        define_macros=[("NPU_EXT_NPU_MODULE", None), ("CURRENT_VERSION", f"V{major}R{minor}"),
                       ("NPU_EXT_TORCH_NPU_VERSION", str(int(major) * 100 + int(minor))),
                       ("NPU_EXT_OP_API_EXTENSION", str(_op_api_extension(include))),
                       ("NPU_EXT_HIT_CACHE_LEVEL", str(level_form))],
        extra_compile_args={"cxx": ["-O2", "-g0", "-std=c++20", "-Wall", "-Wno-unused-function"]},
        library_dirs=[os.path.join(npu_dir, "lib")],
        libraries=["torch_npu"],
        runtime_library_dirs=[os.path.join(npu_dir, "lib")],
    )


def _extensions():
    exts = [_cpu_extension()]
    npu = _npu_extension()
    if npu is not None:
        exts.append(npu)
    return exts


setup(
    name="torch_ext",
    version=_package_version(),
    description="Ascend aclnn backward operators as PyTorch custom ops (torch.ops.npu_ext), with fast CPU kernels",
    packages=["torch_ext", "torch_ext.testing", "torch_ext.testing.families"],
    # the release table: torch_ext._compat reads the supported range from it at import (an installed wheel has it)
    package_data={"torch_ext": ["releases.json"]},
    ext_modules=_extensions(),
    cmdclass={"build_ext": BuildWithIsaKernels},
    python_requires=">=3.10",
    # the supported range; pip keeps an installed torch in it as it is (README installs with --no-deps, which
    # also leaves a CUDA build's NVIDIA packages alone)
    install_requires=[f"torch>={SUPPORTED_TORCH[0][0]}.{SUPPORTED_TORCH[0][1]},"
                      f"<{SUPPORTED_TORCH[1][0]}.{SUPPORTED_TORCH[1][1] + 1}"],
)
