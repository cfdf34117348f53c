"""torch.compile on an Ascend NPU through torchair's GE graph mode (max-autotune).

torchair (shipped in the torch_npu wheel) turns every node of the AOTAutograd graphs into an Ascend graph-IR
(GE) operator. The npu_ext forward ops cannot be converted: GE has IR ops named ``Gelu``, ``Logit`` and
``ScaledMaskedSoftmax`` with other signatures, onto which torchair would map ours, and ``prelu`` /
``grouped_bias_add`` have no NPU kernel for its callback path. So this module gives torchair
*decompositions*: AOTAutograd applies them below the Autograd key, so

* the forward graph gets plain ATen ops that torchair converts (``ATEN_OPS``), computed as the device-generic
  forward (csrc/ops/<family>/composite.cpp): 16-bit inputs upcast to fp32, one rounding at the end;
* the backward graph keeps the npu_ext backward ops (our autograd nodes call them), which run our NPU kernels.

``grouped_bias_add_grad`` stays an npu_ext op, but torchair maps it (by name) onto GE's
``GroupedBiasAddGrad``, whose kernel reads rows at the offsets ``group_idx`` gives without checking them (a
bad value reads outside ``grad_y``). Eager mode checks the values on the host; a graph cannot. So in these
graphs a ``group_idx`` that eager mode would reject (negative, decreasing ends, a last end or a sum of counts
other than N) is replaced, on the device, by a valid one before the op, and the result is set to NaN:
``grouped_bias_add`` returns all-NaN and the bias gradient is all-NaN, never an out-of-bounds read and
never an exception. An empty ``group_idx`` with N > 0 rows is a shape error at compile time.

Usage (needs torch_npu with CANN; this module itself never imports torchair or torch_npu)::

    model = torch.compile(model, backend=torch_ext.torchair.npu_backend())

or pass ``decompositions()`` to torchair yourself:
``torchair.get_npu_backend(compiler_config=cfg, custom_decompositions=torch_ext.torchair.decompositions())``.

The argument checks of the forward ops (dtypes, shapes, devices) are not repeated here: under torch.compile
Dynamo runs every op on fake tensors with its Meta kernel before AOTAutograd decomposes it, so an invalid call
still raises the eager error. (Calling ``aot_function`` directly with these decompositions skips them.)
"""

import math
import struct
import threading

import torch

from . import _C  # noqa: F401  (registers torch.ops.npu_ext.*)

__all__ = ["decompositions", "npu_backend", "ATEN_OPS"]

_ops = torch.ops.npu_ext
_LOW_PRECISION = (torch.float16, torch.bfloat16)

# Every ATen op in the graphs of the torch_ext functions traced with these decompositions, forward and backward:
# the decompositions' own ops, the reshapes of torch_ext.functional and AOTAutograd's detach
# (tests/training/test_torchair.py checks the graphs against this list). Each has a GE converter in torchair 2.13.0
# (torchair/_ge_concrete_graph/ge_converter/aten/<op>.py, one that builds GE ops rather than raising
# NotImplementedError); tests/training/test_torchair.py re-checks that when TORCHAIR_SRC points at those sources.
ATEN_OPS = frozenset({
    "aten._softmax.default",
    "aten._to_copy.default",
    "aten.add.Tensor",
    "aten.all.default",
    "aten.any.dim",
    "aten.arange.default",
    "aten.bitwise_and.Tensor",
    "aten.cat.default",
    "aten.clamp.default",
    "aten.clone.default",
    "aten.cumsum.default",
    "aten.detach.default",
    "aten.div.Tensor",
    "aten.eq.Scalar",
    "aten.erf.default",
    "aten.expand.default",
    "aten.ge.Tensor",
    "aten.gt.Scalar",
    "aten.gt.Tensor",
    "aten.index_select.default",
    "aten.log.default",
    "aten.logical_not.default",
    "aten.masked_fill.Scalar",
    "aten.mul.Tensor",
    "aten.new_zeros.default",
    "aten.rsub.Scalar",
    "aten.scalar_tensor.default",
    "aten.searchsorted.Tensor",
    "aten.select.int",
    "aten.slice.Tensor",
    "aten.sum.dim_IntList",
    "aten.tanh.default",
    "aten.unsqueeze.default",
    "aten.view.default",
    "aten.where.self",
    "aten.zeros.default",
})


def _opmath(t):
    """t in the dtype the forward ops compute in: fp32 for fp16/bf16, its own dtype otherwise."""
    return t.to(torch.float32) if t.dtype in _LOW_PRECISION else t


def _finish(r, dtype):
    """The result in the op's output dtype (one rounding for 16-bit inputs), contiguous like the eager op's."""
    return r.to(dtype).contiguous()


# ----------------------------------------------------------------------------------------------------------
# gelu: ATen's CPU formulas (at::gelu, which forward_composite.cpp calls on the fp32 input).
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_TANH_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5  # sqrt(2 / pi)
_TANH_KAPPA = 0.044715


def _gelu(self, approximate="none"):
    # Not aten.gelu: torchair converts it to GE's Gelu, the tanh approximation, whatever `approximate` says.
    x = _opmath(self)
    if approximate == "tanh":
        y = 0.5 * x * (1 + torch.tanh(_TANH_BETA * (x + _TANH_KAPPA * (x * x * x))))
    else:
        y = x * 0.5 * (1 + torch.erf(x * _SQRT1_2))
    return _finish(y, self.dtype)


# ----------------------------------------------------------------------------------------------------------
def _prelu(self, weight):
    # x > 0 ? x : w_c * x. Not aten._prelu_kernel (GE's PRelu), whose weight layout rules are not ours:
    # weight may have any shape with 1 or C elements, C = self.size(1).
    x, w = _opmath(self), _opmath(weight)
    if weight.numel() == 1:
        w = w.reshape([1] * x.dim())
    else:
        w = w.reshape([-1] + [1] * (x.dim() - 2))
    return _finish(torch.where(x > 0, x, w * x), self.dtype)


# ----------------------------------------------------------------------------------------------------------
def _round_to(value, dtype):
    """A Python float rounded to the compute dtype (fp32, or fp64 left as it is), as ATen's kernels convert a
    double argument to their scalar type."""
    if dtype == torch.float64:
        return value
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:  # rounds past the largest float
        return math.copysign(math.inf, value)


def _logit(self, eps=None):
    # aten.logit has no GE converter (it raises NotImplementedError). ATen's CPU kernel: with eps >= 0 (or NaN)
    # x is clamped to [lo, hi], lo = eps and hi = 1 - lo in the compute dtype; then log(x / (1 - x)).
    x = _opmath(self)
    if eps is not None and not eps < 0:
        lo = _round_to(eps, x.dtype)
        hi = _round_to(1.0 - lo, x.dtype)  # = 1 - lo in fp32: 1 - lo is exact in double, or rounds the same
        x = torch.clamp(x, lo, hi)
    return _finish(torch.log(x / (1 - x)), self.dtype)


# ----------------------------------------------------------------------------------------------------------
def _scaled_masked_softmax(x, mask, scale=1.0, fix_triu_mask=False, fully_masked="uniform"):
    # softmax((x * scale).masked_fill(mask, -10000), -1). The causal mask (column > row) is built from two
    # aranges: GE's Triu is not known to take bool tensors. fully_masked="zero": rows with no unmasked position
    # are 0 (aten.all.dim has no GE converter; any.dim and logical_not have). A causal row never is.
    if fix_triu_mask:
        rows = torch.arange(x.shape[2], device=x.device).unsqueeze(1)
        cols = torch.arange(x.shape[3], device=x.device)
        mask = cols > rows
    z = (_opmath(x) * scale).masked_fill(mask, -10000.0)
    y = torch.softmax(z, -1)
    if fully_masked == "zero" and not fix_triu_mask:
        y = y.masked_fill(torch.logical_not(torch.logical_not(mask).any(-1, keepdim=True)), 0.0)
    return _finish(y, x.dtype)


# ----------------------------------------------------------------------------------------------------------
# grouped_bias_add and grouped_bias_add_grad: group_idx checked on the device.
def _check_groups(op, rows_name, group_idx, rows):
    """The one check on group_idx that needs no values: G = 0 is only valid for N = 0 rows (a shape check, at
    compile time). Same message as eager (csrc/ops/grouped_bias_add/checks.cpp, group_offsets)."""
    torch._check(
        group_idx.shape[0] > 0 or rows == 0,
        lambda: f"npu_ext.{op}: the last entry of group_idx must equal the number of rows of {rows_name} "
                f"({rows}), but got an empty group_idx",
    )


def _group_ends(group_idx, group_idx_type, rows):
    """(ends, valid): the cumulative end offsets of the groups (int64) and a 0-dim bool, True when group_idx is
    what eager mode accepts (ends non-negative and non-decreasing, the last one equal to `rows`; for counts:
    non-negative counts summing to `rows`, i.e. the same conditions on their cumulative sum, where an int64
    overflow shows up as a decrease)."""
    g = group_idx.to(torch.int64)
    ends = g if group_idx_type == 0 else torch.cumsum(g, 0)
    zero = ends.new_zeros(1)
    starts = torch.cat([zero, ends[:-1]])
    last = torch.cat([zero, ends])[-1]
    return ends, (ends >= starts).all() & (last == rows)


def _all_rows_in_last_group(group_idx, rows):
    """A group_idx valid in both encodings for `rows` rows, of group_idx's shape and dtype: [0, ..., 0, rows]
    (cumulative ends, or counts)."""
    last = torch.arange(group_idx.shape[0], device=group_idx.device) == group_idx.shape[0] - 1
    return (last * rows).to(group_idx.dtype)


def _grouped_bias_add(x, bias, group_idx=None, group_idx_type=0, probs=None):
    xf, bf = _opmath(x), _opmath(bias)
    if group_idx is None:
        rows_bias = bf.reshape(x.shape[0], 1, x.shape[2])
        valid = None
    else:
        rows = x.shape[0]
        _check_groups("grouped_bias_add", "x", group_idx, rows)
        ends, valid = _group_ends(group_idx, group_idx_type, rows)
        ends = torch.where(valid, ends, _all_rows_in_last_group(ends, rows))
        row_group = torch.searchsorted(ends, torch.arange(rows, device=x.device), right=True)
        rows_bias = torch.where(valid, bf, math.nan).index_select(0, row_group)
    if probs is not None:  # one weight per row of x, in x's compute dtype: x + probs * bias[group]
        rows_bias = rows_bias * probs.to(xf.dtype).reshape(tuple(x.shape[:-1]) + (1,))
    return _finish(xf + rows_bias, x.dtype)


_inside = threading.local()  # set while _grouped_bias_add_grad calls the op it decomposes


def _grouped_bias_add_grad(grad_y, group_idx=None, group_idx_type=0):
    # The op itself, with group_idx replaced when invalid and a NaN result then. Calling the op from its own
    # decomposition comes back here: NotImplemented makes the tracer record the op as it is.
    if group_idx is None or getattr(_inside, "active", False):
        return NotImplemented
    rows = grad_y.shape[0]
    _check_groups("grouped_bias_add_grad", "grad_y", group_idx, rows)
    _, valid = _group_ends(group_idx, group_idx_type, rows)
    safe = torch.where(valid, group_idx, _all_rows_in_last_group(group_idx, rows))
    _inside.active = True
    try:
        out = _ops.grouped_bias_add_grad.default(grad_y, safe, group_idx_type)
    finally:
        _inside.active = False
    return torch.where(valid, out, math.nan)


# ----------------------------------------------------------------------------------------------------------
def decompositions():
    """The decompositions for torchair's GE graph mode, {OpOverload: function} (a new dict per call).

    The five forward ops become ATen ops (``ATEN_OPS``); ``grouped_bias_add_grad`` stays, with its
    ``group_idx`` checked on the device (see the module docstring). The other backward ops are left as they are.
    """
    return {
        _ops.gelu.default: _gelu,
        _ops.prelu.default: _prelu,
        _ops.logit.default: _logit,
        _ops.scaled_masked_softmax.default: _scaled_masked_softmax,
        _ops.grouped_bias_add.default: _grouped_bias_add,
        _ops.grouped_bias_add_grad.default: _grouped_bias_add_grad,
    }


def npu_backend(*, compiler_config=None, custom_decompositions=None):
    """``torchair.get_npu_backend`` with ``decompositions()`` added in max-autotune (GE graph) mode, the default.

    ``custom_decompositions`` are merged over ours. In the other modes (reduce-overhead) the graphs run the
    eager kernels, which need no decomposition, and torchair gets ``custom_decompositions`` unchanged.
    Imports torch_npu and torchair (CANN must be installed).
    """
    import torch_npu  # noqa: F401  (installs the `torchair` module)
    import torchair

    if compiler_config is None:
        compiler_config = torchair.CompilerConfig()
    decomps = decompositions() if compiler_config.mode.value == "max-autotune" else {}
    decomps.update(custom_decompositions or {})
    return torchair.get_npu_backend(compiler_config=compiler_config, custom_decompositions=decomps)
