"""Builds the fake CANN libraries that let the real torch_npu (2.6.0 to 2.14.0) run without an NPU or CANN (test-only).

Output: build/fake_cann/<torch>-<torch_npu>-<hash>/lib, for the torch and torch_npu installed in the Python that
runs this script (their releases are part of the key: libopapi.so links that torch's libtorch, and the stubs
follow that torch_npu's symbol list; the hash covers every source here and the compiler flags, so an edit makes a
new directory and an unchanged tree reuses the old one). Put that directory on LD_LIBRARY_PATH before Python
starts (the dynamic loader reads it once): torch_npu's NEEDED libraries and its dlopen()s both find them there.

  libascendcl.so       the fake ACL runtime (runtime.cpp, acl_op_route.cpp), securec's *_s functions (securec.c: torchair's core
                       libraries call them), plus a weak stub returning 0 for every other CANN function torch_npu
                       links or looks up, and for every symbol torchair's core/*.so link that nothing defines (GE's
                       C++ API, mangled names as C identifiers; data symbols as zero-filled weak objects): that
                       release's symbol list, derived from its wheel by regen_symbols.py (symbols.txt)
  libhccl.so, libhcomm.so  the fake HCCL (hccl/): communicators over POSIX shared memory between the processes of one
                       host (docs/testing.md); libhcomm.so is empty and depends on libhccl.so
  libacl_op_compiler.so, libge_runner.so, libgraph.so, libacl_tdt_channel.so, libmsprofiler.so,
  libruntime.so, and every other CANN library torch_npu's or torchair's objects name as NEEDED (derived from the
  wheel: libfmk_parser.so, libascend_protobuf.so, ...)
                       empty libraries with those SONAMEs that depend on libascendcl.so, so a symbol looked up
                       in any of them (dlsym searches a library's dependencies) or linked by an object that needs
                       them is found there
  libopapi.so          the fake aclnn operators (opapi/): the nnopbase object API and executor cache (pta_cache.cpp),
                       each operator family's forward and backward operators modelled as the real kernels behave
                       (opapi/ops/<family>.cpp, one file per family; also what the aarch64 stand-in runs), and the
                       operators torch_npu's ATen kernels call, computed by CPU ATen (aten.cpp, aten_extra.cpp, the
                       _foreach_* ones of torch.optim in foreach.cpp; it links libtorch_cpu), the random ones
                       (random.cpp), and CANN's format cast aclnnNpuFormatCast (format_cast.cpp)
  libnnopbase.so       empty, depends on libopapi.so (torch_npu resolves aclDestroyAclOpExecutor there)

`python build.py` (run by the Python of the venv with torch and torch_npu; neither is imported) builds (or reuses)
and prints the lib directory; `--without aclnnX,aclnnY`
prints a directory whose libopapi.so lacks those entry points (both phases), linked from the same objects,
to put in front of the main one on LD_LIBRARY_PATH (a CANN older than an operator).
"""

import argparse
import concurrent.futures
import contextlib
import fcntl
import glob
import hashlib
import importlib.util
import os
import re
import runpy
import shutil
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUNTIME_SOURCES = ["runtime.cpp", "acl_op_route.cpp"]  # libascendcl.so (with runtime.h)
# every source of opapi/ and of opapi/ops/ (one file per operator family), relative to opapi/: a new family's file, or
# any new source, is compiled in without an edit here
def _opapi_files(ext):
    opapi = os.path.join(HERE, "opapi")
    found = glob.glob(os.path.join(opapi, "*." + ext)) + glob.glob(os.path.join(opapi, "ops", "*." + ext))
    return sorted(os.path.relpath(p, opapi) for p in found)


OPAPI_SOURCES = _opapi_files("cpp")
OPAPI_HEADERS = _opapi_files("h")
HCCL_SOURCES = ["comm.cpp", "reduce.cpp", "api.cpp"]
THIN_RUNTIME = ["libacl_op_compiler.so", "libge_runner.so", "libgraph.so", "libacl_tdt_channel.so",
                "libmsprofiler.so", "libruntime.so"]
CXXFLAGS = ["-std=c++20", "-O1", "-fPIC", "-Wall", "-Wno-unused-parameter"]


def _run(cmd):
    subprocess.run(cmd, check=True)


UNITY = os.path.join(ROOT, "tools", "unity.py")


def _unity():
    """tools/unity.py, the unity build's grouping (run from its path: tools/ is no package)."""
    return types.SimpleNamespace(**runpy.run_path(UNITY))


def _compile(cmd):
    """A compile command (not a link), through ccache where it is installed and CXX is not set: the sources that do
    not include torch compile to the same object for every torch release of the same C++ ABI (hashed after the
    preprocessor, without the directories: the Makefile's ccache settings)."""
    if os.environ.get("CXX") or not shutil.which("ccache"):
        return cmd
    return ["ccache"] + cmd


def _sources():
    paths = [os.path.join(HERE, n) for n in (*RUNTIME_SOURCES, "runtime.h", "float16.h", "regen_symbols.py",
                                             "build.py", "alloc_config_shim.cpp", "acl_op_desc.h", "securec.c")]
    paths += [os.path.join(HERE, "opapi", n) for n in OPAPI_SOURCES]
    paths += [os.path.join(HERE, "hccl", n) for n in HCCL_SOURCES + ["comm.h", "fake_hccl.h"]]
    paths += [os.path.join(HERE, "opapi", n) for n in OPAPI_HEADERS]  # every header: a new one is in the hash too
    paths.append(UNITY)  # how the sources are grouped into units
    return paths


def _digest():
    h = hashlib.sha256()
    for p in _sources():
        with open(p, "rb") as f:
            h.update(p.encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


def _cxx():
    return os.environ.get("CXX", "g++").split()


def _package_dir(name):
    """The installed package's directory, found without importing it (importing torch would load torch_npu)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"fake_cann/build.py: {name} is not installed in this Python ({sys.executable})")
    return list(spec.submodule_search_locations)[0]


def _release(name):
    import importlib.metadata

    return importlib.metadata.version(name).split("+")[0]


def _cxx11_abi():
    """torch's _GLIBCXX_USE_CXX11_ABI (0 for the torch 2.6 wheels, 1 from 2.7): libopapi.so calls libtorch."""
    code = "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")  # no torch_npu: the fakes do not exist yet
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@contextlib.contextmanager
def _locked(directory):
    """One process at a time builds in `directory` (the tests of a pytest-xdist run may ask for the same build at
    once); the others wait, then find it done."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def build():
    """Builds everything once per torch / torch_npu release and source hash; returns the lib directory."""
    key = f"{_release('torch')}-{_release('torch_npu')}-{_digest()}"
    out = os.path.join(ROOT, "build", "fake_cann", key)
    lib = os.path.join(out, "lib")
    if os.path.exists(os.path.join(out, ".done")):
        return lib
    with _locked(out):
        return lib if os.path.exists(os.path.join(out, ".done")) else _build(out, lib)


def _build(out, lib):
    os.makedirs(lib, exist_ok=True)
    obj = os.path.join(out, "obj")
    os.makedirs(obj, exist_ok=True)
    # torch_npu's acl headers: include/acl (2.7 and later; third_party/acl/inc/acl/acl.h only forwards there),
    # else include/third_party/acl/inc (2.6); the same order as setup.py's
    npu_include = os.path.join(_package_dir("torch_npu"), "include")
    acl_inc = ["-I", npu_include, "-I", os.path.join(npu_include, "third_party", "acl", "inc")]
    torch_dir = _package_dir("torch")
    rpath = "-Wl,-rpath,$ORIGIN"

    cxxflags = CXXFLAGS + [f"-D_GLIBCXX_USE_CXX11_ABI={_cxx11_abi()}"]
    includes = ["-I", os.path.join(torch_dir, "include"),
                "-I", os.path.join(torch_dir, "include", "torch", "csrc", "api", "include")]
    ccache_env = dict(os.environ, CCACHE_NODIRECT="1", CCACHE_NOHASHDIR="1")
    unity = _unity()

    def compile_all(pool, jobs):
        """(source, command, object) -> the futures of their compiles, run `jobs` at a time."""
        return [pool.submit(subprocess.run, _compile(cmd + ["-c", src, "-o", o]), check=True, env=ccache_env)
                for src, cmd, o in jobs]

    def obj_of(prefix, src):
        return os.path.join(obj, prefix + src.replace(os.sep, "_").replace(".cpp", ".o"))  # ops/gelu.cpp: ops_gelu.o

    # Every object but the stubs' compiles at once (the HCCL's first: libhccl.so's names decide the stubs)
    hccl_jobs = [(os.path.join(HERE, "hccl", src), _cxx() + cxxflags, obj_of("hccl_", src)) for src in HCCL_SOURCES]
    runtime_jobs = [(os.path.join(HERE, src), _cxx() + cxxflags + acl_inc, obj_of("", src)) for src in RUNTIME_SOURCES]
    runtime_jobs.append((os.path.join(HERE, "securec.c"), ["gcc", "-O1", "-fPIC", "-Wall"],
                         os.path.join(obj, "securec.o")))
    # libopapi.so's sources as a unity build (tools/unity.py, as setup.py's): one unit per job, so torch's headers,
    # which most of them include, are parsed once per unit rather than once per source
    opapi = os.path.join(HERE, "opapi")
    units = unity.write_units([os.path.join(opapi, src) for src in OPAPI_SOURCES], obj, "opapi", opapi, unity.jobs(),
                              "// Generated by tests/fake_cann/build.py: libopapi.so's sources as one unit.\n")
    opapi_jobs = [(unit, _cxx() + cxxflags + includes + ["-I", opapi], unit[:-len(".cpp")] + ".o") for unit in units]
    with concurrent.futures.ThreadPoolExecutor(unity.jobs()) as pool:
        hccl_done = compile_all(pool, hccl_jobs)
        others = compile_all(pool, opapi_jobs + runtime_jobs)
        for f in hccl_done:
            f.result()
        hccl_names = _hccl([o for _, _, o in hccl_jobs], lib)

        # libascendcl.so: runtime + weak stubs
        import regen_symbols  # beside this script, whose folder is sys.path[0]

        site = os.path.dirname(_package_dir("torch_npu"))
        names, _, _ = regen_symbols.symbols(site)
        cann_libraries, functions, data = regen_symbols.linked_route(site, torch_dir)  # the torchair route's
        names = sorted((set(names) | set(functions)) - set(data) - hccl_names)  # libhccl.so's own win
        with open(os.path.join(out, "symbols.txt"), "w") as f:
            f.writelines(f"{n}\n" for n in names)
            f.writelines(f"{n} data {size}\n" for n, (size, _) in sorted(data.items()))
        stubs = os.path.join(obj, "stubs.c")
        with open(stubs, "w") as f:
            f.write(f"/* generated by tests/fake_cann/build.py from torch_npu {_release('torch_npu')}'s symbol list */\n")
            f.writelines(_stub(n) for n in names)
            f.writelines(_stub(n, size, tls) for n, (size, tls) in sorted(data.items()))
        others += compile_all(pool, [(stubs, ["gcc", "-O1", "-fPIC"], os.path.join(obj, "stubs.o"))])
        for f in others:
            f.result()
    _run(_cxx() + ["-shared", "-o", os.path.join(lib, "libascendcl.so"), "-Wl,-soname,libascendcl.so"]
         + [o for _, _, o in runtime_jobs] + [os.path.join(obj, "stubs.o")])
    empty = os.path.join(obj, "empty.c")
    with open(empty, "w") as f:
        f.write("/* a fake CANN library: its symbols come from the library it depends on */\n")
    thin = sorted((set(THIN_RUNTIME) | set(cann_libraries)) - {"libascendcl.so", "libopapi.so", "libnnopbase.so",
                                                                "libhccl.so", "libhcomm.so"})
    for name in thin:
        _run(["gcc", "-shared", "-fPIC", "-o", os.path.join(lib, name), f"-Wl,-soname,{name}", empty,
              "-Wl,--no-as-needed", f"-L{lib}", "-lascendcl", rpath])

    # libopapi.so
    objects = [o for _, _, o in opapi_jobs]
    _link_opapi(lib, objects, torch_dir)
    _alloc_config_shim(out, lib, torch_dir, cxxflags)
    _run(["gcc", "-shared", "-fPIC", "-o", os.path.join(lib, "libnnopbase.so"), "-Wl,-soname,libnnopbase.so", empty,
          "-Wl,--no-as-needed", f"-L{lib}", "-lopapi", rpath])
    with open(os.path.join(out, ".done"), "w") as f:
        f.write(" ".join(objects))
    return lib


def _hccl(objects, lib):
    """libhccl.so, the fake HCCL (hccl/: communicators over POSIX shared memory between the processes of one host),
    linked from its objects, and libhcomm.so, empty over it (torch_npu looks HcclGroupStart / HcclGroupEnd up there).
    Neither depends on libascendcl.so, so a name torch_npu looks up in them that the fake does not define is not found
    (torch_npu then takes its fallback) rather than found as a stub returning 0. Returns the names libhccl.so
    defines."""
    hccl = os.path.join(lib, "libhccl.so")
    _run(_cxx() + ["-shared", "-o", hccl, "-Wl,-soname,libhccl.so"] + objects + ["-lrt", "-pthread"])
    _run(["gcc", "-shared", "-fPIC", "-o", os.path.join(lib, "libhcomm.so"), "-Wl,-soname,libhcomm.so",
          "-xc", "/dev/null", "-Wl,--no-as-needed", f"-L{lib}", "-lhccl", "-Wl,-rpath,$ORIGIN"])
    defined = subprocess.run(["nm", "-D", "--defined-only", hccl], check=True, capture_output=True, text=True).stdout
    return {line.split()[-1] for line in defined.splitlines() if line.split()[-1].startswith("Hccl")}


def _stub(symbol, size=None, tls=False):
    """The weak C definition of `symbol`: a function returning 0, or (a size) a zero-filled data object (vtables,
    typeinfo, variables). Named by the symbol where it is a C identifier (C names, C++ mangled names), else by an
    identifier with the symbol as its assembler name."""
    ident = symbol if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", symbol) else \
        f"fake_cann_sym_{hashlib.sha256(symbol.encode()).hexdigest()[:12]}"
    label = "" if ident == symbol else f' __asm__("{symbol}")'
    if size is not None:
        return f"__attribute__((weak, aligned(16))) {'__thread ' if tls else ''}char {ident}[{size}]{label};\n"
    if label:
        return f"__attribute__((weak)) long {ident}(void){label};\nlong {ident}(void) {{ return 0; }}\n"
    return f"__attribute__((weak)) long {ident}(void) {{ return 0; }}\n"


def _alloc_config_shim(out, lib, torch_dir, cxxflags):
    """libnpu_ext_alloc_config_shim.so (alloc_config_shim.cpp), for a CUDA build of torch whose libc10 has the
    allocator-config key registry (torch 2.9 and later); tools/versions.py preloads it when it exists."""
    torch_lib = os.path.join(torch_dir, "lib")
    if not os.path.exists(os.path.join(torch_lib, "libc10_cuda.so")):
        return
    defined = subprocess.run(["nm", "-D", "--defined-only", os.path.join(torch_lib, "libc10.so")],
                             capture_output=True, text=True).stdout
    if "AcceleratorAllocatorConfig14getMutableKeys" not in defined:
        return
    _run(_cxx() + cxxflags + ["-shared", "-o", os.path.join(lib, "libnpu_ext_alloc_config_shim.so"),
                              os.path.join(HERE, "alloc_config_shim.cpp"), "-ldl"])


def _link_opapi(lib, objects, torch_dir, version_script=None):
    cmd = _cxx() + ["-shared", "-o", os.path.join(lib, "libopapi.so"), "-Wl,-soname,libopapi.so"] + objects
    cmd += [f"-L{os.path.join(torch_dir, 'lib')}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{os.path.join(torch_dir, 'lib')}"]
    if version_script:
        cmd.append(f"-Wl,--version-script,{version_script}")
    _run(cmd)


def without(entry_points):
    """A lib directory whose libopapi.so lacks `entry_points` (both phases)."""
    lib = build()
    out = os.path.dirname(lib)
    key = ",".join(sorted(entry_points))
    vdir = os.path.join(out, "without-" + hashlib.sha256(key.encode()).hexdigest()[:12])
    if os.path.exists(os.path.join(vdir, "libopapi.so")):
        return vdir
    with _locked(vdir):
        if os.path.exists(os.path.join(vdir, "libopapi.so")):
            return vdir
        script = os.path.join(vdir, "opapi.map")
        hidden = "".join(f"    {e}; {e}GetWorkspaceSize;\n" for e in sorted(entry_points))
        with open(script, "w") as f:
            f.write(f"{{\n  local:\n{hidden}}};\n")
        with open(os.path.join(out, ".done")) as f:
            objects = f.read().split()
        tmp = os.path.join(vdir, "tmp")
        os.makedirs(tmp, exist_ok=True)
        _link_opapi(tmp, objects, _package_dir("torch"), script)
        os.replace(os.path.join(tmp, "libopapi.so"), os.path.join(vdir, "libopapi.so"))
    return vdir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without", default="", help="comma-separated aclnn entry points to leave out")
    args = parser.parse_args(argv)
    if args.without:
        print(without([e for e in args.without.split(",") if e]))
    else:
        print(build())


if __name__ == "__main__":
    sys.exit(main())
