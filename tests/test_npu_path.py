"""The NPU path (csrc/ops/*/npu.cpp) without an NPU: inside the real torch_npu 2.13.0 runtime on the fake CANN
(``make test-npu``, x86-64), or against the host stand-in under the aarch64 emulation (tests/npu_backend.py).

The NPU kernels run on fp32/fp16/bf16, contiguous, transposed, offset, strided and broadcast (stride-0) inputs and
are compared with the CPU kernels (torch.ops.npu_ext.* on CPU tensors); the aclnn operators are host models that
read tensors only through their aclTensor descriptors and behave as the CANN sources show (tests/fake_cann/opapi),
and their C ABI (status codes 161001 / 161002) is tested directly with ctypes. Per-machine scenarios (SoC, entry
points missing from an older CANN, kernels missing for a SoC, NPU_EXT_NO_CPU_FALLBACK) each run in their own process
(tests/npu_path_scenarios.py). On a real NPU, tests/test_npu_device.py runs the same checks on the hardware.
"""

import ctypes
import json
import math
import os
import subprocess
import sys

import pytest
import torch

import samples
import torch_ext

import npu_backend  # noqa: E402

BACKEND, _WHY_NOT = npu_backend.which()
pytestmark = pytest.mark.skipif(BACKEND is None, reason=_WHY_NOT)

ops = torch.ops.npu_ext
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
LAYOUTS = ["contiguous", "transposed", "offset", "strided"]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=1e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}


_instance = []


@pytest.fixture(scope="module")
def backend():
    if not _instance:
        _instance.append(BACKEND())
        warm_up_probes()
    return _instance[0]


def warm_up_probes():
    """Each aclnn entry point is probed once per process and device, at its first use (a small call through both
    phases, synchronised): done here, so that the entry-point calls the tests below count are their own (the
    scenario tests count the probes' calls too)."""
    x, w, gy = torch.rand(2, 3), torch.rand(3), torch.rand(4, 3)
    npu(ops.logit_grad.default, x, x, -1.0)
    npu(ops.gelu_backward_v2.default, x, x, "none")
    npu(ops.prelu_backward.default, x, x, w)
    npu(ops.grouped_bias_add_grad.default, gy, torch.tensor([1, 3]), 1)  # aclnnGroupedBiasAddGradV2
    npu(ops.grouped_bias_add_grad.default, gy, torch.tensor([1, 4]), 0)  # aclnnGroupedBiasAddGrad
    g4 = torch.rand(1, 1, 2, 3)
    npu(ops.scaled_masked_softmax_backward.default, g4, g4, torch.zeros(1, 1, 2, 3, dtype=torch.bool), 1.0, False)


def npu(overload, *args, **kwargs):
    """Runs the NPU kernel of `overload` on CPU test tensors (see tests/npu_backend.py); CPU results."""
    return _instance[0].npu(overload, *args, **kwargs)


def layout(t, kind):
    """A tensor equal to `t` in another memory layout (same values, different strides / storage offset)."""
    if kind == "contiguous" or t.dim() == 0:
        return t.clone()
    if kind == "transposed":  # reversed dimension order in memory
        dims = list(range(t.dim()))[::-1]
        return t.permute(dims).contiguous().permute(dims)
    if kind == "offset":  # a view 7 elements into a larger storage
        big = torch.full((t.numel() + 11,), float("nan"), dtype=t.dtype)
        v = big[7:7 + t.numel()].view(t.shape)
        v.copy_(t)
        return v
    if kind == "strided":  # every other element of the last dimension
        big = torch.full((*t.shape[:-1], 2 * t.shape[-1] + 1), float("nan"), dtype=t.dtype)
        v = big[..., 1::2]
        v.copy_(t)
        return v
    raise ValueError(kind)


def assert_close(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, equal_nan=True, **TOL[expected.dtype])


def nan_like(t):
    return torch.full_like(t, float("nan"))


def noncontiguous_out(shape, dtype):
    """A NaN-filled output with transposed strides and a storage offset."""
    shape = list(shape)
    big = torch.full((math.prod(shape) + 3,), float("nan"), dtype=dtype)
    return big[3:].view(shape[::-1]).permute(list(range(len(shape)))[::-1])


def test_every_op_has_privateuse1_kernels(backend):
    for name in ["gelu_backward_v2", "prelu_backward", "grouped_bias_add_grad", "scaled_masked_softmax_backward",
                 "logit_grad"]:
        for overload in ["", ".out"]:
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"npu_ext::{name}{overload}", "PrivateUse1")


# ------------------------------------------------------------------------------------------------------------
# Results against the CPU kernels.

@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_v2(backend, approximate, dtype, kind):
    torch.manual_seed(0)
    g = torch.randn(5, 6).to(dtype)
    x = (torch.randn(5, 6) * 3).to(dtype)
    backend.reset()
    got = npu(ops.gelu_backward_v2.default, layout(g, kind), layout(x, kind), approximate)
    assert backend.aclnn_calls() == {"aclnnGeluBackwardV2": 2}
    assert_close(got, ops.gelu_backward_v2(g, x, approximate))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((6,), (5, 6)), ((5, 1), (1, 6)), ((2, 1, 6), (5, 6))])
def test_gelu_backward_v2_broadcast(backend, shapes, dtype):
    torch.manual_seed(1)
    g = torch.randn(shapes[0]).to(dtype)
    x = torch.randn(shapes[1]).to(dtype)
    assert_close(npu(ops.gelu_backward_v2.default, g, x, "none"), ops.gelu_backward_v2(g, x, "none"))
    # stride-0 (expanded) inputs of the full shape
    full = torch.broadcast_shapes(g.shape, x.shape)
    assert_close(npu(ops.gelu_backward_v2.default, g.expand(full), x.expand(full), "tanh"),
                 ops.gelu_backward_v2(g, x, "tanh"))


@pytest.mark.parametrize("dtypes", [(torch.float16, torch.float32), (torch.bfloat16, torch.float16),
                                    (torch.float32, torch.bfloat16)])
def test_gelu_backward_v2_mixed_dtypes(backend, dtypes):
    torch.manual_seed(2)
    g = torch.randn(4, 5).to(dtypes[0])
    x = torch.randn(4, 5).to(dtypes[1])
    got = npu(ops.gelu_backward_v2.default, g, x, "tanh")
    assert got.dtype == torch.float32
    assert_close(got, ops.gelu_backward_v2(g, x, "tanh"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_backward_v2_out(backend, dtype):
    torch.manual_seed(3)
    g, x = torch.randn(4, 6).to(dtype), torch.randn(6).to(dtype)
    out = noncontiguous_out((4, 6), dtype)
    assert npu(ops.gelu_backward_v2.out, g, x, "none", grad_input=out) is None
    assert_close(out, ops.gelu_backward_v2(g, x, "none"))


def prelu_inputs(dtype, self_shape=(4, 3, 5), weight_shape=(3,), g_shape=None):
    torch.manual_seed(4)
    x = torch.randn(self_shape)
    x.view(-1)[::7] = 0.0  # x == 0 takes the x <= 0 branch
    x = x.to(dtype)
    g = torch.randn(g_shape or self_shape).to(dtype)
    w = torch.rand(weight_shape).to(dtype)
    return g, x, w


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_prelu_backward(backend, dtype, kind):
    g, x, w = prelu_inputs(dtype)
    backend.reset()
    gi, gw = npu(ops.prelu_backward.default, layout(g, kind), layout(x, kind), layout(w, kind))
    assert backend.aclnn_calls() == {"aclnnPreluBackward": 2}
    egi, egw = ops.prelu_backward(g, x, w)
    assert_close(gi, egi)
    assert_close(gw, egw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [
    dict(self_shape=(4, 3, 5), weight_shape=(1,)),  # one weight for every channel
    dict(self_shape=(4, 3, 5), weight_shape=()),  # 0-D weight
    dict(self_shape=(4, 3, 5), weight_shape=(3, 1)),  # C elements, 2-D: aclnn gets a 1-D gradWeight
    dict(self_shape=(7,), weight_shape=(1,)),  # 1-D self: C = 1
    dict(self_shape=(2, 3), weight_shape=(3,), g_shape=(3,)),  # grad_output broadcast by aclnn
    dict(self_shape=(4, 3, 5), weight_shape=(3,), g_shape=(1, 3, 5)),
])
def test_prelu_backward_shapes(backend, case, dtype):
    g, x, w = prelu_inputs(dtype, **case)
    gi, gw = npu(ops.prelu_backward.default, g, x, w)
    egi, egw = ops.prelu_backward(g, x, w)
    assert_close(gi, egi)
    assert_close(gw, egw)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prelu_backward_out(backend, dtype):
    g, x, w = prelu_inputs(dtype, weight_shape=(3, 1))
    gi, gw = noncontiguous_out((4, 3, 5), dtype), noncontiguous_out((3, 1), dtype)
    assert npu(ops.prelu_backward.out, g, x, w, grad_input=gi, grad_weight=gw) is None
    egi, egw = ops.prelu_backward(g, x, w)
    assert_close(gi, egi)
    assert_close(gw, egw)


def assert_same(actual, expected):
    """Equal values, NaN exactly where expected has NaN (and the same dtype and shape)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("case", samples.PRELU_DEVICE_CASES, ids=lambda c: c[0])
def test_prelu_backward_a2_a3_kernel(backend, case):
    """On Atlas A2/A3 (the stand-in's default SoC) aclnnPreluBackward runs the TBE kernel: grad_weight NaN for a
    channel with an infinite or NaN grad_input (its dx * 0 term) or an x = +inf, NaN grad_input where x > 0 for a
    non-finite weight, each term rounded to the dtype before the sum. The CPU kernel gives the same, NaN
    positions included, and both give the values written out in samples.PRELU_DEVICE_CASES."""
    _, dtype, x, g, w, gi, gw = case
    x, g, w = (torch.tensor(v, dtype=dtype) for v in (x, g, w))
    got, cpu = npu(ops.prelu_backward.default, g, x, w), ops.prelu_backward(g, x, w)
    for a, c, e in zip(got, cpu, (gi, gw)):
        assert_same(a, c)
        assert_same(a, torch.tensor(e, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight_shape", [(1,), ()])
def test_prelu_backward_zero_dim_self(backend, dtype, weight_shape):
    """aclnn reshapes only a 1-D self to (1, N): a 0-dim self would reach kernels that index its dimension 1 (the
    stand-in fails it with 561002), so the NPU path passes the single element as shape [1]."""
    x, g, w = torch.tensor(-1.5).to(dtype), torch.tensor(2.0).to(dtype), torch.full(weight_shape, 0.25).to(dtype)
    backend.reset()
    got = npu(ops.prelu_backward.default, g, x, w)
    assert backend.aclnn_calls() == {"aclnnPreluBackward": 2}
    for a, c in zip(got, ops.prelu_backward(g, x, w)):
        assert_same(a, c)
    gi, gw = torch.full((), math.nan, dtype=dtype), torch.full(weight_shape, math.nan, dtype=dtype)
    assert npu(ops.prelu_backward.out, g, x, w, grad_input=gi, grad_weight=gw) is None
    assert_same(gi, got[0])
    assert_same(gw, got[1])


def test_prelu_backward_nan_input(backend):
    g, x, w = prelu_inputs(torch.float32)
    x[1, 2, 3] = float("nan")  # takes the x <= 0 branch: NaN grad_weight for channel 2
    gi, gw = npu(ops.prelu_backward.default, g, x, w)
    egi, egw = ops.prelu_backward(g, x, w)
    assert math.isnan(gw[2]) and not math.isnan(gw[0])
    assert_close(gi, egi)
    assert_close(gw, egw)


GROUP_CASES = [
    ([3, 3, 7, 10], 0),  # cumulative ends, with an empty group
    ([2, 5, 10], 0),
    ([3, 0, 4, 3], 1),  # counts, with an empty group
    ([10], 1),
]


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("case", GROUP_CASES)
def test_grouped_bias_add_grad(backend, case, idx_dtype, dtype, kind):
    values, idx_type = case
    torch.manual_seed(5)
    gy = torch.randn(10, 8).to(dtype)
    idx = torch.tensor(values, dtype=idx_dtype)
    backend.reset()
    got = npu(ops.grouped_bias_add_grad.default, layout(gy, kind), idx, idx_type)
    # type 1 (counts) needs GroupedBiasAddGradV2; type 0 GroupedBiasAddGrad
    assert backend.aclnn_calls() == {"aclnnGroupedBiasAddGradV2" if idx_type == 1 else "aclnnGroupedBiasAddGrad": 2}
    assert_close(got, ops.grouped_bias_add_grad(gy, idx, idx_type))


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_bias_add_grad_3d(backend, dtype, kind):
    torch.manual_seed(6)
    gy = torch.randn(4, 5, 8).to(dtype)
    backend.reset()
    got = npu(ops.grouped_bias_add_grad.default, layout(gy, kind), None, 0)
    assert backend.aclnn_calls() == {"aclnnGroupedBiasAddGrad": 2}
    assert_close(got, ops.grouped_bias_add_grad(gy, None, 0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", GROUP_CASES)
def test_grouped_bias_add_grad_out(backend, case, dtype):
    values, idx_type = case
    torch.manual_seed(7)
    gy = torch.randn(10, 8).to(dtype)
    idx = torch.tensor(values)
    out = noncontiguous_out((len(values), 8), dtype)  # NaN-filled: empty groups must be zeroed
    assert npu(ops.grouped_bias_add_grad.out, gy, idx, idx_type, out=out) is None
    assert_close(out, ops.grouped_bias_add_grad(gy, idx, idx_type))


def softmax_inputs(dtype, shape=(2, 3, 4, 16), mask_shape=(2, 3, 4, 16), scale=0.5):
    torch.manual_seed(8)
    x = torch.randn(shape)
    mask = torch.rand(mask_shape) < 0.3
    y = torch.softmax((x * scale).masked_fill(mask, -10000.0), dim=-1)
    g = torch.randn(shape)
    return g.to(dtype), y.to(dtype), mask


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scaled_masked_softmax_backward(backend, dtype, kind):
    g, y, mask = softmax_inputs(dtype)
    backend.reset()
    got = npu(ops.scaled_masked_softmax_backward.default, layout(g, kind), layout(y, kind), layout(mask, kind),
              0.5, False)
    assert backend.aclnn_calls() == {"aclnnScaledMaskedSoftmaxBackward": 2}
    assert_close(got, ops.scaled_masked_softmax_backward(g, y, mask, 0.5, False))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_shape", [(1, 3, 4, 16), (2, 1, 4, 16), (1, 1, 4, 16)])
def test_scaled_masked_softmax_backward_broadcast_mask(backend, mask_shape, dtype):
    g, y, mask = softmax_inputs(dtype, mask_shape=mask_shape)
    expected = ops.scaled_masked_softmax_backward(g, y, mask, 1.5, False)
    assert_close(npu(ops.scaled_masked_softmax_backward.default, g, y, mask, 1.5, False), expected)
    # the same mask expanded to the full shape (stride-0 dims)
    assert_close(npu(ops.scaled_masked_softmax_backward.default, g, y, mask.expand(g.shape), 1.5, False), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scaled_masked_softmax_backward_fix_triu_mask(backend, dtype):
    g, y, _ = softmax_inputs(dtype, shape=(2, 3, 5, 7), mask_shape=(2, 3, 5, 7))
    causal = torch.ones(5, 7, dtype=torch.bool).triu(1).expand(2, 3, 5, 7)
    ignored_mask = torch.zeros(1, dtype=torch.int8)  # fix_triu_mask=True ignores the mask argument
    got = npu(ops.scaled_masked_softmax_backward.default, g, y, ignored_mask, 2.0, True)
    assert_close(got, ops.scaled_masked_softmax_backward(g, y, causal, 2.0, False))
    assert_close(got, ops.scaled_masked_softmax_backward(g, y, ignored_mask, 2.0, True))
    assert (got[..., causal[0, 0]] == 0).all() and (got[..., ~causal[0, 0]] != 0).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_scaled_masked_softmax_backward_out(backend, dtype):
    g, y, mask = softmax_inputs(dtype)
    out = noncontiguous_out(g.shape, dtype)
    assert npu(ops.scaled_masked_softmax_backward.out, g, y, mask, 0.5, True, out=out) is None
    assert_close(out, ops.scaled_masked_softmax_backward(g, y, mask, 0.5, True))


def logit_inputs(dtype, shape=(6, 7)):
    torch.manual_seed(9)
    x = torch.rand(shape) * 1.4 - 0.2  # some values outside [0, 1]
    x.view(-1)[:6] = torch.tensor([0.0, 1.0, 0.05, 0.95, math.nan, math.inf])  # NaN x: the fill (0 or NaN)
    dy = torch.randn(shape)
    return x.to(dtype), dy.to(dtype)


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.1, 1.0, 2.0, math.inf, math.nan])
def test_logit_grad(backend, eps, dtype, kind):
    x, dy = logit_inputs(dtype)
    backend.reset()
    got = npu(ops.logit_grad.default, layout(x, kind), layout(dy, kind), eps)
    assert backend.aclnn_calls() == {"aclnnLogitGrad": 2}
    assert_close(got, ops.logit_grad(x, dy, eps))


@pytest.mark.parametrize("dtype", DTYPES)
def test_logit_grad_broadcast_and_out(backend, dtype):
    x, dy = logit_inputs(dtype, shape=(7,))
    xe, dye = x.expand(5, 7), dy.unsqueeze(1).expand(7, 5).t()  # stride-0 views (dy transposed too)
    assert_close(npu(ops.logit_grad.default, xe, dye, 0.05), ops.logit_grad(xe.contiguous(), dye.contiguous(), 0.05))
    out = noncontiguous_out((5, 7), dtype)
    assert npu(ops.logit_grad.out, xe, dye, -1.0, dx=out) is None
    assert_close(out, ops.logit_grad(xe.contiguous(), dye.contiguous(), -1.0))


# ------------------------------------------------------------------------------------------------------------
# Empty inputs: correctly shaped outputs, reductions over nothing are zeros (aclnn would leave them untouched).

def test_empty_inputs(backend):
    backend.reset()
    gi, gw = npu(ops.prelu_backward.default, torch.randn(0, 3, 4), torch.randn(0, 3, 4), torch.randn(3))
    assert gi.shape == (0, 3, 4) and torch.equal(gw, torch.zeros(3))
    gw_out = torch.full((3,), float("nan"))
    npu(ops.prelu_backward.out, torch.randn(0, 3), torch.randn(0, 3), torch.randn(3), grad_input=torch.empty(0, 3),
        grad_weight=gw_out)
    assert torch.equal(gw_out, torch.zeros(3))

    for idx, idx_type in [([0, 0, 0], 0), ([0, 0], 1)]:
        out = torch.full((len(idx), 8), float("nan"))
        npu(ops.grouped_bias_add_grad.out, torch.randn(0, 8), torch.tensor(idx), idx_type, out=out)
        assert torch.equal(out, torch.zeros(len(idx), 8))
    assert torch.equal(npu(ops.grouped_bias_add_grad.default, torch.randn(3, 0, 8), None, 0), torch.zeros(3, 8))
    assert npu(ops.grouped_bias_add_grad.default, torch.randn(4, 0), torch.tensor([1, 4]), 0).shape == (2, 0)

    assert npu(ops.gelu_backward_v2.default, torch.randn(0, 6), torch.randn(6), "none").shape == (0, 6)
    assert npu(ops.logit_grad.default, torch.randn(2, 0), torch.randn(2, 0), -1.0).shape == (2, 0)
    g = torch.randn(2, 0, 4, 4)
    assert npu(ops.scaled_masked_softmax_backward.default, g, g, torch.ones(1, 1, 4, 4, dtype=torch.bool), 1.0,
               True).shape == (2, 0, 4, 4)
    assert backend.aclnn_calls() == {}  # nothing to compute: aclnn is never called


# ------------------------------------------------------------------------------------------------------------
# Validation: the shared checks (plus the NPU dtype guard) raise before any aclnn call.

FP64_CASES = [
    (ops.logit_grad.default, lambda: (torch.rand(3, dtype=torch.float64), torch.rand(3, dtype=torch.float64), -1.0),
     "npu_ext.logit_grad: x must have dtype torch.float16, torch.bfloat16 or torch.float32, but got torch.float64"),
    (ops.gelu_backward_v2.default, lambda: (torch.rand(3), torch.rand(3, dtype=torch.float64), "none"),
     "npu_ext.gelu_backward_v2: self must have dtype torch.float16, torch.bfloat16 or torch.float32, "
     "but got torch.float64"),
    (ops.prelu_backward.default, lambda: (torch.rand(2, 3).double(), torch.rand(2, 3).double(), torch.rand(3).double()),
     "npu_ext.prelu_backward: self must have dtype torch.float16, torch.bfloat16 or torch.float32, "
     "but got torch.float64"),
    (ops.grouped_bias_add_grad.default, lambda: (torch.rand(4, 2).double(), torch.tensor([4]), 0),
     "npu_ext.grouped_bias_add_grad: grad_y must have dtype torch.float16, torch.bfloat16 or torch.float32, "
     "but got torch.float64"),
    (ops.scaled_masked_softmax_backward.default,
     lambda: (torch.rand(1, 1, 2, 2).double(), torch.rand(1, 1, 2, 2).double(),
              torch.zeros(1, 1, 2, 2, dtype=torch.bool), 1.0, False),
     "npu_ext.scaled_masked_softmax_backward: grad_output must have dtype torch.float16, torch.bfloat16 or "
     "torch.float32, but got torch.float64"),
]


@pytest.mark.parametrize("op,make_args,message", FP64_CASES)
def test_fp64_rejected_before_aclnn(backend, op, make_args, message):
    backend.reset()
    with pytest.raises(RuntimeError) as e:
        npu(op, *make_args())
    assert str(e.value).splitlines()[0] == message
    assert backend.aclnn_calls() == {}


BAD_GROUP_IDX = [
    ([3, 2, 10], 0, "npu_ext.grouped_bias_add_grad: group_idx must be non-decreasing (cumulative end offsets), "
                    "but group_idx[1] = 2 < group_idx[0] = 3"),
    ([3, -1, 10], 0, "npu_ext.grouped_bias_add_grad: group_idx must be non-negative, but group_idx[1] = -1"),
    ([3, 7, 9], 0, "npu_ext.grouped_bias_add_grad: the last entry of group_idx must equal the number of rows of "
                   "grad_y (10), but got 9"),
    ([3, 7, 12], 0, "npu_ext.grouped_bias_add_grad: group_idx[2] = 12 exceeds the number of rows of grad_y (10)"),
    ([3, 4, 4], 1, "npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), "
                   "but the first 3 counts already sum to 11"),
    ([3, 4, 2], 1, "npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), "
                   "but they sum to 9"),
    ([5, -2, 7], 1, "npu_ext.grouped_bias_add_grad: group_idx must be non-negative, but group_idx[1] = -2"),
]


@pytest.mark.parametrize("values,idx_type,message", BAD_GROUP_IDX)
def test_grouped_bias_add_grad_bad_group_idx(backend, values, idx_type, message):
    gy, idx = torch.randn(10, 4), torch.tensor(values, dtype=torch.int32)
    backend.reset()
    for call in [lambda: npu(ops.grouped_bias_add_grad.default, gy, idx, idx_type),
                 lambda: npu(ops.grouped_bias_add_grad.out, gy, idx, idx_type, out=torch.empty(len(values), 4))]:
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value).splitlines()[0] == message
    assert backend.aclnn_calls() == {}


SHARED_CHECK_CASES = [
    (ops.logit_grad.default, lambda: (torch.rand(3), torch.rand(4), -1.0)),
    (ops.logit_grad.out, lambda: (torch.rand(3), torch.rand(3), -1.0), lambda: dict(dx=torch.empty(3).half())),
    (ops.gelu_backward_v2.default, lambda: (torch.rand(3), torch.rand(3), "Tanh")),
    (ops.gelu_backward_v2.default, lambda: (torch.rand(3), torch.rand(4), "none")),
    (ops.gelu_backward_v2.out, lambda: (torch.rand(3).half(), torch.rand(3), "none"),
     lambda: dict(grad_input=torch.empty(3).half())),
    (ops.prelu_backward.default, lambda: (torch.rand(2, 3), torch.rand(2, 3), torch.rand(2))),
    (ops.prelu_backward.default, lambda: (torch.rand(2, 3).half(), torch.rand(2, 3), torch.rand(3))),
    (ops.grouped_bias_add_grad.default, lambda: (torch.rand(4, 2), torch.tensor([4.0]), 0)),
    (ops.grouped_bias_add_grad.default, lambda: (torch.rand(4, 2), torch.tensor([4]), 2)),
    (ops.grouped_bias_add_grad.default, lambda: (torch.rand(4, 2), None, 0)),
    (ops.scaled_masked_softmax_backward.default,
     lambda: (torch.rand(1, 1, 2, 2), torch.rand(1, 1, 2, 2), torch.zeros(1, 1, 2, 2), 1.0, False)),
    (ops.scaled_masked_softmax_backward.default,
     lambda: (torch.rand(1, 1, 2, 5000), torch.rand(1, 1, 2, 5000), torch.zeros(1, 1, 2, 2), 1.0, True)),
    # the documented limits (issue 20): aclnn rejects a 9-D gelu (161002), and the A2 GroupedBiasAddGrad kernel
    # keeps group offsets in int32 (a stride-0 view needs no memory)
    (ops.gelu_backward_v2.default, lambda: (torch.rand([1] * 9), torch.rand(1), "none")),
    (ops.gelu_backward_v2.default, lambda: (torch.rand(2), torch.rand([1] * 9), "tanh")),
    (ops.grouped_bias_add_grad.default, lambda: (torch.zeros(1, 2).expand(2**31, 2), torch.tensor([2**31]), 0)),
]


@pytest.mark.parametrize("case", SHARED_CHECK_CASES)
def test_shared_validation_before_aclnn(backend, case):
    """The NPU kernels raise exactly what the CPU kernels raise (one shared implementation), before aclnn."""
    op, make_args = case[0], case[1]
    make_kwargs = case[2] if len(case) > 2 else dict
    with pytest.raises(RuntimeError) as cpu_error:
        op(*make_args(), **make_kwargs())
    backend.reset()
    with pytest.raises(RuntimeError) as npu_error:
        npu(op, *make_args(), **make_kwargs())
    assert str(npu_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]
    assert str(npu_error.value).startswith("npu_ext.")
    assert backend.aclnn_calls() == {}


# ------------------------------------------------------------------------------------------------------------
# The stand-in's C ABI, called directly.

ACL_FLOAT, ACL_FLOAT16, ACL_INT32, ACL_BOOL = 0, 1, 3, 12
ACL_FORMAT_ND = 2
NULLPTR, INVALID = 161001, 161002
P = ctypes.c_void_p


class Abi:
    def __init__(self, lib):
        self.lib = lib
        lib.aclCreateTensor.restype = P
        lib.aclCreateTensor.argtypes = [P, ctypes.c_uint64, ctypes.c_int32, P, ctypes.c_int64, ctypes.c_int32, P,
                                        ctypes.c_uint64, P]
        lib.aclDestroyTensor.argtypes = [P]
        self.keep = []

    def tensor(self, t, dtype_code=None, sizes=None, strides=None, offset=None, storage=None, fmt=ACL_FORMAT_ND):
        """`storage`: the storage dims (default: the storage as one dimension, as for a base format)."""
        codes = {torch.float32: ACL_FLOAT, torch.float16: ACL_FLOAT16, torch.int32: ACL_INT32, torch.bool: ACL_BOOL}
        sizes = list(t.shape if sizes is None else sizes)
        strides = (ctypes.c_int64 * len(sizes))(*(t.stride() if strides is None else strides))
        sizes = (ctypes.c_int64 * len(sizes))(*sizes)
        storage = [t.untyped_storage().nbytes() // t.element_size()] if storage is None else storage
        storage_dims = (ctypes.c_int64 * len(storage))(*storage)
        self.keep += [sizes, strides, storage_dims, t]
        return self.lib.aclCreateTensor(sizes, len(sizes), codes[t.dtype] if dtype_code is None else dtype_code, strides,
                                        t.storage_offset() if offset is None else offset, fmt, storage_dims,
                                        len(storage), t.untyped_storage().data_ptr())

    def last_error(self):
        self.lib.fake_opapi_last_error.restype = ctypes.c_char_p
        return self.lib.fake_opapi_last_error().decode()

    def phase1(self, api, *args, ws=True, ex=True):
        size, executor = ctypes.c_uint64(123), P()
        fn = getattr(self.lib, api + "GetWorkspaceSize")
        status = fn(*args, ctypes.byref(size) if ws else None, ctypes.byref(executor) if ex else None)
        return status, size.value, executor

    def run(self, api, size, executor):
        ws = ctypes.create_string_buffer(max(size, 1))
        getattr(self.lib, api).argtypes = [P, ctypes.c_uint64, P, P]
        return getattr(self.lib, api)(ws if size else None, size, executor, None)


@pytest.fixture
def abi(backend):
    return Abi(backend.opapi)


def test_abi_logit_grad(abi):
    lib = abi.lib
    lib.aclnnLogitGradGetWorkspaceSize.argtypes = [P, P, ctypes.c_double, P, P, P]
    x, dy, out = torch.tensor([0.25, 0.5]), torch.tensor([3.0, 1.0]), torch.zeros(2)
    tx, tdy, tout = abi.tensor(x), abi.tensor(dy), abi.tensor(out)
    assert abi.phase1("aclnnLogitGrad", None, tdy, -1.0, tout)[0] == NULLPTR
    assert abi.phase1("aclnnLogitGrad", tx, tdy, -1.0, None)[0] == NULLPTR
    assert abi.phase1("aclnnLogitGrad", tx, tdy, -1.0, tout, ws=False)[0] == NULLPTR
    assert abi.phase1("aclnnLogitGrad", tx, tdy, -1.0, tout, ex=False)[0] == NULLPTR
    half = abi.tensor(dy.half())
    assert abi.phase1("aclnnLogitGrad", tx, half, -1.0, tout)[0] == INVALID  # dtype mismatch
    assert abi.phase1("aclnnLogitGrad", tx, abi.tensor(torch.zeros(3)), -1.0, tout)[0] == INVALID  # shape mismatch
    assert abi.phase1("aclnnLogitGrad", tx, abi.tensor(dy, dtype_code=99), -1.0, tout)[0] == INVALID  # bad code
    assert abi.phase1("aclnnLogitGrad", tx, abi.tensor(dy, offset=1), -1.0, tout)[0] == INVALID  # past storage
    assert abi.phase1("aclnnLogitGrad", tx, abi.tensor(dy, strides=[2]), -1.0, tout)[0] == INVALID  # past storage
    assert abi.run("aclnnLogitGrad", 0, None) == NULLPTR  # null executor (a failed phase 1)
    status, size, executor = abi.phase1("aclnnLogitGrad", tx, tdy, -1.0, tout)
    assert status == 0 and executor.value
    assert abi.run("aclnnLogitGrad", size, executor) == 0
    assert torch.equal(out, dy / (x * (1 - x)))
    for t in [tx, tdy, tout, half]:
        assert lib.aclDestroyTensor(t) == 0
    assert lib.aclDestroyTensor(None) == 0


def test_abi_logit_grad_selects_the_fill_for_nan_x(abi):
    abi.lib.aclnnLogitGradGetWorkspaceSize.argtypes = [P, P, ctypes.c_double, P, P, P]
    x, dy = torch.tensor([math.nan, 0.5, 2.0]), torch.ones(3)
    for eps, fill in [(0.0, 0.0), (0.25, 0.0), (-1.0, math.nan), (math.nan, math.nan)]:
        out = torch.zeros(3)
        status, size, executor = abi.phase1("aclnnLogitGrad", abi.tensor(x), abi.tensor(dy), eps, abi.tensor(out))
        assert status == 0 and abi.run("aclnnLogitGrad", size, executor) == 0
        assert_same(out, torch.tensor([fill, 4.0, fill]))


def test_abi_gelu_backward_v2(abi):
    lib = abi.lib
    lib.aclnnGeluBackwardV2GetWorkspaceSize.argtypes = [P, P, ctypes.c_char_p, P, P, P]
    g, x, out = torch.ones(3), torch.tensor([-1.0, 0.0, 2.0]), torch.zeros(3)
    tg, tx, tout = abi.tensor(g), abi.tensor(x), abi.tensor(out)
    g9 = torch.ones([1] * 9)
    assert abi.phase1("aclnnGeluBackwardV2", abi.tensor(g9), abi.tensor(g9), b"none", abi.tensor(g9))[0] == INVALID
    assert abi.phase1("aclnnGeluBackwardV2", tg, tx, None, tout)[0] == NULLPTR
    assert abi.phase1("aclnnGeluBackwardV2", tg, tx, b"Tanh", tout)[0] == INVALID
    assert abi.phase1("aclnnGeluBackwardV2", tg, tx, b"none", abi.tensor(torch.zeros(3).half()))[0] == INVALID
    status, size, executor = abi.phase1("aclnnGeluBackwardV2", tg, tx, b"none", tout)
    assert status == 0 and abi.run("aclnnGeluBackwardV2", size, executor) == 0
    expected = 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    torch.testing.assert_close(out, expected)


def test_abi_prelu_backward(abi):
    lib = abi.lib
    lib.aclnnPreluBackwardGetWorkspaceSize.argtypes = [P, P, P, P, P, P, P]
    x = torch.tensor([[1.0, -2.0], [-3.0, 4.0]])
    g, w = torch.ones(2, 2), torch.tensor([0.5, 0.25])
    gi, gw = torch.zeros(2, 2), torch.zeros(2)
    args = [abi.tensor(g), abi.tensor(x), abi.tensor(w), abi.tensor(gi)]
    assert abi.phase1("aclnnPreluBackward", *args, None)[0] == NULLPTR
    assert abi.phase1("aclnnPreluBackward", *args, abi.tensor(torch.zeros(2, 1)))[0] == INVALID  # not 1-D
    status, size, executor = abi.phase1("aclnnPreluBackward", *args, abi.tensor(gw))
    assert status == 0 and size > 0
    assert abi.run("aclnnPreluBackward", 0, executor) == INVALID  # workspace size differs from phase 1
    status, size, executor = abi.phase1("aclnnPreluBackward", *args, abi.tensor(gw))
    assert abi.run("aclnnPreluBackward", size, executor) == 0
    assert torch.equal(gi, torch.tensor([[1.0, 0.25], [0.5, 1.0]]))
    assert torch.equal(gw, torch.tensor([-3.0, -2.0]))
    s0 = torch.tensor(-1.0)  # 0-dim self: not reshaped by aclnn, the kernels index its dimension 1
    assert abi.phase1("aclnnPreluBackward", abi.tensor(s0), abi.tensor(s0), abi.tensor(torch.ones(1)),
                      abi.tensor(s0.clone()), abi.tensor(torch.zeros(1)))[0] == 561002


def test_abi_grouped_bias_add_grad(abi):
    lib = abi.lib
    lib.aclnnGroupedBiasAddGradGetWorkspaceSize.argtypes = [P, P, P, P, P]
    lib.aclnnGroupedBiasAddGradV2GetWorkspaceSize.argtypes = [P, P, ctypes.c_int64, P, P, P]
    gy, out = torch.arange(8.0).view(4, 2), torch.zeros(2, 2)
    tgy, tout = abi.tensor(gy), abi.tensor(out)
    idx = abi.tensor(torch.tensor([1, 3], dtype=torch.int32))
    assert abi.phase1("aclnnGroupedBiasAddGrad", None, idx, tout)[0] == NULLPTR
    assert abi.phase1("aclnnGroupedBiasAddGrad", tgy, None, tout)[0] == INVALID  # 2-D gradY needs groupIdx
    assert abi.phase1("aclnnGroupedBiasAddGradV2", tgy, idx, 2, tout)[0] == INVALID
    assert abi.phase1("aclnnGroupedBiasAddGradV2", tgy, abi.tensor(torch.tensor([[4]], dtype=torch.int32)), 0,
                      tout)[0] == INVALID
    status, size, executor = abi.phase1("aclnnGroupedBiasAddGradV2", tgy, idx, 1, tout)  # counts 1, 3
    assert status == 0 and abi.run("aclnnGroupedBiasAddGradV2", size, executor) == 0
    assert torch.equal(out, torch.tensor([[0.0, 1.0], [2 + 4 + 6.0, 3 + 5 + 7.0]]))


def test_abi_private_formats_as_the_real_operators_take_them(abi):
    """A tensor described in FRACTAL_NZ (its storage dims (ceil(n/16), ceil(m/16), 16, 16)), as torch_npu's ConvertType
    would pass one (the NPU path never does: it casts to ND first, tests/test_npu_formats.py): the generated
    operators reject it against their ND-only OpDef, ScaledMaskedSoftmaxBackward by its own format check (A2/A3),
    and GeluBackwardV2 takes it and reads the tiles as if they were ND (docs/npu.md#private-storage-formats)."""
    lib = abi.lib
    fractal_nz = 29
    nz_storage = [1, 1, 16, 16]  # a (2, 4) tensor in NZ, zero-padded tiles
    tiles = torch.zeros(256)
    nz = abi.tensor(tiles, sizes=[2, 4], strides=[4, 1], storage=nz_storage, fmt=fractal_nz)
    nd = [abi.tensor(torch.rand(2, 4) * 0.5 + 0.25) for _ in range(3)]
    lib.aclnnLogitGradGetWorkspaceSize.argtypes = [P, P, ctypes.c_double, P, P, P]
    assert abi.phase1("aclnnLogitGrad", nz, nd[0], -1.0, nd[1])[0] == INVALID
    assert "inconsistent with that defined in the operator prototype OpDef" in abi.last_error()
    assert "FRACTAL_NZ" in abi.last_error()
    lib.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize.argtypes = [P, P, P, ctypes.c_double, ctypes.c_bool, P, P, P]
    g4 = abi.tensor(torch.zeros(4096), sizes=[1, 1, 2, 4], strides=[8, 8, 4, 1], storage=[1, 1, 1, 1, 16, 16],
                    fmt=fractal_nz)
    y4, out4, mask = abi.tensor(torch.rand(1, 1, 2, 4)), abi.tensor(torch.zeros(1, 1, 2, 4)), abi.tensor(
        torch.zeros(1, 1, 2, 4, dtype=torch.bool))
    assert abi.phase1("aclnnScaledMaskedSoftmaxBackward", g4, y4, mask, 1.0, False, out4)[0] == INVALID
    assert abi.last_error() == ("Input and output format only support [ND]. Actual: gradOutput:[FRACTAL_NZ], y:[ND], "
                                "out:[ND].")
    lib.aclnnGeluBackwardV2GetWorkspaceSize.argtypes = [P, P, ctypes.c_char_p, P, P, P]
    status, size, executor = abi.phase1("aclnnGeluBackwardV2", nd[0], nz, b"none", nd[2])
    assert status == 0 and abi.run("aclnnGeluBackwardV2", size, executor) == 0


def test_abi_scaled_masked_softmax_backward(abi):
    lib = abi.lib
    lib.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize.argtypes = [P, P, P, ctypes.c_double, ctypes.c_bool, P, P, P]
    g, y = torch.tensor([[[[1.0, 2.0]]]]), torch.tensor([[[[0.25, 0.75]]]])
    mask, out = torch.tensor([[[[False, True]]]]), torch.zeros(1, 1, 1, 2)
    args = [abi.tensor(g), abi.tensor(y), abi.tensor(mask)]
    assert abi.phase1("aclnnScaledMaskedSoftmaxBackward", *args, 1.0, True, abi.tensor(out))[0] == INVALID
    assert abi.phase1("aclnnScaledMaskedSoftmaxBackward", *args[:2], abi.tensor(mask.float()), 1.0, False,
                      abi.tensor(out))[0] == INVALID  # mask must be bool
    assert abi.phase1("aclnnScaledMaskedSoftmaxBackward", *args[:2], None, 1.0, False, abi.tensor(out))[0] == NULLPTR
    status, size, executor = abi.phase1("aclnnScaledMaskedSoftmaxBackward", *args, 2.0, False, abi.tensor(out))
    assert status == 0 and abi.run("aclnnScaledMaskedSoftmaxBackward", size, executor) == 0
    s = 1.0 * 0.25 + 2.0 * 0.75
    assert torch.equal(out, torch.tensor([[[[2.0 * (1.0 - s) * 0.25, 0.0]]]]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_standin_rounding_is_bit_exact(backend, dtype):
    """logit_grad is one fp32 expression rounded once: the stand-in's own fp16/bf16 conversions (normal,
    subnormal, overflow to inf) must give the CPU kernel's bits exactly."""
    torch.manual_seed(10)
    x = (torch.rand(4096) * 1.2 - 0.1).to(dtype)
    dy = (torch.randn(4096) * 1e3).to(dtype)
    special = {torch.float16: [1e-7, 6e-8, 3e-8, 65519.0, 65520.0, 1e5, -1e-6],
               torch.bfloat16: [1e-40, 3e38, -1e-30], torch.float32: [1e-45, 3e38, -1e-38]}[dtype]
    x = torch.cat([x, torch.full((len(special),), 0.5, dtype=dtype)])
    dy = torch.cat([dy, torch.tensor(special).to(dtype)])
    got, expected = npu(ops.logit_grad.default, x, dy, 0.01), ops.logit_grad(x, dy, 0.01)
    assert torch.equal(got.view(torch.int16 if dtype != torch.float32 else torch.int32),
                       expected.view(torch.int16 if dtype != torch.float32 else torch.int32))


# ------------------------------------------------------------------------------------------------------------
# aclnn as it really behaves (the models follow the CANN sources, see tests/fake_cann/opapi/backward.cpp).

SENTINEL = 77.0  # exact in fp16, bf16 and fp32


def framed_view(base, shape, kind):
    """A view of `shape` into `base` (a larger tensor): "transposed" (reversed dims, after a 3-element offset;
    every other element for 1-D) or "sliced" (the middle of a tensor one larger on both sides of every dim)."""
    if kind == "transposed":
        n = math.prod(shape)
        if len(shape) == 1:
            return base.view(-1)[3:3 + 2 * n:2]
        return base.view(-1)[3:3 + n].view(list(shape)[::-1]).permute(list(range(len(shape)))[::-1])
    return base[tuple(slice(1, 1 + s) for s in shape)]


def framed_out(shape, dtype, kind):
    """(storage, view, covered): a sentinel-filled storage, an output view into it, and which storage elements
    the view covers."""
    big_shape = (2 * math.prod(shape) + 6,) if kind == "transposed" else tuple(s + 2 for s in shape)
    storage = torch.full(big_shape, SENTINEL, dtype=dtype)
    positions = torch.arange(storage.numel()).view(big_shape)
    covered = torch.zeros(storage.numel(), dtype=torch.bool)
    covered[framed_view(positions, shape, kind).reshape(-1)] = True
    view = framed_view(storage, shape, kind)
    assert not view.is_contiguous() or (kind == "sliced" and len(shape) == 1)  # 1-D: a slice with an offset
    return storage, view, covered


def assert_only_view_written(storage, covered):
    outside = storage.reshape(-1)[~covered]
    assert outside.numel() > 0 and bool((outside == SENTINEL).all()), "written outside the output's view"


def out_cases(dtype):
    """(overload, args, {out name: shape}) for every op's .out overload."""
    torch.manual_seed(11)
    g, x = torch.randn(4, 6).to(dtype), torch.randn(6).to(dtype)
    pg, px, pw = prelu_inputs(dtype)
    sg, sy, smask = softmax_inputs(dtype)
    lx, ldy = logit_inputs(dtype)
    gy = torch.randn(10, 8).to(dtype)
    return [
        (ops.gelu_backward_v2.out, (g, x, "tanh"), {"grad_input": (4, 6)}),
        (ops.prelu_backward.out, (pg, px, pw), {"grad_input": (4, 3, 5), "grad_weight": (3,)}),
        (ops.grouped_bias_add_grad.out, (gy, torch.tensor([3, 3, 7, 10]), 0), {"out": (4, 8)}),
        (ops.scaled_masked_softmax_backward.out, (sg, sy, smask, 0.5, False), {"out": (2, 3, 4, 16)}),
        (ops.logit_grad.out, (lx, ldy, 0.05), {"dx": (6, 7)}),
    ]


@pytest.mark.parametrize("kind", ["transposed", "sliced"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(5), ids=["gelu", "prelu", "grouped", "softmax", "logit"])
def test_out_layouts_never_write_outside_the_view(backend, case, dtype, kind):
    """Strided and sliced `.out` tensors for every op: aclnnScaledMaskedSoftmaxBackward and aclnnLogitGrad write
    densely from the storage offset, so the NPU path computes into a temporary and copies back; the others copy
    into strided outputs themselves. Either way the values are the CPU kernel's and nothing outside the view
    changes."""
    overload, args, outs = out_cases(dtype)[case]
    framed = {name: framed_out(shape, dtype, kind) for name, shape in outs.items()}
    assert npu(overload, *args, **{name: f[1] for name, f in framed.items()}) is None
    expected = overload.overloadpacket(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for (storage, view, covered), exp in zip(framed.values(), expected):
        assert_close(view, exp)
        assert_only_view_written(storage, covered)


def test_dense_writer_corrupts_a_strided_out_when_called_directly(abi):
    """The model really ignores out's strides for aclnnLogitGrad (so the test above can fail): called with a sliced
    out, it writes densely from the storage offset, past the view."""
    x, dy = logit_inputs(torch.float32)
    storage, view, covered = framed_out(x.shape, torch.float32, "sliced")
    abi.lib.aclnnLogitGradGetWorkspaceSize.argtypes = [P, P, ctypes.c_double, P, P, P]
    status, size, executor = abi.phase1("aclnnLogitGrad", abi.tensor(x), abi.tensor(dy), -1.0, abi.tensor(view))
    assert status == 0 and abi.run("aclnnLogitGrad", size, executor) == 0
    assert not bool((storage.reshape(-1)[~covered] == SENTINEL).all())


# Mixed dtypes with a 0-dim operand: PyTorch's result_type lets the dimensioned tensor win; aclnn's PromoteType
# has no such rule (fp32 for any two different float dtypes) and would reject gradInput's dtype.
ZERO_DIM_CASES = [(torch.float32, torch.float16), (torch.float32, torch.bfloat16), (torch.float16, torch.bfloat16),
                  (torch.bfloat16, torch.float16)]


@pytest.mark.parametrize("zero_dim_arg", ["grad_output", "self"])
@pytest.mark.parametrize("dtypes", ZERO_DIM_CASES, ids=lambda d: f"{d[0]}-{d[1]}".replace("torch.", ""))
def test_gelu_backward_v2_zero_dim_promotion(backend, dtypes, zero_dim_arg):
    zero_dim_dtype, tensor_dtype = dtypes
    torch.manual_seed(12)
    scalar = torch.tensor(1.7).to(zero_dim_dtype)
    tensor = (torch.randn(4, 5) * 2).to(tensor_dtype)
    g, x = (scalar, tensor) if zero_dim_arg == "grad_output" else (tensor, scalar)
    expected = ops.gelu_backward_v2(g, x, "none")
    assert expected.dtype == tensor_dtype  # PyTorch's rule: the 0-dim operand does not promote
    backend.reset()
    got = npu(ops.gelu_backward_v2.default, g, x, "none")
    assert backend.aclnn_calls() == {"aclnnGeluBackwardV2": 2}
    backend.synchronize()  # nothing failed in the task queue
    assert_close(got, expected)


def _exec_npu_cmd_ext_defers_a_rejected_call(backend, monkeypatch):
    """What the NPU path no longer does: torch_npu's EXEC_NPU_CMD_EXT ignores the GetWorkspaceSize status, so a
    call aclnn rejects (here a dy dtype that differs from x's) returns normally; its queued second phase runs
    with a null executor and the 161001 surfaces at a later, unrelated operation. Without the task queue
    (TASK_QUEUE_ENABLE=0) it is reported at the call, still as the misleading 161001."""
    x, dy, out = torch.rand(3), torch.rand(3).half(), torch.empty(3)
    torch.ops.npu_standin.exec_npu_cmd_ext_logit_grad(x, dy, -1.0, out)  # no error here
    with pytest.raises(RuntimeError) as e:
        npu(ops.logit_grad.default, x, x, -1.0)  # an unrelated, valid later call
    assert str(e.value).splitlines()[0] == (
        "npu stand-in task queue: an earlier asynchronous task failed: call aclnnLogitGrad failed, error code is "
        "161001 (reported at this later operation; since the operator is called asynchronously, the stacktrace "
        "may be inaccurate)")
    for level in ["2"]:  # V2: both phases queued
        monkeypatch.setenv("TASK_QUEUE_ENABLE", level)
        torch.ops.npu_standin.exec_npu_cmd_ext_logit_grad(x, dy, -1.0, out)
        with pytest.raises(RuntimeError, match="error code is 161001"):
            backend.synchronize()
    monkeypatch.setenv("TASK_QUEUE_ENABLE", "0")
    with pytest.raises(RuntimeError, match="^call aclnnLogitGrad failed, error code is 161001"):
        torch.ops.npu_standin.exec_npu_cmd_ext_logit_grad(x, dy, -1.0, out)


if BACKEND is npu_backend.Standin:  # the stand-in's own EXEC_NPU_CMD_EXT (the real one has no test hook)
    test_exec_npu_cmd_ext_defers_a_rejected_call = _exec_npu_cmd_ext_defers_a_rejected_call


def test_formats_as_torch_npu_converts_them(backend):
    """torch_npu's ConvertType passes a base-format tensor as NCL (3-D), NCHW (4-D), NCDHW (5-D), ND otherwise."""
    backend.reset()
    g, x, w = prelu_inputs(torch.float32)  # 3-D self and grad_output, 1-D weight
    npu(ops.prelu_backward.default, g, x, w)
    sg, sy, smask = softmax_inputs(torch.float32)
    npu(ops.scaled_masked_softmax_backward.default, sg, sy, smask, 1.0, False)
    g5 = torch.randn(2, 1, 3, 2, 4)
    npu(ops.gelu_backward_v2.default, g5, g5, "none")
    formats = {key: backend.calls(key) for key in
               [f"format {code} rank {rank}" for code in (0, 2, 30, 47) for rank in (1, 3, 4, 5)]}
    assert {k: v for k, v in formats.items() if v} == {
        "format 47 rank 3": 3, "format 2 rank 1": 2, "format 0 rank 4": 4, "format 30 rank 5": 3}


def run_scenario(scenario, missing=None, **env):
    """(steps by name, a repeated step as "<name>#2"; the fallback warnings, from stderr). `missing`: aclnn entry
    points this CANN lacks (comma-separated): the fake CANN's libopapi.so linked without them, put first on
    LD_LIBRARY_PATH (tests/fake_cann/build.py --without), or the stand-in's NPU_EXT_STANDIN_MISSING."""
    script = os.path.join(os.path.dirname(__file__), "npu_path_scenarios.py")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NPU_FAKE_", "NPU_EXT_NO_CPU"))}
    full_env.update(env)
    if missing and BACKEND is npu_backend.Standin:
        full_env["NPU_EXT_STANDIN_MISSING"] = missing
    elif missing:
        build = os.path.join(os.path.dirname(__file__), "fake_cann", "build.py")
        lib = subprocess.run([sys.executable, build, "--without", missing], check=True, capture_output=True,
                             text=True).stdout.splitlines()[-1]
        full_env["LD_LIBRARY_PATH"] = lib + os.pathsep + os.environ["LD_LIBRARY_PATH"]
    proc = subprocess.run([sys.executable, script, scenario], env=full_env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = {}
    for step in json.loads(proc.stdout.splitlines()[-1]):
        steps[step["step"] + ("#2" if step["step"] in steps else "")] = step
    warnings = [line.split("Warning: ", 1)[1].rsplit(" (function ", 1)[0]
                for line in proc.stderr.splitlines() if "Warning: npu_ext." in line]
    return steps, warnings


def fallback_warning(op, reason):
    return (f"npu_ext.{op}: {reason}; running the CPU kernel on host copies instead (slow; warned once per "
            "operator; NPU_EXT_NO_CPU_FALLBACK=1 makes this an error)")


OLD_SOC = ("has no kernel for this SoC (Ascend910A; it needs an Atlas A2/A3 (Ascend910B*, Ascend910_93*) or Ascend950 "
           "(Ascend950*, Ascend910_95*))")


def no_kernel(api, soc, phase, status):
    """The reason a probe gives when the CANN has the entry point but no kernel for the SoC."""
    where = f"{api}GetWorkspaceSize" if phase == 1 else f"{api}'s launch"
    name = {561003: "ACLNN_ERR_INNER_FIND_KERNEL_ERROR", 561000: "ACLNN_ERR_INNER"}[status]
    return (f"{api} has no kernel for this SoC ({soc}) in the installed CANN (a one-time probe call failed in "
            f"{where} with status {status}, {name})")


@pytest.mark.arch_independent
def test_missing_entry_points_fall_back(backend):
    """A CANN without aclnnLogitGrad: the CPU kernel on host copies, one warning. Without
    aclnnGroupedBiasAddGradV2 (CANN < 8.5): counts become cumulative ends for aclnnGroupedBiasAddGrad."""
    steps, warnings = run_scenario("missing", missing="aclnnLogitGrad,aclnnGroupedBiasAddGradV2")
    assert warnings == [fallback_warning("logit_grad", "aclnnLogitGrad is not in this CANN's operator libraries "
                                                      "(aclnnLogitGradGetWorkspaceSize not found)")]  # once
    for name in ["logit_grad", "logit_grad#2"]:
        assert steps[name] == dict(step="logit_grad", equal=True, close=True, aclnn={}, queue_clean=True)
    grouped = steps["grouped_counts"]  # aclnnGroupedBiasAddGrad probed (2 calls), then called (2)
    assert grouped["close"] and grouped["aclnn"] == {"aclnnGroupedBiasAddGrad": 4}
    assert steps["logit_grad_captured"]["error"] == (  # the fallback's host copies cannot be captured
        "npu_ext.logit_grad: the CPU fallback (aclnnLogitGrad is not in this CANN's operator libraries "
        "(aclnnLogitGradGetWorkspaceSize not found)) needs the host, which is not possible while the NPU stream is "
        "being captured into a graph (aclgraph, torch.compile mode=\"reduce-overhead\"): call it outside the captured "
        "region")


FEATURE_LIB_SCRIPT = r"""
import ctypes, json, sys, torch, torch_npu, torch_ext
x, dy = torch.rand(4, 8) * 0.9 + 0.05, torch.randn(4, 8)
got = torch.ops.npu_ext.logit_grad(x.to("npu"), dy.to("npu"), 0.1).cpu()
feature = ctypes.CDLL(sys.argv[1])
feature.fake_opapi_calls.restype = ctypes.c_int
print(json.dumps({"equal": torch.equal(got, torch.ops.npu_ext.logit_grad(x, dy, 0.1)),
                  "calls": feature.fake_opapi_calls(b"aclnnLogitGradGetWorkspaceSize")}))
"""


def test_operators_outside_libopapi_are_found(backend, tmp_path):
    """A CANN whose aclnnLogitGrad lives in an aclnn feature library (libaclnn_ops_train.so), not in libopapi.so:
    op-plugin's GetOpApiFuncAddr searches the feature libraries after libopapi.so (branch 6.0.0 for torch_npu 2.6,
    where csrc/core/npu/torch_npu_compat.cpp searches the same list itself, and every later branch), so the operator is
    found and runs on the device (NPU_EXT_NO_CPU_FALLBACK=1: a fallback would be an error)."""
    if backend.name != "fake_cann":
        return  # the stand-in has no library search (tools/aarch64/run.sh does not run this test)
    build = os.path.join(os.path.dirname(__file__), "fake_cann", "build.py")
    without = subprocess.run([sys.executable, build, "--without", "aclnnLogitGrad"], check=True, capture_output=True,
                             text=True).stdout.splitlines()[-1]
    full = subprocess.run([sys.executable, build], check=True, capture_output=True, text=True).stdout.splitlines()[-1]
    feature = tmp_path / "libaclnn_ops_train.so"
    feature.write_bytes((open(os.path.join(full, "libopapi.so"), "rb").read()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NPU_FAKE_", "NPU_EXT_NO_CPU"))}
    env.update(NPU_EXT_NO_CPU_FALLBACK="1",
               LD_LIBRARY_PATH=os.pathsep.join([without, str(tmp_path), os.environ["LD_LIBRARY_PATH"]]))
    proc = subprocess.run([sys.executable, "-c", FEATURE_LIB_SCRIPT, str(feature)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result == {"equal": True, "calls": 2}  # the probe and the call, in the feature library


@pytest.mark.arch_independent
def test_old_soc_falls_back_or_raises_at_the_call(backend):
    """An Ascend910A (before A2): the A2/A3-only operators fall back to the CPU; GeluBackwardV2 and PreluBackward
    run there but reject bf16, which is raised at the call with aclnn's status and reason (nothing queued)."""
    steps, warnings = run_scenario("old_soc", NPU_FAKE_SOC="Ascend910A")
    assert warnings == [fallback_warning("scaled_masked_softmax_backward", "aclnnScaledMaskedSoftmaxBackward " + OLD_SOC),
                        fallback_warning("logit_grad", "aclnnLogitGrad " + OLD_SOC)]
    assert steps["softmax"] == dict(step="softmax", equal=True, close=True, aclnn={}, queue_clean=True)
    assert steps["logit_grad"] == dict(step="logit_grad", equal=True, close=True, aclnn={}, queue_clean=True)
    # GeluBackwardV2 and PreluBackward run there: their first call probes them (2 calls: both phases)
    assert steps["gelu_fp32"]["close"] and steps["gelu_fp32"]["aclnn"] == {"aclnnGeluBackwardV2": 4}
    assert steps["gelu_bf16"] == dict(
        step="gelu_bf16", aclnn={"aclnnGeluBackwardV2": 1}, queue_clean=True,
        error="npu_ext.gelu_backward_v2: aclnnGeluBackwardV2GetWorkspaceSize rejected the call with status 161002 "
              "(ACLNN_ERR_PARAM_INVALID); nothing was queued. aclnn says: Input dtype of gelu is not support "
              "bfloat16 in current socversion.")
    assert steps["prelu_bf16"] == dict(
        step="prelu_bf16", aclnn={"aclnnPreluBackward": 3}, queue_clean=True,
        error="npu_ext.prelu_backward: aclnnPreluBackwardGetWorkspaceSize rejected the call with status 161002 "
              "(ACLNN_ERR_PARAM_INVALID); nothing was queued. aclnn says: self dtype BFLOAT16 not in the dtype "
              "support list of this SoC (FLOAT, FLOAT16).")


@pytest.mark.arch_independent
def test_no_cpu_fallback_switch(backend):
    steps, warnings = run_scenario("no_fallback", missing="aclnnLogitGrad",
                                   NPU_EXT_NO_CPU_FALLBACK="1")
    assert warnings == []
    assert steps["logit_grad"] == dict(step="logit_grad", aclnn={}, queue_clean=True, error=(
        "npu_ext.logit_grad: aclnnLogitGrad is not in this CANN's operator libraries (aclnnLogitGradGetWorkspaceSize "
        "not found), and NPU_EXT_NO_CPU_FALLBACK=1 forbids running it on the CPU instead"))
    assert steps["gelu_fp32"]["close"]  # available operators are unaffected


ASCEND950 = "Ascend950PR_9579"


@pytest.mark.arch_independent
@pytest.mark.ascend950
def test_soc_without_the_kernel_falls_back(backend):
    """An Ascend950 whose CANN has aclnnLogitGrad and aclnnGroupedBiasAddGrad(V2) but no Ascend950 kernel for them
    (configs added in 2026-02 / 2026-03): the first call probes each entry point once, LogitGrad fails its phase 1
    with 561003, GroupedBiasAddGrad passes phase 1 and fails its launch with 561000 (the output unwritten, the
    failure reported later by the task queue); both then run on the CPU with one warning per operator, and
    nothing is left failing in the queue. Operators with a kernel are unaffected."""
    steps, warnings = run_scenario("no_kernel", NPU_FAKE_SOC=ASCEND950,
                                   NPU_FAKE_NO_KERNEL="LogitGrad,GroupedBiasAddGrad")
    assert warnings == [
        fallback_warning("logit_grad", no_kernel("aclnnLogitGrad", ASCEND950, 1, 561003)),
        fallback_warning("grouped_bias_add_grad", no_kernel("aclnnGroupedBiasAddGradV2", ASCEND950, 2, 561000)),
    ]
    assert steps["logit_grad"] == dict(step="logit_grad", equal=True, close=True, aclnn={"aclnnLogitGrad": 1},
                                       queue_clean=True)  # the probe's phase 1
    assert steps["logit_grad#2"] == dict(step="logit_grad", equal=True, close=True, aclnn={}, queue_clean=True)
    assert steps["grouped_counts"] == dict(  # both entry points probed (phase 1 and the failing launch)
        step="grouped_counts", equal=True, close=True, queue_clean=True,
        aclnn={"aclnnGroupedBiasAddGradV2": 2, "aclnnGroupedBiasAddGrad": 2})
    assert steps["grouped_ends"] == dict(step="grouped_ends", equal=True, close=True, aclnn={}, queue_clean=True)
    for name, api in [("softmax", "aclnnScaledMaskedSoftmaxBackward"), ("gelu_fp32", "aclnnGeluBackwardV2")]:
        assert steps[name]["close"] and steps[name]["queue_clean"] and steps[name]["aclnn"] == {api: 4}


@pytest.mark.arch_independent
@pytest.mark.ascend950
def test_soc_without_the_kernel_and_no_cpu_fallback(backend):
    steps, warnings = run_scenario("no_kernel_strict", NPU_FAKE_SOC=ASCEND950,
                                   NPU_FAKE_NO_KERNEL="LogitGrad,GroupedBiasAddGrad", NPU_EXT_NO_CPU_FALLBACK="1")
    assert warnings == []
    forbidden = ", and NPU_EXT_NO_CPU_FALLBACK=1 forbids running it on the CPU instead"
    assert steps["logit_grad"] == dict(step="logit_grad", aclnn={"aclnnLogitGrad": 1}, queue_clean=True, error=(
        "npu_ext.logit_grad: " + no_kernel("aclnnLogitGrad", ASCEND950, 1, 561003) + forbidden))
    assert steps["grouped_ends"] == dict(step="grouped_ends", aclnn={"aclnnGroupedBiasAddGrad": 2}, queue_clean=True,
                                         error="npu_ext.grouped_bias_add_grad: " +
                                         no_kernel("aclnnGroupedBiasAddGrad", ASCEND950, 2, 561000) + forbidden)
    assert steps["softmax"]["close"] and steps["softmax"]["aclnn"] == {"aclnnScaledMaskedSoftmaxBackward": 4}


# torch_npu 2.13 rejects the Ascend910_95xx names at its initialisation ("Unsupported soc version"): the real runtime
# runs the current names only; the stand-in also the older ones (soc_family() knows both).
@pytest.mark.ascend950
@pytest.mark.parametrize("soc", [ASCEND950, "Ascend950DT_9591"] + (
    ["Ascend910_9589", "Ascend910_957c"] if BACKEND is npu_backend.Standin else []))
@pytest.mark.arch_independent
def test_ascend950(backend, soc):
    """Ascend950 under its current names and the Ascend910_95xx names of older toolchains: every operator runs on
    the NPU (bf16 prelu included: ASCEND950 lies inside aclnnPreluBackward's ASCEND910B..ASCEND910E range) and
    gives the CPU kernel's results, NaN positions included (logit_grad with NaN x; prelu's grad_weight terms
    rounded to the dtype, as on A2/A3). The one documented difference (docs/operators.md, "Semantics notes"): the Ascend950
    PReluGradUpdate has no dx * 0 term, so an infinite grad_input leaves grad_weight finite there."""
    steps, warnings = run_scenario("ascend950", NPU_FAKE_SOC=soc)
    assert warnings == []
    for name in ["softmax", "logit_grad", "logit_nan", "grouped_counts", "grouped_ends", "gelu_bf16", "prelu_bf16",
                 "prelu_fp32", "prelu_bf16_rounding", "prelu_fp16_rounding"]:
        assert steps[name]["close"] and steps[name]["queue_clean"] and steps[name]["aclnn"], steps[name]
    for name in ["logit_grad", "logit_nan", "prelu_bf16_rounding", "prelu_fp16_rounding"]:
        assert steps[name]["equal"], steps[name]
    assert steps["prelu_bf16_rounding"]["got"] == [[1 + 2**-7, -(1 + 2**-6)], [0.0]]
    # the SoC difference: grad_weight finite on Ascend950, NaN on A2/A3 and on the CPU
    assert not steps["prelu_inf_grad_output"]["equal"]
    assert steps["prelu_inf_grad_output"]["got"] == [[math.inf, 0.25], [-1.0]]
    assert not steps["prelu_fp16_overflow"]["equal"]
    assert steps["prelu_fp16_overflow"]["got"] == [[math.inf], [-300.0]]


@pytest.mark.arch_independent
def test_probe_is_refused_during_graph_capture(backend):
    """The one-time probe synchronises the device: not possible while the stream is captured into a graph, so a
    first call there is a clear error; after a call outside the capture, the operator is captured as usual."""
    steps, warnings = run_scenario("probe_captured")
    assert warnings == []
    assert steps["logit_grad_captured"] == dict(step="logit_grad_captured", aclnn={}, queue_clean=True, error=(
        "npu_ext.logit_grad: the one-time probe of aclnnLogitGrad's kernel on this device needs the host, which is "
        "not possible while the NPU stream is being captured into a graph (aclgraph, torch.compile "
        "mode=\"reduce-overhead\"): call it outside the captured region"))
    assert steps["logit_grad"] == dict(step="logit_grad", equal=True, close=True, aclnn={"aclnnLogitGrad": 4},
                                       queue_clean=True)


def test_each_entry_point_is_probed_once(backend):
    """In this process every entry point was probed by the fixture: later calls make no probe (2 calls each, no
    synchronisation)."""
    syncs = backend.device_syncs()
    backend.reset()
    x = torch.rand(3, 4)
    npu(ops.logit_grad.default, x, x, 0.1)
    npu(ops.grouped_bias_add_grad.default, x, torch.tensor([1, 2]), 1)
    assert backend.aclnn_calls() == {"aclnnLogitGrad": 2, "aclnnGroupedBiasAddGradV2": 2}
    assert backend.device_syncs() == syncs


def test_host_work_is_refused_during_graph_capture(backend):
    """aclgraph (torch.compile mode="reduce-overhead") captures the NPU stream: a host copy of group_idx would
    synchronise it and a replay would not re-validate new values, so it is a clear error; ops without host work
    are captured as usual."""
    gy, idx = torch.randn(10, 4), torch.tensor([3, 3, 10])
    gy3 = torch.randn(3, 4, 5)
    x, dy = logit_inputs(torch.float32)  # before the capture: torch_npu refuses a new seed while capturing
    backend.set_capturing(True)
    try:
        with pytest.raises(RuntimeError) as e:
            npu(ops.grouped_bias_add_grad.default, gy, idx, 0)
        assert str(e.value).splitlines()[0] == (
            "npu_ext.grouped_bias_add_grad: validating group_idx (aclnn checks none of its values) needs the host, "
            "which is not possible while the NPU stream is being captured into a graph (aclgraph, torch.compile "
            "mode=\"reduce-overhead\"): call it outside the captured region")
        assert_close(npu(ops.grouped_bias_add_grad.default, gy3, None, 0), ops.grouped_bias_add_grad(gy3, None, 0))
        assert_close(npu(ops.logit_grad.default, x, dy, -1.0), ops.logit_grad(x, dy, -1.0))
    finally:
        backend.set_capturing(False)
    assert_close(npu(ops.grouped_bias_add_grad.default, gy, idx, 0), ops.grouped_bias_add_grad(gy, idx, 0))


# ----------------------------------------------------------------------------------------------------------
# The status report (npu_ext::_npu_status, shown by python -m torch_ext).
def aclnn_layer():
    """The report's 'aclnn calls:' line for the torch_npu the NPU sources were built against (csrc/core/npu/
    torch_npu_compat.cpp: op-plugin's extension API where its headers ship it; the aarch64 stand-in declares 2.13's
    API)."""
    if BACKEND is npu_backend.FakeCann:
        import importlib.metadata

        major, minor = (int(v) for v in importlib.metadata.version("torch-npu").split(".")[:2])
        release = major * 100 + minor
        extension = npu_backend.op_api_extension()
    else:
        release, extension = 213, True
    if extension and release >= 213:
        return "aclnn calls: torch_npu's op-plugin extension API (executor cache, deterministic level, task queue)"
    if extension:
        return "aclnn calls: torch_npu's op-plugin extension API (executor cache, deterministic setting, task queue)"
    return ("aclnn calls: CANN's C API with torch_npu's task queue (OpCommand::RunOpApiV2; this torch_npu ships no "
            "op-plugin extension API; no executor cache)")


def test_status_report_in_show_config(backend):
    text = torch_ext.show_config()
    assert ("NPU kernels: loaded (torch_ext._C_npu)" if BACKEND is npu_backend.FakeCann
            else "NPU kernels: torch_ext._C_npu not loaded (") in text
    assert f"  SoC: Ascend910B3 (Atlas A2)\n  {aclnn_layer()}\n  CPU fallback: allowed, warned once per operator\n" in text
    for op, api in [("gelu_backward_v2", "aclnnGeluBackwardV2"), ("grouped_bias_add_grad", "aclnnGroupedBiasAddGrad"),
                    ("grouped_bias_add_grad", "aclnnGroupedBiasAddGradV2"), ("logit_grad", "aclnnLogitGrad"),
                    ("prelu_backward", "aclnnPreluBackward"),
                    ("scaled_masked_softmax_backward", "aclnnScaledMaskedSoftmaxBackward")]:
        assert f"\n  {op}: {api} found; " in text, api
    npu(ops.logit_grad.default, torch.rand(3), torch.randn(3), 0.1)  # probes aclnnLogitGrad on this "device"
    assert f"logit_grad: aclnnLogitGrad found; device {backend.device_index}: kernel present, runs on the NPU" in ops._npu_status()


@pytest.mark.arch_independent
@pytest.mark.ascend950
def test_status_report_without_kernels(backend):
    """What a user sees before filing a bug: a missing entry point and a SoC without the kernel, each with the
    reason and '-> CPU fallback'."""
    steps, _ = run_scenario("missing", missing="aclnnLogitGrad,aclnnGroupedBiasAddGradV2")
    status = steps["status"]["text"].splitlines()
    assert ("logit_grad: aclnnLogitGrad: is not in this CANN's operator libraries (aclnnLogitGradGetWorkspaceSize "
            "not found) -> CPU fallback") in status
    assert (f"grouped_bias_add_grad: aclnnGroupedBiasAddGrad found; device {backend.device_index}: kernel present, runs on the NPU"
            in status)
    steps, _ = run_scenario("no_kernel_strict", NPU_FAKE_SOC=ASCEND950,
                            NPU_FAKE_NO_KERNEL="LogitGrad,GroupedBiasAddGrad", NPU_EXT_NO_CPU_FALLBACK="1")
    status = steps["status"]["text"].splitlines()
    assert status[:3] == ["SoC: Ascend950PR_9579 (Ascend950)", aclnn_layer(),
                          "CPU fallback: an error (NPU_EXT_NO_CPU_FALLBACK=1)"]
    assert (f"logit_grad: aclnnLogitGrad found; device {backend.device_index}: " + no_kernel("aclnnLogitGrad", ASCEND950, 1, 561003)
            .split(" ", 1)[1] + " -> CPU fallback") in status
