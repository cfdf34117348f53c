// npu_ext::gelu on CPU: validation, allocation and the one-pass kernel (csrc/cpu/kernels/gelu.cpp; fp32 math
// for 16-bit inputs, rounded once).
//
// npu_ext::gelu_backward_v2 on CPU.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <torch/library.h>

#include "core/cpu/out.h"
#include "core/structured.h"
#include "ops/gelu/checks.h"
#include "ops/gelu/kernels.h"

namespace npu_ext {
namespace gelu_cpu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace forward {
namespace {

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  const GeluApproximate approx = check_gelu(self, approximate);
  at::Tensor out = at::empty(self.sizes(), self.options());
  if (out.numel() == 0) return out;
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(self).resize_outputs(false).build();
  NPU_EXT_CPU_DISPATCH(gelu_kernel, iter, approx);
  return out;
}

}  // namespace
}  // namespace forward

namespace backward {
namespace {

void compute(const at::Tensor& grad_output, const at::Tensor& self, const GeluBackwardMeta& meta,
             const at::Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  cpu::with_elementwise_out(grad_input, {grad_output, self}, [&](const at::Tensor& dst) {
    auto iter = at::TensorIteratorConfig()
                    .add_output(dst)
                    .add_const_input(grad_output)
                    .add_const_input(self)
                    .promote_inputs_to_common_dtype(true)  // mixed dtypes: result_type(grad_output, self)
                    .resize_outputs(false)
                    .build();
    NPU_EXT_CPU_DISPATCH(gelu_backward_kernel, iter, meta.approximate);
  });
}

// The CPU kernel of both overloads (core/structured.h; the check and the outputs: GeluBackwardV2Op).
struct Kernel {
  static void run(const GeluBackwardMeta& meta, const std::array<at::Tensor, 1>& outs, const at::Tensor& grad_output,
                  const at::Tensor& self, c10::string_view) {
    compute(grad_output, self, meta, outs[0]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("gelu", &forward::gelu);
  structured::impl<GeluBackwardV2Op, backward::Kernel>(m);
}

}  // namespace gelu_cpu
}  // namespace npu_ext
