"""The scenarios of tests/npu/test_npu_format_cast_aclnn.py, each run in a process of its own (the CANN version and the
SoC are read once per process): `python format_cast_worker.py <scenario>` with that machine's NPU_FAKE_SOC and
NPU_FAKE_CANN_VERSION prints one JSON object (the counts of the cast's entry points, the results compared with the
base-format ones, the errors). Inside the real torch_npu runtime on the fake CANN."""

import ctypes
import json
import os
import sys
import warnings

import torch

import fake_cann_lib

ND, NC1HWC0, FRACTAL_NZ = 2, 3, 29
ROUTE = ["aclnnNpuFormatCastCalculateSizeAndFormat", "aclnnNpuFormatCastGetWorkspaceSize", "aclnnNpuFormatCast"]


class Fake:
    def __init__(self):
        self.opapi = fake_cann_lib.opapi()
        self.rt = fake_cann_lib.runtime()

    def counts(self):
        torch.npu.synchronize()
        out = {name: self.opapi.fake_opapi_calls(name.encode()) for name in ROUTE}
        out["acl_op Identity"] = self.rt.fake_cann_count(b"acl_op Identity")
        return out

    def since(self, before):
        now = self.counts()
        return {k: now[k] - before[k] for k in now}


def _oracle_nz(a, c0):
    """FRACTAL_NZ of a logical (..., m, n) array: (..., ceil(n/c0), ceil(m/16), 16, c0), zero padded."""
    import numpy as np

    *batch, m, n = a.shape
    m1, n1 = -(-m // 16), -(-n // c0)
    padded = np.zeros((*batch, m1 * 16, n1 * c0), dtype=a.dtype)
    padded[..., :m, :n] = a
    return np.moveaxis(padded.reshape(*batch, m1, 16, n1, c0), -2, -4)


def _storage_equals_oracle(t, x):
    import numpy as np

    torch.npu.synchronize()
    nbytes = t.untyped_storage().nbytes()
    raw = np.frombuffer(ctypes.string_at(t.untyped_storage().data_ptr(), nbytes), dtype=np.uint8)
    bits = x.view(torch.int16).numpy() if x.element_size() == 2 else x.view(torch.int32).numpy()
    want = _oracle_nz(bits, 16).reshape(-1)  # fp32 tiles as fp16 does: C0 = 16 (torch_npu passes FLOAT16)
    got = raw.view(bits.dtype)
    return bool(got.size >= want.size and (got[:want.size] == want).all())


def scenario_route(fake):
    """torch_npu.npu_format_cast to FRACTAL_NZ / NC1HWC0 and back: the route and the layouts."""
    import torch_npu

    out = {}
    for name, x, fmt in [("nz-fp32", torch.randn(20, 33), FRACTAL_NZ),
                         ("nz-bf16", torch.randn(2, 17, 40).bfloat16(), FRACTAL_NZ),
                         ("5hd-fp32", torch.randn(2, 20, 3, 5), NC1HWC0)]:
        before = fake.counts()
        y = torch_npu.npu_format_cast(x.to("npu"), fmt)
        cast = fake.since(before)
        back = torch_npu.npu_format_cast(y, ND if fmt == FRACTAL_NZ else 0)
        out[name] = {"format": torch_npu.get_npu_format(y), "to": cast, "back": fake.since(before),
                     "values": torch.equal(y.cpu(), x) and torch.equal(back.cpu(), x),
                     "layout": _storage_equals_oracle(y, x) if fmt == FRACTAL_NZ else None}
    return out


def cases():
    ops = torch.ops.npu_ext
    unit = lambda *s: torch.rand(*s) * 0.9 + 0.05  # noqa: E731
    softmax = (torch.randn(2, 2, 20, 48).half(), torch.softmax(torch.randn(2, 2, 20, 48), -1).half(),
               torch.rand(2, 1, 20, 48) > 0.7, 0.5)
    # name -> (op, host args, positions given in a private format, the format)
    return {
        "gelu_backward_v2": (ops.gelu_backward_v2, (torch.randn(20, 33), torch.randn(20, 33), "tanh"), (0, 1),
                             FRACTAL_NZ),
        "prelu_backward": (ops.prelu_backward, (torch.randn(4, 20, 33), torch.randn(4, 20, 33), torch.rand(20)),
                           (0, 1), FRACTAL_NZ),
        "logit_grad": (ops.logit_grad, (unit(20, 33), torch.randn(20, 33), 0.1), (0, 1), FRACTAL_NZ),
        "gelu": (ops.gelu, (torch.randn(20, 33), "tanh"), (0,), FRACTAL_NZ),
        "scaled_masked_softmax_backward-5hd": (ops.scaled_masked_softmax_backward, softmax, (0, 1), NC1HWC0),
    }


def _run(op, args):
    out = op(*args)
    return tuple(o.cpu() for o in (out if isinstance(out, tuple) else (out,)))


def scenario_ops(fake):
    """The extension's operators with contiguous private-format inputs: the same result as with base formats, the
    inputs cast to their base format on the route torch_npu takes."""
    import torch_npu

    out = {}
    for name, (op, host, private, fmt) in cases().items():
        if fmt == NC1HWC0 and os.environ["NPU_FAKE_SOC"].startswith("Ascend950"):
            continue  # NC1HWC0 on an Ascend950: not modelled by the fake (format_cast.cpp)
        base = [a.to("npu") if isinstance(a, torch.Tensor) else a for a in host]
        want = _run(op, base)
        args = list(base)
        for i in private:
            args[i] = torch_npu.npu_format_cast(host[i].to("npu"), fmt)
        formats = {i: torch_npu.get_npu_format(args[i]) for i in private}  # Ascend950: FRACTAL_NZ_C0_16 for fp32
        before = fake.counts()
        got = _run(op, args)
        out[name] = {"equal": all(torch.equal(g, w) for g, w in zip(got, want)), "casts": fake.since(before),
                     "private": len(private),
                     "formats": sorted(set(formats.values())),
                     # (the values through an explicit cast: torch_npu 2.12's copy_ refuses a private format on
                     # an Ascend950)
                     "kept": all(torch_npu.get_npu_format(args[i]) == formats[i] and
                                 torch.equal(torch_npu.npu_format_cast(args[i], ND if fmt == FRACTAL_NZ else 0).cpu(),
                                             host[i])
                                 for i in private)}
    return out


def _views(torch_npu, fmt):
    """Non-contiguous views of a private-format tensor: a transpose and a column slice (logical (20, 33) and
    (20, 17)), with the host tensors they show."""
    x = torch.randn(33, 20)
    nz = torch_npu.npu_format_cast(x.to("npu"), fmt)
    wide = torch.randn(20, 40)
    nz_wide = torch_npu.npu_format_cast(wide.to("npu"), fmt)
    return {"transpose": (nz.t(), x.t()), "slice": (nz_wide[:, 3:20], wide[:, 3:20])}


def scenario_views(fake):
    """The extension's gelu and logit_grad on non-contiguous views of a FRACTAL_NZ tensor: the result, or the error
    torch_npu's cast raised, and the route of the cast."""
    import torch_npu

    ops = torch.ops.npu_ext
    out = {}
    for name, (view, host) in _views(torch_npu, FRACTAL_NZ).items():
        assert not view.is_contiguous()
        y = torch.sigmoid(host).to("npu")  # (on an Ascend950 torch_npu's own view.cpu() refuses the view too)
        for op_name, op, args in [("gelu", ops.gelu, lambda v: (v, "tanh")),
                                  ("logit_grad", ops.logit_grad, lambda v: (y, v, 0.1))]:
            want = _run(op, args(host.to("npu")))
            given = args(view)
            before = fake.counts()
            try:
                got = _run(op, given)
                result = {"equal": all(torch.equal(g, w) for g, w in zip(got, want))}
            except RuntimeError as e:
                result = {"error": str(e)}
            result["casts"] = fake.since(before)
            out[f"{op_name}-{name}"] = result
    # the process is still usable: a queued cast and operator afterwards
    x = torch.randn(20, 33).to("npu")
    y = torch_npu.npu_format_cast(x, FRACTAL_NZ)
    out["after"] = torch.equal(ops.gelu(y, "tanh").cpu(), ops.gelu(x, "tanh").cpu())
    return out


def scenario_fake_contiguity(fake):
    """The fake's aclnnNpuFormatCastGetWorkspaceSize called directly (ctypes) with a non-contiguous ND source, as CANN's
    CheckGetWorkSpaceSizeInputs refuses it, and with the same data contiguous."""
    lib = fake.opapi
    lib.aclCreateTensor.restype = ctypes.c_void_p
    lib.aclCreateTensor.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, ctypes.c_int32,
                                    ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.c_int32,
                                    ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, ctypes.c_void_p]
    lib.aclnnNpuFormatCastGetWorkspaceSize.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                                       ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_void_p)]
    lib.aclnnNpuFormatCast.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
    lib.aclDestroyTensor.argtypes = [ctypes.c_void_p]
    arr = lambda *v: (ctypes.c_int64 * len(v))(*v)  # noqa: E731
    host = torch.arange(40 * 20, dtype=torch.float32).reshape(40, 20)  # the source's storage (host memory here)
    dst_mem = torch.full((2, 2, 16, 16), -1.0)  # FRACTAL_NZ of a logical (20, 20): (ceil(20/16), ceil(20/16), 16, 16)
    out = {}
    for name, strides in [("non-contiguous", (40, 1)), ("contiguous", (20, 1))]:
        view = host.reshape(-1)[:20 * 20].reshape(20, 20) if name == "contiguous" else host.reshape(20, 40)[:, :20]
        src = lib.aclCreateTensor(arr(20, 20), 2, 0, arr(*strides), 0, ND, arr(host.numel()), 1,
                                  ctypes.c_void_p(host.data_ptr()))
        dst = lib.aclCreateTensor(arr(20, 20), 2, 0, arr(20, 1), 0, FRACTAL_NZ, arr(2, 2, 16, 16), 4,
                                  ctypes.c_void_p(dst_mem.data_ptr()))
        ws, ex = ctypes.c_uint64(0), ctypes.c_void_p()
        status = lib.aclnnNpuFormatCastGetWorkspaceSize(src, dst, ctypes.byref(ws), ctypes.byref(ex))
        result = {"status": status, "message": lib.fake_opapi_last_error().decode() if status else ""}
        if status == 0:
            result["launch"] = lib.aclnnNpuFormatCast(None, ws.value, ex, None)
            result["layout"] = bool((dst_mem.numpy() == _oracle_nz(view.contiguous().numpy(), 16)).all())
        lib.aclDestroyTensor(src)
        lib.aclDestroyTensor(dst)
        out[name] = result
    return out


SCENARIOS = {"route": scenario_route, "ops": scenario_ops, "views": scenario_views,
             "fake_contiguity": scenario_fake_contiguity}


def main(name):
    import torch_ext  # noqa: F401  (the npu_ext operators)
    import torch_npu  # noqa: F401

    warnings.simplefilter("ignore")
    torch.npu.config.allow_internal_format = True
    torch.manual_seed(0)
    fake = Fake()
    print(json.dumps(SCENARIOS[name](fake)))


if __name__ == "__main__":
    main(sys.argv[1])
