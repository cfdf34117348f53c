// npu_ext::logit on CPU: ATen's logit (fp32 math for 16-bit inputs, rounded once: the composite). fp32/fp64
// inputs call ATen's CPU logit kernel directly (at::cpu::logit: no composite dtype round trips and no second
// trip through the dispatcher, which is what a small training step pays).
#include <ATen/ATen.h>
#include <ATen/ops/logit_cpu_dispatch.h>
#include <torch/library.h>

#include "common/checks.h"
#include "common/forward_composite.h"

namespace npu_ext {
namespace {

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  const auto dtype = self.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) return composite::logit(self, eps);
  check_logit(self);
  return at::cpu::logit(self, eps).contiguous();
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) { m.impl("logit", &logit); }

}  // namespace npu_ext
