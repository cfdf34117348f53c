#!/usr/bin/env python3
"""The venvs the test stages run in, and the install of the tree into one: one place for the Makefile and
tools/versions.py. Test-only: nothing a user installs goes through here.

  tools/venvs.py torch DIR --python 3.N --torch TORCH [--torch-npu TORCH_NPU] [--pip PKG ...] [--pip-no-deps PKG ...]
  tools/venvs.py layer DIR --over VENV [--pip-no-deps PKG ...]

``torch``: a venv of its own with one torch (and one torch_npu) release (the release rows, the MindSpeed pairs, make
test-megatron on another Python than the default row's). TORCH and TORCH_NPU are releases of a row of the release
table (torch_ext/releases.json; tools/versions.py passes them).

* DIR is a venv of that Python (``python3.12`` on PATH, or the running interpreter when its version matches).
* torch is installed with ``--no-deps`` and then its pure-Python requirements (its wheel metadata), without the
  nvidia-*, cuda-* and triton packages a CUDA build lists. Every torch on the package index except the default
  release's +cpu build (the one .venv installs) is a CUDA build whose libraries load the NVIDIA ones at import:
  tools/cuda_stubs.py builds stubs of those (every function returns cudaErrorNoDevice; no CPU or NPU path calls
  them) into torch/lib, which is on the RPATH of every torch library. That is 3 GB of downloads and an install a few
  times faster, and torch.cuda then reports no device, as on an Ascend host.
* torch_npu (``--torch-npu``) is installed with ``--no-deps``, as its own install guide does, plus the numpy
  and pyyaml it imports.
* setuptools >= 70.1 (torches before 2.13 bring none; older setuptools lack bdist_wheel), wheel, ninja and the
  test tools (pytest, pytest-xdist, expecttest, hypothesis).

Idempotent: DIR/.torch_venv.json records the arguments; a second call with the same ones does nothing, one that
only adds packages installs them, any other starts DIR afresh. ``--like OTHER``: when DIR is to be made afresh and
the venv OTHER holds the same Python, torch and torch_npu, DIR starts as a copy of OTHER (no second torch install;
make test-mindspeed's second pair), then gets its own packages.

``layer``: a venv whose Python also sees VENV's packages (a .pth file naming VENV's site-packages), with PKG installed
over them without their dependencies: .venv-npu (the default torch_npu over .venv's torch: one torch, so its build
shares .venv's objects through ccache) and .venv-megatron/<release>-py<default> (a megatron-core over .venv's).
Idempotent the same way (DIR/.layer.json).

``install_tree``: the working tree as git sees it copied into a directory of its own and installed from there with
README's Ascend command (the release rows, the MindSpeed pairs, make test-megatron on another Python).
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# pytest below 9.2: with 9.2 pytest-xdist's --dist loadgroup no longer groups (pytest-xdist issue 1386: the worker's
# "@group" node id suffix no longer takes), and the stages rely on it (tests/repo/test_selection.py checks it)
TOOLS = ["setuptools>=70.1", "wheel", "ninja", "numpy", "pyyaml", "pytest<9.2", "pytest-xdist", "expecttest",
         "hypothesis"]
SKIP_PREFIXES = ("nvidia-", "nvidia_", "cuda-", "cuda_", "triton")


def _run(cmd, **kw):
    print("venvs:", " ".join(cmd), flush=True)
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
    raise SystemExit(f"venvs: no working python{version} (PATH, pyenv)")


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


def site(py):
    """The site-packages directory of the venv of the Python `py`."""
    return subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True).stdout.strip()


def installed(py, name):
    """The release of the distribution `name` in `py`'s venv, or "-"."""
    code = f"import importlib.metadata as m\ntry: print(m.version({name!r}))\nexcept Exception: print('-')"
    return subprocess.run([py, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def _stub_cuda(venv, py):
    torch_lib = os.path.join(site(py), "torch", "lib")
    if not glob.glob(os.path.join(torch_lib, "libtorch_cuda*.so")):
        return  # a CPU build
    out = os.path.join(venv, "cuda-stubs")
    env = dict(os.environ, CC=os.environ.get("STUB_CC", "gcc"), READELF="readelf", STUB_TRIPLET="x86_64-linux-gnu")
    _run([sys.executable, os.path.join(HERE, "cuda_stubs.py"), torch_lib, "/", out], env=env)
    for path in glob.glob(os.path.join(out, "*.so*")):
        if not path.endswith((".c", ".map")):
            shutil.copy2(path, torch_lib)


def _add_packages(install, pip, pip_no_deps, stamp, key):
    """The further packages installed into an existing venv (`install`: its pip install command), and its record."""
    if pip:
        _run(install + list(pip))
    if pip_no_deps:
        _run(install + ["--no-deps"] + list(pip_no_deps))
    with open(stamp, "w") as f:
        json.dump(key, f)


def _pip(py):
    return [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]


def torch_venv(venv, python, torch, torch_npu=None, pip=(), pip_no_deps=(), like=None):
    """``torch`` above: the venv `venv` with that Python, torch and torch_npu; its Python."""
    venv = os.path.abspath(venv)
    key = {"python": python, "torch": torch, "torch_npu": torch_npu, "pip": list(pip), "pip_no_deps": list(pip_no_deps)}
    stamp = os.path.join(venv, ".torch_venv.json")
    py = os.path.join(venv, "bin", "python")
    install = _pip(py)
    if os.path.exists(stamp):
        with open(stamp) as f:
            old = json.load(f)
        if old == key:
            return py
        if all(old.get(k) == key[k] for k in ("python", "torch", "torch_npu")):  # only further packages changed
            _add_packages(install, pip, pip_no_deps, stamp, key)
            return py
        shutil.rmtree(venv)
    like = os.path.join(os.path.abspath(like), ".torch_venv.json") if like else None
    if like and os.path.exists(like):
        with open(like) as f:
            other = json.load(f)
        if all(other.get(k) == key[k] for k in ("python", "torch", "torch_npu")):
            print(f"venvs: {venv} starts as a copy of {os.path.dirname(like)}", flush=True)
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
            _add_packages(install, pip, pip_no_deps, stamp, key)
            return py
    _run([_interpreter(python), "-m", "venv", venv])
    _run(install + ["--upgrade", "pip"])
    _run(install + ["--no-deps", f"torch=={torch}"])
    _run(install + _torch_requirements(py) + TOOLS + list(pip))
    if torch_npu:
        _run(install + ["--no-deps", f"torch-npu=={torch_npu}"])
    if pip_no_deps:
        _run(install + ["--no-deps"] + list(pip_no_deps))
    _stub_cuda(venv, py)
    # torch imports (torch_npu installed: its autoload is off here, the fake CANN is not on the path yet)
    _run([py, "-c", "import torch; print('venvs: torch', torch.__version__, 'imports')"],
         env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    with open(stamp, "w") as f:
        json.dump(key, f)
    return py


def layer(venv, over, pip_no_deps=()):
    """``layer`` above: the venv `venv` over the venv `over`'s packages, with `pip_no_deps` installed; its Python."""
    venv, over = os.path.abspath(venv), os.path.abspath(over)
    key = {"over": over, "pip_no_deps": list(pip_no_deps)}
    stamp = os.path.join(venv, ".layer.json")
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == key:
                return py
    shutil.rmtree(venv, ignore_errors=True)
    base_py = os.path.join(over, "bin", "python")
    _run([base_py, "-m", "venv", venv])  # the same Python as `over`'s
    with open(os.path.join(site(py), "torch_ext_base_venv.pth"), "w") as f:
        f.write(site(base_py) + "\n")
    if pip_no_deps:
        _run(_pip(py) + ["--no-deps"] + list(pip_no_deps))
    with open(stamp, "w") as f:
        json.dump(key, f)
    return py


def copy_tree(dst):
    """The working tree as git sees it (tracked + untracked, ignored left out) into dst, replacing what was there
    (copy2 keeps the modification times, so the kept build directory recompiles only what changed)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True).stdout.split(b"\0")
    if os.path.exists(dst):  # afresh, but for setuptools' build directory: an unchanged source is not recompiled
        for name in os.listdir(dst):
            if name != "build":
                path = os.path.join(dst, name)
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    for f in files:
        if not f:
            continue
        rel = f.decode()
        src = os.path.join(ROOT, rel)
        if not os.path.isfile(src):  # deleted in the working tree
            continue
        os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dst, rel))


def build_env(env):
    """`env` for compiling the tree's copy: the DEFAULT kernel variant alone (the variants are the native stage's
    business), MAX_JOBS, and ccache where installed: the build runs inside the copy (src/build), so with the tree
    as base_dir ccache hashes relative paths and another clone's build of the same sources (CI's) takes these
    objects (-g0: no directory in them)."""
    out = dict(env, NPU_EXT_KERNEL_VARIANTS="default", MAX_JOBS=env.get("MAX_JOBS", "2"))
    ccache = "/usr/lib/ccache"
    if os.path.isdir(ccache):
        out.update(PATH=ccache + ":" + env["PATH"], CCACHE_NODIRECT="1", CCACHE_NOHASHDIR="1", CCACHE_BASEDIR=ROOT)
    return out


def install_tree(py, src, env):
    """``install_tree`` above: the tree copied into `src` and installed into `py`'s venv with README's Ascend command
    (pip install --no-build-isolation --no-deps .), with `env` (the fake CANN on the library path, as on an Ascend
    host with CANN's set_env.sh sourced)."""
    copy_tree(src)
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "."], cwd=src,
                   env=build_env(env), check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("torch", help="a venv of its own with one torch (and torch_npu) release")
    t.add_argument("venv")
    t.add_argument("--python", required=True, help="e.g. 3.11")
    t.add_argument("--torch", required=True, help="a torch release of the release table")
    t.add_argument("--torch-npu", default=None, help="the torch_npu release of that row")
    t.add_argument("--pip", nargs="*", default=[], help="further packages")
    t.add_argument("--pip-no-deps", nargs="*", default=[], help="further packages, without their dependencies")
    t.add_argument("--like", default=None, help="a venv of the same Python, torch and torch_npu to start from")
    lay = sub.add_parser("layer", help="a venv over another's packages")
    lay.add_argument("venv")
    lay.add_argument("--over", required=True, help="the venv whose packages it sees")
    lay.add_argument("--pip-no-deps", nargs="*", default=[], help="packages installed over them")
    args = ap.parse_args()
    if args.cmd == "torch":
        torch_venv(args.venv, args.python, args.torch, args.torch_npu, args.pip, args.pip_no_deps, args.like)
    else:
        layer(args.venv, args.over, args.pip_no_deps)


if __name__ == "__main__":
    main()
