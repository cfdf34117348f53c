"""The NPU path without an NPU (see tests/npu/test_npu_path.py): the aclnn models' C ABI called directly (status codes,
NaN selects, private formats), the stand-in's rounding, `.out` layouts and the memory around them, and the 0-dim
promotion rule."""

import ctypes
import math

import pytest
import torch


import fake_cann_lib
from npu_path_common import (  # noqa: F401 (backend: the fixture)
    DTYPES, SKIP, assert_close, assert_same, backend, logit_inputs, npu, ops,
    prelu_inputs, softmax_inputs)

pytestmark = SKIP


# ------------------------------------------------------------------------------------------------------------
# The stand-in's C ABI, called directly.

ACL_FLOAT, ACL_FLOAT16, ACL_INT32, ACL_BOOL = 0, 1, 3, 12
ACL_FORMAT_ND = 2
NULLPTR, INVALID = 161001, 161002
P = ctypes.c_void_p


class Abi:
    def __init__(self, lib):
        self.lib = fake_cann_lib.type_opapi(lib)
        self.keep = []

    def tensor(self, t, dtype_code=None, sizes=None, strides=None, offset=None, storage=None, fmt=ACL_FORMAT_ND):
        """`storage`: the storage dims (default: the storage as one dimension, as for a base format)."""
        codes = {torch.float32: ACL_FLOAT, torch.float16: ACL_FLOAT16, torch.int32: ACL_INT32, torch.bool: ACL_BOOL}
        sizes = list(t.shape if sizes is None else sizes)
        strides = (ctypes.c_int64 * len(sizes))(*(t.stride() if strides is None else strides))
        sizes = (ctypes.c_int64 * len(sizes))(*sizes)
        storage = [t.untyped_storage().nbytes() // t.element_size()] if storage is None else storage
        storage_dims = (ctypes.c_int64 * len(storage))(*storage)
        self.keep += [sizes, strides, storage_dims, t]
        return self.lib.aclCreateTensor(sizes, len(sizes), codes[t.dtype] if dtype_code is None else dtype_code, strides,
                                        t.storage_offset() if offset is None else offset, fmt, storage_dims,
                                        len(storage), t.untyped_storage().data_ptr())

    def last_error(self):
        return self.lib.fake_opapi_last_error().decode()

    def phase1(self, api, *args, ws=True, ex=True):
        size, executor = ctypes.c_uint64(123), P()
        fn = getattr(self.lib, api + "GetWorkspaceSize")
        status = fn(*args, ctypes.byref(size) if ws else None, ctypes.byref(executor) if ex else None)
        return status, size.value, executor

    def run(self, api, size, executor):
        ws = ctypes.create_string_buffer(max(size, 1))
        getattr(self.lib, api).argtypes = [P, ctypes.c_uint64, P, P]
        return getattr(self.lib, api)(ws if size else None, size, executor, None)


@pytest.fixture
def abi(backend):
    return Abi(backend.opapi)


def test_abi_logit_grad(abi):
    lib = abi.lib
    lib.aclnnLogitGradGetWorkspaceSize.argtypes = [P, P, ctypes.c_double, P, P, P]
    x, dy, out = torch.tensor([0.25, 0.5]), torch.tensor([3.0, 1.0]), torch.zeros(2)
    tx, tdy, tout = abi.tensor(x), abi.tensor(dy), abi.tensor(out)
    assert abi.phase1("aclnnLogitGrad", None, tdy, -1.0, tout)[0] == NULLPTR
    assert abi.phase1("aclnnLogitGrad", tx, tdy, -1.0, None)[0] == NULLPTR
    assert abi.phase1("aclnnLogitGrad", tx, tdy, -1.0, tout, ws=False)[0] == NULLPTR
    assert abi.phase1("aclnnLogitGrad", tx, tdy, -1.0, tout, ex=False)[0] == NULLPTR
    half = abi.tensor(dy.half())
    assert abi.phase1("aclnnLogitGrad", tx, half, -1.0, tout)[0] == INVALID  # dtype mismatch
    assert abi.phase1("aclnnLogitGrad", tx, abi.tensor(torch.zeros(3)), -1.0, tout)[0] == INVALID  # shape mismatch
    assert abi.phase1("aclnnLogitGrad", tx, abi.tensor(dy, dtype_code=99), -1.0, tout)[0] == INVALID  # bad code
    assert abi.phase1("aclnnLogitGrad", tx, abi.tensor(dy, offset=1), -1.0, tout)[0] == INVALID  # past storage
    assert abi.phase1("aclnnLogitGrad", tx, abi.tensor(dy, strides=[2]), -1.0, tout)[0] == INVALID  # past storage
    assert abi.run("aclnnLogitGrad", 0, None) == NULLPTR  # null executor (a failed phase 1)
    status, size, executor = abi.phase1("aclnnLogitGrad", tx, tdy, -1.0, tout)
    assert status == 0 and executor.value
    assert abi.run("aclnnLogitGrad", size, executor) == 0
    assert torch.equal(out, dy / (x * (1 - x)))
    for t in [tx, tdy, tout, half]:
        assert lib.aclDestroyTensor(t) == 0
    assert lib.aclDestroyTensor(None) == 0


def test_abi_logit_grad_selects_the_fill_for_nan_x(abi):
    abi.lib.aclnnLogitGradGetWorkspaceSize.argtypes = [P, P, ctypes.c_double, P, P, P]
    x, dy = torch.tensor([math.nan, 0.5, 2.0]), torch.ones(3)
    for eps, fill in [(0.0, 0.0), (0.25, 0.0), (-1.0, math.nan), (math.nan, math.nan)]:
        out = torch.zeros(3)
        status, size, executor = abi.phase1("aclnnLogitGrad", abi.tensor(x), abi.tensor(dy), eps, abi.tensor(out))
        assert status == 0 and abi.run("aclnnLogitGrad", size, executor) == 0
        assert_same(out, torch.tensor([fill, 4.0, fill]))


def test_abi_gelu_backward_v2(abi):
    lib = abi.lib
    lib.aclnnGeluBackwardV2GetWorkspaceSize.argtypes = [P, P, ctypes.c_char_p, P, P, P]
    g, x, out = torch.ones(3), torch.tensor([-1.0, 0.0, 2.0]), torch.zeros(3)
    tg, tx, tout = abi.tensor(g), abi.tensor(x), abi.tensor(out)
    g9 = torch.ones([1] * 9)
    assert abi.phase1("aclnnGeluBackwardV2", abi.tensor(g9), abi.tensor(g9), b"none", abi.tensor(g9))[0] == INVALID
    assert abi.phase1("aclnnGeluBackwardV2", tg, tx, None, tout)[0] == NULLPTR
    assert abi.phase1("aclnnGeluBackwardV2", tg, tx, b"Tanh", tout)[0] == INVALID
    assert abi.phase1("aclnnGeluBackwardV2", tg, tx, b"none", abi.tensor(torch.zeros(3).half()))[0] == INVALID
    status, size, executor = abi.phase1("aclnnGeluBackwardV2", tg, tx, b"none", tout)
    assert status == 0 and abi.run("aclnnGeluBackwardV2", size, executor) == 0
    expected = 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    torch.testing.assert_close(out, expected)


def test_abi_prelu_backward(abi):
    lib = abi.lib
    lib.aclnnPreluBackwardGetWorkspaceSize.argtypes = [P, P, P, P, P, P, P]
    x = torch.tensor([[1.0, -2.0], [-3.0, 4.0]])
    g, w = torch.ones(2, 2), torch.tensor([0.5, 0.25])
    gi, gw = torch.zeros(2, 2), torch.zeros(2)
    args = [abi.tensor(g), abi.tensor(x), abi.tensor(w), abi.tensor(gi)]
    assert abi.phase1("aclnnPreluBackward", *args, None)[0] == NULLPTR
    assert abi.phase1("aclnnPreluBackward", *args, abi.tensor(torch.zeros(2, 1)))[0] == INVALID  # not 1-D
    status, size, executor = abi.phase1("aclnnPreluBackward", *args, abi.tensor(gw))
    assert status == 0 and size > 0
    assert abi.run("aclnnPreluBackward", 0, executor) == INVALID  # workspace size differs from phase 1
    status, size, executor = abi.phase1("aclnnPreluBackward", *args, abi.tensor(gw))
    assert abi.run("aclnnPreluBackward", size, executor) == 0
    assert torch.equal(gi, torch.tensor([[1.0, 0.25], [0.5, 1.0]]))
    assert torch.equal(gw, torch.tensor([-3.0, -2.0]))
    s0 = torch.tensor(-1.0)  # 0-dim self: not reshaped by aclnn, the kernels index its dimension 1
    assert abi.phase1("aclnnPreluBackward", abi.tensor(s0), abi.tensor(s0), abi.tensor(torch.ones(1)),
                      abi.tensor(s0.clone()), abi.tensor(torch.zeros(1)))[0] == 561002


def test_abi_grouped_bias_add_grad(abi):
    lib = abi.lib
    lib.aclnnGroupedBiasAddGradGetWorkspaceSize.argtypes = [P, P, P, P, P]
    lib.aclnnGroupedBiasAddGradV2GetWorkspaceSize.argtypes = [P, P, ctypes.c_int64, P, P, P]
    gy, out = torch.arange(8.0).view(4, 2), torch.zeros(2, 2)
    tgy, tout = abi.tensor(gy), abi.tensor(out)
    idx = abi.tensor(torch.tensor([1, 3], dtype=torch.int32))
    assert abi.phase1("aclnnGroupedBiasAddGrad", None, idx, tout)[0] == NULLPTR
    assert abi.phase1("aclnnGroupedBiasAddGrad", tgy, None, tout)[0] == INVALID  # 2-D gradY needs groupIdx
    assert abi.phase1("aclnnGroupedBiasAddGradV2", tgy, idx, 2, tout)[0] == INVALID
    assert abi.phase1("aclnnGroupedBiasAddGradV2", tgy, abi.tensor(torch.tensor([[4]], dtype=torch.int32)), 0,
                      tout)[0] == INVALID
    status, size, executor = abi.phase1("aclnnGroupedBiasAddGradV2", tgy, idx, 1, tout)  # counts 1, 3
    assert status == 0 and abi.run("aclnnGroupedBiasAddGradV2", size, executor) == 0
    assert torch.equal(out, torch.tensor([[0.0, 1.0], [2 + 4 + 6.0, 3 + 5 + 7.0]]))


def test_abi_private_formats_as_the_real_operators_take_them(abi):
    """A tensor described in FRACTAL_NZ (its storage dims (ceil(n/16), ceil(m/16), 16, 16)), as torch_npu's ConvertType
    would pass one (the NPU path never does: it casts to ND first, tests/npu/test_npu_formats.py): the generated
    operators reject it against their ND-only OpDef, ScaledMaskedSoftmaxBackward by its own format check (A2/A3),
    and GeluBackwardV2 takes it and reads the tiles as if they were ND (docs/npu.md#private-storage-formats)."""
    lib = abi.lib
    fractal_nz = 29
    nz_storage = [1, 1, 16, 16]  # a (2, 4) tensor in NZ, zero-padded tiles
    tiles = torch.zeros(256)
    nz = abi.tensor(tiles, sizes=[2, 4], strides=[4, 1], storage=nz_storage, fmt=fractal_nz)
    nd = [abi.tensor(torch.rand(2, 4) * 0.5 + 0.25) for _ in range(3)]
    lib.aclnnLogitGradGetWorkspaceSize.argtypes = [P, P, ctypes.c_double, P, P, P]
    assert abi.phase1("aclnnLogitGrad", nz, nd[0], -1.0, nd[1])[0] == INVALID
    assert "inconsistent with that defined in the operator prototype OpDef" in abi.last_error()
    assert "FRACTAL_NZ" in abi.last_error()
    lib.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize.argtypes = [P, P, P, ctypes.c_double, ctypes.c_bool, P, P, P]
    g4 = abi.tensor(torch.zeros(4096), sizes=[1, 1, 2, 4], strides=[8, 8, 4, 1], storage=[1, 1, 1, 1, 16, 16],
                    fmt=fractal_nz)
    y4, out4, mask = abi.tensor(torch.rand(1, 1, 2, 4)), abi.tensor(torch.zeros(1, 1, 2, 4)), abi.tensor(
        torch.zeros(1, 1, 2, 4, dtype=torch.bool))
    assert abi.phase1("aclnnScaledMaskedSoftmaxBackward", g4, y4, mask, 1.0, False, out4)[0] == INVALID
    assert abi.last_error() == ("Input and output format only support [ND]. Actual: gradOutput:[FRACTAL_NZ], y:[ND], "
                                "out:[ND].")
    lib.aclnnGeluBackwardV2GetWorkspaceSize.argtypes = [P, P, ctypes.c_char_p, P, P, P]
    status, size, executor = abi.phase1("aclnnGeluBackwardV2", nd[0], nz, b"none", nd[2])
    assert status == 0 and abi.run("aclnnGeluBackwardV2", size, executor) == 0


def test_abi_scaled_masked_softmax_backward(abi):
    lib = abi.lib
    lib.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize.argtypes = [P, P, P, ctypes.c_double, ctypes.c_bool, P, P, P]
    g, y = torch.tensor([[[[1.0, 2.0]]]]), torch.tensor([[[[0.25, 0.75]]]])
    mask, out = torch.tensor([[[[False, True]]]]), torch.zeros(1, 1, 1, 2)
    args = [abi.tensor(g), abi.tensor(y), abi.tensor(mask)]
    assert abi.phase1("aclnnScaledMaskedSoftmaxBackward", *args, 1.0, True, abi.tensor(out))[0] == INVALID
    assert abi.phase1("aclnnScaledMaskedSoftmaxBackward", *args[:2], abi.tensor(mask.float()), 1.0, False,
                      abi.tensor(out))[0] == INVALID  # mask must be bool
    assert abi.phase1("aclnnScaledMaskedSoftmaxBackward", *args[:2], None, 1.0, False, abi.tensor(out))[0] == NULLPTR
    status, size, executor = abi.phase1("aclnnScaledMaskedSoftmaxBackward", *args, 2.0, False, abi.tensor(out))
    assert status == 0 and abi.run("aclnnScaledMaskedSoftmaxBackward", size, executor) == 0
    s = 1.0 * 0.25 + 2.0 * 0.75
    assert torch.equal(out, torch.tensor([[[[2.0 * (1.0 - s) * 0.25, 0.0]]]]))


# Which kernels (L0 ops) each SoC's op package has, as the families' models declare them (their OpFamily objects in
# tests/fake_cann/opapi/ops/<family>.cpp; docs/npu.md): all on Atlas A2 / A3 and Ascend950 (either name), only
# ScaledMaskedSoftmaxGradV2 of the A2/A3/950-only ones on Ascend310P, GeluGradV2 and PReluGradUpdate everywhere.
A2_A3_950_ONLY = {"GroupedBiasAddGrad", "LogitGrad", "Logit", "ScaledMaskedSoftmaxV2", "ScaledMaskedSoftmaxGradV2"}
MISSING_KERNELS = {"Ascend910B3": set(), "Ascend910_9382": set(), "Ascend950PR_9599": set(), "Ascend910_9589": set(),
                   "Ascend310P3": A2_A3_950_ONLY - {"ScaledMaskedSoftmaxGradV2"}, "Ascend910A": A2_A3_950_ONLY}
FIND_KERNEL_ERROR, INNER = 561003, 561000


def _call_with_kernel(abi, kernel):
    """The status of the call of `kernel`'s operator on valid fp32 arguments: phase 1's, or for the hand-written
    GroupedBiasAddGrad (whose missing kernel only its launch finds) its launch's."""
    lib, d, b = abi.lib, ctypes.c_double, ctypes.c_bool
    t = lambda *shape, **kw: abi.tensor(torch.rand(*shape, **kw) * 0.5 + 0.25)  # noqa: E731
    mask = lambda: abi.tensor(torch.zeros(1, 1, 2, 4, dtype=torch.bool))  # noqa: E731
    api, argtypes, args = {
        "GeluGradV2": ("aclnnGeluBackwardV2", [P, P, ctypes.c_char_p], (t(3), t(3), b"none", t(3))),
        "PReluGradUpdate": ("aclnnPreluBackward", [P] * 5, (t(2, 3), t(2, 3), t(3), t(2, 3), t(3))),
        "GroupedBiasAddGrad": ("aclnnGroupedBiasAddGrad", [P] * 3, (t(2, 3, 4), None, t(2, 4))),
        "ScaledMaskedSoftmaxGradV2": ("aclnnScaledMaskedSoftmaxBackward", [P, P, P, d, b, P],
                                      (t(1, 1, 2, 4), t(1, 1, 2, 4), mask(), 1.0, False, t(1, 1, 2, 4))),
        "ScaledMaskedSoftmaxV2": ("aclnnScaledMaskedSoftmax", [P, P, d, b, P],
                                  (t(1, 1, 2, 4), mask(), 1.0, False, t(1, 1, 2, 4))),
        "LogitGrad": ("aclnnLogitGrad", [P, P, d, P], (t(3), t(3), -1.0, t(3))),
        "Logit": ("aclnnLogit", [P, d, P], (t(3), -1.0, t(3))),
    }[kernel]
    getattr(lib, api + "GetWorkspaceSize").argtypes = argtypes + [P, P]
    status, size, executor = abi.phase1(api, *args)
    if status == 0 and kernel == "GroupedBiasAddGrad":
        status = abi.run(api, size, executor)
    elif status == 0:
        assert lib.aclDestroyAclOpExecutor(executor) == 0
    for a in args:
        if isinstance(a, int) and not isinstance(a, bool):
            assert lib.aclDestroyTensor(a) == 0
    return status


@pytest.mark.parametrize("soc", sorted(MISSING_KERNELS))
def test_abi_kernels_per_soc(abi, monkeypatch, soc):
    monkeypatch.setenv("NPU_FAKE_SOC", soc)
    monkeypatch.delenv("NPU_FAKE_NO_KERNEL", raising=False)
    for kernel in sorted(A2_A3_950_ONLY | {"GeluGradV2", "PReluGradUpdate"}):
        missing = kernel in MISSING_KERNELS[soc]
        expected = 0 if not missing else INNER if kernel == "GroupedBiasAddGrad" else FIND_KERNEL_ERROR
        assert _call_with_kernel(abi, kernel) == expected, (soc, kernel, abi.last_error())
    monkeypatch.setenv("NPU_FAKE_NO_KERNEL", "GeluGradV2,Logit")  # an older op package: removed on any SoC
    assert _call_with_kernel(abi, "GeluGradV2") == FIND_KERNEL_ERROR
    assert _call_with_kernel(abi, "Logit") == FIND_KERNEL_ERROR
    assert _call_with_kernel(abi, "PReluGradUpdate") == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_standin_rounding_is_bit_exact(backend, dtype):
    """logit_grad is one fp32 expression rounded once: the stand-in's own fp16/bf16 conversions (normal,
    subnormal, overflow to inf) must give the CPU kernel's bits exactly."""
    torch.manual_seed(10)
    x = (torch.rand(4096) * 1.2 - 0.1).to(dtype)
    dy = (torch.randn(4096) * 1e3).to(dtype)
    special = {torch.float16: [1e-7, 6e-8, 3e-8, 65519.0, 65520.0, 1e5, -1e-6],
               torch.bfloat16: [1e-40, 3e38, -1e-30], torch.float32: [1e-45, 3e38, -1e-38]}[dtype]
    x = torch.cat([x, torch.full((len(special),), 0.5, dtype=dtype)])
    dy = torch.cat([dy, torch.tensor(special).to(dtype)])
    got, expected = npu(ops.logit_grad.default, x, dy, 0.01), ops.logit_grad(x, dy, 0.01)
    assert torch.equal(got.view(torch.int16 if dtype != torch.float32 else torch.int32),
                       expected.view(torch.int16 if dtype != torch.float32 else torch.int32))


# ------------------------------------------------------------------------------------------------------------
# aclnn as it really behaves (the models follow the CANN sources, see tests/fake_cann/opapi/ops/<family>.cpp).

SENTINEL = 77.0  # exact in fp16, bf16 and fp32


def framed_view(base, shape, kind):
    """A view of `shape` into `base` (a larger tensor): "transposed" (reversed dims, after a 3-element offset;
    every other element for 1-D) or "sliced" (the middle of a tensor one larger on both sides of every dim)."""
    if kind == "transposed":
        n = math.prod(shape)
        if len(shape) == 1:
            return base.view(-1)[3:3 + 2 * n:2]
        return base.view(-1)[3:3 + n].view(list(shape)[::-1]).permute(list(range(len(shape)))[::-1])
    return base[tuple(slice(1, 1 + s) for s in shape)]


def framed_out(shape, dtype, kind):
    """(storage, view, covered): a sentinel-filled storage, an output view into it, and which storage elements
    the view covers."""
    big_shape = (2 * math.prod(shape) + 6,) if kind == "transposed" else tuple(s + 2 for s in shape)
    storage = torch.full(big_shape, SENTINEL, dtype=dtype)
    positions = torch.arange(storage.numel()).view(big_shape)
    covered = torch.zeros(storage.numel(), dtype=torch.bool)
    covered[framed_view(positions, shape, kind).reshape(-1)] = True
    view = framed_view(storage, shape, kind)
    assert not view.is_contiguous() or (kind == "sliced" and len(shape) == 1)  # 1-D: a slice with an offset
    return storage, view, covered


def assert_only_view_written(storage, covered):
    outside = storage.reshape(-1)[~covered]
    assert outside.numel() > 0 and bool((outside == SENTINEL).all()), "written outside the output's view"


def out_cases(dtype):
    """(overload, args, {out name: shape}) for every op's .out overload."""
    torch.manual_seed(11)
    g, x = torch.randn(4, 6).to(dtype), torch.randn(6).to(dtype)
    pg, px, pw = prelu_inputs(dtype)
    sg, sy, smask = softmax_inputs(dtype)
    lx, ldy = logit_inputs(dtype)
    gy = torch.randn(10, 8).to(dtype)
    return [
        (ops.gelu_backward_v2.out, (g, x, "tanh"), {"grad_input": (4, 6)}),
        (ops.prelu_backward.out, (pg, px, pw), {"grad_input": (4, 3, 5), "grad_weight": (3,)}),
        (ops.grouped_bias_add_grad.out, (gy, torch.tensor([3, 3, 7, 10]), 0), {"out": (4, 8)}),
        (ops.scaled_masked_softmax_backward.out, (sg, sy, smask, 0.5, False), {"out": (2, 3, 4, 16)}),
        (ops.logit_grad.out, (lx, ldy, 0.05), {"dx": (6, 7)}),
    ]


@pytest.mark.parametrize("kind", ["transposed", "sliced"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(5), ids=["gelu", "prelu", "grouped", "softmax", "logit"])
def test_out_layouts_never_write_outside_the_view(backend, case, dtype, kind):
    """Strided and sliced `.out` tensors for every op: aclnnScaledMaskedSoftmaxBackward and aclnnLogitGrad write
    densely from the storage offset, so the NPU path computes into a temporary and copies back; the others copy
    into strided outputs themselves. Either way the values are the CPU kernel's and nothing outside the view
    changes."""
    overload, args, outs = out_cases(dtype)[case]
    framed = {name: framed_out(shape, dtype, kind) for name, shape in outs.items()}
    assert npu(overload, *args, **{name: f[1] for name, f in framed.items()}) is None
    expected = overload.overloadpacket(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for (storage, view, covered), exp in zip(framed.values(), expected):
        assert_close(view, exp)
        assert_only_view_written(storage, covered)


def test_dense_writer_corrupts_a_strided_out_when_called_directly(abi):
    """The model really ignores out's strides for aclnnLogitGrad (so the test above can fail): called with a sliced
    out, it writes densely from the storage offset, past the view."""
    x, dy = logit_inputs(torch.float32)
    storage, view, covered = framed_out(x.shape, torch.float32, "sliced")
    abi.lib.aclnnLogitGradGetWorkspaceSize.argtypes = [P, P, ctypes.c_double, P, P, P]
    status, size, executor = abi.phase1("aclnnLogitGrad", abi.tensor(x), abi.tensor(dy), -1.0, abi.tensor(view))
    assert status == 0 and abi.run("aclnnLogitGrad", size, executor) == 0
    assert not bool((storage.reshape(-1)[~covered] == SENTINEL).all())


# Mixed dtypes with a 0-dim operand: PyTorch's result_type lets the dimensioned tensor win; aclnn's PromoteType
# has no such rule (fp32 for any two different float dtypes) and would reject gradInput's dtype.
ZERO_DIM_CASES = [(torch.float32, torch.float16), (torch.float32, torch.bfloat16), (torch.float16, torch.bfloat16),
                  (torch.bfloat16, torch.float16)]


@pytest.mark.parametrize("zero_dim_arg", ["grad_output", "self"])
@pytest.mark.parametrize("dtypes", ZERO_DIM_CASES, ids=lambda d: f"{d[0]}-{d[1]}".replace("torch.", ""))
def test_gelu_backward_v2_zero_dim_promotion(backend, dtypes, zero_dim_arg):
    zero_dim_dtype, tensor_dtype = dtypes
    torch.manual_seed(12)
    scalar = torch.tensor(1.7).to(zero_dim_dtype)
    tensor = (torch.randn(4, 5) * 2).to(tensor_dtype)
    g, x = (scalar, tensor) if zero_dim_arg == "grad_output" else (tensor, scalar)
    expected = ops.gelu_backward_v2(g, x, "none")
    assert expected.dtype == tensor_dtype  # PyTorch's rule: the 0-dim operand does not promote
    backend.reset()
    got = npu(ops.gelu_backward_v2.default, g, x, "none")
    assert backend.aclnn_calls() == {"aclnnGeluBackwardV2": 2}
    backend.synchronize()  # nothing failed in the task queue
    assert_close(got, expected)
