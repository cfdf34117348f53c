"""The host cost of one NPU call, npu_ext against torch_npu, side by side (issue 54, item 8).

Each npu_ext operator that has a torch_npu counterpart calling the SAME aclnn entry point is run with that
counterpart in the same process and runtime: the real torch_npu on the fake CANN (tests/fake_cann), SoC
Ascend950 (NPU_FAKE_SOC=Ascend950PR_9599), where torch_npu's own operators call the aclnn operators npu_ext calls
(aclnnGeluBackwardV2, aclnnPreluBackward, aclnnLogitGrad, aclnnScaledMaskedSoftmaxBackward and the forward ones;
below Ascend950 they take TBE kernels the fake cannot run). Per call it reports:

  * host instructions (valgrind's callgrind; these machines expose no hardware counters) without the fake's
    kernels' arithmetic: the inclusive cost of each fake kernel's run() (the Executor subclasses of
    tests/fake_cann/opapi) is subtracted, so what is left is the host's work: Python, the dispatcher, autograd, the
    checks, the output allocation, the argument conversion, the executor cache, the launch, and the fake's own
    bookkeeping in its entry points (the same for both sides). Counted with the task queue off
    (TASK_QUEUE_ENABLE=0, everything on the calling thread) and on (=1: every thread is counted);
  * the time, interleaved rounds of both sides (best of 5 rounds of `--calls` calls). A time includes the fake
    kernel's arithmetic, the same on both sides; times taken while the machine is busy mean little.

A call is a cache hit where nnopbase caches the operator's executor (GeluBackwardV2, GeluV2, PreluBackward, Prelu,
GroupedBiasAddGrad: the warm-up made the entry) and the repeated miss elsewhere (LogitGrad, Logit and the
ScaledMaskedSoftmax pair: phase 1 on every call). The ratio is ours / torch_npu's (goal: at most 1.0x). Operators
without a counterpart get their absolute count.

Method: one process under callgrind per task-queue setting, instrumentation switched on after the imports (a
client request of a tiny helper library compiled on the fly, which needs valgrind's headers); each case is warmed
up, then the counters are zeroed, `--calls` calls made, the device synchronised and the counters dumped; the same
region without calls (the synchronisation, the dump) is subtracted, and the difference divided by the calls. This is
benchmarks/percall_instructions.py's N calls minus 0 calls inside one process. Both sides are called through
torch.ops (the same Python binding and boxed dispatcher call) with the same call shape (gelu's `approximate`, which
aten takes as a keyword only, is a keyword on both sides), on 256-element fp32 tensors.

    make npu-build && fake=$(.venv-npu/bin/python tests/fake_cann/build.py | tail -n 1) && \\
    LD_LIBRARY_PATH=$fake PYTHONPATH=build/npu/lib .venv-npu/bin/python -m benchmarks.npu_host_cost

Options: --calls N (3000), --no-time, --no-count (a run of one part keeps the other's last results), --profile DIR
(keep the callgrind files of each case for callgrind_annotate), --ops NAME... (some cases; nothing written). Needs
valgrind and a C compiler for the counts; about 5 minutes on 2 cores. Not part of `make bench`. Writes
benchmarks/results/npu-host-cost.{json,md}. In another torch_npu's venv (tools/versions.py, build/versions/<release>)
its python runs the same module against the torch_ext installed there, with that release's fake CANN.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "benchmarks", "results")
SOC = "Ascend950PR_9599"  # --soc: another Ascend950 name, for a torch_npu whose SoC table names it otherwise
WARMUP = 30
# The fake CANN's kernels (tests/fake_cann/opapi: one Executor subclass per operator, its run() the arithmetic),
# as callgrind_annotate names them: their inclusive cost is subtracted.
KERNELS = r"fake::\(anonymous namespace\)::\w+Exec::run\(void\*\)"

HELPER_C = r"""
#include <valgrind/callgrind.h>
void hc_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void hc_zero(void) { CALLGRIND_ZERO_STATS; }
void hc_dump(const char* what) { CALLGRIND_DUMP_STATS_AT(what); }
"""


# (operator, aclnn entry point, cached by nnopbase, has a torch_npu counterpart): the rows, in order.
CASES = [
    ("gelu_backward_v2 none", "aclnnGeluBackwardV2", True, True),
    ("gelu_backward_v2 tanh", "aclnnGeluBackwardV2", True, True),
    ("prelu_backward", "aclnnPreluBackward", True, True),
    ("logit_grad", "aclnnLogitGrad", False, True),
    ("scaled_masked_softmax_backward", "aclnnScaledMaskedSoftmaxBackward", False, True),
    ("gelu tanh", "aclnnGeluV2", True, True),
    ("prelu", "aclnnPrelu", True, True),
    ("logit", "aclnnLogit", False, True),
    ("scaled_masked_softmax", "aclnnScaledMaskedSoftmax", False, True),
    ("grouped_bias_add_grad", "aclnnGroupedBiasAddGrad", True, False),
    ("grouped_bias_add_grad group_idx", "aclnnGroupedBiasAddGradV2", True, False),
]
# What each side calls (both through torch.ops); torch_npu's counterparts on Ascend950.
COUNTERPARTS = {
    "gelu_backward_v2 none": ("npu_ext.gelu_backward_v2(g, x, approximate='none')",
                              "aten.gelu_backward(g, x, approximate='none')"),
    "gelu_backward_v2 tanh": ("npu_ext.gelu_backward_v2(g, x, approximate='tanh')",
                              "aten.gelu_backward(g, x, approximate='tanh')"),
    "prelu_backward": ("npu_ext.prelu_backward(g, x, w)", "aten._prelu_kernel_backward(g, x, w.view(1, C, 1, 1))"),
    "logit_grad": ("npu_ext.logit_grad(x, g, 1e-6)", "aten.logit_backward(g, x, 1e-6)"),
    "scaled_masked_softmax_backward": ("npu_ext.scaled_masked_softmax_backward(g, y, mask, 0.125, False)",
                                       "npu.npu_scaled_masked_softmax_backward(g, y, mask, 0.125, False)"),
    "gelu tanh": ("npu_ext.gelu(x, approximate='tanh')", "aten.gelu(x, approximate='tanh')"),
    "prelu": ("npu_ext.prelu(x, w)", "aten._prelu_kernel(x, w.view(1, C, 1, 1))"),
    "logit": ("npu_ext.logit(x, 1e-6)", "aten.logit(x, 1e-6)"),
    "scaled_masked_softmax": ("npu_ext.scaled_masked_softmax(x, mask, 0.125, False)",
                              "npu.npu_scaled_masked_softmax(x, mask, 0.125, False)"),
    "grouped_bias_add_grad": ("npu_ext.grouped_bias_add_grad(gy) (gy [4, 4, 16])", None),
    "grouped_bias_add_grad group_idx": ("npu_ext.grouped_bias_add_grad(gy, group_idx, 1) (gy [64, 4], 4 groups)", None),
}


def _makers():
    """{operator: (ours, torch_npu's or None)}, each make(dev) -> a callable making one call (in the child)."""
    import torch

    ext = torch.ops.npu_ext
    aten = torch.ops.aten
    npu = torch.ops.npu

    def t(*shape, lo=None, dev="npu"):
        torch.manual_seed(0)
        x = torch.rand(*shape) * 0.9 + 0.05 if lo else torch.randn(*shape)
        return x.to(dev)

    def gelu_bwd(mode):
        def ours(dev):
            g, x = t(16, 16, dev=dev), t(16, 16, dev=dev)
            return lambda: ext.gelu_backward_v2(g, x, approximate=mode)  # the same call shape as aten's

        def theirs(dev):
            g, x = t(16, 16, dev=dev), t(16, 16, dev=dev)
            return lambda: aten.gelu_backward(g, x, approximate=mode)

        return ours, theirs

    def prelu_bwd():
        def ours(dev):
            g, x, w = t(2, 8, 4, 4, dev=dev), t(2, 8, 4, 4, dev=dev), t(8, lo=True, dev=dev)
            return lambda: ext.prelu_backward(g, x, w)

        def theirs(dev):
            g, x, w = t(2, 8, 4, 4, dev=dev), t(2, 8, 4, 4, dev=dev), t(8, lo=True, dev=dev).view(1, 8, 1, 1)
            return lambda: aten._prelu_kernel_backward(g, x, w)

        return ours, theirs

    def prelu_fwd():
        def ours(dev):
            x, w = t(2, 8, 4, 4, dev=dev), t(8, lo=True, dev=dev)
            return lambda: ext.prelu(x, w)

        def theirs(dev):
            x, w = t(2, 8, 4, 4, dev=dev), t(8, lo=True, dev=dev).view(1, 8, 1, 1)
            return lambda: aten._prelu_kernel(x, w)

        return ours, theirs

    def logit_bwd():
        def ours(dev):
            x, g = t(16, 16, lo=True, dev=dev), t(16, 16, dev=dev)
            return lambda: ext.logit_grad(x, g, 1e-6)

        def theirs(dev):
            x, g = t(16, 16, lo=True, dev=dev), t(16, 16, dev=dev)
            return lambda: aten.logit_backward(g, x, 1e-6)

        return ours, theirs

    def logit_fwd():
        def ours(dev):
            x = t(16, 16, lo=True, dev=dev)
            return lambda: ext.logit(x, 1e-6)

        def theirs(dev):
            x = t(16, 16, lo=True, dev=dev)
            return lambda: aten.logit(x, 1e-6)

        return ours, theirs

    def softmax_inputs(dev):
        import torch

        torch.manual_seed(0)
        g = torch.randn(1, 2, 8, 16).to(dev)
        y = torch.softmax(torch.randn(1, 2, 8, 16), -1).to(dev)
        m = (torch.rand(1, 1, 8, 16) < 0.2).to(dev)
        return g, y, m

    def softmax_bwd():
        def ours(dev):
            g, y, m = softmax_inputs(dev)
            return lambda: ext.scaled_masked_softmax_backward(g, y, m, 0.125, False)

        def theirs(dev):
            g, y, m = softmax_inputs(dev)
            return lambda: npu.npu_scaled_masked_softmax_backward(g, y, m, 0.125, False)

        return ours, theirs

    def softmax_fwd():
        def ours(dev):
            x, _, m = softmax_inputs(dev)
            return lambda: ext.scaled_masked_softmax(x, m, 0.125, False)

        def theirs(dev):
            x, _, m = softmax_inputs(dev)
            return lambda: npu.npu_scaled_masked_softmax(x, m, 0.125, False)

        return ours, theirs

    def gelu_fwd():
        def ours(dev):
            x = t(16, 16, dev=dev)
            return lambda: ext.gelu(x, approximate="tanh")

        def theirs(dev):
            x = t(16, 16, dev=dev)
            return lambda: aten.gelu(x, approximate="tanh")

        return ours, theirs

    def grouped_grad(idx):
        def ours(dev):
            if idx:
                gy, i = t(64, 4, dev=dev), torch.tensor([10, 0, 30, 24]).to(dev)
                return lambda: ext.grouped_bias_add_grad(gy, i, 1)
            gy = t(4, 4, 16, dev=dev)
            return lambda: ext.grouped_bias_add_grad(gy)

        return ours

    return {
        "gelu_backward_v2 none": gelu_bwd("none"),
        "gelu_backward_v2 tanh": gelu_bwd("tanh"),
        "prelu_backward": prelu_bwd(),
        "logit_grad": logit_bwd(),
        "scaled_masked_softmax_backward": softmax_bwd(),
        "gelu tanh": gelu_fwd(),
        "prelu": prelu_fwd(),
        "logit": logit_fwd(),
        "scaled_masked_softmax": softmax_fwd(),
        "grouped_bias_add_grad": (grouped_grad(False), None),
        "grouped_bias_add_grad group_idx": (grouped_grad(True), None),
    }


def _selected(names):
    return [c for c in CASES if not names or any(n in c[0] for n in names)]


def _sides(makers, case):
    ours, theirs = makers[case[0]]
    return [("ours", ours)] + ([("torch_npu", theirs)] if theirs is not None else [])


def _setup_runtime():
    # the package of the NPU build (PYTHONPATH), not the source tree's torch_ext/ (no _C_npu there)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != ROOT]
    import torch
    import torch_npu  # noqa: F401

    import torch_ext  # noqa: F401

    assert torch_ext.__file__ and hasattr(torch.ops.npu_ext, "gelu_backward_v2")
    torch.set_num_threads(1)
    torch.npu.set_device(0)
    return torch


class _FakeCounters:
    """The fake libopapi's call counters (tests/fake_cann/opapi): which path the calls took. Read as differences:
    fake_opapi_reset() would also empty the executor cache the warm-up filled."""

    def __init__(self):
        self.lib = ctypes.CDLL("libopapi.so")
        self.lib.fake_opapi_calls.argtypes = [ctypes.c_char_p]

    def read(self, entry):
        c = self.lib.fake_opapi_calls
        return {"phase1": c(f"{entry}GetWorkspaceSize".encode()), "launch": c(entry.encode()),
                "hit": c(f"cache hit {entry}".encode())}


def _child_count(names, calls, helper):
    """Under callgrind: per case and side, a dump of `calls` calls and one of the empty region."""
    torch = _setup_runtime()
    cg = ctypes.CDLL(helper)
    cg.hc_dump.argtypes = [ctypes.c_char_p]
    makers = _makers()
    fake = _FakeCounters()
    paths = {}
    cg.hc_start()
    for case in _selected(names):
        for side, make in _sides(makers, case):
            fn = make("npu")
            for _ in range(WARMUP):
                fn()
            torch.npu.synchronize()
            for label, n in (("calls", calls), ("empty", 0)):
                before = fake.read(case[1])
                cg.hc_zero()
                for _ in range(n):
                    fn()
                torch.npu.synchronize()
                cg.hc_dump(f"{case[0]}|{side}|{label}".encode())
                if n:
                    after = fake.read(case[1])
                    paths[f"{case[0]}|{side}"] = {k: (after[k] - before[k]) / n for k in after}
    print("PATHS " + json.dumps(paths))
    return 0


def _child_time(names, calls, rounds):
    """Best of `rounds` interleaved rounds of `calls` calls per side (seconds per call), printed as JSON."""
    torch = _setup_runtime()
    out = {}
    makers = _makers()
    for case in _selected(names):
        fns = {side: make("npu") for side, make in _sides(makers, case)}
        for fn in fns.values():
            for _ in range(WARMUP):
                fn()
        torch.npu.synchronize()
        best = {side: float("inf") for side in fns}
        for _ in range(rounds):
            for side, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                torch.npu.synchronize()
                best[side] = min(best[side], (time.perf_counter() - t0) / calls)
        out[case[0]] = best
    print("RESULT " + json.dumps(out))
    return 0


def _helper_library(tmp):
    src = os.path.join(tmp, "hc.c")
    lib = os.path.join(tmp, "libhc.so")
    with open(src, "w") as f:
        f.write(HELPER_C)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", lib, src], check=True)
    return lib


def _env(task_queue):
    env = dict(os.environ)
    env.update({"NPU_FAKE_SOC": SOC, "TASK_QUEUE_ENABLE": str(task_queue), "OMP_NUM_THREADS": "1"})
    return env


def _kernel_cost(path):
    """Instructions inside the fake's kernels (their run(), inclusive) in one callgrind file."""
    r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path], capture_output=True,
                       text=True, check=True)
    total = 0
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d,]+) .*" + KERNELS, line)
        if m:
            total += int(m.group(1).replace(",", ""))
    return total


def count(names, calls, task_queue, profile_dir=None):
    """{case: {side: instructions per call}} for one TASK_QUEUE_ENABLE setting."""
    with tempfile.TemporaryDirectory(prefix="npu_host_cost_") as tmp:
        helper = _helper_library(tmp)
        out_base = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               f"--callgrind-out-file={out_base}", sys.executable, os.path.abspath(__file__),
               "--child-count", helper, str(calls), *names]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=_env(task_queue))
        if r.returncode != 0:
            raise RuntimeError(f"callgrind run failed (TASK_QUEUE_ENABLE={task_queue}):\n{r.stderr[-3000:]}")
        regions = {}
        for path in glob.glob(out_base + ".*"):
            with open(path, errors="replace") as f:
                text = f.read()
            m = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
            s = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
            if m and s:
                regions[m.group(1).strip()] = int(s.group(1)) - _kernel_cost(path)
                if profile_dir and m.group(1).strip().endswith("|calls"):
                    os.makedirs(profile_dir, exist_ok=True)
                    case, side, _ = m.group(1).strip().split("|")
                    dest = f"tq{task_queue}-{case.replace(' ', '_')}-{side}.callgrind"
                    shutil.copy(path, os.path.join(profile_dir, dest))
    result, paths = {}, {}
    for key, n in regions.items():
        case, side, label = key.split("|")
        if label == "calls":
            result.setdefault(case, {})[side] = (n - regions[f"{case}|{side}|empty"]) / calls
    m = re.search(r"^PATHS (.*)$", r.stdout, re.M)
    for key, d in json.loads(m.group(1)).items() if m else ():
        case, side = key.split("|")
        paths.setdefault(case, {})[side] = d
    return result, paths


def timing(names, calls, rounds, task_queue):
    cmd = [sys.executable, os.path.abspath(__file__), "--child-time", str(calls), str(rounds), *names]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=_env(task_queue))
    m = re.search(r"^RESULT (.*)$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"timing run failed (TASK_QUEUE_ENABLE={task_queue}):\n{r.stderr[-3000:]}")
    return json.loads(m.group(1))


def machine():
    cpu, flags = platform.processor() or "unknown", ""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        cpu = re.search(r"^model name\s*:\s*(.*)$", text, re.M).group(1).strip()
        fam = re.search(r"^cpu family\s*:\s*(\d+)$", text, re.M)
        mod = re.search(r"^model\s*:\s*(\d+)$", text, re.M)
        if fam and mod:
            cpu += f" (family {fam.group(1)}, model {mod.group(1)})"
        flags = "avx512bw" if re.search(r"\bavx512bw\b", text) else "no avx512bw"
    except (OSError, AttributeError):
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return {"cpu": cpu, "avx512bw": flags, "logical_cpus": os.cpu_count(), "load_1min_at_start": load}


def versions():
    code = ("import torch, torch_npu, json; print(json.dumps({'torch': torch.__version__, "
            "'torch_npu': torch_npu.__version__}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(0))
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {}


def table(rows, info):
    lines = [
        f"Host cost per call, npu_ext / torch_npu, torch_npu {info.get('torch_npu', '?')} (torch "
        f"{info.get('torch', '?')}) on the fake CANN, SoC {info['soc']}, 256-element fp32 tensors, the fake's kernels "
        f"not counted; {info['cpu']}, {info['logical_cpus']} logical CPUs; {info['date']}.",
        "",
    ]
    if "load_1min_before_timing" in info:
        lines += [
            f"Times: best of {info['rounds']} interleaved rounds of {info['calls']} calls, TQ=0, 1-minute load average "
            f"{info['load_1min_before_timing']:.1f} before and {info['load_1min_after_timing']:.1f} after "
            f"({info['logical_cpus']} logical CPUs): times taken on a busy machine are not results. Instructions do "
            "not depend on the load.",
            "",
        ]
    lines += [
        "| operator | aclnn entry point | call | instr. TQ=0: ours / torch_npu | ratio | instr. TQ=1 (all threads): "
        "ours / torch_npu | ratio | time TQ=0: ours / torch_npu | ratio |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]

    def k(v):
        return f"{v / 1e3:.1f}k" if v is not None else "-"

    def pair(d, scale=k):
        if not d:
            return "-", "-"
        o, n = d.get("ours"), d.get("torch_npu")
        if n is None:
            return scale(o), "-"
        return f"{scale(o)} / {scale(n)}", f"{o / n:.3f}x"

    def us(v):
        return f"{v * 1e6:.1f} us"

    for r in rows:
        c0, r0 = pair(r.get("instructions_tq0"))
        c1, r1 = pair(r.get("instructions_tq1"))
        t0, rt = pair(r.get("time_tq0"), us)
        lines.append(f"| {r['op']} | {r['entry']} | {'cache hit' if r['cached'] else 'repeated miss'} | {c0} | {r0} "
                     f"| {c1} | {r1} | {t0} | {rt} |")
    return "\n".join(lines)


def main(argv=None):
    global SOC
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ops", nargs="*", default=[], help="only cases whose name contains one of these strings")
    p.add_argument("--no-count", action="store_true", help="skip the callgrind counts")
    p.add_argument("--no-time", action="store_true", help="skip the timing")
    p.add_argument("--task-queue", nargs="*", type=int, default=[0, 1], help="TASK_QUEUE_ENABLE settings counted")
    p.add_argument("--profile", metavar="DIR", help="keep each case's callgrind file there")
    p.add_argument("--out", default=RESULTS_DIR)
    p.add_argument("--child-count", nargs="+", help=argparse.SUPPRESS)
    p.add_argument("--child-time", nargs="+", help=argparse.SUPPRESS)
    p.add_argument("--soc", default=SOC, help=f"the fake's SoC name (an Ascend950; default {SOC})")
    args = p.parse_args(argv)
    SOC = args.soc  # the children's NPU_FAKE_SOC (_env)
    if args.child_count:
        helper, calls, *names = args.child_count
        return _child_count(names, int(calls), helper)
    if args.child_time:
        calls, rounds, *names = args.child_time
        return _child_time(names, int(calls), int(rounds))
    if not args.no_count and shutil.which("valgrind") is None:
        print("npu_host_cost: valgrind is not installed (apt-get install valgrind), or run with --no-count",
              file=sys.stderr)
        return 2

    info = {**machine(), **versions(), "soc": args.soc, "calls": args.calls, "rounds": args.rounds,
            "date": datetime.datetime.now().isoformat(timespec="seconds")}
    rows = [{"op": c[0], "entry": c[1], "cached": c[2]} for c in _selected(args.ops)]
    by_op = {r["op"]: r for r in rows}
    if not args.no_count:
        for tq in args.task_queue:
            t0 = time.time()
            res, paths = count(args.ops, args.calls, tq, args.profile)
            print(f"counted TASK_QUEUE_ENABLE={tq} in {time.time() - t0:.0f} s", file=sys.stderr)
            for op, d in res.items():
                by_op[op][f"instructions_tq{tq}"] = d
            for op, d in paths.items():  # per call: phase 1 calls, launches, cache hits (the fake's counters)
                by_op[op][f"path_tq{tq}"] = d
                want = {"phase1": 0.0, "hit": 1.0} if by_op[op]["cached"] else {"phase1": 1.0, "hit": 0.0}
                for side, got in d.items():
                    if any(got[k] != v for k, v in want.items()) or got["launch"] != 1.0:
                        print(f"npu_host_cost: {op} ({side}, TASK_QUEUE_ENABLE={tq}) did not take the expected path: "
                              f"per call {got}", file=sys.stderr)
    if not args.no_time:
        info["load_1min_before_timing"] = os.getloadavg()[0]
        for op, d in timing(args.ops, args.calls, args.rounds, 0).items():
            by_op[op]["time_tq0"] = d
        info["load_1min_after_timing"] = os.getloadavg()[0]
    path = os.path.join(args.out, "npu-host-cost.json")
    if (args.no_count or args.no_time) and not args.ops and os.path.exists(path):
        # a run of one part keeps the other part's measurements from the last run (and says when that was)
        with open(path) as f:
            last = json.load(f)
        kept = "time" if args.no_time else "instructions"
        info[f"{kept}_measured"] = last["machine"].get(f"{kept}_measured", last["machine"].get("date"))
        old_rows = {r["op"]: r for r in last["rows"]}
        for r in rows:
            for k, v in old_rows.get(r["op"], {}).items():
                if k.startswith(kept) or (kept == "instructions" and k.startswith("path_")):
                    r.setdefault(k, v)
        for k in ("load_1min_before_timing", "load_1min_after_timing"):
            if args.no_time and k in last["machine"]:
                info[k] = last["machine"][k]
    md = table(rows, info)
    print(md)
    if not args.ops:
        os.makedirs(args.out, exist_ok=True)
        with open(path, "w") as f:
            json.dump({"machine": info, "rows": rows}, f, indent=1)
        with open(os.path.join(args.out, "npu-host-cost.md"), "w") as f:
            f.write(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
