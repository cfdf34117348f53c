// Meta (fake-tensor) kernels of the forward ops: the shared validation and an empty contiguous output (every
// device's kernel returns a contiguous output). Sizes are symbolic-aware (sym_sizes / empty_symint), so
// these also serve torch.compile with dynamic shapes and torch.export. Data-dependent checks (group_idx
// values) cannot run here.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "common/checks.h"

namespace npu_ext {
namespace meta_impl {  // named: the unity build puts these beside csrc/cpu's kernels of the same names
namespace {

at::Tensor same_shape(const at::Tensor& t) { return at::empty_symint(t.sym_sizes(), t.options()); }

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  check_gelu(self, approximate);
  return same_shape(self);
}

at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight) {
  check_prelu(self, weight);
  return same_shape(self);
}

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  check_logit(self);
  return same_shape(self);
}

at::Tensor scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
                                 c10::string_view fully_masked) {
  check_scaled_masked_softmax(x, mask, fix_triu_mask, fully_masked);
  return same_shape(x);
}

at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
  check_grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
  return same_shape(x);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, Meta, m) {
  m.impl("gelu", &gelu);
  m.impl("prelu", &prelu);
  m.impl("logit", &logit);
  m.impl("scaled_masked_softmax", &scaled_masked_softmax);
  m.impl("grouped_bias_add", &grouped_bias_add);
}

}  // namespace meta_impl
}  // namespace npu_ext
