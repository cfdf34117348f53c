"""The NPU path (csrc/ops/*/npu.cpp) without an NPU: inside the real torch_npu 2.13.0 runtime on the fake CANN
(``make test-npu``, x86-64), or against the host stand-in under the aarch64 emulation (tests/support/npu_backend.py).

The NPU kernels run on fp32/fp16/bf16, contiguous, transposed, offset, strided and broadcast (stride-0) inputs and
are compared with the CPU kernels (torch.ops.npu_ext.* on CPU tensors); the aclnn operators are host models that
read tensors only through their aclTensor descriptors and behave as the CANN sources show (tests/fake_cann/opapi),
and their C ABI (status codes 161001 / 161002) is tested directly with ctypes. Per-machine scenarios (SoC, entry
points missing from an older CANN, kernels missing for a SoC, NPU_EXT_NO_CPU_FALLBACK) each run in their own process
(tests/support/npu_path_scenarios.py). On a real NPU, tests/npu/test_npu_device.py runs the same checks on the hardware.

This file: results against the CPU kernels, empty inputs, and the validation before any aclnn call. The aclnn models'
C ABI and the output layouts: test_npu_path_abi.py. Conversion, probing, fallbacks, SoCs, graph capture and the status
report: test_npu_path_machine.py.
"""

import math

import pytest
import torch

from torch_ext.testing import samples

from npu_path_common import (  # noqa: F401 (backend: the fixture)
    DTYPES, LAYOUTS, SKIP, assert_close, assert_same, backend, layout, logit_inputs,
    noncontiguous_out, npu, ops, prelu_inputs, softmax_inputs)

pytestmark = SKIP


def test_every_op_has_privateuse1_kernels(backend):
    assert len(samples.OPS) >= 5
    for name in samples.OPS:
        for overload in ["", ".out"]:
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"npu_ext::{name}{overload}", "PrivateUse1")


# ------------------------------------------------------------------------------------------------------------
# Results against the CPU kernels.

# Every sample of the table (each family's OpInfo, torch_ext/testing/families/), in every layout: the functional
# overload through exactly one of the family's aclnn entry points (both phases), and the .out overload into
# non-contiguous outputs, against the CPU kernel. The tests after these add each operator's own cases.
_SAMPLES = [(layout_, s) for layout_ in samples.LAYOUTS for s in samples.samples(dtypes=DTYPES, layout=layout_)]


@pytest.mark.parametrize("kind,sample", _SAMPLES, ids=[f"{s.id}-{kind}" for kind, s in _SAMPLES])
def test_every_sample_against_the_cpu_kernel(backend, kind, sample):
    info = sample.info
    expected = sample.run()
    backend.reset()
    got = npu(info.op.default, *sample.args, **sample.kwargs)
    calls = backend.aclnn_calls()
    assert len(calls) == 1 and set(calls) <= set(info.aclnn) and sum(calls.values()) == 2, calls
    for a, e in zip(got if isinstance(got, tuple) else (got,), expected):
        assert_close(a, e)
    outs = {name: noncontiguous_out(e.shape, e.dtype) for name, e in zip(info.outputs, expected)}
    assert npu(info.op.out, *sample.args, **sample.kwargs, **outs) is None
    for name, e in zip(info.outputs, expected):
        assert_close(outs[name], e)


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_v2(backend, approximate, dtype, kind):
    torch.manual_seed(0)
    g = torch.randn(5, 6).to(dtype)
    x = (torch.randn(5, 6) * 3).to(dtype)
    backend.reset()
    got = npu(ops.gelu_backward_v2.default, layout(g, kind), layout(x, kind), approximate)
    assert backend.aclnn_calls() == {"aclnnGeluBackwardV2": 2}
    assert_close(got, ops.gelu_backward_v2(g, x, approximate))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((6,), (5, 6)), ((5, 1), (1, 6)), ((2, 1, 6), (5, 6))])
def test_gelu_backward_v2_broadcast(backend, shapes, dtype):
    torch.manual_seed(1)
    g = torch.randn(shapes[0]).to(dtype)
    x = torch.randn(shapes[1]).to(dtype)
    assert_close(npu(ops.gelu_backward_v2.default, g, x, "none"), ops.gelu_backward_v2(g, x, "none"))
    # stride-0 (expanded) inputs of the full shape
    full = torch.broadcast_shapes(g.shape, x.shape)
    assert_close(npu(ops.gelu_backward_v2.default, g.expand(full), x.expand(full), "tanh"),
                 ops.gelu_backward_v2(g, x, "tanh"))


@pytest.mark.parametrize("dtypes", [(torch.float16, torch.float32), (torch.bfloat16, torch.float16),
                                    (torch.float32, torch.bfloat16)])
def test_gelu_backward_v2_mixed_dtypes(backend, dtypes):
    torch.manual_seed(2)
    g = torch.randn(4, 5).to(dtypes[0])
    x = torch.randn(4, 5).to(dtypes[1])
    got = npu(ops.gelu_backward_v2.default, g, x, "tanh")
    assert got.dtype == torch.float32
    assert_close(got, ops.gelu_backward_v2(g, x, "tanh"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_backward_v2_out(backend, dtype):
    torch.manual_seed(3)
    g, x = torch.randn(4, 6).to(dtype), torch.randn(6).to(dtype)
    out = noncontiguous_out((4, 6), dtype)
    assert npu(ops.gelu_backward_v2.out, g, x, "none", grad_input=out) is None
    assert_close(out, ops.gelu_backward_v2(g, x, "none"))


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_prelu_backward(backend, dtype, kind):
    g, x, w = prelu_inputs(dtype)
    backend.reset()
    gi, gw = npu(ops.prelu_backward.default, layout(g, kind), layout(x, kind), layout(w, kind))
    assert backend.aclnn_calls() == {"aclnnPreluBackward": 2}
    egi, egw = ops.prelu_backward(g, x, w)
    assert_close(gi, egi)
    assert_close(gw, egw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [
    dict(self_shape=(4, 3, 5), weight_shape=(1,)),  # one weight for every channel
    dict(self_shape=(4, 3, 5), weight_shape=()),  # 0-D weight
    dict(self_shape=(4, 3, 5), weight_shape=(3, 1)),  # C elements, 2-D: aclnn gets a 1-D gradWeight
    dict(self_shape=(7,), weight_shape=(1,)),  # 1-D self: C = 1
    dict(self_shape=(2, 3), weight_shape=(3,), g_shape=(3,)),  # grad_output broadcast by aclnn
    dict(self_shape=(4, 3, 5), weight_shape=(3,), g_shape=(1, 3, 5)),
])
def test_prelu_backward_shapes(backend, case, dtype):
    g, x, w = prelu_inputs(dtype, **case)
    gi, gw = npu(ops.prelu_backward.default, g, x, w)
    egi, egw = ops.prelu_backward(g, x, w)
    assert_close(gi, egi)
    assert_close(gw, egw)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prelu_backward_out(backend, dtype):
    g, x, w = prelu_inputs(dtype, weight_shape=(3, 1))
    gi, gw = noncontiguous_out((4, 3, 5), dtype), noncontiguous_out((3, 1), dtype)
    assert npu(ops.prelu_backward.out, g, x, w, grad_input=gi, grad_weight=gw) is None
    egi, egw = ops.prelu_backward(g, x, w)
    assert_close(gi, egi)
    assert_close(gw, egw)


@pytest.mark.parametrize("case", samples.PRELU_DEVICE_CASES, ids=lambda c: c[0])
def test_prelu_backward_a2_a3_kernel(backend, case):
    """On Atlas A2/A3 (the stand-in's default SoC) aclnnPreluBackward runs the TBE kernel: grad_weight NaN for a
    channel with an infinite or NaN grad_input (its dx * 0 term) or an x = +inf, NaN grad_input where x > 0 for a
    non-finite weight, each term rounded to the dtype before the sum. The CPU kernel gives the same, NaN
    positions included, and both give the values written out in samples.PRELU_DEVICE_CASES."""
    _, dtype, x, g, w, gi, gw = case
    x, g, w = (torch.tensor(v, dtype=dtype) for v in (x, g, w))
    got, cpu = npu(ops.prelu_backward.default, g, x, w), ops.prelu_backward(g, x, w)
    for a, c, e in zip(got, cpu, (gi, gw)):
        assert_same(a, c)
        assert_same(a, torch.tensor(e, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight_shape", [(1,), ()])
def test_prelu_backward_zero_dim_self(backend, dtype, weight_shape):
    """aclnn reshapes only a 1-D self to (1, N): a 0-dim self would reach kernels that index its dimension 1 (the
    stand-in fails it with 561002), so the NPU path passes the single element as shape [1]."""
    x, g, w = torch.tensor(-1.5).to(dtype), torch.tensor(2.0).to(dtype), torch.full(weight_shape, 0.25).to(dtype)
    backend.reset()
    got = npu(ops.prelu_backward.default, g, x, w)
    assert backend.aclnn_calls() == {"aclnnPreluBackward": 2}
    for a, c in zip(got, ops.prelu_backward(g, x, w)):
        assert_same(a, c)
    gi, gw = torch.full((), math.nan, dtype=dtype), torch.full(weight_shape, math.nan, dtype=dtype)
    assert npu(ops.prelu_backward.out, g, x, w, grad_input=gi, grad_weight=gw) is None
    assert_same(gi, got[0])
    assert_same(gw, got[1])


def test_prelu_backward_nan_input(backend):
    g, x, w = prelu_inputs(torch.float32)
    x[1, 2, 3] = float("nan")  # takes the x <= 0 branch: NaN grad_weight for channel 2
    gi, gw = npu(ops.prelu_backward.default, g, x, w)
    egi, egw = ops.prelu_backward(g, x, w)
    assert math.isnan(gw[2]) and not math.isnan(gw[0])
    assert_close(gi, egi)
    assert_close(gw, egw)


GROUP_CASES = [
    ([3, 3, 7, 10], 0),  # cumulative ends, with an empty group
    ([2, 5, 10], 0),
    ([3, 0, 4, 3], 1),  # counts, with an empty group
    ([10], 1),
]


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("case", GROUP_CASES)
def test_grouped_bias_add_grad(backend, case, idx_dtype, dtype, kind):
    values, idx_type = case
    torch.manual_seed(5)
    gy = torch.randn(10, 8).to(dtype)
    idx = torch.tensor(values, dtype=idx_dtype)
    backend.reset()
    got = npu(ops.grouped_bias_add_grad.default, layout(gy, kind), idx, idx_type)
    # type 1 (counts) needs GroupedBiasAddGradV2; type 0 GroupedBiasAddGrad
    assert backend.aclnn_calls() == {"aclnnGroupedBiasAddGradV2" if idx_type == 1 else "aclnnGroupedBiasAddGrad": 2}
    assert_close(got, ops.grouped_bias_add_grad(gy, idx, idx_type))


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_bias_add_grad_3d(backend, dtype, kind):
    torch.manual_seed(6)
    gy = torch.randn(4, 5, 8).to(dtype)
    backend.reset()
    got = npu(ops.grouped_bias_add_grad.default, layout(gy, kind), None, 0)
    assert backend.aclnn_calls() == {"aclnnGroupedBiasAddGrad": 2}
    assert_close(got, ops.grouped_bias_add_grad(gy, None, 0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", GROUP_CASES)
def test_grouped_bias_add_grad_out(backend, case, dtype):
    values, idx_type = case
    torch.manual_seed(7)
    gy = torch.randn(10, 8).to(dtype)
    idx = torch.tensor(values)
    out = noncontiguous_out((len(values), 8), dtype)  # NaN-filled: empty groups must be zeroed
    assert npu(ops.grouped_bias_add_grad.out, gy, idx, idx_type, out=out) is None
    assert_close(out, ops.grouped_bias_add_grad(gy, idx, idx_type))


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scaled_masked_softmax_backward(backend, dtype, kind):
    g, y, mask = softmax_inputs(dtype)
    backend.reset()
    got = npu(ops.scaled_masked_softmax_backward.default, layout(g, kind), layout(y, kind), layout(mask, kind),
              0.5, False)
    assert backend.aclnn_calls() == {"aclnnScaledMaskedSoftmaxBackward": 2}
    assert_close(got, ops.scaled_masked_softmax_backward(g, y, mask, 0.5, False))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_shape", [(1, 3, 4, 16), (2, 1, 4, 16), (1, 1, 4, 16)])
def test_scaled_masked_softmax_backward_broadcast_mask(backend, mask_shape, dtype):
    g, y, mask = softmax_inputs(dtype, mask_shape=mask_shape)
    expected = ops.scaled_masked_softmax_backward(g, y, mask, 1.5, False)
    assert_close(npu(ops.scaled_masked_softmax_backward.default, g, y, mask, 1.5, False), expected)
    # the same mask expanded to the full shape (stride-0 dims)
    assert_close(npu(ops.scaled_masked_softmax_backward.default, g, y, mask.expand(g.shape), 1.5, False), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scaled_masked_softmax_backward_fix_triu_mask(backend, dtype):
    g, y, _ = softmax_inputs(dtype, shape=(2, 3, 5, 7), mask_shape=(2, 3, 5, 7))
    causal = torch.ones(5, 7, dtype=torch.bool).triu(1).expand(2, 3, 5, 7)
    ignored_mask = torch.zeros(1, dtype=torch.int8)  # fix_triu_mask=True ignores the mask argument
    got = npu(ops.scaled_masked_softmax_backward.default, g, y, ignored_mask, 2.0, True)
    assert_close(got, ops.scaled_masked_softmax_backward(g, y, causal, 2.0, False))
    assert_close(got, ops.scaled_masked_softmax_backward(g, y, ignored_mask, 2.0, True))
    assert (got[..., causal[0, 0]] == 0).all() and (got[..., ~causal[0, 0]] != 0).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_scaled_masked_softmax_backward_out(backend, dtype):
    g, y, mask = softmax_inputs(dtype)
    out = noncontiguous_out(g.shape, dtype)
    assert npu(ops.scaled_masked_softmax_backward.out, g, y, mask, 0.5, True, out=out) is None
    assert_close(out, ops.scaled_masked_softmax_backward(g, y, mask, 0.5, True))


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.1, 1.0, 2.0, math.inf, math.nan])
def test_logit_grad(backend, eps, dtype, kind):
    x, dy = logit_inputs(dtype)
    backend.reset()
    got = npu(ops.logit_grad.default, layout(x, kind), layout(dy, kind), eps)
    assert backend.aclnn_calls() == {"aclnnLogitGrad": 2}
    assert_close(got, ops.logit_grad(x, dy, eps))


@pytest.mark.parametrize("dtype", DTYPES)
def test_logit_grad_broadcast_and_out(backend, dtype):
    x, dy = logit_inputs(dtype, shape=(7,))
    xe, dye = x.expand(5, 7), dy.unsqueeze(1).expand(7, 5).t()  # stride-0 views (dy transposed too)
    assert_close(npu(ops.logit_grad.default, xe, dye, 0.05), ops.logit_grad(xe.contiguous(), dye.contiguous(), 0.05))
    out = noncontiguous_out((5, 7), dtype)
    assert npu(ops.logit_grad.out, xe, dye, -1.0, dx=out) is None
    assert_close(out, ops.logit_grad(xe.contiguous(), dye.contiguous(), -1.0))


# ------------------------------------------------------------------------------------------------------------
# Empty inputs: correctly shaped outputs, reductions over nothing are zeros (aclnn would leave them untouched).

def test_empty_inputs(backend):
    backend.reset()
    gi, gw = npu(ops.prelu_backward.default, torch.randn(0, 3, 4), torch.randn(0, 3, 4), torch.randn(3))
    assert gi.shape == (0, 3, 4) and torch.equal(gw, torch.zeros(3))
    gw_out = torch.full((3,), float("nan"))
    npu(ops.prelu_backward.out, torch.randn(0, 3), torch.randn(0, 3), torch.randn(3), grad_input=torch.empty(0, 3),
        grad_weight=gw_out)
    assert torch.equal(gw_out, torch.zeros(3))

    for idx, idx_type in [([0, 0, 0], 0), ([0, 0], 1)]:
        out = torch.full((len(idx), 8), float("nan"))
        npu(ops.grouped_bias_add_grad.out, torch.randn(0, 8), torch.tensor(idx), idx_type, out=out)
        assert torch.equal(out, torch.zeros(len(idx), 8))
    assert torch.equal(npu(ops.grouped_bias_add_grad.default, torch.randn(3, 0, 8), None, 0), torch.zeros(3, 8))
    assert npu(ops.grouped_bias_add_grad.default, torch.randn(4, 0), torch.tensor([1, 4]), 0).shape == (2, 0)

    assert npu(ops.gelu_backward_v2.default, torch.randn(0, 6), torch.randn(6), "none").shape == (0, 6)
    assert npu(ops.logit_grad.default, torch.randn(2, 0), torch.randn(2, 0), -1.0).shape == (2, 0)
    g = torch.randn(2, 0, 4, 4)
    assert npu(ops.scaled_masked_softmax_backward.default, g, g, torch.ones(1, 1, 4, 4, dtype=torch.bool), 1.0,
               True).shape == (2, 0, 4, 4)
    assert backend.aclnn_calls() == {}  # nothing to compute: aclnn is never called


# ------------------------------------------------------------------------------------------------------------
# Validation: the shared checks (plus the NPU dtype guard) raise before any aclnn call.

FP64_CASES = [
    (ops.logit_grad.default, lambda: (torch.rand(3, dtype=torch.float64), torch.rand(3, dtype=torch.float64), -1.0),
     "npu_ext.logit_grad: x must have dtype torch.float16, torch.bfloat16 or torch.float32, but got torch.float64"),
    (ops.gelu_backward_v2.default, lambda: (torch.rand(3), torch.rand(3, dtype=torch.float64), "none"),
     "npu_ext.gelu_backward_v2: self must have dtype torch.float16, torch.bfloat16 or torch.float32, "
     "but got torch.float64"),
    (ops.prelu_backward.default, lambda: (torch.rand(2, 3).double(), torch.rand(2, 3).double(), torch.rand(3).double()),
     "npu_ext.prelu_backward: self must have dtype torch.float16, torch.bfloat16 or torch.float32, "
     "but got torch.float64"),
    (ops.grouped_bias_add_grad.default, lambda: (torch.rand(4, 2).double(), torch.tensor([4]), 0),
     "npu_ext.grouped_bias_add_grad: grad_y must have dtype torch.float16, torch.bfloat16 or torch.float32, "
     "but got torch.float64"),
    (ops.scaled_masked_softmax_backward.default,
     lambda: (torch.rand(1, 1, 2, 2).double(), torch.rand(1, 1, 2, 2).double(),
              torch.zeros(1, 1, 2, 2, dtype=torch.bool), 1.0, False),
     "npu_ext.scaled_masked_softmax_backward: grad_output must have dtype torch.float16, torch.bfloat16 or "
     "torch.float32, but got torch.float64"),
]


@pytest.mark.parametrize("op,make_args,message", FP64_CASES)
def test_fp64_rejected_before_aclnn(backend, op, make_args, message):
    backend.reset()
    with pytest.raises(RuntimeError) as e:
        npu(op, *make_args())
    assert str(e.value).splitlines()[0] == message
    assert backend.aclnn_calls() == {}


BAD_GROUP_IDX = [
    ([3, 2, 10], 0, "npu_ext.grouped_bias_add_grad: group_idx must be non-decreasing (cumulative end offsets), "
                    "but group_idx[1] = 2 < group_idx[0] = 3"),
    ([3, -1, 10], 0, "npu_ext.grouped_bias_add_grad: group_idx must be non-negative, but group_idx[1] = -1"),
    ([3, 7, 9], 0, "npu_ext.grouped_bias_add_grad: the last entry of group_idx must equal the number of rows of "
                   "grad_y (10), but got 9"),
    ([3, 7, 12], 0, "npu_ext.grouped_bias_add_grad: group_idx[2] = 12 exceeds the number of rows of grad_y (10)"),
    ([3, 4, 4], 1, "npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), "
                   "but the first 3 counts already sum to 11"),
    ([3, 4, 2], 1, "npu_ext.grouped_bias_add_grad: group_idx counts must sum to the number of rows of grad_y (10), "
                   "but they sum to 9"),
    ([5, -2, 7], 1, "npu_ext.grouped_bias_add_grad: group_idx must be non-negative, but group_idx[1] = -2"),
]


@pytest.mark.parametrize("values,idx_type,message", BAD_GROUP_IDX)
def test_grouped_bias_add_grad_bad_group_idx(backend, values, idx_type, message):
    gy, idx = torch.randn(10, 4), torch.tensor(values, dtype=torch.int32)
    backend.reset()
    for call in [lambda: npu(ops.grouped_bias_add_grad.default, gy, idx, idx_type),
                 lambda: npu(ops.grouped_bias_add_grad.out, gy, idx, idx_type, out=torch.empty(len(values), 4))]:
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value).splitlines()[0] == message
    assert backend.aclnn_calls() == {}


SHARED_CHECK_CASES = [
    (ops.logit_grad.default, lambda: (torch.rand(3), torch.rand(4), -1.0)),
    (ops.logit_grad.out, lambda: (torch.rand(3), torch.rand(3), -1.0), lambda: dict(dx=torch.empty(3).half())),
    (ops.gelu_backward_v2.default, lambda: (torch.rand(3), torch.rand(3), "Tanh")),
    (ops.gelu_backward_v2.default, lambda: (torch.rand(3), torch.rand(4), "none")),
    (ops.gelu_backward_v2.out, lambda: (torch.rand(3).half(), torch.rand(3), "none"),
     lambda: dict(grad_input=torch.empty(3).half())),
    (ops.prelu_backward.default, lambda: (torch.rand(2, 3), torch.rand(2, 3), torch.rand(2))),
    (ops.prelu_backward.default, lambda: (torch.rand(2, 3).half(), torch.rand(2, 3), torch.rand(3))),
    (ops.grouped_bias_add_grad.default, lambda: (torch.rand(4, 2), torch.tensor([4.0]), 0)),
    (ops.grouped_bias_add_grad.default, lambda: (torch.rand(4, 2), torch.tensor([4]), 2)),
    (ops.grouped_bias_add_grad.default, lambda: (torch.rand(4, 2), None, 0)),
    (ops.scaled_masked_softmax_backward.default,
     lambda: (torch.rand(1, 1, 2, 2), torch.rand(1, 1, 2, 2), torch.zeros(1, 1, 2, 2), 1.0, False)),
    (ops.scaled_masked_softmax_backward.default,
     lambda: (torch.rand(1, 1, 2, 5000), torch.rand(1, 1, 2, 5000), torch.zeros(1, 1, 2, 2), 1.0, True)),
    # the documented limits (issue 20): aclnn rejects a 9-D gelu (161002), and the A2 GroupedBiasAddGrad kernel
    # keeps group offsets in int32 (a stride-0 view needs no memory)
    (ops.gelu_backward_v2.default, lambda: (torch.rand([1] * 9), torch.rand(1), "none")),
    (ops.gelu_backward_v2.default, lambda: (torch.rand(2), torch.rand([1] * 9), "tanh")),
    (ops.grouped_bias_add_grad.default, lambda: (torch.zeros(1, 2).expand(2**31, 2), torch.tensor([2**31]), 0)),
]


@pytest.mark.parametrize("case", SHARED_CHECK_CASES)
def test_shared_validation_before_aclnn(backend, case):
    """The NPU kernels raise exactly what the CPU kernels raise (one shared implementation), before aclnn."""
    op, make_args = case[0], case[1]
    make_kwargs = case[2] if len(case) > 2 else dict
    with pytest.raises(RuntimeError) as cpu_error:
        op(*make_args(), **make_kwargs())
    backend.reset()
    with pytest.raises(RuntimeError) as npu_error:
        npu(op, *make_args(), **make_kwargs())
    assert str(npu_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]
    assert str(npu_error.value).startswith("npu_ext.")
    assert backend.aclnn_calls() == {}
