"""One scenario of tests/integrations/test_mindspeed.py in a process of its own: the real MindSpeed applies its patches when
``mindspeed.megatron_adaptor`` is imported (and redirects torch.cuda to the NPU with torch_npu's transfer_to_npu),
for the whole process, so each order is a fresh interpreter. Runs in a MindSpeed pair's venv (tools/versions.py
mindspeed: the real torch_npu on the fake CANN, Megatron-LM's megatron/ on PYTHONPATH). Prints one JSON line
(``RESULT {...}``) of facts the test asserts on; asserts nothing itself.

  python tests/support/mindspeed_worker.py SCENARIO

Scenarios: mindspeed_then_ours, ours_then_mindspeed, repatch, train.
"""

import importlib
import inspect
import json
import os
import sys
import warnings

import fake_cann_lib  # tests/support is sys.path[0]: this script's folder
import paths

warnings.filterwarnings("ignore")

import torch  # noqa: E402  (autoloads torch_npu)

import torch_ext  # noqa: E402
import torch_ext.megatron as tm  # noqa: E402

SOFTMAX = "megatron.core.fusions.fused_softmax"
FORWARD = f"{SOFTMAX}.FusedScaleMaskSoftmax.forward_fused_softmax"
GATE = f"{SOFTMAX}.FusedScaleMaskSoftmax.is_kernel_available"
BIAS_GELU = "megatron.core.fusions.fused_bias_gelu.bias_gelu_impl"
OWN = {name: f for name, f in vars(tm).items() if inspect.isfunction(f)}  # no scan may rebind these


def counters():
    """The fake CANN's counters: every aclnn entry point's calls (libopapi.so) and every acl_op launch by type
    (libascendcl.so), as {name: count}."""
    out = {}
    dump = fake_cann_lib.opapi().fake_opapi_dump().decode()
    for line in dump.splitlines():
        name, _, n = line.rpartition("=")
        if name.startswith("aclnn") and not name.endswith("GetWorkspaceSize"):
            out[name] = int(n)
    runtime = fake_cann_lib.runtime().fake_cann_dump().decode()
    for line in runtime.splitlines():
        name, _, n = line.rpartition("=")
        if name.startswith("acl_op "):
            out[name] = int(n)
    return out


def whose(obj):
    """Whose object a target holds: "ours", "mindspeed", "megatron" (by the module that defines it)."""
    if isinstance(obj, staticmethod):
        obj = obj.__func__
    module = getattr(obj, "__module__", "") or ""
    if module == "torch_ext.megatron":
        return "ours"
    return module.split(".")[0]


def targets():
    """{target: whose object is there now} for the fused-softmax methods and bias_gelu_impl."""
    softmax = importlib.import_module(SOFTMAX)
    gelu = importlib.import_module("megatron.core.fusions.fused_bias_gelu")
    return {GATE: whose(vars(softmax.FusedScaleMaskSoftmax)["is_kernel_available"]),
            FORWARD: whose(vars(softmax.FusedScaleMaskSoftmax)["forward_fused_softmax"]),
            BIAS_GELU: whose(gelu.bias_gelu_impl)}


def step(log, name, returned=None):
    """One step's facts: status(), whose object each target holds, what patch() returned, whether this module's
    own functions are untouched."""
    log.append({"step": name, "status": tm.status(), "whose": targets(), "returned": returned,
                "own_untouched": {n: f for n, f in vars(tm).items() if inspect.isfunction(f)} == OWN})


class OpLog(torch.utils._python_dispatch.TorchDispatchMode):
    """The npu_ext operators dispatched."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if name.startswith("npu_ext."):
            self.ops.add(name)
        return func(*args, **(kwargs or {}))


def fused_softmax_on_npu():
    """A fused bf16 causal FusedScaleMaskSoftmax forward and backward on npu tensors through whatever is in place:
    the npu_ext operators dispatched and the aclnn / acl_op launches it made."""
    from megatron.core.fusions.fused_softmax import FusedScaleMaskSoftmax
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.utils import attention_mask_func

    module = FusedScaleMaskSoftmax(False, True, AttnMaskType.causal, True, attention_mask_func, True, 0.125)
    x = torch.randn(1, 2, 48, 48).to(torch.bfloat16).npu().requires_grad_()
    before = counters()
    log = OpLog()
    with log:
        y = module(x, None)
        y.backward(torch.ones_like(y))
    torch.npu.synchronize()
    after = counters()
    return {"ops": sorted(log.ops), "launches": {k: v - before.get(k, 0) for k, v in after.items()
                                                if v != before.get(k, 0)}}


def _run_ours_then_unpatch(log):
    """The last steps of every order: the fused softmax run through what is in place (ours), then unpatch()."""
    run = fused_softmax_on_npu()
    tm.unpatch()
    step(log, "unpatch")
    return {"steps": log, "ours_ran": run}


def mindspeed_then_ours():
    log = []
    import mindspeed.megatron_adaptor  # noqa: F401  (its patches, at import)

    step(log, "mindspeed")
    step(log, "patch", tm.patch())
    step(log, "patch again", tm.patch())
    return _run_ours_then_unpatch(log)


def ours_then_mindspeed():
    log = []
    step(log, "patch", tm.patch())
    import mindspeed.megatron_adaptor  # noqa: F401

    step(log, "mindspeed")
    step(log, "patch again", tm.patch())
    return _run_ours_then_unpatch(log)


def repatch():
    log = []
    from mindspeed.megatron_adaptor import repatch as mindspeed_repatch  # as verl imports it

    step(log, "mindspeed")
    step(log, "patch", tm.patch())
    mindspeed_repatch({})
    step(log, "repatch")
    step(log, "patch again", tm.patch())
    return _run_ours_then_unpatch(log)


def train():
    """examples/megatron_gpt.py's GPT on the npu device with MindSpeed's adaptor applied: MindSpeed alone on
    Megatron's torch path (fusion off), then through patch() (fusion on); the losses and the fake's launches."""
    import mindspeed.megatron_adaptor  # noqa: F401

    megatron_gpt = paths.example("megatron_gpt")

    steps = int(os.environ.get("NPU_EXT_MINDSPEED_STEPS", "6"))
    with megatron_gpt.cpu_megatron(device="npu"), torch.compiler.set_stance("force_eager"):
        c0 = counters()
        base = megatron_gpt.train_gpt(steps, fused=False, device="npu")
        c1 = counters()
        returned = tm.patch()
        status = tm.status()
        log = OpLog()
        try:
            with log:
                ours = megatron_gpt.train_gpt(steps, fused=True, device="npu")
        finally:
            tm.unpatch()
        c2 = counters()

    def delta(a, b):
        return {k: v - a.get(k, 0) for k, v in b.items() if v != a.get(k, 0)}

    return {"base": base, "ours": ours, "agree": megatron_gpt.curves_agree(ours, base),
            "agree_off_by_3_percent": megatron_gpt.curves_agree([x * 1.03 for x in ours], base), "returned": returned,
            "status": status, "ops": sorted(log.ops), "launches_base": delta(c0, c1), "launches_ours": delta(c1, c2)}


def main():
    scenario = sys.argv[1]
    assert torch_ext._npu.LOADED, torch_ext._npu.why_not_loaded()
    result = globals()[scenario]()
    from megatron.core import package_info

    result.update(megatron=package_info.__version__, mindspeed=os.path.dirname(
        importlib.import_module("mindspeed").__file__), torch_npu=importlib.import_module("torch_npu").__version__)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
