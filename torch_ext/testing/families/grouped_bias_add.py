"""grouped_bias_add / grouped_bias_add_grad: the sample table's entry (variants "end": group_idx_type 0, "count":
type 1, "3d": no group_idx), the float64 oracle and the native PyTorch equivalent."""

import numpy as np
import torch

from torch_ext.testing.opinfo import OpInfo, f64, leaf, nbytes, ops, rand, spread, torch_ext
from torch_ext.testing.opinfo import cache_rand, cache_transposed
from torch_ext.testing.opinfo import zeros as t
from torch_ext.testing.inputs import make


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


def grouped_bias_add(x, bias, group_idx=None, group_idx_type=0, probs=None):
    """The forward: x + bias[j] on the rows of group j (x: [N, H], bias: [G, H]; group_idx: the groups' ends, or
    their sizes for group_idx_type 1), or on x[j] for a 3-D x and no group_idx; times probs' one weight per row: the
    native forms below, in float64."""
    x, bias = x.to(f64), bias.to(f64)
    if probs is None:
        return native_grouped(x, bias, group_idx, group_idx_type)
    return native_grouped_probs(x, bias, probs.to(f64), group_idx, group_idx_type)


def native_grouped(x, bias, group_idx=None, group_idx_type=0):
    if group_idx is None:
        return x + bias.reshape(bias.shape[0], 1, -1)
    counts = group_idx if group_idx_type == 1 else torch.diff(group_idx, prepend=group_idx.new_zeros(1))
    return x + bias[torch.repeat_interleave(torch.arange(len(group_idx)), counts.long())]


def native_grouped_probs(x, b, p, group_idx=None, group_idx_type=0):
    """x + p * bias[group], the prob-weighted expert bias, written natively."""
    return x + p.reshape(x.shape[:-1] + (1,)) * native_grouped(torch.zeros_like(x), b, group_idx, group_idx_type)


SIZES = {"tiny": ([2, 0, 8], 7), "test": ([3, 0, 40, 1, 0, 700, 17, 0], 65)}
BENCH_SIZES = {"small": (64, 1024, 8), "medium": (1024, 1024, 32), "large": (4096, 1024, 64),  # N, H, G
               "256": (16, 16, 4), "4096": (64, 64, 8)}


def group_sizes(size, gen):
    if size in SIZES:
        return SIZES[size]
    n, h, g = BENCH_SIZES[size]
    weights = torch.rand(g, generator=gen, dtype=f64) ** 2  # uneven sizes, some empty, summing to N
    counts = torch.floor(weights / weights.sum() * n).long()
    counts[0] += n - counts.sum()
    return counts.tolist(), h


def group_idx_of(sizes, variant, index_dtype=torch.int64):
    if variant == "count":
        return torch.tensor(sizes, dtype=index_dtype)
    return torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(index_dtype)


def _make(dtype, size, variant, gen, layout="contiguous"):
    sizes, h = group_sizes(size, gen)
    n = sum(sizes)
    if variant == "3d":
        g = max(len(sizes), 1)
        return (rand([g, max(n // g, 1), h], dtype, -3, 3, gen, layout),), {}
    grad_y = rand([n, h], dtype, -3, 3, gen, layout)
    idx_dtype = torch.int32 if variant == "count" else torch.int64
    return (grad_y, group_idx_of(sizes, variant, idx_dtype), 1 if variant == "count" else 0), {}


def _range(dtype, gen, variant="end"):
    sizes = [5, 0, 60, 1, 190]
    grad_y = spread(sum(sizes) * 16, dtype, gen, sign=+1).reshape(sum(sizes), 16)  # one sign: no cancellation
    if variant == "3d":
        return (grad_y[:250].reshape(5, 50, 16),), {}
    return (grad_y, group_idx_of(sizes, variant), 1 if variant == "count" else 0), {}


def _random(pick, dtype, variant):
    h = pick.int(0, 9)
    if variant == "3d":
        return (pick.tensor([pick.int(0, 5), pick.int(0, 40), h], dtype, -3, 3),), {}
    sizes = [pick.int(0, 12) if pick.int(0, 3) else 0 for _ in range(pick.int(0, 6))]
    idx_dtype = pick.choice([torch.int32, torch.int64])
    idx = pick.relayout(group_idx_of(sizes, variant, idx_dtype))
    return (pick.tensor([sum(sizes), h], dtype, -3, 3), idx, 1 if variant == "count" else 0), {}


def _function_inputs(dtype, size, variant, gen):
    sizes, h = group_sizes(size, gen)
    n = sum(sizes)
    if variant == "3d":
        g = len(sizes)
        return [rand([g, max(n // g, 1), h], dtype, -3, 3, gen), rand([g, 1, h], dtype, -3, 3, gen)], {}
    return ([rand([n, h], dtype, -3, 3, gen), rand([len(sizes), h], dtype, -3, 3, gen)],
            {"group_idx": group_idx_of(sizes, variant), "group_idx_type": 1 if variant == "count" else 0})


def _probe(npu):
    gy = torch.rand(4, 3)
    npu(ops.grouped_bias_add_grad.default, gy, torch.tensor([1, 3]), 1)  # aclnnGroupedBiasAddGradV2
    npu(ops.grouped_bias_add_grad.default, gy, torch.tensor([1, 4]), 0)  # aclnnGroupedBiasAddGrad


def _bench(dtype, size, inductor=False):
    (grad_y, group_idx, _), _ = _make(dtype, size, "end", torch.Generator().manual_seed(4))
    (N, H), G = grad_y.shape, group_idx.numel()
    counts = group_idx.diff(prepend=group_idx.new_zeros(1))
    bounds = list(zip([0] + group_idx[:-1].tolist(), group_idx.tolist()))
    row_group = torch.repeat_interleave(torch.arange(G), counts)  # precomputed: not timed

    def index_add():
        return torch.zeros(G, H, dtype=dtype).index_add_(0, row_group, grad_y)

    def per_group_loop():
        return torch.stack([grad_y[s:e].sum(0) for s, e in bounds])

    def segment_reduce():
        return torch.segment_reduce(grad_y, "sum", lengths=counts, axis=0)

    return dict(
        shape=f"{N}x{H}, G={G}", numel=grad_y.numel(), bytes=nbytes(grad_y) + G * H * grad_y.element_size(),
        ext=lambda: ops.grouped_bias_add_grad(grad_y, group_idx, 0),
        baselines={"index_add_": index_add, "per-group sum loop": per_group_loop, "segment_reduce": segment_reduce},
        # The floor of any kernel here: reading grad_y once (a full sum in the same dtype, the cheapest
        # reduction, same threads). Where the best alternative is within 2x of it, no kernel can be 2x faster
        # than that alternative.
        references={"floor: grad_y.sum()": lambda: grad_y.sum()}, floor="floor: grad_y.sum()")


def _count_cases(dt, dev):
    def leaf_(x):
        return x.to(dt).to(dev).requires_grad_()

    def idx():
        return torch.tensor([40, 0, 50, 38]).to(dev)

    te = torch_ext
    return [
        ("grouped", lambda: {"x": leaf_(torch.randn(4, 32, 256)), "b": leaf_(torch.randn(4, 256))},
         lambda x, b: te().grouped_bias_add(x, b)),
        ("grouped, group_idx", lambda: {"x": leaf_(torch.randn(128, 256)), "b": leaf_(torch.randn(4, 256)), "i": idx()},
         lambda x, b, i: te().grouped_bias_add(x, b, i, 1)),
        ("grouped, group_idx, probs", lambda: {"x": leaf_(torch.randn(128, 256)), "b": leaf_(torch.randn(4, 256)),
                                               "i": idx(), "p": torch.rand(128).to(dev).requires_grad_()},
         lambda x, b, i, p: te().grouped_bias_add(x, b, i, 1, probs=p)),
    ]


def _errors(err, expect):
    def idx(*v, dtype=torch.int64, d="cpu"):
        return torch.tensor(v, dtype=dtype).to(d)

    expect(err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), idx(4, d=d), 2)),
           """npu_ext.grouped_bias_add_grad: group_idx_type must be 0 (cumulative end offsets) or 1 (per-group counts), but got 2""")
    expect(err(lambda d: ops.grouped_bias_add_grad(t(4, 2, dtype=torch.float64, device=d).int(), idx(4, d=d))),
           """npu_ext.grouped_bias_add_grad: grad_y must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int32""")
    expect(err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), idx(4, dtype=torch.int16, d=d))),
           """npu_ext.grouped_bias_add_grad: group_idx must have dtype torch.int32 or torch.int64, but got torch.int16""")
    expect(err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), idx(4, d=d).reshape(1, 1))),
           """npu_ext.grouped_bias_add_grad: group_idx must be 1-D, but got a 2-D tensor of shape [1, 1]""")
    expect(err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), torch.full([2049], 4, device=d))),
           """npu_ext.grouped_bias_add_grad: group_idx may hold at most 2048 groups, but got 2049""")
    expect(err(lambda d: ops.grouped_bias_add_grad(t(2, 4, 2, device=d), idx(4, d=d))),
           """npu_ext.grouped_bias_add_grad: grad_y must be 2-D (N, H) when group_idx is given, but got a 3-D tensor of shape [2, 4, 2]""")
    expect(err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d))),
           """npu_ext.grouped_bias_add_grad: grad_y must be 3-D (G, C, H) when group_idx is None, but got a 2-D tensor of shape [4, 2]""")
    expect(err(lambda d: ops.grouped_bias_add_grad.out(t(4, 2, device=d), idx(1, 4, d=d), out=t(2, 3, device=d))),
           """npu_ext.grouped_bias_add_grad: output out must have shape [2, 2], but got [2, 3]""")
    expect(err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), idx(4, d="cpu" if d == "meta" else "meta")),
               devices=("cpu",)),
           """npu_ext.grouped_bias_add_grad: group_idx must be on the same device as grad_y (cpu), but got meta""")
    # N <= INT32_MAX rows with group_idx; a stride-0 view needs no memory
    def rows(n, d):
        return torch.zeros(1, 2, device=d).expand(n, 2)

    expect(err(lambda d: ops.grouped_bias_add_grad(rows(2**31, d), idx(2**31, d=d))),
           """npu_ext.grouped_bias_add_grad: grad_y may have at most 2147483647 rows (INT32_MAX: aclnn keeps group offsets in int32) when group_idx is given, but got 2147483648""")
    expect(err(lambda d: ops.grouped_bias_add(rows(2**31, d), t(1, 2, device=d), idx(2**31, d=d))),
           """npu_ext.grouped_bias_add: x may have at most 2147483647 rows (INT32_MAX: aclnn keeps group offsets in int32) when group_idx is given, but got 2147483648""")
    assert ops.grouped_bias_add_grad(rows(2**31 - 1, "meta"), idx(2**31 - 1, d="meta")).shape == (1, 2)

    # group_idx's values are data: Meta cannot see them (CPU only)
    def run(values, group_idx_type=0, rows=10, dtype=torch.int64):
        return lambda d: ops.grouped_bias_add_grad(t(rows, 3), torch.tensor(values, dtype=dtype), group_idx_type)

    cpu = ("cpu",)
    expect(err(run([3, -1, 10]), cpu),
           """npu_ext.grouped_bias_add_grad: group_idx must be non-negative, but group_idx[1] = -1""")
    expect(err(run([3, 2, 10]), cpu),
           """npu_ext.grouped_bias_add_grad: group_idx must be non-decreasing (cumulative end offsets), but group_idx[1] = 2 < group_idx[0] = 3""")
    expect(err(run([3, 11]), cpu),
           """npu_ext.grouped_bias_add_grad: group_idx[1] = 11 exceeds the number of rows of grad_y (10)""")
    expect(err(run([3, 9]), cpu),
           """npu_ext.grouped_bias_add_grad: the last entry of group_idx must equal the number of rows of grad_y (10), but got 9""")
    expect(err(run([]), cpu),
           """npu_ext.grouped_bias_add_grad: the last entry of group_idx must equal the number of rows of grad_y (10), but got an empty group_idx""")
    expect(err(run([3, -2, 9], 1, dtype=torch.int32), cpu),
           """npu_ext.grouped_bias_add_grad: group_idx must be non-negative, but group_idx[1] = -2""")
    expect(err(run([3, 4, 4], 1), cpu),
           """npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), but the first 3 counts already sum to 11""")
    expect(err(run([3, 4], 1), cpu),
           """npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), but they sum to 7""")
    # A huge count must not overflow the running sum into an accepted value.
    expect(err(run([2**62, 2**62, 2**62, 2**62 - 6], 1), cpu),
           """npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), but the first 1 counts already sum to 4611686018427387904""")


GROUP_END = torch.tensor([3, 3, 7, 12])  # cumulative ends; group 1 is empty
GROUP_COUNT = torch.tensor([3, 0, 4, 5], dtype=torch.int32)


def _grouped(group_idx=None, group_idx_type=0, probs=False):
    if probs:
        return (lambda x, b, p: torch_ext().grouped_bias_add(x, b, group_idx, group_idx_type, probs=p),
                lambda x, b, p: native_grouped_probs(x, b, p, group_idx, group_idx_type))
    return (lambda x, b: torch_ext().grouped_bias_add(x, b, group_idx, group_idx_type),
            lambda x, b: native_grouped(x, b, group_idx, group_idx_type))


# the forward op's samples (tests/ops/test_forward.py: opcheck, the composite against the CPU kernel): group_idx as
# ends and as counts (int32, an empty group), none (3-D x, a broadcast bias), probs (keyword and positional)
FORWARD_SAMPLES = (
    lambda: ((make([10, 7], torch.float32, layout="sliced"), make([3, 7], torch.float32), torch.tensor([2, 2, 10])),
             {}),
    lambda: ((make([10, 7], torch.bfloat16), make([3, 7], torch.bfloat16), torch.tensor([2, 0, 8], dtype=torch.int32),
              1), {"probs": make([10, 1], torch.float32)}),
    lambda: ((make([3, 4, 7], torch.float32, layout="transposed"), make([3, 7], torch.float32), None, 0,
              make([3, 4], torch.bfloat16)), {}),
    lambda: ((make([3, 4, 5], torch.float16), make([3, 1, 5], torch.float16), None, 0), {}),
)


# The executor-cache cases of its aclnn entry points (tests/npu/test_npu_cache*.py): variant -> (op, args) on host
# tensors; each variant changes one thing torch_npu must hash, "base" repeats the call.
def _cache_grouped(idx_values, idx_type):
    """grouped_bias_add_grad with group_idx `idx_values` of type `idx_type` (0: ends, V1; 1: counts, V2)."""
    def make(variant):
        gy, idx = cache_rand(6, 8), torch.tensor(idx_values)
        if variant == "shape":
            gy = cache_rand(6, 16)
        elif variant == "dtype":
            gy = gy.half()
        elif variant == "stride":
            gy = cache_transposed(6, 8)
        elif variant == "index dtype":
            idx = idx.int()
        elif variant == "no index":
            gy, idx = cache_rand(3, 2, 8), None
        return torch.ops.npu_ext.grouped_bias_add_grad, (gy, idx, idx_type)
    return make


INFO = OpInfo(
    name="grouped_bias_add_grad", variants=("end", "count", "3d"), outputs=("out",), reference=grouped_bias_add_grad,
    make=_make, range_make=_range, random=_random, forward="grouped_bias_add", forward_reference=grouped_bias_add,
    function=lambda x, b, group_idx=None, group_idx_type=0: torch_ext().grouped_bias_add(x, b, group_idx, group_idx_type),
    native=native_grouped, function_inputs=_function_inputs,
    gradcheck=(
        ("grouped_end", *_grouped(GROUP_END, 0), lambda: [leaf((12, 6), -2, 2), leaf((4, 6), -2, 2)]),
        ("grouped_count", *_grouped(GROUP_COUNT, 1), lambda: [leaf((12, 6), -2, 2), leaf((4, 6), -2, 2)]),
        ("grouped_3d", *_grouped(), lambda: [leaf((4, 3, 6), -2, 2), leaf((4, 1, 6), -2, 2)]),
        ("grouped_probs_count", *_grouped(GROUP_COUNT, 1, probs=True),
         lambda: [leaf((12, 6), -2, 2), leaf((4, 6), -2, 2), leaf((12, 1), 0, 1)]),
        ("grouped_probs_end", *_grouped(GROUP_END, 0, probs=True),
         lambda: [leaf((12, 6), -2, 2), leaf((4, 6), -2, 2), leaf((12,), -1, 1)]),
        ("grouped_probs_3d", *_grouped(probs=True),
         lambda: [leaf((4, 3, 6), -2, 2), leaf((4, 6), -2, 2), leaf((4, 3), 0, 1)]),
    ),
    backward_gradcheck=(
        ("grouped_bias_add_grad", lambda gy: ops.grouped_bias_add_grad(gy, GROUP_END, 0), lambda: [leaf((12, 6), -2, 2)], True),
        ("grouped_bias_add_grad_counts", lambda gy: ops.grouped_bias_add_grad(gy, GROUP_COUNT, 1),
         lambda: [leaf((12, 6), -2, 2)], False),
        ("grouped_bias_add_grad_3d", lambda gy: ops.grouped_bias_add_grad(gy), lambda: [leaf((4, 3, 6), -2, 2)], True),
    ),
    aclnn=("aclnnGroupedBiasAddGrad", "aclnnGroupedBiasAddGradV2"), probe=_probe,
    bench=(("grouped_bias_add_grad", _bench),), training=("end", "x + bias[row_group]", 4, True),
    count_cases=_count_cases, errors=_errors,
    forward_samples=FORWARD_SAMPLES,
    cache_cases={
        "aclnnGroupedBiasAddGrad": (_cache_grouped([2, 4, 6], 0),
                                    ("shape", "dtype", "stride", "index dtype", "no index"), True),
        "aclnnGroupedBiasAddGradV2": (_cache_grouped([2, 2, 2], 1), ("shape", "dtype", "stride", "index dtype"), True)},
    kernel_counts={"grouped": (1, 1), "grouped, group_idx": (2, None), "grouped, group_idx, probs": (None, None)},
)
