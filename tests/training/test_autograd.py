"""Autograd through the npu_ext operators: gradcheck/gradgradcheck (fp64) of every function and every
differentiable input, of the backward operators themselves, gradients against native PyTorch in fp32, fp16
and bf16 (the contract's accuracy metric, against float64 native references), the nn modules and convert(), autocast.

Run as a script (``python tests/training/test_autograd.py``) to print the measured gradient errors per function and
dtype, next to the error of native PyTorch in the same dtype.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck, gradgradcheck

import torch_ext
from helpers import python_frames
from torch_ext.testing import oracle, samples
from torch_ext.testing.families.grouped_bias_add import GROUP_COUNT, native_grouped, native_grouped_probs
from torch_ext.testing.families.scaled_masked_softmax import ROW_MASK
from torch_ext.testing.families.scaled_masked_softmax import causal_mask as causal
from torch_ext.testing.families.scaled_masked_softmax import native_softmax
from torch_ext.testing.opinfo import leaf as rand
from torch_ext.testing.tolerances import THRESHOLD, assert_accurate, relative_errors

pytestmark = pytest.mark.release

ops = torch.ops.npu_ext
f64 = torch.float64


# (name, ours, native, input maker) per training function: each family's gradcheck cases in the sample table
# (torch_ext/testing/families/). Both functions take the same tensors; makers return fp64 leaves.
CASES = [case for info in samples.OPS.values() for case in info.gradcheck]
IDS = [c[0] for c in CASES]


# gradcheck: the derivative formulas (the C++ nodes, no architecture-specific code) against finite differences, in
# float64; the kernels' float64 values are held in every variant and under emulation by the op tests, and the double
# backward's by test_double_backward_matches_native. So once, natively (arch_independent): emulated, minutes.
@pytest.mark.arch_independent
@pytest.mark.parametrize("name,ours,native,make", CASES, ids=IDS)
def test_gradcheck(name, ours, native, make):
    inputs = make()
    assert gradcheck(ours, inputs)
    assert gradgradcheck(ours, inputs)


@pytest.mark.parametrize("name,ours,native,make", CASES, ids=IDS)
def test_double_backward_matches_native(name, ours, native, make):
    """Gradient penalty and Hessian-vector product equal native PyTorch's (fp64)."""
    inputs = make()
    v = [torch.randn_like(t) for t in inputs]

    def hvp_and_penalty(fn):
        out = fn(*inputs)
        w = torch.linspace(-1, 1, out.numel(), dtype=f64).reshape(out.shape)
        grads = torch.autograd.grad((out * out * w).sum(), inputs, create_graph=True)
        penalty = sum((g * g).sum() for g in grads)
        hv = torch.autograd.grad(sum((g * u).sum() for g, u in zip(grads, v)), inputs, allow_unused=True,
                                 retain_graph=True)
        pg = torch.autograd.grad(penalty, inputs, allow_unused=True)
        return [penalty] + [h if h is not None else torch.zeros_like(t) for h, t in zip(hv + pg, inputs + inputs)]

    for a, b in zip(hvp_and_penalty(ours), hvp_and_penalty(native)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------------------------------------
# The backward operators are differentiable (their derivatives are what double backward uses).
# (name, fn, make, per_call): each family's backward-op cases in the sample table.
BACKWARD_CASES = [case for info in samples.OPS.values() for case in info.backward_gradcheck]
PER_CALL_CASES = [case for case in BACKWARD_CASES if case[3]]


@pytest.mark.arch_independent  # as test_gradcheck
@pytest.mark.parametrize("name,fn,make,per_call", BACKWARD_CASES, ids=[c[0] for c in BACKWARD_CASES])
def test_backward_ops_gradcheck(name, fn, make, per_call):
    inputs = make()
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


@pytest.mark.parametrize("used", [0, 1], ids=["grad_input_only", "grad_weight_only"])
def test_prelu_backward_double_backward_one_output(used):
    """Double backward when only one of prelu_backward's two outputs reaches the loss (the other output's
    incoming gradient is undefined: it counts as zero), against the float64 oracle (torch_ext/testing/oracle.py), which is written
    with differentiable PyTorch ops."""
    make = [rand((4, 1), -2, 2), rand((3, 4, 5), -2, 2), rand((4,), -0.5, 0.5)]
    v = torch.randn(make[1].shape if used == 0 else (4,), dtype=f64)
    ours = torch.autograd.grad((ops.prelu_backward(*make)[used] * v).sum(), make, allow_unused=True)
    ref = torch.autograd.grad((oracle.prelu_backward(*make)[used] * v).sum(), make, allow_unused=True)
    for a, b, t in zip(ours, ref, make):
        a = torch.zeros_like(t) if a is None else a
        b = torch.zeros_like(t) if b is None else b
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("requires_grad", [False, True], ids=["plain", "requires_grad"])
@pytest.mark.parametrize("name,fn,make,per_call", PER_CALL_CASES, ids=[c[0] for c in PER_CALL_CASES])
def test_backward_ops_cost_no_python_per_call(name, fn, make, per_call, requires_grad):
    """A direct call of a backward op runs no Python (the autograd of every npu_ext op is C++), whether or not
    a graph is recorded: a Python profiler hook sees no Python frame of torch_ext or torch.library between the
    op call and its return."""
    inputs = [t.detach().requires_grad_(requires_grad) for t in make()]
    _, calls = python_frames(fn, *inputs)
    # (the case's own lambda is in torch_ext/testing: not the package's code path)
    package = [f for f in calls if "torch_ext" in f and "torch_ext/testing/" not in f]
    assert not package + [f for f in calls if "torch/_library" in f], calls


def test_backward_uses_npu_ext_ops():
    """Each forward's gradient is computed by its npu_ext backward operator (and only by it)."""
    from torch.overrides import TorchFunctionMode  # noqa: F401
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func._schema.name)
            return func(*args, **(kwargs or {}))

    expected = {"gelu": "npu_ext::gelu_backward_v2", "prelu": "npu_ext::prelu_backward",
                "logit": "npu_ext::logit_grad", "softmax_causal": "npu_ext::scaled_masked_softmax_backward",
                "grouped_end": "npu_ext::grouped_bias_add_grad"}
    for name, ours, _, make in CASES:
        if name not in expected:
            continue
        inputs = make()
        out = ours(*inputs)
        with Record() as rec:
            out.backward(torch.ones_like(out))
        assert expected[name] in rec.ops, (name, rec.ops)
        assert not any(op.startswith("aten::") and "backward" in op for op in rec.ops), (name, rec.ops)


# ----------------------------------------------------------------------------------------------------------
# Gradients in fp32 / fp16 / bf16 against native PyTorch evaluated in float64 on the same inputs: every op
# and variant of the sample table (samples.OPS[op].function / native / function_inputs, size "test").
ACCURACY_CASES = [(f"{info.forward}-{v}", info, v) for info in samples.OPS.values() for v in info.variants]
GRAD_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def measure(info, variant, dtype, seed=0):
    """[(input index, ours' grad, native fp64 grad, native grad in dtype)] for one random problem."""
    inputs, kwargs = info.function_inputs(dtype, "test", variant, samples.generator(seed))
    xs = [x.requires_grad_() for x in inputs]
    out = info.function(*xs, **kwargs)
    assert out.dtype == dtype
    g = torch.randn(out.shape, dtype=f64, generator=samples.generator(seed + 1)).to(dtype)
    grads = torch.autograd.grad(out, xs, g)
    x64 = [x.detach().to(f64).requires_grad_() for x in xs]
    ref = torch.autograd.grad(info.native(*x64, **kwargs), x64, g.to(f64))
    xn = [x.detach().clone().requires_grad_() for x in xs]
    nat = torch.autograd.grad(info.native(*xn, **kwargs), xn, g)
    return list(zip(range(len(xs)), grads, ref, nat))


@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=str)
@pytest.mark.parametrize("name,info,variant", ACCURACY_CASES, ids=[c[0] for c in ACCURACY_CASES])
def test_gradients_match_native(name, info, variant, dtype):
    for i, got, ref, _ in measure(info, variant, dtype):
        assert got.dtype == dtype and got.shape == ref.shape
        assert_accurate(got, ref, dtype, f"{name} grad of input {i}")


def test_accuracy_metric_can_fail():
    """The comparison above is not vacuous: a gradient off by 10 T fails it."""
    _, got, ref, _ = measure(*ACCURACY_CASES[0][1:], torch.float32)[0]
    with pytest.raises(AssertionError):
        assert_accurate(got * (1 + 10 * THRESHOLD[torch.float32]), ref, torch.float32)


# ----------------------------------------------------------------------------------------------------------
# nn modules and convert()
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 8)
        self.act = torch.nn.GELU(approximate="tanh")
        self.seq = torch.nn.Sequential(torch.nn.PReLU(8, init=0.1), torch.nn.GELU(), torch.nn.PReLU())

    def forward(self, x):
        return self.seq(self.act(self.fc(x)))


def test_modules_are_drop_in():
    for ours, theirs in ((torch_ext.nn.GELU("tanh"), torch.nn.GELU("tanh")),
                         (torch_ext.nn.PReLU(3, 0.3), torch.nn.PReLU(3, 0.3))):
        assert isinstance(ours, type(theirs))
        assert list(ours.state_dict()) == list(theirs.state_dict())
        assert repr(ours) == repr(theirs)
        theirs.load_state_dict(ours.state_dict())
        ours.load_state_dict(theirs.state_dict())
        x = torch.randn(4, 3, 5, dtype=f64, requires_grad=True)
        ours.double(), theirs.double()
        torch.testing.assert_close(ours(x), theirs(x))
        ga = torch.autograd.grad(ours(x).sum(), [x, *ours.parameters()])
        gb = torch.autograd.grad(theirs(x).sum(), [x, *theirs.parameters()])
        for a, b in zip(ga, gb):
            torch.testing.assert_close(a, b)


def test_convert_in_place():
    torch.manual_seed(0)
    model = Block().double()
    reference = copy.deepcopy(model)
    params_before = [id(p) for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # created before convert: must keep working
    assert torch_ext.nn.convert(model) is model
    assert [id(p) for p in model.parameters()] == params_before
    assert type(model.act) is torch_ext.nn.GELU and model.act.approximate == "tanh"
    assert [type(m) for m in model.seq] == [torch_ext.nn.PReLU, torch_ext.nn.GELU, torch_ext.nn.PReLU]
    assert model.state_dict().keys() == reference.state_dict().keys()

    x = torch.randn(5, 6, dtype=f64)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        for m, o in ((model, opt), (reference, ref_opt)):
            o.zero_grad()
            m(x).pow(2).sum().backward()
            o.step()
    for a, b in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # our modules actually ran: the graph of the converted model holds npu_ext backward nodes
    names = set()
    node = model(x).sum().grad_fn
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None or n.name() in names:
            continue
        names.add(n.name())
        stack.extend(f for f, _ in n.next_functions)
    assert any("npu_ext_gelu" in n for n in names) and any("npu_ext_prelu" in n for n in names), names


def test_other_modules():
    torch.manual_seed(0)
    sms = torch_ext.nn.ScaledMaskedSoftmax(scale=0.5)
    x = torch.randn(2, 3, 4, 4, dtype=f64)
    torch.testing.assert_close(sms(x, causal(4, 4)), native_softmax(x, causal(4, 4), 0.5))
    assert "scale=0.5" in repr(sms)
    gba = torch_ext.nn.GroupedBiasAdd(4, 6, group_idx_type=1, dtype=f64)
    assert gba.bias.shape == (4, 6) and not gba.bias.any()
    with torch.no_grad():
        gba.bias.copy_(torch.randn(4, 6))
    xg = torch.randn(12, 6, dtype=f64, requires_grad=True)
    out = gba(xg, GROUP_COUNT)
    torch.testing.assert_close(out, native_grouped(xg, gba.bias, GROUP_COUNT, 1))
    out.sum().backward()
    torch.testing.assert_close(gba.bias.grad, torch.tensor([3.0, 0, 4, 5], dtype=f64)[:, None].expand(4, 6))


# ----------------------------------------------------------------------------------------------------------
# Autocast policy: prelu and grouped_bias_add run in the autocast dtype (both floating inputs cast, like
# torch.prelu on CPU); gelu, logit and scaled_masked_softmax run in their input's dtype.
def test_autocast_bf16():
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    prelu = torch_ext.nn.PReLU(8)
    gba = torch_ext.nn.GroupedBiasAdd(2, 8)
    with torch.no_grad():
        gba.bias.normal_()
    x = torch.randn(6, 8)
    idx = torch.tensor([2, 6])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = lin(x)
        assert h.dtype == torch.bfloat16
        p = prelu(h)
        assert p.dtype == torch.bfloat16  # fp32 weight cast to bf16
        g = torch_ext.gelu(p)
        assert g.dtype == torch.bfloat16
        b = gba(g, idx)
        assert b.dtype == torch.bfloat16  # fp32 bias cast to bf16
        s = torch_ext.scaled_masked_softmax(b.reshape(1, 1, 6, 8), causal(6, 8))
        assert s.dtype == torch.bfloat16
        f32 = torch_ext.gelu(x)
        assert f32.dtype == torch.float32  # an fp32 input stays fp32
        lg = torch_ext.logit(torch.sigmoid(s.float()), 1e-3)
        loss = lg.sum()
    loss.backward()
    for p_ in (lin.weight, prelu.weight, gba.bias):
        assert p_.grad is not None and p_.grad.dtype == torch.float32 and torch.isfinite(p_.grad).all()

    # Same numbers as the explicit policy (casting by hand, no autocast), gradients included.
    params = [lin.weight, lin.bias, prelu.weight, gba.bias]
    grads_autocast = [p_.grad.clone() for p_ in params]
    for p_ in params:
        p_.grad = None
    bf = torch.bfloat16
    h = F.linear(x.to(bf), lin.weight.to(bf), lin.bias.to(bf))
    b = torch_ext.grouped_bias_add(torch_ext.gelu(torch_ext.prelu(h, prelu.weight.to(bf))), gba.bias.to(bf), idx)
    s = torch_ext.scaled_masked_softmax(b.reshape(1, 1, 6, 8), causal(6, 8))
    torch_ext.logit(torch.sigmoid(s.float()), 1e-3).sum().backward()
    for a, p_ in zip(grads_autocast, params):
        torch.testing.assert_close(a, p_.grad, rtol=0, atol=0)


def test_autocast_prelu_matches_native_policy():
    """Under CPU autocast torch.prelu also runs in bf16: our PReLU gives the same dtype and values."""
    x = torch.randn(4, 3, 5)
    ours, theirs = torch_ext.nn.PReLU(3, 0.2), torch.nn.PReLU(3, 0.2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, b = ours(x), theirs(x)
    assert a.dtype == b.dtype == torch.bfloat16
    torch.testing.assert_close(a, b)


# ----------------------------------------------------------------------------------------------------------
def report():
    """Measured gradient errors per function and dtype (ours and native PyTorch, vs float64 native)."""
    print(f"{'function':24s} {'input':5s} {'dtype':9s} {'ours max rel':>12s} {'ours mean rel':>13s} "
          f"{'native max':>11s} {'native mean':>11s}  threshold (mean / max)")
    for name, info, variant in ACCURACY_CASES:
        for dtype in GRAD_DTYPES:
            worst = {}
            for seed in range(3):
                for i, got, ref, nat in measure(info, variant, dtype, seed):
                    m, mx, _ = relative_errors(got, ref, dtype)
                    nm, nmx, _ = relative_errors(nat, ref, dtype)
                    w = worst.setdefault(i, [0, 0, 0, 0])
                    worst[i] = [max(w[0], mx), max(w[1], m), max(w[2], nmx), max(w[3], nm)]
            t = THRESHOLD[dtype]
            for i, (mx, m, nmx, nm) in worst.items():
                print(f"{name:24s} {i:5d} {str(dtype)[6:]:9s} {mx:12.3e} {m:13.3e} {nmx:11.3e} {nm:11.3e}  "
                      f"{t:.2e} / {10 * t:.2e}")


if __name__ == "__main__":
    report()


# ----------------------------------------------------------------------------------------------------------
# The options Megatron / MoE training uses: gradients in the training dtypes, against float64 native ones.
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=str)
def test_grouped_probs_gradients_16bit(dtype):
    """bias and probs gradients of x + probs * bias[group] (fp32 probs, as Megatron's router gives them)."""
    g = torch.Generator().manual_seed(3)
    counts = torch.tensor([40, 0, 25, 63])
    x = torch.randn(128, 32, generator=g).to(dtype).requires_grad_()
    b = torch.randn(4, 32, generator=g).to(dtype).requires_grad_()
    p = torch.rand(128, 1, generator=g).requires_grad_()
    dy = torch.randn(128, 32, generator=g).to(dtype)
    torch.autograd.backward(torch_ext.grouped_bias_add(x, b, counts, 1, probs=p), dy)
    leaves = [t.detach().to(f64).requires_grad_() for t in (x, b, p)]
    torch.autograd.backward(native_grouped_probs(*leaves, counts, 1), dy.to(f64))
    assert torch.equal(x.grad, dy)
    assert b.grad.dtype == dtype and p.grad.dtype == torch.float32
    assert_accurate(b.grad, leaves[1].grad, dtype, "d bias")
    assert_accurate(p.grad, leaves[2].grad, dtype, "d probs")


def test_fully_masked_zero_rows_have_zero_gradient():
    x = torch.randn(2, 2, 3, 8, requires_grad=True)
    y = torch_ext.scaled_masked_softmax(x, ROW_MASK, 0.7, fully_masked="zero")
    (gx,) = torch.autograd.grad((y * torch.randn_like(y)).sum(), x)
    full = ROW_MASK.all(-1).expand(2, 2, 3)
    assert full.any() and torch.equal(gx[full], torch.zeros_like(gx[full]))
    assert (gx[~full] != 0).any()
