// What every csrc/npu source needs: ATen, the dispatcher, the shared validation and torch_npu's
// EXEC_NPU_CMD_EXT.
//
// The torch_npu API surface used by csrc/npu is deliberately tiny:
//   * EXEC_NPU_CMD_EXT(aclnnXxx, args...) from op-plugin's npu_cpp_extension.h. It resolves
//     aclnnXxxGetWorkspaceSize / aclnnXxx by name, converts at::Tensor / c10::optional<at::Tensor> to aclTensor*
//     (an empty optional becomes nullptr) and passes scalars (double, bool, int64_t, char*) through. Its
//     arguments must be lvalues (it binds them as Ts&...). It IGNORES the GetWorkspaceSize status, which is
//     why every op validates with the shared checks first.
//   * c10::OptionalDeviceGuard (core c10; torch_npu registers the PrivateUse1 guard implementation).
//   * at::empty / zero_ / copy_ / triu on the input's options (dispatched to torch_npu's own kernels).
//
// The same sources compile against the real torch_npu headers (setup.py, tools/npu_compile_check.sh) and
// against the host-memory stand-in in tests/npu_stub/include (tests/test_npu_standin.py), which provides a
// header of the same name.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "common/checks.h"
#include "op_plugin/include/npu_cpp_extension.h"
