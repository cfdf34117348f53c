// Meta (fake-tensor) kernels for every npu_ext operator: the shared validation and shape/dtype inference,
// and empty outputs with the strides the CPU kernels produce (contiguous). This is what lets FakeTensor,
// torch.compile and torch.export trace the ops. Data-dependent checks (group_idx values) cannot run here.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "common/checks.h"

namespace npu_ext {
namespace meta_impl {  // named: the unity build puts these beside csrc/cpu's kernels of the same names
namespace {

at::Tensor gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  return new_output(meta.grad_input, grad_output);
}

void gelu_backward_v2_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                          const at::Tensor& grad_input) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  check_out("gelu_backward_v2", "grad_input", grad_input, meta.grad_input, self);
}

std::tuple<at::Tensor, at::Tensor> prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                  const at::Tensor& weight) {
  const auto meta = check_prelu_backward(grad_output, self, weight);
  return {new_output(meta.grad_input, self), new_output(meta.grad_weight, weight)};
}

void prelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
                        const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  const auto meta = check_prelu_backward(grad_output, self, weight);
  check_out("prelu_backward", "grad_input", grad_input, meta.grad_input, self);
  check_out("prelu_backward", "grad_weight", grad_weight, meta.grad_weight, self);
}

at::Tensor grouped_bias_add_grad(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                                 int64_t group_idx_type) {
  const auto meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  return new_output(meta.out, grad_y);
}

void grouped_bias_add_grad_out(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                               int64_t group_idx_type, const at::Tensor& out) {
  const auto meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  check_out("grouped_bias_add_grad", "out", out, meta.out, grad_y);
}

at::Tensor scaled_masked_softmax_backward(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                          double scale, bool fix_triu_mask) {
  return new_output(check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask).out, grad_output);
}

void scaled_masked_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                        double scale, bool fix_triu_mask, const at::Tensor& out) {
  const auto meta = check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  check_out("scaled_masked_softmax_backward", "out", out, meta.out, grad_output);
}

at::Tensor logit_grad(const at::Tensor& x, const at::Tensor& dy, double eps) {
  return new_output(check_logit_grad(x, dy).dx, x);
}

void logit_grad_out(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  check_out("logit_grad", "dx", dx, check_logit_grad(x, dy).dx, x);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, Meta, m) {
  m.impl("gelu_backward_v2", &gelu_backward_v2);
  m.impl("gelu_backward_v2.out", &gelu_backward_v2_out);
  m.impl("prelu_backward", &prelu_backward);
  m.impl("prelu_backward.out", &prelu_backward_out);
  m.impl("grouped_bias_add_grad", &grouped_bias_add_grad);
  m.impl("grouped_bias_add_grad.out", &grouped_bias_add_grad_out);
  m.impl("scaled_masked_softmax_backward", &scaled_masked_softmax_backward);
  m.impl("scaled_masked_softmax_backward.out", &scaled_masked_softmax_backward_out);
  m.impl("logit_grad", &logit_grad);
  m.impl("logit_grad.out", &logit_grad_out);
}

}  // namespace meta_impl
}  // namespace npu_ext
