"""Benchmark suite: npu_ext CPU kernels against the best PyTorch alternative, side by side in one run.

    python -m benchmarks.run --quick     # every op, dtype and size; inductor and fwd+bwd at the large size
    python -m benchmarks.run --full      # longer timing, inductor at every size

For every op, dtype (fp32, bf16, fp16), size (small 64K, medium 1M, large 4M elements) and thread count
(1 and all), the npu_ext call and each PyTorch alternative are timed with torch.utils.benchmark, interleaved
in rounds so that load from other processes hits all of them alike; the median over every timed run is
reported. Effective GB/s = ideal bytes moved / median time, compared with a tensor copy that moves as many
bytes, timed in the same run with the same threads ("% copy" = fraction of that copy roofline).

Results: benchmarks/results/bench-<mode>.{json,csv}, speedup-<mode>.png and table-<mode>.md (the README
performance section is table-full.md).

With torch_npu installed (detected without importing it) the suite instead compares the npu_ext ops with
torch_npu's native ops on the NPU (see benchmarks/npu.py; that path cannot run on a CPU-only machine).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import statistics
import sys
import time

import torch
from torch.utils import benchmark

from . import report

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

MODES = {
    # rounds x min_run_time per round and candidate (seconds)
    "quick": dict(rounds=2, min_run_time=0.1, sizes=("small", "medium", "large"), inductor_sizes=("large",),
                  training_sizes=("large",)),
    "full": dict(rounds=5, min_run_time=0.2, sizes=("small", "medium", "large"),
                 inductor_sizes=("small", "medium", "large"), training_sizes=("small", "medium", "large")),
}


def log(msg):
    print(msg, flush=True)


def machine_info():
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "npu_ext_cpu_capability": torch.ops.npu_ext._cpu_capability(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def timed(fns, threads, rounds, min_run_time):
    """Median seconds per call of each callable, timed in interleaved rounds. Failing callables -> None."""
    ok = {}
    for name, fn in fns.items():
        try:
            fn()  # warm up (and check it runs)
            ok[name] = fn
        except Exception as e:  # a baseline this torch build lacks, say
            log(f"      {name}: skipped ({type(e).__name__}: {str(e).splitlines()[0][:100]})")
    times = {name: [] for name in ok}
    for _ in range(rounds):
        for name, fn in ok.items():
            m = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads).blocked_autorange(
                min_run_time=min_run_time)
            times[name].extend(m.times)
    return {name: (statistics.median(ts) if ts else None) for name, ts in times.items()}


def run_case(case, threads, mode, copy_cache):
    fns = {"npu_ext": case.ext}
    fns.update(case.baselines)
    for name, make in case.compiled.items():
        torch._dynamo.reset()  # inductor bakes the thread count into the generated code
        try:
            fns[name] = make()
        except Exception as e:
            log(f"      {name}: compile failed ({type(e).__name__}: {str(e).splitlines()[0][:100]})")
    # Copy roofline: a tensor copy moving the same bytes (half read, half written), same threads, timed in
    # the same rounds as the case it is first needed for.
    key = (case.bytes // 8, threads)
    copy_name = "__copy__"
    if key not in copy_cache:
        src = torch.ones(key[0], dtype=torch.float32)
        dst = torch.zeros_like(src)
        fns[copy_name] = lambda: dst.copy_(src)
    med = timed(fns, threads, mode["rounds"], mode["min_run_time"])
    if copy_name in med:
        copy_cache[key] = 8 * key[0] / med.pop(copy_name)
    copy_gbps = copy_cache[key] / 1e9
    ext_s = med.pop("npu_ext", None)
    if ext_s is None:
        return None  # reported by timed()
    base = {k: v for k, v in med.items() if v is not None}
    best = min(base, key=base.get) if base else None
    gbps = case.bytes / ext_s / 1e9
    rec = {
        "op": case.op, "dtype": case.dtype, "size": case.size, "shape": case.shape, "numel": case.numel,
        "threads": threads, "bytes": case.bytes, "memory_bound": case.memory_bound,
        "npu_ext_ms": ext_s * 1e3,
        "baselines_ms": {k: v * 1e3 for k, v in base.items()},
        "speedup_vs": {k: v / ext_s for k, v in base.items()},
        "best_baseline": best,
        "best_baseline_ms": base[best] * 1e3 if best else None,
        "speedup": base[best] / ext_s if best else None,
        "gbps": gbps,
        "baseline_gbps": {k: case.bytes / v / 1e9 for k, v in base.items()},
        "copy_gbps": copy_gbps,
        "roofline_frac": gbps / copy_gbps,
    }
    others = ", ".join(f"{k} {v * 1e3:.3f} ms ({v / ext_s:.2f}x)" for k, v in base.items())
    log(f"      npu_ext {ext_s * 1e3:.3f} ms, {gbps:.1f} GB/s = {rec['roofline_frac']:.0%} of copy "
        f"({copy_gbps:.1f} GB/s) | {others}")
    return rec


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="quick mode (default; < 5 minutes)")
    g.add_argument("--full", action="store_true", help="full mode (longer timing, inductor at every size)")
    p.add_argument("--ops", nargs="*", help="only ops whose name contains one of these strings")
    p.add_argument("--dtypes", nargs="*", default=["fp32", "bf16", "fp16"])
    p.add_argument("--sizes", nargs="*", help="override the mode's sizes (small medium large)")
    p.add_argument("--threads", nargs="*", type=int, help="thread counts (default: 1 and all)")
    p.add_argument("--no-inductor", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--out", default=RESULTS_DIR, help="results directory")
    p.add_argument("--cpu", action="store_true", help="benchmark the CPU kernels even if torch_npu is present")
    args = p.parse_args(argv)

    mode_name = "full" if args.full else "quick"
    mode = dict(MODES[mode_name])
    if args.sizes:
        mode["sizes"] = tuple(args.sizes)
    if args.no_inductor:
        mode["inductor_sizes"] = ()

    if importlib.util.find_spec("torch_npu") is not None and not args.cpu:
        from . import npu  # only imported on a machine with torch_npu
        return npu.main(args, mode_name, mode, args.out)

    from . import cases as cases_mod  # imports torch_ext

    all_threads = torch.get_num_threads()
    threads = args.threads or sorted({1, all_threads})
    info = machine_info()
    log(f"npu_ext CPU benchmark ({mode_name}): {info['cpu']}, {info['logical_cpus']} logical CPUs, "
        f"torch {info['torch']}, ATen capability {info['aten_cpu_capability']}, "
        f"npu_ext kernels {info['npu_ext_cpu_capability']}, threads {threads}")
    makers = cases_mod.build_cases(mode["sizes"], args.dtypes, args.ops, mode["inductor_sizes"],
                                   mode["training_sizes"])
    if not all(hasattr(__import__("torch_ext"), f) for f in ("gelu", "prelu", "logit")):
        log("note: torch_ext functional API (torch_ext.gelu, ...) not available: fwd+bwd cases skipped")
    records = []
    copy_cache = {}
    t0 = time.time()
    for i, (name, make) in enumerate(makers, 1):
        cases = make()
        for case in cases:
            for th in threads:
                elapsed = time.time() - t0
                log(f"[{i}/{len(makers)} {elapsed:5.0f}s] {case.op} {case.dtype} {case.size} ({case.shape}) "
                    f"threads={th}")
                torch.set_num_threads(th)
                try:
                    rec = run_case(case, th, mode, copy_cache)
                    if rec is not None:
                        records.append(rec)
                finally:
                    torch.set_num_threads(all_threads)
        del cases
    info["elapsed_s"] = round(time.time() - t0, 1)
    info["mode"] = mode_name
    info["command"] = "python -m benchmarks.run " + " ".join(argv if argv is not None else sys.argv[1:])
    paths = report.write_all(records, info, args.out, mode_name)
    print()
    print(report.markdown_table(records, info))
    log(f"\nwrote {', '.join(paths)} in {info['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
