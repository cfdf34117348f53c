"""nnopbase's executor cache (the "PTA cache") as the fake CANN models it (tests/fake_cann/opapi/pta_cache.cpp), each
rule of the real one checked on its own (make test-npu, and every release row of make test-versions; skipped
elsewhere). The rules, from CANN's opbase (src/nnopbase/common/utils/op_cache.cpp,
src/nnopbase/composite_op/aclnn_engine/op_executor.cpp; docs/npu.md#the-executor-cache):
* per thread (thread_local OpExecCacheManager): a key kept on one thread misses on another;
* at most K_CACHE_LIMIT = 10000 entries per thread, after which (cacheHasFull_) nothing more is cached there;
* an existing hash is never replaced;
* a hit also checks the API's name;
* an entry is usable only after its first launch succeeded; a failed launch, or an executor destroyed without a
  launch, leaves its key unusable for good on that thread.

Most tests drive the fake libopapi.so's C ABI with ctypes the way op-plugin's hit_cache does (CanUsePTACache,
InitPTACacheThreadLocal, AddTensorAddrToCachedList, SetPTAHashKey, PTAGetExecCache, then phase 1 and the launch),
with keys of their choice: that makes 10000 distinct keys cheap and two operators under one key possible. They run
on every release (the fake is the same; torch_npu 2.6 just never calls it). The per-thread rule is also checked
through the extension's ops, on the releases where torch_npu drives the cache (op-plugin's extension API).
"""

import ctypes
import threading

import pytest
import torch

import fake_cann_lib
import torch_ext

import npu_backend  # noqa: E402

pytestmark = pytest.mark.skipif(not torch_ext._npu.LOADED, reason="needs torch_ext._C_npu (make test-npu)")

P = ctypes.c_void_p
ACL_FLOAT, ACL_FORMAT_ND = 0, 2
INVALID = 161002
K_CACHE_LIMIT = 10000  # op_cache.cpp


class Nnopbase:
    """The fake libopapi.so (the handle torch_npu loaded: the same cache and counters), driven as op-plugin's
    hit_cache drives nnopbase, for four operators: two cached (GeluV2, GeluBackwardV2, composite executors), two
    not (Logit, LogitGrad, generated)."""

    SIGNATURES = {  # phase 1's arguments before (workspaceSize, executor)
        "aclnnGeluV2": [P, ctypes.c_int64, P],
        "aclnnLogit": [P, ctypes.c_double, P],
        "aclnnGeluBackwardV2": [P, P, ctypes.c_char_p, P],
        "aclnnLogitGrad": [P, P, ctypes.c_double, P],
    }

    def __init__(self):
        lib = self.lib = fake_cann_lib.opapi()
        lib.CanUsePTACache.restype = ctypes.c_bool
        lib.CanUsePTACache.argtypes = [ctypes.c_char_p]
        lib.AddTensorAddrToCachedList.argtypes = [P]
        lib.SetPTAHashKey.argtypes = [ctypes.c_uint64]
        lib.PTAGetExecCache.restype = P
        lib.PTAGetExecCache.argtypes = [ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)]
        for api, args in self.SIGNATURES.items():
            getattr(lib, api + "GetWorkspaceSize").argtypes = args + [ctypes.POINTER(ctypes.c_uint64),
                                                                      ctypes.POINTER(P)]
            getattr(lib, api).argtypes = [P, ctypes.c_uint64, P, P]

    def calls(self, key):
        return self.lib.fake_opapi_calls(key.encode())

    def entries(self):
        """The executors kept on the calling thread."""
        return self.lib.fake_opapi_cache_thread_entries()

    def reset(self):
        torch.npu.synchronize()
        self.lib.fake_opapi_reset()

    def _tensor(self, t):
        sizes = (ctypes.c_int64 * t.dim())(*t.shape)
        strides = (ctypes.c_int64 * t.dim())(*t.stride())
        storage = (ctypes.c_int64 * 1)(t.numel())
        return self.lib.aclCreateTensor(sizes, t.dim(), ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1,
                                        t.data_ptr())

    def call(self, api, args, key, launch="ok"):
        """One call of `api` under `key` as hit_cache makes it: the lookup, and on a miss phase 1 and the launch.
        `args`: phase 1's arguments (host fp32 tensors, contiguous; scalars). `launch`: "ok", "fail" (phase 2 with
        another workspace size than phase 1's: 161002) or "none" (aclDestroyAclOpExecutor instead). Returns "hit"
        or "phase 1"."""
        lib = self.lib
        assert lib.CanUsePTACache(api.encode())
        lib.InitPTACacheThreadLocal()
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        for t in tensors:
            lib.AddTensorAddrToCachedList(t.data_ptr())
        lib.SetPTAHashKey(key)
        size = ctypes.c_uint64(0)
        found = lib.PTAGetExecCache(key, ctypes.byref(size))
        descs = []
        try:
            if found:
                lib.UnInitPTACacheThreadLocal()  # as ExecuteCachedOp
                assert getattr(lib, api)(None, size.value, found, None) == 0
                return "hit"
            descs = [self._tensor(a) for a in tensors]
            it = iter(descs)
            converted = [next(it) if isinstance(a, torch.Tensor) else a for a in args]
            executor = P()
            assert getattr(lib, api + "GetWorkspaceSize")(*converted, ctypes.byref(size), ctypes.byref(executor)) == 0
            lib.UnInitPTACacheThreadLocal()
            workspace = ctypes.create_string_buffer(max(size.value, 1)) if size.value else None
            if launch == "ok":
                assert getattr(lib, api)(workspace, size.value, executor, None) == 0
            elif launch == "fail":
                assert getattr(lib, api)(workspace, size.value + 1, executor, None) == INVALID
            else:
                assert lib.aclDestroyAclOpExecutor(executor) == 0
            return "phase 1"
        finally:
            for d in descs:
                lib.aclDestroyTensor(d)


def _gelu(x):
    y = torch.empty_like(x)
    return y, ["aclnnGeluV2", [x, 0, y]]


def _gelu_grad(g, x, out=None):
    out = torch.empty_like(x) if out is None else out
    return out, ["aclnnGeluBackwardV2", [g, x, b"none", out]]


def _logit_grad(x, dy, out=None):
    out = torch.empty_like(x) if out is None else out
    return out, ["aclnnLogitGrad", [x, dy, -1.0, out]]


@pytest.fixture
def nnopbase():
    lib = Nnopbase()
    lib.reset()
    yield lib
    lib.reset()


def _on_a_thread(fn):
    """fn() on a new thread; its result (or its exception, raised here)."""
    box = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 (re-raised on the caller's thread)
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def test_only_composite_executors_are_kept(nnopbase):
    """GeluV2 and GeluBackwardV2 (CREATE_EXECUTOR) are kept and hit; Logit and LogitGrad (generated) are looked up,
    run phase 1 and are never kept (the full list, through torch_npu: test_npu_cache.py)."""
    x, dy = torch.rand(8) * 0.9 + 0.05, torch.randn(8)
    for api, args in [("aclnnGeluV2", [x, 0, torch.empty(8)]), ("aclnnLogit", [x, -1.0, torch.empty(8)]),
                      ("aclnnGeluBackwardV2", [dy, x, b"none", torch.empty(8)]),
                      ("aclnnLogitGrad", [x, dy, -1.0, torch.empty(8)])]:
        cached = api.startswith("aclnnGelu")
        assert [nnopbase.call(api, args, key=7) for _ in range(3)] == \
            (["phase 1", "hit", "hit"] if cached else ["phase 1"] * 3), api
        assert nnopbase.calls("cache not composite " + api) == (0 if cached else 3)
        nnopbase.reset()


def test_the_cache_is_per_thread(nnopbase):
    """A key kept on one thread misses on another, which keeps its own entry; each thread's hits compute with
    their own call's tensors."""
    x1, x2 = torch.randn(16), torch.randn(16)
    y, call = _gelu(x1)
    assert nnopbase.call(*call, key=11) == "phase 1" and nnopbase.entries() == 1

    def elsewhere():
        y2, call2 = _gelu(x2)
        first = nnopbase.call(*call2, key=11)
        entries = nnopbase.entries()
        y3, call3 = _gelu(x1)
        return first, entries, nnopbase.call(*call3, key=11), y2, y3

    first, entries, second, y2, y3 = _on_a_thread(elsewhere)
    assert (first, entries, second) == ("phase 1", 1, "hit"), "another thread's entry answered"
    assert nnopbase.calls("cache kept aclnnGeluV2") == 2
    assert torch.allclose(y2, torch.ops.npu_ext.gelu(x2, "none"), atol=1e-6) and torch.equal(y3, y)
    y4, call4 = _gelu(x2)
    assert nnopbase.call(*call4, key=11) == "hit" and torch.equal(y4, y2)


def test_at_most_10000_entries_per_thread(nnopbase):
    """On a new thread, 10000 distinct keys are kept (K_CACHE_LIMIT, the real limit); the 10001st is not (phase 1
    at every call), while the first and the 10000th still hit; another thread still caches."""
    x = torch.randn(4)

    def fill():
        y, call = _gelu(x)
        for key in range(1, K_CACHE_LIMIT + 1):
            if nnopbase.call(*call, key=key) != "phase 1":
                return f"key {key} hit before it was kept"
        kept = nnopbase.entries()
        over = [nnopbase.call(*call, key=K_CACHE_LIMIT + 1) for _ in range(2)]
        return kept, over, nnopbase.entries(), nnopbase.call(*call, key=1), nnopbase.call(*call, key=K_CACHE_LIMIT)

    kept, over, after, first, last = _on_a_thread(fill)
    assert kept == K_CACHE_LIMIT
    assert over == ["phase 1", "phase 1"] and after == K_CACHE_LIMIT, "an entry past the limit was kept"
    assert nnopbase.calls("cache full aclnnGeluV2") == 2
    assert (first, last) == ("hit", "hit")
    y, call = _gelu(x)
    assert [nnopbase.call(*call, key=K_CACHE_LIMIT + 1) for _ in range(2)] == ["phase 1", "hit"], \
        "the limit is per thread"


def test_an_existing_hash_is_never_replaced(nnopbase):
    """Phase 1 of a cached operator under a key the thread holds (another operator's entry: the API-name check makes
    the lookup a miss) keeps nothing: the first entry still answers its operator, and the second operator runs
    phase 1 at every call."""
    g, x = torch.randn(8), torch.randn(8)
    y, call = _gelu(x)
    assert nnopbase.call(*call, key=21) == "phase 1"
    for _ in range(2):
        out, call2 = _gelu_grad(g, x)
        assert nnopbase.call(*call2, key=21) == "phase 1"
        assert torch.allclose(out, torch.ops.npu_ext.gelu_backward_v2(g, x, "none"), atol=1e-6)
    assert nnopbase.calls("cache exists aclnnGeluBackwardV2") == 2
    y2, call3 = _gelu(x)
    assert nnopbase.call(*call3, key=21) == "hit", "the entry was replaced"
    assert torch.equal(y2, y) and nnopbase.entries() == 1


def test_a_hit_checks_the_api_name(nnopbase):
    """Another operator with the same tensor count under a kept key misses: GeluBackwardV2's executor is not
    launched for LogitGrad's call (its result is LogitGrad's)."""
    g, x01 = torch.randn(8), torch.rand(8) * 0.9 + 0.05
    _, call = _gelu_grad(g, x01)
    assert nnopbase.call(*call, key=31) == "phase 1"
    out, call2 = _logit_grad(x01, g)
    assert nnopbase.call(*call2, key=31) == "phase 1", "another operator's executor answered"
    assert nnopbase.calls("cache hit aclnnGeluBackwardV2") == 0
    assert nnopbase.calls("cache other api aclnnLogitGrad") == 1
    assert torch.allclose(out, torch.ops.npu_ext.logit_grad(x01, g, -1.0), atol=1e-5)


def test_an_entry_is_usable_only_after_its_first_launch(nnopbase):
    """Kept by phase 1, the entry misses until its launch succeeded; one destroyed without a launch never hits."""
    x = torch.randn(8)
    lib = nnopbase.lib
    assert lib.CanUsePTACache(b"aclnnGeluV2")
    lib.InitPTACacheThreadLocal()
    lib.AddTensorAddrToCachedList(x.data_ptr())
    y = torch.empty_like(x)
    lib.AddTensorAddrToCachedList(y.data_ptr())
    lib.SetPTAHashKey(41)
    size, executor = ctypes.c_uint64(0), P()
    assert not lib.PTAGetExecCache(41, ctypes.byref(size))
    tx, ty = nnopbase._tensor(x), nnopbase._tensor(y)
    assert lib.aclnnGeluV2GetWorkspaceSize(tx, 0, ty, ctypes.byref(size), ctypes.byref(executor)) == 0
    lib.UnInitPTACacheThreadLocal()
    assert nnopbase.entries() == 1
    y2, call = _gelu(x)
    assert nnopbase.call(*call, key=41) == "phase 1", "an entry answered before its launch"
    assert lib.aclnnGeluV2(None, size.value, executor, None) == 0
    lib.aclDestroyTensor(tx)
    lib.aclDestroyTensor(ty)
    assert torch.equal(y, y2)
    y3, call = _gelu(x)
    assert nnopbase.call(*call, key=41) == "hit" and torch.equal(y3, y)
    # destroyed without a launch: unusable for good
    _, call = _gelu(x)
    assert nnopbase.call(*call, key=42, launch="none") == "phase 1"
    for _ in range(2):
        _, call = _gelu(x)
        assert nnopbase.call(*call, key=42) == "phase 1", "an executor never launched answered"


def test_a_failed_launch_invalidates_the_key_for_good(nnopbase):
    """The first launch fails: the key misses from then on, even after a later phase 1 and launch succeed."""
    g, x = torch.randn(8), torch.randn(8)
    _, call = _gelu_grad(g, x)
    assert nnopbase.call(*call, key=51, launch="fail") == "phase 1"
    for _ in range(3):
        out, call = _gelu_grad(g, x)
        assert nnopbase.call(*call, key=51) == "phase 1", "a key whose launch failed answered"
        assert torch.allclose(out, torch.ops.npu_ext.gelu_backward_v2(g, x, "none"), atol=1e-6)
    assert nnopbase.calls("cache exists aclnnGeluBackwardV2") == 3 and nnopbase.entries() == 1
    _, call = _gelu_grad(g, x)
    assert nnopbase.call(*call, key=52) == "phase 1"  # another key is kept as usual
    _, call = _gelu_grad(g, x)
    assert nnopbase.call(*call, key=52) == "hit"


def test_the_extension_s_calls_are_cached_per_thread():
    """Through torch_npu (where it drives the cache): gelu's kernel kept on the main thread misses on a new thread, whose
    second call hits; on 2.6 every call runs phase 1 on either thread."""
    lib = Nnopbase()
    x = torch.randn(4, 8, dtype=torch.bfloat16).to("npu")
    torch.ops.npu_ext.gelu(x, "none")  # the entry point probed
    lib.reset()
    here = [torch.ops.npu_ext.gelu(x, "none").cpu() for _ in range(2)]

    def elsewhere():
        return [torch.ops.npu_ext.gelu(x, "none").cpu() for _ in range(2)]

    there = _on_a_thread(elsewhere)
    torch.npu.synchronize()
    cached = npu_backend.op_api_extension()  # the path setup.py builds
    assert lib.calls("aclnnGeluV2GetWorkspaceSize") == (2 if cached else 4)
    assert lib.calls("cache hit aclnnGeluV2") == (2 if cached else 0)
    assert lib.calls("cache kept aclnnGeluV2") == (2 if cached else 0)
    assert all(torch.equal(r, here[0]) for r in here + there)
    lib.reset()
