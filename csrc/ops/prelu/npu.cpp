// npu_ext::prelu on the NPU (PrivateUse1): aclnnPrelu(self, weight, out) (ops-nn activation/p_relu). One kernel:
// aclnn reshapes a weight of C elements (any shape) to [1, C, 1, ...] itself and copies into `out` honouring its
// strides; the output here is new and contiguous. A 0-dim self is passed as shape [1] (aclnn reshapes only rank
// >= 1; audit 8.4). The kernel computes x > 0 ? x : x * w with one product rounding in the dtype, which for 16-bit
// inputs equals the contract's fp32 product rounded once (an fp16 or bf16 product is exact in fp32). bf16 only on
// A2/A3 and Ascend950 (the composite elsewhere); without the entry point or the kernel: the composite.
//
// npu_ext::prelu_backward on the NPU (PrivateUse1): aclnnPreluBackward(gradOutput, self, weight, gradInput,
// gradWeight). aclnn broadcasts gradOutput to self's shape and copies into strided outputs itself. It wants
// gradWeight 1-D [C] when weight has more than one element (and weight's own shape when it has one), so a
// multi-dimensional weight gets a 1-D gradient buffer that is copied back. An empty self is a reduction over
// nothing: grad_weight is zero-filled here, since aclnn returns early and leaves it untouched.

#include <array>
#include <tuple>
#include <vector>

#include "core/npu/aclnn.h"
#include "core/structured.h"
#include "ops/prelu/checks.h"
#include "ops/prelu/composite.h"

namespace npu_ext {
namespace prelu_npu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace forward {
namespace {

constexpr const char* kOp = "prelu";

NPU_EXT_ACLNN(api, kOp, aclnnPrelu, Any, Composite, zeros({1, 2, 8}), zeros({2}), zeros({1, 2, 8}))

at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight) {
  check_prelu(self, weight);
  check_npu_float(kOp, "self", self);
  auto composite = [&] { return composite::prelu(self, weight); };
  if (self.scalar_type() == at::kBFloat16 && !npu::soc_supports(npu::SocNeed::A2A3Ascend950)) return composite();
  return npu::run_elementwise(
      api(), self,
      [&](const at::Tensor& y) {
        if (weight.numel() == 0) return;
        at::Tensor x_arg = self.dim() == 0 ? self.view({1}) : self;
        at::Tensor y_arg = self.dim() == 0 ? y.view({1}) : y;
        npu::launch(api(), x_arg, weight, y_arg);
      },
      composite);
}

}  // namespace
}  // namespace forward

namespace backward {
namespace {

constexpr const char* kOp = "prelu_backward";

NPU_EXT_ACLNN(api, kOp, aclnnPreluBackward, Any, Cpu, zeros({2, 8}), zeros({2, 8}), zeros({8}), zeros({2, 8}),
              zeros({8}))

void run(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
         const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  if (self.numel() == 0) {
    grad_weight.zero_();  // a sum over nothing; grad_input is empty
    return;
  }
  const std::vector<int64_t> gw_shape = weight.numel() != 1 ? std::vector<int64_t>{weight.numel()} : weight.sizes().vec();
  npu::OutSlot gi(grad_input, npu::OutWrite::Strided, {grad_output, self, weight});
  npu::OutSlot gw(grad_weight, npu::OutWrite::Strided, {grad_output, self, weight, grad_input}, gw_shape);
  // aclnn reshapes a 1-D self to (1, N) but passes a 0-dim one on to kernels that index its dimension 1 (the
  // TBE kernel's weight broadcast, the Ascend950 tiling): a 0-dim self (and then grad_output and grad_input,
  // which have its shape) goes to aclnn as the same single element viewed as [1].
  const auto as_aclnn = [&](const at::Tensor& t) { return self.dim() == 0 ? t.view({1}) : t; };
  npu::run_op(
      api(), self.device(),
      [&] {
        at::Tensor g = as_aclnn(grad_output), x = as_aclnn(self), gi_target = as_aclnn(gi.target());
        npu::launch(api(), g, x, weight, gi_target, gw.target());
      },
      [&] {
        static const auto cpu =
            npu::cpu_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&)>(
                "npu_ext::prelu_backward");
        const auto r = cpu.call(grad_output.cpu(), self.cpu(), weight.cpu());
        gi.target().copy_(std::get<0>(r));
        gw.target().copy_(std::get<1>(r).reshape(gw.target().sizes()));
      });
  gi.finish();
  gw.finish();
}

// Both overloads (core/structured.h: the check and the outputs come from PreluBackwardOp).
struct Kernel : npu::StructuredKernel {
  static void check(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight) {
    check_npu_float(kOp, "self", self);
    check_npu_float(kOp, "grad_output", grad_output);
    check_npu_float(kOp, "weight", weight);
  }
  static void run(const PreluBackwardMeta&, const std::array<at::Tensor, 2>& outs, const at::Tensor& grad_output,
                  const at::Tensor& self, const at::Tensor& weight) {
    backward::run(grad_output, self, weight, outs[0], outs[1]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("prelu", &forward::prelu);
  structured::impl<PreluBackwardOp, backward::Kernel>(m);
}

}  // namespace prelu_npu
}  // namespace npu_ext
