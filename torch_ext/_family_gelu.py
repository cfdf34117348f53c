"""gelu: ``torch_ext.gelu`` and ``torch_ext.nn.GELU``, whose gradient is ``npu_ext.gelu_backward_v2``; the
autocast rule of ``npu_ext.gelu``, its torchair decomposition and its ``--check`` cases. Its C++: csrc/ops/gelu/."""

import math

import torch

from . import _C, _autocast, _check, _decompositions, nn
from . import functional as F
from ._check import Case, uniform
from .functional import _dynamo_compiling, _ops, _tf_unary


@F._export
def gelu(input: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """GELU: ``x * Phi(x)`` (``approximate="none"``, the erf form) or ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3)))`` (``"tanh"``), like ``torch.nn.functional.gelu``.

    input: fp16, bf16, fp32 (fp64 off the NPU), any shape; 16-bit inputs are computed in fp32 and rounded once.
    Devices: CPU (vectorized kernel); NPU and any other device: ATen ops (csrc/ops/<family>/composite.cpp).
    Backward: ``npu_ext.gelu_backward_v2(grad, input, approximate)`` (aclnnGeluBackwardV2 on an NPU).
    """
    if not _dynamo_compiling() and not _tf_unary(input) and type(approximate) is str:
        return _C._gelu(input, approximate)
    return _ops.gelu(input, approximate)


@nn._export(replaces=torch.nn.GELU)
class GELU(torch.nn.GELU):
    """Drop-in for ``torch.nn.GELU(approximate="none")``; backward: npu_ext.gelu_backward_v2."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``torch_ext.gelu(input, self.approximate)``."""
        return F.gelu(input, approximate=self.approximate)


# Autocast: one floating input, so gelu runs in its dtype (no cast, like F.gelu under CPU autocast).
_autocast.input_dtype("gelu")


# ---------------------------------------------------------------------------------------------------------------
# torchair's GE graph mode: ATen's CPU formulas (at::gelu, which composite.cpp calls on the fp32 input).
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_TANH_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5  # sqrt(2 / pi)
_TANH_KAPPA = 0.044715


@_decompositions.decomposition(_ops.gelu.default,
                               {"aten.add.Tensor", "aten.erf.default", "aten.mul.Tensor", "aten.tanh.default"})
def _decomposed(self, approximate="none"):
    # Not aten.gelu: torchair converts it to GE's Gelu, the tanh approximation, whatever `approximate` says.
    x = _decompositions.opmath(self)
    if approximate == "tanh":
        y = 0.5 * x * (1 + torch.tanh(_TANH_BETA * (x + _TANH_KAPPA * (x * x * x))))
    else:
        y = x * 0.5 * (1 + torch.erf(x * _SQRT1_2))
    return _decompositions.finish(y, self.dtype)


# ---------------------------------------------------------------------------------------------------------------
# python -m torch_ext --check
@_check.declare("backward")
def _backward_cases(dtype):
    d = _check.dtype_name(dtype)
    return [Case(f"gelu_backward_v2 approximate={a} {d}",
                 lambda gen, dt=dtype: (uniform(gen, (8, 37), -3, 3, dt), uniform(gen, (37, 8), -6, 6, dt)),
                 lambda g, xt, a=a: [("grad_input", _ops.gelu_backward_v2(g, xt.t(), a))])  # x transposed
            for a in ("none", "tanh")]


@_check.declare("function")
def _function_cases(dtype):
    d = _check.dtype_name(dtype)
    return [Case(f"torch_ext.gelu approximate={a} forward+backward {d}",
                 lambda gen, dt=dtype: (uniform(gen, (8, 37), -6, 6, dt),),
                 lambda x, a=a: _check.autograd(gelu, "input", x, approximate=a))
            for a in ("none", "tanh")]


@_check.declare("special")
def _special_cases():
    def run(g, x):
        return [(f"gelu_backward_v2 {a}", _ops.gelu_backward_v2(g, x, a)) for a in ("none", "tanh")]

    def inputs(gen):
        return (torch.tensor([1.0, math.inf, -math.inf, math.inf, math.nan, 1.0, 0.0, 1e30]),
                torch.tensor([math.nan, -1.0, 0.0, 1.0, 2.5, -2.5, 1.0, 0.5]))

    return [Case("special values: gelu_backward_v2 NaN/inf float32", inputs, run)]
