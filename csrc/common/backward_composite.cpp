// Device-generic implementations of the five backward operators (and their .out overloads), built from ATen
// ops and registered on CompositeExplicitAutograd: this is what runs on any device without a dedicated kernel
// (CUDA, XPU, MPS, ...), so training through torch_ext works wherever PyTorch runs. A kernel registered on a
// backend key wins over it on that backend: CPU (csrc/cpu), Meta (csrc/meta) and PrivateUse1 (csrc/npu).
// Autograd of these ops is registered in C++ on the generic Autograd key (csrc/autograd/backward_ops.cpp).
//
// Same contract as every other kernel (docs/operators.md): the shared checks first (csrc/common/checks.cpp), 16-bit
// inputs computed in fp32 and rounded once, reductions in fp32 (fp64 for fp64), contiguous outputs; a .out
// overload computes the whole result before writing, so any aliasing of inputs is fine. Reduction order is
// ATen's on that device. Tests call it on the CPU with OpOverload._op_dk("CompositeExplicitAutograd", ...).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "common/checks.h"
#include "common/composite_utils.h"

namespace npu_ext {
namespace composite {
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

void gelu_backward_v2_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                          const at::Tensor& grad_input) {
  const auto meta = check_gelu_backward_v2(grad_output, self, approximate);
  check_out("gelu_backward_v2", "grad_input", grad_input, meta.grad_input, self);
  grad_input.copy_(gelu_backward_v2(grad_output, self, approximate));
}

// ---------------------------------------------------------------------------------------------------------
std::tuple<at::Tensor, at::Tensor> prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                  const at::Tensor& weight) {
  const auto meta = check_prelu_backward(grad_output, self, weight);
  const at::Tensor x = opmath(self);
  const at::Tensor g = opmath(grad_output).expand(self.sizes());
  const at::Tensor w = opmath(weight).reshape({-1});
  at::Tensor w_b;
  std::vector<int64_t> reduce_dims;
  if (!meta.per_channel) {
    w_b = w.reshape({});
  } else {  // weight has C > 1 elements: self has rank >= 2, channel dim 1
    std::vector<int64_t> shape(self.dim(), 1);
    shape[1] = w.numel();
    w_b = w.reshape(shape);
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (d != 1) reduce_dims.push_back(d);
    }
  }
  // The Atlas A2/A3 kernel's formulas (docs/operators.md, "Semantics notes", csrc/cpu/kernels/prelu_backward.cpp):
  // gi = (x > 0 ? 1 + 0 w : 0 + w) g; each grad_weight term (x > 0 ? 0 x : x) g + 0 gi_T (gi_T: gi rounded to
  // the dtype) is rounded to the dtype before the sum. NaN is not > 0: it takes the x <= 0 branch.
  const at::Tensor positive = x > 0;
  const at::Tensor gi = at::where(positive, (w_b * 0 + 1) * g, (w_b + 0) * g);
  const at::Tensor gi_t = finish(gi, meta.grad_input.dtype);
  const at::Tensor term = at::where(positive, x * 0, x) * g + gi_t.to(x.scalar_type()) * 0;
  const at::Tensor contrib = term.to(meta.grad_input.dtype).to(x.scalar_type());
  const at::Tensor gw = meta.per_channel ? contrib.sum(reduce_dims) : contrib.sum();
  return {gi_t, finish(gw.reshape(weight.sizes()), meta.grad_weight.dtype)};
}

void prelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight,
                        const at::Tensor& grad_input, const at::Tensor& grad_weight) {
  const auto meta = check_prelu_backward(grad_output, self, weight);
  check_out("prelu_backward", "grad_input", grad_input, meta.grad_input, self);
  check_out("prelu_backward", "grad_weight", grad_weight, meta.grad_weight, self);
  const auto r = prelu_backward(grad_output, self, weight);
  grad_input.copy_(std::get<0>(r));
  grad_weight.copy_(std::get<1>(r));
}

// ---------------------------------------------------------------------------------------------------------
at::Tensor grouped_bias_add_grad(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                                 int64_t group_idx_type) {
  const auto meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  const at::Tensor gy = opmath(grad_y);
  if (!group_idx.has_value()) return finish(gy.sum(1), grad_y.scalar_type());
  // Every value is validated on a host copy (one small device-to-host copy), then each group is one sum:
  // deterministic on every device (no atomics), and an empty group is a zero row.
  const auto offsets = group_offsets("grouped_bias_add_grad", "grad_y", group_idx->cpu(), group_idx_type,
                                     grad_y.size(0));
  at::Tensor out = at::zeros({meta.groups.expect_int(), meta.hidden.expect_int()}, gy.options());
  for (size_t j = 0; j + 1 < offsets.size(); ++j) {
    const int64_t rows = offsets[j + 1] - offsets[j];
    if (rows > 0) out.select(0, static_cast<int64_t>(j)).copy_(gy.narrow(0, offsets[j], rows).sum(0));
  }
  return finish(out, grad_y.scalar_type());
}

void grouped_bias_add_grad_out(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                               int64_t group_idx_type, const at::Tensor& out) {
  const auto meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  check_out("grouped_bias_add_grad", "out", out, meta.out, grad_y);
  out.copy_(grouped_bias_add_grad(grad_y, group_idx, group_idx_type));
}

// ---------------------------------------------------------------------------------------------------------
at::Tensor scaled_masked_softmax_backward(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                          double scale, bool fix_triu_mask) {
  check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  const at::Tensor g = opmath(grad_output);
  const at::Tensor yy = opmath(y);
  const at::Tensor s = (g * yy).sum(-1, /*keepdim=*/true);  // the whole row, masked positions included
  const at::Tensor out = (g - s).mul_(yy).mul_(scale);
  const at::Tensor m = fix_triu_mask
                           ? at::ones({grad_output.size(2), grad_output.size(3)}, mask.options().dtype(at::kBool)
                                                                                      .device(grad_output.device()))
                                 .triu(1)  // column > row
                           : mask;
  return finish(out.masked_fill(m, 0.0), grad_output.scalar_type());  // a select: masked NaN/Inf become 0
}

void scaled_masked_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                        double scale, bool fix_triu_mask, const at::Tensor& out) {
  const auto meta = check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  check_out("scaled_masked_softmax_backward", "out", out, meta.out, grad_output);
  out.copy_(scaled_masked_softmax_backward(grad_output, y, mask, scale, fix_triu_mask));
}

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

void logit_grad_out(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& dx) {
  const auto meta = check_logit_grad(x, dy);
  check_out("logit_grad", "dx", dx, meta.dx, x);
  dx.copy_(logit_grad(x, dy, eps));
}

}  // namespace
}  // namespace composite

TORCH_LIBRARY_IMPL(npu_ext, CompositeExplicitAutograd, m) {
  m.impl("gelu_backward_v2", &composite::gelu_backward_v2);
  m.impl("gelu_backward_v2.out", &composite::gelu_backward_v2_out);
  m.impl("prelu_backward", &composite::prelu_backward);
  m.impl("prelu_backward.out", &composite::prelu_backward_out);
  m.impl("grouped_bias_add_grad", &composite::grouped_bias_add_grad);
  m.impl("grouped_bias_add_grad.out", &composite::grouped_bias_add_grad_out);
  m.impl("scaled_masked_softmax_backward", &composite::scaled_masked_softmax_backward);
  m.impl("scaled_masked_softmax_backward.out", &composite::scaled_masked_softmax_backward_out);
  m.impl("logit_grad", &composite::logit_grad);
  m.impl("logit_grad.out", &composite::logit_grad_out);
}

}  // namespace npu_ext
