"""Derives the polynomial of normal_tail() in csrc/cpu/kernels/vec_utils.h (gelu's fp32 cdf).

    r(x) = erfcx(|x| / sqrt2) / 2 = t * (1/2 + s * P(s)),   a = P_SCALE |x| / sqrt2, t = 1 / (1 + a), s = a t

P (degree 7) is fitted to minimise the largest relative error of r over |x| <= 10 sqrt2 (every x whose gelu or
gelu gradient is a normal fp32 number; beyond it they are 0, 1 or subnormal) by iteratively reweighted least
squares on Chebyshev nodes in s, against mpmath at 30 digits. Prints the coefficients (highest degree first,
as the Horner chain in the kernel uses them) and the relative error of r before and after rounding them to
fp32 (4.8e-8 and 1.6e-7: the rounded coefficients cost accuracy mostly at large |x|, where r is a small
correction to x / sqrt(2 pi) in the gradient). P_SCALE and the degree were chosen by scanning both and
measuring the fp32 gradient against float64 over [-8, 8]: degree 7 at P_SCALE 0.5 gives a mean relative error
of 8.9e-8 and a largest one of 4.2e-4 (next to the zero crossing at x = -0.7519, where cdf + x pdf cancels),
against 1.0e-7 and 5.7e-4 at 0.3 (the earlier choice, 9.5e-7 with fp32 coefficients) and 1.4e-7 and 7.6e-4 for
degree 6 at 0.43 (3.5e-7, one multiply-add shorter). Needs mpmath (installed with torch) and numpy:

    .venv/bin/python tools/fit_gelu_erfcx.py              # degree 7: fp32 and fp16 results
    .venv/bin/python tools/fit_gelu_erfcx.py --degree 5   # bf16 results (normal_tail<true>): 1.45e-6
"""

import mpmath as mp
import numpy as np

from minimax import degree_arg, print_fit, relative_minimax

P_SCALE = 0.5
DEGREE = 7
X_MAX = 10 * np.sqrt(2)  # z = |x| / sqrt2 <= 10
NODES = 600

mp.mp.dps = 30


def target(s):
    """r / t - 1/2 divided by s, and r / t, at s (mpmath)."""
    z = s / (P_SCALE * (1 - s))
    r_over_t = mp.erfc(z) * mp.exp(z * z) / 2 / (1 - s)
    return r_over_t


def fit(degree=DEGREE):
    s_max = P_SCALE * X_MAX / np.sqrt(2) / (1 + P_SCALE * X_MAX / np.sqrt(2))
    k = np.arange(NODES)
    s = (1 - np.cos(np.pi * (k + 0.5) / NODES)) / 2 * s_max
    rt = np.array([float(target(mp.mpf(float(v)))) for v in s])  # r / t at the nodes
    return relative_minimax(s, rt, 0.5, degree, 30)


if __name__ == "__main__":
    degree = degree_arg(DEGREE)
    print_fit(f"r = t (1/2 + s P(s)), P_SCALE={P_SCALE}, degree {degree}, |x| <= {X_MAX:.3f}", *fit(degree))
