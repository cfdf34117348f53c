"""scaled_masked_softmax / scaled_masked_softmax_backward: the sample table's entry (variants "mask": a (B, 1, S1, S2)
bool mask, "causal": fix_triu_mask), the float64 oracle and the native PyTorch equivalent."""

import math

import torch

from torch_ext.testing.opinfo import BENCH_SIZES, OpInfo, f64, leaf, nbytes, ops, rand, torch_ext
from torch_ext.testing.opinfo import cache_rand
from torch_ext.testing.opinfo import zeros as t
from torch_ext.testing.inputs import make


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


def scaled_masked_softmax(x, mask=None, scale=1.0, fix_triu_mask=False, fully_masked="uniform"):
    """The forward: softmax((x * scale).masked_fill(mask, -10000), dim=-1), the causal mask for fix_triu_mask, and
    rows with every position masked 0 for fully_masked="zero": the native forms below, in float64."""
    x = x.to(f64)
    if fix_triu_mask:
        mask = causal_mask(x.shape[-2], x.shape[-1])
    if mask is None:
        return torch.softmax(x * scale, dim=-1)
    return (native_softmax_zero_rows if fully_masked == "zero" else native_softmax)(x, mask, scale)


def native_softmax(x, mask, scale, fix_triu_mask=False):
    if fix_triu_mask:
        mask = causal_mask(x.shape[-2], x.shape[-1])
    return torch.softmax((x * scale).masked_fill(mask, -10000.0), dim=-1)


def native_softmax_zero_rows(x, mask, scale):
    """Megatron's fused-kernel convention, written natively: rows with every position masked are 0."""
    return torch.where(mask.all(-1, keepdim=True), 0.0, native_softmax(x, mask, scale))


SHAPES = {"tiny": (2, 3, 4, 5), "test": (2, 3, 9, 33), "small": (1, 4, 128, 128), "medium": (2, 8, 256, 256),
          "large": (4, 16, 256, 256), "256": (1, 1, 16, 16), "4096": (1, 4, 32, 32), "xlarge": (4, 16, 512, 512)}


def _softmax_y(x, mask, scale, dtype):
    """y from the forward convention softmax((x * scale).masked_fill(mask, -10000)), computed in float64."""
    return torch.softmax((x.to(f64) * scale).masked_fill(mask, -10000.0), dim=-1).to(dtype)


def _make(dtype, size, variant, gen, layout="contiguous"):
    from torch_ext.testing.inputs import relayout

    b, n, s1, s2 = shape = SHAPES[size]
    scale = 0.125 if size in BENCH_SIZES else 0.5
    mask = torch.rand((b, 1, s1, s2), generator=gen) < 0.2
    x = rand(shape, f64, -3, 3, gen)
    y = _softmax_y(x, causal_mask(s1, s2) if variant == "causal" else mask, scale, dtype)
    g = rand(shape, dtype, -3, 3, gen, layout)
    y = relayout(y[:1].expand(shape).contiguous(), layout) if layout == "expanded" else relayout(y, layout)
    return (g, y, mask, scale), {"fix_triu_mask": variant == "causal"}


def _range(dtype, gen, variant="mask"):
    # Each row's grad_output is scaled by its own power of two spanning the normal range (kept far enough
    # from both ends that scale * (g - s) * y stays normal); the output scales with it (range_scale).
    b, n, s1, s2 = 2, 4, 16, 40
    fi = torch.finfo(dtype)
    lo, hi = int(math.log2(fi.tiny)) + 24, int(math.log2(fi.max)) - 4
    k = torch.randint(lo, hi + 1, (b, n, s1, 1), generator=gen).to(f64)
    g = (rand((b, n, s1, s2), f64, -3, 3, gen) * torch.pow(2.0, k)).to(dtype)
    mask = torch.rand((b, 1, s1, s2), generator=gen) < 0.2
    y = _softmax_y(rand((b, n, s1, s2), f64, -3, 3, gen), mask, 1.0, dtype)
    return (g, y, mask, 1.0), {"fix_triu_mask": variant == "causal"}


def _range_scale(args):
    g = args[0].to(f64)
    return torch.pow(2.0, torch.floor(torch.log2(g.abs().amax(-1, keepdim=True)))).expand(g.shape)


def _random(pick, dtype, variant):
    b, n, s1, s2 = pick.int(0, 3), pick.int(1, 3), pick.int(0, 6), pick.int(0, 40)
    gen = torch.Generator().manual_seed(pick.int(0, 1 << 16))
    mask = pick.relayout(torch.rand((pick.choice([b, 1]), pick.choice([n, 1]), s1, s2), generator=gen) < 0.3)
    scale = pick.choice([1.0, 0.5, 0.125, 2.0, -1.0, 0.0])
    x = torch.randn((b, n, s1, s2), dtype=f64, generator=gen) * 3
    causal_ = variant == "causal"
    y = _softmax_y(x, causal_mask(s1, s2) if causal_ else mask, scale if scale > 0 else 1.0, dtype)
    return (pick.tensor([b, n, s1, s2], dtype, -3, 3), pick.relayout(y), mask, scale), {"fix_triu_mask": causal_}


def _function_inputs(dtype, size, variant, gen):
    b, n, s1, s2 = SHAPES[size]
    x = rand((b, n, s1, s2), dtype, -6, 6, gen)
    if variant == "causal":
        return [x], {"mask": None, "scale": 0.25, "fix_triu_mask": True}
    return [x], {"mask": torch.rand((b, 1, s1, s2), generator=gen) < 0.2, "scale": 0.25}


def _probe(npu):
    g4 = torch.rand(1, 1, 2, 3)
    npu(ops.scaled_masked_softmax_backward.default, g4, g4, torch.zeros(1, 1, 2, 3, dtype=torch.bool), 1.0, False)


def composite(g, y, mask, scale):
    s = (g * y).sum(-1, keepdim=True)
    return (scale * (g - s) * y).masked_fill(mask, 0)


def _bench(dtype, size, inductor=False):
    (g, y, mask, scale), _ = _make(dtype, size, "mask", torch.Generator().manual_seed(5))
    mask_full = mask.expand(g.shape).contiguous()

    compiled = {}
    if inductor:
        def make():
            fn = torch.compile(composite, backend="inductor", dynamic=False, fullgraph=True)
            fn(g, y, mask, scale)  # compile now, outside the timed region
            return lambda: fn(g, y, mask, scale)
        compiled["inductor(composite)"] = make

    return dict(
        shape=g.shape, numel=g.numel(), bytes=3 * nbytes(g) + mask.numel(),
        ext=lambda: ops.scaled_masked_softmax_backward(g, y, mask, scale, False),
        baselines={
            "eager composite": lambda: composite(g, y, mask, scale),
            # No scale and a full-size mask: strictly less work than the op; timed as is.
            "aten._masked_softmax_backward": lambda: torch.ops.aten._masked_softmax_backward(g, y, mask_full, 3),
        },
        compiled=compiled,
        # The floor of any out-of-place kernel here: a fresh output (page faults above 32 MB) + one pass.
        references={"floor: empty+copy": lambda: torch.empty_like(g).copy_(g)})


def _count_cases(dt, dev):
    B, N, S = 2, 4, 64

    def x():
        return torch.randn(B, N, S, S).to(dt).to(dev).requires_grad_()

    def mask(shape):
        return (torch.rand(shape) < 0.3).to(dev)

    sms = lambda *a, **k: torch_ext().scaled_masked_softmax(*a, **k)  # noqa: E731
    return [
        ("softmax, mask", lambda: {"x": x(), "m": mask((B, 1, S, S))}, lambda x, m: sms(x, m, scale=0.125)),
        ("softmax, no mask", lambda: {"x": x()}, lambda x: sms(x, None, scale=0.125)),
        ("softmax, causal", lambda: {"x": x()}, lambda x: sms(x, None, scale=0.125, fix_triu_mask=True)),
        ("softmax, mask, zero", lambda: {"x": x(), "m": mask((B, 1, S, S))},
         lambda x, m: sms(x, m, scale=0.125, fully_masked="zero")),
        ("softmax, padding, zero", lambda: {"x": x(), "m": mask((B, 1, 1, S))},
         lambda x, m: sms(x, m, scale=0.125, fully_masked="zero")),
    ]


def _errors(err, expect):
    def m(*s, dtype=torch.bool, d="cpu"):
        return torch.zeros(s, dtype=dtype, device=d)

    op = ops.scaled_masked_softmax_backward
    expect(err(lambda d: op(t(1, 1, 2, 3, dtype=torch.int32, device=d), t(1, 1, 2, 3, device=d), m(1, 1, 2, 3, d=d))),
           """npu_ext.scaled_masked_softmax_backward: grad_output must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int32""")
    expect(err(lambda d: op(t(1, 1, 2, 3, device=d), t(1, 1, 2, 3, dtype=torch.float16, device=d), m(1, 1, 2, 3, d=d))),
           """npu_ext.scaled_masked_softmax_backward: y must have the same dtype as grad_output (torch.float32), but got torch.float16""")
    expect(err(lambda d: op(t(2, 3, device=d), t(2, 3, device=d), m(2, 3, d=d))),
           """npu_ext.scaled_masked_softmax_backward: grad_output must be 4-D, but got a 2-D tensor of shape [2, 3]""")
    expect(err(lambda d: op(t(1, 1, 2, 3, device=d), t(1, 1, 3, 2, device=d), m(1, 1, 2, 3, d=d))),
           """npu_ext.scaled_masked_softmax_backward: y must have the shape of grad_output [1, 1, 2, 3], but got [1, 1, 3, 2]""")
    expect(err(lambda d: op(t(1, 1, 1, 4097, device=d), t(1, 1, 1, 4097, device=d), m(1, 1, 1, 4097, d=d))),
           """npu_ext.scaled_masked_softmax_backward: the last dimension of grad_output must be at most 4096, but got 4097""")
    expect(err(lambda d: op(t(1, 1, 2, 3, device=d), t(1, 1, 2, 3, device=d), m(1, 1, 2, 3, dtype=torch.uint8, d=d))),
           """npu_ext.scaled_masked_softmax_backward: mask must have dtype torch.bool, but got torch.uint8""")
    expect(err(lambda d: op(t(1, 1, 2, 3, device=d), t(1, 1, 2, 3, device=d), m(2, 3, d=d))),
           """npu_ext.scaled_masked_softmax_backward: mask must be 4-D, but got a 2-D tensor of shape [2, 3]""")
    expect(err(lambda d: op(t(2, 4, 2, 3, device=d), t(2, 4, 2, 3, device=d), m(1, 2, 2, 3, d=d))),
           """npu_ext.scaled_masked_softmax_backward: mask of shape [1, 2, 2, 3] must match grad_output [2, 4, 2, 3] in its last two dimensions and be equal or 1 in its first two""")
    expect(err(lambda d: op(t(2, 4, 2, 3, device=d), t(2, 4, 2, 3, device=d), m(2, 4, 1, 3, d=d))),
           """npu_ext.scaled_masked_softmax_backward: mask of shape [2, 4, 1, 3] must match grad_output [2, 4, 2, 3] in its last two dimensions and be equal or 1 in its first two""")
    expect(err(lambda d: op.out(t(1, 1, 2, 3, device=d), t(1, 1, 2, 3, device=d), m(1, 1, 2, 3, d=d),
                                out=t(1, 1, 2, 3, dtype=torch.float16, device=d))),
           """npu_ext.scaled_masked_softmax_backward: output out must have dtype torch.float32, but got torch.float16""")


PAD_MASK = torch.tensor([False] * 6 + [True] * 2).reshape(1, 1, 1, 8).expand(2, 1, 1, 8).clone()
PAD_MASK[1, ..., 4:] = True
ROW_MASK = torch.rand(2, 1, 3, 8, generator=torch.Generator().manual_seed(0)) < 0.4  # with fully masked rows
ROW_MASK[0, 0, 1] = True
ROW_MASK[1, 0, 2] = True
ROW_MASK[:, :, 0, 0] = False


def _sms(mask, scale, **kwargs):
    return lambda x: torch_ext().scaled_masked_softmax(x, mask, scale, **kwargs)


# the forward op's samples (tests/ops/test_forward.py: opcheck, the composite against the CPU kernel): masks broadcast
# over the batch and the heads, fix_triu_mask, and a fully masked row in the "zero" mode
FORWARD_SAMPLES = (
    lambda: ((make([2, 3, 4, 5], torch.float32), torch.rand(2, 1, 4, 5) < 0.3, 0.5), {}),
    lambda: ((make([2, 3, 4, 5], torch.bfloat16), torch.rand(1, 1, 4, 5) < 0.3), {"fix_triu_mask": True}),
    lambda: ((make([2, 3, 4, 5], torch.float16, layout="transposed"), torch.rand(2, 1, 4, 5) < 0.5, 0.5, False), {}),
    lambda: ((make([2, 3, 4, 5], torch.bfloat16),
              (torch.rand(2, 1, 4, 5) < 0.5) | (torch.arange(4) == 1).reshape(1, 1, 4, 1), 0.5, False, "zero"), {}),
)


# The executor-cache cases of its aclnn entry points (tests/npu/test_npu_cache*.py): variant -> (op, args) on host
# tensors; each variant changes one thing torch_npu must hash, "base" repeats the call.
def _cache_softmax_bwd(variant):
    shape, scale = (2, 2, 4, 8), 1.0
    g, y, mask = cache_rand(*shape), torch.softmax(cache_rand(*shape), -1), torch.rand(2, 1, 4, 8) > 0.7
    if variant == "shape":
        g, y, mask = cache_rand(2, 2, 4, 16), torch.softmax(cache_rand(2, 2, 4, 16), -1), torch.rand(2, 1, 4, 16) > 0.7
    elif variant == "dtype":
        g, y = g.half(), y.half()
    elif variant == "stride":
        y = torch.softmax(cache_rand(2, 4, 2, 8), -1).transpose(1, 2)
    elif variant == "mask shape":
        mask = torch.rand(1, 1, 4, 8) > 0.7
    elif variant == "scale":
        scale = 0.5
    return torch.ops.npu_ext.scaled_masked_softmax_backward, (g, y, mask, scale)


def _cache_softmax(variant):
    x, mask, scale = cache_rand(2, 2, 4, 8), torch.rand(2, 1, 4, 8) > 0.7, 1.0
    if variant == "shape":
        x, mask = cache_rand(2, 2, 4, 16), torch.rand(2, 1, 4, 16) > 0.7
    elif variant == "dtype":
        x = x.bfloat16()
    elif variant == "stride":
        x = cache_rand(2, 4, 2, 8).transpose(1, 2)
    elif variant == "mask shape":
        mask = torch.rand(1, 1, 4, 8) > 0.7
    elif variant == "scale":
        scale = 0.5
    return torch.ops.npu_ext.scaled_masked_softmax, (x, mask, scale)


INFO = OpInfo(
    name="scaled_masked_softmax_backward", variants=("mask", "causal"), outputs=("out",),
    reference=scaled_masked_softmax_backward, make=_make, range_make=_range, range_scale=_range_scale,
    random=_random, forward="scaled_masked_softmax", forward_reference=scaled_masked_softmax,
    function=lambda x, mask, scale, fix_triu_mask=False: torch_ext().scaled_masked_softmax(x, mask, scale, fix_triu_mask),
    native=native_softmax, function_inputs=_function_inputs,
    gradcheck=(
        ("softmax_causal", _sms(causal_mask(4, 6), 0.5), lambda x: native_softmax(x, causal_mask(4, 6), 0.5),
         lambda: [leaf((2, 2, 4, 6), -3, 3)]),
        ("softmax_fix_triu", _sms(None, 1.5, fix_triu_mask=True), lambda x: native_softmax(x, causal_mask(4, 6), 1.5),
         lambda: [leaf((1, 2, 4, 6), -3, 3)]),
        ("softmax_padding", _sms(PAD_MASK, 0.7), lambda x: native_softmax(x, PAD_MASK, 0.7),
         lambda: [leaf((2, 2, 3, 8), -3, 3)]),
        ("softmax_zero_rows", _sms(ROW_MASK, 0.7, fully_masked="zero"),
         lambda x: native_softmax_zero_rows(x, ROW_MASK, 0.7), lambda: [leaf((2, 2, 3, 8), -3, 3)]),
        ("softmax_3d_nomask", _sms(None, 2.0), lambda x: torch.softmax(2.0 * x, -1), lambda: [leaf((2, 3, 8), -3, 3)]),
    ),
    backward_gradcheck=(
        ("softmax_backward", lambda g, y: ops.scaled_masked_softmax_backward(g, y, PAD_MASK.expand(2, 1, 3, 8), 0.7),
         lambda: [leaf((2, 3, 3, 8), -2, 2), leaf((2, 3, 3, 8), 0, 1)], True),
        ("softmax_backward_triu", lambda g, y: ops.scaled_masked_softmax_backward(g, y, PAD_MASK, 1.3, True),
         lambda: [leaf((2, 2, 4, 4), -2, 2), leaf((2, 2, 4, 4), 0, 1)], False),
    ),
    aclnn=("aclnnScaledMaskedSoftmaxBackward",), probe=_probe,
    bench=(("scaled_masked_softmax_backward", _bench),),
    training=("mask", "softmax(masked_fill)", 5, True), count_cases=_count_cases, errors=_errors,
    forward_samples=FORWARD_SAMPLES,
    cache_cases={
        "aclnnScaledMaskedSoftmaxBackward": (_cache_softmax_bwd, ("shape", "dtype", "stride", "mask shape", "scale"),
                                             False),
        "aclnnScaledMaskedSoftmax": (_cache_softmax, ("shape", "dtype", "stride", "mask shape", "scale"), False)},
    kernel_counts={"softmax, mask": (1, 1), "softmax, no mask": (1, 1), "softmax, causal": (1, 1),
                 "softmax, mask, zero": (3, 1), "softmax, padding, zero": (None, None)},
)
