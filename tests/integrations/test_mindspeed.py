"""torch_ext.megatron under the real MindSpeed (make test-mindspeed: tools/versions.py mindspeed, the pairs of the
release table), in every order a user meets, and the example's GPT trained under MindSpeed on the npu device; each
scenario in a fresh interpreter (tests/support/mindspeed_worker.py), since MindSpeed patches the whole process at import.

* MindSpeed, then patch(): ours in place on every target; unpatch() gives MindSpeed's softmax back.
* patch(), then MindSpeed's adaptor: MindSpeed's softmax wins (status() says so); a second patch() puts ours back,
  and unpatch() then gives MindSpeed's back, never Megatron's over MindSpeed's.
* MindSpeed, patch(), MindSpeed's repatch() (as verl calls it), patch() again: the same.
* At every step: status() true (checked against which module defines each target's object), and
  torch_ext.megatron's own functions untouched by MindSpeed's name scans and ours.
* Training: MindSpeed alone on Megatron's torch path (fusion off) against patch() (fusion on), losses within
  examples/megatron_gpt.py's curves_agree bound; the fake CANN's counters show the npu_ext aclnn operators and
  the acl_op launches of MindSpeed's cross entropy.

Runs only where tools/versions.py set NPU_EXT_MINDSPEED (the pair's branch); skipped elsewhere (make test), and
there a skip is a failure. tests/support/mindspeed_double.py stands in for MindSpeed in make test's tests/integrations/test_megatron.py.
"""

import json
import os
import subprocess
import sys

import pytest

BRANCH = os.environ.get("NPU_EXT_MINDSPEED")
pytestmark = [pytest.mark.mindspeed, pytest.mark.skipif(not BRANCH, reason="not in a MindSpeed pair's venv (make test-mindspeed)")]

import torch_ext.megatron as tm  # noqa: E402

import paths  # noqa: E402
import runner  # noqa: E402

SOFTMAX = "megatron.core.fusions.fused_softmax"
GATE = f"{SOFTMAX}.FusedScaleMaskSoftmax.is_kernel_available"
FORWARD = f"{SOFTMAX}.FusedScaleMaskSoftmax.forward_fused_softmax"
SOFTMAX_TARGETS = (GATE, FORWARD)
BIAS_GELU = "megatron.core.fusions.fused_bias_gelu.bias_gelu_impl"
APPLY_BIAS = "megatron.core.transformer.moe.experts.TEGroupedMLP._apply_bias"
OUR_OPS = {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default"}

_results = {}


def scenario(name):
    """The worker's facts for one scenario (run once per test process)."""
    if name not in _results:
        r = subprocess.run([sys.executable, paths.worker("mindspeed_worker.py"), name], capture_output=True,
                           text=True, timeout=1200, env=runner.env())
        lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
        assert r.returncode == 0 and lines, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
        _results[name] = json.loads(lines[-1][len("RESULT "):])
    return _results[name]


def present(result):
    """The targets this megatron has: TEGroupedMLP._apply_bias from megatron-core 0.15."""
    minor = int(result["megatron"].split(".")[1])
    return [GATE, FORWARD, BIAS_GELU] + ([APPLY_BIAS] if minor >= 15 else [])


def expected(result, *states):
    """status() as it must be: each of `states` maps targets to their state (a later one wins; default Megatron's
    own); the targets this release lacks ABSENT."""
    merged = {t: tm.MEGATRON for t in (GATE, FORWARD, BIAS_GELU, APPLY_BIAS)}
    for s in states:
        merged.update(s)
    have = present(result)
    return {t: merged[t] if t in have else tm.ABSENT for t in merged}


OURS = {t: tm.OURS for t in (GATE, FORWARD, BIAS_GELU, APPLY_BIAS)}
MINDSPEED_SOFTMAX = {t: tm.REPLACED for t in SOFTMAX_TARGETS}


def steps(result):
    by_name = {s["step"]: s for s in result["steps"]}
    for s in result["steps"]:  # no scan, MindSpeed's or ours, rebinds torch_ext.megatron's own functions
        assert s["own_untouched"], s
    return by_name


def check_ours_ran(result):
    run = result["ours_ran"]
    assert OUR_OPS <= set(run["ops"]), run
    assert run["launches"].get("aclnnScaledMaskedSoftmaxBackward", 0) >= 1, run  # our NPU path, not a CPU fallback


def test_the_pair():
    """The venv holds the pair of the release table (its mindspeed entry): MindSpeed from its checkout, Megatron-LM's
    sources of the pair's release, the pair's torch_npu, and no megatron-core wheel."""
    from torch_ext import _releases

    pair = next(p for p in _releases.load()["mindspeed"] if p["branch"] == BRANCH)
    result = scenario("mindspeed_then_ours")
    assert result["megatron"].split("+")[0] == pair["megatron_lm"], result["megatron"]
    assert os.sep + os.path.join("build", "mindspeed", BRANCH, "mindspeed") in result["mindspeed"], result
    assert result["torch_npu"].startswith(pair["torch_npu"]), result["torch_npu"]
    import importlib.metadata

    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("megatron-core")


def test_mindspeed_then_ours():
    """The documented order: ours in place on every target after patch(); a second patch() changes nothing;
    unpatch() gives back MindSpeed's softmax and Megatron's bias-GELU."""
    result = scenario("mindspeed_then_ours")
    s = steps(result)
    assert s["mindspeed"]["status"] == expected(result, MINDSPEED_SOFTMAX)
    assert s["mindspeed"]["whose"] == {GATE: "mindspeed", FORWARD: "mindspeed", BIAS_GELU: "megatron"}
    assert s["patch"]["returned"] == present(result)
    assert s["patch"]["status"] == expected(result, OURS)
    assert s["patch"]["whose"] == {GATE: "ours", FORWARD: "ours", BIAS_GELU: "ours"}
    assert s["patch again"]["returned"] == present(result)
    check_ours_ran(result)
    assert s["unpatch"]["status"] == expected(result, MINDSPEED_SOFTMAX)
    assert s["unpatch"]["whose"] == s["mindspeed"]["whose"]


def test_ours_then_mindspeed():
    """patch() before MindSpeed's adaptor: MindSpeed's softmax wins and status() says so, the bias-GELU stays ours;
    a second patch() puts ours back; unpatch() then gives MindSpeed's softmax back (what our latest replacement
    found), never Megatron's (what the first one found)."""
    result = scenario("ours_then_mindspeed")
    s = steps(result)
    assert s["patch"]["status"] == expected(result, OURS)
    assert s["mindspeed"]["status"] == expected(result, OURS, MINDSPEED_SOFTMAX)
    assert s["mindspeed"]["whose"] == {GATE: "mindspeed", FORWARD: "mindspeed", BIAS_GELU: "ours"}
    assert s["patch again"]["returned"] == present(result)
    assert s["patch again"]["status"] == expected(result, OURS)
    check_ours_ran(result)
    assert s["unpatch"]["status"] == expected(result, MINDSPEED_SOFTMAX)
    assert s["unpatch"]["whose"] == {GATE: "mindspeed", FORWARD: "mindspeed", BIAS_GELU: "megatron"}


def test_repatch_then_patch_again():
    """MindSpeed, patch(), MindSpeed's repatch(), patch() again: the repatch puts MindSpeed's softmax over ours
    (status() says so), the second patch() puts ours back on every target, unpatch() gives MindSpeed's back."""
    result = scenario("repatch")
    s = steps(result)
    assert s["patch"]["status"] == expected(result, OURS)
    assert s["repatch"]["status"] == expected(result, OURS, MINDSPEED_SOFTMAX)
    assert s["repatch"]["whose"] == {GATE: "mindspeed", FORWARD: "mindspeed", BIAS_GELU: "ours"}
    assert s["patch again"]["returned"] == present(result)
    assert s["patch again"]["status"] == expected(result, OURS)
    assert s["patch again"]["whose"] == {GATE: "ours", FORWARD: "ours", BIAS_GELU: "ours"}
    check_ours_ran(result)
    assert s["unpatch"]["status"] == expected(result, MINDSPEED_SOFTMAX)
    assert s["unpatch"]["whose"] == {GATE: "mindspeed", FORWARD: "mindspeed", BIAS_GELU: "megatron"}


def test_gpt_trains_under_mindspeed_on_npu():
    """examples/megatron_gpt.py's GPT on the npu device with MindSpeed's adaptor applied: through patch() its losses
    agree with MindSpeed alone on Megatron's torch path, the npu_ext operators ran as aclnn operators, and
    MindSpeed's cross entropy (``masked_target *= ~target_mask``) ran in both: the fake CANN has no
    aclnnBitwiseNot, so op-plugin's fallback sends ``~`` to the acl_op LogicalNot, as on a CANN without that
    operator (a real CANN 8 has it: there ``~`` stays on aclnn; tests/npu/test_npu_acl_op.py)."""
    result = scenario("train")
    print(json.dumps(result, indent=1))  # the curves and the counters, for the notes (pytest -s)
    base, ours = result["base"], result["ours"]
    assert base[-1] < base[0] - 0.1 and ours[-1] < ours[0] - 0.1  # both learn
    assert result["agree"], (base, ours)
    assert not result["agree_off_by_3_percent"]  # the comparison can fail
    assert result["status"] == expected(result, OURS)
    assert {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default",
            "npu_ext.gelu.default", "npu_ext.gelu_backward_v2.default"} <= set(result["ops"]), result["ops"]
    for api in ("aclnnScaledMaskedSoftmaxBackward", "aclnnGeluBackwardV2"):
        assert result["launches_ours"].get(api, 0) >= 1 and api not in result["launches_base"], (api, result)
    for launches in (result["launches_base"], result["launches_ours"]):
        assert launches.get("acl_op LogicalNot", 0) >= 1, launches
