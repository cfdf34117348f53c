// TEST-ONLY stand-in for torch_npu 2.13's torch_npu/csrc/core/npu/NPUStream.h: the functions the NPU sources use
// from it (and NPUFunctions.h's current_device) (C10_NPU_API there, exported by libtorch_npu.so). Defined in tests/npu_stub/torch_npu_standin.cpp: the
// task queue has run every task by then (the stand-in runs them at once), so it only reports a failed one.
#pragma once

#include <c10/core/Device.h>

namespace c10_npu {
bool npuSynchronizeDevice(bool check_error = true);
c10::DeviceIndex current_device();  // NPUFunctions.h there (op_api_common_base.h includes it); here device 0
}  // namespace c10_npu
