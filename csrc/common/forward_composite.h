// Device-generic implementations of the forward ops, built from ATen ops (see forward_composite.cpp).
// They validate with the shared checks first and return contiguous outputs, like every other kernel of
// these ops (so the Meta kernels describe every device).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

namespace npu_ext {
namespace composite {

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate);
at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight);
at::Tensor logit(const at::Tensor& self, c10::optional<double> eps);
at::Tensor scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
                                 c10::string_view fully_masked);
at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs);

}  // namespace composite
}  // namespace npu_ext
