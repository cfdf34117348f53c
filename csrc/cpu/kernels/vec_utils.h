// Vector helpers for the kernel sources. Included only by csrc/cpu/kernels/*.cpp, which are compiled once
// per ISA variant: everything here lives in npu_ext::cpu::CPU_CAPABILITY and uses only at::vec functions of
// at::vec::CPU_CAPABILITY (never at::vec's non-namespaced inline templates such as convert_to_float, which
// would be shared between the variants by the linker).
#pragma once

#ifndef CPU_CAPABILITY
#error "kernel sources must be compiled with -DCPU_CAPABILITY=<variant> (see setup.py ISA_VARIANTS)"
#endif

#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
#include <immintrin.h>
#endif

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

using at::vec::Vectorized;

template <typename T>
inline constexpr bool kReduced = std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>;

// The elements of one Vectorized<scalar_t>, held as opmath vectors: one vector for float/double, two float
// vectors for the 16-bit types (computed in fp32, rounded once on store). Partial loads fill the missing
// lanes with zeros, so tails go through exactly the same vector code as full vectors.
template <typename scalar_t>
struct Pack {
  using opmath_t = at::opmath_type<scalar_t>;
  using Vec = Vectorized<opmath_t>;
  static constexpr int kVecs = kReduced<scalar_t> ? 2 : 1;
  static constexpr int64_t kSize = Vectorized<scalar_t>::size();

  Vec v[kVecs];

  static Pack load(const scalar_t* p, int64_t count = kSize) {
    const auto raw = count == kSize ? Vectorized<scalar_t>::loadu(p) : Vectorized<scalar_t>::loadu(p, count);
    Pack r;
    if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
      std::tie(r.v[0], r.v[1]) = at::vec::convert_bfloat16_float(raw);
    } else if constexpr (std::is_same_v<scalar_t, c10::Half>) {
      std::tie(r.v[0], r.v[1]) = at::vec::convert_half_float(raw);
    } else {
      r.v[0] = raw;
    }
    return r;
  }

  void store(scalar_t* p, int64_t count = kSize) const {
    Vectorized<scalar_t> raw;
    if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
      raw = at::vec::convert_float_bfloat16(v[0], v[1]);
    } else if constexpr (std::is_same_v<scalar_t, c10::Half>) {
      raw = at::vec::convert_float_half(v[0], v[1]);
    } else {
      raw = v[0];
    }
    if (count == kSize) {
      raw.store(p);
    } else {
      raw.store(p, count);
    }
  }
};

// Sum of the lanes in a fixed order (a pairwise tree over the lane array).
template <typename T>
inline T hsum(const Vectorized<T>& v) {
  constexpr int n = Vectorized<T>::size();
  T a[n];
  v.store(a);
  for (int w = n / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) a[i] += a[i + w];
  return a[0];
}

// out = op(a, b) elementwise over a TensorIterator with one output and two inputs of dtype scalar_t; op maps
// opmath vectors to an opmath vector. Contiguous runs are read and written in place; strided or broadcast
// runs are gathered into a small buffer first. Either way every element is computed by the same vector op,
// whatever the thread split, so results do not depend on the number of threads.
template <typename scalar_t, typename Op>
void binary_vec_kernel(at::TensorIteratorBase& iter, const Op& op) {
  using P = Pack<scalar_t>;
  constexpr int64_t K = P::kSize;
  constexpr int64_t S = sizeof(scalar_t);
  auto apply = [&op](const scalar_t* a, const scalar_t* b, scalar_t* out, int64_t count) {
    const P pa = P::load(a, count), pb = P::load(b, count);
    P r;
    for (int k = 0; k < P::kVecs; ++k) r.v[k] = op(pa.v[k], pb.v[k]);
    r.store(out, count);
  };
  iter.for_each([&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
    for (int64_t i = 0; i < n1; ++i) {
      char* out = data[0] + i * strides[3];
      const char* a = data[1] + i * strides[4];
      const char* b = data[2] + i * strides[5];
      if (strides[0] == S && strides[1] == S && strides[2] == S) {
        auto* o = reinterpret_cast<scalar_t*>(out);
        auto* pa = reinterpret_cast<const scalar_t*>(a);
        auto* pb = reinterpret_cast<const scalar_t*>(b);
        int64_t j = 0;
        for (; j + K <= n0; j += K) apply(pa + j, pb + j, o + j, K);
        if (j < n0) apply(pa + j, pb + j, o + j, n0 - j);
      } else {
        scalar_t ba[K], bb[K], bo[K];
        for (int64_t j = 0; j < n0; j += K) {
          const int64_t cnt = std::min<int64_t>(K, n0 - j);
          for (int64_t k = 0; k < cnt; ++k) {
            std::memcpy(&ba[k], a + (j + k) * strides[1], S);
            std::memcpy(&bb[k], b + (j + k) * strides[2], S);
          }
          apply(ba, bb, bo, cnt);
          for (int64_t k = 0; k < cnt; ++k) std::memcpy(out + (j + k) * strides[0], &bo[k], S);
        }
      }
    }
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
