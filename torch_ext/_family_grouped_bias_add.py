"""grouped_bias_add: ``torch_ext.grouped_bias_add`` and ``torch_ext.nn.GroupedBiasAdd``, whose bias gradient is
``npu_ext.grouped_bias_add_grad``; the autocast rule of ``npu_ext.grouped_bias_add``, the torchair decompositions of
both ops and their ``--check`` cases. Its C++: csrc/ops/grouped_bias_add/."""

import math
import threading

import torch

from . import _C, _autocast, _check, _decompositions, nn
from . import functional as F
from ._check import Case, uniform
from .functional import _dynamo_compiling, _ops, _tf_variadic


@F._export
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


@nn._export
class GroupedBiasAdd(torch.nn.Module):
    """A learnable per-group bias (G, H) added to grouped rows (MoE experts); see
    ``torch_ext.grouped_bias_add``. The bias starts at zero."""

    def __init__(self, num_groups: int, hidden_size: int, group_idx_type: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        self.num_groups = num_groups
        self.hidden_size = hidden_size
        self.group_idx_type = group_idx_type
        self.bias = torch.nn.Parameter(torch.zeros(num_groups, hidden_size, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor, group_idx=None, probs=None) -> torch.Tensor:
        """``torch_ext.grouped_bias_add(x, self.bias, group_idx, self.group_idx_type, probs)``."""
        return F.grouped_bias_add(x, self.bias, group_idx, self.group_idx_type, probs)

    def extra_repr(self) -> str:
        """The constructor arguments, as ``print(module)`` shows them."""
        return f"num_groups={self.num_groups}, hidden_size={self.hidden_size}, group_idx_type={self.group_idx_type}"


# Autocast: an activation and a parameter that must share a dtype, both cast to the autocast dtype (as for the
# bias of F.linear), so that an fp32 GroupedBiasAdd bias works with a bf16 activation. probs may have any
# floating dtype and is left as it is (like the fp32 router probabilities of MoE).
_autocast.lower_precision("grouped_bias_add")


# ---------------------------------------------------------------------------------------------------------------
# torchair's GE graph mode: grouped_bias_add and grouped_bias_add_grad, group_idx checked on the device.
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


@_decompositions.decomposition(_ops.grouped_bias_add.default, {
    "aten.add.Tensor", "aten.all.default", "aten.arange.default", "aten.bitwise_and.Tensor", "aten.cat.default",
    "aten.cumsum.default", "aten.eq.Scalar", "aten.ge.Tensor", "aten.index_select.default", "aten.mul.Tensor",
    "aten.new_zeros.default", "aten.scalar_tensor.default", "aten.searchsorted.Tensor", "aten.select.int",
    "aten.slice.Tensor", "aten.sum.dim_IntList", "aten.where.self"})
def _decomposed(x, bias, group_idx=None, group_idx_type=0, probs=None):
    xf, bf = _decompositions.opmath(x), _decompositions.opmath(bias)
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
    return _decompositions.finish(xf + rows_bias, x.dtype)


_inside = threading.local()  # set while _decomposed_grad calls the op it decomposes


@_decompositions.decomposition(_ops.grouped_bias_add_grad.default, ())
def _decomposed_grad(grad_y, group_idx=None, group_idx_type=0):
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


# ---------------------------------------------------------------------------------------------------------------
# python -m torch_ext --check
@_check.declare("backward")
def _backward_cases(dtype):
    d = _check.dtype_name(dtype)
    out = []
    groups = {"ends (type 0)": ([30, 30, 70, 100], torch.int64, 0),  # an empty group in each
              "counts (type 1)": ([30, 0, 40, 30], torch.int32, 1)}
    for what, (values, index_dtype, kind) in groups.items():
        out.append(Case(
            f"grouped_bias_add_grad group_idx {what} {d}",
            lambda gen, dt=dtype, v=values, it=index_dtype: (uniform(gen, (100, 40), -3, 3, dt),
                                                             torch.tensor(v, dtype=it)),
            lambda gy, idx, k=kind: [("out", _ops.grouped_bias_add_grad(gy, idx, k))]))
    out.append(Case(
        f"grouped_bias_add_grad without group_idx {d}",
        lambda gen, dt=dtype: (uniform(gen, (4, 25, 40), -3, 3, dt),),
        lambda gy: [("out", _ops.grouped_bias_add_grad(gy))]))
    return out


@_check.declare("function")
def _function_cases(dtype):
    return [Case(
        f"torch_ext.grouped_bias_add counts, probs forward+backward {_check.dtype_name(dtype)}",
        lambda gen, dt=dtype: (uniform(gen, (100, 40), -3, 3, dt), uniform(gen, (4, 40), -3, 3, dt),
                               uniform(gen, (100,), 0, 1), torch.tensor([30, 0, 40, 30])),
        lambda x, b, probs, idx: _check.autograd(lambda x_, b_, p_: grouped_bias_add(x_, b_, idx, 1, probs=p_),
                                                 "x bias probs", x, b, probs))]
