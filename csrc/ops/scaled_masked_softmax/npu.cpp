// npu_ext::scaled_masked_softmax on the NPU (PrivateUse1): aclnnScaledMaskedSoftmax(x, mask, double scale,
// bool fixTriuMask, y) (ops-nn vfusion/scaled_masked_softmax_v2, the AscendC kernel; not torch_npu's
// npu_scaled_masked_softmax, which is the TBE kernel on A2/A3). One kernel: it makes x and the mask contiguous
// (a mask with size-1 leading dims is broadcast by the kernel itself, an expanded one is copied), selects -10000
// where the mask is true, and writes y densely (a new contiguous output here).
//   * fix_triu_mask: aclnn rejects fixTriuMask=true (161002), so the causal mask is passed, built once per device
//     and shape (npu::causal_mask); a causal row is never fully masked, so no post-pass.
//   * fully_masked="zero": the kernel gives a fully masked row 1 / S2; a post-pass y.masked_fill_(mask.all(-1), 0)
//     on the device zeroes it (2 kernels, no host synchronisation).
//   * fp16 with scale != 1: the kernel rounds scale and x * scale to fp16 before its fp32 softmax (audit 4.1: 2%
//     error for scores in the hundreds, inf for |x * scale| > 65504), which can move a loss; the contract computes
//     in fp32, so x is cast to fp32, the kernel runs in fp32 and y is cast back (3 kernels). fp16 with scale == 1,
//     bf16 and fp32 are the contract's arithmetic (x * scale in fp32, one rounding: CAST_RINT).
// Kernels on Atlas A2/A3 and Ascend950; S2 <= 4096 as the contract (8192 on Ascend950 for the kernel). Without the
// entry point or the kernel: the composite.
//
// npu_ext::scaled_masked_softmax_backward on the NPU (PrivateUse1): aclnnScaledMaskedSoftmaxBackward(gradOutput,
// y, mask, double scale, bool fixTriuMask, out). aclnn only supports fixTriuMask=false, so fix_triu_mask=True
// passes the causal mask (True where column > row; built once per device and shape, npu::causal_mask) with
// fixTriuMask=false. aclnn
// broadcasts a mask whose first two dims are 1 itself. It makes its inputs contiguous but writes `out` densely
// from its storage offset, ignoring out's strides (ops-nn vfusion/scaled_masked_softmax_grad_v2), so a
// non-contiguous `.out` is computed into a temporary and copied back. Kernels: Atlas A2/A3 and Ascend950.

#include "core/npu/aclnn.h"
#include "core/structured.h"
#include "ops/scaled_masked_softmax/checks.h"
#include "ops/scaled_masked_softmax/composite.h"

namespace npu_ext {
namespace scaled_masked_softmax_npu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace forward {
namespace {

constexpr const char* kOp = "scaled_masked_softmax";

NPU_EXT_ACLNN(api, kOp, aclnnScaledMaskedSoftmax, A2A3Ascend950, Composite, zeros({1, 1, 1, 16}),
              zeros({1, 1, 1, 16}, at::kBool), 1.0, false, zeros({1, 1, 1, 16}))

at::Tensor scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
                                 c10::string_view fully_masked) {
  const FullyMasked policy = check_scaled_masked_softmax(x, mask, fix_triu_mask, fully_masked);
  check_npu_float(kOp, "x", x);
  c10::OptionalDeviceGuard guard;
  structured::make_current(guard, x.device());
  return npu::run_native(
      api(), x.device(),
      [&] {
        const bool fp32_arithmetic = x.scalar_type() == at::kHalf && scale != 1.0;
        at::Tensor x_arg = fp32_arithmetic ? x.to(at::kFloat) : x;
        at::Tensor y = npu::empty(x.sizes(), x_arg.options());
        if (y.numel() == 0) return fp32_arithmetic ? y.to(x.scalar_type()) : y;
        const at::Tensor& m = fix_triu_mask ? npu::causal_mask(x.device(), x.size(2), x.size(3)) : mask;
        bool fix_triu_mask_arg = false;  // the only value aclnn accepts
        npu::launch(api(), x_arg, m, scale, fix_triu_mask_arg, y);
        if (fp32_arithmetic) y = y.to(x.scalar_type());
        if (policy == FullyMasked::Zero && !fix_triu_mask) y.masked_fill_(mask.all(-1, /*keepdim=*/true), 0.0);
        return y;
      },
      [&] { return composite::scaled_masked_softmax(x, mask, scale, fix_triu_mask, fully_masked); });
}

}  // namespace
}  // namespace forward

namespace backward {
namespace {

constexpr const char* kOp = "scaled_masked_softmax_backward";

NPU_EXT_ACLNN(api, kOp, aclnnScaledMaskedSoftmaxBackward, A2A3Ascend950, Cpu, zeros({1, 1, 1, 16}),
              zeros({1, 1, 1, 16}), zeros({1, 1, 1, 16}, at::kBool), 1.0, false, zeros({1, 1, 1, 16}))

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

// Both overloads (core/structured.h: the check and the outputs come from ScaledMaskedSoftmaxBackwardOp).
struct Kernel : npu::StructuredKernel {
  static void check(const at::Tensor& grad_output, const at::Tensor&, const at::Tensor&, double, bool) {
    check_npu_float(kOp, "grad_output", grad_output);
  }
  static void run(const ScaledMaskedSoftmaxBackwardMeta&, const std::array<at::Tensor, 1>& outs,
                  const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask, double scale,
                  bool fix_triu_mask) {
    backward::run(grad_output, y, mask, scale, fix_triu_mask, outs[0]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("scaled_masked_softmax", &forward::scaled_masked_softmax);
  structured::impl<ScaledMaskedSoftmaxBackwardOp, backward::Kernel>(m);
}

}  // namespace scaled_masked_softmax_npu
}  // namespace npu_ext
