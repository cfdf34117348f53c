// npu_ext::scaled_masked_softmax on CPU: validation, allocation and the fused kernel
// (csrc/cpu/kernels/scaled_masked_softmax.cpp), y = softmax((x * scale).masked_fill(mask, -10000), -1), with
// fully masked rows uniform or zero (fully_masked).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "common/checks.h"
#include "cpu/dispatch.h"

namespace npu_ext {
namespace {

at::Tensor scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
                                 c10::string_view fully_masked) {
  const FullyMasked policy = check_scaled_masked_softmax(x, mask, fix_triu_mask, fully_masked);
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) return out;
  const at::Tensor m = fix_triu_mask ? at::Tensor() : mask.expand(x.sizes());
  cpu::scaled_masked_softmax_kernel(x, m, scale, fix_triu_mask, policy == FullyMasked::Zero, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) { m.impl("scaled_masked_softmax", &scaled_masked_softmax); }

}  // namespace npu_ext
