// gelu_backward_v2 kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>

#include <cmath>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec_utils.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

// d/dx [x * Phi(x)] = Phi(x) + x * phi(x), phi(x) = exp(-x^2/2) / sqrt(2*pi).
//
// fp32: one exponential e = exp(-x^2/2) serves both terms. Phi(-|x|) = erfc(|x|/sqrt2)/2 is computed
// directly (no 1 - ... cancellation in the left tail) with Abramowitz-Stegun 7.1.26,
// erfc(z) ~ t*P(t)*exp(-z^2), t = 1/(1 + p z), whose relative error stays below 2e-4 of the gradient
// everywhere (it is far smaller where the gradient is not tiny); Phi(|x|) = 1 - Phi(-|x|).
// fp64 (gradcheck only): the exact formula with Sleef's erf/exp.
template <typename T>
Vectorized<T> gelu_erf_grad(const Vectorized<T>& g, const Vectorized<T>& x) {
  using Vec = Vectorized<T>;
  const Vec kInvSqrt2Pi(static_cast<T>(M_2_SQRTPI * M_SQRT1_2 * 0.5));
  const Vec kHalf(T(0.5)), kOne(T(1));
  if constexpr (std::is_same_v<T, double>) {
    const Vec cdf = kHalf * (kOne + (x * Vec(M_SQRT1_2)).erf());
    const Vec pdf = kInvSqrt2Pi * (Vec(-0.5) * x * x).exp();
    return g * (cdf + x * pdf);
  } else {
    const Vec z = (x * Vec(static_cast<T>(M_SQRT1_2))).abs();
    const Vec e = (Vec(T(-0.5)) * x * x).exp_u20();  // exp(-x^2/2) == exp(-z^2)
    const Vec t = fast_reciprocal(at::vec::fmadd(Vec(T(0.3275911)), z, kOne));
    Vec p = at::vec::fmadd(Vec(T(1.061405429)), t, Vec(T(-1.453152027)));
    p = at::vec::fmadd(p, t, Vec(T(1.421413741)));
    p = at::vec::fmadd(p, t, Vec(T(-0.284496736)));
    p = at::vec::fmadd(p, t, Vec(T(0.254829592)));
    const Vec q = kHalf * t * p * e;  // Phi(-|x|)
    const Vec cdf = Vec::blendv(kOne - q, q, x < Vec(T(0)));
    return g * (cdf + x * kInvSqrt2Pi * e);
  }
}

// d/dx [0.5 x (1 + tanh(u))], u = sqrt(2/pi) (x + 0.044715 x^3).
// fp32: with e = exp(2u) and d = 1/(1+e): 1 + tanh(u) = 2ed, 1 - tanh(u)^2 = 4ed^2, so
// grad = e*d * (1 + 2 sqrt(2/pi) x d (1 + 3*0.044715 x^2)): one exponential and one reciprocal, no tanh, and
// no cancellation for negative x. 2u is capped at 80 so that e and d stay finite and normal.
// fp64: the textbook formula with Sleef's tanh.
template <typename T>
Vectorized<T> gelu_tanh_grad(const Vectorized<T>& g, const Vectorized<T>& x) {
  using Vec = Vectorized<T>;
  const Vec kBeta(static_cast<T>(M_SQRT2 * M_2_SQRTPI * 0.5));  // sqrt(2/pi)
  const Vec kKappa(static_cast<T>(0.044715));
  const Vec kOne(T(1));
  const Vec x_sq = x * x;
  const Vec inner = kBeta * (x + kKappa * x_sq * x);
  if constexpr (std::is_same_v<T, double>) {
    const Vec t = inner.tanh();
    const Vec left = Vec(0.5) * x;
    const Vec right = kOne + t;
    const Vec left_derivative = Vec(0.5) * right;
    const Vec right_derivative = left * (kOne - t * t) * kBeta * (kOne + Vec(3.0) * kKappa * x_sq);
    return g * (left_derivative + right_derivative);
  } else {
    const Vec e = at::vec::minimum(Vec(T(2)) * inner, Vec(T(80))).exp_u20();
    const Vec d = fast_reciprocal(kOne + e);
    const Vec poly = kOne + Vec(T(3) * static_cast<T>(0.044715)) * x_sq;
    return g * ((e * d) * (kOne + Vec(T(2)) * kBeta * x * d * poly));
  }
}

}  // namespace

void gelu_backward_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, iter.common_dtype(), "gelu_backward_v2", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    if (approximate == GeluApproximate::Tanh) {
      binary_vec_kernel<scalar_t>(iter, [](const Vectorized<opmath_t>& g, const Vectorized<opmath_t>& x) {
        return gelu_tanh_grad<opmath_t>(g, x);
      });
    } else {
      binary_vec_kernel<scalar_t>(iter, [](const Vectorized<opmath_t>& g, const Vectorized<opmath_t>& x) {
        return gelu_erf_grad<opmath_t>(g, x);
      });
    }
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
