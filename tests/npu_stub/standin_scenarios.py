"""Runs one capability scenario of the NPU path against the stand-in, in a fresh process.

Capabilities (entry points, SoC) are probed once per process, so each machine configuration gets its own
process: tests/test_npu_standin.py runs ``python standin_scenarios.py <scenario>`` with the stand-in's
environment (NPU_EXT_STANDIN_SOC, NPU_EXT_STANDIN_MISSING, NPU_EXT_NO_CPU_FALLBACK) and reads one JSON object
from the last line of stdout: for every step, whether the NPU kernel's result equals the CPU kernel's, the
error message it raised, and the aclnn entry points it called. The fallback warnings (TORCH_WARN) go to stderr:
OpOverload.redispatch does not turn them into Python warnings.
"""

import ctypes
import json
import os
import sys

import torch

import torch_ext  # noqa: F401  (the npu_ext schemas and CPU kernels)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npu_standin_build  # noqa: E402

ops = torch.ops.npu_ext
PU1 = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)
APIS = ["aclnnGeluBackwardV2", "aclnnPreluBackward", "aclnnGroupedBiasAddGrad", "aclnnGroupedBiasAddGradV2",
        "aclnnScaledMaskedSoftmaxBackward", "aclnnLogitGrad"]


def main(scenario):
    lib = ctypes.CDLL(npu_standin_build.setup())
    lib.standin_calls.restype = ctypes.c_int
    lib.standin_calls.argtypes = [ctypes.c_char_p]

    def aclnn_calls():
        calls = {api: lib.standin_calls((api + "GetWorkspaceSize").encode()) + lib.standin_calls(api.encode())
                 for api in APIS}
        return {k: v for k, v in calls.items() if v}

    torch.manual_seed(0)
    x = torch.rand(5, 7)
    dy = torch.randn(5, 7)
    gy = torch.randn(10, 4)
    counts = torch.tensor([3, 0, 7])
    g4, y4 = torch.randn(1, 2, 3, 8), torch.softmax(torch.randn(1, 2, 3, 8), -1)
    mask = torch.rand(1, 2, 3, 8) < 0.3
    steps = {
        "logit_grad": (ops.logit_grad.default, (x, dy, 0.01)),
        "grouped_counts": (ops.grouped_bias_add_grad.default, (gy, counts, 1)),
        "softmax": (ops.scaled_masked_softmax_backward.default, (g4, y4, mask, 0.5, False)),
        "gelu_fp32": (ops.gelu_backward_v2.default, (dy, x, "none")),
        "gelu_bf16": (ops.gelu_backward_v2.default, (dy.bfloat16(), x.bfloat16(), "tanh")),
        "prelu_bf16": (ops.prelu_backward.default, (dy.bfloat16(), x.bfloat16(), torch.rand(7).bfloat16())),
    }
    plan = {
        "missing": ["logit_grad", "logit_grad", "grouped_counts"],
        "old_soc": ["softmax", "gelu_fp32", "gelu_bf16", "prelu_bf16", "logit_grad", "logit_grad_captured"],
        "no_fallback": ["logit_grad", "gelu_fp32"],
    }[scenario]
    steps["logit_grad_captured"] = steps["logit_grad"]
    result = []
    for name in plan:
        op, args = steps[name]
        torch.ops.npu_standin.set_capturing(name.endswith("_captured"))
        lib.standin_reset()
        entry = {"step": name}
        try:
            got = op.redispatch(PU1, *args)
            expected = op(*args)
            got, expected = (got, expected) if isinstance(got, tuple) else ((got,), (expected,))
            entry["equal"] = all(torch.equal(a, b) for a, b in zip(got, expected))  # the CPU kernel itself
            entry["close"] = all(torch.allclose(a.float(), b.float(), rtol=2e-2, atol=2e-2, equal_nan=True)
                                 for a, b in zip(got, expected))
        except RuntimeError as e:
            entry["error"] = str(e).splitlines()[0]
        entry["aclnn"] = aclnn_calls()
        sys.stderr.flush()
        try:  # nothing may be left failing in the task queue
            torch.ops.npu_standin.synchronize()
            entry["queue_clean"] = True
        except RuntimeError:
            entry["queue_clean"] = False
        result.append(entry)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
