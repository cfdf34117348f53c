#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/kernels/kernels.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

template <typename scalar_t>
void scaled_masked_softmax_impl(const at::Tensor& x, const at::Tensor& mask, double scale, bool causal,
                                const at::Tensor& out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t N = x.size(1), S1 = x.size(2), S2 = x.size(3);
  const int64_t rows = x.size(0) * N * S1;
  const auto xs = x.strides();
  const int64_t ms[4] = {causal ? 0 : mask.stride(0), causal ? 0 : mask.stride(1), causal ? 0 : mask.stride(2),
                         causal ? 0 : mask.stride(3)};
  const scalar_t* xp = x.const_data_ptr<scalar_t>();
  const bool* mp = causal ? nullptr : mask.const_data_ptr<bool>();
  scalar_t* op = out.mutable_data_ptr<scalar_t>();
  const acc_t sc = static_cast<acc_t>(scale);
  const acc_t fill = static_cast<acc_t>(-10000);

  // Rows are independent and each row is reduced sequentially: the result is thread-count independent.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(S2, 1));
  at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> z(static_cast<size_t>(S2));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r % S1, n = (r / S1) % N, b = r / (S1 * N);
      const scalar_t* xr = xp + b * xs[0] + n * xs[1] + i * xs[2];
      const bool* mr = causal ? nullptr : mp + b * ms[0] + n * ms[1] + i * ms[2];
      acc_t mx = -std::numeric_limits<acc_t>::infinity();
      for (int64_t j = 0; j < S2; ++j) {
        const bool masked = causal ? j > i : mr[j * ms[3]];
        const acc_t v = masked ? fill : sc * static_cast<acc_t>(xr[j * xs[3]]);
        z[j] = v;
        if (!(v <= mx)) mx = v;  // a NaN becomes the max, so the whole row is NaN (as torch.softmax)
      }
      acc_t sum = 0;
      for (int64_t j = 0; j < S2; ++j) {
        z[j] = std::exp(z[j] - mx);
        sum += z[j];
      }
      scalar_t* o = op + r * S2;
      for (int64_t j = 0; j < S2; ++j) o[j] = static_cast<scalar_t>(z[j] / sum);
    }
  });
}

}  // namespace

void scaled_masked_softmax_kernel(const at::Tensor& x, const at::Tensor& mask, double scale, bool causal,
                                  const at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "scaled_masked_softmax", [&] {
    scaled_masked_softmax_impl<scalar_t>(x, mask, scale, causal, out);
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
