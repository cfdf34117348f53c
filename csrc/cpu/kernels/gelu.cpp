// gelu forward kernels (compiled once per ISA variant, see kernels.h): one pass, fp32 math for 16-bit inputs,
// rounded once.
#include <ATen/Dispatch.h>

#include <cmath>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec_utils.h"

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
      // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)): one exponential and one division, no tanh and no
      // cancellation (exp overflowing to inf gives -0 for large negative x, as the limit).
      const Vec kM2Log2e(static_cast<float>(-2.0 * 1.4426950408889634));
      unary_vec_kernel<scalar_t>(iter, [=](const Vec& x) {
        const Vec u = kBeta * (x + kKappa * x * x * x);
        const Vec e = fast_exp2(at::vec::clamp_max(kM2Log2e * u, Vec(200.0f)));
        return x / (kOne + e);
      });
    } else {
      // fp64: ATen's formula with Sleef's tanh.
      unary_vec_kernel<scalar_t>(iter, [=](const Vec& x) {
        const Vec u = kBeta * (x + kKappa * x * x * x);
        return kHalf * x * (kOne + u.tanh());
      });
    }
  } else if constexpr (std::is_same_v<opmath_t, float>) {
    // x * Phi(x) with Phi(-|x|) = r * e from normal_tail (the cdf of gelu_backward_v2's fp32 kernel): no
    // 1 + erf cancellation in the left tail, relative accuracy down to the smallest normal output;
    // Phi(|x|) = 1 - Phi(-|x|). x is clamped to +-1e18 for normal_tail, so that Phi(+-inf) is 1 and 0:
    // gelu(inf) = inf, gelu(-inf) = NaN (-inf * 0), as ATen.
    const Vec kHuge(1e18f);
    unary_vec_kernel<scalar_t>(iter, [=](const Vec& x) {
      Vec e, r;
      normal_tail<std::is_same_v<scalar_t, c10::BFloat16>>(at::vec::clamp(x, -kHuge, kHuge), e, r);
      const Vec q = r * e;
      return x * select_negative(x, q, kOne - q);
    });
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
