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
    for path in npu_objects + glob.glob(os.path.join(site, "torch", "lib", "*.so*")):
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


def main(site, out=None):
    names, linked, looked_up = symbols(site)
    text = "\n".join(names) + "\n"
    if out:
        with open(out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    print(f"{len(names)} symbols ({linked} linked, {looked_up} looked up by name)", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:3])
