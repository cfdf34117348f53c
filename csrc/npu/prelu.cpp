// npu_ext::prelu on the NPU (PrivateUse1): aclnnPrelu(self, weight, out) (ops-nn activation/p_relu). One kernel:
// aclnn reshapes a weight of C elements (any shape) to [1, C, 1, ...] itself and copies into `out` honouring its
// strides; the output here is new and contiguous. A 0-dim self is passed as shape [1] (aclnn reshapes only rank
// >= 1; audit 8.4). The kernel computes x > 0 ? x : x * w with one product rounding in the dtype, which for 16-bit
// inputs equals the contract's fp32 product rounded once (an fp16 or bf16 product is exact in fp32). bf16 only on
// A2/A3 and Ascend950 (the composite elsewhere); without the entry point or the kernel: the composite.
#include "common/forward_composite.h"
#include "npu/npu_common.h"

namespace npu_ext {
namespace prelu_npu {  // this file's own: the unity build (setup.py) compiles the op files as one unit
namespace {

constexpr const char* kOp = "prelu";

const npu::AclnnApi& api() {
  static const npu::AclnnApi a(
      kOp, "aclnnPrelu", npu::SocNeed::Any,
      [](const npu::AclnnApi& api, c10::Device device) {
        at::Tensor x = npu::probe_tensor(device, {1, 2, 8}), w = npu::probe_tensor(device, {2});
        at::Tensor y = npu::probe_tensor(device, {1, 2, 8});
        return npu::probe_launch(api, x, w, y);
      },
      npu::Fallback::Composite);
  return a;
}
const bool kRegistered = npu::register_api(&api);  // for the status report

at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight) {
  check_prelu(self, weight);
  check_npu_float(kOp, "self", self);
  auto composite = [&] { return composite::prelu(self, weight); };
  if (self.scalar_type() == at::kBFloat16 && !npu::soc_supports(npu::SocNeed::A2A3Ascend950)) return composite();
  c10::OptionalDeviceGuard guard(self.device());
  return npu::run_native(
      api(), self.device(),
      [&] {
        at::Tensor y = at::empty(self.sizes(), self.options());
        if (y.numel() == 0 || weight.numel() == 0) return y;
        at::Tensor x_arg = self.dim() == 0 ? self.view({1}) : self;
        at::Tensor y_arg = self.dim() == 0 ? y.view({1}) : y;
        npu::launch(api(), x_arg, weight, y_arg);
        return y;
      },
      composite);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) { m.impl("prelu", &prelu); }

}  // namespace prelu_npu
}  // namespace npu_ext
