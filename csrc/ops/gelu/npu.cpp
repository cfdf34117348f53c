// npu_ext::gelu on the NPU (PrivateUse1): aclnnGeluV2(x, int64 approximate, y), approximate 0 = "none", 1 = "tanh"
// (ops-nn activation/gelu_v2; never aclnnGelu, which is the tanh form only: forward-op audit, F1). One kernel; the
// input may have any strides (aclnn makes it contiguous), the output is new and contiguous.
//
// The kernel's "none" is not erf (audit 1.4-1.5): on Atlas A2/A3 a fitted polynomial x / (1 + exp(p(x1^2) x1)),
// x1 = min(x, 5.75), 9.8e-5 relative where |y| > 1e-3; on Ascend950 a Pade erf clipped to [-3.92, 3.92]. Both lose
// the left tail below about x = -5, where GELU is under 1e-5 of its input. That is below fp16 and bf16 rounding
// everywhere a training step can see, so 16-bit inputs take the kernel; for fp32 it is 1e3 times fp32's rounding,
// so fp32 "none" keeps the contract with the composite (x / 2 (1 + erf(x / sqrt 2)) in ATen ops: 4 kernels) and
// fp32 "tanh" takes the kernel (docs/operators.md, "Semantics notes"). bf16 only where the kernel takes it (A2/A3,
// Ascend950; 161002 elsewhere): the composite otherwise. Without the entry point or the kernel: the composite.
//
// npu_ext::gelu_backward_v2 on the NPU (PrivateUse1): aclnnGeluBackwardV2(gradOutput, self, char* approximate,
// gradInput). aclnn broadcasts and copies into a strided gradInput itself. It promotes the two dtypes with its
// own rule, which has no 0-dim "wrapped number" exception, and rejects a promoted dtype other than gradInput's
// (ops-nn aclnn_gelu_backward_v2.cpp, CheckPromoteTypeGeluBackward), so mixed dtypes are cast to the output dtype
// result_type(grad_output, self) first: the values the CPU kernel computes from.

#include <array>
#include <string>

#include "core/npu/aclnn.h"
#include "core/structured.h"
#include "ops/gelu/checks.h"
#include "ops/gelu/composite.h"

namespace npu_ext {
namespace gelu_npu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace forward {
namespace {

constexpr const char* kOp = "gelu";

NPU_EXT_ACLNN(api, kOp, aclnnGeluV2, Any, Composite, zeros({16}), int64_t{0}, zeros({16}))

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  const GeluApproximate mode = check_gelu(self, approximate);
  check_npu_float(kOp, "self", self);
  const bool tanh_form = mode == GeluApproximate::Tanh;
  const bool takes_kernel = (tanh_form || self.scalar_type() != at::kFloat) &&
                            (self.scalar_type() != at::kBFloat16 || npu::soc_supports(npu::SocNeed::A2A3Ascend950));
  auto composite = [&] { return composite::gelu(self, approximate); };
  if (!takes_kernel) return composite();
  return npu::run_elementwise(
      api(), self,
      [&](const at::Tensor& y) {
        int64_t approximate_arg = tanh_form ? 1 : 0;
        npu::launch(api(), self, approximate_arg, y);
      },
      composite);
}

}  // namespace
}  // namespace forward

namespace backward {
namespace {

constexpr const char* kOp = "gelu_backward_v2";

NPU_EXT_ACLNN(api, kOp, aclnnGeluBackwardV2, Any, Cpu, zeros({16}), zeros({16}), text("none"), zeros({16}))

void run(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
         const GeluBackwardMeta& meta, const at::Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  npu::OutSlot out(grad_input, npu::OutWrite::Strided, {grad_output, self});
  npu::run_op(
      api(), grad_output.device(),
      [&] {
        // cast only where the dtype differs: a no-op .to() is still a dispatcher call on every launch (host cost)
        const at::ScalarType dtype = meta.grad_input.dtype;
        at::Tensor g = grad_output.scalar_type() == dtype ? grad_output : grad_output.to(dtype);
        at::Tensor x = self.scalar_type() == dtype ? self : self.to(dtype);
        std::string mode = meta.approximate == GeluApproximate::Tanh ? "tanh" : "none";
        char* mode_arg = mode.data();  // aclnn takes a mutable host C string
        npu::launch(api(), g, x, mode_arg, out.target());
      },
      [&] {
        static const auto cpu =
            npu::cpu_op<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>("npu_ext::gelu_backward_v2");
        out.target().copy_(cpu.call(grad_output.cpu(), self.cpu(), approximate));
      });
  out.finish();
}

// Both overloads (core/structured.h: the check and the outputs come from GeluBackwardV2Op).
struct Kernel : npu::StructuredKernel {
  static void check(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view) {
    check_npu_float(kOp, "grad_output", grad_output);
    check_npu_float(kOp, "self", self);
  }
  static void run(const GeluBackwardMeta& meta, const std::array<at::Tensor, 1>& outs, const at::Tensor& grad_output,
                  const at::Tensor& self, c10::string_view approximate) {
    backward::run(grad_output, self, approximate, meta, outs[0]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("gelu", &forward::gelu);
  structured::impl<GeluBackwardV2Op, backward::Kernel>(m);
}

}  // namespace gelu_npu
}  // namespace npu_ext
