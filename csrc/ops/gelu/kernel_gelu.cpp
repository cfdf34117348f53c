// gelu forward kernels (compiled once per ISA variant, see kernels.h): one pass, fp32 math for 16-bit inputs,
// rounded once.
#include <ATen/Dispatch.h>

#include <cmath>

#include "core/cpu/vec.h"
#include "ops/gelu/kernels.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

namespace {

template <typename scalar_t>
void gelu_impl(at::TensorIteratorBase& iter, GeluApproximate approximate) {
  using opmath_t = at::opmath_type<scalar_t>;
  using Vec = Vectorized<opmath_t>;
  const Vec kHalf(opmath_t(0.5));
  const Vec kOne(opmath_t(1));
  if (approximate == GeluApproximate::Tanh) {
    const Vec kBeta(static_cast<opmath_t>(M_SQRT2 * M_2_SQRTPI * 0.5));  // sqrt(2/pi)
    const Vec kKappa(static_cast<opmath_t>(0.044715));
    if constexpr (std::is_same_v<opmath_t, float>) {
      // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)) = x e / (1 + e) with e = exp(-2|u|) in (0, 1] (the second form
      // for u < 0, chosen by u's sign bit): one exponential that cannot overflow and one division, no tanh and no
      // cancellation, so the left tail keeps its relative accuracy down to the smallest normal output (an
      // exp(-2u) that overflowed to inf gave 0 there, for x < -10.06).
      const Vec kM2Log2e(static_cast<float>(-2.0 * 1.4426950408889634));
      unary_vec_kernel<scalar_t>(iter, [=](const Vec& x) {
        const Vec u = kBeta * (x + kKappa * x * x * x);
        const Vec e = fast_exp2(kM2Log2e * u.abs());
        return select_sign(u, x * e, x) / (kOne + e);
      });
    } else {
      // fp64: ATen's formula with Sleef's tanh.
      unary_vec_kernel<scalar_t>(iter, [=](const Vec& x) {
        const Vec u = kBeta * (x + kKappa * x * x * x);
        return kHalf * x * (kOne + u.tanh());
      });
    }
  } else if constexpr (std::is_same_v<opmath_t, float>) {
    // x * Phi(x) from normal_tail (the cdf of gelu_backward_v2's fp32 kernel): with m = s * p * e = |x| Phi(-|x|),
    // gelu = -m for x < 0 and x - m for x >= 0 (x * (1 - Phi(-|x|))), chosen by x's sign bit (-0.0 gives -0.0): no
    // 1 + erf cancellation in the left tail, relative accuracy down to the smallest normal output (s = |x| / 4 is
    // subnormal for |x| < 2^-124: outputs in the lowest normal binade keep 22 significant bits). x is capped
    // at 1e18 for normal_tail, so that gelu(inf) = inf - 0 = inf; -inf gives s = inf / inf = NaN there, as
    // ATen's -inf * 0.
    // Generic over the lane type (lane_op: x86-64's DEFAULT variant runs it on SSE2 lanes).
    constexpr bool kBf16 = std::is_same_v<scalar_t, c10::BFloat16>;
    unary_vec_kernel<scalar_t>(iter, lane_op([](const auto& x) {
      using V = std::decay_t<decltype(x)>;
      V e, s, p;
      normal_tail<kBf16, true>(vclamp_max(x, V(1e18f)), e, s, p);
      const V m = s * (p * e);  // p * e = 4 Phi(-|x|) / t first: s * p underflows for tiny |x|
      return select_sign(x, m ^ V(-0.0f), x - m);
    }));
  } else {
    // fp64: ATen's formula x * 0.5 * (1 + erf(x / sqrt(2))) with Sleef's erf.
    const Vec kAlpha(static_cast<opmath_t>(M_SQRT1_2));
    unary_vec_kernel<scalar_t>(iter, [=](const Vec& x) { return x * kHalf * (kOne + (x * kAlpha).erf()); });
  }
}

}  // namespace

void gelu_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, iter.common_dtype(), "gelu",
                                  [&] { gelu_impl<scalar_t>(iter, approximate); });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
