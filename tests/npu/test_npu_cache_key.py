"""The rest of torch_npu's executor-cache key with the extension's calls, in the real torch_npu runtime on the fake CANN
(make test-npu, every release row): the deterministic level, and the device (tests/npu/test_npu_cache.py has the
shapes, dtypes, strides, attributes, storage offset, storage size, stream and torch.use_deterministic_algorithms).

* Each deterministic level: torch_npu 2.13 and later have levels (torch_npu.npu.set_deterministic_level: 0 off, 1
  deterministic, 2 strong consistency, 3 batch consistency on a CANN after 9.2), which it applies for phase 1
  (ApplyDeterministicLevel) and hashes (hit_cache_ext's and hit_cache_v2_ext's level); before, the aclnn path's
  setting is on or off (torch.use_deterministic_algorithms; set_deterministic_level exists there too, and levels 1
  to 3 apply the same options to an aclnn call, so they share an entry, rightly). A call at a level not seen before must miss and run phase 1 under that
  level's options, a call at a level seen before hits the executor made under its own level's options. The fake's
  executors record the runtime's ACL_OPT_DETERMINISTIC and ACL_OPT_STRONG_CONSISTENCY at phase 1 and count each
  launch by them, so a launch with the executor of another level is seen. Run at TASK_QUEUE_ENABLE 1 and 2 (V1 and
  V2 lookups), on the fake's default CANN and on one after 9.2 (level 3), each in its own process (torch_npu reads
  both once).
"""

import json
import os

import pytest

import runner
import torch_ext
from npu_cache_cases import CACHED, CASES, COMPOSITE, cached

pytestmark = pytest.mark.skipif(not torch_ext._npu.LOADED, reason="needs torch_ext._C_npu (make test-npu)")

LEVELS_SCRIPT = r"""
import json, sys, warnings
import torch, torch_npu, torch_ext
import fake_cann_lib
import npu_cache_cases as t
warnings.simplefilter("ignore")  # set_deterministic_level warns at every call
lib, rt = t.Opapi(), fake_cann_lib.runtime()
levels = json.loads(sys.argv[1])
has_levels = hasattr(torch_npu.npu, "set_deterministic_level")


def launches(api):
    text = lib.lib.fake_opapi_dump().decode()
    prefix = "launch " + api + " made with "
    return {line.split("=")[0][len(prefix):]: int(line.split("=")[1]) for line in text.splitlines()
            if line.startswith(prefix)}


out = {"has levels": has_levels, "rows": {}}
for api, (make, _) in t.CASES.items():
    t.call(*make("base"))  # the probe
    lib.reset()
    rows = []
    for level in levels:
        if has_levels:
            torch_npu.npu.set_deterministic_level(level)
        else:
            torch.use_deterministic_algorithms(level != 0)
        before = launches(api)
        t.call(*make("base"))
        torch.npu.synchronize()
        after = launches(api)
        made_with = [k for k in after if after[k] != before.get(k, 0)]
        rows.append({"level": level, "phase1": lib.phase1(api), "hits": lib.hits(api), "made with": made_with,
                     "options now": "deterministic %d strong consistency %d" % (
                         rt.fake_cann_sys_param(0), rt.fake_cann_sys_param(2))})
    out["rows"][api] = rows
if has_levels:
    torch_npu.npu.set_deterministic_level(0)
torch.use_deterministic_algorithms(False)
print("RESULT " + json.dumps(out))
"""


def _run_levels(levels, **env):
    base = {k: v for k, v in os.environ.items() if not k.startswith("NPU_FAKE_")}
    return runner.script(LEVELS_SCRIPT, json.dumps(levels), base=base, **env)


def _check_levels(api, rows):
    """Phase 1 at each level's first call, a hit at its later ones; every launch with the options its own level
    applied (those the runtime held right after the level's first call: torch_npu applies them for phase 1)."""
    seen, phase1, hits = {}, 0, 0
    for row in rows:
        level = row["level"]
        new = level not in seen
        if new or not cached(api):
            phase1 += 1
        else:
            hits += 1
        if new:
            seen[level] = row["options now"]
        assert (row["phase1"], row["hits"]) == (phase1, hits), (api, rows)
        assert row["made with"] == [seen[level]], (api, level, rows)
    # the options of the levels torch_npu sets (1 to 3) differ, or a shared entry would go unnoticed in "made with"
    # (level 0 is not asserted: on a CANN after 9.2 torch_npu 2.13 left ACL_OPT_DETERMINISTIC at 3 when the level
    # went from 3 to 0 here, so level 0's options are whatever was set before)
    on = {level: options for level, options in seen.items() if level != 0}
    assert len(set(on.values())) == len(on), (api, seen)


def _level_form():
    """Whether the installed torch_npu's hit_cache_ext takes the deterministic level (op-plugin's
    op_api_common_base.h, read as setup.py reads it for NPU_EXT_HIT_CACHE_LEVEL): its aclnn path then applies the
    level (ApplyDeterministicLevel). The releases before have set_deterministic_level too, but their aclnn path
    applies the setting alone (SetExecConfig: on or off; measured on the fake: levels 1 and 2 made the same options),
    so there levels 1 to 3 are one state, and sharing their entry is right."""
    import importlib.util
    spec = importlib.util.find_spec("torch_npu")
    path = os.path.join(list(spec.submodule_search_locations)[0], "include", "third_party", "op-plugin", "op_plugin",
                        "utils", "op_api_common_base.h")
    if not os.path.isfile(path):
        return False
    text = open(path, encoding="utf-8").read()
    start = text.find("bool hit_cache_ext(")
    return start >= 0 and "level" in text[start:text.find(")", start)]


def test_each_deterministic_level_misses():
    runs = {("1", "default"): [0, 1, 2, 1, 0, 2], ("2", "default"): [0, 1, 2, 1, 0, 2],
            ("1", "9.3.0"): [0, 1, 2, 3, 1, 3, 0], ("2", "9.3.0"): [0, 1, 2, 3, 1, 3, 0]}
    procs = {}
    for (mode, cann), levels in runs.items():
        env = {"TASK_QUEUE_ENABLE": mode}
        if cann != "default":
            env["NPU_FAKE_CANN_VERSION"] = cann
        procs[mode, cann] = _run_levels(levels, **env)
    for key, proc in procs.items():
        result = runner.result(proc, key)
        for api, rows in result["rows"].items():
            if not (result["has levels"] and _level_form()):  # on / off: level 2 and 3 are "on" as 1 is
                rows = [dict(r, level=min(r["level"], 1)) for r in rows]
            _check_levels(api, rows)
        assert set(result["rows"]) == set(CASES)


# --- two devices ---------------------------------------------------------------------------------------------
# The fake has NPU_FAKE_DEVICE_COUNT devices (tests/fake_cann/runtime.cpp; 1 unless set): two here, in one process.
# Its operators refuse a tensor in another device's memory at phase 1 (161002) and an executor made on another
# device at its launch (561000), as a kernel cannot run there: so a call that used another device's state (a cached
# executor, a kept mask) fails instead of passing unnoticed on the fake's shared host memory.
DEVICES_SCRIPT = r"""
import ctypes, json
import torch, torch_npu, torch_ext
import fake_cann_lib
import npu_cache_cases as t
lib, rt = t.Opapi(), fake_cann_lib.runtime()
rt.fake_cann_stream_device.restype = ctypes.c_int32
rt.fake_cann_stream_device.argtypes = [ctypes.c_void_p]
out = {"devices": torch.npu.device_count(), "rows": {}}


def run(op, host, d):
    args = [a.to("npu:%d" % d) if isinstance(a, torch.Tensor) else a for a in host]
    res = op(*args)
    res = res if isinstance(res, tuple) else (res,)
    torch.npu.synchronize(d)
    return [r.cpu() for r in res], [r.device.index for r in res]


for api in sorted(t.COMPOSITE):
    op, host = t.CASES[api][0]("base")
    run(op, host, 0), run(op, host, 1)  # the probes, on each device
    lib.reset()
    torch.npu.synchronize(1)
    cpu = op(*host)
    cpu = [c for c in (cpu if isinstance(cpu, tuple) else (cpu,))]
    rows = []
    for d in (0, 1, 0, 1):
        res, devices = run(op, host, d)
        rows.append({"device": d, "phase1": lib.phase1(api), "hits": lib.hits(api), "out devices": devices,
                     "close": all(torch.allclose(r.float(), c.float(), atol=1e-3, equal_nan=True)
                                  for r, c in zip(res, cpu)),
                     "another device's executor": lib.calls("launch on another device " + api)})
    dump = lib.lib.fake_opapi_dump().decode().splitlines()
    rows[-1]["v2 lookup threads"] = len([l for l in dump if l.startswith("PTAFindExecCache thread ")])
    out["rows"][api] = rows

# the causal mask (kept per device and shape): the same shape on device 0, then 1, then 0
x = torch.randn(1, 2, 4, 8)
mask = torch.zeros(1, 1, 4, 8, dtype=torch.bool)
cpu = torch.ops.npu_ext.scaled_masked_softmax(x, mask, 0.5, True)
out["causal"] = [bool(torch.allclose(torch.ops.npu_ext.scaled_masked_softmax(
    x.to("npu:%d" % d), mask.to("npu:%d" % d), 0.5, True).cpu(), cpu, atol=1e-5)) for d in (0, 1, 0)]

# the fake's second device: memory, streams, copies between devices
torch.npu.synchronize(0), torch.npu.synchronize(1)
rt.fake_cann_reset()
before = [rt.fake_cann_count(b"bytes_in_use device %d" % d) for d in (0, 1)]
free_before = [torch.npu.mem_get_info(d)[0] for d in (0, 1)]
a = torch.arange(1 << 20, dtype=torch.float32, device="npu:1")  # 4 MiB on device 1
after = [rt.fake_cann_count(b"bytes_in_use device %d" % d) for d in (0, 1)]
free_after = [torch.npu.mem_get_info(d)[0] for d in (0, 1)]
out["memory"] = {"device 0 grew": after[0] - before[0], "device 1 grew": after[1] - before[1] >= (4 << 20),
                 "free 0 same": free_after[0] == free_before[0], "free 1 less": free_after[1] < free_before[1]}
b = a.to("npu:0")
out["copy"] = {"equal": bool(torch.equal(b.cpu(), torch.arange(1 << 20, dtype=torch.float32))),
               "device": b.device.index, "peer copies": rt.fake_cann_count(b"memcpy_peer")}
out["streams"] = [rt.fake_cann_stream_device(ctypes.c_void_p(torch.npu.current_stream(d).npu_stream))
                  for d in (0, 1)]
with torch.npu.device(1):
    s = torch.npu.Stream()
out["new stream"] = rt.fake_cann_stream_device(ctypes.c_void_p(s.npu_stream))
print("RESULT " + json.dumps(out))
"""


def test_two_devices():
    """Per api: device 0, 1, 0, 1 with the same call: the first call on each device misses (phase 1 there), the
    later ones hit their own device's entry, each result on its device and right; the causal mask is made per
    device; the fake's second device has its own memory, streams, and copies from the first. At
    TASK_QUEUE_ENABLE 1 (V1: torch_npu hashes the device) and 2 (V2: torch_npu hashes the stream, not the device;
    the extension adds it), with real stream handles and with NPU_FAKE_STREAM_HANDLES=per-device (every device's
    k-th stream the same handle: in V1 only the device index tells the two devices apart). In V2 each device's
    lookups also run on that device's own queue thread, whose cache is its own (nnopbase's is per thread): the
    extension's device index in the V2 hash is not what keeps them apart on torch_npu (removing it passes this
    test), it keeps the key complete should a queue thread ever serve two devices."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("NPU_FAKE_")}
    procs = {(mode, handles): runner.script(DEVICES_SCRIPT, base=base, TASK_QUEUE_ENABLE=mode,
                                            NPU_FAKE_DEVICE_COUNT="2", NPU_FAKE_STREAM_HANDLES=handles)
             for mode in ("1", "2") for handles in ("", "per-device")}
    for key, proc in procs.items():
        result = runner.result(proc, key)
        assert result["devices"] == 2
        for api, rows in result["rows"].items():
            phase1 = [1, 2, 2, 2] if cached(api) else [1, 2, 3, 4]
            assert [r["phase1"] for r in rows] == phase1, (key, api, rows)
            assert [r["hits"] for r in rows] == [p - q + 1 for q, p in zip(phase1, range(4))], (key, api, rows)
            assert all(r["out devices"] == [r["device"]] * len(r["out devices"]) and r["close"] for r in rows), rows
            assert rows[-1]["another device's executor"] == 0, (key, api, rows)
            # V2: each device's lookups on its own queue thread, whose nnopbase cache is its own
            assert rows[-1]["v2 lookup threads"] == (2 if CACHED and key[0] == "2" else 0), (key, api, rows)
        assert set(result["rows"]) == COMPOSITE
        assert result["causal"] == [True, True, True], key
        assert result["memory"] == {"device 0 grew": 0, "device 1 grew": True, "free 0 same": True,
                                    "free 1 less": True}, key
        assert result["copy"] == {"equal": True, "device": 0, "peer copies": 1}, key
        assert result["new stream"] == 1, key
        if not key[1]:  # (per-device handles: device 0's current stream has device 1's handle too)
            assert result["streams"] == [0, 1], key
