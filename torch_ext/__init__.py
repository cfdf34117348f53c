"""torch_ext: Ascend aclnn backward operators as PyTorch custom ops.

Importing this package loads the compiled library, which registers every operator under
``torch.ops.npu_ext`` (schemas, CPU kernels and Meta kernels).
"""

import torch  # noqa: F401  (the compiled library links against libtorch)

from . import _C  # noqa: F401  (registers torch.ops.npu_ext.*)

# NPU (Ascend) kernels: only when torch_npu and the torch_ext._C_npu module are both installed.
from . import _npu  # noqa: E402

_npu.load()

ops = torch.ops.npu_ext

__all__ = ["ops"]
__version__ = "0.1.0"
