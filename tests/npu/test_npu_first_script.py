"""A user's first script on the npu device, inside the real torch_npu runtime on the fake CANN of ``make test-npu``.

What such a script does first, each through the operators torch_npu really calls (tests/fake_cann/opapi):

* ``torch.randn`` / ``normal_`` (aclnnInplaceNormal) and ``torch.rand`` / ``uniform_`` (aclnnInplaceUniform), fp32,
  fp16 and bf16: their moments within the bounds stated at each test (five standard errors of 200000 draws: a correct
  generator fails one of them about once in a million runs), the range of uniform values, and the generator's contract
  (op-plugin passes the NPU generator's seed and its Philox offset, which every draw advances): the same seed gives the
  same values, another seed or the next draw other values, a saved and restored RNG state the same values again. The
  values themselves cannot be a real NPU's (tests/fake_cann/opapi/random.cpp says why).
* ``print(t)`` / ``str(t)``: torch's formatter on an npu tensor reaches masked_select (aclnnMaskedSelect, a
  data-dependent output shape), ceil, isfinite, abs, min / max; the text equals the CPU tensor's but for the device
  suffix. ``masked_select`` itself against the CPU, broadcast masks and an empty selection included.
* ``torch.optim.SGD(momentum=0.9)`` and ``torch.optim.AdamW``, at their defaults and with ``foreach=True``: on npu
  parameters the default torch_npu's torch takes the foreach path (op-plugin: aclnnForeachAddListV2,
  aclnnForeachMulScalarV2, aclnnForeachLerpScalar, ..., or their V1 forms), torch_npu 2.6 on the fake the per-tensor
  one (it wants a known CANN version for foreach); on the CPU the per-tensor one. Three steps on each give bitwise the
  CPU's parameters and states (the fake computes each tensor with the CPU ATen op of the same formula, the same IEEE
  operations as the CPU optimizer's per-tensor path); the operators' launches are counted.
* README's executed example, ``examples/train_tiny.py --device npu``, run in its own process, and the operators it
  reaches beyond the above, each launched once and bitwise the CPU's result: ``torch.argsort`` / ``torch.sort`` with
  ``stable=True`` (aclnnSort), ``torch.bincount`` (aclnnBincount), ``torch.cumsum`` (aclnnCumsum), ``index_copy`` /
  ``index_copy_`` (aclnnIndexCopy, aclnnInplaceIndexCopy), ``scatter_`` and the backward of ``max(dim)``
  (aclnnInplaceScatter), the backward of ``sigmoid`` (aclnnSigmoidBackward) and of ``gelu`` (aclnnGeluBackward: the
  tanh form whatever ``approximate`` says, as the A2 kernel), ``F.binary_cross_entropy_with_logits`` forward and
  backward (aclnnBinaryCrossEntropyWithLogits, aclnnBinaryCrossEntropyWithLogitsBackward).

Run: ``make test-npu NPU_TESTS=tests/npu/test_npu_first_script.py``. Skipped (the whole module) where torch_npu cannot be
imported or torch_ext did not load its NPU kernels, or on a real CANN (no fake counters); under make test-npu a skip is
a failure.
"""

import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import npu_backend
import fake_cann_lib
import paths

_AVAILABLE, _REASON = npu_backend.npu_device_available()


def _fake_opapi():
    return fake_cann_lib.opapi()


_LIB = _fake_opapi() if _AVAILABLE else None
pytestmark = pytest.mark.skipif(_LIB is None, reason=_REASON or "not the fake CANN (no fake_opapi_calls)")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
N = 200_000  # draws per moment test
Z = 5.0  # bound: five standard errors


class Launches:
    """Phase-2 launches of aclnn operators counted by the fake libopapi.so while the block runs (after a
    synchronisation: the task queue launches asynchronously). A name counts its V1 and V2 forms together."""

    def __init__(self, *ops):
        self.ops = ops

    def _now(self):
        return {op: sum(_LIB.fake_opapi_calls(f"aclnn{op}{v}".encode()) for v in ("", "V2")) for op in self.ops}

    def __enter__(self):
        torch.npu.synchronize()
        self.before = self._now()
        return self

    def __exit__(self, *exc):
        torch.npu.synchronize()
        after = self._now()
        self.count = {op: after[op] - self.before[op] for op in self.ops}


# ----------------------------------------------------------------------------------------------------------
# random numbers
def _moments(x):
    x = x.cpu().double()
    assert torch.isfinite(x).all()
    return x.mean().item(), x.std().item()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_randn_moments(dtype):
    """torch.randn on npu: one aclnnInplaceNormal launch; mean 0 within 5 / sqrt(N), std 1 within 5 / sqrt(2 N) plus
    the dtype's rounding (bf16: 2^-8 relative at most); the fractions within one and two standard deviations are the
    normal law's (68.27 %, 95.45 %) within five binomial standard errors."""
    with Launches("InplaceNormal") as launches:
        x = torch.randn(N, device="npu", dtype=dtype)
    assert launches.count == {"InplaceNormal": 1}
    assert x.dtype == dtype and x.device.type == "npu" and x.shape == (N,)
    mean, std = _moments(x)
    assert abs(mean) < Z / math.sqrt(N), mean
    assert abs(std - 1) < Z / math.sqrt(2 * N) + 2 ** -8, std
    a = x.cpu().double().abs()
    for k, p in [(1, 0.682689), (2, 0.954500)]:
        frac = (a < k).double().mean().item()
        assert abs(frac - p) < Z * math.sqrt(p * (1 - p) / N), (k, frac)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_normal_mean_std(dtype):
    """normal_(mean=3, std=0.5) on npu: mean 3 within 5 * 0.5 / sqrt(N) plus the dtype's rounding of 3 (fp16 / bf16:
    values near 3 are spaced 2^-9 / 2^-6 apart, so 2^-10 / 2^-7 at most), std 0.5 within 5 * 0.5 / sqrt(2 N) plus
    the relative rounding."""
    x = torch.empty(N, device="npu", dtype=dtype).normal_(mean=3.0, std=0.5)
    mean, std = _moments(x)
    rounding = {torch.float32: 0.0, torch.float16: 2 ** -10, torch.bfloat16: 2 ** -7}[dtype]
    assert abs(mean - 3) < Z * 0.5 / math.sqrt(N) + rounding, mean
    assert abs(std - 0.5) < Z * 0.5 / math.sqrt(2 * N) + 0.5 * 2 ** -8 + rounding, std


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rand_range_and_moments(dtype):
    """torch.rand on npu: one aclnnInplaceUniform launch; every value in [0, 1); mean 1/2 within 5 sqrt(1/12 / N); std
    sqrt(1/12) within 5 standard errors of a uniform sample's std (sqrt((1/80 - 1/144) / (4/12 N))) plus the dtype's
    spacing (bf16: 2^-8); each tenth of [0, 1) holds N/10 draws within five binomial standard errors."""
    with Launches("InplaceUniform") as launches:
        x = torch.rand(N, device="npu", dtype=dtype)
    assert launches.count == {"InplaceUniform": 1}
    assert x.dtype == dtype and x.device.type == "npu"
    c = x.cpu().double()
    assert c.min().item() >= 0 and c.max().item() < 1
    mean, std = _moments(x)
    assert abs(mean - 0.5) < Z * math.sqrt(1 / 12 / N), mean
    assert abs(std - math.sqrt(1 / 12)) < Z * math.sqrt((1 / 80 - 1 / 144) / (4 / 12 * N)) + 2 ** -8, std
    counts = torch.histc(c, bins=10, min=0, max=1)
    assert (counts - N / 10).abs().max().item() < Z * math.sqrt(N * 0.1 * 0.9), counts.tolist()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_uniform_from_to(dtype):
    """uniform_(-2, 3) on npu: values in [-2, 3] (a 16-bit rounding may reach the bound), mean 1/2 within
    5 * 5 sqrt(1/12 / N), both ends of the range reached within 1 % of its width."""
    x = torch.empty(N, device="npu", dtype=dtype).uniform_(-2, 3)
    c = x.cpu().double()
    assert c.min().item() >= -2 and c.max().item() <= 3
    assert c.min().item() < -2 + 0.05 and c.max().item() > 3 - 0.05
    mean, _ = _moments(x)
    assert abs(mean - 0.5) < Z * 5 * math.sqrt(1 / 12 / N), mean


DRAWS = {
    "randn": lambda dtype, **kw: torch.randn(4096, device="npu", dtype=dtype, **kw),
    "rand": lambda dtype, **kw: torch.rand(4096, device="npu", dtype=dtype, **kw),
    "normal_": lambda dtype, **kw: torch.empty(64, 64, device="npu", dtype=dtype).normal_(1.0, 2.0, **kw),
    "uniform_": lambda dtype, **kw: torch.empty(64, 64, device="npu", dtype=dtype).uniform_(-1.0, 1.0, **kw),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("draw", list(DRAWS))
def test_seed_reproducibility(draw, dtype):
    """torch.manual_seed(s) twice gives identical values; another seed other values; two consecutive draws (the
    generator's offset advanced in between) other values. Values "differ" when more than 90 % of them differ
    (16-bit values can coincide by chance)."""
    f = DRAWS[draw]

    def differ(a, b):
        return (a.cpu() != b.cpu()).double().mean().item() > 0.9

    torch.manual_seed(1234)
    a1 = f(dtype)
    a2 = f(dtype)
    torch.manual_seed(1234)
    b1 = f(dtype)
    b2 = f(dtype)
    torch.manual_seed(4321)
    c1 = f(dtype)
    assert torch.equal(a1.cpu(), b1.cpu()) and torch.equal(a2.cpu(), b2.cpu())
    assert differ(a1, a2), "two consecutive draws gave the same values"
    assert differ(a1, c1), "two seeds gave the same values"


@pytest.mark.parametrize("draw", list(DRAWS))
def test_generator_and_rng_state(draw):
    """An explicit npu generator: the same seed gives the same values whatever the default generator did in between;
    the default generator's state saved with torch.npu.get_rng_state and restored gives the same draw again (its seed
    and offset both restored), and the draw after it as before."""
    f = DRAWS[draw]
    g = torch.Generator(device="npu")
    g.manual_seed(7)
    a = f(torch.float32, generator=g).cpu()
    f(torch.float32)  # the default generator advances, g does not
    g.manual_seed(7)
    assert torch.equal(f(torch.float32, generator=g).cpu(), a)
    g.manual_seed(8)
    assert not torch.equal(f(torch.float32, generator=g).cpu(), a)

    torch.manual_seed(99)
    f(torch.float32)
    state = torch.npu.get_rng_state()
    x1, x2 = f(torch.float32).cpu(), f(torch.float32).cpu()
    torch.npu.set_rng_state(state)
    y1, y2 = f(torch.float32).cpu(), f(torch.float32).cpu()
    assert torch.equal(x1, y1) and torch.equal(x2, y2)
    assert not torch.equal(x1, x2)


# ----------------------------------------------------------------------------------------------------------
# printing and masked_select
PRINTED = {
    "integer_valued": lambda: torch.arange(6.0).reshape(2, 3),
    "fractions": lambda: torch.tensor([[0.1, -2.5, 3.25], [1e-3, 7.0, -0.0]]),
    "scientific": lambda: torch.tensor([1e-8, 1.0, 1e8, 3.0]),
    "nan_inf": lambda: torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5]),
    "fp16": lambda: torch.tensor([0.1, 2.5, -3.0, 1e4]).half(),
    "bf16": lambda: torch.tensor([0.1, 2.5, -3.0, 1e4]).bfloat16(),
    "int64": lambda: torch.arange(-3, 5),
    "bool": lambda: torch.tensor([True, False, True]),
    "summarized": lambda: torch.arange(2000.0).reshape(40, 50) / 7,  # more than 1000 elements: "..." rows
    "empty": lambda: torch.empty(0, 3),
    "zero_dim": lambda: torch.tensor(3.5),
    "randn": lambda: torch.randn(3, 4),
}


@pytest.mark.parametrize("case", list(PRINTED))
def test_print_equals_cpu(case, capsys):
    """str() and print() of an npu tensor: the CPU tensor's text with ``device='npu:0'`` added."""
    c = PRINTED[case]()
    t = c.npu()
    text = str(t)
    assert "device='npu:0'" in text
    assert text.replace(", device='npu:0'", "") == str(c)
    print(t)
    assert capsys.readouterr().out == text + "\n"


def test_print_reaches_masked_select():
    """Printing a float npu tensor with non-integer values launches aclnnMaskedSelect (torch's formatter selects the
    finite non-zero values): the operator the printing tests rely on."""
    with Launches("MaskedSelect") as launches:
        str(torch.tensor([0.5, -1.25, 0.0, float("inf")]).npu())
    assert launches.count["MaskedSelect"] >= 1


MASKED = {
    "same_shape": lambda: (torch.randn(3, 4), torch.randn(3, 4) > 0),
    "broadcast_mask": lambda: (torch.randn(3, 4), torch.tensor([True, False, False, True])),
    "broadcast_self": lambda: (torch.arange(4.0), torch.rand(5, 4) > 0.5),
    "none_selected": lambda: (torch.randn(2, 3), torch.zeros(2, 3, dtype=torch.bool)),
    "all_selected": lambda: (torch.randn(2, 3), torch.ones(2, 3, dtype=torch.bool)),
    "fp16": lambda: (torch.randn(6, 5).half(), torch.rand(6, 5) > 0.3),
    "bf16": lambda: (torch.randn(6, 5).bfloat16(), torch.rand(6, 5) > 0.3),
    "int64": lambda: (torch.arange(12).reshape(3, 4), torch.arange(12).reshape(3, 4) % 3 == 0),
    "transposed": lambda: (torch.randn(4, 3).t(), torch.randn(4, 3).t() > 0),
}


@pytest.mark.parametrize("case", list(MASKED))
def test_masked_select_equals_cpu(case):
    """torch.masked_select on npu equals the CPU result bit for bit, shape included (one aclnnMaskedSelect launch)."""
    x, mask = MASKED[case]()
    with Launches("MaskedSelect") as launches:
        got = torch.masked_select(x.npu(), mask.npu())
    assert launches.count == {"MaskedSelect": 1}
    expected = torch.masked_select(x, mask)
    assert got.device.type == "npu" and got.shape == expected.shape
    assert torch.equal(got.cpu(), expected)


# ----------------------------------------------------------------------------------------------------------
# one optimizer step
def _params(dtype):
    torch.manual_seed(5)
    shapes = [(8, 16), (16,), (3, 4, 5), ()]
    return [torch.randn(s).to(dtype) for s in shapes]


def _run(make_opt, dtype, device, steps=3):
    """`steps` optimizer steps on parameters of `dtype` on `device` with fixed gradients; the parameters and the
    optimizer's state tensors after them, on the CPU."""
    params = [torch.nn.Parameter(p.clone().to(device)) for p in _params(dtype)]
    opt = make_opt(params)
    torch.manual_seed(6)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape).to(dtype).to(device)
        opt.step()
    state = [{k: v.cpu() if torch.is_tensor(v) else v for k, v in opt.state[p].items()} for p in params]
    return [p.detach().cpu() for p in params], state


OPTIMIZERS = {
    "SGD_momentum": lambda params, foreach: torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=foreach),
    "AdamW": lambda params, foreach: torch.optim.AdamW(params, foreach=foreach),
}
# the foreach operators each optimizer's three steps launch on npu (a name counts its V1 and V2 forms), and the
# per-tensor operators they replace, which the foreach path does not launch
FOREACH = {
    "SGD_momentum": {"ForeachAddList": 1 + 2 + 2, "ForeachMulScalar": 0 + 1 + 1},
    "AdamW": {"ForeachMulScalar": 3 * 2, "ForeachLerpScalar": 3, "ForeachAddcmulScalar": 3, "ForeachSqrt": 3,
              "ForeachDivScalarList": 3, "ForeachAddScalar": 3},
}
PER_TENSOR = ["InplaceAdd", "InplaceAdds", "InplaceMuls", "InplaceLerps", "InplaceAddcmul", "Sqrt", "Divs"]


def _default_foreach():
    """Whether torch.optim's default for npu parameters is the foreach path, as the optimizers decide it
    (torch.optim.optimizer._default_to_fused_or_foreach). torch_npu replaces the device list it reads
    (torch_npu/utils/_optim.py): the npu device is in it on an Atlas A2 / A3 SoC name, and torch_npu 2.6 also wants a
    known CANN of 8.0 or later, which it reads from the toolkit's files: none here, so there the default is the
    per-tensor path, and foreach=True asks for the foreach one."""
    from torch.optim.optimizer import _default_to_fused_or_foreach

    return _default_to_fused_or_foreach([torch.zeros(1, device="npu")], differentiable=False, use_fused=False)[1]


@pytest.mark.parametrize("foreach", [None, True], ids=["default", "foreach_True"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_steps_equal_cpu(name, dtype, foreach):
    """Three steps (the first creates the state, the next ones update it) on four npu parameters (2-d, 1-d, 3-d,
    0-dim) equal the same steps on the CPU bit for bit: parameters, momentum buffers, exp_avg, exp_avg_sq and the step
    count. At torch's default where that is foreach (_default_foreach) or with foreach=True the npu run takes the
    foreach path: exactly the launches of FOREACH, none of PER_TENSOR; the CPU run takes the per-tensor path. With the
    same IEEE operations per element both give the same bits (fp32, and bf16, whose CPU ops compute in fp32 and round
    once). Where the npu default is the per-tensor path (torch_npu 2.6 here), bf16 tensors are compared within 2^-7 of
    their largest magnitude (two bf16 ulps at that scale): there torch_npu hands aclnnInplaceMuls the Python scalar
    rounded to the tensor's dtype (0.9 -> 0.8984375, AdamW's beta2 0.999 -> 1.0), where the CPU multiplies by it in
    fp32, and SGD's update p - 0.1 buf cancels, so the difference is relative to the operands, not to the result."""
    make = lambda params: OPTIMIZERS[name](params, foreach)  # noqa: E731
    with Launches(*FOREACH[name], *PER_TENSOR) as launches:
        got, got_state = _run(make, dtype, "npu")
    expected, expected_state = _run(lambda params: OPTIMIZERS[name](params, None), dtype, "cpu")
    foreach_path = bool(foreach or _default_foreach())
    if foreach_path:
        assert {op: launches.count[op] for op in FOREACH[name]} == FOREACH[name]
        assert {op: launches.count[op] for op in PER_TENSOR if launches.count[op]} == {}
    else:  # the per-tensor default: no foreach launch
        assert {op: launches.count[op] for op in FOREACH[name] if launches.count[op]} == {}
        assert sum(launches.count[op] for op in PER_TENSOR) > 0
    bitwise = foreach_path or dtype == torch.float32

    def same(g, e):
        if bitwise:
            return torch.equal(g, e)
        return (g.float() - e.float()).abs().max().item() <= 2 ** -7 * e.float().abs().max().item()

    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.dtype == dtype and same(g, e), (i, (g.float() - e.float()).abs().max().item())
    for i, (gs, es) in enumerate(zip(got_state, expected_state)):
        assert gs.keys() == es.keys()
        for k in es:
            if torch.is_tensor(es[k]):
                assert same(gs[k], es[k]), (i, k)
            else:
                assert gs[k] == es[k], (i, k)
    assert not torch.equal(got[0], _params(dtype)[0])  # the steps moved the parameters


def test_default_path_is_foreach():
    """On the fake's Atlas A2 (Ascend910B3) torch_npu makes the foreach path torch.optim's default for npu parameters,
    so the default steps above took it; only a torch_npu that also wants a known CANN of 8.0 or later (2.6: its
    ``_cann_version``, "not known" here without a toolkit) keeps the per-tensor default."""
    import torch_npu.utils._optim as npu_optim

    cann = getattr(npu_optim, "_cann_version", None)
    wants_cann = hasattr(npu_optim, "_cann_version")
    assert torch.npu.get_device_name(0).startswith("Ascend910B")
    assert _default_foreach() == (not wants_cann or (cann not in (None, "not known") and cann >= "8.0"))


# ----------------------------------------------------------------------------------------------------------
# the operators of README's executed example (examples/train_tiny.py --device npu)
def _ties(n=64, high=5, seed=11):
    """int64 values in [0, high) with many ties (what the example sorts: each token's expert)."""
    return torch.randint(0, high, (n,), generator=torch.Generator().manual_seed(seed))


SORTED = {
    "int64_ties": lambda: (_ties(), 0, False),
    "int64_ties_descending": lambda: (_ties(), 0, True),
    "fp32_ties_2d_dim0": lambda: (torch.randint(0, 4, (9, 5)).float(), 0, False),
    "fp32_2d_last_dim": lambda: (torch.randn(6, 7), -1, True),
    "bf16_ties": lambda: (torch.randn(50).bfloat16().round(), 0, False),
}


@pytest.mark.parametrize("case", list(SORTED))
def test_argsort_stable_equals_cpu(case):
    """torch.argsort(stable=True) (the example's token order by expert) and torch.sort(stable=True) on npu: one
    aclnnSort launch each, values and indices bitwise the CPU's (the same ATen sort computes both; ties keep their
    order)."""
    x, dim, descending = SORTED[case]()
    with Launches("Sort") as launches:
        order = torch.argsort(x.npu(), dim=dim, descending=descending, stable=True)
        values, indices = torch.sort(x.npu(), dim=dim, descending=descending, stable=True)
    assert launches.count == {"Sort": 2}
    expected = torch.sort(x, dim=dim, descending=descending, stable=True)
    assert order.dtype == torch.int64 and torch.equal(order.cpu(), expected.indices)
    assert torch.equal(values.cpu(), expected.values) and torch.equal(indices.cpu(), expected.indices)


BINCOUNTS = {
    "plain": lambda: (_ties(), None, 0),
    "minlength_above_max": lambda: (_ties(high=3), None, 8),
    "fp32_weights": lambda: (_ties(), torch.rand(64), 0),
    "fp16_weights": lambda: (_ties(), torch.rand(64).half(), 0),  # an fp64 result
    "empty_minlength": lambda: (torch.zeros(0, dtype=torch.int64), None, 4),
}


@pytest.mark.parametrize("case", list(BINCOUNTS))
def test_bincount_equals_cpu(case):
    """torch.bincount on npu (the example's tokens per expert): one aclnnBincount launch, bitwise the CPU's result,
    its length (max + 1 or minlength) and dtype (int64, fp32 for fp32 weights, else fp64) included."""
    x, weights, minlength = BINCOUNTS[case]()
    with Launches("Bincount") as launches:
        got = torch.bincount(x.npu(), None if weights is None else weights.npu(), minlength=minlength)
    assert launches.count == {"Bincount": 1}
    expected = torch.bincount(x, weights, minlength=minlength)
    assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)


CUMSUMS = {
    "int64": lambda: (_ties(), 0, None),  # the example's group ends
    "int32_to_int64": lambda: (_ties().int(), 0, None),
    "fp32_2d_dim1": lambda: (torch.randn(5, 40), 1, None),
    "fp32_to_fp64": lambda: (torch.randn(5, 40), 1, torch.float64),
    "bf16_dim0": lambda: (torch.randn(30, 3).bfloat16(), 0, None),
}


@pytest.mark.parametrize("case", list(CUMSUMS))
def test_cumsum_equals_cpu(case):
    """torch.cumsum on npu: one aclnnCumsum launch, bitwise the CPU's result and dtype (an integer input sums in
    int64)."""
    x, dim, dtype = CUMSUMS[case]()
    with Launches("Cumsum") as launches:
        got = torch.cumsum(x.npu(), dim, dtype=dtype)
    assert launches.count == {"Cumsum": 1}
    expected = torch.cumsum(x, dim, dtype=dtype)
    assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)


@pytest.mark.parametrize("inplace", [False, True], ids=["index_copy", "index_copy_"])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_copy_equals_cpu(dim, inplace):
    """Tensor.index_copy (the example's unsort) and index_copy_ on npu: one aclnnIndexCopy / aclnnInplaceIndexCopy
    launch, bitwise the CPU's result; the rows (columns) not indexed keep self's values."""
    torch.manual_seed(12)
    self_, source = torch.randn(7, 6), torch.randn(7, 6)
    index = torch.randperm(self_.shape[dim])[:4]
    source = source.narrow(dim, 0, 4)
    op = "InplaceIndexCopy" if inplace else "IndexCopy"
    with Launches("IndexCopy", "InplaceIndexCopy") as launches:
        got = self_.npu()
        got = got.index_copy_(dim, index.npu(), source.npu()) if inplace else got.index_copy(dim, index.npu(),
                                                                                               source.npu())
    assert launches.count[op] == 1 and sum(launches.count.values()) == 1
    assert torch.equal(got.cpu(), self_.index_copy(dim, index, source))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_and_max_backward_equal_cpu(dim):
    """Tensor.scatter_ (aclnnInplaceScatter, reduction none) on npu bitwise the CPU's; and the backward of max(dim)
    (the example's gate), which scatters the gradient into zeros through it: the input's gradient the CPU's."""
    torch.manual_seed(13)
    x = torch.randn(4, 5, 6)
    index = torch.randint(0, x.shape[dim], (4, 5, 6)).narrow(dim, 0, 2)
    src = torch.randn(index.shape)
    with Launches("InplaceScatter") as launches:
        got = x.npu().scatter_(dim, index.npu(), src.npu())
    assert launches.count == {"InplaceScatter": 1}
    assert torch.equal(got.cpu(), x.clone().scatter_(dim, index, src))

    grads = []
    for device in ("npu", "cpu"):
        leaf = x.clone().to(device).requires_grad_()
        values, _ = leaf.max(dim)
        (values * torch.arange(values.numel()).reshape(values.shape).float().to(device)).sum().backward()
        grads.append(leaf.grad.cpu())
    assert torch.equal(grads[0], grads[1])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sigmoid_backward_equals_cpu(dtype):
    """The backward of torch.sigmoid (the example's head) on npu: one aclnnSigmoidBackward launch, the gradient bitwise
    the CPU's (the same ATen sigmoid_backward computes both)."""
    torch.manual_seed(14)
    x, g = torch.randn(8, 9).to(dtype), torch.randn(8, 9).to(dtype)
    leaf = x.npu().requires_grad_()
    with Launches("SigmoidBackward") as launches:
        torch.sigmoid(leaf).backward(g.npu())
    assert launches.count == {"SigmoidBackward": 1}
    ref = x.clone().requires_grad_()
    torch.sigmoid(ref).backward(g)
    assert torch.equal(leaf.grad.cpu(), ref.grad)


@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gelu_backward_is_the_tanh_form(dtype, approximate):
    """aten.gelu_backward on npu, on the fake's Atlas A2: op-plugin calls aclnnGeluBackward, which takes no
    `approximate` (its kernel GeluGrad is the tanh form's derivative, computed in fp32 and rounded once): bitwise the
    CPU's gelu_backward(approximate="tanh") of the fp32 inputs, whatever `approximate` says."""
    torch.manual_seed(15)
    x, g = torch.randn(6, 10).to(dtype), torch.randn(6, 10).to(dtype)
    with Launches("GeluBackward") as launches:
        got = torch.ops.aten.gelu_backward(g.npu(), x.npu(), approximate=approximate)
    assert launches.count == {"GeluBackward": 1}
    expected = torch.ops.aten.gelu_backward(g.float(), x.float(), approximate="tanh").to(dtype)
    assert got.dtype == dtype and torch.equal(got.cpu(), expected)


BCE = {
    "mean": lambda: ({}, "mean"),
    "sum": lambda: ({}, "sum"),
    "none": lambda: ({}, "none"),
    "weight_pos_weight": lambda: ({"weight": torch.rand(5, 3), "pos_weight": torch.rand(3) * 3}, "mean"),
    "pos_weight_none": lambda: ({"pos_weight": torch.rand(3) * 3}, "none"),
}


@pytest.mark.parametrize("case", list(BCE))
def test_binary_cross_entropy_with_logits_equals_cpu(case):
    """F.binary_cross_entropy_with_logits (the example's loss) on npu, forward and backward: one
    aclnnBinaryCrossEntropyWithLogits and one aclnnBinaryCrossEntropyWithLogitsBackward launch; the loss bitwise the
    CPU's (the same ATen op) and the input's gradient bitwise the CPU autograd's (the fake follows torch's formula
    operation for operation), with weight / pos_weight and each reduction."""
    torch.manual_seed(16)
    kwargs, reduction = BCE[case]()
    x, target = torch.randn(5, 3) * 3, torch.rand(5, 3)
    g = torch.randn(5, 3) if reduction == "none" else torch.tensor(0.75)
    results = []
    for device in ("npu", "cpu"):
        leaf = x.clone().to(device).requires_grad_()
        kw = {k: v.to(device) for k, v in kwargs.items()}
        with Launches("BinaryCrossEntropyWithLogits", "BinaryCrossEntropyWithLogitsBackward") as launches:
            loss = F.binary_cross_entropy_with_logits(leaf, target.to(device), reduction=reduction, **kw)
            loss.backward(g.to(device))
        results.append((loss.detach().cpu(), leaf.grad.cpu(), launches.count))
    (loss_npu, grad_npu, count), (loss_cpu, grad_cpu, _) = results
    assert count == {"BinaryCrossEntropyWithLogits": 1, "BinaryCrossEntropyWithLogitsBackward": 1}
    assert torch.equal(loss_npu, loss_cpu)
    assert torch.equal(grad_npu, grad_cpu)


def test_train_tiny_example_runs():
    """README's executed example, `python examples/train_tiny.py --steps 5 --device npu`, in its own process on this
    runtime: it exits 0 and prints `OK: 5 steps on npu` (its own check: both models' losses agree at every step)."""
    script = os.path.join(paths.EXAMPLES, "train_tiny.py")
    proc = subprocess.run([sys.executable, script, "--steps", "5", "--device", "npu"], env=dict(os.environ),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK: 5 steps on npu" in proc.stdout, proc.stdout
