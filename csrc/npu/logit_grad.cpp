// npu_ext::logit_grad on the NPU (PrivateUse1): aclnnLogitGrad(x, dy, double eps, out). Note: x before dy.
#include "npu/npu_common.h"

namespace npu_ext {
namespace {

constexpr const char* kOp = "logit_grad";

void validate(const at::Tensor& x, const at::Tensor& dy) {
  check_logit_grad(x, dy);
  check_npu_float(kOp, "x", x);
  check_npu_float(kOp, "dy", dy);
}

void run(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  if (dx.numel() == 0) return;  // nothing to compute
  EXEC_NPU_CMD_EXT(aclnnLogitGrad, x, dy, eps, dx);
}

at::Tensor logit_grad(const at::Tensor& x, const at::Tensor& dy, double eps) {
  validate(x, dy);
  c10::OptionalDeviceGuard guard(x.device());
  at::Tensor dx = at::empty(x.sizes(), x.options());
  run(x, dy, eps, dx);
  return dx;
}

void logit_grad_out(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  validate(x, dy);
  check_out(kOp, "dx", dx, x.sym_sizes(), x.scalar_type(), x);
  c10::OptionalDeviceGuard guard(x.device());
  run(x, dy, eps, dx);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("logit_grad", &logit_grad);
  m.impl("logit_grad.out", &logit_grad_out);
}

}  // namespace npu_ext
