"""Writes benchmark results: JSON (everything), CSV (one row per op/dtype/size/threads/implementation),
a markdown table and a PNG chart of the speedups."""

from __future__ import annotations

import csv
import json
import os

SIZE_ORDER = {"small": 0, "medium": 1, "large": 2}


def _sorted(records):
    return sorted(records, key=lambda r: (r["op"], ["fp32", "bf16", "fp16"].index(r["dtype"]),
                                          SIZE_ORDER.get(r["size"], 9), r["threads"]))


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


def markdown_table(records, info, detail=False, sizes=("large",)):
    lines = []
    threads = sorted({r["threads"] for r in records})
    lines.append(f"Machine: {info['cpu']}, {info['logical_cpus']} logical CPUs; torch {info['torch']}; "
                 f"npu_ext kernels {info['npu_ext_cpu_capability']} (ATen {info['aten_cpu_capability']}); "
                 f"threads {', '.join(map(str, threads))}; {info.get('mode', '')} mode, {info['date']}.")
    lines.append("")
    lines.append("Speedup = time of the fastest PyTorch alternative / time of npu_ext (medians, same run). "
                 "GB/s = ideal bytes moved / time; % copy = that bandwidth over a tensor copy moving as many "
                 "bytes with the same threads (the copy roofline).")
    lines.append("")

    def table(rows):
        out = ["| op | dtype | size | threads | npu_ext ms | fastest PyTorch alternative | its ms | speedup "
               "| other alternatives | GB/s | % copy |",
               "|---|---|---|---:|---:|---|---:|---:|---|---:|---:|"]
        for r in _sorted(rows):
            others = "; ".join(f"{k} {_ratio(v)}" for k, v in r["speedup_vs"].items() if k != r["best_baseline"])
            out.append(
                f"| {r['op']} | {r['dtype']} | {r['size']} | {r['threads']} | {r['npu_ext_ms']:.3f} | "
                f"{r['best_baseline'] or '-'} | "
                f"{'-' if r['best_baseline_ms'] is None else format(r['best_baseline_ms'], '.3f')} | "
                f"**{_ratio(r['speedup'])}** | {others or '-'} | {r['gbps']:.1f} | {r['roofline_frac']:.0%} |")
        return out

    main_rows = [r for r in records if r["size"] in sizes]
    lines += table(main_rows)
    if detail:
        rest = [r for r in records if r["size"] not in sizes]
        if rest:
            lines += ["", "Other sizes:", ""]
            lines += table(rest)
    return "\n".join(lines)


def plot(records, info, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no PNG chart (pip install -r requirements-dev.txt)")
        return False
    rows = [r for r in _sorted(records) if r["size"] == "large" and r["speedup"]]
    if not rows:
        return False
    threads = sorted({r["threads"] for r in rows})
    labels = []
    for r in rows:
        lab = f"{r['op']}\n{r['dtype']}"
        if lab not in labels:
            labels.append(lab)
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(labels) * len(threads)), 5.5))
    width = 0.8 / len(threads)
    for k, th in enumerate(threads):
        vals = []
        for lab in labels:
            match = [r["speedup"] for r in rows if f"{r['op']}\n{r['dtype']}" == lab and r["threads"] == th]
            vals.append(match[0] if match else 0)
        xs = [i + (k - (len(threads) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, vals, width, label=f"{th} thread{'s' if th > 1 else ''}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([lab.replace("_backward", "_bw").replace("scaled_masked_softmax", "smsoftmax")
                        for lab in labels], rotation=70, fontsize=7)
    ax.set_ylabel("speedup vs fastest PyTorch alternative (log)")
    ax.set_title(f"npu_ext CPU kernels, large size - {info['cpu']}, torch {info['torch']}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
