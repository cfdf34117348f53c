// npu_ext::logit on CPU: ATen's logit (fp32 math for 16-bit inputs, rounded once: the composite). fp32/fp64
// inputs call at::logit directly, without the composite's dtype round trips (a few dispatcher calls less per
// call, which is what a small training step pays).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "common/checks.h"
#include "common/forward_composite.h"

namespace npu_ext {
namespace {

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  const auto dtype = self.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) return composite::logit(self, eps);
  check_logit(self);
  return at::logit(self, eps).contiguous();
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) { m.impl("logit", &logit); }

}  // namespace npu_ext
