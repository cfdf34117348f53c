"""The two harnesses that run the NPU path (csrc/ops/*/npu.cpp) without an NPU, behind one interface for the NPU-path tests
(tests/npu/test_npu_path*.py through tests/support/npu_path_common.py, tests/support/npu_path_scenarios.py).

* ``FakeCann`` (x86-64, ``make test-npu``): the REAL torch_npu runtime (a release of the release table) on the
  fake CANN libraries of tests/fake_cann. torch_ext is the build with torch_ext._C_npu; tensors are real ``npu``
  tensors made by torch_npu, the NPU kernels run through torch_npu's own argument conversion, executor cache and
  task queue into the fake libopapi.so.
* ``Standin`` (the aarch64 emulation only, where the real torch_npu wheel is not run): the NPU sources compiled against the
  stand-in headers of tests/npu_stub (their own EXEC_NPU_CMD machinery with torch_npu's contract), its PrivateUse1
  kernels called on CPU tensors with ``OpOverload.redispatch``; the aclnn side is the same operator models
  (tests/fake_cann/opapi/nnopbase.cpp, ops/*.cpp) built without torch.

``npu(overload, *args, **kwargs)`` runs the op's NPU kernel on CPU test tensors and returns CPU results: the fake-CANN
backend copies every tensor argument's whole storage to the device (same strides, offset and aliasing, so bytes
outside a view are there too), calls the op on those npu views, and copies every storage back, so `.out` tensors and
the memory around them read as on the device.
"""

import contextlib
import ctypes
import importlib
import importlib.util
import os
import platform

import torch

import fake_cann_lib
import paths
import torch_ext

from torch_ext.testing import samples

# The backward operators' aclnn entry points (each family's OpInfo.aclnn).
ACLNN_APIS = [api for info in samples.OPS.values() for api in info.aclnn]


class _Backend:
    name = ""
    device_index = 0

    def calls(self, key):
        """Calls counted by the fake libopapi (an entry point by name, either phase; "format <code> rank <n>")."""
        return self.opapi.fake_opapi_calls(key.encode())

    def api_calls(self, api):
        return self.calls(api + "GetWorkspaceSize") + self.calls(api)

    def aclnn_calls(self):
        """The backward operators' entry-point calls (both phases) since the last reset()."""
        return {api: self.api_calls(api) for api in ACLNN_APIS if self.api_calls(api)}

    def reset(self):
        self.opapi.fake_opapi_reset()

    def _load(self, path):
        self.opapi = fake_cann_lib.type_opapi(ctypes.CDLL(path))  # the handle the NPU path uses: shared counters


class FakeCann(_Backend):
    name = "fake_cann"
    device_index = 0

    def __init__(self):
        self.opapi = fake_cann_lib.opapi()  # found on LD_LIBRARY_PATH, as torch_npu found it
        self.runtime = fake_cann_lib.runtime()
        self._own_syncs = 0  # npu()'s own synchronisations, not the NPU path's

    def npu(self, overload, *args, **kwargs):
        storages = {}  # CPU storage pointer -> (CPU flat view, device flat tensor)

        def to_device(t):
            if not isinstance(t, torch.Tensor):
                return t
            key = t.untyped_storage().data_ptr()
            if key not in storages:
                n = t.untyped_storage().nbytes() // t.element_size()
                flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,))
                storages[key] = (flat, flat.to("npu"))
            return storages[key][1].as_strided(t.shape, t.stride(), t.storage_offset())

        result = overload(*[to_device(a) for a in args], **{k: to_device(v) for k, v in kwargs.items()})
        before = self.runtime.fake_cann_count(b"sync_device")
        torch.npu.synchronize()
        self._own_syncs += self.runtime.fake_cann_count(b"sync_device") - before
        for flat, dev in storages.values():
            flat.copy_(dev.cpu())
        if isinstance(result, (tuple, list)):
            return type(result)(r.cpu() if isinstance(r, torch.Tensor) else r for r in result)
        return result.cpu() if isinstance(result, torch.Tensor) else result

    def synchronize(self):
        torch.npu.synchronize()

    def device_syncs(self):
        """Device synchronisations made by the NPU path (the probes)."""
        return self.runtime.fake_cann_count(b"sync_device") - self._own_syncs

    def set_capturing(self, capturing):
        """Puts the current stream into (or out of) graph capture in the fake runtime: what torch_npu's capture
        status then reports (the NPU path must refuse host work)."""
        stream = ctypes.c_void_p(torch.npu.current_stream().npu_stream)
        if capturing:
            assert self.runtime.aclmdlRICaptureBegin(stream, 0) == 0
        else:
            model = ctypes.c_void_p()
            self.runtime.aclmdlRICaptureEnd(stream, ctypes.byref(model))


class Standin(_Backend):
    name = "standin"
    device_index = -1  # CPU tensors

    def __init__(self):
        npu_standin_build = paths.load(os.path.join(paths.NPU_STUB, "npu_standin_build.py"))

        self._load(npu_standin_build.setup())
        self._pu1 = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)

    def npu(self, overload, *args, **kwargs):
        return overload.redispatch(self._pu1, *args, **kwargs)

    def synchronize(self):
        torch.ops.npu_standin.synchronize()

    def device_syncs(self):
        return torch.ops.npu_standin.device_syncs()

    def set_capturing(self, capturing):
        torch.ops.npu_standin.set_capturing(capturing)


def npu_device_available():
    """(True, "") where real npu tensors exist and torch_ext loaded its NPU kernels (an Ascend machine, or make test-npu
    on the fake CANN), else (False, why): for the tests written for an NPU device."""
    if importlib.util.find_spec("torch_npu") is None:  # never import torch_npu without it (needs CANN)
        return False, "torch_npu is not installed"
    try:
        importlib.import_module("torch_npu")
    except Exception as e:  # pragma: no cover - depends on the machine
        return False, f"torch_npu cannot be imported: {e}"
    if not torch.npu.is_available():
        return False, "no NPU device"
    if not torch_ext._npu.LOADED:
        return False, f"torch_ext's NPU kernels are not loaded ({torch_ext._npu.why_not_loaded()})"
    return True, ""


def op_api_extension():
    """Whether the installed torch_npu ships op-plugin's extension API (op_plugin/include/npu_cpp_extension.h and
    op_plugin/utils/op_api_common_base.h), which setup.py builds the NPU path on (NPU_EXT_OP_API_EXTENSION): torch_npu
    2.7 from the release table's extension_api_from; 2.6 and the .postN of 2.7 before it take CANN's C API (no
    executor cache). Read from the headers, as setup.py does, not from the build."""
    spec = importlib.util.find_spec("torch_npu")
    if spec is None or not spec.submodule_search_locations:
        return False
    base = os.path.join(list(spec.submodule_search_locations)[0], "include", "third_party", "op-plugin", "op_plugin")
    return all(os.path.isfile(os.path.join(base, h))
               for h in ("include/npu_cpp_extension.h", "utils/op_api_common_base.h"))


def which():
    """(backend class or None, why not): the real runtime where torch_ext loaded its NPU kernels; the stand-in
    only off x86-64 (the aarch64 emulation); nothing on an x86-64 machine without torch_npu."""
    if torch_ext._npu.LOADED:
        return FakeCann, ""
    if platform.machine() != "x86_64":
        return Standin, ""
    return None, ("the NPU path runs inside the real torch_npu runtime here (make test-npu); the host stand-in is "
                  "kept for the aarch64 emulation only")


@contextlib.contextmanager
def capturing(backend):
    backend.set_capturing(True)
    try:
        yield
    finally:
        backend.set_capturing(False)
