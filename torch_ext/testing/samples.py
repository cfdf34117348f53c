"""The one table of sample inputs per operator: ``OPS``, the backward operators' ``OpInfo`` entries
(torch_ext/testing/opinfo.py), one per family module in torch_ext/testing/families/, and the iterators over it.

Every test and tool that needs inputs for an npu_ext op draws them from here: the value tests (test_ops.py),
opcheck (test_opcheck.py), determinism (test_determinism.py), the property-based tests (test_properties.py), the
whole-range accuracy test and report (test_range.py, accuracy_report.py), the device-generic implementation
(test_generic.py), the ISA variants (isa_worker.py), the pinned error messages (test_errors.py), autograd
(test_autograd.py), torch.compile (test_compile.py), torchair (test_torchair.py), the NPU path's tests, the
benchmark cases (benchmarks/cases.py, benchmarks/npu.py) and ``python -m torch_ext --check``. The accuracy metric
and its tolerances are torch_ext.testing.tolerances' (THRESHOLD / SMALL / assert_accurate), and nothing else.

Adding an operator means one module in torch_ext/testing/families/ defining its ``INFO`` (and its float64 oracle).
"""

from __future__ import annotations

import functools
from typing import Dict

import torch

from torch_ext.testing import families, tolerances
from torch_ext.testing.families.grouped_bias_add import group_idx_of, native_grouped
from torch_ext.testing.families.prelu import DEVICE_CASES as PRELU_DEVICE_CASES
from torch_ext.testing.families.scaled_masked_softmax import causal_mask as causal
from torch_ext.testing.families.scaled_masked_softmax import native_softmax
from torch_ext.testing.opinfo import (
    BENCH_SIZES, DTYPES, LAYOUTS, LOW_DTYPES, PERCALL_SIZES, SIZES, OpInfo, generator, spread)

__all__ = ["OPS", "OpInfo", "Sample", "samples", "range_samples", "function_samples", "accuracy_rows", "range_rows",
           "check_range", "generator", "spread", "DTYPES", "LOW_DTYPES", "LAYOUTS", "SIZES", "BENCH_SIZES",
           "PERCALL_SIZES", "PRELU_DEVICE_CASES", "group_idx_of", "native_grouped", "native_softmax", "causal"]

f64 = torch.float64

OPS: Dict[str, OpInfo] = {info.name: info for info in families.infos()}


# ---------------------------------------------------------------------------------------------------------
# Iterators over the table.
class Sample:
    """One op, variant and dtype, with its inputs: made when a test first reads them, not when the tests are
    collected (pytest collects every parametrized sample of a run, selected or not: under the aarch64 emulation their
    tensors cost most of a minute per worker)."""

    def __init__(self, info: OpInfo, variant: str, dtype: torch.dtype, make):
        self.info, self.variant, self.dtype = info, variant, dtype
        self._make = make  # () -> (args, kwargs)

    @functools.cached_property
    def _inputs(self):
        return self._make()

    @property
    def args(self) -> tuple:
        return self._inputs[0]

    @property
    def kwargs(self) -> dict:
        return self._inputs[1]

    def __repr__(self):
        return f"Sample({self.id})"

    @property
    def id(self):
        return f"{self.info.name}-{self.variant}-{str(self.dtype).replace('torch.', '')}"

    def run(self):
        return self.info.run(self.args, self.kwargs)

    def expected(self):
        return self.info.oracle(self.args, self.kwargs)

    def out_dtype(self):
        return self.run_meta()[0].dtype

    def run_meta(self):
        meta_args = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in self.args]
        r = self.info.op(*meta_args, **self.kwargs)
        return r if isinstance(r, tuple) else (r,)

    def out_kwargs(self, factory=torch.empty):
        """Fresh outputs for the .out overload, keyed by name."""
        return {name: factory(m.shape, dtype=m.dtype) for name, m in zip(self.info.outputs, self.run_meta())}


def samples(size="test", dtypes=DTYPES, layout="contiguous", seed=0, ops_=None):
    """One Sample per op, variant and dtype."""
    for info in OPS.values():
        if ops_ is not None and info.name not in ops_:
            continue
        for variant in info.variants:
            for dtype in dtypes:
                yield Sample(info, variant, dtype, functools.partial(info.make, dtype, size, variant, generator(seed),
                                                                     layout))


def range_samples(dtypes=LOW_DTYPES, seed=0):
    """One whole-normal-range Sample per op, variant and dtype (see OpInfo.range_make)."""
    for info in OPS.values():
        for variant in info.variants:
            for dtype in dtypes:
                yield Sample(info, variant, dtype, functools.partial(info.range_make, dtype, generator(seed), variant))


def function_samples(size="tiny", dtypes=(f64,), seed=0):
    """(id, function, native, differentiable inputs, keyword arguments) per op and variant."""
    for info in OPS.values():
        for variant in info.variants:
            for dtype in dtypes:
                inputs, kwargs = info.function_inputs(dtype, size, variant, generator(seed))
                yield (f"{info.name}-{variant}-{str(dtype).replace('torch.', '')}", info.function, info.native,
                       inputs, kwargs)


def accuracy_rows(sample, run=None):
    """[(label, actual, expected)] per output of one sample: what the accuracy metric is computed on.
    run(args, kwargs) computes the outputs (default: the op through the dispatcher)."""
    outs = sample.run() if run is None else run(sample.args, sample.kwargs)
    exps = sample.expected()
    return [(f"{sample.info.name} ({sample.variant}) {name}", a, e)
            for name, a, e in zip(sample.info.outputs, outs, exps)]


def range_rows(sample, run=None):
    """[(label, actual, expected, small)] for one whole-range sample (run: see accuracy_rows)."""
    rows = []
    scale = sample.info.range_scale(sample.args) if sample.info.range_scale else None
    for label, a, e in accuracy_rows(sample, run):
        if scale is not None:
            rows.append((label, a.to(torch.float64) / scale, e / scale, None))
        else:
            rows.append((label, a, e, torch.finfo(sample.dtype).tiny))
    return rows


def check_range(sample, run=None):
    """The contract's metric with every normal output non-tiny, and the mean bound per output binade."""
    for label, a, e, small in range_rows(sample, run):
        tolerances.assert_accurate_per_binade(a, e, sample.dtype, label, small=small)
