#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "cpu/kernels/kernels.h"

namespace npu_ext {
namespace cpu {
namespace {

// Elements per reduction block. The partition into blocks depends only on the shape, so the grad_weight
// sums are the same for any thread count.
constexpr int64_t kBlock = 32768;

template <typename scalar_t>
void prelu_backward_impl(const scalar_t* g, const scalar_t* x, const scalar_t* w, scalar_t* gi, scalar_t* gw,
                         int64_t outer, int64_t channels, int64_t inner) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t numel = outer * channels * inner;
  const int64_t nblocks = (numel + kBlock - 1) / kBlock;
  std::vector<acc_t> partial(static_cast<size_t>(nblocks * channels), acc_t(0));
  at::parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      acc_t* acc = partial.data() + b * channels;
      int64_t e = b * kBlock;
      const int64_t end = std::min(numel, e + kBlock);
      while (e < end) {  // one segment per (row of `inner` elements) that intersects the block
        const int64_t row = e / inner;
        const int64_t c = row % channels;
        const int64_t seg_end = std::min(end, (row + 1) * inner);
        const acc_t wc = static_cast<acc_t>(w[c]);
        acc_t s = 0;
        for (; e < seg_end; ++e) {
          const acc_t xv = static_cast<acc_t>(x[e]);
          const acc_t gv = static_cast<acc_t>(g[e]);
          const bool pos = xv > acc_t(0);  // NaN takes the x <= 0 branch
          gi[e] = pos ? g[e] : static_cast<scalar_t>(wc * gv);
          s += pos ? acc_t(0) : xv * gv;
        }
        acc[c] += s;
      }
    }
  });
  for (int64_t c = 0; c < channels; ++c) {
    acc_t total = 0;
    for (int64_t b = 0; b < nblocks; ++b) total += partial[b * channels + c];
    gw[c] = static_cast<scalar_t>(total);
  }
}

}  // namespace

void prelu_backward_kernel(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor& grad_input,
                           const at::Tensor& grad_weight, int64_t outer, int64_t channels, int64_t inner) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "prelu_backward", [&] {
    prelu_backward_impl<scalar_t>(g.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
                                  w.const_data_ptr<scalar_t>(), grad_input.mutable_data_ptr<scalar_t>(),
                                  grad_weight.mutable_data_ptr<scalar_t>(), outer, channels, inner);
  });
}

}  // namespace cpu
}  // namespace npu_ext
