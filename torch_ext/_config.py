"""``torch_ext.show_config()`` / ``python -m torch_ext``: what this installation is running, for bug reports.

Versions (torch_ext, torch, Python, torch_npu and CANN when present), the CPU and its kernel variants (the one in
use and those this CPU can run), threads, the NPU state (loaded or why not; the SoC and, per operator, the aclnn
entry points found and whether the CPU fallback is active), the Megatron patch, and the environment switches
in force. Nothing here imports torch_npu or megatron: it reports what is already loaded, and looks up what is
installed without importing it.
"""

import importlib.metadata
import importlib.util
import os
import platform

import torch

# Environment variables that change what torch_ext does at run time.
ENV_SWITCHES = {
    "ATEN_CPU_CAPABILITY": "forces the CPU kernel variant (default, avx2, avx512), of ATen and torch_ext alike",
    "OMP_NUM_THREADS": "threads of the CPU kernels (torch.set_num_threads overrides it)",
    "NPU_EXT_LOAD_NPU": "0: do not load the NPU kernels (torch_ext._C_npu) even with torch_npu installed",
    "NPU_EXT_NO_CPU_FALLBACK": "1: an op without an aclnn kernel on this NPU raises instead of running on the CPU",
    "NPU_EXT_NPU_FORWARD": "composite: the forward ops run their ATen composites on the NPU instead of their aclnn kernels",
    "ASCEND_TOOLKIT_HOME": "the CANN installation torch_npu uses",
    "THP_MEM_ALLOC_ENABLE": "1: PyTorch's CPU allocator asks for transparent huge pages for tensors of 2 MB and more "
                            "(fewer page faults on large fresh outputs, slower on some hosts: docs/performance.md)",
}


def _thp_mode():
    """The kernel's transparent huge page mode (the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
    except OSError:
        return "unknown"
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else text.strip() or "unknown"


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") or line.startswith("Model"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cann_version():
    """CANN's version as its toolkit records it (ascend_toolkit_install.info / version.cfg), or None."""
    home = os.environ.get("ASCEND_TOOLKIT_HOME") or "/usr/local/Ascend/ascend-toolkit/latest"
    for name in ("ascend_toolkit_install.info", "version.cfg", os.path.join("compiler", "version.info")):
        try:
            with open(os.path.join(home, name)) as f:
                for line in f:
                    if "version=" in line.lower():
                        return line.split("=", 1)[1].strip().strip('"') + f" ({home})"
        except OSError:
            continue
    return None


def _npu_lines():
    from . import _npu

    # Registered by the NPU sources (torch_ext._C_npu, or the host stand-in of the tests) when they are loaded.
    status = getattr(torch.ops.npu_ext, "_npu_status", None)
    if _npu.LOADED:
        out = ["NPU kernels: loaded (torch_ext._C_npu)"]
    elif status is not None:
        out = [f"NPU kernels: torch_ext._C_npu not loaded ({_npu.why_not_loaded()}); the NPU sources are loaded "
               "from another library (the tests' host stand-in of aclnn)"]
    else:
        out = [f"NPU kernels: not loaded ({_npu.why_not_loaded()})"]
    if status is not None:
        out.extend("  " + line for line in status().splitlines())
    return out


def _megatron_line():
    version = _version("megatron-core")
    if version is None:
        return "megatron-core: not installed"
    from . import megatron

    patched = megatron.patched()
    return (f"megatron-core {version}: torch_ext.megatron " +
            (f"patched ({len(patched)} of {len(megatron.TARGETS)} targets)" if patched else "not patched"))


def show_config():
    """The report ``python -m torch_ext`` prints, as a string."""
    from . import __version__, _compat, _variants

    lines = [f"torch_ext {__version__} ({os.path.dirname(os.path.abspath(__file__))})"]
    lines.append(f"torch {torch.__version__} (C++11 ABI {torch._C._GLIBCXX_USE_CXX11_ABI}), "
                 f"Python {platform.python_version()}, {platform.platform()}")
    npu_version = _version("torch-npu") or _version("torch_npu")
    lines.append(f"torch_npu: {npu_version if npu_version else 'not installed'}")
    lines.extend(_compat.report())  # what each compiled module was built against, and what runs
    if npu_version:
        home = os.environ.get("ASCEND_TOOLKIT_HOME")
        missing = (f"no version file in {home} (ASCEND_TOOLKIT_HOME)" if home
                   else "not found (ASCEND_TOOLKIT_HOME unset and no default install)")
        lines.append(f"CANN: {_cann_version() or missing}")
    lines.append(f"CPU: {_cpu_model()} ({platform.machine()}, {os.cpu_count()} logical CPUs)")
    in_use = torch.ops.npu_ext._cpu_capability()
    runnable = [v.upper() for v in _variants.cpu_variants()]
    lines.append(f"CPU kernel variant: {in_use} (this build and CPU: {', '.join(runnable)}; "
                 f"ATen: {torch.backends.cpu.get_cpu_capability()})")
    backend = next((line.split(":", 1)[1].strip() for line in torch.__config__.parallel_info().splitlines()
                    if line.startswith("ATen parallel backend")), "unknown")
    lines.append(f"threads: {torch.get_num_threads()} (inter-op {torch.get_num_interop_threads()}), "
                 f"ATen parallel backend: {backend}")
    lines.append(f"transparent huge pages: {_thp_mode()} (kernel)")
    lines.extend(_npu_lines())
    lines.append(_megatron_line())
    lines.append("environment switches:")
    for name, what in ENV_SWITCHES.items():
        value = os.environ.get(name)
        lines.append(f"  {name}={value if value is not None else '(unset)'}  - {what}")
    return "\n".join(lines)
