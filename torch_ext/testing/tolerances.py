"""Tolerances, defined once: the accuracy metric against the float64 oracles, and the agreement bounds between two
implementations (the device and the CPU kernels, the fake CANN's operator models and the CPU kernels, the package's
fused paths and PyTorch's own composites in the low-precision dtypes).

Each table is keyed by dtype. ``THRESHOLD`` / ``SMALL`` and the ``assert_accurate`` family are the operator contract's
metric (docs/operators.md, "Accuracy"); the others are ``(rtol, atol)`` pairs for ``torch.testing.assert_close``
(``close(dtype)`` gives them as its keyword arguments).
"""

import torch

f64 = torch.float64

# Device (an NPU, or the fake CANN's runtime) against the CPU kernels, both computing in the input dtype:
# python -m torch_ext --check and tests/npu/test_npu_device.py. float64 only for CPU self-checks.
DEVICE = {torch.float32: (1e-4, 1e-4), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2),
          torch.float64: (1e-10, 1e-10)}
# The fake CANN's operator models against the CPU kernels (the NPU path tests): two independent implementations
# of the same arithmetic, in float32 nearly bit-equal.
MODEL = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}
# The package's fused operators against PyTorch's own composite of the same function (Megatron's fused paths and
# their unfused fallbacks), where the composite rounds each intermediate to the low-precision dtype.
NATIVE = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1e-2), torch.float32: (1e-5, 1e-6)}


def close(table, dtype):
    """``table[dtype]`` as assert_close's keyword arguments: ``dict(rtol=..., atol=...)``."""
    rtol, atol = table[dtype]
    return dict(rtol=rtol, atol=atol)


# The accuracy metric of the operator contract (docs/operators.md, "Accuracy": the CANN open-source precision standard).
THRESHOLD = {torch.float32: 2.0**-13, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float64: 2.0**-30}
# Below this magnitude an output is "tiny": relative error is meaningless there (a rounding of the inputs
# moves a zero crossing), so those outputs are held to an absolute bound of the same size instead.
SMALL = {torch.float32: 2.0**-14, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float64: 2.0**-30}


def expected_in(expected, dtype):
    """The float64 oracle, except that values beyond the dtype's range take their correctly rounded value
    (+-Inf, or +-max just past it): overflow to Inf is the right single rounding, not an error."""
    e = expected.to(f64)
    overflow = e.abs() > torch.finfo(dtype).max
    return torch.where(overflow, e.to(dtype).to(f64), e)


def relative_errors(actual, expected, dtype, small=None):
    """(mean rel err, max rel err, max abs err on tiny outputs) over finite outputs. `small` (default
    SMALL[dtype]) is where "tiny" ends; the whole-range test (test_range.py) holds every normal output to the
    relative bound with small = torch.finfo(dtype).tiny."""
    small = SMALL[dtype] if small is None else small
    a = actual.to(f64).reshape(-1)
    e = expected_in(expected, dtype).reshape(-1)
    finite = torch.isfinite(e)
    big = finite & (e.abs() >= small)
    tiny = finite & ~big
    rel = ((a[big] - e[big]).abs() / e[big].abs()) if big.any() else torch.zeros(1, dtype=f64)
    tiny_abs = (a[tiny] - e[tiny]).abs().max().item() if tiny.any() else 0.0
    return rel.mean().item(), rel.max().item(), tiny_abs


def assert_accurate(actual, expected, dtype, what="", small=None):
    """The contract's criterion: mean rel err < T, max rel err < 10 T; non-finite outputs must match exactly."""
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    a = actual.to(f64)
    e = expected_in(expected, dtype)
    nonfinite = ~torch.isfinite(e)
    assert torch.equal(a[nonfinite].isnan(), e[nonfinite].isnan()), f"{what}: NaN positions differ"
    inf = nonfinite & ~e.isnan()
    assert torch.equal(a[inf], e[inf]), f"{what}: Inf outputs differ"
    small = SMALL[dtype] if small is None else small
    mean_rel, max_rel, tiny_abs = relative_errors(a, e, dtype, small)
    t = THRESHOLD[dtype]
    assert mean_rel < t, f"{what}: mean relative error {mean_rel:.3e} >= {t:.3e}"
    assert max_rel < 10 * t, f"{what}: max relative error {max_rel:.3e} >= {10 * t:.3e}"
    assert tiny_abs < small, f"{what}: absolute error {tiny_abs:.3e} on tiny outputs"
    return mean_rel, max_rel


def binades(actual, expected, dtype, small):
    """[(k, count, mean rel err)] per binade of |expected| (finite, non-tiny outputs)."""
    e = expected_in(expected, dtype).reshape(-1)
    a = actual.to(torch.float64).reshape(-1)
    small = SMALL[dtype] if small is None else small
    keep = torch.isfinite(e) & (e.abs() >= small)
    k = torch.floor(torch.log2(e[keep].abs())).long()
    rel = (a[keep] - e[keep]).abs() / e[keep].abs()
    rows = []
    for b in torch.unique(k).tolist():
        r = rel[k == b]
        if r.numel() >= 16:
            rows.append((b, r.numel(), r.mean().item()))
    return rows


def assert_accurate_per_binade(actual, expected, dtype, what="", small=None):
    """assert_accurate, and the mean bound also within every binade of the output (binades: at least 16
    outputs), so that a region of the range (e.g. gelu's far left tail) cannot hide in the whole-range mean."""
    assert_accurate(actual, expected, dtype, what, small=small)
    t = THRESHOLD[dtype]
    bad = [(b, n, m) for b, n, m in binades(actual, expected, dtype, small) if m >= t]
    assert not bad, f"{what}: mean relative error >= T={t:.2e} in binades (2^k, count, mean): {bad}"
