"""What a benchmark run reports: its log lines, the machine it ran on, and its results: JSON (everything), CSV (one
row per op/dtype/size/threads/implementation), a markdown table and a PNG chart of the speedups."""

from __future__ import annotations

import csv
import datetime
import json
import os
import platform


def log(msg):
    print(msg, flush=True)


def machine_info():
    import torch

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
        # What the PyTorch alternatives that choose their own instructions were allowed (benchmarks/variants.py).
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
        "inductor_march": os.environ.get("TORCHINDUCTOR_CPP_MARCH", "native"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
    }


SIZE_ORDER = {"256": -2, "4096": -1, "small": 0, "medium": 1, "large": 2, "xlarge": 3}
PERCALL_SIZES = ("256", "4096")
MAIN_SIZES = ("large",)


def target(rec):
    """The speedup target of a result (issue 11), against the alternative its speedup is measured against."""
    op, dtype = rec["op"], rec["dtype"]
    if op.startswith("gelu_backward_v2[erf"):
        return 1.5
    if op.startswith("gelu_backward_v2[tanh"):
        return 2.0
    if op == "logit_grad":
        return 1.0 if dtype == "fp32" else 1.5
    if op == "prelu_backward":
        return 5.0
    if op == "grouped_bias_add_grad":
        return 1.2  # issue 21: >= 1.2x the best eager way, and >= 0.8x the speed of one read (FLOOR_TARGET)
    if op == "scaled_masked_softmax_backward":
        return 1.3 if str(rec.get("best_baseline", "")).startswith("inductor") else 5.0
    if op == "gelu fwd+bwd":
        return 1.2  # issue 21: gelu forward + backward >= 1.2x F.gelu in every dtype and variant
    if "fwd+bwd" in op:
        return 1.0
    return None


FLOOR_TARGET = 0.8  # issue 21: a kernel with a floor runs at >= 0.8x the floor's speed


def floor_cell(rec):
    """"0.93x ✓": the floor's time over npu_ext's (1.0 = as fast as the floor), or "-"."""
    f = rec.get("floor")
    if not f:
        return "-"
    return f"{'~' if rec.get('disturbed') else ''}{f['ratio']:.2f}x" + (" ✓" if f["ratio"] >= FLOOR_TARGET else " ✗")


def _size_label(rec):
    if rec["size"] == "xlarge":  # several shapes share the label: show the shape
        return f"xlarge {rec['shape']}"
    return f"{rec['size']} el." if rec["size"] in PERCALL_SIZES else rec["size"]


def _sorted(records):
    return sorted(records, key=lambda r: (r["op"], SIZE_ORDER.get(r["size"], 9),
                                          ["fp32", "bf16", "fp16"].index(r["dtype"]), r["numel"], r["shape"],
                                          r["threads"]))


def write_all(records, info, out_dir, mode):
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    p = os.path.join(out_dir, f"bench-{mode}.json")
    with open(p, "w") as f:
        json.dump({"machine": info, "results": _sorted(records)}, f, indent=1)
    paths.append(p)

    p = os.path.join(out_dir, f"bench-{mode}.csv")
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "dtype", "size", "shape", "threads", "implementation", "median_ms", "gbps",
                    "copy_gbps", "roofline_frac", "npu_ext_speedup"])
        for r in _sorted(records):
            w.writerow([r["op"], r["dtype"], r["size"], r["shape"], r["threads"], "npu_ext",
                        f"{r['npu_ext_ms']:.4f}", f"{r['gbps']:.2f}", f"{r['copy_gbps']:.2f}",
                        f"{r['roofline_frac']:.3f}", ""])
            for name, ms in r["baselines_ms"].items():
                w.writerow([r["op"], r["dtype"], r["size"], r["shape"], r["threads"], name, f"{ms:.4f}",
                            f"{r['baseline_gbps'][name]:.2f}", f"{r['copy_gbps']:.2f}",
                            f"{r['baseline_gbps'][name] / r['copy_gbps']:.3f}", f"{r['speedup_vs'][name]:.3f}"])
    paths.append(p)

    p = os.path.join(out_dir, f"table-{mode}.md")
    with open(p, "w") as f:
        f.write(markdown_table(records, info, detail=True) + "\n")
    paths.append(p)

    png = os.path.join(out_dir, f"speedup-{mode}.png")
    if plot(records, info, png):
        paths.append(png)
    return paths


def _ratio(x):
    return "-" if x is None else f"{x:.2f}x"


def _caps(info):
    """The ISA caps the variant run put on the PyTorch alternatives that pick their own (benchmarks/variants.py)."""
    caps = []
    if info.get("onednn_max_cpu_isa"):
        caps.append(f"oneDNN {info['onednn_max_cpu_isa']}")
    if info.get("inductor_march", "native") != "native":
        caps.append(f"inductor -march={info['inductor_march']}")
    return "; " + ", ".join(caps) if caps else ""


PAGE_FAULTS_SHOWN = 64  # page faults per call (256 KB of 4 KB pages) from which a result shows them


def faults_text(rec):
    """"page faults/call: npu_ext 4096, F.gelu 0, ..." where npu_ext or the fastest alternative (the two sides of
    the speedup) faulted in fresh pages in its timed calls, else ""."""
    fpc = rec.get("faults_per_call") or {}
    if not any(fpc.get(k, 0) >= PAGE_FAULTS_SHOWN for k in ("npu_ext", rec.get("best_baseline"))):
        return ""
    return "page faults/call: " + ", ".join(f"{k} {v:.0f}" for k, v in fpc.items())


def markdown_table(records, info, detail=False, sizes=MAIN_SIZES):
    lines = []
    threads = sorted({r["threads"] for r in records})
    variant = info.get("variant_tag") or info["npu_ext_cpu_capability"]
    lines.append(f"Machine: {info['cpu']}, {info['logical_cpus']} logical CPUs; torch {info['torch']}; "
                 f"variant **{variant}** (npu_ext kernels {info['npu_ext_cpu_capability']}, ATen "
                 f"{info['aten_cpu_capability']}{_caps(info)}); threads {', '.join(map(str, threads))}; "
                 f"{info.get('mode', '')} mode, {info['date']}.")
    lines.append("")
    lines.append("Speedup = time of the fastest PyTorch alternative / time of npu_ext (medians of interleaved "
                 "rounds, same run). GB/s = ideal bytes moved / time; % copy = that bandwidth over a tensor copy "
                 "moving as many bytes with the same threads, timed in the same rounds. vs floor = time of the "
                 "op's floor (grouped_bias_add_grad: grad_y.sum(), one read of the input) / time of npu_ext "
                 f"(target {FLOOR_TARGET:g}x). ~ = disturbed by other load (rounds differ by > 30%): unreliable. "
                 f"page faults/call: shown where npu_ext or the fastest alternative faulted in at least {PAGE_FAULTS_SHOWN} "
                 "fresh 4 KB pages per call in its timed calls (an output mapped again on every call; counted for the whole process).")
    lines.append("")

    def table(rows):
        out = ["| op | dtype | size | threads | npu_ext ms | fastest PyTorch alternative | its ms | speedup "
               "| target | vs floor | other alternatives | GB/s | % copy |",
               "|---|---|---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|"]
        for r in _sorted(rows):
            others = "; ".join(f"{k} {_ratio(v)}" for k, v in r["speedup_vs"].items() if k != r["best_baseline"])
            refs = "; ".join(f"{k} {v:.3f} ms" for k, v in r.get("references_ms", {}).items())
            if refs:
                others = f"{others}; {refs}" if others else refs
            faults = faults_text(r)
            if faults:
                others = f"{others}; {faults}" if others else faults
            t = target(r)
            mark = "" if t is None or r["speedup"] is None else (" ✓" if r["speedup"] >= t else " ✗")
            dist = "~" if r.get("disturbed") else ""
            out.append(
                f"| {r['op']} | {r['dtype']} | {_size_label(r)} | {r['threads']} | {r['npu_ext_ms']:.3f} | "
                f"{r['best_baseline'] or '-'} | "
                f"{'-' if r['best_baseline_ms'] is None else format(r['best_baseline_ms'], '.3f')} | "
                f"**{dist}{_ratio(r['speedup'])}**{mark} | {'-' if t is None else format(t, 'g') + 'x'} | "
                f"{floor_cell(r)} | {others or '-'} | {r['gbps']:.1f} | {dist}{r['roofline_frac']:.0%} |")
        return out

    main_rows = [r for r in records if r["size"] in sizes]
    lines += table(main_rows)
    percall = [r for r in records if r["size"] in PERCALL_SIZES]
    if percall:
        lines += ["", "Per-call cost: forward + backward through torch_ext at 256 and 4096 elements, 1 thread "
                  "(fixed costs: Python, dispatcher, autograd), timed as the thread's CPU time (robust to other "
                  "processes; both sides alike):", ""]
        lines += table(percall)
    big = [r for r in records if r["size"] == "xlarge"]
    if big:
        lines += ["", "Beyond the caches: scaled_masked_softmax_backward with an output above 32 MB (fresh mmap'd "
                  "pages on every call, for npu_ext and PyTorch alike; compare with the floor \"empty+copy\" = "
                  "allocate the output + one pass), and grouped_bias_add_grad on a 128 MB fp32 input against one "
                  "read of it:", ""]
        lines += table(big)
    if detail:
        rest = [r for r in records if r["size"] not in sizes and r["size"] not in PERCALL_SIZES
                and r["size"] != "xlarge"]
        if rest:
            lines += ["", "Other sizes:", ""]
            lines += table(rest)
    return "\n".join(lines)


def variant_summary(runs):
    """A compact table: the speedup of every large-size and per-call result, one column per variant."""
    keys = []
    by = {}
    for v, data in runs:
        for r in _sorted(data["results"]):
            if r["size"] not in MAIN_SIZES + PERCALL_SIZES + ("xlarge",):
                continue
            k = (r["op"], r["dtype"], _size_label(r), r["threads"])
            if k not in by:
                keys.append(k)
                by[k] = {}
            by[k][v] = r
    names = [v for v, _ in runs]
    info = runs[0][1]["machine"]
    out = [f"Speedup vs the fastest PyTorch alternative per kernel variant (ATen forced to the same capability) "
           f"- {info['cpu']}, {info['logical_cpus']} logical CPUs, torch {info['torch']}. ~ = disturbed. † = page "
           f"faults in the timed calls of npu_ext or the fastest alternative (see the variant's table).", "",
           "| op | dtype | size | threads | target | " + " | ".join(names) + " |",
           "|---|---|---|---:|---:|" + "---:|" * len(names)]
    for k in keys:
        cells = []
        targets = []  # per variant: scaled_masked_softmax_backward's depends on which alternative was fastest
        for v in names:
            r = by[k].get(v)
            if r is None or r["speedup"] is None:
                cells.append("-")
                continue
            t = target(r)
            if t is not None and t not in targets:
                targets.append(t)
            ok = "" if t is None else (" ✓" if r["speedup"] >= t else " ✗")
            floor = f" (floor {floor_cell(r)})" if r.get("floor") else ""
            pf = " †" if faults_text(r) else ""
            cells.append(f"{'~' if r.get('disturbed') else ''}{r['speedup']:.2f}x{ok}{floor}{pf}")
        tcell = " / ".join(format(t, "g") + "x" for t in targets) or "-"
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {tcell} | "
                   + " | ".join(cells) + " |")
    return "\n".join(out)


def _short(op):
    return (op.replace("scaled_masked_softmax", "sm_softmax").replace("grouped_bias_add", "grouped_bias")
            .replace("_backward", "_bw"))


def plot(records, info, path):
    """One panel per op (large size; bars: dtype x threads, the target as a black dash over each bar) and a
    panel of the per-call rows (fwd+bwd at 256 and 4096 elements, 1 thread)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no PNG chart (pip install -r requirements-dev.txt)")
        return False
    rows = [r for r in _sorted(records) if r["speedup"]]
    large = [r for r in rows if r["size"] in MAIN_SIZES]
    percall = [r for r in rows if r["size"] in PERCALL_SIZES]
    ops = []
    for r in large:
        if r["op"] not in ops:
            ops.append(r["op"])
    ops = [o for o in ops if "fwd+bwd" not in o] + [o for o in ops if "fwd+bwd" in o]
    panels = [(op, [r for r in large if r["op"] == op]) for op in ops]
    if percall:
        panels.append(("fwd+bwd per call (1 thread)", percall))
    if not panels:
        return False
    threads = sorted({r["threads"] for r in large}) or [1]
    colors = {"fp32": "#4C72B0", "bf16": "#DD8452", "fp16": "#55A868"}
    ncols = 3 if len(panels) > 4 else len(panels)
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.1 * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (title, rs) in zip(axes.flat, panels):
        if title.startswith("fwd+bwd per call"):
            groups = []
            for r in rs:
                g = r["op"].replace(" fwd+bwd", "")
                if g not in groups:
                    groups.append(g)
            labels = [_short(g).replace("_", "_\n", 1) if len(g) > 10 else g for g in groups]
            sizes = [s_ for s_ in PERCALL_SIZES if any(r["size"] == s_ for r in rs)]
            bars = [[next((r for r in rs if r["op"].replace(" fwd+bwd", "") == g and r["size"] == s_), None)
                     for s_ in sizes] for g in groups]
            series = [f"{s_} el." for s_ in sizes]
        else:
            dtypes = [d for d in ("fp32", "bf16", "fp16") if any(r["dtype"] == d for r in rs)]
            labels = dtypes
            bars = [[next((r for r in rs if r["dtype"] == d and r["threads"] == th), None) for th in threads]
                    for d in dtypes]
            series = [f"{th} thread{'s' if th > 1 else ''}" for th in threads]
        n = len(series)
        width = 0.8 / n
        ymax = 1.2
        for i, group in enumerate(bars):
            for k, r in enumerate(group):
                if r is None:
                    continue
                x = i + (k - (n - 1) / 2) * width
                alpha = 1.0 if k == n - 1 else 0.55
                ax.bar(x, r["speedup"], width * 0.92, color=colors.get(r["dtype"], "#888888"),
                       alpha=alpha, hatch="//" if r.get("disturbed") else None, edgecolor="white")
                ax.text(x, r["speedup"], f"{r['speedup']:.2f}", ha="center", va="bottom", fontsize=6.5)
                t = target(r)
                if t:
                    ax.plot([x - width / 2, x + width / 2], [t, t], color="black", linewidth=1.6)
                    ymax = max(ymax, t * 1.15)
                ymax = max(ymax, r["speedup"] * 1.18)
        ax.axhline(1.0, color="grey", linewidth=0.6, linestyle=":")
        ax.set_ylim(0, ymax)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(_short(title), fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        if n > 1:
            ax.text(0.01, 0.98, "bars: " + " | ".join(series) + " (darker)", transform=ax.transAxes,
                    fontsize=6, va="top")
    variant = info.get("variant_tag") or info["npu_ext_cpu_capability"]
    fig.suptitle(f"npu_ext speedup vs fastest PyTorch way (large size; black dash = target; hatched = disturbed)"
                 f"\n{info['cpu']}, variant {variant}, torch {info['torch']}", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
