"""The CANN functions an installed torch_npu wheel can ask the fake libraries for (its symbol list).

build.py derives the list from the torch_npu it builds for (each release has its own: 2.6's libtorch_npu.so
names other functions than 2.13's) and turns each into a weak stub returning 0 in the fake libascendcl.so
(runtime.cpp's real definitions override them). Two sources, both read from the wheel with binutils, nothing
imported:
  * linked: the undefined dynamic symbols of torch_npu's shared objects that neither they, torch, Python nor the
    C/C++ runtime define (`nm -D --undefined-only` minus `nm -D --defined-only`);
  * looked up at run time: torch_npu's FunctionLoader resolves CANN functions by name with dlsym, and op-plugin's
    GetOpApiFuncAddr the aclnn ones; those names are string literals in libtorch_npu.so (`strings`), kept when
    they carry a CANN prefix. This over-approximates (a few fragments of longer literals slip in); a superfluous
    stub is harmless, a missing one fails the lookup.
aclnn operators and the nnopbase object API are left out: the fake libopapi.so defines them (opapi/).

linked_route() adds what the objects on the torchair route need (torch_npu's _C and torchair's core/*.so, which
`import torch_npu.dynamo.torchair` loads, and the wheel's libraries they need): their NEEDED libraries that are
CANN's (neither in the wheels nor found by the system loader), and every undefined, non-weak, unversioned dynamic
symbol of theirs that nothing defines (torch, torch_npu, Python, the system libraries `ldd` finds), C++ mangled
names included (GE's `ge::` classes, securec's `*_s`). A symbol is a function where an object calls it through
its PLT (a JUMP_SLOT relocation); else data where a relocation copies it (COPY: its size is the referencing
object's symbol size), a referencing object gives it the type OBJECT or TLS, or its demangled C++ name is no
function (vtables, typeinfo, static members: zero-filled, of a default size where the objects give none; they
only need an address); else a function.

Usage: python regen_symbols.py SITE_PACKAGES [OUT]   (the site-packages directory holding torch and torch_npu;
       prints the list, or writes it to OUT) - to look at a release's list; build.py calls symbols().
"""

import glob
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CANN_NAME = re.compile(r"^(acl[A-Za-z0-9_]+|Hccl[A-Za-z0-9_]+|Msprof[A-Za-z0-9_]+|rt[A-Z][A-Za-z0-9_]+|"
                       r"mstx[A-Za-z0-9_]+|ge[A-Z][A-Za-z0-9_]+|aclshmem[a-z_]*)$")
# defined by the fake libopapi.so (opapi/nnopbase.cpp), looked up by op-plugin from there
OPAPI_OWN = re.compile(r"^(aclnn|acl(Create|Destroy)(Tensor|Scalar|IntArray|FloatArray|BoolArray|TensorList|"
                       r"ScalarList)$|aclGetViewShape$|aclDestroyAclOpExecutor$|aclSetAclOpExecutorRepeatable$)")


def dynamic_symbols(path, which):
    out = subprocess.run(["nm", "-D", f"--{which}-only", path], capture_output=True, text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def symbols(site):
    """(names, number linked, number looked up) for the torch and torch_npu installed in `site`."""
    npu_objects = glob.glob(os.path.join(site, "torch_npu", "lib", "*.so")) + \
        glob.glob(os.path.join(site, "torch_npu", "_C*.so"))
    defined = set()
    for path in npu_objects + glob.glob(os.path.join(torch_dir(site), "lib", "*.so*")):
        defined |= dynamic_symbols(path, "defined")
    undefined = set()
    for path in npu_objects:
        undefined |= dynamic_symbols(path, "undefined")
    linked = {s for s in undefined - defined if CANN_NAME.match(s)}
    strings = subprocess.run(["strings", "-n", "6", os.path.join(site, "torch_npu", "lib", "libtorch_npu.so")],
                             capture_output=True, text=True).stdout.split()
    looked_up = {s for s in strings if CANN_NAME.match(s)}
    names = sorted(s for s in linked | looked_up if not OPAPI_OWN.match(s))
    return names, len(linked), len(looked_up)


# torchair's core/*.so, loaded by `import torch_npu.dynamo.torchair`; _C by `import torch_npu`
ROUTE_ROOTS = [os.path.join("torch_npu", "_C*.so"), os.path.join("torch_npu", "dynamo", "torchair", "core", "*.so")]
PYTHON_NAME = re.compile(r"^_?Py[A-Za-z_]")
RUNTIME_VERSION = re.compile(r"^(GLIBC|GLIBCXX|CXXABI|GCC)_")  # symbol versions of the C and C++ runtime
# vtable, VTT, typeinfo, typeinfo name, guard variable
CXX_DATA = re.compile(r"^_ZT[VTIS]|^_ZGV")
DEFAULT_DATA_SIZE = {"vtable": 512, "other": 64}  # bytes of a zero-filled stand-in whose size the wheel does not give


def dynsyms(path):
    """[(name, version or "", type, bind, defined, size)] from `readelf --dyn-syms`."""
    out = subprocess.run(["readelf", "-W", "--dyn-syms", path], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].rstrip(":").isdigit():
            continue
        name, _, version = f[7].partition("@")
        rows.append((name, version.lstrip("@"), f[3], f[4], f[6] != "UND", int(f[2], 0)))
    return rows


def relocation_types(path):
    """{symbol: {relocation types}} from `readelf -r` (R_X86_64_JUMP_SLOT, R_AARCH64_COPY, ...)."""
    out = subprocess.run(["readelf", "-W", "-r", path], capture_output=True, text=True).stdout
    types = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[2].startswith("R_"):
            types.setdefault(f[4].split("@")[0], set()).add(re.sub(r"^R_(X86_64|AARCH64)_", "", f[2]))
    return types


def needed(path):
    out = subprocess.run(["readelf", "-W", "-d", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _system_libraries(paths, site):
    """The libraries the system loader finds for `paths` (outside site-packages): libc, libstdc++, ..."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}  # not an older fake's directory
    found = set()
    for path in paths:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, env=env).stdout
        for m in re.finditer(r"^\s*(?:(\S+) => )?(/\S+) \(0x", out, re.M):  # "name => path (addr)", "path (addr)"
            if not os.path.realpath(m.group(2)).startswith(os.path.realpath(site)):
                found.add((m.group(1) or os.path.basename(m.group(2)), os.path.realpath(m.group(2))))
    return found


def _demangled(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def torch_dir(site):
    """torch's package directory: in `site`, or in a directory a .pth file there adds (make test-npu's .venv-npu
    takes torch from .venv)."""
    dirs = [site]
    for pth in sorted(glob.glob(os.path.join(site, "*.pth"))):
        with open(pth) as f:
            dirs += [line.strip() for line in f if line.strip() and not line.startswith(("#", "import"))]
    for d in dirs:
        if os.path.isdir(os.path.join(d, "torch", "lib")):
            return os.path.join(d, "torch")
    raise SystemExit(f"regen_symbols.py: no torch beside {site}")


def linked_route(site, torch_package=None):
    """(CANN libraries, functions, {data symbol: size}) the objects on the torchair route need: see above."""
    wheel = {}  # file name -> path, for every shared object of torch and torch_npu
    for path in glob.glob(os.path.join(torch_package or torch_dir(site), "lib", "*.so*")) + \
            glob.glob(os.path.join(site, "torch_npu", "**", "*.so*"), recursive=True):
        wheel.setdefault(os.path.basename(path), path)
    route = []
    todo = [p for pattern in ROUTE_ROOTS for p in sorted(glob.glob(os.path.join(site, pattern)))]
    while todo:
        path = todo.pop()
        if path in route:
            continue
        route.append(path)
        todo += [wheel[n] for n in needed(path) if n in wheel and "torch_npu" in wheel[n]]
    system = _system_libraries(route, site)
    system_names = {name for name, _ in system}
    libraries = sorted({n for p in route for n in needed(p) if n not in wheel and n not in system_names})
    defined = set()
    for path in set(wheel.values()) | {p for _, p in system}:
        defined |= {r[0] for r in dynsyms(path) if r[4]}
    wanted = {}  # name -> (symbol and relocation types seen, largest size seen)
    for path in route:
        relocations = relocation_types(path)
        for name, version, typ, bind, is_defined, size in dynsyms(path):
            if (is_defined or not name or bind == "WEAK" or name in defined or RUNTIME_VERSION.match(version)
                    or PYTHON_NAME.match(name) or OPAPI_OWN.match(name)):
                continue
            types, old = wanted.get(name, (set(), 0))
            wanted[name] = (types | {typ} | relocations.get(name, set()), max(old, size))
    cxx = _demangled(sorted(n for n in wanted if n.startswith("_Z")))
    functions, data = [], {}
    for name, (types, size) in sorted(wanted.items()):
        if "JUMP_SLOT" not in types and (types & {"COPY", "OBJECT", "TLS"} or CXX_DATA.match(name) or
                                         (name in cxx and "(" not in cxx[name])):
            kind = "vtable" if name.startswith(("_ZTV", "_ZTT")) else "other"
            data[name] = (size or DEFAULT_DATA_SIZE[kind], "TLS" in types)
        else:
            functions.append(name)
    return libraries, functions, data


def main(site, out=None):
    names, linked, looked_up = symbols(site)
    libraries, functions, data = linked_route(site)
    print(f"torchair route: CANN libraries {' '.join(libraries)}; {len(functions)} functions "
          f"({sum(n.startswith('_Z') for n in functions)} C++), {len(data)} data", file=sys.stderr)
    names = sorted(set(names) | set(functions))
    text = "\n".join(names) + "\n"
    if out:
        with open(out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    print(f"{len(names)} symbols ({linked} linked, {looked_up} looked up by name)", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:3])
