"""torch_ext.megatron against the real megatron-core (0.16.1, CPU): the patched fused softmax, bias-GELU and MoE
expert bias against Megatron's own paths (values and gradients), the npu_ext ops seen to run, patch()/unpatch()
restoring every original object (also around MindSpeed-style patches), and a small GPTModel trained with and
without the patch.

Megatron's originals are called under torch.compiler.set_stance("force_eager"): its jit_fuser is torch.compile,
and compiling them (minutes under the aarch64 emulation) would test inductor, not Megatron's formulas. The two
CUDA-only helpers GPTModel needs on the CPU are shimmed by examples/megatron_gpt.py (cpu_megatron()), test code,
never the package (on an NPU, MindSpeed and torch_npu provide them).
"""

import importlib.util
import os
import subprocess
import sys
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_ext.megatron as tm
from oracle import assert_accurate

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "Transformer Engine and Apex are not installed" and friends
    from megatron.core.fusions import fused_bias_gelu, fused_softmax
    from megatron.core.transformer import mlp as megatron_mlp
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.moe import experts as megatron_experts
    from megatron.core.transformer.moe import shared_experts
    from megatron.core.transformer.utils import attention_mask_func

f64 = torch.float64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FusedScaleMaskSoftmax = fused_softmax.FusedScaleMaskSoftmax
ORIGINALS = {  # the raw attributes before any patch
    "is_kernel_available": vars(FusedScaleMaskSoftmax)["is_kernel_available"],
    "forward_fused_softmax": vars(FusedScaleMaskSoftmax)["forward_fused_softmax"],
    "bias_gelu_impl": fused_bias_gelu.bias_gelu_impl,
    "_apply_bias": vars(megatron_experts.TEGroupedMLP)["_apply_bias"],
}


def original_state():
    return {
        "is_kernel_available": vars(FusedScaleMaskSoftmax)["is_kernel_available"],
        "forward_fused_softmax": vars(FusedScaleMaskSoftmax)["forward_fused_softmax"],
        "bias_gelu_impl": fused_bias_gelu.bias_gelu_impl,
        "mlp.bias_gelu_impl": megatron_mlp.bias_gelu_impl,
        "shared_experts.bias_gelu_impl": shared_experts.bias_gelu_impl,
        "_apply_bias": vars(megatron_experts.TEGroupedMLP)["_apply_bias"],
    }


@pytest.fixture
def patched():
    tm.patch()
    yield
    tm.unpatch()


@pytest.fixture(autouse=True)
def _always_unpatched():
    yield
    tm.unpatch()
    assert original_state() == dict(ORIGINALS, **{"mlp.bias_gelu_impl": ORIGINALS["bias_gelu_impl"],
                                                  "shared_experts.bias_gelu_impl": ORIGINALS["bias_gelu_impl"]})


class OpLog(TorchDispatchMode):
    """Records every operator that runs (npu_ext ops included), forward and backward."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))

    def npu_ext(self):
        return {o for o in self.ops if o.startswith("npu_ext.")}


def eager(fn, *args, grad=None):
    """fn(*args) with Megatron's jit (torch.compile) off, and its backward too when `grad` is given (the backward
    formulas are jit functions as well: compiled, they would be inductor's code, not Megatron's formulas)."""
    with torch.compiler.set_stance("force_eager"):
        out = fn(*args)
        if grad is not None:
            out.backward(grad)
        return out


TOL = {torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
       torch.float32: dict(rtol=1e-5, atol=1e-6)}


# ----------------------------------------------------------------------------------------------------------
# FusedScaleMaskSoftmax
def softmax_module(dtype, mask_type, fusion, softmax_in_fp32, scale, window_size=None):
    return FusedScaleMaskSoftmax(dtype == torch.float16, dtype == torch.bfloat16, mask_type, fusion,
                                 attention_mask_func, softmax_in_fp32, scale, window_size)


B, NP, SQ, SK = 2, 3, 12, 12


def masks():
    """(mask type, mask given to the fused module, mask the reference (Megatron's torch path) needs)."""
    g = torch.Generator().manual_seed(5)
    causal = torch.ones(SQ, SK, dtype=torch.bool).triu(1).reshape(1, 1, SQ, SK)
    full = torch.rand(B, 1, SQ, SK, generator=g) < 0.3
    full[0, 0, 2] = True  # fully masked rows
    full[1, 0, 7] = True
    per_head = torch.rand(B, NP, SQ, SK, generator=g) < 0.3
    per_head[1, 2, 4] = True
    key_pad = torch.zeros(B, 1, 1, SK, dtype=torch.bool)
    key_pad[1, ..., 9:] = True
    yield "causal", AttnMaskType.causal, None, causal  # Megatron's torch path builds it on cuda: given here
    yield "causal_mask_ignored", AttnMaskType.causal, full, causal  # the fused path generates the causal mask
    yield "padding", AttnMaskType.padding, full, full
    yield "padding_per_head", AttnMaskType.padding, per_head, per_head
    yield "padding_key_broadcast", AttnMaskType.padding, key_pad, key_pad
    yield "padding_no_mask", AttnMaskType.padding, None, None
    yield "arbitrary", AttnMaskType.arbitrary, full, full


MASKS = {name: rest for name, *rest in masks()}
# softmax_in_fp32, scale: Megatron requires softmax_in_fp32 when scale is given.
PRECISION = [(False, None), (True, None), (True, 0.125), (True, 3.0)]


@pytest.mark.parametrize("softmax_in_fp32,scale", PRECISION, ids=[f"fp32={a}-scale={b}" for a, b in PRECISION])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mask_name", list(MASKS))
def test_fused_softmax_matches_megatron_torch_path(patched, mask_name, dtype, softmax_in_fp32, scale):
    mask_type, mask, ref_mask = MASKS[mask_name]
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(B, NP, SQ, SK, generator=g) * 3).to(dtype)
    dy = torch.randn(B, NP, SQ, SK, generator=g).to(dtype)

    fused = softmax_module(dtype, mask_type, True, softmax_in_fp32, scale)
    reference = softmax_module(dtype, mask_type, False, softmax_in_fp32, scale)
    assert fused.is_kernel_available(mask, B, NP, SQ, SK)
    # Attention scores are never leaves in Megatron (its torch path masks them in place): clone() them.
    xf, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    log = OpLog()
    with log:
        y = fused(xf.clone(), mask)
        y.backward(dy)
    assert log.npu_ext() == {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default"}
    yr = reference(xr.clone(), ref_mask)
    yr.backward(dy)
    assert y.dtype == yr.dtype == dtype

    full = (ref_mask.all(-1, keepdim=True) if ref_mask is not None else torch.zeros(1, 1, SQ, 1, dtype=torch.bool))
    full = full.expand(B, NP, SQ, SK)
    # Fully masked rows: 0 (Megatron's fused kernel), where Megatron's torch path is uniform; zero gradient.
    assert torch.equal(y[full], torch.zeros_like(y[full]))
    assert torch.equal(yr[full].float(), torch.full_like(yr[full].float(), 1 / SK).to(dtype).float())
    assert torch.equal(xf.grad[full], torch.zeros_like(xf.grad[full]))
    torch.testing.assert_close(y[~full], yr[~full], **TOL[dtype])
    torch.testing.assert_close(xf.grad, xr.grad, **TOL[dtype])
    if mask_name in ("padding", "padding_per_head", "arbitrary"):
        assert full.any()  # the case can tell the two conventions apart


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_fused_softmax_accuracy(patched, dtype):
    """Against float64, by the SPEC metric (the reference path above rounds in its own way)."""
    mask_type, mask, _ = MASKS["padding"]
    x = (torch.randn(B, NP, SQ, SK) * 3).to(dtype)
    y = softmax_module(dtype, mask_type, True, True, 0.5)(x, mask)
    ref = torch.softmax((x.to(f64) * 0.5).masked_fill(mask, -10000.0), -1).masked_fill(mask.all(-1, keepdim=True), 0)
    assert_accurate(y, ref, dtype, "patched FusedScaleMaskSoftmax")


@pytest.mark.parametrize("case", ["fp32_input", "fp32_flags", "window_size", "softmax_offset", "long_keys",
                                  "causal_sq_ne_sk", "fusion_off"])
def test_other_cases_stay_on_megatron_torch_path(patched, case):
    dtype, mask_type, b, np_, sq, sk = torch.bfloat16, AttnMaskType.padding, 1, 2, 4, 8
    offset = None
    if case == "long_keys":
        sk = 4100
    if case == "causal_sq_ne_sk":
        mask_type, sq = AttnMaskType.causal, 1  # one query against a KV cache: Megatron uses no mask there
    module = softmax_module(dtype, mask_type, case != "fusion_off", True, None,
                            window_size=(3, 0) if case == "window_size" else None)
    if case == "fp32_flags":
        module = FusedScaleMaskSoftmax(False, False, mask_type, True, attention_mask_func, True, None)
    x = torch.randn(b, np_, sq, sk, dtype=torch.float32 if case in ("fp32_input", "fp32_flags") else dtype)
    mask = None if case in ("causal_sq_ne_sk", "window_size") else torch.rand(b, 1, sq, sk) < 0.3
    if case == "softmax_offset":
        offset = torch.zeros(np_)
    if case == "window_size":  # Megatron's torch path builds the window mask on cuda: the routing only
        assert not module.is_kernel_available(mask, b, np_, sq, sk)
        assert vars(FusedScaleMaskSoftmax)["is_kernel_available"] is tm.is_kernel_available
        return
    log = OpLog()
    with log:
        y = module(x, mask, offset) if offset is not None else module(x, mask)
    assert not log.npu_ext(), log.npu_ext()
    reference = softmax_module(x.dtype if x.dtype != torch.float32 else dtype, mask_type, False, True, None)
    if case == "fp32_flags":
        reference = FusedScaleMaskSoftmax(False, False, mask_type, False, attention_mask_func, True, None)
    expected = reference(x, mask, offset) if offset is not None else reference(x, mask)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)


def test_unpatched_fused_path_needs_cuda_kernels():
    """What a user hits without the patch (and gets back after unpatch())."""
    module = softmax_module(torch.bfloat16, AttnMaskType.causal, True, True, None)
    with pytest.raises(ModuleNotFoundError, match="scaled_masked_softmax_cuda"):
        module(torch.randn(2, 4, 32, 32, dtype=torch.bfloat16), None)
    tm.patch()
    assert module(torch.randn(2, 4, 32, 32, dtype=torch.bfloat16), None).shape == (2, 4, 32, 32)
    tm.unpatch()
    with pytest.raises(ModuleNotFoundError, match="scaled_masked_softmax_cuda"):
        module(torch.randn(2, 4, 32, 32, dtype=torch.bfloat16), None)


# ----------------------------------------------------------------------------------------------------------
# bias_gelu_impl
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_bias_gelu_matches_megatron(patched, dtype):
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(6, 5, 16, generator=g) * 2).to(dtype)
    b = torch.randn(16, generator=g).to(dtype)
    dy = torch.randn(6, 5, 16, generator=g).to(dtype)
    # every module that imported it by name calls ours now
    assert megatron_mlp.bias_gelu_impl is shared_experts.bias_gelu_impl is fused_bias_gelu.bias_gelu_impl \
        is tm.bias_gelu_impl
    ours = [t.clone().requires_grad_() for t in (x, b)]
    log = OpLog()
    with log:
        megatron_mlp.bias_gelu_impl(*ours).backward(dy)
    assert log.npu_ext() == {"npu_ext.gelu.default", "npu_ext.gelu_backward_v2.default"}
    theirs = [t.clone().requires_grad_() for t in (x, b)]
    y_theirs = eager(ORIGINALS["bias_gelu_impl"], *theirs, grad=dy)
    ref = [t.to(f64).requires_grad_() for t in (x, b)]  # Megatron's formulas in float64
    y_ref = eager(ORIGINALS["bias_gelu_impl"], *ref, grad=dy.to(f64))
    y_ours = tm.bias_gelu_impl(x, b)
    # Megatron's original in fp16/bf16 rounds every intermediate; ours computes in fp32 and rounds once. So: ours
    # is accurate (SPEC metric against float64), and nowhere farther from float64 than Megatron's own result,
    # beyond a few ulps.
    for what, a, c, r in [("y", y_ours, y_theirs, y_ref), ("d input", ours[0].grad, theirs[0].grad, ref[0].grad),
                          ("d bias", ours[1].grad, theirs[1].grad, ref[1].grad)]:
        assert a.dtype == dtype
        assert_accurate(a, r.detach(), dtype, f"bias_gelu {what}")
        tol = TOL[dtype]["atol"] + TOL[dtype]["rtol"] * r.detach().abs()
        assert ((a.double() - r).abs() <= (c.double() - r).abs() + tol).all(), what
        torch.testing.assert_close(a.double(), c.double(), rtol=0.05, atol=0.05 if dtype != torch.float32 else 1e-4)


def test_bias_gelu_backward_is_tanh_gelu_backward_v2(patched):
    seen = []

    class Args(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if str(func) == "npu_ext.gelu_backward_v2.default":
                seen.append(args[2] if len(args) > 2 else (kwargs or {}).get("approximate", "none"))
            return func(*args, **(kwargs or {}))

    x = torch.randn(4, 8, requires_grad=True)
    with Args():
        fused_bias_gelu.bias_gelu_impl(x, torch.randn(8)).sum().backward()
    assert seen == ["tanh"]


# ----------------------------------------------------------------------------------------------------------
# TEGroupedMLP._apply_bias
@pytest.mark.parametrize("bias_kind", ["list", "tensor"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_expert_bias_matches_megatron(patched, dtype, bias_kind):
    g = torch.Generator().manual_seed(4)
    tokens_per_expert = [5, 0, 9, 2, 0, 16]
    n, h = sum(tokens_per_expert), 12
    x = torch.randn(n, h, generator=g).to(dtype)
    biases = [torch.randn(h, generator=g).to(dtype) for _ in tokens_per_expert]
    probs = torch.rand(n, 1, generator=g)  # router probabilities: fp32, as Megatron's router gives them
    dy = torch.randn(n, h, generator=g).to(dtype)

    def run(apply_bias):
        xs = x.clone().requires_grad_()
        bs = [b.clone().requires_grad_() for b in biases]
        ps = probs.clone().requires_grad_()
        bias_arg = bs if bias_kind == "list" else torch.stack(bs)
        log = OpLog()
        with log:
            y = apply_bias(xs, bias_arg, tokens_per_expert, ps)
            y.backward(dy)
        return y, xs.grad, bs, ps.grad, log

    apply_bias = megatron_experts.TEGroupedMLP._apply_bias
    assert apply_bias is tm._apply_bias
    y, dx, bs, dp, log = run(apply_bias)
    assert {"npu_ext.grouped_bias_add.default", "npu_ext.grouped_bias_add_grad.default"} <= log.npu_ext()
    y0, dx0, bs0, dp0, _ = run(ORIGINALS["_apply_bias"].__func__)
    assert y.dtype == y0.dtype == dtype
    torch.testing.assert_close(y, y0, **TOL[dtype])
    torch.testing.assert_close(dx, dx0, rtol=0, atol=0)
    if bias_kind == "list":
        for b, b0 in zip(bs, bs0):
            torch.testing.assert_close(b.grad, b0.grad, **TOL[dtype])
    torch.testing.assert_close(dp, dp0, **TOL[dtype])


def test_expert_bias_none_and_3d_hidden(patched):
    x = torch.randn(2, 3, 8)
    assert megatron_experts.TEGroupedMLP._apply_bias(x, None, [6], torch.rand(6, 1)) is x
    biases = [torch.randn(8), torch.randn(8)]
    probs = torch.rand(6, 1)
    y = megatron_experts.TEGroupedMLP._apply_bias(x, biases, [2, 4], probs)
    y0 = ORIGINALS["_apply_bias"].__func__(x, biases, [2, 4], probs)
    assert y.shape == (2, 3, 8)
    torch.testing.assert_close(y, y0)


# ----------------------------------------------------------------------------------------------------------
# patch() / unpatch()
def test_patch_unpatch_restore_everything():
    assert tm.patched() == []
    first = tm.patch()
    assert first == [f"{m}.{p}" for m, p, _, _ in tm.TARGETS]
    assert tm.patch() == first  # idempotent
    assert fused_bias_gelu.bias_gelu_impl is megatron_mlp.bias_gelu_impl is tm.bias_gelu_impl
    assert vars(FusedScaleMaskSoftmax)["is_kernel_available"] is tm.is_kernel_available
    tm.unpatch()
    tm.unpatch()  # idempotent
    assert tm.patched() == []
    assert vars(megatron_experts.TEGroupedMLP)["_apply_bias"] is ORIGINALS["_apply_bias"]  # the staticmethod
    # (the autouse fixture checks every original object after each test)


def test_unpatch_reaches_modules_imported_after_patch():
    import types

    tm.patch()
    late = types.ModuleType("late_user_module")
    late.bias_gelu_impl = fused_bias_gelu.bias_gelu_impl  # `from ... import bias_gelu_impl` after patch()
    sys.modules["late_user_module"] = late
    try:
        assert late.bias_gelu_impl is tm.bias_gelu_impl
        tm.unpatch()
        assert late.bias_gelu_impl is ORIGINALS["bias_gelu_impl"]
    finally:
        del sys.modules["late_user_module"]


def mindspeed_style_patch(owner, name, new):
    """What MindSpeed's patch manager does (mindspeed/patch_utils.py, Patch.apply_patch): setattr on the
    owner, then every module attribute of that name holding the current object gets the new one."""
    current = getattr(owner, name)
    setattr(owner, name, new)
    for mod in list(sys.modules.values()):
        if hasattr(mod, name) and getattr(mod, name) is current:
            setattr(mod, name, new)
    return current


def _mindspeed_forward_fused_softmax(self, input, mask):  # stands for MindSpeed's (npu_scaled_masked_softmax)
    raise AssertionError("MindSpeed's fused softmax")


def _mindspeed_is_kernel_available(self, mask, b, np, sq, sk):
    return True


@pytest.mark.parametrize("order", ["mindspeed_first", "ours_first"])
def test_with_mindspeed_patches(order):
    def apply_mindspeed():
        mindspeed_style_patch(FusedScaleMaskSoftmax, "is_kernel_available", _mindspeed_is_kernel_available)
        mindspeed_style_patch(FusedScaleMaskSoftmax, "forward_fused_softmax", _mindspeed_forward_fused_softmax)

    try:
        if order == "mindspeed_first":  # the documented order: ours win, unpatch() gives MindSpeed's back
            apply_mindspeed()
            tm.patch()
            assert len(tm.patched()) == len(tm.TARGETS)
            module = softmax_module(torch.bfloat16, AttnMaskType.padding, True, True, None)
            assert module(torch.randn(1, 2, 4, 8, dtype=torch.bfloat16), None).shape == (1, 2, 4, 8)
            tm.unpatch()
            assert vars(FusedScaleMaskSoftmax)["forward_fused_softmax"] is _mindspeed_forward_fused_softmax
            assert vars(FusedScaleMaskSoftmax)["is_kernel_available"] is _mindspeed_is_kernel_available
        else:  # MindSpeed's replace ours; unpatch() leaves them alone and restores the rest
            tm.patch()
            apply_mindspeed()
            assert "megatron.core.fusions.fused_softmax.FusedScaleMaskSoftmax.forward_fused_softmax" not in tm.patched()
            assert "megatron.core.fusions.fused_bias_gelu.bias_gelu_impl" in tm.patched()
            tm.unpatch()
            assert vars(FusedScaleMaskSoftmax)["forward_fused_softmax"] is _mindspeed_forward_fused_softmax
            assert fused_bias_gelu.bias_gelu_impl is ORIGINALS["bias_gelu_impl"]
    finally:
        FusedScaleMaskSoftmax.is_kernel_available = ORIGINALS["is_kernel_available"]
        FusedScaleMaskSoftmax.forward_fused_softmax = ORIGINALS["forward_fused_softmax"]


def test_import_torch_ext_does_not_import_megatron(tmp_path):
    code = "import sys, torch_ext, torch_ext.megatron; print(any(m.split('.')[0] == 'megatron' for m in sys.modules))"
    # cwd: not the repository (sys.path[0] is the cwd under -c), so the installed torch_ext is the one imported
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------------------------------------
# A small Megatron GPT trained with and without the patch: examples/megatron_gpt.py's model and CPU shims.
def load_example():
    spec = importlib.util.spec_from_file_location("megatron_gpt", os.path.join(ROOT, "examples", "megatron_gpt.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpt_trains_the_same_with_the_patch():
    example = load_example()
    steps = 4
    with example.cpu_megatron(), torch.compiler.set_stance("force_eager"):
        base_log, log = OpLog(), OpLog()
        with base_log:
            base = example.train_gpt(steps, fused=False)
        tm.patch()
        try:
            with log:
                ours = example.train_gpt(steps, fused=True)
        finally:
            tm.unpatch()
    assert not base_log.npu_ext()
    assert {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default",
            "npu_ext.gelu.default", "npu_ext.gelu_backward_v2.default"} <= log.npu_ext(), log.npu_ext()
    assert base[-1] < base[0] - 0.1 and ours[-1] < ours[0] - 0.1  # both learn
    assert example.curves_agree(ours, base), (ours, base)
    assert not example.curves_agree([x * 1.03 for x in ours], base)  # the comparison can fail


def test_example_runs():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "megatron_gpt.py"), "--steps", "3"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OK: 3 steps" in r.stdout, r.stdout
    assert "FusedScaleMaskSoftmax.forward_fused_softmax" in r.stdout
