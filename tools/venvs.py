#!/usr/bin/env python3
"""Creates a virtual environment with one torch (and optionally one torch_npu) release, for the version and
Megatron test stages (make test-npu TORCH_NPU=..., make test-versions, make test-megatron). Test-only: nothing a
user installs goes through here.

  tools/torch_venv.py DIR --python 3.N --torch TORCH [--torch-npu TORCH_NPU] [--pip PKG ...]

TORCH and TORCH_NPU are releases of a row of the release table (torch_ext/releases.json; tools/versions.py passes
them).

* DIR is a venv of that Python (``python3.12`` on PATH, or the running interpreter when its version matches).
* torch is installed with ``--no-deps`` and then its pure-Python requirements (its wheel metadata), without the
  nvidia-*, cuda-* and triton packages a CUDA build lists. Every torch on the package index except the default
  release's +cpu build (the one .venv installs) is a CUDA build whose libraries load the NVIDIA ones at import:
  tools/cuda_stubs.py builds stubs of those (every function returns cudaErrorNoDevice; no CPU or NPU path calls
  them) into torch/lib, which is on the RPATH of every torch library. That is 3 GB of downloads and an install a few times faster, and torch.cuda then reports
  no device, as on an Ascend host.
* torch_npu (``--torch-npu``) is installed with ``--no-deps``, as its own install guide does, plus the numpy
  and pyyaml it imports.
* setuptools >= 70.1 (torches before 2.13 bring none; older setuptools lack bdist_wheel), wheel, ninja and the
  test tools (pytest, pytest-xdist, expecttest, hypothesis).

Idempotent: DIR/.torch_venv.json records the arguments; a second call with the same ones does nothing, one that
only adds packages installs them, any other starts DIR afresh. ``--like OTHER``: when DIR is to be made afresh and
the venv OTHER holds the same Python, torch and torch_npu, DIR starts as a copy of OTHER (no second torch install;
make test-mindspeed's second pair), then gets its own packages.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# pytest below 9.2: with 9.2 pytest-xdist's --dist loadgroup no longer groups (pytest-xdist issue 1386: the worker's
# "@group" node id suffix no longer takes), and the stages rely on it (tests/repo/test_selection.py checks it)
TOOLS = ["setuptools>=70.1", "wheel", "ninja", "numpy", "pyyaml", "pytest<9.2", "pytest-xdist", "expecttest",
         "hypothesis"]
SKIP_PREFIXES = ("nvidia-", "nvidia_", "cuda-", "cuda_", "triton")


def _run(cmd, **kw):
    print("torch_venv:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def _interpreter(version):
    """An interpreter of that version: this one, python<version> on PATH (when it runs: a pyenv shim of a version
    that is not selected does not), or pyenv's installation of it."""
    if "%d.%d" % sys.version_info[:2] == version:
        return sys.executable
    candidates = [shutil.which(f"python{version}")]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")),
                         reverse=True)
    for exe in candidates:
        if exe and subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0:
            return exe
    raise SystemExit(f"torch_venv: no working python{version} (PATH, pyenv)")


def _torch_requirements(py):
    """torch's Requires-Dist without the CUDA packages (markers kept: pip evaluates them)."""
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps(m.distribution('torch').requires or []))")
    reqs = json.loads(subprocess.run([py, "-c", code], check=True, capture_output=True, text=True).stdout)
    keep = []
    for r in reqs:
        name = r.split(";")[0].strip().lower()
        if name.startswith(SKIP_PREFIXES) or "extra ==" in r:
            continue
        keep.append(r)
    return keep


def _stub_cuda(venv, py):
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    torch_lib = os.path.join(site, "torch", "lib")
    if not glob.glob(os.path.join(torch_lib, "libtorch_cuda*.so")):
        return  # a CPU build
    out = os.path.join(venv, "cuda-stubs")
    env = dict(os.environ, CC=os.environ.get("STUB_CC", "gcc"), READELF="readelf", STUB_TRIPLET="x86_64-linux-gnu")
    _run([sys.executable, os.path.join(HERE, "cuda_stubs.py"), torch_lib, "/", out], env=env)
    for path in glob.glob(os.path.join(out, "*.so*")):
        if not path.endswith((".c", ".map")):
            shutil.copy2(path, torch_lib)


def _add_packages(pip, args, stamp, key):
    """The further packages installed into an existing venv, and its record."""
    if args.pip:
        _run(pip + args.pip)
    if args.pip_no_deps:
        _run(pip + ["--no-deps"] + args.pip_no_deps)
    with open(stamp, "w") as f:
        json.dump(key, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("venv")
    ap.add_argument("--python", required=True, help="e.g. 3.11")
    ap.add_argument("--torch", required=True, help="a torch release of the release table")
    ap.add_argument("--torch-npu", default=None, help="the torch_npu release of that row")
    ap.add_argument("--pip", nargs="*", default=[], help="further packages")
    ap.add_argument("--pip-no-deps", nargs="*", default=[], help="further packages, without their dependencies")
    ap.add_argument("--like", default=None, help="a venv of the same Python, torch and torch_npu to start from")
    args = ap.parse_args()

    venv = os.path.abspath(args.venv)
    key = {"python": args.python, "torch": args.torch, "torch_npu": args.torch_npu, "pip": args.pip,
           "pip_no_deps": args.pip_no_deps}
    stamp = os.path.join(venv, ".torch_venv.json")
    py = os.path.join(venv, "bin", "python")
    pip = [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if os.path.exists(stamp):
        with open(stamp) as f:
            old = json.load(f)
        if old == key:
            return
        if all(old.get(k) == key[k] for k in ("python", "torch", "torch_npu")):  # only further packages changed
            _add_packages(pip, args, stamp, key)
            return
        shutil.rmtree(venv)
    like = os.path.join(os.path.abspath(args.like), ".torch_venv.json") if args.like else None
    if like and os.path.exists(like):
        with open(like) as f:
            other = json.load(f)
        if all(other.get(k) == key[k] for k in ("python", "torch", "torch_npu")):
            print(f"torch_venv: {venv} starts as a copy of {args.like}", flush=True)
            shutil.copytree(os.path.dirname(like), venv, symlinks=True)
            os.remove(os.path.join(venv, ".torch_venv.json"))
            # scripts name their venv's python: point the copies at this one (pip is run as `python -m pip`)
            for script in glob.glob(os.path.join(venv, "bin", "*")):
                if os.path.isfile(script) and not os.path.islink(script):
                    with open(script, "rb") as f:
                        text = f.read()
                    if text.startswith(b"#!"):
                        with open(script, "wb") as f:
                            f.write(text.replace(os.path.dirname(like).encode(), venv.encode()))
            _add_packages(pip, args, stamp, key)
            return
    _run([_interpreter(args.python), "-m", "venv", venv])
    _run(pip + ["--upgrade", "pip"])
    _run(pip + ["--no-deps", f"torch=={args.torch}"])
    _run(pip + _torch_requirements(py) + TOOLS + args.pip)
    if args.torch_npu:
        _run(pip + ["--no-deps", f"torch-npu=={args.torch_npu}"])
    if args.pip_no_deps:
        _run(pip + ["--no-deps"] + args.pip_no_deps)
    _stub_cuda(venv, py)
    # torch imports (torch_npu installed: its autoload is off here, the fake CANN is not on the path yet)
    _run([py, "-c", "import torch; print('torch_venv: torch', torch.__version__, 'imports')"],
         env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    with open(stamp, "w") as f:
        json.dump(key, f)


if __name__ == "__main__":
    main()
