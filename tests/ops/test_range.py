"""The contract's accuracy metric (docs/operators.md) over the whole normal range of each dtype (not only around
0), per op, variant and dtype, from the sample table (samples.OPS[...].range_make): inputs m * 2^e with e spread
uniformly over every normal exponent of the dtype.

"Non-tiny" here means normal: every output of magnitude >= torch.finfo(dtype).tiny is held to the relative
bounds (mean < T, max < 10 T); outputs below it to an absolute error below it. The mean bound is also held
within every binade of the output (2^k <= |expected| < 2^(k+1), at least 16 outputs): a tensor made only of
values from one region (e.g. gelu's far left tail) must meet it too, not just the whole-range average. For
scaled_masked_softmax_backward, whose output is a difference (g - sum(g y)) and so has cancellation zeros,
each row is scaled by its own power of two over the range and the metric is taken on the output divided by
that power (exact), with the ordinary tiny bound (tolerances.SMALL). The float64 oracle is the reference;
outputs past the dtype's max compare with their correctly rounded Inf.

    .venv/bin/python tests/support/accuracy_report.py   # prints these numbers as a table
"""

import pytest

from torch_ext.testing import samples

pytestmark = pytest.mark.asan

RANGE = list(samples.range_samples())


@pytest.mark.parametrize("sample", RANGE, ids=[s.id for s in RANGE])
def test_whole_normal_range(sample):
    samples.check_range(sample)
