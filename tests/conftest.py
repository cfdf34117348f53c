import importlib.util
import os

import pytest
import torch

import selection
import torch_ext  # noqa: F401  (registers torch.ops.npu_ext)

_HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_ignore_collect(collection_path, config):
    """Selection by marker, before the import: a test file none of whose tests `-m` can select is not imported at all
    (tests/support/selection.py)."""
    if not (config.option.markexpr and collection_path.suffix == ".py" and collection_path.name.startswith("test_")):
        return None
    folder = os.path.relpath(str(collection_path), _HERE).split(os.sep)[0]
    if folder not in selection.FOLDERS:
        return None
    return True if selection.never_selected(config.option.markexpr, collection_path, folder,
                                            selection.FOLDERS) else None


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = os.path.relpath(str(item.path), _HERE).split(os.sep)[0]
        item.add_marker(folder)  # its folder's marker (selection.FOLDERS)

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
