"""Autograd of the npu_ext operators.

Every formula is registered on the generic ``Autograd`` dispatch key (not a per-device one), so it applies on
CPU, on an NPU (torch_npu, PrivateUse1) and on any other device, and it is traced by torch.compile and
torch.export like any ATen derivative.

* Forward ops: their autograd is C++ (csrc/autograd.cpp, autograd nodes like ATen's), so a training
  step through torch_ext.gelu & co. costs no Python beyond the call itself. The gradient of each forward op is
  the matching npu_ext backward operator (gelu -> gelu_backward_v2, prelu -> prelu_backward, logit ->
  logit_grad, scaled_masked_softmax -> scaled_masked_softmax_backward, grouped_bias_add ->
  grouped_bias_add_grad for the bias; x gets grad).
* Backward ops (this module, ``torch.library.register_autograd``): they are differentiable too (double
  backward: gradient penalties, Hessian-vector products). Their derivatives are written with ATen ops and
  other npu_ext ops, all differentiable, so higher orders work as well. 16-bit inputs are upcast to fp32 for
  these formulas and the results rounded back to the input dtype. A first-order backward never runs these
  Python kernels: the C++ formulas call the backward ops below autograd unless a graph is being recorded.
"""

import math

import torch

ops = torch.ops.npu_ext

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _opmath(t):
    """t in the dtype the formulas compute in (fp32 for fp16/bf16, else its own dtype)."""
    return t.float() if t.dtype in _LOW_PRECISION else t


def _reduce_to(t, like):
    """Gradient `t` (of a broadcast result) summed to the shape of input `like` and cast to its dtype."""
    if t.shape != like.shape:
        t = t.sum_to_size(like.shape)
    return t.to(like.dtype)


def _fp32(eps):
    """eps rounded to fp32, as logit_grad uses it."""
    return float(torch.tensor(eps, dtype=torch.float32))


# ----------------------------------------------------------------------------------------------------------
# gelu / gelu_backward_v2
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_KAPPA = 0.044715


def _gelu_second_derivative(x, approximate):
    """d^2/dx^2 gelu(x) (x already in compute precision)."""
    if approximate == "tanh":
        # gelu = 0.5 x (1 + tanh(u)), u = k (x + c x^3):
        # gelu'' = (1 - t^2) * (u' - x t u'^2 + 0.5 x u''), u' = k (1 + 3 c x^2), u'' = 6 k c x
        u = _SQRT_2_OVER_PI * (x + _KAPPA * x * x * x)
        t = torch.tanh(u)
        du = _SQRT_2_OVER_PI * (1 + 3 * _KAPPA * x * x)
        ddu = 6 * _SQRT_2_OVER_PI * _KAPPA * x
        return (1 - t * t) * (du - x * t * du * du + 0.5 * x * ddu)
    # gelu = x Phi(x): gelu'' = phi(x) (2 - x^2)
    return _INV_SQRT_2PI * torch.exp(-0.5 * x * x) * (2 - x * x)


def _gelu_backward_v2_setup(ctx, inputs, output):
    grad_output, x, approximate = inputs
    ctx.approximate = approximate
    ctx.save_for_backward(grad_output, x)


def _gelu_backward_v2_backward(ctx, ggi):
    g, x = ctx.saved_tensors
    d_g = d_x = None
    if ctx.needs_input_grad[0]:
        # gi = g * gelu'(x) is linear in g
        d_g = _reduce_to(ops.gelu_backward_v2(ggi, x, ctx.approximate), g)
    if ctx.needs_input_grad[1]:
        xf = _opmath(x)
        d_x = _reduce_to(_opmath(ggi) * _opmath(g) * _gelu_second_derivative(xf, ctx.approximate), x)
    return d_g, d_x, None


# ----------------------------------------------------------------------------------------------------------
# prelu / prelu_backward
def _channel_view(w, x):
    """weight (1 or C elements, any shape) viewed to broadcast against x along dim 1."""
    if x.dim() > 1:
        shape = [1] * x.dim()
        shape[1] = -1
        return w.reshape(shape)
    return w.reshape(())


def _prelu_backward_setup(ctx, inputs, output):
    g, x, w = inputs
    ctx.save_for_backward(g, x, w)


def _prelu_backward_backward(ctx, ggi, ggw):
    # gi = where(x > 0, g, w_c g);  gw_c = sum_{dims != 1} where(x > 0, 0, x g)  (NaN x: the x <= 0 branch)
    g, x, w = ctx.saved_tensors
    pos = x > 0
    ggw_c = _channel_view(ggw, x)
    d_g = d_x = d_w = None
    if ctx.needs_input_grad[0]:
        d_g = _reduce_to(torch.where(pos, ggi, ggi * _channel_view(w, x)) + torch.where(pos, 0, x * ggw_c), g)
    if ctx.needs_input_grad[1]:
        # gi is piecewise linear in x (zero derivative a.e.); gw is linear in x on the x <= 0 side
        d_x = _reduce_to(torch.where(pos, 0, g * ggw_c), x)
    if ctx.needs_input_grad[2]:
        t = torch.where(pos, 0, g * ggi)
        if w.numel() != 1 and x.dim() > 1:
            t = t.sum([d for d in range(x.dim()) if d != 1])
        else:
            t = t.sum()
        d_w = t.reshape(w.shape).to(w.dtype)
    return d_g, d_x, d_w


# ----------------------------------------------------------------------------------------------------------
# logit / logit_grad


def _logit_grad_setup(ctx, inputs, output):
    x, dy, eps = inputs
    ctx.eps = eps
    ctx.save_for_backward(x, dy)


def _logit_grad_backward(ctx, ggx):
    # dx = dy / (x (1 - x)) on [eps, 1 - eps] (0 outside) when eps >= 0, on [0, 1] (NaN outside) otherwise
    x, dy = ctx.saved_tensors
    d_x = d_dy = None
    if ctx.needs_input_grad[1]:
        d_dy = ops.logit_grad(x, ggx, ctx.eps)  # linear in dy
    if ctx.needs_input_grad[0]:
        xf = _opmath(x)
        q = xf * (1 - xf)
        val = _opmath(ggx) * _opmath(dy) * (2 * xf - 1) / (q * q)
        eps = _fp32(ctx.eps)
        if eps >= 0:  # (eps = NaN compares False: the eps < 0 branch, as logit_grad)
            val = torch.where((xf >= eps) & (xf <= 1 - eps), val, 0)
        else:
            val = torch.where((xf >= 0) & (xf <= 1), val, math.nan)
        d_x = val.to(x.dtype)
    return d_x, d_dy, None


# ----------------------------------------------------------------------------------------------------------
# scaled_masked_softmax / scaled_masked_softmax_backward
def _softmax_mask(mask, like, fix_triu_mask):
    if fix_triu_mask:
        s1, s2 = like.shape[-2:]
        return torch.ones(s1, s2, dtype=torch.bool, device=like.device).triu(1)
    return mask


def _sms_backward_setup(ctx, inputs, output):
    g, y, mask, scale, fix_triu_mask = inputs
    ctx.scale, ctx.fix_triu_mask = scale, fix_triu_mask
    ctx.save_for_backward(g, y, mask)


def _sms_backward_backward(ctx, gg):
    # out = where(m, 0, scale * (g - s) * y), s = sum_row(g * y)
    g, y, mask = ctx.saved_tensors
    m = _softmax_mask(mask, y, ctx.fix_triu_mask)
    a = torch.where(m, 0, _opmath(gg))
    gf, yf = _opmath(g), _opmath(y)
    ay = (a * yf).sum(-1, keepdim=True)
    d_g = d_y = None
    if ctx.needs_input_grad[0]:
        d_g = (ctx.scale * yf * (a - ay)).to(g.dtype)
    if ctx.needs_input_grad[1]:
        s = (gf * yf).sum(-1, keepdim=True)
        d_y = (ctx.scale * (a * (gf - s) - gf * ay)).to(y.dtype)
    return d_g, d_y, None, None, None


# ----------------------------------------------------------------------------------------------------------
# grouped_bias_add / grouped_bias_add_grad


def _gba_grad_setup(ctx, inputs, output):
    grad_y, group_idx, group_idx_type = inputs
    ctx.group_idx_type = group_idx_type
    ctx.grad_y_shape, ctx.grad_y_dtype = grad_y.shape, grad_y.dtype
    ctx.save_for_backward(group_idx)


def _gba_grad_backward(ctx, gg):
    # The adjoint of the per-group row sum is the per-group broadcast of gg (G, H) over the group's rows.
    (group_idx,) = ctx.saved_tensors
    gg = gg.to(ctx.grad_y_dtype)
    if group_idx is None:
        return gg.unsqueeze(1).expand(ctx.grad_y_shape), None, None
    zeros = torch.zeros(ctx.grad_y_shape, dtype=gg.dtype, device=gg.device)
    return ops.grouped_bias_add(zeros, gg, group_idx, ctx.group_idx_type), None, None


# ----------------------------------------------------------------------------------------------------------
_REGISTRATIONS = [
    ("npu_ext::gelu_backward_v2", _gelu_backward_v2_backward, _gelu_backward_v2_setup),
    ("npu_ext::prelu_backward", _prelu_backward_backward, _prelu_backward_setup),
    ("npu_ext::logit_grad", _logit_grad_backward, _logit_grad_setup),
    ("npu_ext::scaled_masked_softmax_backward", _sms_backward_backward, _sms_backward_setup),
    ("npu_ext::grouped_bias_add_grad", _gba_grad_backward, _gba_grad_setup),
]

_lib = torch.library.Library("npu_ext", "FRAGMENT")  # keeps the registrations alive

for _name, _backward, _setup in _REGISTRATIONS:
    torch.library.register_autograd(_name, _backward, setup_context=_setup, lib=_lib)
