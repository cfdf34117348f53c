// npu_ext::scaled_masked_softmax_backward on CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "common/checks.h"
#include "cpu/dispatch.h"
#include "cpu/out_utils.h"

namespace npu_ext {
namespace {

void compute(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask, double scale,
             bool fix_triu_mask, const at::Tensor& out) {
  if (out.numel() == 0) return;
  const at::Tensor m = fix_triu_mask ? at::Tensor() : mask.expand(grad_output.sizes());
  cpu::with_contiguous_out(out, {grad_output, y, m}, [&](const at::Tensor& dst) {
    cpu::scaled_masked_softmax_backward_kernel(grad_output, y, m, scale, fix_triu_mask, dst);
  });
}

at::Tensor scaled_masked_softmax_backward(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                          double scale, bool fix_triu_mask) {
  const auto meta = check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  at::Tensor out = new_output(meta.out, grad_output);
  compute(grad_output, y, mask, scale, fix_triu_mask, out);
  return out;
}

void scaled_masked_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                        double scale, bool fix_triu_mask, const at::Tensor& out) {
  const auto meta = check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  check_out("scaled_masked_softmax_backward", "out", out, meta.out,
            grad_output);
  compute(grad_output, y, mask, scale, fix_triu_mask, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("scaled_masked_softmax_backward", &scaled_masked_softmax_backward);
  m.impl("scaled_masked_softmax_backward.out", &scaled_masked_softmax_backward_out);
}

}  // namespace npu_ext
