// The lane types and traits every vector helper uses (kReduced, kGenericLanes, all_ones_if), at::vec's
// Vectorized, and the ISA headers of the variant (NPU_EXT_SSE2_LANES on x86-64's DEFAULT variant).
// Part of the kernels' vector helpers (core/cpu/vec.h): compiled once per ISA variant, everything in
// npu_ext::cpu::CPU_CAPABILITY.
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
// be chosen on (tests/ops/test_isa_portability.py checks that no AVX instruction gets in).
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

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
