// TEST-ONLY aclnn operators that torch_npu's ATen kernels call on npu tensors (copies, casts, fills, arithmetic,
// reductions, softmax, ...), part of the fake libopapi.so. Each wraps its host buffers as CPU tensors through
// their descriptors (storage base + offset, view sizes and strides, dtype) and runs the CPU ATen op, so nothing
// re-enters the npu dispatch. Outputs are written through their views (the real generic operators make inputs
// contiguous and ViewCopy the result into the output).
//
// Where a source audit says the real kernel computes something else than PyTorch, the model computes what the
// kernel computes (../shared/research/aclnn-forward-audit.md):
//   * aclnnGelu is the tanh form, whatever the caller meant (F1: torch_npu 2.13 sends aten::gelu there on an
//     Atlas A2/A3, `approximate` ignored);
//   * aclnnGeluV2 "none" is not erf: on A2/A3 the TBE kernel's fitted polynomial x / (1 + exp(p(x1^2) x1)),
//     x1 = min(x, 5.75), in fp32 (audit section 1.5), on Ascend950 0.5 x (1 + erf(x / sqrt 2)) with erf's
//     argument clipped to [-3.92, 3.92] (its Pade form is not modelled; the clip gives its left tail);
//     16-bit inputs are computed in fp32 and rounded once.
// An operator that is not defined here is missing from the fake libopapi.so: torch_npu's lookup fails and raises
// a RuntimeError naming it.
#include <ATen/ATen.h>

#include <functional>
#include <string>

#include "fake_opapi.h"

namespace fake {
namespace {

at::ScalarType scalar_type(int32_t acl) {
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
    default: throw std::runtime_error("fake opapi: unsupported aclDataType " + std::to_string(acl));
  }
}

// The CPU view of a descriptor (no copy).
at::Tensor T(const aclTensor* t) {
  const at::ScalarType st = scalar_type(t->dtype);
  char* base = static_cast<char*>(t->data) + t->offset * static_cast<int64_t>(c10::elementSize(st));
  return at::from_blob(base, t->sizes, t->strides, at::TensorOptions().dtype(st).device(at::kCPU));
}

at::Tensor T(const aclTensor* t, bool optional) { return optional && t == nullptr ? at::Tensor() : T(t); }

at::Scalar S(const aclScalar* s) {
  double d;
  int64_t i;
  bool b;
  switch (s->dtype) {
    case 11: std::memcpy(&d, s->value, 8); return d;
    case 0: { float f; std::memcpy(&f, s->value, 4); return static_cast<double>(f); }
    case 9: std::memcpy(&i, s->value, 8); return i;
    case 3: { int32_t v; std::memcpy(&v, s->value, 4); return static_cast<int64_t>(v); }
    case 12: std::memcpy(&b, s->value, 1); return b;
    case 17: { double c[2]; std::memcpy(c, s->value, 16); return c10::complex<double>(c[0], c[1]); }
    default: throw std::runtime_error("fake opapi: unsupported aclScalar dtype " + std::to_string(s->dtype));
  }
}

at::IntArrayRef A(const aclIntArray* a) { return a == nullptr ? at::IntArrayRef() : at::IntArrayRef(a->values); }

// Writes `value` into the output through its view.
void W(const aclTensor* out, const at::Tensor& value) { T(out).copy_(value); }

struct FnExec : Executor {
  std::string name;
  std::function<void()> fn;
  int run(void*) override {
    try {
      fn();
      return kSuccess;
    } catch (const std::exception& e) {
      return reject(kInner, name + ": " + e.what());
    }
  }
};

int queue(const char* name, std::function<void()> fn, uint64_t* workspace_size, aclOpExecutor** executor) {
  count(std::string(name) + "GetWorkspaceSize");
  if (workspace_size == nullptr || executor == nullptr) return kNullptr;
  auto* e = new FnExec;
  e->name = name;
  e->fn = std::move(fn);
  return finish_phase1(e, workspace_size, executor);
}

// The A2/A3 TBE GeluV2 "none" (audit 1.5): y = x / (1 + exp(p(x1^2) x1)), x1 = min(x, 5.75), Horner in fp32.
at::Tensor gelu_v2_a2_none(const at::Tensor& x32) {
  const at::Tensor x1 = at::clamp_max(x32, 5.75);
  const at::Tensor u = x1 * x1;
  const double c[] = {-0.3512339572e-8, 0.2645266170e-6, -0.7929488134e-5, 0.1106123840e-3,
                      0.6518995814e-4, -0.7266616915e-1, -0.1595769883e1};
  at::Tensor p = at::full_like(u, c[0]);
  for (int k = 1; k < 7; ++k) p = p * u + c[k];
  return x32 / (1 + at::exp(p * x1));
}

}  // namespace
}  // namespace fake

using namespace fake;

// One aclnn operator: its phase 1 records the descriptors and queues `body`, its phase 2 runs it.
#define FAKE_OP(NAME, PARAMS, ...)                                                                       \
  int aclnn##NAME##GetWorkspaceSize PARAMS {                                                              \
    return queue("aclnn" #NAME, [=]() { __VA_ARGS__; }, workspaceSize, executor);                        \
  }                                                                                                       \
  int aclnn##NAME(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {             \
    return phase2("aclnn" #NAME, workspace, workspaceSize, executor);                                     \
  }

#define WS uint64_t *workspaceSize, aclOpExecutor **executor

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
FAKE_OP(Mul, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::mul(T(self), T(other))))
FAKE_OP(Muls, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::mul(T(self), S(other))))
FAKE_OP(InplaceMul, (aclTensor* self, const aclTensor* other, WS), T(self).mul_(T(other)))
FAKE_OP(InplaceMuls, (aclTensor* self, const aclScalar* other, WS), T(self).mul_(S(other)))
FAKE_OP(Div, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::div(T(self), T(other))))
FAKE_OP(Divs, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::div(T(self), S(other))))
FAKE_OP(InplaceDiv, (aclTensor* self, const aclTensor* other, WS), T(self).div_(T(other)))
FAKE_OP(InplaceDivs, (aclTensor* self, const aclScalar* other, WS), T(self).div_(S(other)))
FAKE_OP(Neg, (const aclTensor* self, aclTensor* out, WS), W(out, at::neg(T(self))))
FAKE_OP(Abs, (const aclTensor* self, aclTensor* out, WS), W(out, at::abs(T(self))))
FAKE_OP(Exp, (const aclTensor* self, aclTensor* out, WS), W(out, at::exp(T(self))))
FAKE_OP(Log, (const aclTensor* self, aclTensor* out, WS), W(out, at::log(T(self))))
FAKE_OP(Sqrt, (const aclTensor* self, aclTensor* out, WS), W(out, at::sqrt(T(self))))
FAKE_OP(Rsqrt, (const aclTensor* self, aclTensor* out, WS), W(out, at::rsqrt(T(self))))
FAKE_OP(Tanh, (const aclTensor* self, aclTensor* out, WS), W(out, at::tanh(T(self))))
FAKE_OP(Erf, (const aclTensor* self, aclTensor* out, WS), W(out, at::erf(T(self))))
FAKE_OP(Sigmoid, (const aclTensor* self, aclTensor* out, WS), W(out, at::sigmoid(T(self))))
FAKE_OP(PowTensorScalar, (const aclTensor* self, const aclScalar* exponent, aclTensor* out, WS),
        W(out, at::pow(T(self), S(exponent))))
FAKE_OP(IsFinite, (const aclTensor* self, aclTensor* out, WS), W(out, at::isfinite(T(self))))
FAKE_OP(EqScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::eq(T(self), S(other))))
FAKE_OP(NeScalar, (const aclTensor* self, const aclScalar* other, aclTensor* out, WS), W(out, at::ne(T(self), S(other))))
FAKE_OP(EqTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::eq(T(self), T(other))))
FAKE_OP(NeTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS), W(out, at::ne(T(self), T(other))))
FAKE_OP(LogicalNot, (const aclTensor* self, aclTensor* out, WS), W(out, at::logical_not(T(self))))
FAKE_OP(BitwiseAndTensor, (const aclTensor* self, const aclTensor* other, aclTensor* out, WS),
        W(out, at::bitwise_and(T(self), T(other))))
FAKE_OP(SWhere, (const aclTensor* cond, const aclTensor* self, const aclTensor* other, aclTensor* out, WS),
        W(out, at::where(T(cond), T(self), T(other))))

// reductions and indexing
FAKE_OP(All, (const aclTensor* self, const aclIntArray* dim, bool keepdim, aclTensor* out, WS),
        W(out, at::all(T(self), A(dim), keepdim)))
FAKE_OP(Any, (const aclTensor* self, const aclIntArray* dim, bool keepdim, aclTensor* out, WS),
        W(out, at::any(T(self), A(dim), keepdim)))
FAKE_OP(ReduceSum, (const aclTensor* self, const aclIntArray* dim, bool keepdim, int32_t dtype, aclTensor* out, WS),
        W(out, at::sum(T(self), A(dim), keepdim, scalar_type(dtype))))
FAKE_OP(Mean, (const aclTensor* self, const aclIntArray* dim, bool keepdim, int32_t dtype, aclTensor* out, WS),
        W(out, at::mean(T(self), A(dim), keepdim, scalar_type(dtype))))
FAKE_OP(Max, (const aclTensor* self, aclTensor* out, WS), W(out, at::max(T(self))))
FAKE_OP(Min, (const aclTensor* self, aclTensor* out, WS), W(out, at::min(T(self))))
FAKE_OP(IndexSelect, (const aclTensor* self, int64_t dim, const aclTensor* index, aclTensor* out, WS),
        W(out, at::index_select(T(self), dim, T(index))))
FAKE_OP(Triu, (const aclTensor* self, int64_t diagonal, aclTensor* out, WS), W(out, at::triu(T(self), diagonal)))
FAKE_OP(Tril, (const aclTensor* self, int64_t diagonal, aclTensor* out, WS), W(out, at::tril(T(self), diagonal)))
FAKE_OP(InplaceTriu, (aclTensor* self, int64_t diagonal, WS), T(self).triu_(diagonal))

// activations and softmax
FAKE_OP(Softmax, (const aclTensor* self, int64_t dim, aclTensor* out, WS), W(out, at::_softmax(T(self), dim, false)))
FAKE_OP(SoftmaxBackward, (const aclTensor* grad, const aclTensor* output, int64_t dim, aclTensor* out, WS),
        W(out, at::_softmax_backward_data(T(grad), T(output), dim, T(grad).scalar_type())))
FAKE_OP(LogSoftmax, (const aclTensor* self, int64_t dim, aclTensor* out, WS),
        W(out, at::_log_softmax(T(self), dim, false)))
FAKE_OP(LogSoftmaxBackward, (const aclTensor* grad, const aclTensor* output, int64_t dim, aclTensor* out, WS),
        W(out, at::_log_softmax_backward_data(T(grad), T(output), dim, T(grad).scalar_type())))
FAKE_OP(Prelu, (const aclTensor* self, const aclTensor* weight, aclTensor* out, WS),
        W(out, at::prelu(T(self), T(weight).reshape({-1}))))
FAKE_OP(Logit, (const aclTensor* self, double eps, aclTensor* out, WS),
        W(out, at::logit(T(self).to(at::kFloat), eps < 0 ? c10::optional<double>() : c10::optional<double>(eps))))
// aclnnGelu: the tanh form only (see the header)
FAKE_OP(Gelu, (const aclTensor* self, aclTensor* out, WS), W(out, at::gelu(T(self).to(at::kFloat), "tanh")))
FAKE_OP(GeluV2, (const aclTensor* self, int64_t approximate, aclTensor* out, WS), {
  const at::Tensor x = T(self).to(at::kFloat);
  if (approximate == 1) {
    W(out, at::gelu(x, "tanh"));
  } else if (soc_950()) {
    W(out, 0.5 * x * (1 + at::erf(at::clamp(x * M_SQRT1_2, -3.92, 3.92))));
  } else {
    W(out, gelu_v2_a2_none(x));
  }
})

}  // extern "C"
