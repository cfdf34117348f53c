"""Training through autograd on ``npu`` tensors: the real torch_npu 2.13.0 on the fake CANN of ``make test-npu``.

* The five torch_ext functions (and the four modules, and ``torch_ext.nn.convert`` with an optimizer step) on npu
  tensors in fp32, fp16 and bf16, forward and backward through autograd: values and gradients against float64
  oracles (the contract's accuracy metric), against the same calls on the CPU (bitwise where both compute the same
  IEEE operations in the same order, else within CPU_EPS epsilons of the tensor's scale, each case saying why), and
  double backward in fp32 against float64 native PyTorch; the aclnn backward operators seen to run.
* F1: ``torch_ext.gelu(x_npu)`` (approximate="none") is erf-GELU, never aclnnGelu's tanh form.
* Megatron on npu tensors: tests/npu/test_npu_megatron.py.

Run: ``make test-npu NPU_TESTS=tests/npu/test_npu_training.py``. Skipped (the whole module) where torch_npu cannot be
imported or torch_ext did not load its NPU kernels; under make test-npu a skip is a failure.
"""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from npu_training_common import AVAILABLE, DTYPES, NPU, REASON, NpuOpLog, aclnn_calls, f64

pytestmark = pytest.mark.skipif(not AVAILABLE, reason=REASON)

from torch_ext.testing import oracle  # noqa: E402
from torch_ext.testing import samples  # noqa: E402
import torch_ext  # noqa: E402
from torch_ext.testing.tolerances import assert_accurate  # noqa: E402


# ----------------------------------------------------------------------------------------------------------
# The functions: every variant the functions have, each run on npu and on the CPU from the same rounded inputs.
def _rand(gen, shape, low, high):
    return torch.rand(shape, generator=gen, dtype=f64) * (high - low) + low


GROUP_SIZES = [3, 0, 40, 1, 0, 70, 17, 0]  # empty groups first, inside and last
ENDS = torch.tensor(GROUP_SIZES).cumsum(0)
COUNTS = torch.tensor(GROUP_SIZES)
ROWS = sum(GROUP_SIZES)


def _fully_masked_rows(gen):
    """A (B, 1, S1, S2) mask with some rows masked everywhere."""
    m = torch.rand(2, 1, 9, 33, generator=gen) < 0.3
    m[0, 0, 2] = True
    m[1, 0, 7] = True
    return m


def _native_zero_rows(x, mask, scale):
    """Megatron's fused-kernel convention written natively: a fully masked row is 0."""
    return torch.where(mask.all(-1, keepdim=True), 0.0, samples.native_softmax(x, mask, scale))


def _native_probs(x, b, p, group_idx=None, group_idx_type=0):
    """x + p * bias[group], written natively."""
    rows = samples.native_grouped(torch.zeros_like(x), b, group_idx, group_idx_type)
    return x + p.reshape(x.shape[:-1] + (1,)) * rows


def _softmax_grad_oracle(scale, fix_triu=False):
    """The gradient the backward operator must give for the forward output y it is handed (oracle.py): in fp16/bf16
    y is rounded, which native float64 autograd does not see."""
    def grads(g, tensors, extras, y):
        mask = extras.get("mask", torch.zeros((), dtype=torch.bool))
        return [oracle.scaled_masked_softmax_backward(g, y, mask, scale, fix_triu)]
    return grads


def _prelu_grad_oracle(g, tensors, extras, y):
    """oracle.prelu_backward: the contract rounds each grad_weight term to the dtype before the sum (the A2/A3
    kernels), which native float64 autograd does not."""
    return list(oracle.prelu_backward(g, tensors[0], tensors[1]))


class Case:
    """make(gen) -> (differentiable fp64 inputs, non-differentiable CPU tensors by name); ours / native take both.
    grad_oracle(g, inputs, extras, y) -> float64 gradients, when native float64 autograd is not the contract.
    bitwise: indices of the results (0 = forward output, i = gradient of input i - 1) equal to the CPU's bit for
    bit, by construction; the others differ in the last place, for `why`.
    fp32_inputs: indices of inputs kept in fp32 whatever the dtype (router probabilities)."""

    def __init__(self, name, make, ours, native, why, bitwise=(), grad_oracle=None, fp32_inputs=()):
        self.name, self.make, self.ours, self.native, self.why = name, make, ours, native, why
        self.bitwise, self.grad_oracle, self.fp32_inputs = set(bitwise), grad_oracle, set(fp32_inputs)


_TRANSCENDENTAL = "exp/erf/tanh/log: the CPU kernels' own vectorised polynomials vs ATen's and the aclnn models' libm"
_SUMS = "fp32 sums in another order (the CPU kernel's vector lanes vs the aclnn model's sequential loop)"
_SOFTMAX_WHY = "the row's exp and its fp32 sum (CPU: fused vectorised kernel; npu: the aclnn model); backward: its sum"
_PROBS_WHY = "x + p b: one fused fp32 multiply-add on npu, a rounded product then the sum on the CPU; sums in order"
CASES = [
    Case("gelu", lambda g: ([_rand(g, (5, 37, 19), -5, 5)], {}),
         lambda x: torch_ext.gelu(x), lambda x: F.gelu(x), _TRANSCENDENTAL),
    # [-3.5, 3.5]: the fake aclnnGeluBackwardV2's tanh model cancels in fp32 below x = -4 (0.5 (1 + t) with t -> -1;
    # 98 T there, the CPU kernel 0.3 T); the real kernel's tail arithmetic is not audited.
    Case("gelu_tanh", lambda g: ([_rand(g, (5, 37, 19), -3.5, 3.5)], {}),
         lambda x: torch_ext.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh"), _TRANSCENDENTAL),
    # x > 0 ? x : w x and its gradient w g: one IEEE product each; grad_weight sums its terms
    Case("prelu_channel", lambda g: ([_rand(g, (4, 6, 5, 3), -3, 3), _rand(g, (6,), -0.5, 0.5)], {}),
         torch_ext.prelu, F.prelu, _SUMS, bitwise=(0, 1), grad_oracle=_prelu_grad_oracle),
    Case("prelu_scalar", lambda g: ([_rand(g, (4, 6, 5, 3), -3, 3), _rand(g, (1,), 0.1, 0.4)], {}),
         torch_ext.prelu, F.prelu, _SUMS, bitwise=(0, 1), grad_oracle=_prelu_grad_oracle),
    # dy / (x (1 - x)) in fp32, the same three operations in the CPU kernel and the aclnnLogitGrad model
    Case("logit", lambda g: ([_rand(g, (5, 37, 19), 0.01, 0.99)], {}),
         lambda x: torch_ext.logit(x), lambda x: torch.logit(x), _TRANSCENDENTAL, bitwise=(1,)),
    Case("logit_eps", lambda g: ([_rand(g, (5, 37, 19), 0.0, 1.0)], {}),  # a fifth of it clamped: gradient 0
         lambda x: torch_ext.logit(x, 0.2), lambda x: torch.logit(x, 0.2), _TRANSCENDENTAL, bitwise=(1,)),
    Case("softmax_padding",
         lambda g: ([_rand(g, (2, 3, 9, 33), -6, 6)], {"mask": torch.rand(2, 1, 1, 33, generator=g) < 0.3}),
         lambda x, mask: torch_ext.scaled_masked_softmax(x, mask, 0.25),
         lambda x, mask: samples.native_softmax(x, mask, 0.25), _SOFTMAX_WHY, grad_oracle=_softmax_grad_oracle(0.25)),
    Case("softmax_causal_mask", lambda g: ([_rand(g, (2, 3, 9, 33), -6, 6)], {"mask": samples.causal(9, 33)}),
         lambda x, mask: torch_ext.scaled_masked_softmax(x, mask, 0.5),
         lambda x, mask: samples.native_softmax(x, mask, 0.5), _SOFTMAX_WHY, grad_oracle=_softmax_grad_oracle(0.5)),
    Case("softmax_fix_triu", lambda g: ([_rand(g, (2, 3, 9, 33), -6, 6)], {}),
         lambda x: torch_ext.scaled_masked_softmax(x, None, 0.5, fix_triu_mask=True),
         lambda x: samples.native_softmax(x, None, 0.5, fix_triu_mask=True), _SOFTMAX_WHY,
         grad_oracle=_softmax_grad_oracle(0.5, fix_triu=True)),
    Case("softmax_zero_rows", lambda g: ([_rand(g, (2, 3, 9, 33), -6, 6)], {"mask": _fully_masked_rows(g)}),
         lambda x, mask: torch_ext.scaled_masked_softmax(x, mask, 0.7, fully_masked="zero"),
         lambda x, mask: _native_zero_rows(x, mask, 0.7), _SOFTMAX_WHY, grad_oracle=_softmax_grad_oracle(0.7)),
    Case("softmax_nomask_3d", lambda g: ([_rand(g, (3, 9, 33), -3, 3)], {}),
         lambda x: torch_ext.scaled_masked_softmax(x, None, 2.0), lambda x: torch.softmax(2.0 * x, -1), _SOFTMAX_WHY,
         grad_oracle=_softmax_grad_oracle(2.0)),
    # x + bias: one correctly rounded add (in fp32 and rounded once, or in the 16-bit dtype: the same, fp32 having
    # more than 2p + 1 bits); x's gradient is the incoming one
    Case("grouped_end_int64", lambda g: ([_rand(g, (ROWS, 24), -3, 3), _rand(g, (8, 24), -3, 3)], {"group_idx": ENDS}),
         lambda x, b, group_idx: torch_ext.grouped_bias_add(x, b, group_idx, 0),
         lambda x, b, group_idx: samples.native_grouped(x, b, group_idx, 0), _SUMS, bitwise=(0, 1)),
    Case("grouped_count_int32",
         lambda g: ([_rand(g, (ROWS, 24), -3, 3), _rand(g, (8, 24), -3, 3)], {"group_idx": COUNTS.int()}),
         lambda x, b, group_idx: torch_ext.grouped_bias_add(x, b, group_idx, 1),
         lambda x, b, group_idx: samples.native_grouped(x, b, group_idx, 1), _SUMS, bitwise=(0, 1)),
    Case("grouped_3d", lambda g: ([_rand(g, (8, 16, 24), -3, 3), _rand(g, (8, 1, 24), -3, 3)], {}),
         lambda x, b: torch_ext.grouped_bias_add(x, b), lambda x, b: samples.native_grouped(x, b), _SUMS,
         bitwise=(0, 1)),
    # + probs * bias[group]: the CPU kernel rounds the fp32 product, then the sum; the npu path is one fp32 addcmul
    # (the fake's: ATen's, which fuses the multiply-add; the real kernel's rounding is unaudited), then one rounding
    # to the dtype. x's gradient is the incoming one.
    Case("grouped_probs_count_int64",
         lambda g: ([_rand(g, (ROWS, 24), -3, 3), _rand(g, (8, 24), -3, 3), _rand(g, (ROWS, 1), 0, 1)],
                    {"group_idx": COUNTS}),
         lambda x, b, p, group_idx: torch_ext.grouped_bias_add(x, b, group_idx, 1, probs=p),
         lambda x, b, p, group_idx: _native_probs(x, b, p, group_idx, 1), _PROBS_WHY, bitwise=(1,), fp32_inputs=(2,)),
    Case("grouped_probs_end_int32",
         lambda g: ([_rand(g, (ROWS, 24), -3, 3), _rand(g, (8, 24), -3, 3), _rand(g, (ROWS,), -1, 1)],
                    {"group_idx": ENDS.int()}),
         lambda x, b, p, group_idx: torch_ext.grouped_bias_add(x, b, group_idx, 0, probs=p),
         lambda x, b, p, group_idx: _native_probs(x, b, p, group_idx, 0), _PROBS_WHY, bitwise=(1,)),
]
CASE_IDS = [c.name for c in CASES]

# npu against the CPU where not bitwise: |npu - cpu| <= CPU_EPS epsilons of the dtype times the tensor's scale (its
# largest magnitude; for prelu's grad_weight, a sum, the sum of its terms' magnitudes). Measured at most 1.6
# epsilons. Elementwise the two differ more where cancellation magnifies a last-place difference (GELU's left tail
# in 0.5 (1 + erf), the softmax gradient's g - sum(g y)): both are held elementwise to the contract's metric against
# float64 instead.
CPU_EPS = 4
_MANT = {torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}


def _eps(dtype):
    return 2.0 ** -_MANT[dtype]


def normwise_eps(a, c, scale=None):
    """max |a - c| / scale in epsilons of a's dtype (scale: max |c| unless given)."""
    scale = c.double().abs().max().item() if scale is None else scale
    return (a.double() - c.double()).abs().max().item() / (scale or 1.0) / _eps(a.dtype)


def _prelu_weight_grad_scale(x, g, w):
    """The scale of prelu's grad_weight, a sum of x g terms: the largest per-channel sum of |x g|."""
    return oracle.prelu_backward(g.abs(), -x.abs(), w)[1].abs().max().item()


def _scale(case, i, tensors, g):
    """The scale of result i of `case` for the comparison with the CPU (None: its largest magnitude)."""
    if case.name.startswith("prelu") and i == 2:
        return _prelu_weight_grad_scale(tensors[0], g, tensors[1])
    return None


def _inputs(case, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    tensors, extras = case.make(gen)
    tensors = [t.to(torch.float32 if i in case.fp32_inputs else dtype) for i, t in enumerate(tensors)]
    out_shape = case.native(*[t.double() for t in tensors], **extras).shape
    g = torch.randn(out_shape, generator=gen, dtype=f64).to(dtype)
    return tensors, extras, g


def run(case, tensors, extras, g, device):
    """Forward and backward of `case` on `device`; returns [output, gradients...] on the CPU."""
    xs = [t.to(device).requires_grad_() for t in tensors]
    kw = {k: v.to(device) for k, v in extras.items()}
    y = case.ours(*xs, **kw)
    assert y.device.type == device and y.dtype == tensors[0].dtype
    grads = torch.autograd.grad(y, xs, g.to(device))
    for gr, x in zip(grads, xs):
        assert gr.device.type == device and gr.dtype == x.dtype and gr.shape == x.shape
    return [y.detach().cpu()] + [gr.cpu() for gr in grads]


def expected(case, tensors, extras, g, y):
    """The float64 oracle of [output, gradients...] for the rounded inputs."""
    x64 = [t.double().requires_grad_() for t in tensors]
    y64 = case.native(*x64, **extras)
    if case.grad_oracle is not None:
        grads = case.grad_oracle(g, tensors, extras, y)
    else:
        grads = list(torch.autograd.grad(y64, x64, g.double()))
    return [y64.detach()] + [gr.detach() for gr in grads]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_function_forward_backward(case, dtype):
    tensors, extras, g = _inputs(case, dtype)
    log = NpuOpLog()
    with log:
        on_npu = run(case, tensors, extras, g, NPU)
    backward_ops = {o for o in log.npu_ext() if "backward" in o or "_grad" in o}
    assert len(backward_ops) == 1 and all(d == {NPU} for d in log.devices.values()), log.devices
    on_cpu = run(case, tensors, extras, g, "cpu")
    ref = expected(case, tensors, extras, g, on_npu[0])
    for i, (a, c, r) in enumerate(zip(on_npu, on_cpu, ref)):
        what = f"{case.name} {'output' if i == 0 else f'grad of input {i - 1}'}"
        # the contract's metric against float64, in the dtype of the input (router probabilities: fp32 in, fp32 out,
        # held to the activations' dtype as tests/training/test_autograd.py does)
        assert_accurate(a, r, dtype, what)
        if i in case.bitwise:
            assert torch.equal(a, c), f"{what}: npu differs from the CPU ({normwise_eps(a, c):.2f} epsilons)"
        else:
            d = normwise_eps(a, c, _scale(case, i, tensors, g))
            assert d <= CPU_EPS, f"{what}: npu {d:.2f} epsilons from the CPU ({case.why})"
    if case.name == "softmax_zero_rows":  # fully masked rows: exactly 0, with exactly zero gradient
        full = extras["mask"].all(-1, keepdim=True).expand(on_npu[0].shape)
        assert full.any()
        assert not on_npu[0][full].any() and not on_npu[1][full].any()
        assert on_npu[1][~full].any()


def test_backward_ops_run_as_aclnn_operators():
    """The gradients above come from the aclnn backward operators (the fake libopapi counted their launches), not
    from a CPU fallback or a composite."""
    before = {api: aclnn_calls(api) for api in ("aclnnGeluBackwardV2", "aclnnPreluBackward", "aclnnLogitGrad",
                                                "aclnnScaledMaskedSoftmaxBackward", "aclnnGroupedBiasAddGrad",
                                                "aclnnGroupedBiasAddGradV2")}
    if None in before.values():  # pragma: no cover - a real CANN
        pytest.skip("not the fake CANN: no call counters")
    for case in CASES:
        tensors, extras, g = _inputs(case, torch.float32)
        run(case, tensors, extras, g, NPU)
    after = {api: aclnn_calls(api) for api in before}
    grew = {api for api in before if after[api] > before[api]}
    # counts (group_idx_type=1) take V2 where it exists (CANN 8.5), as the fake has it
    assert grew == set(before), (before, after)


# ----------------------------------------------------------------------------------------------------------
# F1: erf-GELU on the npu device, never aclnnGelu (the tanh form on an Atlas A2/A3, whatever `approximate` says).
def _erf_gelu_error_bound(x):
    """|gelu(x) - x Phi(x)| allowed in fp32: 8 fp32 epsilons of |x| (Phi's rounding, scaled by x; what even
    0.5 x (1 + erf(x / sqrt 2)) keeps in its cancelling left tail). The tanh form is 1.4e-4 |x| off at x = 1 and 10%
    at x = -3: more than 100 times that."""
    return 8 * torch.finfo(torch.float32).eps * x.abs() + torch.finfo(torch.float32).tiny


def _erf_gelu64(x):
    x = x.double()
    return x * 0.5 * torch.erfc(-x / math.sqrt(2.0))


def test_gelu_none_is_erf_gelu_f1():
    x = torch.cat([torch.linspace(-6, 6, 2401), torch.tensor([-3.0, -1.0, 1.0])])
    y = torch_ext.gelu(x.to(NPU)).cpu()
    err = (y.double() - _erf_gelu64(x)).abs()
    bound = _erf_gelu_error_bound(x)
    assert (err <= bound).all(), f"not erf-GELU: max |err| / |x| = {(err / x.abs().clamp_min(1e-30)).max():.3e}"
    # the bound tells the two forms apart: aclnnGelu's tanh form (PyTorch's, in fp32) fails it
    tanh_form = F.gelu(x, approximate="tanh")
    assert not ((tanh_form.double() - _erf_gelu64(x)).abs() <= bound).all()
    # and the module: torch_ext.nn.GELU() on npu
    m = torch_ext.nn.GELU().to(NPU)
    assert torch.equal(m(x.to(NPU)).cpu(), y)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_gelu_none_is_erf_gelu_16bit_f1(dtype):
    """In 16 bits the forms differ where GELU's tail is: -3 gives -0.00405 (erf) and -0.00364 (tanh)."""
    x = torch.linspace(-4, 0, 401).to(dtype)
    y = torch_ext.gelu(x.to(NPU)).cpu().double()
    ref = _erf_gelu64(x)
    one_ulp = torch.pow(2.0, torch.floor(torch.log2(ref.abs().clamp_min(1e-30)))) * _eps(dtype)
    assert ((y - ref).abs() <= one_ulp).all()
    tanh_form = F.gelu(x.double(), approximate="tanh").to(dtype).double()
    assert not ((tanh_form - ref).abs() <= one_ulp).all()


# ----------------------------------------------------------------------------------------------------------
# Double backward (gradient penalty, Hessian-vector product) on npu, fp32, against float64 native PyTorch:
# every function supports it (tests/training/test_autograd.py runs gradgradcheck on all of them in fp64).
def _second_order(fn, inputs, extras, v):
    y = fn(*inputs, **extras)
    w = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).reshape(y.shape).to(y.device)
    grads = torch.autograd.grad((y * y * w).sum(), inputs, create_graph=True)
    penalty = sum((gr * gr).sum() for gr in grads)
    hv = torch.autograd.grad(sum((gr * u).sum() for gr, u in zip(grads, v)), inputs, allow_unused=True,
                             retain_graph=True)
    pg = torch.autograd.grad(penalty, inputs, allow_unused=True)
    out = [penalty.detach()] + [h if h is not None else torch.zeros_like(t) for h, t in zip(hv + pg, inputs + inputs)]
    return [o.detach().cpu().double() for o in out]


# fp32 against float64 (and against the CPU's fp32), relative to each result's largest magnitude (the penalty and
# the products sum many terms): measured at most 2.8e-6 (prelu with one weight: one sum of 360 terms), 1e-6 elsewhere
DOUBLE_BACKWARD_TOL = 1e-5


@pytest.mark.parametrize("case", [c for c in CASES if c.name != "gelu_tanh"] + [
    Case("gelu_tanh", lambda g: ([_rand(g, (5, 37, 19), -3, 3)], {}), lambda x: torch_ext.gelu(x, "tanh"),
         lambda x: F.gelu(x, approximate="tanh"), _TRANSCENDENTAL)], ids=lambda c: c.name)
def test_double_backward(case):
    gen = torch.Generator().manual_seed(1)
    tensors, extras = case.make(gen)
    v = [torch.randn(t.shape, generator=gen, dtype=f64) for t in tensors]
    x32 = [t.float() for t in tensors]

    def on(device, dtype):
        xs = [t.to(device=device, dtype=dtype).requires_grad_() for t in x32]
        kw = {k: t.to(device) for k, t in extras.items()}
        fn = case.native if dtype == f64 else case.ours
        return _second_order(fn, xs, kw, [u.to(device=device, dtype=dtype) for u in v])

    log = NpuOpLog()
    with log:
        got = on(NPU, torch.float32)
    assert all(d == {NPU} for d in log.devices.values()) and log.npu_ext(), log.devices
    cpu = on("cpu", torch.float32)
    ref = on("cpu", f64)
    for i, (a, c, r) in enumerate(zip(got, cpu, ref)):
        scale = r.abs().max().item() or 1.0
        assert (a - r).abs().max().item() <= DOUBLE_BACKWARD_TOL * scale, (case.name, i)
        assert (a - c).abs().max().item() <= DOUBLE_BACKWARD_TOL * scale, (case.name, i)


# ----------------------------------------------------------------------------------------------------------
# The modules, with their parameters on npu.
def _modules(gen):
    """(name, module, input, extra forward arguments, native float64 forward(module, x, **extras))"""
    prelu = torch_ext.nn.PReLU(6)
    gba = torch_ext.nn.GroupedBiasAdd(8, 24, group_idx_type=1)
    with torch.no_grad():
        prelu.weight.copy_(_rand(gen, (6,), -0.5, 0.5))
        gba.bias.copy_(_rand(gen, (8, 24), -3, 3))
    return [
        ("GELU", torch_ext.nn.GELU(), _rand(gen, (5, 37, 19), -5, 5), {}, lambda m, x: F.gelu(x)),
        ("GELU_tanh", torch_ext.nn.GELU("tanh"), _rand(gen, (5, 37, 19), -3.5, 3.5), {},
         lambda m, x: F.gelu(x, approximate="tanh")),
        ("PReLU", prelu, _rand(gen, (4, 6, 5, 3), -3, 3), {}, lambda m, x: F.prelu(x, m.weight)),
        ("ScaledMaskedSoftmax", torch_ext.nn.ScaledMaskedSoftmax(0.7, fully_masked="zero"),
         _rand(gen, (2, 3, 9, 33), -6, 6), {"mask": _fully_masked_rows(gen)},
         lambda m, x, mask: _native_zero_rows(x, mask, 0.7)),
        ("GroupedBiasAdd", gba, _rand(gen, (ROWS, 24), -3, 3),
         {"group_idx": COUNTS, "probs": _rand(gen, (ROWS,), 0, 1)},  # fp32 router probabilities
         lambda m, x, group_idx, probs: _native_probs(x, m.bias, probs, group_idx, 1)),
    ]


def _on(t, device):
    """An extra argument on `device` (floating ones in fp32, like router probabilities)."""
    return t.to(device, torch.float32) if t.is_floating_point() else t.to(device)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_modules(dtype):
    """torch_ext.nn modules moved to npu (.to(device, dtype)): output, input gradient and parameter gradients
    (in .grad, on npu) against the float64 oracle and the same module on the CPU."""
    gen = torch.Generator().manual_seed(2)
    for name, module, x, extras, native in _modules(gen):
        xd = x.to(dtype)
        g = None
        results = {}
        for device in (NPU, "cpu"):
            m = copy.deepcopy(module).to(device=device, dtype=dtype)
            xi = xd.to(device).requires_grad_()
            log = NpuOpLog()
            with log:
                y = m(xi, **{k: _on(v, device) for k, v in extras.items()})
                if g is None:
                    g = torch.randn(y.shape, generator=gen, dtype=f64).to(dtype)
                y.backward(g.to(device))
            assert all(d == {device} for d in log.devices.values()) and log.npu_ext(), (name, log.devices)
            params = list(m.parameters())
            assert all(p.grad is not None and p.grad.device.type == device for p in params), name
            results[device] = [y.detach().cpu(), xi.grad.cpu()] + [p.grad.cpu() for p in params]
        m64 = copy.deepcopy(module).to(dtype).double()  # the parameters as rounded to dtype
        x64 = xd.double().requires_grad_()
        y64 = native(m64, x64, **{k: (v.float().double() if v.is_floating_point() else v) for k, v in extras.items()})
        ref = [y64.detach()] + list(torch.autograd.grad(y64, [x64] + list(m64.parameters()), g.double()))
        scales = [None] * len(ref)
        if name == "PReLU":  # the contract rounds each grad_weight term (oracle.prelu_backward), a sum
            w = module.weight.detach().to(dtype)
            ref[1:] = oracle.prelu_backward(g, xd, w)
            scales[2] = _prelu_weight_grad_scale(xd, g, w)
        if name == "ScaledMaskedSoftmax":  # the gradient of the rounded output the op is handed
            ref[1] = oracle.scaled_masked_softmax_backward(g, results[NPU][0], extras["mask"], 0.7)
        for i, (a, c, r) in enumerate(zip(results[NPU], results["cpu"], ref)):
            what = f"{name} result {i}"
            assert a.dtype == dtype, what
            assert_accurate(a, r, dtype, what)
            d = normwise_eps(a, c, scales[i])
            assert d <= CPU_EPS, f"{what}: npu {d:.2f} epsilons from the CPU"


# Optimizers run per parameter (foreach=False) here: PyTorch's default multi-tensor path on npu calls
# aclnnForeach* operators, which the fake libopapi does not model; on the CPU the default is this path anyway.
class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.PReLU(32, init=0.1),
                                        torch.nn.Linear(32, 32), torch.nn.GELU(approximate="tanh"), torch.nn.PReLU())
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.body(x))


# Parameter gradients of the small model, npu against the CPU (fp32), relative to each gradient's largest magnitude:
# sums over 64 rows in another order and GELU's last-place differences, through three layers; the scalar PReLU
# weight's gradient is one sum of 2048 terms that cancel down to 0.0064 (measured 7.4 epsilons = 8.8e-7 there).
TRAIN_TOL = 1e-5


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_convert_and_optimizer_step(optimizer):
    """torch_ext.nn.convert on a model moved to npu, one optimizer step: the converted model's npu_ext backward ops
    run on npu and the parameters after the step equal the CPU's (fp32; within CPU_EPS of each parameter's scale:
    GELU and the Linear layers' products differ in the last place, see test_function_forward_backward)."""
    torch.manual_seed(0)
    model = _Net()
    torch_ext.nn.convert(model)
    assert isinstance(model.body[1], torch_ext.nn.GELU) and isinstance(model.body[5], torch_ext.nn.PReLU)
    x = torch.randn(64, 16)
    target = torch.randn(64, 4)
    after = {}
    for device in (NPU, "cpu"):
        m = copy.deepcopy(model).to(device)
        opt = (torch.optim.SGD(m.parameters(), lr=0.5, momentum=0.9, foreach=False) if optimizer == "SGD"
               else torch.optim.Adam(m.parameters(), lr=1e-2, foreach=False))
        log = NpuOpLog()
        with log:
            loss = F.mse_loss(m(x.to(device)), target.to(device))
            loss.backward()
        opt.step()
        if device == NPU:
            assert {"npu_ext.gelu_backward_v2.default", "npu_ext.prelu_backward.default"} <= log.npu_ext()
            assert all(d == {NPU} for d in log.devices.values()), log.devices
        after[device] = [p.detach().cpu() for p in m.parameters()]
        after[device + " grads"] = [p.grad.cpu() for p in m.parameters()]
    moved = 0
    for p0, a, c, ga, gc in zip(model.parameters(), after[NPU], after["cpu"], after[NPU + " grads"],
                                after["cpu grads"]):
        assert normwise_eps(ga, gc) * _eps(torch.float32) <= TRAIN_TOL, normwise_eps(ga, gc)
        assert normwise_eps(a, c) <= CPU_EPS
        moved += int(not torch.equal(a, p0.detach()))
    assert moved == len(after[NPU])  # every parameter was updated
