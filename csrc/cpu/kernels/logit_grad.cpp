#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/cpu/Loops.h>

#include <limits>

#include "cpu/kernels/kernels.h"

namespace npu_ext {
namespace cpu {

void logit_grad_kernel(at::TensorIteratorBase& iter, double eps) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, iter.common_dtype(), "logit_grad", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    // eps is rounded to the compute type (fp32 for every NPU dtype), as the NPU kernel does.
    const opmath_t e = static_cast<opmath_t>(eps);
    if (e >= opmath_t(0)) {
      const opmath_t lo = e;
      const opmath_t hi = opmath_t(1) - e;
      at::native::cpu_kernel(iter, [lo, hi](scalar_t xs, scalar_t dys) -> scalar_t {
        const opmath_t x = xs, dy = dys;
        return static_cast<scalar_t>((x < lo || x > hi) ? opmath_t(0) : dy / (x * (opmath_t(1) - x)));
      });
    } else {  // eps < 0 or NaN: no clamping; outside [0, 1] the gradient is undefined
      const opmath_t nan = std::numeric_limits<opmath_t>::quiet_NaN();
      at::native::cpu_kernel(iter, [nan](scalar_t xs, scalar_t dys) -> scalar_t {
        const opmath_t x = xs, dy = dys;
        return static_cast<scalar_t>((x < opmath_t(0) || x > opmath_t(1)) ? nan : dy / (x * (opmath_t(1) - x)));
      });
    }
  });
}

}  // namespace cpu
}  // namespace npu_ext
