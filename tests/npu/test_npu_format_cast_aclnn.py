"""torch_npu's format cast through CANN's aclnnNpuFormatCast, and the extension's private-format inputs on it, in the
real torch_npu runtime on the fake CANN (make test-npu, and the release rows of make test-versions).

Which route torch_npu's npu_format_cast takes (Ascend/pytorch torch_npu/csrc/aten/common/FormatCastKernelNpu.cpp,
MaybeUseAclnnNpuFormatCast, 2.13 and 2.14): on an Ascend950 always aclnnNpuFormatCast (IsAclnnOnly); on an Atlas
A2 / A3 aclnnNpuFormatCast when CANN is 9.1.0 or later (IsAclnnFormatCastSupported: IsGteCANNVersion("9.1.0",
"CANN"), read with aclsysGetCANNVersion) and the source is contiguous or in a base format, otherwise the acl_op
Identity. A non-contiguous tensor in a private format is refused on the aclnn route by torch_npu itself
(format_cast_impl_out_npu_aclnn: "npu_format_cast aclnn interface does not support non-contiguous tensor with
internal format ..."), which an Ascend950 reaches and an A2 / A3 does not (it falls back to acl_op first).
The wheels of the release rows before torch_npu 2.13 have no A2 / A3 aclnn route (their release branches'
FormatCastKernelNpu.cpp asks aclnn only on IsAclnnOnly; observed here on the fake with CANN 9.1.0 for every row
before 2.13 but those of torch 2.7 and 2.8): on those rows the tests below expect acl_op on an A2 at any CANN version.

The fake CANN reports the CANN version $NPU_FAKE_CANN_VERSION (default 8.5.0: the acl_op route on an A2) and
models aclnnNpuFormatCast after CANN 9.1.0 (tests/fake_cann/opapi/format_cast.cpp). The version and the SoC are read
once per process, so each machine here is its own process (tests/support/format_cast_worker.py).
"""

import json
import os
import subprocess
import sys

import pytest

import paths
from format_cast_worker import FRACTAL_NZ, NC1HWC0, ROUTE, cases

FRACTAL_NZ_C0_16 = 50
A2, ASCEND950 = "Ascend910B3", "Ascend950PR_9599"
REFUSED = "npu_format_cast aclnn interface does not support non-contiguous tensor with internal format"
# torch_npu 2.8 refuses the view earlier, when it is copied to a contiguous tensor: its clone takes no
# internal format on an aclnn-only SoC (found by make test-versions on that row)
CLONE_REFUSED = ("Current device only support aclnn operator, and current operator "
                 "at_npu::native::NPUNativeFunctions::clone do not support internal format")


def _npu_loaded():
    import torch_ext

    return torch_ext._npu.LOADED


pytestmark = [pytest.mark.skipif(not _npu_loaded(), reason="needs torch_ext._C_npu (make test-npu)"),
              pytest.mark.subprocess]


def run(scenario, soc=A2, cann=None, without=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_FAKE_")}
    env["NPU_FAKE_SOC"] = soc
    if cann is not None:
        env["NPU_FAKE_CANN_VERSION"] = cann
    if without:  # a CANN whose op package lacks these entry points (tests/fake_cann/build.py --without)
        lib = subprocess.run([sys.executable, paths.FAKE_CANN_BUILD, "--without", without], check=True,
                             capture_output=True, text=True).stdout.splitlines()[-1]
        env["LD_LIBRARY_PATH"] = lib + os.pathsep + env["LD_LIBRARY_PATH"]
    proc = subprocess.run([sys.executable, paths.worker("format_cast_worker.py"), scenario], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _aclnn(casts, n):
    return {k: casts[k] for k in ROUTE} == {k: n for k in ROUTE}


def _a2_aclnn_route():
    """Whether this torch_npu casts on an A2 / A3 with aclnnNpuFormatCast from CANN 9.1.0 (2.13 and later)."""
    from importlib.metadata import version

    return tuple(int(p) for p in version("torch-npu").split(".")[:2]) >= (2, 13)


def _route(casts, n):
    """n casts on the route this torch_npu takes on an A2 with CANN 9.1.0."""
    if _a2_aclnn_route():
        return _aclnn(casts, n) and casts["acl_op Identity"] == 0
    return _aclnn(casts, 0) and casts["acl_op Identity"] == n


def test_cann_9_1_sends_the_a2_format_cast_to_aclnn():
    """On an Atlas A2 with CANN 9.1.0 torch_npu 2.13 / 2.14 cast to and from FRACTAL_NZ and NC1HWC0 with
    aclnnNpuFormatCast (one call of each entry point per cast), never with the acl_op Identity (earlier releases:
    the Identity); the layouts are CANN's."""
    out = run("route", cann="9.1.0")
    for name, r in out.items():
        assert r["values"], name
        assert _route(r["to"], 1) and _route(r["back"], 2), (name, r)
    assert out["nz-fp32"]["format"] == out["nz-bf16"]["format"] == FRACTAL_NZ
    assert out["5hd-fp32"]["format"] == NC1HWC0
    assert out["nz-fp32"]["layout"] and out["nz-bf16"]["layout"]


@pytest.mark.parametrize("cann", ["8.5.0", "9.0.0"])
def test_before_cann_9_1_the_a2_format_cast_stays_on_acl_op(cann):
    """Below CANN 9.1.0 (the fake's default is 8.5.0) the same casts take the acl_op Identity: aclnnNpuFormatCast is
    not called although the fake exports it."""
    out = run("route", cann=cann)
    for name, r in out.items():
        assert r["values"], name
        assert _aclnn(r["to"], 0) and r["to"]["acl_op Identity"] == 1, (name, r)
        assert _aclnn(r["back"], 0) and r["back"]["acl_op Identity"] == 2, (name, r)


def test_without_the_entry_point_cann_9_1_stays_on_acl_op():
    """torch_npu also asks that both aclnnNpuFormatCast and its size helper resolve (IsAclnnNpuFormatCastExist): a
    CANN 9.1 whose op package lacks the operator keeps the acl_op route."""
    out = run("route", cann="9.1.0", without="aclnnNpuFormatCast")
    for name, r in out.items():
        assert r["values"] and r["to"]["acl_op Identity"] == 1 and r["to"]["aclnnNpuFormatCast"] == 0, (name, r)


def test_private_format_inputs_on_the_aclnn_cast_route():
    """The extension's operators with private-format inputs on an A2 with CANN 9.1.0: the result is the base-format
    one, bit for bit; each private input was cast by aclnnNpuFormatCast (no acl_op; before torch_npu 2.13 by the
    acl_op Identity), the caller's tensors kept."""
    out = run("ops", cann="9.1.0")
    assert len(out) == len(cases())
    for name, r in out.items():
        assert r["equal"] and r["kept"] and r["formats"] in ([FRACTAL_NZ], [NC1HWC0]), (name, r)
        assert _route(r["casts"], r["private"]), (name, r)


def test_non_contiguous_private_views_fall_back_to_acl_op_on_a2():
    """A non-contiguous view of a FRACTAL_NZ tensor on an A2 with CANN 9.1.0: torch_npu's cast does not take aclnn
    (MaybeUseAclnnNpuFormatCast's guard) but the acl_op Identity over the whole storage, and the extension's result is
    right."""
    out = run("views", cann="9.1.0")
    assert out.pop("after")
    for name, r in out.items():
        assert r.get("equal"), (name, r)
        assert _aclnn(r["casts"], 0) and r["casts"]["acl_op Identity"] == 1, (name, r)


@pytest.mark.ascend950
@pytest.mark.parametrize("cann", ["8.5.0", "9.1.0"])
def test_on_ascend950_a_non_contiguous_private_view_is_refused(cann):
    """On an Ascend950 (aclnn only, whatever the CANN version) torch_npu makes an NZ tensor with aclnnNpuFormatCast
    (2.13 / 2.14: FRACTAL_NZ_C0_16 for fp32) and refuses to cast a non-contiguous view of it
    (format_cast_impl_out_npu_aclnn; torch_npu 2.8 already in its clone), before the operator's phase 1: the
    extension's operator raises torch_npu's error, and the process goes on working. (What the extension does about it
    is not decided here: the acl_op route that would cast the whole storage is gone there.)"""
    out = run("views", soc=ASCEND950, cann=cann)
    assert out.pop("after")
    nz = " FRACTAL_NZ_C0_16." if _a2_aclnn_route() else " FRACTAL_NZ"
    for name, r in out.items():
        assert REFUSED + nz in r.get("error", "") or CLONE_REFUSED in r.get("error", ""), (name, r)
        assert r["casts"]["aclnnNpuFormatCastGetWorkspaceSize"] == 0 and r["casts"]["acl_op Identity"] == 0, (name, r)


@pytest.mark.ascend950
def test_on_ascend950_contiguous_private_inputs_take_aclnn():
    """On an Ascend950 the extension's contiguous FRACTAL_NZ inputs are cast by aclnnNpuFormatCast (at the fake's
    default CANN version: the SoC decides there), and the results are the base-format ones."""
    out = run("ops", soc=ASCEND950)
    assert len(out) == len(cases()) - 1  # NC1HWC0 on an Ascend950: not modelled by the fake (format_cast.cpp)
    for name, r in out.items():
        assert r["equal"] and r["kept"] and set(r["formats"]) <= {FRACTAL_NZ, FRACTAL_NZ_C0_16}, (name, r)
        assert _aclnn(r["casts"], r["private"]) and r["casts"]["acl_op Identity"] == 0, (name, r)


def test_the_fake_operator_refuses_a_non_contiguous_source():
    """The fake's aclnnNpuFormatCastGetWorkspaceSize as CANN 9.1's: a non-contiguous ND source is refused with 161002
    (ACLNN_ERR_PARAM_INVALID) and the reason; the contiguous one is cast to CANN's FRACTAL_NZ layout."""
    out = run("fake_contiguity", cann="9.1.0")
    assert out["non-contiguous"]["status"] == 161002, out
    assert "srcTensor must be contiguous" in out["non-contiguous"]["message"], out
    assert out["contiguous"] == {"status": 0, "message": "", "launch": 0, "layout": True}, out
