// npu_ext::gelu_backward_v2 on the NPU (PrivateUse1): aclnnGeluBackwardV2(gradOutput, self, char* approximate,
// gradInput). aclnn broadcasts and copies into a strided gradInput itself. It promotes the two dtypes with its
// own rule, which has no 0-dim "wrapped number" exception, and rejects a promoted dtype other than gradInput's
// (ops-nn aclnn_gelu_backward_v2.cpp, CheckPromoteTypeGeluBackward), so mixed dtypes are cast to the output dtype
// result_type(grad_output, self) first: the values the CPU kernel computes from.
#include "npu/npu_common.h"

#include <string>

namespace npu_ext {
namespace gelu_backward_v2_npu {  // this file's own: the unity build (setup.py) compiles the op files as one unit
namespace {

constexpr const char* kOp = "gelu_backward_v2";

const npu::AclnnApi& api() {
  static const npu::AclnnApi a(kOp, "aclnnGeluBackwardV2", npu::SocNeed::Any,
                               [](const npu::AclnnApi& api, c10::Device device) {
                                 at::Tensor g = npu::probe_tensor(device, {16}), x = npu::probe_tensor(device, {16});
                                 at::Tensor gi = npu::probe_tensor(device, {16});
                                 char mode[] = "none";
                                 char* mode_arg = mode;
                                 return npu::probe_launch(api, g, x, mode_arg, gi);
                               });
  return a;
}
const bool kRegistered = npu::register_api(&api);  // for the status report

GeluBackwardMeta validate(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  check_npu_float(kOp, "grad_output", grad_output);
  check_npu_float(kOp, "self", self);
  return meta;
}

void run(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
         const GeluBackwardMeta& meta, const at::Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  npu::OutSlot out(grad_input, npu::OutWrite::Strided, {grad_output, self});
  npu::run_op(
      api(), grad_output.device(),
      [&] {
        at::Tensor g = grad_output.to(meta.grad_input.dtype);  // the same tensor when the dtype already matches
        at::Tensor x = self.to(meta.grad_input.dtype);
        std::string mode = meta.approximate == GeluApproximate::Tanh ? "tanh" : "none";
        char* mode_arg = mode.data();  // aclnn takes a mutable host C string
        npu::launch(api(), g, x, mode_arg, out.target());
      },
      [&] {
        static const auto cpu =
            npu::cpu_op<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>("npu_ext::gelu_backward_v2");
        out.target().copy_(cpu.call(grad_output.cpu(), self.cpu(), approximate));
      });
  out.finish();
}

at::Tensor gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  const auto meta = validate(grad_output, self, approximate);
  c10::OptionalDeviceGuard guard(self.device());
  at::Tensor grad_input = new_output(meta.grad_input, self);
  run(grad_output, self, approximate, meta, grad_input);
  return grad_input;
}

void gelu_backward_v2_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                          const at::Tensor& grad_input) {
  const auto meta = validate(grad_output, self, approximate);
  check_out(kOp, "grad_input", grad_input, meta.grad_input, self);
  c10::OptionalDeviceGuard guard(self.device());
  run(grad_output, self, approximate, meta, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("gelu_backward_v2", &gelu_backward_v2);
  m.impl("gelu_backward_v2.out", &gelu_backward_v2_out);
}

}  // namespace gelu_backward_v2_npu
}  // namespace npu_ext
