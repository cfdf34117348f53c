"""Megatron on ``npu`` tensors: the real torch_npu (the default release) on the fake CANN of ``make test-npu``.

* ``torch_ext.megatron.patch()`` on npu tensors: FusedScaleMaskSoftmax, bias_gelu_impl and
  TEGroupedMLP._apply_bias against Megatron's own (unpatched) torch path on the CPU (tests/integrations/test_megatron.py's
  helpers).
* ``aten::nonzero`` and boolean-mask indexing on npu tensors (the data-dependent-shape route Megatron's cross
  entropy takes) against a coordinate oracle.
* examples/megatron_gpt.py's GPT trained on the npu device through patch(), its losses against the CPU run's.

Run: ``make test-npu NPU_TESTS=tests/npu/test_npu_megatron.py``. Skipped (the whole module, before it imports
megatron-core) where torch_npu cannot be imported or torch_ext did not load its NPU kernels; under make test-npu a
skip is a failure.
"""

import contextlib

import pytest
import torch

from npu_training_common import AVAILABLE, DTYPES, NPU, REASON, NpuOpLog, aclnn_calls, f64

if not AVAILABLE:  # before megatron-core's import (seconds natively, most of a minute under the aarch64 emulation)
    pytest.skip(REASON, allow_module_level=True)

import megatron_common as tmeg  # noqa: E402  (imports megatron-core)
import torch_ext.megatron as tm  # noqa: E402
from torch_ext.testing.tolerances import assert_accurate  # noqa: E402


# ----------------------------------------------------------------------------------------------------------
# torch_ext.megatron.patch() on npu tensors against Megatron's own torch path (unpatched) on the CPU.
patched = tmeg.patched  # the fixture: patch() for the test, unpatch() after


@pytest.fixture(autouse=True)
def _never_left_patched():
    yield
    tm.unpatch()
    assert tm.patched() == []


SOFTMAX_CASES = [(m, fp32, scale) for m in ("causal", "padding", "padding_key_broadcast", "padding_no_mask")
                 for fp32, scale in ((False, None), (True, 0.125))]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mask_name,softmax_in_fp32,scale", SOFTMAX_CASES,
                         ids=[f"{m}-fp32={a}-scale={b}" for m, a, b in SOFTMAX_CASES])
def test_megatron_fused_softmax(patched, mask_name, softmax_in_fp32, scale, dtype):
    """FusedScaleMaskSoftmax's fused path on npu (torch_ext.scaled_masked_softmax, fully masked rows 0) against
    Megatron's torch path on the CPU (tests/integrations/test_megatron.py's cases and tolerances)."""
    mask_type, mask, ref_mask = tmeg.MASKS[mask_name]
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(tmeg.B, tmeg.NP, tmeg.SQ, tmeg.SK, generator=g) * 3).to(dtype)
    dy = torch.randn(tmeg.B, tmeg.NP, tmeg.SQ, tmeg.SK, generator=g).to(dtype)
    fused = tmeg.softmax_module(dtype, mask_type, True, softmax_in_fp32, scale)
    assert fused.is_kernel_available(mask, tmeg.B, tmeg.NP, tmeg.SQ, tmeg.SK)
    xn = x.to(NPU).requires_grad_()
    log = NpuOpLog()
    with log:
        y = fused(xn.clone(), None if mask is None else mask.to(NPU))  # scores are never leaves in Megatron
        y.backward(dy.to(NPU))
    assert log.npu_ext() == {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default"}
    assert all(d == {NPU} for d in log.devices.values()), log.devices
    assert y.device.type == NPU and y.dtype == dtype
    y, gx = y.detach().cpu(), xn.grad.cpu()

    reference = tmeg.softmax_module(dtype, mask_type, False, softmax_in_fp32, scale)
    xr = x.clone().requires_grad_()
    yr = tmeg.eager(reference, xr.clone(), ref_mask, grad=dy)
    full = ref_mask.all(-1, keepdim=True) if ref_mask is not None else torch.zeros(1, 1, tmeg.SQ, 1, dtype=torch.bool)
    full = full.expand(y.shape)
    assert not y[full].any() and not gx[full].any()  # fused-kernel convention: 0, zero gradient
    torch.testing.assert_close(y[~full], yr.detach()[~full], **tmeg.TOL[dtype])
    torch.testing.assert_close(gx, xr.grad, **tmeg.TOL[dtype])
    # and against float64 by the contract's metric
    s = 1.0 if scale is None else scale
    m = torch.zeros((), dtype=torch.bool) if ref_mask is None else ref_mask
    ref = torch.softmax((x.double() * s).masked_fill(m, -10000.0), -1).masked_fill(full, 0)
    assert_accurate(y, ref, dtype, "patched FusedScaleMaskSoftmax on npu")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_megatron_bias_gelu(patched, dtype):
    """bias_gelu_impl (every module that imported it) on npu against Megatron's bias_gelu on the CPU, as
    tests/integrations/test_megatron.py::test_bias_gelu_matches_megatron holds it: accurate against Megatron's formulas in
    float64, nowhere farther from them than Megatron's own result in the dtype (beyond the tolerance), close to it."""
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(6, 5, 16, generator=g) * 2).to(dtype)
    b = torch.randn(16, generator=g).to(dtype)
    dy = torch.randn(6, 5, 16, generator=g).to(dtype)
    assert tmeg.megatron_mlp.bias_gelu_impl is tm._bias_gelu
    ours = [t.to(NPU).requires_grad_() for t in (x, b)]
    log = NpuOpLog()
    with log:
        y_ours = tmeg.megatron_mlp.bias_gelu_impl(*ours)
        y_ours.backward(dy.to(NPU))
    assert log.npu_ext() == {"npu_ext.gelu.default", "npu_ext.gelu_backward_v2.default"}
    assert all(d == {NPU} for d in log.devices.values()), log.devices
    theirs = [t.clone().requires_grad_() for t in (x, b)]
    y_theirs = tmeg.eager(tmeg.ORIGINALS["bias_gelu_impl"], *theirs, grad=dy)
    ref = [t.to(f64).requires_grad_() for t in (x, b)]
    y_ref = tmeg.eager(tmeg.ORIGINALS["bias_gelu_impl"], *ref, grad=dy.to(f64))
    tol = tmeg.TOL[dtype]
    for what, a, c, r in [("y", y_ours, y_theirs, y_ref), ("d input", ours[0].grad, theirs[0].grad, ref[0].grad),
                          ("d bias", ours[1].grad, theirs[1].grad, ref[1].grad)]:
        assert a.device.type == NPU and a.dtype == dtype, what
        a, c, r = a.detach().cpu(), c.detach(), r.detach()
        assert_accurate(a, r, dtype, f"bias_gelu {what} on npu")
        assert ((a.double() - r).abs() <= (c.double() - r).abs() + tol["atol"] + tol["rtol"] * r.abs()).all(), what
        torch.testing.assert_close(a.double(), c.double(), rtol=0.05, atol=0.05 if dtype != torch.float32 else 1e-4)


@pytest.mark.parametrize("tokens_kind", ["list", "tensor"])
@pytest.mark.parametrize("bias_kind", ["list", "tensor"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_megatron_expert_bias(patched, dtype, bias_kind, tokens_kind):
    """TEGroupedMLP._apply_bias on npu (one grouped_bias_add with counts and router probabilities) against
    Megatron's loop over experts on the CPU: values and the gradients of the hidden states (bitwise: the incoming
    gradient), every expert's bias and the probabilities."""
    g = torch.Generator().manual_seed(4)
    tokens_per_expert = [5, 0, 9, 2, 0, 16]
    n, h = sum(tokens_per_expert), 12
    x = torch.randn(n, h, generator=g).to(dtype)
    biases = [torch.randn(h, generator=g).to(dtype) for _ in tokens_per_expert]
    probs = torch.rand(n, 1, generator=g)  # fp32, as Megatron's router gives them
    dy = torch.randn(n, h, generator=g).to(dtype)

    def run(apply_bias, device, log=None):
        xs = x.to(device).requires_grad_()
        bs = [b.to(device).requires_grad_() for b in biases]
        ps = probs.to(device).requires_grad_()
        bias_arg = bs if bias_kind == "list" else torch.stack(bs)
        if bias_kind == "tensor":
            bias_arg.retain_grad()
        # Megatron's loop splits by a list (TEGroupedMLP passes tokens_per_expert.tolist()); ours takes either
        tokens = torch.tensor(tokens_per_expert) if tokens_kind == "tensor" and device == NPU else tokens_per_expert
        with log or contextlib.nullcontext():
            y = apply_bias(xs, bias_arg, tokens, ps)
            y.backward(dy.to(device))
        grads = bs if bias_kind == "list" else [bias_arg]
        return [t.cpu() for t in [y.detach(), xs.grad, ps.grad] + [b.grad for b in grads]]

    assert tmeg.megatron_experts.TEGroupedMLP._apply_bias is tm._expert_bias
    log = NpuOpLog()
    ours = run(tmeg.megatron_experts.TEGroupedMLP._apply_bias, NPU, log)
    assert {"npu_ext.grouped_bias_add.default", "npu_ext.grouped_bias_add_grad.default"} <= log.npu_ext()
    assert all(d == {NPU} for d in log.devices.values()), log.devices
    theirs = run(tmeg.ORIGINALS["_apply_bias"].__func__, "cpu")
    assert ours[0].dtype == theirs[0].dtype == dtype
    assert torch.equal(ours[1], theirs[1])
    for a, c in zip(ours, theirs):
        torch.testing.assert_close(a, c, **tmeg.TOL[dtype])


# ----------------------------------------------------------------------------------------------------------
# examples/megatron_gpt.py's GPT trained on the npu device through patch(), against the same on the CPU.
GPT_STEPS = 6
# bf16 training: the npu run rounds bf16 intermediates differently from the CPU one (ATen composites and the aclnn
# models vs the CPU kernels, the fake's fp32 layer norm), a last-place bf16 difference here and there that Adam
# carries along. Measured over 6 steps: the first loss equal (same weights, forward only), then at most 1.8e-4
# relative; first-step parameter gradients at most 1.4e-2 of each gradient's largest magnitude (3.6 bf16
# epsilons; the CPU's own patched and unpatched runs differ by 1.75e-2 there). The gradients are the sharper check:
# Adam normalises each parameter's update, so GELU's gradient scaled by 0.9 moves the losses by only 8e-4 over these
# steps, but the first-step gradients by 0.13. The operators' own accuracy is held above, per op and dtype.
GPT_LOSS_TOL = 1e-3
GPT_FIRST_LOSS_TOL = 1e-5
GPT_GRAD_TOL = 4e-2


def _train(example, device, monkeypatch):
    """Per-step losses and the first step's parameter gradients of the patched GPT trained on `device`."""
    grads = []
    step = torch.optim.Adam.step

    def recording_step(self, *args, **kwargs):
        if not grads:
            grads.extend(p.grad.detach().double().cpu() for group in self.param_groups for p in group["params"])
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", recording_step)
    log = NpuOpLog()
    with example.cpu_megatron(device=device), torch.compiler.set_stance("force_eager"):
        tm.patch()
        try:
            with log:
                losses = example.train_gpt(GPT_STEPS, fused=True, device=device)
        finally:
            tm.unpatch()
    monkeypatch.setattr(torch.optim.Adam, "step", step)
    return losses, grads, log


def _nonzero_oracle(x):
    """The coordinates of x's nonzero elements in row-major order, read element by element in float64 (a float is
    nonzero unless it is +0 or -0; NaN is nonzero)."""
    flat = x.to(f64).flatten().tolist()
    coords = []
    for i, v in enumerate(flat):
        if v != 0:  # NaN != 0
            c = []
            for d in reversed(x.shape):
                c.append(i % d)
                i //= d
            coords.append(c[::-1])
    return torch.tensor(coords, dtype=torch.long).reshape(len(coords), x.dim())


@pytest.mark.parametrize("case", ["bool", "fp16", "bf16", "int64_3d", "strided", "empty", "none_set"])
def test_nonzero_and_boolean_mask_indexing_on_npu(case):
    """aten::nonzero and a boolean-mask index / index_put_ on npu tensors (Megatron's cross entropy masks its
    targets so): torch_npu's data-dependent-shape route (aclnnNonzero for nonzero, aclnnNonzeroV2's transposed
    layout inside op-plugin's mask indexing: every read, and the write on torch_npu before 2.13; the output shape
    read back with aclGetViewShape) gives the oracle's coordinates, and the mask writes and reads the oracle's
    elements."""
    g = torch.Generator().manual_seed(5)
    x = {
        "bool": torch.rand(4, 7, generator=g) < 0.4,
        "fp16": torch.tensor([[0.0, -0.0, float("nan")], [1.0, 0.0, -2.0], [float("inf"), 6e-8, 0.0]]).half(),
        "bf16": torch.tensor([[0.0, -0.0, float("nan")], [1.0, 0.0, -2.0]]).bfloat16(),
        "int64_3d": torch.arange(60).reshape(3, 4, 5) % 3,
        "strided": torch.rand(6, 9, generator=g) < 0.5,  # a strided view on the device, below
        "empty": torch.zeros(0, 5, dtype=torch.bool),
        "none_set": torch.zeros(3, 4, dtype=torch.bool),
    }[case]
    x_npu = x.npu()
    if case == "strided":
        x, x_npu = x[1::2, ::3], x_npu[1::2, ::3]
    expected = _nonzero_oracle(x)
    before = {api: aclnn_calls(api) for api in ("aclnnNonzero", "aclnnNonzeroV2")}
    got = torch.nonzero(x_npu)
    assert got.device.type == NPU
    assert torch.equal(got.cpu(), expected), (got.cpu(), expected)
    if before["aclnnNonzero"] is not None and x.numel() > 0:  # the fake CANN: the aclnn operator launched
        assert aclnn_calls("aclnnNonzero") > before["aclnnNonzero"]
    mask = x_npu != 0
    values = torch.arange(1, x.numel() + 1, dtype=torch.float32).reshape(x.shape)
    on_npu = torch.zeros(x.shape).npu()
    on_npu[mask] = 2.0  # index_put_ with a boolean mask
    written = torch.zeros(x.shape, dtype=f64)
    for c in expected.tolist():
        written[tuple(c)] = 2.0
    assert torch.equal(on_npu.cpu().to(f64), written)
    read = values.npu()[mask]  # index with a boolean mask
    assert torch.equal(read.cpu(), torch.stack([values[tuple(c)] for c in expected.tolist()])
                       if len(expected) else torch.zeros(0))
    if before["aclnnNonzeroV2"] is not None and x.numel() > 0:  # the mask read went through it (every release)
        assert aclnn_calls("aclnnNonzeroV2") > before["aclnnNonzeroV2"]


def test_nonzero_refuses_a_dtype_its_operator_does_not_take():
    """aclnnNonzero takes no complex input (its A2 dtype list): phase 1 refuses it (161002) and torch_npu raises,
    naming the operator, instead of computing it."""
    x = torch.tensor([1 + 1j, 0j, 2j], dtype=torch.complex64).npu()
    with pytest.raises(RuntimeError, match=r"aclnnNonzero failed, error code is 161002"):
        torch.nonzero(x)


def test_megatron_gpt_trains_on_npu(monkeypatch):
    """examples/megatron_gpt.py's bf16 GPT (train_gpt(device="npu")) through patch() on the npu device: the npu_ext
    ops run on npu tensors as aclnn operators, it learns, and its losses and first-step gradients equal the same
    run's on the CPU within the tolerances above."""
    example = tmeg.load_example()
    before = {api: aclnn_calls(api) for api in ("aclnnScaledMaskedSoftmaxBackward", "aclnnGeluBackwardV2")}
    on_npu, npu_grads, log = _train(example, NPU, monkeypatch)
    ops = {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default",
           "npu_ext.gelu.default", "npu_ext.gelu_backward_v2.default"}
    assert ops <= log.npu_ext(), log.npu_ext()
    assert all(log.devices[o] == {NPU} for o in ops), log.devices
    if None not in before.values():  # the aclnn backward operators ran (not a CPU fallback)
        assert all(aclnn_calls(api) > n for api, n in before.items())
    on_cpu, cpu_grads, _ = _train(example, "cpu", monkeypatch)
    assert on_npu[-1] < on_npu[0] - 0.5  # it learns
    assert abs(on_npu[0] - on_cpu[0]) <= GPT_FIRST_LOSS_TOL * on_cpu[0]
    assert all(abs(a - c) <= GPT_LOSS_TOL * c for a, c in zip(on_npu, on_cpu)), (on_npu, on_cpu)
    assert len(npu_grads) == len(cpu_grads) > 0
    for a, c in zip(npu_grads, cpu_grads):
        assert (a - c).abs().max() <= GPT_GRAD_TOL * c.abs().max()
    # the loss comparison can fail: a curve off by 3 times the tolerance does
    assert not all(abs(a * (1 + 3 * GPT_LOSS_TOL) - c) <= GPT_LOSS_TOL * c for a, c in zip(on_npu, on_cpu))
