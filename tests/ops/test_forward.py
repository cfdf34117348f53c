"""The forward ops (npu_ext.gelu, prelu, logit, scaled_masked_softmax, grouped_bias_add) and their public
wrappers: values against their float64 oracles (torch_ext.testing.oracle, from the families' modules), the
device-generic ATen composite against the CPU kernels, mask adaptation, opcheck, and pinned error messages.
"""

import functools
import os

import expecttest
import pytest
import torch

import torch_ext
from torch_ext.testing.inputs import make
from helpers import DeviceErrorTestCase, python_frames, zeros
from torch_ext.testing import oracle, samples
from torch_ext.testing.tolerances import assert_accurate, assert_accurate_per_binade

pytestmark = [pytest.mark.asan, pytest.mark.release]

ops = torch.ops.npu_ext
f64 = torch.float64
LOW = [torch.float32, torch.float16, torch.bfloat16]


# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", LOW + [f64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_pointwise_values(dtype, layout):
    x = make([6, 5, 7], dtype, layout=layout)
    for approximate in ("none", "tanh"):
        assert_accurate(torch_ext.gelu(x, approximate), oracle.gelu(x, approximate), dtype, "gelu")
    for w in (make([5], dtype, low=-1, high=1), make([1], dtype)):
        assert_accurate(torch_ext.prelu(x, w), oracle.prelu(x, w), dtype, "prelu")
    p = make([6, 5, 7], dtype, low=0.02, high=0.98, layout=layout)
    for eps in (None, 0.1):
        assert_accurate(torch_ext.logit(p, eps), oracle.logit(p, eps), dtype, f"logit eps={eps}")


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_whole_normal_range(dtype, approximate):
    """The forward gelu over the whole normal range of x (every binade, both signs: x / 2 for tiny x, x for large
    x) and over its left tail, where the output sweeps down through every normal binade: every normal output
    within the contract's relative bounds, also per output binade (as tests/ops/test_range.py holds the backward ops)."""
    (_, x), _ = samples.OPS["gelu_backward_v2"].range_make(dtype, samples.generator(11), approximate)
    x = torch.cat([x, x.new_tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0])])
    assert_accurate_per_binade(torch_ext.gelu(x, approximate), oracle.gelu(x, approximate), dtype, f"gelu {approximate}",
                               small=torch.finfo(dtype).tiny)


@pytest.mark.parametrize("dtype", LOW + [f64])
@pytest.mark.parametrize("fix_triu_mask", [False, True])
@pytest.mark.parametrize("fully_masked", ["uniform", "zero"])
def test_scaled_masked_softmax_values(dtype, fix_triu_mask, fully_masked):
    x = make([2, 3, 5, 9], dtype, layout="transposed")
    mask = torch.rand(2, 1, 5, 9) < 0.4
    mask[0, 0, 1] = True  # a fully masked row: uniform (Megatron's torch path) or zero (its fused kernel)
    mask[1, 0, 3, :-1] = True  # one position left: 1 there under either policy
    mask[1, 0, 3, -1] = False
    y = ops.scaled_masked_softmax(x, mask, 0.7, fix_triu_mask, fully_masked)
    assert y.dtype == dtype and y.is_contiguous()
    assert_accurate(y, oracle.scaled_masked_softmax(x, mask, 0.7, fix_triu_mask, fully_masked), dtype, "scaled_masked_softmax")
    if not fix_triu_mask:  # the policy is visible exactly in the fully masked row, nowhere else
        assert torch.equal(y[0, :, 1].float(), torch.full((3, 9), 0.0 if fully_masked == "zero" else 1 / 9).to(dtype).float())
        assert torch.equal(y[1, :, 3, -1].float(), torch.ones(3))


def test_fully_masked_zero_is_exact_with_nan_inputs():
    """Masked positions never leak into a zero row, whatever x holds there (NaN, inf)."""
    x = torch.tensor([[[[float("nan"), float("inf"), 1.0, -float("inf")]]]])
    mask = torch.ones(1, 1, 1, 4, dtype=torch.bool)
    for call in (ops.scaled_masked_softmax.default,
                 lambda *a: ops.scaled_masked_softmax.default._op_dk("CompositeExplicitAutograd", *a)):
        assert torch.equal(call(x, mask, 1.0, False, "zero"), torch.zeros(1, 1, 1, 4))
        torch.testing.assert_close(call(x, mask, 1.0, False, "uniform"), torch.full((1, 1, 1, 4), 0.25))


@pytest.mark.parametrize("dtype", LOW + [f64])
def test_grouped_bias_add_values(dtype):
    x = make([10, 6], dtype, layout="sliced")
    bias = make([4, 6], dtype, layout="transposed")
    for gi, t in ((torch.tensor([3, 3, 8, 10]), 0), (torch.tensor([3, 0, 5, 2], dtype=torch.int32), 1)):
        out = torch_ext.grouped_bias_add(x, bias, gi, t)
        assert_accurate(out, oracle.grouped_bias_add(x, bias, gi, t), dtype, "grouped")
    x3 = make([4, 3, 6], dtype)
    for b in (bias, bias[:, None, :]):
        assert_accurate(torch_ext.grouped_bias_add(x3, b), oracle.grouped_bias_add(x3, b), dtype, "grouped 3-D")


@pytest.mark.parametrize("dtype", LOW + [f64])
@pytest.mark.parametrize("probs_dtype", ["fp32", "same"])
def test_grouped_bias_add_probs_values(dtype, probs_dtype):
    """out = x + probs * bias[group]: the MoE expert bias weighted by the router probabilities."""
    pd = dtype if probs_dtype == "same" else torch.float32
    x = make([10, 6], dtype, layout="sliced")
    bias = make([4, 6], dtype, layout="transposed")
    for gi, t in ((torch.tensor([3, 3, 8, 10]), 0), (torch.tensor([3, 0, 5, 2], dtype=torch.int32), 1)):
        for probs in (make([10, 1], pd, low=0, high=1), make([10], pd, low=-1, high=1, layout="sliced")):
            out = torch_ext.grouped_bias_add(x, bias, gi, t, probs=probs)
            assert out.dtype == dtype
            assert_accurate(out, oracle.grouped_bias_add(x, bias, gi, t, probs), dtype, "grouped probs")
    x3 = make([4, 3, 6], dtype)
    for probs in (make([4, 3], pd), make([4, 3, 1], pd)):
        assert_accurate(torch_ext.grouped_bias_add(x3, bias, probs=probs),
                        oracle.grouped_bias_add(x3, bias, probs=probs), dtype, "grouped 3-D probs")


def test_grouped_bias_add_probs_one_is_plain_add():
    """probs = 1 gives exactly the unweighted op (p * b is exact), on the fused and the strided kernel paths."""
    for layout in ("contiguous", "transposed"):
        x = make([9, 5], torch.bfloat16, layout=layout)
        bias, gi = make([3, 5], torch.bfloat16), torch.tensor([2, 2, 9])
        assert torch.equal(torch_ext.grouped_bias_add(x, bias, gi, probs=torch.ones(9, 1)),
                           torch_ext.grouped_bias_add(x, bias, gi))


def test_16bit_round_once():
    """fp16/bf16: computed in fp32 and rounded once. The softmax's exp is not specified to round like any
    other implementation's, so it is held to half an ulp of the 16-bit type around the float64 value plus
    the fp32 computation's error (rounding the intermediates to 16 bits would be off by more); the bias add
    is a single IEEE fp32 addition, so it is bit-exact."""
    for dtype in (torch.float16, torch.bfloat16):
        x = make([3, 2, 4, 33], dtype)
        mask = torch.rand(1, 1, 4, 33) < 0.3
        ref = oracle.scaled_masked_softmax(x, mask, 0.3)
        out = ops.scaled_masked_softmax(x, mask, 0.3, False).double()
        half_ulp = (ref.to(dtype).double() - torch.nextafter(ref.to(dtype), torch.zeros((), dtype=dtype)).double()).abs()
        half_ulp = torch.maximum(half_ulp, (torch.nextafter(ref.to(dtype), torch.ones((), dtype=dtype)).double()
                                            - ref.to(dtype).double()).abs()) / 2
        assert ((out - ref).abs() <= half_ulp + 2.0**-20 * ref.abs()).all()
        x2, b = make([7, 33], dtype), make([2, 33], dtype)
        exp = (x2.float() + b.float()[torch.tensor([0, 0, 0, 1, 1, 1, 1])]).to(dtype)
        assert torch.equal(ops.grouped_bias_add(x2, b, torch.tensor([3, 7]), 0), exp)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scaled_masked_softmax_infinite_inputs(dtype):
    """-inf inputs (not masked) have probability exactly 0 and leave the row finite, in every variant (the
    exponential of -inf is 0, never NaN)."""
    x = make([2, 1, 3, 37], dtype)
    x[..., ::5] = -float("inf")
    mask = torch.zeros(1, 1, 3, 37, dtype=torch.bool)
    mask[..., 1] = True
    out = ops.scaled_masked_softmax(x, mask, 0.5, False)
    assert torch.isfinite(out).all()
    assert (out[..., ::5] == 0).all()
    assert_accurate(out, oracle.scaled_masked_softmax(x, mask, 0.5), dtype, "softmax with -inf inputs")


# Every family's public training function (its OpInfo's function, the torch_ext function that calls npu_ext.<forward>)
# with its smallest inputs.
PUBLIC_CALLS = [info for info in samples.OPS.values() if info.forward]
# Every family's forward samples (its OpInfo's forward_samples): (npu_ext.<forward>.default, make), make -> (args,
# kwargs).
FORWARD_SAMPLES = [(getattr(ops, info.forward).default, maker) for info in samples.OPS.values() if info.forward
                   for maker in info.forward_samples]


def test_every_forward_op_has_samples():
    """Every forward op has its samples and its float64 oracle in its family's module."""
    assert [info.name for info in samples.OPS.values() if info.forward and not info.forward_samples] == []
    assert [info.forward for info in samples.OPS.values()
            if info.forward and getattr(oracle, info.forward) is not info.forward_reference] == []


def _forward_id(case):
    return case[0].name().split("::")[1]


@pytest.mark.parametrize("info", PUBLIC_CALLS, ids=[info.forward for info in PUBLIC_CALLS])
def test_public_function_paths(info):
    """The eager fast path of torch_ext's functions and its fallback: a plain eager call never enters
    torch.ops' Python (torch/_ops.py: it takes the unboxed torch_ext._C binding), and under a
    TorchFunctionMode the call goes through torch.ops, so the mode sees npu_ext.<op> with the same result."""
    from torch.overrides import TorchFunctionMode

    inputs, kwargs = info.function_inputs(torch.float32, "tiny", info.variants[0], samples.generator(0))
    fn = functools.partial(info.function, **kwargs)
    args = tuple(inputs)
    name = info.forward
    fast, files = python_frames(fn, *args)
    assert not [f for f in files if f.endswith(f"torch{os.sep}_ops.py")], files

    class Record(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.funcs = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.funcs.append(func)
            return func(*args, **(kwargs or {}))

    with Record() as rec:
        seen = fn(*args)
    assert getattr(ops, name) in rec.funcs, rec.funcs
    torch.testing.assert_close(seen, fast, rtol=0, atol=0)


@pytest.mark.parametrize("case", FORWARD_SAMPLES, ids=[_forward_id(c) for c in FORWARD_SAMPLES])
def test_forward_samples_against_the_oracle(case):
    """Every forward sample of the table against its family's float64 oracle (oracle.<forward>), within the contract's
    bounds for its dtype: a new operator's forward values are under test from its entry alone."""
    overload, make_sample = case
    args, kwargs = make_sample()
    out = overload(*args, **kwargs)
    name = overload._schema.name.split("::")[1]
    assert_accurate(out, getattr(oracle, name)(*args, **kwargs), out.dtype, name)


def test_empty_inputs():
    assert ops.scaled_masked_softmax(torch.empty(0, 2, 3, 4), torch.zeros(1, 1, 3, 4, dtype=torch.bool)).shape == (0, 2, 3, 4)
    assert ops.grouped_bias_add(torch.empty(0, 4), torch.ones(2, 4), torch.tensor([0, 0])).shape == (0, 4)
    assert ops.gelu(torch.empty(0, 3)).shape == (0, 3)


@pytest.mark.parametrize("case", FORWARD_SAMPLES, ids=[_forward_id(c) for c in FORWARD_SAMPLES])
def test_composite_matches_cpu_kernel(case):
    """The ATen composite (what runs on devices without a dedicated kernel) agrees with the CPU kernels."""
    overload, make_sample = case
    args, kwargs = make_sample()
    cpu = overload(*args, **kwargs)
    composite = overload._op_dk("CompositeExplicitAutograd", *args, **kwargs)
    assert composite.shape == cpu.shape and composite.dtype == cpu.dtype and composite.is_contiguous()
    torch.testing.assert_close(composite, cpu, rtol=1e-6 if cpu.dtype == torch.float32 else 1e-2, atol=1e-6)


# ----------------------------------------------------------------------------------------------------------
# Mask adaptation and non-4-D inputs in torch_ext.scaled_masked_softmax
@pytest.mark.parametrize("xshape,mshape", [
    ((2, 3, 6, 7), (6, 7)),            # 2-D causal-style mask
    ((2, 3, 6, 7), (2, 1, 1, 7)),      # padding mask
    ((2, 3, 6, 7), (3, 6, 7)),         # 3-D mask: broadcast over batch
    ((2, 3, 6, 7), (2, 3, 6, 7)),      # full mask
    ((2, 3, 6, 7), (1, 7)),            # mask constant over rows
    ((6, 7), (6, 7)),                  # 2-D input
    ((7,), (7,)),                      # 1-D input
    ((3, 6, 7), (3, 1, 7)),            # 3-D input
    ((2, 2, 3, 6, 7), (6, 7)),         # 5-D input, 2-D mask
    ((2, 2, 3, 6, 7), (2, 1, 1, 1, 7)),  # 5-D input, mask varying over a flattened leading dim
])
def test_mask_adaptation(xshape, mshape):
    x = torch.randn(xshape, dtype=f64)
    mask = torch.rand(mshape) < 0.3
    y = torch_ext.scaled_masked_softmax(x, mask, 0.5)
    assert y.shape == x.shape
    torch.testing.assert_close(y, oracle.scaled_masked_softmax(x, mask, 0.5), rtol=1e-12, atol=1e-14)


def test_mask_none_and_causal():
    x = torch.randn(2, 5, 5, dtype=f64)
    torch.testing.assert_close(torch_ext.scaled_masked_softmax(x, None, 2.0), oracle.scaled_masked_softmax(x, None, 2.0))
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    torch.testing.assert_close(torch_ext.scaled_masked_softmax(x, fix_triu_mask=True), oracle.scaled_masked_softmax(x, causal))


class TestWrapperErrors(expecttest.TestCase):
    def msg(self, exc, fn):
        with self.assertRaises(exc) as ctx:
            fn()
        return str(ctx.exception)

    def test_wrapper_errors(self):
        self.assertExpectedInline(
            self.msg(TypeError, lambda: torch_ext.scaled_masked_softmax(torch.randn(2, 3), torch.zeros(2, 3))),
            """torch_ext.scaled_masked_softmax: mask must be a torch.bool tensor (True = masked out), but got torch.float32""")
        self.assertExpectedInline(
            self.msg(ValueError, lambda: torch_ext.scaled_masked_softmax(torch.randn(2, 3), torch.zeros(3, 3, dtype=torch.bool))),
            """torch_ext.scaled_masked_softmax: mask of shape [3, 3] does not broadcast to x of shape [2, 3]""")
        self.assertExpectedInline(
            self.msg(ValueError, lambda: torch_ext.scaled_masked_softmax(torch.tensor(1.0))),
            """torch_ext.scaled_masked_softmax: x must have at least 1 dimension, but got a 0-D tensor""")


# ----------------------------------------------------------------------------------------------------------
# Validation of the ops: one shared implementation, same message on CPU and Meta.
t = zeros


class TestForwardErrors(DeviceErrorTestCase):

    def test_gelu(self):
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu(t(3, device=d), "Tanh")),
            """npu_ext.gelu: approximate must be "none" or "tanh", but got "Tanh\"""")
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu(t(3, dtype=torch.int32, device=d))),
            """npu_ext.gelu: self must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int32""")

    def test_prelu(self):
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu(t(2, 3, device=d), t(3, dtype=torch.float16, device=d))),
            """npu_ext.prelu: weight must have the same dtype as self (torch.float32), but got torch.float16""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu(t(2, 3, device=d), t(2, device=d))),
            """npu_ext.prelu: weight must have 1 or 3 elements (the size of dimension 1 of self), but got 2""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu(t(4, device=d), t(4, device=d))),
            """npu_ext.prelu: weight must have 1 element (self has a single channel), but got 4""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu(t(*[1] * 9, device=d), t(1, device=d))),
            """npu_ext.prelu: self must have at most 8 dimensions, but got 9""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu(t(2, 3), t(3, device="meta")), devices=("cpu",)),
            """npu_ext.prelu: weight must be on the same device as self (cpu), but got meta""")

    def test_logit(self):
        self.assertExpectedInline(
            self.err(lambda d: ops.logit(t(3, dtype=torch.int64, device=d))),
            """npu_ext.logit: self must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int64""")
        self.assertExpectedInline(
            self.err(lambda d: ops.logit(t(*[1] * 9, device=d), 0.1)),
            """npu_ext.logit: self must have at most 8 dimensions, but got 9""")

    def test_scaled_masked_softmax(self):
        m = lambda *s, device="cpu": torch.zeros(s, dtype=torch.bool, device=device)  # noqa: E731
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax(t(3, 4, device=d), m(3, 4, device=d))),
            """npu_ext.scaled_masked_softmax: x must be 4-D, but got a 2-D tensor of shape [3, 4]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax(t(1, 1, 2, 4097, device=d), m(1, 1, 2, 4097, device=d))),
            """npu_ext.scaled_masked_softmax: the last dimension of x must be at most 4096, but got 4097""")
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax(t(2, 3, 4, 5, device=d), t(2, 3, 4, 5, device=d))),
            """npu_ext.scaled_masked_softmax: mask must have dtype torch.bool, but got torch.float32""")
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax(t(2, 3, 4, 5, device=d), m(4, 5, device=d))),
            """npu_ext.scaled_masked_softmax: mask must be 4-D, but got a 2-D tensor of shape [4, 5]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax(t(2, 3, 4, 5, device=d), m(2, 2, 4, 5, device=d))),
            """npu_ext.scaled_masked_softmax: mask of shape [2, 2, 4, 5] must match x [2, 3, 4, 5] in its last two dimensions and be equal or 1 in its first two""")
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax(t(2, 3, 4, 5, dtype=torch.int8, device=d), m(1, 1, 4, 5, device=d))),
            """npu_ext.scaled_masked_softmax: x must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int8""")
        # fix_triu_mask=True ignores the mask argument entirely
        assert ops.scaled_masked_softmax(t(1, 1, 2, 3), t(5), 1.0, True).shape == (1, 1, 2, 3)

    def test_grouped_bias_add(self):
        gi = lambda *v, device="cpu": torch.tensor(v, device=device)  # noqa: E731
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3, device=d), t(2, 3, device=d), gi(1, 4, device=d), 2)),
            """npu_ext.grouped_bias_add: group_idx_type must be 0 (cumulative end offsets) or 1 (per-group counts), but got 2""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3, device=d), t(2, 3, dtype=torch.bfloat16, device=d), gi(1, 4, device=d))),
            """npu_ext.grouped_bias_add: bias must have the same dtype as x (torch.float32), but got torch.bfloat16""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3, device=d), t(3, 3, device=d), gi(1, 4, device=d))),
            """npu_ext.grouped_bias_add: bias must have shape (G, H) = [2, 3] (G = group_idx.numel(), H = x.size(1)), but got [3, 3]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3, 2, device=d), t(2, 2, device=d), gi(1, 4, device=d))),
            """npu_ext.grouped_bias_add: x must be 2-D (N, H) when group_idx is given, but got a 3-D tensor of shape [4, 3, 2]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3, device=d), t(4, 3, device=d))),
            """npu_ext.grouped_bias_add: x must be 3-D (G, C, H) when group_idx is None, but got a 2-D tensor of shape [4, 3]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(2, 5, 3, device=d), t(2, 5, 3, device=d))),
            """npu_ext.grouped_bias_add: bias must have shape (G, H) = [2, 3] or (G, 1, H) when group_idx is None, but got [2, 5, 3]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3, device=d), t(2, 3, device=d), gi(1.0, 4.0, device=d))),
            """npu_ext.grouped_bias_add: group_idx must have dtype torch.int32 or torch.int64, but got torch.float32""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3, device=d), t(2049, 3, device=d), torch.zeros(2049, dtype=torch.long, device=d))),
            """npu_ext.grouped_bias_add: group_idx may hold at most 2048 groups, but got 2049""")

    def test_fully_masked(self):
        m = torch.zeros(1, 1, 4, 5, dtype=torch.bool)
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax(t(2, 3, 4, 5, device=d), m.to(d), 1.0, False, "zeros")),
            """npu_ext.scaled_masked_softmax: fully_masked must be "uniform" or "zero", but got "zeros\"""")

    def test_grouped_bias_add_probs(self):
        gi = torch.tensor([1, 3])
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3, device=d), t(2, 3, device=d), gi.to(d), 1, t(4, 3, device=d))),
            """npu_ext.grouped_bias_add: probs must have shape [4] or [4, 1] (one weight per row of x), but got [4, 3]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(2, 4, 3, device=d), t(2, 3, device=d), None, 0, t(2, device=d))),
            """npu_ext.grouped_bias_add: probs must have shape [2, 4] or [2, 4, 1] (one weight per row of x), but got [2]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3, device=d), t(2, 3, device=d), gi.to(d), 1,
                                                    t(4, dtype=torch.int64, device=d))),
            """npu_ext.grouped_bias_add: probs must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int64""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 3), t(2, 3), gi, 1, t(4, device="meta")), devices=("cpu",)),
            """npu_ext.grouped_bias_add: probs must be on the same device as x (cpu), but got meta""")

    def test_grouped_bias_add_values(self):
        """Data-dependent: bad group_idx values are clear errors (CPU kernel and ATen composite alike)."""
        op = ops.grouped_bias_add.default
        for call in (op, lambda *a: op._op_dk("CompositeExplicitAutograd", *a)):
            self.assertExpectedInline(
                self.err(lambda d: call(t(4, 3), t(2, 3), torch.tensor([3, 2]), 0), devices=("cpu",)),
                """npu_ext.grouped_bias_add: group_idx must be non-decreasing (cumulative end offsets), but group_idx[1] = 2 < group_idx[0] = 3""")
            self.assertExpectedInline(
                self.err(lambda d: call(t(4, 3), t(2, 3), torch.tensor([1, 3]), 0), devices=("cpu",)),
                """npu_ext.grouped_bias_add: the last entry of group_idx must equal the number of rows of x (4), but got 3""")
            self.assertExpectedInline(
                self.err(lambda d: call(t(4, 3), t(2, 3), torch.tensor([-1, 5]), 1), devices=("cpu",)),
                """npu_ext.grouped_bias_add: group_idx must be non-negative, but group_idx[0] = -1""")
            self.assertExpectedInline(
                self.err(lambda d: call(t(4, 3), t(2, 3), torch.tensor([3, 3]), 1), devices=("cpu",)),
                """npu_ext.grouped_bias_add: group_idx counts must sum to the number of rows of x (4), but the first 2 counts already sum to 6""")


# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("case", FORWARD_SAMPLES, ids=[_forward_id(c) for c in FORWARD_SAMPLES])
def test_opcheck(case, requires_grad):
    op, make_sample = case
    args, kwargs = make_sample()
    if requires_grad:
        args = tuple(a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                     for a in args)
    torch.library.opcheck(op, args, kwargs)
