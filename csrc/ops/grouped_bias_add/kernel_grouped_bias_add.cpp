// grouped_bias_add forward kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "core/cpu/vec.h"
#include "ops/grouped_bias_add/kernels.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

template <typename scalar_t>
void grouped_bias_add_impl(const scalar_t* xbase, const GroupedRows& L, const scalar_t* bias, int64_t bias_row_stride,
                           int64_t bias_col_stride, const at::opmath_type<scalar_t>* probs, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;
  const int64_t H = L.hidden;
  const int64_t G = static_cast<int64_t>(L.rows.size());
  std::vector<int64_t> first_row(G + 1, 0);  // output rows of group j: [first_row[j], first_row[j + 1])
  for (int64_t j = 0; j < G; ++j) first_row[j + 1] = first_row[j] + L.rows[j];
  const int64_t total = first_row[G];

  // Element-wise: no reduction, so any partition gives the same bits.
  // Dense bias rows with x rows that are dense or one broadcast value (col_stride 0: the backward spreads bias
  // rows over a zero-stride zero for the probs gradient) take the vector path, the same operations as the
  // element loop below. 16-bit bias rows are widened once per group and task into `wide` (exact), not once per
  // row: one 16-bit conversion per element fewer (x86 DEFAULT, fp16: about 15 SSE2 instructions per 4 lanes).
  constexpr int64_t K = P::kSize, V = Vec::size();
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(H, 1));
  at::parallel_for(0, total, grain, [&](int64_t r0, int64_t r1) {
    std::vector<acc_t> wide(kReduced<scalar_t> ? static_cast<size_t>(H + K) : 0);
    int64_t wide_group = -1;
    int64_t j = std::upper_bound(first_row.begin(), first_row.end(), r0) - first_row.begin() - 1;
    for (int64_t r = r0; r < r1; ++r) {
      while (r >= first_row[j + 1]) ++j;
      const scalar_t* xr = xbase + L.group_base[j] + (r - first_row[j]) * L.row_stride;
      const scalar_t* br = bias + j * bias_row_stride;
      scalar_t* o = out + r * H;
      if ((L.col_stride == 1 || L.col_stride == 0) && bias_col_stride == 1) {
        if (kReduced<scalar_t> && wide_group != j) {
          for (int64_t h = 0; h < H; h += K) {
            const P pb = P::load(br + h, std::min(K, H - h));
            for (int k = 0; k < P::kVecs; ++k) pb.v[k].store(wide.data() + h + k * V);
          }
          wide_group = j;
        }
        const bool x_scalar = L.col_stride == 0 && H > 0;
        const Vec xs(x_scalar ? static_cast<acc_t>(xr[0]) : acc_t(0));
        const Vec p(probs == nullptr ? acc_t(1) : probs[r]);  // p * b is exact for p = 1
        store_loop(o, H, [&](int64_t h, int64_t cnt) {
          P px, pb;
          if (x_scalar) {
            for (int k = 0; k < P::kVecs; ++k) px.v[k] = xs;
          } else {
            px = P::load(xr + h, cnt);
          }
          if constexpr (kReduced<scalar_t>) {
            for (int k = 0; k < P::kVecs; ++k) pb.v[k] = Vec::loadu(wide.data() + h + k * V);
          } else {
            pb = P::load(br + h, cnt);
          }
          P res;
          for (int k = 0; k < P::kVecs; ++k) res.v[k] = px.v[k] + p * pb.v[k];
          return res;
        });
        continue;
      }
      const acc_t p = probs == nullptr ? acc_t(1) : probs[r];  // p * b is exact for p = 1
      for (int64_t h = 0; h < H; ++h)
        o[h] = static_cast<scalar_t>(static_cast<acc_t>(xr[h * L.col_stride]) +
                                     p * static_cast<acc_t>(br[h * bias_col_stride]));
    }
  });
}

}  // namespace

void grouped_bias_add_kernel(const at::Tensor& x, const GroupedRows& layout, const at::Tensor& bias,
                             int64_t bias_row_stride, int64_t bias_col_stride, const at::Tensor& probs,
                             const at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "grouped_bias_add", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    grouped_bias_add_impl<scalar_t>(x.const_data_ptr<scalar_t>(), layout, bias.const_data_ptr<scalar_t>(),
                                    bias_row_stride, bias_col_stride,
                                    probs.defined() ? probs.const_data_ptr<acc_t>() : nullptr,
                                    out.mutable_data_ptr<scalar_t>());
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
