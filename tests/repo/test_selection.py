"""Selection by marker before the import (tests/support/selection.py): a file is left out before pytest imports it
only when no test of it could be selected, so every selection the stages make collects the same tests as pytest's
own `-m` over every file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import paths
import selection
from _pytest.mark.expression import Expression

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = pytest.mark.arch_independent


@pytest.mark.parametrize("source,expression,folder,never", [
    ("pytestmark = pytest.mark.arch_independent\n", "not arch_independent", "repo", True),
    ("pytestmark = [pytest.mark.asan, pytest.mark.release]\n", "npu or release", "ops", False),
    ("pytestmark = [pytest.mark.asan, pytest.mark.release]\n", "not asan", "ops", True),
    ("pytestmark = pytest.mark.xdist_group('x')\n", "npu", "ops", True),  # another folder's marker: never its tests'
    ("import pytest\n", "mindspeed", "integrations", False),  # a test may mark itself
    ("import pytest\n", "not arch_independent", "training", False),
    ("pytestmark = [pytest.mark.skipif(True, reason='r'), pytest.mark.arch_independent]\n",
     "not arch_independent and not subprocess", "npu", True),
    ("pytestmark = pytest.mark.arch_independent\n", "arch_independent or npu", "npu", False),
])
def test_never_selected(tmp_path, source, expression, folder, never):
    path = tmp_path / "test_x.py"
    path.write_text(source)
    assert selection.never_selected(expression, path, folder, selection.FOLDERS) is never


COLLECT_MARKERS = '''
import json
def pytest_collection_modifyitems(session, config, items):
    with open({out!r}, "w") as f:
        json.dump({{i.nodeid: sorted({{m.name for m in i.iter_markers()}}) for i in items}}, f)
'''
SELECTIONS = ("not arch_independent", "npu", "npu or release", "asan", "release and not npu", "mindspeed",
              "mindspeed or device or (package and release)", "mindspeed or (package and release)", "ranks")


def test_a_file_left_out_has_no_test_the_selection_would_run(tmp_path):
    """For the stages' selections (Makefile, tools/versions.py, tools/aarch64/run.sh), every file the hook would leave
    out has no test whose markers satisfy the selection (one collection of every file, without -m); and the hook does
    leave files out (what it is for)."""
    out = tmp_path / "items.json"
    (tmp_path / "collect_markers.py").write_text(COLLECT_MARKERS.format(out=str(out)))
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p",
                           "collect_markers", "tests"], cwd=paths.ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    items = json.loads(out.read_text())
    assert len(items) > 1000
    files = {}
    for nodeid, marks in items.items():
        files.setdefault(nodeid.split("::")[0], []).append(set(marks))
    left_out = 0
    for expression in SELECTIONS:
        compiled = Expression.compile(expression)
        for path, tests in files.items():
            folder = path.split("/")[1]
            if selection.never_selected(expression, Path(paths.ROOT) / path, folder, selection.FOLDERS):
                left_out += 1
                assert not any(compiled.evaluate(lambda name, **kw: name in marks) for marks in tests), (
                    expression, path)
    assert left_out > 50


def test_loadgroup_keeps_a_group_in_one_worker(tmp_path):
    """The stages spread tests with --dist loadgroup and rely on it for the tests of one xdist_group (MindSpeed-LLM's
    runs happen once): pytest 9.2 broke it silently (pytest-xdist issue 1386), hence requirements-dev.txt's pin."""
    (tmp_path / "test_grouped.py").write_text("import pytest\npytestmark = pytest.mark.xdist_group('one')\n"
                                              + "".join(f"def test_{i}():\n    pass\n" for i in range(6)))
    (tmp_path / "test_free.py").write_text("".join(f"def test_{i}():\n    pass\n" for i in range(6)))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    workers = [line.split()[0] for line in proc.stdout.splitlines() if "PASSED test_grouped.py" in line]
    assert len(workers) == 6 and len(set(workers)) == 1, proc.stdout[-3000:]
