"""The fake CANN's operators that a MindSpeed-LLM pretrain_gpt.py step reaches beyond the others
(tests/fake_cann/opapi/training_step.cpp and random.cpp; tests/integrations/test_mindspeed_llm.py runs that step):
each driven through torch_npu's own ATen kernel on the npu device, counted (the aclnn operator launched, no acl_op
fallback), and checked against the CPU:

* RoPE's frequencies, ``base ** (arange / dim)`` and ``1.0 / t`` (aclnnPowScalarTensor, aclnnReciprocal), and its
  ``torch.cos`` / ``torch.sin`` (aclnnCos, aclnnSin, and the in-place forms): bit for bit the CPU's result (fp32, rounded
  once for fp16 / bf16);
* the gradient norms (``torch.norm``, ``Tensor.norm(p=2)``: aclnnLinalgVectorNorm), against float64;
* dropout (``F.dropout``: aclnnDropoutGenMaskV2 then aclnnDropoutDoMask, the backward aclnnDropoutDoMask with the same
  mask): every element 0 or x * (1 / (1 - p)) exactly, the kept fraction within 5 standard deviations of 1 - p, the same
  mask for the same seed and another for the next draw, the gradient zero exactly where the output is;
* MindSpeed's AdamW (``torch._fused_adamw_``: aclnnApplyAdamWV2, once per parameter): three steps against the CPU's
  ``torch.optim.AdamW`` (fp32, int64 and fp32 step tensors, amsgrad, maximize; a bf16 parameter against the same
  update in fp32 rounded once).

torch_npu 2.7 and 2.13 route each the same way on an Atlas A2 (op-plugin's DO_COMPATIBILITY: the aclnn operator
when the CANN has it): make test-npu runs this file in the default runtime, make test-versions in every release
row's; tests/integrations/test_mindspeed_llm.py counts each in MindSpeed-LLM's step in the MindSpeed stage's.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import fake_cann_lib

pytestmark = pytest.mark.skipif(fake_cann_lib.opapi() is None, reason="not the fake CANN (no fake_opapi_calls)")

FLOATS = [torch.float32, torch.float16, torch.bfloat16]


# the acl_op (TBE) types op-plugin's DO_COMPATIBILITY would take instead, where the aclnn operator is missing
FALLBACKS = ("Cos", "Sin", "LpNormReduceV2", "LpNormUpdateV2", "StatelessDropOutGenMask", "DropOutDoMask",
             "DropOutGenMaskV3", "StatelessRandomUniformV2")


class Launches:
    """The fake CANN's launches of some aclnn operators during a block; none of the acl_op fallbacks launched."""

    def __init__(self, *apis):
        self.apis = apis

    def __enter__(self):
        self.before = {a: fake_cann_lib.opapi_calls(a) for a in self.apis}
        self.acl_op = {t: fake_cann_lib.runtime_count("acl_op " + t) for t in FALLBACKS}
        return self

    def __exit__(self, *exc):
        torch.npu.synchronize()
        self.counts = {a: fake_cann_lib.opapi_calls(a) - self.before[a] for a in self.apis}
        acl_op = {t: fake_cann_lib.runtime_count("acl_op " + t) - n for t, n in self.acl_op.items()}
        assert not any(acl_op.values()), acl_op


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["cos", "sin"])
def test_cos_sin(name, dtype):
    x = sample((33, 17), dtype)
    api = "aclnn" + name.capitalize()
    with Launches(api, "aclnnInplace" + name.capitalize()) as n:
        got = getattr(torch, name)(x.npu()).cpu()
        inplace = x.npu()
        getattr(inplace, name + "_")()
        inplace = inplace.cpu()
    assert n.counts == {api: 1, "aclnnInplace" + name.capitalize(): 1}, n.counts
    want = getattr(torch, name)(x.float()).to(dtype)  # fp32, rounded once
    assert got.dtype == dtype and torch.equal(got, want) and torch.equal(inplace, want)
    assert (got.double() - getattr(torch, name)(x.double())).abs().max() <= (1e-6 if dtype == torch.float32 else 1e-2)


def test_cos_of_an_integer_tensor_is_float32():
    x = torch.arange(-20, 20, dtype=torch.int64)
    got = torch.cos(x.npu()).cpu()
    assert got.dtype == torch.float32 and torch.equal(got, torch.cos(x.float()))


@pytest.mark.parametrize("dtype", FLOATS)
def test_reciprocal(dtype):
    """``1.0 / t`` (Megatron's rotary frequencies, MindSpeed's clipping coefficient) and ``reciprocal_``."""
    x = sample((40, 9), dtype, seed=4)
    x = torch.where(x.abs() < 0.1, torch.ones_like(x), x)
    with Launches("aclnnReciprocal", "aclnnInplaceReciprocal") as n:
        got = (1.0 / x.npu()).cpu()
        inplace = x.npu().reciprocal_().cpu()
    assert n.counts == {"aclnnReciprocal": 1, "aclnnInplaceReciprocal": 1}, n.counts
    want = torch.reciprocal(x.float()).to(dtype)
    assert got.dtype == dtype and torch.equal(got, want) and torch.equal(inplace, want)


@pytest.mark.parametrize("dtype", FLOATS)
def test_pow_of_a_scalar_and_of_two_tensors(dtype):
    """Megatron's rotary inverse frequencies: ``base ** (arange(0, dim, 2) / dim)`` (pow.Scalar), and a tensor
    ** tensor of two npu tensors; as the CPU's at::pow."""
    e = (torch.arange(0, 64, 2, dtype=torch.float32) / 64).to(dtype)
    b = sample((32,), dtype, seed=5).abs() + 0.5
    with Launches("aclnnPowScalarTensor", "aclnnPowTensorTensor") as n:
        got = (10000 ** e.npu()).cpu()
        both = torch.pow(b.npu(), e.npu()).cpu()
    assert n.counts == {"aclnnPowScalarTensor": 1, "aclnnPowTensorTensor": 1}, n.counts
    assert got.dtype == dtype and torch.equal(got, 10000 ** e) and torch.equal(both, torch.pow(b, e))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p,dim,keepdim", [(2, None, False), (2, (1,), True), (1, (0,), False), (3.0, None, False)])
def test_vector_norm(dtype, p, dim, keepdim):
    """torch.norm / Tensor.norm(p=2) (Megatron's per-bucket check, MindSpeed's gradient norm): vector_norm on the
    npu device; ord 1, 2 and 3 take aclnnLinalgVectorNorm (another ord the acl_op pair), against float64."""
    x = sample((64, 48), dtype, seed=1)
    with Launches("aclnnLinalgVectorNorm") as n:
        got = (torch.norm(x.npu(), p) if dim is None else torch.norm(x.npu(), p, dim=dim, keepdim=keepdim)).cpu()
        method = x.npu().norm(p=p).cpu()
    assert n.counts == {"aclnnLinalgVectorNorm": 2}, n.counts
    want = torch.linalg.vector_norm(x.double(), p, dim=dim, keepdim=keepdim)
    assert got.dtype == dtype and got.shape == want.shape
    tol = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    assert torch.allclose(got.double(), want, rtol=tol, atol=0), (got, want)
    assert torch.allclose(method.double(), torch.linalg.vector_norm(x.double(), p), rtol=tol, atol=0)


def test_the_gradient_norm_as_mindspeed_clips():
    """--clip-grad 1.0: the norm of each gradient, then the 2-norm of those (float32)."""
    grads = [sample(s, torch.float32, seed=i) for i, s in enumerate([(64, 16), (16,), (128, 64)])]
    with Launches("aclnnLinalgVectorNorm") as n:
        norms = torch.stack([torch.norm(g.npu(), 2.0) for g in grads])
        total = torch.norm(norms, 2.0).cpu()
    assert n.counts == {"aclnnLinalgVectorNorm": 4}
    want = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
    assert abs(float(total) - want) <= 1e-6 * want


@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout(dtype):
    p, n = 0.1, 100_000
    x = (sample((n // 100, 100), torch.float64, seed=2).abs() + 0.5).to(dtype)
    torch.npu.manual_seed(1234)
    xn = x.npu().requires_grad_()
    with Launches("aclnnDropoutGenMaskV2", "aclnnDropoutDoMask") as forward:
        y = F.dropout(xn, p, training=True)
    with Launches("aclnnDropoutGenMaskV2", "aclnnDropoutDoMask") as backward:
        y.backward(torch.ones_like(y))
    assert forward.counts == {"aclnnDropoutGenMaskV2": 1, "aclnnDropoutDoMask": 1}, forward.counts
    assert backward.counts == {"aclnnDropoutGenMaskV2": 0, "aclnnDropoutDoMask": 1}, backward.counts
    got, grad = y.detach().cpu(), xn.grad.cpu()
    kept = got != 0
    scaled = (x.float() * (1 / (1 - p))).to(dtype)  # times the scale, in fp32, rounded once
    assert torch.equal(got[kept], scaled[kept])
    fraction = kept.double().mean().item()
    assert abs(fraction - (1 - p)) <= 5 * math.sqrt(p * (1 - p) / n), fraction
    assert torch.equal(grad != 0, kept)  # the same mask
    assert torch.equal(grad[kept], torch.full_like(grad[kept], 1 / (1 - p)))
    torch.npu.manual_seed(1234)
    again = F.dropout(x.npu(), p, training=True).cpu()
    following = F.dropout(x.npu(), p, training=True).cpu()
    assert torch.equal(again != 0, kept)  # the same seed, the same mask
    assert not torch.equal(following != 0, kept)  # the next draw another


def test_dropout_off_or_eval_launches_nothing():
    x = sample((8, 8), torch.float32).npu()
    with Launches("aclnnDropoutGenMaskV2", "aclnnDropoutDoMask") as n:
        assert torch.equal(F.dropout(x, 0.1, training=False).cpu(), x.cpu())
        assert torch.equal(F.dropout(x, 0.0, training=True).cpu(), x.cpu())
    assert n.counts == {"aclnnDropoutGenMaskV2": 0, "aclnnDropoutDoMask": 0}


def params_and_grads(dtype, seed=3):
    shapes = [(32, 16), (16,), (7, 5, 3)]
    params = [sample(s, dtype, seed=seed + i) for i, s in enumerate(shapes)]
    grads = [[sample(s, dtype, seed=100 * (k + 1) + i) for i, s in enumerate(shapes)] for k in range(3)]
    return params, grads


@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, False), (False, True)])
def test_fused_adamw_against_the_cpu(amsgrad, maximize):
    """torch.optim.AdamW(fused=True) on npu (aclnnApplyAdamWV2 per parameter) against the CPU's single-tensor AdamW:
    three steps, float32, within a few ulps (the arithmetic order differs)."""
    params, grads = params_and_grads(torch.float32)
    kw = dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, amsgrad=amsgrad, maximize=maximize)
    cpu = [p.clone().requires_grad_() for p in params]
    npu = [p.npu().requires_grad_() for p in params]
    opt_cpu = torch.optim.AdamW(cpu, foreach=False, **kw)
    opt_npu = torch.optim.AdamW(npu, fused=True, **kw)
    with Launches("aclnnApplyAdamWV2") as n:
        for step in grads:
            for p, g in zip(cpu, step):
                p.grad = g.clone()
            for p, g in zip(npu, step):
                p.grad = g.npu()
            opt_cpu.step()
            opt_npu.step()
    assert n.counts == {"aclnnApplyAdamWV2": 3 * len(params)}, n.counts
    for a, b in zip(npu, cpu):
        assert torch.allclose(a.detach().cpu(), b.detach(), rtol=2e-6, atol=1e-7), (a, b)
    for a, b in zip(npu, cpu):
        for key in ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad else ()):
            # the CPU's exp_avg is a lerp, the kernel's (and the model's) beta1 * m + (1 - beta1) * g: a few ulps
            # of the terms, which is more relative to a sum that cancels
            assert torch.allclose(opt_npu.state[a][key].cpu(), opt_cpu.state[b][key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("step_dtype", [torch.int64, torch.float32])
def test_fused_adamw_as_mindspeed_calls_it(step_dtype):
    """MindSpeed's AdamW: torch._fused_adamw_ per parameter with a 0-dim step tensor (int64, MindSpeed's cache;
    fp32, torch's); the kernel sees step - 1 and adds the 1 back: the result is the CPU's for the same step."""
    params, grads = params_and_grads(torch.float32)
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.95, weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False)
    p_npu = [p.npu() for p in params]
    m_npu = [torch.zeros_like(p) for p in p_npu]
    v_npu = [torch.zeros_like(p) for p in p_npu]
    p_cpu = [p.clone().requires_grad_() for p in params]
    opt = torch.optim.AdamW(p_cpu, lr=kw["lr"], betas=(kw["beta1"], kw["beta2"]), eps=kw["eps"],
                            weight_decay=kw["weight_decay"], foreach=False)
    for k, step in enumerate(grads):
        t = torch.tensor(k + 1, dtype=step_dtype).npu()
        for i in range(len(params)):
            torch._fused_adamw_([p_npu[i]], [step[i].npu()], [m_npu[i]], [v_npu[i]], [], [t], **kw)
        for p, g in zip(p_cpu, step):
            p.grad = g.clone()
        opt.step()
    for a, b in zip(p_npu, p_cpu):
        assert torch.allclose(a.cpu(), b.detach(), rtol=2e-6, atol=1e-7)


def test_fused_adamw_of_a_bf16_parameter():
    """A bf16 parameter: every tensor promoted to fp32, the update computed there, each result rounded once."""
    params, grads = params_and_grads(torch.bfloat16)
    lr, b1, b2, wd, eps = 1e-2, 0.9, 0.95, 0.1, 1e-8
    p_npu = [p.npu().requires_grad_() for p in params]
    opt = torch.optim.AdamW(p_npu, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, fused=True)
    ref = [p.float() for p in params]
    m = [torch.zeros_like(p) for p in ref]
    v = [torch.zeros_like(p) for p in ref]
    for k, step in enumerate(grads, start=1):
        for p, g in zip(p_npu, step):
            p.grad = g.npu()
        opt.step()
        for i, g in enumerate(step):
            g = g.float()
            m[i] = (m[i].float() * b1 + g * (1 - b1)).bfloat16()
            v[i] = (v[i].float() * b2 + g * g * (1 - b2)).bfloat16()
            denom = v[i].float().sqrt() / math.sqrt(1 - b2 ** k) + eps
            ref[i] = (ref[i].float() * (1 - lr * wd) - m[i].float() / denom * (lr / (1 - b1 ** k))).bfloat16()
    for a, b in zip(p_npu, ref):
        got = a.detach().cpu()
        assert got.dtype == torch.bfloat16
        # the same formula; the rounding of m and v inside a step may differ by one bf16 ulp
        assert torch.allclose(got.float(), b.float(), rtol=2 ** -7, atol=1e-3), (got, b)
