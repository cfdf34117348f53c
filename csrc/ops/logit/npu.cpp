// npu_ext::logit on the NPU (PrivateUse1): aclnnLogit(input, double eps, out), eps < 0 for "no clamp" (ops-nn
// loss/logit). One kernel, the same arithmetic as the contract (16-bit inputs computed in fp32 and rounded once,
// NaN x kept NaN; audit section 3). The generated operator makes its input contiguous and writes `out` densely,
// which a new contiguous output is. Kernels on Atlas A2/A3 and Ascend950 (since 2026-01: an older CANN has the
// entry point without the kernel there, which the probe finds); otherwise the composite.
//
// npu_ext::logit_grad on the NPU (PrivateUse1): aclnnLogitGrad(x, dy, double eps, out). Note: x before dy.
// The generated aclnnLogitGrad makes only its inputs contiguous and writes `out` densely from its storage
// offset, so a non-contiguous `.out` is computed into a temporary and copied back. Kernels exist on Atlas
// A2/A3 and Ascend950 only (ops-nn loss/logit_grad/op_host/logit_grad_def.cpp; Ascend950 since 2026-02: an older
// CANN's phase 1 fails there with 561003, which the probe turns into the CPU fallback). The kernel keeps the
// quotient only where eps <= x <= 1 - eps (or 0 <= x <= 1) and selects the fill elsewhere, NaN x included: the
// CPU kernel does the same (docs/operators.md, "Semantics notes").

#include "core/npu/aclnn.h"
#include "core/structured.h"
#include "ops/logit/checks.h"
#include "ops/logit/composite.h"

namespace npu_ext {
namespace logit_npu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace forward {
namespace {

constexpr const char* kOp = "logit";

NPU_EXT_ACLNN(api, kOp, aclnnLogit, A2A3Ascend950, Composite, zeros({16}), -1.0, zeros({16}))

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  check_logit(self);
  check_npu_float(kOp, "self", self);
  return npu::run_elementwise(
      api(), self,
      [&](const at::Tensor& y) {
        double eps_arg = eps.value_or(-1.0);  // op-plugin passes the same for eps=None
        npu::launch(api(), self, eps_arg, y);
      },
      [&] { return composite::logit(self, eps); });
}

}  // namespace
}  // namespace forward

namespace backward {
namespace {

constexpr const char* kOp = "logit_grad";

NPU_EXT_ACLNN(api, kOp, aclnnLogitGrad, A2A3Ascend950, Cpu, zeros({16}), zeros({16}), -1.0, zeros({16}))

void run(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  if (dx.numel() == 0) return;  // nothing to compute
  npu::OutSlot out(dx, npu::OutWrite::Dense, {x, dy});
  npu::run_op(
      api(), x.device(), [&] { npu::launch(api(), x, dy, eps, out.target()); },
      [&] {
        static const auto cpu =
            npu::cpu_op<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("npu_ext::logit_grad");
        out.target().copy_(cpu.call(x.cpu(), dy.cpu(), eps));
      });
  out.finish();
}

// Both overloads (core/structured.h: the check and the outputs come from LogitGradOp).
struct Kernel : npu::StructuredKernel {
  static void check(const at::Tensor& x, const at::Tensor& dy, double) {
    check_npu_float(kOp, "x", x);
    check_npu_float(kOp, "dy", dy);
  }
  static void run(const LogitGradMeta&, const std::array<at::Tensor, 1>& outs, const at::Tensor& x,
                  const at::Tensor& dy, double eps) {
    backward::run(x, dy, eps, outs[0]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("logit", &forward::logit);
  structured::impl<LogitGradOp, backward::Kernel>(m);
}

}  // namespace logit_npu
}  // namespace npu_ext
