"""A test double of MindSpeed's Megatron adaptor, as its maintained branches (those that pair it with Megatron core
0.12; the release table's mindspeed names the one tested for real) set it up for the targets of torch_ext.megatron. Written for
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

How it replaces (MindSpeed's patch manager, mindspeed/patch_utils.py, as the real MindSpeed of make test-mindspeed
behaves): ``apply()`` sets the attribute on its owner (module or class), then every loaded module that has an
attribute of the target's name holding the object that was there gets the new one (this module's own included, as
the real manager's scan spares no module). The object found at the first ``apply()`` is the original for good.
``remove()`` puts that original back wherever the double's object still is; ``repatch()`` is MindSpeed's
``repatch()``: ``remove()``, then ``apply()`` again over whatever is there by then (ours, after patch()).
"""

import collections
import importlib
import sys

import torch

# What MindSpeed's modules do: import Megatron's bias_gelu_impl by name (torch_ext.megatron.patch() rebinds it).
from megatron.core.fusions.fused_bias_gelu import bias_gelu_impl  # noqa: F401

CALLS = collections.Counter()  # the double's softmax entry points, by name
_originals = {}  # target name -> (owner, attribute, the object the first apply() found), kept across repatch()
_applied = []  # target names whose double's object apply() put in place, in order


def _set(target, owner, name, new):
    """MindSpeed's way: the owner's attribute, then every module attribute of that name holding the old object."""
    old = getattr(owner, name)
    _originals.setdefault(target, (owner, name, old))
    setattr(owner, name, new)
    for mod in list(sys.modules.values()):
        if isinstance(getattr(mod, "__dict__", None), dict) and vars(mod).get(name, None) is old:
            setattr(mod, name, new)
    _applied.append(target)


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


def _objects():
    """(target name, owner, attribute, the double's object) for each replacement this megatron-core has."""
    softmax = "megatron.core.fusions.fused_softmax"
    fused_softmax = importlib.import_module(softmax)
    experts = importlib.import_module("megatron.core.transformer.moe.experts")
    out = [(f"{softmax}.{cls.__name__}", fused_softmax, cls.__name__, cls)
           for cls in (ScaledUpperTriangMaskedSoftmax, ScaledMaskedSoftmax, ScaledSoftmax)]
    out += [(f"{softmax}.FusedScaleMaskSoftmax.{fn.__name__}", fused_softmax.FusedScaleMaskSoftmax, fn.__name__, fn)
            for fn in (is_kernel_available, forward_fused_softmax)]
    if hasattr(experts, "GroupedMLP"):  # megatron-core < 0.17: a subclass of the original, made once
        global _GMM
        if _GMM is None:
            _GMM = type("GmmExperts", (experts.GroupedMLP,), {"__doc__": "The double's gmm experts.",
                                                              "__module__": __name__})
        out.append(("megatron.core.transformer.moe.experts.GroupedMLP", experts, "GroupedMLP", _GMM))
    return out


_GMM = None


def apply():
    """Makes the double's replacements (idempotent); returns their names."""
    if not _applied:
        for target, owner, name, new in _objects():
            _set(target, owner, name, new)
    return replaced()


def replaced():
    """The targets ("module.attribute.path") the double has replaced, in order."""
    return list(_applied)


def remove():
    """MindSpeed's remove_patches(): the original of the first apply() back wherever the double's object is (the
    owner and every module attribute of that name, but in modules whose name has "mindspeed", which hold
    MindSpeed's own functions: this one's)."""
    for target, owner, name, new in reversed(_objects()):
        if target not in _applied:
            continue
        _, _, old = _originals[target]
        for holder in [owner] + [m for key, m in list(sys.modules.items()) if "mindspeed" not in key
                                 and isinstance(getattr(m, "__dict__", None), dict)]:
            if vars(holder).get(name, None) is new:
                setattr(holder, name, old)
    _applied.clear()


def repatch():
    """MindSpeed's repatch(): remove(), then apply() over whatever is there now."""
    remove()
    return apply()


def reset():
    """Forgets the originals (the tests' cleanup, after remove() and the objects put back)."""
    global _GMM
    remove()
    _originals.clear()
    _GMM = None
