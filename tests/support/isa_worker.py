"""Subprocess body of tests/ops/test_isa_dispatch.py: run with ATEN_CPU_CAPABILITY set, it reports the kernel
variant npu_ext selected, checks every op against the float64 oracle (torch_ext/testing/oracle.py: the backward ops' references
and the contract's metric; native PyTorch in float64 for the forward ops) and checks that 1 and 2 threads give
bitwise identical results; then saves the outputs so the parent can compare the variants with each other.

    python tests/support/isa_worker.py OUT_FILE
"""

import sys

import numpy as np
import torch

from torch_ext.testing import oracle  # noqa: E402  (tests/ is sys.path[0])
from torch_ext.testing import samples, tolerances
import torch_ext  # noqa: F401
from helpers import bits, on_1_and_2_threads  # noqa: E402

ops = torch.ops.npu_ext
F = torch.nn.functional


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
    xd = x.double()
    out = {
        "gelu_erf": (lambda: ops.gelu_backward_v2(g, x, "none"), oracle.gelu_backward_v2(g, x, "none")),
        "gelu_tanh": (lambda: ops.gelu_backward_v2(g, x, "tanh"), oracle.gelu_backward_v2(g, x, "tanh")),
    }
    # strided / broadcast operands take the gather path
    xs = randn(301, 333, scale=2.0)
    gs = randn(333, 1)
    out["gelu_erf_broadcast"] = (
        lambda: ops.gelu_backward_v2(gs.t(), xs, "none"), oracle.gelu_backward_v2(gs.t(), xs, "none"))

    p = rand(n).to(dtype)
    dy = randn(n)
    out["logit"] = (lambda: ops.logit_grad(p, dy, 1e-3), oracle.logit_grad(p, dy, 1e-3))

    # prelu's grad_weight terms x g are each rounded to the dtype before the sum, as on the NPU (the oracle's)
    xp, gp = randn(3, 37, 29, 31), randn(3, 37, 29, 31)
    w = (rand(37) * 0.5).to(dtype)
    out["prelu"] = (lambda: ops.prelu_backward(gp, xp, w), oracle.prelu_backward(gp, xp, w))
    x2, g2 = randn(2999, 45), randn(2999, 45)
    w2 = (rand(45) * 0.5).to(dtype)
    out["prelu_2d"] = (lambda: ops.prelu_backward(g2, x2, w2), oracle.prelu_backward(g2, x2, w2))

    gy = randn(4001, 77)
    ends = torch.cumsum(torch.tensor([0, 1000, 7, 0, 2994]), 0)
    out["grouped"] = (lambda: ops.grouped_bias_add_grad(gy, ends, 0), oracle.grouped_bias_add_grad(gy, ends, 0))
    gy3 = gy[:4000].view(40, 100, 77).transpose(1, 2)
    out["grouped_3d_strided"] = (lambda: ops.grouped_bias_add_grad(gy3), oracle.grouped_bias_add_grad(gy3))

    B, N, S1, S2 = 2, 3, 37, 333
    xx = randn(B, N, S1, S2).float()
    mask = rand(B, 1, S1, S2) < 0.3
    y = torch.softmax((xx * 0.5).masked_fill(mask, -10000.0), -1).to(dtype)
    gg = randn(B, N, S1, S2)
    out["softmax"] = (lambda: ops.scaled_masked_softmax_backward(gg, y, mask, 0.5, False),
                      oracle.scaled_masked_softmax_backward(gg, y, mask, 0.5, False))
    causal = oracle.causal_mask(S1, S2)
    out["softmax_causal"] = (lambda: ops.scaled_masked_softmax_backward(gg, y, mask, 0.5, True),
                             oracle.scaled_masked_softmax_backward(gg, y, mask, 0.5, True))
    ygt, ggt = y.transpose(2, 3).contiguous().transpose(2, 3), gg.transpose(2, 3).contiguous().transpose(2, 3)
    out["softmax_strided"] = (lambda: ops.scaled_masked_softmax_backward(ggt, ygt, mask, 0.5, False),
                              oracle.scaled_masked_softmax_backward(gg, y, mask, 0.5, False))

    # The forward kernels, against native PyTorch in float64.
    out["gelu_fwd_erf"] = (lambda: ops.gelu(x, "none"), F.gelu(xd, approximate="none"))
    out["gelu_fwd_tanh"] = (lambda: ops.gelu(x, "tanh"), F.gelu(xd, approximate="tanh"))
    out["gelu_fwd_strided"] = (lambda: ops.gelu(xs.t(), "none"), F.gelu(xs.t().double()))
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


def sample_problems(dtype):
    """Every backward op of the sample table in each of its variants (an op added to the table is checked here
    without an edit), against its oracle. torch's random numbers make the inputs, which may differ between variants:
    these are not saved for the comparison between variants."""
    out = {}
    for info in samples.OPS.values():
        for variant in info.variants:
            args, kwargs = info.make(dtype, "test", variant, samples.generator(0))
            out[f"sample {info.name} {variant}"] = (lambda info=info, a=args, k=kwargs: info.run(a, k),
                                                    info.oracle(args, kwargs))
    return out


def main(path):
    saved = {"capability": ops._cpu_capability()}
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for name, (fn, ref) in [*problems(dtype).items(), *sample_problems(dtype).items()]:
            one, two = on_1_and_2_threads(fn)
            ref = ref if isinstance(ref, tuple) else (ref,)
            for k, (a, b, r) in enumerate(zip(one, two, ref)):
                assert a.dtype == dtype, (name, a.dtype)
                assert torch.equal(bits(a), bits(b)), \
                    f"{name}[{k}] {dtype}: 1 and 2 threads differ"
                tolerances.assert_accurate(a, r, dtype, f"{name}[{k}] {dtype}")
                if not name.startswith("sample "):
                    saved[f"{name}[{k}] {dtype}"] = a
    torch.save(saved, path)
    print(saved["capability"])


if __name__ == "__main__":
    main(sys.argv[1])
