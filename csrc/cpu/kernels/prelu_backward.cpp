// prelu_backward kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec_utils.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

// Elements per reduction block. The partition into blocks depends only on the shape, and within a block
// the order of the additions is fixed, so the grad_weight sums are the same for any thread count.
constexpr int64_t kBlock = 32768;

template <typename scalar_t>
struct PreluStep {
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;

  // grad_input = x > 0 ? g : w * g (NaN x takes the x <= 0 branch); acc += x > 0 ? 0 : x * g. Always inlined:
  // the DEFAULT variant's 16-bit version was otherwise a call per vector (2-2.5x slower there).
  static C10_ALWAYS_INLINE void run(const scalar_t* g, const scalar_t* x, scalar_t* gi, int64_t count, const P& w,
                                    Vec* acc) {
    const P px = P::load(x, count), pg = P::load(g, count);
    P r;
    const Vec zero(0);
    for (int k = 0; k < P::kVecs; ++k) {
      const Vec pos = mask_gt(px.v[k], zero);
      r.v[k] = blend(w.v[k] * pg.v[k], pg.v[k], pos);
      acc[k] = acc[k] + blend(px.v[k] * pg.v[k], zero, pos);
    }
    r.store(gi, count);
  }
};

// Loads/stores `count` opmath values of a pack-shaped slice of an accumulator array.
template <typename scalar_t>
void load_acc(const at::opmath_type<scalar_t>* p, int64_t count, typename Pack<scalar_t>::Vec* v) {
  using Vec = typename Pack<scalar_t>::Vec;
  constexpr int64_t V = Vec::size();
  for (int k = 0; k < Pack<scalar_t>::kVecs; ++k) {
    const int64_t n = std::min<int64_t>(std::max<int64_t>(count - k * V, 0), V);
    v[k] = n == V ? Vec::loadu(p + k * V) : n > 0 ? Vec::loadu(p + k * V, n) : Vec(0);
  }
}

template <typename scalar_t>
void store_acc(at::opmath_type<scalar_t>* p, int64_t count, const typename Pack<scalar_t>::Vec* v) {
  using Vec = typename Pack<scalar_t>::Vec;
  constexpr int64_t V = Vec::size();
  for (int k = 0; k < Pack<scalar_t>::kVecs; ++k) {
    const int64_t n = std::min<int64_t>(std::max<int64_t>(count - k * V, 0), V);
    if (n == V) {
      v[k].store(p + k * V);
    } else if (n > 0) {
      v[k].store(p + k * V, n);
    }
  }
}

template <typename scalar_t>
void prelu_backward_impl(const scalar_t* g, const scalar_t* x, const scalar_t* w, scalar_t* gi, scalar_t* gw,
                         int64_t outer, int64_t channels, int64_t inner) {
  using acc_t = at::opmath_type<scalar_t>;
  using S = PreluStep<scalar_t>;
  using P = typename S::P;
  using Vec = typename S::Vec;
  constexpr int64_t K = P::kSize;
  constexpr int kV = P::kVecs;
  const int64_t numel = outer * channels * inner;

  std::vector<acc_t> partial;  // [block][channel]
  int64_t nblocks;
  if (inner == 1 && channels > 1) {
    // Rows of `channels` elements (e.g. (N, C) input): vectorise across channels; a block is a run of rows.
    const int64_t rows = outer;
    const int64_t rows_per_block = std::max<int64_t>(1, kBlock / channels);
    nblocks = (rows + rows_per_block - 1) / rows_per_block;
    partial.assign(static_cast<size_t>(nblocks * channels), acc_t(0));
    at::parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        acc_t* acc_row = partial.data() + b * channels;
        const int64_t r1 = std::min(rows, (b + 1) * rows_per_block);
        for (int64_t r = b * rows_per_block; r < r1; ++r) {
          const int64_t base = r * channels;
          for (int64_t c = 0; c < channels; c += K) {
            const int64_t cnt = std::min(K, channels - c);
            Vec acc[kV];
            load_acc<scalar_t>(acc_row + c, cnt, acc);
            S::run(g + base + c, x + base + c, gi + base + c, cnt, P::load(w + c, cnt), acc);
            store_acc<scalar_t>(acc_row + c, cnt, acc);
          }
        }
      }
    });
  } else {
    // Blocks of kBlock elements, cut into segments of one channel each (a row of `inner` elements).
    nblocks = (numel + kBlock - 1) / kBlock;
    partial.assign(static_cast<size_t>(nblocks * channels), acc_t(0));
    at::parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        acc_t* acc_row = partial.data() + b * channels;
        int64_t e = b * kBlock;
        const int64_t end = std::min(numel, e + kBlock);
        while (e < end) {
          const int64_t row = e / inner;
          const int64_t c = row % channels;
          const int64_t seg_end = std::min(end, (row + 1) * inner);
          const P wv = [&] {
            P p;
            for (int k = 0; k < kV; ++k) p.v[k] = Vec(static_cast<acc_t>(w[c]));
            return p;
          }();
          Vec acc[kV];
          for (int k = 0; k < kV; ++k) acc[k] = Vec(0);
          for (; e + K <= seg_end; e += K) S::run(g + e, x + e, gi + e, K, wv, acc);
          if (e < seg_end) {
            S::run(g + e, x + e, gi + e, seg_end - e, wv, acc);
            e = seg_end;
          }
          Vec total = acc[0];
          for (int k = 1; k < kV; ++k) total = total + acc[k];
          acc_row[c] += hsum(total);
        }
      }
    });
  }
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

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
