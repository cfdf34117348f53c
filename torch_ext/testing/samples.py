"""The one table of sample inputs per operator.

Every test and tool that needs inputs for an npu_ext op draws them from here: the value tests (test_ops.py),
opcheck (test_opcheck.py), determinism (test_determinism.py), the property-based tests
(test_properties.py), the whole-range accuracy test and report (test_range.py, accuracy_report.py), the
device-generic implementation (test_generic.py), autograd (test_autograd.py), torch.compile
(test_compile.py) and the benchmark cases (benchmarks/cases.py). The accuracy metric and its tolerances are
torch_ext.testing.tolerances' (THRESHOLD / SMALL / assert_accurate), and nothing else.

Adding an operator means one OpInfo entry in OPS (plus its kernels and its float64 oracle in oracle.py):

* ``make(dtype, size, variant, gen, layout)`` -> (args, kwargs) of the backward op, with values in the
  op's ordinary domain; ``size`` is one of SIZES; ``layout`` (see torch_ext.testing.inputs.make) applies to the main inputs;
* ``oracle``: oracle.py's float64 reference, called with the same (args, kwargs);
* ``outputs``: the keyword names of the ``.out`` overload's outputs;
* ``range_make(dtype, gen)``: inputs whose magnitudes span the dtype's whole normal range, and
  ``range_scale(args)`` (optional) the per-element factor the output scales with (test_range.py);
* ``random(pick, dtype, variant)`` -> (args, kwargs): random shapes, broadcasts and dtype mixes for the
  property-based tests; ``pick`` draws integers / choices and makes tensors of random layouts (permuted,
  stepped, offset, zero-stride) with special values (test_properties.Picker);
* ``function`` / ``native`` / ``function_inputs``: the torch_ext training function whose gradient the op
  computes, plain PyTorch's equivalent, and its differentiable inputs (autograd, compile, fwd+bwd benchmark).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F

from torch_ext.testing import oracle, tolerances
from torch_ext.testing.inputs import make, relayout

ops = torch.ops.npu_ext
f64 = torch.float64

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
LOW_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "transposed", "sliced", "expanded")
# tiny: opcheck / compile / gradcheck; test: value tests; small / medium / large: benchmarks (64K / 1M / 4M
# elements), medium also the determinism test.
SIZES = ("tiny", "test", "small", "medium", "large")


def generator(seed=0):
    return torch.Generator().manual_seed(seed)


def _rand(shape, dtype, low, high, gen, layout="contiguous"):
    return make(shape, dtype, low=low, high=high, layout=layout, generator=gen)


# Benchmark-only sizes: per-call rows (fwd+bwd at 256 / 4096 elements) and "xlarge" (softmax only: a 64 MB fp32
# output, above glibc's 32 MB mmap threshold).
PERCALL_SIZES = ("256", "4096")
BENCH_SIZES = ("small", "medium", "large") + PERCALL_SIZES + ("xlarge",)


def _second(size, layout, alternative):
    """The layout of an op's second input: at test sizes another one than the first's (more layouts per
    test), at benchmark sizes the same (contiguous benchmarks stay contiguous)."""
    return layout if size in BENCH_SIZES else alternative


def spread(n, dtype, gen, low_exp=None, high_exp=None, sign=0):
    """n values m * 2^e with m uniform in [1, 2) and e uniform over the dtype's normal exponents (or
    [low_exp, high_exp]): the whole normal range, every binade about equally often. sign: +1, -1 or 0 (both)."""
    fi = torch.finfo(dtype)
    lo = int(math.log2(fi.tiny)) if low_exp is None else low_exp
    hi = int(math.log2(fi.max)) if high_exp is None else high_exp
    e = torch.randint(lo, hi + 1, (n,), generator=gen, dtype=torch.int64).to(f64)
    m = 1 + torch.rand(n, generator=gen, dtype=f64)
    v = m * torch.pow(2.0, e)
    if sign == 0:
        v = torch.where(torch.rand(n, generator=gen) < 0.5, -v, v)
    elif sign < 0:
        v = -v
    return v.clamp(-fi.max, fi.max).to(dtype)


@dataclasses.dataclass(frozen=True)
class OpInfo:
    name: str
    variants: Tuple[str, ...]
    make: Callable
    outputs: Tuple[str, ...]
    range_make: Callable
    range_scale: Optional[Callable] = None
    random: Optional[Callable] = None
    forward: Optional[str] = None  # the npu_ext forward op of `function`
    function: Optional[Callable] = None
    native: Optional[Callable] = None
    function_inputs: Optional[Callable] = None

    @property
    def op(self):
        return getattr(ops, self.name)

    def oracle(self, args, kwargs):
        out = getattr(oracle, self.name)(*args, **kwargs)
        return out if isinstance(out, tuple) else (out,)

    def run(self, args, kwargs):
        out = self.op(*args, **kwargs)
        return out if isinstance(out, tuple) else (out,)


# ---------------------------------------------------------------------------------------------------------
# gelu_backward_v2: variants are the approximate modes.
ELEMENTWISE = {"tiny": (4, 6), "test": (5, 37, 19), "small": (64, 1024), "medium": (1024, 1024),
               "large": (4096, 1024), "256": (16, 16), "4096": (64, 64)}


def _gelu_make(dtype, size, variant, gen, layout="contiguous"):
    shape = ELEMENTWISE[size]
    g = _rand(shape, dtype, -3, 3, gen, layout)
    x = _rand(shape, dtype, -6, 6, gen, _second(size, layout, "sliced" if layout == "contiguous" else layout))
    return (g, x), {"approximate": variant}


def _gelu_range(dtype, gen, variant="none"):
    # every binade of x, and x uniform over [-14.5, 6], where the output sweeps down through every binade of
    # the normal range (the left tail), so that each output binade holds many values
    x = torch.cat([spread(1 << 15, dtype, gen), _rand([1 << 15], dtype, -14.5, 6, gen)])
    g = _rand(x.shape, dtype, 1, 2, gen)
    return (g, x), {"approximate": variant}


# prelu_backward: variants "channel" (C weights) and "scalar" (one weight).
PRELU = {"tiny": (3, 5, 4), "test": (4, 6, 5, 3), "small": (8, 32, 16, 16), "medium": (16, 64, 32, 32),
         "large": (16, 64, 64, 64), "256": (4, 4, 4, 4), "4096": (4, 16, 8, 8)}


def _prelu_make(dtype, size, variant, gen, layout="contiguous"):
    shape = PRELU[size]
    x = _rand(shape, dtype, -3, 3, gen, layout)
    g = _rand(shape, dtype, -3, 3, gen, _second(size, layout, "transposed" if layout == "contiguous" else "contiguous"))
    w = _rand([shape[1] if variant == "channel" else 1], dtype, -1, 1, gen)
    return (g, x, w), {}


def _prelu_range(dtype, gen, variant="channel"):
    # x <= 0 and g > 0 everywhere: the grad_weight sums have no cancellation, so their relative error is
    # meaningful. Each channel of x has its own binade, spread over the normal range (short of the top, so
    # that a channel's sum of 32 products with g in [1, 2) stays finite): grad_weight spans the range too.
    fi = torch.finfo(dtype)
    lo, hi = int(math.log2(fi.tiny)), int(math.log2(fi.max)) - 7
    c = 256
    e = torch.linspace(lo, hi, c, dtype=f64).round().reshape(1, c, 1)
    x = -((1 + torch.rand((8, c, 4), generator=gen, dtype=f64)) * torch.pow(2.0, e)).to(dtype)
    g = _rand((8, c, 4), dtype, 1, 2, gen)
    w = spread(c if variant == "channel" else 1, dtype, gen)
    if variant == "scalar":  # one weight: one sum over everything, of a single channel (C = 1)
        x, g = x[:, c // 2:c // 2 + 1].contiguous(), g[:, c // 2:c // 2 + 1].contiguous()
    return (g, x, w), {}


# prelu_backward where the package follows the Atlas A2/A3 kernel rather than the plain formula (docs/operators.md,
# "Semantics notes"), with the results written out: (id, dtype, self, grad_output, weight, grad_input, grad_weight). Values are exact
# in every dtype used; the plain formula's grad_weight is in the comment ("plain").
_INF, _NAN = math.inf, math.nan
PRELU_DEVICE_CASES = [
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


# grouped_bias_add_grad: variants "end" (group_idx_type 0), "count" (type 1), "3d" (no group_idx).
GROUPED = {"tiny": ([2, 0, 8], 7), "test": ([3, 0, 40, 1, 0, 700, 17, 0], 65)}
GROUPED_BENCH = {"small": (64, 1024, 8), "medium": (1024, 1024, 32), "large": (4096, 1024, 64),  # N, H, G
                 "256": (16, 16, 4), "4096": (64, 64, 8)}


def _group_sizes(size, gen):
    if size in GROUPED:
        return GROUPED[size]
    n, h, g = GROUPED_BENCH[size]
    weights = torch.rand(g, generator=gen, dtype=f64) ** 2  # uneven sizes, some empty, summing to N
    counts = torch.floor(weights / weights.sum() * n).long()
    counts[0] += n - counts.sum()
    return counts.tolist(), h


def group_idx_of(sizes, variant, index_dtype=torch.int64):
    if variant == "count":
        return torch.tensor(sizes, dtype=index_dtype)
    return torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(index_dtype)


def _grouped_make(dtype, size, variant, gen, layout="contiguous"):
    sizes, h = _group_sizes(size, gen)
    n = sum(sizes)
    if variant == "3d":
        g = max(len(sizes), 1)
        return (_rand([g, max(n // g, 1), h], dtype, -3, 3, gen, layout),), {}
    grad_y = _rand([n, h], dtype, -3, 3, gen, layout)
    idx_dtype = torch.int32 if variant == "count" else torch.int64
    return (grad_y, group_idx_of(sizes, variant, idx_dtype), 1 if variant == "count" else 0), {}


def _grouped_range(dtype, gen, variant="end"):
    sizes = [5, 0, 60, 1, 190]
    grad_y = spread(sum(sizes) * 16, dtype, gen, sign=+1).reshape(sum(sizes), 16)  # one sign: no cancellation
    if variant == "3d":
        return (grad_y[:250].reshape(5, 50, 16),), {}
    return (grad_y, group_idx_of(sizes, variant), 1 if variant == "count" else 0), {}


# scaled_masked_softmax_backward: variants "mask" (a (B, 1, S1, S2) bool mask) and "causal" (fix_triu_mask).
SOFTMAX = {"tiny": (2, 3, 4, 5), "test": (2, 3, 9, 33), "small": (1, 4, 128, 128), "medium": (2, 8, 256, 256),
           "large": (4, 16, 256, 256), "256": (1, 1, 16, 16), "4096": (1, 4, 32, 32), "xlarge": (4, 16, 512, 512)}


def _softmax_y(x, mask, scale, dtype):
    """y from the forward convention softmax((x * scale).masked_fill(mask, -10000)), computed in float64."""
    return torch.softmax((x.to(f64) * scale).masked_fill(mask, -10000.0), dim=-1).to(dtype)


def _softmax_make(dtype, size, variant, gen, layout="contiguous"):
    b, n, s1, s2 = shape = SOFTMAX[size]
    scale = 0.125 if size in BENCH_SIZES else 0.5
    mask = torch.rand((b, 1, s1, s2), generator=gen) < 0.2
    x = _rand(shape, f64, -3, 3, gen)
    causal = oracle.causal_mask(s1, s2)
    y = _softmax_y(x, causal if variant == "causal" else mask, scale, dtype)
    g = _rand(shape, dtype, -3, 3, gen, layout)
    y = relayout(y[:1].expand(shape).contiguous(), layout) if layout == "expanded" else relayout(y, layout)
    return (g, y, mask, scale), {"fix_triu_mask": variant == "causal"}


def _softmax_range(dtype, gen, variant="mask"):
    # Each row's grad_output is scaled by its own power of two spanning the normal range (kept far enough
    # from both ends that scale * (g - s) * y stays normal); the output scales with it (range_scale).
    b, n, s1, s2 = 2, 4, 16, 40
    fi = torch.finfo(dtype)
    lo, hi = int(math.log2(fi.tiny)) + 24, int(math.log2(fi.max)) - 4
    k = torch.randint(lo, hi + 1, (b, n, s1, 1), generator=gen).to(f64)
    g = (_rand((b, n, s1, s2), f64, -3, 3, gen) * torch.pow(2.0, k)).to(dtype)
    mask = torch.rand((b, 1, s1, s2), generator=gen) < 0.2
    y = _softmax_y(_rand((b, n, s1, s2), f64, -3, 3, gen), mask, 1.0, dtype)
    return (g, y, mask, 1.0), {"fix_triu_mask": variant == "causal"}


def _softmax_range_scale(args):
    g = args[0].to(f64)
    return torch.pow(2.0, torch.floor(torch.log2(g.abs().amax(-1, keepdim=True)))).expand(g.shape)


# logit_grad: variants are eps values.
def _logit_make(dtype, size, variant, gen, layout="contiguous"):
    shape = ELEMENTWISE[size]
    eps = float(variant)
    low, high = (-0.2, 1.2) if size == "test" else (0.0, 1.0)  # opcheck (tiny) compares outputs: no NaN
    x = _rand(shape, dtype, low, high, gen, layout)
    dy = _rand(shape, dtype, -3, 3, gen, _second(size, layout, "sliced" if layout == "contiguous" else "contiguous"))
    return (x, dy, eps), {}


def _logit_range(dtype, gen, variant="-1.0"):
    # x over every binade of (0, 1) from the smallest normal up, and its mirror 1 - x; dy over the whole range
    n = 1 << 15
    x = spread(n, dtype, gen, high_exp=-1, sign=+1)
    x = torch.where(torch.rand(n, generator=gen) < 0.5, x, (1 - x.to(f64)).to(dtype))
    dy = spread(n, dtype, gen)
    return (x, dy, float(variant)), {}



# ---------------------------------------------------------------------------------------------------------
# Random problems for the property-based tests (see OpInfo.random). pick.int(lo, hi) is inclusive;
# pick.tensor(shape, dtype, low, high) returns a tensor of that shape in a random layout.
def _random_shape(pick, max_rank, max_dim=6):
    return [pick.int(0, max_dim) if pick.int(0, 9) == 0 else pick.int(1, max_dim) for _ in range(pick.int(0, max_rank))]


def _broadcastable_to(pick, shape):
    """A shape that broadcasts to `shape`: some leading dims dropped, some dims set to 1."""
    s = list(shape[pick.int(0, len(shape)):]) if pick.int(0, 2) == 0 else list(shape)
    return [1 if pick.int(0, 3) == 0 else d for d in s]


def _other_float(pick, dtype):
    return pick.choice([dtype, dtype, torch.float32, torch.float16, torch.bfloat16, torch.float64])


def _gelu_random(pick, dtype, variant):
    shape = _random_shape(pick, 4)
    g = pick.tensor(_broadcastable_to(pick, shape), dtype, -3, 3)
    x = pick.tensor(_broadcastable_to(pick, shape), _other_float(pick, dtype), -8, 8)
    return (g, x), {"approximate": variant}


def _prelu_random(pick, dtype, variant):
    shape = _random_shape(pick, 5)
    c = shape[1] if len(shape) > 1 else 1
    if variant == "channel" and c != 1:
        w_shape = pick.choice([[c], [c, 1, 1][: pick.int(1, 3)] if c else [c]])
    else:
        w_shape = pick.choice([[1], [], [1, 1]])
    x = pick.tensor(shape, dtype, -3, 3)
    g = pick.tensor(_broadcastable_to(pick, shape), dtype, -3, 3)
    return (g, x, pick.tensor(w_shape, dtype, -1, 1)), {}


def _grouped_random(pick, dtype, variant):
    h = pick.int(0, 9)
    if variant == "3d":
        return (pick.tensor([pick.int(0, 5), pick.int(0, 40), h], dtype, -3, 3),), {}
    sizes = [pick.int(0, 12) if pick.int(0, 3) else 0 for _ in range(pick.int(0, 6))]
    idx_dtype = pick.choice([torch.int32, torch.int64])
    idx = pick.relayout(group_idx_of(sizes, variant, idx_dtype))
    return (pick.tensor([sum(sizes), h], dtype, -3, 3), idx, 1 if variant == "count" else 0), {}


def _softmax_random(pick, dtype, variant):
    b, n, s1, s2 = pick.int(0, 3), pick.int(1, 3), pick.int(0, 6), pick.int(0, 40)
    gen = generator(pick.int(0, 1 << 16))
    mask = pick.relayout(torch.rand((pick.choice([b, 1]), pick.choice([n, 1]), s1, s2), generator=gen) < 0.3)
    scale = pick.choice([1.0, 0.5, 0.125, 2.0, -1.0, 0.0])
    x = torch.randn((b, n, s1, s2), dtype=f64, generator=gen) * 3
    causal_ = variant == "causal"
    y = _softmax_y(x, oracle.causal_mask(s1, s2) if causal_ else mask, scale if scale > 0 else 1.0, dtype)
    return (pick.tensor([b, n, s1, s2], dtype, -3, 3), pick.relayout(y), mask, scale), {"fix_triu_mask": causal_}


def _logit_random(pick, dtype, variant):
    shape = _random_shape(pick, 4)
    eps = pick.choice([float(variant), -1.0, 0.0, 1e-6, 0.2, 0.5, 1.0, 2.0, math.inf, math.nan])
    return (pick.tensor(shape, dtype, -0.2, 1.2), pick.tensor(shape, dtype, -3, 3), eps), {}

# ---------------------------------------------------------------------------------------------------------
# Training functions (torch_ext.*) and their plain-PyTorch equivalents, for autograd / compile / benchmarks.
def causal(s1, s2):
    return torch.ones(s1, s2, dtype=torch.bool).triu(1)


def native_softmax(x, mask, scale, fix_triu_mask=False):
    if fix_triu_mask:
        mask = causal(x.shape[-2], x.shape[-1])
    return torch.softmax((x * scale).masked_fill(mask, -10000.0), dim=-1)


def native_grouped(x, bias, group_idx=None, group_idx_type=0):
    if group_idx is None:
        return x + bias.reshape(bias.shape[0], 1, -1)
    counts = group_idx if group_idx_type == 1 else torch.diff(group_idx, prepend=group_idx.new_zeros(1))
    return x + bias[torch.repeat_interleave(torch.arange(len(group_idx)), counts.long())]


def _fn_inputs_gelu(dtype, size, variant, gen):
    return [_rand(ELEMENTWISE[size], dtype, -5, 5, gen)], {"approximate": variant}


def _fn_inputs_prelu(dtype, size, variant, gen):
    shape = PRELU[size]
    return [_rand(shape, dtype, -3, 3, gen), _rand([shape[1] if variant == "channel" else 1], dtype, -0.5, 0.5, gen)], {}


def _fn_inputs_logit(dtype, size, variant, gen):
    eps = float(variant)
    low, high = (0.01, 0.99) if eps < 0 else (0.0, 1.0)
    return [_rand(ELEMENTWISE[size], dtype, low, high, gen)], {"eps": None if eps < 0 else eps}


def _fn_inputs_softmax(dtype, size, variant, gen):
    b, n, s1, s2 = SOFTMAX[size]
    x = _rand((b, n, s1, s2), dtype, -6, 6, gen)
    if variant == "causal":
        return [x], {"mask": None, "scale": 0.25, "fix_triu_mask": True}
    return [x], {"mask": torch.rand((b, 1, s1, s2), generator=gen) < 0.2, "scale": 0.25}


def _fn_inputs_grouped(dtype, size, variant, gen):
    sizes, h = _group_sizes(size, gen)
    n = sum(sizes)
    if variant == "3d":
        g = len(sizes)
        return [_rand([g, max(n // g, 1), h], dtype, -3, 3, gen), _rand([g, 1, h], dtype, -3, 3, gen)], {}
    return ([_rand([n, h], dtype, -3, 3, gen), _rand([len(sizes), h], dtype, -3, 3, gen)],
            {"group_idx": group_idx_of(sizes, variant), "group_idx_type": 1 if variant == "count" else 0})


def _torch_ext():
    import torch_ext
    return torch_ext


OPS: Dict[str, OpInfo] = {
    "gelu_backward_v2": OpInfo(
        name="gelu_backward_v2", variants=("none", "tanh"), outputs=("grad_input",),
        make=_gelu_make, range_make=_gelu_range, random=_gelu_random, forward="gelu",
        function=lambda x, approximate="none": _torch_ext().gelu(x, approximate),
        native=lambda x, approximate="none": F.gelu(x, approximate=approximate), function_inputs=_fn_inputs_gelu),
    "prelu_backward": OpInfo(
        name="prelu_backward", variants=("channel", "scalar"), outputs=("grad_input", "grad_weight"),
        make=_prelu_make, range_make=_prelu_range, random=_prelu_random, forward="prelu",
        function=lambda x, w: _torch_ext().prelu(x, w), native=F.prelu, function_inputs=_fn_inputs_prelu),
    "grouped_bias_add_grad": OpInfo(
        name="grouped_bias_add_grad", variants=("end", "count", "3d"), outputs=("out",),
        make=_grouped_make, range_make=_grouped_range, random=_grouped_random, forward="grouped_bias_add",
        function=lambda x, b, group_idx=None, group_idx_type=0: _torch_ext().grouped_bias_add(x, b, group_idx, group_idx_type),
        native=native_grouped, function_inputs=_fn_inputs_grouped),
    "scaled_masked_softmax_backward": OpInfo(
        name="scaled_masked_softmax_backward", variants=("mask", "causal"), outputs=("out",),
        make=_softmax_make, range_make=_softmax_range, range_scale=_softmax_range_scale, random=_softmax_random,
        forward="scaled_masked_softmax",
        function=lambda x, mask, scale, fix_triu_mask=False: _torch_ext().scaled_masked_softmax(x, mask, scale, fix_triu_mask),
        native=native_softmax, function_inputs=_fn_inputs_softmax),
    "logit_grad": OpInfo(
        name="logit_grad", variants=("-1.0", "0.0", "1e-06", "0.2"), outputs=("dx",),
        make=_logit_make, range_make=_logit_range, random=_logit_random, forward="logit",
        function=lambda x, eps=None: _torch_ext().logit(x, eps),
        native=lambda x, eps=None: torch.logit(x, eps), function_inputs=_fn_inputs_logit),
}


# ---------------------------------------------------------------------------------------------------------
# Iterators over the table.
@dataclasses.dataclass
class Sample:
    info: OpInfo
    variant: str
    dtype: torch.dtype
    args: tuple
    kwargs: dict

    @property
    def id(self):
        return f"{self.info.name}-{self.variant}-{str(self.dtype).replace('torch.', '')}"

    def run(self):
        return self.info.run(self.args, self.kwargs)

    def expected(self):
        return self.info.oracle(self.args, self.kwargs)

    def out_dtype(self):
        return self.run_meta()[0].dtype

    def run_meta(self):
        meta_args = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in self.args]
        r = self.info.op(*meta_args, **self.kwargs)
        return r if isinstance(r, tuple) else (r,)

    def out_kwargs(self, factory=torch.empty):
        """Fresh outputs for the .out overload, keyed by name."""
        return {name: factory(m.shape, dtype=m.dtype) for name, m in zip(self.info.outputs, self.run_meta())}


def samples(size="test", dtypes=DTYPES, layout="contiguous", seed=0, ops_=None):
    """One Sample per op, variant and dtype."""
    for info in OPS.values():
        if ops_ is not None and info.name not in ops_:
            continue
        for variant in info.variants:
            for dtype in dtypes:
                gen = generator(seed)
                args, kwargs = info.make(dtype, size, variant, gen, layout)
                yield Sample(info, variant, dtype, args, kwargs)


def range_samples(dtypes=LOW_DTYPES, seed=0):
    """One whole-normal-range Sample per op, variant and dtype (see OpInfo.range_make)."""
    for info in OPS.values():
        for variant in info.variants:
            for dtype in dtypes:
                args, kwargs = info.range_make(dtype, generator(seed), variant)
                yield Sample(info, variant, dtype, args, kwargs)


def function_samples(size="tiny", dtypes=(f64,), seed=0):
    """(id, function, native, differentiable inputs, keyword arguments) per op and variant."""
    for info in OPS.values():
        for variant in info.variants:
            for dtype in dtypes:
                inputs, kwargs = info.function_inputs(dtype, size, variant, generator(seed))
                yield (f"{info.name}-{variant}-{str(dtype).replace('torch.', '')}", info.function, info.native,
                       inputs, kwargs)


def accuracy_rows(sample, run=None):
    """[(label, actual, expected)] per output of one sample: what the accuracy metric is computed on.
    run(args, kwargs) computes the outputs (default: the op through the dispatcher)."""
    outs = sample.run() if run is None else run(sample.args, sample.kwargs)
    exps = sample.expected()
    return [(f"{sample.info.name} ({sample.variant}) {name}", a, e)
            for name, a, e in zip(sample.info.outputs, outs, exps)]


def range_rows(sample, run=None):
    """[(label, actual, expected, small)] for one whole-range sample (run: see accuracy_rows)."""
    rows = []
    scale = sample.info.range_scale(sample.args) if sample.info.range_scale else None
    for label, a, e in accuracy_rows(sample, run):
        if scale is not None:
            rows.append((label, a.to(torch.float64) / scale, e / scale, None))
        else:
            rows.append((label, a, e, torch.finfo(sample.dtype).tiny))
    return rows


def check_range(sample, run=None):
    """The contract's metric with every normal output non-tiny, and the mean bound per output binade."""
    for label, a, e, small in range_rows(sample, run):
        tolerances.assert_accurate_per_binade(a, e, sample.dtype, label, small=small)
