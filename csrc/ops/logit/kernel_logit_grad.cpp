// logit_grad kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>

#include <limits>

#include "core/cpu/vec.h"
#include "ops/logit/kernels.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

// dx = dy / (x * (1 - x)) where lo <= x <= hi, `fill` elsewhere, as the NPU kernel selects (ops-nn
// loss/logit_grad/op_kernel/logit_grad.h: x >= lo AND x <= hi keeps the quotient): a NaN x is unordered, so it
// is not kept and gets the fill, 0 for eps >= 0 and NaN otherwise.
void logit_grad_kernel(at::TensorIteratorBase& iter, double eps) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, iter.common_dtype(), "logit_grad", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    using Vec = Vectorized<opmath_t>;
    // eps is rounded to the compute type (fp32 for every NPU dtype), as the NPU kernel does.
    const opmath_t e = static_cast<opmath_t>(eps);
    const bool clamp = e >= opmath_t(0);  // eps < 0 or NaN: no clamping, NaN outside [0, 1]
    const Vec lo(clamp ? e : opmath_t(0));
    const Vec hi(clamp ? opmath_t(1) - e : opmath_t(1));
    const Vec fill(clamp ? opmath_t(0) : std::numeric_limits<opmath_t>::quiet_NaN());
    const Vec one(opmath_t(1));
    binary_vec_kernel<scalar_t>(iter, [=](const Vec& x, const Vec& dy) {
      const Vec inside = mask_ge(x, lo) & mask_le(x, hi);
      return blend(fill, dy / (x * (one - x)), inside);
    });
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
