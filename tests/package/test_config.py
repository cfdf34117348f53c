"""torch_ext.show_config() / python -m torch_ext on the CPU (the NPU report is tested inside the real torch_npu
runtime in tests/npu/test_npu_path.py), and python -m torch_ext --check / torch_ext.check() without an NPU: the exit status,
the comparison and the sample set on the CPU (the check on the NPU path: tests/npu/test_npu_check.py)."""

import importlib.util
import math
import os
import re
import subprocess
import sys

import pytest
import torch

import torch_ext
from torch_ext import _check, _variants


def test_show_config_on_the_cpu(monkeypatch):
    monkeypatch.setenv("NPU_EXT_NO_CPU_FALLBACK", "1")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    text = torch_ext.show_config()
    lines = text.splitlines()
    assert lines[0].startswith(f"torch_ext {torch_ext.__version__} (")
    assert f"torch {torch.__version__}" in lines[1]
    in_use = torch.ops.npu_ext._cpu_capability()
    runnable = ", ".join(v.upper() for v in _variants.cpu_variants())
    assert f"CPU kernel variant: {in_use} (this build and CPU: {runnable}; " in text
    assert f"threads: {torch.get_num_threads()} " in text
    if not torch_ext._npu.LOADED:
        # the aarch64 emulation's NPU tests load the host stand-in of aclnn into the process, and say so
        standin = getattr(torch.ops.npu_ext, "_npu_status", None) is not None
        said = "NPU kernels: torch_ext._C_npu not loaded (" if standin else "NPU kernels: not loaded ("
        assert said in text and torch_ext._npu.why_not_loaded() in text
    assert "  NPU_EXT_NO_CPU_FALLBACK=1  - " in text
    assert "  OMP_NUM_THREADS=(unset)  - " in text
    assert "  THP_MEM_ALLOC_ENABLE=" in text
    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    mode = open(thp).read().split("[")[1].split("]")[0] if os.path.exists(thp) else "unknown"
    assert f"transparent huge pages: {mode} (kernel)" in lines
    assert "megatron-core" in text


@pytest.mark.subprocess
def test_python_m_torch_ext_prints_it(tmp_path):
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default", NPU_EXT_LOAD_NPU="0")
    # cwd: not the repository, whose torch_ext/ (sys.path[0] under -m) may not be the installed package
    r = subprocess.run([sys.executable, "-m", "torch_ext"], capture_output=True, text=True, env=env, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"torch_ext {torch_ext.__version__}")
    assert "CPU kernel variant: DEFAULT (" in r.stdout  # the forced variant is the one reported
    assert "NPU kernels: not loaded (NPU_EXT_LOAD_NPU=0)" in r.stdout
    assert "  ATEN_CPU_CAPABILITY=default  - " in r.stdout
    assert r.stdout.splitlines()[-1].startswith("  THP_MEM_ALLOC_ENABLE=")  # the report alone: no check ran


# ---------------------------------------------------------------------------------------------------------------
# python -m torch_ext --check without an NPU.
@pytest.mark.subprocess
@pytest.mark.arch_independent  # the report's opening and the exit status only (a python under emulation: a minute)
def test_check_without_an_npu_exits_2(tmp_path):
    if importlib.util.find_spec("torch_npu") is None:  # this venv: the natural reason
        env, reason = {k: v for k, v in os.environ.items() if k != "NPU_EXT_LOAD_NPU"}, "torch_npu is not installed"
    else:
        env, reason = dict(os.environ, NPU_EXT_LOAD_NPU="0"), "NPU_EXT_LOAD_NPU=0"
    r = subprocess.run([sys.executable, "-m", "torch_ext", "--check"], capture_output=True, text=True, env=env,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert lines[0] == "torch_ext --check: npu results compared with the CPU kernels on the same inputs"
    assert lines[1].startswith(f"torch_ext {torch_ext.__version__} (") and f"torch {torch.__version__}," in lines[1]
    assert f"NPU kernels: not loaded ({reason})" in lines
    assert lines[-1] == f"check: not run: the NPU kernels are not loaded ({reason})"
    assert not any(line.startswith(("ok ", "MISMATCH ", "ERROR ")) for line in lines)


def test_check_in_process_without_an_npu():
    if torch_ext._npu.LOADED:
        return  # an NPU build: tests/npu/test_npu_check.py runs the check there
    result = torch_ext.check()
    assert result.exit_code == 2 and result.cases == []
    assert result.not_run == f"the NPU kernels are not loaded ({torch_ext._npu.why_not_loaded()})"
    assert result.report.splitlines()[-1] == f"check: not run: {result.not_run}"
    if importlib.util.find_spec("torch_npu") is None:
        assert "torch_npu" not in sys.modules  # never imported when it is not installed


def test_compare_flags_a_wrong_result():
    expected = torch.tensor([[0.5, 1.0, -2.0], [4.0, 0.25, 8.0]])
    assert _check.compare(expected.clone(), expected) is None
    wrong = expected.clone()
    wrong[1, 2] = 8.5
    assert _check.compare(wrong, expected) == ("1 of 6 elements differ; max abs err 0.5, max rel err 0.0625 (over "
                                               "finite elements); first at [1, 2]: 8.5 instead of 8.0")
    wrong[0, 1] = 0.0
    assert _check.compare(wrong, expected).startswith("2 of 6 elements differ; max abs err 1, max rel err 1 ")
    assert "first at [0, 1]: 0.0 instead of 1.0" in _check.compare(wrong, expected)
    off_zero = _check.compare(torch.tensor([1e-3]), torch.tensor([0.0]))  # beyond atol: a relative error of inf
    assert off_zero.startswith("1 of 1 elements differ; max abs err 0.001, max rel err inf ")


def test_compare_tolerance_per_dtype():
    one_ulp_fp16 = torch.tensor([1.0, 1.0 + 2**-10])  # a relative error of 9.8e-4
    reference = torch.tensor([1.0, 1.0])
    assert _check.compare(one_ulp_fp16, reference) is not None  # fp32: 1e-4
    assert _check.compare(one_ulp_fp16.half(), reference.half()) is None  # fp16: 2e-3
    assert _check.compare(torch.tensor([1.00005]), torch.tensor([1.0])) is None
    bf16 = torch.tensor([1.0, 1.0 + 2**-7], dtype=torch.bfloat16)  # 1 ulp passes (tolerance 0.032 at 1), 2^-4 not
    assert _check.compare(bf16, torch.ones(2, dtype=torch.bfloat16)) is None
    assert _check.compare(bf16 + 2**-4, torch.ones(2, dtype=torch.bfloat16)) is not None


def test_compare_nan_and_inf_positions():
    nan, inf = math.nan, math.inf
    assert _check.compare(torch.tensor([nan, inf, -inf, 1.0]), torch.tensor([nan, inf, -inf, 1.0])) is None
    assert _check.compare(torch.tensor([nan, 1.0]), torch.tensor([1.0, 1.0])) == (
        "1 of 2 elements differ, all at NaN/inf positions; first at [0]: nan instead of 1.0")
    assert _check.compare(torch.tensor([1.0, 1.0]), torch.tensor([1.0, nan])) == (
        "1 of 2 elements differ, all at NaN/inf positions; first at [1]: 1.0 instead of nan")
    assert _check.compare(torch.tensor([-inf, 3.0]), torch.tensor([inf, 2.0])) == (
        "2 of 2 elements differ (1 at NaN/inf positions); max abs err 1, max rel err 0.5 (over finite elements); "
        "first at [0]: -inf instead of inf")


def test_compare_dtype_and_shape():
    assert _check.compare(torch.zeros(2, dtype=torch.float16), torch.zeros(2)) == (
        "dtype torch.float16 instead of torch.float32")
    assert _check.compare(torch.zeros(2, 3), torch.zeros(3, 2)) == "shape [2, 3] instead of [3, 2]"


def _special_prelu_case():
    return next(c for c in _check.cases() if c.name.startswith("special values: prelu_backward"))


def test_run_case_compares_an_ascend950_with_its_documented_values():
    """On an Ascend950 the device's prelu special values are compared with written-out ones; the CPU kernel's
    results (A2/A3 semantics) stand in for a wrong device result there, and must be a MISMATCH."""
    case = _special_prelu_case()
    assert _check.run_case(case, "cpu", soc="Ascend910B3") == _check.CaseResult(case.name, "ok")
    for soc in ("Ascend950PR_9599", "Ascend910_9579"):
        result = _check.run_case(case, "cpu", soc=soc)
        assert result.status == "MISMATCH"
        assert result.detail.startswith(f"[{soc}: compared with Ascend950's documented values (")
        assert "; 7 of 12 outputs differ from the CPU's] inf grad_output: grad_weight: 1 of 1 elements differ, all " \
               "at NaN/inf positions; first at [0]: nan instead of -1.0; " in result.detail
        assert result.detail.endswith("; and 4 more outputs")


def test_run_case_mismatch_and_errors():
    calls = []

    def wrong_second_time(x):  # run_case calls run on the CPU (the reference) first, then on the device
        calls.append(x.device)
        return [("out", x * 2 if len(calls) == 1 else x * 2 + (x > 0.75))]

    def raises(x):
        raise ValueError("first line\nsecond line")

    make = lambda gen: (torch.rand(4, 8, generator=gen),)  # noqa: E731
    result = _check.run_case(_check.Case("wrong", make, wrong_second_time), "cpu")
    assert result.status == "MISMATCH" and result.detail.startswith("out: ") and " elements differ; " in result.detail
    assert len(calls) == 2
    result = _check.run_case(_check.Case("raises", make, raises), "cpu")
    assert result == _check.CaseResult("raises", "ERROR", "on the CPU (the reference): ValueError: first line")
    assert result.line() == "ERROR    raises: on the CPU (the reference): ValueError: first line"


def test_the_sample_set_on_the_cpu():
    """check(device="cpu") compares the CPU with itself: every case of the sample set builds and runs."""
    result = torch_ext.check("cpu")
    names = [c.name for c in result.cases]
    assert result.exit_code == 0, result.report
    assert len(names) == len(set(names)) == len(_check.cases())
    for op in ("gelu_backward_v2 approximate=none", "gelu_backward_v2 approximate=tanh", "prelu_backward",
               "grouped_bias_add_grad group_idx ends", "grouped_bias_add_grad group_idx counts",
               "grouped_bias_add_grad without group_idx", "scaled_masked_softmax_backward mask",
               "scaled_masked_softmax_backward fix_triu_mask", "logit_grad eps=-1.0", "logit_grad eps=0.0",
               "torch_ext.gelu approximate=none", "torch_ext.gelu approximate=tanh", "torch_ext.prelu",
               "torch_ext.logit", "torch_ext.scaled_masked_softmax", "torch_ext.grouped_bias_add"):
        for dtype in ("float32", "float16", "bfloat16"):
            assert any(n.startswith(op) and n.endswith(dtype) for n in names), (op, dtype)
    assert sum(".out into a" in n for n in names) == 2 and sum(n.startswith("special values") for n in names) == 4
    lines = result.report.splitlines()
    assert lines[-1] == result.summary()
    assert re.fullmatch(rf"check: {len(names)} cases, {len(names)} ok, 0 mismatched, 0 errors on cpu \(\d+\.\d s\)",
                        lines[-1])
    assert not any(re.fullmatch(r"\d+ passed, \d+ failed", line) for line in lines)  # CI's pattern
    assert [line for line in lines if line.startswith("ok ")] == [f"ok       {n}" for n in names]
