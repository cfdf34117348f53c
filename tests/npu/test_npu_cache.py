"""torch_npu's executor cache with the extension's aclnn calls, in the real torch_npu runtime on the fake CANN
(make test-npu, and every release row of make test-versions; skipped elsewhere).

Where torch_npu ships op-plugin's extension API (2.7.1.post4 and later) the NPU path calls aclnn through it (csrc/core/npu/torch_npu_compat.h),
so torch_npu hashes each call (each tensor's sizes, dtype, strides, offset and storage size; scalars by their bytes;
strings by content; the deterministic setting, or level from 2.13; device, stream and the operator's name) and asks
nnopbase's executor cache first. nnopbase caches only composite executors (an op_api that builds its executor with
CREATE_EXECUTOR()): of the ten aclnn operators the extension calls, GeluBackwardV2, GeluV2, PreluBackward, Prelu,
GroupedBiasAddGrad and GroupedBiasAddGradV2 (COMPOSITE). A call of one of them repeated with the same shapes is
answered from the cache: torch_npu launches the kept executor with the new call's tensor addresses, without phase 1.
Logit and LogitGrad (generated operators: no op_api) and ScaledMaskedSoftmax(Backward) (their op_api hands over to a
generated inner operator) are never kept: they run phase 1 on every call. The fake CANN models nnopbase's side
(tests/fake_cann/opapi/pta_cache.cpp, docs/npu.md#the-executor-cache) and counts "cache hit <api>",
"cache miss <api>" and "cache kept <api>".

Checked for every aclnn operator the extension calls (the five backward ones and the forward kernels GeluV2, Prelu,
Logit, ScaledMaskedSoftmax):
* a repeated call on new tensors hits where nnopbase caches the operator and runs phase 1 again where it does not,
  and its result equals, bit for bit, a fresh call's (the cache emptied) on the same tensors;
* a change of shape, dtype, strides, any scalar or string attribute, or of torch.use_deterministic_algorithms
  misses (phase 1 runs again);
* the same at TASK_QUEUE_ENABLE=0, 1 and 2 (each its own process: torch_npu reads it at start).
On torch_npu 2.6 (and 2.7.1, 2.7.1.post2) the extension's path has no executor cache (they ship none of op-plugin's
extension API): every call runs phase 1, and that is asserted instead. The cache's own rules (per thread, 10000 entries per thread, no
replacement, the API-name check, usable after a successful launch) are in test_npu_cache_nnopbase.py.
"""

import ctypes

import pytest
import torch

import fake_cann_lib
import runner
import torch_ext
from torch_ext.testing import samples
from npu_cache_cases import Opapi, CASES, VARIANTS, COMPOSITE, CACHED, call, cached, to_npu

pytestmark = pytest.mark.skipif(not torch_ext._npu.LOADED, reason="needs torch_ext._C_npu (make test-npu)")


def test_every_entry_point_has_its_cache_cases():
    """Every aclnn entry point of a family's backward op (OpInfo.aclnn) has its cases in the family's sample-table
    entry (OpInfo.cache_cases), so the tests here cover it."""
    assert [api for info in samples.OPS.values() for api in info.aclnn if api not in CASES] == []


@pytest.fixture(scope="module")
def opapi():
    lib = Opapi()
    for make, _ in CASES.values():  # every entry point probed once, so the tests count their own calls only
        call(*make("base"))
    return lib


@pytest.mark.parametrize("api", list(CASES))
def test_a_repeated_call_hits_and_equals_a_fresh_call(opapi, api):
    """A hit where nnopbase caches the operator, phase 1 on every call where it does not (and on 2.6)."""
    make, _ = CASES[api]
    opapi.reset()
    first = []
    call(*make("base"), keep=first)  # kept (if cached), and its tensors alive
    op, args = make("base")  # new tensors (new addresses, new values), the same shapes
    hit = call(op, args)
    assert opapi.phase1(api) == (1 if cached(api) else 2)
    assert opapi.hits(api) == (1 if cached(api) else 0)
    assert opapi.calls("cache kept " + api) == (1 if cached(api) else 0)
    # the four others are looked up (CanUsePTACache answers true for every API) and miss at every call
    assert opapi.calls("cache miss " + api) == (1 if cached(api) else 2 if CACHED else 0)
    assert opapi.calls(api) == 2  # two launches either way
    opapi.reset()
    fresh = call(op, args)  # the same tensors, the cache empty: phase 1 again
    assert opapi.phase1(api) == 1 and opapi.hits(api) == 0
    for h, f in zip(hit, fresh):
        assert torch.equal(h, f) or torch.equal(h.isnan(), f.isnan()) and torch.equal(h.nan_to_num(), f.nan_to_num())


@pytest.mark.parametrize("api,variant", VARIANTS)
def test_a_changed_call_misses(opapi, api, variant):
    make, _ = CASES[api]
    opapi.reset()
    call(*make("base"))
    op, args = make(variant)
    changed = call(op, args)
    assert opapi.hits(api) == 0, f"{variant}: torch_npu's cache answered a call that differs"
    assert opapi.phase1(api) == 2
    opapi.reset()
    assert all(torch.equal(c.nan_to_num(), f.nan_to_num()) for c, f in zip(changed, call(op, args)))


@pytest.mark.parametrize("api", list(CASES))
def test_the_deterministic_setting_misses(opapi, api):
    """torch.use_deterministic_algorithms(True) after a call: the next call must not reuse the executor phase 1
    made without it. (torch_npu 2.13 hashes its deterministic level, not this setting: the extension adds it.)"""
    make, _ = CASES[api]
    opapi.reset()
    call(*make("base"))
    try:
        torch.use_deterministic_algorithms(True)
        call(*make("base"))
        assert opapi.hits(api) == 0 and opapi.phase1(api) == 2
        call(*make("base"))  # deterministic again: its own entry
    finally:
        torch.use_deterministic_algorithms(False)
    call(*make("base"))  # back to the first entry
    assert opapi.hits(api) == (2 if cached(api) else 0)
    assert opapi.phase1(api) == (2 if cached(api) else 4)


@pytest.mark.parametrize("api", list(CASES))
def test_the_deterministic_option_follows_the_setting_at_every_launch(opapi, api):
    """On torch_npu 2.6 the NPU path sets ACL_OPT_DETERMINISTIC itself (aclrtCtxSetSysParamOpt), and torch_npu's
    own operators set the same option by their own bookkeeping: whatever was set in between (here set to 0
    directly, as a torch_npu operator run with the setting off does), each launch must be made with the option
    torch.use_deterministic_algorithms asks for. The fake's operators read the option at phase 1 and count a
    launch made with it as "deterministic launch <api>". (On 2.7.1 and later torch_npu applies the setting itself,
    SetExecConfig / ApplyDeterministicLevel, by its own means: not this test's subject.)"""
    if CACHED:
        return
    make, _ = CASES[api]
    runtime = fake_cann_lib.runtime()
    opapi.reset()
    try:
        torch.use_deterministic_algorithms(True)
        call(*make("base"))
        assert opapi.calls("deterministic launch " + api) == 1
        runtime.aclrtCtxSetSysParamOpt(0, ctypes.c_int64(0))  # ACL_OPT_DETERMINISTIC off behind the extension
        call(*make("base"))
        assert opapi.calls("deterministic launch " + api) == 2, "launched without determinism"
        torch.use_deterministic_algorithms(False)
        call(*make("base"))
        assert opapi.calls("deterministic launch " + api) == 2, "launched with determinism after it was turned off"
    finally:
        torch.use_deterministic_algorithms(False)


SCRIPT = r"""
import json, sys, threading
import torch, torch_npu, torch_ext
import npu_cache_cases as t
lib = t.Opapi()
me = threading.get_native_id()  # the calling (main) thread; the task queue's thread is another
out = {}
for api, (make, _) in t.CASES.items():
    t.call(*make("base"))  # probe and first call
    lib.reset()
    first = []
    t.call(*make("base"), keep=first)
    op, args = make("base")
    hit = t.call(op, args)
    row = {"phase1": lib.phase1(api), "hits": lib.hits(api), "launches": lib.calls(api),
           "v1 key": lib.calls("SetPTAHashKey " + api), "v2 key": lib.calls("SetPTACacheHashKey " + api),
           "v2 find": lib.calls("PTAFindExecCache " + api),
           "phase1 here": lib.calls(f"phase 1 thread {me}"), "v2 here": lib.calls(f"PTAFindExecCache thread {me}")}
    lib.reset()
    fresh = t.call(op, args)
    row["equal"] = all(torch.equal(h.nan_to_num(), f.nan_to_num()) for h, f in zip(hit, fresh))
    out[api] = row
print("RESULT " + json.dumps(out))
"""


def expected_row(api, level):
    """Two calls of `api` with the same shapes at TASK_QUEUE_ENABLE=level, as op-plugin's EXEC_NPU_CMD_EXT makes them
    (op_api_common_base.h): V1 (0, 1) hashes and looks up with SetPTAHashKey / PTAGetExecCache and runs phase 1 on
    the calling thread; V2 (2) copies the arguments and does the lookup (SetPTACacheHashKey, PTAFindExecCache),
    phase 1 and the launch in the queued task, on the queue's thread. Where the extension's path has no cache (CANN's C
    API: a torch_npu without op-plugin's extension API) none of them runs and phase 1 runs on the calling thread."""
    phase1 = 1 if cached(api) else 2
    v2 = CACHED and level == "2"
    return {"phase1": phase1, "hits": 2 - phase1, "launches": 2, "equal": True,
            "v1 key": 2 if CACHED and not v2 else 0, "v2 key": 2 if v2 else 0, "v2 find": 2 if v2 else 0,
            "phase1 here": 0 if v2 else phase1, "v2 here": 0}


def test_task_queue_levels():
    """TASK_QUEUE_ENABLE 0, 1 and 2, each in its own process (torch_npu reads it at start), the three at once: the
    hits, and which of torch_npu's lookups ran and on which thread (the fake's counters per thread id)."""
    procs = {level: runner.script(SCRIPT, TASK_QUEUE_ENABLE=level) for level in ("0", "1", "2")}
    for level, proc in procs.items():
        rows = runner.result(proc, level)
        assert rows == {api: expected_row(api, level) for api in CASES}, (level, rows)


# --- a failure in the middle of a call ------------------------------------------------------------------------
LIVE = ["live aclTensor", "live executor", "live memory context"]


def _live(opapi):
    """The live objects outside the executor cache (emptied first: an executor phase 1 of a cached operator made
    stays in the cache, unusable, when its call failed before the launch, as nnopbase keeps it)."""
    opapi.reset()
    return {key: opapi.calls(key) for key in LIVE}


def test_a_workspace_allocation_failure_releases_everything(opapi):
    """aclnnLogit asks for a 16 MiB workspace (logit_tiling.cpp): with the device unable to give it, the call raises
    after phase 1, and the memory context, the converted arguments and the executor are all released; the next call
    succeeds."""
    runtime = fake_cann_lib.runtime()
    x = (torch.rand(64) * 0.9 + 0.05).to("npu")
    torch.ops.npu_ext.logit(x, 0.2)  # a whole call: the memory context ended
    torch.npu.synchronize()  # (2.6: the queued task holds its workspace until it ran)
    torch.npu.empty_cache()  # no cached block to reuse: the workspace is a device allocation
    before = _live(opapi)  # and the cache empty: phase 1 runs
    runtime.fake_cann_fail_malloc(8 << 20)
    try:
        with pytest.raises(RuntimeError, match="(?i)out of memory"):
            torch.ops.npu_ext.logit(x, 0.1)
    finally:
        runtime.fake_cann_fail_malloc(0)
    torch.npu.synchronize()
    assert opapi.phase1("aclnnLogit") == 1 and opapi.calls("aclnnLogit") == 0
    assert _live(opapi) == before, "something of the failed call was not released"
    y = torch.ops.npu_ext.logit(x, 0.1).cpu()
    assert torch.allclose(y, torch.logit(x.cpu(), 0.1), atol=1e-6)


def test_a_conversion_failure_releases_everything(opapi):
    """The second tensor of gelu_backward_v2's call cannot be described (aclCreateTensor returns null): on torch_npu
    2.7.1+ torch_npu passes the null on and phase 1 rejects it (161001), on 2.6 the extension's own conversion stops
    the call; either way a RuntimeError naming the op, everything released, and the next call succeeds."""
    g, x = torch.randn(4, 8), torch.randn(4, 8)
    gd, xd = g.to("npu"), x.to("npu")
    torch.ops.npu_ext.gelu_backward_v2(gd, xd, "tanh")  # a whole call: the memory context ended
    before = _live(opapi)
    opapi.lib.fake_opapi_fail_create_tensor(2)
    try:
        with pytest.raises(RuntimeError, match=r"npu_ext\.gelu_backward_v2: .*aclnnGeluBackwardV2") as info:
            torch.ops.npu_ext.gelu_backward_v2(gd, xd, "none")
    finally:
        opapi.lib.fake_opapi_fail_create_tensor(0)
    torch.npu.synchronize()
    assert ("161001" in str(info.value)) if CACHED else \
        ("could not be converted" in str(info.value) and "aclCreateTensor returned null" in str(info.value))
    assert opapi.calls("aclnnGeluBackwardV2") == 0  # nothing launched
    assert _live(opapi) == before, "something of the failed call was not released"
    out = torch.ops.npu_ext.gelu_backward_v2(gd, xd, "none").cpu()
    assert torch.allclose(out, torch.ops.npu_ext.gelu_backward_v2(g, x, "none"), atol=1e-6)


# ----------------------------------------------------------------------------------------------------------
# The rest of torch_npu's key: the same sizes, dtypes and strides, but another storage offset, another storage size or
# another stream must not share an entry (the key hashes each tensor's offset and storage size, and the stream).
def _placed(t, offset, extra):
    """An npu copy of host tensor t with t's sizes and strides, at element `offset` of a storage `extra` elements
    longer than it needs."""
    d = to_npu(t)
    span = 1 + sum((s - 1) * st for s, st in zip(d.shape, d.stride())) if d.numel() else 0
    storage = torch.empty(offset + span + extra, dtype=d.dtype, device=d.device)
    placed = storage.as_strided(d.shape, d.stride(), offset)
    placed.copy_(d)
    return placed


CHANGES = {"storage offset": (1, 0), "storage size": (0, 3), "stream": (0, 0)}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("api", sorted(COMPOSITE))
def test_each_key_component_misses(opapi, api, change):
    """A repeat of the first call hits (so the test can see a hit); the changed call misses and runs phase 1. (On a
    release without the cache on the extension's path, every call runs phase 1.)"""
    make, _ = CASES[api]
    op, host = make("base")
    keep = []

    def run(offset, extra):
        args = [_placed(a, offset, extra) if isinstance(a, torch.Tensor) else a for a in host]
        keep.extend(a for a in args if isinstance(a, torch.Tensor))  # new addresses at every call
        out = op(*args)
        return tuple(o.cpu() for o in (out if isinstance(out, tuple) else (out,)))

    opapi.reset()
    first = run(0, 0)
    run(0, 0)
    assert opapi.hits(api) == (1 if CACHED else 0) and opapi.phase1(api) == (1 if CACHED else 2)
    offset, extra = CHANGES[change]
    if change == "stream":
        with torch.npu.stream(torch.npu.Stream()):
            changed = run(offset, extra)
        torch.npu.synchronize()
    else:
        changed = run(offset, extra)
    assert opapi.hits(api) == (1 if CACHED else 0), f"{change}: torch_npu's cache answered a call that differs"
    assert opapi.phase1(api) == (2 if CACHED else 3)
    for c, f in zip(changed, first):
        assert torch.equal(c.nan_to_num(), f.nan_to_num())
