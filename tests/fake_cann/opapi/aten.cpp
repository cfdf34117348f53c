// TEST-ONLY aclnn operators that torch_npu's ATen kernels call on npu tensors (copies, casts, fills, arithmetic,
// reductions, softmax, ...), part of the fake libopapi.so. Each wraps its host buffers as CPU tensors through
// their descriptors (storage base + offset, view sizes and strides, dtype) and runs the CPU ATen op, so nothing
// re-enters the npu dispatch. Outputs are written through their views (the real generic operators make inputs
// contiguous and ViewCopy the result into the output).
//
// Where a source audit says the real kernel computes something else than PyTorch, the model computes what the
// kernel computes (the forward audit, docs/npu.md "The forward ops on the NPU"):
//   * aclnnGelu is the tanh form, whatever the caller meant (F1: torch_npu 2.13 sends aten::gelu there on an
//     Atlas A2/A3, `approximate` ignored);
// The operators the NPU path itself calls for the forward ops (aclnnGeluV2, aclnnPrelu, aclnnLogit,
// aclnnScaledMaskedSoftmax, ...) and their backward ones are modelled without ATen, one file per family in ops/.
// An operator that is not defined here is missing from the fake libopapi.so. torch_npu raises a RuntimeError naming
// it where op-plugin calls it directly, and on an aclnn-only SoC (Ascend950) always; but most ATen ops go through
// op-plugin's DO_COMPATIBILITY, which on an Atlas A2/A3 takes the acl_op (TBE) route instead, and the fake runtime
// fails that (ACL_ERROR_OP_NOT_FOUND, counted as "acl_op <type>"), naming the TBE op rather than the aclnn one. Run a
// new test once with NPU_FAKE_SOC=Ascend950PR_9599 to have every aclnn operator it needs named.
#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <limits>
#include <functional>
#include <string>

#include "aten_ops.h"

namespace fake {
namespace {

// op-plugin's index list for aclnnIndex and aclnnIndexPutImpl: a dimension without an index comes as an empty
// tensor of self's (floating) dtype, an index as an integer or bool tensor.
c10::List<c10::optional<at::Tensor>> index_list(const aclTensorList* list) {
  c10::List<c10::optional<at::Tensor>> out;
  for (const aclTensor* t : list->tensors) {
    const at::Tensor i = T(t);
    out.push_back(at::isFloatingType(i.scalar_type()) && i.numel() == 0 ? c10::optional<at::Tensor>() : i);
  }
  return out;
}

// native_layer_norm(_backward) on the CPU in fp32 for 16-bit inputs: op-plugin passes mean and rstd in fp32 (the
// CPU kernel would want them in the input's dtype when weight has it); they are written in their descriptors'
// shapes (the input's leading dims followed by 1s).
at::Tensor F32(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16) ? t.to(at::kFloat) : t;
}

void layer_norm(const aclTensor* input, const aclIntArray* shape, const aclTensor* weight, const aclTensor* bias,
                double eps, const aclTensor* out, const aclTensor* mean, const aclTensor* rstd) {
  auto r = at::native_layer_norm(F32(T(input)), A(shape), F32(T(weight, true)), F32(T(bias, true)), eps);
  W(out, std::get<0>(r));
  if (mean != nullptr) W(mean, std::get<1>(r).reshape(T(mean).sizes()));
  if (rstd != nullptr) W(rstd, std::get<2>(r).reshape(T(rstd).sizes()));
}

void layer_norm_backward(const aclTensor* grad, const aclTensor* input, const aclIntArray* shape, const aclTensor* mean,
                         const aclTensor* rstd, const aclTensor* weight, const aclTensor* bias, const aclBoolArray* mask,
                         const aclTensor* grad_input, const aclTensor* grad_weight, const aclTensor* grad_bias) {
  const std::array<bool, 3> m = {mask->values[0], mask->values[1], mask->values[2]};
  auto r = at::native_layer_norm_backward(F32(T(grad)), F32(T(input)), A(shape), F32(T(mean)), F32(T(rstd)),
                                          F32(T(weight, true)), F32(T(bias, true)), m);
  if (m[0]) W(grad_input, std::get<0>(r));
  if (m[1]) W(grad_weight, std::get<1>(r));
  if (m[2]) W(grad_bias, std::get<2>(r));
}

// aclnnNonzero (out [N, D]) and aclnnNonzeroV2 (out [D, N], the transposed layout op-plugin's boolean-mask indexing
// asks for): a data-dependent output shape. op-plugin allocates out at the most it can be ([numel, D] or [D, numel],
// contiguous), launches synchronously and reads the true shape back with aclGetViewShape (nnopbase.cpp); the kernel
// writes the coordinates compactly in that shape. torch_npu takes these for aten::nonzero and for a boolean-mask
// index or index_put_ (Megatron's cross entropy). As the real op_api (ops-nn index/non_zero/op_api/aclnn_nonzero.cpp,
// aclnn_nonzero_v2.cpp; an Atlas A2): phase 1 checks the dtypes (self from the A2 list, out int64), the ranks (8 at
// most) and that no dimension passes int32; an empty self or out launches nothing and leaves out's shape as it came.
int nonzero_phase1(const char* api, bool transpose, const aclTensor* self, aclTensor* out, uint64_t* workspaceSize,
                   aclOpExecutor** executor) {
  const std::string name(api);
  if (self == nullptr || out == nullptr) {
    count(name + "GetWorkspaceSize");
    return reject(kNullptr, name + ": self or out is a null pointer.");
  }
  // the A2 list (V2 also takes the unsigned 16-64 bit types, which torch_npu does not make)
  static constexpr std::array<int32_t, 10> kSelf = {DType::F32, F16, 2 /* int8 */, I32, 4 /* uint8 */,
                                                    6 /* int16 */, I64, F64, BOOL, BF16};
  const bool dims_ok = std::all_of(self->sizes.begin(), self->sizes.end(),
                                   [](int64_t d) { return d <= std::numeric_limits<int32_t>::max(); });
  if (std::find(kSelf.begin(), kSelf.end(), self->dtype) == kSelf.end() || out->dtype != I64 ||
      static_cast<int64_t>(self->sizes.size()) > kMaxDims || static_cast<int64_t>(out->sizes.size()) > kMaxDims ||
      !dims_ok) {
    count(name + "GetWorkspaceSize");
    return reject(kInvalid, name + ": self's dtype or shape is not supported, or out is not int64 of rank 8 at most.");
  }
  if (numel(self) == 0 || numel(out) == 0) return queue(api, [] {}, workspaceSize, executor);
  return queue(api, [=]() {
    const at::Tensor idx = at::nonzero(T(self));  // [N, D], row-major order
    const at::Tensor y = transpose ? idx.t() : idx;
    out->sizes = {y.size(0), y.size(1)};
    out->strides = {y.size(1), 1};
    W(out, y);
  }, workspaceSize, executor);
}

// aclnnMaskedSelect (self, mask, out): a data-dependent output shape, as aclnnNonzero. op-plugin
// (op_plugin/ops/opapi/MaskedSelectKernelNpuOpApi.cpp) allocates out contiguous at the broadcast numel of self and
// mask, launches synchronously and resizes out to the shape read back with aclGetViewShape; the kernel writes the
// selected elements (self and mask broadcast, row-major order) compactly and sets out's view shape to [count].
// torch_npu takes it for aten::masked_select, which printing an npu tensor reaches (its float formatter).
int masked_select_phase1(const aclTensor* self, const aclTensor* mask, aclTensor* out, uint64_t* workspaceSize,
                         aclOpExecutor** executor) {
  if (self == nullptr || mask == nullptr || out == nullptr) {
    count("aclnnMaskedSelectGetWorkspaceSize");
    return reject(kNullptr, "aclnnMaskedSelect: self, mask or out is a null pointer.");
  }
  if ((mask->dtype != BOOL && mask->dtype != 4 /* uint8 */) || out->dtype != self->dtype) {
    count("aclnnMaskedSelectGetWorkspaceSize");
    return reject(kInvalid, "aclnnMaskedSelect: mask must be bool or uint8 and out of self's dtype.");
  }
  return queue("aclnnMaskedSelect", [=]() {
    const at::Tensor y = at::masked_select(T(self), T(mask));
    if (y.numel() > numel(out)) throw std::runtime_error("out holds fewer elements than selected");
    out->sizes = {y.numel()};
    out->strides = {1};
    W(out, y);
  }, workspaceSize, executor);
}

}  // namespace
}  // namespace fake

using namespace fake;

extern "C" {

// copies, casts, fills
FAKE_OP(InplaceCopy, (aclTensor* self, const aclTensor* src, WS), W(self, T(src)))
FAKE_OP(Cast, (const aclTensor* self, int32_t dtype, aclTensor* out, WS), W(out, T(self).to(scalar_type(dtype))))
FAKE_OP(InplaceZero, (aclTensor* self, WS), T(self).zero_())
FAKE_OP(InplaceOne, (aclTensor* self, WS), T(self).fill_(1))
FAKE_OP(InplaceFillScalar, (aclTensor* self, const aclScalar* value, WS), T(self).fill_(S(value)))
FAKE_OP(InplaceFillTensor, (aclTensor* self, const aclTensor* value, WS), T(self).fill_(T(value)))
FAKE_OP(InplaceMaskedFillScalar, (aclTensor* self, const aclTensor* mask, const aclScalar* value, WS),
        T(self).masked_fill_(T(mask), S(value)))
FAKE_OP(InplaceMaskedFillTensor, (aclTensor* self, const aclTensor* mask, const aclTensor* value, WS),
        T(self).masked_fill_(T(mask), T(value)))
FAKE_OP(Arange, (const aclScalar* start, const aclScalar* end, const aclScalar* step, aclTensor* out, WS),
        W(out, at::arange(S(start), S(end), S(step), T(out).options())))

// arithmetic
FAKE_OP(Add, (const aclTensor* self, const aclTensor* other, const aclScalar* alpha, aclTensor* out, WS),
        W(out, at::add(T(self), T(other), S(alpha))))
FAKE_OP(Adds, (const aclTensor* self, const aclScalar* other, const aclScalar* alpha, aclTensor* out, WS),
        W(out, at::add(T(self), S(other), S(alpha))))
FAKE_OP(InplaceAdd, (aclTensor* self, const aclTensor* other, const aclScalar* alpha, WS),
        T(self).add_(T(other), S(alpha)))
FAKE_OP(InplaceAdds, (aclTensor* self, const aclScalar* other, const aclScalar* alpha, WS),
        T(self).add_(S(other), S(alpha)))
FAKE_OP(Sub, (const aclTensor* self, const aclTensor* other, const aclScalar* alpha, aclTensor* out, WS),
        W(out, at::sub(T(self), T(other), S(alpha))))
FAKE_OP(Subs, (const aclTensor* self, const aclScalar* other, const aclScalar* alpha, aclTensor* out, WS),
        W(out, at::sub(T(self), S(other), S(alpha))))
FAKE_OP(InplaceSub, (aclTensor* self, const aclTensor* other, const aclScalar* alpha, WS),
        T(self).sub_(T(other), S(alpha)))
FAKE_OP(InplaceSubs, (aclTensor* self, const aclScalar* other, const aclScalar* alpha, WS),
        T(self).sub_(S(other), S(alpha)))
FAKE_OP(Rsub, (const aclTensor* self, const aclTensor* other, const aclScalar* alpha, aclTensor* out, WS),
        W(out, at::rsub(T(self), T(other), S(alpha))))
FAKE_OP(Rsubs, (const aclTensor* self, const aclScalar* other, const aclScalar* alpha, aclTensor* out, WS),
        W(out, at::rsub(T(self), S(other), S(alpha))))
FAKE_OP(Mul, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::mul(T(self), T(other))))
FAKE_OP(Muls, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::mul(T(self), S(other))))
FAKE_OP(InplaceMul, (aclTensor* self, const aclTensor* other, WS), T(self).mul_(T(other)))
FAKE_OP(InplaceMuls, (aclTensor* self, const aclScalar* other, WS), T(self).mul_(S(other)))
FAKE_OP(Div, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::div(T(self), T(other))))
FAKE_OP(Divs, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::div(T(self), S(other))))
FAKE_OP(InplaceDiv, (aclTensor* self, const aclTensor* other, WS), T(self).div_(T(other)))
FAKE_OP(InplaceDivs, (aclTensor* self, const aclScalar* other, WS), T(self).div_(S(other)))
FAKE_OP(Lerps, (const aclTensor* self, const aclTensor* end, const aclScalar* weight, aclTensor* out, WS),
        W(out, at::lerp(T(self), T(end), S(weight))))
FAKE_OP(InplaceLerps, (aclTensor* self, const aclTensor* end, const aclScalar* weight, WS),
        T(self).lerp_(T(end), S(weight)))
FAKE_OP(Lerp, (const aclTensor* self, const aclTensor* end, const aclTensor* weight, aclTensor* out, WS),
        W(out, at::lerp(T(self), T(end), T(weight))))
FAKE_OP(InplaceLerp, (aclTensor* self, const aclTensor* end, const aclTensor* weight, WS),
        T(self).lerp_(T(end), T(weight)))
FAKE_OP(Addcmul, (const aclTensor* self, const aclTensor* t1, const aclTensor* t2, const aclScalar* value,
                  aclTensor* out, WS), W(out, at::addcmul(T(self), T(t1), T(t2), S(value))))
FAKE_OP(InplaceAddcmul, (aclTensor* self, const aclTensor* t1, const aclTensor* t2, const aclScalar* value, WS),
        T(self).addcmul_(T(t1), T(t2), S(value)))
FAKE_OP(Addcdiv, (const aclTensor* self, const aclTensor* t1, const aclTensor* t2, const aclScalar* value,
                  aclTensor* out, WS), W(out, at::addcdiv(T(self), T(t1), T(t2), S(value))))
FAKE_OP(InplaceAddcdiv, (aclTensor* self, const aclTensor* t1, const aclTensor* t2, const aclScalar* value, WS),
        T(self).addcdiv_(T(t1), T(t2), S(value)))
FAKE_OP(Neg, (const aclTensor* self, aclTensor* out, WS), W(out, at::neg(T(self))))
FAKE_OP(Abs, (const aclTensor* self, aclTensor* out, WS), W(out, at::abs(T(self))))
FAKE_OP(Exp, (const aclTensor* self, aclTensor* out, WS), W(out, at::exp(T(self))))
FAKE_OP(Log, (const aclTensor* self, aclTensor* out, WS), W(out, at::log(T(self))))
FAKE_OP(Sqrt, (const aclTensor* self, aclTensor* out, WS), W(out, at::sqrt(T(self))))
FAKE_OP(Rsqrt, (const aclTensor* self, aclTensor* out, WS), W(out, at::rsqrt(T(self))))
FAKE_OP(Tanh, (const aclTensor* self, aclTensor* out, WS), W(out, at::tanh(T(self))))
FAKE_OP(Ceil, (const aclTensor* self, aclTensor* out, WS), W(out, at::ceil(T(self))))
FAKE_OP(Floor, (const aclTensor* self, aclTensor* out, WS), W(out, at::floor(T(self))))
FAKE_OP(Erf, (const aclTensor* self, aclTensor* out, WS), W(out, at::erf(T(self))))
FAKE_OP(Erfc, (const aclTensor* self, aclTensor* out, WS), W(out, at::erfc(T(self))))
FAKE_OP(Sigmoid, (const aclTensor* self, aclTensor* out, WS), W(out, at::sigmoid(T(self))))
FAKE_OP(PowTensorScalar, (const aclTensor* self, const aclScalar* exponent, aclTensor* out, WS),
        W(out, at::pow(T(self), S(exponent))))
FAKE_OP(IsFinite, (const aclTensor* self, aclTensor* out, WS), W(out, at::isfinite(T(self))))
FAKE_OP(EqScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::eq(T(self), S(other))))
FAKE_OP(NeScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::ne(T(self), S(other))))
FAKE_OP(EqTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::eq(T(self), T(other))))
FAKE_OP(NeTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::ne(T(self), T(other))))
FAKE_OP(LtScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::lt(T(self), S(other))))
FAKE_OP(LeScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::le(T(self), S(other))))
FAKE_OP(GtScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::gt(T(self), S(other))))
FAKE_OP(GeScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::ge(T(self), S(other))))
FAKE_OP(LtTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::lt(T(self), T(other))))
FAKE_OP(LeTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::le(T(self), T(other))))
FAKE_OP(GtTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::gt(T(self), T(other))))
FAKE_OP(GeTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::ge(T(self), T(other))))
FAKE_OP(LogicalOr, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS),
        W(out, at::logical_or(T(self), T(other))))
FAKE_OP(BitwiseOrScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS),
        W(out, at::bitwise_or(T(self), S(other))))
FAKE_OP(BitwiseOrTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS),
        W(out, at::bitwise_or(T(self), T(other))))
FAKE_OP(LogicalAnd, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS),
        W(out, at::logical_and(T(self), T(other))))
FAKE_OP(InplaceLogicalAnd, (aclTensor* self, const aclTensor* other, WS), T(self).logical_and_(T(other)))
FAKE_OP(LogicalNot, (const aclTensor* self, aclTensor* out, WS), W(out, at::logical_not(T(self))))
FAKE_OP(BitwiseAndScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS),
        W(out, at::bitwise_and(T(self), S(other))))
FAKE_OP(BitwiseAndTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS),
        W(out, at::bitwise_and(T(self), T(other))))
FAKE_OP(SWhere, (const aclTensor* cond, const aclTensor* self, const aclTensor* other, aclTensor* out, WS),
        W(out, at::where(T(cond), T(self), T(other))))

// matrix products (cubeMathType: op-plugin's int8 precision mode; the CPU op computes in the dtype's own way)
FAKE_OP(Mm, (const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cubeMathType, WS),
        W(out, at::mm(T(self), T(mat2))))
FAKE_OP(Matmul, (const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cubeMathType, WS),
        W(out, at::matmul(T(self), T(mat2))))
FAKE_OP(BatchMatMul, (const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cubeMathType, WS),
        W(out, at::matmul(T(self), T(mat2))))
FAKE_OP(Addmm, (const aclTensor* self, const aclTensor* mat1, const aclTensor* mat2, const aclScalar* beta,
                const aclScalar* alpha, aclTensor* out, int8_t cubeMathType, WS),
        W(out, at::addmm(T(self), T(mat1), T(mat2), S(beta), S(alpha))))
FAKE_OP(Baddbmm, (const aclTensor* self, const aclTensor* batch1, const aclTensor* batch2, const aclScalar* beta,
                  const aclScalar* alpha, aclTensor* out, int8_t cubeMathType, WS),
        W(out, at::baddbmm(T(self), T(batch1), T(batch2), S(beta), S(alpha))))

// reductions and indexing
FAKE_OP(All, (const aclTensor* self, const aclIntArray* dim, bool keepdim, aclTensor* out, WS),
        W(out, at::all(T(self), A(dim), keepdim)))
FAKE_OP(Any, (const aclTensor* self, const aclIntArray* dim, bool keepdim, aclTensor* out, WS),
        W(out, at::any(T(self), A(dim), keepdim)))
FAKE_OP(ReduceSum, (const aclTensor* self, const aclIntArray* dim, bool keepdim, int32_t dtype, aclTensor* out, WS),
        W(out, at::sum(T(self), A(dim), keepdim, scalar_type(dtype))))
// the backward of repeat_interleave with a repeats tensor: each input row the sum of its repeats' rows (summed in
// fp32 for 16-bit, rounded once; the kernel's accumulation is unaudited)
FAKE_OP(RepeatInterleaveGrad, (const aclTensor* yGrad, const aclTensor* repeats, int64_t axis, aclTensor* out, WS), {
  const at::Tensor g = T(yGrad), r = T(repeats).to(at::kLong);
  const at::Tensor g32 = at::isReducedFloatingType(g.scalar_type()) ? g.to(at::kFloat) : g;
  const at::Tensor idx = at::repeat_interleave(r);  // the input row of every row of yGrad
  W(out, at::zeros(T(out).sizes(), g32.options()).index_add_(axis, idx, g32));
})
FAKE_OP(Mean, (const aclTensor* self, const aclIntArray* dim, bool keepdim, int32_t dtype, aclTensor* out, WS),
        W(out, at::mean(T(self), A(dim), keepdim, scalar_type(dtype))))
FAKE_OP(Max, (const aclTensor* self, aclTensor* out, WS), W(out, at::max(T(self))))
FAKE_OP(Min, (const aclTensor* self, aclTensor* out, WS), W(out, at::min(T(self))))
FAKE_OP(MaxDim, (const aclTensor* self, int64_t dim, bool keepdim, aclTensor* out, aclTensor* indices, WS), {
  auto r = at::max(T(self), dim, keepdim);
  W(out, std::get<0>(r));
  W(indices, std::get<1>(r));
})
FAKE_OP(IndexSelect, (const aclTensor* self, int64_t dim, const aclTensor* index, aclTensor* out, WS),
        W(out, at::index_select(T(self), dim, T(index))))
FAKE_OP(Index, (const aclTensor* self, const aclTensorList* indices, aclTensor* out, WS),
        W(out, at::index(T(self), index_list(indices))))
FAKE_OP(IndexPutImpl, (aclTensor* self, const aclTensorList* indices, const aclTensor* values, bool accumulate,
                       bool unsafe, WS), T(self).index_put_(index_list(indices), T(values), accumulate))
int aclnnNonzeroGetWorkspaceSize(const aclTensor* self, aclTensor* out, WS) {
  return fake::nonzero_phase1("aclnnNonzero", false, self, out, workspaceSize, executor);
}
int aclnnNonzero(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnNonzero", workspace, workspaceSize, executor);
}
int aclnnNonzeroV2GetWorkspaceSize(const aclTensor* self, aclTensor* out, WS) {
  return fake::nonzero_phase1("aclnnNonzeroV2", true, self, out, workspaceSize, executor);
}
int aclnnNonzeroV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnNonzeroV2", workspace, workspaceSize, executor);
}

int aclnnMaskedSelectGetWorkspaceSize(const aclTensor* self, const aclTensor* mask, aclTensor* out, WS) {
  return fake::masked_select_phase1(self, mask, out, workspaceSize, executor);
}
int aclnnMaskedSelect(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnMaskedSelect", workspace, workspaceSize, executor);
}

FAKE_OP(Cat, (const aclTensorList* tensors, int64_t dim, aclTensor* out, WS),
        W(out, at::cat(tensor_list(tensors), dim)))
FAKE_OP(Stack, (const aclTensorList* tensors, int64_t dim, aclTensor* out, WS),
        W(out, at::stack(tensor_list(tensors), dim)))
FAKE_OP(Triu, (const aclTensor* self, int64_t diagonal, aclTensor* out, WS), W(out, at::triu(T(self), diagonal)))
FAKE_OP(Tril, (const aclTensor* self, int64_t diagonal, aclTensor* out, WS), W(out, at::tril(T(self), diagonal)))
FAKE_OP(InplaceTriu, (aclTensor* self, int64_t diagonal, WS), T(self).triu_(diagonal))

// embedding and normalization
FAKE_OP(Embedding, (const aclTensor* weight, const aclTensor* indices, aclTensor* out, WS),
        W(out, at::embedding(T(weight), T(indices))))
FAKE_OP(EmbeddingDenseBackward, (const aclTensor* grad, const aclTensor* indices, int64_t numWeights,
                                 int64_t paddingIdx, bool scaleGradByFreq, aclTensor* out, WS),
        W(out, at::embedding_dense_backward(T(grad), T(indices), numWeights, paddingIdx, scaleGradByFreq)))
FAKE_OP(LayerNorm, (const aclTensor* input, const aclIntArray* normalizedShape, const aclTensor* weight,
                    const aclTensor* bias, double eps, aclTensor* out, aclTensor* mean, aclTensor* rstd, WS),
        layer_norm(input, normalizedShape, weight, bias, eps, out, mean, rstd))
FAKE_OP(FastLayerNorm, (const aclTensor* input, const aclIntArray* normalizedShape, const aclTensor* weight,
                        const aclTensor* bias, double eps, aclTensor* out, aclTensor* mean, aclTensor* rstd, WS),
        layer_norm(input, normalizedShape, weight, bias, eps, out, mean, rstd))
FAKE_OP(LayerNormBackward, (const aclTensor* grad, const aclTensor* input, const aclIntArray* normalizedShape,
                            const aclTensor* mean, const aclTensor* rstd, const aclTensor* weight, const aclTensor* bias,
                            const aclBoolArray* mask, aclTensor* gradInput, aclTensor* gradWeight, aclTensor* gradBias,
                            WS),
        layer_norm_backward(grad, input, normalizedShape, mean, rstd, weight, bias, mask, gradInput, gradWeight,
                            gradBias))

// losses
FAKE_OP(MseLoss, (const aclTensor* self, const aclTensor* target, int64_t reduction, aclTensor* out, WS),
        W(out, at::mse_loss(T(self), T(target), reduction)))
FAKE_OP(MseLossBackward, (const aclTensor* grad, const aclTensor* self, const aclTensor* target, int64_t reduction,
                          aclTensor* gradInput, WS),
        W(gradInput, at::mse_loss_backward(T(grad), T(self), T(target), reduction)))

// activations and softmax
FAKE_OP(Softmax, (const aclTensor* self, int64_t dim, aclTensor* out, WS), W(out, at::_softmax(T(self), dim, false)))
FAKE_OP(SoftmaxBackward, (const aclTensor* grad, const aclTensor* output, int64_t dim, aclTensor* out, WS),
        W(out, at::_softmax_backward_data(T(grad), T(output), dim, T(grad).scalar_type())))
FAKE_OP(LogSoftmax, (const aclTensor* self, int64_t dim, aclTensor* out, WS),
        W(out, at::_log_softmax(T(self), dim, false)))
FAKE_OP(LogSoftmaxBackward, (const aclTensor* grad, const aclTensor* output, int64_t dim, aclTensor* out, WS),
        W(out, at::_log_softmax_backward_data(T(grad), T(output), dim, T(grad).scalar_type())))
FAKE_OP(Gelu, (const aclTensor* self, aclTensor* out, WS), W(out, at::gelu(T(self).to(at::kFloat), "tanh")))

}  // extern "C"
