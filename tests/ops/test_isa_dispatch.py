"""The CPU kernels are compiled once per ISA (DEFAULT, AVX2, AVX512) and chosen at run time like ATen's:
ATEN_CPU_CAPABILITY selects the variant, every variant meets the accuracy target against a float64 oracle
and is bitwise thread-count independent, and the variants agree with each other within tolerance."""

import os
import platform
import subprocess
import sys

import pytest
import torch

from torch_ext.testing import tolerances

import torch_ext  # noqa: F401
import paths

# Each test starts Python subprocesses (under the aarch64 emulation they need qemu registered with binfmt_misc).
pytestmark = pytest.mark.subprocess

WORKER = paths.worker("isa_worker.py")


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


FLAGS = _cpu_flags()
X86 = platform.machine().lower() in ("x86_64", "amd64")
# The variants this build has (setup.py: DEFAULT/AVX2/AVX512 on x86-64, DEFAULT alone elsewhere, which is NEON
# code on aarch64) that this CPU can run.
SUPPORTED = {
    "default": True,
    "avx2": X86 and {"avx2", "fma", "f16c"} <= FLAGS,
    "avx512": X86 and {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq"} <= FLAGS,
}


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """ATEN_CPU_CAPABILITY value -> outputs saved by a worker process running with it."""
    out = {}
    for cap, ok in SUPPORTED.items():
        if not ok:
            continue
        path = tmp_path_factory.mktemp("isa") / f"{cap}.pt"
        env = dict(os.environ, ATEN_CPU_CAPABILITY=cap, OMP_NUM_THREADS="2")
        proc = subprocess.run([sys.executable, WORKER, str(path)], env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, f"ATEN_CPU_CAPABILITY={cap}:\n{proc.stdout}\n{proc.stderr}"
        out[cap] = torch.load(path)
    return out


# The tests skip before they ask for `variants`: each pytest-xdist worker that needs the fixture runs its
# worker processes again (about a minute each under emulation).
@pytest.mark.parametrize("cap", ["default", "avx2", "avx512"])
def test_env_selects_variant_and_variant_is_accurate(request, cap):
    if not SUPPORTED[cap]:
        pytest.skip(f"this CPU cannot run the {cap} variant")
    variants = request.getfixturevalue("variants")
    # The worker already asserted accuracy and 1-vs-2-thread bitwise equality for every op and dtype.
    assert variants[cap]["capability"] == cap.upper()


def test_variants_agree(request):
    if sum(SUPPORTED.values()) < 2:
        pytest.skip("only one variant runs on this CPU")
    variants = request.getfixturevalue("variants")
    caps = list(variants)
    ref = variants["default"]
    for cap in caps[1:]:
        for key, a in variants[cap].items():
            if key == "capability":
                continue
            b = ref[key]
            T = tolerances.THRESHOLD[a.dtype]
            # Both are within tolerance of the oracle; with each other they may differ by one rounding of
            # the output (an ulp, also of a subnormal) plus the approximation error of the fast exp/erf
            # (relative to the value scale).
            scale = b.double().abs().pow(2).mean().sqrt().item()
            diff = (a.double() - b.double()).abs()
            finite = torch.isfinite(b.double())
            bound = 2 * T * (b.double().abs()[finite] + 1e-3 * scale + torch.finfo(a.dtype).tiny)
            assert (diff[finite] <= bound).all(), f"{cap} {key}"


def test_default_process_uses_best_variant():
    best = "AVX512" if SUPPORTED["avx512"] else "AVX2" if SUPPORTED["avx2"] else "DEFAULT"
    if os.environ.get("ATEN_CPU_CAPABILITY"):
        pytest.skip("ATEN_CPU_CAPABILITY is set for this process")
    assert torch.ops.npu_ext._cpu_capability() == best
    if X86:  # elsewhere ATen may run SVE variants this build does not have; npu_ext runs DEFAULT (NEON)
        assert torch.ops.npu_ext._cpu_capability() == torch.backends.cpu.get_cpu_capability()


def test_forced_variant_is_reported():
    """Under `ATEN_CPU_CAPABILITY=...` (how CI runs the whole suite once per variant) this process runs the
    forced variant, lowered only where this build or CPU lacks it."""
    forced = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
    if forced not in SUPPORTED:
        pytest.skip("no supported ATEN_CPU_CAPABILITY is forced for this process")
    order = list(SUPPORTED)  # default < avx2 < avx512
    expected = max((c for c in order[: order.index(forced) + 1] if SUPPORTED[c]), key=order.index).upper()
    assert torch.ops.npu_ext._cpu_capability() == expected
