"""Megatron beyond one process: examples/megatron_gpt.py's bf16 GPT with tensor parallelism 2 over two gloo
processes (tests/support/megatron_tp_worker.py, one per rank), trained with and without torch_ext.megatron.patch().

Checked: the per-step losses of the patched run within 1e-3 RELATIVE of Megatron's own (unpatched) run, the two
ranks holding the same losses, both ranks sharded (TP world size 2, ranks 0 and 1, the same number of c10d
all-reduces in both runs), and the patched run's fused softmax and bias-GELU dispatched as npu_ext ops (counted
per call, forward and backward, with tests/integrations/test_megatron.py's OpLog), the unpatched run's never.

Why relative 1e-3: the model computes in bf16 (unit roundoff 2^-8 = 3.9e-3). The two runs differ only in how the
softmax and the bias-GELU round (Megatron's bf16 formulas round each intermediate, the npu_ext ops compute in
fp32 and round once), a relative error per element; the loss is a mean of fp32 cross entropies over 128 tokens,
so the first step (same weights) differs by 2e-5 relative, and Adam's sign-like early updates carry that into
the weights: measured at most 4.3e-4 relative over the 12 steps (7.4e-4 at step 14 of a 20-step run). The loss
falls from 4.58 to 2.46 over the 12 steps, so an absolute bound would be looser at the end than at the start;
an absolute 1e-3 does not hold in bf16 (1.5e-3 measured at step 4). 1e-3 relative is a quarter of one bf16
rounding of the loss itself. fp32 is not an option: the patched fused softmax takes fp16/bf16 only, and in fp32
Megatron keeps its torch path. What the bound catches (a dropped causal mask, a dropped GELU bias, a wrong
softmax scale) and what it does not (erf GELU for tanh; tests/integrations/test_megatron.py does): docs/megatron.md.

Runs once: only in make test's first pass (no ATEN_CPU_CAPABILITY forced; the passes per kernel variant would
train the same two processes again) and not under the aarch64 emulation (two emulated processes training a GPT;
natively about 10 s). tests/integrations/test_megatron.py covers the patched ops in every pass.
"""

import os

import pytest

import paths
import runner

curves_agree = paths.example("megatron_gpt").curves_agree

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = [pytest.mark.megatron, pytest.mark.release, pytest.mark.arch_independent, 
    pytest.mark.skipif(bool(os.environ.get("ATEN_CPU_CAPABILITY")),
                       reason="runs once, in make test's first pass (ATEN_CPU_CAPABILITY is set: a pass per kernel "
                              "variant, where the same two-process training would only run again)"),
    pytest.mark.skipif(os.environ.get("NPU_EXT_EMULATED") == "1",
                       reason="runs natively only (two emulated python processes training a GPT under qemu; "
                              "make test runs it once)"),
]

WORLD = 2  # ranks, all in one tensor-parallel group
STEPS = 12  # as examples/megatron_gpt.py's measured curve (README, docs/megatron.md)
LAYERS = 2  # examples/megatron_gpt.py's GPT
REL = 1e-3


def launch(tmp_path, world=WORLD, steps=STEPS, timeout=300):
    """Runs the ranks of tests/support/megatron_tp_worker.py; returns what each wrote, in rank order."""
    out = str(tmp_path / "losses")
    return runner.ranks("megatron_tp_worker.py", world, out, steps, out, env_extra={"OMP_NUM_THREADS": "1"},
                        timeout=timeout)


def check(results, steps=STEPS):
    """Every assertion of the test on the ranks' results; returns the largest loss difference, relative and
    absolute."""
    from megatron_common import check_tp_ranks

    base, ours = check_tp_ranks(results, steps, LAYERS)
    assert base[-1] < base[0] - 0.5 and ours[-1] < ours[0] - 0.5, (base, ours)  # both learn
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, base)), max(abs(a - b) for a, b in zip(ours, base))
    table = "\n".join(f"{i:>3} {b:.5f} {a:.5f} {abs(a - b) / abs(b):.1e}" for i, (b, a) in enumerate(zip(base, ours)))
    assert curves_agree(ours, base, rel=REL), f"step, Megatron, patched, relative difference:\n{table}"
    return worst


def test_tensor_parallel_gpt_trains_the_same_with_the_patch(tmp_path):
    results = launch(tmp_path)
    rel, absolute = check(results)
    print(f"TP={WORLD} over gloo, {STEPS} steps: largest loss difference {rel:.2e} relative (bound {REL}), "
          f"{absolute:.2e} absolute")
    # The comparison can fail: a curve off by twice the bound is caught.
    base = results[0]["base"]
    assert not curves_agree([x * (1 + 2 * REL) for x in base], base, rel=REL)
