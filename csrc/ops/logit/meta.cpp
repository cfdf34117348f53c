// Meta (fake-tensor) kernels of logit and logit_grad: the family's checks and empty outputs with the strides every
// device's kernel produces (contiguous). Sizes are symbolic-aware (sym_sizes / empty_symint), so these also serve
// torch.compile with dynamic shapes and torch.export. Data-dependent checks (group_idx values) cannot run here.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "ops/logit/checks.h"

namespace npu_ext {
namespace logit_meta {
namespace {

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  check_logit(self);
  return like_output(self);
}

at::Tensor logit_grad(const at::Tensor& x, const at::Tensor& dy, double eps) {
  return new_output(check_logit_grad(x, dy).dx, x);
}

void logit_grad_out(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  check_out("logit_grad", "dx", dx, check_logit_grad(x, dy).dx, x);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, Meta, m) {
  m.impl("logit", &logit);
  m.impl("logit_grad", &logit_grad);
  m.impl("logit_grad.out", &logit_grad_out);
}

}  // namespace logit_meta
}  // namespace npu_ext
