// prelu_backward kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cpu/vec.h"
#include "ops/prelu/kernels.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

// Elements per reduction block. The partition into blocks depends only on the shape, and within a block
// the order of the additions is fixed, so the grad_weight sums are the same for any thread count.
constexpr int64_t kBlock = 32768;

// One pack of grad_input and of grad_weight terms, computed as the Atlas A2/A3 kernel does (TBE PReluGradUpdate,
// docs/operators.md, "Semantics notes"), in opmath (fp32 for the 16-bit dtypes):
//   grad_input = (x > 0 ? 1 + 0 w : 0 + w) g                         (so g where x > 0, w g elsewhere, for a finite w)
//   term       = (x > 0 ? 0 x : x) g + 0 grad_input_T, rounded to the dtype before it is accumulated
// where grad_input_T is grad_input rounded to the dtype. For finite values this is x <= 0 ? x g : 0 (NaN x takes
// the x <= 0 branch); the zero products make a term NaN where grad_input_T is infinite or NaN or x = +inf, and a
// non-finite weight makes grad_input NaN where x > 0. w_neg = 0 + w and w_pos = 1 + 0 w are per channel, so they
// cost nothing per element. The zero lanes of a partial pack add 0 to the sums (NaN only for a non-finite weight,
// whose channel sums to NaN anyway). Always inlined: the DEFAULT variant's 16-bit version was otherwise a call
// per vector (2-2.5x slower there).
template <typename scalar_t>
struct PreluStep {
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;

  static C10_ALWAYS_INLINE void run(const scalar_t* g, const scalar_t* x, scalar_t* gi, int64_t count, const P& w_neg,
                                    const P& w_pos, Vec* acc) {
    const P px = P::load(x, count), pg = P::load(g, count);
    P r, t;
    const Vec zero(0);
    for (int k = 0; k < P::kVecs; ++k) {
      const Vec pos = mask_gt(px.v[k], zero);
      r.v[k] = blend(w_neg.v[k], w_pos.v[k], pos) * pg.v[k];
      t.v[k] = blend(px.v[k] * pg.v[k], px.v[k] * zero, pos);
    }
    r.store(gi, count);
    t = t.rounded();
    // + 0 grad_input_T: NaN where grad_input_T is infinite or NaN, else +-0, which changes no sum (they start at
    // +0). For the 16-bit dtypes that is where |grad_input| is not below the value that rounds to infinity, so
    // grad_input_T itself is never needed (one compare instead of widening it back).
    for (int k = 0; k < P::kVecs; ++k) {
      if constexpr (kReduced<scalar_t>) {
        // the dtype's largest value plus half an ulp: 65520 for fp16, 0x7F7F8000 for bf16
        constexpr float kToInf = std::is_same_v<scalar_t, c10::Half> ? 0x1.ffep+15f : 0x1.ffp+127f;
        t.v[k] = blend(Vec(std::numeric_limits<float>::quiet_NaN()), t.v[k], mask_lt(r.v[k].abs(), Vec(kToInf)));
      } else {
        t.v[k] = at::vec::fmadd(r.v[k], zero, t.v[k]);  // exact: 0 grad_input is +-0 or NaN
      }
      acc[k] = acc[k] + t.v[k];
    }
  }
};

// Loads/stores `count` opmath values of a pack-shaped slice of an accumulator (or coefficient) array.
template <typename scalar_t>
C10_ALWAYS_INLINE void load_acc(const at::opmath_type<scalar_t>* p, int64_t count, typename Pack<scalar_t>::Vec* v) {
  using Vec = typename Pack<scalar_t>::Vec;
  constexpr int64_t V = Vec::size();
  if (count == Pack<scalar_t>::kSize) {  // a whole pack: no per-vector bounds
    for (int k = 0; k < Pack<scalar_t>::kVecs; ++k) v[k] = Vec::loadu(p + k * V);
    return;
  }
  for (int k = 0; k < Pack<scalar_t>::kVecs; ++k) {
    const int64_t n = std::min<int64_t>(std::max<int64_t>(count - k * V, 0), V);
    v[k] = n == V ? Vec::loadu(p + k * V) : n > 0 ? Vec::loadu(p + k * V, n) : Vec(0);
  }
}

template <typename scalar_t>
C10_ALWAYS_INLINE void store_acc(at::opmath_type<scalar_t>* p, int64_t count, const typename Pack<scalar_t>::Vec* v) {
  using Vec = typename Pack<scalar_t>::Vec;
  constexpr int64_t V = Vec::size();
  if (count == Pack<scalar_t>::kSize) {
    for (int k = 0; k < Pack<scalar_t>::kVecs; ++k) v[k].store(p + k * V);
    return;
  }
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

  // The per-channel coefficients of grad_input (PreluStep): 0 + w where x <= 0, 1 + 0 w where x > 0.
  std::vector<acc_t> w_neg(static_cast<size_t>(channels)), w_pos(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const acc_t wc = static_cast<acc_t>(w[c]);
    w_neg[c] = acc_t(0) + wc;
    w_pos[c] = acc_t(1) + acc_t(0) * wc;
  }
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
            P wn, wp;
            load_acc<scalar_t>(acc_row + c, cnt, acc);
            load_acc<scalar_t>(w_neg.data() + c, cnt, wn.v);
            load_acc<scalar_t>(w_pos.data() + c, cnt, wp.v);
            S::run(g + base + c, x + base + c, gi + base + c, cnt, wn, wp, acc);
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
          P wn, wp;
          for (int k = 0; k < kV; ++k) {
            wn.v[k] = Vec(w_neg[c]);
            wp.v[k] = Vec(w_pos[c]);
          }
          Vec acc[kV];
          for (int k = 0; k < kV; ++k) acc[k] = Vec(0);
          for (; e + K <= seg_end; e += K) S::run(g + e, x + e, gi + e, K, wn, wp, acc);
          if (e < seg_end) {
            S::run(g + e, x + e, gi + e, seg_end - e, wn, wp, acc);
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
