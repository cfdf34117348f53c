// npu_ext::gelu on CPU: validation, allocation and the one-pass kernel (csrc/cpu/kernels/gelu.cpp; fp32 math
// for 16-bit inputs, rounded once).
//
// npu_ext::gelu_backward_v2 on CPU.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <torch/library.h>

#include "core/cpu/out.h"
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

at::Tensor gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  at::Tensor grad_input = new_output(meta.grad_input, grad_output);
  compute(grad_output, self, meta, grad_input);
  return grad_input;
}

void gelu_backward_v2_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                          const at::Tensor& grad_input) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  check_out("gelu_backward_v2", "grad_input", grad_input, meta.grad_input, self);
  compute(grad_output, self, meta, grad_input);
}

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("gelu", &forward::gelu);
  m.impl("gelu_backward_v2", &backward::gelu_backward_v2);
  m.impl("gelu_backward_v2.out", &backward::gelu_backward_v2_out);
}

}  // namespace gelu_cpu
}  // namespace npu_ext
