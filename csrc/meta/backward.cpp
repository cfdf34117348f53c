// Meta (fake-tensor) kernels for every npu_ext operator: the shared validation and shape/dtype inference,
// and empty outputs with the strides the CPU kernels produce (contiguous). This is what lets FakeTensor,
// torch.compile and torch.export trace the ops. Data-dependent checks (group_idx values) cannot run here.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "common/checks.h"

namespace npu_ext {
namespace {

at::Tensor gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  return at::empty_symint(meta.shape, grad_output.options().dtype(meta.dtype));
}

void gelu_backward_v2_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                          const at::Tensor& grad_input) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  check_out("gelu_backward_v2", "grad_input", grad_input, meta.shape, meta.dtype, self);
}

std::tuple<at::Tensor, at::Tensor> prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                  const at::Tensor& weight) {
  check_prelu_backward(grad_output, self, weight);
  return {at::empty_symint(self.sym_sizes(), self.options()), at::empty_symint(weight.sym_sizes(), weight.options())};
}

void prelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
                        const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  check_prelu_backward(grad_output, self, weight);
  check_out("prelu_backward", "grad_input", grad_input, self.sym_sizes(), self.scalar_type(), self);
  check_out("prelu_backward", "grad_weight", grad_weight, weight.sym_sizes(), weight.scalar_type(), self);
}

at::Tensor grouped_bias_add_grad(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                                 int64_t group_idx_type) {
  const auto meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  return at::empty_symint({meta.groups, meta.hidden}, grad_y.options());
}

void grouped_bias_add_grad_out(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                               int64_t group_idx_type, const at::Tensor& out) {
  const auto meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  check_out("grouped_bias_add_grad", "out", out, {meta.groups, meta.hidden}, grad_y.scalar_type(), grad_y);
}

at::Tensor scaled_masked_softmax_backward(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                          double scale, bool fix_triu_mask) {
  check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  return at::empty_symint(grad_output.sym_sizes(), grad_output.options());
}

void scaled_masked_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                        double scale, bool fix_triu_mask, const at::Tensor& out) {
  check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  check_out("scaled_masked_softmax_backward", "out", out, grad_output.sym_sizes(), grad_output.scalar_type(),
            grad_output);
}

at::Tensor logit_grad(const at::Tensor& x, const at::Tensor& dy, double eps) {
  check_logit_grad(x, dy);
  return at::empty_symint(x.sym_sizes(), x.options());
}

void logit_grad_out(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  check_logit_grad(x, dy);
  check_out("logit_grad", "dx", dx, x.sym_sizes(), x.scalar_type(), x);
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

}  // namespace npu_ext
