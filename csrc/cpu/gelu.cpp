// npu_ext::gelu on CPU: validation, allocation and the one-pass kernel (csrc/cpu/kernels/gelu.cpp; fp32 math
// for 16-bit inputs, rounded once).
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <torch/library.h>

#include "common/checks.h"
#include "cpu/dispatch.h"

namespace npu_ext {
namespace {

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  const GeluApproximate approx = check_gelu(self, approximate);
  at::Tensor out = at::empty(self.sizes(), self.options());
  if (out.numel() == 0) return out;
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(self).resize_outputs(false).build();
  cpu::gelu_kernel(iter, approx);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) { m.impl("gelu", &gelu); }

}  // namespace npu_ext
