#!/usr/bin/env python3
"""Stub shared libraries for the NVIDIA libraries the aarch64 torch wheel links but never needs on a CPU.

PyPI's torch wheels are CUDA builds (the aarch64 ones, and every x86-64 one but the default release's +cpu build):
libtorch_cuda.so, libc10_cuda.so, ... list libcudart.so.13, libcublas.so.13, libcudnn.so.9, ... as DT_NEEDED,
normally installed from a dozen nvidia-* wheels (gigabytes). For every such library that is neither in torch/lib nor in the sysroot, this
script builds a stub with the same soname that defines every symbol torch imports from it, under the symbol
version torch asks for (read with readelf), so the dynamic loader is satisfied. Every stub function returns
100 (cudaErrorNoDevice / CUDA_ERROR_NO_DEVICE); no CPU code path calls them.

Used by tools/aarch64/run.sh (the aarch64 wheel under qemu) and tools/venvs.py (the x86-64 venvs of other
torch versions, stubs written into torch/lib, which is on every torch library's RPATH).

Usage: cuda_stubs.py TORCH_LIB_DIR SYSROOT OUT_DIR   (env: CC, default aarch64-linux-gnu-gcc;
                                                       READELF, default aarch64-linux-gnu-readelf;
                                                       STUB_TRIPLET, default aarch64-linux-gnu: the
                                                       multiarch directory of SYSROOT's libraries)
"""

import collections
import concurrent.futures
import glob
import os
import re
import subprocess
import sys

READELF = os.environ.get("READELF", "aarch64-linux-gnu-readelf")
CC = os.environ.get("CC", "aarch64-linux-gnu-gcc")


def readelf(*args):
    return subprocess.run([READELF, "-W", *args], check=True, capture_output=True, text=True).stdout


def needed(lib):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf("-d", lib))


def version_files(lib):
    """version name -> file that defines it, from the .gnu.version_r section."""
    out, current = {}, None
    for line in readelf("-V", lib).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Name: (\S+)\s+Flags", line)
        if m and current:
            out[m.group(1)] = current
    return out


SYM = re.compile(r"^\s*\d+:\s+[0-9a-f]+\s+(\d+|0x[0-9a-f]+)\s+(\w+)\s+(\w+)\s+\w+\s+(\w+)\s+(\S+)")


def dynsyms(lib):
    """(name, version or None, type, bind, ndx, size) of every dynamic symbol."""
    for line in readelf("--dyn-syms", lib).splitlines():
        m = SYM.match(line)
        if not m:
            continue
        size, typ, bind, ndx, name = m.groups()
        version = None
        if "@" in name:
            name, version = name.split("@", 1)
            version = version.lstrip("@").split(" ")[0]
        yield name, version, typ, bind, ndx, int(size, 0)


def main():
    torch_lib, sysroot, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    torch_libs = sorted(glob.glob(os.path.join(torch_lib, "*.so*")))
    present = {os.path.basename(p) for p in torch_libs}
    system_libs = []
    triplet = os.environ.get("STUB_TRIPLET", "aarch64-linux-gnu")
    for d in (f"lib/{triplet}", f"usr/lib/{triplet}", "lib", "usr/lib"):
        for p in glob.glob(os.path.join(sysroot, d, "*.so*")):
            present.add(os.path.basename(p))
            system_libs.append(p)

    def symbols(lib):
        try:
            return list(dynsyms(lib))
        except subprocess.CalledProcessError:   # linker scripts named .so
            return []

    def defines(lib):
        return {name for name, version, typ, bind, ndx, size in symbols(lib) if ndx != "UND"}

    # every library's readelf at once over the cores (the sysroot holds a few thousand: most of the time here); of the
    # sysroot's, only the names each defines are kept
    pool = concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1)
    syms_of = dict(zip(torch_libs, pool.map(symbols, torch_libs)))
    needed_of = dict(zip(torch_libs, pool.map(needed, torch_libs)))
    system_defined = list(pool.map(defines, system_libs))

    # symbols torch imports from each missing library; unversioned ones are resolved below
    stubs = collections.defaultdict(dict)        # soname -> {symbol: (version, type, size)}
    unversioned_missing = {}                     # consumer -> missing libs without symbol versions
    unversioned_undef = {}                       # consumer -> [(name, type, size)]
    for lib in torch_libs:
        missing = [n for n in needed_of[lib] if n not in present]
        if not missing:
            continue
        vfiles = version_files(lib)
        for soname in missing:
            stubs.setdefault(soname, {})
        unversioned_missing[lib] = [m for m in missing if m not in vfiles.values()]
        unversioned_undef[lib] = []
        for name, version, typ, bind, ndx, size in syms_of[lib]:
            if ndx != "UND" or not name or bind == "WEAK":
                continue
            if version and vfiles.get(version) in missing:
                stubs[vfiles[version]][name] = (version, typ, size)
            elif not version:
                unversioned_undef[lib].append((name, typ, size))

    defined = set().union(*system_defined, *({name for name, version, typ, bind, ndx, size in syms if ndx != "UND"}
                                             for syms in syms_of.values()))
    for lib, syms in unversioned_undef.items():
        targets = unversioned_missing[lib]
        for name, typ, size in syms:
            if name not in defined:
                for soname in targets:
                    stubs[soname].setdefault(name, (None, typ, size))

    compiles = []
    for soname, syms in sorted(stubs.items()):
        base = os.path.join(out_dir, soname)
        versions = sorted({v for v, _, _ in syms.values() if v})
        with open(base + ".c", "w") as f:
            f.write(f"/* stub of {soname} for CPU-only torch (generated by tools/cuda_stubs.py) */\n")
            for i, (name, (version, typ, size)) in enumerate(sorted(syms.items())):
                if typ == "OBJECT":
                    f.write(f'char stub_obj_{i}[{max(size, 8)}] __asm__("{name}") '
                            '__attribute__((visibility("default"), aligned(16)));\n')
                else:
                    f.write(f'long stub_fn_{i}(void) __asm__("{name}") __attribute__((visibility("default")));\n'
                            f"long stub_fn_{i}(void) {{ return 100; }}\n")
        with open(base + ".map", "w") as f:
            for v in versions:
                names = sorted(n for n, (ver, _, _) in syms.items() if ver == v)
                f.write(f"{v} {{\n  global:\n" + "".join(f"    {n};\n" for n in names) + "};\n")
            plain = sorted(n for n, (ver, _, _) in syms.items() if not ver)
            if plain or not versions:
                f.write("{\n  global:\n" + "".join(f"    {n};\n" for n in plain) + "  local: *;\n};\n"
                        if not versions else
                        "")
        cmd = [CC, "-shared", "-fPIC", "-O0", "-o", base, f"-Wl,-soname,{soname}", base + ".c"]
        if versions:
            cmd.append(f"-Wl,--version-script={base}.map")
        compiles.append(pool.submit(subprocess.run, cmd, check=True))
        print(f"cuda-stubs: {soname}: {len(syms)} symbols" + (f" (version {', '.join(versions)})" if versions else ""))
    for done in compiles:
        done.result()
    pool.shutdown()


if __name__ == "__main__":
    main()
