"""Functional API: drop-in replacements whose gradients come from the npu_ext backward operators.

=====================================================  ======================================================
``torch_ext.gelu(input, approximate="none")``          ``torch.nn.functional.gelu``; grad: gelu_backward_v2
``torch_ext.prelu(input, weight)``                     ``torch.nn.functional.prelu``; grad: prelu_backward
``torch_ext.logit(input, eps=None)``                   ``torch.logit``; grad: logit_grad
``torch_ext.scaled_masked_softmax(x, mask, scale)``    ``softmax((x * scale).masked_fill(mask, -10000), -1)``;
                                                       grad: scaled_masked_softmax_backward
``torch_ext.grouped_bias_add(x, bias, group_idx)``     ``x + bias[group of each row]`` (``probs=``: weighted
                                                       per row); bias grad: grouped_bias_add_grad
=====================================================  ======================================================

All of them are differentiable twice (and more), run under torch.compile(fullgraph=True) and torch.export as
single operator nodes, and work on any device (fused kernels on CPU, an ATen composite elsewhere, the aclnn
kernels on an NPU once the NPU library registers them).
"""

import torch

from . import _C

__all__ = ["gelu", "prelu", "logit", "scaled_masked_softmax", "grouped_bias_add"]

_ops = torch.ops.npu_ext

# Eager fast path: torch_ext._C._<op> makes the same dispatcher call as torch.ops.npu_ext.<op>, unboxed (as
# PyTorch's own bindings do), ~2 us less per call. torch.ops is used while Dynamo traces (torch.compile, strict
# torch.export: it cannot trace into _C, and folds is_dynamo_compiling() to True) and whenever an argument or
# mode has __torch_function__ (handled by torch.ops; non-strict export's tracing modes are torch function
# modes). The checks are written out in each function: a helper would be one more Python frame per call.
_dynamo_compiling = torch.compiler.is_dynamo_compiling
_tf_unary = torch._C._has_torch_function_unary
_tf_variadic = torch._C._has_torch_function_variadic


def gelu(input: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """GELU: ``x * Phi(x)`` (``approximate="none"``, the erf form) or ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3)))`` (``"tanh"``), like ``torch.nn.functional.gelu``.

    input: fp16, bf16, fp32 (fp64 off the NPU), any shape; 16-bit inputs are computed in fp32 and rounded once.
    Devices: CPU (vectorized kernel); NPU and any other device: ATen ops (csrc/ops/<family>/composite.cpp).
    Backward: ``npu_ext.gelu_backward_v2(grad, input, approximate)`` (aclnnGeluBackwardV2 on an NPU).
    """
    if not _dynamo_compiling() and not _tf_unary(input) and type(approximate) is str:
        return _C._gelu(input, approximate)
    return _ops.gelu(input, approximate)


def prelu(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """PReLU: ``x > 0 ? x : w_c * x``, like ``torch.nn.functional.prelu``.

    weight: 1 element, or C = input.size(1) elements (1 for a 1-D input), same dtype as input; rank <= 8.
    16-bit inputs are computed in fp32 and rounded once. Devices: CPU (kernel); NPU and any other: ATen ops.
    Backward: ``npu_ext.prelu_backward(grad, input, weight)`` -> (grad_input, grad_weight)
    (aclnnPreluBackward on an NPU).
    """
    if not _dynamo_compiling() and not _tf_variadic(input, weight):
        return _C._prelu(input, weight)
    return _ops.prelu(input, weight)


def logit(input: torch.Tensor, eps=None) -> torch.Tensor:
    """``log(z / (1 - z))``, z = input clamped to [eps, 1 - eps] when eps is given, like ``torch.logit``.

    input: fp16, bf16, fp32 (fp64 off the NPU), rank <= 8. Devices: CPU (kernel); NPU and any other: ATen ops.
    Backward: ``npu_ext.logit_grad(input, grad, eps)`` with eps = -1.0 for None (aclnnLogitGrad on an NPU):
    0 outside [eps, 1 - eps] for eps >= 0, NaN outside [0, 1] otherwise.
    """
    if not _dynamo_compiling() and not _tf_unary(input) and (eps is None or type(eps) in (float, int)):
        return _C._logit(input, eps)
    return _ops.logit(input, eps)


def _as_4d_mask(mask, x, x4_shape):
    """A bool mask that broadcasts to x, as the operator wants it: 4-D, last two dims (S1, S2), first two
    equal to x4's or 1 (broadcast dims stay zero-stride views: no copy in the usual cases)."""
    md = mask.dim()
    if x.dim() <= 4:
        m = mask.reshape((1,) * (4 - md) + tuple(mask.shape))
    else:
        trail = (1,) * max(0, 3 - md) + tuple(mask.shape[-3:])  # mask's last 3 dims, padded
        lead = tuple(mask.shape[:-3]) if md > 3 else ()
        if all(d == 1 for d in lead):
            m = mask.reshape((1,) + trail)
        else:  # the mask varies over the flattened leading dims: materialize it at that size
            m = mask.expand(tuple(x.shape[:-3]) + trail).reshape((-1,) + trail)
    return m.expand(m.shape[0], m.shape[1], x4_shape[2], x4_shape[3])


_NO_MASK = {}  # the False mask of an unmasked call: per device a 0-D tensor (expanded), per NPU device and shape 4-D
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._len_torch_function_stack


def _no_mask(x, s1, s2):
    """A False mask on x's device that broadcasts to (1, 1, s1, s2). Plain eager calls share one per device (made
    outside inference mode, so that autograd can save it); under Dynamo, a tensor subclass or any mode (fake
    tensors, tracing), a new one. On an NPU it is materialized at (1, 1, s1, s2) and kept per shape, since
    aclnnScaledMaskedSoftmax copies a mask with zero strides in its last two dims before every call; elsewhere a
    0-D tensor, expanded."""
    npu = x.device.type == "npu"
    if type(x) is torch.Tensor and not _dynamo_compiling() and not _dispatch_modes() and not _function_modes():
        key = (x.device, s1, s2) if npu else x.device
        m = _NO_MASK.get(key)
        if m is None:
            with torch.inference_mode(False):
                m = _NO_MASK[key] = torch.zeros((1, 1, s1, s2) if npu else (), dtype=torch.bool, device=x.device)
        return m.expand(1, 1, s1, s2)
    return torch.zeros((), dtype=torch.bool, device=x.device).expand(1, 1, s1, s2)


def scaled_masked_softmax(x: torch.Tensor, mask=None, scale: float = 1.0, fix_triu_mask: bool = False,
                          fully_masked: str = "uniform") -> torch.Tensor:
    """``softmax((x * scale).masked_fill(mask, -10000), dim=-1)``, the Megatron/aclnn fused softmax.

    x: floating tensor of any rank >= 1, softmax over the last dim (at most 4096 long). The operator is 4-D
    (B, N, S1, S2): other ranks are reshaped to 4-D and back (1-D/2-D/3-D get leading 1s; >4-D flatten every
    dim before the last three into B, a copy only if the layout needs it).

    mask: a ``torch.bool`` tensor that broadcasts to x (True = masked out): e.g. a (S1, S2) causal mask, a
    (B, 1, 1, S2) padding mask or a full (B, N, S1, S2) mask; None means no masking (no mask tensor is
    allocated). It is adapted to the operator's 4-D form with zero-stride views. Masked positions get the value
    -10000 before the softmax and exactly zero gradient.

    fully_masked: what a row whose every position is masked gives: ``"uniform"`` (1 / S2 everywhere, the
    softmax of a constant row: Megatron's torch path, aclnnScaledMaskedSoftmax) or ``"zero"`` (all zeros:
    Megatron's fused CUDA kernel, and PyTorch's scaled_dot_product_attention since 2.5). Its gradient is zero
    either way.

    fix_triu_mask=True: the mask is the causal mask (True where column > row) and ``mask`` is ignored.

    Devices: CPU (fused kernel); NPU and any other: ATen ops. x: fp16, bf16, fp32 (fp64 off the NPU),
    computed in fp32 and rounded once; the result has x's shape and dtype.
    Backward: ``npu_ext.scaled_masked_softmax_backward`` (aclnnScaledMaskedSoftmaxBackward on an NPU).
    """
    if x.dim() == 0:
        raise ValueError("torch_ext.scaled_masked_softmax: x must have at least 1 dimension, but got a 0-D tensor")
    shape = tuple(x.shape)
    if x.dim() == 4:
        x4 = x
    elif x.dim() < 4:
        x4 = x.reshape((1,) * (4 - x.dim()) + shape)
    else:
        x4 = x.reshape((-1,) + shape[-3:])
    if fix_triu_mask or mask is None:
        m4 = _no_mask(x, x4.shape[2], x4.shape[3])
    else:
        if mask.dtype != torch.bool:
            raise TypeError(
                "torch_ext.scaled_masked_softmax: mask must be a torch.bool tensor (True = masked out), "
                f"but got {mask.dtype}"
            )
        if mask.dim() > x.dim() or any(m != 1 and m != s for m, s in zip(mask.shape[::-1], shape[::-1])):
            raise ValueError(
                f"torch_ext.scaled_masked_softmax: mask of shape {list(mask.shape)} does not broadcast to x of "
                f"shape {list(shape)}"
            )
        m4 = _as_4d_mask(mask, x, x4.shape)
    if (not _dynamo_compiling() and not _tf_variadic(x4, m4) and type(scale) in (float, int)
            and type(fix_triu_mask) is bool and type(fully_masked) is str):
        y = _C._scaled_masked_softmax(x4, m4, scale, fix_triu_mask, fully_masked)
    else:
        y = _ops.scaled_masked_softmax(x4, m4, scale, fix_triu_mask, fully_masked)
    return y if x.dim() == 4 else y.reshape(shape)


def grouped_bias_add(x: torch.Tensor, bias: torch.Tensor, group_idx=None, group_idx_type: int = 0,
                     probs=None) -> torch.Tensor:
    """Adds bias[j] to the rows of group j (weighted by ``probs`` when given): the MoE expert bias.

    With ``group_idx`` (int32/int64, 1-D, G <= 2048 entries): x is (N, H) with its rows sorted by group,
    bias is (G, H); group_idx holds cumulative end offsets (group_idx_type=0; the last equals N) or
    per-group row counts (group_idx_type=1, e.g. Megatron's tokens_per_expert; they sum to N). Without it:
    x is (G, C, H) and bias (G, H) or (G, 1, H). bias has x's dtype.

    probs: optional, one weight per row of x, shape x.shape[:-1] or x.shape[:-1] + (1,) (e.g. the router
    probabilities of the tokens), any floating dtype: ``out = x + probs * bias[group]``, computed in fp32 for
    16-bit x (the product rounded, then the sum) and rounded once to x's dtype.

    Devices: CPU (fused kernel); NPU and any other: ATen ops. group_idx lives on x's device, and its values
    are checked on the host (a small device-to-host copy off the CPU).
    Gradients: x gets the incoming gradient; bias gets ``npu_ext.grouped_bias_add_grad`` of it (of
    ``grad * probs``, in fp32 for 16-bit x, with probs; aclnnGroupedBiasAddGrad(V2) on an NPU); probs gets the
    row-wise dot product of the gradient with its group's bias.
    """
    if (not _dynamo_compiling() and not _tf_variadic(x, bias, group_idx, probs)
            and type(group_idx_type) is int):
        return _C._grouped_bias_add(x, bias, group_idx, group_idx_type, probs)
    return _ops.grouped_bias_add(x, bias, group_idx, group_idx_type, probs)
