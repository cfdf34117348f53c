// The forward ops as compositions of ATen ops, registered on CompositeExplicitAutograd: this is what runs on
// any device that has no dedicated kernel (CUDA, XPU, MPS, ...). A kernel registered on a backend key wins
// over it on that backend: CPU (csrc/cpu/<op>.cpp, fused kernels for scaled_masked_softmax and
// grouped_bias_add), Meta (csrc/meta/forward.cpp) and PrivateUse1 (the NPU path). Autograd is not part of
// CompositeExplicitAutograd: it is registered in Python on the generic Autograd key (torch_ext/_autograd.py).
//
// Precision: 16-bit inputs are computed in fp32 (ATen's opmath) and rounded once to the input dtype.
#include "common/forward_composite.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <vector>

#include "common/checks.h"

namespace npu_ext {
namespace composite {

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  check_gelu(self, approximate);
  at::Tensor out = at::empty_symint(self.sym_sizes(), self.options());
  at::gelu_out(out, self, approximate);
  return out;
}

at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight) {
  check_prelu(self, weight);
  // at::prelu wants a 0-D/1-D weight; ours may have any shape with 1 or C elements.
  return at::prelu(self, weight.reshape({-1})).contiguous();
}

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  check_logit(self);
  at::Tensor out = at::empty_symint(self.sym_sizes(), self.options());
  at::logit_out(out, self, eps);
  return out;
}

at::Tensor scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask) {
  check_scaled_masked_softmax(x, mask, fix_triu_mask);
  const at::ScalarType acc = at::toOpMathType(x.scalar_type());
  const at::Tensor m = fix_triu_mask
                           ? at::ones({x.size(2), x.size(3)}, x.options().dtype(at::kBool)).triu(1)  // column > row
                           : mask;
  const at::Tensor z = x.to(acc).mul(scale).masked_fill(m, -10000.0);
  return at::_softmax(z, -1, false).to(x.scalar_type()).contiguous();
}

at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type) {
  check_grouped_bias_add(x, bias, group_idx, group_idx_type);
  if (!group_idx.has_value()) {
    return at::add(x, bias.reshape({x.size(0), 1, x.size(2)})).contiguous();
  }
  // The row -> group index is built on the host from the validated offsets (one small device-to-host copy).
  const int64_t rows = x.size(0);
  const auto offsets = group_offsets("grouped_bias_add", "x", group_idx->cpu(), group_idx_type, rows);
  at::Tensor idx = at::empty({rows}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = idx.mutable_data_ptr<int64_t>();
  for (size_t j = 0; j + 1 < offsets.size(); ++j) {
    for (int64_t r = offsets[j]; r < offsets[j + 1]; ++r) p[r] = static_cast<int64_t>(j);
  }
  return at::add(x, bias.index_select(0, idx.to(x.device()))).contiguous();
}

}  // namespace composite

TORCH_LIBRARY_IMPL(npu_ext, CompositeExplicitAutograd, m) {
  m.impl("gelu", &composite::gelu);
  m.impl("prelu", &composite::prelu);
  m.impl("logit", &composite::logit);
  m.impl("scaled_masked_softmax", &composite::scaled_masked_softmax);
  m.impl("grouped_bias_add", &composite::grouped_bias_add);
}

}  // namespace npu_ext
