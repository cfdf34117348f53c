// Meta (fake-tensor) kernels of scaled_masked_softmax and scaled_masked_softmax_backward: the family's checks and empty outputs with the strides every
// device's kernel produces (contiguous). Sizes are symbolic-aware (sym_sizes / empty_symint), so these also serve
// torch.compile with dynamic shapes and torch.export. Data-dependent checks (group_idx values) cannot run here.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "ops/scaled_masked_softmax/checks.h"

namespace npu_ext {
namespace scaled_masked_softmax_meta {
namespace {

at::Tensor scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
                                 c10::string_view fully_masked) {
  check_scaled_masked_softmax(x, mask, fix_triu_mask, fully_masked);
  return like_output(x);
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

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, Meta, m) {
  m.impl("scaled_masked_softmax", &scaled_masked_softmax);
  m.impl("scaled_masked_softmax_backward", &scaled_masked_softmax_backward);
  m.impl("scaled_masked_softmax_backward.out", &scaled_masked_softmax_backward_out);
}

}  // namespace scaled_masked_softmax_meta
}  // namespace npu_ext
