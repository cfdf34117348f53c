"""The executor-cache cases of tests/npu/test_npu_cache.py: per aclnn entry point the extension calls, how to call it
and which changes of the call torch_npu must hash (CASES, from the sample table), the fake libopapi.so's counters
(Opapi), and whether a repeated call skips phase 1 on this release (cached). Also imported by that file's
TASK_QUEUE_ENABLE subprocesses."""

import torch

import fake_cann_lib
import npu_backend
import torch_ext
from torch_ext.testing import samples


class Opapi:
    """The fake libopapi.so's counters (the handle torch_npu loaded: the same counters)."""

    def __init__(self):
        self.lib = fake_cann_lib.opapi()

    def calls(self, key):
        return self.lib.fake_opapi_calls(key.encode())

    def reset(self):
        """Counters and the cache emptied (after the queued launches ran)."""
        torch.npu.synchronize()
        self.lib.fake_opapi_reset()

    def phase1(self, api):
        return self.calls(api + "GetWorkspaceSize")

    def hits(self, api):
        return self.calls("cache hit " + api)


def to_npu(t):
    return t.to("npu")


# Each case: the aclnn entry point, and how to call it: variant -> (op, args) on host tensors, moved to the device per
# call; the variants each change one thing torch_npu must hash, "base" is the call repeated. Each family's sample-table
# entry has those of its entry points (OpInfo.cache_cases, torch_ext/testing/families/).
CASES = {api: (make, list(variants)) for info in samples.OPS.values() for api, (make, variants, _) in
         (info.cache_cases or {}).items()}
VARIANTS = [(api, variant) for api, (_, variants) in CASES.items() for variant in variants]


def call(op, host_args, keep=None):
    """The op on device copies of host_args; host results (a tuple). `keep` (a list) keeps the device tensors
    alive, so that the next call's tensors get other device addresses (the caching allocator would hand the same
    blocks back, and a hit that ignored the new addresses would go unnoticed)."""
    args = [to_npu(a) if isinstance(a, torch.Tensor) else a for a in host_args]
    out = op(*args)
    out = out if isinstance(out, tuple) else (out,)
    if keep is not None:
        keep.extend([a for a in args if isinstance(a, torch.Tensor)] + list(out))
    return tuple(o.cpu() for o in out)


CACHED = npu_backend.op_api_extension() if torch_ext._npu.LOADED else False  # the path setup.py builds
# The operators nnopbase caches: their op_api builds a composite executor (CREATE_EXECUTOR()). docs/npu.md has the
# upstream file of each, and why the other four are not cached.
COMPOSITE = {api for info in samples.OPS.values() for api, (_, _, composite) in (info.cache_cases or {}).items()
             if composite}


def cached(api):
    """Whether a repeated call of `api` skips phase 1 on this release."""
    return CACHED and api in COMPOSITE
