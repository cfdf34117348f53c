"""docs/adding-an-operator.md against the tree: each operator family's folder holds the files the page lists, and no
others; each family has its Python module (torch_ext/_family_<family>.py, one per folder, imported by torch_ext),
which registers what the page says: the training function of its forward op, the op's autocast rule, its torchair
decomposition, its --check cases; the files it names outside the folder exist; the schemas the folders register
are the ops torch.ops.npu_ext has, the sample table's ops and README's operator table; every aclnn entry point the
NPU sources declare is modelled by the fake CANN and named in docs/npu.md."""

import importlib
import re
import sys
from pathlib import Path

import pytest
import torch

import paths
import torch_ext  # noqa: F401  (registers the ops)
import torch_ext.torchair
from torch_ext import _autocast, _check
from torch_ext.testing import samples

pytestmark = pytest.mark.arch_independent

ROOT = Path(paths.ROOT)
OPS_DIR = ROOT / "csrc" / "ops"
PAGE = (ROOT / "docs" / "adding-an-operator.md").read_text(encoding="utf-8")
FAMILIES = sorted(p.name for p in OPS_DIR.iterdir() if p.is_dir())
PY_DIR = ROOT / "torch_ext"


def page_table(marker):
    """The first-column cells (backticked names) of the table after `marker` in the page."""
    table = PAGE[PAGE.index(marker):].split("\n", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| ([^|]+) \|", table, re.M)[1:]  # the header aside
    return [name for row in rows if "---" not in row for name in re.findall(r"`([^`]+)`", row)]


def folder_files():
    return page_table("<!-- the operator folder")


def outside_files():
    return page_table("<!-- the files outside the folder")


def module_parts():
    return page_table("<!-- the family module")


def defined_schemas(family):
    """{op name (with overload): schema} from a family's library.cpp m.def calls."""
    text = (OPS_DIR / family / "library.cpp").read_text(encoding="utf-8")
    out = {}
    for call in re.findall(r"m\.def\(((?:\s*\"(?:[^\"\\]|\\.)*\")+)\s*\)", text):
        schema = "".join(bytes(lit, "utf-8").decode("unicode_escape") for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', call))
        out[schema.split("(", 1)[0].strip()] = schema
    return out


def test_the_page_lists_the_folder_files():
    names = folder_files()
    assert "library.cpp" in names and "npu.cpp" in names and "kernel_foo_grad.cpp" in names, names


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_folder_holds_what_the_page_lists(family):
    """The page's files (kernel_<op>.cpp: one per CPU kernel source), nothing more, nothing missing."""
    expected = {n for n in folder_files() if not n.startswith("kernel_")}
    have = {p.name for p in (OPS_DIR / family).iterdir()}
    kernels = {n for n in have if re.fullmatch(r"kernel_\w+\.cpp", n)}
    assert kernels, f"csrc/ops/{family} has no kernel_<op>.cpp"
    assert have - kernels == expected, (sorted(have - kernels - expected), sorted(expected - have))


def test_the_page_lists_the_module_parts():
    assert {"foo", "_autocast", "_decompositions", "_check"} <= set(module_parts()), module_parts()


def test_one_python_module_per_family_folder():
    """torch_ext/_family_<family>.py for every csrc/ops/<family>, and none without its folder."""
    modules = sorted(p.stem[len("_family_"):] for p in PY_DIR.glob("_family_*.py"))
    assert modules == FAMILIES, (modules, FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_torch_ext_imports_each_family_module(family):
    """The one import line in torch_ext/_families.py: `import torch_ext` runs the module's registrations."""
    assert f"torch_ext._family_{family}" in sys.modules, f"torch_ext/_families.py does not import _family_{family}"


def forward_and_backward(family):
    """The family's forward op (the folder's name: the aclnn name of the forward op in snake_case) and its backward
    op (the one with the .out overload), from its library.cpp."""
    ops = defined_schemas(family)
    assert family in ops, f"csrc/ops/{family}/library.cpp defines no op {family}: {sorted(ops)}"
    return family, next(name[:-len(".out")] for name in ops if name.endswith(".out"))


def declared_cases(module):
    """{section: [case name]} of the --check cases `module` declares."""
    out = {}
    for section, makers in _check._DECLARED.items():
        for make in makers:
            if make.__module__ == module.__name__:
                made = make(torch.float32) if section in ("backward", "function") else make()
                out.setdefault(section, []).extend(c.name for c in made)
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_module_registers_what_the_page_says(family):
    forward, backward = forward_and_backward(family)
    path = PY_DIR / f"_family_{family}.py"
    module = importlib.import_module(f"torch_ext._family_{family}")
    source = path.read_text(encoding="utf-8")
    # the training function, written here, exported as torch_ext.functional.<op> and torch_ext.<op>
    fn = getattr(module, forward, None)
    assert callable(fn) and Path(fn.__code__.co_filename).name == path.name, f"no function {forward} here"
    assert getattr(torch_ext.functional, forward, None) is fn and getattr(torch_ext, forward, None) is fn
    assert forward in torch_ext.functional.__all__ and forward in torch_ext.__all__
    assert fn.__module__ == "torch_ext.functional"
    # the autocast rule of the forward op, declared here
    assert re.search(rf'_autocast\.(lower_precision|input_dtype)\("{forward}"\)', source), "no autocast rule"
    assert _autocast.RULES.get(forward) in ("lower_precision", "input_dtype")
    # the torchair decomposition of the forward op, declared here
    decomposition = torch_ext.torchair.decompositions().get(getattr(torch.ops.npu_ext, forward).default)
    assert decomposition is not None and decomposition.__module__ == module.__name__, "no torchair decomposition"
    # the --check cases: the backward op, and the training function forward and backward
    cases = declared_cases(module)
    assert any(name.startswith(f"{backward} ") for name in cases.get("backward", [])), cases
    assert any(name.startswith(f"torch_ext.{forward} ") for name in cases.get("function", [])), cases


def test_the_modules_are_written_in_the_family_modules():
    """Every torch_ext.nn module (convert aside) is a family's, exported under torch_ext.nn."""
    names = [n for n in torch_ext.nn.__all__ if n != "convert"]
    assert len(names) >= 4, names
    for name in names:
        cls = getattr(torch_ext.nn, name)
        assert cls.__module__ == "torch_ext.nn", (name, cls.__module__)
        where = Path(cls.forward.__code__.co_filename)
        assert where.name.startswith("_family_"), (name, str(where))


def test_the_files_outside_the_folder_exist():
    names = outside_files()
    assert len(names) >= 8 and "torch_ext/_families.py" in names, names
    for name in names:
        assert (ROOT / name.rstrip("/")).exists(), name


def test_the_folders_register_every_op_and_no_other():
    """The folders' schemas are torch.ops.npu_ext's operators (besides the core's introspection ops), each family one
    forward op and one backward op with its .out overload, and the backward ops are the sample table's."""
    defined = {}
    for family in FAMILIES:
        ops = defined_schemas(family)
        assert len(ops) == 3 and sum(name.endswith(".out") for name in ops) == 1, (family, sorted(ops))
        defined.update(ops)
    for name, schema in defined.items():
        op, _, overload = name.partition(".")
        registered = getattr(getattr(torch.ops.npu_ext, op), overload or "default")
        assert registered._schema == torch._C.parse_schema("npu_ext::" + schema), (name, str(registered._schema))
    backward = {name[:-len(".out")] for name in defined if name.endswith(".out")}
    assert backward == set(samples.OPS), (sorted(backward), sorted(samples.OPS))


def test_readme_operator_table_names_every_backward_op():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Operators"):]
    quoted = set(re.findall(r"^\| aclnn\w+[^|]*\| `(\w+)` \|", table, re.M))
    assert quoted == set(samples.OPS), (sorted(quoted), sorted(samples.OPS))


def declared_entry_points():
    names = set()
    for path in OPS_DIR.glob("*/npu.cpp"):
        names |= set(re.findall(r"NPU_EXT_ACLNN\(\s*\w+,\s*\w+,\s*(aclnn\w+),", path.read_text(encoding="utf-8")))
    return names


def test_every_declared_aclnn_entry_point_is_modelled_and_documented():
    declared = declared_entry_points()
    assert len(declared) >= 10, declared
    fake = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests" / "fake_cann" / "opapi").rglob("*.cpp"))
    npu_md = (ROOT / "docs" / "npu.md").read_text(encoding="utf-8")
    for name in sorted(declared):
        assert re.search(rf"\b{name}GetWorkspaceSize\(", fake), f"{name}: no model in tests/fake_cann/opapi"
        assert name in npu_md, f"{name}: not in docs/npu.md"
