// TEST-ONLY stand-in for torch_npu's torch_npu/csrc/core/npu/NPUFormat.h (every release from 2.6): the part the NPU sources
// uses, with the real declarations. tests/npu_stub/torch_npu_standin.cpp defines them for host tensors, which are
// always in the base format ND here: get_npu_format gives ACL_FORMAT_ND (2), npu_format_cast returns the tensor.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace at_npu {
namespace native {

int64_t get_npu_format(const at::Tensor& self);
at::Tensor npu_format_cast(const at::Tensor& self, int64_t acl_format);

}  // namespace native
}  // namespace at_npu
