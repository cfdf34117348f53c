// Lane-wise selects: an fp32 vector rounded to fp16 / bf16, comparisons as masks (false where NaN), blend.
// Part of the kernels' vector helpers (core/cpu/vec.h): compiled once per ISA variant, everything in
// npu_ext::cpu::CPU_CAPABILITY.
#pragma once

#include "core/cpu/vec/pack.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

#if defined(NPU_EXT_SSE2_LANES)
// The generic Vectorized<float> of x86-64's DEFAULT variant as two SSE2 registers, and back.
static_assert(Vectorized<float>::size() == 8, "the generic Vectorized<float> holds 8 lanes");
struct Sse2Halves {
  __m128 lo, hi;
};
C10_ALWAYS_INLINE Sse2Halves sse2_halves(const Vectorized<float>& v) {
  alignas(32) float f[8];
  v.store(f);
  return {_mm_load_ps(f), _mm_load_ps(f + 4)};
}
C10_ALWAYS_INLINE Vectorized<float> from_sse2(__m128 lo, __m128 hi) {
  alignas(32) float f[8];
  _mm_store_ps(f, lo);
  _mm_store_ps(f + 4, hi);
  return Vectorized<float>::loadu(f);
}
// m ? a : b, lane-wise, for SSE2 lane masks (all ones or all zeros).
C10_ALWAYS_INLINE __m128 sse2_select(__m128 m, __m128 a, __m128 b) {
  return _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b));
}
#endif

// An fp32 vector rounded to T (c10::Half or c10::BFloat16: round to nearest even, overflow to +-inf, subnormals
// kept) and widened back, in registers (x86-64; Pack::rounded() uses it): F16C for fp16 on AVX2 / AVX-512, fp32
// arithmetic on the DEFAULT variant (sse2_round_to_16bit); for bf16 the rounding on the fp32 bits (add 0x7FFF
// plus the lowest kept bit, clear the low half), with NaN lanes passed through unchanged (still NaN).
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
template <typename T>
C10_ALWAYS_INLINE Vectorized<float> round_to_16bit(const Vectorized<float>& v) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, c10::Half>) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd),
                                       _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_castsi512_ps(r), v);
  }
#else
  if constexpr (std::is_same_v<T, c10::Half>) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd),
                                       _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
    return _mm256_blendv_ps(_mm256_castsi256_ps(r), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
#endif
}
#elif defined(NPU_EXT_SSE2_LANES)
// fp16: rounded in fp32 arithmetic, 12 instructions instead of the 30 of sse2_float_to_half_bits and back. |v| in
// the binade [2^E, 2^(E+1)) plus m = 1.5 * 2^(E+13) lands in [2^(E+13), 2^(E+14)), whose fp32 ulp, 2^(E-10), is
// fp16's ulp in |v|'s binade: the addition rounds |v| to fp16's precision, to nearest even, and subtracting m is
// exact. E is taken as at least -14, fp16's smallest normal binade, whose ulp 2^-24 is also that of its
// subnormals. |v| >= 65520 (fp16's largest value plus half an ulp) and infinity give infinity, NaN stays NaN with
// its sign. Checked against the round trip through the fp16 bits for all 2^32 fp32 inputs, with and without
// DAZ/FTZ: the same bits, except NaN payloads (quiet either way, the same sign).
template <typename T>
C10_ALWAYS_INLINE __m128 sse2_round_to_16bit(__m128 v) {
  if constexpr (std::is_same_v<T, c10::Half>) {
    const __m128 sign_mask = _mm_castsi128_ps(_mm_set1_epi32(static_cast<int>(0x80000000u)));
    const __m128 abs = _mm_andnot_ps(sign_mask, v);
    const __m128 binade = _mm_max_ps(_mm_and_ps(abs, _mm_castsi128_ps(_mm_set1_epi32(0x7F800000))),
                                     _mm_set1_ps(0x1.0p-14f));  // 2^E (NaN, infinity: infinity)
    const __m128 m = _mm_mul_ps(binade, _mm_set1_ps(0x1.8p+13f));
    const __m128 r = _mm_sub_ps(_mm_add_ps(abs, m), m);
    const __m128 inf = _mm_cmpge_ps(abs, _mm_set1_ps(65520.0f));
    return _mm_or_ps(sse2_select(inf, _mm_set1_ps(std::numeric_limits<float>::infinity()), r),
                     _mm_and_ps(v, sign_mask));
  } else {
    const __m128i u = _mm_castps_si128(v);
    const __m128i odd = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
    const __m128 r = _mm_castsi128_ps(_mm_and_si128(_mm_add_epi32(_mm_add_epi32(u, _mm_set1_epi32(0x7FFF)), odd),
                                                    _mm_set1_epi32(static_cast<int>(0xFFFF0000u))));
    const __m128 nan = _mm_cmpunord_ps(v, v);
    return _mm_or_ps(_mm_and_ps(nan, v), _mm_andnot_ps(nan, r));
  }
}

template <typename T>
C10_ALWAYS_INLINE Vectorized<float> round_to_16bit(const Vectorized<float>& v) {
  const Sse2Halves h = sse2_halves(v);
  return from_sse2(sse2_round_to_16bit<T>(h.lo), sse2_round_to_16bit<T>(h.hi));
}
#endif

template <typename T, typename Pred>
C10_ALWAYS_INLINE Vectorized<T> lane_mask(const Vectorized<T>& a, const Vectorized<T>& b, const Pred& pred) {
  using I = at::vec::int_same_size_t<T>;
  constexpr int V = Vectorized<T>::size();
  T av[V], bv[V];
  I m[V];
  a.store(av);
  b.store(bv);
  for (int k = 0; k < V; ++k) m[k] = -static_cast<I>(pred(av[k], bv[k]));
  return Vectorized<T>::loadu(m);
}

// The lane-wise comparisons, false where either operand is NaN, as masks (lanes all ones or all zeros): two SSE2
// compares on the x86 DEFAULT variant's generic lanes (NPU_EXT_SSE2_LANES), a branch-free predicate on other
// generic lanes (at::vec's generic comparisons branch per lane), at::vec's operator elsewhere. Cmp names them.
struct CmpGt {
  template <typename U> static bool lane(U x, U y) { return x > y; }
  template <typename V> static V vec(const V& a, const V& b) { return a > b; }
#if defined(NPU_EXT_SSE2_LANES)
  static __m128 sse2(__m128 x, __m128 y) { return _mm_cmpgt_ps(x, y); }
#endif
};
struct CmpGe {
  template <typename U> static bool lane(U x, U y) { return x >= y; }
  template <typename V> static V vec(const V& a, const V& b) { return a >= b; }
#if defined(NPU_EXT_SSE2_LANES)
  static __m128 sse2(__m128 x, __m128 y) { return _mm_cmpge_ps(x, y); }
#endif
};
struct CmpLe {
  template <typename U> static bool lane(U x, U y) { return x <= y; }
  template <typename V> static V vec(const V& a, const V& b) { return a <= b; }
#if defined(NPU_EXT_SSE2_LANES)
  static __m128 sse2(__m128 x, __m128 y) { return _mm_cmple_ps(x, y); }
#endif
};

template <typename Cmp, typename T>
C10_ALWAYS_INLINE Vectorized<T> compare_lanes(const Vectorized<T>& a, const Vectorized<T>& b) {
#if defined(NPU_EXT_SSE2_LANES)
  if constexpr (std::is_same_v<T, float>) {
    const Sse2Halves x = sse2_halves(a), y = sse2_halves(b);
    return from_sse2(Cmp::sse2(x.lo, y.lo), Cmp::sse2(x.hi, y.hi));
  }
#endif
  if constexpr (kGenericLanes<T>) {
    return lane_mask(a, b, [](T x, T y) { return Cmp::lane(x, y); });
  } else {
    return Cmp::vec(a, b);
  }
}

// a > b
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> mask_gt(const Vectorized<T>& a, const Vectorized<T>& b) {
  return compare_lanes<CmpGt>(a, b);
}

// a < b
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> mask_lt(const Vectorized<T>& a, const Vectorized<T>& b) {
  return mask_gt(b, a);
}

// a >= b
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> mask_ge(const Vectorized<T>& a, const Vectorized<T>& b) {
  return compare_lanes<CmpGe>(a, b);
}

// a <= b. Its own compare, not mask_ge(b, a): a compare instruction takes a memory operand only as its second
// operand, so the operand order decides whether a constant b needs a load.
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> mask_le(const Vectorized<T>& a, const Vectorized<T>& b) {
  return compare_lanes<CmpLe>(a, b);
}

// mask ? b : a, lane-wise (mask lanes all ones or all zeros), as Vectorized::blendv.
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> blend(const Vectorized<T>& a, const Vectorized<T>& b, const Vectorized<T>& mask) {
#if defined(NPU_EXT_SSE2_LANES)
  if constexpr (std::is_same_v<T, float>) {
    const Sse2Halves x = sse2_halves(a), y = sse2_halves(b), m = sse2_halves(mask);
    return from_sse2(sse2_select(m.lo, y.lo, x.lo), sse2_select(m.hi, y.hi, x.hi));
  }
#endif
  if constexpr (kGenericLanes<T>) {
    using I = at::vec::int_same_size_t<T>;
    constexpr int V = Vectorized<T>::size();
    I av[V], bv[V], mv[V];
    a.store(av);
    b.store(bv);
    mask.store(mv);
    for (int k = 0; k < V; ++k) av[k] = (av[k] & ~mv[k]) | (bv[k] & mv[k]);
    return Vectorized<T>::loadu(av);
  } else {
    return Vectorized<T>::blendv(a, b, mask);
  }
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
