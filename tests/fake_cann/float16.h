// fp16 / bf16 <-> fp32 with round to nearest even, for the fake CANN's libraries (opapi/fake_opapi.h, whose operator
// models compute in fp32, and hccl/fake_hccl.h, whose reductions add 16-bit values in fp32): no torch, no CANN.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fake {

inline float bits_to_float(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t float_to_half(float f) {
  const uint32_t b = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00u;
  if (a >= 65520.0f) return sign | 0x7c00u;  // rounds to infinity
  if (a < std::ldexp(1.0f, -14)) {  // subnormal half: multiple of 2^-24, nearbyint rounds to even
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  const uint32_t ab = float_to_bits(a);
  uint32_t exp = (ab >> 23) - 112, man = ab & 0x7fffffu;
  uint32_t h = (exp << 10) | (man >> 13);
  const uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent correctly
  return sign | static_cast<uint16_t>(h);
}

inline float bf16_to_float(uint16_t v) { return bits_to_float(static_cast<uint32_t>(v) << 16); }

inline uint16_t float_to_bf16(float f) {
  if (std::isnan(f)) return static_cast<uint16_t>((float_to_bits(f) >> 16) | 0x40u);
  const uint32_t b = float_to_bits(f);
  const uint32_t rounded = b + 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

}  // namespace fake
