"""Float64 reference implementations of the five operators, written from the operator contract (docs/operators.md,
"The operators one by one"), including where the package deliberately follows the NPU kernels (its "Semantics
notes": logit_grad with a NaN x, prelu_backward's grad_weight).

Nothing here shares code with the package under test: plain torch ops in float64 on the CPU. Every function
takes the operator's inputs (any dtype, any layout) and returns float64 results.
"""

import math

import numpy as np
import torch

f64 = torch.float64


def gelu_backward_v2(grad_output, self, approximate="none"):
    g = grad_output.to(f64)
    x = self.to(f64)
    if approximate == "none":
        # gi = g * (0.5 + 0.5*erf(x/sqrt2) + x * exp(-x^2/2) / sqrt(2*pi)), with 0.5 + 0.5*erf(x/sqrt2) written
        # as 0.5*erfc(-x/sqrt2) (equal; 1 + erf cancels catastrophically in float64 too, below x = -6)
        return g * (0.5 * torch.erfc(-x / math.sqrt(2.0)) + x * torch.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi))
    if approximate == "tanh":
        # exact derivative of 0.5*x*(1+tanh(u)), u = sqrt(2/pi)*(x + 0.044715 x^3)
        k = math.sqrt(2.0 / math.pi)
        u = k * (x + 0.044715 * x**3)
        du = k * (1.0 + 3.0 * 0.044715 * x**2)
        # 1 + tanh(u) = 2 sigmoid(2u) and 1 - tanh(u)^2 = 1 / cosh(u)^2: no cancellation where |tanh(u)| ~ 1
        return g * (torch.sigmoid(2.0 * u) + 0.5 * x * du / torch.cosh(u) ** 2)
    raise ValueError(approximate)


def prelu_backward(grad_output, self, weight):
    x = self.to(f64)
    g = grad_output.to(f64).expand(x.shape)
    w = weight.to(f64)
    channels = x.shape[1] if x.dim() > 1 else 1
    if w.numel() == 1:
        w_b = w.reshape(())
    else:
        w_b = w.reshape([1, channels] + [1] * (x.dim() - 2))
    positive = x > 0  # NaN is not > 0: it takes the x <= 0 branch
    # docs/operators.md, "Semantics notes": the Atlas A2/A3 kernel scales g by (1 + 0 w) where x > 0 (NaN for a
    # non-finite weight), and adds to each grad_weight term x g (0 where x > 0, but NaN for x = +inf: 0 x) zero times
    # grad_input as stored in the dtype: an infinite or NaN grad_input in a channel makes its grad_weight NaN.
    # Each term is rounded to the dtype before the sum (every SoC); the sum itself is exact here.
    grad_input = torch.where(positive, g * (1.0 + 0.0 * w_b), w_b * g)
    stored = grad_input if self.dtype == f64 else grad_input.to(self.dtype).to(f64)
    contrib = torch.where(positive, 0.0 * x, x) * g + 0.0 * stored
    if self.dtype != f64:
        contrib = contrib.to(self.dtype).to(f64)
    if w.numel() == 1:
        grad_weight = contrib.sum()
    else:
        grad_weight = contrib.sum(dim=[d for d in range(x.dim()) if d != 1])
    return grad_input, grad_weight.reshape(weight.shape)


def grouped_bias_add_grad(grad_y, group_idx=None, group_idx_type=0):
    gy = grad_y.to(f64)
    if group_idx is None:
        return gy.sum(dim=1)
    values = [int(v) for v in group_idx.tolist()]
    if group_idx_type == 1:  # per-group counts -> cumulative ends
        values = list(np.cumsum(values)) if values else []
    out = torch.zeros(len(values), gy.shape[1], dtype=f64)
    start = 0
    for j, end in enumerate(values):
        if end > start:
            out[j] = gy[start:end].sum(dim=0)
        start = end
    return out


def causal_mask(s1, s2):
    return torch.triu(torch.ones(s1, s2, dtype=torch.bool), diagonal=1)


def scaled_masked_softmax_backward(grad_output, y, mask, scale=1.0, fix_triu_mask=False):
    g = grad_output.to(f64)
    yy = y.to(f64)
    if fix_triu_mask:
        mask = causal_mask(g.shape[-2], g.shape[-1])
    s = (g * yy).sum(dim=-1, keepdim=True)  # whole row, masked positions included
    out = scale * (g - s) * yy
    return torch.where(mask.expand(g.shape), torch.zeros((), dtype=f64), out)


def logit_grad(x, dy, eps=-1.0):
    xx = x.to(f64)
    d = dy.to(f64)
    value = d / (xx * (1.0 - xx))
    eps32 = np.float32(eps)  # eps is rounded to fp32, as the NPU kernel does (fp64 inputs keep it exact)
    if x.dtype == f64:
        eps32 = np.float64(eps)
    # The quotient is kept only where lo <= x <= hi (the NPU kernel's select, docs/operators.md, "Semantics
    # notes"): an x outside the interval, or NaN (unordered), gets 0 for eps >= 0 and NaN for eps < 0 or NaN.
    if eps32 >= 0:
        lo, hi = float(eps32), float(type(eps32)(1) - eps32)
        kept = (xx >= lo) & (xx <= hi)
        return torch.where(kept, value, torch.zeros((), dtype=f64))
    kept = (xx >= 0) & (xx <= 1)  # eps < 0 or NaN
    return torch.where(kept, value, torch.full((), math.nan, dtype=f64))
