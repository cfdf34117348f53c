"""setup.py's choice of how _C_npu calls aclnn (NPU_EXT_OP_API_EXTENSION, read by csrc/core/npu/torch_npu_compat.h),
made from the installed torch_npu's headers and not from its version: op-plugin's extension API where the include
directory ships both npu_cpp_extension.h and op_api_common_base.h (torch_npu 2.7 from the release table's
extension_api_from), CANN's C API (torch_npu 2.6's path) where it ships neither or one alone (2.6, and the .postN of
torch_npu 2.7 before extension_api_from).

The decision function is taken out of setup.py (its source, by name) and run on fake include trees: no build, no
torch_npu, nothing of setup.py's module-level work (which imports torch and calls setup())."""

import ast
import os
import pathlib

import pytest
import paths

ROOT = pathlib.Path(paths.ROOT)
NAMES = ("OP_API_EXTENSION_HEADERS", "_op_api_extension")


def _decision():
    """setup.py's _op_api_extension with the constant it reads, executed alone."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    keep = [n for n in tree.body
            if (isinstance(n, ast.FunctionDef) and n.name in NAMES)
            or (isinstance(n, ast.Assign) and any(getattr(t, "id", None) in NAMES for t in n.targets))]
    assert len(keep) == len(NAMES), "setup.py no longer defines " + ", ".join(NAMES)
    namespace = {"os": os}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "setup.py", "exec"), namespace)
    return namespace["_op_api_extension"], namespace["OP_API_EXTENSION_HEADERS"]


DECIDE, HEADERS = _decision()


def _include(tmp_path, headers):
    """A torch_npu include directory holding `headers` (paths under third_party/op-plugin) and op-plugin's ops.h,
    which every release ships."""
    include = tmp_path / "torch_npu" / "include"
    base = include / "third_party" / "op-plugin"
    for h in ("op_plugin/include/ops.h", *headers):
        (base / h).parent.mkdir(parents=True, exist_ok=True)
        (base / h).write_text("#pragma once\n")
    return str(include)


def test_the_headers_are_the_ones_torch_npu_compat_h_includes():
    compat = (ROOT / "csrc" / "core" / "npu" / "torch_npu_compat.h").read_text(encoding="utf-8")
    assert '#include "op_plugin/include/npu_cpp_extension.h"' in compat
    assert set(HEADERS) == {"op_plugin/include/npu_cpp_extension.h", "op_plugin/utils/op_api_common_base.h"}
    assert "#if NPU_EXT_OP_API_EXTENSION" in compat
    assert '("NPU_EXT_OP_API_EXTENSION", str(_op_api_extension(include)))' in (ROOT / "setup.py").read_text()


def test_both_headers_take_the_extension_api(tmp_path):
    """torch_npu 2.7 from the release table's extension_api_from, and every later release."""
    assert DECIDE(_include(tmp_path, HEADERS)) == 1


def test_no_headers_take_cann_s_c_api(tmp_path):
    """torch_npu 2.6 (ops.h alone), and the .postN of 2.7 before extension_api_from."""
    assert DECIDE(_include(tmp_path, [])) == 0


@pytest.mark.parametrize("header", ["op_plugin/include/npu_cpp_extension.h", "op_plugin/utils/op_api_common_base.h"])
def test_one_header_alone_takes_cann_s_c_api(tmp_path, header):
    """Both are needed: the extension functions and hit_cache_ext's template (and its form's check)."""
    assert DECIDE(_include(tmp_path, [header])) == 0


def test_a_missing_include_directory_takes_cann_s_c_api(tmp_path):
    assert DECIDE(str(tmp_path / "nothing")) == 0
