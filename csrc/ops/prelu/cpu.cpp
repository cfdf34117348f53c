// npu_ext::prelu on CPU: the ATen composite (at::prelu).
//
// npu_ext::prelu_backward on CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <array>
#include <tuple>

#include "core/cpu/out.h"
#include "core/structured.h"
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

// The CPU kernel of both overloads (core/structured.h; the check and the outputs: PreluBackwardOp).
struct Kernel {
  static void run(const PreluBackwardMeta& meta, const std::array<at::Tensor, 2>& outs, const at::Tensor& grad_output,
                  const at::Tensor& self, const at::Tensor& weight) {
    compute(grad_output, self, weight, meta, outs[0], outs[1]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("prelu", &composite::prelu);
  structured::impl<PreluBackwardOp, backward::Kernel>(m);
}

}  // namespace prelu_cpu
}  // namespace npu_ext
