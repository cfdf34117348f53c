// gelu as a composition of ATen ops (composite.cpp): what runs on a device without a kernel of its own, and
// what the NPU path runs where aclnn's kernel is unavailable. It validates with the family's checks first and
// returns a contiguous output, like every other kernel of the op (so the Meta kernel describes every device).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

namespace npu_ext {
namespace composite {

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate);

}  // namespace composite
}  // namespace npu_ext
