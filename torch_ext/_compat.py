"""The torch and torch_npu releases torch_ext runs on, and every difference between them the Python side needs,
in one place (the C++ differences are in csrc/core/torch_compat.h and csrc/core/npu/torch_npu_compat.h).

Supported: the torch releases of the release table (``torch_ext/releases.json``, read by ``torch_ext._releases``) and,
on Ascend, the torch_npu release of each; docs/platforms.md#the-release-table shows it and what each was tested with.

The compiled modules are C++ against one torch's (and torch_npu's) ABI: libtorch has no stable ABI between
releases, so a module built against another release fails at load with an undefined symbol, or worse, loads and
crashes later. setup.py writes beside each module what it was built against (``_C.versions.json``,
``_C_npu.versions.json``: the torch release, torch's C++ ABI, the Python, and torch_npu's release for _C_npu), on
every route that compiles it (pip install, pip install -e, setup.py build_ext [--inplace], a wheel).
``check_built_against`` compares them with the running ones BEFORE the modules are imported:

* a module without its record, or with a record that does not name the C++ ABI, is an ImportError saying so (the
  torch it was compiled for is unknown);
* another torch release, or the same release with the other C++ ABI (torch 2.6's PyPI wheels use the pre-C++11
  std::string ABI, its ``+cpu.cxx11.abi`` builds the C++11 one), is an ImportError naming both sides;
* torch_npu is compared by ``npu_difference()`` (torch_ext._npu acts on it: only _C_npu depends on torch_npu, so
  a torch_npu-only difference never stops the CPU ops).
"""

import json
import os
import re
import sys

import torch

from . import _releases

# The supported range, (major, minor) of the release table's oldest and newest torch, both inclusive (setup.py reads
# the same table and refuses to build for a torch outside it).
MIN_TORCH, MAX_TORCH = _releases.supported_torch(_releases.load())


def release(version):
    """'1.2.3+cu126' -> '1.2.3'; '1.2.3.post10' -> '1.2.3.post10' (the local part is the build flavour: the same
    release, whose C++ ABI the record names apart)."""
    return str(version).split("+")[0]


def base_release(version):
    """'1.2.3.post10' -> '1.2.3', '1.2.3' -> '1.2.3' (a post-release is the same release, PEP 440); None for a
    version that is not N.N.N[.postN] (a pre-release, a development build): it has no patch level to compare."""
    m = re.fullmatch(r"(\d+(?:\.\d+)*)(?:\.post\d+)?", release(version))
    return m.group(1) if m else None


def torch_cxx11_abi():
    """The running torch's C++ ABI: True for the C++11 std::string / std::list ABI (_GLIBCXX_USE_CXX11_ABI=1)."""
    return bool(torch._C._GLIBCXX_USE_CXX11_ABI)


def abi_name(cxx11_abi):
    return "C++11 ABI" if cxx11_abi else "pre-C++11 ABI"


def torch_release():
    return release(torch.__version__)


def _torch_npu_release():
    """The installed torch_npu's release, from its metadata (never imports it), or None."""
    import importlib.metadata

    for name in ("torch-npu", "torch_npu"):
        try:
            return release(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


REBUILD = "pip install --no-build-isolation --no-deps <torch_ext source>"
# What every record names (setup.py's _module_versions), and what _C_npu's names besides.
RECORD_KEYS = ("torch", "cxx11_abi", "python")
NPU_RECORD_KEYS = ("torch_npu",)


def module_file(module):
    """The file of a compiled module of this package (torch_ext._C -> .../_C.cpython-311-x86_64-linux-gnu.so), or
    None when there is none. Finds it as the import would, without loading it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.has_location and spec.origin else None


def check_compiled_here():
    """Raises ImportError when this package directory holds no compiled torch_ext._C and no build record: the source
    directory of a checkout that was never built in place, imported because Python runs from it (or from its parent).
    Names the installed torch_ext it shadows, if one is on sys.path, instead of a partial-import error."""
    import importlib.machinery

    here = os.path.dirname(os.path.abspath(__file__))
    if module_file("torch_ext._C") is not None or os.path.exists(os.path.join(here, "_C.versions.json")):
        return
    parent = os.path.dirname(here)
    others = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != parent]
    spec = importlib.machinery.PathFinder.find_spec("torch_ext", others)
    installed = (f"the installed torch_ext in {os.path.dirname(spec.origin)}" if spec is not None and spec.origin
                 else "an installed torch_ext")
    raise ImportError(
        f"torch_ext: {here} holds torch_ext's sources without its compiled module (torch_ext._C): this is a source "
        f"directory, imported ahead of {installed} because Python runs from {parent} (the current directory, or the "
        f"script's). Run from another directory (cd ~), or build the sources in place "
        "(pip install --no-build-isolation --no-deps -e .).")


def record_path(module):
    """torch_ext._C -> <its directory>/_C.versions.json (setup.py's name for it). A module this Python cannot see
    (built for another Python: its file name names that Python) still has its record in the package directory;
    None when there is neither."""
    path = module_file(module)
    if path is not None:
        return os.path.join(os.path.dirname(path), os.path.basename(path).split(".")[0] + ".versions.json")
    other = os.path.join(os.path.dirname(os.path.abspath(__file__)), module.rsplit(".", 1)[-1] + ".versions.json")
    return other if os.path.exists(other) else None


def python_release():
    import sys

    return "%d.%d" % sys.version_info[:2]


def read_record(module):
    """(record path, record, problem) of a compiled module: (None, None, None) when the module is absent; a record
    (dict) and no problem; or no record and a sentence saying what is wrong with it (missing, unreadable, without
    the C++ ABI)."""
    path = record_path(module)
    if path is None:
        return None, None, None
    try:
        with open(path) as f:
            info = json.load(f)
    except FileNotFoundError:
        return path, None, (f"{module} ({module_file(module)}) has no build record: {path} is missing. torch_ext's "
                            "setup.py writes it beside every module it compiles (pip install, pip install -e, "
                            "setup.py build_ext), so this one was built by other means or copied without it, and "
                            "the torch it was compiled for is unknown")
    except (OSError, ValueError) as e:
        return path, None, f"{module}'s build record {path} cannot be read ({type(e).__name__}: {e})"
    keys = RECORD_KEYS + (NPU_RECORD_KEYS if module.endswith("_C_npu") else ())
    missing = [k for k in keys if not isinstance(info, dict) or k not in info]
    if missing:
        return path, None, (f"{module}'s build record {path} does not name {', '.join(missing)} (written by a "
                            "torch_ext before 0.5.1, or edited), so the torch it was compiled for is not known")
    return path, info, None


def built_against(module):
    """What setup.py recorded for a compiled module of this package ({} when the module or its record is absent or
    unreadable: check_built_against says which)."""
    return read_record(module)[1] or {}


def _torch_side(info, with_abi):
    return f"torch {info['torch']}" + (f" ({abi_name(info['cxx11_abi'])})" if with_abi else "")


def check_built_against(modules):
    """Raises ImportError when any of ``modules`` (``torch_ext._C``, ``torch_ext._C_npu``) present here has no
    usable record, or was built against another torch release or C++ ABI than the running one, naming both sides.
    Called before they are imported (torch_npu is not imported either: its release comes from its metadata). A
    torch_npu-only difference is not raised here: see npu_difference()."""
    unknown, mismatched = [], []
    for module in modules:
        _, info, problem = read_record(module)
        if problem:
            unknown.append(problem)
        elif info is not None and (info["torch"] != torch_release() or info["cxx11_abi"] != torch_cxx11_abi()):
            mismatched.append((module, info))
        elif info is not None and module_file(module) is None and info["python"] != python_release():
            unknown.append(f"{module} was built for Python {info['python']}, which this Python "
                           f"{python_release()} does not load (the module's file name names its Python)")
    if unknown:
        hint = (" (or set NPU_EXT_LOAD_NPU=0 to run without its NPU kernels)"
                if any(p.startswith("torch_ext._C_npu") for p in unknown) else "")
        raise ImportError(f"{'; '.join(unknown)}. Rebuild torch_ext here ({REBUILD}){hint}.")
    if mismatched:
        with_abi = any(info["cxx11_abi"] != torch_cxx11_abi() for _, info in mismatched)
        built = "; ".join(f"{module} was built against {_torch_side(info, with_abi)}"
                          + (f" and torch_npu {info['torch_npu']}" if "torch_npu" in info else "")
                          for module, info in mismatched)
        npu = _torch_npu_release()
        running = (f"torch {torch.__version__}" + (f" ({abi_name(torch_cxx11_abi())})" if with_abi else "")
                   + (f" and torch_npu {npu}" if npu else " without torch_npu"))
        raise ImportError(
            f"{built}, but this environment runs {running}. A C++ extension only loads in the torch (and torch_npu) "
            f"it was compiled for: rebuild torch_ext here ({REBUILD}), or run it with the releases it was built "
            "for.")


def npu_difference(module="torch_ext._C_npu"):
    """None when ``module`` was built against the running torch_npu (or there is nothing to compare: no module, no
    record, no torch_npu installed); else the sentence naming both torch_npu releases, why torch_ext._C_npu is not
    loaded. Even a .postN difference of the same release counts: torch_npu's post-releases change the C++ symbols
    _C_npu links (the release table's post_release_evidence: a .postN whose libtorch_npu.so no longer exports a
    symbol the build of the previous one links; docs/install.md#troubleshooting)."""
    _, info, _ = read_record(module)
    running = _torch_npu_release()
    if info is None or running is None or info["torch_npu"] == running:
        return None
    built = info["torch_npu"]
    same = base_release(built) is not None and base_release(built) == base_release(running)
    return (f"{module} was built against torch_npu {built}, but this environment runs torch_npu {running}"
            + (f" (the same release {base_release(built)}, another .postN: post-releases change the C++ symbols "
               f"{module} links)" if same else "")
            + f"; rebuild torch_ext here ({REBUILD}) to load the NPU kernels")


def report(modules=("torch_ext._C", "torch_ext._C_npu")):
    """What each compiled module was built against (its record) next to what runs, one line each: what
    ``python -m torch_ext`` prints (also when the import stops on them). Imports nothing compiled."""
    npu = _torch_npu_release()
    lines = []
    for module in modules:
        path, info, problem = read_record(module)
        name = module.rsplit(".", 1)[-1]
        if path is None:
            if module.endswith("._C"):
                lines.append(f"built against: {name}: no {module} here")
            continue
        if problem:
            lines.append(f"built against: {name}: unknown ({problem})")
            continue
        what = f"torch {info['torch']}, {abi_name(info['cxx11_abi'])}"
        if "torch_npu" in info:
            what += f", torch_npu {info['torch_npu']}"
        differs = []
        if info["torch"] != torch_release():
            differs.append(f"torch {torch_release()} runs")
        if info["cxx11_abi"] != torch_cxx11_abi():
            differs.append(f"torch's {abi_name(torch_cxx11_abi())} runs")
        if "torch_npu" in info and info["torch_npu"] != npu:
            differs.append(f"torch_npu {npu} runs" if npu else "torch_npu is not installed")
        if info["python"] != python_release():
            differs.append(f"Python {python_release()} runs")
        lines.append(f"built against: {name}: {what}, Python {info['python']} "
                     + (f"(differs: {'; '.join(differs)})" if differs else "(matches what runs)"))
    lines.append(f"running: torch {torch.__version__}, {abi_name(torch_cxx11_abi())}, "
                 + (f"torch_npu {npu}" if npu else "no torch_npu") + f", Python {python_release()} "
                 f"(supported: torch {MIN_TORCH[0]}.{MIN_TORCH[1]} to {MAX_TORCH[0]}.{MAX_TORCH[1]})")
    return lines
