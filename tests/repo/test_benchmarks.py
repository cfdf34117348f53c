"""The benchmark's bookkeeping (benchmarks/): what each variant's subprocess is forced to, and what the tables say
about targets and page faults. No timing here: speed is measured by `make bench`, never asserted in tests."""


import pytest

import paths

paths.repository_package("benchmarks")
from benchmarks import report, variants  # noqa: E402

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = pytest.mark.arch_independent


def test_variant_env_caps_onednn_and_inductor_per_x86_variant():
    base = {"PATH": "/bin"}
    default = variants.variant_env("DEFAULT", base, machine="x86_64")
    assert default["ATEN_CPU_CAPABILITY"] == "default"
    assert default["ONEDNN_MAX_CPU_ISA"] == "SSE41"
    # inductor builds its C++ with -march=native unless told: a DEFAULT run on an AVX-512 host would otherwise
    # compare the DEFAULT kernels with AVX-512 code.
    assert default["TORCHINDUCTOR_CPP_MARCH"] == "x86-64-v2"
    avx2 = variants.variant_env("AVX2", base, machine="x86_64")
    assert (avx2["ATEN_CPU_CAPABILITY"], avx2["ONEDNN_MAX_CPU_ISA"], avx2["TORCHINDUCTOR_CPP_MARCH"]) == (
        "avx2", "AVX2", "x86-64-v3")
    avx512 = variants.variant_env("AVX512", base, machine="x86_64")
    assert avx512["ATEN_CPU_CAPABILITY"] == "avx512"
    assert "ONEDNN_MAX_CPU_ISA" not in avx512 and "TORCHINDUCTOR_CPP_MARCH" not in avx512
    assert base == {"PATH": "/bin"}  # the caller's environment is left alone


def test_variant_env_sets_no_x86_caps_elsewhere():
    env = variants.variant_env("DEFAULT", {}, machine="aarch64")  # -march=x86-64-v2 would break inductor there
    assert env == {"ATEN_CPU_CAPABILITY": "default", "NPU_EXT_BENCH_TAG": "DEFAULT"}


def _record(op="gelu fwd+bwd", speedup=1.5, best="F.gelu", faults=None, **kw):
    rec = {"op": op, "dtype": "fp32", "size": "large", "shape": "4096x1024", "numel": 1 << 22, "threads": 1,
           "speedup": speedup, "best_baseline": best, "faults_per_call": faults or {}, "disturbed": False}
    rec.update(kw)
    return rec


def test_page_faults_are_shown_only_for_the_two_sides_of_the_ratio():
    assert report.faults_text(_record(faults={"npu_ext": 0.0, "F.gelu": 63.0})) == ""
    assert report.faults_text(_record(faults={"npu_ext": 4096.0, "F.gelu": 0.0})) == (
        "page faults/call: npu_ext 4096, F.gelu 0")
    assert report.faults_text(_record(faults={"npu_ext": 0.0, "F.gelu": 64.0})) == (
        "page faults/call: npu_ext 0, F.gelu 64")
    # An alternative that is not the fastest one does not mark the ratio.
    slow = _record(best="inductor(composite)", faults={"npu_ext": 1.0, "inductor(composite)": 0.0, "eager": 5000.0})
    assert report.faults_text(slow) == ""
    assert report.faults_text({"op": "x", "best_baseline": None}) == ""  # results from before the count


def test_variant_summary_marks_faults_and_lists_each_variants_target():
    op = "scaled_masked_softmax_backward"
    runs = [
        ("DEFAULT", {"machine": {"cpu": "cpu", "logical_cpus": 2, "torch": "x.y.z"},
                     "results": [_record(op=op, speedup=3.7, best="inductor(composite)")]}),
        ("AVX512", {"machine": {"cpu": "cpu", "logical_cpus": 2, "torch": "x.y.z"},
                    "results": [_record(op=op, speedup=9.8, best="eager composite",
                                        faults={"npu_ext": 0.0, "eager composite": 900.0})]}),
    ]
    rows = [line for line in report.variant_summary(runs).splitlines() if line.startswith(f"| {op} ")]
    # Against inductor the target is 1.3x, against the eager alternatives 5x: both are named.
    assert rows == [f"| {op} | fp32 | large | 1 | 1.3x / 5x | 3.70x ✓ | 9.80x ✓ † |"]
