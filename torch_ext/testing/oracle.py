"""The float64 references of the operators, by the op's name: the backward ops' (``oracle.gelu_backward_v2(...)``) and
the forward ops' (``oracle.gelu(...)``).

Each is written in its family's module (torch_ext/testing/families/<family>.py) from the operator contract
(docs/operators.md, "The operators one by one"), including where the package deliberately follows the NPU kernels
(its "Semantics notes": logit_grad with a NaN x, prelu_backward's grad_weight). Nothing there shares code with the
package under test: plain torch ops in float64 on the CPU. Every function takes the operator's inputs (any dtype,
any layout) and returns float64 results.
"""

from torch_ext.testing.families.scaled_masked_softmax import causal_mask

__all__ = ["causal_mask"]


def __getattr__(name):
    from torch_ext.testing import families

    for info in families.infos():
        if info.name == name:
            return info.reference
        if info.forward == name and info.forward_reference is not None:
            return info.forward_reference
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
