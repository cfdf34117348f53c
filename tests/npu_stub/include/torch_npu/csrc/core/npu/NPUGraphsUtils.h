// TEST-ONLY stand-in for torch_npu 2.13's torch_npu/csrc/core/npu/NPUGraphsUtils.h: the capture status of the
// current stream (C10_NPU_API there, exported by libtorch_npu.so). Defined in tests/npu_stub/torch_npu_standin.cpp;
// the test hook torch.ops.npu_standin.set_capturing(bool) sets it.
#pragma once

namespace c10_npu {
enum class CaptureStatus : int { None = 0, Active = 1, Invalidated = 2 };
CaptureStatus currentStreamCaptureStatusMayInitCtx();
}  // namespace c10_npu
