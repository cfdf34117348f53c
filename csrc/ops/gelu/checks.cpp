#include "ops/gelu/checks.h"

#include <ATen/ATen.h>
#include <ATen/ops/result_type_native.h>

namespace npu_ext {

namespace {

GeluApproximate parse_approximate(const char* op, c10::string_view approximate) {
  if (approximate == "tanh") return GeluApproximate::Tanh;
  NPU_EXT_CHECK(approximate == "none", op, "approximate must be \"none\" or \"tanh\", but got \"", approximate, "\"");
  return GeluApproximate::None;
}

}  // namespace

GeluBackwardMeta check_gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self,
                                        c10::string_view approximate) {
  constexpr const char* op = "gelu_backward_v2";
  check_one_device(op, {{"grad_output", grad_output}, {"self", self}});
  GeluBackwardMeta meta;
  meta.approximate = parse_approximate(op, approximate);
  check_same_device(op, "self", self, "grad_output", grad_output);
  check_float(op, "grad_output", grad_output);
  check_float(op, "self", self);
  // aclnn documents 0-8 dimensions for both inputs (and so for their broadcast shape, the output's)
  check_max_rank(op, "grad_output", grad_output, kMaxRank);
  check_max_rank(op, "self", self, kMaxRank);
  NPU_EXT_CHECK(broadcast_shapes(grad_output.sym_sizes(), self.sym_sizes(), meta.grad_input.shape), op, "grad_output of shape ",
                shape_str(grad_output.sym_sizes()), " and self of shape ", shape_str(self.sym_sizes()),
                " do not broadcast");
  // ATen's own rule (result_type's only kernel, CompositeImplicitAutograd), called without the dispatcher
  meta.grad_input.dtype = at::native::result_type(grad_output, self);
  return meta;
}

// Forward ops. Sizes are read through sym_sizes()/sym_size() so that the Meta kernels run on fake tensors
// with symbolic shapes; for real tensors this is the same as sizes().
GeluApproximate check_gelu(const at::Tensor& self, c10::string_view approximate) {
  constexpr const char* op = "gelu";
  const GeluApproximate a = parse_approximate(op, approximate);
  check_float(op, "self", self);
  check_max_rank(op, "self", self, kMaxRank);  // gelu_backward_v2's limit: fails here, not in the backward
  return a;
}

}  // namespace npu_ext
