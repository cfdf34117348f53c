// scaled_masked_softmax_backward kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "core/cpu/vec.h"
#include "ops/scaled_masked_softmax/kernels.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

template <typename scalar_t>
void scaled_masked_softmax_backward_impl(const at::Tensor& g, const at::Tensor& y, const at::Tensor& mask,
                                         double scale, bool causal, const at::Tensor& out) {
  using acc_t = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;
  constexpr int64_t K = P::kSize;  // elements per step of the reduction pass
  constexpr int64_t V = Vec::size();
  constexpr int kV = P::kVecs;
  const int64_t N = g.size(1), S1 = g.size(2), S2 = g.size(3);
  const int64_t rows = g.size(0) * N * S1;
  const auto gs = g.strides(), ys = y.strides();
  const int64_t ms[4] = {causal ? 0 : mask.stride(0), causal ? 0 : mask.stride(1), causal ? 0 : mask.stride(2),
                         causal ? 0 : mask.stride(3)};
  const scalar_t* gp = g.const_data_ptr<scalar_t>();
  const scalar_t* yp = y.const_data_ptr<scalar_t>();
  const bool* mp = causal ? nullptr : mask.const_data_ptr<bool>();
  scalar_t* op = out.mutable_data_ptr<scalar_t>();

  // Rows are independent and each row is reduced in a fixed order: the result is thread-count independent.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(S2, 1));
  at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    // The vector constants live in the body: captured by reference, every store through the output (or the
    // mask's bytes) could alias them, and at::vec's generic (DEFAULT) code then reloads them for every vector.
    const Vec sc(static_cast<acc_t>(scale));
    const Vec zero(acc_t(0));
    const Vec iota = Vec::arange(acc_t(0), acc_t(1));
    // Rows whose last dimension is strided are gathered into contiguous buffers first.
    std::vector<scalar_t> gbuf(gs[3] == 1 ? 0 : S2), ybuf(ys[3] == 1 ? 0 : S2);
    std::vector<char> mbuf(causal || ms[3] == 1 ? 0 : S2);
    // fp16/bf16 where the conversions are integer code (x86-64 DEFAULT: kGenericLanes<float>): the first pass
    // keeps g and y as converted to fp32, so the second pass reads them back instead of converting them again.
    constexpr bool kKeepWide = kReduced<scalar_t> && kGenericLanes<float>;
    const int64_t padded = (S2 + K - 1) / K * K;
    std::vector<acc_t> gwide(kKeepWide ? padded : 0), ywide(kKeepWide ? padded : 0);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r % S1, n = (r / S1) % N, b = r / (S1 * N);
      const scalar_t* gr = gp + b * gs[0] + n * gs[1] + i * gs[2];
      const scalar_t* yr = yp + b * ys[0] + n * ys[1] + i * ys[2];
      const bool* mr = causal ? nullptr : mp + b * ms[0] + n * ms[1] + i * ms[2];
      gr = dense_row(gr, gs[3], S2, gbuf.data());
      yr = dense_row(yr, ys[3], S2, ybuf.data());
      if (!causal) mr = reinterpret_cast<const bool*>(dense_row(reinterpret_cast<const char*>(mr), ms[3], S2, mbuf.data()));
      scalar_t* o = op + r * S2;

      // s = sum(g * y) over the whole row, masked positions included.
      Vec acc[kV];
      for (int k = 0; k < kV; ++k) acc[k] = zero;
      for (int64_t j = 0; j < S2; j += K) {
        const int64_t cnt = std::min(K, S2 - j);
        const P pg = P::load(gr + j, cnt), py = P::load(yr + j, cnt);
        for (int k = 0; k < kV; ++k) acc[k] = acc[k] + pg.v[k] * py.v[k];
        if constexpr (kKeepWide) {
          for (int k = 0; k < kV; ++k) {
            pg.v[k].store(gwide.data() + j + k * V);
            py.v[k].store(ywide.data() + j + k * V);
          }
        }
      }
      Vec total = acc[0];
      for (int k = 1; k < kV; ++k) total = total + acc[k];
      const Vec s(hsum(total));

      // out = scale * (g - s) * y, then 0 where masked (a select: masked NaN/Inf become 0).
      store_loop(o, S2, [&](int64_t j, int64_t cnt) {
        P pg, py;
        if constexpr (kKeepWide) {
          for (int k = 0; k < kV; ++k) {
            pg.v[k] = Vec::loadu(gwide.data() + j + k * V);
            py.v[k] = Vec::loadu(ywide.data() + j + k * V);
          }
        } else {
          pg = P::load(gr + j, cnt);
          py = P::load(yr + j, cnt);
        }
        P res;
        for (int k = 0; k < kV; ++k) {
          const Vec v = sc * (pg.v[k] - s) * py.v[k];
          const int64_t j0 = j + k * V;
          Vec masked;
          if (causal) {
            masked = mask_gt(iota + Vec(static_cast<acc_t>(j0)), Vec(static_cast<acc_t>(i)));
          } else {
            masked = bool_mask<Vec>(mr + std::min(j0, S2), std::max<int64_t>(0, std::min(V, j + cnt - j0)));
          }
          res.v[k] = blend(v, zero, masked);
        }
        return res;
      });
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

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
