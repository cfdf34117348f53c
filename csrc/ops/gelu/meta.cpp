// Meta (fake-tensor) kernels of gelu and gelu_backward_v2: the family's checks and empty outputs with the strides every
// device's kernel produces (contiguous). Sizes are symbolic-aware (sym_sizes / empty_symint), so these also serve
// torch.compile with dynamic shapes and torch.export. Data-dependent checks (group_idx values) cannot run here.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "ops/gelu/checks.h"

namespace npu_ext {
namespace gelu_meta {
namespace {

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  check_gelu(self, approximate);
  return like_output(self);
}

at::Tensor gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  return new_output(meta.grad_input, grad_output);
}

void gelu_backward_v2_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                          const at::Tensor& grad_input) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  check_out("gelu_backward_v2", "grad_input", grad_input, meta.grad_input, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, Meta, m) {
  m.impl("gelu", &gelu);
  m.impl("gelu_backward_v2", &gelu_backward_v2);
  m.impl("gelu_backward_v2.out", &gelu_backward_v2_out);
}

}  // namespace gelu_meta
}  // namespace npu_ext
