"""The NPU path on a real Ascend NPU: npu results compared with the CPU kernels.

Runs only where torch_npu is installed and importable (CANN set up), an NPU is visible and torch_ext loaded
its NPU kernels (torch_ext._C_npu, built by setup.py when torch_npu is installed). Everywhere else the whole
module is skipped: nothing here has run on hardware yet. tests/test_npu_standin.py runs the same NPU sources
against a host stand-in of aclnn instead.
"""

import importlib
import importlib.util
import math

import pytest
import torch

import torch_ext


def _npu_available():
    if importlib.util.find_spec("torch_npu") is None:  # never import torch_npu without it (needs CANN)
        return False, "torch_npu is not installed"
    try:
        importlib.import_module("torch_npu")
    except Exception as e:  # pragma: no cover - depends on the machine
        return False, f"torch_npu cannot be imported: {e}"
    if not torch.npu.is_available():
        return False, "no NPU device"
    if not torch_ext._npu.LOADED:
        return False, "torch_ext._C_npu is not built/loaded (reinstall torch_ext with torch_npu installed)"
    return True, ""


_AVAILABLE, _REASON = _npu_available()
pytestmark = pytest.mark.skipif(not _AVAILABLE, reason=_REASON)

ops = torch.ops.npu_ext
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2)}


def dev(t):
    return t.to("npu")


def check(npu_result, cpu_result):
    if isinstance(cpu_result, (tuple, list)):
        for a, b in zip(npu_result, cpu_result):
            check(a, b)
        return
    assert npu_result.device.type == "npu"
    torch.testing.assert_close(npu_result.cpu(), cpu_result, equal_nan=True, **TOL[cpu_result.dtype])


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
