"""NPU mode of the suite: npu_ext ops against torch_npu's native ops, on the NPU.

Imported by benchmarks.run only when torch_npu is installed. It has NOT been run: it was written on a
CPU-only machine and is kept small on purpose (large size, the native counterparts torch_npu offers).
"""

from __future__ import annotations

import statistics
import time

import torch
import torch_npu  # noqa: F401  (registers the "npu" device)

import torch_ext  # noqa: F401

from . import report
from .run import log, machine_info

ext = torch.ops.npu_ext
aten = torch.ops.aten


def _time(fn, rounds, min_run_time):
    fn()
    torch.npu.synchronize()
    times = []
    for _ in range(rounds):
        t_end = time.perf_counter() + min_run_time
        while time.perf_counter() < t_end:
            t0 = time.perf_counter()
            fn()
            torch.npu.synchronize()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(args, mode_name, mode, out_dir):
    dev = "npu"
    records = []
    for dname in args.dtypes:
        dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dname]
        x = torch.randn(4096, 1024, dtype=dt, device=dev)
        g = torch.randn_like(x)
        p = torch.rand_like(x)
        xs = torch.randn(16, 64, 64, 64, dtype=dt, device=dev)
        gs = torch.randn_like(xs)
        w = torch.rand(64, dtype=dt, device=dev)
        sm_g = torch.randn(4, 16, 256, 256, dtype=dt, device=dev)
        sm_y = torch.softmax(torch.randn_like(sm_g, dtype=torch.float32), -1).to(dt)
        mask = torch.rand(4, 1, 256, 256, device=dev) < 0.2
        cases = {
            "gelu_backward_v2[erf]": (lambda: ext.gelu_backward_v2(g, x, "none"),
                                      lambda: aten.gelu_backward(g, x, approximate="none"), 3 * x.nbytes),
            "gelu_backward_v2[tanh]": (lambda: ext.gelu_backward_v2(g, x, "tanh"),
                                       lambda: aten.gelu_backward(g, x, approximate="tanh"), 3 * x.nbytes),
            "logit_grad": (lambda: ext.logit_grad(p, g, 1e-6), lambda: aten.logit_backward(g, p, 1e-6),
                           3 * x.nbytes),
            "prelu_backward": (lambda: ext.prelu_backward(gs, xs, w),
                               lambda: aten._prelu_kernel_backward(gs, xs, w.view(1, 64, 1, 1)), 3 * xs.nbytes),
            "scaled_masked_softmax_backward": (
                lambda: ext.scaled_masked_softmax_backward(sm_g, sm_y, mask, 0.125, False),
                lambda: torch_npu.npu_scaled_masked_softmax_backward(sm_g, sm_y, mask, 0.125, False),
                3 * sm_g.nbytes),
        }
        for op, (fe, fb, nbytes) in cases.items():
            te = _time(fe, mode["rounds"], mode["min_run_time"])
            tb = _time(fb, mode["rounds"], mode["min_run_time"])
            log(f"{op} {dname}: npu_ext {te * 1e3:.3f} ms, torch_npu {tb * 1e3:.3f} ms ({tb / te:.2f}x)")
            records.append({
                "op": op, "dtype": dname, "size": "large", "shape": "", "numel": 0, "threads": 0,
                "bytes": nbytes, "memory_bound": True, "npu_ext_ms": te * 1e3,
                "baselines_ms": {"torch_npu": tb * 1e3}, "speedup_vs": {"torch_npu": tb / te},
                "best_baseline": "torch_npu", "best_baseline_ms": tb * 1e3, "speedup": tb / te,
                "gbps": nbytes / te / 1e9, "baseline_gbps": {"torch_npu": nbytes / tb / 1e9},
                "copy_gbps": float("nan"), "roofline_frac": float("nan")})
    info = machine_info()
    info["mode"] = f"npu-{mode_name}"
    report.write_all(records, info, out_dir, f"npu-{mode_name}")
    print(report.markdown_table(records, info))
    return 0
