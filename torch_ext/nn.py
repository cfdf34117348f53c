"""Modules whose gradients come from the npu_ext backward operators.

``GELU`` and ``PReLU`` subclass ``torch.nn.GELU`` / ``torch.nn.PReLU``: same constructor arguments,
attributes, parameter names and state_dict (a checkpoint loads either way), ``isinstance`` still holds.
``convert(model)`` swaps those modules of an existing model for ours, in place, keeping every parameter
object (so an optimizer built before the call keeps working).
"""

# Each module is written in its family's module, torch_ext/_family_<family>.py, and exported here by _export.

import torch

__all__ = ["convert"]  # the families' modules are inserted before convert, in import order (_export)

_SWAPS = {}  # torch.nn class -> ours, for convert(): what each family exports with replaces=


def _export(cls=None, *, replaces=None):
    """Makes a family's module ``torch_ext.nn.<name>`` (a class decorator); ``replaces``: the ``torch.nn`` class
    ``convert()`` swaps for it.

    Its ``__module__`` becomes this module's: the place pickle (``torch.save(model)``), ``repr(type(m))`` and
    torch.compile have always seen it in, whichever file of the package it is written in."""
    def export(c):
        c.__module__ = __name__
        globals()[c.__name__] = c
        __all__.insert(-1, c.__name__)
        if replaces is not None:
            _SWAPS[replaces] = c
        return c

    return export if cls is None else export(cls)


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
