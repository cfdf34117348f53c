"""Every public module, function and class of torch_ext has a docstring; help() on the training functions shows
their signature, semantics, devices and the backward operator they use."""

import importlib
import inspect
import pydoc

import pytest

import torch_ext

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = pytest.mark.arch_independent

PUBLIC_MODULES = ["torch_ext", "torch_ext.functional", "torch_ext.nn", "torch_ext.megatron", "torch_ext.torchair"]
FUNCTIONS = {  # torch_ext.<function>: the backward operator its help names
    "gelu": "gelu_backward_v2",
    "prelu": "prelu_backward",
    "logit": "logit_grad",
    "scaled_masked_softmax": "scaled_masked_softmax_backward",
    "grouped_bias_add": "grouped_bias_add_grad",
}


def public_objects():
    for name in PUBLIC_MODULES:
        mod = importlib.import_module(name)
        yield name, mod
        for attr in getattr(mod, "__all__", []):
            obj = getattr(mod, attr)
            if inspect.ismodule(obj) or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            yield f"{name}.{attr}", obj
            if inspect.isclass(obj):  # the public methods the class itself defines
                for meth, value in vars(obj).items():
                    if not meth.startswith("_") and inspect.isfunction(value):
                        yield f"{name}.{attr}.{meth}", value


OBJECTS = list(public_objects())


@pytest.mark.parametrize("name,obj", OBJECTS, ids=[n for n, _ in OBJECTS])
def test_has_docstring(name, obj):
    doc = obj.__doc__  # its own, not one inherited (inspect.getdoc would take the base class method's)
    assert doc and len(doc.strip()) >= 20, f"{name} has no (real) docstring"


def test_the_list_is_not_empty():
    names = {n for n, _ in OBJECTS}
    assert {"torch_ext.gelu", "torch_ext.nn.GELU.forward", "torch_ext.megatron.patch",
            "torch_ext.show_config", "torch_ext.torchair.npu_backend"} <= names


@pytest.mark.parametrize("fn,backward", list(FUNCTIONS.items()))
def test_help_of_the_training_functions(fn, backward):
    text = pydoc.render_doc(getattr(torch_ext, fn), renderer=pydoc.plaintext)
    assert f"{fn}(" in text  # the signature
    assert "Devices:" in text and "NPU" in text and "CPU" in text
    assert f"npu_ext.{backward}" in text
    assert "Backward" in text or "Gradients" in text
