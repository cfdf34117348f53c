"""The fake CANN's aclnnConstantPadNd (tests/fake_cann/opapi/aten_extra.cpp), which torch_npu's constant_pad_nd
launches (F.pad with mode="constant"; ProcessGroupHCCL pads a list all_gather's tensor with it): on the npu device
against a float64 result built by hand (a tensor of the value with the input copied at its offsets), and counted."""

import pytest
import torch
import torch.nn.functional as F

import fake_cann_lib

pytestmark = pytest.mark.skipif(fake_cann_lib.opapi() is None, reason="not the fake CANN (no fake_opapi_calls)")


def by_hand(x, pad, value):
    """The padded tensor: pad holds (before, after) pairs from the last dimension; a negative one crops."""
    x = x.double()
    pairs = [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)][::-1]
    pairs = [(0, 0)] * (x.dim() - len(pairs)) + pairs
    out = torch.full([n + a + b for n, (a, b) in zip(x.shape, pairs)], float(value), dtype=torch.float64)
    src, dst = [], []
    for n, (a, b) in zip(x.shape, pairs):
        src.append(slice(max(0, -a), n - max(0, -b)))
        dst.append(slice(max(0, a), max(0, a) + n - max(0, -a) - max(0, -b)))
    out[tuple(dst)] = x[tuple(src)]
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8])
@pytest.mark.parametrize("shape,pad,value", [((37,), (0, 91), 0), ((3, 5), (1, 2, 2, 0), 7),
                                             ((2, 3, 4), (-1, 2, 0, 0, 1, 1), -3)])
def test_constant_pad(dtype, shape, pad, value):
    x = (torch.arange(torch.Size(shape).numel(), dtype=torch.float64).reshape(shape) % 11 - 5).to(dtype)
    before = fake_cann_lib.opapi_calls("aclnnConstantPadNd")
    got = F.pad(x.npu(), pad, value=value).cpu()
    assert fake_cann_lib.opapi_calls("aclnnConstantPadNd") == before + 1
    want = by_hand(x, pad, value)
    assert got.dtype == dtype and got.shape == want.shape
    assert torch.equal(got.double(), want)
