"""The forward ops as native aclnn kernels on the NPU (csrc/ops/{gelu,prelu,logit,scaled_masked_softmax,
grouped_bias_add}.cpp), inside the real torch_npu runtime on the fake CANN (make test-npu; skipped elsewhere).

The device kernels each call launches are counted by the fake CANN (each aclnn operator, plus one copy for every
input an operator has to make contiguous; host<->device copies and synchronisations), through the benchmark
suite's NPU section (benchmarks/npu.py), whose table docs/performance.md shows; here the targets are held. The
arithmetic where a kernel differs from the contract (docs/operators.md, "Semantics notes") is checked against float64
references; the composite fallback runs where the entry point is missing, without the CPU.
"""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

import paths
import torch_ext
from torch_ext.testing import samples

pytestmark = pytest.mark.skipif(not torch_ext._npu.LOADED, reason="needs torch_ext._C_npu (make test-npu)")

if torch_ext._npu.LOADED:  # both import torch_npu / megatron-core (the repository is on PYTHONPATH: benchmarks/)
    from benchmarks import npu as bench
    from megatron_common import AttnMaskType, softmax_module


@pytest.fixture(scope="module")
def counts():
    counters = bench.FakeCannCounters.get()
    assert counters is not None, "not the fake CANN"
    return {(r["op"], r["dtype"], r["impl"]): r for r in bench.launch_counts(counters)}


# The kernels per call each family's sample-table entry expects (OpInfo.kernel_counts, per count case: the native
# forward in bf16 and fp32, the backward in every dtype; None: checked by hand below).
KERNEL_COUNTS = {case: counts for info in samples.OPS.values() for case, counts in (info.kernel_counts or {}).items()}
FORWARD_KERNELS = {case: fwd for case, (fwd, _) in KERNEL_COUNTS.items() if fwd is not None}
BACKWARD_KERNELS = {case: bwd for case, (_, bwd) in KERNEL_COUNTS.items() if bwd is not None}


def test_every_count_case_has_its_expected_kernels():
    """Every case the benchmarks count (OpInfo.count_cases) says what this file expects of it."""
    cases = [name for info in samples.OPS.values() if info.count_cases
             for name, _, _ in info.count_cases(torch.float32, "cpu")]
    assert sorted(cases) == sorted(KERNEL_COUNTS)


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("case", list(FORWARD_KERNELS))
def test_forward_kernels(counts, case, dtype):
    native, composite = counts[(case, dtype, "native")], counts[(case, dtype, "composite")]
    assert native["forward"]["kernels"] == FORWARD_KERNELS[case], native
    assert composite["forward"]["kernels"] >= native["forward"]["kernels"]
    if "group_idx" not in case:  # no host round trip
        assert native["forward"]["h2d"] == native["forward"]["d2h"] == native["forward"]["syncs"] == 0, native


def test_forward_kernels_where_the_contract_costs_more(counts):
    # gelu "none": one GeluV2 for 16-bit; fp32 keeps erf (the composite, Semantics notes)
    assert counts[("gelu none", "bf16", "native")]["forward"]["kernels"] == 1
    assert counts[("gelu none", "fp16", "native")]["forward"]["kernels"] == 1
    assert counts[("gelu none", "fp32", "native")]["forward"] == counts[("gelu none", "fp32", "composite")]["forward"]
    # fp16 with scale != 1: the kernel in fp32 between two casts
    for case in ["softmax, mask", "softmax, no mask", "softmax, causal"]:
        assert counts[(case, "fp16", "native")]["forward"]["kernels"] == 3
    # with probs: at most 5, the group_idx check's copies aside
    for dtype in ["bf16", "fp32"]:
        fwd = counts[("grouped, group_idx, probs", dtype, "native")]["forward"]
        assert fwd["kernels"] <= 5 and fwd["d2h"] == 1, fwd
    # a broadcast padding mask is copied by the kernel (as by torch_npu's own route): 1 + the zero-row pass
    assert counts[("softmax, padding, zero", "bf16", "native")]["forward"]["kernels"] == 4


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("case", list(BACKWARD_KERNELS))
def test_backward_kernels(counts, case, dtype):
    """The backward kernels (one: the aclnn operator), nothing else: the causal mask is the cached one; grouped
    without group_idx: the operator, and x's gradient passes through."""
    bwd = counts[(case, dtype, "native")]["backward"]
    assert bwd["kernels"] == BACKWARD_KERNELS[case] and bwd["d2h"] == bwd["h2d"] == 0, bwd


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_grouped_backward_kernels(counts, dtype):
    """grouped_bias_add's backward with group_idx: aclnnGroupedBiasAddGradV2 and its group_idx check (one D2H
    copy), with an empty group (the kernel zero-fills it, no fill of ours). With probs, d bias and d probs: bias
    rows spread, grad * rows, sum, grad * probs (into the same buffer), the operator; for 16-bit x the bias cast to
    fp32 and d bias cast back (two G x H kernels); grad itself is never cast."""
    bwd = counts[("grouped, group_idx", dtype, "native")]["backward"]
    assert bwd["kernels"] == 1 and bwd["d2h"] == 1 and bwd["h2d"] == 0, bwd
    bwd = counts[("grouped, group_idx, probs", dtype, "native")]["backward"]
    assert bwd["kernels"] == (5 if dtype == "fp32" else 7) and bwd["d2h"] == 1 and bwd["h2d"] == 0, bwd


def test_softmax_peak_memory():
    """No temporary larger than the output for the native softmax; the composite's fp32 temporaries show."""
    extra = bench.peak_memory(shape=(2, 4, 256, 256))
    out_bytes = 2 * 4 * 256 * 256 * 2
    assert extra["native"] <= out_bytes, extra
    assert extra["composite"] >= 2 * out_bytes, extra


def _dev(*ts):
    return [t.to("npu") for t in ts]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gelu_16bit_takes_the_kernel_within_rounding(dtype):
    """GeluV2's erf substitute (A2/A3 polynomial) is below 16-bit rounding down to x = -5."""
    x = torch.linspace(-5, 5, 2001).to(dtype)
    got = torch_ext.gelu(x.npu()).cpu().double()
    ref = torch.nn.functional.gelu(x.double())
    ulp = torch.finfo(dtype).eps
    assert ((got - ref).abs() <= ulp * ref.abs() + 1e-3 * ulp).all()


def test_gelu_fp32_none_is_erf():
    """fp32 "none" keeps the contract (erf), not GeluV2's substitute (9.8e-5 off on A2/A3) nor aclnnGelu (tanh)."""
    x = torch.linspace(-8, 8, 4001)
    got = torch_ext.gelu(x.npu()).cpu().double()
    xd = x.double()
    ref = 0.5 * xd * torch.erfc(-xd / math.sqrt(2))  # erfc: no cancellation in the left tail
    assert ((got - ref).abs() <= 4e-6 * ref.abs()).all()  # fp32 erfc far in the tail; the substitutes: 1e-4 to 1


def test_softmax_fp16_with_scale_keeps_fp32_arithmetic():
    """The kernel rounds x * scale to fp16 (audit 4.1): for scores in the thousands that moves y by 2%; the NPU
    path runs the kernel in fp32 for fp16 with scale != 1."""
    scale = 1 / math.sqrt(128)
    x = torch.tensor([2000.0, 1999.0]).half().reshape(1, 1, 1, 2)
    mask = torch.zeros(1, 1, 1, 2, dtype=torch.bool)
    y = torch_ext.scaled_masked_softmax(*_dev(x, mask), scale=scale).cpu().double()
    ref = torch.softmax(x.double() * scale, -1)
    assert (y - ref).abs().max() < 1e-3  # the kernel's fp16 arithmetic gives [0.5312, 0.4688] against [0.5221, 0.4779]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_softmax_cases_against_float64(dtype):
    torch.manual_seed(3)
    x = (torch.randn(2, 3, 16, 32) * 4).to(dtype)
    mask = torch.rand(2, 1, 16, 32) < 0.4
    mask[0, 0, 5] = True  # a fully masked row
    tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-5}[dtype]
    for scale in [1.0, 0.5]:
        z = (x.double() * scale).masked_fill(mask, -10000.0)
        ref = torch.softmax(z, -1)
        uniform = torch_ext.scaled_masked_softmax(*_dev(x, mask), scale=scale).cpu().double()
        torch.testing.assert_close(uniform, ref, rtol=tol, atol=tol)
        zero = torch_ext.scaled_masked_softmax(*_dev(x, mask), scale=scale, fully_masked="zero").cpu().double()
        torch.testing.assert_close(zero, ref.masked_fill(mask.all(-1, keepdim=True), 0.0), rtol=tol, atol=tol)
        causal = torch.ones(16, 32, dtype=torch.bool).triu(1)
        got = torch_ext.scaled_masked_softmax(x.npu(), None, scale=scale, fix_triu_mask=True).cpu().double()
        torch.testing.assert_close(got, torch.softmax((x.double() * scale).masked_fill(causal, -10000.0), -1),
                                   rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_prelu_logit_grouped_equal_the_cpu_kernels(dtype):
    """The same arithmetic as the contract: equal to the CPU kernels (prelu's product and logit's fp32 expression
    rounded once; grouped's correctly rounded add)."""
    torch.manual_seed(4)
    x, w = torch.randn(4, 6, 9).to(dtype), torch.rand(6).to(dtype)
    assert torch.equal(torch_ext.prelu(*_dev(x, w)).cpu(), torch_ext.prelu(x, w))
    p = (torch.rand(7, 33) * 1.2 - 0.1).to(dtype)
    for eps in [None, 1e-3]:  # fp32: the last bits of log(x / (1 - x)) differ between two implementations
        got, cpu = torch_ext.logit(p.npu(), eps).cpu(), torch_ext.logit(p, eps)
        tol = dict(rtol=2e-6, atol=1e-7) if dtype == torch.float32 else dict(rtol=0, atol=0)
        torch.testing.assert_close(got, cpu, equal_nan=True, **tol)
    xg, b, idx = torch.randn(20, 16).to(dtype), torch.randn(3, 16).to(dtype), torch.tensor([5, 0, 15])
    assert torch.equal(torch_ext.grouped_bias_add(*_dev(xg, b, idx), 1).cpu(), torch_ext.grouped_bias_add(xg, b, idx, 1))
    probs = torch.rand(20)
    got = torch_ext.grouped_bias_add(*_dev(xg, b, idx), 1, probs=probs.npu()).cpu()
    # x + probs * bias in fp32: addcmul (unaudited on the device; ATen's here) may fuse the product and the sum
    tol = dict(rtol=3e-7, atol=3e-7) if dtype == torch.float32 else dict(rtol=0, atol=0)
    torch.testing.assert_close(got, torch_ext.grouped_bias_add(xg, b, idx, 1, probs=probs), **tol)


def test_megatron_causal_softmax_is_one_kernel_per_call():
    """With patch(), Megatron's fused causal softmax (the GPT case) costs one kernel per call, as MindSpeed's
    torch_npu.npu_scaled_masked_softmax route; a padding mask the kernel's copy of it plus the zero-row pass."""
    import torch_ext.megatron as tm

    counters = bench.FakeCannCounters.get()
    tm.patch()
    try:
        for mask_type, mask, expected in [(AttnMaskType.causal, None, 1),
                                          (AttnMaskType.padding, torch.zeros(2, 1, 1, 64, dtype=torch.bool), 4)]:
            module = softmax_module(torch.bfloat16, mask_type, True, False, None)
            x = torch.randn(2, 4, 64, 64).bfloat16().npu()
            m = None if mask is None else mask.npu()
            module(x, m)  # warm-up
            counters.reset()
            module(x, m)
            assert counters.read()["kernels"] == expected
    finally:
        tm.unpatch()


def test_composite_fallback_without_the_entry_points():
    """A CANN without the forward operators: each forward op runs its composite on the device (no CPU fallback, so
    NPU_EXT_NO_CPU_FALLBACK=1 does not forbid it), and the status report names it. (aclnnPrelu stays: without it
    torch_npu's own prelu, which the composite calls, takes an acl_op route the fake cannot run.)"""
    build = paths.FAKE_CANN_BUILD
    lib = subprocess.run([sys.executable, build, "--without",
                          "aclnnGeluV2,aclnnLogit,aclnnScaledMaskedSoftmax"],
                         check=True, capture_output=True, text=True).stdout.splitlines()[-1]
    env = dict(os.environ, LD_LIBRARY_PATH=lib + os.pathsep + os.environ["LD_LIBRARY_PATH"], NPU_EXT_NO_CPU_FALLBACK="1")
    script = """
import json, torch, torch_ext
x = torch.randn(2, 3, 4, 8)
m = torch.rand(2, 1, 4, 8) < 0.3
out = {
  "gelu": torch.allclose(torch_ext.gelu(x.npu()).cpu(), torch_ext.gelu(x), rtol=1e-6, atol=1e-7),
  "logit": torch.allclose(torch_ext.logit(x.sigmoid().npu()).cpu(), torch_ext.logit(x.sigmoid()), equal_nan=True),
  "softmax": torch.allclose(torch_ext.scaled_masked_softmax(x.npu(), m.npu(), 0.5).cpu(),
                            torch_ext.scaled_masked_softmax(x, m, 0.5), atol=1e-6),
  "status": torch.ops.npu_ext._npu_status(),
}
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["gelu"] and out["logit"] and out["softmax"], out
    for op, api in [("gelu", "aclnnGeluV2"), ("logit", "aclnnLogit"),
                    ("scaled_masked_softmax", "aclnnScaledMaskedSoftmax")]:
        assert (f"{op}: {api}: is not in this CANN's operator libraries ({api}GetWorkspaceSize not found) -> its "
                "composite of ATen ops on the NPU") in out["status"].splitlines()
    assert "Warning: npu_ext." not in proc.stderr  # no CPU-fallback warning


@pytest.mark.ascend950
def test_benchmark_npu_mode_end_to_end(tmp_path):
    """`python -m benchmarks.run` with torch_npu: the NPU section (times against torch_npu's native ops, then the
    launch counts), saying that its times are the fake's. On an Ascend950, whose torch_npu routes the fake models
    (below it torch_npu's counterparts are TBE kernels)."""
    root = paths.ROOT
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", "--out", str(tmp_path)], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([os.environ["PYTHONPATH"], root]),
                                   NPU_FAKE_SOC="Ascend950PR_9599"),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FAKE CANN" in proc.stdout + proc.stderr and "not an NPU's" in proc.stdout + proc.stderr
    for op in ["gelu_backward_v2[erf]", "logit_grad", "prelu_backward", "scaled_masked_softmax_backward"]:
        assert f"| {op} | bf16 |" in proc.stdout
    assert "| softmax, causal | 3 / 8 | 1 | 1 / 8 | 1 | 1 / 6 | 1 |" in proc.stdout
    counts = json.load(open(tmp_path / "npu-quick-counts.json"))
    peak = counts["softmax_extra_peak_bytes"]
    assert peak["native"] < 2**20 < peak["composite"], peak  # native: the allocator's rounding only


def test_benchmark_npu_mode_at_the_default_soc_makes_its_results_directory(tmp_path):
    """At the fake's default SoC (an Atlas A2, where the times are skipped) the suite still writes its launch counts,
    into a results directory it makes (a fresh checkout has none: docs/check-on-npu.md's step 5 stopped there)."""
    root = paths.ROOT
    out = tmp_path / "fresh" / "results"
    env = {k: v for k, v in os.environ.items() if k != "NPU_FAKE_SOC"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", "--out", str(out)], cwd=tmp_path,
                          env=dict(env, PYTHONPATH=os.pathsep.join([os.environ["PYTHONPATH"], root])),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "times skipped" in proc.stdout + proc.stderr
    assert json.load(open(out / "npu-quick-counts.json"))["counts"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("group_idx_type,index_dtype", [(0, torch.int32), (0, torch.int64), (1, torch.int32),
                                                        (1, torch.int64)])
def test_grouped_probs_backward_against_float64(dtype, group_idx_type, index_dtype):
    """The NPU backward of grouped_bias_add with probs (bias rows spread on the device by repeat_interleave of
    group_idx, 16-bit grad times fp32 without a cast), in eager mode outside any dispatch mode (where the
    training tests' op log would send it down the traced graphs' path), against float64:
    d bias[j] = sum over the rows n of group j of g[n] p[n]; d probs[n] = sum over h of g[n, h] bias[j, h]."""
    sizes = [5, 0, 33, 1, 0, 41]
    n, h = sum(sizes), 48
    torch.manual_seed(7)
    x, b = torch.randn(n, h).to(dtype), torch.randn(len(sizes), h).to(dtype)
    p, g = torch.rand(n), torch.randn(n, h).to(dtype)
    counts = torch.tensor(sizes)
    group_idx = (counts if group_idx_type == 1 else counts.cumsum(0)).to(index_dtype)
    xs, bs, ps = [t.npu().requires_grad_() for t in (x, b, p)]
    counters = bench.FakeCannCounters.get()
    spread = counters.opapi.fake_opapi_calls(b"aclnnRepeatInterleaveWithDim")
    y = torch_ext.grouped_bias_add(xs, bs, group_idx.npu(), group_idx_type, probs=ps)
    grads = torch.autograd.grad(y, [xs, bs, ps], g.npu())
    assert [t.dtype for t in grads] == [dtype, dtype, torch.float32]
    dx, db, dp = (t.cpu().double() for t in grads)
    assert counters.opapi.fake_opapi_calls(b"aclnnRepeatInterleaveWithDim") == spread + 2  # forward, backward
    assert torch.equal(dx, g.double())
    rows = torch.repeat_interleave(torch.arange(len(sizes)), counts)
    g64, b64, p64 = g.double(), b.double(), p.double()
    terms_b = g64 * p64[:, None]
    ref_b = torch.zeros(len(sizes), h, dtype=torch.float64).index_add_(0, rows, terms_b)
    mag_b = torch.zeros_like(ref_b).index_add_(0, rows, terms_b.abs())
    terms_p = g64 * b64[rows]
    ref_p, mag_p = terms_p.sum(-1), terms_p.abs().sum(-1)
    assert dp.shape == p.shape
    # d bias: fp32 sums rounded once to the dtype; d probs: fp32 sums of exact products
    eps = torch.finfo(dtype).eps
    assert ((db - ref_b).abs() <= eps * ref_b.abs() + 64 * 2.0**-24 * mag_b).all()
    assert ((dp - ref_p).abs() <= 64 * 2.0**-24 * mag_p).all()
    assert not db[1].any() and not db[4].any()  # the empty groups: zero rows (the kernel's fill)
