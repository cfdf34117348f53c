"""Megatron-LM (megatron-core) and Huawei MindSpeed training through the npu_ext operators: ``patch()``.

::

    import torch_ext.megatron
    torch_ext.megatron.patch()      # after MindSpeed's adaptor, if you use MindSpeed; before building the model

``patch()`` replaces, in the megatron-core releases tested (``TESTED_RELEASES``, from the release table
``torch_ext/releases.json``; docs/megatron.md#releases lists them and what each lacks; nothing is imported before
the call):

* ``FusedScaleMaskSoftmax.is_kernel_available`` and ``.forward_fused_softmax`` (``megatron.core.fusions.
  fused_softmax``): the fused path runs ``torch_ext.scaled_masked_softmax`` on ANY device (CPU, NPU, ...)
  instead of the CUDA-only ``scaled_masked_softmax_cuda`` extensions, for fp16/bf16 inputs whenever the op
  supports the shape: the key length at most 4096, none of the CUDA kernel's divisibility rules. Causal masks
  are generated (``fix_triu_mask``, no mask tensor), padding masks broadcast as they are, a missing mask costs
  no mask tensor. ``scale`` is applied in fp32 and the result has the input's dtype, whatever
  ``softmax_in_fp32`` says (the op computes in fp32 and rounds once, as the CUDA kernel does). A fully masked
  row gives 0 with zero gradient (``fully_masked="zero"``), as Megatron's fused kernel does; Megatron's torch
  path gives a uniform row there. Everything else stays on Megatron's own torch path: fusion off, fp32 inputs,
  ``window_size``, ``softmax_offset``, key length above 4096, causal with query length != key length.
  The backward is ``npu_ext.scaled_masked_softmax_backward`` (aclnnScaledMaskedSoftmaxBackward on an NPU).
* ``bias_gelu_impl`` (``megatron.core.fusions.fused_bias_gelu``, and every module that imported it by name:
  ``megatron.core.transformer.mlp``, ``...moe.shared_experts``, MindSpeed's modules): tanh GELU of
  ``input + bias`` through ``torch_ext.gelu``, whose backward is ``npu_ext.gelu_backward_v2(..., "tanh")``
  (aclnnGeluBackwardV2).
* ``TEGroupedMLP._apply_bias`` (``megatron.core.transformer.moe.experts``), the per-expert fc2 bias weighted
  by the router probabilities: one ``torch_ext.grouped_bias_add(x, bias, tokens_per_expert, 1, probs=probs)``
  instead of a Python loop over the experts; the bias gradient is ``npu_ext.grouped_bias_add_grad``
  (aclnnGroupedBiasAddGrad(V2), which torch_npu does not expose), with gradients for the hidden states, every
  expert's bias and the probabilities. The same op is ``torch_ext.grouped_bias_add`` /
  ``torch_ext.nn.GroupedBiasAdd`` for expert MLPs of your own. megatron-core 0.12 to 0.14 have no
  ``TEGroupedMLP._apply_bias`` (their TEGroupedMLP takes no expert bias): the target is absent there.

MindSpeed: ``import mindspeed.megatron_adaptor`` applies MindSpeed's patches when it is imported; call
``patch()`` after it, before the model is built, on every rank. Ours then replace MindSpeed's fused-softmax
methods (which call ``torch_npu.npu_scaled_masked_softmax``) and keep every other MindSpeed patch; ``unpatch()``
gives MindSpeed's back. Called before MindSpeed's, our fused softmax is replaced by MindSpeed's (``status()`` says
so). MindSpeed's ``repatch()`` (RL frameworks call it) re-applies all its patches over ours: call ``patch()``
again after it; ``unpatch()`` then gives back MindSpeed's, the objects our latest replacement found.

``status()`` says, per target, which object is there now: ``OURS`` ("ours in place"), ``MEGATRON`` ("Megatron's
own": defined in megatron's own source files), ``REPLACED`` ("replaced by another patch", e.g. MindSpeed's) or
``ABSENT`` ("absent in this release"). ``patched()`` lists the targets whose replacement is ours.

``unpatch()`` puts back the objects that were there before our latest replacement of each target, wherever ours
are still in place (a replacement made by someone else since is left alone). Both are idempotent. The
replacements are this module's private functions (``_softmax_forward`` & co.), named unlike the targets, so that
MindSpeed's patch manager, which rebinds module attributes by the target's name, never rebinds this module.
"""

import importlib
import importlib.metadata
import inspect
import os
import sys
import threading

import torch

from . import _releases
from . import functional as F

__all__ = ["patch", "unpatch", "patched", "status", "TARGETS", "OURS", "MEGATRON", "REPLACED", "ABSENT"]

# The softmax limits of the op (csrc/ops/scaled_masked_softmax/checks.h, kMaxSoftmaxLastDim).
_MAX_KEY_LENGTH = 4096
_FLOAT16 = {torch.float16: "input_in_fp16", torch.bfloat16: "input_in_bf16"}
# The megatron-core releases the tests run on ('oldest to newest' of the release table; docs/megatron.md#releases);
# named in the import error.
TESTED_RELEASES = _releases.megatron_core_range(_releases.load())

# status() values
OURS = "ours in place"
MEGATRON = "Megatron's own"
REPLACED = "replaced by another patch"
ABSENT = "absent in this release"


# ----------------------------------------------------------------------------------------------------------
# The replacements. They read Megatron's objects lazily, so that this module imports without megatron.
def _attn_mask_type():
    from megatron.core.transformer.enums import AttnMaskType

    return AttnMaskType


def _softmax_gate(self, mask, b, np, sq, sk):
    """FusedScaleMaskSoftmax.is_kernel_available after torch_ext.megatron.patch(): whether the fused path
    (torch_ext.scaled_masked_softmax) takes the call. Shapes only; forward_fused_softmax checks the input."""
    if not (self.scaled_masked_softmax_fusion and self.input_in_float16):
        return False
    if getattr(self, "window_size", None) is not None or not 0 < sk <= _MAX_KEY_LENGTH:
        return False
    return sq == sk or self.attn_mask_type != _attn_mask_type().causal


def _softmax_forward(self, input, mask):
    """FusedScaleMaskSoftmax.forward_fused_softmax after torch_ext.megatron.patch(): scale, mask and softmax
    in one npu_ext op, fully masked rows 0. An input whose dtype is not the fp16/bf16 the module was built
    for, or a non-bool mask, goes to Megatron's torch path."""
    flag = _FLOAT16.get(input.dtype)
    if flag is None or not getattr(self, flag) or (mask is not None and mask.dtype != torch.bool):
        return self.forward_torch_softmax(input, mask)
    scale = self.scale if self.scale is not None else 1.0
    if self.attn_mask_type == _attn_mask_type().causal:  # the mask argument is ignored, as by the CUDA kernel
        return F.scaled_masked_softmax(input, None, scale, fix_triu_mask=True, fully_masked="zero")
    return F.scaled_masked_softmax(input, mask, scale, fully_masked="zero")


def _bias_gelu(input, bias):
    """Megatron's bias_gelu_impl after torch_ext.megatron.patch(): tanh GELU of ``input + bias`` (bias may be
    None) through torch_ext.gelu; backward npu_ext.gelu_backward_v2(approximate="tanh")."""
    return F.gelu(input if bias is None else input + bias, approximate="tanh")


def _expert_bias(intermediate_parallel, bias_parallel, tokens_per_expert, permuted_probs):
    """TEGroupedMLP._apply_bias after torch_ext.megatron.patch(): ``out[rows of expert e] = x + probs * bias[e]``
    as one torch_ext.grouped_bias_add (counts = tokens_per_expert, group_idx_type=1). Computed in the promoted
    dtype of the hidden states and the bias, then cast to the hidden states' dtype, as Megatron's loop does."""
    if bias_parallel is None:
        return intermediate_parallel
    shape = intermediate_parallel.shape
    x = intermediate_parallel.reshape(-1, shape[-1])
    bias = bias_parallel if isinstance(bias_parallel, torch.Tensor) else torch.stack(tuple(bias_parallel))
    bias = bias.reshape(-1, shape[-1])
    dtype = torch.promote_types(x.dtype, bias.dtype)
    if isinstance(tokens_per_expert, torch.Tensor):
        counts = tokens_per_expert.to(device=x.device, dtype=torch.int64)
    else:
        counts = torch.tensor(tokens_per_expert, dtype=torch.int64, device=x.device)
    probs = None if permuted_probs is None else permuted_probs.reshape(-1)
    out = F.grouped_bias_add(x.to(dtype), bias.to(dtype), counts, 1, probs=probs)
    return out.to(intermediate_parallel.dtype).view(shape)


# ----------------------------------------------------------------------------------------------------------
# (module, attribute path, replacement, scan): `scan` targets are module-level functions that other modules
# import by name; every module attribute holding the replaced object gets the replacement too. The replacements
# live here under names of their own, never the targets' names: MindSpeed's patch manager rebinds every module
# attribute named like its target that holds the object it replaces (ours, after patch()), and this module's own
# attributes must stay what they are.
TARGETS = (
    ("megatron.core.fusions.fused_softmax", "FusedScaleMaskSoftmax.is_kernel_available", _softmax_gate, False),
    ("megatron.core.fusions.fused_softmax", "FusedScaleMaskSoftmax.forward_fused_softmax", _softmax_forward, False),
    ("megatron.core.fusions.fused_bias_gelu", "bias_gelu_impl", _bias_gelu, True),
    ("megatron.core.transformer.moe.experts", "TEGroupedMLP._apply_bias", staticmethod(_expert_bias), False),
)

_lock = threading.Lock()
# (id(owner), attribute name) -> (owner, name, what was there before our latest replacement, ours), in the order
# first made: a target re-patched after another patch replaced ours keeps its place and takes the new original.
_applied = {}
_MISSING = object()


def _installed_version():
    """megatron-core's version from its package metadata, or None (not installed, or a source checkout)."""
    try:
        return importlib.metadata.version("megatron-core")
    except importlib.metadata.PackageNotFoundError:
        return None


def _import_error(e):
    """The ImportError that patch() and status() raise when megatron.core does not import: not installed, or
    installed and failing (then its version and the import error's text)."""
    version = _installed_version()
    if version is None and isinstance(e, ModuleNotFoundError) and e.name in ("megatron", "megatron.core"):
        return ImportError("torch_ext.megatron needs megatron-core, which is not installed "
                           f"(pip install megatron-core; tested with {TESTED_RELEASES})")
    what = (f"megatron-core {version} is installed" if version is not None else
            "megatron.core is there without package metadata (a source checkout?)")
    return ImportError(f"torch_ext.megatron: {what}, but importing it fails with {type(e).__name__}: {e} "
                       f"(torch_ext.megatron is tested with megatron-core {TESTED_RELEASES})")


def _import(module_name):
    """The module, or None when this megatron-core release has no such module (nor package). Any other import
    failure raises _import_error's message."""
    try:
        importlib.import_module("megatron.core")
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("megatron.core.") and (module_name + ".").startswith(e.name + "."):
            return None
        raise _import_error(e) from e
    except ImportError as e:
        raise _import_error(e) from e


def _raw(owner, name):
    """The attribute as stored (a staticmethod object, not the function it wraps)."""
    return vars(owner).get(name, _MISSING)


def _locate(module_name, path):
    """(owner, attribute name) of a target, or None when this release lacks it (module, class or attribute)."""
    owner = _import(module_name)
    if owner is None:
        return None
    *parents, name = path.split(".")
    for p in parents:
        owner = getattr(owner, p, None)
        if owner is None:
            return None
    return (owner, name) if _raw(owner, name) is not _MISSING else None


def _source_file(obj):
    """The file that defines obj: a function's code, a class's module; a bound method of a class (Megatron's
    bias_gelu_impl is ``GeLUFunction.apply``) counts as its class's. None when there is none."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if inspect.ismethod(obj):
        obj = obj.__self__ if isinstance(obj.__self__, type) else obj.__func__
    try:
        return inspect.getfile(obj) if isinstance(obj, type) else obj.__code__.co_filename
    except (AttributeError, TypeError):
        return None


def _is_megatrons(obj):
    """Whether obj is defined in megatron's own source files. A replacement made elsewhere, a wrapper with
    functools.wraps too, has its code elsewhere."""
    f = _source_file(obj)
    if f is None:
        return False
    f = os.path.realpath(f)
    megatron = sys.modules.get("megatron")
    return any(f.startswith(os.path.join(os.path.realpath(p), "")) for p in getattr(megatron, "__path__", ()))


def _modules():
    return [m for m in list(sys.modules.values()) if isinstance(getattr(m, "__dict__", None), dict)]


def _rebind(old, new):
    """Every module attribute that is `old` becomes `new`, this module's own excepted; returns the (module, name)
    pairs changed."""
    changed = []
    this = sys.modules[__name__]
    for mod in _modules():
        if mod is this:
            continue
        for key, value in list(vars(mod).items()):
            if value is old:
                setattr(mod, key, new)
                changed.append((mod, key))
    return changed


def _save(owner, name, original, replacement):
    _applied[(id(owner), name)] = (owner, name, original, replacement)


def patch():
    """Routes megatron-core's fused softmax, bias-GELU and MoE expert bias through the npu_ext ops (see the
    module docstring). Imports the megatron modules it patches: megatron-core must be installed, and if it is
    but fails to import, the ImportError names its version and the error. Puts ours in place on every target this
    release has where ours is not in place now, whoever's object is there (Megatron's, MindSpeed's after its
    ``repatch()``, anyone's), and remembers that object for unpatch(); a target where ours is in place is left
    as it is, so a second call changes nothing. Returns the targets where ours is in place, e.g.
    ``["megatron.core.fusions.fused_softmax.FusedScaleMaskSoftmax.is_kernel_available", ...]``; a target this
    megatron-core release lacks is skipped (``status()`` says "absent in this release")."""
    with _lock:
        for module_name, path, replacement, scan in TARGETS:
            found = _locate(module_name, path)
            if found is None:
                continue
            owner, name = found
            current = _raw(owner, name)
            if current is replacement:
                continue
            setattr(owner, name, replacement)
            _save(owner, name, current, replacement)
            if scan:
                for mod, key in _rebind(current, replacement):
                    _save(mod, key, current, replacement)
        return patched()


def unpatch():
    """Puts back, wherever ours is still in place, the object that was there before our latest replacement (after
    MindSpeed's ``repatch()`` and a second patch(): MindSpeed's, not Megatron's); functions that modules imported
    by name after patch() are put back too. A replacement someone else made over ours is left alone. Idempotent."""
    with _lock:
        entries = list(_applied.values())
        for owner, name, original, replacement in reversed(entries):
            if _raw(owner, name) is replacement:
                setattr(owner, name, original)
        for _, _, replacement, scan in TARGETS:
            if scan:  # modules imported after patch() took ours by name: the target's own original
                original = next((o for _, _, o, r in entries if r is replacement), None)
                if original is not None:
                    _rebind(replacement, original)
        _applied.clear()


def patched():
    """The targets whose replacement (ours) is in place now, as "module.attribute.path" strings. Imports
    nothing: a target whose module is not imported is not listed."""
    out = []
    for module_name, path, replacement, _ in TARGETS:
        owner = sys.modules.get(module_name)
        *parents, name = path.split(".")
        for p in parents:
            owner = getattr(owner, p, None)
        if owner is not None and _raw(owner, name) is replacement:
            out.append(f"{module_name}.{path}")
    return out


def status():
    """What is in place now for each target: ``{"module.attribute.path": state}`` in TARGETS' order, the state
    one of OURS ("ours in place"), MEGATRON ("Megatron's own": an object defined in megatron's source files),
    REPLACED ("replaced by another patch": e.g. MindSpeed's, or a wrapper around Megatron's or ours) and ABSENT
    ("absent in this release": this megatron-core has no such module, class or attribute). Imports the target
    modules, as patch() does (with the same ImportError when megatron-core is missing or fails to import)."""
    out = {}
    for module_name, path, replacement, _ in TARGETS:
        found = _locate(module_name, path)
        if found is None:
            state = ABSENT
        else:
            obj = _raw(*found)
            state = OURS if obj is replacement else MEGATRON if _is_megatrons(obj) else REPLACED
        out[f"{module_name}.{path}"] = state
    return out
