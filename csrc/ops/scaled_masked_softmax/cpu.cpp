// npu_ext::scaled_masked_softmax on CPU: validation, allocation and the fused kernel
// (csrc/cpu/kernels/scaled_masked_softmax.cpp), y = softmax((x * scale).masked_fill(mask, -10000), -1), with
// fully masked rows uniform or zero (fully_masked).
//
// npu_ext::scaled_masked_softmax_backward on CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "core/cpu/out.h"
#include "core/structured.h"
#include "ops/scaled_masked_softmax/checks.h"
#include "ops/scaled_masked_softmax/kernels.h"

namespace npu_ext {
namespace scaled_masked_softmax_cpu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace forward {
namespace {

at::Tensor scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
                                 c10::string_view fully_masked) {
  const FullyMasked policy = check_scaled_masked_softmax(x, mask, fix_triu_mask, fully_masked);
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) return out;
  const at::Tensor m = fix_triu_mask ? at::Tensor() : mask.expand(x.sizes());
  NPU_EXT_CPU_DISPATCH(scaled_masked_softmax_kernel, x, m, scale, fix_triu_mask, policy == FullyMasked::Zero, out);
  return out;
}

}  // namespace
}  // namespace forward

namespace backward {
namespace {

void compute(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask, double scale,
             bool fix_triu_mask, const at::Tensor& out) {
  if (out.numel() == 0) return;
  const at::Tensor m = fix_triu_mask ? at::Tensor() : mask.expand(grad_output.sizes());
  cpu::with_contiguous_out(out, {grad_output, y, m}, [&](const at::Tensor& dst) {
    NPU_EXT_CPU_DISPATCH(scaled_masked_softmax_backward_kernel, grad_output, y, m, scale, fix_triu_mask, dst);
  });
}

// The CPU kernel of both overloads (core/structured.h; the check and the outputs: ScaledMaskedSoftmaxBackwardOp).
struct Kernel {
  static void run(const ScaledMaskedSoftmaxBackwardMeta& meta, const std::array<at::Tensor, 1>& outs,
                  const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask, double scale,
                  bool fix_triu_mask) {
    compute(grad_output, y, mask, scale, fix_triu_mask, outs[0]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("scaled_masked_softmax", &forward::scaled_masked_softmax);
  structured::impl<ScaledMaskedSoftmaxBackwardOp, backward::Kernel>(m);
}

}  // namespace scaled_masked_softmax_cpu
}  // namespace npu_ext
