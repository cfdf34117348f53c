"""What the npu training tests share (tests/npu/test_npu_training.py, tests/npu/test_npu_megatron.py): whether the npu device
is there, the fake CANN's launch counters, and an op log that records the devices of every npu_ext op's tensors."""

import torch

import fake_cann_lib
import npu_backend
from helpers import OpLog

AVAILABLE, REASON = npu_backend.npu_device_available()
f64 = torch.float64
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
NPU = "npu"


def aclnn_calls(api):
    """Launches (phase 2) of an aclnn entry point counted by the fake libopapi since the process started."""
    return fake_cann_lib.opapi_calls(api)


class NpuOpLog(OpLog):
    """helpers.OpLog, plus the devices of every npu_ext op's tensor arguments."""

    def __init__(self):
        super().__init__()
        self.devices = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if name.startswith("npu_ext."):
            devs = {a.device.type for a in list(args) + list((kwargs or {}).values()) if isinstance(a, torch.Tensor)}
            self.devices.setdefault(name, set()).update(devs)
        return super().__torch_dispatch__(func, types, args, kwargs)
