#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/cpu/Loops.h>

#include <cmath>

#include "cpu/kernels/kernels.h"

namespace npu_ext {
namespace cpu {

// d/dx [x * Phi(x)] = Phi(x) + x * phi(x), with Phi(x) = erfc(-x / sqrt2) / 2 (no cancellation for x << 0)
template <typename T>
inline T gelu_erf_grad(T g, T x) {
  const T kAlpha = static_cast<T>(M_SQRT1_2);
  const T kBeta = static_cast<T>(M_2_SQRTPI * M_SQRT1_2 * 0.5);  // 1 / sqrt(2*pi)
  const T cdf = T(0.5) * std::erfc(-x * kAlpha);
  const T pdf = kBeta * std::exp(T(-0.5) * x * x);
  return g * (cdf + x * pdf);
}

// d/dx [0.5 * x * (1 + tanh(u))], u = sqrt(2/pi) * (x + 0.044715 x^3)
//   = 0.5 * (1 + tanh(u)) + 0.5 * x * sech^2(u) * du/dx.
// With e = exp(-2|u|): 1 + tanh(u) = 2/(1+e) for u >= 0 and 2e/(1+e) for u < 0, sech^2(u) = 4e/(1+e)^2.
// Unlike 1 - tanh(u)^2, these lose no precision where tanh(u) is close to -1 or 1.
template <typename T>
inline T gelu_tanh_grad(T g, T x) {
  const T kBeta = static_cast<T>(M_SQRT2 * M_2_SQRTPI * 0.5);  // sqrt(2/pi)
  const T kKappa = static_cast<T>(0.044715);
  const T x_sq = x * x;
  const T u = kBeta * (x + kKappa * x_sq * x);
  const T e = std::exp(T(-2) * std::abs(u));
  const T r = T(1) / (T(1) + e);
  const T one_plus_tanh = T(2) * r * (u < T(0) ? e : T(1));
  const T sech_sq = T(4) * e * r * r;
  const T du = kBeta * (T(1) + T(3) * kKappa * x_sq);
  return g * (T(0.5) * one_plus_tanh + T(0.5) * x * sech_sq * du);
}

void gelu_backward_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, iter.common_dtype(), "gelu_backward_v2", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    if (approximate == GeluApproximate::Tanh) {
      at::native::cpu_kernel(iter, [](scalar_t g, scalar_t x) -> scalar_t {
        return static_cast<scalar_t>(gelu_tanh_grad<opmath_t>(g, x));
      });
    } else {
      at::native::cpu_kernel(iter, [](scalar_t g, scalar_t x) -> scalar_t {
        return static_cast<scalar_t>(gelu_erf_grad<opmath_t>(g, x));
      });
    }
  });
}

}  // namespace cpu
}  // namespace npu_ext
