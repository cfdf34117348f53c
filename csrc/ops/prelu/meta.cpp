// Meta (fake-tensor) kernels of prelu and prelu_backward: the family's checks and empty outputs with the strides every
// device's kernel produces (contiguous). Sizes are symbolic-aware (sym_sizes / empty_symint), so these also serve
// torch.compile with dynamic shapes and torch.export. Data-dependent checks (group_idx values) cannot run here.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "ops/prelu/checks.h"

namespace npu_ext {
namespace prelu_meta {
namespace {

at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight) {
  check_prelu(self, weight);
  return like_output(self);
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

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, Meta, m) {
  m.impl("prelu", &prelu);
  m.impl("prelu_backward", &prelu_backward);
  m.impl("prelu_backward.out", &prelu_backward_out);
}

}  // namespace prelu_meta
}  // namespace npu_ext
