"""Derives the polynomial of normal_tail() in csrc/core/cpu/vec/math.h (gelu's fp32 cdf).

    r(x) = erfcx(|x| / sqrt2) / 2 = t * (1/2 + s * P(s)),   s = |x| / (K + |x|),   t = 1 - s = K / (K + |x|),   K = 4

s is one division, t one subtraction (no multiplication), and with K a power of two the forward's K * P is the
same polynomial exactly scaled (x Phi(-|x|) = -K s (1/2 + s P(s)) e for x < 0). P (degree 7) is fitted to
minimise the largest relative error of r / t over |x| <= 10 sqrt2 (every x whose gelu or gelu gradient is a
normal fp32 number; beyond it they are 0, 1 or subnormal) by iteratively reweighted least squares on Chebyshev
nodes in s, against mpmath at 30 digits. Prints the coefficients (highest degree first, as the Horner chain in the
kernel uses them) and the relative error before and after rounding them to fp32 (6.2e-8 and 8.2e-8).
K and the degree were chosen by scanning both: with fp32 coefficients, degree 7 gives 2.3e-7 at K = 2, 1.4e-7 at
K = 2 sqrt2 (0.1.0's variable, not a power of two), 8.2e-8 at K = 4; degree 6 is one multiply-add shorter at
about 1e-6. Needs mpmath (installed with torch) and numpy:

    .venv/bin/python tools/fit_gelu_erfcx.py              # degree 7: fp32 and fp16 results
    .venv/bin/python tools/fit_gelu_erfcx.py --degree 5   # bf16 results (normal_tail<true>): 3.3e-6
"""

import mpmath as mp
import numpy as np

from minimax import degree_arg, print_fit, relative_minimax

K = 4
DEGREE = 7
X_MAX = 10 * np.sqrt(2)  # z = |x| / sqrt2 <= 10
NODES = 600

mp.mp.dps = 30


def target(s):
    """r / t at s (mpmath)."""
    x = s * K / (1 - s)
    z = x / mp.sqrt(2)
    return mp.erfc(z) * mp.exp(z * z) / 2 / (1 - s)


def fit(degree=DEGREE):
    s_max = X_MAX / (K + X_MAX)
    k = np.arange(NODES)
    s = (1 - np.cos(np.pi * (k + 0.5) / NODES)) / 2 * s_max
    rt = np.array([float(target(mp.mpf(float(v)))) for v in s])  # r / t at the nodes
    return relative_minimax(s, rt, 0.5, degree, 30)


if __name__ == "__main__":
    degree = degree_arg(DEGREE)
    print_fit(f"r = t (1/2 + s P(s)), s = |x| / ({K} + |x|), degree {degree}, |x| <= {X_MAX:.3f}", *fit(degree))
