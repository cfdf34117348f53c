"""NPU mode of the suite: npu_ext ops against torch_npu's native ops, on the NPU.

Imported by benchmarks.run only when torch_npu is installed. Two parts:
  * times: each backward op against torch_npu's native counterpart, side by side (large size);
  * launch counts (only inside the fake CANN of `make test-npu`, whose counters it reads): per forward op and
    case, the device kernels one call launches (each aclnn operator plus the copies an operator makes of
    inputs it needs contiguous), the host<->device copies and the synchronisations, forward and backward, with
    the native kernels (csrc/ops/*/npu.cpp) and with the ATen composite (NPU_EXT_NPU_FORWARD=composite), and the peak device
    memory of a large softmax.
It has never run on an NPU. On the fake CANN every time is the host's time for the fake's models, not a device's,
and the report says so. The time comparisons need a SoC whose torch_npu routes the fake models: Ascend950
(`NPU_FAKE_SOC=Ascend950PR_9599`), where torch_npu's gelu_backward, logit_backward, prelu backward and
npu_scaled_masked_softmax_backward call the same aclnn backward operators as npu_ext (so the ratios are about 1);
below it they are TBE kernels (acl_op) that the fake cannot run, and the times are skipped.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import time

import torch
import torch_npu  # noqa: F401  (registers the "npu" device)

import torch_ext  # noqa: F401

from . import report
from .report import log, machine_info

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


class FakeCannCounters:
    """The fake CANN's counters (tests/fake_cann): kernels launched (libopapi.so), copies and synchronisations
    (libascendcl.so). None on a real NPU."""

    def __init__(self):
        self.opapi = ctypes.CDLL("libopapi.so")
        self.runtime = ctypes.CDLL("libascendcl.so")
        if not hasattr(self.runtime, "fake_cann_count"):
            raise OSError("not the fake CANN")
        self.opapi.fake_opapi_calls.argtypes = [ctypes.c_char_p]
        self.runtime.fake_cann_count.restype = ctypes.c_int64
        self.runtime.fake_cann_count.argtypes = [ctypes.c_char_p]

    def reset(self):
        torch.npu.synchronize()
        self.opapi.fake_opapi_reset()
        self.runtime.fake_cann_reset()

    def read(self):
        """Counts since reset(). Copies and synchronisations are made by the calling thread and read first; then
        a synchronisation (not counted) lets the task queue launch what was queued, and the kernels are read."""
        rt = self.runtime.fake_cann_count
        counts = {"h2d": rt(b"memcpy_h2d"), "d2h": rt(b"memcpy_d2h"), "syncs": rt(b"sync_stream") + rt(b"sync_device")}
        torch.npu.synchronize()
        counts["kernels"] = self.opapi.fake_opapi_calls(b"kernels")
        return counts

    @staticmethod
    def get():
        try:
            return FakeCannCounters()
        except (OSError, AttributeError):
            return None


def _count_cases(dt, dev):
    """(name, make_inputs, forward) per case: make_inputs() -> dict of leaf tensors, forward(**inputs) -> y. Each
    family's cases are in its sample-table entry (OpInfo.count_cases, torch_ext/testing/families/)."""
    from torch_ext.testing import samples

    return [case for info in samples.OPS.values() if info.count_cases for case in info.count_cases(dt, dev)]


def launch_counts(counters, dtypes=("fp16", "bf16", "fp32"), dev="npu"):
    """Per forward op, case, dtype and implementation (native, composite): the counts of one forward call and of
    its backward (autograd through the npu_ext backward op). Rows of dicts."""
    rows = []
    for dname in dtypes:
        dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dname]
        for name, make, forward in _count_cases(dt, dev):
            for impl in ("native", "composite"):
                os.environ["NPU_EXT_NPU_FORWARD"] = impl
                try:
                    torch.manual_seed(0)
                    inputs = make()
                    forward(**inputs).sum().backward()  # warm-up: kernel probes, cached masks
                    for t in inputs.values():
                        t.grad = None
                    counters.reset()
                    y = forward(**inputs)
                    fwd = counters.read()
                    grad = torch.ones_like(y)
                    leaves = [t for t in inputs.values() if t.requires_grad]
                    counters.reset()
                    # the gradients themselves, not their accumulation into .grad (where the copy of a grad the
                    # caller still holds, here `grad` for x + bias, would count)
                    torch.autograd.grad(y, leaves, grad)
                    bwd = counters.read()
                finally:
                    os.environ.pop("NPU_EXT_NPU_FORWARD", None)
                rows.append({"op": name, "dtype": dname, "impl": impl, "forward": fwd, "backward": bwd})
    return rows


def peak_memory(dt=torch.bfloat16, shape=(2, 8, 2048, 2048), dev="npu"):
    """Extra peak device memory (bytes beyond the input, the mask and the output) of one scaled_masked_softmax
    forward with a broadcast mask, native and composite, from torch_npu's allocator statistics."""
    import torch_ext as te

    out = {}
    for impl in ("native", "composite"):
        os.environ["NPU_EXT_NPU_FORWARD"] = impl
        try:
            x = torch.randn(shape, dtype=dt).to(dev)
            m = torch.zeros((shape[0], 1) + tuple(shape[2:]), dtype=torch.bool, device=dev)
            te.scaled_masked_softmax(x, m, scale=0.125)  # warm-up
            torch.npu.synchronize()
            torch.npu.empty_cache()
            torch.npu.reset_peak_memory_stats()
            base = torch.npu.memory_allocated()
            y = te.scaled_masked_softmax(x, m, scale=0.125)
            torch.npu.synchronize()
            out[impl] = torch.npu.max_memory_allocated() - base - y.numel() * y.element_size()
            del x, m, y
        finally:
            os.environ.pop("NPU_EXT_NPU_FORWARD", None)
    return out


def counts_table(rows):
    """Markdown: kernels (and copies, syncs where any) per case and dtype, native vs composite."""

    def cell(c):
        extra = ", ".join(f"{c[k]} {k}" for k in ("h2d", "d2h", "syncs") if c[k])
        return f"{c['kernels']}" + (f" (+{extra})" if extra else "")

    by_key = {(r["op"], r["dtype"], r["impl"]): r for r in rows}
    dtypes = sorted({r["dtype"] for r in rows}, key=["fp16", "bf16", "fp32"].index)
    ops = list(dict.fromkeys(r["op"] for r in rows))
    head = "| op, case | " + " | ".join(f"{d} forward: native / composite | {d} backward" for d in dtypes) + " |"
    lines = [head, "|" + "---|" * (1 + 2 * len(dtypes))]
    for op in ops:
        cells = []
        for d in dtypes:
            n, c = by_key[(op, d, "native")], by_key[(op, d, "composite")]
            cells.append(f"{cell(n['forward'])} / {cell(c['forward'])}")
            cells.append(cell(n["backward"]))
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(args, mode_name, mode, out_dir):
    dev = "npu"
    os.makedirs(out_dir, exist_ok=True)  # the counts are written even where no timed record is (report.write_all's)
    counters = FakeCannCounters.get()
    if counters is not None:
        log(f"NPU benchmark on the FAKE CANN (SoC {torch.npu.get_device_name()}): the times below are the host's times "
            "for the fake's models of the aclnn operators, not an NPU's; the launch counts are exact")
    records = []
    soc = torch.npu.get_device_name()
    timed = counters is None or soc.startswith("Ascend950")
    if not timed:
        log(f"times skipped: on {soc} torch_npu's native counterparts are TBE kernels (acl_op) the fake CANN cannot "
            "run; NPU_FAKE_SOC=Ascend950PR_9599 routes them to the fake's aclnn models")
    # the fake's models are host loops: a smaller size keeps the run short (the counts do not depend on it)
    big, sm = ((4096, 1024), (4, 16, 256, 256)) if counters is None else ((256, 1024), (2, 4, 64, 256))
    for dname in args.dtypes if timed else []:
        dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dname]
        # inputs drawn on the host and copied (the fake CANN has no random-number operators)
        x = torch.randn(*big, dtype=dt).to(dev)
        g = torch.randn(*big, dtype=dt).to(dev)
        p = torch.rand(*big, dtype=dt).to(dev)
        xs = torch.randn((16, 64, 64, 64) if counters is None else (2, 64, 8, 64), dtype=dt).to(dev)
        gs = torch.randn(xs.shape, dtype=dt).to(dev)
        w = torch.rand(64, dtype=dt).to(dev)
        sm_g = torch.randn(*sm, dtype=dt).to(dev)
        sm_y = torch.softmax(torch.randn(*sm), -1).to(dt).to(dev)
        mask = (torch.rand(sm[0], 1, sm[2], sm[3]) < 0.2).to(dev)
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
    info["npu"] = torch.npu.get_device_name()
    info["fake_cann"] = counters is not None
    if records:
        report.write_all(records, info, out_dir, f"npu-{mode_name}")
        print(report.markdown_table(records, info))
    if counters is None:
        log("launch counts: only inside the fake CANN (make test-npu), whose counters they read")
        return 0
    rows = launch_counts(counters, dtypes=("fp16", "bf16", "fp32"))
    peak = peak_memory(shape=(2, 8, 512, 512) if mode_name == "quick" else (2, 8, 2048, 2048))
    with open(os.path.join(out_dir, f"npu-{mode_name}-counts.json"), "w") as f:
        json.dump({"counts": rows, "softmax_extra_peak_bytes": peak}, f, indent=1)
    print("\nDevice kernels per call (aclnn operators + copies they make; +h2d/d2h copies and synchronisations), "
          "native kernels (csrc/ops/*/npu.cpp) / ATen composite; backward through autograd:\n")
    print(counts_table(rows))
    print(f"\nscaled_masked_softmax bf16 {'[2, 8, 512, 512]' if mode_name == 'quick' else '[2, 8, 2048, 2048]'}: "
          f"extra peak device memory native {peak['native'] / 2**20:.1f} MiB, "
          f"composite {peak['composite'] / 2**20:.1f} MiB")
    return 0
