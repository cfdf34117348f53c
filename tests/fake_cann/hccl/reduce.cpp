// The fake HCCL's reductions: out[i] = op(in_0[i], in_1[i], ..., in_{n-1}[i]), always in rank order, so every rank
// computes the same bits. Half and bfloat16 accumulate in float and round once; integers wrap in their own type.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "comm.h"

namespace fake_hccl {
namespace {

template <typename Acc>
Acc combine(Acc a, Acc b, int op) {
  switch (op) {
    case HCCL_REDUCE_SUM: return (Acc)(a + b);
    case HCCL_REDUCE_PROD: return (Acc)(a * b);
    case HCCL_REDUCE_MAX: return std::max(a, b);
    default: return std::min(a, b);
  }
}

// T: the element type in memory; Acc: the accumulation type; load/store convert.
template <typename T, typename Acc, typename Load, typename Store>
void reduce_typed(void* out, const void* const* in, int n, uint64_t count, int op, Load load, Store store) {
  T* o = static_cast<T*>(out);
  for (uint64_t i = 0; i < count; ++i) {
    Acc acc = load(static_cast<const T*>(in[0])[i]);
    for (int r = 1; r < n; ++r) acc = combine<Acc>(acc, load(static_cast<const T*>(in[r])[i]), op);
    o[i] = store(acc);
  }
}

template <typename T>
void reduce_plain(void* out, const void* const* in, int n, uint64_t count, int op) {
  // integers: combine in the unsigned type of the same width, so a sum or product wraps instead of overflowing
  // (undefined for signed types); max and min compare in T itself
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (op == HCCL_REDUCE_SUM || op == HCCL_REDUCE_PROD) {
      reduce_typed<T, U>(out, in, n, count, op, [](T v) { return (U)v; }, [](U v) { return (T)v; });
      return;
    }
  }
  reduce_typed<T, T>(out, in, n, count, op, [](T v) { return v; }, [](T v) { return v; });
}

}  // namespace

HcclResult reduce(void* out, const void* const* in, int n, uint64_t count, int32_t dt, int op) {
  if (op < HCCL_REDUCE_SUM || op > HCCL_REDUCE_MIN) return HCCL_E_PARA;
  switch (dt) {
    case DT_INT8: reduce_plain<int8_t>(out, in, n, count, op); break;
    case DT_INT16: reduce_plain<int16_t>(out, in, n, count, op); break;
    case DT_INT32: reduce_plain<int32_t>(out, in, n, count, op); break;
    case DT_INT64: reduce_plain<int64_t>(out, in, n, count, op); break;
    case DT_UINT8: reduce_plain<uint8_t>(out, in, n, count, op); break;
    case DT_UINT16: reduce_plain<uint16_t>(out, in, n, count, op); break;
    case DT_UINT32: reduce_plain<uint32_t>(out, in, n, count, op); break;
    case DT_UINT64: reduce_plain<uint64_t>(out, in, n, count, op); break;
    case DT_FP32: reduce_plain<float>(out, in, n, count, op); break;
    case DT_FP64: reduce_plain<double>(out, in, n, count, op); break;
    case DT_FP16:
      reduce_typed<uint16_t, float>(out, in, n, count, op, half_to_float, float_to_half);
      break;
    case DT_BF16:
      reduce_typed<uint16_t, float>(out, in, n, count, op, bf16_to_float, float_to_bf16);
      break;
    default: return HCCL_E_NOT_SUPPORT;
  }
  return HCCL_OK;
}

}  // namespace fake_hccl
