"""Build of torch_ext._C: the npu_ext operators for CPU and Meta (and, with torch_npu, the NPU).

Two kinds of C++ sources are compiled differently:
  * registration, validation and op-level code (csrc/*.cpp, csrc/autograd, csrc/common, csrc/cpu/*.cpp,
    csrc/meta): once, with no ISA flags, so nothing that runs at import time can contain an instruction the CPU
    lacks;
  * math kernels (csrc/cpu/kernels/*.cpp): once per ISA variant, each with its own CPU_CAPABILITY macro and
    -m flags, into its own object directory, then linked into the same module.
"""

import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(ROOT, "csrc")


def _rel(paths):
    return sorted(os.path.relpath(p, ROOT) for p in paths)


MAIN_SOURCES = _rel(
    glob.glob(os.path.join(CSRC, "*.cpp"))
    + glob.glob(os.path.join(CSRC, "autograd", "*.cpp"))
    + glob.glob(os.path.join(CSRC, "common", "*.cpp"))
    + glob.glob(os.path.join(CSRC, "cpu", "*.cpp"))
    + glob.glob(os.path.join(CSRC, "meta", "*.cpp"))
)
KERNEL_SOURCES = _rel(glob.glob(os.path.join(CSRC, "cpu", "kernels", "*.cpp")))
HEADERS = _rel(glob.glob(os.path.join(CSRC, "**", "*.h"), recursive=True))

# ISA variant name -> extra compiler flags for the kernel sources, per target architecture (the variants and
# flags ATen uses for its own kernels). x86-64: DEFAULT, AVX2 and AVX512, chosen at run time; aarch64 and
# every other architecture: DEFAULT alone (on aarch64 ATen's Vectorized is NEON code without any flag; Kunpeng
# 920, the CPU of Ascend training hosts, has no SVE). No ISA flag ever reaches a compiler of another target.
# DEFAULT must stay first: the linker keeps the first copy of any inline function the variants share, and
# that copy must be the one without ISA flags. csrc/cpu/dispatch.cpp picks the variant at run time; the
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


TARGET_X86 = _target_is_x86()
ISA_VARIANTS = X86_VARIANTS if TARGET_X86 else PORTABLE_VARIANTS
ARCH_DEFINES = ["-DNPU_EXT_X86_VARIANTS"] if TARGET_X86 else []

CXX_FLAGS = ["-O3", "-std=c++20", "-fopenmp", "-Wall", "-Wno-unused-function"] + ARCH_DEFINES
LINK_FLAGS = ["-fopenmp"]
# NPU_EXT_SANITIZE=1: AddressSanitizer + UndefinedBehaviorSanitizer build (make test-asan builds it into
# build/asan, apart from the normal build).
if os.environ.get("NPU_EXT_SANITIZE") == "1":
    CXX_FLAGS += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g", "-O1"]
    LINK_FLAGS += ["-fsanitize=address,undefined"]


class BuildWithIsaKernels(BuildExtension):
    """BuildExtension that compiles the kernel sources once per ISA variant and links every variant."""

    def build_extension(self, ext):
        kernel_sources = getattr(ext, "isa_kernel_sources", [])
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
# NPU (Ascend): torch_ext._C_npu, the PrivateUse1 kernels in csrc/npu calling aclnn through torch_npu's
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
    npu_sources = _rel(glob.glob(os.path.join(CSRC, "npu", "*.cpp")))
    return CppExtension(
        name="torch_ext._C_npu",
        # private copies of the shared validation and of the forward composites (the fallback of the forward ops'
        # native kernels): extension modules do not share symbols
        sources=npu_sources + _rel([os.path.join(CSRC, "common", "checks.cpp"),
                                    os.path.join(CSRC, "common", "forward_composite.cpp")]),
        include_dirs=[CSRC, include, os.path.join(include, "third_party", "op-plugin"),
                      os.path.join(include, "third_party", "acl", "inc"),
                      os.path.join(include, "third_party", "hccl", "inc")],
        depends=HEADERS,
        define_macros=[("CURRENT_VERSION", f"V{major}R{minor}")],
        extra_compile_args={"cxx": ["-O2", "-std=c++20", "-Wall", "-Wno-unused-function"]},
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
    packages=["torch_ext"],
    ext_modules=_extensions(),
    cmdclass={"build_ext": BuildWithIsaKernels},
    python_requires=">=3.10",
    install_requires=["torch>=2.13,<2.14"],
)
