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

# Each function is written in its family's module, torch_ext/_family_<family>.py, with the rest of the family's
# Python side, and exported here by _export: this module holds what they share.

import torch

from . import _C

__all__ = []  # the families' functions, in the order torch_ext._families imports them (_export)

_ops = torch.ops.npu_ext

# Eager fast path: torch_ext._C._<op> makes the same dispatcher call as torch.ops.npu_ext.<op>, unboxed (as
# PyTorch's own bindings do), ~2 us less per call. torch.ops is used while Dynamo traces (torch.compile, strict
# torch.export: it cannot trace into _C, and folds is_dynamo_compiling() to True) and whenever an argument or
# mode has __torch_function__ (handled by torch.ops; non-strict export's tracing modes are torch function
# modes). The checks are written out in each function: a helper would be one more Python frame per call. The
# family modules import _C, _ops and these three as globals of their own (one dictionary lookup each, as here).
_dynamo_compiling = torch.compiler.is_dynamo_compiling
_tf_unary = torch._C._has_torch_function_unary
_tf_variadic = torch._C._has_torch_function_variadic


def _export(fn):
    """Makes a family's training function ``torch_ext.functional.<name>`` (torch_ext exports this ``__all__``).

    Its ``__module__`` becomes this module's: the place pickle, help(), ``inspect.getmodule`` and torch.compile
    have always seen it in, whichever file of the package it is written in."""
    fn.__module__ = __name__
    globals()[fn.__name__] = fn
    __all__.append(fn.__name__)
    return fn
