"""The NPU path without an NPU (see tests/npu/test_npu_path.py): how a rejected call surfaces, torch_npu's conversion of
the arguments, and the machine's configuration: entry points missing from an older CANN, kernels missing for a SoC,
the CPU fallback and NPU_EXT_NO_CPU_FALLBACK, Ascend950, probing, graph capture and the status report. The scenario
tests each run in their own process (tests/support/npu_path_scenarios.py)."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

import torch_ext

import npu_backend
import paths
from npu_path_common import (  # noqa: F401 (backend: the fixture)
    BACKEND, SKIP, assert_close, backend, logit_inputs, npu, ops, prelu_inputs,
    softmax_inputs)

pytestmark = SKIP


def _exec_npu_cmd_ext_defers_a_rejected_call(backend, monkeypatch):
    """What the NPU path no longer does: torch_npu's EXEC_NPU_CMD_EXT ignores the GetWorkspaceSize status, so a
    call aclnn rejects (here a dy dtype that differs from x's) returns normally; its queued second phase runs
    with a null executor and the 161001 surfaces at a later, unrelated operation. Without the task queue
    (TASK_QUEUE_ENABLE=0) it is reported at the call, still as the misleading 161001."""
    x, dy, out = torch.rand(3), torch.rand(3).half(), torch.empty(3)
    torch.ops.npu_standin.exec_npu_cmd_ext_logit_grad(x, dy, -1.0, out)  # no error here
    with pytest.raises(RuntimeError) as e:
        npu(ops.logit_grad.default, x, x, -1.0)  # an unrelated, valid later call
    assert str(e.value).splitlines()[0] == (
        "npu stand-in task queue: an earlier asynchronous task failed: call aclnnLogitGrad failed, error code is "
        "161001 (reported at this later operation; since the operator is called asynchronously, the stacktrace "
        "may be inaccurate)")
    for level in ["2"]:  # V2: both phases queued
        monkeypatch.setenv("TASK_QUEUE_ENABLE", level)
        torch.ops.npu_standin.exec_npu_cmd_ext_logit_grad(x, dy, -1.0, out)
        with pytest.raises(RuntimeError, match="error code is 161001"):
            backend.synchronize()
    monkeypatch.setenv("TASK_QUEUE_ENABLE", "0")
    with pytest.raises(RuntimeError, match="^call aclnnLogitGrad failed, error code is 161001"):
        torch.ops.npu_standin.exec_npu_cmd_ext_logit_grad(x, dy, -1.0, out)


if BACKEND is npu_backend.Standin:  # the stand-in's own EXEC_NPU_CMD_EXT (the real one has no test hook)
    test_exec_npu_cmd_ext_defers_a_rejected_call = _exec_npu_cmd_ext_defers_a_rejected_call


def test_formats_as_torch_npu_converts_them(backend):
    """torch_npu's ConvertType passes a base-format tensor as NCL (3-D), NCHW (4-D), NCDHW (5-D), ND otherwise."""
    backend.reset()
    g, x, w = prelu_inputs(torch.float32)  # 3-D self and grad_output, 1-D weight
    npu(ops.prelu_backward.default, g, x, w)
    sg, sy, smask = softmax_inputs(torch.float32)
    npu(ops.scaled_masked_softmax_backward.default, sg, sy, smask, 1.0, False)
    g5 = torch.randn(2, 1, 3, 2, 4)
    npu(ops.gelu_backward_v2.default, g5, g5, "none")
    formats = {key: backend.calls(key) for key in
               [f"format {code} rank {rank}" for code in (0, 2, 30, 47) for rank in (1, 3, 4, 5)]}
    assert {k: v for k, v in formats.items() if v} == {
        "format 47 rank 3": 3, "format 2 rank 1": 2, "format 0 rank 4": 4, "format 30 rank 5": 3}


def run_scenario(scenario, missing=None, **env):
    """(steps by name, a repeated step as "<name>#2"; the fallback warnings, from stderr). `missing`: aclnn entry
    points this CANN lacks (comma-separated): the fake CANN's libopapi.so linked without them, put first on
    LD_LIBRARY_PATH (tests/fake_cann/build.py --without), or the stand-in's NPU_EXT_STANDIN_MISSING."""
    script = paths.worker("npu_path_scenarios.py")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NPU_FAKE_", "NPU_EXT_NO_CPU"))}
    full_env.update(env)
    if missing and BACKEND is npu_backend.Standin:
        full_env["NPU_EXT_STANDIN_MISSING"] = missing
    elif missing:
        build = paths.FAKE_CANN_BUILD
        lib = subprocess.run([sys.executable, build, "--without", missing], check=True, capture_output=True,
                             text=True).stdout.splitlines()[-1]
        full_env["LD_LIBRARY_PATH"] = lib + os.pathsep + os.environ["LD_LIBRARY_PATH"]
    proc = subprocess.run([sys.executable, script, scenario], env=full_env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = {}
    for step in json.loads(proc.stdout.splitlines()[-1]):
        steps[step["step"] + ("#2" if step["step"] in steps else "")] = step
    warnings = [line.split("Warning: ", 1)[1].rsplit(" (function ", 1)[0]
                for line in proc.stderr.splitlines() if "Warning: npu_ext." in line]
    return steps, warnings


def fallback_warning(op, reason):
    return (f"npu_ext.{op}: {reason}; running the CPU kernel on host copies instead (slow; warned once per "
            "operator; NPU_EXT_NO_CPU_FALLBACK=1 makes this an error)")


OLD_SOC = ("has no kernel for this SoC (Ascend910A; it needs an Atlas A2/A3 (Ascend910B*, Ascend910_93*) or Ascend950 "
           "(Ascend950*, Ascend910_95*))")


def no_kernel(api, soc, phase, status):
    """The reason a probe gives when the CANN has the entry point but no kernel for the SoC."""
    where = f"{api}GetWorkspaceSize" if phase == 1 else f"{api}'s launch"
    name = {561003: "ACLNN_ERR_INNER_FIND_KERNEL_ERROR", 561000: "ACLNN_ERR_INNER"}[status]
    return (f"{api} has no kernel for this SoC ({soc}) in the installed CANN (a one-time probe call failed in "
            f"{where} with status {status}, {name})")


@pytest.mark.arch_independent
def test_missing_entry_points_fall_back(backend):
    """A CANN without aclnnLogitGrad: the CPU kernel on host copies, one warning. Without
    aclnnGroupedBiasAddGradV2 (CANN < 8.5): counts become cumulative ends for aclnnGroupedBiasAddGrad."""
    steps, warnings = run_scenario("missing", missing="aclnnLogitGrad,aclnnGroupedBiasAddGradV2")
    assert warnings == [fallback_warning("logit_grad", "aclnnLogitGrad is not in this CANN's operator libraries "
                                                      "(aclnnLogitGradGetWorkspaceSize not found)")]  # once
    for name in ["logit_grad", "logit_grad#2"]:
        assert steps[name] == dict(step="logit_grad", equal=True, close=True, aclnn={}, queue_clean=True)
    grouped = steps["grouped_counts"]  # aclnnGroupedBiasAddGrad probed (2 calls), then called (2)
    assert grouped["close"] and grouped["aclnn"] == {"aclnnGroupedBiasAddGrad": 4}
    assert steps["logit_grad_captured"]["error"] == (  # the fallback's host copies cannot be captured
        "npu_ext.logit_grad: the CPU fallback (aclnnLogitGrad is not in this CANN's operator libraries "
        "(aclnnLogitGradGetWorkspaceSize not found)) needs the host, which is not possible while the NPU stream is "
        "being captured into a graph (aclgraph, torch.compile mode=\"reduce-overhead\"): call it outside the captured "
        "region")


FEATURE_LIB_SCRIPT = r"""
import ctypes, json, sys, torch, torch_npu, torch_ext
x, dy = torch.rand(4, 8) * 0.9 + 0.05, torch.randn(4, 8)
got = torch.ops.npu_ext.logit_grad(x.to("npu"), dy.to("npu"), 0.1).cpu()
feature = ctypes.CDLL(sys.argv[1])
feature.fake_opapi_calls.restype = ctypes.c_int
print(json.dumps({"equal": torch.equal(got, torch.ops.npu_ext.logit_grad(x, dy, 0.1)),
                  "calls": feature.fake_opapi_calls(b"aclnnLogitGradGetWorkspaceSize")}))
"""


def test_operators_outside_libopapi_are_found(backend, tmp_path):
    """A CANN whose aclnnLogitGrad lives in an aclnn feature library (libaclnn_ops_train.so), not in libopapi.so:
    op-plugin's GetOpApiFuncAddr searches the feature libraries after libopapi.so (branch 6.0.0 for torch_npu 2.6,
    where csrc/core/npu/torch_npu_compat.cpp searches the same list itself, and every later branch), so the operator is
    found and runs on the device (NPU_EXT_NO_CPU_FALLBACK=1: a fallback would be an error)."""
    if backend.name != "fake_cann":
        return  # the stand-in has no library search (tools/aarch64/run.sh does not run this test)
    build = paths.FAKE_CANN_BUILD
    without = subprocess.run([sys.executable, build, "--without", "aclnnLogitGrad"], check=True, capture_output=True,
                             text=True).stdout.splitlines()[-1]
    full = subprocess.run([sys.executable, build], check=True, capture_output=True, text=True).stdout.splitlines()[-1]
    feature = tmp_path / "libaclnn_ops_train.so"
    feature.write_bytes((open(os.path.join(full, "libopapi.so"), "rb").read()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NPU_FAKE_", "NPU_EXT_NO_CPU"))}
    env.update(NPU_EXT_NO_CPU_FALLBACK="1",
               LD_LIBRARY_PATH=os.pathsep.join([without, str(tmp_path), os.environ["LD_LIBRARY_PATH"]]))
    proc = subprocess.run([sys.executable, "-c", FEATURE_LIB_SCRIPT, str(feature)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result == {"equal": True, "calls": 2}  # the probe and the call, in the feature library


@pytest.mark.arch_independent
def test_old_soc_falls_back_or_raises_at_the_call(backend):
    """An Ascend910A (before A2): the A2/A3-only operators fall back to the CPU; GeluBackwardV2 and PreluBackward
    run there but reject bf16, which is raised at the call with aclnn's status and reason (nothing queued)."""
    steps, warnings = run_scenario("old_soc", NPU_FAKE_SOC="Ascend910A")
    assert warnings == [fallback_warning("scaled_masked_softmax_backward", "aclnnScaledMaskedSoftmaxBackward " + OLD_SOC),
                        fallback_warning("logit_grad", "aclnnLogitGrad " + OLD_SOC)]
    assert steps["softmax"] == dict(step="softmax", equal=True, close=True, aclnn={}, queue_clean=True)
    assert steps["logit_grad"] == dict(step="logit_grad", equal=True, close=True, aclnn={}, queue_clean=True)
    # GeluBackwardV2 and PreluBackward run there: their first call probes them (2 calls: both phases)
    assert steps["gelu_fp32"]["close"] and steps["gelu_fp32"]["aclnn"] == {"aclnnGeluBackwardV2": 4}
    assert steps["gelu_bf16"] == dict(
        step="gelu_bf16", aclnn={"aclnnGeluBackwardV2": 1}, queue_clean=True,
        error="npu_ext.gelu_backward_v2: aclnnGeluBackwardV2GetWorkspaceSize rejected the call with status 161002 "
              "(ACLNN_ERR_PARAM_INVALID); nothing was queued. aclnn says: Input dtype of gelu is not support "
              "bfloat16 in current socversion.")
    assert steps["prelu_bf16"] == dict(
        step="prelu_bf16", aclnn={"aclnnPreluBackward": 3}, queue_clean=True,
        error="npu_ext.prelu_backward: aclnnPreluBackwardGetWorkspaceSize rejected the call with status 161002 "
              "(ACLNN_ERR_PARAM_INVALID); nothing was queued. aclnn says: self dtype BFLOAT16 not in the dtype "
              "support list of this SoC (FLOAT, FLOAT16).")


@pytest.mark.arch_independent
def test_no_cpu_fallback_switch(backend):
    steps, warnings = run_scenario("no_fallback", missing="aclnnLogitGrad",
                                   NPU_EXT_NO_CPU_FALLBACK="1")
    assert warnings == []
    assert steps["logit_grad"] == dict(step="logit_grad", aclnn={}, queue_clean=True, error=(
        "npu_ext.logit_grad: aclnnLogitGrad is not in this CANN's operator libraries (aclnnLogitGradGetWorkspaceSize "
        "not found), and NPU_EXT_NO_CPU_FALLBACK=1 forbids running it on the CPU instead"))
    assert steps["gelu_fp32"]["close"]  # available operators are unaffected


ASCEND950 = "Ascend950PR_9579"


@pytest.mark.arch_independent
@pytest.mark.ascend950
def test_soc_without_the_kernel_falls_back(backend):
    """An Ascend950 whose CANN has aclnnLogitGrad and aclnnGroupedBiasAddGrad(V2) but no Ascend950 kernel for them
    (configs added in 2026-02 / 2026-03): the first call probes each entry point once, LogitGrad fails its phase 1
    with 561003, GroupedBiasAddGrad passes phase 1 and fails its launch with 561000 (the output unwritten, the
    failure reported later by the task queue); both then run on the CPU with one warning per operator, and
    nothing is left failing in the queue. Operators with a kernel are unaffected."""
    steps, warnings = run_scenario("no_kernel", NPU_FAKE_SOC=ASCEND950,
                                   NPU_FAKE_NO_KERNEL="LogitGrad,GroupedBiasAddGrad")
    assert warnings == [
        fallback_warning("logit_grad", no_kernel("aclnnLogitGrad", ASCEND950, 1, 561003)),
        fallback_warning("grouped_bias_add_grad", no_kernel("aclnnGroupedBiasAddGradV2", ASCEND950, 2, 561000)),
    ]
    assert steps["logit_grad"] == dict(step="logit_grad", equal=True, close=True, aclnn={"aclnnLogitGrad": 1},
                                       queue_clean=True)  # the probe's phase 1
    assert steps["logit_grad#2"] == dict(step="logit_grad", equal=True, close=True, aclnn={}, queue_clean=True)
    assert steps["grouped_counts"] == dict(  # both entry points probed (phase 1 and the failing launch)
        step="grouped_counts", equal=True, close=True, queue_clean=True,
        aclnn={"aclnnGroupedBiasAddGradV2": 2, "aclnnGroupedBiasAddGrad": 2})
    assert steps["grouped_ends"] == dict(step="grouped_ends", equal=True, close=True, aclnn={}, queue_clean=True)
    for name, api in [("softmax", "aclnnScaledMaskedSoftmaxBackward"), ("gelu_fp32", "aclnnGeluBackwardV2")]:
        assert steps[name]["close"] and steps[name]["queue_clean"] and steps[name]["aclnn"] == {api: 4}


@pytest.mark.arch_independent
@pytest.mark.ascend950
def test_soc_without_the_kernel_and_no_cpu_fallback(backend):
    steps, warnings = run_scenario("no_kernel_strict", NPU_FAKE_SOC=ASCEND950,
                                   NPU_FAKE_NO_KERNEL="LogitGrad,GroupedBiasAddGrad", NPU_EXT_NO_CPU_FALLBACK="1")
    assert warnings == []
    forbidden = ", and NPU_EXT_NO_CPU_FALLBACK=1 forbids running it on the CPU instead"
    assert steps["logit_grad"] == dict(step="logit_grad", aclnn={"aclnnLogitGrad": 1}, queue_clean=True, error=(
        "npu_ext.logit_grad: " + no_kernel("aclnnLogitGrad", ASCEND950, 1, 561003) + forbidden))
    assert steps["grouped_ends"] == dict(step="grouped_ends", aclnn={"aclnnGroupedBiasAddGrad": 2}, queue_clean=True,
                                         error="npu_ext.grouped_bias_add_grad: " +
                                         no_kernel("aclnnGroupedBiasAddGrad", ASCEND950, 2, 561000) + forbidden)
    assert steps["softmax"]["close"] and steps["softmax"]["aclnn"] == {"aclnnScaledMaskedSoftmaxBackward": 4}


# torch_npu 2.13 rejects the Ascend910_95xx names at its initialisation ("Unsupported soc version"): the real runtime
# runs the current names only; the stand-in also the older ones (soc_family() knows both).
@pytest.mark.ascend950
@pytest.mark.parametrize("soc", [ASCEND950, "Ascend950DT_9591"] + (
    ["Ascend910_9589", "Ascend910_957c"] if BACKEND is npu_backend.Standin else []))
@pytest.mark.arch_independent
def test_ascend950(backend, soc):
    """Ascend950 under its current names and the Ascend910_95xx names of older toolchains: every operator runs on
    the NPU (bf16 prelu included: ASCEND950 lies inside aclnnPreluBackward's ASCEND910B..ASCEND910E range) and
    gives the CPU kernel's results, NaN positions included (logit_grad with NaN x; prelu's grad_weight terms
    rounded to the dtype, as on A2/A3). The one documented difference (docs/operators.md, "Semantics notes"): the Ascend950
    PReluGradUpdate has no dx * 0 term, so an infinite grad_input leaves grad_weight finite there."""
    steps, warnings = run_scenario("ascend950", NPU_FAKE_SOC=soc)
    assert warnings == []
    for name in ["softmax", "logit_grad", "logit_nan", "grouped_counts", "grouped_ends", "gelu_bf16", "prelu_bf16",
                 "prelu_fp32", "prelu_bf16_rounding", "prelu_fp16_rounding"]:
        assert steps[name]["close"] and steps[name]["queue_clean"] and steps[name]["aclnn"], steps[name]
    for name in ["logit_grad", "logit_nan", "prelu_bf16_rounding", "prelu_fp16_rounding"]:
        assert steps[name]["equal"], steps[name]
    assert steps["prelu_bf16_rounding"]["got"] == [[1 + 2**-7, -(1 + 2**-6)], [0.0]]
    # the SoC difference: grad_weight finite on Ascend950, NaN on A2/A3 and on the CPU
    assert not steps["prelu_inf_grad_output"]["equal"]
    assert steps["prelu_inf_grad_output"]["got"] == [[math.inf, 0.25], [-1.0]]
    assert not steps["prelu_fp16_overflow"]["equal"]
    assert steps["prelu_fp16_overflow"]["got"] == [[math.inf], [-300.0]]


@pytest.mark.arch_independent
def test_probe_is_refused_during_graph_capture(backend):
    """The one-time probe synchronises the device: not possible while the stream is captured into a graph, so a
    first call there is a clear error; after a call outside the capture, the operator is captured as usual."""
    steps, warnings = run_scenario("probe_captured")
    assert warnings == []
    assert steps["logit_grad_captured"] == dict(step="logit_grad_captured", aclnn={}, queue_clean=True, error=(
        "npu_ext.logit_grad: the one-time probe of aclnnLogitGrad's kernel on this device needs the host, which is "
        "not possible while the NPU stream is being captured into a graph (aclgraph, torch.compile "
        "mode=\"reduce-overhead\"): call it outside the captured region"))
    assert steps["logit_grad"] == dict(step="logit_grad", equal=True, close=True, aclnn={"aclnnLogitGrad": 4},
                                       queue_clean=True)


def test_each_entry_point_is_probed_once(backend):
    """In this process every entry point was probed by the fixture: later calls make no probe (2 calls each, no
    synchronisation)."""
    syncs = backend.device_syncs()
    backend.reset()
    x = torch.rand(3, 4)
    npu(ops.logit_grad.default, x, x, 0.1)
    npu(ops.grouped_bias_add_grad.default, x, torch.tensor([1, 2]), 1)
    assert backend.aclnn_calls() == {"aclnnLogitGrad": 2, "aclnnGroupedBiasAddGradV2": 2}
    assert backend.device_syncs() == syncs


def test_host_work_is_refused_during_graph_capture(backend):
    """aclgraph (torch.compile mode="reduce-overhead") captures the NPU stream: a host copy of group_idx would
    synchronise it and a replay would not re-validate new values, so it is a clear error; ops without host work
    are captured as usual."""
    gy, idx = torch.randn(10, 4), torch.tensor([3, 3, 10])
    gy3 = torch.randn(3, 4, 5)
    x, dy = logit_inputs(torch.float32)  # before the capture: torch_npu refuses a new seed while capturing
    backend.set_capturing(True)
    try:
        with pytest.raises(RuntimeError) as e:
            npu(ops.grouped_bias_add_grad.default, gy, idx, 0)
        assert str(e.value).splitlines()[0] == (
            "npu_ext.grouped_bias_add_grad: validating group_idx (aclnn checks none of its values) needs the host, "
            "which is not possible while the NPU stream is being captured into a graph (aclgraph, torch.compile "
            "mode=\"reduce-overhead\"): call it outside the captured region")
        assert_close(npu(ops.grouped_bias_add_grad.default, gy3, None, 0), ops.grouped_bias_add_grad(gy3, None, 0))
        assert_close(npu(ops.logit_grad.default, x, dy, -1.0), ops.logit_grad(x, dy, -1.0))
    finally:
        backend.set_capturing(False)
    assert_close(npu(ops.grouped_bias_add_grad.default, gy, idx, 0), ops.grouped_bias_add_grad(gy, idx, 0))


# ----------------------------------------------------------------------------------------------------------
# The status report (npu_ext::_npu_status, shown by python -m torch_ext).
def aclnn_layer():
    """The report's 'aclnn calls:' line for the torch_npu the NPU sources were built against (csrc/core/npu/
    torch_npu_compat.cpp: op-plugin's extension API where its headers ship it; the aarch64 stand-in declares 2.13's
    API)."""
    if BACKEND is npu_backend.FakeCann:
        import importlib.metadata

        major, minor = (int(v) for v in importlib.metadata.version("torch-npu").split(".")[:2])
        release = major * 100 + minor
        extension = npu_backend.op_api_extension()
    else:
        release, extension = 213, True
    if extension and release >= 213:
        return "aclnn calls: torch_npu's op-plugin extension API (executor cache, deterministic level, task queue)"
    if extension:
        return "aclnn calls: torch_npu's op-plugin extension API (executor cache, deterministic setting, task queue)"
    return ("aclnn calls: CANN's C API with torch_npu's task queue (OpCommand::RunOpApiV2; this torch_npu ships no "
            "op-plugin extension API; no executor cache)")


def test_status_report_in_show_config(backend):
    text = torch_ext.show_config()
    assert ("NPU kernels: loaded (torch_ext._C_npu)" if BACKEND is npu_backend.FakeCann
            else "NPU kernels: torch_ext._C_npu not loaded (") in text
    assert f"  SoC: Ascend910B3 (Atlas A2)\n  {aclnn_layer()}\n  CPU fallback: allowed, warned once per operator\n" in text
    for op, api in [("gelu_backward_v2", "aclnnGeluBackwardV2"), ("grouped_bias_add_grad", "aclnnGroupedBiasAddGrad"),
                    ("grouped_bias_add_grad", "aclnnGroupedBiasAddGradV2"), ("logit_grad", "aclnnLogitGrad"),
                    ("prelu_backward", "aclnnPreluBackward"),
                    ("scaled_masked_softmax_backward", "aclnnScaledMaskedSoftmaxBackward")]:
        assert f"\n  {op}: {api} found; " in text, api
    npu(ops.logit_grad.default, torch.rand(3), torch.randn(3), 0.1)  # probes aclnnLogitGrad on this "device"
    assert f"logit_grad: aclnnLogitGrad found; device {backend.device_index}: kernel present, runs on the NPU" in ops._npu_status()


@pytest.mark.arch_independent
@pytest.mark.ascend950
def test_status_report_without_kernels(backend):
    """What a user sees before filing a bug: a missing entry point and a SoC without the kernel, each with the
    reason and '-> CPU fallback'."""
    steps, _ = run_scenario("missing", missing="aclnnLogitGrad,aclnnGroupedBiasAddGradV2")
    status = steps["status"]["text"].splitlines()
    assert ("logit_grad: aclnnLogitGrad: is not in this CANN's operator libraries (aclnnLogitGradGetWorkspaceSize "
            "not found) -> CPU fallback") in status
    assert (f"grouped_bias_add_grad: aclnnGroupedBiasAddGrad found; device {backend.device_index}: kernel present, runs on the NPU"
            in status)
    steps, _ = run_scenario("no_kernel_strict", NPU_FAKE_SOC=ASCEND950,
                            NPU_FAKE_NO_KERNEL="LogitGrad,GroupedBiasAddGrad", NPU_EXT_NO_CPU_FALLBACK="1")
    status = steps["status"]["text"].splitlines()
    assert status[:3] == ["SoC: Ascend950PR_9579 (Ascend950)", aclnn_layer(),
                          "CPU fallback: an error (NPU_EXT_NO_CPU_FALLBACK=1)"]
    assert (f"logit_grad: aclnnLogitGrad found; device {backend.device_index}: " + no_kernel("aclnnLogitGrad", ASCEND950, 1, 561003)
            .split(" ", 1)[1] + " -> CPU fallback") in status
