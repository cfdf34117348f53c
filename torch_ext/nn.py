"""Modules whose gradients come from the npu_ext backward operators.

``GELU`` and ``PReLU`` subclass ``torch.nn.GELU`` / ``torch.nn.PReLU``: same constructor arguments,
attributes, parameter names and state_dict (a checkpoint loads either way), ``isinstance`` still holds.
``convert(model)`` swaps those modules of an existing model for ours, in place, keeping every parameter
object (so an optimizer built before the call keeps working).
"""

import torch

from . import functional as F

__all__ = ["GELU", "PReLU", "ScaledMaskedSoftmax", "GroupedBiasAdd", "convert"]


class GELU(torch.nn.GELU):
    """Drop-in for ``torch.nn.GELU(approximate="none")``; backward: npu_ext.gelu_backward_v2."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``torch_ext.gelu(input, self.approximate)``."""
        return F.gelu(input, approximate=self.approximate)


class PReLU(torch.nn.PReLU):
    """Drop-in for ``torch.nn.PReLU(num_parameters=1, init=0.25)``; backward: npu_ext.prelu_backward."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``torch_ext.prelu(input, self.weight)``."""
        return F.prelu(input, self.weight)


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


_SWAPS = {torch.nn.GELU: GELU, torch.nn.PReLU: PReLU}


def convert(model: torch.nn.Module) -> torch.nn.Module:
    """Swaps every ``torch.nn.GELU`` / ``torch.nn.PReLU`` in ``model`` (including ``model`` itself) for
    ``torch_ext.nn.GELU`` / ``PReLU`` in place, and returns ``model``.

    The swap changes the class of each module object: parameters, buffers, hooks and state_dict keys stay
    exactly as they were. Subclasses of the torch modules are left alone (their forward may differ).
    """
    for module in model.modules():
        new_class = _SWAPS.get(type(module))
        if new_class is not None:
            module.__class__ = new_class
    return model
