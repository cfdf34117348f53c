"""logit / logit_grad: the sample table's entry (variants: eps values) and the float64 oracle."""

import math

import numpy as np
import torch

from torch_ext.testing.opinfo import ELEMENTWISE, OpInfo, f64, leaf, nbytes, ops, rand, random_shape, second, spread, torch_ext
from torch_ext.testing.opinfo import cache_rand
from torch_ext.testing.opinfo import zeros as t
from torch_ext.testing.inputs import make


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


def logit(x, eps=None):
    """The forward: log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given."""
    z = x.to(f64) if eps is None else x.to(f64).clamp(eps, 1 - eps)
    return torch.log(z / (1 - z))


def _make(dtype, size, variant, gen, layout="contiguous"):
    shape = ELEMENTWISE[size]
    eps = float(variant)
    low, high = (-0.2, 1.2) if size == "test" else (0.0, 1.0)  # opcheck (tiny) compares outputs: no NaN
    x = rand(shape, dtype, low, high, gen, layout)
    dy = rand(shape, dtype, -3, 3, gen, second(size, layout, "sliced" if layout == "contiguous" else "contiguous"))
    return (x, dy, eps), {}


def _range(dtype, gen, variant="-1.0"):
    # x over every binade of (0, 1) from the smallest normal up, and its mirror 1 - x; dy over the whole range
    n = 1 << 15
    x = spread(n, dtype, gen, high_exp=-1, sign=+1)
    x = torch.where(torch.rand(n, generator=gen) < 0.5, x, (1 - x.to(f64)).to(dtype))
    dy = spread(n, dtype, gen)
    return (x, dy, float(variant)), {}


def _random(pick, dtype, variant):
    shape = random_shape(pick, 4)
    eps = pick.choice([float(variant), -1.0, 0.0, 1e-6, 0.2, 0.5, 1.0, 2.0, math.inf, math.nan])
    return (pick.tensor(shape, dtype, -0.2, 1.2), pick.tensor(shape, dtype, -3, 3), eps), {}


def _function_inputs(dtype, size, variant, gen):
    eps = float(variant)
    low, high = (0.01, 0.99) if eps < 0 else (0.0, 1.0)
    return [rand(ELEMENTWISE[size], dtype, low, high, gen)], {"eps": None if eps < 0 else eps}


def _probe(npu):
    x = torch.rand(2, 3)
    npu(ops.logit_grad.default, x, x, -1.0)


def _bench(dtype, size, inductor=False):
    (x, dy, eps), _ = _make(dtype, size, "1e-06", torch.Generator().manual_seed(2))
    return dict(shape=x.shape, numel=x.numel(), bytes=3 * nbytes(x), ext=lambda: ops.logit_grad(x, dy, eps),
                baselines={"aten.logit_backward": lambda: torch.ops.aten.logit_backward(dy, x, eps)})


def _count_cases(dt, dev):
    return [("logit", lambda: {"x": (torch.rand(64, 256) * 0.9 + 0.05).to(dt).to(dev).requires_grad_()},
             lambda x: torch_ext().logit(x, 1e-6))]


def _errors(err, expect):
    expect(err(lambda d: ops.logit_grad(t(3, dtype=torch.int64, device=d), t(3, device=d))),
           """npu_ext.logit_grad: x must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int64""")
    expect(err(lambda d: ops.logit_grad(t(3, device=d), t(3, dtype=torch.bfloat16, device=d))),
           """npu_ext.logit_grad: dy must have the same dtype as x (torch.float32), but got torch.bfloat16""")
    expect(err(lambda d: ops.logit_grad(t(3, device=d), t(1, device=d))),
           """npu_ext.logit_grad: dy must have the shape of x [3], but got [1]""")
    expect(err(lambda d: ops.logit_grad(t(*[1] * 9, device=d), t(*[1] * 9, device=d))),
           """npu_ext.logit_grad: x must have at most 8 dimensions, but got 9""")
    expect(err(lambda d: ops.logit_grad.out(t(3, device=d), t(3, device=d), dx=t(3, dtype=torch.float64, device=d))),
           """npu_ext.logit_grad: output dx must have dtype torch.float32, but got torch.float64""")


def _eps_sides():
    # values on both sides of the clamp, away from the kinks at 0.2 / 0.8 (gradcheck needs smoothness)
    return [torch.cat([leaf((12,), 0.25, 0.75, requires_grad=False), leaf((6,), 0.01, 0.15, requires_grad=False),
                       leaf((6,), 0.85, 0.99, requires_grad=False)]).reshape(4, 6).requires_grad_()]


# the forward op's samples (tests/ops/test_forward.py: opcheck, the composite against the CPU kernel); the second
# with values outside [0, 1], which eps clamps
FORWARD_SAMPLES = (
    lambda: ((make([4, 6], torch.float32, low=0.05, high=0.95),), {}),
    lambda: ((make([4, 6], torch.float16, low=-0.1, high=1.1), 0.1), {}),
)


# The executor-cache cases of its aclnn entry points (tests/npu/test_npu_cache*.py): variant -> (op, args) on host
# tensors; each variant changes one thing torch_npu must hash, "base" repeats the call.
def _cache_logit_bwd(variant):
    x, dy, eps = cache_rand(4, 8, low="unit"), cache_rand(4, 8), -1.0
    if variant == "shape":
        x, dy = cache_rand(4, 16, low="unit"), cache_rand(4, 16)
    elif variant == "dtype":
        x, dy = x.bfloat16(), dy.bfloat16()
    elif variant == "stride":
        x = (torch.rand(8, 4) * 0.9 + 0.05).t()
    elif variant == "eps":
        eps = 0.1
    return torch.ops.npu_ext.logit_grad, (x, dy, eps)


def _cache_logit(variant):
    x, eps = cache_rand(4, 8, low="unit"), None
    if variant == "shape":
        x = cache_rand(4, 16, low="unit")
    elif variant == "dtype":
        x = x.half()
    elif variant == "stride":
        x = (torch.rand(8, 4) * 0.9 + 0.05).t()
    elif variant == "eps":
        eps = 0.1
    return torch.ops.npu_ext.logit, (x, eps)


INFO = OpInfo(
    name="logit_grad", variants=("-1.0", "0.0", "1e-06", "0.2"), outputs=("dx",), reference=logit_grad,
    make=_make, range_make=_range, random=_random, forward="logit", forward_reference=logit,
    function=lambda x, eps=None: torch_ext().logit(x, eps),
    native=lambda x, eps=None: torch.logit(x, eps), function_inputs=_function_inputs,
    gradcheck=(
        ("logit", lambda x: torch_ext().logit(x), lambda x: torch.logit(x), lambda: [leaf((5, 7), 0.05, 0.95)]),
        ("logit_eps", lambda x: torch_ext().logit(x, 0.2), lambda x: torch.logit(x, 0.2), _eps_sides),
    ),
    backward_gradcheck=(
        ("logit_grad", lambda x, dy: ops.logit_grad(x, dy), lambda: [leaf((4, 5), 0.1, 0.9), leaf((4, 5), -2, 2)], True),
        ("logit_grad_eps", lambda x, dy: ops.logit_grad(x, dy, 0.05),
         lambda: [torch.cat([leaf((10,), 0.1, 0.9, requires_grad=False), leaf((4,), 0.0, 0.04, requires_grad=False)])
                  .requires_grad_(), leaf((14,), -2, 2)], False),
    ),
    aclnn=("aclnnLogitGrad",), probe=_probe, bench=(("logit_grad", _bench),),
    training=("1e-06", "torch.logit", 5, True), count_cases=_count_cases, errors=_errors,
    forward_samples=FORWARD_SAMPLES,
    cache_cases={"aclnnLogitGrad": (_cache_logit_bwd, ("shape", "dtype", "stride", "eps"), False),
                 "aclnnLogit": (_cache_logit, ("shape", "dtype", "stride", "eps"), False)},
    kernel_counts={"logit": (1, 1)},
)
