"""torch_npu's torchair (``torch_npu.dynamo.torchair``) imports on the fake CANN of ``make test-npu``.

MindSpeed's adaptor imports torchair (its op builders, e.g. ``mindspeed/op_builder/gmm_builder.py``), whose
``core/*.so`` need CANN's GE libraries (libge_runner, libgraph, libfmk_parser, libascend_protobuf, ...) and GE's C++
symbols; tests/fake_cann/build.py builds them from that release's wheel (regen_symbols.linked_route). Checked, each
in a fresh process with the fake on LD_LIBRARY_PATH:

* torchair's native modules (every ``core/*.so``) load, and every CANN library they need was loaded from the fake's
  lib directory (the one holding the fake libascendcl.so), none from anywhere else;
* ``import torch_npu.dynamo.torchair`` and the names MindSpeed imports from it (``torchair.ge``'s ``custom_op``,
  ``Tensor``, ``TensorSpec``, ``DataType``, ``register_fx_node_ge_converter``; or, where a torch_npu lacks those,
  the older ``torchair.ge_concrete_graph`` ones MindSpeed falls back to). torchair's Python side imports protobuf
  (its GE IR messages; and 2.6's pkg_resources): where the venv lacks them that test is skipped, naming them (a
  failure under make test-npu).

Run: ``make test-npu NPU_TESTS=tests/npu/test_npu_torchair_import.py``. Skipped (the whole module) where torch_npu cannot
be imported or torch_ext did not load its NPU kernels; under make test-npu a skip is a failure.
"""

import ast
import glob
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

import npu_backend  # noqa: E402
import paths  # noqa: E402

_AVAILABLE, _REASON = npu_backend.npu_device_available()
pytestmark = pytest.mark.skipif(not _AVAILABLE, reason=_REASON)

regen_symbols = paths.load(os.path.join(paths.FAKE_CANN, "regen_symbols.py"))

# the subprocesses' report: the path of every shared object mapped, and the script's RESULT
_MAPS = """
import json
paths = {l.split()[-1] for l in open("/proc/self/maps") if ".so" in l.split()[-1]}
print(json.dumps({"libs": sorted(paths), "result": RESULT}))
"""

_CORE = """
import glob, importlib.util, os, torch, torch_npu
core = os.path.join(os.path.dirname(torch_npu.__file__), "dynamo", "torchair", "core")
RESULT = []
for path in sorted(glob.glob(os.path.join(core, "*.so"))):
    name = os.path.basename(path).split(".")[0]
    with open(path, "rb") as f:
        if b"PyInit_" + name.encode() not in f.read():
            continue  # a library of theirs (_abi_compat_ge_apis.so), loaded as their NEEDED
    # what `import torchair.core.<name>` does: dlopen (every symbol resolved: Python's RTLD_NOW) and PyInit
    importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path))
    RESULT.append(name)
"""

# MindSpeed's imports (op_builder/*_builder.py): the torchair.ge API, else the ge_concrete_graph one
_MINDSPEED = """
import torch, torch_npu
import torch_npu.dynamo.torchair as t
import torchair
try:
    from torchair import ge
    from torchair.ge import Tensor, TensorSpec, DataType
    from torchair import register_fx_node_ge_converter
    api = 2
    assert callable(ge.custom_op) and callable(ge.attr.Int) and DataType.DT_BF16 is not None
except ImportError:
    from torchair.ge_concrete_graph import ge_apis as ge
    from torchair.ge_concrete_graph.fx2ge_converter import register_fx_node_ge_converter
    from torchair.ge_concrete_graph.ge_graph import Tensor, TensorSpec, DataType
    from torchair.ge_concrete_graph.ge_graph import get_default_ge_graph, next_unique_name
    from torchair.ge_concrete_graph.ge_graph import compat_as_bytes
    from torchair.ge_concrete_graph.ge_graph import get_invalid_desc
    api = 1
assert callable(register_fx_node_ge_converter) and torchair.ge is not None  # torchair: torch_npu's lazy alias of t
RESULT = api
"""


def _site():
    return os.path.dirname(os.path.dirname(importlib.util.find_spec("torch_npu").origin))


def _fake_lib_dir():
    """The directory of the fake libascendcl.so this process loaded (the one with the fake's test hooks)."""
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if os.path.basename(path) == "libascendcl.so":
            out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True).stdout
            assert "fake_cann_count" in out, f"{path} is not the fake libascendcl.so"
            return os.path.dirname(path)
    raise AssertionError("libascendcl.so is not loaded")


def _run(script):
    proc = subprocess.run([sys.executable, "-c", script + _MAPS], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _assert_fake_cann_loaded(libs):
    fake = _fake_lib_dir()
    cann = regen_symbols.linked_route(_site(), os.path.dirname(torch.__file__))[0]  # what torchair's objects need
    assert {"libge_runner.so", "libgraph.so", "libascendcl.so"} <= set(cann), cann
    loaded = {}
    for path in libs:
        loaded.setdefault(os.path.basename(path), set()).add(os.path.dirname(path))
    for name in cann:
        assert loaded.get(name) == {fake}, (name, loaded.get(name), fake)


def test_torchair_core_libraries_load_from_the_fake():
    out = _run(_CORE)
    core = os.path.join(_site(), "torch_npu", "dynamo", "torchair", "core")
    libraries = sorted(glob.glob(os.path.join(core, "*.so")))
    assert "_torchair" in out["result"], out["result"]
    for path in libraries:  # every one, the modules and the libraries they need
        assert os.path.realpath(path) in out["libs"], path
    _assert_fake_cann_loaded(out["libs"])


def _missing_python_packages():
    """What torchair's Python side imports that this venv lacks: protobuf (its GE IR messages; MindSpeed's
    requirements.txt has it), and the modules its __init__.py imports (2.6's pkg_resources: setuptools < 81)."""
    missing = []
    try:
        importlib.metadata.version("protobuf")  # as torchair's ge_ir_pb2.py asks
    except importlib.metadata.PackageNotFoundError:
        missing.append("protobuf")
    init = os.path.join(_site(), "torch_npu", "dynamo", "torchair", "__init__.py")
    with open(init) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        for alias in node.names if isinstance(node, ast.Import) else []:
            top = alias.name.split(".")[0]
            if not top.startswith("torch") and importlib.util.find_spec(top) is None:
                missing.append(top)
    return missing


def test_torchair_and_mindspeed_names_import():
    missing = _missing_python_packages()
    if missing:
        pytest.skip(f"torchair's Python side imports {', '.join(missing)}, which this venv lacks")
    out = _run(_MINDSPEED)
    assert out["result"] in (1, 2)
    assert any(p.endswith(os.sep + "_torchair.so") for p in out["libs"])
    _assert_fake_cann_loaded(out["libs"])
