"""Runs one capability scenario of the NPU path in a fresh process (tests/support/npu_backend.py: inside the real torch_npu
on the fake CANN, or against the stand-in under the aarch64 emulation).

Capabilities (entry points, SoC, and the one-time kernel probe of each entry point) are found once per
process, so each machine configuration gets its own process: tests/npu/test_npu_path_machine.py runs
``python npu_path_scenarios.py <scenario>`` with the environment of that machine (NPU_FAKE_SOC, NPU_FAKE_NO_KERNEL,
NPU_EXT_NO_CPU_FALLBACK; a CANN without some entry points: LD_LIBRARY_PATH or NPU_EXT_STANDIN_MISSING) and reads one
JSON object from the last line of stdout: for every step, whether the NPU kernel's result equals the CPU kernel's (bitwise, NaN
positions included), the error message it raised, the aclnn entry points it called (a first call includes
the probe's) and, for small results, the NPU's values; then the status report (a last step "status"). The
fallback warnings (TORCH_WARN) go to stderr, every one shown (the stand-in's OpOverload.redispatch prints them
there; in the real runtime they are Python warnings).
"""

import json
import math
import sys
import warnings

import torch

import torch_ext  # noqa: F401  (the npu_ext schemas and CPU kernels)

import npu_backend  # tests/support is sys.path[0]: this script's folder
from torch_ext.testing import samples

ops = torch.ops.npu_ext


def main(scenario):
    backend_class, why_not = npu_backend.which()
    assert backend_class is not None, why_not
    backend = backend_class()
    warnings.simplefilter("always")

    torch.manual_seed(0)
    x = torch.rand(5, 7)
    dy = torch.randn(5, 7)
    gy = torch.randn(10, 4)
    counts = torch.tensor([3, 0, 7])
    g4, y4 = torch.randn(1, 2, 3, 8), torch.softmax(torch.randn(1, 2, 3, 8), -1)
    mask = torch.rand(1, 2, 3, 8) < 0.3
    x_nan = x.clone()
    x_nan[0, :3] = torch.tensor([math.nan, -0.5, 1.5])
    prelu_cases = {c[0]: tuple(torch.tensor(v, dtype=c[1]) for v in (c[3], c[2], c[4]))
                   for c in samples.PRELU_DEVICE_CASES}
    steps = {
        "logit_grad": (ops.logit_grad.default, (x, dy, 0.01)),
        "logit_nan": (ops.logit_grad.default, (x_nan, dy, 0.0)),
        "grouped_counts": (ops.grouped_bias_add_grad.default, (gy, counts, 1)),
        "grouped_ends": (ops.grouped_bias_add_grad.default, (gy, counts.cumsum(0), 0)),
        "prelu_fp32": (ops.prelu_backward.default, (dy, x - 0.5, torch.rand(7))),
        "prelu_inf_grad_output": (ops.prelu_backward.default, prelu_cases["inf_grad_output"]),
        "prelu_fp16_overflow": (ops.prelu_backward.default, prelu_cases["fp16_grad_input_overflow"]),
        "prelu_bf16_rounding": (ops.prelu_backward.default, prelu_cases["bf16_term_rounding"]),
        "prelu_fp16_rounding": (ops.prelu_backward.default, prelu_cases["fp16_term_rounding"]),
        "softmax": (ops.scaled_masked_softmax_backward.default, (g4, y4, mask, 0.5, False)),
        "gelu_fp32": (ops.gelu_backward_v2.default, (dy, x, "none")),
        "gelu_bf16": (ops.gelu_backward_v2.default, (dy.bfloat16(), x.bfloat16(), "tanh")),
        "prelu_bf16": (ops.prelu_backward.default, (dy.bfloat16(), x.bfloat16(), torch.rand(7).bfloat16())),
    }
    plan = {
        "missing": ["logit_grad", "logit_grad", "grouped_counts", "logit_grad_captured"],
        "old_soc": ["softmax", "gelu_fp32", "gelu_bf16", "prelu_bf16", "logit_grad"],
        "no_fallback": ["logit_grad", "gelu_fp32"],
        # an Ascend950 with a CANN whose op package has no Ascend950 kernel for some operators
        "no_kernel": ["logit_grad", "logit_grad", "grouped_counts", "grouped_ends", "softmax", "gelu_fp32"],
        "no_kernel_strict": ["logit_grad", "grouped_ends", "softmax"],
        # every operator on an Ascend950 (both names of the chip): the kernels as they are there
        "ascend950": ["softmax", "logit_grad", "logit_nan", "grouped_counts", "grouped_ends", "gelu_bf16",
                      "prelu_bf16", "prelu_fp32", "prelu_bf16_rounding", "prelu_fp16_rounding",
                      "prelu_inf_grad_output", "prelu_fp16_overflow"],
        # the probe needs the host: not during a graph capture; afterwards it runs
        "probe_captured": ["logit_grad_captured", "logit_grad"],
    }[scenario]
    steps["logit_grad_captured"] = steps["logit_grad"]
    result = []
    for name in plan:
        op, args = steps[name]
        captured = name.endswith("_captured")
        if captured:
            backend.set_capturing(True)
        backend.reset()
        entry = {"step": name}
        try:
            try:
                got = backend.npu(op, *args)
            finally:
                if captured:
                    backend.set_capturing(False)
            expected = op(*args)
            got, expected = (got, expected) if isinstance(got, tuple) else ((got,), (expected,))
            # the CPU kernel itself: equal values, NaN where it has NaN
            entry["equal"] = all(torch.equal(a.isnan(), b.isnan()) and torch.equal(a[~a.isnan()], b[~b.isnan()])
                                 for a, b in zip(got, expected))
            entry["close"] = all(torch.allclose(a.float(), b.float(), rtol=2e-2, atol=2e-2, equal_nan=True)
                                 for a, b in zip(got, expected))
            if all(t.numel() <= 4 for t in got):
                entry["got"] = [t.float().reshape(-1).tolist() for t in got]
        except RuntimeError as e:
            entry["error"] = str(e).splitlines()[0]
        entry["aclnn"] = backend.aclnn_calls()
        sys.stderr.flush()
        try:  # nothing may be left failing in the task queue
            backend.synchronize()
            entry["queue_clean"] = True
        except RuntimeError:
            entry["queue_clean"] = False
        result.append(entry)
    # what python -m torch_ext reports after these calls (npu_ext::_npu_status)
    result.append({"step": "status", "text": torch.ops.npu_ext._npu_status()})
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
