// gelu_backward_v2 kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>

#include <cmath>

#include "core/cpu/vec.h"
#include "ops/gelu/kernels.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

// d/dx [x * Phi(x)] = Phi(x) + x * phi(x), phi(x) = exp(-x^2/2) / sqrt(2*pi).
//
// fp32: with e = exp(-x^2/2) and r = (1 - s) * p = erfcx(|x|/sqrt2) / 2 from normal_tail (Phi(-|x|) = r * e, each factor
// scaled there by 2^+-32, and x / sqrt(2pi) here as well), the gradient is e * (x / sqrt(2pi) + r) for x < 0
// and 1 + e * (x / sqrt(2pi) - r) for x >= 0: base + e * (x / sqrt(2pi) - copysign(r, x)), both parts chosen
// by x's sign bit (-0.0 takes the first form; both give exactly 0.5 at 0). No 1 - Phi cancellation in either
// tail, one exponential, and relative accuracy on every normal fp32 output, far left tail included.
// x = +-inf gives NaN (inf * 0), as the formula does (normal_tail's p is NaN there too).
// kBf16: the result is rounded to bf16 (normal_tail's shorter polynomials).
// The fp32 form is generic over the lane type (lane_op: x86-64's DEFAULT variant runs it on SSE2 lanes).
template <bool kBf16, typename V>
C10_ALWAYS_INLINE V gelu_erf_grad_f32(const V& g, const V& x) {
  const V kInvSqrt2Pi(static_cast<float>(M_2_SQRTPI * M_SQRT1_2 * 0.5 * kTailScale));
  V e, s, p;
  normal_tail<kBf16>(x, e, s, p);
  const V r = vfnmadd(s, p, p);  // (1 - s) p, rounded once where there is an FMA
  const V base = select_sign(x, V(0.0f), V(1.0f));
  return g * vfmadd(e, vfmsub(kInvSqrt2Pi, x, r ^ (x & V(-0.0f))), base);
}

// fp64 (gradcheck only): the exact formula with Sleef's erfc/exp.
C10_ALWAYS_INLINE Vectorized<double> gelu_erf_grad_f64(const Vectorized<double>& g, const Vectorized<double>& x) {
  using Vec = Vectorized<double>;
  const Vec kInvSqrt2Pi(M_2_SQRTPI * M_SQRT1_2 * 0.5);
  const Vec cdf = Vec(0.5) * (x * Vec(-M_SQRT1_2)).erfc();  // no cancellation for x << 0
  const Vec pdf = kInvSqrt2Pi * (Vec(-0.5) * x * x).exp();
  return g * (cdf + x * pdf);
}

// d/dx [0.5 x (1 + tanh(u))], u = sqrt(2/pi) (x + 0.044715 x^3).
// fp32: with e = exp(2u) and d = 1/(1+e): 1 + tanh(u) = 2ed, 1 - tanh(u)^2 = 4ed^2, so
// grad = e*d * (1 + 2 sqrt(2/pi) x d (1 + 3*0.044715 x^2)): one exponential and one reciprocal, no tanh, and
// no cancellation for negative x.
// fp64 (gradcheck only): the same quantities from e = exp(-2|u|), with Sleef's exp.
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> gelu_tanh_grad(const Vectorized<T>& g, const Vectorized<T>& x) {
  using Vec = Vectorized<T>;
  const Vec kBeta(static_cast<T>(M_SQRT2 * M_2_SQRTPI * 0.5));  // sqrt(2/pi)
  const Vec kKappa(static_cast<T>(0.044715));
  const Vec kOne(T(1));
  if constexpr (std::is_same_v<T, double>) {
    // e = exp(-2|u|): 1 + tanh(u) = 2/(1+e) (u >= 0) or 2e/(1+e) (u < 0), sech(u)^2 = 4e/(1+e)^2.
    const Vec x_sq = x * x;
    const Vec u = kBeta * (x + kKappa * x_sq * x);
    const Vec e = (Vec(-2.0) * u.abs()).exp();
    const Vec r = kOne / (kOne + e);
    const Vec one_plus_tanh = Vec(2.0) * r * blend(kOne, e, mask_lt(u, Vec(0.0)));
    const Vec sech_sq = Vec(4.0) * e * r * r;
    const Vec du = kBeta * (kOne + Vec(3.0) * kKappa * x_sq);
    return g * (Vec(0.5) * one_plus_tanh + Vec(0.5) * x * sech_sq * du);
  } else {
    // For x >= 10 the gradient is 1 to fp32 precision and for x <= -15 it underflows to 0, so x is clamped to
    // [-15, 10] (NaN passes): exp(2u) stays finite (at most 2^126) and x^3 cannot overflow. x = +-inf still
    // gives NaN, as the formula (and PyTorch) does, through the x - x term.
    const Vec xc = at::vec::clamp(x, Vec(T(-15)), Vec(T(10)));
    const Vec x_sq = xc * xc;
    const Vec inner = kBeta * (xc + kKappa * x_sq * xc);
    const Vec e = fast_exp2(Vec(T(2 * 1.4426950408889634)) * inner);  // exp(2u)
    const Vec d = fast_reciprocal(kOne + e);
    // e*d = e/(1+e): as 1 - d for u >= 0 (exactly 1 for large u), as e*d for u < 0 (no cancellation).
    const Vec ed = select_negative(inner, e * d, kOne - d);
    const Vec poly = kOne + Vec(T(3) * static_cast<T>(0.044715)) * x_sq;
    return g * (ed * (kOne + Vec(T(2)) * kBeta * xc * d * poly) + (x - x));
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
    } else if constexpr (std::is_same_v<opmath_t, float>) {
      [[maybe_unused]] constexpr bool kBf16 = std::is_same_v<scalar_t, c10::BFloat16>;
      binary_vec_kernel<scalar_t>(
          iter, lane_op([](const auto& g, const auto& x) { return gelu_erf_grad_f32<kBf16>(g, x); }));
    } else {
      binary_vec_kernel<scalar_t>(iter, gelu_erf_grad_f64);
    }
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
