"""The five operators on CPU against the float64 oracle of the operator contract (docs/operators.md): every dtype,
layout and edge case."""

import math

import pytest
import torch

from torch_ext.testing import oracle
from torch_ext.testing import samples
from torch_ext.testing.inputs import LAYOUTS, make, relayout
from helpers import bits, on_1_and_2_threads
from torch_ext.testing.tolerances import assert_accurate

pytestmark = [pytest.mark.asan, pytest.mark.release]

ops = torch.ops.npu_ext


# --------------------------------------------------------------------------------------------------------
# Every op, variant, dtype and layout of the sample table (samples.py) against the float64 oracle.
VALUE_SAMPLES = [(s, layout) for layout in LAYOUTS for s in samples.samples("test", layout=layout)]


@pytest.mark.parametrize("sample,layout", VALUE_SAMPLES, ids=[f"{s.id}-{lay}" for s, lay in VALUE_SAMPLES])
def test_values(sample, layout):
    outs = sample.run()
    for out, exp, meta, name in zip(outs, sample.expected(), sample.run_meta(), sample.info.outputs):
        assert out.dtype == meta.dtype == sample.dtype and out.shape == meta.shape and out.is_contiguous(), name
        assert_accurate(out, exp, sample.dtype, f"{sample.id} {layout} {name}")
    if sample.info.name == "scaled_masked_softmax_backward":
        g, _, mask, _ = sample.args
        m = oracle.causal_mask(*g.shape[-2:]) if sample.kwargs["fix_triu_mask"] else mask
        assert torch.all(outs[0][m.expand(g.shape)] == 0)
    if sample.info.name == "grouped_bias_add_grad" and sample.variant != "3d":
        counts = sample.args[1].diff(prepend=sample.args[1].new_zeros(1)) if sample.variant == "end" else sample.args[1]
        assert torch.all(outs[0][counts == 0] == 0)


# --------------------------------------------------------------------------------------------------------
# gelu_backward_v2


@pytest.mark.parametrize("g_shape,x_shape,out_shape", [
    ([5, 1, 7], [1, 4, 7], [5, 4, 7]),
    ([7], [3, 7], [3, 7]),
    ([3, 7], [], [3, 7]),
    ([], [2, 3], [2, 3]),
    ([], [], []),
])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_v2_broadcast(g_shape, x_shape, out_shape, approximate):
    g = make(g_shape, torch.float32)
    x = make(x_shape, torch.float32)
    out = ops.gelu_backward_v2(g, x, approximate=approximate)
    assert list(out.shape) == out_shape
    assert_accurate(out, oracle.gelu_backward_v2(g, x, approximate), torch.float32)


@pytest.mark.parametrize("g_dtype,x_dtype,expected", [
    (torch.float16, torch.float32, torch.float32),
    (torch.float32, torch.bfloat16, torch.float32),
    (torch.float16, torch.bfloat16, torch.float32),
    (torch.bfloat16, torch.float64, torch.float64),
])
def test_gelu_backward_v2_mixed_dtypes(g_dtype, x_dtype, expected):
    g = make([4, 9], g_dtype)
    x = make([4, 9], x_dtype)
    out = ops.gelu_backward_v2(g, x)
    assert out.dtype == expected == torch.result_type(g, x)
    assert_accurate(out, oracle.gelu_backward_v2(g, x), expected)


def test_gelu_backward_v2_zero_dim_does_not_promote():
    g = torch.tensor(1.5, dtype=torch.float32)  # a 0-dim fp32 tensor does not lift an fp16 tensor
    x = make([6], torch.float16)
    out = ops.gelu_backward_v2(g, x)
    assert out.dtype == torch.float16
    assert_accurate(out, oracle.gelu_backward_v2(g, x), torch.float16)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_v2_special_values(approximate):
    x = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0, math.inf, -math.inf, math.nan])
    g = torch.ones_like(x)
    out = ops.gelu_backward_v2(g, x, approximate)
    assert_accurate(out, oracle.gelu_backward_v2(g, x, approximate), torch.float32)
    assert out[0] == 0.5 and out[4] == 1.0 and out[5] == 0.0


@pytest.mark.parametrize("shape", [[0], [3, 0], [0, 5, 2]])
def test_gelu_backward_v2_empty(shape):
    out = ops.gelu_backward_v2(torch.empty(shape), torch.empty(shape), "tanh")
    assert list(out.shape) == shape


def test_gelu_backward_v2_out():
    g, x = make([6, 8], torch.float16), make([6, 8], torch.float16)
    out = torch.full([8, 6], 7.0, dtype=torch.float16).t()  # a transposed destination
    assert ops.gelu_backward_v2.out(g, x, "tanh", grad_input=out) is None
    torch.testing.assert_close(out, ops.gelu_backward_v2(g, x, "tanh"), atol=0, rtol=0)


# --------------------------------------------------------------------------------------------------------
# prelu_backward


@pytest.mark.parametrize("x_shape,w_shape,g_shape", [
    ([], [1], []),                    # 0-dim input: C = 1
    ([17], [1], [17]),                # 1-D input: C = 1
    ([17], [], [1]),                  # 0-dim weight, broadcast grad_output
    ([33, 8], [8], [33, 8]),          # (N, C): channel is the innermost dim
    ([33, 8], [1], [8]),              # one weight for C > 1 channels
    ([2, 3, 4, 5, 6], [3], [3, 1, 1, 1]),
    ([2, 3, 1, 1, 1, 1, 1, 2], [3], [2, 3, 1, 1, 1, 1, 1, 2]),  # rank 8
    ([3, 1, 4], [1], [3, 1, 4]),      # C == 1 with dim > 1
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_prelu_backward_shapes(x_shape, w_shape, g_shape, dtype):
    x, g, w = make(x_shape, dtype), make(g_shape, dtype), make(w_shape, dtype, low=-1, high=1)
    gi, gw = ops.prelu_backward(g, x, w)
    egi, egw = oracle.prelu_backward(g, x, w)
    assert list(gi.shape) == x_shape and list(gw.shape) == w_shape
    assert_accurate(gi, egi, dtype)
    assert_accurate(gw, egw, dtype)


def test_prelu_backward_large_reduction():
    # Many reduction blocks per channel, and a channel count that does not divide the block size.
    x = make([64, 3, 1031], torch.float32)
    g = make([64, 3, 1031], torch.float32)
    w = torch.tensor([0.25, -0.5, 2.0])
    gi, gw = ops.prelu_backward(g, x, w)
    egi, egw = oracle.prelu_backward(g, x, w)
    assert_accurate(gi, egi, torch.float32)
    assert_accurate(gw, egw, torch.float32)


def test_prelu_backward_nan_and_zero_take_negative_branch():
    x = torch.tensor([[math.nan, 0.0, -0.0, 2.0]]).t().contiguous()  # (4, 1): C = 1
    g = torch.tensor([[1.0, 3.0, 5.0, 7.0]]).t().contiguous()
    w = torch.tensor([0.5])
    gi, gw = ops.prelu_backward(g, x, w)
    assert gi.flatten().tolist() == [0.5, 1.5, 2.5, 7.0]
    assert math.isnan(gw.item())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16bit_conversions_are_exact_for_every_value(dtype):
    """Every 16-bit pattern is widened exactly and every fp32 product is rounded to nearest even, in every
    kernel variant (the DEFAULT variant on x86-64 converts with its own integer code). prelu_backward with
    x > 0 passes g through (widen, then narrow), with x < 0 returns w * g computed in fp32 and rounded once:
    compared bitwise with PyTorch's own conversions, over all 65536 bit patterns of g (zeros, subnormals,
    infinities, NaNs included) and weights that make the products round, overflow and underflow."""
    g = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    nan = torch.isnan(g)
    gi, _ = ops.prelu_backward(g, torch.ones_like(g), torch.ones(1, dtype=dtype))
    assert torch.equal(gi.view(torch.int16)[~nan], g.view(torch.int16)[~nan])
    assert torch.isnan(gi[nan]).all()
    for w in (0.7, 1.0 / 3.0, 3.0e-3, 1.7e3, -2.9e-5):
        w16 = torch.tensor([w], dtype=dtype)
        gi, _ = ops.prelu_backward(g, -torch.ones_like(g), w16)
        expected = (g.float() * w16.float()).to(dtype)
        same = gi.view(torch.int16) == expected.view(torch.int16)
        both_nan = torch.isnan(gi) & torch.isnan(expected)
        assert (same | both_nan).all(), (w, g[~(same | both_nan)][:8], gi[~(same | both_nan)][:8])


@pytest.mark.parametrize("layout", ["rows", "segments"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_prelu_backward_weight_terms_rounded_one_by_one(dtype, layout):
    """Each grad_weight term x * g is rounded to the dtype before it is summed (docs/operators.md, "Semantics
    notes"), in every kernel variant (x86's DEFAULT rounds fp16 in fp32 arithmetic). Channel c holds two terms:
    x0 * g[c], over every finite 16-bit g, and -t[c], t being that product rounded by PyTorch. Rounded
    exactly, they cancel to 0; a term left unrounded, or rounded to another neighbour, leaves the difference.
    Where t is infinite, the second term is NaN (its grad_input is infinite), and so is the sum (the next test
    checks that boundary with a finite second term)."""
    g = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    g = g[torch.isfinite(g)]
    w = torch.ones(g.numel(), dtype=dtype)
    for x0 in (-0.7, -1.0 / 3.0, -3.0, -1.7e3, -3.0e-3):
        x0 = torch.tensor(x0, dtype=dtype)
        t = (x0.float() * g.float()).to(dtype)
        x = torch.stack([x0.expand_as(g), -torch.ones_like(g)])  # (2, C); g1 = t: the second term is -t
        gy = torch.stack([g, t])
        if layout == "segments":  # (1, C, 2): one channel's two terms in a row of the innermost dim
            x, gy = x.t().contiguous()[None], gy.t().contiguous()[None]
        _, gw = ops.prelu_backward(gy, x, w)
        inf = torch.isinf(t)
        assert torch.isnan(gw[inf]).all()
        assert (gw[~inf] == 0).all(), (x0, g[~inf][gw[~inf] != 0][:8], gw[~inf][gw[~inf] != 0][:8])


def test_prelu_backward_fp16_weight_term_rounds_to_infinity():
    """An fp16 term from 65520 up (fp16's largest value, 65504, plus half an ulp: a tie, whose even neighbour is
    2^16) is infinite. With a second term of 64 against it: -65472 + 64 is finite, -65520 and -65568 are -inf
    (a term kept at -2^16 would sum to -65472)."""
    g = torch.tensor([[21824.0, 21840.0, 21856.0], [-64.0, -64.0, -64.0]], dtype=torch.float16)
    x = torch.tensor([[-3.0] * 3, [-1.0] * 3], dtype=torch.float16)
    _, gw = ops.prelu_backward(g, x, torch.ones(3, dtype=torch.float16))
    assert gw.tolist() == [-65408.0, -math.inf, -math.inf]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16bit_conversions_of_the_elementwise_kernels(dtype):
    """The elementwise kernels (logit_grad, gelu, gelu_backward_v2) load and store 16-bit values in their own lane
    order (bf16 on AVX-512: even and odd elements apart, narrowed by vcvtne2ps2bf16 where the CPU has it, with
    the exact integer path for subnormals). logit_grad at x = 1/2 is 4 dy and at x = 1/3 is dy / (2/9), one fp32
    expression: compared bitwise with PyTorch's conversions over all 65536 patterns of dy, in an odd length
    (partial vectors) and from an offset (unaligned)."""
    dy = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    dy = torch.cat([dy, dy[:77]])[3:]  # 65610 elements, not a multiple of any vector width
    for xv in (0.5, 1.0 / 3.0, 0.999):
        x = torch.full_like(dy, xv)
        xf = x.float()
        expected = (dy.float() / (xf * (1 - xf))).to(dtype)
        got = ops.logit_grad(x, dy)
        same = got.view(torch.int16) == expected.view(torch.int16)
        both_nan = torch.isnan(got) & torch.isnan(expected)
        assert (same | both_nan).all(), (xv, dy[~(same | both_nan)][:8], got[~(same | both_nan)][:8])

@pytest.mark.parametrize("x_shape,w_shape", [([0, 6, 5], [6]), ([4, 0], [1]), ([0], [1])])
def test_prelu_backward_empty(x_shape, w_shape):
    gi, gw = ops.prelu_backward(torch.empty(x_shape), torch.empty(x_shape), torch.ones(w_shape))
    assert list(gi.shape) == x_shape
    assert torch.equal(gw, torch.zeros(w_shape))  # a reduction over nothing


def test_prelu_backward_out():
    x, g, w = make([4, 6, 5], torch.float32), make([4, 6, 5], torch.float32), make([6], torch.float32)
    gi = torch.empty([5, 6, 4]).permute(2, 1, 0)
    gw = torch.full([12], 9.0)[::2]
    assert ops.prelu_backward.out(g, x, w, grad_input=gi, grad_weight=gw) is None
    egi, egw = ops.prelu_backward(g, x, w)
    assert torch.equal(gi, egi) and torch.equal(gw, egw)


# --------------------------------------------------------------------------------------------------------
# grouped_bias_add_grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_grouped_bias_add_grad_wide_rows(dtype):
    # 9001 columns: beyond the kernel's widest column block for every dtype (8192 fp32 / fp64, 4096 16-bit), with
    # a ragged last block; 150 rows in one group span three row chunks (64 rows at least each), the last one
    # ending in 2 rows after its passes of 4 (fp32 / fp64 blocks wider than 8 KB); an empty group between them.
    grad_y = make([160, 9001], dtype)
    group_idx = torch.tensor([3, 3, 153, 160])
    out = ops.grouped_bias_add_grad(grad_y, group_idx)
    assert_accurate(out, oracle.grouped_bias_add_grad(grad_y, group_idx), dtype)
    one, two = on_1_and_2_threads(lambda: ops.grouped_bias_add_grad(grad_y, group_idx))
    assert torch.equal(bits(one[0]), bits(two[0]))


def test_grouped_bias_add_grad_chunk_sums_of_growing_and_shrinking_calls():
    # Groups of several row chunks keep their chunk sums in memory the calling thread reuses from call to call:
    # a call that needs more than the one before (12 chunks of 2048 columns after 3 of 512), then less again.
    cases = [([600, 512], [600]), ([768, 2048], [5, 768]), ([600, 512], [1, 600]), ([768, 2048], [768])]
    for _ in range(2):
        for shape, ends in cases:
            # Positive values: sums of hundreds of rows without cancellation, checked to fp32's relative accuracy.
            grad_y, group_idx = make(shape, torch.float32, low=0.0, high=1.0), torch.tensor(ends)
            out = ops.grouped_bias_add_grad(grad_y, group_idx)
            assert_accurate(out, oracle.grouped_bias_add_grad(grad_y, group_idx), torch.float32)


@pytest.mark.parametrize("dtype,hidden", [(torch.float32, 512), (torch.bfloat16, 512), (torch.float16, 520)])
def test_grouped_bias_add_grad_large_output(dtype, hidden):
    # A 64 MB input and an output of 1 MB or more: the AVX2 / AVX-512 kernels write single-chunk groups with
    # non-temporal stores (whole vectors: 520 fp16 columns end in a partial one and take the normal stores).
    # Groups of 30-45 rows, one empty, one of 500 rows (several chunks). The smaller call on the first groups'
    # rows (2-4 MB, normal stores) must give the same bits: a group's sum depends on its rows alone.
    rows = 64 * 2**20 // (hidden * torch.finfo(dtype).bits // 8)
    sizes = [500, 0] + [30 + (7 * j) % 16 for j in range(rows // 30)]
    ends = torch.tensor(sizes).cumsum(0)
    ends = torch.cat([ends[ends < rows], torch.tensor([rows])])  # the last group takes the rows left
    grad_y = make([rows, hidden], dtype, low=0.0, high=1.0)  # sums without cancellation, as above
    assert ends.numel() * hidden * grad_y.element_size() >= 2**20
    out = ops.grouped_bias_add_grad(grad_y, ends)
    assert_accurate(out, oracle.grouped_bias_add_grad(grad_y, ends), dtype)
    k = 40
    small = ops.grouped_bias_add_grad(grad_y[: int(ends[k - 1])], ends[:k])
    assert torch.equal(bits(out[:k]), bits(small))
    # Into an `out` that starts off a vector boundary (one element in): normal stores, the same bits.
    buf = torch.empty(out.numel() + 1, dtype=dtype)
    shifted = buf[1:].view(out.shape)
    ops.grouped_bias_add_grad.out(grad_y, ends, 0, out=shifted)
    assert torch.equal(bits(shifted), bits(out))


def test_grouped_bias_add_grad_long_group_small_hidden():
    grad_y = make([50000, 3], torch.float32)  # many row blocks in one group
    group_idx = torch.tensor([1, 49000, 50000])
    out = ops.grouped_bias_add_grad(grad_y, group_idx)
    assert_accurate(out, oracle.grouped_bias_add_grad(grad_y, group_idx), torch.float32)


@pytest.mark.parametrize("grad_y_shape,group_idx,expected_shape", [
    ([0, 4], [0, 0], [2, 4]),  # no rows: every group is empty
    ([0, 4], [], [0, 4]),      # no groups and no rows
    ([5, 0], [2, 5], [2, 0]),  # no columns
    ([0, 3, 4], None, [0, 4]),
    ([2, 0, 4], None, [2, 4]),  # a sum over nothing
])
def test_grouped_bias_add_grad_empty(grad_y_shape, group_idx, expected_shape):
    gi = None if group_idx is None else torch.tensor(group_idx, dtype=torch.int64)
    out = ops.grouped_bias_add_grad(torch.ones(grad_y_shape), gi)
    assert torch.equal(out, torch.zeros(expected_shape))


def test_grouped_bias_add_grad_max_groups():
    group_idx = torch.arange(1, 2049, dtype=torch.int32)
    grad_y = make([2048, 8], torch.float32)
    out = ops.grouped_bias_add_grad(grad_y, group_idx)
    assert torch.equal(out, grad_y)


def test_grouped_bias_add_grad_out():
    grad_y = make([30, 7], torch.bfloat16)
    gi = torch.tensor([10, 10, 30])
    out = torch.full([7, 3], 5.0, dtype=torch.bfloat16).t()
    assert ops.grouped_bias_add_grad.out(grad_y, gi, 0, out=out) is None
    assert torch.equal(out, ops.grouped_bias_add_grad(grad_y, gi))


# --------------------------------------------------------------------------------------------------------
# scaled_masked_softmax_backward
def _softmax_inputs(shape, dtype, mask_shape, layout="contiguous", scale=1.0):
    """y from the forward convention softmax((x * scale).masked_fill(mask, -10000)), so that masked
    positions hold (near) zero probability, as in training. g and y are given the requested layout."""
    x = make(shape, torch.float64, layout=layout)
    mask = torch.rand(mask_shape) < 0.3
    y = torch.softmax((x * scale).masked_fill(mask, -10000.0), dim=-1).to(dtype)
    g = make(shape, dtype, layout=layout)
    return g, relayout(y, layout), mask


def test_scaled_masked_softmax_backward_masked_rows_and_nonfinite():
    g, y, mask = _softmax_inputs([1, 2, 4, 8], torch.float32, [1, 2, 4, 8])
    mask[0, 0, 1] = True   # a fully masked row
    mask[0, 1, 2] = False  # a fully unmasked row
    mask[0, 1, 3, 0] = True
    g[0, 1, 3, 0] = math.nan  # NaN/Inf at masked positions become exactly 0 there
    y[0, 0, 1, 3] = math.inf
    out = ops.scaled_masked_softmax_backward(g, y, mask, 1.0)
    assert torch.all(out[mask] == 0)
    assert torch.equal(out[0, 0, 1], torch.zeros(8))
    expected = oracle.scaled_masked_softmax_backward(g, y, mask, 1.0)
    # the NaN at a masked position still enters its row sum (the contract: the sum runs over the whole row)
    assert torch.isnan(out[0, 1, 3][~mask[0, 1, 3]]).all()
    assert_accurate(out, expected, torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("s1,s2", [(7, 7), (5, 11), (11, 5)])
def test_scaled_masked_softmax_backward_fix_triu_mask(dtype, s1, s2):
    causal = oracle.causal_mask(s1, s2)
    x = make([2, 2, s1, s2], torch.float64)
    y = torch.softmax(x.masked_fill(causal, -10000.0), -1).to(dtype)
    g = make([2, 2, s1, s2], dtype)
    ignored = torch.ones(1, 1, 1, 1, dtype=torch.int8)  # ignored when fix_triu_mask=True
    out = ops.scaled_masked_softmax_backward(g, y, ignored, 0.5, True)
    assert_accurate(out, oracle.scaled_masked_softmax_backward(g, y, None, 0.5, True), dtype)
    assert torch.all(out[..., causal] == 0)


@pytest.mark.parametrize("shape", [[0, 2, 3, 4], [2, 2, 3, 0], [1, 1, 0, 4]])
def test_scaled_masked_softmax_backward_empty(shape):
    g = torch.empty(shape)
    mask = torch.zeros([1, 1] + shape[2:], dtype=torch.bool)
    assert ops.scaled_masked_softmax_backward(g, g, mask).shape == g.shape


def test_scaled_masked_softmax_backward_max_last_dim():
    g, y, mask = _softmax_inputs([1, 1, 2, 4096], torch.float32, [1, 1, 2, 4096])
    out = ops.scaled_masked_softmax_backward(g, y, mask)
    assert_accurate(out, oracle.scaled_masked_softmax_backward(g, y, mask), torch.float32)


def test_scaled_masked_softmax_backward_out_aliasing_grad_output():
    g, y, mask = _softmax_inputs([2, 2, 5, 6], torch.float32, [1, 1, 5, 6])
    expected = ops.scaled_masked_softmax_backward(g, y, mask, 3.0)
    assert ops.scaled_masked_softmax_backward.out(g, y, mask, 3.0, out=g) is None  # in place
    assert torch.equal(g, expected)


@pytest.mark.parametrize("case", samples.PRELU_DEVICE_CASES, ids=lambda c: c[0])
def test_prelu_backward_follows_the_a2_a3_kernel(case):
    """grad_weight as the Atlas A2/A3 NPU kernel computes it (docs/operators.md, "Semantics notes"): NaN for a channel with an
    infinite or NaN grad_input or an x = +inf, NaN grad_input where x > 0 for a non-finite weight, and each term
    rounded to the dtype before the sum. The expected values are written out; the oracle agrees."""
    _, dtype, x, g, w, gi, gw = case
    x, g, w = (torch.tensor(v, dtype=dtype) for v in (x, g, w))
    got = ops.prelu_backward(g, x, w)
    for out, expected in zip(got, (gi, gw)):
        torch.testing.assert_close(out, torch.tensor(expected, dtype=dtype), rtol=0, atol=0, equal_nan=True)
    for out, expected in zip(got, oracle.prelu_backward(g, x, w)):
        assert_accurate(out, expected, dtype)


# --------------------------------------------------------------------------------------------------------
# logit_grad



NAN, INF = math.nan, math.inf
LOGIT_X = [-0.5, 0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.5, INF, -INF, NAN]


@pytest.mark.parametrize("eps,expected", [
    # eps < 0: NaN outside [0, 1]; x = 0 or 1 gives Inf
    (-1.0, [NAN, INF, 1 / 0.09, 1 / 0.1875, 4.0, 1 / 0.1875, 1 / 0.09, INF, NAN, NAN, NAN, NAN]),
    # eps = 0: 0 outside [0, 1], and for NaN x (the NPU kernel keeps x only where x >= eps and x <= 1 - eps)
    (0.0, [0.0, INF, 1 / 0.09, 1 / 0.1875, 4.0, 1 / 0.1875, 1 / 0.09, INF, 0.0, 0.0, 0.0, 0.0]),
    # eps > 0: 0 outside [eps, 1 - eps] and for NaN x
    (0.25, [0.0, 0.0, 0.0, 1 / 0.1875, 4.0, 1 / 0.1875, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    (0.5, [0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    # eps = 1 and eps > 1: 0 everywhere (the doc's NaN/Inf sentences are the forward op's), NaN x included
    (1.0, [0.0] * 12),
    (2.0, [0.0] * 12),
    (INF, [0.0] * 12),
    # eps = NaN behaves like eps < 0
    (NAN, [NAN, INF, 1 / 0.09, 1 / 0.1875, 4.0, 1 / 0.1875, 1 / 0.09, INF, NAN, NAN, NAN, NAN]),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_logit_grad_edge_table(eps, expected, dtype):
    x = torch.tensor(LOGIT_X, dtype=dtype)
    out = ops.logit_grad(x, torch.ones_like(x), eps)
    assert_accurate(out, torch.tensor(expected, dtype=torch.float64), dtype, f"eps={eps}")
    assert_accurate(out, oracle.logit_grad(x, torch.ones_like(x), eps), dtype, f"eps={eps}")


def test_logit_grad_dy_edge_values():
    x = torch.tensor([0.5, 0.5, 0.5, 0.0, 1.0, 2.0])
    dy = torch.tensor([INF, -INF, NAN, 0.0, 0.0, INF])
    out = ops.logit_grad(x, dy, -1.0)
    expected = torch.tensor([INF, -INF, NAN, NAN, NAN, NAN], dtype=torch.float64)  # 0 / 0 = NaN at x = 0, 1
    assert_accurate(out, expected, torch.float32)


def test_logit_grad_eps_rounded_to_fp32():
    # eps = 0.1 rounds up in fp32 (0.100000001...), so x = 0.1 (fp32: 0.100000001...) is exactly on the edge
    x = torch.tensor([0.1], dtype=torch.float32)
    assert ops.logit_grad(x, torch.ones(1), 0.1).item() != 0.0
    assert ops.logit_grad(x, torch.ones(1), 0.1000001).item() == 0.0


@pytest.mark.parametrize("shape", [[0], [4, 0, 2]])
def test_logit_grad_empty(shape):
    assert list(ops.logit_grad(torch.empty(shape), torch.empty(shape)).shape) == shape


def test_logit_grad_out():
    x = make([5, 6], torch.float16, low=0, high=1)
    dy = make([5, 6], torch.float16)
    dx = torch.empty([6, 5], dtype=torch.float16).t()
    assert ops.logit_grad.out(x, dy, 0.01, dx=dx) is None
    assert torch.equal(dx, ops.logit_grad(x, dy, 0.01))


# --------------------------------------------------------------------------------------------------------
# .out overlapping an input (issue 10): every op computes the result as if the output were separate.
@pytest.mark.parametrize("shift", [1, 2, -1])
def test_partially_overlapping_out(shift):
    n = 24
    for name in ("gelu_backward_v2", "logit_grad"):
        storage = make([n + 4], torch.float32, low=0.05, high=0.95)
        a = storage[2:2 + n].view(4, 6)
        b = make([4, 6], torch.float32, low=0.05, high=0.95)
        args = (b, a) if name == "gelu_backward_v2" else (a, b)
        expected = getattr(oracle, name)(*[x.clone() for x in args])
        out = storage[2 + shift:2 + shift + n].view(4, 6)
        getattr(ops, name).out(*args, **{"gelu_backward_v2": {"grad_input": out}, "logit_grad": {"dx": out}}[name])
        assert_accurate(out, expected, torch.float32, f"{name} shift {shift}")


def test_issue_10_meta_mask_is_an_error():
    g = torch.randn(1, 1, 2, 3)
    y = torch.softmax(torch.randn(1, 1, 2, 3), -1)
    m = torch.zeros(1, 1, 2, 3, dtype=torch.bool, device="meta")
    for call in (lambda: ops.scaled_masked_softmax_backward(g, y, m, 1.0, True),
                 lambda: ops.scaled_masked_softmax(g, m, 1.0, True)):
        with pytest.raises(RuntimeError, match=r"^npu_ext\.scaled_masked_softmax(_backward)?: mask must be on the same device"):
            call()
