"""The CPU kernel variants (ATEN_CPU_CAPABILITY values) this build has and this CPU runs.

x86-64 builds DEFAULT, AVX2 and AVX512 (setup.py); every other architecture builds DEFAULT alone (NEON code on
aarch64). ATen's own capability detection says which of them this CPU runs. Used by `make test` (through
tools/cpu_variants.py: the whole suite once per variant) and by the benchmark's --variants option.
"""

import platform

import torch

X86_ORDER = ["default", "avx2", "avx512"]


def cpu_variants():
    """The variants, best first, lower-case as ATEN_CPU_CAPABILITY takes them (e.g. ["avx2", "default"]).
    Read in a process that does not force ATEN_CPU_CAPABILITY (it lowers what ATen reports)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ["default"]
    best = torch.backends.cpu.get_cpu_capability().lower()
    return X86_ORDER[: X86_ORDER.index(best) + 1][::-1] if best in X86_ORDER else ["default"]
