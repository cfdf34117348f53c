// npu_ext::scaled_masked_softmax_backward on the NPU (PrivateUse1): aclnnScaledMaskedSoftmaxBackward(gradOutput,
// y, mask, double scale, bool fixTriuMask, out). aclnn only supports fixTriuMask=false, so fix_triu_mask=True
// passes the causal mask (True where column > row; built once per device and shape, npu::causal_mask) with
// fixTriuMask=false. aclnn
// broadcasts a mask whose first two dims are 1 itself. It makes its inputs contiguous but writes `out` densely
// from its storage offset, ignoring out's strides (ops-nn vfusion/scaled_masked_softmax_grad_v2), so a
// non-contiguous `.out` is computed into a temporary and copied back. Kernels: Atlas A2/A3 and Ascend950.
#include "npu/npu_common.h"

namespace npu_ext {
namespace scaled_masked_softmax_backward_npu {  // this file's own: the unity build (setup.py) compiles the op files as one unit
namespace {

constexpr const char* kOp = "scaled_masked_softmax_backward";

const npu::AclnnApi& api() {
  static const npu::AclnnApi a(
      kOp, "aclnnScaledMaskedSoftmaxBackward", npu::SocNeed::A2A3Ascend950,
      [](const npu::AclnnApi& api, c10::Device device) {
        at::Tensor g = npu::probe_tensor(device, {1, 1, 1, 16}), y = npu::probe_tensor(device, {1, 1, 1, 16});
        at::Tensor mask = npu::probe_tensor(device, {1, 1, 1, 16}, at::kBool);
        at::Tensor out = npu::probe_tensor(device, {1, 1, 1, 16});
        double scale = 1.0;
        bool fix_triu_mask = false;
        return npu::probe_launch(api, g, y, mask, scale, fix_triu_mask, out);
      });
  return a;
}
const bool kRegistered = npu::register_api(&api);  // for the status report

ScaledMaskedSoftmaxBackwardMeta validate(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                         bool fix_triu_mask) {
  auto meta = check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  check_npu_float(kOp, "grad_output", grad_output);
  return meta;
}

void run(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask, double scale,
         bool fix_triu_mask, const at::Tensor& out) {
  if (out.numel() == 0) return;
  npu::OutSlot slot(out, npu::OutWrite::Dense, {grad_output, y, fix_triu_mask ? at::Tensor() : mask});
  npu::run_op(
      api(), grad_output.device(),
      [&] {
        const at::Tensor& used_mask =
            fix_triu_mask ? npu::causal_mask(grad_output.device(), grad_output.size(2), grad_output.size(3)) : mask;
        bool fix_triu_mask_arg = false;  // the only value aclnn accepts
        npu::launch(api(), grad_output, y, used_mask, scale, fix_triu_mask_arg, slot.target());
      },
      [&] {
        static const auto cpu = npu::cpu_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double,
                                                       bool)>("npu_ext::scaled_masked_softmax_backward");
        slot.target().copy_(cpu.call(grad_output.cpu(), y.cpu(), mask.cpu(), scale, fix_triu_mask));
      });
  slot.finish();
}

at::Tensor scaled_masked_softmax_backward(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                          double scale, bool fix_triu_mask) {
  const auto meta = validate(grad_output, y, mask, fix_triu_mask);
  c10::OptionalDeviceGuard guard(grad_output.device());
  at::Tensor out = new_output(meta.out, grad_output);
  run(grad_output, y, mask, scale, fix_triu_mask, out);
  return out;
}

void scaled_masked_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                        double scale, bool fix_triu_mask, const at::Tensor& out) {
  const auto meta = validate(grad_output, y, mask, fix_triu_mask);
  check_out(kOp, "out", out, meta.out, grad_output);
  c10::OptionalDeviceGuard guard(grad_output.device());
  run(grad_output, y, mask, scale, fix_triu_mask, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("scaled_masked_softmax_backward", &scaled_masked_softmax_backward);
  m.impl("scaled_masked_softmax_backward.out", &scaled_masked_softmax_backward_out);
}

}  // namespace scaled_masked_softmax_backward_npu
}  // namespace npu_ext
