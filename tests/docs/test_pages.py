"""The documentation's code blocks, run as a reader runs them (make test-docs; docs/testing.md).

One runtime per pytest run, named by NPU_EXT_DOCS_RUNTIME (cpu, npu, mindspeed; tests/support/doc_blocks.py says how a block
names its runtime). The runtime is a scratch venv over a base interpreter's packages (cpu: .venv, the default torch;
npu: .venv-npu, the default torch_npu, with the fake CANN's set_env.sh sourced; mindspeed: the MindSpeed stage's venv,
NPU_EXT_DOCS_PYTHON and NPU_EXT_DOCS_ENV) and a copy of the tree, both under build/docs/<runtime>, made afresh, so
`pip install .`, `rm -rf build` or an editable install never touch the checkout. The pages run in the order of
doc_blocks.pages(), the blocks of a page in page order:

* a bash block runs in `bash -e -o pipefail` from the copy of the tree (where a reader who cloned it stands), with
  the variables an earlier block of the page set (`set -a`: exported); `~` is a scratch home;
* a python block runs as a script from the scratch home (outside the checkout: there `import torch_ext` would be the
  sources);
* an output block is checked against what the block before it printed;
* the one placeholder filled: `/usr/local/Ascend` (CANN's install directory) is the fake CANN's toolkit laid out under
  build/docs/<runtime>/Ascend, whose set_env.sh puts the fake libraries on LD_LIBRARY_PATH.

A block fails when it exits non-zero or when an output block's lines are not in its output.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from doc_blocks import ROOT, document, missing_lines, pages

RUNTIME = os.environ.get("NPU_EXT_DOCS_RUNTIME", "")
BASE = ROOT / "build" / "docs" / RUNTIME
TIMEOUT = 1800
# Not carried from one block to the next: the shell's own bookkeeping.
_SHELL_VARS = {"PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "PS4", "BASH_EXECUTION_STRING"}


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _tools():
    """tools/venvs.py (the tree copy, a venv's site directory) and tools/versions.py (the fake toolkit), with
    tools/releases.py, which versions.py imports besides venvs.py."""
    _load("releases", ROOT / "tools" / "releases.py")
    venvs = _load("venvs", ROOT / "tools" / "venvs.py")
    return venvs, _load("npu_ext_versions", ROOT / "tools" / "versions.py")


# The scratch venv sees the base interpreter's packages through this module (imported by a .pth file): the base
# site directory is added as a site directory (its .pth files processed: MindSpeed's editable install, .venv-npu's
# layer over .venv), except an editable install's (.venv's torch_ext), which would map `import torch_ext` to the checkout.
_LAYER = '''import os, site, sys
for d in {dirs!r}:
    known = set(sys.path)
    sys.path.append(d)
    for name in sorted(os.listdir(d)):
        if name.endswith(".pth") and not (name.startswith("__editable__") and "torch_ext" in name):
            site.addpackage(d, name, known)
'''


def _environment(env0):
    """The variables of `env -0`'s output, without the shell's own bookkeeping."""
    pairs = (item.partition("=") for item in env0.split("\0"))
    return {name: value for name, sep, value in pairs if sep and name not in _SHELL_VARS}


def _scratch_venv(venvs, base_python, venv):
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    py = os.path.join(venv, "bin", "python")
    site_dir = venvs.site(py)
    with open(os.path.join(site_dir, "_npu_ext_docs_layer.py"), "w") as f:
        f.write(_LAYER.format(dirs=[venvs.site(base_python)]))
    with open(os.path.join(site_dir, "_npu_ext_docs_layer.pth"), "w") as f:
        f.write("import _npu_ext_docs_layer\n")
    return py


@pytest.fixture(scope="session")
def runtime():
    """(environment, the copy of the tree, the scratch home, the fake Ascend directory) of RUNTIME."""
    venvs, versions = _tools()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NPU_EXT_DOCS", "PYTEST", "PYTHON"))}
    if RUNTIME == "mindspeed":
        base_python = os.environ["NPU_EXT_DOCS_PYTHON"]
        with open(os.environ["NPU_EXT_DOCS_ENV"]) as f:
            stage_env = json.load(f)  # the stage's own: PYTHONPATH (Megatron-LM), LD_LIBRARY_PATH, ASCEND_*, ...
        env.update({k: v for k, v in stage_env.items() if k != "NPU_EXT_EXPECT_BUILD" and k != "NPU_EXT_EXPECT_NPU"})
        env["PYTHONPATH"] = os.pathsep.join(p for p in stage_env.get("PYTHONPATH", "").split(os.pathsep)
                                            if p and p != str(ROOT) and "site-packages" not in p)
    else:
        base_python = str(ROOT / (".venv" if RUNTIME == "cpu" else ".venv-npu") / "bin" / "python")
    BASE.mkdir(parents=True, exist_ok=True)
    src, home = BASE / "src", BASE / "home"
    venvs.copy_tree(str(src))  # a copy of what git sees, kept build/ aside (its objects are reused)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    py = _scratch_venv(venvs, base_python, BASE / "venv")
    ascend = BASE / "Ascend"
    if RUNTIME != "cpu":
        lib = env["LD_LIBRARY_PATH"].split(os.pathsep)[0] if RUNTIME == "mindspeed" else subprocess.run(
            [base_python, str(ROOT / "tests" / "fake_cann" / "build.py")], check=True, capture_output=True,
            text=True).stdout.strip().splitlines()[-1]
        shutil.rmtree(ascend, ignore_errors=True)
        ascend.mkdir()
        env.update(versions._toolkit(str(ascend), lib))  # ascend/ascend-toolkit, lib64 the fake CANN's libraries
        env.pop("LD_LIBRARY_PATH", None)
        # every page of these runtimes starts in a shell where CANN's set_env.sh was sourced (a page may source it
        # again, as a reader on a fresh host does)
        out = subprocess.run(["bash", "-c", f"source {ascend}/ascend-toolkit/set_env.sh && env -0"], env=env,
                             check=True, capture_output=True, text=True).stdout
        env = _environment(out)
    ccache = "/usr/lib/ccache"
    env.update(
        VIRTUAL_ENV=os.path.dirname(os.path.dirname(py)),
        PATH=os.pathsep.join(([ccache] if os.path.isdir(ccache) else []) + [os.path.dirname(py), env["PATH"]]),
        HOME=str(home),
        PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", os.path.expanduser("~/.cache/pip")),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        # the build's speed only: one kernel variant (make test builds and tests them all), two jobs, objects
        # shared through ccache with other builds of this tree (tools/versions.py's)
        NPU_EXT_KERNEL_VARIANTS="default", MAX_JOBS=env.get("MAX_JOBS", "2"),
        CCACHE_NODIRECT="1", CCACHE_NOHASHDIR="1", CCACHE_BASEDIR=str(ROOT),
    )
    return env, src, home, ascend


def _run_bash(example, env, src, ascend):
    source = example.parsed.source.replace("/usr/local/Ascend", str(ascend))
    with tempfile.NamedTemporaryFile("r", suffix=".env", dir=BASE) as after:
        script = (f"set -e -o pipefail -a\ntrap 'env -0 > {after.name}' EXIT\ncd {src}\n{source}")
        proc = subprocess.run(["bash", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        return proc, _environment(after.read())


def _run_python(example, env, home):
    script = home / f"block_{example.line}.py"
    script.write_text(example.parsed.source)
    return subprocess.run([shutil.which("python", path=env["PATH"]), str(script)], cwd=home, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL), None


def _cases():
    if RUNTIME not in ("cpu", "npu", "mindspeed"):
        return []
    cases = []
    for path in pages():
        doc = document(path)
        previous = None
        for example in doc:
            block = example.parsed
            if block.kind == "run" and RUNTIME in block.runtime.split() or block.kind == "output" and \
                    previous is not None and previous.kind == "run" and RUNTIME in previous.runtime.split():
                cases.append(pytest.param(example, id=block.where))
            previous = block
    return cases


@pytest.mark.parametrize("example", _cases())
def test_block(example, runtime):
    env, src, home, ascend = runtime
    state = example.namespace.setdefault("npu_ext_docs", {"env": dict(env), "output": None, "failed": None})
    block = example.parsed
    if state["failed"]:
        pytest.fail(f"{block.where}: not run, an earlier block of the page failed ({state['failed']})")
    if block.kind == "output":
        missing = missing_lines(block.source, state["output"] or "")
        assert not missing, (f"{block.where}: the output block's lines {missing} are not in what the block before it "
                             f"printed:\n{state['output']}")
        return
    if block.language == "bash":
        proc, carried = _run_bash(example, state["env"], src, ascend)
    else:
        proc, carried = _run_python(example, state["env"], home)
    state["output"] = proc.stdout
    sys.stdout.write(f"== {block.where} ({block.language}, {RUNTIME})\n{proc.stdout}")
    if proc.returncode != 0:
        state["failed"] = block.where
        pytest.fail(f"{block.where}: exit status {proc.returncode}:\n{proc.stdout[-6000:]}")
    if carried:
        state["env"] = carried
