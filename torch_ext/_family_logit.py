"""logit: ``torch_ext.logit``, whose gradient is ``npu_ext.logit_grad``; the autocast rule of ``npu_ext.logit``, its
torchair decomposition and its ``--check`` cases. Its C++: csrc/ops/logit/."""

import math
import struct

import torch

from . import _C, _autocast, _check, _decompositions
from . import functional as F
from ._check import Case, uniform
from .functional import _dynamo_compiling, _ops, _tf_unary


@F._export
def logit(input: torch.Tensor, eps=None) -> torch.Tensor:
    """``log(z / (1 - z))``, z = input clamped to [eps, 1 - eps] when eps is given, like ``torch.logit``.

    input: fp16, bf16, fp32 (fp64 off the NPU), rank <= 8. Devices: CPU (kernel); NPU and any other: ATen ops.
    Backward: ``npu_ext.logit_grad(input, grad, eps)`` with eps = -1.0 for None (aclnnLogitGrad on an NPU):
    0 outside [eps, 1 - eps] for eps >= 0, NaN outside [0, 1] otherwise.
    """
    if not _dynamo_compiling() and not _tf_unary(input) and (eps is None or type(eps) in (float, int)):
        return _C._logit(input, eps)
    return _ops.logit(input, eps)


# Autocast: one floating input, so logit runs in its dtype (no cast, like torch.logit under CPU autocast).
_autocast.input_dtype("logit")


# ---------------------------------------------------------------------------------------------------------------
# torchair's GE graph mode.
def _round_to(value, dtype):
    """A Python float rounded to the compute dtype (fp32, or fp64 left as it is), as ATen's kernels convert a
    double argument to their scalar type."""
    if dtype == torch.float64:
        return value
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:  # rounds past the largest float
        return math.copysign(math.inf, value)


@_decompositions.decomposition(_ops.logit.default, {"aten.clamp.default", "aten.div.Tensor", "aten.log.default",
                                                    "aten.rsub.Scalar"})
def _decomposed(self, eps=None):
    # aten.logit has no GE converter (it raises NotImplementedError). ATen's CPU kernel: with eps >= 0 (or NaN)
    # x is clamped to [lo, hi], lo = eps and hi = 1 - lo in the compute dtype; then log(x / (1 - x)).
    x = _decompositions.opmath(self)
    if eps is not None and not eps < 0:
        lo = _round_to(eps, x.dtype)
        hi = _round_to(1.0 - lo, x.dtype)  # = 1 - lo in fp32: 1 - lo is exact in double, or rounds the same
        x = torch.clamp(x, lo, hi)
    return _decompositions.finish(torch.log(x / (1 - x)), self.dtype)


# ---------------------------------------------------------------------------------------------------------------
# python -m torch_ext --check
@_check.declare("backward")
def _backward_cases(dtype):
    d = _check.dtype_name(dtype)
    out = []
    for eps in (-1.0, 0.0, 0.1):
        out.append(Case(
            f"logit_grad eps={eps} {d}",
            lambda gen, dt=dtype: (uniform(gen, (8, 31), -0.2, 1.2, dt), uniform(gen, (8, 31), -3, 3, dt)),
            lambda x, dy, e=eps: [("dx", _ops.logit_grad(x, dy, e))]))
    return out


@_check.declare("function")
def _function_cases(dtype):
    return [Case(
        f"torch_ext.logit eps=0.05 forward+backward {_check.dtype_name(dtype)}",
        lambda gen, dt=dtype: (uniform(gen, (8, 37), 0, 1, dt),),
        lambda x: _check.autograd(logit, "input", x, eps=0.05))]


@_check.declare("strided")
def _strided_out_cases():
    def logit_out(x, dy):
        storage = torch.full((2 * 8 * 31 + 6,), _check.SENTINEL, device=x.device)
        dx = storage[3:3 + 8 * 31].view(31, 8).t()  # transposed (8, 31) view inside a larger storage
        _ops.logit_grad.out(x, dy, 0.05, dx=dx)
        return [("dx storage (transposed view, sentinels outside it)", storage)]

    return [Case("logit_grad.out into a transposed dx float32",
                 lambda gen: (uniform(gen, (8, 31), -0.2, 1.2), uniform(gen, (8, 31), -3, 3)), logit_out)]


@_check.declare("special")
def _special_cases():
    def run(x, dy):
        return [(f"dx eps={eps}", _ops.logit_grad(x, dy, eps)) for eps in (-1.0, 0.0, 0.1)]

    nan, inf = math.nan, math.inf
    return [Case("special values: logit_grad NaN/inf x and dy float32",
                 lambda gen: (torch.tensor([nan, inf, -inf, 0.0, 1.0, 0.5, 2.0, -1.0, 1e-7, 0.3]),
                              torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, inf, 1.0, 1.0, nan, -inf])), run)]
