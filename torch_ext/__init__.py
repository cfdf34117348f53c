"""torch_ext: Ascend aclnn backward operators as PyTorch custom ops, and training through them.

Importing this package loads the compiled library, which registers every operator under
``torch.ops.npu_ext`` (schemas, CPU, Meta and device-generic kernels, and the autograd of every op, in C++),
then the Python side of each operator family (``_families``: its training function and module, the autocast
rule of its forward op, its torchair decomposition and its check cases). The training API:

* functional: ``torch_ext.gelu``, ``prelu``, ``logit``, ``scaled_masked_softmax``, ``grouped_bias_add``;
* modules: ``torch_ext.nn.GELU``, ``PReLU``, ``ScaledMaskedSoftmax``, ``GroupedBiasAdd``, and
  ``torch_ext.nn.convert(model)``;
* Megatron-LM / MindSpeed: ``torch_ext.megatron.patch()`` (imported on demand, never by this package);
* torch.compile on an NPU through torchair: ``torch_ext.torchair.npu_backend()``;
* ``torch_ext.show_config()`` (``python -m torch_ext``): what this installation runs, for bug reports;
* ``torch_ext.check()`` (``python -m torch_ext --check``): the NPU results compared with the CPU kernels.

The backward operators themselves are ``torch.ops.npu_ext.gelu_backward_v2``, ``prelu_backward``,
``grouped_bias_add_grad``, ``scaled_masked_softmax_backward`` and ``logit_grad`` (also ``torch_ext.ops``).
"""

import sys

import torch  # noqa: F401  (the compiled library links against libtorch)

from . import _compat, _npu

# An ImportError naming what the modules were built against and what runs, never an undefined symbol or a crash
# at load: a module without its record, another torch, another C++ ABI (torch_npu alone: _npu.load() below).
_compat.check_compiled_here()  # the sources of a checkout that was not built in place: say so
try:
    _compat.check_built_against(["torch_ext._C"] + (["torch_ext._C_npu"] if _npu.wanted() else []))
except ImportError:
    if sys.argv[:1] == ["-m"]:  # python -m torch_ext[.x] (argv[0] is "-m" while runpy imports the package)
        print("\n".join(["torch_ext: the import stops on what its compiled modules were built against:"]
                        + ["  " + line for line in _compat.report()]), file=sys.stderr, flush=True)
    raise

from . import _C  # noqa: F401, E402  (registers torch.ops.npu_ext.*)
from . import _families  # noqa: F401, E402  (each family registers its function, module, autocast rule, ...)
from . import functional, nn  # noqa: E402
from .functional import *  # noqa: F401, F403, E402  (torch_ext.gelu & co.: the families' functions)
from ._config import show_config
from ._version import __version__

# NPU (Ascend) kernels: only when torch_npu and the torch_ext._C_npu module are both installed.
_npu.load()

from ._check import check  # noqa: E402

ops = torch.ops.npu_ext

__all__ = ["ops", "functional", "nn", *functional.__all__, "show_config", "check", "__version__"]
