"""Subprocess body of tests/test_isa_dispatch.py: run with ATEN_CPU_CAPABILITY set, it reports the kernel
variant npu_ext selected, checks every op against a float64 oracle and checks that 1 and 2 threads give
bitwise identical results; then saves the outputs so the parent can compare the variants with each other.

    python tests/_isa_worker.py OUT_FILE
"""

import math
import sys

import numpy as np
import torch

import torch_ext  # noqa: F401
from helpers import bits, on_1_and_2_threads  # noqa: E402  (tests/ is sys.path[0])

ops = torch.ops.npu_ext
TOL = {torch.float32: 2.0 ** -13, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}


def rel_err(out, ref):
    """(mean, max) relative error over finite, non-tiny reference values: above 1e-3 of the values' RMS
    (below that, cancellation in the formula itself dominates) and normal in the output dtype."""
    tiny = max(1e-3 * ref.abs()[torch.isfinite(ref)].pow(2).mean().sqrt().item(), torch.finfo(out.dtype).tiny)
    out = out.double()
    ok = torch.isfinite(ref) & (ref.abs() > tiny)
    err = ((out - ref).abs() / ref.abs())[ok]
    return err.mean().item(), err.max().item()


def check(name, dtype, out, ref):
    mean, mx = rel_err(out, ref)
    T = TOL[dtype]
    assert mean < T and mx < 10 * T, f"{name} {dtype}: mean rel err {mean:.3g}, max {mx:.3g} (T={T:.3g})"


def problems(dtype):
    """name -> (fn computing npu_ext outputs, float64 oracle outputs). Sizes leave odd tails everywhere."""
    # numpy, not torch: torch's own random kernels are ISA-dispatched too, and every variant must see the
    # same inputs.
    rng = np.random.RandomState(0)

    def randn(*shape, scale=1.0):
        return (torch.from_numpy(rng.standard_normal(shape)) * scale).to(dtype)

    def rand(*shape):
        return torch.from_numpy(rng.random_sample(shape))

    n = 100003
    x, g = randn(n, scale=3.0), randn(n)
    xd, gd = x.double(), g.double()
    cdf = 0.5 * (1 + torch.erf(xd / math.sqrt(2)))
    pdf = torch.exp(-0.5 * xd * xd) / math.sqrt(2 * math.pi)
    out = {
        "gelu_erf": (lambda: ops.gelu_backward_v2(g, x, "none"), gd * (cdf + xd * pdf)),
        "gelu_tanh": (lambda: ops.gelu_backward_v2(g, x, "tanh"),
                      torch.ops.aten.gelu_backward(gd, xd, approximate="tanh")),
    }
    # strided / broadcast operands take the gather path
    xs = randn(301, 333, scale=2.0)
    gs = randn(333, 1)
    out["gelu_erf_broadcast"] = (
        lambda: ops.gelu_backward_v2(gs.t(), xs, "none"),
        torch.ops.aten.gelu_backward(gs.t().double().expand(301, 333), xs.double()))

    p = rand(n).to(dtype)
    dy = randn(n)
    pd, dyd = p.double(), dy.double()
    eps32 = float(torch.tensor(1e-3, dtype=torch.float32))
    ref = torch.where((pd < eps32) | (pd > 1 - eps32), torch.zeros_like(pd), dyd / (pd * (1 - pd)))
    out["logit"] = (lambda: ops.logit_grad(p, dy, 1e-3), ref)

    # prelu's grad_weight terms x g are each rounded to the dtype before the sum, as on the NPU (docs/operators.md,
    # "Semantics notes"; exact products of 16-bit values in float64, so one rounding)
    xp, gp = randn(3, 37, 29, 31), randn(3, 37, 29, 31)
    w = (rand(37) * 0.5).to(dtype)
    xpd, gpd, wd = xp.double(), gp.double(), w.double().view(1, 37, 1, 1)
    out["prelu"] = (lambda: ops.prelu_backward(gp, xp, w),
                    (torch.where(xpd > 0, gpd, wd * gpd),
                     torch.where(xpd > 0, 0, (xpd * gpd).to(dtype).double()).sum((0, 2, 3))))
    x2, g2 = randn(2999, 45), randn(2999, 45)
    w2 = (rand(45) * 0.5).to(dtype)
    x2d, g2d = x2.double(), g2.double()
    out["prelu_2d"] = (lambda: ops.prelu_backward(g2, x2, w2),
                       (torch.where(x2d > 0, g2d, w2.double() * g2d),
                        torch.where(x2d > 0, 0, (x2d * g2d).to(dtype).double()).sum(0)))

    gy = randn(4001, 77)
    counts = torch.tensor([0, 1000, 7, 0, 2994])
    ends = torch.cumsum(counts, 0)
    ref = torch.stack([gy[s:e].double().sum(0) for s, e in zip([0] + ends[:-1].tolist(), ends.tolist())])
    out["grouped"] = (lambda: ops.grouped_bias_add_grad(gy, ends, 0), ref)
    out["grouped_3d_strided"] = (lambda: ops.grouped_bias_add_grad(gy[:4000].view(40, 100, 77).transpose(1, 2)),
                                 gy[:4000].view(40, 100, 77).transpose(1, 2).double().sum(1))

    B, N, S1, S2 = 2, 3, 37, 333
    xx = randn(B, N, S1, S2).float()
    mask = rand(B, 1, S1, S2) < 0.3
    y = torch.softmax((xx * 0.5).masked_fill(mask, -10000.0), -1).to(dtype)
    gg = randn(B, N, S1, S2)
    yd, ggd = y.double(), gg.double()
    base = 0.5 * (ggd - (ggd * yd).sum(-1, keepdim=True)) * yd
    out["softmax"] = (lambda: ops.scaled_masked_softmax_backward(gg, y, mask, 0.5, False), base.masked_fill(mask, 0))
    causal = torch.ones(S1, S2, dtype=torch.bool).triu(1)
    out["softmax_causal"] = (lambda: ops.scaled_masked_softmax_backward(gg, y, mask, 0.5, True),
                             base.masked_fill(causal, 0))
    ygt, ggt = y.transpose(2, 3).contiguous().transpose(2, 3), gg.transpose(2, 3).contiguous().transpose(2, 3)
    out["softmax_strided"] = (lambda: ops.scaled_masked_softmax_backward(ggt, ygt, mask, 0.5, False),
                              base.masked_fill(mask, 0))

    # The forward kernels.
    out["gelu_fwd_erf"] = (lambda: ops.gelu(x, "none"), torch.nn.functional.gelu(xd, approximate="none"))
    out["gelu_fwd_tanh"] = (lambda: ops.gelu(x, "tanh"), torch.nn.functional.gelu(xd, approximate="tanh"))
    out["gelu_fwd_strided"] = (lambda: ops.gelu(xs.t(), "none"), torch.nn.functional.gelu(xs.t().double()))
    xsm = randn(B, N, S1, S2, scale=4.0)
    zd = xsm.double() * 0.5
    out["softmax_fwd"] = (lambda: ops.scaled_masked_softmax(xsm, mask, 0.5, False),
                          torch.softmax(zd.masked_fill(mask, -10000.0), -1))
    out["softmax_fwd_causal"] = (lambda: ops.scaled_masked_softmax(xsm, mask, 0.5, True),
                                 torch.softmax(zd.masked_fill(causal, -10000.0), -1))
    xsmt = xsm.transpose(2, 3).contiguous().transpose(2, 3)
    out["softmax_fwd_strided"] = (lambda: ops.scaled_masked_softmax(xsmt, mask, 0.5, False),
                                  torch.softmax(zd.masked_fill(mask, -10000.0), -1))
    gx, gb = randn(1000, 77), randn(3, 77)
    gends = torch.tensor([300, 300, 1000])
    gref = gx.double() + torch.cat([gb.double()[0].expand(300, 77), gb.double()[2].expand(700, 77)])
    out["grouped_fwd"] = (lambda: ops.grouped_bias_add(gx, gb, gends, 0), gref)
    return out


def main(path):
    saved = {"capability": ops._cpu_capability()}
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for name, (fn, ref) in problems(dtype).items():
            one, two = on_1_and_2_threads(fn)
            ref = ref if isinstance(ref, tuple) else (ref,)
            for k, (a, b, r) in enumerate(zip(one, two, ref)):
                assert a.dtype == dtype, (name, a.dtype)
                assert torch.equal(bits(a), bits(b)), \
                    f"{name}[{k}] {dtype}: 1 and 2 threads differ"
                check(f"{name}[{k}]", dtype, a, r)
                saved[f"{name}[{k}] {dtype}"] = a
    torch.save(saved, path)
    print(saved["capability"])


if __name__ == "__main__":
    main(sys.argv[1])
