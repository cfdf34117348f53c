"""scaled_masked_softmax: ``torch_ext.scaled_masked_softmax`` and ``torch_ext.nn.ScaledMaskedSoftmax``, whose
gradient is ``npu_ext.scaled_masked_softmax_backward``; the autocast rule of ``npu_ext.scaled_masked_softmax``, its
torchair decomposition and its ``--check`` cases. Its C++: csrc/ops/scaled_masked_softmax/."""

import math

import torch

from . import _C, _autocast, _check, _decompositions, nn
from . import functional as F
from ._check import Case, uniform
from .functional import _dynamo_compiling, _ops, _tf_variadic


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


@F._export
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


@nn._export
class ScaledMaskedSoftmax(torch.nn.Module):
    """``softmax((x * scale).masked_fill(mask, -10000), -1)``; see ``torch_ext.scaled_masked_softmax``
    (``fully_masked``: "uniform" or "zero" for a row whose every position is masked)."""

    def __init__(self, scale: float = 1.0, fix_triu_mask: bool = False, fully_masked: str = "uniform") -> None:
        super().__init__()
        if fully_masked not in ("uniform", "zero"):
            raise ValueError(f'fully_masked must be "uniform" or "zero", but got {fully_masked!r}')
        self.scale = scale
        self.fix_triu_mask = fix_triu_mask
        self.fully_masked = fully_masked

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        """``torch_ext.scaled_masked_softmax(x, mask, self.scale, self.fix_triu_mask, self.fully_masked)``."""
        return F.scaled_masked_softmax(x, mask, self.scale, self.fix_triu_mask, self.fully_masked)

    def extra_repr(self) -> str:
        """The constructor arguments, as ``print(module)`` shows them."""
        return f"scale={self.scale}, fix_triu_mask={self.fix_triu_mask}, fully_masked={self.fully_masked!r}"


# Autocast: one floating input (the mask is bool), so the softmax runs in x's dtype (no cast, like torch.softmax
# under CPU autocast).
_autocast.input_dtype("scaled_masked_softmax")


# ---------------------------------------------------------------------------------------------------------------
# torchair's GE graph mode.
@_decompositions.decomposition(_ops.scaled_masked_softmax.default, {
    "aten._softmax.default", "aten.any.dim", "aten.arange.default", "aten.expand.default", "aten.gt.Tensor",
    "aten.logical_not.default", "aten.masked_fill.Scalar", "aten.mul.Tensor", "aten.unsqueeze.default",
    "aten.zeros.default"})
def _decomposed(x, mask, scale=1.0, fix_triu_mask=False, fully_masked="uniform"):
    # softmax((x * scale).masked_fill(mask, -10000), -1). The causal mask (column > row) is built from two
    # aranges: GE's Triu is not known to take bool tensors. fully_masked="zero": rows with no unmasked position
    # are 0 (aten.all.dim has no GE converter; any.dim and logical_not have). A causal row never is.
    if fix_triu_mask:
        rows = torch.arange(x.shape[2], device=x.device).unsqueeze(1)
        cols = torch.arange(x.shape[3], device=x.device)
        mask = cols > rows
    z = (_decompositions.opmath(x) * scale).masked_fill(mask, -10000.0)
    y = torch.softmax(z, -1)
    if fully_masked == "zero" and not fix_triu_mask:
        y = y.masked_fill(torch.logical_not(torch.logical_not(mask).any(-1, keepdim=True)), 0.0)
    return _decompositions.finish(y, x.dtype)


# ---------------------------------------------------------------------------------------------------------------
# python -m torch_ext --check
def _backward_inputs(gen, dtype):
    """(grad_output, y, mask) of scaled_masked_softmax_backward: y the softmax of a masked x."""
    x = uniform(gen, (2, 3, 16, 64), -3, 3)
    mask = torch.rand((2, 1, 16, 64), generator=gen) < 0.25
    y = torch.softmax((x * 0.5).masked_fill(mask, -10000.0), dim=-1).to(dtype)
    return uniform(gen, (2, 3, 16, 64), -3, 3, dtype), y, mask


@_check.declare("backward")
def _backward_cases(dtype):
    d = _check.dtype_name(dtype)
    out = []
    for triu in (False, True):
        out.append(Case(
            f"scaled_masked_softmax_backward {'fix_triu_mask' if triu else 'mask'} {d}",
            lambda gen, dt=dtype: _backward_inputs(gen, dt),
            lambda g, y, mask, t=triu: [("out", _ops.scaled_masked_softmax_backward(g, y, mask, 0.5, t))]))
    return out


@_check.declare("function")
def _function_cases(dtype):
    def inputs(gen, dt=dtype):
        mask = torch.rand((2, 1, 16, 64), generator=gen) < 0.25
        mask[0, 0, 3] = True  # one fully masked row (uniform 1/64, zero gradient)
        return uniform(gen, (2, 3, 16, 64), -6, 6, dt), mask

    return [Case(
        f"torch_ext.scaled_masked_softmax forward+backward {_check.dtype_name(dtype)}", inputs,
        lambda x, mask: _check.autograd(scaled_masked_softmax, "x", x, mask=mask, scale=0.25))]


@_check.declare("strided")
def _strided_out_cases():
    def softmax_out(g, y, mask):
        storage = torch.full((4, 5, 18, 66), _check.SENTINEL, dtype=g.dtype, device=g.device)
        out = storage[1:3, 1:4, 1:17, 1:65]  # sliced view
        _ops.scaled_masked_softmax_backward.out(g, y, mask, 0.5, False, out=out)
        return [("out storage (sliced view, sentinels outside it)", storage)]

    return [Case("scaled_masked_softmax_backward.out into a sliced out float16",
                 lambda gen: _backward_inputs(gen, torch.float16), softmax_out)]


@_check.declare("special")
def _special_cases():
    def run(sg, y, mask):
        return [("scaled_masked_softmax_backward", _ops.scaled_masked_softmax_backward(sg, y, mask, 1.0, False))]

    def inputs(gen):
        sg, y, mask = (t[:1, :1, :4].clone() for t in _backward_inputs(gen, torch.float32))
        mask[..., 0] = True
        sg[0, 0, 0, 0] = math.nan  # masked NaN / inf in grad_output and y: their rows NaN, their own positions 0
        sg[0, 0, 1, 0] = math.inf
        y[0, 0, 2, 0] = math.nan
        return sg, y, mask

    return [Case("special values: scaled_masked_softmax_backward NaN/inf float32", inputs, run)]
