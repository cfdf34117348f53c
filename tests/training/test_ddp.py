"""DDP on 2 processes (gloo, localhost): gradients and parameters match single-process training."""

import subprocess

import pytest
import torch

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = [pytest.mark.arch_independent, pytest.mark.subprocess]

import ddp_worker
import runner


def test_ddp_matches_single_process(tmp_path):
    out = str(tmp_path / "rank0.pt")
    port = runner.free_port()
    procs = [runner.worker("ddp_worker.py", r, 2, port, out) for r in range(2)]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)
    ddp = torch.load(out)

    model = ddp_worker.make_model()
    tokens, labels = ddp_worker.make_data(ddp_worker.STEPS, ddp_worker.BATCH, 12, 64)
    grads, params = ddp_worker.train(model, tokens, labels)
    names = [n for n, _ in model.named_parameters()]
    assert len(grads) == len(ddp["grads"])
    for name, a, b in zip(names, ddp["grads"], grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"gradient of {name}")
    for name, a, b in zip(names, ddp["params"], params):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"parameter {name}")
    assert any(g.abs().sum() > 0 for g in grads)  # the comparison is not between zeros
