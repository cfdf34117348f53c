// grouped_bias_add as a composition of ATen ops (composite.cpp): what runs on a device without a kernel of its own, and
// what the NPU path runs where aclnn's kernel is unavailable. It validates with the family's checks first and
// returns a contiguous output, like every other kernel of the op (so the Meta kernel describes every device).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

namespace npu_ext {
namespace composite {

at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs);

}  // namespace composite
}  // namespace npu_ext
