// gelu and gelu_backward_v2 (and its .out overload) as compositions of ATen ops, registered on
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
#include "ops/gelu/composite.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "core/composite.h"
#include "core/structured.h"
#include "ops/gelu/checks.h"

namespace npu_ext {
namespace composite {

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  check_gelu(self, approximate);
  const at::Tensor x = opmath(self);
  // On an NPU, never at::gelu for "none": torch_npu 2.13 sends aten::gelu to aclnnGelu on an Atlas A2/A3 (and on an
  // Ascend950 with op-plugin 26.0.0), which is the tanh form whatever `approximate` says (forward-op audit, F1).
  // erfc(-x / sqrt 2) rather than 1 + erf(x / sqrt 2): no cancellation in the left tail.
  if (approximate == "none" && self.device().type() == c10::DeviceType::PrivateUse1) {
    return finish(x * 0.5 * at::erfc(x * -M_SQRT1_2), self.scalar_type());
  }
  return finish(at::gelu(x, approximate), self.scalar_type());
}

namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kKappa = 0.044715;

// ---------------------------------------------------------------------------------------------------------
at::Tensor gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  const auto compute = at::toOpMathType(meta.grad_input.dtype);
  const at::Tensor g = grad_output.to(compute);
  const at::Tensor x = self.to(compute);
  // Left tails: the derivative is exp(<quadratic>) * F with |F| moderate. The factor F goes into the exponent,
  // exp(q + log|F|) * sign(F), so no intermediate falls below the normal range while the result is still
  // normal (an exp(q) that is already subnormal would lose the result's precision). +-Inf give NaN, as the
  // formula does; x = NaN gives NaN.
  at::Tensor d;
  if (meta.approximate == GeluApproximate::None) {
    // Phi(x) + x phi(x). x >= 0: 0.5 erfc(-x/sqrt2) + x phi(x). x < 0: exp(-x^2/2) * F with
    // F = 0.5 erfcx(-x/sqrt2) + x/sqrt(2 pi) (erfcx: the scaled erfc, accurate in the tail; no cancellation).
    const at::Tensor z = x * -kSqrtHalf;
    const at::Tensor q = x * x * -0.5;
    const at::Tensor pos = at::erfc(z).mul_(0.5).add_(x * at::exp(q) * kInvSqrt2Pi);
    const at::Tensor f = at::special_erfcx(z).mul_(0.5).add_(x * kInvSqrt2Pi);
    const at::Tensor neg = at::exp(q + f.abs().log()) * f.sign();
    d = at::where(x < 0, neg, pos);
  } else {
    // sigmoid(2u) + 0.5 x u' sech(u)^2 with e = exp(-2|u|): no 1 - tanh^2 cancellation, no overflow.
    // u >= 0: 1/(1+e) + 2 x u' e/(1+e)^2. u < 0: e/(1+e) * F, F = 1 + 2 x u'/(1+e), as exp(2u + log|F|).
    // Past |x| = 1e4 everything is saturated in fp32 and fp64, so x is clamped there to keep x^3 finite
    // (+-Inf stays Inf).
    const at::Tensor xc = at::where(x.isinf(), x, x.clamp(-1e4, 1e4));
    const at::Tensor u = (xc + xc * xc * xc * kKappa) * kSqrt2OverPi;
    const at::Tensor du = (xc * xc * (3.0 * kKappa) + 1.0) * kSqrt2OverPi;
    const at::Tensor e = at::exp(u.abs() * -2.0);
    const at::Tensor ope = e + 1.0;
    const at::Tensor pos = ope.reciprocal() + xc * du * e * 2.0 / (ope * ope);
    const at::Tensor f = xc * du * 2.0 / ope + 1.0;
    const at::Tensor neg = at::exp(u * 2.0 + f.abs().log()) * f.sign() / ope;
    d = at::where(u < 0, neg, pos);
  }
  return finish(g * d, meta.grad_input.dtype);
}

}  // namespace
}  // namespace composite

NPU_EXT_COMPOSITE(GeluOp, composite::gelu)
NPU_EXT_COMPOSITE(GeluBackwardV2Op, composite::gelu_backward_v2)  // .out: the result copied

}  // namespace npu_ext
