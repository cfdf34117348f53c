"""What the Megatron tests share (tests/integrations/test_megatron.py, tests/npu/test_npu_megatron.py): megatron-core's
objects, the table of what each release has (RELEASES), the originals before any patch, the fixture that patches,
Megatron's own paths run eagerly, and the fused softmax's modules and masks. Importing it imports megatron-core."""

import importlib.util
import inspect
import os
import warnings

import pytest
import torch

import paths
import torch_ext.megatron as tm
from torch_ext.testing import tolerances

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "Transformer Engine and Apex are not installed" and friends
    from megatron.core import package_info
    from megatron.core.fusions import fused_bias_gelu, fused_softmax
    from megatron.core.transformer import mlp as megatron_mlp
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.moe import experts as megatron_experts
    from megatron.core.transformer.moe import shared_experts
    from megatron.core.transformer.utils import attention_mask_func


f64 = torch.float64
FusedScaleMaskSoftmax = fused_softmax.FusedScaleMaskSoftmax

# ----------------------------------------------------------------------------------------------------------
# What each megatron-core release has, read from its sources (megatron/core/fusions/fused_softmax.py,
# megatron/core/transformer/moe/experts.py), by major.minor: the targets of torch_ext.megatron it defines, whether
# FusedScaleMaskSoftmax takes window_size (constructor) and softmax_offset (forward), and whether
# moe.experts.GroupedMLP (what MindSpeed's gmm replaces) exists.
IS_KERNEL_AVAILABLE = "megatron.core.fusions.fused_softmax.FusedScaleMaskSoftmax.is_kernel_available"
FORWARD_FUSED_SOFTMAX = "megatron.core.fusions.fused_softmax.FusedScaleMaskSoftmax.forward_fused_softmax"
BIAS_GELU_IMPL = "megatron.core.fusions.fused_bias_gelu.bias_gelu_impl"
APPLY_BIAS = "megatron.core.transformer.moe.experts.TEGroupedMLP._apply_bias"
SOFTMAX_TARGETS = (IS_KERNEL_AVAILABLE, FORWARD_FUSED_SOFTMAX)
ALL = (IS_KERNEL_AVAILABLE, FORWARD_FUSED_SOFTMAX, BIAS_GELU_IMPL, APPLY_BIAS)
_0_12 = dict(targets=ALL[:3], window_size=False, softmax_offset=False, GroupedMLP=True)  # TEGroupedMLP: no bias
_0_15 = dict(targets=ALL, window_size=True, softmax_offset=True, GroupedMLP=True)  # + TEGroupedMLP._apply_bias
_0_17 = dict(_0_15, GroupedMLP=False)  # GroupedMLP removed (TEGroupedMLP stays)
RELEASES = {(0, 12): _0_12, (0, 13): _0_12, (0, 14): _0_12, (0, 15): _0_15, (0, 16): _0_15, (0, 17): _0_17,
            (0, 18): _0_17, (0, 19): _0_17}
# From 0.17 __version__ carries "+<git commit>" of whatever git repository holds megatron's directory (a
# Megatron-LM checkout, or this repository for the venvs of make test-megatron): the release without it.
MCORE = package_info.__version__.split("+")[0]
MCORE_KEY = tuple(int(v) for v in MCORE.split(".")[:2])
# An untested release: test_release_table fails; the rest runs against the newest row.
RELEASE = RELEASES.get(MCORE_KEY, RELEASES[max(RELEASES)])
TARGETS = [t for t in ALL if t in RELEASE["targets"]]


def absent(target):
    """Skips the test on a release that RELEASES says lacks `target`."""
    name = ".".join(target.split(".")[-2:])
    return pytest.mark.skipif(target not in RELEASE["targets"], reason=f"megatron-core {MCORE} has no {name}")


def feature(name):
    """Skips the test on a release that RELEASES says lacks FusedScaleMaskSoftmax's `name` argument."""
    return pytest.mark.skipif(not RELEASE[name], reason=f"megatron-core {MCORE} has no FusedScaleMaskSoftmax {name}")


ORIGINALS = {  # the raw attributes before any patch
    "is_kernel_available": vars(FusedScaleMaskSoftmax)["is_kernel_available"],
    "forward_fused_softmax": vars(FusedScaleMaskSoftmax)["forward_fused_softmax"],
    "bias_gelu_impl": fused_bias_gelu.bias_gelu_impl,
    "_apply_bias": vars(megatron_experts.TEGroupedMLP).get("_apply_bias"),  # None before 0.15
}
GROUPED_MLP = getattr(megatron_experts, "GroupedMLP", None)


def original_state():
    return {
        "is_kernel_available": vars(FusedScaleMaskSoftmax)["is_kernel_available"],
        "forward_fused_softmax": vars(FusedScaleMaskSoftmax)["forward_fused_softmax"],
        "bias_gelu_impl": fused_bias_gelu.bias_gelu_impl,
        "mlp.bias_gelu_impl": megatron_mlp.bias_gelu_impl,
        "shared_experts.bias_gelu_impl": shared_experts.bias_gelu_impl,
        "_apply_bias": vars(megatron_experts.TEGroupedMLP).get("_apply_bias"),
    }


@pytest.fixture
def patched():
    tm.patch()
    yield
    tm.unpatch()


def eager(fn, *args, grad=None):
    """fn(*args) with Megatron's jit (torch.compile) off, and its backward too when `grad` is given (the backward
    formulas are jit functions as well: compiled, they would be inductor's code, not Megatron's formulas)."""
    with torch.compiler.set_stance("force_eager"):
        out = fn(*args)
        if grad is not None:
            out.backward(grad)
        return out


TOL = {dtype: tolerances.close(tolerances.NATIVE, dtype) for dtype in tolerances.NATIVE}


# ----------------------------------------------------------------------------------------------------------
# FusedScaleMaskSoftmax
def softmax_module(dtype, mask_type, fusion, softmax_in_fp32, scale, window_size=None):
    extra = {} if window_size is None else {"window_size": window_size}  # megatron-core >= 0.15
    return FusedScaleMaskSoftmax(dtype == torch.float16, dtype == torch.bfloat16, mask_type, fusion,
                                 attention_mask_func, softmax_in_fp32, scale, **extra)


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


# A small Megatron GPT trained with and without the patch: examples/megatron_gpt.py's model and CPU shims.
def load_example():
    spec = importlib.util.spec_from_file_location("megatron_gpt", os.path.join(paths.EXAMPLES, "megatron_gpt.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------------------------------------------------
# status() and the state after each test
# torch_ext.megatron's own functions (the replacements among them), which no scan (ours, MindSpeed's) may rebind
OUR_FUNCTIONS = {name: f for name, f in vars(tm).items() if inspect.isfunction(f)}


@pytest.fixture(autouse=True)
def always_unpatched():
    """Autouse in the modules that import it: every test ends unpatched, with every original in place."""
    yield
    tm.unpatch()
    assert {name: vars(tm)[name] for name in OUR_FUNCTIONS} == OUR_FUNCTIONS
    assert original_state() == dict(ORIGINALS, **{"mlp.bias_gelu_impl": ORIGINALS["bias_gelu_impl"],
                                                  "shared_experts.bias_gelu_impl": ORIGINALS["bias_gelu_impl"]})
    assert getattr(megatron_experts, "GroupedMLP", None) is GROUPED_MLP


def expected_status(*states):
    """status() as RELEASES says it must be: each of `states` maps targets to their state when present (a later
    one wins; default: Megatron's own); the targets the release lacks are ABSENT."""
    merged = {t: tm.MEGATRON for t in ALL}
    for s in states:
        merged.update(s)
    return {t: (merged[t] if t in RELEASE["targets"] else tm.ABSENT) for t in ALL}


OURS = {t: tm.OURS for t in ALL}
SOFTMAX_REPLACED = {t: tm.REPLACED for t in SOFTMAX_TARGETS}


# ----------------------------------------------------------------------------------------------------------
# The tensor-parallel runs (tests/support/megatron_tp_worker.py, on the CPU over gloo or on the npu over HCCL)
def check_tp_ranks(results, steps, layers):
    """What every TP run must show on each rank: the model sharded over the ranks, the same losses on every rank,
    as many all-reduces in Megatron's own run as in the patched one, npu_ext's softmax and bias-GELU forward and
    backward once per layer and step in the patched run and never in Megatron's own, the fused softmax patched.
    Returns rank 0's (Megatron's own, patched) losses."""
    first = results[0]
    for rank, res in enumerate(results):
        assert (res["tp"], res["tp_rank"]) == (len(results), rank), "Megatron did not shard the model over the ranks"
        # the loss is all-reduced over the TP group (vocab-parallel cross entropy): the same bits on every rank
        assert res["base"] == first["base"] and res["ours"] == first["ours"], f"rank {rank} has other losses"
        assert len(res["base"]) == len(res["ours"]) == steps
        allreduces = res["base_ops"].get("c10d.allreduce_.default", 0)
        assert allreduces >= steps and res["ours_ops"].get("c10d.allreduce_.default") == allreduces, res
        assert not [o for o in res["base_ops"] if o.startswith("npu_ext.")], res["base_ops"]
        for op in ("scaled_masked_softmax", "scaled_masked_softmax_backward", "gelu", "gelu_backward_v2"):
            assert res["ours_ops"].get(f"npu_ext.{op}.default") == layers * steps, (op, res["ours_ops"])
        assert FORWARD_FUSED_SOFTMAX in res["patched"]
    return first["base"], first["ours"]
