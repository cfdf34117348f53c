// TEST-ONLY: CANN's aclDataType codes as ATen scalar types, for the parts of the fake libopapi.so that compute with
// ATen (aten.cpp, acl_op.cpp). One table.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>

namespace fake {

// The ATen type of an aclDataType code, or nullopt for a code the fake does not take.
inline std::optional<c10::ScalarType> aten_type(int32_t acl) {
  switch (acl) {
    case 0: return c10::kFloat;
    case 1: return c10::kHalf;
    case 2: return c10::kChar;
    case 3: return c10::kInt;
    case 4: return c10::kByte;
    case 6: return c10::kShort;
    case 9: return c10::kLong;
    case 11: return c10::kDouble;
    case 12: return c10::kBool;
    case 16: return c10::kComplexFloat;
    case 17: return c10::kComplexDouble;
    case 27: return c10::kBFloat16;
    default: return std::nullopt;
  }
}

}  // namespace fake
