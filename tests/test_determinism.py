"""Results are bitwise identical whatever the thread count: reductions use a shape-determined partition."""

import pytest
import torch

from helpers import bits, make, on_1_and_2_threads

ops = torch.ops.npu_ext


def _cases(dtype):
    n = 1 << 18  # large enough for many blocks / chunks per thread
    g, x = make([n], dtype), make([n], dtype)
    yield "gelu", lambda: ops.gelu_backward_v2(g, x)
    yield "gelu_tanh", lambda: ops.gelu_backward_v2(g, x, "tanh")
    x3, g3 = make([16, 3, 9000], dtype), make([16, 3, 9000], dtype)
    w = make([3], dtype)
    yield "prelu", lambda: ops.prelu_backward(g3, x3, w)
    yield "prelu_scalar", lambda: ops.prelu_backward(g3, x3, w[:1])
    x2 = make([100000, 3], dtype)
    yield "prelu_nc", lambda: ops.prelu_backward(x2, x2.neg(), w)
    gy = make([70000, 24], dtype)
    idx = torch.tensor([5, 60000, 60001, 70000])
    yield "grouped", lambda: ops.grouped_bias_add_grad(gy, idx)
    yield "grouped_3d", lambda: ops.grouped_bias_add_grad(gy.view(7, 10000, 24))
    g4, y4 = make([2, 4, 64, 1000], dtype), make([2, 4, 64, 1000], dtype, low=0, high=1)
    mask = torch.rand(1, 4, 64, 1000) < 0.2
    yield "softmax", lambda: ops.scaled_masked_softmax_backward(g4, y4, mask, 0.3)
    xl = make([n], dtype, low=0, high=1)
    yield "logit", lambda: ops.logit_grad(xl, g, 1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_bitwise_identical_for_1_and_2_threads(dtype):
    for name, fn in _cases(dtype):
        one, two = on_1_and_2_threads(fn)
        for a, b in zip(one, two):
            assert torch.equal(bits(a), bits(b)), name
