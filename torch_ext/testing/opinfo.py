"""The shape of one operator's entry in the sample table (``OpInfo``, after PyTorch's), and the input makers that the
families' entries share.

Each family's entry is written in ``torch_ext/testing/families/<family>.py``; ``torch_ext.testing.samples`` gathers
them into ``OPS`` and iterates over them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional, Tuple

import torch

from torch_ext.testing.inputs import make

ops = torch.ops.npu_ext
f64 = torch.float64

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
LOW_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "transposed", "sliced", "expanded")
# tiny: opcheck / compile / gradcheck; test: value tests; small / medium / large: benchmarks (64K / 1M / 4M
# elements), medium also the determinism test.
SIZES = ("tiny", "test", "small", "medium", "large")
# Benchmark-only sizes: per-call rows (fwd+bwd at 256 / 4096 elements) and "xlarge" (softmax only: a 64 MB fp32
# output, above glibc's 32 MB mmap threshold).
PERCALL_SIZES = ("256", "4096")
BENCH_SIZES = ("small", "medium", "large") + PERCALL_SIZES + ("xlarge",)
# The elementwise operators' shapes per size (gelu, logit).
ELEMENTWISE = {"tiny": (4, 6), "test": (5, 37, 19), "small": (64, 1024), "medium": (1024, 1024),
               "large": (4096, 1024), "256": (16, 16), "4096": (64, 64)}


def generator(seed=0):
    return torch.Generator().manual_seed(seed)


def rand(shape, dtype, low, high, gen, layout="contiguous"):
    return make(shape, dtype, low=low, high=high, layout=layout, generator=gen)


def leaf(shape, low, high, dtype=f64, requires_grad=True):
    """A float64 leaf (global generator) with values in [low, high): the gradcheck cases' inputs."""
    t = (torch.rand(shape, dtype=f64) * (high - low) + low).to(dtype)
    return t.requires_grad_(requires_grad)


def second(size, layout, alternative):
    """The layout of an op's second input: at test sizes another one than the first's (more layouts per
    test), at benchmark sizes the same (contiguous benchmarks stay contiguous)."""
    return layout if size in BENCH_SIZES else alternative


def spread(n, dtype, gen, low_exp=None, high_exp=None, sign=0):
    """n values m * 2^e with m uniform in [1, 2) and e uniform over the dtype's normal exponents (or
    [low_exp, high_exp]): the whole normal range, every binade about equally often. sign: +1, -1 or 0 (both)."""
    fi = torch.finfo(dtype)
    lo = int(math.log2(fi.tiny)) if low_exp is None else low_exp
    hi = int(math.log2(fi.max)) if high_exp is None else high_exp
    e = torch.randint(lo, hi + 1, (n,), generator=gen, dtype=torch.int64).to(f64)
    m = 1 + torch.rand(n, generator=gen, dtype=f64)
    v = m * torch.pow(2.0, e)
    if sign == 0:
        v = torch.where(torch.rand(n, generator=gen) < 0.5, -v, v)
    elif sign < 0:
        v = -v
    return v.clamp(-fi.max, fi.max).to(dtype)


# Random problems for the property-based tests (see OpInfo.random). pick.int(lo, hi) is inclusive;
# pick.tensor(shape, dtype, low, high) returns a tensor of that shape in a random layout.
def random_shape(pick, max_rank, max_dim=6):
    return [pick.int(0, max_dim) if pick.int(0, 9) == 0 else pick.int(1, max_dim) for _ in range(pick.int(0, max_rank))]


def broadcastable_to(pick, shape):
    """A shape that broadcasts to `shape`: some leading dims dropped, some dims set to 1."""
    s = list(shape[pick.int(0, len(shape)):]) if pick.int(0, 2) == 0 else list(shape)
    return [1 if pick.int(0, 3) == 0 else d for d in s]


def other_float(pick, dtype):
    return pick.choice([dtype, dtype, torch.float32, torch.float16, torch.bfloat16, torch.float64])


def nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def fmt(shape):
    return "x".join(str(s) for s in shape)


def torch_ext():
    import torch_ext as te
    return te


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """Everything the tests, the benchmarks and ``--check`` know about one backward operator and its forward.

    * ``make(dtype, size, variant, gen, layout)`` -> (args, kwargs) of the backward op, with values in the op's
      ordinary domain; ``size`` is one of SIZES (or BENCH_SIZES); ``layout`` (torch_ext.testing.inputs.make) applies
      to the main inputs;
    * ``reference``: the float64 oracle, called with the same (args, kwargs), written from the operator contract
      (docs/operators.md) and sharing no code with the package;
    * ``outputs``: the keyword names of the ``.out`` overload's outputs;
    * ``range_make(dtype, gen, variant)``: inputs whose magnitudes span the dtype's whole normal range, and
      ``range_scale(args)`` (optional) the per-element factor the output scales with (test_range.py);
    * ``random(pick, dtype, variant)`` -> (args, kwargs): random shapes, broadcasts and dtype mixes for the
      property-based tests (test_properties.Picker);
    * ``forward`` / ``function`` / ``native`` / ``function_inputs``: the npu_ext forward op, the torch_ext training
      function whose gradient the op computes, plain PyTorch's equivalent, and its differentiable inputs (autograd,
      compile, torchair, the fwd+bwd benchmarks);
    * ``gradcheck``: (name, ours, native, make) training-function cases in float64 (gradcheck, double backward
      against native); ``backward_gradcheck``: (name, fn, make, per_call) cases of the backward op itself
      (per_call: also checked for running no Python per call);
    * ``aclnn``: the aclnn entry points of the backward op (the NPU tests' counters); ``probe(npu)``: one small call
      through each of them (``npu(overload, *args)`` runs an overload on the NPU path);
    * ``bench``: (case name, fn(dtype, size, inductor) -> dict of benchmarks.cases.Case fields) per benchmark row;
      ``training``: (variant, PyTorch label, bytes per x, memory bound) of the fwd+bwd row;
      ``count_cases(dt, dev)``: (name, make_inputs, forward) whose NPU kernel launches the benchmarks count;
      ``kernel_counts``: per count case, the kernels (aclnn operators and the copies they make) of its forward call in
      bf16 and fp32 on the native NPU path, and of its backward in every dtype, that tests/npu/test_npu_forward.py
      expects (None: a case that test checks by hand, or not);
    * ``forward_reference``: the float64 oracle of the forward op, called with its arguments (``oracle.<forward>``:
      tests/ops/test_forward.py's value tests), written from the contract as ``reference`` is;
    * ``forward_samples``: zero-argument makers of (args, kwargs) of the forward op ``npu_ext.<forward>``, across its
      dtypes, layouts and arguments (tests/ops/test_forward.py: opcheck, the composite against the CPU kernel);
    * ``cache_cases``: per aclnn entry point of the family (backward and forward), (make(variant) -> (op, args) on host
      tensors, the variants that each change one thing torch_npu must hash, whether nnopbase caches its executor:
      a composite executor, CREATE_EXECUTOR, in its op_api) (tests/npu/test_npu_cache*.py);
    * ``errors(err, expect)``: the pinned messages of bad input: ``expect(err(lambda device: call), \"\"\"message\"\"\")``
      (tests/ops/test_errors.py: err runs the call on CPU and Meta, expect is expecttest's assertExpectedInline).
    """

    name: str
    variants: Tuple[str, ...]
    make: Callable
    reference: Callable
    outputs: Tuple[str, ...]
    range_make: Callable
    range_scale: Optional[Callable] = None
    random: Optional[Callable] = None
    forward: Optional[str] = None
    function: Optional[Callable] = None
    native: Optional[Callable] = None
    function_inputs: Optional[Callable] = None
    gradcheck: Tuple = ()
    backward_gradcheck: Tuple = ()
    aclnn: Tuple[str, ...] = ()
    probe: Optional[Callable] = None
    bench: Tuple = ()
    training: Optional[Tuple] = None
    count_cases: Optional[Callable] = None
    errors: Optional[Callable] = None
    forward_reference: Optional[Callable] = None
    forward_samples: Tuple = ()
    kernel_counts: Optional[dict] = None
    cache_cases: Optional[dict] = None

    @property
    def op(self):
        return getattr(ops, self.name)

    def oracle(self, args, kwargs):
        out = self.reference(*args, **kwargs)
        return out if isinstance(out, tuple) else (out,)

    def run(self, args, kwargs):
        out = self.op(*args, **kwargs)
        return out if isinstance(out, tuple) else (out,)


def cache_rand(*shape, dtype=torch.float32, low=None):
    """A host tensor of the executor-cache cases (OpInfo.cache_cases): uniform in [0.05, 0.95) with low="unit", else
    normal."""
    t = torch.rand(*shape) * 0.9 + 0.05 if low == "unit" else torch.randn(*shape)
    return t.to(dtype)


def cache_transposed(rows, cols, dtype=torch.float32):
    """A [rows, cols] view with transposed strides."""
    return cache_rand(cols, rows, dtype=dtype).t()


def zeros(*shape, dtype=torch.float32, device="cpu"):
    return torch.zeros(shape, dtype=dtype, device=device)
