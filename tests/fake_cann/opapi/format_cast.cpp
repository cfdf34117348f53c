// TEST-ONLY aclnnNpuFormatCast of the fake libopapi.so: CANN's format cast between a base format and a private one,
// modelled on CANN 9.1.0's op_api (hicann/ops-math, tag v9.1.0,
// conversion/npu_format_cast/op_host/op_api/aclnn_npu_format_cast.cpp) for the layouts the fake knows (formats.h).
//
// Who calls it: torch_npu's npu_format_cast (Ascend/pytorch torch_npu/csrc/aten/common/FormatCastKernelNpu.cpp,
// MaybeUseAclnnNpuFormatCast, 2.13 and 2.14): on an Ascend950 always (IsAclnnOnly); on an Atlas A2 / A3 only when
// CANN is 9.1.0 or later (IsAclnnFormatCastSupported: IsGteCANNVersion("9.1.0", "CANN"), which reads
// aclsysGetCANNVersion: the fake runtime's $NPU_FAKE_CANN_VERSION), both entry points below resolve, the source is
// contiguous or in a base format, and aclnnNpuFormatCastCalculateSizeAndFormat accepts the pair (any status but 0:
// torch_npu falls back to its acl_op Identity). A non-contiguous tensor in a private format never reaches this
// operator: torch_npu falls back to acl_op for it on an A2 / A3 and raises on an Ascend950
// (format_cast_impl_out_npu_aclnn: "npu_format_cast aclnn interface does not support non-contiguous tensor with
// internal format ...").
//
// aclnnNpuFormatCastCalculateSizeAndFormat(src, dstFormat, additionalDtype, &dstShape, &dstShapeSize, &actualFormat):
//   the storage shape and format of the cast's result; *dstShape is new[]-allocated, the caller delete[]s it.
//   Refused: a SoC other than A2 / A3 / Ascend950, a null src or a dtype outside the operator's list 161002 (the
//   real CheckCalculateSizeAndFormatInputs' failures, all returned as ACLNN_ERR_PARAM_INVALID); an unsupported pair
//   361001 (ACLNN_ERR_RUNTIME_ERROR, "unsupported format transformation"). additionalDtype -1 means src's dtype.
//   Modelled pairs (the fake's private formats):
//     ND / NCL (any additionalDtype), NCHW / NCDHW (additionalDtype == src's dtype) -> FRACTAL_NZ (29):
//       (..., ceil(n / C0), ceil(m / 16), 16, C0), C0 = 32 bytes / size of additionalDtype, rank 2 or more (torch_npu
//       passes FLOAT16 for a 4-byte dtype: C0 16, as its acl_op route). On an Ascend950 (RegBase) also its checks
//       (nz_format_950) and formats: an additionalDtype other than src's gives FRACTAL_NZ_C0_16 (50) or _C0_32 (51)
//       (torch_npu 2.13 passes FLOAT16 for fp32 there: FRACTAL_NZ_C0_16);
//     FRACTAL_NZ (Ascend950: also 50, 51) -> ND: the logical shape;
//     NCHW -> NC1HWC0 (3): (N, ceil(C / C0), H, W, C0), C0 as above, rank 4; NC1HWC0 -> NCHW: the logical shape
//       (A2 / A3 only here: what CANN does with them on an Ascend950 is not modelled).
//   Other pairs CANN 9.1 supports (NDC1HWC0, FRACTAL_Z, FRACTAL_Z_3D, NHWC -> NC1HWC0, ...) are refused with
//   361001 here, as an unsupported pair would be (torch_npu then takes acl_op, which the fake cannot compute either).
// aclnnNpuFormatCastGetWorkspaceSize(src, dst, ...) / aclnnNpuFormatCast: the cast, phase 1 and 2. Refused with
//   161002: the SoC, a null tensor, a non-contiguous src or dst (CheckGetWorkSpaceSizeInputs: "srcTensor must be
//   contiguous."; opbase's IsContiguous is true for any tensor in a private format, so it bites a base-format one),
//   a dtype outside the A2 / A3 list, a pair outside the modelled ones (NZ pairs with ND, NCL, NCHW, NCDHW here:
//   torch_npu describes a 3-D base tensor as NCL, a 4-D one as NCHW), a private storage shape that is not the
//   format's for the view shape, different dtypes. (Real CANN 9.1 answers an unsupported pair on A2 / A3 with
//   status 0 and no executor, a bug the fake does not copy.) The result's logical elements are the source's, its
//   padding zero (TransData).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fake_opapi.h"
#include "formats.h"

namespace fake {
namespace {

constexpr int kRuntimeError = 361001;  // ACLNN_ERR_RUNTIME_ERROR
constexpr int32_t kNCHW = 0, kND = 2, kNCDHW = 30, kNCL = 47;
constexpr int32_t kNzC0_16 = 50, kNzC0_32 = 51;  // FRACTAL_NZ_C0_16 / _C0_32: Ascend950's NZ with a fixed C0

bool nz(int32_t format) { return format == kFormatFractalNz || format == kNzC0_16 || format == kNzC0_32; }
constexpr int32_t kI8 = 2, kU8 = 4, kU32 = 8;

// The dtypes of the operator's lists the fake can copy (ASCEND910B_DTYPE_SUPPORT_LIST: INT8, UINT8, FLOAT, FLOAT16,
// BF16, INT32, UINT32), by size.
int64_t cast_itemsize(int32_t dtype) {
  switch (dtype) {
    case kI8: case kU8: return 1;
    case F16: case BF16: return 2;
    case F32: case I32: case kU32: return 4;
    default: return 0;
  }
}

std::string shape_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The storage shape of `view` in `format` with this C0 (empty: not a layout the fake models for that view).
std::vector<int64_t> private_shape(int32_t format, const std::vector<int64_t>& view, int64_t c0) {
  if (nz(format) && view.size() >= 2) {
    std::vector<int64_t> s(view.begin(), view.end() - 2);
    const int64_t m = view[view.size() - 2], n = view.back();
    s.insert(s.end(), {ceil_div(n, c0), ceil_div(m, 16), 16, c0});
    return s;
  }
  if (format == kFormatNC1HWC0 && view.size() == 4) return {view[0], ceil_div(view[1], c0), view[2], view[3], c0};
  return {};
}

// The storage element of logical index `idx` in a private-format tensor of view `view` and storage shape `s`.
int64_t private_index(int32_t format, const std::vector<int64_t>& view, const std::vector<int64_t>& s,
                      const std::vector<int64_t>& idx) {
  if (nz(format)) {
    const size_t b = view.size() - 2;
    int64_t k = 0;
    for (size_t x = 0; x < b; ++x) k = k * view[x] + idx[x];
    const int64_t n1 = s[b], m1 = s[b + 1], c0 = s[b + 3];
    const int64_t row = idx[b], col = idx[b + 1];
    return (((k * n1 + col / c0) * m1 + row / 16) * 16 + row % 16) * c0 + col % c0;
  }
  const int64_t c1 = s[1], h = s[2], w = s[3], c0 = s[4];  // NC1HWC0
  return (((idx[0] * c1 + idx[1] / c0) * h + idx[2]) * w + idx[3]) * c0 + idx[1] % c0;
}

bool to_nz_source(int32_t format, bool same_dtype) {
  return format == kND || format == kNCL || (same_dtype && (format == kNCHW || format == kNCDHW));
}

// The base formats a cast to or from NZ pairs with in phase 1 (kTransdataForwardFormatPairs910B and its reverse;
// Ascend950: IsNz2Nd). torch_npu describes a 3-D ND tensor as NCL, a 4-D one as NCHW.
bool nz_partner(int32_t format) { return format == kND || format == kNCL || format == kNCHW || format == kNCDHW; }

struct FormatCastExec : Executor {
  const aclTensor* src;
  const aclTensor* dst;
  int run(void*) override {
    const int64_t item = cast_itemsize(src->dtype);
    const std::vector<int64_t>& view = src->sizes;
    const bool to_private = private_format(dst);
    const aclTensor* priv = to_private ? dst : src;
    const aclTensor* base = to_private ? src : dst;
    if (to_private) {  // padding: zero
      std::memset(static_cast<char*>(dst->data) + dst->offset * item, 0,
                  static_cast<size_t>(product(dst->storage_dims) * item));
    }
    for_each_index(view, [&](const std::vector<int64_t>& idx) {
      int64_t b = base->offset;
      for (size_t d = 0; d < idx.size(); ++d) b += idx[d] * base->strides[d];
      const int64_t p = priv->offset + private_index(priv->format, view, priv->storage_dims, idx);
      const int64_t from = to_private ? b : p, to = to_private ? p : b;
      std::memcpy(static_cast<char*>(dst->data) + to * item, static_cast<const char*>(src->data) + from * item,
                  static_cast<size_t>(item));
    });
    return kSuccess;
  }
};

// C0 of the cast to a private format: 32 bytes / the size of additionalDtype (CalcNdToNz, CalcNCHWToNC1HWC0).
int64_t c0_for(int additional_dtype) {
  const int64_t size = cast_itemsize(additional_dtype);
  return size == 0 ? 0 : 32 / size;
}

// Ascend950's checks of a cast to NZ (Check95NdToNzCalculateSizeAndFormatInputs) and its format (CalcNdToNz): with
// additionalDtype == src's dtype FRACTAL_NZ, rank 2 to 6 (and, for float types, the second-to-last dim not 1);
// otherwise (a weight-quant matmul's weight) rank 2 or 3, FRACTAL_NZ_C0_16 for a 2-byte additionalDtype,
// FRACTAL_NZ_C0_32 for int8. Returns the format, or -1 with the reason in `why`.
int nz_format_950(const aclTensor* src, int additional_dtype, std::string& why) {
  const size_t rank = src->sizes.size();
  for (int64_t d : src->sizes) {
    if (d == 0) { why = "srcTensor must not be empty tensor, each dimension must not be 0"; return -1; }
  }
  if (additional_dtype == src->dtype) {
    if (rank < 2 || rank > 6) { why = "the ViewShape dim of srcTensor must be between 2 and 6"; return -1; }
    if (is_float(src) && src->sizes[rank - 2] == 1) { why = "srcTensor's k dim must not be 1"; return -1; }
    return kFormatFractalNz;
  }
  if (src->dtype == F32 && additional_dtype != F16 && additional_dtype != BF16) {
    why = "additionalDtype must be float16 or bfloat16 (or float8_e4m3fn) when srcTensor is float32";
    return -1;
  }
  if (rank != 2 && rank != 3) { why = "the ViewShape dim of srcTensor must be 2 or 3"; return -1; }
  if (cast_itemsize(additional_dtype) == 2) return kNzC0_16;
  if (additional_dtype == kI8) return kNzC0_32;
  why = "additionalDtype " + std::to_string(additional_dtype) + " is not modelled by the fake";
  return -1;
}

}  // namespace
}  // namespace fake

using namespace fake;

extern "C" {

int aclnnNpuFormatCastCalculateSizeAndFormat(const aclTensor* src, const int dstFormat, int additionalDtype,
                                             int64_t** dstShape, uint64_t* dstShapeSize, int* actualFormat) {
  count("aclnnNpuFormatCastCalculateSizeAndFormat");
  if (!soc_a2_a3_950()) return reject(kInvalid, "aclnnNpuFormatCast: Only support Ascend950/ASCEND910_93/ASCEND910B");
  if (src == nullptr || dstShape == nullptr || dstShapeSize == nullptr || actualFormat == nullptr) {
    return reject(kInvalid, "aclnnNpuFormatCast: srcTensor is nullptr.");
  }
  if (cast_itemsize(src->dtype) == 0) {
    return reject(kInvalid, "aclnnNpuFormatCast: the dtype of srcTensor " + dtype_name(src->dtype) +
                                " is not supported.");
  }
  if (additionalDtype == -1) additionalDtype = src->dtype;
  const bool same = additionalDtype == src->dtype;
  std::vector<int64_t> shape;
  int format = -1;
  if (dstFormat == kFormatFractalNz && to_nz_source(src->format, same)) {
    const int64_t c0 = c0_for(additionalDtype);
    format = kFormatFractalNz;
    std::string why = "additionalDtype " + std::to_string(additionalDtype);
    if (soc_950()) format = nz_format_950(src, additionalDtype, why);
    if (c0 == 0 || src->sizes.size() < 2 || format < 0) {
      return reject(kInvalid, "aclnnNpuFormatCast: srcTensor of shape " + shape_str(src->sizes) + " cannot be cast "
                                  "to FRACTAL_NZ: " + why + ".");
    }
    shape = private_shape(format, src->sizes, c0);
  } else if ((soc_950() ? nz(src->format) : src->format == kFormatFractalNz) && dstFormat == kND) {
    shape = src->sizes;
    format = kND;
  } else if (src->format == kNCHW && dstFormat == kFormatNC1HWC0 && src->sizes.size() == 4 && !soc_950()) {
    const int64_t c0 = c0_for(additionalDtype);
    if (c0 == 0) return reject(kInvalid, "aclnnNpuFormatCast: additionalDtype " + std::to_string(additionalDtype));
    shape = private_shape(kFormatNC1HWC0, src->sizes, c0);
    format = kFormatNC1HWC0;
  } else if (src->format == kFormatNC1HWC0 && dstFormat == kNCHW && !soc_950()) {
    shape = src->sizes;
    format = kNCHW;
  } else {
    return reject(kRuntimeError, "aclnnNpuFormatCastCalculateSizeAndFormat unsupported format transformation (" +
                                     format_name(src->format) + " to " + format_name(dstFormat) + ")");
  }
  *dstShapeSize = shape.size();
  *dstShape = new int64_t[shape.size()];
  for (size_t i = 0; i < shape.size(); ++i) (*dstShape)[i] = shape[i];
  *actualFormat = format;
  return kSuccess;
}

int aclnnNpuFormatCastGetWorkspaceSize(const aclTensor* src, aclTensor* dst, uint64_t* workspaceSize,
                                       aclOpExecutor** executor) {
  count("aclnnNpuFormatCastGetWorkspaceSize");
  const std::string name = "aclnnNpuFormatCast";
  if (!soc_a2_a3_950()) return reject(kInvalid, name + ": Only support Ascend950/ASCEND910_93/ASCEND910B");
  if (src == nullptr || dst == nullptr || workspaceSize == nullptr || executor == nullptr) return kNullptr;
  // opbase's IsContiguous: a tensor in a private format counts as contiguous
  if (!private_format(src) && !contiguous(src)) {
    return reject(kInvalid, name + ": srcTensor " + shape_str(src->sizes) + " is non-contiguous (strides " +
                                shape_str(src->strides) + "): srcTensor must be contiguous.");
  }
  if (!private_format(dst) && !contiguous(dst)) {
    return reject(kInvalid, name + ": dstTensor " + shape_str(dst->sizes) + " is non-contiguous (strides " +
                                shape_str(dst->strides) + "): dstTensor must be contiguous.");
  }
  if (cast_itemsize(src->dtype) == 0 || cast_itemsize(dst->dtype) == 0 || src->dtype != dst->dtype) {
    return reject(kInvalid, name + ": srcTensor " + dtype_name(src->dtype) + ", dstTensor " + dtype_name(dst->dtype) +
                                ": the fake casts formats within one supported dtype.");
  }
  if (src->sizes != dst->sizes) {
    return reject(kInvalid, name + ": srcTensor " + shape_str(src->sizes) + ", dstTensor " + shape_str(dst->sizes) +
                                ": the view shapes differ.");
  }
  const bool to_nz = nz_partner(src->format) &&
                     (dst->format == kFormatFractalNz || (soc_950() && nz(dst->format)));
  const bool from_nz = (soc_950() ? nz(src->format) : src->format == kFormatFractalNz) && nz_partner(dst->format);
  const bool hd5 = !soc_950() && ((src->format == kNCHW && dst->format == kFormatNC1HWC0) ||
                                  (src->format == kFormatNC1HWC0 && dst->format == kNCHW));
  if (!to_nz && !from_nz && !hd5) {
    return reject(kInvalid, name + ": Unsupported format transformation from [" + format_name(src->format) +
                                "] to [" + format_name(dst->format) + "]");
  }
  const aclTensor* priv = private_format(dst) ? dst : src;
  const int64_t c0 = priv->storage_dims.empty() ? 0 : priv->storage_dims.back();
  const std::vector<int64_t> want = c0 > 0 ? private_shape(priv->format, priv->sizes, c0) : std::vector<int64_t>{};
  if (want.empty() || want != priv->storage_dims || (c0 != 8 && c0 != 16 && c0 != 32)) {
    return reject(kInvalid, name + ": " + (priv == dst ? "dstTensor" : "srcTensor") + " in " +
                                format_name(priv->format) + " of shape " + shape_str(priv->sizes) +
                                " has storage shape " + shape_str(priv->storage_dims) + ", not the format's.");
  }
  const aclTensor* base = priv == dst ? src : dst;
  if ((itemsize(base->dtype) != 0 && !valid(base)) || base->data == nullptr || priv->data == nullptr) {
    return reject(kInvalid, name + ": a tensor's view lies outside its storage.");
  }
  auto* e = new FormatCastExec;
  e->src = src;
  e->dst = dst;
  e->empty = numel(src) == 0;
  return finish_phase1(e, workspaceSize, executor, {src, dst});
}

int aclnnNpuFormatCast(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnNpuFormatCast", workspace, workspaceSize, executor);
}

}  // extern "C"
