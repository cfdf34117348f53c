"""TASK_QUEUE_ENABLE=2 as op-plugin runs it, in the real torch_npu runtime on the fake CANN (make test-npu, every
release row of make test-versions).

With 2, torch_npu's own operators take op-plugin's EXEC_NPU_CMD_V2(_EXT) (op_plugin/utils/op_api_common_base.h): the
calling thread copies the arguments and queues one task, which looks the call up in the executor cache
(SetPTACacheHashKey, PTAFindExecCache), runs phase 1 and launches, on the task queue's thread. So does the
extension where torch_npu ships op-plugin's extension API (csrc/core/npu/torch_npu_compat.h, queue_aclnn_v2); which
functions ran, and on which thread, is in tests/npu/test_npu_cache.py (test_task_queue_levels). Here: a call aclnn
rejects. Its phase 1 runs in the task, so the call returns, and the rejection surfaces at the next synchronisation,
as it does for torch_npu's own operators in this mode: torch_npu's error names the aclnn operator and carries
aclnn's reason, and its log has the extension's own message naming the npu_ext operator. Nothing is launched and
everything the task made is released. (After such an inner error torch_npu says "the process exits for this inner
error": what its queue runs next is not defined, for its own operators too (measured here: a later x * 2 read
zeros), so nothing after it is asserted in this mode.) Where the extension's path takes CANN's C API
(a torch_npu without op-plugin's extension API: npu_backend.op_api_extension()) the rejection is raised at the call,
in every mode.

Each case runs in its own process: torch_npu reads TASK_QUEUE_ENABLE at start, and the fake's SoC (an Ascend910A,
whose GeluBackwardV2 rejects bfloat16) is read once per process."""

import json
import os
import subprocess
import sys

import expecttest
import pytest

import paths
import torch_ext

pytestmark = pytest.mark.skipif(not torch_ext._npu.LOADED, reason="needs torch_ext._C_npu (make test-npu)")

SCRIPT = r"""
import json
import torch, torch_npu, torch_ext
import npu_cache_cases as t
lib = t.Opapi()
live = ["live aclTensor", "live executor", "live memory context"]
x = torch.randn(4, 8).npu()
ok = torch.ops.npu_ext.gelu_backward_v2(x, x, "none")  # the probe (float32 runs there), and a first call
lib.reset()  # (synchronises) the counters, and the cache emptied
before = {k: lib.calls(k) for k in live}
out = {"at the call": None, "at the next synchronisation": None}
bf = x.bfloat16()
try:
    torch.ops.npu_ext.gelu_backward_v2(bf, bf, "tanh")
except RuntimeError as e:
    out["at the call"] = str(e).splitlines()[0]
try:
    torch.npu.synchronize()
except RuntimeError as e:
    out["at the next synchronisation"] = str(e)
out["phase 1"] = lib.phase1("aclnnGeluBackwardV2")
out["launches"] = lib.calls("aclnnGeluBackwardV2")
lib.reset()
out["released"] = {k: lib.calls(k) for k in live} == before
again = torch.ops.npu_ext.gelu_backward_v2(x, x, "none")
out["next call"] = bool(torch.equal(again.cpu(), ok.cpu()))
print("RESULT " + json.dumps(out))
"""


def run_rejected(level):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_FAKE_")}
    env.update(TASK_QUEUE_ENABLE=level, NPU_FAKE_SOC="Ascend910A", PYTHONPATH=paths.pythonpath())
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT "):]), proc.stderr


def v2_path():
    import npu_backend
    return npu_backend.op_api_extension()


class TestRejectedCall(expecttest.TestCase):
    def test_mode_2_reports_a_rejection_at_the_next_synchronisation(self):
        result, stderr = run_rejected("2")
        self.assertEqual((result["phase 1"], result["launches"], result["released"]), (1, 0, True))
        if not v2_path():  # CANN's C API: phase 1 on the calling thread in every mode
            self.assertIsNone(result["at the next synchronisation"])
            self.assertTrue(result["next call"])
            self.assertExpectedInline(result["at the call"], """\
npu_ext.gelu_backward_v2: aclnnGeluBackwardV2GetWorkspaceSize rejected the call with status 161002 (ACLNN_ERR_PARAM_INVALID); nothing was queued. aclnn says: Input dtype of gelu is not support bfloat16 in current socversion.""")
            return
        self.assertIsNone(result["at the call"])  # the call returned: phase 1 is in the queued task
        sync = result["at the next synchronisation"]
        # torch_npu's report names the aclnn operator and ends with aclnn's reason (the rest is torch_npu's text)
        self.assertIn("the current working operator name is aclnnGeluBackwardV2.", sync)
        self.assertExpectedInline(sync.splitlines()[-1], """\
Input dtype of gelu is not support bfloat16 in current socversion.""")
        # torch_npu logs the task's exception: the extension's message, naming the npu_ext operator
        logged = [line[line.index("npu_ext."):] for line in stderr.splitlines() if "npu_ext.gelu_backward_v2" in line]
        self.assertEqual(len(logged), 1, stderr[-3000:])
        self.assertExpectedInline(logged[0], """\
npu_ext.gelu_backward_v2: aclnnGeluBackwardV2GetWorkspaceSize rejected the call with status 161002 (ACLNN_ERR_PARAM_INVALID); nothing was launched (phase 1 ran in the queued task: TASK_QUEUE_ENABLE=2). aclnn says: Input dtype of gelu is not support bfloat16 in current socversion.""")

    def test_mode_1_raises_at_the_call(self):
        """The contrast: with 1 phase 1 runs on the calling thread, which raises at once."""
        result, _ = run_rejected("1")
        self.assertIsNone(result["at the next synchronisation"])
        self.assertEqual((result["phase 1"], result["launches"], result["released"], result["next call"]),
                         (1, 0, True, True))
        self.assertExpectedInline(result["at the call"], """\
npu_ext.gelu_backward_v2: aclnnGeluBackwardV2GetWorkspaceSize rejected the call with status 161002 (ACLNN_ERR_PARAM_INVALID); nothing was queued. aclnn says: Input dtype of gelu is not support bfloat16 in current socversion.""")
