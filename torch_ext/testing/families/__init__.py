"""One module per operator family (the names of csrc/ops/<family>/), each defining ``INFO``: its backward operator's
entry in the sample table (torch_ext.testing.opinfo.OpInfo), with its float64 oracle written beside it.

A new family is a new module here: nothing lists the modules (``infos()`` finds them).
"""

import importlib
import pkgutil


def modules():
    """The family modules, in name order."""
    return [importlib.import_module(f"{__name__}.{m.name}") for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)]


def infos():
    return [m.INFO for m in modules()]
