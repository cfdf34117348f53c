"""The repository's own shape: no import cycle among the modules of benchmarks/ and tools/ (each package's modules
import one another one way only)."""

import ast
from pathlib import Path

import pytest
import paths

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = pytest.mark.arch_independent

ROOT = Path(paths.ROOT)


def sibling_imports(directory):
    """{module: {sibling modules it imports, at any depth of the file}} for the .py files of `directory`."""
    names = {p.stem for p in directory.glob("*.py")}
    graph = {}
    for path in directory.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module is None:  # from . import a, b
                    found |= {a.name for a in node.names}
                elif node.module:
                    found.add(node.module.split(".")[-1] if node.level or node.module.startswith(directory.name + ".")
                              else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name.split(".")[-1] if a.name.startswith(directory.name + ".") else a.name
                          for a in node.names}
        graph[path.stem] = (found & names) - {path.stem}
    return graph


def cycles(graph):
    """The import cycles of a graph, each as a list of modules (empty when there is none)."""
    found, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_cycle_finder(tmp_path):
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from .c import x\n")
    (tmp_path / "c.py").write_text("import a\n")
    (tmp_path / "d.py").write_text("import os\n")
    assert cycles(sibling_imports(tmp_path)) == [["a", "b", "c", "a"]]
    (tmp_path / "c.py").write_text("import os\n")
    assert cycles(sibling_imports(tmp_path)) == []


def test_no_import_cycle_in_benchmarks_and_tools():
    for directory in ("benchmarks", "tools"):
        assert cycles(sibling_imports(ROOT / directory)) == [], directory
