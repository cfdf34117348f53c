"""torch_ext.show_config() / python -m torch_ext on the CPU (the stand-in NPU's report is tested in
tests/test_npu_standin.py)."""

import os
import subprocess
import sys

import torch

import torch_ext
from torch_ext import _variants


def test_show_config_on_the_cpu(monkeypatch):
    monkeypatch.setenv("NPU_EXT_NO_CPU_FALLBACK", "1")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    text = torch_ext.show_config()
    lines = text.splitlines()
    assert lines[0].startswith(f"torch_ext {torch_ext.__version__} (")
    assert f"torch {torch.__version__}" in lines[1]
    in_use = torch.ops.npu_ext._cpu_capability()
    runnable = ", ".join(v.upper() for v in _variants.cpu_variants())
    assert f"CPU kernel variant: {in_use} (this build and CPU: {runnable}; " in text
    assert f"threads: {torch.get_num_threads()} " in text
    if not torch_ext._npu.LOADED:
        assert "NPU kernels: not loaded (" in text and torch_ext._npu.why_not_loaded() in text
    assert "  NPU_EXT_NO_CPU_FALLBACK=1  - " in text
    assert "  OMP_NUM_THREADS=(unset)  - " in text
    assert "  THP_MEM_ALLOC_ENABLE=" in text
    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    mode = open(thp).read().split("[")[1].split("]")[0] if os.path.exists(thp) else "unknown"
    assert f"transparent huge pages: {mode} (kernel)" in lines
    assert "megatron-core" in text


def test_python_m_torch_ext_prints_it(tmp_path):
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default", NPU_EXT_LOAD_NPU="0")
    # cwd: not the repository, whose torch_ext/ (sys.path[0] under -m) may not be the installed package
    r = subprocess.run([sys.executable, "-m", "torch_ext"], capture_output=True, text=True, env=env, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"torch_ext {torch_ext.__version__}")
    assert "CPU kernel variant: DEFAULT (" in r.stdout  # the forced variant is the one reported
    assert "NPU kernels: not loaded (NPU_EXT_LOAD_NPU=0)" in r.stdout
    assert "  ATEN_CPU_CAPABILITY=default  - " in r.stdout
