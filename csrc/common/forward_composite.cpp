// The forward ops as compositions of ATen ops, registered on CompositeExplicitAutograd
// (forward_composite_registration.cpp): this is what runs on any device that has no dedicated kernel (CUDA, XPU,
// MPS, ...). The NPU path (torch_ext._C_npu) compiles this file too (extension modules share no symbols) and calls
// these functions where an op's native aclnn kernel is unavailable. A kernel registered on a backend key wins
// over it on that backend: CPU (csrc/cpu/<op>.cpp, fused kernels for scaled_masked_softmax and
// grouped_bias_add), Meta (csrc/meta/forward.cpp) and PrivateUse1 (the NPU path). Autograd is not part of
// CompositeExplicitAutograd: it is registered in C++ on the generic Autograd key (csrc/autograd/forward_ops.cpp).
//
// Precision: 16-bit inputs are upcast to fp32, computed, and rounded once to the input dtype.
#include "common/forward_composite.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

#include <cmath>
#include <vector>

#include "common/checks.h"
#include "common/composite_utils.h"

namespace npu_ext {
namespace composite {

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  check_gelu(self, approximate);
  const at::Tensor x = opmath(self);
  // On an NPU, never at::gelu for "none": torch_npu 2.13 sends aten::gelu to aclnnGelu on an Atlas A2/A3 (and on an
  // Ascend950 with op-plugin 26.0.0), which is the tanh form whatever `approximate` says (forward-op audit, F1).
  // erfc(-x / sqrt 2) rather than 1 + erf(x / sqrt 2): no cancellation in the left tail.
  if (approximate == "none" && self.device().type() == c10::DeviceType::PrivateUse1) {
    return finish(x * 0.5 * at::erfc(x * -M_SQRT1_2), self.scalar_type());
  }
  return finish(at::gelu(x, approximate), self.scalar_type());
}

at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight) {
  check_prelu(self, weight);
  // at::prelu wants a 0-D/1-D weight; ours may have any shape with 1 or C elements.
  return finish(at::prelu(opmath(self), opmath(weight).reshape({-1})), self.scalar_type());
}

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  check_logit(self);
  return finish(at::logit(opmath(self), eps), self.scalar_type());
}

at::Tensor scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
                                 c10::string_view fully_masked) {
  const FullyMasked policy = check_scaled_masked_softmax(x, mask, fix_triu_mask, fully_masked);
  const at::Tensor m = fix_triu_mask
                           ? at::ones({x.size(2), x.size(3)}, x.options().dtype(at::kBool)).triu(1)  // column > row
                           : mask;
  const at::Tensor z = opmath(x).mul(scale).masked_fill(m, -10000.0);
  at::Tensor y = at::_softmax(z, -1, false);
  // A causal row is never fully masked (its diagonal is not).
  if (policy == FullyMasked::Zero && !fix_triu_mask) y = y.masked_fill(m.all(-1, /*keepdim=*/true), 0.0);
  return finish(y, x.scalar_type());
}

at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
  check_grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
  at::Tensor b;  // the bias of every row of x, in the compute dtype, broadcastable to x
  if (!group_idx.has_value()) {
    b = opmath(bias).reshape({x.size(0), 1, x.size(2)});
  } else {
    // The row -> group index is built on the host from the validated offsets (one small device-to-host copy).
    const int64_t rows = x.size(0);
    const auto offsets = group_offsets("grouped_bias_add", "x", group_idx->cpu(), group_idx_type, rows);
    at::Tensor idx = at::empty({rows}, at::TensorOptions().dtype(at::kLong));
    int64_t* p = idx.mutable_data_ptr<int64_t>();
    for (size_t j = 0; j + 1 < offsets.size(); ++j) {
      for (int64_t r = offsets[j]; r < offsets[j + 1]; ++r) p[r] = static_cast<int64_t>(j);
    }
    b = opmath(bias).index_select(0, idx.to(x.device()));
  }
  if (probs.has_value()) {
    // One weight per row: (rows...) or (rows..., 1), in x's compute dtype.
    b = b * probs->to(at::toOpMathType(x.scalar_type())).reshape(x.sizes().slice(0, x.dim() - 1).vec()).unsqueeze(-1);
  }
  return finish(at::add(opmath(x), b), x.scalar_type());
}

}  // namespace composite
}  // namespace npu_ext
