// The elementwise TensorIterator loops (unary_vec_kernel, binary_vec_kernel): contiguous runs in place,
// strided ones through a small buffer, the same vector code for every element whatever the thread split.
// Part of the kernels' vector helpers (core/cpu/vec.h): compiled once per ISA variant, everything in
// npu_ext::cpu::CPU_CAPABILITY.
#pragma once

#include "core/cpu/vec/rows.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

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
