"""Builds the test-only NPU stand-in (cached under build/npu_standin, gitignored).

* ``libaclnn_standin.so``: the aclnn side, plain C++ without torch: the nnopbase objects and every operator family's
  models of the fake CANN's libopapi.so (tests/fake_cann/opapi/nnopbase.cpp and opapi/ops/*.cpp, one file per family,
  found by the glob: one model for both harnesses), with -Werror; rebuilt only when a source, a header or the
  command changes (their hash in the file name).
* the ``torch_ext_npu_standin`` library: the sources of torch_ext._C_npu UNCHANGED (csrc/core/npu/*.cpp and every
  operator family's npu.cpp, with the checks and composites they call, as setup.py's NPU_SOURCES), plus
  torch_npu_standin.cpp (the stand-in's definitions of the torch_npu / libascendcl functions the headers in
  tests/npu_stub/include declare, and the torch.ops.npu_standin test hooks), compiled with
  torch.utils.cpp_extension.load against those headers (tests/npu_stub/include comes first on the include path). Loading it registers the PrivateUse1 kernels of the npu_ext ops, which the tests call
  on CPU tensors through ``OpOverload.redispatch`` with a PrivateUse1 dispatch key set. The sources compile as one
  unity unit per job (as setup.py's), and ninja recompiles only what changed.
"""

import glob
import hashlib
import os
import platform
import runpy
import subprocess
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUB = os.path.join(ROOT, "tests", "npu_stub")
# one build directory per architecture: the aarch64 suite (tools/aarch64, under emulation) shares the tree
BUILD = os.path.join(ROOT, "build", "npu_standin" if platform.machine() == "x86_64"
                     else f"npu_standin-{platform.machine()}")
LIB_ENV = "NPU_EXT_ACLNN_STANDIN_LIB"


OPAPI = os.path.join(ROOT, "tests", "fake_cann", "opapi")
# nnopbase.cpp and every operator family's model (a new family's file is compiled in without an edit here); the other
# sources of opapi/ need torch (aten*.cpp, ...) or are the real runtime's only (pta_cache.cpp)
OPAPI_SOURCES = [os.path.join(OPAPI, "nnopbase.cpp")] + sorted(glob.glob(os.path.join(OPAPI, "ops", "*.cpp")))
# every header they may include (opapi's, opapi/ops' and the fake CANN's float16.h)
OPAPI_HEADERS = (sorted(glob.glob(os.path.join(OPAPI, "*.h")) + glob.glob(os.path.join(OPAPI, "ops", "*.h")))
                 + [os.path.join(OPAPI, "..", "float16.h")])


def build_runtime():
    cmd = [os.environ.get("CXX", "g++"), "-std=c++20", "-O2", "-shared", "-fPIC", "-Wall", "-Werror",
           "-Wno-unused-parameter"]
    h = hashlib.sha256(" ".join(cmd).encode())
    for path in OPAPI_SOURCES + OPAPI_HEADERS:  # each file's name and text: an added or renamed one changes it too
        with open(path, "rb") as f:
            h.update(os.path.relpath(path, OPAPI).encode() + b"\0" + f.read())
    digest = h.hexdigest()[:16]
    os.makedirs(BUILD, exist_ok=True)
    lib = os.path.join(BUILD, f"libaclnn_standin-{digest}.so")
    if not os.path.exists(lib):
        tmp = lib + f".tmp{os.getpid()}"
        subprocess.run(cmd + ["-o", tmp] + OPAPI_SOURCES, check=True)
        os.replace(tmp, lib)
    return lib


def build_npu_sources():
    import torch.utils.cpp_extension as cpp_ext

    csrc = os.path.join(ROOT, "csrc")
    sources = sorted(glob.glob(os.path.join(csrc, "core", "npu", "*.cpp")) + [os.path.join(csrc, "core", "checks.cpp")]
                     + [p for name in ("npu.cpp", "checks.cpp", "composite.cpp")
                        for p in glob.glob(os.path.join(csrc, "ops", "*", name))])
    build_dir = os.path.join(BUILD, "ext")
    os.makedirs(build_dir, exist_ok=True)
    # A unity build, as setup.py's (tools/unity.py): one generated unit per job, so torch's headers are parsed once per
    # unit rather than once per source (the cold build of a fresh clone under the aarch64 emulation).
    unity = types.SimpleNamespace(**runpy.run_path(os.path.join(ROOT, "tools", "unity.py")))
    units = unity.write_units(sources, build_dir, "npu_sources", csrc, unity.jobs())
    sources = units + [os.path.join(STUB, "torch_npu_standin.cpp")]
    cpp_ext.load(
        name="torch_ext_npu_standin",
        sources=sources,
        extra_include_paths=[os.path.join(STUB, "include"), os.path.join(ROOT, "csrc")],
        # the stand-in declares torch_npu 2.13's op-plugin extension API
        extra_cflags=["-O1", "-std=c++20", "-Wall", "-Wno-unused-function", "-Werror=return-type",
                      "-DNPU_EXT_TORCH_NPU_VERSION=213", "-DNPU_EXT_NPU_MODULE"],
        extra_ldflags=["-ldl"],
        build_directory=build_dir,
        is_python_module=False,
        verbose=False,
    )


def setup():
    """Builds (or reuses) both parts, points the stand-in header at the runtime, loads the kernels.

    Returns the runtime library path. torch_ext (the schemas) must be imported first."""
    lib = build_runtime()
    os.environ[LIB_ENV] = lib
    build_npu_sources()
    return lib
