"""Prints the CPU kernel variants (ATEN_CPU_CAPABILITY values) this build has and this CPU runs, best first.

    python tools/cpu_variants.py           # e.g. "avx2 default" on an x86-64 CPU without AVX-512
    python tools/cpu_variants.py --lower   # all but the best one (the one a process picks by itself)

x86-64 builds DEFAULT, AVX2 and AVX512 (setup.py); every other architecture builds DEFAULT alone (NEON code on
aarch64). ATen's own capability detection says which of them this CPU runs.
"""

import platform
import sys

import torch

ORDER = ["default", "avx2", "avx512"]


def variants():
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ["default"]
    best = torch.backends.cpu.get_cpu_capability().lower()
    return ORDER[: ORDER.index(best) + 1][::-1] if best in ORDER else ["default"]


if __name__ == "__main__":
    found = variants()
    print(" ".join(found[1:] if "--lower" in sys.argv[1:] else found))
