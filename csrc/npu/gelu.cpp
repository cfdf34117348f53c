// npu_ext::gelu on the NPU (PrivateUse1): aclnnGeluV2(x, int64 approximate, y), approximate 0 = "none", 1 = "tanh"
// (ops-nn activation/gelu_v2; never aclnnGelu, which is the tanh form only: forward-op audit, F1). One kernel; the
// input may have any strides (aclnn makes it contiguous), the output is new and contiguous.
//
// The kernel's "none" is not erf (audit 1.4-1.5): on Atlas A2/A3 a fitted polynomial x / (1 + exp(p(x1^2) x1)),
// x1 = min(x, 5.75), 9.8e-5 relative where |y| > 1e-3; on Ascend950 a Pade erf clipped to [-3.92, 3.92]. Both lose
// the left tail below about x = -5, where GELU is under 1e-5 of its input. That is below fp16 and bf16 rounding
// everywhere a training step can see, so 16-bit inputs take the kernel; for fp32 it is 1e3 times fp32's rounding,
// so fp32 "none" keeps the contract with the composite (x / 2 (1 + erf(x / sqrt 2)) in ATen ops: 4 kernels) and
// fp32 "tanh" takes the kernel (docs/operators.md, "Semantics notes"). bf16 only where the kernel takes it (A2/A3,
// Ascend950; 161002 elsewhere): the composite otherwise. Without the entry point or the kernel: the composite.
#include "common/forward_composite.h"
#include "npu/npu_common.h"

namespace npu_ext {
namespace gelu_npu {  // this file's own: the unity build (setup.py) compiles the op files as one unit
namespace {

constexpr const char* kOp = "gelu";

const npu::AclnnApi& api() {
  static const npu::AclnnApi a(
      kOp, "aclnnGeluV2", npu::SocNeed::Any,
      [](const npu::AclnnApi& api, c10::Device device) {
        at::Tensor x = npu::probe_tensor(device, {16}), y = npu::probe_tensor(device, {16});
        int64_t approximate = 0;
        return npu::probe_launch(api, x, approximate, y);
      },
      npu::Fallback::Composite);
  return a;
}
const bool kRegistered = npu::register_api(&api);  // for the status report

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  const GeluApproximate mode = check_gelu(self, approximate);
  check_npu_float(kOp, "self", self);
  const bool tanh_form = mode == GeluApproximate::Tanh;
  const bool takes_kernel = (tanh_form || self.scalar_type() != at::kFloat) &&
                            (self.scalar_type() != at::kBFloat16 || npu::soc_supports(npu::SocNeed::A2A3Ascend950));
  auto composite = [&] { return composite::gelu(self, approximate); };
  if (!takes_kernel) return composite();
  c10::OptionalDeviceGuard guard(self.device());
  return npu::run_native(
      api(), self.device(),
      [&] {
        at::Tensor y = at::empty(self.sizes(), self.options());
        if (y.numel() == 0) return y;
        int64_t approximate_arg = tanh_form ? 1 : 0;
        npu::launch(api(), self, approximate_arg, y);
        return y;
      },
      composite);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) { m.impl("gelu", &gelu); }

}  // namespace gelu_npu
}  // namespace npu_ext
