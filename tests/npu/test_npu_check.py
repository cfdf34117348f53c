"""python -m torch_ext --check inside the real torch_npu runtime: on a real NPU, or on the fake CANN under
`make test-npu NPU_TESTS=tests/npu/test_npu_check.py` (where a skip is a failure). Elsewhere the module is skipped.

The check itself runs in a subprocess, as a user runs it: it must pass on a correct NPU path, fail when the NPU
path gives a wrong result (here: the PrivateUse1 kernel of logit_grad replaced by a wrong one in that process),
and report what the fake CANN is told to be (an Ascend950, a kernel missing) with the right verdict.
"""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

import torch_ext

if importlib.util.find_spec("torch_npu") is None or not torch_ext._npu.LOADED:  # never import torch_npu without it
    pytest.skip(f"needs torch_npu and the NPU kernels ({torch_ext._npu.why_not_loaded()})", allow_module_level=True)

import torch  # noqa: E402

from torch_ext import _check  # noqa: E402

NAMES = [c.name for c in _check.cases()]
ENTRY_POINTS = ["gelu_backward_v2: aclnnGeluBackwardV2", "grouped_bias_add_grad: aclnnGroupedBiasAddGrad",
                "grouped_bias_add_grad: aclnnGroupedBiasAddGradV2", "logit_grad: aclnnLogitGrad",
                "prelu_backward: aclnnPreluBackward",
                "scaled_masked_softmax_backward: aclnnScaledMaskedSoftmaxBackward"]


def run_check(tmp_path, code=None, **env):
    """python -m torch_ext --check (or python -c code) in a fresh process, with env added to this one's."""
    args = ["-c", code] if code else ["-m", "torch_ext", "--check"]
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env=dict(os.environ, **env))


def case_lines(stdout):
    """{case name: (status, detail)} from the report."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"(ok|MISMATCH|ERROR) +(.*)", line)
        if m:
            name = next((n for n in NAMES if m.group(2) == n or m.group(2).startswith(n + ": ")), None)
            assert name is not None, line
            out[name] = (m.group(1), m.group(2)[len(name) + 2:])
    return out


def test_check_passes_on_the_npu(tmp_path):
    r = run_check(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    start = lines.index("torch_ext --check: npu:0 results compared with the CPU kernels on the same inputs")
    here = os.path.dirname(os.path.abspath(torch_ext.__file__))
    assert lines[start + 1].startswith(f"torch_ext {torch_ext.__version__} ({here}), torch {torch.__version__}, "
                                       "torch_npu ")
    assert f"device: npu:0, SoC {torch.npu.get_device_name()}" in lines
    assert "NPU kernels: loaded (torch_ext._C_npu)" in lines
    assert any(line.startswith(f"  SoC: {torch.npu.get_device_name()}") for line in lines)
    for entry in ENTRY_POINTS:  # every aclnn entry point was probed on the device by the check
        assert any(line.startswith(f"  {entry} found; device 0: ") for line in lines), entry
    cases = case_lines(r.stdout)
    assert list(cases) == NAMES
    assert all(status == "ok" for status, _ in cases.values()), r.stdout
    assert lines[-1].startswith(f"check: {len(NAMES)} cases, {len(NAMES)} ok, 0 mismatched, 0 errors on npu:0 (")


WRONG_LOGIT_GRAD = """
import runpy, sys, torch, torch_ext
ops = torch.ops.npu_ext
lib = torch.library.Library("npu_ext", "IMPL")

def wrong(x, dy, eps=-1.0):  # the NPU kernel replaced: right on the CPU, then every finite value off
    return (ops.logit_grad(x.cpu(), dy.cpu(), eps) * 2 + 1).to(x.device)

lib.impl("logit_grad", wrong, "PrivateUse1")
sys.argv = ["torch_ext", "--check"]
runpy.run_module("torch_ext", run_name="__main__")
"""


def test_check_fails_on_a_wrong_npu_result(tmp_path):
    r = run_check(tmp_path, code=WRONG_LOGIT_GRAD)
    assert r.returncode == 1, r.stdout + r.stderr
    cases = case_lines(r.stdout)
    assert list(cases) == NAMES
    # every case that calls the functional logit_grad on the NPU (the .out overload is not replaced)
    wrong = {n for n in NAMES if n.startswith(("logit_grad eps=", "torch_ext.logit ", "special values: logit_grad"))}
    assert len(wrong) == 13
    assert {n for n, (status, _) in cases.items() if status != "ok"} == wrong, r.stdout
    for name in wrong:
        status, detail = cases[name]
        assert status == "MISMATCH" and re.match(r"(dx|dx eps=\S+|grad input): \d+ of \d+ elements differ", detail), \
            (name, detail)
    assert cases["logit_grad eps=0.1 float32"][1].startswith("dx: 248 of 248 elements differ; max abs err ")
    assert r.stdout.splitlines()[-1].startswith(
        f"check: {len(NAMES)} cases, {len(NAMES) - 13} ok, 13 mismatched, 0 errors on npu:0 (")


@pytest.mark.ascend950
def test_check_on_an_ascend950_without_a_logit_grad_kernel(tmp_path):
    """The fake CANN as an Ascend950 whose CANN has no LogitGrad kernel: prelu's special values are the documented
    SoC difference (compared with written-out values, and they differ from the CPU's), logit_grad falls back to
    the CPU and the report says so; the check passes."""
    soc = "Ascend950PR_9599"
    r = run_check(tmp_path, NPU_FAKE_SOC=soc, NPU_FAKE_NO_KERNEL="LogitGrad")
    if f"device: npu:0, SoC {soc}" not in r.stdout:
        pytest.skip("NPU_FAKE_SOC is the fake CANN's: this runtime ignores it")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert f"  SoC: {soc} (Ascend950)" in lines
    assert any(line.startswith("  logit_grad: aclnnLogitGrad found; device 0: has no kernel for this SoC")
               and line.endswith("-> CPU fallback") for line in lines), r.stdout
    assert "  prelu_backward: aclnnPreluBackward found; device 0: kernel present, runs on the NPU" in lines
    cases = case_lines(r.stdout)
    assert all(status == "ok" for status, _ in cases.values()), r.stdout
    prelu = next(n for n in NAMES if n.startswith("special values: prelu_backward"))
    assert cases[prelu][1].startswith(f"[{soc}: compared with Ascend950's documented values (")
    assert cases[prelu][1].endswith("; 7 of 12 outputs differ from the CPU's]")
