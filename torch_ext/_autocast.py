"""Autocast policy of the npu_ext forward ops.

* ``prelu`` and ``grouped_bias_add`` take two floating tensors that must share a dtype (an activation and a
  parameter). Under autocast they run in the autocast dtype: both are cast to it, exactly as PyTorch does for
  ``torch.prelu`` on CPU (a "lower_precision_fp" op) and for the bias of ``F.linear``. So an fp32 ``PReLU``
  weight or ``GroupedBiasAdd`` bias works with a bf16 activation, and the result is bf16. grouped_bias_add's
  ``probs`` may have any floating dtype and is left as it is (like the fp32 router probabilities of MoE).
* ``gelu``, ``logit`` and ``scaled_masked_softmax`` have a single floating input: they run in the dtype of
  their input (no cast, like ``F.gelu`` / ``torch.logit`` / ``torch.softmax`` under CPU autocast). These ops
  compute 16-bit inputs in fp32 internally and round once.
* The backward ops are not autocast: backward runs in the dtypes of the forward (autograd records the casts).

The rule is registered for the autocast keys of CPU, CUDA, XPU, MPS and PrivateUse1 (the NPU), both as a
dispatcher kernel and as a Python-dispatcher kernel (used while torch.compile traces).

This module keeps the mechanism; each family's module (torch_ext/_family_<family>.py) declares the rule of its
forward op: ``lower_precision(op)`` or ``input_dtype(op)``.
"""

import torch

_lib = torch.library.Library("npu_ext", "FRAGMENT")  # keeps the registrations alive

_CAST_ELIGIBLE = (torch.float32, torch.float16, torch.bfloat16)  # fp64 is left alone, as in torch.autocast

_AUTOCAST_KEYS = {
    "AutocastCPU": lambda: "cpu",
    "AutocastCUDA": lambda: "cuda",
    "AutocastXPU": lambda: "xpu",
    "AutocastMPS": lambda: "mps",
    "AutocastPrivateUse1": torch._C._get_privateuse1_backend_name,  # "npu" once torch_npu is imported
}

# The rule of each forward op, as its family declares it: "lower_precision" (its two leading tensor inputs, the
# activation and the parameter, are cast to the autocast dtype) or "input_dtype" (nothing registered: autocast
# falls through, and the op runs in its input's dtype).
RULES = {}
_CAST_ARGS = 2


def _cast(arg, device_type, dtype):
    if (
        isinstance(arg, torch.Tensor)
        and arg.dtype in _CAST_ELIGIBLE
        and arg.dtype != dtype
        and arg.device.type == device_type
    ):
        return arg.to(dtype)
    return arg


def _register(opname):
    op = getattr(torch.ops.npu_ext, opname).default
    cast_names = {a.name for a in op._schema.arguments[:_CAST_ARGS]}
    for key_name, device_type_of in _AUTOCAST_KEYS.items():
        key = getattr(torch._C.DispatchKey, key_name)

        def autocast_impl(*args, _key=key, _device_type_of=device_type_of, **kwargs):
            device_type = _device_type_of()
            dtype = torch.get_autocast_dtype(device_type)
            args = [_cast(a, device_type, dtype) if i < _CAST_ARGS else a for i, a in enumerate(args)]
            kwargs = {k: _cast(v, device_type, dtype) if k in cast_names else v for k, v in kwargs.items()}
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_key)):
                return op(*args, **kwargs)

        op.py_kernels.pop(key, None)  # idempotent if this module is reloaded
        op.py_impl(key)(autocast_impl)

        def kernel(_keyset, *args, _impl=autocast_impl, **kwargs):
            return _impl(*args, **kwargs)

        _lib.impl(opname, kernel, key_name, with_keyset=True)


def lower_precision(opname):
    """Declares that the forward op ``opname`` runs in the autocast dtype: its two leading floating tensor inputs
    (activation, parameter) are cast to it; registers the autocast kernels that do it."""
    if RULES.get(opname) != "lower_precision":  # once, if a family module is imported again
        _register(opname)
        RULES[opname] = "lower_precision"


def input_dtype(opname):
    """Declares that the forward op ``opname`` runs in the dtype of its input under autocast: no cast, no kernel."""
    RULES[opname] = "input_dtype"
