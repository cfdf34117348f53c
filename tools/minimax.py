"""The fitting step shared by tools/fit_*.py: a polynomial with a pinned constant term, fitted for the smallest
largest relative error on a set of nodes."""

import numpy as np


def relative_minimax(x, target, const, degree, iterations):
    """Coefficients c (lowest degree first) of const + x * sum_j c_j x^j, j <= degree, minimising the largest
    relative error to `target` over the nodes `x`, by iteratively reweighted least squares (Lawson's
    iteration towards the minimax solution). Returns c and the largest relative error before and after
    rounding c to fp32."""
    basis = np.vander(x, degree + 1, increasing=True)
    weights = np.ones(len(x))
    for _ in range(iterations):
        w = weights * x / target
        coef, *_ = np.linalg.lstsq(basis * w[:, None], (target - const) / x * w, rcond=None)
        err = np.abs(const + x * (basis @ coef) - target) / target
        weights = weights * np.sqrt(err / err.max())
        weights /= weights.max()
    coef32 = coef.astype(np.float32).astype(np.float64)
    err32 = np.abs(const + x * (basis @ coef32) - target) / target
    return coef, err.max(), err32.max()


def print_fit(heading, coef, err, err32):
    """Prints a fit: its heading with the largest relative error before and after rounding the coefficients to
    fp32, then the coefficients as C++ float literals, highest degree first (the order of a Horner chain)."""
    print(f"{heading}: max relative error {err:.2e} ({err32:.2e} with fp32 coefficients)")
    for c in coef[::-1]:
        print(f"  {float(np.float32(c))!r}f")


def degree_arg(default):
    """The polynomial degree from the command line (--degree N), `default` without it."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--degree", type=int, default=default)
    return p.parse_args().degree
