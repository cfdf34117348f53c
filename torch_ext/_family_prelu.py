"""prelu: ``torch_ext.prelu`` and ``torch_ext.nn.PReLU``, whose gradients come from ``npu_ext.prelu_backward``; the
autocast rule of ``npu_ext.prelu``, its torchair decomposition and its ``--check`` cases. Its C++:
csrc/ops/prelu/."""

import math

import torch

from . import _C, _autocast, _check, _decompositions, nn
from . import functional as F
from ._check import Case, uniform
from .functional import _dynamo_compiling, _ops, _tf_variadic


@F._export
def prelu(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """PReLU: ``x > 0 ? x : w_c * x``, like ``torch.nn.functional.prelu``.

    weight: 1 element, or C = input.size(1) elements (1 for a 1-D input), same dtype as input; rank <= 8.
    16-bit inputs are computed in fp32 and rounded once. Devices: CPU (kernel); NPU and any other: ATen ops.
    Backward: ``npu_ext.prelu_backward(grad, input, weight)`` -> (grad_input, grad_weight)
    (aclnnPreluBackward on an NPU).
    """
    if not _dynamo_compiling() and not _tf_variadic(input, weight):
        return _C._prelu(input, weight)
    return _ops.prelu(input, weight)


@nn._export(replaces=torch.nn.PReLU)
class PReLU(torch.nn.PReLU):
    """Drop-in for ``torch.nn.PReLU(num_parameters=1, init=0.25)``; backward: npu_ext.prelu_backward."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``torch_ext.prelu(input, self.weight)``."""
        return F.prelu(input, self.weight)


# Autocast: an activation and a parameter that must share a dtype, both cast to the autocast dtype (as PyTorch
# does for torch.prelu on CPU), so that an fp32 PReLU weight works with a bf16 activation.
_autocast.lower_precision("prelu")


# ---------------------------------------------------------------------------------------------------------------
# torchair's GE graph mode.
@_decompositions.decomposition(_ops.prelu.default, {"aten.gt.Scalar", "aten.mul.Tensor", "aten.where.self"})
def _decomposed(self, weight):
    # x > 0 ? x : w_c * x. Not aten._prelu_kernel (GE's PRelu), whose weight layout rules are not ours:
    # weight may have any shape with 1 or C elements, C = self.size(1).
    x, w = _decompositions.opmath(self), _decompositions.opmath(weight)
    if weight.numel() == 1:
        w = w.reshape([1] * x.dim())
    else:
        w = w.reshape([-1] + [1] * (x.dim() - 2))
    return _decompositions.finish(torch.where(x > 0, x, w * x), self.dtype)


# ---------------------------------------------------------------------------------------------------------------
# python -m torch_ext --check
@_check.declare("backward")
def _backward_cases(dtype):
    d = _check.dtype_name(dtype)
    out = []
    for weights in (3, 1):
        out.append(Case(
            f"prelu_backward {'C weights' if weights > 1 else 'one weight'} {d}",
            lambda gen, dt=dtype, c=weights: (uniform(gen, (4, 3, 17), -3, 3, dt),
                                              uniform(gen, (4, 3, 17), -3, 3, dt), uniform(gen, (c,), -1, 1, dt)),
            lambda g, x, w: list(zip(("grad_input", "grad_weight"), _ops.prelu_backward(g, x, w)))))
    return out


@_check.declare("function")
def _function_cases(dtype):
    return [Case(
        f"torch_ext.prelu forward+backward {_check.dtype_name(dtype)}",
        lambda gen, dt=dtype: (uniform(gen, (4, 3, 17), -3, 3, dt), uniform(gen, (3,), -0.5, 0.5, dt)),
        lambda x, w: _check.autograd(prelu, "input weight", x, w))]


_NAN, _INF = math.nan, math.inf
_ASCEND950 = ("Ascend950", "Ascend910_95")  # SoC name prefixes (older toolchains name Ascend950 Ascend910_95xx)
# prelu_backward where the CPU follows the Atlas A2/A3 kernel (docs/operators.md, "Semantics notes"), and what the
# Ascend950 kernel (no zero terms) gives instead: (label, dtype, self, grad_output, weight, Ascend950 grad_input,
# Ascend950 grad_weight). Every value is exact in its dtype.
_SPECIAL = [
    # A2/A3: grad_weight NaN (an infinite grad_input)
    ("inf grad_output", torch.float32, [1.0, -1.0], [_INF, 1.0], [0.25], [_INF, 0.25], [-1.0]),
    # A2/A3: grad_weight NaN (w g = 90000 overflows fp16 in grad_input)
    ("fp16 grad_input overflow", torch.float16, [-1.0], [300.0], [300.0], [_INF], [-300.0]),
    # A2/A3: channel 0's grad_weight NaN (0 inf)
    ("x = +inf", torch.float32, [[_INF, -1.0], [1.0, -2.0]], [[1.0, 1.0], [1.0, 1.0]], [0.5, 0.5],
     [[1.0, 0.5], [1.0, 0.5]], [0.0, -3.0]),
    # A2/A3: grad_input (1 + 0 w) g NaN where x > 0, channel 0's grad_weight NaN
    ("inf weight", torch.float32, [[1.0, -1.0], [2.0, -2.0]], [[1.0, 1.0], [1.0, 1.0]], [_INF, 0.5],
     [[1.0, 0.5], [1.0, 0.5]], [0.0, -3.0]),
    ("NaN weight", torch.bfloat16, [[-1.0, 3.0], [2.0, -2.0]], [[1.0, 1.0], [1.0, 1.0]], [_NAN, 0.5],
     [[_NAN, 1.0], [1.0, 0.5]], [-1.0, -2.0]),
    # every SoC: the fp16 terms -65536 and +65536 overflow before the fp32 sum: inf - inf
    ("fp16 term overflow", torch.float16, [-256.0, -256.0], [256.0, -256.0], [2**-10], [0.25, -0.25], [_NAN]),
]


@_check.declare("special")
def _special_cases():
    def run(*tensors):
        out = []
        for k, (label, *_rest) in enumerate(_SPECIAL):
            x, g, w = tensors[3 * k:3 * k + 3]
            gi, gw = _ops.prelu_backward(g, x, w)
            out += [(f"{label}: grad_input", gi), (f"{label}: grad_weight", gw)]
        return out

    def inputs(gen):
        return tuple(torch.tensor(v, dtype=dt) for _, dt, x, g, w, *_ in _SPECIAL for v in (x, g, w))

    def ascend950():
        return [(f"{label}: {name}", torch.tensor(v, dtype=dt))
                for label, dt, *_, gi, gw in _SPECIAL for name, v in (("grad_input", gi), ("grad_weight", gw))]

    soc_values = (_ASCEND950, "Ascend950's documented values (its PReluGradUpdate has no zero terms; the CPU "
                  "kernel follows A2/A3: docs/operators.md, Semantics notes)", ascend950)
    return [Case("special values: prelu_backward NaN/inf float32, float16, bfloat16", inputs, run, soc_values)]
