// npu_ext::logit_grad on CPU.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <torch/library.h>

#include "common/checks.h"
#include "cpu/dispatch.h"

namespace npu_ext {
namespace {

void compute(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  if (dx.numel() == 0) return;
  auto iter = at::TensorIteratorConfig().add_output(dx).add_const_input(x).add_const_input(dy).resize_outputs(false).build();
  cpu::logit_grad_kernel(iter, eps);
}

at::Tensor logit_grad(const at::Tensor& x, const at::Tensor& dy, double eps) {
  const auto meta = check_logit_grad(x, dy);
  at::Tensor dx = new_output(meta.dx, x);
  compute(x, dy, eps, dx);
  return dx;
}

void logit_grad_out(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  const auto meta = check_logit_grad(x, dy);
  check_out("logit_grad", "dx", dx, meta.dx, x);
  compute(x, dy, eps, dx);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("logit_grad", &logit_grad);
  m.impl("logit_grad.out", &logit_grad_out);
}

}  // namespace npu_ext
