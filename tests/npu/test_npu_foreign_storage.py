"""npu tensors over a foreign storage with the extension's ops, in the real torch_npu runtime on the fake CANN (make
test-npu, and every release row of make test-versions; skipped elsewhere).

A tensor made with at::from_blob (or imported through DLPack) over device memory has a plain c10::StorageImpl, not
torch_npu's NPUStorageImpl: it carries no NPU format descriptor. torch_npu's get_npu_format reads one anyway, past the
end of the storage object, up to 2.12, and raises from 2.13 (NPUBridge.cpp's typeid check). The NPU path asks for a
tensor's format only when its storage is an NPUStorageImpl (csrc/core/npu/torch_npu_compat.cpp, npu_storage) and
treats a foreign one as its base format. Every operator runs here on foreign aliases of its inputs (and outputs),
bit for bit as on the same tensors with torch_npu's storage. On 2.13 and later a read of the descriptor would raise,
so a pass there also shows it is never read.
"""

import sys
from pathlib import Path

import pytest
import torch

import paths
import torch_ext

pytestmark = pytest.mark.skipif(not torch_ext._npu.LOADED, reason="needs torch_ext._C_npu (make test-npu)")

ROOT = Path(paths.ROOT)
HELPER = r"""
#include <torch/extension.h>
#include <typeinfo>

// An alias of t over the same device memory with a plain c10::StorageImpl (at::for_blob), keeping t alive.
at::Tensor foreign_alias(const at::Tensor& t) {
  auto* keep = new at::Tensor(t);
  return at::for_blob(t.data_ptr(), t.sizes())
      .strides(t.strides())
      .deleter([keep](void*) { delete keep; })
      .options(t.options())
      .target_device(t.device())
      .make_tensor();
}

std::string storage_type(const at::Tensor& t) { return typeid(*t.storage().unsafeGetStorageImpl()).name(); }
"""


@pytest.fixture(scope="module")
def helper():
    from torch.utils.cpp_extension import load_inline

    import torch_npu

    tag = f"torch{torch.__version__.split('+')[0]}-npu{torch_npu.__version__.split('+')[0]}-py{sys.version_info[1]}"
    build = ROOT / "build" / "test_helpers" / f"foreign_storage-{tag}"
    build.mkdir(parents=True, exist_ok=True)
    return load_inline("npu_ext_foreign_storage", cpp_sources=HELPER, functions=["foreign_alias", "storage_type"],
                       build_directory=str(build), extra_cflags=["-O1"], verbose=False)


def _foreign(helper, t):
    alias = helper.foreign_alias(t)
    assert helper.storage_type(alias) == "N3c1011StorageImplE" and helper.storage_type(t).endswith("NPUStorageImplE")
    return alias


def _unit(*shape):
    return torch.rand(*shape) * 0.9 + 0.05


def _cases():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    x4, mask = r(2, 2, 4, 8), torch.rand(2, 1, 4, 8, generator=g) > 0.7
    y4 = torch.softmax(x4, -1)
    gidx = torch.tensor([2, 6])
    ops = torch.ops.npu_ext
    return {
        "gelu_backward_v2 none": (ops.gelu_backward_v2, (r(4, 8), r(4, 8), "none"), ("grad_input",)),
        "gelu_backward_v2 tanh": (ops.gelu_backward_v2, (r(4, 8), r(4, 8), "tanh"), ("grad_input",)),
        "prelu_backward": (ops.prelu_backward, (r(2, 3, 4), r(2, 3, 4), r(3)), ("grad_input", "grad_weight")),
        "grouped_bias_add_grad": (ops.grouped_bias_add_grad, (r(6, 8), gidx, 0), ("out",)),
        "scaled_masked_softmax_backward": (ops.scaled_masked_softmax_backward, (r(2, 2, 4, 8), y4, mask, 0.5, False),
                                           ("out",)),
        "logit_grad": (ops.logit_grad, (_unit(4, 8), r(4, 8), 0.01), ("dx",)),
        "gelu": (ops.gelu, (r(4, 8), "tanh"), ()),
        "prelu": (ops.prelu, (r(2, 3, 4), r(3)), ()),
        "logit": (ops.logit, (_unit(4, 8), None), ()),
        "scaled_masked_softmax": (ops.scaled_masked_softmax, (x4, mask, 0.5, False, "uniform"), ()),
        "grouped_bias_add": (ops.grouped_bias_add, (r(6, 8), r(2, 8), gidx, 0, None), ()),
    }


CASES = _cases()


def _same(a, b):
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("case", list(CASES))
def test_inputs_over_a_foreign_storage(helper, case):
    op, host, _ = CASES[case]
    args = [a.to("npu") if isinstance(a, torch.Tensor) else a for a in host]
    foreign = [_foreign(helper, a) if isinstance(a, torch.Tensor) else a for a in args]
    want = _as_tuple(op(*args))
    got = _as_tuple(op(*foreign))
    for w, o in zip(want, got):
        assert _same(o.cpu(), w.cpu()), case


@pytest.mark.parametrize("case", [c for c, (_, _, outs) in CASES.items() if outs])
def test_outputs_over_a_foreign_storage(helper, case):
    op, host, outs = CASES[case]
    args = [a.to("npu") if isinstance(a, torch.Tensor) else a for a in host]
    want = _as_tuple(op(*args))
    given = {name: _foreign(helper, torch.full_like(w, 7.0)) for name, w in zip(outs, want)}
    assert op.out(*args, **given) is None
    for name, w in zip(outs, want):
        assert _same(given[name].cpu(), w.cpu()), (case, name)
