"""Derives exp2_fraction() in csrc/core/cpu/vec/math.h (the core of every fp32 exponential of the kernels).

    2^f ~ 1 + f * Q(f),   |f| <= 1/2,   Q of degree 4

Q is fitted to minimise the largest relative error over [-1/2, 1/2] by iteratively reweighted least squares on
Chebyshev nodes, against mpmath at 30 digits; the constant term is pinned to 1 so that 2^0 = 1 exactly.
Prints the coefficients (highest degree first, as the Horner chain in the kernel uses them) and the relative
error before and after rounding them to fp32 (9.2e-8 and 1.1e-7; the Taylor polynomial of one degree more,
used before, had 2e-7). Needs mpmath (installed with torch) and numpy:

    .venv/bin/python tools/fit_exp2.py              # degree 4: every fp32 exponential of the kernels
    .venv/bin/python tools/fit_exp2.py --degree 3   # normal_tail<true> (bf16 gelu results): 2.8e-6

With --eighths, 2^(f / 8) on |f| <= 1/2 instead (exp2_eighth_fraction: normal_tail on AVX2 and AVX-512, where an
8-entry table supplies 2^(j / 8)); its Q has degree 2 (2.7e-8), or 1 for bf16 results (3.5e-6):

    .venv/bin/python tools/fit_exp2.py --eighths --degree 2
    .venv/bin/python tools/fit_exp2.py --eighths --degree 1
"""

import mpmath as mp
import numpy as np

from minimax import degree_arg, print_fit, relative_minimax

DEGREE = 4
NODES = 2000

mp.mp.dps = 30


def fit(degree=DEGREE, divisor=1):
    k = np.arange(NODES)
    f = -0.5 * np.cos(np.pi * (k + 0.5) / NODES)  # Chebyshev nodes on [-1/2, 1/2]
    y = np.array([float(mp.power(2, mp.mpf(float(v)) / divisor)) for v in f])
    return relative_minimax(f, y, 1.0, degree, 50)


if __name__ == "__main__":
    import sys

    eighths = "--eighths" in sys.argv
    if eighths:
        sys.argv.remove("--eighths")
    degree = degree_arg(DEGREE)
    name = "2^(f/8)" if eighths else "2^f"
    print_fit(f"{name} on |f| <= 1/2, 1 + f Q(f), Q of degree {degree}", *fit(degree, 8 if eighths else 1))
