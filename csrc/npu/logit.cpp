// npu_ext::logit on the NPU (PrivateUse1): aclnnLogit(input, double eps, out), eps < 0 for "no clamp" (ops-nn
// loss/logit). One kernel, the same arithmetic as the contract (16-bit inputs computed in fp32 and rounded once,
// NaN x kept NaN; audit section 3). The generated operator makes its input contiguous and writes `out` densely,
// which a new contiguous output is. Kernels on Atlas A2/A3 and Ascend950 (since 2026-01: an older CANN has the
// entry point without the kernel there, which the probe finds); otherwise the composite.
#include "common/forward_composite.h"
#include "npu/npu_common.h"

namespace npu_ext {
namespace logit_npu {  // this file's own: the unity build (setup.py) compiles the op files as one unit
namespace {

constexpr const char* kOp = "logit";

const npu::AclnnApi& api() {
  static const npu::AclnnApi a(
      kOp, "aclnnLogit", npu::SocNeed::A2A3Ascend950,
      [](const npu::AclnnApi& api, c10::Device device) {
        at::Tensor x = npu::probe_tensor(device, {16}), y = npu::probe_tensor(device, {16});
        double eps = -1.0;
        return npu::probe_launch(api, x, eps, y);
      },
      npu::Fallback::Composite);
  return a;
}
const bool kRegistered = npu::register_api(&api);  // for the status report

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  check_logit(self);
  check_npu_float(kOp, "self", self);
  c10::OptionalDeviceGuard guard(self.device());
  return npu::run_native(
      api(), self.device(),
      [&] {
        at::Tensor y = at::empty(self.sizes(), self.options());
        if (y.numel() == 0) return y;
        double eps_arg = eps.value_or(-1.0);  // op-plugin passes the same for eps=None
        npu::launch(api(), self, eps_arg, y);
        return y;
      },
      [&] { return composite::logit(self, eps); });
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) { m.impl("logit", &logit); }

}  // namespace logit_npu
}  // namespace npu_ext
