"""prelu / prelu_backward: the sample table's entry (variants "channel": C weights, "scalar": one weight), the float64
oracle, and the cases where the package follows the Atlas A2/A3 kernel rather than the plain formula."""

import math

import torch
import torch.nn.functional as F

from torch_ext.testing.opinfo import (
    OpInfo, broadcastable_to, f64, leaf, nbytes, ops, rand, random_shape, second, spread, torch_ext)
from torch_ext.testing.opinfo import cache_rand
from torch_ext.testing.opinfo import zeros as t
from torch_ext.testing.inputs import make


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


def prelu(x, weight):
    """The forward: x where x > 0, else w_c x (channel c = dim 1; one weight for every element)."""
    x, w = x.to(f64), weight.to(f64)
    w_b = w.reshape(()) if w.numel() == 1 else w.reshape([1, -1] + [1] * (x.dim() - 2))
    return torch.where(x > 0, x, w_b * x)


SHAPES = {"tiny": (3, 5, 4), "test": (4, 6, 5, 3), "small": (8, 32, 16, 16), "medium": (16, 64, 32, 32),
          "large": (16, 64, 64, 64), "256": (4, 4, 4, 4), "4096": (4, 16, 8, 8)}


def _make(dtype, size, variant, gen, layout="contiguous"):
    shape = SHAPES[size]
    x = rand(shape, dtype, -3, 3, gen, layout)
    g = rand(shape, dtype, -3, 3, gen, second(size, layout, "transposed" if layout == "contiguous" else "contiguous"))
    w = rand([shape[1] if variant == "channel" else 1], dtype, -1, 1, gen)
    return (g, x, w), {}


def _range(dtype, gen, variant="channel"):
    # x <= 0 and g > 0 everywhere: the grad_weight sums have no cancellation, so their relative error is
    # meaningful. Each channel of x has its own binade, spread over the normal range (short of the top, so
    # that a channel's sum of 32 products with g in [1, 2) stays finite): grad_weight spans the range too.
    fi = torch.finfo(dtype)
    lo, hi = int(math.log2(fi.tiny)), int(math.log2(fi.max)) - 7
    c = 256
    e = torch.linspace(lo, hi, c, dtype=f64).round().reshape(1, c, 1)
    x = -((1 + torch.rand((8, c, 4), generator=gen, dtype=f64)) * torch.pow(2.0, e)).to(dtype)
    g = rand((8, c, 4), dtype, 1, 2, gen)
    w = spread(c if variant == "channel" else 1, dtype, gen)
    if variant == "scalar":  # one weight: one sum over everything, of a single channel (C = 1)
        x, g = x[:, c // 2:c // 2 + 1].contiguous(), g[:, c // 2:c // 2 + 1].contiguous()
    return (g, x, w), {}


# prelu_backward where the package follows the Atlas A2/A3 kernel rather than the plain formula (docs/operators.md,
# "Semantics notes"), with the results written out: (id, dtype, self, grad_output, weight, grad_input, grad_weight).
# Values are exact in every dtype used; the plain formula's grad_weight is in the comment ("plain").
_INF, _NAN = math.inf, math.nan
DEVICE_CASES = [
    # an infinite grad_output where x > 0: grad_input inf, grad_weight NaN (plain: -1)
    ("inf_grad_output", torch.float32, [1.0, -1.0], [_INF, 1.0], [0.25], [_INF, 0.25], [_NAN]),
    # fp16: w g = 90000 overflows when grad_input is stored: grad_weight NaN (plain: -300)
    ("fp16_grad_input_overflow", torch.float16, [-1.0], [300.0], [300.0], [_INF], [_NAN]),
    # x = +inf: its term is 0 inf g = NaN (plain: channel 0 sums to 0)
    ("x_plus_inf", torch.float32, [[_INF, -1.0], [1.0, -2.0]], [[1.0, 1.0], [1.0, 1.0]], [0.5, 0.5],
     [[1.0, 0.5], [1.0, 0.5]], [_NAN, -3.0]),
    # a non-finite weight: grad_input (1 + 0 w) g = NaN where x > 0, so its channel's grad_weight NaN (plain: g, 0)
    ("inf_weight", torch.float32, [[1.0, -1.0], [2.0, -2.0]], [[1.0, 1.0], [1.0, 1.0]], [_INF, 0.5],
     [[_NAN, 0.5], [_NAN, 0.5]], [_NAN, -3.0]),
    ("nan_weight", torch.bfloat16, [[-1.0, 3.0], [2.0, -2.0]], [[1.0, 1.0], [1.0, 1.0]], [_NAN, 0.5],
     [[_NAN, 1.0], [_NAN, 0.5]], [_NAN, -2.0]),
    # each term rounded to the dtype before the fp32 sum: -(1 + 2^-7)^2 -> -(1 + 2^-6) in bf16 cancels
    # (-1)(-(1 + 2^-6)) exactly (plain: -2^-14)
    ("bf16_term_rounding", torch.bfloat16, [-(1 + 2**-7), -1.0], [1 + 2**-7, -(1 + 2**-6)], [1.0],
     [1 + 2**-7, -(1 + 2**-6)], [0.0]),
    ("fp16_term_rounding", torch.float16, [-(1 + 2**-10), -1.0], [1 + 2**-10, -(1 + 2**-9)], [1.0],
     [1 + 2**-10, -(1 + 2**-9)], [0.0]),  # plain: -2^-20
    # fp16 terms -65536 and +65536 each overflow before the sum: inf - inf (plain: 0)
    ("fp16_term_overflow", torch.float16, [-256.0, -256.0], [256.0, -256.0], [2**-10], [0.25, -0.25], [_NAN]),
]


def _random(pick, dtype, variant):
    shape = random_shape(pick, 5)
    c = shape[1] if len(shape) > 1 else 1
    if variant == "channel" and c != 1:
        w_shape = pick.choice([[c], [c, 1, 1][: pick.int(1, 3)] if c else [c]])
    else:
        w_shape = pick.choice([[1], [], [1, 1]])
    x = pick.tensor(shape, dtype, -3, 3)
    g = pick.tensor(broadcastable_to(pick, shape), dtype, -3, 3)
    return (g, x, pick.tensor(w_shape, dtype, -1, 1)), {}


def _function_inputs(dtype, size, variant, gen):
    shape = SHAPES[size]
    return [rand(shape, dtype, -3, 3, gen), rand([shape[1] if variant == "channel" else 1], dtype, -0.5, 0.5, gen)], {}


def _probe(npu):
    x, w = torch.rand(2, 3), torch.rand(3)
    npu(ops.prelu_backward.default, x, x, w)


def _bench(dtype, size, inductor=False):
    (g, x, w), _ = _make(dtype, size, "channel", torch.Generator().manual_seed(3))
    C = x.shape[1]
    w_view = w.view(1, C, 1, 1)

    def aten_prelu_backward():
        # What F.prelu's autograd runs: _prelu_kernel_backward on the broadcast weight view, whose grad is
        # then reduced to the weight's shape.
        gi, gw = torch.ops.aten._prelu_kernel_backward(g, x, w_view)
        return gi, gw.sum_to_size(w_view.shape).view(C)

    return dict(shape=x.shape, numel=x.numel(), bytes=3 * nbytes(x) + 2 * nbytes(w),
                ext=lambda: ops.prelu_backward(g, x, w), baselines={"aten._prelu_kernel_backward+sum": aten_prelu_backward})


def _count_cases(dt, dev):
    return [("prelu", lambda: {"x": torch.randn(8, 16, 128).to(dt).to(dev).requires_grad_(),
                               "w": torch.rand(16).to(dt).to(dev).requires_grad_()},
             lambda x, w: torch_ext().prelu(x, w))]


def _errors(err, expect):
    expect(err(lambda d: ops.prelu_backward(t(2, 3, device=d), t(2, 3, dtype=torch.int32, device=d), t(3, device=d))),
           """npu_ext.prelu_backward: self must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int32""")
    expect(err(lambda d: ops.prelu_backward(t(2, 3, dtype=torch.float16, device=d), t(2, 3, device=d), t(3, device=d))),
           """npu_ext.prelu_backward: grad_output must have the same dtype as self (torch.float32), but got torch.float16""")
    expect(err(lambda d: ops.prelu_backward(t(2, 3, device=d), t(2, 3, device=d), t(3, dtype=torch.float64, device=d))),
           """npu_ext.prelu_backward: weight must have the same dtype as self (torch.float32), but got torch.float64""")
    expect(err(lambda d: ops.prelu_backward(t(2, 3, device=d), t(2, 3, device=d), t(2, device=d))),
           """npu_ext.prelu_backward: weight must have 1 or 3 elements (the size of dimension 1 of self), but got 2""")
    expect(err(lambda d: ops.prelu_backward(t(5, device=d), t(5, device=d), t(5, device=d))),
           """npu_ext.prelu_backward: weight must have 1 element (self has a single channel), but got 5""")
    expect(err(lambda d: ops.prelu_backward(t(2, 4, device=d), t(2, 3, device=d), t(3, device=d))),
           """npu_ext.prelu_backward: grad_output of shape [2, 4] must broadcast to the shape of self [2, 3]""")
    expect(err(lambda d: ops.prelu_backward(t(2, 2, 3, device=d), t(2, 3, device=d), t(3, device=d))),
           """npu_ext.prelu_backward: grad_output of shape [2, 2, 3] must broadcast to the shape of self [2, 3]""")
    expect(err(lambda d: ops.prelu_backward(t(*[1] * 9, device=d), t(*[1] * 9, device=d), t(1, device=d))),
           """npu_ext.prelu_backward: self must have at most 8 dimensions, but got 9""")
    expect(err(lambda d: ops.prelu_backward.out(t(2, 3, device=d), t(2, 3, device=d), t(3, device=d),
                                                grad_input=t(2, 3, device=d), grad_weight=t(1, device=d))),
           """npu_ext.prelu_backward: output grad_weight must have shape [3], but got [1]""")


# the forward op's samples (tests/ops/test_forward.py: opcheck, the composite against the CPU kernel)
FORWARD_SAMPLES = (
    lambda: ((make([3, 5, 4], torch.float32, layout="sliced"), make([5], torch.float32)), {}),
    lambda: ((make([3, 5, 4], torch.bfloat16, layout="sliced"), make([1], torch.bfloat16)), {}),
)


# The executor-cache cases of its aclnn entry points (tests/npu/test_npu_cache*.py): variant -> (op, args) on host
# tensors; each variant changes one thing torch_npu must hash, "base" repeats the call.
def _cache_prelu_bwd(variant):
    g, x, w = cache_rand(2, 3, 4), cache_rand(2, 3, 4), cache_rand(3)
    if variant == "shape":
        g, x = cache_rand(2, 3, 5), cache_rand(2, 3, 5)
    elif variant == "dtype":
        g, x, w = g.half(), x.half(), w.half()
    elif variant == "stride":
        x = cache_rand(2, 4, 3).transpose(1, 2)
    elif variant == "weight":
        w = cache_rand(1)
    return torch.ops.npu_ext.prelu_backward, (g, x, w)


def _cache_prelu(variant):
    x, w = cache_rand(2, 3, 4), cache_rand(3)
    if variant == "shape":
        x = cache_rand(2, 3, 5)
    elif variant == "dtype":
        x, w = x.half(), w.half()
    elif variant == "stride":
        x = cache_rand(2, 4, 3).transpose(1, 2)
    elif variant == "weight":
        w = cache_rand(1)
    return torch.ops.npu_ext.prelu, (x, w)


INFO = OpInfo(
    name="prelu_backward", variants=("channel", "scalar"), outputs=("grad_input", "grad_weight"),
    reference=prelu_backward, make=_make, range_make=_range, random=_random, forward="prelu", forward_reference=prelu,
    function=lambda x, w: torch_ext().prelu(x, w), native=F.prelu, function_inputs=_function_inputs,
    gradcheck=(
        ("prelu", lambda x, w: torch_ext().prelu(x, w), F.prelu, lambda: [leaf((3, 4, 5), -2, 2), leaf((4,), -0.5, 0.5)]),
        ("prelu_scalar_w", lambda x, w: torch_ext().prelu(x, w), F.prelu,
         lambda: [leaf((3, 4, 2, 2), -2, 2), leaf((1,), 0.1, 0.4)]),
    ),
    backward_gradcheck=(
        ("prelu_backward", lambda g, x, w: ops.prelu_backward(g, x, w),
         lambda: [leaf((3, 4, 5), -2, 2), leaf((3, 4, 5), -2, 2), leaf((4,), -0.5, 0.5)], True),
        ("prelu_backward_bcast_scalar", lambda g, x, w: ops.prelu_backward(g, x, w),
         lambda: [leaf((4, 1), -2, 2), leaf((3, 4, 5), -2, 2), leaf((1,), -0.5, 0.5)], False),
    ),
    aclnn=("aclnnPreluBackward",), probe=_probe, bench=(("prelu_backward", _bench),),
    training=("channel", "F.prelu", 5, True), count_cases=_count_cases, errors=_errors,
    forward_samples=FORWARD_SAMPLES,
    cache_cases={"aclnnPreluBackward": (_cache_prelu_bwd, ("shape", "dtype", "stride", "weight"), True),
                 "aclnnPrelu": (_cache_prelu, ("shape", "dtype", "stride", "weight"), True)},
    kernel_counts={"prelu": (1, 1)},
)
