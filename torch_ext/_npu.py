"""Loading of the NPU (Ascend) kernels, torch_ext._C_npu.

``_C_npu`` is built only when torch_npu is installed at build time (see setup.py). At import time it is loaded
only when it exists AND torch_npu is installed; torch_npu is imported first (it registers the NPU device,
PrivateUse1, and loads the libraries _C_npu links against). Without either, the package stays CPU-only.
Setting NPU_EXT_LOAD_NPU=0 skips the NPU kernels even when both are present.

Built against another torch_npu than the running one (the same torch: torch_ext/__init__.py stops any other torch),
_C_npu is not loaded, with a warning, and why_not_loaded() names both torch_npu releases; the CPU ops keep working.
That holds for a .postN of the same release too: a .postN's libtorch_npu.so may no longer export a symbol that _C_npu
built against the previous one links (the release table's post_release_evidence names such a pair and the symbol;
docs/install.md#troubleshooting).
"""

import importlib
import importlib.util
import os
import warnings

from . import _compat

LOADED = False  # True once the PrivateUse1 (NPU) kernels of torch.ops.npu_ext are registered
_why_not = "load() was not called"


def why_not_loaded():
    """Why the NPU kernels are not loaded ("" when they are)."""
    return "" if LOADED else _why_not


def wanted():
    """Whether load() will try to load torch_ext._C_npu: both it and torch_npu are installed, and
    NPU_EXT_LOAD_NPU is not 0. Imports nothing."""
    return (os.environ.get("NPU_EXT_LOAD_NPU", "1") != "0" and importlib.util.find_spec("torch_npu") is not None
            and importlib.util.find_spec("torch_ext._C_npu") is not None)


def load():
    """Imports torch_npu and torch_ext._C_npu when both are installed and _C_npu was built against this torch_npu.
    Returns LOADED."""
    global LOADED, _why_not
    if LOADED:
        return True
    if os.environ.get("NPU_EXT_LOAD_NPU", "1") == "0":
        _why_not = "NPU_EXT_LOAD_NPU=0"
        return False
    if importlib.util.find_spec("torch_npu") is None:
        _why_not = "torch_npu is not installed"
        return False
    if importlib.util.find_spec("torch_ext._C_npu") is None:
        _why_not = ("torch_ext was built without torch_npu (no torch_ext._C_npu): reinstall it with torch_npu "
                    "installed")
        return False
    _compat.check_built_against(["torch_ext._C_npu"])  # a record, this torch and its C++ ABI, or an ImportError
    # built for another torch_npu: the CPU ops work, the NPU kernels not (torch_npu is not imported for them then)
    difference = _compat.npu_difference()
    if difference:
        _why_not = difference
        warnings.warn(f"torch_ext: {difference}. The npu_ext NPU kernels are not loaded; the CPU ops work")
        return False
    try:
        importlib.import_module("torch_npu")
    except Exception as e:  # torch_npu present but unusable (e.g. no CANN): keep the CPU library working
        _why_not = f"torch_npu is installed but could not be imported ({type(e).__name__}: {e})"
        warnings.warn(f"torch_ext: {_why_not}; the npu_ext NPU kernels are not loaded")
        return False
    importlib.import_module("torch_ext._C_npu")
    LOADED = True
    return True
