"""gelu / gelu_backward_v2: the sample table's entry (variants: the approximate modes) and the float64 oracle."""

import math

import torch
import torch.nn.functional as F

from torch_ext.testing.opinfo import (
    ELEMENTWISE, OpInfo, broadcastable_to, f64, leaf, nbytes, ops, other_float, rand, random_shape, second, spread,
    torch_ext)
from torch_ext.testing.opinfo import cache_rand, cache_transposed
from torch_ext.testing.opinfo import zeros as t
from torch_ext.testing.inputs import make


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


def gelu(x, approximate="none"):
    """The forward: x Phi(x) with Phi from erfc, and the tanh form as x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715
    x^3) (1 + erf and 1 + tanh lose every digit in the left tail, even in float64)."""
    x = x.to(f64)
    if approximate == "none":
        return x * 0.5 * torch.special.erfc(-x / math.sqrt(2))
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
    return x / (1 + torch.exp(-2 * u))


def _make(dtype, size, variant, gen, layout="contiguous"):
    shape = ELEMENTWISE[size]
    g = rand(shape, dtype, -3, 3, gen, layout)
    x = rand(shape, dtype, -6, 6, gen, second(size, layout, "sliced" if layout == "contiguous" else layout))
    return (g, x), {"approximate": variant}


def _range(dtype, gen, variant="none"):
    # every binade of x, and x uniform over [-14.5, 6], where the output sweeps down through every binade of
    # the normal range (the left tail), so that each output binade holds many values
    x = torch.cat([spread(1 << 15, dtype, gen), rand([1 << 15], dtype, -14.5, 6, gen)])
    g = rand(x.shape, dtype, 1, 2, gen)
    return (g, x), {"approximate": variant}


def _random(pick, dtype, variant):
    shape = random_shape(pick, 4)
    g = pick.tensor(broadcastable_to(pick, shape), dtype, -3, 3)
    x = pick.tensor(broadcastable_to(pick, shape), other_float(pick, dtype), -8, 8)
    return (g, x), {"approximate": variant}


def _function_inputs(dtype, size, variant, gen):
    return [rand(ELEMENTWISE[size], dtype, -5, 5, gen)], {"approximate": variant}


def _probe(npu):
    x = torch.rand(2, 3)
    npu(ops.gelu_backward_v2.default, x, x, "none")


def _bench(approximate):
    def case(dtype, size, inductor=False):
        (g, x), _ = _make(dtype, size, approximate, torch.Generator().manual_seed(1))
        return dict(shape=x.shape, numel=x.numel(), bytes=3 * nbytes(x), memory_bound=False,
                    ext=lambda: ops.gelu_backward_v2(g, x, approximate),
                    baselines={"aten.gelu_backward": lambda: torch.ops.aten.gelu_backward(g, x, approximate=approximate)})
    return case


def _count_cases(dt, dev):
    def x():
        return {"x": torch.randn(64, 256).to(dt).to(dev).requires_grad_()}
    return [("gelu none", x, lambda x: torch_ext().gelu(x)),
            ("gelu tanh", x, lambda x: torch_ext().gelu(x, approximate="tanh"))]


def _errors(err, expect):
    expect(err(lambda d: ops.gelu_backward_v2(t(3, device=d), t(3, device=d), "Tanh")),
           """npu_ext.gelu_backward_v2: approximate must be "none" or "tanh", but got "Tanh\"""")
    expect(err(lambda d: ops.gelu_backward_v2(t(3, dtype=torch.int64, device=d), t(3, device=d))),
           """npu_ext.gelu_backward_v2: grad_output must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int64""")
    expect(err(lambda d: ops.gelu_backward_v2(t(3, device=d), t(3, dtype=torch.bool, device=d))),
           """npu_ext.gelu_backward_v2: self must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.bool""")
    expect(err(lambda d: ops.gelu_backward_v2(t(2, 3, device=d), t(4, 1, device=d))),
           """npu_ext.gelu_backward_v2: grad_output of shape [2, 3] and self of shape [4, 1] do not broadcast""")
    expect(err(lambda d: ops.gelu_backward_v2.out(t(2, 3, device=d), t(3, device=d), grad_input=t(3, device=d))),
           """npu_ext.gelu_backward_v2: output grad_input must have shape [2, 3], but got [3]""")
    expect(err(lambda d: ops.gelu_backward_v2.out(
        t(3, dtype=torch.float16, device=d), t(3, device=d), grad_input=t(3, dtype=torch.float16, device=d))),
           """npu_ext.gelu_backward_v2: output grad_input must have dtype torch.float32, but got torch.float16""")
    # aclnn documents 0-8 dimensions: both inputs, hence the broadcast output too
    expect(err(lambda d: ops.gelu_backward_v2(t(*[1] * 9, device=d), t(1, device=d))),
           """npu_ext.gelu_backward_v2: grad_output must have at most 8 dimensions, but got 9""")
    expect(err(lambda d: ops.gelu_backward_v2(t(1, device=d), t(*[1] * 9, device=d), "tanh")),
           """npu_ext.gelu_backward_v2: self must have at most 8 dimensions, but got 9""")
    expect(err(lambda d: ops.gelu(t(*[1] * 9, device=d))),
           """npu_ext.gelu: self must have at most 8 dimensions, but got 9""")
    assert ops.gelu_backward_v2(t(*[1] * 8, device="meta"), t(*[2] * 8, device="meta")).shape == (2,) * 8


# the forward op's samples (tests/ops/test_forward.py: opcheck, the composite against the CPU kernel)
FORWARD_SAMPLES = (
    lambda: ((make([4, 6], torch.float32, layout="transposed"),), {"approximate": "tanh"}),
    lambda: ((make([4, 6], torch.bfloat16),), {}),
)


# The executor-cache cases of its aclnn entry points (tests/npu/test_npu_cache*.py): variant -> (op, args) on host
# tensors; each variant changes one thing torch_npu must hash, "base" repeats the call.
def _cache_gelu_bwd(variant):
    shape, approximate = (4, 8), "none"
    g, x = cache_rand(*shape), cache_rand(*shape)
    if variant == "shape":
        g, x = cache_rand(4, 16), cache_rand(4, 16)
    elif variant == "dtype":
        g, x = cache_rand(*shape, dtype=torch.bfloat16), cache_rand(*shape, dtype=torch.bfloat16)
    elif variant == "stride":
        x = cache_transposed(*shape)
    elif variant == "approximate":
        approximate = "tanh"
    return torch.ops.npu_ext.gelu_backward_v2, (g, x, approximate)


def _cache_gelu(variant):
    x, approximate = cache_rand(4, 8, dtype=torch.bfloat16), "none"
    if variant == "shape":
        x = cache_rand(4, 16, dtype=torch.bfloat16)
    elif variant == "dtype":
        x = x.half()
    elif variant == "stride":
        x = cache_transposed(4, 8, dtype=torch.bfloat16)
    elif variant == "approximate":
        approximate = "tanh"
    return torch.ops.npu_ext.gelu, (x, approximate)


INFO = OpInfo(
    name="gelu_backward_v2", variants=("none", "tanh"), outputs=("grad_input",), reference=gelu_backward_v2,
    make=_make, range_make=_range, random=_random, forward="gelu", forward_reference=gelu,
    function=lambda x, approximate="none": torch_ext().gelu(x, approximate),
    native=lambda x, approximate="none": F.gelu(x, approximate=approximate), function_inputs=_function_inputs,
    gradcheck=(
        ("gelu", lambda x: torch_ext().gelu(x), lambda x: F.gelu(x), lambda: [leaf((5, 7), -4, 4)]),
        ("gelu_tanh", lambda x: torch_ext().gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh"),
         lambda: [leaf((5, 7), -4, 4)]),
    ),
    backward_gradcheck=(
        ("gelu_backward_v2", lambda g, x: ops.gelu_backward_v2(g, x, "none"),
         lambda: [leaf((4, 5), -2, 2), leaf((4, 5), -3, 3)], True),
        ("gelu_backward_v2_tanh_bcast", lambda g, x: ops.gelu_backward_v2(g, x, "tanh"),
         lambda: [leaf((5,), -2, 2), leaf((4, 5), -3, 3)], False),
    ),
    aclnn=("aclnnGeluBackwardV2",), probe=_probe,
    bench=(("gelu_backward_v2[erf]", _bench("none")), ("gelu_backward_v2[tanh]", _bench("tanh"))),
    training=("none", "F.gelu", 5, False), count_cases=_count_cases, errors=_errors,
    forward_samples=FORWARD_SAMPLES,
    cache_cases={"aclnnGeluBackwardV2": (_cache_gelu_bwd, ("shape", "dtype", "stride", "approximate"), True),
                 "aclnnGeluV2": (_cache_gelu, ("shape", "dtype", "stride", "approximate"), True)},
    kernel_counts={"gelu none": (None, 1), "gelu tanh": (1, 1)},
)
