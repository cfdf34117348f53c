"""What the NPU-path tests share (tests/npu/test_npu_path.py, test_npu_path_abi.py, test_npu_path_machine.py): the
harness (tests/support/npu_backend.py: the real torch_npu runtime on the fake CANN, or the host stand-in under the aarch64
emulation), one instance per process with every aclnn entry point probed once, and the layouts, tolerances and
comparisons of their cases. The `backend` fixture is imported by each of those files."""

import math

import pytest
import torch

from torch_ext.testing import samples, tolerances

import npu_backend

BACKEND, _WHY_NOT = npu_backend.which()
SKIP = pytest.mark.skipif(BACKEND is None, reason=_WHY_NOT)

ops = torch.ops.npu_ext
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
LAYOUTS = ["contiguous", "transposed", "offset", "strided"]


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
    for info in samples.OPS.values():  # each family's probe call (OpInfo.probe)
        info.probe(npu)


def npu(overload, *args, **kwargs):
    """Runs the NPU kernel of `overload` on CPU test tensors (see tests/support/npu_backend.py); CPU results."""
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
    torch.testing.assert_close(actual, expected, equal_nan=True, **tolerances.close(tolerances.MODEL, expected.dtype))


def nan_like(t):
    return torch.full_like(t, float("nan"))


def noncontiguous_out(shape, dtype):
    """A NaN-filled output with transposed strides and a storage offset."""
    shape = list(shape)
    big = torch.full((math.prod(shape) + 3,), float("nan"), dtype=dtype)
    return big[3:].view(shape[::-1]).permute(list(range(len(shape)))[::-1])


def prelu_inputs(dtype, self_shape=(4, 3, 5), weight_shape=(3,), g_shape=None):
    torch.manual_seed(4)
    x = torch.randn(self_shape)
    x.view(-1)[::7] = 0.0  # x == 0 takes the x <= 0 branch
    x = x.to(dtype)
    g = torch.randn(g_shape or self_shape).to(dtype)
    w = torch.rand(weight_shape).to(dtype)
    return g, x, w


def assert_same(actual, expected):
    """Equal values, NaN exactly where expected has NaN (and the same dtype and shape)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


def softmax_inputs(dtype, shape=(2, 3, 4, 16), mask_shape=(2, 3, 4, 16), scale=0.5):
    torch.manual_seed(8)
    x = torch.randn(shape)
    mask = torch.rand(mask_shape) < 0.3
    y = torch.softmax((x * scale).masked_fill(mask, -10000.0), dim=-1)
    g = torch.randn(shape)
    return g.to(dtype), y.to(dtype), mask


def logit_inputs(dtype, shape=(6, 7)):
    torch.manual_seed(9)
    x = torch.rand(shape) * 1.4 - 0.2  # some values outside [0, 1]
    x.view(-1)[:6] = torch.tensor([0.0, 1.0, 0.05, 0.95, math.nan, math.inf])  # NaN x: the fill (0 or NaN)
    dy = torch.randn(shape)
    return x.to(dtype), dy.to(dtype)
