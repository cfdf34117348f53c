"""Per-call cost as instructions: forward + backward through each torch_ext function against its native PyTorch
equivalent at a tiny size (the suite's per-call rows, fp32, 1 thread), counted by valgrind's callgrind.

Instruction counts do not depend on what else the machine is doing, so they settle the per-call rows on a
shared machine where two timings of the same call can differ by more than the difference being measured. They
are a proxy, not a time: the same instruction count can take different times (cache misses, IPC). Each (case,
side) runs in two processes under callgrind, one making `--calls` calls after the warm-up and one making none;
the difference divided by `--calls` is the cost of one call, without the interpreter start and torch's import.
What is left is a small difference between the two processes' start-up (about 1e3 instructions per call at
the default 10000 calls; rerun to see it).

    .venv/bin/python -m benchmarks.percall_instructions [--size 256] [--calls 10000] [--ops logit ...]

Needs valgrind (Debian's package); about 5 minutes per case on 2 cores at 10000 calls (26 minutes for all five).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP = 30


def _child(case_name, side, size, calls):
    """Runs inside callgrind: builds the case, warms it up, then makes `calls` calls."""
    import torch

    from benchmarks import cases

    torch.set_num_threads(1)
    case = {c.op: c for c in cases.percall_cases(size)}[case_name]
    fn = case.ext if side == "ext" else next(iter(case.baselines.values()))
    for _ in range(WARMUP + calls):
        fn()


def _count(case_name, side, size, calls):
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
           "benchmarks.percall_instructions", "--child", case_name, side, size, str(calls)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    m = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"callgrind run failed for {case_name} {side}:\n{out.stderr[-2000:]}")
    return int(m.group(1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="256", help="a per-call size of the suite (256 or 4096 elements)")
    p.add_argument("--calls", type=int, default=10000)
    p.add_argument("--ops", nargs="*", help="only cases whose name contains one of these strings")
    p.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        name, side, size, calls = args.child
        _child(name, side, size, int(calls))
        return 0
    if shutil.which("valgrind") is None:
        print("percall_instructions: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2

    from benchmarks import cases

    names = [c.op for c in cases.percall_cases(args.size)]
    names = [n for n in names if not args.ops or any(o in n for o in args.ops)]
    jobs = [(n, side, c) for n in names for side in ("ext", "native") for c in (0, args.calls)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(jobs, pool.map(lambda j: _count(j[0], j[1], args.size, j[2]), jobs)))
    print(f"forward + backward per call, {args.size} elements, fp32, 1 thread: instructions per call "
          f"(callgrind, {args.calls} calls)\n")
    print("| case | torch_ext | native | native / torch_ext |")
    print("|---|---:|---:|---:|")
    for n in names:
        per = {side: (counts[(n, side, args.calls)] - counts[(n, side, 0)]) / args.calls for side in ("ext", "native")}
        print(f"| {n} | {per['ext'] / 1e3:.1f}k | {per['native'] / 1e3:.1f}k | {per['native'] / per['ext']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
