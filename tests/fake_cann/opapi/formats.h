// TEST-ONLY: the storage layouts of the private formats torch_npu can give a tensor, for the fake CANN (no ATen:
// the aarch64 stand-in compiles the operators that include it). A tensor in a private format keeps its logical
// (origin) shape for torch, while its memory holds the storage shape torch_npu computes for the format
// (torch_npu/csrc/framework/FormatHelper.cpp, InferShapeNDToNZ / InferShape4To5 / InferShapeLessTo4), padded
// with zeros (TransData):
//   FRACTAL_NZ (29): a logical (..., m, n) tensor (1-D: (n, 1); 0-D: (1, 1)) is stored as
//     (..., ceil(n / C0), ceil(m / 16), 16, C0), element (..., i, j) at [..., j / C0, i / 16, i % 16, j % C0];
//     C0 = 32 bytes / min(itemsize, 2): 16 for fp16, bf16 and fp32 (fp32 is laid out as fp16 would be), 32 for
//     int8;
//   NC1HWC0 (3): a logical NCHW tensor (fewer dims: 1-D (1, C, 1, 1), 2-D (1, C, H, 1), 3-D (1, C, H, W)) is stored
//     as (N, ceil(C / 16), H, W, 16), element (n, c, h, w) at [n, c / 16, h, w, c % 16].
// Every other format torch_npu gives a tensor is stored as its logical shape, row-major (ND, NCHW, NHWC, NCDHW,
// NCL, ...): a base format here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fake {

inline constexpr int32_t kFormatNC1HWC0 = 3;
inline constexpr int32_t kFormatFractalNz = 29;

// A format stored as its shape, row-major: NCHW NHWC ND HWCN NDHWC NCDHW NC NCL.
inline bool base_format(int32_t format) {
  switch (format) {
    case 0: case 1: case 2: case 16: case 27: case 30: case 35: case 47: return true;
    default: return false;
  }
}

// A private format the fake can read and write (FRACTAL_NZ, NC1HWC0).
inline bool known_private_format(int32_t format) { return format == kFormatFractalNz || format == kFormatNC1HWC0; }

inline std::string format_name(int32_t format) {
  switch (format) {
    case 0: return "NCHW";
    case 1: return "NHWC";
    case 2: return "ND";
    case kFormatNC1HWC0: return "NC1HWC0";
    case kFormatFractalNz: return "FRACTAL_NZ";
    case 30: return "NCDHW";
    case 47: return "NCL";
    default: return "format " + std::to_string(format);
  }
}

// The storage shape of a tensor of logical shape `dims` in `format` (the logical shape for a base format); empty
// when the fake does not know the format or the shape cannot have it (NC1HWC0 above 4 dims).
inline std::vector<int64_t> storage_shape(int32_t format, const std::vector<int64_t>& dims, int64_t itemsize) {
  if (base_format(format)) return dims;
  if (format == kFormatFractalNz) {
    std::vector<int64_t> d = dims;
    if (d.empty()) d.push_back(1);
    if (d.size() == 1) d.push_back(1);
    const int64_t c0 = 32 / (itemsize > 2 ? 2 : itemsize);
    std::vector<int64_t> s(d.begin(), d.end() - 2);
    const int64_t m = d[d.size() - 2], n = d.back();
    s.insert(s.end(), {(n + c0 - 1) / c0, (m + 15) / 16, 16, c0});
    return s;
  }
  if (format == kFormatNC1HWC0) {
    if (dims.size() > 4) return {};
    std::vector<int64_t> d(4, 1);  // InferShapeLessTo4: (1, C, H, W) for 1 to 3 dims
    if (dims.size() == 4) d = dims;
    for (size_t i = 0; i < dims.size() && dims.size() < 4; ++i) d[1 + i] = dims[i];
    return {d[0], (d[1] + 15) / 16, d[2], d[3], 16};
  }
  return {};
}

// The storage element (row-major index into the storage shape) of logical element `idx` of a tensor of logical
// shape `dims` in `format` (storage_shape(format, dims, itemsize) must be non-empty).
inline int64_t storage_index(int32_t format, const std::vector<int64_t>& dims, int64_t itemsize,
                             const std::vector<int64_t>& idx) {
  if (base_format(format)) {
    int64_t k = 0;
    for (size_t d = 0; d < dims.size(); ++d) k = k * dims[d] + idx[d];
    return k;
  }
  const std::vector<int64_t> s = storage_shape(format, dims, itemsize);
  if (format == kFormatFractalNz) {
    std::vector<int64_t> d = dims, i = idx;
    if (d.empty()) { d.push_back(1); i.push_back(0); }
    if (d.size() == 1) { d.push_back(1); i.push_back(0); }
    const size_t b = d.size() - 2;
    const int64_t c0 = s.back(), m1 = s[b + 1], n1 = s[b];
    int64_t k = 0;
    for (size_t x = 0; x < b; ++x) k = k * d[x] + i[x];
    const int64_t row = i[b], col = i[b + 1];
    return (((k * n1 + col / c0) * m1 + row / 16) * 16 + row % 16) * c0 + col % c0;
  }
  // NC1HWC0
  std::vector<int64_t> i(4, 0);
  if (dims.size() == 4) i = idx;
  for (size_t x = 0; x < idx.size() && dims.size() < 4; ++x) i[1 + x] = idx[x];
  const int64_t c1 = s[1], h = s[2], w = s[3];
  return (((i[0] * c1 + i[1] / 16) * h + i[2]) * w + i[3]) * 16 + i[1] % 16;
}

inline int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

}  // namespace fake
