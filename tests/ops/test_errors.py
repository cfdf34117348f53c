"""Every bad input is a RuntimeError naming the op and the argument, with a pinned message.

The shape/dtype checks run from the one shared C++ module, so each is asserted on CPU and on Meta (the
fake-tensor kernels) with the same text. Data-dependent checks (group_idx values) only exist off Meta.
"""

import pytest
import torch

import torch_ext  # noqa: F401
from helpers import DeviceErrorTestCase, zeros

pytestmark = pytest.mark.asan

ops = torch.ops.npu_ext
t = zeros


class TestErrors(DeviceErrorTestCase):
    # ---------------------------------------------------------------------------------------------------
    def test_gelu_backward_v2(self):
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu_backward_v2(t(3, device=d), t(3, device=d), "Tanh")),
            """npu_ext.gelu_backward_v2: approximate must be "none" or "tanh", but got "Tanh\"""")
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu_backward_v2(t(3, dtype=torch.int64, device=d), t(3, device=d))),
            """npu_ext.gelu_backward_v2: grad_output must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int64""")
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu_backward_v2(t(3, device=d), t(3, dtype=torch.bool, device=d))),
            """npu_ext.gelu_backward_v2: self must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.bool""")
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu_backward_v2(t(2, 3, device=d), t(4, 1, device=d))),
            """npu_ext.gelu_backward_v2: grad_output of shape [2, 3] and self of shape [4, 1] do not broadcast""")
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu_backward_v2.out(t(2, 3, device=d), t(3, device=d), grad_input=t(3, device=d))),
            """npu_ext.gelu_backward_v2: output grad_input must have shape [2, 3], but got [3]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu_backward_v2.out(
                t(3, dtype=torch.float16, device=d), t(3, device=d), grad_input=t(3, dtype=torch.float16, device=d))),
            """npu_ext.gelu_backward_v2: output grad_input must have dtype torch.float32, but got torch.float16""")
        # aclnn documents 0-8 dimensions (issue 20): both inputs, hence the broadcast output too
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu_backward_v2(t(*[1] * 9, device=d), t(1, device=d))),
            """npu_ext.gelu_backward_v2: grad_output must have at most 8 dimensions, but got 9""")
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu_backward_v2(t(1, device=d), t(*[1] * 9, device=d), "tanh")),
            """npu_ext.gelu_backward_v2: self must have at most 8 dimensions, but got 9""")
        self.assertExpectedInline(
            self.err(lambda d: ops.gelu(t(*[1] * 9, device=d))),
            """npu_ext.gelu: self must have at most 8 dimensions, but got 9""")
        self.assertEqual(ops.gelu_backward_v2(t(*[1] * 8, device="meta"), t(*[2] * 8, device="meta")).shape, (2,) * 8)

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

    # ---------------------------------------------------------------------------------------------------
    def test_prelu_backward(self):
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(t(2, 3, device=d), t(2, 3, dtype=torch.int32, device=d), t(3, device=d))),
            """npu_ext.prelu_backward: self must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int32""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(t(2, 3, dtype=torch.float16, device=d), t(2, 3, device=d), t(3, device=d))),
            """npu_ext.prelu_backward: grad_output must have the same dtype as self (torch.float32), but got torch.float16""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(t(2, 3, device=d), t(2, 3, device=d), t(3, dtype=torch.float64, device=d))),
            """npu_ext.prelu_backward: weight must have the same dtype as self (torch.float32), but got torch.float64""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(t(2, 3, device=d), t(2, 3, device=d), t(2, device=d))),
            """npu_ext.prelu_backward: weight must have 1 or 3 elements (the size of dimension 1 of self), but got 2""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(t(5, device=d), t(5, device=d), t(5, device=d))),
            """npu_ext.prelu_backward: weight must have 1 element (self has a single channel), but got 5""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(t(2, 4, device=d), t(2, 3, device=d), t(3, device=d))),
            """npu_ext.prelu_backward: grad_output of shape [2, 4] must broadcast to the shape of self [2, 3]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(t(2, 2, 3, device=d), t(2, 3, device=d), t(3, device=d))),
            """npu_ext.prelu_backward: grad_output of shape [2, 2, 3] must broadcast to the shape of self [2, 3]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward(t(*[1] * 9, device=d), t(*[1] * 9, device=d), t(1, device=d))),
            """npu_ext.prelu_backward: self must have at most 8 dimensions, but got 9""")
        self.assertExpectedInline(
            self.err(lambda d: ops.prelu_backward.out(t(2, 3, device=d), t(2, 3, device=d), t(3, device=d),
                                                      grad_input=t(2, 3, device=d), grad_weight=t(1, device=d))),
            """npu_ext.prelu_backward: output grad_weight must have shape [3], but got [1]""")

    # ---------------------------------------------------------------------------------------------------
    def test_grouped_bias_add_grad_shapes(self):
        idx = lambda *v, dtype=torch.int64, d="cpu": torch.tensor(v, dtype=dtype).to(d)  # noqa: E731
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), idx(4, d=d), 2)),
            """npu_ext.grouped_bias_add_grad: group_idx_type must be 0 (cumulative end offsets) or 1 (per-group counts), but got 2""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad(t(4, 2, dtype=torch.float64, device=d).int(), idx(4, d=d))),
            """npu_ext.grouped_bias_add_grad: grad_y must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int32""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), idx(4, dtype=torch.int16, d=d))),
            """npu_ext.grouped_bias_add_grad: group_idx must have dtype torch.int32 or torch.int64, but got torch.int16""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), idx(4, d=d).reshape(1, 1))),
            """npu_ext.grouped_bias_add_grad: group_idx must be 1-D, but got a 2-D tensor of shape [1, 1]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), torch.full([2049], 4, device=d))),
            """npu_ext.grouped_bias_add_grad: group_idx may hold at most 2048 groups, but got 2049""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad(t(2, 4, 2, device=d), idx(4, d=d))),
            """npu_ext.grouped_bias_add_grad: grad_y must be 2-D (N, H) when group_idx is given, but got a 3-D tensor of shape [2, 4, 2]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d))),
            """npu_ext.grouped_bias_add_grad: grad_y must be 3-D (G, C, H) when group_idx is None, but got a 2-D tensor of shape [4, 2]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad.out(t(4, 2, device=d), idx(1, 4, d=d), out=t(2, 3, device=d))),
            """npu_ext.grouped_bias_add_grad: output out must have shape [2, 2], but got [2, 3]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad(t(4, 2, device=d), idx(4, d="cpu" if d == "meta" else "meta")),
                     devices=("cpu",)),
            """npu_ext.grouped_bias_add_grad: group_idx must be on the same device as grad_y (cpu), but got meta""")
        # N <= INT32_MAX rows with group_idx (issue 20); a stride-0 view needs no memory
        rows = lambda n, d: torch.zeros(1, 2, device=d).expand(n, 2)  # noqa: E731
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add_grad(rows(2**31, d), idx(2**31, d=d))),
            """npu_ext.grouped_bias_add_grad: grad_y may have at most 2147483647 rows (INT32_MAX: aclnn keeps group offsets in int32) when group_idx is given, but got 2147483648""")
        self.assertExpectedInline(
            self.err(lambda d: ops.grouped_bias_add(rows(2**31, d), t(1, 2, device=d), idx(2**31, d=d))),
            """npu_ext.grouped_bias_add: x may have at most 2147483647 rows (INT32_MAX: aclnn keeps group offsets in int32) when group_idx is given, but got 2147483648""")
        self.assertEqual(ops.grouped_bias_add_grad(rows(2**31 - 1, "meta"), idx(2**31 - 1, d="meta")).shape, (1, 2))

    def test_grouped_bias_add_grad_values(self):
        def run(values, group_idx_type=0, rows=10, dtype=torch.int64):
            return lambda d: ops.grouped_bias_add_grad(t(rows, 3), torch.tensor(values, dtype=dtype), group_idx_type)

        cpu = ("cpu",)  # values are data: Meta cannot see them
        self.assertExpectedInline(self.err(run([3, -1, 10]), cpu),
                                  """npu_ext.grouped_bias_add_grad: group_idx must be non-negative, but group_idx[1] = -1""")
        self.assertExpectedInline(self.err(run([3, 2, 10]), cpu),
                                  """npu_ext.grouped_bias_add_grad: group_idx must be non-decreasing (cumulative end offsets), but group_idx[1] = 2 < group_idx[0] = 3""")
        self.assertExpectedInline(self.err(run([3, 11]), cpu),
                                  """npu_ext.grouped_bias_add_grad: group_idx[1] = 11 exceeds the number of rows of grad_y (10)""")
        self.assertExpectedInline(self.err(run([3, 9]), cpu),
                                  """npu_ext.grouped_bias_add_grad: the last entry of group_idx must equal the number of rows of grad_y (10), but got 9""")
        self.assertExpectedInline(self.err(run([]), cpu),
                                  """npu_ext.grouped_bias_add_grad: the last entry of group_idx must equal the number of rows of grad_y (10), but got an empty group_idx""")
        self.assertExpectedInline(self.err(run([3, -2, 9], 1, dtype=torch.int32), cpu),
                                  """npu_ext.grouped_bias_add_grad: group_idx must be non-negative, but group_idx[1] = -2""")
        self.assertExpectedInline(self.err(run([3, 4, 4], 1), cpu),
                                  """npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), but the first 3 counts already sum to 11""")
        self.assertExpectedInline(self.err(run([3, 4], 1), cpu),
                                  """npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), but they sum to 7""")
        # A huge count must not overflow the running sum into an accepted value.
        self.assertExpectedInline(self.err(run([2**62, 2**62, 2**62, 2**62 - 6], 1), cpu),
                                  """npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), but the first 1 counts already sum to 4611686018427387904""")
        # The .out overload validates values before writing anything.
        out = torch.full([2, 3], 7.0)
        with self.assertRaises(RuntimeError):
            ops.grouped_bias_add_grad.out(t(10, 3), torch.tensor([3, 2]), out=out)
        self.assertTrue(torch.equal(out, torch.full([2, 3], 7.0)))

    # ---------------------------------------------------------------------------------------------------
    def test_scaled_masked_softmax_backward(self):
        m = lambda *s, dtype=torch.bool, d="cpu": torch.zeros(s, dtype=dtype, device=d)  # noqa: E731
        op = ops.scaled_masked_softmax_backward
        self.assertExpectedInline(
            self.err(lambda d: op(t(1, 1, 2, 3, dtype=torch.int32, device=d), t(1, 1, 2, 3, device=d), m(1, 1, 2, 3, d=d))),
            """npu_ext.scaled_masked_softmax_backward: grad_output must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int32""")
        self.assertExpectedInline(
            self.err(lambda d: op(t(1, 1, 2, 3, device=d), t(1, 1, 2, 3, dtype=torch.float16, device=d), m(1, 1, 2, 3, d=d))),
            """npu_ext.scaled_masked_softmax_backward: y must have the same dtype as grad_output (torch.float32), but got torch.float16""")
        self.assertExpectedInline(
            self.err(lambda d: op(t(2, 3, device=d), t(2, 3, device=d), m(2, 3, d=d))),
            """npu_ext.scaled_masked_softmax_backward: grad_output must be 4-D, but got a 2-D tensor of shape [2, 3]""")
        self.assertExpectedInline(
            self.err(lambda d: op(t(1, 1, 2, 3, device=d), t(1, 1, 3, 2, device=d), m(1, 1, 2, 3, d=d))),
            """npu_ext.scaled_masked_softmax_backward: y must have the shape of grad_output [1, 1, 2, 3], but got [1, 1, 3, 2]""")
        self.assertExpectedInline(
            self.err(lambda d: op(t(1, 1, 1, 4097, device=d), t(1, 1, 1, 4097, device=d), m(1, 1, 1, 4097, d=d))),
            """npu_ext.scaled_masked_softmax_backward: the last dimension of grad_output must be at most 4096, but got 4097""")
        self.assertExpectedInline(
            self.err(lambda d: op(t(1, 1, 2, 3, device=d), t(1, 1, 2, 3, device=d), m(1, 1, 2, 3, dtype=torch.uint8, d=d))),
            """npu_ext.scaled_masked_softmax_backward: mask must have dtype torch.bool, but got torch.uint8""")
        self.assertExpectedInline(
            self.err(lambda d: op(t(1, 1, 2, 3, device=d), t(1, 1, 2, 3, device=d), m(2, 3, d=d))),
            """npu_ext.scaled_masked_softmax_backward: mask must be 4-D, but got a 2-D tensor of shape [2, 3]""")
        self.assertExpectedInline(
            self.err(lambda d: op(t(2, 4, 2, 3, device=d), t(2, 4, 2, 3, device=d), m(1, 2, 2, 3, d=d))),
            """npu_ext.scaled_masked_softmax_backward: mask of shape [1, 2, 2, 3] must match grad_output [2, 4, 2, 3] in its last two dimensions and be equal or 1 in its first two""")
        self.assertExpectedInline(
            self.err(lambda d: op(t(2, 4, 2, 3, device=d), t(2, 4, 2, 3, device=d), m(2, 4, 1, 3, d=d))),
            """npu_ext.scaled_masked_softmax_backward: mask of shape [2, 4, 1, 3] must match grad_output [2, 4, 2, 3] in its last two dimensions and be equal or 1 in its first two""")
        self.assertExpectedInline(
            self.err(lambda d: op.out(t(1, 1, 2, 3, device=d), t(1, 1, 2, 3, device=d), m(1, 1, 2, 3, d=d),
                                      out=t(1, 1, 2, 3, dtype=torch.float16, device=d))),
            """npu_ext.scaled_masked_softmax_backward: output out must have dtype torch.float32, but got torch.float16""")

    # ---------------------------------------------------------------------------------------------------
    def test_logit_grad(self):
        self.assertExpectedInline(
            self.err(lambda d: ops.logit_grad(t(3, dtype=torch.int64, device=d), t(3, device=d))),
            """npu_ext.logit_grad: x must have dtype torch.float16, torch.bfloat16, torch.float32 or torch.float64, but got torch.int64""")
        self.assertExpectedInline(
            self.err(lambda d: ops.logit_grad(t(3, device=d), t(3, dtype=torch.bfloat16, device=d))),
            """npu_ext.logit_grad: dy must have the same dtype as x (torch.float32), but got torch.bfloat16""")
        self.assertExpectedInline(
            self.err(lambda d: ops.logit_grad(t(3, device=d), t(1, device=d))),
            """npu_ext.logit_grad: dy must have the shape of x [3], but got [1]""")
        self.assertExpectedInline(
            self.err(lambda d: ops.logit_grad(t(*[1] * 9, device=d), t(*[1] * 9, device=d))),
            """npu_ext.logit_grad: x must have at most 8 dimensions, but got 9""")
        self.assertExpectedInline(
            self.err(lambda d: ops.logit_grad.out(t(3, device=d), t(3, device=d), dx=t(3, dtype=torch.float64, device=d))),
            """npu_ext.logit_grad: output dx must have dtype torch.float32, but got torch.float64""")


@pytest.mark.parametrize("call", [
    lambda: ops.gelu_backward_v2(torch.zeros(2), torch.zeros(2), "erf"),
    lambda: ops.prelu_backward(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(4)),
    lambda: ops.grouped_bias_add_grad(torch.zeros(4, 2), torch.tensor([5])),
    lambda: ops.scaled_masked_softmax_backward(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2), torch.zeros(2)),
    lambda: ops.logit_grad(torch.zeros(2), torch.zeros(3)),
])
def test_errors_name_the_op(call):
    with pytest.raises(RuntimeError, match=r"^npu_ext\.\w+: "):
        call()
