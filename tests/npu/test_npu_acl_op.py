"""The acl_op (TBE single-operator) route of the real torch_npu on the fake CANN of ``make test-npu``.

torch_npu's OpCommand describes an operator's inputs and outputs with the ACL descriptor API (aclCreateTensorDesc,
aclSetTensorFormat / aclSetTensorShape, aclCreateDataBuffer, aclopCreateAttr / aclopSetAttr*) and launches it with
aclopCompileAndExecute(V2); the fake runtime (tests/fake_cann/acl_op_route.cpp) keeps those objects and libopapi.so
(tests/fake_cann/opapi/acl_op.cpp) computes the op types the Megatron / MindSpeed GPT step sends there (LogicalNot,
LogicalAnd, LogicalOr), refusing any other with ACL_ERROR_OP_NOT_FOUND, each launch counted as "acl_op <type>".

* The ACL descriptor API driven directly (ctypes): the storage shape and format and the data buffer's address are what
  the kernel reads and writes; the refusals (an unknown op type, input count, dtype, private format, short buffer).
* torch_npu with jit compile on (``torch.npu.set_compile_mode(jit_compile=True)``, which sends every op-plugin kernel
  to acl_op on every release): ``~x``, ``logical_not(_)``, ``&``, ``|`` (broadcast) on bool npu tensors against numpy,
  one launch each.
* The default route: MindSpeed's vocab-parallel cross-entropy mask (``masked_target *= ~target_mask``), which on the
  fake takes acl_op LogicalNot (op-plugin's DO_COMPATIBILITY: the fake libopapi has no aclnnBitwiseNot), against numpy.
* An op type without a fake kernel (``torch_npu.npu_broadcast``: op-plugin's acl_op BroadcastTo only) raises an error
  naming it, and aclGetRecentErrMsg says why.

The torch_npu cases run in subprocesses: the compile mode is process-wide and a refused launch leaves torch_npu's
task queue in its fatal state. Run: ``make test-npu NPU_TESTS=tests/npu/test_npu_acl_op.py``. Skipped (the whole module)
where torch_npu cannot be imported or torch_ext did not load its NPU kernels, or on a real CANN (no fake counters);
under make test-npu a skip is a failure.
"""

import ctypes
import json
import subprocess
import sys

import numpy as np
import pytest

import fake_cann_lib
import npu_backend
import runner  # noqa: E402

_AVAILABLE, _REASON = npu_backend.npu_device_available()


_RT = fake_cann_lib.runtime() if _AVAILABLE else None
pytestmark = pytest.mark.skipif(_RT is None, reason=_REASON or "not the fake CANN (no fake_cann_count)")

ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_OP_INPUT_NOT_MATCH = 100021
ACL_ERROR_OP_NOT_FOUND = 100024
ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026
ACL_ERROR_FORMAT_NOT_MATCH = 100027
ACL_BOOL, ACL_FLOAT = 12, 0
ACL_FORMAT_NCHW, ACL_FORMAT_ND, ACL_FORMAT_FRACTAL_NZ = 0, 2, 29
MODELLED = ["LogicalNot", "LogicalAnd", "LogicalOr"]


# ----------------------------------------------------------------------------------------------------------
# The descriptor API, driven directly
class Acl:
    """ctypes prototypes of the ACL functions the tests call (acl_base_mdl.h, acl_base_rt.h, acl_op_compiler.h)."""

    def __init__(self, rt):
        p, i, i64p, sz = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t
        self.rt = rt
        for name, res, args in [
                ("aclCreateTensorDesc", p, [i, i, i64p, i]),
                ("aclSetTensorFormat", i, [p, i]),
                ("aclSetTensorShape", i, [p, i, i64p]),
                ("aclDestroyTensorDesc", None, [p]),
                ("aclGetTensorDescNumDims", sz, [p]),
                ("aclGetTensorDescDimV2", i, [p, sz, i64p]),
                ("aclGetTensorDescType", i, [p]),
                ("aclGetTensorDescFormat", i, [p]),
                ("aclCreateDataBuffer", p, [p, sz]),
                ("aclGetDataBufferAddr", p, [p]),
                ("aclGetDataBufferSizeV2", sz, [p]),
                ("aclDestroyDataBuffer", i, [p]),
                ("aclopCreateAttr", p, []),
                ("aclopSetAttrInt", i, [p, ctypes.c_char_p, ctypes.c_int64]),
                ("aclopDestroyAttr", None, [p]),
                ("aclopCompileAndExecute", i, [ctypes.c_char_p, i, ctypes.POINTER(p), ctypes.POINTER(p), i,
                                               ctypes.POINTER(p), ctypes.POINTER(p), p, i, i, ctypes.c_char_p, p]),
                ("aclGetRecentErrMsg", ctypes.c_char_p, []),
                ("fake_cann_count", ctypes.c_int64, [ctypes.c_char_p])]:
            fn = getattr(rt, name)
            fn.restype, fn.argtypes = res, args
        self.owned = []

    def desc(self, dtype, dims, fmt=ACL_FORMAT_ND, storage=None, storage_format=None):
        """A descriptor of `dims` (the original shape); `storage` / `storage_format` set with aclSetTensorShape /
        aclSetTensorFormat as torch_npu's OpCommand does."""
        d = self.rt.aclCreateTensorDesc(dtype, len(dims), (ctypes.c_int64 * len(dims))(*dims), fmt)
        assert d
        if storage is not None:
            assert self.rt.aclSetTensorShape(d, len(storage), (ctypes.c_int64 * len(storage))(*storage)) == 0
        if storage_format is not None:
            assert self.rt.aclSetTensorFormat(d, storage_format) == 0
        self.owned.append(("desc", d))
        return d

    def buffer(self, array, offset_bytes=0, size=None):
        """A data buffer at `offset_bytes` into the numpy array's memory."""
        addr = array.ctypes.data + offset_bytes
        b = self.rt.aclCreateDataBuffer(addr, array.nbytes - offset_bytes if size is None else size)
        assert b and self.rt.aclGetDataBufferAddr(b) == addr
        self.owned.append(("buffer", b))
        return b

    def execute(self, op, inputs, outputs, attr=None):
        """aclopCompileAndExecute(op, [(desc, buffer)], [(desc, buffer)], attr) -> (aclError, launches counted)."""
        arr = lambda items: (ctypes.c_void_p * max(1, len(items)))(*items)  # noqa: E731
        key = f"acl_op {op}".encode()
        before = self.rt.fake_cann_count(key)
        ret = self.rt.aclopCompileAndExecute(op.encode(), len(inputs), arr([d for d, _ in inputs]),
                                             arr([b for _, b in inputs]), len(outputs), arr([d for d, _ in outputs]),
                                             arr([b for _, b in outputs]), attr, 0, 0, None, None)
        return ret, self.rt.fake_cann_count(key) - before

    def error(self):
        return self.rt.aclGetRecentErrMsg().decode()

    def release(self):
        for kind, h in self.owned:
            if kind == "desc":
                self.rt.aclDestroyTensorDesc(h)
            else:
                assert self.rt.aclDestroyDataBuffer(h) == 0
        self.owned = []


@pytest.fixture
def acl():
    a = Acl(_RT)
    yield a
    a.release()


def test_descriptor_api_keeps_what_torch_npu_sets(acl):
    """The original shape and format are what aclGetTensorDesc* report (torch_npu reads an output's shape back
    with aclGetTensorDescDimV2); the storage ones set after them do not change that; a buffer keeps its address and
    size."""
    d = acl.desc(ACL_BOOL, [2, 3], ACL_FORMAT_NCHW, storage=[6], storage_format=ACL_FORMAT_ND)
    assert acl.rt.aclGetTensorDescType(d) == ACL_BOOL
    assert acl.rt.aclGetTensorDescFormat(d) == ACL_FORMAT_NCHW
    assert acl.rt.aclGetTensorDescNumDims(d) == 2
    dim = ctypes.c_int64()
    assert acl.rt.aclGetTensorDescDimV2(d, 1, ctypes.byref(dim)) == 0 and dim.value == 3
    assert acl.rt.aclGetTensorDescDimV2(d, 2, ctypes.byref(dim)) == ACL_ERROR_INVALID_PARAM
    data = np.zeros(16, dtype=np.uint8)
    b = acl.buffer(data, 4, 10)
    assert acl.rt.aclGetDataBufferAddr(b) == data.ctypes.data + 4 and acl.rt.aclGetDataBufferSizeV2(b) == 10
    attr = acl.rt.aclopCreateAttr()
    assert attr and acl.rt.aclopSetAttrInt(attr, b"dst_type", 3) == 0
    acl.rt.aclopDestroyAttr(attr)


def test_kernel_reads_the_storage_shape_at_the_buffer_address(acl):
    """LogicalNot over the storage shape ([6]: the original shape [2, 3] is not what the kernel sees) from and to the
    buffers' addresses (offsets into larger arrays); the bytes around them untouched; one launch counted."""
    x = np.array([7, 7, 1, 0, 0, 1, 1, 0, 7], dtype=np.bool_)  # the operand is x[2:8]
    y = np.zeros(10, dtype=np.uint8)  # the result goes to y[3:9]
    y[:] = 5
    ret, launches = acl.execute("LogicalNot",
                                [(acl.desc(ACL_BOOL, [2, 3], storage=[6]), acl.buffer(x, 2, 6))],
                                [(acl.desc(ACL_BOOL, [2, 3], storage=[6]), acl.buffer(y, 3, 6))])
    assert (ret, launches) == (0, 1), acl.error()
    assert y[3:9].tolist() == np.logical_not(x[2:8]).astype(np.uint8).tolist()
    assert y[:3].tolist() == [5, 5, 5] and y[9] == 5


def test_binary_kernels_broadcast(acl):
    """LogicalAnd / LogicalOr broadcast their inputs (NumPy rules) into the output's storage shape."""
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 1, 5)) < 0.5, rng.random((4, 5)) < 0.5
    for op, ref in [("LogicalAnd", np.logical_and), ("LogicalOr", np.logical_or)]:
        out = np.zeros((3, 4, 5), dtype=np.bool_)
        ret, launches = acl.execute(op, [(acl.desc(ACL_BOOL, list(a.shape)), acl.buffer(a)),
                                         (acl.desc(ACL_BOOL, list(b.shape)), acl.buffer(b))],
                                    [(acl.desc(ACL_BOOL, [3, 4, 5]), acl.buffer(out))])
        assert (ret, launches) == (0, 1), acl.error()
        np.testing.assert_array_equal(out, ref(a, b))


def test_refusals_name_the_op_and_the_reason(acl):
    """CANN's error codes for what the fake cannot run, each launch still counted, the reason in aclGetRecentErrMsg:
    an unknown op type, a wrong number of inputs, a dtype the kernel lacks, a private storage format, a buffer
    shorter than its storage shape, an output of the wrong shape."""
    x = np.array([True, False, True, False])
    f = np.zeros(4, dtype=np.float32)
    out = np.zeros(4, dtype=np.bool_)

    def io(arr, dtype=ACL_BOOL, **kw):
        return acl.desc(dtype, list(arr.shape), **kw), acl.buffer(arr)

    ret, launches = acl.execute("NoSuchOp", [io(x)], [io(out)])
    assert (ret, launches) == (ACL_ERROR_OP_NOT_FOUND, 1)
    assert "NoSuchOp" in acl.error() and "not found" in acl.error()
    assert acl.execute("LogicalAnd", [io(x)], [io(out)])[0] == ACL_ERROR_OP_INPUT_NOT_MATCH
    assert "LogicalAnd" in acl.error()
    assert acl.execute("LogicalNot", [io(f, ACL_FLOAT)], [io(out)])[0] == ACL_ERROR_UNSUPPORTED_DATA_TYPE
    assert "DT_BOOL" in acl.error()
    ret = acl.execute("LogicalNot", [io(x, storage_format=ACL_FORMAT_FRACTAL_NZ)], [io(out)])[0]
    assert ret == ACL_ERROR_FORMAT_NOT_MATCH and "format 29" in acl.error()
    short = (acl.desc(ACL_BOOL, [4]), acl.buffer(x, 0, 3))
    assert acl.execute("LogicalNot", [short], [io(out)])[0] == ACL_ERROR_INVALID_PARAM
    assert "3 bytes" in acl.error()
    assert acl.execute("LogicalNot", [io(x)], [io(np.zeros(5, dtype=np.bool_))])[0] == ACL_ERROR_INVALID_PARAM
    assert "[5]" in acl.error() and "[4]" in acl.error()
    assert out.tolist() == [False] * 4  # nothing written by a refused launch


# ----------------------------------------------------------------------------------------------------------
# torch_npu's own calls, each in a subprocess
_PRELUDE = """
import ctypes, json, sys
import torch, torch_npu
import fake_cann_lib
rt = fake_cann_lib.runtime()
OPS = %r
def launches():
    return {op: rt.fake_cann_count(("acl_op " + op).encode()) for op in OPS}
def run(fn, *args):
    before = launches()
    got = fn(*[a.npu() for a in args])
    torch.npu.synchronize()
    after = launches()
    return {"value": got.cpu().tolist(), "launches": {k: after[k] - before[k] for k in OPS if after[k] != before[k]}}
""" % (MODELLED + ["BroadcastTo"],)


def _subprocess(body, timeout=300):
    proc = subprocess.run([sys.executable, "-c", _PRELUDE + body], env=runner.env(), capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


_A = (np.arange(60) * 7 % 5 < 2).reshape(3, 4, 5)
_B = (np.arange(20) * 3 % 4 == 1).reshape(4, 5)
_C = (np.arange(15) % 3 == 0).reshape(3, 1, 5)


def test_jit_compile_sends_logical_ops_to_acl_op():
    """With jit compile on, torch_npu's logical ops on bool npu tensors are acl_op launches, one each, computed as
    numpy computes them (broadcast included)."""
    out = _subprocess("""
torch.npu.set_compile_mode(jit_compile=True)
a, b, c = (torch.tensor(v) for v in %s)
res = {
  "invert": run(lambda x: ~x, a),
  "logical_not": run(torch.logical_not, a),
  "logical_not_": run(lambda x: x.logical_not_(), a),
  "and": run(lambda x, y: x & y, a, b),
  "logical_and": run(torch.logical_and, c, b),
  "or": run(lambda x, y: x | y, c, a),
}
print(json.dumps(res))
""" % repr([_A.tolist(), _B.tolist(), _C.tolist()]))
    expected = {
        "invert": (np.logical_not(_A), "LogicalNot"),
        "logical_not": (np.logical_not(_A), "LogicalNot"),
        "logical_not_": (np.logical_not(_A), "LogicalNot"),
        "and": (np.logical_and(_A, _B), "LogicalAnd"),
        "logical_and": (np.logical_and(_C, _B), "LogicalAnd"),
        "or": (np.logical_or(_C, _A), "LogicalOr"),
    }
    for case, (value, op) in expected.items():
        np.testing.assert_array_equal(np.array(out[case]["value"]), value, err_msg=case)
        assert out[case]["launches"] == {op: 1}, (case, out[case])


def test_mindspeed_cross_entropy_mask_on_the_default_route():
    """MindSpeed's vocab-parallel cross entropy: ``masked_target *= ~target_mask`` on npu tensors (torch_npu's
    default compile mode). On the fake, ``~`` on a bool tensor is acl_op LogicalNot (op-plugin's DO_COMPATIBILITY:
    no aclnnBitwiseNot in the fake libopapi)."""
    target = (np.arange(24) * 5 % 23).reshape(4, 6)
    start, end = 6, 14
    out = _subprocess("""
target = torch.tensor(%r)
def mask_target(t):
    target_mask = (t < %d) | (t >= %d)
    masked_target = t.clone() - %d
    masked_target *= ~target_mask
    return masked_target
print(json.dumps(run(mask_target, target)))
""" % (target.tolist(), start, end, start))
    mask = (target < start) | (target >= end)
    np.testing.assert_array_equal(np.array(out["value"]), (target - start) * ~mask)
    assert out["launches"] == {"LogicalNot": 1}, out


def test_unknown_op_type_is_refused_naming_it():
    """``torch_npu.npu_broadcast`` is acl_op BroadcastTo on every release, which the fake does not model: the launch
    is counted and fails with ACL_ERROR_OP_NOT_FOUND; torch_npu's error names the op, aclGetRecentErrMsg says why."""
    out = _subprocess("""
x = torch.tensor([1.0, 2.0, 3.0]).npu()
try:
    y = torch_npu.npu_broadcast(x, [2, 3])
    torch.npu.synchronize()
    err = None
except RuntimeError as e:
    err = str(e)
print(json.dumps({"error": err, "why": rt.aclGetRecentErrMsg().decode(), "launches": launches()}))
""")
    assert out["error"] is not None, out
    assert "BroadcastTo" in out["error"], out["error"][-2000:]
    assert out["why"].startswith("acl_op BroadcastTo: op type not found"), out["why"]
    assert out["launches"]["BroadcastTo"] == 1, out
