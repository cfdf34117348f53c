"""torch.library.opcheck on every operator and overload: schema, fake (Meta) kernels, autograd registration,
and AOT dispatch with dynamic shapes."""

import pytest
import torch

from helpers import make

ops = torch.ops.npu_ext


def _samples():
    f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
    for dtype in (f32, bf16):
        g, x = make([4, 6], dtype), make([4, 6], dtype, layout="transposed")
        yield "gelu", ops.gelu_backward_v2.default, (g, x), {}
        yield "gelu_bcast", ops.gelu_backward_v2.default, (make([6], f16), x), {"approximate": "tanh"}
        yield "gelu_out", ops.gelu_backward_v2.out, (g, x), {"approximate": "tanh", "grad_input": torch.empty(4, 6, dtype=dtype)}

        x3, g3, w = make([3, 5, 4], dtype), make([3, 5, 4], dtype, layout="sliced"), make([5], dtype)
        yield "prelu", ops.prelu_backward.default, (g3, x3, w), {}
        yield "prelu_scalar_w", ops.prelu_backward.default, (g3, x3, make([1], dtype)), {}
        yield "prelu_out", ops.prelu_backward.out, (g3, x3, w), {
            "grad_input": torch.empty(3, 5, 4, dtype=dtype), "grad_weight": torch.empty(5, dtype=dtype)}

        gy = make([10, 7], dtype)
        for itype, idx in ((0, torch.tensor([2, 2, 10], dtype=torch.int32)), (1, torch.tensor([2, 0, 8]))):
            yield f"grouped_{itype}", ops.grouped_bias_add_grad.default, (gy, idx, itype), {}
        yield "grouped_3d", ops.grouped_bias_add_grad.default, (make([3, 4, 7], dtype),), {}
        yield "grouped_out", ops.grouped_bias_add_grad.out, (gy, torch.tensor([4, 10])), {"out": torch.empty(2, 7, dtype=dtype)}

        g4, y4 = make([2, 3, 4, 5], dtype), make([2, 3, 4, 5], dtype, low=0, high=1)
        mask = torch.rand(1, 3, 4, 5) < 0.3
        yield "softmax", ops.scaled_masked_softmax_backward.default, (g4, y4, mask, 0.5), {}
        yield "softmax_triu", ops.scaled_masked_softmax_backward.default, (g4, y4, mask), {"fix_triu_mask": True}
        yield "softmax_out", ops.scaled_masked_softmax_backward.out, (g4, y4, mask), {"out": torch.empty_like(g4)}

        xl, dy = make([3, 4], dtype, low=0, high=1), make([3, 4], dtype)
        yield "logit", ops.logit_grad.default, (xl, dy), {}
        yield "logit_eps", ops.logit_grad.default, (xl, dy, 0.1), {}
        yield "logit_out", ops.logit_grad.out, (xl, dy), {"eps": 0.0, "dx": torch.empty_like(xl)}


SAMPLES = list(_samples())


@pytest.mark.parametrize("name,op,args,kwargs", SAMPLES, ids=[f"{s[0]}-{s[1]._name}-{i}" for i, s in enumerate(SAMPLES)])
def test_opcheck(name, op, args, kwargs):
    torch.library.opcheck(op, args, kwargs)


def test_every_overload_is_covered():
    covered = {op.name() for _, op, _, _ in SAMPLES}
    expected = {f"npu_ext::{name}" + ("" if overload == "default" else f".{overload}")
                for name in ["gelu_backward_v2", "prelu_backward", "grouped_bias_add_grad",
                             "scaled_masked_softmax_backward", "logit_grad"]
                for overload in ["default", "out"]}
    assert expected <= covered
