"""Results are bitwise identical whatever the thread count: reductions use a shape-determined partition.
Inputs: the sample table (samples.py, size "medium": many blocks / chunks per thread), every op and variant."""

import pytest
import torch

from torch_ext.testing import samples
from helpers import bits, on_1_and_2_threads

pytestmark = pytest.mark.asan


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_bitwise_identical_for_1_and_2_threads(dtype):
    for s in samples.samples("medium", dtypes=(dtype,)):
        one, two = on_1_and_2_threads(s.run)
        for a, b in zip(one, two):
            assert torch.equal(bits(a), bits(b)), s.id


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bitwise_identical_channels_innermost(dtype):
    """prelu_backward on (N, C): the channel is the innermost dim, one reduction per lane."""
    x = samples.spread(300000, dtype, samples.generator(1), low_exp=-3, high_exp=2).reshape(100000, 3)
    w = x[0].abs()
    one, two = on_1_and_2_threads(lambda: torch.ops.npu_ext.prelu_backward(x, x.neg(), w))
    for a, b in zip(one, two):
        assert torch.equal(bits(a), bits(b))
