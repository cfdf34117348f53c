"""The device-generic implementation of the backward ops (csrc/ops/<family>/composite.cpp, ATen ops,
registered on CompositeExplicitAutograd): what runs on CUDA, XPU, MPS and every other device without a
dedicated kernel. Tested on the CPU by calling that kernel directly (OpOverload._op_dk) against the float64
oracle on the sample table; the dispatcher still sends CPU, Meta and PrivateUse1 tensors to their own kernels."""

import math
import re

import pytest
import torch

from torch_ext.testing import oracle
from torch_ext.testing import samples
from torch_ext.testing.tolerances import assert_accurate

pytestmark = pytest.mark.asan

ops = torch.ops.npu_ext
GENERIC = "CompositeExplicitAutograd"


def generic(overload, *args, **kwargs):
    r = overload._op_dk(GENERIC, *args, **kwargs)
    return r if isinstance(r, tuple) else (r,)


VALUE_SAMPLES = [(s, layout) for layout in ("contiguous", "transposed", "expanded")
                 for s in samples.samples("test", layout=layout)]


@pytest.mark.parametrize("sample,layout", VALUE_SAMPLES, ids=[f"{s.id}-{lay}" for s, lay in VALUE_SAMPLES])
def test_generic_matches_oracle(sample, layout):
    outs = generic(sample.info.op.default, *sample.args, **sample.kwargs)
    for out, exp, meta, name in zip(outs, sample.expected(), sample.run_meta(), sample.info.outputs):
        assert out.dtype == meta.dtype and out.shape == meta.shape and out.is_contiguous(), name
        assert_accurate(out, exp, sample.dtype, f"generic {sample.id} {layout} {name}")


RANGE = list(samples.range_samples())


@pytest.mark.parametrize("sample", RANGE, ids=[s.id for s in RANGE])
def test_generic_whole_normal_range(sample):
    samples.check_range(sample, lambda args, kwargs: generic(sample.info.op.default, *args, **kwargs))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_generic_gelu_special_values(approximate):
    x = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0, 1e20, -1e20, math.inf, -math.inf, math.nan])
    g = torch.ones_like(x)
    (out,) = generic(ops.gelu_backward_v2.default, g, x, approximate)
    assert_accurate(out, oracle.gelu_backward_v2(g, x, approximate), torch.float32)
    assert out[0] == 0.5 and out[4] == 1.0 and out[5] == 0.0


@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.25, 0.5, 1.0, 2.0, math.inf, math.nan, 0.1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_generic_logit_edges(eps, dtype):
    x = torch.tensor([-0.5, 0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.5, math.inf, -math.inf, math.nan], dtype=dtype)
    dy = torch.ones_like(x)
    (out,) = generic(ops.logit_grad.default, x, dy, eps)
    assert_accurate(out, oracle.logit_grad(x, dy, eps), dtype, f"eps={eps}")


@pytest.mark.parametrize("case", samples.PRELU_DEVICE_CASES, ids=lambda c: c[0])
def test_generic_prelu_follows_the_a2_a3_kernel(case):
    _, dtype, x, g, w, gi, gw = case
    x, g, w = (torch.tensor(v, dtype=dtype) for v in (x, g, w))
    for out, expected in zip(generic(ops.prelu_backward.default, g, x, w), (gi, gw)):
        torch.testing.assert_close(out, torch.tensor(expected, dtype=dtype), rtol=0, atol=0, equal_nan=True)


def test_generic_empty_and_masked():
    (gw,) = generic(ops.prelu_backward.default, torch.empty(0, 6, 5), torch.empty(0, 6, 5), torch.ones(6))[1:]
    assert torch.equal(gw, torch.zeros(6))
    (out,) = generic(ops.grouped_bias_add_grad.default, torch.ones(0, 4), torch.tensor([0, 0]))
    assert torch.equal(out, torch.zeros(2, 4))
    g = torch.randn(1, 1, 2, 3)
    y = torch.full((1, 1, 2, 3), math.nan)
    (out,) = generic(ops.scaled_masked_softmax_backward.default, g, y, torch.ones(1, 1, 2, 3, dtype=torch.bool))
    assert torch.equal(out, torch.zeros(1, 1, 2, 3))  # a select: masked NaN become exactly 0


@pytest.mark.parametrize("name", list(samples.OPS))
def test_generic_out_and_aliasing(name):
    s = next(samples.samples("tiny", dtypes=(torch.float32,), ops_=[name]))
    outs = {n: torch.full(list(m.shape)[::-1], 7.0).permute(*reversed(range(m.dim())))  # transposed outputs
            for n, m in zip(s.info.outputs, s.run_meta())}
    assert s.info.op.out._op_dk(GENERIC, *s.args, **s.kwargs, **outs) is None  # () through _op_dk
    for (n, o), e in zip(outs.items(), s.info.oracle(s.args, s.kwargs)):
        assert_accurate(o, e, torch.float32, n)


def test_generic_validates_like_every_kernel():
    with pytest.raises(RuntimeError, match=r"^npu_ext\.grouped_bias_add_grad: group_idx must be non-decreasing"):
        generic(ops.grouped_bias_add_grad.default, torch.zeros(10, 3), torch.tensor([3, 2, 10]))
    with pytest.raises(RuntimeError, match=r"^npu_ext\.logit_grad: dx must be on the same device"):
        ops.logit_grad.out._op_dk(GENERIC, torch.zeros(3), torch.zeros(3), dx=torch.zeros(3, device="meta"))
    with pytest.raises(RuntimeError, match=r"^npu_ext\.gelu_backward_v2: output grad_input must not have internally"):
        ops.gelu_backward_v2.out._op_dk(GENERIC, torch.zeros(3), torch.zeros(3), grad_input=torch.zeros(1).expand(3))


@pytest.mark.parametrize("overload", [f"{n}{o}" for n in samples.OPS for o in ("", ".out")])
def test_dispatch_table(overload):
    """CPU and Meta keep their own kernels; devices without one (CUDA, XPU, MPS, ...) get the generic one."""
    table = torch._C._dispatch_dump_table(f"npu_ext::{overload}")
    entry = {m.group(1): m.group(2) for m in re.finditer(r"^(\w+): (.*)$", table, re.M)}
    for key in ("CPU", "Meta"):
        assert "default backend kernel" not in entry[key] and "/composite.cpp" not in entry[key], entry[key]
    for key in ("CUDA", "XPU", "MPS"):
        assert re.search(r"csrc/ops/\w+/composite\.cpp", entry[key]), (key, entry[key])
