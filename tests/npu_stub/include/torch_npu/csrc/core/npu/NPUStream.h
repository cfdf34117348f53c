// TEST-ONLY stand-in for torch_npu 2.13's torch_npu/csrc/core/npu/NPUStream.h: the one function the NPU sources use
// from it (C10_NPU_API there, exported by libtorch_npu.so). Defined in tests/npu_stub/torch_npu_standin.cpp: the
// task queue has run every task by then (the stand-in runs them at once), so it only reports a failed one.
#pragma once

namespace c10_npu {
bool npuSynchronizeDevice(bool check_error = true);
}  // namespace c10_npu
