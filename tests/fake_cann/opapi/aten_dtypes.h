// TEST-ONLY: CANN's aclDataType codes as ATen scalar types, for the parts of the fake libopapi.so that compute with
// ATen (aten.cpp, acl_op.cpp). One table.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>

namespace fake {

// The ATen type of an aclDataType code, or nullopt for a code the fake does not take.
inline std::optional<at::ScalarType> aten_type(int32_t acl) {
  switch (acl) {
    case 0: return at::kFloat;
    case 1: return at::kHalf;
    case 2: return at::kChar;
    case 3: return at::kInt;
    case 4: return at::kByte;
    case 6: return at::kShort;
    case 9: return at::kLong;
    case 11: return at::kDouble;
    case 12: return at::kBool;
    case 16: return at::kComplexFloat;
    case 17: return at::kComplexDouble;
    case 27: return at::kBFloat16;
    default: return std::nullopt;
  }
}

}  // namespace fake
