// fp16 / bf16 <-> fp32 conversions, exact (IEEE round to nearest even), in SSE2 lanes on x86-64's DEFAULT
// variant and with the variant's own instructions elsewhere.
// Part of the kernels' vector helpers (core/cpu/vec.h): compiled once per ISA variant, everything in
// npu_ext::cpu::CPU_CAPABILITY.
#pragma once

#include "core/cpu/vec/base.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

#if defined(NPU_EXT_SSE2_LANES)
// The conversions below in SSE2, 4 lanes per register (x86-64's DEFAULT variant). Unsigned compares are
// signed ones on non-negative values, as in the loops.
C10_ALWAYS_INLINE __m128i sse2_half_to_float_bits(__m128i w) {  // w: the fp16 bits in the high half of each lane
  const __m128i sign = _mm_and_si128(w, _mm_set1_epi32(static_cast<int>(0x80000000u)));
  const __m128i two_w = _mm_add_epi32(w, w);
  const __m128 normalized = _mm_mul_ps(
      _mm_castsi128_ps(_mm_add_epi32(_mm_srli_epi32(two_w, 4), _mm_set1_epi32(0xE0 << 23))), _mm_set1_ps(0x1.0p-112f));
  const __m128 denormalized = _mm_sub_ps(
      _mm_castsi128_ps(_mm_or_si128(_mm_srli_epi32(two_w, 17), _mm_set1_epi32(126 << 23))), _mm_set1_ps(0.5f));
  const __m128i small = _mm_cmplt_epi32(_mm_srli_epi32(two_w, 1), _mm_set1_epi32(1 << 26));
  const __m128i magnitude = _mm_or_si128(_mm_and_si128(small, _mm_castps_si128(denormalized)),
                                         _mm_andnot_si128(small, _mm_castps_si128(normalized)));
  return _mm_or_si128(sign, magnitude);
}

C10_ALWAYS_INLINE __m128i sse2_float_to_half_bits(__m128i w) {  // the fp16 bits in the low half of each lane
  const __m128i sign = _mm_and_si128(w, _mm_set1_epi32(static_cast<int>(0x80000000u)));
  const __m128i abs_w = _mm_and_si128(w, _mm_set1_epi32(0x7FFFFFFF));
  const __m128i nan = _mm_cmpgt_epi32(abs_w, _mm_set1_epi32(0x7F800000));
  __m128 base = _mm_mul_ps(_mm_mul_ps(_mm_castsi128_ps(abs_w), _mm_set1_ps(0x1.0p+112f)), _mm_set1_ps(0x1.0p-110f));
  const __m128i e = _mm_srli_epi32(abs_w, 23);
  const __m128i low = _mm_cmplt_epi32(e, _mm_set1_epi32(0x71));
  const __m128i e_min = _mm_or_si128(_mm_andnot_si128(low, e), _mm_and_si128(low, _mm_set1_epi32(0x71)));
  base = _mm_add_ps(_mm_castsi128_ps(_mm_add_epi32(_mm_slli_epi32(e_min, 23), _mm_set1_epi32(0x07800000))), base);
  const __m128i bits = _mm_castps_si128(base);
  const __m128i nonsign = _mm_add_epi32(_mm_and_si128(_mm_srli_epi32(bits, 13), _mm_set1_epi32(0x00007C00)),
                                        _mm_and_si128(bits, _mm_set1_epi32(0x00000FFF)));
  return _mm_or_si128(_mm_or_si128(_mm_srli_epi32(sign, 16), _mm_and_si128(nan, _mm_set1_epi32(0x7E00))),
                      _mm_andnot_si128(nan, nonsign));
}

C10_ALWAYS_INLINE __m128i sse2_float_to_bfloat16_bits(__m128i u) {  // the bf16 bits in the low half of each lane
  const __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(u, _mm_set1_epi32(0x7FFFFFFF)), _mm_set1_epi32(0x7F800000));
  const __m128i odd = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
  const __m128i rounded = _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(u, _mm_set1_epi32(0x7FFF)), odd), 16);
  return _mm_or_si128(_mm_and_si128(nan, _mm_set1_epi32(0x7FC0)), _mm_andnot_si128(nan, rounded));
}

// 16-bit values (0..65535 in 32-bit lanes) of two registers packed into one: sign-extended first, so that the
// signed saturating pack keeps every bit pattern.
C10_ALWAYS_INLINE __m128i sse2_pack_u16(__m128i lo, __m128i hi) {
  return _mm_packs_epi32(_mm_srai_epi32(_mm_slli_epi32(lo, 16), 16), _mm_srai_epi32(_mm_slli_epi32(hi, 16), 16));
}

// 8 16-bit values at `in` as two fp32 vectors (elements 0-3 and 4-7).
template <bool kBf16>
C10_ALWAYS_INLINE void sse2_widen8(const uint16_t* in, __m128& lo, __m128& hi) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  __m128i l = _mm_unpacklo_epi16(zero, x), h = _mm_unpackhi_epi16(zero, x);  // x << 16 in 32-bit lanes
  if constexpr (!kBf16) {
    l = sse2_half_to_float_bits(l);
    h = sse2_half_to_float_bits(h);
  }
  lo = _mm_castsi128_ps(l);
  hi = _mm_castsi128_ps(h);
}

// 16-bit -> fp32 (sse2_widen) and back (sse2_narrow) for N elements, N a multiple of 8.
template <int N, bool kBf16>
C10_ALWAYS_INLINE void sse2_widen(const uint16_t* in, float* out) {
  static_assert(N % 8 == 0, "whole SSE2 steps");
  for (int k = 0; k < N; k += 8) {
    __m128 lo, hi;
    sse2_widen8<kBf16>(in + k, lo, hi);
    _mm_storeu_ps(out + k, lo);
    _mm_storeu_ps(out + k + 4, hi);
  }
}

template <int N, bool kBf16>
C10_ALWAYS_INLINE void sse2_narrow(const float* in, uint16_t* out) {
  static_assert(N % 8 == 0, "whole SSE2 steps");
  for (int k = 0; k < N; k += 8) {
    const __m128i lo = _mm_castps_si128(_mm_loadu_ps(in + k)), hi = _mm_castps_si128(_mm_loadu_ps(in + k + 4));
    const __m128i packed = kBf16 ? sse2_pack_u16(sse2_float_to_bfloat16_bits(lo), sse2_float_to_bfloat16_bits(hi))
                                 : sse2_pack_u16(sse2_float_to_half_bits(lo), sse2_float_to_half_bits(hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), packed);
  }
}
#endif

// The selects are written as masks and the unsigned comparisons as signed ones on non-negative values: a
// conditional expression or an unsigned compare here keeps the compiler from vectorizing the loop.
template <int N>
C10_ALWAYS_INLINE void half_to_float(const uint16_t* h, float* out) {
#if defined(NPU_EXT_SSE2_LANES)
  if constexpr (N % 8 == 0) return sse2_widen<N, false>(h, out);
#endif
  for (int k = 0; k < N; ++k) {
    const uint32_t w = static_cast<uint32_t>(h[k]) << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const float normalized = c10::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = c10::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t small = all_ones_if(static_cast<int32_t>(two_w >> 1) < (1 << 26));  // two_w < 2^27
    const uint32_t magnitude =
        (small & c10::bit_cast<uint32_t>(denormalized)) | (~small & c10::bit_cast<uint32_t>(normalized));
    out[k] = c10::bit_cast<float>(sign | magnitude);
  }
}

template <int N>
C10_ALWAYS_INLINE void float_to_half(const float* f, uint16_t* out) {
#if defined(NPU_EXT_SSE2_LANES)
  if constexpr (N % 8 == 0) return sse2_narrow<N, false>(f, out);
#endif
  for (int k = 0; k < N; ++k) {
    const uint32_t w = c10::bit_cast<uint32_t>(f[k]);
    const uint32_t sign = w & 0x80000000u;
    const int32_t abs_w = static_cast<int32_t>(w & 0x7FFFFFFFu);
    const uint32_t nan = all_ones_if(abs_w > 0x7F800000);
    float base = (c10::bit_cast<float>(static_cast<uint32_t>(abs_w)) * 0x1.0p+112f) * 0x1.0p-110f;
    const int32_t e = abs_w >> 23;  // the biased exponent, raised to at least 0x71 (the fp16 subnormal bias)
    const int32_t low = static_cast<int32_t>(all_ones_if(e < 0x71));
    base = c10::bit_cast<float>((static_cast<uint32_t>((e & ~low) | (0x71 & low)) << 23) + 0x07800000u) + base;
    const uint32_t bits = c10::bit_cast<uint32_t>(base);
    const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    out[k] = static_cast<uint16_t>((sign >> 16) | (nan & 0x7E00u) | (~nan & nonsign));
  }
}

template <int N>
C10_ALWAYS_INLINE void bfloat16_to_float(const uint16_t* b, float* out) {
#if defined(NPU_EXT_SSE2_LANES)
  if constexpr (N % 8 == 0) return sse2_widen<N, true>(b, out);
#endif
  for (int k = 0; k < N; ++k) out[k] = c10::bit_cast<float>(static_cast<uint32_t>(b[k]) << 16);
}

template <int N>
C10_ALWAYS_INLINE void float_to_bfloat16(const float* f, uint16_t* out) {
#if defined(NPU_EXT_SSE2_LANES)
  if constexpr (N % 8 == 0) return sse2_narrow<N, true>(f, out);
#endif
  for (int k = 0; k < N; ++k) {
    const uint32_t u = c10::bit_cast<uint32_t>(f[k]);
    const uint32_t nan = all_ones_if(static_cast<int32_t>(u & 0x7FFFFFFFu) > 0x7F800000);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    out[k] = static_cast<uint16_t>((nan & 0x7FC0u) | (~nan & rounded));
  }
}

#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512) || defined(NPU_EXT_SSE2_LANES)
template <typename T>
C10_ALWAYS_INLINE Vectorized<float> round_to_16bit(const Vectorized<float>& v);  // defined below
#endif

#if defined(CPU_CAPABILITY_AVX512) && defined(__AVX512BF16__)
// AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4 and later): vcvtne2ps2bf16 rounds 32 floats to bf16, to
// nearest even, in one instruction, where at::vec's integer sequence takes about 14 (on Zen 5 that sequence was
// a fifth of the bf16 gelu kernels' time). The instruction treats subnormal inputs as zero, so a pair of vectors
// holding one falls back to the exact integer path (false); NaN stays NaN (a quiet NaN keeping its sign). The
// AVX512 variant also runs on AVX-512 CPUs without AVX512_BF16 (Skylake-X, Ice Lake): the instruction is used
// only where the CPU reports it, a load and a predictable branch per 32 elements.
C10_ALWAYS_INLINE bool narrow_bf16_native(const Vectorized<float>& a, const Vectorized<float>& b,
                                          Vectorized<c10::BFloat16>& out) {
  if (!__builtin_cpu_supports("avx512bf16")) return false;
  if ((_mm512_fpclass_ps_mask(a, 0x20) | _mm512_fpclass_ps_mask(b, 0x20)) != 0) return false;  // subnormals
  out = Vectorized<c10::BFloat16>(reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a)));
  return true;
}
#endif

#if defined(CPU_CAPABILITY_AVX512)
// 32 bf16 values, rounded to nearest even, from fp32 vectors holding the even (`even`) and odd (`odd`) elements
// of the 32 (Pack::load_elementwise's order), in element order. NaN gives 0x7FC0 (c10's quiet NaN).
C10_ALWAYS_INLINE __m512i narrow_bf16_even_odd(const __m512& even, const __m512& odd) {
#if defined(__AVX512BF16__)
  if (__builtin_cpu_supports("avx512bf16") &&
      (_mm512_fpclass_ps_mask(even, 0x20) | _mm512_fpclass_ps_mask(odd, 0x20)) == 0) {  // no subnormal input
    // [even 0..15 | odd 0..15] as words, interleaved back: word 2i = even i, word 2i+1 = odd i.
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(idx, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even)));
  }
#endif
  // u + 0x7FFF + ((u >> 16) & 1), the upper 16 bits: the even values into the low words, the odd ones kept in the
  // high words; NaN lanes replaced by 0x7FC0.
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7FFF);
  const __m512i qnan = _mm512_set1_epi32(0x7FC00000);
  const __m512i ue = _mm512_castps_si512(even), uo = _mm512_castps_si512(odd);
  __m512i re = _mm512_add_epi32(ue, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(ue, 16), one)));
  __m512i ro = _mm512_add_epi32(uo, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(uo, 16), one)));
  re = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(even, even, _CMP_UNORD_Q), re, qnan);
  ro = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(odd, odd, _CMP_UNORD_Q), ro, qnan);
  return _mm512_or_si512(_mm512_srli_epi32(re, 16), _mm512_and_si512(ro, _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u))));
}
#elif defined(CPU_CAPABILITY_AVX2)
// The same for 16 bf16 values (the AVX2 variant has no bf16 instruction): the exact integer rounding, with no
// lane shuffle (at::vec's in-order narrowing adds a pack and a permute), and 0x7FC0 for NaN as on AVX-512.
C10_ALWAYS_INLINE __m256i narrow_bf16_even_odd(const __m256& even, const __m256& odd) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
  const __m256i qnan = _mm256_set1_epi32(0x7FC00000);
  const __m256i ue = _mm256_castps_si256(even), uo = _mm256_castps_si256(odd);
  __m256i re = _mm256_add_epi32(ue, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(ue, 16), one)));
  __m256i ro = _mm256_add_epi32(uo, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(uo, 16), one)));
  re = _mm256_blendv_epi8(re, qnan, _mm256_castps_si256(_mm256_cmp_ps(even, even, _CMP_UNORD_Q)));
  ro = _mm256_blendv_epi8(ro, qnan, _mm256_castps_si256(_mm256_cmp_ps(odd, odd, _CMP_UNORD_Q)));
  return _mm256_or_si256(_mm256_srli_epi32(re, 16), _mm256_and_si256(ro, _mm256_set1_epi32(static_cast<int32_t>(0xFFFF0000u))));
}
#endif

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
