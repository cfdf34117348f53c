// The fake CANN's HCCL (test-only): the types of CANN's hccl_types.h it needs, written out so that the library
// builds against any torch_npu release's headers, and the element arithmetic of its reductions.
#pragma once

#include <cstdint>
#include <cstring>

extern "C" {
typedef int32_t HcclResult;  // CANN's enum: 0 success, 1 parameter, 4 internal, 5 not supported, 9 timeout
typedef void* HcclComm;
typedef void* aclrtStream;
enum { HCCL_OK = 0, HCCL_E_PARA = 1, HCCL_E_PTR = 2, HCCL_E_INTERNAL = 4, HCCL_E_NOT_SUPPORT = 5,
       HCCL_E_SYSCALL = 8, HCCL_E_TIMEOUT = 9, HCCL_E_REMOTE = 21 };
enum { HCCL_REDUCE_SUM = 0, HCCL_REDUCE_PROD = 1, HCCL_REDUCE_MAX = 2, HCCL_REDUCE_MIN = 3 };
enum { DT_INT8 = 0, DT_INT16 = 1, DT_INT32 = 2, DT_FP16 = 3, DT_FP32 = 4, DT_INT64 = 5, DT_UINT64 = 6, DT_UINT8 = 7,
       DT_UINT16 = 8, DT_UINT32 = 9, DT_FP64 = 10, DT_BF16 = 11, DT_INT128 = 12, DT_HIF8 = 14, DT_FP8E4M3 = 15,
       DT_FP8E5M2 = 16, DT_FP8E8M0 = 17 };
constexpr uint32_t ROOT_INFO_BYTES = 4108;  // HCCL_ROOT_INFO_BYTES: torch_npu copies this many through its store
struct HcclSendRecvItem {  // HcclSendRecvItemDef
  int32_t sendRecvType;    // 0 send, 1 receive
  void* buf;
  uint64_t count;
  int32_t dataType;
  uint32_t remoteRank;
};
}

namespace fake_hccl {

// The size of one element of `dt` in bytes; 0 for a type the fake does not know.
inline size_t element_size(int32_t dt) {
  switch (dt) {
    case DT_INT8: case DT_UINT8: case DT_HIF8: case DT_FP8E4M3: case DT_FP8E5M2: case DT_FP8E8M0: return 1;
    case DT_INT16: case DT_UINT16: case DT_FP16: case DT_BF16: return 2;
    case DT_INT32: case DT_UINT32: case DT_FP32: return 4;
    case DT_INT64: case DT_UINT64: case DT_FP64: return 8;
    case DT_INT128: return 16;
    default: return 0;
  }
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; man <<= 1; } while (!(man & 0x400));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0);  // inf / nan
  if (absx >= 0x477ff000u) return sign | 0x7c00u;                                     // overflows to inf
  if (absx < 0x38800000u) {  // a subnormal half (or zero): scale and round by the float unit
    float a;
    std::memcpy(&a, &absx, 4);
    float scaled = a * 16777216.0f;  // 2^24: one half subnormal step becomes 1
    uint32_t r = (uint32_t)scaled;
    float frac = scaled - (float)r;
    if (frac > 0.5f || (frac == 0.5f && (r & 1))) ++r;
    return sign | r;
  }
  uint32_t mant = absx & 0x7fffff, exp = (absx >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry into the exponent is the right result
  return sign | h;
}

inline float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

}  // namespace fake_hccl
