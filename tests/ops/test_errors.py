"""Every bad input is a RuntimeError naming the op and the argument, with a pinned message.

The shape/dtype checks run from the one shared C++ module, so each is asserted on CPU and on Meta (the
fake-tensor kernels) with the same text. Data-dependent checks (group_idx values) only exist off Meta.
"""

import pytest
import torch

import torch_ext  # noqa: F401
from torch_ext.testing import samples
from helpers import DeviceErrorTestCase, zeros

pytestmark = pytest.mark.asan

ops = torch.ops.npu_ext
t = zeros


class TestErrors(DeviceErrorTestCase):
    def test_device_mismatch(self):
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu_backward_v2(t(3), t(3, device="meta")), devices=("cpu",)),
            """npu_ext.gelu_backward_v2: self must be on the same device as grad_output (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.logit_grad.out(t(3), t(3), dx=t(3, device="meta")), devices=("cpu",)),
            """npu_ext.logit_grad: dx must be on the same device as the inputs (cpu), but got meta""")

    def test_mixed_devices_every_op(self):
        """Any tensor argument on another device is an error naming it, whichever kernel the dispatcher picks
        (a meta tensor among CPU tensors selects the Meta kernel), ignored masks included (issue 10)."""
        meta = lambda *s, dtype=torch.float32: torch.zeros(s, dtype=dtype, device="meta")  # noqa: E731
        cpu_only = ("cpu",)
        g, y = t(1, 1, 2, 3), torch.softmax(t(1, 1, 2, 3), -1)
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax_backward(g, y, meta(1, 1, 2, 3, dtype=torch.bool), 1.0, True), cpu_only),
            """npu_ext.scaled_masked_softmax_backward: mask must be on the same device as grad_output (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax(g, meta(1, 1, 2, 3, dtype=torch.bool), 1.0, True), cpu_only),
            """npu_ext.scaled_masked_softmax: mask must be on the same device as x (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.scaled_masked_softmax_backward(g, meta(1, 1, 2, 3), t(1, 1, 2, 3).bool()), cpu_only),
            """npu_ext.scaled_masked_softmax_backward: y must be on the same device as grad_output (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(t(2, 3), t(2, 3), meta(3)), cpu_only),
            """npu_ext.prelu_backward: weight must be on the same device as self (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(meta(2, 3), t(2, 3), t(3)), cpu_only),
            """npu_ext.prelu_backward: grad_output must be on the same device as self (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu(t(2, 3), meta(3)), cpu_only),
            """npu_ext.prelu: weight must be on the same device as self (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.logit_grad(t(3), meta(3)), cpu_only),
            """npu_ext.logit_grad: dy must be on the same device as x (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 2), meta(1, 2), torch.tensor([4])), cpu_only),
            """npu_ext.grouped_bias_add: bias must be on the same device as x (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(t(4, 2), t(1, 2), torch.tensor([4], device="meta")), cpu_only),
            """npu_ext.grouped_bias_add: group_idx must be on the same device as x (cpu), but got meta""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward.out(t(2, 3), t(2, 3), t(3), grad_input=t(2, 3), grad_weight=meta(3)), cpu_only),
            """npu_ext.prelu_backward: grad_weight must be on the same device as the inputs (cpu), but got meta""")

    def test_internally_overlapping_output(self):
        self.assertExpectedInline(
            self.err(lambda d: ops.logit_grad.out(t(3, device=d), t(3, device=d), dx=t(1, device=d).expand(3))),
            """npu_ext.logit_grad: output dx must not have internally overlapping memory (e.g. an expanded tensor)""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward.out(t(2, 3, device=d), t(2, 3, device=d), t(3, device=d),
                                                      grad_input=t(2, 1, device=d).expand(2, 3), grad_weight=t(3, device=d))),
            """npu_ext.prelu_backward: output grad_input must not have internally overlapping memory (e.g. an expanded tensor)""")

    def test_grouped_bias_add_grad_out_untouched_by_bad_values(self):
        """The .out overload validates group_idx's values before writing anything."""
        out = torch.full([2, 3], 7.0)
        with self.assertRaises(RuntimeError):
            ops.grouped_bias_add_grad.out(t(10, 3), torch.tensor([3, 2]), out=out)
        self.assertTrue(torch.equal(out, torch.full([2, 3], 7.0)))


def _family_test(info):
    def test(self):
        def expect(actual, expected):
            # every message names the op first
            self.assertRegex(actual, r"^npu_ext\.\w+: ")
            self.assertExpectedInline(actual, expected, skip=1)  # the literal is in the family's module

        info.errors(self.err, expect)
    test.__doc__ = f"The pinned messages of {info.name} and its forward ({info.errors.__module__})."
    return test


# One test per family: its pinned messages are written in its module (torch_ext/testing/families/<family>.py,
# OpInfo.errors); EXPECTTEST_ACCEPT=1 rewrites them there.
for _info in samples.OPS.values():
    setattr(TestErrors, f"test_{_info.name}", _family_test(_info))
