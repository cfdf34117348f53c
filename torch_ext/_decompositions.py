"""The decompositions each operator family declares for torchair's GE graph mode, and what they share.

``torch_ext.torchair`` hands them to torchair (its module docstring says why and how). They are collected here,
not in torchair.py, because the family modules declare them while ``import torch_ext`` runs, and that import
does not import ``torch_ext.torchair`` (it is imported on demand, as before).
"""

import torch

# OpOverload -> decomposition, in the order the families register them (torch_ext.torchair.decompositions())
DECOMPOSITIONS = {}
# Every ATen op in the graphs of the torch_ext functions traced with the decompositions, forward and backward:
# these (opmath and finish's casts and copy, AOTAutograd's detach, the reshapes of the training functions) and
# each family's own (torch_ext.torchair.ATEN_OPS is the set).
ATEN_OPS = {"aten._to_copy.default", "aten.clone.default", "aten.detach.default", "aten.view.default"}

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def decomposition(op, aten_ops):
    """Declares ``fn`` (a decorator) as the decomposition of ``op`` (an OpOverload) in torchair's GE graphs;
    ``aten_ops``: the ATen ops its graphs, and those of the op's backward, contain besides ``ATEN_OPS``'s."""
    def register(fn):
        DECOMPOSITIONS[op] = fn
        ATEN_OPS.update(aten_ops)
        return fn

    return register


def opmath(t):
    """t in the dtype the forward ops compute in: fp32 for fp16/bf16, its own dtype otherwise."""
    return t.to(torch.float32) if t.dtype in _LOW_PRECISION else t


def finish(r, dtype):
    """The result in the op's output dtype (one rounding for 16-bit inputs), contiguous like the eager op's."""
    return r.to(dtype).contiguous()
