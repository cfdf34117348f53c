"""The benchmark cases: for each op, dtype and size, the npu_ext call and the PyTorch alternatives.

A case builds its inputs once (outside the timed region) and returns callables that each compute the same
gradient(s). `bytes` is the data an ideal kernel must move (inputs read once + outputs written once); it turns
a median time into an effective GB/s that is compared with a tensor copy moving the same number of bytes
(bytes/2 read + bytes/2 written), measured in the same run with the same threads.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

import torch_ext  # noqa: F401  (registers torch.ops.npu_ext)

ext = torch.ops.npu_ext
aten = torch.ops.aten

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
SIZES = ("small", "medium", "large")


@dataclasses.dataclass
class Case:
    op: str                      # e.g. "gelu_backward_v2[erf]"
    dtype: str                   # fp32 / bf16 / fp16
    size: str                    # small / medium / large
    shape: str                   # human-readable problem shape
    numel: int                   # elements of the main input
    bytes: int                   # ideal bytes moved (read + written)
    ext: Callable[[], object]    # the npu_ext call
    baselines: Dict[str, Callable[[], object]]  # PyTorch alternatives, by name
    memory_bound: bool = True
    # Baselines that must be rebuilt when the thread count changes (torch.compile bakes the count in).
    compiled: Dict[str, Callable[[], Callable[[], object]]] = dataclasses.field(default_factory=dict)
    note: str = ""


def _gen(seed=0):
    g = torch.Generator().manual_seed(seed)
    return g


def _randn(shape, dtype, gen, scale=1.0):
    return (torch.randn(shape, generator=gen) * scale).to(dtype)


# ---------------------------------------------------------------------------------------------------------
# Problem shapes (elements: small 64K, medium 1M, large 4M).
ELEMENTWISE = {"small": (64, 1024), "medium": (1024, 1024), "large": (4096, 1024)}
PRELU = {"small": (8, 32, 16, 16), "medium": (16, 64, 32, 32), "large": (16, 64, 64, 64)}
GROUPED = {"small": (64, 1024, 8), "medium": (1024, 1024, 32), "large": (4096, 1024, 64)}  # N, H, G
SOFTMAX = {"small": (1, 4, 128, 128), "medium": (2, 8, 256, 256), "large": (4, 16, 256, 256)}


def _nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def gelu_cases(dtype, size, approximate):
    gen = _gen(1)
    shape = ELEMENTWISE[size]
    x = _randn(shape, dtype, gen, 2.0)
    g = _randn(shape, dtype, gen)
    name = "erf" if approximate == "none" else "tanh"
    return Case(
        op=f"gelu_backward_v2[{name}]", dtype=_dname(dtype), size=size, shape=_fmt(shape), numel=x.numel(),
        bytes=3 * _nbytes(x), memory_bound=False,
        ext=lambda: ext.gelu_backward_v2(g, x, approximate),
        baselines={"aten.gelu_backward": lambda: aten.gelu_backward(g, x, approximate=approximate)},
    )


def logit_cases(dtype, size):
    gen = _gen(2)
    shape = ELEMENTWISE[size]
    x = torch.rand(shape, generator=gen).to(dtype)
    dy = _randn(shape, dtype, gen)
    eps = 1e-6
    return Case(
        op="logit_grad", dtype=_dname(dtype), size=size, shape=_fmt(shape), numel=x.numel(), bytes=3 * _nbytes(x),
        ext=lambda: ext.logit_grad(x, dy, eps),
        baselines={"aten.logit_backward": lambda: aten.logit_backward(dy, x, eps)},
    )


def prelu_cases(dtype, size):
    gen = _gen(3)
    shape = PRELU[size]
    C = shape[1]
    x = _randn(shape, dtype, gen)
    g = _randn(shape, dtype, gen)
    w = (torch.rand(C, generator=gen) * 0.5).to(dtype)
    w_view = w.view(1, C, 1, 1)

    def aten_prelu_backward():
        # What F.prelu's autograd runs: _prelu_kernel_backward on the broadcast weight view, whose grad is
        # then reduced to the weight's shape.
        gi, gw = aten._prelu_kernel_backward(g, x, w_view)
        return gi, gw.sum_to_size(w_view.shape).view(C)

    return Case(
        op="prelu_backward", dtype=_dname(dtype), size=size, shape=_fmt(shape), numel=x.numel(),
        bytes=3 * _nbytes(x) + 2 * _nbytes(w), ext=lambda: ext.prelu_backward(g, x, w),
        baselines={"aten._prelu_kernel_backward+sum": aten_prelu_backward},
    )


def grouped_cases(dtype, size):
    gen = _gen(4)
    N, H, G = GROUPED[size]
    grad_y = _randn((N, H), dtype, gen)
    # Uneven group sizes, some empty, summing to N.
    weights = torch.rand(G, generator=gen) ** 2
    counts = torch.floor(weights / weights.sum() * N).long()
    counts[0] += N - counts.sum()
    ends = torch.cumsum(counts, 0)
    group_idx = ends.to(torch.int64)
    starts = [0] + ends[:-1].tolist()
    bounds = list(zip(starts, ends.tolist()))
    row_group = torch.repeat_interleave(torch.arange(G), counts)  # precomputed: not timed

    def index_add():
        return torch.zeros(G, H, dtype=dtype).index_add_(0, row_group, grad_y)

    def per_group_loop():
        return torch.stack([grad_y[s:e].sum(0) for s, e in bounds])

    def segment_reduce():
        return torch.segment_reduce(grad_y, "sum", lengths=counts, axis=0)

    return Case(
        op="grouped_bias_add_grad", dtype=_dname(dtype), size=size, shape=f"{N}x{H}, G={G}", numel=grad_y.numel(),
        bytes=_nbytes(grad_y) + G * H * grad_y.element_size(), ext=lambda: ext.grouped_bias_add_grad(grad_y, group_idx, 0),
        baselines={"index_add_": index_add, "per-group sum loop": per_group_loop,
                   "segment_reduce": segment_reduce},
    )


def _smsb_composite(g, y, mask, scale):
    s = (g * y).sum(-1, keepdim=True)
    return (scale * (g - s) * y).masked_fill(mask, 0)


def softmax_cases(dtype, size, with_inductor=True):
    gen = _gen(5)
    B, N, S1, S2 = SOFTMAX[size]
    x = _randn((B, N, S1, S2), torch.float32, gen)
    mask = torch.rand((B, 1, S1, S2), generator=gen) < 0.2
    scale = 0.125
    y = torch.softmax((x * scale).masked_fill(mask, -10000.0), dim=-1).to(dtype)
    g = _randn((B, N, S1, S2), dtype, gen)
    mask_full = mask.expand(B, N, S1, S2).contiguous()

    compiled = {}
    if with_inductor:
        def make():
            fn = torch.compile(_smsb_composite, backend="inductor", dynamic=False, fullgraph=True)
            fn(g, y, mask, scale)  # compile now, outside the timed region
            return lambda: fn(g, y, mask, scale)
        compiled["inductor(composite)"] = make

    return Case(
        op="scaled_masked_softmax_backward", dtype=_dname(dtype), size=size, shape=_fmt((B, N, S1, S2)),
        numel=g.numel(), bytes=3 * _nbytes(g) + mask.numel(), ext=lambda: ext.scaled_masked_softmax_backward(g, y, mask, scale, False),
        baselines={
            "eager composite": lambda: _smsb_composite(g, y, mask, scale),
            # No scale and a full-size mask: strictly less work than the op; timed as is.
            "aten._masked_softmax_backward": lambda: aten._masked_softmax_backward(g, y, mask_full, 3),
        },
        compiled=compiled,
    )


# ---------------------------------------------------------------------------------------------------------
# Forward + backward of the torch_ext functional API (one function per case: each closure has its own inputs).
def _fwd_bwd(fn, inputs, grad):
    def run():
        for t in inputs:
            t.grad = None
        fn().backward(grad)
    return run


def _train_gelu(dtype, size, gen):
    shape = ELEMENTWISE[size]
    x = _randn(shape, dtype, gen, 2.0).requires_grad_()
    g = _randn(shape, dtype, gen)
    return Case(op="gelu fwd+bwd", dtype=_dname(dtype), size=size, shape=_fmt(shape), numel=x.numel(),
                bytes=5 * _nbytes(x.detach()), memory_bound=False,
                ext=_fwd_bwd(lambda: torch_ext.gelu(x), [x], g),
                baselines={"F.gelu": _fwd_bwd(lambda: F.gelu(x), [x], g)})


def _train_logit(dtype, size, gen):
    shape = ELEMENTWISE[size]
    x = torch.rand(shape, generator=gen).clamp(0.01, 0.99).to(dtype).requires_grad_()
    g = _randn(shape, dtype, gen)
    return Case(op="logit fwd+bwd", dtype=_dname(dtype), size=size, shape=_fmt(shape), numel=x.numel(),
                bytes=5 * _nbytes(x.detach()),
                ext=_fwd_bwd(lambda: torch_ext.logit(x, 1e-6), [x], g),
                baselines={"torch.logit": _fwd_bwd(lambda: torch.logit(x, 1e-6), [x], g)})


def _train_prelu(dtype, size, gen):
    shape = PRELU[size]
    x = _randn(shape, dtype, gen).requires_grad_()
    w = (torch.rand(shape[1], generator=gen) * 0.5).to(dtype).requires_grad_()
    g = _randn(shape, dtype, gen)
    return Case(op="prelu fwd+bwd", dtype=_dname(dtype), size=size, shape=_fmt(shape), numel=x.numel(),
                bytes=5 * _nbytes(x.detach()),
                ext=_fwd_bwd(lambda: torch_ext.prelu(x, w), [x, w], g),
                baselines={"F.prelu": _fwd_bwd(lambda: F.prelu(x, w), [x, w], g)})


def _train_softmax(dtype, size, gen):
    shape = SOFTMAX[size]
    B, N, S1, S2 = shape
    x = _randn(shape, dtype, gen).requires_grad_()
    mask = torch.rand((B, 1, S1, S2), generator=gen) < 0.2
    g = _randn(shape, dtype, gen)
    return Case(op="scaled_masked_softmax fwd+bwd", dtype=_dname(dtype), size=size, shape=_fmt(shape),
                numel=x.numel(), bytes=5 * _nbytes(x.detach()),
                ext=_fwd_bwd(lambda: torch_ext.scaled_masked_softmax(x, mask, 0.125), [x], g),
                baselines={"softmax(masked_fill)": _fwd_bwd(
                    lambda: torch.softmax((x * 0.125).masked_fill(mask, -10000.0), dim=-1), [x], g)})


def _train_grouped(dtype, size, gen):
    N, H, G = GROUPED[size]
    x = _randn((N, H), dtype, gen).requires_grad_()
    bias = _randn((G, H), dtype, gen).requires_grad_()
    counts = torch.full((G,), N // G, dtype=torch.int64)
    counts[0] += N - counts.sum()
    ends = torch.cumsum(counts, 0)
    row_group = torch.repeat_interleave(torch.arange(G), counts)
    g = _randn((N, H), dtype, gen)
    return Case(op="grouped_bias_add fwd+bwd", dtype=_dname(dtype), size=size, shape=f"{N}x{H}, G={G}",
                numel=x.numel(), bytes=4 * _nbytes(x.detach()),
                ext=_fwd_bwd(lambda: torch_ext.grouped_bias_add(x, bias, ends), [x, bias], g),
                baselines={"x + bias[row_group]": _fwd_bwd(lambda: x + bias[row_group], [x, bias], g)})


def training_cases(dtype, size) -> List[Case]:
    """Forward + backward of the torch_ext functional API against torch.nn.functional / plain PyTorch. The API
    is built in parallel; each entry is skipped while torch_ext lacks the function."""
    gen = _gen(6)
    makers = {"gelu": _train_gelu, "logit": _train_logit, "prelu": _train_prelu,
              "scaled_masked_softmax": _train_softmax, "grouped_bias_add": _train_grouped}
    return [mk(dtype, size, gen) for name, mk in makers.items() if hasattr(torch_ext, name)]


def _dname(dtype):
    return {v: k for k, v in DTYPES.items()}[dtype]


def _fmt(shape):
    return "x".join(str(s) for s in shape)


def build_cases(sizes, dtypes, ops: Optional[List[str]] = None, inductor_sizes=("large",),
                training_sizes=("large",)) -> List[Callable[[], List[Case]]]:
    """Lazily built cases (inputs are allocated only when a case runs), in run order."""
    makers = []
    for size in sizes:
        for dname in dtypes:
            dt = DTYPES[dname]
            entries = [
                ("gelu_backward_v2[erf]", functools.partial(gelu_cases, dt, size, "none")),
                ("gelu_backward_v2[tanh]", functools.partial(gelu_cases, dt, size, "tanh")),
                ("logit_grad", functools.partial(logit_cases, dt, size)),
                ("prelu_backward", functools.partial(prelu_cases, dt, size)),
                ("grouped_bias_add_grad", functools.partial(grouped_cases, dt, size)),
                ("scaled_masked_softmax_backward",
                 functools.partial(softmax_cases, dt, size, size in inductor_sizes)),
            ]
            for name, mk in entries:
                if ops and not any(o in name for o in ops):
                    continue
                makers.append((name, lambda mk=mk: [mk()]))
            if size in training_sizes and (not ops or any("fwd" in o or "train" in o for o in ops)):
                makers.append(("fwd+bwd", functools.partial(training_cases, dt, size)))
    return makers
