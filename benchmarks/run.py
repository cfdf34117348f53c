"""Benchmark suite: npu_ext CPU kernels against the best PyTorch alternative, side by side in one run.

    python -m benchmarks.run --quick     # every op, dtype and size; inductor and fwd+bwd at the large size
    python -m benchmarks.run --full      # longer timing, inductor at every size

    python -m benchmarks.run --quick --variants   # the suite once per kernel variant the CPU runs
                                                  # (DEFAULT, AVX2, AVX512: ATEN_CPU_CAPABILITY per subprocess,
                                                  # so npu_ext and ATen are forced to the same capability)

For every op, dtype (fp32, bf16, fp16), size (small 64K, medium 1M, large 4M elements) and thread count
(1 and all), the npu_ext call and each PyTorch alternative are timed with torch.utils.benchmark, interleaved
in rounds so that load from other processes hits all of them alike; the median over every timed run is
reported. Effective GB/s = ideal bytes moved / median time, compared with a tensor copy that moves as many
bytes, timed in the same rounds with the same threads ("% copy" = fraction of that copy roofline).

Also: forward + backward through the torch_ext API at 256 and 4096 elements on 1 thread (the per-call cost:
Python, dispatcher, autograd), and one case with a 64 MB output (above glibc's 32 MB mmap threshold, so every
call pays fresh page faults), shown with the floor "allocate + one pass" next to it.

Noise: a result whose rounds disagree by more than 30% (or that beats the copy roofline, which only a
disturbed copy timing can produce) is flagged "disturbed" in the log and the tables: rerun it on a quieter
machine rather than reading its ratio.

Results: benchmarks/results/bench-<mode>.{json,csv}, speedup-<mode>.png and table-<mode>.md (the tables of
docs/performance.md come from `--variants`: table-<mode>-variants.md).

With torch_npu installed (detected without importing it) the suite instead compares the npu_ext ops with
torch_npu's native ops on the NPU (see benchmarks/npu.py; that path cannot run on a CPU-only machine).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time

try:
    import resource  # page faults per call (POSIX)
except ImportError:  # pragma: no cover
    resource = None

import torch
from torch.utils import benchmark

from . import report
from .report import log, machine_info

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

MODES = {
    # rounds x min_run_time per round and candidate (seconds)
    "quick": dict(rounds=3, min_run_time=0.06, sizes=("small", "medium", "large"), inductor_sizes=("large",),
                  training_sizes=("large",)),
    "full": dict(rounds=5, min_run_time=0.2, sizes=("small", "medium", "large"),
                 inductor_sizes=("small", "medium", "large"), training_sizes=("small", "medium", "large")),
}


DISTURBED_SPREAD = 1.3  # max / min of the per-round medians of a candidate beyond which a result is flagged


def _cpu_timer(fn, min_run_time):
    """Seconds of this thread's CPU time per call (time.thread_time: time the thread was descheduled for other
    processes is not counted). Only for 1-thread cases whose work all runs on the calling thread."""
    number = 1
    while True:
        t0 = time.perf_counter()
        c0 = time.thread_time()
        for _ in range(number):
            fn()
        c1 = time.thread_time()
        if time.perf_counter() - t0 >= min_run_time / 4 or number >= 1 << 20:
            break
        number *= 4
    reps = []
    deadline = time.perf_counter() + min_run_time
    reps.append((c1 - c0) / number)
    while time.perf_counter() < deadline:
        c0 = time.thread_time()
        for _ in range(number):
            fn()
        reps.append((time.thread_time() - c0) / number)
    return reps, number


def _minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else 0


def timed(fns, threads, rounds, min_run_time, spreads=None, cpu_time=False, faults=None):
    """Median seconds per call of each callable, timed in interleaved rounds (the order alternates between
    rounds). Failing callables -> None. `spreads`, if given, receives max/min of each one's per-round medians;
    `faults`, the minor page faults per call of each in the timed rounds (the process's, so every thread's:
    fresh pages faulted in, e.g. an output glibc had to map again because the heap was trimmed or the block is
    above the mmap threshold; its calibration calls are counted too, a small overestimate)."""
    ok = {}
    for name, fn in fns.items():
        try:
            fn()  # warm up (and check it runs)
            ok[name] = fn
        except Exception as e:  # a baseline this torch build lacks, say
            log(f"      {name}: skipped ({type(e).__name__}: {str(e).splitlines()[0][:100]})")
    times = {name: [] for name in ok}
    per_round = {name: [] for name in ok}
    flt = {name: [0, 0] for name in ok}  # minor faults, calls
    order = list(ok)
    # One untimed round first: calls that allocate large outputs grow glibc's heap until the high-water mark of
    # this interleaving is reached, and until then a call may fault in fresh pages (a 16 MB output: about 6 ms
    # on the test VM, against 10 ms for gelu fwd+bwd), randomly on either side of a ratio.
    for name in order:
        deadline = time.perf_counter() + min_run_time / 2
        while time.perf_counter() < deadline:
            ok[name]()
    for r in range(rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            f0 = _minor_faults()
            if cpu_time:
                reps, number = _cpu_timer(ok[name], min_run_time)
                per_round[name].append(statistics.median(reps))
            else:
                m = benchmark.Timer(stmt="fn()", globals={"fn": ok[name]}, num_threads=threads).blocked_autorange(
                    min_run_time=min_run_time)
                reps, number = m.times, m.number_per_run
                per_round[name].append(m.median)
            times[name].extend(reps)
            flt[name][0] += _minor_faults() - f0
            flt[name][1] += number * len(reps)
    if spreads is not None:
        spreads.update({n: max(v) / min(v) for n, v in per_round.items() if v and min(v) > 0})
    if faults is not None:
        faults.update({n: f / max(c, 1) for n, (f, c) in flt.items()})
    return {name: (statistics.median(ts) if ts else None) for name, ts in times.items()}


def run_case(case, threads, mode):
    fns = {"npu_ext": case.ext}
    fns.update(case.baselines)
    refs = {f"__ref__{k}": v for k, v in case.references.items()}
    fns.update(refs)
    for name, make in case.compiled.items():
        torch._dynamo.reset()  # inductor bakes the thread count into the generated code
        try:
            fns[name] = make()
        except Exception as e:
            log(f"      {name}: compile failed ({type(e).__name__}: {str(e).splitlines()[0][:100]})")
    # Copy roofline: a tensor copy moving the same bytes (half read, half written), same threads, timed in
    # the same interleaved rounds as the case (so load from other processes hits both alike).
    n_copy = max(1, case.bytes // 8)
    src = torch.ones(n_copy, dtype=torch.float32)
    dst = torch.zeros_like(src)
    copy_name = "__copy__"
    fns[copy_name] = lambda: dst.copy_(src)
    spreads, faults = {}, {}
    cpu_time = case.cpu_time and threads == 1
    med = timed(fns, threads, mode["rounds"] + (2 if cpu_time else 0), mode["min_run_time"], spreads, cpu_time,
                faults)
    copy_gbps = 8 * n_copy / med.pop(copy_name) / 1e9
    ext_s = med.pop("npu_ext", None)
    if ext_s is None:
        return None  # reported by timed()
    ref_ms = {k[len("__ref__"):]: med.pop(k) * 1e3 for k in refs if med.get(k) is not None}
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
        "references_ms": ref_ms,
        "floor": ({"name": case.floor, "ms": ref_ms[case.floor], "ratio": ref_ms[case.floor] / (ext_s * 1e3)}
                  if case.floor in ref_ms else None),
        "round_spread": {k: round(v, 3) for k, v in spreads.items()},
        # Minor page faults per call in the timed rounds, npu_ext and the alternatives (not the references).
        "faults_per_call": {k: round(faults[k], 1) for k in ["npu_ext", *base] if k in faults},
        "timing": "thread CPU time" if cpu_time else "wall time",
    }
    # Disturbed: the rounds of npu_ext, the best alternative or the copy disagree, or the kernel "beats" the
    # copy roofline (only a copy timed while another process held the cores can make that happen).
    watched = ["npu_ext", copy_name] + ([best] if best else [])
    worst = max((spreads.get(k, 1.0) for k in watched), default=1.0)
    rec["disturbed"] = bool(worst > DISTURBED_SPREAD or (case.memory_bound and rec["roofline_frac"] > 1.05))
    others = ", ".join(f"{k} {v * 1e3:.3f} ms ({v / ext_s:.2f}x)" for k, v in base.items())
    refs_txt = "".join(f" | {k} {v:.3f} ms" for k, v in ref_ms.items())
    if rec["floor"]:
        refs_txt += f" (npu_ext at {rec['floor']['ratio']:.2f}x the floor's speed)"
    faults_txt = report.faults_text(rec)
    if faults_txt:
        refs_txt += " | " + faults_txt
    log(f"      npu_ext {ext_s * 1e3:.3f} ms, {gbps:.1f} GB/s = {rec['roofline_frac']:.0%} of copy "
        f"({copy_gbps:.1f} GB/s) | {others}{refs_txt}")
    if rec["disturbed"]:
        log(f"      WARNING: disturbed run ({threads} thread{'s' if threads > 1 else ''}): rounds differ up to "
            f"{worst:.2f}x{' and it beats the copy roofline' if rec['roofline_frac'] > 1.05 else ''}; other "
            f"processes shared the cores. Ratio unreliable: rerun on a quiet machine.")
    return rec


def _flag_stalled_multithread(records):
    """A multi-thread result slower than the 1-thread result of the same case (npu_ext or its best alternative)
    means another process held the other core(s): the threads waited for each other at every barrier. Flag it
    (its ratio compares two stalls, not two kernels)."""
    one = {(r["op"], r["dtype"], r["size"], r["shape"]): r for r in records if r["threads"] == 1}
    for r in records:
        base = one.get((r["op"], r["dtype"], r["size"], r["shape"]))
        if r["threads"] == 1 or base is None:
            continue
        slow_ext = r["npu_ext_ms"] > 1.1 * base["npu_ext_ms"]
        b1 = base["baselines_ms"].get(r["best_baseline"]) if r["best_baseline"] else None
        slow_base = b1 is not None and r["best_baseline_ms"] > 1.1 * b1
        if (slow_ext or slow_base) and not r.get("disturbed"):
            r["disturbed"] = True
            log(f"WARNING: {r['op']} {r['dtype']} {r['size']} threads={r['threads']}: slower than on 1 thread "
                f"({'npu_ext' if slow_ext else r['best_baseline']}); another process held a core. Flagged ~.")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="quick mode (default; < 5 minutes)")
    g.add_argument("--full", action="store_true", help="full mode (longer timing, inductor at every size)")
    p.add_argument("--ops", nargs="*", help="only ops whose name contains one of these strings")
    p.add_argument("--dtypes", nargs="*", default=["fp32", "bf16", "fp16"], choices=["fp32", "bf16", "fp16"])
    p.add_argument("--sizes", nargs="*", choices=["small", "medium", "large"],
                   help="override the mode's sizes (small medium large)")
    p.add_argument("--threads", nargs="*", type=int, help="thread counts (default: 1 and all)")
    p.add_argument("--no-inductor", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--out", default=RESULTS_DIR, help="results directory")
    p.add_argument("--cpu", action="store_true", help="benchmark the CPU kernels even if torch_npu is present")
    p.add_argument("--variants", action="store_true",
                   help="rerun the suite once per kernel variant this CPU runs (ATEN_CPU_CAPABILITY per subprocess)")
    p.add_argument("--no-percall", action="store_true", help="skip the per-call (256/4096 elements) rows")
    p.add_argument("--no-xlarge", action="store_true", help="skip the case with a 64 MB output")
    args = p.parse_args(argv)
    argv = list(argv if argv is not None else sys.argv[1:])

    if args.variants:
        from . import variants
        return variants.main([a for a in argv if a != "--variants"], args.out, "full" if args.full else "quick")

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
                                   mode["training_sizes"],
                                   percall_sizes=() if args.no_percall else cases_mod.PERCALL_SIZES,
                                   xlarge=not args.no_xlarge)
    if not all(hasattr(__import__("torch_ext"), f) for f in ("gelu", "prelu", "logit")):
        log("note: torch_ext functional API (torch_ext.gelu, ...) not available: fwd+bwd cases skipped")
    records = []
    t0 = time.time()
    for i, (name, make) in enumerate(makers, 1):
        cases = make()
        for case in cases:
            for th in [t for t in threads if case.threads is None or t in case.threads]:
                elapsed = time.time() - t0
                log(f"[{i}/{len(makers)} {elapsed:5.0f}s] {case.op} {case.dtype} {case.size} ({case.shape}) "
                    f"threads={th}")
                torch.set_num_threads(th)
                try:
                    rec = run_case(case, th, mode)
                    if rec is not None:
                        records.append(rec)
                finally:
                    torch.set_num_threads(all_threads)
        del cases
    _flag_stalled_multithread(records)
    info["elapsed_s"] = round(time.time() - t0, 1)
    info["mode"] = mode_name
    info["command"] = "python -m benchmarks.run " + " ".join(argv)
    info["variant_tag"] = os.environ.get("NPU_EXT_BENCH_TAG", "")
    paths = report.write_all(records, info, args.out, mode_name + (f"-{info['variant_tag']}" if info["variant_tag"] else ""))
    print()
    print(report.markdown_table(records, info))
    disturbed = [r for r in records if r.get("disturbed")]
    if disturbed:
        log(f"\nWARNING: {len(disturbed)} of {len(records)} results were disturbed by other load (marked ~ in the "
            f"tables); their ratios are unreliable.")
    log(f"\nwrote {', '.join(paths)} in {info['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
