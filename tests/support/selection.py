"""Selection by marker before the import (tests/conftest.py's pytest_ignore_collect).

pytest imports every test file of a run to collect it, and only then drops the tests `-m` deselects: a file whose
tests are all deselected still costs its imports and its module-level work (megatron-core, sybil; seconds natively,
most of a minute per worker under the aarch64 emulation). A file is left out before its import when no test of it can
be selected, decided from what is known without importing it: its folder's marker (tests/conftest.py gives every test
that of its folder, and only that one), the markers its module-level ``pytestmark`` names; a marker a test adds itself
is unknown, and the file is left out only if the expression is false whatever those are. So what runs is the same with
or without it (tests/repo/test_selection.py).
"""

import ast
import itertools
import re

from _pytest.mark.expression import Expression

_WORDS = {"and", "or", "not"}

# Every test lives in a folder named for what it tests, and carries that folder's marker, of the same name
# (tests/conftest.py gives it; pyproject.toml registers them): the Makefile, tools/versions.py, tools/aarch64/run.sh and
# .ci/run select tests by marker (-m), never by file.
FOLDERS = frozenset({"ops", "training", "npu", "integrations", "package", "repo", "docs", "ranks"})


def module_markers(path):
    """The markers a test file gives all its tests (`pytestmark = pytest.mark.X`, called or not, or a list of them),
    read from its source."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark":
                    names.add(sub.attr)
    return names


def never_selected(expression, path, folder_marker, folder_markers):
    """True if `-m expression` can select no test of the file `path` in the folder marked `folder_marker` (the
    other `folder_markers` are false for all its tests)."""
    known = module_markers(path) | {folder_marker}
    compiled = Expression.compile(expression)
    free = sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expression)) - _WORDS - known - set(folder_markers))
    for values in itertools.product((False, True), repeat=len(free)):
        true = known | {name for name, value in zip(free, values) if value}
        if compiled.evaluate(lambda name, **kwargs: name in true):
            return False
    return True
