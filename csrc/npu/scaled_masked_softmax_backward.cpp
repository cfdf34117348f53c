// npu_ext::scaled_masked_softmax_backward on the NPU (PrivateUse1): aclnnScaledMaskedSoftmaxBackward(gradOutput,
// y, mask, double scale, bool fixTriuMask, out). aclnn only supports fixTriuMask=false, so fix_triu_mask=True
// builds the causal mask (True where column > row) on the device and passes it with fixTriuMask=false. aclnn
// broadcasts a mask whose first two dims are 1 itself.
#include "npu/npu_common.h"

namespace npu_ext {
namespace {

constexpr const char* kOp = "scaled_masked_softmax_backward";

void validate(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask, bool fix_triu_mask) {
  check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  check_npu_float(kOp, "grad_output", grad_output);
}

void run(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask, double scale,
         bool fix_triu_mask, const at::Tensor& out) {
  if (out.numel() == 0) return;
  const at::Tensor used_mask =
      fix_triu_mask ? at::ones({1, 1, grad_output.size(2), grad_output.size(3)},
                               grad_output.options().dtype(at::kBool))
                          .triu(1)
                    : mask;
  bool fix_triu_mask_arg = false;  // the only value aclnn accepts
  EXEC_NPU_CMD_EXT(aclnnScaledMaskedSoftmaxBackward, grad_output, y, used_mask, scale, fix_triu_mask_arg, out);
}

at::Tensor scaled_masked_softmax_backward(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                          double scale, bool fix_triu_mask) {
  validate(grad_output, y, mask, fix_triu_mask);
  c10::OptionalDeviceGuard guard(grad_output.device());
  at::Tensor out = at::empty(grad_output.sizes(), grad_output.options());
  run(grad_output, y, mask, scale, fix_triu_mask, out);
  return out;
}

void scaled_masked_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                        double scale, bool fix_triu_mask, const at::Tensor& out) {
  validate(grad_output, y, mask, fix_triu_mask);
  check_out(kOp, "out", out, grad_output.sym_sizes(), grad_output.scalar_type(), grad_output);
  c10::OptionalDeviceGuard guard(grad_output.device());
  run(grad_output, y, mask, scale, fix_triu_mask, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("scaled_masked_softmax_backward", &scaled_masked_softmax_backward);
  m.impl("scaled_masked_softmax_backward.out", &scaled_masked_softmax_backward_out);
}

}  // namespace npu_ext
