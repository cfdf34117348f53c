"""Prints SPEC.md's accuracy metric (mean / max relative error vs the float64 oracle) per op and dtype.

    .venv/bin/python tests/accuracy_report.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))

import oracle  # noqa: E402
import torch_ext  # noqa: E402,F401
from helpers import make  # noqa: E402

ops = torch.ops.npu_ext


def cases(dtype):
    g, x = make([1 << 20], dtype), make([1 << 20], dtype, low=-6, high=6)
    yield "gelu_backward_v2 (none)", ops.gelu_backward_v2(g, x), oracle.gelu_backward_v2(g, x)
    yield "gelu_backward_v2 (tanh)", ops.gelu_backward_v2(g, x, "tanh"), oracle.gelu_backward_v2(g, x, "tanh")
    x3, g3, w = make([32, 64, 512], dtype), make([32, 64, 512], dtype), make([64], dtype, low=-1, high=1)
    gi, gw = ops.prelu_backward(g3, x3, w)
    egi, egw = oracle.prelu_backward(g3, x3, w)
    yield "prelu_backward grad_input", gi, egi
    yield "prelu_backward grad_weight", gw, egw
    gy = make([65536, 64], dtype)
    idx = torch.tensor([100, 20000, 20000, 65536])
    yield "grouped_bias_add_grad", ops.grouped_bias_add_grad(gy, idx), oracle.grouped_bias_add_grad(gy, idx)
    xs = make([4, 8, 128, 512], torch.float64)
    mask = torch.rand(4, 1, 128, 512) < 0.2
    y = torch.softmax(xs.masked_fill(mask, -10000.0), -1).to(dtype)
    gs = make([4, 8, 128, 512], dtype)
    yield ("scaled_masked_softmax_backward", ops.scaled_masked_softmax_backward(gs, y, mask, 0.5),
           oracle.scaled_masked_softmax_backward(gs, y, mask, 0.5))
    xl = make([1 << 20], dtype, low=0, high=1)
    yield "logit_grad (eps=1e-6)", ops.logit_grad(xl, g, 1e-6), oracle.logit_grad(xl, g, 1e-6)


def main():
    dtypes = [torch.float32, torch.float16, torch.bfloat16]
    rows = {}
    for dtype in dtypes:
        for name, actual, expected in cases(dtype):
            mean_rel, max_rel, _ = oracle.relative_errors(actual, expected, dtype)
            rows.setdefault(name, []).append(f"{mean_rel:.1e} / {max_rel:.1e}")
    print("| op | " + " | ".join(f"{str(d).replace('torch.', '')} mean / max" for d in dtypes) + " |")
    print("|---|" + "---|" * len(dtypes))
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("| threshold T (mean < T, max < 10T) | " + " | ".join(f"{oracle.THRESHOLD[d]:.1e}" for d in dtypes) + " |")


if __name__ == "__main__":
    main()
