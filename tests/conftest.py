import ast
import importlib.util
import itertools
import os
import re

import pytest
import torch
from _pytest.mark.expression import Expression

import torch_ext  # noqa: F401  (registers torch.ops.npu_ext)

# Every test lives in a folder named for what it tests, and carries that folder's marker (pyproject.toml registers
# them): the Makefile, tools/versions.py, tools/aarch64/run.sh and .ci/run select tests by marker (-m), never by file.
FOLDER_MARKERS = {"ops": "ops", "training": "training", "npu": "npu", "integrations": "integrations",
                  "package": "package", "repo": "repo", "docs": "docs",
                  "ranks": "ranks"}
_HERE = os.path.dirname(os.path.abspath(__file__))


def _module_markers(path):
    """The markers a test file gives all its tests (`pytestmark = pytest.mark.X` or a list of them), read from its
    source without importing it."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            for sub in ast.walk(node.value):  # pytest.mark.NAME, called or not
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark":
                    names.add(sub.attr)
    return names


def pytest_ignore_collect(collection_path, config):
    """Selection by marker, before the import: a test file none of whose tests `-m` can select is not imported at all
    (its imports and its samples cost seconds natively, a minute under the aarch64 emulation). Decided from what is
    known without importing it: its folder's marker (the only folder marker it can carry), its module-level
    markers; any other marker a test may add counts as unknown, and the file is left out only if the expression is
    false whatever those are."""
    expression = config.option.markexpr
    if not expression or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    folder = os.path.relpath(str(collection_path), _HERE).split(os.sep)[0]
    if folder not in FOLDER_MARKERS:
        return None
    known = _module_markers(collection_path) | {FOLDER_MARKERS[folder]}
    compiled = Expression.compile(expression)
    free = sorted({n for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expression) if n not in ("and", "or", "not")}
                  - known - set(FOLDER_MARKERS.values()))
    for values in itertools.product((False, True), repeat=len(free)):
        true = known | {n for n, v in zip(free, values) if v}
        if compiled.evaluate(lambda name, **kwargs: name in true):
            return None  # some test of it may be selected: collect it
    return True


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = os.path.relpath(str(item.path), _HERE).split(os.sep)[0]
        item.add_marker(FOLDER_MARKERS[folder])

# tests/docs runs the documentation's code blocks, one runtime per run (make test-docs sets NPU_EXT_DOCS_RUNTIME).
collect_ignore = [] if os.environ.get("NPU_EXT_DOCS_RUNTIME") else ["docs"]
# The documentation's checks need sybil, which make's .venv has; the release, Megatron and MindSpeed runtimes, which
# never select the repo tests (-m), have not: there the module is not collected at all (rather than reported skipped).
if importlib.util.find_spec("sybil") is None:
    collect_ignore.append(os.path.join("repo", "test_doc_blocks.py"))

if os.environ.get("NPU_EXT_EXPECT_SANITIZED") == "1":  # make test-asan: the sanitizer build, not the normal one
    assert os.sep + os.path.join("build", "asan", "lib") in torch_ext._C.__file__, torch_ext._C.__file__

# make test-npu: the build with torch_ext._C_npu inside the real torch_npu runtime (fake CANN), never the CPU build
# of the source tree; and there a skipped test is a failure (the tests written for an NPU must all run).
EXPECT_NPU = os.environ.get("NPU_EXT_EXPECT_NPU") == "1"
# tools/versions.py (make test-npu TORCH_NPU=..., make test-versions): the package installed into that release's
# venv, never the source tree's.
EXPECT_BUILD = os.environ.get("NPU_EXT_EXPECT_BUILD")
if EXPECT_BUILD:
    assert torch_ext._C.__file__.startswith(EXPECT_BUILD + os.sep), (torch_ext._C.__file__, EXPECT_BUILD)
if EXPECT_NPU:
    assert torch_ext._npu.LOADED, f"make test-npu: the NPU kernels are not loaded ({torch_ext._npu.why_not_loaded()})"
    expected = EXPECT_BUILD or os.sep + os.path.join("build", "npu", "lib")
    assert expected in torch_ext._C_npu.__file__, torch_ext._C_npu.__file__

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        if report.skipped and not hasattr(report, "wasxfail"):
            report.outcome = "failed"
            report.longrepr = f"skipped under make test-npu, where every test must run: {report.longrepr}"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
