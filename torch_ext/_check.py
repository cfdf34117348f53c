"""``torch_ext.check()`` / ``python -m torch_ext --check``: the NPU path compared with the CPU kernels.

A small, fixed sample set ships with the package (no test suite or pytest needed): the five backward operators
(every variant: gelu approximate none/tanh, prelu with C weights and with one, grouped_bias_add_grad with
cumulative ends, with counts and without group_idx, scaled_masked_softmax_backward with a mask and with
fix_triu_mask, logit_grad with eps -1, 0 and 0.1) and the five training functions, forward and backward
through autograd, each in fp32, fp16 and bf16; two ``.out`` calls into strided views of a sentinel-filled
storage; and special values (NaN, inf, an fp16 overflow). Inputs come from a fixed generator seed and are small.
Each family's module (torch_ext/_family_<family>.py) declares its cases (``declare``); this module keeps the
comparison, the order of the report and the runner.

Every case runs twice on the same inputs: on the device under test and on the CPU (the CPU kernels are the
reference). The device results, moved to the CPU, must equal the CPU's within a per-dtype tolerance
(``TOL``: torch_ext.testing.tolerances.DEVICE, as the device tests use), with NaN and inf at the same positions. One documented SoC difference
is compared with written-out values instead: on an Ascend950, prelu_backward's special values (its kernel has
no zero terms; the CPU kernel follows A2/A3, docs/operators.md "Semantics notes"). Each case is reported as
``ok``, ``MISMATCH`` (how many elements differ, the largest absolute and relative errors, the first differing
index with both values) or ``ERROR`` (the exception's first line). The report starts with what a bug report
needs (versions, the SoC, whether the NPU kernels are loaded, the NPU status lines after the run, i.e. with
each kernel probe's result and any CPU fallback) and ends with a one-line summary.

Nothing here imports torch_npu: ``torch_ext`` has already imported it when it loaded the NPU kernels.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import time
import warnings
from typing import Callable, List, Optional, Sequence, Tuple

import torch

from torch_ext.testing import tolerances

__all__ = ["check", "compare", "cases", "run_case", "Case", "CheckResult", "CaseResult", "TOL", "SEED", "declare"]

SEED = 20240607  # every case draws its inputs from a generator seeded with this
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# |device - cpu| <= atol + rtol |cpu|, as (rtol, atol) per dtype (the device tests' table too)
TOL = tolerances.DEVICE
SENTINEL = 77.0  # exact in every dtype: what a strided .out call must leave outside its view



@dataclasses.dataclass(frozen=True)
class Case:
    """One check: ``make(generator)`` builds CPU inputs, ``run(*inputs)`` returns [(label, tensor)] (called once
    with copies of the inputs on the device under test and once with copies on the CPU, the reference).

    ``soc_values``, for a documented SoC difference: (SoC name prefixes, what differs, a function returning the
    written-out [(label, tensor)] those SoCs give). On such a SoC the device results are compared with these
    values instead of the CPU's."""
    name: str
    make: Callable[[torch.Generator], tuple]
    run: Callable[..., Sequence[Tuple[str, torch.Tensor]]]
    soc_values: Optional[Tuple[Tuple[str, ...], str, Callable[[], Sequence[Tuple[str, torch.Tensor]]]]] = None


@dataclasses.dataclass
class CaseResult:
    """The outcome of one case: status "ok", "MISMATCH" or "ERROR", and the detail of a failure."""
    name: str
    status: str
    detail: str = ""

    @property
    def ok(self):
        return self.status == "ok"

    def line(self):
        return f"{self.status:<9}{self.name}" + (f": {self.detail}" if self.detail else "")


@dataclasses.dataclass
class CheckResult:
    """What ``check()`` found: the device, the per-case results, the report text, and ``not_run``, why nothing
    ran (no NPU, NPU kernels not loaded; "" when the cases ran). ``exit_code``: 0 all ok, 1 a mismatch or an
    error, 2 not run."""
    device: str
    cases: List[CaseResult]
    report: str
    not_run: str = ""
    seconds: float = 0.0

    @property
    def failed(self):
        return [c for c in self.cases if not c.ok]

    @property
    def exit_code(self):
        if self.not_run:
            return 2
        return 1 if self.failed else 0

    def summary(self):
        """The last line of the report."""
        if self.not_run:
            return f"check: not run: {self.not_run}"
        count = {s: sum(c.status == s for c in self.cases) for s in ("ok", "MISMATCH", "ERROR")}
        return (f"check: {len(self.cases)} cases, {count['ok']} ok, {count['MISMATCH']} mismatched, "
                f"{count['ERROR']} errors on {self.device} ({self.seconds:.1f} s)")


# ---------------------------------------------------------------------------------------------------------------
# The comparison.
def _fmt(v):
    return repr(float(v)) if math.isfinite(v) or math.isnan(v) else ("inf" if v > 0 else "-inf")


def compare(actual: torch.Tensor, expected: torch.Tensor, tol=None) -> Optional[str]:
    """None when ``actual`` (the device result, any device) matches ``expected`` (the CPU kernel's), else what
    differs: the dtype or shape, or how many elements are off, the largest absolute and relative errors over the
    elements finite in both, and the first differing index with both values.

    Elements match when ``|actual - expected| <= atol + rtol |expected|`` (``tol`` = (rtol, atol), default
    ``TOL[expected.dtype]``) or both are equal (inf), or both are NaN: NaN and inf positions must be the same."""
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} instead of {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)} instead of {list(expected.shape)}"
    rtol, atol = tol if tol is not None else TOL.get(expected.dtype, TOL[torch.float32])
    a = actual.detach().cpu().to(torch.float64).reshape(-1)
    e = expected.detach().cpu().to(torch.float64).reshape(-1)
    finite = torch.isfinite(a) & torch.isfinite(e)
    diff = torch.where(finite, (a - e).abs(), torch.zeros((), dtype=torch.float64))
    good = (a == e) | (a.isnan() & e.isnan()) | (finite & (diff <= atol + rtol * e.abs()))
    if bool(good.all()):
        return None
    bad = (~good).nonzero().reshape(-1)
    first = int(bad[0])
    index = [int(i) for i in torch.unravel_index(torch.tensor(first), tuple(expected.shape))] if expected.dim() else []
    at = f"first at [{', '.join(map(str, index))}]: {_fmt(a[first])} instead of {_fmt(e[first])}"
    nonfinite = int((~good & ~finite).sum())
    text = f"{bad.numel()} of {a.numel()} elements differ"
    if nonfinite == bad.numel():
        return f"{text}, all at NaN/inf positions; {at}"
    rel = torch.where(e != 0, diff / e.abs(), torch.where(diff > 0, math.inf, 0.0))  # off a 0: inf
    max_abs, max_rel = float(diff.max()), float(rel[finite].max())
    if nonfinite:
        text += f" ({nonfinite} at NaN/inf positions)"
    return f"{text}; max abs err {max_abs:.3g}, max rel err {max_rel:.3g} (over finite elements); {at}"


# ---------------------------------------------------------------------------------------------------------------
# The sample set: each family's module (torch_ext/_family_<family>.py) declares its cases, by section of the
# report; cases() puts them in report order, the families in the order torch_ext._families imports them.
SECTIONS = ("backward", "function", "strided", "special")
_DECLARED = {section: [] for section in SECTIONS}


def declare(section):
    """Declares a family's cases of one section of the report (a decorator on a function returning [Case]):
    "backward" (its backward op, every variant) and "function" (its training function, forward and backward
    through autograd) are called once per dtype of ``DTYPES``, with it; "strided" (``.out`` calls into strided
    views of a ``SENTINEL``-filled storage) and "special" (special values) once, without."""
    def register(make_cases):
        _DECLARED[section].append(make_cases)
        return make_cases

    return register


def dtype_name(dtype):
    """"float16" for torch.float16: how the case names end."""
    return str(dtype).replace("torch.", "")


def uniform(gen, shape, low, high, dtype=torch.float32):
    """A CPU tensor drawn uniformly from [low, high) with ``gen``, in fp32 then converted to ``dtype``."""
    return (torch.rand(shape, generator=gen) * (high - low) + low).to(dtype)


def autograd(fn, names, *inputs, **kwargs):
    """[forward output, gradient of each input] for an incoming gradient drawn from its own seed: what the
    "function" cases return. ``names``: the inputs' names, space-separated, for the labels."""
    leaves = [t.requires_grad_() for t in inputs]
    y = fn(*leaves, **kwargs)
    dy = uniform(torch.Generator().manual_seed(SEED + 1), y.shape, -2, 2, y.dtype).to(y.device)
    labels = ["forward"] + [f"grad {n}" for n in names.split()]
    return list(zip(labels, (y.detach(),) + torch.autograd.grad(y, leaves, dy)))


def cases() -> List[Case]:
    """The sample set, in report order: backward ops, training functions (each in every dtype of ``DTYPES``),
    strided .out calls, special values."""
    out = []
    for section in SECTIONS:
        for dtype in DTYPES if section in ("backward", "function") else (None,):
            for make_cases in _DECLARED[section]:
                out += make_cases(dtype) if dtype is not None else make_cases()
    return out


# ---------------------------------------------------------------------------------------------------------------
# Running it.
def _copy_to(inputs, device):
    """Fresh copies (strides kept) of the inputs on the device, so that no run sees another's tensors."""
    return tuple(t.to(device, copy=True) if isinstance(t, torch.Tensor) else t for t in inputs)


def _first_line(e):
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


def _synchronize(device):
    if device.type != "cpu":
        torch.get_device_module(device).synchronize(device)


def _differences(got, reference, device):
    """["label: what differs"] between the device's [(label, device, tensor)] and the reference [(label, tensor)]."""
    problems = [f"{len(got)} results instead of {len(reference)}"] if len(got) != len(reference) else []
    for (label, where, actual), (_, exp) in zip(got, reference):
        if where.type != device.type:
            problems.append(f"{label}: the result is on {where}, not on {device}")
            continue
        diff = compare(actual, exp)
        if diff is not None:
            problems.append(f"{label}: {diff}")
    return problems


def run_case(case: Case, device, soc: str = "") -> CaseResult:
    """Runs one case on the device and on the CPU and compares the results (on a SoC of ``case.soc_values``:
    compares the device's with those written-out values, and says how many of them differ from the CPU's)."""
    device = torch.device(device)
    try:
        inputs = case.make(torch.Generator().manual_seed(SEED))
        expected = [(label, t.detach()) for label, t in case.run(*_copy_to(inputs, "cpu"))]
    except Exception as e:
        return CaseResult(case.name, "ERROR", f"on the CPU (the reference): {_first_line(e)}")
    try:
        got = case.run(*_copy_to(inputs, device))
        got = [(label, t.device, t.detach().cpu()) for label, t in got]
        _synchronize(device)  # a failure queued on the device surfaces here, not in the next case
    except Exception as e:
        return CaseResult(case.name, "ERROR", _first_line(e))
    note = ""
    if case.soc_values is not None and soc.startswith(case.soc_values[0]):
        _, what, values = case.soc_values
        reference = list(values())
        cpu = torch.device("cpu")
        differ = len(_differences([(label, cpu, t) for label, t in reference], expected, cpu))
        note = f"[{soc}: compared with {what}; {differ} of {len(reference)} outputs differ from the CPU's] "
        expected = reference
    problems = _differences(got, expected, device)
    if not problems:
        return CaseResult(case.name, "ok", note.strip())
    detail = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more outputs" if len(problems) > 3 else "")
    return CaseResult(case.name, "MISMATCH", note + detail)


def _not_available(device: str):
    """Why the device cannot be checked ("" when it can). Asks torch about an "npu" device only once torch_ext has
    loaded its NPU kernels, i.e. once torch_npu is imported (it registers the device type)."""
    from . import _npu

    if device.split(":")[0] == "npu":
        if not _npu.LOADED:
            return f"the NPU kernels are not loaded ({_npu.why_not_loaded()})"
        if not torch.npu.is_available() or torch.npu.device_count() == 0:
            return "torch_npu sees no NPU device (torch.npu.is_available() is False)"
        index = torch.device(device).index or 0
        if index >= torch.npu.device_count():
            return f"there is no {device} (torch.npu.device_count() is {torch.npu.device_count()})"
        return ""
    kind = torch.device(device).type
    if kind != "cpu":
        module = getattr(torch, kind, None)
        if module is None or not module.is_available():
            return f"no {kind} device"
    return ""


def _soc(device):
    if device.type == "npu":
        try:
            return torch.npu.get_device_name(device.index or 0)
        except Exception as e:  # pragma: no cover - depends on the machine
            return f"unknown ({_first_line(e)})"
    return ""


def _header(device, soc):
    from . import __version__, _config

    npu = _config._version("torch-npu") or _config._version("torch_npu")
    here = os.path.dirname(os.path.abspath(__file__))
    lines = [f"torch_ext --check: {device} results compared with the CPU kernels on the same inputs",
             f"torch_ext {__version__} ({here}), torch {torch.__version__}, torch_npu {npu or 'not installed'}, "
             f"Python {platform.python_version()}, {platform.machine()}"]
    if soc:
        lines.append(f"device: {device}, SoC {soc}")
    lines.extend(_config._npu_lines())
    return lines


def check(device: str = "npu") -> CheckResult:
    """Compares ``device``'s results with the CPU kernels' on the package's sample set (see ``cases()``): the
    five backward operators, the five training functions forward and backward, two strided ``.out`` calls and
    special values, in fp32, fp16 and bf16, with the per-dtype tolerances ``TOL`` and NaN positions equal.

    Returns a ``CheckResult`` (per-case status, ``report`` text for a bug report, ``exit_code``: 0 all ok,
    1 a mismatch or error, 2 not run because the device is unavailable, e.g. no NPU or the NPU kernels are not
    loaded; ``not_run`` says why). ``python -m torch_ext --check`` prints the report and exits with that code.
    ``device="cpu"`` compares the CPU with itself (a self-check of the sample set). Never imports torch_npu."""
    why = _not_available(str(device))
    if why:
        result = CheckResult(str(device), [], "", not_run=why)
        result.report = "\n".join(_header(device, "") + [result.summary()])
        return result
    dev = torch.device(device)
    if dev.type == "npu" and dev.index is None:
        dev = torch.device("npu", torch.npu.current_device())
    soc = _soc(dev)
    start = time.perf_counter()
    results, warned = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for case in cases():
            results.append(run_case(case, dev, soc))
    for w in caught:  # Python warnings only (C++ ones such as the CPU fallback's go to stderr; the status says it)
        first = str(w.message).strip().splitlines()[0] if str(w.message).strip() else w.category.__name__
        if first not in warned:
            warned.append(first)
    result = CheckResult(str(dev), results, "", seconds=time.perf_counter() - start)
    lines = _header(dev, soc)  # the NPU status after the run: the kernel probes' results and CPU fallbacks
    tols = ", ".join(f"{str(d).replace('torch.', '')} {TOL[d][0]:g}" for d in DTYPES)
    lines.append(f"match: |{dev.type} - cpu| <= t + t |cpu| with t = {tols}; NaN and inf at the same positions")
    lines.extend(r.line() for r in results)
    if warned:
        lines.append("warnings during the check:")
        lines.extend(f"  {w}" for w in warned)
    lines.append(result.summary())
    result.report = "\n".join(lines)
    return result
