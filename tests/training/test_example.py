"""examples/train_tiny.py runs, trains, and its step-by-step check against plain PyTorch can fail."""

import importlib.util
import os
import subprocess
import sys

import pytest
import torch
import paths

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = pytest.mark.arch_independent

ROOT = paths.ROOT
SCRIPT = os.path.join(ROOT, "examples", "train_tiny.py")


def load_example():
    spec = importlib.util.spec_from_file_location("train_tiny", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.subprocess
def test_example_runs():
    r = subprocess.run([sys.executable, SCRIPT, "--steps", "6"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("OK: 6 steps"), r.stdout
    assert "6/6" in r.stderr  # the progress bar


def test_example_detects_mismatch(monkeypatch):
    """A wrong gradient in one torch_ext function makes the example exit non-zero."""
    mod = load_example()
    real = mod.torch_ext.grouped_bias_add

    class WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return 1.5 * g

    monkeypatch.setattr(mod.torch_ext, "grouped_bias_add", lambda x, b, gi: real(WrongGrad.apply(x), b, gi))
    assert mod.main(["--steps", "4"]) == 1
