// npu_ext::prelu_backward on the NPU (PrivateUse1): aclnnPreluBackward(gradOutput, self, weight, gradInput,
// gradWeight). aclnn broadcasts gradOutput to self's shape and copies into strided outputs itself. It wants
// gradWeight 1-D [C] when weight has more than one element (and weight's own shape when it has one), so a
// multi-dimensional weight gets a 1-D gradient buffer that is copied back. An empty self is a reduction over
// nothing: grad_weight is zero-filled here, since aclnn returns early and leaves it untouched.
#include "npu/npu_common.h"

#include <tuple>
#include <vector>

namespace npu_ext {
namespace prelu_backward_npu {  // this file's own: the unity build (setup.py) compiles the op files as one unit
namespace {

constexpr const char* kOp = "prelu_backward";

const npu::AclnnApi& api() {
  static const npu::AclnnApi a(kOp, "aclnnPreluBackward", npu::SocNeed::Any,
                               [](const npu::AclnnApi& api, c10::Device device) {
                                 at::Tensor g = npu::probe_tensor(device, {2, 8});
                                 at::Tensor x = npu::probe_tensor(device, {2, 8});
                                 at::Tensor w = npu::probe_tensor(device, {8});
                                 at::Tensor gi = npu::probe_tensor(device, {2, 8});
                                 at::Tensor gw = npu::probe_tensor(device, {8});
                                 return npu::probe_launch(api, g, x, w, gi, gw);
                               });
  return a;
}
const bool kRegistered = npu::register_api(&api);  // for the status report

PreluBackwardMeta validate(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight) {
  auto meta = check_prelu_backward(grad_output, self, weight);
  check_npu_float(kOp, "self", self);
  check_npu_float(kOp, "grad_output", grad_output);
  check_npu_float(kOp, "weight", weight);
  return meta;
}

void run(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
         const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  if (self.numel() == 0) {
    grad_weight.zero_();  // a sum over nothing; grad_input is empty
    return;
  }
  const std::vector<int64_t> gw_shape = weight.numel() != 1 ? std::vector<int64_t>{weight.numel()} : weight.sizes().vec();
  npu::OutSlot gi(grad_input, npu::OutWrite::Strided, {grad_output, self, weight});
  npu::OutSlot gw(grad_weight, npu::OutWrite::Strided, {grad_output, self, weight, grad_input}, gw_shape);
  // aclnn reshapes a 1-D self to (1, N) but passes a 0-dim one on to kernels that index its dimension 1 (the
  // TBE kernel's weight broadcast, the Ascend950 tiling): a 0-dim self (and then grad_output and grad_input,
  // which have its shape) goes to aclnn as the same single element viewed as [1].
  const auto as_aclnn = [&](const at::Tensor& t) { return self.dim() == 0 ? t.view({1}) : t; };
  npu::run_op(
      api(), self.device(),
      [&] {
        at::Tensor g = as_aclnn(grad_output), x = as_aclnn(self), gi_target = as_aclnn(gi.target());
        npu::launch(api(), g, x, weight, gi_target, gw.target());
      },
      [&] {
        static const auto cpu =
            npu::cpu_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&)>(
                "npu_ext::prelu_backward");
        const auto r = cpu.call(grad_output.cpu(), self.cpu(), weight.cpu());
        gi.target().copy_(std::get<0>(r));
        gw.target().copy_(std::get<1>(r).reshape(gw.target().sizes()));
      });
  gi.finish();
  gw.finish();
}

std::tuple<at::Tensor, at::Tensor> prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                  const at::Tensor& weight) {
  const auto meta = validate(grad_output, self, weight);
  c10::OptionalDeviceGuard guard(self.device());
  at::Tensor grad_input = new_output(meta.grad_input, self);
  at::Tensor grad_weight = new_output(meta.grad_weight, weight);
  run(grad_output, self, weight, grad_input, grad_weight);
  return {grad_input, grad_weight};
}

void prelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
                        const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  const auto meta = validate(grad_output, self, weight);
  check_out(kOp, "grad_input", grad_input, meta.grad_input, self);
  check_out(kOp, "grad_weight", grad_weight, meta.grad_weight, self);
  c10::OptionalDeviceGuard guard(self.device());
  run(grad_output, self, weight, grad_input, grad_weight);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("prelu_backward", &prelu_backward);
  m.impl("prelu_backward.out", &prelu_backward_out);
}

}  // namespace prelu_backward_npu
}  // namespace npu_ext
