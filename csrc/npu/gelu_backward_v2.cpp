// npu_ext::gelu_backward_v2 on the NPU (PrivateUse1): aclnnGeluBackwardV2(gradOutput, self, char* approximate,
// gradInput). aclnn broadcasts and promotes mixed dtypes itself; the output has the broadcast shape and
// dtype result_type(grad_output, self).
#include "npu/npu_common.h"

#include <string>

namespace npu_ext {
namespace {

constexpr const char* kOp = "gelu_backward_v2";

GeluBackwardMeta validate(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  check_npu_float(kOp, "grad_output", grad_output);
  check_npu_float(kOp, "self", self);
  return meta;
}

void run(const at::Tensor& grad_output, const at::Tensor& self, const GeluBackwardMeta& meta,
         const at::Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  // aclnn takes a mutable host C string; the validated mode is spelled exactly "none" or "tanh".
  std::string mode = meta.approximate == GeluApproximate::Tanh ? "tanh" : "none";
  char* approximate = mode.data();
  EXEC_NPU_CMD_EXT(aclnnGeluBackwardV2, grad_output, self, approximate, grad_input);
}

at::Tensor gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  const auto meta = validate(grad_output, self, approximate);
  c10::OptionalDeviceGuard guard(self.device());
  at::Tensor grad_input = at::empty_symint(meta.shape, self.options().dtype(meta.dtype));
  run(grad_output, self, meta, grad_input);
  return grad_input;
}

void gelu_backward_v2_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                          const at::Tensor& grad_input) {
  const auto meta = validate(grad_output, self, approximate);
  check_out(kOp, "grad_input", grad_input, meta.shape, meta.dtype, self);
  c10::OptionalDeviceGuard guard(self.device());
  run(grad_output, self, meta, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("gelu_backward_v2", &gelu_backward_v2);
  m.impl("gelu_backward_v2.out", &gelu_backward_v2_out);
}

}  // namespace npu_ext
