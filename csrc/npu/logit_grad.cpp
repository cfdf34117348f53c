// npu_ext::logit_grad on the NPU (PrivateUse1): aclnnLogitGrad(x, dy, double eps, out). Note: x before dy.
// The generated aclnnLogitGrad makes only its inputs contiguous and writes `out` densely from its storage
// offset, so a non-contiguous `.out` is computed into a temporary and copied back. Kernels exist on Atlas
// A2/A3 and Ascend950 only (ops-nn loss/logit_grad/op_host/logit_grad_def.cpp; Ascend950 since 2026-02: an older
// CANN's phase 1 fails there with 561003, which the probe turns into the CPU fallback). The kernel keeps the
// quotient only where eps <= x <= 1 - eps (or 0 <= x <= 1) and selects the fill elsewhere, NaN x included: the
// CPU kernel does the same (docs/operators.md, "Semantics notes").
#include "npu/npu_common.h"

namespace npu_ext {
namespace logit_grad_npu {  // this file's own: the unity build (setup.py) compiles the op files as one unit
namespace {

constexpr const char* kOp = "logit_grad";

const npu::AclnnApi& api() {
  static const npu::AclnnApi a(kOp, "aclnnLogitGrad", npu::SocNeed::A2A3Ascend950,
                               [](const npu::AclnnApi& api, c10::Device device) {
                                 at::Tensor x = npu::probe_tensor(device, {16}), dy = npu::probe_tensor(device, {16});
                                 at::Tensor dx = npu::probe_tensor(device, {16});
                                 double eps = -1.0;
                                 return npu::probe_launch(api, x, dy, eps, dx);
                               });
  return a;
}
const bool kRegistered = npu::register_api(&api);  // for the status report

LogitGradMeta validate(const at::Tensor& x, const at::Tensor& dy) {
  auto meta = check_logit_grad(x, dy);
  check_npu_float(kOp, "x", x);
  check_npu_float(kOp, "dy", dy);
  return meta;
}

void run(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  if (dx.numel() == 0) return;  // nothing to compute
  npu::OutSlot out(dx, npu::OutWrite::Dense, {x, dy});
  npu::run_op(
      api(), x.device(), [&] { npu::launch(api(), x, dy, eps, out.target()); },
      [&] {
        static const auto cpu =
            npu::cpu_op<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("npu_ext::logit_grad");
        out.target().copy_(cpu.call(x.cpu(), dy.cpu(), eps));
      });
  out.finish();
}

at::Tensor logit_grad(const at::Tensor& x, const at::Tensor& dy, double eps) {
  const auto meta = validate(x, dy);
  c10::OptionalDeviceGuard guard(x.device());
  at::Tensor dx = new_output(meta.dx, x);
  run(x, dy, eps, dx);
  return dx;
}

void logit_grad_out(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  const auto meta = validate(x, dy);
  check_out(kOp, "dx", dx, meta.dx, x);
  c10::OptionalDeviceGuard guard(x.device());
  run(x, dy, eps, dx);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("logit_grad", &logit_grad);
  m.impl("logit_grad.out", &logit_grad_out);
}

}  // namespace logit_grad_npu
}  // namespace npu_ext
