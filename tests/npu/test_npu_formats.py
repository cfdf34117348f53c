"""torch_npu's private storage formats with the extension's ops, in the real torch_npu runtime on the fake CANN
(make test-npu, and every release row of make test-versions; skipped elsewhere).

torch_npu can give a tensor a private format (torch_npu.npu_format_cast; FRACTAL_NZ = 29, NC1HWC0 = 3): its logical
shape stays, its memory holds a tiled, zero-padded layout. torch_npu creates them where allow_internal_format is on
(the default before Atlas A2; `torch.npu.config.allow_internal_format = True` here, the fake being an Ascend910B3).
torch_npu itself never passes one to an aclnn operator: op-plugin's generated dispatch sends a call with such an
input to the operator's acl_op kernel (whose graph inserts TransData). The extension has no acl_op kernels: it casts
such an input to its base format before aclnn (csrc/core/npu/torch_npu_compat.h, base_format), and computes an output
the caller gave in a private format into a base-format temporary that torch_npu's copy_ converts back (OutSlot).

The fake CANN makes such tensors the way CANN does on torch_npu's acl_op route: an Identity whose descriptors carry
the two formats (tests/fake_cann/opapi/acl_op.cpp; the layouts in tests/fake_cann/opapi/formats.h). The first test
checks those layouts against an independent numpy oracle written from torch_npu's FormatHelper; the others check
every aclnn operator the extension calls with private-format inputs (and outputs): the same result, bit for bit, as
with base-format tensors, from the aclnn operator itself (no fallback), which saw base formats only.
"""

import ctypes
import warnings

import numpy as np
import pytest
import torch

import fake_cann_lib
import torch_ext

pytestmark = pytest.mark.skipif(not torch_ext._npu.LOADED, reason="needs torch_ext._C_npu (make test-npu)")

ND, NC1HWC0, FRACTAL_NZ = 2, 3, 29


@pytest.fixture(scope="module")
def npu():
    import torch_npu

    before = torch.npu.config.allow_internal_format if hasattr(torch.npu.config, "allow_internal_format") else None
    torch.npu.config.allow_internal_format = True
    lib = fake_cann_lib.opapi()
    yield torch_npu, lib
    torch.npu.config.allow_internal_format = bool(before)


def _cast(torch_npu, t, fmt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = torch_npu.npu_format_cast(t.to("npu"), fmt)
    assert torch_npu.get_npu_format(out) == fmt, "torch_npu did not make the private-format tensor"
    return out


def _storage_bytes(t):
    """The raw bytes of a device tensor's storage (device memory is host memory on the fake CANN)."""
    torch.npu.synchronize()
    nbytes = t.untyped_storage().nbytes()
    return np.frombuffer(ctypes.string_at(t.untyped_storage().data_ptr(), nbytes), dtype=np.uint8).copy()


def _oracle_nz(a, c0):
    """FRACTAL_NZ of a logical (..., m, n) array: (..., ceil(n/c0), ceil(m/16), 16, c0), zero padded."""
    *batch, m, n = a.shape
    m1, n1 = -(-m // 16), -(-n // c0)
    padded = np.zeros((*batch, m1 * 16, n1 * c0), dtype=a.dtype)
    padded[..., :m, :n] = a
    tiles = padded.reshape(*batch, m1, 16, n1, c0)
    return np.moveaxis(tiles, -2, -4)  # (..., n1, m1, 16, c0)


def _oracle_5hd(a):
    """NC1HWC0 of a logical NCHW array: (N, ceil(C/16), H, W, 16), zero padded."""
    n, c, h, w = a.shape
    c1 = -(-c // 16)
    padded = np.zeros((n, c1 * 16, h, w), dtype=a.dtype)
    padded[:, :c] = a
    return padded.reshape(n, c1, 16, h, w).transpose(0, 1, 3, 4, 2)


@pytest.mark.parametrize(
    "dtype,shape,fmt",
    [(torch.float32, (20, 33), FRACTAL_NZ), (torch.float16, (3, 20, 33), FRACTAL_NZ),
     (torch.bfloat16, (2, 17, 40), FRACTAL_NZ), (torch.float32, (2, 20, 3, 5), NC1HWC0)],
    ids=["nz-fp32", "nz-fp16-batch", "nz-bf16-batch", "5hd-fp32"])
def test_the_fake_lays_out_private_formats_as_cann(npu, dtype, shape, fmt):
    torch_npu, _ = npu
    x = (torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape) + 1).to(dtype)
    y = _cast(torch_npu, x, fmt)
    bits = x.view(torch.int16).numpy() if x.element_size() == 2 else x.view(torch.int32).numpy()
    want = _oracle_nz(bits, 16) if fmt == FRACTAL_NZ else _oracle_5hd(bits)  # fp32 tiles as fp16 does: C0 = 16
    got = _storage_bytes(y).view(bits.dtype)
    assert got.size >= want.size
    np.testing.assert_array_equal(got[:want.size], want.reshape(-1))
    assert torch.equal(y.cpu(), x)  # and back to ND
    assert torch.equal(torch_npu.npu_format_cast(y, ND).cpu(), x)


def _unit(*shape):
    return torch.rand(*shape) * 0.9 + 0.05


def _softmax_args():
    g, y = torch.randn(2, 2, 20, 48).half(), torch.softmax(torch.randn(2, 2, 20, 48), -1).half()
    return g, y, torch.rand(2, 1, 20, 48) > 0.7, 0.5


# api -> (op, host args, positions of the tensor arguments given in a private format, the format). Shapes are
# not multiples of the tiles, so the padding is there.
CASES = {
    "aclnnGeluBackwardV2": (torch.ops.npu_ext.gelu_backward_v2, lambda: (torch.randn(20, 33), torch.randn(20, 33),
                                                                         "tanh"), (0, 1), FRACTAL_NZ),
    "aclnnPreluBackward": (torch.ops.npu_ext.prelu_backward, lambda: (torch.randn(4, 20, 33), torch.randn(4, 20, 33),
                                                                      torch.rand(20)), (0, 1), FRACTAL_NZ),
    "aclnnGroupedBiasAddGrad": (torch.ops.npu_ext.grouped_bias_add_grad, lambda: (torch.randn(6, 40),
                                                                                  torch.tensor([2, 4, 6]), 0),
                                (0,), FRACTAL_NZ),
    "aclnnGroupedBiasAddGradV2": (torch.ops.npu_ext.grouped_bias_add_grad, lambda: (torch.randn(6, 40),
                                                                                    torch.tensor([1, 3, 2]), 1),
                                  (0,), FRACTAL_NZ),
    "aclnnScaledMaskedSoftmaxBackward": (torch.ops.npu_ext.scaled_masked_softmax_backward, _softmax_args, (0, 1),
                                         FRACTAL_NZ),
    "aclnnScaledMaskedSoftmaxBackward-5hd": (torch.ops.npu_ext.scaled_masked_softmax_backward, _softmax_args,
                                             (0, 1), NC1HWC0),
    "aclnnLogitGrad": (torch.ops.npu_ext.logit_grad, lambda: (_unit(20, 33), torch.randn(20, 33), 0.1), (0, 1),
                       FRACTAL_NZ),
    # "tanh": fp32 "none" is gelu.cpp's composite of torch_npu's ATen ops, whose acl_op kernels the fake lacks
    "aclnnGeluV2": (torch.ops.npu_ext.gelu, lambda: (torch.randn(20, 33), "tanh"), (0,), FRACTAL_NZ),
    "aclnnPrelu": (torch.ops.npu_ext.prelu, lambda: (torch.randn(4, 20, 33), torch.rand(20)), (0,), FRACTAL_NZ),
    "aclnnLogit": (torch.ops.npu_ext.logit, lambda: (_unit(20, 33), None), (0,), FRACTAL_NZ),
    "aclnnScaledMaskedSoftmax": (torch.ops.npu_ext.scaled_masked_softmax,
                                 lambda: (torch.randn(2, 2, 20, 48), torch.rand(2, 1, 20, 48) > 0.7, 0.5), (0,),
                                 FRACTAL_NZ),
}


def _run(op, args):
    out = op(*args)
    return tuple(o.cpu() for o in (out if isinstance(out, tuple) else (out,)))


@pytest.mark.parametrize("case", list(CASES))
def test_private_format_inputs_give_the_base_format_result(npu, case):
    torch_npu, lib = npu
    op, make, private, fmt = CASES[case]
    api = case.split("-")[0]
    host = make()
    base = [a.to("npu") if isinstance(a, torch.Tensor) else a for a in host]
    want = _run(op, base)
    args = list(base)
    for i in private:
        args[i] = _cast(torch_npu, host[i], fmt)
    torch.npu.synchronize()
    lib.fake_opapi_reset()  # counters and torch_npu's executor cache emptied: this call runs phase 1
    got = _run(op, args)
    for w, g in zip(want, got):
        assert torch.equal(g, w)
    assert lib.fake_opapi_calls((api + "GetWorkspaceSize").encode()) == 1, "the aclnn operator did not run"
    for rank in range(9):  # no aclTensor in a private format reached the operator
        for f in (FRACTAL_NZ, NC1HWC0):
            assert lib.fake_opapi_calls(f"format {f} rank {rank}".encode()) == 0
    for i in private:  # the caller's tensors are left as they were
        assert torch_npu.get_npu_format(args[i]) == fmt
        assert torch.equal(args[i].cpu(), host[i])


OUT_CASES = {
    # a dense writer (the caller's contiguous output written from its storage offset) and a strided one
    "aclnnLogitGrad": (torch.ops.npu_ext.logit_grad.out, torch.ops.npu_ext.logit_grad,
                       lambda: (_unit(20, 33), torch.randn(20, 33), 0.1), "dx"),
    "aclnnGeluBackwardV2": (torch.ops.npu_ext.gelu_backward_v2.out, torch.ops.npu_ext.gelu_backward_v2,
                            lambda: (torch.randn(20, 33), torch.randn(20, 33), "none"), "grad_input"),
}


@pytest.mark.parametrize("case", list(OUT_CASES))
def test_a_private_format_output_is_written_in_its_format(npu, case):
    torch_npu, lib = npu
    out_op, op, make, name = OUT_CASES[case]
    host = make()
    args = [a.to("npu") if isinstance(a, torch.Tensor) else a for a in host]
    want = op(*args).cpu()
    out = _cast(torch_npu, torch.full_like(want, 7.0), FRACTAL_NZ)
    torch.npu.synchronize()
    lib.fake_opapi_reset()
    out_op(*args, **{name: out})
    assert torch_npu.get_npu_format(out) == FRACTAL_NZ
    assert torch.equal(out.cpu(), want)
    assert lib.fake_opapi_calls((case + "GetWorkspaceSize").encode()) == 1
    assert lib.fake_opapi_calls(f"format {FRACTAL_NZ} rank 2".encode()) == 0
