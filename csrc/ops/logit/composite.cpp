// logit and logit_grad (and its .out overload) as compositions of ATen ops, registered on
// CompositeExplicitAutograd: what runs on any device that has no kernel of its own (CUDA, XPU, MPS, ...), so
// training through torch_ext works wherever PyTorch runs. A kernel registered on a backend key wins over it on that
// backend: CPU (cpu.cpp), Meta (library.cpp) and PrivateUse1 (npu.cpp, which calls the forward composite where aclnn's
// kernel is unavailable: torch_ext._C_npu compiles this file too, extension modules share no symbols). Autograd is
// not part of CompositeExplicitAutograd: it is on the generic Autograd key (autograd.cpp).
//
// Same contract as every other kernel (docs/operators.md): the family's checks first, 16-bit inputs computed in fp32
// and rounded once, reductions in fp32 (fp64 for fp64), contiguous outputs; the .out overload computes the whole
// result before writing, so any aliasing of inputs is fine. Reduction order is ATen's on that device. Tests call it
// on the CPU with OpOverload._op_dk("CompositeExplicitAutograd", ...).
#include "ops/logit/composite.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "core/composite.h"
#include "core/structured.h"
#include "ops/logit/checks.h"

namespace npu_ext {
namespace composite {

at::Tensor logit(const at::Tensor& self, c10::optional<double> eps) {
  check_logit(self);
  return finish(at::logit(opmath(self), eps), self.scalar_type());
}

namespace {

// ---------------------------------------------------------------------------------------------------------
at::Tensor logit_grad(const at::Tensor& x, const at::Tensor& dy, double eps) {
  check_logit_grad(x, dy);
  const at::Tensor xx = opmath(x);
  const at::Tensor d = opmath(dy);
  const at::Tensor value = d / (xx * (1.0 - xx));
  const LogitGradBounds b = logit_grad_bounds(eps, x.scalar_type());
  // The quotient is kept where lo <= x <= hi; anything else, NaN x included, gets the fill (the NPU's select).
  const at::Tensor inside = xx.ge(b.lo).logical_and_(xx.le(b.hi));
  const at::Tensor fill = at::full({}, b.clamp ? 0.0 : std::numeric_limits<double>::quiet_NaN(), xx.options());
  return finish(at::where(inside, value, fill), x.scalar_type());
}

}  // namespace
}  // namespace composite

NPU_EXT_COMPOSITE(LogitOp, composite::logit)
NPU_EXT_COMPOSITE(LogitGradOp, composite::logit_grad)  // .out: the result copied

}  // namespace npu_ext
