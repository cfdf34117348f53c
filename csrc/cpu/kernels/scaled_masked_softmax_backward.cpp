#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>

#include "cpu/kernels/kernels.h"

namespace npu_ext {
namespace cpu {
namespace {

template <typename scalar_t>
void scaled_masked_softmax_backward_impl(const at::Tensor& g, const at::Tensor& y, const at::Tensor& mask,
                                         double scale, bool causal, const at::Tensor& out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t N = g.size(1), S1 = g.size(2), S2 = g.size(3);
  const int64_t rows = g.size(0) * N * S1;
  const auto gs = g.strides(), ys = y.strides();
  const int64_t ms[4] = {causal ? 0 : mask.stride(0), causal ? 0 : mask.stride(1), causal ? 0 : mask.stride(2),
                         causal ? 0 : mask.stride(3)};
  const scalar_t* gp = g.const_data_ptr<scalar_t>();
  const scalar_t* yp = y.const_data_ptr<scalar_t>();
  const bool* mp = causal ? nullptr : mask.const_data_ptr<bool>();
  scalar_t* op = out.mutable_data_ptr<scalar_t>();
  const acc_t sc = static_cast<acc_t>(scale);

  // Rows are independent and each row is reduced sequentially: the result is thread-count independent.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(S2, 1));
  at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r % S1, n = (r / S1) % N, b = r / (S1 * N);
      const scalar_t* gr = gp + b * gs[0] + n * gs[1] + i * gs[2];
      const scalar_t* yr = yp + b * ys[0] + n * ys[1] + i * ys[2];
      const bool* mr = causal ? nullptr : mp + b * ms[0] + n * ms[1] + i * ms[2];
      scalar_t* o = op + r * S2;
      acc_t s = 0;  // over the whole row, masked positions included
      for (int64_t j = 0; j < S2; ++j)
        s += static_cast<acc_t>(gr[j * gs[3]]) * static_cast<acc_t>(yr[j * ys[3]]);
      for (int64_t j = 0; j < S2; ++j) {
        const bool masked = causal ? j > i : mr[j * ms[3]];
        const acc_t v = sc * (static_cast<acc_t>(gr[j * gs[3]]) - s) * static_cast<acc_t>(yr[j * ys[3]]);
        o[j] = masked ? scalar_t(0) : static_cast<scalar_t>(v);
      }
    }
  });
}

}  // namespace

void scaled_masked_softmax_backward_kernel(const at::Tensor& g, const at::Tensor& y, const at::Tensor& mask,
                                           double scale, bool causal, const at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, g.scalar_type(), "scaled_masked_softmax_backward", [&] {
    scaled_masked_softmax_backward_impl<scalar_t>(g, y, mask, scale, causal, out);
  });
}

}  // namespace cpu
}  // namespace npu_ext
