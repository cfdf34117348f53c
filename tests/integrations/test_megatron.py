"""torch_ext.megatron against the real megatron-core (CPU; make's .venv has the release table's default release,
`make test-megatron MCORE=...` runs this file on another release): the patched fused softmax, bias-GELU and MoE expert bias against Megatron's
own paths (values and gradients), the npu_ext ops seen to run, patch()/unpatch() restoring every original object,
status() per target (MindSpeed's replacements in both orders: test_megatron_mindspeed_order.py), the
import errors, and a small GPTModel trained with and without the patch.

RELEASES is the table of what each megatron-core release has (read from its sources): test_release_table checks
the installed release against it, the other tests skip only what it marks absent, and status() must say exactly
what it says.

Megatron's originals are called under torch.compiler.set_stance("force_eager"): its jit_fuser is torch.compile,
and compiling them (minutes under the aarch64 emulation) would test inductor, not Megatron's formulas. The two
CUDA-only helpers GPTModel needs on the CPU are shimmed by examples/megatron_gpt.py (cpu_megatron()), test code,
never the package (on an NPU, MindSpeed and torch_npu provide them).
"""

import functools
import importlib.metadata
import importlib.util
import inspect
import os
import subprocess
import sys
import warnings

import expecttest
import pytest
import torch


import torch_ext.megatron as tm
from torch_ext import _releases
from torch.utils._python_dispatch import TorchDispatchMode
from torch_ext.testing.tolerances import assert_accurate

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = [pytest.mark.megatron, pytest.mark.release, pytest.mark.arch_independent]

from megatron_common import (  # noqa: E402,F401  (imports megatron-core; patched: the fixture)
    ALL, APPLY_BIAS, B, NP, SQ, SK, AttnMaskType, BIAS_GELU_IMPL, FORWARD_FUSED_SOFTMAX, FusedScaleMaskSoftmax, GROUPED_MLP,
    IS_KERNEL_AVAILABLE, MASKS, MCORE, MCORE_KEY, ORIGINALS, PRECISION, RELEASE, RELEASES, SOFTMAX_TARGETS, TARGETS,
    TOL, absent, attention_mask_func, eager, feature, fused_bias_gelu, fused_softmax, load_example,
    megatron_experts, megatron_mlp, original_state, package_info, patched, shared_experts, softmax_module,
    always_unpatched, expected_status, OURS, OUR_FUNCTIONS,
)
from helpers import OpLog, own_stdout  # noqa: E402
import paths  # noqa: E402

f64 = torch.float64


@pytest.mark.parametrize("softmax_in_fp32,scale", PRECISION, ids=[f"fp32={a}-scale={b}" for a, b in PRECISION])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mask_name", list(MASKS))
def test_fused_softmax_matches_megatron_torch_path(patched, mask_name, dtype, softmax_in_fp32, scale):
    mask_type, mask, ref_mask = MASKS[mask_name]
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(B, NP, SQ, SK, generator=g) * 3).to(dtype)
    dy = torch.randn(B, NP, SQ, SK, generator=g).to(dtype)

    fused = softmax_module(dtype, mask_type, True, softmax_in_fp32, scale)
    reference = softmax_module(dtype, mask_type, False, softmax_in_fp32, scale)
    assert fused.is_kernel_available(mask, B, NP, SQ, SK)
    # Attention scores are never leaves in Megatron (its torch path masks them in place): clone() them.
    xf, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    log = OpLog()
    with log:
        y = fused(xf.clone(), mask)
        y.backward(dy)
    assert log.npu_ext() == {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default"}
    yr = reference(xr.clone(), ref_mask)
    yr.backward(dy)
    assert y.dtype == yr.dtype == dtype

    full = (ref_mask.all(-1, keepdim=True) if ref_mask is not None else torch.zeros(1, 1, SQ, 1, dtype=torch.bool))
    full = full.expand(B, NP, SQ, SK)
    # Fully masked rows: 0 (Megatron's fused kernel), where Megatron's torch path is uniform; zero gradient.
    assert torch.equal(y[full], torch.zeros_like(y[full]))
    assert torch.equal(yr[full].float(), torch.full_like(yr[full].float(), 1 / SK).to(dtype).float())
    assert torch.equal(xf.grad[full], torch.zeros_like(xf.grad[full]))
    torch.testing.assert_close(y[~full], yr[~full], **TOL[dtype])
    torch.testing.assert_close(xf.grad, xr.grad, **TOL[dtype])
    if mask_name in ("padding", "padding_per_head", "arbitrary"):
        assert full.any()  # the case can tell the two conventions apart


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_fused_softmax_accuracy(patched, dtype):
    """Against float64, by the contract's metric (the reference path above rounds in its own way)."""
    mask_type, mask, _ = MASKS["padding"]
    x = (torch.randn(B, NP, SQ, SK) * 3).to(dtype)
    y = softmax_module(dtype, mask_type, True, True, 0.5)(x, mask)
    ref = torch.softmax((x.to(f64) * 0.5).masked_fill(mask, -10000.0), -1).masked_fill(mask.all(-1, keepdim=True), 0)
    assert_accurate(y, ref, dtype, "patched FusedScaleMaskSoftmax")


@pytest.mark.parametrize("case", ["fp32_input", "fp32_flags", pytest.param("window_size", marks=feature("window_size")),
                                  pytest.param("softmax_offset", marks=feature("softmax_offset")), "long_keys",
                                  "causal_sq_ne_sk", "fusion_off"])
def test_other_cases_stay_on_megatron_torch_path(patched, case):
    dtype, mask_type, b, np_, sq, sk = torch.bfloat16, AttnMaskType.padding, 1, 2, 4, 8
    offset = None
    if case == "long_keys":
        sk = 4100
    if case == "causal_sq_ne_sk":
        mask_type, sq = AttnMaskType.causal, 1  # one query against a KV cache: Megatron uses no mask there
    module = softmax_module(dtype, mask_type, case != "fusion_off", True, None,
                            window_size=(3, 0) if case == "window_size" else None)
    if case == "fp32_flags":
        module = FusedScaleMaskSoftmax(False, False, mask_type, True, attention_mask_func, True, None)
    x = torch.randn(b, np_, sq, sk, dtype=torch.float32 if case in ("fp32_input", "fp32_flags") else dtype)
    mask = None if case in ("causal_sq_ne_sk", "window_size") else torch.rand(b, 1, sq, sk) < 0.3
    if case == "softmax_offset":
        offset = torch.zeros(np_)
    if case == "window_size":  # Megatron's torch path builds the window mask on cuda: the routing only
        assert not module.is_kernel_available(mask, b, np_, sq, sk)
        assert vars(FusedScaleMaskSoftmax)["is_kernel_available"] is tm._softmax_gate
        return
    log = OpLog()
    with log:
        y = module(x, mask, offset) if offset is not None else module(x, mask)
    assert not log.npu_ext(), log.npu_ext()
    reference = softmax_module(x.dtype if x.dtype != torch.float32 else dtype, mask_type, False, True, None)
    if case == "fp32_flags":
        reference = FusedScaleMaskSoftmax(False, False, mask_type, False, attention_mask_func, True, None)
    expected = reference(x, mask, offset) if offset is not None else reference(x, mask)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)


def test_unpatched_fused_path_needs_cuda_kernels():
    """What a user hits without the patch (and gets back after unpatch())."""
    module = softmax_module(torch.bfloat16, AttnMaskType.causal, True, True, None)
    with pytest.raises(ModuleNotFoundError, match="scaled_masked_softmax_cuda"):
        module(torch.randn(2, 4, 32, 32, dtype=torch.bfloat16), None)
    tm.patch()
    assert module(torch.randn(2, 4, 32, 32, dtype=torch.bfloat16), None).shape == (2, 4, 32, 32)
    tm.unpatch()
    with pytest.raises(ModuleNotFoundError, match="scaled_masked_softmax_cuda"):
        module(torch.randn(2, 4, 32, 32, dtype=torch.bfloat16), None)


# ----------------------------------------------------------------------------------------------------------
# bias_gelu_impl
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_bias_gelu_matches_megatron(patched, dtype):
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(6, 5, 16, generator=g) * 2).to(dtype)
    b = torch.randn(16, generator=g).to(dtype)
    dy = torch.randn(6, 5, 16, generator=g).to(dtype)
    # every module that imported it by name calls ours now
    assert megatron_mlp.bias_gelu_impl is shared_experts.bias_gelu_impl is fused_bias_gelu.bias_gelu_impl \
        is tm._bias_gelu
    ours = [t.clone().requires_grad_() for t in (x, b)]
    log = OpLog()
    with log:
        megatron_mlp.bias_gelu_impl(*ours).backward(dy)
    assert log.npu_ext() == {"npu_ext.gelu.default", "npu_ext.gelu_backward_v2.default"}
    theirs = [t.clone().requires_grad_() for t in (x, b)]
    y_theirs = eager(ORIGINALS["bias_gelu_impl"], *theirs, grad=dy)
    ref = [t.to(f64).requires_grad_() for t in (x, b)]  # Megatron's formulas in float64
    y_ref = eager(ORIGINALS["bias_gelu_impl"], *ref, grad=dy.to(f64))
    y_ours = tm._bias_gelu(x, b)
    # Megatron's original in fp16/bf16 rounds every intermediate; ours computes in fp32 and rounds once. So: ours
    # is accurate (the contract's metric against float64), and nowhere farther from float64 than Megatron's own result,
    # beyond a few ulps.
    for what, a, c, r in [("y", y_ours, y_theirs, y_ref), ("d input", ours[0].grad, theirs[0].grad, ref[0].grad),
                          ("d bias", ours[1].grad, theirs[1].grad, ref[1].grad)]:
        assert a.dtype == dtype
        assert_accurate(a, r.detach(), dtype, f"bias_gelu {what}")
        tol = TOL[dtype]["atol"] + TOL[dtype]["rtol"] * r.detach().abs()
        assert ((a.double() - r).abs() <= (c.double() - r).abs() + tol).all(), what
        torch.testing.assert_close(a.double(), c.double(), rtol=0.05, atol=0.05 if dtype != torch.float32 else 1e-4)


def test_bias_gelu_backward_is_tanh_gelu_backward_v2(patched):
    seen = []

    class Args(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if str(func) == "npu_ext.gelu_backward_v2.default":
                seen.append(args[2] if len(args) > 2 else (kwargs or {}).get("approximate", "none"))
            return func(*args, **(kwargs or {}))

    x = torch.randn(4, 8, requires_grad=True)
    with Args():
        fused_bias_gelu.bias_gelu_impl(x, torch.randn(8)).sum().backward()
    assert seen == ["tanh"]


# ----------------------------------------------------------------------------------------------------------
# TEGroupedMLP._apply_bias
@absent(APPLY_BIAS)
@pytest.mark.parametrize("bias_kind", ["list", "tensor"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_expert_bias_matches_megatron(patched, dtype, bias_kind):
    g = torch.Generator().manual_seed(4)
    tokens_per_expert = [5, 0, 9, 2, 0, 16]
    n, h = sum(tokens_per_expert), 12
    x = torch.randn(n, h, generator=g).to(dtype)
    biases = [torch.randn(h, generator=g).to(dtype) for _ in tokens_per_expert]
    probs = torch.rand(n, 1, generator=g)  # router probabilities: fp32, as Megatron's router gives them
    dy = torch.randn(n, h, generator=g).to(dtype)

    def run(apply_bias):
        xs = x.clone().requires_grad_()
        bs = [b.clone().requires_grad_() for b in biases]
        ps = probs.clone().requires_grad_()
        bias_arg = bs if bias_kind == "list" else torch.stack(bs)
        log = OpLog()
        with log:
            y = apply_bias(xs, bias_arg, tokens_per_expert, ps)
            y.backward(dy)
        return y, xs.grad, bs, ps.grad, log

    apply_bias = megatron_experts.TEGroupedMLP._apply_bias
    assert apply_bias is tm._expert_bias
    y, dx, bs, dp, log = run(apply_bias)
    assert {"npu_ext.grouped_bias_add.default", "npu_ext.grouped_bias_add_grad.default"} <= log.npu_ext()
    y0, dx0, bs0, dp0, _ = run(ORIGINALS["_apply_bias"].__func__)
    assert y.dtype == y0.dtype == dtype
    torch.testing.assert_close(y, y0, **TOL[dtype])
    torch.testing.assert_close(dx, dx0, rtol=0, atol=0)
    if bias_kind == "list":
        for b, b0 in zip(bs, bs0):
            torch.testing.assert_close(b.grad, b0.grad, **TOL[dtype])
    torch.testing.assert_close(dp, dp0, **TOL[dtype])


@absent(APPLY_BIAS)
def test_expert_bias_none_and_3d_hidden(patched):
    x = torch.randn(2, 3, 8)
    assert megatron_experts.TEGroupedMLP._apply_bias(x, None, [6], torch.rand(6, 1)) is x
    biases = [torch.randn(8), torch.randn(8)]
    probs = torch.rand(6, 1)
    y = megatron_experts.TEGroupedMLP._apply_bias(x, biases, [2, 4], probs)
    y0 = ORIGINALS["_apply_bias"].__func__(x, biases, [2, 4], probs)
    assert y.shape == (2, 3, 8)
    torch.testing.assert_close(y, y0)


# ----------------------------------------------------------------------------------------------------------
# patch() / unpatch()
def test_patch_unpatch_restore_everything():
    assert tm.patched() == []
    first = tm.patch()
    assert first == TARGETS
    assert tm.patch() == first  # idempotent
    assert fused_bias_gelu.bias_gelu_impl is megatron_mlp.bias_gelu_impl is tm._bias_gelu
    assert vars(FusedScaleMaskSoftmax)["is_kernel_available"] is tm._softmax_gate
    tm.unpatch()
    tm.unpatch()  # idempotent
    assert tm.patched() == []
    assert vars(megatron_experts.TEGroupedMLP).get("_apply_bias") is ORIGINALS["_apply_bias"]  # the staticmethod
    # (the autouse fixture checks every original object after each test)


def test_unpatch_reaches_modules_imported_after_patch():
    import types

    tm.patch()
    late = types.ModuleType("late_user_module")
    late.bias_gelu_impl = fused_bias_gelu.bias_gelu_impl  # `from ... import bias_gelu_impl` after patch()
    sys.modules["late_user_module"] = late
    try:
        assert late.bias_gelu_impl is tm._bias_gelu
        tm.unpatch()
        assert late.bias_gelu_impl is ORIGINALS["bias_gelu_impl"]
    finally:
        del sys.modules["late_user_module"]


# ----------------------------------------------------------------------------------------------------------
# The release table and status()
def test_releases_span_the_tested_range():
    """RELEASES has a row for every major.minor of the release table's tested megatron-core range, and none beyond."""
    mcore = _releases.load()["megatron_core"]
    lo, hi = _releases.series(mcore["oldest"]), _releases.series(mcore["newest"])
    assert sorted(RELEASES) == [(lo[0], m) for m in range(lo[1], hi[1] + 1)], (sorted(RELEASES), lo, hi)
    assert lo <= _releases.series(mcore["default"]) <= hi


def test_release_table():
    """The installed megatron-core has a row in RELEASES, and the row says what the release has."""
    assert MCORE_KEY in RELEASES, (f"megatron-core {MCORE} has no row in RELEASES: read its fused_softmax.py and "
                                   "moe/experts.py, add one, and list the release in docs/megatron.md")
    try:
        assert importlib.metadata.version("megatron-core") == MCORE  # the package metadata is this megatron
    except importlib.metadata.PackageNotFoundError:
        pass  # a source checkout (Megatron-LM on PYTHONPATH)
    has = {
        IS_KERNEL_AVAILABLE: "is_kernel_available" in vars(FusedScaleMaskSoftmax),
        FORWARD_FUSED_SOFTMAX: "forward_fused_softmax" in vars(FusedScaleMaskSoftmax),
        BIAS_GELU_IMPL: callable(getattr(fused_bias_gelu, "bias_gelu_impl", None)),
        APPLY_BIAS: "_apply_bias" in vars(megatron_experts.TEGroupedMLP),
    }
    assert [t for t in ALL if has[t]] == TARGETS
    assert ("window_size" in inspect.signature(FusedScaleMaskSoftmax.__init__).parameters) == RELEASE["window_size"]
    assert ("softmax_offset" in inspect.signature(FusedScaleMaskSoftmax.forward).parameters) == \
        RELEASE["softmax_offset"]
    assert hasattr(megatron_experts, "GroupedMLP") == RELEASE["GroupedMLP"]


def test_status_follows_patch_and_unpatch():
    assert list(tm.status()) == [f"{m}.{p}" for m, p, _, _ in tm.TARGETS] == list(ALL)
    assert tm.status() == expected_status()
    tm.patch()
    assert tm.status() == expected_status(OURS)
    tm.unpatch()
    assert tm.status() == expected_status()


def test_status_tells_a_wrapper_from_megatrons_own():
    """A replacement that looks like Megatron's (functools.wraps copies __module__, __name__, __qualname__ and
    __doc__) is another patch; so is a wrapper around ours."""
    @functools.wraps(ORIGINALS["is_kernel_available"])
    def wrapper(*args, **kwargs):
        return ORIGINALS["is_kernel_available"](*args, **kwargs)

    assert wrapper.__module__ == "megatron.core.fusions.fused_softmax"
    try:
        FusedScaleMaskSoftmax.is_kernel_available = wrapper
        assert tm.status() == expected_status({IS_KERNEL_AVAILABLE: tm.REPLACED})
        tm.patch()
        FusedScaleMaskSoftmax.is_kernel_available = functools.wraps(tm._softmax_gate)(
            lambda *a: tm._softmax_gate(*a))
        assert tm.status() == expected_status(OURS, {IS_KERNEL_AVAILABLE: tm.REPLACED})
        assert IS_KERNEL_AVAILABLE not in tm.patched()
    finally:
        tm.unpatch()
        FusedScaleMaskSoftmax.is_kernel_available = ORIGINALS["is_kernel_available"]


# ----------------------------------------------------------------------------------------------------------
# Import errors
IMPORT_ERRORS = """
import importlib, sys
import torch_ext.megatron as tm
from torch_ext import _releases

def attempt():
    said = []
    for fn in (tm.patch, tm.status):
        try:
            fn()
            said.append("no error")
        except ImportError as e:
            said.append(str(e))
    assert said[0] == said[1], said  # patch() and status() say the same
    print(said[0])

sys.path.insert(0, FAKE)  # megatron-core 0.8.0 installed (its metadata), its import failing
attempt()
sys.path[:] = [p for p in sys.path if p != FAKE and "site-packages" not in p and "dist-packages" not in p]
for name in [m for m in sys.modules if m == "megatron" or m.startswith("megatron.")]:
    del sys.modules[name]
importlib.invalidate_caches()
attempt()  # no megatron anywhere on sys.path
"""


class TestImportErrors(expecttest.TestCase):
    def test_messages(self):
        """In a fresh interpreter: an installed megatron-core whose import fails (as 0.8.0's does with setuptools
        >= 81, which has no pkg_resources) gives its version and the import error's text; no megatron-core at
        all says it is not installed."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            core = os.path.join(tmp, "megatron", "core")  # ahead of the real one on sys.path
            os.makedirs(core)
            with open(os.path.join(core, "__init__.py"), "w") as f:
                f.write("import torch_ext_test_missing_dependency\n")
            meta = os.path.join(tmp, "megatron_core-0.8.0.dist-info")
            os.makedirs(meta)
            with open(os.path.join(meta, "METADATA"), "w") as f:
                f.write("Metadata-Version: 2.1\nName: megatron-core\nVersion: 0.8.0\n")
            cwd = os.path.join(tmp, "cwd")  # sys.path[0] under -c: nothing to import there
            os.makedirs(cwd)
            torch_ext_dir = os.path.dirname(os.path.dirname(os.path.abspath(tm.__file__)))
            out = subprocess.run([sys.executable, "-c", f"FAKE = {tmp!r}\n" + IMPORT_ERRORS], capture_output=True,
                                 text=True, cwd=cwd, env=dict(os.environ, PYTHONPATH=torch_ext_dir), timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        installed, missing = out.stdout.strip().splitlines()[-2:]
        tested = "{oldest} to {newest}".format(**_releases.load()["megatron_core"])  # the release table's range
        self.assertEqual(installed, (
            "torch_ext.megatron: megatron-core 0.8.0 is installed, but importing it fails with ModuleNotFoundError: "
            "No module named 'torch_ext_test_missing_dependency' (torch_ext.megatron is tested with megatron-core "
            f"{tested})"))
        self.assertEqual(missing, ("torch_ext.megatron needs megatron-core, which is not installed (pip install "
                                   f"megatron-core; tested with {tested})"))


@pytest.mark.subprocess
def test_import_torch_ext_does_not_import_megatron(tmp_path):
    code = "import sys, torch_ext, torch_ext.megatron; print(any(m.split('.')[0] == 'megatron' for m in sys.modules))"
    # cwd: not the repository (sys.path[0] is the cwd under -c), so the installed torch_ext is the one imported
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert own_stdout(out.stdout).strip() == "False", out.stdout


def test_gpt_trains_the_same_with_the_patch():
    example = load_example()
    steps = 4
    with example.cpu_megatron(), torch.compiler.set_stance("force_eager"):
        base_log, log = OpLog(), OpLog()
        with base_log:
            base = example.train_gpt(steps, fused=False)
        tm.patch()
        try:
            with log:
                ours = example.train_gpt(steps, fused=True)
        finally:
            tm.unpatch()
    assert not base_log.npu_ext()
    assert {"npu_ext.scaled_masked_softmax.default", "npu_ext.scaled_masked_softmax_backward.default",
            "npu_ext.gelu.default", "npu_ext.gelu_backward_v2.default"} <= log.npu_ext(), log.npu_ext()
    assert base[-1] < base[0] - 0.1 and ours[-1] < ours[0] - 0.1  # both learn
    assert example.curves_agree(ours, base), (ours, base)
    assert not example.curves_agree([x * 1.03 for x in ours], base)  # the comparison can fail


@pytest.mark.subprocess
def test_example_runs():
    r = subprocess.run([sys.executable, os.path.join(paths.EXAMPLES, "megatron_gpt.py"), "--steps", "3"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OK: 3 steps" in r.stdout, r.stdout
    assert own_stdout(r.stdout).startswith(f"megatron-core {package_info.__version__}, "), r.stdout
    lines = [f"  {t}: {expected_status(OURS)[t]}" for t in ALL]  # the status() of this release after patch()
    assert "\n".join(["torch_ext.megatron.status() after patch():"] + lines) in r.stdout, r.stdout
