// Pack: the elements of one Vectorized<scalar_t> as opmath vectors (16-bit types computed in fp32, rounded once
// on store; partial loads for tails), and the store loops over them.
// Part of the kernels' vector helpers (core/cpu/vec.h): compiled once per ISA variant, everything in
// npu_ext::cpu::CPU_CAPABILITY.
#pragma once

#include "core/cpu/vec/convert.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

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

  static C10_ALWAYS_INLINE Pack load(const scalar_t* p, int64_t count = kSize) {
    return widen(count == kSize ? Vectorized<scalar_t>::loadu(p) : Vectorized<scalar_t>::loadu(p, count));
  }

  C10_ALWAYS_INLINE void store(scalar_t* p, int64_t count = kSize) const { store_raw(narrow(), p, count); }

  // `count` elements of raw at p (a whole vector: no bounds).
  static C10_ALWAYS_INLINE void store_raw(const Vectorized<scalar_t>& raw, scalar_t* p, int64_t count) {
    if (count == kSize) {
      raw.store(p);
    } else {
      raw.store(p, count);
    }
  }

  // load / store for kernels whose ops never mix lanes (unary_vec_kernel, binary_vec_kernel, the row sums of
  // grouped_bias_add_grad): the Pack may hold the elements in another order, which store_elementwise undoes.
  // bf16 on AVX2 and AVX-512: v[0] holds the even elements and v[1] the odd ones, so that widening is one shift
  // or one mask per vector (at::vec's in-order widening takes three instructions per vector, two of them lane
  // shuffles) and narrowing needs no pack or permute (AVX-512 with AVX512_BF16: vcvtne2ps2bf16 and one vpermw).
  // Any other type or variant: load / store.
  static C10_ALWAYS_INLINE Pack load_elementwise(const scalar_t* p, int64_t count = kSize) {
#if defined(CPU_CAPABILITY_AVX512)
    if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
      const __m512i raw = count == kSize ? _mm512_loadu_si512(p) : __m512i(Vectorized<scalar_t>::loadu(p, count));
      Pack r;
      r.v[0] = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
      r.v[1] = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u))));
      return r;
    }
#elif defined(CPU_CAPABILITY_AVX2)
    if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
      const __m256i raw = count == kSize ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                         : __m256i(Vectorized<scalar_t>::loadu(p, count));
      Pack r;
      r.v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
      r.v[1] = _mm256_castsi256_ps(_mm256_and_si256(raw, _mm256_set1_epi32(static_cast<int32_t>(0xFFFF0000u))));
      return r;
    }
    if constexpr (std::is_same_v<scalar_t, c10::Half>) {
      if (count == kSize) {
        Pack r;
        r.v[0] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        r.v[1] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p) + 1));
        return r;
      }
    }
#endif
    return load(p, count);
  }

  C10_ALWAYS_INLINE void store_elementwise(scalar_t* p, int64_t count = kSize) const {
    store_raw(narrow_elementwise(), p, count);
  }

  // narrow() for a Pack made by load_elementwise: these values rounded to scalar_t, in element order.
  C10_ALWAYS_INLINE Vectorized<scalar_t> narrow_elementwise() const {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
    if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
      return Vectorized<scalar_t>(narrow_bf16_even_odd(v[0], v[1]));
    }
#endif
    return narrow();
  }

  // These values rounded to scalar_t and widened back (the identity for float and double): what a value that
  // passes through a scalar_t tensor becomes. x86-64 rounds each fp32 vector in its registers (round_to_16bit);
  // elsewhere the pack is narrowed and widened back.
  C10_ALWAYS_INLINE Pack rounded() const {
    if constexpr (!kReduced<scalar_t>) {
      return *this;
    } else {
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512) || defined(NPU_EXT_SSE2_LANES)
      Pack r;
      for (int k = 0; k < kVecs; ++k) r.v[k] = round_to_16bit<scalar_t>(v[k]);
      return r;
#else
      return widen(narrow());
#endif
    }
  }

  // The values of one Vectorized<scalar_t> as opmath vectors (exact).
  static C10_ALWAYS_INLINE Pack widen(const Vectorized<scalar_t>& raw) {
    Pack r;
    if constexpr (kReduced<scalar_t> && kGenericLanes<float>) {
      constexpr int V = Vec::size();
      uint16_t bits[kSize];
      float wide[kSize];
      raw.store(bits);
      if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
        bfloat16_to_float<kSize>(bits, wide);
      } else {
        half_to_float<kSize>(bits, wide);
      }
      r.v[0] = Vec::loadu(wide);
      r.v[1] = Vec::loadu(wide + V);
    } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
      std::tie(r.v[0], r.v[1]) = at::vec::convert_bfloat16_float(raw);
    } else if constexpr (std::is_same_v<scalar_t, c10::Half>) {
      std::tie(r.v[0], r.v[1]) = at::vec::convert_half_float(raw);
    } else {
      r.v[0] = raw;
    }
    return r;
  }

  // These values rounded to scalar_t (round to nearest even), as one Vectorized<scalar_t>.
  C10_ALWAYS_INLINE Vectorized<scalar_t> narrow() const {
    Vectorized<scalar_t> raw;
    if constexpr (kReduced<scalar_t> && kGenericLanes<float>) {
      constexpr int V = Vec::size();
      float wide[kSize];
      uint16_t bits[kSize];
      v[0].store(wide);
      v[1].store(wide + V);
      if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
        float_to_bfloat16<kSize>(wide, bits);
      } else {
        float_to_half<kSize>(wide, bits);
      }
      raw = Vectorized<scalar_t>::loadu(bits);
    } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
#if defined(CPU_CAPABILITY_AVX512) && defined(__AVX512BF16__)
      if (narrow_bf16_native(v[0], v[1], raw)) return raw;
#endif
      raw = at::vec::convert_float_bfloat16(v[0], v[1]);
    } else if constexpr (std::is_same_v<scalar_t, c10::Half>) {
      raw = at::vec::convert_float_half(v[0], v[1]);
    } else {
      raw = v[0];
    }
    return raw;
  }
};

// store_loop for Packs made by Pack::load_elementwise (stored with store_elementwise).
template <typename scalar_t, typename Body>
C10_ALWAYS_INLINE void store_loop_elementwise(scalar_t* out, int64_t n, const Body& body) {
  constexpr int64_t K = Pack<scalar_t>::kSize;
  int64_t j = 0;
  for (; j + K <= n; j += K) body(j, K).store_elementwise(out + j);
  if (j < n) body(j, n - j).store_elementwise(out + j, n - j);
}

// Runs out[j : j + count] = body(j, count) over [0, n) in vector-sized slices (a partial one last).
template <typename scalar_t, typename Body>
C10_ALWAYS_INLINE void store_loop(scalar_t* out, int64_t n, const Body& body) {
  constexpr int64_t K = Pack<scalar_t>::kSize;
  int64_t j = 0;
  for (; j + K <= n; j += K) body(j, K).store(out + j);
  if (j < n) body(j, n - j).store(out + j, n - j);
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
