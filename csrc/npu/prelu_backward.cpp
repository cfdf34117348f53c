// npu_ext::prelu_backward on the NPU (PrivateUse1): aclnnPreluBackward(gradOutput, self, weight, gradInput,
// gradWeight). aclnn broadcasts gradOutput to self's shape itself. It wants gradWeight 1-D [C] when weight has
// more than one element (and weight's own shape when it has one), so a multi-dimensional weight gets a 1-D
// gradient buffer that is copied back. An empty self is a reduction over nothing: grad_weight is zero-filled
// here, since aclnn would leave it untouched.
#include "npu/npu_common.h"

#include <tuple>

namespace npu_ext {
namespace {

constexpr const char* kOp = "prelu_backward";

void validate(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight) {
  check_prelu_backward(grad_output, self, weight);
  check_npu_float(kOp, "self", self);
  check_npu_float(kOp, "grad_output", grad_output);
  check_npu_float(kOp, "weight", weight);
}

void run(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
         const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  if (self.numel() == 0) {
    grad_weight.zero_();  // a sum over nothing; grad_input is empty
    return;
  }
  const bool needs_1d = weight.numel() != 1 && grad_weight.dim() != 1;
  at::Tensor grad_weight_1d = needs_1d ? at::empty({weight.numel()}, grad_weight.options()) : grad_weight;
  EXEC_NPU_CMD_EXT(aclnnPreluBackward, grad_output, self, weight, grad_input, grad_weight_1d);
  if (needs_1d) grad_weight.copy_(grad_weight_1d.view(grad_weight.sizes()));
}

std::tuple<at::Tensor, at::Tensor> prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                  const at::Tensor& weight) {
  validate(grad_output, self, weight);
  c10::OptionalDeviceGuard guard(self.device());
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  at::Tensor grad_weight = at::empty(weight.sizes(), weight.options());
  run(grad_output, self, weight, grad_input, grad_weight);
  return {grad_input, grad_weight};
}

void prelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
                        const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  validate(grad_output, self, weight);
  check_out(kOp, "grad_input", grad_input, self.sym_sizes(), self.scalar_type(), self);
  check_out(kOp, "grad_weight", grad_weight, weight.sym_sizes(), weight.scalar_type(), self);
  c10::OptionalDeviceGuard guard(self.device());
  run(grad_output, self, weight, grad_input, grad_weight);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("prelu_backward", &prelu_backward);
  m.impl("prelu_backward.out", &prelu_backward_out);
}

}  // namespace npu_ext
