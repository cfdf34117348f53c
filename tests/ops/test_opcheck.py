"""torch.library.opcheck on every operator and overload: schema, fake (Meta) kernels, autograd registration,
and AOT dispatch with dynamic shapes. Inputs: the sample table (samples.py, size "tiny"), every op and
variant in fp32 and bf16, contiguous and strided, functional and .out."""

import pytest
import torch

from torch_ext.testing import samples

ops = torch.ops.npu_ext


def _samples():
    for layout in ("contiguous", "transposed"):
        for s in samples.samples("tiny", dtypes=(torch.float32, torch.bfloat16), layout=layout):
            yield f"{s.id}-{layout}", s.info.op.default, s.args, s.kwargs
            if layout == "contiguous":
                yield f"{s.id}-out", s.info.op.out, s.args, dict(s.kwargs, **s.out_kwargs())


SAMPLES = list(_samples())


@pytest.mark.parametrize("name,op,args,kwargs", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_opcheck(name, op, args, kwargs):
    torch.library.opcheck(op, args, kwargs)


def test_every_overload_is_covered():
    covered = {op.name() for _, op, _, _ in SAMPLES}
    expected = {f"npu_ext::{name}" + ("" if overload == "default" else f".{overload}")
                for name in samples.OPS for overload in ["default", "out"]}
    assert expected <= covered
    # every backward op registered (the ops with an .out overload) has its samples
    registered = {n[len("npu_ext::"):-len(".out")] for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("npu_ext::") and n.endswith(".out")}
    assert set(samples.OPS) == registered and len(registered) >= 5, (sorted(samples.OPS), sorted(registered))
