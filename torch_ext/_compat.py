"""The torch and torch_npu releases torch_ext runs on, and every difference between them the Python side needs,
in one place (the C++ differences are in csrc/common/torch_compat.h and csrc/npu/torch_npu_compat.h).

Supported: torch 2.6 to 2.14, and with them torch_npu 2.6.0 to 2.14.0 (the torch_npu release of the same torch);
docs/platforms.md has the table and what each was tested with.

The compiled modules are C++ against one torch's (and torch_npu's) ABI: libtorch has no stable ABI between
releases, so a module built against another release fails at load with an undefined symbol, or worse, loads and
crashes later. setup.py writes beside each module the versions it was built against (``_C.versions.json``,
``_C_npu.versions.json``); ``check_built_against`` compares them with the running ones BEFORE the modules are
imported, and raises an ImportError naming both pairs.
"""

import json
import os

import torch

# The supported range (setup.py reads these two lines and refuses to build for a torch outside it).
MIN_TORCH = (2, 6)
MAX_TORCH = (2, 14)  # inclusive


def release(version):
    """'2.7.1+cu126' -> '2.7.1'; '2.7.1.post10' -> '2.7.1.post10' (the local part is the build flavour, the same
    ABI)."""
    return str(version).split("+")[0]


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


def _versions_path(module):
    """torch_ext._C -> <package dir>/_C.versions.json"""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), module.rsplit(".", 1)[-1] + ".versions.json")


def built_against(module):
    """What setup.py recorded for a compiled module of this package ({} when nothing was recorded: a build by
    other means, which is then not checked)."""
    try:
        with open(_versions_path(module)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def check_built_against(modules):
    """Raises ImportError when any of ``modules`` (``torch_ext._C``, ``torch_ext._C_npu``) was built against
    another torch or torch_npu release than the running ones, naming every pair. Called before they are imported
    (torch_npu is not imported either: its release comes from its metadata)."""
    problems = []
    for module in modules:
        built = built_against(module)
        wrong = []
        if built.get("torch") and built["torch"] != torch_release():
            wrong.append("torch")
        if built.get("torch_npu") and built["torch_npu"] != _torch_npu_release():
            wrong.append("torch_npu")
        if wrong:
            pair = f"torch {built['torch']}" + (f" and torch_npu {built['torch_npu']}" if "torch_npu" in built else "")
            problems.append(f"{module} was built against {pair}")
    if problems:
        npu = _torch_npu_release()
        running = f"torch {torch.__version__}" + (f" and torch_npu {npu}" if npu else " without torch_npu")
        raise ImportError(
            f"{'; '.join(problems)}, but this environment runs {running}. A C++ extension only loads in the torch "
            f"(and torch_npu) it was compiled for: rebuild torch_ext here (pip install --no-build-isolation "
            f"--no-deps <torch_ext source>), or run it with the releases it was built for.")
