#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/cpu/Loops.h>

#include <cmath>

#include "cpu/kernels/kernels.h"

namespace npu_ext {
namespace cpu {

// d/dx [x * Phi(x)] = Phi(x) + x * phi(x)
template <typename T>
inline T gelu_erf_grad(T g, T x) {
  const T kAlpha = static_cast<T>(M_SQRT1_2);
  const T kBeta = static_cast<T>(M_2_SQRTPI * M_SQRT1_2 * 0.5);  // 1 / sqrt(2*pi)
  const T cdf = T(0.5) * (T(1) + std::erf(x * kAlpha));
  const T pdf = kBeta * std::exp(T(-0.5) * x * x);
  return g * (cdf + x * pdf);
}

// d/dx [0.5 * x * (1 + tanh(u))], u = sqrt(2/pi) * (x + 0.044715 x^3)
template <typename T>
inline T gelu_tanh_grad(T g, T x) {
  const T kBeta = static_cast<T>(M_SQRT2 * M_2_SQRTPI * 0.5);  // sqrt(2/pi)
  const T kKappa = static_cast<T>(0.044715);
  const T x_sq = x * x;
  const T inner = kBeta * (x + kKappa * x_sq * x);
  const T t = std::tanh(inner);
  const T left = T(0.5) * x;
  const T right = T(1) + t;
  const T left_derivative = T(0.5) * right;
  const T right_derivative = left * (T(1) - t * t) * kBeta * (T(1) + T(3) * kKappa * x_sq);
  return g * (left_derivative + right_derivative);
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
