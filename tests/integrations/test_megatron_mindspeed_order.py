"""torch_ext.megatron and MindSpeed's replacements in every order (CPU, the real megatron-core):
tests/support/mindspeed_double.py makes MindSpeed's replacements by name (fused softmax methods and classes,
GroupedMLP; bias_gelu_impl and TEGroupedMLP._apply_bias left alone), and status(), the objects in place and the
softmax that runs are checked after each step. The real MindSpeed: tests/integrations/test_mindspeed.py."""

import warnings

import pytest
import torch

import torch_ext.megatron as tm

# as test_megatron.py: natively once, on every megatron-core release
pytestmark = [pytest.mark.megatron, pytest.mark.release, pytest.mark.arch_independent]

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "Transformer Engine and Apex are not installed" and friends
    import mindspeed_double

from megatron_common import (  # noqa: E402,F401  (imports megatron-core; always_unpatched: the autouse fixture)
    BIAS_GELU_IMPL, GROUPED_MLP, ORIGINALS, OUR_FUNCTIONS, OURS, RELEASE, SOFTMAX_REPLACED, SOFTMAX_TARGETS, TARGETS,
    AttnMaskType, FusedScaleMaskSoftmax, always_unpatched, expected_status, fused_bias_gelu, fused_softmax,
    megatron_experts, softmax_module,
)
from helpers import OpLog  # noqa: E402


# ----------------------------------------------------------------------------------------------------------
# With MindSpeed: tests/support/mindspeed_double.py makes MindSpeed's replacements by name (fused softmax methods and
# classes, GroupedMLP; bias_gelu_impl and TEGroupedMLP._apply_bias left alone).
MS_SHAPE = (1, 2, 48, 48)  # passes MindSpeed's gate too (32 < sk <= 4096, sq and sk multiples of 16)


def run_fused_softmax():
    """A fused bf16 causal softmax module's forward and backward: which softmax ran (the double's calls and the
    npu_ext ops), and the result."""
    mindspeed_double.CALLS.clear()
    module = softmax_module(torch.bfloat16, AttnMaskType.causal, True, True, None)
    x = torch.randn(*MS_SHAPE).to(torch.bfloat16).requires_grad_()
    log = OpLog()
    with log:
        y = module(x.clone(), None)
        y.backward(torch.ones_like(y))
    return dict(mindspeed_double.CALLS), log.npu_ext(), y


def check_mindspeed_objects():
    """The double's objects MindSpeed keeps whatever the order: its softmax classes and its GroupedMLP."""
    assert fused_softmax.ScaledMaskedSoftmax is mindspeed_double.ScaledMaskedSoftmax
    assert fused_softmax.ScaledUpperTriangMaskedSoftmax is mindspeed_double.ScaledUpperTriangMaskedSoftmax
    if RELEASE["GroupedMLP"]:
        assert megatron_experts.GroupedMLP.__module__ == "mindspeed_double"
        assert megatron_experts.GroupedMLP.__bases__ == (GROUPED_MLP,)


def test_mindspeed_then_ours():
    """The documented order (import mindspeed.megatron_adaptor, then patch()): ours in place for every target
    this release has, MindSpeed's other replacements kept; unpatch() gives MindSpeed's back."""
    try:
        replaced = mindspeed_double.apply()
        assert set(SOFTMAX_TARGETS) <= set(replaced) and BIAS_GELU_IMPL not in replaced
        assert tm.status() == expected_status(SOFTMAX_REPLACED)
        calls, ops, _ = run_fused_softmax()
        assert calls["forward_fused_softmax"] == 1 and not ops  # MindSpeed's softmax runs

        assert tm.patch() == TARGETS
        assert tm.status() == expected_status(OURS)
        assert tm.patched() == TARGETS
        calls, ops, y = run_fused_softmax()
        assert "forward_fused_softmax" not in calls and "is_kernel_available" not in calls
        assert ops == {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default"}
        # MindSpeed's modules hold bias_gelu_impl by name: ours now
        assert mindspeed_double.bias_gelu_impl is tm._bias_gelu
        check_mindspeed_objects()

        tm.unpatch()
        assert tm.status() == expected_status(SOFTMAX_REPLACED)
        assert vars(FusedScaleMaskSoftmax)["forward_fused_softmax"] is mindspeed_double.forward_fused_softmax
        assert mindspeed_double.bias_gelu_impl is ORIGINALS["bias_gelu_impl"]
        check_mindspeed_objects()
    finally:
        tm.unpatch()
        mindspeed_double.reset()


def test_ours_then_mindspeed():
    """patch() before MindSpeed's adaptor: MindSpeed's softmax replaces ours (README), status() says so; the
    bias-GELU and the expert bias stay ours; unpatch() leaves MindSpeed's objects and restores the rest."""
    try:
        tm.patch()
        mindspeed_double.apply()
        assert tm.status() == expected_status(OURS, SOFTMAX_REPLACED)
        assert tm.patched() == [t for t in TARGETS if t not in SOFTMAX_TARGETS]
        # MindSpeed's patch manager rebinds every module attribute named like its target that held what it
        # replaced (ours here): torch_ext.megatron holds ours under names of its own, which it leaves alone
        assert vars(tm)["_softmax_forward"] is OUR_FUNCTIONS["_softmax_forward"]
        calls, ops, _ = run_fused_softmax()
        assert calls["forward_fused_softmax"] == 1 and not ops  # MindSpeed's softmax wins
        check_mindspeed_objects()

        tm.unpatch()
        assert tm.status() == expected_status(SOFTMAX_REPLACED)
        assert vars(FusedScaleMaskSoftmax)["forward_fused_softmax"] is mindspeed_double.forward_fused_softmax
        assert fused_bias_gelu.bias_gelu_impl is mindspeed_double.bias_gelu_impl is ORIGINALS["bias_gelu_impl"]
    finally:
        tm.unpatch()
        mindspeed_double.reset()  # puts back what it found: ours, which unpatch() no longer knows of
        FusedScaleMaskSoftmax.is_kernel_available = ORIGINALS["is_kernel_available"]
        FusedScaleMaskSoftmax.forward_fused_softmax = ORIGINALS["forward_fused_softmax"]


def test_mindspeed_repatch_then_patch_again():
    """MindSpeed, patch(), MindSpeed's repatch() (RL frameworks call it), patch() again: the repatch puts MindSpeed's
    softmax over ours (status() says so), the second patch() puts ours back on every target, and unpatch() then
    gives MindSpeed's back. Fails with a patch() that returns early once it has patched (0.4's)."""
    try:
        mindspeed_double.apply()
        assert tm.patch() == TARGETS
        mindspeed_double.repatch()
        assert tm.status() == expected_status(OURS, SOFTMAX_REPLACED)
        assert tm.patched() == [t for t in TARGETS if t not in SOFTMAX_TARGETS]
        calls, ops, _ = run_fused_softmax()
        assert calls["forward_fused_softmax"] == 1 and not ops  # MindSpeed's softmax runs
        assert vars(tm)["_softmax_forward"] is OUR_FUNCTIONS["_softmax_forward"]

        assert tm.patch() == TARGETS
        assert tm.status() == expected_status(OURS)
        calls, ops, _ = run_fused_softmax()
        assert "forward_fused_softmax" not in calls
        assert ops == {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default"}
        assert tm.patch() == TARGETS  # nothing left to change

        tm.unpatch()
        assert tm.status() == expected_status(SOFTMAX_REPLACED)
        assert vars(FusedScaleMaskSoftmax)["forward_fused_softmax"] is mindspeed_double.forward_fused_softmax
        assert vars(FusedScaleMaskSoftmax)["is_kernel_available"] is mindspeed_double.is_kernel_available
        assert fused_bias_gelu.bias_gelu_impl is mindspeed_double.bias_gelu_impl is ORIGINALS["bias_gelu_impl"]
        check_mindspeed_objects()
    finally:
        tm.unpatch()
        mindspeed_double.reset()


def test_ours_then_mindspeed_then_ours_again():
    """patch(), MindSpeed's adaptor, patch() again: ours back in place, and unpatch() gives back what our latest
    replacement found, MindSpeed's, never Megatron's over MindSpeed's (what the first patch() found)."""
    try:
        tm.patch()
        mindspeed_double.apply()
        assert tm.status() == expected_status(OURS, SOFTMAX_REPLACED)
        assert tm.patch() == TARGETS
        assert tm.status() == expected_status(OURS)
        tm.unpatch()
        assert tm.status() == expected_status(SOFTMAX_REPLACED)
        assert vars(FusedScaleMaskSoftmax)["forward_fused_softmax"] is mindspeed_double.forward_fused_softmax
        assert vars(FusedScaleMaskSoftmax)["is_kernel_available"] is mindspeed_double.is_kernel_available
        check_mindspeed_objects()
    finally:
        tm.unpatch()
        mindspeed_double.reset()
        FusedScaleMaskSoftmax.is_kernel_available = ORIGINALS["is_kernel_available"]
        FusedScaleMaskSoftmax.forward_fused_softmax = ORIGINALS["forward_fused_softmax"]


def test_mindspeed_double_softmax_is_megatrons_formula():
    """The double's softmax computes what Megatron's torch path does, so that a model trains through it."""
    x = torch.randn(*MS_SHAPE).to(torch.bfloat16)
    module = softmax_module(torch.bfloat16, AttnMaskType.causal, True, True, None)
    try:
        mindspeed_double.apply()
        mindspeed_double.CALLS.clear()
        theirs = module(x.clone(), None)
        assert mindspeed_double.CALLS["forward_fused_softmax"] == 1
    finally:
        mindspeed_double.reset()
    causal = torch.ones(MS_SHAPE[-2:], dtype=torch.bool).triu(1)
    reference = softmax_module(torch.bfloat16, AttnMaskType.causal, False, True, None)(x.clone(), causal)
    torch.testing.assert_close(theirs, reference, rtol=0, atol=0)
