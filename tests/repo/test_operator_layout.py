"""docs/adding-an-operator.md against the tree: each operator family's folder holds the files the page lists, and no
others; the files it names outside the folder exist; the schemas the folders register are the ops torch.ops.npu_ext
has, the sample table's ops and README's operator table; every aclnn entry point the NPU sources declare is modelled
by the fake CANN and named in docs/npu.md."""

import re
from pathlib import Path

import pytest
import torch

import paths
import torch_ext  # noqa: F401  (registers the ops)
from torch_ext.testing import samples

pytestmark = pytest.mark.arch_independent

ROOT = Path(paths.ROOT)
OPS_DIR = ROOT / "csrc" / "ops"
PAGE = (ROOT / "docs" / "adding-an-operator.md").read_text(encoding="utf-8")
FAMILIES = sorted(p.name for p in OPS_DIR.iterdir() if p.is_dir())


def page_table(marker):
    """The first-column cells (backticked names) of the table after `marker` in the page."""
    table = PAGE[PAGE.index(marker):].split("\n", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| ([^|]+) \|", table, re.M)[1:]  # the header aside
    return [name for row in rows if "---" not in row for name in re.findall(r"`([^`]+)`", row)]


def folder_files():
    return page_table("<!-- the operator folder")


def outside_files():
    return page_table("<!-- the files outside the folder")


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


def test_the_files_outside_the_folder_exist():
    names = outside_files()
    assert len(names) >= 10, names
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
    fake = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests" / "fake_cann" / "opapi").glob("*.cpp"))
    npu_md = (ROOT / "docs" / "npu.md").read_text(encoding="utf-8")
    for name in sorted(declared):
        assert re.search(rf"\b{name}GetWorkspaceSize\(", fake), f"{name}: no model in tests/fake_cann/opapi"
        assert name in npu_md, f"{name}: not in docs/npu.md"
