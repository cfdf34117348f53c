// Meta (fake-tensor) kernels of grouped_bias_add and grouped_bias_add_grad: the family's checks and empty outputs with the strides every
// device's kernel produces (contiguous). Sizes are symbolic-aware (sym_sizes / empty_symint), so these also serve
// torch.compile with dynamic shapes and torch.export. Data-dependent checks (group_idx values) cannot run here.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "ops/grouped_bias_add/checks.h"

namespace npu_ext {
namespace grouped_bias_add_meta {
namespace {

at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
  check_grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
  return like_output(x);
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

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, Meta, m) {
  m.impl("grouped_bias_add", &grouped_bias_add);
  m.impl("grouped_bias_add_grad", &grouped_bias_add_grad);
  m.impl("grouped_bias_add_grad.out", &grouped_bias_add_grad_out);
}

}  // namespace grouped_bias_add_meta
}  // namespace npu_ext
