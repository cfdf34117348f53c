"""The Python side of the operator families, one module each: torch_ext/_family_<family>.py, the counterpart of the
family's C++ folder csrc/ops/<family>/ (docs/adding-an-operator.md).

A family's module holds its training function (exported as ``torch_ext.functional.<op>`` and ``torch_ext.<op>``),
its ``torch.nn`` module if it has one (``torch_ext.nn.<Module>``), the autocast rule of its forward op, its
decomposition for torchair's GE graph mode and its cases of ``python -m torch_ext --check``. Each registers itself
with the shared module that keeps the mechanism: ``functional._export``, ``nn._export``,
``_autocast.lower_precision`` / ``input_dtype``, ``_decompositions.decomposition``, ``_check.declare``.

The families are imported here, one line each, rather than found by a scan of the package: the order is then
chosen, not alphabetical (it is the order of ``torch_ext.__all__``, ``torch_ext.functional.__all__``,
``torch_ext.nn.__all__`` and of each section of the ``--check`` report), and the imports stay visible to tools
that read them. tests/repo/test_operator_layout.py checks that every folder of csrc/ops has its module, imported
here. (Modules beside the others, not a subpackage: the NPU and ASan builds of the Makefile copy torch_ext/*.py.)
"""

from . import _family_gelu  # noqa: F401
from . import _family_prelu  # noqa: F401
from . import _family_logit  # noqa: F401
from . import _family_scaled_masked_softmax  # noqa: F401
from . import _family_grouped_bias_add  # noqa: F401
