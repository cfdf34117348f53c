"""``python -m benchmarks.run --variants``: the suite once per kernel variant this CPU can run.

Each variant runs in its own subprocess with ATEN_CPU_CAPABILITY set (``default``, ``avx2``, ``avx512``):
ATen's kernels and the npu_ext kernels both follow that variable. Some ATen ops (gelu and its backward in fp32
and bf16) run oneDNN kernels, which ignore it and pick the best ISA of the CPU themselves; ONEDNN_MAX_CPU_ISA is
set to the variant's level as well (SSE41, oneDNN's lowest, for DEFAULT; AVX2; no limit for AVX512). torch.compile
(inductor) follows ATEN_CPU_CAPABILITY for its explicit vector code but compiles everything with -march=native,
so its "scalar" DEFAULT code is auto-vectorized with the host's best instructions (on an AVX-512 host, fp16
conversions by vcvtph2ps); TORCHINDUCTOR_CPP_MARCH is set to the variant's level too (x86-64-v2 for DEFAULT, the
SSE4.2 level, next to oneDNN's SSE4.1; x86-64-v3 for AVX2; native for AVX512). So both sides of every ratio are
forced to the same capability, and the AVX2 ratios can be read on an AVX-512 machine. Only on x86-64: elsewhere
the one variant is the host's own. Each run writes its own results
(bench-<mode>-<VARIANT>.{json,csv}, table-..., speedup-....png); this module then writes
table-<mode>-variants.md, one table per variant, with the machine and the variant named on each.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

from . import report


# Per variant (x86-64 only; AVX512: no cap): oneDNN's own ISA cap, and the -march torch.compile's C++ is built with.
ONEDNN_ISA = {"DEFAULT": "SSE41", "AVX2": "AVX2"}
INDUCTOR_MARCH = {"DEFAULT": "x86-64-v2", "AVX2": "x86-64-v3"}


def variant_env(variant, env, machine=None):
    """The environment of the subprocess that runs `variant` (e.g. "AVX2"): `env` with ATEN_CPU_CAPABILITY and, on
    x86-64, the caps of oneDNN and inductor for that variant (elsewhere the one variant is the host's own)."""
    env = dict(env, ATEN_CPU_CAPABILITY=variant.lower(), NPU_EXT_BENCH_TAG=variant)
    if (machine or platform.machine()).lower() in ("x86_64", "amd64"):
        if variant in ONEDNN_ISA:
            env["ONEDNN_MAX_CPU_ISA"] = ONEDNN_ISA[variant]
        if variant in INDUCTOR_MARCH:
            env["TORCHINDUCTOR_CPP_MARCH"] = INDUCTOR_MARCH[variant]
    return env


def available_variants():
    """The kernel variants this build has and this CPU runs, lowest first (torch_ext._variants)."""
    from torch_ext._variants import cpu_variants

    return [v.upper() for v in reversed(cpu_variants())]


def main(argv, out_dir, mode_name):
    variants = available_variants()
    print(f"kernel variants on this CPU: {', '.join(variants)} (one subprocess each)", flush=True)
    runs = []
    for v in variants:
        env = variant_env(v, os.environ)
        print(f"\n===== variant {v}: ATEN_CPU_CAPABILITY={v.lower()} =====", flush=True)
        rc = subprocess.call([sys.executable, "-m", "benchmarks.run", *argv], env=env)
        path = os.path.join(out_dir, f"bench-{mode_name}-{v}.json")
        if rc != 0 or not os.path.exists(path):
            print(f"variant {v}: run failed (exit {rc})", flush=True)
            continue
        with open(path) as f:
            data = json.load(f)
        info = data["machine"]
        if info.get("npu_ext_cpu_capability") != v or info.get("aten_cpu_capability") != v:
            print(f"WARNING: variant {v} ran npu_ext {info.get('npu_ext_cpu_capability')} / ATen "
                  f"{info.get('aten_cpu_capability')}", flush=True)
        runs.append((v, data))
    if not runs:
        return 1
    path = os.path.join(out_dir, f"table-{mode_name}-variants.md")
    parts = []
    for v, data in runs:
        parts.append(f"#### Variant {v}\n")
        parts.append(report.markdown_table(data["results"], data["machine"], detail=True))
        parts.append("")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")
    print("\n" + report.variant_summary(runs), flush=True)
    print(f"\nwrote {path}", flush=True)
    return 0
