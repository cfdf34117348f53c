"""The executor-cache cases of tests/npu/test_npu_cache.py: per aclnn entry point the extension calls, how to call it
and which changes of the call torch_npu must hash (CASES), the fake libopapi.so's counters (Opapi), and whether a
repeated call skips phase 1 on this release (cached). Also imported by that file's TASK_QUEUE_ENABLE subprocesses."""

import torch

import fake_cann_lib
import npu_backend
import torch_ext


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


def rand(*shape, dtype=torch.float32, low=None):
    t = torch.rand(*shape) * 0.9 + 0.05 if low == "unit" else torch.randn(*shape)
    return t.to(dtype)


def transposed(rows, cols, dtype=torch.float32):
    """A [rows, cols] view with transposed strides."""
    return rand(cols, rows, dtype=dtype).t()


# Each case: the aclnn entry point, and how to call it: variant -> (op, args) on host tensors, moved to the
# device per call. The variants each change one thing torch_npu must hash; "base" is the call repeated.
def _gelu_bwd(variant):
    shape, dtype, approximate = (4, 8), torch.float32, "none"
    g, x = rand(*shape), rand(*shape)
    if variant == "shape":
        g, x = rand(4, 16), rand(4, 16)
    elif variant == "dtype":
        g, x = rand(*shape, dtype=torch.bfloat16), rand(*shape, dtype=torch.bfloat16)
    elif variant == "stride":
        x = transposed(*shape)
    elif variant == "approximate":
        approximate = "tanh"
    return torch.ops.npu_ext.gelu_backward_v2, (g, x, approximate)


def _prelu_bwd(variant):
    g, x, w = rand(2, 3, 4), rand(2, 3, 4), rand(3)
    if variant == "shape":
        g, x = rand(2, 3, 5), rand(2, 3, 5)
    elif variant == "dtype":
        g, x, w = g.half(), x.half(), w.half()
    elif variant == "stride":
        x = rand(2, 4, 3).transpose(1, 2)
    elif variant == "weight":
        w = rand(1)
    return torch.ops.npu_ext.prelu_backward, (g, x, w)


def _grouped(idx_values, idx_type):
    """grouped_bias_add_grad with group_idx `idx_values` of type `idx_type` (0: ends, V1; 1: counts, V2)."""
    def make(variant):
        gy, idx = rand(6, 8), torch.tensor(idx_values)
        if variant == "shape":
            gy = rand(6, 16)
        elif variant == "dtype":
            gy = gy.half()
        elif variant == "stride":
            gy = transposed(6, 8)
        elif variant == "index dtype":
            idx = idx.int()
        elif variant == "no index":
            gy, idx = rand(3, 2, 8), None
        return torch.ops.npu_ext.grouped_bias_add_grad, (gy, idx, idx_type)
    return make


_grouped_v1, _grouped_v2 = _grouped([2, 4, 6], 0), _grouped([2, 2, 2], 1)


def _softmax_bwd(variant):
    shape, scale = (2, 2, 4, 8), 1.0
    g, y, mask = rand(*shape), torch.softmax(rand(*shape), -1), torch.rand(2, 1, 4, 8) > 0.7
    if variant == "shape":
        g, y, mask = rand(2, 2, 4, 16), torch.softmax(rand(2, 2, 4, 16), -1), torch.rand(2, 1, 4, 16) > 0.7
    elif variant == "dtype":
        g, y = g.half(), y.half()
    elif variant == "stride":
        y = torch.softmax(rand(2, 4, 2, 8), -1).transpose(1, 2)
    elif variant == "mask shape":
        mask = torch.rand(1, 1, 4, 8) > 0.7
    elif variant == "scale":
        scale = 0.5
    return torch.ops.npu_ext.scaled_masked_softmax_backward, (g, y, mask, scale)


def _logit_bwd(variant):
    x, dy, eps = rand(4, 8, low="unit"), rand(4, 8), -1.0
    if variant == "shape":
        x, dy = rand(4, 16, low="unit"), rand(4, 16)
    elif variant == "dtype":
        x, dy = x.bfloat16(), dy.bfloat16()
    elif variant == "stride":
        x = (torch.rand(8, 4) * 0.9 + 0.05).t()
    elif variant == "eps":
        eps = 0.1
    return torch.ops.npu_ext.logit_grad, (x, dy, eps)


def _gelu(variant):
    x, approximate = rand(4, 8, dtype=torch.bfloat16), "none"
    if variant == "shape":
        x = rand(4, 16, dtype=torch.bfloat16)
    elif variant == "dtype":
        x = x.half()
    elif variant == "stride":
        x = transposed(4, 8, dtype=torch.bfloat16)
    elif variant == "approximate":
        approximate = "tanh"
    return torch.ops.npu_ext.gelu, (x, approximate)


def _prelu(variant):
    x, w = rand(2, 3, 4), rand(3)
    if variant == "shape":
        x = rand(2, 3, 5)
    elif variant == "dtype":
        x, w = x.half(), w.half()
    elif variant == "stride":
        x = rand(2, 4, 3).transpose(1, 2)
    elif variant == "weight":
        w = rand(1)
    return torch.ops.npu_ext.prelu, (x, w)


def _logit(variant):
    x, eps = rand(4, 8, low="unit"), None
    if variant == "shape":
        x = rand(4, 16, low="unit")
    elif variant == "dtype":
        x = x.half()
    elif variant == "stride":
        x = (torch.rand(8, 4) * 0.9 + 0.05).t()
    elif variant == "eps":
        eps = 0.1
    return torch.ops.npu_ext.logit, (x, eps)


def _softmax(variant):
    x, mask, scale = rand(2, 2, 4, 8), torch.rand(2, 1, 4, 8) > 0.7, 1.0
    if variant == "shape":
        x, mask = rand(2, 2, 4, 16), torch.rand(2, 1, 4, 16) > 0.7
    elif variant == "dtype":
        x = x.bfloat16()
    elif variant == "stride":
        x = rand(2, 4, 2, 8).transpose(1, 2)
    elif variant == "mask shape":
        mask = torch.rand(1, 1, 4, 8) > 0.7
    elif variant == "scale":
        scale = 0.5
    return torch.ops.npu_ext.scaled_masked_softmax, (x, mask, scale)


CASES = {
    "aclnnGeluBackwardV2": (_gelu_bwd, ["shape", "dtype", "stride", "approximate"]),
    "aclnnPreluBackward": (_prelu_bwd, ["shape", "dtype", "stride", "weight"]),
    "aclnnGroupedBiasAddGrad": (_grouped_v1, ["shape", "dtype", "stride", "index dtype", "no index"]),
    "aclnnGroupedBiasAddGradV2": (_grouped_v2, ["shape", "dtype", "stride", "index dtype"]),
    "aclnnScaledMaskedSoftmaxBackward": (_softmax_bwd, ["shape", "dtype", "stride", "mask shape", "scale"]),
    "aclnnLogitGrad": (_logit_bwd, ["shape", "dtype", "stride", "eps"]),
    "aclnnGeluV2": (_gelu, ["shape", "dtype", "stride", "approximate"]),
    "aclnnPrelu": (_prelu, ["shape", "dtype", "stride", "weight"]),
    "aclnnLogit": (_logit, ["shape", "dtype", "stride", "eps"]),
    "aclnnScaledMaskedSoftmax": (_softmax, ["shape", "dtype", "stride", "mask shape", "scale"]),
}
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
COMPOSITE = {"aclnnGeluBackwardV2", "aclnnGeluV2", "aclnnPreluBackward", "aclnnPrelu", "aclnnGroupedBiasAddGrad",
             "aclnnGroupedBiasAddGradV2"}
assert COMPOSITE < set(CASES)


def cached(api):
    """Whether a repeated call of `api` skips phase 1 on this release."""
    return CACHED and api in COMPOSITE
