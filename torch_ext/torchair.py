"""torch.compile on an Ascend NPU through torchair's GE graph mode (max-autotune).

torchair (shipped in the torch_npu wheel) turns every node of the AOTAutograd graphs into an Ascend graph-IR
(GE) operator. The npu_ext forward ops cannot be converted: GE has IR ops named ``Gelu``, ``Logit`` and
``ScaledMaskedSoftmax`` with other signatures, onto which torchair would map ours, and ``prelu`` /
``grouped_bias_add`` have no NPU kernel for its callback path. So this module gives torchair
*decompositions*: AOTAutograd applies them below the Autograd key, so

* the forward graph gets plain ATen ops that torchair converts (``ATEN_OPS``), computed as the device-generic
  forward (csrc/ops/<family>/composite.cpp): 16-bit inputs upcast to fp32, one rounding at the end;
* the backward graph keeps the npu_ext backward ops (our autograd nodes call them), which run our NPU kernels.

``grouped_bias_add_grad`` stays an npu_ext op, but torchair maps it (by name) onto GE's
``GroupedBiasAddGrad``, whose kernel reads rows at the offsets ``group_idx`` gives without checking them (a
bad value reads outside ``grad_y``). Eager mode checks the values on the host; a graph cannot. So in these
graphs a ``group_idx`` that eager mode would reject (negative, decreasing ends, a last end or a sum of counts
other than N) is replaced, on the device, by a valid one before the op, and the result is set to NaN:
``grouped_bias_add`` returns all-NaN and the bias gradient is all-NaN, never an out-of-bounds read and
never an exception. An empty ``group_idx`` with N > 0 rows is a shape error at compile time.

Usage (needs torch_npu with CANN; this module itself never imports torchair or torch_npu)::

    model = torch.compile(model, backend=torch_ext.torchair.npu_backend())

or pass ``decompositions()`` to torchair yourself:
``torchair.get_npu_backend(compiler_config=cfg, custom_decompositions=torch_ext.torchair.decompositions())``.

The argument checks of the forward ops (dtypes, shapes, devices) are not repeated here: under torch.compile
Dynamo runs every op on fake tensors with its Meta kernel before AOTAutograd decomposes it, so an invalid call
still raises the eager error. (Calling ``aot_function`` directly with these decompositions skips them.)
"""

from . import _C, _decompositions  # noqa: F401  (_C registers torch.ops.npu_ext.*)

__all__ = ["decompositions", "npu_backend", "ATEN_OPS"]

# Each family declares its decomposition in its module (torch_ext/_family_<family>.py) to _decompositions, with
# the ATen ops of its graphs. ATEN_OPS: every ATen op in the graphs of the torch_ext functions traced with these
# decompositions, forward and backward (tests/training/test_torchair.py checks the graphs against it). Each has a
# GE converter in torchair 2.13.0 (torchair/_ge_concrete_graph/ge_converter/aten/<op>.py, one that builds GE ops
# rather than raising NotImplementedError); tests/training/test_torchair.py re-checks that when TORCHAIR_SRC
# points at those sources.
ATEN_OPS = frozenset(_decompositions.ATEN_OPS)


# ----------------------------------------------------------------------------------------------------------
def decompositions():
    """The decompositions for torchair's GE graph mode, {OpOverload: function} (a new dict per call).

    The five forward ops become ATen ops (``ATEN_OPS``); ``grouped_bias_add_grad`` stays, with its
    ``group_idx`` checked on the device (see the module docstring). The other backward ops are left as they are.
    """
    return dict(_decompositions.DECOMPOSITIONS)


def npu_backend(*, compiler_config=None, custom_decompositions=None):
    """``torchair.get_npu_backend`` with ``decompositions()`` added in max-autotune (GE graph) mode, the default.

    ``custom_decompositions`` are merged over ours. In the other modes (reduce-overhead) the graphs run the
    eager kernels, which need no decomposition, and torchair gets ``custom_decompositions`` unchanged.
    Imports torch_npu and torchair (CANN must be installed).
    """
    import torch_npu  # noqa: F401  (installs the `torchair` module)
    import torchair

    if compiler_config is None:
        compiler_config = torchair.CompilerConfig()
    decomps = decompositions() if compiler_config.mode.value == "max-autotune" else {}
    decomps.update(custom_decompositions or {})
    return torchair.get_npu_backend(compiler_config=compiler_config, custom_decompositions=decomps)
