// npu_ext::logit on CPU: ATen's logit (fp32 math for 16-bit inputs, rounded once: the composite). fp32/fp64
// inputs call ATen's CPU logit kernel directly (at::cpu::logit: no composite dtype round trips and no second
// trip through the dispatcher, which is what a small training step pays).
//
// npu_ext::logit_grad on CPU.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/ops/logit_cpu_dispatch.h>
#include <torch/library.h>

#include "core/cpu/out.h"
#include "core/structured.h"
#include "ops/logit/checks.h"
#include "ops/logit/composite.h"
#include "ops/logit/kernels.h"

namespace npu_ext {
namespace logit_cpu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace forward {
namespace {

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  const auto dtype = self.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) return composite::logit(self, eps);
  check_logit(self);
  return at::cpu::logit(self, eps).contiguous();
}

}  // namespace
}  // namespace forward

namespace backward {
namespace {

void compute(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  if (dx.numel() == 0) return;
  cpu::with_elementwise_out(dx, {x, dy}, [&](const at::Tensor& dst) {
    auto iter =
        at::TensorIteratorConfig().add_output(dst).add_const_input(x).add_const_input(dy).resize_outputs(false).build();
    NPU_EXT_CPU_DISPATCH(logit_grad_kernel, iter, eps);
  });
}

// The CPU kernel of both overloads (core/structured.h; the check and the outputs: LogitGradOp).
struct Kernel {
  static void run(const LogitGradMeta& meta, const std::array<at::Tensor, 1>& outs, const at::Tensor& x,
                  const at::Tensor& dy, double eps) {
    compute(x, dy, eps, outs[0]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("logit", &forward::logit);
  structured::impl<LogitGradOp, backward::Kernel>(m);
}

}  // namespace logit_cpu
}  // namespace npu_ext
