"""A test double of MindSpeed's Megatron adaptor, as its maintained branches (26.1.0_core_r0.12.1 and the other
``*_core_r0.12.1`` branches of Ascend/MindSpeed) set it up for the targets of torch_ext.megatron. Written for
these tests from what MindSpeed's feature registrations replace, by name; no MindSpeed code (MindSpeed needs
torch_npu and an NPU, and is not on the package index).

What MindSpeed replaces there, and so what ``apply()`` replaces:

* ``fused-softmax`` (mindspeed/features_manager/fusions/fused_softmax.py): in
  ``megatron.core.fusions.fused_softmax`` the classes ``ScaledUpperTriangMaskedSoftmax``, ``ScaledMaskedSoftmax``,
  ``ScaledSoftmax``, and ``FusedScaleMaskSoftmax.is_kernel_available`` / ``.forward_fused_softmax`` (MindSpeed's
  call ``torch_npu.npu_scaled_masked_softmax``; the double computes Megatron's torch-path formula instead and
  counts its calls in ``CALLS``);
* ``moe-grouped-gemm`` (mindspeed/features_manager/moe/gmm.py): ``megatron.core.transformer.moe.experts.
  GroupedMLP`` by a subclass running gmm (here: a subclass, no forward of its own). Releases from 0.17 have no
  GroupedMLP; there the double has nothing to replace.

What it leaves alone: ``bias_gelu_impl`` (MindSpeed's modules import Megatron's by name; so does this module,
``bias_gelu_impl`` below) and ``TEGroupedMLP._apply_bias``.

How it replaces (MindSpeed's patch manager, mindspeed/patch_utils.py, as documented there): the attribute is set
on its owner (module or class), then every loaded module that has an attribute of the same name holding the
object that was there gets the new one. ``remove()`` puts back what ``apply()`` found.
"""

import collections
import importlib
import sys

import torch

# What MindSpeed's modules do: import Megatron's bias_gelu_impl by name (torch_ext.megatron.patch() rebinds it).
from megatron.core.fusions.fused_bias_gelu import bias_gelu_impl  # noqa: F401

CALLS = collections.Counter()  # the double's softmax entry points, by name
_saved = []  # (target name, owner, attribute, previous object, new object, modules rebound)


def _set(target, owner, name, new):
    """MindSpeed's way: the owner's attribute, then every module attribute of that name holding the old object."""
    old = getattr(owner, name)
    setattr(owner, name, new)
    rebound = []
    for mod in list(sys.modules.values()):
        if mod is sys.modules[__name__] or not isinstance(getattr(mod, "__dict__", None), dict):
            continue
        if vars(mod).get(name, None) is old and mod is not owner:
            setattr(mod, name, new)
            rebound.append(mod)
    _saved.append((target, owner, name, old, new, rebound))


def _torch_softmax(x, mask, scale, causal):
    """Megatron's torch path (scale in fp32, -10000 fill, softmax, cast back), standing for
    torch_npu.npu_scaled_masked_softmax."""
    y = x.float() * scale
    if causal:
        sq, sk = x.shape[-2:]
        y = y.masked_fill(torch.ones(sq, sk, dtype=torch.bool, device=x.device).triu(1), -10000.0)
    elif mask is not None:
        y = y.masked_fill(mask, -10000.0)
    return torch.softmax(y, -1).to(x.dtype)


def is_kernel_available(self, mask, b, np, sq, sk):
    """The double's FusedScaleMaskSoftmax.is_kernel_available: MindSpeed's documented gate (fusion on, fp16/bf16,
    32 < sk <= 4096, sq and sk multiples of 16)."""
    CALLS["is_kernel_available"] += 1
    return bool(self.scaled_masked_softmax_fusion and self.input_in_float16 and 32 < sk <= 4096
                and sq % 16 == 0 and sk % 16 == 0)


def forward_fused_softmax(self, input, mask):
    """The double's FusedScaleMaskSoftmax.forward_fused_softmax (MindSpeed's calls npu_scaled_masked_softmax)."""
    from megatron.core.transformer.enums import AttnMaskType

    CALLS["forward_fused_softmax"] += 1
    scale = self.scale if self.scale is not None else 1.0
    return _torch_softmax(input, mask, scale, self.attn_mask_type == AttnMaskType.causal)


class ScaledUpperTriangMaskedSoftmax:
    """The double's replacement of Megatron's class of that name (an object with ``apply``)."""

    @staticmethod
    def apply(input, scale):
        CALLS["ScaledUpperTriangMaskedSoftmax"] += 1
        return _torch_softmax(input, None, scale, True)


class ScaledMaskedSoftmax:
    """The double's replacement of Megatron's class of that name."""

    @staticmethod
    def apply(input, mask, scale):
        CALLS["ScaledMaskedSoftmax"] += 1
        return _torch_softmax(input, mask, scale, False)


class ScaledSoftmax:
    """The double's replacement of Megatron's class of that name."""

    @staticmethod
    def apply(input, scale):
        CALLS["ScaledSoftmax"] += 1
        return _torch_softmax(input, None, scale, False)


def apply():
    """Makes the double's replacements (idempotent); returns their names."""
    if _saved:
        return replaced()
    softmax = "megatron.core.fusions.fused_softmax"
    fused_softmax = importlib.import_module(softmax)
    experts = importlib.import_module("megatron.core.transformer.moe.experts")
    for cls in (ScaledUpperTriangMaskedSoftmax, ScaledMaskedSoftmax, ScaledSoftmax):
        _set(f"{softmax}.{cls.__name__}", fused_softmax, cls.__name__, cls)
    for fn in (is_kernel_available, forward_fused_softmax):
        _set(f"{softmax}.FusedScaleMaskSoftmax.{fn.__name__}", fused_softmax.FusedScaleMaskSoftmax, fn.__name__, fn)
    if hasattr(experts, "GroupedMLP"):  # megatron-core < 0.17
        gmm = type("GmmExperts", (experts.GroupedMLP,), {"__doc__": "The double's gmm experts.",
                                                          "__module__": __name__})
        _set("megatron.core.transformer.moe.experts.GroupedMLP", experts, "GroupedMLP", gmm)
    return replaced()


def replaced():
    """The targets ("module.attribute.path") the double has replaced, in order."""
    return [entry[0] for entry in _saved]


def remove():
    """Puts back what apply() found, where the double's object is still there."""
    while _saved:
        _, owner, name, old, new, rebound = _saved.pop()
        if vars(owner).get(name) is new:
            setattr(owner, name, old)
        for mod in rebound:
            if vars(mod).get(name) is new:
                setattr(mod, name, old)
