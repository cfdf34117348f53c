"""The NPU path on a real Ascend NPU: npu results compared with the CPU kernels.

Runs where torch_npu is installed and importable, an NPU is visible and torch_ext loaded its NPU kernels
(torch_ext._C_npu, built by setup.py when torch_npu is installed): on an Ascend machine, and in `make test-npu`
inside the real torch_npu runtime on the fake CANN (tests/fake_cann), where none of it may be skipped. Elsewhere the
whole module is skipped. Nothing here has run on hardware yet.
"""

import math

import pytest
import torch

import npu_backend
from torch_ext.testing import samples
from torch_ext.testing import tolerances
import torch_ext


_AVAILABLE, _REASON = npu_backend.npu_device_available()
pytestmark = [pytest.mark.device, pytest.mark.skipif(not _AVAILABLE, reason=_REASON)]

ops = torch.ops.npu_ext
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def dev(t):
    return t.to("npu")


def check(npu_result, cpu_result):
    if isinstance(cpu_result, (tuple, list)):
        for a, b in zip(npu_result, cpu_result):
            check(a, b)
        return
    assert npu_result.device.type == "npu"
    torch.testing.assert_close(npu_result.cpu(), cpu_result, equal_nan=True, **tolerances.close(tolerances.DEVICE, cpu_result.dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_v2(dtype, approximate):
    g, x = torch.randn(6, 1, 33).to(dtype), (3 * torch.randn(7, 33)).to(dtype)
    check(ops.gelu_backward_v2(dev(g), dev(x).t().contiguous().t(), approximate),
          ops.gelu_backward_v2(g, x, approximate))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight_shape", [(3,), (1,), (3, 1)])
def test_prelu_backward(dtype, weight_shape):
    x, g, w = torch.randn(4, 3, 17).to(dtype), torch.randn(4, 3, 17).to(dtype), torch.rand(weight_shape).to(dtype)
    check(ops.prelu_backward(dev(g), dev(x), dev(w)), ops.prelu_backward(g, x, w))
    empty_gw = ops.prelu_backward(dev(g[:0]), dev(x[:0]), dev(w))[1]
    assert torch.equal(empty_gw.cpu(), torch.zeros_like(w))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("values,idx_type", [([30, 30, 70, 100], 0), ([30, 0, 40, 30], 1), (None, 0)])
def test_grouped_bias_add_grad(dtype, values, idx_type):
    if values is None:
        gy, idx = torch.randn(4, 25, 40).to(dtype), None
    else:
        gy, idx = torch.randn(100, 40).to(dtype), torch.tensor(values)
    check(ops.grouped_bias_add_grad(dev(gy), None if idx is None else dev(idx), idx_type),
          ops.grouped_bias_add_grad(gy, idx, idx_type))


def test_grouped_bias_add_grad_bad_group_idx():
    with pytest.raises(RuntimeError, match="^npu_ext.grouped_bias_add_grad: group_idx must be non-decreasing"):
        ops.grouped_bias_add_grad(dev(torch.randn(10, 4)), dev(torch.tensor([3, 2, 10])), 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fix_triu_mask", [False, True])
@pytest.mark.parametrize("mask_shape", [(2, 3, 16, 64), (1, 3, 16, 64), (1, 1, 16, 64)])
def test_scaled_masked_softmax_backward(dtype, fix_triu_mask, mask_shape):
    x, g = torch.randn(2, 3, 16, 64), torch.randn(2, 3, 16, 64).to(dtype)
    mask = torch.rand(mask_shape) < 0.3
    y = torch.softmax((x * 0.5).masked_fill(mask, -10000.0), dim=-1).to(dtype)
    check(ops.scaled_masked_softmax_backward(dev(g), dev(y), dev(mask), 0.5, fix_triu_mask),
          ops.scaled_masked_softmax_backward(g, y, mask, 0.5, fix_triu_mask))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.1, 2.0, math.inf])
def test_logit_grad(dtype, eps):
    x, dy = (torch.rand(8, 31) * 1.4 - 0.2).to(dtype), torch.randn(8, 31).to(dtype)
    check(ops.logit_grad(dev(x), dev(dy), eps), ops.logit_grad(x, dy, eps))


def test_fp64_rejected():
    with pytest.raises(RuntimeError, match=r"^npu_ext.logit_grad: x must have dtype torch.float16, torch.bfloat16 "
                                           r"or torch.float32, but got torch.float64"):
        ops.logit_grad(dev(torch.rand(3, dtype=torch.float64)), dev(torch.rand(3, dtype=torch.float64)))


SENTINEL = 77.0  # exact in fp16, bf16 and fp32


def _framed(shape, dtype, kind):
    """(storage, view, covered) on the NPU: a sentinel-filled storage, a transposed or sliced output view into it,
    and which storage elements the view covers."""
    n = math.prod(shape)
    big = (2 * n + 6,) if kind == "transposed" else tuple(s + 2 for s in shape)

    def view_of(base):
        if kind == "sliced":
            return base[tuple(slice(1, 1 + s) for s in shape)]
        if len(shape) == 1:
            return base.view(-1)[3:3 + 2 * n:2]
        return base.view(-1)[3:3 + n].view(list(shape)[::-1]).permute(list(range(len(shape)))[::-1])

    storage = dev(torch.full(big, SENTINEL, dtype=dtype))
    covered = torch.zeros(storage.numel(), dtype=torch.bool)
    covered[view_of(torch.arange(storage.numel()).view(big)).reshape(-1)] = True
    return storage, view_of(storage), covered


@pytest.mark.parametrize("kind", ["transposed", "sliced"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_out_layouts_never_write_outside_the_view(dtype, kind):
    """aclnnScaledMaskedSoftmaxBackward and aclnnLogitGrad ignore out's strides: the NPU path must use a temporary."""
    g4, mask = torch.randn(2, 3, 16, 64).to(dtype), torch.rand(2, 3, 16, 64) < 0.3
    y4 = torch.softmax(torch.randn(2, 3, 16, 64).masked_fill(mask, -10000.0), -1).to(dtype)
    x, dy = (torch.rand(8, 31) * 1.4 - 0.2).to(dtype), torch.randn(8, 31).to(dtype)
    gy, idx = torch.randn(100, 40).to(dtype), torch.tensor([30, 30, 70, 100])
    pg, px, pw = torch.randn(4, 3, 17).to(dtype), torch.randn(4, 3, 17).to(dtype), torch.rand(3).to(dtype)
    cases = [
        (ops.gelu_backward_v2.out, (dy, x, "tanh"), {"grad_input": (8, 31)}),
        (ops.prelu_backward.out, (pg, px, pw), {"grad_input": (4, 3, 17), "grad_weight": (3,)}),
        (ops.grouped_bias_add_grad.out, (gy, idx, 0), {"out": (4, 40)}),
        (ops.scaled_masked_softmax_backward.out, (g4, y4, mask, 0.5, False), {"out": (2, 3, 16, 64)}),
        (ops.logit_grad.out, (x, dy, 0.05), {"dx": (8, 31)}),
    ]
    for overload, args, outs in cases:
        framed = {name: _framed(shape, dtype, kind) for name, shape in outs.items()}
        overload(*[dev(a) if isinstance(a, torch.Tensor) else a for a in args], **{k: f[1] for k, f in framed.items()})
        expected = overload.overloadpacket(*args)
        expected = expected if isinstance(expected, tuple) else (expected,)
        for (storage, view, covered), exp in zip(framed.values(), expected):
            check(view, exp)
            assert bool((storage.cpu().reshape(-1)[~covered] == SENTINEL).all()), f"{overload}: wrote outside the view"


@pytest.mark.parametrize("zero_dim_arg", ["grad_output", "self"])
@pytest.mark.parametrize("dtypes", [(torch.float32, torch.float16), (torch.float32, torch.bfloat16),
                                    (torch.float16, torch.bfloat16), (torch.bfloat16, torch.float16)])
def test_gelu_backward_v2_zero_dim_promotion(dtypes, zero_dim_arg):
    """aclnn's PromoteType has no 0-dim rule: the NPU path casts to result_type first."""
    scalar, tensor = torch.tensor(1.7).to(dtypes[0]), (2 * torch.randn(4, 5)).to(dtypes[1])
    g, x = (scalar, tensor) if zero_dim_arg == "grad_output" else (tensor, scalar)
    got = ops.gelu_backward_v2(dev(g), dev(x), "none")
    torch.npu.synchronize()  # no deferred failure in the task queue
    check(got, ops.gelu_backward_v2(g, x, "none"))


# ------------------------------------------------------------------------------------------------------------
# Issue 20: the kernels' own numerics, which the CPU contract follows (docs/operators.md, "Semantics notes").
def _ascend950():
    name = torch.npu.get_device_name()
    return name.startswith("Ascend950") or name.startswith("Ascend910_95")


def _same(npu_result, cpu_result):
    """Equal values, NaN exactly where the CPU kernel has NaN."""
    torch.testing.assert_close(npu_result.cpu(), cpu_result, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.1, math.nan])
def test_logit_grad_nan_x(dtype, eps):
    """The kernel selects the fill where x is not in [lo, hi], a NaN x included: 0 for eps >= 0, else NaN."""
    x = torch.tensor([math.nan, 0.5, 2.0, -1.0, 0.0]).to(dtype)
    dy = torch.ones_like(x)
    _same(ops.logit_grad(dev(x), dev(dy), eps), ops.logit_grad(x, dy, eps))


# On Ascend950 the AscendC PReluGradUpdate has no zero terms: these cases give a finite grad_weight there (and g
# where x > 0 for a non-finite weight), the documented SoC difference.
_SOC_DIFFERENCE = {"inf_grad_output", "fp16_grad_input_overflow", "x_plus_inf", "inf_weight", "nan_weight"}


@pytest.mark.parametrize("case", samples.PRELU_DEVICE_CASES, ids=lambda c: c[0])
def test_prelu_backward_kernel_cases(case):
    name, dtype, x, g, w = case[:5]
    if _ascend950() and name in _SOC_DIFFERENCE:
        pytest.skip("documented SoC difference: the Ascend950 kernel has no dx * 0 term")
    x, g, w = (torch.tensor(v, dtype=dtype) for v in (x, g, w))
    for a, b in zip(ops.prelu_backward(dev(g), dev(x), dev(w)), ops.prelu_backward(g, x, w)):
        _same(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prelu_backward_zero_dim_self(dtype):
    x, g, w = torch.tensor(-1.5).to(dtype), torch.tensor(2.0).to(dtype), torch.full((1,), 0.25).to(dtype)
    for a, b in zip(ops.prelu_backward(dev(g), dev(x), dev(w)), ops.prelu_backward(g, x, w)):
        _same(a, b)


def test_documented_limits_before_aclnn():
    with pytest.raises(RuntimeError, match=r"^npu_ext.gelu_backward_v2: grad_output must have at most 8 dimensions"):
        ops.gelu_backward_v2(dev(torch.rand([1] * 9)), dev(torch.rand(1)))
