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

import torch_ext  # noqa: F401  (registers torch.ops.npu_ext)

from torch_ext.testing import samples  # the one table of sample inputs

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
    # Thread counts this case runs with (None: every count of the run). Per-call rows: 1 thread.
    threads: Optional[tuple] = None
    # Reference timings shown next to the result but never counted as a PyTorch alternative, e.g. the floor
    # "allocate the output + one pass over the data" for outputs that are fresh mmap'd pages.
    references: Dict[str, Callable[[], object]] = dataclasses.field(default_factory=dict)
    # Time with the thread's CPU time instead of wall time (1-thread per-call cases: robust to other
    # processes taking the core; everything such a case runs is on the calling thread).
    cpu_time: bool = False
    # The reference that is this op's floor (the least any kernel must do, e.g. one read of the input): its
    # time over npu_ext's is reported next to the speedup ("vs floor"; 1.0 = at the floor).
    floor: Optional[str] = None


def _gen(seed=0):
    return samples.generator(seed)


def _randn(shape, dtype, gen, scale=1.0):
    return (torch.randn(shape, generator=gen) * scale).to(dtype)


def _nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


# ---------------------------------------------------------------------------------------------------------
# Each family's rows (its OpInfo.bench in torch_ext/testing/families/): problem shapes and values from the sample
# table at sizes small / medium / large (64K / 1M / 4M elements), the npu_ext call and the PyTorch alternatives.
def op_case(name, fn, dtype, size, inductor=False):
    fields = fn(dtype, size, inductor)
    shape = fields.pop("shape")
    return Case(op=name, dtype=_dname(dtype), size=size, shape=shape if isinstance(shape, str) else _fmt(shape),
                **fields)


# grouped_bias_add_grad at its floor: a grad_y of 32M elements (128 MB fp32, beyond the caches), few, some
# and many groups of skewed sizes (some empty), against one read of grad_y (issue 21); and rows as wide as a
# Megatron FFN's (8192 columns), whose accumulator row no longer fits in L1.
GROUPED_FLOOR = ((65536, 512, 4), (65536, 512, 64), (65536, 512, 2048), (4096, 8192, 64))  # N, H, G


def grouped_floor_case(dtype, n, h, groups):
    gen = _gen(9)
    weights = torch.rand(groups, generator=gen, dtype=torch.float64) ** 2  # skewed; small groups round to 0
    counts = torch.floor(weights / weights.sum() * n).long()
    counts[0] += n - counts.sum()
    grad_y = _randn((n, h), dtype, gen)
    ends = counts.cumsum(0)
    row_group = torch.repeat_interleave(torch.arange(groups), counts)
    empty = int((counts == 0).sum())
    return Case(
        op="grouped_bias_add_grad", dtype=_dname(dtype), size="xlarge",
        shape=f"{n}x{h}, G={groups} ({empty} empty)", numel=grad_y.numel(),
        bytes=_nbytes(grad_y) + groups * h * grad_y.element_size(),
        ext=lambda: ext.grouped_bias_add_grad(grad_y, ends, 0),
        baselines={"index_add_": lambda: torch.zeros(groups, h, dtype=dtype).index_add_(0, row_group, grad_y)},
        references={"floor: grad_y.sum()": lambda: grad_y.sum()}, floor="floor: grad_y.sum()")


# ---------------------------------------------------------------------------------------------------------
# Forward + backward of the torch_ext functional API against plain PyTorch: the sample table's training
# function, its native equivalent and inputs (samples.OPS[op].function / native / function_inputs).
def _fwd_bwd(fn, inputs, grad):
    def run():
        for t in inputs:
            t.grad = None
        fn().backward(grad)
    return run


# case name -> (backward op whose table entry it uses, variant, PyTorch label, bytes / x bytes, memory bound)
TRAINING = {f"{info.forward} fwd+bwd": (info.name, *info.training) for info in samples.OPS.values()}


def _training_case(case_name, dtype, size, gen):
    op, variant, label, per_x, memory_bound = TRAINING[case_name]
    info = samples.OPS[op]
    inputs, kwargs = info.function_inputs(dtype, size, variant, gen)
    xs = [t.requires_grad_() for t in inputs]
    g = _randn(xs[0].shape, dtype, gen)
    return Case(op=case_name, dtype=_dname(dtype), size=size, shape=_fmt(xs[0].shape), numel=xs[0].numel(),
                bytes=per_x * _nbytes(xs[0].detach()), memory_bound=memory_bound,
                ext=_fwd_bwd(lambda: info.function(*xs, **kwargs), xs, g),
                baselines={label: _fwd_bwd(lambda: info.native(*xs, **kwargs), xs, g)})


def training_cases(dtype, size) -> List[Case]:
    """Forward + backward of the torch_ext functional API against torch.nn.functional / plain PyTorch."""
    gen = _gen(6)
    return [_training_case(name, dtype, size, gen) for name in TRAINING]


def percall_cases(size) -> List[Case]:
    """Forward + backward at a tiny size (samples.PERCALL_SIZES: 256 / 4096 elements), fp32, 1 thread: the
    per-call cost of the torch_ext API (Python, dispatcher, autograd) against plain PyTorch."""
    gen = _gen(7)
    out = []
    for name in TRAINING:
        case = _training_case(name, torch.float32, size, gen)
        case.threads, case.cpu_time = (1,), True
        out.append(case)
    return out


# ---------------------------------------------------------------------------------------------------------
# Megatron-LM through torch_ext.megatron: the replacements patch() installs, called directly (no global patch),
# against what megatron-core runs on the CPU without them. Forward + backward, "large" size (4M elements).
def megatron_cases(dtype) -> List[Case]:
    """Rows for megatron-core's fused softmax (its torch path: the only one without CUDA), the MoE expert bias
    (TEGroupedMLP._apply_bias: a loop over experts) and bias-GELU (its jit: torch.compile on the CPU)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.fusions import fused_bias_gelu
        from megatron.core.fusions.fused_softmax import FusedScaleMaskSoftmax
        from megatron.core.transformer.enums import AttnMaskType
        from megatron.core.transformer.moe.experts import TEGroupedMLP
        from megatron.core.transformer.utils import attention_mask_func
    import torch_ext.megatron as tm

    gen = _gen(8)
    out = []
    b, heads, s = 4, 16, 256
    fp16, bf16 = dtype == torch.float16, dtype == torch.bfloat16
    for kind in ("causal", "padding"):
        mask_type = AttnMaskType.causal if kind == "causal" else AttnMaskType.padding
        fused = FusedScaleMaskSoftmax(fp16, bf16, mask_type, True, attention_mask_func, True, 0.125)
        torch_path = FusedScaleMaskSoftmax(fp16, bf16, mask_type, False, attention_mask_func, True, 0.125)
        x = _randn((b, heads, s, s), dtype, gen, 3.0).requires_grad_()
        g = _randn(x.shape, dtype, gen)
        if kind == "causal":  # the torch path needs the mask on the CPU; the fused one generates it
            mask_fused, mask_torch = None, torch.ones(1, 1, s, s, dtype=torch.bool).triu(1)
        else:
            lengths = torch.randint(s // 2, s + 1, (b,), generator=gen)
            mask_fused = mask_torch = (torch.arange(s) >= lengths.reshape(b, 1, 1, 1)).expand(b, 1, s, s)
        out.append(Case(
            op=f"Megatron FusedScaleMaskSoftmax[{kind}] fwd+bwd", dtype=_dname(dtype), size="large",
            shape=_fmt(x.shape), numel=x.numel(), bytes=5 * _nbytes(x.detach()),
            ext=_fwd_bwd(lambda f=fused, x=x, m=mask_fused: tm._softmax_forward(f, x, m), [x], g),
            baselines={"Megatron torch path": _fwd_bwd(lambda t=torch_path, x=x, m=mask_torch: t(x, m), [x], g)}))

    tokens = [700, 0, 260, 1100, 36, 900, 580, 520]  # 4096 rows over 8 experts, one empty
    n, h = sum(tokens), 1024
    x = _randn((n, h), dtype, gen).requires_grad_()
    biases = [_randn((h,), dtype, gen).requires_grad_() for _ in tokens]
    probs = torch.rand(n, 1, generator=gen).requires_grad_()  # fp32 router probabilities
    g = _randn((n, h), dtype, gen)
    original = vars(TEGroupedMLP)["_apply_bias"].__func__
    if original is tm._expert_bias:  # benchmarking inside a patched process: Megatron's is the one patch() saved
        original = next(o for _, name, o, _ in tm._applied.values() if name == "_apply_bias").__func__
    out.append(Case(
        op="Megatron TEGroupedMLP._apply_bias fwd+bwd", dtype=_dname(dtype), size="large",
        shape=f"{n}x{h}, {len(tokens)} experts", numel=x.numel(), bytes=4 * _nbytes(x.detach()),
        ext=_fwd_bwd(lambda: tm._expert_bias(x, biases, tokens, probs), [x, probs, *biases], g),
        baselines={"Megatron split/cat loop": _fwd_bwd(lambda: original(x, biases, tokens, probs),
                                                        [x, probs, *biases], g)}))

    y = _randn((n, h), dtype, gen).requires_grad_()
    bias = _randn((h,), dtype, gen).requires_grad_()
    megatron_bias_gelu = fused_bias_gelu.GeLUFunction.apply

    run_eager = _fwd_bwd(lambda: megatron_bias_gelu(y, bias), [y, bias], g)

    def eager_bias_gelu():  # forward and backward (also jit functions) as Megatron's Python formulas
        with torch.compiler.set_stance("force_eager"):
            run_eager()

    def compiled_bias_gelu():  # Megatron's own: jit_fuser is torch.compile; compiled outside the timed region
        run = _fwd_bwd(lambda: megatron_bias_gelu(y, bias), [y, bias], g)
        run()
        return run

    out.append(Case(
        op="Megatron bias_gelu_impl fwd+bwd", dtype=_dname(dtype), size="large", shape=_fmt(y.shape),
        numel=y.numel(), bytes=5 * _nbytes(y.detach()), memory_bound=False,
        ext=_fwd_bwd(lambda: tm._bias_gelu(y, bias), [y, bias], g),
        baselines={"Megatron bias_gelu (eager)": eager_bias_gelu},
        compiled={"Megatron bias_gelu (jit: inductor)": compiled_bias_gelu}))
    return out


def _megatron_available():
    import importlib.util

    return importlib.util.find_spec("megatron") is not None and importlib.util.find_spec("megatron.core") is not None


def _dname(dtype):
    return {v: k for k, v in DTYPES.items()}[dtype]


def _fmt(shape):
    return "x".join(str(s) for s in shape)


PERCALL_SIZES = samples.PERCALL_SIZES


def build_cases(sizes, dtypes, ops: Optional[List[str]] = None, inductor_sizes=("large",),
                training_sizes=("large",), percall_sizes=PERCALL_SIZES,
                xlarge=True) -> List[Callable[[], List[Case]]]:
    """Lazily built cases (inputs are allocated only when a case runs), in run order."""
    makers = []
    want_fwd = not ops or any("fwd" in o or "train" in o or "percall" in o for o in ops)
    if want_fwd and "fp32" in dtypes:
        for size in percall_sizes:
            makers.append(("fwd+bwd per call", functools.partial(percall_cases, size)))
    for size in sizes:
        for dname in dtypes:
            dt = DTYPES[dname]
            entries = [(name, functools.partial(op_case, name, fn, dt, size, size in inductor_sizes))
                       for info in samples.OPS.values() for name, fn in info.bench]
            for name, mk in entries:
                if ops and not any(o in name for o in ops):
                    continue
                makers.append((name, lambda mk=mk: [mk()]))
            if size in training_sizes and (not ops or any("fwd" in o or "train" in o for o in ops)):
                makers.append(("fwd+bwd", functools.partial(training_cases, dt, size)))
    # grouped_bias_add_grad against its floor, beyond the caches.
    if xlarge and (not ops or any(o in "grouped_bias_add_grad" for o in ops)):
        for dname in dtypes:
            for n, h, groups in GROUPED_FLOOR:
                makers.append(("grouped_bias_add_grad",
                               functools.partial(lambda *a: [grouped_floor_case(*a)], DTYPES[dname], n, h, groups)))
    # Megatron-LM through torch_ext.megatron (megatron-core installed; make's .venv has it): 16-bit, the
    # largest size of the run.
    want_megatron = not ops or any("egatron" in o for o in ops)
    if want_megatron and "large" in sizes and _megatron_available():
        for dname in [d for d in dtypes if d != "fp32"]:
            makers.append(("Megatron", functools.partial(megatron_cases, DTYPES[dname])))
    # One case whose output is above 32 MB (fresh mmap'd pages on every call): fp32 softmax backward at
    # samples' "xlarge" size (4x16x512x512, a 64 MB output).
    if xlarge and "fp32" in dtypes and (not ops or any(o in "scaled_masked_softmax_backward" for o in ops)):
        makers.append(("scaled_masked_softmax_backward",
                       lambda: [op_case("scaled_masked_softmax_backward",
                                        dict(samples.OPS["scaled_masked_softmax_backward"].bench)[
                                            "scaled_masked_softmax_backward"], torch.float32, "xlarge")]))
    return makers
