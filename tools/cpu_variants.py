"""Prints the CPU kernel variants (ATEN_CPU_CAPABILITY values) this build has and this CPU runs, best first
(torch_ext._variants.cpu_variants).

    python tools/cpu_variants.py           # e.g. "avx2 default" on an x86-64 CPU without AVX-512
    python tools/cpu_variants.py --lower   # all but the best one (the one a process picks by itself)
"""

import sys

from torch_ext._variants import cpu_variants

if __name__ == "__main__":
    found = cpu_variants()
    print(" ".join(found[1:] if "--lower" in sys.argv[1:] else found))
