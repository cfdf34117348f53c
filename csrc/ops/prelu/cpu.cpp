// npu_ext::prelu on CPU: the ATen composite (at::prelu).
//
// npu_ext::prelu_backward on CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "core/cpu/out.h"
#include "ops/prelu/checks.h"
#include "ops/prelu/composite.h"
#include "ops/prelu/kernels.h"

namespace npu_ext {
namespace prelu_cpu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace backward {
namespace {

void compute(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
             const PreluBackwardMeta& meta, const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  if (self.numel() == 0) {
    grad_weight.zero_();  // a sum over nothing
    return;
  }
  const at::Tensor x = self.contiguous();
  const at::Tensor g = grad_output.expand(self.sizes()).contiguous();
  const at::Tensor w = weight.contiguous();
  // View x as (outer, channels, inner); one scalar weight makes everything channel 0.
  const int64_t channels = meta.per_channel ? meta.channels.expect_int() : 1;
  const int64_t outer = meta.per_channel ? self.size(0) : 1;
  const int64_t inner = self.numel() / (outer * channels);
  cpu::with_contiguous_out(grad_input, {grad_output, self, weight}, [&](const at::Tensor& gi) {
    cpu::with_contiguous_out(grad_weight, {grad_output, self, weight, grad_input}, [&](const at::Tensor& gw) {
      NPU_EXT_CPU_DISPATCH(prelu_backward_kernel, g, x, w, gi, gw, outer, channels, inner);
    });
  });
}

std::tuple<at::Tensor, at::Tensor> prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                  const at::Tensor& weight) {
  const auto meta = check_prelu_backward(grad_output, self, weight);
  at::Tensor grad_input = new_output(meta.grad_input, self);
  at::Tensor grad_weight = new_output(meta.grad_weight, weight);
  compute(grad_output, self, weight, meta, grad_input, grad_weight);
  return {grad_input, grad_weight};
}

void prelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
                        const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  const auto meta = check_prelu_backward(grad_output, self, weight);
  check_out("prelu_backward", "grad_input", grad_input, meta.grad_input, self);
  check_out("prelu_backward", "grad_weight", grad_weight, meta.grad_weight, self);
  compute(grad_output, self, weight, meta, grad_input, grad_weight);
}

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("prelu", &composite::prelu);
  m.impl("prelu_backward", &backward::prelu_backward);
  m.impl("prelu_backward.out", &backward::prelu_backward_out);
}

}  // namespace prelu_cpu
}  // namespace npu_ext
