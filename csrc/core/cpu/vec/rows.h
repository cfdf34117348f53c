// Rows and masks: bool masks as vector lanes, dense copies of strided rows, horizontal sums.
// Part of the kernels' vector helpers (core/cpu/vec.h): compiled once per ISA variant, everything in
// npu_ext::cpu::CPU_CAPABILITY.
#pragma once

#include "core/cpu/vec/math.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

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

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
