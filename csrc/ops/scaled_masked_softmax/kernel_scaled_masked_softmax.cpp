// scaled_masked_softmax forward kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu/vec.h"
#include "ops/scaled_masked_softmax/kernels.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

// exp(d) for d <= 0 (or NaN): fp32 through fast_exp2 (relative error about 2e-7 plus the rounding of
// d * log2(e)), fp64 with Sleef's exp.
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> exp_nonpositive(const Vectorized<T>& d) {
  if constexpr (std::is_same_v<T, float>) {
    return fast_exp2(d * Vectorized<float>(1.4426950408889634f));
  } else {
    return d.exp();
  }
}

template <typename scalar_t>
void scaled_masked_softmax_impl(const at::Tensor& x, const at::Tensor& mask, double scale, bool causal,
                                bool zero_fully_masked, const at::Tensor& out) {
  using acc_t = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;
  constexpr int64_t K = P::kSize;  // elements per Pack
  constexpr int64_t V = Vec::size();
  constexpr int kV = P::kVecs;
  const int64_t N = x.size(1), S1 = x.size(2), S2 = x.size(3);
  const int64_t rows = x.size(0) * N * S1;
  const int64_t padded = (S2 + K - 1) / K * K;
  const auto xs = x.strides();
  const int64_t ms[4] = {causal ? 0 : mask.stride(0), causal ? 0 : mask.stride(1), causal ? 0 : mask.stride(2),
                         causal ? 0 : mask.stride(3)};
  const scalar_t* xp = x.const_data_ptr<scalar_t>();
  const bool* mp = causal ? nullptr : mask.const_data_ptr<bool>();
  scalar_t* op = out.mutable_data_ptr<scalar_t>();

  // Rows are independent and each row is reduced in a fixed order (lane-wise accumulation, then a fixed
  // tree over the lanes): the result is thread-count independent.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(S2, 1));
  at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    // The vector constants live in the body, not captured by reference (see scaled_masked_softmax_backward).
    const Vec sc(static_cast<acc_t>(scale));
    const Vec fill(static_cast<acc_t>(-10000));
    const Vec neg_inf(-std::numeric_limits<acc_t>::infinity());
    const Vec zero(acc_t(0));
    const Vec iota = Vec::arange(acc_t(0), acc_t(1));
    // z: the masked, scaled row in acc_t, padded to whole Packs with -inf (exp gives 0 there).
    std::vector<acc_t> zbuf(static_cast<size_t>(padded));
    std::vector<scalar_t> xbuf(xs[3] == 1 ? 0 : S2);
    std::vector<char> mbuf(causal || ms[3] == 1 ? 0 : S2);
    acc_t* z = zbuf.data();
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r % S1, n = (r / S1) % N, b = r / (S1 * N);
      const scalar_t* xr = xp + b * xs[0] + n * xs[1] + i * xs[2];
      const bool* mr = causal ? nullptr : mp + b * ms[0] + n * ms[1] + i * ms[2];
      xr = dense_row(xr, xs[3], S2, xbuf.data());
      if (!causal) mr = reinterpret_cast<const bool*>(dense_row(reinterpret_cast<const char*>(mr), ms[3], S2, mbuf.data()));
      scalar_t* o = op + r * S2;
      // A fully masked row (no byte of its mask is 0 = false), under the "zero" policy: zeros, no softmax.
      if (zero_fully_masked && !causal && std::memchr(mr, 0, static_cast<size_t>(S2)) == nullptr) {
        std::fill(o, o + S2, scalar_t(0));
        continue;
      }

      // Pass 1: z = masked ? -10000 : scale * x, and its lane-wise maximum.
      Vec vmax = neg_inf;
      for (int64_t j = 0; j < S2; j += K) {
        const int64_t cnt = std::min(K, S2 - j);
        const P px = P::load(xr + j, cnt);
        for (int k = 0; k < kV; ++k) {
          const int64_t j0 = j + k * V;
          const int64_t valid = std::max<int64_t>(0, std::min(V, j + cnt - j0));
          Vec masked;
          if (causal) {
            masked = mask_gt(iota + Vec(static_cast<acc_t>(j0)), Vec(static_cast<acc_t>(i)));
          } else {
            masked = bool_mask<Vec>(mr + std::min(j0, S2), valid);
          }
          Vec v = blend(sc * px.v[k], fill, masked);
          if (valid < V) v = Vec::set(neg_inf, v, valid);
          v.store(z + j0);
          vmax = at::vec::maximum(vmax, v);  // NaN propagates (the row is NaN anyway, through the sum)
        }
      }
      acc_t lanes[V];
      vmax.store(lanes);
      acc_t mx = lanes[0];
      for (int64_t k = 1; k < V; ++k) mx = std::max(mx, lanes[k]);
      const Vec vmx(mx);

      // Pass 2: z = exp(z - max), summed lane-wise.
      Vec acc = zero;
      for (int64_t j = 0; j < padded; j += V) {
        const Vec e = exp_nonpositive(Vec::loadu(z + j) - vmx);
        e.store(z + j);
        acc = acc + e;
      }
      const Vec inv(acc_t(1) / hsum(acc));

      // Pass 3: out = z / sum, rounded once.
      store_loop(o, S2, [&](int64_t j, int64_t) {
        P res;
        for (int k = 0; k < kV; ++k) res.v[k] = Vec::loadu(z + j + k * V) * inv;
        return res;
      });
    }
  });
}

}  // namespace

void scaled_masked_softmax_kernel(const at::Tensor& x, const at::Tensor& mask, double scale, bool causal,
                                  bool zero_fully_masked, const at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "scaled_masked_softmax", [&] {
    scaled_masked_softmax_impl<scalar_t>(x, mask, scale, causal, zero_fully_masked, out);
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
