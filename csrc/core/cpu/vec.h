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
#include <c10/util/bit_cast.h>
#include <c10/macros/Macros.h>
#include <c10/util/Half.h>
#include "core/torch_compat.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
#include <immintrin.h>
#elif defined(__SSE2__)
// x86-64's DEFAULT variant: SSE2 is part of x86-64 itself, so its intrinsics run on every CPU this variant can
// be chosen on (tests/test_isa_portability.py checks that no AVX instruction gets in).
#include <emmintrin.h>
#define NPU_EXT_SSE2_LANES 1
#endif

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

using at::vec::Vectorized;

template <typename T>
inline constexpr bool kReduced = std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>;

// kGenericLanes<T>: at::vec's generic (array) Vectorized is what holds T here (the DEFAULT variant on x86-64;
// types other than float on aarch64), and the lane masks, selects and 16-bit conversions below replace some of
// its operations. The SIMD variants (AVX2, AVX512, and NEON for float on aarch64) use at::vec's own. The
// generic Vectorized implements comparisons and blendv with one branch per lane: on data-dependent outcomes
// (the sign of an activation) half of them mispredict, and a kernel spends most of its time there. The
// versions below are branch-free: SSE2 compares and bitwise selects on x86-64 (NPU_EXT_SSE2_LANES), element
// loops elsewhere.
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
template <typename T>
inline constexpr bool kGenericLanes = false;
#elif defined(__aarch64__)
template <typename T>
inline constexpr bool kGenericLanes = !std::is_same_v<T, float>;
#else
template <typename T>
inline constexpr bool kGenericLanes = true;
#endif

// fp16/bf16 <-> fp32 on that generic variant (x86-64 DEFAULT, no F16C: kGenericLanes<float>): at::vec's generic
// conversions convert one element at a time through c10::Half/c10::BFloat16, which the compiler keeps scalar.
// These are the same exact conversions (IEEE round to nearest even; the fp16 ones are the branch-free
// algorithms c10 itself uses, from the FP16 library), written as loops over plain integers that a compiler can
// vectorize, and on x86-64 (where SSE2 is part of the architecture) as SSE2 code directly, which is what gcc
// makes of the loops only in part (the bf16 softmax backward: 25.6 -> 20.5 instructions per element with it).
// Elsewhere (AVX2/AVX512: F16C and integer shifts; aarch64: NEON) at::vec's own conversions are used.
// All lanes set where cond holds (cond computed without a branch).
C10_ALWAYS_INLINE uint32_t all_ones_if(bool cond) { return static_cast<uint32_t>(-static_cast<int32_t>(cond)); }

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

// The at::vec operations of normal_tail and the gelu erf kernels, generic over the lane type: at::vec's
// Vectorized<float> everywhere, and on x86-64's DEFAULT variant Sse2F, four fp32 lanes in one SSE2 register.
// at::vec's generic Vectorized<float> keeps its 8 lanes in memory between operations (28 instructions per
// element for gelu_backward_v2); those kernels run on two Sse2F halves instead, with the same operations in
// the same order (a * b + c as two roundings, as at::vec's generic fmadd), so the results are the same bits.
template <typename V>
C10_ALWAYS_INLINE V vfmadd(const V& a, const V& b, const V& c) {
  return at::vec::fmadd(a, b, c);
}
template <typename V>
C10_ALWAYS_INLINE V vfmsub(const V& a, const V& b, const V& c) {
  return at::vec::fmsub(a, b, c);
}
template <typename V>
C10_ALWAYS_INLINE V vfnmadd(const V& a, const V& b, const V& c) {
  return compat::fnmadd(a, b, c);
}
template <typename V>
C10_ALWAYS_INLINE V vclamp_max(const V& a, const V& max) {
  return at::vec::clamp_max(a, max);
}
template <typename V>
C10_ALWAYS_INLINE V vabs(const V& a) {
  return a.abs();
}

// kSse2Lanes<V>: V is Sse2F (below), lanes without FMA. A multiply-add there is a multiply, then an add: two
// latencies per step of a Horner chain, and the gelu erf kernels' chains (normal_tail's exp2 and erfcx
// polynomials, 13 steps between them) bound their SSE2 loops by latency, not by issue. Those polynomials are
// evaluated there in Estrin's form instead (pairs c_i + c_(i+1) x, combined with x^2 and x^4): about half the
// chain for two or three more multiplies. fp32 gelu_backward_v2 erf, 4M elements, 1 thread, AMD EPYC Zen 5:
// 5.8 -> 4.9 ms; the forward 6.2 -> 5.4 ms. The rounding differs from Horner's form by little: over a dense
// scan of [-14, 8) the mean error moved by at most 0.1 ulp (docs/accuracy.md). Lanes with FMA (AVX2, AVX-512,
// NEON) keep Horner's form, whose chains are half as long there.
template <typename V>
inline constexpr bool kSse2Lanes = false;
#if defined(NPU_EXT_SSE2_LANES)
struct Sse2F;
template <>
inline constexpr bool kSse2Lanes<Sse2F> = true;
struct Sse2F {
  __m128 v;
  Sse2F() = default;
  Sse2F(__m128 x) : v(x) {}  // NOLINT: implicit, as at::vec's Vectorized from its register type
  explicit Sse2F(float f) : v(_mm_set1_ps(f)) {}
  operator __m128() const { return v; }  // NOLINT
};
C10_ALWAYS_INLINE Sse2F operator+(Sse2F a, Sse2F b) { return _mm_add_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator-(Sse2F a, Sse2F b) { return _mm_sub_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator*(Sse2F a, Sse2F b) { return _mm_mul_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator/(Sse2F a, Sse2F b) { return _mm_div_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator&(Sse2F a, Sse2F b) { return _mm_and_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator^(Sse2F a, Sse2F b) { return _mm_xor_ps(a, b); }
C10_ALWAYS_INLINE Sse2F vfmadd(Sse2F a, Sse2F b, Sse2F c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
C10_ALWAYS_INLINE Sse2F vfmsub(Sse2F a, Sse2F b, Sse2F c) { return _mm_sub_ps(_mm_mul_ps(a, b), c); }
C10_ALWAYS_INLINE Sse2F vfnmadd(Sse2F a, Sse2F b, Sse2F c) { return _mm_sub_ps(c, _mm_mul_ps(a, b)); }
// a > max ? max : a, as at::vec's generic clamp_max (a NaN a stays: minps returns its second operand then)
C10_ALWAYS_INLINE Sse2F vclamp_max(Sse2F a, Sse2F max) { return _mm_min_ps(max, a); }
C10_ALWAYS_INLINE Sse2F vabs(Sse2F a) { return _mm_andnot_ps(_mm_set1_ps(-0.0f), a); }

// f(halves) on the two SSE2 halves of a generic Vectorized<float>, as one Vectorized<float>.
template <typename F>
C10_ALWAYS_INLINE Vectorized<float> on_sse2_halves(const Vectorized<float>& a, const F& f) {
  const Sse2Halves h = sse2_halves(a);
  return from_sse2(f(Sse2F(h.lo)), f(Sse2F(h.hi)));
}
template <typename F>
C10_ALWAYS_INLINE Vectorized<float> on_sse2_halves(const Vectorized<float>& a, const Vectorized<float>& b,
                                                   const F& f) {
  const Sse2Halves ha = sse2_halves(a), hb = sse2_halves(b);
  return from_sse2(f(Sse2F(ha.lo), Sse2F(hb.lo)), f(Sse2F(ha.hi), Sse2F(hb.hi)));
}
#endif

// lane_op(f): an fp32 op f written once for any lane type (f(x) or f(g, x) with at::vec's operators and the
// v* functions above), as an op for unary_vec_kernel / binary_vec_kernel. On x86-64's DEFAULT variant it is a
// LaneOp: it takes the generic Vectorized<float> (run on its two SSE2 halves) and Sse2F itself, which those
// loops then use on contiguous fp32 runs, four lanes straight from memory to memory. at::vec's generic
// Vectorized keeps its lanes in memory, and gcc does not remove the copies between it and the SSE2 halves:
// the fp32 gelu_backward_v2 erf loop ran 24.5 instructions per element that way, 13 of them arithmetic.
// Both paths run the same operations on each lane, so a tail or a strided run (through the Vectorized
// overloads) gives the same bits as a contiguous one. The loops take two registers per step (two independent
// chains in flight: 6.1 -> 5.8 ms for that loop). Elsewhere lane_op(f) is f.
#if defined(NPU_EXT_SSE2_LANES)
template <typename F>
struct LaneOp {
  F f;
  C10_ALWAYS_INLINE Vectorized<float> operator()(const Vectorized<float>& a) const { return on_sse2_halves(a, f); }
  C10_ALWAYS_INLINE Vectorized<float> operator()(const Vectorized<float>& a, const Vectorized<float>& b) const {
    return on_sse2_halves(a, b, f);
  }
  C10_ALWAYS_INLINE Sse2F operator()(Sse2F a) const { return f(a); }
  C10_ALWAYS_INLINE Sse2F operator()(Sse2F a, Sse2F b) const { return f(a, b); }
};
template <typename F>
C10_ALWAYS_INLINE LaneOp<F> lane_op(const F& f) {
  return LaneOp<F>{f};
}
template <typename Op>
inline constexpr bool kIsLaneOp = false;
template <typename F>
inline constexpr bool kIsLaneOp<LaneOp<F>> = true;
#else
template <typename F>
C10_ALWAYS_INLINE const F& lane_op(const F& f) {
  return f;
}
#endif

// 2^w in float: w = n + f with n = round(w), |f| <= 1/2 (exact), 2^f by a degree-5 polynomial (relative error
// 1.1e-7 with its fp32 coefficients), 2^n applied exactly. w is first clamped to [-151, 129] (NaN passes: the
// max/min operand order returns w when it is NaN), so that w = -inf gives 0 and w = +inf gives inf, and 2^n is
// representable in two factors. AVX-512 applies 2^n with vscalefps, AVX2 and the portable DEFAULT variant as two
// exponent-field factors 2^(n/2) 2^(n - n/2) (one rounding, into the subnormals included).
// 2^f for |f| <= 1/2: 1 + f Q(f), Q the relative minimax fit of tools/fit_exp2.py (2^0 = 1 exactly), in
// Horner's form (fast_exp2's core, the same instructions in every variant).
template <bool kBf16 = false, typename V>
C10_ALWAYS_INLINE V exp2_fraction(const V& f) {
  if constexpr (kBf16) {  // Q of degree 3: 2.8e-6 (tools/fit_exp2.py --degree 3)
    V p = vfmadd(V(9.582849219441414e-3f), f, V(5.590642988681793e-2f));
    p = vfmadd(p, f, V(2.4024099111557007e-1f));
    p = vfmadd(p, f, V(6.931241750717163e-1f));
    return vfmadd(p, f, V(1.0f));
  } else if constexpr (kSse2Lanes<V>) {  // Estrin's form (see kSse2Lanes): 3 levels, not 5 Horner steps
    const V f2 = f * f;
    const V a = vfmadd(V(6.931470036506653e-1f), f, V(1.0f));
    const V b = vfmadd(V(5.550733581185341e-2f), f, V(2.4022242426872253e-1f));
    const V c = vfmadd(V(1.3264722656458616e-3f), f, V(9.671512991189957e-3f));
    return vfmadd(vfmadd(c, f2, b), f2, a);
  }
  V p = vfmadd(V(1.3264722656458616e-3f), f, V(9.671512991189957e-3f));
  p = vfmadd(p, f, V(5.550733581185341e-2f));
  p = vfmadd(p, f, V(2.4022242426872253e-1f));
  p = vfmadd(p, f, V(6.931470036506653e-1f));
  return vfmadd(p, f, V(1.0f));
}

#if defined(NPU_EXT_SSE2_LANES)
// fast_exp2 on SSE2 lanes (x86-64's DEFAULT variant): the portable steps below (the same clamp, rounding to
// nearest and two exponent-field factors) in registers, where the generic Vectorized<float> keeps its lanes in
// memory and builds the factors one lane at a time. max(-151, w) and min(129, .) return w when it is NaN
// (SSE2's max/min return their second operand then), so NaN passes, and its factors (from cvtps2dq's
// 0x80000000) cannot make p's NaN anything else. exp2_fraction takes its Estrin form here (kSse2Lanes).
C10_ALWAYS_INLINE Sse2F fast_exp2(Sse2F w) {
  const __m128 wc = _mm_min_ps(_mm_set1_ps(129.0f), _mm_max_ps(_mm_set1_ps(-151.0f), w));
  const __m128 shifter = _mm_set1_ps(12582912.0f);
  const __m128 n = _mm_sub_ps(_mm_add_ps(wc, shifter), shifter);
  const Sse2F p = exp2_fraction(Sse2F(_mm_sub_ps(wc, n)));
  const __m128i ni = _mm_cvtps_epi32(n);
  const __m128i n1 = _mm_srai_epi32(ni, 1);
  const __m128i n2 = _mm_sub_epi32(ni, n1);
  const __m128i bias = _mm_set1_epi32(127);
  const __m128 s1 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(n1, bias), 23));
  const __m128 s2 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(n2, bias), 23));
  return _mm_mul_ps(_mm_mul_ps(p, s1), s2);
}
#endif

C10_ALWAYS_INLINE Vectorized<float> fast_exp2(const Vectorized<float>& w) {
#if defined(CPU_CAPABILITY_AVX512)
  const __m512 wc = _mm512_min_ps(_mm512_set1_ps(129.0f), _mm512_max_ps(_mm512_set1_ps(-151.0f), w));
  const __m512 n = _mm512_roundscale_ps(wc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 p = exp2_fraction(Vectorized<float>(_mm512_sub_ps(wc, n)));
  return _mm512_scalef_ps(p, n);
#elif defined(CPU_CAPABILITY_AVX2)
  const __m256 wc = _mm256_min_ps(_mm256_set1_ps(129.0f), _mm256_max_ps(_mm256_set1_ps(-151.0f), w));
  const __m256 n = _mm256_round_ps(wc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 p = exp2_fraction(Vectorized<float>(_mm256_sub_ps(wc, n)));
  // n in [-151, 129] (a NaN w makes p NaN, whatever the factors): n1 = floor(n / 2), n2 = n - n1, both in
  // [-76, 65], so 2^n1 and 2^n2 are normal floats built in the exponent field.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
#elif defined(NPU_EXT_SSE2_LANES)
  return on_sse2_halves(w, [](Sse2F h) { return fast_exp2(h); });
#else
  // Portable (the DEFAULT variant off x86-64: NEON on aarch64, the generic at::vec arrays elsewhere): the same
  // polynomial and the same two exponent-field factors, written with plain arithmetic that the compiler
  // vectorizes, instead of at::vec's exp2, which maps to one libm call per lane when Sleef is not available to
  // an extension (as on aarch64). maximum/minimum propagate NaN; adding and subtracting 1.5 * 2^23 rounds to
  // the nearest integer (exact for |w| <= 2^22, and never folded without -ffast-math).
  using Vec = Vectorized<float>;
  constexpr int V = Vec::size();
  const Vec wc = at::vec::minimum(at::vec::maximum(w, Vec(-151.0f)), Vec(129.0f));
  const Vec shifter(12582912.0f);
  const Vec n = (wc + shifter) - shifter;
  const Vec p = exp2_fraction(wc - n);
  float nf[V], s1[V], s2[V];
  n.store(nf);
  for (int k = 0; k < V; ++k) {
    // n1 = floor(n / 2), n2 = n - n1 in [-76, 65] (a NaN lane makes p NaN; its factors are 1).
    const int32_t ni = nf[k] == nf[k] ? static_cast<int32_t>(nf[k]) : 0;
    const int32_t n1 = ni >> 1;
    const uint32_t b1 = static_cast<uint32_t>(n1 + 127) << 23;
    const uint32_t b2 = static_cast<uint32_t>(ni - n1 + 127) << 23;
    std::memcpy(&s1[k], &b1, sizeof(float));
    std::memcpy(&s2[k], &b2, sizeof(float));
  }
  return p * Vec::loadu(s1) * Vec::loadu(s2);
#endif
}

// normal_tail's scale: e carries a factor 2^kTailScaleExp and r its inverse, kTailScale = 2^-kTailScaleExp.
constexpr int kTailScaleExp = 32;
constexpr double kTailScale = 1.0 / static_cast<double>(int64_t{1} << kTailScaleExp);

// 2^(n + kTailScaleExp) as a float, from ws = n + 1.5 * 2^23 for an integer n in [-kTailScaleExp - 127, 0]: the
// low bits of ws's significand hold n in two's complement, and one shift puts n into the exponent field, where
// the bias is added; n = -kTailScaleExp - 127 leaves the field 0, which is +0.
C10_ALWAYS_INLINE Vectorized<float> tail_pow2(const Vectorized<float>& ws) {
  constexpr int32_t kBias = (127 + kTailScaleExp) << 23;
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_castsi512_ps(
      _mm512_add_epi32(_mm512_slli_epi32(_mm512_castps_si512(ws), 23), _mm512_set1_epi32(kBias)));
#elif defined(CPU_CAPABILITY_AVX2)
  return _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(ws), 23), _mm256_set1_epi32(kBias)));
#else
  constexpr int V = Vectorized<float>::size();
  float w[V], out[V];
  ws.store(w);
  for (int k = 0; k < V; ++k) {
    out[k] = c10::bit_cast<float>((c10::bit_cast<uint32_t>(w[k]) << 23) + static_cast<uint32_t>(kBias));
  }
  return Vectorized<float>::loadu(out);
#endif
}
#if defined(NPU_EXT_SSE2_LANES)
C10_ALWAYS_INLINE Sse2F tail_pow2(Sse2F ws) {
  constexpr int32_t kBias = (127 + kTailScaleExp) << 23;
  return _mm_castsi128_ps(_mm_add_epi32(_mm_slli_epi32(_mm_castps_si128(ws), 23), _mm_set1_epi32(kBias)));
}
#endif

#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
// normal_tail's exponential on AVX2 and AVX-512, in eighths: 2^w = 2^(n8 / 8) 2^(f8 / 8) with n8 = round(8w) and
// |f8| <= 1/2. 2^(n8 / 8) = 2^(n8 >> 3) 2^((n8 & 7) / 8) comes whole from the exponent field and an 8-entry table of
// significands, looked up with one lane permute (vpermd: only the index's low 3 bits count, so ws's own bits index
// it), and 2^(f8 / 8) needs a polynomial of degree 3 where the full-binade 2^f of exp2_fraction takes degree 5:
// two multiply-adds fewer. The portable variant has no lane permute and keeps exp2_fraction.
#define NPU_EXT_EXP2_EIGHTHS 1

// 2^(f8 / 8) for |f8| <= 1/2: 1 + f8 Q(f8), Q fitted by tools/fit_exp2.py --eighths (relative error 2.7e-8 with
// fp32 coefficients; --eighths --degree 1 for bf16 results: 3.5e-6).
template <bool kBf16 = false>
C10_ALWAYS_INLINE Vectorized<float> exp2_eighth_fraction(const Vectorized<float>& f8) {
  using Vec = Vectorized<float>;
  Vec p;
  if constexpr (kBf16) {
    p = at::vec::fmadd(Vec(3.7535971496254206e-3f), f8, Vec(8.66636410355568e-2f));
  } else {
    p = at::vec::fmadd(Vec(1.0839105380000547e-4f), f8, Vec(3.7540255580097437e-3f));
    p = at::vec::fmadd(p, f8, Vec(8.664340525865555e-2f));
  }
  return at::vec::fmadd(p, f8, Vec(1.0f));
}

// 2^(n8 / 8 + kTailScaleExp) as a float, from ws = n8 + 1.5 * 2^23 for an integer n8 in [-8 (kTailScaleExp + 127),
// 0]: ws's low 12 bits hold n8 in two's complement, a shift by 20 puts n8 >> 3 into the exponent field (and
// j = n8 & 7 above the significand's top bits), and the table entry for j adds the bias, the significand of
// 2^(j / 8) rounded to fp32 (relative error <= 3.2e-8) and takes j << 20 back out. n8 = -8 (kTailScaleExp + 127)
// leaves the field 0 and j = 0, which is +0; n8 >> 3 = -(kTailScaleExp + 127) with j > 0 gives a subnormal whose
// products in normal_tail underflow to 0 all the same.
C10_ALWAYS_INLINE Vectorized<float> tail_pow2_eighths(const Vectorized<float>& ws) {
  constexpr uint32_t kBias = uint32_t(127 + kTailScaleExp) << 23;
  // significands of 2^(j / 8), j = 0..7, rounded to fp32
  constexpr uint32_t kSig[8] = {0x000000u, 0x0b95c2u, 0x1837f0u, 0x25fed7u, 0x3504f3u, 0x45672au, 0x5744fdu, 0x6ac0c7u};
#define NPU_EXT_EIGHTH(j) static_cast<int32_t>(kBias + kSig[j] - (uint32_t(j) << 20))
#if defined(CPU_CAPABILITY_AVX512)
  const __m512i table = _mm512_setr_epi32(NPU_EXT_EIGHTH(0), NPU_EXT_EIGHTH(1), NPU_EXT_EIGHTH(2), NPU_EXT_EIGHTH(3),
                                          NPU_EXT_EIGHTH(4), NPU_EXT_EIGHTH(5), NPU_EXT_EIGHTH(6), NPU_EXT_EIGHTH(7),
                                          NPU_EXT_EIGHTH(0), NPU_EXT_EIGHTH(1), NPU_EXT_EIGHTH(2), NPU_EXT_EIGHTH(3),
                                          NPU_EXT_EIGHTH(4), NPU_EXT_EIGHTH(5), NPU_EXT_EIGHTH(6), NPU_EXT_EIGHTH(7));
  const __m512i wi = _mm512_castps_si512(ws);  // vpermd on zmm reads 4 index bits: the table is there twice
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(wi, 20), _mm512_permutexvar_epi32(wi, table)));
#else
  const __m256i table = _mm256_setr_epi32(NPU_EXT_EIGHTH(0), NPU_EXT_EIGHTH(1), NPU_EXT_EIGHTH(2), NPU_EXT_EIGHTH(3),
                                          NPU_EXT_EIGHTH(4), NPU_EXT_EIGHTH(5), NPU_EXT_EIGHTH(6), NPU_EXT_EIGHTH(7));
  const __m256i wi = _mm256_castps_si256(ws);
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(wi, 20), _mm256_permutevar8x32_epi32(table, wi)));
#endif
#undef NPU_EXT_EIGHTH
}
#endif

// The standard normal tail in fp32, as scaled factors: Phi(-|x|) = e * t * p with e = exp(-x^2/2) 2^32,
// t * p = erfcx(|x|/sqrt2) 2^-32 / 2 and t = 1 - s = K / (K + |x|), s = |x| / (K + |x|), K = 4 (no cancellation:
// gelu's cdf, forward and backward). kForward scales p by K as well, so that x Phi(-|x|) = -s * p * e for x < 0
// (|x| t = K s): two products, no third. A caller scales any other term it multiplies by e by 2^-32 as well. The
// scale keeps e a normal number wherever a product with it can be a nonzero fp32 number, so a single
// exponent-field factor builds it (tail_pow2, tail_pow2_eighths); for x^2 >= 220.5 (|x| >= 14.85,
// exp(-x^2/2) < 2^-159), where those products are under the smallest subnormal, e is 0.
// exp(-x^2/2) = 2^w, w = -x^2 log2(e) / 2 = n + f: n = round(w) by adding and removing 1.5 * 2^23 (exact for
// these w, never folded without -ffast-math), f = w - n with w unrounded (one fused multiply-add), 2^f from
// exp2_fraction (AVX2 and AVX-512: in eighths, see tail_pow2_eighths); x^2 is capped (NaN passes) so that
// n >= -159. p = 1/2 + s P7(s): s is one division and t one subtraction, P7 fitted by tools/fit_gelu_erfcx.py
// (relative minimax over |x| <= 14, which covers every x whose gelu or gelu gradient is a normal fp32 number):
// relative error 8.2e-8 with its fp32 coefficients. t = 1 - s carries s's rounding into t relatively amplified by
// s / t (3.5 at |x| = 14), where erfcx is a correction of 1/x^2 to the gradient's x / sqrt(2 pi) term; the
// forward, whose left tail is t * p itself, uses s alone. At x = 0, s = 0 and t = 1 exactly, so t * p * e = 1/2
// exactly. x = +-inf gives e = 0 and s = inf / inf = NaN: a caller that needs Phi there clamps x first. The
// same expression in every ISA variant but for the exponential's reduction. kBf16: for results rounded to bf16
// (8 significant bits), P of degree 5 and an exp2 polynomial one degree shorter (relative errors 3.3e-6 and
// 3.5e-6, 2.8e-6 in the portable variant, against bf16's half ulp of 2^-9 = 2e-3): three multiply-adds fewer, of
// the 20 or so that bound these kernels' speed. A result then rounds to the other neighbour of the exact value
// only within about 7e-6 of a midpoint (1 ulp); fp32 and fp16 keep the full polynomials.
template <bool kBf16 = false, bool kForward = false, typename Vec>
C10_ALWAYS_INLINE void normal_tail(const Vec& x, Vec& e, Vec& s, Vec& p) {
  constexpr float kScale = static_cast<float>(kTailScale) * (kForward ? 4.0f : 1.0f);  // (K 2^-32 or 2^-32)
  const Vec shifter(12582912.0f);
#if defined(NPU_EXT_EXP2_EIGHTHS)
  // in eighths (tail_pow2_eighths): 8w = x^2 * (-4 log2(e)), x^2 capped at 220.5 where round(8w) = -1272 = -8 * 159
  const Vec kMinus4Log2e(float(-4.0 * 1.4426950408889634));
  const Vec x_sq = vclamp_max(x * x, Vec(220.5f));
  const Vec ws = vfmadd(x_sq, kMinus4Log2e, shifter);
  e = exp2_eighth_fraction<kBf16>(vfmsub(x_sq, kMinus4Log2e, ws - shifter)) * tail_pow2_eighths(ws);
#else
  const Vec kMinusHalfLog2e(float(-0.5 * 1.4426950408889634));
  const Vec x_sq = vclamp_max(x * x, Vec(220.0f));
  const Vec ws = vfmadd(x_sq, kMinusHalfLog2e, shifter);
  e = exp2_fraction<kBf16>(vfmsub(x_sq, kMinusHalfLog2e, ws - shifter)) * tail_pow2(ws);
#endif
  const Vec ax = vabs(x);
  s = ax / (Vec(4.0f) + ax);  // K = 4 (tools/fit_gelu_erfcx.py)
  if constexpr (kBf16) {  // P of degree 5: 3.3e-6 (tools/fit_gelu_erfcx.py --degree 5)
    p = vfmadd(Vec(-0.07686958461999893f * kScale), s, Vec(0.176067516207695f * kScale));
    p = vfmadd(p, s, Vec(0.09268739074468613f * kScale));
    p = vfmadd(p, s, Vec(-0.8066293001174927f * kScale));
    p = vfmadd(p, s, Vec(1.309924840927124f * kScale));
    p = vfmadd(p, s, Vec(-1.0958493947982788f * kScale));
    p = vfmadd(p, s, Vec(0.5f * kScale));
  } else if constexpr (kSse2Lanes<Vec>) {
    // the same degree-8 polynomial in Estrin's form (see kSse2Lanes): 3 levels where Horner's form takes 8 steps
    const Vec s2 = s * s, s4 = s2 * s2;
    const Vec q0 = vfmadd(Vec(-1.0957660675048828f * kScale), s, Vec(0.5f * kScale));
    const Vec q1 = vfmadd(Vec(-0.7969099879264832f * kScale), s, Vec(1.3083596229553223f * kScale));
    const Vec q2 = vfmadd(Vec(0.19628939032554626f * kScale), s, Vec(0.06756842881441116f * kScale));
    const Vec q3 = vfmadd(Vec(-0.05397777259349823f * kScale), s, Vec(-0.05175934359431267f * kScale));
    const Vec upper = vfmadd(vfmadd(Vec(0.02599356323480606f * kScale), s2, q3), s2, q2);
    p = vfmadd(upper, s4, vfmadd(q1, s2, q0));
  } else {
    p = vfmadd(Vec(0.02599356323480606f * kScale), s, Vec(-0.05397777259349823f * kScale));
    p = vfmadd(p, s, Vec(-0.05175934359431267f * kScale));
    p = vfmadd(p, s, Vec(0.19628939032554626f * kScale));
    p = vfmadd(p, s, Vec(0.06756842881441116f * kScale));
    p = vfmadd(p, s, Vec(-0.7969099879264832f * kScale));
    p = vfmadd(p, s, Vec(1.3083596229553223f * kScale));
    p = vfmadd(p, s, Vec(-1.0957660675048828f * kScale));
    p = vfmadd(p, s, Vec(0.5f * kScale));
  }
}

// x's sign bit set ? a : b, lane-wise (-0.0 picks a; a NaN picks by its sign bit).
C10_ALWAYS_INLINE Vectorized<float> select_sign(const Vectorized<float>& x, const Vectorized<float>& a,
                                                const Vectorized<float>& b) {
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), b, a);
#elif defined(CPU_CAPABILITY_AVX2)
  return _mm256_blendv_ps(b, a, x);  // vblendvps selects by the mask's sign bits alone
#else
  constexpr int V = Vectorized<float>::size();
  float xv[V];
  int32_t m[V];
  x.store(xv);
  for (int k = 0; k < V; ++k) m[k] = c10::bit_cast<int32_t>(xv[k]) >> 31;  // arithmetic: all ones or zero
  return blend(b, a, Vectorized<float>::loadu(m));
#endif
}
#if defined(NPU_EXT_SSE2_LANES)
C10_ALWAYS_INLINE Sse2F select_sign(Sse2F x, Sse2F a, Sse2F b) {
  const __m128 m = _mm_castsi128_ps(_mm_srai_epi32(_mm_castps_si128(x), 31));  // all ones or zero
  return sse2_select(m, a, b);
}
#endif

// cond ? a : b with cond = (x < 0), lane-wise (NaN x: b).
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> select_negative(const Vectorized<T>& x, const Vectorized<T>& a, const Vectorized<T>& b) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), b, a);
  }
#endif
  return blend(b, a, mask_lt(x, Vectorized<T>(T(0))));
}

// 1 / x in float: the hardware estimate refined by one Newton step (about 1 ulp; x finite and nonzero, or
// inf/nan giving nan), instead of a full-precision division. Other types and variants divide.
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> fast_reciprocal(const Vectorized<T>& x) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 r = _mm512_rcp14_ps(x);
    return _mm512_mul_ps(r, _mm512_fnmadd_ps(x, r, _mm512_set1_ps(2.0f)));
  }
#elif defined(CPU_CAPABILITY_AVX2)
  if constexpr (std::is_same_v<T, float>) {
    const __m256 r = _mm256_rcp_ps(x);
    return _mm256_mul_ps(r, _mm256_fnmadd_ps(x, r, _mm256_set1_ps(2.0f)));
  }
#endif
  return Vectorized<T>(T(1)) / x;
}

// The first min(count, 8) bools at m as the bytes of an integer, zeros after them (count >= 0).
C10_ALWAYS_INLINE int64_t bool_bytes8(const bool* m, int64_t count) {
  int64_t bytes8 = 0;
  if (count >= 8) {
    std::memcpy(&bytes8, m, 8);
  } else if (count > 0) {
    std::memcpy(&bytes8, m, static_cast<size_t>(count));
  }
  return bytes8;
}

// A lane mask (all bits set where true) for Vec::blendv from `count` contiguous bools (count <= size()).
template <typename Vec>
C10_ALWAYS_INLINE Vec bool_mask(const bool* m, int64_t count) {
  using T = typename Vec::value_type;
  constexpr int64_t V = Vec::size();
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    const __mmask16 valid = count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
    const __m128i bytes = _mm_maskz_loadu_epi8(valid, m);
    const __mmask16 set = _mm_test_epi8_mask(bytes, bytes);
    return _mm512_castsi512_ps(_mm512_movm_epi32(set));
  }
#elif defined(CPU_CAPABILITY_AVX2)
  if constexpr (std::is_same_v<T, float>) {
    const __m256i wide = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bool_bytes8(m, count)));
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(wide, _mm256_setzero_si256()));
  }
#elif defined(NPU_EXT_SSE2_LANES)
  if constexpr (std::is_same_v<T, float>) {
    // bytes (0 or 1) -> all-ones where 1, widened 8 -> 16 -> 32 bits
    const __m128i set = _mm_cmpgt_epi8(_mm_cvtsi64_si128(bool_bytes8(m, count)), _mm_setzero_si128());
    const __m128i set16 = _mm_unpacklo_epi8(set, set);
    return from_sse2(_mm_castsi128_ps(_mm_unpacklo_epi16(set16, set16)),
                     _mm_castsi128_ps(_mm_unpackhi_epi16(set16, set16)));
  }
#endif
  if constexpr (kGenericLanes<T>) {
    using I = at::vec::int_same_size_t<T>;
    bool set[V] = {};
    if (count >= V) {
      std::memcpy(set, m, V);  // a fixed-size copy: one load, and a loop the compiler vectorizes
    } else {
      std::memcpy(set, m, static_cast<size_t>(std::max<int64_t>(count, 0)));
    }
    I lanes[V];
    for (int64_t k = 0; k < V; ++k) lanes[k] = -static_cast<I>(set[k]);
    return Vec::loadu(lanes);
  } else {
    T lanes[V];
    for (int64_t k = 0; k < V; ++k) lanes[k] = (k < count && m[k]) ? T(1) : T(0);
    return Vec::loadu(lanes) == Vec(T(1));
  }
}

// A row of n elements at stride `stride`: the row itself when it is dense, else a copy gathered into buf.
template <typename T>
inline const T* dense_row(const T* row, int64_t stride, int64_t n, T* buf) {
  if (stride == 1) return row;
  for (int64_t j = 0; j < n; ++j) buf[j] = row[j * stride];
  return buf;
}

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

// out = op(a) elementwise over a TensorIterator with one output and one input of dtype scalar_t (see
// binary_vec_kernel: contiguous runs in place, strided ones through a small buffer, the same vector op for
// every element whatever the thread split).
template <typename scalar_t, typename Op>
void unary_vec_kernel(at::TensorIteratorBase& iter, const Op& op) {
  using P = Pack<scalar_t>;
  constexpr int64_t K = P::kSize;
  constexpr int64_t S = sizeof(scalar_t);
  auto compute = [&op](const scalar_t* a, int64_t count) {
    const P pa = P::load_elementwise(a, count);
    P r;
    for (int k = 0; k < P::kVecs; ++k) r.v[k] = op(pa.v[k]);
    return r;
  };
  iter.for_each([&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
    for (int64_t i = 0; i < n1; ++i) {
      char* out = data[0] + i * strides[2];
      const char* a = data[1] + i * strides[3];
      if (strides[0] == S && strides[1] == S) {
        auto* o = reinterpret_cast<scalar_t*>(out);
        auto* pa = reinterpret_cast<const scalar_t*>(a);
        int64_t j0 = 0;
#if defined(NPU_EXT_SSE2_LANES)
        if constexpr (std::is_same_v<scalar_t, float> && kIsLaneOp<Op>) {  // see lane_op
          for (; j0 + 8 <= n0; j0 += 8) {
            const Sse2F r0 = op(Sse2F(_mm_loadu_ps(pa + j0))), r1 = op(Sse2F(_mm_loadu_ps(pa + j0 + 4)));
            _mm_storeu_ps(o + j0, r0);
            _mm_storeu_ps(o + j0 + 4, r1);
          }
        }
#endif
        store_loop_elementwise(o + j0, n0 - j0,
                               [&](int64_t j, int64_t count) { return compute(pa + j0 + j, count); });
      } else {
        scalar_t ba[K], bo[K];
        for (int64_t j = 0; j < n0; j += K) {
          const int64_t cnt = std::min<int64_t>(K, n0 - j);
          for (int64_t k = 0; k < cnt; ++k) std::memcpy(&ba[k], a + (j + k) * strides[1], S);
          compute(ba, cnt).store_elementwise(bo, cnt);
          for (int64_t k = 0; k < cnt; ++k) std::memcpy(out + (j + k) * strides[0], &bo[k], S);
        }
      }
    }
  });
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
  auto compute = [&op](const scalar_t* a, const scalar_t* b, int64_t count) {
    const P pa = P::load_elementwise(a, count), pb = P::load_elementwise(b, count);
    P r;
    for (int k = 0; k < P::kVecs; ++k) r.v[k] = op(pa.v[k], pb.v[k]);
    return r;
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
        int64_t j0 = 0;
#if defined(NPU_EXT_SSE2_LANES)
        if constexpr (std::is_same_v<scalar_t, float> && kIsLaneOp<Op>) {  // see lane_op
          for (; j0 + 8 <= n0; j0 += 8) {
            const Sse2F r0 = op(Sse2F(_mm_loadu_ps(pa + j0)), Sse2F(_mm_loadu_ps(pb + j0)));
            const Sse2F r1 = op(Sse2F(_mm_loadu_ps(pa + j0 + 4)), Sse2F(_mm_loadu_ps(pb + j0 + 4)));
            _mm_storeu_ps(o + j0, r0);
            _mm_storeu_ps(o + j0 + 4, r1);
          }
        }
#endif
        store_loop_elementwise(o + j0, n0 - j0,
                               [&](int64_t j, int64_t count) { return compute(pa + j0 + j, pb + j0 + j, count); });
      } else {
        scalar_t ba[K], bb[K], bo[K];
        for (int64_t j = 0; j < n0; j += K) {
          const int64_t cnt = std::min<int64_t>(K, n0 - j);
          for (int64_t k = 0; k < cnt; ++k) {
            std::memcpy(&ba[k], a + (j + k) * strides[1], S);
            std::memcpy(&bb[k], b + (j + k) * strides[2], S);
          }
          compute(ba, bb, cnt).store_elementwise(bo, cnt);
          for (int64_t k = 0; k < cnt; ++k) std::memcpy(out + (j + k) * strides[0], &bo[k], S);
        }
      }
    }
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
